/* SPDX-License-Identifier: MIT */
/*
 * check_values.c -- put/get, alloc/publish/abort, del, exists, prefix_len,
 * get_batch, argument checks, a full pool.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define NPAGES (TU_DATA_SIZE / TU_PAGE_SIZE)
#define CHAIN 64

static struct mkv_pool *pool;

static void
kv_setup(void)
{
	tu_setup();
	pool = NULL;
	TU_OK(tu_pool_create(tu_dir, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &pool));
	ck_assert_ptr_nonnull(pool);
}

static void
kv_teardown(void)
{
	mkv_pool_close(&pool);
	tu_teardown();
}

/* ---- round trips ---- */

START_TEST(test_put_get_round_trip)
{
	static const size_t lens[] = { 1, 7, 8, 4095, 4096, 4097, 65536 };
	struct mkv_view v;
	char key[64];
	size_t klen, i;

	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		klen = tu_key(key, "rt", (unsigned)i);
		TU_OK(tu_put(pool, key, klen, lens[i]));
	}
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		klen = tu_key(key, "rt", (unsigned)i);
		memset(&v, 0, sizeof(v));
		TU_OK(mkv_get(pool, key, klen, &v));
		ck_assert_ptr_nonnull(v.data);
		ck_assert_uint_eq(v.len, lens[i]);
		ck_assert_int_eq((int)tu_verify(v.data, v.len, key, klen), -1);
		TU_OK(mkv_release(pool, &v));
		ck_assert_msg(tu_is_zero(&v, sizeof(v)), "release did not zero the view");
	}
}
END_TEST

START_TEST(test_alloc_fill_publish_get)
{
	struct mkv_buf buf;
	struct mkv_view v;
	size_t len = 3 * TU_PAGE_SIZE + 123;

	memset(&buf, 0, sizeof(buf));
	TU_OK(mkv_alloc(pool, len, &buf));
	ck_assert_ptr_nonnull(buf.data);
	ck_assert_uint_eq(buf.len, len);
	ck_assert_msg((uintptr_t)buf.data % TU_PAGE_SIZE == 0, "buffer not page aligned");
	tu_fill(buf.data, len, "pub", 3);
	/* not visible before publish */
	ck_assert_int_eq(mkv_exists(pool, "pub", 3), 0);
	TU_OK(mkv_publish(pool, "pub", 3, &buf));
	ck_assert_msg(tu_is_zero(&buf, sizeof(buf)), "publish did not consume the buffer");
	ck_assert_int_eq(mkv_exists(pool, "pub", 3), 1);
	TU_OK(mkv_get(pool, "pub", 3, &v));
	ck_assert_uint_eq(v.len, len);
	ck_assert_int_eq((int)tu_verify(v.data, v.len, "pub", 3), -1);
	TU_OK(mkv_release(pool, &v));
}
END_TEST

START_TEST(test_multi_page_value_round_trip)
{
	size_t len = 37 * TU_PAGE_SIZE + 1001;
	struct mkv_stat st;

	TU_OK(tu_publish(pool, "big", 3, len));
	ck_assert_int_eq(tu_check(pool, "big", 3, len), 0);
	TU_OK(tu_put(pool, "big2", 4, len - 5000));
	ck_assert_int_eq(tu_check(pool, "big2", 4, len - 5000), 0);
	ck_assert_int_eq(tu_check(pool, "big", 3, len), 0);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_used, 38 + (len - 5000 + TU_PAGE_SIZE - 1) / TU_PAGE_SIZE);
	ck_assert_uint_eq(st.bytes_stored, 2 * len - 5000);
}
END_TEST

START_TEST(test_binary_keys_are_distinct)
{
	static const char k1[] = { 'a', 0, 'b' }, k2[] = { 'a', 0, 'c' }, k3[] = { 'a', 0 };

	TU_OK(tu_put(pool, k1, 3, 100));
	TU_OK(tu_put(pool, k2, 3, 200));
	ck_assert_int_eq(mkv_exists(pool, k3, 2), 0);
	ck_assert_int_eq(mkv_exists(pool, "a", 1), 0);
	TU_OK(tu_put(pool, k3, 2, 300));
	ck_assert_int_eq(tu_check(pool, k1, 3, 100), 0);
	ck_assert_int_eq(tu_check(pool, k2, 3, 200), 0);
	ck_assert_int_eq(tu_check(pool, k3, 2, 300), 0);
}
END_TEST

START_TEST(test_abort_returns_pages)
{
	struct mkv_stat before, st;
	struct mkv_buf buf;
	void *first;

	tu_stat(pool, &before);
	TU_OK(mkv_alloc(pool, 5 * TU_PAGE_SIZE, &buf));
	first = buf.data;
	tu_stat(pool, &st);
	ck_assert_uint_le(st.pages_free, before.pages_free - 5);
	ck_assert_uint_ge(st.pages_granted, 5);
	/* aborted pages stay granted to this handle (its grant cache)... */
	TU_OK(mkv_abort(pool, &buf));
	ck_assert_msg(tu_is_zero(&buf, sizeof(buf)), "abort did not consume the buffer");
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_free + st.pages_granted, before.pages_free + before.pages_granted);
	ck_assert_uint_eq(st.pages_used, 0);
	/* ...and the next allocation of that size reuses them */
	TU_OK(mkv_alloc(pool, 5 * TU_PAGE_SIZE, &buf));
	ck_assert_ptr_eq(buf.data, first);
	TU_OK(mkv_abort(pool, &buf));
	/* closing gives every cached page back */
	mkv_pool_close(&pool);
	TU_OK(tu_pool_open(tu_dir, 0, &pool));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_granted, 0);
	ck_assert_uint_eq(st.pages_free, st.pages_total);
	ck_assert_uint_eq(st.entries, 0);
	/* the buffer is gone: a second abort is refused */
	TU_ERR(mkv_abort(pool, &buf), MKV_E_INVAL);
}
END_TEST

