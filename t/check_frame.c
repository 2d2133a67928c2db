/* SPDX-License-Identifier: MIT */
/*
 * check_frame.c -- MRDN v1 transfer frames (mkv_export, mkv_export_fd,
 * mkv_frame_parse, mkv_import): a frame written here is, byte for byte,
 * the layout marukv(7) gives (the checksum from Debian's b3sum, not the
 * library); values round-trip into another pool with their chain links;
 * every way a frame can be wrong has its error, and a refused frame
 * leaves the pool as it was; a key published already is MKV_E_EXISTS with
 * nothing allocated.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "testutil.h"

/*
 * writev(2) as the library calls it, defined here (as check_persist does
 * msync): while short_writes is set, each call writes at most 7 bytes and
 * every third is interrupted (EINTR), as a slow pipe or socket may do.
 */
static int short_writes;

ssize_t writev(int fd, const struct iovec *iov, int n);

ssize_t
writev(int fd, const struct iovec *iov, int n)
{
	static unsigned calls;
	struct iovec part[2];
	size_t room = 7;
	int k = 0;

	if (!short_writes)
		return syscall(SYS_writev, fd, iov, n);
	if (++calls % 3 == 0) {
		errno = EINTR;
		return -1;
	}
	for (int i = 0; i < n && k < 2 && room; i++) {
		if (!iov[i].iov_len)
			continue;
		part[k] = iov[i];
		part[k].iov_len = iov[i].iov_len < room ? iov[i].iov_len : room;
		room -= part[k++].iov_len;
	}
	return syscall(SYS_writev, fd, part, k);
}

#define SIZES 5
static const size_t sizes[SIZES] = { 1, 4095, 4096, 70000, (1U << 20) + 3 };

static struct mkv_pool *src_pool, *dst_pool;
static char *dst_dir;

static void
frame_setup(void)
{
	tu_setup();
	TU_OK(tu_pool_create(tu_dir, 0, 0, 0, &src_pool));
	dst_dir = tu_tmpdir_new();
	TU_OK(tu_pool_create(dst_dir, 0, 0, 0, &dst_pool));
}

static void
frame_teardown(void)
{
	mkv_pool_close(&src_pool);
	mkv_pool_close(&dst_pool);
	tu_tmpdir_free(&dst_dir);
	tu_teardown();
}

/* The frame of key from pool, malloc'd; its length in *len. */
static uint8_t *
export(struct mkv_pool *pool, const char *key, unsigned tier, size_t *len)
{
	uint8_t *f;
	size_t need;

	ck_assert_int_eq(mkv_export(pool, key, strlen(key), tier, NULL, 0, &need), MKV_E_RANGE);
	f = malloc(need);
	ck_assert_ptr_nonnull(f);
	TU_OK(mkv_export(pool, key, strlen(key), tier, f, need, len));
	ck_assert_uint_eq(*len, need);
	return f;
}

