/* SPDX-License-Identifier: MIT */
/*
 * put: throughput of writes of values of 4 KiB to 32 MiB into a pool,
 * against the data path without marukv and against Redis SET, in the same
 * run.  Modes:
 *
 * memcpy: libc memcpy into a libpmem2 mapping of a file on the same
 * filesystem, mapped as marukv maps its data arena (shared, page store
 * granularity required), then persisted as marukv persists its values:
 * the mapping's persist function (msync on a page-cache file, cache line
 * flushes on a DAX filesystem), or a fence alone on a file in memory
 * (peer_in_memory()): what any durable write of the value does, the limit
 * of the data path.
 * nt-copy: libpmem2's memcpy function with PMEM2_F_MEM_NONTEMPORAL into
 * the same kind of mapping; it persists before it returns (on a file in
 * memory, with PMEM2_F_MEM_NOFLUSH, a fence).
 * mkv_put: the copying write.
 * alloc+publish: mkv_alloc, the caller's write in place (here the same
 * memcpy from the same source into buf.data) and mkv_publish.
 * Redis SET of the same keys and values over a Unix socket (hiredis), to
 * a redis-server of the bench's own, without persistence.
 *
 * marukv's writes are measured twice: by the process that holds the lease
 * (its registrations commit in its own holder thread) and by a client of
 * a pool whose lease another process holds (they go through its request
 * ring to the holder), as all but one of the writers sharing a pool do.
 *
 * A run of a mode writes V values of one size, all from one source
 * buffer, each to a fresh destination: a fresh pool or file per run, big
 * enough that nothing is reused or evicted.  Before the clock starts the
 * writer writes over the whole destination once (marukv: an mkv_alloc of
 * the whole data arena, a memset, mkv_abort), so that the page faults of
 * a first touch, which a writer that has run for a while no longer takes,
 * are not counted.  A run's throughput is V times the size over the time
 * of the V writes; figures are medians over the runs, and the ratios
 * medians of the per-run ratios.
 */
#include <marukv.h>

#include <hiredis/hiredis.h>
#include <libpmem2.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "options.h"

#define CMD "put"
#define MAX_SIZES 16
#define MAX_CLIENTS 4U        /* the pools' slots: holder, writer, a spare */

/* The marukv modes come in pairs (put, alloc), one pair per role, in role order. */
enum mode { M_MEMCPY, M_NT, M_PUT_H, M_ALLOC_H, M_PUT_C, M_ALLOC_C, M_PUT_N, M_ALLOC_N, M_REDIS,
	M_COUNT };
/* nosum: the holder again, its handle opened with MKV_NOCHECKSUM. */
enum role { W_HOLDER, W_CLIENT, W_NOSUM, W_COUNT };

static const char *const mode_name[M_COUNT] = {
	"memcpy", "nt_copy", "mkv_put", "alloc_publish", "mkv_put", "alloc_publish", "mkv_put",
	"alloc_publish", "redis_set",
};
static const char *const role_name[W_COUNT] = { "holder", "client", "nosum" };

struct put_opts {
	uint64_t sizes[MAX_SIZES];
	size_t nsizes;
	uint64_t bytes, max_values, repeat, seed;
	const char *dir;
	int json, redis;
};

/* What a run writes: V values of size bytes from src under keys. */
struct job {
	const struct put_opts *o;
	uint64_t size, values;
	const uint8_t *src;
	const uint8_t *keys;      /* values x BENCH_KEY_LEN */
	const char *dir;          /* the run's scratch directory */
};

/* ---- options ---------------------------------------------------------------- */

