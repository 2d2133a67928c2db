/* SPDX-License-Identifier: MIT */
/*
 * kv.c -- the public key-value calls: argument checks, then the read path
 * (pins, a reused read txn, views into the arena) or the write path
 * (persist the payload, then one request through mkv_write(): holder.c).
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"

static int
check_pool(const struct mkv_pool *p, const char *fn)
{
	return mkv_client_check(p, fn);
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
write_one(struct mkv_pool *p, struct mkv_req *r)
{
	int rc = mkv_write(p, r, mkv_write_timeout(p));

	if (rc == 0)
		mkv_err_clear();
	return rc;
}

/*
 * How many pages a client keeps granted beyond its buffers: the clients
 * together cannot hoard more than a quarter of the pool.
 */
static uint64_t
grant_cap(const struct mkv_pool *p)
{
	return p->nr_pages / (4 * (uint64_t)p->sb->max_clients);
}

/* Pages of a buffer not published: keep them for the next one, or give them back. */
static void
grant_keep(struct mkv_pool *p, const struct mkv_extent *ext)
{
	struct mkv_req back = { .op = MKV_OP_UNGRANT, .ext = *ext };

	/* never cache pages the table no longer shows as ours */
	if (!mkv_pages_are(p, ext, mkv_grant_word(p->slot, p->incarnation)))
		return;
	if (mkv_grants_cached(p) + ext->npages <= grant_cap(p))
		mkv_grants_put(p, ext);
	else
		mkv_write(p, &back, mkv_write_timeout(p));
}

/*
 * Pages for one allocation: from this handle's grants, else a new grant
 * from the holder, a few allocations' worth at a time.
 */
static int
grant_take(struct mkv_pool *p, uint64_t npages, struct mkv_extent *out)
{
	uint64_t cap = grant_cap(p);
	uint64_t batch = npages * 4 < cap ? npages * 4 : cap;
	struct mkv_req r = { .op = MKV_OP_GRANT };
	int rc;

	if (mkv_grants_take(p, npages, out))
		return 0;
	r.ext.npages = batch > npages ? batch : npages;
	r.length = npages;
	rc = write_one(p, &r);
	if (rc == MKV_E_NOSPC) {
		/* Short of pages: hand back what we cache, then ask for just these. */
		struct mkv_req back = { .op = MKV_OP_UNGRANT };

		while (mkv_grants_take_any(p, &back.ext))
			write_one(p, &back);
		r = (struct mkv_req){ .op = MKV_OP_GRANT, .ext.npages = npages };
		rc = write_one(p, &r);
	}
	if (rc)
		return rc;
	if (r.ext.npages < npages || r.ext.page >= p->nr_pages ||
	    r.ext.npages > p->nr_pages - r.ext.page)
		return mkv_err(MKV_E_CORRUPT, "pool %s: the lease holder granted pages %llu+%llu for %llu",
				p->path, (unsigned long long)r.ext.page,
				(unsigned long long)r.ext.npages, (unsigned long long)npages);
	/* Ours first: other threads of the handle take from the cache meanwhile. */
	*out = (struct mkv_extent){ r.ext.page, npages };
	if (r.ext.npages > npages)
		mkv_grants_put(p, &(struct mkv_extent){ r.ext.page + npages, r.ext.npages - npages });
	return 0;
}

MKV_EXPORT int
mkv_alloc(struct mkv_pool *pool, size_t len, struct mkv_buf *buf)
{
	struct mkv_extent ext;
	uint64_t token;
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
	if ((rc = grant_take(pool, mkv_pages_for(pool, len), &ext)))
		return rc;
	if ((rc = mkv_handout_add(&pool->bufs, ext.page, len, &token))) {
		grant_keep(pool, &ext);
		return rc;
	}
	buf->data = mkv_page_addr(pool, ext.page);
	buf->len = len;
	buf->priv_[0] = token;
	buf->priv_[1] = pool->cookie;
	mkv_err_clear();
	return 0;
}

