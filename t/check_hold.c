/* SPDX-License-Identifier: MIT */
/*
 * check_hold.c -- keys held against eviction (mkv_hold(), mkv_unhold()):
 * a held key outlives pressure many times the pool and a full eviction,
 * holds nest and are undone exactly, they hold back no other page (a pool
 * with keys held for its whole life keeps storing), a dead process's holds
 * go once its claim is revoked, and a hold that says a key is held is
 * right while evictions race it.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define SMALL 64U   /* pages of the pools here */

/* A pool of SMALL pages that evicts on its own, as tu_open() makes it (coherence and all). */
static struct mkv_pool *
hold_pool(const char *path)
{
	struct tu_opts o = { .data_size = SMALL * TU_PAGE_SIZE };
	struct mkv_pool *pool;

	TU_OK(tu_open(path, MKV_CREATE, &o, &pool));
	TU_OK(mkv_pool_set_watermarks(pool, 5, 10));
	return pool;
}

static struct mkv_key
key_of(char *buf, const char *prefix, unsigned i)
{
	size_t len = tu_key(buf, prefix, i);

	return (struct mkv_key){ buf, len };
}

/* Put values of one page under "<prefix><from..to-1>"; asserts. */
static void
put_range(struct mkv_pool *pool, const char *prefix, unsigned from, unsigned to)
{
	char key[64];

	for (unsigned i = from; i < to; i++) {
		struct mkv_key k = key_of(key, prefix, i);

		TU_OK(tu_put(pool, k.data, k.len, TU_PAGE_SIZE));
	}
}

START_TEST(test_held_keys_outlive_pressure)
{
	char *path = tu_pool_path(tu_dir), b[5][64];
	struct mkv_pool *pool = hold_pool(path);
	struct mkv_key keys[5];
	struct mkv_evict ev;
	struct mkv_stat st;
	size_t held;

	put_range(pool, "held-", 0, 4);
	for (unsigned i = 0; i < 5; i++)
		keys[i] = key_of(b[i], "held-", i);
	/* the fifth is not there: the four before it are held */
	TU_OK(mkv_hold(pool, keys, 5, &held));
	ck_assert_uint_eq(held, 4);
	/* one held twice */
	TU_OK(mkv_hold(pool, keys, 1, &held));
	ck_assert_uint_eq(held, 1);
	/* ten pools' worth of other values, and never MKV_E_NOSPC */
	put_range(pool, "fill-", 0, 10 * SMALL);
	TU_OK(mkv_pool_evict(pool, 100, 0, &ev));
	tu_stat(pool, &st);
	ck_assert_uint_gt(st.evictions, 9 * SMALL);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_int_eq(tu_check(pool, keys[i].data, keys[i].len, TU_PAGE_SIZE), 0);
	/* unheld once each: the first is still held, the rest go */
	TU_OK(mkv_unhold(pool, keys, 4));
	TU_OK(mkv_pool_evict(pool, 100, 0, &ev));
	ck_assert_int_eq(mkv_exists(pool, keys[0].data, keys[0].len), 1);
	for (unsigned i = 1; i < 4; i++)
		ck_assert_int_eq(mkv_exists(pool, keys[i].data, keys[i].len), 0);
	TU_OK(mkv_unhold(pool, keys, 1));
	TU_OK(mkv_pool_evict(pool, 100, 0, &ev));
	ck_assert_int_eq(mkv_exists(pool, keys[0].data, keys[0].len), 0);
	/* nothing held any more: an unhold is refused, and names the key */
	ck_assert_int_eq(mkv_unhold(pool, keys, 1), MKV_E_NOTFOUND);
	ck_assert_ptr_nonnull(strstr(mkv_errormsg(), "not held"));
	/* a hold is no delete guard: mkv_del() still deletes */
	put_range(pool, "del-", 0, 1);
	keys[0] = key_of(b[0], "del-", 0);
	TU_OK(mkv_hold(pool, keys, 1, &held));
	ck_assert_uint_eq(held, 1);
	TU_OK(mkv_del(pool, keys[0].data, keys[0].len));
	ck_assert_int_eq(mkv_exists(pool, keys[0].data, keys[0].len), 0);
	TU_OK(mkv_unhold(pool, keys, 1));
	mkv_pool_close(&pool);
	free(path);
}
END_TEST

/*
 * Half the pool held for its whole life, by a read-only handle: writers
 * keep storing in the other half, where a view kept as long would have
 * held back every page freed after it.
 */
