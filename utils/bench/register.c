/* SPDX-License-Identifier: MIT */
/*
 * register: registrations per second with W writer processes, marukv
 * against a raw LMDB peer, measured in the same run.
 *
 * marukv: the parent creates a fresh pool and keeps it open, so it holds
 * the single-writer lease and its holder thread commits what the writers
 * forward through their request rings (group commit).  W forked writers
 * open the pool and, per key, mkv_alloc + fill + mkv_publish (sync), or
 * mkv_publish_async with a window of tickets in flight (async).
 *
 * raw LMDB: W processes share a fresh LMDB environment on the same
 * filesystem, opened as the holder of a coherent pool opens its registry
 * (MDB_WRITEMAP), each taking LMDB's write lock itself: per key, the
 * payload copied into a shared mapping of a data file and persisted as
 * marukv persists it (msync, but on a file in memory, where marukv does
 * not: peer_in_memory()), then one write txn doing what a marukv
 * registration does in the registry: key -> an entry in the main database
 * (MDB_NOOVERWRITE) as long as marukv's, whose length the first marukv run
 * of a row reads from its pool (peer_entry_len()), big-endian page -> key
 * in "pages", commit with LMDB's default (synchronous) flags.
 *
 * holder: the parent itself, which holds the lease, publishes as many
 * keys as one sync writer, committing them in its own thread: what a
 * forwarded sync publish is measured against.
 *
 * Every writer gets ready (open, buffers), then all start together; a
 * run's rate is the registrations of all writers over the time from the
 * start to the last writer's end.  Its CPU time per registration is the
 * user and system time of the parent (the lease holder's thread) and of
 * the writers, from getrusage, over the registrations.  Each (writers,
 * repeat) runs the four modes back to back on fresh files; figures are
 * medians over the repeats and the ratios are medians of per-repeat
 * ratios.
 */
#include <marukv.h>

#include <lmdb.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include "bench.h"
#include "options.h"

#define CMD "register"
#define MAX_ROWS 16
#define PAGE BENCH_PAGE

enum mode { M_SYNC, M_ASYNC, M_LMDB, M_HOLDER, M_COUNT };

static const char *const mode_name[M_COUNT] = { "marukv_sync", "marukv_async", "lmdb",
	"marukv_holder" };

struct reg_opts {
	uint64_t writers[MAX_ROWS];
	size_t nwriters;
	uint64_t keys, value_size, repeat, window, seed;
	const char *dir;
	int json;
};

/* One run's geometry. */
struct geom {
	uint64_t writers, npages, data_pages, max_clients;
	uint64_t registry_size;   /* from the marukv pool; the peer's map size */
	size_t entry_len;         /* from the marukv pool; the peer's values */
};

/* What a writer reports, in shared memory. */
struct wout {
	int32_t status;           /* 0, or nonzero: msg says why */
	int32_t pad_;
	uint64_t done;            /* registrations completed */
	uint64_t t_end;
	char msg[256];
};

struct wshared {
	int abort;                /* the parent gave up: do not run */
	struct wout out[];
};

/* ---- options ---------------------------------------------------------------- */

