/* SPDX-License-Identifier: MIT */
/*
 * check_leasesites.c -- one stale read at a time between emulated hosts
 * (t/hostemu.so) of a non-coherent pool, as t/check_sites.c, for the
 * words of the lease: the lease record, the write window, client slots and
 * their liveness.  Each test drives three hosts to a point where one host
 * would act on an old value of a line that another host changed, and
 * checks what it does; with the library's invalidation or flush for that
 * line left out (HOSTEMU_SKIP, t/mutations.sh) it fails.  No spontaneous
 * write-backs (HOSTEMU_NOISE is 0).
 *
 * A wrong act that shows only as time (a host that should have waited
 * went ahead) is checked by a lower bound, which load can only lengthen.
 * Each host is this program again (argv[1] == "--host").
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define LEASE_MS 200U
/* many lease periods: a host that waits for a client timeout is told apart */
#define CLIENT_TIMEOUT_MS 3000U
/*
 * a lease period whose quarter, from a holder's take to its first renewal,
 * is longer than another host takes to open the pool and look (ms)
 */
#define RENEW_LEASE "20000"
/* a client timeout whose quarter, between a client's beats, likewise (ms) */
#define BEAT_CLIENT_TIMEOUT "12000"
/*
 * a client timeout that a bound on a takeover tells apart from two, with
 * room for many lease periods (ms)
 */
#define WATCH_CLIENT_TIMEOUT_MS 5000
/* a lease period that a test's bound on a quick takeover tells apart (ms) */
#define LONG_LEASE "10000"
/* and one whose quarter, the holder's round, a bound on an answer tells apart */
#define LONGER_LEASE "40000"
#define SLOW_CLIENT_TIMEOUT "120000"
/* a client timeout a test waits out, for the holder's watch on an entry (ms) */
#define IDLE_CLIENT_TIMEOUT_MS 1000
/*
 * a lease period in which a contender waits for a node stopped inside the
 * bakery to be judged dead, with clients never judged dead meanwhile
 */
#define BAKERY_LEASE_MS 2000U
#define BAKERY_LEASE "2000 " SLOW_CLIENT_TIMEOUT
#define MAX_CLIENTS 3U
#define MAX_NODES 3U

/* ===================================================================== */
/* The host process                                                      */

static struct mkv_pool *hpool;

/*
 * Commands, one a line, answered "= value" or "! why":
 *   open [L [T]]    open (creating) the pool as this host's node; a lease
 *                   period of L ms and a client timeout of T ms if it
 *                   creates it
 *   open ro         open it read-only: a client that never takes the lease
 *   put P FROM N    publish keys P<FROM> .. P<FROM+N-1>: how many succeeded
 *   check P FROM N  how many of them read back whole
 *   holder          the pid of the lease holder, as mkv_pool_stat() says
 *   clients         the client slots in use, likewise
 *   beat            the age of the lease's heartbeat (ms), likewise
 *   clientbeat PID  the age of the heartbeat of client PID (ms), as
 *                   mkv_pool_clients() says
 *   clientalive PID whether this host judges client PID alive, likewise
 *   reclaim         the clients a dry run of mkv_pool_reclaim() counts dead
 *   reap            likewise, of mkv_pool_reclaim() itself: the holder's pass
 *   verify          the pages mkv_pool_verify() counts leaked
 *   close           close the pool
 */
static void
host_cmd(char *line, char *out, size_t size)
{
	const char *host = getenv("HOSTEMU_HOST");
	struct tu_opts o = { .node = host, .host = host, .lease_ms = LEASE_MS,
			.client_timeout_ms = CLIENT_TIMEOUT_MS, .max_clients = MAX_CLIENTS,
			.max_nodes = MAX_NODES };
	char cmd[16] = "", arg[16] = "";
	long long from = 0, n = 0, done = 0;
	struct mkv_client cl[MAX_CLIENTS];
	struct mkv_reclaim rep;
	struct mkv_verify ver;
	struct mkv_stat st;
	size_t ncl = 0;
	int rc = 0;

	sscanf(line, "%15s %15s %lld %lld", cmd, arg, &from, &n);
	if (strcmp(cmd, "open") == 0) {
		unsigned flags = strcmp(arg, "ro") == 0 ? MKV_RDONLY : MKV_CREATE;

		if (*arg && flags == MKV_CREATE)
			o.lease_ms = (uint32_t)atoi(arg);
		if (from)
			o.client_timeout_ms = (uint32_t)from;
		rc = tu_open(getenv("HOSTEMU_POOL"), flags, &o, &hpool);
	} else if (strcmp(cmd, "put") == 0) {
		done = tu_host_put(hpool, arg, from, n, TU_PAGE_SIZE, &rc);
	} else if (strcmp(cmd, "check") == 0) {
		done = tu_host_check(hpool, arg, from, n, TU_PAGE_SIZE);
	} else if (strcmp(cmd, "holder") == 0 || strcmp(cmd, "clients") == 0 ||
		   strcmp(cmd, "beat") == 0) {
		if ((rc = mkv_pool_stat(hpool, &st)) == 0)
			done = cmd[0] == 'h' ? st.lease_holder_pid :
				cmd[0] == 'c' ? st.clients : st.lease_heartbeat_age_ms;
	} else if (strcmp(cmd, "clientbeat") == 0 || strcmp(cmd, "clientalive") == 0) {
		done = -1;
		if ((rc = mkv_pool_clients(hpool, cl, MAX_CLIENTS, &ncl)) == 0)
			for (size_t i = 0; i < ncl; i++)
				if (cl[i].pid == (uint32_t)atoll(arg))
					done = strcmp(cmd, "clientbeat") == 0 ?
						cl[i].heartbeat_age_ms : cl[i].alive;
	} else if (strcmp(cmd, "reclaim") == 0 || strcmp(cmd, "reap") == 0) {
		unsigned flags = strcmp(cmd, "reclaim") == 0 ? MKV_DRY_RUN : 0;

		if ((rc = mkv_pool_reclaim(hpool, flags, &rep)) == 0)
			done = rep.clients;
	} else if (strcmp(cmd, "verify") == 0) {
		if ((rc = mkv_pool_verify(hpool, 0, &ver)) == 0)
			done = (long long)ver.pages_leaked;
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

/*
 * Host @p name of a non-coherent pool, quiet caches, and @p extra (or NULL)
 * in its environment; "open" with @p arg.
 */
static void
host_start_with(struct tu_host *h, const char *name, const char *extra, const char *arg)
{
	tu_host_quiet(h, "check_leasesites", name, extra, arg);
}

static void
host_start(struct tu_host *h, const char *name, const char *extra)
{
	host_start_with(h, name, extra, "");
}

/* Open the pool on host @p name, which the emulator stops where @p stop says. */
static void
host_open_stopped(struct tu_host *h, const char *name, const char *stop, const char *open)
{
	tu_host_quiet(h, "check_leasesites", name, stop, NULL);
	tu_host_send(h, "%s", open);
	ck_assert_int_eq(tu_wait_stopped(h->pid, 60), 0);
}

static void
host_close(struct tu_host *h)
{
	ck_assert_int_eq(tu_host_do(h, "close"), 0);
	tu_host_end(h);
}

/*
 * The lease record: a holder that closes clears the record; another host
 * that looks at it next does not find the closed holder named there.
 */
START_TEST(test_a_holder_that_closed_is_named_by_no_other_host)
{
	struct tu_host h[2];
	long long holder;

	host_start(&h[0], "h1", NULL);
	host_start(&h[1], "h2", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "holder"), h[0].pid);
	host_close(&h[0]);
	holder = tu_host_do(&h[1], "holder");
	ck_assert_msg(holder != h[0].pid, "h2 names the holder that closed, pid %lld", holder);
	host_close(&h[1]);
}
END_TEST


/*
 * The lease record as a releasing holder looks at it: h1, the holder,
 * closes, and is stopped inside the bakery of its release right before it
 * looks whether the record still holds its generation, with its host's
 * caches kept as they were (HOSTEMU_STOP=B!).  h2's write, forwarded to
 * it meanwhile, takes the lease over once h1's heartbeat, then its node's
 * beat in the bakery, stood still for a lease period.  h1 resumes and ends
 * its release: it must find the record naming h2 and leave it as it is.
 * Had it looked at its own old copy of the record, which holds its own
 * generation, it would clear h2's lease: no holder named, and h2 fenced at
 * its next renewal.
 */
START_TEST(test_a_superseded_holder_leaves_the_lease_as_it_releases)
{
	struct tu_host h[3];

	host_start(&h[0], "h1", "HOSTEMU_STOP=:lease_release!");
	host_start(&h[1], "h2", NULL);
	host_start(&h[2], "h3", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	tu_host_send(&h[0], "close");
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 60), 0);
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "holder"), h[1].pid);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[0]), 0);
	tu_host_end(&h[0]);
	ck_assert_int_eq(tu_host_do(&h[2], "holder"), h[1].pid);
	ck_assert_int_eq(tu_host_do(&h[1], "put c 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "holder"), h[1].pid);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "check b 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "check c 0 1"), 1);
	host_close(&h[2]);
	host_close(&h[1]);
}
END_TEST

