/* SPDX-License-Identifier: MIT */
/*
 * testutil.h -- helpers shared by the Check suites in t/.
 *
 * Every test gets a fresh temporary directory under /dev/shm
 * (tu_tmpdir_new), holds its pool in the subdirectory "pool" of it, and
 * removes it at the end (tu_tmpdir_free).  tu_run_suite() also keeps a
 * per-run root directory, so a test that fails or crashes (Check's forked
 * child exits without running its teardown) leaves nothing behind.
 *
 * Values carry a pattern derived from their key (tu_fill), so every byte
 * read back can be checked (tu_verify).  All randomness comes from fixed
 * seeds.
 *
 * One header; the code is in a file per kind of helper: tu_pool.c
 * (directories, pools, the registry behind the library's back, fixtures,
 * the runner), tu_values.c (numbers, patterns, values), tu_proc.c (time,
 * processes, children), tu_lease.c (the lease log), tu_hosts.c (preloaded
 * objects, emulated hosts) and tu_redis.c (Redis servers).
 */
#ifndef MKV_TESTUTIL_H
#define MKV_TESTUTIL_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include <check.h>
#include <lmdb.h>

#include "marukv.h"

/* Small pools: 4 MiB of 4 KiB pages. */
#define TU_DATA_SIZE (4ULL << 20)
#define TU_PAGE_SIZE 4096U
#define TU_MAX_CLIENTS 8U
/* How long a child process may wait for anything before it gives up. */
#define TU_CHILD_DEADLINE 25.0

/* ---- temporary directories and pools ---- */

/** New empty directory /dev/shm/mkvt.XXXXXX (inside the run's root when
 * tu_run_suite() set one); malloc'd path, NULL on failure. */
char *tu_tmpdir_new(void);
/** Remove the directory recursively, free the string, NULL the pointer. */
void tu_tmpdir_free(char **dir);
/** "<dir>/<name>" in a malloc'd string. */
char *tu_path_in(const char *dir, const char *name);
/** "<dir>/pool" in a malloc'd string. */
char *tu_pool_path(const char *dir);
/** Recursive removal (nftw); 0 or -errno. */
int tu_rmtree(const char *path);

/**
 * Creation parameters and the node for tu_open().  A zero field means
 * TU_DATA_SIZE, TU_PAGE_SIZE, 16 client slots, and the library's default
 * for the rest; automatic eviction is always off.
 */
struct tu_opts {
	uint64_t data_size;
	uint32_t page_size;
	uint32_t max_clients;
	uint32_t lease_ms;
	uint32_t client_timeout_ms;
	uint32_t max_nodes;
	uint64_t registry_size;
	const char *node;  /* NULL: $MARUKV_NODE, else the host name */
	const char *host;  /* a kernel to claim (MARUKV_BOOT_ID): another host, emulated */
	enum mkv_coherence coherence;  /* 0: tu_coherence() */
};
/** MKV_NONCOHERENT when $TU_COHERENCE is "noncoherent" (make check-noncoherent), else MKV_COHERENT. */
enum mkv_coherence tu_coherence(void);
/** mkv_pool_open() of the pool at @p path with these options (NULL: no options at all). */
int tu_open(const char *path, unsigned flags, const struct tu_opts *o, struct mkv_pool **pool);
/** Create (MKV_CREATE) the pool <dir>/pool with these parameters. */
int tu_pool_create(const char *dir, uint64_t data_size, uint32_t page_size,
		uint32_t max_clients, struct mkv_pool **pool);
/** Open the existing pool <dir>/pool with @p flags (no creation options). */
int tu_pool_open(const char *dir, unsigned flags, struct mkv_pool **pool);
/** This host's lock directory of the open non-coherent @p pool when $MARUKV_LOCK_DIR is
 * @p base: <base>/marukv-<uuid> (marukv(7)); malloc'd. */
