/* SPDX-License-Identifier: MIT */
/*
 * check_liveness.c -- whether the library tells live clients from dead
 * ones, and never waits without bound:
 *
 *  - a reader in a PID namespace of its own (its pid means another
 *    process, or none, outside) keeps its view and its slot;
 *  - a reader of another node paused past the client timeout loses its
 *    slot, and its handle says so (MKV_E_EXPIRED) instead of handing out
 *    views that may have changed; paused on the same node, it keeps all;
 *  - mkv_pool_close() in a forked child touches nothing of the parent's;
 *  - the node table gives back the entries of dead nodes, and
 *    mkv_opts_set_max_nodes() bounds it;
 *  - a registry whose stored lease generation is ahead of the lease
 *    record makes write calls fail or succeed, never hang, and
 *    mkv_pool_verify() does not call such a pool clean;
 *  - a reader stopped inside a lookup, whose LMDB snapshot keeps every
 *    page freed since from reuse, does not make writes fail while it
 *    resumes within a lease period.
 *
 * Every wait is bounded; every child is killed at the end.  Tests that
 * need root (a PID namespace) say so and return.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <lmdb.h>

#include "testutil.h"

#ifndef MKV_TOOLS_DIR
#define MKV_TOOLS_DIR "utils"
#endif

#define PAGE TU_PAGE_SIZE
#define HELD_LEN (8 * PAGE - 11)
#define BOUND 30.0  /* seconds any one call may take here */

/* The client entry of @p pid, if it has one; 1 if found. */
static int
client_of(struct mkv_pool *pool, uint32_t pid, struct mkv_client *out)
{
	struct mkv_client cl[64];
	size_t n = 0;

	TU_OK(mkv_pool_clients(pool, cl, 64, &n));
	for (size_t i = 0; i < n && i < 64; i++)
		if (cl[i].pid == pid) {
			*out = cl[i];
			return 1;
		}
	return 0;
}

/*
 * The one client that is not this process, if there is exactly one; 1 if
 * found.  (A client in another PID namespace shows the pid it has there,
 * or whatever the library records for it: it is found by elimination.)
 */
static int
other_client(struct mkv_pool *pool, struct mkv_client *out)
{
	struct mkv_client cl[64];
	size_t n = 0;
	int found = 0;

	TU_OK(mkv_pool_clients(pool, cl, 64, &n));
	for (size_t i = 0; i < n && i < 64; i++)
		if (cl[i].pid != (uint32_t)getpid()) {
			*out = cl[i];
			found++;
		}
	return found == 1;
}

#define APPEND(buf, ...) \
	snprintf((buf) + strlen(buf), sizeof(buf) - strlen(buf), __VA_ARGS__)

/* A child that opens the pool itself, deletes @p key and churns the pool; its exit status. */
static int
delete_and_churn(const struct tu_opts *o, const char *key)
{
	pid_t pid = tu_fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct mkv_pool *p;

		if (tu_open(tu_path, 0, o, &p) < 0)
			_exit(10);
		if (key && mkv_del(p, key, strlen(key)) < 0)
			_exit(11);
		if (tu_churn(p, "churn", 2) < 0)
			_exit(12);
		mkv_pool_close(&p);
		_exit(0);
	}
	return tu_reap(pid, 60);
}

/* ---- fork ---- */

struct forkres {
	int step;  /* 1: calls made; 2: closing; 3: closed */
	int get_rc, put_rc, exists_rc, publish_rc;
	double close_secs;
};

/*
 * What the parent must still have after its child did whatever it did
 * with the inherited handle: its view (while another process deletes the
 * key and churns the pool), its own client slot, a working handle.
 */
static void
parent_intact(struct mkv_pool *pool, struct mkv_view *v, const struct mkv_client *me,
		const struct tu_opts *o, char *bad, size_t badsz)
{
	struct mkv_client now;
	struct mkv_verify vr;
	ssize_t off;
	int rc;

#define BAD(...) snprintf(bad + strlen(bad), badsz - strlen(bad), __VA_ARGS__)
	if (!client_of(pool, (uint32_t)getpid(), &now))
		BAD("\n  the parent no longer has a client slot");
	else if (now.slot != me->slot || !now.alive)
		BAD("\n  the parent's client: slot %u alive %u (was slot %u)", now.slot, now.alive,
				me->slot);
	rc = delete_and_churn(o, "held");
	if (rc != 0)
		BAD("\n  another process deleting and churning exited with %d", rc);
	off = tu_view_damage(v, "held", 4, HELD_LEN);
	if (off != -1)
		BAD("\n  the parent's view changed at byte %zd", off);
	if ((rc = mkv_release(pool, v)) != 0)
		BAD("\n  the parent's mkv_release = %d (%s): %s", rc, mkv_strerror(rc), mkv_errormsg());
	for (unsigned i = 0; i < 8; i++) {
		char key[64];
		size_t klen = tu_key(key, "after", i);

		if ((rc = tu_put(pool, key, klen, 2 * PAGE + i)) != 0) {
			BAD("\n  the parent's put %u = %d (%s): %s", i, rc, mkv_strerror(rc),
					mkv_errormsg());
			break;
		}
		if ((rc = tu_check(pool, key, klen, 2 * PAGE + i)) != 0) {
			BAD("\n  the parent's get %u = %d", i, rc);
			break;
		}
	}
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &vr);
	if (rc != 0)
		BAD("\n  mkv_pool_verify = %d: %s", rc, vr.first_problem);
