/* SPDX-License-Identifier: MIT */
/*
 * t/wlog.pml -- a record of the registry's page log read on one host while
 * the holder on another rewrites it (marukv(7), REGISTRY SNAPSHOTS BETWEEN
 * HOSTS; src/regwlog.c), checked with spin by t/spin.sh.
 *
 * Record slot k holds the pages of commit A; the holder, K commits later,
 * rewrites it for commit B:
 *
 *   store txn := 0;  write txn back;
 *   store ranges := RB;  write ranges back;
 *   store txn := B;  write txn back.
 *
 * A reader that wants commit A's pages, at the same time:
 *
 *   invalidate txn; load txn: not A: give up (drop the whole registry);
 *   invalidate ranges; load ranges;
 *   invalidate txn; load txn: not A: give up;
 *   use the ranges.
 *
 * The property: a reader that uses ranges uses A's (assert r == RA).  Its
 * host may still cache the ranges line of the commit K before A (R0).
 * Memory is as in t/split.pml: the device holds each line, each host a
 * copy that may be stale or dirty; an invalidation writes back and drops,
 * a write-back (done before the next step) copies a dirty line to the
 * device, and a process of noise writes back or drops any line of either
 * host at any moment.
 *
 * Mutants, each of which must break the property:
 *   BROKEN_NO_WB_ZERO     txn := 0 not written back before the ranges
 *   BROKEN_NO_INVAL_RANGES the ranges read from the reader's cache
 *   BROKEN_NO_RECHECK     no second look at txn
 *   BROKEN_NO_INVAL_AGAIN the second look at txn reads the cache
 */

#define A 1
#define B 2
#define RA 1
#define RB 2
#define R0 3

/* line 0: txn; line 1: ranges; host 0 the holder's, host 1 the reader's */
byte dev[2];
byte c[4];
bit v[4];
bit d[4];

#define L(h, l) (2 * (h) + (l))

inline wb(h, l) { if :: d[L(h, l)] -> dev[l] = c[L(h, l)]; d[L(h, l)] = 0 :: else -> skip fi }
inline inval(h, l) { wb(h, l); v[L(h, l)] = 0 }
inline load(h, l, x) {
	if :: !v[L(h, l)] -> c[L(h, l)] = dev[l]; v[L(h, l)] = 1 :: else -> skip fi;
	x = c[L(h, l)]
}
inline store(h, l, x) { c[L(h, l)] = x; v[L(h, l)] = 1; d[L(h, l)] = 1 }

proctype holder()
{
	atomic { store(0, 0, 0) };
#ifndef BROKEN_NO_WB_ZERO
	atomic { wb(0, 0) };
#endif
	atomic { store(0, 1, RB) };
	atomic { wb(0, 1) };
	atomic { store(0, 0, B) };
	atomic { wb(0, 0) }
}

proctype reader()
{
	byte t, r;

	atomic { inval(1, 0); load(1, 0, t) };
	if :: t != A -> goto out :: else -> skip fi;
#ifndef BROKEN_NO_INVAL_RANGES
	atomic { inval(1, 1) };
#endif
	atomic { load(1, 1, r) };
#ifndef BROKEN_NO_RECHECK
#ifndef BROKEN_NO_INVAL_AGAIN
	atomic { inval(1, 0) };
#endif
	atomic { load(1, 0, t) };
	if :: t != A -> goto out :: else -> skip fi;
#endif
	assert(r == RA);
out:
	skip
}

/* caches evicting on their own: any line of either host, written back or dropped */
proctype noise()
{
	do
	:: skip -> atomic { wb(0, 0) }
	:: skip -> atomic { wb(0, 1) }
	:: skip -> atomic { inval(0, 0) }
	:: skip -> atomic { inval(0, 1) }
	:: skip -> atomic { inval(1, 0) }
	:: skip -> atomic { inval(1, 1) }
	:: break
	od
}

init
{
	atomic {
		dev[0] = A; dev[1] = RA;
		/* the holder's host caches the record as it wrote it */
		c[L(0, 0)] = A; v[L(0, 0)] = 1;
		c[L(0, 1)] = RA; v[L(0, 1)] = 1;
		/* the reader's may cache the txn line, and ranges from K commits before */
		c[L(1, 0)] = A; v[L(1, 0)] = 1;
		c[L(1, 1)] = R0; v[L(1, 1)] = 1;
		run holder();
		run reader();
		run noise()
	}
}
