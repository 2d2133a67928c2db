/* SPDX-License-Identifier: MIT */
/*
 * evict: what eviction costs, in keys evicted per second and in the
 * latency of readers while it runs.
 *
 * The parent creates a pool (4 KiB pages, one page per value, the default
 * watermarks) and keeps it open: it holds the lease, so its holder thread
 * is the one that evicts.  Each repeat fills the pool with hot keys and
 * cold keys until the room left (free and quarantined pages) is a little
 * above the low watermark, then runs three phases, each with a reader
 * process timing mkv_get + mkv_release of random hot keys:
 *
 *   idle      the reader alone;
 *   writing   a writer process publishes new keys and deletes the one it
 *             published KEEP keys back: the pool keeps its room, nothing
 *             is evicted;
 *   evicting  the pool topped up to just above the low watermark, the
 *             same writer without the deletes: the pool stays full and
 *             the holder evicts cold keys to make room from the first
 *             publishes on (the reader's touches keep the hot keys); the
 *             reader starts its reads once the first eviction is seen, so
 *             that a writer slow to start on a loaded machine still has
 *             them run beside eviction.
 *
 * Comparing evicting with writing isolates eviction from the writer's own
 * load (its publishes go through the same holder).  The eviction rate of
 * the evicting phase is the pool's eviction counter over the phase, which
 * follows the writer; the holder's own speed is timed last, with one
 * mkv_pool_evict() that frees FORCE_PCT percent of the pool.  Figures are
 * medians over the repeats; ratios are medians of the ratios of each
 * repeat.
 */
#include <marukv.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "bench.h"
#include "options.h"

#define CMD "evict"
#define PAGE BENCH_PAGE
#define KEEP 64U             /* writing: the writer keeps its last KEEP keys */
#define SLACK 8U             /* pages above the low mark: the grants of a few publishes */
#define FORCE_PCT 30U        /* the timed mkv_pool_evict() frees up to this % */
#define EVICT_WAIT_NS (10ULL * 1000000000ULL)  /* evicting: the first eviction, at most */

enum phase { P_IDLE, P_WRITING, P_EVICTING, P_COUNT };

static const char *const phase_name[P_COUNT] = { "idle", "writing", "evicting" };

/* Key families: key_make(seed, family, index). */
enum { K_HOT = 1, K_COLD };

struct ev_opts {
	uint64_t pages, hot, reads, repeat, registry_size, seed;
	const char *dir;
	int json;
};

/* Shared by the parent, the reader and the writer of a phase. */
struct ev_shared {
	int32_t stop;             /* parent: the writer may stop */
	int32_t r_status, w_status;
	int32_t await_evict;      /* parent: the reader starts after an eviction */
	uint64_t evictions0;      /* parent: the pool's count before the phase */
	uint64_t not_found;       /* reader: gets that found no key */
	uint64_t nlat;            /* reader: latencies recorded */
	uint64_t published, nospc;  /* writer */
	char r_msg[256], w_msg[256];
	double lat[];             /* reader: ns of each get + release that found its key */
};

/* ---- options ---------------------------------------------------------------- */

