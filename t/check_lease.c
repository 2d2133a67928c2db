/* SPDX-License-Identifier: MIT */
/*
 * check_lease.c -- the single-writer lease across processes: who takes it,
 * forwarding and group commit through the holder, takeover after SIGKILL
 * on the same and on another node, fencing of a SIGSTOPped holder, unique
 * generations under contention.
 *
 * Every process opens the pool itself (a real fork, no handle shared);
 * nodes are simulated with node names ("a", "b") on one machine.  Children
 * report through exit statuses, a shared anonymous mapping of records and
 * a shared failure text (tu_fail), and log lease events through the
 * library's log callback into a file (tu_log_install).  Values carry the
 * key's pattern (tu_fill) and are checked byte for byte.  Every trial
 * derives from a printed seed.
 *
 * The SIGKILL tests print one summary line each.  Their trials are
 * numbered; the seed is a base plus the number, so a failing trial runs
 * again alone with MKV_TEST_LEASE_FIRST=<trial> MKV_TEST_LEASE_TRIALS=1
 * (more trials: a larger MKV_TEST_LEASE_TRIALS).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

/* Lease period of every pool made here. */
#define LT_PERIOD 200U

/* Create the pool at @p path and close it again (the creator releases the lease). */
static void
lt_create(const char *path, uint64_t data_size, uint32_t max_clients)
{
	struct tu_opts o = { .data_size = data_size, .max_clients = max_clients,
			.lease_ms = LT_PERIOD, .node = "a" };
	struct mkv_pool *pool;

	TU_OK(tu_open(path, MKV_CREATE, &o, &pool));
	mkv_pool_close(&pool);
}

/* Open the existing pool at @p path on @p node (NULL: $MARUKV_NODE, else the host name). */
static int
lt_open(const char *path, unsigned flags, const char *node, struct mkv_pool **pool)
{
	struct tu_opts o = { .node = node };

	return tu_open(path, flags, &o, pool);
}

/*
 * A publish that failed around a takeover: its code and message, kept
 * once per test in shared memory (the first one) for the failure report.
 */
struct lt_note {
	int claimed;
	int code;
	char text[256];
};

static void
lt_note_failure(struct lt_note *n, int code, const char *text)
{
	if (__atomic_exchange_n(&n->claimed, 1, __ATOMIC_SEQ_CST) != 0)
		return;
	n->code = code;
	snprintf(n->text, sizeof(n->text), "pid %d: %.230s", (int)getpid(), text);
}

/*
 * A failed publish the contract allows: a message, and not EXISTS (every
 * key here has one writer) nor INVAL (the arguments are good: a buffer
 * from mkv_alloc() on the same handle, a fresh ticket).
 */
static int
lt_clean_failure(int code)
{
	return code < 0 && code != MKV_E_EXISTS && code != MKV_E_INVAL;
}

/* ---- records in shared memory ---- */

/* A key a process published (or failed to): who made it, its index, the code. */
struct lt_rec {
	uint8_t valid;  /* stored last: a killed process may leave a slot unfilled */
	uint8_t who;
	uint16_t pad;
	uint32_t idx;
	int32_t code;
};

static void
lt_rec_add(int *n, struct lt_rec *arr, int max, unsigned who, unsigned idx, int code)
{
	int i = __atomic_fetch_add(n, 1, __ATOMIC_SEQ_CST);

	if (i >= max)
		return;
	arr[i].who = (uint8_t)who;
	arr[i].idx = idx;
	arr[i].code = code;
	__atomic_store_n(&arr[i].valid, 1, __ATOMIC_RELEASE);
}

static int
lt_rec_count(const int *n, int max)
{
	int v = __atomic_load_n(n, __ATOMIC_ACQUIRE);

	return v < max ? v : max;
}

/* Index of an acquisition whose generation appeared before, or -1. */
static long
lt_dup_generation(const struct tu_taken *t, size_t n)
{
	size_t i, j;

	for (i = 1; i < n; i++)
		for (j = 0; j < i; j++)
			if (t[i].gen == t[j].gen)
				return (long)i;
	return -1;
}

/* ===================================================================== */
/* 1. the first writer holds the lease; a second one forwards            */

#define S_DATA (4ULL << 20)

struct single_sh {
	int done;
	uint32_t holder_pid_seen;
	uint64_t gen_seen;
	char node_seen[MKV_NODE_NAME_MAX + 1];
};

static int
single_child(const char *path, const char *logpath, struct single_sh *sh)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	char key[64];
	size_t klen;
	unsigned i;
	int rc, nomsg = 0;

	if (tu_log_install(logpath) < 0)
		return tu_fail(10, "log open failed");
	rc = lt_open(path, 0, "nodeA", &pool);
	if (rc < 0)
		return tu_fail(11, "open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	if ((rc = mkv_pool_stat(pool, &st)) < 0)
		return tu_fail(12, "stat: %s", mkv_strerror(rc));
	sh->holder_pid_seen = st.lease_holder_pid;
	sh->gen_seen = st.lease_generation;
	memcpy(sh->node_seen, st.lease_holder_node, sizeof(sh->node_seen));
	for (i = 0; i < 20; i++) {
		klen = tu_key(key, "child", i);
		rc = tu_write(pool, key, klen, tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE),
				(enum tu_way)(i % 3), &nomsg);
		if (rc != 0)
			return tu_fail(13, "publish %s: %s: %s", key, mkv_strerror(rc),
					mkv_errormsg());
		if ((rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE))) != 0)
			return tu_fail(14, "check %s after publish: %d", key, rc);
	}
	if ((rc = mkv_pool_stat(pool, &st)) < 0)
		return tu_fail(15, "stat: %s", mkv_strerror(rc));
	if (st.lease_holder_pid != (uint32_t)getppid())
		return tu_fail(16, "after forwarding, holder pid %u, expected the parent %d",
				st.lease_holder_pid, (int)getppid());
	mkv_pool_close(&pool);
	return 0;
}

