/* SPDX-License-Identifier: MIT */
/*
 * check_hash.c -- values' checksums (hash.c) as the pool records them:
 * mkv_put()'s copy hashed chunk by chunk, and the hash chosen at run time,
 * record exactly XXH3-64 of the bytes with its low bit set, as every
 * release did, so values published before still verify; a damaged value
 * is still caught by MKV_VERIFY and by mkv_pool_verify(MKV_VERIFY_DEEP).
 *
 * The expected checksums come from libxxhash's own one-shot XXH3_64bits(),
 * not from the library's code.
 */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "testutil.h"
#include "unitutil.h"

#define PAGES 2048U  /* 8 MiB: room for every size below */
#define GUARD 64U

/* The sizes around mkv_hash_copy()'s chunk boundaries, and a value of several MiB. */
static const size_t sizes[] = {
	0, 1, MKV_HASH_CHUNK - 1, MKV_HASH_CHUNK, MKV_HASH_CHUNK + 1, 3 * MKV_HASH_CHUNK,
	(3U << 20) + 5,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
/* a value in the pool has at least one byte: sizes[FIRST] on */
#define FIRST 1U
#define MAX_SIZE ((3U << 20) + 5)

static struct mkv_pool *p;
static uint8_t *src;

static void
hash_setup(void)
{
	uint64_t seed = 14;

	tu_setup();
	unit_holder_pool(PAGES, &p, NULL);
	src = malloc(MAX_SIZE);
	ck_assert_ptr_nonnull(src);
	for (size_t i = 0; i < MAX_SIZE; i++)
		src[i] = (uint8_t)tu_rand(&seed);
}

static void
hash_teardown(void)
{
	free(src);
	mkv_pool_close(&p);
	tu_teardown();
}

static uint64_t
one_shot(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len) | 1;
}

START_TEST(test_copy_and_hash_is_memcpy_and_one_shot_xxh3)
{
	uint8_t *dst = malloc(MAX_SIZE + 2 * GUARD);

	ck_assert_ptr_nonnull(dst);
	for (size_t i = 0; i < NSIZES; i++) {
		size_t n = sizes[i];
		/* an odd source offset: no chunk starts aligned */
		const uint8_t *s = src + (n < MAX_SIZE ? 1 : 0);
		uint64_t sum;

		/* and the destination aligned, then not (its stores stream from 16 bytes) */
		for (size_t at = GUARD; at < GUARD + 16; at += 7) {
			memset(dst, 0xa5, MAX_SIZE + 2 * GUARD);
			sum = mkv_hash_copy(dst + at, s, n);
			ck_assert_msg(sum == one_shot(s, n), "size %zu: %016llx, XXH3 %016llx", n,
					(unsigned long long)sum, (unsigned long long)one_shot(s, n));
			ck_assert_msg(sum == mkv_hash_checksum(s, n), "size %zu: checksum differs",
					n);
			ck_assert_msg(memcmp(dst + at, s, n) == 0, "size %zu at +%zu: copy differs",
					n, at - GUARD);
			ck_assert_msg(dst[at - 1] == 0xa5 && dst[at + n] == 0xa5,
					"size %zu at +%zu: written outside the value", n, at - GUARD);
		}
	}
	free(dst);
}
END_TEST

/* Each size written by mkv_put() ("p<i>") and by mkv_alloc() + mkv_publish() ("a<i>"). */
static void
write_all(void)
{
	char key[32];

	for (size_t i = FIRST; i < NSIZES; i++) {
		struct mkv_buf buf;

		tu_key(key, "p", (unsigned)i);
		ck_assert_int_eq(mkv_put(p, key, strlen(key), src, sizes[i]), 0);
		tu_key(key, "a", (unsigned)i);
		ck_assert_int_eq(mkv_alloc(p, sizes[i], &buf), 0);
		memcpy(buf.data, src, sizes[i]);
		ck_assert_int_eq(mkv_publish(p, key, strlen(key), &buf), 0);
	}
}

START_TEST(test_written_values_record_one_shot_xxh3)
{
	char key[32];

	write_all();
	for (size_t i = FIRST; i < NSIZES; i++) {
		for (const char *way = "pa"; *way; way++) {
			struct mkv_entry e;

			tu_key(key, (char[]){ *way, 0 }, (unsigned)i);
			e = unit_lookup(p, key);
			ck_assert_uint_eq(e.length, sizes[i]);
			ck_assert_msg(e.checksum == one_shot(src, sizes[i]),
					"%s (%zu bytes): recorded %016llx, XXH3 %016llx", key, sizes[i],
					(unsigned long long)e.checksum,
					(unsigned long long)one_shot(src, sizes[i]));
		}
	}
	tu_verify_clean(p, MKV_VERIFY_DEEP, NULL, "after the writes");
}
END_TEST

/* Flip a byte of key's value through the writer's mapping. */
static void
damage(const char *key, size_t at)
{
	struct mkv_view v;

	ck_assert_int_eq(mkv_get(p, key, strlen(key), &v), 0);
	((volatile uint8_t *)v.data)[at] ^= 0x10;
	ck_assert_int_eq(mkv_release(p, &v), 0);
}

START_TEST(test_damage_in_any_chunk_is_caught)
{
	struct mkv_pool *vp;
	struct mkv_view v;
	struct mkv_verify rep;
	char key[32];
	size_t big = NSIZES - 1;

	write_all();
	ck_assert_int_eq(tu_pool_open(tu_dir, MKV_VERIFY, &vp), 0);
	for (size_t i = FIRST; i < NSIZES; i++) {
		tu_key(key, "p", (unsigned)i);
		ck_assert_int_eq(mkv_get(vp, key, strlen(key), &v), 0);
		ck_assert_int_eq(mkv_release(vp, &v), 0);
	}
	/* the last byte of the big value's last chunk; the first of a value's second chunk */
	tu_key(key, "p", (unsigned)big);
	damage(key, sizes[big] - 1);
	ck_assert_int_eq(mkv_get(vp, key, strlen(key), &v), MKV_E_CORRUPT);
	tu_key(key, "p", 4);
	damage(key, MKV_HASH_CHUNK);
	ck_assert_int_eq(mkv_get(vp, key, strlen(key), &v), MKV_E_CORRUPT);
	ck_assert_int_eq(mkv_pool_verify(p, MKV_VERIFY_DEEP, &rep), MKV_E_CORRUPT);
	ck_assert_uint_eq(rep.checksums_bad, 2);
	mkv_pool_close(&vp);
}
END_TEST

static Suite *
hash_suite(void)
{
	Suite *s = suite_create("hash");
	TCase *tc = tcase_create("checksums");

	tcase_add_checked_fixture(tc, hash_setup, hash_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_copy_and_hash_is_memcpy_and_one_shot_xxh3);
	tcase_add_test(tc, test_written_values_record_one_shot_xxh3);
	tcase_add_test(tc, test_damage_in_any_chunk_is_caught);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(hash_suite());
}
