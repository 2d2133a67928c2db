/* SPDX-License-Identifier: MIT */
/*
 * check_epoch.c -- a view keeps its bytes while other processes delete the
 * key and refill the pool; the pages come back after release.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define NPAGES (TU_DATA_SIZE / TU_PAGE_SIZE)
#define VPAGES 8
#define VLEN (VPAGES * TU_PAGE_SIZE - 100)

/* Child: put the value of "victim" and leave. */
static int
child_put_victim(const char *dir)
{
	struct mkv_pool *pool;
	int rc;

	if (tu_pool_open(dir, 0, &pool) < 0)
		return 10;
	rc = tu_put(pool, "victim", 6, VLEN);
	mkv_pool_close(&pool);
	return rc == 0 ? 0 : 11;
}

/*
 * Child: delete "victim", then fill the pool with one-page values until
 * MKV_E_NOSPC, verify them all, and leave them there.
 */
static int
child_delete_and_fill(const char *dir)
{
	struct mkv_pool *pool;
	char key[64];
	size_t klen;
	unsigned n, i;
	int rc;

	if (tu_pool_open(dir, 0, &pool) < 0)
		return 20;
	if (mkv_del(pool, "victim", 6) != 0)
		return 21;
	for (n = 0;; n++) {
		klen = tu_key(key, "fill", n);
		rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
		if (rc == MKV_E_NOSPC)
			break;
		if (rc != 0)
			return 22;
		if (n > NPAGES)
			return 23;
	}
	for (i = 0; i < n; i++) {
		klen = tu_key(key, "fill", i);
		if (tu_check(pool, key, klen, TU_PAGE_SIZE) != 0)
			return 24;
	}
	mkv_pool_close(&pool);
	return 0;
}

static void
run_child(int (*fn)(const char *), int expect)
{
	pid_t pid = tu_fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(fn(tu_dir));
	st = tu_wait(pid);
	ck_assert_msg(st == expect, "child exited with %d, expected %d", st, expect);
}

