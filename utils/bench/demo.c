/* SPDX-License-Identifier: MIT */
/*
 * demo: one prefill-like writer process and N decode-like reader processes
 * share a pool.  Prompts are chains of blocks keyed by a content hash over
 * the previous key and the block's token ids, h_i = hash(h_{i-1}, tokens_i),
 * so prompts that share a prefix share keys.  The writer publishes each
 * block with a pattern derived from its key; readers ask how many leading
 * blocks of a prompt are cached, take zero-copy views of them and check
 * every byte.  Everything but the timing is a function of the seed.
 */
#include <marukv.h>

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "../args.h"
#include "bench.h"
#include "options.h"

/* ---- the demo's prompts, keys and payloads ----------------------------- */

#define KEY_LEN BENCH_KEY_LEN
#define TOKENS_PER_BLOCK 256
#define VOCAB 32000

struct plan {
	size_t prompts;
	size_t blocks;          /* blocks per prompt */
	size_t block_size;      /* bytes per block */
	uint64_t seed;
	uint8_t *keys;          /* prompts * blocks keys of KEY_LEN bytes */
};

static const uint8_t *plan_key(const struct plan *pl, size_t p, size_t i)
{
	return pl->keys + (p * pl->blocks + i) * KEY_LEN;
}

/*
 * Prompts as chains of blocks.  Prompt 0 is fresh; each later prompt, three
 * times in four, repeats the first k blocks (1 <= k <= blocks) of an earlier
 * prompt and continues with fresh tokens.  The chain's root depends on the
 * block size, so runs with different block sizes never share a key.
 */
static int plan_build(struct plan *pl)
{
	size_t n = pl->prompts * pl->blocks;
	uint64_t *tseed = calloc(n, sizeof(*tseed));
	uint32_t tok[TOKENS_PER_BLOCK];
	uint64_t rng = pl->seed ^ 0x6d61727566b76ULL;
	uint8_t root[KEY_LEN];

	pl->keys = malloc(n * KEY_LEN);
	if (!tseed || !pl->keys) {
		free(tseed);
		free(pl->keys);
		pl->keys = NULL;
		return -1;
	}
	for (size_t p = 0; p < pl->prompts; p++) {
		size_t q = 0, k = 0;

		if (p > 0 && rng_next(&rng) % 4 != 0) {
			q = rng_next(&rng) % p;
			k = 1 + rng_next(&rng) % pl->blocks;
		}
		for (size_t i = 0; i < pl->blocks; i++)
			tseed[p * pl->blocks + i] = i < k ?
				tseed[q * pl->blocks + i] : rng_next(&rng);
	}
	store64le(root, fmix64(0x6d6b762d64656d6fULL ^ pl->block_size));
	store64le(root + 8, fmix64(0x636861696e2d6b76ULL + pl->block_size));
	for (size_t p = 0; p < pl->prompts; p++) {
		const uint8_t *prev = root;

		for (size_t i = 0; i < pl->blocks; i++) {
			uint64_t ts = tseed[p * pl->blocks + i];
			uint8_t *key = pl->keys + (p * pl->blocks + i) * KEY_LEN;

			for (size_t j = 0; j < TOKENS_PER_BLOCK; j++)
				tok[j] = (uint32_t)(rng_next(&ts) % VOCAB);
			chain_hash(prev, tok, TOKENS_PER_BLOCK, key);
			prev = key;
		}
	}
	free(tseed);
	return 0;
}

/* ---- child processes ---------------------------------------------------- */

enum role { ROLE_WRITER, ROLE_READER };

/* What a child sends its parent, in one write() (below PIPE_BUF). */
struct report {
	int32_t role;
	int32_t index;
	int32_t status;             /* 0, or the mkv code that stopped the child */
	int32_t pad_;
	uint64_t keys_written;
	uint64_t keys_present;
	uint64_t prefix_lookups;
	uint64_t blocks_requested;
	uint64_t blocks_hit;
	uint64_t bytes_verified;
	uint64_t verify_errors;
	uint64_t final_requested;   /* reader's last pass, after the writer is done */
	uint64_t final_hit;
	uint64_t elapsed_ns;
	char msg[512];
};

/* State shared by the parent and its children (anonymous shared mapping). */
struct shared {
	int writer_done;
	uint64_t prompts_done;      /* prompts the writer has finished */
};

struct child_ctx {
	const struct plan *pl;
	const char *path;
	struct shared *sh;
	int fd;                     /* write end of the report pipe */
	struct report rep;
};

