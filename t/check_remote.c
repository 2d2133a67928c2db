/* SPDX-License-Identifier: MIT */
/*
 * check_remote.c -- the remote tier (mkv_remote_set, mkv_fetch, the
 * spilling of evicted values), against a real Redis Cluster of three
 * redis-server processes on loopback that the suite starts (skipped, 77,
 * without redis-server): every byte of what comes back is checked; a frame
 * damaged or swapped inside Redis is refused and nothing imported; a full
 * queue drops and never holds eviction up; a node killed mid-run makes
 * fetches of its keys fail within the timeout while the pool and the
 * other nodes' keys go on.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <hiredis/hiredis.h>

#include "testutil.h"
#include "unitutil.h"
#include "internal.h"
#include "rcluster.h"
#include "redisproxy.h"

#define NODES 3
#define TIMEOUT_MS 1000U

static char *cluster_dir;
static char servers[MKV_REMOTE_SERVERS_MAX + 1];
static unsigned round_no;

/* A prefix of this test's own, so that no test finds another's frames. */
static void
remote_on(struct mkv_pool *p, uint32_t queue_mib, uint32_t timeout_ms)
{
	struct mkv_remote r = { .queue_mib = queue_mib, .timeout_ms = timeout_ms, .tier = 7 };

	snprintf(r.servers, sizeof(r.servers), "%s", servers);
	snprintf(r.prefix, sizeof(r.prefix), "t%d.%u:", (int)getpid(), round_no++);
	TU_OK(mkv_remote_set(p, &r));
}

/* Evict every value that may go. */
static void
evict_all(struct mkv_pool *p)
{
	struct mkv_evict rep;

	TU_OK(mkv_pool_evict(p, 100, 0, &rep));
}

/* A pool of pages pages that evicts as it fills (tu_open() turns eviction off). */
static void
evicting_pool(uint64_t pages, struct mkv_pool **p)
{
	unit_holder_pool(pages, p, NULL);
	TU_OK(mkv_pool_set_watermarks(*p, 10, 20));
}

static void
remote_setup(void)
{
	tu_setup();
}

static void
remote_teardown(void)
{
	/* a test that stopped the nodes must not leave them stopped */
	for (unsigned i = 0; i < NODES; i++)
		if (tu_cluster_pid(i) > 0)
			kill(tu_cluster_pid(i), SIGCONT);
	tu_teardown();
}

/* Every evicted value spilled, dropped or refused: the queue is empty. */
static void
settled(struct mkv_pool *p, struct mkv_stat *st, double secs)
{
	double end = tu_now() + secs;

	for (;;) {
		tu_stat(p, st);
		if (st->remote_spills + st->remote_drops + st->remote_spill_errors >= st->evictions)
			break;
		ck_assert_msg(tu_now() < end, "after %.0f s, %llu evicted, %llu spilled, %llu dropped, "
				"%llu failed", secs, (unsigned long long)st->evictions,
				(unsigned long long)st->remote_spills,
				(unsigned long long)st->remote_drops,
				(unsigned long long)st->remote_spill_errors);
		tu_sleep_ms(20);
	}
	ck_assert_uint_eq(st->remote_spills + st->remote_drops + st->remote_spill_errors,
			st->evictions);
}

/* Put n values "<prefix><i>" of tu_vlen() bytes in lo..hi; the pool evicts as it fills. */
static void
put_many(struct mkv_pool *p, const char *prefix, unsigned n, size_t lo, size_t hi)
{
	char key[64];

	for (unsigned i = 0; i < n; i++) {
		size_t klen = tu_key(key, prefix, i);

		TU_OK(tu_put(p, key, klen, tu_vlen(key, klen, lo, hi)));
	}
}

START_TEST(test_off_by_default)
{
	struct mkv_remote r;
	struct mkv_pool *p;
	struct mkv_stat st;

	evicting_pool(64, &p);
	TU_OK(mkv_remote_get(p, &r));
	ck_assert_str_eq(r.servers, "");
	put_many(p, "off", 200, 1000, 9000);
	tu_stat(p, &st);
	ck_assert_uint_gt(st.evictions, 0);
	ck_assert_str_eq(st.remote_servers, "");
	ck_assert_uint_eq(st.remote_spills + st.remote_drops + st.remote_spill_errors, 0);
	TU_ERR(mkv_fetch(p, "off0", 4), MKV_E_NOTFOUND);
	tu_stat(p, &st);
	ck_assert_uint_eq(st.remote_fetches, 0);
	mkv_pool_close(&p);
}
END_TEST

