/* SPDX-License-Identifier: MIT */
/*
 * getsize: latency of a zero-copy read (mkv_get, a read of the value's
 * first byte, mkv_release) as values grow, against Redis GET of the same
 * keys and values, in the same run.  A zero-copy read maps nothing and
 * copies nothing, so its latency should not depend on the value's size;
 * a GET copies the value through the socket.
 *
 * The parent creates a pool (it holds the lease) with N values of each
 * size and SETs the same keys and values in a redis-server of its own (no
 * persistence, a Unix socket).  One reader process opens both and reads
 * every value once, checking every byte, so that its page tables and
 * caches are those of a reader that has run for a while.  Then, run after
 * run, for each size it reads random values of that size through marukv,
 * then through Redis, each read timed alone with CLOCK_MONOTONIC, less the
 * cost of reading the clock.  Redis moves whole values, so it gets fewer
 * reads of big values: at most 256 MiB a size and run, at least 16 reads.
 * A run gives the median and 99th percentile of each system and size;
 * figures are medians over the runs, and the ratios (each size against the
 * first, Redis against marukv) medians of the per-run ratios of medians.
 */
#include <marukv.h>

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "options.h"

#define CMD "getsize"
#define MAX_SIZES 16
#define REDIS_BYTES (256ULL << 20)   /* a size's Redis reads move at most this much a run */
#define REDIS_MIN_OPS 16U

enum sys { S_MKV, S_REDIS, S_COUNT };
enum { JOB_OPEN = 2 * MAX_SIZES, JOB_CLOSE };
enum ratio { R_FIRST, R_REDIS, R_COUNT };

static const char *const sys_name[S_COUNT] = { "marukv_get", "redis_get" };

struct gs_opts {
	uint64_t sizes[MAX_SIZES];
	size_t nsizes;
	uint64_t values, ops, repeat, seed;
	const char *dir;
	int json, redis;
};

/* The reader: set by the parent before the fork, then the reader's own. */
struct reader {
	const struct gs_opts *o;
	struct job_shared *sh;
	double clock_ns;
	const char *pool_path;
	const struct redis_server *srv;   /* NULL: no Redis peer */
	struct mkv_pool *pool;
	redisContext *redis;
};

/* ---- options ---------------------------------------------------------------- */

static int gs_parse(int argc, char **argv, struct gs_opts *o)
{
	const struct opt opts[] = {
		{ "sizes", OPT_SIZE_LIST, o->sizes, .arg = "LIST", .lo = 1, .hi = 1ULL << 30,
			.max = MAX_SIZES, .count = &o->nsizes, .items = "sizes",
			.help = "comma-separated value sizes, k/m/g suffixes allowed\n"
				"(default 4k,64k,1m,16m)" },
		{ "values", OPT_U64, &o->values, .arg = "N", .lo = 1, .hi = 1U << 16,
			.help = "values of each size (default 16)" },
		{ "ops", OPT_U64, &o->ops, .arg = "N", .lo = 1, .hi = 1U << 24,
			.help = "timed gets per size and run (default 20000; Redis: fewer\n"
				"of big values, at most 256 MiB, at least 16)" },
		OPT_REDIS_RUN(o),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Latency of a zero-copy mkv_get (reading the first byte) as values grow, against\n"
		"Redis GET of the same keys and values over a Unix socket, in the same run.\n" };

	return opt_parse(&cmd, argc, argv);
}

/* Timed reads of size index s through sys per run. */
static uint64_t calls(const struct gs_opts *o, size_t s, enum sys sys)
{
	uint64_t n = REDIS_BYTES / o->sizes[s];

	if (sys == S_MKV)
		return o->ops;
	if (n < REDIS_MIN_OPS)
		n = REDIS_MIN_OPS;
	return n < o->ops ? n : o->ops;
}

static void gs_key(uint8_t key[BENCH_KEY_LEN], const struct gs_opts *o, size_t s, uint64_t j)
{
	key_make(key, o->seed, o->sizes[s], j);
}

/* ---- filling the pool and Redis ------------------------------------------------ */

/* Every value into the pool and into Redis; 0 or -1 (reported). */
static int fill(struct mkv_pool *pool, redisContext *c, const struct gs_opts *o)
{
	for (size_t s = 0; s < o->nsizes; s++)
		for (uint64_t j = 0; j < o->values; j++) {
			uint8_t key[BENCH_KEY_LEN];
			struct mkv_buf buf;
			int rc;

			gs_key(key, o, s, j);
			if ((rc = mkv_alloc(pool, o->sizes[s], &buf))) {
				fprintf(stderr, PROG " " CMD ": mkv_alloc: %s\n", mkv_why(rc));
				return -1;
			}
			pattern_fill(buf.data, buf.len, key);
			if (c && (redis_set_append(c, key, sizeof(key), buf.data, buf.len, CMD) < 0 ||
					redis_replies(c, 1, CMD) < 0)) {
				(void)mkv_abort(pool, &buf);
				return -1;
			}
			if ((rc = mkv_publish(pool, key, sizeof(key), &buf))) {
				fprintf(stderr, PROG " " CMD ": mkv_publish: %s\n", mkv_why(rc));
				(void)mkv_abort(pool, &buf);
				return -1;
			}
		}
	return 0;
}

