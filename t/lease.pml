/*
 * SPDX-License-Identifier: MIT
 *
 * t/lease.pml -- spin model of marukv's single-writer lease acquisition
 * (DESIGN.md, "Writes go through the lease holder").  Checked by t/spin.sh.
 *
 * Mapping to the C protocol
 * -------------------------
 *  proctype node(me)   The one process of node `me` that runs the protocol
 *                      (processes of a node serialise on the node-local
 *                      flock, so one process per node is modelled).
 *  choosing[], number[]
 *                      The nodes' single-writer bakery entries in `super`.
 *                      Every load and store is its own step; no atomic
 *                      read-modify-write between nodes.  A ticket is
 *                      max(number[])+1; tickets are unbounded in C, here a
 *                      doorway that would exceed NMAX blocks (model limit:
 *                      that path is cut, never wrongly accepted).
 *  beat[]              The per-node heartbeat is abstracted by status[]: a
 *                      node may judge "beat[j] unchanged for a whole lease
 *                      period" (j is dead) only while status[j] != RUN (the
 *                      timing assumption: a running node advances its beat
 *                      more often than once a period).
 *  status[]            RUN, PAUSED (SIGSTOP; process env may SIGCONT it later)
 *                      or CRASHED (stopped forever).  The `provided` clause
 *                      of node() lets a node take steps only while RUN, so a
 *                      pause or crash falls between any two steps.  At most
 *                      STOPS nodes are stopped at a time, at most CRASHES
 *                      for ever; pauses only if PAUSES.  Runs with PAUSES
 *                      use CRASHES=0: a pause that never ends is a crash
 *                      (pan -E: blocked end states are not errors).
 *  lease_holder, lease_gen
 *                      The lease record (holder node, generation); written
 *                      only inside the bakery critical section.
 *  hb[i]               The holder's heartbeat counter (in the holder's node
 *                      entry, beside the lease record) as node i sees
 *                      it: 0 not watching, 1 "still the value i read when it
 *                      observed the lease", 2 changed since.  A holder
 *                      advancing the heartbeat turns every 1 into 2.  (Exact
 *                      for an unbounded counter, no wrap-around, and it keeps
 *                      the state space small.)  "Heartbeat unchanged for a
 *                      period" (lease expired) is possible only while no
 *                      RUNning node holds the record's generation (LIVE_HOLDER:
 *                      only such a holder beats, see hold).
 *  meta_gen, meta_node The fencing value in the registry's `meta`.  A commit
 *                      is one atomic step (LMDB's write lock serialises them):
 *                      the fencing token is the pair (generation, holder),
 *                      compared lexicographically; it aborts if meta's is
 *                      above, else stores its own (fence() in src/commit.c,
 *                      where the holder part is node, client slot and the
 *                      slot's incarnation).  -DGEN_ONLY_FENCE models the
 *                      design brief's generation-only fence (meta_gen > mine
 *                      aborts), which this model shows is not enough.
 *
 * Node life cycle (labels in node(); src/lease.c, src/commit.c):
 *  idle     observe the lease: free (holder none) or expired; remember its
 *           generation g and heartbeat; then the bakery doorway and wait.
 *           Waiting on j: choosing[j], or number[j] != 0 and
 *           (number[j], j) < (number[me], me); once j is dead it is
 *           skipped altogether (as bakery_enter() does).
 *  CS       re-check lease_gen == g and heartbeat unchanged (two loads);
 *           if so store lease_gen = g+1 and lease_holder = me (two stores,
 *           either order), and the node holds generation g+1 (held[me]).
 *           Leave the CS: number[me] = 0.  Only generations < GMAX are
 *           contended for (model limit).
 *  hold     repeatedly, in any order:
 *           commit (mkv_commit): check lease_gen == mine (mkv_lease_valid),
 *             else drop; then one atomic LMDB txn with the fence: fenced ->
 *             drop, else store meta;
 *           beat (mkv_lease_beat): check lease_gen == mine, else drop; then
 *             advance the lease heartbeat;
 *           drop (mkv_lease_drop, renewal overdue: time-based self-fencing,
 *             any time): stop holding, leave the record as it is;
 *           release (mkv_lease_release): stop holding, then
 *  release  bakery again; in the CS: if lease_gen == mine, holder = none.
 *  A node that drops goes back to idle and may contend again.
 *
 * Not modelled: several processes of one node (the flock is released after
 * acquisition in C; here one process per node), the node-local liveness
 * test (holder_dead_here), and the C re-check's extra conditions (holder
 * unchanged, still expired), which only remove behaviours.
 *
 * Bounds: GMAX, NMAX as above; -DN=2 or 3.  Run, e.g. (see t/spin.sh):
 *   spin -DN=2 -DPAUSES=1 -DCRASHES=0 -a lease.pml
 *   cc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c && ./pan -E -m20000
 *
 * Properties (assertions; ghost variables are marked "ghost"):
 *  P1 mutual exclusion of the CS among nodes not deemed dead: when a node
 *     enters, every other node in the CS, or the entering node itself, was
 *     skipped as dead in its current round.  With no pauses this is plain
 *     mutual exclusion among running nodes.
 *  P2 no two acquisitions of the same generation (bit array acquired[]).
 *     Holds with crashes only; it is NOT a property of the protocol with
 *     pauses (a node paused in the doorway or the CS, deemed dead, resumes
 *     and finishes its stale acquisition: the P4 counterexample below), so
 *     it is checked only if !PAUSES.
 *  P3 storage fencing: a successful commit never has a generation below that
 *     of an earlier successful commit (ghost hi_gen).
 *  P4 no split brain in storage: once a tenure T has committed and another
 *     tenure commits, T never commits again (ghost committed[], superseded[]).
 *     The generation-only fence fails this with pauses: node a passes the
 *     re-check and is paused before its stores; node b deems it dead, takes
 *     generation g+1; a resumes and also writes g+1; both are "valid"
 *     (lease_gen == mine) and meta's check (stored > mine) stops neither,
 *     so their commits interleave (-DGEN_ONLY_FENCE).  The token fence
 *     passes.
 *
 * Mutants (must yield a counterexample):
 *  BROKEN_NO_CHOOSING  the wait on choosing[j] is skipped: P1 fails.
 *  BROKEN_NO_RECHECK   no re-check in the CS: P2 fails (no crash needed).
 *  BROKEN_NO_FENCE     commit does not compare generations: P3 fails
 *                      (needs PAUSES: a paused holder resumes and commits;
 *                      with -DSKIP_P4, so that P4 does not fire first).
 */