START_TEST(test_single_writer_takes_lease)
{
	struct single_sh *sh = tu_shared(sizeof(*sh));
	struct tu_opts o = { .data_size = S_DATA, .max_clients = TU_MAX_CLIENTS,
			.lease_ms = LT_PERIOD, .node = "nodeA" };
	char *logpath = tu_log_path(tu_dir);
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	struct tu_taken *tk;
	char key[64];
	size_t klen, n, bad;
	uint64_t gen;
	unsigned i;
	pid_t pid;
	int rc;

	tu_why_init();
	ck_assert_int_eq(tu_log_install(logpath), 0);
	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	tu_stat(pool, &st);
	ck_assert_msg(st.lease_holder_pid == (uint32_t)getpid(),
			"creator is not the holder: holder pid %u, mine %d",
			st.lease_holder_pid, (int)getpid());
	ck_assert_uint_ge(st.lease_generation, 1);
	ck_assert_str_eq(st.lease_holder_node, "nodeA");
	ck_assert_uint_eq(st.lease_period_ms, LT_PERIOD);
	ck_assert_uint_eq(st.requests_pending, 0);
	/* the take itself stamps the beat's wall time, before any renewal */
	ck_assert_msg(st.lease_heartbeat_age_ms >= 0 &&
			st.lease_heartbeat_age_ms < (int64_t)LT_PERIOD,
			"heartbeat age %lld ms just after the lease was taken (period %u)",
			(long long)st.lease_heartbeat_age_ms, LT_PERIOD);
	gen = st.lease_generation;

	/* the background thread keeps the heartbeat fresh while we sleep */
	tu_sleep_ms(3 * LT_PERIOD);
	tu_stat(pool, &st);
	ck_assert_msg(st.lease_heartbeat_age_ms >= 0 &&
			st.lease_heartbeat_age_ms < (int64_t)LT_PERIOD,
			"heartbeat age %lld ms with an idle holder (period %u)",
			(long long)st.lease_heartbeat_age_ms, LT_PERIOD);
	ck_assert_uint_eq(st.lease_generation, gen);

	/* a second writer: its publishes go through us while we sleep in waitpid */
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(single_child(tu_path, logpath, sh));
	rc = tu_reap(pid, 20);
	ck_assert_msg(rc == 0, "child exited with %d: %s; %s", rc, tu_why(),
			tu_lease_text(tu_path));
	ck_assert_msg(sh->holder_pid_seen == (uint32_t)getpid(),
			"child saw holder pid %u, expected %d", sh->holder_pid_seen, (int)getpid());
	ck_assert_uint_eq(sh->gen_seen, gen);
	ck_assert_str_eq(sh->node_seen, "nodeA");

	for (i = 0; i < 20; i++) {
		klen = tu_key(key, "child", i);
		ck_assert_int_eq(mkv_exists(pool, key, klen), 1);
		ck_assert_int_eq(tu_check(pool, key, klen, tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE)), 0);
	}
	ck_assert_msg(tu_drain_pending(pool, 2.0) == 0, "requests_pending stays above 0");
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)getpid());
	ck_assert_uint_eq(st.lease_generation, gen);
	ck_assert_uint_eq(st.entries, 20);
	ck_assert_uint_eq(st.pages_granted, 0);  /* the child's grants came back */
	tu_verify_clean(pool, 0, &rep, "single");
	ck_assert_uint_eq(rep.entries, 20);
	ck_assert_uint_eq(rep.pages_used, st.pages_used);
	mkv_pool_close(&pool);
	tu_log_uninstall();

	/* exactly one acquisition, ours, logged in the agreed format */
	n = tu_log_taken(logpath, &tk, &bad);
	ck_assert_msg(bad == 0, "%zu \"lease taken\" lines do not parse", bad);
	ck_assert_msg(n == 1, "%zu acquisitions logged, expected 1", n);
	ck_assert_str_eq(tk[0].node, "nodeA");
	ck_assert_int_eq(tk[0].pid, (long)getpid());
	ck_assert_uint_eq(tk[0].gen, gen);
	free(tk);
	free(logpath);
	tu_why_free();
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

/* ===================================================================== */
/* 2. four forwarding writers, an idle holder: group commit              */

#define G_WRITERS 4
#define G_KEYS 200
#define G_DATA (16ULL << 20)
#define G_MAXLEN (3 * TU_PAGE_SIZE + 100)

struct group_sh {
	int ready;
	uint32_t holder_seen[G_WRITERS];
};

static int
group_writer(const char *path, struct group_sh *sh, int w)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	char key[64], prefix[16];
	size_t klen, len;
	unsigned i;
	int rc, nomsg = 0;

	rc = lt_open(path, 0, "a", &pool);
	if (rc < 0)
		return tu_fail(20, "open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	snprintf(prefix, sizeof(prefix), "g%d-", w);
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_SEQ_CST);
	if (!tu_await(&sh->ready, G_WRITERS, TU_CHILD_DEADLINE))
		return tu_fail(21, "the other writers never came");
	for (i = 0; i < G_KEYS; i++) {
		klen = tu_key(key, prefix, i);
		len = tu_vlen(key, klen, 1, G_MAXLEN);
		rc = tu_write(pool, key, klen, len, (enum tu_way)((i + (unsigned)w) % 3), &nomsg);
		if (rc != 0)
			return tu_fail(22, "publish %s: %s: %s", key, mkv_strerror(rc), mkv_errormsg());
		if ((rc = tu_check(pool, key, klen, len)) != 0)
			return tu_fail(23, "check %s: %d", key, rc);
	}
	if ((rc = mkv_pool_stat(pool, &st)) < 0)
		return tu_fail(24, "stat: %s", mkv_strerror(rc));
	sh->holder_seen[w] = st.lease_holder_pid;
	mkv_pool_close(&pool);
	return 0;
}