/* A buffer a call is using: its record stays busy until buf_keep() or buf_consume(). */
struct used_buf {
	uint64_t token;
	struct mkv_extent all;  /* the pages allocated */
	struct mkv_extent ext;  /* the pages of buf->len bytes, its first ones */
};

/* Check a buffer against this handle's record of it and take the record. */
static int
buf_begin(struct mkv_pool *p, const struct mkv_buf *buf, struct used_buf *u, const char *fn)
{
	uint64_t page, alen;

	if (!buf)
		return mkv_err(MKV_E_INVAL, "%s: buf is NULL", fn);
	if (buf->priv_[1] != p->cookie || !mkv_handout_begin(&p->bufs, buf->priv_[0], &page, &alen))
		return mkv_err(MKV_E_INVAL,
				"%s: not a live buffer of this handle (published, aborted, in use, or not from mkv_alloc())",
				fn);
	if (buf->data != mkv_page_addr(p, page) || buf->len == 0 || buf->len > alen) {
		mkv_handout_end(&p->bufs, buf->priv_[0], true);
		return mkv_err(MKV_E_INVAL,
				"%s: the buffer's data or length was changed (its length may only be lowered)",
				fn);
	}
	u->token = buf->priv_[0];
	u->all = (struct mkv_extent){ page, mkv_pages_for(p, alen) };
	u->ext = (struct mkv_extent){ page, mkv_pages_for(p, buf->len) };
	return 0;
}

/* The buffer stays the caller's, to retry or abort. */
static void
buf_keep(struct mkv_pool *p, const struct used_buf *u)
{
	mkv_handout_end(&p->bufs, u->token, true);
}

/*
 * The buffer is gone.  sent: its first u->ext pages went to the holder
 * (published, or pending), and only the rest comes back to the cache;
 * else all of them.
 */
static void
buf_consume(struct mkv_pool *p, struct mkv_buf *buf, const struct used_buf *u, bool sent)
{
	struct mkv_extent back = u->all;

	if (sent) {
		back.page += u->ext.npages;
		back.npages -= u->ext.npages;
	}
	if (back.npages)
		grant_keep(p, &back);
	mkv_handout_end(&p->bufs, u->token, false);
	memset(buf, 0, sizeof(*buf));
}

/* After a publish request's answer, the buffer's fate. */
static void
buf_settle(struct mkv_pool *p, struct mkv_buf *buf, const struct used_buf *u,
		const struct mkv_req *r)
{
	if (r->result == 0 || (r->result == MKV_E_TIMEDOUT && r->pending))
		buf_consume(p, buf, u, true);
	else if (r->result == MKV_E_EXISTS)
		buf_consume(p, buf, u, false);
	else
		buf_keep(p, u);
}

/* Checks and persistence shared by the publish calls; *u is busy on success. */
static int
publish_prepare(struct mkv_pool *p, const void *key, size_t klen, const struct mkv_buf *buf,
		struct used_buf *u, struct mkv_req *r, const char *fn)
{
	int rc;

	if ((rc = check_writable(p, fn)) || (rc = mkv_check_key(key, klen)) ||
	    (rc = buf_begin(p, buf, u, fn)))
		return rc;
	*r = (struct mkv_req){ .op = MKV_OP_PUBLISH, .key = key, .klen = klen, .ext = u->ext,
			.length = buf->len };
	if (!(p->flags & MKV_NOCHECKSUM))
		r->checksum = mkv_checksum(buf->data, buf->len);
	/* The bytes are durable and visible before the key can be found. */
	p->data.persist(buf->data, buf->len);
	return 0;
}

MKV_EXPORT int
mkv_publish(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_buf *buf)
{
	struct used_buf u;
	struct mkv_req r;
	int rc;

	mkv_err_clear();
	if ((rc = publish_prepare(pool, key, klen, buf, &u, &r, "mkv_publish")))
		return rc;
	rc = write_one(pool, &r);
	r.result = rc;
	buf_settle(pool, buf, &u, &r);
	/* giving unused pages back may fail on its own; the publish did not */
	if (rc == 0)
		mkv_err_clear();
	return rc;
}

