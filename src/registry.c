/* SPDX-License-Identifier: MIT */
/*
 * registry.c -- the key registry: an LMDB environment (MDB_NOSUBDIR) with
 * the databases
 *   entries  user key -> struct mkv_entry (the main database; see layout.h)
 *   pages    first page (big-endian u64) -> user key
 *   freed    txn id (big-endian u64) -> struct mkv_extent[] released in it
 *   meta     name -> value (format, uuid, geometry, counters, generation)
 *   answers  request entry -> the last request applied from it, and its answer
 *   kids     key hash (u64) -> how many published entries name it as parent
 * The map size is fixed to the preallocated file's size, so no process ever
 * resizes the map under another.  Read transactions are reused: reset after
 * use and renewed for the next lookup.
 *
 * LMDB trusts its file.  Opening checks the meta page LMDB will use before
 * mdb_env_open() and walks the first snapshot before LMDB reads a page of
 * it (regcheck.c); every key and value LMDB returns here is checked to lie
 * inside its map before it is read (mkv_reg_val).
 */
#include "config.h"

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define RTXN_CACHE 8
#define WALK_TRIES 16

static unsigned
readers_for(const struct mkv_super *sb)
{
	return sb->max_clients * 16 + 64;
}

static int
env_new(struct mkv_pool *p, const struct mkv_super *sb, unsigned flags, char **file)
{
	int rc;

	if (asprintf(file, "%s/%s", p->path, MKV_FILE_REGISTRY) < 0) {
		*file = NULL;
		return mkv_err(MKV_E_NOMEM, "registry: out of memory");
	}
	if ((rc = mdb_env_create(&p->reg.env)))
		return mkv_err_mdb(rc, "registry: mdb_env_create");
	if ((rc = mdb_env_set_maxdbs(p->reg.env, 6)) ||
	    (rc = mdb_env_set_mapsize(p->reg.env, sb->registry_size)) ||
	    (rc = mdb_env_set_maxreaders(p->reg.env, readers_for(sb))))
		return mkv_err_mdb(rc, "registry: configure");
	rc = mdb_env_open(p->reg.env, *file,
			MDB_NOSUBDIR | MDB_NOTLS | MDB_NORDAHEAD | flags, 0600);
	if (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb is not a valid LMDB environment: %s",
				p->path, mdb_strerror(rc));
	if (rc)
		return mkv_err_mdb(rc, "registry: mdb_env_open");
	return 0;
}

bool
mkv_reg_is_table(const MDB_val *key)
{
	return key->mv_size > MKV_KEY_MAX;
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
	MDB_dbi *dbis[MKV_TABLES] = { &p->reg.pages, &p->reg.freed, &p->reg.meta,
			&p->reg.answers, &p->reg.kids };
	char name[MKV_TABLE_NAME_LEN + 1];
	int rc = mdb_dbi_open(txn, NULL, 0, &p->reg.entries);

	if (rc)
		return mkv_err_mdb(rc, "registry: open database");
	for (size_t i = 0; i < MKV_TABLES; i++) {
		mkv_reg_table_name(name, names[i]);
		rc = mdb_dbi_open(txn, name, flags, dbis[i]);
		if (rc == MDB_NOTFOUND)
			return mkv_err(MKV_E_CORRUPT, "pool %s: registry lacks its %s database",
					p->path, names[i]);
		if (rc)
			return mkv_err_mdb(rc, "registry: open database");
	}
	return 0;
}

int
mkv_reg_meta_get(struct mkv_pool *p, MDB_txn *txn, const char *name, uint64_t *v)
{
	MDB_val k = { strlen(name), (void *)name }, d;
	int rc = mdb_get(txn, p->reg.meta, &k, &d);

	if (rc == MDB_NOTFOUND)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry meta lacks %s", p->path, name);
	if (rc)
		return mkv_err_mdb(rc, "registry: meta");
	if ((rc = mkv_reg_val(p, txn, &d, "a meta value")))
		return rc;
	if (d.mv_size != sizeof(*v))
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry meta %s has %zu bytes",
				p->path, name, d.mv_size);
	memcpy(v, d.mv_data, sizeof(*v));
	return 0;
}