char *tu_lockdir(const char *base, struct mkv_pool *pool);
/** The name by which LMDB opens the open @p pool's registry beside the lock file the
 * library uses: <pool>/registry.mdb, or a non-coherent pool's in its lock directory under
 * $MARUKV_LOCK_DIR; malloc'd. */
char *tu_registry_name(struct mkv_pool *pool);

/* ---- deterministic numbers and patterns ---- */

uint64_t tu_splitmix64(uint64_t *state);
/** xorshift64* generator; a zero state is replaced by a fixed seed. */
uint64_t tu_rand(uint64_t *state);
/** Uniform-ish in [lo, hi]. */
uint64_t tu_rand_range(uint64_t *state, uint64_t lo, uint64_t hi);
/** 64-bit hash of bytes (FNV-1a, then a splitmix finaliser). */
uint64_t tu_hash(const void *p, size_t n);
/** FNV-1a 64 exactly (the superblock's checksum). */
uint64_t tu_fnv1a(const void *p, size_t n);

/** Fill @p buf with the pattern of @p key. */
void tu_fill(void *buf, size_t len, const void *key, size_t klen);
/** Offset of the first byte that is not the pattern of @p key, or -1. */
ssize_t tu_verify(const void *buf, size_t len, const void *key, size_t klen);
/** A value length in [lo, hi] derived from the key. */
size_t tu_vlen(const void *key, size_t klen, size_t lo, size_t hi);

/** Printable key "<prefix><i, 8 digits>" into out (>= 64 bytes); its length. */
size_t tu_key(char *out, const char *prefix, unsigned i);
/** Chained 32-byte key: out = H(prev, i); prev NULL for the first. */
void tu_chain_key(const uint8_t *prev, uint64_t i, uint8_t out[32]);
/** n chained keys into keys[n][32]. */
void tu_chain_keys(uint8_t (*keys)[32], size_t n, uint64_t seed);

/* ---- pattern values through the library ---- */

/** mkv_put of a @p len byte pattern value of @p key. Returns mkv_put's code. */
int tu_put(struct mkv_pool *pool, const void *key, size_t klen, size_t len);
/** alloc + fill + publish. Returns the first failing code (the buffer is
 * aborted if publish fails with a code that leaves it to the caller). */
int tu_publish(struct mkv_pool *pool, const void *key, size_t klen, size_t len);
/**
 * Get the key, check its length (unless @p len is (size_t)-1) and every
 * byte, release.  0 if all good, the mkv_get code if it failed, 1 if the
 * length is wrong, 2 if a byte is wrong, 3 if release failed.
 */
int tu_check(struct mkv_pool *pool, const void *key, size_t klen, size_t len);
/** How tu_write() writes a value. */
enum tu_way { TU_WAY_PUT, TU_WAY_PUBLISH, TU_WAY_ASYNC };
/**
 * Write the @p len byte pattern value of @p key one of three ways:
 * mkv_put(); mkv_alloc() and mkv_publish(); mkv_alloc(),
 * mkv_publish_async() and mkv_wait().  Returns the library's code; a
 * failure without a message counts in *nomsg, and the message of the
 * last failure is kept in tu_write_msg.  For children only: a promise of
 * the API broken (a buffer shorter than asked for, or not consumed by a
 * publish) ends the process (tu_fail(), exit status 120 to 122).
 */
int tu_write(struct mkv_pool *pool, const char *key, size_t klen, size_t len, enum tu_way way,
		int *nomsg);
extern char tu_write_msg[256];
/**
 * Offset of the first byte of a view that is not the pattern of @p key,
 * or -1; 0 if the view is empty or not @p len bytes long.
 */
ssize_t tu_view_damage(const struct mkv_view *v, const void *key, size_t klen, size_t len);
/** mkv_pool_stat that must succeed (asserts). */
void tu_stat(struct mkv_pool *pool, struct mkv_stat *st);
/** mkv_pool_verify(@p flags) that must find nothing wrong (asserts, naming @p ctx);
 * its report into *rep unless that is NULL. */
