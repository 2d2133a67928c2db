/* SPDX-License-Identifier: MIT */
/*
 * check_threads.c -- one pool handle shared by several threads: writers,
 * readers holding views, deleters.  Run it under TSan
 * (./configure --enable-sanitize=thread) to check the handle's locking.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NTHREADS 4
#define NKEYS 64
#define ROUNDS 3

struct worker {
	struct mkv_pool *pool;
	unsigned id;
	int failures;
};

static void *
work(void *arg)
{
	struct worker *w = arg;
	struct mkv_view views[NKEYS];
	char key[64];
	size_t klen;
	int rc;

	for (unsigned round = 0; round < ROUNDS; round++) {
		unsigned held = 0;

		for (unsigned i = 0; i < NKEYS; i++) {
			klen = tu_key(key, w->id % 2 ? "odd" : "even", round * NKEYS + i);
			rc = tu_publish(w->pool, key, klen, tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE));
			if (rc && rc != MKV_E_EXISTS)
				w->failures++;
		}
		/* Hold views of the other parity while its writers delete them. */
		for (unsigned i = 0; i < NKEYS; i++) {
			klen = tu_key(key, w->id % 2 ? "even" : "odd", round * NKEYS + i);
			rc = mkv_get(w->pool, key, klen, &views[held]);
			if (rc == MKV_E_NOTFOUND)
				continue;
			if (rc || tu_verify(views[held].data, views[held].len, key, klen) != -1)
				w->failures++;
			else
				held++;
		}
		for (unsigned i = 0; i < NKEYS; i++) {
			klen = tu_key(key, w->id % 2 ? "odd" : "even", round * NKEYS + i);
			rc = mkv_del(w->pool, key, klen);
			if (rc && rc != MKV_E_NOTFOUND)
				w->failures++;
		}
		for (unsigned i = 0; i < held; i++)
			if (mkv_release(w->pool, &views[i]))
				w->failures++;
	}
	return NULL;
}

START_TEST(test_threads_share_one_handle)
{
	struct mkv_pool *pool;
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	struct mkv_stat st;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	for (unsigned i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ pool, i, 0 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (unsigned i = 0; i < NTHREADS; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_msg(w[i].failures == 0, "thread %u: %d failures", i, w[i].failures);
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 0);
	ck_assert_uint_eq(st.pages_used, 0);
	ck_assert_uint_eq(st.bytes_stored, 0);
	/* One more write releases the last quarantine; close returns the
	 * handle's cached grants: every page but one is free again. */
	TU_OK(tu_put(pool, "last", 4, 1));
	TU_OK(mkv_del(pool, "last", 4));
	TU_OK(tu_put(pool, "last2", 5, 1));
	mkv_pool_close(&pool);
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_granted, 0);
	ck_assert_uint_eq(st.pages_free + 1, st.pages_total);
	mkv_pool_close(&pool);
}
END_TEST

static Suite *
threads_suite(void)
{
	Suite *s = suite_create("threads");
	TCase *tc = tcase_create("shared_handle");

	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_threads_share_one_handle);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(threads_suite());
}
