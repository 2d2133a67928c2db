/* SPDX-License-Identifier: MIT */
/*
 * check_misuse.c -- what a careless (or hostile) caller does with the
 * structs it holds: buffers whose length was raised or whose pointer was
 * moved, copies of buffers already published or aborted, views released
 * twice through a copy, structs of another handle; and threads sharing one
 * handle while grants run out.
 *
 * marukv.h promises that the library checks every buffer and view against
 * its own record, refuses the bad ones with MKV_E_INVAL, and that a
 * refused call damages nothing.  "Nothing" is checked the hard way: values
 * published before the misuse keep their bytes, and views held across it
 * keep theirs while their keys are deleted and the pool is filled and
 * emptied again, so that unpinned pages would be reused.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define PAGE TU_PAGE_SIZE
#define NBYSTANDERS 12

static struct mkv_pool *pool;

/* Values published before each misuse; the even ones are viewed throughout. */
struct bystanders {
	char key[NBYSTANDERS][64];
	size_t klen[NBYSTANDERS], len[NBYSTANDERS];
	struct mkv_view view[NBYSTANDERS];
	int viewed;
};

static struct bystanders by;

static void
misuse_setup(void)
{
	tu_setup();
	pool = NULL;
	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	memset(&by, 0, sizeof(by));
}

static void
misuse_teardown(void)
{
	mkv_pool_close(&pool);
	tu_teardown();
}

/* Publish the bystanders; with @p views, take views of the even ones. */
static void
bystanders_start(int views)
{
	for (int i = 0; i < NBYSTANDERS; i++) {
		by.klen[i] = tu_key(by.key[i], "bystander", (unsigned)i);
		by.len[i] = tu_vlen(by.key[i], by.klen[i], 1, 3 * PAGE);
		TU_OK(tu_put(pool, by.key[i], by.klen[i], by.len[i]));
	}
	by.viewed = views;
	for (int i = 0; views && i < NBYSTANDERS; i += 2)
		TU_OK(mkv_get(pool, by.key[i], by.klen[i], &by.view[i]));
}

/*
 * The misuse damaged nothing: the bystanders that were not viewed read
 * back whole; the viewed ones, deleted and churned over, keep their bytes;
 * every view releases; a deep verify finds nothing.
 */
static void
bystanders_check(void)
{
	struct mkv_verify vr;
	int rc;

	for (int i = 0; i < NBYSTANDERS; i++)
		ck_assert_msg(tu_check(pool, by.key[i], by.klen[i], by.len[i]) == 0,
				"bystander %d no longer reads back", i);
	if (by.viewed) {
		for (int i = 0; i < NBYSTANDERS; i += 2)
			TU_OK(mkv_del(pool, by.key[i], by.klen[i]));
		rc = tu_churn(pool, "churn", 2);
		ck_assert_msg(rc == 0, "filling and emptying the pool: %d (%s): %s", rc,
				mkv_strerror(rc), mkv_errormsg());
		for (int i = 0; i < NBYSTANDERS; i += 2) {
			ssize_t off = tu_view_damage(&by.view[i], by.key[i], by.klen[i], by.len[i]);

			ck_assert_msg(off == -1,
					"the view of bystander %d changed at byte %zd after its key was deleted",
					i, off);
			TU_OK(mkv_release(pool, &by.view[i]));
		}
	}
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &vr);
	ck_assert_msg(rc == 0, "mkv_pool_verify: %d, %llu problems, first: %s", rc,
			(unsigned long long)vr.problems, vr.first_problem);
}

/* ---- buffers ---- */