static int ev_parse(int argc, char **argv, struct ev_opts *o)
{
	const struct opt opts[] = {
		{ "pages", OPT_U64, &o->pages, .arg = "N", .lo = 1024, .hi = 1U << 24,
			.help = "data pages of 4 KiB in the pool (default 16384)" },
		{ "hot", OPT_U64, &o->hot, .arg = "N", .lo = 1, .hi = 1U << 20,
			.help = "keys the reader reads (default 1024)" },
		{ "reads", OPT_U64, &o->reads, .arg = "N", .lo = 1, .hi = 1U << 26,
			.help = "timed gets per phase (default 1000000)" },
		OPT_REPEAT(&o->repeat,
			"runs of the three phases; medians are reported (default 5)"),
		{ "registry-size", OPT_SIZE, &o->registry_size, .arg = "BYTES",
			.lo = 1ULL << 20, .hi = 1ULL << 40,
			.help = "size of the pool's registry, k/m/g suffixes allowed\n"
				"(default 32 MiB + 6 KiB per page)" },
		OPT_DIR(&o->dir, "where the scratch pool goes (default /dev/shm)"),
		OPT_SEED(&o->seed, "seed of the keys and of the reads (default 1)"),
		OPT_JSON(&o->json),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Keys evicted per second by the lease holder, and a reader's get latency\n"
		"with and without eviction running, on the same pool.\n" };
	int rc = opt_parse(&cmd, argc, argv);

	if (rc)
		return rc;
	/*
	 * Six times the library's default room per page, and more to start
	 * with: while a reader process runs, the registry grows (LMDB reuses
	 * no page that a reader's snapshot may still see), and the default
	 * size ran out in the write phases.
	 */
	if (!o->registry_size)
		o->registry_size = (32ULL << 20) + o->pages * 6144;
	/* The hot keys must leave most of the pool to cold keys, for eviction. */
	if (o->hot > o->pages / 4) {
		fprintf(stderr, PROG " " CMD ": --hot %" PRIu64 " is more than a quarter of"
				" --pages %" PRIu64 "\n", o->hot, o->pages);
		return -1;
	}
	return 0;
}

/* ---- the reader and the writer ---------------------------------------------- */

static void fail(char *msg, size_t len, int32_t *status, const char *what, int rc)
{
	*status = 1;
	snprintf(msg, len, "%s: %s", what, mkv_why(rc));
}

/* Publish a key with its pattern: mkv_put(), which keeps the message of a failure. */
static int put_key(struct mkv_pool *pool, const uint8_t key[BENCH_KEY_LEN])
{
	uint8_t val[PAGE];

	pattern_fill(val, PAGE, key);
	return mkv_put(pool, key, BENCH_KEY_LEN, val, PAGE);
}

/* With await_evict, until the pool's eviction count moves: 0, or -1 (reported). */
static int await_eviction(struct mkv_pool *pool, struct ev_shared *sh)
{
	uint64_t t0 = now_ns();
	struct mkv_stat st;
	int rc;

	while (sh->await_evict && !__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		if ((rc = mkv_pool_stat(pool, &st)) < 0) {
			fail(sh->r_msg, sizeof(sh->r_msg), &sh->r_status, "reader: mkv_pool_stat", rc);
			return -1;
		}
		if (st.evictions > sh->evictions0)
			return 0;
		if (now_ns() - t0 > EVICT_WAIT_NS) {
			sh->r_status = 1;
			snprintf(sh->r_msg, sizeof(sh->r_msg), "reader: no eviction within %llu s"
					" of the writer's start", EVICT_WAIT_NS / 1000000000ULL);
			return -1;
		}
		sleep_ns(100000);
	}
	return 0;
}

/* Time each get + release of a random hot key. */
static void reader_main(const struct ev_opts *o, const char *path, uint64_t rng,
		struct gate *g, struct ev_shared *sh)
{
	struct mkv_pool *pool = NULL;
	int rc = mkv_pool_open(path, MKV_RDONLY, NULL, &pool);

	if (rc < 0) {
		fail(sh->r_msg, sizeof(sh->r_msg), &sh->r_status, "reader: mkv_pool_open", rc);
		_exit(EXIT_ERR);
	}
	if (gate_ready(g) == 0 && !__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE) &&
	    await_eviction(pool, sh) == 0)
		for (uint64_t i = 0; i < o->reads; i++) {
			uint8_t key[BENCH_KEY_LEN];
			struct mkv_view v;
			uint64_t t0;

			key_make(key, o->seed, K_HOT, rng_next(&rng) % o->hot);
			t0 = now_ns();
			rc = mkv_get(pool, key, sizeof(key), &v);
			if (rc == MKV_E_NOTFOUND) {
				sh->not_found++;
				continue;
			}
			if (rc == 0)
				rc = mkv_release(pool, &v);
			if (rc < 0) {
				fail(sh->r_msg, sizeof(sh->r_msg), &sh->r_status, "reader: mkv_get", rc);
				break;
			}
			sh->lat[sh->nlat++] = (double)(now_ns() - t0);
		}
	mkv_pool_close(&pool);
	_exit(sh->r_status ? EXIT_ERR : EXIT_OK);
}

