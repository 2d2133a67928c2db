/* SPDX-License-Identifier: MIT */
/*
 * crashdrv.h -- what the parts of t/crashdrv share: the trial's shape,
 * the state the driver and its children keep in shared memory, and the
 * helpers that record failures (see t/crashdrv.c for what a trial does).
 */
#ifndef MKV_CRASHDRV_H
#define MKV_CRASHDRV_H

#include <stdint.h>
#include <sys/types.h>

#include "testutil.h"

#define CD_DATA (8ULL << 20)
#define CD_PAGE 4096U
#define CD_CLIENTS 16U
#define CD_PERIOD 200U
#define CD_TIMEOUT 500U
#define CD_MAXCH 8
#define CD_WMAX 240                  /* keys a writer tries, at most */
#define CD_MAXLEN (3 * CD_PAGE - 100)
#define CD_MAXREC (CD_MAXCH * CD_WMAX)
#define CD_MAXVIEWS 8
#define CD_CHILD_DEADLINE 20.0       /* a child gives up after this long */
#define CD_WATCHDOG 45               /* the whole trial, seconds */

/* ---- shared state ---- */

enum cd_role { R_WRITER, R_DELETER, R_READER };
extern const char *const role_name[];

enum cd_phase {
	PH_NONE, PH_OPEN, PH_IDLE, PH_PUT, PH_ALLOC, PH_FILL, PH_PUBLISH, PH_ASYNC, PH_WAIT,
	PH_ABORT, PH_DEL, PH_GET, PH_HOLD, PH_RELEASE, PH_PREFIX, PH_BATCH, PH_EXISTS,
	PH_CLOSE, PH_COUNT
};
extern const char *const phase_name[PH_COUNT];
/* Phases worth parking each role at. */
extern const int writer_phases[];
extern const size_t n_writer_phases;
extern const int deleter_phases[];
extern const size_t n_deleter_phases;
extern const int reader_phases[];
extern const size_t n_reader_phases;

struct cd_child {
	int role;
	int node_b;
	int flags;       /* reader: MKV_RDONLY, MKV_VERIFY */
	int pid;
	int ready;       /* opened, waiting for go */
	int phase;       /* what it is about to do or doing */
	int park;        /* parent: stop before this phase (0: don't) */
	int parked;      /* child: stopped at park */
	uint32_t next;   /* writer: keys 0..next-1 have been tried */
	int exited;      /* parent: reaped */
	int killed;      /* parent: SIGKILLed */
	int status;      /* parent: exit status */
	/* counters, for the summary */
	uint32_t ok, failed, views, misses;
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

struct cd_sh {
	int go;
	int stop;
	int why_claimed;
	int nfail;
	char why[1024];
	struct cd_child ch[CD_MAXCH];
	int n_acked;
	struct cd_rec acked[CD_MAXREC];
	/* failed calls by code, for the summary: the first few distinct */
	int ncodes;
	int32_t code[8];
	uint32_t code_n[8];
};

extern struct cd_sh *sh;
extern int me;              /* the child's index; -1 in the driver */
extern int verbose;
extern int nfail_parent;    /* the driver's failures (cd_bad) */
extern pid_t watch_pids[CD_MAXCH + 1];  /* what the watchdog kills */

/* A child's failure: keep the first text in sh->why; returns @p code. */
int cd_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The driver's failure: a "# FAIL: " line of evidence. */
void cd_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
size_t cd_key(char *out, unsigned who, unsigned idx);
size_t cd_vlen(const char *key, size_t klen);
int cd_rec_count(void);
int cd_open(const char *path, unsigned flags, const char *node, struct mkv_pool **pool);

/* The children: each returns its exit status. */
int writer(const char *path, const char *node, uint64_t seed);
int deleter(const char *path, const char *node, uint64_t seed);
int reader(const char *path, const char *node, uint64_t seed);

/* After the trial (crashchk.c). */
extern int second_reclaim;
long long run_reclaim(const char *gc, const char *dir, const char *path, long long *clients,
		long long *readers);
long long leftover_clients(const char *path);
unsigned long check_pool(const char *path, int ntotal);

#endif