START_TEST(test_long_holds_hold_back_nothing_else)
{
	char *path = tu_pool_path(tu_dir), key[64];
	struct mkv_pool *pool = hold_pool(path), *ro;
	struct mkv_key *keys = calloc(SMALL / 2, sizeof(*keys));
	char (*b)[64] = calloc(SMALL / 2, 64);
	size_t held;

	put_range(pool, "long-", 0, SMALL / 2);
	for (unsigned i = 0; i < SMALL / 2; i++)
		keys[i] = key_of(b[i], "long-", i);
	TU_OK(tu_open(path, MKV_RDONLY, NULL, &ro));
	TU_OK(mkv_hold(ro, keys, SMALL / 2, &held));
	ck_assert_uint_eq(held, SMALL / 2);
	for (unsigned i = 0; i < 20 * SMALL; i++) {
		struct mkv_key k = key_of(key, "more-", i);

		TU_OK(tu_put(pool, k.data, k.len, TU_PAGE_SIZE));
		ck_assert_int_eq(tu_check(pool, k.data, k.len, TU_PAGE_SIZE), 0);
	}
	for (unsigned i = 0; i < SMALL / 2; i++)
		ck_assert_int_eq(tu_check(pool, keys[i].data, keys[i].len, TU_PAGE_SIZE), 0);
	/* closing the handle drops its holds */
	mkv_pool_close(&ro);
	put_range(pool, "after-", 0, 2 * SMALL);
	for (unsigned i = 0; i < SMALL / 2; i++)
		ck_assert_int_eq(mkv_exists(pool, keys[i].data, keys[i].len), 0);
	mkv_pool_close(&pool);
	free(keys);
	free(b);
	free(path);
}
END_TEST

/* Forks: not under TSan, whose runtime mistakes children for their parent. */
#ifndef __SANITIZE_THREAD__
/* A child: hold "dead-0..7", say so, and wait to be killed. */
static int
holder_child(int cmd, int ev, void *arg)
{
	struct mkv_pool *pool;
	struct mkv_key keys[8];
	char b[8][64];
	size_t held;

	(void)cmd;
	if (tu_open(arg, 0, NULL, &pool))
		return 10;
	for (unsigned i = 0; i < 8; i++)
		keys[i] = key_of(b[i], "dead-", i);
	if (mkv_hold(pool, keys, 8, &held) || held != 8)
		return 11;
	tu_write_byte(ev, 'h');
	for (;;)
		pause();
}

/* A process killed with keys held: they count until its claim is revoked, then go. */
START_TEST(test_dead_holders_holds_go)
{
	char *path = tu_pool_path(tu_dir), key[64];
	struct mkv_pool *pool = hold_pool(path);
	struct tu_child c = TU_CHILD_NONE;
	struct mkv_reclaim rep;
	struct mkv_evict ev;

	put_range(pool, "dead-", 0, 8);
	tu_child_start(&c, holder_child, path);
	tu_child_expect(&c, "holder", 'h', TU_CHILD_DEADLINE);
	put_range(pool, "fill-", 0, 4 * SMALL);
	TU_OK(mkv_pool_evict(pool, 100, 0, &ev));
	for (unsigned i = 0; i < 8; i++) {
		struct mkv_key k = key_of(key, "dead-", i);

		ck_assert_int_eq(tu_check(pool, k.data, k.len, TU_PAGE_SIZE), 0);
	}
	tu_kill(c.pid);
	c.pid = -1;
	tu_child_end(&c);
	TU_OK(mkv_pool_reclaim(pool, 0, &rep));
	ck_assert_uint_ge(rep.clients, 1);
	TU_OK(mkv_pool_evict(pool, 100, 0, &ev));
	for (unsigned i = 0; i < 8; i++) {
		struct mkv_key k = key_of(key, "dead-", i);

		ck_assert_int_eq(mkv_exists(pool, k.data, k.len), 0);
	}
	mkv_pool_close(&pool);
	free(path);
}
END_TEST

/* A handle inherited across fork() holds nothing. */
START_TEST(test_forked_handle_holds_nothing)
{
	char b[64];
	struct mkv_pool *pool = hold_pool(tu_path);
	struct mkv_key k = key_of(b, "k-", 0);
	size_t held;
	pid_t pid;

	put_range(pool, "k-", 0, 1);
	TU_OK(mkv_hold(pool, &k, 1, &held));
	pid = tu_fork();
	if (pid == 0)
		_exit(mkv_hold(pool, &k, 1, &held) == MKV_E_INVAL &&
				mkv_unhold(pool, &k, 1) == MKV_E_INVAL ? 0 : 1);
	ck_assert_int_eq(tu_wait(pid), 0);
	TU_OK(mkv_unhold(pool, &k, 1));
	mkv_pool_close(&pool);
}
END_TEST
#endif