/*
 * The bakery: a holder that closes leaves the bakery of its release with
 * its ticket given back.  With a lease period of many seconds, a host that
 * writes next takes the lease, which the release left free, at once; had
 * the closed holder's ticket stayed on the device, it would wait for that
 * node's beat to stand still for a period before it entered.
 */
START_TEST(test_a_holder_that_closed_leaves_no_ticket_in_the_bakery)
{
	struct tu_host h[2];
	double t0, took;

	host_start_with(&h[0], "h1", NULL, LONG_LEASE);
	host_start(&h[1], "h2", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	host_close(&h[0]);
	t0 = tu_now();
	ck_assert_int_eq(tu_host_do(&h[1], "put b 0 1"), 1);
	took = tu_now() - t0;
	ck_assert_msg(took < atoi(LONG_LEASE) / 2000.0,
			"h2 took %.3f s to write after the holder closed", took);
	ck_assert_int_eq(tu_host_do(&h[1], "holder"), h[1].pid);
	host_close(&h[1]);
}
END_TEST

/*
 * Doorbells: a client of another host rings its node's doorbell after
 * posting a request, and the holder, polling the other nodes' doorbells
 * while it sleeps, answers at once.  Its rounds come a quarter lease
 * period apart (ten seconds here): a ring that stayed in the client's
 * host's cache would leave the second of two writes in a row waiting for
 * the next one.
 */
START_TEST(test_a_forwarded_write_rings_the_holder_awake)
{
	struct tu_host h[2];
	double t0, took;

	host_start_with(&h[0], "h1", NULL, LONGER_LEASE " " SLOW_CLIENT_TIMEOUT);
	host_start(&h[1], "h2", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	for (int i = 0; i < 2; i++) {
		t0 = tu_now();
		ck_assert_int_eq(tu_host_do(&h[1], "put b %d 1", i), 1);
		took = tu_now() - t0;
		ck_assert_msg(took < atoi(LONGER_LEASE) / 8000.0,
				"h2's write %d took %.3f s", i, took);
	}
	ck_assert_int_eq(tu_host_do(&h[0], "holder"), h[0].pid);
	host_close(&h[1]);
	host_close(&h[0]);
}
END_TEST

/*
 * Client slots: a client of another host that closes gives its slot up;
 * the holder counts it gone at once, not once it is judged dead by its
 * heartbeat a client timeout later.
 */
START_TEST(test_a_client_that_closed_on_another_host_is_gone_at_once)
{
	struct tu_host h[3];

	host_start(&h[0], "h1", NULL);
	host_start(&h[1], "h2", NULL);
	host_start(&h[2], "h3", NULL);
	ck_assert_int_eq(tu_host_do(&h[1], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 3);
	host_close(&h[1]);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 2);
	ck_assert_int_eq(tu_host_do(&h[2], "clients"), 2);
	host_close(&h[2]);
	host_close(&h[0]);
}
END_TEST

/*
 * Two contenders for a lease that h1, its first holder, gave up on close:
 * @p b (h2, node entry 1) and @p a (h3, entry 2), with @p stop in a's
 * environment; a's write contends first, and it stops where @p stop says.
 * Returns when it has stopped.  (The first opener takes the lease at
 * once: the bakery is entered first on a's write.)
 */
static void
bakery_contenders(struct tu_host *b, struct tu_host *a, const char *stop)
{
	struct tu_host h1;

	host_start_with(&h1, "h1", NULL, BAKERY_LEASE);
	host_start(b, "h2", NULL);
	host_start(a, "h3", stop);
	ck_assert_int_eq(tu_host_do(&h1, "holder"), h1.pid);
	host_close(&h1);
	tu_host_send(a, "put a 0 1");
	ck_assert_int_eq(tu_wait_stopped(a->pid, 60), 0);
}

/*
 * b's write, contending while a is stopped in the bakery: at least
 * @p periods lease periods, in each of which it waits for a to be judged
 * dead (by its node's beat in the bakery, by the lease's heartbeat
 * before), from b's first look, which came after a stopped; the bound is
 * half a period less, for a host slow to answer.
 */
static void
contender_waits(struct tu_host *b, unsigned periods, const char *where)
{
	double t0 = tu_now(), took;

	ck_assert_int_eq(tu_host_do(b, "put b 0 1"), 1);
	took = tu_now() - t0;
	ck_assert_msg(took >= (periods - 0.5) * BAKERY_LEASE_MS / 1000.0,
			"h2 took the lease %.3f s after h3 stopped %s", took, where);
	ck_assert_int_eq(tu_host_do(b, "holder"), b->pid);
}

/* h2 waits for h3, stopped inside the bakery where `stop` says, which is then killed. */
static void
contender_waits_for_the_stopped(const char *stop, unsigned periods, const char *what)
{
	struct tu_host a, b;

	bakery_contenders(&b, &a, stop);
	contender_waits(&b, periods, what);
	tu_host_kill(&a);
	host_close(&b);
}

/*
 * The bakery's doorway: h3, contending for the free lease, is stopped
 * while it reads the others' numbers, its choosing flag set.  h2's write
 * contends too, and waits in the bakery for h3 to choose its number, or
 * to be judged dead.  Had h3's flag stayed in its host's cache, or h2
 * looked at its own old copy of it, h2 would go in at once, while h3 may
 * yet choose a number no higher than h2's and go in too.
 */
START_TEST(test_a_contender_waits_for_a_host_stopped_choosing_its_number)
{
	struct tu_host a, b;

	bakery_contenders(&b, &a, "HOSTEMU_STOP=:bakery_numbers");
	contender_waits(&b, 1, "choosing");
	/* h3 goes on: it finds the lease taken, and its write is forwarded */
	ck_assert_int_eq(kill(a.pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&a), 1);
	ck_assert_int_eq(tu_host_do(&b, "check a 0 1"), 1);
	host_close(&a);
	host_close(&b);
}
END_TEST

/*
 * The bakery's numbers: h3, a node of a higher index than h2's, is
 * stopped inside the critical section (its lease record stored, not yet
 * written back).  h2 contends: it must read h3's number and choose one
 * above it, then wait for h3 to leave or to be judged dead.  Had it read
 * its own old copy of h3's number (0, from before h3 chose), it would
 * choose the same number, win the tie by its lower index, and go in
 * beside h3 at once.  h3 is killed: a host that died inside the bakery.
 */
START_TEST(test_a_contender_waits_for_a_host_stopped_inside_the_bakery)
{
	contender_waits_for_the_stopped("HOSTEMU_STOP=:lease_take", 1, "inside the bakery");
}
END_TEST

/*
 * The bakery's waiting: h3 is stopped inside the critical section, as
 * above; h2 contends, chooses a number above h3's and waits for it.  h3 is
 * let go a quarter lease period after h2 began: it leaves the bakery, its
 * number given back, and holds the lease.  h2, looking at h3's entry again
 * and again as it waits, goes on at once: it finds the lease taken and its
 * write is forwarded to h3.  Had it looked at its own old copy of h3's
 * entry, it would see h3 inside until its beat stood still for a period.
 */
START_TEST(test_a_contender_goes_on_once_the_host_it_waits_for_leaves)
{
	struct tu_host a, b;
	double t0, took;

	bakery_contenders(&b, &a, "HOSTEMU_STOP=:lease_take");
	t0 = tu_now();
	tu_host_send(&b, "put b 0 1");
	/* a step, not a proof: h2 is waiting in the bakery by then, unless very slow */
	tu_sleep_ms(BAKERY_LEASE_MS / 4);
	ck_assert_int_eq(kill(a.pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&b), 1);
	took = tu_now() - t0;
	ck_assert_msg(took < 0.75 * BAKERY_LEASE_MS / 1000.0,
			"h2 wrote %.3f s after it began, h3 let go after %.3f s", took,
			BAKERY_LEASE_MS / 4000.0);
	ck_assert_int_eq(tu_host_recv(&a), 1);
	ck_assert_int_eq(tu_host_do(&b, "holder"), a.pid);
	host_close(&b);
	host_close(&a);
}
END_TEST

/*
 * The lease record: h3, the new holder, is stopped inside the bakery right
 * after it wrote the record back, before it leaves.  h2 contends: it finds
 * the lease held, waits a lease period for its heartbeat to stand still,
 * then a period more for h3 to leave the bakery or be judged dead.  Had
 * the record stayed in h3's host's cache, h2 would find the lease free and
 * wait only the second period, and take it beside a holder that, going
 * on, would write as one.
 */
START_TEST(test_a_contender_finds_the_lease_taken_inside_the_bakery)
{
	contender_waits_for_the_stopped("HOSTEMU_STOP=:lease_take>", 2,
			"past writing the lease record");
}
END_TEST

/*
 * The write window: a new holder on h2 is stopped inside the write window
 * of its takeover, where @p stop says.  h3's write, forwarded to it, waits
 * for the lease to expire and then, holding it, for the window h2
 * announced to close or for h2 to be dead by its client heartbeat: a
 * client timeout at least from h3's first look, which came after h2
 * stopped.  Had h2's announcement stayed in its host's cache, or h3
 * looked at its own old copy of it, h3 would write at once, beside a
 * holder that may still be writing.
 */
static void
takeover_waits_for_window(const char *stop)
{
	struct tu_host h[3];
	double t0, took;

	host_start(&h[0], "h1", NULL);
	host_start(&h[1], "h2", stop);
	host_start(&h[2], "h3", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "holder"), h[0].pid);
	tu_host_kill(&h[0]);
	/* h2's write makes it take the lease over; it stops in the take */
	tu_host_send(&h[1], "put b 0 1");
	ck_assert_int_eq(tu_wait_stopped(h[1].pid, 60), 0);
	t0 = tu_now();
	ck_assert_int_eq(tu_host_do(&h[2], "put c 0 1"), 1);
	took = tu_now() - t0;
	/* h3's first look may precede t0 by the time it took to see h2 stopped */
	ck_assert_msg(took >= CLIENT_TIMEOUT_MS / 2000.0,
			"h3 wrote %.3f s after h2 stopped inside its write window", took);
	ck_assert_int_eq(tu_host_do(&h[2], "holder"), h[2].pid);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 1"), 1);
	tu_host_kill(&h[1]);
	host_close(&h[2]);
}

/* stopped in its rebuild of the page table, the first time it reaches src/pages.c */
START_TEST(test_a_new_holder_waits_for_a_stopped_holders_write_window)
{
	takeover_waits_for_window("HOSTEMU_STOP=src/pages.c:");
}
END_TEST

/*
 * stopped right after its look at the lease record from the window it
 * opened, which found it still the holder: before anything else of its
 * own writes the announcement's line back
 */
START_TEST(test_a_new_holder_waits_for_a_window_announced_before_the_look)
{
	takeover_waits_for_window("HOSTEMU_STOP=:window_open>:lease_read_beat");
}
END_TEST

/*
 * The write window's closing: h2 takes over the lease h1 gave up on close,
 * and is stopped right after it closed the window of its takeover (its
 * store of no generation written back), before anything else of its own
 * writes its node's line back.  h3's write, forwarded to it, takes the
 * lease over once h2's heartbeat stood still for a lease period, and
 * writes at once: a closed window is not waited for.  Had the closing
 * stayed in h2's host's cache, h3 would find the window open and wait for
 * h2 to be judged dead by its client heartbeat, a client timeout.
 */
START_TEST(test_a_new_holder_does_not_wait_for_a_closed_window)
{
	struct tu_host h[3];
	double t0, took;

	host_start(&h[0], "h1", NULL);
	host_start(&h[1], "h2", "HOSTEMU_STOP=:window_close>");
	host_start(&h[2], "h3", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	host_close(&h[0]);
	tu_host_send(&h[1], "put b 0 1");
	ck_assert_int_eq(tu_wait_stopped(h[1].pid, 60), 0);
	t0 = tu_now();
	ck_assert_int_eq(tu_host_do(&h[2], "put c 0 1"), 1);
	took = tu_now() - t0;
	ck_assert_msg(took < CLIENT_TIMEOUT_MS / 2000.0,
			"h3 wrote %.3f s after h2 stopped with its write window closed", took);
	ck_assert_int_eq(tu_host_do(&h[2], "holder"), h[2].pid);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 1"), 1);
	tu_host_kill(&h[1]);
	host_close(&h[2]);
}
END_TEST

/*
 * A new holder's watch on the readers: h2, a reader of another host, is
 * stopped inside a read, its snap published, and h1, the holder, commits a
 * newer snapshot, then is stopped inside the write window in which it
 * serves h3's write (after answering its first request).  h3 takes the
 * lease over once h1's heartbeat stood still for a lease period, and waits
 * for h1's window until h1 is judged dead by its client heartbeat, then,
 * before its first write, for h2 to be judged dead too: h2's snap holds
 * back pages of a snapshot older than h3's first.  The watch on h2's
 * heartbeat starts as h3 takes the lease, alongside the wait for the
 * window, so h3 writes a lease period and a client timeout after h1
 * stopped, and some lease periods of retries (the window's wait gives up
 * every quarter period, and the lease is taken again a period later).
 * Had h3 looked at its own old copy of h2's slot as it took the lease
 * (from before h2 claimed it), the watch would start only once the window
 * was void, and h3 would write a client timeout later still.
 */
START_TEST(test_a_new_holder_watches_a_dead_reader_while_it_waits_for_a_window)
{
	const double timeout = WATCH_CLIENT_TIMEOUT_MS / 1000.0;
	struct tu_host h[3];
	double t0, took;
	char arg[32];

	snprintf(arg, sizeof(arg), "200 %d", WATCH_CLIENT_TIMEOUT_MS);
	host_start_with(&h[0], "h1", "HOSTEMU_STOP=:answers_counted>src/pages.c:", arg);
	/* h3 caches the slots before h2 claims one */
	host_start(&h[2], "h3", NULL);
	host_start(&h[1], "h2", "HOSTEMU_STOP=src/get.c:");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	tu_host_send(&h[1], "check a 0 1");
	ck_assert_int_eq(tu_wait_stopped(h[1].pid, 60), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "put b 0 1"), 1);
	tu_host_send(&h[2], "put c 0 1");
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 60), 0);
	t0 = tu_now();
	ck_assert_int_eq(tu_host_recv(&h[2]), 1);
	took = tu_now() - t0;
	ck_assert_msg(took >= timeout / 2, "h3 wrote %.3f s after h1 stopped inside its write window",
			took);
	ck_assert_msg(took < 1.5 * timeout,
			"h3 wrote %.3f s after h1 stopped, a reader of another host dead (client timeout %.0f s)",
			took, timeout);
	ck_assert_int_eq(tu_host_do(&h[2], "holder"), h[2].pid);
	ck_assert_int_eq(tu_host_do(&h[2], "check a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "check b 0 1"), 1);
	tu_host_kill(&h[0]);
	tu_host_kill(&h[1]);
	host_close(&h[2]);
}
END_TEST

/*
 * When the heartbeat that @p h's look by @p cmd finds was stored, by our
 * clock: the look's end less the age it says (by the wall clock every
 * emulated host shares), no earlier than the beat.
 */
static double
beat_dated(struct tu_host *h, const char *cmd)
{
	long long age = tu_host_do(h, "%s", cmd);

	ck_assert_int_ge(age, 0);
	return tu_now() - (double)age / 1000.0;
}

/*
 * How far apart, by our clock, the heartbeats are that @p h's looks by
 * @p cmd date before and after @p stopped stops.
 */
static double
beat_gap(struct tu_host *h, const char *cmd, struct tu_host *stopped)
{
	double first = beat_dated(h, cmd);

	ck_assert_int_eq(tu_wait_stopped(stopped->pid, 60), 0);
	return beat_dated(h, cmd) - first;
}

/*
 * The lease record as a waiting client looks at it: h1, the holder, is
 * killed; h3's write, forwarded to it, waits for its heartbeat to stand
 * still for a lease period and takes the lease over, and h3 is stopped
 * as it opens its first write window.  h2's write, sent a quarter period
 * after h3's, waits likewise, and looks at the record again and again: it
 * finds h3 named there a moment after h3 took the lease, and waits a whole
 * period for h3's heartbeat from then.  Had it kept looking at its own old
 * copy of the record, naming h1, it would take the lease a period after
 * its first look, from a holder that may yet wake.
 */
START_TEST(test_a_waiting_client_sees_the_lease_change_hands)
{
	struct tu_host h[3];
	double t0, took;

	host_start_with(&h[0], "h1", NULL, BAKERY_LEASE);
	host_start(&h[1], "h2", NULL);
	host_start(&h[2], "h3", "HOSTEMU_STOP=:window_open");
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	/* h1 renews after the others opened: their watches on it start at their writes */
	t0 = tu_now();
	while (beat_dated(&h[0], "beat") < t0) {
		ck_assert_msg(tu_now() < t0 + 10, "h1 renewed no lease in 10 s");
		tu_sleep_ms(10);
	}
	tu_host_kill(&h[0]);
	tu_host_send(&h[2], "put c 0 1");
	/* a step: h3's watch on h1 starts first, and ends first */
	tu_sleep_ms(BAKERY_LEASE_MS / 4);
	t0 = tu_now();
	tu_host_send(&h[1], "put b 0 1");
	ck_assert_int_eq(tu_wait_stopped(h[2].pid, 60), 0);
	ck_assert_int_eq(tu_host_recv(&h[1]), 1);
	took = tu_now() - t0;
	/* h3 took the lease three quarters of a period after h2's first look */
	ck_assert_msg(took > 1.375 * BAKERY_LEASE_MS / 1000.0,
			"h2 took the lease %.3f s after it began to wait", took);
	ck_assert_int_eq(tu_host_do(&h[1], "holder"), h[1].pid);
	tu_host_kill(&h[2]);
	host_close(&h[1]);
}
END_TEST

/*
 * The lease's heartbeat: h1 takes the lease as it opens, renews it a
 * quarter lease period later, and is stopped right after that renewal,
 * before anything else of its own writes its node's line back.  h2 looks
 * at the heartbeat's age before and after: the second look must date the
 * renewal, a quarter period after the beat the first one dated.  Had the
 * renewal stayed in h1's host's cache, the second look would date the
 * same beat as the first.
 */
START_TEST(test_a_renewal_reaches_another_host_while_the_holder_is_stopped)
{
	struct tu_host h[2];
	double gap;

	host_start_with(&h[0], "h1", "HOSTEMU_STOP=:lease_beat#2>", RENEW_LEASE);
	host_start(&h[1], "h2", NULL);
	gap = beat_gap(&h[1], "beat", &h[0]);
	/* a quarter period apart; the looks' lengths blur each by far less than half that */
	ck_assert_msg(gap > atoi(RENEW_LEASE) / 8000.0,
			"h2 dates the heartbeat after the renewal %.3f s after the one before", gap);
	/* h2's close would wait a lease period of h1's for its detach */
	tu_host_kill(&h[0]);
	tu_host_kill(&h[1]);
}
END_TEST

/*
 * A client's heartbeat: h2, a client of another host (a client timeout of
 * twelve seconds), beats as it claims its slot, at once in its service
 * thread's first round, and a quarter client timeout later; it is stopped
 * right after that third beat, before anything else of its own writes the
 * beat's line back.  The holder on h1 dates h2's heartbeat before and
 * after: the second look must date the third beat, a quarter client
 * timeout after the one the first dated.  Had the beat stayed in h2's
 * host's cache, the holder would see an older beat, and judge a client
 * that goes on beating so dead a quarter timeout early.
 */
START_TEST(test_a_clients_beat_reaches_the_holder_while_it_is_stopped)
{
	struct tu_host h[2];
	char cmd[32];
	double gap;

	host_start_with(&h[0], "h1", NULL, "200 " BEAT_CLIENT_TIMEOUT);
	host_start(&h[1], "h2", "HOSTEMU_STOP=:client_beat#3>");
	snprintf(cmd, sizeof(cmd), "clientbeat %d", (int)h[1].pid);
	gap = beat_gap(&h[0], cmd, &h[1]);
	ck_assert_msg(gap > atoi(BEAT_CLIENT_TIMEOUT) / 8000.0,
			"h1 dates h2's heartbeat after its third beat %.3f s after the one before", gap);
	tu_host_kill(&h[1]);
	host_close(&h[0]);
}
END_TEST

/*
 * A judge of a client's heartbeat other than the holder: a dry run of
 * mkv_pool_reclaim() on h3.  Every handle is read-only once h1, which
 * created the pool, has closed and opened again: no holder watches and
 * revokes.  h2 is stopped until h3 judges it dead; h3's reclaim judges it
 * dead again as it waits for the others' verdicts, and is stopped right
 * before it counts the dead, with its host's caches kept.  h2 resumes and
 * beats, and h1 sees that beat; h3 goes on and counts: h2 lives.  Had h3
 * looked at its own old copy of h2's heartbeat, cached as it waited, it
 * would count a client that beats again as dead.
 */
START_TEST(test_a_judge_of_another_host_sees_a_client_beat_again)
{
	struct tu_host h[3];
	char alive[32], beat[32];
	double t0;

	host_start(&h[0], "h1", NULL);
	host_start_with(&h[1], "h2", NULL, "ro");
	host_start_with(&h[2], "h3", "HOSTEMU_STOP=:reap_count!", "ro");
	ck_assert_int_eq(tu_host_do(&h[0], "close"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "open ro"), 0);
	snprintf(alive, sizeof(alive), "clientalive %d", (int)h[1].pid);
	snprintf(beat, sizeof(beat), "clientbeat %d", (int)h[1].pid);
	ck_assert_int_eq(tu_stop(h[1].pid, 60), 0);
	t0 = tu_now();
	while (tu_host_do(&h[2], "%s", alive) != 0) {
		ck_assert_msg(tu_now() < t0 + 20, "h3 judged h2 alive 20 s after it stopped");
		tu_sleep_ms(10);
	}
	tu_host_send(&h[2], "reclaim");
	ck_assert_int_eq(tu_wait_stopped(h[2].pid, 60), 0);
	t0 = tu_now();
	ck_assert_int_eq(kill(h[1].pid, SIGCONT), 0);
	while (beat_dated(&h[0], beat) < t0) {
		ck_assert_msg(tu_now() < t0 + 10, "h1 saw no beat of h2 in 10 s");
		tu_sleep_ms(10);
	}
	ck_assert_int_eq(kill(h[2].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[2]), 0);
	host_close(&h[2]);
	host_close(&h[1]);
	host_close(&h[0]);
}
END_TEST

/*
 * The reclaim's watch on the other hosts' clients: h3 maps the pool while
 * h2's slot is free, and looks at it no more; h2 then claims the slot,
 * beats and is killed.  A dry run of mkv_pool_reclaim() on h3 (no holder:
 * every handle read-only, as above) must watch h2's heartbeat stand still
 * for a client timeout and count it dead.  Had the watch looked at h3's
 * own old copy of the slot, it would find the slot free (its owner word)
 * or h2 beaten since (its beat, 0 then), and end at once: a client dead
 * before the call began, left out of its report.
 */
START_TEST(test_a_judge_counts_a_client_that_claimed_and_died_since_it_looked)
{
	struct tu_host h[3];

	host_start(&h[0], "h1", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "close"), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "open ro"), 0);
	host_start_with(&h[2], "h3", NULL, "ro");
	host_start_with(&h[1], "h2", NULL, "ro");
	tu_host_kill(&h[1]);
	ck_assert_int_eq(tu_host_do(&h[2], "reclaim"), 1);
	host_close(&h[2]);
	host_close(&h[0]);
}
END_TEST

