/* SPDX-License-Identifier: MIT */
/*
 * crashproc.c -- the children of a crash trial (writers, deleters,
 * readers, evictors), the shared state and failure records they and the
 * driver use, and the account of every call's return code; see
 * t/crashdrv.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crashdrv.h"

const char *const role_name[] = { "writer", "deleter", "reader", "evictor" };
const char node_names[CD_MAXNODES + 1] = "abcd";
const char *const phase_name[PH_COUNT] = {
	"none", "open", "idle", "put", "alloc", "fill", "publish", "publish_async", "wait",
	"abort", "del", "get", "hold", "release", "prefix_len", "get_batch", "exists",
	"evict", "stat", "close",
};
static const int writer_phases[] = { PH_PUT, PH_ALLOC, PH_FILL, PH_PUBLISH, PH_ASYNC, PH_WAIT };
static const int deleter_phases[] = { PH_DEL };
static const int reader_phases[] = { PH_GET, PH_HOLD, PH_RELEASE, PH_PREFIX, PH_BATCH };
static const int evictor_phases[] = { PH_EVICT, PH_STAT };
#define N(a) (sizeof(a) / sizeof((a)[0]))
const int *const phases[] = { writer_phases, deleter_phases, reader_phases, evictor_phases };
const size_t n_phases[] = { N(writer_phases), N(deleter_phases), N(reader_phases),
	N(evictor_phases) };

struct cd_sh *sh;
int me = -1;
const char *drv_node = "a";
int verbose;
int nfail_parent;
pid_t watch_pids[CD_MAXCH + 1];

/* ---- failures ---- */

