/* SPDX-License-Identifier: MIT */
/*
 * layout.h -- structures shared through the pool files.
 *
 * Everything here is read by several processes (and, on CXL, several hosts):
 * fixed-width fields, offsets instead of pointers, host byte order (the
 * pool is not portable across endianness), and every region that different
 * parties write starts on its own cacheline.
 *
 * super:
 *   [0, 4096)              struct mkv_super: written once at creation
 *   [4096, 8192)           struct mkv_state: allocator state (holder), the
 *                          lease record (a contender inside the bakery's
 *                          critical section), the doorbell of a coherent
 *                          pool (clients); at 4096 + MKV_REMOTE_OFF, struct
 *                          mkv_remote_conf (whoever configures the tier)
 *   nodes_off              max_nodes x struct mkv_node, each by its node
 *                          (a dead node's cleared by another)
 *   slots_off              max_clients x struct mkv_slot; in a non-coherent
 *                          pool node entry i's processes claim only slots
 *                          [i * k, (i + 1) * k), k = max_clients / max_nodes
 *   rq_off                 max_clients x MKV_RQ_DEPTH x struct mkv_rq
 *   pt_off                 nr_pages x uint64_t page states, by the holder
 *   hint_off               nr_pages x uint8_t access hints, by readers: the
 *                          tick when a value's first page was last read
 *   wlog_off               MKV_WLOG_RECS x struct mkv_wlog, by the holder:
 *                          the registry pages each recent commit wrote
 *   hold_off               max_clients x struct mkv_hold_block, each by
 *                          its slot's owner: the keys it holds (hold.c)
 *
 * Open-file-description locks on bytes of super, which guard nothing in
 * those bytes (and may lie past its end):
 *   byte i                      held by the owner of client slot i while it
 *                               lives (client.c); a claim of slot i takes it
 *                               first, so on one host a slot is never taken
 *                               from a live owner, revoked or not
 *   MKV_NODE_LOCK_BASE + i      node entry i's node-local lock: its
 *                               processes serialise on it (lease.c)
 * and flock() of super serialises registry writers (registry.c).
 */
#ifndef MKV_LAYOUT_H
#define MKV_LAYOUT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define MKV_CACHELINE 64
#define MKV_SUPER_MAGIC "MARUKV\x00\x01"
#define MKV_FORMAT_VERSION 14U
#define MKV_RQ_DEPTH 32U
#define MKV_ENTRY_VERSION 2U
#define MKV_REGISTRY_FORMAT 4U
/*
 * User keys live in LMDB's main database, whose lookups skip the search
 * for a named database's root that every fresh read txn makes.  The other
 * tables are named databases, and LMDB keeps their names as keys of the
 * main database: a name one byte longer than any user key cannot collide.
 */
#define MKV_TABLE_NAME_LEN 511U
#define MKV_TABLES 5U
#define MKV_SUPER_ALIGN 4096U
#define MKV_NODE_LOCK_BASE (1ULL << 32)

struct mkv_super {
	char magic[8];
	uint32_t version;      /* MKV_FORMAT_VERSION */
	uint32_t header_size;  /* sizeof(struct mkv_super) */
	uint8_t uuid[16];
	uint64_t page_size;
	uint64_t nr_pages;
	uint64_t data_size;    /* page_size * nr_pages */
	uint64_t registry_size;
	uint64_t super_size;   /* bytes of the super file */
	uint64_t state_off;
	uint64_t nodes_off;
	uint64_t slots_off;
	uint64_t rq_off;
	uint64_t pt_off;
	uint64_t hint_off;
	uint64_t wlog_off;
	uint64_t hold_off;
	uint32_t max_clients;
	uint32_t slot_size;
	uint32_t max_nodes;
	uint32_t rq_depth;
	uint32_t lease_period_ms;
	uint32_t client_timeout_ms;
	uint32_t coherence;    /* enum mkv_coherence */
	uint32_t reserved0;
	uint64_t ctime;        /* creation, seconds since the epoch */
	uint64_t csum;         /* FNV-1a 64 of every byte before this field */
};
static_assert(sizeof(struct mkv_super) == 184, "mkv_super is fixed-width");
static_assert(offsetof(struct mkv_super, csum) == 176, "csum is last");

/*
 * The lease record.  Changed only inside the bakery's critical section
 * (acquire, release).  The holder's heartbeat is in its node's entry, so
 * that no line of the record is written by anyone else.
 */
