/* SPDX-License-Identifier: MIT */
/*
 * check_rdonly.c -- read-only handles: one never takes the lease, not
 * even when the holder dies, and reads on through the holder's death and
 * its successor's takeover.
 *
 * The writers are child processes that open the pool themselves; they
 * report through their exit statuses and a shared failure text
 * (tu_fail), and log their lease acquisitions into a file
 * (tu_log_install) that says who took the lease.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

#define R_PERIOD 200U
#define R_KEYS 50
#define R_MAXLEN (2 * TU_PAGE_SIZE)

/* The pool: 8 MiB, a lease period of R_PERIOD; every handle on node "a". */
static const struct tu_opts rd_opts = { .data_size = 8ULL << 20, .max_clients = TU_MAX_CLIENTS,
		.lease_ms = R_PERIOD, .node = "a" };

struct rdonly_sh {
	int ready;
};

/* Publish keys [from, from + n) of prefix; then idle until killed, or close. */
static int
rdonly_writer(const char *path, const char *logpath, struct rdonly_sh *sh,
		unsigned from, unsigned n, int stay)
{
	struct mkv_pool *pool;
	double end = tu_now() + TU_CHILD_DEADLINE;
	char key[64];
	size_t klen;
	unsigned i;
	int rc, nomsg = 0;

	if (tu_log_install(logpath) < 0)
		return tu_fail(100, "log open failed");
	if ((rc = tu_open(path, 0, &rd_opts, &pool)) < 0)
		return tu_fail(101, "open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	for (i = from; i < from + n; i++) {
		klen = tu_key(key, "r", i);
		rc = tu_write(pool, key, klen, tu_vlen(key, klen, 1, R_MAXLEN), (enum tu_way)(i % 3),
				&nomsg);
		if (rc != 0)
			return tu_fail(102, "publish %s: %s: %s", key, mkv_strerror(rc),
					mkv_errormsg());
	}
	__atomic_store_n(&sh->ready, 1, __ATOMIC_SEQ_CST);
	while (stay && tu_now() < end)
		tu_sleep_ms(10);
	if (stay)
		return tu_fail(103, "never killed");
	mkv_pool_close(&pool);
	return 0;
}

static void
rdonly_read_all(struct mkv_pool *pool, unsigned n)
{
	struct mkv_key kv[R_KEYS * 2];
	char keys[R_KEYS * 2][64];
	size_t hits;
	unsigned i;
	int rc;

	ck_assert(n <= R_KEYS * 2);
	for (i = 0; i < n; i++) {
		kv[i].len = tu_key(keys[i], "r", i);
		kv[i].data = keys[i];
		rc = tu_check(pool, keys[i], kv[i].len, tu_vlen(keys[i], kv[i].len, 1, R_MAXLEN));
		ck_assert_msg(rc == 0, "read %s: %d", keys[i], rc);
	}
	TU_OK(mkv_prefix_len(pool, kv, n, &hits));
	ck_assert_uint_eq(hits, n);
}

START_TEST(test_rdonly_never_takes_lease)
{
	struct rdonly_sh *sh = tu_shared(sizeof(*sh));
	char *logpath = tu_log_path(tu_dir);
	struct mkv_pool *r;
	struct mkv_verify rep;
	struct mkv_stat st;
	struct tu_taken *tk;
	uint64_t hgen;
	size_t ntk, bad, k;
	double end;
	pid_t h, w;
	int rc;

	tu_why_init();
	TU_OK(tu_open(tu_path, MKV_CREATE, &rd_opts, &r));
	mkv_pool_close(&r);
	ck_assert_int_eq(tu_log_install(logpath), 0);
	TU_OK(tu_open(tu_path, MKV_RDONLY, &rd_opts, &r));
	tu_stat(r, &st);
	ck_assert_msg(st.lease_holder_pid == 0, "holder pid %u with only a read-only handle open",
			st.lease_holder_pid);
	ck_assert_str_eq(st.lease_holder_node, "");
	ck_assert_uint_eq(st.lease_period_ms, R_PERIOD);
	TU_ERR(mkv_put(r, "x", 1, "y", 1), MKV_E_RDONLY);
	tu_sleep_ms(2 * R_PERIOD);
	tu_stat(r, &st);
	ck_assert_uint_eq(st.lease_holder_pid, 0);

	/* a writer comes, takes the lease, publishes; we read */
	h = tu_fork();
	ck_assert_int_ge(h, 0);
	if (h == 0)
		_exit(rdonly_writer(tu_path, logpath, sh, 0, R_KEYS, 1));
	if (!tu_await(&sh->ready, 1, 15)) {
		tu_kill(h);
		ck_abort_msg("writer not ready: %s", tu_why());
	}
	tu_stat(r, &st);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)h);
	hgen = st.lease_generation;
	rdonly_read_all(r, R_KEYS);

	/* the holder dies; reads go on, and we do not take over */
	tu_kill(h);
	end = tu_now() + 3.0 * R_PERIOD / 1000.0;
	while (tu_now() < end) {
		rdonly_read_all(r, R_KEYS);
		tu_stat(r, &st);
		ck_assert_uint_ne(st.lease_holder_pid, (uint32_t)getpid());
		ck_assert_uint_eq(st.lease_generation, hgen);
	}
	tu_stat(r, &st);
	if (st.lease_holder_pid == (uint32_t)h)
		ck_assert_msg(st.lease_heartbeat_age_ms >= (int64_t)R_PERIOD,
				"dead holder's heartbeat age %lld ms after 3 periods",
				(long long)st.lease_heartbeat_age_ms);

	/* the next writer takes over; we see its keys */
	sh->ready = 0;
	w = tu_fork();
	ck_assert_int_ge(w, 0);
	if (w == 0)
		_exit(rdonly_writer(tu_path, logpath, sh, R_KEYS, R_KEYS, 0));
	rc = tu_reap(w, 20);
	ck_assert_msg(rc == 0, "second writer exited with %d: %s; %s", rc, tu_why(),
			tu_lease_text(tu_path));
	rdonly_read_all(r, 2 * R_KEYS);
	tu_stat(r, &st);
	ck_assert_uint_gt(st.lease_generation, hgen);
	ck_assert_uint_ne(st.lease_holder_pid, (uint32_t)getpid());
	tu_verify_clean(r, 0, &rep, "rdonly");
	ck_assert_uint_eq(rep.entries, 2 * R_KEYS);
	mkv_pool_close(&r);
	tu_log_uninstall();

	/* no acquisition by this process */
	ntk = tu_log_taken(logpath, &tk, &bad);
	ck_assert_int_eq(bad, 0);
	for (k = 0; k < ntk; k++)
		ck_assert_msg(tk[k].pid != (long)getpid(),
				"the read-only process took the lease (generation %llu)", tk[k].gen);
	ck_assert_msg(tu_taken_by(tk, ntk, (long)h) && tu_taken_by(tk, ntk, (long)w),
			"acquisitions by the writers not logged");
	free(tk);
	free(logpath);
	tu_why_free();
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

static Suite *
rdonly_suite(void)
{
	Suite *s = suite_create("rdonly");
	TCase *tc;

	tc = tcase_create("lease");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_rdonly_never_takes_lease);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(rdonly_suite());
}
