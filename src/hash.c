/* SPDX-License-Identifier: MIT */
/*
 * hash.c -- the library's hashes: FNV-1a for names (a node's id, the boot
 * id), XXH3 for keys (a chain's link to its parent) and for values'
 * checksums.  Their results are stored in the pool: none of them may
 * change.
 */
#include "config.h"

#include <string.h>

#define XXH_STATIC_LINKING_ONLY  /* XXH3_state_t */
#include <xxhash.h>
#ifdef HAVE_XXH3_64BITS_DISPATCH
/* XXH3's calls replaced by those that pick the vector code at run time */
#include <xxh_x86dispatch.h>
#endif

#include "internal.h"

uint64_t
mkv_hash_fnv1a(const void *buf, size_t len)
{
	const uint8_t *b = buf;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* A value's checksum (XXH3, 64 bits); never 0, which means "none". */
uint64_t
mkv_hash_checksum(const void *buf, size_t len)
{
	return XXH3_64bits(buf, len) | 1;
}

/*
 * memcpy(dst, src, len) and mkv_hash_checksum(src, len) at once, reading
 * the source once: each chunk is hashed, then copied from the cache while
 * it is still there, with stores that bypass the cache (the bytes written
 * are not read back).  A caller that changes its source while this copies
 * it gets a checksum that may not match the bytes written: a reader that
 * verifies refuses the value (marukv(7), INTEGRITY).
 */
uint64_t
mkv_hash_copy(void *dst, const void *src, size_t len)
{
	XXH3_state_t st;
	uint8_t *d = dst;
	const uint8_t *s = src;

	XXH3_64bits_reset(&st);
	for (size_t off = 0, n; off < len; off += n) {
		n = len - off < MKV_HASH_CHUNK ? len - off : MKV_HASH_CHUNK;
		XXH3_64bits_update(&st, s + off, n);
		mkv_persist_copy(d + off, s + off, n);
	}
	mkv_persist_copy_done();
	return XXH3_64bits_digest(&st) | 1;
}

/* What an entry records of its parent key (a chain's link); never 0, "no parent". */
uint64_t
mkv_hash_key(const void *key, size_t klen)
{
	return XXH3_64bits_withSeed(key, klen, 0x6b6964) | 1;
}

/* The checksum that closes super's header. */
uint64_t
mkv_hash_super(const struct mkv_super *sb)
{
	return mkv_hash_fnv1a(sb, offsetof(struct mkv_super, csum));
}