START_TEST(test_set_checks_and_keeps_the_setting)
{
	static const char *const bad[] = { "host", "host:0", "host:99999", ":6379", "a:1,,b:2",
			"127.0.0.1:6379 ", "" "x:1,x:1,x:1,x:1,x:1,x:1,x:1,x:1,x:1,x:1,x:1,x:1,x:1,x:1,"
			"x:1,x:1,x:1" };
	struct mkv_remote r = { 0 }, got;
	struct mkv_pool *p, *q;

	evicting_pool(64, &p);
	remote_on(p, 5, 700);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(r.servers, sizeof(r.servers), "%s", bad[i]);
		ck_assert_msg(mkv_remote_set(p, &r) == MKV_E_INVAL, "servers \"%s\" taken", bad[i]);
	}
	snprintf(r.servers, sizeof(r.servers), "%s", servers);
	r.tier = 256;
	TU_ERR(mkv_remote_set(p, &r), MKV_E_INVAL);
	r.tier = 0;
	r.timeout_ms = 60001;
	TU_ERR(mkv_remote_set(p, &r), MKV_E_INVAL);
	r.timeout_ms = 0;
	memset(r.prefix, 'p', sizeof(r.prefix));
	TU_ERR(mkv_remote_set(p, &r), MKV_E_INVAL);

	/* nothing refused changed it; another handle sees it, defaults filled in */
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &q));
	TU_OK(mkv_remote_get(q, &got));
	ck_assert_str_eq(got.servers, servers);
	ck_assert_uint_eq(got.queue_mib, 5);
	ck_assert_uint_eq(got.timeout_ms, 700);
	ck_assert_uint_eq(got.tier, 7);
	TU_ERR(mkv_remote_set(q, NULL), MKV_E_RDONLY);
	TU_ERR(mkv_fetch(q, "k", 1), MKV_E_RDONLY);
	mkv_pool_close(&q);

	memset(&r, 0, sizeof(r));
	snprintf(r.servers, sizeof(r.servers), "%s", servers);
	TU_OK(mkv_remote_set(p, &r));
	TU_OK(mkv_remote_get(p, &got));
	ck_assert_uint_eq(got.queue_mib, 64);
	ck_assert_uint_eq(got.timeout_ms, 1000);
	TU_OK(mkv_remote_set(p, NULL));
	TU_OK(mkv_remote_get(p, &got));
	ck_assert_str_eq(got.servers, "");
	mkv_pool_close(&p);
}
END_TEST

/*
 * Values evicted from a 64-page pool spill; each comes back by mkv_fetch()
 * byte for byte.
 */
START_TEST(test_spill_and_fetch_round_trip)
{
	struct mkv_pool *p;
	struct mkv_stat st;
	unsigned n = 300, back = 0;
	char key[64];

	evicting_pool(64, &p);
	remote_on(p, 0, TIMEOUT_MS);
	put_many(p, "rt", n, 1, 3 * TU_PAGE_SIZE);
	settled(p, &st, 30);
	ck_assert_uint_gt(st.evictions, n / 2);
	ck_assert_uint_eq(st.remote_spills, st.evictions);
	ck_assert_uint_eq(st.remote_drops + st.remote_spill_errors, 0);
	/* a few at a time, as the pool holds fewer than were evicted */
	for (unsigned i = 0; i < n; i++) {
		size_t klen = tu_key(key, "rt", i);
		size_t len = tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE);

		if (mkv_exists(p, key, klen) == 1)
			continue;
		TU_OK(mkv_fetch(p, key, klen));
		TU_OK(tu_check(p, key, klen, len));
		back++;
		if (back % 8 == 0)
			evict_all(p);
	}
	ck_assert_uint_gt(back, n / 2);

	tu_stat(p, &st);
	ck_assert_uint_eq(st.remote_fetch_hits, back);
	ck_assert_uint_eq(st.remote_fetch_errors, 0);
	/* a key that was never anywhere */
	TU_ERR(mkv_fetch(p, "never", 5), MKV_E_NOTFOUND);
	tu_stat(p, &st);
	ck_assert_uint_eq(st.remote_fetch_misses, 1);
	mkv_pool_close(&p);
}
END_TEST

/*
 * Another process than the holder fetches: its import goes through the
 * holder's ring.  Not under TSan, which cannot follow a fork after threads
 * start (see TSAN_TESTS in Makefile.am).
 */
