/* SPDX-License-Identifier: MIT */
/*
 * bench.h -- what the marukv-bench subcommands share: clocks, hashes and
 * the random number generator, option parsing, payload patterns, sample
 * statistics, output helpers, child processes and scratch directories.
 * Each subcommand lives in a file of its own (demo.c, register.c,
 * takeover.c) and is listed in the table in marukv-bench.c.
 */
#ifndef MARUKV_BENCH_H
#define MARUKV_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../json.h"

#define PROG "marukv-bench"

enum { EXIT_OK = 0, EXIT_VERIFY = 1, EXIT_ERR = 2 };

/* Bytes of the keys the subcommands make (a 128-bit hash). */
#define BENCH_KEY_LEN 16

/* ---- subcommands -------------------------------------------------------- */

int cmd_demo(int argc, char **argv);
int cmd_register(int argc, char **argv);
int cmd_takeover(int argc, char **argv);

/* ---- clocks, hashes, random numbers --------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds: the same clock in every process. */
uint64_t now_ns(void);
/* Sleep for ns nanoseconds (restarted after signals). */
void sleep_ns(uint64_t ns);
/* MurmurHash3's 64-bit finaliser: a bijective mixer. */
uint64_t fmix64(uint64_t x);
/* splitmix64: the only random number generator of the bench. */
uint64_t rng_next(uint64_t *state);
uint64_t load64le(const uint8_t *p);
void store64le(uint8_t *p, uint64_t v);
/* A 16-byte key that is a function of (seed, a, b) only. */
void key_make(uint8_t key[BENCH_KEY_LEN], uint64_t seed, uint64_t a, uint64_t b);

/* ---- options ---------------------------------------------------------------- */

/*
 * Unsigned integer with an optional binary suffix (k, m, g, with or
 * without "iB") when suffix is nonzero.  0 or -1.
 */
int parse_u64(const char *s, int suffix, uint64_t *out);
/*
 * A comma-separated list of 1 to max integers, each from lo to hi.
 * 0 or -1.
 */
int parse_u64_list(const char *s, uint64_t lo, uint64_t hi, uint64_t *v, size_t max,
		size_t *n);
/* "PROG CMD: bad value for --NAME: VALUE (LO to HI)" on stderr. */
void bad_value(const char *cmd, const char *name, const char *value, uint64_t lo,
		uint64_t hi);

/* ---- payloads ----------------------------------------------------------- */

/* Fill len bytes with the pattern of a key. */
void pattern_fill(void *dst, size_t len, const uint8_t key[BENCH_KEY_LEN]);
/* Offset of the first byte that differs from the key's pattern, or len. */
size_t pattern_check(const void *src, size_t len, const uint8_t key[BENCH_KEY_LEN]);

/* ---- samples ---------------------------------------------------------------- */

/* Median, minimum, maximum and 90th percentile of a sample. */
struct summary {
	double median, min, max, p90;
};
/*
 * Summarise n >= 1 values (v is left as it was).  The median of an even
 * count is the mean of the middle two; p90 is the nearest-rank
 * percentile (the smallest value with at least 90 % of the sample at or
 * below it).  Returns -1 if out of memory.
 */
int summarize(const double *v, size_t n, struct summary *s);
/* The p-th (1 to 100) nearest-rank percentile of sorted[0..n-1], n >= 1. */
double percentile_sorted(const double *sorted, size_t n, unsigned p);

/* ---- output ------------------------------------------------------------------- */

/* A number as JSON: NaN and infinities (no sample) as null. */
void json_number(FILE *f, double v, int decimals);
/* What failed in the library: its message, else the code's text. */
const char *mkv_why(int rc);

/* ---- child processes ----------------------------------------------------------- */

/* Zeroed memory shared with the children forked after this call; NULL on failure. */
void *shared_alloc(size_t len);
void shared_free(void *p, size_t len);

/*
 * A start barrier for forked children: each child says it is ready
 * (gate_ready) and blocks until the parent opens the gate (gate_open);
 * the parent waits for n ready children first (gate_wait).
 */
struct gate {
	int ready[2];
	int go[2];
};
int gate_init(struct gate *g);
/* In the child, right after fork: keep only the ends the child uses. */
void gate_child(struct gate *g);
/* In the parent, after the last fork. */
void gate_parent(struct gate *g);
/* Child: ready; then block until the gate opens.  0, or -1 if the parent is gone. */
int gate_ready(struct gate *g);
/* Parent: wait until n children are ready.  0, or -1 if one died first. */
int gate_wait(struct gate *g, size_t n);
/* Parent: let every child go (also on error: they then see the parent gone). */
void gate_open(struct gate *g);
void gate_close(struct gate *g);

/* fork() after flushing stdio; a failure is reported on stderr. */
pid_t child_fork(const char *cmd);
/*
 * Reap a child.  Returns its exit status (0 to 255), or -1 if it was
 * killed by a signal (reported on stderr unless quiet) or could not be
 * reaped.
 */
int child_reap(pid_t pid, const char *cmd, const char *what, int quiet);

/* ---- scratch directories ------------------------------------------------------ */

/* mkdtemp of DIR/marukv-bench.XXXXXX; a malloc'd path, or NULL (reported). */
char *scratch_dir(const char *dir, const char *cmd);
/* Remove a directory tree (no symlinks followed); 0 or -1 (reported). */
int scratch_remove(const char *path, const char *cmd);
/* dir/name, malloc'd; NULL if out of memory. */
char *path_join(const char *dir, const char *name);

#endif /* MARUKV_BENCH_H */
