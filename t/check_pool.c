/* SPDX-License-Identifier: MIT */
/*
 * check_pool.c -- pool creation, reopening, options, damaged pools,
 * read-only handles, $MARUKV_POOL, mkv_pool_stat.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "testutil.h"
#include "layout.h"

#define NKEYS 100

static char *
pool_file(const char *name)
{
	char *path;

	ck_assert_int_ge(asprintf(&path, "%s/pool/%s", tu_dir, name), 0);
	return path;
}

static void
create_closed_pool(void)
{
	struct mkv_pool *pool;
	char key[64];
	size_t klen;
	unsigned i;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	for (i = 0; i < 8; i++) {
		klen = tu_key(key, "k", i);
		TU_OK(tu_put(pool, key, klen, 1000 + i));
	}
	mkv_pool_close(&pool);
	ck_assert_ptr_null(pool);
}

static off_t
file_size(const char *path)
{
	struct stat st;

	ck_assert_msg(stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
	return st.st_size;
}

static void
truncate_half(const char *name)
{
	char *path = pool_file(name);
	off_t size = file_size(path);

	ck_assert_int_gt(size, 1);
	ck_assert_int_eq(truncate(path, size / 2), 0);
	free(path);
}

static void
super_rw(off_t off, void *buf, size_t len, int write)
{
	char *path = pool_file("super");
	int fd = open(path, O_RDWR);
	ssize_t n;

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	n = write ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);
	ck_assert_int_eq((int)n, (int)len);
	close(fd);
	free(path);
}

/* Open must fail with @p code, leave *out NULL and set a message. */
static void
open_fails(unsigned flags, int code)
{
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	char *path = tu_pool_path(tu_dir);
	int rc = mkv_pool_open(path, flags, NULL, &pool);

	ck_assert_msg(rc == code, "mkv_pool_open(%s) = %d (%s: %s), expected %d (%s)",
			path, rc, mkv_strerror(rc), mkv_errormsg(), code, mkv_strerror(code));
	ck_assert_msg(mkv_errormsg()[0] != '\0', "no message for %s", mkv_strerror(code));
	ck_assert_ptr_null(pool);
	free(path);
}

/* ---- creation and reopening ---- */

START_TEST(test_create_makes_three_preallocated_files)
{
	static const char *const names[] = { "super", "registry.mdb", "data" };
	struct mkv_pool *pool;
	struct stat st;
	unsigned i;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	ck_assert_ptr_nonnull(pool);
	for (i = 0; i < 3; i++) {
		char *path = pool_file(names[i]);

		ck_assert_msg(stat(path, &st) == 0, "%s missing: %s", path, strerror(errno));
		ck_assert_msg(S_ISREG(st.st_mode), "%s is not a regular file", path);
		ck_assert_msg(st.st_size > 0, "%s is empty", path);
		ck_assert_msg((uint64_t)st.st_blocks * 512 >= (uint64_t)st.st_size,
				"%s is sparse: %lld blocks for %lld bytes", path,
				(long long)st.st_blocks, (long long)st.st_size);
		if (i == 2)
			ck_assert_uint_eq((uint64_t)st.st_size, TU_DATA_SIZE);
		free(path);
	}
	mkv_pool_close(&pool);
}
END_TEST

/* The name of each backing; a pool under the test directory (tmpfs in the suite) says which. */
START_TEST(test_backing_names)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	struct statfs fs;

	ck_assert_str_eq(mkv_backing_name(MKV_BACKING_FILE), "file");
	ck_assert_str_eq(mkv_backing_name(MKV_BACKING_TMPFS), "tmpfs");
	ck_assert_str_eq(mkv_backing_name(MKV_BACKING_FSDAX), "fsdax");
	ck_assert_str_eq(mkv_backing_name(MKV_BACKING_DEVDAX), "devdax");
	ck_assert_str_eq(mkv_backing_name(4), "unknown");
	ck_assert_str_eq(mkv_backing_name(UINT32_MAX), "unknown");
	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	TU_OK(mkv_pool_stat(pool, &st));
	ck_assert_int_eq(statfs(tu_dir, &fs), 0);
	if (fs.f_type == TMPFS_MAGIC)
		ck_assert_str_eq(mkv_backing_name(st.backing), "tmpfs");
	else
		ck_assert_str_ne(mkv_backing_name(st.backing), "unknown");
	/* the suites' pools follow $TU_COHERENCE (make check-noncoherent) */
	ck_assert_uint_eq(st.coherence, tu_coherence());
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_reopen_keeps_every_key)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	char key[64];
	size_t klen, len, bytes = 0;
	unsigned i;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	for (i = 0; i < NKEYS; i++) {
		klen = tu_key(key, "key-", i);
		len = tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE);
		bytes += len;
		TU_OK(i % 2 ? tu_put(pool, key, klen, len) : tu_publish(pool, key, klen, len));
	}
	mkv_pool_close(&pool);

	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	for (i = 0; i < NKEYS; i++) {
		klen = tu_key(key, "key-", i);
		len = tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE);
		ck_assert_msg(tu_check(pool, key, klen, len) == 0, "key %s lost or damaged", key);
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, NKEYS);
	ck_assert_uint_eq(st.bytes_stored, bytes);
	mkv_pool_close(&pool);

	/* and once more, read-only */
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	for (i = 0; i < NKEYS; i++) {
		klen = tu_key(key, "key-", i);
		ck_assert_int_eq(tu_check(pool, key, klen, tu_vlen(key, klen, 1, 3 * TU_PAGE_SIZE)), 0);
	}
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_open_missing_is_noent)
{
	open_fails(0, MKV_E_NOENT);
	open_fails(MKV_RDONLY, MKV_E_NOENT);
}
END_TEST