#ifndef __SANITIZE_THREAD__
START_TEST(test_a_client_process_fetches)
{
	struct mkv_pool *p;
	struct mkv_stat st;
	char key[64];
	pid_t pid;

	evicting_pool(64, &p);
	remote_on(p, 0, TIMEOUT_MS);
	put_many(p, "cl", 100, 1, 3 * TU_PAGE_SIZE);
	evict_all(p);
	settled(p, &st, 30);
	if ((pid = tu_fork()) == 0) {
		struct mkv_pool *c;
		int bad = 0;

		if (tu_pool_open(tu_dir, 0, &c))
			_exit(2);
		for (unsigned i = 0; i < 20 && !bad; i++) {
			size_t klen = tu_key(key, "cl", i);

			bad = mkv_fetch(c, key, klen) ||
				tu_check(c, key, klen, tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE));
		}
		mkv_pool_close(&c);
		_exit(bad);
	}
	ck_assert_int_eq(tu_reap(pid, 60), 0);
	tu_stat(p, &st);
	ck_assert_uint_eq(st.remote_fetch_hits, 20);
	ck_assert_uint_eq(st.remote_fetch_errors, 0);
	for (unsigned i = 0; i < 20; i++) {
		size_t klen = tu_key(key, "cl", i);

		TU_OK(tu_check(p, key, klen, tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE)));
	}
	mkv_pool_close(&p);
}
END_TEST
#endif

/* Large values, as LMCache stores whole chunks: 8 MiB each in a 24 MiB pool. */
START_TEST(test_large_values_round_trip)
{
	struct tu_opts o = { .data_size = 24ULL << 20 };
	size_t len = 8U << 20;
	struct mkv_pool *p;
	struct mkv_stat st;
	char key[64];

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &p));
	TU_OK(mkv_pool_set_watermarks(p, 10, 20));
	remote_on(p, 0, 5000);
	put_many(p, "big", 6, len, len);
	settled(p, &st, 60);
	ck_assert_uint_ge(st.remote_spills, 3);
	ck_assert_uint_eq(st.remote_spill_bytes, st.remote_spills * len);
	for (unsigned i = 0; i < 6; i++) {
		size_t klen = tu_key(key, "big", i);

		if (mkv_exists(p, key, klen) == 1)
			continue;
		evict_all(p);
		TU_OK(mkv_fetch(p, key, klen));
		TU_OK(tu_check(p, key, klen, len));
	}
	mkv_pool_close(&p);
}
END_TEST

/* key's Redis key, as marukv(7) REMOTE TIER gives it: the prefix, a NUL, the key; its length. */
static size_t
redis_key(char *out, size_t max, const char *prefix, const char *key)
{
	int n = snprintf(out, max, "%s%c%s", prefix, '\0', key);

	ck_assert(n > 0 && (size_t)n < max);
	return (size_t)n;
}

/* The frame under key's Redis key, fetched with the tier's own client. */
static void *
frame_of(struct mkv_rc *rc, const char *prefix, const char *key, size_t *len)
{
	char rkey[128];
	void *buf;

	ck_assert_int_eq(mkv_rc_get(rc, rkey, redis_key(rkey, sizeof(rkey), prefix, key),
			64U << 20, &buf, len), 0);
	return buf;
}

static void
frame_put(struct mkv_rc *rc, const char *prefix, const char *key, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };
	char rkey[128];

	ck_assert_int_eq(mkv_rc_set(rc, rkey, redis_key(rkey, sizeof(rkey), prefix, key), &iov,
			1, 0), 0);
}

/*
 * Frames damaged inside Redis, cut short, or of another key under a key's
 * name: each refused with its error, nothing imported, counted.
 */