/*
 * mkv_pool_verify()'s look at the slot of a granted page: h3 maps the pool
 * while h2's slot is free, and looks at it no more; h2 then claims the
 * slot and writes, and keeps the rest of the pages the holder on h1
 * granted it in a batch.  A verify on h3 counts none of them leaked: their
 * client lives.  Had it looked at its own old copy of the slot, free, it
 * would count every page granted to h2 as nobody's.
 */
START_TEST(test_a_verify_counts_no_page_of_a_client_that_claimed_since_it_looked_leaked)
{
	struct tu_host h[3];

	host_start(&h[0], "h1", NULL);
	host_start(&h[2], "h3", NULL);
	host_start(&h[1], "h2", NULL);
	ck_assert_int_eq(tu_host_do(&h[1], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "verify"), 0);
	host_close(&h[1]);
	host_close(&h[2]);
	host_close(&h[0]);
}
END_TEST

/*
 * Revocation: h2, a client of another host, is stopped longer than the
 * client timeout; the holder on h1 judges it dead, revokes its claim, and
 * is stopped right after, before anything else of its own touches the
 * slot's line.  h2 resumes and reads: it must learn that it lost its slot
 * (MKV_E_EXPIRED), and read nothing.  Had the revocation stayed in h1's
 * host's cache, h2 would go on as a client whose pins and grants the
 * holder counts no more.
 */
