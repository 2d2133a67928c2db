/* SPDX-License-Identifier: MIT */
/*
 * coherence: what a non-coherent pool costs against a coherent one, on
 * this machine's own memory, in one run.  A non-coherent pool invalidates
 * (CLFLUSH) the lines of every shared word before loading it and writes
 * back every shared store; a get invalidates the value's whole payload
 * before handing out its view; the registry's pages are invalidated when
 * a read txn's snapshot is newer than the last one made fresh; a client
 * of another node rings its node's doorbell, which the holder polls.
 *
 * The parent creates two pools of the same geometry, one coherent, one
 * non-coherent (it holds both leases), and publishes into each K values
 * of 4 KiB and BIG_VALUES of 1 MiB and of 32 MiB.  It forks two workers:
 * a reader, which opens both pools MKV_RDONLY on the parent's node and
 * reads every value once, checking every byte; and a client, which opens
 * both read-write under the node name "client-node", so that its requests
 * take the path between nodes (non-coherent: its node's doorbell, polled
 * by the holder; coherent: the doorbell's futex).  Then, run after run,
 * each measurement is made in one pool and then in the other, the order
 * alternating from run to run so that noise hits both modes alike:
 *
 *   exists: mkv_exists of random present 4 KiB keys, by the reader;
 *   get: mkv_get, a read of the first byte, mkv_release of random values
 *   of 4 KiB, 1 MiB and 32 MiB, by the reader (the first 64 bytes checked
 *   between the get and the release, with the clock stopped).  Only the
 *   first line is read, so a payload's other lines are not cached when a
 *   get invalidates them again: the cheapest case of the invalidation;
 *   prefix_len: mkv_prefix_len over a chain of C keys, all present (chain
 *   i is keys iC to iC+C-1), by the reader;
 *   put_holder, put_client: mkv_put of a fresh 4 KiB key by the parent
 *   (the holder) and by the client; around the client's, the parent's CPU
 *   time (getrusage: its holder threads, while its main thread waits; the
 *   idle holder thread of the other pool is counted too);
 *   get_new: by the client, an untimed mkv_put of a fresh 4 KiB key, whose
 *   commit by the holder makes a new registry snapshot, then a timed get
 *   of a random 4 KiB value as above: the get makes the new snapshot's
 *   pages fresh, in a non-coherent pool those the holder logged for the
 *   commit (marukv(7), COHERENCE MODEL).
 *
 * Each op is timed alone with CLOCK_MONOTONIC, less the cost of reading
 * the clock.  No write runs during the reader's ops, so its registry
 * pages are made fresh only by the first lookup after a run's publishes.
 * A run gives each mode's median and 99th percentile; figures are medians
 * over the runs, the ratios (non-coherent over coherent) medians of the
 * per-run ratios.  The extra cost of a get as a rate is the bytes
 * invalidated per get over the difference of the two medians.
 */
#include <marukv.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "options.h"

#define CMD "coherence"
#define CHAIN 64U             /* keys per prefix lookup */
#define BIG_VALUES 4U         /* values of each big size */
#define GET_BYTES (256ULL << 20)  /* a big size's gets invalidate at most this much a run */
#define MIN_GETS 16U
#define PREFIX_DIV 20U        /* prefix lookups: --ops / PREFIX_DIV */
#define PUT_DIV 10U           /* publishes: --ops / PUT_DIV */
#define CHECK_BYTES 64U       /* bytes of each timed get checked */
#define CLIENT_NODE "client-node"

enum op { OP_EXISTS, OP_GET_4K, OP_GET_1M, OP_GET_32M, OP_PREFIX, OP_PUT_HOLDER, OP_PUT_CLIENT,
	OP_GET_NEW, OP_COUNT };
enum mode { M_COH, M_NONCOH, M_COUNT };
enum { JOB_OPEN = OP_COUNT * M_COUNT, JOB_CLOSE };
enum { W_READER, W_CLIENT, W_COUNT };

static const char *const op_name[OP_COUNT] = {
	"exists", "get", "get", "get", "prefix_len", "put_holder", "put_client", "get_new",
};
static const uint64_t op_size[OP_COUNT] = {
	4096, 4096, 1U << 20, 32U << 20, 4096, 4096, 4096, 4096,
};
static const char *const mode_name[M_COUNT] = { "coherent", "noncoherent" };

