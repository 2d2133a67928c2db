/* SPDX-License-Identifier: MIT */
/*
 * t/split.pml -- taking a free node entry between hosts without cache
 * coherence or atomic operations (marukv(7), COHERENCE MODEL; nodes.c
 * node_split()), checked with spin by t/spin.sh.
 *
 * N nodes, each on a host of its own, go at once through the splitter of
 * one free entry (Moir and Anderson):
 *
 *   invalidate door; load door: closed: lose;
 *   store race := me;  write race back;
 *   invalidate door; load door: closed: lose;
 *   store door := me;  write door back;
 *   invalidate race; load race: me: win, else lose.
 *
 * The property: at most one node wins (assert won <= 1); and a node that
 * goes through alone wins (the run with N=1).  Memory is as in
 * t/window.pml: the device holds each word, on a line of its own, each
 * host a cached copy that may be stale or dirty; a load fills the cache
 * from the device if the line is not cached, a store writes the cache, a
 * write-back (CLFLUSH, done before the next step) copies a dirty line to
 * the device, an invalidation writes back and drops it, and a process of
 * noise writes back or drops any line at any moment.  Every host starts
 * with both lines cached, clean and free.
 *
 * Not modelled: the holder freeing an entry whose door closed on no
 * winner (after a client timeout: a timing assumption, marukv(7)).
 *
 * Mutants, each of which must break the property:
 *   BROKEN_NO_DOOR2      no second look at the door
 *   BROKEN_NO_RACE       no last look at race: a node that closed the door wins
 *   BROKEN_NO_WB_RACE    race is not written back before the door is read
 *   BROKEN_NO_INVAL_RACE the last look at race reads the cache
 */

#ifndef N
#define N 3
#endif

byte race_dev = 0;
byte door_dev = 0;
byte race_c[N];
bit race_v[N] = 1;
bit race_d[N];
byte door_c[N];
bit door_v[N] = 1;
bit door_d[N];

byte won = 0;

inline wb_race(h) { if :: race_d[h] -> race_dev = race_c[h]; race_d[h] = 0 :: else -> skip fi }
inline wb_door(h) { if :: door_d[h] -> door_dev = door_c[h]; door_d[h] = 0 :: else -> skip fi }
inline inval_race(h) { wb_race(h); race_v[h] = 0 }
inline inval_door(h) { wb_door(h); door_v[h] = 0 }
inline load_race(h, x) { if :: !race_v[h] -> race_c[h] = race_dev; race_v[h] = 1 :: else -> skip fi; x = race_c[h] }
inline load_door(h, x) { if :: !door_v[h] -> door_c[h] = door_dev; door_v[h] = 1 :: else -> skip fi; x = door_c[h] }
inline store_race(h, x) { race_c[h] = x; race_v[h] = 1; race_d[h] = 1 }
inline store_door(h, x) { door_c[h] = x; door_v[h] = 1; door_d[h] = 1 }

proctype node(byte h)
{
	byte me = h + 1, x;

	atomic { inval_door(h); load_door(h, x) };
	if :: x != 0 -> goto out :: else -> skip fi;
	atomic { store_race(h, me) };
#ifndef BROKEN_NO_WB_RACE
	atomic { wb_race(h) };
#endif
#ifndef BROKEN_NO_DOOR2
	atomic { inval_door(h); load_door(h, x) };
	if :: x != 0 -> goto out :: else -> skip fi;
#endif
	atomic { store_door(h, me) };
	atomic { wb_door(h) };
#ifndef BROKEN_NO_RACE
#ifndef BROKEN_NO_INVAL_RACE
	atomic { inval_race(h) };
#endif
	atomic { load_race(h, x) };
	if :: x != me -> goto out :: else -> skip fi;
#endif
	atomic { won++; assert(won <= 1) };
#if N == 1
	goto done;
#endif
out:
#if N == 1
	assert(false);
done:
#endif
	skip
}

/* caches evicting on their own: any line of any host, written back or dropped */
proctype noise()
{
	byte h;

	do
	:: h < N -> atomic { wb_race(h) }
	:: h < N -> atomic { wb_door(h) }
	:: h < N -> atomic { inval_race(h) }
	:: h < N -> atomic { inval_door(h) }
	:: h < N - 1 -> h++
	:: h > 0 -> h--
	:: break
	od
}

init
{
	byte i;

	atomic {
		for (i : 0 .. N - 1) { run node(i) };
		run noise()
	}
}