START_TEST(test_whole_pool_alloc_then_abort)
{
	struct mkv_buf buf;
	struct mkv_stat st;

	TU_OK(mkv_alloc(pool, (size_t)TU_DATA_SIZE, &buf));
	ck_assert_ptr_nonnull(buf.data);
	memset(buf.data, 0x5a, (size_t)TU_DATA_SIZE);
	TU_ERR(tu_put(pool, "more", 4, 1), MKV_E_NOSPC);
	TU_OK(mkv_abort(pool, &buf));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_free, NPAGES);
	TU_OK(tu_put(pool, "more", 4, 1));
}
END_TEST

/* ---- write-once ---- */

START_TEST(test_publish_existing_is_exists)
{
	struct mkv_stat before, st;
	struct mkv_buf buf;

	TU_OK(tu_put(pool, "dup", 3, 3000));
	tu_stat(pool, &before);
	TU_OK(mkv_alloc(pool, 2 * TU_PAGE_SIZE, &buf));
	tu_fill(buf.data, 2 * TU_PAGE_SIZE, "other", 5);
	TU_ERR(mkv_publish(pool, "dup", 3, &buf), MKV_E_EXISTS);
	ck_assert_msg(tu_is_zero(&buf, sizeof(buf)), "MKV_E_EXISTS did not consume the buffer");
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_free, before.pages_free);
	ck_assert_uint_eq(st.pages_granted, before.pages_granted);
	ck_assert_uint_eq(st.pages_used, before.pages_used);
	ck_assert_uint_eq(st.entries, 1);
	ck_assert_int_eq(tu_check(pool, "dup", 3, 3000), 0);
	/* the consumed buffer cannot be aborted */
	TU_ERR(mkv_abort(pool, &buf), MKV_E_INVAL);
}
END_TEST

START_TEST(test_put_existing_is_exists)
{
	struct mkv_stat before, st;

	TU_OK(tu_put(pool, "dup", 3, 3000));
	tu_stat(pool, &before);
	TU_ERR(tu_put(pool, "dup", 3, 5000), MKV_E_EXISTS);
	ck_assert_int_eq(tu_check(pool, "dup", 3, 3000), 0);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_free, before.pages_free);
	ck_assert_uint_eq(st.pages_used, before.pages_used);
	ck_assert_uint_eq(st.bytes_stored, 3000);
}
END_TEST

START_TEST(test_put_after_del_is_allowed)
{
	TU_OK(tu_put(pool, "again", 5, 100));
	TU_OK(mkv_del(pool, "again", 5));
	TU_OK(tu_put(pool, "again", 5, 9000));
	ck_assert_int_eq(tu_check(pool, "again", 5, 9000), 0);
}
END_TEST

/* ---- exists, del ---- */

START_TEST(test_exists_one_zero)
{
	ck_assert_int_eq(mkv_exists(pool, "e", 1), 0);
	ck_assert_str_eq(mkv_errormsg(), "");
	TU_OK(tu_put(pool, "e", 1, 10));
	ck_assert_int_eq(mkv_exists(pool, "e", 1), 1);
	ck_assert_str_eq(mkv_errormsg(), "");
	ck_assert_int_eq(mkv_exists(pool, "E", 1), 0);
}
END_TEST

/*
 * mkv_key_next() walks every key once in LMDB's byte order, binary keys
 * and keys that are prefixes of others included, from any point, and
 * says MKV_E_NOTFOUND past the last; a deleted key is no longer met.
 */
START_TEST(test_key_next_walks_keys_in_byte_order)
{
	static const struct { const char *k; size_t len; } keys[] = {
		{ "\0", 1 }, { "\0\0", 2 }, { "a", 1 }, { "a\0", 2 }, { "a\0b", 3 }, { "ab", 2 },
		{ "b", 1 }, { "\xff", 1 }, { "\xff\xff", 2 },
	};
	enum { N = sizeof(keys) / sizeof(keys[0]) };
	uint8_t key[MKV_KEY_MAX], last[MKV_KEY_MAX];
	size_t klen, llen = 0, n = 0;
	int rc;

	TU_ERR(mkv_key_next(pool, NULL, 0, key, &klen), MKV_E_NOTFOUND);
	for (size_t i = N; i-- > 0;)
		TU_OK(tu_put(pool, keys[i].k, keys[i].len, 10 + i));
	while ((rc = mkv_key_next(pool, n ? last : NULL, llen, key, &klen)) == 0) {
		ck_assert_uint_lt(n, N);
		ck_assert_uint_eq(klen, keys[n].len);
		ck_assert_int_eq(memcmp(key, keys[n].k, klen), 0);
		memcpy(last, key, klen);
		llen = klen;
		n++;
	}
	ck_assert_int_eq(rc, MKV_E_NOTFOUND);
	ck_assert_msg(mkv_errormsg()[0], "no message past the last key");
	ck_assert_uint_eq(n, N);
	/* from a key that is not published, and past a deleted one */
	TU_OK(mkv_key_next(pool, "a\0a", 3, key, &klen));
	ck_assert_uint_eq(klen, 3);
	ck_assert_int_eq(memcmp(key, "a\0b", 3), 0);
	TU_OK(mkv_del(pool, "a\0b", 3));
	TU_OK(mkv_key_next(pool, "a\0a", 3, key, &klen));
	ck_assert_uint_eq(klen, 2);
	ck_assert_int_eq(memcmp(key, "ab", 2), 0);
	TU_ERR(mkv_key_next(pool, "\xff\xff", 2, key, &klen), MKV_E_NOTFOUND);
	TU_ERR(mkv_key_next(pool, NULL, 1, key, &klen), MKV_E_INVAL);
	TU_ERR(mkv_key_next(pool, "a", 0, key, &klen), MKV_E_INVAL);
	TU_ERR(mkv_key_next(pool, NULL, 0, NULL, &klen), MKV_E_INVAL);
	TU_ERR(mkv_key_next(pool, NULL, 0, key, NULL), MKV_E_INVAL);
	TU_ERR(mkv_key_next(NULL, NULL, 0, key, &klen), MKV_E_INVAL);
}
END_TEST

