/* SPDX-License-Identifier: MIT */
/*
 * check_sites.c -- one stale read at a time between emulated hosts
 * (t/hostemu.so) of a non-coherent pool: each test drives three hosts step
 * by step to a point where a reader's cache still holds a line that
 * another host has changed on the device since, and checks what the
 * reader makes of it.  With the library's invalidation or flush for that
 * line in place the reader sees the new value; with it left out
 * (HOSTEMU_SKIP, t/mutations.sh) it sees the old one and the test fails.
 * No spontaneous write-backs (HOSTEMU_NOISE is 0): a line is refreshed
 * only where the library says so, whatever the timing.
 *
 * The tests name behaviours, not sites: what is read stale, by whom.
 * Each host is this program again (argv[1] == "--host"), as in
 * t/check_hosts.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "testutil.h"
#include "layout.h"

#define KEYS 24U
#define DATA_PAGES (TU_DATA_SIZE / TU_PAGE_SIZE)
#define LEASE_MS 200U
/* long enough that a host starved of CPU for a while is not judged dead */
#define CLIENT_TIMEOUT_MS 2000U
/* a client timeout longer than any test: heartbeats write back nothing */
#define SLOW_CLIENT_TIMEOUT_MS 120000U
/* a lease period whose quarter, the longest a holder sleeps, outlasts a request's wait */
#define SLOW_LEASE_MS 60000U
/* three hosts fill the pool: a fourth client needs a slot one of them freed */
#define MAX_CLIENTS 3U
/* and the node table: a fourth host needs the entry of a host whose clients left */
#define MAX_NODES 3U

/* ===================================================================== */
/* The host process                                                      */

static struct mkv_pool *hpool;
static struct mkv_view hview;
static struct mkv_buf hbuf;

/*
 * Pages granted to no claim that stands: all those granted, less those of
 * each client mkv_pool_clients() lists (granted to its claim).
 */
static int
void_pages(long long *out)
{
	struct mkv_client c[2 * MAX_CLIENTS];
	struct mkv_stat st;
	size_t n;
	int rc = mkv_pool_stat(hpool, &st);

	if (rc || (rc = mkv_pool_clients(hpool, c, 2 * MAX_CLIENTS, &n)))
		return rc;
	*out = (long long)st.pages_granted;
	for (size_t i = 0; i < n && i < 2 * MAX_CLIENTS; i++)
		*out -= (long long)c[i].pages_granted;
	return 0;
}

/* One field of mkv_pool_stat() by name. */
static int
stat_field(const char *name, long long *out)
{
	struct mkv_stat st;
	int rc = mkv_pool_stat(hpool, &st);

	if (rc)
		return rc;
	if (strcmp(name, "holder") == 0)
		*out = st.lease_holder_pid;
	else if (strcmp(name, "generation") == 0)
		*out = (long long)st.lease_generation;
	else if (strcmp(name, "nodes") == 0)
		*out = st.nodes;
	else if (strcmp(name, "clients") == 0)
		*out = st.clients;
	else if (strcmp(name, "used") == 0)
		*out = (long long)st.pages_used;
	else if (strcmp(name, "hits") == 0)
		*out = (long long)st.hits;
	else if (strcmp(name, "quarantined") == 0)
		*out = (long long)st.pages_quarantined;
	else if (strcmp(name, "granted") == 0)
		*out = (long long)st.pages_granted;
	else if (strcmp(name, "logged") == 0)
		*out = (long long)st.registry_fresh_logged;
	else if (strcmp(name, "whole") == 0)
		*out = (long long)st.registry_fresh_whole;
	else if (strcmp(name, "void") == 0)
		return void_pages(out);
	else
		return -EINVAL;
	return 0;
}

/*
 * What mkv_pool_clients() says of the client with this pid: "alive" 1 or
 * 0, "node" the number N of its node's name hN (0 for another name); -1
 * if it is not listed.
 */
static int
client_field(const char *name, long long pid, long long *out)
{
	struct mkv_client c[MAX_CLIENTS];
	size_t n;
	int rc = mkv_pool_clients(hpool, c, MAX_CLIENTS, &n);

	if (rc)
		return rc;
	*out = -1;
	for (size_t i = 0; i < n && i < MAX_CLIENTS; i++) {
		if (c[i].pid != pid)
			continue;
		if (strcmp(name, "alive") == 0)
			*out = c[i].alive;
		else if (strcmp(name, "node") == 0)
			*out = c[i].node[0] == 'h' ? atoi(c[i].node + 1) : 0;
		else
			return -EINVAL;
	}
	return 0;
}

/*
 * Commands, one a line, answered "= value" or "! why":
 *   open [T [L [C]]] open (creating) the pool as this host's node; a
 *                   client timeout of T ms, a lease period of L ms and C
 *                   client slots if it creates it
 *   pid             this process's pid
 *   put P FROM N    publish keys P<FROM> .. P<FROM+N-1> (values of a page at
 *                   most): how many succeeded
 *   check P FROM N  how many of them read back whole
 *   large P I N     publish key P<I> with a value of N pages: 1
 *   alloc N         mkv_alloc() a buffer of N pages and keep it: 0
 *   stat FIELD      holder (pid), generation, nodes, clients, used pages, hits,
 *                   quarantined or granted pages, pages granted to no claim
 *                   that stands (void), snapshots made fresh from the log
 *                   (logged) or whole
 *   client F PID    client_field() F of the client PID
 *   evict PCT       mkv_pool_evict() to PCT percent free: keys evicted
 *   reclaim         mkv_pool_reclaim(): dead clients reclaimed
 *   view P I        get P<I> and keep the view: 0
 *   release         release the view kept
 *   del P I         delete P<I>
 *   hold P I        mkv_hold() P<I>: 1 if held, 0 if not there, -1 if it
 *                   timed out waiting for an eviction
 *   unhold P I      mkv_unhold() P<I>
 *   close           close the pool
 */
