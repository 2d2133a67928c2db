/* SPDX-License-Identifier: MIT */
/*
 * keys.c -- hashes, the random number generator, the keys the subcommands
 * make and the payload patterns their values carry (see bench.h).
 */
#include <string.h>

#include "bench.h"

uint64_t fmix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t load64le(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void store64le(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

void key_make(uint8_t key[BENCH_KEY_LEN], uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t h = fmix64(seed ^ fmix64(a * 0x9e3779b97f4a7c15ULL + b));

	store64le(key, h);
	store64le(key + 8, fmix64(h ^ b ^ 0x6b65792d6d616b65ULL));
}

void chain_hash(const uint8_t prev[BENCH_KEY_LEN], const uint32_t *tok, size_t n,
		uint8_t out[BENCH_KEY_LEN])
{
	uint64_t a = load64le(prev), b = load64le(prev + 8);

	for (size_t j = 0; j < n; j++) {
		a = (a ^ tok[j]) * 0x9e3779b97f4a7c15ULL;
		a ^= a >> 32;
		b = (b + tok[j]) * 0xc2b2ae3d27d4eb4fULL;
		b ^= b >> 29;
	}
	a = fmix64(a ^ (b << 31 | b >> 33) ^ n);
	b = fmix64(b ^ a);
	store64le(out, a);
	store64le(out + 8, b);
}

/* Word j of the payload of a key. */
static uint64_t pattern_word(uint64_t k0, uint64_t k1, uint64_t j)
{
	return fmix64(k0 ^ (j * 0x9e3779b97f4a7c15ULL)) ^ k1;
}

void pattern_fill(void *dst, size_t len, const uint8_t key[BENCH_KEY_LEN])
{
	uint64_t k0 = load64le(key), k1 = load64le(key + 8);
	uint8_t *d = dst;
	size_t j, words = len / 8;

	for (j = 0; j < words; j++) {
		uint64_t w = pattern_word(k0, k1, j);

		memcpy(d + j * 8, &w, 8);
	}
	if (len % 8) {
		uint64_t w = pattern_word(k0, k1, j);

		memcpy(d + j * 8, &w, len % 8);
	}
}

size_t pattern_check(const void *src, size_t len, const uint8_t key[BENCH_KEY_LEN])
{
	uint64_t k0 = load64le(key), k1 = load64le(key + 8);
	const uint8_t *s = src;
	size_t j, words = len / 8;

	for (j = 0; j < words; j++) {
		uint64_t w = pattern_word(k0, k1, j), v;

		memcpy(&v, s + j * 8, 8);
		if (v != w)
			break;
	}
	if (j < words || len % 8) {
		uint64_t w = pattern_word(k0, k1, j);
		const uint8_t *wb = (const uint8_t *)&w;

		for (size_t b = 0; j * 8 + b < len && b < 8; b++)
			if (s[j * 8 + b] != wb[b])
				return j * 8 + b;
	}
	return len;
}
