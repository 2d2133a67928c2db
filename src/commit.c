/* SPDX-License-Identifier: MIT */
/*
 * commit.c -- the lease holder applies requests to the registry and the
 * page table in one LMDB write transaction (group commit).
 *
 * Page states move in an order that keeps "free means free" across
 * crashes:
 *   granted -> used          before the publish commits (undone if it fails)
 *   used -> quarantined      before the delete commits (undone if it fails)
 *   quarantined -> free      after the txn that drops the freed record commits
 *   granted -> free          at once (abort at close, reclamation)
 * Quarantined pages are released only from records of txns already
 * committed when this txn read the pins, never from its own.
 *
 * Every txn first checks the generation stored in the registry's meta: a
 * holder whose generation is below it has been superseded and aborts
 * (fencing by the storage itself, whatever its clock believed).
 *
 * Requests from the rings are applied exactly once: the txn that applies
 * one successfully also records its answer under its request entry, and a
 * request found recorded (a holder died after committing, before
 * answering) gets the recorded answer instead of being applied again.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static int
apply_publish(struct mkv_pool *p, struct mkv_txn *txn, struct mkv_req *r, struct batch *b)
{
	struct mkv_entry e = {
		.version = MKV_ENTRY_VERSION,
		.page = r->ext.page,
		.npages = r->ext.npages,
		.length = r->length,
		.checksum = r->checksum,
		.txn = mkv_reg_txn_id(txn),
		.parent = r->parent,
	};
	uint64_t grant = mkv_pages_grant_word(r->slot, r->inc);
	struct mkv_entry old;
	bool full;
	int rc;

	if ((rc = mkv_valid_key(r->key, r->klen)))
		return rc;
	rc = mkv_reg_entry(p, txn, r->key, r->klen, &old);
	if (rc == 0) {
		/* The same publish again (a new holder re-draining): done. */
		if (old.page == r->ext.page && old.npages == r->ext.npages)
			return 0;
		/* Wanted again, as much as a read: an LRU would call it a use. */
		mkv_evict_touch(p, old.page);
		return mkv_err(MKV_E_EXISTS, "publish: key exists (values are write-once)");
	}
	if (rc != MKV_E_NOTFOUND)
		return rc;
	if (!mkv_pages_extent_ok(p, &r->ext) || r->length == 0 || mkv_pool_pages_for(p, r->length) != r->ext.npages)
		return mkv_err(MKV_E_INVAL, "publish: buffer is not one granted to this handle");
	if ((rc = mkv_reg_full(p, &full)))
		return rc;
	if (full)
		return mkv_err(MKV_E_NOSPC, "pool %s: registry is full (the rest is kept for deletes)",
				p->path);
	/* The pages become the value's before the key can be registered on them. */
	if (!mkv_batch_move(p, b, &r->ext, grant, mkv_pages_held_word(MKV_PG_USED, p->h.generation), &rc))
		return rc ? rc : mkv_err(MKV_E_INVAL,
				"publish: buffer is not one granted to this handle");
	if ((rc = mkv_reg_insert(p, txn, r->key, r->klen, &e)) == 1) {
		mkv_batch_unmove(p, b);
		return mkv_err(MKV_E_CORRUPT, "pool %s: page %llu is registered already", p->path,
				(unsigned long long)r->ext.page);
	}
	if (rc)
		return mkv_batch_fail(b, rc);
	if (r->parent && (rc = mkv_reg_kids_add(p, txn, r->parent, 1)))
		return mkv_batch_fail(b, rc);
	/* New counts as read now: as young as the values read this round. */
	mkv_evict_touch(p, r->ext.page);
	b->bytes += (int64_t)r->length;
	b->published += r->ext.npages;
	return 0;
}

