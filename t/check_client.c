/* SPDX-License-Identifier: MIT */
/*
 * check_client.c -- client slots: the limit, reuse after close, reuse after
 * a client is killed, and reclaiming a killed writer's grants.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define NPAGES (TU_DATA_SIZE / TU_PAGE_SIZE)

START_TEST(test_third_handle_is_users)
{
	struct mkv_pool *a, *b, *c = (struct mkv_pool *)&c;
	struct mkv_stat st;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 2, &a));
	TU_OK(tu_pool_open(tu_dir, 0, &b));
	ck_assert_ptr_ne(a, b);
	tu_stat(a, &st);
	ck_assert_uint_eq(st.clients, 2);
	ck_assert_uint_eq(st.max_clients, 2);
	TU_ERR(tu_pool_open(tu_dir, 0, &c), MKV_E_USERS);
	ck_assert_ptr_null(c);
	TU_ERR(tu_pool_open(tu_dir, MKV_RDONLY, &c), MKV_E_USERS);
	ck_assert_ptr_null(c);
	/* both handles work */
	TU_OK(tu_put(a, "a", 1, 100));
	TU_OK(tu_put(b, "b", 1, 200));
	ck_assert_int_eq(tu_check(b, "a", 1, 100), 0);
	ck_assert_int_eq(tu_check(a, "b", 1, 200), 0);

	/* closing one frees its slot */
	mkv_pool_close(&b);
	tu_stat(a, &st);
	ck_assert_uint_eq(st.clients, 1);
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &c));
	ck_assert_int_eq(tu_check(c, "b", 1, 200), 0);
	TU_ERR(tu_pool_open(tu_dir, 0, &b), MKV_E_USERS);
	mkv_pool_close(&c);
	mkv_pool_close(&a);
}
END_TEST

START_TEST(test_slots_reused_after_many_opens)
{
	struct mkv_pool *a;
	unsigned i;

	for (i = 0; i < 20; i++) {
		if (i == 0)
			TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 1, &a));
		else
			TU_OK(tu_pool_open(tu_dir, i % 2 ? MKV_RDONLY : 0, &a));
		mkv_pool_close(&a);
	}
}
END_TEST

/*
 * Child: open the pool, optionally allocate @p alloc_pages pages and leave
 * them unpublished, tell the parent, and wait to be killed.
 */
static pid_t
spawn_holder(int *rfd, size_t alloc_pages)
{
	int p[2];
	pid_t pid;
	char c;

	ck_assert_int_eq(pipe(p), 0);
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct mkv_pool *pool;
		struct mkv_buf buf;

		close(p[0]);
		if (tu_pool_open(tu_dir, 0, &pool) < 0)
			_exit(40);
		if (alloc_pages) {
			if (mkv_alloc(pool, alloc_pages * TU_PAGE_SIZE, &buf) < 0)
				_exit(41);
			memset(buf.data, 0x77, buf.len);
		}
		if (write(p[1], "r", 1) != 1)
			_exit(42);
		for (;;)
			pause();
	}
	close(p[1]);
	ck_assert_msg(read(p[0], &c, 1) == 1, "holder child failed: %d", tu_wait(pid));
	*rfd = p[0];
	return pid;
}

START_TEST(test_killed_client_slot_is_reused)
{
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	int fd;
	pid_t pid;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 1, &pool));
	TU_OK(tu_put(pool, "k", 1, 1234));
	mkv_pool_close(&pool);

	pid = spawn_holder(&fd, 0);
	/* the child holds the only slot */
	TU_ERR(tu_pool_open(tu_dir, 0, &pool), MKV_E_USERS);
	ck_assert_ptr_null(pool);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(tu_wait(pid), 128 + SIGKILL);
	close(fd);

	/* its slot is reclaimed */
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	ck_assert_int_eq(tu_check(pool, "k", 1, 1234), 0);
	TU_OK(tu_put(pool, "k2", 2, 10));
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_killed_clients_slots_all_reused)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	pid_t pids[3];
	int fds[3], i;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 3, &pool));
	mkv_pool_close(&pool);
	for (i = 0; i < 3; i++)
		pids[i] = spawn_holder(&fds[i], 0);
	TU_ERR(tu_pool_open(tu_dir, MKV_RDONLY, &pool), MKV_E_USERS);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(kill(pids[i], SIGKILL), 0);
		ck_assert_int_eq(tu_wait(pids[i]), 128 + SIGKILL);
		close(fds[i]);
	}
	{
		struct mkv_pool *h[3];

		for (i = 0; i < 3; i++)
			TU_OK(tu_pool_open(tu_dir, 0, &h[i]));
		tu_stat(h[0], &st);
		ck_assert_uint_eq(st.clients, 3);
		for (i = 0; i < 3; i++)
			mkv_pool_close(&h[i]);
	}
}
END_TEST

