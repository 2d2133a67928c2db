/* SPDX-License-Identifier: MIT */
/*
 * workload.c -- request streams of multi-turn sessions sharing system
 * prompts and documents (see workload.h).
 *
 * Token ids are not those of any tokenizer: a segment (a system prompt, a
 * document, one user message, one reply) has a 64-bit base drawn from its
 * identity, and its j-th token is a hash of base + j.  Equal segments at
 * equal offsets give equal blocks, which is all a prefix cache can see.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "options.h"
#include "workload.h"

/* ---- settings ------------------------------------------------------------- */

#define DEFAULT_BLOCK_TOKENS 64

const struct wl_setting wl_settings[] = {
	{ "chat", "many short turns, small shared system prompts", {
		.block_tokens = DEFAULT_BLOCK_TOKENS, .sessions = 400,
		.arrival_ms = 1000, .think_ms = 15000, .turns_min = 2, .turns_max = 12,
		.system_prompts = 20, .system_tokens = 400, .system_zipf = 1.0,
		.documents = 0, .doc_tokens = 1, .doc_zipf = 0, .docs_per_turn = 0,
		.user_min = 20, .user_max = 200, .reply_min = 50, .reply_max = 400 } },
	{ "rag", "large shared documents, few turns", {
		.block_tokens = DEFAULT_BLOCK_TOKENS, .sessions = 300,
		.arrival_ms = 500, .think_ms = 20000, .turns_min = 1, .turns_max = 3,
		.system_prompts = 5, .system_tokens = 200, .system_zipf = 1.0,
		.documents = 300, .doc_tokens = 2000, .doc_zipf = 0.9, .docs_per_turn = 2,
		.user_min = 20, .user_max = 100, .reply_min = 100, .reply_max = 300 } },
	{ "agent", "very long contexts growing over many turns: long chains", {
		.block_tokens = DEFAULT_BLOCK_TOKENS, .sessions = 20,
		.arrival_ms = 10000, .think_ms = 2000, .turns_min = 16, .turns_max = 48,
		.system_prompts = 8, .system_tokens = 3000, .system_zipf = 1.2,
		.documents = 0, .doc_tokens = 1, .doc_zipf = 0, .docs_per_turn = 0,
		.user_min = 100, .user_max = 800, .reply_min = 50, .reply_max = 300 } },
};
const size_t wl_nsettings = sizeof(wl_settings) / sizeof(wl_settings[0]);

const struct wl_setting *wl_find(const char *name)
{
	for (size_t i = 0; i < wl_nsettings; i++)
		if (!strcmp(wl_settings[i].name, name))
			return &wl_settings[i];
	return NULL;
}

/* ---- parameters as options ------------------------------------------------- */

enum field_kind { F_U64, F_RANGE, F_ZIPF };

struct field {
	const char *name;
	enum field_kind kind;
	size_t off, off_max;      /* the value (a range's minimum), a range's maximum */
	uint64_t lo, hi;
	const char *help;
};

#define AT(m) offsetof(struct wl_params, m)
#define DAY_MS 86400000ULL
#define ZIPF_MAX 10

static const struct field fields[] = {
	{ "block-tokens", F_U64, AT(block_tokens), 0, 1, 1U << 16, "tokens per block" },
	{ "sessions", F_U64, AT(sessions), 0, 1, 1U << 20, "sessions in the stream" },
	{ "arrival-ms", F_U64, AT(arrival_ms), 0, 0, DAY_MS,
		"mean time between session arrivals (Poisson)" },
	{ "think-ms", F_U64, AT(think_ms), 0, 0, DAY_MS,
		"mean time between a session's turns" },
	{ "turns", F_RANGE, AT(turns_min), AT(turns_max), 1, 1U << 16, "turns per session" },
	{ "system-prompts", F_U64, AT(system_prompts), 0, 1, 1U << 20,
		"distinct system prompts" },
	{ "system-tokens", F_U64, AT(system_tokens), 0, 0, 1U << 20,
		"tokens of each system prompt" },
	{ "system-zipf", F_ZIPF, AT(system_zipf), 0, 0, ZIPF_MAX,
		"Zipf exponent of their popularity (0: uniform)" },
	{ "documents", F_U64, AT(documents), 0, 0, 1U << 20, "distinct documents" },
	{ "doc-tokens", F_U64, AT(doc_tokens), 0, 1, 1U << 20, "tokens of each document" },
	{ "doc-zipf", F_ZIPF, AT(doc_zipf), 0, 0, ZIPF_MAX,
		"Zipf exponent of their popularity" },
	{ "docs-per-turn", F_U64, AT(docs_per_turn), 0, 0, 64,
		"documents each turn adds to the context" },
	{ "user-tokens", F_RANGE, AT(user_min), AT(user_max), 0, 1U << 20,
		"tokens of a user message" },
	{ "reply-tokens", F_RANGE, AT(reply_min), AT(reply_max), 0, 1U << 20,
		"tokens of a reply" },
};
const size_t wl_noptions = sizeof(fields) / sizeof(fields[0]);

