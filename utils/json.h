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

/*
 * Print the object a tool prints with --json when its call on a pool
 * failed, the same for every tool: "command" (if command is not NULL),
 * "path", "error" (the code's static text), "error_code" (the negative
 * code) and "message" (the detailed message), in that order.
 */
void json_error(FILE *f, const char *command, const char *path, const char *error,
		int error_code, const char *message);

#endif