static int put_parse(int argc, char **argv, struct put_opts *o)
{
	const struct opt opts[] = {
		/* Redis takes values up to its proto-max-bulk-len, 512 MiB. */
		{ "sizes", OPT_SIZE_LIST, o->sizes, .arg = "LIST", .lo = 1, .hi = 256ULL << 20,
			.max = MAX_SIZES, .count = &o->nsizes, .items = "sizes",
			.help = "comma-separated value sizes, k/m/g suffixes allowed\n"
				"(default 4k,64k,1m,16m,32m)" },
		{ "bytes", OPT_SIZE, &o->bytes, .arg = "BYTES", .lo = 1, .hi = 1ULL << 36,
			.help = "bytes a run writes, k/m/g suffixes allowed (default 256m)" },
		{ "max-values", OPT_U64, &o->max_values, .arg = "N", .lo = 1, .hi = 1U << 20,
			.help = "at most this many values a run (default 4096)" },
		OPT_REDIS_RUN(o),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Throughput of mkv_put and of mkv_alloc + write in place + mkv_publish, by the\n"
		"lease holder, by a client, and by the holder with MKV_NOCHECKSUM (nosum),\n"
		"against memcpy and libpmem2's non-temporal copy\n"
		"into the same kind of mapping, and Redis SET over a Unix socket, in the same run.\n" };

	return opt_parse(&cmd, argc, argv);
}

/* Values a run writes: --bytes worth, at least one, at most --max-values. */
static uint64_t run_values(const struct put_opts *o, uint64_t size)
{
	uint64_t v = o->bytes / size;

	if (v < 1)
		v = 1;
	return v < o->max_values ? v : o->max_values;
}

static uint64_t pages_of(uint64_t size)
{
	return (size + BENCH_PAGE - 1) / BENCH_PAGE;
}

/* ---- the data path without marukv ----------------------------------------------- */

struct mapping {
	struct pmem2_map *map;
	uint8_t *addr;
	pmem2_persist_fn persist;
	pmem2_memcpy_fn memcpy_fn;
	bool in_memory;
};

/* Map fd as marukv maps its data arena (see src/persist.c); 0 or -1 (reported). */
static int map_like_arena(int fd, const char *path, struct mapping *m)
{
	struct pmem2_config *cfg = NULL;
	struct pmem2_source *src = NULL;
	int rc;

	if (!(rc = pmem2_config_new(&cfg)) &&
	    !(rc = pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE)) &&
	    !(rc = pmem2_config_set_sharing(cfg, PMEM2_SHARED)) &&
	    !(rc = pmem2_source_from_fd(&src, fd)))
		rc = pmem2_map_new(&m->map, cfg, src);
	pmem2_source_delete(&src);
	pmem2_config_delete(&cfg);
	if (rc) {
		fprintf(stderr, PROG " " CMD ": %s: libpmem2: %s\n", path, pmem2_errormsg());
		return -1;
	}
	m->addr = pmem2_map_get_address(m->map);
	m->persist = pmem2_get_persist_fn(m->map);
	m->memcpy_fn = pmem2_get_memcpy_fn(m->map);
	m->in_memory = pmem2_map_get_store_granularity(m->map) == PMEM2_GRANULARITY_PAGE &&
		peer_in_memory(fd);
	return 0;
}

/*
 * What the library persists a value in memory with (persist.c): a full
 * barrier.  A seq_cst read-modify-write is one on every target it builds
 * for, and, unlike a thread fence, TSan builds accept it.
 */
static void full_fence(void)
{
	static uint64_t word;

	__atomic_fetch_add(&word, 0, __ATOMIC_SEQ_CST);
}

/* memcpy + persist, or the non-temporal copy, of every value; the time in ns. */
static int run_copy(const struct job *j, int nt, uint64_t *ns)
{
	uint64_t stride = pages_of(j->size) * BENCH_PAGE, len = j->values * stride, t0;
	char *path = path_join(j->dir, "data");
	struct mapping m = { 0 };
	int fd = -1, rc;

	if (!path) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return -1;
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	rc = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)len);
	if (rc)
		fprintf(stderr, PROG " " CMD ": %s: %s\n", path, strerror(rc));
	if (rc || map_like_arena(fd, path, &m) < 0) {
		if (fd >= 0)
			close(fd);
		free(path);
		return -1;
	}
	memset(m.addr, 0, len);
	t0 = now_ns();
	for (uint64_t i = 0; i < j->values; i++) {
		uint8_t *dst = m.addr + i * stride;

		if (nt && m.in_memory) {
			m.memcpy_fn(dst, j->src, j->size,
					PMEM2_F_MEM_NONTEMPORAL | PMEM2_F_MEM_NOFLUSH);
			full_fence();
		} else if (nt) {
			m.memcpy_fn(dst, j->src, j->size, PMEM2_F_MEM_NONTEMPORAL);
		} else {
			memcpy(dst, j->src, j->size);
			if (m.in_memory)
				full_fence();
			else
				m.persist(dst, j->size);
		}
	}
	*ns = now_ns() - t0;
	rc = memcmp(m.addr + (j->values - 1) * stride, j->src, j->size) == 0;
	pmem2_map_delete(&m.map);
	close(fd);
	free(path);
	if (!rc)
		fprintf(stderr, PROG " " CMD ": %s: the last value copied is not the source\n",
				nt ? "nt-copy" : "memcpy");
	return rc ? 0 : -1;
}

