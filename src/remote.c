/* SPDX-License-Identifier: MIT */
/*
 * remote.c -- the remote tier's calls above the publish path (marukv(7),
 * REMOTE TIER): mkv_remote_set() and mkv_remote_get() write and read its
 * setting in super, and mkv_fetch() brings a value back from the tier
 * and publishes it.  Spilling, below the commit, is spill.c's.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "internal.h"
#include "rcluster.h"

/* looks at a setting being written before a reader gives up on it */
#define CONF_TRIES 1000

static void
conf_words_store(struct mkv_remote_conf *dst, const struct mkv_remote_conf *src)
{
	const uint64_t *s = (const uint64_t *)src;
	uint64_t *d = (uint64_t *)dst;

	for (size_t i = 1; i < sizeof(*src) / sizeof(uint64_t); i++)
		__atomic_store_n(&d[i], s[i], __ATOMIC_RELAXED);
}

MKV_EXPORT int
mkv_remote_set(struct mkv_pool *pool, const struct mkv_remote *r)
{
	struct mkv_remote_conf c = { 0 }, *s;
	struct mkv_rc *rc;
	uint64_t gen;
	int err;

	mkv_err_clear();
	if ((err = mkv_client_writable(pool, "mkv_remote_set")))
		return err;
	if (r && r->servers[0]) {
		if (!memchr(r->servers, 0, sizeof(r->servers)) || !memchr(r->prefix, 0, sizeof(r->prefix)))
			return mkv_err(MKV_E_INVAL, "mkv_remote_set: servers or prefix is not terminated");
		if (r->ttl_s > MKV_REMOTE_TTL_MAX || r->queue_mib > MKV_REMOTE_QUEUE_MIB_MAX ||
		    r->timeout_ms > MKV_REMOTE_TIMEOUT_MS_MAX || r->tier > UINT8_MAX)
			return mkv_err(MKV_E_INVAL, "mkv_remote_set: ttl_s %u (at most %u), queue_mib %u "
					"(%u), timeout_ms %u (%u) or tier %u (255) out of range",
					r->ttl_s, MKV_REMOTE_TTL_MAX, r->queue_mib, MKV_REMOTE_QUEUE_MIB_MAX, r->timeout_ms,
					MKV_REMOTE_TIMEOUT_MS_MAX, r->tier);
		/* the list's form, checked as the tier's clients will read it */
		if ((err = mkv_rc_open(r->servers, 1, &rc)))
			return err;
		mkv_rc_close(rc);
		memcpy(c.servers, r->servers, sizeof(c.servers));
		memcpy(c.prefix, r->prefix, sizeof(c.prefix));
		c.ttl_s = r->ttl_s;
		c.queue_mib = r->queue_mib ? r->queue_mib : MKV_REMOTE_QUEUE_MIB_DEFAULT;
		c.timeout_ms = r->timeout_ms ? r->timeout_ms : MKV_REMOTE_TIMEOUT_MS_DEFAULT;
		c.tier = r->tier;
	}
	if ((err = mkv_lock_until(pool->dirfd, LOCK_EX, mkv_clock_now() + pool->lease_period_ns)))
		return mkv_err(err == -ETIMEDOUT ? MKV_E_TIMEDOUT : err,
				"pool %s: the pool's directory stayed locked", pool->path);
	s = mkv_remote_conf_of(pool);
	mkv_share_inval(pool, s, sizeof(*s));
	/* odd while written, whatever a writer that died inside left */
	gen = (__atomic_load_n(&s->gen, __ATOMIC_RELAXED) | 1) + 2;
	__atomic_store_n(&s->gen, gen, __ATOMIC_RELAXED);
	mkv_share_persist(pool, &s->gen, sizeof(s->gen));
	mkv_full_fence();
	conf_words_store(s, &c);
	mkv_share_persist(pool, s, sizeof(*s));
	__atomic_store_n(&s->gen, gen + 1, __ATOMIC_RELEASE);
	mkv_share_persist(pool, &s->gen, sizeof(s->gen));
	flock(pool->dirfd, LOCK_UN);
	return 0;
}