START_TEST(test_damaged_frames_are_refused)
{
	struct mkv_remote r;
	struct mkv_pool *p;
	struct mkv_stat st;
	struct mkv_rc *rc;
	uint8_t *a, *b;
	size_t alen, blen;
	char ka[64], kb[64];

	evicting_pool(64, &p);
	remote_on(p, 0, TIMEOUT_MS);
	put_many(p, "dm", 100, 5000, 9000);
	evict_all(p);
	settled(p, &st, 30);
	TU_OK(mkv_remote_get(p, &r));
	TU_OK(mkv_rc_open(servers, TIMEOUT_MS, &rc));
	tu_key(ka, "dm", 0);
	tu_key(kb, "dm", 1);
	ck_assert_int_eq(mkv_exists(p, ka, strlen(ka)), 0);
	ck_assert_int_eq(mkv_exists(p, kb, strlen(kb)), 0);
	a = frame_of(rc, r.prefix, ka, &alen);
	b = frame_of(rc, r.prefix, kb, &blen);
	ck_assert_uint_eq(a[12], 7);

	/* one bit of the value */
	a[alen - 100] ^= 0x10;
	frame_put(rc, r.prefix, ka, a, alen);
	TU_ERR(mkv_fetch(p, ka, strlen(ka)), MKV_E_FRAME_CHECKSUM);
	a[alen - 100] ^= 0x10;
	/* cut short */
	frame_put(rc, r.prefix, ka, a, alen - 1);
	TU_ERR(mkv_fetch(p, ka, strlen(ka)), MKV_E_FRAME_SHORT);
	/* a byte more */
	a = realloc(a, alen + 1);
	a[alen] = 0;
	frame_put(rc, r.prefix, ka, a, alen + 1);
	TU_ERR(mkv_fetch(p, ka, strlen(ka)), MKV_E_FRAME_BODY);
	/* another key's frame, intact, under ka's name */
	frame_put(rc, r.prefix, ka, b, blen);
	TU_ERR(mkv_fetch(p, ka, strlen(ka)), MKV_E_FRAME_BODY);
	/* not a frame */
	frame_put(rc, r.prefix, ka, "GARBAGE, NOT A FRAME, 32 BYTES OR MORE", 38);
	TU_ERR(mkv_fetch(p, ka, strlen(ka)), MKV_E_FRAME_MAGIC);
	ck_assert_int_eq(mkv_exists(p, ka, strlen(ka)), 0);
	ck_assert_int_eq(mkv_exists(p, kb, strlen(kb)), 0);
	tu_stat(p, &st);
	ck_assert_uint_eq(st.remote_fetch_errors, 5);
	ck_assert_uint_eq(st.remote_fetch_hits, 0);

	/* restored, it imports */
	frame_put(rc, r.prefix, ka, a, alen);
	TU_OK(mkv_fetch(p, ka, strlen(ka)));
	TU_OK(tu_check(p, ka, strlen(ka), tu_vlen(ka, strlen(ka), 5000, 9000)));
	free(a);
	free(b);
	mkv_rc_close(rc);
	mkv_pool_close(&p);
}
END_TEST

/*
 * Every node stopped: spills wait on the network, the queue (1 MiB)
 * fills, and the rest are dropped and counted, while puts that evict go
 * on at their pace.  Let go, the queue drains.
 */
START_TEST(test_a_full_queue_drops_and_never_blocks)
{
	struct mkv_pool *p;
	struct mkv_stat st;
	double worst = 0;
	char key[64];

	evicting_pool(256, &p);
	remote_on(p, 1, 3000);
	for (unsigned i = 0; i < NODES; i++)
		ck_assert_int_eq(kill(tu_cluster_pid(i), SIGSTOP), 0);
	for (unsigned i = 0; i < 1000; i++) {
		size_t klen = tu_key(key, "q", i);
		double t = tu_now();

		TU_OK(tu_put(p, key, klen, 16384));
		t = tu_now() - t;
		worst = t > worst ? t : worst;
	}
	tu_stat(p, &st);
	for (unsigned i = 0; i < NODES; i++)
		ck_assert_int_eq(kill(tu_cluster_pid(i), SIGCONT), 0);
	ck_assert_uint_gt(st.evictions, 500);
	ck_assert_uint_gt(st.remote_drops, 400);
	ck_assert_msg(worst < 0.5, "a put took %.3f s while the tier was stopped", worst);
	settled(p, &st, 30);
	mkv_pool_close(&p);
}
END_TEST

/*
 * A handle closed with spills queued (the nodes stopped): its close waits
 * for the exchange under way only, a timeout for each node it asks (here
 * the three, for the slot map), and what it did not send is counted as
 * dropped, so every eviction is accounted for.
 */
START_TEST(test_close_drops_what_is_queued)
{
	struct mkv_pool *p;
	struct mkv_stat st;
	double t;

	evicting_pool(256, &p);
	remote_on(p, 64, 1000);
	for (unsigned i = 0; i < NODES; i++)
		ck_assert_int_eq(kill(tu_cluster_pid(i), SIGSTOP), 0);
	put_many(p, "cq", 400, 16384, 16384);
	t = tu_now();
	mkv_pool_close(&p);
	t = tu_now() - t;
	for (unsigned i = 0; i < NODES; i++)
		ck_assert_int_eq(kill(tu_cluster_pid(i), SIGCONT), 0);
	ck_assert_msg(t < NODES + 1.5, "close took %.3f s", t);
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &p));
	tu_stat(p, &st);
	ck_assert_uint_gt(st.evictions, 100);
	ck_assert_uint_gt(st.remote_drops, 0);
	ck_assert_uint_eq(st.remote_spills + st.remote_drops + st.remote_spill_errors,
			st.evictions);
	mkv_pool_close(&p);
}
END_TEST

