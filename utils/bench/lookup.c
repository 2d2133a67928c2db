/* SPDX-License-Identifier: MIT */
/*
 * lookup: latency of a lookup (mkv_exists), of a zero-copy read (mkv_get,
 * a read of the value's first byte, mkv_release) and of a prefix lookup
 * (mkv_prefix_len over a chain of C keys, all present) by R reader
 * processes on a pool of K keys, against two peers holding the same keys
 * and values on the same filesystem, in the same run.  Chain i is keys
 * iC to iC+C-1 of the pool, published as a chain (mkv_publish_chain, one
 * registry txn per chain: the fastest way the holder publishes), as a
 * KV-cache prefix is.
 *
 * raw LMDB, the limit of the registry: an environment that maps each key
 * to an entry as long as marukv's registry entry (its length read from the
 * pool's registry once filled: peer_entry_len()), the values in a data
 * file of 4 KiB pages laid out as marukv lays out its data arena.  Each reader
 * keeps one read-only txn and, per lookup, renews it, calls mdb_get and
 * resets it, which is what marukv's cache of read txns does per lookup; a
 * get also copies the entry out and reads the value's first byte in the
 * data file's mapping; a prefix lookup renews the txn, calls mdb_get for
 * each key until one is missing and resets it, as mkv_prefix_len does.
 * What marukv does on top is its own: the pin that
 * keeps a view valid after the txn has ended, the per-client hit
 * counters, the eviction hint.
 *
 * Redis, what LMCache's remote backend runs today: a redis-server on a
 * Unix socket, without persistence, holding the same keys and values;
 * each reader has its own hiredis connection and, per lookup, sends GET
 * and reads the first byte of the reply.  (It has no prefix lookup.)
 *
 * The parent creates and fills the pool (it holds the lease), the peer
 * environment and the Redis keys, then forks the readers.  It reports
 * what each pool size cost: the time to fill the pool, the bytes of
 * registry pages in use (marukv's and the LMDB peer's), and the median
 * time of a reader's mkv_pool_open of the filled pool (timed in a reader
 * before it opens the pool for its lookups; the pool is on tmpfs, always
 * in memory: there is no cold page cache to open from).  Each reader
 * opens everything itself and reads every key once through marukv and
 * the LMDB peer, checking the values' first bytes, so that its page tables
 * and caches are those of a reader that has run for a while.  Then, run
 * after run, each system in turn gets the same sequence of random keys
 * from every reader at once; each lookup is timed alone with
 * CLOCK_MONOTONIC, less the cost of reading the clock.  A run gives the
 * median and 99th percentile of each system over all its readers'
 * lookups; figures are medians over the runs, ratios medians of the
 * per-run ratios of medians.
 */
#include <marukv.h>

#include <hiredis/hiredis.h>
#include <lmdb.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "options.h"

#define CMD "lookup"
#define MAX_ROWS 16
#define MAX_READERS 64
#define TXN_PUTS 65536U       /* puts per txn while filling the LMDB peer */
#define REDIS_BATCH 1024U     /* SETs per pipelined batch */
#define CHECK_BYTES 64U       /* bytes of each value the readers check */
#define REDIS_CHECKS 1000U    /* Redis values each reader checks */
#define OPENS 9U              /* timed opens of each filled pool */

enum op {
	OP_MKV_EXISTS, OP_MKV_GET, OP_LMDB_EXISTS, OP_LMDB_GET, OP_REDIS_GET,
	OP_MKV_PREFIX, OP_LMDB_PREFIX, OP_COUNT
};
enum { JOB_OPEN = OP_COUNT, JOB_CLOSE, JOB_OPEN_TIMES };
enum ratio { R_EXISTS, R_GET, R_REDIS, R_PREFIX, R_COUNT };

static const char *const op_name[OP_COUNT] = {
	"marukv_exists", "marukv_get", "lmdb_exists", "lmdb_get", "redis_get",
	"marukv_prefix", "lmdb_prefix",
};
static const char *const op_title[OP_COUNT] = {
	"marukv exists", "marukv get", "LMDB exists", "LMDB get", "Redis GET",
	"marukv prefix", "LMDB prefix",
};
static const char *const ratio_name[R_COUNT] = {
	"ratio_exists_lmdb", "ratio_get_lmdb", "ratio_redis_get", "ratio_prefix_lmdb",
};

struct lk_opts {
	uint64_t keys[MAX_ROWS], readers[MAX_ROWS];
	size_t nkeys, nreaders;
	uint64_t value_size, ops, chain, prefix_ops, repeat, seed;
	const char *dir;
	int json, redis;
};

static int is_prefix(enum op op)
{
	return op == OP_MKV_PREFIX || op == OP_LMDB_PREFIX;
}

/* Timed calls of op per reader and run. */
static uint64_t op_calls(const struct lk_opts *o, enum op op)
{
	return is_prefix(op) ? o->prefix_ops : o->ops;
}

/* What a pool of one size cost: its fill, its registry, its opening. */
struct pool_fig {
	uint64_t keys;
	double fill_ns, open_ns;
	uint64_t registry_used, peer_used;   /* bytes of LMDB pages in use */
};

