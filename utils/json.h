/* SPDX-License-Identifier: MIT */
/* json.h -- what the tools share to print JSON. */
#ifndef MKV_UTILS_JSON_H
#define MKV_UTILS_JSON_H

#include <stdio.h>

/* A JSON string literal, RFC 8259 escapes. */
void json_string(FILE *f, const char *s);

#endif