START_TEST(test_get_after_del_is_notfound)
{
	struct mkv_view v;
	struct mkv_stat st;

	TU_OK(tu_put(pool, "gone", 4, 20000));
	TU_OK(mkv_del(pool, "gone", 4));
	memset(&v, 0, sizeof(v));
	TU_ERR(mkv_get(pool, "gone", 4, &v), MKV_E_NOTFOUND);
	ck_assert_ptr_null(v.data);
	ck_assert_int_eq(mkv_exists(pool, "gone", 4), 0);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 0);
	ck_assert_uint_eq(st.bytes_stored, 0);
	ck_assert_uint_eq(st.pages_used, 0);
}
END_TEST

START_TEST(test_get_missing_is_notfound)
{
	struct mkv_view v;

	TU_ERR(mkv_get(pool, "never", 5, &v), MKV_E_NOTFOUND);
}
END_TEST

START_TEST(test_del_missing_is_notfound)
{
	TU_ERR(mkv_del(pool, "never", 5), MKV_E_NOTFOUND);
	TU_OK(tu_put(pool, "once", 4, 10));
	TU_OK(mkv_del(pool, "once", 4));
	TU_ERR(mkv_del(pool, "once", 4), MKV_E_NOTFOUND);
}
END_TEST

/* ---- argument checks ---- */

static void
count_progress(uint64_t done, uint64_t total, void *arg)
{
	uint64_t *calls = arg;

	ck_assert_uint_le(done, total);
	(*calls)++;
}

START_TEST(test_pool_calls_check_their_arguments)
{
	struct mkv_verify v;
	struct mkv_reclaim r;
	struct mkv_evict e;
	struct mkv_client c;
	size_t n;
	uint64_t calls = 0;

	TU_ERR(mkv_pool_verify(NULL, 0, &v), MKV_E_INVAL);
	TU_ERR(mkv_pool_verify(pool, 0, NULL), MKV_E_INVAL);
	TU_ERR(mkv_pool_verify(pool, 0x80, &v), MKV_E_INVAL);
	TU_ERR(mkv_pool_reclaim(pool, 0x80, &r), MKV_E_INVAL);
	TU_ERR(mkv_pool_reclaim(pool, 0, NULL), MKV_E_INVAL);
	TU_ERR(mkv_pool_evict(pool, 101, 0, &e), MKV_E_INVAL);
	TU_ERR(mkv_pool_evict(pool, 50, 0x80, &e), MKV_E_INVAL);
	TU_ERR(mkv_pool_clients(pool, NULL, 1, &n), MKV_E_INVAL);
	TU_ERR(mkv_pool_clients(pool, &c, 1, NULL), MKV_E_INVAL);
	TU_OK(mkv_pool_clients(pool, &c, 1, &n));
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(c.pid, (uint32_t)getpid());
	ck_assert(c.alive && c.holder && !c.rdonly);
	/* the progress callback sees verify through to its end */
	TU_OK(tu_put(pool, "p1", 2, 10));
	mkv_pool_set_progress(pool, count_progress, &calls);
	TU_OK(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v));
	ck_assert_uint_ge(calls, 1);
	ck_assert_uint_eq(v.checksums_checked, 1);
	mkv_pool_set_progress(pool, NULL, NULL);
}
END_TEST

START_TEST(test_verified_get_of_damaged_value_is_corrupt)
{
	struct mkv_pool *vp;
	struct mkv_view view;
	struct mkv_verify v;
	char *path = tu_pool_path(tu_dir);

	TU_OK(tu_put(pool, "dmg", 3, 3 * TU_PAGE_SIZE));
	TU_OK(mkv_pool_open(path, MKV_VERIFY, NULL, &vp));
	TU_OK(mkv_get(vp, "dmg", 3, &view));
	TU_OK(mkv_release(vp, &view));
	/* damage the published value through the writer handle's mapping */
	TU_OK(mkv_get(pool, "dmg", 3, &view));
	((volatile unsigned char *)view.data)[100] ^= 0xff;
	TU_OK(mkv_release(pool, &view));
	TU_ERR(mkv_get(vp, "dmg", 3, &view), MKV_E_CORRUPT);
	ck_assert_ptr_null(view.data);
	TU_OK(mkv_get(pool, "dmg", 3, &view));  /* without MKV_VERIFY: not checked */
	TU_OK(mkv_release(pool, &view));
	TU_ERR(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v), MKV_E_CORRUPT);
	ck_assert_uint_eq(v.checksums_bad, 1);
	mkv_pool_close(&vp);
	free(path);
}
END_TEST

START_TEST(test_nochecksum_publishes_unchecked_values)
{
	struct mkv_pool *np, *vp;
	struct mkv_view view;
	struct mkv_verify v;
	char *path = tu_pool_path(tu_dir);

	TU_OK(mkv_pool_open(path, MKV_NOCHECKSUM, NULL, &np));
	TU_OK(tu_put(np, "nosum", 5, 2 * TU_PAGE_SIZE));
	TU_OK(tu_put(pool, "sum", 3, 2 * TU_PAGE_SIZE));
	TU_OK(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v));
	ck_assert_uint_eq(v.entries, 2);
	ck_assert_uint_eq(v.checksums_checked, 1);
	/* damaged, but nothing recorded to tell: a verified get returns it */
	TU_OK(mkv_get(np, "nosum", 5, &view));
	((volatile unsigned char *)view.data)[7] ^= 0xff;
	TU_OK(mkv_release(np, &view));
	TU_OK(mkv_pool_open(path, MKV_VERIFY, NULL, &vp));
	TU_OK(mkv_get(vp, "nosum", 5, &view));
	TU_OK(mkv_release(vp, &view));
	TU_OK(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v));
	mkv_pool_close(&vp);
	mkv_pool_close(&np);
	free(path);
}
END_TEST

