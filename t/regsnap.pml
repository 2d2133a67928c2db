/* SPDX-License-Identifier: MIT */
/*
 * t/regsnap.pml -- registry snapshots between hosts without cache
 * coherence (marukv(7), REGISTRY SNAPSHOTS BETWEEN HOSTS; src/regsnap.c),
 * checked with spin by t/spin.sh.
 *
 * Two readers (hosts 0 and 1) read snapshots of the registry while a lease
 * holder (host 2) commits; at any moment the holder may be replaced by a new
 * one (host 3), which starts with nothing but the newest snapshot.  LMDB on
 * a holder's host sees only that host's readers: here, the holder's own
 * read txns (held[], oldest first).  Whenever a holder writes, LMDB may
 * reuse the pages of every snapshot older than the oldest of them
 * (reused_below: conservative, LMDB keeps one more).  The property: a
 * reader never reads a snapshot whose pages may have been reused, from
 * the moment it takes it to the moment it is done (assert in read()).
 *
 *  reader, publishing from nothing:  invalidate and load newest (T);
 *      store snap := T; write it back; invalidate and load newest again:
 *      not T, start over; T: read T.
 *  reader, published and checked before, idle:  load newest fresh (S);
 *      snap < S: store snap := S and write it back (a rise needs no
 *      check); read S.
 *  reader, idle, at any moment (the service thread): snap := 0, written
 *      back; the next read publishes from nothing.
 *  holder, before each write:  invalidate and load every reader's snap;
 *      drop held[0] while held[1] <= every nonzero snap; write (LMDB
 *      reuses below held[0]); store newest := newest + 1 and write it
 *      back; take a read txn at it (held[] gets it).
 *  new holder, first:  invalidate and load newest (N); held = { N }; wait
 *      until every reader's snap is 0 or >= N, each loaded fresh; then as
 *      the holder.
 *
 * Memory as in t/window.pml: the device holds each word, each host a
 * cached copy, maybe stale, maybe dirty; a load reads the cache, filling it
 * if the line is not cached; a store writes the cache; a write-back copies
 * a dirty line to the device; an invalidation writes back and drops; each
 * of these is one step, as a line moves whole.  A
 * process of noise writes back or drops any line at any moment (NOISE times).
 *
 * Not modelled: one reader's several threads (they share one snap, the
 * oldest of theirs, kept by a count per snapshot); a reader judged dead by
 * its heartbeat (its snap then counts no more: a timing assumption,
 * marukv(7)); the old holder writing after it was replaced (the write
 * window, t/window.pml, excludes it).
 *
 * Mutants, each of which must break the property:
 *   BROKEN_NO_RECHECK      a reader publishing from nothing does not
 *                          check the newest snapshot again
 *   BROKEN_NO_WB_SNAP      a reader does not write its snap back (also
 *                          CLFLUSHOPT's case: it lands at any later time)
 *   BROKEN_NO_INVAL_SNAP   the holder reads the snaps from its cache
 *   BROKEN_NO_INVAL_NEWEST a reader's check reads newest from its cache
 *   BROKEN_NO_WAIT         a new holder writes without waiting for readers
 */

#ifndef R
#define R 2          /* readers: hosts 0 .. R-1 */
#endif
#define HA R         /* the first holder's host */
#define HB (R + 1)   /* the new holder's host */
#define NH (R + 2)
#ifndef MAXTXN
#define MAXTXN 3     /* commits: newest runs 1 .. MAXTXN */
#endif
#define READS 2      /* reads per reader */
#ifndef NOISE
#define NOISE 2      /* spontaneous write-backs and drops */
#endif

byte newest_dev = 1;
byte newest_c[NH] = 1;
bit newest_v[NH] = 1;
bit newest_d[NH];
/* reader r's snap: on the device, and cached by host h at [h * R + r] */
byte snap_dev[R];
byte snap_c[NH * R];
bit snap_v[NH * R];
bit snap_d[NH * R];

byte reused_below = 0;  /* snapshots below it may have lost pages */
bit replaced = 0;       /* the first holder is gone; the new one runs */

inline wb_newest(nh) { atomic { if :: newest_d[nh] -> newest_dev = newest_c[nh]; newest_d[nh] = 0 :: else -> skip fi } }
inline inval_newest(nh) { atomic { wb_newest(nh); newest_v[nh] = 0 } }
inline load_newest(nh, nx) {
	atomic {
		if :: !newest_v[nh] -> newest_c[nh] = newest_dev; newest_v[nh] = 1 :: else -> skip fi;
		nx = newest_c[nh]
	}
}
inline store_newest(nh, nx) { atomic { newest_c[nh] = nx; newest_v[nh] = 1; newest_d[nh] = 1 } }

