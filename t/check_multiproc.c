/* SPDX-License-Identifier: MIT */
/*
 * check_multiproc.c -- several processes on one pool: writers and readers
 * on a chain of keys, writers racing to publish the same keys, and a
 * holder and clients that burn no CPU once idle.
 * Each process opens the pool itself; results come back through exit
 * statuses and a shared anonymous mapping of counters.
 */
#include <errno.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define NKEYS 200
#define NWRITERS 2
#define NREADERS 3
#define NRACERS 4
#define NRACE_KEYS 100
#define MP_DATA_SIZE (8ULL << 20)
#define MAXLEN (3 * TU_PAGE_SIZE + 1000)

struct shared {
	int writers_done;
	int ready;
	unsigned long reads[NREADERS];
	unsigned long prefix_calls[NREADERS];
	unsigned published[NWRITERS];
	unsigned wins[NRACE_KEYS];
	unsigned exists[NRACE_KEYS];
};

static uint8_t keys[NKEYS][32];
static struct mkv_key kv[NKEYS];

static size_t
vlen(size_t i)
{
	return tu_vlen(keys[i], 32, 1, MAXLEN);
}

static void
make_keys(uint64_t seed)
{
	size_t i;

	tu_chain_keys(keys, NKEYS, seed);
	for (i = 0; i < NKEYS; i++) {
		kv[i].data = keys[i];
		kv[i].len = 32;
	}
}

static void
wait_ready(struct shared *sh, int n)
{
	__atomic_add_fetch(&sh->ready, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&sh->ready, __ATOMIC_SEQ_CST) < n)
		sched_yield();
}

/* Writer w publishes every key, in its own order; EXISTS is fine. */
static int
writer(const char *dir, struct shared *sh, int w, int nproc)
{
	struct mkv_pool *pool;
	size_t i, k;
	int rc;

	if (tu_pool_open(dir, 0, &pool) < 0)
		return 60;
	wait_ready(sh, nproc);
	for (k = 0; k < NKEYS; k++) {
		i = w == 0 ? k : NKEYS - 1 - k;
		rc = (k + (size_t)w) % 2 ? tu_put(pool, keys[i], 32, vlen(i)) :
			tu_publish(pool, keys[i], 32, vlen(i));
		if (rc == 0)
			sh->published[w]++;
		else if (rc != MKV_E_EXISTS)
			return 61;
		/* what we just wrote (or lost the race for) reads back whole */
		if (tu_check(pool, keys[i], 32, vlen(i)) != 0)
			return 62;
	}
	mkv_pool_close(&pool);
	return 0;
}

/* Reader r gets/verifies/releases and asks prefix lengths until writers end. */
static int
reader(const char *dir, struct shared *sh, int r, int nproc)
{
	struct mkv_pool *pool;
	struct mkv_view v[16];
	uint64_t rng = 0x1234567ULL + (uint64_t)r;
	size_t i, j, hits, found;
	double deadline;
	int rc, last = 0;

	if (tu_pool_open(dir, MKV_RDONLY, &pool) < 0)
		return 70;
	wait_ready(sh, nproc);
	deadline = tu_now() + 50;
	while (!last) {
		/* one last full pass after the writers are done */
		last = __atomic_load_n(&sh->writers_done, __ATOMIC_SEQ_CST) == NWRITERS;
		if (tu_now() > deadline)
			return 71;
		for (j = 0; j < 32; j++) {
			i = (size_t)tu_rand_range(&rng, 0, NKEYS - 1);
			rc = mkv_get(pool, keys[i], 32, &v[0]);
			if (rc == MKV_E_NOTFOUND)
				continue;
			if (rc != 0)
				return 72;
			if (v[0].len != vlen(i) || tu_verify(v[0].data, v[0].len, keys[i], 32) != -1)
				return 73;
			if (mkv_release(pool, &v[0]) != 0)
				return 74;
			sh->reads[r]++;
		}
		if (mkv_prefix_len(pool, kv, NKEYS, &hits) != 0)
			return 75;
		sh->prefix_calls[r]++;
		/* keys are never deleted: what the snapshot had is still there */
		for (i = 0; i < hits; i++)
			if (mkv_exists(pool, keys[i], 32) != 1)
				return 76;
		if (last && hits != NKEYS)
			return 77;
		/* a batch of 16 from a random start, in prefix mode */
		j = (size_t)tu_rand_range(&rng, 0, NKEYS - 16);
		if (mkv_get_batch(pool, kv + j, 16, MKV_BATCH_PREFIX, v, &found) != 0)
			return 78;
		for (i = 0; i < 16; i++) {
			if (i >= found) {
				if (v[i].data != NULL)
					return 79;
				continue;
			}
			if (v[i].data == NULL || v[i].len != vlen(j + i) ||
			    tu_verify(v[i].data, v[i].len, keys[j + i], 32) != -1)
				return 80;
			if (mkv_release(pool, &v[i]) != 0)
				return 81;
		}
	}
	mkv_pool_close(&pool);
	return 0;
}

