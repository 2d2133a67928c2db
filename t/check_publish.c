/* SPDX-License-Identifier: MIT */
/*
 * check_publish.c -- asynchronous publishes: mkv_publish_async() and
 * mkv_wait() on the lease holder and through the request ring, more
 * tickets in flight than a ring holds, duplicates in flight and
 * committed, tickets waited for twice or on another handle; and where an
 * asynchronous publish goes, which is where every write goes (a free
 * lease is taken).
 *
 * Children report through exit statuses and a shared failure text
 * (tu_fail); values carry the key's pattern (tu_fill).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define A_KEYS 64
#define A_MAXLEN (2 * TU_PAGE_SIZE + 10)

/* Every pool here: 8 MiB, a lease period of 200 ms; every handle on node "a". */
static const struct tu_opts pb_opts = { .data_size = 8ULL << 20, .max_clients = TU_MAX_CLIENTS,
		.lease_ms = 200, .node = "a" };

/* alloc + fill + publish_async of @p key; 0 or a failure (tu_fail). */
static int
async_start(struct mkv_pool *pool, const char *key, size_t klen, struct mkv_ticket *t)
{
	size_t len = tu_vlen(key, klen, 1, A_MAXLEN);
	struct mkv_buf b;
	int rc;

	memset(&b, 0, sizeof(b));
	if ((rc = mkv_alloc(pool, len, &b)) < 0)
		return tu_fail(80, "alloc %zu: %s: %s", len, mkv_strerror(rc), mkv_errormsg());
	tu_fill(b.data, len, key, klen);
	memset(t, 0, sizeof(*t));
	rc = mkv_publish_async(pool, key, klen, &b, t);
	if (rc != 0)
		return tu_fail(81, "publish_async %s: %s: %s", key, mkv_strerror(rc),
				mkv_errormsg());
	if (!tu_is_zero(&b, sizeof(b)))
		return tu_fail(82, "buffer of %s not zeroed by publish_async", key);
	return 0;
}

/*
 * Publish A_KEYS keys "<prefix>NNNNNNNN" asynchronously, plus a duplicate
 * of the first while it is in flight; wait for all (exactly one of the
 * two publishes of key 0 wins, the other gets EXISTS); then a duplicate of
 * a committed key (EXISTS), and second waits (INVAL).  0 or a failure.
 */
static int
async_round(struct mkv_pool *pool, const char *prefix)
{
	struct mkv_ticket t[A_KEYS + 1], d;
	char key[64];
	size_t klen;
	unsigned i;
	int rc, rc0 = 0;

	for (i = 0; i <= A_KEYS; i++) {
		klen = tu_key(key, prefix, i == A_KEYS ? 0 : i);
		if ((rc = async_start(pool, key, klen, &t[i])) != 0)
			return rc;
	}
	for (i = 0; i <= A_KEYS; i++) {
		klen = tu_key(key, prefix, i == A_KEYS ? 0 : i);
		rc = mkv_wait(pool, &t[i]);
		if (i == 0) {
			rc0 = rc;
			if (rc != 0 && rc != MKV_E_EXISTS)
				return tu_fail(83, "wait %s: %s: %s", key, mkv_strerror(rc),
						mkv_errormsg());
		} else if (i == A_KEYS) {
			if (!((rc0 == 0 && rc == MKV_E_EXISTS) || (rc0 == MKV_E_EXISTS && rc == 0)))
				return tu_fail(84, "two publishes of %s in flight: waits gave "
						"%d and %d, expected one 0 and one EXISTS", key, rc0, rc);
		} else if (rc != 0) {
			return tu_fail(85, "wait %s: %s: %s", key, mkv_strerror(rc), mkv_errormsg());
		}
		if ((rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, A_MAXLEN))) != 0)
			return tu_fail(86, "check %s after wait: %d", key, rc);
	}
	/* a duplicate of a committed key: publish_async takes it, wait says EXISTS */
	klen = tu_key(key, prefix, 1);
	if ((rc = async_start(pool, key, klen, &d)) != 0)
		return rc;
	rc = mkv_wait(pool, &d);
	if (rc != MKV_E_EXISTS)
		return tu_fail(87, "wait for a duplicate of %s: %d (%s), expected EXISTS", key,
				rc, mkv_strerror(rc));
	if (mkv_errormsg()[0] == '\0')
		return tu_fail(88, "EXISTS from mkv_wait without a message");
	if ((rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, A_MAXLEN))) != 0)
		return tu_fail(89, "check %s after the duplicate: %d", key, rc);
	/* a ticket is waited for once */
	if ((rc = mkv_wait(pool, &t[5])) != MKV_E_INVAL)
		return tu_fail(90, "second wait on a ticket: %d (%s), expected INVAL", rc,
				mkv_strerror(rc));
	if ((rc = mkv_wait(pool, &d)) != MKV_E_INVAL)
		return tu_fail(91, "second wait on the duplicate's ticket: %d (%s)", rc,
				mkv_strerror(rc));
	return 0;
}

