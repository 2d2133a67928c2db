/* SPDX-License-Identifier: MIT */
/*
 * crashdrv.c -- one seeded crash trial, driven by t/crash.sh.
 *
 *   crashdrv --seed SEED --dir DIR [--gc PATH] [--verbose]
 *
 * A fresh small pool in DIR/pool (4 KiB pages, CD_DATA bytes, lease period
 * 200 ms, client timeout 500 ms), then processes on two simulated nodes
 * ("a" and "b", by mkv_opts_set_node), each opening the pool itself:
 *
 *  - writers publish keys "w<child>-<index>" with their tu_fill pattern by
 *    put, alloc/fill/publish or publish_async/wait (several in flight);
 *  - deleters delete keys that writers acknowledged (each key claimed by
 *    one deleter at most, so a NOTFOUND is a lost key);
 *  - readers get keys (some with MKV_VERIFY, some read-only handles), check
 *    every byte, hold the views a while, check again, release; they also
 *    call mkv_prefix_len, mkv_get_batch and mkv_exists.
 *
 * Every process announces what it is about to do in shared memory.  The
 * driver SIGKILLs a seeded subset of them at seeded moments: some at
 * random, some "by design" -- it parks the child right before a chosen
 * call (alloc, fill, publish, publish_async, wait, get, release, del...)
 * and kills it there, or lets it go and kills it a few microseconds into
 * the call.  A writer records a key in shared memory only after the
 * publish returned success.
 *
 * Then the survivors stop, the driver waits out the client timeout (for
 * the dead clients of node "b"), runs `marukv-gc --json -q reclaim POOL`
 * as node "a" (or mkv_pool_reclaim itself without --gc) and checks, with a
 * handle of its own:
 *  - only the checker is left in the client table;
 *  - mkv_pool_verify(MKV_VERIFY_DEEP) finds no problem and no leaked page;
 *  - pages_used + free + quarantined + granted == total, none granted;
 *  - every key any writer tried is either absent or whole (length and
 *    every byte of its pattern), and the registry holds no other key;
 *  - every acknowledged key not deleted since is present and whole, every
 *    key deleted successfully is gone;
 *  - the pool still takes and returns new values.
 *
 * Output: "# ..." lines of evidence, a "summary: ..." line and a
 * "stats: kills=K keys=N reclaimed=P" line.  Exit 0 pass, 1 fail, 2 setup
 * error.  Children that fail report through a shared text and exit codes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

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

/* ---- time ---- */

/* ---- shared state ---- */

enum cd_role { R_WRITER, R_DELETER, R_READER };
static const char *const role_name[] = { "writer", "deleter", "reader" };

enum cd_phase {
	PH_NONE, PH_OPEN, PH_IDLE, PH_PUT, PH_ALLOC, PH_FILL, PH_PUBLISH, PH_ASYNC, PH_WAIT,
	PH_ABORT, PH_DEL, PH_GET, PH_HOLD, PH_RELEASE, PH_PREFIX, PH_BATCH, PH_EXISTS,
	PH_CLOSE, PH_COUNT
};
static const char *const phase_name[PH_COUNT] = {
	"none", "open", "idle", "put", "alloc", "fill", "publish", "publish_async", "wait",
	"abort", "del", "get", "hold", "release", "prefix_len", "get_batch", "exists", "close",
};
/* Phases worth parking each role at. */
static const int writer_phases[] = { PH_PUT, PH_ALLOC, PH_FILL, PH_PUBLISH, PH_ASYNC, PH_WAIT };
static const int deleter_phases[] = { PH_DEL };
static const int reader_phases[] = { PH_GET, PH_HOLD, PH_RELEASE, PH_PREFIX, PH_BATCH };

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

static struct cd_sh *sh;
static int me = -1;  /* the child's index */

/* Keep the first failure's text; return @p code. */
static int cd_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
cd_fail(int code, const char *fmt, ...)
{
	va_list ap;
	int n;

	__atomic_add_fetch(&sh->nfail, 1, __ATOMIC_SEQ_CST);
	if (__atomic_exchange_n(&sh->why_claimed, 1, __ATOMIC_SEQ_CST) != 0)
		return code;
	n = snprintf(sh->why, sizeof(sh->why), "child %d (pid %d): ", me, (int)getpid());
	if (n < 0 || n >= (int)sizeof(sh->why))
		return code;
	va_start(ap, fmt);
	vsnprintf(sh->why + n, sizeof(sh->why) - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}

/* Count a failed call by its code (clean failures: for the summary). */
static void
cd_count_code(int code)
{
	int i, n = __atomic_load_n(&sh->ncodes, __ATOMIC_ACQUIRE);

	for (i = 0; i < n && i < 8; i++)
		if (sh->code[i] == code) {
			__atomic_add_fetch(&sh->code_n[i], 1, __ATOMIC_SEQ_CST);
			return;
		}
	i = __atomic_fetch_add(&sh->ncodes, 1, __ATOMIC_SEQ_CST);
	if (i < 8) {
		sh->code[i] = code;
		__atomic_add_fetch(&sh->code_n[i], 1, __ATOMIC_SEQ_CST);
	}
}

/* Announce the next step; park there if the driver asked for it. */
static void
cd_phase(int ph)
{
	struct cd_child *c = &sh->ch[me];
	double end;

	__atomic_store_n(&c->phase, ph, __ATOMIC_SEQ_CST);
	if (ph == PH_NONE || __atomic_load_n(&c->park, __ATOMIC_SEQ_CST) != ph)
		return;
	__atomic_store_n(&c->parked, 1, __ATOMIC_SEQ_CST);
	end = tu_now() + 3.0;
	while (__atomic_load_n(&c->park, __ATOMIC_SEQ_CST) == ph && tu_now() < end)
		tu_sleep_us(20);
	__atomic_store_n(&c->parked, 0, __ATOMIC_SEQ_CST);
}

static int
cd_stopping(void)
{
	return __atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE);
}

/* ---- keys and values ---- */