static uint64_t
le(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = bytes; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

static void
put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

/* Sign a frame whose body was changed again, as a producer would: the checksum of its body. */
static void
resign(uint8_t *f)
{
	tu_b3sum16(f + MKV_FRAME_HEADER, le(f + 8, 4), f + 16);
}

/*
 * Every field of a frame of this library at the offset marukv(7) gives,
 * little-endian, its checksum b3sum's of the body.
 */
START_TEST(test_frame_bytes_are_as_specified)
{
	static const char key[] = "frame-layout";
	size_t klen = strlen(key), vlen = 70000, len;
	uint8_t *f, sum[16], *want = malloc(vlen);

	ck_assert_ptr_nonnull(want);
	TU_OK(tu_put(src_pool, key, klen, vlen));
	f = export(src_pool, key, 2, &len);
	ck_assert_uint_eq(len, 32 + 32 + klen + vlen);
	ck_assert_int_eq(memcmp(f, "MRDN", 4), 0);
	ck_assert_uint_eq(f[4], 1);
	ck_assert_uint_eq(f[5] | f[6] | f[7], 0);
	ck_assert_uint_eq(f[8] | f[9] << 8 | f[10] << 16 | (uint32_t)f[11] << 24, 32 + klen + vlen);
	ck_assert_uint_eq(f[12], 2);
	ck_assert_uint_eq(f[13] | f[14] | f[15], 0);
	tu_b3sum16(f + 32, len - 32, sum);
	ck_assert_int_eq(memcmp(f + 16, sum, 16), 0);
	ck_assert_int_eq(memcmp(f + 32, "MKVB", 4), 0);
	ck_assert_uint_eq(le(f + 36, 2), 1);
	ck_assert_uint_eq(le(f + 38, 2), klen);
	ck_assert_uint_eq(le(f + 40, 8), vlen);
	ck_assert_uint_eq(le(f + 48, 8), 0);
	ck_assert_uint_eq(le(f + 56, 8), 0);
	ck_assert_int_eq(memcmp(f + 64, key, klen), 0);
	tu_fill(want, vlen, key, klen);
	ck_assert_int_eq(memcmp(f + 64 + klen, want, vlen), 0);
	free(want);
	free(f);
}
END_TEST

/*
 * Values of many sizes, and a chain of three, exported from one pool and
 * imported into another: every byte equal, and each key's frame from the
 * second pool the same bytes as from the first (its chain link kept).
 */
START_TEST(test_round_trip_keeps_bytes_and_links)
{
	static const char *const chain[3] = { "chain-0", "chain-1", "chain-2" };
	struct mkv_key keys[3];
	struct mkv_buf bufs[3];
	struct mkv_frame fr;
	char key[64];

	for (unsigned i = 0; i < SIZES; i++) {
		size_t klen = tu_key(key, "rt-", i);

		TU_OK(tu_put(src_pool, key, klen, sizes[i]));
	}
	for (unsigned i = 0; i < 3; i++) {
		keys[i] = (struct mkv_key){ chain[i], strlen(chain[i]) };
		TU_OK(mkv_alloc(src_pool, 5000 + i, &bufs[i]));
		tu_fill(bufs[i].data, 5000 + i, chain[i], strlen(chain[i]));
	}
	TU_OK(mkv_publish_chain(src_pool, NULL, 0, keys, bufs, 3));
	for (unsigned i = 0; i < SIZES + 3; i++) {
		size_t len, len2, klen = i < SIZES ? tu_key(key, "rt-", i) :
				(size_t)snprintf(key, sizeof(key), "%s", chain[i - SIZES]);
		size_t vlen = i < SIZES ? sizes[i] : 5000 + (i - SIZES);
		uint8_t *f = export(src_pool, key, i % 3, &len), *g;

		TU_OK(mkv_frame_parse(f, len, &fr));
		ck_assert_uint_eq(fr.frame_len, len);
		ck_assert_uint_eq(fr.klen, klen);
		ck_assert_int_eq(memcmp(fr.key, key, klen), 0);
		ck_assert_uint_eq(fr.vlen, vlen);
		ck_assert_uint_eq(fr.tier, i % 3);
		ck_assert_msg((fr.parent != 0) == (i > SIZES), "%s: parent %llx", key,
				(unsigned long long)fr.parent);
		TU_OK(mkv_import(dst_pool, f, len, &fr));
		ck_assert_int_eq(tu_check(dst_pool, key, klen, vlen), 0);
		g = export(dst_pool, key, i % 3, &len2);
		ck_assert_uint_eq(len2, len);
		ck_assert_msg(memcmp(f, g, len) == 0, "%s: the frames from the two pools differ", key);
		free(f);
		free(g);
	}
}
END_TEST

/* What a refused frame must leave: no key, no page, no entry more. */
static void
assert_unchanged(const struct mkv_stat *before, const char *key)
{
	struct mkv_stat st;

	ck_assert_int_eq(mkv_exists(dst_pool, key, strlen(key)), 0);
	TU_OK(mkv_pool_stat(dst_pool, &st));
	ck_assert_uint_eq(st.entries, before->entries);
	ck_assert_uint_eq(st.pages_used, before->pages_used);
	ck_assert_uint_eq(st.bytes_stored, before->bytes_stored);
}

static void
refused(const uint8_t *f, size_t len, int code, const char *what, const struct mkv_stat *before,
		const char *key)
{
	struct mkv_frame fr;
	int rc = mkv_frame_parse(f, len, &fr);

	ck_assert_msg(rc == code, "%s: mkv_frame_parse = %d (%s), expected %d", what, rc,
			mkv_strerror(rc), code);
	ck_assert_msg(mkv_errormsg()[0], "%s: no message", what);
	rc = mkv_import(dst_pool, f, len, &fr);
	ck_assert_msg(rc == code, "%s: mkv_import = %d (%s), expected %d", what, rc,
			mkv_strerror(rc), code);
	ck_assert_msg(mkv_errormsg()[0], "%s: no message", what);
	assert_unchanged(before, key);
}

/*
 * Every way a frame can be wrong: each has its code and a message, and
 * the frame is refused by the parser and by mkv_import with the pool
 * left as it was.
 */
START_TEST(test_every_wrong_frame_has_its_error)
{
	static const char key[] = "wrong-frames";
	size_t klen = strlen(key), len;
	struct mkv_stat before;
	struct mkv_frame fr;
	uint8_t *f, *g;

	TU_OK(tu_put(src_pool, key, klen, 3000));
	f = export(src_pool, key, 0, &len);
	g = malloc(len + 1);
	ck_assert_ptr_nonnull(g);
	TU_OK(mkv_pool_stat(dst_pool, &before));
#define AGAIN() memcpy(g, f, len)
	/* every truncation */
	for (size_t n = 0; n < len; n += n < 80 ? 1 : 97)
		refused(f, n, MKV_E_FRAME_SHORT, "truncated", &before, key);
	AGAIN(); g[0] = 'm';
	refused(g, len, MKV_E_FRAME_MAGIC, "magic", &before, key);
	AGAIN(); g[1] = 'X';
	refused(g, 2, MKV_E_FRAME_MAGIC, "two bytes of a wrong magic", &before, key);
	AGAIN(); put_le(g + 4, 2, 4);
	refused(g, len, MKV_E_FRAME_VERSION, "version 2", &before, key);
	AGAIN(); put_le(g + 4, 0x100, 4);
	refused(g, len, MKV_E_FRAME_VERSION, "version 256", &before, key);
	AGAIN(); g[14] = 1;
	refused(g, len, MKV_E_FRAME_VERSION, "padding", &before, key);
	AGAIN(); put_le(g + 8, le(g + 8, 4) + 1, 4);
	refused(g, len, MKV_E_FRAME_SHORT, "body_len one more", &before, key);
	AGAIN(); put_le(g + 8, 0xffffffffU, 4);
	refused(g, len, MKV_E_FRAME_SHORT, "body_len 4 GiB", &before, key);
	AGAIN(); put_le(g + 8, le(g + 8, 4) - 1, 4);
	refused(g, len, MKV_E_FRAME_CHECKSUM, "body_len one less", &before, key);
	AGAIN(); g[len - 1] ^= 0x40;
	refused(g, len, MKV_E_FRAME_CHECKSUM, "the value's last byte", &before, key);
	AGAIN(); g[40] ^= 1;
	refused(g, len, MKV_E_FRAME_CHECKSUM, "the value length", &before, key);
	for (unsigned i = 16; i < 32; i++) {
		AGAIN(); g[i] ^= 0x80;
		refused(g, len, MKV_E_FRAME_CHECKSUM, "a byte of the checksum", &before, key);
	}
	/* bodies signed by a producer, but not marukv values */
	AGAIN(); g[32] = 'X'; resign(g);
	refused(g, len, MKV_E_FRAME_BODY, "body magic", &before, key);
	AGAIN(); put_le(g + 36, 2, 2); resign(g);
	refused(g, len, MKV_E_FRAME_BODY, "layout 2", &before, key);
	AGAIN(); put_le(g + 38, 0, 2); resign(g);
	refused(g, len, MKV_E_FRAME_BODY, "key of 0 bytes", &before, key);
	AGAIN(); put_le(g + 38, MKV_KEY_MAX + 1, 2); resign(g);
	refused(g, len, MKV_E_FRAME_BODY, "key over MKV_KEY_MAX", &before, key);
	AGAIN(); put_le(g + 38, klen + 1, 2); resign(g);
	refused(g, len, MKV_E_FRAME_BODY, "key one longer", &before, key);
	AGAIN(); put_le(g + 40, 3001, 8); resign(g);
	refused(g, len, MKV_E_FRAME_BODY, "value one longer", &before, key);
	AGAIN(); put_le(g + 40, 1ULL << 63, 8); resign(g);
	refused(g, len, MKV_E_FRAME_BODY, "value 2^63", &before, key);
	AGAIN(); put_le(g + 56, 1, 8); resign(g);
	refused(g, len, MKV_E_FRAME_BODY, "reserved", &before, key);
	/* a body of its header alone, and one too short for it */
	AGAIN(); put_le(g + 8, 32, 4); put_le(g + 38, 0, 2); put_le(g + 40, 0, 8); resign(g);
	refused(g, 64, MKV_E_FRAME_BODY, "no key, no value", &before, key);
	AGAIN(); put_le(g + 8, 7, 4); resign(g);
	refused(g, 39, MKV_E_FRAME_BODY, "a body of 7 bytes", &before, key);
	/* the tier is a label: any value is a frame */
	AGAIN(); g[12] = 0xff;
	TU_OK(mkv_frame_parse(g, len, &fr));
	ck_assert_uint_eq(fr.tier, 0xff);
	/* bytes after the frame are the next frame's */
	AGAIN(); g[len] = 0;
	TU_OK(mkv_frame_parse(g, len + 1, &fr));
	ck_assert_uint_eq(fr.frame_len, len);
	ck_assert_int_eq(mkv_frame_parse(NULL, 1, &fr), MKV_E_INVAL);
	ck_assert_int_eq(mkv_frame_parse(f, len, NULL), MKV_E_INVAL);
	ck_assert_int_eq(mkv_import(dst_pool, NULL, 1, NULL), MKV_E_INVAL);
	assert_unchanged(&before, key);
#undef AGAIN
	free(g);
	free(f);
}
END_TEST

/*
 * A frame refused for its checksum or body still says how long it is, so
 * a reader of a stream can step over it to the next.
 */
START_TEST(test_a_stream_steps_over_a_bad_frame)
{
	uint8_t *f[3], *s;
	size_t len[3], total = 0, off = 0;
	struct mkv_frame fr;
	char key[64];
	int want[3] = { 0, MKV_E_FRAME_CHECKSUM, 0 };

	for (unsigned i = 0; i < 3; i++) {
		tu_key(key, "st-", i);
		TU_OK(tu_put(src_pool, key, strlen(key), 100 + i));
		f[i] = export(src_pool, key, 0, &len[i]);
		total += len[i];
	}
	s = malloc(total);
	ck_assert_ptr_nonnull(s);
	for (unsigned i = 0; i < 3; i++) {
		memcpy(s + off, f[i], len[i]);
		off += len[i];
	}
	s[len[0] + len[1] - 1] ^= 1;
	off = 0;
	for (unsigned i = 0; i < 3; i++) {
		tu_key(key, "st-", i);
		ck_assert_int_eq(mkv_import(dst_pool, s + off, total - off, &fr), want[i]);
		ck_assert_uint_eq(fr.frame_len, len[i]);
		ck_assert_int_eq(mkv_exists(dst_pool, key, strlen(key)), !want[i]);
		off += fr.frame_len;
		free(f[i]);
	}
	ck_assert_uint_eq(off, total);
	free(s);
}
END_TEST

/* A key published already: MKV_E_EXISTS, the value as it was, no page granted. */
START_TEST(test_existing_key_is_exists_without_allocating)
{
	static const char key[] = "exists";
	struct mkv_stat before, after;
	size_t len;
	uint8_t *f;

	TU_OK(tu_put(src_pool, key, strlen(key), 20000));
	TU_OK(tu_put(dst_pool, key, strlen(key), 20000));
	f = export(src_pool, key, 0, &len);
	f[64 + strlen(key)] ^= 0xff;
	resign(f);
	TU_OK(mkv_pool_stat(dst_pool, &before));
	TU_ERR(mkv_import(dst_pool, f, len, NULL), MKV_E_EXISTS);
	TU_OK(mkv_pool_stat(dst_pool, &after));
	ck_assert_uint_eq(after.pages_used, before.pages_used);
	ck_assert_uint_eq(after.pages_granted, before.pages_granted);
	ck_assert_uint_eq(after.entries, before.entries);
	ck_assert_int_eq(tu_check(dst_pool, key, strlen(key), 20000), 0);
	free(f);
}
END_TEST

/*
 * mkv_export_fd() writes the same bytes as mkv_export(), into a file (also
 * seven bytes a write, some interrupted) and through a pipe drained a
 * little at a time; a bad fd and
 * a pipe with no reader are MKV_E_IO, and the pool keeps working.
 */
START_TEST(test_export_fd_writes_the_same_frame)
{
	static const char key[] = "to-fd";
	size_t vlen = (3U << 20) + 11, len;
	uint64_t wrote;
	uint8_t *f = NULL, *g = malloc(vlen + 1024);
	char path[4200];
	int fd, p[2], rc;
	pid_t pid;

	ck_assert_ptr_nonnull(g);
	TU_OK(tu_put(src_pool, key, strlen(key), vlen));
	f = export(src_pool, key, 1, &len);
	snprintf(path, sizeof(path), "%s/frame", tu_dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	TU_OK(mkv_export_fd(src_pool, key, strlen(key), 1, fd, &wrote));
	ck_assert_uint_eq(wrote, len);
	ck_assert_int_eq(pread(fd, g, vlen + 1024, 0), (ssize_t)len);
	ck_assert_int_eq(memcmp(f, g, len), 0);
	close(fd);

	/* seven bytes a write, some interrupted: the same frame, header and all */
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	TU_OK(tu_put(src_pool, "short", 5, 5000));
	free(f);
	f = export(src_pool, "short", 3, &len);
	short_writes = 1;
	rc = mkv_export_fd(src_pool, "short", 5, 3, fd, &wrote);
	short_writes = 0;
	TU_OK(rc);
	ck_assert_uint_eq(wrote, len);
	ck_assert_int_eq(pread(fd, g, vlen + 1024, 0), (ssize_t)len);
	ck_assert_int_eq(memcmp(f, g, len), 0);
	close(fd);
	free(f);
	f = export(src_pool, key, 1, &len);

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		size_t got = 0;
		ssize_t n;

		close(p[1]);
		while ((n = read(p[0], g + got, got + 4096 <= len ? 4096 : len - got)) > 0)
			got += (size_t)n;
		_exit(got == len && memcmp(f, g, len) == 0 ? 0 : 1);
	}
	close(p[0]);
	TU_OK(mkv_export_fd(src_pool, key, strlen(key), 1, p[1], &wrote));
	ck_assert_uint_eq(wrote, len);
	close(p[1]);
	ck_assert_int_eq(tu_reap(pid, 30), 0);

	TU_ERR(mkv_export_fd(src_pool, key, strlen(key), 1, -1, &wrote), MKV_E_IO);
	ck_assert_uint_eq(wrote, 0);
	ck_assert_int_eq(pipe(p), 0);
	close(p[0]);
	signal(SIGPIPE, SIG_IGN);
	TU_ERR(mkv_export_fd(src_pool, key, strlen(key), 1, p[1], &wrote), MKV_E_IO);
	signal(SIGPIPE, SIG_DFL);
	close(p[1]);
	ck_assert_int_eq(tu_check(src_pool, key, strlen(key), vlen), 0);
	free(f);
	free(g);
}
END_TEST

/* The calls' own errors: a missing key, a tier over 255, a buffer too small, a read-only pool. */
START_TEST(test_export_and_import_errors)
{
	static const char key[] = "errs";
	struct mkv_pool *ro;
	uint8_t small[100];
	size_t len, flen;
	uint8_t *f;

	TU_OK(tu_put(src_pool, key, strlen(key), 5000));
	TU_ERR(mkv_export(src_pool, "none", 4, 0, small, sizeof(small), &len), MKV_E_NOTFOUND);
	ck_assert_uint_eq(len, 0);
	TU_ERR(mkv_export(src_pool, key, strlen(key), 256, small, sizeof(small), &len), MKV_E_INVAL);
	TU_ERR(mkv_export(src_pool, key, strlen(key), 0, NULL, 10, &len), MKV_E_INVAL);
	TU_ERR(mkv_export(src_pool, key, strlen(key), 0, small, sizeof(small), NULL), MKV_E_INVAL);
	memset(small, 0xa5, sizeof(small));
	TU_ERR(mkv_export(src_pool, key, strlen(key), 0, small, sizeof(small), &len), MKV_E_RANGE);
	ck_assert_uint_eq(len, 64 + strlen(key) + 5000);
	for (size_t i = 0; i < sizeof(small); i++)
		ck_assert_uint_eq(small[i], 0xa5);
	TU_ERR(mkv_export_fd(src_pool, key, strlen(key), 300, 1, NULL), MKV_E_INVAL);
	f = export(src_pool, key, 0, &flen);
	TU_OK(tu_pool_open(dst_dir, MKV_RDONLY, &ro));
	TU_ERR(mkv_import(ro, f, flen, NULL), MKV_E_RDONLY);
	TU_ERR(mkv_export(ro, key, strlen(key), 0, NULL, 0, &len), MKV_E_NOTFOUND);
	mkv_pool_close(&ro);
	/* the views export takes are all released: the key can go, and its pages with it */
	TU_OK(mkv_del(src_pool, key, strlen(key)));
	free(f);
}
END_TEST

/*
 * Random damage to a frame, a byte to a few at a time: parsing never
 * reads outside the frame (ASan) nor accepts a changed body; a frame it
 * accepts is the original one or differs only in the tier label.
 */
START_TEST(test_random_damage_is_refused)
{
	static const char key[] = "damage";
	uint64_t seed = 7;
	size_t len;
	uint8_t *f, *g;

	TU_OK(tu_put(src_pool, key, strlen(key), 777));
	f = export(src_pool, key, 0, &len);
	for (unsigned round = 0; round < 3000; round++) {
		size_t n = round % 4 ? len : tu_rand_range(&seed, 1, len);
		struct mkv_frame fr;
		unsigned hits = (unsigned)tu_rand_range(&seed, 1, 4);
		int rc;

		g = malloc(n);
		ck_assert_ptr_nonnull(g);
		memcpy(g, f, n);
		for (unsigned h = 0; h < hits; h++)
			g[tu_rand_range(&seed, 0, n - 1)] ^= (uint8_t)tu_rand_range(&seed, 1, 255);
		rc = mkv_frame_parse(g, n, &fr);
		if (rc == 0) {
			ck_assert_uint_eq(n, len);
			g[12] = f[12];
			ck_assert_msg(memcmp(f, g, n) == 0, "round %u: a changed frame was accepted",
					round);
		} else {
			ck_assert_int_le(rc, MKV_E_FRAME_MAGIC);
			ck_assert_int_ge(rc, MKV_E_FRAME_BODY);
		}
		free(g);
	}
	free(f);
}
END_TEST

static Suite *
frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = tcase_create("mrdn");

	tcase_add_checked_fixture(tc, frame_setup, frame_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_frame_bytes_are_as_specified);
	tcase_add_test(tc, test_round_trip_keeps_bytes_and_links);
	tcase_add_test(tc, test_every_wrong_frame_has_its_error);
	tcase_add_test(tc, test_a_stream_steps_over_a_bad_frame);
	tcase_add_test(tc, test_existing_key_is_exists_without_allocating);
	tcase_add_test(tc, test_export_fd_writes_the_same_frame);
	tcase_add_test(tc, test_export_and_import_errors);
	tcase_add_test(tc, test_random_damage_is_refused);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(frame_suite());
}
