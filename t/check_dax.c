/* SPDX-License-Identifier: MIT */
/*
 * check_dax.c -- a pool whose data arena is a device-DAX node.
 *
 * Hardware only: without a device-DAX node (/dev/daxX.Y in devdax mode,
 * found through libdaxctl) the program exits 77, which automake reports
 * as SKIP.  It runs only on the device named by $MKV_TEST_DAX=/dev/daxX.Y,
 * never on one it merely finds: THE TEST OVERWRITES THE DEVICE'S CONTENTS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <daxctl/libdaxctl.h>

#include "testutil.h"

#define SKIP 77

static char dax_path[256];
static unsigned long long dax_size;
static unsigned long dax_align;

static void
quiet(struct daxctl_ctx *ctx, int prio, const char *file, int line, const char *fn,
		const char *fmt, va_list ap)
{
	(void)ctx, (void)prio, (void)file, (void)line, (void)fn, (void)fmt, (void)ap;
}

/* Find a usable device-DAX node; 0 if found. */
static int
find_dax(void)
{
	const char *want = getenv("MKV_TEST_DAX");
	struct daxctl_ctx *ctx;
	struct daxctl_region *region;
	struct daxctl_dev *dev;
	struct stat st;
	int found = 0;

	if (daxctl_new(&ctx) < 0)
		return -1;
	daxctl_set_log_fn(ctx, quiet);
	daxctl_region_foreach(ctx, region) {
		daxctl_dev_foreach(region, dev) {
			char path[256];

			if (found || !daxctl_dev_is_enabled(dev) || daxctl_dev_get_size(dev) == 0)
				continue;
			snprintf(path, sizeof(path), "/dev/%s", daxctl_dev_get_devname(dev));
			if (want != NULL && strcmp(want, path) != 0)
				continue;
			if (stat(path, &st) != 0 || !S_ISCHR(st.st_mode))
				continue;  /* system-ram mode, or no node */
			snprintf(dax_path, sizeof(dax_path), "%s", path);
			dax_size = daxctl_dev_get_size(dev);
			dax_align = daxctl_dev_get_align(dev);
			found = 1;
		}
	}
	daxctl_unref(ctx);
	return found ? 0 : -1;
}

START_TEST(test_devdax_pool_put_get)
{
	struct mkv_opts *opts = NULL;
	struct mkv_pool *pool = NULL;
	struct mkv_stat st;
	char *path = tu_pool_path(tu_dir), *data;
	uint32_t page = dax_align > 65536 ? (uint32_t)dax_align : 65536;
	size_t len = 3 * (size_t)page + 17;

	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_ge(asprintf(&data, "%s/data", path), 0);
	ck_assert_int_eq(symlink(dax_path, data), 0);
	TU_OK(mkv_opts_new(&opts));
	TU_OK(mkv_opts_set_page_size(opts, page));
	TU_OK(mkv_opts_set_data_size(opts, dax_size / page * page));
	TU_OK(mkv_pool_open(path, MKV_CREATE, opts, &pool));
	mkv_opts_delete(&opts);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.page_size, page);
	ck_assert_uint_gt(st.pages_total, 4);
	TU_OK(tu_put(pool, "dax", 3, len));
	ck_assert_int_eq(tu_check(pool, "dax", 3, len), 0);
	mkv_pool_close(&pool);

	TU_OK(mkv_pool_open(path, 0, NULL, &pool));
	ck_assert_int_eq(tu_check(pool, "dax", 3, len), 0);
	TU_OK(mkv_del(pool, "dax", 3));
	mkv_pool_close(&pool);
	free(data);
	free(path);
}
END_TEST

static Suite *
dax_suite(void)
{
	Suite *s = suite_create("dax");
	TCase *tc = tcase_create("devdax");

	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_devdax_pool_put_get);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	if (!getenv("MKV_TEST_DAX")) {
		fprintf(stderr, "check_dax: skipped; set MKV_TEST_DAX=/dev/daxX.Y to run it (it overwrites the device)\n");
		return SKIP;
	}
	if (find_dax() != 0) {
		fprintf(stderr, "check_dax: no device-DAX node, skipped\n");
		return SKIP;
	}
	return tu_run_suite(dax_suite());
}
