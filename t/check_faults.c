/* SPDX-License-Identifier: MIT */
/*
 * check_faults.c -- the pool under faults: a filesystem without room, a
 * reader killed inside its registry transaction, and injected failures of
 * malloc, calloc, realloc, mmap and the LMDB calls.
 *
 * Fault injection: t/faultinject.so (an LD_PRELOAD interposer, see
 * t/faultinject.c) makes the k-th call of one function fail, once or from
 * then on.  This program runs itself again under it (argv[1] ==
 * "--fault-child") to open a pool, publish, read, delete and close; every
 * call must either succeed or fail with a negative code and a message, the
 * run must neither crash nor hang (alarm), and afterwards, without the
 * interposer, the pool must open and mkv_pool_verify(MKV_VERIFY_DEEP) must
 * find no problem (leaked pages are allowed).  Under a sanitizer (which
 * interposes malloc itself) that case is skipped.
 *
 * Environment: MKV_TEST_FAULT_MAXK (default 24) bounds the k tried per
 * function and mode (all of 1..calls when there are no more); the
 * interposer is MKV_FAULTINJECT or t/.libs/faultinject.so (from the build
 * tree's top, where make check runs).  Allocations made by libpmem2 itself
 * are not failed (FI_SPARE=libpmem2): pmem2_map_new() aborts the process
 * when one fails, which marukv cannot prevent; MKV_TEST_FAULT_SPARE=""
 * fails them too.  The runs stop after MKV_TEST_FAULT_BUDGET seconds
 * (default 60).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include "testutil.h"

/*
 * Open the pool at @p path on @p node; with MKV_CREATE, 4 KiB pages,
 * @p data_size, 16 clients, lease period 200 ms and client timeout
 * @p timeout_ms.
 */
static int
ft_open(const char *path, unsigned flags, const char *node, uint64_t data_size,
		uint32_t timeout_ms, struct mkv_pool **pool)
{
	struct tu_opts o = { .data_size = data_size, .lease_ms = 200,
			.client_timeout_ms = timeout_ms, .node = node };

	return tu_open(path, flags, &o, pool);
}

/* ===================================================================== */
/* 1. A pool larger than the filesystem's free space                      */

/* The names in @p dir, space-separated, into @p out; how many. */
static int
ft_list(const char *dir, char *out, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t used = 0;
	int n = 0;

	out[0] = '\0';
	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n++;
		if (used + strlen(e->d_name) + 2 < size)
			used += (size_t)snprintf(out + used, size - used, "%s%s", used ? " " : "",
					e->d_name);
	}
	closedir(d);
	return n;
}

