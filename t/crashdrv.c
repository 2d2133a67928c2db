/* SPDX-License-Identifier: MIT */
/*
 * crashdrv.c -- one seeded crash or torture trial, driven by t/crash.sh
 * and t/torture.sh.
 *
 *   crashdrv --seed SEED --dir DIR [--torture] [--hosts] [--gc PATH]
 *            [--verbose]
 *
 * A fresh small pool in DIR/pool (4 KiB pages, lease period 200 ms,
 * client timeout 500 ms), then processes on simulated nodes (by
 * mkv_opts_set_node), each opening the pool itself:
 *
 *  - writers publish keys "w<child>-<index>" with their tu_fill pattern by
 *    put, alloc/fill/publish or publish_async/wait (several in flight);
 *  - deleters delete keys that writers acknowledged (each key claimed by
 *    one deleter at most, so a NOTFOUND is a lost key unless it was
 *    evicted);
 *  - readers get keys (some with MKV_VERIFY, some read-only handles), check
 *    every byte, hold the views a while, check again, release; they also
 *    call mkv_prefix_len, mkv_get_batch and mkv_exists;
 *  - evictors (torture) call mkv_pool_evict (a dry run when read-only)
 *    and check that the page counts add up.
 *
 * Every process announces what it is about to do in shared memory, and
 * every return of every call is counted by call and code and judged
 * against the codes marukv.h lists for that call (cd_rc()): an unlisted
 * code, MKV_E_INTERNAL, MKV_E_EXPIRED or a failure without a message
 * fails the trial.
 *
 * A crash trial: 2 or 3 writers, a deleter and 1 or 2 readers on nodes
 * "a" and "b", 8 MiB, no automatic eviction, 300-500 ms.  The driver
 * SIGKILLs a seeded subset of them at seeded moments: some at random, some
 * "by design" -- it parks the child right before a chosen call (alloc,
 * fill, publish, publish_async, wait, get, release, del...) and kills it
 * there, or lets it go and kills it a few microseconds into the call.
 *
 * A torture trial (--torture): 2-3 writers, 1-2 deleters, 2-3 readers and
 * maybe an evictor on three or four nodes ("a" to "d"), a pool of 2 to 6
 * MiB that fills up, automatic eviction on in two trials of three,
 * 1.5-3 s.  Besides kills (some of whichever process holds the lease,
 * found with mkv_pool_stat()), the driver SIGSTOPs seeded processes --
 * readers holding views, writers inside a publish, deleters, evictors,
 * the lease holder -- for seeded times: shorter than the lease period,
 * past it, or past the client timeout; then SIGCONTs or SIGKILLs them.
 * Readers hold views for up to 1.5 s across all that, checking every
 * byte every 50 ms and before the release; deleters often delete keys a
 * reader holds.  All processes share one kernel, where a client is judged
 * dead by a lock the kernel drops, never by its heartbeat: a stopped
 * client is never dead, so any MKV_E_EXPIRED fails the trial, and so does
 * any changed byte in a view.
 *
 * With --hosts (t/hostcrash.sh), under t/hostemu.so (LD_PRELOAD, with
 * HOSTEMU_DIR, HOSTEMU_POOL and HOSTEMU_HOST set), either shape runs on a
 * non-coherent pool with every node an emulated host of its own: each
 * child, forked before it opens anything of the pool, moves to its node's
 * cache (hostemu_become()) and claims its node's kernel (MARUKV_BOOT_ID),
 * so that nodes judge each other by heartbeat, and a crash trial spreads
 * its children over three nodes, each with one at least.  The driver is a
 * host and node of its own, HOSTEMU_HOST (no child's): it creates the
 * pool, watches it, runs marukv-gc and checks, all through that host's
 * cache.  The client timeout is then 2 s, and stops stay shorter than it
 * (a client of another host stopped for longer is taken for dead, its
 * calls fail with MKV_E_EXPIRED and its views may change: by design, not
 * checked here), so MKV_E_EXPIRED and a changed byte still fail a trial.
 * While a child is stopped, the driver does not look for the lease holder
 * (a stopped child may hold a lock of the emulator's that the look needs),
 * so an event aimed at the holder then finds none.
 * The children open the pool one after another: two hosts claiming client
 * slots at once may claim the same one (not safe yet, marukv(7)), and the
 * one whose claim was overwritten would fail its first call with
 * MKV_E_EXPIRED (see open_turn_wait() in crashproc.c).
 *
 * A writer records a key in shared memory only after the publish
 * returned success.  Then the survivors stop, the driver waits out the
 * client timeout, runs `marukv-gc --json -q reclaim POOL` as node "a",
 * with --hosts as its own (or mkv_pool_reclaim itself without --gc), and
 * checks, with a handle of its own (crashchk.c):
 *  - only the checker is left in the client table;
 *  - mkv_pool_verify(MKV_VERIFY_DEEP) finds no problem and no leaked page;
 *  - pages_used + free + quarantined + granted == total, none granted;
 *  - every key any writer tried is either absent or whole (length and
 *    every byte of its pattern), and the registry holds no other key;
 *  - every acknowledged key not deleted since is present and whole, but
 *    for at most as many as were evicted; every key deleted successfully
 *    is gone;
 *  - the pool still takes and returns new values.
 *
 * With --hosts the checks read through the driver's host, whose cache
 * holds the pool as it was when the driver created it (a host caches a
 * file whole when it maps it): a line the checks read without the
 * library invalidating it shows those old bytes, and a line a child's
 * host did not write back is not seen, since no child ran on that host.
 * The lines the children's hosts still hold dirty are left there.  And
 * every node must have had a cache of its own, else the trial was one
 * host's.
 *
 * Output: "# ..." lines of evidence, a "summary: ..." line and a
 * "stats: NAME=N ..." line of counts (t/crash.sh adds them up).  Exit 0
 * pass, 1 fail, 2 setup error.  Children that fail report through a
 * shared text and exit codes.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "crashdrv.h"

#define CD_MAXEV (2 * CD_MAXCH + 8)

/* ---- the plan ---- */

