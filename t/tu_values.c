/* SPDX-License-Identifier: MIT */
/*
 * tu_values.c -- deterministic numbers and patterns, pattern values
 * through the library, and pools filled with them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

uint64_t
tu_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t
tu_rand(uint64_t *state)
{
	uint64_t x = *state;

	if (x == 0)
		x = 0x2545f4914f6cdd1dULL;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint64_t
tu_rand_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
	return lo + tu_rand(state) % (hi - lo + 1);
}

uint64_t
tu_fnv1a(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t
tu_hash(const void *p, size_t n)
{
	uint64_t h = tu_fnv1a(p, n) ^ n;

	return tu_splitmix64(&h);
}

void
tu_fill(void *buf, size_t len, const void *key, size_t klen)
{
	unsigned char *b = buf;
	uint64_t s = tu_hash(key, klen), w;
	size_t off;

	for (off = 0; off < len; off += 8) {
		w = tu_splitmix64(&s);
		memcpy(b + off, &w, len - off < 8 ? len - off : 8);
	}
}

ssize_t
tu_verify(const void *buf, size_t len, const void *key, size_t klen)
{
	const unsigned char *b = buf;
	uint64_t s = tu_hash(key, klen), w;
	size_t off, i, n;

	for (off = 0; off < len; off += 8) {
		w = tu_splitmix64(&s);
		n = len - off < 8 ? len - off : 8;
		if (memcmp(b + off, &w, n) != 0) {
			for (i = 0; i < n; i++)
				if (b[off + i] != ((const unsigned char *)&w)[i])
					return (ssize_t)(off + i);
		}
	}
	return -1;
}

size_t
tu_vlen(const void *key, size_t klen, size_t lo, size_t hi)
{
	uint64_t s = tu_hash(key, klen) ^ 0x5bd1e995ULL;

	return lo + (size_t)(tu_splitmix64(&s) % (hi - lo + 1));
}

size_t
tu_key(char *out, const char *prefix, unsigned i)
{
	int n = snprintf(out, 64, "%s%08u", prefix, i);

	return n < 0 ? 0 : (size_t)n;
}

void
tu_chain_key(const uint8_t *prev, uint64_t i, uint8_t out[32])
{
	uint64_t s, w;
	int k;

	s = (prev ? tu_hash(prev, 32) : 0x6d61727563686169ULL) ^ (i * 0x9e3779b97f4a7c15ULL);
	for (k = 0; k < 4; k++) {
		w = tu_splitmix64(&s);
		memcpy(out + 8 * k, &w, 8);
	}
}

void
tu_chain_keys(uint8_t (*keys)[32], size_t n, uint64_t seed)
{
	uint8_t first[32];
	size_t i;

	memset(first, 0, sizeof(first));
	memcpy(first, &seed, sizeof(seed));
	for (i = 0; i < n; i++)
		tu_chain_key(i == 0 ? first : keys[i - 1], i, keys[i]);
}

int
tu_put(struct mkv_pool *pool, const void *key, size_t klen, size_t len)
{
	void *v = malloc(len ? len : 1);
	int rc;

	if (v == NULL)
		return -ENOMEM;
	tu_fill(v, len, key, klen);
	rc = mkv_put(pool, key, klen, v, len);
	free(v);
	return rc;
}

/* A buffer of @p len bytes filled with the pattern of @p key; the mkv_alloc() code. */
static int
alloc_fill(struct mkv_pool *pool, const void *key, size_t klen, size_t len, struct mkv_buf *buf)
{
	int rc;

	memset(buf, 0, sizeof(*buf));
	if ((rc = mkv_alloc(pool, len, buf)) < 0 || buf->data == NULL || buf->len < len)
		return rc;
	tu_fill(buf->data, len, key, klen);
	return 0;
}

