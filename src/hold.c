/* SPDX-License-Identifier: MIT */
/*
 * hold.c -- keys held against eviction, without a read pin.
 *
 * A view pins an epoch, and an epoch holds back the reuse of every page
 * deleted after it, the whole pool's.  An application that wants a key to
 * stay for a while (a request between its lookup and its load, LMCache's
 * key pins) holds it instead: eviction passes it over, and nothing else
 * is held back.  A hold does not stop mkv_del().
 *
 * Each client slot has a block of bits in `super` (struct
 * mkv_hold_block), written by its owner only: bit b is set while the
 * owner holds a key whose hash falls in bucket b.  The process keeps the
 * exact counts (a tree of key hashes and the number of holds of each, and
 * the number of distinct hashes in each bucket) and stores a bit only when
 * its bucket's count leaves or reaches 0.  Eviction gathers the bits of
 * every standing claim into one set at the start of a sweep and passes
 * over any key whose bucket is in it: another key of the same bucket is
 * kept too, which costs nothing but room (with k keys held pool-wide,
 * a fraction 1 - exp(-k / MKV_HOLD_BUCKETS) of the others are kept by
 * chance).  A dead client's holds count until its claim is revoked.
 *
 * The race with an eviction.  The holder's txn that evicts makes
 * state->sweeps odd before it gathers the bits, and even once the txn has
 * committed or failed.  mkv_hold() sets its bits, makes them visible (a
 * full fence; between hosts, written back), then reads sweeps.  An
 * eviction that gathered before our bits were visible made sweeps odd
 * before we read it: if we read an odd value, we wait for it to change;
 * an even one shows that every such eviction is over.  Only then do we
 * look the keys up, in a snapshot that cannot predate what those
 * evictions deleted; a key found there is held from then on, since every
 * later eviction sees our bit.  A holder that dies inside such a txn
 * leaves sweeps odd: its successor moves it on in its first txn that
 * evicts, and any txn it commits ends it (mkv_hold_sweep_end()); a
 * mkv_hold() that waits longer than a lease period for that fails with
 * MKV_E_TIMEDOUT, holding nothing.
 */
#include "config.h"

#include <search.h>
#include <stdlib.h>
#include <time.h>

#include "internal.h"

struct held {
	uint64_t hash;
	uint64_t n;        /* holds of keys of this hash */
};

static int
held_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct held *)a)->hash, y = ((const struct held *)b)->hash;

	return x < y ? -1 : x > y;
}

static uint32_t
bucket(uint64_t hash)
{
	/* mkv_hash_key() sets bit 0 */
	return (uint32_t)((hash >> 1) % MKV_HOLD_BUCKETS);
}

int
mkv_hold_init(struct mkv_pool *p)
{
	int rc = pthread_mutex_init(&p->held.lock, NULL);

	return rc ? mkv_err(-rc, "mkv_pool_open: cannot make a mutex") : 0;
}

static void
node_free(void *node)
{
	free(node);
}

void
mkv_hold_fini(struct mkv_pool *p, bool forked)
{
	tdestroy(p->held.tree, node_free);
	p->held.tree = NULL;
	free(p->held.count);
	p->held.count = NULL;
	if (!forked)
		pthread_mutex_destroy(&p->held.lock);
}

/* Our block, for this claim: a new claim's starts empty (lock held). */
static struct mkv_hold_block *
block(struct mkv_pool *p)
{
	struct mkv_hold_block *b = &p->holds[p->slot];
	uint64_t owner = mkv_client_owner(p);

	if (__atomic_load_n(&b->owner, __ATOMIC_RELAXED) != owner) {
		/*
		 * nothing counts until owner names us: the bits are cleared
		 * and written back first; the line of owner goes with the
		 * count of the first bit set (bit_set())
		 */
		__atomic_store_n(&b->buckets, 0, __ATOMIC_RELAXED);
		/* word by word: the holder may be gathering them (a thread of ours) */
		for (size_t w = 0; w < MKV_HOLD_BUCKETS / 64; w++)
			__atomic_store_n(&b->bits[w], 0, __ATOMIC_RELAXED);
		mkv_share_wb(p, b->bits, sizeof(b->bits));
		__atomic_store_n(&b->owner, owner, __ATOMIC_SEQ_CST);
	}
	return b;
}

