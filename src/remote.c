/* SPDX-License-Identifier: MIT */
/*
 * remote.c -- the remote tier: values the lease holder evicts spill, as
 * MRDN frames, to a Redis Cluster, and mkv_fetch() brings one back
 * (marukv(7), REMOTE TIER).
 *
 * The holder copies an evicted value out of its pages inside the commit
 * that deletes it (the pages are quarantined, not yet free, so the bytes
 * are still the value's) into a queue bounded in bytes; a full queue
 * drops the value and counts it.  A thread of the holder's process then
 * checks the copy against the value's checksum, seals its frame and
 * stores it: hashing and the network stay off the commit.  The setting
 * lives in super (struct mkv_remote_conf), so every later holder spills
 * the same way; the counters in each process's client slot.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "rcluster.h"

#define TTL_MAX (10U * 366 * 24 * 3600)
#define QUEUE_MIB_DEFAULT 64U
#define QUEUE_MIB_MAX 65536U
#define TIMEOUT_MS_DEFAULT 1000U
#define TIMEOUT_MS_MAX 60000U
/* looks at a setting being written before a reader gives up on it */
#define CONF_TRIES 1000

/* An evicted value on its way to the tier: its frame, sealed by the thread. */
struct mkv_spill {
	struct mkv_spill *next;
	struct mkv_remote_conf conf;  /* where it goes, as set when it was evicted */
	uint64_t checksum, parent;
	size_t klen, vlen, size;      /* size: the frame's bytes */
	uint8_t key[MKV_KEY_MAX];
	uint8_t frame[];
};

static struct mkv_remote_conf *
conf_of(const struct mkv_pool *p)
{
	return (struct mkv_remote_conf *)((char *)p->state + MKV_REMOTE_OFF);
}

/* The words after gen, one by one: another thread may write them meanwhile. */
static void
conf_words_load(struct mkv_remote_conf *dst, const struct mkv_remote_conf *src)
{
	const uint64_t *s = (const uint64_t *)src;
	uint64_t *d = (uint64_t *)dst;

	for (size_t i = 1; i < sizeof(*src) / sizeof(uint64_t); i++)
		d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

static void
conf_words_store(struct mkv_remote_conf *dst, const struct mkv_remote_conf *src)
{
	const uint64_t *s = (const uint64_t *)src;
	uint64_t *d = (uint64_t *)dst;

	for (size_t i = 1; i < sizeof(*src) / sizeof(uint64_t); i++)
		__atomic_store_n(&d[i], s[i], __ATOMIC_RELAXED);
}

/* Whether a setting read from the pool is one mkv_remote_set() could have written. */
static bool
conf_sane(const struct mkv_remote_conf *c)
{
	return memchr(c->servers, 0, sizeof(c->servers)) && memchr(c->prefix, 0, sizeof(c->prefix)) &&
		c->ttl_s <= TTL_MAX && c->queue_mib <= QUEUE_MIB_MAX &&
		c->timeout_ms <= TIMEOUT_MS_MAX && c->tier <= UINT8_MAX;
}

/*
 * A copy of the pool's setting whose gen read the same, and even, before
 * and after it, in at most tries looks: 0; MKV_E_REMOTE if a writer was
 * inside it at each (one that died there: the next mkv_remote_set() mends
 * it), or if it is not a setting at all (damaged), said only if loud (the
 * commit's and the statistics' looks leave the caller's message alone).
 * All zero: no tier.
 */
static int
conf_read(const struct mkv_pool *p, struct mkv_remote_conf *c, int tries, bool loud)
{
	const struct mkv_remote_conf *s = conf_of(p);
	struct timespec nap = { 0, 100 * 1000 };

	for (int i = 0; i < tries; i++) {
		uint64_t gen;

		mkv_share_inval(p, s, sizeof(*s));
		gen = __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE);
		if (gen & 1) {
			nanosleep(&nap, NULL);
			continue;
		}
		conf_words_load(c, s);
		mkv_full_fence();
		if (__atomic_load_n(&s->gen, __ATOMIC_RELAXED) != gen)
			continue;
		c->gen = gen;
		if (conf_sane(c))
			return 0;
		return loud ? mkv_err(MKV_E_REMOTE, "pool %s: the remote tier's setting is damaged; "
				"set it again (mkv_remote_set())", p->path) : MKV_E_REMOTE;
	}
	return loud ? mkv_err(MKV_E_REMOTE, "pool %s: the remote tier's setting is being changed, "
			"and was for %d looks", p->path, tries) : MKV_E_REMOTE;
}

