/* SPDX-License-Identifier: MIT */
/*
 * registry.c -- the key registry's LMDB environment (MDB_NOSUBDIR):
 * creating, opening and closing it.  Its databases and their formats are
 * regtable.c's; its transactions, LMDB's errors translated and the check of
 * what LMDB returns are regtxn.c's.  The map size is fixed to the preallocated file's size, so no
 * process ever resizes the map under another.
 *
 * LMDB trusts its file.  Opening checks the meta page LMDB will use before
 * mdb_env_open() and walks the first snapshot before LMDB reads a page of
 * it (regcheck.c); every key and value LMDB returns here is checked to lie
 * inside its map before it is read (mkv_reg_val(), regtxn.c).
 */
#include "config.h"

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"

#define RTXN_CACHE 8   /* reset read txns a handle keeps for renewal */
#define WALK_TRIES 16

/* The handle's registry state, made at create or open, freed by close or forget. */
static int
reg_new(struct mkv_pool *p)
{
	int rc;

	if (!(p->reg = calloc(1, sizeof(*p->reg))))
		return mkv_err(MKV_E_NOMEM, "registry: out of memory");
	p->reg->lock_fd = p->reg->lockdir_fd = -1;
	if ((rc = mkv_reg_snap_init(p))) {
		free(p->reg);
		p->reg = NULL;
	}
	return rc;
}

static unsigned
readers_for(const struct mkv_super *sb)
{
	return sb->max_clients * 16 + 64;
}

/*
 * The data file LMDB opened by name must be the pool's registry.mdb: in a
 * non-coherent pool that name is a link, checked before the open, and
 * this catches one changed meanwhile; in either, it catches a file put
 * in place of the pool's own meanwhile.
 */
static int
env_file_check(struct mkv_pool *p)
{
	struct stat reg, st;
	int fd;

	if (mdb_env_get_fd(p->reg->env, &fd) || fstat(fd, &st) < 0 ||
	    fstatat(p->dirfd, MKV_FILE_REGISTRY, &reg, AT_SYMLINK_NOFOLLOW) < 0)
		return mkv_err(MKV_E_INTERNAL, "pool %s: cannot tell which file LMDB opened", p->path);
	if (st.st_dev != reg.st_dev || st.st_ino != reg.st_ino)
		return mkv_err(MKV_E_PERM,
				"pool %s: LMDB opened another file than the pool's registry.mdb through this host's lock directory: refusing it",
				p->path);
	return 0;
}

/*
 * The environment: LMDB opens the file `file` and its lock file
 * `file`-lock, by name.  A coherent pool's are both in the pool's
 * directory, named through our descriptor of it: the pool's path may
 * name another directory by now (another user who renames or swaps what
 * is there), the descriptor does not.  A non-coherent pool's lock file
 * is in this host's lock directory (lockdir.c), reached the same way.
 */
static int
env_new(struct mkv_pool *p, const struct mkv_super *sb, unsigned flags, char **file)
{
	int rc;

	if (asprintf(file, "/proc/self/fd/%d/%s", p->reg->lockdir_fd >= 0 ? p->reg->lockdir_fd :
			p->dirfd, MKV_FILE_REGISTRY) < 0) {
		*file = NULL;
		return mkv_err(MKV_E_NOMEM, "registry: out of memory");
	}
	if ((rc = mdb_env_create(&p->reg->env)))
		return mkv_reg_err(rc, "registry: mdb_env_create");
	if ((rc = mdb_env_set_maxdbs(p->reg->env, 6)) ||
	    (rc = mdb_env_set_mapsize(p->reg->env, sb->registry_size)) ||
	    (rc = mdb_env_set_maxreaders(p->reg->env, readers_for(sb))))
		return mkv_reg_err(rc, "registry: configure");
	rc = mdb_env_open(p->reg->env, *file,
			MDB_NOSUBDIR | MDB_NOTLS | MDB_NORDAHEAD | flags, 0600);
	if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb is not a valid LMDB environment: %s",
				p->path, mdb_strerror(rc));
	if (rc)
		return mkv_reg_err(rc, "registry: mdb_env_open");
	return env_file_check(p);
}

/* A table's name: "marukv." and its own, padded with '.' to MKV_TABLE_NAME_LEN. */
void
mkv_reg_table_name(char name[MKV_TABLE_NAME_LEN + 1], const char *table)
{
	int n = snprintf(name, MKV_TABLE_NAME_LEN + 1, "marukv.%s", table);

	memset(name + n, '.', MKV_TABLE_NAME_LEN - (size_t)n);
	name[MKV_TABLE_NAME_LEN] = '\0';
}

