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

#include "marukv.h"
#include "layout.h"

#define MKV_FILE_SUPER "super"
#define MKV_FILE_REGISTRY "registry.mdb"
#define MKV_FILE_LOCK "registry.mdb-lock"
#define MKV_FILE_DATA "data"

struct pmem2_map;
struct mkv_req;
struct mkv_cache_hooks;

/* error.c */
void mkv_err_clear(void);
int mkv_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mkv_err_pmem2(int rc, const char *what);

/* log.c */
void mkv_log(enum mkv_log_level level, const char *fmt, ...)
		__attribute__((format(printf, 2, 3)));

/* clock.c: CLOCK_MONOTONIC (deadlines, intervals) and CLOCK_REALTIME (heartbeats) */
uint64_t mkv_clock_now(void);
uint64_t mkv_clock_wall(void);
int64_t mkv_clock_age_ms(uint64_t wall_ns);
void mkv_clock_sleep(uint64_t ns);

/* hash.c: hashes stored in the pool (mkv_hash_copy(): the source's, as it is copied) */
uint64_t mkv_hash_fnv1a(const void *buf, size_t len);
uint64_t mkv_hash_checksum(const void *buf, size_t len);
/* mkv_hash_copy()'s step: a chunk well inside a core's L2 */
#define MKV_HASH_CHUNK (64U << 10)
uint64_t mkv_hash_copy(void *dst, const void *src, size_t len);
uint64_t mkv_hash_key(const void *key, size_t klen);
uint64_t mkv_hash_super(const struct mkv_super *sb);

/* valid.c: checks of keys, node names and watermarks */
int mkv_valid_key(const void *key, size_t klen);
int mkv_valid_node_name(const char *name);
int mkv_valid_watermarks(unsigned low, unsigned high);
int mkv_valid_keys(const struct mkv_key *keys, size_t n, const char *fn);

/* persist.c: flushes of our own structures and payloads, over libpmem2 */
struct mkv_mapping {
	struct pmem2_map *map;
	void *addr;
	size_t size;
	void (*persist)(const void *, size_t);
	bool page_granular;     /* persisted by msync (page cache, tmpfs) */
};
bool mkv_persist_in_memory(int fd);
void mkv_persist_copy(void *dst, const void *src, size_t n);
void mkv_persist_copy_done(void);
int mkv_persist_map(int fd, size_t size, bool rdonly, struct mkv_mapping *m, const char *what);
void mkv_persist_unmap(struct mkv_mapping *m);

/*
 * epoch.c: counts by registry txn, oldest first: this client's outstanding
 * views by the txn they pinned, its registry reads by snapshot (regsnap.c)
 */
struct mkv_epoch_ent {
	uint64_t txn;
	uint64_t count;
};
struct mkv_epochs {
	pthread_mutex_t lock;
	struct mkv_epoch_ent *ring;
	unsigned head, n, cap;
};

/* alloc.c: this client's cache of granted extents */
struct mkv_grants {
	pthread_mutex_t lock;
	struct mkv_extent *ext;
	unsigned n, cap;
	unsigned mult;            /* a grant's allocations, as the cache last ran dry */
	uint64_t last_ns;         /* when the last grant was asked for */
};

/* handout.c: records of the buffers and views a handle handed out */
struct mkv_handout_rec {
	uint32_t serial;          /* changes whenever the record is freed */
	uint32_t state;
	uint32_t next;            /* free list */
	uint64_t a, b;            /* buffer: first page, length; view: txn, address */
};
struct mkv_handout {
	pthread_mutex_t lock;
	struct mkv_handout_rec *v;
	uint32_t cap, free_head;
};

/* lease.c: what this handle knows of the lease */
struct mkv_holder {
	pthread_mutex_t lock;     /* serialises commits and lease changes in this process */
	bool ready;               /* mkv_lease_init() succeeded */
	bool holding;             /* this handle holds the lease */
	bool stopping;            /* the service thread is asked to stop */
	bool thread_running;
	bool thread_started;      /* the thread is past its start-up */
	pthread_t thread;
	pthread_cond_t wake;      /* wakes the service thread when it does not hold */
	struct mkv_req *batch;    /* the thread's requests; here, so a forked child reaches it */
	uint32_t *bells;          /* the thread's: other nodes' doorbells as last seen (ring.c) */
	uint64_t *posted;         /* the thread's: each slot's requests posted, as last seen */
	bool quick;               /* the thread's: its last wait for the doorbell was short (ring.c) */
	uint64_t last_beat_ns;    /* our client heartbeat */
	uint64_t last_idle_ns;    /* our registry snap last looked at (regsnap.c) */
	uint64_t last_reap_ns;    /* the holder's last reclamation pass */
	/* the holder's view of the page table, kept by mkv_pages_move() */
	uint64_t free_pages, quarantined_pages;
	uint32_t wm_low, wm_high; /* eviction watermarks, percent */
	uint64_t pin_outlasted;   /* a pin a grant waited for in vain: not waited for again */
	uint64_t generation;      /* ours while holding */
	uint64_t holder_id;       /* who we are as holder: node, slot, incarnation */
	uint64_t last_renew_ns;   /* CLOCK_MONOTONIC of our last successful beat */
	/* watching another holder's heartbeat, by our own clock */
	uint64_t seen_generation, seen_beat, seen_since_ns;
	uint32_t seen_holder;
};