/* A kill, or a stop and what ends it. */
struct cd_event {
	double at_ms;
	int child;        /* -1: whichever child holds the lease then */
	int stop;         /* 0: SIGKILL; 1: SIGSTOP for stop_ms, then SIGCONT or SIGKILL */
	int then_kill;
	double stop_ms;
	int park;         /* phase to park the child at first, 0: a random moment */
	int inside;       /* parked: let it go and strike delay_us later */
	unsigned delay_us;
	/* a stop under way */
	int active, victim, ph, how, holder;
	double since, until_ms;
};

/* What the driver counts. */
static struct {
	int n;
	double t0, last_kill;
	struct mkv_pool *watch;  /* torture: a read-only handle, to find the lease holder */
	unsigned kills, parked, inside, holder_kills, holder_missed;
	unsigned stops, stop_class[3], holder_stops, stop_kills;
	unsigned kill_phase[PH_COUNT], stop_phase[PH_COUNT];
	uint64_t orphaned;
	char nodes[CD_MAXCH + 1], roles[CD_MAXCH + 1];
	void (*become)(const char *host);  /* --hosts: t/hostemu.c's hostemu_become */
} T;

static const char *const stop_class_name[3] = {
	"shorter than the lease period", "past the lease period", "past the client timeout",
};

static void
on_alarm(int sig)
{
	static const char msg[] = "# watchdog: the trial took too long, killing it\n";
	int i;

	(void)sig;
	for (i = 0; i < CD_MAXCH + 1; i++)
		if (watch_pids[i] > 0)
			kill(watch_pids[i], SIGKILL);
	(void)!write(1, msg, sizeof(msg) - 1);
	_exit(1);
}

/* Park the child of @p e at a seeded phase of its role, one time in three not. */
static void
plan_park(uint64_t *rng, struct cd_event *e)
{
	int role = sh->ch[e->child].role;

	if (tu_rand_range(rng, 0, 2) == 0)
		return;
	e->park = phases[role][tu_rand_range(rng, 0, n_phases[role] - 1)];
	e->inside = (int)tu_rand_range(rng, 0, 1);
	e->delay_us = (unsigned)tu_rand_range(rng, 0, 400);
}

/* The @p n children over @p nnodes nodes, each node with one at least. */
static void
spread(uint64_t *rng, int n, int nnodes)
{
	int perm[CD_MAXCH], i, j, t;

	/* the first nnodes of a random order get one each */
	for (i = 0; i < n; i++)
		perm[i] = i;
	for (i = n - 1; i > 0; i--) {
		j = (int)tu_rand_range(rng, 0, (uint64_t)i);
		t = perm[i], perm[i] = perm[j], perm[j] = t;
	}
	for (i = 0; i < n; i++) {
		struct cd_child *c = &sh->ch[perm[i]];

		c->node = i < nnodes ? i : (int)tu_rand_range(rng, 0, (uint64_t)nnodes - 1);
	}
}

/*
 * The crash trial's shape (as it always was: a seed gives the same trial;
 * with --hosts, three nodes).
 */
