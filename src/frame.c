/* SPDX-License-Identifier: MIT */
/*
 * frame.c -- the MRDN v1 frame format: a value with its key and its link
 * in a chain, checked by the BLAKE3 hash of the body (marukv(7), FRAMES);
 * made and read here, exported and imported by transfer.c.
 *
 * The header, 32 bytes, its integers little-endian:
 *   0   "MRDN"
 *   4   u32 version, 1
 *   8   u32 body_len
 *   12  u8 tier, then 3 bytes of 0
 *   16  the first 16 bytes of the body's BLAKE3 hash
 * marukv's body, body_len bytes, its integers little-endian:
 *   0   "MKVB"
 *   4   u16 layout, 1
 *   6   u16 key length, 1 to MKV_KEY_MAX
 *   8   u64 value length, at least 1
 *   16  u64 the parent's key hash (the registry's link of a chain), 0: none
 *   24  u64 0 (reserved)
 *   32  the key, then the value: body_len = 32 + key length + value length
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include "blake3.h"

#define FRAME_MAGIC "MRDN"
#define FRAME_VERSION 1U
#define BODY_MAGIC "MKVB"
#define BODY_LAYOUT 1U

static void
put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> 8 * i);
}

static uint64_t
get_le(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = bytes; i-- > 0;)
		v = v << 8 | p[i];
	return v;
}

/* The header and body header, and the key after them: hdr holds 64 + klen bytes. */
void
mkv_frame_heads(uint8_t *hdr, unsigned tier, const void *key, size_t klen, size_t vlen,
		uint64_t parent)
{
	uint8_t *body = hdr + MKV_FRAME_HEADER;

	memset(hdr, 0, MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER);
	memcpy(hdr, FRAME_MAGIC, 4);
	put_le(hdr + 4, FRAME_VERSION, 4);
	put_le(hdr + 8, MKV_FRAME_BODY_HEADER + klen + vlen, 4);
	hdr[12] = (uint8_t)tier;
	memcpy(body, BODY_MAGIC, 4);
	put_le(body + 4, BODY_LAYOUT, 2);
	put_le(body + 6, klen, 2);
	put_le(body + 8, vlen, 8);
	put_le(body + 16, parent, 8);
	memcpy(body + MKV_FRAME_BODY_HEADER, key, klen);
}

/*
 * Make the frame of a value already in place at frame + MKV_FRAME_HEADER +
 * MKV_FRAME_BODY_HEADER + klen: its heads, its key, its checksum
 * (spill.c spills frames so).
 */
void
mkv_frame_seal(uint8_t *frame, unsigned tier, const void *key, size_t klen, size_t vlen,
		uint64_t parent)
{
	mkv_frame_heads(frame, tier, key, klen, vlen, parent);
	mkv_b3(frame + MKV_FRAME_HEADER, MKV_FRAME_BODY_HEADER + klen + vlen, frame + 16, MKV_FRAME_SUM);
}

/* Check the frame in buf and fill f from it; who names the caller in the message. */
int
mkv_frame_read(const char *who, const void *buf, size_t len, struct mkv_frame *f)
{
	const uint8_t *b = buf, *body;
	uint8_t sum[MKV_FRAME_SUM];
	uint64_t body_len, klen, vlen;

	memset(f, 0, sizeof(*f));
	if (memcmp(b, FRAME_MAGIC, len < 4 ? len : 4))
		return mkv_err(MKV_E_FRAME_MAGIC, "%s: not an MRDN frame (magic %02x %02x %02x %02x)",
				who, b[0], len > 1 ? b[1] : 0, len > 2 ? b[2] : 0, len > 3 ? b[3] : 0);
	if (len < MKV_FRAME_HEADER)
		return mkv_err(MKV_E_FRAME_SHORT, "%s: %zu bytes, less than an MRDN header", who, len);
	if (get_le(b + 4, 4) != FRAME_VERSION || b[13] || b[14] || b[15])
		return mkv_err(MKV_E_FRAME_VERSION, "%s: MRDN version %llu, padding %02x %02x %02x: "
				"this library reads version 1, padding 0", who,
				(unsigned long long)get_le(b + 4, 4), b[13], b[14], b[15]);
	body_len = get_le(b + 8, 4);
	f->frame_len = MKV_FRAME_HEADER + body_len;
	f->tier = b[12];
	if (len - MKV_FRAME_HEADER < body_len)
		return mkv_err(MKV_E_FRAME_SHORT, "%s: body of %llu bytes, %zu there", who,
				(unsigned long long)body_len, len - MKV_FRAME_HEADER);
	body = b + MKV_FRAME_HEADER;
	mkv_b3(body, body_len, sum, sizeof(sum));
	if (memcmp(sum, b + 16, MKV_FRAME_SUM))
		return mkv_err(MKV_E_FRAME_CHECKSUM, "%s: the body of %llu bytes does not match its "
				"checksum", who, (unsigned long long)body_len);
	if (body_len < MKV_FRAME_BODY_HEADER || memcmp(body, BODY_MAGIC, 4))
		return mkv_err(MKV_E_FRAME_BODY, "%s: the body is not a marukv value's "
				"(%llu bytes, no \"MKVB\")", who, (unsigned long long)body_len);
	klen = get_le(body + 6, 2);
	vlen = get_le(body + 8, 8);
	if (get_le(body + 4, 2) != BODY_LAYOUT || get_le(body + 24, 8) || klen == 0 ||
	    klen > MKV_KEY_MAX || klen > body_len - MKV_FRAME_BODY_HEADER || vlen == 0 ||
	    vlen != body_len - MKV_FRAME_BODY_HEADER - klen)
		return mkv_err(MKV_E_FRAME_BODY, "%s: the body's layout %llu, key of %llu bytes, "
				"value of %llu bytes, reserved %llu do not make a body of %llu bytes",
				who, (unsigned long long)get_le(body + 4, 2), (unsigned long long)klen,
				(unsigned long long)vlen, (unsigned long long)get_le(body + 24, 8),
				(unsigned long long)body_len);
	f->key = body + MKV_FRAME_BODY_HEADER;
	f->klen = (size_t)klen;
	f->value = body + MKV_FRAME_BODY_HEADER + klen;
	f->vlen = (size_t)vlen;
	f->parent = get_le(body + 16, 8);
	return 0;
}

MKV_EXPORT int
mkv_frame_parse(const void *buf, size_t len, struct mkv_frame *f)
{
	mkv_err_clear();
	if (!f || (!buf && len))
		return mkv_err(MKV_E_INVAL, "mkv_frame_parse: %s is NULL", f ? "buf" : "f");
	if (!len) {
		memset(f, 0, sizeof(*f));
		return mkv_err(MKV_E_FRAME_SHORT, "mkv_frame_parse: no bytes");
	}
	return mkv_frame_read("mkv_frame_parse", buf, len, f);
}