static int reg_parse(int argc, char **argv, struct reg_opts *o)
{
	const struct opt opts[] = {
		{ "writers", OPT_U64_LIST, o->writers, .arg = "LIST", .lo = 1,
			.hi = MKV_MAX_CLIENTS_LIMIT - 1, .max = MAX_ROWS, .count = &o->nwriters,
			.items = "counts",
			.help = "comma-separated writer counts (default 1,2,4,8)" },
		{ "keys", OPT_U64, &o->keys, .arg = "N", .lo = 1, .hi = 1U << 24,
			.help = "registrations per writer and run (default 5000)" },
		{ "value-size", OPT_SIZE, &o->value_size, .arg = "BYTES", .lo = 1,
			.hi = 1U << 24,
			.help = "bytes per value, k/m/g suffixes allowed (default 4096)" },
		OPT_REPEAT(&o->repeat, "runs per writer count; medians are reported (default 5)"),
		{ "window", OPT_U64, &o->window, .arg = "N", .lo = 1, .hi = 1024,
			.help = "async publishes in flight per writer (default 32, MKV_ASYNC_MAX)" },
		OPT_DIR(&o->dir, "where the scratch pools go (default /dev/shm)"),
		OPT_SEED(&o->seed, "seed of the keys (default 1)"),
		OPT_JSON(&o->json),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Registrations per second with W writer processes: marukv (forwarded to the\n"
		"lease holder, group commit; sync and async publishes) and a raw LMDB peer\n"
		"(each process taking LMDB's write lock itself), in the same run.\n" };

	return opt_parse(&cmd, argc, argv);
}

/* ---- writers ------------------------------------------------------------------ */

static void wfail(struct wout *w, const char *what, const char *why)
{
	w->status = 1;
	snprintf(w->msg, sizeof(w->msg), "%s: %s", what, why);
}

/* The value every writer copies, with its key stamped over the first bytes. */
static void *value_make(const struct reg_opts *o, uint64_t w)
{
	uint8_t key[BENCH_KEY_LEN];
	void *v = malloc(o->value_size);

	if (v) {
		key_make(key, o->seed, ~w, 0);
		pattern_fill(v, o->value_size, key);
	}
	return v;
}

static void stamp(void *dst, const void *src, size_t len, const uint8_t key[BENCH_KEY_LEN])
{
	memcpy(dst, src, len);
	memcpy(dst, key, len < BENCH_KEY_LEN ? len : BENCH_KEY_LEN);
}

/* Wait for the oldest async publish in flight. */
static int ticket_wait(struct mkv_pool *pool, struct mkv_ticket *t, uint64_t window,
		uint64_t *head, uint64_t *inflight, struct wout *w)
{
	int rc = mkv_wait(pool, &t[*head % window]);

	if (rc < 0) {
		wfail(w, "mkv_wait", mkv_why(rc));
		return rc;
	}
	(*head)++;
	(*inflight)--;
	w->done++;
	return 0;
}

/* Writer idx's keys into pool; w->status tells whether they all went in. */
static void publish_keys(const struct reg_opts *o, struct mkv_pool *pool, uint64_t idx,
		int async, struct wout *w)
{
	struct mkv_ticket *t = calloc(o->window, sizeof(*t));
	void *val = value_make(o, idx);
	uint64_t head = 0, inflight = 0;
	int rc;

	if (!t || !val) {
		wfail(w, "writer", "out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < o->keys; i++) {
		uint8_t key[BENCH_KEY_LEN];
		struct mkv_buf buf;

		if (async && inflight == o->window &&
		    ticket_wait(pool, t, o->window, &head, &inflight, w) < 0)
			goto out;
		key_make(key, o->seed, idx, i);
		rc = mkv_alloc(pool, o->value_size, &buf);
		if (rc < 0) {
			wfail(w, "mkv_alloc", mkv_why(rc));
			goto out;
		}
		stamp(buf.data, val, o->value_size, key);
		if (async)
			rc = mkv_publish_async(pool, key, sizeof(key), &buf,
					&t[(head + inflight) % o->window]);
		else
			rc = mkv_publish(pool, key, sizeof(key), &buf);
		if (rc < 0) {
			wfail(w, async ? "mkv_publish_async" : "mkv_publish",
					mkv_why(rc));
			(void)mkv_abort(pool, &buf);
			goto out;
		}
		if (async)
			inflight++;
		else
			w->done++;
	}
	while (inflight)
		if (ticket_wait(pool, t, o->window, &head, &inflight, w) < 0)
			goto out;
	w->t_end = now_ns();
out:
	free(t);
	free(val);
}

static void writer_mkv(const struct reg_opts *o, const char *path, uint64_t idx, int async,
		struct gate *g, struct wshared *sh)
{
	struct wout *w = &sh->out[idx];
	struct mkv_pool *pool = NULL;
	int rc = mkv_pool_open(path, 0, NULL, &pool);

	if (rc < 0)
		wfail(w, "mkv_pool_open", mkv_why(rc));
	else if (gate_ready(g) == 0 && !__atomic_load_n(&sh->abort, __ATOMIC_ACQUIRE))
		publish_keys(o, pool, idx, async, w);
	mkv_pool_close(&pool);
	_exit(w->status ? EXIT_ERR : EXIT_OK);
}

static void writer_lmdb(const struct reg_opts *o, const struct geom *gm, const char *envfile,
		const char *datafile, uint64_t idx, struct gate *g, struct wshared *sh)
{
	struct wout *w = &sh->out[idx];
	size_t maplen = gm->data_pages * PAGE;
	union peer_entry e = { 0 };
	MDB_env *env = NULL;
	MDB_dbi entries, pages;
	uint8_t *map = MAP_FAILED;
	void *val = value_make(o, idx);
	bool in_memory = false;
	int rc, fd;

	if (!val) {
		wfail(w, "writer", "out of memory");
		goto out;
	}
	if ((rc = peer_env(envfile, gm->registry_size, MDB_WRITEMAP, &env)) ||
	    (rc = peer_dbis(env, 0, &entries, &pages))) {
		wfail(w, "LMDB open", mdb_strerror(rc));
		goto out;
	}
	fd = open(datafile, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		in_memory = peer_in_memory(fd);
		map = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
	}
	if (map == MAP_FAILED) {
		wfail(w, datafile, strerror(errno));
		goto out;
	}
	e.rec.npages = gm->npages;
	e.rec.length = o->value_size;
	if (gate_ready(g) < 0 || __atomic_load_n(&sh->abort, __ATOMIC_ACQUIRE))
		goto out;
	for (uint64_t i = 0; i < o->keys; i++) {
		uint64_t page = (idx * o->keys + i) * gm->npages;
		uint8_t key[BENCH_KEY_LEN], be[8];
		MDB_val k = { sizeof(key), key }, d = { gm->entry_len, e.bytes };
		MDB_val pk = { sizeof(be), be };
		MDB_txn *txn;

		key_make(key, o->seed, idx, i);
		stamp(map + page * PAGE, val, o->value_size, key);
		if (!in_memory && msync(map + page * PAGE, o->value_size, MS_SYNC) < 0) {
			wfail(w, "msync", strerror(errno));
			goto out;
		}
		for (int b = 0; b < 8; b++)
			be[b] = (uint8_t)(page >> (56 - 8 * b));
		if ((rc = mdb_txn_begin(env, NULL, 0, &txn))) {
			wfail(w, "mdb_txn_begin", mdb_strerror(rc));
			goto out;
		}
		e.rec.page = page;
		e.rec.txn = mdb_txn_id(txn);
		if ((rc = mdb_put(txn, entries, &k, &d, MDB_NOOVERWRITE)) ||
		    (rc = mdb_put(txn, pages, &pk, &k, MDB_NOOVERWRITE))) {
			mdb_txn_abort(txn);
			wfail(w, "mdb_put", mdb_strerror(rc));
			goto out;
		}
		if ((rc = mdb_txn_commit(txn))) {
			wfail(w, "mdb_txn_commit", mdb_strerror(rc));
			goto out;
		}
		w->done++;
	}
	w->t_end = now_ns();
out:
	if (map != MAP_FAILED)
		munmap(map, maplen);
	if (env)
		mdb_env_close(env);
	free(val);
	_exit(w->status ? EXIT_ERR : EXIT_OK);
}

/* ---- runs ---------------------------------------------------------------------- */

struct run {
	const struct reg_opts *o;
	const struct geom *gm;
	enum mode mode;
	const char *path;          /* marukv: the pool */
	const char *envfile, *datafile;  /* LMDB */
};

/* What a run measured: registrations per second, CPU us per registration. */
struct result {
	double rate, cpu_us;
};

/*
 * Fork the writers, start them together, reap them; the rate of the run
 * and its CPU time, the writers' whole lives included.  EXIT_OK or
 * EXIT_ERR (reported).
 */
static int run_writers(const struct run *r, struct result *res)
{
	uint64_t n = r->gm->writers, forked = 0, t0 = 0, tmax = 0, total = 0;
	double c0 = cpu_ns(true);
	size_t shlen = sizeof(struct wshared) + n * sizeof(struct wout);
	struct wshared *sh = shared_alloc(shlen);
	pid_t *pids = calloc(n, sizeof(*pids));
	struct gate g;
	int status = EXIT_OK;

	if (!sh || !pids || gate_init(&g) < 0) {
		fprintf(stderr, PROG " " CMD ": %s\n", sh && pids ? strerror(errno) :
				"out of memory");
		shared_free(sh, shlen);
		free(pids);
		return EXIT_ERR;
	}
	for (; forked < n; forked++) {
		pid_t pid = child_fork(CMD);

		if (pid < 0) {
			status = EXIT_ERR;
			break;
		}
		if (pid == 0) {
			gate_child(&g);
			if (r->mode == M_LMDB)
				writer_lmdb(r->o, r->gm, r->envfile, r->datafile, forked, &g, sh);
			else
				writer_mkv(r->o, r->path, forked, r->mode == M_ASYNC, &g, sh);
		}
		pids[forked] = pid;
	}
	gate_parent(&g);
	if (status == EXIT_OK && gate_wait(&g, n) < 0)
		status = EXIT_ERR;     /* a writer failed to get ready: its message follows */
	if (status != EXIT_OK)
		__atomic_store_n(&sh->abort, 1, __ATOMIC_RELEASE);
	t0 = now_ns();
	gate_open(&g);
	for (uint64_t i = 0; i < forked; i++) {
		const struct wout *w = &sh->out[i];
		int rc = child_reap(pids[i], CMD, "writer", 0);

		if (rc != 0)
			status = EXIT_ERR;
		if (w->status) {
			fprintf(stderr, PROG " " CMD ": %s writer %" PRIu64 ": %s\n",
					mode_name[r->mode], i, w->msg);
			status = EXIT_ERR;
		}
	}
	for (uint64_t i = 0; i < forked && status == EXIT_OK; i++) {
		total += sh->out[i].done;
		if (sh->out[i].t_end > tmax)
			tmax = sh->out[i].t_end;
	}
	gate_close(&g);
	if (status == EXIT_OK && (total != n * r->o->keys || tmax <= t0)) {
		fprintf(stderr, PROG " " CMD ": %s: %" PRIu64 " of %" PRIu64
				" registrations done\n", mode_name[r->mode], total, n * r->o->keys);
		status = EXIT_ERR;
	}
	if (status == EXIT_OK) {
		res->rate = (double)total * 1e9 / (double)(tmax - t0);
		res->cpu_us = (cpu_ns(true) - c0) / 1e3 / (double)total;
	}
	shared_free(sh, shlen);
	free(pids);
	return status;
}

/* The holder's own sync publishes, as many as one writer's. */
static int run_holder(const struct reg_opts *o, struct mkv_pool *pool, struct result *res)
{
	struct wout w = { 0 };
	uint64_t t0 = now_ns();
	double c0 = cpu_ns(true);

	publish_keys(o, pool, 0, 0, &w);
	if (w.status) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", mode_name[M_HOLDER], w.msg);
		return EXIT_ERR;
	}
	res->rate = (double)o->keys * 1e9 / (double)(w.t_end - t0);
	res->cpu_us = (cpu_ns(true) - c0) / 1e3 / (double)o->keys;
	return EXIT_OK;
}

static int run_marukv(const struct reg_opts *o, struct geom *gm, enum mode mode,
		const char *dir, struct result *res)
{
	uint64_t expect = mode == M_HOLDER ? o->keys : gm->writers * o->keys;
	struct mkv_pool *pool = NULL;
	struct mkv_stat st;
	char *path = path_join(dir, "pool");
	struct run r = { .o = o, .gm = gm, .mode = mode, .path = path };
	int rc, status = EXIT_ERR;

	if (!path) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return EXIT_ERR;
	}
	if (pool_make(path, &(struct pool_spec){ .pages = gm->data_pages,
			.max_clients = (uint32_t)gm->max_clients }, CMD, &pool) < 0)
		goto out;
	rc = mkv_pool_stat(pool, &st);
	if (rc) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", path, mkv_why(rc));
		goto out;
	}
	if (st.lease_holder_pid != (uint32_t)getpid()) {
		fprintf(stderr, PROG " " CMD ": %s: the lease holder is pid %" PRIu32
				", not this process (%ld)\n", path, st.lease_holder_pid,
				(long)getpid());
		goto out;
	}
	gm->registry_size = st.registry_size;
	status = mode == M_HOLDER ? run_holder(o, pool, res) : run_writers(&r, res);
	if (status != EXIT_OK)
		goto out;
	rc = mkv_pool_stat(pool, &st);
	if (rc) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", path, mkv_why(rc));
		status = EXIT_ERR;
	} else if (st.entries != expect) {
		fprintf(stderr, PROG " " CMD ": %s: %" PRIu64 " entries after %" PRIu64
				" acknowledged publishes\n", mode_name[mode], st.entries, expect);
		status = EXIT_VERIFY;
	} else if (!gm->entry_len) {
		uint8_t key[BENCH_KEY_LEN];

		/* Writer 0's first key: the peer's values are as long as its entry. */
		key_make(key, o->seed, 0, 0);
		if (peer_entry_len(path, key, CMD, &gm->entry_len) < 0)
			status = EXIT_ERR;
	}