struct co_opts {
	uint64_t keys, ops, repeat, seed;
	const char *dir;
	int json;
};

/* A worker: set by the parent before the fork, then the worker's own. */
struct worker {
	const struct co_opts *o;
	struct job_shared *sh;
	double clock_ns;
	char *path[M_COUNT];
	struct mkv_pool *pool[M_COUNT];
	uint8_t chain_bytes[CHAIN][BENCH_KEY_LEN];
	struct mkv_key chain[CHAIN];
	uint8_t value[4096];      /* the value of a put */
};

/* ---- options ---------------------------------------------------------------- */

static int co_parse(int argc, char **argv, struct co_opts *o)
{
	const struct opt opts[] = {
		{ "keys", OPT_U64, &o->keys, .arg = "K", .lo = CHAIN, .hi = 1U << 22,
			.help = "4 KiB values in each pool (default 4096)" },
		{ "ops", OPT_U64, &o->ops, .arg = "N", .lo = PREFIX_DIV, .hi = 1U << 24,
			.help = "timed ops per measurement (default 20000): gets of 1 MiB\n"
				"and 32 MiB as many as invalidate 256 MiB, at least 16;\n"
				"prefix lookups N/20, publishes N/10" },
		OPT_REPEAT(&o->repeat, "runs; medians are reported (default 5)"),
		OPT_DIR(&o->dir, "where the scratch pools go (default /dev/shm)"),
		OPT_SEED(&o->seed, "seed of the keys (default 1)"),
		OPT_JSON(&o->json),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Latency of mkv_exists, of mkv_get at 4 KiB, 1 MiB and 32 MiB, of mkv_prefix_len\n"
		"and of mkv_put by the holder and by a client of another node, in a\n"
		"non-coherent pool against a coherent one, in the same run.\n" };

	return opt_parse(&cmd, argc, argv);
}

/* Whether op publishes a fresh key each time. */
static int puts_key(enum op op)
{
	return op == OP_PUT_HOLDER || op == OP_PUT_CLIENT || op == OP_GET_NEW;
}

/* Whether the client runs op. */
static int clients_op(enum op op)
{
	return op == OP_PUT_CLIENT || op == OP_GET_NEW;
}

/* Timed ops of a measurement. */
static uint64_t calls(const struct co_opts *o, enum op op)
{
	uint64_t n = GET_BYTES / op_size[op];

	if (op == OP_PREFIX)
		return o->ops / PREFIX_DIV;
	if (puts_key(op))
		return o->ops / PUT_DIV;
	if (op == OP_EXISTS || op == OP_GET_4K)
		return o->ops;
	n = n < MIN_GETS ? MIN_GETS : n;
	return n < o->ops ? n : o->ops;
}

/* Values of op's size to read: the K keys, or BIG_VALUES. */
static uint64_t values_of(const struct co_opts *o, enum op op)
{
	return op_size[op] == 4096 ? o->keys : BIG_VALUES;
}

/* Key j of the values of size (4 KiB: the K keys), or of run's publishes by op. */
static void co_key(uint8_t key[BENCH_KEY_LEN], const struct co_opts *o, enum op op, uint64_t j)
{
	key_make(key, o->seed, puts_key(op) ? op : op_size[op], j);
}

/* ---- the workers ---------------------------------------------------------------- */

static int fail(const char *who, const char *what, const char *why)
{
	fprintf(stderr, PROG " " CMD ": %s: %s: %s\n", who, what, why);
	return -1;
}

/* One get of key; with check, the first check bytes compared.  0 or -1 (reported). */
static int get_once(struct worker *w, struct mkv_pool *pool, enum op op,
		const uint8_t key[BENCH_KEY_LEN], size_t check, double *ns)
{
	uint64_t t0 = now_ns(), t1, t2;
	struct mkv_view v;
	int rc, ok;

	if ((rc = mkv_get(pool, key, BENCH_KEY_LEN, &v)))
		return fail("reader", "mkv_get", mkv_why(rc));
	(void)*(const volatile uint8_t *)v.data;
	t1 = now_ns();
	ok = v.len == op_size[op] && pattern_check(v.data, check, key) == check;
	t2 = now_ns();
	if ((rc = mkv_release(pool, &v)))
		return fail("reader", "mkv_release", mkv_why(rc));
	*ns = (double)(t1 - t0 + now_ns() - t2) - 2 * w->clock_ns;
	if (ok)
		return 0;
	__atomic_store_n(&w->sh->verify_failed, 1, __ATOMIC_RELAXED);
	return fail("reader", "mkv_get", "a value is not the one stored");
}

