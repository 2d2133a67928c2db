/* SPDX-License-Identifier: MIT */
/*
 * takeover: how long writes stop when the lease holder is killed with
 * SIGKILL.
 *
 * Each trial has a fresh small pool with the given lease period.  A
 * holder process H opens it (taking the lease) and publishes one value,
 * then only serves through its holder thread.  A client C opens it on the
 * same node as H, under another node name, or as another host (another
 * node under another boot id: see below), and publishes in a loop
 * (deleting what it published a few keys back, so the pool stays small),
 * stamping every publish with CLOCK_MONOTONIC in shared memory.  The
 * parent lets C run, waits a random fraction of a lease period, notes t0,
 * sends H SIGKILL and reaps it.  The takeover time is the completion time
 * of the first publish C started after kill() returned, minus t0.  Then
 * the parent checks, with a read-only handle, that C holds the lease under
 * a higher generation, and after C stops that every publish C saw
 * acknowledged is there.
 *
 * A client that claims another kernel ($MARUKV_BOOT_ID) judges H by
 * heartbeat only, as a process on another host must, and may also have to
 * wait for a write window H left open until H's client heartbeat is a
 * client timeout old (marukv(7), COHERENCE MODEL).  It runs on the same
 * memory as H: the other-host row measures the protocol's waits, not the
 * cost of misses to far memory.  --noncoherent creates the pools
 * MKV_NONCOHERENT, and --both runs every row in both modes, alternating
 * trials, so that the ratio of their medians comes from one run.
 */
#include <marukv.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "options.h"

#define CMD "takeover"
#define NODE_H "bench-holder"
#define NODE_OTHER "bench-other"
#define BOOT_OTHER "bench-other-host"  /* $MARUKV_BOOT_ID of the other-host client */
#define VALUE_SIZE 4096U
#define POOL_PAGES 2048U      /* of 4 KiB: an 8 MiB data arena */
#define KEEP 16U              /* C deletes the key it published KEEP keys back */
#define WARM_PUBLISHES 200U   /* C's publishes before the kill */

enum row_kind { ROW_SAME, ROW_OTHER, ROW_HOST, ROW_COUNT };

static const char *const row_name[ROW_COUNT] = { "same-node", "other-node", "other-host" };

enum mode { M_COH, M_NONCOH, M_COUNT };

static const enum mkv_coherence mode_coherence[M_COUNT] = { MKV_COHERENT, MKV_NONCOHERENT };

struct to_opts {
	uint64_t trials, period_ms, client_timeout_ms, seed;
	const char *dir;
	int row[ROW_COUNT];       /* the rows to run */
	int mode[M_COUNT];        /* the modes to run */
	int noncoherent, both;
	int json;
};

/* Shared by the parent, H and C. */
struct to_shared {
	uint64_t t_kill;          /* parent: when kill() returned; 0 before */
	uint64_t h_ready;         /* H: open, published, holding */
	int32_t stop;             /* parent: C may stop */
	int32_t h_status, c_status;
	uint64_t c_ok;            /* C: acknowledged publishes */
	uint64_t c_dels;          /* C: deletes done (0 or already gone) */
	uint64_t c_failed;        /* C: publishes answered with an error */
	uint64_t c_last_ok;       /* C: index of its last acknowledged publish + 1 */
	uint64_t first_start, first_end;  /* C: first publish started after t_kill */
	char h_msg[256], c_msg[256];
	char fail_msg[256];       /* C: the first failed publish */
};

/* ---- options ---------------------------------------------------------------- */