out:
	mkv_pool_close(&pool);
	free(path);
	return status;
}


static int run_lmdb(const struct reg_opts *o, const struct geom *gm, const char *dir,
		struct result *res)
{
	char *envfile = path_join(dir, "registry.mdb"), *datafile = path_join(dir, "data");
	struct run r = { .o = o, .gm = gm, .mode = M_LMDB, .envfile = envfile,
		.datafile = datafile };
	MDB_env *env = NULL;
	MDB_dbi entries, pages;
	MDB_txn *txn;
	MDB_stat se, sp;
	int rc, fd, status = EXIT_ERR;

	if (!envfile || !datafile) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	/* Created and preallocated like marukv's registry, closed before the fork. */
	if ((rc = peer_env(envfile, gm->registry_size, 0, &env)) ||
	    (rc = peer_dbis(env, MDB_CREATE, &entries, &pages)) ||
	    (rc = mdb_env_get_fd(env, &fd))) {
		peer_fail(CMD, "create", rc);
		goto out;
	}
	if ((rc = posix_fallocate(fd, 0, (off_t)gm->registry_size))) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", envfile, strerror(rc));
		goto out;
	}
	mdb_env_close(env);
	env = NULL;
	fd = open(datafile, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	rc = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)(gm->data_pages * PAGE));
	if (fd >= 0 && close(fd) < 0 && !rc)
		rc = errno;
	if (rc) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", datafile, strerror(rc));
		goto out;
	}
	status = run_writers(&r, res);
	if (status != EXIT_OK)
		goto out;
	if ((rc = peer_env(envfile, gm->registry_size, MDB_RDONLY, &env)) ||
	    (rc = peer_dbis(env, 0, &entries, &pages)) ||
	    (rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))) {
		status = EXIT_ERR;
		peer_fail(CMD, "check", rc);
		goto out;
	}
	rc = mdb_stat(txn, entries, &se);
	if (!rc)
		rc = mdb_stat(txn, pages, &sp);
	mdb_txn_abort(txn);
	/* the main database also holds the name of "pages" */
	se.ms_entries--;
	if (rc) {
		status = EXIT_ERR;
		peer_fail(CMD, "check", rc);
	} else if (se.ms_entries != gm->writers * o->keys || sp.ms_entries != se.ms_entries) {
		fprintf(stderr, PROG " " CMD ": lmdb: %zu entries and %zu pages after %" PRIu64
				" commits\n", se.ms_entries, sp.ms_entries, gm->writers * o->keys);
		status = EXIT_VERIFY;
	}