START_TEST(test_open_bad_flags_is_inval)
{
	open_fails(MKV_CREATE | MKV_RDONLY, MKV_E_INVAL);
	open_fails(~MKV_OPEN_VALID & 0xffU, MKV_E_INVAL);
	open_fails(MKV_CREATE | 0x80000000U, MKV_E_INVAL);
	/* nothing was created on the way */
	{
		char *path = tu_pool_path(tu_dir);
		struct stat st;

		ck_assert_int_ne(stat(path, &st), 0);
		free(path);
	}
}
END_TEST

START_TEST(test_open_null_out_is_inval)
{
	char *path = tu_pool_path(tu_dir);

	TU_ERR(mkv_pool_open(path, MKV_CREATE, NULL, NULL), MKV_E_INVAL);
	free(path);
}
END_TEST

START_TEST(test_empty_dir_with_create_makes_pool)
{
	struct mkv_pool *pool = NULL;
	struct mkv_opts *opts = NULL;
	char *path = tu_pool_path(tu_dir);

	ck_assert_int_eq(mkdir(path, 0700), 0);
	TU_OK(mkv_opts_new(&opts));
	TU_OK(mkv_opts_set_data_size(opts, TU_DATA_SIZE));
	TU_OK(mkv_pool_open(path, MKV_CREATE, opts, &pool));
	ck_assert_ptr_nonnull(pool);
	TU_OK(tu_put(pool, "a", 1, 100));
	ck_assert_int_eq(tu_check(pool, "a", 1, 100), 0);
	mkv_pool_close(&pool);
	mkv_opts_delete(&opts);
	free(path);
}
END_TEST

START_TEST(test_existing_pool_keeps_creation_params)
{
	struct mkv_pool *pool;
	struct mkv_stat st;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, 4, &pool));
	TU_OK(tu_put(pool, "x", 1, 5000));
	mkv_pool_close(&pool);
	/* MKV_CREATE on an existing pool opens it; the new options are ignored */
	TU_OK(tu_pool_create(tu_dir, 2 * TU_DATA_SIZE, 2 * TU_PAGE_SIZE, 16, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.page_size, TU_PAGE_SIZE);
	ck_assert_uint_eq(st.pages_total, TU_DATA_SIZE / TU_PAGE_SIZE);
	ck_assert_uint_eq(st.max_clients, 4);
	ck_assert_uint_eq(st.entries, 1);
	ck_assert_int_eq(tu_check(pool, "x", 1, 5000), 0);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_data_size_rounded_to_page)
{
	struct mkv_pool *pool;
	struct mkv_stat st;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE + 1, TU_PAGE_SIZE, 2, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_total, TU_DATA_SIZE / TU_PAGE_SIZE + 1);
	mkv_pool_close(&pool);
}
END_TEST

/* ---- options ---- */

START_TEST(test_opts_page_size_range)
{
	struct mkv_opts *opts = NULL;

	TU_OK(mkv_opts_new(&opts));
	TU_ERR(mkv_opts_set_page_size(opts, 0), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_page_size(opts, 2048), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_page_size(opts, 4095), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_page_size(opts, 6144), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_page_size(opts, 4097), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_page_size(opts, 2U << 30), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_page_size(opts, 0xffffffffU), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_page_size(opts, (1U << 30) + 4096), MKV_E_INVAL);
	TU_OK(mkv_opts_set_page_size(opts, 4096));
	TU_OK(mkv_opts_set_page_size(opts, 1U << 30));
	TU_OK(mkv_opts_set_page_size(opts, 64U << 10));
	mkv_opts_delete(&opts);
}
END_TEST

START_TEST(test_opts_max_clients_range)
{
	struct mkv_opts *opts = NULL;

	TU_OK(mkv_opts_new(&opts));
	TU_ERR(mkv_opts_set_max_clients(opts, 0), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_max_clients(opts, MKV_MAX_CLIENTS_LIMIT + 1), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_max_clients(opts, 0xffffffffU), MKV_E_INVAL);
	TU_OK(mkv_opts_set_max_clients(opts, 1));
	TU_OK(mkv_opts_set_max_clients(opts, MKV_MAX_CLIENTS_LIMIT));
	mkv_opts_delete(&opts);
}
END_TEST

START_TEST(test_opts_data_size_range)
{
	struct mkv_opts *opts = NULL;

	TU_OK(mkv_opts_new(&opts));
	TU_ERR(mkv_opts_set_data_size(opts, 0), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_data_size(opts, (1ULL << 46) + 1), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_data_size(opts, UINT64_MAX), MKV_E_INVAL);
	TU_OK(mkv_opts_set_data_size(opts, 1ULL << 46));
	TU_OK(mkv_opts_set_data_size(opts, TU_DATA_SIZE));
	mkv_opts_delete(&opts);
}
END_TEST

