/* SPDX-License-Identifier: MIT */
/*
 * args.h -- what a tool's argument parser tells its main to do.
 *
 * Each tool parses its command line in a function of its own
 * (utils/<tool>-args.c) that returns one of these instead of exiting, and
 * writes nothing but usage errors (on stderr): main prints the help or the
 * version, and the fuzz targets (t/fuzz/) call the parsers directly.
 * They use getopt_long: a caller that parses more than one command line
 * sets optind to 0 before each.
 */
#ifndef MKV_UTILS_ARGS_H
#define MKV_UTILS_ARGS_H

#include <stdlib.h>

#include <marukv.h>  /* MKV_DEFAULT_POOL */

enum args_result {
	ARGS_RUN,      /* the options are valid: run */
	ARGS_HELP,     /* --help: print the usage on stdout, exit 0 */
	ARGS_VERSION,  /* -V, --version: print the version, exit 0 */
	ARGS_USAGE,    /* a usage error, already said on stderr: exit 2 */
};

/*
 * The pool's name for messages: POOL, else $MARUKV_POOL if set and not
 * empty, else MKV_DEFAULT_POOL; the library resolves a NULL path the same way.
 */
static inline const char *
args_pool_name(const char *arg)
{
	const char *env = getenv("MARUKV_POOL");

	return arg ? arg : (env && *env) ? env : MKV_DEFAULT_POOL;
}

#endif