START_TEST(test_create_larger_than_free_space_is_nospc)
{
	struct statvfs before, after;
	struct mkv_opts *opts = NULL;
	struct mkv_pool *pool = (struct mkv_pool *)1;
	uint64_t avail, total, size;
	char *path, names[1024], msg[512];
	struct stat sb;
	int rc, n;

	ck_assert_int_eq(statvfs(tu_dir, &before), 0);
	avail = (uint64_t)before.f_bavail * before.f_frsize;
	total = (uint64_t)before.f_blocks * before.f_frsize;
	/* twice the free space, and more than the whole filesystem: a tmpfs
	 * must refuse it at once, not fill up first */
	size = 2 * avail;
	if (size <= total)
		size = total + (64ULL << 20);
	if (size > (1ULL << 46))
		size = 1ULL << 46;
	size &= ~((uint64_t)MKV_DEFAULT_PAGE_SIZE - 1);
	if (size <= avail) {
		printf("create larger than free space: %llu bytes free, more than the largest "
				"pool: not tested\n", (unsigned long long)avail);
		return;
	}
	path = tu_pool_path(tu_dir);
	ck_assert_ptr_nonnull(path);
	TU_OK(mkv_opts_new(&opts));
	TU_OK(mkv_opts_set_data_size(opts, size));
	rc = mkv_pool_open(path, MKV_CREATE, opts, &pool);
	snprintf(msg, sizeof(msg), "%s", mkv_errormsg());
	ck_assert_msg(rc == MKV_E_NOSPC, "create of %llu bytes with %llu free = %d (%s): %s",
			(unsigned long long)size, (unsigned long long)avail, rc, mkv_strerror(rc),
			msg);
	ck_assert_msg(msg[0] != '\0', "NOSPC without a message");
	ck_assert_msg(pool == NULL, "failed open left *out %p", (void *)pool);
	/* the pool directory may stay, its files must not */
	if (stat(path, &sb) == 0) {
		ck_assert_msg(S_ISDIR(sb.st_mode), "%s is left and is no directory", path);
		n = ft_list(path, names, sizeof(names));
		ck_assert_msg(n == 0, "failed create left %d files in %s: %s (message: %s)", n,
				path, names, msg);
	}
	n = ft_list(tu_dir, names, sizeof(names));
	ck_assert_msg(n <= 1, "failed create left %s in %s", names, tu_dir);
	/* and gave back what it had allocated */
	ck_assert_int_eq(statvfs(tu_dir, &after), 0);
	ck_assert_msg((uint64_t)after.f_bavail * after.f_frsize + (16ULL << 20) >= avail,
			"free space %llu before the failed create, %llu after",
			(unsigned long long)avail,
			(unsigned long long)after.f_bavail * after.f_frsize);
	/* a pool that fits is made there afterwards */
	TU_OK(ft_open(tu_path, MKV_CREATE, "a", TU_DATA_SIZE, 500, &pool));
	TU_OK(tu_put(pool, "k", 1, 100));
	ck_assert_int_eq(tu_check(pool, "k", 1, 100), 0);
	mkv_pool_close(&pool);
	mkv_opts_delete(&opts);
	free(path);
	printf("create of %llu bytes (%llu free): %s\n", (unsigned long long)size,
			(unsigned long long)avail, msg);
	fflush(stdout);
}
END_TEST

/* ===================================================================== */
/* 2. Killed readers do not make the registry grow                        */

#define RG_BASE 64        /* keys the readers read */
#define RG_PER_ROUND 32   /* keys put and deleted per round */
#define RG_ROUNDS 150
#define RG_LOOPERS 3

struct rg_sh {
	int ready[1 + RG_LOOPERS];
	int views;
	int loops[1 + RG_LOOPERS];
};

/* Holds 16 views (and a reset read transaction) until killed. */
static int
rg_holder(const char *path, struct rg_sh *sh)
{
	struct mkv_view v[16];
	struct mkv_pool *pool;
	char key[64];
	size_t klen;
	unsigned i;
	int rc;

	if ((rc = ft_open(path, MKV_RDONLY, "b", 0, 0, &pool)) < 0)
		return 10;
	for (i = 0; i < 16; i++) {
		klen = tu_key(key, "base-", i);
		memset(&v[i], 0, sizeof(v[i]));
		if (mkv_get(pool, key, klen, &v[i]) != 0)
			return 11;
		if (tu_verify(v[i].data, v[i].len, key, klen) != -1)
			return 12;
		__atomic_add_fetch(&sh->views, 1, __ATOMIC_SEQ_CST);
	}
	__atomic_store_n(&sh->ready[0], 1, __ATOMIC_SEQ_CST);
	for (;;)
		pause();
}

/* Reads in a tight loop, in and out of read transactions, until killed. */
static int
rg_looper(const char *path, struct rg_sh *sh, unsigned me, const char *node)
{
	struct mkv_key keys[RG_BASE];
	struct mkv_view v[RG_BASE];
	char kb[RG_BASE][64];
	struct mkv_pool *pool;
	size_t hits, found, i;
	unsigned n = 0;

	if (ft_open(path, MKV_RDONLY, node, 0, 0, &pool) < 0)
		return 20;
	for (i = 0; i < RG_BASE; i++) {
		keys[i].data = kb[i];
		keys[i].len = tu_key(kb[i], "base-", (unsigned)i);
	}
	__atomic_store_n(&sh->ready[me], 1, __ATOMIC_SEQ_CST);
	for (;;) {
		if (mkv_prefix_len(pool, keys, RG_BASE, &hits) != 0 || hits != RG_BASE)
			return 21;
		if (mkv_get_batch(pool, keys, 16, 0, v, &found) != 0 || found != 16)
			return 22;
		for (i = 0; i < 16; i++)
			(void)mkv_release(pool, &v[i]);
		if (mkv_get(pool, keys[n % RG_BASE].data, keys[n % RG_BASE].len, &v[0]) == 0)
			(void)mkv_release(pool, &v[0]);
		__atomic_store_n(&sh->loops[me], (int)++n, __ATOMIC_SEQ_CST);
	}
}