static int
dbis_open(struct mkv_pool *p, MDB_txn *txn, unsigned flags)
{
	static const char *const names[MKV_TABLES] = { "pages", "freed", "meta", "answers",
			"kids" };
	MDB_dbi *dbis[MKV_TABLES] = { &p->reg->pages, &p->reg->freed, &p->reg->meta,
			&p->reg->answers, &p->reg->kids };
	char name[MKV_TABLE_NAME_LEN + 1];
	int rc = mdb_dbi_open(txn, NULL, 0, &p->reg->entries);

	if (rc)
		return mkv_reg_err(rc, "registry: open database");
	for (size_t i = 0; i < MKV_TABLES; i++) {
		mkv_reg_table_name(name, names[i]);
		rc = mdb_dbi_open(txn, name, flags, dbis[i]);
		if (rc == MDB_NOTFOUND)
			return mkv_err(MKV_E_CORRUPT, "pool %s: registry lacks its %s database",
					p->path, names[i]);
		if (rc)
			return mkv_reg_err(rc, "registry: open database");
	}
	return 0;
}

/* The meta database of a new registry. */
static int
meta_init(struct mkv_pool *p, struct mkv_txn *txn, const struct mkv_super *sb,
		const struct mkv_opts *opts)
{
	int rc;

	if ((rc = mkv_reg_meta_put(p, txn, "format", MKV_REGISTRY_FORMAT)) ||
	    (rc = mkv_reg_meta_put(p, txn, "page_size", sb->page_size)) ||
	    (rc = mkv_reg_meta_put(p, txn, "nr_pages", sb->nr_pages)) ||
	    (rc = mkv_reg_meta_put(p, txn, "bytes", 0)) ||
	    (rc = mkv_reg_meta_put(p, txn, "generation", 0)) ||
	    (rc = mkv_reg_meta_put(p, txn, "holder", 0)) ||
	    (rc = mkv_reg_meta_put(p, txn, "evictions", 0)) ||
	    (rc = mkv_reg_meta_put(p, txn, "wm_low", opts->wm_low)) ||
	    (rc = mkv_reg_meta_put(p, txn, "wm_high", opts->wm_high)))
		return rc;
	return 0;
}

int
mkv_reg_create(struct mkv_pool *p, const struct mkv_super *sb, const struct mkv_opts *opts)
{
	MDB_txn *txn = NULL;
	MDB_val k = { 4, "uuid" }, d = { sizeof(sb->uuid), (void *)sb->uuid };
	char *file = NULL;
	int rc, err;

	if ((rc = reg_new(p)))
		return rc;
	if (sb->coherence == MKV_NONCOHERENT &&
	    (rc = mkv_lockdir_open(p, sb->uuid, &p->reg->lockdir_fd)))
		goto out;
	rc = env_new(p, sb, 0, &file);
	if (rc)
		goto out;
	if ((rc = mdb_txn_begin(p->reg->env, NULL, 0, &txn))) {
		rc = mkv_reg_err(rc, "registry: begin");
		goto out;
	}
	if ((rc = dbis_open(p, txn, MDB_CREATE)) ||
	    (rc = meta_init(p, reg_mkv_txn(txn), sb, opts)))
		goto out;
	if ((rc = mdb_put(txn, p->reg->meta, &k, &d, 0))) {
		rc = mkv_reg_err(rc, "registry: meta");
		goto out;
	}
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc) {
		rc = mkv_reg_err(rc, "registry: commit");
		goto out;
	}
	{
		int fd;

		mdb_env_get_fd(p->reg->env, &fd);
		err = posix_fallocate(fd, 0, (off_t)sb->registry_size);
		if (err == ENOSPC)
			rc = mkv_err(MKV_E_NOSPC, "pool %s: no room for registry.mdb (%llu bytes)",
					p->path, (unsigned long long)sb->registry_size);
		else if (err)
			rc = mkv_err(-err, "pool %s: cannot allocate registry.mdb: %s", p->path,
					strerror(err));
	}
out:
	if (txn)
		mdb_txn_abort(txn);
	mkv_reg_close(p);
	free(file);
	return rc;
}

/*
 * A coherent pool's LMDB lock file: every handle writes its reader slots
 * there.  If it was removed, make it again as the pool's other files are
 * (LMDB would create it through whatever the name leads to, with the
 * umask's mode).
 */