START_TEST(test_key_length_limits)
{
	char key[MKV_KEY_MAX + 2];
	struct mkv_view v;
	struct mkv_buf buf;
	struct mkv_key k;
	size_t hits, found;

	memset(key, 'q', sizeof(key));
	TU_ERR(tu_put(pool, key, 0, 10), MKV_E_INVAL);
	TU_ERR(tu_put(pool, key, MKV_KEY_MAX + 1, 10), MKV_E_INVAL);
	TU_ERR(mkv_get(pool, key, 0, &v), MKV_E_INVAL);
	TU_ERR(mkv_get(pool, key, MKV_KEY_MAX + 1, &v), MKV_E_INVAL);
	TU_ERR(mkv_exists(pool, key, 0), MKV_E_INVAL);
	TU_ERR(mkv_exists(pool, key, MKV_KEY_MAX + 1), MKV_E_INVAL);
	TU_ERR(mkv_del(pool, key, 0), MKV_E_INVAL);
	TU_ERR(mkv_del(pool, key, MKV_KEY_MAX + 1), MKV_E_INVAL);
	k.data = key;
	k.len = 0;
	TU_ERR(mkv_prefix_len(pool, &k, 1, &hits), MKV_E_INVAL);
	TU_ERR(mkv_get_batch(pool, &k, 1, 0, &v, &found), MKV_E_INVAL);
	k.len = MKV_KEY_MAX + 1;
	TU_ERR(mkv_prefix_len(pool, &k, 1, &hits), MKV_E_INVAL);
	TU_ERR(mkv_get_batch(pool, &k, 1, 0, &v, &found), MKV_E_INVAL);

	/* publish with a bad key keeps the buffer for the caller */
	TU_OK(mkv_alloc(pool, 100, &buf));
	TU_ERR(mkv_publish(pool, key, 0, &buf), MKV_E_INVAL);
	TU_ERR(mkv_publish(pool, key, MKV_KEY_MAX + 1, &buf), MKV_E_INVAL);
	ck_assert_ptr_nonnull(buf.data);
	ck_assert_uint_eq(buf.len, 100);
	tu_fill(buf.data, 100, key, MKV_KEY_MAX);
	TU_OK(mkv_publish(pool, key, MKV_KEY_MAX, &buf));

	/* the longest key works everywhere */
	ck_assert_int_eq(mkv_exists(pool, key, MKV_KEY_MAX), 1);
	ck_assert_int_eq(tu_check(pool, key, MKV_KEY_MAX, 100), 0);
	k.len = MKV_KEY_MAX;
	TU_OK(mkv_prefix_len(pool, &k, 1, &hits));
	ck_assert_uint_eq(hits, 1);
	TU_OK(mkv_del(pool, key, MKV_KEY_MAX));
	ck_assert_int_eq(mkv_exists(pool, key, MKV_KEY_MAX), 0);
	TU_OK(tu_put(pool, key, MKV_KEY_MAX, 5000));
	ck_assert_int_eq(tu_check(pool, key, MKV_KEY_MAX, 5000), 0);
}
END_TEST

START_TEST(test_null_arguments_are_inval)
{
	struct mkv_view v;
	struct mkv_buf buf;
	struct mkv_key k = { "a", 1 };
	size_t hits, found;
	char val[16] = "0123456789";

	memset(&v, 0, sizeof(v));

	TU_ERR(mkv_put(NULL, "a", 1, val, 10), MKV_E_INVAL);
	TU_ERR(mkv_put(pool, NULL, 1, val, 10), MKV_E_INVAL);
	TU_ERR(mkv_put(pool, "a", 1, NULL, 10), MKV_E_INVAL);
	TU_ERR(mkv_get(NULL, "a", 1, &v), MKV_E_INVAL);
	TU_ERR(mkv_get(pool, NULL, 1, &v), MKV_E_INVAL);
	TU_ERR(mkv_get(pool, "a", 1, NULL), MKV_E_INVAL);
	TU_ERR(mkv_exists(NULL, "a", 1), MKV_E_INVAL);
	TU_ERR(mkv_exists(pool, NULL, 1), MKV_E_INVAL);
	TU_ERR(mkv_del(NULL, "a", 1), MKV_E_INVAL);
	TU_ERR(mkv_del(pool, NULL, 1), MKV_E_INVAL);
	TU_ERR(mkv_alloc(NULL, 10, &buf), MKV_E_INVAL);
	TU_ERR(mkv_alloc(pool, 10, NULL), MKV_E_INVAL);
	TU_ERR(mkv_release(NULL, &v), MKV_E_INVAL);
	TU_ERR(mkv_release(pool, NULL), MKV_E_INVAL);
	TU_ERR(mkv_abort(pool, NULL), MKV_E_INVAL);
	TU_ERR(mkv_prefix_len(NULL, &k, 1, &hits), MKV_E_INVAL);
	TU_ERR(mkv_prefix_len(pool, NULL, 1, &hits), MKV_E_INVAL);
	TU_ERR(mkv_prefix_len(pool, &k, 1, NULL), MKV_E_INVAL);
	TU_ERR(mkv_get_batch(NULL, &k, 1, 0, &v, &found), MKV_E_INVAL);
	TU_ERR(mkv_get_batch(pool, NULL, 1, 0, &v, &found), MKV_E_INVAL);
	TU_ERR(mkv_get_batch(pool, &k, 1, 0, NULL, &found), MKV_E_INVAL);
	TU_ERR(mkv_get_batch(pool, &k, 1, 0, &v, NULL), MKV_E_INVAL);
	k.data = NULL;
	TU_ERR(mkv_prefix_len(pool, &k, 1, &hits), MKV_E_INVAL);
	TU_ERR(mkv_get_batch(pool, &k, 1, 0, &v, &found), MKV_E_INVAL);

	TU_OK(mkv_alloc(pool, 10, &buf));
	TU_ERR(mkv_publish(NULL, "a", 1, &buf), MKV_E_INVAL);
	TU_ERR(mkv_publish(pool, NULL, 1, &buf), MKV_E_INVAL);
	TU_ERR(mkv_publish(pool, "a", 1, NULL), MKV_E_INVAL);
	TU_ERR(mkv_abort(NULL, &buf), MKV_E_INVAL);
	/* after all that, the buffer is still ours and works */
	ck_assert_uint_eq(buf.len, 10);
	tu_fill(buf.data, 10, "a", 1);
	TU_OK(mkv_publish(pool, "a", 1, &buf));
	ck_assert_int_eq(tu_check(pool, "a", 1, 10), 0);
}
END_TEST