/* ring.c: this client's request entries */
static_assert(MKV_RQ_DEPTH == MKV_ASYNC_MAX, "a handle's requests in flight are its ring entries");
static_assert(MKV_RQ_DEPTH <= 32, "entries in use are bits of a uint32_t");
#define MKV_MAX_BATCH 256  /* requests the holder takes into one txn */
struct mkv_answer {
	uint32_t seq;
	int result;
	struct mkv_extent ext;
	uint64_t out;
};
struct mkv_rqs {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	uint32_t busy;            /* bit i: entry i is in use by a caller */
	uint32_t async;           /* bit i: entry i holds an asynchronous publish */
	uint32_t seqs[MKV_RQ_DEPTH];  /* sequence number in each busy entry */
	uint32_t seq;             /* last sequence number used */
	struct mkv_answer *kept;  /* answers taken off the ring before mkv_wait() */
	unsigned nkept, capkept;
	void (*idle)(struct mkv_pool *p);  /* between slices of a wait (mkv_rq_init()) */
	bool quick;               /* the last wait for an answer was short (mkv_rq_spin()) */
	uint64_t wakes;           /* futex wake-up calls made, doorbell's and answers' (tests) */
};

/* client.c: watching other nodes' clients' heartbeats, by our own clock */
struct mkv_watch {
	uint64_t owner, beat, since;
};

/* hold.c: the keys this handle holds, by key hash (a tree of struct held) */
struct mkv_held {
	pthread_mutex_t lock;
	void *tree;
	uint32_t *count;          /* per bucket: distinct hashes held */
	uint64_t sweep;           /* the holder: the odd sweeps value its round set, 0 none */
};

/* spill.c, remote.c: the remote tier's side of a handle */
struct mkv_spill;
struct mkv_rc;
struct mkv_remote_rt {
	pthread_mutex_t lock;     /* the queue */
	pthread_cond_t wake;      /* the spilling thread sleeps on it */
	pthread_t thread;
	bool ready, running, stop;
	struct mkv_spill *head, *tail;
	uint64_t queued;          /* bytes of the frames queued */
	pthread_mutex_t fetch_lock;  /* fetch_rc, used by one mkv_fetch() at a time */
	struct mkv_rc *fetch_rc;
	uint64_t fetch_gen;       /* the setting fetch_rc was made for */
	int stop_fd;              /* an eventfd, written at close: the spill in flight gives up */
};

struct mkv_pool {
	struct mkv_pool *next_open;  /* in the process's list of open handles */
	char *path;
	unsigned flags;
	int dirfd, super_fd, data_fd;
	struct mkv_mapping super, data;
	struct mkv_super *sb;     /* &hdr: the superblock as checked at open */
	struct mkv_super hdr;
	struct mkv_state *state;
	struct mkv_node *nodes;
	struct mkv_slot *slots;
	struct mkv_rq *rqs;
	uint64_t *pt;
	uint8_t *hints;
	struct mkv_wlog *wlog;  /* super's log of registry pages written (regwlog.c) */
	struct mkv_hold_block *holds;  /* super's blocks of keys held, per slot (hold.c) */
	uint8_t *arena;
	uint64_t page_size, nr_pages;
	unsigned page_shift;
	uint64_t lease_period_ns;
	uint64_t client_timeout_ns;
	struct mkv_watch *watch;  /* per client slot */
	struct mkv_watch *node_watch;  /* per node entry: how long it has looked unused */
	uint32_t backing;         /* enum mkv_backing */
	char dax_device[32];
	uint64_t dax_align;
	mkv_progress_fn progress;
	void *progress_arg;
	char node_name[MKV_NODE_NAME_MAX + 1];
	uint64_t node;            /* node id: FNV-1a of the name */
	uint32_t node_idx;        /* our entry in the node table */
	uint32_t slot;            /* our client slot */
	uint32_t pid;             /* our process, as the slot and the lease record name it */
	uint32_t incarnation;     /* of our claim on it */
	/*
	 * non-coherent pools: until when (mkv_clock_now()) our claim is known
	 * to stand without a look at it, when our last beat began, and how
	 * many gaps between beats in a row were short (mkv_client_beat())
	 */
	uint64_t claim_until;
	uint64_t beat_began_ns;
	unsigned beat_chain;
	uint64_t boot;            /* our kernel's boot id, hashed (mkv_client_boot_id()) */
	bool noncoherent;         /* the pool's memory is not coherent between hosts */
	const struct mkv_cache_hooks *cache_hooks;  /* a host emulator's, else NULL */
	bool forked;              /* inherited across fork(): only close works */
	gid_t create_gid;         /* while creating: the pool's group, or -1 */
	uint64_t cookie;          /* tags this handle's views, buffers, tickets */
	struct mkv_registry *reg; /* registry.h */
	struct mkv_epochs epochs;
	struct mkv_grants grants;
	struct mkv_handout bufs, views;
	struct mkv_holder h;
	struct mkv_rqs rq;
	struct mkv_remote_rt remote;
	struct mkv_held held;
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

/*
 * share.c: pool memory other processes and hosts read and write.  Loads of
 * words another host may have written go through mkv_share_load() (or
 * mkv_share_inval() of a whole record first), stores others must see
 * through mkv_share_store() (or mkv_share_wb() of the record after it),
 * stores that must also survive a crash through mkv_share_persist().  In a
 * coherent pool the first two are plain atomics.
 */
#define MKV_XSTR(x) #x
#define MKV_STR(x) MKV_XSTR(x)
#define MKV_SITE __FILE__ ":" MKV_STR(__LINE__)
/* a site a test names, to stop or skip it whatever its line */
#define MKV_SITE_NAMED(name) __FILE__ ":" #name
bool mkv_share_supported(void);
void mkv_share_init(struct mkv_pool *p, uint32_t coherence);
void mkv_share_inval_at(const struct mkv_pool *p, const void *addr, size_t len, const char *site);
void mkv_share_wb_at(const struct mkv_pool *p, const void *addr, size_t len, const char *site);
void mkv_share_persist_at(const struct mkv_pool *p, const void *addr, size_t len,
		const char *site);
void mkv_share_inval_n_at(const struct mkv_pool *p, const void *const *addr, unsigned n, size_t len,
		const char *site);
#define mkv_share_inval(p, a, n) mkv_share_inval_at((p), (a), (n), MKV_SITE)
#define mkv_share_inval_n(p, a, n, len) mkv_share_inval_n_at((p), (a), (n), (len), MKV_SITE)
#define mkv_share_wb(p, a, n) mkv_share_wb_at((p), (a), (n), MKV_SITE)
#define mkv_share_persist(p, a, n) mkv_share_persist_at((p), (a), (n), MKV_SITE)
#define mkv_share_load_at(p, w, site) __extension__({ \
	mkv_share_inval_at((p), (w), sizeof(*(w)), (site)); \
	__atomic_load_n((w), __ATOMIC_SEQ_CST); })
