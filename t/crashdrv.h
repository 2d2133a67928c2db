/* SPDX-License-Identifier: MIT */
/*
 * crashdrv.h -- what the parts of t/crashdrv share: the trial's shape,
 * the state the driver and its children keep in shared memory, the
 * account of every call's return code, and the helpers that record
 * failures (see t/crashdrv.c for what a trial does).
 */
#ifndef MKV_CRASHDRV_H
#define MKV_CRASHDRV_H

#include <stdint.h>
#include <sys/types.h>

#include "testutil.h"

#define CD_PAGE 4096U
#define CD_DATA (8ULL << 20)         /* a crash trial's pool */
#define CD_CLIENTS 16U
/*
 * --hosts: a non-coherent pool gives each node entry its own range of
 * slots (max_clients / max_nodes): room for every child of one node, and
 * the checking host's handles
 */
#define CD_HOST_CLIENTS 48U
#define CD_HOST_NODES 6U
#define CD_PERIOD 200U               /* lease period, ms */
#define CD_TIMEOUT 500U              /* client timeout, ms */
#define CD_HOST_TIMEOUT 2000U        /* ... between emulated hosts (--hosts) */
#define CD_MAXCH 10
#define CD_WMAX 500                  /* keys a writer tries, at most */
#define CD_MAXLEN (3 * CD_PAGE - 100)
#define CD_MAXREC (CD_MAXCH * CD_WMAX)
#define CD_MAXVIEWS 8
#define CD_MAXNODES 4
#define CD_CHILD_DEADLINE 20.0       /* a child gives up after this long */

/* ---- the trial's shape ---- */

enum cd_role { R_WRITER, R_DELETER, R_READER, R_EVICTOR };
extern const char *const role_name[];
extern const char node_names[CD_MAXNODES + 1];

enum cd_phase {
	PH_NONE, PH_OPEN, PH_IDLE, PH_PUT, PH_ALLOC, PH_FILL, PH_PUBLISH, PH_ASYNC, PH_WAIT,
	PH_ABORT, PH_DEL, PH_GET, PH_HOLD, PH_RELEASE, PH_PREFIX, PH_BATCH, PH_EXISTS,
	PH_EVICT, PH_STAT, PH_CLOSE, PH_COUNT
};
extern const char *const phase_name[PH_COUNT];
/* Phases worth parking a child of that role at: phases[role], n_phases[role]. */
extern const int *const phases[];
extern const size_t n_phases[];

/* Creation parameters and the children's pace, the same for every process. */
struct cd_cfg {
	int torture;          /* the torture trial's shape (see t/crashdrv.c) */
	int hosts;            /* each node an emulated host, the pool non-coherent */
	unsigned timeout_ms;  /* the pool's client timeout */
	uint64_t data_size;
	unsigned wm_low, wm_high;
	unsigned wmax;        /* keys a writer tries */
	unsigned pause_us[2]; /* a writer's pause between keys, from..to */
	unsigned del_pause_us[2]; /* a deleter's between deletes */
};

struct cd_child {
	int role;
	int node;        /* index in node_names */
	int flags;       /* MKV_RDONLY, MKV_VERIFY */
	int pid;
	int ready;       /* opened, waiting for go */
	int phase;       /* what it is about to do or doing */
	int park;        /* parent: stop before this phase (0: don't) */
	int parked;      /* child: stopped at park */
	uint32_t next;   /* writer: keys 0..next-1 have been tried */
	int exited;      /* parent: reaped */
	int killed;      /* parent: SIGKILLed */
	int stopped;     /* parent: SIGSTOPped now */
	uint32_t stops;  /* parent: times SIGSTOPped */
	int status;      /* parent: exit status */
	int held[CD_MAXVIEWS]; /* reader: 1 + the record of each key it holds a view of */
	char why[256];    /* child: its first failure */
	/* counters, for the summary */
	uint32_t ok, failed, views, misses;
	uint32_t across_kill, across_stop, self_stop, outlived, long_holds;
	uint64_t evicted;
};

/* A key a writer published: writer, index; del: 0 not deleted, 1 a
 * delete was claimed (and may or may not have happened), 2 deleted,
 * 3 delete said NOTFOUND. */
struct cd_rec {
	uint8_t valid;   /* stored last */
	uint8_t del;
	uint16_t who;
	uint32_t idx;
};

/* ---- return codes ---- */