START_TEST(test_alloc_len_zero_is_inval)
{
	struct mkv_buf buf;

	TU_ERR(mkv_alloc(pool, 0, &buf), MKV_E_INVAL);
	TU_ERR(mkv_put(pool, "z", 1, "", 0), MKV_E_INVAL);
	ck_assert_int_eq(mkv_exists(pool, "z", 1), 0);
}
END_TEST

START_TEST(test_alloc_bigger_than_pool_is_nospc)
{
	struct mkv_buf buf;
	struct mkv_stat st;

	TU_ERR(mkv_alloc(pool, (size_t)TU_DATA_SIZE + 1, &buf), MKV_E_NOSPC);
	TU_ERR(mkv_alloc(pool, (size_t)TU_DATA_SIZE * 64, &buf), MKV_E_NOSPC);
	TU_ERR(mkv_alloc(pool, SIZE_MAX, &buf), MKV_E_NOSPC);
	TU_ERR(mkv_alloc(pool, SIZE_MAX - TU_PAGE_SIZE + 2, &buf), MKV_E_NOSPC);
	TU_ERR(tu_put(pool, "huge", 4, (size_t)TU_DATA_SIZE + 1), MKV_E_NOSPC);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_free, NPAGES);
	ck_assert_uint_eq(st.pages_granted, 0);
}
END_TEST

START_TEST(test_release_zeroed_view_is_inval)
{
	struct mkv_view v;

	memset(&v, 0, sizeof(v));
	TU_ERR(mkv_release(pool, &v), MKV_E_INVAL);
	TU_OK(tu_put(pool, "r", 1, 10));
	TU_OK(mkv_get(pool, "r", 1, &v));
	TU_OK(mkv_release(pool, &v));
	/* release zeroed it: a second release is refused */
	TU_ERR(mkv_release(pool, &v), MKV_E_INVAL);
}
END_TEST

START_TEST(test_release_on_other_handle_is_inval)
{
	struct mkv_pool *other = NULL;
	struct mkv_view v, copy;

	TU_OK(tu_put(pool, "h", 1, 100));
	TU_OK(tu_pool_open(tu_dir, 0, &other));
	TU_OK(mkv_get(pool, "h", 1, &v));
	copy = v;
	TU_ERR(mkv_release(other, &v), MKV_E_INVAL);
	ck_assert_mem_eq(&v, &copy, sizeof(v));
	TU_OK(mkv_release(pool, &v));
	mkv_pool_close(&other);
}
END_TEST

START_TEST(test_abort_zeroed_buffer_is_inval)
{
	struct mkv_buf buf;

	memset(&buf, 0, sizeof(buf));
	TU_ERR(mkv_abort(pool, &buf), MKV_E_INVAL);
	TU_ERR(mkv_publish(pool, "zb", 2, &buf), MKV_E_INVAL);
	ck_assert_int_eq(mkv_exists(pool, "zb", 2), 0);
}
END_TEST

START_TEST(test_publish_tampered_buffer_is_inval)
{
	struct mkv_buf buf, good;
	struct mkv_stat st;
	char stackbuf[64];
	int i;

	TU_OK(mkv_alloc(pool, 2 * TU_PAGE_SIZE, &good));
	tu_fill(good.data, 2 * TU_PAGE_SIZE, "t", 1);

	/* the data pointer moved outside the arena */
	buf = good;
	buf.data = stackbuf;
	TU_ERR(mkv_publish(pool, "t", 1, &buf), MKV_E_INVAL);
	/* the data pointer moved inside the arena */
	buf = good;
	buf.data = (char *)buf.data + TU_PAGE_SIZE;
	TU_ERR(mkv_publish(pool, "t", 1, &buf), MKV_E_INVAL);
	/* the library's fields scribbled over */
	for (i = 0; i < 2; i++) {
		buf = good;
		buf.priv_[i] ^= 0x0123456789abcdefULL;
		TU_ERR(mkv_publish(pool, "t", 1, &buf), MKV_E_INVAL);
		buf = good;
		buf.priv_[i] = ~buf.priv_[i];
		TU_ERR(mkv_publish(pool, "t", 1, &buf), MKV_E_INVAL);
	}
	ck_assert_int_eq(mkv_exists(pool, "t", 1), 0);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 0);

	/* the genuine buffer is still the caller's and publishes fine */
	TU_OK(mkv_publish(pool, "t", 1, &good));
	ck_assert_int_eq(tu_check(pool, "t", 1, 2 * TU_PAGE_SIZE), 0);
}
END_TEST

START_TEST(test_publish_grown_buffer_is_inval)
{
	struct mkv_buf buf, good;

	TU_OK(mkv_alloc(pool, 2 * TU_PAGE_SIZE, &good));
	tu_fill(good.data, 2 * TU_PAGE_SIZE, "t", 1);
	/* a length beyond the buffer's pages */
	buf = good;
	buf.len = 64 * TU_PAGE_SIZE;
	TU_ERR(mkv_publish(pool, "t", 1, &buf), MKV_E_INVAL);
	ck_assert_int_eq(mkv_exists(pool, "t", 1), 0);
	TU_OK(mkv_publish(pool, "t", 1, &good));
	ck_assert_int_eq(tu_check(pool, "t", 1, 2 * TU_PAGE_SIZE), 0);
}
END_TEST

