/* SPDX-License-Identifier: MIT */
/*
 * get.c -- the public read calls: argument checks, a pin, a reused read
 * txn, and views into the arena that stay valid until released.
 */
#include "config.h"

#include <string.h>

#include "internal.h"

/* Fill a view; with MKV_VERIFY, only if the bytes match their checksum. */
static int
view_set(struct mkv_pool *p, const struct mkv_entry *e, uint64_t txn, struct mkv_view *v)
{
	const void *data = mkv_pool_page_addr(p, e->page);
	int rc;

	/* published bytes never change while a view is out: once per view */
	mkv_share_inval(p, data, e->length);
	if ((p->flags & MKV_VERIFY) && e->checksum && mkv_hash_checksum(data, e->length) != e->checksum)
		return mkv_err(MKV_E_CORRUPT, "pool %s: value at page %llu does not match its checksum",
				p->path, (unsigned long long)e->page);
	if ((rc = mkv_handout_add(&p->views, txn, (uintptr_t)data, &v->priv_[0])))
		return rc;
	mkv_evict_touch(p, e->page);
	v->data = data;
	v->len = e->length;
	v->priv_[1] = p->cookie;
	return 0;
}

/* The pinned txn of a live view of this handle, its record freed; false if none. */
static bool
view_take(struct mkv_pool *p, const struct mkv_view *v, uint64_t *txn)
{
	uint64_t addr;

	if (v->priv_[1] != p->cookie || !mkv_handout_begin(&p->views, v->priv_[0], txn, &addr))
		return false;
	if ((uintptr_t)v->data != addr) {
		mkv_handout_end(&p->views, v->priv_[0], true);
		return false;
	}
	mkv_handout_end(&p->views, v->priv_[0], false);
	return true;
}

/*
 * After views were taken: whether our pin was visible the whole time, that
 * is, our client still holds its slot.  If not, the views are dropped.
 */
static int
still_alive(struct mkv_pool *p, struct mkv_view *views, size_t n)
{
	uint64_t txn;

	if (mkv_client_known(p) || mkv_client_alive(p))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (views[i].data)
			view_take(p, &views[i], &txn);
	memset(views, 0, n * sizeof(*views));
	return mkv_client_check(p, "mkv_get");
}

int
mkv_get_linked(struct mkv_pool *pool, const char *who, const void *key, size_t klen,
		struct mkv_view *view, uint64_t *parent)
{
	struct mkv_entry e;
	struct mkv_txn *txn;
	uint64_t epoch;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, who)) || (rc = mkv_valid_key(key, klen)))
		return rc;
	if (!view)
		return mkv_err(MKV_E_INVAL, "%s: view is NULL", who);
	memset(view, 0, sizeof(*view));
	epoch = mkv_pin_enter(pool, 1);
	if (!epoch)
		return MKV_E_NOMEM;
	if ((rc = mkv_reg_rtxn_fresh(pool, &txn)) == 0) {
		rc = mkv_reg_lookup(pool, txn, key, klen, &e);
		mkv_reg_rtxn_done(pool, txn);
	}
	mkv_client_count(pool, rc == 0, rc == MKV_E_NOTFOUND);
	if (rc || (rc = view_set(pool, &e, epoch, view)) || (rc = still_alive(pool, view, 1))) {
		mkv_pin_leave(pool, epoch, 1);
		return rc;
	}
	if (parent)
		*parent = e.parent;
	return 0;
}

MKV_EXPORT int
mkv_get(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_view *view)
{
	return mkv_get_linked(pool, "mkv_get", key, klen, view, NULL);
}

MKV_EXPORT int
mkv_release(struct mkv_pool *pool, struct mkv_view *view)
{
	uint64_t txn;

	mkv_err_clear();
	if (!pool || pool->forked)
		return mkv_client_check(pool, "mkv_release");
	if (!view || !view_take(pool, view, &txn))
		return mkv_err(MKV_E_INVAL,
				"mkv_release: not a live view of this handle (released already, or changed)");
	mkv_pin_leave(pool, txn, 1);
	memset(view, 0, sizeof(*view));
	/* released either way; if our slot was taken, say the bytes may have changed */
	return mkv_client_check(pool, "mkv_release");
}

MKV_EXPORT int
mkv_exists(struct mkv_pool *pool, const void *key, size_t klen)
{
	struct mkv_txn *txn;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_usable(pool, "mkv_exists")) || (rc = mkv_valid_key(key, klen)) ||
	    (rc = mkv_reg_rtxn(pool, &txn)))
		return rc;
	if (!(rc = mkv_client_check_fresh(pool, "mkv_exists")))
		rc = mkv_reg_exists(pool, txn, key, klen);
	mkv_reg_rtxn_done(pool, txn);
	mkv_client_count(pool, rc == 0, rc == MKV_E_NOTFOUND);
	if (rc == MKV_E_NOTFOUND)
		return 0;
	return rc ? rc : 1;
}