static int
apply_del(struct mkv_pool *p, struct mkv_txn *txn, struct mkv_req *r, struct batch *b)
{
	struct mkv_entry e;
	int rc;

	if ((rc = mkv_valid_key(r->key, r->klen)) ||
	    (rc = mkv_reg_lookup(p, txn, r->key, r->klen, &e)))
		return rc;
	r->ext = (struct mkv_extent){ e.page, e.npages };
	r->length = e.length;
	r->checksum = e.checksum;
	/* Quarantined before the key goes: a reader's view keeps its bytes. */
	if (!mkv_batch_move(p, b, &r->ext, mkv_pages_held_word(MKV_PG_USED, p->h.generation),
			mkv_pages_held_word(MKV_PG_QUARANTINED, p->h.generation), &rc))
		return rc ? rc : mkv_err(MKV_E_CORRUPT,
				"pool %s: the page table does not hold the value at page %llu as used",
				p->path, (unsigned long long)e.page);
	if ((rc = mkv_reg_remove(p, txn, r->key, r->klen, e.page)))
		return mkv_batch_fail(b, rc);
	if (e.parent && (rc = mkv_reg_kids_add(p, txn, e.parent, -1)))
		return mkv_batch_fail(b, rc);
	r->parent = e.parent;
	b->bytes -= (int64_t)e.length;
	return 0;
}

/* How the eviction policy deletes, inside this txn (see mkv_evict_del_fn). */
struct evicting {
	struct mkv_pool *p;
	struct mkv_txn *txn;
	struct batch *b;
};

static int
evict_del(void *arg, const void *key, size_t klen, struct mkv_extent *ext, uint64_t *parent)
{
	struct evicting *e = arg;
	struct mkv_req d = { .op = MKV_OP_DEL, .key = key, .klen = klen };
	int rc = apply_del(e->p, e->txn, &d, e->b);

	/* a value it refuses to delete stays (one the page table disagrees with) */
	if (rc)
		return e->b->failed ? rc : 1;
	/* quarantined: its bytes stay the value's at least until this txn commits */
	mkv_remote_spill(e->p, key, klen, d.ext.page, d.length, d.checksum, d.parent);
	*ext = d.ext;
	*parent = d.parent;
	return 0;
}

/* Pages the grants of this txn took: what its writers have in flight. */
static uint64_t
granted(const struct batch *b)
{
	uint64_t n = 0;

	for (size_t i = 0; i < b->done.n; i++)
		if (b->done.v[i].from == MKV_PG_FREE)
			n += b->done.v[i].ext.npages;
	return n;
}

/* Evict until free and quarantined pages reach want (evict.c); count them in meta. */
static int
evict_to(struct mkv_pool *p, struct mkv_txn *txn, uint64_t want, struct batch *b, uint64_t *out)
{
	struct evicting e = { p, txn, b };
	uint64_t total;
	int rc = mkv_evict_to(p, txn, mkv_evict_room(p), want, evict_del, &e, out);

	if (rc || !*out)
		return rc;
	if ((rc = mkv_reg_meta_get(p, txn, "evictions", &total)) ||
	    (rc = mkv_reg_meta_put(p, txn, "evictions", total + *out)))
		return mkv_batch_fail(b, rc);
	return 0;
}

/*
 * A grant: ext.npages pages for the client's cache, or at least length (what
 * its caller needs now) when no run is that long: free pages lie scattered
 * once eviction has run, and a batch must not evict what a single value
 * does not need.
 */
static int
grant_pages(struct mkv_pool *p, struct batch *b, uint64_t grant, struct mkv_extent *ext)
{
	int rc = mkv_batch_add(&b->done, ext, MKV_PG_FREE, grant);

	if (rc)
		return rc;
	if ((rc = mkv_pages_grant(p, ext->npages, grant, ext))) {
		b->done.n--;
		return rc;
	}
	b->done.v[b->done.n - 1].ext = *ext;
	return 0;
}

/*
 * The oldest live pin if it holds back quarantined pages, else 0.  A pin
 * holds back every page deleted after it, so while one does, evicting more
 * frees nothing.
 */