static void
host_cmd(char *line, char *out, size_t size)
{
	const char *host = getenv("HOSTEMU_HOST");
	struct tu_opts o = { .node = host, .host = host, .lease_ms = LEASE_MS,
			.client_timeout_ms = CLIENT_TIMEOUT_MS, .max_clients = MAX_CLIENTS,
			.max_nodes = MAX_NODES };
	char cmd[16] = "", arg[16] = "", key[64];
	long long from = 0, n = 0, done = 0;
	struct mkv_evict ev;
	struct mkv_reclaim rep;
	size_t klen, len;
	int rc = 0;

	sscanf(line, "%15s %15s %lld %lld", cmd, arg, &from, &n);
	if (strcmp(cmd, "open") == 0) {
		if (*arg)
			o.client_timeout_ms = (uint32_t)atoi(arg);
		if (from)
			o.lease_ms = (uint32_t)from;
		if (n)
			o.max_clients = (uint32_t)n;
		rc = tu_open(getenv("HOSTEMU_POOL"), MKV_CREATE, &o, &hpool);
	} else if (strcmp(cmd, "pid") == 0) {
		done = getpid();
	} else if (strcmp(cmd, "put") == 0) {
		done = tu_host_put(hpool, arg, from, n, TU_PAGE_SIZE, &rc);
	} else if (strcmp(cmd, "check") == 0) {
		done = tu_host_check(hpool, arg, from, n, TU_PAGE_SIZE);
	} else if (strcmp(cmd, "large") == 0) {
		klen = tu_host_key(key, arg, from, TU_PAGE_SIZE, &len);
		done = (rc = tu_put(hpool, key, klen, (size_t)n * TU_PAGE_SIZE)) == 0;
	} else if (strcmp(cmd, "stat") == 0) {
		rc = stat_field(arg, &done);
	} else if (strcmp(cmd, "client") == 0) {
		rc = client_field(arg, from, &done);
	} else if (strcmp(cmd, "alloc") == 0) {
		rc = mkv_alloc(hpool, (size_t)atoi(arg) * TU_PAGE_SIZE, &hbuf);
	} else if (strcmp(cmd, "view") == 0) {
		klen = tu_host_key(key, arg, from, TU_PAGE_SIZE, &len);
		rc = mkv_get(hpool, key, klen, &hview);
	} else if (strcmp(cmd, "release") == 0) {
		rc = mkv_release(hpool, &hview);
	} else if (strcmp(cmd, "del") == 0) {
		klen = tu_host_key(key, arg, from, TU_PAGE_SIZE, &len);
		rc = mkv_del(hpool, key, klen);
	} else if (strcmp(cmd, "hold") == 0 || strcmp(cmd, "unhold") == 0) {
		struct mkv_key k = { key, tu_host_key(key, arg, from, TU_PAGE_SIZE, &len) };
		size_t held = 0;

		rc = cmd[0] == 'h' ? mkv_hold(hpool, &k, 1, &held) : mkv_unhold(hpool, &k, 1);
		done = rc == MKV_E_TIMEDOUT ? -1 : (long long)held;
		rc = rc == MKV_E_TIMEDOUT ? 0 : rc;
	} else if (strcmp(cmd, "evict") == 0) {
		if ((rc = mkv_pool_evict(hpool, (unsigned)atoi(arg), 0, &ev)) == 0)
			done = (long long)ev.keys;
	} else if (strcmp(cmd, "reclaim") == 0) {
		if ((rc = mkv_pool_reclaim(hpool, 0, &rep)) == 0)
			done = rep.clients;
	} else if (strcmp(cmd, "close") == 0) {
		mkv_pool_close(&hpool);
	} else {
		snprintf(out, size, "! unknown command %s", cmd);
		return;
	}
	tu_host_answer(out, size, cmd, rc, done);
}

/* ===================================================================== */
/* The test's side                                                       */

/* Host @p name of a non-coherent pool, quiet caches; "open" with @p arg. */
static void
host_start_with(struct tu_host *h, const char *name, const char *arg)
{
	tu_host_quiet(h, "check_sites", name, NULL, arg);
}

static void
host_start(struct tu_host *h, const char *name)
{
	host_start_with(h, name, "");
}

static void
hosts_start(struct tu_host *h, unsigned n)
{
	static const char *const names[] = { "h1", "h2", "h3" };

	for (unsigned i = 0; i < n; i++)
		host_start(&h[i], names[i]);
}

static void
hosts_end(struct tu_host *h, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (h[i].to) {
			ck_assert_int_eq(tu_host_do(&h[i], "close"), 0);
			tu_host_end(&h[i]);
			h[i].to = NULL;
		}
	}
}

/*
 * The lease record: a host that only reads, and has cached the record
 * naming the first holder, reports the second holder (another host's)
 * in its statistics after a takeover it took no part in.
 */
START_TEST(test_a_bystander_reports_another_hosts_takeover)
{
	struct tu_host h[3];
	long long gen;

	hosts_start(h, 3);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "stat holder"), h[0].pid);
	gen = tu_host_do(&h[2], "stat generation");
	tu_host_kill(&h[0]);
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "stat holder"), h[1].pid);
	ck_assert_int_eq(tu_host_do(&h[2], "stat holder"), h[1].pid);
	ck_assert_int_gt(tu_host_do(&h[2], "stat generation"), gen);
	hosts_end(h, 3);
}
END_TEST

/*
 * The node table: the first host, which cached the table with itself
 * alone in it, counts the hosts that joined since.
 */
START_TEST(test_a_host_counts_the_nodes_that_joined_after_it)
{
	struct tu_host h[3];

	hosts_start(h, 1);
	ck_assert_int_eq(tu_host_do(&h[0], "stat nodes"), 1);
	host_start(&h[1], "h2");
	host_start(&h[2], "h3");
	ck_assert_int_eq(tu_host_do(&h[0], "stat nodes"), 3);
	ck_assert_int_eq(tu_host_do(&h[1], "stat nodes"), 3);
	hosts_end(h, 3);
}
END_TEST

/*
 * The registry's metas: a host that read the registry keeps up with two
 * commits of another host's holder in a row, so that each of LMDB's two
 * meta pages in turn holds the newest snapshot.
 */
