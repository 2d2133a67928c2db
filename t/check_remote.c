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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "unitutil.h"
#include "internal.h"
#include "rcluster.h"

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

/* The frame under key's Redis key, fetched with the tier's own client. */
static void *
frame_of(struct mkv_rc *rc, const char *prefix, const char *key, size_t *len)
{
	char rkey[128];
	void *buf;

	snprintf(rkey, sizeof(rkey), "%s%s", prefix, key);
	ck_assert_int_eq(mkv_rc_get(rc, rkey, strlen(rkey), &buf, len), 0);
	return buf;
}

static void
frame_put(struct mkv_rc *rc, const char *prefix, const char *key, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };
	char rkey[128];

	snprintf(rkey, sizeof(rkey), "%s%s", prefix, key);
	ck_assert_int_eq(mkv_rc_set(rc, rkey, strlen(rkey), &iov, 1, 0), 0);
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