/* The reader's pools, every value read once, every byte checked. */
static int reader_open(struct worker *w)
{
	double ns;
	int rc;

	for (int m = 0; m < M_COUNT; m++) {
		if ((rc = mkv_pool_open(w->path[m], MKV_RDONLY, NULL, &w->pool[m])))
			return fail("reader", w->path[m], mkv_why(rc));
		for (int op = OP_GET_4K; op <= OP_GET_32M; op++)
			for (uint64_t j = 0; j < values_of(w->o, op); j++) {
				uint8_t key[BENCH_KEY_LEN];

				co_key(key, w->o, op, j);
				if (get_once(w, w->pool[m], op, key, op_size[op], &ns) < 0)
					return -1;
			}
	}
	for (unsigned j = 0; j < CHAIN; j++)
		w->chain[j] = (struct mkv_key){ w->chain_bytes[j], BENCH_KEY_LEN };
	return 0;
}

/* The client's pools, opened read-write on a node of its own. */
static int client_open(struct worker *w)
{
	struct mkv_opts *opts = NULL;
	int rc = mkv_opts_new(&opts);

	if (!rc)
		rc = mkv_opts_set_node(opts, CLIENT_NODE);
	for (int m = 0; m < M_COUNT && !rc; m++)
		rc = mkv_pool_open(w->path[m], 0, opts, &w->pool[m]);
	mkv_opts_delete(&opts);
	return rc ? fail("client", "open", mkv_why(rc)) : 0;
}

/* One op of a measurement, timed alone into *ns; 0 or -1 (reported). */
static int op_once(struct worker *w, struct mkv_pool *pool, enum op op, uint64_t run,
		uint64_t i, uint64_t *rng, double *ns)
{
	int put = puts_key(op);
	uint64_t t0, j = put ? run * calls(w->o, op) + i : rng_next(rng);
	uint8_t key[BENCH_KEY_LEN];
	size_t hits = 0;
	int rc;

	if (op == OP_PREFIX)
		for (unsigned k = 0; k < CHAIN; k++)
			co_key(w->chain_bytes[k], w->o, op, j % (w->o->keys / CHAIN) * CHAIN + k);
	else
		co_key(key, w->o, op, put ? j : j % values_of(w->o, op));
	if (op >= OP_GET_4K && op <= OP_GET_32M)
		return get_once(w, pool, op, key, CHECK_BYTES, ns);
	if (put)
		pattern_fill(w->value, sizeof(w->value), key);
	if (op == OP_GET_NEW) {
		if ((rc = mkv_put(pool, key, sizeof(key), w->value, sizeof(w->value))))
			return fail("client", "mkv_put", mkv_why(rc));
		co_key(key, w->o, OP_GET_4K, rng_next(rng) % w->o->keys);
		return get_once(w, pool, OP_GET_4K, key, CHECK_BYTES, ns);
	}
	t0 = now_ns();
	if (op == OP_EXISTS)
		rc = mkv_exists(pool, key, sizeof(key));
	else if (op == OP_PREFIX)
		rc = mkv_prefix_len(pool, w->chain, CHAIN, &hits);
	else
		rc = mkv_put(pool, key, sizeof(key), w->value, sizeof(w->value));
	*ns = (double)(now_ns() - t0) - w->clock_ns;
	if (op == OP_EXISTS)
		rc = rc == 1 ? 0 : rc ? rc : MKV_E_NOTFOUND;
	if (op == OP_PREFIX && !rc && hits != CHAIN)
		rc = MKV_E_NOTFOUND;
	return rc ? fail(op == OP_PUT_CLIENT ? "client" : op == OP_PUT_HOLDER ? "holder" :
			"reader", op_name[op], mkv_why(rc)) : 0;
}