void tu_verify_clean(struct mkv_pool *pool, unsigned flags, struct mkv_verify *rep,
		const char *ctx);
/** Poll mkv_pool_stat() until requests_pending is 0, at most @p secs; the last count seen. */
uint64_t tu_drain_pending(struct mkv_pool *pool, double secs);
/**
 * The lease of the pool at @p path as a read-only handle sees it, for
 * failure messages: "lease: holder pid P node N slot S generation G beat
 * age A ms, requests pending R" (a static buffer).
 */
const char *tu_lease_text(const char *path);
/** 1 if the view/buffer memory is all zero. */
int tu_is_zero(const void *p, size_t n);

/* ---- the registry, written behind the library's back ---- */

/**
 * A write txn on the registry of the pool directory @p pool with LMDB
 * itself, for tests that give the library what it would never write;
 * asserts on failure.  tu_registry_table() opens one of its tables
 * ("meta", "freed", ...; NULL for the keys' main database);
 * tu_registry_end() commits and closes.
 */
void tu_registry_begin(const char *pool, MDB_env **env, MDB_txn **txn);
MDB_dbi tu_registry_table(MDB_txn *txn, const char *table);
void tu_registry_end(MDB_env *env, MDB_txn *txn);

/* ---- time ---- */

/** CLOCK_MONOTONIC in seconds. */
double tu_now(void);
/** Sleep that long, through signals. */
void tu_sleep_us(double us);
void tu_sleep_ms(double ms);

/* ---- processes ---- */

/** fork(); the child dies with SIGKILL when its parent dies.  Children
 * report through their exit status and leave with _exit(). */
pid_t tu_fork(void);
/** Wait for @p pid at most @p secs (0: just look); like tu_wait(), or
 * -2 if it is still running then (it is left running). */
int tu_wait_for(pid_t pid, double secs);
/** tu_wait_for(), and a child still running then is killed and reaped
 * (tu_kill()): -2. */
int tu_reap(pid_t pid, double secs);
/** waitpid; exit status, or 128 + signal, or -1. */
int tu_wait(pid_t pid);
/** SIGKILL the child @p pid (continued first if it is stopped) and reap it. */
void tu_kill(pid_t pid);
/** Shared anonymous memory (survives fork), zeroed; asserts on failure. */
void *tu_shared(size_t size);
void tu_shared_free(void *p, size_t size);

/* ---- a child's reason for failing, shared with the test process ---- */

/** Make the shared text empty (mapping it the first time). */
void tu_why_init(void);
void tu_why_free(void);
/** The first failure's text, "" if none. */
const char *tu_why(void);
/** Keep this failure's text (with the pid) if it is the first; returns @p code,
 * for the child's exit status. */
int tu_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- controlling child processes ---- */

/** One byte from @p fd within @p secs seconds: the byte (0 to 255), -2 on
 * timeout, -1 at end of file or on error. */
int tu_read_byte(int fd, double secs);
/** Write one byte to @p fd; 0 or -1. */
int tu_write_byte(int fd, char c);
/** SIGSTOP the child @p pid and wait (at most @p secs) until it has
 * stopped; 0, or -1 if it did not (or is not our child). */
int tu_stop(pid_t pid, double secs);
/** Wait until child @p pid is stopped (it stopped itself): 0, or -1 if it ended or @p secs passed. */
int tu_wait_stopped(pid_t pid, double secs);
/**
 * A child process stepped through a scenario: the parent writes command
 * bytes to @c cmd, the child answers with event bytes on @c ev.
 */
struct tu_child {
	pid_t pid;
	int cmd;  /* parent's end: commands to the child */
	int ev;   /* parent's end: events from the child */
};
/** Fork (tu_fork) a child that exits with fn(cmd, ev, arg), its ends of the pipes; asserts. */
void tu_child_start(struct tu_child *c, int (*fn)(int cmd, int ev, void *arg), void *arg);
/** The child's next event must be @p want within @p secs; else it is
 * killed and the test fails, naming @p who and its exit status. */