struct mkv_lease {
	uint64_t generation;   /* fencing token: +1 on every acquisition */
	uint32_t holder_node;  /* node index + 1; 0: nobody holds the lease */
	uint32_t holder_slot;
	uint32_t holder_pid;
	uint32_t reserved0;
	uint64_t reserved[5];
};
static_assert(sizeof(struct mkv_lease) == MKV_CACHELINE, "one cacheline");

/* Mutable shared state, one cacheline per writer. */
struct mkv_state {
	uint64_t rotor;        /* next-fit start for page allocation (holder) */
	uint64_t clock;        /* eviction's clock hand, a page number (holder) */
	uint64_t tick;         /* 1 to 255: what readers store in hints (holder) */
	uint64_t tick_pages;   /* pages evicted since the tick last advanced (holder) */
	uint64_t sweeps;       /* odd while an eviction's txn is under way (holder; hold.c) */
	uint64_t reserved0[3];
	struct mkv_lease lease;
	uint32_t doorbell;     /* coherent pools: clients bump it and wake the holder (futex) */
	uint32_t bell_sleepers; /* coherent pools: holder threads asleep on the doorbell */
	uint32_t reserved1[14];
};
static_assert(sizeof(struct mkv_state) == 3 * MKV_CACHELINE, "three cachelines");

/*
 * A node's entry, read by every node.  The first line is written by the
 * node's representative (the process holding the node-local lock), and
 * cleared by another node once every client of this one is dead (in a
 * non-coherent pool by the lease holder, inside its write window, once it
 * revoked every claim of the node's slots): choosing
 * and number are the node's variables in Lamport's bakery, beat shows it
 * is alive.  The second line is written by the node's own processes only
 * (one host: they share their caches): its lease holder's heartbeat and
 * the window in which it writes the registry and the page table, and the
 * doorbell its clients ring in a non-coherent pool.
 */
struct mkv_node {
	char name[32];         /* NUL-terminated; "" for a free entry */
	uint64_t id;           /* FNV-1a 64 of the name; 0 for a free entry */
	uint64_t choosing;
	uint64_t number;
	uint64_t beat;
	/* second line: this node's processes */
	uint64_t lease_beat;   /* counter the holder advances every period/4 */
	uint64_t lease_beat_wall_ns;  /* its CLOCK_REALTIME at that beat (display) */
	uint64_t write_gen;    /* generation of a holder inside a write window; 0 none */
	uint64_t write_owner;  /* that holder's slot owner word */
	uint32_t write_slot;   /* and slot */
	uint32_t doorbell;     /* non-coherent pools: this node's clients ring it (ring.c) */
	uint64_t reserved[3];
	/*
	 * third and fourth lines: the splitter through which a free entry is
	 * taken between hosts (lease.c node_split()), written by any node
	 * taking it; the holder that frees the entry opens the door and
	 * leaves race as it is (a node reads race only after storing its id)
	 */
	uint64_t race;         /* the last node id to enter */
	uint64_t reserved1[7];
	uint64_t door;         /* nonzero: closed, by the node id written */
	uint64_t reserved2[7];
};
static_assert(offsetof(struct mkv_node, lease_beat) == MKV_CACHELINE, "the holder's line");
static_assert(offsetof(struct mkv_node, race) == 2 * MKV_CACHELINE, "the splitter's lines");
static_assert(sizeof(struct mkv_node) == 4 * MKV_CACHELINE, "four cachelines");

/*
 * A client slot.  owner packs the claim: (incarnation << 32) | pid, pid 0
 * meaning free.  Every claim raises the incarnation, so grants recorded
 * under an older incarnation are recognisably orphaned.  Its owner holds
 * an open-file-description lock on byte <slot index> of super while it
 * lives (client.c).  The first two lines are written by the owner and by
 * claimants of the slot (processes of one host in a non-coherent pool);
 * a claim is revoked on the third, the lease holder's: no line has
 * writers on two hosts.
 */