static void report_fail(struct child_ctx *c, int rc, const char *what)
{
	c->rep.status = rc;
	snprintf(c->rep.msg, sizeof(c->rep.msg), "%s: %s", what, mkv_why(rc));
}

static void child_send(struct child_ctx *c)
{
	const char *p = (const char *)&c->rep;
	size_t left = sizeof(c->rep);

	while (left) {
		ssize_t w = write(c->fd, p, left);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(EXIT_ERR);
		p += w;
		left -= (size_t)w;
	}
}

static void fill_keys(const struct plan *pl, size_t p, struct mkv_key *keys)
{
	for (size_t i = 0; i < pl->blocks; i++) {
		keys[i].data = plan_key(pl, p, i);
		keys[i].len = KEY_LEN;
	}
}

/* Prefill: skip the cached prefix of each prompt, publish the rest. */
static int writer_run(struct child_ctx *c, struct mkv_pool *pool)
{
	const struct plan *pl = c->pl;
	struct mkv_key *keys = calloc(pl->blocks, sizeof(*keys));
	int rc = 0;

	if (!keys) {
		report_fail(c, MKV_E_NOMEM, "writer");
		return MKV_E_NOMEM;
	}
	for (size_t p = 0; p < pl->prompts && !rc; p++) {
		size_t hits = 0;

		fill_keys(pl, p, keys);
		rc = mkv_prefix_len(pool, keys, pl->blocks, &hits);
		if (rc < 0) {
			report_fail(c, rc, "writer: mkv_prefix_len");
			break;
		}
		c->rep.prefix_lookups++;
		c->rep.keys_present += hits;
		for (size_t i = hits; i < pl->blocks; i++) {
			struct mkv_buf buf;

			rc = mkv_alloc(pool, pl->block_size, &buf);
			if (rc < 0) {
				report_fail(c, rc, "writer: mkv_alloc");
				break;
			}
			pattern_fill(buf.data, pl->block_size, keys[i].data);
			rc = mkv_publish(pool, keys[i].data, KEY_LEN, &buf);
			if (rc == MKV_E_EXISTS) {
				c->rep.keys_present++;     /* cached meanwhile */
				rc = 0;
			} else if (rc < 0) {
				report_fail(c, rc, "writer: mkv_publish");
				mkv_abort(pool, &buf);
				break;
			} else {
				c->rep.keys_written++;
			}
		}
		if (!rc)
			__atomic_store_n(&c->sh->prompts_done, p + 1, __ATOMIC_RELEASE);
	}
	free(keys);
	return rc;
}

/* Decode: look a prompt's chain up, view the hit prefix, check it. */
static int reader_lookup(struct child_ctx *c, struct mkv_pool *pool,
		size_t p, struct mkv_key *keys, struct mkv_view *views, int final)
{
	const struct plan *pl = c->pl;
	size_t hits = 0, found = 0;
	int rc;

	fill_keys(pl, p, keys);
	rc = mkv_prefix_len(pool, keys, pl->blocks, &hits);
	if (rc < 0) {
		report_fail(c, rc, "reader: mkv_prefix_len");
		return rc;
	}
	c->rep.prefix_lookups++;
	c->rep.blocks_requested += pl->blocks;
	if (final)
		c->rep.final_requested += pl->blocks;
	if (hits == 0)
		return 0;
	rc = mkv_get_batch(pool, keys, hits, MKV_BATCH_PREFIX, views, &found);
	if (rc < 0) {
		report_fail(c, rc, "reader: mkv_get_batch");
		return rc;
	}
	c->rep.blocks_hit += found;
	if (final)
		c->rep.final_hit += found;
	if (found < hits) {
		/* Nothing deletes in the demo: a key seen once stays. */
		c->rep.verify_errors += hits - found;
		fprintf(stderr, PROG ": reader %d: prompt %zu: %zu keys of the prefix"
				" vanished between lookups\n", c->rep.index, p, hits - found);
	}
	for (size_t i = 0; i < found; i++) {
		size_t off = views[i].len;

		if (views[i].len != pl->block_size)
			off = 0;
		else
			off = pattern_check(views[i].data, views[i].len, keys[i].data);
		if (off == pl->block_size) {
			c->rep.bytes_verified += views[i].len;
		} else {
			if (c->rep.verify_errors < 5)
				fprintf(stderr, PROG ": reader %d: prompt %zu block %zu:"
						" %zu bytes, first difference at byte %zu\n",
						c->rep.index, p, i, views[i].len, off);
			c->rep.verify_errors++;
		}
		rc = mkv_release(pool, &views[i]);
		if (rc < 0) {
			report_fail(c, rc, "reader: mkv_release");
			for (size_t j = i + 1; j < found; j++)
				mkv_release(pool, &views[j]);
			return rc;
		}
	}
	return 0;
}

