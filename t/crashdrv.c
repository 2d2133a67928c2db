/* SPDX-License-Identifier: MIT */
/*
 * crashdrv.c -- one seeded crash trial, driven by t/crash.sh.
 *
 *   crashdrv --seed SEED --dir DIR [--gc PATH] [--verbose]
 *
 * A fresh small pool in DIR/pool (4 KiB pages, CD_DATA bytes, lease period
 * 200 ms, client timeout 500 ms), then processes on two simulated nodes
 * ("a" and "b", by mkv_opts_set_node), each opening the pool itself:
 *
 *  - writers publish keys "w<child>-<index>" with their tu_fill pattern by
 *    put, alloc/fill/publish or publish_async/wait (several in flight);
 *  - deleters delete keys that writers acknowledged (each key claimed by
 *    one deleter at most, so a NOTFOUND is a lost key);
 *  - readers get keys (some with MKV_VERIFY, some read-only handles), check
 *    every byte, hold the views a while, check again, release; they also
 *    call mkv_prefix_len, mkv_get_batch and mkv_exists.
 *
 * Every process announces what it is about to do in shared memory.  The
 * driver SIGKILLs a seeded subset of them at seeded moments: some at
 * random, some "by design" -- it parks the child right before a chosen
 * call (alloc, fill, publish, publish_async, wait, get, release, del...)
 * and kills it there, or lets it go and kills it a few microseconds into
 * the call.  A writer records a key in shared memory only after the
 * publish returned success.
 *
 * Then the survivors stop, the driver waits out the client timeout (for
 * the dead clients of node "b"), runs `marukv-gc --json -q reclaim POOL`
 * as node "a" (or mkv_pool_reclaim itself without --gc) and checks, with a
 * handle of its own:
 *  - only the checker is left in the client table;
 *  - mkv_pool_verify(MKV_VERIFY_DEEP) finds no problem and no leaked page;
 *  - pages_used + free + quarantined + granted == total, none granted;
 *  - every key any writer tried is either absent or whole (length and
 *    every byte of its pattern), and the registry holds no other key;
 *  - every acknowledged key not deleted since is present and whole, every
 *    key deleted successfully is gone;
 *  - the pool still takes and returns new values.
 *
 * Output: "# ..." lines of evidence, a "summary: ..." line and a
 * "stats: kills=K keys=N reclaimed=P" line.  Exit 0 pass, 1 fail, 2 setup
 * error.  Children that fail report through a shared text and exit codes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "crashdrv.h"

/* ---- the driver ---- */

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

struct cd_kill {
	int child;
	double at_ms;
	int park;     /* phase to park at, 0: a kill at a random moment */
	int inside;   /* parked: let it go and kill it this many us later */
	unsigned delay_us;
	int done;
};

static uint64_t
parse_u64(const char *s)
{
	return strtoull(s, NULL, 0);
}

