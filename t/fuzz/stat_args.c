/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/stat_args.c -- libFuzzer target: marukv-stat's argument parser.
 *
 * The input, split at its NUL bytes, is the command line after argv[0]
 * (fuzz_argv.h); stat_parse_args() parses it, getopt reset first (optind = 0).
 * Linked with utils/stat-args.c alone, not the library: no pool can be
 * opened.  Besides memory errors (ASan) and undefined behaviour (UBSan),
 * it checks that an accepted command line names at most one pool, not an
 * empty one.  A failed check aborts, which libFuzzer reports as a crash.
 */
#include "fuzz_argv.h"
#include "fuzz_check.h"
#include "stat-args.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_argv a;
	struct stat_opts o;
	enum args_result r;

	fuzz_argv_new(&a, "marukv-stat", data, size);
	optind = 0;
	fuzz_stderr_mute();
	r = stat_parse_args(a.argc, a.argv, &o);
	fuzz_stderr_restore();
	switch (r) {
	case ARGS_RUN:
		CHECK(o.arg == NULL || (*o.arg != '\0' && fuzz_argv_has(&a, o.arg)));
		CHECK(o.json == 0 || o.json == 1);
		CHECK(o.human == 0 || o.human == 1);
		break;
	case ARGS_HELP:
	case ARGS_VERSION:
	case ARGS_USAGE:
		break;
	default:
		CHECK(0 && "a known result");
	}
	fuzz_argv_free(&a);
	return 0;
}
