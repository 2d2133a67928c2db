/* SPDX-License-Identifier: MIT */
/*
 * check_regcheck.c -- the registry's structure check (src/regcheck.c):
 * every field of LMDB's meta page that LMDB trusts, and a damaged page of
 * each kind the walk visits (branch, leaf, overflow, free list, named
 * database), refused with MKV_E_CORRUPT and a message that names it, by
 * mkv_pool_open (read-write and read-only) and by mkv_pool_verify, never
 * a crash.
 *
 * The tests damage registry.mdb field by field, so they know LMDB 0.9's
 * layout (as mdb.c documents it): pages of the OS page size, meta pages 0
 * and 1, a 16-byte page header, 16-bit node offsets, 8-byte node headers.
 * A pool of 300 keys (every third deleted, so LMDB's free list is not
 * empty) has a main database two levels deep.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <lmdb.h>

#include "testutil.h"
#include "layout.h"

#define NKEYS 300

/* LMDB 0.9: a meta page's fields (after the page header) and a record's */
#define M_MAGIC 16
#define M_VERSION 20
#define M_MAPSIZE 32
#define M_FREE 40
#define M_MAIN 88
#define M_LAST 136
#define M_TXNID 144
#define DB_PAD 0
#define DB_FLAGS 4
#define DB_DEPTH 6
#define DB_ENTRIES 32
#define DB_ROOT 40
#define PG_PGNO 0
#define PG_FLAGS 10
#define PG_LOWER 12
#define PG_OVPAGES 12
#define P_BRANCH 0x01
#define P_LEAF 0x02
#define F_BIGDATA 0x01
#define F_SUBDATA 0x02

static uint64_t psize;

/* ---- the registry file ---- */

static int
reg_fd(void)
{
	char *path;
	int fd;

	ck_assert_int_ge(asprintf(&path, "%s/pool/registry.mdb", tu_dir), 0);
	fd = open(path, O_RDWR);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	free(path);
	return fd;
}

static uint64_t
get(uint64_t off, size_t n)
{
	uint64_t v = 0;
	int fd = reg_fd();

	ck_assert_int_eq((int)pread(fd, &v, n, (off_t)off), (int)n);
	close(fd);
	return v;
}

static void
put(uint64_t off, size_t n, uint64_t v)
{
	int fd = reg_fd();

	ck_assert_int_eq((int)pwrite(fd, &v, n, (off_t)off), (int)n);
	close(fd);
}

/* The meta page LMDB uses: the larger txn id, page 0 on a tie. */
static uint64_t
meta(void)
{
	return get(M_TXNID, 8) < get(psize + M_TXNID, 8) ? psize : 0;
}

static uint64_t
older_meta(void)
{
	return meta() ? 0 : psize;
}

static uint64_t
node_off(uint64_t pgno, unsigned i)
{
	return pgno * psize + get(pgno * psize + 16 + 2 * i, 2);
}

static unsigned
nkeys(uint64_t pgno)
{
	return (unsigned)(get(pgno * psize + PG_LOWER, 2) - 16) / 2;
}

static uint64_t
child(uint64_t pgno, unsigned i)
{
	uint64_t n = node_off(pgno, i);

	return get(n, 2) | get(n + 2, 2) << 16 | get(n + 4, 2) << 32;
}

static uint64_t
main_root(void)
{
	return get(meta() + M_MAIN + DB_ROOT, 8);
}

/* The main database's leftmost leaf. */
static uint64_t
main_leaf(void)
{
	uint64_t pg = main_root();

	for (unsigned d = (unsigned)get(meta() + M_MAIN + DB_DEPTH, 2); d > 1; d--)
		pg = child(pg, 0);
	ck_assert_uint_eq(get(pg * psize + PG_FLAGS, 2), P_LEAF);
	return pg;
}

/*
 * The leaf node whose key starts with @p prefix in the tree at @p root of
 * @p depth: its page and node offset in the file.
 */
