/* SPDX-License-Identifier: MIT */
/*
 * t/window.pml -- the write window between hosts without cache coherence
 * (marukv(7), COHERENCE MODEL), checked with spin by t/spin.sh.
 *
 * Two holders on two hosts: A (host 0), of the older generation, and B
 * (host 1), which has just written itself into the lease record.  Between
 * hosts nothing serialises their writes of the registry and the page
 * table, so each may write only in its critical section, and the property
 * is that they are never in it together (assert writing <= 1).
 *
 *  A, any number of times:  store win := open;  write win back;
 *                           invalidate rec;  load rec;
 *                           rec names A: critical section;
 *                           store win := closed;  write win back;
 *                           rec names B: A is fenced, and stops.
 *  B, once:                 store rec := B;  write rec back;
 *                           invalidate win;  load win, until it is closed;
 *                           critical section.
 *
 * Memory is what a host without coherence sees: the device holds each
 * word (rec: the lease record, win: A's node entry's window, on lines of
 * their own), and each host a cached copy of each, maybe stale, maybe
 * dirty.  A load reads the cache (filling it from the device if the line
 * is not cached), a store writes the cache, a write-back (CLFLUSH: done
 * before the next step) copies a dirty line to the device, an invalidation
 * writes back and drops it.  Both hosts start with both lines cached.  A
 * process of noise writes back or drops any host's line at any moment, as
 * caches evict on their own; it only makes data visible earlier.
 *
 * Not modelled: the judgement that voids the window of a holder dead by
 * its client heartbeat (a timing assumption, marukv(7)); holders of one
 * kernel (fenced there by LMDB's write mutex and flock(), which they share).
 *
 * Mutants, each of which must break the property:
 *   BROKEN_CHECK_FIRST   A reads rec before it announces its window
 *   BROKEN_NO_WB_WIN     A does not write its announcement back (also
 *                        CLFLUSHOPT's case: the write-back is only queued,
 *                        and lands at any later moment)
 *   BROKEN_NO_INVAL_REC  A loads rec from its cache without invalidating
 *   BROKEN_NO_WB_REC     B does not write the record back before reading
 *   BROKEN_NO_INVAL_WIN  B loads win from its cache without invalidating
 */

#define OPEN 1
#define CLOSED 0
#define IS_A 0
#define IS_B 1

byte rec_dev = IS_A;
bit win_dev = CLOSED;
/* per host: the cached value, whether the line is cached, whether dirty;
 * both hosts start with both lines cached, clean */
byte rec_c[2] = IS_A;
bit rec_v[2] = 1;
bit rec_d[2];
bit win_c[2] = CLOSED;
bit win_v[2] = 1;
bit win_d[2];

byte writing = 0;
bit a_fenced = 0;

inline wb_rec(h) { if :: rec_d[h] -> rec_dev = rec_c[h]; rec_d[h] = 0 :: else -> skip fi }
inline wb_win(h) { if :: win_d[h] -> win_dev = win_c[h]; win_d[h] = 0 :: else -> skip fi }
inline inval_rec(h) { wb_rec(h); rec_v[h] = 0 }
inline inval_win(h) { wb_win(h); win_v[h] = 0 }
inline load_rec(h, x) { if :: !rec_v[h] -> rec_c[h] = rec_dev; rec_v[h] = 1 :: else -> skip fi; x = rec_c[h] }
inline load_win(h, x) { if :: !win_v[h] -> win_c[h] = win_dev; win_v[h] = 1 :: else -> skip fi; x = win_c[h] }
inline store_rec(h, x) { rec_c[h] = x; rec_v[h] = 1; rec_d[h] = 1 }
inline store_win(h, x) { win_c[h] = x; win_v[h] = 1; win_d[h] = 1 }

inline critical() {
	atomic { writing++; assert(writing <= 1) };
	atomic { writing-- }
}

active proctype A()
{
	byte r;

	do
	:: 
#ifdef BROKEN_CHECK_FIRST
		atomic { inval_rec(0); load_rec(0, r) };
		atomic { store_win(0, OPEN) };
		atomic { wb_win(0) };
#else
		atomic { store_win(0, OPEN) };
#ifndef BROKEN_NO_WB_WIN
		atomic { wb_win(0) };
#endif
#ifndef BROKEN_NO_INVAL_REC
		atomic { inval_rec(0) };
#endif
		atomic { load_rec(0, r) };
#endif
		if
		:: r == IS_A -> critical()
		:: else -> skip
		fi;
		atomic { store_win(0, CLOSED) };
		atomic { wb_win(0) };
		if
		:: r != IS_A -> a_fenced = 1; break
		:: else -> skip
		fi
	od
}

active proctype B()
{
	bit w;

	atomic { store_rec(1, IS_B) };
#ifndef BROKEN_NO_WB_REC
	atomic { wb_rec(1) };
#endif
	do
	::
#ifndef BROKEN_NO_INVAL_WIN
		atomic { inval_win(1) };
#endif
		atomic { load_win(1, w) };
		if
		:: w == CLOSED -> break
		:: else -> skip
		fi
	od;
	critical()
}

/* caches evicting on their own: any line of any host, written back or dropped */
active proctype noise()
{
	do
	:: true -> atomic { wb_rec(0) }
	:: true -> atomic { wb_rec(1) }
	:: true -> atomic { wb_win(0) }
	:: true -> atomic { wb_win(1) }
	:: true -> atomic { inval_rec(0) }
	:: true -> atomic { inval_rec(1) }
	:: true -> atomic { inval_win(0) }
	:: true -> atomic { inval_win(1) }
	:: break
	od
}