/* A handle's ticket on another handle: INVAL, and the ticket stays good. */
static int
async_other_handle(struct mkv_pool *p1, struct mkv_pool *p2, const char *key)
{
	struct mkv_ticket t, z;
	size_t klen = strlen(key), len = tu_vlen(key, klen, 1, A_MAXLEN);
	int rc;

	if ((rc = async_start(p1, key, klen, &t)) != 0)
		return rc;
	rc = mkv_wait(p2, &t);
	if (rc != MKV_E_INVAL)
		return tu_fail(92, "wait on the wrong handle: %d (%s)", rc, mkv_strerror(rc));
	memset(&z, 0, sizeof(z));
	rc = mkv_wait(p1, &z);
	if (rc != MKV_E_INVAL)
		return tu_fail(93, "wait on a zeroed ticket: %d (%s)", rc, mkv_strerror(rc));
	if ((rc = mkv_wait(p1, &t)) != 0)
		return tu_fail(94, "wait on the right handle after a wrong one: %d (%s): %s",
				rc, mkv_strerror(rc), mkv_errormsg());
	if ((rc = tu_check(p2, key, klen, len)) != 0)
		return tu_fail(95, "check %s: %d", key, rc);
	return 0;
}

static int
async_child(const char *path)
{
	struct mkv_pool *p1, *p2;
	struct mkv_stat st;
	int rc;

	if ((rc = tu_open(path, 0, &pb_opts, &p1)) < 0 ||
	    (rc = tu_open(path, 0, &pb_opts, &p2)) < 0)
		return tu_fail(96, "open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	if ((rc = mkv_pool_stat(p1, &st)) < 0)
		return tu_fail(97, "stat: %s", mkv_strerror(rc));
	if (st.lease_holder_pid != (uint32_t)getppid())
		return tu_fail(98, "holder %u, expected the parent", st.lease_holder_pid);
	/* more tickets in flight than a ring holds, all forwarded */
	if ((rc = async_round(p1, "child")) != 0)
		return rc;
	if ((rc = async_other_handle(p1, p2, "child-other")) != 0)
		return rc;
	mkv_pool_close(&p2);
	mkv_pool_close(&p1);
	return 0;
}

START_TEST(test_async_publish_and_wait)
{
	struct mkv_pool *pool, *p2;
	struct mkv_verify rep;
	struct mkv_stat st;
	struct mkv_ticket z;
	pid_t pid;
	int rc;

	tu_why_init();
	TU_OK(tu_open(tu_path, MKV_CREATE, &pb_opts, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)getpid());

	/* on the holder itself */
	rc = async_round(pool, "par");
	ck_assert_msg(rc == 0, "holder: %s", tu_why());
	memset(&z, 0, sizeof(z));
	TU_ERR(mkv_wait(pool, &z), MKV_E_INVAL);
	TU_OK(tu_open(tu_path, 0, &pb_opts, &p2));
	rc = async_other_handle(pool, p2, "par-other");
	ck_assert_msg(rc == 0, "holder: %s", tu_why());
	mkv_pool_close(&p2);

	/* on a client whose requests go to us */
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(async_child(tu_path));
	rc = tu_reap(pid, 30);
	ck_assert_msg(rc == 0, "client exited with %d: %s; %s", rc, tu_why(),
			tu_lease_text(tu_path));

	ck_assert_msg(tu_drain_pending(pool, 2.0) == 0, "requests_pending stays above 0");
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 2 * A_KEYS + 2);
	tu_verify_clean(pool, 0, &rep, "async");
	ck_assert_uint_eq(rep.entries, 2 * A_KEYS + 2);
	mkv_pool_close(&pool);
	/* our own cached grants went back at close, the refused duplicates' too */
	TU_OK(tu_open(tu_path, MKV_RDONLY, &pb_opts, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_granted, 0);
	mkv_pool_close(&pool);
	tu_why_free();
}
END_TEST

/*
 * An asynchronous publish goes where every write goes: a handle that finds
 * the lease free takes it and commits at once, so the key is there before
 * mkv_wait() is called (it used to wait in the ring for a holder).
 */
START_TEST(test_async_publish_takes_a_free_lease)
{
	struct mkv_pool *p1, *p2;
	struct mkv_stat st;
	struct mkv_ticket t;
	struct mkv_buf b;
	const char *key = "async-free-lease";
	size_t klen = strlen(key), len = tu_vlen(key, klen, 1, A_MAXLEN);

	TU_OK(tu_open(tu_path, MKV_CREATE, &pb_opts, &p1));
	TU_OK(tu_open(tu_path, 0, &pb_opts, &p2));
	/* the buffer while p1 holds the lease, so that only the publish writes */
	TU_OK(mkv_alloc(p2, len, &b));
	tu_fill(b.data, len, key, klen);
	/* the holder closes and gives the lease up: nobody holds it */
	mkv_pool_close(&p1);
	tu_stat(p2, &st);
	ck_assert_uint_eq(st.lease_holder_pid, 0);

	memset(&t, 0, sizeof(t));
	TU_OK(mkv_publish_async(p2, key, klen, &b, &t));
	ck_assert_int_eq(mkv_exists(p2, key, klen), 1);
	tu_stat(p2, &st);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)getpid());
	TU_OK(mkv_wait(p2, &t));
	ck_assert_int_eq(tu_check(p2, key, klen, len), 0);
	mkv_pool_close(&p2);
}
END_TEST

static Suite *
publish_suite(void)
{
	Suite *s = suite_create("publish");
	TCase *tc;

	tc = tcase_create("async");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_async_publish_and_wait);
	tcase_add_test(tc, test_async_publish_takes_a_free_lease);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(publish_suite());
}