static bool
find(uint64_t root, unsigned depth, const char *prefix, uint64_t *pgno, uint64_t *node)
{
	size_t plen = strlen(prefix);

	for (unsigned i = 0; i < nkeys(root); i++) {
		uint64_t n = node_off(root, i);
		char key[64] = "";
		int fd;

		if (depth > 1) {
			if (find(child(root, i), depth - 1, prefix, pgno, node))
				return true;
			continue;
		}
		if (get(n + 6, 2) < plen)
			continue;
		fd = reg_fd();
		ck_assert_int_eq((int)pread(fd, key, plen, (off_t)(n + 8)), (int)plen);
		close(fd);
		if (memcmp(key, prefix, plen) == 0) {
			*pgno = root;
			*node = n;
			return true;
		}
	}
	return false;
}

/* The F_SUBDATA node of the named database "meta", and its record. */
static uint64_t
meta_db_node(void)
{
	uint64_t pg, n;

	ck_assert(find(main_root(), (unsigned)get(meta() + M_MAIN + DB_DEPTH, 2), "marukv.meta",
			&pg, &n));
	ck_assert_uint_eq(get(n + 4, 2), F_SUBDATA);
	return n;
}

static uint64_t
meta_db_rec(void)
{
	uint64_t n = meta_db_node();

	return n + 8 + get(n + 6, 2);
}

/* ---- pools ---- */

/* NKEYS keys of 1000 bytes, every third deleted; closed. */
static void
make_pool(void)
{
	struct mkv_pool *pool;
	char key[64];

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	for (unsigned i = 0; i < NKEYS; i++)
		TU_OK(tu_put(pool, key, tu_key(key, "k", i), 1000));
	for (unsigned i = 0; i < NKEYS; i += 3)
		TU_OK(mkv_del(pool, key, tu_key(key, "k", i)));
	mkv_pool_close(&pool);
	ck_assert_uint_ge(get(meta() + M_MAIN + DB_DEPTH, 2), 2);
	ck_assert_uint_ne(get(meta() + M_FREE + DB_ROOT, 8), UINT64_MAX);
}

/*
 * Put a value that needs overflow pages into the meta table with LMDB
 * itself (marukv reads its meta values by name, and stores none that big).
 */
static void
add_overflow_value(void)
{
	static char val[10000];
	MDB_val k = { 13, "test-overflow" }, d = { sizeof(val), val };
	MDB_env *env;
	MDB_txn *txn;
	char *pool = tu_pool_path(tu_dir);

	memset(val, 'v', sizeof(val));
	tu_registry_begin(pool, &env, &txn);
	ck_assert_int_eq(mdb_put(txn, tu_registry_table(txn, "meta"), &k, &d, 0), 0);
	tu_registry_end(env, txn);
	free(pool);
}

/* The overflow value's node in the meta table, and its first page. */
static uint64_t
overflow_node(uint64_t *ovpg)
{
	uint64_t rec = meta_db_rec(), pg, n;

	ck_assert(find(get(rec + DB_ROOT, 8), (unsigned)get(rec + DB_DEPTH, 2), "test-overflow",
			&pg, &n));
	ck_assert_uint_eq(get(n + 4, 2), F_BIGDATA);
	*ovpg = get(n + 8 + 13, 8);
	return n;
}

/* A free-list record of the free database's first leaf with a page in it. */
static uint64_t
free_list_node(void)
{
	uint64_t pg = get(meta() + M_FREE + DB_ROOT, 8);

	for (unsigned d = (unsigned)get(meta() + M_FREE + DB_DEPTH, 2); d > 1; d--)
		pg = child(pg, 0);
	for (unsigned i = 0; i < nkeys(pg); i++) {
		uint64_t n = node_off(pg, i);

		if (get(n + 4, 2) == 0 && get(n, 4) >= 16 && get(n + 16, 8) > 0)
			return n;
	}
	ck_abort_msg("no free list with a page in the free database's first leaf");
	return 0;
}

/* ---- expectations ---- */

static void
open_refused(unsigned flags, const char *what)
{
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	char *path = tu_pool_path(tu_dir);
	int rc = mkv_pool_open(path, flags, NULL, &pool);

	ck_assert_msg(rc == MKV_E_CORRUPT, "mkv_pool_open(%s) = %d (%s: %s), expected MKV_E_CORRUPT",
			flags & MKV_RDONLY ? "MKV_RDONLY" : "read-write", rc, mkv_strerror(rc),
			mkv_errormsg());
	ck_assert_ptr_null(pool);
	ck_assert_msg(strstr(mkv_errormsg(), "registry.mdb") && strstr(mkv_errormsg(), what),
			"message \"%s\" does not name registry.mdb and \"%s\"", mkv_errormsg(), what);
	free(path);
}

