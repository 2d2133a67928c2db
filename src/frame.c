/* SPDX-License-Identifier: MIT */
/*
 * frame.c -- MRDN v1 transfer frames: a value with its key and its link
 * in a chain, checked by the BLAKE3 hash of the body (marukv(7), FRAMES).
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

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "internal.h"
#include "blake3.h"

#define FRAME_MAGIC "MRDN"
#define FRAME_VERSION 1U
#define BODY_MAGIC "MKVB"
#define BODY_LAYOUT 1U
#define SUM_LEN 16U
/*
 * The value is hashed and copied this much at a time: still in the
 * caches for the copy, and long enough that the few KiB BLAKE3 leaves
 * to its portable code at the end of each update are a small part.
 */
#define STEP (1U << 20)

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
static void
heads_fill(uint8_t *hdr, unsigned tier, const void *key, size_t klen, size_t vlen,
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
 * (remote.c spills frames so).
 */
void
mkv_frame_seal(uint8_t *frame, unsigned tier, const void *key, size_t klen, size_t vlen,
		uint64_t parent)
{
	heads_fill(frame, tier, key, klen, vlen, parent);
	mkv_b3(frame + MKV_FRAME_HEADER, MKV_FRAME_BODY_HEADER + klen + vlen, frame + 16, SUM_LEN);
}

/* Release the view: MKV_E_EXPIRED if its bytes may have changed meanwhile. */
static int
export_end(struct mkv_pool *pool, struct mkv_view *v, int rc)
{
	char msg[512];
	int rrc;

	snprintf(msg, sizeof(msg), "%s", mkv_errormsg());
	rrc = mkv_release(pool, v);
	if (rc)
		return mkv_err(rc, "%s", msg);
	return rrc;
}

/*
 * The view of key and its parent, for a frame of at most cap bytes
 * (*need: its size).  MKV_E_RANGE, no view held, past cap or MRDN v1.
 */
static int
export_begin(struct mkv_pool *pool, const char *who, const void *key, size_t klen,
		unsigned tier, uint64_t cap, struct mkv_view *v, uint64_t *parent, uint64_t *need)
{
	int rc;

	if (tier > UINT8_MAX)
		return mkv_err(MKV_E_INVAL, "%s: tier %u is over 255", who, tier);
	if ((rc = mkv_get_linked(pool, who, key, klen, v, parent)))
		return rc;
	*need = MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + (uint64_t)klen + v->len;
	if (*need - MKV_FRAME_HEADER > MKV_FRAME_BODY_MAX)
		rc = mkv_err(MKV_E_RANGE, "%s: the frame would take %llu bytes, more than MRDN v1 "
				"carries", who, (unsigned long long)*need);
	else if (*need > cap)
		rc = mkv_err(MKV_E_RANGE, "%s: the frame takes %llu bytes, the buffer has %llu", who,
				(unsigned long long)*need, (unsigned long long)cap);
	if (rc)
		export_end(pool, v, rc);
	return rc;
}

MKV_EXPORT int
mkv_export(struct mkv_pool *pool, const void *key, size_t klen, unsigned tier, void *buf,
		size_t cap, size_t *len)
{
	uint8_t *out = buf, *val;
	struct mkv_view v;
	struct mkv_b3 h;
	uint64_t parent, need = 0;
	int rc;

	mkv_err_clear();
	if (!len || (!buf && cap))
		return mkv_err(MKV_E_INVAL, "mkv_export: %s is NULL", len ? "buf" : "len");
	*len = 0;
	rc = export_begin(pool, "mkv_export", key, klen, tier, cap, &v, &parent, &need);
	*len = rc == 0 || rc == MKV_E_RANGE ? (size_t)need : 0;
	if (rc)
		return rc;
	heads_fill(out, tier, key, klen, v.len, parent);
	mkv_b3_init(&h);
	mkv_b3_update(&h, out + MKV_FRAME_HEADER, MKV_FRAME_BODY_HEADER + klen);
	val = out + MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + klen;
	for (size_t off = 0; off < v.len; off += STEP) {
		size_t n = v.len - off < STEP ? v.len - off : STEP;

		mkv_b3_update(&h, (const uint8_t *)v.data + off, n);
		memcpy(val + off, (const uint8_t *)v.data + off, n);
	}
	mkv_b3_final(&h, out + 16, SUM_LEN);
	return export_end(pool, &v, 0);
}

MKV_EXPORT int
mkv_export_fd(struct mkv_pool *pool, const void *key, size_t klen, unsigned tier, int fd,
		uint64_t *len)
{
	uint8_t hdr[MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + MKV_KEY_MAX];
	struct iovec iov[2];
	struct mkv_view v;
	struct mkv_b3 h;
	uint64_t parent, need, done = 0;
	int rc;

	mkv_err_clear();
	if (len)
		*len = 0;
	if ((rc = export_begin(pool, "mkv_export_fd", key, klen, tier, UINT64_MAX, &v, &parent,
			&need)))
		return rc;
	heads_fill(hdr, tier, key, klen, v.len, parent);
	mkv_b3_init(&h);
	mkv_b3_update(&h, hdr + MKV_FRAME_HEADER, MKV_FRAME_BODY_HEADER + klen);
	mkv_b3_update(&h, v.data, v.len);
	mkv_b3_final(&h, hdr + 16, SUM_LEN);
	iov[0] = (struct iovec){ hdr, MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + klen };
	iov[1] = (struct iovec){ (void *)(uintptr_t)v.data, v.len };
	while (done < need) {
		unsigned first = iov[0].iov_len ? 0 : 1;
		ssize_t n = writev(fd, iov + first, 2 - (int)first);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = mkv_err(MKV_E_IO, "mkv_export_fd: write to fd %d after %llu of %llu bytes: %s",
					fd, (unsigned long long)done, (unsigned long long)need,
					n < 0 ? strerror(errno) : "nothing written");
			break;
		}
		done += (uint64_t)n;
		for (unsigned i = first; i < 2 && n > 0; i++) {
			size_t take = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;

			iov[i].iov_base = (uint8_t *)iov[i].iov_base + take;
			iov[i].iov_len -= take;
			n -= (ssize_t)take;
		}
	}
	if (len)
		*len = done;
	return export_end(pool, &v, rc);
}

static int
parse(const char *who, const void *buf, size_t len, struct mkv_frame *f)
{
	const uint8_t *b = buf, *body;
	uint8_t sum[SUM_LEN];
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
	if (memcmp(sum, b + 16, SUM_LEN))
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
	return parse("mkv_frame_parse", buf, len, f);
}

MKV_EXPORT int
mkv_import(struct mkv_pool *pool, const void *buf, size_t len, struct mkv_frame *f)
{
	struct mkv_frame own;
	int rc;

	mkv_err_clear();
	f = f ? f : &own;
	memset(f, 0, sizeof(*f));
	if ((rc = mkv_client_writable(pool, "mkv_import")))
		return rc;
	if (!buf || !len)
		return !buf && len ? mkv_err(MKV_E_INVAL, "mkv_import: buf is NULL") :
				mkv_err(MKV_E_FRAME_SHORT, "mkv_import: no bytes");
	if ((rc = parse("mkv_import", buf, len, f)))
		return rc;
	/* a frame seen before costs no allocation; the holder still refuses a race's */
	if ((rc = mkv_exists(pool, f->key, f->klen)) < 0)
		return rc;
	if (rc)
		return mkv_err(MKV_E_EXISTS, "mkv_import: the key is published already");
	return mkv_put_linked(pool, f->key, f->klen, f->value, f->vlen, f->parent);
}
