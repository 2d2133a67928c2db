/* SPDX-License-Identifier: MIT */
/*
 * hitrate: how many requested blocks a cache of a given capacity serves,
 * marukv's eviction against an exact LRU, on the same request streams.
 *
 * For each workload setting (workload.h) the stream is generated once;
 * its unique blocks are the misses of an LRU with room for all of them
 * (a chain's block is never cached without the blocks before it, so every
 * block misses exactly once).  Each capacity is a percentage of those.
 * Both caches then replay the same stream, request by request:
 *
 *  - LRU, simulated here with room for `capacity` blocks: the hits are
 *    the leading blocks present (the lookup stops at the first missing
 *    one), touched in order; then the blocks from the first miss on are
 *    inserted (or touched, if present), each evicting the least recently
 *    used block when full.
 *
 *  - marukv: a fresh pool of exactly `capacity` data pages of 4 KiB, one
 *    block per page, with the watermarks of --watermarks (by default the
 *    lowest that keep automatic eviction on).  This process opens it, so
 *    it holds the lease and its holder thread is the one that evicts.
 *    The hits are what mkv_get_batch() with MKV_BATCH_PREFIX finds (these
 *    reads are what marks blocks as used for the evictor); the views are
 *    released and the missing blocks allocated, filled and published as
 *    one chain under the last block hit.  The allocations are timed (with
 *    the grants and the evictions they wait for), in wall-clock and in
 *    the process's CPU time, which a loaded machine inflates less, and once the pool has
 *    first evicted, its occupancy, pages in values over data pages, is
 *    sampled every OCC_EVERY requests: what of the capacity really holds
 *    blocks.
 *
 * Everything is a function of the seed; marukv's figures also depend on
 * the library's eviction, which runs in the same order every time.
 */
#include <marukv.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "bench.h"
#include "options.h"
#include "workload.h"

#define CMD "hitrate"
#define PAGE BENCH_PAGE
#define MAX_SETS 8
#define MAX_CAPS 16
#define MAX_OVERRIDES 64
/* Lowest watermarks with automatic eviction on (0 turns it off). */
#define WM_LOW 1U
#define WM_HIGH 1U
#define OCC_EVERY 16

struct override {
	size_t field;
	const char *value;
};

struct hr_opts {
	const struct wl_setting *set[MAX_SETS];
	size_t nset;
	uint64_t caps[MAX_CAPS];
	size_t ncaps;
	uint64_t requests, seed;
	unsigned wm_low, wm_high;
	const char *dir;
	int json, remote;
	char servers[32];         /* with --remote: the tier's one node, "127.0.0.1:port" */
	struct override over[MAX_OVERRIDES];
	size_t nover;
};

/* ---- options ---------------------------------------------------------------- */

static int parse_workloads(const char *s, struct hr_opts *o)
{
	char buf[256], *tok, *save = NULL;

	if (!strcmp(s, "all")) {
		o->nset = 0;
		for (size_t i = 0; i < wl_nsettings && i < MAX_SETS; i++)
			o->set[o->nset++] = &wl_settings[i];
		return 0;
	}
	if (strlen(s) >= sizeof(buf) || !*s || s[strlen(s) - 1] == ',')
		return -1;
	strcpy(buf, s);
	o->nset = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const struct wl_setting *w = wl_find(tok);

		if (!w || o->nset == MAX_SETS)
			return -1;
		o->set[o->nset++] = w;
	}
	return o->nset ? 0 : -1;
}

/* --workload */
static int hr_workload(const struct opt *opt, const char *value)
{
	if (parse_workloads(value, opt->target) == 0)
		return 0;
	fprintf(stderr, PROG " " CMD ": bad value for --workload: %s (all, or up to"
			" %d of", value, MAX_SETS);
	for (size_t i = 0; i < wl_nsettings; i++)
		fprintf(stderr, " %s", wl_settings[i].name);
	fprintf(stderr, ")\n");
	return -1;
}

