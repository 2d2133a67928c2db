/* SPDX-License-Identifier: MIT */
/* stat-args.h -- the command line of marukv-stat, parsed (stat-args.c). */
#ifndef MKV_UTILS_STAT_ARGS_H
#define MKV_UTILS_STAT_ARGS_H

#include "args.h"

#include <stdio.h>

struct stat_opts {
	int json, human;
	const char *arg;     /* POOL as given (never ""), or NULL */
};

/* The usage summary (--help on stdout, after a usage error on stderr). */
void stat_usage(FILE *f);

/*
 * Parse marukv-stat's command line into *o, which it initializes.  An
 * empty POOL is a usage error.  With ARGS_USAGE, the error is on stderr.
 * Nothing else is written, nothing is opened.
 */
enum args_result stat_parse_args(int argc, char **argv, struct stat_opts *o);

#endif