static size_t
cd_key(char *out, unsigned who, unsigned idx)
{
	int n = snprintf(out, 64, "w%u-%05u", who, idx);

	return n < 0 ? 0 : (size_t)n;
}

static size_t
cd_vlen(const char *key, size_t klen)
{
	return tu_vlen(key, klen, 1, CD_MAXLEN);
}

static void
cd_rec_add(unsigned who, unsigned idx)
{
	int i = __atomic_fetch_add(&sh->n_acked, 1, __ATOMIC_SEQ_CST);

	if (i >= CD_MAXREC)
		return;
	sh->acked[i].who = (uint16_t)who;
	sh->acked[i].idx = idx;
	__atomic_store_n(&sh->acked[i].valid, 1, __ATOMIC_RELEASE);
}

static int
cd_rec_count(void)
{
	int n = __atomic_load_n(&sh->n_acked, __ATOMIC_ACQUIRE);

	return n < CD_MAXREC ? n : CD_MAXREC;
}

/* ---- pools ---- */

static int
cd_open(const char *path, unsigned flags, const char *node, struct mkv_pool **pool)
{
	struct mkv_opts *opts = NULL;
	int rc;

	*pool = NULL;
	if ((rc = mkv_opts_new(&opts)) < 0)
		return rc;
	if (flags & MKV_CREATE) {
		if ((rc = mkv_opts_set_page_size(opts, CD_PAGE)) < 0 ||
		    (rc = mkv_opts_set_data_size(opts, CD_DATA)) < 0 ||
		    (rc = mkv_opts_set_watermarks(opts, 0, 0)) < 0 ||
		    (rc = mkv_opts_set_max_clients(opts, CD_CLIENTS)) < 0 ||
		    (rc = mkv_opts_set_lease_period(opts, CD_PERIOD)) < 0 ||
		    (rc = mkv_opts_set_client_timeout(opts, CD_TIMEOUT)) < 0)
			goto out;
	}
	if ((rc = mkv_opts_set_node(opts, node)) < 0)
		goto out;
	rc = mkv_pool_open(path, flags, opts, pool);
out:
	mkv_opts_delete(&opts);
	return rc;
}

/*
 * A failed call of a child: it must leave a message and must not be EXISTS
 * (keys have one writer) or INVAL (arguments are good).  Returns nonzero if
 * the failure breaks the contract (and records why).
 */
static int
cd_check_failure(const char *what, const char *key, int rc)
{
	struct cd_child *c = &sh->ch[me];

	c->failed++;
	cd_count_code(rc);
	if (mkv_errormsg()[0] == '\0')
		return cd_fail(1, "%s %s failed with %d (%s) and no message", what, key, rc,
				mkv_strerror(rc));
	if (rc == MKV_E_EXISTS || rc == MKV_E_INVAL || rc >= 0)
		return cd_fail(1, "%s %s failed with %d (%s): %s", what, key, rc,
				mkv_strerror(rc), mkv_errormsg());
	return 0;
}

/* Check a view of @p key; nonzero (and a failure recorded) if wrong. */
static int
cd_check_view(const struct mkv_view *v, const char *key, size_t klen, const char *when)
{
	size_t want = cd_vlen(key, klen);
	ssize_t off;

	if (v->data == NULL || v->len != want)
		return cd_fail(1, "view of %s (%s): data %p len %zu, expected len %zu", key,
				when, v->data, v->len, want);
	off = tu_verify(v->data, v->len, key, klen);
	if (off >= 0)
		return cd_fail(1, "view of %s (%s): byte %zd of %zu is not the pattern", key,
				when, off, v->len);
	return 0;
}

/* ---- writers ---- */

struct cd_pending {
	char key[64];
	size_t klen;
	unsigned idx;
	struct mkv_ticket t;
	int started;
};

