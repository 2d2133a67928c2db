/* SPDX-License-Identifier: MIT */
/*
 * commit.c -- the write path: the lease holder applies requests to the
 * registry and the page table in one LMDB write transaction (group
 * commit), rebuilds the page table when it takes the lease, and runs the
 * holder thread that serves other clients' requests.
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

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

#include "internal.h"

#define MAX_BATCH 256

struct moves {
	struct move {
		struct mkv_extent ext;
		uint64_t from, to;
	} *v;
	size_t n, cap;
};

static int
moves_add(struct moves *x, const struct mkv_extent *ext, uint64_t from, uint64_t to)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 8;
		struct move *v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return mkv_err(MKV_E_NOMEM, "commit: out of memory");
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n++] = (struct move){ *ext, from, to };
	return 0;
}

/* What one txn changes besides the registry. */
struct batch {
	/*
	 * Page-table changes made as each request was applied, undone in
	 * reverse order if the txn fails: granted -> used (publish), used ->
	 * quarantined (delete), free -> granted (grant).
	 */
	struct moves done;
	struct moves released;  /* quarantined -> free, after the commit */
	int64_t bytes;          /* change of the stored byte count */
	uint64_t published;     /* pages published */
	bool evicted;           /* eviction ran to make room for a grant */
	bool failed;            /* a request failed half-applied: the txn must not commit */
};

/*
 * A request's error after it changed the registry: the txn fails.  Any
 * other error a request returns is a refusal that changed nothing, and the
 * txn goes on with the next request.
 */
static int
fail(struct batch *b, int rc)
{
	b->failed = true;
	return rc;
}

/*
 * Move every page of ext from `from` to `to` now, or none of them; kept in
 * the batch to be undone if the txn fails.  Requests are applied one after
 * the other, so a later one (a grant that reclaims a dead client's pages)
 * sees what an earlier one (that client's publish) did to the table.
 */
static bool
batch_move(struct mkv_pool *p, struct batch *b, const struct mkv_extent *ext, uint64_t from,
		uint64_t to, int *rc)
{
	if ((*rc = moves_add(&b->done, ext, from, to)))
		return false;
	if (mkv_pages_move_all(p, ext, from, to))
		return true;
	b->done.n--;
	return false;
}

static void
batch_undo(struct mkv_pool *p, struct batch *b)
{
	while (b->done.n) {
		const struct move *m = &b->done.v[--b->done.n];

		mkv_pages_move(p, &m->ext, m->to, m->from);
	}
}

static bool
extent_ok(const struct mkv_pool *p, const struct mkv_extent *ext)
{
	return ext->npages != 0 && ext->page < p->nr_pages &&
		ext->npages <= p->nr_pages - ext->page;
}

/*
 * Count one child more (delta 1) or less (-1) under a parent's key hash.
 * The count lives apart from the parent's entry, so it stays right while
 * the parent is evicted and published again.
 */
static int
kids_add(struct mkv_pool *p, MDB_txn *txn, uint64_t parent, int delta)
{
	MDB_val k = { sizeof(parent), &parent }, d;
	uint64_t n = 0;
	int rc = mdb_get(txn, p->reg.kids, &k, &d);

	if (rc == 0 && d.mv_size == sizeof(n))
		memcpy(&n, d.mv_data, sizeof(n));
	else if (rc && rc != MDB_NOTFOUND)
		return mkv_err_mdb(rc, "chain");
	n = delta > 0 ? n + 1 : n ? n - 1 : 0;
	d = (MDB_val){ sizeof(n), &n };
	if (n)
		rc = mdb_put(txn, p->reg.kids, &k, &d, 0);
	else
		rc = mdb_del(txn, p->reg.kids, &k, NULL);
	return rc && rc != MDB_NOTFOUND ? mkv_err_mdb(rc, "chain") : 0;
}

/* No published block names the key of this hash as its parent: the end of its chains. */
static bool
is_tail(struct mkv_pool *p, MDB_txn *txn, uint64_t hash)
{
	MDB_val k = { sizeof(hash), &hash }, d;

	return mdb_get(txn, p->reg.kids, &k, &d) != 0;
}

/*
 * The clock of ages: the tick advances each time 1/128 of the pool has been
 * published, so a value's age counts the pages published since it was last
 * read, as an LRU's stack distance does (to 1/128 of the pool, up to
 * MKV_AGE_CAP ticks: 1.25 times the pool).  It advances after a commit, so
 * the blocks of a chain published together have one age.  Every 64 ticks every hint's age
 * is capped, so none can wrap round (255 ticks) and look young.
 */
static void
tick_pages(struct mkv_pool *p, uint64_t pages)
{
	uint64_t quantum = p->nr_pages >= 128 ? p->nr_pages / 128 : 1;
	uint64_t sum = p->state->tick_pages % quantum + pages, tick = mkv_tick(p);

	for (uint64_t n = sum / quantum; n; n--) {
		tick = tick % 255 + 1;
		if (tick % 64 == 0)
			mkv_age_threshold(p, tick, 0, true);
		__atomic_store_n(&p->state->tick, tick, __ATOMIC_RELAXED);
	}
	p->state->tick_pages = sum % quantum;
	p->super.persist(&p->state->tick, 2 * sizeof(uint64_t));
}