START_TEST(test_publish_with_len_grown_over_another_buffer_is_refused)
{
	struct mkv_buf b1, b2, *lo, *hi;

	bystanders_start(1);
	TU_OK(mkv_alloc(pool, PAGE, &b1));
	TU_OK(mkv_alloc(pool, PAGE, &b2));
	/* from one grant, one after the other: grow the first over the second */
	lo = (char *)b1.data < (char *)b2.data ? &b1 : &b2;
	hi = lo == &b1 ? &b2 : &b1;
	tu_fill(lo->data, PAGE, "lo", 2);
	tu_fill(hi->data, PAGE, "hi", 2);
	lo->len = 2 * PAGE;
	TU_ERR(mkv_publish(pool, "lo", 2, lo), MKV_E_INVAL);
	/* the refused buffer is still the caller's */
	lo->len = PAGE;
	TU_OK(mkv_publish(pool, "lo", 2, lo));
	TU_OK(mkv_publish(pool, "hi", 2, hi));
	ck_assert_int_eq(tu_check(pool, "lo", 2, PAGE), 0);
	ck_assert_int_eq(tu_check(pool, "hi", 2, PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_publish_with_len_grown_into_cached_pages_is_refused)
{
	struct mkv_buf b1, b2;

	bystanders_start(1);
	/* a one-page buffer; the rest of the grant stays in the handle's cache */
	TU_OK(mkv_alloc(pool, PAGE, &b1));
	tu_fill(b1.data, PAGE, "one", 3);
	b1.len = 4 * PAGE;
	TU_ERR(mkv_publish(pool, "one", 3, &b1), MKV_E_INVAL);
	b1.len = PAGE;
	TU_OK(mkv_publish(pool, "one", 3, &b1));
	/* the cached pages go to the next buffer, not under "one" */
	TU_OK(mkv_alloc(pool, 3 * PAGE, &b2));
	tu_fill(b2.data, 3 * PAGE, "two", 3);
	TU_OK(mkv_publish(pool, "two", 3, &b2));
	ck_assert_int_eq(tu_check(pool, "one", 3, PAGE), 0);
	ck_assert_int_eq(tu_check(pool, "two", 3, 3 * PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_publish_of_aborted_buffer_copy_is_refused)
{
	struct mkv_buf b, copy, again;

	bystanders_start(1);
	TU_OK(mkv_alloc(pool, 2 * PAGE, &b));
	tu_fill(b.data, 2 * PAGE, "ab", 2);
	copy = b;
	TU_OK(mkv_abort(pool, &b));
	TU_ERR(mkv_publish(pool, "ab", 2, &copy), MKV_E_INVAL);
	ck_assert_int_eq(mkv_exists(pool, "ab", 2), 0);
	/* the aborted pages serve the next buffer */
	TU_OK(mkv_alloc(pool, 2 * PAGE, &again));
	tu_fill(again.data, 2 * PAGE, "next", 4);
	TU_OK(mkv_publish(pool, "next", 4, &again));
	ck_assert_int_eq(tu_check(pool, "next", 4, 2 * PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_second_abort_through_copy_is_refused)
{
	struct mkv_buf b, copy, x, y;

	bystanders_start(1);
	TU_OK(mkv_alloc(pool, 2 * PAGE, &b));
	copy = b;
	TU_OK(mkv_abort(pool, &b));
	TU_ERR(mkv_abort(pool, &copy), MKV_E_INVAL);
	/* the pages were given back once: two new buffers do not share them */
	TU_OK(mkv_alloc(pool, 2 * PAGE, &x));
	TU_OK(mkv_alloc(pool, 2 * PAGE, &y));
	ck_assert_msg((char *)x.data + 2 * PAGE <= (char *)y.data ||
			(char *)y.data + 2 * PAGE <= (char *)x.data,
			"two live buffers share pages: %p and %p", x.data, y.data);
	tu_fill(x.data, 2 * PAGE, "x", 1);
	tu_fill(y.data, 2 * PAGE, "y", 1);
	TU_OK(mkv_publish(pool, "x", 1, &x));
	TU_OK(mkv_publish(pool, "y", 1, &y));
	ck_assert_int_eq(tu_check(pool, "x", 1, 2 * PAGE), 0);
	ck_assert_int_eq(tu_check(pool, "y", 1, 2 * PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_publish_of_published_buffer_copy_is_refused)
{
	struct mkv_buf b, copy;

	bystanders_start(1);
	TU_OK(mkv_alloc(pool, 2 * PAGE, &b));
	tu_fill(b.data, 2 * PAGE, "pp", 2);
	copy = b;
	TU_OK(mkv_publish(pool, "pp", 2, &b));
	/* under another key, under the same key, or given back: all refused */
	TU_ERR(mkv_publish(pool, "other", 5, &copy), MKV_E_INVAL);
	TU_ERR(mkv_publish(pool, "pp", 2, &copy), MKV_E_INVAL);
	TU_ERR(mkv_abort(pool, &copy), MKV_E_INVAL);
	ck_assert_int_eq(mkv_exists(pool, "other", 5), 0);
	ck_assert_int_eq(tu_check(pool, "pp", 2, 2 * PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_abort_with_len_near_size_max_is_refused)
{
	static const size_t lens[] = { SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - PAGE + 2 };
	struct mkv_buf b;

	bystanders_start(1);
	TU_OK(mkv_alloc(pool, PAGE, &b));
	tu_fill(b.data, PAGE, "big", 3);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		b.len = lens[i];
		TU_ERR(mkv_abort(pool, &b), MKV_E_INVAL);
	}
	b.len = PAGE;
	TU_OK(mkv_publish(pool, "big", 3, &b));
	ck_assert_int_eq(tu_check(pool, "big", 3, PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_publish_with_len_near_size_max_is_refused)
{
	static const size_t lens[] = { SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - PAGE + 2 };
	struct mkv_buf b;

	bystanders_start(1);
	TU_OK(mkv_alloc(pool, PAGE, &b));
	tu_fill(b.data, PAGE, "big", 3);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		b.len = lens[i];
		TU_ERR(mkv_publish(pool, "big", 3, &b), MKV_E_INVAL);
	}
	ck_assert_int_eq(mkv_exists(pool, "big", 3), 0);
	b.len = PAGE;
	TU_OK(mkv_publish(pool, "big", 3, &b));
	ck_assert_int_eq(tu_check(pool, "big", 3, PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_buffer_with_moved_data_pointer_is_refused)
{
	struct mkv_buf b;

	bystanders_start(1);
	TU_OK(mkv_alloc(pool, 2 * PAGE, &b));
	tu_fill(b.data, 2 * PAGE, "moved", 5);
	b.data = (char *)b.data + PAGE;
	b.len = PAGE;
	TU_ERR(mkv_publish(pool, "moved", 5, &b), MKV_E_INVAL);
	TU_ERR(mkv_abort(pool, &b), MKV_E_INVAL);
	b.data = (char *)b.data - PAGE;
	b.len = 2 * PAGE;
	TU_OK(mkv_publish(pool, "moved", 5, &b));
	ck_assert_int_eq(tu_check(pool, "moved", 5, 2 * PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_buffer_from_another_handle_is_refused)
{
	struct mkv_pool *other;
	struct mkv_buf b;
	struct mkv_view v;

	bystanders_start(1);
	TU_OK(tu_pool_open(tu_dir, 0, &other));
	TU_OK(mkv_alloc(other, 2 * PAGE, &b));
	tu_fill(b.data, 2 * PAGE, "theirs", 6);
	TU_ERR(mkv_publish(pool, "theirs", 6, &b), MKV_E_INVAL);
	TU_ERR(mkv_abort(pool, &b), MKV_E_INVAL);
	TU_OK(mkv_publish(other, "theirs", 6, &b));
	/* a view of another handle is not released through this one */
	TU_OK(mkv_get(other, "theirs", 6, &v));
	TU_ERR(mkv_release(pool, &v), MKV_E_INVAL);
	TU_OK(mkv_release(other, &v));
	mkv_pool_close(&other);
	ck_assert_int_eq(tu_check(pool, "theirs", 6, 2 * PAGE), 0);
	bystanders_check();
}
END_TEST

START_TEST(test_lowered_len_publishes_that_many_bytes)
{
	struct mkv_stat before, st;
	struct mkv_buf b;
	size_t len = PAGE + 5;

	bystanders_start(1);
	tu_stat(pool, &before);
	TU_OK(mkv_alloc(pool, 3 * PAGE, &b));
	tu_fill(b.data, len, "low", 3);
	b.len = len;
	TU_OK(mkv_publish(pool, "low", 3, &b));
	ck_assert_int_eq(tu_check(pool, "low", 3, len), 0);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_used, before.pages_used + 2);
	ck_assert_uint_eq(st.bytes_stored, before.bytes_stored + len);
	bystanders_check();
	/* the page not published is not lost */
	mkv_pool_close(&pool);
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_granted, 0);
	ck_assert_uint_eq(st.pages_free + st.pages_quarantined + st.pages_used, st.pages_total);
}
END_TEST

/* ---- views ---- */

/*
 * Two views taken from one snapshot; the first released, then released
 * again through a copy.  The second must stay pinned: its key is deleted
 * and the pool churned, and its bytes must not change.
 */
START_TEST(test_second_release_through_copy_is_refused)
{
	struct mkv_view v1, v2, copy;
	size_t len = 3 * PAGE;
	ssize_t off;
	int rc, churned;

	bystanders_start(0);
	TU_OK(tu_put(pool, "v1", 2, len));
	TU_OK(tu_put(pool, "v2", 2, len));
	TU_OK(mkv_get(pool, "v1", 2, &v1));
	TU_OK(mkv_get(pool, "v2", 2, &v2));
	copy = v1;
	TU_OK(mkv_release(pool, &v1));
	rc = mkv_release(pool, &copy);
	TU_OK(mkv_del(pool, "v2", 2));
	churned = tu_churn(pool, "churn", 2);
	off = tu_view_damage(&v2, "v2", 2, len);
	ck_assert_msg(rc == MKV_E_INVAL && off == -1 && churned == 0,
			"releasing a released view again through a copy returned %d (%s), "
			"expected MKV_E_INVAL; the other live view %s; churn: %d",
			rc, mkv_strerror(rc), off == -1 ? "kept its bytes" :
			"changed (its pin was dropped)", churned);
	TU_OK(mkv_release(pool, &v2));
	bystanders_check();
}
END_TEST

START_TEST(test_view_with_moved_data_pointer_is_refused)
{
	struct mkv_view v, moved;
	size_t len = 3 * PAGE;
	ssize_t off;
	int rc, churned;

	bystanders_start(0);
	TU_OK(tu_put(pool, "v", 1, len));
	TU_OK(mkv_get(pool, "v", 1, &v));
	moved = v;
	moved.data = (const char *)moved.data + PAGE;
	rc = mkv_release(pool, &moved);
	TU_OK(mkv_del(pool, "v", 1));
	churned = tu_churn(pool, "churn", 2);
	off = tu_view_damage(&v, "v", 1, len);
	ck_assert_msg(rc == MKV_E_INVAL && off == -1 && churned == 0,
			"releasing a view whose data pointer was moved returned %d (%s), "
			"expected MKV_E_INVAL; the real view %s; churn: %d",
			rc, mkv_strerror(rc), off == -1 ? "kept its bytes" :
			"changed (its pin was dropped)", churned);
	TU_OK(mkv_release(pool, &v));
	bystanders_check();
}
END_TEST

/*
 * ---- threads on one handle ----
 *
 * Eight threads allocate, publish, put, abort, delete and read through one
 * handle on a pool of 256 pages, so that grants run short all the time.
 * The lease is held by another handle, as when the holder is another
 * process: the threads' grants then come back through the ring together,
 * and one thread's fresh grant could be taken (or handed back) by another
 * before it used it, which mkv_alloc() reported as MKV_E_INTERNAL.
 */

#define NTHREADS 8
#define NOPS 16000
#define NKEYS 192
#define T_DATA_SIZE (1ULL << 20)  /* 256 pages: grants run out */

struct tstats {
	unsigned long ok, exists, nospc, notfound, bad;
	int first_bad;
	char where[32];
	char msg[256];
};

struct targ {
	int id;
	struct tstats st;
};

static void
tally(struct tstats *st, const char *where, int rc, int notfound_ok)
{
	if (rc == 0)
		st->ok++;
	else if (rc == MKV_E_EXISTS)
		st->exists++;
	else if (rc == MKV_E_NOSPC)
		st->nospc++;
	else if (rc == MKV_E_NOTFOUND && notfound_ok)
		st->notfound++;
	else if (st->bad++ == 0) {
		st->first_bad = rc;
		snprintf(st->where, sizeof(st->where), "%s", where);
		snprintf(st->msg, sizeof(st->msg), "%s", mkv_errormsg());
	}
}

static size_t
tlen(const char *key, size_t klen)
{
	return tu_vlen(key, klen, 1, 4 * PAGE);
}

static void *
thread_main(void *arg)
{
	struct targ *t = arg;
	uint64_t rng = 0x5eed0000ULL + (uint64_t)t->id;
	char key[64];
	size_t klen, len;
	struct mkv_buf b;
	int rc;

	for (int i = 0; i < NOPS; i++) {
		unsigned op = (unsigned)tu_rand_range(&rng, 0, 9);

		klen = tu_key(key, "t", (unsigned)tu_rand_range(&rng, 0, NKEYS - 1));
		len = tlen(key, klen);
		if (op < 3) {
			tally(&t->st, "mkv_put", tu_put(pool, key, klen, len), 0);
		} else if (op < 7) {
			rc = mkv_alloc(pool, len, &b);
			tally(&t->st, "mkv_alloc", rc, 0);
			if (rc != 0)
				continue;
			tu_fill(b.data, len, key, klen);
			if (op < 5) {
				rc = mkv_publish(pool, key, klen, &b);
				tally(&t->st, "mkv_publish", rc, 0);
				if (rc != 0 && rc != MKV_E_EXISTS)
					tally(&t->st, "mkv_abort", mkv_abort(pool, &b), 0);
			} else {
				tally(&t->st, "mkv_abort", mkv_abort(pool, &b), 0);
			}
		} else if (op < 9) {
			tally(&t->st, "mkv_del", mkv_del(pool, key, klen), 1);
		} else {
			rc = tu_check(pool, key, klen, len);
			tally(&t->st, "mkv_get", rc > 0 ? -1000 - rc : rc, 1);
		}
	}
	return NULL;
}

START_TEST(test_threads_sharing_a_handle_see_only_documented_errors)
{
	struct targ t[NTHREADS];
	pthread_t th[NTHREADS];
	struct mkv_verify vr;
	unsigned long ok = 0, exists = 0, nospc = 0, notfound = 0, bad = 0;
	char report[2048] = "";
	size_t off = 0;
	int rc;

	struct mkv_pool *holder = NULL;

	mkv_pool_close(&pool);
	tu_teardown();
	tu_setup();
	TU_OK(tu_pool_create(tu_dir, T_DATA_SIZE, PAGE, TU_MAX_CLIENTS, &holder));
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	memset(t, 0, sizeof(t));
	for (int i = 0; i < NTHREADS; i++) {
		t[i].id = i;
		ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &t[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		ck_assert_int_eq(pthread_join(th[i], NULL), 0);
		ok += t[i].st.ok;
		exists += t[i].st.exists;
		nospc += t[i].st.nospc;
		notfound += t[i].st.notfound;
		bad += t[i].st.bad;
		if (t[i].st.bad && off < sizeof(report))
			off += (size_t)snprintf(report + off, sizeof(report) - off,
					"\n  thread %d: %lu times; first %s = %d (%s): %s", i,
					t[i].st.bad, t[i].st.where, t[i].st.first_bad,
					mkv_strerror(t[i].st.first_bad), t[i].st.msg);
	}
	ck_assert_msg(bad == 0, "calls failed with undocumented codes %lu times (and %lu succeeded, "
			"%lu MKV_E_EXISTS, %lu MKV_E_NOSPC, %lu MKV_E_NOTFOUND):%s", bad, ok, exists,
			nospc, notfound, report);
	/* the pool was really short of pages, and still served */
	ck_assert_msg(nospc > 0 && ok > 0, "%lu succeeded, %lu MKV_E_NOSPC", ok, nospc);
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &vr);
	ck_assert_msg(rc == 0, "mkv_pool_verify: %d, first: %s", rc, vr.first_problem);
	mkv_pool_close(&holder);
}
END_TEST

static Suite *
misuse_suite(void)
{
	Suite *s = suite_create("misuse");
	TCase *tc;

	tc = tcase_create("buffers");
	tcase_add_checked_fixture(tc, misuse_setup, misuse_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_publish_with_len_grown_over_another_buffer_is_refused);
	tcase_add_test(tc, test_publish_with_len_grown_into_cached_pages_is_refused);
	tcase_add_test(tc, test_publish_of_aborted_buffer_copy_is_refused);
	tcase_add_test(tc, test_second_abort_through_copy_is_refused);
	tcase_add_test(tc, test_publish_of_published_buffer_copy_is_refused);
	tcase_add_test(tc, test_abort_with_len_near_size_max_is_refused);
	tcase_add_test(tc, test_publish_with_len_near_size_max_is_refused);
	tcase_add_test(tc, test_buffer_with_moved_data_pointer_is_refused);
	tcase_add_test(tc, test_buffer_from_another_handle_is_refused);
	tcase_add_test(tc, test_lowered_len_publishes_that_many_bytes);
	suite_add_tcase(s, tc);

	tc = tcase_create("views");
	tcase_add_checked_fixture(tc, misuse_setup, misuse_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_second_release_through_copy_is_refused);
	tcase_add_test(tc, test_view_with_moved_data_pointer_is_refused);
	suite_add_tcase(s, tc);

	tc = tcase_create("threads");
	tcase_add_checked_fixture(tc, misuse_setup, misuse_teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_threads_sharing_a_handle_see_only_documented_errors);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(misuse_suite());
}
