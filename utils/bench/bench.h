/* SPDX-License-Identifier: MIT */
/*
 * bench.h -- what the marukv-bench subcommands share, each part in a file
 * of its own: the clock and sample statistics (timing.c), hashes, random
 * numbers, keys and payload patterns (keys.c), output helpers (output.c),
 * child processes and crews of them (proc.c), pools and the raw LMDB peer
 * (pools.c), the Redis peer (redis.c) and scratch directories
 * (scratch.c).  Their command lines are parsed from tables (options.h).
 * Each subcommand lives in a file of its own (demo.c, register.c,
 * takeover.c, lookup.c, getsize.c, put.c, flush.c, coherence.c, hash.c...) and is
 * listed in the table in marukv-bench.c.
 */
#ifndef MARUKV_BENCH_H
#define MARUKV_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <lmdb.h>

#include "../json.h"

#define PROG "marukv-bench"

enum { EXIT_OK = 0, EXIT_VERIFY = 1, EXIT_ERR = 2 };

/* Bytes of the keys the subcommands make (a 128-bit hash). */
#define BENCH_KEY_LEN 16

/* ---- subcommands -------------------------------------------------------- */

int cmd_demo(int argc, char **argv);
int cmd_register(int argc, char **argv);
int cmd_takeover(int argc, char **argv);
int cmd_lookup(int argc, char **argv);
int cmd_getsize(int argc, char **argv);
int cmd_put(int argc, char **argv);
int cmd_hitrate(int argc, char **argv);
int cmd_evict(int argc, char **argv);
int cmd_flush(int argc, char **argv);
int cmd_coherence(int argc, char **argv);
int cmd_hash(int argc, char **argv);
int cmd_remote(int argc, char **argv);

/* ---- the clock (timing.c) ------------------------------------------------ */

/* CLOCK_MONOTONIC in nanoseconds: the same clock in every process. */
uint64_t now_ns(void);
/* The CPU time of this process, all its threads, in ns; with children, theirs too. */
double cpu_ns(bool children);
/* Sleep for ns nanoseconds (restarted after signals). */
void sleep_ns(uint64_t ns);
/*
 * What timing an op between two now_ns() calls adds to it: the median of
 * many back-to-back pairs, subtracted from each sample of an op.
 */
double clock_cost_ns(void);

/* ---- hashes, random numbers, keys (keys.c) -------------------------------- */

/* MurmurHash3's 64-bit finaliser: a bijective mixer. */
uint64_t fmix64(uint64_t x);
/* splitmix64: the only random number generator of the bench. */
uint64_t rng_next(uint64_t *state);
uint64_t load64le(const uint8_t *p);
void store64le(uint8_t *p, uint64_t v);
/* A 16-byte key that is a function of (seed, a, b) only. */
void key_make(uint8_t key[BENCH_KEY_LEN], uint64_t seed, uint64_t a, uint64_t b);
/*
 * A block's key in a chain: a 128-bit hash of the previous block's key and
 * the block's n token ids, so chains that share a prefix share its keys.
 */
void chain_hash(const uint8_t prev[BENCH_KEY_LEN], const uint32_t *tok, size_t n,
		uint8_t out[BENCH_KEY_LEN]);

/* ---- payloads (keys.c) ------------------------------------------------- */

/* Fill len bytes with the pattern of a key. */
void pattern_fill(void *dst, size_t len, const uint8_t key[BENCH_KEY_LEN]);
/* Offset of the first byte that differs from the key's pattern, or len. */
size_t pattern_check(const void *src, size_t len, const uint8_t key[BENCH_KEY_LEN]);

/* ---- samples (timing.c) ------------------------------------------------------ */

/* Median, minimum, maximum, 90th and 99th percentiles of a sample. */
struct summary {
	double median, min, max, p90, p99;
};
/*
 * Summarise n >= 1 values (v is left as it was).  The median of an even
 * count is the mean of the middle two; p90 and p99 are nearest-rank
 * percentiles (the smallest value with at least 90 or 99 % of the sample
 * at or below it).  Returns -1 if out of memory.
 */
int summarize(const double *v, size_t n, struct summary *s);
/* The p-th (1 to 100) nearest-rank percentile of sorted[0..n-1], n >= 1. */
double percentile_sorted(const double *sorted, size_t n, unsigned p);

/* ---- output (output.c) --------------------------------------------------------- */

/* A number as JSON: NaN and infinities (no sample) as null. */
void json_number(FILE *f, double v, int decimals);
/* What failed in the library: its message, else the code's text. */
const char *mkv_why(int rc);

/* ---- child processes (proc.c) -------------------------------------------------- */
/*
 * What a parent and its measuring workers share (shared_alloc() of
 * sizeof(struct job_shared) plus the samples): the run of the next job,
 * which seeds its keys; whether a worker read a value that is not the one
 * stored; the latencies of the last job (worker i's at i * calls, for a
 * command with several).
 */
struct job_shared {
	uint64_t run;
	int32_t verify_failed;
	int32_t pad_;
	double samples[];
};

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

/*
 * A crew: n forked worker processes that run jobs in lockstep.  Worker i
 * runs fn(arg, i, job) for each job it is given and keeps its state in
 * between (pools, environments, connections it opened, in its own copy of
 * *arg), so a measurement repeated many times pays for its setup once.
 * crew_run() starts a job in workers 0 to k-1 at once and returns when
 * each has finished it.  A worker whose fn fails (nonzero; it says why on
 * stderr) exits.
 */