static int
apply_publish(struct mkv_pool *p, MDB_txn *txn, struct mkv_req *r, struct batch *b)
{
	struct mkv_entry e = {
		.version = MKV_ENTRY_VERSION,
		.page = r->ext.page,
		.npages = r->ext.npages,
		.length = r->length,
		.checksum = r->checksum,
		.txn = mdb_txn_id(txn),
		.parent = r->parent,
	};
	uint64_t be = htobe64(r->ext.page), grant = mkv_grant_word(r->slot, r->inc);
	MDB_val k = { r->klen, (void *)r->key }, d = { sizeof(e), &e };
	MDB_val pk = { sizeof(be), &be };
	struct mkv_entry old;
	bool full;
	int rc;

	if ((rc = mkv_check_key(r->key, r->klen)))
		return rc;
	rc = mkv_reg_lookup(p, txn, r->key, r->klen, &old);
	if (rc == 0) {
		/* The same publish again (a new holder re-draining): done. */
		if (old.page == r->ext.page && old.npages == r->ext.npages)
			return 0;
		/* Wanted again, as much as a read: an LRU would call it a use. */
		mkv_touch(p, old.page);
		return mkv_err(MKV_E_EXISTS, "publish: key exists (values are write-once)");
	}
	if (rc != MKV_E_NOTFOUND)
		return rc;
	if (!extent_ok(p, &r->ext) || r->length == 0 || mkv_pages_for(p, r->length) != r->ext.npages)
		return mkv_err(MKV_E_INVAL, "publish: buffer is not one granted to this handle");
	if ((rc = mkv_reg_full(p, &full)))
		return rc;
	if (full)
		return mkv_err(MKV_E_NOSPC, "pool %s: registry is full (the rest is kept for deletes)",
				p->path);
	if (mdb_get(txn, p->reg.pages, &pk, &d) == 0)
		return mkv_err(MKV_E_CORRUPT, "pool %s: page %llu is registered already", p->path,
				(unsigned long long)r->ext.page);
	/* The pages become the value's before the key can be registered on them. */
	if (!batch_move(p, b, &r->ext, grant, mkv_held_word(MKV_PG_USED, p->h.generation), &rc))
		return rc ? rc : mkv_err(MKV_E_INVAL,
				"publish: buffer is not one granted to this handle");
	d = (MDB_val){ sizeof(e), &e };
	if ((rc = mdb_put(txn, p->reg.entries, &k, &d, MDB_NOOVERWRITE)) ||
	    (rc = mdb_put(txn, p->reg.pages, &pk, &k, MDB_NOOVERWRITE)))
		return fail(b, mkv_err_mdb(rc, "publish"));
	if (r->parent && (rc = kids_add(p, txn, r->parent, 1)))
		return fail(b, rc);
	/* New counts as read now: as young as the values read this round. */
	mkv_touch(p, r->ext.page);
	b->bytes += (int64_t)r->length;
	b->published += r->ext.npages;
	return 0;
}

static int
apply_del(struct mkv_pool *p, MDB_txn *txn, struct mkv_req *r, struct batch *b)
{
	struct mkv_entry e;
	uint64_t be;
	MDB_val k = { r->klen, (void *)r->key }, pk = { sizeof(be), &be };
	int rc;

	if ((rc = mkv_check_key(r->key, r->klen)) ||
	    (rc = mkv_reg_lookup(p, txn, r->key, r->klen, &e)))
		return rc;
	r->ext = (struct mkv_extent){ e.page, e.npages };
	/* Quarantined before the key goes: a reader's view keeps its bytes. */
	if (!batch_move(p, b, &r->ext, mkv_held_word(MKV_PG_USED, p->h.generation),
			mkv_held_word(MKV_PG_QUARANTINED, p->h.generation), &rc))
		return rc ? rc : mkv_err(MKV_E_CORRUPT,
				"pool %s: the page table does not hold the value at page %llu as used",
				p->path, (unsigned long long)e.page);
	be = htobe64(e.page);
	if ((rc = mdb_del(txn, p->reg.entries, &k, NULL)) ||
	    (rc = mdb_del(txn, p->reg.pages, &pk, NULL)))
		return fail(b, mkv_err_mdb(rc, "delete"));
	if (e.parent && (rc = kids_add(p, txn, e.parent, -1)))
		return fail(b, rc);
	r->parent = e.parent;
	b->bytes -= (int64_t)e.length;
	return 0;
}

/*
 * Drop freed records that no live pin can still need; collect their pages.
 * A record damaged beyond use (a key that is no txn id, a value that is no
 * array of extents) is left where it is, and extents outside the arena
 * are skipped: its pages, if any, stay quarantined until a new holder
 * rebuilds the table, and verify reports it.
 */