START_TEST(test_forwarded_publishes_group_commit)
{
	struct group_sh *sh = tu_shared(sizeof(*sh));
	struct tu_opts o = { .data_size = G_DATA, .max_clients = 16, .lease_ms = LT_PERIOD,
			.node = "a" };
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	char key[64], prefix[16];
	size_t klen, len;
	uint64_t gen, bytes = 0, pages = 0;
	pid_t pids[G_WRITERS];
	unsigned i;
	int w, rc;

	tu_why_init();
	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)getpid());
	gen = st.lease_generation;
	for (w = 0; w < G_WRITERS; w++) {
		pids[w] = tu_fork();
		ck_assert_int_ge(pids[w], 0);
		if (pids[w] == 0)
			_exit(group_writer(tu_path, sh, w));
	}
	for (w = 0; w < G_WRITERS; w++) {
		rc = tu_reap(pids[w], 60);
		ck_assert_msg(rc == 0, "writer %d exited with %d: %s; %s", w, rc, tu_why(),
				tu_lease_text(tu_path));
		ck_assert_msg(sh->holder_seen[w] == (uint32_t)getpid(),
				"writer %d saw holder %u, not the parent %d", w,
				sh->holder_seen[w], (int)getpid());
	}
	for (w = 0; w < G_WRITERS; w++) {
		snprintf(prefix, sizeof(prefix), "g%d-", w);
		for (i = 0; i < G_KEYS; i++) {
			klen = tu_key(key, prefix, i);
			len = tu_vlen(key, klen, 1, G_MAXLEN);
			rc = tu_check(pool, key, klen, len);
			ck_assert_msg(rc == 0, "key %s: %d", key, rc);
			bytes += len;
			pages += (len + TU_PAGE_SIZE - 1) / TU_PAGE_SIZE;
		}
	}
	ck_assert_msg(tu_drain_pending(pool, 2.0) == 0, "requests_pending stays above 0");
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)getpid());
	ck_assert_uint_eq(st.lease_generation, gen);
	ck_assert_uint_eq(st.entries, G_WRITERS * G_KEYS);
	ck_assert_uint_eq(st.bytes_stored, bytes);
	ck_assert_uint_eq(st.pages_used, pages);
	ck_assert_uint_eq(st.pages_granted, 0);
	tu_verify_clean(pool, 0, &rep, "group commit");
	ck_assert_uint_eq(rep.entries, G_WRITERS * G_KEYS);
	ck_assert_uint_eq(rep.pages_used, pages);
	mkv_pool_close(&pool);
	tu_why_free();
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

/* ===================================================================== */
/* 3. SIGKILL of the holder loses no acknowledged publish                */

#define K_TRIALS 50
#define K_CHURN_TRIALS 30
#define K_DATA (8ULL << 20)
#define K_MAXLEN (2 * TU_PAGE_SIZE - 64)
#define K_HKEYS 60         /* the holder's own keys, then it idles */
#define K_WMIN 10          /* a writer publishes at least this many */
#define K_WPOST 3          /* ... and this many successfully after the kill */
#define K_WMAX 400
#define K_MAXREC 4096
/* page reuse: a small arena, and each process deletes its key i - K_WINDOW */
#define K_CHURN_DATA (1ULL << 20)
#define K_WINDOW 6

struct kill_sh {
	struct lt_note note;
	int churn;
	int h_ready;
	int go;
	int killed;
	uint64_t h_gen;
	int nomsg;
	int n_acked;
	int n_failed;
	struct lt_rec acked[K_MAXREC];
	struct lt_rec failed[K_MAXREC];
	/* 1: mkv_del failed, 2: returned 0, 3: NOTFOUND, 4: under way (killed) */
	uint8_t dels[4][K_WMAX];
	int32_t delrc[4][K_WMAX];
};

/* who 0: the holder; who w > 0: writer w */
static size_t
kill_key(char *out, unsigned who, unsigned idx)
{
	int n = snprintf(out, 64, "k%u-%05u", who, idx);

	return n < 0 ? 0 : (size_t)n;
}

/* In churn mode, delete our key i - K_WINDOW if we published it. */
static void
kill_churn(struct mkv_pool *pool, struct kill_sh *sh, unsigned who, unsigned i,
		const uint8_t *mine, int *nomsg)
{
	char key[64], msg[256];
	size_t klen;
	int rc;

	if (!sh->churn || i < K_WINDOW || !mine[i - K_WINDOW])
		return;
	klen = kill_key(key, who, i - K_WINDOW);
	__atomic_store_n(&sh->dels[who][i - K_WINDOW], 4, __ATOMIC_SEQ_CST);
	rc = mkv_del(pool, key, klen);
	if (rc != 0) {
		if (mkv_errormsg()[0] == '\0')
			(*nomsg)++;
		snprintf(msg, sizeof(msg), "del %s: %s", key, mkv_errormsg());
		lt_note_failure(&sh->note, rc, msg);
	}
	/* NOTFOUND is no clean failure: the key was acknowledged */
	sh->delrc[who][i - K_WINDOW] = rc;
	__atomic_store_n(&sh->dels[who][i - K_WINDOW],
			rc == 0 ? 2 : rc == MKV_E_NOTFOUND ? 3 : 1, __ATOMIC_SEQ_CST);
}

static int
kill_holder(const char *path, const char *logpath, struct kill_sh *sh, uint64_t seed)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	uint64_t rng = seed ^ 0x401d;
	double end = tu_now() + TU_CHILD_DEADLINE;
	uint8_t mine[K_WMAX] = { 0 };
	char key[64];
	size_t klen;
	unsigned i;
	int rc, nomsg = 0;

	if (tu_log_install(logpath) < 0)
		return tu_fail(30, "log open failed");
	rc = lt_open(path, 0, "a", &pool);
	if (rc < 0)
		return tu_fail(31, "holder open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	if ((rc = mkv_pool_stat(pool, &st)) < 0)
		return tu_fail(32, "holder stat: %s", mkv_strerror(rc));
	if (st.lease_holder_pid != (uint32_t)getpid())
		return tu_fail(33, "first writer is not the holder (holder pid %u)",
				st.lease_holder_pid);
	sh->h_gen = st.lease_generation;
	__atomic_store_n(&sh->h_ready, 1, __ATOMIC_SEQ_CST);
	if (!tu_await(&sh->go, 1, TU_CHILD_DEADLINE))
		return tu_fail(34, "no go");
	for (i = 0; i < K_HKEYS; i++) {
		klen = kill_key(key, 0, i);
		rc = tu_write(pool, key, klen, tu_vlen(key, klen, 1, K_MAXLEN), (enum tu_way)(i % 3),
				&nomsg);
		if (rc == 0) {
			lt_rec_add(&sh->n_acked, sh->acked, K_MAXREC, 0, i, 0);
			mine[i] = 1;
		} else {
			lt_note_failure(&sh->note, rc, tu_write_msg);
			lt_rec_add(&sh->n_failed, sh->failed, K_MAXREC, 0, i, rc);
		}
		kill_churn(pool, sh, 0, i, mine, &nomsg);
		tu_sleep_ms((double)tu_rand_range(&rng, 0, 3));
	}
	if (nomsg)
		__atomic_add_fetch(&sh->nomsg, nomsg, __ATOMIC_SEQ_CST);
	/* hold the lease, idle, until killed */
	while (tu_now() < end)
		tu_sleep_ms(10);
	return tu_fail(35, "holder was never killed");
}