static int to_parse(int argc, char **argv, struct to_opts *o)
{
	const struct opt opts[] = {
		{ "trials", OPT_U64, &o->trials, .arg = "N", .lo = 1, .hi = 10000,
			.help = "trials per row (default 20)" },
		{ "period-ms", OPT_U64, &o->period_ms, .arg = "MS", .lo = 50, .hi = 60000,
			.help = "lease period of the pools, 50 to 60000 (default 1000)" },
		{ "same-node", OPT_FLAG, &o->row[ROW_SAME], .set = 1,
			.help = "only the row of a client on the holder's node" },
		{ "other-node", OPT_FLAG, &o->row[ROW_OTHER], .set = 1,
			.help = "only the row of a client on another node\n(default: both rows)" },
		{ "other-host", OPT_FLAG, &o->row[ROW_HOST], .set = 1,
			.help = "the row of a client on another node under another\n"
				"boot id, as on another host (not in the default rows)" },
		{ "client-timeout-ms", OPT_U64, &o->client_timeout_ms, .arg = "MS", .lo = 100,
			.hi = 3600000, .help = "client timeout of the pools, 100 to 3600000\n"
				"(default the library's, 10000)" },
		{ "noncoherent", OPT_FLAG, &o->noncoherent, .set = 1,
			.help = "create the pools non-coherent (default coherent)" },
		{ "both", OPT_FLAG, &o->both, .set = 1,
			.help = "run every row on coherent and on non-coherent pools" },
		OPT_DIR(&o->dir, "where the scratch pools go (default /dev/shm)"),
		OPT_SEED(&o->seed, "seed of the keys and the kill delays (default 1)"),
		OPT_JSON(&o->json),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Time from kill -9 of the lease holder to the first publish completed by a\n"
		"client that takes the lease over, on the same node, on another node and as\n"
		"another host.\n" };
	int rc = opt_parse(&cmd, argc, argv);

	if (rc)
		return rc;
	if (!o->row[ROW_SAME] && !o->row[ROW_OTHER] && !o->row[ROW_HOST])
		o->row[ROW_SAME] = o->row[ROW_OTHER] = 1;
	o->mode[M_COH] = o->both || !o->noncoherent;
	o->mode[M_NONCOH] = o->both || o->noncoherent;
	return 0;
}

/* ---- H and C ---------------------------------------------------------------- */

static int open_as(const char *path, const char *node, struct mkv_pool **pool)
{
	struct mkv_opts *opts = NULL;
	int rc = mkv_opts_new(&opts);

	if (!rc)
		rc = mkv_opts_set_node(opts, node);
	if (!rc)
		rc = mkv_pool_open(path, 0, opts, pool);
	mkv_opts_delete(&opts);
	return rc;
}

static void fail_msg(char *msg, size_t len, int32_t *status, const char *what, int rc)
{
	*status = 1;
	snprintf(msg, len, "%s: %s", what, mkv_why(rc));
}

/* H: take the lease, publish, then serve until killed (or orphaned). */
static void holder_main(const char *path, struct to_shared *sh, pid_t parent)
{
	struct mkv_pool *pool = NULL;
	static const char key[] = "holder";
	char val[64] = "published by the first lease holder";
	int rc = open_as(path, NODE_H, &pool);

	if (rc)
		fail_msg(sh->h_msg, sizeof(sh->h_msg), &sh->h_status, "holder: mkv_pool_open", rc);
	else if ((rc = mkv_put(pool, key, sizeof(key) - 1, val, sizeof(val))))
		fail_msg(sh->h_msg, sizeof(sh->h_msg), &sh->h_status, "holder: mkv_put", rc);
	else
		__atomic_store_n(&sh->h_ready, 1, __ATOMIC_RELEASE);
	while (!sh->h_status && getppid() == parent)
		sleep_ns(10 * 1000 * 1000);
	mkv_pool_close(&pool);
	_exit(sh->h_status ? EXIT_ERR : EXIT_OK);
}

/* C: publish in a loop, keeping only the last KEEP keys, until told to stop. */
static void client_main(const char *path, enum row_kind kind, uint64_t seed,
		struct to_shared *sh, pid_t parent)
{
	struct mkv_pool *pool = NULL;
	uint8_t key[BENCH_KEY_LEN];
	int rc;

