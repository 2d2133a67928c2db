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
 * With AVX2, sixteen whole chunks are hashed at a time, eight to a vector
 * (one chunk per 32-bit lane), when they start on a multiple of sixteen,
 * else eight, each merged on its own.
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
 * A subtree of n (a power of 2) chunks done, its chaining value cv, more
 * input after it, the chunks before it a multiple of n: it completes as
 * many subtrees as the count of its size done has trailing zero bits,
 * each merged with the stack's top.
 */
static void
subtree_done(struct mkv_b3 *h, const uint32_t cv[8], uint64_t n)
{
	uint32_t merged[8];
	uint64_t done;

	memcpy(merged, cv, sizeof(merged));
	h->chunk += n;
	for (done = h->chunk / n; !(done & 1); done >>= 1)
		parent(h->stack[--h->depth], merged, 0, merged);
	memcpy(h->stack[h->depth++], merged, sizeof(merged));
}

/* A full block with more input after it; the chunk's sixteenth ends it. */
static void
block_done(struct mkv_b3 *h, const uint8_t block[MKV_B3_BLOCK])
{
	bool last = h->blocks == MKV_B3_CHUNK / MKV_B3_BLOCK - 1;

	compress(h->cv, block, h->chunk, MKV_B3_BLOCK,
			(h->blocks == 0 ? CHUNK_START : 0) | (last ? CHUNK_END : 0));
	if (!last) {
		h->blocks++;
		return;
	}
	subtree_done(h, h->cv, 1);
	memcpy(h->cv, iv, sizeof(iv));
	h->blocks = 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define LANES 8U
#define AVX2 __attribute__((target("avx2")))

AVX2 __attribute__((always_inline)) static inline __m256i
rot(__m256i w, int c)
{
	const __m256i r16 = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
			2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
	const __m256i r8 = _mm256_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12,
			1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12);

	if (c == 16)
		return _mm256_shuffle_epi8(w, r16);
	if (c == 8)
		return _mm256_shuffle_epi8(w, r8);
	return _mm256_or_si256(_mm256_srli_epi32(w, c), _mm256_slli_epi32(w, 32 - c));
}

#define G8(a, b, c, d, x, y) do { \
	v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), (x)); \
	v[d] = rot(_mm256_xor_si256(v[d], v[a]), 16); \
	v[c] = _mm256_add_epi32(v[c], v[d]); \
	v[b] = rot(_mm256_xor_si256(v[b], v[c]), 12); \
	v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), (y)); \
	v[d] = rot(_mm256_xor_si256(v[d], v[a]), 8); \
	v[c] = _mm256_add_epi32(v[c], v[d]); \
	v[b] = rot(_mm256_xor_si256(v[b], v[c]), 7); \
} while (0)

/* Rows r[0..7] of 32-bit words become its columns: r[i] word j <-> r[j] word i. */
AVX2 __attribute__((always_inline)) static inline void
transpose(__m256i r[8])
{
	__m256i a[8], b[8];

#pragma GCC unroll 8
	for (unsigned i = 0; i < 8; i += 2) {
		a[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
		a[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
	}
#pragma GCC unroll 8
	for (unsigned i = 0; i < 8; i += 4) {
		b[i] = _mm256_unpacklo_epi64(a[i], a[i + 2]);
		b[i + 1] = _mm256_unpackhi_epi64(a[i], a[i + 2]);
		b[i + 2] = _mm256_unpacklo_epi64(a[i + 1], a[i + 3]);
		b[i + 3] = _mm256_unpackhi_epi64(a[i + 1], a[i + 3]);
	}
#pragma GCC unroll 8
	for (unsigned i = 0; i < 4; i++) {
		r[i] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x20);
		r[i + 4] = _mm256_permute2x128_si256(b[i], b[i + 4], 0x31);
	}
}

/*
 * Eight inputs at once, one to a lane of the vectors, each of blocks
 * blocks from in[lane], into their chaining values out[lane]: whole
 * chunks (counter the first's index, the lanes' following it, step 1) or
 * parent nodes (blocks 1, counter 0, step 0, flags PARENT).  flags go
 * with every block, CHUNK_START with a chunk's first and CHUNK_END with
 * its last when chunks.
 */
AVX2 __attribute__((always_inline)) static inline void
hash8(const uint8_t *const in[LANES], unsigned blocks, uint64_t counter, int step,
		unsigned flags, bool chunks, uint32_t out[LANES][8])
{
	__m256i cv[8], m[16], v[16], lo, hi, carry;
	const __m256i lane = _mm256_setr_epi32(0, step, 2 * step, 3 * step, 4 * step, 5 * step,
			6 * step, 7 * step);

	lo = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)counter), lane);
	/* a lane whose low word wrapped carries into its high word */
	carry = _mm256_cmpgt_epi32(_mm256_xor_si256(_mm256_set1_epi32((int)(uint32_t)counter),
			_mm256_set1_epi32(INT32_MIN)), _mm256_xor_si256(lo, _mm256_set1_epi32(INT32_MIN)));
	hi = _mm256_sub_epi32(_mm256_set1_epi32((int)(uint32_t)(counter >> 32)), carry);