static int
kill_writer(const char *path, const char *logpath, struct kill_sh *sh, unsigned w,
		const char *node, uint64_t seed)
{
	struct mkv_pool *pool;
	uint64_t rng = seed ^ (0x3117ULL * w);
	double end = tu_now() + TU_CHILD_DEADLINE;
	uint8_t mine[K_WMAX] = { 0 };
	char key[64];
	size_t klen;
	unsigned i, post = 0;
	int rc, killed, nomsg = 0;

	if (tu_log_install(logpath) < 0)
		return tu_fail(40, "log open failed");
	rc = lt_open(path, 0, node, &pool);
	if (rc < 0)
		return tu_fail(41, "writer %u open: %s: %s", w, mkv_strerror(rc), mkv_errormsg());
	if (!tu_await(&sh->go, 1, TU_CHILD_DEADLINE))
		return tu_fail(42, "no go");
	for (i = 0; i < K_WMIN || post < K_WPOST; i++) {
		if (i >= K_WMAX)
			return tu_fail(43, "writer %u (node %s): only %u publishes succeeded "
					"after the kill, in %u tries", w, node, post, i);
		if (tu_now() > end)
			return tu_fail(44, "writer %u (node %s): out of time after %u keys, "
					"%u after the kill", w, node, i, post);
		killed = __atomic_load_n(&sh->killed, __ATOMIC_ACQUIRE);
		klen = kill_key(key, w, i);
		rc = tu_write(pool, key, klen, tu_vlen(key, klen, 1, K_MAXLEN),
				(enum tu_way)tu_rand_range(&rng, 0, 2), &nomsg);
		if (rc == 0) {
			lt_rec_add(&sh->n_acked, sh->acked, K_MAXREC, w, i, 0);
			mine[i] = 1;
			if (killed)
				post++;
		} else {
			lt_note_failure(&sh->note, rc, tu_write_msg);
			lt_rec_add(&sh->n_failed, sh->failed, K_MAXREC, w, i, rc);
		}
		kill_churn(pool, sh, w, i, mine, &nomsg);
		tu_sleep_ms((double)tu_rand_range(&rng, 0, 3));
	}
	if (nomsg)
		__atomic_add_fetch(&sh->nomsg, nomsg, __ATOMIC_SEQ_CST);
	mkv_pool_close(&pool);
	return 0;
}

/*
 * Trials of: a holder H and 2-3 writers publish, H is SIGKILLed at a
 * seeded moment, the writers go on through the takeover; then every
 * acknowledged key (not deleted since) must be there whole, and the
 * pool must verify.  @p churn: small arena, deletes, pages reused.
 */