int
cd_fail(int code, const char *fmt, ...)
{
	va_list ap;
	int n;

	__atomic_add_fetch(&sh->nfail, 1, __ATOMIC_SEQ_CST);
	if (me >= 0 && sh->ch[me].why[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(sh->ch[me].why, sizeof(sh->ch[me].why), fmt, ap);
		va_end(ap);
	}
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

void
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

int
cd_broke(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (me >= 0)
		return cd_fail(1, "%s", msg);
	cd_bad("%s", msg);
	return 1;
}

int
check_pages(const struct mkv_stat *st, const char *when)
{
	if (st->pages_used + st->pages_free + st->pages_quarantined + st->pages_granted ==
			st->pages_total)
		return 0;
	return cd_broke("pages %s: used %llu + free %llu + quarantined %llu + granted %llu != "
			"total %llu", when, (unsigned long long)st->pages_used,
			(unsigned long long)st->pages_free, (unsigned long long)st->pages_quarantined,
			(unsigned long long)st->pages_granted, (unsigned long long)st->pages_total);
}

/* ---- return codes ---- */

const char *const call_name[C_COUNT] = {
	"open", "alloc", "publish", "publish_async", "wait", "abort", "put", "del", "get",
	"release", "exists", "prefix_len", "get_batch", "evict", "stat", "clients", "verify",
	"reclaim",
};
const char *const code_name[K_COUNT] = {
	"ok", "INVAL", "NOMEM", "NOSPC", "EXISTS", "NOENT", "USERS", "IO", "TIMEDOUT", "PERM",
	"ACCES", "NOTFOUND", "RDONLY", "NOTPOOL", "CORRUPT", "VERSION", "INTERNAL", "EXPIRED",
	"positive", "other",
};

#define B(k) (1U << (k))
/*
 * The codes marukv.h lists for each call, with its conventions: any call
 * on a handle may say MKV_E_EXPIRED, and one that needs the lease holder
 * MKV_E_TIMEDOUT.
 */
#define ON_HANDLE (B(K_OK) | B(K_EXPIRED))
#define VIA_HOLDER B(K_TIMEDOUT)
#define ALLOC_CODES (ON_HANDLE | VIA_HOLDER | B(K_INVAL) | B(K_NOSPC) | B(K_RDONLY))
#define PUBLISH_CODES (ALLOC_CODES | B(K_EXISTS))
#define GET_CODES (ON_HANDLE | B(K_INVAL) | B(K_NOTFOUND) | B(K_CORRUPT) | B(K_VERSION) | \
		B(K_NOMEM))
static const unsigned documented[C_COUNT] = {
	[C_OPEN] = B(K_OK) | B(K_INVAL) | B(K_NOENT) | B(K_NOTPOOL) | B(K_CORRUPT) |
		B(K_VERSION) | B(K_NOSPC) | B(K_USERS) | B(K_PERM) | B(K_TIMEDOUT) | B(K_NOMEM) |
		B(K_ACCES) | B(K_IO),
	[C_ALLOC] = ALLOC_CODES,
	[C_PUBLISH] = PUBLISH_CODES,
	[C_ASYNC] = PUBLISH_CODES,
	[C_WAIT] = PUBLISH_CODES,
	[C_ABORT] = ON_HANDLE | B(K_INVAL) | B(K_RDONLY),
	[C_PUT] = PUBLISH_CODES,
	[C_DEL] = ON_HANDLE | VIA_HOLDER | B(K_INVAL) | B(K_NOTFOUND) | B(K_RDONLY) | B(K_NOSPC),
	[C_GET] = GET_CODES,
	[C_RELEASE] = ON_HANDLE | B(K_INVAL),
	[C_EXISTS] = ON_HANDLE | B(K_POS) | B(K_INVAL) | B(K_CORRUPT),
	[C_PREFIX] = ON_HANDLE | B(K_INVAL) | B(K_CORRUPT),
	[C_BATCH] = GET_CODES,
	[C_EVICT] = ON_HANDLE | VIA_HOLDER | B(K_INVAL) | B(K_RDONLY) | B(K_NOSPC) | B(K_INTERNAL),
	[C_STAT] = ON_HANDLE | B(K_INVAL) | B(K_INTERNAL),
	[C_CLIENTS] = ON_HANDLE | B(K_INVAL) | B(K_NOMEM),
	[C_VERIFY] = ON_HANDLE | B(K_CORRUPT) | B(K_INVAL) | B(K_NOMEM) | B(K_INTERNAL),
	[C_RECLAIM] = ON_HANDLE | VIA_HOLDER | B(K_INVAL) | B(K_RDONLY) | B(K_NOSPC) |
		B(K_INTERNAL),
};

static enum cd_code
code_of(int rc)
{
	static const int val[K_POS] = {
		0, MKV_E_INVAL, MKV_E_NOMEM, MKV_E_NOSPC, MKV_E_EXISTS, MKV_E_NOENT, MKV_E_USERS,
		MKV_E_IO, MKV_E_TIMEDOUT, MKV_E_PERM, -EACCES, MKV_E_NOTFOUND, MKV_E_RDONLY,
		MKV_E_NOTPOOL, MKV_E_CORRUPT, MKV_E_VERSION, MKV_E_INTERNAL, MKV_E_EXPIRED,
	};
	int k;

	if (rc > 0)
		return K_POS;
	for (k = 0; k < K_POS; k++)
		if (val[k] == rc)
			return (enum cd_code)k;
	return K_OTHER;
}

int
cd_rc(enum cd_call call, int rc, const char *what)
{
	enum cd_code k = code_of(rc);
	const char *why, *msg = mkv_errormsg();
	int32_t none = 0;

	__atomic_add_fetch(&sh->rc[call][k], 1, __ATOMIC_RELAXED);
	if (k == K_OTHER)
		__atomic_compare_exchange_n(&sh->other_code, &none, rc, 0, __ATOMIC_SEQ_CST,
				__ATOMIC_SEQ_CST);
	if (!(documented[call] & B(k)))
		why = "a code marukv.h does not list for this call";
	else if (k == K_INTERNAL)
		why = "MKV_E_INTERNAL";
	else if (k == K_EXPIRED && sh->cfg.hosts)
		why = "EXPIRED, though no client here stands still for the client timeout";
	else if (k == K_EXPIRED)
		why = "EXPIRED, though every client here runs on one kernel, where it is "
			"judged by a lock and never by its heartbeat";
	else if (rc < 0 && msg[0] == '\0')
		why = "a failure with no message";
	else if (rc >= 0 && msg[0] != '\0')
		why = "a success that left a message";
	else
		return 0;
	return cd_broke("%s %s returned %d (%s): %s; message \"%s\"", call_name[call], what, rc,
			mkv_strerror(rc), why, msg);
}

/* ---- the library's log ---- */

static void
cd_log(enum mkv_log_level level, const char *msg, void *arg)
{
	const char *p = strstr(msg, "reclaimed ");
	unsigned long long n;

	(void)arg;
	/* who took which slot, lease or node entry when: the evidence of a trial that fails */
	if (strstr(msg, "slot") || strstr(msg, "lease") || strstr(msg, "node table"))
		fprintf(stderr, "# %.3f child %d (pid %d): %s\n", tu_now(), me, (int)getpid(), msg);
	if (strstr(msg, "lease taken"))
		__atomic_add_fetch(&sh->lease_taken, 1, __ATOMIC_RELAXED);
	if (p && sscanf(p, "reclaimed %llu pages", &n) == 1)
		__atomic_add_fetch(&sh->log_pages, n, __ATOMIC_RELAXED);
	if (level <= MKV_LOG_WARN &&
	    __atomic_fetch_add(&sh->warnings, 1, __ATOMIC_SEQ_CST) == 0)
		snprintf(sh->warning, sizeof(sh->warning), "pid %d: %s", (int)getpid(), msg);
}

void
cd_log_install(void)
{
	mkv_set_log(cd_log, MKV_LOG_INFO, NULL);
}

void
cd_emu_count(void)
{
	static const char *const name[] = {
		[EMU_WRITTEN] = "hostemu_written_back",
		[EMU_REFRESHED] = "hostemu_refreshed",
		[EMU_SPONTANEOUS] = "hostemu_spontaneous",
	};
	unsigned long (*fn)(void);

	for (int i = 0; i < 3; i++) {
		*(void **)&fn = dlsym(RTLD_DEFAULT, name[i]);
		if (fn != NULL)
			__atomic_add_fetch(&sh->emu[i], fn(), __ATOMIC_RELAXED);
	}
}

/* ---- children's steps ---- */

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

/*
 * What a child's call returned: counted and judged by cd_rc(); a failure
 * must besides not be EXISTS (keys have one writer) or INVAL (arguments
 * are good).  Nonzero if the return breaks the contract.
 */
static int
judge(enum cd_call call, int rc, const char *key)
{
	int bad = cd_rc(call, rc, key);

	if (rc >= 0)
		return bad;
	sh->ch[me].failed++;
	if (!bad && (rc == MKV_E_EXISTS || rc == MKV_E_INVAL))
		bad = cd_fail(1, "%s %s failed with %d (%s): %s", call_name[call], key, rc,
				mkv_strerror(rc), mkv_errormsg());
	return bad;
}

/*
 * --hosts: wait (15 s at most) until the children before this one have
 * opened.  Opens on different hosts at once are not safe yet: a client
 * slot is claimed by a compare-and-swap, which is exact among the
 * processes of one host only (marukv(7), COHERENCE MODEL), and two hosts
 * that claim the same slot both think they hold it.  When the children
 * opened all at once, 3 crash trials in about 40 saw a child's first call
 * fail with MKV_E_EXPIRED (its claim gone right after its open), which
 * that would explain; it was not caught in the act, and did not come back
 * in some 300 trials opening at once on a quieter machine.
 */
static void
open_turn_wait(void)
{
	double end = tu_now() + 15;

	while (__atomic_load_n(&sh->open_turn, __ATOMIC_ACQUIRE) != me && tu_now() < end)
		tu_sleep_us(200);
}

/* A child's start: open the pool, say it is ready, wait for the go. */
static int
child_open(const char *path, const char *node, struct mkv_pool **pool)
{
	int rc, bad;

	cd_log_install();
	cd_phase(PH_OPEN);
	if (sh->cfg.hosts)
		open_turn_wait();
	fprintf(stderr, "# %.3f child %d (pid %d): opens on node %s\n", tu_now(), me,
			(int)getpid(), node);
	rc = cd_open(path, (unsigned)sh->ch[me].flags, node, pool);
	fprintf(stderr, "# %.3f child %d (pid %d): open returned %d\n", tu_now(), me,
			(int)getpid(), rc);
	__atomic_store_n(&sh->open_turn, me + 1, __ATOMIC_RELEASE);
	bad = cd_rc(C_OPEN, rc, path);
	if (rc < 0)
		return cd_fail(1, "%s open: %s: %s", role_name[sh->ch[me].role], mkv_strerror(rc),
				mkv_errormsg());
	if (bad)
		return 1;
	cd_phase(PH_IDLE);
	__atomic_store_n(&sh->ch[me].ready, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE))
		tu_sleep_us(200);
	return 0;
}