static int
quarantine_release(struct mkv_pool *p, MDB_txn *txn, struct moves *released)
{
	uint64_t quar = mkv_held_word(MKV_PG_QUARANTINED, p->h.generation);
	MDB_cursor *c;
	MDB_val k, d;
	uint64_t first, last, min;
	bool damaged = false;
	int rc;

	if ((rc = mdb_cursor_open(txn, p->reg.freed, &c)))
		return mkv_err_mdb(rc, "quarantine");
	rc = mdb_cursor_get(c, &k, &d, MDB_LAST);
	if (rc) {
		rc = rc == MDB_NOTFOUND ? 0 : mkv_err_mdb(rc, "quarantine");
		goto out;
	}
	if (k.mv_size == sizeof(last))
		memcpy(&last, k.mv_data, sizeof(last));
	else
		last = htobe64(UINT64_MAX);
	min = mkv_epoch_min_pin(p, be64toh(last));
	for (rc = mdb_cursor_get(c, &k, &d, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		const struct mkv_extent *x = d.mv_data;

		if (k.mv_size != sizeof(first) || d.mv_size % sizeof(*x) || d.mv_size == 0) {
			damaged = true;
			continue;
		}
		memcpy(&first, k.mv_data, sizeof(first));
		if (be64toh(first) >= min)
			break;
		for (size_t i = 0; i < d.mv_size / sizeof(*x); i++) {
			struct mkv_extent e;

			memcpy(&e, &x[i], sizeof(e));
			if (!extent_ok(p, &e)) {
				damaged = true;
				continue;
			}
			if ((rc = moves_add(released, &e, quar, MKV_PG_FREE)))
				goto out;
		}
		if ((rc = mdb_cursor_del(c, 0))) {
			rc = mkv_err_mdb(rc, "quarantine");
			goto out;
		}
	}
	if (rc == 0 || rc == MDB_NOTFOUND)
		rc = 0;
	else
		rc = mkv_err_mdb(rc, "quarantine");
	if (damaged)
		mkv_log(MKV_LOG_WARN, "pool %s: damaged quarantine records skipped", p->path);
out:
	mdb_cursor_close(c);
	return rc;
}

static int
record_dels(struct mkv_pool *p, MDB_txn *txn, const struct batch *b)
{
	uint64_t id = htobe64(mdb_txn_id(txn)), total, quar;
	struct mkv_extent *x;
	MDB_val k = { sizeof(id), &id }, d = { 0, NULL };
	size_t n = 0;
	int rc;

	quar = mkv_held_word(MKV_PG_QUARANTINED, p->h.generation);
	for (size_t i = 0; i < b->done.n; i++)
		n += b->done.v[i].to == quar;
	if (n) {
		if (!(x = malloc(n * sizeof(*x))))
			return mkv_err(MKV_E_NOMEM, "delete: out of memory");
		n = 0;
		for (size_t i = 0; i < b->done.n; i++)
			if (b->done.v[i].to == quar)
				x[n++] = b->done.v[i].ext;
		/* txn ids are never reused: a record under ours already is damage, replaced */
		if (mdb_get(txn, p->reg.freed, &k, &d) == 0)
			mkv_log(MKV_LOG_WARN, "pool %s: a damaged quarantine record replaced", p->path);
		d = (MDB_val){ n * sizeof(*x), x };
		rc = mdb_put(txn, p->reg.freed, &k, &d, 0);
		free(x);
		if (rc)
			return mkv_err_mdb(rc, "delete");
	}
	if (b->bytes == 0)
		return 0;
	if ((rc = mkv_reg_meta_get(p, txn, "bytes", &total)))
		return rc;
	return mkv_reg_meta_put(p, txn, "bytes", total + (uint64_t)b->bytes);
}

/* Pages free or quarantined (this txn's deletes quarantined theirs already). */
static uint64_t
room(const struct mkv_pool *p)
{
	return p->h.free_pages + p->h.quarantined_pages;
}

/* The key registered at page pg, if a value starts there (copied out of the txn). */
static bool
page_key(struct mkv_pool *p, MDB_txn *txn, uint64_t pg, uint8_t key[MKV_KEY_MAX], MDB_val *k)
{
	uint64_t be = htobe64(pg);
	MDB_val pk = { sizeof(be), &be };

	if (MKV_PG_STATE(mkv_pt_load(p, pg)) != MKV_PG_USED ||
	    mdb_get(txn, p->reg.pages, &pk, k) || k->mv_size > MKV_KEY_MAX)
		return false;
	memcpy(key, k->mv_data, k->mv_size);
	k->mv_data = key;
	return true;
}

/*
 * What one eviction call has taken so far, and the cold values it passed
 * over because blocks after them are cached: a table from key hash to
 * page, so that evicting a block can find its parent among them.
 */
struct sweep {
	uint64_t want, have, evicted;
	struct head { uint64_t hash, pg; } *heads;  /* hash 0: empty; pg ~0: taken */
	size_t n, cap;
};

static struct head *
head_slot(struct head *v, size_t cap, uint64_t hash)
{
	size_t i = hash & (cap - 1);

	while (v[i].hash && v[i].hash != hash)
		i = (i + 1) & (cap - 1);
	return &v[i];
}

static void
head_add(struct sweep *w, uint64_t hash, uint64_t pg)
{
	struct head *h;

	if (2 * (w->n + 1) > w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		struct head *v = calloc(cap, sizeof(*v));

		if (!v)
			return;  /* a hint lost: that value waits for the next sweep */
		for (size_t i = 0; i < w->cap; i++)
			if (w->heads[i].hash)
				*head_slot(v, cap, w->heads[i].hash) = w->heads[i];
		free(w->heads);
		w->heads = v;
		w->cap = cap;
	}
	h = head_slot(w->heads, w->cap, hash);
	w->n += h->hash == 0;
	*h = (struct head){ hash, pg };
}

/* The page of a cold value passed over with this key hash, once. */
static bool
head_take(struct sweep *w, uint64_t hash, uint64_t *pg)
{
	struct head *h;

	if (!w->cap || !(h = head_slot(w->heads, w->cap, hash))->hash || h->pg == UINT64_MAX)
		return false;
	*pg = h->pg;
	h->pg = UINT64_MAX;
	return true;
}

/* At least min_age rounds old and the end of its chains. */
static bool
evictable(struct mkv_pool *p, MDB_txn *txn, uint64_t pg, unsigned min_age,
		uint8_t key[MKV_KEY_MAX], MDB_val *k)
{
	return page_key(p, txn, pg, key, k) &&
		mkv_hint_age(mkv_tick(p), __atomic_load_n(&p->hints[pg], __ATOMIC_RELAXED)) >=
		min_age && is_tail(p, txn, mkv_key_hash(k->mv_data, k->mv_size));
}

/*
 * Evict the value of key k, then its ancestors as long as the sweep passed
 * them over and each is now the end of its chains: an old chain goes from
 * its tail to its head.  *npages: the pages of k's value.
 */
static int
evict_chain(struct mkv_pool *p, MDB_txn *txn, MDB_val k, unsigned min_age, struct batch *b,
		struct sweep *w, uint64_t *npages)
{
	uint8_t key[MKV_KEY_MAX];
	uint64_t pg;
	int rc;

	for (*npages = 0;;) {
		struct mkv_req d = { .op = MKV_OP_DEL, .key = k.mv_data, .klen = k.mv_size };

		/* a value it refuses to delete stays (one the page table disagrees with) */
		if ((rc = apply_del(p, txn, &d, b)))
			return b->failed ? rc : 0;
		*npages = *npages ? *npages : d.ext.npages;
		w->have += d.ext.npages;
		w->evicted++;
		if (w->have >= w->want || !d.parent || !head_take(w, d.parent, &pg) ||
		    !evictable(p, txn, pg, min_age, key, &k))
			return 0;
	}
}

/*
 * The age (in ticks) from which values go so that at least need of them
 * go: the histogram of the ages of the values' first pages, oldest first.
 * With cap, ages past MKV_AGE_CAP are brought back to it on the way.
 */
unsigned
mkv_age_threshold(struct mkv_pool *p, uint64_t tick, uint64_t need, bool cap)
{
	uint64_t count[MKV_AGE_CAP + 1] = { 0 }, sum = 0;
	uint8_t capped = (uint8_t)((tick + 254 - MKV_AGE_CAP) % 255 + 1);

	for (uint64_t pg = 0; pg < p->nr_pages; pg++) {
		uint8_t h = __atomic_load_n(&p->hints[pg], __ATOMIC_RELAXED);
		unsigned age = mkv_hint_age(tick, h);

		if (!h || MKV_PG_STATE(mkv_pt_load(p, pg)) != MKV_PG_USED)
			continue;
		if (age > MKV_AGE_CAP) {
			/* a reader's store racing with this one wins */
			if (cap)
				__atomic_compare_exchange_n(&p->hints[pg], &h, capped, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED);
			age = MKV_AGE_CAP;
		}
		count[age]++;
	}
	for (unsigned a = MKV_AGE_CAP; a > 0; a--)
		if ((sum += count[a]) >= need)
			return a;
	return 0;
}

/*
 * Evict the least recently read values until free and quarantined pages
 * reach want.  Readers store the holder's tick in a value's hint, and a
 * value's age is the number of ticks since it was last read or published
 * (see tick_pages()).  From the histogram of ages comes the youngest age
 * that still frees enough, and a hand sweeps the pages for values that old:
 * a first turn takes the values older than that age, the next ones those of
 * that age too, as an exact LRU would up to the granularity of a tick.
 * A value goes only if no cached block names it as parent: a prefix lookup
 * stops at the first missing block, so evicting a block that others extend
 * would strand them.  When it goes, so does its parent if the hand passed
 * over it for that and it is old enough, so an old chain goes from its
 * tail to its head.  The ends of chains can be younger than the values the
 * histogram counted (a chain published piece by piece and never read is
 * oldest at its head): if two turns at that age are not enough, each next
 * turn halves the age, down to taking the ends of chains of any age.
 */
static int
evict_to(struct mkv_pool *p, MDB_txn *txn, uint64_t want, struct batch *b, uint64_t *out)
{
	struct sweep w = { .want = want, .have = room(p) };
	uint64_t hand = p->state->clock, tick = mkv_tick(p), total;
	uint8_t key[MKV_KEY_MAX];
	unsigned age;
	MDB_val k;
	int rc = 0;

	*out = 0;
	if (w.have >= want)
		return 0;
	age = mkv_age_threshold(p, tick, want - w.have, true);
	for (unsigned turn = 0;; turn++) {
		unsigned min_age = turn == 0 ? (age < MKV_AGE_CAP ? age + 1 : age) :
				turn <= 2 ? age : age >> (turn - 2);

		for (uint64_t scanned = 0; w.have < want && scanned < p->nr_pages && !rc;) {
			uint64_t step = 0, pg = hand < p->nr_pages ? hand : 0;
			uint8_t h = __atomic_load_n(&p->hints[pg], __ATOMIC_RELAXED);

			/* 0: not a value's first page; the registry is asked only about old ones */
			if (h && mkv_hint_age(tick, h) >= min_age && page_key(p, txn, pg, key, &k)) {
				uint64_t hash = mkv_key_hash(k.mv_data, k.mv_size);

				if (is_tail(p, txn, hash))
					rc = evict_chain(p, txn, k, min_age, b, &w, &step);
				else
					head_add(&w, hash, pg);
			}
			step = step ? step : 1;
			scanned += step;
			hand = pg + step;
		}
		if (w.have >= want || rc || (turn >= 2 && min_age == 0))
			break;
	}
	free(w.heads);
	p->state->clock = hand;
	p->super.persist(&p->state->clock, sizeof(p->state->clock));
	*out = w.evicted;
	if (rc || !w.evicted)
		return rc;
	if ((rc = mkv_reg_meta_get(p, txn, "evictions", &total)) ||
	    (rc = mkv_reg_meta_put(p, txn, "evictions", total + w.evicted)))
		return fail(b, rc);
	return 0;
}

static uint64_t
pct_pages(const struct mkv_pool *p, uint64_t pct)
{
	return (p->nr_pages * pct + 99) / 100;
}

/*
 * A grant: ext.npages pages for the client's cache, or at least length (what
 * its caller needs now) when no run is that long: free pages lie scattered
 * once eviction has run, and a batch must not evict what a single value
 * does not need.  Short even of that: evict what it needs (at least to the
 * high mark).
 */
static int
grant_pages(struct mkv_pool *p, struct batch *b, uint64_t grant, struct mkv_extent *ext)
{
	int rc = moves_add(&b->done, ext, MKV_PG_FREE, grant);

	if (rc)
		return rc;
	if ((rc = mkv_pages_grant(p, ext->npages, grant, ext))) {
		b->done.n--;
		return rc;
	}
	b->done.v[b->done.n - 1].ext = *ext;
	return 0;
}

static int
grant_or_evict(struct mkv_pool *p, MDB_txn *txn, struct mkv_req *r, struct batch *b)
{
	uint64_t grant = mkv_grant_word(r->slot, r->inc), want, evicted;
	int rc = grant_pages(p, b, grant, &r->ext), e;

	if (rc == MKV_E_NOSPC && r->length && r->length < r->ext.npages) {
		r->ext.npages = r->length;
		rc = grant_pages(p, b, grant, &r->ext);
	}
	if (rc != MKV_E_NOSPC || r->ext.npages > p->nr_pages || b->evicted || r->retried ||
	    !p->h.wm_low)
		return rc;
	want = pct_pages(p, p->h.wm_high);
	if (want < room(p) + r->ext.npages)
		want = room(p) + r->ext.npages;
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
	owner = __atomic_load_n(&p->slots[r->slot].owner, __ATOMIC_SEQ_CST);
	return MKV_SLOT_PID(owner) != 0 && MKV_SLOT_INC(owner) == r->inc;
}

static int
apply(struct mkv_pool *p, MDB_txn *txn, struct mkv_req *r, struct batch *b)
{
	uint64_t grant = mkv_grant_word(r->slot, r->inc);

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
		if (!extent_ok(p, &r->ext) || !mkv_pages_are(p, &r->ext, grant))
			return mkv_err(MKV_E_INVAL, "ungrant: pages not granted to this client");
		mkv_pages_move(p, &r->ext, grant, MKV_PG_FREE);
		return 0;
	case MKV_OP_DETACH:
		mkv_pages_reclaim(p, grant);
		return 0;
	case MKV_OP_RECLAIM: {
		struct mkv_reclaim rep;

		mkv_reap(p, false, &rep);
		r->out = rep.pages;
		return 0;
	}
	case MKV_OP_EVICT:
		if (r->ext.npages > 100)
			return mkv_err(MKV_E_INVAL, "evict: %llu percent",
					(unsigned long long)r->ext.npages);
		return evict_to(p, txn, pct_pages(p, r->ext.npages), b, &r->out);
	case MKV_OP_WATERMARKS: {
		int rc;

		if (r->ext.page > 100 || r->ext.npages > 100)
			return mkv_err(MKV_E_INVAL, "watermarks: %llu/%llu percent",
					(unsigned long long)r->ext.page, (unsigned long long)r->ext.npages);
		if ((rc = mkv_watermarks_check((unsigned)r->ext.page, (unsigned)r->ext.npages)))
			return rc;
		if ((rc = mkv_reg_meta_put(p, txn, "wm_low", r->ext.page)) ||
		    (rc = mkv_reg_meta_put(p, txn, "wm_high", r->ext.npages)))
			return fail(b, rc);
		p->h.wm_low = (uint32_t)r->ext.page;
		p->h.wm_high = (uint32_t)r->ext.npages;
		return 0;
	}
	}
	return mkv_err(MKV_E_INVAL, "commit: unknown request %d", (int)r->op);
}

