/* SPDX-License-Identifier: MIT */
/*
 * options.h -- a subcommand's options, described by a table.
 *
 * A subcommand lists its options in a table of struct opt: the name, the
 * kind of value, where the value goes, its range and its help.
 * opt_parse() reads the command line against the table and checks every
 * value the same way, whatever the subcommand; the usage --help prints is
 * made from the same table.  It uses getopt_long, so an unknown option or
 * a missing value is reported in getopt's words, and an option may be
 * abbreviated while it is not ambiguous.  --help is every subcommand's
 * without being listed; the options that several subcommands share are
 * defined once below (OPT_SEED...), each subcommand saying in its help
 * what the value does there.
 */
#ifndef MARUKV_BENCH_OPTIONS_H
#define MARUKV_BENCH_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum opt_kind {
	OPT_FLAG,        /* no value: the int at target takes .set */
	OPT_STRING,      /* the value as given, a const char * */
	OPT_U64,         /* a uint64_t from .lo to .hi */
	OPT_SIZE,        /* the same, with an optional suffix (see parse_u64()) */
	OPT_U64_LIST,    /* 1 to .max comma-separated uint64_t, each .lo to .hi */
	OPT_SIZE_LIST,   /* the same, each with an optional suffix */
	OPT_CALL,        /* .call() takes the value, or says on stderr why not */
};

struct opt {
	const char *name;         /* --NAME; NULL ends a table */
	enum opt_kind kind;
	void *target;             /* where the value goes: by kind, an int, a
	                             const char *, a uint64_t or an array of them */
	const char *arg;          /* the value in the usage: N, BYTES, LIST... */
	const char *help;         /* one or more lines */
	uint64_t lo, hi;          /* a number's range, or each list item's */
	int set;                  /* OPT_FLAG: the value the int takes */
	size_t max;               /* a list: most items */
	size_t *count;            /* a list: how many were given */
	const char *items;        /* a list: what its items are, for a bad value */
	int (*call)(const struct opt *opt, const char *value);  /* OPT_CALL: 0 or -1 */
};

/* A subcommand's command line. */
struct opt_cmd {
	const char *name;
	const char *about;        /* what it does, lines ended by '\n' */
	const struct opt *opts;
	/*
	 * Options shown in the synopsis as the one word more_name and
	 * described by more_usage(), after the others; NULL if none.
	 */
	const struct opt *more;
	const char *more_name;
	void (*more_usage)(FILE *f);
};

/* ---- the options several subcommands share ------------------------------------ */

#define OPT_SEED(p, h) \
	{ "seed", OPT_U64, (p), .arg = "S", .lo = 0, .hi = UINT64_MAX, .help = (h) }
#define OPT_DIR(p, h) { "dir", OPT_STRING, (p), .arg = "DIR", .help = (h) }
#define OPT_REPEAT(p, h) \
	{ "repeat", OPT_U64, (p), .arg = "R", .lo = 1, .hi = 1000, .help = (h) }
#define OPT_NO_REDIS(p) \
	{ "no-redis", OPT_FLAG, (p), .set = 0, .help = "leave the Redis peer out" }
#define OPT_JSON(p) \
	{ "json", OPT_FLAG, (p), .set = 1, .help = "print the results as one JSON object" }
/*
 * The last options of getsize, lookup and put, which measure marukv and
 * Redis on the same keys in one run: o points to their options, which
 * name these fields alike.
 */
#define OPT_REDIS_RUN(o) \
	OPT_REPEAT(&(o)->repeat, "runs; medians are reported (default 5)"), \
	OPT_NO_REDIS(&(o)->redis), \
	OPT_DIR(&(o)->dir, "where the scratch files go (default /dev/shm)"), \
	OPT_SEED(&(o)->seed, "seed of the keys (default 1)"), \
	OPT_JSON(&(o)->json)
#define OPT_END { .name = NULL }

/*
 * Parse argv (argv[0] is the subcommand) into the targets of cmd's
 * tables, in order.  0: run; 1: --help, the usage printed on stdout;
 * -1: a bad option or value or an unexpected argument, said on stderr
 * (the usage follows, but not after a bad value).
 */
int opt_parse(const struct opt_cmd *cmd, int argc, char **argv);
/* The usage: the synopsis, what the subcommand does, its options. */
void opt_usage(const struct opt_cmd *cmd, FILE *f);

/* ---- values ------------------------------------------------------------------- */

/*
 * Unsigned integer with an optional binary suffix (k, m, g, with or
 * without "iB") when suffix is nonzero.  0 or -1.
 */
int parse_u64(const char *s, int suffix, uint64_t *out);
/*
 * A comma-separated list of 1 to max integers, each from lo to hi.
 * 0 or -1.
 */
int parse_u64_list(const char *s, uint64_t lo, uint64_t hi, uint64_t *v, size_t max,
		size_t *n);
/* "PROG CMD: bad value for --NAME: VALUE (LO to HI)" on stderr. */
void bad_value(const char *cmd, const char *name, const char *value, uint64_t lo,
		uint64_t hi);

#endif /* MARUKV_BENCH_OPTIONS_H */