#define mkv_share_load(p, w) mkv_share_load_at((p), (w), MKV_SITE)
/*
 * Compare-and-swap of a pool word, between the invalidation of its line and
 * the write-back: exact among the processes of one host only.
 */
#define mkv_share_cas(p, w, expect, v) __extension__({ \
	__typeof__(*(w)) mkv_cas_old_ = (expect); \
	mkv_share_inval_at((p), (w), sizeof(*(w)), MKV_SITE); \
	bool mkv_cas_ok_ = __atomic_compare_exchange_n((w), &mkv_cas_old_, (v), false, \
			__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
	mkv_share_wb_at((p), (w), sizeof(*(w)), MKV_SITE); \
	mkv_cas_ok_; })
#define mkv_share_store(p, w, v) do { \
	__atomic_store_n((w), (v), __ATOMIC_SEQ_CST); \
	mkv_share_wb_at((p), (w), sizeof(*(w)), MKV_SITE); } while (0)

/* admin.c */
void mkv_admin_progress(struct mkv_pool *p, uint64_t done, uint64_t total, uint64_t *last_ns);

/* file.c: the pool's files, opened by name without following links */
const char *mkv_file_access_name(int flags);
int mkv_file_open(struct mkv_pool *p, const char *name, int flags, int *fd);
int mkv_file_create(struct mkv_pool *p, const char *name, int *fd);
int mkv_file_create_at(struct mkv_pool *p, int dirfd, const char *name, const char *shown,
		int *fd);
int mkv_file_check(struct mkv_pool *p, const char *name, int flags);
int mkv_file_check_at(struct mkv_pool *p, int dirfd, const char *name, const char *shown,
		int flags);
int mkv_file_open_data(struct mkv_pool *p, int flags);

/* lockdir.c: a non-coherent pool's LMDB lock file, in a directory of this host's */
int mkv_lockdir_open(struct mkv_pool *p, const uint8_t uuid[16], int *fd);
void mkv_lockdir_remove(struct mkv_pool *p, const uint8_t uuid[16]);

/* lock.c: flock() until a deadline; byte locks on super */
int mkv_lock_until(int fd, int how, uint64_t deadline);
int mkv_lock_super(const struct mkv_pool *p, uint64_t off, short type);
int mkv_lock_super_until(const struct mkv_pool *p, uint64_t off, uint64_t deadline);
bool mkv_lock_super_held(const struct mkv_pool *p, uint64_t off);

/* opts.c: a pool's creation and open options */
#define MKV_DATA_SIZE_MAX (1ULL << 46)
#define MKV_REGISTRY_MIN (1ULL << 20)
#define MKV_REGISTRY_MAX (1ULL << 40)
struct mkv_opts {
	uint64_t data_size;
	uint32_t page_size;
	uint32_t max_clients;
	uint64_t registry_size;
	uint32_t lease_period_ms;
	uint32_t client_timeout_ms;
	uint32_t wm_low, wm_high;
	uint32_t max_nodes;
	uint32_t coherence;
	bool has_group;
	gid_t gid;
	char node[MKV_NODE_NAME_MAX + 1];
};
void mkv_opts_defaults(struct mkv_opts *o);