/* Whether the registry recorded this request as applied; its answer if so. */
static int
replay(struct mkv_pool *p, MDB_txn *txn, struct mkv_req *r)
{
	uint64_t id = htobe64(r->rq);
	MDB_val k = { sizeof(id), &id }, d;
	struct mkv_answer_rec a;
	int rc = mdb_get(txn, p->reg.answers, &k, &d);

	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return mkv_err_mdb(rc, "answers");
	if (d.mv_size != sizeof(a))
		return mkv_err(MKV_E_CORRUPT, "pool %s: answer record of %zu bytes", p->path,
				d.mv_size);
	memcpy(&a, d.mv_data, sizeof(a));
	if (a.inc != r->inc || a.seq != r->seq)
		return 0;
	r->result = a.result;
	r->ext = (struct mkv_extent){ a.page, a.npages };
	r->out = a.page;
	r->replayed = true;
	return 0;
}

static int
record(struct mkv_pool *p, MDB_txn *txn, const struct mkv_req *r)
{
	uint64_t id = htobe64(r->rq);
	bool counts = r->op == MKV_OP_RECLAIM || r->op == MKV_OP_EVICT;
	struct mkv_answer_rec a = { r->inc, r->seq, r->result, 0, counts ? r->out : r->ext.page,
			r->ext.npages };
	MDB_val k = { sizeof(id), &id }, d = { sizeof(a), &a };
	int rc = mdb_put(txn, p->reg.answers, &k, &d, 0);

