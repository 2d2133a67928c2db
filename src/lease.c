/* SPDX-License-Identifier: MIT */
/*
 * lease.c -- the single-writer lease: the node-local lock, Lamport's
 * bakery between nodes (over the node table, nodes.c), acquisition,
 * heartbeat, expiry, release.
 *
 * Two tiers.  Processes of one node serialise on a byte-range lock of
 * super named by their node's entry (layout.h), for as long as they run
 * the bakery (not for as long as they hold the lease: a stopped holder
 * must not keep its own node from taking over); the one holding it
 * represents the node.
 * Representatives of different nodes run Lamport's bakery over their
 * entries in the node table, using only loads, stores and flushes of
 * single-writer words: no atomic instruction has to work between hosts.
 * The bakery's critical section only changes the lease record: a
 * contender enters it after seeing the lease free, or its heartbeat
 * unchanged for a whole lease period by its own clock, re-checks inside
 * that nothing moved, and writes itself in with generation + 1.
 *
 * A node that stops inside the bakery would block the others forever, so
 * a waiter skips a node whose beat stood still for a lease period.  The
 * holder stops writing when it could not renew within half a period
 * (self-fencing), and every registry commit checks the holder's token
 * against the one stored in the registry (mkv_reg_fence()), which is what
 * protects the registry from a holder that was paused past expiry.
 *
 * The token is the pair (generation, holder identity), compared in that
 * order.  Generations alone are not enough: a contender paused after its
 * re-check inside the critical section, and skipped as dead meanwhile,
 * writes the same generation as the node that went ahead (spin finds this
 * split brain in t/lease.pml); the identity breaks the tie in storage.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/*
 * LOAD: a word another node may have written.  PEEK: one of our own node's
 * words, or one whose line was just invalidated.  A STORE is followed by
 * mkv_share_persist() of what it changed.
 */
#define LOAD(x) mkv_share_load(p, &(x))
#define PEEK(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)

static void
nap(void)
{
	struct timespec ts = { 0, 200 * 1000 };

	nanosleep(&ts, NULL);
}

int
mkv_lease_init(struct mkv_pool *p)
{
	if (pthread_mutex_init(&p->h.lock, NULL))
		return mkv_err(MKV_E_NOMEM, "lease: mutex");
	if (pthread_cond_init(&p->h.wake, NULL)) {
		pthread_mutex_destroy(&p->h.lock);
		return mkv_err(MKV_E_NOMEM, "lease: condition");
	}
	p->h.ready = true;
	return 0;
}

void
mkv_lease_fini(struct mkv_pool *p)
{
	if (!p->h.ready)
		return;
	pthread_cond_destroy(&p->h.wake);
	pthread_mutex_destroy(&p->h.lock);
	p->h.ready = false;
}

/* Our node's node-local lock (layout.h), waiting until deadline (0: not at all). */
static bool
node_lock(struct mkv_pool *p, uint64_t deadline)
{
	return mkv_lock_super_until(p, MKV_NODE_LOCK_BASE + p->node_idx, deadline) == 0;
}

static void
node_unlock(struct mkv_pool *p)
{
	mkv_lock_super(p, MKV_NODE_LOCK_BASE + p->node_idx, F_UNLCK);
}

/*
 * A node is dead to us once its beat stood still for a period by our
 * clock.  Its caller has just invalidated the line of the beat.
 */
struct watch {
	uint64_t beat, since;
};

static bool
node_dead(struct mkv_pool *p, struct watch *w, const struct mkv_node *n)
{
	uint64_t beat = PEEK(n->beat), now = mkv_clock_now();

	if (beat != w->beat) {
		w->beat = beat;
		w->since = now;
		return false;
	}
	return now - w->since >= p->lease_period_ns;
}

static void bakery_exit(struct mkv_pool *p);

/*
 * Enter the bakery's critical section; false (and out of the bakery) if
 * that took two lease periods: a node that is alive but never leaves (its
 * representative stopped while another process of it keeps its beat) must
 * not hang us.
 */