/* create.c: a new pool's files */
int mkv_create_pool(struct mkv_pool *p, const struct mkv_opts *opts);
void mkv_create_layout(struct mkv_super *sb, uint64_t page_size, uint64_t nr_pages,
		uint32_t max_clients, uint32_t max_nodes);

/* pool.c */
static inline uint64_t mkv_pool_pages_for(const struct mkv_pool *p, uint64_t len)
{
	return (len >> p->page_shift) + ((len & (p->page_size - 1)) != 0);
}
static inline void *mkv_pool_page_addr(const struct mkv_pool *p, uint64_t page)
{
	return p->arena + (page << p->page_shift);
}

/* dax.c: what backs the data arena */
int mkv_dax_probe(int fd, const char *what, enum mkv_backing *kind, uint64_t *size,
		char *devname, size_t devname_len, uint64_t *align);

/*
 * The registry, the one owner of LMDB: registry.c, regtxn.c, regtable.c
 * and regcheck.c (registry.h is theirs alone).  A registry txn is a
 * struct mkv_txn.
 */
struct mkv_txn;
/* registry.c: the environment */
int mkv_reg_create(struct mkv_pool *p, const struct mkv_super *sb, const struct mkv_opts *opts);
int mkv_reg_open(struct mkv_pool *p, const struct mkv_super *sb);
void mkv_reg_close(struct mkv_pool *p);
void mkv_reg_forget(struct mkv_pool *p);
/* Walk the read txn's snapshot (regcheck.c), renewing the txn if a writer overwrote its meta */
int mkv_reg_walk(struct mkv_pool *p, struct mkv_txn *txn);
void mkv_reg_table_name(char name[MKV_TABLE_NAME_LEN + 1], const char *table);
/* regtxn.c: transactions, and the room they have */
int mkv_reg_wtxn(struct mkv_pool *p, struct mkv_txn **txn);
int mkv_reg_wtxn_end(struct mkv_pool *p, struct mkv_txn *txn, bool commit);
int mkv_reg_rtxn(struct mkv_pool *p, struct mkv_txn **txn);
int mkv_reg_rtxn_fresh(struct mkv_pool *p, struct mkv_txn **txn);
void mkv_reg_rtxn_done(struct mkv_pool *p, struct mkv_txn *txn);
void mkv_reg_snap_idle(struct mkv_pool *p);
void mkv_reg_floor_drop(struct mkv_pool *p);
void mkv_reg_readers_watch(struct mkv_pool *p);
int mkv_reg_readers_caught_up(struct mkv_pool *p);
uint64_t mkv_reg_txn_id(struct mkv_txn *txn);
uint64_t mkv_reg_last_txn(struct mkv_pool *p);
uint64_t mkv_reg_used(struct mkv_pool *p);
void mkv_reg_fresh_counts(struct mkv_pool *p, uint64_t *logged, uint64_t *whole);
int mkv_reg_full(struct mkv_pool *p, bool *full);
int mkv_reg_reader_check(struct mkv_pool *p);
/* regtable.c: the tables */
enum mkv_table { MKV_TABLE_ENTRIES, MKV_TABLE_PAGES, MKV_TABLE_FREED };
int mkv_reg_meta_get(struct mkv_pool *p, struct mkv_txn *txn, const char *name, uint64_t *v);
int mkv_reg_meta_put(struct mkv_pool *p, struct mkv_txn *txn, const char *name, uint64_t v);
int mkv_reg_fence(struct mkv_pool *p, struct mkv_txn *txn);
int mkv_reg_entry(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen,
		struct mkv_entry *e);
int mkv_reg_lookup(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen,
		struct mkv_entry *e);
int mkv_reg_exists(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen);
int mkv_reg_insert(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen,
		const struct mkv_entry *e);
int mkv_reg_remove(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen,
		uint64_t page);
int mkv_reg_key_after(struct mkv_pool *p, struct mkv_txn *txn, const void *after, size_t alen,
		uint8_t key[MKV_KEY_MAX], size_t *klen);
int mkv_reg_page_key(struct mkv_pool *p, struct mkv_txn *txn, uint64_t page,
		uint8_t key[MKV_KEY_MAX], size_t *klen);
int mkv_reg_kids(struct mkv_pool *p, struct mkv_txn *txn, uint64_t hash, uint64_t *n);
int mkv_reg_kids_add(struct mkv_pool *p, struct mkv_txn *txn, uint64_t parent, int delta);
int mkv_reg_freed_put(struct mkv_pool *p, struct mkv_txn *txn, const struct mkv_extent *x,
		size_t n);