/* --watermarks LOW/HIGH */
static int hr_watermarks(const struct opt *opt, const char *value)
{
	struct hr_opts *o = opt->target;
	unsigned low, high;
	int end = 0;

	if (sscanf(value, "%u/%u%n", &low, &high, &end) == 2 && !value[end] && low <= high &&
	    high <= 90) {
		o->wm_low = low;
		o->wm_high = high;
		return 0;
	}
	fprintf(stderr, PROG " " CMD ": bad value for --watermarks: %s (LOW/HIGH percent,"
			" 0 <= LOW <= HIGH <= 90)\n", value);
	return -1;
}

/* What the option of a workload parameter sets. */
struct param {
	struct hr_opts *o;
	size_t field;
};

/* A workload parameter: checked now, applied to each setting once all are known. */
static int hr_param(const struct opt *opt, const char *value)
{
	const struct param *p = opt->target;
	struct hr_opts *o = p->o;
	struct wl_params scratch = wl_settings[0].params;

	if (wl_option_set(&scratch, p->field, value, CMD) < 0)
		return -1;
	if (o->nover == MAX_OVERRIDES) {
		fprintf(stderr, PROG " " CMD ": more than %d workload options\n", MAX_OVERRIDES);
		return -1;
	}
	o->over[o->nover++] = (struct override){ p->field, value };
	return 0;
}

static int hr_parse(int argc, char **argv, struct hr_opts *o)
{
	const struct opt opts[] = {
		{ "workload", OPT_CALL, o, .arg = "LIST", .call = hr_workload,
			.help = "comma-separated settings, or all (default all)" },
		{ "capacity", OPT_U64_LIST, o->caps, .arg = "LIST", .lo = 1, .hi = 100,
			.max = MAX_CAPS, .count = &o->ncaps, .items = "percentages",
			.help = "comma-separated percentages of the unique blocks,\n"
				"1 to 100 (default 5,10,25)" },
		{ "watermarks", OPT_CALL, o, .arg = "LOW/HIGH", .call = hr_watermarks,
			.help = "the pools' eviction watermarks, percent (default 1/1)" },
		{ "requests", OPT_U64, &o->requests, .arg = "N", .lo = 0, .hi = 1ULL << 32,
			.help = "only the first N requests of each stream (default 0: all)" },
		OPT_SEED(&o->seed, "seed of the streams (default 1)"),
		OPT_DIR(&o->dir, "where the scratch pools go (default /dev/shm)"),
		{ "remote", OPT_FLAG, &o->remote, .set = 1,
			.help = "replay each row again with a remote tier behind the pool\n"
				"(a Redis Cluster node of the bench's own): misses fetched" },
		OPT_JSON(&o->json),
		OPT_END,
	};
	struct opt_cmd cmd = { CMD, .opts = opts, .more_name = "WORKLOAD OPTIONS",
		.more_usage = wl_usage, .about =
		"Hit rate of prefix lookups, marukv's eviction against an exact LRU, on the\n"
		"same request streams, with room for a percentage of the stream's unique blocks.\n" };
	/* One option per workload parameter, after the others. */
	struct opt *more = calloc(wl_noptions + 1, sizeof(*more));
	struct param *param = calloc(wl_noptions, sizeof(*param));
	int rc = -1;

	if (!more || !param) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < wl_noptions; i++) {
		param[i] = (struct param){ o, i };
		more[i] = (struct opt){ wl_option_name(i), OPT_CALL, &param[i],
			.call = hr_param };
	}
	cmd.more = more;
	rc = opt_parse(&cmd, argc, argv);
out:
	free(more);
	free(param);
	return rc;
}

/* A setting with the workload options applied. */
static int hr_params(const struct hr_opts *o, const struct wl_setting *w,
		struct wl_params *p)
{
	*p = w->params;
	for (size_t i = 0; i < o->nover; i++)
		if (wl_option_set(p, o->over[i].field, o->over[i].value, CMD) < 0)
			return -1;
	return wl_params_check(p, CMD);
}