START_TEST(test_killed_writer_grants_reclaimed)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	char key[64];
	size_t klen;
	unsigned n;
	pid_t pid;
	int fd, rc;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 4, &pool));
	mkv_pool_close(&pool);
	pid = spawn_holder(&fd, 16);

	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_ge(st.pages_granted, 16);
	ck_assert_uint_le(st.pages_free, NPAGES - 16);
	ck_assert_uint_eq(st.clients, 2);

	/* while the writer lives, its grant is not ours */
	for (n = 0;; n++) {
		klen = tu_key(key, "p", n);
		rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
		if (rc == MKV_E_NOSPC)
			break;
		ck_assert_msg(rc == 0, "put %u: %d (%s)", n, rc, mkv_strerror(rc));
		ck_assert_uint_le(n, NPAGES);
	}
	ck_assert_uint_le(n, NPAGES - 16);

	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(tu_wait(pid), 128 + SIGKILL);
	close(fd);

	/* dead: every page is usable again */
	for (;; n++) {
		klen = tu_key(key, "p", n);
		rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
		if (rc == MKV_E_NOSPC)
			break;
		ck_assert_msg(rc == 0, "put %u: %d (%s)", n, rc, mkv_strerror(rc));
		ck_assert_uint_le(n, NPAGES);
	}
	ck_assert_uint_eq(n, NPAGES);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_used, NPAGES);
	ck_assert_uint_eq(st.pages_granted, 0);
	ck_assert_uint_eq(st.entries, NPAGES);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_killed_writer_grants_reclaimed_on_open)
{
	struct mkv_pool *pool;
	struct mkv_buf buf;
	pid_t pid;
	int fd;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 4, &pool));
	mkv_pool_close(&pool);
	/* the dead writer held half the arena */
	pid = spawn_holder(&fd, NPAGES / 2);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(tu_wait(pid), 128 + SIGKILL);
	close(fd);

	/* the whole arena in one run must be possible again */
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	TU_OK(mkv_alloc(pool, (size_t)TU_DATA_SIZE, &buf));
	tu_fill(buf.data, (size_t)TU_DATA_SIZE, "all", 3);
	TU_OK(mkv_publish(pool, "all", 3, &buf));
	ck_assert_int_eq(tu_check(pool, "all", 3, (size_t)TU_DATA_SIZE), 0);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_killed_reader_pin_released)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	int p[2];
	pid_t pid;
	char c;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 4, &pool));
	TU_OK(tu_put(pool, "held", 4, 4 * TU_PAGE_SIZE));
	ck_assert_int_eq(pipe(p), 0);
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct mkv_pool *rp;
		struct mkv_view v;

		close(p[0]);
		if (tu_pool_open(tu_dir, MKV_RDONLY, &rp) < 0)
			_exit(50);
		if (mkv_get(rp, "held", 4, &v) < 0)
			_exit(51);
		if (write(p[1], "v", 1) != 1)
			_exit(52);
		for (;;)
			pause();
	}
	close(p[1]);
	ck_assert_int_eq((int)read(p[0], &c, 1), 1);
	TU_OK(mkv_del(pool, "held", 4));
	TU_OK(tu_put(pool, "w", 1, 1));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 4);

	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert_int_eq(tu_wait(pid), 128 + SIGKILL);
	close(p[0]);

	/* the dead reader's pin no longer holds the pages once space is needed */
	TU_OK(mkv_del(pool, "w", 1));
	{
		struct mkv_buf buf;

		TU_OK(mkv_alloc(pool, (size_t)TU_DATA_SIZE, &buf));
		TU_OK(mkv_abort(pool, &buf));
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 0);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_close_returns_grants_and_pins)
{
	struct mkv_pool *a, *b;
	struct mkv_buf buf;
	struct mkv_view v;
	struct mkv_stat st;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 4, &a));
	TU_OK(tu_pool_open(tu_dir, 0, &b));
	TU_OK(tu_put(b, "viewed", 6, 5 * TU_PAGE_SIZE));
	TU_OK(mkv_alloc(a, 7 * TU_PAGE_SIZE, &buf));
	TU_OK(mkv_get(a, "viewed", 6, &v));
	TU_OK(mkv_del(b, "viewed", 6));
	TU_OK(tu_put(b, "w1", 2, 1));
	tu_stat(b, &st);
	ck_assert_uint_ge(st.pages_granted, 7);
	ck_assert_uint_eq(st.pages_quarantined, 5);

	/* closing with a buffer and a view outstanding gives both back */
	mkv_pool_close(&a);
	TU_OK(tu_put(b, "w2", 2, 1));
	/* and so does b's close: a fresh handle sees no grant at all */
	mkv_pool_close(&b);
	TU_OK(tu_pool_open(tu_dir, 0, &b));
	tu_stat(b, &st);
	ck_assert_uint_eq(st.pages_granted, 0);
	ck_assert_uint_eq(st.pages_quarantined, 0);
	ck_assert_uint_eq(st.pages_used, 2);
	ck_assert_uint_eq(st.pages_free, st.pages_total - 2);
	ck_assert_uint_eq(st.clients, 1);
	mkv_pool_close(&b);
}
END_TEST

static Suite *
client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc;

	tc = tcase_create("slots");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_third_handle_is_users);
	tcase_add_test(tc, test_slots_reused_after_many_opens);
	tcase_add_test(tc, test_close_returns_grants_and_pins);
	tcase_add_test(tc, test_killed_client_slot_is_reused);
	tcase_add_test(tc, test_killed_clients_slots_all_reused);
	suite_add_tcase(s, tc);

	tc = tcase_create("liveness");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_killed_writer_grants_reclaimed);
	tcase_add_test(tc, test_killed_writer_grants_reclaimed_on_open);
	tcase_add_test(tc, test_killed_reader_pin_released);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(client_suite());
}