	/* Before the library reads the boot id, at open. */
	if (kind == ROW_HOST && setenv("MARUKV_BOOT_ID", BOOT_OTHER, 1) < 0) {
		snprintf(sh->c_msg, sizeof(sh->c_msg), "client: setenv: %s", strerror(errno));
		sh->c_status = 1;
		_exit(EXIT_ERR);
	}
	rc = open_as(path, kind == ROW_SAME ? NODE_H : NODE_OTHER, &pool);
	if (rc) {
		fail_msg(sh->c_msg, sizeof(sh->c_msg), &sh->c_status, "client: mkv_pool_open", rc);
		_exit(EXIT_ERR);
	}
	for (uint64_t i = 0; !__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE); i++) {
		struct mkv_buf buf;
		uint64_t start = now_ns(), end, t_kill;

		if (getppid() != parent)
			break;
		key_make(key, seed, 0, i);
		rc = mkv_alloc(pool, VALUE_SIZE, &buf);
		if (rc) {
			fail_msg(sh->c_msg, sizeof(sh->c_msg), &sh->c_status,
					"client: mkv_alloc", rc);
			break;
		}
		pattern_fill(buf.data, VALUE_SIZE, key);
		rc = mkv_publish(pool, key, sizeof(key), &buf);
		end = now_ns();
		if (rc) {
			/*
			 * Counted, and the loop goes on.  The buffer is left
			 * alone: after a refused publish its pages may no
			 * longer be ours, so giving them back could hand them
			 * out twice.
			 */
			if (!sh->c_failed)
				snprintf(sh->fail_msg, sizeof(sh->fail_msg), "key %" PRIu64
						": %s", i, mkv_why(rc));
			__atomic_store_n(&sh->c_failed, sh->c_failed + 1, __ATOMIC_RELEASE);
			continue;
		}
		t_kill = __atomic_load_n(&sh->t_kill, __ATOMIC_ACQUIRE);
		if (t_kill && start >= t_kill && !sh->first_end) {
			sh->first_start = start;
			__atomic_store_n(&sh->first_end, end, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&sh->c_last_ok, i + 1, __ATOMIC_RELEASE);
		__atomic_store_n(&sh->c_ok, sh->c_ok + 1, __ATOMIC_RELEASE);
		if (i >= KEEP) {
			key_make(key, seed, 0, i - KEEP);
			rc = mkv_del(pool, key, sizeof(key));
			if (rc && rc != MKV_E_NOTFOUND) {
				fail_msg(sh->c_msg, sizeof(sh->c_msg), &sh->c_status,
						"client: mkv_del", rc);
				break;
			}
			__atomic_store_n(&sh->c_dels, sh->c_dels + 1, __ATOMIC_RELEASE);
		}
	}
	mkv_pool_close(&pool);
	_exit(sh->c_status ? EXIT_ERR : EXIT_OK);
}

/* ---- one trial ------------------------------------------------------------------ */

struct trial {
	pid_t h, c;
	struct to_shared *sh;
	struct mkv_pool *ro;      /* the parent's read-only handle */
};

/* Kill and reap a child still running (error paths). */
static void kill_reap(pid_t *pid)
{
	if (*pid > 0) {
		(void)kill(*pid, SIGKILL);
		(void)child_reap(*pid, CMD, "child", 1);
	}
	*pid = 0;
}

/* The child exited (reaped here, *pid zeroed) or is still running. */
static int gone(pid_t *pid)
{
	int ws;
	pid_t r = *pid > 0 ? waitpid(*pid, &ws, WNOHANG) : 0;

	if (r == *pid || (r < 0 && errno == ECHILD)) {
		*pid = 0;
		return 1;
	}
	return 0;
}

/* Poll until *flag is nonzero, the child dies, or timeout; 0 when set. */
static int wait_for(const uint64_t *flag, pid_t *child, uint64_t timeout_ns)
{
	uint64_t deadline = now_ns() + timeout_ns;

	while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
		if (gone(child) || now_ns() > deadline)
			return -1;
		sleep_ns(200 * 1000);
	}
	return 0;
}

static int create_pool(const struct to_opts *o, enum mode m, const char *path)
{
	struct mkv_opts *opts = NULL;
	struct mkv_pool *pool = NULL;
	int rc = mkv_opts_new(&opts);

	if (!rc)
		rc = mkv_opts_set_page_size(opts, 4096);
	if (!rc)
		rc = mkv_opts_set_data_size(opts, POOL_PAGES * 4096ULL);
	if (!rc)
		rc = mkv_opts_set_lease_period(opts, (uint32_t)o->period_ms);
	if (!rc)
		rc = mkv_opts_set_client_timeout(opts, (uint32_t)o->client_timeout_ms);
	if (!rc)
		rc = mkv_opts_set_coherence(opts, mode_coherence[m]);
	if (!rc)
		rc = mkv_opts_set_node(opts, NODE_H);
	if (!rc)
		rc = mkv_pool_open(path, MKV_CREATE, opts, &pool);
	mkv_opts_delete(&opts);
	mkv_pool_close(&pool);
	if (rc)
		fprintf(stderr, PROG " " CMD ": %s: %s\n", path, mkv_why(rc));
	return rc;
}

static int stat_fail(const char *path, int rc)
{
	fprintf(stderr, PROG " " CMD ": %s: mkv_pool_stat: %s\n", path, mkv_why(rc));
	return EXIT_ERR;
}

