/* SPDX-License-Identifier: MIT */
/*
 * pool.c -- a pool handle: open (creating the pool through create.c
 * when asked), validation of what is found in the directory, the
 * mappings, fork(), close.  Open and create serialise on flock() of the
 * directory.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "internal.h"

/* How long an open waits for another open or creation of the same pool. */
#define DIR_LOCK_WAIT_NS (60 * 1000000000ULL)
/* makes of the pool's directory that vanish before they are opened, tried again */
#define DIR_CREATE_TRIES 7

/*
 * Every handle runs a service thread.  A fork() while one of them is in
 * the middle of malloc() can leave the child an allocator lock nobody
 * will release (ASan's allocator has no fork handler), so around fork()
 * each open handle's service thread is parked: its lock is held, and it
 * only touches memory with that lock held.  The child must not use the
 * handles it inherits either way.
 */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mkv_pool *open_list;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void
fork_prepare(void)
{
	pthread_mutex_lock(&open_lock);
	for (struct mkv_pool *p = open_list; p; p = p->next_open)
		pthread_mutex_lock(&p->h.lock);
}

static void
fork_done(void)
{
	for (struct mkv_pool *p = open_list; p; p = p->next_open)
		pthread_mutex_unlock(&p->h.lock);
	pthread_mutex_unlock(&open_lock);
}

/*
 * In a child, the handles it inherited are its parent's: they hold no
 * lease, every call on them fails, and closing one frees only the child's
 * memory.  The child's copy of super's descriptor goes at once, so that
 * the parent's slot lock (client.c) is the parent's alone again: a child
 * that outlives its parent must not keep the parent's slot looking alive.
 */
static void
fork_child(void)
{
	for (struct mkv_pool *p = open_list; p; p = p->next_open) {
		p->h.holding = false;
		p->forked = true;
		if (p->super_fd >= 0)
			close(p->super_fd);
		p->super_fd = -1;
	}
	fork_done();
}

static void
atfork_install(void)
{
	pthread_atfork(fork_prepare, fork_done, fork_child);
}

static void
open_list_add(struct mkv_pool *p)
{
	pthread_once(&atfork_once, atfork_install);
	pthread_mutex_lock(&open_lock);
	p->next_open = open_list;
	open_list = p;
	pthread_mutex_unlock(&open_lock);
}

static void
open_list_remove(struct mkv_pool *p)
{
	pthread_mutex_lock(&open_lock);
	for (struct mkv_pool **pp = &open_list; *pp; pp = &(*pp)->next_open)
		if (*pp == p) {
			*pp = p->next_open;
			break;
		}
	pthread_mutex_unlock(&open_lock);
}