#undef BAD
}

START_TEST(test_close_in_forked_child_leaves_parent_intact)
{
	struct tu_opts o = { .node = "a" };
	struct forkres *sh = tu_shared(sizeof(*sh));
	struct mkv_pool *pool;
	struct mkv_client me;
	struct mkv_view v;
	char bad[2048] = "";
	pid_t pid;
	int rc;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	TU_OK(tu_put(pool, "held", 4, HELD_LEN));
	TU_OK(tu_put(pool, "other", 5, 100));
	TU_OK(mkv_get(pool, "held", 4, &v));
	ck_assert(client_of(pool, (uint32_t)getpid(), &me));
	fflush(NULL);
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct mkv_pool *inherited = pool;
		struct mkv_view cv;
		struct mkv_buf b;

		sh->get_rc = mkv_get(inherited, "other", 5, &cv);
		sh->put_rc = tu_put(inherited, "child", 5, 100);
		sh->exists_rc = mkv_exists(inherited, "other", 5);
		memset(&b, 0, sizeof(b));
		sh->publish_rc = mkv_alloc(inherited, 100, &b);
		sh->step = 1;
		sh->step = 2;
		sh->close_secs = tu_now();
		mkv_pool_close(&inherited);
		sh->close_secs = tu_now() - sh->close_secs;
		sh->step = 3;
		_exit(0);
	}
	rc = tu_reap(pid, 10);
	if (rc == -2)
		APPEND(bad, "\n  the child %s", sh->step == 2 ? "hung in mkv_pool_close()" :
				"hung before it could close");
	else if (sh->close_secs > 2.0)
		APPEND(bad, "\n  the child's mkv_pool_close() took %.1f s", sh->close_secs);
	if (sh->step >= 1 && (sh->get_rc != MKV_E_INVAL || sh->put_rc != MKV_E_INVAL ||
			sh->exists_rc != MKV_E_INVAL || sh->publish_rc != MKV_E_INVAL))
		APPEND(bad, "\n  in the child, on the inherited handle: mkv_get = %d, mkv_put = %d, "
				"mkv_exists = %d, mkv_alloc = %d (all should be MKV_E_INVAL = %d)",
				sh->get_rc, sh->put_rc, sh->exists_rc, sh->publish_rc, MKV_E_INVAL);
	parent_intact(pool, &v, &me, &o, bad, sizeof(bad));
	mkv_pool_close(&pool);
	tu_shared_free(sh, sizeof(*sh));
	ck_assert_msg(bad[0] == '\0', "a child used and closed its inherited handle:%s", bad);
}
END_TEST

/*
 * A read-only handle's service thread spends its time waiting on a
 * condition of the handle; a fork catches it there.  The child's close
 * must not wait for that waiter, which the child does not have.
 */
START_TEST(test_close_in_forked_child_of_idle_reader_returns)
{
	struct tu_opts o = { .node = "a" };
	struct mkv_pool *w, *r;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &w));
	TU_OK(tu_open(tu_path, MKV_RDONLY, &o, &r));
	for (int i = 0; i < 10; i++) {
		pid_t pid;
		int rc;

		tu_sleep_ms(20);
		fflush(NULL);
		pid = tu_fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			mkv_pool_close(&r);
			mkv_pool_close(&w);
			_exit(0);
		}
		rc = tu_reap(pid, 5);
		ck_assert_msg(rc == 0, "fork %d: the child's mkv_pool_close() %s", i,
				rc == -2 ? "hung" : "failed");
	}
	TU_OK(mkv_exists(r, "x", 1) == 0 ? 0 : -1);
	mkv_pool_close(&r);
	mkv_pool_close(&w);
}
END_TEST

START_TEST(test_forked_child_exiting_without_close_leaves_parent_intact)
{
	struct tu_opts o = { .node = "a" };
	struct mkv_pool *pool;
	struct mkv_client me;
	struct mkv_view v;
	char bad[2048] = "";
	pid_t pid;
	int rc;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	TU_OK(tu_put(pool, "held", 4, HELD_LEN));
	TU_OK(mkv_get(pool, "held", 4, &v));
	ck_assert(client_of(pool, (uint32_t)getpid(), &me));
	fflush(NULL);
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		exit(0);  /* exit(), not _exit(): whatever the library runs at exit runs */
	rc = tu_reap(pid, 10);
	if (rc != 0)
		APPEND(bad, "\n  the child's exit() took %s (status %d)",
				rc == -2 ? "more than 10 s" : "an error", rc);
	parent_intact(pool, &v, &me, &o, bad, sizeof(bad));
	mkv_pool_close(&pool);
	ck_assert_msg(bad[0] == '\0', "a child exited without closing its inherited handle:%s",
			bad);
}
END_TEST

/* ---- a reader in a PID namespace of its own ---- */

struct nsarg {
	pid_t k;             /* the reader's pid inside its namespace */
	struct nsres {
		pid_t init;      /* the namespace's init, as we see it */
		int stage;       /* 1: namespace made */
		int open_rc, get_rc;
		ssize_t off;     /* first changed byte of its view; -1 none */
	} *sh;
};