/* The client table, for a failure's evidence. */
static void
rg_show_clients(struct mkv_pool *pool)
{
	struct mkv_client cl[16];
	size_t n = 0, i;

	if (mkv_pool_clients(pool, cl, 16, &n) < 0)
		return;
	for (i = 0; i < n && i < 16; i++)
		printf("client slot %u pid %u node %s alive %u rdonly %u holder %u pin %llu "
				"beat age %lld ms\n", cl[i].slot, cl[i].pid, cl[i].node, cl[i].alive,
				cl[i].rdonly, cl[i].holder, (unsigned long long)cl[i].pin,
				(long long)cl[i].heartbeat_age_ms);
	fflush(stdout);
}

START_TEST(test_killed_reader_in_read_txn_does_not_grow_registry)
{
	struct rg_sh *sh = tu_shared(sizeof(*sh));
	struct mkv_pool *pool;
	struct mkv_stat st;
	struct mkv_reclaim rr;
	uint64_t rng = 0x5eadbeefULL, first = 0, maxu = 0;
	pid_t pids[1 + RG_LOOPERS];
	char key[64];
	size_t klen;
	unsigned i, r, round, nospc_waits = 0;
	int rc;
	double end;

	TU_OK(ft_open(tu_path, MKV_CREATE, "a", TU_DATA_SIZE, 300, &pool));
	for (i = 0; i < RG_BASE; i++) {
		klen = tu_key(key, "base-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	mkv_pool_close(&pool);

	pids[0] = tu_fork();
	ck_assert_int_ge(pids[0], 0);
	if (pids[0] == 0)
		_exit(rg_holder(tu_path, sh));
	for (r = 1; r <= RG_LOOPERS; r++) {
		pids[r] = tu_fork();
		ck_assert_int_ge(pids[r], 0);
		if (pids[r] == 0)
			_exit(rg_looper(tu_path, sh, r, r == RG_LOOPERS ? "b" : "a"));
	}
	end = tu_now() + 10;
	for (r = 0; r <= RG_LOOPERS; r++)
		while (!__atomic_load_n(&sh->ready[r], __ATOMIC_SEQ_CST)) {
			ck_assert_msg(tu_now() < end && waitpid(pids[r], NULL, WNOHANG) == 0,
					"reader %u did not start", r);
			tu_sleep_ms(1);
		}
	/* kill the loopers at seeded moments, mid-loop */
	for (r = 1; r <= RG_LOOPERS; r++) {
		end = tu_now() + 10;
		while (__atomic_load_n(&sh->loops[r], __ATOMIC_SEQ_CST) < 1) {
			ck_assert_msg(tu_now() < end, "reader %u does not loop", r);
			tu_sleep_ms(1);
		}
		tu_sleep_ms((double)tu_rand_range(&rng, 5, 40));
		kill(pids[r], SIGKILL);
		ck_assert_int_eq(tu_wait(pids[r]), 128 + SIGKILL);
	}
	kill(pids[0], SIGKILL);
	ck_assert_int_eq(tu_wait(pids[0]), 128 + SIGKILL);

	/* a writer (the lease holder) puts and deletes, round after round */
	TU_OK(ft_open(tu_path, 0, "a", 0, 0, &pool));
	for (round = 1; round <= RG_ROUNDS; round++) {
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "r%u-", round);
		for (i = 0; i < RG_PER_ROUND; i++) {
			klen = tu_key(key, prefix, i);
			rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
			/* quarantine is released as pins go: the dead of node b are
			 * dead after the client timeout (300 ms) of watching */
			for (end = tu_now() + 2; rc == MKV_E_NOSPC && tu_now() < end; ) {
				tu_sleep_ms(20);
				rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
				nospc_waits++;
			}
			tu_stat(pool, &st);
			if (rc != 0)
				rg_show_clients(pool);
			ck_assert_msg(rc == 0, "round %u: put %s = %d (%s): %s; registry used %llu "
					"of %llu (round 1: %llu), pages free %llu quarantined %llu, "
					"clients %u", round, key, rc, mkv_strerror(rc), mkv_errormsg(),
					(unsigned long long)st.registry_used,
					(unsigned long long)st.registry_size, (unsigned long long)first,
					(unsigned long long)st.pages_free,
					(unsigned long long)st.pages_quarantined, st.clients);
		}
		for (i = 0; i < RG_PER_ROUND; i++) {
			klen = tu_key(key, prefix, i);
			TU_OK(mkv_del(pool, key, klen));
		}
		tu_stat(pool, &st);
		if (round == 1)
			first = st.registry_used;
		if (st.registry_used > maxu)
			maxu = st.registry_used;
		ck_assert_msg(st.registry_used < 4 * first,
				"round %u: registry used %llu bytes, %llu after round 1 (size %llu, "
				"clients %u, pages quarantined %llu)", round,
				(unsigned long long)st.registry_used, (unsigned long long)first,
				(unsigned long long)st.registry_size, st.clients,
				(unsigned long long)st.pages_quarantined);
	}
	for (i = 0; i < RG_BASE; i++) {
		klen = tu_key(key, "base-", i);
		ck_assert_int_eq(tu_check(pool, key, klen, TU_PAGE_SIZE), 0);
	}
	tu_verify_clean(pool, MKV_VERIFY_DEEP, NULL, "after the rounds");
	/* the holder reclaims the dead on its own, once a lease period: wait for it */
	for (i = 0; i < 60; i++) {
		tu_stat(pool, &st);
		if (st.clients == 1)
			break;
		usleep(50 * 1000);
	}
	ck_assert_msg(st.clients == 1, "%u clients left, the killed readers' slots not freed",
			st.clients);
	/* and nothing of the dead is left for an explicit reclaim */
	memset(&rr, 0xa5, sizeof(rr));
	TU_OK(mkv_pool_reclaim(pool, MKV_DRY_RUN, &rr));
	printf("registry used after round 1: %llu bytes, at most %llu, last %llu over %u rounds "
			"(size %llu); %u readers killed holding %d views; %u waits for space; "
			"dry-run reclaim after: clients %u readers %u pins %llu pages %llu\n",
			(unsigned long long)first, (unsigned long long)maxu,
			(unsigned long long)st.registry_used, RG_ROUNDS,
			(unsigned long long)st.registry_size, 1 + RG_LOOPERS, sh->views, nospc_waits,
			rr.clients,
			rr.readers, (unsigned long long)rr.pins, (unsigned long long)rr.pages);
	fflush(stdout);
	mkv_pool_close(&pool);
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

/* ===================================================================== */
/* 3. Injected faults                                                     */

/*
 * The re-executed child, under LD_PRELOAD: a pool's life with every call
 * checked.  Exit 0 if every call kept the contract; else a code and one
 * line on stdout saying what broke.  The last line on stdout is
 * "calls=N failed=M errors=E" (the interposer's counts, clean failures).
 * No allocation of its own after fi_arm() (static buffers, write(2)).
 */
static char fc_line[600];

static void
fc_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
fc_say(const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(fc_line, sizeof(fc_line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(fc_line) - 2)
		n = (int)sizeof(fc_line) - 2;
	fc_line[n++] = '\n';
	(void)!write(1, fc_line, (size_t)n);
}

static int fc_errors;
static const char *volatile fc_stage = "start";

/* A hang: say where, then die of the alarm as before. */
static void
fc_on_alarm(int sig)
{
	static const char pre[] = "hung in ";
	const char *st = fc_stage;

	(void)!write(1, pre, sizeof(pre) - 1);
	(void)!write(1, st, strlen(st));
	(void)!write(1, "\n", 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* A call's result: 0 ok; a clean failure counts; else exit with @p code. */
static int
fc_check(const char *what, int rc, int code)
{
	if (rc == 0) {
		if (mkv_errormsg()[0] != '\0') {
			fc_say("%s succeeded but left the message \"%s\"", what, mkv_errormsg());
			_exit(code);
		}
		return 0;
	}
	if (rc > 0 || rc < MKV_E_LAST) {
		fc_say("%s returned %d, not a marukv code", what, rc);
		_exit(code);
	}
	/* every argument here is good, and every key new */
	if (rc == MKV_E_INVAL || rc == MKV_E_EXISTS) {
		fc_say("%s failed with %s: %s", what, mkv_strerror(rc), mkv_errormsg());
		_exit(code);
	}
	if (mkv_errormsg()[0] == '\0') {
		fc_say("%s failed with %d (%s) and no message", what, rc, mkv_strerror(rc));
		_exit(code);
	}
	fc_errors++;
	return rc;
}

static int
fault_child(const char *dir, const char *tag)
{
	static unsigned char val[2 * TU_PAGE_SIZE];
	static char path[PATH_MAX], key[6][64], what[128];
	static size_t klen[6], vlen[6];
	static int published[6];
	struct tu_fi fi;
	struct mkv_opts *opts = NULL;
	struct mkv_pool *pool = NULL;
	struct mkv_buf b;
	struct mkv_view v;
	struct mkv_ticket t;
	struct mkv_key keys[6];
	struct mkv_stat st;
	struct mkv_verify rep;
	size_t hits, i;
	int rc;

	signal(SIGALRM, fc_on_alarm);
	alarm(4);
	if (tu_fi_find(&fi) < 0) {
		fc_say("the interposer is not loaded");
		return 90;
	}
	snprintf(path, sizeof(path), "%s/pool", dir);
	for (i = 0; i < 6; i++) {
		klen[i] = tu_key(key[i], tag, (unsigned)i);
		vlen[i] = tu_vlen(key[i], klen[i], 1, sizeof(val));
		keys[i].data = key[i];
		keys[i].len = klen[i];
	}

	fi.arm();
	fc_stage = "mkv_pool_open";
	if ((rc = fc_check("mkv_opts_new", mkv_opts_new(&opts), 2)) == 0 &&
	    (rc = fc_check("mkv_opts_set_node", mkv_opts_set_node(opts, "a"), 2)) == 0)
		rc = fc_check("mkv_pool_open", mkv_pool_open(path, 0, opts, &pool), 3);
	mkv_opts_delete(&opts);
	if (rc < 0)
		goto out;
	fc_stage = "publish";
	for (i = 0; i < 6; i++) {
		snprintf(what, sizeof(what), "publish %.63s (way %zu)", key[i], i % 3);
		if (i % 3 == 0) {
			tu_fill(val, vlen[i], key[i], klen[i]);
			rc = fc_check(what, mkv_put(pool, key[i], klen[i], val, vlen[i]), 4);
		} else {
			memset(&b, 0, sizeof(b));
			rc = fc_check("mkv_alloc", mkv_alloc(pool, vlen[i], &b), 4);
			if (rc < 0)
				continue;
			tu_fill(b.data, vlen[i], key[i], klen[i]);
			if (i % 3 == 1) {
				rc = fc_check(what, mkv_publish(pool, key[i], klen[i], &b), 4);
				if (rc < 0 && rc != MKV_E_EXISTS)
					(void)fc_check("mkv_abort", mkv_abort(pool, &b), 4);
			} else {
				rc = fc_check(what, mkv_publish_async(pool, key[i], klen[i], &b, &t), 4);
				if (rc < 0)
					(void)fc_check("mkv_abort", mkv_abort(pool, &b), 4);
				else
					rc = fc_check(what, mkv_wait(pool, &t), 4);
			}
		}
		published[i] = rc == 0;
	}
	fc_stage = "get/release";
	for (i = 0; i < 6; i++) {
		memset(&v, 0, sizeof(v));
		snprintf(what, sizeof(what), "get %.63s", key[i]);
		rc = mkv_get(pool, key[i], klen[i], &v);
		if (rc == MKV_E_NOTFOUND && published[i]) {
			fc_say("published key %s: NOTFOUND (%s)", key[i], mkv_errormsg());
			_exit(5);
		}
		if (rc == MKV_E_NOTFOUND)
			continue;
		if (fc_check(what, rc, 5) < 0)
			continue;
		if (v.len != vlen[i] || tu_verify(v.data, v.len, key[i], klen[i]) != -1) {
			fc_say("key %s: len %zu (want %zu) or bytes wrong", key[i], v.len, vlen[i]);
			_exit(6);
		}
		(void)fc_check("mkv_release", mkv_release(pool, &v), 5);
	}
	fc_stage = "prefix_len/exists";
	hits = 0;
	(void)fc_check("mkv_prefix_len", mkv_prefix_len(pool, keys, 6, &hits), 5);
	rc = mkv_exists(pool, key[0], klen[0]);
	if (rc < 0)
		(void)fc_check("mkv_exists", rc, 5);
	fc_stage = "del";
	for (i = 0; i < 4; i++) {
		snprintf(what, sizeof(what), "del %.63s", key[i]);
		rc = mkv_del(pool, key[i], klen[i]);
		if (rc == MKV_E_NOTFOUND && published[i]) {
			fc_say("del of published key %s: NOTFOUND (%s)", key[i], mkv_errormsg());
			_exit(7);
		}
		if (rc != MKV_E_NOTFOUND)
			(void)fc_check(what, rc, 7);
	}
	fc_stage = "stat/verify";
	(void)fc_check("mkv_pool_stat", mkv_pool_stat(pool, &st), 8);
	rc = mkv_pool_verify(pool, 0, &rep);
	if (rc == MKV_E_CORRUPT) {
		fc_say("mkv_pool_verify under faults: %llu problems: %s",
				(unsigned long long)rep.problems, rep.first_problem);
		_exit(9);
	}
	(void)fc_check("mkv_pool_verify", rc, 9);
	fc_stage = "mkv_pool_close";
	mkv_pool_close(&pool);
out:
	fc_stage = "end";
	fi.disarm();
	fc_say("calls=%lu failed=%lu errors=%d", fi.calls(), fi.failed(), fc_errors);
	return 0;
}

/*
 * Run the child under the interposer @p so (tu_run_injected()) on the
 * pool in @p dir, its keys named after @p tag.
 */
static int
ft_run(const char *so, const char *dir, const char *tag, const char *func, unsigned long k,
		const char *mode, char *out, size_t size)
{
	char *const argv[] = { "check_faults", "--fault-child", (char *)dir, (char *)tag, NULL };

	return tu_run_injected(so, func, k, mode, argv, out, size);
}

static unsigned long
ft_calls_of(const char *out)
{
	const char *p = strstr(out, "calls=");

	return p ? strtoul(p + 6, NULL, 10) : 0;
}

START_TEST(test_injected_faults_fail_cleanly)
{
	static const char *const funcs[] = {
		"malloc", "calloc", "realloc", "mmap", "mdb_txn_begin", "mdb_put",
		"mdb_txn_commit", "mdb_env_open",
	};
	static const char *const modes[] = { "once", "persistent" };
	unsigned maxk = tu_env("MKV_TEST_FAULT_MAXK", 24);
	double budget = (double)tu_env("MKV_TEST_FAULT_BUDGET", 60);
	int out_of_time = 0;
	unsigned long runs = 0, clean_errors = 0, injected = 0, calls, k, ks[64];
	unsigned f, m, j, nk, bad = 0, hangs = 0;
	const char *so;
	struct mkv_pool *pool;
	char out[4096], dir[PATH_MAX], path[PATH_MAX + 8], tag[32], ctx[160], first_bad[1024] = "";
	double t0 = tu_now();
	int rc;

	if (TU_SANITIZED) {
		printf("fault injection: skipped under a sanitizer (it interposes malloc)\n");
		return;
	}
	so = tu_injector();
	if (so == NULL) {
		printf("fault injection: no t/.libs/faultinject.so (MKV_FAULTINJECT): skipped\n");
		return;
	}
	if (maxk > 64)
		maxk = 64;
	for (f = 0; f < sizeof(funcs) / sizeof(funcs[0]); f++) {
		snprintf(dir, sizeof(dir), "%s/%s", tu_dir, funcs[f]);
		snprintf(path, sizeof(path), "%s/pool", dir);
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		TU_OK(ft_open(path, MKV_CREATE, "a", TU_DATA_SIZE, 500, &pool));
		mkv_pool_close(&pool);
		/* how many calls a clean run makes */
		snprintf(tag, sizeof(tag), "c-");
		rc = ft_run(so, dir, tag, funcs[f], 0, "once", out, sizeof(out));
		ck_assert_msg(rc == 0, "%s: the counting run exited with %d: %s", funcs[f], rc,
				out);
		ck_assert_msg(strstr(out, "errors=0") != NULL,
				"%s: a run without faults had errors: %s", funcs[f], out);
		calls = ft_calls_of(out);
		runs++;
		/* k: all of 1..calls+1, or the first maxk/2 and the rest spread */
		nk = 0;
		if (calls + 1 <= maxk) {
			for (k = 1; k <= calls + 1; k++)
				ks[nk++] = k;
		} else {
			for (k = 1; k <= maxk / 2; k++)
				ks[nk++] = k;
			for (j = 1; nk < maxk; j++)
				ks[nk++] = maxk / 2 + (calls - maxk / 2) * j / (maxk - maxk / 2);
		}
		for (m = 0; m < 2; m++) {
			unsigned fm_bad = 0;

			for (j = 0; j < nk && !out_of_time; j++) {
				if (tu_now() - t0 > budget) {
					out_of_time = 1;
					break;
				}
				k = ks[j];
				snprintf(tag, sizeof(tag), "%c%lu-", modes[m][0], k);
				snprintf(ctx, sizeof(ctx), "FI_FUNC=%s FI_NTH=%lu FI_MODE=%s", funcs[f],
						k, modes[m]);
				rc = ft_run(so, dir, tag, funcs[f], k, modes[m], out, sizeof(out));
				runs++;
				if (rc != 0) {
					bad++;
					fm_bad++;
					hangs += rc == -2 || rc == 128 + SIGALRM;
					if (first_bad[0] == '\0')
						snprintf(first_bad, sizeof(first_bad),
								"%s: exit %d%s; output: %.800s", ctx, rc,
								rc == -2 || rc == 128 + SIGALRM ? " (hang)" : "",
								out);
					printf("fault run %s: exit %d: %s", ctx, rc, out);
					if (out[0] == '\0' || out[strlen(out) - 1] != '\n')
						printf("\n");
					if (fm_bad >= 2)
						break;  /* enough evidence for this one */
				} else {
					const char *e = strstr(out, "errors=");
					const char *fl = strstr(out, "failed=");

					clean_errors += e ? strtoul(e + 7, NULL, 10) : 0;
					injected += fl ? strtoul(fl + 7, NULL, 10) : 0;
				}
				/* without the interposer: opens, verifies clean */
				rc = ft_open(path, MKV_RDONLY, "a", 0, 0, &pool);
				ck_assert_msg(rc == 0, "%s: the pool does not open afterwards: %s: %s",
						ctx, mkv_strerror(rc), mkv_errormsg());
				tu_verify_clean(pool, MKV_VERIFY_DEEP, NULL, ctx);
				mkv_pool_close(&pool);
			}
		}
	}
	printf("fault injection: %lu runs of %zu functions in %.1f s%s, %lu faults injected, "
			"%lu clean errors returned, %u runs broke the contract (%u hangs)\n",
			runs, sizeof(funcs) / sizeof(funcs[0]), tu_now() - t0,
			out_of_time ? " (time budget spent, runs left out)" : "", injected,
			clean_errors, bad, hangs);
	fflush(stdout);
	ck_assert_msg(bad == 0, "%u fault runs broke the contract; the first: %s", bad,
			first_bad);
}
END_TEST

static Suite *
faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc;

	tc = tcase_create("space");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_create_larger_than_free_space_is_nospc);
	suite_add_tcase(s, tc);

	tc = tcase_create("readers");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_killed_reader_in_read_txn_does_not_grow_registry);
	suite_add_tcase(s, tc);

	tc = tcase_create("inject");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_injected_faults_fail_cleanly);
	suite_add_tcase(s, tc);
	return s;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--fault-child") == 0)
		return fault_child(argv[2], argv[3]);
	return tu_run_suite(faults_suite());
}