static void
kill_trials(int churn, uint64_t seed_base, unsigned def_trials, const char *label)
{
	struct kill_sh *sh = tu_shared(sizeof(*sh));
	unsigned long long checked = 0, failed = 0, kills = 0;
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	struct tu_taken *tk;
	char dir[512], path[600], key[64], ctx[128];
	const char *nodes[3];
	char *logpath;
	size_t klen, ntk, bad;
	pid_t h, wp[3];
	int trial, nw, w, i, n, rc;
	uint64_t seed, rng;
	unsigned delay, first, ntrials;
	long dup;

	first = tu_env("MKV_TEST_LEASE_FIRST", 0);
	ntrials = tu_env("MKV_TEST_LEASE_TRIALS", def_trials);
	for (trial = (int)first; trial < (int)(first + ntrials); trial++) {
		seed = seed_base + (uint64_t)trial;
		rng = seed;
		nw = (int)tu_rand_range(&rng, 2, 3);
		for (w = 0; w < nw; w++)
			nodes[w] = tu_rand_range(&rng, 0, 2) == 0 ? "b" : "a";
		delay = (unsigned)tu_rand_range(&rng, 0, 120);
		snprintf(ctx, sizeof(ctx), "trial %d seed %#llx (%d writers, nodes %s %s %s, kill at %u ms)",
				trial, (unsigned long long)seed, nw, nodes[0], nodes[1],
				nw > 2 ? nodes[2] : "-", delay);

		memset(sh, 0, sizeof(*sh));
		sh->churn = churn;
		tu_why_init();
		snprintf(dir, sizeof(dir), "%s/t%03d", tu_dir, trial);
		snprintf(path, sizeof(path), "%s/pool", dir);
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		logpath = tu_log_path(dir);
		lt_create(path, churn ? K_CHURN_DATA : K_DATA, TU_MAX_CLIENTS);

		h = tu_fork();
		ck_assert_int_ge(h, 0);
		if (h == 0)
			_exit(kill_holder(path, logpath, sh, seed));
		if (!tu_await(&sh->h_ready, 1, 10)) {
			tu_kill(h);
			ck_abort_msg("%s: holder not ready: %s", ctx, tu_why());
		}
		for (w = 0; w < nw; w++) {
			wp[w] = tu_fork();
			ck_assert_int_ge(wp[w], 0);
			if (wp[w] == 0)
				_exit(kill_writer(path, logpath, sh, (unsigned)w + 1, nodes[w], seed));
		}
		__atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
		tu_sleep_ms(delay);
		rc = waitpid(h, NULL, WNOHANG);
		ck_assert_msg(rc == 0, "%s: holder ended before the kill: %s", ctx, tu_why());
		tu_kill(h);
		kills++;
		__atomic_store_n(&sh->killed, 1, __ATOMIC_SEQ_CST);
		for (w = 0; w < nw; w++) {
			rc = tu_reap(wp[w], 30);
			ck_assert_msg(rc == 0, "%s: writer %d exited with %d: %s; %s", ctx, w + 1,
					rc, tu_why(), tu_lease_text(path));
		}
		ck_assert_msg(sh->nomsg == 0, "%s: %d failed calls left no error message",
				ctx, sh->nomsg);

		/* a read-only look: nobody takes the lease for it */
		rc = lt_open(path, MKV_RDONLY, "a", &pool);
		ck_assert_msg(rc == 0, "%s: open: %s: %s", ctx, mkv_strerror(rc), mkv_errormsg());
		tu_stat(pool, &st);
		ck_assert_msg(st.lease_generation > sh->h_gen,
				"%s: generation %llu, the killed holder had %llu", ctx,
				(unsigned long long)st.lease_generation, (unsigned long long)sh->h_gen);
		ck_assert_msg(st.lease_holder_pid != (uint32_t)h,
				"%s: the killed holder %d is still named holder", ctx, (int)h);
		n = lt_rec_count(&sh->n_acked, K_MAXREC);
		for (i = 0; i < n; i++) {
			uint8_t del;

			if (!sh->acked[i].valid)
				continue;
			klen = kill_key(key, sh->acked[i].who, sh->acked[i].idx);
			del = sh->dels[sh->acked[i].who][sh->acked[i].idx];
			ck_assert_msg(del != 3, "%s: mkv_del of acknowledged key %s: NOTFOUND",
					ctx, key);
			rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, K_MAXLEN));
			if (del == 2)
				ck_assert_msg(rc == MKV_E_NOTFOUND, "%s: deleted key %s: %d", ctx,
						key, rc);
			else
				ck_assert_msg(rc == 0 || ((del == 1 || del == 4) &&
						rc == MKV_E_NOTFOUND),
						"%s: acknowledged key %s: %d (%s)", ctx, key, rc,
						rc < 0 ? mkv_strerror(rc) : "bad bytes");
			checked++;
		}
		for (i = 0; i < 4 * K_WMAX; i++)
			ck_assert_msg(sh->dels[i / K_WMAX][i % K_WMAX] != 1 ||
					lt_clean_failure(sh->delrc[i / K_WMAX][i % K_WMAX]),
					"%s: a delete failed with %s (first failure: %s)", ctx,
					mkv_strerror(sh->delrc[i / K_WMAX][i % K_WMAX]),
					sh->note.text);
		n = lt_rec_count(&sh->n_failed, K_MAXREC);
		for (i = 0; i < n; i++) {
			if (!sh->failed[i].valid)
				continue;
			klen = kill_key(key, sh->failed[i].who, sh->failed[i].idx);
			ck_assert_msg(lt_clean_failure(sh->failed[i].code),
					"%s: publish of %s failed with %s (first failure: %s)", ctx,
					key, mkv_strerror(sh->failed[i].code), sh->note.text);
			/* either committed whole or not at all */
			rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, K_MAXLEN));
			ck_assert_msg(rc == 0 || rc == MKV_E_NOTFOUND,
					"%s: failed publish %s (%s) left key state %d", ctx, key,
					mkv_strerror(sh->failed[i].code), rc);
			failed++;
		}
		tu_verify_clean(pool, 0, &rep, ctx);
		mkv_pool_close(&pool);

		ntk = tu_log_taken(logpath, &tk, &bad);
		ck_assert_msg(bad == 0, "%s: %zu \"lease taken\" lines do not parse", ctx, bad);
		ck_assert_msg(tu_taken_by(tk, ntk, (long)h) != NULL,
				"%s: no acquisition by the holder %d in the log", ctx, (int)h);
		ck_assert_msg(ntk >= 2, "%s: %zu acquisitions logged, no takeover", ctx, ntk);
		dup = lt_dup_generation(tk, ntk);
		ck_assert_msg(dup < 0, "%s: generation %llu taken twice (pid %ld)", ctx,
				dup < 0 ? 0ULL : tk[dup].gen, dup < 0 ? 0L : tk[dup].pid);
		free(tk);
		free(logpath);
		ck_assert_int_eq(tu_rmtree(dir), 0);
	}
	printf("lease kill trials%s: %u, kills: %llu, acked keys checked: %llu, "
			"failed publishes: %llu\n", label, ntrials, kills, checked, failed);
	fflush(stdout);
	tu_why_free();
	tu_shared_free(sh, sizeof(*sh));
}

START_TEST(test_kill9_holder_loses_no_acked_publish)
{
	kill_trials(0, 0x1ea5e000ULL, K_TRIALS, "");
}
END_TEST

/* The same where freed pages are soon granted again (1 MiB, deletes):
 * a page whose grant a takeover lost must not be written into later. */
START_TEST(test_kill9_holder_with_page_reuse)
{
	kill_trials(1, 0x2ea5e000ULL, K_CHURN_TRIALS, " (page reuse)");
}
END_TEST

/* ===================================================================== */
/* 4. a SIGSTOPped holder, replaced, must not commit after SIGCONT        */

#define P_DATA (16ULL << 20)
#define P_MAXLEN TU_PAGE_SIZE
#define P_MAXREC 4096
#define P_HPOST 20       /* publishes the old holder tries after SIGCONT */
#define P_WPOST 10       /* the new holder's publishes after the old one ended */

struct stop_sh {
	struct lt_note note;
	int h_ready;
	int continued;
	int h_exited;
	int w_took;
	uint64_t h_gen;
	uint64_t w_gen;
	uint32_t w_holder_seen;
	char w_node_seen[MKV_NODE_NAME_MAX + 1];
	uint32_t h_holder_seen_after;  /* holder pid as H saw it after SIGCONT */
	int h_post_ok;
	int h_post_failed;
	int w_acked;
	int nomsg;
	int n_acked;
	int n_failed;
	struct lt_rec acked[P_MAXREC];
	struct lt_rec failed[P_MAXREC];
};

static size_t
stop_key(char *out, unsigned who, unsigned idx)
{
	int n = snprintf(out, 64, "%c%05u", who == 0 ? 'h' : 'w', idx);

	return n < 0 ? 0 : (size_t)n;
}