START_TEST(test_opts_lease_client_node_ranges)
{
	struct mkv_opts *opts = NULL;
	char longname[MKV_NODE_NAME_MAX + 2];

	TU_OK(mkv_opts_new(&opts));
	TU_ERR(mkv_opts_set_lease_period(opts, 49), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_lease_period(opts, 60001), MKV_E_INVAL);
	TU_OK(mkv_opts_set_lease_period(opts, 50));
	TU_ERR(mkv_opts_set_client_timeout(opts, 99), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_client_timeout(opts, 3600001), MKV_E_INVAL);
	TU_OK(mkv_opts_set_client_timeout(opts, 100));
	TU_ERR(mkv_opts_set_node(opts, ""), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_node(opts, "a b"), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_node(opts, NULL), MKV_E_INVAL);
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	TU_ERR(mkv_opts_set_node(opts, longname), MKV_E_INVAL);
	longname[MKV_NODE_NAME_MAX] = '\0';
	TU_OK(mkv_opts_set_node(opts, longname));
	mkv_opts_delete(&opts);
}
END_TEST

START_TEST(test_bad_marukv_node_is_inval)
{
	struct mkv_pool *pool = NULL;
	char *path = tu_pool_path(tu_dir);

	ck_assert_int_eq(setenv("MARUKV_NODE", "no spaces/allowed", 1), 0);
	TU_ERR(mkv_pool_open(path, MKV_CREATE, NULL, &pool), MKV_E_INVAL);
	ck_assert_ptr_null(pool);
	unsetenv("MARUKV_NODE");
	free(path);
}
END_TEST

START_TEST(test_opts_registry_size_range)
{
	struct mkv_opts *opts = NULL;

	TU_OK(mkv_opts_new(&opts));
	TU_ERR(mkv_opts_set_registry_size(opts, 1), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_registry_size(opts, 4096), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_registry_size(opts, (1ULL << 20) - 1), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_registry_size(opts, (1ULL << 40) + 1), MKV_E_INVAL);
	TU_OK(mkv_opts_set_registry_size(opts, 1ULL << 20));
	TU_OK(mkv_opts_set_registry_size(opts, 1ULL << 40));
	TU_OK(mkv_opts_set_registry_size(opts, 0));
	mkv_opts_delete(&opts);
}
END_TEST

START_TEST(test_opts_null_is_inval)
{
	TU_ERR(mkv_opts_new(NULL), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_data_size(NULL, TU_DATA_SIZE), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_page_size(NULL, 4096), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_max_clients(NULL, 4), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_registry_size(NULL, 1ULL << 20), MKV_E_INVAL);
}
END_TEST

START_TEST(test_opts_delete_null_and_twice)
{
	struct mkv_opts *opts = NULL;

	mkv_opts_delete(NULL);
	mkv_opts_delete(&opts);
	TU_OK(mkv_opts_new(&opts));
	ck_assert_ptr_nonnull(opts);
	mkv_opts_delete(&opts);
	ck_assert_ptr_null(opts);
	mkv_opts_delete(&opts);
	ck_assert_ptr_null(opts);
}
END_TEST

START_TEST(test_opts_rejected_value_leaves_option)
{
	struct mkv_opts *opts = NULL;
	struct mkv_pool *pool = NULL;
	struct mkv_stat st;
	char *path = tu_pool_path(tu_dir);

	TU_OK(mkv_opts_new(&opts));
	TU_OK(mkv_opts_set_page_size(opts, 8192));
	TU_ERR(mkv_opts_set_page_size(opts, 12288), MKV_E_INVAL);
	TU_OK(mkv_opts_set_data_size(opts, 2ULL << 20));
	TU_ERR(mkv_opts_set_data_size(opts, 0), MKV_E_INVAL);
	TU_OK(mkv_opts_set_max_clients(opts, 3));
	TU_ERR(mkv_opts_set_max_clients(opts, 0), MKV_E_INVAL);
	TU_OK(mkv_opts_set_registry_size(opts, 2ULL << 20));
	TU_ERR(mkv_opts_set_registry_size(opts, 10), MKV_E_INVAL);
	TU_OK(mkv_pool_open(path, MKV_CREATE, opts, &pool));
	/* options are not retained by the pool */
	mkv_opts_delete(&opts);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.page_size, 8192);
	ck_assert_uint_eq(st.pages_total, (2ULL << 20) / 8192);
	ck_assert_uint_eq(st.max_clients, 3);
	ck_assert_uint_eq(st.registry_size, 2ULL << 20);
	mkv_pool_close(&pool);
	free(path);
}
END_TEST

/* ---- damaged and foreign pools ---- */

START_TEST(test_foreign_super_is_notpool)
{
	char *dir = tu_pool_path(tu_dir), *path = pool_file("super");
	char text[8192];
	uint64_t seed = 42;
	size_t i;
	FILE *f;

	ck_assert_int_eq(mkdir(dir, 0700), 0);
	for (i = 0; i < sizeof(text); i++)
		text[i] = (char)(' ' + tu_rand(&seed) % 95);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(text, 1, sizeof(text), f), sizeof(text));
	ck_assert_int_eq(fclose(f), 0);
	open_fails(0, MKV_E_NOTPOOL);
	open_fails(MKV_RDONLY, MKV_E_NOTPOOL);
	/* MKV_CREATE must not overwrite something that is not a pool */
	open_fails(MKV_CREATE, MKV_E_NOTPOOL);
	free(dir);
	free(path);
}
END_TEST

START_TEST(test_bad_magic_is_notpool)
{
	uint8_t b;

	create_closed_pool();
	super_rw(offsetof(struct mkv_super, magic) + 1, &b, 1, 0);
	b ^= 0x20;
	super_rw(offsetof(struct mkv_super, magic) + 1, &b, 1, 1);
	open_fails(0, MKV_E_NOTPOOL);
	open_fails(MKV_CREATE, MKV_E_NOTPOOL);
}
END_TEST