/* Flip bucket k's bit to on (lock held); its word and the count written back. */
static void
bit_set(struct mkv_pool *p, struct mkv_hold_block *b, uint32_t k, bool on)
{
	uint64_t *w = &b->bits[k / 64], m = 1ULL << (k % 64);

	if (on)
		__atomic_or_fetch(w, m, __ATOMIC_RELAXED);
	else
		__atomic_and_fetch(w, ~m, __ATOMIC_RELAXED);
	__atomic_store_n(&b->buckets, b->buckets + (on ? 1 : (uint64_t)-1), __ATOMIC_RELAXED);
	mkv_share_wb(p, w, sizeof(*w));
	mkv_share_wb(p, &b->buckets, sizeof(b->buckets));
}

/* One more hold of a key of this hash (lock held). */
static int
hold_one(struct mkv_pool *p, uint64_t hash)
{
	struct held key = { hash, 0 }, *h, **slot;

	if (!p->held.count && !(p->held.count = calloc(MKV_HOLD_BUCKETS, sizeof(uint32_t))))
		return mkv_err(MKV_E_NOMEM, "mkv_hold: out of memory");
	if (!(h = malloc(sizeof(*h))))
		return mkv_err(MKV_E_NOMEM, "mkv_hold: out of memory");
	*h = key;
	if (!(slot = tsearch(h, &p->held.tree, held_cmp))) {
		free(h);
		return mkv_err(MKV_E_NOMEM, "mkv_hold: out of memory");
	}
	if (*slot != h)
		free(h);
	if ((*slot)->n++ == 0 && p->held.count[bucket(hash)]++ == 0)
		bit_set(p, block(p), bucket(hash), true);
	return 0;
}

/* One hold fewer; MKV_E_NOTFOUND if none (lock held). */
static int
unhold_one(struct mkv_pool *p, uint64_t hash)
{
	struct held key = { hash, 0 }, **slot = tfind(&key, &p->held.tree, held_cmp), *h;

	if (!slot)
		return MKV_E_NOTFOUND;
	h = *slot;
	if (--h->n)
		return 0;
	tdelete(&key, &p->held.tree, held_cmp);
	free(h);
	if (--p->held.count[bucket(hash)] == 0)
		bit_set(p, block(p), bucket(hash), false);
	return 0;
}

static void
unhold_keys(struct mkv_pool *p, const struct mkv_key *keys, size_t n)
{
	pthread_mutex_lock(&p->held.lock);
	for (size_t i = 0; i < n; i++)
		unhold_one(p, mkv_hash_key(keys[i].data, keys[i].len));
	pthread_mutex_unlock(&p->held.lock);
}

/*
 * Wait, with our bits visible, until no eviction that may have gathered
 * the bits before them is under way (see the top of this file).
 */
static int
sweeps_settled(struct mkv_pool *p)
{
	uint64_t s, until = mkv_clock_now() + p->lease_period_ns, nap = 20000;

	mkv_full_fence();
	if (!((s = mkv_share_load(p, &p->state->sweeps)) & 1))
		return 0;
	while (mkv_share_load(p, &p->state->sweeps) == s) {
		struct timespec ts = { 0, (long)nap };

		if (mkv_clock_now() >= until)
			return mkv_err(MKV_E_TIMEDOUT,
					"mkv_hold: pool %s: an eviction has been under way for a lease period (its holder stopped or died?)",
					p->path);
		nanosleep(&ts, NULL);
		nap = nap * 2 < 1000000 ? nap * 2 : 1000000;
	}
	return 0;
}

MKV_EXPORT int
mkv_hold(struct mkv_pool *pool, const struct mkv_key *keys, size_t n, size_t *held)
{
	struct mkv_txn *txn;
	size_t i = 0;
	int rc = 0;

	mkv_err_clear();
	if ((rc = mkv_client_usable(pool, "mkv_hold")) ||
	    (rc = mkv_valid_keys(keys, n, "mkv_hold")))
		return rc;
	if (!held)
		return mkv_err(MKV_E_INVAL, "mkv_hold: held is NULL");
	*held = 0;
	if (n == 0)
		return 0;
	pthread_mutex_lock(&pool->held.lock);
	for (; i < n && !rc; i++)
		rc = hold_one(pool, mkv_hash_key(keys[i].data, keys[i].len));
	pthread_mutex_unlock(&pool->held.lock);
	if (rc) {
		unhold_keys(pool, keys, i - 1);
		return rc;
	}
	if ((rc = sweeps_settled(pool)) || (rc = mkv_reg_rtxn(pool, &txn))) {
		unhold_keys(pool, keys, n);
		return rc;
	}
	/* our claim stood with our bits set: every sweep from here on counts them */
	if (!(rc = mkv_client_check_fresh(pool, "mkv_hold")))
		for (i = 0; i < n; i++)
			if ((rc = mkv_reg_exists(pool, txn, keys[i].data, keys[i].len)))
				break;
	mkv_reg_rtxn_done(pool, txn);
	if (rc && rc != MKV_E_NOTFOUND) {
		unhold_keys(pool, keys, n);
		return rc;
	}
	unhold_keys(pool, keys + i, n - i);
	mkv_client_count(pool, i, i < n);
	*held = i;
	return 0;
}

