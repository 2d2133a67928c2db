/* SPDX-License-Identifier: MIT */
/*
 * crashproc.c -- the children of a crash trial (writers, deleters,
 * readers) and the shared state and failure records they and the driver
 * use; see t/crashdrv.c.
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

#include "crashdrv.h"

const char *const role_name[] = { "writer", "deleter", "reader" };
const char *const phase_name[PH_COUNT] = {
	"none", "open", "idle", "put", "alloc", "fill", "publish", "publish_async", "wait",
	"abort", "del", "get", "hold", "release", "prefix_len", "get_batch", "exists", "close",
};
const int writer_phases[] = { PH_PUT, PH_ALLOC, PH_FILL, PH_PUBLISH, PH_ASYNC, PH_WAIT };
const size_t n_writer_phases = sizeof(writer_phases) / sizeof(writer_phases[0]);
const int deleter_phases[] = { PH_DEL };
const size_t n_deleter_phases = sizeof(deleter_phases) / sizeof(deleter_phases[0]);
const int reader_phases[] = { PH_GET, PH_HOLD, PH_RELEASE, PH_PREFIX, PH_BATCH };
const size_t n_reader_phases = sizeof(reader_phases) / sizeof(reader_phases[0]);

struct cd_sh *sh;
int me = -1;
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

int
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

int
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

