/* SPDX-License-Identifier: MIT */
/*
 * check_persist.c -- how values and the registry reach their storage
 * (persist.c, registry.c): a pool on a file in memory (tmpfs) persists
 * with fences, without one msync (there is nothing under its page cache to
 * sync to), and opens the registry with MDB_NOSYNC; a pool on a
 * filesystem with storage under it syncs every value it publishes.
 *
 * msync is counted by a definition of it in this program, which the
 * libraries that call it (libpmem2, LMDB) reach before libc's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "testutil.h"
#include "unitutil.h"

#define PUTS 64U

static unsigned long msyncs;

int
msync(void *addr, size_t len, int flags)
{
	static int (*real)(void *, size_t, int);

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "msync");
	__atomic_add_fetch(&msyncs, 1, __ATOMIC_RELAXED);
	return real(addr, len, flags);
}

/* Whether @p dir is on tmpfs, by the test's own look. */
static bool
on_tmpfs(const char *dir)
{
	struct statfs fs;

	ck_assert_int_eq(statfs(dir, &fs), 0);
	return fs.f_type == TMPFS_MAGIC;
}

/* PUTS values through a pool in @p dir; the msyncs they took. */
static unsigned long
put_in(const char *dir)
{
	struct mkv_pool *pool;
	unsigned long before;
	char key[32];

	ck_assert_int_eq(tu_pool_create(dir, 256 * TU_PAGE_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS,
			&pool), 0);
	before = __atomic_load_n(&msyncs, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < PUTS; i++) {
		size_t klen = tu_key(key, "p", i);

		TU_OK(tu_put(pool, key, klen, 1000 + i));
	}
	before = __atomic_load_n(&msyncs, __ATOMIC_RELAXED) - before;
	for (unsigned i = 0; i < PUTS; i++) {
		size_t klen = tu_key(key, "p", i);

		ck_assert_int_eq(tu_check(pool, key, klen, 1000 + i), 0);
	}
	mkv_pool_close(&pool);
	return before;
}

START_TEST(test_a_pool_in_memory_persists_without_msync)
{
	if (!on_tmpfs(tu_dir)) {
		printf("skip - %s is not on tmpfs\n", tu_dir);
		return;
	}
	ck_assert_uint_eq(put_in(tu_dir), 0);
}
END_TEST

/* In the build directory, which is on storage where tests are built. */
START_TEST(test_a_pool_on_storage_syncs_each_value)
{
	char *dir = strdup("./mkvp.XXXXXX");
	unsigned long n;

	ck_assert_ptr_nonnull(dir);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	if (on_tmpfs(dir)) {
		tu_tmpdir_free(&dir);
		printf("skip - the build directory is on tmpfs\n");
		return;
	}
	n = put_in(dir);
	tu_tmpdir_free(&dir);
	ck_assert_msg(n >= PUTS, "%u values published with %lu msyncs", PUTS, n);
}
END_TEST

static Suite *
persist_suite(void)
{
	Suite *s = suite_create("persist");
	TCase *tc = tcase_create("storage");

	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_a_pool_in_memory_persists_without_msync);
	tcase_add_test(tc, test_a_pool_on_storage_syncs_each_value);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(persist_suite());
}