void tu_child_expect(struct tu_child *c, const char *who, char want, double secs);
/** Kill (after SIGCONT) and reap the child if it runs, close the pipes;
 * accepts a child never started or already ended (pid -1). */
void tu_child_end(struct tu_child *c);
#define TU_CHILD_NONE { -1, -1, -1 }
/** Repeat @p cond (an expression) every millisecond for at most @p secs
 * seconds; true once it holds (tu_await() for a shared counter). */
#define TU_UNTIL(cond, secs) ({ \
	double tu_end_ = tu_now() + (secs); \
	int tu_ok_; \
	while (!(tu_ok_ = !!(cond)) && tu_now() < tu_end_) \
		tu_sleep_ms(1); \
	tu_ok_; \
})
/** TU_UNTIL() the counter @p flag (shared, written atomically) reaches @p value. */
int tu_await(const int *flag, int value, double secs);

/* ---- filling a pool ---- */

/**
 * Put @p len byte pattern values under the keys "<prefix><n>" (tu_key)
 * for n = *next, *next + 1, ... until mkv_put() fails with MKV_E_NOSPC;
 * *next ends past the last key put.  Returns how many were put, or the
 * first other error code (-ELOOP after a million: a pool that evicts).
 */
long tu_fill_until_full(struct mkv_pool *pool, const char *prefix, unsigned *next, size_t len);
/**
 * Fill the pool with one-page values (keys "<prefix><n>") and delete them
 * all, @p rounds times, so that every page nobody holds (granted, or
 * pinned by a view) is written over.  0, or the first error code.
 */
int tu_churn(struct mkv_pool *pool, const char *prefix, int rounds);

/* ---- holding what other processes need ---- */

/**
 * flock() super of the pool at @p path, as every writer does around a
 * registry write: the lock a writer stopped inside one would keep.  The
 * descriptor; closing it lets go.  Asserts.
 */
int tu_lock_writers(const char *path);
/** The pool tu_stay() opens, and how. */
struct tu_stay {
	const char *path;
	const struct tu_opts *o;
};
/** A child for tu_child_start(): open the pool of a struct tu_stay (a
 * writer takes a free lease), send 'o' and stay until killed; 10 if the
 * open failed. */
int tu_stay(int cmd, int ev, void *arg);

/* ---- the lease log ---- */

/** "<dir>/lease.log" in a malloc'd string. */
char *tu_log_path(const char *dir);
/** Send this process's library messages up to MKV_LOG_INFO to the file
 * @p path (appended, one write() a line); 0 or -errno. */
int tu_log_install(const char *path);
void tu_log_uninstall(void);
/** One "lease taken: node NAME slot S pid P generation G" line. */
struct tu_taken {
	char node[MKV_NODE_NAME_MAX + 1];
	unsigned slot;
	long pid;
	unsigned long long gen;
};
/** The lease acquisitions in the log at @p path, in log order, into a
 * malloc'd *out; *bad counts "lease taken" lines that do not parse. */
size_t tu_log_taken(const char *path, struct tu_taken **out, size_t *bad);
/** The first acquisition by @p pid, or NULL. */
const struct tu_taken *tu_taken_by(const struct tu_taken *t, size_t n, long pid);

/* ---- preloaded objects: fault injection (t/faultinject.c), hosts (t/hostemu.c) ---- */

/* A sanitizer interposes malloc itself: no injection under one. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif

/** An LD_PRELOAD object of the build, $@p env or else @p built (a path
 * from the build tree's top), as an absolute path in a static buffer;
 * NULL if there is none. */
const char *tu_preload(const char *env, const char *built);
/* ---- emulated hosts (t/hostemu.so) ---- */