START_TEST(test_writers_and_readers_on_a_chain)
{
	struct shared *sh = tu_shared(sizeof(*sh));
	struct mkv_pool *pool;
	struct mkv_stat st;
	pid_t wp[NWRITERS], rp[NREADERS];
	int i, rc, nproc = NWRITERS + NREADERS;
	size_t hits;
	uint64_t bytes = 0;

	make_keys(11);
	TU_OK(tu_pool_create(tu_dir, MP_DATA_SIZE, TU_PAGE_SIZE, 16, &pool));
	mkv_pool_close(&pool);

	for (i = 0; i < NREADERS; i++) {
		rp[i] = tu_fork();
		ck_assert_int_ge(rp[i], 0);
		if (rp[i] == 0)
			_exit(reader(tu_dir, sh, i, nproc));
	}
	for (i = 0; i < NWRITERS; i++) {
		wp[i] = tu_fork();
		ck_assert_int_ge(wp[i], 0);
		if (wp[i] == 0)
			_exit(writer(tu_dir, sh, i, nproc));
	}
	for (i = 0; i < NWRITERS; i++) {
		rc = tu_wait(wp[i]);
		__atomic_add_fetch(&sh->writers_done, 1, __ATOMIC_SEQ_CST);
		ck_assert_msg(rc == 0, "writer %d exited with %d", i, rc);
	}
	for (i = 0; i < NREADERS; i++) {
		rc = tu_wait(rp[i]);
		ck_assert_msg(rc == 0, "reader %d exited with %d", i, rc);
		ck_assert_uint_gt(sh->prefix_calls[i], 0);
		ck_assert_uint_gt(sh->reads[i], 0);
	}
	/* every key was published exactly once */
	ck_assert_uint_eq(sh->published[0] + sh->published[1], NKEYS);

	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	for (i = 0; i < NKEYS; i++) {
		ck_assert_msg(tu_check(pool, keys[i], 32, vlen((size_t)i)) == 0, "key %d bad", i);
		bytes += vlen((size_t)i);
	}
	TU_OK(mkv_prefix_len(pool, kv, NKEYS, &hits));
	ck_assert_uint_eq(hits, NKEYS);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, NKEYS);
	ck_assert_uint_eq(st.bytes_stored, bytes);
	ck_assert_uint_eq(st.clients, 1);
	ck_assert_uint_eq(st.pages_granted, 0);
	mkv_pool_close(&pool);
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

/* Racer: publish every race key (alloc/fill/publish), count wins. */
static int
racer(const char *dir, struct shared *sh, int nproc)
{
	struct mkv_pool *pool;
	struct mkv_buf buf;
	size_t i;
	int rc;

	if (tu_pool_open(dir, 0, &pool) < 0)
		return 90;
	wait_ready(sh, nproc);
	for (i = 0; i < NRACE_KEYS; i++) {
		if (mkv_alloc(pool, vlen(i), &buf) != 0)
			return 91;
		tu_fill(buf.data, vlen(i), keys[i], 32);
		rc = mkv_publish(pool, keys[i], 32, &buf);
		if (rc == 0)
			__atomic_add_fetch(&sh->wins[i], 1, __ATOMIC_SEQ_CST);
		else if (rc == MKV_E_EXISTS)
			__atomic_add_fetch(&sh->exists[i], 1, __ATOMIC_SEQ_CST);
		else
			return 92;
		if (buf.data != NULL)
			return 93;  /* not consumed */
		if (tu_check(pool, keys[i], 32, vlen(i)) != 0)
			return 94;
	}
	mkv_pool_close(&pool);
	return 0;
}