/*
 * A ticket is either an answer already known (this handle holds the
 * lease, so the publish committed at once) or a pending request entry.
 */
#define TICKET_DONE (1ULL << 63)

MKV_EXPORT int
mkv_publish_async(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_buf *buf,
		struct mkv_ticket *ticket)
{
	struct used_buf u;
	struct mkv_req r;
	unsigned idx;
	uint32_t seq;
	bool posted;
	int rc;

	mkv_err_clear();
	if (!ticket)
		return mkv_err(MKV_E_INVAL, "mkv_publish_async: ticket is NULL");
	if ((rc = publish_prepare(pool, key, klen, buf, &u, &r, "mkv_publish_async")))
		return rc;
	if ((rc = mkv_write_async(pool, &r, &posted, &idx, &seq))) {
		buf_keep(pool, &u);
		return rc;
	}
	if (posted) {
		ticket->priv_[0] = ((uint64_t)seq << 32) | idx;
		buf_consume(pool, buf, &u, true);
	} else {
		ticket->priv_[0] = TICKET_DONE | (uint32_t)r.result;
		/* a refused publish's pages stay granted to us, for the next allocation */
		buf_consume(pool, buf, &u, r.result == 0);
	}
	ticket->priv_[1] = pool->cookie;
	mkv_err_clear();
	return 0;
}