START_TEST(test_regular_file_is_notpool)
{
	char *path = tu_pool_path(tu_dir);
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fputs("not a pool\n", f);
	ck_assert_int_eq(fclose(f), 0);
	open_fails(0, MKV_E_NOTPOOL);
	open_fails(MKV_CREATE, MKV_E_NOTPOOL);
	free(path);
}
END_TEST

START_TEST(test_truncated_super_is_corrupt)
{
	create_closed_pool();
	truncate_half("super");
	open_fails(0, MKV_E_CORRUPT);
	open_fails(MKV_RDONLY, MKV_E_CORRUPT);
	open_fails(MKV_CREATE, MKV_E_CORRUPT);
}
END_TEST

START_TEST(test_truncated_data_is_corrupt)
{
	create_closed_pool();
	truncate_half("data");
	open_fails(0, MKV_E_CORRUPT);
	open_fails(MKV_RDONLY, MKV_E_CORRUPT);
}
END_TEST

START_TEST(test_missing_registry_is_corrupt)
{
	char *path;

	create_closed_pool();
	path = pool_file("registry.mdb");
	ck_assert_int_eq(unlink(path), 0);
	open_fails(0, MKV_E_CORRUPT);
	open_fails(MKV_RDONLY, MKV_E_CORRUPT);
	/* MKV_CREATE must not paper over a lost registry */
	open_fails(MKV_CREATE, MKV_E_CORRUPT);
	free(path);
}
END_TEST

START_TEST(test_missing_data_is_corrupt)
{
	char *path;

	create_closed_pool();
	path = pool_file("data");
	ck_assert_int_eq(unlink(path), 0);
	open_fails(0, MKV_E_CORRUPT);
	open_fails(MKV_CREATE, MKV_E_CORRUPT);
	free(path);
}
END_TEST

/* Write a 32-bit field of super; with fix_csum, its checksum follows. */
static void
set_u32(size_t off, uint32_t v, int fix_csum)
{
	unsigned char head[offsetof(struct mkv_super, csum)];
	uint64_t csum;

	super_rw((off_t)off, &v, sizeof(v), 1);
	if (fix_csum) {
		super_rw(0, head, sizeof(head), 0);
		csum = tu_fnv1a(head, sizeof(head));
		super_rw(offsetof(struct mkv_super, csum), &csum, sizeof(csum), 1);
	}
}

static void
set_version(uint32_t v, int fix_csum)
{
	set_u32(offsetof(struct mkv_super, version), v, fix_csum);
}

START_TEST(test_unknown_version_is_version)
{
	struct mkv_pool *pool;

	create_closed_pool();
	/* first prove that the test's checksum is the library's */
	set_version(MKV_FORMAT_VERSION, 1);
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	mkv_pool_close(&pool);

	set_version(MKV_FORMAT_VERSION + 1, 1);
	open_fails(0, MKV_E_VERSION);
	/* and says what to do about it */
	ck_assert_msg(strstr(mkv_errormsg(), "remove the pool directory") != NULL, "%s",
			mkv_errormsg());
	open_fails(MKV_RDONLY, MKV_E_VERSION);
	open_fails(MKV_CREATE, MKV_E_VERSION);
	set_version(0xffffffffU, 1);
	open_fails(0, MKV_E_VERSION);
	set_version(0, 1);
	open_fails(0, MKV_E_VERSION);
}
END_TEST

START_TEST(test_unknown_version_checked_before_checksum)
{
	/* a newer format may checksum differently: the version decides first */
	create_closed_pool();
	set_version(MKV_FORMAT_VERSION + 1, 0);
	open_fails(0, MKV_E_VERSION);
}
END_TEST

/*
 * The memory model is chosen at creation, stored, and obeyed by every
 * opener whatever it asks; a stored value the library does not know is
 * damage, even under a valid checksum.
 */
/* A directory in tu_dir, made 0700: the base of a host's lock directories. */
static char *
host_base(const char *name)
{
	char *path;

	ck_assert_int_ge(asprintf(&path, "%s/%s", tu_dir, name), 0);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	return path;
}

/* In a child, as another host (MARUKV_LOCK_DIR @p base, node "b"): publish "b", read "a". */
/*
 * A child for tu_child_start(), forked before the parent opens the pool (a
 * fork of a process with the service thread running would leave a child
 * that sanitizers refuse): on command 'g', it opens the pool with the lock
 * directory's base @p arg, puts "b" and reads "a"; event 'd' once done.
 */
static int
other_host_uses(int cmd, int ev, void *arg)
{
	struct tu_opts o = { .coherence = MKV_NONCOHERENT, .max_nodes = 2, .node = "b" };
	struct mkv_pool *pool;

	if (tu_read_byte(cmd, 60) != 'g')
		return 3;
	if (setenv("MARUKV_LOCK_DIR", arg, 1) < 0 || tu_open(tu_path, 0, &o, &pool) != 0)
		return 1;
	if (tu_put(pool, "b", 1, 5000) != 0 || tu_check(pool, "a", 1, 5000) != 0)
		return 2;
	mkv_pool_close(&pool);
	return tu_write_byte(ev, 'd') ? 4 : 0;
}

/*
 * A non-coherent pool's LMDB lock file is not in the pool's directory but
 * in the host's lock directory (marukv(7), FILES): a link to the pool's
 * registry.mdb and the lock file, private as the pool's files.  Another
 * host (another base) gets a directory of its own while the first host
 * has the pool open, and each sees the other's key.
 */
