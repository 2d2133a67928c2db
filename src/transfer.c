/* SPDX-License-Identifier: MIT */
/*
 * transfer.c -- values out of a pool and into one as MRDN v1 frames
 * (frame.c): mkv_export() and mkv_export_fd() from a view, hashing and
 * copying the value in steps; mkv_import() through a put.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "internal.h"
#include "blake3.h"

/*
 * The value is hashed and copied this much at a time: still in the
 * caches for the copy, and long enough that the few KiB BLAKE3 leaves
 * to its portable code at the end of each update are a small part.
 */
#define STEP (1U << 20)

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
	mkv_frame_heads(out, tier, key, klen, v.len, parent);
	mkv_b3_init(&h);
	mkv_b3_update(&h, out + MKV_FRAME_HEADER, MKV_FRAME_BODY_HEADER + klen);
	val = out + MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + klen;
	for (size_t off = 0; off < v.len; off += STEP) {
		size_t n = v.len - off < STEP ? v.len - off : STEP;

		mkv_b3_update(&h, (const uint8_t *)v.data + off, n);
		memcpy(val + off, (const uint8_t *)v.data + off, n);
	}
	mkv_b3_final(&h, out + 16, MKV_FRAME_SUM);
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
	mkv_frame_heads(hdr, tier, key, klen, v.len, parent);
	mkv_b3_init(&h);
	mkv_b3_update(&h, hdr + MKV_FRAME_HEADER, MKV_FRAME_BODY_HEADER + klen);
	mkv_b3_update(&h, v.data, v.len);
	mkv_b3_final(&h, hdr + 16, MKV_FRAME_SUM);
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
	if ((rc = mkv_frame_read("mkv_import", buf, len, f)))
		return rc;
	/* a frame seen before costs no allocation; the holder still refuses a race's */
	if ((rc = mkv_exists(pool, f->key, f->klen)) < 0)
		return rc;
	if (rc)
		return mkv_err(MKV_E_EXISTS, "mkv_import: the key is published already");
	return mkv_put_linked(pool, f->key, f->klen, f->value, f->vlen, f->parent);
}