static int
writer(const char *path, const char *node, uint64_t seed)
{
	struct cd_child *c = &sh->ch[me];
	struct mkv_pool *pool;
	struct cd_pending pend[3];
	struct mkv_buf b;
	uint64_t rng = seed ^ (0x5157ULL * (uint64_t)(me + 1));
	double end = tu_now() + CD_CHILD_DEADLINE;
	unsigned idx = 0, n, k, how;
	int rc, bad = 0;

	cd_phase(PH_OPEN);
	if ((rc = cd_open(path, 0, node, &pool)) < 0)
		return cd_fail(10, "writer open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	cd_phase(PH_IDLE);
	__atomic_store_n(&c->ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE))
		tu_sleep_us(200);
	while (idx < CD_WMAX && !cd_stopping() && !bad) {
		if (tu_now() > end)
			return cd_fail(11, "writer out of time at key %u", idx);
		how = (unsigned)tu_rand_range(&rng, 0, 3);
		n = how == 3 ? (unsigned)tu_rand_range(&rng, 2, 3) : 1;
		if (n > CD_WMAX - idx)
			n = CD_WMAX - idx;
		/* the checker looks at every key tried, published or not */
		__atomic_store_n(&c->next, idx + n, __ATOMIC_SEQ_CST);
		for (k = 0; k < n; k++) {
			pend[k].idx = idx + k;
			pend[k].klen = cd_key(pend[k].key, (unsigned)me, idx + k);
			pend[k].started = 0;
		}
		if (how == 0) {
			cd_phase(PH_PUT);
			rc = tu_put(pool, pend[0].key, pend[0].klen,
					cd_vlen(pend[0].key, pend[0].klen));
			if (rc == 0) {
				cd_rec_add((unsigned)me, idx);
				c->ok++;
			} else {
				bad |= cd_check_failure("put", pend[0].key, rc);
			}
		} else if (how == 1) {
			size_t len = cd_vlen(pend[0].key, pend[0].klen);

			memset(&b, 0, sizeof(b));
			cd_phase(PH_ALLOC);
			rc = mkv_alloc(pool, len, &b);
			if (rc < 0) {
				bad |= cd_check_failure("alloc for", pend[0].key, rc);
			} else if (b.data == NULL || b.len < len) {
				return cd_fail(12, "alloc(%zu) returned data %p len %zu", len, b.data,
						b.len);
			} else {
				cd_phase(PH_FILL);
				tu_fill(b.data, len, pend[0].key, pend[0].klen);
				cd_phase(PH_PUBLISH);
				rc = mkv_publish(pool, pend[0].key, pend[0].klen, &b);
				if (rc == 0) {
					cd_rec_add((unsigned)me, idx);
					c->ok++;
					if (!tu_is_zero(&b, sizeof(b)))
						return cd_fail(13, "publish %s left the buffer",
								pend[0].key);
				} else {
					bad |= cd_check_failure("publish", pend[0].key, rc);
					cd_phase(PH_ABORT);
					if (rc != MKV_E_EXISTS && b.data != NULL &&
					    (rc = mkv_abort(pool, &b)) < 0)
						bad |= cd_fail(14, "abort after a failed publish: %s",
								mkv_strerror(rc));
				}
			}
		} else {
			for (k = 0; k < n; k++) {
				size_t len = cd_vlen(pend[k].key, pend[k].klen);

				memset(&b, 0, sizeof(b));
				cd_phase(PH_ALLOC);
				rc = mkv_alloc(pool, len, &b);
				if (rc < 0) {
					bad |= cd_check_failure("alloc for", pend[k].key, rc);
					break;
				}
				if (b.data == NULL || b.len < len)
					return cd_fail(12, "alloc(%zu) returned data %p len %zu", len,
							b.data, b.len);
				cd_phase(PH_FILL);
				tu_fill(b.data, len, pend[k].key, pend[k].klen);
				cd_phase(PH_ASYNC);
				memset(&pend[k].t, 0, sizeof(pend[k].t));
				rc = mkv_publish_async(pool, pend[k].key, pend[k].klen, &b, &pend[k].t);
				if (rc < 0) {
					bad |= cd_check_failure("publish_async", pend[k].key, rc);
					cd_phase(PH_ABORT);
					if (b.data != NULL && (rc = mkv_abort(pool, &b)) < 0)
						bad |= cd_fail(14, "abort after a failed publish_async: %s",
								mkv_strerror(rc));
					break;
				}
				if (!tu_is_zero(&b, sizeof(b)))
					return cd_fail(13, "publish_async %s left the buffer", pend[k].key);
				pend[k].started = 1;
			}
			for (k = 0; k < n; k++) {
				if (!pend[k].started)
					continue;
				cd_phase(PH_WAIT);
				rc = mkv_wait(pool, &pend[k].t);
				if (rc == 0) {
					cd_rec_add((unsigned)me, pend[k].idx);
					c->ok++;
				} else {
					bad |= cd_check_failure("wait for", pend[k].key, rc);
				}
			}
		}
		if (rc == MKV_E_NOSPC)
			tu_sleep_ms(5);
		idx += n;
		cd_phase(PH_IDLE);
		tu_sleep_us((double)tu_rand_range(&rng, 1000, 5000));
	}
	cd_phase(PH_CLOSE);
	mkv_pool_close(&pool);
	cd_phase(PH_NONE);
	return bad ? 15 : 0;
}

/* ---- deleters ---- */

static int
deleter(const char *path, const char *node, uint64_t seed)
{
	struct cd_child *c = &sh->ch[me];
	struct mkv_pool *pool;
	uint64_t rng = seed ^ (0xde1ULL * (uint64_t)(me + 1));
	double end = tu_now() + CD_CHILD_DEADLINE;
	char key[64];
	size_t klen;
	struct cd_rec *r;
	uint8_t zero;
	int rc, n, bad = 0;

	cd_phase(PH_OPEN);
	if ((rc = cd_open(path, 0, node, &pool)) < 0)
		return cd_fail(20, "deleter open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	cd_phase(PH_IDLE);
	__atomic_store_n(&c->ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE))
		tu_sleep_us(200);
	while (!cd_stopping() && !bad) {
		if (tu_now() > end)
			return cd_fail(21, "deleter out of time");
		n = cd_rec_count();
		if (n == 0) {
			tu_sleep_us(500);
			continue;
		}
		r = &sh->acked[tu_rand_range(&rng, 0, (uint64_t)n - 1)];
		zero = 0;
		if (!__atomic_load_n(&r->valid, __ATOMIC_ACQUIRE) ||
		    !__atomic_compare_exchange_n(&r->del, &zero, 1, 0, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST))
			continue;
		klen = cd_key(key, r->who, r->idx);
		cd_phase(PH_DEL);
		rc = mkv_del(pool, key, klen);
		if (rc == 0) {
			__atomic_store_n(&r->del, 2, __ATOMIC_SEQ_CST);
			c->ok++;
		} else if (rc == MKV_E_NOTFOUND) {
			__atomic_store_n(&r->del, 3, __ATOMIC_SEQ_CST);
			bad |= cd_fail(22, "del of acknowledged key %s: NOTFOUND (%s)", key,
					mkv_errormsg());
		} else {
			bad |= cd_check_failure("del", key, rc);
		}
		cd_phase(PH_IDLE);
		tu_sleep_us((double)tu_rand_range(&rng, 500, 3000));
	}
	cd_phase(PH_CLOSE);
	mkv_pool_close(&pool);
	cd_phase(PH_NONE);
	return bad ? 23 : 0;
}

/* ---- readers ---- */

/* A key to read: mostly acknowledged ones, else any key a writer tried. */
static size_t
reader_pick(uint64_t *rng, char *key)
{
	int n = cd_rec_count(), w, tries;
	struct cd_rec *r;
	uint32_t next;

	if (n > 0 && tu_rand_range(rng, 0, 9) < 7) {
		r = &sh->acked[tu_rand_range(rng, 0, (uint64_t)n - 1)];
		if (__atomic_load_n(&r->valid, __ATOMIC_ACQUIRE))
			return cd_key(key, r->who, r->idx);
	}
	for (tries = 0; tries < 8; tries++) {
		w = (int)tu_rand_range(rng, 0, CD_MAXCH - 1);
		if (sh->ch[w].role != R_WRITER)
			continue;
		next = __atomic_load_n(&sh->ch[w].next, __ATOMIC_ACQUIRE);
		if (next == 0)
			continue;
		return cd_key(key, (unsigned)w, (unsigned)tu_rand_range(rng, 0, next - 1));
	}
	return cd_key(key, 0, 0);
}