START_TEST(test_racing_writers_one_wins_each_key)
{
	struct shared *sh = tu_shared(sizeof(*sh));
	struct mkv_pool *pool;
	struct mkv_stat st;
	pid_t pids[NRACERS];
	uint64_t pages = 0;
	int i, rc;

	make_keys(23);
	TU_OK(tu_pool_create(tu_dir, MP_DATA_SIZE, TU_PAGE_SIZE, 16, &pool));
	mkv_pool_close(&pool);
	for (i = 0; i < NRACERS; i++) {
		pids[i] = tu_fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0)
			_exit(racer(tu_dir, sh, NRACERS));
	}
	for (i = 0; i < NRACERS; i++) {
		rc = tu_wait(pids[i]);
		ck_assert_msg(rc == 0, "racer %d exited with %d", i, rc);
	}
	for (i = 0; i < NRACE_KEYS; i++) {
		ck_assert_msg(sh->wins[i] == 1, "key %d won %u times", i, sh->wins[i]);
		ck_assert_uint_eq(sh->exists[i], NRACERS - 1);
		pages += (vlen((size_t)i) + TU_PAGE_SIZE - 1) / TU_PAGE_SIZE;
	}
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	for (i = 0; i < NRACE_KEYS; i++)
		ck_assert_int_eq(tu_check(pool, keys[i], 32, vlen((size_t)i)), 0);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, NRACE_KEYS);
	/* the losers' buffers all came back */
	ck_assert_uint_eq(st.pages_used, pages);
	ck_assert_uint_eq(st.pages_granted, 0);
	ck_assert_uint_eq(st.pages_free, st.pages_total - pages);
	mkv_pool_close(&pool);
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

#define CHURN_KEYS 100
#define CHURN_ROUNDS 40
#define CHURN_WRITERS 2

static size_t
churn_len(size_t i)
{
	return tu_vlen(keys[i], 32, 1, 2 * TU_PAGE_SIZE);
}

/* Publish every key, round after round, while the deleter removes them. */
static int
churner(const char *dir, struct shared *sh, int w, int nproc)
{
	struct mkv_pool *pool;
	unsigned round;
	size_t i;
	int rc;

	if (tu_pool_open(dir, 0, &pool) < 0)
		return 100;
	wait_ready(sh, nproc);
	for (round = 0; round < CHURN_ROUNDS; round++) {
		for (i = 0; i < CHURN_KEYS; i++) {
			rc = (i + (size_t)w) % 2 ? tu_put(pool, keys[i], 32, churn_len(i)) :
				tu_publish(pool, keys[i], 32, churn_len(i));
			if (rc != 0 && rc != MKV_E_EXISTS)
				return 101;
			rc = tu_check(pool, keys[i], 32, churn_len(i));
			if (rc != 0 && rc != MKV_E_NOTFOUND)
				return 102;
		}
	}
	mkv_pool_close(&pool);
	return 0;
}

static int
deleter(const char *dir, struct shared *sh, int nproc)
{
	struct mkv_pool *pool;
	unsigned round;
	size_t i;
	int rc;

	if (tu_pool_open(dir, 0, &pool) < 0)
		return 110;
	wait_ready(sh, nproc);
	for (round = 0; round < CHURN_ROUNDS; round++) {
		for (i = 0; i < CHURN_KEYS; i++) {
			unsigned spin;

			/* chase the writers: delete a key as soon as it appears */
			for (spin = 0; spin < 2000; spin++) {
				rc = mkv_exists(pool, keys[i], 32);
				if (rc < 0)
					return 112;
				if (rc == 1)
					break;
			}
			rc = mkv_del(pool, keys[i], 32);
			if (rc != 0 && rc != MKV_E_NOTFOUND)
				return 111;
		}
	}
	mkv_pool_close(&pool);
	return 0;
}

START_TEST(test_publish_and_delete_keep_page_counts)
{
	struct shared *sh = tu_shared(sizeof(*sh));
	struct mkv_pool *pool;
	struct mkv_stat st;
	pid_t pids[CHURN_WRITERS + 1];
	uint64_t pages = 0, bytes = 0, entries = 0;
	int i, rc, nproc = CHURN_WRITERS + 1;

	make_keys(31);
	TU_OK(tu_pool_create(tu_dir, MP_DATA_SIZE, TU_PAGE_SIZE, 16, &pool));
	mkv_pool_close(&pool);
	for (i = 0; i < nproc; i++) {
		pids[i] = tu_fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0)
			_exit(i < CHURN_WRITERS ? churner(tu_dir, sh, i, nproc) :
					deleter(tu_dir, sh, nproc));
	}
	for (i = 0; i < nproc; i++) {
		rc = tu_wait(pids[i]);
		ck_assert_msg(rc == 0, "process %d exited with %d", i, rc);
	}

	/* the page table agrees with the registry */
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	for (i = 0; i < CHURN_KEYS; i++) {
		rc = tu_check(pool, keys[i], 32, churn_len((size_t)i));
		if (rc == MKV_E_NOTFOUND)
			continue;
		ck_assert_msg(rc == 0, "key %d: %d", i, rc);
		entries++;
		bytes += churn_len((size_t)i);
		pages += (churn_len((size_t)i) + TU_PAGE_SIZE - 1) / TU_PAGE_SIZE;
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, entries);
	ck_assert_uint_eq(st.bytes_stored, bytes);
	ck_assert_msg(st.pages_used == pages, "pages_used %llu, but the %llu entries hold %llu",
			(unsigned long long)st.pages_used, (unsigned long long)entries,
			(unsigned long long)pages);
	ck_assert_uint_eq(st.pages_granted, 0);

	/* empty it: every page comes back */
	for (i = 0; i < CHURN_KEYS; i++) {
		rc = mkv_del(pool, keys[i], 32);
		ck_assert(rc == 0 || rc == MKV_E_NOTFOUND);
	}
	TU_OK(tu_put(pool, "last", 4, 1));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 1);
	ck_assert_uint_eq(st.pages_used, 1);
	ck_assert_uint_eq(st.pages_quarantined, 0);
	/* what is not free is this handle's grant cache, which close returns */
	ck_assert_uint_eq(st.pages_free + st.pages_granted, st.pages_total - 1);
	mkv_pool_close(&pool);
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_free, st.pages_total - 1);
	mkv_pool_close(&pool);
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

