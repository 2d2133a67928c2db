/* SPDX-License-Identifier: MIT */
/**
 * @file marukv.h
 * @brief marukv: an embedded key-value engine for KV-cache blocks in shared memory.
 *
 * A process opens a *pool* (a directory holding a superblock, an LMDB key
 * registry and a data arena), allocates buffers in the pool's data arena,
 * fills them in place and publishes them under a key.  Any other process that
 * opens the same pool looks the key up and gets a zero-copy view of the bytes,
 * valid until it releases the view.
 *
 * Conventions:
 *  - Every function that can fail returns 0 (or a count) on success and a
 *    negative code on failure: -errno where one fits, an MKV_E_* code from
 *    marukv's own band otherwise.  mkv_strerror() names any code;
 *    mkv_errormsg() gives the calling thread's detailed message for its last
 *    failed call.
 *  - Out-parameters come last.  Constructors set *out to NULL on failure;
 *    destructors accept NULL and set the caller's pointer to NULL.
 *  - Keys are 1 to MKV_KEY_MAX bytes of any content.
 *  - A pool handle may be used by several threads at once.  It must not be
 *    used in a child after fork(); the child opens the pool itself.  In a
 *    child, every call on an inherited handle fails with MKV_E_INVAL, and
 *    mkv_pool_close() frees only the child's own memory: the parent's
 *    client slot, views and lease are untouched.
 *  - A handle whose client was judged dead while it was still running
 *    (paused longer than the pool's client timeout, see
 *    mkv_opts_set_client_timeout()) has lost its client slot: every later
 *    call on it fails with MKV_E_EXPIRED, and its views may have changed.
 *    Close it and open the pool again.
 *  - Waits are bounded.  A call that needs the lease holder and gets no
 *    answer within 30 lease periods fails with MKV_E_TIMEDOUT.
 *  - A call that reads the registry fails as its registry read transaction
 *    can: MKV_E_CORRUPT (a registry page is damaged), MKV_E_USERS (every
 *    reader slot of the registry is taken), MKV_E_NOMEM, MKV_E_INTERNAL (an
 *    unexpected failure inside LMDB).  The lists below call these "the
 *    registry read's errors".  A write is applied by the lease holder (this
 *    handle, or another process's) in a registry write transaction, which
 *    can fail with MKV_E_NOMEM, MKV_E_CORRUPT (the registry or the page
 *    table is damaged), MKV_E_IO (the registry could not be written) and
 *    MKV_E_INTERNAL: "the registry write's errors".
 *  - The library never writes to stdout or stderr.
 */
#ifndef MARUKV_H
#define MARUKV_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MARUKV_BUILDING) && defined(__GNUC__)
#define MKV_EXPORT __attribute__((visibility("default")))
#else
#define MKV_EXPORT
#endif

/** Longest key, in bytes (one less than LMDB's default key limit). */
#define MKV_KEY_MAX 510
/** Longest node name, in bytes. */
#define MKV_NODE_NAME_MAX 31

/**
 * @defgroup errors Error codes
 * Codes that have an errno counterpart are that errno, negated; the rest
 * sit in a band of their own, below every errno.
 * @{
 */
#define MKV_E_INVAL    (-EINVAL)  /**< bad argument (NULL, key length, flags, size) */
#define MKV_E_NOMEM    (-ENOMEM)  /**< out of process memory */
#define MKV_E_NOSPC    (-ENOSPC)  /**< pool (data arena or registry) is full */
#define MKV_E_EXISTS   (-EEXIST)  /**< key already published (write-once) */
#define MKV_E_NOENT    (-ENOENT)  /**< no pool at that path (and MKV_CREATE not given) */
#define MKV_E_USERS    (-EUSERS)  /**< every client slot of the pool is taken */
#define MKV_E_IO       (-EIO)     /**< I/O error from the backing files */
#define MKV_E_TIMEDOUT (-ETIMEDOUT) /**< no lease holder answered in time (30 lease periods) */
#define MKV_E_PERM     (-EPERM)   /**< the pool's directory or files are unsafe to use
                                       (owned by another user, writable by others, a
                                       symbolic link): see marukv(7), SECURITY */
#define MKV_E_BASE     (-10000)   /**< start of marukv's own band */
#define MKV_E_NOTFOUND (-10001)   /**< no such key */
#define MKV_E_RDONLY   (-10002)   /**< write call on a pool opened MKV_RDONLY */
#define MKV_E_NOTPOOL  (-10003)   /**< the path holds something that is not a marukv pool */
#define MKV_E_CORRUPT  (-10004)   /**< pool is damaged or truncated */
#define MKV_E_VERSION  (-10005)   /**< pool has a format version this library does not know */
#define MKV_E_INTERNAL (-10006)   /**< unexpected failure inside a dependency; see mkv_errormsg() */
#define MKV_E_EXPIRED  (-10007)   /**< this handle's client slot was taken away (it was judged
                                       dead): its views may have changed; reopen the pool */
#define MKV_E_RANGE    (-ERANGE)  /**< a frame does not fit the caller's buffer, or MRDN v1 */
#define MKV_E_FRAME_MAGIC (-10008) /**< not an MRDN frame: its first 4 bytes are not "MRDN" */
#define MKV_E_FRAME_VERSION (-10009) /**< an MRDN frame of another version, or with header
                                          padding that is not zero */
#define MKV_E_FRAME_SHORT (-10010) /**< fewer bytes than the frame's header and body_len say */
#define MKV_E_FRAME_CHECKSUM (-10011) /**< the body does not match the frame's checksum */
#define MKV_E_FRAME_BODY (-10012)  /**< the body, checksum intact, is not a marukv value */
#define MKV_E_REMOTE (-10013)     /**< the remote tier did not answer, or answered an error
                                       (see mkv_fetch() and marukv(7), REMOTE TIER) */
#define MKV_E_LAST     (-10013)
/** @} */

/** Opaque handle of an open pool. */
struct mkv_pool;
/** Opaque creation/open options. */
struct mkv_opts;

/** A key as a pointer and a length, for the batched calls. */
struct mkv_key {
	const void *data;
	size_t len;
};