START_TEST(test_a_reader_follows_commits_through_both_metas)
{
	struct tu_host h[2];

	hosts_start(h, 2);
	for (unsigned i = 0; i < 4; i++) {
		ck_assert_int_eq(tu_host_do(&h[0], "put m %u 1", i), 1);
		ck_assert_int_eq(tu_host_do(&h[1], "check m 0 %u", i + 1), i + 1);
	}
	hosts_end(h, 2);
}
END_TEST

/*
 * A reader on h2 following the commits of h1's holder one by one drops
 * from its caches only the registry pages the holder logged for each (a
 * registry dropped whole each time is correct, but its cost grows with the
 * registry); one that fell further behind than the log reaches drops the
 * whole registry, and reads right.
 */
START_TEST(test_a_reader_takes_the_pages_of_each_commit_from_the_log)
{
	struct tu_host h[2];
	long long logged, whole, whole2;

	hosts_start(h, 2);
	for (unsigned i = 0; i < 12; i++) {
		ck_assert_int_eq(tu_host_do(&h[0], "put g %u 1", i), 1);
		ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", i + 1), i + 1);
	}
	logged = tu_host_do(&h[1], "stat logged");
	whole = tu_host_do(&h[1], "stat whole");
	ck_assert_int_ge(logged, 10);
	ck_assert_int_le(whole, 2);
	ck_assert_int_eq(tu_host_do(&h[0], "put g 12 %u", MKV_WLOG_RECS + 1), MKV_WLOG_RECS + 1);
	ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", 13 + MKV_WLOG_RECS), 13 + MKV_WLOG_RECS);
	whole2 = tu_host_do(&h[1], "stat whole");
	ck_assert_int_gt(whole2, whole);
	hosts_end(h, 2);
}
END_TEST

/*
 * Values a, then b published by the holder on h1, a reader on h2 that
 * opened before b (@p early) or after it, and reads a again after b: the
 * holder's eviction of about half the pool must take b before any of a.
 * Ages move by published pages, so b is many times the pages of a.
 */
static void
eviction_after_a_read(bool early)
{
	struct tu_host h[3];
	long long used;

	hosts_start(h, 1);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	if (early)
		host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[0], "put b 0 %u", 8 * KEYS), 8 * KEYS);
	if (!early)
		host_start(&h[1], "h2");
	host_start(&h[2], "h3");
	ck_assert_int_eq(tu_host_do(&h[1], "check a 0 %u", KEYS), KEYS);
	used = tu_host_do(&h[0], "stat used");
	ck_assert_int_gt(tu_host_do(&h[0], "evict %lld", 100 - used * 100 / DATA_PAGES / 2), 0);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 %u", KEYS), KEYS);
	ck_assert_int_lt(tu_host_do(&h[2], "check b 0 %u", 8 * KEYS), 8 * KEYS);
	hosts_end(h, 3);
}

/*
 * Access hints: values read on another host are the last to go when the
 * holder evicts (the reader writes its hints back, the holder drops its
 * copy of them before it sweeps).
 */
START_TEST(test_eviction_spares_what_another_host_read)
{
	eviction_after_a_read(false);
}
END_TEST

/*
 * Holds, between hosts: the holder on h1 evicts everything but the keys
 * h2 holds.  Each eviction caches h2's hold page as it was (nothing held,
 * then one bit), so one without the invalidation of the header or of the
 * bits takes the key h2 held since; h2's unhold must reach the holder
 * too, or the key stays for good.
 */
START_TEST(test_eviction_spares_what_another_host_holds)
{
	struct tu_host h[2];
	char arg[32];

	/* a lease of a minute: no reaping pass reads h2's claim between the steps */
	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS);
	host_start_with(&h[0], "h1", arg);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[0], "evict 100"), KEYS);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "hold a %u", KEYS - 1), 1);
	ck_assert_int_gt(tu_host_do(&h[0], "evict 100"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "check a %u 1", KEYS - 1), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS - 1), KEYS - 1);
	ck_assert_int_eq(tu_host_do(&h[1], "hold a 0"), 1);
	ck_assert_int_gt(tu_host_do(&h[0], "evict 100"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "check a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "check a %u 1", KEYS - 1), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "check a 1 %u", KEYS - 2), 0);
	ck_assert_int_eq(tu_host_do(&h[1], "unhold a %u", KEYS - 1), 0);
	ck_assert_int_gt(tu_host_do(&h[0], "evict 100"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "check a %u 1", KEYS - 1), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "check a 0 1"), 1);
	/*
	 * h2's next client, in the same slot, starts with no holds: the bits
	 * of the last one are cleared on the device, and the holder, which
	 * read the last one's claim, reads the new one's
	 */
	ck_assert_int_eq(tu_host_do(&h[1], "close"), 0);
	ck_assert_int_eq(tu_host_do(&h[1], "open"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 1 %u", KEYS - 1), KEYS - 1);
	ck_assert_int_eq(tu_host_do(&h[1], "hold a 1"), 1);
	ck_assert_int_gt(tu_host_do(&h[0], "evict 100"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "check a 1 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "check a 0 1"), 0);
	hosts_end(h, 2);
}
END_TEST

/*
 * h1, the holder, stopped inside an eviction of every key but a0, which
 * h2 holds (so h2 has read the sweep counter before): at the first site
 * named by @p then after the sweep began; h1 opens with @p arg.
 */
static void
eviction_stopped(struct tu_host *h, const char *then, const char *arg)
{
	char stop[64];

	snprintf(stop, sizeof(stop), "HOSTEMU_STOP=hold.c:sweep_begun>%s", then);
	tu_host_quiet(&h[0], "check_sites", "h1", stop, arg);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[1], "hold a 0"), 1);
	tu_host_send(&h[0], "evict 100");
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 30), 0);
}

/*
 * A hold while another host's holder is inside an eviction (stopped there,
 * right after it marked the sweep begun): the hold waits for it a lease
 * period and gives up, instead of trusting a lookup that the eviction may
 * yet undo; a look at the counter that drops nothing reads the value h2
 * read before.
 */
