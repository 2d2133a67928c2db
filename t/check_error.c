/* SPDX-License-Identifier: MIT */
/*
 * check_error.c -- error codes, mkv_strerror, mkv_errormsg, mkv_version.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static const int own_codes[] = {
	MKV_E_INVAL, MKV_E_NOMEM, MKV_E_NOSPC, MKV_E_EXISTS, MKV_E_NOENT,
	MKV_E_USERS, MKV_E_IO, MKV_E_NOTFOUND, MKV_E_RDONLY, MKV_E_NOTPOOL,
	MKV_E_CORRUPT, MKV_E_VERSION, MKV_E_INTERNAL, MKV_E_EXPIRED, MKV_E_RANGE,
	MKV_E_FRAME_MAGIC, MKV_E_FRAME_VERSION, MKV_E_FRAME_SHORT, MKV_E_FRAME_CHECKSUM,
	MKV_E_FRAME_BODY, MKV_E_REMOTE,
};
#define NCODES (sizeof(own_codes) / sizeof(own_codes[0]))

START_TEST(test_strerror_success)
{
	const char *s = mkv_strerror(0);

	ck_assert_ptr_nonnull(s);
	ck_assert_int_gt((int)strlen(s), 0);
}
END_TEST

START_TEST(test_strerror_each_code_distinct)
{
	const char *txt[NCODES];
	size_t i, j;

	for (i = 0; i < NCODES; i++) {
		txt[i] = mkv_strerror(own_codes[i]);
		ck_assert_ptr_nonnull(txt[i]);
		ck_assert_msg(strlen(txt[i]) > 0, "empty text for %d", own_codes[i]);
		ck_assert_msg(strcmp(txt[i], mkv_strerror(0)) != 0,
				"code %d has the text of success", own_codes[i]);
		ck_assert_msg(strcmp(txt[i], mkv_strerror(-99999)) != 0,
				"code %d has the generic text", own_codes[i]);
	}
	for (i = 0; i < NCODES; i++)
		for (j = i + 1; j < NCODES; j++)
			ck_assert_msg(strcmp(txt[i], txt[j]) != 0,
					"codes %d and %d share the text \"%s\"",
					own_codes[i], own_codes[j], txt[i]);
}
END_TEST

START_TEST(test_strerror_band_codes)
{
	int c;

	/* The whole own band is named, and distinct from an unknown code. */
	ck_assert_int_lt(MKV_E_LAST, MKV_E_BASE);
	for (c = MKV_E_BASE - 1; c >= MKV_E_LAST; c--) {
		ck_assert_ptr_nonnull(mkv_strerror(c));
		ck_assert_str_ne(mkv_strerror(c), mkv_strerror(MKV_E_LAST - 1));
	}
	/* The own band lies below every errno. */
	ck_assert_int_lt(MKV_E_BASE, -4095);
}
END_TEST

START_TEST(test_strerror_errno_codes)
{
	static const int errs[] = { EACCES, EPERM, EBUSY, EROFS, ENOTDIR, EAGAIN };
	size_t i;

	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		const char *s = mkv_strerror(-errs[i]);

		ck_assert_ptr_nonnull(s);
		ck_assert_int_gt((int)strlen(s), 0);
		ck_assert_str_ne(s, mkv_strerror(0));
	}
	ck_assert_str_ne(mkv_strerror(-EACCES), mkv_strerror(-EROFS));
}
END_TEST

START_TEST(test_strerror_unknown_code)
{
	static const int unknown[] = { -99999, MKV_E_LAST - 1, 12345, 1, -2147483647 - 1,
		2147483647 };
	size_t i;

	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		const char *s = mkv_strerror(unknown[i]);

		ck_assert_ptr_nonnull(s);
		ck_assert_int_gt((int)strlen(s), 0);
		ck_assert_str_ne(s, mkv_strerror(0));
	}
}
END_TEST

START_TEST(test_errormsg_empty_after_success)
{
	struct mkv_opts *opts = NULL;

	/* fail first, so there is something to clear */
	TU_ERR(mkv_opts_new(NULL), MKV_E_INVAL);
	TU_OK(mkv_opts_new(&opts));
	ck_assert_ptr_nonnull(opts);
	ck_assert_str_eq(mkv_errormsg(), "");
	TU_ERR(mkv_opts_set_page_size(opts, 1000), MKV_E_INVAL);
	TU_OK(mkv_opts_set_page_size(opts, 8192));
	mkv_opts_delete(&opts);
	ck_assert_ptr_null(opts);
}
END_TEST

