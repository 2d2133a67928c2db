/* SPDX-License-Identifier: MIT */
/*
 * regwlog.c -- the registry pages each commit wrote (non-coherent pools).
 *
 * A reader that moves to a newer snapshot must first drop from its host's
 * caches every page written since the last snapshot it made fresh
 * (marukv(7), REGISTRY SNAPSHOTS BETWEEN HOSTS).  LMDB does not say which
 * pages a commit wrote, but it writes only pages it allocated in that txn:
 * pages on the free list of the snapshot before, or past that snapshot's
 * last page.  A page it wrote that the new snapshot reaches is on no free
 * list of that snapshot.  So after each commit the holder compares the
 * free list of the new snapshot with that of the one before (read through
 * LMDB's cursor on its free database, dbi 0, as mdb_stat -f does) and logs
 * the pages that left it, and those past the old last page, as ranges in
 * super (struct mkv_wlog).  A page the commit wrote and freed again stays
 * on the free list unlogged: no snapshot reaches it until a later commit
 * writes it again, and logs it then.
 *
 * A reader at snapshot `from` moving to `to` drops the pages of records
 * from + 1 to `to`; if any of them is missing, overwritten, says its
 * pages are not known, or is damaged (more ranges than a record holds, a
 * range past the newest snapshot's last page), it drops the whole registry
 * in use as before.
 *
 * Format knowledge, of LMDB 0.9.24 (check_regcheck compares the log with
 * the pages whose bytes each commit changed): a free-list record is an
 * MDB_IDL, a count of page numbers followed by them, each a size_t.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "registry.h"

static int
cmp_pgno(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
collect(void *arg, size_t n, const char *pgnos)
{
	struct mkv_registry *r = arg;

	if (r->wl_nnext + n > r->wl_capnext) {
		size_t cap = (r->wl_nnext + n) * 2;
		uint64_t *a = realloc(r->wl_next, cap * sizeof(*a));

		if (!a)
			return MKV_E_NOMEM;
		r->wl_next = a;
		r->wl_capnext = cap;
	}
	for (size_t i = 0; i < n; i++) {
		size_t pg;

		memcpy(&pg, pgnos + i * sizeof(pg), sizeof(pg));
		r->wl_next[r->wl_nnext++] = pg;
	}
	return 0;
}

/* The pages on the free list of snapshot t, as LMDB lists them, into r->wl_next. */
static int
free_list(struct mkv_pool *p, MDB_txn *t)
{
	p->reg->wl_nnext = 0;
	return mkv_reg_free_each(p, t, collect, p->reg);
}

struct ranges {
	uint32_t n;
	uint32_t range[MKV_WLOG_RANGES][2];
};

/* Page pg, at or after every page added before; false once there are too many ranges. */
static bool
ranges_add(struct ranges *s, uint64_t pg, uint64_t count)
{
	if (s->n == MKV_WLOG_ALL)
		return false;
	if (pg + count > UINT32_MAX)
		goto all;
	if (s->n && s->range[s->n - 1][0] + (uint64_t)s->range[s->n - 1][1] == pg) {
		s->range[s->n - 1][1] += (uint32_t)count;
		return true;
	}
	if (s->n == MKV_WLOG_RANGES)
		goto all;
	s->range[s->n][0] = (uint32_t)pg;
	s->range[s->n][1] = (uint32_t)count;
	s->n++;
	return true;
all:
	s->n = MKV_WLOG_ALL;
	return false;
}

/*
 * What left the old free list, then what lies past the old last page:
 * the new list marked in a bitmap of the pages up to last (a list is a
 * few hundred pages, a commit takes a few of them), the pages of the old
 * one not marked sorted.  False if out of memory.
 */
static bool
written(struct mkv_registry *r, uint64_t last, struct ranges *s)
{
	size_t words = last / 64 + 1, nleft = 0;

	if (words > r->wl_nbits) {
		uint64_t *b = realloc(r->wl_bits, words * sizeof(*b));

		if (!b)
			return false;
		memset(b + r->wl_nbits, 0, (words - r->wl_nbits) * sizeof(*b));
		r->wl_bits = b;
		r->wl_nbits = words;
	}
	if (r->wl_capleft < r->wl_nfree) {
		uint64_t *a = realloc(r->wl_left, r->wl_nfree * sizeof(*a));

		if (!a)
			return false;
		r->wl_left = a;
		r->wl_capleft = r->wl_nfree;
	}
	for (size_t i = 0; i < r->wl_nnext; i++)
		if (r->wl_next[i] <= last)
			r->wl_bits[r->wl_next[i] / 64] |= 1ULL << (r->wl_next[i] % 64);
	for (size_t i = 0; i < r->wl_nfree; i++) {
		uint64_t pg = r->wl_free[i];

		if (pg > last || !(r->wl_bits[pg / 64] & (1ULL << (pg % 64))))
			r->wl_left[nleft++] = pg;
	}
	for (size_t i = 0; i < r->wl_nnext; i++)
		if (r->wl_next[i] <= last)
			r->wl_bits[r->wl_next[i] / 64] = 0;
	if (nleft > 1)
		qsort(r->wl_left, nleft, sizeof(*r->wl_left), cmp_pgno);
	for (size_t i = 0; i < nleft; i++)
		if (!ranges_add(s, r->wl_left[i], 1))
			return true;
	if (last > r->wl_last)
		ranges_add(s, r->wl_last + 1, last - r->wl_last);
	return true;
}

