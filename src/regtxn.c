/* SPDX-License-Identifier: MIT */
/*
 * regtxn.c -- the registry's transactions, and the room they have; LMDB's
 * errors translated, and what LMDB returns checked before it is read.
 *
 * Writers (the lease holder) take flock() of super before LMDB's write
 * mutex, so that every wait is bounded.  Read transactions are reused:
 * reset after use and renewed for the next lookup, one kept ready for a
 * lock-free exchange and a few more in a cache.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include "registry.h"

/* LMDB's positive errno values and MDB_* codes, translated. */
int
mkv_reg_err(int rc, const char *what)
{
	int code;

	switch (rc) {
	case MDB_NOTFOUND:
		code = MKV_E_NOTFOUND;
		break;
	case MDB_KEYEXIST:
		code = MKV_E_EXISTS;
		break;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
	case MDB_PAGE_FULL:
		code = MKV_E_NOSPC;
		break;
	case MDB_READERS_FULL:
		code = MKV_E_USERS;
		break;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case MDB_PANIC:
		code = MKV_E_CORRUPT;
		break;
	case MDB_VERSION_MISMATCH:
		code = MKV_E_VERSION;
		break;
	case MDB_BAD_VALSIZE:
		code = MKV_E_INVAL;
		break;
	default:
		code = rc > 0 ? -rc : MKV_E_INTERNAL;
		break;
	}
	return mkv_err(code, "%s: %s", what, mdb_strerror(rc));
}

/*
 * Whether a key or value LMDB returned lies inside its map, checked before
 * the library reads it.  A write txn's own changes live in pages LMDB
 * allocated outside the map: a write txn is one whose id is past the last
 * committed txn's.
 */
int
mkv_reg_val(struct mkv_pool *p, MDB_txn *txn, const MDB_val *v, const char *what)
{
	uintptr_t a = (uintptr_t)v->mv_data, lo = (uintptr_t)p->reg->map;

	if (a >= lo && v->mv_size <= p->reg->mapsize && a - lo <= p->reg->mapsize - v->mv_size)
		return 0;
	if (mdb_txn_id(txn) > mkv_reg_last_txn(p))
		return 0;
	return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb: LMDB gave %s outside its map",
			p->path, what);
}

/*
 * Non-coherent memory (marukv(7), NON-COHERENT MEMORY).  LMDB reads its
 * pages through this host's caches, where lines of pages another host's
 * holder has written since may be stale.  Before a txn picks its snapshot,
 * the metas are dropped; once it has, if that snapshot is not the last one
 * made fresh, every page in use is.  Through the registry's map of our own
 * (p->reg->shadow): lines are cached by physical address, so dropping them
 * there drops them under LMDB's map too.
 */
static uint64_t
meta_txnid(const struct mkv_pool *p, unsigned i)
{
	return __atomic_load_n((const uint64_t *)(p->reg->shadow + i * p->reg->psize +
			MKV_REG_META_TXNID), __ATOMIC_ACQUIRE);
}

/* The newer meta's txn id, as this host's caches hold it. */
uint64_t
mkv_reg_newest_meta(const struct mkv_pool *p)
{
	uint64_t a = meta_txnid(p, 0), b = meta_txnid(p, 1);

	return a > b ? a : b;
}