/* A reader: set by the parent before the fork, then the reader's own. */
struct reader {
	const struct lk_opts *o;
	struct job_shared *sh;
	uint64_t nkeys, npages, mapsize;
	size_t entry_len;         /* the LMDB peer's values: as long as marukv's entries */
	double clock_ns;
	const char *pool_path, *env_path, *data_path;
	const struct redis_server *srv;   /* NULL: no Redis peer */
	struct mkv_pool *pool;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi entries, pages;
	const uint8_t *data;
	size_t data_len;
	redisContext *redis;
	uint8_t *chain_bytes;     /* the chain of a prefix lookup */
	struct mkv_key *chain;
	size_t idx;
};

/* ---- options ---------------------------------------------------------------- */

static int lk_parse(int argc, char **argv, struct lk_opts *o)
{
	const struct opt opts[] = {
		{ "keys", OPT_U64_LIST, o->keys, .arg = "LIST", .lo = 1, .hi = 1U << 26,
			.max = MAX_ROWS, .count = &o->nkeys, .items = "counts",
			.help = "comma-separated pool sizes in keys (default 10000,1000000)" },
		{ "readers", OPT_U64_LIST, o->readers, .arg = "LIST", .lo = 1,
			.hi = MAX_READERS, .max = MAX_ROWS, .count = &o->nreaders,
			.items = "counts",
			.help = "comma-separated reader counts (default 1,2)" },
		{ "value-size", OPT_SIZE, &o->value_size, .arg = "BYTES", .lo = 1,
			.hi = 1U << 20,
			.help = "bytes per value, k/m/g suffixes allowed (default 1024)" },
		{ "ops", OPT_U64, &o->ops, .arg = "N", .lo = 1, .hi = 1U << 24,
			.help = "timed lookups per reader, system and run (default 20000)" },
		{ "chain", OPT_U64, &o->chain, .arg = "C", .lo = 1, .hi = 4096,
			.help = "keys per prefix lookup (default 64)" },
		{ "prefix-ops", OPT_U64, &o->prefix_ops, .arg = "N", .lo = 1, .hi = 1U << 24,
			.help = "timed prefix lookups per reader, system and run\n"
				"(default 1000)" },
		OPT_REDIS_RUN(o),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Latency of mkv_exists, of a zero-copy mkv_get and of mkv_prefix_len over C\n"
		"keys with R reader processes on a pool of K keys, against raw LMDB (renew,\n"
		"mdb_get, reset) on the same keys and Redis GET over a Unix socket, in the\n"
		"same run.\n" };
	int rc = opt_parse(&cmd, argc, argv);

	if (rc)
		return rc;
	for (size_t i = 0; i < o->nkeys; i++)
		if (o->keys[i] < o->chain) {
			fprintf(stderr, PROG " " CMD ": a pool of %" PRIu64 " keys is shorter than"
					" a chain (--chain %" PRIu64 ")\n", o->keys[i], o->chain);
			return -1;
		}
	return 0;
}

/* ---- filling the pool and the peers -------------------------------------------- */

static void lk_key(uint8_t key[BENCH_KEY_LEN], const struct lk_opts *o, uint64_t nkeys,
		uint64_t i)
{
	key_make(key, o->seed, nkeys, i);
}

/*
 * Keys first to first + n - 1 as one chain, in one registry txn: the
 * fastest way the holder has to publish.  0 or -1 (reported).
 */
static int publish_batch(struct mkv_pool *pool, const struct lk_opts *o, uint64_t nkeys,
		uint64_t first, size_t n, uint8_t (*kb)[BENCH_KEY_LEN], struct mkv_key *keys,
		struct mkv_buf *bufs)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < n && !rc; i++) {
		if ((rc = mkv_alloc(pool, o->value_size, &bufs[i]))) {
			fprintf(stderr, PROG " " CMD ": mkv_alloc: %s\n", mkv_why(rc));
			break;
		}
		lk_key(kb[i], o, nkeys, first + i);
		pattern_fill(bufs[i].data, o->value_size, kb[i]);
		keys[i] = (struct mkv_key){ kb[i], BENCH_KEY_LEN };
	}
	if (!rc && (rc = mkv_publish_chain(pool, NULL, 0, keys, bufs, n)))
		fprintf(stderr, PROG " " CMD ": mkv_publish_chain: %s\n", mkv_why(rc));
	for (size_t j = 0; rc && j < i; j++)
		if (bufs[j].data)
			(void)mkv_abort(pool, &bufs[j]);
	return rc ? -1 : 0;
}

/* Publish every key, a chain of C keys at a time; 0 or -1 (reported). */
static int fill_marukv(struct mkv_pool *pool, const struct lk_opts *o, uint64_t nkeys)
{
	uint8_t (*kb)[BENCH_KEY_LEN] = malloc(o->chain * sizeof(*kb));
	struct mkv_key *keys = malloc(o->chain * sizeof(*keys));
	struct mkv_buf *bufs = malloc(o->chain * sizeof(*bufs));
	int rc = kb && keys && bufs ? 0 : -1;

	if (rc)
		fprintf(stderr, PROG " " CMD ": out of memory\n");
	for (uint64_t i = 0; i < nkeys && !rc; i += o->chain)
		rc = publish_batch(pool, o, nkeys, i, nkeys - i < o->chain ? nkeys - i :
				o->chain, kb, keys, bufs);
	free(kb);
	free(keys);
	free(bufs);
	return rc;
}