static int
crash_shape(uint64_t *rng, struct cd_event *ev, double *run_ms)
{
	int nw, nd, nr, n, i, nev = 0, have_a = 0, have_b = 0;

	sh->cfg = (struct cd_cfg){ .hosts = sh->cfg.hosts, .data_size = CD_DATA, .wmax = 240,
		.pause_us = { 1000, 5000 }, .del_pause_us = { 500, 3000 } };
	nw = (int)tu_rand_range(rng, 2, 3);
	nd = 1;
	nr = (int)tu_rand_range(rng, 1, 2);
	n = nw + nd + nr;
	for (i = 0; i < n; i++) {
		struct cd_child *c = &sh->ch[i];

		c->role = i < nw ? R_WRITER : i < nw + nd ? R_DELETER : R_READER;
		c->node = (int)tu_rand_range(rng, 0, 1);
		if (c->role == R_READER)
			c->flags = (tu_rand_range(rng, 0, 1) ? MKV_RDONLY : 0) |
				(tu_rand_range(rng, 0, 1) ? MKV_VERIFY : 0);
		have_a |= !c->node;
		have_b |= c->node;
	}
	if (!have_b)
		sh->ch[tu_rand_range(rng, 0, (uint64_t)n - 1)].node = 1;
	if (!have_a)
		sh->ch[0].node = 0;
	if (sh->cfg.hosts)
		spread(rng, n, 3);
	*run_ms = (double)tu_rand_range(rng, 300, 500);
	for (i = 0; i < n; i++) {
		if (tu_rand_range(rng, 0, 99) >= 55)
			continue;
		ev[nev].child = i;
		ev[nev].at_ms = (double)tu_rand_range(rng, 20, (uint64_t)*run_ms - 20);
		plan_park(rng, &ev[nev]);
		nev++;
	}
	if (nev == 0) {
		ev[0].child = (int)tu_rand_range(rng, 0, (uint64_t)n - 1);
		ev[0].at_ms = (double)tu_rand_range(rng, 20, (uint64_t)*run_ms - 20);
		nev = 1;
	}
	T.n = n;
	return nev;
}

/* The torture trial's shape (see the top of the file). */
static int
torture_shape(uint64_t *rng, struct cd_event *ev, double *run_ms)
{
	static const unsigned mib[] = { 2, 3, 4, 6 };
	int nw, nd, nr, ne, n, i, nev = 0;
	uint64_t run;

	sh->cfg = (struct cd_cfg){ .torture = 1, .hosts = sh->cfg.hosts, .wmax = CD_WMAX,
		.pause_us = { 1000, 6000 }, .del_pause_us = { 3000, 12000 } };
	sh->cfg.data_size = (uint64_t)mib[tu_rand_range(rng, 0, 3)] << 20;
	if (tu_rand_range(rng, 0, 2) != 0) {
		sh->cfg.wm_low = (unsigned)tu_rand_range(rng, 5, 20);
		sh->cfg.wm_high = sh->cfg.wm_low + (unsigned)tu_rand_range(rng, 5, 20);
	}
	nw = (int)tu_rand_range(rng, 2, 3);
	nd = (int)tu_rand_range(rng, 1, 2);
	nr = (int)tu_rand_range(rng, 2, 3);
	ne = (int)tu_rand_range(rng, 0, 1);
	n = nw + nd + nr + ne;
	spread(rng, n, (int)tu_rand_range(rng, 3, CD_MAXNODES));
	for (i = 0; i < n; i++) {
		struct cd_child *c = &sh->ch[i];

		c->role = i < nw ? R_WRITER : i < nw + nd ? R_DELETER :
			i < nw + nd + nr ? R_READER : R_EVICTOR;
		if (c->role == R_WRITER)
			c->flags = tu_rand_range(rng, 0, 3) == 0 ? MKV_VERIFY : 0;
		else if (c->role == R_READER)
			c->flags = (tu_rand_range(rng, 0, 1) ? MKV_RDONLY : 0) |
				(tu_rand_range(rng, 0, 1) ? MKV_VERIFY : 0);
		else if (c->role == R_EVICTOR)
			c->flags = tu_rand_range(rng, 0, 2) == 0 ? MKV_RDONLY : 0;
	}
	run = tu_rand_range(rng, 1500, 3000);
	*run_ms = (double)run;
	/* kills: some children, and often whichever holds the lease */
	for (i = 0; i < n; i++) {
		if (tu_rand_range(rng, 0, 99) >= 30)
			continue;
		ev[nev].child = i;
		ev[nev].at_ms = (double)tu_rand_range(rng, 100, run - 50);
		plan_park(rng, &ev[nev]);
		nev++;
	}
	if (tu_rand_range(rng, 0, 99) < 40) {
		ev[nev].child = -1;
		ev[nev].at_ms = (double)tu_rand_range(rng, 100, run - 50);
		nev++;
	}
	/*
	 * stops: of anyone, the holder one time in three; each over before the
	 * run ends; between hosts none past the client timeout
	 */
	for (i = (int)tu_rand_range(rng, 3, 7); i > 0; i--) {
		struct cd_event *e = &ev[nev++];
		unsigned cls = (unsigned)tu_rand_range(rng, 0, sh->cfg.hosts ? 1 : 2);

		e->stop = 1;
		e->stop_ms = (double)(cls == 0 ? tu_rand_range(rng, 20, 150) :
				cls == 1 ? tu_rand_range(rng, 260, 450) :
				tu_rand_range(rng, 650, 1200));
		e->at_ms = (double)tu_rand_range(rng, 50, run - (uint64_t)e->stop_ms - 50);
		e->then_kill = tu_rand_range(rng, 0, 99) < 20;
		e->child = tu_rand_range(rng, 0, 99) < 35 ? -1 :
			(int)tu_rand_range(rng, 0, (uint64_t)n - 1);
		if (e->child >= 0)
			plan_park(rng, e);
	}
	T.n = n;
	return nev;
}

/* ---- the events ---- */