MKV_EXPORT int
mkv_key_next(struct mkv_pool *pool, const void *after, size_t alen, void *key, size_t *klen)
{
	struct mkv_txn *txn;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_usable(pool, "mkv_key_next")) ||
	    (after && (rc = mkv_valid_key(after, alen))))
		return rc;
	if (!key || !klen || (!after && alen))
		return mkv_err(MKV_E_INVAL, "mkv_key_next: %s is NULL",
				!key ? "key" : !klen ? "klen" : "after");
	if ((rc = mkv_reg_rtxn(pool, &txn)))
		return rc;
	if (!(rc = mkv_client_check_fresh(pool, "mkv_key_next")) &&
	    (rc = mkv_reg_key_after(pool, txn, after, alen, key, klen)) == MKV_E_NOTFOUND)
		rc = mkv_err(MKV_E_NOTFOUND, "mkv_key_next: no key after it");
	mkv_reg_rtxn_done(pool, txn);
	return rc;
}

MKV_EXPORT int
mkv_prefix_len(struct mkv_pool *pool, const struct mkv_key *keys, size_t n, size_t *hits)
{
	struct mkv_txn *txn;
	size_t i = 0;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_usable(pool, "mkv_prefix_len")) ||
	    (rc = mkv_valid_keys(keys, n, "mkv_prefix_len")))
		return rc;
	if (!hits)
		return mkv_err(MKV_E_INVAL, "mkv_prefix_len: hits is NULL");
	*hits = 0;
	if (n == 0)
		return 0;
	if ((rc = mkv_reg_rtxn(pool, &txn)))
		return rc;
	if ((rc = mkv_client_check_fresh(pool, "mkv_prefix_len")))
		i = n;
	for (; i < n; i++)
		if ((rc = mkv_reg_exists(pool, txn, keys[i].data, keys[i].len)))
			break;
	mkv_reg_rtxn_done(pool, txn);
	if (rc && rc != MKV_E_NOTFOUND)
		return rc;
	mkv_client_count(pool, i, i < n);
	*hits = i;
	return 0;
}

MKV_EXPORT int
mkv_get_batch(struct mkv_pool *pool, const struct mkv_key *keys, size_t n, unsigned flags,
		struct mkv_view *views, size_t *found)
{
	struct mkv_entry e;
	struct mkv_txn *txn;
	uint64_t epoch;
	size_t nfound = 0, i;
	int rc = 0;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_get_batch")) ||
	    (rc = mkv_valid_keys(keys, n, "mkv_get_batch")))
		return rc;
	if (flags & ~MKV_BATCH_VALID)
		return mkv_err(MKV_E_INVAL, "mkv_get_batch: unknown flags 0x%x",
				flags & ~MKV_BATCH_VALID);
	if ((!views && n) || !found)
		return mkv_err(MKV_E_INVAL, "mkv_get_batch: views or found is NULL");
	*found = 0;
	if (n == 0)
		return 0;
	memset(views, 0, n * sizeof(*views));
	epoch = mkv_pin_enter(pool, n);
	if (!epoch)
		return MKV_E_NOMEM;
	if ((rc = mkv_reg_rtxn_fresh(pool, &txn)) == 0) {
		for (i = 0; i < n; i++) {
			rc = mkv_reg_lookup(pool, txn, keys[i].data, keys[i].len, &e);
			if (rc == MKV_E_NOTFOUND) {
				rc = 0;
				if (flags & MKV_BATCH_PREFIX)
					break;
				continue;
			}
			if (rc || (rc = view_set(pool, &e, epoch, &views[i])))
				break;
			nfound++;
		}
		mkv_reg_rtxn_done(pool, txn);
		mkv_client_count(pool, nfound, (flags & MKV_BATCH_PREFIX) ? nfound < n : n - nfound);
	}
	if (!rc && (rc = still_alive(pool, views, n))) {
		mkv_pin_leave(pool, epoch, n);
		return rc;
	}
	if (rc) {
		for (i = 0; i < n; i++)
			if (views[i].data)
				view_take(pool, &views[i], &epoch);
		memset(views, 0, n * sizeof(*views));
		mkv_pin_leave(pool, epoch, n);
		return rc;
	}
	mkv_pin_leave(pool, epoch, n - nfound);
	*found = nfound;
	mkv_err_clear();
	return 0;
}