START_TEST(test_publish_buffer_of_other_pool_is_inval)
{
	struct mkv_pool *other = NULL;
	struct mkv_buf buf;
	char *dir2 = tu_tmpdir_new();

	ck_assert_ptr_nonnull(dir2);
	TU_OK(tu_pool_create(dir2, TU_DATA_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS, &other));
	TU_OK(mkv_alloc(other, 1000, &buf));
	tu_fill(buf.data, 1000, "o", 1);
	TU_ERR(mkv_publish(pool, "o", 1, &buf), MKV_E_INVAL);
	TU_ERR(mkv_abort(pool, &buf), MKV_E_INVAL);
	ck_assert_int_eq(mkv_exists(pool, "o", 1), 0);
	ck_assert_uint_eq(buf.len, 1000);
	TU_OK(mkv_publish(other, "o", 1, &buf));
	ck_assert_int_eq(tu_check(other, "o", 1, 1000), 0);
	mkv_pool_close(&other);
	tu_tmpdir_free(&dir2);
}
END_TEST

/* ---- a full pool ---- */

START_TEST(test_full_pool_is_nospc_and_loses_nothing)
{
	struct mkv_stat st;
	struct mkv_buf buf;
	char key[64];
	size_t klen, len;
	unsigned i, n, j;
	int rc;

	/* one-page values (of varied lengths) until the arena is full */
	for (n = 0;; n++) {
		klen = tu_key(key, "f", n);
		len = tu_vlen(key, klen, 1, TU_PAGE_SIZE);
		rc = tu_put(pool, key, klen, len);
		if (rc == MKV_E_NOSPC)
			break;
		ck_assert_msg(rc == 0, "put %u = %d (%s): %s", n, rc, mkv_strerror(rc),
				mkv_errormsg());
		ck_assert_uint_le(n, NPAGES);
	}
	ck_assert_msg(mkv_errormsg()[0] != '\0', "NOSPC without a message");
	ck_assert_uint_eq(n, NPAGES);
	TU_ERR(mkv_alloc(pool, 1, &buf), MKV_E_NOSPC);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, n);
	ck_assert_uint_eq(st.pages_used, NPAGES);
	ck_assert_uint_eq(st.pages_free, 0);
	/* every earlier key is intact */
	for (i = 0; i < n; i++) {
		klen = tu_key(key, "f", i);
		ck_assert_msg(tu_check(pool, key, klen, tu_vlen(key, klen, 1, TU_PAGE_SIZE)) == 0,
				"key %s damaged after NOSPC", key);
	}
	/* the failed key is not there */
	klen = tu_key(key, "f", n);
	ck_assert_int_eq(mkv_exists(pool, key, klen), 0);

	/* free ten keys: ten pages come back, and no more */
	for (i = 100; i < 110; i++) {
		klen = tu_key(key, "f", i);
		TU_OK(mkv_del(pool, key, klen));
	}
	for (j = 0; j < 10; j++) {
		klen = tu_key(key, "g", j);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	TU_ERR(tu_put(pool, "g-extra", 7, 1), MKV_E_NOSPC);
	for (j = 0; j < 10; j++) {
		klen = tu_key(key, "g", j);
		ck_assert_int_eq(tu_check(pool, key, klen, TU_PAGE_SIZE), 0);
	}
	for (i = 0; i < n; i++) {
		if (i >= 100 && i < 110)
			continue;
		klen = tu_key(key, "f", i);
		ck_assert_int_eq(tu_check(pool, key, klen, tu_vlen(key, klen, 1, TU_PAGE_SIZE)), 0);
	}
}
END_TEST

static size_t
long_key(char *key, unsigned i)
{
	memset(key, 'L', MKV_KEY_MAX);
	tu_key(key, "long", i);
	key[strlen(key)] = '-';
	return MKV_KEY_MAX;
}

START_TEST(test_registry_full_is_nospc_and_loses_nothing)
{
	struct mkv_pool *rp = NULL;
	struct mkv_opts *opts = NULL;
	struct mkv_buf buf;
	struct mkv_stat st;
	char key[MKV_KEY_MAX + 1], *dir2 = tu_tmpdir_new(), *path;
	size_t klen;
	unsigned i, n;
	int rc;

	/* a small registry (1 MiB) in front of a big arena: the registry fills first */
	ck_assert_ptr_nonnull(dir2);
	path = tu_pool_path(dir2);
	TU_OK(mkv_opts_new(&opts));
	TU_OK(mkv_opts_set_page_size(opts, 4096));
	TU_OK(mkv_opts_set_data_size(opts, 32ULL << 20));
	TU_OK(mkv_opts_set_registry_size(opts, 1ULL << 20));
	TU_OK(mkv_pool_open(path, MKV_CREATE, opts, &rp));
	mkv_opts_delete(&opts);
	for (n = 0;; n++) {
		klen = long_key(key, n);
		TU_OK(mkv_alloc(rp, 100, &buf));
		tu_fill(buf.data, 100, key, klen);
		rc = mkv_publish(rp, key, klen, &buf);
		if (rc == MKV_E_NOSPC)
			break;
		ck_assert_msg(rc == 0, "publish %u = %d (%s): %s", n, rc, mkv_strerror(rc),
				mkv_errormsg());
		ck_assert_uint_lt(n, 8192);
	}
	ck_assert_msg(mkv_errormsg()[0] != '\0', "registry NOSPC without a message");
	ck_assert_uint_gt(n, 100);
	/* the buffer is still the caller's */
	ck_assert_ptr_nonnull(buf.data);
	ck_assert_int_eq(mkv_exists(rp, key, klen), 0);
	TU_OK(mkv_abort(rp, &buf));
	TU_ERR(tu_put(rp, key, klen, 100), MKV_E_NOSPC);
	tu_stat(rp, &st);
	ck_assert_uint_eq(st.entries, n);
	ck_assert_uint_eq(st.pages_used, n);
	ck_assert_uint_eq(st.pages_free + st.pages_granted, st.pages_total - n);
	for (i = 0; i < n; i++) {
		klen = long_key(key, i);
		ck_assert_msg(tu_check(rp, key, klen, 100) == 0, "key %u lost", i);
	}
	/* a full registry still takes deletes (no NOSPC from mkv_del), and then puts */
	for (i = 0; i < 50; i++) {
		klen = long_key(key, i);
		rc = mkv_del(rp, key, klen);
		ck_assert_msg(rc == 0, "del %u of %u keys in a full registry = %d (%s): %s",
				i, n, rc, mkv_strerror(rc), mkv_errormsg());
	}
	klen = long_key(key, n);
	TU_OK(tu_put(rp, key, klen, 100));
	ck_assert_int_eq(tu_check(rp, key, klen, 100), 0);
	mkv_pool_close(&rp);
	free(path);
	tu_tmpdir_free(&dir2);
}
END_TEST

