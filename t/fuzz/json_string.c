/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/json_string.c -- libFuzzer target: json_string() on any bytes.
 *
 * The input up to its first NUL byte is the string (json_string takes a C
 * string).  What json_string prints must be one JSON string literal (RFC
 * 8259) in valid UTF-8, and decoding it, each \udcXX escape giving back
 * the byte XX (Python's surrogateescape), must give back the input.  The
 * output is checked by a decoder written apart from the encoder: UTF-8 is
 * judged here by decoding code points (shortest form, no surrogates, at
 * most U+10FFFF), where utils/json.c uses the table of byte ranges.  It
 * also checks that nothing is escaped that need not be: printable ASCII
 * and well-formed UTF-8 pass through.  A failed check aborts, which
 * libFuzzer reports as a crash with the input that caused it.
 */
#include "fuzz_check.h"
#include "json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * The length of the well-formed UTF-8 sequence at s[0..n), or 0: decode
 * the code point, then refuse longer forms than it needs, surrogates and
 * code points above U+10FFFF.
 */
static size_t wf_len(const unsigned char *s, size_t n)
{
	uint32_t cp, min;
	size_t len;

	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2, cp = s[0] & 0x1f, min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3, cp = s[0] & 0x0f, min = 0x800;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4, cp = s[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Decode the JSON string literal out[0..n) into dec (room for n bytes),
 * checking it against the input in[0..len) as it goes; returns the
 * decoded length.
 */
static size_t decode(const unsigned char *out, size_t n, const unsigned char *in, size_t len,
		unsigned char *dec)
{
	size_t i = 1, d = 0;

	CHECK(n >= 2 && out[0] == '"' && out[n - 1] == '"');
	while (i < n - 1) {
		unsigned char c = out[i];

		CHECK(c >= 0x20);            /* no raw control character */
		CHECK(c != '"');             /* only the closing quote, last */
		if (c >= 0x80) {
			size_t w = wf_len(out + i, n - 1 - i);

			CHECK(w > 0);        /* the output is valid UTF-8 */
			memcpy(dec + d, out + i, w);
			d += w;
			i += w;
			continue;
		}
		if (c != '\\') {
			CHECK(c != 0x7f);
			dec[d++] = c;
			i++;
			continue;
		}
		CHECK(i + 1 < n - 1);
		c = out[i + 1];
		i += 2;
		switch (c) {
		case '"':  dec[d++] = '"'; break;
		case '\\': dec[d++] = '\\'; break;
		case 'b':  dec[d++] = '\b'; break;
		case 'f':  dec[d++] = '\f'; break;
		case 'n':  dec[d++] = '\n'; break;
		case 'r':  dec[d++] = '\r'; break;
		case 't':  dec[d++] = '\t'; break;
		case 'u': {
			unsigned u = 0;

			CHECK(i + 4 <= n - 1);
			for (int k = 0; k < 4; k++) {
				int h = hexval(out[i + k]);

				CHECK(h >= 0);
				u = u << 4 | (unsigned)h;
			}
			i += 4;
			if (u >= 0xdc80 && u <= 0xdcff) {
				/* An escaped byte: it must start no well-formed sequence. */
				CHECK(d < len && wf_len(in + d, len - d) == 0);
				dec[d++] = (unsigned char)(u & 0xff);
			} else {
				/* Otherwise only control characters and DEL are escaped. */
				CHECK(u < 0x20 || u == 0x7f);
				dec[d++] = (unsigned char)u;
			}
			break;
		}
		default:
			CHECK(0 && "a valid escape");
		}
	}
	return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = strnlen((const char *)data, size), n = 0;
	unsigned char *in, *dec;
	char *out = NULL;
	FILE *f;

	/* A copy of exactly len + 1 bytes: ASan sees a read past the NUL. */
	in = malloc(len + 1);
	CHECK(in);
	memcpy(in, data, len);
	in[len] = '\0';
	f = open_memstream(&out, &n);
	CHECK(f);
	json_string(f, (const char *)in);
	CHECK(fclose(f) == 0);
	dec = malloc(n ? n : 1);
	CHECK(dec);
	CHECK(decode((const unsigned char *)out, n, in, len, dec) == len);
	CHECK(memcmp(dec, in, len) == 0);
	free(dec);
	free(out);
	free(in);
	return 0;
}