static bool
bakery_enter(struct mkv_pool *p)
{
	struct mkv_node *me = &p->nodes[p->node_idx];
	uint64_t max = 0, mine, v, deadline = mkv_clock_now() + 2 * p->lease_period_ns;

	STORE(me->choosing, 1);
	mkv_share_persist(p, &me->choosing, sizeof(me->choosing));
	for (uint32_t j = 0; j < p->sb->max_nodes; j++) {
		uint64_t *nj = &p->nodes[j].number;

		/* a step a test stops a contender at by name (t/check_leasesites.c) */
		mkv_share_inval_at(p, nj, sizeof(*nj), MKV_SITE_NAMED(bakery_numbers));
		if ((v = PEEK(*nj)) > max)
			max = v;
	}
	mine = max + 1;
	/*
	 * number and choosing share a line, which is written back whole: the
	 * one write-back shows the number no later than the choice's end;
	 * named: a test stops a contender right before it (t/check_leasesites.c)
	 */
	STORE(me->number, mine);
	STORE(me->choosing, 0);
	mkv_share_persist_at(p, &me->choosing, sizeof(me->choosing), MKV_SITE_NAMED(bakery_chosen));

	for (uint32_t j = 0; j < p->sb->max_nodes; j++) {
		struct mkv_node *n = &p->nodes[j];
		struct watch w = { LOAD(n->beat), mkv_clock_now() };

		/* id is on the beat's line, just invalidated */
		if (j == p->node_idx || PEEK(n->id) == 0)
			continue;
		for (;;) {
			uint64_t nj;

			if (!LOAD(n->choosing)) {
				/* on choosing's line, just invalidated */
				nj = PEEK(n->number);
				if (nj == 0 || nj > mine || (nj == mine && j > p->node_idx))
					break;
			}
			if (node_dead(p, &w, n))
				break;
			if (mkv_clock_now() >= deadline) {
				bakery_exit(p);
				return false;
			}
			mkv_node_beat(p);
			nap();
		}
	}
	return true;
}

static void
bakery_exit(struct mkv_pool *p)
{
	struct mkv_node *me = &p->nodes[p->node_idx];

	STORE(me->number, 0);
	mkv_share_persist(p, &me->number, sizeof(me->number));
}

struct lease_view {
	uint64_t generation, heartbeat;
	uint32_t node, slot, pid;
};

static void
lease_read(const struct mkv_pool *p, struct lease_view *v)
{
	const struct mkv_lease *l = &p->state->lease;

	mkv_share_inval(p, l, sizeof(*l));
	v->generation = PEEK(l->generation);
	v->node = PEEK(l->holder_node);
	v->slot = PEEK(l->holder_slot);
	v->pid = PEEK(l->holder_pid);
	/*
	 * the heartbeat is in the holder's node entry; a holder's look from
	 * its write window stops here in a test (t/check_leasesites.c): the
	 * record read, its own line not yet invalidated
	 */
	v->heartbeat = 0;
	if (v->node && v->node <= p->sb->max_nodes) {
		const uint64_t *beat = &p->nodes[v->node - 1].lease_beat;

		mkv_share_inval_at(p, beat, sizeof(*beat), MKV_SITE_NAMED(lease_read_beat));
		v->heartbeat = PEEK(*beat);
	}
}

/* Advance the heartbeat in our node's entry: only our node writes that line. */
static void
lease_beat_store(struct mkv_pool *p)
{
	struct mkv_node *me = &p->nodes[p->node_idx];

	STORE(me->lease_beat, PEEK(me->lease_beat) + 1);
	STORE(me->lease_beat_wall_ns, mkv_clock_wall());
	/* named: a test stops a holder right after a renewal (t/check_leasesites.c) */
	mkv_share_persist_at(p, &me->lease_beat, 2 * sizeof(uint64_t), MKV_SITE_NAMED(lease_beat));
}

/*
 * A holder whose slot is no longer its own is gone; one on our kernel is
 * seen dead at once (client.c), in any PID namespace.  Any other holder is
 * judged by the lease's heartbeat.
 */
static bool
holder_dead_here(const struct mkv_pool *p, const struct lease_view *v)
{
	uint64_t owner;

	if (v->slot >= p->sb->max_clients)
		return false;
	owner = LOAD(p->slots[v->slot].owner);
	return MKV_SLOT_PID(owner) != v->pid ||
		(mkv_client_local(p, v->slot, owner) && mkv_client_dead(p, v->slot, owner));
}

/*
 * Whether the lease may be taken: free, held by a dead process of this
 * node, or its heartbeat unchanged for a whole period by our own clock.
 * Called with h.lock held; updates the watch.
 */
bool
mkv_lease_expired(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;
	struct lease_view v;
	uint64_t now = mkv_clock_now();

	lease_read(p, &v);
	if (v.node == 0 || holder_dead_here(p, &v))
		return true;
	if (v.generation != h->seen_generation || v.heartbeat != h->seen_beat ||
	    v.node != h->seen_holder || h->seen_since_ns == 0) {
		h->seen_generation = v.generation;
		h->seen_beat = v.heartbeat;
		h->seen_holder = v.node;
		h->seen_since_ns = now;
		return false;
	}
	return now - h->seen_since_ns >= p->lease_period_ns;
}

/* Nobody holds the lease (a plain read: no liveness probe). */
bool
mkv_lease_free(const struct mkv_pool *p)
{
	return LOAD(p->state->lease.holder_node) == 0;
}