/* The peer's entries, committed TXN_PUTS at a time; 0 or -1 (reported). */
static int fill_entries(MDB_env *env, MDB_dbi entries, const struct reader *r,
		uint8_t *map)
{
	const struct lk_opts *o = r->o;
	union peer_entry e = { 0 };
	MDB_txn *txn = NULL;
	int rc = 0;

	e.rec.npages = r->npages;
	e.rec.length = o->value_size;
	for (uint64_t i = 0; i < r->nkeys && !rc; i++) {
		uint8_t key[BENCH_KEY_LEN];
		MDB_val k = { sizeof(key), key }, d = { r->entry_len, e.bytes };

		if (!txn && (rc = mdb_txn_begin(env, NULL, 0, &txn)))
			return peer_fail(CMD, "mdb_txn_begin", rc);
		lk_key(key, o, r->nkeys, i);
		e.rec.page = i * r->npages;
		pattern_fill(map + e.rec.page * BENCH_PAGE, o->value_size, key);
		e.rec.txn = mdb_txn_id(txn);
		if ((rc = mdb_put(txn, entries, &k, &d, MDB_NOOVERWRITE))) {
			mdb_txn_abort(txn);
			return peer_fail(CMD, "mdb_put", rc);
		}
		if ((i + 1) % TXN_PUTS == 0 || i + 1 == r->nkeys) {
			rc = mdb_txn_commit(txn);
			txn = NULL;
			if (rc)
				return peer_fail(CMD, "mdb_txn_commit", rc);
		}
	}
	return 0;
}

/*
 * The LMDB peer: its environment and data file, and into *used the bytes of
 * its pages in use; 0 or -1 (reported).
 */
static int fill_lmdb(const struct reader *r, uint64_t *used)
{
	size_t len = r->nkeys * r->npages * BENCH_PAGE;
	MDB_env *env = NULL;
	MDB_dbi entries, pages;
	void *map = MAP_FAILED;
	int fd, rc, status = -1;

	fd = open(r->data_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	rc = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)len);
	if (!rc) {
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED)
			rc = errno;
	}
	if (rc) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", r->data_path, strerror(rc));
		goto out;
	}
	if ((rc = peer_env(r->env_path, r->mapsize, 0, &env)) ||
	    (rc = peer_dbis(env, MDB_CREATE, &entries, &pages))) {
		peer_fail(CMD, "create", rc);
		goto out;
	}
	status = fill_entries(env, entries, r, map);
	if (status == 0) {
		MDB_envinfo info;
		MDB_stat st;

		if ((rc = mdb_env_info(env, &info)) || (rc = mdb_env_stat(env, &st)))
			status = peer_fail(CMD, "info", rc);
		else
			*used = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
	}
out:
	if (env)
		mdb_env_close(env);
	if (map != MAP_FAILED)
		munmap(map, len);
	if (fd >= 0)
		close(fd);
	return status;
}

/* The same keys and values in Redis, pipelined; 0 or -1 (reported). */
static int fill_redis(redisContext *c, const struct lk_opts *o, uint64_t nkeys)
{
	uint8_t *val = malloc(o->value_size);
	uint64_t queued = 0;
	int rc = redis_flush(c, CMD);

	if (!val) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return -1;
	}
	for (uint64_t i = 0; i < nkeys && !rc; i++) {
		uint8_t key[BENCH_KEY_LEN];

		lk_key(key, o, nkeys, i);
		pattern_fill(val, o->value_size, key);
		rc = redis_set_append(c, key, sizeof(key), val, o->value_size, CMD);
		if (!rc && ++queued == REDIS_BATCH) {
			rc = redis_replies(c, queued, CMD);
			queued = 0;
		}
	}
	if (!rc && queued)
		rc = redis_replies(c, queued, CMD);
	free(val);
	return rc;
}

/* ---- readers ----------------------------------------------------------------- */

static int reader_fail(const struct reader *r, const char *what, const char *why)
{
	fprintf(stderr, PROG " " CMD ": reader %zu: %s: %s\n", r->idx, what, why);
	return -1;
}

/* A value read back is not the one stored. */
static int reader_verify(const struct reader *r, const char *what, uint64_t i)
{
	__atomic_store_n(&r->sh->verify_failed, 1, __ATOMIC_RELAXED);
	fprintf(stderr, PROG " " CMD ": reader %zu: %s: the value of key %" PRIu64
			" is not the one stored\n", r->idx, what, i);
	return -1;
}

static int value_ok(const struct reader *r, const void *v, size_t len,
		const uint8_t key[BENCH_KEY_LEN])
{
	size_t n = len < CHECK_BYTES ? len : CHECK_BYTES;

	return len == r->o->value_size && pattern_check(v, n, key) == n;
}