/* The calls whose every return is counted and judged (cd_rc). */
enum cd_call {
	C_OPEN, C_ALLOC, C_PUBLISH, C_ASYNC, C_WAIT, C_ABORT, C_PUT, C_DEL, C_GET, C_RELEASE,
	C_EXISTS, C_PREFIX, C_BATCH, C_EVICT, C_STAT, C_CLIENTS, C_VERIFY, C_RECLAIM, C_COUNT
};
/* What they return: 0, a code marukv.h names, a positive count, anything else. */
enum cd_code {
	K_OK, K_INVAL, K_NOMEM, K_NOSPC, K_EXISTS, K_NOENT, K_USERS, K_IO, K_TIMEDOUT, K_PERM,
	K_ACCES, K_NOTFOUND, K_RDONLY, K_NOTPOOL, K_CORRUPT, K_VERSION, K_INTERNAL, K_EXPIRED,
	K_POS, K_OTHER, K_COUNT
};
extern const char *const call_name[C_COUNT];
extern const char *const code_name[K_COUNT];

struct cd_sh {
	struct cd_cfg cfg;
	int go;
	int stop;
	int open_turn;   /* --hosts: the child whose turn it is to open */
	int why_claimed;
	int nfail;
	char why[1024];
	struct cd_child ch[CD_MAXCH];
	int n_acked;
	struct cd_rec acked[CD_MAXREC];
	/* events, counted by the driver as they happen: readers compare */
	uint32_t kill_events, stop_events;
	/* every return of every counted call, by call and code */
	uint32_t rc[C_COUNT][K_COUNT];
	int32_t other_code;   /* the first code of K_OTHER */
	/* what the library logged (cd_log) */
	uint32_t lease_taken, warnings;
	uint64_t log_pages;
	char warning[256];
	/* --hosts: what the emulator did in the children that closed (EMU_*) */
	uint64_t emu[3];
};

/* The emulator's counts (t/hostemu.c's controls), in struct cd_sh's emu. */
enum { EMU_WRITTEN, EMU_REFRESHED, EMU_SPONTANEOUS };

extern struct cd_sh *sh;
extern int me;              /* the child's index; -1 in the driver */
extern const char *drv_node; /* the node (and --hosts: the host) of the driver and the checks */
extern int verbose;
extern int nfail_parent;    /* the driver's failures (cd_bad) */
extern pid_t watch_pids[CD_MAXCH + 1];  /* what the watchdog kills */

/* A child's failure: keep the first text in sh->why and its own; returns @p code. */
int cd_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The driver's failure: a "# FAIL: " line of evidence. */
void cd_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A failure of whoever calls: the child's (cd_fail) or the driver's (cd_bad); 1. */
int cd_broke(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The page counts of @p st add up: 0, else 1 (recorded with cd_broke). */
int check_pages(const struct mkv_stat *st, const char *when);
/*
 * Count what @p call returned and judge it, right after the call (it
 * reads mkv_errormsg()): nonzero, with the failure recorded, for a code
 * marukv.h does not list for that call, MKV_E_INTERNAL, MKV_E_EXPIRED
 * (every process here runs on one kernel, where a client is judged by a
 * lock, never by its heartbeat), or a failure that left no message.
 */
int cd_rc(enum cd_call call, int rc, const char *what);
/* Send the library's log to the counters of sh (before any open). */
void cd_log_install(void);
/* --hosts: add this process's emulator counts to sh->emu. */
void cd_emu_count(void);
size_t cd_key(char *out, unsigned who, unsigned idx);
size_t cd_vlen(const char *key, size_t klen);
int cd_rec_count(void);
int cd_open(const char *path, unsigned flags, const char *node, struct mkv_pool **pool);

/* The children: each returns its exit status. */
int writer(const char *path, const char *node, uint64_t seed);
int deleter(const char *path, const char *node, uint64_t seed);
int reader(const char *path, const char *node, uint64_t seed);
int evictor(const char *path, const char *node, uint64_t seed);

/* After the trial (crashchk.c). */
extern int second_reclaim;
long long run_reclaim(const char *gc, const char *dir, const char *path, long long *clients,
		long long *readers);
long long leftover_clients(const char *path);
/* The checks; the number of keys checked, the evictions into *evictions. */
unsigned long check_pool(const char *path, int ntotal, uint64_t *evictions);

#endif