START_TEST(test_errormsg_set_after_failure)
{
	struct mkv_pool *pool = (struct mkv_pool *)&pool;
	char *path = tu_pool_path(tu_dir);

	ck_assert_ptr_nonnull(path);
	TU_ERR(mkv_pool_open(path, 0, NULL, &pool), MKV_E_NOENT);
	ck_assert_ptr_null(pool);
	/* the message is detailed, and names the path */
	ck_assert_msg(strstr(mkv_errormsg(), "pool") != NULL ||
			strstr(mkv_errormsg(), tu_dir) != NULL,
			"message \"%s\" names neither the pool nor its path", mkv_errormsg());
	free(path);
}
END_TEST

/*
 * A message built from the one before it (a parent key too long, a bad
 * key of a batch) says each part once: it used to be formatted over its
 * own argument.
 */
START_TEST(test_errormsg_built_on_the_last_one)
{
	static const char want_parent[] = "mkv_publish_chain: parent: key length 511 out of "
		"range (1 to 510)";
	static const char want_key[] = "mkv_get_batch: key 1: key length 0 out of range "
		"(1 to 510)";
	struct mkv_key keys[2] = { { "a", 1 }, { "b", 0 } };
	struct mkv_view views[2];
	struct mkv_pool *pool;
	struct mkv_buf b;
	char parent[511];
	size_t found;

	memset(parent, 'p', sizeof(parent));
	TU_OK(tu_pool_create(tu_dir, 64 * TU_PAGE_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	TU_OK(mkv_alloc(pool, 1, &b));
	TU_ERR(mkv_publish_chain(pool, parent, sizeof(parent), &(struct mkv_key){ "k", 1 }, &b, 1),
			MKV_E_INVAL);
	ck_assert_str_eq(mkv_errormsg(), want_parent);
	TU_ERR(mkv_get_batch(pool, keys, 2, 0, views, &found), MKV_E_INVAL);
	ck_assert_str_eq(mkv_errormsg(), want_key);
	TU_OK(mkv_abort(pool, &b));
	mkv_pool_close(&pool);
}
END_TEST

static void *
thread_fail(void *arg)
{
	(void)arg;
	(void)mkv_opts_new(NULL);
	return strdup(mkv_errormsg());
}

START_TEST(test_errormsg_is_per_thread)
{
	struct mkv_opts *opts = NULL;
	pthread_t th;
	void *res;

	TU_OK(mkv_opts_new(&opts));
	ck_assert_int_eq(pthread_create(&th, NULL, thread_fail, NULL), 0);
	ck_assert_int_eq(pthread_join(th, &res), 0);
	ck_assert_ptr_nonnull(res);
	ck_assert_msg(((char *)res)[0] != '\0', "the failing thread has no message");
	/* the failure in the other thread left ours empty */
	ck_assert_str_eq(mkv_errormsg(), "");
	free(res);
	mkv_opts_delete(&opts);
}
END_TEST

START_TEST(test_version_format)
{
	const char *v = mkv_version();
	const char *p;
	int dots = 0, digits = 0;

	ck_assert_ptr_nonnull(v);
	ck_assert_ptr_eq(v, mkv_version());
	for (p = v; *p; p++) {
		if (*p == '.') {
			ck_assert_msg(digits > 0, "empty component in \"%s\"", v);
			dots++;
			digits = 0;
		} else {
			ck_assert_msg(isdigit((unsigned char)*p), "bad version \"%s\"", v);
			digits++;
		}
	}
	ck_assert_msg(dots == 2 && digits > 0, "version \"%s\" is not X.Y.Z", v);
}
END_TEST

static Suite *
error_suite(void)
{
	Suite *s = suite_create("error");
	TCase *tc;

	tc = tcase_create("strerror");
	tcase_add_test(tc, test_strerror_success);
	tcase_add_test(tc, test_strerror_each_code_distinct);
	tcase_add_test(tc, test_strerror_band_codes);
	tcase_add_test(tc, test_strerror_errno_codes);
	tcase_add_test(tc, test_strerror_unknown_code);
	suite_add_tcase(s, tc);

	tc = tcase_create("errormsg");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_add_test(tc, test_errormsg_empty_after_success);
	tcase_add_test(tc, test_errormsg_set_after_failure);
	tcase_add_test(tc, test_errormsg_is_per_thread);
	tcase_add_test(tc, test_errormsg_built_on_the_last_one);
	suite_add_tcase(s, tc);

	tc = tcase_create("version");
	tcase_add_test(tc, test_version_format);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(error_suite());
}