static int
ns_reader(int cmd, int ev, struct nsres *sh)
{
	struct tu_opts o = { .node = "a" };
	struct mkv_pool *pool;
	struct mkv_view v;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if ((sh->open_rc = tu_open(tu_path, MKV_RDONLY, &o, &pool)) < 0)
		return 60;
	if ((sh->get_rc = mkv_get(pool, "held", 4, &v)) < 0 ||
	    tu_view_damage(&v, "held", 4, HELD_LEN) != -1)
		return 61;
	tu_write_byte(ev, 'v');
	if (tu_read_byte(cmd, 120) != 'c')
		return 62;
	sh->off = tu_view_damage(&v, "held", 4, HELD_LEN);
	tu_write_byte(ev, 'd');
	for (;;)
		pause();
}

/* The namespace's init: fork until the child gets pid k, which reads. */
static int
ns_init(int cmd, int ev, struct nsarg *a)
{
	pid_t pid;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		pid = fork();
		if (pid < 0)
			return 70;
		if (pid == 0) {
			if (getpid() == a->k)
				_exit(ns_reader(cmd, ev, a->sh));
			_exit(0);
		}
		if (pid == a->k)
			return tu_wait(pid);
		tu_wait(pid);
		if (pid > a->k)
			return 71;
	}
}

static int
ns_main(int cmd, int ev, void *arg)
{
	struct nsarg *a = arg;
	pid_t pid;

	if (unshare(CLONE_NEWPID) < 0)
		return 77;
	pid = fork();
	if (pid < 0)
		return 78;
	if (pid == 0)
		_exit(ns_init(cmd, ev, a));
	a->sh->init = pid;
	a->sh->stage = 1;
	return tu_wait(pid);
}

START_TEST(test_reader_in_own_pid_namespace_keeps_its_view)
{
	struct tu_opts o = { .node = "a" };
	struct nsarg a = { 0, tu_shared(sizeof(struct nsres)) };
	struct tu_child c = TU_CHILD_NONE;
	struct mkv_client cl;
	struct mkv_reclaim rep;
	struct mkv_pool *w;
	struct mkv_buf b;
	char bad[2048] = "";
	int got, rc, alive_before = -1, alive_after = -1;

	if (geteuid() != 0) {
		fprintf(stderr, "%s: skipped, needs root (unshare(CLONE_NEWPID))\n", __func__);
		return;
	}
	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &w));
	TU_OK(tu_put(w, "held", 4, HELD_LEN));
	mkv_pool_close(&w);

	/* a pid that means nothing out here, for the reader in there */
	for (a.k = 2; a.k < 32768 && !(kill(a.k, 0) < 0 && errno == ESRCH); a.k++)
		;
	tu_child_start(&c, ns_main, &a);
	got = tu_read_byte(c.ev, 30);
	if (got != 'v') {
		rc = tu_reap(c.pid, 5);
		c.pid = -1;
		tu_child_end(&c);
		if (rc == 77) {
			fprintf(stderr, "%s: skipped, unshare(CLONE_NEWPID) is not permitted here\n",
					__func__);
			return;
		}
		ck_abort_msg("the namespaced reader did not start: event %d, exit %d, open %d, get %d",
				got, rc, a.sh->open_rc, a.sh->get_rc);
	}

	TU_OK(tu_open(tu_path, 0, &o, &w));
	if (other_client(w, &cl))
		alive_before = cl.alive;
	TU_OK(mkv_del(w, "held", 4));
	rc = tu_churn(w, "churn", 2);
	if (rc != 0)
		APPEND(bad, "\n  churning the pool: %d (%s)", rc, mkv_strerror(rc));
	TU_OK(mkv_pool_reclaim(w, 0, &rep));
	if (rep.clients != 0 || rep.pins != 0)
		APPEND(bad, "\n  mkv_pool_reclaim took %u clients and %llu pins of live ones",
				rep.clients, (unsigned long long)rep.pins);
	tu_write_byte(c.cmd, 'c');
	tu_child_expect(&c, "namespaced reader", 'd', 30);
	if (other_client(w, &cl))
		alive_after = cl.alive;
	if (a.sh->off != -1)
		APPEND(bad, "\n  the reader's view changed at byte %zd", a.sh->off);
	if (alive_before != 1 || alive_after != 1)
		APPEND(bad, "\n  mkv_pool_clients showed the reader (pid %d in its namespace) %s "
				"before and %s after", (int)a.k,
				alive_before < 0 ? "missing" : alive_before ? "alive" : "dead",
				alive_after < 0 ? "missing" : alive_after ? "alive" : "dead");

	/* dead for real: the namespace goes, its slot and pin with it */
	ck_assert_int_eq(kill(a.sh->init, SIGKILL), 0);
	rc = tu_wait_for(c.pid, 20);
	ck_assert_msg(rc != -2, "the namespace did not end");
	c.pid = -1;
	tu_child_end(&c);
	TU_OK(mkv_pool_reclaim(w, 0, &rep));
	if (other_client(w, &cl))
		APPEND(bad, "\n  the killed reader's slot %u is still taken", cl.slot);
	/* no pin left: every page can be had in one run */
	rc = mkv_alloc(w, (size_t)TU_DATA_SIZE, &b);
	if (rc != 0)
		APPEND(bad, "\n  after the reader died, the whole pool cannot be allocated: %d (%s): %s",
				rc, mkv_strerror(rc), mkv_errormsg());
	else
		TU_OK(mkv_abort(w, &b));
	mkv_pool_close(&w);
	tu_shared_free(a.sh, sizeof(*a.sh));
	ck_assert_msg(bad[0] == '\0', "a reader in its own PID namespace:%s", bad);
}
END_TEST

/* ---- paused readers ---- */