int
tu_publish(struct mkv_pool *pool, const void *key, size_t klen, size_t len)
{
	struct mkv_buf buf;
	int rc;

	if ((rc = alloc_fill(pool, key, klen, len, &buf)) < 0)
		return rc;
	if (buf.data == NULL || buf.len < len) {
		(void)mkv_abort(pool, &buf);
		return -EFAULT;
	}
	rc = mkv_publish(pool, key, klen, &buf);
	if (rc < 0 && rc != MKV_E_EXISTS)
		(void)mkv_abort(pool, &buf);
	return rc;
}

char tu_write_msg[256];

int
tu_write(struct mkv_pool *pool, const char *key, size_t klen, size_t len, enum tu_way way,
		int *nomsg)
{
	static const char *const what[] = { "put", "publish", "publish_async/wait" };
	struct mkv_ticket t;
	struct mkv_buf b;
	int rc;

	tu_write_msg[0] = '\0';
	if (way == TU_WAY_PUT) {
		rc = tu_put(pool, key, klen, len);
	} else if ((rc = alloc_fill(pool, key, klen, len, &b)) < 0) {
		if (mkv_errormsg()[0] == '\0')
			(*nomsg)++;
		snprintf(tu_write_msg, sizeof(tu_write_msg), "alloc for %s: %s", key,
				mkv_errormsg());
		return rc;
	} else if (b.data == NULL || b.len < len) {
		/* a broken promise of the API is not a "clean failure": end the child */
		_exit(tu_fail(120, "alloc(%zu) for %s returned data %p len %zu", len, key,
				b.data, b.len));
	} else if (way == TU_WAY_PUBLISH) {
		rc = mkv_publish(pool, key, klen, &b);
		if ((rc == 0 || rc == MKV_E_EXISTS) && !tu_is_zero(&b, sizeof(b)))
			_exit(tu_fail(121, "publish %s = %d left the buffer", key, rc));
	} else {
		rc = mkv_publish_async(pool, key, klen, &b, &t);
		if (rc == 0) {
			if (!tu_is_zero(&b, sizeof(b)))
				_exit(tu_fail(122, "publish_async %s left the buffer", key));
			rc = mkv_wait(pool, &t);
		}
	}
	if (rc < 0) {
		if (mkv_errormsg()[0] == '\0')
			(*nomsg)++;
		snprintf(tu_write_msg, sizeof(tu_write_msg), "%s %s: %s", what[way], key,
				mkv_errormsg());
		if (way != TU_WAY_PUT && rc != MKV_E_EXISTS && b.data != NULL)
			(void)mkv_abort(pool, &b);
	}
	return rc;
}

int
tu_check(struct mkv_pool *pool, const void *key, size_t klen, size_t len)
{
	struct mkv_view v;
	int rc, bad = 0;

	memset(&v, 0, sizeof(v));
	rc = mkv_get(pool, key, klen, &v);
	if (rc < 0)
		return rc;
	if (len != (size_t)-1 && v.len != len)
		bad = 1;
	else if (v.data == NULL || tu_verify(v.data, v.len, key, klen) != -1)
		bad = 2;
	if (mkv_release(pool, &v) != 0 && !bad)
		bad = 3;
	return bad;
}

void
tu_stat(struct mkv_pool *pool, struct mkv_stat *st)
{
	int rc;

	memset(st, 0xa5, sizeof(*st));
	rc = mkv_pool_stat(pool, st);
	ck_assert_msg(rc == 0, "mkv_pool_stat = %d (%s): %s", rc, mkv_strerror(rc),
			mkv_errormsg());
	ck_assert_msg(mkv_errormsg()[0] == '\0', "mkv_pool_stat: errormsg \"%s\"",
			mkv_errormsg());
	ck_assert_msg(st->pages_used + st->pages_free + st->pages_quarantined +
			st->pages_granted == st->pages_total,
			"page counts do not add up: used %llu free %llu quarantined %llu "
			"granted %llu total %llu",
			(unsigned long long)st->pages_used, (unsigned long long)st->pages_free,
			(unsigned long long)st->pages_quarantined,
			(unsigned long long)st->pages_granted,
			(unsigned long long)st->pages_total);
}