/* ---- LRU ------------------------------------------------------------------------ */

#define NIL UINT32_MAX

struct lru_node {
	uint8_t key[BENCH_KEY_LEN];
	uint32_t prev, next;      /* towards the most, the least recently used */
};

/*
 * An open-addressing table (linear probing) of node indexes + 1 over a
 * list from the most (head) to the least (tail) recently used node.
 */
struct lru {
	uint32_t *table;
	size_t mask;
	struct lru_node *node;
	size_t cap, n;
	uint32_t head, tail;
};

static int lru_init(struct lru *l, size_t cap)
{
	size_t slots = 16;

	while (slots < 2 * cap)
		slots *= 2;
	l->table = calloc(slots, sizeof(*l->table));
	l->node = malloc(cap * sizeof(*l->node));
	l->mask = slots - 1;
	l->cap = cap;
	l->n = 0;
	l->head = l->tail = NIL;
	if (l->table && l->node)
		return 0;
	free(l->table);
	free(l->node);
	return -1;
}

static void lru_fini(struct lru *l)
{
	free(l->table);
	free(l->node);
}

/* The keys are hashes already: their first bytes place them. */
static size_t lru_home(const struct lru *l, const uint8_t *key)
{
	return (size_t)load64le(key) & l->mask;
}

/* The slot holding the key, or the empty slot where it would go. */
static size_t lru_slot(const struct lru *l, const uint8_t *key)
{
	size_t i = lru_home(l, key);

	while (l->table[i] && memcmp(l->node[l->table[i] - 1].key, key, BENCH_KEY_LEN))
		i = (i + 1) & l->mask;
	return i;
}

/* Empty slot i, moving back the entries of its probe run that may go there. */
static void lru_table_del(struct lru *l, size_t i)
{
	size_t j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & l->mask;
		if (!l->table[j])
			break;
		k = lru_home(l, l->node[l->table[j] - 1].key);
		/* an entry whose home is cyclically in (i, j] stays */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		l->table[i] = l->table[j];
		i = j;
	}
	l->table[i] = 0;
}

static void lru_unlink(struct lru *l, uint32_t x)
{
	struct lru_node *e = &l->node[x];

	if (e->prev != NIL)
		l->node[e->prev].next = e->next;
	else
		l->head = e->next;
	if (e->next != NIL)
		l->node[e->next].prev = e->prev;
	else
		l->tail = e->prev;
}

static void lru_push(struct lru *l, uint32_t x)
{
	l->node[x].prev = NIL;
	l->node[x].next = l->head;
	if (l->head != NIL)
		l->node[l->head].prev = x;
	l->head = x;
	if (l->tail == NIL)
		l->tail = x;
}

/* Make the key the most recently used if present (1), else insert it (0). */
static int lru_put(struct lru *l, const uint8_t *key, int insert)
{
	size_t slot = lru_slot(l, key);
	uint32_t x;

	if (l->table[slot]) {
		x = l->table[slot] - 1;
		lru_unlink(l, x);
		lru_push(l, x);
		return 1;
	}
	if (!insert)
		return 0;
	if (l->n == l->cap) {
		x = l->tail;
		lru_unlink(l, x);
		lru_table_del(l, lru_slot(l, l->node[x].key));
		slot = lru_slot(l, key);
	} else {
		x = (uint32_t)l->n++;
	}
	memcpy(l->node[x].key, key, BENCH_KEY_LEN);
	l->table[slot] = x + 1;
	lru_push(l, x);
	return 0;
}

/* Replay the stream against an LRU of cap blocks: its hits, or -1. */
static int64_t lru_replay(const struct wl_stream *s, size_t cap)
{
	struct lru l;
	int64_t hits = 0;

	if (lru_init(&l, cap) < 0)
		return -1;
	for (size_t r = 0; r < s->nreq; r++) {
		const struct wl_request *q = &s->req[r];
		size_t i = 0;

		while (i < q->nblocks && lru_put(&l, q->keys + i * BENCH_KEY_LEN, 0))
			i++;
		hits += (int64_t)i;
		for (; i < q->nblocks; i++)
			lru_put(&l, q->keys + i * BENCH_KEY_LEN, 1);
	}
	lru_fini(&l);
	return hits;
}