static void
sleep_until_ms(double at_ms)
{
	tu_sleep_ms(at_ms - (tu_now() - T.t0) * 1000.0);
}

static int
child_of(uint32_t pid)
{
	for (int i = 0; pid != 0 && i < T.n; i++)
		if ((uint32_t)sh->ch[i].pid == pid && !sh->ch[i].exited)
			return i;
	return -1;
}

/*
 * Whether the watch handle may be used now.  Between emulated hosts not
 * while a child is stopped: it may be stopped inside one of the emulator's
 * line operations, holding a lock of lines that every host shares, and a
 * call here would wait for it while nothing continues it.
 */
static int
watch_usable(void)
{
	for (int i = 0; sh->cfg.hosts && i < T.n; i++)
		if (sh->ch[i].stopped)
			return 0;
	return T.watch != NULL;
}

/* The pid of the lease holder now (torture: through the watch handle), 0 if none. */
static uint32_t
holder_pid(void)
{
	struct mkv_stat st;
	int rc;

	if (!watch_usable())
		return 0;
	rc = mkv_pool_stat(T.watch, &st);
	if (cd_rc(C_STAT, rc, "of the watch") || rc < 0)
		return 0;
	check_pages(&st, "during the run");
	return st.lease_holder_pid;
}

/* The child holding the lease, waiting up to 100 ms for one to take it; -1 if none. */
static int
find_holder(void)
{
	double end = tu_now() + 0.1;
	int i;

	while ((i = child_of(holder_pid())) < 0 && tu_now() < end)
		tu_sleep_ms(5);
	return i;
}

/* Pages granted to the client of @p pid now (torture), 0 if unknown. */
static uint64_t
granted_to(uint32_t pid)
{
	struct mkv_client cl[CD_CLIENTS];
	size_t n = 0, i;
	int rc;

	if (!watch_usable())
		return 0;
	rc = mkv_pool_clients(T.watch, cl, CD_CLIENTS, &n);
	if (cd_rc(C_CLIENTS, rc, "of the watch") || rc < 0)
		return 0;
	for (i = 0; i < n && i < CD_CLIENTS; i++)
		if (cl[i].pid == pid)
			return cl[i].pages_granted;
	return 0;
}

/* A child that was reaped on its own: it must have exited 0. */
static void
reaped(int i, int status)
{
	struct cd_child *c = &sh->ch[i];

	c->exited = 1;
	c->status = status;
	watch_pids[i] = 0;
	if (status != 0)
		cd_bad("child %d (%s, node %c) exited with %d: %s", i, role_name[c->role], T.nodes[i],
				status, c->why[0] ? c->why : "no failure recorded");
}

static const char *
how_text(int how)
{
	return how == 1 ? " (parked before the call)" : how == 2 ? " (let go into the call)" :
		how == 3 ? " (while stopped)" : "";
}

/* A stop ends (by SIGCONT, a SIGKILL at its end, or another event's SIGKILL): count it. */
static void
stop_over(struct cd_event *e, const char *end)
{
	double ms = (tu_now() - e->since) * 1000.0;
	int cls = ms < CD_PERIOD ? 0 : ms < sh->cfg.timeout_ms ? 1 : 2;
	struct cd_child *c = &sh->ch[e->victim];

	e->active = 0;
	c->stopped = 0;
	T.stops++;
	T.stop_class[cls]++;
	T.stop_phase[e->ph]++;
	T.holder_stops += e->holder;
	printf("# stopped child %d (%s, node %c%s) at %.0f ms in %s%s for %.0f ms (%s), then %s\n",
			e->victim, role_name[c->role], T.nodes[e->victim],
			e->holder ? ", the lease holder" : "", (e->since - T.t0) * 1000.0,
			phase_name[e->ph], how_text(e->how), ms, stop_class_name[cls], end);
}

static void
kill_child(int i, int ph, int how, int holder, struct cd_event *ev, int nev)
{
	struct cd_child *c = &sh->ch[i];
	int rc, j;

	kill(c->pid, SIGKILL);
	__atomic_store_n(&c->park, 0, __ATOMIC_SEQ_CST);
	rc = tu_wait(c->pid);
	__atomic_add_fetch(&sh->kill_events, 1, __ATOMIC_SEQ_CST);
	c->exited = 1;
	c->killed = 1;
	c->status = rc;
	watch_pids[i] = 0;
	T.last_kill = tu_now();
	T.kills++;
	T.kill_phase[ph]++;
	T.parked += how == 1;
	T.inside += how == 2;
	T.holder_kills += holder;
	T.orphaned += granted_to((uint32_t)c->pid);
	for (j = 0; j < nev; j++)
		if (ev[j].active && ev[j].victim == i)
			stop_over(&ev[j], "SIGKILL");
	printf("# killed child %d (%s, node %c, pid %d%s) at %.0f ms in %s%s\n", i,
			role_name[c->role], T.nodes[i], (int)c->pid, holder ? ", the lease holder" : "",
			(tu_now() - T.t0) * 1000.0, phase_name[ph], how_text(how));
}