int
mkv_reg_meta_put(struct mkv_pool *p, MDB_txn *txn, const char *name, uint64_t v)
{
	MDB_val k = { strlen(name), (void *)name }, d = { sizeof(v), &v };
	int rc = mdb_put(txn, p->reg.meta, &k, &d, 0);

	return rc ? mkv_err_mdb(rc, "registry: meta") : 0;
}

int
mkv_reg_create(struct mkv_pool *p, const struct mkv_super *sb, const struct mkv_opts *opts)
{
	MDB_txn *txn = NULL;
	MDB_val k = { 4, "uuid" }, d = { sizeof(sb->uuid), (void *)sb->uuid };
	char *file = NULL;
	int rc, err;

	rc = env_new(p, sb, 0, &file);
	if (rc)
		goto out;
	if ((rc = mdb_txn_begin(p->reg.env, NULL, 0, &txn))) {
		rc = mkv_err_mdb(rc, "registry: begin");
		goto out;
	}
	if ((rc = dbis_open(p, txn, MDB_CREATE)) ||
	    (rc = mkv_reg_meta_put(p, txn, "format", MKV_REGISTRY_FORMAT)) ||
	    (rc = mkv_reg_meta_put(p, txn, "page_size", sb->page_size)) ||
	    (rc = mkv_reg_meta_put(p, txn, "nr_pages", sb->nr_pages)) ||
	    (rc = mkv_reg_meta_put(p, txn, "bytes", 0)) ||
	    (rc = mkv_reg_meta_put(p, txn, "generation", 0)) ||
	    (rc = mkv_reg_meta_put(p, txn, "holder", 0)) ||
	    (rc = mkv_reg_meta_put(p, txn, "evictions", 0)) ||
	    (rc = mkv_reg_meta_put(p, txn, "wm_low", opts->wm_low)) ||
	    (rc = mkv_reg_meta_put(p, txn, "wm_high", opts->wm_high)))
		goto out;
	if ((rc = mdb_put(txn, p->reg.meta, &k, &d, 0))) {
		rc = mkv_err_mdb(rc, "registry: meta");
		goto out;
	}
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc) {
		rc = mkv_err_mdb(rc, "registry: commit");
		goto out;
	}
	{
		int fd;

		mdb_env_get_fd(p->reg.env, &fd);
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
 * LMDB's lock file: every handle writes its reader slots there.  If it was
 * removed, make it again as the pool's other files are (LMDB would create
 * it through whatever the name leads to, with the umask's mode).
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

/* LMDB's meta pages, checked before mdb_env_open() trusts them. */
static int
metas_check(struct mkv_pool *p, const struct mkv_super *sb)
{
	struct mkv_regcheck c = { .pool = p->path, .map_size = sb->registry_size };
	int rc;

	c.fd = openat(p->dirfd, MKV_FILE_REGISTRY, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (c.fd < 0)
		return mkv_err(-errno, "pool %s: registry.mdb: %m", p->path);
	rc = mkv_regcheck_metas(&c);
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
	mdb_env_get_fd(p->reg.env, &c->fd);
	mdb_env_info(p->reg.env, &info);
	c->map_size = info.me_mapsize;
	for (unsigned tries = 0; tries < WALK_TRIES; tries++) {
		if ((rc = mkv_regcheck_walk(c, mdb_txn_id(txn))) != -EAGAIN)
			return rc;
		mdb_txn_reset(txn);
		if ((rc = mdb_txn_renew(txn)))
			return mkv_err_mdb(rc, "registry: read txn");
	}
	return mkv_err(-EAGAIN, "pool %s: registry.mdb changed under %u checks in a row",
			p->path, WALK_TRIES);
}

int
mkv_reg_walk(struct mkv_pool *p, MDB_txn *txn)
{
	struct mkv_regcheck c;

	return walk(p, txn, &c);
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
	if ((rc = mdb_dbi_open(txn, NULL, 0, &p->reg.entries)) ||
	    (rc = mdb_cursor_open(txn, p->reg.entries, &cur)))
		return mkv_err_mdb(rc, "registry: open database");
	rc = mdb_cursor_get(cur, &k, &d, MDB_FIRST);
	mdb_cursor_close(cur);
	if (rc)
		return mkv_err_mdb(rc, "registry: first key");
	mdb_env_info(p->reg.env, &info);
	base = (uintptr_t)k.mv_data - c->first_key_off;
	if (base % (uintptr_t)sysconf(_SC_PAGESIZE) || c->first_key_off >= info.me_mapsize)
		return mkv_err(MKV_E_INTERNAL, "pool %s: registry.mdb: LMDB's map is not where its first key says",
				p->path);
	p->reg.map = (const char *)base;
	p->reg.mapsize = info.me_mapsize;
	return 0;
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
	uintptr_t a = (uintptr_t)v->mv_data, lo = (uintptr_t)p->reg.map;

	if (a >= lo && v->mv_size <= p->reg.mapsize && a - lo <= p->reg.mapsize - v->mv_size)
		return 0;
	if (mdb_txn_id(txn) > mkv_reg_last_txn(p))
		return 0;
	return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb: LMDB gave %s outside its map",
			p->path, what);
}

int
mkv_reg_open(struct mkv_pool *p, const struct mkv_super *sb)
{
	MDB_txn *txn = NULL;
	MDB_val k = { 4, "uuid" }, d;
	struct mkv_regcheck c;
	struct stat st;
	char name[MKV_TABLE_NAME_LEN + 1];
	uint64_t format;
	char *file = NULL;
	int rc, stale = 0;

	/* LMDB opens both files by name: check them first (see mkv_file_check()) */
	rc = mkv_file_check(p, MKV_FILE_REGISTRY, (p->flags & MKV_RDONLY) ? O_RDONLY : O_RDWR);
	if (rc == -ENOENT)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb is missing", p->path);
	if (rc || (rc = lock_file(p)))
		return rc;
	if (fstatat(p->dirfd, MKV_FILE_REGISTRY, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return mkv_err(-errno, "pool %s: registry.mdb: %m", p->path);
	if ((uint64_t)st.st_size < sb->registry_size)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb is %lld bytes, expected %llu",
				p->path, (long long)st.st_size,
				(unsigned long long)sb->registry_size);
	if ((rc = metas_check(p, sb)))
		return rc;
	if (pthread_mutex_init(&p->reg.lock, NULL))
		return mkv_err(MKV_E_NOMEM, "registry: mutex");
	p->reg.rtxn = calloc(RTXN_CACHE, sizeof(*p->reg.rtxn));
	if (!p->reg.rtxn)
		return mkv_err(MKV_E_NOMEM, "registry: out of memory");
	p->reg.cap = RTXN_CACHE;
	rc = env_new(p, sb, (p->flags & MKV_RDONLY) ? MDB_RDONLY : 0, &file);
	free(file);
	if (rc)
		return rc;
	/* Readers killed inside a txn pin old registry pages: clear them. */
	if ((stale = mkv_reg_reader_check(p)) > 0)
		mkv_log(MKV_LOG_INFO, "pool %s: cleared %d stale registry readers", p->path, stale);
	if ((rc = mdb_txn_begin(p->reg.env, NULL, MDB_RDONLY, &txn)))
		return mkv_err_mdb(rc, "registry: begin");
	/* every page of the snapshot before LMDB reads any */
	if ((rc = walk(p, txn, &c)) || (rc = map_find(p, txn, &c)))
		goto out;
	/* the format first: an older registry may lack a database */
	mkv_reg_table_name(name, "meta");
	rc = mdb_dbi_open(txn, name, 0, &p->reg.meta);
	if (rc) {
		rc = rc == MDB_NOTFOUND ?
			mkv_err(MKV_E_CORRUPT, "pool %s: registry lacks its meta database", p->path) :
			mkv_err_mdb(rc, "registry: open database");
		goto out;
	}
	if ((rc = mkv_reg_meta_get(p, txn, "format", &format)))
		goto out;
	if (format != MKV_REGISTRY_FORMAT) {
		rc = mkv_err(MKV_E_VERSION, "pool %s: registry format %llu; this library reads %u",
				p->path, (unsigned long long)format, MKV_REGISTRY_FORMAT);
		goto out;
	}
	if ((rc = dbis_open(p, txn, 0)))
		goto out;
	rc = mdb_get(txn, p->reg.meta, &k, &d);
	if (rc == 0 && (rc = mkv_reg_val(p, txn, &d, "the uuid")))
		goto out;
	if (rc || d.mv_size != sizeof(sb->uuid) || memcmp(d.mv_data, sb->uuid, d.mv_size)) {
		rc = mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb belongs to another pool", p->path);
		goto out;
	}
	rc = mdb_txn_commit(txn);
	txn = NULL;
	if (rc)
		rc = mkv_err_mdb(rc, "registry: commit");
out:
	if (txn)
		mdb_txn_abort(txn);
	return rc;
}

void
mkv_reg_close(struct mkv_pool *p)
{
	if (p->reg.ready)
		mdb_txn_abort(p->reg.ready);
	if (p->reg.rtxn) {
		for (unsigned i = 0; i < p->reg.nrtxn; i++)
			mdb_txn_abort(p->reg.rtxn[i]);
		free(p->reg.rtxn);
		pthread_mutex_destroy(&p->reg.lock);
	}
	if (p->reg.env)
		mdb_env_close(p->reg.env);
	memset(&p->reg, 0, sizeof(p->reg));
}

/*
 * A registry write txn, for the lease holder.  Only a holder writes, but a
 * holder that was stopped inside a txn keeps LMDB's write mutex, and a
 * successor would block on it for as long as the stop lasts.  So writers
 * first take flock() of super, which they wait for a bounded time (a
 * quarter lease period): MKV_E_TIMEDOUT if a stopped holder keeps it.
 */
int
mkv_reg_wtxn(struct mkv_pool *p, MDB_txn **txn)
{
	int rc = mkv_flock_until(p->super_fd, LOCK_EX, mkv_now_ns() + p->lease_period_ns / 4);

	if (rc == -ETIMEDOUT)
		return mkv_err(MKV_E_TIMEDOUT,
				"pool %s: another lease holder is inside a registry write (stopped?)",
				p->path);
	if (rc)
		return mkv_err(rc, "pool %s: cannot lock super: %s", p->path, strerror(-rc));
	if ((rc = mdb_txn_begin(p->reg.env, NULL, 0, txn))) {
		flock(p->super_fd, LOCK_UN);
		return mkv_err_mdb(rc, "registry: write txn");
	}
	return 0;
}

/* Commit (or abort) what mkv_reg_wtxn() began; the commit's error. */
int
mkv_reg_wtxn_end(struct mkv_pool *p, MDB_txn *txn, bool commit)
{
	int rc = 0;

	if (commit)
		rc = mdb_txn_commit(txn);
	else
		mdb_txn_abort(txn);
	flock(p->super_fd, LOCK_UN);
	return rc ? mkv_err_mdb(rc, "registry: commit") : 0;
}

/*
 * In a child after fork(): free what is ours and leave LMDB's objects be.
 * LMDB forbids using an environment across fork(), and closing it or
 * aborting its read txns here would clear the parent's reader slots.
 */
void
mkv_reg_forget(struct mkv_pool *p)
{
	free(p->reg.rtxn);
	memset(&p->reg, 0, sizeof(p->reg));
}

int
mkv_reg_rtxn(struct mkv_pool *p, MDB_txn **txn)
{
	MDB_txn *t = __atomic_exchange_n(&p->reg.ready, NULL, __ATOMIC_ACQUIRE);
	int rc;

	if (!t) {
		pthread_mutex_lock(&p->reg.lock);
		if (p->reg.nrtxn)
			t = p->reg.rtxn[--p->reg.nrtxn];
		pthread_mutex_unlock(&p->reg.lock);
	}
	if (t) {
		rc = mdb_txn_renew(t);
		if (!rc) {
			*txn = t;
			return 0;
		}
		mdb_txn_abort(t);
	}
	rc = mdb_txn_begin(p->reg.env, NULL, MDB_RDONLY, txn);
	return rc ? mkv_err_mdb(rc, "registry: read txn") : 0;
}

void
mkv_reg_rtxn_done(struct mkv_pool *p, MDB_txn *txn)
{
	MDB_txn *none = NULL;

	mdb_txn_reset(txn);
	/* One thread at a time (the common case) never takes the lock. */
	if (__atomic_compare_exchange_n(&p->reg.ready, &none, txn, false, __ATOMIC_RELEASE,
			__ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&p->reg.lock);
	if (p->reg.nrtxn < p->reg.cap) {
		p->reg.rtxn[p->reg.nrtxn++] = txn;
		txn = NULL;
	}
	pthread_mutex_unlock(&p->reg.lock);
	if (txn)
		mdb_txn_abort(txn);
}

int
mkv_check_key(const void *key, size_t klen)
{
	if (!key)
		return mkv_err(MKV_E_INVAL, "key is NULL");
	if (klen == 0 || klen > MKV_KEY_MAX)
		return mkv_err(MKV_E_INVAL, "key length %zu out of range (1 to %d)", klen,
				MKV_KEY_MAX);
	return 0;
}

int
mkv_reg_lookup(struct mkv_pool *p, MDB_txn *txn, const void *key, size_t klen,
		struct mkv_entry *e)
{
	MDB_val k = { klen, (void *)key }, d;
	int rc = mdb_get(txn, p->reg.entries, &k, &d);

	if (rc == MDB_NOTFOUND)
		return mkv_err(MKV_E_NOTFOUND, "no such key");
	if (rc)
		return mkv_err_mdb(rc, "registry: lookup");
	if ((rc = mkv_reg_val(p, txn, &d, "an entry")))
		return rc;
	if (d.mv_size != sizeof(*e))
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry entry of %zu bytes", p->path,
				d.mv_size);
	memcpy(e, d.mv_data, sizeof(*e));
	if (e->version != MKV_ENTRY_VERSION)
		return mkv_err(MKV_E_VERSION, "pool %s: registry entry version %u", p->path,
				e->version);
	if (e->npages == 0 || e->page >= p->nr_pages || e->npages > p->nr_pages - e->page ||
	    e->length > e->npages * p->page_size)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry entry points outside the arena",
				p->path);
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
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, d;
	uint64_t total, reserve, used, freelist = 0;
	int rc;

	mdb_env_info(p->reg.env, &info);
	mdb_env_stat(p->reg.env, &st);
	total = info.me_mapsize / st.ms_psize;
	reserve = total / 20 > 64 ? total / 20 : 64;
	used = info.me_last_pgno + 1;
	*full = false;
	if (used + reserve <= total)
		return 0;
	/* LMDB opens its free list only in read txns */
	if ((rc = mkv_reg_rtxn(p, &txn)))
		return rc;
	if ((rc = mdb_cursor_open(txn, 0, &c))) {
		mkv_reg_rtxn_done(p, txn);
		return mkv_err_mdb(rc, "registry: free list");
	}
	while ((rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) == 0) {
		size_t n;

		if (mkv_reg_val(p, txn, &d, "a free list")) {
			mdb_cursor_close(c);
			mkv_reg_rtxn_done(p, txn);
			return MKV_E_CORRUPT;
		}
		if (d.mv_size < sizeof(n))
			continue;
		memcpy(&n, d.mv_data, sizeof(n));  /* an MDB_IDL: count, then page numbers */
		freelist += n;
	}
	mdb_cursor_close(c);
	mkv_reg_rtxn_done(p, txn);
	if (rc != MDB_NOTFOUND)
		return mkv_err_mdb(rc, "registry: free list");
	*full = used - (freelist < used ? freelist : used) + reserve > total;
	return 0;
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

	mdb_env_info(p->reg.env, &info);
	return info.me_last_txnid;
}

/*
 * The key of the value whose first page is page (the pages table), copied
 * out.  MKV_E_NOTFOUND, without a message, if no value starts there.
 */
int
mkv_reg_page_key(struct mkv_pool *p, MDB_txn *txn, uint64_t page, uint8_t key[MKV_KEY_MAX],
		size_t *klen)
{
	uint64_t be = htobe64(page);
	MDB_val pk = { sizeof(be), &be }, k;
	int rc = mdb_get(txn, p->reg.pages, &pk, &k);

	if (rc == MDB_NOTFOUND)
		return MKV_E_NOTFOUND;
	if (rc)
		return mkv_err_mdb(rc, "registry: pages");
	if ((rc = mkv_reg_val(p, txn, &k, "a pages record")))
		return rc;
	if (k.mv_size == 0 || k.mv_size > MKV_KEY_MAX)
		return mkv_err(MKV_E_CORRUPT, "pool %s: the pages record of page %llu has %zu bytes",
				p->path, (unsigned long long)page, k.mv_size);
	memcpy(key, k.mv_data, k.mv_size);
	*klen = k.mv_size;
	return 0;
}

/*
 * How many published entries name the key of this hash as their parent
 * (the kids table; a damaged record counts 0).  MKV_E_NOTFOUND, without a
 * message, if none does.
 */
int
mkv_reg_kids(struct mkv_pool *p, MDB_txn *txn, uint64_t hash, uint64_t *n)
{
	MDB_val k = { sizeof(hash), &hash }, d;
	int rc = mdb_get(txn, p->reg.kids, &k, &d);

	*n = 0;
	if (rc == MDB_NOTFOUND)
		return MKV_E_NOTFOUND;
	if (rc)
		return mkv_err_mdb(rc, "registry: kids");
	if ((rc = mkv_reg_val(p, txn, &d, "a kids record")))
		return rc;
	if (d.mv_size == sizeof(*n))
		memcpy(n, d.mv_data, sizeof(*n));
	return 0;
}

/*
 * The storage's own fence, first in every holder's write txn: refuse to
 * commit under a token (generation, holder) below the one stored in meta;
 * store ours when it is above.  MKV_E_FENCED: a newer holder committed.
 */
int
mkv_reg_fence(struct mkv_pool *p, MDB_txn *txn)
{
	uint64_t gen, holder, mine = p->h.generation, me = p->h.holder_id;
	int rc;

	if ((rc = mkv_reg_meta_get(p, txn, "generation", &gen)) ||
	    (rc = mkv_reg_meta_get(p, txn, "holder", &holder)))
		return rc;
	if (gen > mine || (gen == mine && holder > me))
		return mkv_err(MKV_E_FENCED, "pool %s: lease token %llu/%llx superseded by %llu/%llx",
				p->path, (unsigned long long)mine, (unsigned long long)me,
				(unsigned long long)gen, (unsigned long long)holder);
	if (gen == mine && holder == me)
		return 0;
	if ((rc = mkv_reg_meta_put(p, txn, "generation", mine)))
		return rc;
	return mkv_reg_meta_put(p, txn, "holder", me);
}

/* Clear the LMDB reader slots of dead processes: how many; -1 (no message) if LMDB could not. */
int
mkv_reg_reader_check(struct mkv_pool *p)
{
	int stale = 0;

	return mdb_reader_check(p->reg.env, &stale) ? -1 : stale;
}