struct pausearg {
	const char *node;
	struct pauseres {
		ssize_t off;
		int rel_rc, get_rc, put_rc, exists_rc;
		int closing, closed;
		char msg[256];
	} *sh;
};

static int
paused_reader(int cmd, int ev, void *arg)
{
	struct pausearg *pa = arg;
	struct pauseres *sh = pa->sh;
	/* a node other than the writer's runs on another host, emulated */
	struct tu_opts o = { .node = pa->node, .host = strcmp(pa->node, "a") ? pa->node : NULL };
	struct mkv_pool *pool;
	struct mkv_view v, v2;

	if (tu_open(tu_path, 0, &o, &pool) < 0)
		return 80;
	if (mkv_get(pool, "held", 4, &v) < 0 || tu_view_damage(&v, "held", 4, HELD_LEN) != -1)
		return 81;
	tu_write_byte(ev, 'v');
	if (tu_read_byte(cmd, 120) != 'c')
		return 82;
	sh->off = tu_view_damage(&v, "held", 4, HELD_LEN);
	sh->rel_rc = mkv_release(pool, &v);
	snprintf(sh->msg, sizeof(sh->msg), "%s", mkv_errormsg());
	sh->get_rc = mkv_get(pool, "other", 5, &v2);
	if (sh->get_rc == 0)
		mkv_release(pool, &v2);
	sh->put_rc = tu_put(pool, "from-reader", 11, 100);
	sh->exists_rc = mkv_exists(pool, "other", 5);
	sh->closing = 1;
	mkv_pool_close(&pool);
	sh->closed = 1;
	return 0;
}

/*
 * A reader (a writable handle) on node @p node takes a view and is
 * stopped; the writer on node "a" deletes the key, waits until the
 * reader is judged (reclaim), churns the pool and reclaims again; then
 * the reader goes on.  A reader on a node other than "a" claims another
 * kernel (MARUKV_BOOT_ID), as on another host: it is judged by its
 * heartbeat, which a stop halts.  On "a" it shares the writer's kernel
 * and is judged exactly, stopped or not.
 */
static void
pause_reader(const char *node, struct pauseres *res, struct mkv_reclaim *rep1)
{
	struct tu_opts o = { .node = "a", .client_timeout_ms = 300 };
	struct pausearg pa = { node, tu_shared(sizeof(struct pauseres)) };
	struct tu_child r = TU_CHILD_NONE;
	struct mkv_reclaim rep;
	struct mkv_pool *w;
	double t0;
	int rc;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &w));
	TU_OK(tu_put(w, "held", 4, HELD_LEN));
	TU_OK(tu_put(w, "other", 5, 100));
	tu_child_start(&r, paused_reader, &pa);
	tu_child_expect(&r, "reader", 'v', 30);
	ck_assert_int_eq(tu_stop(r.pid, 10), 0);
	t0 = tu_now();
	TU_OK(mkv_del(w, "held", 4));
	/* the reader's heartbeat stands still: a reclaim watches it for the timeout */
	TU_OK(mkv_pool_reclaim(w, 0, rep1));
	ck_assert_int_eq(tu_churn(w, "churn", 2), 0);
	/* paused well past the client timeout, whatever the reclaim decided */
	while (tu_now() - t0 < 1.5)
		tu_sleep_ms(50);
	TU_OK(mkv_pool_reclaim(w, 0, &rep));
	ck_assert_int_eq(tu_churn(w, "churn", 1), 0);
	ck_assert_int_eq(kill(r.pid, SIGCONT), 0);
	tu_write_byte(r.cmd, 'c');
	rc = tu_reap(r.pid, BOUND);
	r.pid = -1;
	*res = *pa.sh;
	tu_child_end(&r);
	mkv_pool_close(&w);
	tu_shared_free(pa.sh, sizeof(*pa.sh));
	ck_assert_msg(rc != -2, "the reader did not finish within %.0f s of being continued "
			"(%s)", BOUND, res->closing ? "in mkv_pool_close()" : "before closing");
	ck_assert_msg(rc == 0, "the reader exited with %d", rc);
}

START_TEST(test_paused_reader_of_another_node_expires)
{
	struct pauseres res;
	struct mkv_reclaim rep1;

	pause_reader("b", &res, &rep1);
	/* the writer did judge it dead: its slot went */
	ck_assert_msg(rep1.clients == 1, "setup: reclaim took %u clients", rep1.clients);
	ck_assert_msg(res.rel_rc == MKV_E_EXPIRED && res.get_rc == MKV_E_EXPIRED &&
			res.put_rc == MKV_E_EXPIRED && res.exists_rc == MKV_E_EXPIRED && res.msg[0],
			"a reader of node \"b\", paused past the client timeout while its key was "
			"deleted and its slot reclaimed (its view %s): mkv_release = %d (\"%s\"), "
			"then mkv_get = %d, mkv_put = %d, mkv_exists = %d; all should be "
			"MKV_E_EXPIRED = %d", res.off == -1 ? "still intact" : "changed",
			res.rel_rc, res.msg, res.get_rc, res.put_rc, res.exists_rc, MKV_E_EXPIRED);
	/* and the message says how the claim went */
	ck_assert_msg(strstr(res.msg, "the lease holder revoked its claim on slot"),
			"mkv_release's message: \"%s\"", res.msg);
}
END_TEST