/* One lookup of key; 0, or -1 (reported). */
static int op_once(struct reader *r, enum op op, const uint8_t key[BENCH_KEY_LEN])
{
	MDB_val k = { BENCH_KEY_LEN, (void *)key }, d;
	union peer_entry e;
	struct mkv_view v;
	redisReply *rep;
	int rc;

	switch (op) {
	case OP_MKV_EXISTS:
		rc = mkv_exists(r->pool, key, BENCH_KEY_LEN);
		return rc == 1 ? 0 : reader_fail(r, "mkv_exists", rc ? mkv_why(rc) : "no such key");
	case OP_MKV_GET:
		if ((rc = mkv_get(r->pool, key, BENCH_KEY_LEN, &v)))
			return reader_fail(r, "mkv_get", mkv_why(rc));
		(void)*(const volatile uint8_t *)v.data;
		if ((rc = mkv_release(r->pool, &v)))
			return reader_fail(r, "mkv_release", mkv_why(rc));
		return 0;
	case OP_LMDB_EXISTS:
	case OP_LMDB_GET:
		if ((rc = mdb_txn_renew(r->txn)))
			return reader_fail(r, "mdb_txn_renew", mdb_strerror(rc));
		rc = mdb_get(r->txn, r->entries, &k, &d);
		if (!rc && d.mv_size != r->entry_len)
			rc = MDB_CORRUPTED;
		if (!rc && op == OP_LMDB_GET) {
			memcpy(e.bytes, d.mv_data, d.mv_size);
			(void)*(const volatile uint8_t *)(r->data + e.rec.page * BENCH_PAGE);
		}
		mdb_txn_reset(r->txn);
		return rc ? reader_fail(r, "mdb_get", mdb_strerror(rc)) : 0;
	case OP_REDIS_GET:
		rep = redisCommand(r->redis, "GET %b", key, (size_t)BENCH_KEY_LEN);
		rc = rep && rep->type == REDIS_REPLY_STRING && rep->len == r->o->value_size;
		if (rc)
			(void)*(const volatile char *)rep->str;
		else
			reader_fail(r, "Redis GET", !rep ? r->redis->errstr :
					rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
		if (rep)
			freeReplyObject(rep);
		return rc ? 0 : -1;
	default:
		return reader_fail(r, "job", "unknown");
	}
}

/* The keys of chain c into r->chain. */
static void chain_keys(struct reader *r, uint64_t c)
{
	for (uint64_t j = 0; j < r->o->chain; j++)
		lk_key(r->chain_bytes + j * BENCH_KEY_LEN, r->o, r->nkeys, c * r->o->chain + j);
}

/* One prefix lookup of r->chain, every key present; 0, or -1 (reported). */
static int prefix_once(struct reader *r, enum op op)
{
	size_t hits = 0;
	int rc;

	if (op == OP_MKV_PREFIX) {
		if ((rc = mkv_prefix_len(r->pool, r->chain, r->o->chain, &hits)))
			return reader_fail(r, "mkv_prefix_len", mkv_why(rc));
	} else {
		if ((rc = mdb_txn_renew(r->txn)))
			return reader_fail(r, "mdb_txn_renew", mdb_strerror(rc));
		for (; hits < r->o->chain; hits++) {
			MDB_val k = { r->chain[hits].len, (void *)r->chain[hits].data }, d;

			if ((rc = mdb_get(r->txn, r->entries, &k, &d)))
				break;
		}
		mdb_txn_reset(r->txn);
		if (rc && rc != MDB_NOTFOUND)
			return reader_fail(r, "mdb_get", mdb_strerror(rc));
	}
	if (hits != r->o->chain) {
		fprintf(stderr, PROG " " CMD ": reader %zu: %s: a prefix of %zu keys, not %"
				PRIu64 "\n", r->idx, op_name[op], hits, r->o->chain);
		return -1;
	}
	return 0;
}

/* Every key once through marukv and the LMDB peer, some through Redis, checked. */
static int reader_warm(struct reader *r)
{
	for (uint64_t i = 0; i < r->nkeys; i++) {
		uint8_t key[BENCH_KEY_LEN];
		MDB_val k = { sizeof(key), key }, d;
		union peer_entry e;
		struct mkv_view v;
		int rc, ok;

		lk_key(key, r->o, r->nkeys, i);
		if ((rc = mkv_get(r->pool, key, sizeof(key), &v)))
			return reader_fail(r, "mkv_get", mkv_why(rc));
		ok = value_ok(r, v.data, v.len, key);
		if ((rc = mkv_release(r->pool, &v)))
			return reader_fail(r, "mkv_release", mkv_why(rc));
		if (!ok)
			return reader_verify(r, "marukv", i);
		if ((rc = mdb_txn_renew(r->txn)))
			return reader_fail(r, "mdb_txn_renew", mdb_strerror(rc));
		rc = mdb_get(r->txn, r->entries, &k, &d);
		if (!rc && d.mv_size != r->entry_len)
			rc = MDB_CORRUPTED;
		if (!rc)
			memcpy(e.bytes, d.mv_data, d.mv_size);
		mdb_txn_reset(r->txn);
		if (rc)
			return reader_fail(r, "mdb_get", mdb_strerror(rc));
		if (e.rec.page * BENCH_PAGE + e.rec.length > r->data_len ||
		    !value_ok(r, r->data + e.rec.page * BENCH_PAGE, e.rec.length, key))
			return reader_verify(r, "LMDB peer", i);
	}
	for (uint64_t i = 0; r->redis && i < r->nkeys && i < REDIS_CHECKS; i++) {
		uint8_t key[BENCH_KEY_LEN];
		redisReply *rep;
		int ok;

		lk_key(key, r->o, r->nkeys, i);
		rep = redisCommand(r->redis, "GET %b", key, sizeof(key));
		if (!rep)
			return reader_fail(r, "Redis GET", r->redis->errstr);
		ok = rep->type == REDIS_REPLY_STRING && value_ok(r, rep->str, rep->len, key);
		freeReplyObject(rep);
		if (!ok)
			return reader_verify(r, "Redis", i);
	}
	return 0;
}

static void reader_close(struct reader *r)
{
	mkv_pool_close(&r->pool);
	if (r->txn)
		mdb_txn_abort(r->txn);
	if (r->env)
		mdb_env_close(r->env);
	if (r->data)
		munmap((void *)r->data, r->data_len);
	redisFree(r->redis);
	free(r->chain_bytes);
	free(r->chain);
	r->txn = NULL;
	r->env = NULL;
	r->data = NULL;
	r->redis = NULL;
	r->chain_bytes = NULL;
	r->chain = NULL;
}

static int reader_open(struct reader *r)
{
	int rc, fd;

	if ((rc = mkv_pool_open(r->pool_path, MKV_RDONLY, NULL, &r->pool)))
		return reader_fail(r, r->pool_path, mkv_why(rc));
	if ((rc = peer_env(r->env_path, r->mapsize, MDB_RDONLY, &r->env)) ||
	    (rc = peer_dbis(r->env, 0, &r->entries, &r->pages)) ||
	    (rc = mdb_txn_begin(r->env, NULL, MDB_RDONLY, &r->txn)))
		return reader_fail(r, r->env_path, mdb_strerror(rc));
	mdb_txn_reset(r->txn);
	r->data_len = r->nkeys * r->npages * BENCH_PAGE;
	fd = open(r->data_path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		void *map = mmap(NULL, r->data_len, PROT_READ, MAP_SHARED, fd, 0);

		close(fd);
		if (map != MAP_FAILED)
			r->data = map;
	}
	if (!r->data)
		return reader_fail(r, r->data_path, strerror(errno));
	if (r->srv && !(r->redis = redis_connect(r->srv, CMD)))
		return -1;
	r->chain_bytes = malloc(r->o->chain * BENCH_KEY_LEN);
	r->chain = malloc(r->o->chain * sizeof(*r->chain));
	if (!r->chain_bytes || !r->chain)
		return reader_fail(r, "chain", "out of memory");
	for (uint64_t j = 0; j < r->o->chain; j++)
		r->chain[j] = (struct mkv_key){ r->chain_bytes + j * BENCH_KEY_LEN, BENCH_KEY_LEN };
	return reader_warm(r);
}

/*
 * OPENS opens of the filled pool as a reader opens it, each timed alone,
 * into the first samples; 0 or -1 (reported).  The pool is on tmpfs, so
 * its pages are in memory: what an open costs with a warm page cache.
 */
static int reader_open_times(struct reader *r)
{
	for (unsigned i = 0; i < OPENS; i++) {
		struct mkv_pool *pool = NULL;
		uint64_t t0 = now_ns();
		int rc = mkv_pool_open(r->pool_path, MKV_RDONLY, NULL, &pool);

		r->sh->samples[i] = (double)(now_ns() - t0);
		if (rc)
			return reader_fail(r, r->pool_path, mkv_why(rc));
		mkv_pool_close(&pool);
	}
	return 0;
}

/*
 * The run's lookups of one system, each timed; 0 or -1 (reported).  The
 * keys are drawn before the clock starts.
 */
static int reader_run(struct reader *r, enum op op)
{
	uint64_t run = __atomic_load_n(&r->sh->run, __ATOMIC_ACQUIRE);
	uint64_t rng = fmix64(r->o->seed ^ fmix64(run << 16 | r->idx));
	uint64_t n = op_calls(r->o, op);
	double *s = r->sh->samples + r->idx * n;

	for (uint64_t i = 0; i < n; i++) {
		uint8_t key[BENCH_KEY_LEN];
		uint64_t t0, t;
		int rc;

		if (is_prefix(op))
			chain_keys(r, rng_next(&rng) % (r->nkeys / r->o->chain));
		else
			lk_key(key, r->o, r->nkeys, rng_next(&rng) % r->nkeys);
		t0 = now_ns();
		rc = is_prefix(op) ? prefix_once(r, op) : op_once(r, op, key);
		t = now_ns() - t0;
		if (rc < 0)
			return -1;
		s[i] = (double)t > r->clock_ns ? (double)t - r->clock_ns : 0;
	}
	return 0;
}

static int reader_job(void *arg, size_t worker, unsigned job)
{
	struct reader *r = arg;

	r->idx = worker;
	if (job == JOB_OPEN)
		return reader_open(r);
	if (job == JOB_OPEN_TIMES)
		return reader_open_times(r);
	if (job == JOB_CLOSE) {
		reader_close(r);
		return 0;
	}
	return reader_run(r, (enum op)job);
}

/* ---- runs ---------------------------------------------------------------------- */

/* One row: a pool size and a reader count; per-run figures, then their summaries. */
struct row {
	uint64_t keys, readers;
	double *med[OP_COUNT], *p99[OP_COUNT], *ratio[R_COUNT];
	struct summary smed[OP_COUNT], sp99[OP_COUNT], sratio[R_COUNT];
};

/* Run every system once in the first n readers: the row's figures of this run. */
static int measure(struct crew *crew, struct job_shared *sh, const struct lk_opts *o,
		struct row *row, uint64_t run)
{
	struct summary s;

	for (int op = 0; op < OP_COUNT; op++) {
		row->med[op][run] = row->p99[op][run] = NAN;
		if (op == OP_REDIS_GET && !o->redis)
			continue;
		__atomic_store_n(&sh->run, run, __ATOMIC_RELEASE);
		if (crew_run(crew, (unsigned)op, row->readers) < 0)
			return -1;
		if (summarize(sh->samples, row->readers * op_calls(o, (enum op)op), &s) < 0) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			return -1;
		}
		row->med[op][run] = s.median;
		row->p99[op][run] = s.p99;
	}
	row->ratio[R_EXISTS][run] = row->med[OP_MKV_EXISTS][run] / row->med[OP_LMDB_EXISTS][run];
	row->ratio[R_GET][run] = row->med[OP_MKV_GET][run] / row->med[OP_LMDB_GET][run];
	row->ratio[R_REDIS][run] = row->med[OP_REDIS_GET][run] / row->med[OP_MKV_GET][run];
	row->ratio[R_PREFIX][run] = row->med[OP_MKV_PREFIX][run] / row->med[OP_LMDB_PREFIX][run];
	return 0;
}