/**
 * A writable buffer in the pool's data arena, from mkv_alloc().
 * The caller writes up to @c len bytes at @c data.  It may lower @c len
 * (not below 1) before publishing fewer bytes; it must not raise it.  The
 * other fields are the library's: the library checks every buffer against
 * its own record of what it handed out, and refuses a copy of a buffer
 * that was published or aborted, or one whose fields were changed.
 */
struct mkv_buf {
	void *data;
	size_t len;
	uint64_t priv_[2];
};

/**
 * A zero-copy, read-only view of a published value, from mkv_get().
 * The bytes at @c data stay valid and unchanged until mkv_release(), even if
 * the key is deleted meanwhile, as long as the handle's client is alive
 * (see MKV_E_EXPIRED).  The other fields are the library's; a view is
 * released once, and a copy of a released view is refused.
 */
struct mkv_view {
	const void *data;
	size_t len;
	uint64_t priv_[2];
};

/** Longest remote tier seed list (struct mkv_remote), in bytes. */
#define MKV_REMOTE_SERVERS_MAX 255U
/** Longest remote tier Redis key prefix, in bytes. */
#define MKV_REMOTE_PREFIX_MAX 63U

/** Figures of a pool, from mkv_pool_stat(). Counts are of the moment. */
struct mkv_stat {
	uint32_t format_version;  /**< on-pool format version */
	uint32_t page_size;       /**< bytes per data page */
	uint64_t pages_total;     /**< pages in the data arena */
	uint64_t pages_used;      /**< pages holding published values */
	uint64_t pages_free;      /**< pages anyone may be granted */
	uint64_t pages_quarantined; /**< pages of deleted values, waiting for readers */
	uint64_t pages_granted;   /**< pages handed to writers, not yet published */
	uint64_t entries;         /**< published keys */
	uint64_t bytes_stored;    /**< sum of published value lengths */
	uint64_t registry_size;   /**< bytes of the registry file (LMDB map size) */
	uint64_t registry_used;   /**< bytes of the registry in use (LMDB pages) */
	uint32_t max_clients;     /**< client slots */
	uint32_t clients;         /**< slots in use */
	uint8_t uuid[16];         /**< pool identity, fixed at creation */
	uint64_t lease_generation; /**< fencing token of the current or last holder */
	uint32_t lease_period_ms; /**< the pool's lease period */
	uint32_t lease_holder_pid; /**< pid of the holder on its node; 0 if none */
	uint32_t lease_holder_slot; /**< client slot of the holder; 0 if none */
	uint32_t lease_holder_node_idx; /**< node table index of the holder; 0 if none */
	char lease_holder_node[MKV_NODE_NAME_MAX + 1]; /**< holder's node name, "" if none */
	int64_t lease_heartbeat_age_ms; /**< now minus the holder's last heartbeat, by wall clocks; -1 if none */
	uint64_t requests_pending; /**< registrations waiting for the holder */
	uint64_t hits;            /**< lookups that found their key, since creation */
	uint64_t misses;          /**< lookups that did not */
	uint64_t evictions;       /**< keys evicted, since creation */
	uint32_t backing;         /**< enum mkv_backing of the data arena */
	uint32_t client_timeout_ms; /**< the pool's client timeout */
	char dax_device[32];      /**< devdax: the device's name (daxX.Y), else "" */
	uint64_t dax_align;       /**< devdax: its alignment in bytes, else 0 */
	uint32_t low_watermark;   /**< percent; 0: no automatic eviction */
	uint32_t high_watermark;  /**< percent */
	uint32_t max_nodes;       /**< entries of the node table */
	uint32_t nodes;           /**< entries in use */
	uint32_t mode;            /**< permission bits of the pool's files: 0600, or 0660 with a group */
	uint32_t gid;             /**< the pool's group when mode is 0660, else 0 */
	uint32_t coherence;       /**< enum mkv_coherence of the pool's memory */
	uint32_t reserved32_;
	/**
	 * Non-coherent pools (0 otherwise): this handle's moves to a newer
	 * registry snapshot that dropped from its host's caches only the pages
	 * the lease holder logged as written since, and those that dropped
	 * every page in use (the first, and any after the log ran past).
	 */
	uint64_t registry_fresh_logged;
	uint64_t registry_fresh_whole;
	/**
	 * The remote tier (mkv_remote_set()): its seed list, "" if none, and
	 * what every process did with it since the pool was created.
	 */
	char remote_servers[MKV_REMOTE_SERVERS_MAX + 1];
	uint64_t remote_spills;       /**< evicted values stored in the tier */
	uint64_t remote_spill_bytes;  /**< their bytes */
	uint64_t remote_drops;        /**< evicted values not spilled: queue full, or closed */
	uint64_t remote_spill_errors; /**< spills refused, unanswered, or of damaged bytes */
	uint64_t remote_fetches;      /**< mkv_fetch() calls that asked the tier */
	uint64_t remote_fetch_hits;   /**< ... and imported the value */
	uint64_t remote_fetch_misses; /**< ... and found no frame */
	uint64_t remote_fetch_errors; /**< ... and failed */
};

/** What backs a pool's data arena. */
enum mkv_backing {
	MKV_BACKING_FILE = 0,   /**< a page-cache file on a non-DAX filesystem */
	MKV_BACKING_TMPFS = 1,  /**< a file on tmpfs (shared memory) */
	MKV_BACKING_FSDAX = 2,  /**< a file on a DAX filesystem (cache line flushes) */
	MKV_BACKING_DEVDAX = 3, /**< a device-DAX node, identified with libdaxctl */
};

/**
 * A static name for an enum mkv_backing value (mkv_stat's backing): "file",
 * "tmpfs", "fsdax" or "devdax"; "unknown" for any other value.
 */
MKV_EXPORT const char *mkv_backing_name(uint32_t backing);

/** @defgroup version Version
 * @{ */
/** Library version as "MAJOR.MINOR.PATCH", a static string. */
MKV_EXPORT const char *mkv_version(void);
/** @} */

/** @defgroup errfn Errors
 * @{ */
/**
 * Static text for a code returned by any mkv_* function (0, -errno or
 * MKV_E_*).  Never NULL; unknown codes get a generic text.
 */
MKV_EXPORT const char *mkv_strerror(int code);
/**
 * The calling thread's message for its last failed mkv_* call, saying what
 * went wrong and where ("pool /dev/shm/x: data file is 4096 bytes, expected
 * 1048576").  An empty string after a call that succeeded.  The buffer is
 * thread-local and overwritten by the thread's next mkv_* call.
 */