/*
 * The setting as a writer that died inside it leaves it (its generation
 * odd), then damaged (a string without its end): the tier's calls say
 * so, eviction goes on without spilling, and mkv_remote_set() mends it.
 */
START_TEST(test_a_broken_setting_is_said_and_mended)
{
	struct mkv_remote_conf *c;
	struct mkv_remote r;
	struct mkv_pool *p;
	struct mkv_stat st;

	evicting_pool(64, &p);
	remote_on(p, 0, TIMEOUT_MS);
	c = (struct mkv_remote_conf *)((char *)p->state + MKV_REMOTE_OFF);
	c->gen |= 1;
	TU_ERR(mkv_remote_get(p, &r), MKV_E_REMOTE);
	TU_ERR(mkv_fetch(p, "absent", 6), MKV_E_REMOTE);
	put_many(p, "br", 100, 5000, 9000);
	tu_stat(p, &st);
	ck_assert_uint_gt(st.evictions, 0);
	ck_assert_uint_eq(st.remote_spills + st.remote_drops + st.remote_spill_errors, 0);
	ck_assert_str_eq(st.remote_servers, "");
	remote_on(p, 0, TIMEOUT_MS);
	TU_OK(mkv_remote_get(p, &r));
	ck_assert_str_eq(r.servers, servers);

	c->gen += 2;
	memset(c->servers, 'x', sizeof(c->servers));
	TU_ERR(mkv_remote_get(p, &r), MKV_E_REMOTE);
	ck_assert_msg(strstr(mkv_errormsg(), "damaged"), "%s", mkv_errormsg());
	TU_ERR(mkv_fetch(p, "absent", 6), MKV_E_REMOTE);
	remote_on(p, 0, TIMEOUT_MS);
	TU_ERR(mkv_fetch(p, "absent", 6), MKV_E_NOTFOUND);
	mkv_pool_close(&p);
}
END_TEST

/*
 * A node killed with SIGKILL mid-run: puts and evictions go on, spills to
 * it fail and are counted, fetches of its keys fail with MKV_E_REMOTE
 * within a bound, those of the other nodes' keys still come back whole,
 * and nothing damaged is ever imported.  Last: the cluster stays short of
 * a node.
 */
START_TEST(test_a_node_killed_mid_run)
{
	unsigned n = 400, ok = 0, failed = 0;
	struct mkv_pool *p;
	struct mkv_stat st;
	double worst = 0;
	char key[64];

	evicting_pool(64, &p);
	remote_on(p, 0, TIMEOUT_MS);
	put_many(p, "kill", n / 2, 1, 2 * TU_PAGE_SIZE);
	kill(tu_cluster_pid(NODES - 1), SIGKILL);
	for (unsigned i = n / 2; i < n; i++) {
		size_t klen = tu_key(key, "kill", i);

		TU_OK(tu_put(p, key, klen, tu_vlen(key, klen, 1, 2 * TU_PAGE_SIZE)));
	}
	evict_all(p);
	settled(p, &st, 60);
	ck_assert_uint_gt(st.remote_spill_errors, 0);
	ck_assert_uint_gt(st.remote_spills, 0);
	for (unsigned i = 0; i < n; i += 3) {
		size_t klen = tu_key(key, "kill", i);
		double t = tu_now();
		int rc;

		if (mkv_exists(p, key, klen) == 1)
			continue;
		rc = mkv_fetch(p, key, klen);
		t = tu_now() - t;
		worst = t > worst ? t : worst;
		if (rc == 0) {
			TU_OK(tu_check(p, key, klen, tu_vlen(key, klen, 1, 2 * TU_PAGE_SIZE)));
			evict_all(p);
			ok++;
		} else {
			ck_assert_msg(rc == MKV_E_REMOTE || rc == MKV_E_NOTFOUND, "fetch of %s: %s",
					key, mkv_errormsg());
			ck_assert_int_eq(mkv_exists(p, key, klen), 0);
			failed += rc == MKV_E_REMOTE;
		}
	}
	ck_assert_uint_gt(ok, 0);
	ck_assert_uint_gt(failed, 0);
	ck_assert_msg(worst < 4.0 * TIMEOUT_MS / 1000, "a fetch took %.3f s", worst);
	tu_verify_clean(p, MKV_VERIFY_DEEP, NULL, "after the node died");
	mkv_pool_close(&p);
}
END_TEST

/* ---- the tier's bounds, against a node behind t/redisproxy.c ---- */

/*
 * A hash tag whose slot node 0 serves (asked of node 0 itself: a key of
 * another node's slot gets -MOVED), into tag, "{...}".
 */
