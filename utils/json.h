/* SPDX-License-Identifier: MIT */
/* json.h -- what the tools share to print JSON. */
#ifndef MKV_UTILS_JSON_H
#define MKV_UTILS_JSON_H

#include <stdio.h>

/*
 * Print the NUL-terminated byte string s as a JSON string literal (RFC
 * 8259) that is valid UTF-8 whatever the bytes: well-formed UTF-8 as is,
 * '"', '\\' and control characters (and DEL) escaped, and each byte of an
 * ill-formed sequence as \udcXX (Python's surrogateescape), so that the
 * original bytes can be recovered.
 */
void json_string(FILE *f, const char *s);

#endif