START_TEST(test_a_hold_waits_out_another_hosts_eviction)
{
	struct tu_host h[2];

	eviction_stopped(h, "hold.c:", "");
	ck_assert_int_eq(tu_host_do(&h[1], "hold a 1"), -1);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[0]), KEYS - 1);
	ck_assert_int_eq(tu_host_do(&h[1], "hold a 1"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "check a 0 1"), 1);
	hosts_end(h, 2);
}
END_TEST

/*
 * A hold while another host's holder is inside an eviction that has
 * gathered the holds already (stopped in the sweep), let go a moment
 * later: the hold waits until the eviction has committed and finds the
 * key gone, instead of holding a key the eviction deletes or giving up.
 */
START_TEST(test_a_hold_waits_for_another_hosts_eviction_to_commit)
{
	struct tu_host h[2];
	char arg[32];

	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, 4000U);
	eviction_stopped(h, "evict.c:", arg);
	tu_host_send(&h[1], "hold a 1");
	tu_sleep_ms(200);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[0]), KEYS - 1);
	ck_assert_int_eq(tu_host_recv(&h[1]), 0);
	hosts_end(h, 2);
}
END_TEST

/*
 * A holder killed inside an eviction leaves the sweep begun: the next
 * holder, on another host, ends it with its first txn, and holds work
 * again (the killed one's txn never committed: the key is there).
 */
START_TEST(test_a_new_holder_ends_a_dead_holders_eviction)
{
	struct tu_host h[2];

	eviction_stopped(h, "hold.c:", "");
	tu_host_kill(&h[0]);
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "hold a 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "stat holder"), h[1].pid);
	ck_assert_int_eq(tu_host_do(&h[1], "close"), 0);
	tu_host_end(&h[1]);
}
END_TEST

/*
 * An idle client of another host stays alive by its heartbeat alone: for
 * two client timeouts it calls nothing, and the holder, which reaps dead
 * clients once a lease period, neither revokes its slot nor lists it dead.
 */
START_TEST(test_an_idle_client_on_another_host_stays_alive)
{
	struct tu_host h[2];

	hosts_start(h, 2);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	tu_sleep_ms(2 * CLIENT_TIMEOUT_MS);
	ck_assert_int_eq(tu_host_do(&h[0], "client alive %d", h[1].pid), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "stat clients"), 2);
	hosts_end(h, 2);
}
END_TEST

/*
 * The clock of ages, between hosts: a reader that opened early, when the
 * clock was young, dates what it reads by the holder's clock as it is
 * now, so what it read is young.
 */
START_TEST(test_a_reader_dates_its_reads_by_the_holders_clock)
{
	eviction_after_a_read(true);
}
END_TEST

/*
 * A client's pin and its count of requests posted reach the holder when
 * stored, not with its next heartbeat: with a client timeout of minutes
 * (heartbeats a quarter of that apart), a write of another host is
 * answered at once, and the value a view of another host shows stays
 * quarantined after its deletion for as long as the view is out.
 */
START_TEST(test_a_clients_words_reach_the_holder_between_heartbeats)
{
	struct tu_host h[2];
	char arg[16];
	double end;

	snprintf(arg, sizeof(arg), "%u", SLOW_CLIENT_TIMEOUT_MS);
	host_start_with(&h[0], "h1", arg);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	/* the holder's answer long before h2's next heartbeat */
	end = tu_now() + SLOW_CLIENT_TIMEOUT_MS / 4000.0;
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 1"), 1);
	ck_assert(tu_now() < end);
	ck_assert_int_eq(tu_host_do(&h[1], "view a 0"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "del a 0"), 0);
	/* commits and lease periods go by: the holder frees what no pin holds */
	ck_assert_int_eq(tu_host_do(&h[0], "put c 0 1"), 1);
	tu_sleep_ms(4 * LEASE_MS);
	ck_assert_int_eq(tu_host_do(&h[0], "put c 1 1"), 1);
	ck_assert_int_gt(tu_host_do(&h[0], "stat quarantined"), 0);
	ck_assert_int_eq(tu_host_do(&h[1], "release"), 0);
	hosts_end(h, 2);
}
END_TEST

/*
 * The page table: a host that counted the pages before another host's
 * holder granted, used, quarantined and freed some counts them as that
 * holder does, asked first (the holder's own count writes its lines back).
 * The value deleted is the first published: its pages are not granted
 * again by the next publish.
 */
START_TEST(test_a_host_counts_the_pages_another_hosts_holder_moved)
{
	struct tu_host h[2];
	long long used, quarantined;

	hosts_start(h, 2);
	ck_assert_int_eq(tu_host_do(&h[1], "stat used"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[0], "del a 0"), 0);
	/* with no pin held, this commit frees what the delete quarantined */
	ck_assert_int_eq(tu_host_do(&h[0], "put b 0 1"), 1);
	used = tu_host_do(&h[1], "stat used");
	quarantined = tu_host_do(&h[1], "stat quarantined");
	ck_assert_int_gt(used, 0);
	ck_assert_int_eq(used, tu_host_do(&h[0], "stat used"));
	ck_assert_int_eq(quarantined, tu_host_do(&h[0], "stat quarantined"));
	hosts_end(h, 2);
}
END_TEST

/*
 * Request entries: values a host asks another host's holder to publish
 * are read back whole, under their keys, on a third host.
 */
START_TEST(test_a_holder_publishes_what_another_host_asked)
{
	struct tu_host h[3];

	hosts_start(h, 3);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "put c 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "check c 0 %u", KEYS), KEYS);
	hosts_end(h, 3);
}
END_TEST

/*
 * The doorbells: with a lease period of a minute (a holder idle for a
 * quarter of that between its looks at the ring), a host's requests to
 * another host's holder are answered at once, each: the client's ring and
 * its count of requests posted reach the holder as soon as stored.
 */