static void
node0_tag(char *tag, size_t max)
{
	redisContext *ctx = redisConnect("127.0.0.1", (int)tu_cluster_port(0));

	ck_assert(ctx && !ctx->err);
	for (unsigned i = 0;; i++) {
		redisReply *r;
		bool mine;

		snprintf(tag, max, "{n0.%u}", i);
		r = redisCommand(ctx, "GET %sprobe", tag);
		ck_assert_ptr_nonnull(r);
		mine = r->type != REDIS_REPLY_ERROR;
		freeReplyObject(r);
		if (mine)
			break;
	}
	redisFree(ctx);
}

/*
 * An evicting pool of 64 pages whose tier is a proxy in front of node 0,
 * with timeout_ms; its prefix's hash tag keeps all its Redis keys on that
 * node.  The proxy, passing bytes as they are.
 */
static struct tp_proxy *
proxied_pool(struct mkv_pool **p, uint32_t timeout_ms)
{
	struct mkv_remote r = { .timeout_ms = timeout_ms };
	struct tp_proxy *tp;
	unsigned port;
	char tag[32];

	ck_assert_int_eq(tp_start(tu_cluster_port(0), &tp, &port), 0);
	node0_tag(tag, sizeof(tag));
	evicting_pool(64, p);
	snprintf(r.servers, sizeof(r.servers), "127.0.0.1:%u", port);
	snprintf(r.prefix, sizeof(r.prefix), "%st%d.%u:", tag, (int)getpid(), round_no++);
	TU_OK(mkv_remote_set(*p, &r));
	return tp;
}

/* Put key (a value of len bytes) and evict it: it is spilled, as the stats say. */
static void
spilled(struct mkv_pool *p, const char *key, size_t len)
{
	struct mkv_stat st;

	TU_OK(tu_put(p, key, strlen(key), len));
	evict_all(p);
	ck_assert_int_eq(mkv_exists(p, key, strlen(key)), 0);
	settled(p, &st, 10);
	ck_assert_msg(st.remote_drops + st.remote_spill_errors == 0, "%s: %llu evicted, %llu spilled, %llu dropped, %llu failed", key, (unsigned long long)st.evictions, (unsigned long long)st.remote_spills, (unsigned long long)st.remote_drops, (unsigned long long)st.remote_spill_errors);
}

/* The pool has no problem a deep verify finds, and no page left over. */
static void
clean(struct mkv_pool *p)
{
	struct mkv_verify v;

	TU_OK(mkv_pool_verify(p, MKV_VERIFY_DEEP, &v));
	ck_assert_uint_eq(v.problems, 0);
}

/*
 * Whatever the node does inside a reply -- drips it, stalls, cuts it,
 * announces 10 MiB or 10 GiB and drips, sends a status line that never
 * ends -- mkv_fetch() fails with MKV_E_REMOTE by its timeout (600 ms
 * here, checked with room for a slow machine), nothing is imported, and
 * the pool stays clean; then the node passes bytes again and the fetch
 * brings the value back.  (Before every command ended by one deadline, a
 * drip kept the fetch for as long as the node dripped.)
 */
START_TEST(test_fetch_ends_by_its_timeout_whatever_the_node_sends)
{
	static const struct { enum tp_mode mode; const char *name, *says; } fault[] = {
		{ TP_DRIP, "drip", "no answer within the 600 ms timeout" },
		{ TP_STALL, "stall", "no answer within the 600 ms timeout" },
		{ TP_CUT, "cut", "the connection was closed" },
		{ TP_HUGE, "10 MiB", "announcing 10485760 bytes" },
		{ TP_GIGA, "10 GiB", "announcing 10737418240 bytes" },
		{ TP_ENDLESS, "endless status", "no answer within the 600 ms timeout" },
	};
	const uint32_t timeout = 600;
	struct mkv_pool *p;
	struct tp_proxy *tp = proxied_pool(&p, timeout);
	size_t len = 3 * TU_PAGE_SIZE + 5;

	spilled(p, "val", len);
	for (size_t i = 0; i < sizeof(fault) / sizeof(fault[0]); i++) {
		double t;
		int rc;

		tp_mode(tp, fault[i].mode);
		t = tu_now();
		rc = mkv_fetch(p, "val", 3);
		t = tu_now() - t;
		ck_assert_msg(rc == MKV_E_REMOTE && t < 2.0 * timeout / 1000,
				"%s: mkv_fetch returned %d after %.3f s (timeout %u ms): %s",
				fault[i].name, rc, t, timeout, mkv_errormsg());
		ck_assert_msg(strstr(mkv_errormsg(), fault[i].says), "%s: \"%s\"", fault[i].name,
				mkv_errormsg());
		ck_assert_int_eq(mkv_exists(p, "val", 3), 0);
		clean(p);
	}
	tp_mode(tp, TP_PASS);
	TU_OK(mkv_fetch(p, "val", 3));
	TU_OK(tu_check(p, "val", 3, len));
	clean(p);
	mkv_pool_close(&p);
	tp_stop(tp);
}
END_TEST