static int
lock_file(struct mkv_pool *p)
{
	struct stat st;
	int rc = mkv_file_check(p, MKV_FILE_LOCK, O_RDWR), fd;

	if (rc != -ENOENT)
		return rc;
	if (fstatat(p->dirfd, MKV_FILE_REGISTRY, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return mkv_err(-errno, "pool %s: registry.mdb: %m", p->path);
	p->create_gid = (st.st_mode & S_IRWXG) ? st.st_gid : (gid_t)-1;
	if ((rc = mkv_file_create(p, MKV_FILE_LOCK, &fd)))
		return rc;
	close(fd);
	return 0;
}

/*
 * Non-coherent pools: LMDB's lock file is each host's own, and a read txn
 * takes its snapshot from the last txn id in it, which only commits made
 * on this host advance.  Map it, to advance it from the metas before each
 * read txn (mkv_reg_fresh_metas()), after checking that it is laid out as
 * this library knows: LMDB's magic and lock format, and an id where we look
 * for it that no meta has passed.  The descriptor is opened before LMDB
 * opens the file (mkv_lockdir_open() made it) and closed after LMDB has
 * closed it: closing any descriptor of a file drops every fcntl() lock the
 * process holds on it, LMDB's included.
 */
static int
lock_txnid_map(struct mkv_pool *p)
{
	MDB_envinfo info;
	const uint32_t *head;
	uint64_t id;
	void *map;

	map = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED,
			p->reg->lock_fd, 0);
	if (map == MAP_FAILED)
		return mkv_err(-errno, "pool %s: cannot map registry.mdb-lock: %m", p->path);
	p->reg->lock_map = map;
	head = map;
	/*
	 * The id trails the newest meta's: a writer here stores it after the
	 * meta, and another host's commits never reach it.  It is never ahead.
	 */
	id = __atomic_load_n((uint64_t *)((char *)map + MKV_REG_LOCK_TXNID), __ATOMIC_ACQUIRE);
	mdb_env_info(p->reg->env, &info);
	if (head[0] != MKV_REG_LOCK_MAGIC || head[1] != MKV_REG_LOCK_FORMAT || id == 0 ||
	    id > info.me_last_txnid)
		return mkv_err(MKV_E_INTERNAL,
				"pool %s: registry.mdb-lock is not laid out as this library knows (LMDB 0.9 on x86-64): a non-coherent pool cannot be read with this LMDB",
				p->path);
	p->reg->lock_txnid = (uint64_t *)((char *)map + MKV_REG_LOCK_TXNID);
	return 0;
}

/* LMDB's meta pages, checked before mdb_env_open() trusts them. */
static int
metas_check(struct mkv_pool *p, const struct mkv_super *sb)
{
	struct mkv_regcheck c = { .pool = p->path, .map_size = sb->registry_size };
	int rc;


	c.fd = openat(p->dirfd, MKV_FILE_REGISTRY, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (c.fd < 0)
		return mkv_err(-errno, "pool %s: registry.mdb: %m", p->path);
	/*
	 * Non-coherent memory: this host may cache lines of the file from
	 * before another host's commits, and the kernel's reads go through
	 * the same caches.  A map of our own to drop them through, kept open.
	 */
	if (p->noncoherent) {
		void *map = mmap(NULL, sb->registry_size, PROT_READ, MAP_SHARED, c.fd, 0);

		if (map == MAP_FAILED) {
			rc = mkv_err(-errno, "pool %s: cannot map registry.mdb: %m", p->path);
			close(c.fd);
			return rc;
		}
		p->reg->shadow = map;
		p->reg->shadow_size = sb->registry_size;
		p->reg->psize = (size_t)sysconf(_SC_PAGESIZE);
		mkv_reg_fresh_metas(p);
	}
	rc = mkv_regcheck_metas(&c);
	if (!rc && p->reg->shadow)
		mkv_reg_fresh_pages(p, c.last_pgno);
	close(c.fd);
	return rc;
}

/*
 * Walk the snapshot of the read txn @p txn (regcheck.c).  The walk starts
 * from the meta page carrying the txn's id; a writer that committed twice
 * since the txn began has overwritten it, and the txn is renewed.
 */
static int
walk(struct mkv_pool *p, MDB_txn *txn, struct mkv_regcheck *c)
{
	MDB_envinfo info;
	int rc;

	memset(c, 0, sizeof(*c));
	c->pool = p->path;
	mdb_env_get_fd(p->reg->env, &c->fd);
	mdb_env_info(p->reg->env, &info);
	c->map_size = info.me_mapsize;
	for (unsigned tries = 0; tries < WALK_TRIES; tries++) {
		if ((rc = mkv_regcheck_walk(c, mdb_txn_id(txn))) != -EAGAIN)
			return rc;
		mdb_txn_reset(txn);
		mkv_reg_fresh_metas(p);
		if ((rc = mdb_txn_renew(txn)))
			return mkv_reg_err(rc, "registry: read txn");
		mkv_reg_fresh_snapshot(p, txn);
	}
	return mkv_err(-EAGAIN, "pool %s: registry.mdb changed under %u checks in a row",
			p->path, WALK_TRIES);
}

int
mkv_reg_walk(struct mkv_pool *p, struct mkv_txn *txn)
{
	struct mkv_regcheck c;

	return walk(p, reg_txn(txn), &c);
}

/*
 * Where LMDB mapped the file.  mdb_env_info() gives the meta page's
 * mm_address (used only with MDB_FIXEDMAP), not the map, so the map is
 * found from LMDB's pointer to the main database's first key, less that
 * key's offset in the file as the walk found it.
 */
static int
map_find(struct mkv_pool *p, MDB_txn *txn, const struct mkv_regcheck *c)
{
	MDB_envinfo info;
	MDB_cursor *cur;
	MDB_val k, d;
	uintptr_t base;
	int rc;

	if (!c->first_key_off)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb holds no databases", p->path);
	if ((rc = mdb_dbi_open(txn, NULL, 0, &p->reg->entries)) ||
	    (rc = mdb_cursor_open(txn, p->reg->entries, &cur)))
		return mkv_reg_err(rc, "registry: open database");
	rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
	mdb_cursor_close(cur);
	if (rc)
		return mkv_reg_err(rc, "registry: first key");
	mdb_env_info(p->reg->env, &info);
	base = (uintptr_t)k.mv_data - c->first_key_off;
	if (base % (uintptr_t)sysconf(_SC_PAGESIZE) || c->first_key_off >= info.me_mapsize)
		return mkv_err(MKV_E_INTERNAL, "pool %s: registry.mdb: LMDB's map is not where its first key says",
				p->path);
	p->reg->map = (const char *)base;
	p->reg->mapsize = info.me_mapsize;
	return 0;
}

/*
 * LMDB opens both files by name: check them first (see mkv_file_check()
 * and lockdir.c), then the meta page LMDB will use.
 */
static int
files_check(struct mkv_pool *p, const struct mkv_super *sb)
{
	struct stat st;
	int rc = mkv_file_check(p, MKV_FILE_REGISTRY, (p->flags & MKV_RDONLY) ? O_RDONLY : O_RDWR);

	if (rc == -ENOENT)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb is missing", p->path);
	if (rc || (rc = p->noncoherent ? mkv_lockdir_open(p, sb->uuid, &p->reg->lockdir_fd) :
			lock_file(p)))
		return rc;
	if (fstatat(p->dirfd, MKV_FILE_REGISTRY, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return mkv_err(-errno, "pool %s: registry.mdb: %m", p->path);
	if ((uint64_t)st.st_size < sb->registry_size)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb is %lld bytes, expected %llu",
				p->path, (long long)st.st_size,
				(unsigned long long)sb->registry_size);
	return metas_check(p, sb);
}

/* The format first: an older registry may lack a database. */
static int
format_check(struct mkv_pool *p, MDB_txn *txn)
{
	char name[MKV_TABLE_NAME_LEN + 1];
	uint64_t format;
	int rc;

	mkv_reg_table_name(name, "meta");
	rc = mdb_dbi_open(txn, name, 0, &p->reg->meta);
	if (rc == MDB_NOTFOUND)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry lacks its meta database", p->path);
	if (rc)
		return mkv_reg_err(rc, "registry: open database");
	if ((rc = mkv_reg_meta_get(p, reg_mkv_txn(txn), "format", &format)))
		return rc;
	if (format != MKV_REGISTRY_FORMAT)
		return mkv_err(MKV_E_VERSION, "pool %s: registry format %llu; this library reads %u",
				p->path, (unsigned long long)format, MKV_REGISTRY_FORMAT);
	return 0;
}

/*
 * The first read txn: every page of its snapshot walked before LMDB reads
 * any, then the format, the databases and the pool's uuid.
 */
static int
first_txn(struct mkv_pool *p, const struct mkv_super *sb)
{
	MDB_txn *txn = NULL;
	MDB_val k = { 4, "uuid" }, d;
	struct mkv_regcheck c;
	uint64_t id;
	int rc;

	if (mkv_reg_snap_on(p))
		rc = mkv_reg_snap_enter(p, &txn, false);
	else {
		mkv_reg_fresh_metas(p);
		rc = mkv_reg_rtxn_start(p, &txn);
	}
	if (rc)
		return rc;
	id = mdb_txn_id(txn);
	mkv_reg_fresh_snapshot(p, txn);
	if ((rc = walk(p, txn, &c)) || (rc = map_find(p, txn, &c)) ||
	    (rc = format_check(p, txn)) || (rc = dbis_open(p, txn, 0)))
		goto out;
	rc = mdb_get(txn, p->reg->meta, &k, &d);
	if (rc == 0 && (rc = mkv_reg_val(p, txn, &d, "the uuid")))
		goto out;
	if (rc || d.mv_size != sizeof(sb->uuid) || memcmp(d.mv_data, sb->uuid, d.mv_size)) {
		rc = mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb belongs to another pool", p->path);
		goto out;
	}
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc)
		rc = mkv_reg_err(rc, "registry: commit");
out:
	if (txn)
		mdb_txn_abort(txn);
	if (mkv_reg_snap_on(p))
		mkv_reg_snap_leave(p, id);
	return rc;
}

/*
 * How this handle opens the environment.  A holder of a coherent pool
 * writes the registry in place (MDB_WRITEMAP): no copy of each page it
 * changes in memory of its own and no pwrite of it at the commit, and
 * LMDB's msync of the map before the meta persists the pages.  A
 * non-coherent pool's holder writes with pwrite, which on DAX memory the
 * kernel writes through to the device as it copies: other hosts see a
 * commit whatever this host's caches hold of the map.  On a file in
 * memory (persist.c) there is nothing to sync to: MDB_NOSYNC spares the
 * commit its msync or fdatasync calls.
 */
static unsigned
env_flags(const struct mkv_pool *p)
{
	unsigned flags = p->noncoherent ? 0 : MDB_WRITEMAP;

	if (p->flags & MKV_RDONLY)
		return MDB_RDONLY;
	return mkv_persist_in_memory(p->dirfd) ? flags | MDB_NOSYNC : flags;
}

int
mkv_reg_open(struct mkv_pool *p, const struct mkv_super *sb)
{
	char *file = NULL;
	int rc, stale;

	if ((rc = reg_new(p)) || (rc = files_check(p, sb)))
		return rc;
	if (pthread_mutex_init(&p->reg->lock, NULL))
		return mkv_err(MKV_E_NOMEM, "registry: mutex");
	p->reg->rtxn = calloc(RTXN_CACHE, sizeof(*p->reg->rtxn));
	if (!p->reg->rtxn)
		return mkv_err(MKV_E_NOMEM, "registry: out of memory");
	p->reg->cap = RTXN_CACHE;
	if (p->reg->shadow &&
	    (p->reg->lock_fd = openat(p->reg->lockdir_fd, MKV_FILE_LOCK,
			O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return mkv_err(-errno, "pool %s: registry.mdb-lock: %m", p->path);
	rc = env_new(p, sb, env_flags(p), &file);
	free(file);
	if (rc || (p->reg->shadow && (rc = lock_txnid_map(p))))
		return rc;
	/* Readers killed inside a txn pin old registry pages: clear them. */
	if ((stale = mkv_reg_reader_check(p)) > 0)
		mkv_log(MKV_LOG_INFO, "pool %s: cleared %d stale registry readers", p->path, stale);
	return first_txn(p, sb);
}

void
mkv_reg_close(struct mkv_pool *p)
{
	if (!p->reg)
		return;
	if (p->reg->ready)
		mdb_txn_abort(p->reg->ready);
	if (p->reg->rtxn) {
		for (unsigned i = 0; i < p->reg->nrtxn; i++)
			mdb_txn_abort(p->reg->rtxn[i]);
		free(p->reg->rtxn);
		pthread_mutex_destroy(&p->reg->lock);
	}
	mkv_reg_snap_fini(p);
	mkv_reg_wlog_fini(p->reg);
	if (p->reg->env)
		mdb_env_close(p->reg->env);
	if (p->reg->shadow)
		munmap((void *)p->reg->shadow, p->reg->shadow_size);
	if (p->reg->lock_map)
		munmap(p->reg->lock_map, (size_t)sysconf(_SC_PAGESIZE));
	if (p->reg->lock_fd >= 0)
		close(p->reg->lock_fd);
	if (p->reg->lockdir_fd >= 0)
		close(p->reg->lockdir_fd);
	free(p->reg);
	p->reg = NULL;
}

/*
 * In a child after fork(): free what is ours and leave LMDB's objects be.
 * LMDB forbids using an environment across fork(), and closing it or
 * aborting its read txns here would clear the parent's reader slots.
 */
void
mkv_reg_forget(struct mkv_pool *p)
{
	if (!p->reg)
		return;
	free(p->reg->rtxn);
	free(p->reg->snaps.ring);
	free(p->reg);
	p->reg = NULL;
}