/*
 * Until the writer is done, prompts at random among those it has finished
 * and the one it is working on (decode follows prefill); then one pass
 * over all.
 */
static int reader_run(struct child_ctx *c, struct mkv_pool *pool)
{
	const struct plan *pl = c->pl;
	struct mkv_key *keys = calloc(pl->blocks, sizeof(*keys));
	struct mkv_view *views = calloc(pl->blocks, sizeof(*views));
	uint64_t rng = fmix64(pl->seed + 0x72656164ULL * (uint64_t)(c->rep.index + 1));
	int rc = 0;

	if (!keys || !views) {
		free(keys);
		free(views);
		report_fail(c, MKV_E_NOMEM, "reader");
		return MKV_E_NOMEM;
	}
	while (!__atomic_load_n(&c->sh->writer_done, __ATOMIC_ACQUIRE)) {
		uint64_t before = c->rep.blocks_hit;
		uint64_t n = __atomic_load_n(&c->sh->prompts_done, __ATOMIC_ACQUIRE) + 1;

		if (n > pl->prompts)
			n = pl->prompts;
		rc = reader_lookup(c, pool, rng_next(&rng) % n, keys, views, 0);
		if (rc < 0)
			goto out;
		if (c->rep.blocks_hit == before)
			sched_yield();      /* nothing cached yet: let the writer run */
	}
	for (size_t p = 0; p < pl->prompts; p++) {
		rc = reader_lookup(c, pool, p, keys, views, 1);
		if (rc < 0)
			goto out;
	}
out:
	free(keys);
	free(views);
	return rc;
}

static void child_main(struct child_ctx *c)
{
	struct mkv_pool *pool = NULL;
	uint64_t t0 = now_ns();
	int rc;

	rc = mkv_pool_open(c->path, c->rep.role == ROLE_WRITER ? 0 : MKV_RDONLY,
			NULL, &pool);
	if (rc < 0) {
		report_fail(c, rc, c->rep.role == ROLE_WRITER ?
				"writer: mkv_pool_open" : "reader: mkv_pool_open");
	} else {
		if (c->rep.role == ROLE_WRITER)
			writer_run(c, pool);
		else
			reader_run(c, pool);
		mkv_pool_close(&pool);
	}
	c->rep.elapsed_ns = now_ns() - t0;
	child_send(c);
	fflush(stderr);
	_exit(c->rep.status ? EXIT_ERR : EXIT_OK);
}

/* ---- demo --------------------------------------------------------------- */

struct demo_opts {
	const char *pool;
	uint64_t readers, prompts, blocks, block_size, seed;
	int json;
};

static int demo_parse(int argc, char **argv, struct demo_opts *o)
{
	const struct opt opts[] = {
		{ "pool", OPT_STRING, &o->pool, .arg = "PATH",
			.help = "pool directory (default: $MARUKV_POOL, else " MKV_DEFAULT_POOL ");\n"
				"created, sized for the demo, if absent" },
		{ "readers", OPT_U64, &o->readers, .arg = "N", .lo = 0,
			.hi = MKV_MAX_CLIENTS_LIMIT, .help = "reader processes (default 3)" },
		{ "prompts", OPT_U64, &o->prompts, .arg = "N", .lo = 1, .hi = 1U << 20,
			.help = "prompts (default 32)" },
		{ "blocks", OPT_U64, &o->blocks, .arg = "N", .lo = 1, .hi = 1U << 16,
			.help = "blocks per prompt (default 16)" },
		{ "block-size", OPT_SIZE, &o->block_size, .arg = "BYTES", .lo = 1,
			.hi = 1ULL << 30,
			.help = "bytes per block, k/m/g suffixes allowed (default 256k)" },
		OPT_SEED(&o->seed, "seed of the prompts (default 1)"),
		OPT_JSON(&o->json),
		OPT_END,
	};
	const struct opt_cmd cmd = { "demo", .opts = opts, .about =
		"One writer process publishes prompts as chains of blocks; N reader\n"
		"processes look their prefixes up and verify every byte they read.\n" };
	int rc = opt_parse(&cmd, argc, argv);

	if (rc)
		return rc;
	if (o->prompts * o->blocks > (1U << 24)) {
		fprintf(stderr, PROG " demo: --prompts x --blocks is too large\n");
		return -1;
	}
	return 0;
}