/*
 * Holds racing evictions: a thread holds the oldest keys a writer keeps
 * pushing out of a small pool, and every key it was told is held must
 * stay, with its bytes, until it unholds it.
 */
struct racing {
	struct mkv_pool *pool;
	unsigned newest;         /* the writer's last key */
	bool stop;
	unsigned holds, misses, lost;
};

static void *
holding_main(void *arg)
{
	struct racing *r = arg;
	char key[64];

	uint64_t seed = 1;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		unsigned newest = __atomic_load_n(&r->newest, __ATOMIC_ACQUIRE),
			 back = (unsigned)tu_rand_range(&seed, SMALL * 7 / 8, SMALL);
		/* about the oldest values left: the next ones eviction takes */
		struct mkv_key k = key_of(key, "race-", newest > back ? newest - back : 0);
		size_t held;

		if (mkv_hold(r->pool, &k, 1, &held)) {
			r->lost++;
			break;
		}
		if (!held) {
			r->misses++;
			continue;
		}
		r->holds++;
		tu_sleep_us(100);
		if (tu_check(r->pool, k.data, k.len, TU_PAGE_SIZE) != 0)
			r->lost++;
		if (mkv_unhold(r->pool, &k, 1))
			r->lost++;
	}
	return NULL;
}

START_TEST(test_holds_race_evictions)
{
	char *path = tu_pool_path(tu_dir), key[64];
	struct racing r = { .pool = NULL };
	struct mkv_stat st;
	pthread_t t;

	r.pool = hold_pool(path);
	ck_assert_int_eq(pthread_create(&t, NULL, holding_main, &r), 0);
	for (unsigned i = 0; i < 200 * SMALL; i++) {
		struct mkv_key k = key_of(key, "race-", i);

		TU_OK(tu_put(r.pool, k.data, k.len, TU_PAGE_SIZE));
		__atomic_store_n(&r.newest, i, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&r.stop, true, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	tu_stat(r.pool, &st);
	ck_assert_uint_gt(st.evictions, 150 * SMALL);
	ck_assert_msg(r.lost == 0, "%u of %u keys held were lost", r.lost, r.holds);
	ck_assert_uint_gt(r.holds, 20);
	mkv_pool_close(&r.pool);
	free(path);
}
END_TEST

START_TEST(test_hold_refuses_bad_calls)
{
	char *path = tu_pool_path(tu_dir), b[64];
	struct mkv_pool *pool = hold_pool(path);
	struct mkv_key k = key_of(b, "k-", 0), bad = { b, 0 };
	size_t held = 7;

	ck_assert_int_eq(mkv_hold(NULL, &k, 1, &held), MKV_E_INVAL);
	ck_assert_int_eq(mkv_hold(pool, &k, 1, NULL), MKV_E_INVAL);
	ck_assert_int_eq(mkv_hold(pool, NULL, 1, &held), MKV_E_INVAL);
	ck_assert_int_eq(mkv_hold(pool, &bad, 1, &held), MKV_E_INVAL);
	ck_assert_int_eq(mkv_unhold(pool, &bad, 1), MKV_E_INVAL);
	ck_assert_int_eq(mkv_unhold(NULL, &k, 1), MKV_E_INVAL);
	TU_OK(mkv_hold(pool, &k, 0, &held));
	ck_assert_uint_eq(held, 0);
	TU_OK(mkv_unhold(pool, &k, 0));
	/* a missing key: nothing held, so nothing to unhold */
	TU_OK(mkv_hold(pool, &k, 1, &held));
	ck_assert_uint_eq(held, 0);
	ck_assert_int_eq(mkv_unhold(pool, &k, 1), MKV_E_NOTFOUND);
	mkv_pool_close(&pool);
	free(path);
}
END_TEST

static Suite *
hold_suite(void)
{
	Suite *s = suite_create("hold");
	TCase *tc = tcase_create("hold");

	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_held_keys_outlive_pressure);
	tcase_add_test(tc, test_long_holds_hold_back_nothing_else);
	tcase_add_test(tc, test_holds_race_evictions);
	tcase_add_test(tc, test_hold_refuses_bad_calls);
#ifndef __SANITIZE_THREAD__
	tcase_add_test(tc, test_dead_holders_holds_go);
	tcase_add_test(tc, test_forked_handle_holds_nothing);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(hold_suite());
}