/* Refused read-write and read-only, saying @p what. */
static void
refused(const char *what)
{
	open_refused(MKV_RDONLY, what);
	open_refused(0, what);
}

static void
opens_and_verifies(void)
{
	struct mkv_verify v;
	struct mkv_pool *pool;

	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	TU_OK(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v));
	ck_assert_uint_eq(v.entries, NKEYS - (NKEYS + 2) / 3);
	mkv_pool_close(&pool);
}

/* ---- sound registries ---- */

START_TEST(test_sound_registry_opens_and_verifies)
{
	make_pool();
	opens_and_verifies();
}
END_TEST

START_TEST(test_sound_registry_with_overflow_value_opens)
{
	make_pool();
	add_overflow_value();
	opens_and_verifies();
}
END_TEST

/* LMDB never uses the older meta: damage there is left alone. */
START_TEST(test_older_meta_map_size_is_ignored)
{
	make_pool();
	put(older_meta() + M_MAPSIZE, 8, 12345);
	put(older_meta() + M_MAIN + DB_ROOT, 8, 1ULL << 40);
	opens_and_verifies();
}
END_TEST

/* ---- the meta page LMDB uses ---- */

START_TEST(test_meta_page_size_is_corrupt)
{
	static const uint32_t bad[] = { 0, 512, 8192, 65536, 0x80001000U };

	make_pool();
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t m = meta();

		put(m + M_FREE + DB_PAD, 4, bad[i]);
		refused("page size");
		put(m + M_FREE + DB_PAD, 4, psize);
	}
	/* meta page 0's page size tells LMDB where meta page 1 is, even when older */
	put(M_FREE + DB_PAD, 4, 0);
	refused("meta page 0 gives page size 0");
}
END_TEST

START_TEST(test_meta_magic_is_corrupt)
{
	make_pool();
	put(older_meta() + M_MAGIC, 4, 0xdeadbeef);
	refused("magic");
}
END_TEST

START_TEST(test_meta_version_is_corrupt)
{
	make_pool();
	put(meta() + M_VERSION, 4, 2);
	refused("format version 2");
}
END_TEST

START_TEST(test_meta_map_size_is_corrupt)
{
	make_pool();
	put(meta() + M_MAPSIZE, 8, get(meta() + M_MAPSIZE, 8) * 2);
	refused("map size");
}
END_TEST

START_TEST(test_meta_last_page_past_file_is_corrupt)
{
	uint64_t m;

	make_pool();
	m = meta();
	put(m + M_LAST, 8, get(m + M_MAPSIZE, 8) / psize);
	refused("last page");
	put(m + M_LAST, 8, 1ULL << 50);
	refused("last page");
}
END_TEST

START_TEST(test_meta_root_past_last_page_is_corrupt)
{
	uint64_t m, last;

	make_pool();
	m = meta();
	last = get(m + M_LAST, 8);
	put(m + M_MAIN + DB_ROOT, 8, last + 1);
	refused("main database has its root outside the file");
	put(m + M_MAIN + DB_ROOT, 8, 1);
	refused("main database has its root outside the file");
	put(m + M_MAIN + DB_ROOT, 8, main_root());
}
END_TEST

START_TEST(test_meta_free_root_past_last_page_is_corrupt)
{
	uint64_t m;

	make_pool();
	m = meta();
	put(m + M_FREE + DB_ROOT, 8, get(m + M_LAST, 8) + 7);
	refused("free-page database has its root outside the file");
}
END_TEST

START_TEST(test_meta_depth_is_corrupt)
{
	uint64_t m;

	make_pool();
	m = meta();
	put(m + M_MAIN + DB_DEPTH, 2, 0);
	refused("depth out of range");
	put(m + M_MAIN + DB_DEPTH, 2, 33);
	refused("depth out of range");
	/* a depth in range that is not the tree's: a leaf where a branch is */
	put(m + M_MAIN + DB_DEPTH, 2, 1);
	refused("should be a leaf page");
}
END_TEST