/* Run one trial in the pool at path; its takeover time in *ns. */
static int run_trial(const struct to_opts *o, enum row_kind kind, enum mode m, uint64_t n,
		const char *path, uint64_t *rng, uint64_t *ns, uint64_t *failed)
{
	const uint64_t period = o->period_ms * 1000000ULL;
	const uint64_t client_timeout = o->client_timeout_ms * 1000000ULL;
	struct trial t = { 0 };
	struct mkv_stat st;
	uint64_t t0, generation;
	uint64_t key_seed = o->seed ^ fmix64((kind * M_COUNT + m) * 1000003ULL + n + 1);
	uint8_t key[BENCH_KEY_LEN];
	char what[64];            /* the row and mode, for messages */
	pid_t self = getpid();
	int rc, status = EXIT_ERR;

	snprintf(what, sizeof(what), "%s %s", row_name[kind],
			mkv_coherence_name(mode_coherence[m]));
	if (create_pool(o, m, path))
		return EXIT_ERR;
	t.sh = shared_alloc(sizeof(*t.sh));
	if (!t.sh) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return EXIT_ERR;
	}
	rc = mkv_pool_open(path, MKV_RDONLY, NULL, &t.ro);
	if (rc) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", path, mkv_why(rc));
		goto out;
	}
	if ((t.h = child_fork(CMD)) < 0)
		goto out;
	if (t.h == 0)
		holder_main(path, t.sh, self);
	if (wait_for(&t.sh->h_ready, &t.h, 10 * 1000000000ULL)) {
		fprintf(stderr, PROG " " CMD ": holder: %s\n",
				t.sh->h_status ? t.sh->h_msg : "not ready within 10 s");
		goto out;
	}
	if ((rc = mkv_pool_stat(t.ro, &st))) {
		status = stat_fail(path, rc);
		goto out;
	}
	if (st.lease_holder_pid != (uint32_t)t.h) {
		fprintf(stderr, PROG " " CMD ": the lease holder is pid %" PRIu32
				", not the holder process %ld\n", st.lease_holder_pid, (long)t.h);
		goto out;
	}
	generation = st.lease_generation;
	if (st.coherence != (uint32_t)mode_coherence[m] ||
	    st.client_timeout_ms != o->client_timeout_ms) {
		fprintf(stderr, PROG " " CMD ": %s: the pool is %s with a client timeout of %" PRIu32
				" ms\n", what, mkv_coherence_name(st.coherence), st.client_timeout_ms);
		goto out;
	}
	if ((t.c = child_fork(CMD)) < 0)
		goto out;
	if (t.c == 0)
		client_main(path, kind, key_seed, t.sh, self);
	while (__atomic_load_n(&t.sh->c_ok, __ATOMIC_ACQUIRE) < WARM_PUBLISHES) {
		if (gone(&t.c)) {
			fprintf(stderr, PROG " " CMD ": client: %s\n",
					t.sh->c_status ? t.sh->c_msg : "exited");
			goto out;
		}
		sleep_ns(200 * 1000);
	}
	/* A random phase against the holder's heartbeat. */
	sleep_ns(rng_next(rng) % (period / 4));
	t0 = now_ns();
	if (kill(t.h, SIGKILL) < 0) {
		fprintf(stderr, PROG " " CMD ": kill: %s\n", strerror(errno));
		goto out;
	}
	__atomic_store_n(&t.sh->t_kill, now_ns(), __ATOMIC_RELEASE);
	/* Reaped at once: a zombie still counts as alive on its node. */
	(void)child_reap(t.h, CMD, "holder", 1);
	t.h = 0;
	/* An other-host client may wait out H's write window: a client timeout. */
	if (wait_for(&t.sh->first_end, &t.c, 10 * period + 2 * client_timeout +
				10 * 1000000000ULL)) {
		fprintf(stderr, PROG " " CMD ": %s client: %s\n", what,
				t.sh->c_status ? t.sh->c_msg : "no publish completed within"
				" 10 lease periods + 2 client timeouts + 10 s of the kill");
		goto out;
	}
	*ns = t.sh->first_end - t0;
	if ((rc = mkv_pool_stat(t.ro, &st))) {
		status = stat_fail(path, rc);
		goto out;
	}
	status = EXIT_OK;
	if (st.lease_holder_pid != (uint32_t)t.c || st.lease_generation <= generation) {
		fprintf(stderr, PROG " " CMD ": %s trial %" PRIu64 ": lease holder pid %" PRIu32
				" generation %" PRIu64 "; expected the client, pid %ld, above %"
				PRIu64 "\n", what, n + 1, st.lease_holder_pid,
				st.lease_generation, (long)t.c, generation);
		status = EXIT_VERIFY;
	}
	__atomic_store_n(&t.sh->stop, 1, __ATOMIC_RELEASE);
	rc = child_reap(t.c, CMD, "client", 0);
	t.c = 0;
	if (rc != 0) {
		fprintf(stderr, PROG " " CMD ": client: %s\n",
				t.sh->c_status ? t.sh->c_msg : "failed");
		status = EXIT_ERR;
		goto out;
	}
	*failed = t.sh->c_failed;
	if (t.sh->c_failed) {
		fprintf(stderr, PROG " " CMD ": %s trial %" PRIu64 ": %" PRIu64
				" publish%s refused across the takeover; first: %s\n",
				what, n + 1, t.sh->c_failed,
				t.sh->c_failed == 1 ? "" : "es", t.sh->fail_msg);
		status = EXIT_VERIFY;
	}
	/* Every acknowledged publish is there: H's one, C's not deleted. */
	if ((rc = mkv_pool_stat(t.ro, &st))) {
		status = stat_fail(path, rc);
		goto out;
	}
	key_make(key, key_seed, 0, t.sh->c_last_ok - 1);
	rc = mkv_exists(t.ro, key, sizeof(key));
	if (rc < 0) {
		fprintf(stderr, PROG " " CMD ": mkv_exists: %s\n", mkv_why(rc));
		status = EXIT_ERR;
	} else if (st.entries != 1 + t.sh->c_ok - t.sh->c_dels || rc != 1) {
		fprintf(stderr, PROG " " CMD ": %s trial %" PRIu64 ": %" PRIu64
				" entries, expected %" PRIu64 "; last acknowledged key %s\n",
				what, n + 1, st.entries, 1 + t.sh->c_ok - t.sh->c_dels,
				rc == 1 ? "present" : "missing");
		status = EXIT_VERIFY;
	}