/* ---- prefix_len, get_batch ---- */

static uint8_t chain[CHAIN][32];
static struct mkv_key ckeys[CHAIN];

static int
is_hole(size_t i)
{
	return i == 20 || i == 40 || i == 41 || i == 63;
}

static size_t
chain_len(size_t i)
{
	return tu_vlen(chain[i], 32, 1, 3 * TU_PAGE_SIZE);
}

static void
put_chain(void)
{
	size_t i;

	tu_chain_keys(chain, CHAIN, 7);
	for (i = 0; i < CHAIN; i++) {
		ckeys[i].data = chain[i];
		ckeys[i].len = 32;
		/* tail first, as an engine inserts a prompt */
		if (!is_hole(CHAIN - 1 - i))
			TU_OK(tu_put(pool, chain[CHAIN - 1 - i], 32, chain_len(CHAIN - 1 - i)));
	}
}

START_TEST(test_prefix_len_stops_at_first_hole)
{
	size_t hits;

	put_chain();
	hits = 999;
	TU_OK(mkv_prefix_len(pool, ckeys, CHAIN, &hits));
	ck_assert_uint_eq(hits, 20);
	hits = 999;
	TU_OK(mkv_prefix_len(pool, ckeys, 0, &hits));
	ck_assert_uint_eq(hits, 0);
	TU_OK(mkv_prefix_len(pool, ckeys, 10, &hits));
	ck_assert_uint_eq(hits, 10);
	TU_OK(mkv_prefix_len(pool, ckeys + 21, 30, &hits));
	ck_assert_uint_eq(hits, 19);
	TU_OK(mkv_prefix_len(pool, ckeys + 40, 5, &hits));
	ck_assert_uint_eq(hits, 0);

	/* filling the first hole moves the answer to the next one */
	TU_OK(tu_put(pool, chain[20], 32, chain_len(20)));
	TU_OK(mkv_prefix_len(pool, ckeys, CHAIN, &hits));
	ck_assert_uint_eq(hits, 40);
	TU_OK(tu_put(pool, chain[40], 32, chain_len(40)));
	TU_OK(tu_put(pool, chain[41], 32, chain_len(41)));
	TU_OK(mkv_prefix_len(pool, ckeys, CHAIN, &hits));
	ck_assert_uint_eq(hits, 63);
	TU_OK(tu_put(pool, chain[63], 32, chain_len(63)));
	TU_OK(mkv_prefix_len(pool, ckeys, CHAIN, &hits));
	ck_assert_uint_eq(hits, CHAIN);

	/* deleting the head gives 0 */
	TU_OK(mkv_del(pool, chain[0], 32));
	TU_OK(mkv_prefix_len(pool, ckeys, CHAIN, &hits));
	ck_assert_uint_eq(hits, 0);
}
END_TEST

static void
check_batch_views(const struct mkv_view *views, size_t n, size_t upto_prefix)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (is_hole(i) || i >= upto_prefix) {
			ck_assert_msg(tu_is_zero(&views[i], sizeof(views[i])),
					"view %zu of a missing key is not zero", i);
			continue;
		}
		ck_assert_msg(views[i].data != NULL, "view %zu missing", i);
		ck_assert_uint_eq(views[i].len, chain_len(i));
		ck_assert_msg(tu_verify(views[i].data, views[i].len, chain[i], 32) == -1,
				"view %zu has wrong bytes", i);
	}
}

static void
release_views(struct mkv_view *views, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (views[i].data != NULL)
			TU_OK(mkv_release(pool, &views[i]));
}

START_TEST(test_get_batch_all)
{
	struct mkv_view views[CHAIN];
	struct mkv_stat st;
	size_t found = 999;

	put_chain();
	memset(views, 0xa5, sizeof(views));
	TU_OK(mkv_get_batch(pool, ckeys, CHAIN, 0, views, &found));
	ck_assert_uint_eq(found, CHAIN - 4);
	check_batch_views(views, CHAIN, CHAIN);
	release_views(views, CHAIN);

	/* nothing is held any more: a deleted key's pages come back */
	TU_OK(mkv_del(pool, chain[0], 32));
	TU_OK(tu_put(pool, "after", 5, 1));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 0);
}
END_TEST

START_TEST(test_get_batch_prefix)
{
	struct mkv_view views[CHAIN];
	size_t found = 999;

	put_chain();
	memset(views, 0xa5, sizeof(views));
	TU_OK(mkv_get_batch(pool, ckeys, CHAIN, MKV_BATCH_PREFIX, views, &found));
	ck_assert_uint_eq(found, 20);
	check_batch_views(views, CHAIN, 20);
	release_views(views, CHAIN);

	found = 999;
	TU_OK(mkv_get_batch(pool, ckeys, 0, MKV_BATCH_PREFIX, views, &found));
	ck_assert_uint_eq(found, 0);
	memset(views, 0xa5, sizeof(views));
	TU_OK(mkv_get_batch(pool, ckeys + 20, 5, MKV_BATCH_PREFIX, views, &found));
	ck_assert_uint_eq(found, 0);
	ck_assert(tu_is_zero(views, 5 * sizeof(views[0])));
}
END_TEST

