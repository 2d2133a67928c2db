/* SPDX-License-Identifier: MIT */
/*
 * spill.c -- the remote tier below the commit: values the lease holder
 * evicts spill, as MRDN frames, to a Redis Cluster (marukv(7), REMOTE
 * TIER); and the tier's setting and counters, which remote.c's calls
 * (mkv_remote_set(), mkv_fetch()) share.
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
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "rcluster.h"

/* An evicted value on its way to the tier: its frame, sealed by the thread. */
struct mkv_spill {
	struct mkv_spill *next;
	struct mkv_remote_conf conf;  /* where it goes, as set when it was evicted */
	uint64_t checksum, parent;
	size_t klen, vlen, size;      /* size: the frame's bytes */
	uint8_t key[MKV_KEY_MAX];
	uint8_t frame[];
};

struct mkv_remote_conf *
mkv_remote_conf_of(const struct mkv_pool *p)
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

/* Whether a setting read from the pool is one mkv_remote_set() could have written. */
static bool
conf_sane(const struct mkv_remote_conf *c)
{
	return memchr(c->servers, 0, sizeof(c->servers)) && memchr(c->prefix, 0, sizeof(c->prefix)) &&
		c->ttl_s <= MKV_REMOTE_TTL_MAX && c->queue_mib <= MKV_REMOTE_QUEUE_MIB_MAX &&
		c->timeout_ms <= MKV_REMOTE_TIMEOUT_MS_MAX && c->tier <= UINT8_MAX;
}

/*
 * A copy of the pool's setting whose gen read the same, and even, before
 * and after it, in at most tries looks: 0; MKV_E_REMOTE if a writer was
 * inside it at each (one that died there: the next mkv_remote_set() mends
 * it), or if it is not a setting at all (damaged), said only if loud (the
 * commit's and the statistics' looks leave the caller's message alone).
 * All zero: no tier.
 */
int
mkv_remote_conf_read(const struct mkv_pool *p, struct mkv_remote_conf *c, int tries, bool loud)
{
	const struct mkv_remote_conf *s = mkv_remote_conf_of(p);
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
size_t
mkv_remote_key(const struct mkv_remote_conf *c, const void *key, size_t klen, uint8_t *out)
{
	size_t n = strlen(c->prefix);

	memcpy(out, c->prefix, n);
	out[n] = '\0';
	memcpy(out + n + 1, key, klen);
	return n + 1 + klen;
}

/* Add to one of our slot's tier counters (layout.h), seen by other hosts. */
void
mkv_remote_count(struct mkv_pool *p, uint64_t *counter, uint64_t n)
{
	__atomic_add_fetch(counter, n, __ATOMIC_RELAXED);
	mkv_share_wb(p, &p->slots[p->slot].spills, MKV_CACHELINE);
}

/*
 * A client of the tier for setting c, reusing *rc if it was made for it;
 * cancelled while cancel_fd (-1: none) is readable.
 */
int
mkv_remote_client(const struct mkv_remote_conf *c, struct mkv_rc **rc, uint64_t *gen, int cancel_fd)
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
		mkv_remote_count(p, &slot->spill_errors, 1);
		return;
	}
	if (mkv_remote_client(&s->conf, rc, gen, p->remote.stop_fd)) {
		mkv_remote_count(p, &slot->spill_errors, 1);
		return;
	}
	mkv_frame_seal(s->frame, s->conf.tier, s->key, s->klen, s->vlen, s->parent);
	iov = (struct iovec){ s->frame, s->size };
	if (mkv_rc_set(*rc, rkey, mkv_remote_key(&s->conf, s->key, s->klen, rkey), &iov, 1,
			s->conf.ttl_s)) {
		mkv_remote_count(p, &slot->spill_errors, 1);
		return;
	}
	mkv_remote_count(p, &slot->spill_bytes, s->vlen);
	mkv_remote_count(p, &slot->spills, 1);
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
		mkv_remote_count(p, &p->slots[p->slot].drops, left);
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
	if (mkv_remote_conf_read(p, &c, 1, false) || !c.servers[0])
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
		mkv_remote_count(p, &p->slots[p->slot].drops, 1);
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

/* The tier's part of mkv_pool_stat(): its servers, and every slot's counters summed. */
void
mkv_remote_stat(const struct mkv_pool *p, struct mkv_stat *st)
{
	struct mkv_remote_conf c;

	if (mkv_remote_conf_read(p, &c, 1, false) == 0)
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