static int
stop_holder(const char *path, const char *logpath, struct stop_sh *sh)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	double end = tu_now() + TU_CHILD_DEADLINE;
	char key[64];
	size_t klen;
	unsigned i, post = 0;
	int rc, cont, nomsg = 0;

	if (tu_log_install(logpath) < 0)
		return tu_fail(50, "log open failed");
	rc = lt_open(path, 0, "a", &pool);
	if (rc < 0)
		return tu_fail(51, "H open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	if ((rc = mkv_pool_stat(pool, &st)) < 0)
		return tu_fail(52, "H stat: %s", mkv_strerror(rc));
	if (st.lease_holder_pid != (uint32_t)getpid())
		return tu_fail(53, "H is not the holder (holder pid %u)", st.lease_holder_pid);
	sh->h_gen = st.lease_generation;
	__atomic_store_n(&sh->h_ready, 1, __ATOMIC_SEQ_CST);
	for (i = 0; post < P_HPOST; i++) {
		if (i >= P_MAXREC / 2 || tu_now() > end)
			return tu_fail(54, "H: %u keys, %u after SIGCONT, out of time or keys", i, post);
		cont = __atomic_load_n(&sh->continued, __ATOMIC_ACQUIRE);
		if (cont && post == 0) {
			if ((rc = mkv_pool_stat(pool, &st)) < 0)
				return tu_fail(55, "H stat after SIGCONT: %s", mkv_strerror(rc));
			sh->h_holder_seen_after = st.lease_holder_pid;
		}
		klen = stop_key(key, 0, i);
		rc = tu_write(pool, key, klen, tu_vlen(key, klen, 1, P_MAXLEN), (enum tu_way)(i % 3),
				&nomsg);
		if (rc == 0) {
			lt_rec_add(&sh->n_acked, sh->acked, P_MAXREC, 0, i, 0);
		} else {
			lt_note_failure(&sh->note, rc, tu_write_msg);
			lt_rec_add(&sh->n_failed, sh->failed, P_MAXREC, 0, i, rc);
		}
		if (cont) {
			post++;
			if (rc == 0)
				sh->h_post_ok++;
			else
				sh->h_post_failed++;
		}
		tu_sleep_ms(2);
	}
	if (nomsg)
		__atomic_add_fetch(&sh->nomsg, nomsg, __ATOMIC_SEQ_CST);
	mkv_pool_close(&pool);
	return 0;
}

static int
stop_writer(const char *path, const char *logpath, struct stop_sh *sh, const char *node)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	double end = tu_now() + TU_CHILD_DEADLINE;
	char key[64];
	size_t klen;
	unsigned i, post = 0;
	int rc, exited, nomsg = 0;

	if (tu_log_install(logpath) < 0)
		return tu_fail(60, "log open failed");
	rc = lt_open(path, 0, node, &pool);
	if (rc < 0)
		return tu_fail(61, "W open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	for (i = 0; post < P_WPOST; i++) {
		if (i >= P_MAXREC / 2 || tu_now() > end)
			return tu_fail(62, "W (node %s): %u keys, took over %d, out of time or keys",
					node, i, sh->w_took);
		exited = __atomic_load_n(&sh->h_exited, __ATOMIC_ACQUIRE);
		klen = stop_key(key, 1, i);
		rc = tu_write(pool, key, klen, tu_vlen(key, klen, 1, P_MAXLEN), (enum tu_way)(i % 3),
				&nomsg);
		if (rc != 0)
			return tu_fail(63, "W (node %s) publish %s: %s: %s", node, key,
					mkv_strerror(rc), mkv_errormsg());
		lt_rec_add(&sh->n_acked, sh->acked, P_MAXREC, 1, i, 0);
		__atomic_add_fetch(&sh->w_acked, 1, __ATOMIC_SEQ_CST);
		if (i == 0) {
			/* the first publish could only commit after the takeover */
			if ((rc = mkv_pool_stat(pool, &st)) < 0)
				return tu_fail(64, "W stat: %s", mkv_strerror(rc));
			sh->w_gen = st.lease_generation;
			sh->w_holder_seen = st.lease_holder_pid;
			memcpy(sh->w_node_seen, st.lease_holder_node, sizeof(sh->w_node_seen));
			__atomic_store_n(&sh->w_took, 1, __ATOMIC_SEQ_CST);
		}
		if (exited)
			post++;
		tu_sleep_ms(5);
	}
	mkv_pool_close(&pool);
	return 0;
}