/* ---- marukv -------------------------------------------------------------------- */

/*
 * Touch every page of the data arena once through this handle: grant it
 * all, write it, give it back.
 */
static int arena_warm(struct mkv_pool *pool)
{
	struct mkv_stat st;
	struct mkv_buf buf;
	int rc;

	if ((rc = mkv_pool_stat(pool, &st)) ||
	    (rc = mkv_alloc(pool, st.pages_total * st.page_size, &buf))) {
		fprintf(stderr, PROG " " CMD ": warm-up: %s\n", mkv_why(rc));
		return -1;
	}
	memset(buf.data, 0, buf.len);
	if ((rc = mkv_abort(pool, &buf))) {
		fprintf(stderr, PROG " " CMD ": warm-up: mkv_abort: %s\n", mkv_why(rc));
		return -1;
	}
	return 0;
}

/* Every value through mkv_put, or mkv_alloc + memcpy + mkv_publish; the time in ns. */
static int write_values(struct mkv_pool *pool, const struct job *j, int alloc, uint64_t *ns)
{
	uint64_t t0;
	int rc = 0;

	if (arena_warm(pool) < 0)
		return -1;
	t0 = now_ns();
	for (uint64_t i = 0; i < j->values && !rc; i++) {
		const uint8_t *key = j->keys + i * BENCH_KEY_LEN;
		struct mkv_buf buf;

		if (!alloc) {
			rc = mkv_put(pool, key, BENCH_KEY_LEN, j->src, j->size);
			continue;
		}
		if ((rc = mkv_alloc(pool, j->size, &buf)))
			break;
		memcpy(buf.data, j->src, j->size);
		if ((rc = mkv_publish(pool, key, BENCH_KEY_LEN, &buf)))
			(void)mkv_abort(pool, &buf);
	}
	*ns = now_ns() - t0;
	if (rc)
		fprintf(stderr, PROG " " CMD ": %s: %s\n", alloc ? "alloc+publish" : "mkv_put",
				mkv_why(rc));
	return rc ? -1 : 0;
}

/* What the client writer reports. */
struct client_out {
	uint64_t ns;
	int32_t status;
};

static void client_write(const char *path, const struct job *j, int alloc,
		struct client_out *out)
{
	struct mkv_pool *pool = NULL;
	int rc = mkv_pool_open(path, 0, NULL, &pool);

	if (rc)
		fprintf(stderr, PROG " " CMD ": client: %s: %s\n", path, mkv_why(rc));
	else
		out->status = write_values(pool, j, alloc, &out->ns) < 0 ? EXIT_ERR : EXIT_OK;
	mkv_pool_close(&pool);
	_exit(out->status);
}

/* The pool holds every value written, the last one as it was written. */
static int check_pool(struct mkv_pool *pool, const struct job *j, const char *path)
{
	const uint8_t *key = j->keys + (j->values - 1) * BENCH_KEY_LEN;
	struct mkv_stat st;
	struct mkv_view v;
	int rc, ok;

	if ((rc = mkv_pool_stat(pool, &st)) || (rc = mkv_get(pool, key, BENCH_KEY_LEN, &v))) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", path, mkv_why(rc));
		return EXIT_ERR;
	}
	ok = st.entries == j->values && v.len == j->size && memcmp(v.data, j->src, v.len) == 0;
	(void)mkv_release(pool, &v);
	if (!ok) {
		fprintf(stderr, PROG " " CMD ": %s: %" PRIu64 " entries after %" PRIu64
				" writes, or the last value is not the one written\n", path,
				st.entries, j->values);
		return EXIT_VERIFY;
	}
	return EXIT_OK;
}

