/* SPDX-License-Identifier: MIT */
/*
 * regsnap.c -- registry snapshots between hosts (non-coherent pools).
 *
 * LMDB's writer reuses a freed page once no reader in its lock table may
 * still need it, and each host has its own lock table.  So a reader on one
 * host is invisible to a holder on another, and marukv(7) (REGISTRY
 * SNAPSHOTS BETWEEN HOSTS) adds what LMDB cannot see:
 *
 * A reader publishes in its slot's snap a txn id no newer than any
 * snapshot it reads.  Publishing from nothing, it then reads the newest
 * meta again: if that is still the snapshot its txn took, no holder can
 * have judged the readers without seeing it (the holder commits, then reads
 * the slots; the reader publishes, then reads the metas: one of the two
 * sees the other).  Otherwise it tries the newer snapshot.  While it reads,
 * its snap only rises, to the oldest snapshot this handle still reads, which
 * needs no such check; idle, the snap stays (a later read of the same
 * snapshot costs no store) until the service thread clears it.
 *
 * The holder keeps read txns of its own at snapshots it committed, oldest
 * first: LMDB reuses no page of a snapshot at or after the oldest.  Before
 * each write txn it lets the oldest go while the next is no newer than
 * every live reader's snap.  A new holder's first is the newest snapshot,
 * and older ones that readers on other hosts may be reading are its
 * predecessor's to protect, who is gone: before its first write it waits
 * until every live reader's snap has reached its own.
 */
#include "config.h"

#include <errno.h>

#include "registry.h"

/* Tries at publishing a snapshot before a reader gives up: commits outran it. */
#define SNAP_TRIES 64U

int
mkv_reg_snap_init(struct mkv_pool *p)
{
	if (mkv_epoch_init(&p->reg->snaps))
		return mkv_err(MKV_E_NOMEM, "registry: mutex");
	if (pthread_mutex_init(&p->reg->held_lock, NULL)) {
		mkv_epoch_fini(&p->reg->snaps);
		return mkv_err(MKV_E_NOMEM, "registry: mutex");
	}
	return 0;
}

static void
held_drop(struct mkv_registry *r, unsigned from)
{
	for (unsigned i = from; i < r->nheld; i++)
		mdb_txn_abort(r->held[i]);
	r->nheld = from;
}

/* Before LMDB's env closes: the holder's txns go. */
void
mkv_reg_snap_fini(struct mkv_pool *p)
{
	held_drop(p->reg, 0);
	mkv_epoch_fini(&p->reg->snaps);
	pthread_mutex_destroy(&p->reg->held_lock);
}

/* Whether this handle's registry reads follow the protocol: a non-coherent pool's, once it has a slot. */
bool
mkv_reg_snap_on(const struct mkv_pool *p)
{
	return p->reg->shadow && p->slot != UINT32_MAX;
}

static uint64_t *
snap_word(struct mkv_pool *p)
{
	return &p->slots[p->slot].snap;
}

static void
snap_store(struct mkv_pool *p, uint64_t v)
{
	mkv_epoch_publish(p, snap_word(p), v);
	p->reg->snap_pub = v;
}

/*
 * Take a read txn (renew *t, a reset one, or begin one) at a snapshot our
 * slot protects; fresh: the metas were just made fresh (the first try
 * needs no newer snapshot).  0, or the error with *t aborted and NULL.
 */
int
mkv_reg_snap_enter(struct mkv_pool *p, MDB_txn **t, bool fresh)
{
	struct mkv_registry *r = p->reg;
	uint64_t id = 0;
	int rc = 0;

	pthread_mutex_lock(&r->snaps.lock);
	for (unsigned tries = 0;; tries++) {
		if (tries || !fresh)
			mkv_reg_fresh_metas(p);
		if ((rc = mkv_reg_rtxn_start(p, t)))
			break;
		id = mdb_txn_id(*t);
		/* our snap is no newer than the oldest we read, and that is no newer than id */
		if (r->snaps.n)
			break;
		if (r->snap_ok && r->snap_pub <= id) {
			if (r->snap_pub < id)
				snap_store(p, id);
			break;
		}
		snap_store(p, id);
		mkv_reg_fresh_metas(p);
		if (mkv_reg_newest_meta(p) == id) {
			r->snap_ok = true;
			break;
		}
		mdb_txn_reset(*t);
		if (tries + 1 == SNAP_TRIES) {
			rc = mkv_err(MKV_E_TIMEDOUT,
					"pool %s: the registry changed under %u reads in a row",
					p->path, SNAP_TRIES);
			break;
		}
	}
	if (!rc)
		rc = mkv_epoch_add(&r->snaps, id, 1);
	r->snap_used = true;
	pthread_mutex_unlock(&r->snaps.lock);
	if (rc && *t) {
		mdb_txn_abort(*t);
		*t = NULL;
	}
	return rc;
}