/*
 * Park the child at e->park if asked (then, with inside, let it go and
 * wait e->delay_us): 1 parked, 2 let go into the call, 0 not parked.
 */
static int
park(struct cd_child *c, const struct cd_event *e)
{
	double t;

	if (!e->park || c->stopped)
		return 0;
	__atomic_store_n(&c->park, e->park, __ATOMIC_SEQ_CST);
	t = tu_now() + 0.15;
	while (!__atomic_load_n(&c->parked, __ATOMIC_SEQ_CST) && tu_now() < t)
		tu_sleep_us(10);
	if (!__atomic_load_n(&c->parked, __ATOMIC_SEQ_CST))
		return 0;
	if (!e->inside)
		return 1;
	__atomic_store_n(&c->park, 0, __ATOMIC_SEQ_CST);
	/* spin: nanosleep's slack is larger than the delay */
	t = tu_now() + e->delay_us / 1e6;
	while (tu_now() < t)
		;
	return 2;
}

/* SIGSTOP child i and see it stopped; 0, or -1 if it ended first (reaped). */
static int
stop_child(int i)
{
	struct cd_child *c = &sh->ch[i];
	int status;
	pid_t r;

	kill(c->pid, SIGSTOP);
	do
		r = waitpid(c->pid, &status, WUNTRACED);
	while (r < 0 && errno == EINTR);
	if (r == c->pid && WIFSTOPPED(status))
		return 0;
	reaped(i, r != c->pid ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) :
			128 + WTERMSIG(status));
	return -1;
}

static void
start_event(struct cd_event *e, struct cd_event *ev, int nev)
{
	uint32_t hpid = holder_pid();
	int i = e->child >= 0 ? e->child : find_holder(), how, ph;
	struct cd_child *c;

	if (i < 0) {
		T.holder_missed++;
		printf("# no child held the lease at %.0f ms: nothing to %s\n",
				(tu_now() - T.t0) * 1000.0, e->stop ? "stop" : "kill");
		return;
	}
	c = &sh->ch[i];
	if (c->exited || (e->stop && c->stopped))
		return;
	if (e->child < 0)
		hpid = (uint32_t)c->pid;
	how = park(c, e);
	ph = __atomic_load_n(&c->phase, __ATOMIC_SEQ_CST);
	if (c->stopped)
		how = 3;
	if (!e->stop) {
		kill_child(i, ph, how, hpid == (uint32_t)c->pid, ev, nev);
		return;
	}
	if (stop_child(i) < 0)
		return;
	__atomic_store_n(&c->park, 0, __ATOMIC_SEQ_CST);
	c->stopped = 1;
	__atomic_add_fetch(&c->stops, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&sh->stop_events, 1, __ATOMIC_SEQ_CST);
	e->active = 1;
	e->victim = i;
	e->ph = ph;
	e->how = how;
	e->holder = hpid == (uint32_t)c->pid;
	e->since = tu_now();
	e->until_ms = (e->since - T.t0) * 1000.0 + e->stop_ms;
}

static void
end_stop(struct cd_event *e, struct cd_event *ev, int nev)
{
	struct cd_child *c = &sh->ch[e->victim];

	if (!e->then_kill) {
		kill(c->pid, SIGCONT);
		stop_over(e, "SIGCONT");
		return;
	}
	T.stop_kills++;
	kill_child(e->victim, e->ph, 3, e->holder, ev, nev);
}

/* Every event in time order, and the end of every stop at its time. */
static void
run_events(struct cd_event *ev, int nev)
{
	int next = 0, j, end;
	double at;

	for (;;) {
		at = next < nev ? ev[next].at_ms : -1;
		end = -1;
		for (j = 0; j < nev; j++)
			if (ev[j].active && (at < 0 || ev[j].until_ms < at)) {
				at = ev[j].until_ms;
				end = j;
			}
		if (at < 0)
			return;
		sleep_until_ms(at);
		if (end >= 0)
			end_stop(&ev[end], ev, nev);
		else
			start_event(&ev[next++], ev, nev);
	}
}

/* ---- the report ---- */

static void
stat_kv(const char *name, unsigned long long v)
{
	if (v)
		printf(" %s=%llu", name, v);
}