START_TEST(test_paused_reader_of_same_node_keeps_its_view)
{
	struct pauseres res;
	struct mkv_reclaim rep1;

	pause_reader("a", &res, &rep1);
	ck_assert_msg(rep1.clients == 0, "reclaim took %u clients: the paused reader's?",
			rep1.clients);
	ck_assert_msg(res.off == -1 && res.rel_rc == 0 && res.get_rc == 0 && res.put_rc == 0 &&
			res.exists_rc == 1,
			"a reader of the writer's own node, paused: its view %s changed (byte %zd); "
			"mkv_release = %d (\"%s\"), mkv_get = %d, mkv_put = %d, mkv_exists = %d",
			res.off == -1 ? "never" : "", res.off, res.rel_rc, res.msg, res.get_rc,
			res.put_rc, res.exists_rc);
}
END_TEST

/*
 * ---- the node table ----
 *
 * Writers here have node names of their own, as containers on one host
 * may: each is "another node" to the others, judged dead by its heartbeat
 * after the client timeout, kept short (500 ms).  The pools have 64 client
 * slots, so that slots of killed writers not yet judged never run short.
 */
#define NODE_TIMEOUT_MS 500U

struct noderes {
	char node[32];
	int rc;
	char msg[256];
};

/* A writer on @p node: open, put; then exit, close, or wait to be killed. */
enum wend { W_CLOSE, W_KILLED };

static int
node_writer(int cmd, int ev, void *arg)
{
	struct noderes *sh = arg;
	struct tu_opts o = { .node = sh->node };
	struct mkv_pool *pool;
	int rc;

	sh->rc = tu_open(tu_path, 0, &o, &pool);
	snprintf(sh->msg, sizeof(sh->msg), "%s", mkv_errormsg());
	if (sh->rc < 0) {
		tu_write_byte(ev, 'f');
		return 1;
	}
	/* a node that came before under the same name put this key already */
	rc = tu_put(pool, sh->node, strlen(sh->node), 100);
	if (rc != 0 && rc != MKV_E_EXISTS) {
		sh->rc = -1000;
		tu_write_byte(ev, 'f');
		return 2;
	}
	tu_write_byte(ev, 'o');
	if (tu_read_byte(cmd, 120) != 'x')
		return 3;
	mkv_pool_close(&pool);
	return 0;
}

/*
 * Start a writer on @p node and wait until it has opened and put (0) or
 * failed (its open's code, the message in @p msg).  Left running in *c
 * when it opened.
 */
static int
writer_start(struct tu_child *c, const char *node, char *msg, size_t msgsz)
{
	struct noderes *sh = tu_shared(sizeof(*sh));
	int got, rc;

	snprintf(sh->node, sizeof(sh->node), "%s", node);
	tu_child_start(c, node_writer, sh);
	got = tu_read_byte(c->ev, BOUND);
	rc = got == 'o' ? 0 : got == 'f' ? sh->rc : -2000 - got;
	snprintf(msg, msgsz, "%s", sh->msg);
	tu_shared_free(sh, sizeof(*sh));
	if (got != 'o')
		tu_child_end(c);
	return rc;
}

static void
writer_end(struct tu_child *c, enum wend how)
{
	int rc;

	if (c->pid < 0)
		return;
	if (how == W_CLOSE) {
		tu_write_byte(c->cmd, 'x');
		rc = tu_wait_for(c->pid, BOUND);
		ck_assert_msg(rc == 0, "a writer's close: %d", rc);
		c->pid = -1;
	}
	tu_child_end(c);
}

/*
 * In a non-coherent pool only the lease holder frees a dead node's entry,
 * once it has looked unused for the client timeout (marukv(7), COHERENCE
 * MODEL): an open that finds the table full does not, nor does
 * mkv_pool_reclaim() at once.  check_hosts shows the holder doing it.
 */
static int
nodes_freed_by_holder_only(const char *test)
{
	if (tu_coherence() != MKV_NONCOHERENT)
		return 0;
	fprintf(stderr, "%s: skipped, a non-coherent pool frees node entries in the holder's passes\n",
			test);
	return 1;
}

/*
 * Non-coherent: wait until the holder on @p pool has freed every node
 * entry but its own (BOUND at most), as it does in its passes.
 */
static void
nodes_await_one(struct mkv_pool *pool)
{
	double end = tu_now() + BOUND;
	struct mkv_stat st;

	if (tu_coherence() != MKV_NONCOHERENT)
		return;
	while (tu_stat(pool, &st), st.nodes != 1 && tu_now() < end)
		tu_sleep_ms(100);
	ck_assert_uint_eq(st.nodes, 1);
}