MKV_EXPORT int
mkv_wait(struct mkv_pool *pool, struct mkv_ticket *ticket)
{
	struct mkv_req r = { .op = MKV_OP_PUBLISH };
	uint64_t t;
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_wait")))
		return rc;
	if (!ticket || ticket->priv_[1] != pool->cookie ||
	    (!(ticket->priv_[0] & TICKET_DONE) && (ticket->priv_[0] & 0xffffffffU) >= MKV_RQ_DEPTH))
		return mkv_err(MKV_E_INVAL, "mkv_wait: not a pending ticket of this handle");
	t = ticket->priv_[0];
	if (t & TICKET_DONE) {
		r.result = (int32_t)(uint32_t)t;
	} else if ((rc = mkv_rq_wait(pool, (unsigned)(t & 0xffffffffU), (uint32_t)(t >> 32), &r,
			mkv_write_timeout(pool), true))) {
		/* no answer yet: the ticket stays, to wait for again */
		return rc;
	} else if (r.result) {
		/* the buffer is gone: a failed publish's pages stay ours for the next one */
		grant_keep(pool, &r.ext);
	}
	memset(ticket, 0, sizeof(*ticket));
	if (r.result)
		return mkv_err(r.result, "mkv_wait: %s", mkv_strerror(r.result));
	/* a takeover tried on the way may have failed: the publish did not */
	mkv_err_clear();
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
mkv_publish_chain(struct mkv_pool *pool, const void *parent, size_t plen,
		const struct mkv_key *keys, struct mkv_buf *bufs, size_t n)
{
	struct mkv_req *reqs;
	struct used_buf *u;
	uint64_t link = 0;
	size_t i, ready = 0;
	int rc, first = 0;

	mkv_err_clear();
	if ((rc = check_writable(pool, "mkv_publish_chain")))
		return rc;
	if (parent && (rc = mkv_check_key(parent, plen)))
		return mkv_err(rc, "mkv_publish_chain: parent: %s", mkv_errormsg());
	if (!parent && plen)
		return mkv_err(MKV_E_INVAL, "mkv_publish_chain: parent is NULL");
	if ((!keys || !bufs) && n)
		return mkv_err(MKV_E_INVAL, "mkv_publish_chain: keys or bufs is NULL");
	if (n > UINT_MAX)
		return mkv_err(MKV_E_INVAL, "mkv_publish_chain: %zu blocks", n);
	if (n == 0)
		return 0;
	reqs = calloc(n, sizeof(*reqs));
	u = calloc(n, sizeof(*u));
	if (!reqs || !u) {
		free(reqs);
		free(u);
		return mkv_err(MKV_E_NOMEM, "mkv_publish_chain: out of memory");
	}
	if (parent)
		link = mkv_key_hash(parent, plen);
	/* Every key and buffer checked (and its bytes persisted) before anything is sent. */
	for (; ready < n && !rc; ready++) {
		rc = publish_prepare(pool, keys[ready].data, keys[ready].len, &bufs[ready], &u[ready],
				&reqs[ready], "mkv_publish_chain");
		reqs[ready].parent = link;
		link = mkv_key_hash(keys[ready].data, keys[ready].len);
	}
	if (rc) {
		for (i = 0; i + 1 < ready; i++)
			buf_keep(pool, &u[i]);
		goto out;
	}
	rc = mkv_write_many(pool, reqs, (unsigned)n);
	for (i = 0; i < n; i++) {
		buf_settle(pool, &bufs[i], &u[i], &reqs[i]);
		if (reqs[i].result && reqs[i].result != MKV_E_EXISTS && !first)
			first = reqs[i].result;
	}
	if (!rc && first)
		rc = mkv_err(first, "mkv_publish_chain: %s", mkv_strerror(first));
out:
	free(reqs);
	free(u);
	if (!rc)
		mkv_err_clear();
	return rc;
}

MKV_EXPORT int
mkv_abort(struct mkv_pool *pool, struct mkv_buf *buf)
{
	struct used_buf u;
	int rc;

	mkv_err_clear();
	if ((rc = check_writable(pool, "mkv_abort")) || (rc = buf_begin(pool, buf, &u, "mkv_abort")))
		return rc;
	buf_consume(pool, buf, &u, false);
	mkv_err_clear();
	return 0;
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
	if (rc && buf.data) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", mkv_errormsg());
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
	return write_one(pool, &r);
}

/* Fill a view; with MKV_VERIFY, only if the bytes match their checksum. */
static int
view_set(struct mkv_pool *p, const struct mkv_entry *e, uint64_t txn, struct mkv_view *v)
{
	const void *data = mkv_page_addr(p, e->page);
	int rc;

	if ((p->flags & MKV_VERIFY) && e->checksum && mkv_checksum(data, e->length) != e->checksum)
		return mkv_err(MKV_E_CORRUPT, "pool %s: value at page %llu does not match its checksum",
				p->path, (unsigned long long)e->page);
	if ((rc = mkv_handout_add(&p->views, txn, (uintptr_t)data, &v->priv_[0])))
		return rc;
	mkv_touch(p, e->page);
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

	if (mkv_client_alive(p))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (views[i].data)
			view_take(p, &views[i], &txn);
	memset(views, 0, n * sizeof(*views));
	return mkv_client_check(p, "mkv_get");
}

MKV_EXPORT int
mkv_get(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_view *view)
{
	struct mkv_entry e;
	struct mkv_txn *txn;
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
	mkv_client_count(pool, rc == 0, rc == MKV_E_NOTFOUND);
	if (rc || (rc = view_set(pool, &e, epoch, view)) || (rc = still_alive(pool, view, 1))) {
		mkv_epoch_leave(pool, epoch, 1);
		return rc;
	}
	return 0;
}

MKV_EXPORT int
mkv_release(struct mkv_pool *pool, struct mkv_view *view)
{
	uint64_t txn;

	mkv_err_clear();
	if (!pool || pool->forked)
		return check_pool(pool, "mkv_release");
	if (!view || !view_take(pool, view, &txn))
		return mkv_err(MKV_E_INVAL,
				"mkv_release: not a live view of this handle (released already, or changed)");
	mkv_epoch_leave(pool, txn, 1);
	memset(view, 0, sizeof(*view));
	/* released either way; if our slot was taken, say the bytes may have changed */
	return check_pool(pool, "mkv_release");
}

MKV_EXPORT int
mkv_exists(struct mkv_pool *pool, const void *key, size_t klen)
{
	struct mkv_txn *txn;
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_exists")) || (rc = mkv_check_key(key, klen)) ||
	    (rc = mkv_reg_rtxn(pool, &txn)))
		return rc;
	rc = mkv_reg_exists(pool, txn, key, klen);
	mkv_reg_rtxn_done(pool, txn);
	mkv_client_count(pool, rc == 0, rc == MKV_E_NOTFOUND);
	if (rc == MKV_E_NOTFOUND)
		return 0;
	return rc ? rc : 1;
}