MKV_EXPORT const char *mkv_errormsg(void);
/** @} */

/** @defgroup log Logging
 * The library writes nothing to stdout or stderr on its own.  A program
 * that wants its events (a dead client's slot taken over, orphaned pages
 * reclaimed, stale registry readers cleared) installs a callback.  Without
 * one, setting MARUKV_LOG to a level (1 error ... 4 debug) in the
 * environment sends messages at or below that level to stderr.
 * @{ */
enum mkv_log_level {
	MKV_LOG_ERR = 1,
	MKV_LOG_WARN = 2,
	MKV_LOG_INFO = 3,
	MKV_LOG_DEBUG = 4,
};
/** A log callback: level, a one-line message without newline, the caller's arg. */
typedef void (*mkv_log_fn)(enum mkv_log_level level, const char *msg, void *arg);
/**
 * Install @p fn (NULL: back to the MARUKV_LOG behaviour) for messages at
 * or below @p max_level, process-wide.  Call it before opening pools; it
 * is not synchronised with calls running in other threads.
 */
MKV_EXPORT void mkv_set_log(mkv_log_fn fn, enum mkv_log_level max_level, void *arg);
/** @} */

/** @defgroup opts Options
 * Parameters for mkv_pool_open().  All but the node name are creation
 * parameters, used only when the call creates the pool; an existing pool
 * keeps the parameters it was created with.  Setters check their argument
 * and return MKV_E_INVAL for a value out of range, leaving the option
 * unchanged.
 * @{ */
/** Default data arena size: 256 MiB. */
#define MKV_DEFAULT_DATA_SIZE (256ULL << 20)
/** Default page size: 64 KiB. */
#define MKV_DEFAULT_PAGE_SIZE (64U << 10)
/** Default number of client slots. */
#define MKV_DEFAULT_MAX_CLIENTS 64U
/** Upper bound for max_clients. */
#define MKV_MAX_CLIENTS_LIMIT 4096U

/** New options with the defaults above. Errors: MKV_E_INVAL, MKV_E_NOMEM. */
MKV_EXPORT int mkv_opts_new(struct mkv_opts **out);
/** Free options; accepts NULL and NULLs *opts. */
MKV_EXPORT void mkv_opts_delete(struct mkv_opts **opts);
/**
 * Size of the data arena in bytes; rounded up to a whole page.  At least
 * one page, at most 2^46 bytes.  Errors: MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_data_size(struct mkv_opts *opts, uint64_t bytes);
/** Page size: a power of two from 4 KiB to 1 GiB. Errors: MKV_E_INVAL. */
MKV_EXPORT int mkv_opts_set_page_size(struct mkv_opts *opts, uint32_t bytes);
/** Client slots: 1 to MKV_MAX_CLIENTS_LIMIT. Errors: MKV_E_INVAL. */
MKV_EXPORT int mkv_opts_set_max_clients(struct mkv_opts *opts, uint32_t n);
/**
 * Size of the registry file (the fixed LMDB map size), 1 MiB to 2^40 bytes;
 * 0 (the default) sizes it from the number of pages.  Errors: MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_registry_size(struct mkv_opts *opts, uint64_t bytes);
/** Default lease period: 1000 ms. */
#define MKV_DEFAULT_LEASE_PERIOD_MS 1000U
/**
 * Lease period, 50 ms to 60 s (creation parameter).  A lease holder whose
 * heartbeat stood still this long, by a contender's own clock, may be
 * replaced; a holder that could not renew within half of it stops writing.
 * Errors: MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_lease_period(struct mkv_opts *opts, uint32_t ms);
/** Default eviction watermarks: eviction on, in batches of 1/128 of the pool. */
#define MKV_DEFAULT_LOW_WATERMARK 1U
#define MKV_DEFAULT_HIGH_WATERMARK 1U
/**
 * Eviction watermarks, in percent of the data pages (creation parameter;
 * mkv_pool_set_watermarks() changes them later).  @p low_pct 0 turns
 * automatic eviction off; otherwise the lease holder keeps free what the
 * writers have in flight and evicts cold values when a grant finds less,
 * each time at least 1/128 of the pool and at least @p high_pct minus
 * @p low_pct percent of it.  0 <= low <= high <= 90.  Errors: MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_watermarks(struct mkv_opts *opts, unsigned low_pct,
		unsigned high_pct);
/** Default number of node table entries. */
#define MKV_DEFAULT_MAX_NODES 32U
/** Upper bound for max_nodes. */
#define MKV_MAX_NODES_LIMIT 1024U
/**
 * Entries of the node table, 1 to MKV_MAX_NODES_LIMIT (creation
 * parameter): how many nodes (hosts, or containers with node names of
 * their own) can have the pool open at once.  The entry of a node none of
 * whose clients is alive is reclaimed.  Errors: MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_max_nodes(struct mkv_opts *opts, uint32_t n);
/**
 * Share the pool with the members of group @p gid (creation parameter):
 * its directory is created mode 0750 and its files 0660, all of that
 * group (members use the pool's files; only its owner adds or removes
 * any).  Without it (the default) the directory is 0700 and the files
 * 0600: only their owner (and root) can open the pool.  The umask does
 * not apply.  The creating process must be a member of the group (or
 * root), else creation fails with MKV_E_PERM.  Errors: MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_group(struct mkv_opts *opts, gid_t gid);
/** Default client timeout: 10000 ms. */
#define MKV_DEFAULT_CLIENT_TIMEOUT_MS 10000U
/**
 * Client timeout, 100 ms to 1 h (creation parameter): a client on another
 * host (another kernel) whose heartbeat stood still this long is dead, and
 * what it held is reclaimed; if it was only paused, its handle fails with
 * MKV_E_EXPIRED from then on.  (Clients on the same host, in any PID
 * namespace, are judged exactly, by a lock the kernel drops when they
 * die.)  Errors: MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_client_timeout(struct mkv_opts *opts, uint32_t ms);
/**
 * Name of the node (host) this handle runs on, 1 to MKV_NODE_NAME_MAX
 * characters of [A-Za-z0-9._-] (an open parameter, used on every open).
 * Without it, $MARUKV_NODE, else the host name.  Processes of one node
 * share a node-local lock; nodes compete for the lease with a protocol
 * that needs no atomics between them.  Errors: MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_node(struct mkv_opts *opts, const char *name);
/** What a pool's memory guarantees between the processes that share it. */
enum mkv_coherence {
	/** One host, or CXL memory the hardware keeps coherent: the default. */
	MKV_COHERENT = 1,
	/**
	 * Memory several hosts cache without coherence between them (CXL
	 * Type-3 memory shared by a rack): every load of a word another host
	 * may have written is preceded by an invalidation of its cache lines,
	 * every store others must see is followed by a flush, and no atomic
	 * instruction is shared between hosts (marukv(7), NON-COHERENT MEMORY).
	 */
	MKV_NONCOHERENT = 2,
};
/**
 * The pool's memory model (creation parameter, stored in the pool and obeyed
 * by every opener): MKV_COHERENT or MKV_NONCOHERENT.  A non-coherent pool
 * also works from a single host, at the cost of its flushes.  Errors:
 * MKV_E_INVAL.
 */
