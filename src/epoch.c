/* SPDX-License-Identifier: MIT */
/*
 * epoch.c -- counts by registry txn, below the registry: a ring of counts
 * ordered by txn, whose head a client publishes in a word of its slot,
 * and the lowest such word among live clients.  Read pins (pin.c) and
 * registry snapshots of non-coherent pools (regsnap.c) are both kept so.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

int
mkv_epoch_init(struct mkv_epochs *ep)
{
	memset(ep, 0, sizeof(*ep));
	if (pthread_mutex_init(&ep->lock, NULL))
		return mkv_err(MKV_E_NOMEM, "epoch: mutex");
	return 0;
}

void
mkv_epoch_fini(struct mkv_epochs *ep)
{
	free(ep->ring);
	pthread_mutex_destroy(&ep->lock);
}

static struct mkv_epoch_ent *
ring_at(struct mkv_epochs *ep, unsigned i)
{
	return &ep->ring[(ep->head + i) % ep->cap];
}

static int
ring_grow(struct mkv_epochs *ep)
{
	unsigned cap = ep->cap ? ep->cap * 2 : 16;
	struct mkv_epoch_ent *r = malloc(cap * sizeof(*r));

	if (!r)
		return -1;
	for (unsigned i = 0; i < ep->n; i++)
		r[i] = *ring_at(ep, i);
	free(ep->ring);
	ep->ring = r;
	ep->cap = cap;
	ep->head = 0;
	return 0;
}

/*
 * Publish a word of our slot's owner line (our pin, our registry
 * snapshot).  The caller learns from mkv_client_alive() whether our claim
 * on the slot was revoked meanwhile (we were judged dead): the word then
 * counts for nothing.  Nobody else writes it meanwhile: a slot is claimed
 * only by a process that locked its byte (client.c), which we hold while we
 * live, and in a non-coherent pool only by a process of our host, where
 * that lock is exact.  In a coherent pool shared by several kernels (a
 * coherent CXL window) a process of another kernel may have claimed the
 * slot from under our lock: there the compare-and-swap, exact in such a
 * window, puts back the word that was there (read for that alone).
 */
void
mkv_epoch_publish(struct mkv_pool *p, uint64_t *w, uint64_t v)
{
	uint64_t old = __atomic_load_n(w, __ATOMIC_SEQ_CST);

	mkv_share_store(p, w, v);
	mkv_full_fence();
	if (!p->noncoherent && !mkv_client_alive(p))
		mkv_share_cas(p, w, v, old);
}

/* With ep->lock held: count n more under txn, no older than any counted. */
int
mkv_epoch_add(struct mkv_epochs *ep, uint64_t txn, uint64_t n)
{
	struct mkv_epoch_ent *tail = ep->n ? ring_at(ep, ep->n - 1) : NULL;

	if (tail && tail->txn == txn) {
		tail->count += n;
		return 0;
	}
	if (ep->n == ep->cap && ring_grow(ep))
		return mkv_err(MKV_E_NOMEM, "epoch: out of memory");
	*ring_at(ep, ep->n++) = (struct mkv_epoch_ent){ txn, n };
	return 0;
}

/*
 * With ep->lock held: n fewer under txn.  True if the oldest txn counted
 * changed; *head is then the new one (0: none).
 */
bool
mkv_epoch_sub(struct mkv_epochs *ep, uint64_t txn, uint64_t n, uint64_t *head)
{
	bool changed = false;

	for (unsigned i = 0; i < ep->n; i++) {
		struct mkv_epoch_ent *e = ring_at(ep, i);

		if (e->txn == txn) {
			e->count -= n < e->count ? n : e->count;
			break;
		}
	}
	while (ep->n && ring_at(ep, 0)->count == 0) {
		ep->head = (ep->head + 1) % ep->cap;
		ep->n--;
		changed = true;
	}
	*head = ep->n ? ring_at(ep, 0)->txn : 0;
	return changed;
}

/*
 * The lowest nonzero value of a word of the slots' owner lines (a pin, a
 * registry snap: `word`, its offset) among live clients, or UINT64_MAX if
 * none; with `others`, among clients of other kernels only.  Values at or
 * below upto are checked for liveness (a dead client's word must not hold
 * anything back forever); higher ones cannot hold back anything up to
 * upto anyway.
 */
uint64_t
mkv_epoch_min(struct mkv_pool *p, size_t word, uint64_t upto, bool others)
{
	uint64_t min = UINT64_MAX;

	mkv_full_fence();
	for (uint32_t i = 0; i < p->sb->max_clients; i++) {
		const struct mkv_slot *s = &p->slots[i];
		uint64_t owner = mkv_share_load(p, &s->owner);
		uint64_t v = mkv_share_load(p, (const uint64_t *)((const char *)s + word));

		if (v == 0 || v >= min || !mkv_client_claimed(p, i, owner) ||
		    (others && mkv_client_local(p, i, owner)))
			continue;
		/* a dead client's word holds nothing back once its claim is revoked */
		if (v <= upto && mkv_client_reap(p, i, owner))
			continue;
		min = v;
	}
	return min;
}