START_TEST(test_meta_flags_are_corrupt)
{
	uint64_t m;

	make_pool();
	m = meta();
	put(m + M_MAIN + DB_FLAGS, 2, MDB_DUPSORT);
	refused("main database has flags");
	put(m + M_MAIN + DB_FLAGS, 2, 0);
	put(m + M_FREE + DB_FLAGS, 2, get(m + M_FREE + DB_FLAGS, 2) & ~(uint64_t)MDB_INTEGERKEY);
	refused("free-page database has flags");
}
END_TEST

/* Txns read meta page (txn id & 1): the newer meta must carry its parity. */
START_TEST(test_meta_txnid_of_wrong_parity_is_corrupt)
{
	uint64_t m;

	make_pool();
	m = meta();
	put(m + M_TXNID, 8, get(m + M_TXNID, 8) + 1);
	refused("is the newer but carries txn");
}
END_TEST

START_TEST(test_meta_counts_are_corrupt)
{
	uint64_t m;

	make_pool();
	m = meta();
	put(m + M_MAIN + DB_ENTRIES, 8, get(m + M_MAIN + DB_ENTRIES, 8) + 1);
	refused("entries; its tree has");
}
END_TEST

/* ---- pages ---- */

START_TEST(test_branch_child_past_end_is_corrupt)
{
	uint64_t root, n;

	make_pool();
	root = main_root();
	n = node_off(root, 1);
	put(n, 2, (get(meta() + M_LAST, 8) + 1) & 0xffff);
	put(n + 2, 2, (get(meta() + M_LAST, 8) + 1) >> 16);
	refused("past the snapshot's");
}
END_TEST

START_TEST(test_page_reached_twice_is_corrupt)
{
	uint64_t root;

	make_pool();
	root = main_root();
	put(node_off(root, 1), 4, child(root, 0));
	refused("reached twice");
}
END_TEST

START_TEST(test_page_number_mismatch_is_corrupt)
{
	uint64_t leaf;

	make_pool();
	leaf = main_leaf();
	put(leaf * psize + PG_PGNO, 8, leaf + 1);
	refused("carries another page's number");
}
END_TEST

START_TEST(test_node_offset_past_page_is_corrupt)
{
	uint64_t leaf;

	make_pool();
	leaf = main_leaf();
	put(leaf * psize + 16, 2, psize - 4);
	refused("node offset");
	put(leaf * psize + 16, 2, 60000);
	refused("node offset");
}
END_TEST

START_TEST(test_free_space_bounds_are_corrupt)
{
	uint64_t leaf;

	make_pool();
	leaf = main_leaf();
	put(leaf * psize + PG_LOWER, 2, psize + 2);
	refused("free space out of bounds");
}
END_TEST

START_TEST(test_key_size_past_page_is_corrupt)
{
	uint64_t n;

	make_pool();
	n = node_off(main_leaf(), 0);
	put(n + 6, 2, 4000);
	refused("key that runs past the page");
}
END_TEST

START_TEST(test_data_size_past_page_is_corrupt)
{
	uint64_t n;

	make_pool();
	n = node_off(main_leaf(), 0);
	put(n, 2, 0xffff);
	refused("data runs past the page");
}
END_TEST

START_TEST(test_named_database_root_past_end_is_corrupt)
{
	make_pool();
	put(meta_db_rec() + DB_ROOT, 8, get(meta() + M_LAST, 8) + 3);
	refused("marukv.meta");
}
END_TEST

START_TEST(test_named_database_record_size_is_corrupt)
{
	make_pool();
	put(meta_db_node(), 2, 47);
	refused("database record of the wrong size");
}
END_TEST

START_TEST(test_overflow_run_past_file_is_corrupt)
{
	uint64_t n, ovpg;

	make_pool();
	add_overflow_value();
	n = overflow_node(&ovpg);
	put(ovpg * psize + PG_OVPAGES, 4, 0x7fffffff);
	refused("overflow run past the snapshot's end");
	put(ovpg * psize + PG_OVPAGES, 4, 1);
	refused("overflow run shorter than its data");
	put(ovpg * psize + PG_OVPAGES, 4, 3);
	put(n + 8 + 13, 8, get(meta() + M_LAST, 8) + 1);
	refused("overflow page past the snapshot's end");
}
END_TEST