/* Publish cold keys from `first` on until told to stop; with keep, delete behind. */
static void writer_main(const struct ev_opts *o, const char *path, uint64_t first, int keep,
		struct gate *g, struct ev_shared *sh)
{
	struct mkv_pool *pool = NULL;
	int rc = mkv_pool_open(path, 0, NULL, &pool);

	if (rc < 0) {
		fail(sh->w_msg, sizeof(sh->w_msg), &sh->w_status, "writer: mkv_pool_open", rc);
		_exit(EXIT_ERR);
	}
	if (gate_ready(g) == 0)
		while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
			uint64_t i = sh->published;
			uint8_t key[BENCH_KEY_LEN];

			key_make(key, o->seed, K_COLD, first + i);
			rc = put_key(pool, key);
			if (rc == MKV_E_NOSPC) {
				sh->nospc++;     /* counted; the same key again */
				continue;
			}
			if (rc < 0) {
				fail(sh->w_msg, sizeof(sh->w_msg), &sh->w_status, keep ?
						"writing: writer: mkv_put" :
						"evicting: writer: mkv_put", rc);
				break;
			}
			__atomic_store_n(&sh->published, i + 1, __ATOMIC_RELEASE);
			if (!keep || i < KEEP)
				continue;
			key_make(key, o->seed, K_COLD, first + i - KEEP);
			rc = mkv_del(pool, key, sizeof(key));
			if (rc < 0 && rc != MKV_E_NOTFOUND) {
				fail(sh->w_msg, sizeof(sh->w_msg), &sh->w_status,
						"writing: writer: mkv_del", rc);
				break;
			}
		}
	mkv_pool_close(&pool);
	_exit(sh->w_status ? EXIT_ERR : EXIT_OK);
}

/* ---- phases --------------------------------------------------------------------- */

/* The parent's side of a run. */
struct ev_run {
	const struct ev_opts *o;
	char *path;
	struct mkv_pool *pool;
	uint64_t next_cold;       /* the next cold key never published */
	struct ev_shared *sh;
	size_t shlen;
};

/* What one phase of one repeat measured. */
struct phase_out {
	struct summary lat;
	uint64_t not_found, nospc;
	double publish_rate, evict_rate;  /* per second */
};

static int ev_fail(const char *what, int rc)
{
	fprintf(stderr, PROG " " CMD ": %s: %s\n", what, mkv_why(rc));
	return EXIT_ERR;
}

static uint64_t room(const struct mkv_stat *st)
{
	return st->pages_free + st->pages_quarantined;
}

/* The hot keys (again, if evicted). */
static int fill_hot(struct ev_run *x)
{
	for (uint64_t i = 0; i < x->o->hot; i++) {
		uint8_t key[BENCH_KEY_LEN];
		int rc;

		key_make(key, x->o->seed, K_HOT, i);
		rc = put_key(x->pool, key);
		if (rc < 0 && rc != MKV_E_EXISTS)
			return ev_fail("fill: hot key", rc);
	}
	return EXIT_OK;
}