START_TEST(test_node_table_does_not_fill_with_dead_nodes)
{
	struct tu_opts o = { .node = "c0", .lease_ms = 100, .client_timeout_ms = NODE_TIMEOUT_MS,
			.max_clients = 64 };
	struct tu_child c = TU_CHILD_NONE;
	struct mkv_pool *pool;
	char node[32], msg[256];
	int rc;

	if (nodes_freed_by_holder_only(__func__))
		return;
	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	mkv_pool_close(&pool);
	for (unsigned i = 0; i < 40; i++) {
		snprintf(node, sizeof(node), "w%02u", i);
		rc = writer_start(&c, node, msg, sizeof(msg));
		ck_assert_msg(rc == 0, "short-lived writer %u of 40 (node %s) could not open: %d (%s): "
				"%s", i, node, rc, mkv_strerror(rc), msg);
		writer_end(&c, i % 3 == 2 ? W_KILLED : W_CLOSE);
	}
	o.node = "fresh";
	rc = tu_open(tu_path, 0, &o, &pool);
	ck_assert_msg(rc == 0, "a new node after 40 short-lived ones: %d (%s): %s", rc,
			mkv_strerror(rc), mkv_errormsg());
	TU_OK(tu_put(pool, "fresh", 5, 100));
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_max_nodes_bounds_live_nodes)
{
	/*
	 * "a" holds the lease throughout: a period too long to lapse on a busy
	 * host, since a "b" that took the lease over and was killed would keep
	 * its node's entry until somebody took the lease (marukv.7).
	 */
	struct tu_opts o = { .node = "a", .lease_ms = 3000, .client_timeout_ms = NODE_TIMEOUT_MS,
			.max_clients = 64, .max_nodes = 2 };
	struct tu_child b = TU_CHILD_NONE, c = TU_CHILD_NONE;
	struct mkv_pool *pool;
	struct mkv_stat st;
	char msg[256];
	int rc;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(writer_start(&b, "b", msg, sizeof(msg)), 0);
		rc = writer_start(&c, "c", msg, sizeof(msg));
		writer_end(&c, W_CLOSE);
		ck_assert_msg(rc == MKV_E_USERS && strstr(msg, "node table") != NULL,
				"a third node while \"a\" and \"b\" live, max_nodes 2: %d (%s): \"%s\"; "
				"expected MKV_E_USERS, the message naming the node table", rc,
				mkv_strerror(rc), msg);
		tu_stat(pool, &st);
		ck_assert_msg(st.max_nodes == 2 && st.nodes == 2,
				"mkv_pool_stat with nodes \"a\" and \"b\" live, max_nodes 2: "
				"max_nodes %u nodes %u", st.max_nodes, st.nodes);
		/* "b" goes (closes, then is killed and has been dead a while): "c" may come */
		writer_end(&b, round == 0 ? W_CLOSE : W_KILLED);
		if (round == 1)
			tu_sleep_ms(4 * NODE_TIMEOUT_MS);
		nodes_await_one(pool);
		rc = writer_start(&c, "c", msg, sizeof(msg));
		ck_assert_msg(rc == 0, "node \"c\" after \"b\" %s: %d (%s): %s",
				round == 0 ? "closed" : "was killed", rc, mkv_strerror(rc), msg);
		writer_end(&c, W_CLOSE);
		nodes_await_one(pool);
	}
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_gc_reclaim_repairs_full_node_table)
{
	struct tu_opts o = { .node = "d00", .lease_ms = 100, .client_timeout_ms = NODE_TIMEOUT_MS,
			.max_clients = 64 };
	struct tu_child c = TU_CHILD_NONE;
	struct mkv_pool *pool;
	char node[32], msg[256], tool[] = MKV_TOOLS_DIR "/marukv-gc";
	pid_t pid;
	int rc;

	if (access(tool, X_OK) != 0) {
		fprintf(stderr, "%s: skipped, %s not built\n", __func__, tool);
		return;
	}
	if (nodes_freed_by_holder_only(__func__))
		return;
	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	mkv_pool_close(&pool);
	/* 32 nodes, all dead: the default table is full of them */
	for (unsigned i = 1; i < MKV_DEFAULT_MAX_NODES; i++) {
		snprintf(node, sizeof(node), "d%02u", i);
		rc = writer_start(&c, node, msg, sizeof(msg));
		ck_assert_msg(rc == 0, "writer %s: %d (%s): %s", node, rc, mkv_strerror(rc), msg);
		writer_end(&c, W_KILLED);
	}
	/* dead longer than the client timeout, by any clock */
	tu_sleep_ms(4 * NODE_TIMEOUT_MS);
	pid = tu_fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, STDOUT_FILENO);
		setenv("MARUKV_NODE", "gc", 1);
		execl(tool, tool, "reclaim", tu_path, (char *)NULL);
		_exit(127);
	}
	rc = tu_reap(pid, 60);
	ck_assert_msg(rc == 0, "marukv-gc reclaim on a pool whose node table is full of dead "
			"nodes exited with %d", rc);
	o.node = "fresh";
	rc = tu_open(tu_path, 0, &o, &pool);
	ck_assert_msg(rc == 0, "a new node after marukv-gc reclaim: %d (%s): %s", rc,
			mkv_strerror(rc), mkv_errormsg());
	TU_OK(tu_put(pool, "fresh", 5, 100));
	mkv_pool_close(&pool);
}
END_TEST

/* ---- a registry generation ahead of the lease record ---- */

/*
 * With no process on the pool, raise the lease generation stored in the
 * registry (meta: "generation", 8 bytes, host order) far above the lease
 * record's.  Returns the value written.
 */
static uint64_t
registry_generation_ahead(void)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = { 10, "generation" }, d;
	uint64_t gen;

	tu_registry_begin(tu_path, &env, &txn);
	dbi = tu_registry_table(txn, "meta");
	ck_assert_int_eq(mdb_get(txn, dbi, &k, &d), 0);
	ck_assert_uint_eq(d.mv_size, sizeof(gen));
	memcpy(&gen, d.mv_data, sizeof(gen));
	gen += 1ULL << 40;
	d = (MDB_val){ sizeof(gen), &gen };
	ck_assert_int_eq(mdb_put(txn, dbi, &k, &d, 0), 0);
	tu_registry_end(env, txn);
	return gen;
}

enum wop { OP_PUT, OP_DEL, OP_RECLAIM, OP_EVICT };
static const char *const wop_name[] = { "mkv_put", "mkv_del", "mkv_pool_reclaim",
		"mkv_pool_evict" };