#ifndef N
#define N 2
#endif
#ifndef GMAX
#define GMAX 3		/* highest generation acquired in the model */
#endif
#ifndef NMAX
#define NMAX 4		/* highest bakery ticket */
#endif
#ifndef CRASHES
#define CRASHES 1	/* nodes that may crash */
#endif
#ifndef PAUSES
#define PAUSES 0	/* 1: nodes may be paused and resumed */
#endif
#ifndef STOPS
#define STOPS 1		/* nodes stopped (crashed or paused) at a time */
#endif

#define NONE 255
#define RUN 0
#define PAUSED 1
#define CRASHED 2

byte choosing[N];
byte number[N];
byte status[N];			/* stands for beat[] (see above) */
byte lease_holder = NONE;
byte lease_gen = 0;
byte hb[N];			/* lease heartbeat as seen, see above */
byte meta_gen = 0;
byte meta_node = 0;

/* ghost */
bit incs[N];			/* in the bakery critical section */
bit deemed[N];			/* skipped as dead in its current round */
byte held[N];			/* generation it holds, 0: none */
bit committed[N];		/* has committed in its current tenure */
bit superseded[N];		/* another tenure committed after that */
#if !PAUSES
bit acquired[GMAX + 1];
#endif
byte hi_gen = 0;