/* The new free list becomes the old one of the next commit. */
static void
lists_swap(struct mkv_registry *r)
{
	uint64_t *a = r->wl_free;
	size_t cap = r->wl_capfree;

	r->wl_free = r->wl_next;
	r->wl_capfree = r->wl_capnext;
	r->wl_nfree = r->wl_nnext;
	r->wl_next = a;
	r->wl_capnext = cap;
}

/*
 * The holder, after a commit that made snapshot id (super's flock held),
 * given a read txn t at it (NULL if none could begin): its pages into the
 * log.  A failure logs them as not known.
 */
void
mkv_reg_wlog_commit(struct mkv_pool *p, uint64_t id, MDB_txn *t)
{
	struct mkv_registry *r = p->reg;
	struct mkv_wlog *w = &p->wlog[id % MKV_WLOG_RECS];
	struct ranges s = { .n = MKV_WLOG_ALL };
	MDB_envinfo info;
	bool known = false;

	if (t) {
		mdb_env_info(r->env, &info);
		known = mdb_txn_id(t) == id && !free_list(p, t);
	}
	if (known && r->wl_id && r->wl_id + 1 == id) {
		s.n = 0;
		if (!written(r, info.me_last_pgno, &s))
			s.n = MKV_WLOG_ALL;
	}
	/* the write-backs of the ranges and of the id are named: t/check_sites stops there */
	mkv_share_store(p, &w->txn, 0);
	w->n = s.n;
	if (s.n != MKV_WLOG_ALL)
		memcpy(w->range, s.range, s.n * sizeof(s.range[0]));
	mkv_share_wb_at(p, w, offsetof(struct mkv_wlog, range) +
			(s.n == MKV_WLOG_ALL ? 0 : s.n * sizeof(s.range[0])),
			MKV_SITE_NAMED(wlog_ranges));
	__atomic_store_n(&w->txn, id, __ATOMIC_SEQ_CST);
	mkv_share_wb_at(p, &w->txn, sizeof(w->txn), MKV_SITE_NAMED(wlog_publish));
	if (!known) {
		r->wl_id = 0;
		return;
	}
	lists_swap(r);
	r->wl_id = id;
	r->wl_last = info.me_last_pgno;
}

/*
 * A reader whose pages were fresh at snapshot `from`, before it reads
 * snapshot `to` (whose metas it made fresh): drops the pages the commits
 * between wrote, up to page last; false, having dropped nothing it can
 * count on, if the log does not hold them all.
 */
bool
mkv_reg_wlog_fresh(struct mkv_pool *p, uint64_t from, uint64_t to, uint64_t last)
{
	struct ranges s;

	if (!from || to <= from || to - from > MKV_WLOG_RECS)
		return false;
	for (uint64_t id = from + 1; id <= to; id++) {
		struct mkv_wlog *w = &p->wlog[id % MKV_WLOG_RECS];

		mkv_share_inval(p, w, MKV_CACHELINE);
		s.n = __atomic_load_n(&w->n, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&w->txn, __ATOMIC_ACQUIRE) != id || s.n > MKV_WLOG_RANGES)
			return false;
		mkv_share_inval(p, w->range, s.n * sizeof(s.range[0]));
		memcpy(s.range, w->range, s.n * sizeof(s.range[0]));
		if (mkv_share_load(p, &w->txn) != id)
			return false;
		for (uint32_t i = 0; i < s.n; i++) {
			uint64_t pg = s.range[i][0], end = pg + s.range[i][1];

			/*
			 * The holder logs pages of the new snapshot only, none
			 * past its last page, which is at most the newest's: a
			 * range past that is damage, and the record's other
			 * ranges are no more to be trusted than it.
			 */
			if (end > last + 1)
				return false;
			if (pg < end)
				mkv_share_inval(p, p->reg->shadow + pg * p->reg->psize,
						(end - pg) * p->reg->psize);
		}
	}
	return true;
}

void
mkv_reg_wlog_fini(struct mkv_registry *r)
{
	free(r->wl_free);
	free(r->wl_next);
	free(r->wl_left);
	free(r->wl_bits);
	r->wl_free = r->wl_next = r->wl_left = r->wl_bits = NULL;
	r->wl_nfree = r->wl_nnext = r->wl_capfree = r->wl_capnext = r->wl_capleft = 0;
	r->wl_nbits = 0;
	r->wl_id = 0;
}
