/* SPDX-License-Identifier: MIT */
/*
 * blake3.c -- BLAKE3's hash mode, from the specification (see blake3.h).
 *
 * The input is cut into chunks of 1 KiB, each compressed block by block
 * (64 bytes) into a chaining value; chaining values are merged pairwise by
 * parent nodes into a binary tree whose left subtrees are complete and as
 * large as possible.  A block is compressed only once more input is known
 * to follow it, so that the last one, and the root node above it, can be
 * flagged ROOT at mkv_b3_final(); complete subtrees are merged as soon as
 * their last chunk is done, which is then never the last of the input.
 */
#include <stdbool.h>
#include <string.h>

#include "blake3.h"

enum {
	CHUNK_START = 1 << 0,
	CHUNK_END = 1 << 1,
	PARENT = 1 << 2,
	ROOT = 1 << 3,
};

static const uint32_t iv[8] = {
	0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
	0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
};

/* The message words each round reads: the permutation applied r times. */
static const uint8_t schedule[7][16] = {
	{ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 },
	{ 2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8 },
	{ 3, 4, 10, 12, 13, 2, 7, 14, 6, 5, 9, 0, 11, 15, 8, 1 },
	{ 10, 7, 12, 9, 14, 3, 13, 15, 4, 0, 11, 2, 5, 8, 1, 6 },
	{ 12, 13, 9, 11, 15, 10, 14, 8, 7, 2, 5, 3, 0, 1, 6, 4 },
	{ 9, 14, 11, 5, 8, 12, 15, 1, 13, 3, 0, 10, 2, 6, 4, 7 },
	{ 11, 15, 5, 0, 1, 9, 8, 6, 14, 10, 2, 12, 3, 4, 7, 13 },
};

static inline uint32_t
rotr(uint32_t w, unsigned c)
{
	return w >> c | w << (32 - c);
}

static inline uint32_t
load32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

#define G(a, b, c, d, x, y) do { \
	s[a] += s[b] + (x); s[d] = rotr(s[d] ^ s[a], 16); \
	s[c] += s[d]; s[b] = rotr(s[b] ^ s[c], 12); \
	s[a] += s[b] + (y); s[d] = rotr(s[d] ^ s[a], 8); \
	s[c] += s[d]; s[b] = rotr(s[b] ^ s[c], 7); \
} while (0)

/* The compression function, its output truncated to a chaining value: cv = f(cv, block). */
static void
compress(uint32_t cv[8], const uint8_t block[MKV_B3_BLOCK], uint64_t counter, unsigned len,
		unsigned flags)
{
	uint32_t m[16], s[16] = {
		cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7],
		iv[0], iv[1], iv[2], iv[3], (uint32_t)counter, (uint32_t)(counter >> 32), len, flags,
	};

	for (unsigned i = 0; i < 16; i++)
		m[i] = load32(block + 4 * i);
#pragma GCC unroll 7
	for (unsigned r = 0; r < 7; r++) {
		const uint8_t *x = schedule[r];

		G(0, 4, 8, 12, m[x[0]], m[x[1]]);
		G(1, 5, 9, 13, m[x[2]], m[x[3]]);
		G(2, 6, 10, 14, m[x[4]], m[x[5]]);
		G(3, 7, 11, 15, m[x[6]], m[x[7]]);
		G(0, 5, 10, 15, m[x[8]], m[x[9]]);
		G(1, 6, 11, 12, m[x[10]], m[x[11]]);
		G(2, 7, 8, 13, m[x[12]], m[x[13]]);
		G(3, 4, 9, 14, m[x[14]], m[x[15]]);
	}
	for (unsigned i = 0; i < 8; i++)
		cv[i] = s[i] ^ s[i + 8];
}

/* A parent node: out = f(iv, left || right). */
static void
parent(const uint32_t left[8], const uint32_t right[8], unsigned flags, uint32_t out[8])
{
	uint8_t block[MKV_B3_BLOCK];

	for (unsigned i = 0; i < 8; i++)
		for (unsigned j = 0; j < 4; j++) {
			block[4 * i + j] = (uint8_t)(left[i] >> 8 * j);
			block[32 + 4 * i + j] = (uint8_t)(right[i] >> 8 * j);
		}
	memcpy(out, iv, sizeof(iv));
	compress(out, block, 0, MKV_B3_BLOCK, PARENT | flags);
}

void
mkv_b3_init(struct mkv_b3 *h)
{
	memcpy(h->cv, iv, sizeof(iv));
	h->chunk = 0;
	h->block_len = 0;
	h->blocks = 0;
	h->depth = 0;
}

/*
 * A full block with more input after it.  The chunk's sixteenth ends it:
 * its chaining value completes as many subtrees as the count of chunks
 * done has trailing zero bits, each merged with the stack's top.
 */
static void
block_done(struct mkv_b3 *h, const uint8_t block[MKV_B3_BLOCK])
{
	bool last = h->blocks == MKV_B3_CHUNK / MKV_B3_BLOCK - 1;
	uint64_t done;

	compress(h->cv, block, h->chunk, MKV_B3_BLOCK,
			(h->blocks == 0 ? CHUNK_START : 0) | (last ? CHUNK_END : 0));
	if (!last) {
		h->blocks++;
		return;
	}
	for (done = ++h->chunk; !(done & 1); done >>= 1)
		parent(h->stack[--h->depth], h->cv, 0, h->cv);
	memcpy(h->stack[h->depth++], h->cv, sizeof(h->cv));
	memcpy(h->cv, iv, sizeof(iv));
	h->blocks = 0;
}

void
mkv_b3_update(struct mkv_b3 *h, const void *in, size_t len)
{
	const uint8_t *b = in;

	while (len) {
		size_t take;

		if (h->block_len == MKV_B3_BLOCK) {
			block_done(h, h->block);
			h->block_len = 0;
		}
		if (h->block_len == 0 && len > MKV_B3_BLOCK) {
			block_done(h, b);
			b += MKV_B3_BLOCK;
			len -= MKV_B3_BLOCK;
			continue;
		}
		take = MKV_B3_BLOCK - h->block_len < len ? MKV_B3_BLOCK - h->block_len : len;
		memcpy(h->block + h->block_len, b, take);
		h->block_len += (unsigned)take;
		b += take;
		len -= take;
	}
}

void
mkv_b3_final(const struct mkv_b3 *h, uint8_t *out, size_t len)
{
	uint8_t block[MKV_B3_BLOCK] = { 0 };
	unsigned flags = (h->blocks == 0 ? CHUNK_START : 0) | CHUNK_END;
	uint32_t cv[8];

	memcpy(block, h->block, h->block_len);
	memcpy(cv, h->cv, sizeof(cv));
	compress(cv, block, h->chunk, h->block_len, flags | (h->depth ? 0 : ROOT));
	for (unsigned i = h->depth; i-- > 0;)
		parent(h->stack[i], cv, i ? 0 : ROOT, cv);
	for (size_t i = 0; i < len && i < MKV_B3_OUT; i++)
		out[i] = (uint8_t)(cv[i / 4] >> 8 * (i % 4));
}

void
mkv_b3(const void *in, size_t len, uint8_t *out, size_t outlen)
{
	struct mkv_b3 h;

	mkv_b3_init(&h);
	mkv_b3_update(&h, in, len);
	mkv_b3_final(&h, out, outlen);
}