/* Open or create the pool; an existing pool is used as it is. */
static int demo_open(const struct demo_opts *o, char **path)
{
	struct mkv_opts *opts = NULL;
	struct mkv_pool *pool = NULL;
	uint64_t page = MKV_DEFAULT_PAGE_SIZE;
	uint64_t per_block = (o->block_size + page - 1) / page * page;
	uint64_t size = o->prompts * o->blocks * per_block;
	int rc;

	/* Room for every block of every prompt, plus a quarter. */
	size += size / 4;
	size = (size + (1ULL << 20) - 1) & ~((1ULL << 20) - 1);
	rc = mkv_opts_new(&opts);
	if (rc == 0)
		rc = mkv_opts_set_data_size(opts, size);
	if (rc == 0)
		rc = mkv_pool_open(o->pool, MKV_CREATE, opts, &pool);
	mkv_opts_delete(&opts);
	if (rc < 0) {
		fprintf(stderr, PROG " demo: %s: %s\n", args_pool_name(o->pool), mkv_why(rc));
		return rc;
	}
	*path = strdup(mkv_pool_path(pool));
	mkv_pool_close(&pool);
	if (!*path) {
		fprintf(stderr, PROG " demo: out of memory\n");
		return MKV_E_NOMEM;
	}
	return 0;
}

static void demo_print(const struct demo_opts *o, const char *path,
		const struct report *tot, uint64_t writer_ns, uint64_t elapsed_ns)
{
	double secs = (double)elapsed_ns / 1e9;
	double wsecs = (double)writer_ns / 1e9;
	double gbps = secs > 0 ? (double)tot->bytes_verified / 1e9 / secs : 0;
	double pubs = wsecs > 0 ? (double)tot->keys_written / wsecs : 0;
	double hit = tot->blocks_requested ?
		100.0 * (double)tot->blocks_hit / (double)tot->blocks_requested : 0;

	if (o->json) {
		fputs("{\n  \"pool\": ", stdout);
		json_string(stdout, path);
		printf(",\n"
			"  \"seed\": %" PRIu64 ",\n"
			"  \"readers\": %" PRIu64 ",\n"
			"  \"prompts\": %" PRIu64 ",\n"
			"  \"blocks\": %" PRIu64 ",\n"
			"  \"block_size\": %" PRIu64 ",\n"
			"  \"keys_written\": %" PRIu64 ",\n"
			"  \"keys_present\": %" PRIu64 ",\n"
			"  \"prefix_lookups\": %" PRIu64 ",\n"
			"  \"blocks_requested\": %" PRIu64 ",\n"
			"  \"blocks_hit\": %" PRIu64 ",\n"
			"  \"final_blocks_requested\": %" PRIu64 ",\n"
			"  \"final_blocks_hit\": %" PRIu64 ",\n"
			"  \"bytes_verified\": %" PRIu64 ",\n"
			"  \"verify_errors\": %" PRIu64 ",\n"
			"  \"writer_ns\": %" PRIu64 ",\n"
			"  \"elapsed_ns\": %" PRIu64 "\n"
			"}\n",
			o->seed, o->readers, o->prompts, o->blocks, o->block_size,
			tot->keys_written, tot->keys_present, tot->prefix_lookups,
			tot->blocks_requested, tot->blocks_hit, tot->final_requested,
			tot->final_hit, tot->bytes_verified, tot->verify_errors,
			writer_ns, elapsed_ns);
		return;
	}
	printf("%-17s %s\n", "pool:", path);
	printf("%-17s %" PRIu64 " prompts x %" PRIu64 " blocks x %" PRIu64
			" bytes, seed %" PRIu64 ", %" PRIu64 " readers\n", "workload:",
			o->prompts, o->blocks, o->block_size, o->seed, o->readers);
	printf("%-17s %" PRIu64 "\n", "keys written:", tot->keys_written);
	printf("%-17s %" PRIu64 "\n", "keys present:", tot->keys_present);
	printf("%-17s %" PRIu64 "\n", "prefix lookups:", tot->prefix_lookups);
	printf("%-17s %" PRIu64 " / %" PRIu64 " (%.1f %%)\n", "blocks hit:",
			tot->blocks_hit, tot->blocks_requested, hit);
	printf("%-17s %" PRIu64 " / %" PRIu64 "\n", "final pass hit:",
			tot->final_hit, tot->final_requested);
	printf("%-17s %" PRIu64 "\n", "bytes verified:", tot->bytes_verified);
	printf("%-17s %" PRIu64 "\n", "verify errors:", tot->verify_errors);
	printf("%-17s %.3f s (writer %.3f s)\n", "elapsed:", secs, wsecs);
	printf("%-17s %.2f GB/s verified, %.0f publishes/s\n", "rate:", gbps, pubs);
}

