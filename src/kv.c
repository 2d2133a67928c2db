/* SPDX-License-Identifier: MIT */
/*
 * kv.c -- the public key-value calls: argument checks, then the read path
 * (pins, a reused read txn, views into the arena) or the write path
 * (persist the payload, then one request through mkv_commit()).
 */
#include "config.h"

#include <string.h>

#include "internal.h"

static int
check_pool(const struct mkv_pool *p, const char *fn)
{
	if (!p)
		return mkv_err(MKV_E_INVAL, "%s: pool is NULL", fn);
	return 0;
}

static int
check_writable(const struct mkv_pool *p, const char *fn)
{
	int rc = check_pool(p, fn);

	if (!rc && (p->flags & MKV_RDONLY))
		return mkv_err(MKV_E_RDONLY, "%s: pool %s is open read-only", fn, p->path);
	return rc;
}

/* One request through the write path; its own result. */
static int
commit_one(struct mkv_pool *p, struct mkv_req *r)
{
	mkv_commit(p, r, 1);
	if (r->result == 0)
		mkv_err_clear();
	return r->result;
}

MKV_EXPORT int
mkv_alloc(struct mkv_pool *pool, size_t len, struct mkv_buf *buf)
{
	struct mkv_req r = { .op = MKV_OP_GRANT };
	int rc;

	mkv_err_clear();
	if ((rc = check_writable(pool, "mkv_alloc")))
		return rc;
	if (!buf)
		return mkv_err(MKV_E_INVAL, "mkv_alloc: buf is NULL");
	memset(buf, 0, sizeof(*buf));
	if (len == 0)
		return mkv_err(MKV_E_INVAL, "mkv_alloc: length 0");
	if (len > pool->nr_pages * pool->page_size)
		return mkv_err(MKV_E_NOSPC, "mkv_alloc: %zu bytes is more than the pool holds", len);
	r.ext.npages = mkv_pages_for(pool, len);
	if ((rc = commit_one(pool, &r)))
		return rc;
	buf->data = mkv_page_addr(pool, r.ext.page);
	buf->len = len;
	buf->priv_[0] = r.ext.page;
	buf->priv_[1] = pool->cookie;
	return 0;
}

/* The extent behind a buffer of this handle, or MKV_E_INVAL. */
static int
buf_extent(const struct mkv_pool *p, const struct mkv_buf *buf, struct mkv_extent *ext,
		const char *fn)
{
	if (!buf)
		return mkv_err(MKV_E_INVAL, "%s: buf is NULL", fn);
	if (buf->priv_[1] != p->cookie || buf->len == 0 || buf->priv_[0] >= p->nr_pages ||
	    buf->data != mkv_page_addr(p, buf->priv_[0]) ||
	    mkv_pages_for(p, buf->len) > p->nr_pages - buf->priv_[0])
		return mkv_err(MKV_E_INVAL, "%s: not a buffer from mkv_alloc() on this handle", fn);
	ext->page = buf->priv_[0];
	ext->npages = mkv_pages_for(p, buf->len);
	return 0;
}

MKV_EXPORT int
mkv_publish(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_buf *buf)
{
	struct mkv_req r = { .op = MKV_OP_PUBLISH, .key = key, .klen = klen };
	int rc;

	mkv_err_clear();
	if ((rc = check_writable(pool, "mkv_publish")) || (rc = mkv_check_key(key, klen)) ||
	    (rc = buf_extent(pool, buf, &r.ext, "mkv_publish")))
		return rc;
	r.length = buf->len;
	/* The bytes are durable and visible before the key can be found. */
	pool->data.persist(buf->data, buf->len);
	rc = commit_one(pool, &r);
	if (rc == 0 || rc == MKV_E_EXISTS)
		memset(buf, 0, sizeof(*buf));
	return rc;
}

MKV_EXPORT int
mkv_abort(struct mkv_pool *pool, struct mkv_buf *buf)
{
	struct mkv_req r = { .op = MKV_OP_UNGRANT };
	int rc;

	mkv_err_clear();
	if ((rc = check_writable(pool, "mkv_abort")) ||
	    (rc = buf_extent(pool, buf, &r.ext, "mkv_abort")))
		return rc;
	rc = commit_one(pool, &r);
	if (rc == 0)
		memset(buf, 0, sizeof(*buf));
	return rc;
}