/* A read of snapshot id is over. */
void
mkv_reg_snap_leave(struct mkv_pool *p, uint64_t id)
{
	struct mkv_registry *r = p->reg;
	uint64_t head;

	pthread_mutex_lock(&r->snaps.lock);
	if (mkv_epoch_sub(&r->snaps, id, 1, &head) && head)
		snap_store(p, head);
	pthread_mutex_unlock(&r->snaps.lock);
}

/*
 * From the service thread, once in a while: if no read began since the
 * last time and none is under way, our snap holds nothing we need.
 */
void
mkv_reg_snap_idle(struct mkv_pool *p)
{
	struct mkv_registry *r = p->reg;

	if (!r || !mkv_reg_snap_on(p))
		return;
	pthread_mutex_lock(&r->snaps.lock);
	if (!r->snap_used && !r->snaps.n && r->snap_pub) {
		snap_store(p, 0);
		r->snap_ok = false;
	}
	r->snap_used = false;
	pthread_mutex_unlock(&r->snaps.lock);
}

/*
 * The oldest snap of a live reader on another kernel, UINT64_MAX if none
 * (LMDB sees this kernel's readers in its lock table).  A dead reader's
 * claim is revoked (it learns so on its next call) and its snap counts no
 * more; only those below `upto` are judged, the others hold back nothing.
 */
static uint64_t
oldest_reader(struct mkv_pool *p, uint64_t upto)
{
	return mkv_epoch_min(p, offsetof(struct mkv_slot, snap), upto - 1, true);
}

/*
 * A new holder, as it takes the lease: a look at every reader of another
 * kernel that has a snap, so that the watch on the heartbeat of a dead
 * one (client.c: dead once its beat stood still for the client timeout by
 * the watcher's clock) starts now, while older holders' windows are waited
 * for, and not at the first write.  A judgement only: revoking is for
 * inside the write window.
 */
void
mkv_reg_readers_watch(struct mkv_pool *p)
{
	if (!p->reg || !p->reg->shadow)
		return;
	for (uint32_t i = 0; i < p->sb->max_clients; i++) {
		const struct mkv_slot *s = &p->slots[i];
		uint64_t owner = mkv_share_load(p, &s->owner);

		if (MKV_SLOT_PID(owner) && mkv_share_load(p, &s->snap) &&
		    !mkv_client_local(p, i, owner))
			(void)mkv_client_dead(p, i, owner);
	}
}

/*
 * A holder's txns, with ours under held_lock: after the lease changed
 * hands, only the newest snapshot, and readers of other kernels still to
 * be seen at it or later.
 */
static int
floor_start(struct mkv_pool *p)
{
	struct mkv_registry *r = p->reg;
	int rc;

	if (r->held_gen != p->h.generation) {
		held_drop(r, 0);
		r->held_gen = p->h.generation;
	}
	if (r->nheld)
		return 0;
	r->held[0] = NULL;
	if ((rc = mkv_reg_rtxn_start(p, &r->held[0])))
		return rc;
	r->held_id[0] = mdb_txn_id(r->held[0]);
	r->nheld = 1;
	r->held_wait = true;
	return 0;
}

/* With held_lock: whether every live reader of another kernel is at our first snapshot or later. */
static bool
floor_caught_up(struct mkv_pool *p)
{
	struct mkv_registry *r = p->reg;

	if (r->held_wait && oldest_reader(p, r->held_id[0]) < r->held_id[0])
		return false;
	r->held_wait = false;
	return true;
}

