/* SPDX-License-Identifier: MIT */
/*
 * registry.h -- private to the registry module (registry.c: the LMDB
 * environment; regtxn.c: its transactions; regsnap.c: its snapshots
 * between hosts; regwlog.c: the pages each commit wrote; regtable.c: the
 * tables and their formats; regcheck.c: the file's structure, read before
 * LMDB trusts it).
 * Only these six files include lmdb.h: the rest of the library asks
 * them through internal.h's mkv_reg_* calls, and holds a registry txn as
 * a struct mkv_txn.
 */
#ifndef MKV_REGISTRY_H
#define MKV_REGISTRY_H

#include <lmdb.h>

#include "internal.h"

/* Read txns a lease holder keeps to protect snapshots from reuse (regsnap.c). */
#define MKV_REG_HELD 8U

struct mkv_registry {
	MDB_env *env;
	MDB_dbi entries, pages, freed, meta, answers, kids;
	MDB_txn *ready;        /* a reset read txn, taken and put back by exchange */
	pthread_mutex_t lock;  /* guards the read-txn cache */
	MDB_txn **rtxn;        /* more reset read txns ready for renew */
	unsigned nrtxn, cap;
	const char *map;       /* LMDB's map of the file, and its size */
	size_t mapsize;
	size_t psize;          /* LMDB's page size */
	/* non-coherent pools: a map of the file of our own, and the last
	 * snapshot whose pages were invalidated through it */
	const char *shadow;
	size_t shadow_size;
	uint64_t fresh_txn;
	uint64_t fresh_logged, fresh_whole;  /* moves to newer snapshots, by how (mkv_stat) */
	uint64_t metas_seen;     /* the newest meta's id when the metas were last invalidated whole */
	/* and this host's LMDB lock file, where we advance the last txn id,
	 * in this host's directory of the pool (lockdir.c) */
	int lockdir_fd;
	int lock_fd;
	void *lock_map;
	uint64_t *lock_txnid;
	/*
	 * and the snapshots this handle reads, counted by txn under
	 * snaps.lock; what our slot's snap says, whether it was published in
	 * time, whether a read began since the service thread last looked
	 * (regsnap.c)
	 */
	struct mkv_epochs snaps;
	uint64_t snap_pub;
	bool snap_ok, snap_used;
	/* a holder's read txns that keep its snapshots from reuse, oldest first */
	pthread_mutex_t held_lock;
	MDB_txn *held[MKV_REG_HELD];
	uint64_t held_id[MKV_REG_HELD];
	unsigned nheld;
	uint64_t held_gen;       /* the lease generation they were taken under */
	uint64_t held_scan_ns;   /* when the readers' snaps were last read */
	bool held_wait;          /* not yet seen every reader at the first or later */
	/*
	 * a holder's free list of snapshot wl_id and that snapshot's last
	 * page; the next one's while it is read; a bitmap of pages and the
	 * pages that left the list, while the two are compared (regwlog.c)
	 */
	uint64_t *wl_free, *wl_next, *wl_bits, *wl_left;
	size_t wl_nfree, wl_capfree, wl_nnext, wl_capnext, wl_nbits, wl_capleft;
	uint64_t wl_id, wl_last;
};

/*
 * struct mkv_txn is never defined: it is LMDB's MDB_txn under the
 * library's own name, converted here and nowhere else.
 */
static inline MDB_txn *reg_txn(struct mkv_txn *txn)
{
	return (MDB_txn *)txn;
}
static inline struct mkv_txn *reg_mkv_txn(MDB_txn *txn)
{
	return (struct mkv_txn *)txn;
}

/* The part of a meta page LMDB 0.9 reads (MDB_metabuf): page header, MDB_meta. */
#define MKV_REG_META_BYTES (16U + 136U)
/* Where a meta page holds its txn id (MDB_meta's last field). */
#define MKV_REG_META_TXNID (16U + 128U)
/*
 * LMDB 0.9's lock file on x86-64 with glibc (MDB_txbody): magic, format,
 * the readers' mutex, then the last committed txn id, which a read txn
 * takes as its snapshot.  Checked when a non-coherent pool opens (and by
 * check_regcheck's test of the layout).
 */
#define MKV_REG_LOCK_MAGIC 0xBEEFC0DEU
#define MKV_REG_LOCK_FORMAT 0x10001U  /* MDB_LOCK_VERSION 1, MDB_PIDLOCK */
#define MKV_REG_LOCK_TXNID 48U

/* regtxn.c */
int mkv_reg_err(int rc, const char *what);
int mkv_reg_rtxn_start(struct mkv_pool *p, MDB_txn **t);
uint64_t mkv_reg_newest_meta(const struct mkv_pool *p);
void mkv_reg_fresh_metas(struct mkv_pool *p);
void mkv_reg_fresh_pages(struct mkv_pool *p, uint64_t last_pgno);
void mkv_reg_fresh_snapshot(struct mkv_pool *p, MDB_txn *txn);
/* 0 if LMDB's answer @p v lies inside its map (or a write txn's own pages), else MKV_E_CORRUPT */
int mkv_reg_val(struct mkv_pool *p, MDB_txn *txn, const MDB_val *v, const char *what);
int mkv_reg_free_each(struct mkv_pool *p, MDB_txn *txn,
		int (*fn)(void *arg, size_t n, const char *pgnos), void *arg);

/* regsnap.c */
int mkv_reg_snap_init(struct mkv_pool *p);
void mkv_reg_snap_fini(struct mkv_pool *p);
bool mkv_reg_snap_on(const struct mkv_pool *p);
int mkv_reg_snap_enter(struct mkv_pool *p, MDB_txn **t, bool fresh);
void mkv_reg_snap_leave(struct mkv_pool *p, uint64_t id);
int mkv_reg_floor(struct mkv_pool *p);
void mkv_reg_floor_add(struct mkv_pool *p, MDB_txn *t);

/* regwlog.c */
void mkv_reg_wlog_commit(struct mkv_pool *p, uint64_t id, MDB_txn *t);
bool mkv_reg_wlog_fresh(struct mkv_pool *p, uint64_t from, uint64_t to, uint64_t last);
void mkv_reg_wlog_fini(struct mkv_registry *r);

/* regcheck.c: whether registry.mdb is a sound LMDB file, read with pread only */
struct mkv_regcheck {
	int fd;                  /* registry.mdb */
	const char *pool;        /* the pool's path, for messages */
	uint64_t map_size;       /* LMDB's map size: super's registry_size */
	uint64_t last_pgno;      /* the higher of the two metas' last pages in use */
	/* what a walk found */
	uint64_t first_key_off;  /* file offset of the main database's first key; 0: empty */
	uint64_t pages;          /* pages of the snapshot's trees and overflow runs */
	uint64_t free_pages;     /* pages on its free list */
};
int mkv_regcheck_metas(struct mkv_regcheck *c);
int mkv_regcheck_walk(struct mkv_regcheck *c, uint64_t txnid);

#endif