/* ---- marukv ------------------------------------------------------------------------ */

struct mkv_result {
	uint64_t hits, evictions, nospc, bad_views;
	uint64_t fetched;         /* with a remote tier: blocks mkv_fetch() brought back */
	uint64_t ns;              /* the replay, without creating the pool */
	uint64_t allocs, alloc_ns;  /* mkv_alloc() calls of a page each, their time */
	double alloc_cpu_ns;      /* and the process's CPU time in them (the holder's too) */
	double occ_sum;           /* pages in values / data pages, summed over samples */
	uint64_t occ_n;
};

/* Per-request buffers, and what the replay counts. */
struct replay {
	struct mkv_pool *pool;
	struct mkv_key *keys;
	struct mkv_view *views;
	struct mkv_buf *bufs;
	size_t piece;             /* most blocks published at once */
	const char *servers;      /* the remote tier's node; NULL: none */
	const char *label;        /* workload and capacity, for messages */
	struct mkv_result *res;
};

static int replay_fail(const struct replay *rp, size_t r, const char *what, int rc)
{
	fprintf(stderr, PROG " " CMD ": %s: request %zu: %s: %s\n", rp->label, r, what,
			mkv_why(rc));
	return EXIT_ERR;
}

/*
 * Publish keys[at..at+n) as a chain under keys[at-1]: 0; 1 if the pool
 * had no page for them (counted; the first is reported); EXIT_ERR on
 * failure (reported).
 */
static int replay_publish(struct replay *rp, size_t r, size_t at, size_t n)
{
	const void *parent = at ? rp->keys[at - 1].data : NULL;
	int rc = 0, status;
	size_t got;

	for (got = 0; got < n; got++) {
		uint64_t t0 = now_ns();
		double c0 = cpu_ns(false);

		rc = mkv_alloc(rp->pool, PAGE, &rp->bufs[got]);
		rp->res->alloc_ns += now_ns() - t0;
		rp->res->alloc_cpu_ns += cpu_ns(false) - c0;
		rp->res->allocs++;
		if (rc < 0)
			break;
		pattern_fill(rp->bufs[got].data, PAGE, rp->keys[at + got].data);
	}
	if (rc == 0)
		rc = mkv_publish_chain(rp->pool, parent, parent ? BENCH_KEY_LEN : 0,
				rp->keys + at, rp->bufs, n);
	if (rc == 0)
		return 0;
	if (rc != MKV_E_NOSPC || got == n) {
		status = replay_fail(rp, r, got < n ? "mkv_alloc" : "mkv_publish_chain", rc);
	} else {
		status = 1;
		if (rp->res->nospc++ == 0)
			fprintf(stderr, PROG " " CMD ": %s: request %zu: block %zu of %zu:"
					" mkv_alloc: %s\n", rp->label, r, at + got,
					at + n, mkv_why(rc));
	}
	/* What was not published stays ours: give it back. */
	for (size_t i = 0; i < got; i++)
		if (rp->bufs[i].data)
			mkv_abort(rp->pool, &rp->bufs[i]);
	return status;
}

