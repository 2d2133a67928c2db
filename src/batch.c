/* SPDX-License-Identifier: MIT */
/*
 * batch.c -- what one commit changes besides the registry: the page-table
 * moves made as its requests are applied (undone if the txn fails), the
 * quarantined pages it releases (freed once it commits), and the records
 * it leaves of its deletes.
 */
#include "config.h"

#include <stdlib.h>

#include "internal.h"

int
mkv_batch_add(struct moves *x, const struct mkv_extent *ext, uint64_t from, uint64_t to)
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

/*
 * A request's error after it changed the registry: the txn fails.  Any
 * other error a request returns is a refusal that changed nothing, and the
 * txn goes on with the next request.
 */
int
mkv_batch_fail(struct batch *b, int rc)
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
bool
mkv_batch_move(struct mkv_pool *p, struct batch *b, const struct mkv_extent *ext, uint64_t from,
		uint64_t to, int *rc)
{
	if ((*rc = mkv_batch_add(&b->done, ext, from, to)))
		return false;
	if (mkv_pages_move_all(p, ext, from, to))
		return true;
	b->done.n--;
	return false;
}

/* Undo the last move, of a request refused before it changed the registry. */
void
mkv_batch_unmove(struct mkv_pool *p, struct batch *b)
{
	const struct move *m = &b->done.v[--b->done.n];

	mkv_pages_move(p, &m->ext, m->to, m->from);
}

void
mkv_batch_undo(struct mkv_pool *p, struct batch *b)
{
	while (b->done.n)
		mkv_batch_unmove(p, b);
}

/* Where mkv_batch_release() puts the pages of the records it drops. */
struct releasing {
	struct mkv_pool *p;
	struct moves *released;
	uint64_t quar;
};

static int
release_one(void *arg, const struct mkv_extent *e)
{
	struct releasing *r = arg;

	if (!mkv_pages_extent_ok(r->p, e))
		return 1;  /* outside the arena: skipped, as damage */
	return mkv_batch_add(r->released, e, r->quar, MKV_PG_FREE);
}

/*
 * Drop freed records that no live pin can still need; collect their pages
 * (damaged records stay: see mkv_reg_freed_pop()).
 */
int
mkv_batch_release(struct mkv_pool *p, struct mkv_txn *txn, struct batch *b)
{
	struct releasing r = { p, &b->released, mkv_pages_held_word(MKV_PG_QUARANTINED, p->h.generation) };
	uint64_t last;
	int rc = mkv_reg_freed_last(p, txn, &last);

	if (rc == MKV_E_NOTFOUND)
		return 0;
	if (rc)
		return rc;
	return mkv_reg_freed_pop(p, txn, mkv_epoch_min(p, offsetof(struct mkv_slot, pin), last, false),
			release_one, &r);
}

/* Record the quarantine of this txn's deletes, and the change of the stored bytes. */
int
mkv_batch_record(struct mkv_pool *p, struct mkv_txn *txn, const struct batch *b)
{
	uint64_t total, quar = mkv_pages_held_word(MKV_PG_QUARANTINED, p->h.generation);
	struct mkv_extent *x;
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < b->done.n; i++)
		n += b->done.v[i].to == quar;
	if (n) {
		if (!(x = malloc(n * sizeof(*x))))
			return mkv_err(MKV_E_NOMEM, "delete: out of memory");
		n = 0;
		for (size_t i = 0; i < b->done.n; i++)
			if (b->done.v[i].to == quar)
				x[n++] = b->done.v[i].ext;
		rc = mkv_reg_freed_put(p, txn, x, n);
		free(x);
		if (rc)
			return rc;
	}
	if (b->bytes == 0)
		return 0;
	if ((rc = mkv_reg_meta_get(p, txn, "bytes", &total)))
		return rc;
	return mkv_reg_meta_put(p, txn, "bytes", total + (uint64_t)b->bytes);
}

/* After a failed txn, before it is tried again: the table as it was, nothing released. */
void
mkv_batch_reset(struct mkv_pool *p, struct batch *b)
{
	mkv_batch_undo(p, b);
	*b = (struct batch){ .done = b->done, .released = b->released };
	b->released.n = 0;
}

/* After the commit: the pages it released become free. */
void
mkv_batch_settle(struct mkv_pool *p, const struct batch *b)
{
	for (size_t i = 0; i < b->released.n; i++)
		mkv_pages_move(p, &b->released.v[i].ext, b->released.v[i].from,
				b->released.v[i].to);
}

void
mkv_batch_free(struct batch *b)
{
	free(b->done.v);
	free(b->released.v);
}