static int
quarantine_pin(struct mkv_pool *p, struct mkv_txn *txn, uint64_t *pin)
{
	uint64_t last, min;
	int rc = mkv_reg_freed_last(p, txn, &last);

	*pin = 0;
	if (rc)
		return rc == MKV_E_NOTFOUND ? 0 : rc;
	min = mkv_epoch_min(p, offsetof(struct mkv_slot, pin), last, false);
	if (min <= last && min != UINT64_MAX)
		*pin = min;
	return 0;
}

/*
 * Short even of length: evict a batch (mkv_evict_batch()) for what it asks,
 * unless the quarantine already holds that much (released at the end of
 * this txn) or a pin holds the quarantine back (r->held: retry_grant()
 * waits for it).  The grant is refused either way; the caller retries it.
 */
static int
grant_or_evict(struct mkv_pool *p, struct mkv_txn *txn, struct mkv_req *r, struct batch *b)
{
	uint64_t grant = mkv_pages_grant_word(r->slot, r->inc), want, evicted;
	int rc = grant_pages(p, b, grant, &r->ext), e;

	if (rc == MKV_E_NOSPC && r->length && r->length < r->ext.npages) {
		r->ext.npages = r->length;
		rc = grant_pages(p, b, grant, &r->ext);
	}
	if (rc != MKV_E_NOSPC || r->ext.npages > p->nr_pages)
		return rc;
	if ((e = quarantine_pin(p, txn, &r->held)))
		return e;
	if (r->held) {
		uint64_t n;

		/*
		 * A read pins the last txn, which holds that txn's deletes back,
		 * and LMDB commits no txn that wrote nothing: a write, so that the
		 * reads begun from now on pin past the quarantine.
		 */
		if ((e = mkv_reg_meta_get(p, txn, "evictions", &n)) ||
		    (e = mkv_reg_meta_put(p, txn, "evictions", n)))
			return mkv_batch_fail(b, e);
		return rc;
	}
	if (b->evicted || !p->h.wm_low || p->h.quarantined_pages >= r->ext.npages)
		return rc;
	want = mkv_evict_room(p) + mkv_evict_batch(p, r->ext.npages);
	if ((e = evict_to(p, txn, want, b, &evicted)))
		return e;
	b->evicted = evicted > 0;
	return rc;
}

/*
 * Whether a request from the ring still speaks for its client: the slot's
 * owner is the claim that sent it.  A client judged dead lost its slot,
 * and what it asks afterwards is refused (its pages go back regardless).
 */
static bool
requester_ok(const struct mkv_pool *p, const struct mkv_req *r)
{
	uint64_t owner;

	if (r->slot >= p->sb->max_clients)
		return false;
	/* named: a test stops the holder right before it (t/check_sites.c) */
	owner = mkv_share_load_at(p, &p->slots[r->slot].owner, MKV_SITE_NAMED(requester_owner));
	return MKV_SLOT_INC(owner) == r->inc && mkv_client_claimed(p, r->slot, owner);
}