/* One run of a marukv mode in a fresh pool; EXIT_OK with the time in ns. */
static int run_marukv(const struct job *j, enum role role, int alloc, uint64_t *ns)
{
	uint64_t need = j->values * pages_of(j->size);
	char *path = path_join(j->dir, "pool");
	struct client_out *out = shared_alloc(sizeof(*out));
	struct mkv_pool *pool = NULL;
	int status = EXIT_ERR;
	pid_t pid;

	if (!path || !out) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	/* Room for every value, and for the pages a writer keeps granted. */
	if (pool_make(path, &(struct pool_spec){ .pages = need + need / 8 + 16,
			.max_clients = MAX_CLIENTS }, CMD, &pool) < 0)
		goto out;
	if (role == W_NOSUM) {
		int rc;

		mkv_pool_close(&pool);
		if ((rc = mkv_pool_open(path, MKV_NOCHECKSUM, NULL, &pool))) {
			fprintf(stderr, PROG " " CMD ": %s: %s\n", path, mkv_why(rc));
			goto out;
		}
	}
	if (role != W_CLIENT) {
		if (write_values(pool, j, alloc, ns) < 0)
			goto out;
	} else {
		out->status = EXIT_ERR;
		if ((pid = child_fork(CMD)) < 0)
			goto out;
		if (pid == 0)
			client_write(path, j, alloc, out);
		if (child_reap(pid, CMD, "client writer", 0) != 0 || out->status != EXIT_OK)
			goto out;
		*ns = out->ns;
	}
	status = check_pool(pool, j, path);
out:
	mkv_pool_close(&pool);
	shared_free(out, sizeof(*out));
	free(path);
	return status;
}

/* ---- Redis ---------------------------------------------------------------------- */