/* Holding, renewed recently enough, and the record still names us. */
bool
mkv_lease_valid(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;
	struct lease_view v;

	if (!h->holding || mkv_clock_now() - h->last_renew_ns >= p->lease_period_ns / 2)
		return false;
	lease_read(p, &v);
	return v.generation == h->generation && v.node == p->node_idx + 1 &&
		v.slot == p->slot && v.pid == p->pid;
}

/*
 * The write window.  Between hosts nothing serialises two holders'
 * writes: LMDB's write mutex and flock() of super are each host's own.  So
 * a holder writes the registry and the page table only inside a window it
 * announces in its node's entry first: it stores its generation there,
 * writes the line back, and only then reads the lease record; a new holder
 * writes the record first, writes it back, and only then reads every
 * node's announcement (mkv_lease_writers_wait()).  A write-back completes
 * before the load after it, so of two such holders at least one sees the
 * other (Dekker's pattern): the old one finds itself superseded and writes
 * nothing, or the new one waits until the old one's window has closed.
 * MKV_E_FENCED: superseded, the window is closed again; or our claim was
 * revoked, and our node's entry is no longer sure to be ours to write.
 */
int
mkv_lease_write_begin(struct mkv_pool *p)
{
	struct mkv_node *me = &p->nodes[p->node_idx];

	if (p->noncoherent && !mkv_client_alive(p))
		return MKV_E_FENCED;
	STORE(me->write_slot, p->slot);
	STORE(me->write_owner, mkv_client_owner(p));
	STORE(me->write_gen, p->h.generation);
	/* named: a test stops a holder at its next look (t/check_leasesites.c) */
	mkv_share_wb_at(p, &me->write_gen, 3 * sizeof(uint64_t), MKV_SITE_NAMED(window_open));
	mkv_full_fence();
	if (mkv_lease_valid(p))
		return 0;
	mkv_lease_write_end(p);
	return MKV_E_FENCED;
}

void
mkv_lease_write_end(struct mkv_pool *p)
{
	struct mkv_node *me = &p->nodes[p->node_idx];

	STORE(me->write_gen, 0);
	/* named: a test stops a holder right after it (t/check_leasesites.c) */
	mkv_share_wb_at(p, &me->write_gen, sizeof(me->write_gen), MKV_SITE_NAMED(window_close));
}

/*
 * Whether node j announces a write window of a holder older than us, on
 * another kernel, that may still be writing: not if it lost its slot (its
 * claim given up or revoked) or is dead by its client heartbeat (after the
 * client timeout: see CLIENTS in marukv(7)).  A holder on our own kernel is fenced exactly without the
 * window: it writes the registry under flock() of super and LMDB's write
 * mutex, which this host shares, after checking its token there, and the
 * page table by compare-and-swap, which is exact here.
 */
static bool
older_writer(struct mkv_pool *p, uint32_t j)
{
	struct mkv_node *n = &p->nodes[j];
	uint64_t gen, owner;
	uint32_t slot;

	mkv_share_inval(p, &n->lease_beat, MKV_CACHELINE);
	gen = PEEK(n->write_gen);
	owner = PEEK(n->write_owner);
	slot = PEEK(n->write_slot);
	return gen != 0 && gen < p->h.generation && slot < p->sb->max_clients &&
		LOAD(p->slots[slot].owner) == owner && mkv_client_claimed(p, slot, owner) &&
		!mkv_client_local(p, slot, owner) && !mkv_client_dead(p, slot, owner);
}

/*
 * A new holder, after writing the lease record and before its first
 * write: wait until no node announces an older holder's write window, a
 * quarter lease period at most (MKV_E_TIMEDOUT: try again later).
 */
int
mkv_lease_writers_wait(struct mkv_pool *p)
{
	uint64_t deadline = mkv_clock_now() + p->lease_period_ns / 4;

	mkv_full_fence();
	for (uint32_t j = 0; j < p->sb->max_nodes; j++)
		while (older_writer(p, j)) {
			if (mkv_clock_now() >= deadline)
				return mkv_err(MKV_E_TIMEDOUT,
						"pool %s: a lease holder older than generation %llu is still writing (stopped?)",
						p->path, (unsigned long long)p->h.generation);
			nap();
		}
	return 0;
}

/* Stop holding, without touching the lease record (it is not ours to clear). */
void
mkv_lease_drop(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;

	if (!h->holding)
		return;
	h->holding = false;
	mkv_reg_floor_drop(p);
	mkv_log(MKV_LOG_INFO, "pool %s: lease dropped: node %s generation %llu", p->path,
			p->node_name, (unsigned long long)h->generation);
}

