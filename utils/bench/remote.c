/* SPDX-License-Identifier: MIT */
/*
 * remote: the remote tier (marukv(7), REMOTE TIER) against a plain SET and
 * GET of the same bytes, to the same Redis Cluster node, in one run.
 *
 *   spill     a value evicted (mkv_pool_evict of the pool's only value)
 *             until the pool counts it spilled: the commit's copy into
 *             the queue, the checksum check, the frame's BLAKE3, the SET
 *             of the frame;
 *   fetch     mkv_fetch of it, evicted again first: the GET, the frame's
 *             checks, the copy into the pool and the publish;
 *   redis_set SET of the value's bytes with hiredis, over TCP to the node;
 *   redis_get GET of them.
 *
 * The cluster is one redis-server of the bench's own (cluster mode, every
 * slot its own, no persistence) on loopback; marukv's tier and the peer
 * reach it the same way.  Each run does every mode for V values of each
 * size, the modes in turn for each value; a mode's latency is the median
 * over the run's values, and its throughput the size over that latency.
 * Figures are medians over the runs, and the ratios medians of each run's
 * ratio of marukv's mode to its peer (spill / redis_set, fetch / redis_get:
 * above 1, marukv is slower).
 */
#include <marukv.h>

#include <hiredis/hiredis.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "options.h"

#define CMD "remote"
#define MAX_SIZES 8
#define POLL_NS 20000ULL
#define SPILL_WAIT_NS 30000000000ULL

enum mode { M_SPILL, M_FETCH, M_SET, M_GET, M_COUNT };
static const char *const mode_name[M_COUNT] = { "spill", "fetch", "redis_set", "redis_get" };

struct remote_opts {
	uint64_t sizes[MAX_SIZES];
	size_t nsizes;
	uint64_t values, repeat, seed;
	const char *dir;
	int json;
};

struct row {
	uint64_t size;
	double us[M_COUNT];       /* median latency, µs */
	double gbps[M_COUNT];     /* size over it */
	double ratio[2];          /* spill / redis_set, fetch / redis_get */
};

/* What a run works on: the pool, the peer's connection, the value. */
struct run {
	struct mkv_pool *pool;
	redisContext *redis;
	uint8_t *val;
	uint64_t spills;          /* the pool's count so far */
};

static int remote_parse(int argc, char **argv, struct remote_opts *o)
{
	const struct opt opts[] = {
		{ "sizes", OPT_SIZE_LIST, o->sizes, .arg = "LIST", .lo = 4096, .hi = 1ULL << 30,
			.max = MAX_SIZES, .count = &o->nsizes, .items = "sizes",
			.help = "comma-separated value sizes, k/m/g suffixes allowed\n"
				"(default 256k,32m)" },
		{ "values", OPT_U64, &o->values, .arg = "V", .lo = 1, .hi = 100000,
			.help = "values of each size per run (default 16)" },
		OPT_REPEAT(&o->repeat, "runs; medians are reported (default 5)"),
		OPT_SEED(&o->seed, "seed of the values' bytes (default 1)"),
		OPT_DIR(&o->dir, "scratch directory for the pool and the server\n"
			"(default /dev/shm)"),
		OPT_JSON(&o->json),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Spill (eviction to a Redis Cluster) and fetch of values through marukv's remote\n"
		"tier, against a plain SET and GET of the same bytes to the same node.\n" };

	return opt_parse(&cmd, argc, argv);
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, PROG " " CMD ": %s: %s\n", what, mkv_why(rc));
	return -1;
}

/* The pool's spill count, once it passed *seen: µs from t0, or NAN (reported). */
static double spilled(struct run *r, uint64_t t0)
{
	struct mkv_stat st;
	int rc;

	for (;;) {
		if ((rc = mkv_pool_stat(r->pool, &st)))
			return fail("mkv_pool_stat", rc), NAN;
		if (st.remote_spill_errors + st.remote_drops) {
			fprintf(stderr, PROG " " CMD ": a spill failed (%" PRIu64 " errors, %" PRIu64
					" dropped)\n", st.remote_spill_errors, st.remote_drops);
			return NAN;
		}
		if (st.remote_spills > r->spills) {
			r->spills = st.remote_spills;
			return (double)(now_ns() - t0) / 1e3;
		}
		if (now_ns() - t0 > SPILL_WAIT_NS) {
			fprintf(stderr, PROG " " CMD ": a spill took over %llu s\n",
					SPILL_WAIT_NS / 1000000000ULL);
			return NAN;
		}
		sleep_ns(POLL_NS);
	}
}

static int evict_all(struct mkv_pool *pool)
{
	struct mkv_evict rep;
	int rc = mkv_pool_evict(pool, 100, 0, &rep);

	return rc ? fail("mkv_pool_evict", rc) : 0;
}