out:
	if (env)
		mdb_env_close(env);
	free(envfile);
	free(datafile);
	return status;
}

/* One mode of one repeat, in a scratch directory of its own. */
static int run_one(const struct reg_opts *o, struct geom *gm, enum mode mode,
		struct result *res)
{
	char *dir = scratch_dir(o->dir, CMD);
	int status;

	if (!dir)
		return EXIT_ERR;
	if (mode == M_LMDB)
		status = run_lmdb(o, gm, dir, res);
	else
		status = run_marukv(o, gm, mode, dir, res);
	if (scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(dir);
	return status;
}

/* ---- results -------------------------------------------------------------------- */

/* The ratios of a row: marukv sync and async against LMDB, sync against the holder's own. */
enum ratio { R_SYNC_LMDB, R_ASYNC_LMDB, R_SYNC_HOLDER, R_COUNT };

static const char *const ratio_name[R_COUNT] = { "ratio_sync_lmdb", "ratio_async_lmdb",
	"ratio_sync_holder" };

struct row {
	uint64_t writers;
	struct summary rate[M_COUNT], cpu[M_COUNT], ratio[R_COUNT];
};

static void range(char *buf, size_t len, const struct summary *s)
{
	snprintf(buf, len, "%.0f (%.0f..%.0f)", s->median, s->min, s->max);
}

static void print_text(const struct reg_opts *o, const struct row *rows, size_t n)
{
	char col[M_COUNT][64], async[32];

	printf("register: %" PRIu64 " keys x %" PRIu64 " bytes per writer, %" PRIu64
			" run%s per row, %s; registrations/s: median (min..max)\n",
			o->keys, o->value_size, o->repeat, o->repeat == 1 ? "" : "s", o->dir);
	snprintf(async, sizeof(async), "marukv async(%" PRIu64 ")", o->window);
	printf("%7s  %-22s %-22s %-22s %-22s %9s %10s %11s\n", "writers", "marukv sync", async,
			"raw LMDB", "holder's own", "sync/LMDB", "async/LMDB", "sync/holder");
	for (size_t i = 0; i < n; i++) {
		for (int m = 0; m < M_COUNT; m++)
			range(col[m], sizeof(col[m]), &rows[i].rate[m]);
		printf("%7" PRIu64 "  %-22s %-22s %-22s %-22s %9.2f %10.2f %11.2f\n",
				rows[i].writers, col[M_SYNC], col[M_ASYNC], col[M_LMDB],
				col[M_HOLDER], rows[i].ratio[R_SYNC_LMDB].median,
				rows[i].ratio[R_ASYNC_LMDB].median,
				rows[i].ratio[R_SYNC_HOLDER].median);
	}
	printf("\nCPU time per registration, us (user + system, every process): median (min..max)\n");
	printf("%7s  %-22s %-22s %-22s %-22s\n", "writers", "marukv sync", async, "raw LMDB",
			"holder's own");
	for (size_t i = 0; i < n; i++) {
		for (int m = 0; m < M_COUNT; m++)
			snprintf(col[m], sizeof(col[m]), "%.1f (%.1f..%.1f)",
					rows[i].cpu[m].median, rows[i].cpu[m].min,
					rows[i].cpu[m].max);
		printf("%7" PRIu64 "  %-22s %-22s %-22s %-22s\n", rows[i].writers, col[M_SYNC],
				col[M_ASYNC], col[M_LMDB], col[M_HOLDER]);
	}
}

static void print_json(const struct reg_opts *o, const struct row *rows, size_t n)
{
	printf("{\n  \"command\": \"register\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"keys\": %" PRIu64 ",\n  \"value_size\": %" PRIu64
			",\n  \"window\": %" PRIu64 ",\n  \"repeat\": %" PRIu64
			",\n  \"seed\": %" PRIu64 ",\n  \"rows\": [",
			o->keys, o->value_size, o->window, o->repeat, o->seed);
	for (size_t i = 0; i < n; i++) {
		printf("%s\n    {\n      \"writers\": %" PRIu64, i ? "," : "", rows[i].writers);
		for (int m = 0; m < M_COUNT; m++) {
			const struct summary *s = &rows[i].rate[m];

			printf(",\n      \"%s\": { \"median\": ", mode_name[m]);
			json_number(stdout, s->median, 0);
			printf(", \"min\": ");
			json_number(stdout, s->min, 0);
			printf(", \"max\": ");
			json_number(stdout, s->max, 0);
			printf(", \"cpu_us\": ");
			json_number(stdout, rows[i].cpu[m].median, 2);
			printf(" }");
		}
		for (int r = 0; r < R_COUNT; r++) {
			printf(",\n      \"%s\": ", ratio_name[r]);
			json_number(stdout, rows[i].ratio[r].median, 4);
		}
		printf("\n    }");
	}
	printf("\n  ]\n}\n");
}

int cmd_register(int argc, char **argv)
{
	struct reg_opts o = {
		.writers = { 1, 2, 4, 8 }, .nwriters = 4, .keys = 5000, .value_size = 4096,
		.repeat = 5, .window = MKV_ASYNC_MAX, .seed = 1, .dir = "/dev/shm",
	};
	struct row rows[MAX_ROWS];
	double *v[2 * M_COUNT + R_COUNT] = { NULL };
	double **cpu = v + M_COUNT, **ratio = v + 2 * M_COUNT;
	int rc, status = EXIT_OK;

	rc = reg_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
	for (int m = 0; m < 2 * M_COUNT + R_COUNT; m++)
		if (!(v[m] = calloc(o.repeat, sizeof(double)))) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			status = EXIT_ERR;
			goto out;
		}
	for (size_t i = 0; i < o.nwriters && status == EXIT_OK; i++) {
		struct geom gm = { .writers = o.writers[i] };
		uint64_t need;

		gm.npages = (o.value_size + PAGE - 1) / PAGE;
		gm.max_clients = gm.writers + 1 > MKV_DEFAULT_MAX_CLIENTS ?
			gm.writers + 1 : MKV_DEFAULT_MAX_CLIENTS;
		/*
		 * Room for every value plus a quarter, and at least enough
		 * that a writer's page grants come in batches of four values
		 * (the library caps them at pages / (4 x max_clients)).
		 */
		need = gm.writers * o.keys * gm.npages;
		gm.data_pages = need + need / 4;
		if (gm.data_pages < 16 * gm.max_clients * gm.npages)
			gm.data_pages = 16 * gm.max_clients * gm.npages;
		rows[i].writers = gm.writers;
		for (uint64_t r = 0; r < o.repeat && status == EXIT_OK; r++) {
			for (int m = 0; m < M_COUNT && status == EXIT_OK; m++) {
				struct result res = { 0 };

				status = run_one(&o, &gm, (enum mode)m, &res);
				v[m][r] = res.rate;
				cpu[m][r] = res.cpu_us;
			}
			if (status == EXIT_OK) {
				ratio[R_SYNC_LMDB][r] = v[M_SYNC][r] / v[M_LMDB][r];
				ratio[R_ASYNC_LMDB][r] = v[M_ASYNC][r] / v[M_LMDB][r];
				ratio[R_SYNC_HOLDER][r] = v[M_SYNC][r] / v[M_HOLDER][r];
			}
		}
		if (status != EXIT_OK)
			break;
		rc = 0;
		for (int m = 0; m < M_COUNT; m++) {
			rc |= summarize(v[m], o.repeat, &rows[i].rate[m]);
			rc |= summarize(cpu[m], o.repeat, &rows[i].cpu[m]);
		}
		for (int r = 0; r < R_COUNT; r++)
			rc |= summarize(ratio[r], o.repeat, &rows[i].ratio[r]);
		if (rc < 0) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			status = EXIT_ERR;
		}
	}
	if (status == EXIT_OK) {
		if (o.json)
			print_json(&o, rows, o.nwriters);
		else
			print_text(&o, rows, o.nwriters);
	}
out:
	for (int m = 0; m < 2 * M_COUNT + R_COUNT; m++)
		free(v[m]);
	return status;
}
