/* SPDX-License-Identifier: MIT */
/*
 * workload.h -- request streams of an LLM serving system, for benchmarks
 * of a KV cache that keeps prefixes.
 *
 * A stream is made of sessions (conversations).  Sessions arrive as a
 * Poisson process; each has a number of turns separated by think times.
 * A session's context starts with a system prompt shared with other
 * sessions; each turn appends retrieved documents (also shared), a user
 * message, and, after the turn's request, the model's reply.  A turn's
 * request asks for the context so far, as the chain of keys of its full
 * blocks: block i's key is chain_hash() of block i-1's key and the token
 * ids of block i, so sessions that begin alike have equal keys for as
 * long as they agree.  System prompts and documents are drawn with Zipf
 * popularity.  Everything is a function of the parameters and the seed.
 */
#ifndef MARUKV_BENCH_WORKLOAD_H
#define MARUKV_BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The parameters of a stream; ranges are MIN..MAX, drawn uniformly. */
struct wl_params {
	uint64_t block_tokens;    /* tokens per block; only full blocks have keys */
	uint64_t sessions;        /* sessions in the stream */
	uint64_t arrival_ms;      /* mean time between session arrivals */
	uint64_t think_ms;        /* mean time between the turns of a session */
	uint64_t turns_min, turns_max;      /* turns per session */
	uint64_t system_prompts;  /* distinct system prompts */
	uint64_t system_tokens;   /* tokens of each system prompt */
	double system_zipf;       /* Zipf exponent of their popularity (0: uniform) */
	uint64_t documents;       /* distinct documents (0: none) */
	uint64_t doc_tokens;      /* tokens of each document */
	double doc_zipf;          /* Zipf exponent of their popularity */
	uint64_t docs_per_turn;   /* documents each turn retrieves into the context */
	uint64_t user_min, user_max;        /* tokens of a user message */
	uint64_t reply_min, reply_max;      /* tokens of a reply */
};

/* A named setting of the parameters. */
struct wl_setting {
	const char *name;
	const char *summary;
	struct wl_params params;
};

extern const struct wl_setting wl_settings[];
extern const size_t wl_nsettings;

/* The setting of that name, or NULL. */
const struct wl_setting *wl_find(const char *name);

/*
 * The parameters as options, --NAME VALUE, for every subcommand that
 * generates streams: wl_noptions names, from wl_option_name(0).
 */
extern const size_t wl_noptions;
const char *wl_option_name(size_t i);
/*
 * Set parameter i from an option's value; -1 (reported on stderr as a bad
 * value of cmd) if the value is not valid.
 */
int wl_option_set(struct wl_params *p, size_t i, const char *value, const char *cmd);
/* Check a whole setting (ranges in order); -1 (reported) if it is not valid. */
int wl_params_check(const struct wl_params *p, const char *cmd);
/* The options and the named settings, for --help. */
void wl_usage(FILE *f);
/* The parameters as the members of a JSON object, indented by `indent`. */
void wl_params_json(FILE *f, const struct wl_params *p, int indent);

/* One request: the chain of keys of its context's full blocks. */
struct wl_request {
	uint64_t t_us;            /* arrival time */
	uint32_t session, turn;
	const uint8_t *keys;      /* nblocks keys of BENCH_KEY_LEN bytes */
	size_t nblocks;
};

struct wl_stream {
	struct wl_request *req;   /* in order of arrival */
	size_t nreq;
	size_t max_blocks;        /* longest request */
	uint64_t blocks;          /* blocks requested, summed over the requests */
	uint64_t keys;            /* keys generated: a bound on the unique blocks */
	uint8_t *key_store;       /* every session's chain, back to back */
};

/*
 * Generate a stream: the first max_requests requests in order of arrival
 * (0: all).  Requests whose context is shorter than a block are left out:
 * they have nothing to cache.  0, or -1 if out of memory.
 */
int wl_generate(const struct wl_params *p, uint64_t seed, size_t max_requests,
		struct wl_stream *s);
void wl_stream_free(struct wl_stream *s);

#endif /* MARUKV_BENCH_WORKLOAD_H */