int mkv_reg_freed_last(struct mkv_pool *p, struct mkv_txn *txn, uint64_t *id);
typedef int (*mkv_reg_extent_fn)(void *arg, const struct mkv_extent *e);
int mkv_reg_freed_pop(struct mkv_pool *p, struct mkv_txn *txn, uint64_t below,
		mkv_reg_extent_fn fn, void *arg);
int mkv_reg_answer_get(struct mkv_pool *p, struct mkv_txn *txn, uint64_t rq,
		struct mkv_answer_rec *a);
int mkv_reg_answer_put(struct mkv_pool *p, struct mkv_txn *txn, uint64_t rq,
		const struct mkv_answer_rec *a);
/* e: the entry of key, or NULL for a record of size bytes that is no entry's size */
typedef int (*mkv_reg_entry_fn)(void *arg, const void *key, size_t klen,
		const struct mkv_entry *e, size_t size);
int mkv_reg_entries_scan(struct mkv_pool *p, struct mkv_txn *txn, mkv_reg_entry_fn fn,
		void *arg);
/* e: an extent of a record of size bytes; NULL after them if size is no whole number of them */
typedef int (*mkv_reg_freed_fn)(void *arg, const struct mkv_extent *e, size_t size);
int mkv_reg_freed_scan(struct mkv_pool *p, struct mkv_txn *txn, mkv_reg_freed_fn fn, void *arg);
int mkv_reg_count(struct mkv_pool *p, struct mkv_txn *txn, enum mkv_table t, uint64_t *n);

/* client.c */
static inline uint64_t mkv_client_owner(const struct mkv_pool *p)
{
	return MKV_SLOT_OWNER(p->incarnation, p->pid);
}
uint64_t mkv_client_boot_id(void);
int mkv_client_attach(struct mkv_pool *p);
void mkv_client_detach(struct mkv_pool *p);
void mkv_client_range(const struct mkv_pool *p, uint32_t node_idx, uint32_t *lo, uint32_t *hi);
bool mkv_client_claimed(const struct mkv_pool *p, uint32_t slot, uint64_t owner);
bool mkv_client_local(const struct mkv_pool *p, uint32_t slot, uint64_t owner);
bool mkv_client_dead(const struct mkv_pool *p, uint32_t slot, uint64_t owner);
bool mkv_client_reap(struct mkv_pool *p, uint32_t slot, uint64_t owner);
bool mkv_client_alive(const struct mkv_pool *p);
bool mkv_client_known(const struct mkv_pool *p);
int mkv_client_usable(const struct mkv_pool *p, const char *fn);
int mkv_client_check_fresh(const struct mkv_pool *p, const char *fn);
int mkv_client_check(const struct mkv_pool *p, const char *fn);
int mkv_client_writable(const struct mkv_pool *p, const char *fn);
void mkv_client_beat(struct mkv_pool *p);
void mkv_client_count(struct mkv_pool *p, uint64_t hits, uint64_t misses);

/* nodes.c: the node table */
int mkv_node_name(struct mkv_pool *p, const char *name);
int mkv_node_attach(struct mkv_pool *p);
uint32_t mkv_nodes_reclaim(struct mkv_pool *p);
void mkv_node_beat(struct mkv_pool *p);

/* lease.c */
#define MKV_E_FENCED (MKV_E_BASE - 100)  /* internal: a newer holder exists */
int mkv_lease_init(struct mkv_pool *p);
void mkv_lease_fini(struct mkv_pool *p);
int mkv_lease_try_acquire(struct mkv_pool *p);
bool mkv_lease_free(const struct mkv_pool *p);
static inline uint64_t mkv_lease_holder_id(const struct mkv_pool *p)
{
	return ((uint64_t)(p->node_idx + 1) << 56) | ((uint64_t)p->slot << 32) | p->incarnation;
}
bool mkv_lease_expired(struct mkv_pool *p);
void mkv_lease_release(struct mkv_pool *p);
bool mkv_lease_valid(struct mkv_pool *p);
int mkv_lease_write_begin(struct mkv_pool *p);
void mkv_lease_write_end(struct mkv_pool *p);
int mkv_lease_writers_wait(struct mkv_pool *p);
int mkv_lease_beat(struct mkv_pool *p);
void mkv_lease_drop(struct mkv_pool *p);

/* ring.c */
int mkv_rq_init(struct mkv_pool *p, void (*idle)(struct mkv_pool *p));
void mkv_rq_fini(struct mkv_pool *p);
int mkv_rq_submit(struct mkv_pool *p, const struct mkv_req *r, bool async, unsigned *idx,
		uint32_t *seq, uint64_t timeout_ns);
int mkv_rq_wait(struct mkv_pool *p, unsigned idx, uint32_t seq, struct mkv_req *r,
		uint64_t timeout_ns, bool keep);
uint32_t *mkv_rq_doorbell(const struct mkv_pool *p);
void mkv_rq_ring(struct mkv_pool *p);
void mkv_rq_bell_sleep(struct mkv_pool *p, uint32_t bell, uint64_t timeout_ns);
bool mkv_rq_rung(const struct mkv_pool *p, uint32_t *seen);
uint64_t mkv_rq_poll_next(const struct mkv_pool *p, uint64_t slice);
bool mkv_rq_spin(const struct mkv_pool *p, const uint32_t *word, uint32_t val, uint64_t start,
		uint64_t end, bool quick);