/* Keys a stream may hold: 2^28 of 16 bytes, 4 GiB. */
#define MAX_KEYS (1ULL << 28)

const char *wl_option_name(size_t i)
{
	return fields[i].name;
}

static uint64_t *u64_at(struct wl_params *p, size_t off)
{
	return (uint64_t *)((char *)p + off);
}

static uint64_t u64_of(const struct wl_params *p, size_t off)
{
	return *(const uint64_t *)((const char *)p + off);
}

int wl_option_set(struct wl_params *p, size_t i, const char *value, const char *cmd)
{
	const struct field *f = &fields[i];
	uint64_t v[2];
	size_t n;

	switch (f->kind) {
	case F_U64:
		if (parse_u64(value, 0, v) < 0 || v[0] < f->lo || v[0] > f->hi)
			break;
		*u64_at(p, f->off) = v[0];
		return 0;
	case F_RANGE:
		if (parse_u64_list(value, f->lo, f->hi, v, 2, &n) < 0)
			break;
		if (n == 1)
			v[1] = v[0];
		if (v[0] > v[1])
			break;
		*u64_at(p, f->off) = v[0];
		*u64_at(p, f->off_max) = v[1];
		return 0;
	case F_ZIPF: {
		char *end;
		double d;

		errno = 0;
		d = strtod(value, &end);
		if (errno || end == value || *end || !(d >= 0 && d <= ZIPF_MAX))
			break;
		*(double *)((char *)p + f->off) = d;
		return 0;
	}
	}
	if (f->kind == F_RANGE)
		fprintf(stderr, PROG " %s: bad value for --%s: %s (MIN[,MAX], %" PRIu64
				" to %" PRIu64 ")\n", cmd, f->name, value, f->lo, f->hi);
	else
		bad_value(cmd, f->name, value, f->lo, f->hi);
	return -1;
}

/* Tokens of a session's longest context. */
static uint64_t session_tokens(const struct wl_params *p)
{
	uint64_t turn = p->user_max + p->reply_max;

	if (p->documents)
		turn += p->docs_per_turn * p->doc_tokens;
	return p->system_tokens + p->turns_max * turn;
}

int wl_params_check(const struct wl_params *p, const char *cmd)
{
	/* Each field is within 2^20 and turns within 2^16: no overflow here. */
	if (p->sessions * (session_tokens(p) / p->block_tokens) > MAX_KEYS) {
		fprintf(stderr, PROG " %s: the stream would have more than %llu blocks:"
				" fewer --sessions, --turns or tokens\n", cmd,
				(unsigned long long)MAX_KEYS);
		return -1;
	}
	return 0;
}

void wl_usage(FILE *f)
{
	fprintf(f, "Workload parameters (each overrides that of every setting run):\n");
	for (size_t i = 0; i < wl_noptions; i++) {
		const struct field *x = &fields[i];
		char opt[48];

		snprintf(opt, sizeof(opt), "--%s %s", x->name,
				x->kind == F_RANGE ? "MIN[,MAX]" : x->kind == F_ZIPF ? "S" : "N");
		fprintf(f, "  %-24s %s\n", opt, x->help);
	}
	fprintf(f, "Settings (--workload NAME):\n");
	for (size_t i = 0; i < wl_nsettings; i++) {
		const struct wl_params *p = &wl_settings[i].params;

		fprintf(f, "  %-6s %s:\n         ", wl_settings[i].name, wl_settings[i].summary);
		for (size_t j = 0; j < wl_noptions; j++) {
			const struct field *x = &fields[j];

			if (x->kind == F_ZIPF)
				fprintf(f, " --%s %.2f", x->name, *(const double *)((const char *)p +
						x->off));
			else if (x->kind == F_RANGE)
				fprintf(f, " --%s %" PRIu64 ",%" PRIu64, x->name,
						u64_of(p, x->off), u64_of(p, x->off_max));
			else
				fprintf(f, " --%s %" PRIu64, x->name, u64_of(p, x->off));
			if (j % 3 == 2 && j + 1 < wl_noptions)
				fprintf(f, "\n         ");
		}
		fputc('\n', f);
	}
}