START_TEST(test_noncoherent_lock_file_is_each_hosts_own)
{
	struct tu_opts o = { .coherence = MKV_NONCOHERENT, .max_nodes = 2, .node = "a" };
	char *a = host_base("host-a"), *b = host_base("host-b"), *da, *db, *f;
	char *reg = pool_file("registry.mdb");
	struct tu_child c = TU_CHILD_NONE;
	struct stat st, rst;
	struct mkv_pool *pool;

	tu_child_start(&c, other_host_uses, b);
	ck_assert_int_eq(setenv("MARUKV_LOCK_DIR", a, 1), 0);
	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	TU_OK(tu_put(pool, "a", 1, 5000));
	f = pool_file("registry.mdb-lock");
	ck_assert_msg(lstat(f, &st) < 0 && errno == ENOENT,
			"a non-coherent pool has registry.mdb-lock in its directory");
	free(f);
	da = tu_lockdir(a, pool);
	ck_assert_msg(lstat(da, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700,
			"%s: not a directory of mode 0700", da);
	ck_assert_int_ge(asprintf(&f, "%s/registry.mdb-lock", da), 0);
	ck_assert_msg(lstat(f, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 &&
			st.st_size > 0, "%s: not LMDB's lock file, mode 0600", f);
	free(f);
	ck_assert_int_ge(asprintf(&f, "%s/registry.mdb", da), 0);
	ck_assert_int_eq(stat(reg, &rst), 0);
	ck_assert_msg(lstat(f, &st) == 0 && S_ISLNK(st.st_mode) && stat(f, &st) == 0 &&
			st.st_ino == rst.st_ino, "%s: not a link to the pool's registry.mdb", f);
	free(f);

	ck_assert_int_eq(tu_write_byte(c.cmd, 'g'), 0);
	tu_child_expect(&c, "the other host", 'd', 60);
	tu_child_end(&c);
	ck_assert_int_eq(tu_check(pool, "b", 1, 5000), 0);
	db = tu_lockdir(b, pool);
	ck_assert_int_ge(asprintf(&f, "%s/registry.mdb-lock", db), 0);
	ck_assert_msg(lstat(f, &st) == 0 && S_ISREG(st.st_mode), "the other host has no %s", f);
	free(f);
	mkv_pool_close(&pool);

	/* a coherent pool keeps its lock file in its directory: nothing in the base */
	ck_assert_int_eq(tu_rmtree(a), 0);
	ck_assert_int_eq(mkdir(a, 0700), 0);
	o = (struct tu_opts){ .coherence = MKV_COHERENT };
	ck_assert_int_ge(asprintf(&f, "%s/coherent", tu_dir), 0);
	TU_OK(tu_open(f, MKV_CREATE, &o, &pool));
	mkv_pool_close(&pool);
	ck_assert_msg(rmdir(a) == 0, "a coherent pool made something in its host's base");
	free(f);
	ck_assert_int_ge(asprintf(&f, "%s/coherent/registry.mdb-lock", tu_dir), 0);
	ck_assert_msg(lstat(f, &st) == 0 && S_ISREG(st.st_mode), "%s is missing", f);
	free(f);
	free(reg);
	free(db);
	free(da);
	free(b);
	free(a);
}
END_TEST

START_TEST(test_coherence_is_stored_and_obeyed)
{
	struct mkv_opts *opts;
	struct mkv_pool *pool;
	struct mkv_stat st;
	char *path = tu_pool_path(tu_dir);

	ck_assert_str_eq(mkv_coherence_name(MKV_COHERENT), "coherent");
	ck_assert_str_eq(mkv_coherence_name(MKV_NONCOHERENT), "non-coherent");
	ck_assert_str_eq(mkv_coherence_name(0), "unknown");
	ck_assert_str_eq(mkv_coherence_name(3), "unknown");
	TU_OK(mkv_opts_new(&opts));
	ck_assert_int_eq(mkv_opts_set_coherence(NULL, MKV_COHERENT), MKV_E_INVAL);
	ck_assert_int_eq(mkv_opts_set_coherence(opts, 0), MKV_E_INVAL);
	ck_assert_int_eq(mkv_opts_set_coherence(opts, (enum mkv_coherence)3), MKV_E_INVAL);
	TU_OK(mkv_opts_set_data_size(opts, TU_DATA_SIZE));
	TU_OK(mkv_opts_set_page_size(opts, TU_PAGE_SIZE));
	TU_OK(mkv_opts_set_coherence(opts, MKV_NONCOHERENT));
	TU_OK(mkv_pool_open(path, MKV_CREATE, opts, &pool));
	TU_OK(tu_put(pool, "nc", 2, 7));
	TU_OK(mkv_pool_stat(pool, &st));
	ck_assert_uint_eq(st.coherence, MKV_NONCOHERENT);
	mkv_pool_close(&pool);
	/* asking for a coherent pool does not change an existing one */
	TU_OK(mkv_opts_set_coherence(opts, MKV_COHERENT));
	TU_OK(mkv_pool_open(path, MKV_CREATE, opts, &pool));
	TU_OK(mkv_pool_stat(pool, &st));
	ck_assert_uint_eq(st.coherence, MKV_NONCOHERENT);
	ck_assert_int_eq(tu_check(pool, "nc", 2, 7), 0);
	mkv_pool_close(&pool);
	TU_OK(mkv_pool_open(path, MKV_RDONLY, NULL, &pool));
	TU_OK(mkv_pool_stat(pool, &st));
	ck_assert_uint_eq(st.coherence, MKV_NONCOHERENT);
	mkv_pool_close(&pool);
	mkv_opts_delete(&opts);

	set_u32(offsetof(struct mkv_super, coherence), 0, 1);
	open_fails(0, MKV_E_CORRUPT);
	set_u32(offsetof(struct mkv_super, coherence), 3, 1);
	open_fails(MKV_RDONLY, MKV_E_CORRUPT);
	set_u32(offsetof(struct mkv_super, coherence), MKV_COHERENT, 1);
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	TU_OK(mkv_pool_stat(pool, &st));
	ck_assert_uint_eq(st.coherence, MKV_COHERENT);
	ck_assert_int_eq(tu_check(pool, "nc", 2, 7), 0);
	mkv_pool_close(&pool);
	free(path);
}
END_TEST

START_TEST(test_damaged_super_is_corrupt)
{
	static const size_t offs[] = {
		offsetof(struct mkv_super, uuid) + 3,
		offsetof(struct mkv_super, page_size) + 1,
		offsetof(struct mkv_super, nr_pages),
		offsetof(struct mkv_super, data_size) + 2,
		offsetof(struct mkv_super, slots_off),
		offsetof(struct mkv_super, max_clients),
		offsetof(struct mkv_super, coherence),
		offsetof(struct mkv_super, ctime) + 5,
		offsetof(struct mkv_super, csum) + 7,
	};
	struct mkv_pool *pool;
	size_t i;
	uint8_t b;

	create_closed_pool();
	for (i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		super_rw((off_t)offs[i], &b, 1, 0);
		b ^= 0x10;
		super_rw((off_t)offs[i], &b, 1, 1);
		open_fails(0, MKV_E_CORRUPT);
		open_fails(MKV_RDONLY, MKV_E_CORRUPT);
		b ^= 0x10;
		super_rw((off_t)offs[i], &b, 1, 1);
	}
	/* repaired, it opens again with everything in it */
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	ck_assert_int_eq(tu_check(pool, "k00000003", 9, 1003), 0);
	mkv_pool_close(&pool);
}
END_TEST

/* ---- read-only handles ---- */

START_TEST(test_rdonly_write_calls_fail)
{
	struct mkv_pool *pool;
	struct mkv_buf buf;
	struct mkv_view v;
	struct mkv_key keys[3] = { { "k00000000", 9 }, { "k00000001", 9 }, { "nope", 4 } };
	struct mkv_view views[3];
	size_t hits = 99, found = 99;

	create_closed_pool();
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	memset(&buf, 0, sizeof(buf));
	TU_ERR(mkv_alloc(pool, 100, &buf), MKV_E_RDONLY);
	ck_assert_ptr_null(buf.data);
	TU_ERR(mkv_publish(pool, "new", 3, &buf), MKV_E_RDONLY);
	TU_ERR(tu_put(pool, "new", 3, 100), MKV_E_RDONLY);
	TU_ERR(mkv_del(pool, "k00000000", 9), MKV_E_RDONLY);
	TU_ERR(mkv_del(pool, "missing", 7), MKV_E_RDONLY);

	/* reading works */
	TU_OK(mkv_get(pool, "k00000000", 9, &v));
	ck_assert_uint_eq(v.len, 1000);
	ck_assert_int_eq((int)tu_verify(v.data, v.len, "k00000000", 9), -1);
	TU_OK(mkv_release(pool, &v));
	ck_assert_int_eq(mkv_exists(pool, "k00000000", 9), 1);
	ck_assert_int_eq(mkv_exists(pool, "new", 3), 0);
	TU_OK(mkv_prefix_len(pool, keys, 3, &hits));
	ck_assert_uint_eq(hits, 2);
	TU_OK(mkv_get_batch(pool, keys, 3, 0, views, &found));
	ck_assert_uint_eq(found, 2);
	ck_assert_int_eq((int)tu_verify(views[1].data, views[1].len, "k00000001", 9), -1);
	ck_assert_ptr_null(views[2].data);
	TU_OK(mkv_release(pool, &views[0]));
	TU_OK(mkv_release(pool, &views[1]));
	mkv_pool_close(&pool);

	/* and nothing changed */
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	ck_assert_int_eq(mkv_exists(pool, "k00000000", 9), 1);
	ck_assert_int_eq(mkv_exists(pool, "new", 3), 0);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_rdonly_stat_works)
{
	struct mkv_pool *pool;
	struct mkv_stat st;

	create_closed_pool();
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 8);
	ck_assert_uint_eq(st.pages_total, TU_DATA_SIZE / TU_PAGE_SIZE);
	mkv_pool_close(&pool);
}
END_TEST

/* ---- environment, handles ---- */

START_TEST(test_env_pool_used_when_path_null)
{
	struct mkv_opts *opts = NULL;
	struct mkv_pool *pool = NULL;
	char *path = tu_pool_path(tu_dir);
	struct stat st;

	ck_assert_int_eq(setenv("MARUKV_POOL", path, 1), 0);
	TU_OK(mkv_opts_new(&opts));
	TU_OK(mkv_opts_set_data_size(opts, TU_DATA_SIZE));
	TU_OK(mkv_pool_open(NULL, MKV_CREATE, opts, &pool));
	mkv_opts_delete(&opts);
	ck_assert_str_eq(mkv_pool_path(pool), path);
	TU_OK(tu_put(pool, "env", 3, 4242));
	mkv_pool_close(&pool);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));

	ck_assert_int_eq(unsetenv("MARUKV_POOL"), 0);
	TU_OK(mkv_pool_open(path, 0, NULL, &pool));
	ck_assert_int_eq(tu_check(pool, "env", 3, 4242), 0);
	mkv_pool_close(&pool);

	/* without MKV_CREATE, the variable still decides where to look */
	{
		char *other;

		ck_assert_int_ge(asprintf(&other, "%s/elsewhere", tu_dir), 0);
		ck_assert_int_eq(setenv("MARUKV_POOL", other, 1), 0);
		pool = (struct mkv_pool *)&pool;
		TU_ERR(mkv_pool_open(NULL, 0, NULL, &pool), MKV_E_NOENT);
		ck_assert_ptr_null(pool);
		ck_assert_int_eq(setenv("MARUKV_POOL", path, 1), 0);
		TU_OK(mkv_pool_open(NULL, MKV_RDONLY, NULL, &pool));
		ck_assert_int_eq(tu_check(pool, "env", 3, 4242), 0);
		mkv_pool_close(&pool);
		free(other);
	}
	free(path);
}
END_TEST