static int replay_request(struct replay *rp, const struct wl_stream *s, size_t r)
{
	const struct wl_request *q = &s->req[r];
	size_t found = 0;
	int rc;

	for (size_t i = 0; i < q->nblocks; i++)
		rp->keys[i] = (struct mkv_key){ q->keys + i * BENCH_KEY_LEN, BENCH_KEY_LEN };
	rc = mkv_get_batch(rp->pool, rp->keys, q->nblocks, MKV_BATCH_PREFIX, rp->views, &found);
	if (rc < 0)
		return replay_fail(rp, r, "mkv_get_batch", rc);
	rp->res->hits += found;
	for (size_t i = 0; i < found; i++) {
		/* A cheap check that the view is the block's: its first word. */
		if (rp->views[i].len != PAGE || pattern_check(rp->views[i].data, 8,
				rp->keys[i].data) != 8)
			rp->res->bad_views++;
		mkv_release(rp->pool, &rp->views[i]);
	}
	/* the rest of the prefix from the tier, as far as it has it */
	for (; rp->servers && found < q->nblocks; found++, rp->res->fetched++) {
		rc = mkv_fetch(rp->pool, rp->keys[found].data, BENCH_KEY_LEN);
		if (rc == MKV_E_NOTFOUND)
			break;
		if (rc < 0)
			return replay_fail(rp, r, "mkv_fetch", rc);
	}
	for (size_t at = found; at < q->nblocks; at += rp->piece) {
		size_t n = q->nblocks - at < rp->piece ? q->nblocks - at : rp->piece;

		rc = replay_publish(rp, r, at, n);
		if (rc)
			return rc == 1 ? 0 : rc;
	}
	return 0;
}

/* Once the pool is full (it has evicted or refused a page), what of it holds values: a sample. */
static int replay_occupancy(struct replay *rp)
{
	struct mkv_stat st;
	int rc = mkv_pool_stat(rp->pool, &st);

	if (rc < 0) {
		fprintf(stderr, PROG " " CMD ": %s: mkv_pool_stat: %s\n", rp->label, mkv_why(rc));
		return EXIT_ERR;
	}
	if ((st.evictions || rp->res->nospc) && st.pages_total) {
		rp->res->occ_sum += (double)st.pages_used / (double)st.pages_total;
		rp->res->occ_n++;
	}
	return EXIT_OK;
}

static int replay_pool(struct replay *rp, const struct wl_stream *s, const char *path,
		uint64_t cap, const struct hr_opts *o)
{
	struct mkv_stat st;
	uint64_t t0, sampling = 0;
	/* Twice the default's room per page in the registry, for eviction's churn. */
	struct pool_spec spec = { .pages = cap, .registry_size = (16ULL << 20) + cap * 2048,
		.wm_low = o->wm_low, .wm_high = o->wm_high };
	int rc, status = pool_make(path, &spec, CMD, &rp->pool) < 0 ? EXIT_ERR : EXIT_OK;

	if (status == EXIT_OK && rp->servers) {
		struct mkv_remote t = { .timeout_ms = 10000 };

		snprintf(t.servers, sizeof(t.servers), "%s", rp->servers);
		/* a fresh pool's uuid would do too: a prefix per replay */
		snprintf(t.prefix, sizeof(t.prefix), "%d.%" PRIu64 ":", (int)getpid(), now_ns());
		if ((rc = mkv_remote_set(rp->pool, &t)) < 0)
			status = replay_fail(rp, 0, "mkv_remote_set", rc);
	}
	t0 = now_ns();
	for (size_t r = 0; r < s->nreq && status == EXIT_OK; r++) {
		uint64_t t1;

		status = replay_request(rp, s, r);
		if (status != EXIT_OK || r % OCC_EVERY)
			continue;
		/* the samples are not part of the replay's time */
		t1 = now_ns();
		status = replay_occupancy(rp);
		sampling += now_ns() - t1;
	}
	rp->res->ns = now_ns() - t0 - sampling;
	if (status == EXIT_OK) {
		rc = mkv_pool_stat(rp->pool, &st);
		if (rc < 0) {
			fprintf(stderr, PROG " " CMD ": %s: %s\n", path, mkv_why(rc));
			status = EXIT_ERR;
		} else {
			rp->res->evictions = st.evictions;
		}
	}
	mkv_pool_close(&rp->pool);
	return status;
}