MKV_EXPORT int mkv_opts_set_coherence(struct mkv_opts *opts, enum mkv_coherence coherence);
/**
 * A static name for an enum mkv_coherence value (mkv_stat's coherence):
 * "coherent" or "non-coherent"; "unknown" for any other value.
 */
MKV_EXPORT const char *mkv_coherence_name(uint32_t coherence);
/** @} */

/** @defgroup pool Pool
 * @{ */
#define MKV_CREATE 0x1U  /**< create the pool (and its directory) if absent */
#define MKV_RDONLY 0x2U  /**< look up and read only; write calls get MKV_E_RDONLY */
#define MKV_VERIFY 0x4U  /**< mkv_get() and mkv_get_batch() check each value's checksum */
/**
 * Publish without recording checksums: mkv_put() hashes as it copies, but
 * mkv_publish() reads the caller's value back to hash it.
 */
#define MKV_NOCHECKSUM 0x8U
#define MKV_OPEN_VALID (MKV_CREATE | MKV_RDONLY | MKV_VERIFY | MKV_NOCHECKSUM)
/** The pool mkv_pool_open() opens for a NULL path when $MARUKV_POOL is unset or empty. */
#define MKV_DEFAULT_POOL "/dev/shm/marukv"

/**
 * Open the pool at @p path, creating it if @p flags has MKV_CREATE and it
 * does not exist yet.
 * @param path  pool directory; NULL means $MARUKV_POOL (unless empty),
 *              else MKV_DEFAULT_POOL (/dev/shm/marukv).  An empty string
 *              is MKV_E_INVAL.
 * @param flags MKV_CREATE, MKV_RDONLY (not both).
 * @param opts  creation parameters, or NULL for the defaults; not retained.
 * @param out   the handle on success, NULL on failure.
 * Each handle takes a client slot in the pool until mkv_pool_close().
 * All pool files are preallocated at creation, so a filesystem without room
 * fails here with MKV_E_NOSPC rather than later.
 * A writable handle takes the single-writer lease if nobody holds it, and
 * then runs a holder thread until close.
 * The pool's directory must be a directory (not a symbolic link) owned
 * by the caller or root and not writable by others; its files must be
 * regular files (or, for data, a device-DAX node), not links: see
 * marukv(7), SECURITY.
 * A read-only handle needs read access to data and registry.mdb, and
 * read-write access to super and registry.mdb-lock (for its client slot
 * and its read pins; a non-coherent pool's registry.mdb-lock is in this
 * host's lock directory, under $MARUKV_LOCK_DIR or /dev/shm: marukv(7)).
 * Errors: MKV_E_INVAL (flags, an empty path; a node name from $MARUKV_NODE
 * or the host name that is not valid, host names being cut to
 * MKV_NODE_NAME_MAX; a $MARUKV_LOCK_DIR that is not an absolute path), MKV_E_NOENT (no pool, no MKV_CREATE), MKV_E_NOTPOOL
 * (something else is there), MKV_E_CORRUPT (damaged or truncated pool),
 * MKV_E_VERSION (unknown format version), MKV_E_NOSPC (no room to
 * create), MKV_E_USERS (no free client slot, the node table is full of
 * live nodes, or every reader slot of the registry is taken), MKV_E_PERM
 * (an unsafe directory or file, this host's lock directory of a
 * non-coherent pool among them, a group the caller cannot give files
 * to, or, with MKV_CREATE, a path whose directory changed between its
 * making and its opening eight times in a row, or was removed while the
 * pool was made in it), MKV_E_TIMEDOUT (another process held the pool directory's lock for
 * a minute), MKV_E_NOMEM, MKV_E_INTERNAL (an unexpected failure inside
 * LMDB or libpmem2), -EACCES (a file the caller may not open as needed;
 * the message names it) and other -errno from the filesystem.
 */
MKV_EXPORT int mkv_pool_open(const char *path, unsigned flags,
		const struct mkv_opts *opts, struct mkv_pool **out);
/**
 * Close a pool handle: returns unpublished grants, gives up the client
 * slot.  Views and buffers of this handle become invalid.  Accepts NULL
 * and NULLs *pool.  Never waits longer than a few lease periods.  In a
 * child after fork(), frees only the child's memory.
 */
MKV_EXPORT void mkv_pool_close(struct mkv_pool **pool);
/**
 * Current figures of the pool, read in one registry snapshot.
 * Errors: MKV_E_INVAL, MKV_E_EXPIRED, and the registry read's errors.
 */
MKV_EXPORT int mkv_pool_stat(struct mkv_pool *pool, struct mkv_stat *st);
/**
 * A progress callback for mkv_pool_verify(), the long pool-wide check:
 * @p done of @p total entries so far.  Called from the calling
 * thread, at most a few times a second.
 */
typedef void (*mkv_progress_fn)(uint64_t done, uint64_t total, void *arg);
/** Install a progress callback on this handle (NULL: none). */
MKV_EXPORT void mkv_pool_set_progress(struct mkv_pool *pool, mkv_progress_fn fn, void *arg);