static void
report(uint64_t seed, int nev, unsigned long checked, uint64_t evictions, long long reclaimed)
{
	unsigned long pubs = 0, dels = 0, views = 0, across_kill = 0, across_stop = 0;
	unsigned long self_stop = 0, outlived = 0, long_holds = 0;
	unsigned long long evicted = 0, expired = 0;
	char name[64];
	int i, k;

	for (i = 0; i < T.n; i++) {
		struct cd_child *c = &sh->ch[i];

		pubs += c->role == R_WRITER ? c->ok : 0;
		dels += c->role == R_DELETER ? c->ok : 0;
		evicted += c->evicted;
		views += c->views;
		across_kill += c->across_kill;
		across_stop += c->across_stop;
		self_stop += c->self_stop;
		outlived += c->outlived;
		long_holds += c->long_holds;
	}
	for (i = 0; i < C_COUNT; i++)
		expired += sh->rc[i][K_EXPIRED];
	printf("# return codes:");
	for (i = 0; i < C_COUNT; i++)
		for (k = 0; k < K_COUNT; k++)
			if (sh->rc[i][k])
				printf(" %s:%s=%u", call_name[i], code_name[k], sh->rc[i][k]);
	printf("\n");
	if (sh->other_code)
		printf("# the first code of no name: %d\n", (int)sh->other_code);
	if (sh->warnings)
		printf("# the library warned %u times; the first: %s\n", sh->warnings, sh->warning);
	if (sh->cfg.hosts)
		snprintf(name, sizeof(name), "%s hosts, ", sh->cfg.torture ? "torture" : "crash");
	printf("summary: seed %#llx, %s%d procs (roles %s, nodes %s), %d events, %u kills (%u of the "
			"holder), %u stops (%u/%u/%u short/past lease/past timeout, %u of the holder), "
			"%lu acked publishes, %lu deletes, %llu evictions, %lu views (%lu held across "
			"kills, %lu across stops, %lu through their own stop, %lu outlived their key), "
			"%lu keys checked, %llu EXPIRED, reclaimed %lld pages%s",
			(unsigned long long)seed, sh->cfg.hosts ? name : "", T.n, T.roles, T.nodes, nev,
			T.kills, T.holder_kills, T.stops, T.stop_class[0], T.stop_class[1],
			T.stop_class[2], T.holder_stops, pubs, dels, (unsigned long long)evictions,
			views, across_kill, across_stop, self_stop, outlived, checked, expired,
			reclaimed, second_reclaim ? " (+ a second reclaim)" : "");
	if (sh->cfg.hosts)
		printf(", lines written back %llu, refreshed %llu, spontaneous %llu",
				(unsigned long long)sh->emu[EMU_WRITTEN],
				(unsigned long long)sh->emu[EMU_REFRESHED],
				(unsigned long long)sh->emu[EMU_SPONTANEOUS]);
	printf("\n");
	printf("stats:");
	stat_kv("kills", T.kills);
	stat_kv("keys", checked);
	stat_kv("reclaimed", reclaimed < 0 ? 0 : (unsigned long long)reclaimed);
	stat_kv("kills_parked", T.parked);
	stat_kv("kills_inside", T.inside);
	stat_kv("holder_kills", T.holder_kills);
	stat_kv("holder_missed", T.holder_missed);
	stat_kv("stops", T.stops);
	stat_kv("stops_short", T.stop_class[0]);
	stat_kv("stops_past_lease", T.stop_class[1]);
	stat_kv("stops_past_timeout", T.stop_class[2]);
	stat_kv("holder_stops", T.holder_stops);
	stat_kv("stops_then_killed", T.stop_kills);
	stat_kv("publishes", pubs);
	stat_kv("deletes", dels);
	stat_kv("evictions", evictions);
	stat_kv("evicted_by_call", evicted);
	stat_kv("views", views);
	stat_kv("views_across_kills", across_kill);
	stat_kv("views_across_stops", across_stop);
	stat_kv("views_through_own_stop", self_stop);
	stat_kv("views_outlived_key", outlived);
	stat_kv("long_holds", long_holds);
	stat_kv("expired", expired);
	stat_kv("orphaned_pages", T.orphaned);
	stat_kv("logged_reclaimed_pages", sh->log_pages);
	stat_kv("lease_taken", sh->lease_taken);
	stat_kv("warnings", sh->warnings);
	stat_kv("emu_written_back", sh->emu[EMU_WRITTEN]);
	stat_kv("emu_refreshed", sh->emu[EMU_REFRESHED]);
	stat_kv("emu_spontaneous", sh->emu[EMU_SPONTANEOUS]);
	for (i = 0; i < PH_COUNT; i++) {
		snprintf(name, sizeof(name), "kill_%s", phase_name[i]);
		stat_kv(name, T.kill_phase[i]);
		snprintf(name, sizeof(name), "stop_%s", phase_name[i]);
		stat_kv(name, T.stop_phase[i]);
	}
	for (i = 0; i < C_COUNT; i++)
		for (k = 0; k < K_COUNT; k++) {
			snprintf(name, sizeof(name), "rc_%s:%s", call_name[i], code_name[k]);
			stat_kv(name, sh->rc[i][k]);
		}
	printf("\n");
}

/* ---- the trial ---- */

/*
 * --hosts: every node's children saw the pool through a cache of their
 * host's own, which the emulator keeps in HOSTEMU_DIR/<host> as a
 * <inode>.cache file per pool file: else they shared the driver's, and the
 * trial was one host's.
 */
static void
check_host_caches(void)
{
	const char *emu = getenv("HOSTEMU_DIR");
	char dir[PATH_MAX];
	struct dirent *d;
	int i, n;
	DIR *dh;

	for (i = 0; i < CD_MAXNODES; i++) {
		if (strchr(T.nodes, node_names[i]) == NULL)
			continue;
		n = 0;
		snprintf(dir, sizeof(dir), "%s/%c", emu ? emu : "", node_names[i]);
		if ((dh = opendir(dir)) != NULL) {
			while ((d = readdir(dh)) != NULL)
				n += strstr(d->d_name, ".cache") != NULL;
			closedir(dh);
		}
		if (n == 0)
			cd_bad("node %c had no cache of its own in %s: no host of its own",
					node_names[i], dir);
	}
}