static int
apply(struct mkv_pool *p, struct mkv_txn *txn, struct mkv_req *r, struct batch *b)
{
	uint64_t grant = mkv_pages_grant_word(r->slot, r->inc);

	if (r->seq && r->op != MKV_OP_UNGRANT && r->op != MKV_OP_DETACH && !requester_ok(p, r))
		return mkv_err(MKV_E_EXPIRED, "pool %s: request from slot %u, whose client was judged dead",
				p->path, r->slot);
	switch (r->op) {
	case MKV_OP_PUBLISH:
		return apply_publish(p, txn, r, b);
	case MKV_OP_DEL:
		return apply_del(p, txn, r, b);
	case MKV_OP_GRANT:
		if (r->ext.npages == 0)
			return mkv_err(MKV_E_INVAL, "grant: no pages asked");
		return grant_or_evict(p, txn, r, b);
	case MKV_OP_UNGRANT:
		if (!mkv_pages_extent_ok(p, &r->ext) || !mkv_pages_are(p, &r->ext, grant))
			return mkv_err(MKV_E_INVAL, "ungrant: pages not granted to this client");
		mkv_pages_move(p, &r->ext, grant, MKV_PG_FREE);
		return 0;
	case MKV_OP_DETACH:
		mkv_pages_reclaim(p, grant);
		return 0;
	case MKV_OP_RECLAIM: {
		struct mkv_reclaim rep;

		mkv_recover_reap(p, false, &rep);
		r->out = rep.pages;
		return 0;
	}
	case MKV_OP_EVICT:
		if (r->free_pct > 100)
			return mkv_err(MKV_E_INVAL, "evict: %llu percent",
					(unsigned long long)r->free_pct);
		return evict_to(p, txn, mkv_evict_pct_pages(p, r->free_pct), b, &r->out);
	case MKV_OP_WATERMARKS: {
		int rc;

		if (r->wm_low > 100 || r->wm_high > 100)
			return mkv_err(MKV_E_INVAL, "watermarks: %llu/%llu percent",
					(unsigned long long)r->wm_low, (unsigned long long)r->wm_high);
		if ((rc = mkv_valid_watermarks((unsigned)r->wm_low, (unsigned)r->wm_high)))
			return rc;
		if ((rc = mkv_reg_meta_put(p, txn, "wm_low", r->wm_low)) ||
		    (rc = mkv_reg_meta_put(p, txn, "wm_high", r->wm_high)))
			return mkv_batch_fail(b, rc);
		p->h.wm_low = (uint32_t)r->wm_low;
		p->h.wm_high = (uint32_t)r->wm_high;
		return 0;
	}
	}
	return mkv_err(MKV_E_INVAL, "commit: unknown request %d", (int)r->op);
}

