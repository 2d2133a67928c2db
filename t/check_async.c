/* SPDX-License-Identifier: MIT */
/*
 * check_async.c -- asynchronous publishes: mkv_publish_async() and
 * mkv_wait() on the lease holder and through the request ring, more
 * tickets in flight than a ring holds (and MKV_ASYNC_MAX of them, the
 * next waiting), duplicates in flight and committed, tickets waited for twice or on another handle; and where an
 * asynchronous publish goes, which is where every write goes (a free
 * lease is taken, a fenced one dropped and the publish forwarded).
 *
 * Children report through exit statuses and a shared failure text
 * (tu_fail); values carry the key's pattern (tu_fill).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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
 * The holder's own asynchronous publish while another writer keeps the
 * registry's write lock (super's flock, which every writer takes first):
 * it cannot commit at once, so it waits in the ring, and mkv_wait() gets
 * its answer once the lock is free.  It used to be answered MKV_E_TIMEDOUT
 * at once, with a ticket that a second wait refused and the key lost.
 */
START_TEST(test_async_publish_waits_out_a_held_writer_lock)
{
	size_t len = tu_vlen("locked", 6, 1, A_MAXLEN);
	struct mkv_pool *pool;
	struct mkv_ticket t;
	struct mkv_stat st;
	struct mkv_buf b;
	int fd;

	TU_OK(tu_open(tu_path, MKV_CREATE, &pb_opts, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)getpid());
	/* the pages first: a grant is a registry write too */
	TU_OK(mkv_alloc(pool, len, &b));
	tu_fill(b.data, len, "locked", 6);
	fd = tu_lock_writers(tu_path);
	memset(&t, 0, sizeof(t));
	TU_OK(mkv_publish_async(pool, "locked", 6, &b, &t));
	ck_assert_ptr_null(b.data);
	ck_assert_int_eq(mkv_exists(pool, "locked", 6), 0);
	close(fd);
	TU_OK(mkv_wait(pool, &t));
	ck_assert_int_eq(mkv_exists(pool, "locked", 6), 1);
	ck_assert_int_eq(tu_check(pool, "locked", 6, len), 0);
	TU_ERR(mkv_wait(pool, &t), MKV_E_INVAL);
	mkv_pool_close(&pool);
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

/*
 * A holder fenced under an asynchronous publish: A holds the lease, its
 * mkv_publish_async() gets as far as the registry write, where it waits
 * for super's flock (every writer takes it before LMDB's write lock: the
 * test holds it), and A is stopped there.  B waits out A's lease and
 * takes it over; A is continued and finds B's token in the registry.
 * The publish must go to B through the ring and succeed, the call itself
 * must drop A's lease (its service thread, which would notice too, waits
 * for the lock the call holds), and nothing A or B wrote is lost.
 */
#define F_PERIOD 2000U     /* a quarter of it is how long A waits for the flock */
#define F_KEYS 6           /* A's keys before the stop */
#define F_KEY "fenced-async"
#define F_LEN (3 * TU_PAGE_SIZE - 5)

static const struct tu_opts f_opts_a = { .data_size = 8ULL << 20,
		.max_clients = TU_MAX_CLIENTS, .lease_ms = F_PERIOD, .node = "a" };
static const struct tu_opts f_opts_b = { .node = "b" };

struct fenced_sh {
	uint64_t a_gen, b_gen;
	pid_t b_pid;
	int publish_rc, wait_rc, check_rc;
	int drops;               /* "lease dropped" logged inside mkv_publish_async() */
	uint32_t holder_after;   /* the lease record's holder pid, as A saw it after */
	int a_holder_after;      /* A's own client entry says it holds the lease */
	int b_checks;            /* keys B read back whole */
};

static __thread int f_publishing;
static int f_drops;

static void
fenced_log(enum mkv_log_level level, const char *msg, void *arg)
{
	(void)level, (void)arg;
	if (f_publishing && strstr(msg, "lease dropped"))
		f_drops++;
}

/* The holder A: write, hold a buffer, publish it asynchronously on 'p'. */
static int
fenced_a(int cmd, int ev, void *arg)
{
	struct fenced_sh *sh = arg;
	struct mkv_client cl[TU_MAX_CLIENTS];
	struct mkv_pool *pool;
	struct mkv_ticket t;
	struct mkv_stat st;
	struct mkv_buf b;
	char key[64];
	size_t klen, n;
	unsigned i;
	int rc, nomsg = 0;

	if ((rc = tu_open(tu_path, 0, &f_opts_a, &pool)) < 0)
		return tu_fail(10, "A: open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	if ((rc = mkv_pool_stat(pool, &st)) < 0 || st.lease_holder_pid != (uint32_t)getpid())
		return tu_fail(11, "A does not hold the lease: %d, holder pid %u", rc,
				st.lease_holder_pid);
	sh->a_gen = st.lease_generation;
	for (i = 0; i < F_KEYS; i++) {
		klen = tu_key(key, "a", i);
		rc = tu_write(pool, key, klen, tu_vlen(key, klen, 1, A_MAXLEN),
				(enum tu_way)(i % 3), &nomsg);
		if (rc != 0)
			return tu_fail(12, "A: %s", tu_write_msg);
	}
	/* the buffer while A holds the lease: the publish is all that is left to write */
	if ((rc = mkv_alloc(pool, F_LEN, &b)) < 0)
		return tu_fail(13, "A: alloc: %s: %s", mkv_strerror(rc), mkv_errormsg());
	tu_fill(b.data, F_LEN, F_KEY, strlen(F_KEY));
	mkv_set_log(fenced_log, MKV_LOG_INFO, NULL);
	tu_write_byte(ev, 'r');
	if (tu_read_byte(cmd, 60) != 'p')
		return tu_fail(14, "A: no command to publish");
	f_publishing = 1;
	sh->publish_rc = mkv_publish_async(pool, F_KEY, strlen(F_KEY), &b, &t);
	f_publishing = 0;
	sh->drops = f_drops;
	if (sh->publish_rc != 0)
		return tu_fail(15, "A: publish_async: %s", mkv_errormsg());
	sh->wait_rc = mkv_wait(pool, &t);
	sh->check_rc = tu_check(pool, F_KEY, strlen(F_KEY), F_LEN);
	if ((rc = mkv_pool_stat(pool, &st)) < 0 ||
	    (rc = mkv_pool_clients(pool, cl, TU_MAX_CLIENTS, &n)) < 0)
		return tu_fail(16, "A: stat or clients: %s", mkv_errormsg());
	sh->holder_after = st.lease_holder_pid;
	for (i = 0; i < n && i < TU_MAX_CLIENTS; i++)
		if (cl[i].pid == (uint32_t)getpid())
			sh->a_holder_after = cl[i].holder;
	mkv_pool_close(&pool);
	return 0;
}

/* B on another node: on 't' write (taking the lease over), on 'c' read every key, on 'x' close. */
static int
fenced_b(int cmd, int ev, void *arg)
{
	struct fenced_sh *sh = arg;
	struct mkv_pool *pool;
	struct mkv_stat st;
	char key[64];
	size_t klen;
	unsigned i;
	int rc;

	sh->b_pid = getpid();
	if ((rc = tu_open(tu_path, 0, &f_opts_b, &pool)) < 0)
		return tu_fail(20, "B: open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	tu_write_byte(ev, 'o');
	if (tu_read_byte(cmd, 60) != 't')
		return tu_fail(21, "B: no command to write");
	if ((rc = tu_put(pool, "b", 1, TU_PAGE_SIZE)) != 0)
		return tu_fail(22, "B: put: %s: %s", mkv_strerror(rc), mkv_errormsg());
	if ((rc = mkv_pool_stat(pool, &st)) < 0 || st.lease_holder_pid != (uint32_t)getpid())
		return tu_fail(23, "B did not take the lease over: %d, holder pid %u", rc,
				st.lease_holder_pid);
	sh->b_gen = st.lease_generation;
	tu_write_byte(ev, 't');
	if (tu_read_byte(cmd, 60) != 'c')
		return tu_fail(24, "B: no command to read");
	for (i = 0; i < F_KEYS; i++) {
		klen = tu_key(key, "a", i);
		sh->b_checks += tu_check(pool, key, klen, tu_vlen(key, klen, 1, A_MAXLEN)) == 0;
	}
	sh->b_checks += tu_check(pool, F_KEY, strlen(F_KEY), F_LEN) == 0;
	sh->b_checks += tu_check(pool, "b", 1, TU_PAGE_SIZE) == 0;
	tu_write_byte(ev, 'c');
	if (tu_read_byte(cmd, 60) != 'x')
		return tu_fail(25, "B: no command to close");
	mkv_pool_close(&pool);
	return 0;
}

/*
 * Whether pid's main thread is in a nap (clock_nanosleep), as the registry
 * writer's wait for super's flock naps between its tries (lock.c); the
 * thread sleeps in read() while it waits for the test's command.
 */
static bool
napping(pid_t pid)
{
	char path[64], buf[64];
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	if (!(f = fopen(path, "r")))
		return false;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	return nr == SYS_clock_nanosleep;
}

START_TEST(test_async_publish_of_a_fenced_holder_goes_to_its_successor)
{
	struct fenced_sh *sh = tu_shared(sizeof(*sh));
	struct tu_child a = TU_CHILD_NONE, b = TU_CHILD_NONE;
	struct mkv_client cl[TU_MAX_CLIENTS];
	struct mkv_pool *pool;
	struct mkv_stat st;
	size_t n, i;
	int fd, rc, b_holds = 0;

	tu_why_init();
	TU_OK(tu_open(tu_path, MKV_CREATE, &f_opts_a, &pool));
	mkv_pool_close(&pool);
	tu_child_start(&a, fenced_a, sh);
	tu_child_expect(&a, "A", 'r', 20);
	tu_child_start(&b, fenced_b, sh);
	tu_child_expect(&b, "B", 'o', 20);

	/*
	 * A's publish waits for the lock we hold, and is stopped there: once its
	 * thread naps between tries (a loaded machine may take A longer than
	 * any fixed pause to get there, and A stopped before it is another test)
	 */
	fd = tu_lock_writers(tu_path);
	tu_write_byte(a.cmd, 'p');
	ck_assert_msg(TU_UNTIL(napping(a.pid), 10), "A's publish never waited for the lock");
	tu_sleep_ms(F_PERIOD / 20);
	ck_assert_int_eq(tu_stop(a.pid, 10), 0);
	close(fd);

	/* B's first write waits out A's lease and takes it over */
	tu_write_byte(b.cmd, 't');
	tu_child_expect(&b, "B", 't', 30);
	ck_assert_int_eq(kill(a.pid, SIGCONT), 0);
	rc = tu_reap(a.pid, 30);
	a.pid = -1;
	ck_assert_msg(rc == 0, "A exited with %d: %s; %s", rc, tu_why(), tu_lease_text(tu_path));
	ck_assert_msg(sh->b_gen > sh->a_gen, "B's generation %llu, A's %llu",
			(unsigned long long)sh->b_gen, (unsigned long long)sh->a_gen);
	ck_assert_msg(sh->drops == 1, "the fenced holder's mkv_publish_async() logged %d "
			"\"lease dropped\", not 1: it left the lease to its service thread",
			sh->drops);
	ck_assert_msg(sh->wait_rc == 0, "A's mkv_wait = %d (%s)", sh->wait_rc,
			mkv_strerror(sh->wait_rc));
	ck_assert_msg(sh->check_rc == 0, "A reads its published key back: %d", sh->check_rc);
	ck_assert_msg(sh->holder_after == (uint32_t)sh->b_pid && !sh->a_holder_after,
			"after its publish A saw holder pid %u (B is %d), its own entry holder %d",
			sh->holder_after, (int)sh->b_pid, sh->a_holder_after);

	/* the new holder sees every key; the lease record names it */
	tu_write_byte(b.cmd, 'c');
	tu_child_expect(&b, "B", 'c', 20);
	ck_assert_int_eq(sh->b_checks, F_KEYS + 2);
	TU_OK(tu_open(tu_path, MKV_RDONLY, &f_opts_b, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)sh->b_pid);
	ck_assert_uint_eq(st.lease_generation, sh->b_gen);
	ck_assert_uint_eq(st.entries, F_KEYS + 2);
	TU_OK(mkv_pool_clients(pool, cl, TU_MAX_CLIENTS, &n));
	for (i = 0; i < n && i < TU_MAX_CLIENTS; i++)
		b_holds += cl[i].holder && cl[i].pid == (uint32_t)sh->b_pid;
	ck_assert_int_eq(b_holds, 1);
	tu_verify_clean(pool, MKV_VERIFY_DEEP, NULL, "after the fenced publish");
	mkv_pool_close(&pool);
	tu_write_byte(b.cmd, 'x');
	ck_assert_int_eq(tu_reap(b.pid, 20), 0);
	b.pid = -1;
	tu_child_end(&b);
	tu_child_end(&a);
	tu_why_free();
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

/* The publish past MKV_ASYNC_MAX, from a thread: its result and when it returned. */
struct one_more {
	struct mkv_pool *pool;
	struct mkv_buf *buf;
	struct mkv_ticket *t;
	int rc;
	bool done;
};

static void *
one_more_main(void *arg)
{
	struct one_more *m = arg;

	m->rc = mkv_publish_async(m->pool, "more", 4, m->buf, m->t);
	__atomic_store_n(&m->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * MKV_ASYNC_MAX publishes in flight on one handle, its holder stopped: each
 * returns at once and waits in the ring; one more waits for the oldest
 * until the holder goes on; then every ticket answers 0.
 */
START_TEST(test_async_max_in_flight_then_the_next_waits)
{
	static const struct tu_opts o = { .data_size = 8ULL << 20, .max_clients = TU_MAX_CLIENTS,
			.lease_ms = 20000, .node = "a" };
	struct tu_child h = TU_CHILD_NONE;
	struct mkv_buf bufs[MKV_ASYNC_MAX + 1];
	struct mkv_ticket t[MKV_ASYNC_MAX + 1];
	struct one_more m;
	struct mkv_pool *pool;
	struct mkv_stat st;
	pthread_t thread;
	char key[64];
	size_t klen;
	double t0;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	mkv_pool_close(&pool);
	tu_child_start(&h, tu_stay, &(struct tu_stay){ tu_path, &o });
	tu_child_expect(&h, "H", 'o', 20);
	TU_OK(tu_open(tu_path, 0, &o, &pool));
	for (unsigned i = 0; i <= MKV_ASYNC_MAX; i++) {
		TU_OK(mkv_alloc(pool, TU_PAGE_SIZE, &bufs[i]));
		klen = tu_key(key, "inflight-", i);
		tu_fill(bufs[i].data, TU_PAGE_SIZE, key, klen);
	}
	ck_assert_int_eq(tu_stop(h.pid, 10), 0);
	t0 = tu_now();
	for (unsigned i = 0; i < MKV_ASYNC_MAX; i++) {
		klen = tu_key(key, "inflight-", i);
		TU_OK(mkv_publish_async(pool, key, klen, &bufs[i], &t[i]));
	}
	ck_assert_msg(tu_now() - t0 < 5.0, "%u publishes took %.1f s with the holder stopped",
			MKV_ASYNC_MAX, tu_now() - t0);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.requests_pending, MKV_ASYNC_MAX);
	m = (struct one_more){ pool, &bufs[MKV_ASYNC_MAX], &t[MKV_ASYNC_MAX], -1, false };
	tu_fill(bufs[MKV_ASYNC_MAX].data, TU_PAGE_SIZE, "more", 4);
	ck_assert_int_eq(pthread_create(&thread, NULL, one_more_main, &m), 0);
	tu_sleep_ms(300);
	ck_assert_msg(!__atomic_load_n(&m.done, __ATOMIC_ACQUIRE),
			"publish %u returned (%d) with %u in flight and the holder stopped",
			MKV_ASYNC_MAX + 1, m.rc, MKV_ASYNC_MAX);
	ck_assert_int_eq(kill(h.pid, SIGCONT), 0);
	ck_assert_int_eq(pthread_join(thread, NULL), 0);
	TU_OK(m.rc);
	for (unsigned i = 0; i <= MKV_ASYNC_MAX; i++)
		TU_OK(mkv_wait(pool, &t[i]));
	for (unsigned i = 0; i < MKV_ASYNC_MAX; i++) {
		klen = tu_key(key, "inflight-", i);
		ck_assert_int_eq(tu_check(pool, key, klen, TU_PAGE_SIZE), 0);
	}
	ck_assert_int_eq(tu_check(pool, "more", 4, TU_PAGE_SIZE), 0);
	mkv_pool_close(&pool);
	tu_child_end(&h);
}
END_TEST

static Suite *
publish_suite(void)
{
	Suite *s = suite_create("async");
	TCase *tc;

	tc = tcase_create("async");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_async_publish_and_wait);
	tcase_add_test(tc, test_async_publish_takes_a_free_lease);
	tcase_add_test(tc, test_async_publish_waits_out_a_held_writer_lock);
	tcase_add_test(tc, test_async_publish_of_a_fenced_holder_goes_to_its_successor);
	tcase_add_test(tc, test_async_max_in_flight_then_the_next_waits);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(publish_suite());
}