out:
	kill_reap(&t.h);
	kill_reap(&t.c);
	mkv_pool_close(&t.ro);
	shared_free(t.sh, sizeof(*t.sh));
	return status;
}

/* ---- results ---------------------------------------------------------------------- */

struct to_row {
	enum row_kind kind;
	enum mode mode;
	struct summary s;         /* nanoseconds */
	uint64_t failed;          /* publishes refused, over all trials */
	uint64_t long_trials;     /* trials of a client timeout or more */
	double ratio;             /* non-coherent: median over the coherent one's, or NaN */
};

static void print_text(const struct to_opts *o, const struct to_row *rows, size_t n)
{
	printf("takeover: lease period %" PRIu64 " ms, client timeout %" PRIu64 " ms, %s pools, %"
			PRIu64 " trial%s per row, %s; kill -9 of the holder to the client's first"
			" publish, ms\n", o->period_ms, o->client_timeout_ms,
			o->both ? "coherent and non-coherent" :
			mkv_coherence_name(mode_coherence[o->noncoherent ? M_NONCOH : M_COH]),
			o->trials, o->trials == 1 ? "" : "s", o->dir);
	printf("%-10s %-12s %7s %10s %10s %10s %10s %7s %7s %7s\n", "client", "memory", "trials",
			"median", "min", "p90", "max", "failed", "long", "nc/c");
	for (size_t i = 0; i < n; i++) {
		printf("%-10s %-12s %7" PRIu64 " %10.2f %10.2f %10.2f %10.2f %7" PRIu64 " %7"
				PRIu64, row_name[rows[i].kind],
				mkv_coherence_name(mode_coherence[rows[i].mode]), o->trials,
				rows[i].s.median / 1e6, rows[i].s.min / 1e6, rows[i].s.p90 / 1e6,
				rows[i].s.max / 1e6, rows[i].failed, rows[i].long_trials);
		if (isnan(rows[i].ratio))
			printf(" %7s\n", "-");
		else
			printf(" %7.2f\n", rows[i].ratio);
	}
}

