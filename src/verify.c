/* SPDX-License-Identifier: MIT */
/*
 * verify.c -- check the registry against itself and against the page
 * table, in one registry snapshot.
 *
 * Problems are what must never be: a value whose pages leave the arena or
 * overlap another's, a used page the table calls free or granted, a pages
 * index that disagrees with the entries, a quarantine record over a live
 * value, and (MKV_VERIFY_DEEP) a value whose bytes no longer match the
 * checksum recorded when it was published.  Leaks (pages marked taken that nothing owns) are counted apart:
 * a crash can leave them, and the next lease holder reclaims them.  The
 * page table changes under a running holder, so only what no transition
 * passes through counts as a problem.
 *
 * LMDB trusts its file, so the snapshot's pages are walked first
 * (regcheck.c): a registry damaged since it was opened is reported as the
 * one problem, and nothing is read through LMDB; every key and value
 * LMDB returns is checked to lie inside its map before it is read.
 */
#include "config.h"

#include <endian.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void problem(struct mkv_verify *v, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));

static void
problem(struct mkv_verify *v, const char *fmt, ...)
{
	va_list ap;

	if (v->problems++ == 0) {
		va_start(ap, fmt);
		vsnprintf(v->first_problem, sizeof(v->first_problem), fmt, ap);
		va_end(ap);
	}
}

/* What the scans of one verify share. */
struct verifying {
	struct mkv_pool *p;
	struct mkv_txn *txn;
	uint8_t *mark;            /* a byte per page: the kind of owner found */
	bool deep;
	struct mkv_verify *v;
	uint64_t total, last_ns;  /* for the progress callback */
};

static void
check_entry(struct verifying *vf, const void *key, size_t klen, const struct mkv_entry *ep,
		size_t size)
{
	struct mkv_pool *p = vf->p;
	struct mkv_verify *v = vf->v;
	uint8_t back[MKV_KEY_MAX];
	size_t blen;
	struct mkv_entry e;

	v->entries++;
	if (!ep) {
		problem(v, "entry %llu has %zu bytes", (unsigned long long)v->entries, size);
		return;
	}
	e = *ep;
	if (e.version != MKV_ENTRY_VERSION || e.npages == 0 || e.page >= p->nr_pages ||
	    e.npages > p->nr_pages - e.page || e.length > e.npages * p->page_size ||
	    mkv_pool_pages_for(p, e.length) != e.npages) {
		problem(v, "entry at page %llu is malformed or leaves the arena",
				(unsigned long long)e.page);
		return;
	}
	if (mkv_reg_page_key(p, vf->txn, e.page, back, &blen) != 0 || blen != klen ||
	    memcmp(back, key, klen) != 0)
		problem(v, "pages index disagrees with the entry at page %llu",
				(unsigned long long)e.page);
	for (uint64_t i = e.page; i < e.page + e.npages; i++) {
		unsigned st = MKV_PG_STATE(mkv_pages_load(p, i));

		if (vf->mark[i])
			problem(v, "page %llu belongs to two values", (unsigned long long)i);
		vf->mark[i] = MKV_PG_USED;
		if (st == MKV_PG_FREE || st == MKV_PG_GRANTED)
			problem(v, "page %llu holds a value but is marked %s", (unsigned long long)i,
					st == MKV_PG_FREE ? "free" : "granted");
	}
	v->pages_used += e.npages;
	if (vf->deep && e.checksum) {
		v->checksums_checked++;
		mkv_share_inval(p, mkv_pool_page_addr(p, e.page), e.length);
		if (mkv_hash_checksum(mkv_pool_page_addr(p, e.page), e.length) != e.checksum) {
			v->checksums_bad++;
			problem(v, "value at page %llu does not match its checksum",
					(unsigned long long)e.page);
		}
	}
}

static int
verify_entry(void *arg, const void *key, size_t klen, const struct mkv_entry *e, size_t size)
{
	struct verifying *vf = arg;

	check_entry(vf, key, klen, e, size);
	mkv_admin_progress(vf->p, vf->v->entries, vf->total, &vf->last_ns);
	return 0;
}

static int
check_freed(void *arg, const struct mkv_extent *e, size_t size)
{
	struct verifying *vf = arg;
	struct mkv_pool *p = vf->p;
	struct mkv_verify *v = vf->v;

	if (!e) {
		problem(v, "quarantine record of %zu bytes", size);
		return 0;
	}
	if (e->npages == 0 || e->page >= p->nr_pages || e->npages > p->nr_pages - e->page) {
		problem(v, "quarantine record leaves the arena");
		return 0;
	}
	for (uint64_t i = e->page; i < e->page + e->npages; i++) {
		if (vf->mark[i])
			problem(v, "quarantined page %llu also belongs to a value",
					(unsigned long long)i);
		vf->mark[i] = MKV_PG_QUARANTINED;
	}
	v->pages_quarantined += e->npages;
	return 0;
}

