/* SPDX-License-Identifier: MIT */
/*
 * options.c -- the values of the subcommands' options: numbers, sizes and
 * lists of them (see bench.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int parse_u64(const char *s, int suffix, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno)
		return -1;
	if (suffix && *end) {
		unsigned shift;

		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		if (v > (ULLONG_MAX >> shift))
			return -1;
		v <<= shift;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/* parse_u64_list() and parse_size_list(): suffix as for parse_u64(). */
static int parse_list(const char *s, int suffix, uint64_t lo, uint64_t hi, uint64_t *v,
		size_t max, size_t *n)
{
	char buf[256], *tok, *save = NULL;

	if (!s || strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	*n = 0;
	if (!*buf || buf[strlen(buf) - 1] == ',')
		return -1;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*n == max || parse_u64(tok, suffix, &v[*n]) < 0 || v[*n] < lo || v[*n] > hi)
			return -1;
		(*n)++;
	}
	return *n ? 0 : -1;
}

int parse_u64_list(const char *s, uint64_t lo, uint64_t hi, uint64_t *v, size_t max,
		size_t *n)
{
	return parse_list(s, 0, lo, hi, v, max, n);
}

int parse_size_list(const char *s, uint64_t lo, uint64_t hi, uint64_t *v, size_t max,
		size_t *n)
{
	return parse_list(s, 1, lo, hi, v, max, n);
}

void bad_value(const char *cmd, const char *name, const char *value, uint64_t lo,
		uint64_t hi)
{
	fprintf(stderr, PROG " %s: bad value for --%s: %s (%llu to %llu)\n", cmd, name,
			value, (unsigned long long)lo, (unsigned long long)hi);
}