/* A child's end: close the pool; its exit status. */
static int
child_close(struct mkv_pool **pool, int bad, int status)
{
	cd_phase(PH_CLOSE);
	mkv_pool_close(pool);
	cd_phase(PH_NONE);
	if (sh->cfg.hosts)
		cd_emu_count();
	return bad ? status : 0;
}

/* ---- keys and values ---- */

size_t
cd_key(char *out, unsigned who, unsigned idx)
{
	int n = snprintf(out, 64, "w%u-%05u", who, idx);

	return n < 0 ? 0 : (size_t)n;
}

size_t
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

int
cd_rec_count(void)
{
	int n = __atomic_load_n(&sh->n_acked, __ATOMIC_ACQUIRE);

	return n < CD_MAXREC ? n : CD_MAXREC;
}

/* ---- pools ---- */

int
cd_open(const char *path, unsigned flags, const char *node, struct mkv_pool **pool)
{
	struct mkv_opts *opts = NULL;
	int rc;

	*pool = NULL;
	if ((rc = mkv_opts_new(&opts)) < 0)
		return rc;
	if (flags & MKV_CREATE) {
		if ((rc = mkv_opts_set_page_size(opts, CD_PAGE)) < 0 ||
		    (rc = mkv_opts_set_data_size(opts, sh->cfg.data_size)) < 0 ||
		    (rc = mkv_opts_set_watermarks(opts, sh->cfg.wm_low, sh->cfg.wm_high)) < 0 ||
		    (rc = mkv_opts_set_max_clients(opts, sh->cfg.hosts ? CD_HOST_CLIENTS :
				CD_CLIENTS)) < 0 ||
		    (sh->cfg.hosts && (rc = mkv_opts_set_max_nodes(opts, CD_HOST_NODES)) < 0) ||
		    (rc = mkv_opts_set_lease_period(opts, CD_PERIOD)) < 0 ||
		    (rc = mkv_opts_set_client_timeout(opts, sh->cfg.timeout_ms)) < 0 ||
		    (sh->cfg.hosts &&
		     (rc = mkv_opts_set_coherence(opts, MKV_NONCOHERENT)) < 0))
			goto out;
	}
	if ((rc = mkv_opts_set_node(opts, node)) < 0)
		goto out;
	rc = mkv_pool_open(path, flags, opts, pool);
out:
	mkv_opts_delete(&opts);
	return rc;
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

/* A buffer from mkv_alloc() for @p len bytes: nonzero (recorded) if it is not. */
static int
check_buf(const struct mkv_buf *b, size_t len)
{
	if (b->data == NULL || b->len < len)
		return cd_fail(12, "alloc(%zu) returned data %p len %zu", len, b->data, b->len);
	return 0;
}

/* After a failed publish: give the buffer back unless the publish consumed it. */
static int
abort_buf(struct mkv_pool *pool, struct mkv_buf *b, const char *key)
{
	if (b->data == NULL)
		return 0;
	cd_phase(PH_ABORT);
	return judge(C_ABORT, mkv_abort(pool, b), key);
}

/* A publish was acknowledged: record it; nonzero if it left the buffer. */
static int
acked(struct mkv_buf *b, const struct cd_pending *p)
{
	cd_rec_add((unsigned)me, p->idx);
	sh->ch[me].ok++;
	if (b != NULL && !tu_is_zero(b, sizeof(*b)))
		return cd_fail(13, "publish %s left the buffer", p->key);
	return 0;
}

int
writer(const char *path, const char *node, uint64_t seed)
{
	struct cd_child *c = &sh->ch[me];
	struct mkv_pool *pool;
	struct cd_pending pend[3];
	struct mkv_buf b;
	uint64_t rng = seed ^ (0x5157ULL * (uint64_t)(me + 1));
	double end = tu_now() + CD_CHILD_DEADLINE;
	unsigned idx = 0, wmax = sh->cfg.wmax, n, k, how;
	int rc = 0, bad = 0;

	if (child_open(path, node, &pool))
		return 10;
	while (idx < wmax && !cd_stopping() && !bad) {
		if (tu_now() > end)
			return cd_fail(11, "writer out of time at key %u", idx);
		how = (unsigned)tu_rand_range(&rng, 0, 3);
		n = how == 3 ? (unsigned)tu_rand_range(&rng, 2, 3) : 1;
		if (n > wmax - idx)
			n = wmax - idx;
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
			bad |= judge(C_PUT, rc, pend[0].key);
			if (rc == 0)
				bad |= acked(NULL, &pend[0]);
		} else if (how == 1) {
			size_t len = cd_vlen(pend[0].key, pend[0].klen);

			memset(&b, 0, sizeof(b));
			cd_phase(PH_ALLOC);
			rc = mkv_alloc(pool, len, &b);
			bad |= judge(C_ALLOC, rc, pend[0].key);
			if (rc == 0) {
				if (check_buf(&b, len))
					return 12;
				cd_phase(PH_FILL);
				tu_fill(b.data, len, pend[0].key, pend[0].klen);
				cd_phase(PH_PUBLISH);
				rc = mkv_publish(pool, pend[0].key, pend[0].klen, &b);
				bad |= judge(C_PUBLISH, rc, pend[0].key);
				if (rc == 0)
					bad |= acked(&b, &pend[0]);
				else if (rc != MKV_E_EXISTS)
					bad |= abort_buf(pool, &b, pend[0].key);
			}
		} else {
			for (k = 0; k < n; k++) {
				size_t len = cd_vlen(pend[k].key, pend[k].klen);

				memset(&b, 0, sizeof(b));
				cd_phase(PH_ALLOC);
				rc = mkv_alloc(pool, len, &b);
				bad |= judge(C_ALLOC, rc, pend[k].key);
				if (rc < 0)
					break;
				if (check_buf(&b, len))
					return 12;
				cd_phase(PH_FILL);
				tu_fill(b.data, len, pend[k].key, pend[k].klen);
				cd_phase(PH_ASYNC);
				memset(&pend[k].t, 0, sizeof(pend[k].t));
				rc = mkv_publish_async(pool, pend[k].key, pend[k].klen, &b, &pend[k].t);
				bad |= judge(C_ASYNC, rc, pend[k].key);
				if (rc < 0) {
					bad |= abort_buf(pool, &b, pend[k].key);
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
				bad |= judge(C_WAIT, rc, pend[k].key);
				if (rc == 0)
					bad |= acked(NULL, &pend[k]);
			}
		}
		if (rc == MKV_E_NOSPC)
			tu_sleep_ms(5);
		idx += n;
		cd_phase(PH_IDLE);
		tu_sleep_us((double)tu_rand_range(&rng, sh->cfg.pause_us[0], sh->cfg.pause_us[1]));
	}
	return child_close(&pool, bad, 15);
}

/* ---- deleters ---- */

/* A key to delete: at times (torture) one a reader holds a view of. */
static struct cd_rec *
deleter_pick(uint64_t *rng, int n)
{
	if (sh->cfg.torture && tu_rand_range(rng, 0, 2) == 0) {
		int r = (int)tu_rand_range(rng, 0, CD_MAXCH - 1);
		int h = __atomic_load_n(&sh->ch[r].held[tu_rand_range(rng, 0, CD_MAXVIEWS - 1)],
				__ATOMIC_ACQUIRE);

		if (sh->ch[r].role == R_READER && h > 0 && h <= n)
			return &sh->acked[h - 1];
	}
	return &sh->acked[tu_rand_range(rng, 0, (uint64_t)n - 1)];
}

int
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

	if (child_open(path, node, &pool))
		return 20;
	while (!cd_stopping() && !bad) {
		if (tu_now() > end)
			return cd_fail(21, "deleter out of time");
		n = cd_rec_count();
		if (n == 0) {
			tu_sleep_us(500);
			continue;
		}
		r = deleter_pick(&rng, n);
		zero = 0;
		if (!__atomic_load_n(&r->valid, __ATOMIC_ACQUIRE) ||
		    !__atomic_compare_exchange_n(&r->del, &zero, 1, 0, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST))
			continue;
		klen = cd_key(key, r->who, r->idx);
		cd_phase(PH_DEL);
		rc = mkv_del(pool, key, klen);
		bad |= judge(C_DEL, rc, key);
		/* NOTFOUND: the checker weighs it against the evictions */
		if (rc == 0 || rc == MKV_E_NOTFOUND)
			__atomic_store_n(&r->del, rc == 0 ? 2 : 3, __ATOMIC_SEQ_CST);
		c->ok += rc == 0;
		cd_phase(PH_IDLE);
		tu_sleep_us((double)tu_rand_range(&rng, sh->cfg.del_pause_us[0],
				sh->cfg.del_pause_us[1]));
	}
	return child_close(&pool, bad, 23);
}