/*
 * --hosts: the driver's node is its host, HOSTEMU_HOST, which must be no
 * child's, and it claims that host's kernel; its children move to their
 * own hosts with the emulator's hostemu_become().  0, or -1 (said why).
 */
static int
host_setup(void)
{
	const char *host = getenv("HOSTEMU_HOST");

	*(void **)&T.become = dlsym(RTLD_DEFAULT, "hostemu_become");
	if (T.become == NULL || host == NULL || *host == '\0') {
		fprintf(stderr, "crashdrv: --hosts runs under t/hostemu.so with HOSTEMU_HOST set\n");
		return -1;
	}
	if (strlen(host) == 1 && strchr(node_names, *host) != NULL) {
		fprintf(stderr, "crashdrv: HOSTEMU_HOST %s is a child's node\n", host);
		return -1;
	}
	if (setenv("MARUKV_BOOT_ID", host, 1) < 0) {
		fprintf(stderr, "crashdrv: setenv: %s\n", strerror(errno));
		return -1;
	}
	drv_node = host;
	return 0;
}

static uint64_t
parse_u64(const char *s)
{
	return strtoull(s, NULL, 0);
}

/* Fork the children; each opens the pool itself.  0, or -1 (setup error). */
static int
fork_children(const char *path, uint64_t seed)
{
	static const char *node[CD_MAXNODES] = { "a", "b", "c", "d" };
	int i;

	for (i = 0; i < T.n; i++) {
		pid_t pid = tu_fork();

		if (pid < 0) {
			printf("# fork: %s\n", strerror(errno));
			return -1;
		}
		if (pid == 0) {
			me = i;
			alarm(0);
			signal(SIGALRM, SIG_DFL);
			/* its node's host, with nothing of the pool in hand yet */
			if (sh->cfg.hosts) {
				T.become(node[sh->ch[i].node]);
				if (setenv("MARUKV_BOOT_ID", node[sh->ch[i].node], 1) < 0)
					_exit(cd_fail(2, "setenv: %s", strerror(errno)));
			}
			switch (sh->ch[i].role) {
			case R_WRITER:
				_exit(writer(path, node[sh->ch[i].node], seed));
			case R_DELETER:
				_exit(deleter(path, node[sh->ch[i].node], seed));
			case R_READER:
				_exit(reader(path, node[sh->ch[i].node], seed));
			default:
				_exit(evictor(path, node[sh->ch[i].node], seed));
			}
		}
		sh->ch[i].pid = pid;
		watch_pids[i] = pid;
	}
	return 0;
}

/* All open before the clock starts. */
static void
wait_ready(void)
{
	double t = tu_now() + 15;
	int i, rc;

	for (i = 0; i < T.n; i++)
		while (!__atomic_load_n(&sh->ch[i].ready, __ATOMIC_ACQUIRE)) {
			rc = tu_wait_for(sh->ch[i].pid, 0);
			if (rc != -2) {
				printf("# child %d ended (%d) before the start: %s\n", i, rc, sh->why);
				nfail_parent++;
				sh->ch[i].exited = 1;
				sh->ch[i].status = rc;
				break;
			}
			if (tu_now() > t) {
				printf("# child %d did not open in 15 s\n", i);
				nfail_parent++;
				break;
			}
			tu_sleep_ms(1);
		}
}

/* Survivors finish their step, close and exit 0. */
static void
wait_survivors(void)
{
	double t = tu_now() + 15;
	int i, rc;

	for (i = 0; i < T.n; i++) {
		struct cd_child *c = &sh->ch[i];

		if (c->exited)
			continue;
		rc = tu_wait_for(c->pid, t - tu_now());
		if (rc == -2) {
			cd_bad("child %d (%s, node %c) did not finish in 15 s after stop; stuck in %s",
					i, role_name[c->role], T.nodes[i],
					phase_name[__atomic_load_n(&c->phase, __ATOMIC_SEQ_CST)]);
			kill(c->pid, SIGKILL);
			rc = tu_wait(c->pid);
			T.last_kill = tu_now();
			c->status = rc;
			c->exited = 1;
			watch_pids[i] = 0;
			continue;
		}
		reaped(i, rc);
	}
}