/*
 * A slot map naming 100 nodes that never answer, then a seed that stops
 * answering too, with a 100 ms timeout: each fetch asks a few of them at
 * most, and ends by its timeout (before, a refresh asked every node of
 * the map, each for the full timeout: 10 s a fetch).
 */
START_TEST(test_a_map_of_silent_nodes_costs_one_timeout)
{
	const uint32_t timeout = 100;
	struct mkv_pool *p;
	struct tp_proxy *tp = proxied_pool(&p, timeout);
	double worst = 0;

	spilled(p, "val", 100);
	tp_mode(tp, TP_SILENT_MAP);
	for (int i = 0; i < 8; i++) {
		double t = tu_now();

		if (i == 1)
			tp_mode(tp, TP_DEAD);
		TU_ERR(mkv_fetch(p, "val", 3), MKV_E_REMOTE);
		t = tu_now() - t;
		worst = t > worst ? t : worst;
	}
	ck_assert_msg(worst < 2.0 * timeout / 1000, "a fetch took %.3f s (timeout %u ms)", worst,
			timeout);
	clean(p);
	mkv_pool_close(&p);
	tp_stop(tp);
}
END_TEST

/* A thread's fetches, each timed: the worst in *worst (seconds). */
struct fetcher {
	struct mkv_pool *p;
	double worst;
	int bad;
};

static void *
fetch_loop(void *arg)
{
	struct fetcher *f = arg;

	for (int i = 0; i < 6; i++) {
		double t = tu_now();

		f->bad += mkv_fetch(f->p, "val", 3) != MKV_E_REMOTE;
		t = tu_now() - t;
		f->worst = t > f->worst ? t : f->worst;
	}
	return NULL;
}

/*
 * Three threads fetch from one handle while the node stalls every reply,
 * with a 200 ms timeout: each fetch ends by its own timeout, none waits
 * for the others' (they used to queue behind one lock, and the worst
 * took 2.4 s).
 */
START_TEST(test_fetches_of_threads_each_end_by_the_timeout)
{
	const uint32_t timeout = 200;
	struct mkv_pool *p;
	struct tp_proxy *tp = proxied_pool(&p, timeout);
	struct fetcher f[3] = { { p, 0, 0 }, { p, 0, 0 }, { p, 0, 0 } };
	pthread_t th[3];

	spilled(p, "val", 100);
	tp_mode(tp, TP_STALL);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, fetch_loop, &f[i]), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ck_assert_msg(f[i].bad == 0, "thread %d: %d fetches not MKV_E_REMOTE", i, f[i].bad);
		ck_assert_msg(f[i].worst < 2.0 * timeout / 1000, "thread %d: a fetch took %.3f s "
				"(timeout %u ms)", i, f[i].worst, timeout);
	}
	clean(p);
	mkv_pool_close(&p);
	tp_stop(tp);
}
END_TEST

/*
 * A node that sends every reply twice: the second is nobody's, and the
 * next command does not take it for its own (it used to: every later
 * fetch got the previous one's frame, "of another key").
 */
START_TEST(test_a_reply_nobody_asked_for_is_not_taken)
{
	struct mkv_pool *p;
	struct tp_proxy *tp = proxied_pool(&p, TIMEOUT_MS);
	static const char *const key[] = { "k1", "k2", "k3" };

	for (int i = 0; i < 3; i++)
		spilled(p, key[i], 1000 + 700 * (size_t)i);
	tp_mode(tp, TP_TWICE);
	for (int i = 0; i < 3; i++) {
		int rc = mkv_fetch(p, key[i], 2);

		ck_assert_msg(rc == 0, "fetch %d of %s: %d: %s", i, key[i], rc, mkv_errormsg());
		TU_OK(tu_check(p, key[i], 2, 1000 + 700 * (size_t)i));
	}
	clean(p);
	mkv_pool_close(&p);
	tp_stop(tp);
}
END_TEST

/*
 * The lease holder closes while its spilling thread waits inside a reply
 * that never ends (a status line a byte every 50 ms), with a 10 s tier
 * timeout: the close returns at once, the spill given up (before, the
 * close waited for as long as the node went on).
 */