struct boundres {
	int op;     /* enum wop */
	int stage;  /* 1: opened; 2: call returned; 3: closed */
	int open_rc, op_rc;
	double op_secs;
	char msg[256];
};

static int
bounded_writer(int cmd, int ev, void *arg)
{
	struct boundres *sh = arg;
	struct tu_opts o = { .node = "a" };
	struct mkv_reclaim rr;
	struct mkv_evict er;
	struct mkv_pool *pool;
	enum wop op = (enum wop)sh->op;
	double t;

	(void)cmd, (void)ev;
	sh->open_rc = tu_open(tu_path, 0, &o, &pool);
	snprintf(sh->msg, sizeof(sh->msg), "%s", mkv_errormsg());
	sh->stage = 1;
	if (sh->open_rc < 0)
		return 0;
	t = tu_now();
	switch (op) {
	case OP_PUT:
		sh->op_rc = tu_put(pool, "new", 3, 3 * PAGE);
		break;
	case OP_DEL:
		sh->op_rc = mkv_del(pool, "k", 1);
		break;
	case OP_RECLAIM:
		sh->op_rc = mkv_pool_reclaim(pool, 0, &rr);
		break;
	case OP_EVICT:
		sh->op_rc = mkv_pool_evict(pool, 50, 0, &er);
		break;
	}
	sh->op_secs = tu_now() - t;
	snprintf(sh->msg, sizeof(sh->msg), "%s", mkv_errormsg());
	sh->stage = 2;
	mkv_pool_close(&pool);
	sh->stage = 3;
	return 0;
}

static void
write_call_is_bounded(enum wop op)
{
	struct tu_opts o = { .node = "a", .lease_ms = 100 };
	struct boundres *sh = tu_shared(sizeof(*sh));
	struct tu_child c = TU_CHILD_NONE;
	struct mkv_verify vr;
	struct mkv_pool *pool;
	uint64_t gen;
	int rc;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	TU_OK(tu_put(pool, "k", 1, 2 * PAGE));
	TU_OK(tu_put(pool, "cold", 4, 2 * PAGE));
	mkv_pool_close(&pool);
	gen = registry_generation_ahead();

	sh->op = (int)op;
	tu_child_start(&c, bounded_writer, sh);
	for (int stage = 1; stage <= 3; stage++) {
		if (TU_UNTIL(sh->stage >= stage, BOUND))
			continue;
		tu_child_end(&c);
		ck_abort_msg("with the registry's lease generation %llu ahead of the lease record, "
				"%s did not return within %.0f s", (unsigned long long)gen,
				stage == 1 ? "mkv_pool_open" : stage == 2 ? wop_name[op] :
				"mkv_pool_close", BOUND);
	}
	rc = tu_reap(c.pid, BOUND);
	c.pid = -1;
	tu_child_end(&c);
	ck_assert_msg(sh->open_rc == 0 || sh->open_rc == MKV_E_CORRUPT,
			"mkv_pool_open = %d (%s): %s", sh->open_rc, mkv_strerror(sh->open_rc), sh->msg);
	ck_assert_msg(sh->open_rc != 0 || sh->op_rc == 0 || sh->op_rc == MKV_E_CORRUPT,
			"%s = %d (%s) after %.1f s: %s; expected success or MKV_E_CORRUPT", wop_name[op],
			sh->op_rc, mkv_strerror(sh->op_rc), sh->op_secs, sh->msg);
	/* no clean bill of health while the disagreement stands */
	TU_OK(tu_open(tu_path, MKV_RDONLY, &o, &pool));
	rc = mkv_pool_verify(pool, 0, &vr);
	mkv_pool_close(&pool);
	if (sh->open_rc == MKV_E_CORRUPT || sh->op_rc == MKV_E_CORRUPT)
		ck_assert_msg(rc == MKV_E_CORRUPT, "%s said MKV_E_CORRUPT, mkv_pool_verify %d",
				wop_name[op], rc);
	else
		ck_assert_msg(rc == 0, "after %s repaired the pool, mkv_pool_verify = %d: %s",
				wop_name[op], rc, vr.first_problem);
	tu_shared_free(sh, sizeof(*sh));
}

START_TEST(test_put_returns_when_registry_generation_is_ahead)
{
	write_call_is_bounded(OP_PUT);
}
END_TEST

START_TEST(test_del_returns_when_registry_generation_is_ahead)
{
	write_call_is_bounded(OP_DEL);
}
END_TEST

START_TEST(test_reclaim_returns_when_registry_generation_is_ahead)
{
	write_call_is_bounded(OP_RECLAIM);
}
END_TEST

START_TEST(test_evict_returns_when_registry_generation_is_ahead)
{
	write_call_is_bounded(OP_EVICT);
}
END_TEST

START_TEST(test_verify_reports_registry_generation_ahead)
{
	struct tu_opts o = { .node = "a", .lease_ms = 100 };
	struct mkv_verify vr;
	struct mkv_pool *pool;
	uint64_t gen;
	int rc;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	TU_OK(tu_put(pool, "k", 1, 2 * PAGE));
	mkv_pool_close(&pool);
	gen = registry_generation_ahead();
	TU_OK(tu_open(tu_path, MKV_RDONLY, &o, &pool));
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &vr);
	mkv_pool_close(&pool);
	ck_assert_msg(rc == MKV_E_CORRUPT && vr.problems > 0 && vr.first_problem[0],
			"mkv_pool_verify of a pool whose registry stores lease generation %llu, ahead "
			"of its lease record: %d (%s), %llu problems \"%s\"; expected MKV_E_CORRUPT",
			(unsigned long long)gen, rc, mkv_strerror(rc),
			(unsigned long long)vr.problems, vr.first_problem);
}
END_TEST