#define MKV_VERIFY_DEEP 0x1U  /**< also check every value's checksum */
#define MKV_VERIFY_VALID MKV_VERIFY_DEEP
/** What mkv_pool_verify() found. */
struct mkv_verify {
	uint64_t entries;         /**< registry entries checked */
	uint64_t pages_used;      /**< pages of those entries */
	uint64_t pages_quarantined; /**< pages in quarantine records */
	uint64_t pages_leaked;    /**< pages marked taken that nothing owns (reclaimable) */
	uint64_t checksums_checked; /**< values whose checksum was checked (MKV_VERIFY_DEEP) */
	uint64_t checksums_bad;   /**< of those, values whose bytes do not match */
	uint64_t problems;        /**< inconsistencies: overlaps, bad records, a used page
	                               marked free, a bad checksum */
	char first_problem[256];  /**< the first problem, "" if none */
};
/**
 * Check the registry against the page table in one snapshot: every entry's
 * pages in the arena and marked used, no page owned by two entries, the
 * pages index matching the entries, quarantine records disjoint from
 * entries; with MKV_VERIFY_DEEP, every value's bytes against the checksum
 * recorded when it was published.  Leaked pages (marked taken, owned by
 * nothing) are counted but are not problems: the lease holder reclaims
 * them.  A registry file whose structure is damaged (a page LMDB would read
 * outside its map) is reported as the one problem, before anything is read
 * through LMDB.
 * Returns 0 if there is no problem, MKV_E_CORRUPT if there are (see
 * @p report); MKV_E_INVAL (a NULL argument, unknown flags), MKV_E_EXPIRED,
 * MKV_E_NOMEM, or the registry read's errors if the check could not run.
 */
MKV_EXPORT int mkv_pool_verify(struct mkv_pool *pool, unsigned flags, struct mkv_verify *report);

#define MKV_DRY_RUN 0x1U  /**< report what would be done, change nothing */
/** What mkv_pool_reclaim() did (or, with MKV_DRY_RUN, would do). */
struct mkv_reclaim {
	uint32_t clients;         /**< dead clients whose slots were freed */
	uint32_t readers;         /**< stale registry (LMDB) readers cleared */
	uint64_t pins;            /**< pins of dead clients dropped */
	uint64_t pages;           /**< granted or leaked pages returned to the free set */
	uint64_t requests;        /**< dead clients' pending requests answered or dropped */
	uint64_t nodes;           /**< node table entries of nodes left with no live client, freed */
	uint64_t reserved_[3];
};
/**
 * Reclaim what dead clients left: their slots, pins, granted pages and
 * pending requests, and stale LMDB readers.  The lease holder does this on
 * its own all the time; this call does it now (through the holder, taking
 * the lease if nobody holds it).  A client on this node is dead when its
 * process is gone; on another node, when its heartbeat stood still for the
 * pool's client timeout: when there are clients of other nodes, this call
 * watches them for up to that long before it judges.
 * Errors: MKV_E_INVAL (NULL, unknown flags), MKV_E_RDONLY (without
 * MKV_DRY_RUN), MKV_E_NOSPC (registry full, as for mkv_del()),
 * MKV_E_EXPIRED, MKV_E_TIMEDOUT, MKV_E_NOMEM, and the registry write's
 * errors.
 */
MKV_EXPORT int mkv_pool_reclaim(struct mkv_pool *pool, unsigned flags, struct mkv_reclaim *report);

/** What mkv_pool_evict() did (or would do). */
struct mkv_evict {
	uint64_t keys;            /**< keys evicted */
	uint64_t pages;           /**< their pages (quarantined until readers let go) */
	uint64_t pages_free;      /**< free pages after the call */
	uint64_t reserved_[4];
};
/**
 * Evict keys until at least @p free_pct percent of the pages are free or
 * quarantined, least recently read first, and the blocks of a chain (see
 * mkv_publish_chain()) from its tail to its head.  Views of evicted keys
 * stay valid.  With MKV_DRY_RUN, the same policy runs over a snapshot and
 * only counts.  Errors: MKV_E_INVAL (percent over 100, NULL, unknown
 * flags), MKV_E_RDONLY (without MKV_DRY_RUN), MKV_E_NOSPC (registry full,
 * as for mkv_del()), MKV_E_EXPIRED, MKV_E_TIMEDOUT, MKV_E_NOMEM, and the
 * registry read's and write's errors.
 */
MKV_EXPORT int mkv_pool_evict(struct mkv_pool *pool, unsigned free_pct, unsigned flags,
		struct mkv_evict *report);

/**
 * Change the pool's eviction watermarks (see mkv_opts_set_watermarks()),
 * through the lease holder.  Errors: MKV_E_INVAL, MKV_E_RDONLY, MKV_E_NOSPC
 * (registry full, as for mkv_del()), MKV_E_EXPIRED, MKV_E_TIMEDOUT, and the
 * registry write's errors.
 */
MKV_EXPORT int mkv_pool_set_watermarks(struct mkv_pool *pool, unsigned low_pct,
		unsigned high_pct);

/** One client slot in use, from mkv_pool_clients(). */
struct mkv_client {
	uint32_t slot;
	uint32_t pid;             /**< on its node */
	char node[MKV_NODE_NAME_MAX + 1];
	uint8_t alive;            /**< 0 if known dead (awaiting reclamation) */
	uint8_t rdonly;           /**< opened MKV_RDONLY */
	uint8_t holder;           /**< holds the lease */
	uint8_t reserved0;
	uint64_t pin;             /**< registry txn its oldest view may have seen; 0 none */
	uint64_t pages_granted;   /**< pages granted to it, unpublished */
	int64_t heartbeat_age_ms; /**< since its last heartbeat, by wall clocks */
	uint64_t reserved_[4];
};
/**
 * The clients of the pool: up to @p max entries into @p out, the number of
 * clients in use into *n (may exceed max).  Errors: MKV_E_INVAL, MKV_E_EXPIRED,
 * MKV_E_NOMEM.
 */
MKV_EXPORT int mkv_pool_clients(struct mkv_pool *pool, struct mkv_client *out, size_t max,
		size_t *n);
/** Directory of an open pool; owned by the handle. NULL for NULL. */
MKV_EXPORT const char *mkv_pool_path(const struct mkv_pool *pool);
/**
 * The data arena's mapping in this process: every buffer's and view's
 * bytes lie in [*addr, *addr + *len), for as long as the handle is open;
 * read-only for a handle opened MKV_RDONLY.  For registering the arena
 * with a DMA engine (cudaHostRegister()), so copies to and from a device
 * go straight to the pool's pages.  Errors: MKV_E_INVAL, MKV_E_EXPIRED.
 */