START_TEST(test_free_list_entry_out_of_range_is_corrupt)
{
	uint64_t n;

	make_pool();
	n = free_list_node();
	put(n + 24, 8, get(meta() + M_LAST, 8) + 10);
	refused("past the snapshot's");
}
END_TEST

START_TEST(test_free_list_count_is_corrupt)
{
	uint64_t n;

	make_pool();
	n = free_list_node();
	put(n + 8 + 8, 8, get(n + 16, 8) + 1000);
	refused("count disagrees with its size");
}
END_TEST

START_TEST(test_free_page_in_use_is_corrupt)
{
	uint64_t n;

	make_pool();
	n = free_list_node();
	put(n, 2, 16);
	put(n + 2, 2, 0);
	put(n + 16, 8, 1);
	put(n + 24, 8, main_leaf());
	refused("both free and in use");
}
END_TEST

/* ---- truncation ---- */

START_TEST(test_truncated_registry_is_corrupt)
{
	static const off_t sizes[] = { 0, 100, 4096, 8191, 65536 };
	char *path;

	make_pool();
	ck_assert_int_ge(asprintf(&path, "%s/pool/registry.mdb", tu_dir), 0);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ck_assert_int_eq(truncate(path, sizes[i]), 0);
		refused("registry.mdb");
	}
	free(path);
}
END_TEST

/* ---- damage after open ---- */

/* LMDB would take SIGBUS reading past the end; the walk reads with pread. */
START_TEST(test_verify_reports_truncated_registry)
{
	struct mkv_pool *pool;
	struct mkv_verify v;
	char *path;

	make_pool();
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	ck_assert_int_ge(asprintf(&path, "%s/pool/registry.mdb", tu_dir), 0);
	ck_assert_int_eq(truncate(path, 2 * (off_t)psize), 0);
	TU_ERR(mkv_pool_verify(pool, 0, &v), MKV_E_CORRUPT);
	ck_assert_msg(strstr(v.first_problem, "ends inside page"), "first problem: %s",
			v.first_problem);
	mkv_pool_close(&pool);
	free(path);
}
END_TEST

START_TEST(test_verify_reports_damaged_page)
{
	struct mkv_pool *pool;
	struct mkv_verify v;
	uint64_t leaf;

	make_pool();
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	leaf = main_leaf();
	put(leaf * psize + 16, 2, psize - 2);
	TU_ERR(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v), MKV_E_CORRUPT);
	ck_assert_uint_eq(v.problems, 1);
	ck_assert_msg(strstr(v.first_problem, "node offset"), "first problem: %s",
			v.first_problem);
	ck_assert_msg(strstr(mkv_errormsg(), "node offset"), "message: %s", mkv_errormsg());
	mkv_pool_close(&pool);
}
END_TEST

/* ---- the log of the pages each commit wrote (src/regwlog.c) ---- */

#define LOG_ROUNDS 400

static void
read_all(int fd, void *buf, size_t n, off_t off)
{
	ck_assert_int_eq((int)pread(fd, buf, n, off), (int)n);
}

/*
 * Into list: the txn id of the registry's newest snapshot, the count of
 * pages on its free list and then those pages, as LMDB reads them in a
 * process of its own (MDB_NOLOCK: the test's handle is the only writer,
 * and commits only when called).
 */
static void
free_list_now(uint64_t *list, size_t cap, uint64_t mapsize)
{
	pid_t pid = tu_fork();

	if (pid == 0) {
		char *file;
		MDB_env *env;
		MDB_txn *txn;
		MDB_cursor *c;
		MDB_val k, d;
		MDB_cursor_op op = MDB_FIRST;

		if (asprintf(&file, "%s/pool/registry.mdb", tu_dir) < 0 || mdb_env_create(&env) ||
		    mdb_env_set_mapsize(env, mapsize) ||
		    mdb_env_open(env, file, MDB_NOSUBDIR | MDB_RDONLY | MDB_NOLOCK, 0600) ||
		    mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) || mdb_cursor_open(txn, 0, &c))
			_exit(1);
		list[0] = mdb_txn_id(txn);
		list[1] = 0;
		while (!mdb_cursor_get(c, &k, &d, op)) {
			size_t n;

			op = MDB_NEXT;
			memcpy(&n, d.mv_data, sizeof(n));
			if (list[1] + n > cap - 2)
				_exit(1);
			memcpy(list + 2 + list[1], (char *)d.mv_data + sizeof(n), n * sizeof(n));
			list[1] += n;
		}
		_exit(0);
	}
	ck_assert_int_eq(tu_wait(pid), 0);
}