static int
reader(const char *path, const char *node, uint64_t seed)
{
	struct cd_child *c = &sh->ch[me];
	struct mkv_pool *pool;
	struct mkv_view v[CD_MAXVIEWS];
	struct mkv_key keys[32];
	char kbuf[CD_MAXVIEWS][64], pbuf[32][64];
	size_t klen[CD_MAXVIEWS], hits, found;
	uint64_t rng = seed ^ (0x7eadULL * (uint64_t)(me + 1));
	double end = tu_now() + CD_CHILD_DEADLINE;
	unsigned op, nv, i, w, nk;
	int rc, bad = 0;

	cd_phase(PH_OPEN);
	if ((rc = cd_open(path, (unsigned)c->flags, node, &pool)) < 0)
		return cd_fail(30, "reader open: %s: %s", mkv_strerror(rc), mkv_errormsg());
	cd_phase(PH_IDLE);
	__atomic_store_n(&c->ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE))
		tu_sleep_us(200);
	while (!cd_stopping() && !bad) {
		if (tu_now() > end)
			return cd_fail(31, "reader out of time");
		op = (unsigned)tu_rand_range(&rng, 0, 9);
		if (op < 6) {
			/* get a few, check, hold, check again, release */
			nv = (unsigned)tu_rand_range(&rng, 1, CD_MAXVIEWS);
			for (i = 0; i < nv; i++) {
				klen[i] = reader_pick(&rng, kbuf[i]);
				memset(&v[i], 0, sizeof(v[i]));
				cd_phase(PH_GET);
				rc = mkv_get(pool, kbuf[i], klen[i], &v[i]);
				if (rc == MKV_E_NOTFOUND) {
					c->misses++;
				} else if (rc < 0) {
					bad |= cd_fail(32, "get %s: %d (%s): %s", kbuf[i], rc,
							mkv_strerror(rc), mkv_errormsg());
				} else {
					c->views++;
					bad |= cd_check_view(&v[i], kbuf[i], klen[i], "at get");
				}
			}
			cd_phase(PH_HOLD);
			tu_sleep_us((double)tu_rand_range(&rng, 0, 30000));
			for (i = 0; i < nv; i++) {
				if (v[i].data == NULL)
					continue;
				bad |= cd_check_view(&v[i], kbuf[i], klen[i], "after holding it");
				cd_phase(PH_RELEASE);
				if ((rc = mkv_release(pool, &v[i])) < 0)
					bad |= cd_fail(33, "release %s: %s", kbuf[i], mkv_strerror(rc));
			}
		} else if (op < 8) {
			/* a writer's keys in order: how many leading ones are there */
			w = (unsigned)tu_rand_range(&rng, 0, CD_MAXCH - 1);
			nk = (unsigned)tu_rand_range(&rng, 1, 32);
			for (i = 0; i < nk; i++) {
				keys[i].data = pbuf[i];
				keys[i].len = cd_key(pbuf[i], w, i);
			}
			if (op == 6) {
				cd_phase(PH_PREFIX);
				hits = (size_t)-1;
				rc = mkv_prefix_len(pool, keys, nk, &hits);
				if (rc < 0 || hits > nk)
					bad |= cd_fail(34, "prefix_len(%u keys of writer %u) = %d (%s), "
							"hits %zu: %s", nk, w, rc, mkv_strerror(rc), hits,
							mkv_errormsg());
			} else {
				struct mkv_view bv[32];

				cd_phase(PH_BATCH);
				found = 0;
				rc = mkv_get_batch(pool, keys, nk, MKV_BATCH_PREFIX, bv, &found);
				if (rc < 0) {
					bad |= cd_fail(35, "get_batch(%u keys of writer %u) = %d (%s): %s",
							nk, w, rc, mkv_strerror(rc), mkv_errormsg());
					continue;
				}
				for (i = 0; i < nk; i++) {
					if (bv[i].data == NULL)
						continue;
					c->views++;
					bad |= cd_check_view(&bv[i], pbuf[i], keys[i].len, "from get_batch");
					cd_phase(PH_RELEASE);
					if ((rc = mkv_release(pool, &bv[i])) < 0)
						bad |= cd_fail(33, "release %s: %s", pbuf[i],
								mkv_strerror(rc));
				}
			}
		} else {
			klen[0] = reader_pick(&rng, kbuf[0]);
			cd_phase(PH_EXISTS);
			rc = mkv_exists(pool, kbuf[0], klen[0]);
			if (rc < 0 || rc > 1)
				bad |= cd_fail(36, "exists %s = %d (%s)", kbuf[0], rc, mkv_strerror(rc));
		}
		cd_phase(PH_IDLE);
		tu_sleep_us((double)tu_rand_range(&rng, 0, 1500));
	}
	cd_phase(PH_CLOSE);
	mkv_pool_close(&pool);
	cd_phase(PH_NONE);
	return bad ? 37 : 0;
}

/* ---- the driver ---- */

static int verbose;
static pid_t watch_pids[CD_MAXCH + 1];

static void
on_alarm(int sig)
{
	static const char msg[] = "# watchdog: the trial took too long, killing it\n";
	int i;

	(void)sig;
	for (i = 0; i < CD_MAXCH + 1; i++)
		if (watch_pids[i] > 0)
			kill(watch_pids[i], SIGKILL);
	(void)!write(1, msg, sizeof(msg) - 1);
	_exit(1);
}

struct cd_kill {
	int child;
	double at_ms;
	int park;     /* phase to park at, 0: a kill at a random moment */
	int inside;   /* parked: let it go and kill it this many us later */
	unsigned delay_us;
	int done;
};

static int nfail_parent;