int cmd_demo(int argc, char **argv)
{
	struct demo_opts o = {
		.readers = 3, .prompts = 32, .blocks = 16,
		.block_size = 256 << 10, .seed = 1,
	};
	struct plan pl;
	struct shared *sh;
	struct report tot, r;
	pid_t *pids;
	char *path = NULL;
	int fds[2], status = EXIT_OK, rc;
	uint64_t t0, writer_ns = 0, nchild, got = 0;

	rc = demo_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;

	pl = (struct plan){ .prompts = o.prompts, .blocks = o.blocks,
		.block_size = o.block_size, .seed = o.seed };
	if (plan_build(&pl) < 0) {
		fprintf(stderr, PROG " demo: out of memory\n");
		return EXIT_ERR;
	}
	nchild = o.readers + 1;
	pids = calloc(nchild, sizeof(*pids));
	sh = shared_alloc(sizeof(*sh));
	if (!pids || !sh) {
		fprintf(stderr, PROG " demo: out of memory\n");
		free(pids);
		free(pl.keys);
		return EXIT_ERR;
	}
	if (demo_open(&o, &path) < 0) {
		status = EXIT_ERR;
		goto out;
	}
	if (pipe(fds) < 0) {
		fprintf(stderr, PROG " demo: pipe: %s\n", strerror(errno));
		status = EXIT_ERR;
		goto out;
	}

	t0 = now_ns();
	for (uint64_t i = 0; i < nchild; i++) {
		pid_t pid = child_fork("demo");

		if (pid < 0) {
			status = EXIT_ERR;
			nchild = i;
			break;
		}
		if (pid == 0) {
			struct child_ctx c = { .pl = &pl, .path = path, .sh = sh,
				.fd = fds[1] };

			close(fds[0]);
			c.rep.role = i == 0 ? ROLE_WRITER : ROLE_READER;
			c.rep.index = (int32_t)i - 1;
			child_main(&c);
		}
		pids[i] = pid;
	}
	close(fds[1]);

	/* Readers run until the writer is gone (done or failed). */
	if (nchild > 0 && child_reap(pids[0], "demo", "writer", 0) < 0)
		status = EXIT_ERR;
	__atomic_store_n(&sh->writer_done, 1, __ATOMIC_RELEASE);

	memset(&tot, 0, sizeof(tot));
	for (;;) {
		ssize_t n = read(fds[0], &r, sizeof(r));

		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			break;
		if (n != (ssize_t)sizeof(r)) {
			fprintf(stderr, PROG " demo: short report from a child\n");
			status = EXIT_ERR;
			break;
		}
		got++;
		if (r.status) {
			fprintf(stderr, PROG " demo: %s\n", r.msg);
			status = EXIT_ERR;
		}
		if (r.role == ROLE_WRITER)
			writer_ns = r.elapsed_ns;
		tot.keys_written += r.keys_written;
		tot.keys_present += r.keys_present;
		tot.prefix_lookups += r.prefix_lookups;
		tot.blocks_requested += r.blocks_requested;
		tot.blocks_hit += r.blocks_hit;
		tot.bytes_verified += r.bytes_verified;
		tot.verify_errors += r.verify_errors;
		tot.final_requested += r.final_requested;
		tot.final_hit += r.final_hit;
	}
	close(fds[0]);
	for (uint64_t i = 1; i < nchild; i++)
		if (child_reap(pids[i], "demo", "reader", 0) < 0)
			status = EXIT_ERR;
	if (got != nchild) {
		fprintf(stderr, PROG " demo: %" PRIu64 " of %" PRIu64
				" processes did not report\n", nchild - got, nchild);
		status = EXIT_ERR;
	}
	{
		uint64_t elapsed = now_ns() - t0;

		if (status == EXIT_OK) {
			demo_print(&o, path, &tot, writer_ns, elapsed);
			/* Published blocks cannot go missing: the final pass hits all. */
			if (tot.verify_errors || tot.final_hit != tot.final_requested) {
				fprintf(stderr, PROG " demo: %" PRIu64 " verify errors, %"
						PRIu64 " blocks missing in the final pass\n",
						tot.verify_errors,
						tot.final_requested - tot.final_hit);
				status = EXIT_VERIFY;
			}
		}
	}
out:
	shared_free(sh, sizeof(*sh));
	free(pids);
	free(path);
	free(pl.keys);
	return status;
}