/*
 * The Redis key of a pool key: the prefix, a NUL byte, then the key's
 * bytes.  A prefix holds no NUL, so the first NUL ends it: the keys of
 * pools whose prefixes nest ("t" and "tx") never meet.
 */
static size_t
redis_key(const struct mkv_remote_conf *c, const void *key, size_t klen, uint8_t *out)
{
	size_t n = strlen(c->prefix);

	memcpy(out, c->prefix, n);
	out[n] = '\0';
	memcpy(out + n + 1, key, klen);
	return n + 1 + klen;
}

/* Add to one of our slot's tier counters (layout.h), seen by other hosts. */
static void
count(struct mkv_pool *p, uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
	mkv_share_wb(p, &p->slots[p->slot].spills, MKV_CACHELINE);
}

/*
 * A client of the tier for setting c, reusing *rc if it was made for it;
 * cancelled while cancel_fd (-1: none) is readable.
 */
static int
client_for(const struct mkv_remote_conf *c, struct mkv_rc **rc, uint64_t *gen, int cancel_fd)
{
	int err;

	if (*rc && *gen == c->gen)
		return 0;
	mkv_rc_close(*rc);
	*rc = NULL;
	if ((err = mkv_rc_open(c->servers, c->timeout_ms, rc)))
		return err;
	mkv_rc_watch(*rc, cancel_fd);
	*gen = c->gen;
	return 0;
}

/* Check, seal and store one spill (in the spilling thread). */
static void
spill_one(struct mkv_pool *p, struct mkv_spill *s, struct mkv_rc **rc, uint64_t *gen)
{
	struct mkv_slot *slot = &p->slots[p->slot];
	uint8_t *val = s->frame + MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + s->klen;
	uint8_t rkey[MKV_REMOTE_PREFIX_MAX + 1 + MKV_KEY_MAX];
	struct iovec iov;

	/* bytes damaged in the pool would otherwise leave it with a valid frame */
	if (s->checksum && mkv_hash_checksum(val, s->vlen) != s->checksum) {
		count(p, &slot->spill_errors, 1);
		return;
	}
	if (client_for(&s->conf, rc, gen, p->remote.stop_fd)) {
		count(p, &slot->spill_errors, 1);
		return;
	}
	mkv_frame_seal(s->frame, s->conf.tier, s->key, s->klen, s->vlen, s->parent);
	iov = (struct iovec){ s->frame, s->size };
	if (mkv_rc_set(*rc, rkey, redis_key(&s->conf, s->key, s->klen, rkey), &iov, 1,
			s->conf.ttl_s)) {
		count(p, &slot->spill_errors, 1);
		return;
	}
	count(p, &slot->spill_bytes, s->vlen);
	count(p, &slot->spills, 1);
}

static void *
spill_main(void *arg)
{
	struct mkv_pool *p = arg;
	struct mkv_remote_rt *r = &p->remote;
	struct mkv_rc *rc = NULL;
	uint64_t gen = 0, left = 0;
	struct mkv_spill *s;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->head && !r->stop)
			pthread_cond_wait(&r->wake, &r->lock);
		if (r->stop)
			break;
		s = r->head;
		r->head = s->next;
		pthread_mutex_unlock(&r->lock);
		spill_one(p, s, &rc, &gen);
		pthread_mutex_lock(&r->lock);
		r->queued -= s->size;
		free(s);
	}
	/* closing: what is still queued is not spilled */
	while ((s = r->head)) {
		r->head = s->next;
		r->queued -= s->size;
		free(s);
		left++;
	}
	pthread_mutex_unlock(&r->lock);
	if (left)
		count(p, &p->slots[p->slot].drops, left);
	mkv_rc_close(rc);
	return NULL;
}