START_TEST(test_a_holder_answers_another_host_at_once)
{
	struct tu_host h[2];
	char arg[32];
	double end;

	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS);
	host_start_with(&h[0], "h1", arg);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	/* half the time the holder may sleep between looks, for them all */
	end = tu_now() + SLOW_LEASE_MS / 4000.0 / 2;
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 8"), 8);
	ck_assert(tu_now() < end);
	ck_assert_int_eq(tu_host_do(&h[0], "check b 0 8"), 8);
	hosts_end(h, 2);
}
END_TEST

/*
 * The answers: a holder stopped right after it wrote the answer to
 * another host's request, before it counts it, has answered: the client
 * gets its answer while the holder stays stopped (a lease of a minute: no
 * other host takes over meanwhile).
 */
START_TEST(test_a_holder_stopped_right_after_answering_has_answered)
{
	struct tu_host h[2];
	char arg[32];
	int came;

	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS);
	tu_host_quiet(&h[0], "check_sites", "h1", "HOSTEMU_STOP=ring.c:answers_counted", arg);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	/* one request (a put is two: a grant, then the publish) */
	tu_host_send(&h[1], "del a 0");
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 30), 0);
	came = tu_host_ready(&h[1], 10);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_msg(came, "h2 got no answer from the holder stopped after answering");
	ck_assert_int_eq(tu_host_recv(&h[1]), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "check a 0 1"), 0);
	hosts_end(h, 2);
}
END_TEST

/*
 * The clock of ages as a commit leaves it: values read on another host
 * right after one value of half the pool moved the clock by 64 ticks are
 * dated by the clock as that commit left it, younger than that value,
 * which eviction takes alone.  The reader opens after that value was
 * published, so that its hint is in the reader's copy of the hints.
 */
START_TEST(test_a_read_right_after_a_commit_is_dated_by_it)
{
	struct tu_host h[3];

	hosts_start(h, 1);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[0], "large c 0 %llu", DATA_PAGES / 2), 1);
	host_start(&h[1], "h2");
	host_start(&h[2], "h3");
	ck_assert_int_eq(tu_host_do(&h[1], "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[0], "evict 59"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 %u", KEYS), KEYS);
	hosts_end(h, 3);
}
END_TEST

/*
 * Capped access hints: a value read on another host right after the
 * holder capped the hints of it and its unread neighbours (at tick 192,
 * those more than 160 ticks old) is the young one when the holder next
 * sweeps, which takes old neighbours instead.  Six values of a quarter of
 * the pool, each deleted, move the clock 192 ticks; the value read is the
 * first the hand comes to.
 */
START_TEST(test_a_read_beside_capped_hints_survives_eviction)
{
	struct tu_host h[3];

	hosts_start(h, 1);
	ck_assert_int_eq(tu_host_do(&h[0], "put z 0 %u", KEYS), KEYS);
	host_start(&h[1], "h2");
	host_start(&h[2], "h3");
	for (unsigned i = 0; i < 6; i++) {
		ck_assert_int_eq(tu_host_do(&h[0], "large c %u %llu", i, DATA_PAGES / 4), 1);
		ck_assert_int_eq(tu_host_do(&h[0], "del c %u", i), 0);
	}
	ck_assert_int_eq(tu_host_do(&h[1], "check z 0 1"), 1);
	ck_assert_int_gt(tu_host_do(&h[0], "evict 99"), 0);
	ck_assert_int_eq(tu_host_do(&h[2], "check z 0 1"), 1);
	ck_assert_int_lt(tu_host_do(&h[2], "check z 1 %u", KEYS - 1), KEYS - 1);
	hosts_end(h, 3);
}
END_TEST

/*
 * The page table a new holder rebuilt: a process killed with pages granted
 * leaves them to a new holder of its host, which takes them back when it
 * rebuilds the table (it knows the process dead); a host that opens right
 * after counts them free, as the new holder does.  A lease of a minute:
 * the new holder's first reclamation pass, which would write its table
 * back as well, is that far away.  The other host closes first: the last
 * one to close is the holder, and the dead process's claim stands for
 * another host until the client timeout of two minutes.
 */
START_TEST(test_a_new_holder_frees_a_dead_writers_pages_for_every_host)
{
	struct tu_host h[3];
	char arg[32];

	/* two processes of h1 (h[0] and h[2]): a slot each */
	snprintf(arg, sizeof(arg), "%u %u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS,
			2 * MAX_CLIENTS);
	host_start_with(&h[0], "h1", arg);
	host_start(&h[2], "h1");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "alloc 32"), 0);
	ck_assert_int_ge(tu_host_do(&h[0], "stat granted"), 32);
	tu_host_kill(&h[0]);
	/* one request, no grant: the table as rebuilt, and a's pages quarantined */
	ck_assert_int_eq(tu_host_do(&h[2], "del a 0"), 0);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[1], "stat granted"), 0);
	/* asked last: its own count writes the table back */
	ck_assert_int_eq(tu_host_do(&h[2], "stat holder"), h[2].pid);
	ck_assert_int_eq(tu_host_do(&h[2], "stat granted"), 0);
	hosts_end(h, 3);
}
END_TEST

/*
 * The client slots' counters: a host that counted the hits before
 * another host read counts that host's hits after.
 */
START_TEST(test_a_host_counts_another_hosts_hits)
{
	struct tu_host h[3];

	hosts_start(h, 3);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "stat hits"), 0);
	ck_assert_int_eq(tu_host_do(&h[1], "check a 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[2], "stat hits"), KEYS);
	hosts_end(h, 3);
}
END_TEST

/*
 * A view of a client that opened on another host after the holder took
 * the lease (and last looked at the client slots), with a lease of a
 * minute (no reclamation pass in between, which looks at every slot) and
 * no request of that client's (whose owner word the holder would look at):
 * the holder, whose commits go by, keeps the value the view shows,
 * deleted, in quarantine.
 */
START_TEST(test_a_view_of_a_client_that_came_after_the_holder_holds)
{
	struct tu_host h[2];
	char arg[32];

	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS);
	host_start_with(&h[0], "h1", arg);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[1], "view a 0"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "del a 0"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "put c 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "put c 1 1"), 1);
	ck_assert_int_gt(tu_host_do(&h[0], "stat quarantined"), 0);
	ck_assert_int_eq(tu_host_do(&h[1], "release"), 0);
	hosts_end(h, 2);
}
END_TEST