START_TEST(test_a_revoked_client_learns_it_while_the_holder_is_stopped)
{
	struct tu_host h[2];

	host_start(&h[0], "h1", "HOSTEMU_STOP=:revoke>");
	host_start(&h[1], "h2", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "put a 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[1], "check a 0 1"), 1);
	ck_assert_int_eq(tu_stop(h[1].pid, 60), 0);
	/* the holder's reclamation, a client timeout and a lease period on */
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 60), 0);
	ck_assert_int_eq(kill(h[1].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_do(&h[1], "check a 0 1"), 0);
	tu_host_kill(&h[0]);
	tu_host_kill(&h[1]);
}
END_TEST

/*
 * The node table's splitter: h2, opening, finds node entry 1 free and is
 * stopped as it goes into the entry's splitter, before its look at the
 * door, with its host's caches kept (the door's line open in them, as it
 * was when h2 mapped the pool).  h3 then goes through the same splitter:
 * it closes the door, and is stopped before its last look, at the race
 * word it wrote.  h2 goes on: it must find the door closed and try the
 * next entry, writing nothing into entry 1.  Had it looked at its own old
 * copy of the door, it would write the race word over h3's before it saw
 * the door closed; h3, going on, would then lose entry 1 too, and find no
 * free entry of the three left for it.
 */