MKV_EXPORT int
mkv_prefix_len(struct mkv_pool *pool, const struct mkv_key *keys, size_t n, size_t *hits)
{
	struct mkv_txn *txn;
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
			if (rc || (rc = view_set(pool, &e, epoch, &views[i])))
				break;
			nfound++;
		}
		mkv_reg_rtxn_done(pool, txn);
		mkv_client_count(pool, nfound, (flags & MKV_BATCH_PREFIX) ? nfound < n : n - nfound);
	}
	if (!rc && (rc = still_alive(pool, views, n))) {
		mkv_epoch_leave(pool, epoch, n);
		return rc;
	}
	if (rc) {
		for (i = 0; i < n; i++)
			if (views[i].data)
				view_take(pool, &views[i], &epoch);
		memset(views, 0, n * sizeof(*views));
		mkv_epoch_leave(pool, epoch, n);
		return rc;
	}
	mkv_epoch_leave(pool, epoch, n - nfound);
	*found = nfound;
	mkv_err_clear();
	return 0;
}

static void
lease_stat(const struct mkv_pool *p, struct mkv_stat *st)
{
	const struct mkv_lease *l = &p->state->lease;
	uint32_t node = __atomic_load_n(&l->holder_node, __ATOMIC_SEQ_CST);

	st->lease_generation = __atomic_load_n(&l->generation, __ATOMIC_SEQ_CST);
	st->lease_period_ms = p->sb->lease_period_ms;
	st->lease_heartbeat_age_ms = -1;
	st->requests_pending = mkv_rq_pending(p);
	st->client_timeout_ms = p->sb->client_timeout_ms;
	st->backing = p->backing;
	memcpy(st->dax_device, p->dax_device, sizeof(st->dax_device));
	st->dax_align = p->dax_align;
	for (uint32_t i = 0; i < p->sb->max_clients; i++) {
		st->hits += __atomic_load_n(&p->slots[i].hits, __ATOMIC_RELAXED);
		st->misses += __atomic_load_n(&p->slots[i].misses, __ATOMIC_RELAXED);
	}
	if (node == 0 || node > p->sb->max_nodes)
		return;
	st->lease_holder_pid = __atomic_load_n(&l->holder_pid, __ATOMIC_SEQ_CST);
	st->lease_holder_slot = __atomic_load_n(&l->holder_slot, __ATOMIC_SEQ_CST);
	st->lease_holder_node_idx = node - 1;
	memcpy(st->lease_holder_node, p->nodes[node - 1].name, MKV_NODE_NAME_MAX);
	st->lease_heartbeat_age_ms = mkv_age_ms(__atomic_load_n(&l->beat_wall_ns, __ATOMIC_SEQ_CST));
}

/* What the registry says: entries, bytes, evictions, watermarks, its use of its file. */
static int
registry_stat(struct mkv_pool *p, struct mkv_stat *st)
{
	uint64_t wm_low = 0, wm_high = 0, entries = 0;
	struct mkv_txn *txn;
	int rc;

	if ((rc = mkv_reg_rtxn(p, &txn)))
		return rc;
	if (!(rc = mkv_reg_count(p, txn, MKV_TABLE_ENTRIES, &entries)) &&
	    !(rc = mkv_reg_meta_get(p, txn, "bytes", &st->bytes_stored)) &&
	    !(rc = mkv_reg_meta_get(p, txn, "evictions", &st->evictions)) &&
	    !(rc = mkv_reg_meta_get(p, txn, "wm_low", &wm_low)))
		rc = mkv_reg_meta_get(p, txn, "wm_high", &wm_high);
	mkv_reg_rtxn_done(p, txn);
	if (rc)
		return rc;
	st->entries = entries;
	st->low_watermark = (uint32_t)wm_low;
	st->high_watermark = (uint32_t)wm_high;
	st->registry_size = p->sb->registry_size;
	st->registry_used = mkv_reg_used(p);
	return 0;
}