/* Replay the stream against a fresh pool of cap pages, in a scratch directory. */
static int mkv_replay(const struct hr_opts *o, const struct wl_stream *s, uint64_t cap,
		const char *label, const char *servers, struct mkv_result *res)
{
	/* Pieces of a quarter of the pool at most: one piece's buffers always fit. */
	struct replay rp = { .piece = cap / 4 ? cap / 4 : 1, .label = label, .res = res,
		.servers = servers };
	char *dir = scratch_dir(o->dir, CMD), *path = dir ? path_join(dir, "pool") : NULL;
	int status = EXIT_ERR;

	rp.keys = calloc(s->max_blocks, sizeof(*rp.keys));
	rp.views = calloc(s->max_blocks, sizeof(*rp.views));
	rp.bufs = calloc(s->max_blocks, sizeof(*rp.bufs));
	if (dir && (!path || !rp.keys || !rp.views || !rp.bufs))
		fprintf(stderr, PROG " " CMD ": out of memory\n");
	else if (dir)
		status = replay_pool(&rp, s, path, cap, o);
	if (dir && scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(rp.keys);
	free(rp.views);
	free(rp.bufs);
	free(path);
	free(dir);
	return status;
}

/* ---- results ------------------------------------------------------------------------ */

struct wl_result {
	const char *name;
	struct wl_params params;
	size_t requests, max_chain;
	uint64_t blocks, unique;
};

struct row {
	const struct wl_result *w;
	uint64_t percent, cap;
	uint64_t lru_hits;
	struct mkv_result mkv;
	struct mkv_result tier;   /* with --remote: the replay with the tier */
};

static double rate(uint64_t hits, uint64_t blocks)
{
	return blocks ? (double)hits / (double)blocks : 0;
}

static double ratio(const struct row *r)
{
	return r->lru_hits ? (double)r->mkv.hits / (double)r->lru_hits : 0;
}

static double alloc_us(const struct row *r)
{
	return r->mkv.allocs ? (double)r->mkv.alloc_ns / (double)r->mkv.allocs / 1e3 : 0;
}

static double alloc_cpu_us(const struct row *r)
{
	return r->mkv.allocs ? r->mkv.alloc_cpu_ns / (double)r->mkv.allocs / 1e3 : 0;
}

/* The mean occupancy once full; 0 if the pool never filled. */
static double occupancy(const struct row *r)
{
	return r->mkv.occ_n ? r->mkv.occ_sum / (double)r->mkv.occ_n : 0;
}

static void print_text(const struct hr_opts *o, const struct wl_result *w, size_t nw,
		const struct row *rows, size_t n)
{
	printf("hitrate: seed %" PRIu64 ", %u-byte pages, one block per page, watermarks"
			" %u/%u, %s\n", o->seed, PAGE, o->wm_low, o->wm_high, o->dir);
	for (size_t i = 0; i < nw; i++)
		printf("%s: %zu requests, %" PRIu64 " blocks requested, %" PRIu64
				" unique; average chain %.1f blocks (longest %zu);"
				" hit rate with room for all: %.3f\n", w[i].name, w[i].requests,
				w[i].blocks, w[i].unique, w[i].requests ?
				(double)w[i].blocks / (double)w[i].requests : 0, w[i].max_chain,
				rate(w[i].blocks - w[i].unique, w[i].blocks));
	printf("%-8s %10s %15s %8s %16s %12s %15s %10s %5s %9s %13s %17s\n", "workload",
			"capacity %", "capacity blocks", "requests", "blocks requested",
			"LRU hit rate", "marukv hit rate", "marukv/LRU", "nospc", "occupancy",
			"alloc us/page", "alloc cpu us/page");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		printf("%-8s %10" PRIu64 " %15" PRIu64 " %8zu %16" PRIu64 " %12.3f %15.3f"
				" %10.3f %5" PRIu64 " %9.4f %13.2f %17.2f\n", r->w->name, r->percent,
				r->cap, r->w->requests, r->w->blocks,
				rate(r->lru_hits, r->w->blocks), rate(r->mkv.hits, r->w->blocks),
				ratio(r), r->mkv.nospc, occupancy(r), alloc_us(r), alloc_cpu_us(r));
	}
	if (!o->remote)
		return;
	printf("\nwith a remote tier (one Redis Cluster node): misses fetched back\n");
	printf("%-8s %10s %15s %16s %20s %16s %18s\n", "workload", "capacity %",
			"pool hit rate", "pool+tier hits", "of which from tier", "pool+tier rate",
			"tier evictions");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		printf("%-8s %10" PRIu64 " %15.3f %16" PRIu64 " %20" PRIu64 " %16.3f %18" PRIu64
				"\n", r->w->name, r->percent, rate(r->mkv.hits, r->w->blocks),
				r->tier.hits + r->tier.fetched, r->tier.fetched,
				rate(r->tier.hits + r->tier.fetched, r->w->blocks), r->tier.evictions);
	}
}