START_TEST(test_a_node_that_finds_an_entrys_door_closed_leaves_its_race_alone)
{
	struct tu_host h[3];

	host_start_with(&h[0], "h1", NULL, "200 " SLOW_CLIENT_TIMEOUT);
	host_open_stopped(&h[1], "h2", "HOSTEMU_STOP=:node_split_enter!", "open");
	host_open_stopped(&h[2], "h3", "HOSTEMU_STOP=:node_split_race", "open");
	ck_assert_int_eq(kill(h[1].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[1]), 0);
	ck_assert_int_eq(kill(h[2].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[2]), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 3);
	host_close(&h[2]);
	host_close(&h[1]);
	host_close(&h[0]);
}
END_TEST

/*
 * The node table's reclamation: h2's host dies; the holder on h1 revokes
 * its claim, frees its node entry once that looked unused for a client
 * timeout, and is stopped right after, before anything else of its own
 * writes the entry's lines back.  h4, a new host for which the table of
 * three entries had no room, opens meanwhile: it must find the entry free
 * (its id cleared, its door open) and take it.  Had the cleared id or the
 * opened door stayed in h1's host's cache, h4 would find the table full.
 */
START_TEST(test_a_dead_hosts_node_entry_freed_by_a_stopped_holder_is_taken)
{
	struct tu_host h[4];

	host_start(&h[0], "h1", "HOSTEMU_STOP=:node_free>");
	host_start(&h[1], "h2", NULL);
	host_start(&h[2], "h3", NULL);
	tu_host_kill(&h[1]);
	/* two client timeouts and a few of the holder's rounds */
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 60), 0);
	host_start(&h[3], "h4", NULL);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 3);
	host_close(&h[3]);
	host_close(&h[2]);
	host_close(&h[0]);
}
END_TEST