START_TEST(test_close_null_and_twice)
{
	struct mkv_pool *pool = NULL;

	mkv_pool_close(NULL);
	mkv_pool_close(&pool);
	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	mkv_pool_close(&pool);
	ck_assert_ptr_null(pool);
	mkv_pool_close(&pool);
	ck_assert_ptr_null(pool);
}
END_TEST

START_TEST(test_pool_path_returns_path)
{
	struct mkv_pool *pool;
	char *path = tu_pool_path(tu_dir);

	ck_assert_ptr_null(mkv_pool_path(NULL));
	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	ck_assert_ptr_nonnull(mkv_pool_path(pool));
	ck_assert_str_eq(mkv_pool_path(pool), path);
	mkv_pool_close(&pool);
	free(path);
}
END_TEST

/* Whether [p, p + n) lies in [base, base + len). */
static bool
within(const void *p, size_t n, const void *base, size_t len)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)base;

	return a >= b && n <= len && a - b <= len - n;
}

/*
 * The data arena's mapping holds every buffer and view of the handle, is
 * the whole arena, and is read-only for a read-only handle (as
 * /proc/self/maps shows it).
 */
START_TEST(test_pool_data_holds_buffers_and_views)
{
	struct mkv_pool *pool, *ro;
	struct mkv_buf b;
	struct mkv_view v;
	struct mkv_stat st;
	void *addr, *raddr;
	size_t len, rlen;
	char line[512];
	FILE *maps;
	bool seen = false;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	TU_ERR(mkv_pool_data(NULL, &addr, &len), MKV_E_INVAL);
	TU_ERR(mkv_pool_data(pool, NULL, &len), MKV_E_INVAL);
	TU_ERR(mkv_pool_data(pool, &addr, NULL), MKV_E_INVAL);
	TU_OK(mkv_pool_data(pool, &addr, &len));
	tu_stat(pool, &st);
	ck_assert_uint_eq(len, st.pages_total * st.page_size);
	TU_OK(mkv_alloc(pool, 3 * TU_PAGE_SIZE + 1, &b));
	ck_assert(within(b.data, b.len, addr, len));
	memset(b.data, 'd', b.len);
	TU_OK(mkv_publish(pool, "d", 1, &b));
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &ro));
	TU_OK(mkv_pool_data(ro, &raddr, &rlen));
	ck_assert_uint_eq(rlen, len);
	TU_OK(mkv_get(ro, "d", 1, &v));
	ck_assert(within(v.data, v.len, raddr, rlen));
	ck_assert_uint_eq(((const char *)v.data)[v.len - 1], 'd');
	TU_OK(mkv_release(ro, &v));
	maps = fopen("/proc/self/maps", "r");
	ck_assert_ptr_nonnull(maps);
	while (fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi;
		char perms[5];

		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 &&
		    lo <= (uintptr_t)raddr && (uintptr_t)raddr < hi) {
			ck_assert_msg(perms[1] == '-', "read-only handle's arena mapped %s", perms);
			seen = true;
		}
	}
	fclose(maps);
	ck_assert(seen);
	mkv_pool_close(&ro);
	mkv_pool_close(&pool);
}
END_TEST