static void print_json(const struct to_opts *o, const struct to_row *rows, size_t n)
{
	printf("{\n  \"command\": \"takeover\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"period_ms\": %" PRIu64 ",\n  \"client_timeout_ms\": %" PRIu64
			",\n  \"trials\": %" PRIu64 ",\n  \"seed\": %" PRIu64 ",\n  \"rows\": [",
			o->period_ms, o->client_timeout_ms, o->trials, o->seed);
	for (size_t i = 0; i < n; i++) {
		const struct summary *s = &rows[i].s;

		printf("%s\n    { \"client\": \"%s\", \"coherence\": \"%s\", \"median_ns\": ",
				i ? "," : "", row_name[rows[i].kind],
				mkv_coherence_name(mode_coherence[rows[i].mode]));
		json_number(stdout, s->median, 0);
		printf(", \"min_ns\": ");
		json_number(stdout, s->min, 0);
		printf(", \"p90_ns\": ");
		json_number(stdout, s->p90, 0);
		printf(", \"max_ns\": ");
		json_number(stdout, s->max, 0);
		printf(", \"failed_publishes\": %" PRIu64 ", \"long_trials\": %" PRIu64
				", \"ratio_noncoherent\": ", rows[i].failed, rows[i].long_trials);
		json_number(stdout, rows[i].ratio, 4);
		printf(" }");
	}
	printf("\n  ]\n}\n");
}

/* One trial of row k in mode m, in a scratch pool of its own. */
static int trial_in_scratch(const struct to_opts *o, enum row_kind k, enum mode m, uint64_t n,
		uint64_t *rng, double *v, uint64_t *failed, int *verify)
{
	char *dir = scratch_dir(o->dir, CMD), *path = NULL;
	uint64_t ns = 0, f = 0;
	int status;

	if (!dir || !(path = path_join(dir, "pool"))) {
		if (dir)
			fprintf(stderr, PROG " " CMD ": out of memory\n");
		status = EXIT_ERR;
	} else {
		status = run_trial(o, k, m, n, path, rng, &ns, &f);
		*v = (double)ns;
		*failed += f;
		/* A failed check still measured a takeover: go on. */
		if (status == EXIT_VERIFY) {
			*verify = 1;
			status = EXIT_OK;
		}
	}
	if (dir && scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(path);
	free(dir);
	return status;
}

int cmd_takeover(int argc, char **argv)
{
	struct to_opts o = { .trials = 20, .period_ms = 1000,
		.client_timeout_ms = MKV_DEFAULT_CLIENT_TIMEOUT_MS, .seed = 1, .dir = "/dev/shm" };
	struct to_row rows[ROW_COUNT * M_COUNT];
	uint64_t rng;
	double *v[M_COUNT] = { NULL };
	size_t nrows = 0;
	int rc, status = EXIT_OK, verify = 0;

	rc = to_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
	rng = o.seed;
	for (int m = 0; m < M_COUNT; m++)
		if (!(v[m] = calloc(o.trials, sizeof(*v[m])))) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			status = EXIT_ERR;
		}
	for (int k = 0; k < ROW_COUNT && status == EXIT_OK; k++) {
		uint64_t failed[M_COUNT] = { 0 };

		if (!o.row[k])
			continue;
		/* The modes' trials alternate, so that drift hits both alike. */
		for (uint64_t n = 0; n < o.trials && status == EXIT_OK; n++)
			for (int m = 0; m < M_COUNT && status == EXIT_OK; m++)
				if (o.mode[m])
					status = trial_in_scratch(&o, (enum row_kind)k,
							(enum mode)m, n, &rng, &v[m][n],
							&failed[m], &verify);
		for (int m = 0; m < M_COUNT && status == EXIT_OK; m++) {
			struct to_row *r = &rows[nrows];

			if (!o.mode[m])
				continue;
			r->kind = (enum row_kind)k;
			r->mode = (enum mode)m;
			r->failed = failed[m];
			/*
			 * Only a new holder that waited out a dead holder's
			 * write window takes this long: the bimodal other-host
			 * row's median depends on how many did.
			 */
			r->long_trials = 0;
			for (uint64_t n = 0; n < o.trials; n++)
				r->long_trials += v[m][n] >= o.client_timeout_ms * 1e6;
			r->ratio = NAN;
			if (summarize(v[m], o.trials, &r->s) < 0) {
				fprintf(stderr, PROG " " CMD ": out of memory\n");
				status = EXIT_ERR;
			}
			if (m == M_NONCOH && o.mode[M_COH])
				r->ratio = r->s.median / rows[nrows - 1].s.median;
			nrows++;
		}
	}
	if (status == EXIT_OK) {
		if (o.json)
			print_json(&o, rows, nrows);
		else
			print_text(&o, rows, nrows);
	}
	for (int m = 0; m < M_COUNT; m++)
		free(v[m]);
	return status == EXIT_OK && verify ? EXIT_VERIFY : status;
}