/*
 * The stop of the three tests below: the holder (or new holder) on h1
 * stops right before its look at one slot's owner word, with its host's
 * caches kept as they were (HOSTEMU_STOP=B!), so that the slot's line
 * stays as its look at every slot's owner line (as its commit begins, or
 * as it takes the lease) left it.  Meanwhile @p client, on h2, whose slot
 * the holder is about to judge, dies, and h2's next client, @p next, takes
 * the slot over: a claim of another incarnation.  Then the holder goes on
 * (a holder left stopped by a failure dies with the test: tu_fork()).
 */
static void
slot_changes_hands_while_stopped(struct tu_host *holder, struct tu_host *client,
		struct tu_host *next)
{
	int rc = tu_wait_stopped(holder->pid, 15);

	if (rc == 0) {
		tu_host_kill(client);
		host_start(next, "h2");
	}
	ck_assert_int_eq(kill(holder->pid, SIGCONT), 0);
	ck_assert_msg(rc == 0, "the holder did not stop");
}

/*
 * A request of a client that died with it pending, whose slot another
 * client took over between the holder's look at every slot and its
 * judgement of that request: refused (its claim is gone), not applied
 * for the dead claim.  The pages it asked for are granted to nobody.
 */
START_TEST(test_a_holder_refuses_a_request_whose_claim_was_taken_over)
{
	struct tu_host h[3];
	char arg[32];

	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS);
	tu_host_quiet(&h[0], "check_sites", "h1", "HOSTEMU_STOP=:requester_owner!", arg);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	tu_host_send(&h[1], "alloc 4");
	slot_changes_hands_while_stopped(&h[0], &h[1], &h[2]);
	/* answered after the dead client's request, which is judged by then */
	ck_assert_int_eq(tu_host_do(&h[2], "put b 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "stat void"), 0);
	hosts_end(h, 3);
}
END_TEST

/*
 * The pages of a client that died, whose slot another client took over
 * between the holder's look at every slot and its look at the slot of
 * those pages, as a third host's client leaves (which frees the void
 * grants): freed, not kept for the dead claim.
 */
START_TEST(test_a_leaving_client_frees_the_pages_of_a_claim_taken_over)
{
	struct tu_host h[4];
	char arg[32];

	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS);
	tu_host_quiet(&h[0], "check_sites", "h1", "HOSTEMU_STOP=:granted_owner!", arg);
	host_start(&h[1], "h2");
	host_start(&h[3], "h3");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "alloc 4"), 0);
	tu_host_send(&h[3], "close");
	slot_changes_hands_while_stopped(&h[0], &h[1], &h[2]);
	ck_assert_int_eq(tu_host_recv(&h[3]), 0);
	tu_host_end(&h[3]);
	ck_assert_int_eq(tu_host_do(&h[0], "stat void"), 0);
	hosts_end(h, 3);
}
END_TEST

/*
 * A new holder's rebuilt page table, with the pages of a client that
 * died, whose slot another client took over between the new holder's
 * look at every slot as it took the lease and its look at the slot of
 * those pages: free, not granted to the dead claim.  Two slots a node:
 * a second client of h2 keeps the other one, so that the next client
 * takes the dead one's over.
 */
START_TEST(test_a_new_holder_frees_the_pages_of_a_claim_taken_over)
{
	struct tu_host h[5];
	char arg[32];

	snprintf(arg, sizeof(arg), "%u %u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS,
			2 * MAX_CLIENTS);
	host_start_with(&h[0], "h1", arg);
	tu_host_quiet(&h[1], "check_sites", "h1", "HOSTEMU_STOP=:grant_owner!", "");
	host_start(&h[2], "h2");
	host_start(&h[3], "h2");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "alloc 4"), 0);
	tu_host_kill(&h[0]);
	/*
	 * h2's readers at the newest snapshot: the new holder does not wait
	 * for their snapshots of their opens to go idle (a quarter period)
	 */
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[3], "check a 0 1"), 1);
	/* the lease is free: h[1] takes it, and rebuilds the table */
	tu_host_send(&h[1], "put b 0 1");
	slot_changes_hands_while_stopped(&h[1], &h[2], &h[4]);
	ck_assert_int_eq(tu_host_recv(&h[1]), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "stat void"), 0);
	/* the holder last: for another host, the dead claims stand for minutes */
	hosts_end(h + 3, 2);
	hosts_end(h + 1, 1);
}
END_TEST

/*
 * The holder's line of a slot, its count of answers beside the revoked
 * word: a holder on h1 that answered a client of h2 writes the line back,
 * so that once a holder on h3 revoked that client's claim (dead), the
 * next look from h1 at the line (which writes back first what h1 holds
 * of it dirty) does not undo the revocation.  The holder on h1 is killed
 * as it opens its next write window, before it looks at the line again;
 * a second process of h1 (two slots a node) looks last.
 */
START_TEST(test_a_revocation_by_another_hosts_holder_stands)
{
	struct tu_host h[4];
	char arg[32];
	pid_t dead;
	int rc;

	snprintf(arg, sizeof(arg), "%u %u %u", CLIENT_TIMEOUT_MS, LEASE_MS, 2 * MAX_CLIENTS);
	tu_host_quiet(&h[0], "check_sites", "h1", "HOSTEMU_STOP=:answers_counted>:window_open",
			arg);
	host_start(&h[1], "h1");
	host_start(&h[2], "h2");
	host_start(&h[3], "h3");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "alloc 4"), 0);
	rc = tu_wait_stopped(h[0].pid, 15);
	tu_host_kill(&h[0]);
	ck_assert_msg(rc == 0, "the holder did not stop");
	/* the lease expires: h3 takes it */
	ck_assert_int_eq(tu_host_do(&h[3], "put c 0 1"), 1);
	dead = h[2].pid;
	tu_host_kill(&h[2]);
	/*
	 * A client timeout, then the holder on h3 has revoked the claim (its
	 * reaping pass may come first: how many this reclaims is no matter)
	 */
	tu_host_do(&h[3], "reclaim");
	ck_assert_int_eq(tu_host_do(&h[1], "client alive %d", dead), -1);
	ck_assert_int_eq(tu_host_do(&h[3], "client alive %d", dead), -1);
	hosts_end(h + 1, 1);
	hosts_end(h + 3, 1);
}
END_TEST