START_TEST(test_view_survives_delete_and_refill)
{
	struct mkv_pool *pool;
	struct mkv_view v;
	struct mkv_stat st;
	unsigned char *copy;
	char key[64];
	size_t klen;
	unsigned n;
	int rc;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	mkv_pool_close(&pool);
	/* written by another process, so this one holds no grant */
	run_child(child_put_victim, 0);

	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	TU_OK(mkv_get(pool, "victim", 6, &v));
	ck_assert_uint_eq(v.len, VLEN);
	ck_assert_int_eq((int)tu_verify(v.data, v.len, "victim", 6), -1);
	copy = malloc(v.len);
	ck_assert_ptr_nonnull(copy);
	memcpy(copy, v.data, v.len);

	run_child(child_delete_and_fill, 0);

	/* the view's bytes did not move */
	ck_assert_int_eq((int)tu_verify(v.data, v.len, "victim", 6), -1);
	ck_assert_mem_eq(v.data, copy, v.len);
	ck_assert_int_eq(mkv_exists(pool, "victim", 6), 0);
	/* the child got every page but the viewed ones */
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, NPAGES - VPAGES);
	ck_assert_uint_eq(st.pages_used, NPAGES - VPAGES);
	ck_assert_uint_eq(st.pages_quarantined, VPAGES);
	ck_assert_uint_eq(st.pages_free, 0);
	TU_ERR(tu_put(pool, "late", 4, 1), MKV_E_NOSPC);
	ck_assert_int_eq((int)tu_verify(v.data, v.len, "victim", 6), -1);

	TU_OK(mkv_release(pool, &v));
	free(copy);

	/* released: the viewed pages can be written again */
	for (n = 0; n < VPAGES; n++) {
		klen = tu_key(key, "re", n);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	TU_ERR(tu_put(pool, "late", 4, 1), MKV_E_NOSPC);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 0);
	ck_assert_uint_eq(st.pages_used, NPAGES);

	/* and after clearing everything, a fill reaches the full capacity */
	for (n = 0; n < NPAGES - VPAGES; n++) {
		klen = tu_key(key, "fill", n);
		TU_OK(mkv_del(pool, key, klen));
	}
	for (n = 0; n < VPAGES; n++) {
		klen = tu_key(key, "re", n);
		TU_OK(mkv_del(pool, key, klen));
	}
	for (n = 0;; n++) {
		klen = tu_key(key, "again", n);
		rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
		if (rc == MKV_E_NOSPC)
			break;
		ck_assert_msg(rc == 0, "refill %u: %d (%s)", n, rc, mkv_strerror(rc));
		ck_assert_uint_le(n, NPAGES);
	}
	ck_assert_uint_eq(n, NPAGES);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_quarantine_counts_while_view_held)
{
	struct mkv_pool *pool;
	struct mkv_view v;
	struct mkv_stat st;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	TU_OK(tu_put(pool, "q", 1, 3 * TU_PAGE_SIZE));
	TU_OK(mkv_get(pool, "q", 1, &v));
	TU_OK(mkv_del(pool, "q", 1));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 3);
	ck_assert_uint_eq(st.pages_used, 0);
	ck_assert_uint_eq(st.entries, 0);

	/* another write does not free what a view holds */
	TU_OK(tu_put(pool, "w1", 2, 10));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 3);
	ck_assert_int_eq((int)tu_verify(v.data, v.len, "q", 1), -1);

	TU_OK(mkv_release(pool, &v));
	TU_OK(tu_put(pool, "w2", 2, 10));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 0);
	ck_assert_uint_eq(st.pages_used, 2);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_view_of_other_process_pins_pages)
{
	struct mkv_pool *pool;
	struct mkv_view v;
	struct mkv_stat st;
	int sync[2], go[2];
	pid_t pid;
	char c;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	TU_OK(tu_put(pool, "shared", 6, 2 * TU_PAGE_SIZE));
	mkv_pool_close(&pool);
	ck_assert_int_eq(pipe(sync), 0);
	ck_assert_int_eq(pipe(go), 0);

	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* the reader: view, tell the parent, wait, verify, release */
		int code = 0;

		close(sync[0]);
		close(go[1]);
		if (tu_pool_open(tu_dir, MKV_RDONLY, &pool) < 0)
			_exit(30);
		if (mkv_get(pool, "shared", 6, &v) < 0)
			_exit(31);
		if (write(sync[1], "v", 1) != 1)
			_exit(32);
		if (read(go[0], &c, 1) != 1)
			_exit(33);
		if (tu_verify(v.data, v.len, "shared", 6) != -1 || v.len != 2 * TU_PAGE_SIZE)
			code = 34;
		if (mkv_release(pool, &v) < 0)
			code = 35;
		mkv_pool_close(&pool);
		_exit(code);
	}
	close(sync[1]);
	close(go[0]);
	ck_assert_int_eq((int)read(sync[0], &c, 1), 1);

	/* the writer deletes the key and overwrites every page it can */
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	TU_OK(mkv_del(pool, "shared", 6));
	{
		char key[64];
		size_t klen;
		unsigned n;
		int rc;

		for (n = 0;; n++) {
			klen = tu_key(key, "w", n);
			rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
			if (rc == MKV_E_NOSPC)
				break;
			ck_assert_int_eq(rc, 0);
		}
		ck_assert_uint_eq(n, NPAGES - 2);
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 2);
	ck_assert_int_eq((int)write(go[1], "g", 1), 1);
	ck_assert_int_eq(tu_wait(pid), 0);

	/* the reader released: two more pages */
	TU_OK(tu_put(pool, "x1", 2, TU_PAGE_SIZE));
	TU_OK(tu_put(pool, "x2", 2, TU_PAGE_SIZE));
	TU_ERR(tu_put(pool, "x3", 2, 1), MKV_E_NOSPC);
	mkv_pool_close(&pool);
	close(sync[0]);
	close(go[1]);
}
END_TEST

static Suite *
epoch_suite(void)
{
	Suite *s = suite_create("epoch");
	TCase *tc;

	tc = tcase_create("quarantine");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_quarantine_counts_while_view_held);
	tcase_add_test(tc, test_view_survives_delete_and_refill);
	tcase_add_test(tc, test_view_of_other_process_pins_pages);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(epoch_suite());
}