/*
 * An entry whose door closed on no winner: h2, opening, closes the door of
 * node entry 1 and is killed before its last look, its id never written.
 * The holder on h1 must free the entry once the node named by its door had
 * no client for a client timeout; it is stopped right after, and h3 then
 * takes the entry.  Had the holder looked at its own old copy of the door
 * (open, as it mapped it before h2 came), it would take the entry for a
 * free one and never free it.
 */
START_TEST(test_an_entry_whose_door_closed_on_no_winner_is_freed)
{
	struct tu_host h[3];

	host_start(&h[0], "h1", "HOSTEMU_STOP=:node_free>");
	host_open_stopped(&h[1], "h2", "HOSTEMU_STOP=:node_split_race", "open");
	tu_host_kill(&h[1]);
	/* a client timeout and a few of the holder's rounds */
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 20), 0);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	host_start(&h[2], "h3", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 2);
	host_close(&h[2]);
	host_close(&h[0]);
}
END_TEST

/*
 * A node whose entry was freed: h2's only process closes, and the holder
 * on h1 frees h2's entry once that looked unused for a client timeout
 * (it is stopped right after, and let go: a step).  A new process of host
 * h2 opens, whose host's caches still hold the entry with h2's id; it is
 * stopped, its caches kept, right after its look at that entry (node
 * entry 1): it must have found the entry free on the device.  h4 opens
 * meanwhile and takes the entry, then h2 goes on and takes another.  Had
 * h2 attached by its own old copy of the entry, its beat's write-back of
 * the entry's line would put its id back over h4's, and h2 would find the
 * entry's one slot h4's.
 */
START_TEST(test_a_node_whose_entry_was_freed_does_not_attach_to_it)
{
	struct tu_host h[3];

	host_start(&h[0], "h1", "HOSTEMU_STOP=:node_free>");
	host_start(&h[1], "h2", NULL);
	host_close(&h[1]);
	/* a client timeout and a few of the holder's rounds */
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 20), 0);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	host_open_stopped(&h[1], "h2", "HOSTEMU_STOP=:node_attach#2>!", "open");
	host_start(&h[2], "h4", NULL);
	ck_assert_int_eq(kill(h[1].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[1]), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 3);
	host_close(&h[2]);
	host_close(&h[1]);
	host_close(&h[0]);
}
END_TEST

/*
 * The start of the tests of an idle entry: h2 opens the pool first, with
 * a lease period long enough that the holder's reclamation runs only when
 * a test asks ("reap"), holds the lease and closes; h1 opens, stopped
 * where @p stop says.
 */
static void
idle_entry_start(struct tu_host h[3], const char *stop)
{
	char arg[32];

	snprintf(arg, sizeof(arg), "%s %d", RENEW_LEASE, IDLE_CLIENT_TIMEOUT_MS);
	host_start_with(&h[1], "h2", NULL, arg);
	host_close(&h[1]);
	host_start(&h[0], "h1", stop);
}