int
main(int argc, char **argv)
{
	const char *dir = NULL, *gc = NULL;
	static char path[600];
	static struct cd_event ev[CD_MAXEV];
	struct mkv_pool *pool;
	uint64_t seed = 1, rng, evictions = 0;
	int torture = 0, hosts = 0, nev, i, j, rc;
	double run_ms;
	long long reclaimed, gc_clients, gc_readers, extra;
	unsigned long checked;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = parse_u64(argv[++i]);
		else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--gc") == 0 && i + 1 < argc)
			gc = argv[++i];
		else if (strcmp(argv[i], "--torture") == 0)
			torture = 1;
		else if (strcmp(argv[i], "--hosts") == 0)
			hosts = 1;
		else if (strcmp(argv[i], "--verbose") == 0)
			verbose = 1;
		else {
			fprintf(stderr, "usage: crashdrv --seed SEED --dir DIR [--torture] [--hosts] "
					"[--gc PATH] [--verbose]\n");
			return 2;
		}
	}
	if (dir == NULL) {
		fprintf(stderr, "crashdrv: --dir is required\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (gc != NULL && access(gc, X_OK) != 0) {
		printf("# note: %s not executable, calling mkv_pool_reclaim instead\n", gc);
		gc = NULL;
	}
	if (hosts && host_setup() < 0)
		return 2;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "crashdrv: mkdir %s: %s\n", dir, strerror(errno));
		return 2;
	}
	snprintf(path, sizeof(path), "%s/pool", dir);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		fprintf(stderr, "crashdrv: mmap: %s\n", strerror(errno));
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm(torture ? 100 : 45);
	cd_log_install();

	/* the trial's shape, all from the seed */
	rng = seed;
	sh->cfg.hosts = hosts;
	nev = torture ? torture_shape(&rng, ev, &run_ms) : crash_shape(&rng, ev, &run_ms);
	sh->cfg.timeout_ms = hosts ? CD_HOST_TIMEOUT : CD_TIMEOUT;
	for (i = CD_MAXCH - 1; i >= T.n; i--)
		sh->ch[i].role = -1;
	for (i = 0; i < T.n; i++) {
		T.nodes[i] = node_names[sh->ch[i].node];
		T.roles[i] = "WDRE"[sh->ch[i].role];
	}
	/* in time order */
	for (i = 1; i < nev; i++)
		for (j = i; j > 0 && ev[j].at_ms < ev[j - 1].at_ms; j--) {
			struct cd_event tmp = ev[j];

			ev[j] = ev[j - 1];
			ev[j - 1] = tmp;
		}

	printf("# seed %#llx: %s trial, roles %s, nodes %s%s, %llu MiB, watermarks %u/%u, "
			"run %.0f ms\n", (unsigned long long)seed, torture ? "torture" : "crash",
			T.roles, T.nodes, hosts ? " (each an emulated host)" : "",
			(unsigned long long)(sh->cfg.data_size >> 20),
			sh->cfg.wm_low, sh->cfg.wm_high, run_ms);
	for (i = 0; i < nev; i++) {
		const struct cd_event *e = &ev[i];

		printf("# plan: at %.0f ms %s ", e->at_ms, e->stop ? "stop" : "kill");
		if (e->child < 0)
			printf("the lease holder");
		else
			printf("child %d (%s, node %c)", e->child, role_name[sh->ch[e->child].role],
					T.nodes[e->child]);
		if (e->park)
			printf(", parked before %s%s", phase_name[e->park],
					e->inside ? " then let go" : "");
		if (e->stop)
			printf(", for %.0f ms, then %s", e->stop_ms, e->then_kill ? "kill" : "continue");
		printf("\n");
	}

	rc = cd_open(path, MKV_CREATE, drv_node, &pool);
	if (rc < 0) {
		printf("# create %s: %s: %s\n", path, mkv_strerror(rc), mkv_errormsg());
		return 2;
	}
	mkv_pool_close(&pool);
	if (fork_children(path, seed) < 0)
		return 2;
	wait_ready();
	if (torture) {
		rc = cd_open(path, MKV_RDONLY, drv_node, &T.watch);
		if (cd_rc(C_OPEN, rc, path) || rc < 0)
			printf("# watch open: %s: %s\n", mkv_strerror(rc), mkv_errormsg());
	}
	__atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
	T.t0 = tu_now();
	run_events(ev, nev);
	mkv_pool_close(&T.watch);
	sleep_until_ms(run_ms);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < T.n; i++)
		__atomic_store_n(&sh->ch[i].park, 0, __ATOMIC_SEQ_CST);
	wait_survivors();
	if (sh->nfail)
		cd_bad("children reported %d failures; the first: %s", sh->nfail, sh->why);

	/* the dead of other nodes are dead once their heartbeat stood still this long */
	sleep_until_ms((T.last_kill - T.t0) * 1000.0 + sh->cfg.timeout_ms + 150);
	reclaimed = run_reclaim(gc, dir, path, &gc_clients, &gc_readers);
	extra = leftover_clients(path);
	if (extra > 0)
		reclaimed = (reclaimed < 0 ? 0 : reclaimed) + extra;
	checked = check_pool(path, T.n, &evictions);
	if (hosts) {
		cd_emu_count();
		check_host_caches();
	}
	printf("# reclaim: %lld pages, %lld clients, %lld readers%s\n", reclaimed, gc_clients,
			gc_readers, gc ? "" : " (mkv_pool_reclaim)");
	report(seed, nev, checked, evictions, reclaimed);
	alarm(0);
	return nfail_parent ? 1 : 0;
}