/* Cold keys until the room left is `above` pages over the low mark. */
static int fill(struct ev_run *x, uint64_t above)
{
	struct mkv_stat st;
	uint64_t target;
	int rc;

	if ((rc = mkv_pool_stat(x->pool, &st)) < 0)
		return ev_fail("mkv_pool_stat", rc);
	/* the low mark in pages, rounded up as the holder does */
	target = (st.pages_total * st.low_watermark + 99) / 100 + above;
	while (room(&st) > target) {
		for (uint64_t n = room(&st) - target; n > 0; n--) {
			uint8_t key[BENCH_KEY_LEN];

			key_make(key, x->o->seed, K_COLD, x->next_cold++);
			if ((rc = put_key(x->pool, key)) < 0)
				return ev_fail("fill: cold key", rc);
		}
		if ((rc = mkv_pool_stat(x->pool, &st)) < 0)
			return ev_fail("mkv_pool_stat", rc);
	}
	return EXIT_OK;
}

/* Fork the reader, and the writer of a phase that writes; both start together. */
static int phase_fork(struct ev_run *x, enum phase ph, uint64_t rep, struct gate *g,
		pid_t pid[2])
{
	uint64_t rng = fmix64(x->o->seed ^ (rep * P_COUNT + ph + 1));

	pid[0] = child_fork(CMD);
	if (pid[0] == 0) {
		gate_child(g);
		reader_main(x->o, x->path, rng, g, x->sh);
	}
	if (pid[0] < 0 || ph == P_IDLE)
		return pid[0] < 0 ? EXIT_ERR : EXIT_OK;
	pid[1] = child_fork(CMD);
	if (pid[1] == 0) {
		gate_child(g);
		writer_main(x->o, x->path, x->next_cold, ph == P_WRITING, g, x->sh);
	}
	return pid[1] < 0 ? EXIT_ERR : EXIT_OK;
}

static int phase_reap(struct ev_run *x, pid_t pid[2])
{
	int status = EXIT_OK;

	if (pid[0] > 0 && child_reap(pid[0], CMD, "reader", 0) != 0)
		status = EXIT_ERR;
	__atomic_store_n(&x->sh->stop, 1, __ATOMIC_RELEASE);
	if (pid[1] > 0 && child_reap(pid[1], CMD, "writer", 0) != 0)
		status = EXIT_ERR;
	if (x->sh->r_status)
		fprintf(stderr, PROG " " CMD ": %s\n", x->sh->r_msg);
	if (x->sh->w_status)
		fprintf(stderr, PROG " " CMD ": %s\n", x->sh->w_msg);
	return x->sh->r_status || x->sh->w_status ? EXIT_ERR : status;
}

static int run_phase(struct ev_run *x, enum phase ph, uint64_t rep, struct phase_out *out)
{
	pid_t pid[2] = { 0, 0 };
	struct mkv_stat st0, st1;
	struct gate g;
	uint64_t t0 = 0, t1;
	double secs;
	int rc, status;

	memset(x->sh, 0, x->shlen);
	if (gate_init(&g) < 0) {
		fprintf(stderr, PROG " " CMD ": pipe: %s\n", strerror(errno));
		return EXIT_ERR;
	}
	status = phase_fork(x, ph, rep, &g, pid);
	gate_parent(&g);
	if (status == EXIT_OK && gate_wait(&g, ph == P_IDLE ? 1 : 2) < 0)
		status = EXIT_ERR;    /* a child failed to get ready: its message follows */
	if (status == EXIT_OK && (rc = mkv_pool_stat(x->pool, &st0)) < 0)
		status = ev_fail("mkv_pool_stat", rc);
	if (status == EXIT_OK) {
		x->sh->await_evict = ph == P_EVICTING;
		x->sh->evictions0 = st0.evictions;
	}
	t0 = now_ns();
	if (status != EXIT_OK)
		__atomic_store_n(&x->sh->stop, 1, __ATOMIC_RELEASE);
	gate_open(&g);
	if (phase_reap(x, pid) != EXIT_OK)
		status = EXIT_ERR;
	t1 = now_ns();
	gate_close(&g);
	if (status == EXIT_OK && (rc = mkv_pool_stat(x->pool, &st1)) < 0)
		status = ev_fail("mkv_pool_stat", rc);
	if (status != EXIT_OK)
		return status;
	if (summarize(x->sh->lat, x->sh->nlat, &out->lat) < 0) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return EXIT_ERR;
	}
	secs = (double)(t1 - t0) / 1e9;
	out->not_found = x->sh->not_found;
	out->nospc = x->sh->nospc;
	out->publish_rate = (double)x->sh->published / secs;
	out->evict_rate = (double)(st1.evictions - st0.evictions) / secs;
	x->next_cold += x->sh->published;
	return EXIT_OK;
}