inline wb_snap(sh, sr) {
	atomic { if :: snap_d[sh * R + sr] -> snap_dev[sr] = snap_c[sh * R + sr]; snap_d[sh * R + sr] = 0 :: else -> skip fi }
}
inline inval_snap(sh, sr) { atomic { wb_snap(sh, sr); snap_v[sh * R + sr] = 0 } }
inline load_snap(sh, sr, sx) {
	atomic {
		if :: !snap_v[sh * R + sr] -> snap_c[sh * R + sr] = snap_dev[sr]; snap_v[sh * R + sr] = 1 :: else -> skip fi;
		sx = snap_c[sh * R + sr]
	}
}
inline store_snap(sh, sr, sx) { atomic { snap_c[sh * R + sr] = sx; snap_v[sh * R + sr] = 1; snap_d[sh * R + sr] = 1 } }

/* the reader's write-back of its snap, or none in the mutant */
inline publish(pr, px) {
	store_snap(pr, pr, px);
#ifndef BROKEN_NO_WB_SNAP
	wb_snap(pr, pr)
#else
	skip
#endif
}

/* Reading snapshot s: intact when taken, and still when done. */
inline read(s) {
	assert(s >= reused_below);
	assert(s >= reused_below)
}

proctype reader(byte r)
{
	byte t, n, pub = 0, reads = 0;
	bit ok = 0;

	do
	:: reads < READS ->
		if
		:: !ok ->
			inval_newest(r);
			load_newest(r, t);
			publish(r, t);
			pub = t;
#ifndef BROKEN_NO_INVAL_NEWEST
			inval_newest(r);
#endif
			load_newest(r, n);
#ifdef BROKEN_NO_RECHECK
			n = t;
#endif
			if
			:: n == t -> ok = 1; read(t); reads++
			:: else -> skip
			fi
		:: ok ->
			inval_newest(r);
			load_newest(r, t);
			if
			:: pub < t -> publish(r, t); pub = t
			:: else -> skip
			fi;
			read(t);
			reads++
		fi
	:: ok ->
		/* idle: the service thread clears the snap */
		publish(r, 0);
		pub = 0;
		ok = 0
	:: reads == READS -> break
	od
}

byte held[MAXTXN];
byte nheld;

/* The oldest nonzero snap, as host h reads them, into m (255: none). */
inline oldest(oh, om, oi, ox) {
	om = 255;
	oi = 0;
	do
	:: oi < R ->
#ifndef BROKEN_NO_INVAL_SNAP
		inval_snap(oh, oi);
#endif
		load_snap(oh, oi, ox);
		if :: ox != 0 && ox < om -> om = ox :: else -> skip fi;
		oi++
	:: else -> break
	od
}

/*
 * The holder on host h: the first (HA) from the start, until it dies
 * between or inside its writes; then the new one (HB).
 */
proctype holder(byte h)
{
	byte n, m, i, x, k;

	if
	:: h == HB -> replaced
	:: else -> skip
	fi;
	inval_newest(h);
	load_newest(h, n);
	held[0] = n;
	nheld = 1;
#ifndef BROKEN_NO_WAIT
	if
	:: h == HB ->
		do
		:: oldest(h, m, i, x); if :: m >= n -> break :: else -> skip fi
		od
	:: else -> skip
	fi;
#endif
	do
	:: h == HA -> replaced = 1; break
	:: n >= MAXTXN -> break
	:: n < MAXTXN ->
		oldest(h, m, i, x);
		do
		:: nheld > 1 && held[1] <= m ->
			k = 0;
			do
			:: k + 1 < nheld -> held[k] = held[k + 1]; k++
			:: else -> break
			od;
			nheld--
		:: else -> break
		od;
		/* the write txn: LMDB may reuse the pages of snapshots below held[0] */
		if :: reused_below < held[0] -> reused_below = held[0] :: else -> skip fi;
		if
		:: h == HA -> replaced = 1; break   /* killed inside its commit */
		:: true
		fi;
		load_newest(h, n);
		n++;
		store_newest(h, n);
		wb_newest(h);
		held[nheld] = n;
		nheld++
	od
}

active proctype noise()
{
	byte h, r, k;

	do
	:: k < NOISE ->
		k++;
		h = 0;
		do :: h < NH - 1 -> h++ :: break od;
		r = 0;
		do :: r < R - 1 -> r++ :: break od;
		if
		:: true; wb_newest(h)
		:: true; inval_newest(h)
		:: true; wb_snap(h, r)
		:: true; inval_snap(h, r)
		fi
	:: break
	od
}

init
{
	byte r;

	atomic {
		r = 0;
		do :: r < R -> run reader(r); r++ :: else -> break od;
		run holder(HA);
		run holder(HB)
	}
}
