/* SPDX-License-Identifier: MIT */
/*
 * blake3.h -- BLAKE3's hash mode (no key, no key derivation), written
 * from the specification (Aumasson, Neves, O'Connor, Wilcox-O'Hearn,
 * "BLAKE3: one function, fast everywhere", 2020): the checksum of an
 * MRDN v1 transfer frame is its body's BLAKE3 hash truncated to 16 bytes.
 *
 * Portable C, one chunk at a time, and eight chunks at a time with AVX2
 * where the CPU has it (chosen at run time).  Outputs of up to MKV_B3_OUT bytes,
 * the first bytes of BLAKE3's extendable output: a 16-byte digest is the
 * first 16 bytes of the 32-byte one, as b3sum --length 16 prints it.
 */
#ifndef MKV_BLAKE3_H
#define MKV_BLAKE3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MKV_B3_OUT 32U
#define MKV_B3_BLOCK 64U
#define MKV_B3_CHUNK 1024U
/* 2^54 chunks of 1 KiB: the tree of any input a size_t can count */
#define MKV_B3_DEPTH 54U

struct mkv_b3 {
	uint32_t cv[8];                /* the chunk's chaining value so far */
	uint64_t chunk;                /* its index in the input */
	uint8_t block[MKV_B3_BLOCK];   /* bytes of its next block */
	unsigned block_len;
	unsigned blocks;               /* blocks of the chunk compressed */
	unsigned depth;
	uint32_t stack[MKV_B3_DEPTH][8]; /* chaining values of complete subtrees */
};

/* AVX2 where the CPU has it; the tests turn it off to run the portable code. */
extern bool mkv_b3_simd;

void mkv_b3_init(struct mkv_b3 *h);
void mkv_b3_update(struct mkv_b3 *h, const void *in, size_t len);
/* The first len (at most MKV_B3_OUT) bytes of the hash of what was added. */
void mkv_b3_final(const struct mkv_b3 *h, uint8_t *out, size_t len);
/* mkv_b3_init, mkv_b3_update and mkv_b3_final of one buffer. */
void mkv_b3(const void *in, size_t len, uint8_t *out, size_t outlen);

#endif