/* A measurement: calls(op) ops in one pool, each timed; 0 or -1 (reported). */
static int measure_ops(struct worker *w, enum op op, enum mode m)
{
	uint64_t run = __atomic_load_n(&w->sh->run, __ATOMIC_ACQUIRE);
	uint64_t rng = fmix64(w->o->seed ^ fmix64(run << 8 | op));

	for (uint64_t i = 0; i < calls(w->o, op); i++) {
		double *s = &w->sh->samples[i];

		if (op_once(w, w->pool[m], op, run, i, &rng, s) < 0)
			return -1;
		*s = *s > 0 ? *s : 0;
	}
	return 0;
}

static int worker_job(void *arg, size_t worker, unsigned job)
{
	struct worker *w = arg;

	if (job == JOB_OPEN)
		return worker == W_READER ? reader_open(w) : client_open(w);
	if (job == JOB_CLOSE) {
		for (int m = 0; m < M_COUNT; m++)
			mkv_pool_close(&w->pool[m]);
		return 0;
	}
	/* A client's job runs in both workers: the reader has nothing to do in it. */
	if (clients_op((enum op)(job / M_COUNT)) != (worker == W_CLIENT))
		return 0;
	return measure_ops(w, (enum op)(job / M_COUNT), (enum mode)(job % M_COUNT));
}

/* ---- runs ---------------------------------------------------------------------- */

/*
 * Per run: each mode's median and p99, and the ratio; then their summaries.
 * The holder's CPU time per client put is a row of its own (no p99).
 */
struct row {
	double *med[M_COUNT], *p99[M_COUNT], *ratio;
	struct summary smed[M_COUNT], sp99[M_COUNT], sratio;
};

/* A pool of mode m with the K keys and the big values; 0 or -1 (reported). */
static int fill(const struct co_opts *o, const char *path, enum mode m, uint64_t pages,
		struct mkv_pool **pool)
{
	struct pool_spec spec = { .pages = pages,
		.coherence = m == M_NONCOH ? MKV_NONCOHERENT : MKV_COHERENT };

	if (pool_make(path, &spec, CMD, pool) < 0)
		return -1;
	for (int op = OP_GET_4K; op <= OP_GET_32M; op++)
		for (uint64_t j = 0; j < values_of(o, op); j++) {
			uint8_t key[BENCH_KEY_LEN];
			struct mkv_buf buf;
			int rc;

			co_key(key, o, op, j);
			if ((rc = mkv_alloc(*pool, op_size[op], &buf)))
				return fail("holder", "mkv_alloc", mkv_why(rc));
			pattern_fill(buf.data, buf.len, key);
			if ((rc = mkv_publish(*pool, key, sizeof(key), &buf))) {
				(void)mkv_abort(*pool, &buf);
				return fail("holder", "mkv_publish", mkv_why(rc));
			}
		}
	return 0;
}

/* One run: every op in each mode, the modes in the run's order. */
static int measure(struct crew *crew, struct worker *w, struct row *rows, struct row *cpu,
		uint64_t run)
{
	struct summary s;

	__atomic_store_n(&w->sh->run, run, __ATOMIC_RELEASE);
	for (int op = 0; op < OP_COUNT; op++) {
		for (int k = 0; k < M_COUNT; k++) {
			enum mode m = (enum mode)((run + k) % M_COUNT);
			double c0 = cpu_ns(false);

			if (op == OP_PUT_HOLDER ? measure_ops(w, OP_PUT_HOLDER, m) < 0 :
			    crew_run(crew, (unsigned)(op * M_COUNT + m),
					clients_op((enum op)op) ? W_COUNT : 1) < 0)
				return -1;
			if (op == OP_PUT_CLIENT)
				cpu->med[m][run] = (cpu_ns(false) - c0) / (double)calls(w->o, op);
			if (summarize(w->sh->samples, calls(w->o, (enum op)op), &s) < 0) {
				fprintf(stderr, PROG " " CMD ": out of memory\n");
				return -1;
			}
			rows[op].med[m][run] = s.median;
			rows[op].p99[m][run] = s.p99;
		}
		rows[op].ratio[run] = rows[op].med[M_NONCOH][run] / rows[op].med[M_COH][run];
	}
	cpu->ratio[run] = cpu->med[M_NONCOH][run] / cpu->med[M_COH][run];
	return 0;
}

