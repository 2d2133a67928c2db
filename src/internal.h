/* SPDX-License-Identifier: MIT */
/*
 * internal.h -- the library's private structures and module interfaces.
 */
#ifndef MKV_INTERNAL_H
#define MKV_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include <lmdb.h>

#include "marukv.h"
#include "layout.h"

#define MKV_FILE_SUPER "super"
#define MKV_FILE_REGISTRY "registry.mdb"
#define MKV_FILE_DATA "data"
#define MKV_DEFAULT_POOL "/dev/shm/marukv"

struct pmem2_map;

/* error.c */
void mkv_err_clear(void);
int mkv_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mkv_err_mdb(int rc, const char *what);
int mkv_err_pmem2(int rc, const char *what);

/* log.c */
void mkv_log(enum mkv_log_level level, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));

/* persist.c: flushes of our own structures and payloads, over libpmem2 */
struct mkv_mapping {
	struct pmem2_map *map;
	void *addr;
	size_t size;
	void (*persist)(const void *, size_t);
	void (*flush)(const void *, size_t);
	void (*drain)(void);
};
int mkv_map_file(int fd, size_t size, bool rdonly, struct mkv_mapping *m, const char *what);
void mkv_unmap(struct mkv_mapping *m);

/* registry.c: the LMDB environment */
struct mkv_registry {
	MDB_env *env;
	MDB_dbi entries, pages, freed, meta;
	pthread_mutex_t lock;  /* guards the read-txn cache */
	MDB_txn **rtxn;        /* reset read txns ready for renew */
	unsigned nrtxn, cap;
};

/* epoch.c: this client's outstanding views, by the txn they pinned */
struct mkv_epoch_ent {
	uint64_t txn;
	uint64_t count;
};
struct mkv_epochs {
	pthread_mutex_t lock;
	struct mkv_epoch_ent *ring;
	unsigned head, n, cap;
};

struct mkv_pool {
	char *path;
	unsigned flags;
	int dirfd, super_fd, data_fd;
	struct mkv_mapping super, data;
	struct mkv_super *sb;
	struct mkv_state *state;
	struct mkv_slot *slots;
	uint64_t *pt;
	uint8_t *hints;
	uint8_t *arena;
	uint64_t page_size, nr_pages;
	unsigned page_shift;
	uint64_t node;
	uint32_t slot;         /* our client slot */
	uint32_t incarnation;  /* of our claim on it */
	uint64_t cookie;       /* tags this handle's views and buffers */
	struct mkv_registry reg;
	struct mkv_epochs epochs;
};

/*
 * A full memory barrier between our stores and later loads of shared
 * words (pins against txn ids).  TSan rejects thread fences; under it a
 * seq_cst read-modify-write, a full barrier on every target we build for,
 * stands in.
 */
static inline void mkv_full_fence(void)
{
#ifdef __SANITIZE_THREAD__
	static uint64_t fence_word;

	__atomic_fetch_add(&fence_word, 0, __ATOMIC_SEQ_CST);
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* pool.c */
static inline uint64_t mkv_pages_for(const struct mkv_pool *p, uint64_t len)
{
	return (len + p->page_size - 1) >> p->page_shift;
}
static inline void *mkv_page_addr(const struct mkv_pool *p, uint64_t page)
{
	return p->arena + (page << p->page_shift);
}
uint64_t mkv_fnv1a(const void *buf, size_t len);

/* dax.c: what backs the data arena */
enum mkv_backing { MKV_BACKING_FILE, MKV_BACKING_DEVDAX };
int mkv_dax_probe(int fd, const char *what, enum mkv_backing *kind, uint64_t *size);

/* registry.c */
int mkv_reg_create(struct mkv_pool *p, const struct mkv_super *sb);
int mkv_reg_open(struct mkv_pool *p, const struct mkv_super *sb);
void mkv_reg_close(struct mkv_pool *p);
int mkv_reg_rtxn(struct mkv_pool *p, MDB_txn **txn);
void mkv_reg_rtxn_done(struct mkv_pool *p, MDB_txn *txn);
int mkv_reg_lookup(struct mkv_pool *p, MDB_txn *txn, const void *key, size_t klen,
		struct mkv_entry *e);
uint64_t mkv_reg_last_txn(struct mkv_pool *p);
int mkv_reg_full(struct mkv_pool *p, bool *full);
int mkv_reg_meta_get(struct mkv_pool *p, MDB_txn *txn, const char *name, uint64_t *v);
int mkv_reg_meta_put(struct mkv_pool *p, MDB_txn *txn, const char *name, uint64_t v);
int mkv_check_key(const void *key, size_t klen);

/* client.c */
int mkv_client_attach(struct mkv_pool *p);
void mkv_client_detach(struct mkv_pool *p);
bool mkv_client_dead(const struct mkv_pool *p, uint32_t slot, uint64_t owner);
uint64_t mkv_node_id(void);

/* epoch.c */
int mkv_epoch_init(struct mkv_epochs *ep);
void mkv_epoch_fini(struct mkv_epochs *ep);
uint64_t mkv_epoch_enter(struct mkv_pool *p, uint64_t nviews);
void mkv_epoch_leave(struct mkv_pool *p, uint64_t txn, uint64_t nviews);
uint64_t mkv_epoch_min_pin(const struct mkv_pool *p, uint64_t upto);

/* alloc.c */
uint64_t mkv_pt_load(const struct mkv_pool *p, uint64_t page);
bool mkv_pages_are(const struct mkv_pool *p, const struct mkv_extent *ext, uint64_t word);
void mkv_pages_set(struct mkv_pool *p, const struct mkv_extent *ext, uint64_t word);
int mkv_pages_grant(struct mkv_pool *p, uint64_t npages, struct mkv_extent *out);
uint64_t mkv_pages_reclaim(struct mkv_pool *p, uint32_t slot);
static inline uint64_t mkv_grant_word(const struct mkv_pool *p)
{
	return MKV_PG_WORD(MKV_PG_GRANTED, p->slot, p->incarnation);
}

/* commit.c: the write path, behind one interface the lease holder takes over */
enum mkv_op {
	MKV_OP_PUBLISH,   /* key -> ext, length; on EXISTS the pages are freed */
	MKV_OP_DEL,       /* key; its pages go to quarantine */
	MKV_OP_GRANT,     /* ext.npages in; the granted extent out */
	MKV_OP_UNGRANT,   /* ext back to the free set */
	MKV_OP_DETACH,    /* every page still granted to the caller back */
};
struct mkv_req {
	enum mkv_op op;
	const void *key;
	size_t klen;
	struct mkv_extent ext;  /* PUBLISH, UNGRANT: the pages; GRANT: npages in, extent out */
	uint64_t length;        /* PUBLISH */
	int result;
};
int mkv_commit(struct mkv_pool *p, struct mkv_req *reqs, unsigned n);

#endif