START_TEST(test_close_of_the_holder_ends_while_a_spill_waits)
{
	struct mkv_pool *p;
	struct tp_proxy *tp = proxied_pool(&p, 10000);
	double t;

	tp_mode(tp, TP_ENDLESS);
	TU_OK(tu_put(p, "val", 3, 2 * TU_PAGE_SIZE));
	evict_all(p);
	/* CLUSTER SLOTS (answered whole by the proxy), then the SET, never answered whole */
	ck_assert(TU_UNTIL(tp_commands(tp) >= 2, 10.0));
	tu_sleep_ms(300);
	t = tu_now();
	mkv_pool_close(&p);
	t = tu_now() - t;
	ck_assert_msg(t < 1.0, "mkv_pool_close took %.3f s", t);
	TU_OK(tu_pool_open(tu_dir, 0, &p));
	clean(p);
	mkv_pool_close(&p);
	tp_stop(tp);
}
END_TEST

/*
 * Two pools whose prefixes nest, "P" and "Px": pool P's key "xK" and pool
 * Px's key "K" are different Redis keys (the prefix ends at a NUL), so
 * each gets its own value back, and a key only the other pool spilled is
 * not found.
 */
START_TEST(test_nested_prefixes_share_no_keys)
{
	struct mkv_remote r = { .timeout_ms = TIMEOUT_MS };
	struct mkv_pool *a, *b;
	char dir[4096];

	evicting_pool(64, &a);
	snprintf(dir, sizeof(dir), "%s/second", tu_dir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	TU_OK(tu_pool_create(dir, 64 * TU_PAGE_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &b));
	TU_OK(mkv_pool_set_watermarks(b, 10, 20));
	snprintf(r.servers, sizeof(r.servers), "%s", servers);
	snprintf(r.prefix, sizeof(r.prefix), "n%d.%u", (int)getpid(), round_no++);
	TU_OK(mkv_remote_set(a, &r));
	strcat(r.prefix, "x");
	TU_OK(mkv_remote_set(b, &r));
	spilled(a, "xK", 5000);
	spilled(b, "K", 7000);
	spilled(b, "M", 100);
	TU_OK(mkv_fetch(a, "xK", 2));
	TU_OK(tu_check(a, "xK", 2, 5000));
	TU_OK(mkv_fetch(b, "K", 1));
	TU_OK(tu_check(b, "K", 1, 7000));
	TU_ERR(mkv_fetch(a, "xM", 2), MKV_E_NOTFOUND);
	clean(a);
	clean(b);
	mkv_pool_close(&a);
	mkv_pool_close(&b);
}
END_TEST

static Suite *
remote_suite(void)
{
	Suite *s = suite_create("remote");
	TCase *tc = tcase_create("tier");

	tcase_add_checked_fixture(tc, remote_setup, remote_teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_off_by_default);
	tcase_add_test(tc, test_set_checks_and_keeps_the_setting);
	tcase_add_test(tc, test_spill_and_fetch_round_trip);
#ifndef __SANITIZE_THREAD__
	tcase_add_test(tc, test_a_client_process_fetches);
#endif
	tcase_add_test(tc, test_large_values_round_trip);
	tcase_add_test(tc, test_damaged_frames_are_refused);
	tcase_add_test(tc, test_a_full_queue_drops_and_never_blocks);
	tcase_add_test(tc, test_close_drops_what_is_queued);
	tcase_add_test(tc, test_a_broken_setting_is_said_and_mended);
	tcase_add_test(tc, test_fetch_ends_by_its_timeout_whatever_the_node_sends);
	tcase_add_test(tc, test_a_map_of_silent_nodes_costs_one_timeout);
	tcase_add_test(tc, test_fetches_of_threads_each_end_by_the_timeout);
	tcase_add_test(tc, test_a_reply_nobody_asked_for_is_not_taken);
	tcase_add_test(tc, test_close_of_the_holder_ends_while_a_spill_waits);
	tcase_add_test(tc, test_nested_prefixes_share_no_keys);
	/* last: it kills a node of the cluster the others share */
	tcase_add_test(tc, test_a_node_killed_mid_run);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	int rc;

	cluster_dir = tu_tmpdir_new();
	rc = tu_cluster_start(cluster_dir, NODES, servers, sizeof(servers));
	if (rc == 77) {
		puts("skip - no redis-server or redis-cli (Debian: redis-server, redis-tools)");
		tu_tmpdir_free(&cluster_dir);
		return 77;
	}
	if (rc) {
		fprintf(stderr, "check_remote: cannot start a Redis Cluster in %s\n", cluster_dir);
		return EXIT_FAILURE;
	}
	rc = tu_run_suite(remote_suite());
	tu_cluster_stop();
	tu_tmpdir_free(&cluster_dir);
	return rc;
}
