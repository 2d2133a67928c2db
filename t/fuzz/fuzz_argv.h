/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/fuzz_argv.h -- a command line from a fuzzer's input, and a mute
 * stderr, for the targets of the tools' argument parsers (gc_args.c,
 * stat_args.c).
 */
#ifndef MKV_FUZZ_ARGV_H
#define MKV_FUZZ_ARGV_H

#include <stddef.h>
#include <stdint.h>

/* At most this many arguments after argv[0]; the rest of the input is dropped. */
#define FUZZ_MAX_ARGS 32

struct fuzz_argv {
	int argc;
	char *argv[FUZZ_MAX_ARGS + 2];   /* argv[0], the arguments, NULL */
};

/*
 * Split the input at its NUL bytes into the arguments after prog: no
 * argument for an empty input, else one more than the NUL bytes (empty
 * arguments included).  Each argument is a malloc'd block of its own,
 * exactly as long as it, so that ASan sees a read past its end.
 * Aborts if out of memory.  fuzz_argv_free() frees them.
 */
void fuzz_argv_new(struct fuzz_argv *a, const char *prog, const uint8_t *data, size_t size);
void fuzz_argv_free(struct fuzz_argv *a);

/* Whether s is one of the arguments (the same pointer, not a copy). */
int fuzz_argv_has(const struct fuzz_argv *a, const char *s);

/*
 * Point stdio's stderr at /dev/null (aborts if it cannot be opened), and
 * back: the parsers' usage errors, getopt's included, would fill the log
 * a million times over.  File descriptor 2 stays open, so the
 * sanitizers' reports and the targets' failed checks are still seen.
 */
void fuzz_stderr_mute(void);
void fuzz_stderr_restore(void);

#endif
