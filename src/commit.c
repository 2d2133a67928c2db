/* SPDX-License-Identifier: MIT */
/*
 * commit.c -- the write path: requests applied to the registry and the page
 * table in one LMDB write transaction.
 *
 * Every change to the registry and to page states goes through
 * mkv_commit(), so the single-writer lease can take this path over: today
 * each writing process calls it directly and writers serialise on LMDB's
 * write lock.
 *
 * Page states move in an order that keeps "free means free" across
 * crashes:
 *   granted -> used          before the publish commits (undone if it fails)
 *   used -> quarantined      before the delete commits (undone if it fails)
 *   quarantined -> free      after the txn that drops the freed record commits
 *   granted -> free          at once (abort, write-once refusal, close)
 * Quarantined pages are released only from records of txns already
 * committed when this txn read the pins, never from its own.
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct extents {
	struct mkv_extent *v;
	size_t n, cap;
};

static int
extents_add(struct extents *x, uint64_t page, uint64_t npages)
{
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 8;
		struct mkv_extent *v = realloc(x->v, cap * sizeof(*v));

		if (!v)
			return mkv_err(MKV_E_NOMEM, "commit: out of memory");
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n++] = (struct mkv_extent){ page, npages };
	return 0;
}

/* What one txn changes besides the registry, applied around its commit. */
struct batch {
	struct extents pubs;      /* granted -> used, before the commit */
	struct extents dels;      /* used -> quarantined, before the commit */
	struct extents released;  /* quarantined -> free, after the commit */
	int64_t bytes;            /* change of the stored byte count */
};

static void
extents_set(struct mkv_pool *p, const struct extents *x, uint64_t word)
{
	for (size_t i = 0; i < x->n; i++)
		mkv_pages_set(p, &x->v[i], word);
}

/* Errors that leave the txn usable: a refused request, not a failed one. */
static bool
benign(int rc)
{
	return rc == MKV_E_EXISTS || rc == MKV_E_NOTFOUND || rc == MKV_E_INVAL ||
		rc == MKV_E_NOSPC;
}

static int
apply_publish(struct mkv_pool *p, MDB_txn *txn, struct mkv_req *r, struct batch *b)
{
	struct mkv_entry e = {
		.version = MKV_ENTRY_VERSION,
		.page = r->ext.page,
		.npages = r->ext.npages,
		.length = r->length,
		.txn = mdb_txn_id(txn),
	};
	uint64_t be = htobe64(r->ext.page);
	MDB_val k = { r->klen, (void *)r->key }, d = { sizeof(e), &e };
	MDB_val pk = { sizeof(be), &be };
	bool full;
	int rc;

	if (r->ext.npages == 0 || r->ext.page >= p->nr_pages ||
	    r->ext.npages > p->nr_pages - r->ext.page ||
	    mkv_pages_for(p, r->length) != r->ext.npages ||
	    !mkv_pages_are(p, &r->ext, mkv_grant_word(p)))
		return mkv_err(MKV_E_INVAL, "publish: buffer is not one granted to this handle");
	if ((rc = mkv_reg_full(p, &full)))
		return rc;
	if (full)
		return mkv_err(MKV_E_NOSPC, "pool %s: registry is full (the rest is kept for deletes)",
				p->path);
	rc = mdb_put(txn, p->reg.entries, &k, &d, MDB_NOOVERWRITE);
	if (rc == MDB_KEYEXIST)
		return mkv_err(MKV_E_EXISTS, "publish: key exists (values are write-once)");
	if (rc)
		return mkv_err_mdb(rc, "publish");
	rc = mdb_put(txn, p->reg.pages, &pk, &k, MDB_NOOVERWRITE);
	if (rc == MDB_KEYEXIST)
		return mkv_err(MKV_E_CORRUPT, "pool %s: page %llu is registered twice", p->path,
				(unsigned long long)r->ext.page);
	if (rc)
		return mkv_err_mdb(rc, "publish");
	b->bytes += (int64_t)r->length;
	return extents_add(&b->pubs, r->ext.page, r->ext.npages);
}

static int
apply_del(struct mkv_pool *p, MDB_txn *txn, struct mkv_req *r, struct batch *b)
{
	struct mkv_entry e;
	uint64_t be;
	MDB_val k = { r->klen, (void *)r->key }, pk = { sizeof(be), &be };
	int rc;

	rc = mkv_reg_lookup(p, txn, r->key, r->klen, &e);
	if (rc)
		return rc;
	be = htobe64(e.page);
	if ((rc = mdb_del(txn, p->reg.entries, &k, NULL)) ||
	    (rc = mdb_del(txn, p->reg.pages, &pk, NULL)))
		return mkv_err_mdb(rc, "delete");
	rc = extents_add(&b->dels, e.page, e.npages);
	if (rc)
		return rc;
	r->ext = (struct mkv_extent){ e.page, e.npages };
	b->bytes -= (int64_t)e.length;
	return 0;
}