/* ---- the reader ----------------------------------------------------------------- */

static int reader_fail(const char *what, const char *why)
{
	fprintf(stderr, PROG " " CMD ": reader: %s: %s\n", what, why);
	return -1;
}

static int reader_verify(const struct reader *r, const char *what, uint64_t size)
{
	__atomic_store_n(&r->sh->verify_failed, 1, __ATOMIC_RELAXED);
	fprintf(stderr, PROG " " CMD ": reader: %s: a value of %" PRIu64 " bytes is not the"
			" one stored\n", what, size);
	return -1;
}

/* One read; 0, or -1 (reported).  With check, every byte is compared. */
static int get_once(struct reader *r, enum sys sys, size_t s, const uint8_t key[BENCH_KEY_LEN],
		int check)
{
	uint64_t size = r->o->sizes[s];
	struct mkv_view v;
	redisReply *rep;
	int rc, ok;

	if (sys == S_MKV) {
		if ((rc = mkv_get(r->pool, key, BENCH_KEY_LEN, &v)))
			return reader_fail("mkv_get", mkv_why(rc));
		(void)*(const volatile uint8_t *)v.data;
		ok = v.len == size && (!check || pattern_check(v.data, v.len, key) == v.len);
		if ((rc = mkv_release(r->pool, &v)))
			return reader_fail("mkv_release", mkv_why(rc));
		return ok ? 0 : reader_verify(r, "marukv", size);
	}
	rep = redisCommand(r->redis, "GET %b", key, (size_t)BENCH_KEY_LEN);
	if (!rep || rep->type != REDIS_REPLY_STRING) {
		reader_fail("Redis GET", !rep ? r->redis->errstr :
				rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
		if (rep)
			freeReplyObject(rep);
		return -1;
	}
	(void)*(const volatile char *)rep->str;
	ok = rep->len == size && (!check || pattern_check(rep->str, rep->len, key) == size);
	freeReplyObject(rep);
	return ok ? 0 : reader_verify(r, "Redis", size);
}

static int reader_open(struct reader *r)
{
	int rc;

	if ((rc = mkv_pool_open(r->pool_path, MKV_RDONLY, NULL, &r->pool)))
		return reader_fail(r->pool_path, mkv_why(rc));
	if (r->srv && !(r->redis = redis_connect(r->srv, CMD)))
		return -1;
	for (size_t s = 0; s < r->o->nsizes; s++)
		for (uint64_t j = 0; j < r->o->values; j++) {
			uint8_t key[BENCH_KEY_LEN];

			gs_key(key, r->o, s, j);
			if (get_once(r, S_MKV, s, key, 1) < 0 ||
			    (r->redis && get_once(r, S_REDIS, s, key, 1) < 0))
				return -1;
		}
	return 0;
}

/* The run's reads of size index s through sys, each timed; 0 or -1 (reported). */
static int reader_run(struct reader *r, size_t s, enum sys sys)
{
	uint64_t run = __atomic_load_n(&r->sh->run, __ATOMIC_ACQUIRE);
	uint64_t rng = fmix64(r->o->seed ^ fmix64(run << 8 | s));
	uint64_t n = calls(r->o, s, sys);

	for (uint64_t i = 0; i < n; i++) {
		uint8_t key[BENCH_KEY_LEN];
		uint64_t t0, t;
		int rc;

		gs_key(key, r->o, s, rng_next(&rng) % r->o->values);
		t0 = now_ns();
		rc = get_once(r, sys, s, key, 0);
		t = now_ns() - t0;
		if (rc < 0)
			return -1;
		r->sh->samples[i] = (double)t > r->clock_ns ? (double)t - r->clock_ns : 0;
	}
	return 0;
}

static int reader_job(void *arg, size_t worker, unsigned job)
{
	struct reader *r = arg;

	(void)worker;
	if (job == JOB_OPEN)
		return reader_open(r);
	if (job == JOB_CLOSE) {
		mkv_pool_close(&r->pool);
		redisFree(r->redis);
		r->redis = NULL;
		return 0;
	}
	return reader_run(r, job / S_COUNT, (enum sys)(job % S_COUNT));
}

/* ---- runs ---------------------------------------------------------------------- */

struct row {
	uint64_t size;
	double *med[S_COUNT], *p99[S_COUNT], *ratio[R_COUNT];   /* per run */
	struct summary smed[S_COUNT], sp99[S_COUNT], sratio[R_COUNT];
};

/* One run: every size through each system. */
static int measure(struct crew *crew, struct job_shared *sh, const struct gs_opts *o,
		struct row *rows, uint64_t run)
{
	struct summary s;

	for (size_t i = 0; i < o->nsizes; i++)
		for (int sys = 0; sys < S_COUNT; sys++) {
			rows[i].med[sys][run] = rows[i].p99[sys][run] = NAN;
			if (sys == S_REDIS && !o->redis)
				continue;
			__atomic_store_n(&sh->run, run, __ATOMIC_RELEASE);
			if (crew_run(crew, (unsigned)(i * S_COUNT + sys), 1) < 0)
				return -1;
			if (summarize(sh->samples, calls(o, i, (enum sys)sys), &s) < 0) {
				fprintf(stderr, PROG " " CMD ": out of memory\n");
				return -1;
			}
			rows[i].med[sys][run] = s.median;
			rows[i].p99[sys][run] = s.p99;
		}
	for (size_t i = 0; i < o->nsizes; i++) {
		rows[i].ratio[R_FIRST][run] = rows[i].med[S_MKV][run] / rows[0].med[S_MKV][run];
		rows[i].ratio[R_REDIS][run] = rows[i].med[S_REDIS][run] / rows[i].med[S_MKV][run];
	}
	return 0;
}

static int run_all(const struct gs_opts *o, const char *dir, const struct redis_server *srv,
		redisContext *rc_parent, struct row *rows, double clock_ns)
{
	struct reader r = { .o = o, .clock_ns = clock_ns, .srv = o->redis ? srv : NULL };
	size_t shlen = sizeof(struct job_shared) + o->ops * sizeof(double);
	struct job_shared *sh = shared_alloc(shlen);
	struct mkv_pool *pool = NULL;
	struct crew crew = { 0 };
	uint64_t pages = 0;
	int status = EXIT_ERR, started = 0;

	r.pool_path = path_join(dir, "pool");
	r.sh = sh;
	if (!r.pool_path || !sh) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	for (size_t s = 0; s < o->nsizes; s++)
		pages += o->values * ((o->sizes[s] + BENCH_PAGE - 1) / BENCH_PAGE);
	/* Room for every value, and for the pages a writer keeps granted. */
	if (pool_make(r.pool_path, &(struct pool_spec){ .pages = pages + pages / 4 + 64 }, CMD,
			&pool) < 0 || fill(pool, rc_parent, o) < 0)
		goto out;
	if (crew_start(&crew, 1, reader_job, &r, CMD) < 0)
		goto out;
	started = 1;
	if (crew_run(&crew, JOB_OPEN, 1) < 0)
		goto out;
	for (uint64_t run = 0; run < o->repeat; run++)
		if (measure(&crew, sh, o, rows, run) < 0)
			goto out;
	status = EXIT_OK;
out:
	if (started && crew_run(&crew, JOB_CLOSE, 1) < 0)
		status = EXIT_ERR;
	if (started && crew_stop(&crew) < 0)
		status = EXIT_ERR;
	if (sh && sh->verify_failed)
		status = EXIT_VERIFY;
	mkv_pool_close(&pool);
	shared_free(sh, shlen);
	free((char *)r.pool_path);
	return status;
}

/* ---- results -------------------------------------------------------------------- */

static void print_text(const struct gs_opts *o, const struct row *rows, double clock_ns)
{
	char first[32];

	printf("getsize: %" PRIu64 " values of each size, %" PRIu64 " gets per size and run"
			" (Redis: at most 256 MiB, at least 16), %" PRIu64 " run%s, %s\n",
			o->values, o->ops, o->repeat, o->repeat == 1 ? "" : "s", o->dir);
	printf("ns per get, median/p99 of a run, medians over the runs (clock cost %.0f ns"
			" taken off each)\n", clock_ns);
	snprintf(first, sizeof(first), "vs %" PRIu64, o->sizes[0]);
	printf("%10s %14s %10s %18s %12s\n", "size", "marukv get", first, "Redis GET",
			"Redis/marukv");
	for (size_t i = 0; i < o->nsizes; i++) {
		const struct row *r = &rows[i];
		char c[S_COUNT][32];

		for (int sys = 0; sys < S_COUNT; sys++)
			if (isnan(r->smed[sys].median))
				snprintf(c[sys], sizeof(c[sys]), "-");
			else
				snprintf(c[sys], sizeof(c[sys]), "%.0f/%.0f", r->smed[sys].median,
						r->sp99[sys].median);
		printf("%10" PRIu64 " %14s %10.2f %18s", r->size, c[S_MKV],
				r->sratio[R_FIRST].median, c[S_REDIS]);
		if (isnan(r->sratio[R_REDIS].median))
			printf(" %12s\n", "-");
		else
			printf(" %12.1f\n", r->sratio[R_REDIS].median);
	}
}

static void print_json(const struct gs_opts *o, const struct row *rows, double clock_ns)
{
	printf("{\n  \"command\": \"getsize\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"values\": %" PRIu64 ",\n  \"ops\": %" PRIu64 ",\n  \"repeat\": %" PRIu64
			",\n  \"seed\": %" PRIu64 ",\n  \"redis\": %s,\n  \"clock_ns\": ", o->values,
			o->ops, o->repeat, o->seed, o->redis ? "true" : "false");
	json_number(stdout, clock_ns, 0);
	printf(",\n  \"rows\": [");
	for (size_t i = 0; i < o->nsizes; i++) {
		const struct row *r = &rows[i];

		printf("%s\n    { \"value_size\": %" PRIu64, i ? "," : "", r->size);
		for (int sys = 0; sys < S_COUNT; sys++) {
			printf(", \"%s\": ", sys_name[sys]);
			if (isnan(r->smed[sys].median)) {
				printf("null");
				continue;
			}
			printf("{ \"median_ns\": ");
			json_number(stdout, r->smed[sys].median, 0);
			printf(", \"p99_ns\": ");
			json_number(stdout, r->sp99[sys].median, 0);
			printf(", \"gets\": %" PRIu64 " }", calls(o, i, (enum sys)sys));
		}
		printf(", \"ratio_first\": ");
		json_number(stdout, r->sratio[R_FIRST].median, 4);
		printf(", \"ratio_redis_get\": ");
		json_number(stdout, r->sratio[R_REDIS].median, 4);
		printf(" }");
	}
	printf("\n  ]\n}\n");
}

int cmd_getsize(int argc, char **argv)
{
	struct gs_opts o = {
		.sizes = { 4096, 65536, 1U << 20, 16U << 20 }, .nsizes = 4, .values = 16,
		.ops = 20000, .repeat = 5, .seed = 1, .dir = "/dev/shm", .redis = 1,
	};
	struct redis_server srv = { .pid = -1 };
	redisContext *rc_parent = NULL;
	struct row rows[MAX_SIZES];
	double *v = NULL, clock_ns;
	size_t per_row = 2 * S_COUNT + R_COUNT;
	char *dir = NULL;
	int rc, status = EXIT_ERR;

	rc = gs_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
	v = calloc(o.nsizes * per_row * o.repeat, sizeof(*v));
	if (!v) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return EXIT_ERR;
	}
	for (size_t i = 0; i < o.nsizes; i++) {
		double *p = v + i * per_row * o.repeat;

		rows[i].size = o.sizes[i];
		for (int sys = 0; sys < S_COUNT; sys++, p += 2 * o.repeat) {
			rows[i].med[sys] = p;
			rows[i].p99[sys] = p + o.repeat;
		}
		for (int k = 0; k < R_COUNT; k++, p += o.repeat)
			rows[i].ratio[k] = p;
	}
	clock_ns = clock_cost_ns();
	if (!(dir = scratch_dir(o.dir, CMD)))
		goto out;
	if (o.redis && (redis_start(&srv, dir, CMD) < 0 ||
			!(rc_parent = redis_connect(&srv, CMD))))
		goto out;
	status = run_all(&o, dir, &srv, rc_parent, rows, clock_ns);
	for (size_t i = 0; i < o.nsizes && status == EXIT_OK; i++) {
		rc = 0;
		for (int sys = 0; sys < S_COUNT; sys++) {
			rc |= summarize(rows[i].med[sys], o.repeat, &rows[i].smed[sys]);
			rc |= summarize(rows[i].p99[sys], o.repeat, &rows[i].sp99[sys]);
		}
		for (int k = 0; k < R_COUNT; k++)
			rc |= summarize(rows[i].ratio[k], o.repeat, &rows[i].sratio[k]);
		if (rc < 0) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			status = EXIT_ERR;
		}
	}
	if (status == EXIT_OK) {
		if (o.json)
			print_json(&o, rows, clock_ns);
		else
			print_text(&o, rows, clock_ns);
	}
out:
	redisFree(rc_parent);
	if (redis_stop(&srv, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	if (dir && scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(dir);
	free(v);
	return status;
}