struct mkv_slot {
	uint64_t owner;
	uint64_t boot;         /* owner's kernel: a hash of its boot id; 0 unknown */
	uint64_t boot_tag;     /* the owner value boot was written for */
	uint64_t node;         /* owner's node id */
	uint64_t flags;        /* MKV_RDONLY of the owner's open */
	uint64_t reserved0[3];
	/*
	 * second cacheline: the owner's alone (a reclaimer revokes the owner
	 * word above, and must not write back a line the owner writes)
	 */
	uint64_t beat;         /* advanced by the owner's service thread */
	uint64_t beat_wall_ns; /* its CLOCK_REALTIME at that beat (display) */
	uint64_t hits;         /* lookups that found their key: kept across owners */
	uint64_t misses;
	uint64_t pin;          /* registry txn bound of this client's views; 0 none */
	uint64_t posted;       /* requests posted, counted after each (the holder's hint) */
	uint64_t snap;         /* non-coherent pools: no newer than any registry snapshot
	                        * the owner reads (regsnap.c); 0 none */
	uint64_t sleepers;     /* coherent pools: the owner's threads asleep on completed */
	/* third cacheline: written by the lease holder */
	uint32_t completed;    /* bumped after posting results; the owner sleeps on it */
	uint32_t revoked;      /* incarnation of the last claim revoked (its owner judged dead) */
	uint32_t reserved2[14];
	/* fourth cacheline: the owner's remote tier counters, kept across owners (spill.c) */
	uint64_t spills;       /* frames stored in the tier */
	uint64_t spill_bytes;  /* their values' bytes */
	uint64_t drops;        /* evicted values not spilled: the queue was full, or the handle closed */
	uint64_t spill_errors; /* spills the tier refused or did not answer, or whose bytes were damaged */
	uint64_t fetches;      /* mkv_fetch() calls that asked the tier */
	uint64_t fetch_hits;   /* ... that imported a value */
	uint64_t fetch_misses; /* ... that found no frame */
	uint64_t fetch_errors; /* ... that failed: the tier, or a frame refused */
};
static_assert(sizeof(struct mkv_slot) == 4 * MKV_CACHELINE, "four cachelines");
static_assert(offsetof(struct mkv_slot, completed) == 2 * MKV_CACHELINE, "holder's line");
static_assert(offsetof(struct mkv_slot, spills) == 3 * MKV_CACHELINE, "the tier's line");

/*
 * The remote tier's configuration (spill.c, remote.c), MKV_REMOTE_OFF bytes into
 * super's state page.  Written by mkv_remote_set() under flock() of the
 * pool's directory, gen odd while it writes; a reader takes a copy whose
 * gen reads the same, and even, before and after it.  All zero: no tier.
 */
#define MKV_REMOTE_OFF 256U
struct mkv_remote_conf {
	uint64_t gen;          /* changes, x2; odd while written */
	uint32_t ttl_s;        /* spilled frames expire after this; 0 never */
	uint32_t queue_mib;    /* bound on the bytes waiting to spill, per holder */
	uint32_t timeout_ms;   /* bound on each exchange with the tier */
	uint32_t tier;         /* the MRDN tier label of spilled frames */
	uint64_t reserved[5];
	char prefix[64];       /* NUL-terminated: Redis keys are prefix + key */
	char servers[256];     /* NUL-terminated seed list; "" no tier */
};
static_assert(sizeof(struct mkv_remote_conf) == 6 * MKV_CACHELINE, "six cachelines");
static_assert(MKV_REMOTE_OFF >= sizeof(struct mkv_state) &&
		MKV_REMOTE_OFF + sizeof(struct mkv_remote_conf) <= 4096, "in the state page");

/*
 * A request from a client to the lease holder.  The client fills the
 * first part and publishes it by storing seq last; the holder answers in
 * the last cacheline: done = (seq << 32) | (uint32_t)result, stored after
 * out_page.  A request is pending while done's upper half differs from seq.
 */
enum mkv_rq_op {
	MKV_RQ_PUBLISH = 1,
	MKV_RQ_DEL = 2,
	MKV_RQ_GRANT = 3,
	MKV_RQ_UNGRANT = 4,
	MKV_RQ_DETACH = 5,
	MKV_RQ_RECLAIM = 6,
	MKV_RQ_EVICT = 7,
	MKV_RQ_WATERMARKS = 8,
};
struct mkv_rq {
	uint32_t seq;
	uint32_t op;
	uint32_t inc;          /* incarnation of the submitting client's slot */
	uint32_t klen;
	uint64_t page;         /* WATERMARKS: the low watermark, percent */
	uint64_t npages;       /* EVICT: free percent wanted; WATERMARKS: the high watermark */
	uint64_t length;
	uint64_t checksum;
	uint64_t parent;
	uint64_t reserved0;
	uint8_t key[512];
	/* last cacheline: written by the holder */
	uint64_t done;
	uint64_t out_page;
	uint64_t out_npages;   /* GRANT: the pages granted (at least length, at most npages) */
	uint64_t reserved1[5];
};
static_assert(sizeof(struct mkv_rq) == 640, "mkv_rq is fixed-width");
static_assert(offsetof(struct mkv_rq, done) == 576, "holder's line");

/*
 * The registry pages a commit wrote, for readers on hosts without coherence
 * to invalidate (regwlog.c): record txn % MKV_WLOG_RECS.  The holder clears
 * txn, writes the ranges, then txn, each written back before the next; a
 * reader takes a record whose txn reads the same before and after its
 * ranges.  n == MKV_WLOG_ALL: the pages are not known (too many ranges, or
 * a holder that did not see the commit before), every page may have changed.
 */