bool mkv_rq_quick(uint64_t start);
unsigned mkv_rq_collect(struct mkv_pool *p, struct mkv_req *reqs, unsigned max, uint64_t *seen);
void mkv_rq_post(struct mkv_pool *p, const struct mkv_req *reqs, unsigned n);
uint64_t mkv_rq_pending(const struct mkv_pool *p);
unsigned mkv_rq_pending_slot(const struct mkv_pool *p, uint32_t slot);

/* handout.c */
int mkv_handout_init(struct mkv_handout *h);
void mkv_handout_fini(struct mkv_handout *h);
int mkv_handout_add(struct mkv_handout *h, uint64_t a, uint64_t b, uint64_t *token);
bool mkv_handout_take(struct mkv_handout *h, uint64_t token, uint64_t *a, uint64_t *b);
bool mkv_handout_begin(struct mkv_handout *h, uint64_t token, uint64_t *a, uint64_t *b);
void mkv_handout_end(struct mkv_handout *h, uint64_t token, bool keep);

/* epoch.c */
int mkv_epoch_init(struct mkv_epochs *ep);
void mkv_epoch_fini(struct mkv_epochs *ep);
int mkv_epoch_add(struct mkv_epochs *ep, uint64_t txn, uint64_t n);
bool mkv_epoch_sub(struct mkv_epochs *ep, uint64_t txn, uint64_t n, uint64_t *head);
void mkv_epoch_publish(struct mkv_pool *p, uint64_t *w, uint64_t v);
uint64_t mkv_epoch_min(struct mkv_pool *p, size_t word, uint64_t upto, bool others);

/* pin.c: read pins */
uint64_t mkv_pin_enter(struct mkv_pool *p, uint64_t nviews);
void mkv_pin_leave(struct mkv_pool *p, uint64_t txn, uint64_t nviews);

/* pages.c: the page table */
void mkv_pages_fresh(const struct mkv_pool *p);
uint64_t mkv_pages_load(const struct mkv_pool *p, uint64_t page);
bool mkv_pages_are(const struct mkv_pool *p, const struct mkv_extent *ext, uint64_t word);
uint64_t mkv_pages_move(struct mkv_pool *p, const struct mkv_extent *ext, uint64_t from,
		uint64_t to);
bool mkv_pages_move_all(struct mkv_pool *p, const struct mkv_extent *ext, uint64_t from,
		uint64_t to);
int mkv_pages_grant(struct mkv_pool *p, uint64_t npages, uint64_t word, struct mkv_extent *out);
uint64_t mkv_pages_reclaim(struct mkv_pool *p, uint64_t word);
static inline uint64_t mkv_pages_grant_word(uint32_t slot, uint32_t inc)
{
	return MKV_PG_WORD(MKV_PG_GRANTED, slot, inc);
}
static inline uint64_t mkv_pages_held_word(unsigned state, uint64_t generation)
{
	return MKV_PG_WORD(state, 0, (uint32_t)generation);
}
/* A run of pages inside the arena. */
static inline bool mkv_pages_extent_ok(const struct mkv_pool *p, const struct mkv_extent *ext)
{
	return ext->npages != 0 && ext->page < p->nr_pages &&
		ext->npages <= p->nr_pages - ext->page;
}

/* alloc.c: allocation and the cache of grants */
int mkv_grants_init(struct mkv_grants *g);
void mkv_grants_fini(struct mkv_grants *g);
bool mkv_grants_take(struct mkv_pool *p, uint64_t npages, struct mkv_extent *out);
bool mkv_grants_take_any(struct mkv_pool *p, struct mkv_extent *out);
uint64_t mkv_grants_cached(struct mkv_pool *p);
uint64_t mkv_grants_size(struct mkv_pool *p, uint64_t npages, uint64_t cap);
void mkv_grants_put(struct mkv_pool *p, const struct mkv_extent *ext);
/* Pages of a buffer not published: kept for the next one, or given back. */
void mkv_alloc_keep(struct mkv_pool *p, const struct mkv_extent *ext);

/* batch.c: what one commit changes besides the registry */
struct moves {
	struct move {
		struct mkv_extent ext;
		uint64_t from, to;
	} *v;
	size_t n, cap;
};
/* What one txn changes besides the registry. */
struct batch {
	/*
	 * Page-table changes made as each request was applied, undone in
	 * reverse order if the txn fails: granted -> used (publish), used ->
	 * quarantined (delete), free -> granted (grant).
	 */
	struct moves done;
	struct moves released;  /* quarantined -> free, after the commit */
	int64_t bytes;          /* change of the stored byte count */
	uint64_t published;     /* pages published */
	bool evicted;           /* eviction ran to make room for a grant */
	bool failed;            /* a request failed half-applied: the txn must not commit */
};
int mkv_batch_add(struct moves *x, const struct mkv_extent *ext, uint64_t from, uint64_t to);
int mkv_batch_fail(struct batch *b, int rc);
bool mkv_batch_move(struct mkv_pool *p, struct batch *b, const struct mkv_extent *ext,
		uint64_t from, uint64_t to, int *rc);