typedef int (*crew_fn)(void *arg, size_t worker, unsigned job);
struct crew {
	size_t n;
	pid_t *pid;
	int *go;                  /* to worker i: its next job */
	int *done;                /* from worker i: a status byte per job */
	const char *cmd;
};
/* Fork the workers; 0, or -1 (reported). */
int crew_start(struct crew *c, size_t n, crew_fn fn, void *arg, const char *cmd);
/* Run job in workers 0 to k-1; 0, or -1 if one failed or died. */
int crew_run(struct crew *c, unsigned job, size_t k);
/* Let the workers exit and reap them; 0, or -1 if one did not exit 0. */
int crew_stop(struct crew *c);

/* ---- pools and the raw LMDB peer (pools.c) ----------------------------------------- */

/* Page size of the pools the subcommands create: a small value wastes little. */
#define BENCH_PAGE 4096U

struct mkv_pool;
/* What pool_make() creates. */
struct pool_spec {
	uint64_t pages;           /* data pages of BENCH_PAGE bytes */
	uint32_t max_clients;     /* 0: the library's default */
	uint64_t registry_size;   /* 0: the library's default */
	unsigned wm_low, wm_high; /* eviction watermarks; 0, 0: no eviction */
	unsigned coherence;       /* enum mkv_coherence; 0: the library's default */
};
/*
 * Create the pool at path and open it; this handle holds the lease (checked).
 * 0, or -1 (reported).
 */
int pool_make(const char *path, const struct pool_spec *spec, const char *cmd,
		struct mkv_pool **out);

/*
 * The raw LMDB peer maps each key to a value as long as the entry marukv's
 * registry keeps for it (peer_entry_len()), so that LMDB stores, finds and
 * copies as many bytes per key for the peer as for marukv.  The value is
 * the peer's own: its record first, zeroes after.
 */
struct peer_rec {
	uint64_t page, npages, length;  /* where the value is in the peer's data file */
	uint64_t txn;                   /* the write txn that stored it */
};
/* The longest entry the peer copies (the shortest is a struct peer_rec). */
#define PEER_ENTRY_MAX 256
union peer_entry {
	uint8_t bytes[PEER_ENTRY_MAX];
	struct peer_rec rec;
};
/*
 * The length of the registry entry of key, which marukv has published in
 * the pool at path, into *len: PEER_ENTRY_MAX at most.  0, or -1
 * (reported).
 */
int peer_entry_len(const char *path, const uint8_t key[BENCH_KEY_LEN], const char *cmd,
		size_t *len);
/*
 * An LMDB environment opened as marukv opens its registry (MDB_NOSUBDIR,
 * MDB_NOTLS, MDB_NORDAHEAD, plus flags); 0 or an LMDB code.
 */
int peer_env(const char *file, uint64_t mapsize, unsigned flags, MDB_env **env);
/*
 * Whether fd's file lives in memory (tmpfs, ramfs, hugetlbfs).  There
 * marukv persists with a fence alone, msync doing nothing but take a
 * system call (marukv(7), WRITE PATH), and the peers persist as marukv
 * does: a ratio compares the same work.
 */
bool peer_in_memory(int fd);
/* "PROG CMD: LMDB peer: WHAT: LMDB's message" on stderr; returns -1. */
int peer_fail(const char *cmd, const char *what, int rc);
/*
 * Its entries (the main database, as in marukv's registry) and "pages"
 * databases (flags: MDB_CREATE or 0); 0 or an LMDB code.
 */
int peer_dbis(MDB_env *env, unsigned flags, MDB_dbi *entries, MDB_dbi *pages);

/* ---- the Redis peer (redis.c) ------------------------------------------------------ */

struct redisContext;
/* A redis-server of the bench's own, dying with it. */
struct redis_server {
	pid_t pid;
	unsigned port;            /* a cluster node's TCP port on 127.0.0.1; 0: none */
	char *sock;               /* its Unix socket */
	char *log;                /* its log file */
};
/*
 * Start redis-server, found on PATH, with its socket and log in dir, no
 * TCP port and no persistence, and wait until it answers.  0, or -1
 * (reported; if it is not installed, how to install it).
 */
int redis_start(struct redis_server *srv, const char *dir, const char *cmd);
/*
 * The same as a Redis Cluster of one node serving every slot, on a free
 * TCP port of 127.0.0.1 too (srv->port), which redis_connect() uses.
 */
int redis_start_cluster(struct redis_server *srv, const char *dir, const char *cmd);
/* Stop it and reap it; 0, or -1 if it did not exit cleanly (reported). */
int redis_stop(struct redis_server *srv, const char *cmd);
/* A new connection to it (hiredis); NULL if none (reported). */
struct redisContext *redis_connect(const struct redis_server *srv, const char *cmd);
/* Queue a SET (pipelined: redis_replies() collects the answers); 0 or -1 (reported). */
int redis_set_append(struct redisContext *c, const void *key, size_t klen, const void *val,
		size_t len, const char *cmd);
/* Collect n answers of queued SETs, each to be OK; 0 or -1 (reported). */
int redis_replies(struct redisContext *c, size_t n, const char *cmd);
/* Drop every key; 0 or -1 (reported). */
int redis_flush(struct redisContext *c, const char *cmd);

/* ---- scratch directories (scratch.c) ---------------------------------------- */

/* mkdtemp of DIR/marukv-bench.XXXXXX; a malloc'd path, or NULL (reported). */
char *scratch_dir(const char *dir, const char *cmd);
/* Remove a directory tree (no symlinks followed); 0 or -1 (reported). */
int scratch_remove(const char *path, const char *cmd);
/* dir/name, malloc'd; NULL if out of memory. */
char *path_join(const char *dir, const char *name);

#endif /* MARUKV_BENCH_H */