/*
 * The node table's reclamation, as a node takes its idle entry up again:
 * h2 opens the pool first, holds the lease and closes, its entry written
 * back as it releases; the holder on h1, whose reclamation runs only when
 * asked (a lease period of 20 s), starts its watch on h2's unused entry,
 * and, a client timeout later, is stopped in its next pass with its host's
 * caches kept, right before its look at the entry's beat (the entry's line
 * cached by its look at the id just before).  A new process of h2 attaches
 * meanwhile, moving the beat, and is stopped right after, before it claims
 * a slot.  h1 goes on: it must see the beat moved and leave the entry
 * alone, so that h4, opening while h2 is still stopped, takes the third
 * entry, and h2 then claims its slot.  Had h1 looked at its own old copy
 * of the beat, or had h2's beat stayed in h2's host's cache, h1 would free
 * the entry under h2, and h4 would take it and its one slot, which h2 then
 * finds taken.
 */
START_TEST(test_a_holder_leaves_an_entry_taken_up_again_while_it_is_stopped)
{
	struct tu_host h[3];

	idle_entry_start(h, "HOSTEMU_STOP=:node_idle>:node_idle!");
	ck_assert_int_eq(tu_host_do(&h[0], "reap"), 0);
	/* the watch's client timeout, by the clock the hosts share */
	tu_sleep_ms(IDLE_CLIENT_TIMEOUT_MS + 100);
	tu_host_send(&h[0], "reap");
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 60), 0);
	host_open_stopped(&h[1], "h2", "HOSTEMU_STOP=:node_beat>", "open ro");
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[0]), 0);
	host_start(&h[2], "h4", NULL);
	ck_assert_int_eq(kill(h[1].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[1]), 0);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 3);
	host_close(&h[2]);
	host_close(&h[1]);
	host_close(&h[0]);
}
END_TEST

/*
 * The same, as a node claims a slot of its entry: a new process of h2
 * attaches and is stopped right after, before it claims a slot; the
 * holder on h1 then starts its watch on the unused entry and, half a
 * client timeout later, is stopped in its next pass with its host's
 * caches kept, right before its look at the slot's owner word (cached,
 * free, by its reaping's look at it just before, recover.c).  h2 goes on
 * and claims the slot; h1 goes on, the watch a client timeout old: it
 * must see the slot claimed and leave the entry alone, so that h4 takes
 * the third entry.  Each process pauses for less than a client timeout,
 * as a client on another host may.  Had h1 looked at its own old copy of
 * the owner word, it would free the entry under h2, and h4 would take it
 * and find its one slot h2's.
 */
START_TEST(test_a_holder_leaves_an_entry_whose_slot_is_claimed_while_it_is_stopped)
{
	struct tu_host h[3];

	idle_entry_start(h, "HOSTEMU_STOP=:node_in_use>:node_in_use!");
	host_open_stopped(&h[1], "h2", "HOSTEMU_STOP=:node_beat>", "open ro");
	ck_assert_int_eq(tu_host_do(&h[0], "reap"), 0);
	/* half the watch's client timeout, and the rest below: each pause is shorter */
	tu_sleep_ms(IDLE_CLIENT_TIMEOUT_MS / 2);
	tu_host_send(&h[0], "reap");
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 60), 0);
	ck_assert_int_eq(kill(h[1].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[1]), 0);
	/* the rest of the watch's client timeout */
	tu_sleep_ms(IDLE_CLIENT_TIMEOUT_MS / 2 + 100);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[0]), 0);
	host_start(&h[2], "h4", NULL);
	ck_assert_int_eq(tu_host_do(&h[0], "clients"), 3);
	host_close(&h[2]);
	host_close(&h[1]);
	host_close(&h[0]);
}
END_TEST

/*
 * A host that maps the pool and leaves it before it takes a node entry: its
 * process is stopped as it looks for its node's entry, and killed.
 */
static void
host_map_only(struct tu_host *h, const char *name)
{
	host_open_stopped(h, name, "HOSTEMU_STOP=:node_attach", "open");
	tu_host_kill(h);
}

/*
 * A claim of a dead host's slot by a host that mapped the pool before:
 * h2 claims the slot of node entry 1 and writes; h3 maps the pool, before
 * h2's claim if @p mapped_first says so, else after h2's first write; h2
 * writes once more, a single request (from the pages granted with the
 * first), which the holder on h1 answers, and then finds the slot's count
 * of requests posted at the same value with nothing pending.  h2 is
 * killed; h1, asked to reclaim, revokes its claim, frees its entry a client
 * timeout later, and is stopped right after.  A new process of h3 takes
 * the entry, claims the slot and writes, and is stopped right after it
 * counted its first request posted; h1, then h3, go on: the write must be
 * answered at once.
 */
static void
claim_dead_hosts_slot(bool mapped_first)
{
	struct tu_host h[3];
	char arg[32];

	snprintf(arg, sizeof(arg), "%s %d", RENEW_LEASE, IDLE_CLIENT_TIMEOUT_MS);
	host_start_with(&h[0], "h1", "HOSTEMU_STOP=:node_free>", arg);
	if (mapped_first)
		host_map_only(&h[2], "h3");
	host_start(&h[1], "h2", NULL);
	ck_assert_int_eq(tu_host_do(&h[1], "put a 0 1"), 1);
	if (!mapped_first)
		host_map_only(&h[2], "h3");
	ck_assert_int_eq(tu_host_do(&h[1], "put a 1 1"), 1);
	tu_host_kill(&h[1]);
	ck_assert_int_eq(tu_host_do(&h[0], "reap"), 1);
	/* the watch on the entry h2 left unused: a client timeout, by the clock the hosts share */
	tu_sleep_ms(IDLE_CLIENT_TIMEOUT_MS + 100);
	tu_host_send(&h[0], "reap");
	ck_assert_int_eq(tu_wait_stopped(h[0].pid, 60), 0);
	host_start_with(&h[2], "h3", "HOSTEMU_STOP=:posted>", "");
	tu_host_send(&h[2], "put b 0 1");
	ck_assert_int_eq(tu_wait_stopped(h[2].pid, 60), 0);
	ck_assert_int_eq(kill(h[0].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[0]), 0);
	ck_assert_int_eq(kill(h[2].pid, SIGCONT), 0);
	/* h1 polls the doorbells between rounds a quarter client timeout apart */
	ck_assert_msg(tu_host_ready(&h[2], 5), "h3's first write since its claim waits past 5 s");
	ck_assert_int_eq(tu_host_recv(&h[2]), 1);
	ck_assert_int_eq(tu_host_do(&h[0], "check b 0 1"), 1);
	host_close(&h[2]);
	host_close(&h[0]);
}

/*
 * The claim's look at its slot's counters, h3 having mapped the pool
 * between h2's two writes.  Had the claim stored into h3's host's old copy
 * of the slot's line, from before h2's last request, its write-back would
 * put the count one back, and h3's request would bring it to the count h1
 * last found with nothing pending: h1 would pass the slot over until its
 * count moved again, and the write would wait out its time limit (thirty
 * lease periods).
 */