/* Read and check the superblock before mapping anything. */
static int
super_check(struct mkv_pool *p, struct mkv_super *sb)
{
	struct mkv_super want;
	struct stat st;
	ssize_t n;

	if (fstat(p->super_fd, &st) < 0)
		return mkv_err(-errno, "pool %s: super: %m", p->path);
	memset(sb, 0, sizeof(*sb));
	n = pread(p->super_fd, sb, sizeof(*sb), 0);
	if (n < 0)
		return mkv_err(-errno, "pool %s: cannot read super: %m", p->path);
	if (n < (ssize_t)sizeof(sb->magic)) {
		if (memcmp(sb->magic, MKV_SUPER_MAGIC, (size_t)n) == 0)
			return mkv_err(MKV_E_CORRUPT, "pool %s: super is truncated (%zd bytes)",
					p->path, n);
		return mkv_err(MKV_E_NOTPOOL, "pool %s: super is not a marukv superblock", p->path);
	}
	if (memcmp(sb->magic, MKV_SUPER_MAGIC, sizeof(sb->magic)) != 0)
		return mkv_err(MKV_E_NOTPOOL, "pool %s: super is not a marukv superblock", p->path);
	if (n >= (ssize_t)(offsetof(struct mkv_super, version) + sizeof(sb->version)) &&
	    sb->version != MKV_FORMAT_VERSION)
		return mkv_err(MKV_E_VERSION,
				"pool %s: format version %u; this library reads version %u: use a library of that version, or remove the pool directory (a cache: its values go) and open it again with MKV_CREATE",
				p->path, sb->version, MKV_FORMAT_VERSION);
	if (n < (ssize_t)sizeof(*sb))
		return mkv_err(MKV_E_CORRUPT, "pool %s: super is truncated (%zd bytes)", p->path, n);
	if (sb->header_size != sizeof(*sb) || sb->csum != mkv_hash_super(sb))
		return mkv_err(MKV_E_CORRUPT, "pool %s: superblock checksum mismatch", p->path);

	memset(&want, 0, sizeof(want));
	if (sb->page_size < 4096 || sb->page_size > (1U << 30) ||
	    (sb->page_size & (sb->page_size - 1)) || sb->nr_pages == 0 ||
	    sb->max_clients == 0 || sb->max_clients > MKV_MAX_CLIENTS_LIMIT ||
	    sb->max_nodes == 0 || sb->max_nodes > MKV_MAX_NODES_LIMIT ||
	    sb->nr_pages > MKV_DATA_SIZE_MAX / sb->page_size ||
	    sb->registry_size < MKV_REGISTRY_MIN || sb->registry_size > MKV_REGISTRY_MAX)
		return mkv_err(MKV_E_CORRUPT, "pool %s: superblock geometry out of range", p->path);
	mkv_create_layout(&want, sb->page_size, sb->nr_pages, sb->max_clients, sb->max_nodes);
	if (want.data_size != sb->data_size || want.super_size != sb->super_size ||
	    want.slots_off != sb->slots_off || want.pt_off != sb->pt_off ||
	    want.hint_off != sb->hint_off || want.wlog_off != sb->wlog_off ||
	    want.hold_off != sb->hold_off || want.state_off != sb->state_off ||
	    want.nodes_off != sb->nodes_off || want.rq_off != sb->rq_off ||
	    want.max_nodes != sb->max_nodes || want.rq_depth != sb->rq_depth ||
	    want.slot_size != sb->slot_size || sb->lease_period_ms < 50 ||
	    sb->lease_period_ms > 60000 || sb->client_timeout_ms < 100 ||
	    sb->client_timeout_ms > 3600000 ||
	    (sb->coherence != MKV_COHERENT && sb->coherence != MKV_NONCOHERENT) ||
	    (sb->coherence == MKV_NONCOHERENT && sb->max_clients < sb->max_nodes))
		return mkv_err(MKV_E_CORRUPT, "pool %s: superblock layout is inconsistent", p->path);
	if (sb->coherence == MKV_NONCOHERENT && !mkv_share_supported())
		return mkv_err(MKV_E_INVAL,
				"pool %s: a non-coherent pool needs cache line flushes this library was not built with",
				p->path);
	if ((uint64_t)st.st_size < sb->super_size)
		return mkv_err(MKV_E_CORRUPT, "pool %s: super is %lld bytes, expected %llu",
				p->path, (long long)st.st_size, (unsigned long long)sb->super_size);
	return 0;
}

static int
data_open(struct mkv_pool *p, const struct mkv_super *sb)
{
	enum mkv_backing kind;
	uint64_t size;
	int rc;

	rc = mkv_file_open_data(p, (p->flags & MKV_RDONLY) ? O_RDONLY : O_RDWR);
	if (rc == -ENOENT)
		return mkv_err(MKV_E_CORRUPT, "pool %s: data file is missing", p->path);
	if (rc)
		return rc;
	rc = mkv_dax_probe(p->data_fd, MKV_FILE_DATA, &kind, &size, p->dax_device,
			sizeof(p->dax_device), &p->dax_align);
	if (rc)
		return rc;
	if (size < sb->data_size)
		return mkv_err(MKV_E_CORRUPT, "pool %s: data is %llu bytes, expected %llu",
				p->path, (unsigned long long)size,
				(unsigned long long)sb->data_size);
	p->backing = kind;
	return 0;
}