static void print_json(const struct hr_opts *o, const struct wl_result *w, size_t nw,
		const struct row *rows, size_t n)
{
	printf("{\n  \"command\": \"hitrate\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"seed\": %" PRIu64 ",\n  \"page_size\": %u,\n  \"low_watermark\": %u,"
			"\n  \"high_watermark\": %u,\n  \"workloads\": [", o->seed, PAGE,
			o->wm_low, o->wm_high);
	for (size_t i = 0; i < nw; i++) {
		printf("%s\n    {\n      \"name\": ", i ? "," : "");
		json_string(stdout, w[i].name);
		printf(",\n      \"params\": {\n");
		wl_params_json(stdout, &w[i].params, 8);
		printf("\n      },\n      \"requests\": %zu,\n      \"blocks_requested\": %"
				PRIu64 ",\n      \"unique_blocks\": %" PRIu64
				",\n      \"avg_chain_blocks\": ", w[i].requests, w[i].blocks,
				w[i].unique);
		json_number(stdout, w[i].requests ?
				(double)w[i].blocks / (double)w[i].requests : 0, 2);
		printf(",\n      \"max_chain_blocks\": %zu,\n      \"unlimited_hit_rate\": ",
				w[i].max_chain);
		json_number(stdout, rate(w[i].blocks - w[i].unique, w[i].blocks), 6);
		printf("\n    }");
	}
	printf("\n  ],\n  \"rows\": [");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		printf("%s\n    { \"workload\": ", i ? "," : "");
		json_string(stdout, r->w->name);
		printf(", \"capacity_percent\": %" PRIu64 ", \"capacity_blocks\": %" PRIu64
				", \"requests\": %zu, \"blocks_requested\": %" PRIu64
				", \"lru_hits\": %" PRIu64 ", \"marukv_hits\": %" PRIu64
				", \"lru_hit_rate\": ", r->percent, r->cap, r->w->requests,
				r->w->blocks, r->lru_hits, r->mkv.hits);
		json_number(stdout, rate(r->lru_hits, r->w->blocks), 6);
		printf(", \"marukv_hit_rate\": ");
		json_number(stdout, rate(r->mkv.hits, r->w->blocks), 6);
		printf(", \"ratio\": ");
		json_number(stdout, ratio(r), 4);
		printf(", \"occupancy\": ");
		json_number(stdout, occupancy(r), 6);
		printf(", \"alloc_us_per_page\": ");
		json_number(stdout, alloc_us(r), 3);
		printf(", \"alloc_cpu_us_per_page\": ");
		json_number(stdout, alloc_cpu_us(r), 3);
		printf(", \"evictions\": %" PRIu64 ", \"nospc\": %" PRIu64 ", \"marukv_ns\": %"
				PRIu64, r->mkv.evictions, r->mkv.nospc, r->mkv.ns);
		if (o->remote) {
			printf(", \"tier_pool_hits\": %" PRIu64 ", \"tier_fetched\": %" PRIu64
					", \"tier_hit_rate\": ", r->tier.hits, r->tier.fetched);
			json_number(stdout, rate(r->tier.hits + r->tier.fetched, r->w->blocks), 6);
		}
		printf(" }");
	}
	printf("\n  ]\n}\n");
}