MKV_EXPORT int mkv_pool_data(struct mkv_pool *pool, void **addr, size_t *len);
/** @} */

/** @defgroup write Writing
 * Values are write-once: a key, once published, keeps its bytes until it
 * is deleted.
 * @{ */
/**
 * Allocate a writable buffer of @p len bytes in the data arena (whole
 * pages, contiguous).  Fill it, then mkv_publish() or mkv_abort() it.
 * When no run of free pages is long enough, the holder evicts cold values
 * at once and the call waits for it.
 * Errors: MKV_E_INVAL (len 0, a NULL argument), MKV_E_NOSPC (len is more
 * than the pool holds, or no run of free pages is that long even after
 * eviction: what is left is pinned by views, or granted), MKV_E_RDONLY,
 * MKV_E_EXPIRED, MKV_E_TIMEDOUT, and the registry write's errors (of the
 * grant of pages).
 */
MKV_EXPORT int mkv_alloc(struct mkv_pool *pool, size_t len, struct mkv_buf *buf);
/**
 * Make the buffer's contents durable and visible under @p key.  The bytes
 * are persisted before the key is registered, so any process that finds
 * the key sees every byte.  Returns once the registration is committed.
 * On success, on MKV_E_EXISTS and on MKV_E_TIMEDOUT from the lease holder
 * of another handle the buffer is consumed (zeroed); on any other error it
 * stays the caller's, to retry or mkv_abort().
 * Errors: MKV_E_INVAL (key length; a buffer not from mkv_alloc() on this
 * handle, published or aborted already, or with a length raised),
 * MKV_E_EXISTS (the key is published already), MKV_E_NOSPC (registry
 * full), MKV_E_RDONLY, MKV_E_EXPIRED, MKV_E_TIMEDOUT (no answer from the
 * lease holder: the publish may still take effect later; or, when this
 * handle holds the lease, another writer kept the registry's write lock
 * for a quarter lease period: nothing was written), MKV_E_VERSION (the
 * key's registry entry is of a version this library does not know), and
 * the registry write's errors.
 */
MKV_EXPORT int mkv_publish(struct mkv_pool *pool, const void *key, size_t klen,
		struct mkv_buf *buf);
/**
 * Requests a handle keeps in flight: the asynchronous publishes (and page
 * grants) it has sent to the lease holder and not yet had answered.
 */
#define MKV_ASYNC_MAX 32U
/** A pending asynchronous publish, from mkv_publish_async(). */
struct mkv_ticket {
	uint64_t priv_[2];
};
/**
 * Start publishing like mkv_publish() and return without waiting for the
 * registration to commit; mkv_wait() gives its result.  The buffer is
 * consumed at once (zeroed) when this returns 0; its bytes are persisted
 * before this returns.  A handle has at most MKV_ASYNC_MAX publishes in
 * flight; past it this call waits for the oldest.  Each ticket must be
 * waited for exactly once, on the same handle.
 * Errors: as mkv_publish() for argument checks (MKV_E_INVAL, MKV_E_RDONLY,
 * MKV_E_EXPIRED), MKV_E_TIMEDOUT (no request entry of the handle came
 * free); the registration's own outcome comes from mkv_wait().
 */
MKV_EXPORT int mkv_publish_async(struct mkv_pool *pool, const void *key, size_t klen,
		struct mkv_buf *buf, struct mkv_ticket *ticket);
/**
 * Wait for an asynchronous publish and return its result: 0, or the
 * errors of mkv_publish() (MKV_E_EXISTS...); the ticket is consumed,
 * except on MKV_E_TIMEDOUT, after which it may be waited for again.  The
 * pages of a publish that failed stay granted to the handle, for its next
 * mkv_alloc().
 * Errors also: MKV_E_INVAL (not a pending ticket of this handle),
 * MKV_E_EXPIRED.
 */
/**
 * As mkv_publish_async(), with @p key declared the child of @p parent as
 * mkv_publish_chain() declares it (NULL, 0: no parent), so a chain can be
 * published one block at a time as each is filled, without waiting.
 * Errors: as mkv_publish_async(), and MKV_E_INVAL for a bad parent.
 */
MKV_EXPORT int mkv_publish_child_async(struct mkv_pool *pool, const void *parent,
		size_t plen, const void *key, size_t klen, struct mkv_buf *buf,
		struct mkv_ticket *ticket);
MKV_EXPORT int mkv_wait(struct mkv_pool *pool, struct mkv_ticket *ticket);
/**
 * Publish a chain of blocks: bufs[i] under keys[i], each key declared the
 * child of the key before it, and keys[0] the child of @p parent (NULL, 0
 * for a chain's head).  A lookup of a KV-cache prefix stops at the first
 * missing block, so eviction uses the chain: it takes a block only once no
 * cached block names it as parent (tails before heads).  Keys published
 * without a parent are chains of one.
 * Waits until every registration has committed.  A key that is published
 * already counts as done (the chain is shared), and its buffer is given
 * back.  Every buffer that was published or given back is zeroed; on error
 * the others stay the caller's, to retry or mkv_abort().
 * Errors: MKV_E_INVAL (NULL argument, bad key or parent, a buffer not from
 * this pool), MKV_E_NOSPC (registry full), MKV_E_RDONLY, MKV_E_EXPIRED,
 * MKV_E_TIMEDOUT, MKV_E_VERSION (as for mkv_publish()), MKV_E_NOMEM, and
 * the registry write's errors; the first error is returned.
 */
MKV_EXPORT int mkv_publish_chain(struct mkv_pool *pool, const void *parent, size_t plen,
		const struct mkv_key *keys, struct mkv_buf *bufs, size_t n);
/**
 * Give an unpublished buffer back; consumes it.  Errors: MKV_E_INVAL (not
 * a live buffer of this handle: see struct mkv_buf), MKV_E_RDONLY,
 * MKV_E_EXPIRED.
 */
MKV_EXPORT int mkv_abort(struct mkv_pool *pool, struct mkv_buf *buf);
/**
 * Copying write: mkv_alloc(), memcpy, mkv_publish() in one call.
 * Errors: those of mkv_alloc() and mkv_publish() (MKV_E_INVAL also for a
 * NULL value).
 */
