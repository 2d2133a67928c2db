/* SPDX-License-Identifier: MIT */
/*
 * options.c -- the subcommands' options: one parser for their tables, the
 * usage made from them, and the values they take (see options.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "options.h"

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

/* parse_u64_list(), and with suffix the items of a list of sizes. */
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

void bad_value(const char *cmd, const char *name, const char *value, uint64_t lo,
		uint64_t hi)
{
	fprintf(stderr, PROG " %s: bad value for --%s: %s (%llu to %llu)\n", cmd, name,
			value, (unsigned long long)lo, (unsigned long long)hi);
}

/* ---- the usage ---------------------------------------------------------------- */

/* Column of an option's help, and the width of the synopsis. */
#define HELP_COL 22
#define WIDTH 80

/* "--NAME ARG", or "--NAME" for a flag, into buf. */
static void opt_words(char *buf, size_t len, const struct opt *o)
{
	snprintf(buf, len, "--%s%s%s", o->name, o->kind == OPT_FLAG ? "" : " ",
			o->kind == OPT_FLAG ? "" : o->arg);
}

/* One word of the synopsis, on a new line if it would run past WIDTH. */
static void synopsis_word(FILE *f, const char *w, int indent, int *col)
{
	int len = (int)strlen(w);

	if (*col + 1 + len >= WIDTH) {
		fprintf(f, "\n%*s", indent, "");
		*col = indent;
	} else {
		fputc(' ', f);
		(*col)++;
	}
	fputs(w, f);
	*col += len;
}

void opt_usage(const struct opt_cmd *cmd, FILE *f)
{
	int col = fprintf(f, "usage: " PROG " %s", cmd->name), indent = col + 1;
	char opt[64], w[sizeof(opt) + 2];

	for (const struct opt *o = cmd->opts; o->name; o++) {
		opt_words(opt, sizeof(opt), o);
		snprintf(w, sizeof(w), "[%s]", opt);
		synopsis_word(f, w, indent, &col);
	}
	if (cmd->more) {
		snprintf(w, sizeof(w), "[%s]", cmd->more_name);
		synopsis_word(f, w, indent, &col);
	}
	fprintf(f, "\n%s", cmd->about);
	for (const struct opt *o = cmd->opts; o->name; o++) {
		const char *h = o->help, *nl;

		opt_words(opt, sizeof(opt), o);
		if ((int)strlen(opt) > HELP_COL - 4)
			fprintf(f, "  %s\n%*s", opt, HELP_COL, "");
		else
			fprintf(f, "  %-*s  ", HELP_COL - 4, opt);
		/* Each line of the help in the column. */
		for (; (nl = strchr(h, '\n')); h = nl + 1)
			fprintf(f, "%.*s\n%*s", (int)(nl - h), h, HELP_COL, "");
		fprintf(f, "%s\n", h);
	}
	if (cmd->more)
		cmd->more_usage(f);
}

/* ---- parsing ------------------------------------------------------------------ */

/* getopt_long's value for entry i of the options: clear of its '?'. */
#define OPT_VAL 256

static size_t opt_count(const struct opt *o)
{
	size_t n = 0;

	while (o && o[n].name)
		n++;
	return n;
}

/*
 * A list's bound as its values may be written: a size with the largest
 * suffix that divides it (1g, 256m), a count as a number.
 */
static void bound_text(char *buf, size_t len, uint64_t v, int size)
{
	for (int i = 3; size && v && i > 0; i--)
		if (v % (1ULL << (10 * i)) == 0) {
			snprintf(buf, len, "%" PRIu64 "%c", v >> (10 * i), "kmg"[i - 1]);
			return;
		}
	snprintf(buf, len, "%" PRIu64, v);
}

/* Take the value of option o of cmd; 0, or -1 (reported). */
static int opt_take(const char *cmd, const struct opt *o, const char *value)
{
	int size = o->kind == OPT_SIZE || o->kind == OPT_SIZE_LIST;
	char lo[32], hi[32];
	uint64_t v;

	switch (o->kind) {
	case OPT_FLAG:
		*(int *)o->target = o->set;
		return 0;
	case OPT_STRING:
		*(const char **)o->target = value;
		return 0;
	case OPT_U64:
	case OPT_SIZE:
		if (parse_u64(value, size, &v) < 0 || v < o->lo || v > o->hi) {
			bad_value(cmd, o->name, value, o->lo, o->hi);
			return -1;
		}
		*(uint64_t *)o->target = v;
		return 0;
	case OPT_U64_LIST:
	case OPT_SIZE_LIST:
		if (parse_list(value, size, o->lo, o->hi, o->target, o->max, o->count) == 0)
			return 0;
		bound_text(lo, sizeof(lo), o->lo, size);
		bound_text(hi, sizeof(hi), o->hi, size);
		fprintf(stderr, PROG " %s: bad value for --%s: %s (up to %zu %s,"
				" each %s to %s)\n", cmd, o->name, value, o->max, o->items,
				lo, hi);
		return -1;
	case OPT_CALL:
		return o->call(o, value);
	}
	return -1;
}

/* Entry i of cmd's options as opt_parse() orders them: NULL for --help. */
static const struct opt *opt_at(const struct opt_cmd *cmd, size_t nown, size_t i)
{
	return i < nown ? &cmd->opts[i] : i > nown ? &cmd->more[i - nown - 1] : NULL;
}

int opt_parse(const struct opt_cmd *cmd, int argc, char **argv)
{
	/* The subcommand's options, --help, then the more options. */
	size_t nown = opt_count(cmd->opts), n = nown + 1 + opt_count(cmd->more);
	struct option *longopts = calloc(n + 1, sizeof(*longopts));
	int c, rc = 0;

	if (!longopts) {
		fprintf(stderr, PROG " %s: out of memory\n", cmd->name);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		const struct opt *o = opt_at(cmd, nown, i);

		longopts[i] = (struct option){ o ? o->name : "help",
			!o || o->kind == OPT_FLAG ? no_argument : required_argument, NULL,
			OPT_VAL + (int)i };
	}
	while (rc == 0 && (c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		const struct opt *o = c < OPT_VAL ? NULL : opt_at(cmd, nown, (size_t)(c - OPT_VAL));

		if (c < OPT_VAL) {
			opt_usage(cmd, stderr);
			rc = -1;
		} else if (!o) {
			opt_usage(cmd, stdout);
			rc = 1;
		} else {
			rc = opt_take(cmd->name, o, optarg);
		}
	}
	free(longopts);
	if (rc == 0 && optind < argc) {
		fprintf(stderr, PROG " %s: unexpected argument: %s\n", cmd->name,
				argv[optind]);
		opt_usage(cmd, stderr);
		rc = -1;
	}
	return rc;
}