#define MKV_WLOG_RECS 32U
#define MKV_WLOG_RANGES 120U
#define MKV_WLOG_ALL UINT32_MAX
struct mkv_wlog {
	uint64_t txn;          /* the registry txn whose pages these are; 0 while written */
	uint32_t n;            /* ranges below, or MKV_WLOG_ALL */
	uint32_t reserved0;
	uint64_t reserved[6];
	uint32_t range[MKV_WLOG_RANGES][2];  /* first page, pages: ascending, apart */
};
static_assert(sizeof(struct mkv_wlog) == 16 * MKV_CACHELINE, "sixteen cachelines");

/*
 * The keys a client holds against eviction (hold.c), one block per client
 * slot, written by the slot's owner only: bit b of bits is set while the
 * owner holds a key whose hash is b modulo MKV_HOLD_BUCKETS.  The bits
 * count only while owner is the slot's owner word and that claim stands.
 */
#define MKV_HOLD_SIZE 4096U
#define MKV_HOLD_BUCKETS ((MKV_HOLD_SIZE - MKV_CACHELINE) * 8U)
struct mkv_hold_block {
	uint64_t owner;        /* the claim the bits are of; 0: none */
	uint64_t buckets;      /* bits set; 0: nothing held */
	uint64_t reserved[6];
	uint64_t bits[MKV_HOLD_BUCKETS / 64];
};
static_assert(sizeof(struct mkv_hold_block) == MKV_HOLD_SIZE, "one page per slot");

#define MKV_SLOT_PID(o) ((uint32_t)((o) & 0xffffffffU))
#define MKV_SLOT_INC(o) ((uint32_t)((o) >> 32))
#define MKV_SLOT_OWNER(inc, pid) (((uint64_t)(inc) << 32) | (uint32_t)(pid))

/*
 * Page state word: state in bits 0-7; for GRANTED the owner slot in bits
 * 8-31 and the owner's incarnation in bits 32-63; for USED and QUARANTINED
 * the low 32 bits of the generation of the holder that set it in bits
 * 32-63.  Holders change words by compare-and-swap from the exact word they
 * expect, so a holder that lost the lease cannot undo what its successor
 * did.
 */
enum mkv_page_state {
	MKV_PG_FREE = 0,
	MKV_PG_GRANTED = 1,
	MKV_PG_USED = 2,
	MKV_PG_QUARANTINED = 3,
};
#define MKV_PG_STATE(w) ((unsigned)((w) & 0xffU))
#define MKV_PG_SLOT(w) ((uint32_t)(((w) >> 8) & 0xffffffU))
#define MKV_PG_INC(w) ((uint32_t)((w) >> 32))
#define MKV_PG_WORD(state, slot, inc) \
	((uint64_t)(state) | ((uint64_t)(slot) << 8) | ((uint64_t)(inc) << 32))

/* Registry value of `entries`: user key -> where its bytes are. */
struct mkv_entry {
	uint8_t version;       /* MKV_ENTRY_VERSION */
	uint8_t flags;
	uint16_t reserved0;
	uint32_t reserved1;
	uint64_t page;         /* first page */
	uint64_t npages;
	uint64_t length;       /* value bytes */
	uint64_t checksum;     /* 0: none recorded */
	uint64_t txn;          /* registry txn that published it */
	uint64_t parent;       /* key hash of the block before it in its chain; 0: none */
};
static_assert(sizeof(struct mkv_entry) == 56, "mkv_entry is fixed-width");

/*
 * Registry value of `answers`, keyed by the request entry: its index in
 * super's table of entries, slot * MKV_RQ_DEPTH + index, as a big-endian
 * u64.  The last request from it that the holder applied and what it
 * answered.  Written in the txn that applies the request, so a
 * request re-drained after a takeover gets this answer instead of being
 * applied twice.
 */
struct mkv_answer_rec {
	uint32_t inc;          /* incarnation of the client that asked */
	uint32_t seq;          /* its sequence number */
	int32_t result;
	uint32_t reserved;
	uint64_t page;         /* GRANT: the extent granted; DEL: the extent freed */
	uint64_t npages;
};
static_assert(sizeof(struct mkv_answer_rec) == 32, "mkv_answer_rec is fixed-width");

/* An extent of pages, as stored in `freed` values (an array of them). */
struct mkv_extent {
	uint64_t page;
	uint64_t npages;
};
static_assert(sizeof(struct mkv_extent) == 16, "mkv_extent is fixed-width");

#endif