/* ---- hitrate ------------------------------------------------------------------------ */

/* One workload: its stream, its unique blocks, a row per capacity. */
static int run_workload(const struct hr_opts *o, const struct wl_setting *set,
		struct wl_result *w, struct row *rows)
{
	struct wl_stream s;
	int64_t hits;
	int status = EXIT_OK;

	w->name = set->name;
	if (hr_params(o, set, &w->params) < 0)
		return EXIT_ERR;
	if (wl_generate(&w->params, o->seed, o->requests, &s) < 0) {
		fprintf(stderr, PROG " " CMD ": %s: out of memory\n", set->name);
		return EXIT_ERR;
	}
	w->requests = s.nreq;
	w->blocks = s.blocks;
	w->max_chain = s.max_blocks;
	hits = lru_replay(&s, s.keys ? s.keys : 1);
	w->unique = hits < 0 ? 0 : s.blocks - (uint64_t)hits;
	for (size_t c = 0; c < o->ncaps && status != EXIT_ERR && hits >= 0; c++) {
		struct row *r = &rows[c];
		char label[64];

		r->w = w;
		r->percent = o->caps[c];
		r->cap = w->unique * r->percent / 100 ? w->unique * r->percent / 100 : 1;
		hits = lru_replay(&s, r->cap);
		if (hits < 0)
			break;
		r->lru_hits = (uint64_t)hits;
		snprintf(label, sizeof(label), "%s %" PRIu64 "%%", set->name, r->percent);
		if (mkv_replay(o, &s, r->cap, label, NULL, &r->mkv) != EXIT_OK ||
		    (o->remote && mkv_replay(o, &s, r->cap, label, o->servers, &r->tier) != EXIT_OK)) {
			status = EXIT_ERR;
		} else if (r->mkv.bad_views + r->tier.bad_views) {
			fprintf(stderr, PROG " " CMD ": %s: %" PRIu64 " views did not hold"
					" their block\n", label, r->mkv.bad_views + r->tier.bad_views);
			status = EXIT_VERIFY;
		}
	}
	if (hits < 0) {
		fprintf(stderr, PROG " " CMD ": %s: out of memory\n", set->name);
		status = EXIT_ERR;
	}
	wl_stream_free(&s);
	return status;
}

int cmd_hitrate(int argc, char **argv)
{
	struct hr_opts o = { .caps = { 5, 10, 25 }, .ncaps = 3, .seed = 1, .dir = "/dev/shm",
		.wm_low = WM_LOW, .wm_high = WM_HIGH };
	struct redis_server srv = { .pid = -1 };
	struct wl_result w[MAX_SETS];
	char *sdir = NULL;
	struct row *rows;
	size_t nrows = 0;
	int rc, status = EXIT_OK;

	parse_workloads("all", &o);
	rc = hr_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
	rows = calloc(o.nset * o.ncaps, sizeof(*rows));
	if (!rows) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return EXIT_ERR;
	}
	if (o.remote) {
		if (!(sdir = scratch_dir(o.dir, CMD)) || redis_start_cluster(&srv, sdir, CMD) < 0) {
			free(sdir);
			free(rows);
			return EXIT_ERR;
		}
		snprintf(o.servers, sizeof(o.servers), "127.0.0.1:%u", srv.port);
	}
	for (size_t i = 0; i < o.nset && status != EXIT_ERR; i++) {
		int st = run_workload(&o, o.set[i], &w[i], rows + nrows);

		if (st != EXIT_OK)
			status = st;
		nrows += o.ncaps;
	}
	if (status != EXIT_ERR) {
		if (o.json)
			print_json(&o, w, o.nset, rows, nrows);
		else
			print_text(&o, w, o.nset, rows, nrows);
	}
	free(rows);
	if (o.remote) {
		redis_stop(&srv, CMD);
		scratch_remove(sdir, CMD);
		free(sdir);
	}
	return status;
}