static int run_all(const struct co_opts *o, const char *dir, struct row *rows, struct row *cpu,
		double clock_ns)
{
	size_t shlen = sizeof(struct job_shared) + o->ops * sizeof(double);
	struct worker w = { .o = o, .sh = shared_alloc(shlen), .clock_ns = clock_ns };
	struct mkv_pool *pool[M_COUNT] = { NULL };
	struct crew crew = { 0 };
	uint64_t puts = o->repeat * (calls(o, OP_PUT_HOLDER) + calls(o, OP_PUT_CLIENT) +
		calls(o, OP_GET_NEW)), pages = o->keys + puts +
		BIG_VALUES * (op_size[OP_GET_1M] + op_size[OP_GET_32M]) / BENCH_PAGE;
	int status = EXIT_ERR, started = 0;

	for (int m = 0; m < M_COUNT; m++)
		w.path[m] = path_join(dir, mode_name[m]);
	if (!w.sh || !w.path[M_COH] || !w.path[M_NONCOH]) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	/* Room for every value, and for the pages writers keep granted. */
	for (int m = 0; m < M_COUNT; m++)
		if (fill(o, w.path[m], (enum mode)m, pages + pages / 4 + 1024, &pool[m]) < 0)
			goto out;
	if (crew_start(&crew, W_COUNT, worker_job, &w, CMD) < 0)
		goto out;
	started = 1;
	if (crew_run(&crew, JOB_OPEN, W_COUNT) < 0)
		goto out;
	/* The parent's own puts go through its handles, the holders'. */
	memcpy(w.pool, pool, sizeof(pool));
	for (uint64_t run = 0; run < o->repeat; run++)
		if (measure(&crew, &w, rows, cpu, run) < 0)
			goto out;
	status = EXIT_OK;
	for (int m = 0; m < M_COUNT; m++) {
		struct mkv_stat st;

		if (mkv_pool_stat(pool[m], &st) || st.entries != o->keys + 2 * BIG_VALUES + puts) {
			fprintf(stderr, PROG " " CMD ": %s: not every value published is there\n",
					w.path[m]);
			status = EXIT_VERIFY;
		}
	}
out:
	if (started && crew_run(&crew, JOB_CLOSE, W_COUNT) < 0)
		status = EXIT_ERR;
	if (started && crew_stop(&crew) < 0)
		status = EXIT_ERR;
	if (w.sh && w.sh->verify_failed)
		status = EXIT_VERIFY;
	for (int m = 0; m < M_COUNT; m++) {
		mkv_pool_close(&pool[m]);
		free(w.path[m]);
	}
	shared_free(w.sh, shlen);
	return status;
}

/* ---- results -------------------------------------------------------------------- */

static int summarize_row(const struct co_opts *o, struct row *r)
{
	int rc = summarize(r->ratio, o->repeat, &r->sratio);

	for (int m = 0; m < M_COUNT; m++) {
		rc |= summarize(r->med[m], o->repeat, &r->smed[m]);
		rc |= summarize(r->p99[m], o->repeat, &r->sp99[m]);
	}
	return rc;
}

/* A get's extra bytes invalidated per second: NaN unless the difference is positive. */
static double extra_rate(const struct row *r, enum op op)
{
	double d = r->smed[M_NONCOH].median - r->smed[M_COH].median;

	return op >= OP_GET_4K && op <= OP_GET_32M && d > 0 ? (double)op_size[op] * 1e9 / d : NAN;
}

static void print_text(const struct co_opts *o, const struct row *rows, const struct row *cpu,
		double clock_ns)
{
	printf("coherence: %" PRIu64 " keys of 4096 bytes, %u of 1 MiB and of 32 MiB, %" PRIu64
			" ops per measurement, prefix_len over %u keys, %" PRIu64 " run%s, %s\n",
			o->keys, BIG_VALUES, o->ops, CHAIN, o->repeat, o->repeat == 1 ? "" : "s",
			o->dir);
	printf("ns per op, median/p99 of a run, medians over the runs (clock cost %.0f ns"
			" taken off each)\n", clock_ns);
	printf("%-10s %9s %6s %14s %16s %8s %10s\n", "op", "bytes", "calls", "coherent",
			"non-coherent", "nc/c", "extra GB/s");
	for (int op = 0; op < OP_COUNT; op++) {
		const struct row *r = &rows[op];
		char c[M_COUNT][32];
		double x = extra_rate(r, (enum op)op);

		for (int m = 0; m < M_COUNT; m++)
			snprintf(c[m], sizeof(c[m]), "%.0f/%.0f", r->smed[m].median,
					r->sp99[m].median);
		printf("%-10s %9" PRIu64 " %6" PRIu64 " %14s %16s %8.2f", op_name[op], op_size[op],
				calls(o, (enum op)op), c[M_COH], c[M_NONCOH], r->sratio.median);
		if (isnan(x))
			printf(" %10s\n", "-");
		else
			printf(" %10.2f\n", x / 1e9);
	}
	printf("holder CPU per client put, ns: coherent %.0f, non-coherent %.0f, nc/c %.2f\n",
			cpu->smed[M_COH].median, cpu->smed[M_NONCOH].median, cpu->sratio.median);
}