static bool
listed(const uint64_t *list, uint64_t pg)
{
	for (uint64_t i = 0; i < list[1]; i++)
		if (list[2 + i] == pg)
			return true;
	return false;
}

/*
 * Every registry page whose bytes a commit changed is in the holder's log
 * of that commit, unless the new snapshot has it on its free list (a page
 * of LMDB's free database written and freed again in the same txn: no
 * reader reaches it until a commit writes it again, and logs it then).
 * The free-list diff of regwlog.c, in a non-coherent pool on one host,
 * while keys of every size come and go so that LMDB reuses freed pages.
 * A log that names no page or every page fails too: after the first
 * commit, every record names its pages.
 */
START_TEST(test_the_page_log_names_every_page_a_commit_changed)
{
	struct tu_opts o = { .coherence = MKV_NONCOHERENT };
	struct mkv_pool *pool;
	struct mkv_super sb;
	struct mkv_wlog *log;
	char *path;
	int rfd, sfd, rc;
	size_t size = 8 << 20, logsize = MKV_WLOG_RECS * sizeof(*log);
	unsigned char *before = malloc(size), *after = malloc(size);
	uint64_t seed = 7, last, now, named = 0, all = 0, unreached = 0;
	uint64_t *list = tu_shared(size);

	ck_assert(before && after && (log = malloc(logsize)));
	ck_assert_int_ge(asprintf(&path, "%s/pool", tu_dir), 0);
	ck_assert_int_eq(tu_open(path, MKV_CREATE, &o, &pool), 0);
	free(path);
	rfd = reg_fd();
	ck_assert_int_ge(asprintf(&path, "%s/pool/super", tu_dir), 0);
	ck_assert_int_ge(sfd = open(path, O_RDONLY), 0);
	free(path);
	read_all(sfd, &sb, sizeof(sb), 0);
	ck_assert((uint64_t)size <= sb.registry_size);
	read_all(rfd, before, size, 0);
	last = get(meta() + M_TXNID, 8);
	for (unsigned round = 0; round < LOG_ROUNDS; round++) {
		char key[MKV_KEY_MAX + 1];
		unsigned i = (unsigned)tu_rand_range(&seed, 0, 200);
		/* keys up to MKV_KEY_MAX, some long enough to fill pages in a few */
		size_t klen = tu_key(key, "k", i);
		size_t pad = tu_rand_range(&seed, 0, 2) ? 0 : (i * 37) % 480;

		memset(key + klen, 'a' + i % 26, pad);
		klen += pad;
		if (tu_rand_range(&seed, 0, 2) == 0) {
			rc = mkv_del(pool, key, klen);
			ck_assert_msg(rc == 0 || rc == MKV_E_NOTFOUND, "del: %d", rc);
		} else {
			rc = tu_put(pool, key, klen, 64);
			ck_assert_msg(rc == 0 || rc == MKV_E_EXISTS, "put: %d", rc);
		}
		now = get(meta() + M_TXNID, 8);
		read_all(rfd, after, size, 0);
		read_all(sfd, log, logsize, (off_t)sb.wlog_off);
		ck_assert_uint_le(now - last, MKV_WLOG_RECS);
		free_list_now(list, size / sizeof(*list), sb.registry_size);
		ck_assert_uint_eq(list[0], now);
		for (uint64_t pg = 2; pg < size / psize; pg++) {
			bool found = false;

			if (!memcmp(before + pg * psize, after + pg * psize, psize))
				continue;
			for (uint64_t id = last + 1; id <= now && !found; id++) {
				const struct mkv_wlog *w = &log[id % MKV_WLOG_RECS];

				ck_assert_uint_eq(w->txn, id);
				if (w->n == MKV_WLOG_ALL) {
					found = true;
					break;
				}
				ck_assert_uint_le(w->n, MKV_WLOG_RANGES);
				for (uint32_t r = 0; r < w->n && !found; r++)
					found = pg >= w->range[r][0] &&
						pg < (uint64_t)w->range[r][0] + w->range[r][1];
			}
			if (!found && listed(list, pg)) {
				unreached++;
				continue;
			}
			ck_assert_msg(found, "round %u: page %llu changed in txns %llu..%llu and is not logged",
					round, (unsigned long long)pg, (unsigned long long)last + 1,
					(unsigned long long)now);
			named++;
		}
		for (uint64_t id = last + 1; id <= now; id++)
			all += log[id % MKV_WLOG_RECS].n == MKV_WLOG_ALL;
		memcpy(before, after, size);
		last = now;
	}
	ck_assert_uint_le(all, 1);
	ck_assert_uint_gt(named, LOG_ROUNDS);
	printf("%llu changed pages logged, %llu on the free list\n", (unsigned long long)named, (unsigned long long)unreached);
	mkv_pool_close(&pool);
	close(rfd);
	close(sfd);
	free(before);
	free(after);
	free(log);
	tu_shared_free(list, size);
}
END_TEST