void wl_params_json(FILE *f, const struct wl_params *p, int indent)
{
	for (size_t i = 0; i < wl_noptions; i++) {
		const struct field *x = &fields[i];
		char key[32];

		/* JSON keys in snake case: block-tokens -> block_tokens */
		snprintf(key, sizeof(key), "%s", x->name);
		for (char *c = key; *c; c++)
			if (*c == '-')
				*c = '_';
		fprintf(f, "%s%*s\"%s\": ", i ? ",\n" : "", indent, "", key);
		if (x->kind == F_ZIPF)
			json_number(f, *(const double *)((const char *)p + x->off), 2);
		else if (x->kind == F_RANGE)
			fprintf(f, "[%" PRIu64 ", %" PRIu64 "]", u64_of(p, x->off),
					u64_of(p, x->off_max));
		else
			fprintf(f, "%" PRIu64, u64_of(p, x->off));
	}
}

/* ---- random draws ------------------------------------------------------------ */

/* Uniform in [0, 1). */
static double unit(uint64_t *rng)
{
	return (double)(rng_next(rng) >> 11) * 0x1p-53;
}

static uint64_t uniform(uint64_t *rng, uint64_t lo, uint64_t hi)
{
	return lo + rng_next(rng) % (hi - lo + 1);
}

/* Exponential with that mean: the gaps of a Poisson process. */
static double expo(uint64_t *rng, double mean)
{
	return -mean * log1p(-unit(rng));
}

/* Item k (0: the most popular) with probability proportional to 1/(k+1)^s. */
struct zipf {
	double *cdf;
	size_t n;
};

static int zipf_init(struct zipf *z, size_t n, double s)
{
	double sum = 0;

	z->n = n;
	z->cdf = NULL;
	if (n == 0)
		return 0;
	z->cdf = malloc(n * sizeof(*z->cdf));
	if (!z->cdf)
		return -1;
	for (size_t k = 0; k < n; k++) {
		sum += pow((double)(k + 1), -s);
		z->cdf[k] = sum;
	}
	for (size_t k = 0; k < n; k++)
		z->cdf[k] /= sum;
	z->cdf[n - 1] = 1.0;
	return 0;
}