/* The holder's own speed: one mkv_pool_evict() to FORCE_PCT % free, timed. */
static int forced_evict(struct ev_run *x, double *rate, uint64_t *keys)
{
	struct mkv_evict rep;
	uint64_t t0 = now_ns();
	int rc = mkv_pool_evict(x->pool, FORCE_PCT, 0, &rep);

	if (rc < 0)
		return ev_fail("mkv_pool_evict", rc);
	*rate = (double)rep.keys * 1e9 / (double)(now_ns() - t0);
	*keys = rep.keys;
	return EXIT_OK;
}

/* ---- results -------------------------------------------------------------------- */

/* Medians over the repeats. */
struct ev_result {
	double median_ns[P_COUNT], p99_ns[P_COUNT];
	double publish_rate[P_COUNT], evict_rate[P_COUNT];
	uint64_t not_found[P_COUNT], nospc[P_COUNT];   /* sums */
	double r_idle_median, r_idle_p99;        /* evicting / idle */
	double r_writing_median, r_writing_p99;  /* evicting / writing */
	double forced_rate, forced_keys;
	uint32_t low, high;
};

/* Per repeat: a column per figure. */
enum col { C_MED, C_P99 = C_MED + P_COUNT, C_PUB = C_P99 + P_COUNT,
	C_EVR = C_PUB + P_COUNT, C_RIM = C_EVR + P_COUNT, C_RIP, C_RWM, C_RWP, C_FRATE,
	C_FKEYS, C_COUNT };

static double median_of(const double *v, size_t n, int *err)
{
	struct summary s = { 0 };

	if (summarize(v, n, &s) < 0)
		*err = 1;
	return s.median;
}

static int ev_reduce(double *col[C_COUNT], uint64_t n, struct ev_result *r)
{
	int err = 0;

	for (int p = 0; p < P_COUNT; p++) {
		r->median_ns[p] = median_of(col[C_MED + p], n, &err);
		r->p99_ns[p] = median_of(col[C_P99 + p], n, &err);
		r->publish_rate[p] = median_of(col[C_PUB + p], n, &err);
		r->evict_rate[p] = median_of(col[C_EVR + p], n, &err);
	}
	r->r_idle_median = median_of(col[C_RIM], n, &err);
	r->r_idle_p99 = median_of(col[C_RIP], n, &err);
	r->r_writing_median = median_of(col[C_RWM], n, &err);
	r->r_writing_p99 = median_of(col[C_RWP], n, &err);
	r->forced_rate = median_of(col[C_FRATE], n, &err);
	r->forced_keys = median_of(col[C_FKEYS], n, &err);
	if (err)
		fprintf(stderr, PROG " " CMD ": out of memory\n");
	return err ? EXIT_ERR : EXIT_OK;
}