static void
count_leaks(struct mkv_pool *p, const uint8_t *mark, struct mkv_verify *v)
{
	for (uint64_t i = 0; i < p->nr_pages; i++) {
		uint64_t w = mkv_pages_load(p, i), owner;

		if (mark[i] || w == MKV_PG_FREE)
			continue;
		if (MKV_PG_STATE(w) == MKV_PG_GRANTED && MKV_PG_SLOT(w) < p->sb->max_clients) {
			owner = mkv_share_load(p, &p->slots[MKV_PG_SLOT(w)].owner);
			if (MKV_SLOT_INC(owner) == MKV_PG_INC(w) &&
			    mkv_client_claimed(p, MKV_PG_SLOT(w), owner) &&
			    !mkv_client_dead(p, MKV_PG_SLOT(w), owner))
				continue;
		}
		v->pages_leaked++;
	}
}

/*
 * Every holder stores its generation in the registry, and generations only
 * grow: a registry ahead of the lease record means super was damaged or
 * restored (the next holder repairs it, see lease.c).
 */
static void
check_generation(struct mkv_pool *p, struct mkv_txn *txn, struct mkv_verify *v)
{
	uint64_t reg, lease = mkv_share_load(p, &p->state->lease.generation);

	if (mkv_reg_meta_get(p, txn, "generation", &reg))
		problem(v, "%s", mkv_errormsg());
	else if (reg > lease)
		problem(v, "the registry's lease generation %llu is above the lease record's %llu",
				(unsigned long long)reg, (unsigned long long)lease);
}

/*
 * The checks through LMDB, in the snapshot of txn, once its pages were
 * walked: every entry against the pages index and the page table, every
 * quarantine record, the counts, the stored generation.
 */
static int
check_registry(struct verifying *vf)
{
	struct mkv_pool *p = vf->p;
	uint64_t npages;
	int rc;

	if ((rc = mkv_reg_count(p, vf->txn, MKV_TABLE_ENTRIES, &vf->total)) ||
	    (rc = mkv_reg_entries_scan(p, vf->txn, verify_entry, vf)))
		return rc;
	mkv_admin_progress(p, vf->v->entries, vf->v->entries, &vf->last_ns);
	if ((rc = mkv_reg_freed_scan(p, vf->txn, check_freed, vf)) ||
	    (rc = mkv_reg_count(p, vf->txn, MKV_TABLE_PAGES, &npages)))
		return rc;
	if (npages != vf->v->entries)
		problem(vf->v, "pages index has %llu records for %llu entries",
				(unsigned long long)npages, (unsigned long long)vf->v->entries);
	check_generation(p, vf->txn, vf->v);
	return 0;
}

MKV_EXPORT int
mkv_pool_verify(struct mkv_pool *pool, unsigned flags, struct mkv_verify *report)
{
	struct verifying vf = { .p = pool, .deep = flags & MKV_VERIFY_DEEP, .v = report };
	uint64_t epoch;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_pool_verify")))
		return rc;
	if (!report || (flags & ~MKV_VERIFY_VALID))
		return mkv_err(MKV_E_INVAL, "mkv_pool_verify: NULL argument or unknown flags");
	memset(report, 0, sizeof(*report));
	if (!(vf.mark = calloc(pool->nr_pages, 1)))
		return mkv_err(MKV_E_NOMEM, "mkv_pool_verify: out of memory");
	/* Pinned like a reader, so the values read stay as they are. */
	if (!(epoch = mkv_pin_enter(pool, 1))) {
		free(vf.mark);
		return MKV_E_NOMEM;
	}
	mkv_pages_fresh(pool);
	if ((rc = mkv_reg_rtxn(pool, &vf.txn)) == 0) {
		/* LMDB trusts its file: every page of the snapshot first (regcheck.c) */
		if ((rc = mkv_reg_walk(pool, vf.txn)) == 0)
			rc = check_registry(&vf);
		mkv_reg_rtxn_done(pool, vf.txn);
	}
	mkv_pin_leave(pool, epoch, 1);
	if (rc == 0)
		count_leaks(pool, vf.mark, report);
	free(vf.mark);
	/* damage seen through LMDB: the checks that needed it could not run */
	if (rc == MKV_E_CORRUPT) {
		problem(report, "%s", mkv_errormsg());
		return mkv_err(MKV_E_CORRUPT, "%s", report->first_problem);
	}
	if (rc)
		return rc;
	if (report->problems)
		return mkv_err(MKV_E_CORRUPT, "pool %s: %llu problems; first: %s", pool->path,
				(unsigned long long)report->problems, report->first_problem);
	return 0;
}