static int run_redis(redisContext *c, const struct job *j, uint64_t *ns)
{
	uint64_t t0;
	int rc = redis_flush(c, CMD);

	if (rc < 0)
		return -1;
	t0 = now_ns();
	for (uint64_t i = 0; i < j->values && !rc; i++) {
		redisReply *r = redisCommand(c, "SET %b %b", j->keys + i * BENCH_KEY_LEN,
				(size_t)BENCH_KEY_LEN, j->src, (size_t)j->size);

		rc = r && r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK") ? 0 : -1;
		if (rc)
			fprintf(stderr, PROG " " CMD ": Redis SET: %s\n", !r ? c->errstr :
					r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
		if (r)
			freeReplyObject(r);
	}
	*ns = now_ns() - t0;
	return rc < 0 || redis_flush(c, CMD) < 0 ? -1 : 0;
}

/* ---- runs ---------------------------------------------------------------------- */

/* Per size: each mode's bytes per second and the ratios, per run, then summaries. */
struct row {
	uint64_t size, values;
	double *rate[M_COUNT], *ratio[W_COUNT][2];
	struct summary srate[M_COUNT], sratio[W_COUNT][2];
};

/* One mode of one run in a scratch directory of its own; EXIT_OK with the rate. */
static int run_mode(struct job *j, enum mode m, redisContext *c, double *rate)
{
	char *dir = scratch_dir(j->o->dir, CMD);
	uint64_t ns = 0;
	int status;

	if (!dir)
		return EXIT_ERR;
	j->dir = dir;
	switch (m) {
	case M_MEMCPY:
	case M_NT:
		status = run_copy(j, m == M_NT, &ns) < 0 ? EXIT_ERR : EXIT_OK;
		break;
	case M_REDIS:
		status = run_redis(c, j, &ns) < 0 ? EXIT_ERR : EXIT_OK;
		break;
	default:
		status = run_marukv(j, (enum role)((m - M_PUT_H) / 2), (m - M_PUT_H) % 2, &ns);
		break;
	}
	if (scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(dir);
	*rate = ns ? (double)(j->values * j->size) * 1e9 / (double)ns : NAN;
	return status;
}

static int run_size(const struct put_opts *o, struct row *row, const uint8_t *src,
		redisContext *c)
{
	struct job j = { .o = o, .size = row->size, .values = row->values, .src = src };
	uint8_t *keys = malloc(row->values * BENCH_KEY_LEN);
	int status = EXIT_OK;

	if (!keys) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return EXIT_ERR;
	}
	for (uint64_t i = 0; i < row->values; i++)
		key_make(keys + i * BENCH_KEY_LEN, o->seed, row->size, i);
	j.keys = keys;
	for (uint64_t r = 0; r < o->repeat && status == EXIT_OK; r++) {
		for (int m = 0; m < M_COUNT && status == EXIT_OK; m++) {
			row->rate[m][r] = NAN;
			if (m != M_REDIS || o->redis)
				status = run_mode(&j, (enum mode)m, c, &row->rate[m][r]);
		}
		for (int w = 0; w < W_COUNT; w++) {
			row->ratio[w][0][r] = row->rate[M_PUT_H + 2 * w][r] / row->rate[M_MEMCPY][r];
			row->ratio[w][1][r] = row->rate[M_ALLOC_H + 2 * w][r] /
				row->rate[M_MEMCPY][r];
		}
	}
	free(keys);
	return status;
}

/* ---- results -------------------------------------------------------------------- */

/* Column of role w in the table: the peers, then that role's marukv modes. */
static enum mode col_mode(int col, int w)
{
	static const enum mode cols[5] = { M_MEMCPY, M_NT, M_PUT_H, M_ALLOC_H, M_REDIS };
	enum mode m = cols[col];

	return m == M_PUT_H || m == M_ALLOC_H ? (enum mode)(m + 2 * w) : m;
}

/* One table: rates divided by unit (bytes: GB/s; values: thousands per second). */
static void print_table(const struct put_opts *o, const struct row *rows, int values)
{
	printf("%10s %7s %7s %9s %9s %9s %9s %9s", "size", "writer", "values", "memcpy",
			"nt-copy", "mkv_put", "alloc+pub", "Redis SET");
	if (values)
		printf("\n");
	else
		printf(" %10s %12s\n", "put/memcpy", "alloc/memcpy");
	for (size_t i = 0; i < o->nsizes; i++)
		for (int w = 0; w < W_COUNT; w++) {
			const struct row *r = &rows[i];
			double unit = values ? (double)r->size * 1e3 : 1e9;

			printf("%10" PRIu64 " %7s %7" PRIu64, r->size, role_name[w], r->values);
			for (int col = 0; col < 5; col++) {
				double v = r->srate[col_mode(col, w)].median / unit;

				if (isnan(v))
					printf(" %9s", "-");
				else
					printf(" %9.*f", values ? 1 : 2, v);
			}
			if (values)
				printf("\n");
			else
				printf(" %10.2f %12.2f\n", r->sratio[w][0].median,
						r->sratio[w][1].median);
		}
}

static void print_text(const struct put_opts *o, const struct row *rows)
{
	printf("put: up to %" PRIu64 " bytes and %" PRIu64 " values per run, %" PRIu64
			" run%s, %s; medians over the runs\n", o->bytes, o->max_values, o->repeat,
			o->repeat == 1 ? "" : "s", o->dir);
	printf("GB/s (10^9 bytes per second):\n");
	print_table(o, rows, 0);
	printf("\nthousands of values per second:\n");
	print_table(o, rows, 1);
}

static void print_json(const struct put_opts *o, const struct row *rows)
{
	printf("{\n  \"command\": \"put\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"bytes\": %" PRIu64 ",\n  \"max_values\": %" PRIu64 ",\n  \"repeat\": %"
			PRIu64 ",\n  \"seed\": %" PRIu64 ",\n  \"redis\": %s,\n  \"rows\": [",
			o->bytes, o->max_values, o->repeat, o->seed, o->redis ? "true" : "false");
	for (size_t i = 0; i < o->nsizes; i++)
		for (int w = 0; w < W_COUNT; w++) {
			const struct row *r = &rows[i];

			printf("%s\n    { \"value_size\": %" PRIu64 ", \"writer\": \"%s\", \"values\": %"
					PRIu64, i || w ? "," : "", r->size, role_name[w], r->values);
			for (int col = 0; col < 5; col++) {
				enum mode m = col_mode(col, w);
				double v = r->srate[m].median;

				printf(", \"%s\": ", mode_name[m]);
				if (isnan(v)) {
					printf("null");
					continue;
				}
				printf("{ \"bytes_per_s\": ");
				json_number(stdout, v, 0);
				printf(", \"ops_per_s\": ");
				json_number(stdout, v / (double)r->size, 0);
				printf(" }");
			}
			printf(", \"ratio_put_memcpy\": ");
			json_number(stdout, r->sratio[w][0].median, 4);
			printf(", \"ratio_alloc_memcpy\": ");
			json_number(stdout, r->sratio[w][1].median, 4);
			printf(" }");
		}
	printf("\n  ]\n}\n");
}

int cmd_put(int argc, char **argv)
{
	struct put_opts o = {
		.sizes = { 4096, 65536, 1U << 20, 16U << 20, 32U << 20 }, .nsizes = 5,
		.bytes = 256ULL << 20,
		.max_values = 4096, .repeat = 5, .seed = 1, .dir = "/dev/shm", .redis = 1,
	};
	struct redis_server srv = { .pid = -1 };
	redisContext *c = NULL;
	struct row rows[MAX_SIZES];
	size_t per_row = M_COUNT + 2 * W_COUNT;
	uint64_t max_size = 0;
	uint8_t key0[BENCH_KEY_LEN], *src = NULL;
	double *v = NULL;
	char *dir = NULL;
	int rc, status = EXIT_ERR;

	rc = put_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
	for (size_t i = 0; i < o.nsizes; i++)
		if (o.sizes[i] > max_size)
			max_size = o.sizes[i];
	v = calloc(o.nsizes * per_row * o.repeat, sizeof(*v));
	src = malloc(max_size);
	if (!v || !src) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	key_make(key0, o.seed, 0, 0);
	pattern_fill(src, max_size, key0);
	for (size_t i = 0; i < o.nsizes; i++) {
		double *p = v + i * per_row * o.repeat;

		rows[i].size = o.sizes[i];
		rows[i].values = run_values(&o, o.sizes[i]);
		for (int m = 0; m < M_COUNT; m++, p += o.repeat)
			rows[i].rate[m] = p;
		for (int w = 0; w < W_COUNT; w++, p += 2 * o.repeat) {
			rows[i].ratio[w][0] = p;
			rows[i].ratio[w][1] = p + o.repeat;
		}
	}
	if (o.redis) {
		if (!(dir = scratch_dir(o.dir, CMD)) || redis_start(&srv, dir, CMD) < 0 ||
		    !(c = redis_connect(&srv, CMD)))
			goto out;
	}
	status = EXIT_OK;
	for (size_t i = 0; i < o.nsizes && status == EXIT_OK; i++)
		status = run_size(&o, &rows[i], src, c);
	for (size_t i = 0; i < o.nsizes && status == EXIT_OK; i++) {
		rc = 0;
		for (int m = 0; m < M_COUNT; m++)
			rc |= summarize(rows[i].rate[m], o.repeat, &rows[i].srate[m]);
		for (int w = 0; w < W_COUNT; w++)
			for (int k = 0; k < 2; k++)
				rc |= summarize(rows[i].ratio[w][k], o.repeat, &rows[i].sratio[w][k]);
		if (rc < 0) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			status = EXIT_ERR;
		}
	}
	if (status == EXIT_OK) {
		if (o.json)
			print_json(&o, rows);
		else
			print_text(&o, rows);
	}
out:
	redisFree(c);
	if (redis_stop(&srv, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	if (dir && scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(dir);
	free(src);
	free(v);
	return status;
}