#if N == 2
#define LIVE(k) (held[k] != 0 && held[k] == lease_gen && status[k] == RUN)
#define LIVE_HOLDER (LIVE(0) || LIVE(1))
#define NCRASHED ((status[0] == CRASHED) + (status[1] == CRASHED))
#define NSTOPPED ((status[0] != RUN) + (status[1] != RUN))
#elif N == 3
#define LIVE(k) (held[k] != 0 && held[k] == lease_gen && status[k] == RUN)
#define LIVE_HOLDER (LIVE(0) || LIVE(1) || LIVE(2))
#define NCRASHED ((status[0] == CRASHED) + (status[1] == CRASHED) + \
		  (status[2] == CRASHED))
#define NSTOPPED ((status[0] != RUN) + (status[1] != RUN) + (status[2] != RUN))
#else
#error "N must be 2 or 3"
#endif

/* P1, for node me entering the CS and another node k */
#define ME_OK(k) (k == me || !incs[k] || deemed[k] || deemed[me])

#ifdef GEN_ONLY_FENCE
#define FENCED(g) (meta_gen > g)
#else
#define FENCED(g) (meta_gen > g || (meta_gen == g && meta_node > me))
#endif

/* The holder stops holding (mkv_lease_drop): record left as it is. */
#define DROP held[me] = 0; committed[me] = 0; superseded[me] = 0; mine = 0

/* j = the first node other than me; NEXT(j): the next one (N when done) */
#define FIRST (me == 0 -> 1 : 0)
#define NEXT(j) j++; if :: j == me -> j++ :: else fi
/* (number[j], j) < (number[me], me) is false: no need to wait on j */
#define NOT_AHEAD(j) (number[j] == 0 || number[j] > number[me] || \
		      (number[j] == number[me] && j > me))

/*
 * Lamport's bakery entry for node me.  One shared load or store per step
 * (the local bookkeeping rides along).  Waiting on j: j may be skipped when
 * it is stopped ("beat[j] unchanged for a period").
 */
inline bakery_enter()
{
	atomic { choosing[me] = 1; deemed[me] = 0; j = FIRST }
	do				/* t = max(number[]) */
	:: atomic { j < N ->
		if
		:: number[j] > t -> t = number[j]
		:: else
		fi;
		NEXT(j)
	   }
	:: j >= N -> break
	od;
	atomic { t < NMAX -> number[me] = t + 1; t = 0 } /* NMAX: model limit */
	atomic { choosing[me] = 0; j = FIRST }
	do		/* wait on j, or skip it altogether once it is dead */
	:: j < N ->
		if
#ifndef BROKEN_NO_CHOOSING
		:: choosing[j] == 0 ->
#else
		:: true ->
#endif
			if
			:: atomic { NOT_AHEAD(j) -> NEXT(j) }
			:: atomic { !NOT_AHEAD(j) && status[j] != RUN ->
				deemed[j] = 1; NEXT(j) }
			fi
		:: atomic { choosing[j] != 0 && status[j] != RUN ->
			deemed[j] = 1; NEXT(j) }
		fi
	:: j >= N -> break
	od;
	atomic {
		incs[me] = 1;
		assert(ME_OK(0) && ME_OK(1)
#if N == 3
		       && ME_OK(2)
#endif
		      );		/* P1 */
		j = 0
	}
}

inline bakery_leave()
{
	d_step { number[me] = 0; incs[me] = 0; deemed[me] = 0 }
}