/* ---- readers ---- */

/*
 * A key to read: mostly acknowledged ones (*rec: 1 + its record), in a
 * torture trial often one of the last 64 (older ones are mostly evicted
 * or deleted), else any key a writer tried (*rec 0).
 */
static size_t
reader_pick(uint64_t *rng, char *key, int *rec)
{
	int n = cd_rec_count(), w, tries;
	struct cd_rec *r;
	uint32_t next;

	*rec = 0;
	if (n > 0 && tu_rand_range(rng, 0, 9) < 7) {
		if (sh->cfg.torture && tu_rand_range(rng, 0, 1))
			*rec = n - 1 - (int)tu_rand_range(rng, 0, (uint64_t)(n < 64 ? n : 64) - 1);
		else
			*rec = (int)tu_rand_range(rng, 0, (uint64_t)n - 1);
		r = &sh->acked[*rec];
		if (__atomic_load_n(&r->valid, __ATOMIC_ACQUIRE)) {
			*rec += 1;
			return cd_key(key, r->who, r->idx);
		}
		*rec = 0;
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

/* Views a reader holds, and what happened while it held them. */
struct cd_hold {
	struct mkv_view v[CD_MAXVIEWS];
	char key[CD_MAXVIEWS][64];
	size_t klen[CD_MAXVIEWS];
	unsigned n;
	uint32_t kills, stops, own;   /* events when the last view was taken */
};

/* Check every view held; nonzero (recorded) if one changed. */
static int
hold_check(const struct cd_hold *h, const char *when)
{
	int bad = 0;

	for (unsigned i = 0; i < h->n; i++)
		if (h->v[i].data != NULL)
			bad |= cd_check_view(&h->v[i], h->key[i], h->klen[i], when);
	return bad;
}

/*
 * Hold the views a while: a few ms, or (torture, one time in three) for
 * up to 1.5 s, checking them every 50 ms, while the driver kills and
 * stops other processes, and this one.
 */
static int
hold(struct cd_hold *h, uint64_t *rng)
{
	struct cd_child *c = &sh->ch[me];
	double until;
	int bad = 0;

	h->kills = __atomic_load_n(&sh->kill_events, __ATOMIC_SEQ_CST);
	h->stops = __atomic_load_n(&sh->stop_events, __ATOMIC_SEQ_CST);
	h->own = __atomic_load_n(&c->stops, __ATOMIC_SEQ_CST);
	cd_phase(PH_HOLD);
	if (!sh->cfg.torture || tu_rand_range(rng, 0, 2) != 0) {
		tu_sleep_us((double)tu_rand_range(rng, 0, 30000));
		return 0;
	}
	c->long_holds++;
	until = tu_now() + (double)tu_rand_range(rng, 100, 1500) / 1000.0;
	while (tu_now() < until && !cd_stopping() && !bad) {
		tu_sleep_ms(50);
		bad |= hold_check(h, "while holding it");
	}
	return bad;
}

/*
 * Check the views once more and release them.  A release must return 0:
 * MKV_E_EXPIRED (the view may have changed) is never right on one kernel,
 * nor between hosts when no stop reaches the client timeout.
 * Counts the views that were held across kills or stops of other
 * processes, through a stop of this one, and those that outlived their key.
 */
static int
release_all(struct mkv_pool *pool, struct cd_hold *h)
{
	struct cd_child *c = &sh->ch[me];
	uint32_t kills = __atomic_load_n(&sh->kill_events, __ATOMIC_SEQ_CST) - h->kills;
	uint32_t own = __atomic_load_n(&c->stops, __ATOMIC_SEQ_CST) - h->own;
	uint32_t stops = __atomic_load_n(&sh->stop_events, __ATOMIC_SEQ_CST) - h->stops - own;
	int bad = 0, rc;

	for (unsigned i = 0; i < h->n; i++) {
		if (h->v[i].data == NULL)
			continue;
		bad |= cd_check_view(&h->v[i], h->key[i], h->klen[i], "before release");
		if (sh->cfg.torture) {
			cd_phase(PH_EXISTS);
			rc = mkv_exists(pool, h->key[i], h->klen[i]);
			bad |= judge(C_EXISTS, rc, h->key[i]);
			c->outlived += rc == 0;
		}
		cd_phase(PH_RELEASE);
		rc = mkv_release(pool, &h->v[i]);
		bad |= judge(C_RELEASE, rc, h->key[i]);
		if (rc == 0) {
			c->across_kill += kills > 0;
			c->across_stop += stops > 0;
			c->self_stop += own > 0;
		}
		__atomic_store_n(&c->held[i], 0, __ATOMIC_RELEASE);
	}
	return bad;
}

/* Get a few keys, check them, hold them, check again, release them. */
static int
get_hold_release(struct mkv_pool *pool, uint64_t *rng)
{
	struct cd_child *c = &sh->ch[me];
	struct cd_hold h;
	int rc, rec, bad = 0;

	h.n = (unsigned)tu_rand_range(rng, 1, CD_MAXVIEWS);
	for (unsigned i = 0; i < h.n; i++) {
		h.klen[i] = reader_pick(rng, h.key[i], &rec);
		memset(&h.v[i], 0, sizeof(h.v[i]));
		cd_phase(PH_GET);
		rc = mkv_get(pool, h.key[i], h.klen[i], &h.v[i]);
		bad |= judge(C_GET, rc, h.key[i]);
		if (rc == MKV_E_NOTFOUND) {
			c->misses++;
		} else if (rc < 0) {
			bad |= cd_fail(32, "get %s: %d (%s): %s", h.key[i], rc, mkv_strerror(rc),
					mkv_errormsg());
		} else {
			c->views++;
			bad |= cd_check_view(&h.v[i], h.key[i], h.klen[i], "at get");
			/* for the deleters: keys to delete under a reader */
			__atomic_store_n(&c->held[i], rec, __ATOMIC_RELEASE);
		}
	}
	bad |= hold(&h, rng);
	return bad | release_all(pool, &h);
}

/* A writer's keys in order: how many leading ones are there, or views of them. */
static int
prefix_or_batch(struct mkv_pool *pool, uint64_t *rng, int batch)
{
	struct cd_child *c = &sh->ch[me];
	struct mkv_key keys[32];
	struct mkv_view bv[32];
	char pbuf[32][64], what[64];
	size_t hits, found;
	unsigned i, w, nk;
	int rc, bad = 0;

	w = (unsigned)tu_rand_range(rng, 0, CD_MAXCH - 1);
	nk = (unsigned)tu_rand_range(rng, 1, 32);
	for (i = 0; i < nk; i++) {
		keys[i].data = pbuf[i];
		keys[i].len = cd_key(pbuf[i], w, i);
	}
	snprintf(what, sizeof(what), "(%u keys of writer %u)", nk, w);
	if (!batch) {
		cd_phase(PH_PREFIX);
		hits = (size_t)-1;
		rc = mkv_prefix_len(pool, keys, nk, &hits);
		bad |= judge(C_PREFIX, rc, what);
		if (rc < 0 || hits > nk)
			bad |= cd_fail(34, "prefix_len%s = %d (%s), hits %zu: %s", what, rc,
					mkv_strerror(rc), hits, mkv_errormsg());
		return bad;
	}
	cd_phase(PH_BATCH);
	found = 0;
	rc = mkv_get_batch(pool, keys, nk, MKV_BATCH_PREFIX, bv, &found);
	bad |= judge(C_BATCH, rc, what);
	if (rc < 0)
		return bad | cd_fail(35, "get_batch%s = %d (%s): %s", what, rc, mkv_strerror(rc),
				mkv_errormsg());
	for (i = 0; i < nk; i++) {
		if (bv[i].data == NULL)
			continue;
		c->views++;
		bad |= cd_check_view(&bv[i], pbuf[i], keys[i].len, "from get_batch");
		cd_phase(PH_RELEASE);
		bad |= judge(C_RELEASE, mkv_release(pool, &bv[i]), pbuf[i]);
	}
	return bad;
}

int
reader(const char *path, const char *node, uint64_t seed)
{
	struct mkv_pool *pool;
	uint64_t rng = seed ^ (0x7eadULL * (uint64_t)(me + 1));
	double end = tu_now() + CD_CHILD_DEADLINE;
	char key[64];
	size_t klen;
	unsigned op;
	int rc, rec, bad = 0;

	if (child_open(path, node, &pool))
		return 30;
	while (!cd_stopping() && !bad) {
		if (tu_now() > end)
			return cd_fail(31, "reader out of time");
		op = (unsigned)tu_rand_range(&rng, 0, 9);
		if (op < 6) {
			bad |= get_hold_release(pool, &rng);
		} else if (op < 8) {
			bad |= prefix_or_batch(pool, &rng, op == 7);
		} else {
			klen = reader_pick(&rng, key, &rec);
			cd_phase(PH_EXISTS);
			rc = mkv_exists(pool, key, klen);
			bad |= judge(C_EXISTS, rc, key);
			if (rc < 0 || rc > 1)
				bad |= cd_fail(36, "exists %s = %d (%s)", key, rc, mkv_strerror(rc));
		}
		cd_phase(PH_IDLE);
		tu_sleep_us((double)tu_rand_range(&rng, 0, 1500));
	}
	return child_close(&pool, bad, 37);
}

/* ---- evictors ---- */

/*
 * Evict to a seeded share of free pages every so often (a dry run on a
 * read-only handle), and check that the page counts add up at every
 * look, while the holder also evicts on its own when the pool is nearly
 * full.
 */
int
evictor(const char *path, const char *node, uint64_t seed)
{
	struct cd_child *c = &sh->ch[me];
	struct mkv_pool *pool;
	struct mkv_evict ev;
	struct mkv_stat st;
	uint64_t rng = seed ^ (0xe71cULL * (uint64_t)(me + 1));
	double end = tu_now() + CD_CHILD_DEADLINE;
	unsigned pct, dry = (c->flags & MKV_RDONLY) ? MKV_DRY_RUN : 0;
	int rc, bad = 0;

	if (child_open(path, node, &pool))
		return 40;
	while (!cd_stopping() && !bad) {
		if (tu_now() > end)
			return cd_fail(41, "evictor out of time");
		tu_sleep_ms((double)tu_rand_range(&rng, 20, 200));
		pct = (unsigned)tu_rand_range(&rng, 5, 40);
		cd_phase(PH_EVICT);
		rc = mkv_pool_evict(pool, pct, dry, &ev);
		bad |= judge(C_EVICT, rc, "");
		if (rc == 0 && !dry) {
			c->ok++;
			c->evicted += ev.keys;
		}
		cd_phase(PH_STAT);
		rc = mkv_pool_stat(pool, &st);
		bad |= judge(C_STAT, rc, "");
		if (rc == 0)
			bad |= check_pages(&st, "while evicting");
		cd_phase(PH_IDLE);
	}
	return child_close(&pool, bad, 43);
}