/* The page table's states, counted. */
static void
pages_stat(struct mkv_pool *p, struct mkv_stat *st)
{
	st->page_size = (uint32_t)p->page_size;
	st->pages_total = p->nr_pages;
	for (uint64_t i = 0; i < p->nr_pages; i++) {
		switch (MKV_PG_STATE(mkv_pt_load(p, i))) {
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
}

MKV_EXPORT int
mkv_pool_stat(struct mkv_pool *pool, struct mkv_stat *st)
{
	struct stat fst;
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_pool_stat")))
		return rc;
	if (!st)
		return mkv_err(MKV_E_INVAL, "mkv_pool_stat: st is NULL");
	memset(st, 0, sizeof(*st));
	if ((rc = registry_stat(pool, st)))
		return rc;
	st->format_version = pool->sb->version;
	pages_stat(pool, st);
	st->max_clients = pool->sb->max_clients;
	if (fstat(pool->super_fd, &fst) == 0) {
		st->mode = fst.st_mode & 07777;
		st->gid = (fst.st_mode & S_IRWXG) ? (uint32_t)fst.st_gid : 0;
	}
	st->max_nodes = pool->sb->max_nodes;
	for (uint32_t i = 0; i < st->max_nodes; i++)
		st->nodes += __atomic_load_n(&pool->nodes[i].id, __ATOMIC_RELAXED) != 0;
	for (uint32_t i = 0; i < st->max_clients; i++)
		if (MKV_SLOT_PID(__atomic_load_n(&pool->slots[i].owner, __ATOMIC_RELAXED)))
			st->clients++;
	memcpy(st->uuid, pool->sb->uuid, sizeof(st->uuid));
	lease_stat(pool, st);
	return 0;
}

MKV_EXPORT void
mkv_pool_set_progress(struct mkv_pool *pool, mkv_progress_fn fn, void *arg)
{
	if (!pool)
		return;
	pool->progress = fn;
	pool->progress_arg = arg;
}

/* Report progress to the handle's callback, at most five times a second. */
void
mkv_progress(struct mkv_pool *p, uint64_t done, uint64_t total, uint64_t *last_ns)
{
	uint64_t now;

	if (!p->progress)
		return;
	now = mkv_now_ns();
	if (done < total && now - *last_ns < 200000000ULL)
		return;
	*last_ns = now;
	p->progress(done, total, p->progress_arg);
}

/*
 * A client of another node is judged by watching its heartbeat for the
 * client timeout: wait until every such client has either beaten (alive)
 * or stood still that long (dead), so that one call can tell.
 */
static int
await_verdicts(struct mkv_pool *p)
{
	uint32_t n = p->sb->max_clients;
	uint64_t *beat0 = calloc(n, sizeof(*beat0)), start = mkv_now_ns();
	uint8_t *todo = calloc(n, 1);
	bool pending = true;
	struct timespec nap = { 0, 20 * 1000 * 1000 };

	if (!beat0 || !todo) {
		free(beat0);
		free(todo);
		return mkv_err(MKV_E_NOMEM, "mkv_pool_reclaim: out of memory");
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t owner = __atomic_load_n(&p->slots[i].owner, __ATOMIC_SEQ_CST);

		if (!MKV_SLOT_PID(owner) || __atomic_load_n(&p->slots[i].node, __ATOMIC_SEQ_CST) == p->node)
			continue;
		beat0[i] = __atomic_load_n(&p->slots[i].beat, __ATOMIC_SEQ_CST);
		todo[i] = !mkv_client_dead(p, i, owner);
	}
	while (pending && mkv_now_ns() - start < p->client_timeout_ns + 100000000ULL) {
		pending = false;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t owner = __atomic_load_n(&p->slots[i].owner, __ATOMIC_SEQ_CST);

			if (!todo[i])
				continue;
			if (!MKV_SLOT_PID(owner) || mkv_client_dead(p, i, owner) ||
			    __atomic_load_n(&p->slots[i].beat, __ATOMIC_SEQ_CST) != beat0[i])
				todo[i] = 0;
			else
				pending = true;
		}
		if (pending)
			nanosleep(&nap, NULL);
	}
	free(beat0);
	free(todo);
	return 0;
}

MKV_EXPORT int
mkv_pool_reclaim(struct mkv_pool *pool, unsigned flags, struct mkv_reclaim *report)
{
	struct mkv_req r = { .op = MKV_OP_RECLAIM };
	int rc, stale = 0;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_pool_reclaim")))
		return rc;
	if (!report || (flags & ~MKV_DRY_RUN))
		return mkv_err(MKV_E_INVAL, "mkv_pool_reclaim: NULL report or unknown flags");
	/* What is dead now: the report, whoever does the work. */
	if ((rc = await_verdicts(pool)))
		return rc;
	mkv_reap(pool, true, report);
	if (flags & MKV_DRY_RUN)
		return 0;
	if ((rc = check_writable(pool, "mkv_pool_reclaim")) || (rc = write_one(pool, &r)))
		return rc;
	if (r.out > report->pages)
		report->pages = r.out;
	/* the holder frees dead nodes' entries only when the directory lock is free: here it waits */
	if (mkv_flock_until(pool->dirfd, LOCK_EX, mkv_now_ns() + pool->lease_period_ns) == 0) {
		report->nodes = mkv_nodes_reclaim(pool);
		flock(pool->dirfd, LOCK_UN);
	}
	if ((stale = mkv_reg_reader_check(pool)) > 0)
		report->readers += (uint32_t)stale;
	return 0;
}

MKV_EXPORT int
mkv_pool_evict(struct mkv_pool *pool, unsigned free_pct, unsigned flags, struct mkv_evict *report)
{
	struct mkv_req r = { .op = MKV_OP_EVICT, .ext.npages = free_pct };
	struct mkv_stat before, after;
	int rc;

	mkv_err_clear();
	if ((rc = check_pool(pool, "mkv_pool_evict")))
		return rc;
	if (!report || (flags & ~MKV_DRY_RUN) || free_pct > 100)
		return mkv_err(MKV_E_INVAL, "mkv_pool_evict: NULL report, unknown flags or percent over 100");
	memset(report, 0, sizeof(*report));
	if (flags & MKV_DRY_RUN) {
		if ((rc = mkv_evict_dry(pool, free_pct, report)))
			return rc;
		mkv_err_clear();
		return 0;
	}
	if ((rc = check_writable(pool, "mkv_pool_evict")) ||
	    (rc = mkv_pool_stat(pool, &before)) || (rc = write_one(pool, &r)) ||
	    (rc = mkv_pool_stat(pool, &after)))
		return rc;
	report->keys = r.out;
	if (after.pages_free + after.pages_quarantined > before.pages_free + before.pages_quarantined)
		report->pages = after.pages_free + after.pages_quarantined -
			(before.pages_free + before.pages_quarantined);
	report->pages_free = after.pages_free;
	return 0;
}

MKV_EXPORT int
mkv_pool_set_watermarks(struct mkv_pool *pool, unsigned low_pct, unsigned high_pct)
{
	struct mkv_req r = { .op = MKV_OP_WATERMARKS, .ext = { low_pct, high_pct } };
	int rc;

	mkv_err_clear();
	if ((rc = check_writable(pool, "mkv_pool_set_watermarks")) ||
	    (rc = mkv_watermarks_check(low_pct, high_pct)))
		return rc;
	return write_one(pool, &r);
}
