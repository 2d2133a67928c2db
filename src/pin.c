/* SPDX-License-Identifier: MIT */
/*
 * pin.c -- read pins: what keeps a view's pages from being reused.
 *
 * Before a lookup that returns views, a client publishes in its slot a pin:
 * a registry txn id read before the lookup's snapshot is taken.  Pages freed
 * by a delete committed in txn D are reused only when every live pin is
 * greater than D (see mkv_reg_last_txn() for why "greater" and not "at
 * least").  The pin stays while any view taken at or after it is out; this
 * process's outstanding views are counted per pinned txn (epoch.c), and
 * the oldest is the slot's pin.
 */
#include "config.h"

#include "internal.h"

/*
 * Count nviews views as taken from now on; returns the txn they are counted
 * under (0 with the message set if out of memory).  The pin is visible to
 * every other process before this returns.
 */
uint64_t
mkv_pin_enter(struct mkv_pool *p, uint64_t nviews)
{
	struct mkv_epochs *ep = &p->epochs;
	uint64_t txn;
	bool first;

	pthread_mutex_lock(&ep->lock);
	txn = mkv_reg_last_txn(p);
	first = ep->n == 0;
	if (mkv_epoch_add(ep, txn, nviews))
		txn = 0;
	else if (first)
		mkv_epoch_publish(p, &p->slots[p->slot].pin, txn);
	pthread_mutex_unlock(&ep->lock);
	return txn;
}

void
mkv_pin_leave(struct mkv_pool *p, uint64_t txn, uint64_t nviews)
{
	struct mkv_epochs *ep = &p->epochs;
	uint64_t head;

	pthread_mutex_lock(&ep->lock);
	if (mkv_epoch_sub(ep, txn, nviews, &head))
		mkv_epoch_publish(p, &p->slots[p->slot].pin, head);
	pthread_mutex_unlock(&ep->lock);
}