static Suite *
sites_suite(void)
{
	Suite *s = suite_create("sites");
	TCase *tc = tcase_create("sites");

	tcase_add_checked_fixture(tc, tu_hosts_setup, tu_hosts_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_a_bystander_reports_another_hosts_takeover);
	tcase_add_test(tc, test_a_host_counts_the_nodes_that_joined_after_it);
	tcase_add_test(tc, test_a_reader_follows_commits_through_both_metas);
	tcase_add_test(tc, test_a_reader_takes_the_pages_of_each_commit_from_the_log);
	tcase_add_test(tc, test_eviction_spares_what_another_host_read);
	tcase_add_test(tc, test_eviction_spares_what_another_host_holds);
	tcase_add_test(tc, test_a_hold_waits_out_another_hosts_eviction);
	tcase_add_test(tc, test_a_hold_waits_for_another_hosts_eviction_to_commit);
	tcase_add_test(tc, test_a_new_holder_ends_a_dead_holders_eviction);
	tcase_add_test(tc, test_an_idle_client_on_another_host_stays_alive);
	tcase_add_test(tc, test_a_reader_dates_its_reads_by_the_holders_clock);
	tcase_add_test(tc, test_a_clients_words_reach_the_holder_between_heartbeats);
	tcase_add_test(tc, test_a_host_counts_the_pages_another_hosts_holder_moved);
	tcase_add_test(tc, test_a_holder_publishes_what_another_host_asked);
	tcase_add_test(tc, test_a_holder_stopped_right_after_answering_has_answered);
	tcase_add_test(tc, test_a_read_right_after_a_commit_is_dated_by_it);
	tcase_add_test(tc, test_a_read_beside_capped_hints_survives_eviction);
	tcase_add_test(tc, test_a_new_holder_frees_a_dead_writers_pages_for_every_host);
	tcase_add_test(tc, test_a_host_counts_another_hosts_hits);
	tcase_add_test(tc, test_a_view_of_a_client_that_came_after_the_holder_holds);
	tcase_add_test(tc, test_a_revocation_by_another_hosts_holder_stands);
	suite_add_tcase(s, tc);
	/*
	 * With a one-minute lease, a request whose doorbell never reaches the
	 * holder waits a whole sleep of the holder's: fail on the test's own
	 * 7.5 s bound, and well before that, not after two minutes.
	 */
	tc = tcase_create("answer");
	tcase_add_checked_fixture(tc, tu_hosts_setup, tu_hosts_teardown);
	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_a_holder_answers_another_host_at_once);
	suite_add_tcase(s, tc);
	/*
	 * A holder stopped with its caches kept: one that does not stop fails
	 * the test on its own wait of 15 s, one that goes on wrong at once; the
	 * limit is for a loaded machine (a quarter of it in mutation runs).
	 */
	tc = tcase_create("stopped");
	tcase_add_checked_fixture(tc, tu_hosts_setup, tu_hosts_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_a_holder_refuses_a_request_whose_claim_was_taken_over);
	tcase_add_test(tc, test_a_leaving_client_frees_the_pages_of_a_claim_taken_over);
	tcase_add_test(tc, test_a_new_holder_frees_the_pages_of_a_claim_taken_over);
	suite_add_tcase(s, tc);
	return s;
}

/* ===================================================================== */
/* The page log (src/regwlog.c): records a reader must not trust         */

/*
 * The newest record of the log at @p log in the pool's super (the test's
 * own descriptor @p fd), read from the device: into *w, its offset in the
 * file into *off.
 */
static void
wlog_newest(int fd, uint64_t log, struct mkv_wlog *w, off_t *off)
{
	struct mkv_wlog r;

	w->txn = 0;
	for (unsigned i = 0; i < MKV_WLOG_RECS; i++) {
		off_t o = (off_t)(log + i * sizeof(r));

		ck_assert_int_eq(pread(fd, &r, sizeof(r), o), (ssize_t)sizeof(r));
		if (r.txn > w->txn) {
			*w = r;
			*off = o;
		}
	}
	ck_assert_uint_gt(w->txn, 0);
}

/* How a record is damaged, one per run of the loop test below. */
enum wlog_damage {
	WLOG_OTHER_LAP,      /* the id of the commit 32 later, whose record this is too */
	WLOG_TOO_MANY,       /* a count of ranges past the most a record holds */
	WLOG_NOT_KNOWN,      /* the mark of a commit whose pages are not known */
	WLOG_TORN,           /* the id cleared: the holder stopped while it rewrites it */
	WLOG_PAST_FILE,      /* a range past the registry file's end (counted in 4 KiB pages) */
	WLOG_OVER_END,       /* a range from the first page running past the end */
	WLOG_DAMAGES
};

/*
 * A reader on h2 moving to a commit of h1's whose log record (on the
 * device) is damaged: it drops the whole registry, reads every key right,
 * and its next move, to a commit logged as written, uses the log again.
 * A record of no ranges, or of ranges that drop nothing, would leave the
 * reader's caches holding the pages of the commit before: trusted, it
 * reads them stale.  A lease of a minute: the holder commits nothing of
 * its own between the steps.
 */
