/* SPDX-License-Identifier: MIT */
/*
 * evict.c -- the eviction policy: which values go when the pool runs short
 * of free pages, and the clock of ages it judges them by.
 *
 * The clock: the tick advances each time 1/128 of the pool has been
 * published, so a value's age counts the pages published since it was last
 * read, as an LRU's stack distance does (to 1/128 of the pool, up to
 * MKV_AGE_CAP ticks: 1.25 times the pool).  It advances after a commit, so
 * the blocks of a chain published together have one age.  Every 64 ticks
 * every hint's age is capped, so none can wrap round (255 ticks) and look
 * young.
 *
 * The policy: readers store the holder's tick in a value's hint.  From the
 * histogram of ages comes the youngest age that still frees enough, and a
 * hand sweeps the pages for values that old: a first turn takes the values
 * older than that age, the next ones those of that age too, as an exact
 * LRU would up to the granularity of a tick.  A value goes only if no
 * cached block names it as parent: a prefix lookup stops at the first
 * missing block, so evicting a block that others extend would strand them.
 * When it goes, so does its parent if the hand passed over it for that and
 * it is old enough, so an old chain goes from its tail to its head.  The
 * ends of chains can be younger than the values the histogram counted (a
 * chain published piece by piece and never read is oldest at its head): if
 * two turns at that age are not enough, each next turn halves the age, down
 * to taking the ends of chains of any age.  A key a client holds
 * (hold.c) is passed over, whatever its age.
 *
 * How much: the room is the pages free or quarantined, and one eviction
 * frees at least a batch (mkv_evict_batch()); the holder's commit sizes
 * its evictions so.
 *
 * The policy only chooses.  It deletes through the function its caller
 * passes down: the holder's commit deletes in its registry txn (commit.c);
 * a dry run deletes nothing and keeps what it would have taken to itself,
 * so that it follows chains as the real run does.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A table from key hash to a number, for one sweep (open addressing). */
struct hmap {
	struct hent {
		uint64_t hash;  /* 0: empty */
		uint64_t val;
	} *v;
	size_t n, cap;
};

static struct hent *
hmap_slot(struct hent *v, size_t cap, uint64_t hash)
{
	size_t i = hash & (cap - 1);

	while (v[i].hash && v[i].hash != hash)
		i = (i + 1) & (cap - 1);
	return &v[i];
}

/* The entry of hash; with add, made (val 0) if absent.  NULL: none, or no memory. */
static struct hent *
hmap_get(struct hmap *m, uint64_t hash, bool add)
{
	struct hent *e;

	if (add && 2 * (m->n + 1) > m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 256;
		struct hent *v = calloc(cap, sizeof(*v));

		if (!v)
			return NULL;  /* a hint lost: that value waits for the next sweep */
		for (size_t i = 0; i < m->cap; i++)
			if (m->v[i].hash)
				*hmap_slot(v, cap, m->v[i].hash) = m->v[i];
		free(m->v);
		m->v = v;
		m->cap = cap;
	}
	if (!m->cap)
		return NULL;
	e = hmap_slot(m->v, m->cap, hash);
	if (e->hash || !add)
		return e->hash ? e : NULL;
	*e = (struct hent){ hash, 0 };
	m->n++;
	return e;
}

/*
 * One eviction call: what it has taken so far, and the cold values it
 * passed over because blocks after them are cached, so that evicting a
 * block can find its parent among them.
 */
struct sweep {
	struct mkv_pool *p;
	struct mkv_txn *txn;             /* the registry as the policy reads it */
	mkv_evict_del_fn del;
	void *arg;
	uint64_t tick, hand;
	uint64_t want, have, evicted;
	struct hmap heads;        /* key hash -> page of a value passed over; ~0: taken */
	uint64_t *held;           /* buckets of the keys held (hold.c); NULL: none */
	/* a dry run deletes nothing: what it would have deleted is kept here */
	bool dry;
	uint8_t *taken;           /* first pages of the values taken */
	struct hmap drops;        /* key hash -> children taken */
};

/*
 * The age (in ticks) from which values go so that at least need of them
 * go: the histogram of the ages of the values' first pages, oldest first.
 * With cap, ages past MKV_AGE_CAP are brought back to it on the way.
 */