/* CPU time (user and system) of process @p pid so far, in seconds (/proc). */
static double
proc_cpu(pid_t pid)
{
	unsigned long utime = 0, stime = 0;
	char path[64], buf[1024], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* after the command's ")": state, then fields 4 to 13, utime, stime */
	p = strrchr(buf, ')');
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			&utime, &stime), 2);
	return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* A client: open, on 'p' put IDLE_PUTS one-page values, then stay open until 'x'. */
#define IDLE_PUTS 300
static int
idle_client(int cmd, int ev, void *arg)
{
	struct mkv_pool *pool;
	char key[64];

	(void)arg;
	if (tu_pool_open(tu_dir, 0, &pool) < 0)
		return 20;
	tu_write_byte(ev, 'o');
	if (tu_read_byte(cmd, 60) != 'p')
		return 21;
	for (unsigned i = 0; i < IDLE_PUTS; i++) {
		size_t klen = tu_key(key, "idle-", (unsigned)getpid() * IDLE_PUTS + i);

		if (tu_put(pool, key, klen, TU_PAGE_SIZE) != 0)
			return 22;
	}
	tu_write_byte(ev, 'p');
	if (tu_read_byte(cmd, 60) != 'x')
		return 23;
	mkv_pool_close(&pool);
	return 0;
}

/*
 * The holder and its clients, once their writes are done, sleep: a wait
 * polls for a moment before it sleeps (marukv(7), The single-writer lease),
 * but none of them burns a core while nothing comes.
 */
START_TEST(test_idle_holder_and_clients_burn_no_cpu)
{
	static const struct tu_opts o = { .data_size = MP_DATA_SIZE, .max_clients = 16 };
	struct tu_child h = TU_CHILD_NONE, c[2] = { TU_CHILD_NONE, TU_CHILD_NONE };
	double before[3], used;
	struct mkv_pool *pool;
	pid_t pids[3];

	TU_OK(tu_pool_create(tu_dir, MP_DATA_SIZE, TU_PAGE_SIZE, 16, &pool));
	mkv_pool_close(&pool);
	tu_child_start(&h, tu_stay, &(struct tu_stay){ tu_path, &o });
	tu_child_expect(&h, "holder", 'o', 20);
	for (int i = 0; i < 2; i++) {
		tu_child_start(&c[i], idle_client, NULL);
		tu_child_expect(&c[i], "client", 'o', 20);
	}
	for (int i = 0; i < 2; i++)
		tu_write_byte(c[i].cmd, 'p');
	for (int i = 0; i < 2; i++)
		tu_child_expect(&c[i], "client", 'p', 60);
	pids[0] = h.pid;
	pids[1] = c[0].pid;
	pids[2] = c[1].pid;
	for (int i = 0; i < 3; i++)
		before[i] = proc_cpu(pids[i]);
	tu_sleep_ms(1000);
	for (int i = 0; i < 3; i++) {
		used = proc_cpu(pids[i]) - before[i];
		ck_assert_msg(used < 0.1, "%s %d used %.2f s of CPU in an idle second",
				i ? "a client" : "the holder", (int)pids[i], used);
	}
	for (int i = 0; i < 2; i++) {
		tu_write_byte(c[i].cmd, 'x');
		ck_assert_int_eq(tu_reap(c[i].pid, 20), 0);
		c[i].pid = -1;
		tu_child_end(&c[i]);
	}
	tu_child_end(&h);
}
END_TEST

static Suite *
multiproc_suite(void)
{
	Suite *s = suite_create("multiproc");
	TCase *tc;

	tc = tcase_create("concurrency");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_writers_and_readers_on_a_chain);
	tcase_add_test(tc, test_racing_writers_one_wins_each_key);
	tcase_add_test(tc, test_publish_and_delete_keep_page_counts);
	tcase_add_test(tc, test_idle_holder_and_clients_burn_no_cpu);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(multiproc_suite());
}