MKV_EXPORT int mkv_put(struct mkv_pool *pool, const void *key, size_t klen,
		const void *val, size_t len);
/**
 * Delete a key.  Its pages are reused only after every view of it is
 * released.  Errors: MKV_E_INVAL, MKV_E_NOTFOUND, MKV_E_RDONLY,
 * MKV_E_NOSPC (the registry had no page for the commit for a lease period:
 * see marukv(7), "A registry reserve"), MKV_E_EXPIRED, MKV_E_TIMEDOUT (as
 * for mkv_publish()), MKV_E_VERSION (the key's registry entry is of an
 * unknown version), and the registry write's errors.
 */
MKV_EXPORT int mkv_del(struct mkv_pool *pool, const void *key, size_t klen);
/** @} */

/** @defgroup read Reading
 * @{ */
/**
 * Zero-copy view of the value of @p key.  Release it with mkv_release()
 * on the same handle; until then its bytes stay as they were published.
 * Errors: MKV_E_INVAL, MKV_E_NOTFOUND, MKV_E_EXPIRED, MKV_E_CORRUPT (the
 * registry entry is damaged; with MKV_VERIFY, the bytes do not match their
 * checksum), MKV_E_VERSION (an entry of an unknown version), MKV_E_NOMEM,
 * and the registry read's errors.
 */
MKV_EXPORT int mkv_get(struct mkv_pool *pool, const void *key, size_t klen,
		struct mkv_view *view);
/**
 * Release a view from mkv_get() or mkv_get_batch(); zeroes it.
 * Errors: MKV_E_INVAL (not a view of this handle, or released already),
 * MKV_E_EXPIRED (the view was released, but the handle's client was judged
 * dead while it was held: its bytes may have changed since mkv_get(), and
 * whatever was read from it must be thrown away).
 */
MKV_EXPORT int mkv_release(struct mkv_pool *pool, struct mkv_view *view);
/**
 * 1 if @p key is published, 0 if not, negative on error (MKV_E_INVAL,
 * MKV_E_EXPIRED, and the registry read's errors).
 */
MKV_EXPORT int mkv_exists(struct mkv_pool *pool, const void *key, size_t klen);
/**
 * How many leading keys of @p keys are published, looked up in one
 * registry snapshot: *hits = i such that keys[0..i-1] exist and keys[i]
 * does not (or n).  Errors: MKV_E_INVAL (a NULL argument, a bad key),
 * MKV_E_EXPIRED, and the registry read's errors.
 */
MKV_EXPORT int mkv_prefix_len(struct mkv_pool *pool, const struct mkv_key *keys,
		size_t n, size_t *hits);
/**
 * mkv_prefix_len(), holding the keys it finds against eviction: *held = i
 * such that keys[0..i-1] are published and now held, keys[i] not (or n).
 * A held key is passed over by eviction (mkv_pool_evict() and the
 * holder's own) until mkv_unhold(), mkv_pool_close() or the death of the
 * process; it still goes by mkv_del().  Holds nest: a key held twice is
 * unheld twice.  Unlike a view, a hold holds back no other page.  Waits
 * for an eviction under way to commit, one lease period at most.
 * Errors: MKV_E_INVAL, MKV_E_EXPIRED, MKV_E_NOMEM, MKV_E_TIMEDOUT (an
 * eviction has been under way for a lease period), and the registry
 * read's errors; on error nothing is held.
 */
MKV_EXPORT int mkv_hold(struct mkv_pool *pool, const struct mkv_key *keys, size_t n,
		size_t *held);
/**
 * Undo one hold of each of @p keys, in order.  Errors: MKV_E_INVAL,
 * MKV_E_NOTFOUND (a key this handle does not hold: the keys before it are
 * unheld, those after it not).
 */
MKV_EXPORT int mkv_unhold(struct mkv_pool *pool, const struct mkv_key *keys, size_t n);

/**
 * The first published key after @p after in byte order (memcmp, the
 * shorter first where one is a prefix of the other), or the first key if
 * @p after is NULL (@p alen 0), copied into @p key, which has room for
 * MKV_KEY_MAX bytes; its length into *klen.  @p after need not be
 * published.  Each call reads the registry afresh: a walk from NULL meets
 * every key published throughout it once, in order; keys published or
 * deleted meanwhile may be met or not.
 * Errors: MKV_E_INVAL (a NULL argument, a bad key), MKV_E_NOTFOUND (no
 * key after it), MKV_E_EXPIRED, and the registry read's errors.
 */
MKV_EXPORT int mkv_key_next(struct mkv_pool *pool, const void *after, size_t alen, void *key,
		size_t *klen);
#define MKV_BATCH_PREFIX 0x1U  /**< stop at the first missing key */
#define MKV_BATCH_VALID  MKV_BATCH_PREFIX
/**
 * Views of several keys from one registry snapshot.  views[i] is the view
 * of keys[i], or all zero (data NULL) where the key is missing; with
 * MKV_BATCH_PREFIX every view after the first missing key is zero.
 * *found is the number of views returned; release each non-empty one.
 * Errors: MKV_E_INVAL (NULL argument, bad key, unknown flag), and those
 * of mkv_get(); on error no view is held.
 */
MKV_EXPORT int mkv_get_batch(struct mkv_pool *pool, const struct mkv_key *keys,
		size_t n, unsigned flags, struct mkv_view *views, size_t *found);
/** @} */

/** @defgroup frames Transfer frames
 * A value leaves a pool, and enters another, as an MRDN v1 frame: a
 * 32-byte header ("MRDN", version 1, body_len, a tier byte, the body's
 * BLAKE3 hash truncated to 16 bytes; integers little-endian) and a body
 * holding the key, the value and its link in a chain.  marukv(7), FRAMES,
 * has the byte layout.
 * @{ */
/** Bytes of an MRDN v1 frame's header. */
#define MKV_FRAME_HEADER 32U
/** Bytes of a marukv body before its key. */
#define MKV_FRAME_BODY_HEADER 32U
/** Largest body MRDN v1 can carry (body_len is 32 bits). */
#define MKV_FRAME_BODY_MAX 0xffffffffULL