static unsigned
age_threshold(struct mkv_pool *p, uint64_t tick, uint64_t need, bool cap)
{
	uint64_t count[MKV_AGE_CAP + 1] = { 0 }, sum = 0;
	uint8_t capped = (uint8_t)((tick + 254 - MKV_AGE_CAP) % 255 + 1);

	mkv_share_inval(p, p->hints, p->nr_pages);
	for (uint64_t pg = 0; pg < p->nr_pages; pg++) {
		uint8_t h = __atomic_load_n(&p->hints[pg], __ATOMIC_RELAXED);
		unsigned age = mkv_evict_age(tick, h);

		if (!h || MKV_PG_STATE(mkv_pages_load(p, pg)) != MKV_PG_USED)
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
	if (cap)
		mkv_share_wb(p, p->hints, p->nr_pages);
	for (unsigned a = MKV_AGE_CAP; a > 0; a--)
		if ((sum += count[a]) >= need)
			return a;
	return 0;
}

/*
 * Advance the clock of ages by pages published (see the top of this file),
 * after every commit: with it, the rest of the holder's words on its line,
 * the allocation rotor and the hand, go out too, once per commit.
 */
void
mkv_evict_tick(struct mkv_pool *p, uint64_t pages)
{
	uint64_t quantum = p->nr_pages >= 128 ? p->nr_pages / 128 : 1;
	uint64_t sum = p->state->tick_pages % quantum + pages, tick = mkv_evict_clock(p);

	for (uint64_t n = sum / quantum; n; n--) {
		tick = tick % 255 + 1;
		if (tick % 64 == 0)
			age_threshold(p, tick, 0, true);
		__atomic_store_n(&p->state->tick, tick, __ATOMIC_RELAXED);
	}
	p->state->tick_pages = sum % quantum;
	mkv_share_persist(p, p->state, offsetof(struct mkv_state, reserved0));
}

/* The key of the value whose first page is pg, if one is there and not taken yet. */
static bool
page_key(struct sweep *w, uint64_t pg, uint8_t key[MKV_KEY_MAX], size_t *klen)
{
	return MKV_PG_STATE(mkv_pages_load(w->p, pg)) == MKV_PG_USED && !(w->taken && w->taken[pg]) &&
		mkv_reg_page_key(w->p, w->txn, pg, key, klen) == 0;
}

/* No cached block names the key of this hash as its parent: the end of its chains. */
static bool
is_tail(struct sweep *w, uint64_t hash)
{
	const struct hent *d;
	uint64_t kids;

	if (mkv_reg_kids(w->p, w->txn, hash, &kids))
		return true;
	d = w->dry ? hmap_get(&w->drops, hash, false) : NULL;
	return d && kids <= d->val;
}

/* At least min_age ticks old, the end of its chains, and not held. */
static bool
evictable(struct sweep *w, uint64_t pg, unsigned min_age, uint8_t key[MKV_KEY_MAX],
		size_t *klen)
{
	uint64_t hash;

	if (!page_key(w, pg, key, klen) ||
	    mkv_evict_age(w->tick, __atomic_load_n(&w->p->hints[pg], __ATOMIC_RELAXED)) < min_age)
		return false;
	hash = mkv_hash_key(key, *klen);
	return !mkv_hold_has(w->held, hash) && is_tail(w, hash);
}

/* The page of a cold value passed over with this key hash, once. */
static bool
head_take(struct sweep *w, uint64_t hash, uint64_t *pg)
{
	struct hent *h = hmap_get(&w->heads, hash, false);

	if (!h || h->val == UINT64_MAX)
		return false;
	*pg = h->val;
	h->val = UINT64_MAX;
	return true;
}

static void
head_add(struct sweep *w, uint64_t hash, uint64_t pg)
{
	struct hent *h = hmap_get(&w->heads, hash, true);

	if (h)
		h->val = pg;
}

/*
 * Evict the value of key, then its ancestors as long as the sweep passed
 * them over and each is now the end of its chains.  *npages: the pages of
 * the first value.  A value the deleter refuses stays.
 */
static int
evict_chain(struct sweep *w, const uint8_t *key, size_t klen, unsigned min_age,
		uint64_t *npages)
{
	uint8_t up[MKV_KEY_MAX];
	uint64_t pg, parent;
	struct mkv_extent ext;
	int rc;

	for (*npages = 0;;) {
		if ((rc = w->del(w->arg, key, klen, &ext, &parent)))
			return rc > 0 ? 0 : rc;
		*npages = *npages ? *npages : ext.npages;
		w->have += ext.npages;
		w->evicted++;
		if (w->have >= w->want || !parent || !head_take(w, parent, &pg) ||
		    !evictable(w, pg, min_age, up, &klen))
			return 0;
		key = up;
	}
}

/* One turn of the hand over the page table, taking values at least min_age old. */
static int
turn(struct sweep *w, unsigned min_age)
{
	uint8_t key[MKV_KEY_MAX];
	size_t klen;
	int rc = 0;

	for (uint64_t scanned = 0; w->have < w->want && scanned < w->p->nr_pages && !rc;) {
		uint64_t step = 0, pg = w->hand < w->p->nr_pages ? w->hand : 0;
		uint8_t h = __atomic_load_n(&w->p->hints[pg], __ATOMIC_RELAXED);

		/*
		 * 0: not a value's first page; the registry is asked only about
		 * old ones.  The last turn asks about every page in use: a hint
		 * undone to 0 by another host's write-back must not keep its
		 * value from eviction.
		 */
		if ((h || !min_age) && mkv_evict_age(w->tick, h) >= min_age &&
		    page_key(w, pg, key, &klen)) {
			uint64_t hash = mkv_hash_key(key, klen);
			/* a held key is passed over, and is no chain's head to take later */
			bool held = mkv_hold_has(w->held, hash);

			if (!held && is_tail(w, hash))
				rc = evict_chain(w, key, klen, min_age, &step);
			else if (!held)
				head_add(w, hash, pg);
		}
		step = step ? step : 1;
		scanned += step;
		w->hand = pg + step;
	}
	return rc;
}

/* Turns of the hand until enough is taken (see the top of this file). */
static int
sweep(struct sweep *w)
{
	unsigned age;
	int rc;

	if (!w->dry)
		mkv_hold_sweep_begin(w->p);
	if ((rc = mkv_hold_gather(w->p, &w->held)))
		return rc;
	age = age_threshold(w->p, w->tick, w->want - w->have, !w->dry);

	for (unsigned t = 0;; t++) {
		unsigned min_age = t == 0 ? (age < MKV_AGE_CAP ? age + 1 : age) :
				t <= 2 ? age : age >> (t - 2);

		rc = turn(w, min_age);
		if (w->have >= w->want || rc || (t >= 2 && min_age == 0))
			break;
	}
	free(w->heads.v);
	free(w->held);
	return rc;
}

/* Pages free or quarantined (the holder's count: a txn's deletes quarantined theirs already). */
uint64_t
mkv_evict_room(const struct mkv_pool *p)
{
	return p->h.free_pages + p->h.quarantined_pages;
}

/*
 * The least one eviction frees: what is in flight (inflight pages asked
 * for), at least 1/128 of the pool and the gap between the watermarks.
 * Each sweep reads the ages of the whole pool: a commit that has to evict
 * frees room for many allocations, not for the one that asked.
 */
uint64_t
mkv_evict_batch(const struct mkv_pool *p, uint64_t inflight)
{
	uint64_t n = p->nr_pages >= 128 ? p->nr_pages / 128 : 1,
		gap = mkv_evict_pct_pages(p, p->h.wm_high) - mkv_evict_pct_pages(p, p->h.wm_low);

	n = n > gap ? n : gap;
	return n > inflight ? n : inflight;
}

/*
 * Evict the least recently read values until free and quarantined pages,
 * have now, reach want; del deletes each (see mkv_evict_del_fn).  Called
 * by the holder inside its txn.  *evicted: how many values went.
 */
int
mkv_evict_to(struct mkv_pool *p, struct mkv_txn *txn, uint64_t have, uint64_t want,
		mkv_evict_del_fn del, void *arg, uint64_t *evicted)
{
	struct sweep w = { .p = p, .txn = txn, .del = del, .arg = arg, .tick = mkv_evict_clock(p),
			.hand = p->state->clock, .want = want, .have = have };
	int rc;

	*evicted = 0;
	if (have >= want)
		return 0;
	rc = sweep(&w);
	/* written back with the clock of ages, at the end of the commit */
	p->state->clock = w.hand;
	*evicted = w.evicted;
	return rc;
}

/* The dry run's deleter: take the value in the sweep's own records only. */
static int
dry_del(void *arg, const void *key, size_t klen, struct mkv_extent *ext, uint64_t *parent)
{
	struct sweep *w = arg;
	struct mkv_entry e;
	struct hent *d;

	if (mkv_reg_lookup(w->p, w->txn, key, klen, &e))
		return 1;
	w->taken[e.page] = 1;
	*ext = (struct mkv_extent){ e.page, e.npages };
	*parent = e.parent;
	if (e.parent && (d = hmap_get(&w->drops, e.parent, true)))
		d->val++;
	return 0;
}

/*
 * What eviction to free_pct percent would take now, by the same policy,
 * changing nothing: no hint capped, the hand not moved, nothing deleted.
 */
int
mkv_evict_dry(struct mkv_pool *p, unsigned free_pct, struct mkv_evict *report)
{
	struct sweep w = { .p = p, .del = dry_del, .want = mkv_evict_pct_pages(p, free_pct),
			.dry = true };
	uint64_t start;
	int rc;

	/* the holder's words: its tick and hand, the page table */
	mkv_share_inval(p, p->state, MKV_CACHELINE);
	mkv_pages_fresh(p);
	w.tick = mkv_evict_clock(p);
	w.hand = p->state->clock;
	w.arg = &w;
	for (uint64_t i = 0; i < p->nr_pages; i++) {
		unsigned st = MKV_PG_STATE(mkv_pages_load(p, i));

		w.have += st == MKV_PG_FREE || st == MKV_PG_QUARANTINED;
	}
	report->pages_free = start = w.have;
	if (w.have >= w.want)
		return 0;
	if (!(w.taken = calloc(p->nr_pages, 1)))
		return mkv_err(MKV_E_NOMEM, "evict: out of memory");
	if ((rc = mkv_reg_rtxn(p, &w.txn)) == 0) {
		rc = sweep(&w);
		mkv_reg_rtxn_done(p, w.txn);
	}
	free(w.taken);
	free(w.drops.v);
	report->keys = w.evicted;
	report->pages = w.have - start;
	return rc;
}