MKV_EXPORT int
mkv_remote_get(struct mkv_pool *pool, struct mkv_remote *r)
{
	struct mkv_remote_conf c;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_remote_get")))
		return rc;
	if (!r)
		return mkv_err(MKV_E_INVAL, "mkv_remote_get: r is NULL");
	memset(r, 0, sizeof(*r));
	if ((rc = mkv_remote_conf_read(pool, &c, CONF_TRIES, true)))
		return rc;
	memcpy(r->servers, c.servers, sizeof(r->servers));
	memcpy(r->prefix, c.prefix, sizeof(r->prefix));
	r->ttl_s = c.ttl_s;
	r->queue_mib = c.queue_mib;
	r->timeout_ms = c.timeout_ms;
	r->tier = c.tier;
	return 0;
}

/* The longest frame this pool could import: a value as long as its arena. */
static size_t
frame_max(const struct mkv_pool *p)
{
	uint64_t most = MKV_FRAME_BODY_HEADER + (uint64_t)MKV_KEY_MAX + p->page_size * p->nr_pages;

	return MKV_FRAME_HEADER + (size_t)(most < MKV_FRAME_BODY_MAX ? most : MKV_FRAME_BODY_MAX);
}

/* The frame fetched for key: checked whole, of that key, then imported. */
static int
fetched(struct mkv_pool *p, const void *key, size_t klen, const void *buf, size_t len)
{
	struct mkv_frame f;
	int rc = mkv_frame_parse(buf, len, &f);

	if (rc)
		return rc;
	if (f.frame_len != len)
		return mkv_err(MKV_E_FRAME_BODY, "mkv_fetch: %llu bytes after the frame",
				(unsigned long long)(len - f.frame_len));
	if (f.klen != klen || memcmp(f.key, key, klen))
		return mkv_err(MKV_E_FRAME_BODY, "mkv_fetch: the frame is of another key");
	rc = mkv_put_linked(p, f.key, f.klen, f.value, f.vlen, f.parent);
	/* published meanwhile by another: the key is in the pool */
	return rc == MKV_E_EXISTS ? 0 : rc;
}

MKV_EXPORT int
mkv_fetch(struct mkv_pool *pool, const void *key, size_t klen)
{
	struct mkv_remote_rt *r = &pool->remote;
	uint8_t rkey[MKV_REMOTE_PREFIX_MAX + 1 + MKV_KEY_MAX];
	struct mkv_remote_conf c;
	struct mkv_slot *slot;
	struct mkv_rc *mine = NULL, **rc_of = &mine;
	uint64_t mine_gen = 0, *gen = &mine_gen;
	void *buf = NULL;
	size_t len = 0;
	bool shared;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_writable(pool, "mkv_fetch")) || (rc = mkv_valid_key(key, klen)))
		return rc;
	if ((rc = mkv_exists(pool, key, klen)) != 0)
		return rc > 0 ? 0 : rc;
	if ((rc = mkv_remote_conf_read(pool, &c, CONF_TRIES, true)))
		return rc;
	if (!c.servers[0])
		return mkv_err(MKV_E_NOTFOUND, "pool %s: no such key, and no remote tier", pool->path);
	slot = &pool->slots[pool->slot];
	mkv_remote_count(pool, &slot->fetches, 1);
	/*
	 * The handle's client, kept connected; a fetch that finds it busy
	 * (another thread's fetch) makes one of its own for this once rather
	 * than wait: each fetch ends within the timeout, however many overlap.
	 */
	if ((shared = pthread_mutex_trylock(&r->fetch_lock) == 0)) {
		rc_of = &r->fetch_rc;
		gen = &r->fetch_gen;
	}
	if (!(rc = mkv_remote_client(&c, rc_of, gen, -1)))
		rc = mkv_rc_get(*rc_of, rkey, mkv_remote_key(&c, key, klen, rkey), frame_max(pool), &buf,
				&len);
	if (shared)
		pthread_mutex_unlock(&r->fetch_lock);
	else
		mkv_rc_close(mine);
	if (rc == MKV_E_NOTFOUND) {
		mkv_remote_count(pool, &slot->fetch_misses, 1);
		return mkv_err(rc, "pool %s: no such key, in the pool or its remote tier", pool->path);
	}
	if (!rc && (rc = fetched(pool, key, klen, buf, len)) && shared) {
		/*
		 * A frame refused may be another command's reply, arrived late
		 * on a connection out of step: the next fetch starts afresh.
		 */
		pthread_mutex_lock(&r->fetch_lock);
		mkv_rc_close(r->fetch_rc);
		r->fetch_rc = NULL;
		pthread_mutex_unlock(&r->fetch_lock);
	}
	free(buf);
	mkv_remote_count(pool, rc ? &slot->fetch_errors : &slot->fetch_hits, 1);
	return rc;
}