START_TEST(test_get_batch_unknown_flag_is_inval)
{
	struct mkv_view views[CHAIN];
	size_t found;

	put_chain();
	TU_ERR(mkv_get_batch(pool, ckeys, CHAIN, 0x2, views, &found), MKV_E_INVAL);
	TU_ERR(mkv_get_batch(pool, ckeys, CHAIN, MKV_BATCH_PREFIX | 0x100, views, &found),
			MKV_E_INVAL);
}
END_TEST

START_TEST(test_get_batch_error_holds_no_view)
{
	struct mkv_view views[3];
	struct mkv_key keys[3];
	struct mkv_stat st;
	size_t found;

	TU_OK(tu_put(pool, "b0", 2, 3 * TU_PAGE_SIZE));
	TU_OK(tu_put(pool, "b1", 2, 10));
	keys[0].data = "b0";
	keys[0].len = 2;
	keys[1].data = "b1";
	keys[1].len = 2;
	keys[2].data = "b2";
	keys[2].len = 0;  /* bad key after two good ones */
	TU_ERR(mkv_get_batch(pool, keys, 3, 0, views, &found), MKV_E_INVAL);
	/* no view of b0 is held, so its pages are not quarantined once deleted */
	TU_OK(mkv_del(pool, "b0", 2));
	TU_OK(tu_put(pool, "b3", 2, 10));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.pages_quarantined, 0);
	ck_assert_uint_eq(st.pages_used, 2);
}
END_TEST

/* ---- stat after puts and dels ---- */

START_TEST(test_stat_counts_puts_and_dels)
{
	struct mkv_stat st;
	char key[64];
	size_t klen, len;
	uint64_t bytes = 0, pages = 0;
	unsigned i;

	for (i = 0; i < 50; i++) {
		klen = tu_key(key, "c", i);
		len = tu_vlen(key, klen, 1, 5 * TU_PAGE_SIZE);
		TU_OK(tu_put(pool, key, klen, len));
		if (i % 3 == 0)
			continue;
		bytes += len;
		pages += (len + TU_PAGE_SIZE - 1) / TU_PAGE_SIZE;
	}
	for (i = 0; i < 50; i += 3) {
		klen = tu_key(key, "c", i);
		TU_OK(mkv_del(pool, key, klen));
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 50 - 17);
	ck_assert_uint_eq(st.bytes_stored, bytes);
	ck_assert_uint_eq(st.pages_used, pages);
	ck_assert_uint_eq(st.pages_total, NPAGES);
}
END_TEST

static Suite *
kv_suite(void)
{
	Suite *s = suite_create("values");
	TCase *tc;

	tc = tcase_create("write");
	tcase_add_checked_fixture(tc, kv_setup, kv_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_put_get_round_trip);
	tcase_add_test(tc, test_alloc_fill_publish_get);
	tcase_add_test(tc, test_multi_page_value_round_trip);
	tcase_add_test(tc, test_binary_keys_are_distinct);
	tcase_add_test(tc, test_abort_returns_pages);
	tcase_add_test(tc, test_whole_pool_alloc_then_abort);
	tcase_add_test(tc, test_publish_existing_is_exists);
	tcase_add_test(tc, test_put_existing_is_exists);
	tcase_add_test(tc, test_put_after_del_is_allowed);
	tcase_add_test(tc, test_exists_one_zero);
	tcase_add_test(tc, test_key_next_walks_keys_in_byte_order);
	tcase_add_test(tc, test_get_after_del_is_notfound);
	tcase_add_test(tc, test_get_missing_is_notfound);
	tcase_add_test(tc, test_del_missing_is_notfound);
	tcase_add_test(tc, test_stat_counts_puts_and_dels);
	suite_add_tcase(s, tc);

	tc = tcase_create("args");
	tcase_add_checked_fixture(tc, kv_setup, kv_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_key_length_limits);
	tcase_add_test(tc, test_pool_calls_check_their_arguments);
	tcase_add_test(tc, test_verified_get_of_damaged_value_is_corrupt);
	tcase_add_test(tc, test_nochecksum_publishes_unchecked_values);
	tcase_add_test(tc, test_null_arguments_are_inval);
	tcase_add_test(tc, test_alloc_len_zero_is_inval);
	tcase_add_test(tc, test_alloc_bigger_than_pool_is_nospc);
	tcase_add_test(tc, test_release_zeroed_view_is_inval);
	tcase_add_test(tc, test_release_on_other_handle_is_inval);
	tcase_add_test(tc, test_abort_zeroed_buffer_is_inval);
	tcase_add_test(tc, test_publish_tampered_buffer_is_inval);
	tcase_add_test(tc, test_publish_grown_buffer_is_inval);
	tcase_add_test(tc, test_publish_buffer_of_other_pool_is_inval);
	suite_add_tcase(s, tc);

	tc = tcase_create("full");
	tcase_add_checked_fixture(tc, kv_setup, kv_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_full_pool_is_nospc_and_loses_nothing);
	tcase_add_test(tc, test_registry_full_is_nospc_and_loses_nothing);
	suite_add_tcase(s, tc);

	tc = tcase_create("batch");
	tcase_add_checked_fixture(tc, kv_setup, kv_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_prefix_len_stops_at_first_hole);
	tcase_add_test(tc, test_get_batch_all);
	tcase_add_test(tc, test_get_batch_prefix);
	tcase_add_test(tc, test_get_batch_unknown_flag_is_inval);
	tcase_add_test(tc, test_get_batch_error_holds_no_view);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(kv_suite());
}