START_TEST(test_a_reader_never_trusts_a_damaged_log_record)
{
	struct tu_host h[2];
	struct mkv_wlog w;
	struct mkv_super sb;
	long long logged, whole;
	char arg[32], *super;
	off_t off = 0;
	int fd;

	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS);
	host_start_with(&h[0], "h1", arg);
	ck_assert_int_eq(tu_host_do(&h[0], "put g 0 %u", KEYS), KEYS);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", KEYS), KEYS);
	logged = tu_host_do(&h[1], "stat logged");
	whole = tu_host_do(&h[1], "stat whole");
	ck_assert_int_eq(tu_host_do(&h[0], "put g %u 1", KEYS), 1);

	ck_assert_int_ge(asprintf(&super, "%s/super", tu_path), 0);
	ck_assert_int_ge(fd = open(super, O_RDWR), 0);
	free(super);
	ck_assert_int_eq(pread(fd, &sb, sizeof(sb), 0), (ssize_t)sizeof(sb));
	wlog_newest(fd, sb.wlog_off, &w, &off);
	/* the record as the holder wrote it names the commit's pages */
	ck_assert_uint_gt(w.n, 0);
	ck_assert_uint_le(w.n, MKV_WLOG_RANGES);
	if (_i != WLOG_NOT_KNOWN)
		memset(w.range, 0, sizeof(w.range));
	switch (_i) {
	case WLOG_OTHER_LAP:
		w.txn += MKV_WLOG_RECS;
		break;
	case WLOG_TOO_MANY:
		w.n = MKV_WLOG_RANGES + 1;
		break;
	case WLOG_NOT_KNOWN:
		w.n = MKV_WLOG_ALL;
		break;
	case WLOG_TORN:
		w.txn = 0;
		break;
	case WLOG_PAST_FILE:
		w.n = 1;
		w.range[0][0] = (uint32_t)(sb.registry_size / TU_PAGE_SIZE);
		w.range[0][1] = 1;
		break;
	case WLOG_OVER_END:
		w.n = 1;
		w.range[0][0] = 0;
		w.range[0][1] = UINT32_MAX;
		break;
	}
	ck_assert_int_eq(pwrite(fd, &w, sizeof(w), off), (ssize_t)sizeof(w));
	ck_assert_int_eq(close(fd), 0);

	ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", KEYS + 1), KEYS + 1);
	ck_assert_int_eq(tu_host_do(&h[1], "stat whole"), whole + 1);
	ck_assert_int_eq(tu_host_do(&h[1], "stat logged"), logged);
	ck_assert_int_eq(tu_host_do(&h[0], "put g %u 1", KEYS + 1), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", KEYS + 2), KEYS + 2);
	ck_assert_int_eq(tu_host_do(&h[1], "stat logged"), logged + 1);
	ck_assert_int_eq(tu_host_do(&h[1], "stat whole"), whole + 1);
	hosts_end(h, 2);
}
END_TEST

/* Where the holder on h1 stops in its rewrite of a record, one per run. */
static const char *const wlog_stops[] = {
	/* the id cleared on the device, the ranges of 32 commits before there */
	"HOSTEMU_STOP=src/get.c:>:wlog_ranges",
	/* the new ranges on the device, the id still cleared there */
	"HOSTEMU_STOP=src/get.c:>:wlog_publish",
};

/*
 * The holder on h1 stopped in its rewrite of the record of the commit it
 * just made, after it cleared the record's id and before it wrote it
 * again: a reader on h2 moving to that commit meanwhile drops the whole
 * registry and reads the commit's key; once the holder goes on, the
 * reader's move to the next commit uses the log.  The holder's own get
 * (src/get.c) arms the stop, so that its open and first commits pass.
 * A lease of a minute: h2 does not take the lease over from the stopped
 * holder.
 */
START_TEST(test_a_reader_during_a_stopped_log_rewrite_takes_the_whole_registry)
{
	struct tu_host h[2];
	long long logged, whole;
	char arg[32];

	snprintf(arg, sizeof(arg), "%u %u", SLOW_CLIENT_TIMEOUT_MS, SLOW_LEASE_MS);
	tu_host_quiet(&h[0], "check_sites", "h1", wlog_stops[_i], arg);
	ck_assert_int_eq(tu_host_do(&h[0], "put g 0 %u", KEYS), KEYS);
	host_start(&h[1], "h2");
	ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", KEYS), KEYS);
	ck_assert_int_eq(tu_host_do(&h[0], "put g %u 1", KEYS), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", KEYS + 1), KEYS + 1);
	logged = tu_host_do(&h[1], "stat logged");
	whole = tu_host_do(&h[1], "stat whole");
	ck_assert_int_ge(logged, 1);
	ck_assert_int_eq(tu_host_do(&h[0], "check g 0 1"), 1);
	tu_host_send(&h[0], "put g %u 1", KEYS + 1);
	ck_assert_msg(tu_wait_stopped(h[0].pid, 10) == 0,
			"the holder did not stop in its rewrite of the page log record");
	ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", KEYS + 2), KEYS + 2);
	ck_assert_int_eq(tu_host_do(&h[1], "stat whole"), whole + 1);
	ck_assert_int_eq(tu_host_do(&h[1], "stat logged"), logged);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[0]), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "put g %u 1", KEYS + 2), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "check g 0 %u", KEYS + 3), KEYS + 3);
	ck_assert_int_eq(tu_host_do(&h[1], "stat logged"), logged + 1);
	ck_assert_int_eq(tu_host_do(&h[1], "stat whole"), whole + 1);
	hosts_end(h, 2);
}
END_TEST

/* Each test takes a fraction of a second: a hang (a stop never reached) fails in 30. */
static TCase *
wlog_tcase(void)
{
	TCase *tc = tcase_create("wlog");

	tcase_add_checked_fixture(tc, tu_hosts_setup, tu_hosts_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_a_reader_never_trusts_a_damaged_log_record, 0, WLOG_DAMAGES);
	tcase_add_loop_test(tc, test_a_reader_during_a_stopped_log_rewrite_takes_the_whole_registry,
			0, sizeof(wlog_stops) / sizeof(wlog_stops[0]));
	return tc;
}

int
main(int argc, char **argv)
{
	Suite *s;

	if (argc == 2 && strcmp(argv[1], "--host") == 0)
		return tu_host_serve(host_cmd);
	s = sites_suite();
	suite_add_tcase(s, wlog_tcase());
	return tu_run_suite(s);
}