void
mkv_reg_fresh_metas(struct mkv_pool *p)
{
	uint64_t newest, seen;
	unsigned next;

	if (!p->reg->shadow)
		return;
	/*
	 * LMDB writes the metas in turn, meta (id & 1) for txn id, and a
	 * meta's id last.  Once both were invalidated whole at newest id
	 * `seen`, the next commit, and any after it, shows first in the line
	 * of meta ((seen + 1) & 1) holding its id: while that is older, the
	 * metas are as they were.
	 */
	seen = __atomic_load_n(&p->reg->metas_seen, __ATOMIC_ACQUIRE);
	next = (unsigned)((seen + 1) & 1);
	if (seen && p->reg->lock_txnid) {
		mkv_share_inval(p, p->reg->shadow + next * p->reg->psize + MKV_REG_META_TXNID,
				sizeof(uint64_t));
		if (meta_txnid(p, next) <= seen)
			goto lock;
	}
	{
		const void *metas[2] = { p->reg->shadow, p->reg->shadow + p->reg->psize };

		mkv_share_inval_n(p, metas, 2, MKV_REG_META_BYTES);
		seen = mkv_reg_newest_meta(p);
		__atomic_store_n(&p->reg->metas_seen, seen, __ATOMIC_RELEASE);
	}
lock:
	/*
	 * The newest meta's txn id into this host's lock file, where the next
	 * read txn takes it from: never backwards (a writer on this host may
	 * have put a newer one there since).
	 */
	if (!p->reg->lock_txnid)
		return;  /* opening: LMDB reads the metas itself */
	newest = seen;
	seen = __atomic_load_n(p->reg->lock_txnid, __ATOMIC_ACQUIRE);
	while (seen < newest && !__atomic_compare_exchange_n(p->reg->lock_txnid, &seen, newest,
			false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		;
}

void
mkv_reg_fresh_pages(struct mkv_pool *p, uint64_t last_pgno)
{
	uint64_t n = p->reg->shadow_size / p->reg->psize;

	mkv_share_inval(p, p->reg->shadow, (last_pgno < n ? last_pgno + 1 : n) * p->reg->psize);
}

/*
 * Before snapshot id is read: the pages written since the last snapshot
 * made fresh, from the holder's log of them (regwlog.c), or else every page
 * in use.
 */
static void
fresh_to(struct mkv_pool *p, uint64_t id)
{
	MDB_envinfo info;
	uint64_t from, n;

	if (!p->reg->shadow)
		return;
	from = __atomic_load_n(&p->reg->fresh_txn, __ATOMIC_ACQUIRE);
	if (from == id)
		return;
	/* the newest meta's last page: at least the snapshot's */
	mdb_env_info(p->reg->env, &info);
	n = p->reg->shadow_size / p->reg->psize;
	if (from < id && mkv_reg_wlog_fresh(p, from, id, info.me_last_pgno < n ? info.me_last_pgno : n - 1)) {
		__atomic_add_fetch(&p->reg->fresh_logged, 1, __ATOMIC_RELAXED);
	} else {
		mkv_reg_fresh_pages(p, info.me_last_pgno);
		__atomic_add_fetch(&p->reg->fresh_whole, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&p->reg->fresh_txn, id, __ATOMIC_RELEASE);
}

/*
 * A registry write txn, for the lease holder.  Only a holder writes, but a
 * holder that was stopped inside a txn keeps LMDB's write mutex, and a
 * successor would block on it for as long as the stop lasts.  So writers
 * first take flock() of super, which they wait for a bounded time (a
 * quarter lease period): MKV_E_TIMEDOUT if a stopped holder keeps it.
 */
int
mkv_reg_wtxn(struct mkv_pool *p, struct mkv_txn **txn)
{
	MDB_txn *t;
	int rc = mkv_lock_until(p->super_fd, LOCK_EX, mkv_clock_now() + p->lease_period_ns / 4);

	if (rc == -ETIMEDOUT)
		return mkv_err(MKV_E_TIMEDOUT,
				"pool %s: another lease holder is inside a registry write (stopped?)",
				p->path);
	if (rc)
		return mkv_err(rc, "pool %s: cannot lock super: %s", p->path, strerror(-rc));
	mkv_reg_fresh_metas(p);
	if ((rc = mkv_reg_floor(p))) {
		flock(p->super_fd, LOCK_UN);
		return rc;
	}
	if ((rc = mdb_txn_begin(p->reg->env, NULL, 0, &t))) {
		flock(p->super_fd, LOCK_UN);
		return mkv_reg_err(rc, "registry: write txn");
	}
	/* a write txn's snapshot is its parent: the txn before its own id */
	fresh_to(p, mdb_txn_id(t) - 1);
	*txn = reg_mkv_txn(t);
	return 0;
}

void
mkv_reg_fresh_snapshot(struct mkv_pool *p, MDB_txn *txn)
{
	fresh_to(p, mdb_txn_id(txn));
}

/* Commit (or abort) what mkv_reg_wtxn() began; the commit's error. */
int
mkv_reg_wtxn_end(struct mkv_pool *p, struct mkv_txn *txn, bool commit)
{
	uint64_t id = mdb_txn_id(reg_txn(txn));
	int rc = 0;

	if (commit)
		rc = mdb_txn_commit(reg_txn(txn));
	else
		mdb_txn_abort(reg_txn(txn));
	/*
	 * LMDB wrote its pages with write(2): this host's caches hold them.  A
	 * txn that changed nothing made no snapshot (LMDB writes no meta).
	 */
	if (commit && !rc && p->reg->shadow && mkv_reg_newest_meta(p) == id) {
		MDB_txn *t = NULL;

		__atomic_compare_exchange_n(&p->reg->fresh_txn, &(uint64_t){ id - 1 }, id, false,
				__ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		/* one read txn at the new snapshot, for the log, then kept for the floor */
		mkv_reg_rtxn_start(p, &t);
		mkv_reg_wlog_commit(p, id, t);
		mkv_reg_floor_add(p, t);
	}
	flock(p->super_fd, LOCK_UN);
	return rc ? mkv_reg_err(rc, "registry: commit") : 0;
}

/* Renew *t, a reset read txn (or NULL), or else begin a new one; on error *t is aborted, NULL. */
int
mkv_reg_rtxn_start(struct mkv_pool *p, MDB_txn **t)
{
	int rc;

	if (*t) {
		if (!mdb_txn_renew(*t))
			return 0;
		mdb_txn_abort(*t);
		*t = NULL;
	}
	if ((rc = mdb_txn_begin(p->reg->env, NULL, MDB_RDONLY, t))) {
		*t = NULL;
		return mkv_reg_err(rc, "registry: read txn");
	}
	return 0;
}

/*
 * A read txn, renewed from the handle's cache when one is there; fresh:
 * the caller has just made the metas fresh (mkv_reg_last_txn()), and any
 * snapshot from then on will do.
 */
static int
reg_rtxn(struct mkv_pool *p, struct mkv_txn **txn, bool fresh)
{
	MDB_txn *t = __atomic_exchange_n(&p->reg->ready, NULL, __ATOMIC_ACQUIRE);
	int rc;

	if (!t) {
		pthread_mutex_lock(&p->reg->lock);
		if (p->reg->nrtxn)
			t = p->reg->rtxn[--p->reg->nrtxn];
		pthread_mutex_unlock(&p->reg->lock);
	}
	if (mkv_reg_snap_on(p)) {
		rc = mkv_reg_snap_enter(p, &t, fresh);
	} else {
		if (!fresh)
			mkv_reg_fresh_metas(p);
		rc = mkv_reg_rtxn_start(p, &t);
	}
	if (rc)
		return rc;
	mkv_reg_fresh_snapshot(p, t);
	*txn = reg_mkv_txn(t);
	return 0;
}

int
mkv_reg_rtxn(struct mkv_pool *p, struct mkv_txn **txn)
{
	return reg_rtxn(p, txn, false);
}

int
mkv_reg_rtxn_fresh(struct mkv_pool *p, struct mkv_txn **txn)
{
	return reg_rtxn(p, txn, true);
}

/* A read txn back to the cache, reset. */
void
mkv_reg_rtxn_done(struct mkv_pool *p, struct mkv_txn *rtxn)
{
	MDB_txn *none = NULL, *txn = reg_txn(rtxn);

	if (mkv_reg_snap_on(p))
		mkv_reg_snap_leave(p, mdb_txn_id(txn));
	mdb_txn_reset(txn);
	/* One thread at a time (the common case) never takes the lock. */
	if (__atomic_compare_exchange_n(&p->reg->ready, &none, txn, false, __ATOMIC_RELEASE,
			__ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&p->reg->lock);
	if (p->reg->nrtxn < p->reg->cap) {
		p->reg->rtxn[p->reg->nrtxn++] = txn;
		txn = NULL;
	}
	pthread_mutex_unlock(&p->reg->lock);
	if (txn)
		mdb_txn_abort(txn);
}

/* The id of a txn: the snapshot a read txn sees, the one a write txn makes. */
uint64_t
mkv_reg_txn_id(struct mkv_txn *txn)
{
	return mdb_txn_id(reg_txn(txn));
}

/*
 * The last committed txn id, as the meta page shows it.  LMDB updates the
 * meta page before the reader table's txn id, so a read txn begun after
 * this call sees a snapshot of at least this id minus one: callers allow
 * for that.
 */
uint64_t
mkv_reg_last_txn(struct mkv_pool *p)
{
	MDB_envinfo info;

	mkv_reg_fresh_metas(p);
	mdb_env_info(p->reg->env, &info);
	return info.me_last_txnid;
}

/*
 * Each record of the free list of read txn txn's snapshot to fn, with its
 * count of pages and the bytes of their numbers: LMDB 0.9's MDB_IDL, a
 * count and then that many page numbers, each a size_t (check_regcheck's
 * test of the page log fails if that changes).  0, fn's error, or the
 * registry's.
 */
int
mkv_reg_free_each(struct mkv_pool *p, MDB_txn *txn,
		int (*fn)(void *arg, size_t n, const char *pgnos), void *arg)
{
	MDB_cursor *c;
	MDB_val k, d;
	int rc, err = 0;

	if ((rc = mdb_cursor_open(txn, 0, &c)))
		return mkv_reg_err(rc, "registry: free list");
	while (!err && (rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) == 0) {
		size_t n;

		if ((err = mkv_reg_val(p, txn, &d, "a free list")) || d.mv_size < sizeof(n))
			continue;
		memcpy(&n, d.mv_data, sizeof(n));
		if (n > d.mv_size / sizeof(n) - 1)
			err = mkv_err(MKV_E_CORRUPT,
					"pool %s: registry.mdb: a free list record of %zu bytes counts %zu pages",
					p->path, d.mv_size, n);
		else
			err = fn(arg, n, (const char *)d.mv_data + sizeof(n));
	}
	mdb_cursor_close(c);
	if (err)
		return err;
	return rc == MDB_NOTFOUND ? 0 : mkv_reg_err(rc, "registry: free list");
}

static int
free_count(void *arg, size_t n, const char *pgnos)
{
	(void)pgnos;
	*(uint64_t *)arg += n;
	return 0;
}

/*
 * Whether the registry is too full to take another publish.  LMDB copies
 * pages on write, so a delete needs free pages too: publishes stop while a
 * reserve (5 %, at least 64 pages) remains, and that reserve is there for
 * deletes.  Free pages are those past the high-water mark plus those on
 * LMDB's free list, counted only when the mark comes near the end.
 */
int
mkv_reg_full(struct mkv_pool *p, bool *full)
{
	MDB_envinfo info;
	MDB_stat st;
	struct mkv_txn *rtxn;
	uint64_t total, reserve, used, freelist = 0;
	int rc;

	mdb_env_info(p->reg->env, &info);
	mdb_env_stat(p->reg->env, &st);
	total = info.me_mapsize / st.ms_psize;
	reserve = total / 20 > 64 ? total / 20 : 64;
	used = info.me_last_pgno + 1;
	*full = false;
	if (used + reserve <= total)
		return 0;
	/* LMDB opens its free list only in read txns */
	if ((rc = mkv_reg_rtxn(p, &rtxn)))
		return rc;
	rc = mkv_reg_free_each(p, reg_txn(rtxn), free_count, &freelist);
	mkv_reg_rtxn_done(p, rtxn);
	if (rc)
		return rc;
	*full = used - (freelist < used ? freelist : used) + reserve > total;
	return 0;
}

/* This handle's moves to newer snapshots (non-coherent pools), by how. */
void
mkv_reg_fresh_counts(struct mkv_pool *p, uint64_t *logged, uint64_t *whole)
{
	*logged = __atomic_load_n(&p->reg->fresh_logged, __ATOMIC_RELAXED);
	*whole = __atomic_load_n(&p->reg->fresh_whole, __ATOMIC_RELAXED);
}

/* The bytes of the registry file in use, up to its high-water mark. */
uint64_t
mkv_reg_used(struct mkv_pool *p)
{
	MDB_envinfo info;
	MDB_stat st;

	mdb_env_info(p->reg->env, &info);
	mdb_env_stat(p->reg->env, &st);
	return (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
}

/* Clear the LMDB reader slots of dead processes: how many; -1 (no message) if LMDB could not. */
int
mkv_reg_reader_check(struct mkv_pool *p)
{
	int stale = 0;

	return mdb_reader_check(p->reg->env, &stale) ? -1 : stale;
}