/* Whether the registry recorded this request as applied; its answer if so. */
static int
replay(struct mkv_pool *p, struct mkv_txn *txn, struct mkv_req *r)
{
	struct mkv_answer_rec a;
	int rc = mkv_reg_answer_get(p, txn, r->rq, &a);

	if (rc == MKV_E_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	if (a.inc != r->inc || a.seq != r->seq)
		return 0;
	r->result = a.result;
	r->ext = (struct mkv_extent){ a.page, a.npages };
	r->out = a.page;
	r->replayed = true;
	return 0;
}

static int
record(struct mkv_pool *p, struct mkv_txn *txn, const struct mkv_req *r)
{
	bool counts = r->op == MKV_OP_RECLAIM || r->op == MKV_OP_EVICT;
	struct mkv_answer_rec a = { r->inc, r->seq, r->result, 0, counts ? r->out : r->ext.page,
			r->ext.npages };

	return mkv_reg_answer_put(p, txn, r->rq, &a);
}

/*
 * Begin a registry write txn as the holder: renew the lease if due, refuse
 * if it is not valid, and check our token against the registry's.
 */
static int
txn_begin(struct mkv_pool *p, struct mkv_txn **txn)
{
	int rc;

	/*
	 * A thread writing without pause keeps h.lock and can starve the
	 * service thread of it: renew here too when renewal is due.
	 */
	if (p->h.holding && mkv_clock_now() - p->h.last_renew_ns >= p->lease_period_ns / 4)
		mkv_lease_beat(p);
	if (!mkv_lease_valid(p))
		return mkv_err(MKV_E_FENCED, "pool %s: lease not renewed in time", p->path);
	if ((rc = mkv_reg_wtxn(p, txn)))
		return rc;
	if ((rc = mkv_reg_fence(p, *txn)))
		mkv_reg_wtxn_end(p, *txn, false);
	return rc;
}

/*
 * Each request in turn: answered from the registry's record if it was
 * applied already, else applied and its answer recorded.  0, or the error
 * that fails the txn.
 */
static int
apply_all(struct mkv_pool *p, struct mkv_txn *txn, struct mkv_req *reqs, unsigned n, struct batch *b)
{
	int rc;

	for (unsigned i = 0; i < n; i++) {
		struct mkv_req *r = &reqs[i];

		if (r->seq && (rc = replay(p, txn, r)))
			return rc;
		if (r->replayed)
			continue;
		r->result = apply(p, txn, r, b);
		if (r->result && b->failed)
			return r->result;
		if (r->seq && r->result == 0 && (rc = record(p, txn, r)))
			return rc;
	}
	return 0;
}

/*
 * What every txn does after its requests, then its commit: the reserve,
 * the release of quarantined pages no pin needs, the record of this txn's
 * deletes.  The reserve is what is in flight, the pages this txn's grants
 * took: with less room than that left, a batch is evicted now, so that the
 * next round of grants like these finds its pages without evicting.
 */
static int
txn_end(struct mkv_pool *p, struct mkv_txn *txn, struct batch *b)
{
	uint64_t evicted, reserve = granted(b);
	int rc = 0;

	if (p->h.wm_low && !b->evicted && mkv_evict_room(p) < reserve)
		rc = evict_to(p, txn, mkv_evict_room(p) + mkv_evict_batch(p, reserve), b, &evicted);
	if (!rc)
		rc = mkv_batch_release(p, txn, b);
	if (!rc)
		rc = mkv_batch_record(p, txn, b);
	if (rc) {
		mkv_reg_wtxn_end(p, txn, false);
		return rc;
	}
	/*
	 * The page table already shows this txn's publishes and deletes (they
	 * were moved under the write lock, as each request was applied): the
	 * next txn sees them, and a failed commit undoes them.
	 */
	return mkv_reg_wtxn_end(p, txn, true);
}

/* One registry write txn over n requests (see mkv_commit()); 0 or the error that failed it. */
static int
commit_txn(struct mkv_pool *p, struct mkv_req *reqs, unsigned n, struct batch *b)
{
	struct mkv_txn *txn;
	int rc = txn_begin(p, &txn);

	if (rc)
		return rc;
	if ((rc = apply_all(p, txn, reqs, n, b))) {
		mkv_reg_wtxn_end(p, txn, false);
		return rc;
	}
	return txn_end(p, txn, b);
}

/*
 * commit_txn(), tried again while the registry has no page for it.  LMDB
 * reuses a page only once no reader's snapshot predates the txn that freed
 * it: while a reader is stopped or preempted inside a lookup, every commit
 * takes pages from the end of the map, and a busy holder fills a registry
 * that is mostly free within milliseconds (deletes too, whatever reserve is
 * kept).  Such a txn is tried again, its requests as they came, after a
 * pause that grows from 50 us to 5 ms, for up to a lease period; then the
 * whole txn fails with MKV_E_NOSPC.
 */
static int
commit_full_registry(struct mkv_pool *p, struct mkv_req *reqs, unsigned n, struct batch *b)
{
	struct mkv_req *orig = n ? malloc(n * sizeof(*reqs)) : NULL;
	uint64_t until = mkv_clock_now() + p->lease_period_ns, nap = 50000;
	int fatal;

	if (orig)
		memcpy(orig, reqs, n * sizeof(*reqs));
	while ((fatal = commit_txn(p, reqs, n, b)) == MKV_E_NOSPC && mkv_clock_now() < until) {
		struct timespec ts = { 0, (long)nap };

		if (n && !orig)
			break;
		mkv_batch_reset(p, b);
		if (n)
			memcpy(reqs, orig, n * sizeof(*reqs));
		nanosleep(&ts, NULL);
		nap = nap * 2 < 5000000 ? nap * 2 : 5000000;
	}
	free(orig);
	if (fatal == MKV_E_NOSPC) {
		char why[256];

		snprintf(why, sizeof(why), "%s", mkv_errormsg());
		return mkv_err(fatal, "pool %s: registry full for %llu ms: LMDB reuses no page a "
				"reader's snapshot may still see (%s)", p->path,
				(unsigned long long)(p->lease_period_ns / 1000000), why);
	}
	return fatal;
}

/*
 * One txn, and what follows it: after a commit, the pages it released
 * become free and the clock of ages advances; after a failure, the page
 * table is as it was and every request not answered from the registry
 * carries the error.  *freed: the commit released or evicted pages
 * (evicted: it evicted for a grant).
 */
static int
commit_round(struct mkv_pool *p, struct mkv_req *reqs, unsigned n, bool *freed, bool *evicted)
{
	struct batch b = { 0 };
	int fatal = commit_full_registry(p, reqs, n, &b);

	mkv_hold_sweep_end(p, !fatal);
	if (fatal) {
		mkv_batch_undo(p, &b);
		for (unsigned i = 0; i < n; i++)
			if (!reqs[i].replayed)
				reqs[i].result = fatal;
	} else {
		mkv_batch_settle(p, &b);
		mkv_evict_tick(p, b.published);
	}
	*freed = !fatal && (b.released.n || b.evicted);
	*evicted = !fatal && b.evicted;
	mkv_batch_free(&b);
	return fatal;
}

/*
 * A grant refused for want of pages, in txns of its own until it gets them
 * or nothing more can come: each time an empty txn first, which releases
 * the quarantine no pin needs (its pages are free once it commits), then
 * the grant, which evicts if that is not enough.  While a pin holds the
 * quarantine back, evicting frees nothing: wait for it to go, with pauses
 * growing from 50 us to 5 ms, for up to a quarter of a lease period.  Most
 * pins are a read between its lookup and its release, on a loaded host
 * preempted for milliseconds; a pin still there after such a wait is a view
 * kept, and the grants that follow while it stays get MKV_E_NOSPC at once.
 */
static int
retry_grant(struct mkv_pool *p, struct mkv_req *r)
{
	uint64_t until = mkv_clock_now() + p->lease_period_ns / 4, nap = 50000;
	bool freed, freed_too, evicted;
	int rc;

	for (;;) {
		struct timespec ts = { 0, (long)nap };

		if ((rc = commit_round(p, NULL, 0, &freed, &evicted)) ||
		    (rc = commit_round(p, r, 1, &freed_too, &evicted)))
			return rc;
		if (r->result != MKV_E_NOSPC || (!r->held && !freed && !freed_too))
			return 0;  /* granted, or nothing released and nothing to evict */
		if (!r->held)
			continue;
		if (r->held == p->h.pin_outlasted || mkv_clock_now() >= until) {
			p->h.pin_outlasted = r->held;
			return 0;
		}
		nanosleep(&ts, NULL);
		nap = nap * 2 < 5000000 ? nap * 2 : 5000000;
	}
}

/*
 * Apply n requests in one registry write txn; only a valid lease holder
 * may call this, with h.lock held.  Each request's own outcome is in its
 * result; the return value is 0, or the error that failed the whole txn
 * (then every registry request carries it and the page table is as it
 * was; MKV_E_FENCED: we are no longer the holder and nothing was applied).
 * A grant's retry that fails (MKV_E_FENCED) is returned too: the first txn
 * committed, the retry did not.
 */
int
mkv_commit(struct mkv_pool *p, struct mkv_req *reqs, unsigned n)
{
	bool freed, evicted;
	int rc = commit_round(p, reqs, n, &freed, &evicted);

	for (unsigned i = 0; i < n && !rc; i++)
		if (reqs[i].op == MKV_OP_GRANT && reqs[i].result == MKV_E_NOSPC)
			rc = retry_grant(p, &reqs[i]);
	return rc;
}
