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

static void
check_entry(struct mkv_pool *p, MDB_txn *txn, const MDB_val *k, const MDB_val *d,
		uint8_t *mark, bool deep, struct mkv_verify *v)
{
	uint64_t be;
	MDB_val pk = { sizeof(be), &be }, back;
	struct mkv_entry e;

	v->entries++;
	if (d->mv_size != sizeof(e)) {
		problem(v, "entry %llu has %zu bytes", (unsigned long long)v->entries, d->mv_size);
		return;
	}
	memcpy(&e, d->mv_data, sizeof(e));
	if (e.version != MKV_ENTRY_VERSION || e.npages == 0 || e.page >= p->nr_pages ||
	    e.npages > p->nr_pages - e.page || e.length > e.npages * p->page_size ||
	    mkv_pages_for(p, e.length) != e.npages) {
		problem(v, "entry at page %llu is malformed or leaves the arena",
				(unsigned long long)e.page);
		return;
	}
	be = htobe64(e.page);
	if (mdb_get(txn, p->reg.pages, &pk, &back) != 0 ||
	    mkv_reg_val(p, txn, &back, "a pages record") || back.mv_size != k->mv_size ||
	    memcmp(back.mv_data, k->mv_data, k->mv_size) != 0)
		problem(v, "pages index disagrees with the entry at page %llu",
				(unsigned long long)e.page);
	for (uint64_t i = e.page; i < e.page + e.npages; i++) {
		unsigned st = MKV_PG_STATE(mkv_pt_load(p, i));

		if (mark[i])
			problem(v, "page %llu belongs to two values", (unsigned long long)i);
		mark[i] = MKV_PG_USED;
		if (st == MKV_PG_FREE || st == MKV_PG_GRANTED)
			problem(v, "page %llu holds a value but is marked %s", (unsigned long long)i,
					st == MKV_PG_FREE ? "free" : "granted");
	}
	v->pages_used += e.npages;
	if (deep && e.checksum) {
		v->checksums_checked++;
		if (mkv_checksum(mkv_page_addr(p, e.page), e.length) != e.checksum) {
			v->checksums_bad++;
			problem(v, "value at page %llu does not match its checksum",
					(unsigned long long)e.page);
		}
	}
}

static void
check_freed(struct mkv_pool *p, const MDB_val *d, uint8_t *mark, struct mkv_verify *v)
{
	for (size_t j = 0; j < d->mv_size / sizeof(struct mkv_extent); j++) {
		struct mkv_extent e;

		memcpy(&e, (const char *)d->mv_data + j * sizeof(e), sizeof(e));
		if (e.npages == 0 || e.page >= p->nr_pages || e.npages > p->nr_pages - e.page) {
			problem(v, "quarantine record leaves the arena");
			continue;
		}
		for (uint64_t i = e.page; i < e.page + e.npages; i++) {
			if (mark[i])
				problem(v, "quarantined page %llu also belongs to a value",
						(unsigned long long)i);
			mark[i] = MKV_PG_QUARANTINED;
		}
		v->pages_quarantined += e.npages;
	}
	if (d->mv_size % sizeof(struct mkv_extent))
		problem(v, "quarantine record of %zu bytes", d->mv_size);
}