/* ---- a reader stopped inside a lookup ---- */

#define SNAPSHOT_MS 1000

/*
 * A reader stopped inside a lookup, as LMDB sees it: the child opens the
 * registry as the library does (@p arg: its name, in the pool's directory
 * or, in a non-coherent pool, in this host's lock directory, beside the
 * lock file the library uses), begins a read txn, says 's', holds the
 * txn SNAPSHOT_MS and ends it.
 */
static int
snapshot_holder(int cmd, int ev, void *arg)
{
	const char *path = arg;
	MDB_env *env;
	MDB_txn *txn;

	(void)cmd;
	if (mdb_env_create(&env) || mdb_env_set_mapsize(env, 1U << 20) ||
	    mdb_env_open(env, path, MDB_NOSUBDIR | MDB_NOTLS | MDB_RDONLY, 0600) ||
	    mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))
		return 1;
	tu_write_byte(ev, 's');
	tu_sleep_ms(SNAPSHOT_MS);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return 0;
}

START_TEST(test_writes_outlast_a_reader_stopped_in_a_lookup)
{
	struct tu_opts o = { .node = "a", .lease_ms = 5000, .registry_size = 1U << 20 };
	struct tu_child c = TU_CHILD_NONE;
	struct mkv_stat st;
	struct mkv_verify vr;
	struct mkv_pool *pool;
	char bad[512] = "", *reg;
	double t0, slowest = 0;
	int rc;

	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	for (unsigned i = 0; i < 40; i++) {
		char key[16];

		TU_OK(tu_put(pool, key, (size_t)snprintf(key, sizeof(key), "k%u", i), PAGE));
	}
	reg = tu_registry_name(pool);
	tu_child_start(&c, snapshot_holder, reg);
	tu_child_expect(&c, "the reader", 's', BOUND);
	/* each commit now takes fresh pages: 1 MiB of registry lasts ~100 */
	for (unsigned i = 0; i < 1000 && !bad[0]; i++) {
		char key[16];
		int n = snprintf(key, sizeof(key), "k%u", i % 40);

		t0 = tu_now();
		if ((rc = mkv_del(pool, key, (size_t)n)) || (rc = tu_put(pool, key, (size_t)n, PAGE)))
			snprintf(bad, sizeof(bad), "round %u (%s): %d (%s): %s", i, key, rc,
					mkv_strerror(rc), mkv_errormsg());
		if (tu_now() - t0 > slowest)
			slowest = tu_now() - t0;
	}
	rc = tu_reap(c.pid, BOUND);
	c.pid = -1;
	tu_child_end(&c);
	TU_OK(mkv_pool_stat(pool, &st));
	ck_assert_msg(!bad[0], "a write failed while a reader held a snapshot for %d ms, "
			"less than the lease period: %s", SNAPSHOT_MS, bad);
	ck_assert_msg(rc == 0, "the reader holding the snapshot ended with %d", rc);
	/* else the test did not test: the snapshot never filled the registry */
	ck_assert_msg(st.registry_used * 10 >= st.registry_size * 9 && slowest > 0.1,
			"the registry reached %llu of %llu bytes, the slowest write took %.3f s: "
			"the held snapshot did not fill it", (unsigned long long)st.registry_used,
			(unsigned long long)st.registry_size, slowest);
	TU_OK(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &vr));
	ck_assert_uint_eq(vr.entries, 40);
	mkv_pool_close(&pool);
	free(reg);
}
END_TEST

static Suite *
liveness_suite(void)
{
	Suite *s = suite_create("liveness");
	TCase *tc;

	tc = tcase_create("fork");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, test_close_in_forked_child_leaves_parent_intact);
	tcase_add_test(tc, test_forked_child_exiting_without_close_leaves_parent_intact);
	tcase_add_test(tc, test_close_in_forked_child_of_idle_reader_returns);
	suite_add_tcase(s, tc);

	tc = tcase_create("readers");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_reader_in_own_pid_namespace_keeps_its_view);
	tcase_add_test(tc, test_paused_reader_of_another_node_expires);
	tcase_add_test(tc, test_paused_reader_of_same_node_keeps_its_view);
	suite_add_tcase(s, tc);

	tc = tcase_create("nodes");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_node_table_does_not_fill_with_dead_nodes);
	tcase_add_test(tc, test_max_nodes_bounds_live_nodes);
	tcase_add_test(tc, test_gc_reclaim_repairs_full_node_table);
	suite_add_tcase(s, tc);

	tc = tcase_create("bounded");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 150);
	tcase_add_test(tc, test_verify_reports_registry_generation_ahead);
	tcase_add_test(tc, test_put_returns_when_registry_generation_is_ahead);
	tcase_add_test(tc, test_del_returns_when_registry_generation_is_ahead);
	tcase_add_test(tc, test_reclaim_returns_when_registry_generation_is_ahead);
	tcase_add_test(tc, test_evict_returns_when_registry_generation_is_ahead);
	tcase_add_test(tc, test_writes_outlast_a_reader_stopped_in_a_lookup);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(liveness_suite());
}