proctype node(byte me) provided (status[me] == RUN)
{
	byte j, t;
	byte g;		/* lease generation seen when observing */
	byte mine;	/* generation held */

idle:
	/* Observe the lease: free, or expired (its heartbeat unchanged for a
	 * period, which needs every holder stopped).  Remember its generation
	 * and its heartbeat (hb[me] = 1). */
	atomic {
		lease_gen < GMAX && (lease_holder == NONE || !LIVE_HOLDER) ->
		g = lease_gen; hb[me] = 1
	}
	bakery_enter();
#ifndef BROKEN_NO_RECHECK
	/* re-check: same generation, same heartbeat */
	if
	:: atomic { lease_gen != g -> g = 0; hb[me] = 0 }
		goto lost
	:: lease_gen == g
	fi;
	if
	:: atomic { hb[me] != 1 -> g = 0; hb[me] = 0 }
		goto lost
	:: atomic { hb[me] == 1 -> hb[me] = 0 }
	fi;
#else
	hb[me] = 0;
#endif
	if	/* two stores, in either order */
	:: lease_gen = g + 1; lease_holder = me
	:: lease_holder = me; lease_gen = g + 1
	fi;
	d_step {
#if !PAUSES
		assert(!acquired[g + 1]);	/* P2 */
		acquired[g + 1] = 1;
#endif
		mine = g + 1;
		held[me] = mine;
		g = 0;
		committed[me] = 0;
		superseded[me] = 0
	}
	bakery_leave();
	goto hold;
lost:
	bakery_leave();
	goto idle;

hold:
	if
	:: /* mkv_commit: the lease still valid (own generation in the
	    * record), then one LMDB write transaction */
		if
		:: lease_gen == mine
		:: atomic { lease_gen != mine -> DROP }
			goto idle
		fi;
		if
		:: atomic {
#ifndef BROKEN_NO_FENCE
			!FENCED(mine) ->
#endif
			assert(mine >= hi_gen);		/* P3 */
#ifndef SKIP_P4
			assert(!superseded[me]);	/* P4 */
#endif
			hi_gen = mine;
			meta_gen = mine;
			meta_node = me;
			j = 0;
			do
			:: j < N ->
				if
				:: j != me && held[j] && committed[j] ->
					superseded[j] = 1
				:: else
				fi;
				j++
			:: else -> break
			od;
			j = 0;
			committed[me] = 1
		   }
			goto hold
#ifndef BROKEN_NO_FENCE
		:: atomic { FENCED(mine) -> DROP }	/* fenced: abort */
			goto idle
#endif
		fi
	:: /* mkv_lease_beat: the lease still valid, then advance its
	    * heartbeat (every watcher sees it move) */
		if
		:: lease_gen == mine
		:: atomic { lease_gen != mine -> DROP }
			goto idle
		fi;
		d_step {
			j = 0;
			do
			:: j < N ->
				if
				:: hb[j] == 1 -> hb[j] = 2
				:: else
				fi;
				j++
			:: else -> break
			od;
			j = 0
		}
		goto hold
	:: atomic { DROP }	/* renewal overdue: self-fencing by time */
		goto idle
	:: d_step {	/* release: stop writing, clear the record if ours */
		held[me] = 0; committed[me] = 0; superseded[me] = 0
	   }
		goto release
	fi;

release:
	bakery_enter();
	if
	:: lease_gen == mine -> lease_holder = NONE
	:: else
	fi;
	mine = 0;
	bakery_leave();
	goto idle
}

/* The environment: crashes (stop forever) and pauses (SIGSTOP, later
 * SIGCONT).  At most STOPS nodes are stopped (crashed or paused) at a time,
 * at most CRASHES of them for ever. */
active proctype env()
{
	byte i;

	do
	:: atomic { NSTOPPED < STOPS && NCRASHED < CRASHES ->
		if
		:: status[0] == RUN -> i = 0
		:: status[1] == RUN -> i = 1
#if N == 3
		:: status[2] == RUN -> i = 2
#endif
		fi;
		status[i] = CRASHED; i = 0
	   }
#if PAUSES
	:: atomic { NSTOPPED < STOPS ->
		if
		:: status[0] == RUN -> i = 0
		:: status[1] == RUN -> i = 1
#if N == 3
		:: status[2] == RUN -> i = 2
#endif
		fi;
		status[i] = PAUSED; i = 0
	   }
	:: atomic {
		if
		:: status[0] == PAUSED -> i = 0
		:: status[1] == PAUSED -> i = 1
#if N == 3
		:: status[2] == PAUSED -> i = 2
#endif
		fi;
		status[i] = RUN; i = 0
	   }
#endif
	od
}

init
{
	byte k = 0;

	atomic {
		do
		:: k < N -> run node(k); k++
		:: else -> break
		od
	}
}