/** A frame as mkv_frame_parse() reads it; pointers into the caller's bytes. */
struct mkv_frame {
	uint64_t frame_len;  /**< header and body: the bytes the frame takes in a
	                          stream; 0 if its header is not a readable MRDN v1 one */
	const void *key;
	size_t klen;
	const void *value;
	size_t vlen;
	uint64_t parent;     /**< the key hash of the block before it in its chain, 0: none */
	uint8_t tier;        /**< the producer's tier label, as the header carries it */
};
/**
 * Check the frame at the start of @p buf (@p len bytes, perhaps more
 * than one frame) and read it into *f: magic, version, padding, that
 * body_len bytes follow the header, the checksum, then the body's layout.
 * f->frame_len is set as soon as the header is read, so a caller can
 * step over a frame refused for its checksum or body.
 * Errors: MKV_E_INVAL (NULL argument), MKV_E_FRAME_SHORT,
 * MKV_E_FRAME_MAGIC, MKV_E_FRAME_VERSION, MKV_E_FRAME_CHECKSUM,
 * MKV_E_FRAME_BODY.
 */
MKV_EXPORT int mkv_frame_parse(const void *buf, size_t len, struct mkv_frame *f);
/**
 * Write the frame of @p key into @p buf: its value copied from the pool
 * once, hashed on the way.  *len is the frame's size, on success and
 * when it does not fit (MKV_E_RANGE): a call with @p cap 0 asks for it.
 * @p tier (0 to 255) goes into the header as the tier label.  With
 * MKV_VERIFY the value is checked against its checksum first, as by
 * mkv_get().
 * Errors: MKV_E_INVAL (NULL argument, bad key, tier over 255), MKV_E_RANGE
 * (larger than @p cap, or than MKV_FRAME_BODY_MAX of body), and those of
 * mkv_get().
 */
MKV_EXPORT int mkv_export(struct mkv_pool *pool, const void *key, size_t klen, unsigned tier,
		void *buf, size_t cap, size_t *len);
/**
 * Write the frame of @p key to @p fd, the value straight from the pool's
 * pages (writev), after a first pass that hashes it.  A short write is
 * continued; an interrupted one retried.  *len (may be NULL) gets the
 * bytes written, all of the frame on success.  A write error leaves part
 * of a frame on @p fd.  SIGPIPE is the caller's, as for write(2).
 * Errors: those of mkv_export() but for the buffer, and MKV_E_IO (a write
 * failed, or would block; mkv_errormsg() says why).
 */
MKV_EXPORT int mkv_export_fd(struct mkv_pool *pool, const void *key, size_t klen,
		unsigned tier, int fd, uint64_t *len);
/**
 * Publish the value of the frame at the start of @p buf under its key,
 * linked to its parent as it was where it was exported.  The frame is
 * checked whole (mkv_frame_parse()) before anything is allocated; a
 * frame is imported entirely or not at all.  *f (may be NULL) gets the
 * frame as parsed, its frame_len set even when the frame is refused
 * (see mkv_frame_parse()).
 * Errors: those of mkv_frame_parse(), MKV_E_EXISTS (the key is published
 * already; nothing is written), and those of mkv_put().
 */
MKV_EXPORT int mkv_import(struct mkv_pool *pool, const void *buf, size_t len,
		struct mkv_frame *f);
/** @} */

/** @defgroup remote The remote tier
 * A pool may spill the values it evicts, as frames, to a Redis Cluster,
 * and fetch them back on request (marukv(7), REMOTE TIER).  Off until
 * mkv_remote_set() names servers; the setting is the pool's, kept in it
 * for every process and every later lease holder.
 * @{ */

/** A pool's remote tier. */
struct mkv_remote {
	/** "host:port[,host:port...]", up to 16 nodes of the cluster to ask
	 *  for its slot map; "" (or all zero): no tier */
	char servers[MKV_REMOTE_SERVERS_MAX + 1];
	/** Redis keys are this prefix, a NUL byte, then the pool's key bytes
	 *  (marukv(7), REMOTE TIER) */
	char prefix[MKV_REMOTE_PREFIX_MAX + 1];
	uint32_t ttl_s;      /**< spilled frames expire after this; 0: never */
	uint32_t queue_mib;  /**< bound on evicted bytes waiting to spill; 0: 64 */
	uint32_t timeout_ms; /**< bound on each command to the cluster, from its
	                          start to its whole reply; 0: 1000 */
	uint32_t tier;       /**< the tier label spilled frames carry, 0 to 255 */
};
/**
 * Set the pool's remote tier, or turn it off (@p r NULL, or servers "").
 * Takes effect at the next eviction of the lease holder and the next
 * mkv_fetch() of every handle; values already queued spill where they
 * were headed.  The server list is checked for its form, not reached.
 * Errors: MKV_E_INVAL (a malformed server list, an over-long or
 * unterminated string, ttl_s over ten years, queue_mib over 65536,
 * timeout_ms over 60000, tier over 255), MKV_E_RDONLY, MKV_E_TIMEDOUT
 * (another process holds the pool's directory lock).
 */
MKV_EXPORT int mkv_remote_set(struct mkv_pool *pool, const struct mkv_remote *r);
/** The pool's remote tier as set, the defaults filled in; servers "" if none. */
MKV_EXPORT int mkv_remote_get(struct mkv_pool *pool, struct mkv_remote *r);
/**
 * Bring @p key into the pool from the remote tier: fetch its frame, check
 * it (mkv_frame_parse(), and that it holds @p key) and import it.  0 if the
 * key is in the pool afterwards, already or now; a round trip to a node
 * only if it was not.  The cluster's part ends within the tier's
 * timeout, whatever its nodes do, however many threads fetch at once.
 * Errors: MKV_E_NOTFOUND (no tier, or no frame of the key in it),
 * MKV_E_REMOTE (the cluster did not answer within the tier's timeout,
 * answered an error, or announced a reply longer than the largest frame
 * the pool could import), the errors of mkv_frame_parse() for a frame
 * refused (MKV_E_FRAME_BODY also for a frame of another key), and those
 * of mkv_import(); nothing is imported on any error.
 */
MKV_EXPORT int mkv_fetch(struct mkv_pool *pool, const void *key, size_t klen);
/** @} */

#ifdef __cplusplus
}
#endif
#endif /* MARUKV_H */