void mkv_batch_undo(struct mkv_pool *p, struct batch *b);
void mkv_batch_unmove(struct mkv_pool *p, struct batch *b);
int mkv_batch_release(struct mkv_pool *p, struct mkv_txn *txn, struct batch *b);
int mkv_batch_record(struct mkv_pool *p, struct mkv_txn *txn, const struct batch *b);
void mkv_batch_reset(struct mkv_pool *p, struct batch *b);
void mkv_batch_settle(struct mkv_pool *p, const struct batch *b);
void mkv_batch_free(struct batch *b);

/* commit.c: group commit, which only the lease holder runs */
enum mkv_op {
	MKV_OP_PUBLISH = MKV_RQ_PUBLISH,  /* key -> ext, length */
	MKV_OP_DEL = MKV_RQ_DEL,          /* key; its pages go to quarantine */
	MKV_OP_GRANT = MKV_RQ_GRANT,      /* ext.npages in; the granted extent out */
	MKV_OP_UNGRANT = MKV_RQ_UNGRANT,  /* ext back to the free set */
	MKV_OP_DETACH = MKV_RQ_DETACH,    /* every page granted to the client back */
	MKV_OP_RECLAIM = MKV_RQ_RECLAIM,  /* reap dead clients; out: pages freed */
	MKV_OP_EVICT = MKV_RQ_EVICT,      /* free_pct; out: keys evicted */
	MKV_OP_WATERMARKS = MKV_RQ_WATERMARKS,  /* wm_low, wm_high */
};
struct mkv_req {
	enum mkv_op op;
	uint32_t slot, inc;     /* the requesting client */
	const void *key;
	size_t klen;
	struct mkv_extent ext;  /* PUBLISH, UNGRANT: the pages; GRANT: npages in, extent out */
	uint64_t length;        /* PUBLISH: value bytes; GRANT: the fewest pages that will do */
	uint64_t checksum;      /* PUBLISH: of the value's bytes */
	uint64_t parent;        /* PUBLISH: key hash of its parent in a chain, or 0 */
	uint64_t free_pct;      /* EVICT: the percent of the pool wanted free */
	uint64_t wm_low, wm_high;  /* WATERMARKS: percent */
	uint64_t out;           /* RECLAIM, EVICT: what was done */
	int result;
	unsigned rq;            /* ring entry it came from (holder side) */
	uint32_t seq;           /* its sequence number; 0 for the holder's own calls */
	bool replayed;          /* answered from the registry's record of it */
	uint64_t held;          /* GRANT refused: the pin holding the quarantine back, 0 none */
	bool pending;           /* MKV_E_TIMEDOUT: sent, and may still be applied */
};
int mkv_commit(struct mkv_pool *p, struct mkv_req *reqs, unsigned n);

/* evict.c: the eviction policy and the clock of ages */
/* Ages: a hint is the tick (1 to 255) of the last read, 0 none. */
#define MKV_AGE_CAP 160U
static inline unsigned mkv_evict_age(uint64_t tick, uint8_t hint)
{
	return hint ? (unsigned)((tick + 255 - hint) % 255) : MKV_AGE_CAP;
}
/* The holder's tick, 1 to 255 whatever the shared word holds (0 before the first round: 1). */
static inline uint64_t mkv_evict_clock(const struct mkv_pool *p)
{
	uint64_t tick = __atomic_load_n(&p->state->tick, __ATOMIC_RELAXED);

	return tick ? (tick - 1) % 255 + 1 : 1;
}
/*
 * A read of the value at page: a plain store, no lock and no registry
 * write.  Between hosts, a hint written back with its line carries this
 * host's copy of the hints of neighbouring pages: the line is dropped
 * first, so that the copy is the device's, not one cached before those
 * values were published (a hint undone to 0 hides its value from
 * eviction, evict.c).  A store of another host between the two may still
 * be undone: hints only guide eviction.
 */
static inline void mkv_evict_touch(struct mkv_pool *p, uint64_t page)
{
	mkv_share_inval(p, &p->state->tick, sizeof(p->state->tick));
	mkv_share_inval(p, &p->hints[page], 1);
	__atomic_store_n(&p->hints[page], (uint8_t)mkv_evict_clock(p), __ATOMIC_RELAXED);
	mkv_share_wb(p, &p->hints[page], 1);
}
/* pct percent of the data pages, rounded up. */
static inline uint64_t mkv_evict_pct_pages(const struct mkv_pool *p, uint64_t pct)
{
	return (p->nr_pages * pct + 99) / 100;
}
/*
 * How the policy deletes the value of key, passed down by its caller:
 * 0 when the value went (*ext: its pages; *parent: its parent's key hash,
 * or 0), 1 when it was refused and stays, else the error that fails the
 * eviction (and the caller's txn).
 */
typedef int (*mkv_evict_del_fn)(void *arg, const void *key, size_t klen,
		struct mkv_extent *ext, uint64_t *parent);