static void
stop_trial(const char *wnode)
{
	struct stop_sh *sh = tu_shared(sizeof(*sh));
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	struct tu_taken *tk;
	const struct tu_taken *th, *tw;
	char *logpath = tu_log_path(tu_dir);
	const char *snap;
	char key[64], ctx[64];
	size_t klen, ntk, bad;
	double t_stop;
	pid_t h, w;
	int i, n, rc;
	long dup;

	tu_why_init();
	snprintf(ctx, sizeof(ctx), "H on node a, W on node %s", wnode);
	lt_create(tu_path, P_DATA, TU_MAX_CLIENTS);
	h = tu_fork();
	ck_assert_int_ge(h, 0);
	if (h == 0)
		_exit(stop_holder(tu_path, logpath, sh));
	if (!tu_await(&sh->h_ready, 1, 10) || !tu_await(&sh->n_acked, 5, 10)) {
		tu_kill(h);
		ck_abort_msg("%s: H did not start publishing: %s", ctx, tu_why());
	}

	ck_assert_msg(tu_stop(h, 10) == 0, "%s: H did not stop", ctx);
	t_stop = tu_now();

	w = tu_fork();
	ck_assert_int_ge(w, 0);
	if (w == 0)
		_exit(stop_writer(tu_path, logpath, sh, wnode));
	if (!tu_await(&sh->w_took, 1, 15)) {
		snap = tu_lease_text(tu_path);
		tu_kill(w);
		tu_kill(h);
		ck_abort_msg("%s: W never got a publish through while H was stopped (%s); %s",
				ctx, tu_why(), snap);
	}
	/* W holds the lease now, and keeps publishing */
	if (!tu_await(&sh->w_acked, 10, 10)) {
		snap = tu_lease_text(tu_path);
		tu_kill(w);
		tu_kill(h);
		ck_abort_msg("%s: W stalled after its first publish (%s); %s", ctx, tu_why(),
				snap);
	}
	while (tu_now() - t_stop < 2.5 * LT_PERIOD / 1000.0)
		tu_sleep_ms(10);
	tu_sleep_ms(LT_PERIOD);

	__atomic_store_n(&sh->continued, 1, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(kill(h, SIGCONT), 0);
	rc = tu_reap(h, 20);
	__atomic_store_n(&sh->h_exited, 1, __ATOMIC_SEQ_CST);
	if (rc != 0) {
		snap = tu_lease_text(tu_path);
		tu_kill(w);
		ck_abort_msg("%s: H exited with %d after SIGCONT: %s; %s", ctx, rc,
				tu_why(), snap);
	}
	rc = tu_reap(w, 20);
	ck_assert_msg(rc == 0, "%s: W exited with %d: %s; %s", ctx, rc, tu_why(),
			tu_lease_text(tu_path));

	ck_assert_msg(sh->w_holder_seen == (uint32_t)w,
			"%s: after its first publish W saw holder pid %u, itself is %d", ctx,
			sh->w_holder_seen, (int)w);
	ck_assert_str_eq(sh->w_node_seen, wnode);
	ck_assert_msg(sh->w_gen > sh->h_gen, "%s: W's generation %llu, H's %llu", ctx,
			(unsigned long long)sh->w_gen, (unsigned long long)sh->h_gen);
	ck_assert_msg(sh->h_holder_seen_after == (uint32_t)w,
			"%s: after SIGCONT H saw holder pid %u, W is %d", ctx,
			sh->h_holder_seen_after, (int)w);
	ck_assert_int_eq(sh->h_post_ok + sh->h_post_failed, P_HPOST);
	ck_assert_msg(sh->nomsg == 0, "%s: %d failed calls left no error message", ctx, sh->nomsg);

	rc = lt_open(tu_path, MKV_RDONLY, "a", &pool);
	ck_assert_msg(rc == 0, "%s: open: %s: %s", ctx, mkv_strerror(rc), mkv_errormsg());
	n = lt_rec_count(&sh->n_acked, P_MAXREC);
	for (i = 0; i < n; i++) {
		ck_assert(sh->acked[i].valid);
		klen = stop_key(key, sh->acked[i].who, sh->acked[i].idx);
		rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, P_MAXLEN));
		ck_assert_msg(rc == 0, "%s: acknowledged key %s: %d (%s)", ctx, key, rc,
				rc < 0 ? mkv_strerror(rc) : "bad bytes");
	}
	n = lt_rec_count(&sh->n_failed, P_MAXREC);
	for (i = 0; i < n; i++) {
		ck_assert(sh->failed[i].valid);
		klen = stop_key(key, sh->failed[i].who, sh->failed[i].idx);
		ck_assert_msg(lt_clean_failure(sh->failed[i].code),
				"%s: publish of %s failed with %s (first failure: %s)", ctx, key,
				mkv_strerror(sh->failed[i].code), sh->note.text);
		rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, P_MAXLEN));
		ck_assert_msg(rc == 0 || rc == MKV_E_NOTFOUND,
				"%s: failed publish %s (%s) left key state %d", ctx, key,
				mkv_strerror(sh->failed[i].code), rc);
	}
	tu_verify_clean(pool, 0, &rep, ctx);
	tu_stat(pool, &st);
	ck_assert_uint_ge(st.lease_generation, sh->w_gen);
	mkv_pool_close(&pool);

	ntk = tu_log_taken(logpath, &tk, &bad);
	ck_assert_msg(bad == 0, "%s: %zu \"lease taken\" lines do not parse", ctx, bad);
	th = tu_taken_by(tk, ntk, (long)h);
	tw = tu_taken_by(tk, ntk, (long)w);
	ck_assert_msg(th != NULL && tw != NULL, "%s: acquisitions of H %s, of W %s", ctx,
			th ? "logged" : "missing", tw ? "logged" : "missing");
	ck_assert_msg(th->gen < tw->gen, "%s: H's generation %llu, W's %llu", ctx, th->gen,
			tw->gen);
	ck_assert_str_eq(tw->node, wnode);
	dup = lt_dup_generation(tk, ntk);
	ck_assert_msg(dup < 0, "%s: generation %llu taken twice (pid %ld)", ctx,
			dup < 0 ? 0ULL : tk[dup].gen, dup < 0 ? 0L : tk[dup].pid);
	free(tk);
	free(logpath);
	tu_why_free();
	tu_shared_free(sh, sizeof(*sh));
}

START_TEST(test_sigstop_holder_past_expiry_cannot_commit)
{
	stop_trial("b");
}
END_TEST

/* The same with the new holder on the stopped holder's own node: the pid
 * is alive, so only the heartbeat can tell it is gone. */
START_TEST(test_sigstop_holder_same_node)
{
	stop_trial("a");
}
END_TEST

/* ===================================================================== */
/* 5. two nodes contend: every generation is taken once                  */

#define C_SECONDS 6.0
#define C_LIVE 4
#define C_DATA (16ULL << 20)
#define C_MAXLEN (2 * TU_PAGE_SIZE)
#define C_MAXREC 8192
#define C_MAXCHILD 2000

struct contend_sh {
	struct lt_note note;
	int nomsg;
	int n_acked;
	int n_failed;
	struct lt_rec acked[C_MAXREC];
	struct lt_rec failed[C_MAXREC];
};

static size_t
contend_key(char *out, unsigned child, unsigned idx)
{
	int n = snprintf(out, 64, "c%05u-%u", child, idx);

	return n < 0 ? 0 : (size_t)n;
}

static int
contender(const char *path, const char *logpath, struct contend_sh *sh, unsigned c,
		uint64_t seed)
{
	struct mkv_pool *pool;
	uint64_t rng = seed;
	const char *node = tu_rand_range(&rng, 0, 1) ? "b" : "a";
	unsigned i, nkeys = (unsigned)tu_rand_range(&rng, 1, 4);
	char key[64];
	size_t klen;
	int rc, nomsg = 0;

	/* the node comes from the environment here */
	setenv("MARUKV_NODE", node, 1);
	if (tu_log_install(logpath) < 0)
		return tu_fail(70, "log open failed");
	rc = lt_open(path, 0, NULL, &pool);
	if (rc < 0)
		return tu_fail(71, "child %u (node %s, seed %#llx) open: %s: %s", c, node,
				(unsigned long long)seed, mkv_strerror(rc), mkv_errormsg());
	for (i = 0; i < nkeys; i++) {
		klen = contend_key(key, c, i);
		rc = tu_write(pool, key, klen, tu_vlen(key, klen, 1, C_MAXLEN),
				(enum tu_way)tu_rand_range(&rng, 0, 2), &nomsg);
		if (rc == 0) {
			lt_rec_add(&sh->n_acked, sh->acked, C_MAXREC, 0, c * 8 + i, 0);
		} else {
			lt_note_failure(&sh->note, rc, tu_write_msg);
			lt_rec_add(&sh->n_failed, sh->failed, C_MAXREC, 0, c * 8 + i, rc);
		}
		tu_sleep_ms((double)tu_rand_range(&rng, 0, 10));
	}
	if (nomsg)
		__atomic_add_fetch(&sh->nomsg, nomsg, __ATOMIC_SEQ_CST);
	mkv_pool_close(&pool);
	return 0;
}