/* One value of each mode: its latencies in us[]. */
static int one_value(struct run *r, uint64_t size, uint64_t i, double us[M_COUNT])
{
	char key[32];
	size_t klen = (size_t)snprintf(key, sizeof(key), "v%" PRIu64 ".%" PRIu64, size, i);
	redisReply *rep;
	uint64_t t0;
	int rc;

	store64le(r->val, i);
	if ((rc = mkv_put(r->pool, key, klen, r->val, size)))
		return fail("mkv_put", rc);
	t0 = now_ns();
	if (evict_all(r->pool) < 0 || isnan(us[M_SPILL] = spilled(r, t0)))
		return -1;
	t0 = now_ns();
	if ((rc = mkv_fetch(r->pool, key, klen)))
		return fail("mkv_fetch", rc);
	us[M_FETCH] = (double)(now_ns() - t0) / 1e3;
	if (evict_all(r->pool) < 0)
		return -1;
	/* the spill of the fetched value: not measured, but let it go first */
	if (isnan(spilled(r, now_ns())))
		return -1;

	t0 = now_ns();
	rep = redisCommand(r->redis, "SET peer:%b %b", key, klen, r->val, (size_t)size);
	us[M_SET] = (double)(now_ns() - t0) / 1e3;
	rc = rep && rep->type == REDIS_REPLY_STATUS;
	if (rep)
		freeReplyObject(rep);
	if (!rc) {
		fprintf(stderr, PROG " " CMD ": Redis SET: %s\n", r->redis->errstr);
		return -1;
	}
	t0 = now_ns();
	rep = redisCommand(r->redis, "GET peer:%b", key, klen);
	us[M_GET] = (double)(now_ns() - t0) / 1e3;
	rc = rep && rep->type == REDIS_REPLY_STRING && rep->len == size &&
		!memcmp(rep->str, r->val, size);
	if (rep)
		freeReplyObject(rep);
	if (!rc) {
		fprintf(stderr, PROG " " CMD ": Redis GET did not give the value back\n");
		return -1;
	}
	return 0;
}

static double median(const double *v, size_t n)
{
	struct summary s;

	return summarize(v, n, &s) ? NAN : s.median;
}

/* A pool for one value of size at a time (and the fetch's copy), spilling to srv. */
static int run_pool(const struct redis_server *srv, const char *dir, uint64_t size, unsigned k,
		struct mkv_pool **pool)
{
	struct pool_spec spec = { .pages = 3 * (size / BENCH_PAGE + 1) + 64 };
	struct mkv_remote t = { .queue_mib = (uint32_t)(4 * size >> 20) + 64, .timeout_ms = 10000 };
	char *path;
	int rc;

	snprintf(t.servers, sizeof(t.servers), "127.0.0.1:%u", srv->port);
	snprintf(t.prefix, sizeof(t.prefix), "r%u:", k);
	if (!(path = malloc(strlen(dir) + 32)))
		return fail("pool", MKV_E_NOMEM);
	sprintf(path, "%s/pool%u", dir, k);
	rc = pool_make(path, &spec, CMD, pool);
	free(path);
	if (rc < 0)
		return -1;
	if ((rc = mkv_remote_set(*pool, &t))) {
		mkv_pool_close(pool);
		return fail("mkv_remote_set", rc);
	}
	return 0;
}

static int measure(const struct remote_opts *o, const struct redis_server *srv, const char *dir,
		struct row *rows)
{
	uint64_t max = 0, seed = o->seed;
	double *lat = calloc(o->values * M_COUNT, sizeof(*lat));
	double *per = calloc(o->repeat * (M_COUNT + 2), sizeof(*per));
	struct run r = { 0 };
	unsigned k = 0;
	int rc = -1;