/* One repeat: fill, three phases, the timed eviction; its figures into col[..][rep]. */
static int ev_repeat(struct ev_run *x, uint64_t rep, double *col[C_COUNT], struct ev_result *r)
{
	struct phase_out out[P_COUNT];
	uint64_t keys = 0;
	int status = fill_hot(x);

	/* Room for the writer's KEEP keys and its grants without evicting. */
	if (status == EXIT_OK)
		status = fill(x, 2 * KEEP + SLACK);
	for (int p = 0; p < P_COUNT && status == EXIT_OK; p++) {
		if (p == P_EVICTING)
			status = fill(x, SLACK);
		if (status == EXIT_OK)
			status = run_phase(x, (enum phase)p, rep, &out[p]);
	}
	if (status == EXIT_OK)
		status = forced_evict(x, &col[C_FRATE][rep], &keys);
	if (status != EXIT_OK)
		return status;
	col[C_FKEYS][rep] = (double)keys;
	for (int p = 0; p < P_COUNT; p++) {
		col[C_MED + p][rep] = out[p].lat.median;
		col[C_P99 + p][rep] = out[p].lat.p99;
		col[C_PUB + p][rep] = out[p].publish_rate;
		col[C_EVR + p][rep] = out[p].evict_rate;
		r->not_found[p] += out[p].not_found;
		r->nospc[p] += out[p].nospc;
	}
	col[C_RIM][rep] = out[P_EVICTING].lat.median / out[P_IDLE].lat.median;
	col[C_RIP][rep] = out[P_EVICTING].lat.p99 / out[P_IDLE].lat.p99;
	col[C_RWM][rep] = out[P_EVICTING].lat.median / out[P_WRITING].lat.median;
	col[C_RWP][rep] = out[P_EVICTING].lat.p99 / out[P_WRITING].lat.p99;
	return EXIT_OK;
}

static void print_text(const struct ev_opts *o, const struct ev_result *r)
{
	printf("evict: %" PRIu64 " pages of %u bytes, registry %" PRIu64 " bytes, watermarks %"
			PRIu32 "/%" PRIu32 " %%, %" PRIu64 " hot keys, %" PRIu64 " reads per phase, %"
			PRIu64 " repeat%s, %s\n", o->pages, PAGE, o->registry_size, r->low, r->high,
			o->hot, o->reads, o->repeat, o->repeat == 1 ? "" : "s", o->dir);
	printf("%-9s %15s %12s %10s %12s %12s %6s\n", "phase", "get median ns", "get p99 ns",
			"not found", "publishes/s", "evictions/s", "nospc");
	for (int p = 0; p < P_COUNT; p++)
		printf("%-9s %15.0f %12.0f %10" PRIu64 " %12.0f %12.0f %6" PRIu64 "\n",
				phase_name[p], r->median_ns[p], r->p99_ns[p], r->not_found[p],
				r->publish_rate[p], r->evict_rate[p], r->nospc[p]);
	printf("get latency, evicting / idle:    median %.2f, p99 %.2f\n", r->r_idle_median,
			r->r_idle_p99);
	printf("get latency, evicting / writing: median %.2f, p99 %.2f\n",
			r->r_writing_median, r->r_writing_p99);
	printf("mkv_pool_evict to %u %% free: %.0f keys/s (%.0f keys per call)\n", FORCE_PCT,
			r->forced_rate, r->forced_keys);
}