/* Fill a pool of pf->keys keys and its peers, then measure its rows. */
static int run_pool(const struct lk_opts *o, struct pool_fig *pf, const char *top,
		const struct redis_server *srv, redisContext *rc_parent, struct row *rows,
		double clock_ns)
{
	uint64_t nkeys = pf->keys, t0;
	uint64_t max_readers = 0, npages = (o->value_size + BENCH_PAGE - 1) / BENCH_PAGE;
	char *dir = scratch_dir(top, CMD);
	struct reader r = { .o = o, .nkeys = nkeys, .npages = npages, .clock_ns = clock_ns,
		.srv = o->redis ? srv : NULL };
	struct mkv_pool *pool = NULL;
	struct job_shared *sh = NULL;
	struct crew crew = { 0 };
	struct mkv_stat st;
	struct summary s;
	uint8_t key[BENCH_KEY_LEN];
	size_t shlen = 0, nsamples;
	int rc, status = EXIT_ERR, started = 0;

	for (size_t i = 0; i < o->nreaders; i++)
		if (o->readers[i] > max_readers)
			max_readers = o->readers[i];
	if (!dir)
		return EXIT_ERR;
	r.pool_path = path_join(dir, "pool");
	r.env_path = path_join(dir, "peer.mdb");
	r.data_path = path_join(dir, "peer.data");
	nsamples = max_readers * (o->ops > o->prefix_ops ? o->ops : o->prefix_ops);
	shlen = sizeof(*sh) + (nsamples > OPENS ? nsamples : OPENS) * sizeof(double);
	sh = shared_alloc(shlen);
	r.sh = sh;
	if (!r.pool_path || !r.env_path || !r.data_path || !sh) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	/* Room for every value, and for the pages writers keep granted. */
	if (pool_make(r.pool_path, &(struct pool_spec){
			.pages = nkeys * npages + nkeys * npages / 32 + 1024 }, CMD, &pool) < 0)
		goto out;
	t0 = now_ns();
	if (fill_marukv(pool, o, nkeys) < 0)
		goto out;
	pf->fill_ns = (double)(now_ns() - t0);
	if ((rc = mkv_pool_stat(pool, &st))) {
		fprintf(stderr, PROG " " CMD ": %s: %s\n", r.pool_path, mkv_why(rc));
		goto out;
	}
	if (st.entries != nkeys) {
		fprintf(stderr, PROG " " CMD ": %s: %" PRIu64 " entries after %" PRIu64
				" publishes\n", r.pool_path, st.entries, nkeys);
		status = EXIT_VERIFY;
		goto out;
	}
	r.mapsize = st.registry_size;
	pf->registry_used = st.registry_used;
	lk_key(key, o, nkeys, 0);
	if (peer_entry_len(r.pool_path, key, CMD, &r.entry_len) < 0)
		goto out;
	if (fill_lmdb(&r, &pf->peer_used) < 0 || (o->redis && fill_redis(rc_parent, o, nkeys) < 0))
		goto out;
	if (crew_start(&crew, max_readers, reader_job, &r, CMD) < 0)
		goto out;
	started = 1;
	if (crew_run(&crew, JOB_OPEN_TIMES, 1) < 0)
		goto out;
	if (summarize(sh->samples, OPENS, &s) < 0) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	pf->open_ns = s.median;
	if (crew_run(&crew, JOB_OPEN, max_readers) < 0)
		goto out;
	for (uint64_t run = 0; run < o->repeat; run++)
		for (size_t i = 0; i < o->nreaders; i++)
			if (measure(&crew, sh, o, &rows[i], run) < 0)
				goto out;
	status = EXIT_OK;
out:
	if (started && crew_run(&crew, JOB_CLOSE, max_readers) < 0)
		status = EXIT_ERR;
	if (started && crew_stop(&crew) < 0)
		status = EXIT_ERR;
	if (sh && sh->verify_failed)
		status = EXIT_VERIFY;
	mkv_pool_close(&pool);
	if (scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	shared_free(sh, shlen);
	free((char *)r.pool_path);
	free((char *)r.env_path);
	free((char *)r.data_path);
	free(dir);
	return status;
}

/* ---- results -------------------------------------------------------------------- */

static int summarize_row(const struct lk_opts *o, struct row *row)
{
	int rc = 0;

	for (int op = 0; op < OP_COUNT; op++) {
		rc |= summarize(row->med[op], o->repeat, &row->smed[op]);
		rc |= summarize(row->p99[op], o->repeat, &row->sp99[op]);
	}
	for (int k = 0; k < R_COUNT; k++)
		rc |= summarize(row->ratio[k], o->repeat, &row->sratio[k]);
	return rc;
}

/* "median/p99" of an op, or "-" without a sample. */
static void cell(char *buf, size_t len, const struct row *r, enum op op, double div)
{
	if (isnan(r->smed[op].median))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.0f/%.0f", r->smed[op].median / div, r->sp99[op].median / div);
}

static void print_text(const struct lk_opts *o, const struct row *rows, size_t n,
		const struct pool_fig *pf, double clock_ns)
{
	char c[OP_COUNT][32], per_key[2][32];

	printf("lookup: %" PRIu64 "-byte values, %" PRIu64 " lookups and %" PRIu64 " prefix"
			" lookups of %" PRIu64 " keys per reader, system and run, %" PRIu64
			" run%s, %s\n", o->value_size, o->ops, o->prefix_ops, o->chain, o->repeat,
			o->repeat == 1 ? "" : "s", o->dir);
	printf("ns per call, median/p99 of a run, medians over the runs (clock cost %.0f ns"
			" taken off each)\n", clock_ns);
	printf("%8s %7s", "keys", "readers");
	for (int op = 0; op <= OP_REDIS_GET; op++)
		printf(" %13s", op_title[op]);
	printf(" %11s %8s %9s\n", "exists/LMDB", "get/LMDB", "Redis/get");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		printf("%8" PRIu64 " %7" PRIu64, r->keys, r->readers);
		for (int op = 0; op <= OP_REDIS_GET; op++) {
			cell(c[op], sizeof(c[op]), r, (enum op)op, 1);
			printf(" %13s", c[op]);
		}
		printf(" %11.2f %8.2f", r->sratio[R_EXISTS].median, r->sratio[R_GET].median);
		if (isnan(r->sratio[R_REDIS].median))
			printf(" %9s\n", "-");
		else
			printf(" %9.1f\n", r->sratio[R_REDIS].median);
	}
	printf("\n%8s %7s %14s %14s %14s %14s %11s\n", "keys", "readers", op_title[OP_MKV_PREFIX],
			"per key", op_title[OP_LMDB_PREFIX], "per key", "prefix/LMDB");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		cell(c[OP_MKV_PREFIX], sizeof(c[0]), r, OP_MKV_PREFIX, 1);
		cell(per_key[0], sizeof(per_key[0]), r, OP_MKV_PREFIX, (double)o->chain);
		cell(c[OP_LMDB_PREFIX], sizeof(c[0]), r, OP_LMDB_PREFIX, 1);
		cell(per_key[1], sizeof(per_key[1]), r, OP_LMDB_PREFIX, (double)o->chain);
		printf("%8" PRIu64 " %7" PRIu64 " %14s %14s %14s %14s %11.2f\n", r->keys, r->readers,
				c[OP_MKV_PREFIX], per_key[0], c[OP_LMDB_PREFIX], per_key[1],
				r->sratio[R_PREFIX].median);
	}
	printf("\n%8s %8s %10s %14s %9s %14s %9s %9s\n", "keys", "fill s", "fill k/s",
			"registry B", "B/key", "LMDB peer B", "B/key", "open us");
	for (size_t k = 0; k < o->nkeys; k++)
		printf("%8" PRIu64 " %8.2f %10.1f %14" PRIu64 " %9.1f %14" PRIu64 " %9.1f %9.0f\n",
				pf[k].keys, pf[k].fill_ns / 1e9, pf[k].keys / (pf[k].fill_ns / 1e6),
				pf[k].registry_used, (double)pf[k].registry_used / pf[k].keys,
				pf[k].peer_used, (double)pf[k].peer_used / pf[k].keys,
				pf[k].open_ns / 1e3);
}

