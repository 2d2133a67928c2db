/* SPDX-License-Identifier: MIT */
/*
 * pool.c -- the pool directory: options, creation, validation of what is
 * found there, the mappings, close.
 *
 * Creation builds `data` and `registry.mdb`, then writes `super.new` and
 * renames it to `super`: a pool is complete exactly when `super` exists.
 * A directory with a registry or a data file but no `super` is refused, not
 * re-created, so a damaged pool is never silently replaced by an empty one.
 * Open and create serialise on flock() of the directory.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define MKV_DATA_SIZE_MAX (1ULL << 46)
#define MKV_REGISTRY_MIN (1ULL << 20)
#define MKV_REGISTRY_MAX (1ULL << 40)
/* How long an open waits for another open or creation of the same pool. */
#define DIR_LOCK_WAIT_NS (60 * 1000000000ULL)

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

static uint64_t
align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

MKV_EXPORT int
mkv_opts_new(struct mkv_opts **out)
{
	mkv_err_clear();
	if (!out)
		return mkv_err(MKV_E_INVAL, "mkv_opts_new: out is NULL");
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return mkv_err(MKV_E_NOMEM, "mkv_opts_new: out of memory");
	(*out)->data_size = MKV_DEFAULT_DATA_SIZE;
	(*out)->page_size = MKV_DEFAULT_PAGE_SIZE;
	(*out)->max_clients = MKV_DEFAULT_MAX_CLIENTS;
	(*out)->lease_period_ms = MKV_DEFAULT_LEASE_PERIOD_MS;
	(*out)->client_timeout_ms = MKV_DEFAULT_CLIENT_TIMEOUT_MS;
	(*out)->wm_low = MKV_DEFAULT_LOW_WATERMARK;
	(*out)->wm_high = MKV_DEFAULT_HIGH_WATERMARK;
	(*out)->max_nodes = MKV_DEFAULT_MAX_NODES;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_watermarks(struct mkv_opts *opts, unsigned low_pct, unsigned high_pct)
{
	int rc;

	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_watermarks: opts is NULL");
	if ((rc = mkv_valid_watermarks(low_pct, high_pct)))
		return rc;
	opts->wm_low = low_pct;
	opts->wm_high = high_pct;
	return 0;
}

MKV_EXPORT void
mkv_opts_delete(struct mkv_opts **opts)
{
	if (!opts)
		return;
	free(*opts);
	*opts = NULL;
}

MKV_EXPORT int
mkv_opts_set_data_size(struct mkv_opts *opts, uint64_t bytes)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_data_size: opts is NULL");
	if (bytes == 0 || bytes > MKV_DATA_SIZE_MAX)
		return mkv_err(MKV_E_INVAL, "data size %llu out of range (1 to 2^46)",
				(unsigned long long)bytes);
	opts->data_size = bytes;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_page_size(struct mkv_opts *opts, uint32_t bytes)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_page_size: opts is NULL");
	if (bytes < 4096 || bytes > (1U << 30) || (bytes & (bytes - 1)))
		return mkv_err(MKV_E_INVAL, "page size %u is not a power of two from 4 KiB to 1 GiB",
				bytes);
	opts->page_size = bytes;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_max_clients(struct mkv_opts *opts, uint32_t n)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_max_clients: opts is NULL");
	if (n == 0 || n > MKV_MAX_CLIENTS_LIMIT)
		return mkv_err(MKV_E_INVAL, "max clients %u out of range (1 to %u)", n,
				MKV_MAX_CLIENTS_LIMIT);
	opts->max_clients = n;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_registry_size(struct mkv_opts *opts, uint64_t bytes)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_registry_size: opts is NULL");
	if (bytes != 0 && (bytes < MKV_REGISTRY_MIN || bytes > MKV_REGISTRY_MAX))
		return mkv_err(MKV_E_INVAL, "registry size %llu out of range (1 MiB to 1 TiB, or 0)",
				(unsigned long long)bytes);
	opts->registry_size = bytes;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_lease_period(struct mkv_opts *opts, uint32_t ms)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_lease_period: opts is NULL");
	if (ms < 50 || ms > 60000)
		return mkv_err(MKV_E_INVAL, "lease period %u ms out of range (50 to 60000)", ms);
	opts->lease_period_ms = ms;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_client_timeout(struct mkv_opts *opts, uint32_t ms)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_client_timeout: opts is NULL");
	if (ms < 100 || ms > 3600000)
		return mkv_err(MKV_E_INVAL, "client timeout %u ms out of range (100 to 3600000)", ms);
	opts->client_timeout_ms = ms;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_max_nodes(struct mkv_opts *opts, uint32_t n)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_max_nodes: opts is NULL");
	if (n == 0 || n > MKV_MAX_NODES_LIMIT)
		return mkv_err(MKV_E_INVAL, "max nodes %u out of range (1 to %u)", n,
				MKV_MAX_NODES_LIMIT);
	opts->max_nodes = n;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_group(struct mkv_opts *opts, gid_t gid)
{
	mkv_err_clear();
	if (!opts)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_group: opts is NULL");
	if (gid == (gid_t)-1)
		return mkv_err(MKV_E_INVAL, "group id -1 is not a group");
	opts->has_group = true;
	opts->gid = gid;
	return 0;
}

MKV_EXPORT int
mkv_opts_set_node(struct mkv_opts *opts, const char *name)
{
	int rc;

	mkv_err_clear();
	if (!opts || !name)
		return mkv_err(MKV_E_INVAL, "mkv_opts_set_node: NULL argument");
	if ((rc = mkv_valid_node_name(name)))
		return rc;
	memcpy(opts->node, name, strlen(name) + 1);
	return 0;
}

/* Offsets of everything in `super`, from the creation parameters. */
static void
layout_compute(struct mkv_super *sb, uint64_t page_size, uint64_t nr_pages,
		uint32_t max_clients, uint32_t max_nodes)
{
	uint64_t off = 2 * MKV_SUPER_ALIGN;

	sb->page_size = page_size;
	sb->nr_pages = nr_pages;
	sb->data_size = page_size * nr_pages;
	sb->max_clients = max_clients;
	sb->slot_size = sizeof(struct mkv_slot);
	sb->max_nodes = max_nodes;
	sb->rq_depth = MKV_RQ_DEPTH;
	sb->state_off = MKV_SUPER_ALIGN;
	sb->nodes_off = off;
	off = align_up(off + (uint64_t)max_nodes * sizeof(struct mkv_node), MKV_SUPER_ALIGN);
	sb->slots_off = off;
	off = align_up(off + (uint64_t)max_clients * sizeof(struct mkv_slot), MKV_SUPER_ALIGN);
	sb->rq_off = off;
	off = align_up(off + (uint64_t)max_clients * MKV_RQ_DEPTH * sizeof(struct mkv_rq),
			MKV_SUPER_ALIGN);
	sb->pt_off = off;
	off = align_up(off + nr_pages * sizeof(uint64_t), MKV_SUPER_ALIGN);
	sb->hint_off = off;
	sb->super_size = align_up(off + nr_pages, MKV_SUPER_ALIGN);
}

static uint64_t
super_csum(const struct mkv_super *sb)
{
	return mkv_hash_fnv1a(sb, offsetof(struct mkv_super, csum));
}

/* Preallocate so that a full filesystem fails now, not with SIGBUS later. */
static int
prealloc(int fd, uint64_t size, const char *path, const char *name)
{
	int rc = posix_fallocate(fd, 0, (off_t)size);

	if (rc == ENOSPC)
		return mkv_err(MKV_E_NOSPC, "pool %s: no room for %s (%llu bytes)", path, name,
				(unsigned long long)size);
	if (rc)
		return mkv_err(-rc, "pool %s: cannot allocate %s: %s", path, name, strerror(rc));
	return 0;
}

/*
 * Open `data`: a regular file, checked like every pool file, or a
 * device-DAX node (a character device), which an administrator may also
 * place as a symbolic link to /dev/daxX.Y; a link to anything else is
 * refused.  -ENOENT if it is not there.
 */
static int
data_fd_open(struct mkv_pool *p, int flags)
{
	bool linked = false;
	struct stat st;

	p->data_fd = openat(p->dirfd, MKV_FILE_DATA, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (p->data_fd < 0 && errno == ELOOP) {
		linked = true;
		p->data_fd = openat(p->dirfd, MKV_FILE_DATA, flags | O_NONBLOCK | O_CLOEXEC);
	}
	if (p->data_fd < 0) {
		if (errno == ENOENT)
			return mkv_err(-ENOENT, "pool %s: data is missing", p->path);
		if (errno == EACCES)
			return mkv_err(-EACCES, "pool %s: data: permission denied (%s access is needed; see SECURITY in marukv(7))",
					p->path, mkv_file_access_name(flags));
		return mkv_err(-errno, "pool %s: data: %m", p->path);
	}
	if (fstat(p->data_fd, &st) < 0)
		return mkv_err(-errno, "pool %s: data: %m", p->path);
	if (S_ISCHR(st.st_mode))
		return 0;
	if (linked)
		return mkv_err(MKV_E_PERM,
				"pool %s: data is a symbolic link to something other than a device-DAX node",
				p->path);
	if (!S_ISREG(st.st_mode))
		return mkv_err(MKV_E_PERM, "pool %s: data is not a regular file", p->path);
	if (st.st_nlink != 1)
		return mkv_err(MKV_E_PERM, "pool %s: data has %llu names (hard links): refusing it",
				p->path, (unsigned long long)st.st_nlink);
	return 0;
}

/* Remove what a failed creation made, and only that. */
struct made {
	bool data, registry, lock, super_new;
};

static void
create_cleanup(struct mkv_pool *p, const struct made *m)
{
	if (m->data)
		unlinkat(p->dirfd, MKV_FILE_DATA, 0);
	if (m->registry)
		unlinkat(p->dirfd, MKV_FILE_REGISTRY, 0);
	if (m->lock)
		unlinkat(p->dirfd, MKV_FILE_LOCK, 0);
	if (m->super_new)
		unlinkat(p->dirfd, MKV_FILE_SUPER ".new", 0);
}

/* The data arena of a new pool: made here, or a device-DAX node placed as `data` beforehand. */
static int
create_data(struct mkv_pool *p, const struct mkv_opts *opts, uint64_t *nr_pages, bool *made)
{
	enum mkv_backing kind = MKV_BACKING_FILE;
	uint64_t devsize;
	int rc = data_fd_open(p, O_RDWR);

	if (rc == 0) {
		rc = mkv_dax_probe(p->data_fd, MKV_FILE_DATA, &kind, &devsize, p->dax_device,
				sizeof(p->dax_device), &p->dax_align);
		if (rc)
			return rc;
		if (kind != MKV_BACKING_DEVDAX)
			return mkv_err(MKV_E_CORRUPT,
				"pool %s: data exists but super does not: an interrupted creation or a damaged pool; remove the directory to start afresh",
				p->path);
		*nr_pages = devsize / opts->page_size;
		if (*nr_pages == 0)
			return mkv_err(MKV_E_INVAL, "pool %s: device-DAX data is smaller than a page",
					p->path);
		return 0;
	}
	if (rc != -ENOENT)
		return rc;
	if ((rc = mkv_file_create(p, MKV_FILE_DATA, &p->data_fd)))
		return rc;
	*made = true;
	return prealloc(p->data_fd, *nr_pages * opts->page_size, p->path, MKV_FILE_DATA);
}

static int
pool_create(struct mkv_pool *p, const struct mkv_opts *opts)
{
	struct mkv_super sb;
	struct made made = { false };
	struct stat st;
	uint64_t nr_pages, regsize;
	int fd = -1, rc;

	memset(&sb, 0, sizeof(sb));
	nr_pages = align_up(opts->data_size, opts->page_size) / opts->page_size;
	p->create_gid = opts->has_group ? opts->gid : (gid_t)-1;
	if ((rc = create_data(p, opts, &nr_pages, &made.data)))
		goto fail;
	if (fstatat(p->dirfd, MKV_FILE_REGISTRY, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		rc = !S_ISREG(st.st_mode) ?
			mkv_err(MKV_E_PERM, "pool %s: registry.mdb is not a regular file", p->path) :
			mkv_err(MKV_E_CORRUPT,
			"pool %s: registry.mdb exists but super does not: an interrupted creation or a damaged pool; remove the directory to start afresh",
			p->path);
		goto fail;
	}

	memcpy(sb.magic, MKV_SUPER_MAGIC, sizeof(sb.magic));
	sb.version = MKV_FORMAT_VERSION;
	sb.header_size = sizeof(sb);
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid)) {
		rc = mkv_err(-errno, "pool %s: getrandom: %m", p->path);
		goto fail;
	}
	sb.uuid[6] = (uint8_t)((sb.uuid[6] & 0x0f) | 0x40);
	sb.uuid[8] = (uint8_t)((sb.uuid[8] & 0x3f) | 0x80);
	layout_compute(&sb, opts->page_size, nr_pages, opts->max_clients, opts->max_nodes);
	sb.lease_period_ms = opts->lease_period_ms;
	sb.client_timeout_ms = opts->client_timeout_ms;
	regsize = opts->registry_size;
	if (!regsize)
		regsize = align_up((8ULL << 20) + nr_pages * 1024, 1ULL << 20);
	sb.registry_size = regsize;
	sb.ctime = (uint64_t)time(NULL);
	sb.csum = super_csum(&sb);

	/* LMDB opens its files by name: they exist, safely made, before it does */
	if ((rc = mkv_file_create(p, MKV_FILE_REGISTRY, &fd)))
		goto fail;
	made.registry = true;
	close(fd);
	if ((rc = mkv_file_create(p, MKV_FILE_LOCK, &fd)))
		goto fail;
	made.lock = true;
	close(fd);
	if ((rc = mkv_reg_create(p, &sb, opts)))
		goto fail;

	/* a super.new left by a creation that died is ours to replace (never followed) */
	unlinkat(p->dirfd, MKV_FILE_SUPER ".new", 0);
	if ((rc = mkv_file_create(p, MKV_FILE_SUPER ".new", &fd)))
		goto fail;
	made.super_new = true;
	rc = prealloc(fd, sb.super_size, p->path, MKV_FILE_SUPER);
	if (rc)
		goto fail;
	if (pwrite(fd, &sb, sizeof(sb), 0) != (ssize_t)sizeof(sb) || fsync(fd) < 0) {
		rc = mkv_err(errno ? -errno : MKV_E_IO, "pool %s: cannot write super: %m", p->path);
		goto fail;
	}
	if (renameat(p->dirfd, MKV_FILE_SUPER ".new", p->dirfd, MKV_FILE_SUPER) < 0 ||
	    fsync(p->dirfd) < 0) {
		rc = mkv_err(-errno, "pool %s: cannot install super: %m", p->path);
		goto fail;
	}
	close(fd);
	close(p->data_fd);
	p->data_fd = -1;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (p->data_fd >= 0)
		close(p->data_fd);
	p->data_fd = -1;
	create_cleanup(p, &made);
	return rc;
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
				"pool %s: format version %u; this library reads version %u",
				p->path, sb->version, MKV_FORMAT_VERSION);
	if (n < (ssize_t)sizeof(*sb))
		return mkv_err(MKV_E_CORRUPT, "pool %s: super is truncated (%zd bytes)", p->path, n);
	if (sb->header_size != sizeof(*sb) || sb->csum != super_csum(sb))
		return mkv_err(MKV_E_CORRUPT, "pool %s: superblock checksum mismatch", p->path);

	memset(&want, 0, sizeof(want));
	if (sb->page_size < 4096 || sb->page_size > (1U << 30) ||
	    (sb->page_size & (sb->page_size - 1)) || sb->nr_pages == 0 ||
	    sb->max_clients == 0 || sb->max_clients > MKV_MAX_CLIENTS_LIMIT ||
	    sb->max_nodes == 0 || sb->max_nodes > MKV_MAX_NODES_LIMIT ||
	    sb->nr_pages > MKV_DATA_SIZE_MAX / sb->page_size ||
	    sb->registry_size < MKV_REGISTRY_MIN || sb->registry_size > MKV_REGISTRY_MAX)
		return mkv_err(MKV_E_CORRUPT, "pool %s: superblock geometry out of range", p->path);
	layout_compute(&want, sb->page_size, sb->nr_pages, sb->max_clients, sb->max_nodes);
	if (want.data_size != sb->data_size || want.super_size != sb->super_size ||
	    want.slots_off != sb->slots_off || want.pt_off != sb->pt_off ||
	    want.hint_off != sb->hint_off || want.state_off != sb->state_off ||
	    want.nodes_off != sb->nodes_off || want.rq_off != sb->rq_off ||
	    want.max_nodes != sb->max_nodes || want.rq_depth != sb->rq_depth ||
	    want.slot_size != sb->slot_size || sb->lease_period_ms < 50 ||
	    sb->lease_period_ms > 60000 || sb->client_timeout_ms < 100 ||
	    sb->client_timeout_ms > 3600000)
		return mkv_err(MKV_E_CORRUPT, "pool %s: superblock layout is inconsistent", p->path);
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

	rc = data_fd_open(p, (p->flags & MKV_RDONLY) ? O_RDONLY : O_RDWR);
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
	if (!p->watch)
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
	int rc;

	if (p->flags & MKV_CREATE) {
		if (mkdir(p->path, 0700) == 0)
			made = true;
		else if (errno != EEXIST)
			return mkv_err(-errno, "pool %s: cannot create directory: %m", p->path);
	}
	p->dirfd = open(p->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (p->dirfd < 0) {
		if (errno == ENOENT)
			return mkv_err(MKV_E_NOENT, "no pool at %s", p->path);
		if (errno == ELOOP || (errno == ENOTDIR && lstat(p->path, &st) == 0 && S_ISLNK(st.st_mode)))
			return mkv_err(MKV_E_PERM, "pool %s: the directory is a symbolic link: refusing to follow it",
					p->path);
		if (errno == ENOTDIR)
			return mkv_err(MKV_E_NOTPOOL, "pool %s: not a directory", p->path);
		if (errno == EACCES)
			return mkv_err(-EACCES, "pool %s: permission denied: the pool's directory is not open to this user (see SECURITY in marukv(7))",
					p->path);
		return mkv_err(-errno, "pool %s: %m", p->path);
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
	if ((rc = pool_create(p, opts)))
		return rc;
	return mkv_file_open(p, MKV_FILE_SUPER, O_RDWR, &p->super_fd);
}

MKV_EXPORT int
mkv_pool_open(const char *path, unsigned flags, const struct mkv_opts *opts,
		struct mkv_pool **out)
{
	struct mkv_opts defaults;
	struct mkv_super hdr;
	struct mkv_pool *p;
	int rc;

	mkv_err_clear();
	if (!out)
		return mkv_err(MKV_E_INVAL, "mkv_pool_open: out is NULL");
	*out = NULL;
	if (flags & ~MKV_OPEN_VALID)
		return mkv_err(MKV_E_INVAL, "mkv_pool_open: unknown flags 0x%x",
				flags & ~MKV_OPEN_VALID);
	if ((flags & MKV_CREATE) && (flags & MKV_RDONLY))
		return mkv_err(MKV_E_INVAL, "mkv_pool_open: MKV_CREATE with MKV_RDONLY");
	if (path && !*path)
		return mkv_err(MKV_E_INVAL, "mkv_pool_open: the pool path is empty");
	if (!path)
		path = getenv("MARUKV_POOL");
	if (!path || !*path)
		path = MKV_DEFAULT_POOL;
	if (!opts) {
		defaults = (struct mkv_opts){ MKV_DEFAULT_DATA_SIZE, MKV_DEFAULT_PAGE_SIZE,
				MKV_DEFAULT_MAX_CLIENTS, 0, MKV_DEFAULT_LEASE_PERIOD_MS,
				MKV_DEFAULT_CLIENT_TIMEOUT_MS, MKV_DEFAULT_LOW_WATERMARK,
				MKV_DEFAULT_HIGH_WATERMARK, MKV_DEFAULT_MAX_NODES, false, 0, "" };
		opts = &defaults;
	}

	p = calloc(1, sizeof(*p));
	if (!p || !(p->path = strdup(path))) {
		free(p);
		return mkv_err(MKV_E_NOMEM, "mkv_pool_open: out of memory");
	}
	p->flags = flags;
	p->dirfd = p->super_fd = p->data_fd = -1;
	p->slot = UINT32_MAX;
	/* distinct for every handle a process opens: no struct of a closed one matches */
	if (getrandom(&p->cookie, sizeof(p->cookie), 0) != sizeof(p->cookie))
		p->cookie = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL ^ mkv_clock_now();
	if ((rc = mkv_epoch_init(&p->epochs)) || (rc = mkv_grants_init(&p->grants)) ||
	    (rc = mkv_handout_init(&p->bufs)) || (rc = mkv_handout_init(&p->views)) ||
	    (rc = mkv_rq_init(p, mkv_holder_nudge)))
		goto fail;

	if ((rc = pool_dir_open(p, opts)) || (rc = super_open(p, opts)) ||
	    (rc = super_check(p, &hdr)) || (rc = data_open(p, &hdr)))
		goto fail;
	/* the client slot before the node entry: see mkv_lease_nodes_reclaim() */
	if ((rc = mkv_reg_open(p, &hdr)) || (rc = pool_map(p, &hdr)) ||
	    (rc = mkv_lease_node_name(p, opts->node)) || (rc = mkv_client_attach(p)) ||
	    (rc = mkv_lease_node_attach(p)))
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
	if (p->forked) {
		free(p->epochs.ring);
		free(p->grants.ext);
		free(p->bufs.v);
		free(p->views.v);
		free(p->rq.kept);
		free(p->h.batch);
	} else {
		mkv_lease_fini(p);
		mkv_epoch_fini(&p->epochs);
		mkv_grants_fini(&p->grants);
		mkv_handout_fini(&p->bufs);
		mkv_handout_fini(&p->views);
		mkv_rq_fini(p);
	}
	free(p->watch);
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