static void
count_leaks(struct mkv_pool *p, const uint8_t *mark, struct mkv_verify *v)
{
	for (uint64_t i = 0; i < p->nr_pages; i++) {
		uint64_t w = mkv_pt_load(p, i), owner;

		if (mark[i] || w == MKV_PG_FREE)
			continue;
		if (MKV_PG_STATE(w) == MKV_PG_GRANTED && MKV_PG_SLOT(w) < p->sb->max_clients) {
			owner = __atomic_load_n(&p->slots[MKV_PG_SLOT(w)].owner, __ATOMIC_SEQ_CST);
			if (MKV_SLOT_PID(owner) && MKV_SLOT_INC(owner) == MKV_PG_INC(w) &&
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
check_generation(struct mkv_pool *p, MDB_txn *txn, struct mkv_verify *v)
{
	uint64_t reg, lease = __atomic_load_n(&p->state->lease.generation, __ATOMIC_SEQ_CST);

	if (mkv_reg_meta_get(p, txn, "generation", &reg))
		problem(v, "%s", mkv_errormsg());
	else if (reg > lease)
		problem(v, "the registry's lease generation %llu is above the lease record's %llu",
				(unsigned long long)reg, (unsigned long long)lease);
}

MKV_EXPORT int
mkv_pool_verify(struct mkv_pool *pool, unsigned flags, struct mkv_verify *report)
{
	MDB_cursor *c = NULL;
	MDB_txn *txn;
	MDB_stat ps;
	MDB_val k, d;
	uint64_t epoch, last = 0;
	uint8_t *mark;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_pool_verify")))
		return rc;
	if (!report || (flags & ~MKV_VERIFY_VALID))
		return mkv_err(MKV_E_INVAL, "mkv_pool_verify: NULL argument or unknown flags");
	memset(report, 0, sizeof(*report));
	if (!(mark = calloc(pool->nr_pages, 1)))
		return mkv_err(MKV_E_NOMEM, "mkv_pool_verify: out of memory");
	/* Pinned like a reader, so the values read stay as they are. */
	if (!(epoch = mkv_epoch_enter(pool, 1))) {
		free(mark);
		return MKV_E_NOMEM;
	}
	if ((rc = mkv_reg_rtxn(pool, &txn))) {
		mkv_epoch_leave(pool, epoch, 1);
		free(mark);
		return rc;
	}
	/* LMDB trusts its file: every page of the snapshot first (regcheck.c) */
	if ((rc = mkv_reg_walk(pool, txn))) {
		if (rc == MKV_E_CORRUPT)
			problem(report, "%s", mkv_errormsg());
		goto out;
	}
	if ((rc = mdb_stat(txn, pool->reg.entries, &ps)) ||
	    (rc = mdb_cursor_open(txn, pool->reg.entries, &c)))
		goto lmdb;
	while ((rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) == 0) {
		if (mkv_reg_val(pool, txn, &k, "a key") || mkv_reg_val(pool, txn, &d, "an entry")) {
			problem(report, "%s", mkv_errormsg());
			mdb_cursor_close(c);
			goto out;
		}
		if (mkv_reg_is_table(&k))
			continue;
		check_entry(pool, txn, &k, &d, mark, flags & MKV_VERIFY_DEEP, report);
		mkv_progress(pool, report->entries, ps.ms_entries - MKV_TABLES, &last);
	}
	mkv_progress(pool, report->entries, report->entries, &last);
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND || (rc = mdb_cursor_open(txn, pool->reg.freed, &c)))
		goto lmdb;
	while ((rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) == 0) {
		if (mkv_reg_val(pool, txn, &d, "a quarantine record")) {
			problem(report, "%s", mkv_errormsg());
			mdb_cursor_close(c);
			goto out;
		}
		check_freed(pool, &d, mark, report);
	}
	mdb_cursor_close(c);
	if (rc != MDB_NOTFOUND || (rc = mdb_stat(txn, pool->reg.pages, &ps)))
		goto lmdb;
	if (ps.ms_entries != report->entries)
		problem(report, "pages index has %zu records for %llu entries", ps.ms_entries,
				(unsigned long long)report->entries);
	check_generation(pool, txn, report);
	mkv_reg_rtxn_done(pool, txn);
	mkv_epoch_leave(pool, epoch, 1);
	count_leaks(pool, mark, report);
	free(mark);
	if (report->problems)
		return mkv_err(MKV_E_CORRUPT, "pool %s: %llu problems; first: %s", pool->path,
				(unsigned long long)report->problems, report->first_problem);
	return 0;
lmdb:
	mkv_reg_rtxn_done(pool, txn);
	mkv_epoch_leave(pool, epoch, 1);
	free(mark);
	return mkv_err_mdb(rc, "mkv_pool_verify");
out:
	mkv_reg_rtxn_done(pool, txn);
	mkv_epoch_leave(pool, epoch, 1);
	free(mark);
	/* the registry is damaged: the checks through LMDB cannot run */
	if (report->problems)
		return mkv_err(MKV_E_CORRUPT, "%s", report->first_problem);
	return rc;
}
