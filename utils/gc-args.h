/* SPDX-License-Identifier: MIT */
/* gc-args.h -- the command line of marukv-gc, parsed (gc-args.c). */
#ifndef MKV_UTILS_GC_ARGS_H
#define MKV_UTILS_GC_ARGS_H

#include "args.h"

#include <stdio.h>

enum gc_cmd { CMD_RECLAIM, CMD_VERIFY, CMD_EVICT, CMD_WATERMARKS };
/* The commands' names, by enum gc_cmd, as given and as printed. */
extern const char *const gc_cmd_name[];

struct gc_opts {
	int json, dry_run, quiet, deep;
	int to;              /* evict: target percent of free pages; -1 unset */
	int low, high;       /* watermarks: percents; -1 unset */
	enum gc_cmd cmd;
	const char *arg;     /* POOL as given (never ""), or NULL */
	const char *name;    /* the pool's name for messages and output: main's */
};

/* The usage summary (--help on stdout, after a usage error on stderr). */
void gc_usage(FILE *f);

/*
 * Parse marukv-gc's command line into *o, which it initializes.  With
 * ARGS_RUN, o holds one valid command: --to (0 to 100) with evict only,
 * --low and --high (0 to 100 each) with watermarks only, --deep with
 * verify only, --dry-run with reclaim or evict only; an empty POOL is a
 * usage error.  With ARGS_USAGE, the error is on stderr.  Nothing else is
 * written, nothing is opened.
 */
enum args_result gc_parse_args(int argc, char **argv, struct gc_opts *o);

#endif
