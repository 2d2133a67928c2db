/* SPDX-License-Identifier: MIT */
/*
 * publish.c -- the public write calls: publish (the payload persisted,
 * then one request through the holder: holder.c), chains, put, abort and
 * delete, of buffers from mkv_alloc() (alloc.c).
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
	if (buf->data != mkv_pool_page_addr(p, page) || buf->len == 0 || buf->len > alen) {
		mkv_handout_end(&p->bufs, buf->priv_[0], true);
		return mkv_err(MKV_E_INVAL,
				"%s: the buffer's data or length was changed (its length may only be lowered)",
				fn);
	}
	u->token = buf->priv_[0];
	u->all = (struct mkv_extent){ page, mkv_pool_pages_for(p, alen) };
	u->ext = (struct mkv_extent){ page, mkv_pool_pages_for(p, buf->len) };
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
		mkv_alloc_keep(p, &back);
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

/*
 * Checks and persistence shared by the publish calls; *u is busy on success.
 * sum: the bytes' checksum if the caller made it along with its copy
 * (mkv_put()), else 0.
 */
static int
publish_prepare(struct mkv_pool *p, const void *key, size_t klen, const struct mkv_buf *buf,
		uint64_t sum, struct used_buf *u, struct mkv_req *r, const char *fn)
{
	int rc;

	if ((rc = mkv_client_writable(p, fn)) || (rc = mkv_valid_key(key, klen)) ||
	    (rc = buf_begin(p, buf, u, fn)))
		return rc;
	*r = (struct mkv_req){ .op = MKV_OP_PUBLISH, .key = key, .klen = klen, .ext = u->ext,
			.length = buf->len };
	if (!(p->flags & MKV_NOCHECKSUM))
		r->checksum = sum ? sum : mkv_hash_checksum(buf->data, buf->len);
	/* The bytes are durable and visible before the key can be found. */
	mkv_share_persist(p, buf->data, buf->len);
	return 0;
}

static int
publish(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_buf *buf, uint64_t sum,
		uint64_t parent)
{
	struct used_buf u;
	struct mkv_req r;
	int rc;

	mkv_err_clear();
	if ((rc = publish_prepare(pool, key, klen, buf, sum, &u, &r, "mkv_publish")))
		return rc;
	r.parent = parent;
	rc = mkv_holder_call(pool, &r);
	r.result = rc;
	buf_settle(pool, buf, &u, &r);
	/* giving unused pages back may fail on its own; the publish did not */
	if (rc == 0)
		mkv_err_clear();
	return rc;
}

MKV_EXPORT int
mkv_publish(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_buf *buf)
{
	return publish(pool, key, klen, buf, 0, 0);
}

/*
 * A ticket is either an answer already known (this handle holds the
 * lease, so the publish committed at once) or a pending request entry.
 */
#define TICKET_DONE (1ULL << 63)