START_TEST(test_a_client_that_claims_a_dead_hosts_slot_is_answered)
{
	claim_dead_hosts_slot(false);
}
END_TEST

/*
 * The attach's look at an owner word, h3 having mapped the pool before
 * h2's claim.  Had the attach looked at h3's host's old copy of the slot's
 * owner word, free, its claim would expect the slot free and fail against
 * h2's revoked claim, and the open would find all of its node's slots taken.
 */
START_TEST(test_a_host_that_mapped_the_pool_before_takes_a_dead_hosts_slot)
{
	claim_dead_hosts_slot(true);
}
END_TEST

/*
 * The bakery's waiting, at a node that takes an entry below the
 * contender's while it chooses: a read-only process of h2 (one that never
 * contends), opening, is stopped in the splitter of node entry 1, its door
 * closed, its id not yet written; h3 opens (entry 2: that door is closed
 * to it) and, once h1 gave the lease up, contends for it, and is stopped,
 * its host's caches kept, right before its number and the end of its
 * choice are written back: its look at every number found entry 1 free.
 * h2 goes on, takes the entry and closes (the entry's one slot free
 * again); a new process of h2 opens and contends, waits a lease period
 * for h3, choosing on the device, draws h3's number (0 on the device),
 * wins the tie by its lower index and is stopped inside the critical
 * section.  h3 resumes: it must find entry 1 taken and wait for h2, and
 * has not written half a lease period later, when h2 is let go, leaves
 * and holds the lease; h3's write is then forwarded to it.  Had h3 looked
 * at its own old copy of entry 1, free, it would pass h2 over and go in at
 * once beside it, and take the lease, h2's record not yet written back.
 */
START_TEST(test_a_contender_waits_for_a_node_that_took_an_entry_below_it_as_it_chose)
{
	struct tu_host h[4];

	host_start_with(&h[0], "h1", NULL, BAKERY_LEASE);
	host_open_stopped(&h[1], "h2", "HOSTEMU_STOP=:node_split_race", "open ro");
	host_start(&h[2], "h3", "HOSTEMU_STOP=:bakery_chosen!");
	host_close(&h[0]);
	tu_host_send(&h[2], "put a 0 1");
	ck_assert_int_eq(tu_wait_stopped(h[2].pid, 60), 0);
	ck_assert_int_eq(kill(h[1].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[1]), 0);
	host_close(&h[1]);
	host_open_stopped(&h[3], "h2", "HOSTEMU_STOP=:lease_take", "open");
	ck_assert_int_eq(kill(h[2].pid, SIGCONT), 0);
	/* h3 would judge h2 dead a period after its first look at it, which comes after this */
	ck_assert_msg(!tu_host_ready(&h[2], BAKERY_LEASE_MS / 2000.0),
			"h3 wrote while h2 was stopped inside the bakery");
	ck_assert_int_eq(kill(h[3].pid, SIGCONT), 0);
	ck_assert_int_eq(tu_host_recv(&h[2]), 1);
	ck_assert_int_eq(tu_host_recv(&h[3]), 0);
	ck_assert_int_eq(tu_host_do(&h[2], "holder"), h[3].pid);
	ck_assert_int_eq(tu_host_do(&h[3], "put b 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[2], "check b 0 1"), 1);
	ck_assert_int_eq(tu_host_do(&h[3], "check a 0 1"), 1);
	host_close(&h[2]);
	host_close(&h[3]);
}
END_TEST

static Suite *
leasesites_suite(void)
{
	Suite *s = suite_create("leasesites");
	TCase *tc = tcase_create("leasesites");

	tcase_add_checked_fixture(tc, tu_hosts_setup, tu_hosts_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_a_holder_that_closed_is_named_by_no_other_host);
	tcase_add_test(tc, test_a_holder_that_closed_leaves_no_ticket_in_the_bakery);
	tcase_add_test(tc, test_a_forwarded_write_rings_the_holder_awake);
	tcase_add_test(tc, test_a_client_that_closed_on_another_host_is_gone_at_once);
	tcase_add_test(tc, test_a_new_holder_waits_for_a_stopped_holders_write_window);
	tcase_add_test(tc, test_a_new_holder_waits_for_a_window_announced_before_the_look);
	tcase_add_test(tc, test_a_contender_waits_for_a_host_stopped_choosing_its_number);
	tcase_add_test(tc, test_a_contender_waits_for_a_host_stopped_inside_the_bakery);
	tcase_add_test(tc, test_a_contender_finds_the_lease_taken_inside_the_bakery);
	tcase_add_test(tc, test_a_contender_goes_on_once_the_host_it_waits_for_leaves);
	tcase_add_test(tc, test_a_revoked_client_learns_it_while_the_holder_is_stopped);
	tcase_add_test(tc, test_a_new_holder_does_not_wait_for_a_closed_window);
	tcase_add_test(tc, test_a_waiting_client_sees_the_lease_change_hands);
	tcase_add_test(tc, test_a_renewal_reaches_another_host_while_the_holder_is_stopped);
	tcase_add_test(tc, test_a_clients_beat_reaches_the_holder_while_it_is_stopped);
	tcase_add_test(tc, test_a_superseded_holder_leaves_the_lease_as_it_releases);
	tcase_add_test(tc, test_a_new_holder_watches_a_dead_reader_while_it_waits_for_a_window);
	tcase_add_test(tc, test_a_judge_of_another_host_sees_a_client_beat_again);
	tcase_add_test(tc, test_a_judge_counts_a_client_that_claimed_and_died_since_it_looked);
	tcase_add_test(tc, test_a_verify_counts_no_page_of_a_client_that_claimed_since_it_looked_leaked);
	tcase_add_test(tc, test_a_node_that_finds_an_entrys_door_closed_leaves_its_race_alone);
	tcase_add_test(tc, test_a_dead_hosts_node_entry_freed_by_a_stopped_holder_is_taken);
	tcase_add_test(tc, test_an_entry_whose_door_closed_on_no_winner_is_freed);
	tcase_add_test(tc, test_a_node_whose_entry_was_freed_does_not_attach_to_it);
	tcase_add_test(tc, test_a_holder_leaves_an_entry_taken_up_again_while_it_is_stopped);
	tcase_add_test(tc, test_a_holder_leaves_an_entry_whose_slot_is_claimed_while_it_is_stopped);
	tcase_add_test(tc, test_a_client_that_claims_a_dead_hosts_slot_is_answered);
	tcase_add_test(tc, test_a_host_that_mapped_the_pool_before_takes_a_dead_hosts_slot);
	tcase_add_test(tc, test_a_contender_waits_for_a_node_that_took_an_entry_below_it_as_it_chose);
	suite_add_tcase(s, tc);
	return s;
}

int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--host") == 0)
		return tu_host_serve(host_cmd);
	return tu_run_suite(leasesites_suite());
}
