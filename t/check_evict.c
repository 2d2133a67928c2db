/* SPDX-License-Identifier: MIT */
/*
 * check_evict.c -- automatic eviction: watermarks hold under a long run,
 * allocations evict when short of pages, views of evicted keys stay
 * intact, a pool whose every page is pinned gives MKV_E_NOSPC and
 * recovers once the views are released.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define PAGES (TU_DATA_SIZE / TU_PAGE_SIZE)
#define LOW 5U
#define HIGH 10U

/* A pool with automatic eviction on (tu_pool_create turns it off). */
static void
evict_pool(uint64_t data_size, struct mkv_pool **pool)
{
	struct mkv_opts *opts;
	char *path = tu_pool_path(tu_dir);

	TU_OK(mkv_opts_new(&opts));
	TU_OK(mkv_opts_set_page_size(opts, TU_PAGE_SIZE));
	TU_OK(mkv_opts_set_data_size(opts, data_size));
	TU_OK(mkv_opts_set_watermarks(opts, LOW, HIGH));
	TU_OK(mkv_pool_open(path, MKV_CREATE, opts, pool));
	mkv_opts_delete(&opts);
	free(path);
}

START_TEST(test_watermarks_hold_over_a_long_run)
{
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	char key[64];
	size_t klen;
	unsigned n = 4 * PAGES, present = 0;

	evict_pool(TU_DATA_SIZE, &pool);
	for (unsigned i = 0; i < n; i++) {
		klen = tu_key(key, "long-", i);
		TU_OK(tu_put(pool, key, klen, tu_vlen(key, klen, 1, 2 * TU_PAGE_SIZE)));
		if (i % 64 == 63) {
			tu_stat(pool, &st);
			/* at most one allocation's worth below the low mark */
			ck_assert_msg(st.pages_free + st.pages_quarantined + st.pages_granted + 2 >=
					PAGES * LOW / 100,
					"after %u puts: free %llu quarantined %llu granted %llu of %llu",
					i + 1, (unsigned long long)st.pages_free,
					(unsigned long long)st.pages_quarantined,
					(unsigned long long)st.pages_granted,
					(unsigned long long)st.pages_total);
		}
	}
	tu_stat(pool, &st);
	ck_assert_uint_gt(st.evictions, 0);
	ck_assert_uint_eq(st.low_watermark, LOW);
	ck_assert_uint_eq(st.high_watermark, HIGH);
	for (unsigned i = 0; i < n; i++) {
		klen = tu_key(key, "long-", i);
		if (mkv_exists(pool, key, klen) == 1) {
			ck_assert_int_eq(tu_check(pool, key, klen, tu_vlen(key, klen, 1,
					2 * TU_PAGE_SIZE)), 0);
			present++;
		}
	}
	ck_assert_uint_eq(present, st.entries);
	ck_assert_uint_eq(present + st.evictions, n);
	TU_OK(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &rep));
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_view_survives_eviction_of_its_key)
{
	struct mkv_pool *pool;
	struct mkv_view v;
	char key[64];
	size_t klen;

	evict_pool(TU_DATA_SIZE, &pool);
	TU_OK(tu_put(pool, "victim", 6, 3 * TU_PAGE_SIZE));
	for (unsigned i = 0; i < PAGES / 2; i++) {
		klen = tu_key(key, "fill-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	TU_OK(mkv_get(pool, "victim", 6, &v));
	/* the sweep gives the viewed value its second chance, then takes it */
	{
		struct mkv_evict ev;

		TU_OK(mkv_pool_evict(pool, 100, 0, &ev));
		ck_assert_uint_gt(ev.keys, 0);
	}
	ck_assert_int_eq(mkv_exists(pool, "victim", 6), 0);
	/*
	 * More writes: the view's pin holds back every page deleted after it
	 * (the epoch rule), so they may run out of room, but never touch the
	 * viewed bytes.
	 */
	for (unsigned i = 0; i < PAGES; i++) {
		int rc;

		klen = tu_key(key, "more-", i);
		rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
		ck_assert_msg(rc == 0 || rc == MKV_E_NOSPC, "put = %d", rc);
	}
	ck_assert_int_eq((int)tu_verify(v.data, v.len, "victim", 6), -1);
	TU_OK(mkv_release(pool, &v));
	/* released: writes go on */
	for (unsigned i = 0; i < PAGES; i++) {
		klen = tu_key(key, "later-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_all_pinned_is_nospc_then_recovers)
{
	enum { SMALL = 64 };
	struct mkv_view *views = calloc(4 * SMALL, sizeof(*views));
	struct mkv_pool *pool;
	char key[64];
	size_t klen;
	unsigned held = 0, i;
	int rc = 0;

	ck_assert_ptr_nonnull(views);
	evict_pool(SMALL * TU_PAGE_SIZE, &pool);
	/* every value stays viewed: eviction deletes keys, their pages stay */
	for (i = 0; i < 4 * SMALL; i++) {
		klen = tu_key(key, "pinned-", i);
		rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
		if (rc)
			break;
		TU_OK(mkv_get(pool, key, klen, &views[held++]));
	}
	ck_assert_msg(rc == MKV_E_NOSPC, "put %u = %d (%s), expected MKV_E_NOSPC", i, rc,
			mkv_strerror(rc));
	ck_assert(mkv_errormsg()[0] != '\0');
	for (unsigned j = 0; j < held; j++) {
		klen = tu_key(key, "pinned-", j);
		ck_assert_int_eq((int)tu_verify(views[j].data, views[j].len, key, klen), -1);
		TU_OK(mkv_release(pool, &views[j]));
	}
	/* released: the pool takes writes again */
	for (i = 0; i < 2 * SMALL; i++) {
		klen = tu_key(key, "after-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	mkv_pool_close(&pool);
	free(views);
}
END_TEST

START_TEST(test_watermarks_are_checked_and_changeable)
{
	struct mkv_opts *opts;
	struct mkv_pool *pool;
	struct mkv_stat st;

	TU_OK(mkv_opts_new(&opts));
	TU_ERR(mkv_opts_set_watermarks(opts, 20, 10), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_watermarks(opts, 5, 95), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_watermarks(NULL, 5, 10), MKV_E_INVAL);
	TU_OK(mkv_opts_set_watermarks(opts, 0, 0));
	mkv_opts_delete(&opts);
	evict_pool(TU_DATA_SIZE, &pool);
	TU_OK(mkv_pool_set_watermarks(pool, 20, 30));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.low_watermark, 20);
	ck_assert_uint_eq(st.high_watermark, 30);
	TU_ERR(mkv_pool_set_watermarks(pool, 40, 30), MKV_E_INVAL);
	TU_ERR(mkv_pool_set_watermarks(NULL, 1, 2), MKV_E_INVAL);
	mkv_pool_close(&pool);
	/* the new marks outlive the handle */
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	TU_ERR(mkv_pool_set_watermarks(pool, 1, 2), MKV_E_RDONLY);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.low_watermark, 20);
	mkv_pool_close(&pool);
}
END_TEST

static Suite *
evict_suite(void)
{
	Suite *s = suite_create("evict");
	TCase *tc = tcase_create("watermarks");

	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_watermarks_hold_over_a_long_run);
	tcase_add_test(tc, test_view_survives_eviction_of_its_key);
	tcase_add_test(tc, test_all_pinned_is_nospc_then_recovers);
	tcase_add_test(tc, test_watermarks_are_checked_and_changeable);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(evict_suite());
}