static void print_json(const struct lk_opts *o, const struct row *rows, size_t n,
		const struct pool_fig *pf, double clock_ns)
{
	printf("{\n  \"command\": \"lookup\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"value_size\": %" PRIu64 ",\n  \"ops\": %" PRIu64 ",\n  \"chain\": %"
			PRIu64 ",\n  \"prefix_ops\": %" PRIu64 ",\n  \"repeat\": %" PRIu64
			",\n  \"seed\": %" PRIu64 ",\n  \"redis\": %s,\n  \"clock_ns\": ",
			o->value_size, o->ops, o->chain, o->prefix_ops, o->repeat, o->seed,
			o->redis ? "true" : "false");
	json_number(stdout, clock_ns, 0);
	printf(",\n  \"rows\": [");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		printf("%s\n    { \"keys\": %" PRIu64 ", \"readers\": %" PRIu64, i ? "," : "",
				r->keys, r->readers);
		for (int op = 0; op < OP_COUNT; op++) {
			printf(", \"%s\": ", op_name[op]);
			if (isnan(r->smed[op].median)) {
				printf("null");
				continue;
			}
			printf("{ \"median_ns\": ");
			json_number(stdout, r->smed[op].median, 0);
			printf(", \"p99_ns\": ");
			json_number(stdout, r->sp99[op].median, 0);
			if (is_prefix((enum op)op)) {
				printf(", \"per_key_ns\": ");
				json_number(stdout, r->smed[op].median / (double)o->chain, 0);
			}
			printf(" }");
		}
		for (int k = 0; k < R_COUNT; k++) {
			printf(", \"%s\": ", ratio_name[k]);
			json_number(stdout, r->sratio[k].median, 4);
		}
		printf(" }");
	}
	printf("\n  ],\n  \"pools\": [");
	for (size_t k = 0; k < o->nkeys; k++) {
		printf("%s\n    { \"keys\": %" PRIu64 ", \"fill_s\": ", k ? "," : "", pf[k].keys);
		json_number(stdout, pf[k].fill_ns / 1e9, 3);
		printf(", \"registry_bytes\": %" PRIu64 ", \"registry_bytes_per_key\": ",
				pf[k].registry_used);
		json_number(stdout, (double)pf[k].registry_used / pf[k].keys, 1);
		printf(", \"lmdb_bytes\": %" PRIu64 ", \"lmdb_bytes_per_key\": ", pf[k].peer_used);
		json_number(stdout, (double)pf[k].peer_used / pf[k].keys, 1);
		printf(", \"open_ns\": ");
		json_number(stdout, pf[k].open_ns, 0);
		printf(" }");
	}
	printf("\n  ]\n}\n");
}