/*
 * A new holder, inside its write window and before its first write: 0
 * once every live reader of another kernel is at its first snapshot or
 * later (a dead one's claim revoked), -EAGAIN while one lags (its caller
 * waits, beating the lease), or the error.
 */
int
mkv_reg_readers_caught_up(struct mkv_pool *p)
{
	struct mkv_registry *r = p->reg;
	int rc;

	if (!r->shadow)
		return 0;
	pthread_mutex_lock(&r->held_lock);
	if (!(rc = floor_start(p)) && !floor_caught_up(p))
		rc = -EAGAIN;
	pthread_mutex_unlock(&r->held_lock);
	return rc;
}

/*
 * Before a write txn (the holder, super's flock held): let go of what no
 * reader needs.  A new holder has waited for the readers as it took the
 * lease (mkv_reg_readers_caught_up()); one still lagging here is
 * MKV_E_TIMEDOUT, and the writes wait for a later try.
 */
int
mkv_reg_floor(struct mkv_pool *p)
{
	struct mkv_registry *r = p->reg;
	uint64_t min;
	int rc;

	if (!r->shadow)
		return 0;
	pthread_mutex_lock(&r->held_lock);
	if ((rc = floor_start(p)))
		goto out;
	if (!floor_caught_up(p)) {
		rc = mkv_err(MKV_E_TIMEDOUT,
				"pool %s: a reader on another host is still at a snapshot older than this holder's first",
				p->path);
		goto out;
	}
	/* the slots are read at most once a millisecond; when all txns are taken, a commit's replaces the newest */
	if (r->nheld > 1 && mkv_clock_now() - r->held_scan_ns >= 1000000) {
		unsigned keep = 0;

		r->held_scan_ns = mkv_clock_now();
		min = oldest_reader(p, r->held_id[r->nheld - 1]);
		while (keep + 1 < r->nheld && r->held_id[keep + 1] <= min)
			mdb_txn_abort(r->held[keep++]);
		for (unsigned i = keep; i < r->nheld; i++) {
			r->held[i - keep] = r->held[i];
			r->held_id[i - keep] = r->held_id[i];
		}
		r->nheld -= keep;
	}
out:
	pthread_mutex_unlock(&r->held_lock);
	return rc;
}

/*
 * After a commit, given a read txn t at the snapshot it made (or NULL):
 * kept, to let go of the ones before it later, and when all are taken in
 * place of the newest; aborted if no floor is kept.
 *
 * And our own snap, while none of our reads is under way, rises to that
 * snapshot (a rise needs no check: mkv_reg_snap_enter()).  Left where a
 * read that has ended put it (at the latest, the read of the registry's
 * generation as we took the lease), it protects nothing, yet it lags our
 * own commit: were we stopped or killed before the service thread lets it
 * go, the next holder, whose first snapshot is that commit or later, would
 * wait for us as for a reader lagging on another host, a client timeout
 * until we are judged dead (t/check_leasesites.c).
 */
void
mkv_reg_floor_add(struct mkv_pool *p, MDB_txn *t)
{
	struct mkv_registry *r = p->reg;

	if (!t)
		return;
	if (mkv_reg_snap_on(p)) {
		pthread_mutex_lock(&r->snaps.lock);
		if (!r->snaps.n && r->snap_pub && r->snap_pub < mdb_txn_id(t))
			snap_store(p, mdb_txn_id(t));
		pthread_mutex_unlock(&r->snaps.lock);
	}
	pthread_mutex_lock(&r->held_lock);
	if (r->nheld == MKV_REG_HELD)
		held_drop(r, MKV_REG_HELD - 1);
	if (r->nheld) {
		r->held[r->nheld] = t;
		r->held_id[r->nheld++] = mdb_txn_id(t);
		t = NULL;
	}
	pthread_mutex_unlock(&r->held_lock);
	if (t)
		mdb_txn_abort(t);
}

/* The lease is no longer ours: our txns would only hold back a successor on this host. */
void
mkv_reg_floor_drop(struct mkv_pool *p)
{
	if (!p->reg || !p->reg->shadow)
		return;
	pthread_mutex_lock(&p->reg->held_lock);
	held_drop(p->reg, 0);
	pthread_mutex_unlock(&p->reg->held_lock);
}