	for (size_t i = 0; i < o->nsizes; i++)
		max = o->sizes[i] > max ? o->sizes[i] : max;
	if (!lat || !per || !(r.val = malloc(max)) || !(r.redis = redis_connect(srv, CMD)))
		goto out;
	for (uint64_t i = 0; i + 8 <= max; i += 8)
		store64le(r.val + i, rng_next(&seed));
	for (size_t s = 0; s < o->nsizes; s++) {
		uint64_t size = o->sizes[s];

		rows[s].size = size;
		for (uint64_t run = 0; run < o->repeat; run++) {
			double m[M_COUNT];

			r.spills = 0;
			if (run_pool(srv, dir, size, k++, &r.pool) < 0)
				goto out;
			for (uint64_t v = 0; v < o->values; v++) {
				double us[M_COUNT];

				if (one_value(&r, size, run * o->values + v, us) < 0) {
					mkv_pool_close(&r.pool);
					goto out;
				}
				for (int md = 0; md < M_COUNT; md++)
					lat[md * o->values + v] = us[md];
			}
			mkv_pool_close(&r.pool);
			for (int md = 0; md < M_COUNT; md++)
				per[md * o->repeat + run] = m[md] = median(lat + md * o->values, o->values);
			per[M_COUNT * o->repeat + run] = m[M_SPILL] / m[M_SET];
			per[(M_COUNT + 1) * o->repeat + run] = m[M_FETCH] / m[M_GET];
		}
		for (int md = 0; md < M_COUNT; md++) {
			rows[s].us[md] = median(per + md * o->repeat, o->repeat);
			rows[s].gbps[md] = (double)size / (rows[s].us[md] * 1e3);
		}
		rows[s].ratio[0] = median(per + M_COUNT * o->repeat, o->repeat);
		rows[s].ratio[1] = median(per + (M_COUNT + 1) * o->repeat, o->repeat);
		if (redis_flush(r.redis, CMD) < 0)
			goto out;
	}
	rc = 0;
out:
	if (rc && !r.redis)
		fprintf(stderr, PROG " " CMD ": out of memory, or no connection to the node\n");
	redisFree(r.redis);
	free(r.val);
	free(lat);
	free(per);
	return rc;
}

static void print_text(const struct remote_opts *o, const struct row *rows)
{
	printf("remote tier: %" PRIu64 " values per size, medians of %" PRIu64
			" runs; one Redis Cluster node on loopback\n", o->values, o->repeat);
	printf("%10s %10s %10s %10s %10s %8s %8s %8s %8s %11s %11s\n", "size", "spill us",
			"fetch us", "set us", "get us", "spill", "fetch", "set", "get",
			"spill/set", "fetch/get");
	printf("%10s %10s %10s %10s %10s %8s %8s %8s %8s %11s %11s\n", "", "", "", "", "",
			"GB/s", "GB/s", "GB/s", "GB/s", "", "");
	for (size_t i = 0; i < o->nsizes; i++) {
		const struct row *r = &rows[i];

		printf("%10" PRIu64 " %10.0f %10.0f %10.0f %10.0f %8.2f %8.2f %8.2f %8.2f %11.2f"
				" %11.2f\n", r->size, r->us[M_SPILL], r->us[M_FETCH], r->us[M_SET],
				r->us[M_GET], r->gbps[M_SPILL], r->gbps[M_FETCH], r->gbps[M_SET],
				r->gbps[M_GET], r->ratio[0], r->ratio[1]);
	}
}

static void print_json(const struct remote_opts *o, const struct row *rows)
{
	printf("{\n  \"command\": \"" CMD "\",\n  \"values\": %" PRIu64 ",\n  \"repeat\": %"
			PRIu64 ",\n  \"rows\": [", o->values, o->repeat);
	for (size_t i = 0; i < o->nsizes; i++) {
		const struct row *r = &rows[i];

		printf("%s\n    { \"size\": %" PRIu64, i ? "," : "", r->size);
		for (int m = 0; m < M_COUNT; m++) {
			printf(", \"%s_us\": ", mode_name[m]);
			json_number(stdout, r->us[m], 1);
			printf(", \"%s_gb_per_s\": ", mode_name[m]);
			json_number(stdout, r->gbps[m], 3);
		}
		fputs(", \"ratio_spill_redis_set\": ", stdout);
		json_number(stdout, r->ratio[0], 3);
		fputs(", \"ratio_fetch_redis_get\": ", stdout);
		json_number(stdout, r->ratio[1], 3);
		fputs(" }", stdout);
	}
	fputs("\n  ]\n}\n", stdout);
}

int cmd_remote(int argc, char **argv)
{
	struct remote_opts o = { .sizes = { 256 << 10, 32 << 20 }, .nsizes = 2, .values = 16,
		.repeat = 5, .seed = 1, .dir = "/dev/shm" };
	struct redis_server srv = { .pid = -1 };
	struct row rows[MAX_SIZES];
	char *dir;
	int rc = remote_parse(argc, argv, &o);

	if (rc)
		return rc < 0 ? EXIT_ERR : EXIT_OK;
	if (!(dir = scratch_dir(o.dir, CMD)))
		return EXIT_ERR;
	rc = redis_start_cluster(&srv, dir, CMD) < 0 || measure(&o, &srv, dir, rows) < 0;
	redis_stop(&srv, CMD);
	scratch_remove(dir, CMD);
	free(dir);
	if (rc)
		return EXIT_ERR;
	if (o.json)
		print_json(&o, rows);
	else
		print_text(&o, rows);
	return EXIT_OK;
}