int cmd_lookup(int argc, char **argv)
{
	struct lk_opts o = {
		.keys = { 10000, 1000000 }, .nkeys = 2, .readers = { 1, 2 }, .nreaders = 2,
		.value_size = 1024, .ops = 20000, .chain = 64, .prefix_ops = 1000, .repeat = 5,
		.seed = 1, .dir = "/dev/shm",
		.redis = 1,
	};
	struct redis_server srv = { .pid = -1 };
	redisContext *rc_parent = NULL;
	struct row *rows = NULL;
	struct pool_fig *pf = NULL;
	double *v = NULL, clock_ns;
	size_t nrows, per_row = 2 * OP_COUNT + R_COUNT;
	char *top = NULL;
	int rc, status = EXIT_ERR;

	rc = lk_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
	nrows = o.nkeys * o.nreaders;
	rows = calloc(nrows, sizeof(*rows));
	v = calloc(nrows * per_row * o.repeat, sizeof(*v));
	pf = calloc(o.nkeys, sizeof(*pf));
	if (!rows || !v || !pf) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < nrows; i++) {
		double *p = v + i * per_row * o.repeat;

		rows[i].keys = o.keys[i / o.nreaders];
		rows[i].readers = o.readers[i % o.nreaders];
		for (int op = 0; op < OP_COUNT; op++, p += 2 * o.repeat) {
			rows[i].med[op] = p;
			rows[i].p99[op] = p + o.repeat;
		}
		for (int k = 0; k < R_COUNT; k++, p += o.repeat)
			rows[i].ratio[k] = p;
	}
	clock_ns = clock_cost_ns();
	if (!(top = scratch_dir(o.dir, CMD)))
		goto out;
	if (o.redis && (redis_start(&srv, top, CMD) < 0 ||
			!(rc_parent = redis_connect(&srv, CMD))))
		goto out;
	status = EXIT_OK;
	for (size_t k = 0; k < o.nkeys && status == EXIT_OK; k++) {
		pf[k].keys = o.keys[k];
		status = run_pool(&o, &pf[k], top, &srv, rc_parent, rows + k * o.nreaders,
				clock_ns);
	}
	for (size_t i = 0; i < nrows && status == EXIT_OK; i++)
		if (summarize_row(&o, &rows[i]) < 0) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			status = EXIT_ERR;
		}
	if (status == EXIT_OK) {
		if (o.json)
			print_json(&o, rows, nrows, pf, clock_ns);
		else
			print_text(&o, rows, nrows, pf, clock_ns);
	}
out:
	redisFree(rc_parent);
	if (redis_stop(&srv, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	if (top && scratch_remove(top, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(top);
	free(rows);
	free(pf);
	free(v);
	return status;
}