/*
 * A process of an emulated host: the test program itself again, as
 * "PROG --host", under t/hostemu.so (MKV_HOSTEMU), with HOSTEMU_DIR,
 * HOSTEMU_POOL and HOSTEMU_HOST set, and the "NAME=value" strings of env
 * (NULL-terminated; NULL: none) added.  It obeys one command a line on its
 * stdin and answers "= value" or "! what failed" (tu_host_serve()).
 */
struct tu_host {
	pid_t pid;
	FILE *to, *from;
	char name[16];
};
/** Start it; it has said "= ready" when this returns.  Asserts. */
void tu_host_start(struct tu_host *h, const char *prog, const char *name, const char *emu_dir,
		const char *pool, const char *const *env);
/**
 * A host of node @p name with a boot id of its own, on tu_emu and tu_path,
 * a non-coherent pool and quiet caches, @p extra (or NULL) added to its
 * environment, and the pool opened there by "open @p arg" (@p arg NULL:
 * not opened, for a test that sends "open" and stops the host inside it).
 */
void tu_host_quiet(struct tu_host *h, const char *prog, const char *name, const char *extra,
		const char *arg);
void tu_host_send(struct tu_host *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** The answer to the command sent last: its value; "!" or the end of the host fails the test. */
long long tu_host_recv(struct tu_host *h);
/** One command, answered. */
#define tu_host_do(h, ...) (tu_host_send((h), __VA_ARGS__), tu_host_recv(h))
/** Whether the answer to the command sent last has come within @p secs (1) or not (0); it stays to be read. */
int tu_host_ready(struct tu_host *h, double secs);
/** End the host's process (its stdin closed): it must exit 0 within 10 s. */
void tu_host_end(struct tu_host *h);
/** Kill the host's process (SIGKILL, reaped within 10 s) and close its pipes: a host gone without a word.  Asserts. */
void tu_host_kill(struct tu_host *h);
/** The emulator's directory of a test of hosts, <tu_dir>/emu (tu_hosts_setup()). */
extern char *tu_emu;
/** Check fixtures: tu_setup() and tu_emu made; both undone. */
void tu_hosts_setup(void);
void tu_hosts_teardown(void);
/** A host's answer to command @p cmd: "= done", or "! cmd: error: message" if @p rc. */
void tu_host_answer(char *out, size_t size, const char *cmd, int rc, long long done);
/**
 * Key @p i of @p prefix, as tu_key() makes it, into @p key (64 bytes); its
 * value's length, tu_vlen() from 1 to @p vmax, in *@p len.  Its length.
 */
size_t tu_host_key(char *key, const char *prefix, long long i, size_t vmax, size_t *len);
/**
 * A host's "put P FROM N": publish keys P<FROM> .. P<FROM+N-1> of
 * tu_host_key(), stopping at the first failure (its code in *@p rc, else
 * 0).  How many succeeded.
 */
long long tu_host_put(struct mkv_pool *pool, const char *prefix, long long from, long long n,
		size_t vmax, int *rc);
/** A host's "check P FROM N": how many of those keys read back whole (tu_check()). */
long long tu_host_check(struct mkv_pool *pool, const char *prefix, long long from, long long n,
		size_t vmax);
/** The host's side: "= ready", then cmd() for each line until stdin ends; 0. */
int tu_host_serve(void (*cmd)(char *line, char *out, size_t size));

/** The interposer, tu_preload("MKV_FAULTINJECT", "t/.libs/faultinject.so"). */
const char *tu_injector(void);
/**
 * Run this program again (argv) under the interposer @p so, with
 * FI_FUNC=@p func FI_NTH=@p k FI_MODE=@p mode and FI_SPARE from
 * $MKV_TEST_FAULT_SPARE (default libpmem2).  Its stdout into @p out (the
 * first size - 1 bytes); its exit status (128 + signal when killed), or
 * -2 if it did not end within 10 s (it is killed).
 */
int tu_run_injected(const char *so, const char *func, unsigned long k, const char *mode,
		char *const argv[], char *out, size_t size);
/** The interposer's controls, in a run under it. */
struct tu_fi {
	void (*arm)(void);
	void (*disarm)(void);
	unsigned long (*calls)(void);
	unsigned long (*failed)(void);
};
/** Find them (dlsym); 0, or -1 if the interposer is not loaded. */
int tu_fi_find(struct tu_fi *fi);

/* ---- BLAKE3 from elsewhere ---- */

/**
 * Debian's b3sum --length 16 of @p len bytes (written to a file in
 * tu_dir), the 16 raw bytes into @p out: a checksum of MRDN frames that
 * does not come from the library.  Asserted to run.
 */
void tu_b3sum16(const void *buf, size_t len, uint8_t out[16]);

/* ---- Redis servers on loopback (redis-server, redis-cli) ---- */

/** 1 if an executable @p prog is on $PATH. */
int tu_on_path(const char *prog);
/**
 * A Redis Cluster of @p nodes (3 to 8) masters on 127.0.0.1, no replicas,
 * no persistence, their files and logs in @p dir: redis-server processes
 * of this process (they die with it), on free ports, made one cluster by
 * redis-cli --cluster create; each node has said cluster_state:ok when
 * this returns.  @p servers gets "127.0.0.1:P1,127.0.0.1:P2,...".  0; 77
 * if redis-server or redis-cli is not on $PATH; -1 on failure (the
 * reason on stderr, the nodes stopped).  A node that dies is not a failed
 * cluster: cluster-require-full-coverage is off, the others go on.
 */
int tu_cluster_start(const char *dir, unsigned nodes, char *servers, size_t cap);
/** Kill (SIGKILL) and reap the nodes, and the standalone servers, of this process
 * (stopped ones too, and those killed already), and remove their files. */
void tu_cluster_stop(void);
/** Node @p i's process, or -1. */
pid_t tu_cluster_pid(unsigned i);
/** Node @p i's port, or 0. */
unsigned tu_cluster_port(unsigned i);
/** A redis-server with cluster support off, in @p dir, on a free port
 * (*@p port), stopped by tu_cluster_stop(); 0, 77 or -1 as tu_cluster_start(). */
int tu_redis_standalone(const char *dir, unsigned *port);

/* ---- the environment ---- */

/** An unsigned number from the environment variable @p name, or @p def. */
unsigned tu_env(const char *name, unsigned def);

/* ---- running ---- */

/** Run the suite with Check's runner (CK_NORMAL); EXIT_SUCCESS/FAILURE. */
int tu_run_suite(Suite *s);
/** Fixture for a TCase: a fresh tu_tmpdir in tu_dir, and the path of the
 * pool in it, <tu_dir>/pool, in tu_path. */
extern char *tu_dir;
extern char *tu_path;
void tu_setup(void);
void tu_teardown(void);

/* ---- assertions ---- */

/* The call must succeed and leave mkv_errormsg() empty. */
#define TU_OK(expr) do { \
	int tu_rc_ = (expr); \
	ck_assert_msg(tu_rc_ == 0, "%s = %d (%s): %s", #expr, tu_rc_, \
			mkv_strerror(tu_rc_), mkv_errormsg()); \
	ck_assert_msg(mkv_errormsg()[0] == '\0', \
			"%s succeeded but mkv_errormsg() is \"%s\"", #expr, mkv_errormsg()); \
} while (0)

/* The call must fail with exactly @p code and set a message. */
#define TU_ERR(expr, code) do { \
	int tu_rc_ = (expr); \
	ck_assert_msg(tu_rc_ == (code), "%s = %d (%s), expected %s = %d", #expr, \
			tu_rc_, mkv_strerror(tu_rc_), #code, (int)(code)); \
	ck_assert_msg(mkv_errormsg()[0] != '\0', \
			"%s failed with %s but mkv_errormsg() is empty", #expr, #code); \
} while (0)

#endif