static void print_json(const struct co_opts *o, const struct row *rows, const struct row *cpu,
		double clock_ns)
{
	printf("{\n  \"command\": \"coherence\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"keys\": %" PRIu64 ",\n  \"big_values\": %u,\n  \"ops\": %" PRIu64
			",\n  \"chain\": %u,\n  \"repeat\": %" PRIu64 ",\n  \"seed\": %" PRIu64
			",\n  \"clock_ns\": ", o->keys, BIG_VALUES, o->ops, CHAIN, o->repeat, o->seed);
	json_number(stdout, clock_ns, 0);
	printf(",\n  \"rows\": [");
	for (int op = 0; op < OP_COUNT; op++) {
		const struct row *r = &rows[op];

		printf("%s\n    { \"op\": \"%s\", \"value_size\": %" PRIu64 ", \"calls\": %" PRIu64,
				op ? "," : "", op_name[op], op_size[op], calls(o, (enum op)op));
		for (int m = 0; m < M_COUNT; m++) {
			printf(", \"%s\": { \"median_ns\": ", mode_name[m]);
			json_number(stdout, r->smed[m].median, 0);
			printf(", \"p99_ns\": ");
			json_number(stdout, r->sp99[m].median, 0);
			printf(" }");
		}
		printf(", \"ratio_noncoherent\": ");
		json_number(stdout, r->sratio.median, 4);
		printf(", \"extra_bytes_per_s\": ");
		json_number(stdout, extra_rate(r, (enum op)op), 0);
		printf(" }");
	}
	printf("\n  ],\n  \"holder_cpu_per_client_put\": { \"coherent_ns\": ");
	json_number(stdout, cpu->smed[M_COH].median, 0);
	printf(", \"noncoherent_ns\": ");
	json_number(stdout, cpu->smed[M_NONCOH].median, 0);
	printf(", \"ratio_noncoherent\": ");
	json_number(stdout, cpu->sratio.median, 4);
	printf(" }\n}\n");
}

int cmd_coherence(int argc, char **argv)
{
	struct co_opts o = { .keys = 4096, .ops = 20000, .repeat = 5, .seed = 1,
		.dir = "/dev/shm" };
	struct row rows[OP_COUNT + 1], *cpu = &rows[OP_COUNT];
	size_t per_row = 2 * M_COUNT + 1;
	double *v = NULL, clock_ns;
	char *dir = NULL;
	int rc, status = EXIT_ERR;

	rc = co_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
	if (!(v = calloc((OP_COUNT + 1) * per_row * o.repeat, sizeof(*v)))) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return EXIT_ERR;
	}
	for (int i = 0; i <= OP_COUNT; i++) {
		double *p = v + i * per_row * o.repeat;

		for (int m = 0; m < M_COUNT; m++, p += 2 * o.repeat) {
			rows[i].med[m] = p;
			rows[i].p99[m] = p + o.repeat;
		}
		rows[i].ratio = p;
	}
	clock_ns = clock_cost_ns();
	if (!(dir = scratch_dir(o.dir, CMD)))
		goto out;
	status = run_all(&o, dir, rows, cpu, clock_ns);
	for (int i = 0; i <= OP_COUNT && status == EXIT_OK; i++)
		if (summarize_row(&o, &rows[i]) < 0) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			status = EXIT_ERR;
		}
	if (status == EXIT_OK) {
		if (o.json)
			print_json(&o, rows, cpu, clock_ns);
		else
			print_text(&o, rows, cpu, clock_ns);
	}
out:
	if (dir && scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(dir);
	free(v);
	return status;
}
