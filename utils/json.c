/* SPDX-License-Identifier: MIT */
/*
 * json.c -- what the tools share to print JSON.
 *
 * json_string() prints any byte string (a path is bytes, not text) as a
 * JSON string literal that is valid JSON (RFC 8259) and valid UTF-8:
 * well-formed UTF-8 sequences pass through, control characters are
 * escaped, and each byte that does not belong to a well-formed sequence is
 * written as the escape of a lone low surrogate, \udcXX, XX being the byte.
 * That is Python's "surrogateescape" (PEP 383): in Python,
 * json.loads(out).encode("utf-8", "surrogateescape") gives the bytes back.
 * Well-formed UTF-8 never encodes a surrogate, so the mapping is one to one.
 *
 * json_error() prints the object the tools print with --json when a call
 * on the pool failed (marukv-stat(1), marukv-gc(1)).
 */
#include "json.h"

#include <stddef.h>

/*
 * The length of the well-formed UTF-8 sequence that starts at s (the table
 * of well-formed byte sequences, Unicode chapter 3, as in RFC 3629), or 0
 * if none does there: a continuation byte, the lead byte of an overlong
 * form (C0, C1, E0 80..9F, F0 80..8F), of a surrogate (ED A0..BF), of a
 * code point above U+10FFFF (F4 90.., F5..FF), or a truncated sequence.
 * Reads no further than the first byte that does not fit (s ends with NUL).
 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] < 0xc2)
		return 0;
	if (s[0] < 0xe0) {
		n = 2;
	} else if (s[0] < 0xf0) {
		n = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;
		else if (s[0] == 0xed)
			hi = 0x9f;
	} else if (s[0] < 0xf5) {
		n = 4;
		if (s[0] == 0xf0)
			lo = 0x90;
		else if (s[0] == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

void json_string(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		size_t n = utf8_len(p);

		if (n == 0) {
			/* Not UTF-8: the byte as a lone surrogate, U+DC80..U+DCFF. */
			fprintf(f, "\\udc%02x", *p);
			p++;
			continue;
		}
		if (n > 1) {
			fwrite(p, 1, n, f);
			p += n;
			continue;
		}
		switch (*p) {
		case '"':  fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\b': fputs("\\b", f); break;
		case '\f': fputs("\\f", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
		p++;
	}
	fputc('"', f);
}

void json_error(FILE *f, const char *command, const char *path, const char *error,
		int error_code, const char *message)
{
	fputs("{\n", f);
	if (command) {
		fputs("  \"command\": ", f);
		json_string(f, command);
		fputs(",\n", f);
	}
	fputs("  \"path\": ", f);
	json_string(f, path);
	fputs(",\n  \"error\": ", f);
	json_string(f, error);
	fprintf(f, ",\n  \"error_code\": %d,\n  \"message\": ", error_code);
	json_string(f, message);
	fputs("\n}\n", f);
}