static void print_json(const struct ev_opts *o, const struct ev_result *r)
{
	printf("{\n  \"command\": \"evict\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"pages\": %" PRIu64 ",\n  \"page_size\": %u,\n  \"registry_size\": %"
			PRIu64 ",\n  \"low_watermark\": %" PRIu32 ",\n  \"high_watermark\": %"
			PRIu32 ",\n  \"hot_keys\": %" PRIu64 ",\n  \"reads\": %" PRIu64
			",\n  \"repeat\": %" PRIu64 ",\n  \"seed\": %" PRIu64 ",\n  \"phases\": [",
			o->pages, PAGE, o->registry_size, r->low, r->high, o->hot, o->reads,
			o->repeat, o->seed);
	for (int p = 0; p < P_COUNT; p++) {
		printf("%s\n    { \"phase\": \"%s\", \"median_ns\": ", p ? "," : "",
				phase_name[p]);
		json_number(stdout, r->median_ns[p], 0);
		printf(", \"p99_ns\": ");
		json_number(stdout, r->p99_ns[p], 0);
		printf(", \"not_found\": %" PRIu64 ", \"publishes_per_s\": ", r->not_found[p]);
		json_number(stdout, r->publish_rate[p], 0);
		printf(", \"evictions_per_s\": ");
		json_number(stdout, r->evict_rate[p], 0);
		printf(", \"nospc\": %" PRIu64 " }", r->nospc[p]);
	}
	printf("\n  ],\n  \"ratio_evicting_idle_median\": ");
	json_number(stdout, r->r_idle_median, 4);
	printf(",\n  \"ratio_evicting_idle_p99\": ");
	json_number(stdout, r->r_idle_p99, 4);
	printf(",\n  \"ratio_evicting_writing_median\": ");
	json_number(stdout, r->r_writing_median, 4);
	printf(",\n  \"ratio_evicting_writing_p99\": ");
	json_number(stdout, r->r_writing_p99, 4);
	printf(",\n  \"forced_evict_percent\": %u,\n  \"forced_evict_keys\": ", FORCE_PCT);
	json_number(stdout, r->forced_keys, 0);
	printf(",\n  \"forced_evict_keys_per_s\": ");
	json_number(stdout, r->forced_rate, 0);
	printf("\n}\n");
}

/* ---- evict ---------------------------------------------------------------------- */

/* The default watermarks, read back for the report. */
static int pool_create(struct ev_run *x, struct ev_result *r)
{
	struct pool_spec spec = { .pages = x->o->pages, .registry_size = x->o->registry_size,
		.wm_low = MKV_DEFAULT_LOW_WATERMARK, .wm_high = MKV_DEFAULT_HIGH_WATERMARK };
	struct mkv_stat st;
	int rc;

	if (pool_make(x->path, &spec, CMD, &x->pool) < 0)
		return EXIT_ERR;
	if ((rc = mkv_pool_stat(x->pool, &st))) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", x->path, mkv_why(rc));
		return EXIT_ERR;
	}
	r->low = st.low_watermark;
	r->high = st.high_watermark;
	return EXIT_OK;
}

static int ev_run(const struct ev_opts *o, const char *dir, double *col[C_COUNT],
		struct ev_result *r)
{
	struct ev_run x = { .o = o, .path = path_join(dir, "pool") };
	int status = EXIT_ERR;

	x.shlen = sizeof(*x.sh) + o->reads * sizeof(double);
	x.sh = shared_alloc(x.shlen);
	if (!x.path || !x.sh)
		fprintf(stderr, PROG " " CMD ": %s\n", x.path ? strerror(errno) : "out of memory");
	else
		status = pool_create(&x, r);
	for (uint64_t i = 0; i < o->repeat && status == EXIT_OK; i++)
		status = ev_repeat(&x, i, col, r);
	if (status == EXIT_OK)
		status = ev_reduce(col, o->repeat, r);
	mkv_pool_close(&x.pool);
	shared_free(x.sh, x.shlen);
	free(x.path);
	return status;
}

int cmd_evict(int argc, char **argv)
{
	struct ev_opts o = { .pages = 16384, .hot = 1024, .reads = 1000000, .repeat = 5,
		.seed = 1, .dir = "/dev/shm" };
	struct ev_result r = { 0 };
	double *col[C_COUNT] = { NULL };
	char *dir = NULL;
	int rc, status = EXIT_ERR;

	rc = ev_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
	for (int c = 0; c < C_COUNT; c++)
		if (!(col[c] = calloc(o.repeat, sizeof(double)))) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			goto out;
		}
	dir = scratch_dir(o.dir, CMD);
	if (!dir)
		goto out;
	status = ev_run(&o, dir, col, &r);
	if (scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	if (status == EXIT_OK) {
		if (o.json)
			print_json(&o, &r);
		else
			print_text(&o, &r);
	}
out:
	for (int c = 0; c < C_COUNT; c++)
		free(col[c]);
	free(dir);
	return status;
}