START_TEST(test_two_nodes_contend_unique_generations)
{
	struct contend_sh *sh = tu_shared(sizeof(*sh));
	char *logpath = tu_log_path(tu_dir);
	struct {
		pid_t pid;
		unsigned c;
		double kill_at;  /* 0: let it finish */
	} live[C_LIVE];
	unsigned long long maxgen = 0;
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	struct tu_taken *tk;
	uint64_t rng = 0xc0417e57ULL, seed;
	unsigned nchild = 0, nkilled = 0;
	char key[64];
	size_t klen, ntk, bad, k;
	double start, t;
	int i, n, rc, nlive = 0;
	long dup;

	tu_why_init();
	lt_create(tu_path, C_DATA, 64);
	start = tu_now();
	for (;;) {
		t = tu_now();
		/* keep C_LIVE children running for C_SECONDS */
		while (nlive < C_LIVE && t - start < C_SECONDS && nchild < C_MAXCHILD) {
			seed = tu_rand(&rng);
			live[nlive].c = nchild;
			live[nlive].kill_at = tu_rand_range(&rng, 0, 3) == 0 ?
				t + (double)tu_rand_range(&rng, 0, 80) / 1000.0 : 0;
			live[nlive].pid = tu_fork();
			ck_assert_int_ge(live[nlive].pid, 0);
			if (live[nlive].pid == 0)
				_exit(contender(tu_path, logpath, sh, nchild, seed));
			nchild++;
			nlive++;
		}
		if (nlive == 0)
			break;
		for (i = 0; i < nlive; i++) {
			int status;
			pid_t r;

			if (live[i].kill_at > 0 && tu_now() >= live[i].kill_at) {
				tu_kill(live[i].pid);
				nkilled++;
			} else {
				r = waitpid(live[i].pid, &status, WNOHANG);
				if (r == 0) {
					ck_assert_msg(tu_now() - start < C_SECONDS + 30,
							"child %u (pid %d) hangs; %s", live[i].c,
							(int)live[i].pid, tu_lease_text(tu_path));
					continue;
				}
				ck_assert_msg(r == live[i].pid && WIFEXITED(status) &&
						WEXITSTATUS(status) == 0,
						"child %u exited with status %#x: %s", live[i].c,
						status, tu_why());
			}
			live[i--] = live[--nlive];
		}
		tu_sleep_ms(2);
	}
	ck_assert_msg(sh->nomsg == 0, "%d failed calls left no error message", sh->nomsg);

	ntk = tu_log_taken(logpath, &tk, &bad);
	ck_assert_msg(bad == 0, "%zu \"lease taken\" lines do not parse", bad);
	dup = lt_dup_generation(tk, ntk);
	ck_assert_msg(dup < 0, "generation %llu taken twice (second time by pid %ld, node %s, "
			"line %ld of %zu)", dup < 0 ? 0ULL : tk[dup].gen, dup < 0 ? 0L : tk[dup].pid,
			dup < 0 ? "" : tk[dup].node, dup, ntk);
	ck_assert_msg(ntk >= 20, "only %zu acquisitions in %u processes (%u killed)", ntk,
			nchild, nkilled);
	for (k = 0; k < ntk; k++) {
		ck_assert_msg(strcmp(tk[k].node, "a") == 0 || strcmp(tk[k].node, "b") == 0,
				"acquisition by node \"%s\"", tk[k].node);
		if (tk[k].gen > maxgen)
			maxgen = tk[k].gen;
	}

	rc = lt_open(tu_path, MKV_RDONLY, "a", &pool);
	ck_assert_msg(rc == 0, "open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	tu_stat(pool, &st);
	ck_assert_uint_ge(st.lease_generation, maxgen);
	n = lt_rec_count(&sh->n_acked, C_MAXREC);
	for (i = 0; i < n; i++) {
		if (!sh->acked[i].valid)
			continue;
		klen = contend_key(key, sh->acked[i].idx / 8, sh->acked[i].idx % 8);
		rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, C_MAXLEN));
		ck_assert_msg(rc == 0, "acknowledged key %s: %d", key, rc);
	}
	n = lt_rec_count(&sh->n_failed, C_MAXREC);
	for (i = 0; i < n; i++) {
		if (!sh->failed[i].valid)
			continue;
		klen = contend_key(key, sh->failed[i].idx / 8, sh->failed[i].idx % 8);
		ck_assert_msg(lt_clean_failure(sh->failed[i].code),
				"publish of %s failed with %s (first failure: %s)", key,
				mkv_strerror(sh->failed[i].code), sh->note.text);
		rc = tu_check(pool, key, klen, tu_vlen(key, klen, 1, C_MAXLEN));
		ck_assert_msg(rc == 0 || rc == MKV_E_NOTFOUND,
				"failed publish %s (%s) left key state %d", key,
				mkv_strerror(sh->failed[i].code), rc);
	}
	tu_verify_clean(pool, 0, &rep, "contention");
	mkv_pool_close(&pool);
	free(tk);
	free(logpath);
	tu_why_free();
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

static Suite *
lease_suite(void)
{
	Suite *s = suite_create("lease");
	TCase *tc;

	tc = tcase_create("holder");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_single_writer_takes_lease);
	tcase_add_test(tc, test_forwarded_publishes_group_commit);
	suite_add_tcase(s, tc);

	tc = tcase_create("takeover");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_kill9_holder_loses_no_acked_publish);
	tcase_add_test(tc, test_kill9_holder_with_page_reuse);
	tcase_add_test(tc, test_sigstop_holder_past_expiry_cannot_commit);
	tcase_add_test(tc, test_sigstop_holder_same_node);
	tcase_add_test(tc, test_two_nodes_contend_unique_generations);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(lease_suite());
}