int
main(int argc, char **argv)
{
	const char *dir = NULL, *gc = NULL;
	static char path[600];
	struct cd_kill kl[CD_MAXCH];
	struct mkv_pool *pool;
	uint64_t seed = 1, rng;
	unsigned kills_by_phase[PH_COUNT] = { 0 };
	int nw, nd, nr, n, i, j, rc, nkill = 0, kills = 0, parked_kills = 0, inside_kills = 0;
	int have_a = 0, have_b = 0;
	double run_ms, t0, last_kill = 0, t;
	long long reclaimed, gc_clients, gc_readers, extra;
	unsigned long checked;
	char nodes[CD_MAXCH + 1];

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = parse_u64(argv[++i]);
		else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--gc") == 0 && i + 1 < argc)
			gc = argv[++i];
		else if (strcmp(argv[i], "--verbose") == 0)
			verbose = 1;
		else {
			fprintf(stderr, "usage: crashdrv --seed SEED --dir DIR [--gc PATH] [--verbose]\n");
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
	alarm(CD_WATCHDOG);

	/* the trial's shape, all from the seed */
	rng = seed;
	nw = (int)tu_rand_range(&rng, 2, 3);
	nd = 1;
	nr = (int)tu_rand_range(&rng, 1, 2);
	n = nw + nd + nr;
	for (i = 0; i < n; i++) {
		struct cd_child *c = &sh->ch[i];

		c->role = i < nw ? R_WRITER : i < nw + nd ? R_DELETER : R_READER;
		c->node_b = (int)tu_rand_range(&rng, 0, 1);
		if (c->role == R_READER)
			c->flags = (tu_rand_range(&rng, 0, 1) ? MKV_RDONLY : 0) |
				(tu_rand_range(&rng, 0, 1) ? MKV_VERIFY : 0);
		have_a |= !c->node_b;
		have_b |= c->node_b;
	}
	if (!have_b)
		sh->ch[tu_rand_range(&rng, 0, (uint64_t)n - 1)].node_b = 1;
	if (!have_a)
		sh->ch[0].node_b = 0;
	for (i = 0; i < n; i++)
		nodes[i] = sh->ch[i].node_b ? 'b' : 'a';
	nodes[n] = '\0';
	for (i = CD_MAXCH - 1; i >= n; i--)
		sh->ch[i].role = -1;
	run_ms = (double)tu_rand_range(&rng, 300, 500);
	memset(kl, 0, sizeof(kl));
	for (i = 0; i < n; i++) {
		const int *ph;
		size_t nph;

		if (tu_rand_range(&rng, 0, 99) >= 55)
			continue;
		kl[nkill].child = i;
		kl[nkill].at_ms = (double)tu_rand_range(&rng, 20, (uint64_t)run_ms - 20);
		if (tu_rand_range(&rng, 0, 2) != 0) {
			switch (sh->ch[i].role) {
			case R_WRITER:
				ph = writer_phases, nph = n_writer_phases;
				break;
			case R_DELETER:
				ph = deleter_phases, nph = n_deleter_phases;
				break;
			default:
				ph = reader_phases, nph = n_reader_phases;
				break;
			}
			kl[nkill].park = ph[tu_rand_range(&rng, 0, nph - 1)];
			kl[nkill].inside = (int)tu_rand_range(&rng, 0, 1);
			kl[nkill].delay_us = (unsigned)tu_rand_range(&rng, 0, 400);
		}
		nkill++;
	}
	if (nkill == 0) {
		kl[0].child = (int)tu_rand_range(&rng, 0, (uint64_t)n - 1);
		kl[0].at_ms = (double)tu_rand_range(&rng, 20, (uint64_t)run_ms - 20);
		nkill = 1;
	}
	/* in time order */
	for (i = 1; i < nkill; i++)
		for (j = i; j > 0 && kl[j].at_ms < kl[j - 1].at_ms; j--) {
			struct cd_kill tmp = kl[j];

			kl[j] = kl[j - 1];
			kl[j - 1] = tmp;
		}

	printf("# seed %#llx: %d writers, %d deleter, %d readers, nodes %s, run %.0f ms\n",
			(unsigned long long)seed, nw, nd, nr, nodes, run_ms);
	for (i = 0; i < nkill; i++)
		printf("# plan: kill child %d (%s, node %c) at %.0f ms%s%s%s\n", kl[i].child,
				role_name[sh->ch[kl[i].child].role], nodes[kl[i].child], kl[i].at_ms,
				kl[i].park ? ", parked before " : "",
				kl[i].park ? phase_name[kl[i].park] : "",
				kl[i].park ? (kl[i].inside ? " then let go" : "") : "");

	rc = cd_open(path, MKV_CREATE, "a", &pool);
	if (rc < 0) {
		printf("# create %s: %s: %s\n", path, mkv_strerror(rc), mkv_errormsg());
		return 2;
	}
	mkv_pool_close(&pool);

	for (i = 0; i < n; i++) {
		pid_t pid = tu_fork();

		if (pid < 0) {
			printf("# fork: %s\n", strerror(errno));
			return 2;
		}
		if (pid == 0) {
			const char *node = sh->ch[i].node_b ? "b" : "a";

			me = i;
			alarm(0);
			signal(SIGALRM, SIG_DFL);
			switch (sh->ch[i].role) {
			case R_WRITER:
				_exit(writer(path, node, seed));
			case R_DELETER:
				_exit(deleter(path, node, seed));
			default:
				_exit(reader(path, node, seed));
			}
		}
		sh->ch[i].pid = pid;
		watch_pids[i] = pid;
	}
	/* all open before the clock starts */
	t = tu_now() + 15;
	for (i = 0; i < n; i++)
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
	__atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
	t0 = tu_now();

	for (i = 0; i < nkill; i++) {
		struct cd_kill *k = &kl[i];
		struct cd_child *c = &sh->ch[k->child];
		int ph, how = 0;  /* 0 random moment, 1 parked, 2 let go */

		tu_sleep_ms(k->at_ms - (tu_now() - t0) * 1000.0);
		if (c->exited)
			continue;
		if (k->park) {
			__atomic_store_n(&c->park, k->park, __ATOMIC_SEQ_CST);
			t = tu_now() + 0.15;
			while (!__atomic_load_n(&c->parked, __ATOMIC_SEQ_CST) && tu_now() < t)
				tu_sleep_us(10);
			if (__atomic_load_n(&c->parked, __ATOMIC_SEQ_CST)) {
				how = 1;
				if (k->inside) {
					__atomic_store_n(&c->park, 0, __ATOMIC_SEQ_CST);
					/* spin: nanosleep's slack is larger than the delay */
					t = tu_now() + k->delay_us / 1e6;
					while (tu_now() < t)
						;
					how = 2;
				}
			}
		}
		ph = __atomic_load_n(&c->phase, __ATOMIC_SEQ_CST);
		kill(c->pid, SIGKILL);
		__atomic_store_n(&c->park, 0, __ATOMIC_SEQ_CST);
		rc = tu_wait(c->pid);
		c->exited = 1;
		c->killed = 1;
		c->status = rc;
		watch_pids[k->child] = 0;
		last_kill = tu_now();
		kills++;
		kills_by_phase[ph]++;
		parked_kills += how == 1;
		inside_kills += how == 2;
		printf("# killed child %d (%s, node %c, pid %d) at %.0f ms in %s%s\n", k->child,
				role_name[c->role], nodes[k->child], (int)c->pid,
				(tu_now() - t0) * 1000.0, phase_name[ph],
				how == 1 ? " (parked before the call)" :
				how == 2 ? " (let go into the call)" : "");
	}
	tu_sleep_ms(run_ms - (tu_now() - t0) * 1000.0);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < n; i++)
		__atomic_store_n(&sh->ch[i].park, 0, __ATOMIC_SEQ_CST);

	/* survivors finish their step, close and exit 0 */
	t = tu_now() + 15;
	for (i = 0; i < n; i++) {
		struct cd_child *c = &sh->ch[i];

		if (c->exited)
			continue;
		rc = tu_wait_for(c->pid, t - tu_now());
		if (rc == -2) {
			cd_bad("child %d (%s, node %c) did not finish in 15 s after stop; stuck in %s",
					i, role_name[c->role], nodes[i],
					phase_name[__atomic_load_n(&c->phase, __ATOMIC_SEQ_CST)]);
			kill(c->pid, SIGKILL);
			rc = tu_wait(c->pid);
			last_kill = tu_now();
		} else if (rc != 0) {
			cd_bad("child %d (%s, node %c) exited with %d: %s", i, role_name[c->role],
					nodes[i], rc, sh->why);
		}
		c->exited = 1;
		c->status = rc;
		watch_pids[i] = 0;
	}
	if (sh->nfail)
		cd_bad("children reported %d failures; the first: %s", sh->nfail, sh->why);
	for (i = 0; i < sh->ncodes && i < 8; i++)
		printf("# failed calls with %s: %u\n", mkv_strerror(sh->code[i]), sh->code_n[i]);

	/* the dead of node b are dead once their heartbeat stood still this long */
	tu_sleep_ms((last_kill + (CD_TIMEOUT + 150) / 1000.0 - tu_now()) * 1000.0);
	reclaimed = run_reclaim(gc, dir, path, &gc_clients, &gc_readers);
	extra = leftover_clients(path);
	if (extra > 0)
		reclaimed = (reclaimed < 0 ? 0 : reclaimed) + extra;
	checked = check_pool(path, n);

	printf("# kills: ");
	for (i = 0; i < PH_COUNT; i++)
		if (kills_by_phase[i])
			printf("%s=%u ", phase_name[i], kills_by_phase[i]);
	printf("(%d parked, %d let go into the call)\n", parked_kills, inside_kills);
	{
		unsigned long pubs = 0, views = 0, dels = 0;

		for (i = 0; i < n; i++) {
			if (sh->ch[i].role == R_WRITER)
				pubs += sh->ch[i].ok;
			else if (sh->ch[i].role == R_DELETER)
				dels += sh->ch[i].ok;
			else
				views += sh->ch[i].views;
		}
		printf("summary: seed %#llx, %d procs (nodes %s), %d kills, %lu acked publishes, "
				"%lu deletes, %lu views, %lu keys checked, reclaimed %lld pages "
				"%lld clients %lld readers%s%s\n",
				(unsigned long long)seed, n, nodes, kills, pubs, dels, views, checked,
				reclaimed, gc_clients, gc_readers, gc ? "" : " (mkv_pool_reclaim)",
				second_reclaim ? " (+ a second reclaim)" : "");
	}
	printf("stats: kills=%d keys=%lu reclaimed=%lld", kills, checked,
			reclaimed < 0 ? 0 : reclaimed);
	for (i = 0; i < PH_COUNT; i++)
		if (kills_by_phase[i])
			printf(" kill_%s=%u", phase_name[i], kills_by_phase[i]);
	printf("\n");
	alarm(0);
	return nfail_parent ? 1 : 0;
}