ssize_t
tu_view_damage(const struct mkv_view *v, const void *key, size_t klen, size_t len)
{
	if (v->data == NULL || v->len != len)
		return 0;
	return tu_verify(v->data, v->len, key, klen);
}

void
tu_verify_clean(struct mkv_pool *pool, unsigned flags, struct mkv_verify *rep, const char *ctx)
{
	struct mkv_verify own;
	int rc;

	if (rep == NULL)
		rep = &own;
	memset(rep, 0xa5, sizeof(*rep));
	rc = mkv_pool_verify(pool, flags, rep);
	ck_assert_msg(rc == 0, "%s: mkv_pool_verify(0x%x) = %d (%s), problems %llu, first: "
			"\"%.200s\" (%s)", ctx, flags, rc, mkv_strerror(rc),
			(unsigned long long)rep->problems,
			rc == MKV_E_CORRUPT ? rep->first_problem : "", mkv_errormsg());
	ck_assert_msg(rep->problems == 0 && rep->first_problem[0] == '\0',
			"%s: verify returned 0 with problems %llu \"%s\"", ctx,
			(unsigned long long)rep->problems, rep->first_problem);
}

uint64_t
tu_drain_pending(struct mkv_pool *pool, double secs)
{
	struct mkv_stat st;
	double end = tu_now() + secs;

	for (;;) {
		tu_stat(pool, &st);
		if (st.requests_pending == 0 || tu_now() > end)
			return st.requests_pending;
		tu_sleep_ms(5);
	}
}

const char *
tu_lease_text(const char *path)
{
	static char out[256];
	struct tu_opts o = { .node = "a" };
	struct mkv_pool *pool;
	struct mkv_stat st;
	int rc;

	rc = tu_open(path, MKV_RDONLY, &o, &pool);
	if (rc == 0)
		rc = mkv_pool_stat(pool, &st);
	if (rc != 0)
		snprintf(out, sizeof(out), "(no stat: %s: %s)", mkv_strerror(rc), mkv_errormsg());
	else
		snprintf(out, sizeof(out), "lease: holder pid %u node \"%s\" slot %u "
				"generation %llu beat age %lld ms, requests pending %llu",
				st.lease_holder_pid, st.lease_holder_node, st.lease_holder_slot,
				(unsigned long long)st.lease_generation,
				(long long)st.lease_heartbeat_age_ms,
				(unsigned long long)st.requests_pending);
	mkv_pool_close(&pool);
	return out;
}

int
tu_is_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

long
tu_fill_until_full(struct mkv_pool *pool, const char *prefix, unsigned *next, size_t len)
{
	char key[64];
	size_t klen;
	long n = 0;
	int rc;

	for (;;) {
		klen = tu_key(key, prefix, *next);
		rc = tu_put(pool, key, klen, len);
		if (rc == MKV_E_NOSPC)
			return n;
		if (rc < 0)
			return rc;
		(*next)++;
		/* a pool that evicts on its own never fills */
		if (++n > 1000000)
			return -ELOOP;
	}
}

int
tu_churn(struct mkv_pool *pool, const char *prefix, int rounds)
{
	struct mkv_stat st;
	char key[64];
	unsigned next;
	long n;
	int rc;

	if ((rc = mkv_pool_stat(pool, &st)) < 0)
		return rc;
	for (int r = 0; r < rounds; r++) {
		next = 0;
		n = tu_fill_until_full(pool, prefix, &next, st.page_size);
		if (n < 0)
			return (int)n;
		for (unsigned i = 0; i < next; i++) {
			size_t klen = tu_key(key, prefix, i);

			if ((rc = mkv_del(pool, key, klen)) < 0)
				return rc;
		}
	}
	return 0;
}