static size_t zipf_draw(const struct zipf *z, uint64_t *rng)
{
	double u = unit(rng);
	size_t lo = 0, hi = z->n - 1;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (z->cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* ---- chains ------------------------------------------------------------------ */

enum segment_kind { SEG_ROOT = 1, SEG_SYSTEM, SEG_DOC, SEG_USER, SEG_REPLY };

/* The base of a segment's token ids, from its identity. */
static uint64_t segment_base(uint64_t seed, enum segment_kind kind, uint64_t id)
{
	uint8_t k[BENCH_KEY_LEN];

	key_make(k, seed, kind, id);
	return load64le(k);
}

/* A session's context as it grows: the partial block, the keys so far. */
struct builder {
	uint64_t block_tokens;
	uint32_t *tok;            /* the block being filled */
	size_t fill;
	uint8_t prev[BENCH_KEY_LEN];
	uint8_t *keys;            /* the stream's key store */
	size_t nkeys, cap;
};

static int append(struct builder *b, uint64_t base, uint64_t len)
{
	for (uint64_t j = 0; j < len; j++) {
		b->tok[b->fill++] = (uint32_t)fmix64(base + j);
		if (b->fill < b->block_tokens)
			continue;
		if (b->nkeys == b->cap) {
			size_t cap = b->cap ? 2 * b->cap : 4096;
			uint8_t *k = realloc(b->keys, cap * BENCH_KEY_LEN);

			if (!k)
				return -1;
			b->keys = k;
			b->cap = cap;
		}
		chain_hash(b->prev, b->tok, b->fill, b->keys + b->nkeys * BENCH_KEY_LEN);
		memcpy(b->prev, b->keys + b->nkeys * BENCH_KEY_LEN, BENCH_KEY_LEN);
		b->nkeys++;
		b->fill = 0;
	}
	return 0;
}

/* A request before the key store has its final address. */
struct pending {
	uint64_t t_us;
	uint32_t session, turn;
	size_t first, nblocks;    /* its keys: from the store's key `first` */
};

struct gen {
	const struct wl_params *p;
	uint64_t seed, rng;
	struct zipf sys, doc;
	struct builder b;
	struct pending *req;
	size_t nreq, cap;
};

static int pending_add(struct gen *g, double t_ms, uint32_t s, uint32_t turn, size_t first)
{
	if (g->b.nkeys == first)
		return 0;
	if (g->nreq == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 1024;
		struct pending *v = realloc(g->req, cap * sizeof(*v));

		if (!v)
			return -1;
		g->req = v;
		g->cap = cap;
	}
	g->req[g->nreq++] = (struct pending){ (uint64_t)(t_ms * 1000), s, turn, first,
		g->b.nkeys - first };
	return 0;
}

/* Session s, arriving at t_ms: its turns' requests and its chain. */
static int session(struct gen *g, uint32_t s, double t_ms)
{
	const struct wl_params *p = g->p;
	uint64_t turns = uniform(&g->rng, p->turns_min, p->turns_max);
	size_t first = g->b.nkeys;

	g->b.fill = 0;
	key_make(g->b.prev, g->seed, SEG_ROOT, p->block_tokens);
	if (append(&g->b, segment_base(g->seed, SEG_SYSTEM, zipf_draw(&g->sys, &g->rng)),
			p->system_tokens) < 0)
		return -1;
	for (uint32_t t = 0; t < turns; t++) {
		uint64_t turn_id = (uint64_t)s << 16 | t;

		for (uint64_t d = 0; p->documents && d < p->docs_per_turn; d++)
			if (append(&g->b, segment_base(g->seed, SEG_DOC,
					zipf_draw(&g->doc, &g->rng)), p->doc_tokens) < 0)
				return -1;
		if (append(&g->b, segment_base(g->seed, SEG_USER, turn_id),
				uniform(&g->rng, p->user_min, p->user_max)) < 0 ||
		    pending_add(g, t_ms, s, t, first) < 0)
			return -1;
		/* The last reply is never asked for: no keys for it. */
		if (t + 1 < turns && append(&g->b, segment_base(g->seed, SEG_REPLY, turn_id),
				uniform(&g->rng, p->reply_min, p->reply_max)) < 0)
			return -1;
		t_ms += expo(&g->rng, (double)p->think_ms);
	}
	return 0;
}

static int pending_cmp(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->t_us != y->t_us)
		return x->t_us < y->t_us ? -1 : 1;
	if (x->session != y->session)
		return x->session < y->session ? -1 : 1;
	return (x->turn > y->turn) - (x->turn < y->turn);
}

static int stream_fill(struct gen *g, size_t max_requests, struct wl_stream *s)
{
	size_t n = max_requests && max_requests < g->nreq ? max_requests : g->nreq;

	qsort(g->req, g->nreq, sizeof(*g->req), pending_cmp);
	s->req = calloc(n ? n : 1, sizeof(*s->req));
	if (!s->req)
		return -1;
	s->nreq = n;
	s->keys = g->b.nkeys;
	s->key_store = g->b.keys;
	g->b.keys = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct pending *q = &g->req[i];

		s->req[i] = (struct wl_request){ q->t_us, q->session, q->turn,
			s->key_store + q->first * BENCH_KEY_LEN, q->nblocks };
		s->blocks += q->nblocks;
		if (q->nblocks > s->max_blocks)
			s->max_blocks = q->nblocks;
	}
	return 0;
}

int wl_generate(const struct wl_params *p, uint64_t seed, size_t max_requests,
		struct wl_stream *s)
{
	struct gen g = { .p = p, .seed = seed, .rng = fmix64(seed ^ 0x776f726b6c6f6164ULL),
		.b = { .block_tokens = p->block_tokens } };
	double t_ms = 0;
	int rc = -1;

	memset(s, 0, sizeof(*s));
	g.b.tok = malloc(p->block_tokens * sizeof(*g.b.tok));
	if (!g.b.tok || zipf_init(&g.sys, p->system_prompts, p->system_zipf) < 0 ||
	    zipf_init(&g.doc, p->documents, p->doc_zipf) < 0)
		goto out;
	for (uint32_t i = 0; i < p->sessions; i++) {
		t_ms += expo(&g.rng, (double)p->arrival_ms);
		if (session(&g, i, t_ms) < 0)
			goto out;
	}
	rc = stream_fill(&g, max_requests, s);
out:
	if (rc < 0)
		wl_stream_free(s);
	free(g.b.tok);
	free(g.b.keys);
	free(g.sys.cdf);
	free(g.doc.cdf);
	free(g.req);
	return rc;
}

void wl_stream_free(struct wl_stream *s)
{
	free(s->req);
	free(s->key_store);
	memset(s, 0, sizeof(*s));
}
