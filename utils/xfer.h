/* SPDX-License-Identifier: MIT */
/*
 * xfer.h -- what marukv-dump and marukv-load share (xfer.c): the end of
 * the command line, the clock, the progress line on a terminal, keys in
 * messages, the summary.
 */
#ifndef MKV_UTILS_XFER_H
#define MKV_UTILS_XFER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"

struct xfer {
	const char *prog;
	int progress;             /* stderr is a terminal and not --quiet */
	uint64_t start_ns, shown_ns;
	uint64_t frames, bytes;   /* frames written or read whole, and their bytes */
};

/*
 * The command line's last word, past the options (optind): POOL, or none
 * (*arg NULL).  More than one, or an empty one, is a usage error, said on
 * stderr.
 */
enum args_result xfer_pool_arg(int argc, char **argv, const char *prog, void (*usage)(FILE *f),
		const char **arg);
/*
 * What main does with its parser's answer: -1 to run; else the exit
 * status, the help or the version printed on stdout (2 if that failed).
 */
int xfer_args(enum args_result r, const char *prog, void (*usage)(FILE *f));
void xfer_start(struct xfer *x, const char *prog, int quiet);
/* The progress line, at most a few times a second; done: the last one, then a newline. */
void xfer_show(struct xfer *x, int done);
double xfer_seconds(const struct xfer *x);
/* A key for a message: printable ASCII as is, else 0x and its bytes in hex. */
const char *xfer_key(const void *key, size_t klen, char *buf, size_t len);
/* The summary's common start: {"command": prog, "path": ..., "frames": ..., "bytes": ..., */
void xfer_json_start(FILE *f, const struct xfer *x, const char *path);
/* ... "seconds": ..., "gb_per_s": ...} and a newline. */
void xfer_json_end(FILE *f, const struct xfer *x);
/* Parse a byte count with an optional k, m, g or t suffix (powers of 1024); 0 or -1. */
int xfer_size(const char *s, uint64_t *out);

#endif