MKV_EXPORT int
mkv_unhold(struct mkv_pool *pool, const struct mkv_key *keys, size_t n)
{
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_usable(pool, "mkv_unhold")) ||
	    (rc = mkv_valid_keys(keys, n, "mkv_unhold")))
		return rc;
	pthread_mutex_lock(&pool->held.lock);
	for (size_t i = 0; i < n && !rc; i++)
		if ((rc = unhold_one(pool, mkv_hash_key(keys[i].data, keys[i].len))))
			rc = mkv_err(rc, "mkv_unhold: key %zu of %zu is not held", i, n);
	pthread_mutex_unlock(&pool->held.lock);
	return rc;
}

/*
 * sweeps moved from s (just loaded, or the value we set) to v, only if it
 * still reads s: on one host a deposed holder must not undo its
 * successor's value; between hosts no other holder writes it while we are
 * inside our write window.  Written back at `site`, not persisted: the
 * holds it orders die with their processes, and so does any wait for it.
 */
static bool
sweeps_move(struct mkv_pool *p, uint64_t s, uint64_t v, const char *site)
{
	bool moved;

	moved = __atomic_compare_exchange_n(&p->state->sweeps, &s, v, false, __ATOMIC_SEQ_CST,
			__ATOMIC_SEQ_CST);
	mkv_share_wb_at(p, &p->state->sweeps, sizeof(p->state->sweeps), site);
	return moved;
}

/*
 * The holder, in its txn, before an eviction gathers the bits: sweeps made
 * odd, or moved past an odd value a holder that died inside its txn left.
 */
void
mkv_hold_sweep_begin(struct mkv_pool *p)
{
	uint64_t s = mkv_share_load(p, &p->state->sweeps);

	if (p->held.sweep && p->held.sweep == s)
		return;  /* begun by this round already (a txn tried again) */
	/* named: a test stops the holder right after it (t/check_sites.c) */
	if (sweeps_move(p, s, s + ((s & 1) ? 2 : 1), MKV_SITE_NAMED(sweep_begun)))
		p->held.sweep = s + ((s & 1) ? 2 : 1);
	mkv_full_fence();
}

/*
 * The holder, after each round of txns: its own sweep is over, whether the
 * txn committed or not.  A txn that committed also ends one a dead holder
 * left odd: its txn is over, since a holder writes only once every older
 * one is fenced out or its write window closed.
 */
void
mkv_hold_sweep_end(struct mkv_pool *p, bool committed)
{
	uint64_t s = p->held.sweep;

	p->held.sweep = 0;
	if (!s && committed)
		s = mkv_share_load(p, &p->state->sweeps);
	if (s & 1)
		sweeps_move(p, s, s + 1, MKV_SITE_NAMED(sweep_ended));
}

/*
 * The buckets every standing claim holds, gathered into one set (*set
 * NULL: nothing is held).  Called by the holder after
 * mkv_hold_sweep_begin(), and by a dry run.
 */
int
mkv_hold_gather(struct mkv_pool *p, uint64_t **set)
{
	uint64_t *all = NULL;

	*set = NULL;
	for (uint32_t i = 0; i < p->sb->max_clients; i++) {
		const struct mkv_hold_block *b = &p->holds[i];
		uint64_t owner = mkv_share_load(p, &p->slots[i].owner);

		if (!mkv_client_claimed(p, i, owner))
			continue;
		mkv_share_inval(p, b, MKV_CACHELINE);
		if (__atomic_load_n(&b->owner, __ATOMIC_SEQ_CST) != owner ||
		    !__atomic_load_n(&b->buckets, __ATOMIC_RELAXED))
			continue;
		if (!all && !(all = calloc(1, sizeof(b->bits))))
			return mkv_err(MKV_E_NOMEM, "evict: out of memory");
		mkv_share_inval(p, b->bits, sizeof(b->bits));
		for (size_t w = 0; w < MKV_HOLD_BUCKETS / 64; w++)
			all[w] |= __atomic_load_n(&b->bits[w], __ATOMIC_RELAXED);
	}
	*set = all;
	return 0;
}

bool
mkv_hold_has(const uint64_t *set, uint64_t hash)
{
	uint32_t k = bucket(hash);

	return set && (set[k / 64] >> (k % 64) & 1);
}