/* ---- stat ---- */

START_TEST(test_stat_figures)
{
	static const size_t lens[] = { 1, 4095, 4096, 4097, 10000, 3 * 4096, 70000 };
	struct mkv_pool *pool, *pool2;
	struct mkv_stat st;
	char key[64];
	uint64_t pages = 0, bytes = 0;
	size_t klen, i, n = sizeof(lens) / sizeof(lens[0]);

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.format_version, MKV_FORMAT_VERSION);
	ck_assert_uint_eq(st.page_size, TU_PAGE_SIZE);
	ck_assert_uint_eq(st.pages_total, TU_DATA_SIZE / TU_PAGE_SIZE);
	ck_assert_uint_eq(st.pages_used, 0);
	ck_assert_uint_eq(st.pages_free, st.pages_total);
	ck_assert_uint_eq(st.pages_quarantined, 0);
	ck_assert_uint_eq(st.pages_granted, 0);
	ck_assert_uint_eq(st.entries, 0);
	ck_assert_uint_eq(st.bytes_stored, 0);
	ck_assert_uint_eq(st.max_clients, TU_MAX_CLIENTS);
	ck_assert_uint_eq(st.clients, 1);
	ck_assert_uint_gt(st.registry_size, 0);
	ck_assert_uint_le(st.registry_used, st.registry_size);
	ck_assert_msg(!tu_is_zero(st.uuid, sizeof(st.uuid)), "uuid is zero");

	for (i = 0; i < n; i++) {
		klen = tu_key(key, "s", (unsigned)i);
		TU_OK(tu_put(pool, key, klen, lens[i]));
		pages += (lens[i] + TU_PAGE_SIZE - 1) / TU_PAGE_SIZE;
		bytes += lens[i];
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, n);
	ck_assert_uint_eq(st.bytes_stored, bytes);
	ck_assert_uint_eq(st.pages_used, pages);
	ck_assert_uint_gt(st.registry_used, 0);
	ck_assert_uint_le(st.registry_used, st.registry_size);

	TU_OK(tu_pool_open(tu_dir, 0, &pool2));
	tu_stat(pool2, &st);
	ck_assert_uint_eq(st.clients, 2);
	ck_assert_uint_eq(st.entries, n);
	mkv_pool_close(&pool2);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.clients, 1);

	/* deleting the 70000-byte value gives back its 18 pages and bytes */
	klen = tu_key(key, "s", (unsigned)(n - 1));
	TU_OK(mkv_del(pool, key, klen));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, n - 1);
	ck_assert_uint_eq(st.bytes_stored, bytes - 70000);
	ck_assert_uint_eq(st.pages_used, pages - 18);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_stat_uuid_stable_across_reopen)
{
	struct mkv_pool *pool;
	struct mkv_stat st1, st2;
	char *dir2;

	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	tu_stat(pool, &st1);
	mkv_pool_close(&pool);
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	tu_stat(pool, &st2);
	mkv_pool_close(&pool);
	ck_assert_mem_eq(st1.uuid, st2.uuid, sizeof(st1.uuid));
	ck_assert_msg(!tu_is_zero(st1.uuid, sizeof(st1.uuid)), "uuid is zero");

	/* another pool has another uuid */
	dir2 = tu_tmpdir_new();
	ck_assert_ptr_nonnull(dir2);
	TU_OK(tu_pool_create(dir2, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	tu_stat(pool, &st2);
	mkv_pool_close(&pool);
	ck_assert_msg(memcmp(st1.uuid, st2.uuid, sizeof(st1.uuid)) != 0,
			"two pools share a uuid");
	tu_tmpdir_free(&dir2);
}
END_TEST

START_TEST(test_stat_null_is_inval)
{
	struct mkv_pool *pool;
	struct mkv_stat st;

	TU_ERR(mkv_pool_stat(NULL, &st), MKV_E_INVAL);
	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	TU_ERR(mkv_pool_stat(pool, NULL), MKV_E_INVAL);
	mkv_pool_close(&pool);
}
END_TEST

static Suite *
pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc;

	tc = tcase_create("lifecycle");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_create_makes_three_preallocated_files);
	tcase_add_test(tc, test_backing_names);
	tcase_add_test(tc, test_coherence_is_stored_and_obeyed);
	tcase_add_test(tc, test_noncoherent_lock_file_is_each_hosts_own);
	tcase_add_test(tc, test_reopen_keeps_every_key);
	tcase_add_test(tc, test_open_missing_is_noent);
	tcase_add_test(tc, test_open_bad_flags_is_inval);
	tcase_add_test(tc, test_open_null_out_is_inval);
	tcase_add_test(tc, test_empty_dir_with_create_makes_pool);
	tcase_add_test(tc, test_existing_pool_keeps_creation_params);
	tcase_add_test(tc, test_data_size_rounded_to_page);
	tcase_add_test(tc, test_close_null_and_twice);
	tcase_add_test(tc, test_pool_path_returns_path);
	tcase_add_test(tc, test_pool_data_holds_buffers_and_views);
	tcase_add_test(tc, test_env_pool_used_when_path_null);
	suite_add_tcase(s, tc);

	tc = tcase_create("options");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_opts_page_size_range);
	tcase_add_test(tc, test_opts_max_clients_range);
	tcase_add_test(tc, test_opts_data_size_range);
	tcase_add_test(tc, test_opts_registry_size_range);
	tcase_add_test(tc, test_opts_lease_client_node_ranges);
	tcase_add_test(tc, test_bad_marukv_node_is_inval);
	tcase_add_test(tc, test_opts_null_is_inval);
	tcase_add_test(tc, test_opts_delete_null_and_twice);
	tcase_add_test(tc, test_opts_rejected_value_leaves_option);
	suite_add_tcase(s, tc);

	tc = tcase_create("damage");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_foreign_super_is_notpool);
	tcase_add_test(tc, test_bad_magic_is_notpool);
	tcase_add_test(tc, test_regular_file_is_notpool);
	tcase_add_test(tc, test_truncated_super_is_corrupt);
	tcase_add_test(tc, test_truncated_data_is_corrupt);
	tcase_add_test(tc, test_missing_registry_is_corrupt);
	tcase_add_test(tc, test_missing_data_is_corrupt);
	tcase_add_test(tc, test_unknown_version_is_version);
	tcase_add_test(tc, test_unknown_version_checked_before_checksum);
	tcase_add_test(tc, test_damaged_super_is_corrupt);
	suite_add_tcase(s, tc);

	tc = tcase_create("rdonly");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_rdonly_write_calls_fail);
	tcase_add_test(tc, test_rdonly_stat_works);
	suite_add_tcase(s, tc);

	tc = tcase_create("stat");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_stat_figures);
	tcase_add_test(tc, test_stat_uuid_stable_across_reopen);
	tcase_add_test(tc, test_stat_null_is_inval);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(pool_suite());
}