	return rc ? mkv_err_mdb(rc, "answers") : 0;
}

/*
 * The storage's own fence: refuse to commit under a token (generation,
 * holder) below the one stored; store ours when it is above.
 */
static int
fence(struct mkv_pool *p, MDB_txn *txn)
{
	uint64_t gen, holder, mine = p->h.generation, me = p->h.holder_id;
	int rc;

	if ((rc = mkv_reg_meta_get(p, txn, "generation", &gen)) ||
	    (rc = mkv_reg_meta_get(p, txn, "holder", &holder)))
		return rc;
	if (gen > mine || (gen == mine && holder > me))
		return mkv_err(MKV_E_FENCED, "pool %s: lease token %llu/%llx superseded by %llu/%llx",
				p->path, (unsigned long long)mine, (unsigned long long)me,
				(unsigned long long)gen, (unsigned long long)holder);
	if (gen == mine && holder == me)
		return 0;
	if ((rc = mkv_reg_meta_put(p, txn, "generation", mine)))
		return rc;
	return mkv_reg_meta_put(p, txn, "holder", me);
}

/* One registry write txn over n requests (see mkv_commit()); 0 or the error that failed it. */
static int
commit_txn(struct mkv_pool *p, struct mkv_req *reqs, unsigned n, struct batch *b)
{
	MDB_txn *txn;
	uint64_t evicted;
	int rc, fatal;

	/*
	 * A thread writing without pause keeps h.lock and can starve the
	 * service thread of it: renew here too when renewal is due.
	 */
	if (p->h.holding && mkv_now_ns() - p->h.last_renew_ns >= p->lease_period_ns / 4)
		mkv_lease_beat(p);
	if (!mkv_lease_valid(p))
		return mkv_err(MKV_E_FENCED, "pool %s: lease not renewed in time", p->path);
	if ((rc = mkv_reg_wtxn(p, &txn)))
		return rc;
	fatal = fence(p, txn);
	for (unsigned i = 0; i < n && !fatal; i++) {
		struct mkv_req *r = &reqs[i];

		if (r->seq && (fatal = replay(p, txn, r)))
			break;
		if (r->replayed)
			continue;
		r->result = apply(p, txn, r, b);
		if (r->result && b->failed)
			fatal = r->result;
		else if (r->seq && r->result == 0)
			fatal = record(p, txn, r);
	}
	/* Below the low watermark: evict up to the high one. */
	if (!fatal && p->h.wm_low && room(p) < pct_pages(p, p->h.wm_low))
		fatal = evict_to(p, txn, pct_pages(p, p->h.wm_high), b, &evicted);
	if (!fatal)
		fatal = quarantine_release(p, txn, &b->released);
	if (!fatal)
		fatal = record_dels(p, txn, b);
	if (fatal) {
		mkv_reg_wtxn_end(p, txn, false);
		return fatal;
	}
	/*
	 * The page table already shows this txn's publishes and deletes (they
	 * were moved under the write lock, as each request was applied): the
	 * next txn sees them, and a failed commit undoes them.
	 */
	return mkv_reg_wtxn_end(p, txn, true);
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
	uint64_t until = mkv_now_ns() + p->lease_period_ns, nap = 50000;
	int fatal;

	if (orig)
		memcpy(orig, reqs, n * sizeof(*reqs));
	while ((fatal = commit_txn(p, reqs, n, b)) == MKV_E_NOSPC && mkv_now_ns() < until) {
		struct timespec ts = { 0, (long)nap };

		if (n && !orig)
			break;
		batch_undo(p, b);
		*b = (struct batch){ .done = b->done, .released = b->released };
		b->released.n = 0;
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
 * Apply n requests in one registry write txn; only a valid lease holder
 * may call this, with h.lock held.  Each request's own outcome is in its
 * result; the return value is 0, or the error that failed the whole txn
 * (then every registry request carries it and the page table is as it
 * was; MKV_E_FENCED: we are no longer the holder and nothing was applied).
 */
int
mkv_commit(struct mkv_pool *p, struct mkv_req *reqs, unsigned n)
{
	struct batch b = { 0 };
	int fatal = commit_full_registry(p, reqs, n, &b), again = 0;

	if (fatal) {
		batch_undo(p, &b);
		for (unsigned i = 0; i < n; i++)
			if (!reqs[i].replayed)
				reqs[i].result = fatal;
	} else {
		for (size_t i = 0; i < b.released.n; i++)
			mkv_pages_move(p, &b.released.v[i].ext, b.released.v[i].from,
					b.released.v[i].to);
		tick_pages(p, b.published);
	}
	/*
	 * A grant refused for want of the pages this txn released, or evicted
	 * (they are free once a txn drops their quarantine, if no reader pins
	 * them): once more.
	 */
	for (unsigned i = 0; i < n && !fatal && (b.released.n || b.evicted); i++) {
		if (reqs[i].op != MKV_OP_GRANT || reqs[i].result != MKV_E_NOSPC || reqs[i].retried)
			continue;
		if (b.evicted && (again = mkv_commit(p, NULL, 0)))
			break;
		reqs[i].retried = true;
		if ((again = mkv_commit(p, &reqs[i], 1)))
			break;
	}
	free(b.done.v);
	free(b.released.v);
	/* The retries' own failure (MKV_E_FENCED): this txn committed, they did not. */
	return fatal ? fatal : again;
}

/* Mark every page the registry owns, with the kind of ownership. */
static int
recover_marks(struct mkv_pool *p, MDB_txn *txn, uint8_t *mark)
{
	MDB_cursor *c;
	MDB_val k, d;
	int rc;

	if ((rc = mdb_cursor_open(txn, p->reg.entries, &c)))
		return mkv_err_mdb(rc, "recover");
	while ((rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) == 0) {
		struct mkv_entry e;

		if (mkv_reg_is_table(&k) || d.mv_size != sizeof(e))
			continue;
		memcpy(&e, d.mv_data, sizeof(e));
		if (!extent_ok(p, &(struct mkv_extent){ e.page, e.npages }))
			continue;
		memset(mark + e.page, MKV_PG_USED, e.npages);
	}
	mdb_cursor_close(c);
	if ((rc = mdb_cursor_open(txn, p->reg.freed, &c)))
		return mkv_err_mdb(rc, "recover");
	while ((rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) == 0) {
		for (size_t i = 0; i < d.mv_size / sizeof(struct mkv_extent); i++) {
			struct mkv_extent e;

			memcpy(&e, (const char *)d.mv_data + i * sizeof(e), sizeof(e));
			if (extent_ok(p, &e))
				memset(mark + e.page, MKV_PG_QUARANTINED, e.npages);
		}
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : mkv_err_mdb(rc, "recover");
}

/*
 * Whether the grant word names a current claim whose client is not known
 * dead.  Only deaths on our own kernel count here, which are certain: the
 * slots of others are revoked by the reclamation pass before their pages
 * go (client.c).
 */
static bool
grant_valid(const struct mkv_pool *p, uint64_t w)
{
	uint64_t owner;
	uint32_t slot = MKV_PG_SLOT(w);

	if (MKV_PG_STATE(w) != MKV_PG_GRANTED || slot >= p->sb->max_clients)
		return false;
	owner = __atomic_load_n(&p->slots[slot].owner, __ATOMIC_SEQ_CST);
	return MKV_SLOT_PID(owner) && MKV_SLOT_INC(owner) == MKV_PG_INC(w) &&
		!(mkv_client_local(p, slot, owner) && mkv_client_dead(p, slot, owner));
}

/*
 * Pages of publishes still pending in the request entries belong to their
 * client: a holder that died between marking them used and committing
 * left them looking like nobody's.
 */
static void
recover_pending(struct mkv_pool *p, const uint8_t *mark)
{
	struct mkv_req *reqs = malloc(MAX_BATCH * sizeof(*reqs));
	unsigned n;

	if (!reqs)
		return;
	n = mkv_rq_collect(p, reqs, MAX_BATCH);
	for (unsigned i = 0; i < n; i++) {
		uint64_t grant = mkv_grant_word(reqs[i].slot, reqs[i].inc);

		if (reqs[i].op != MKV_OP_PUBLISH || !extent_ok(p, &reqs[i].ext) ||
		    !grant_valid(p, grant))
			continue;
		for (uint64_t pg = reqs[i].ext.page; pg < reqs[i].ext.page + reqs[i].ext.npages; pg++) {
			uint64_t w = mkv_pt_load(p, pg);

			if (!mark[pg] && w != grant && !grant_valid(p, w))
				__atomic_store_n(&p->pt[pg], grant, __ATOMIC_RELEASE);
		}
	}
	free(reqs);
}

/*
 * A new holder's first txn: store its generation (fencing every older
 * holder out of the registry), then rebuild the page table from the
 * registry, the live grants and the pending publishes, tagging what it
 * sets with its generation.  Called with h.lock held.
 */
int
mkv_recover(struct mkv_pool *p)
{
	uint64_t used = mkv_held_word(MKV_PG_USED, p->h.generation);
	uint64_t quar = mkv_held_word(MKV_PG_QUARANTINED, p->h.generation);
	uint64_t leaked = 0, wm_low, wm_high;
	uint8_t *mark;
	MDB_txn *txn;
	int rc, stale = 0;

	mark = calloc(p->nr_pages, 1);
	if (!mark)
		return mkv_err(MKV_E_NOMEM, "recover: out of memory");
	if ((rc = mkv_reg_wtxn(p, &txn))) {
		free(mark);
		return rc;
	}
	if ((rc = fence(p, txn)) || (rc = recover_marks(p, txn, mark)) ||
	    (rc = mkv_reg_meta_get(p, txn, "wm_low", &wm_low)) ||
	    (rc = mkv_reg_meta_get(p, txn, "wm_high", &wm_high))) {
		mkv_reg_wtxn_end(p, txn, false);
		free(mark);
		return rc;
	}
	if (wm_low > UINT32_MAX || wm_high > UINT32_MAX ||
	    mkv_watermarks_check((unsigned)wm_low, (unsigned)wm_high)) {
		mkv_log(MKV_LOG_WARN, "pool %s: damaged watermarks %llu/%llu: using the defaults",
				p->path, (unsigned long long)wm_low, (unsigned long long)wm_high);
		wm_low = MKV_DEFAULT_LOW_WATERMARK;
		wm_high = MKV_DEFAULT_HIGH_WATERMARK;
	}
	for (uint64_t i = 0; i < p->nr_pages; i++) {
		uint64_t w = mkv_pt_load(p, i), want = MKV_PG_FREE;

		if (mark[i] == MKV_PG_USED)
			want = used;
		else if (mark[i] == MKV_PG_QUARANTINED)
			want = quar;
		else if (grant_valid(p, w))
			want = w;
		if (want == MKV_PG_FREE && w != MKV_PG_FREE)
			leaked++;
		if (w != want)
			__atomic_store_n(&p->pt[i], want, __ATOMIC_RELEASE);
	}
	recover_pending(p, mark);
	free(mark);
	p->h.free_pages = p->h.quarantined_pages = 0;
	for (uint64_t i = 0; i < p->nr_pages; i++) {
		unsigned st = MKV_PG_STATE(mkv_pt_load(p, i));

		p->h.free_pages += st == MKV_PG_FREE;
		p->h.quarantined_pages += st == MKV_PG_QUARANTINED;
	}
	p->super.persist(p->pt, p->nr_pages * sizeof(uint64_t));
	p->h.wm_low = (uint32_t)wm_low;
	p->h.wm_high = (uint32_t)wm_high;
	if ((rc = mkv_reg_wtxn_end(p, txn, true)))
		return rc;
	if (leaked)
		mkv_log(MKV_LOG_INFO, "pool %s: reclaimed %llu pages nothing owned", p->path,
				(unsigned long long)leaked);
	if (mdb_reader_check(p->reg.env, &stale) == 0 && stale)
		mkv_log(MKV_LOG_INFO, "pool %s: cleared %d stale registry readers", p->path, stale);
	return 0;
}

/*
 * Reclaim what dead clients left: their granted pages, their pins, their
 * slots; and stale LMDB readers.  Their pending requests are answered by
 * the holder like anyone's.  With dry, only count.  The holder calls this.
 */
void
mkv_reap(struct mkv_pool *p, bool dry, struct mkv_reclaim *report)
{
	int stale = 0;

	memset(report, 0, sizeof(*report));
	for (uint32_t i = 0; i < p->sb->max_clients; i++) {
		struct mkv_slot *s = &p->slots[i];
		uint64_t owner = __atomic_load_n(&s->owner, __ATOMIC_SEQ_CST);

		if (!mkv_client_dead(p, i, owner))
			continue;
		report->clients++;
		report->pins += __atomic_load_n(&s->pin, __ATOMIC_SEQ_CST) != 0;
		for (unsigned j = 0; j < MKV_RQ_DEPTH; j++) {
			const struct mkv_rq *e = &p->rqs[(size_t)i * MKV_RQ_DEPTH + j];
			uint32_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);

			report->requests += seq != 0 &&
				(uint32_t)(__atomic_load_n(&e->done, __ATOMIC_ACQUIRE) >> 32) != seq;
		}
		for (uint64_t pg = 0; pg < p->nr_pages; pg++)
			report->pages += mkv_pt_load(p, pg) ==
				mkv_grant_word(i, MKV_SLOT_INC(owner));
	}
	if (dry) {
		report->readers = 0;
		return;
	}
	/* claims first, then what they held, then the entries of nodes left with no client */
	for (uint32_t i = 0; i < p->sb->max_clients; i++)
		mkv_client_reap(p, i, __atomic_load_n(&p->slots[i].owner, __ATOMIC_SEQ_CST));
	mkv_pages_reclaim(p, 0);
	if (flock(p->dirfd, LOCK_EX | LOCK_NB) == 0) {
		report->nodes = mkv_nodes_reclaim(p);
		flock(p->dirfd, LOCK_UN);
	}
	if (mdb_reader_check(p->reg.env, &stale) == 0)
		report->readers = (uint32_t)stale;
}

/*
 * The service thread of a handle, from open to close: it advances the
 * client's heartbeat; while the handle holds the lease it also renews the
 * lease every quarter period, collects every pending request, commits them
 * together, posts the answers, and reclaims dead clients once a period.
 * It sleeps on the doorbell while holding, on a private condition else.
 */
void *
mkv_service_main(void *arg)
{
	struct mkv_pool *p = arg;
	struct mkv_holder *h = &p->h;
	uint64_t quarter = p->lease_period_ns / 4, beat = p->client_timeout_ns / 4;
	struct mkv_reclaim rep;
	struct mkv_req *reqs;
	bool stop = false;

	/* memory only under the lock: see the fork handlers in pool.c */
	pthread_mutex_lock(&h->lock);
	h->thread_started = true;
	pthread_cond_broadcast(&h->wake);
	reqs = h->batch = calloc(MAX_BATCH, sizeof(*reqs));
	while (reqs && !stop) {
		uint32_t bell = __atomic_load_n(&p->state->doorbell, __ATOMIC_ACQUIRE);
		uint64_t now = mkv_now_ns();
		unsigned n = 0;

		stop = h->stopping;
		if (now - h->last_beat_ns >= beat) {
			mkv_client_beat(p);
			h->last_beat_ns = now;
		}
		if (h->holding && now - h->last_renew_ns >= quarter && mkv_lease_beat(p) != 0)
			mkv_lease_drop(p);
		if (h->holding && now - h->last_reap_ns >= p->lease_period_ns) {
			mkv_reap(p, false, &rep);
			h->last_reap_ns = now;
		}
		if (h->holding) {
			int rc = (n = mkv_rq_collect(p, reqs, MAX_BATCH)) ? mkv_commit(p, reqs, n) : 0;

			/* MKV_E_TIMEDOUT: nothing applied; they stay pending until we can write */
			if (rc == MKV_E_FENCED)
				mkv_lease_drop(p);
			else if (n && rc != MKV_E_TIMEDOUT)
				mkv_rq_post(p, reqs, n);
		}
		if (n || stop)
			continue;
		if (h->holding) {
			pthread_mutex_unlock(&h->lock);
			mkv_futex_wait(&p->state->doorbell, bell, quarter < beat ? quarter : beat);
			pthread_mutex_lock(&h->lock);
		} else {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += (time_t)(beat / 1000000000ULL);
			ts.tv_nsec += (long)(beat % 1000000000ULL);
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&h->wake, &h->lock, &ts);
		}
	}
	free(reqs);
	h->batch = NULL;
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

/*
 * Requests from this handle, stamped with its slot, committed at once if
 * it holds the lease (taking it first if nobody else has it): true then,
 * each with its result.  False if they must go through the ring (a
 * holder that finds itself fenced drops the lease first).
 */
static bool
commit_here(struct mkv_pool *p, struct mkv_req *reqs, unsigned n)
{
	bool done = false;

	for (unsigned i = 0; i < n; i++) {
		reqs[i].slot = p->slot;
		reqs[i].inc = p->incarnation;
	}
	pthread_mutex_lock(&p->h.lock);
	/* A dead holder is replaced by whoever waits on it (ring.c). */
	if (!p->h.holding && mkv_lease_free(p))
		mkv_lease_try_acquire(p);
	if (p->h.holding) {
		done = mkv_commit(p, reqs, n) != MKV_E_FENCED;
		if (!done)
			mkv_lease_drop(p);
	}
	pthread_mutex_unlock(&p->h.lock);
	return done;
}

/*
 * One request through the write path: committed here if this handle holds
 * the lease (taking it first if nobody else has it), else handed to the
 * holder through our request ring, waiting at most timeout_ns for the
 * answer.  Returns the request's result.
 */
int
mkv_write(struct mkv_pool *p, struct mkv_req *r, uint64_t timeout_ns)
{
	unsigned idx;
	uint32_t seq;
	int rc;

	if (commit_here(p, r, 1))
		return r->result;
	if ((rc = mkv_rq_submit(p, r, false, &idx, &seq, timeout_ns)) ||
	    (rc = mkv_rq_wait(p, idx, seq, r, timeout_ns, false)))
		return rc;
	return r->result;
}

/*
 * Several requests through the write path, each with its own result: in
 * one txn when this handle holds the lease, else through our ring as
 * asynchronous entries, so that more requests than the ring has entries
 * still flow (the oldest answers are kept aside as the ring fills).  Each
 * wait is bounded by mkv_write_timeout().  Returns 0, or the error that
 * kept requests from being sent.
 */
int
mkv_write_many(struct mkv_pool *p, struct mkv_req *reqs, unsigned n)
{
	struct { unsigned idx; uint32_t seq; } *sent;
	uint64_t timeout = mkv_write_timeout(p);
	unsigned i, nsent = 0;
	int rc = 0;

	if (commit_here(p, reqs, n))
		return 0;
	if (!(sent = malloc(n * sizeof(*sent))))
		return mkv_err(MKV_E_NOMEM, "write: out of memory");
	for (; nsent < n; nsent++)
		if ((rc = mkv_rq_submit(p, &reqs[nsent], true, &sent[nsent].idx, &sent[nsent].seq,
				timeout)))
			break;
	for (i = 0; i < nsent; i++) {
		int w = mkv_rq_wait(p, sent[i].idx, sent[i].seq, &reqs[i], timeout, false);

		if (w)
			reqs[i].result = w;
	}
	for (i = nsent; i < n; i++)
		reqs[i].result = rc;
	free(sent);
	return rc;
}