static void cd_bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
cd_bad(const char *fmt, ...)
{
	va_list ap;

	nfail_parent++;
	if (nfail_parent > 30)
		return;
	fputs("# FAIL: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
}

/* JSON integer "key": N in @p text; -1 if absent. */
static long long
json_int(const char *text, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(text, pat);
	if (p == NULL)
		return -1;
	return strtoll(p + strlen(pat), NULL, 10);
}

/* Run marukv-gc (or mkv_pool_reclaim); the pages it reclaimed, -1 on failure. */
static long long
run_reclaim(const char *gc, const char *dir, const char *path, long long *clients,
		long long *readers)
{
	char out[512], text[4096];
	long long pages;
	ssize_t n;
	pid_t pid;
	int fd, rc;

	*clients = *readers = -1;
	if (gc == NULL) {
		struct mkv_pool *pool;
		struct mkv_reclaim rep;

		if ((rc = cd_open(path, 0, "a", &pool)) < 0) {
			cd_bad("reclaim: open: %s: %s", mkv_strerror(rc), mkv_errormsg());
			return -1;
		}
		memset(&rep, 0xa5, sizeof(rep));
		rc = mkv_pool_reclaim(pool, 0, &rep);
		mkv_pool_close(&pool);
		if (rc < 0) {
			cd_bad("mkv_pool_reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
			return -1;
		}
		*clients = rep.clients;
		*readers = rep.readers;
		return (long long)rep.pages;
	}
	snprintf(out, sizeof(out), "%s/gc.out", dir);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("MARUKV_NODE", "a", 1);
		execl(gc, gc, "--json", "-q", "reclaim", path, (char *)NULL);
		_exit(127);
	}
	watch_pids[CD_MAXCH] = pid;
	rc = tu_wait_for(pid, 20);
	if (rc == -2) {
		kill(pid, SIGKILL);
		(void)tu_wait(pid);
	}
	watch_pids[CD_MAXCH] = 0;
	text[0] = '\0';
	fd = open(out, O_RDONLY);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		text[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	if (rc != 0) {
		cd_bad("%s reclaim %s exited with %d; its output:", gc, path, rc);
		printf("#   %s\n", text);
		return -1;
	}
	pages = json_int(text, "pages");
	*clients = json_int(text, "clients");
	*readers = json_int(text, "readers");
	if (pages < 0)
		cd_bad("no \"pages\" in marukv-gc's output: %s", text);
	if (verbose)
		printf("# gc: %s", text);
	return pages;
}

/*
 * Dead clients left after the reclaim: listed as a failure; then a holder
 * of our own watches their heartbeats for the client timeout and reclaims
 * them, so that the other checks still run.  The pages that reclaimed.
 */
static int second_reclaim;

static long long
leftover_clients(const char *path)
{
	struct mkv_client cl[CD_CLIENTS + 1];
	struct mkv_reclaim r1, r2;
	struct mkv_pool *pool;
	size_t ncl = 0, i;
	int rc;

	if ((rc = cd_open(path, MKV_RDONLY, "a", &pool)) < 0) {
		cd_bad("open after reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	rc = mkv_pool_clients(pool, cl, CD_CLIENTS + 1, &ncl);
	mkv_pool_close(&pool);
	if (rc < 0) {
		cd_bad("mkv_pool_clients: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	if (ncl <= 1)
		return 0;
	cd_bad("%zu clients besides the checker left after the reclaim run:", ncl - 1);
	for (i = 0; i < ncl && i < CD_CLIENTS + 1; i++)
		if (cl[i].pid != (uint32_t)getpid())
			printf("#   slot %u pid %u node %s alive %u rdonly %u holder %u pin %llu "
					"granted %llu beat age %lld ms\n", cl[i].slot, cl[i].pid,
					cl[i].node, cl[i].alive, cl[i].rdonly, cl[i].holder,
					(unsigned long long)cl[i].pin,
					(unsigned long long)cl[i].pages_granted,
					(long long)cl[i].heartbeat_age_ms);
	second_reclaim = 1;
	if ((rc = cd_open(path, 0, "a", &pool)) < 0) {
		cd_bad("open for a second reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	rc = mkv_pool_reclaim(pool, 0, &r1);
	tu_sleep_ms(CD_TIMEOUT + 200);
	if (rc == 0)
		rc = mkv_pool_reclaim(pool, 0, &r2);
	mkv_pool_close(&pool);
	if (rc < 0)
		cd_bad("mkv_pool_reclaim: %s: %s", mkv_strerror(rc), mkv_errormsg());
	printf("# a holder kept open for the client timeout reclaimed: now %u clients %llu pages, "
			"%u ms later %u clients %llu pages %llu pins\n", r1.clients,
			(unsigned long long)r1.pages, CD_TIMEOUT + 200, r2.clients,
			(unsigned long long)r2.pages, (unsigned long long)r2.pins);
	return (long long)(r1.pages + r2.pages);
}

/*
 * The checks after the trial (see the top of the file); the number of
 * keys checked.
 */
static unsigned long
check_pool(const char *path, int ntotal)
{
	static uint8_t acked[CD_MAXCH][CD_WMAX];   /* 1 + rec.del, 0: not acked */
	struct mkv_client cl[CD_CLIENTS + 1];
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	char key[64];
	size_t klen, ncl = 0, i;
	unsigned long checked = 0, present = 0, lost = 0, resurrected = 0;
	int rc, w, n, r;
	unsigned idx;

	memset(acked, 0, sizeof(acked));
	n = cd_rec_count();
	for (r = 0; r < n; r++)
		if (sh->acked[r].valid && sh->acked[r].who < CD_MAXCH && sh->acked[r].idx < CD_WMAX)
			acked[sh->acked[r].who][sh->acked[r].idx] = (uint8_t)(1 + sh->acked[r].del);

	rc = cd_open(path, MKV_RDONLY | MKV_VERIFY, "a", &pool);
	if (rc < 0) {
		cd_bad("checker open: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return 0;
	}
	/* only the checker is left */
	rc = mkv_pool_clients(pool, cl, CD_CLIENTS + 1, &ncl);
	if (rc < 0)
		cd_bad("mkv_pool_clients: %s: %s", mkv_strerror(rc), mkv_errormsg());
	else if (ncl != 1) {
		cd_bad("%zu clients after reclaim, expected only the checker:", ncl);
		for (i = 0; i < ncl && i < CD_CLIENTS + 1; i++)
			printf("#   slot %u pid %u node %s alive %u rdonly %u holder %u pin %llu "
					"granted %llu beat age %lld ms\n", cl[i].slot, cl[i].pid,
					cl[i].node, cl[i].alive, cl[i].rdonly, cl[i].holder,
					(unsigned long long)cl[i].pin,
					(unsigned long long)cl[i].pages_granted,
					(long long)cl[i].heartbeat_age_ms);
	}

	memset(&rep, 0, sizeof(rep));
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &rep);
	if (rc != 0 || rep.problems != 0)
		cd_bad("mkv_pool_verify(DEEP) = %d (%s): %llu problems, first \"%.200s\"; %s", rc,
				mkv_strerror(rc), (unsigned long long)rep.problems,
				rep.first_problem, rc < 0 && rc != MKV_E_CORRUPT ? mkv_errormsg() : "");
	if (rc == 0 && rep.pages_leaked != 0)
		cd_bad("mkv_pool_verify: %llu pages leaked after reclaim",
				(unsigned long long)rep.pages_leaked);
	if (rc == 0 && rep.checksums_checked != rep.entries)
		cd_bad("mkv_pool_verify(DEEP) checked %llu checksums of %llu entries",
				(unsigned long long)rep.checksums_checked,
				(unsigned long long)rep.entries);

	/* every key tried: absent or whole; acknowledged: present unless deleted */
	for (w = 0; w < ntotal; w++) {
		if (sh->ch[w].role != R_WRITER)
			continue;
		for (idx = 0; idx < sh->ch[w].next && idx < CD_WMAX; idx++) {
			klen = cd_key(key, (unsigned)w, idx);
			rc = tu_check(pool, key, klen, cd_vlen(key, klen));
			checked++;
			if (rc == 0)
				present++;
			if (rc != 0 && rc != MKV_E_NOTFOUND) {
				cd_bad("key %s: %s", key, rc == 1 ? "wrong length" : rc == 2 ?
						"wrong bytes" : rc == 3 ? "release failed" :
						mkv_strerror(rc));
				continue;
			}
			switch (acked[w][idx]) {
			case 1:  /* acknowledged, never deleted */
				if (rc != 0) {
					lost++;
					cd_bad("acknowledged key %s (never deleted) is gone", key);
				}
				break;
			case 3:  /* deleted */
				if (rc == 0) {
					resurrected++;
					cd_bad("key %s was deleted successfully but is there", key);
				}
				break;
			default: /* not acknowledged, or a delete of unknown outcome */
				break;
			}
		}
	}

	memset(&st, 0, sizeof(st));
	rc = mkv_pool_stat(pool, &st);
	if (rc < 0) {
		cd_bad("stat: %s: %s", mkv_strerror(rc), mkv_errormsg());
	} else {
		if (st.pages_used + st.pages_free + st.pages_quarantined + st.pages_granted !=
				st.pages_total)
			cd_bad("pages: used %llu + free %llu + quarantined %llu + granted %llu "
					"!= total %llu", (unsigned long long)st.pages_used,
					(unsigned long long)st.pages_free,
					(unsigned long long)st.pages_quarantined,
					(unsigned long long)st.pages_granted,
					(unsigned long long)st.pages_total);
		if (st.pages_granted != 0)
			cd_bad("%llu pages still granted after reclaim with no writer left",
					(unsigned long long)st.pages_granted);
		if (st.entries != present)
			cd_bad("the registry has %llu entries, %lu of the keys tried are there",
					(unsigned long long)st.entries, present);
		if (st.evictions != 0)
			printf("# note: %llu evictions\n", (unsigned long long)st.evictions);
		if (verbose)
			printf("# stat: used %llu free %llu quarantined %llu granted %llu total %llu "
					"entries %llu clients %u\n", (unsigned long long)st.pages_used,
					(unsigned long long)st.pages_free,
					(unsigned long long)st.pages_quarantined,
					(unsigned long long)st.pages_granted,
					(unsigned long long)st.pages_total,
					(unsigned long long)st.entries, st.clients);
	}
	mkv_pool_close(&pool);

	/* still usable: a writer takes new values after all that */
	rc = cd_open(path, 0, "a", &pool);
	if (rc < 0) {
		cd_bad("open for writing after the trial: %s: %s", mkv_strerror(rc), mkv_errormsg());
		return checked;
	}
	for (i = 0; i < 8; i++) {
		klen = (size_t)snprintf(key, sizeof(key), "after-%zu", i);
		if ((rc = tu_publish(pool, key, klen, 2 * CD_PAGE)) != 0)
			cd_bad("publish %s after the trial: %s: %s", key, mkv_strerror(rc),
					mkv_errormsg());
		else if ((rc = tu_check(pool, key, klen, 2 * CD_PAGE)) != 0)
			cd_bad("check %s after the trial: %d", key, rc);
	}
	memset(&rep, 0, sizeof(rep));
	rc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &rep);
	if (rc != 0)
		cd_bad("mkv_pool_verify(DEEP) after new writes = %d (%s): \"%.200s\"", rc,
				mkv_strerror(rc), rep.first_problem);
	mkv_pool_close(&pool);
	if (lost || resurrected)
		printf("# %lu acknowledged keys lost, %lu deleted keys back\n", lost, resurrected);
	printf("# keys tried %lu, present %lu\n", checked, present);
	return checked;
}

static uint64_t
parse_u64(const char *s)
{
	return strtoull(s, NULL, 0);
}

int
main(int argc, char **argv)
{
	const char *dir = NULL, *gc = NULL;
	static char path[600];
	struct cd_kill kl[CD_MAXCH];
	struct mkv_pool *pool;
	uint64_t seed = 1, rng;
	unsigned kills_by_phase[PH_COUNT] = { 0 };
	int nw, nd, nr, n, i, j, rc, nkill = 0, kills = 0, parked_kills = 0, inside_kills = 0;
	int have_a = 0, have_b = 0;
	double run_ms, t0, last_kill = 0, t;
	long long reclaimed, gc_clients, gc_readers, extra;
	unsigned long checked;
	char nodes[CD_MAXCH + 1];

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = parse_u64(argv[++i]);
		else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--gc") == 0 && i + 1 < argc)
			gc = argv[++i];
		else if (strcmp(argv[i], "--verbose") == 0)
			verbose = 1;
		else {
			fprintf(stderr, "usage: crashdrv --seed SEED --dir DIR [--gc PATH] [--verbose]\n");
			return 2;
		}
	}
	if (dir == NULL) {
		fprintf(stderr, "crashdrv: --dir is required\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (gc != NULL && access(gc, X_OK) != 0) {
		printf("# note: %s not executable, calling mkv_pool_reclaim instead\n", gc);
		gc = NULL;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "crashdrv: mkdir %s: %s\n", dir, strerror(errno));
		return 2;
	}
	snprintf(path, sizeof(path), "%s/pool", dir);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		fprintf(stderr, "crashdrv: mmap: %s\n", strerror(errno));
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm(CD_WATCHDOG);

	/* the trial's shape, all from the seed */
	rng = seed;
	nw = (int)tu_rand_range(&rng, 2, 3);
	nd = 1;
	nr = (int)tu_rand_range(&rng, 1, 2);
	n = nw + nd + nr;
	for (i = 0; i < n; i++) {
		struct cd_child *c = &sh->ch[i];

		c->role = i < nw ? R_WRITER : i < nw + nd ? R_DELETER : R_READER;
		c->node_b = (int)tu_rand_range(&rng, 0, 1);
		if (c->role == R_READER)
			c->flags = (tu_rand_range(&rng, 0, 1) ? MKV_RDONLY : 0) |
				(tu_rand_range(&rng, 0, 1) ? MKV_VERIFY : 0);
		have_a |= !c->node_b;
		have_b |= c->node_b;
	}
	if (!have_b)
		sh->ch[tu_rand_range(&rng, 0, (uint64_t)n - 1)].node_b = 1;
	if (!have_a)
		sh->ch[0].node_b = 0;
	for (i = 0; i < n; i++)
		nodes[i] = sh->ch[i].node_b ? 'b' : 'a';
	nodes[n] = '\0';
	for (i = CD_MAXCH - 1; i >= n; i--)
		sh->ch[i].role = -1;
	run_ms = (double)tu_rand_range(&rng, 300, 500);
	memset(kl, 0, sizeof(kl));
	for (i = 0; i < n; i++) {
		const int *ph;
		size_t nph;

		if (tu_rand_range(&rng, 0, 99) >= 55)
			continue;
		kl[nkill].child = i;
		kl[nkill].at_ms = (double)tu_rand_range(&rng, 20, (uint64_t)run_ms - 20);
		if (tu_rand_range(&rng, 0, 2) != 0) {
			switch (sh->ch[i].role) {
			case R_WRITER:
				ph = writer_phases, nph = sizeof(writer_phases) / sizeof(int);
				break;
			case R_DELETER:
				ph = deleter_phases, nph = sizeof(deleter_phases) / sizeof(int);
				break;
			default:
				ph = reader_phases, nph = sizeof(reader_phases) / sizeof(int);
				break;
			}
			kl[nkill].park = ph[tu_rand_range(&rng, 0, nph - 1)];
			kl[nkill].inside = (int)tu_rand_range(&rng, 0, 1);
			kl[nkill].delay_us = (unsigned)tu_rand_range(&rng, 0, 400);
		}
		nkill++;
	}
	if (nkill == 0) {
		kl[0].child = (int)tu_rand_range(&rng, 0, (uint64_t)n - 1);
		kl[0].at_ms = (double)tu_rand_range(&rng, 20, (uint64_t)run_ms - 20);
		nkill = 1;
	}
	/* in time order */
	for (i = 1; i < nkill; i++)
		for (j = i; j > 0 && kl[j].at_ms < kl[j - 1].at_ms; j--) {
			struct cd_kill tmp = kl[j];

			kl[j] = kl[j - 1];
			kl[j - 1] = tmp;
		}

	printf("# seed %#llx: %d writers, %d deleter, %d readers, nodes %s, run %.0f ms\n",
			(unsigned long long)seed, nw, nd, nr, nodes, run_ms);
	for (i = 0; i < nkill; i++)
		printf("# plan: kill child %d (%s, node %c) at %.0f ms%s%s%s\n", kl[i].child,
				role_name[sh->ch[kl[i].child].role], nodes[kl[i].child], kl[i].at_ms,
				kl[i].park ? ", parked before " : "",
				kl[i].park ? phase_name[kl[i].park] : "",
				kl[i].park ? (kl[i].inside ? " then let go" : "") : "");

	rc = cd_open(path, MKV_CREATE, "a", &pool);
	if (rc < 0) {
		printf("# create %s: %s: %s\n", path, mkv_strerror(rc), mkv_errormsg());
		return 2;
	}
	mkv_pool_close(&pool);

	for (i = 0; i < n; i++) {
		pid_t pid = tu_fork();

		if (pid < 0) {
			printf("# fork: %s\n", strerror(errno));
			return 2;
		}
		if (pid == 0) {
			const char *node = sh->ch[i].node_b ? "b" : "a";

			me = i;
			alarm(0);
			signal(SIGALRM, SIG_DFL);
			switch (sh->ch[i].role) {
			case R_WRITER:
				_exit(writer(path, node, seed));
			case R_DELETER:
				_exit(deleter(path, node, seed));
			default:
				_exit(reader(path, node, seed));
			}
		}
		sh->ch[i].pid = pid;
		watch_pids[i] = pid;
	}
	/* all open before the clock starts */
	t = tu_now() + 15;
	for (i = 0; i < n; i++)
		while (!__atomic_load_n(&sh->ch[i].ready, __ATOMIC_ACQUIRE)) {
			rc = tu_wait_for(sh->ch[i].pid, 0);
			if (rc != -2) {
				printf("# child %d ended (%d) before the start: %s\n", i, rc, sh->why);
				nfail_parent++;
				sh->ch[i].exited = 1;
				sh->ch[i].status = rc;
				break;
			}
			if (tu_now() > t) {
				printf("# child %d did not open in 15 s\n", i);
				nfail_parent++;
				break;
			}
			tu_sleep_ms(1);
		}
	__atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
	t0 = tu_now();

	for (i = 0; i < nkill; i++) {
		struct cd_kill *k = &kl[i];
		struct cd_child *c = &sh->ch[k->child];
		int ph, how = 0;  /* 0 random moment, 1 parked, 2 let go */

		tu_sleep_ms(k->at_ms - (tu_now() - t0) * 1000.0);
		if (c->exited)
			continue;
		if (k->park) {
			__atomic_store_n(&c->park, k->park, __ATOMIC_SEQ_CST);
			t = tu_now() + 0.15;
			while (!__atomic_load_n(&c->parked, __ATOMIC_SEQ_CST) && tu_now() < t)
				tu_sleep_us(10);
			if (__atomic_load_n(&c->parked, __ATOMIC_SEQ_CST)) {
				how = 1;
				if (k->inside) {
					__atomic_store_n(&c->park, 0, __ATOMIC_SEQ_CST);
					/* spin: nanosleep's slack is larger than the delay */
					t = tu_now() + k->delay_us / 1e6;
					while (tu_now() < t)
						;
					how = 2;
				}
			}
		}
		ph = __atomic_load_n(&c->phase, __ATOMIC_SEQ_CST);
		kill(c->pid, SIGKILL);
		__atomic_store_n(&c->park, 0, __ATOMIC_SEQ_CST);
		rc = tu_wait(c->pid);
		c->exited = 1;
		c->killed = 1;
		c->status = rc;
		watch_pids[k->child] = 0;
		last_kill = tu_now();
		kills++;
		kills_by_phase[ph]++;
		parked_kills += how == 1;
		inside_kills += how == 2;
		printf("# killed child %d (%s, node %c, pid %d) at %.0f ms in %s%s\n", k->child,
				role_name[c->role], nodes[k->child], (int)c->pid,
				(tu_now() - t0) * 1000.0, phase_name[ph],
				how == 1 ? " (parked before the call)" :
				how == 2 ? " (let go into the call)" : "");
	}
	tu_sleep_ms(run_ms - (tu_now() - t0) * 1000.0);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < n; i++)
		__atomic_store_n(&sh->ch[i].park, 0, __ATOMIC_SEQ_CST);

	/* survivors finish their step, close and exit 0 */
	t = tu_now() + 15;
	for (i = 0; i < n; i++) {
		struct cd_child *c = &sh->ch[i];

		if (c->exited)
			continue;
		rc = tu_wait_for(c->pid, t - tu_now());
		if (rc == -2) {
			cd_bad("child %d (%s, node %c) did not finish in 15 s after stop; stuck in %s",
					i, role_name[c->role], nodes[i],
					phase_name[__atomic_load_n(&c->phase, __ATOMIC_SEQ_CST)]);
			kill(c->pid, SIGKILL);
			rc = tu_wait(c->pid);
			last_kill = tu_now();
		} else if (rc != 0) {
			cd_bad("child %d (%s, node %c) exited with %d: %s", i, role_name[c->role],
					nodes[i], rc, sh->why);
		}
		c->exited = 1;
		c->status = rc;
		watch_pids[i] = 0;
	}
	if (sh->nfail)
		cd_bad("children reported %d failures; the first: %s", sh->nfail, sh->why);
	for (i = 0; i < sh->ncodes && i < 8; i++)
		printf("# failed calls with %s: %u\n", mkv_strerror(sh->code[i]), sh->code_n[i]);

	/* the dead of node b are dead once their heartbeat stood still this long */
	tu_sleep_ms((last_kill + (CD_TIMEOUT + 150) / 1000.0 - tu_now()) * 1000.0);
	reclaimed = run_reclaim(gc, dir, path, &gc_clients, &gc_readers);
	extra = leftover_clients(path);
	if (extra > 0)
		reclaimed = (reclaimed < 0 ? 0 : reclaimed) + extra;
	checked = check_pool(path, n);

	printf("# kills: ");
	for (i = 0; i < PH_COUNT; i++)
		if (kills_by_phase[i])
			printf("%s=%u ", phase_name[i], kills_by_phase[i]);
	printf("(%d parked, %d let go into the call)\n", parked_kills, inside_kills);
	{
		unsigned long pubs = 0, views = 0, dels = 0;

		for (i = 0; i < n; i++) {
			if (sh->ch[i].role == R_WRITER)
				pubs += sh->ch[i].ok;
			else if (sh->ch[i].role == R_DELETER)
				dels += sh->ch[i].ok;
			else
				views += sh->ch[i].views;
		}
		printf("summary: seed %#llx, %d procs (nodes %s), %d kills, %lu acked publishes, "
				"%lu deletes, %lu views, %lu keys checked, reclaimed %lld pages "
				"%lld clients %lld readers%s%s\n",
				(unsigned long long)seed, n, nodes, kills, pubs, dels, views, checked,
				reclaimed, gc_clients, gc_readers, gc ? "" : " (mkv_pool_reclaim)",
				second_reclaim ? " (+ a second reclaim)" : "");
	}
	printf("stats: kills=%d keys=%lu reclaimed=%lld", kills, checked,
			reclaimed < 0 ? 0 : reclaimed);
	for (i = 0; i < PH_COUNT; i++)
		if (kills_by_phase[i])
			printf(" kill_%s=%u", phase_name[i], kills_by_phase[i]);
	printf("\n");
	alarm(0);
	return nfail_parent ? 1 : 0;
}