MKV_EXPORT int
mkv_put(struct mkv_pool *pool, const void *key, size_t klen, const void *val, size_t len)
{
	struct mkv_buf buf;
	int rc;

	mkv_err_clear();
	if ((rc = check_writable(pool, "mkv_put")) || (rc = mkv_check_key(key, klen)))
		return rc;
	if (!val)
		return mkv_err(MKV_E_INVAL, "mkv_put: value is NULL");
	if ((rc = mkv_alloc(pool, len, &buf)))
		return rc;
	memcpy(buf.data, val, len);
	rc = mkv_publish(pool, key, klen, &buf);
	if (rc && rc != MKV_E_EXISTS) {
		char msg[512];

		strncpy(msg, mkv_errormsg(), sizeof(msg) - 1);
		msg[sizeof(msg) - 1] = '\0';
		mkv_abort(pool, &buf);
		mkv_err(rc, "%s", msg);
	}
	return rc;
}

MKV_EXPORT int
mkv_del(struct mkv_pool *pool, const void *key, size_t klen)
{
	struct mkv_req r = { .op = MKV_OP_DEL, .key = key, .klen = klen };
	int rc;

	mkv_err_clear();
	if ((rc = check_writable(pool, "mkv_del")) || (rc = mkv_check_key(key, klen)))
		return rc;
	return commit_one(pool, &r);
}

static void
view_set(struct mkv_pool *p, const struct mkv_entry *e, uint64_t txn, struct mkv_view *v)
{
	__atomic_store_n(&p->hints[e->page], 1, __ATOMIC_RELAXED);
	v->data = mkv_page_addr(p, e->page);
	v->len = e->length;
	v->priv_[0] = txn;
	v->priv_[1] = p->cookie;
}

MKV_EXPORT int
mkv_get(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_view *view)
{
	struct mkv_entry e;
	MDB_txn *txn;
	uint64_t epoch;
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_get")) || (rc = mkv_check_key(key, klen)))
		return rc;
	if (!view)
		return mkv_err(MKV_E_INVAL, "mkv_get: view is NULL");
	memset(view, 0, sizeof(*view));
	epoch = mkv_epoch_enter(pool, 1);
	if (!epoch)
		return MKV_E_NOMEM;
	if ((rc = mkv_reg_rtxn(pool, &txn)) == 0) {
		rc = mkv_reg_lookup(pool, txn, key, klen, &e);
		mkv_reg_rtxn_done(pool, txn);
	}
	if (rc) {
		mkv_epoch_leave(pool, epoch, 1);
		return rc;
	}
	view_set(pool, &e, epoch, view);
	return 0;
}

MKV_EXPORT int
mkv_release(struct mkv_pool *pool, struct mkv_view *view)
{
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_release")))
		return rc;
	if (!view || !view->data || view->priv_[1] != pool->cookie || view->priv_[0] == 0)
		return mkv_err(MKV_E_INVAL, "mkv_release: not a view from this handle");
	mkv_epoch_leave(pool, view->priv_[0], 1);
	memset(view, 0, sizeof(*view));
	return 0;
}

/* Check every key of an array before any lookup. */
static int
check_keys(const struct mkv_key *keys, size_t n, const char *fn)
{
	int rc;

	if (!keys && n)
		return mkv_err(MKV_E_INVAL, "%s: keys is NULL", fn);
	for (size_t i = 0; i < n; i++)
		if ((rc = mkv_check_key(keys[i].data, keys[i].len)))
			return mkv_err(rc, "%s: key %zu: %s", fn, i, mkv_errormsg());
	return 0;
}

MKV_EXPORT int
mkv_exists(struct mkv_pool *pool, const void *key, size_t klen)
{
	MDB_txn *txn;
	MDB_val k = { klen, (void *)key }, d;
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_exists")) || (rc = mkv_check_key(key, klen)) ||
	    (rc = mkv_reg_rtxn(pool, &txn)))
		return rc;
	rc = mdb_get(txn, pool->reg.entries, &k, &d);
	mkv_reg_rtxn_done(pool, txn);
	if (rc == MDB_NOTFOUND)
		return 0;
	return rc ? mkv_err_mdb(rc, "mkv_exists") : 1;
}

