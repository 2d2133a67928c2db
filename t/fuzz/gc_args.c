/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/gc_args.c -- libFuzzer target: marukv-gc's argument parser.
 *
 * The input, split at its NUL bytes, is the command line after argv[0]
 * (fuzz_argv.h); gc_parse_args() parses it, getopt reset first (optind = 0).
 * Linked with utils/gc-args.c alone, not the library: no pool can be
 * opened.  Besides memory errors (ASan) and undefined behaviour (UBSan),
 * it checks that a command line the parser accepts is one that main can
 * run as the man page says: one command, the options of that command only,
 * percents from 0 to 100, and a pool argument that is not empty.  A failed
 * check aborts, which libFuzzer reports as a crash.
 */
#include "fuzz_argv.h"
#include "fuzz_check.h"
#include "gc-args.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_run(const struct fuzz_argv *a, const struct gc_opts *o)
{
	CHECK(o->cmd >= CMD_RECLAIM && o->cmd <= CMD_WATERMARKS);
	CHECK(o->name == NULL);
	CHECK(o->arg == NULL || (*o->arg != '\0' && fuzz_argv_has(a, o->arg)));
	if (o->cmd == CMD_EVICT)
		CHECK(o->to >= 0 && o->to <= 100);
	else
		CHECK(o->to == -1);
	if (o->cmd == CMD_WATERMARKS)
		CHECK(o->low >= 0 && o->low <= 100 && o->high >= 0 && o->high <= 100);
	else
		CHECK(o->low == -1 && o->high == -1);
	CHECK(!o->deep || o->cmd == CMD_VERIFY);
	CHECK(!o->dry_run || o->cmd == CMD_RECLAIM || o->cmd == CMD_EVICT);
	CHECK(o->json == 0 || o->json == 1);
	CHECK(o->quiet == 0 || o->quiet == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_argv a;
	struct gc_opts o;
	enum args_result r;

	fuzz_argv_new(&a, "marukv-gc", data, size);
	optind = 0;
	fuzz_stderr_mute();
	r = gc_parse_args(a.argc, a.argv, &o);
	fuzz_stderr_restore();
	switch (r) {
	case ARGS_RUN:
		check_run(&a, &o);
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