/* Drop freed records that no live pin can still need; collect their pages. */
static int
quarantine_release(struct mkv_pool *p, MDB_txn *txn, struct extents *released)
{
	MDB_cursor *c;
	MDB_val k, d;
	uint64_t first, last, min;
	int rc;

	if ((rc = mdb_cursor_open(txn, p->reg.freed, &c)))
		return mkv_err_mdb(rc, "quarantine");
	rc = mdb_cursor_get(c, &k, &d, MDB_LAST);
	if (rc) {
		rc = rc == MDB_NOTFOUND ? 0 : mkv_err_mdb(rc, "quarantine");
		goto out;
	}
	memcpy(&last, k.mv_data, sizeof(last));
	min = mkv_epoch_min_pin(p, be64toh(last));
	for (rc = mdb_cursor_get(c, &k, &d, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		const struct mkv_extent *x = d.mv_data;

		if (k.mv_size != sizeof(first) || d.mv_size % sizeof(*x)) {
			rc = mkv_err(MKV_E_CORRUPT, "pool %s: malformed quarantine record", p->path);
			goto out;
		}
		memcpy(&first, k.mv_data, sizeof(first));
		if (be64toh(first) >= min)
			break;
		for (size_t i = 0; i < d.mv_size / sizeof(*x); i++) {
			struct mkv_extent e;

			memcpy(&e, &x[i], sizeof(e));
			if ((rc = extents_add(released, e.page, e.npages)))
				goto out;
		}
		if ((rc = mdb_cursor_del(c, 0))) {
			rc = mkv_err_mdb(rc, "quarantine");
			goto out;
		}
	}
	if (rc == 0 || rc == MDB_NOTFOUND)
		rc = 0;
	else if (rc > 0 || (rc >= MDB_KEYEXIST && rc <= MDB_LAST_ERRCODE))
		rc = mkv_err_mdb(rc, "quarantine");
out:
	mdb_cursor_close(c);
	return rc;
}

static int
record_dels(struct mkv_pool *p, MDB_txn *txn, const struct batch *b)
{
	const struct extents *dels = &b->dels;
	uint64_t id = htobe64(mdb_txn_id(txn)), total;
	MDB_val k = { sizeof(id), &id }, d = { dels->n * sizeof(*dels->v), dels->v };
	int rc;

	if (dels->n && (rc = mdb_put(txn, p->reg.freed, &k, &d, MDB_NOOVERWRITE)))
		return mkv_err_mdb(rc, "delete");
	if (b->bytes == 0)
		return 0;
	if ((rc = mkv_reg_meta_get(p, txn, "bytes", &total)))
		return rc;
	return mkv_reg_meta_put(p, txn, "bytes", total + (uint64_t)b->bytes);
}

static int
apply(struct mkv_pool *p, MDB_txn *txn, struct mkv_req *r, struct batch *b)
{
	switch (r->op) {
	case MKV_OP_PUBLISH:
		return apply_publish(p, txn, r, b);
	case MKV_OP_DEL:
		return apply_del(p, txn, r, b);
	case MKV_OP_GRANT:
		return mkv_pages_grant(p, r->ext.npages, &r->ext);
	case MKV_OP_UNGRANT:
		if (r->ext.npages == 0 || r->ext.page >= p->nr_pages ||
		    r->ext.npages > p->nr_pages - r->ext.page ||
		    !mkv_pages_are(p, &r->ext, mkv_grant_word(p)))
			return mkv_err(MKV_E_INVAL, "abort: buffer is not one granted to this handle");
		mkv_pages_set(p, &r->ext, MKV_PG_FREE);
		return 0;
	case MKV_OP_DETACH:
		mkv_pages_reclaim(p, p->slot);
		return 0;
	}
	return mkv_err(MKV_E_INVAL, "commit: unknown request %d", (int)r->op);
}

/*
 * Apply n requests in one registry write txn.  Each request's own outcome
 * is in its result; the return value is 0, or the error that failed the
 * whole txn (then every registry request carries it).
 */
int
mkv_commit(struct mkv_pool *p, struct mkv_req *reqs, unsigned n)
{
	struct batch b = { 0 };
	MDB_txn *txn;
	unsigned applied = 0;
	int rc, fatal = 0;

	rc = mdb_txn_begin(p->reg.env, NULL, 0, &txn);
	if (rc) {
		fatal = mkv_err_mdb(rc, "registry: write txn");
		goto done;
	}
	for (; applied < n; applied++) {
		struct mkv_req *r = &reqs[applied];

		r->result = apply(p, txn, r, &b);
		if (r->result && !benign(r->result)) {
			fatal = r->result;
			applied++;
			break;
		}
	}
	if (!fatal && !(fatal = quarantine_release(p, txn, &b.released)) &&
	    !(fatal = record_dels(p, txn, &b))) {
		/*
		 * Still under the write lock, so the next writer sees these
		 * states: set after the commit, a publish's "used" could
		 * overwrite the "quarantined" of a delete committed in between.
		 */
		extents_set(p, &b.pubs, MKV_PG_USED);
		extents_set(p, &b.dels, MKV_PG_QUARANTINED);
		rc = mdb_txn_commit(txn);
		if (rc) {
			fatal = mkv_err_mdb(rc, "registry: commit");
			extents_set(p, &b.pubs, mkv_grant_word(p));
			extents_set(p, &b.dels, MKV_PG_USED);
		}
	} else {
		mdb_txn_abort(txn);
	}
done:
	for (unsigned i = 0; i < n; i++) {
		struct mkv_req *r = &reqs[i];

		if (i >= applied)
			r->result = fatal;
		if (r->op != MKV_OP_PUBLISH && r->op != MKV_OP_DEL)
			continue;
		if (fatal && (r->result == 0 || !benign(r->result)))
			r->result = fatal;
		if (r->op == MKV_OP_PUBLISH && r->result == MKV_E_EXISTS)
			mkv_pages_set(p, &r->ext, MKV_PG_FREE);
	}
	if (!fatal)
		extents_set(p, &b.released, MKV_PG_FREE);
	/* A grant refused for want of the pages this txn released: again. */
	for (unsigned i = 0; i < n && !fatal && b.released.n; i++)
		if (reqs[i].op == MKV_OP_GRANT && reqs[i].result == MKV_E_NOSPC)
			mkv_commit(p, &reqs[i], 1);
	free(b.pubs.v);
	free(b.dels.v);
	free(b.released.v);
	return fatal;
}