MKV_EXPORT int
mkv_prefix_len(struct mkv_pool *pool, const struct mkv_key *keys, size_t n, size_t *hits)
{
	MDB_txn *txn;
	size_t i = 0;
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_prefix_len")) ||
	    (rc = check_keys(keys, n, "mkv_prefix_len")))
		return rc;
	if (!hits)
		return mkv_err(MKV_E_INVAL, "mkv_prefix_len: hits is NULL");
	*hits = 0;
	if (n == 0)
		return 0;
	if ((rc = mkv_reg_rtxn(pool, &txn)))
		return rc;
	for (; i < n; i++) {
		MDB_val k = { keys[i].len, (void *)keys[i].data }, d;

		rc = mdb_get(txn, pool->reg.entries, &k, &d);
		if (rc)
			break;
	}
	mkv_reg_rtxn_done(pool, txn);
	if (rc && rc != MDB_NOTFOUND)
		return mkv_err_mdb(rc, "mkv_prefix_len");
	*hits = i;
	return 0;
}

MKV_EXPORT int
mkv_get_batch(struct mkv_pool *pool, const struct mkv_key *keys, size_t n, unsigned flags,
		struct mkv_view *views, size_t *found)
{
	struct mkv_entry e;
	MDB_txn *txn;
	uint64_t epoch;
	size_t nfound = 0, i;
	int rc = 0;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_get_batch")) ||
	    (rc = check_keys(keys, n, "mkv_get_batch")))
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
	epoch = mkv_epoch_enter(pool, n);
	if (!epoch)
		return MKV_E_NOMEM;
	if ((rc = mkv_reg_rtxn(pool, &txn)) == 0) {
		for (i = 0; i < n; i++) {
			rc = mkv_reg_lookup(pool, txn, keys[i].data, keys[i].len, &e);
			if (rc == MKV_E_NOTFOUND) {
				rc = 0;
				if (flags & MKV_BATCH_PREFIX)
					break;
				continue;
			}
			if (rc)
				break;
			view_set(pool, &e, epoch, &views[i]);
			nfound++;
		}
		mkv_reg_rtxn_done(pool, txn);
	}
	if (rc) {
		memset(views, 0, n * sizeof(*views));
		mkv_epoch_leave(pool, epoch, n);
		return rc;
	}
	mkv_epoch_leave(pool, epoch, n - nfound);
	*found = nfound;
	mkv_err_clear();
	return 0;
}

MKV_EXPORT int
mkv_pool_stat(struct mkv_pool *pool, struct mkv_stat *st)
{
	MDB_stat ms;
	MDB_envinfo info;
	MDB_txn *txn;
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_pool_stat")))
		return rc;
	if (!st)
		return mkv_err(MKV_E_INVAL, "mkv_pool_stat: st is NULL");
	memset(st, 0, sizeof(*st));
	if ((rc = mkv_reg_rtxn(pool, &txn)))
		return rc;
	rc = mdb_stat(txn, pool->reg.entries, &ms);
	if (rc)
		rc = mkv_err_mdb(rc, "mkv_pool_stat");
	else
		rc = mkv_reg_meta_get(pool, txn, "bytes", &st->bytes_stored);
	mkv_reg_rtxn_done(pool, txn);
	if (rc)
		return rc;
	st->entries = ms.ms_entries;
	mdb_env_info(pool->reg.env, &info);
	st->registry_size = pool->sb->registry_size;
	st->registry_used = (uint64_t)(info.me_last_pgno + 1) * ms.ms_psize;
	st->format_version = pool->sb->version;
	st->page_size = (uint32_t)pool->page_size;
	st->pages_total = pool->nr_pages;
	for (uint64_t i = 0; i < pool->nr_pages; i++) {
		switch (MKV_PG_STATE(mkv_pt_load(pool, i))) {
		case MKV_PG_FREE:
			st->pages_free++;
			break;
		case MKV_PG_GRANTED:
			st->pages_granted++;
			break;
		case MKV_PG_USED:
			st->pages_used++;
			break;
		default:
			st->pages_quarantined++;
			break;
		}
	}
	st->max_clients = pool->sb->max_clients;
	for (uint32_t i = 0; i < st->max_clients; i++)
		if (MKV_SLOT_PID(__atomic_load_n(&pool->slots[i].owner, __ATOMIC_RELAXED)))
			st->clients++;
	memcpy(st->uuid, pool->sb->uuid, sizeof(st->uuid));
	return 0;
}