int mkv_evict_to(struct mkv_pool *p, struct mkv_txn *txn, uint64_t have, uint64_t want,
		mkv_evict_del_fn del, void *arg, uint64_t *evicted);
struct mkv_evict;
int mkv_evict_dry(struct mkv_pool *p, unsigned free_pct, struct mkv_evict *report);
void mkv_evict_tick(struct mkv_pool *p, uint64_t pages);
uint64_t mkv_evict_room(const struct mkv_pool *p);
uint64_t mkv_evict_batch(const struct mkv_pool *p, uint64_t inflight);

/* hold.c: keys held against eviction */
int mkv_hold_init(struct mkv_pool *p);
void mkv_hold_fini(struct mkv_pool *p, bool forked);
void mkv_hold_sweep_begin(struct mkv_pool *p);
void mkv_hold_sweep_end(struct mkv_pool *p, bool committed);
int mkv_hold_gather(struct mkv_pool *p, uint64_t **set);
bool mkv_hold_has(const uint64_t *set, uint64_t hash);

/* recover.c: a new holder's rebuild, and the reaping of dead clients */
int mkv_recover(struct mkv_pool *p);
struct mkv_reclaim;
void mkv_recover_reap(struct mkv_pool *p, bool dry, struct mkv_reclaim *report);

/* holder.c: where writes go, and the service thread */
/*
 * How long a call waits for the lease holder: MKV_E_TIMEDOUT after that.
 * Between hosts, a takeover after a holder died inside its write window
 * takes a client timeout more (marukv(7), THE WRITE WINDOW), which may be
 * any number of lease periods.
 */
#define MKV_WAIT_PERIODS 30U
static inline uint64_t mkv_holder_timeout(const struct mkv_pool *p)
{
	return MKV_WAIT_PERIODS * p->lease_period_ns +
		(p->noncoherent ? p->client_timeout_ns : 0);
}
int mkv_holder_take(struct mkv_pool *p);
void mkv_holder_nudge(struct mkv_pool *p);
int mkv_holder_start(struct mkv_pool *p);
void mkv_holder_stop(struct mkv_pool *p);
int mkv_holder_write(struct mkv_pool *p, struct mkv_req *r, uint64_t timeout_ns);
int mkv_holder_write_many(struct mkv_pool *p, struct mkv_req *reqs, unsigned n);
int mkv_holder_call(struct mkv_pool *p, struct mkv_req *r);
int mkv_holder_write_async(struct mkv_pool *p, struct mkv_req *r, bool *posted, unsigned *idx,
		uint32_t *seq);

/* frame.c: the frame format; a frame sealed about a value copied in place (spill.c) */
#define MKV_FRAME_SUM 16U  /* bytes of the body's BLAKE3 hash in the header */
void mkv_frame_heads(uint8_t *hdr, unsigned tier, const void *key, size_t klen, size_t vlen,
		uint64_t parent);
void mkv_frame_seal(uint8_t *frame, unsigned tier, const void *key, size_t klen, size_t vlen,
		uint64_t parent);
int mkv_frame_read(const char *who, const void *buf, size_t len, struct mkv_frame *f);

/* spill.c: the remote tier's spills, setting and counters (remote.c: its calls) */
#define MKV_REMOTE_TTL_MAX (10U * 366 * 24 * 3600)
#define MKV_REMOTE_QUEUE_MIB_DEFAULT 64U
#define MKV_REMOTE_QUEUE_MIB_MAX 65536U
#define MKV_REMOTE_TIMEOUT_MS_DEFAULT 1000U
#define MKV_REMOTE_TIMEOUT_MS_MAX 60000U
int mkv_remote_init(struct mkv_pool *p);
void mkv_remote_fini(struct mkv_pool *p);
/* Queue an evicted value for the tier (the holder, inside the txn that deletes it). */
void mkv_remote_spill(struct mkv_pool *p, const void *key, size_t klen, uint64_t page,
		uint64_t length, uint64_t checksum, uint64_t parent);
void mkv_remote_stat(const struct mkv_pool *p, struct mkv_stat *st);
struct mkv_remote_conf *mkv_remote_conf_of(const struct mkv_pool *p);
int mkv_remote_conf_read(const struct mkv_pool *p, struct mkv_remote_conf *c, int tries,
		bool loud);
size_t mkv_remote_key(const struct mkv_remote_conf *c, const void *key, size_t klen,
		uint8_t *out);
void mkv_remote_count(struct mkv_pool *p, uint64_t *counter, uint64_t n);
int mkv_remote_client(const struct mkv_remote_conf *c, struct mkv_rc **rc, uint64_t *gen,
		int cancel_fd);

/* get.c, publish.c: mkv_get() and mkv_put() with the entry's parent key hash (transfer.c) */
int mkv_get_linked(struct mkv_pool *pool, const char *who, const void *key, size_t klen,
		struct mkv_view *view, uint64_t *parent);
int mkv_put_linked(struct mkv_pool *pool, const void *key, size_t klen, const void *val,
		size_t len, uint64_t parent);

#endif
