/* SPDX-License-Identifier: MIT */
/*
 * create.c -- a new pool: `data` and `registry.mdb` are built first, then
 * `super.new` is written and renamed to `super`, so a pool is complete
 * exactly when `super` exists.  A directory with a registry or a data file
 * but no `super` is refused, not re-created, so a damaged pool is never
 * silently replaced by an empty one.  The caller (pool.c) holds the
 * directory's lock.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "internal.h"

static uint64_t
align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Offsets of everything in `super`, from the creation parameters (open checks them too). */
void
mkv_create_layout(struct mkv_super *sb, uint64_t page_size, uint64_t nr_pages,
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
	off = align_up(off + nr_pages, MKV_SUPER_ALIGN);
	sb->wlog_off = off;
	off = align_up(off + MKV_WLOG_RECS * sizeof(struct mkv_wlog), MKV_SUPER_ALIGN);
	sb->hold_off = off;
	sb->super_size = off + (uint64_t)max_clients * sizeof(struct mkv_hold_block);
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

/* Remove what a failed creation made, and only that. */
struct made {
	bool data, registry, lock, super_new;
};

static void
create_cleanup(struct mkv_pool *p, const struct made *m, const struct mkv_super *sb)
{
	if (m->data)
		unlinkat(p->dirfd, MKV_FILE_DATA, 0);
	if (m->registry)
		unlinkat(p->dirfd, MKV_FILE_REGISTRY, 0);
	if (m->lock)
		unlinkat(p->dirfd, MKV_FILE_LOCK, 0);
	/* a non-coherent pool's lock directory on this host, from the registry's creation */
	if (m->registry && sb->coherence == MKV_NONCOHERENT)
		mkv_lockdir_remove(p, sb->uuid);
	if (m->super_new)
		unlinkat(p->dirfd, MKV_FILE_SUPER ".new", 0);
}

/* The data arena of a new pool: made here, or a device-DAX node placed as `data` beforehand. */
static int
create_data(struct mkv_pool *p, const struct mkv_opts *opts, uint64_t *nr_pages, bool *made)
{
	enum mkv_backing kind = MKV_BACKING_FILE;
	uint64_t devsize;
	int rc = mkv_file_open_data(p, O_RDWR);

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

/* A registry file left without `super`: an interrupted creation or a damaged pool. */
static int
registry_absent(struct mkv_pool *p)
{
	struct stat st;

	if (fstatat(p->dirfd, MKV_FILE_REGISTRY, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;
	if (!S_ISREG(st.st_mode))
		return mkv_err(MKV_E_PERM, "pool %s: registry.mdb is not a regular file", p->path);
	return mkv_err(MKV_E_CORRUPT,
			"pool %s: registry.mdb exists but super does not: an interrupted creation or a damaged pool; remove the directory to start afresh",
			p->path);
}

/* The new pool's superblock: identity, layout and parameters, closed by its checksum. */
static int
super_init(struct mkv_pool *p, const struct mkv_opts *opts, uint64_t nr_pages,
		struct mkv_super *sb)
{
	memset(sb, 0, sizeof(*sb));
	memcpy(sb->magic, MKV_SUPER_MAGIC, sizeof(sb->magic));
	sb->version = MKV_FORMAT_VERSION;
	sb->header_size = sizeof(*sb);
	if (getrandom(sb->uuid, sizeof(sb->uuid), 0) != sizeof(sb->uuid))
		return mkv_err(-errno, "pool %s: getrandom: %m", p->path);
	sb->uuid[6] = (uint8_t)((sb->uuid[6] & 0x0f) | 0x40);
	sb->uuid[8] = (uint8_t)((sb->uuid[8] & 0x3f) | 0x80);
	mkv_create_layout(sb, opts->page_size, nr_pages, opts->max_clients, opts->max_nodes);
	sb->lease_period_ms = opts->lease_period_ms;
	sb->client_timeout_ms = opts->client_timeout_ms;
	sb->coherence = opts->coherence;
	sb->registry_size = opts->registry_size ? opts->registry_size :
		align_up((8ULL << 20) + nr_pages * 1024, 1ULL << 20);
	sb->ctime = (uint64_t)time(NULL);
	sb->csum = mkv_hash_super(sb);
	return 0;
}

/* The registry: LMDB opens its files by name, so they exist, safely made, before it does. */
static int
registry_create(struct mkv_pool *p, const struct mkv_super *sb, const struct mkv_opts *opts,
		struct made *made)
{
	int fd, rc;

	if ((rc = mkv_file_create(p, MKV_FILE_REGISTRY, &fd)))
		return rc;
	made->registry = true;
	close(fd);
	/* a non-coherent pool's lock file is each host's (lockdir.c) */
	if (sb->coherence == MKV_COHERENT) {
		if ((rc = mkv_file_create(p, MKV_FILE_LOCK, &fd)))
			return rc;
		made->lock = true;
		close(fd);
	}
	return mkv_reg_create(p, sb, opts);
}

/* `super.new` written in full and synced, then renamed to `super`: the pool exists. */
static int
super_install(struct mkv_pool *p, const struct mkv_super *sb, struct made *made)
{
	int fd, rc;

	/* a super.new left by a creation that died is ours to replace (never followed) */
	unlinkat(p->dirfd, MKV_FILE_SUPER ".new", 0);
	if ((rc = mkv_file_create(p, MKV_FILE_SUPER ".new", &fd)))
		return rc;
	made->super_new = true;
	if ((rc = prealloc(fd, sb->super_size, p->path, MKV_FILE_SUPER)))
		goto out;
	if (pwrite(fd, sb, sizeof(*sb), 0) != (ssize_t)sizeof(*sb) || fsync(fd) < 0) {
		rc = mkv_err(errno ? -errno : MKV_E_IO, "pool %s: cannot write super: %m", p->path);
		goto out;
	}
	if (renameat(p->dirfd, MKV_FILE_SUPER ".new", p->dirfd, MKV_FILE_SUPER) < 0 ||
	    fsync(p->dirfd) < 0)
		rc = mkv_err(-errno, "pool %s: cannot install super: %m", p->path);
out:
	close(fd);
	return rc;
}

/* Create the pool in p's directory (locked by the caller); on failure, remove what was made. */
int
mkv_create_pool(struct mkv_pool *p, const struct mkv_opts *opts)
{
	struct mkv_super sb;
	struct made made = { false };
	uint64_t nr_pages = align_up(opts->data_size, opts->page_size) / opts->page_size;
	int rc;

	/* each node entry has a range of max_clients / max_nodes slots (client.c) */
	if (opts->coherence == MKV_NONCOHERENT && opts->max_clients < opts->max_nodes)
		return mkv_err(MKV_E_INVAL,
				"pool %s: a non-coherent pool needs at least a client slot per node: %u slots for %u nodes",
				p->path, opts->max_clients, opts->max_nodes);
	p->create_gid = opts->has_group ? opts->gid : (gid_t)-1;
	if (!(rc = create_data(p, opts, &nr_pages, &made.data)) && !(rc = registry_absent(p)) &&
	    !(rc = super_init(p, opts, nr_pages, &sb)) &&
	    !(rc = registry_create(p, &sb, opts, &made)))
		rc = super_install(p, &sb, &made);
	if (p->data_fd >= 0)
		close(p->data_fd);
	p->data_fd = -1;
	if (rc)
		create_cleanup(p, &made, &sb);
	return rc;
}