/* Advance the heartbeat; MKV_E_FENCED if we may no longer write. */
int
mkv_lease_beat(struct mkv_pool *p)
{
	if (!mkv_lease_valid(p))
		return MKV_E_FENCED;
	lease_beat_store(p);
	mkv_node_beat(p);
	p->h.last_renew_ns = mkv_clock_now();
	return 0;
}

/*
 * The generation a new holder takes: one above both the lease record's and
 * the registry's, which stores the token of every holder that committed.
 * The two agree unless super was damaged or restored from an older copy;
 * taking the larger repairs that instead of fencing every new holder out
 * of the registry for ever.
 */
static uint64_t
next_generation(struct mkv_pool *p, uint64_t lease_gen)
{
	uint64_t reg_gen = 0;
	struct mkv_txn *txn;

	if (mkv_reg_rtxn(p, &txn) == 0) {
		if (mkv_reg_meta_get(p, txn, "generation", &reg_gen))
			reg_gen = 0;
		mkv_reg_rtxn_done(p, txn);
	}
	if (reg_gen > lease_gen) {
		mkv_log(MKV_LOG_WARN,
				"pool %s: the registry's generation %llu is above the lease's %llu: repaired",
				p->path, (unsigned long long)reg_gen, (unsigned long long)lease_gen);
		lease_gen = reg_gen;
	}
	return lease_gen + 1;
}

/*
 * Take the lease if it may be taken.  Called with h.lock held.  Returns 0
 * when this handle holds the lease, -EAGAIN when somebody else holds it or
 * is taking it.  A new holder serves only once it has rebuilt the page
 * table: mkv_holder_take() (holder.c) does both.
 */
int
mkv_lease_try_acquire(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;
	struct mkv_lease *l = &p->state->lease;
	struct lease_view v, now;
	uint64_t gen = 0;
	bool take;

	if (h->holding)
		return 0;
	if ((p->flags & MKV_RDONLY) || p->node_idx == UINT32_MAX)
		return MKV_E_RDONLY;
	/* revoked, our node's entry may be another node's by now: hands off it */
	if (!mkv_lease_expired(p) || !mkv_client_alive(p))
		return -EAGAIN;
	if (!node_lock(p, 0))
		return -EAGAIN;
	lease_read(p, &v);
	if (!bakery_enter(p)) {
		node_unlock(p);
		return -EAGAIN;
	}
	lease_read(p, &now);
	take = now.generation == v.generation && now.heartbeat == v.heartbeat &&
		now.node == v.node && (now.node == 0 || holder_dead_here(p, &now) ||
		mkv_lease_expired(p));
	if (take) {
		gen = next_generation(p, now.generation);
		STORE(l->holder_node, p->node_idx + 1);
		STORE(l->holder_slot, p->slot);
		STORE(l->holder_pid, (uint32_t)getpid());
		STORE(l->generation, gen);
		/* a test stops a new holder here by name, inside the bakery */
		mkv_share_persist_at(p, l, sizeof(*l), MKV_SITE_NAMED(lease_take));
		lease_beat_store(p);
	}
	bakery_exit(p);
	node_unlock(p);
	if (!take)
		return -EAGAIN;
	h->holding = true;
	h->generation = gen;
	h->holder_id = mkv_lease_holder_id(p);
	h->last_renew_ns = mkv_clock_now();
	mkv_log(MKV_LOG_INFO, "pool %s: lease taken: node %s slot %u pid %u generation %llu",
			p->path, p->node_name, p->slot, (unsigned)getpid(),
			(unsigned long long)h->generation);
	return 0;
}

/*
 * Give the lease up cleanly (after mkv_holder_stop()): clear the record
 * inside the bakery if it is still ours.  Called without h.lock.
 */
void
mkv_lease_release(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;
	struct mkv_lease *l = &p->state->lease;

	pthread_mutex_lock(&h->lock);
	/* if the bakery cannot be entered in time, the lease simply expires */
	if (h->holding && node_lock(p, mkv_clock_now() + p->lease_period_ns)) {
		if (bakery_enter(p)) {
			/*
			 * a holder stopped before this look may have been
			 * superseded meanwhile; named: a test stops it here
			 * with its caches kept (t/check_leasesites.c)
			 */
			if (mkv_share_load_at(p, &l->generation, MKV_SITE_NAMED(lease_release)) ==
			    h->generation) {
				STORE(l->holder_node, 0);
				STORE(l->holder_pid, 0);
				mkv_share_persist(p, l, sizeof(*l));
			}
			bakery_exit(p);
		}
		node_unlock(p);
	}
	mkv_lease_drop(p);
	pthread_mutex_unlock(&h->lock);
}