static Suite *
registry_suite(void)
{
	Suite *s = suite_create("regcheck");
	TCase *tc;

	tc = tcase_create("sound");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_sound_registry_opens_and_verifies);
	tcase_add_test(tc, test_sound_registry_with_overflow_value_opens);
	tcase_add_test(tc, test_older_meta_map_size_is_ignored);
	suite_add_tcase(s, tc);

	tc = tcase_create("meta");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_meta_page_size_is_corrupt);
	tcase_add_test(tc, test_meta_magic_is_corrupt);
	tcase_add_test(tc, test_meta_version_is_corrupt);
	tcase_add_test(tc, test_meta_map_size_is_corrupt);
	tcase_add_test(tc, test_meta_last_page_past_file_is_corrupt);
	tcase_add_test(tc, test_meta_root_past_last_page_is_corrupt);
	tcase_add_test(tc, test_meta_free_root_past_last_page_is_corrupt);
	tcase_add_test(tc, test_meta_depth_is_corrupt);
	tcase_add_test(tc, test_meta_flags_are_corrupt);
	tcase_add_test(tc, test_meta_txnid_of_wrong_parity_is_corrupt);
	tcase_add_test(tc, test_meta_counts_are_corrupt);
	suite_add_tcase(s, tc);

	tc = tcase_create("pages");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_branch_child_past_end_is_corrupt);
	tcase_add_test(tc, test_page_reached_twice_is_corrupt);
	tcase_add_test(tc, test_page_number_mismatch_is_corrupt);
	tcase_add_test(tc, test_node_offset_past_page_is_corrupt);
	tcase_add_test(tc, test_free_space_bounds_are_corrupt);
	tcase_add_test(tc, test_key_size_past_page_is_corrupt);
	tcase_add_test(tc, test_data_size_past_page_is_corrupt);
	tcase_add_test(tc, test_named_database_root_past_end_is_corrupt);
	tcase_add_test(tc, test_named_database_record_size_is_corrupt);
	tcase_add_test(tc, test_overflow_run_past_file_is_corrupt);
	tcase_add_test(tc, test_free_list_entry_out_of_range_is_corrupt);
	tcase_add_test(tc, test_free_list_count_is_corrupt);
	tcase_add_test(tc, test_free_page_in_use_is_corrupt);
	tcase_add_test(tc, test_truncated_registry_is_corrupt);
	tcase_add_test(tc, test_verify_reports_damaged_page);
	tcase_add_test(tc, test_verify_reports_truncated_registry);
	suite_add_tcase(s, tc);

	tc = tcase_create("log");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_the_page_log_names_every_page_a_commit_changed);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	psize = ps > 0x8000 ? 0x8000 : (uint64_t)ps;  /* LMDB's page size */
	return tu_run_suite(registry_suite());
}