static int
publish_async(struct mkv_pool *pool, const void *parent, size_t plen, const void *key,
		size_t klen, struct mkv_buf *buf, struct mkv_ticket *ticket, const char *fn)
{
	struct used_buf u;
	struct mkv_req r;
	unsigned idx;
	uint32_t seq;
	bool posted;
	int rc;

	mkv_err_clear();
	if (!ticket)
		return mkv_err(MKV_E_INVAL, "%s: ticket is NULL", fn);
	if (!parent && plen)
		return mkv_err(MKV_E_INVAL, "%s: parent is NULL", fn);
	if (parent && (rc = mkv_valid_key(parent, plen)))
		return mkv_err(rc, "%s: parent: %s", fn, mkv_errormsg());
	if ((rc = publish_prepare(pool, key, klen, buf, 0, &u, &r, fn)))
		return rc;
	if (parent)
		r.parent = mkv_hash_key(parent, plen);
	if ((rc = mkv_holder_write_async(pool, &r, &posted, &idx, &seq))) {
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
mkv_publish_async(struct mkv_pool *pool, const void *key, size_t klen, struct mkv_buf *buf,
		struct mkv_ticket *ticket)
{
	return publish_async(pool, NULL, 0, key, klen, buf, ticket, "mkv_publish_async");
}

MKV_EXPORT int
mkv_publish_child_async(struct mkv_pool *pool, const void *parent, size_t plen,
		const void *key, size_t klen, struct mkv_buf *buf, struct mkv_ticket *ticket)
{
	return publish_async(pool, parent, plen, key, klen, buf, ticket,
			"mkv_publish_child_async");
}

MKV_EXPORT int
mkv_wait(struct mkv_pool *pool, struct mkv_ticket *ticket)
{
	struct mkv_req r = { .op = MKV_OP_PUBLISH };
	uint64_t t;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_wait")))
		return rc;
	if (!ticket || ticket->priv_[1] != pool->cookie ||
	    (!(ticket->priv_[0] & TICKET_DONE) && (ticket->priv_[0] & 0xffffffffU) >= MKV_RQ_DEPTH))
		return mkv_err(MKV_E_INVAL, "mkv_wait: not a pending ticket of this handle");
	t = ticket->priv_[0];
	if (t & TICKET_DONE) {
		r.result = (int32_t)(uint32_t)t;
	} else if ((rc = mkv_rq_wait(pool, (unsigned)(t & 0xffffffffU), (uint32_t)(t >> 32), &r,
			mkv_holder_timeout(pool), true))) {
		/* no answer yet: the ticket stays, to wait for again */
		return rc;
	} else if (r.result) {
		/* the buffer is gone: a failed publish's pages stay ours for the next one */
		mkv_alloc_keep(pool, &r.ext);
	}
	memset(ticket, 0, sizeof(*ticket));
	if (r.result)
		return mkv_err(r.result, "mkv_wait: %s", mkv_strerror(r.result));
	/* a takeover tried on the way may have failed: the publish did not */
	mkv_err_clear();
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
	if ((rc = mkv_client_writable(pool, "mkv_publish_chain")))
		return rc;
	if (parent && (rc = mkv_valid_key(parent, plen)))
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
		link = mkv_hash_key(parent, plen);
	/* Every key and buffer checked (and its bytes persisted) before anything is sent. */
	for (; ready < n && !rc; ready++) {
		rc = publish_prepare(pool, keys[ready].data, keys[ready].len, &bufs[ready], 0,
				&u[ready], &reqs[ready], "mkv_publish_chain");
		reqs[ready].parent = link;
		link = mkv_hash_key(keys[ready].data, keys[ready].len);
	}
	if (rc) {
		for (i = 0; i + 1 < ready; i++)
			buf_keep(pool, &u[i]);
		goto out;
	}
	rc = mkv_holder_write_many(pool, reqs, (unsigned)n);
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
	if ((rc = mkv_client_writable(pool, "mkv_abort")) || (rc = buf_begin(pool, buf, &u, "mkv_abort")))
		return rc;
	buf_consume(pool, buf, &u, false);
	mkv_err_clear();
	return 0;
}

MKV_EXPORT int
mkv_put(struct mkv_pool *pool, const void *key, size_t klen, const void *val, size_t len)
{
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_writable(pool, "mkv_put")) || (rc = mkv_valid_key(key, klen)))
		return rc;
	if (!val)
		return mkv_err(MKV_E_INVAL, "mkv_put: value is NULL");
	return mkv_put_linked(pool, key, klen, val, len, 0);
}

int
mkv_put_linked(struct mkv_pool *pool, const void *key, size_t klen, const void *val, size_t len,
		uint64_t parent)
{
	struct mkv_buf buf;
	uint64_t sum = 0;
	int rc;

	if ((rc = mkv_alloc(pool, len, &buf)))
		return rc;
	if (pool->flags & MKV_NOCHECKSUM) {
		mkv_persist_copy(buf.data, val, len);
		mkv_persist_copy_done();
	} else {
		sum = mkv_hash_copy(buf.data, val, len);
	}
	rc = publish(pool, key, klen, &buf, sum, parent);
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
	if ((rc = mkv_client_writable(pool, "mkv_del")) || (rc = mkv_valid_key(key, klen)))
		return rc;
	return mkv_holder_call(pool, &r);
}