#pragma GCC unroll 8
	for (unsigned i = 0; i < 8; i++)
		cv[i] = _mm256_set1_epi32((int)iv[i]);
	for (unsigned blk = 0; blk < blocks; blk++) {
		unsigned f = flags | (chunks && blk == 0 ? CHUNK_START : 0) |
				(chunks && blk == blocks - 1 ? CHUNK_END : 0);

#pragma GCC unroll 8
		for (unsigned half = 0; half < 2; half++) {
#pragma GCC unroll 8
			for (unsigned l = 0; l < LANES; l++)
				m[8 * half + l] = _mm256_loadu_si256((const __m256i *)(const void *)
						(in[l] + blk * MKV_B3_BLOCK + 32 * half));
			transpose(m + 8 * half);
		}
#pragma GCC unroll 8
		for (unsigned i = 0; i < 8; i++)
			v[i] = cv[i];
#pragma GCC unroll 8
		for (unsigned i = 0; i < 4; i++)
			v[8 + i] = _mm256_set1_epi32((int)iv[i]);
		v[12] = lo;
		v[13] = hi;
		v[14] = _mm256_set1_epi32(MKV_B3_BLOCK);
		v[15] = _mm256_set1_epi32((int)f);
#pragma GCC unroll 7
		for (unsigned r = 0; r < 7; r++) {
			const uint8_t *x = schedule[r];

			G8(0, 4, 8, 12, m[x[0]], m[x[1]]);
			G8(1, 5, 9, 13, m[x[2]], m[x[3]]);
			G8(2, 6, 10, 14, m[x[4]], m[x[5]]);
			G8(3, 7, 11, 15, m[x[6]], m[x[7]]);
			G8(0, 5, 10, 15, m[x[8]], m[x[9]]);
			G8(1, 6, 11, 12, m[x[10]], m[x[11]]);
			G8(2, 7, 8, 13, m[x[12]], m[x[13]]);
			G8(3, 4, 9, 14, m[x[14]], m[x[15]]);
		}
#pragma GCC unroll 8
		for (unsigned i = 0; i < 8; i++)
			cv[i] = _mm256_xor_si256(v[i], v[i + 8]);
	}
	transpose(cv);
#pragma GCC unroll 8
	for (unsigned l = 0; l < LANES; l++)
		_mm256_storeu_si256((__m256i *)(void *)out[l], cv[l]);
}

/* Eight whole chunks at in, the first of index counter, into their chaining values. */
AVX2 static void
chunks8(const uint8_t *in, uint64_t counter, uint32_t out[LANES][8])
{
	const uint8_t *ptr[LANES];

	for (unsigned l = 0; l < LANES; l++)
		ptr[l] = in + l * MKV_B3_CHUNK;
	hash8(ptr, MKV_B3_CHUNK / MKV_B3_BLOCK, counter, 1, 0, true, out);
}

/*
 * Sixteen whole chunks at in, the first of index counter, into the
 * chaining value of the subtree they make: the chunks and the parents of
 * the two lowest levels eight at a time, the three above one at a time.
 * A chaining value array is a parent's message as it lies in memory
 * (x86-64 is little-endian): left and right side by side.
 */
AVX2 static void
subtree16(const uint8_t *in, uint64_t counter, uint32_t out[8])
{
	uint32_t cv[2 * LANES][8], p[LANES][8], q[LANES][8], r[2][8];
	const uint8_t *ptr[LANES];

	chunks8(in, counter, cv);
	chunks8(in + LANES * MKV_B3_CHUNK, counter + LANES, cv + LANES);
	for (unsigned l = 0; l < LANES; l++)
		ptr[l] = (const uint8_t *)cv[2 * l];
	hash8(ptr, 1, 0, 0, PARENT, false, p);
	/* four parents above those: the other lanes hash them again, unused */
	for (unsigned l = 0; l < LANES; l++)
		ptr[l] = (const uint8_t *)p[2 * (l % 4)];
	hash8(ptr, 1, 0, 0, PARENT, false, q);
	parent(q[0], q[1], 0, r[0]);
	parent(q[2], q[3], 0, r[1]);
	parent(r[0], r[1], 0, out);
}

/* Whether this CPU runs hash8(): once, then kept. */
static bool
have_avx2(void)
{
	static int avx2 = -1;
	int a = __atomic_load_n(&avx2, __ATOMIC_RELAXED);

	if (a < 0) {
		__builtin_cpu_init();
		a = __builtin_cpu_supports("avx2") ? 1 : 0;
		__atomic_store_n(&avx2, a, __ATOMIC_RELAXED);
	}
	return a;
}
#else
#define LANES 1U
static bool
have_avx2(void)
{
	return false;
}

static void
chunks8(const uint8_t *in, uint64_t counter, uint32_t out[LANES][8])
{
	(void)in;
	(void)counter;
	(void)out;
}

static void
subtree16(const uint8_t *in, uint64_t counter, uint32_t out[8])
{
	(void)in;
	(void)counter;
	(void)out;
}
#endif

bool mkv_b3_simd = true;

void
mkv_b3_update(struct mkv_b3 *h, const void *in, size_t len)
{
	const uint8_t *b = in;

	while (len) {
		size_t take;

		/* sixteen whole chunks at a time, while more input follows them */
		if (h->block_len == 0 && h->blocks == 0 && h->chunk % 16 == 0 &&
		    len > 16 * MKV_B3_CHUNK && mkv_b3_simd && have_avx2()) {
			uint32_t cv[8];

			subtree16(b, h->chunk, cv);
			subtree_done(h, cv, 16);
			b += 16 * MKV_B3_CHUNK;
			len -= 16 * MKV_B3_CHUNK;
			continue;
		}
		/* else eight, on the way to a multiple of sixteen */
		if (h->block_len == 0 && h->blocks == 0 && len > LANES * MKV_B3_CHUNK &&
		    mkv_b3_simd && have_avx2()) {
			uint32_t cvs[LANES][8];

			chunks8(b, h->chunk, cvs);
			for (unsigned l = 0; l < LANES; l++)
				subtree_done(h, cvs[l], 1);
			b += LANES * MKV_B3_CHUNK;
			len -= LANES * MKV_B3_CHUNK;
			continue;
		}
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