static int
pool_map(struct mkv_pool *p, const struct mkv_super *hdr)
{
	int rc;

	rc = mkv_persist_map(p->super_fd, hdr->super_size, false, &p->super, MKV_FILE_SUPER);
	if (rc)
		return rc;
	rc = mkv_persist_map(p->data_fd, hdr->data_size, (p->flags & MKV_RDONLY) != 0, &p->data,
			MKV_FILE_DATA);
	if (rc)
		return rc;
	/* never read back from the mapping, which anyone with access can change */
	p->hdr = *hdr;
	p->sb = &p->hdr;
	p->state = (struct mkv_state *)((char *)p->super.addr + hdr->state_off);
	p->nodes = (struct mkv_node *)((char *)p->super.addr + hdr->nodes_off);
	p->slots = (struct mkv_slot *)((char *)p->super.addr + hdr->slots_off);
	p->rqs = (struct mkv_rq *)((char *)p->super.addr + hdr->rq_off);
	p->pt = (uint64_t *)((char *)p->super.addr + hdr->pt_off);
	p->hints = (uint8_t *)p->super.addr + hdr->hint_off;
	p->wlog = (struct mkv_wlog *)((char *)p->super.addr + hdr->wlog_off);
	p->holds = (struct mkv_hold_block *)((char *)p->super.addr + hdr->hold_off);
	p->arena = p->data.addr;
	/* a regular file: tmpfs, or DAX if libpmem2 flushes cache lines */
	if (p->backing == MKV_BACKING_FILE) {
		struct statfs fs;

		if (fstatfs(p->data_fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC)
			p->backing = MKV_BACKING_TMPFS;
		else if (!p->data.page_granular)
			p->backing = MKV_BACKING_FSDAX;
	}
	p->page_size = hdr->page_size;
	p->nr_pages = hdr->nr_pages;
	p->sb->max_clients = hdr->max_clients;
	p->sb->max_nodes = hdr->max_nodes;
	p->page_shift = (unsigned)__builtin_ctzll(hdr->page_size);
	p->lease_period_ns = (uint64_t)hdr->lease_period_ms * 1000000ULL;
	p->client_timeout_ns = (uint64_t)hdr->client_timeout_ms * 1000000ULL;
	p->watch = calloc(hdr->max_clients, sizeof(*p->watch));
	p->node_watch = calloc(hdr->max_nodes, sizeof(*p->node_watch));
	if (!p->watch || !p->node_watch)
		return mkv_err(MKV_E_NOMEM, "pool %s: out of memory", p->path);
	return 0;
}

/*
 * Open (or create) the pool's directory and lock it.  It must be a
 * directory itself, not a link (its parents may be), owned by us or by
 * root, and writable by nobody else: anyone else who could write it could
 * plant links or files in it for us to open (SECURITY in marukv(7)).  A
 * directory we create is 0700, or 0750 with the pool's group.
 */
static int
pool_dir_open(struct mkv_pool *p, const struct mkv_opts *opts)
{
	bool made = false;
	struct stat st;
	int rc, err = 0, lerr = 0;

	/*
	 * Made, or there already, then gone or changed before the open:
	 * somebody else changes what is at the path (another user swapping a
	 * link or a directory there, say).  Tried again a few times, then
	 * refused.
	 */
	for (int tries = 0;; tries++) {
		if (p->flags & MKV_CREATE) {
			if (mkdir(p->path, 0700) == 0)
				made = true;
			else if (errno != EEXIST)
				return mkv_err(-errno, "pool %s: cannot create directory: %m", p->path);
		}
		p->dirfd = open(p->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (p->dirfd >= 0)
			break;
		err = errno;
		/* a link, or what is there now (O_NOFOLLOW says ENOTDIR for a link) */
		lerr = lstat(p->path, &st) < 0 ? errno : 0;
		if (!(p->flags & MKV_CREATE) || !(err == ENOENT || (err == ENOTDIR &&
		    (lerr == ENOENT || (!lerr && S_ISDIR(st.st_mode))))))
			break;
		if (tries == DIR_CREATE_TRIES)
			return mkv_err(MKV_E_PERM,
					"pool %s: what is at the path changed each of %d times between making it and opening it: refusing it (does another user change it?)",
					p->path, DIR_CREATE_TRIES + 1);
		made = false;
	}
	if (p->dirfd < 0) {
		if (err == ENOENT || (err == ENOTDIR && lerr == ENOENT))
			return mkv_err(MKV_E_NOENT, "no pool at %s", p->path);
		if (err == ELOOP || (err == ENOTDIR && !lerr && S_ISLNK(st.st_mode)))
			return mkv_err(MKV_E_PERM, "pool %s: the directory is a symbolic link: refusing to follow it",
					p->path);
		if (err == ENOTDIR)
			return mkv_err(MKV_E_NOTPOOL, "pool %s: not a directory", p->path);
		if (err == EACCES)
			return mkv_err(-EACCES, "pool %s: permission denied: the pool's directory is not open to this user (see SECURITY in marukv(7))",
					p->path);
		return mkv_err(-err, "pool %s: %s", p->path, strerror(err));
	}
	if (fstat(p->dirfd, &st) < 0)
		return mkv_err(-errno, "pool %s: %m", p->path);
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return mkv_err(MKV_E_PERM,
				"pool %s: the directory belongs to uid %u, neither this user nor root: refusing it",
				p->path, (unsigned)st.st_uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return mkv_err(MKV_E_PERM,
				"pool %s: the directory is writable by %s: refusing it (chmod go-w)",
				p->path, (st.st_mode & S_IWOTH) ? "others" : "its group");
	if (made && opts->has_group && fchown(p->dirfd, (uid_t)-1, opts->gid) < 0)
		return mkv_err(errno == EPERM ? MKV_E_PERM : -errno,
				"pool %s: cannot give the directory to group %u: %m", p->path,
				(unsigned)opts->gid);
	if (made && fchmod(p->dirfd, opts->has_group ? 0750 : 0700) < 0)
		return mkv_err(-errno, "pool %s: cannot set the directory's mode: %m", p->path);
	/* held while a pool is created (preallocating its files) or opened */
	rc = mkv_lock_until(p->dirfd, LOCK_EX, mkv_clock_now() + DIR_LOCK_WAIT_NS);
	if (rc == -ETIMEDOUT)
		return mkv_err(MKV_E_TIMEDOUT,
				"pool %s: another process has held the pool directory's lock for %u s",
				p->path, (unsigned)(DIR_LOCK_WAIT_NS / 1000000000ULL));
	if (rc)
		return mkv_err(rc, "pool %s: cannot lock directory: %s", p->path, strerror(-rc));
	return 0;
}

/* Whether the pool's directory, opened, has been removed since. */
static bool
dir_removed(const struct mkv_pool *p)
{
	struct stat st;

	return p && p->dirfd >= 0 && fstat(p->dirfd, &st) == 0 && st.st_nlink == 0;
}

/*
 * Open super, creating the pool first if it is not there and we may.
 * Every handle writes its client slot in super, read-only ones too.
 */
static int
super_open(struct mkv_pool *p, const struct mkv_opts *opts)
{
	struct stat st;
	int rc = mkv_file_open(p, MKV_FILE_SUPER, O_RDWR, &p->super_fd);

	if (rc != -ENOENT)
		return rc;
	if (!(p->flags & MKV_CREATE)) {
		if (fstatat(p->dirfd, MKV_FILE_REGISTRY, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
		    fstatat(p->dirfd, MKV_FILE_DATA, &st, AT_SYMLINK_NOFOLLOW) == 0)
			return mkv_err(MKV_E_CORRUPT, "pool %s: super is missing", p->path);
		return mkv_err(MKV_E_NOENT, "no pool at %s", p->path);
	}
	if ((rc = mkv_create_pool(p, opts)))
		return rc;
	return mkv_file_open(p, MKV_FILE_SUPER, O_RDWR, &p->super_fd);
}

/* The pool's path from the arguments, MARUKV_POOL or the default; MKV_E_INVAL for bad ones. */
static int
open_args(const char **path, unsigned flags, struct mkv_pool **out)
{
	if (!out)
		return mkv_err(MKV_E_INVAL, "mkv_pool_open: out is NULL");
	*out = NULL;
	if (flags & ~MKV_OPEN_VALID)
		return mkv_err(MKV_E_INVAL, "mkv_pool_open: unknown flags 0x%x",
				flags & ~MKV_OPEN_VALID);
	if ((flags & MKV_CREATE) && (flags & MKV_RDONLY))
		return mkv_err(MKV_E_INVAL, "mkv_pool_open: MKV_CREATE with MKV_RDONLY");
	if (*path && !**path)
		return mkv_err(MKV_E_INVAL, "mkv_pool_open: the pool path is empty");
	if (!*path)
		*path = getenv("MARUKV_POOL");
	if (!*path || !**path)
		*path = MKV_DEFAULT_POOL;
	return 0;
}

/* A handle with its own structures and nothing opened yet (mkv_pool_close() frees it). */
static int
handle_new(const char *path, unsigned flags, struct mkv_pool **out)
{
	struct mkv_pool *p = calloc(1, sizeof(*p));
	int rc;

	if (!p || !(p->path = strdup(path))) {
		free(p);
		return mkv_err(MKV_E_NOMEM, "mkv_pool_open: out of memory");
	}
	*out = p;
	p->flags = flags;
	p->dirfd = p->super_fd = p->data_fd = -1;
	p->slot = UINT32_MAX;
	/* distinct for every handle a process opens: no struct of a closed one matches */
	if (getrandom(&p->cookie, sizeof(p->cookie), 0) != sizeof(p->cookie))
		p->cookie = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL ^ mkv_clock_now();
	if ((rc = mkv_epoch_init(&p->epochs)) || (rc = mkv_grants_init(&p->grants)) ||
	    (rc = mkv_handout_init(&p->bufs)) || (rc = mkv_handout_init(&p->views)) ||
	    (rc = mkv_remote_init(p)) || (rc = mkv_hold_init(p)))
		return rc;
	return mkv_rq_init(p, mkv_holder_nudge);
}

MKV_EXPORT int
mkv_pool_open(const char *path, unsigned flags, const struct mkv_opts *opts,
		struct mkv_pool **out)
{
	struct mkv_opts defaults;
	struct mkv_super hdr;
	struct mkv_pool *p = NULL;
	int rc;

	mkv_err_clear();
	if ((rc = open_args(&path, flags, out)))
		return rc;
	if (!opts) {
		mkv_opts_defaults(&defaults);
		opts = &defaults;
	}
	if ((rc = handle_new(path, flags, &p)))
		goto fail;
	if ((rc = pool_dir_open(p, opts)) || (rc = super_open(p, opts)) ||
	    (rc = super_check(p, &hdr)) || (rc = data_open(p, &hdr)))
		goto fail;
	mkv_share_init(p, hdr.coherence);
	/*
	 * The client slot before the node entry (see mkv_nodes_reclaim()),
	 * but in a non-coherent pool, whose slots belong to node entries
	 * (client.c); both before the registry, whose first read a slot
	 * protects in a non-coherent pool (regsnap.c).
	 */
	if ((rc = pool_map(p, &hdr)) || (rc = mkv_node_name(p, opts->node)) ||
	    (p->noncoherent && (rc = mkv_node_attach(p))) ||
	    (rc = mkv_client_attach(p)) ||
	    (!p->noncoherent && (rc = mkv_node_attach(p))) ||
	    (rc = mkv_reg_open(p, &hdr)))
		goto fail;
	flock(p->dirfd, LOCK_UN);
	if ((rc = mkv_lease_init(p)))
		goto fail;
	open_list_add(p);
	if ((rc = mkv_holder_start(p)))
		goto fail;
	/* A writer takes the lease at once if nobody holds it. */
	if (!(flags & MKV_RDONLY)) {
		pthread_mutex_lock(&p->h.lock);
		rc = mkv_holder_take(p);
		pthread_mutex_unlock(&p->h.lock);
		if (rc && rc != -EAGAIN)
			goto fail;
	}
	*out = p;
	mkv_err_clear();
	return 0;
fail:
	if (rc == MKV_E_NOENT && (flags & MKV_CREATE) && dir_removed(p))
		rc = mkv_err(MKV_E_PERM,
				"pool %s: the pool's directory was removed while the pool was made (does another user change the path?)",
				p->path);
	mkv_pool_close(&p);
	return rc;
}

/*
 * The handle's own memory.  In a forked child its mutexes and conditions
 * are not destroyed: the parent's threads may have been waiting on them at
 * the fork, and glibc's pthread_cond_destroy() waits for waiters that do
 * not exist in the child.  Their memory is simply freed.
 */
static void
handle_free(struct mkv_pool *p)
{
	mkv_remote_fini(p);
	mkv_hold_fini(p, p->forked);
	if (p->forked) {
		free(p->epochs.ring);
		free(p->grants.ext);
		free(p->bufs.v);
		free(p->views.v);
		free(p->rq.kept);
		free(p->h.batch);
		free(p->h.bells);
		free(p->h.posted);
	} else {
		mkv_lease_fini(p);
		mkv_epoch_fini(&p->epochs);
		mkv_grants_fini(&p->grants);
		mkv_handout_fini(&p->bufs);
		mkv_handout_fini(&p->views);
		mkv_rq_fini(p);
	}
	free(p->watch);
	free(p->node_watch);
	free(p->path);
	free(p);
}

MKV_EXPORT void
mkv_pool_close(struct mkv_pool **pool)
{
	struct mkv_pool *p;

	if (!pool || !*pool)
		return;
	p = *pool;
	*pool = NULL;
	if (p->forked) {
		/* the slot, the views, the lease and LMDB's environment are the parent's */
		open_list_remove(p);
		mkv_reg_forget(p);
	} else {
		if (p->slot != UINT32_MAX) {
			/*
			 * Unused grants go back if anyone can take them (else the
			 * next holder's rebuild frees them), then the lease, then
			 * the slot.
			 */
			if (p->h.ready && !(p->flags & MKV_RDONLY)) {
				struct mkv_req r = { .op = MKV_OP_DETACH };

				mkv_holder_write(p, &r, 2 * p->lease_period_ns);
			}
			mkv_holder_stop(p);
			/* its counters are the slot's: before we give it up */
			mkv_remote_fini(p);
			if (p->h.ready && !(p->flags & MKV_RDONLY))
				mkv_lease_release(p);
			open_list_remove(p);
			mkv_client_detach(p);
		}
		mkv_reg_close(p);
	}
	mkv_persist_unmap(&p->data);
	mkv_persist_unmap(&p->super);
	if (p->data_fd >= 0)
		close(p->data_fd);
	if (p->super_fd >= 0)
		close(p->super_fd);
	if (p->dirfd >= 0)
		close(p->dirfd);
	handle_free(p);
}

MKV_EXPORT const char *
mkv_pool_path(const struct mkv_pool *pool)
{
	return pool ? pool->path : NULL;
}

MKV_EXPORT int
mkv_pool_data(struct mkv_pool *pool, void **addr, size_t *len)
{
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_pool_data")))
		return rc;
	if (!addr || !len)
		return mkv_err(MKV_E_INVAL, "mkv_pool_data: addr or len is NULL");
	*addr = pool->data.addr;
	*len = pool->data.size;
	return 0;
}