/* The spilling thread, started at the first spill; called with r->lock held. */
static bool
spiller_running(struct mkv_pool *p)
{
	struct mkv_remote_rt *r = &p->remote;
	sigset_t all, old;
	int err;

	if (r->running)
		return true;
	/* written at close: a spill waiting on the tier gives up at once */
	if (r->stop_fd < 0 && (r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return false;
	/* signals are the application's threads' to take, not ours */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&r->thread, NULL, spill_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	r->running = err == 0;
	return r->running;
}

void
mkv_remote_spill(struct mkv_pool *p, const void *key, size_t klen, uint64_t page,
		uint64_t length, uint64_t checksum, uint64_t parent)
{
	struct mkv_remote_rt *r = &p->remote;
	struct mkv_remote_conf c;
	uint64_t size = MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + (uint64_t)klen + length;
	struct mkv_spill *s;
	const void *val;
	bool room;

	/* one look: the commit does not wait for a setting being written */
	if (conf_read(p, &c, 1, false) || !c.servers[0])
		return;
	pthread_mutex_lock(&r->lock);
	room = size - MKV_FRAME_HEADER <= MKV_FRAME_BODY_MAX &&
		r->queued + size <= (uint64_t)c.queue_mib << 20 && spiller_running(p);
	if (room)
		r->queued += size;
	pthread_mutex_unlock(&r->lock);
	if (room && !(s = malloc(sizeof(*s) + size))) {
		pthread_mutex_lock(&r->lock);
		r->queued -= size;
		pthread_mutex_unlock(&r->lock);
		room = false;
	}
	if (!room) {
		count(p, &p->slots[p->slot].drops, 1);
		return;
	}
	*s = (struct mkv_spill){ .conf = c, .checksum = checksum, .parent = parent, .klen = klen,
			.vlen = length, .size = size };
	memcpy(s->key, key, klen);
	val = mkv_pool_page_addr(p, page);
	mkv_share_inval(p, val, length);
	memcpy(s->frame + MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + klen, val, length);
	pthread_mutex_lock(&r->lock);
	if (r->tail && r->head)
		r->tail->next = s;
	else
		r->head = s;
	r->tail = s;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
}

int
mkv_remote_init(struct mkv_pool *p)
{
	struct mkv_remote_rt *r = &p->remote;

	if (pthread_mutex_init(&r->lock, NULL))
		return mkv_err(MKV_E_NOMEM, "mkv_pool_open: out of memory");
	if (pthread_mutex_init(&r->fetch_lock, NULL)) {
		pthread_mutex_destroy(&r->lock);
		return mkv_err(MKV_E_NOMEM, "mkv_pool_open: out of memory");
	}
	if (pthread_cond_init(&r->wake, NULL)) {
		pthread_mutex_destroy(&r->fetch_lock);
		pthread_mutex_destroy(&r->lock);
		return mkv_err(MKV_E_NOMEM, "mkv_pool_open: out of memory");
	}
	r->stop_fd = -1;
	r->ready = true;
	return 0;
}

/*
 * Stop the spilling thread (what it has not sent yet is dropped and
 * counted) and free what the handle holds.  In a forked child the thread
 * is the parent's: only memory is freed.
 */
void
mkv_remote_fini(struct mkv_pool *p)
{
	struct mkv_remote_rt *r = &p->remote;
	struct mkv_spill *s;

	if (!r->ready)
		return;
	if (!p->forked && r->running) {
		uint64_t one = 1;

		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_cond_signal(&r->wake);
		pthread_mutex_unlock(&r->lock);
		/* cannot fail: a counter of 1 is far from its maximum */
		(void)!write(r->stop_fd, &one, sizeof(one));
		pthread_join(r->thread, NULL);
		r->running = false;
	}
	if (r->stop_fd >= 0)
		close(r->stop_fd);
	r->stop_fd = -1;
	while ((s = r->head)) {
		r->head = s->next;
		free(s);
	}
	if (!p->forked) {
		mkv_rc_close(r->fetch_rc);
		pthread_cond_destroy(&r->wake);
		pthread_mutex_destroy(&r->fetch_lock);
		pthread_mutex_destroy(&r->lock);
	}
	r->fetch_rc = NULL;
	r->ready = false;
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
		if (r->ttl_s > TTL_MAX || r->queue_mib > QUEUE_MIB_MAX ||
		    r->timeout_ms > TIMEOUT_MS_MAX || r->tier > UINT8_MAX)
			return mkv_err(MKV_E_INVAL, "mkv_remote_set: ttl_s %u (at most %u), queue_mib %u "
					"(%u), timeout_ms %u (%u) or tier %u (255) out of range",
					r->ttl_s, TTL_MAX, r->queue_mib, QUEUE_MIB_MAX, r->timeout_ms,
					TIMEOUT_MS_MAX, r->tier);
		/* the list's form, checked as the tier's clients will read it */
		if ((err = mkv_rc_open(r->servers, 1, &rc)))
			return err;
		mkv_rc_close(rc);
		memcpy(c.servers, r->servers, sizeof(c.servers));
		memcpy(c.prefix, r->prefix, sizeof(c.prefix));
		c.ttl_s = r->ttl_s;
		c.queue_mib = r->queue_mib ? r->queue_mib : QUEUE_MIB_DEFAULT;
		c.timeout_ms = r->timeout_ms ? r->timeout_ms : TIMEOUT_MS_DEFAULT;
		c.tier = r->tier;
	}
	if ((err = mkv_lock_until(pool->dirfd, LOCK_EX, mkv_clock_now() + pool->lease_period_ns)))
		return mkv_err(err == -ETIMEDOUT ? MKV_E_TIMEDOUT : err,
				"pool %s: the pool's directory stayed locked", pool->path);
	s = conf_of(pool);
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
	if ((rc = conf_read(pool, &c, CONF_TRIES, true)))
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
	if ((rc = conf_read(pool, &c, CONF_TRIES, true)))
		return rc;
	if (!c.servers[0])
		return mkv_err(MKV_E_NOTFOUND, "pool %s: no such key, and no remote tier", pool->path);
	slot = &pool->slots[pool->slot];
	count(pool, &slot->fetches, 1);
	/*
	 * The handle's client, kept connected; a fetch that finds it busy
	 * (another thread's fetch) makes one of its own for this once rather
	 * than wait: each fetch ends within the timeout, however many overlap.
	 */
	if ((shared = pthread_mutex_trylock(&r->fetch_lock) == 0)) {
		rc_of = &r->fetch_rc;
		gen = &r->fetch_gen;
	}
	if (!(rc = client_for(&c, rc_of, gen, -1)))
		rc = mkv_rc_get(*rc_of, rkey, redis_key(&c, key, klen, rkey), frame_max(pool), &buf,
				&len);
	if (shared)
		pthread_mutex_unlock(&r->fetch_lock);
	else
		mkv_rc_close(mine);
	if (rc == MKV_E_NOTFOUND) {
		count(pool, &slot->fetch_misses, 1);
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
	count(pool, rc ? &slot->fetch_errors : &slot->fetch_hits, 1);
	return rc;
}

/* The tier's part of mkv_pool_stat(): its servers, and every slot's counters summed. */
void
mkv_remote_stat(const struct mkv_pool *p, struct mkv_stat *st)
{
	struct mkv_remote_conf c;

	if (conf_read(p, &c, 1, false) == 0)
		memcpy(st->remote_servers, c.servers, sizeof(st->remote_servers));
	for (uint32_t i = 0; i < p->sb->max_clients; i++) {
		const struct mkv_slot *s = &p->slots[i];

		st->remote_spills += __atomic_load_n(&s->spills, __ATOMIC_RELAXED);
		st->remote_spill_bytes += __atomic_load_n(&s->spill_bytes, __ATOMIC_RELAXED);
		st->remote_drops += __atomic_load_n(&s->drops, __ATOMIC_RELAXED);
		st->remote_spill_errors += __atomic_load_n(&s->spill_errors, __ATOMIC_RELAXED);
		st->remote_fetches += __atomic_load_n(&s->fetches, __ATOMIC_RELAXED);
		st->remote_fetch_hits += __atomic_load_n(&s->fetch_hits, __ATOMIC_RELAXED);
		st->remote_fetch_misses += __atomic_load_n(&s->fetch_misses, __ATOMIC_RELAXED);
		st->remote_fetch_errors += __atomic_load_n(&s->fetch_errors, __ATOMIC_RELAXED);
	}
}
