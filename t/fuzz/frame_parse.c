/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/frame_parse.c -- libFuzzer target: a stream of MRDN v1 frames
 * (frame.c) read by mkv_frame_parse() and imported by mkv_import().
 *
 * The input: [mode][stream].  With mode's low bit set, every frame of the
 * stream whose header is readable is first signed again (its body's
 * BLAKE3 hash written into its header), as a producer would: then the
 * checks past the checksum, the body's layout, are what is fuzzed; else
 * the bytes go in as they are.  The stream is read frame by frame as
 * marukv-load would, stepping over a refused frame when its length is
 * known.  Each result must be 0 or a frame error; an accepted frame must
 * lie inside the stream with a key and a value where its header says;
 * imported into the small pool (fuzz_pool.h), its value must read back
 * byte for byte, and is deleted again to keep room.
 */
#include <string.h>

#include "fuzz_pool.h"
#include "blake3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_pool fp;
static struct mkv_pool *pool;

static uint64_t
le32(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

/* Sign again each frame with a readable header and all its bytes. */
static void
resign(uint8_t *s, size_t n)
{
	for (size_t off = 0; n - off >= MKV_FRAME_HEADER;) {
		uint64_t body = le32(s + off + 8);

		if (memcmp(s + off, "MRDN", 4) || n - off - MKV_FRAME_HEADER < body)
			return;
		mkv_b3(s + off + MKV_FRAME_HEADER, body, s + off + 16, 16);
		off += MKV_FRAME_HEADER + body;
	}
}

static void
imported(const struct mkv_frame *f)
{
	struct mkv_view v;

	FUZZ_CHECK(mkv_get(pool, f->key, f->klen, &v) == 0);
	FUZZ_CHECK(v.len == f->vlen && memcmp(v.data, f->value, v.len) == 0);
	FUZZ_CHECK(mkv_release(pool, &v) == 0);
	FUZZ_CHECK(mkv_del(pool, f->key, f->klen) == 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *s;
	size_t n, off = 0;

	if (!pool) {
		fuzz_pool_init(&fp);
		FUZZ_CHECK(mkv_pool_open(fp.dir, 0, NULL, &pool) == 0);
	}
	if (size == 0)
		return 0;
	n = size - 1;
	s = malloc(n ? n : 1);
	FUZZ_CHECK(s != NULL);
	memcpy(s, data + 1, n);
	if (data[0] & 1)
		resign(s, n);
	while (off < n) {
		struct mkv_frame f, g;
		int rc = mkv_frame_parse(s + off, n - off, &f);

		FUZZ_CHECK(rc == 0 || (rc <= MKV_E_FRAME_MAGIC && rc >= MKV_E_FRAME_BODY));
		FUZZ_CHECK(f.frame_len <= (uint64_t)MKV_FRAME_HEADER + MKV_FRAME_BODY_MAX);
		if (rc == 0) {
			const uint8_t *body = s + off + MKV_FRAME_HEADER;

			FUZZ_CHECK(f.frame_len <= n - off);
			FUZZ_CHECK(f.klen >= 1 && f.klen <= MKV_KEY_MAX && f.vlen >= 1);
			FUZZ_CHECK(f.frame_len == MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER +
					f.klen + f.vlen);
			FUZZ_CHECK((const uint8_t *)f.key == body + MKV_FRAME_BODY_HEADER);
			FUZZ_CHECK((const uint8_t *)f.value == body + MKV_FRAME_BODY_HEADER + f.klen);
			rc = mkv_import(pool, s + off, n - off, &g);
			FUZZ_CHECK(rc == 0 || rc == MKV_E_EXISTS || rc == MKV_E_NOSPC);
			FUZZ_CHECK(g.frame_len == f.frame_len);
			if (rc == 0)
				imported(&f);
		} else {
			FUZZ_CHECK(mkv_import(pool, s + off, n - off, &g) == rc);
		}
		if (!f.frame_len || f.frame_len > n - off)
			break;
		off += f.frame_len;
	}
	free(s);
	return 0;
}
