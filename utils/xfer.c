/* SPDX-License-Identifier: MIT */
/*
 * xfer.c -- what marukv-dump and marukv-load share (see xfer.h).
 */
#include "xfer.h"
#include "json.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

enum args_result xfer_pool_arg(int argc, char **argv, const char *prog, void (*usage)(FILE *f),
		const char **arg)
{
	if (argc - optind > 1) {
		fprintf(stderr, "%s: too many arguments\n", prog);
		usage(stderr);
		return ARGS_USAGE;
	}
	*arg = optind < argc ? argv[optind] : NULL;
	if (*arg && !**arg) {
		fprintf(stderr, "%s: the pool argument is empty\n", prog);
		return ARGS_USAGE;
	}
	return ARGS_RUN;
}

int xfer_args(enum args_result r, const char *prog, void (*usage)(FILE *f))
{
	switch (r) {
	case ARGS_RUN:
		return -1;
	case ARGS_HELP:
		usage(stdout);
		break;
	case ARGS_VERSION:
		printf("%s %s\n", prog, mkv_version());
		break;
	case ARGS_USAGE:
		return 2;
	}
	return fflush(stdout) || ferror(stdout) ? 2 : 0;
}

void xfer_start(struct xfer *x, const char *prog, int quiet)
{
	*x = (struct xfer){ .prog = prog, .progress = !quiet && isatty(STDERR_FILENO) };
	x->start_ns = now_ns();
	x->shown_ns = x->start_ns;
}

double xfer_seconds(const struct xfer *x)
{
	return (double)(now_ns() - x->start_ns) / 1e9;
}

void xfer_show(struct xfer *x, int done)
{
	uint64_t t;

	if (!x->progress)
		return;
	t = now_ns();
	if (!done && t - x->shown_ns < 250000000ULL)
		return;
	x->shown_ns = t;
	fprintf(stderr, "\r%s: %" PRIu64 " frames, %.1f MiB", x->prog, x->frames,
		(double)x->bytes / (1 << 20));
	if (done)
		fputc('\n', stderr);
}

const char *xfer_key(const void *key, size_t klen, char *buf, size_t len)
{
	const unsigned char *k = key;
	size_t i, o = 0;

	for (i = 0; i < klen && isprint(k[i]); i++)
		;
	if (i == klen) {
		snprintf(buf, len, "%.*s", (int)klen, (const char *)key);
		return buf;
	}
	o = (size_t)snprintf(buf, len, "0x");
	for (i = 0; i < klen && o + 3 < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%02x", k[i]);
	return buf;
}

void xfer_json_start(FILE *f, const struct xfer *x, const char *path)
{
	fputs("{\"command\": ", f);
	json_string(f, x->prog);
	fputs(", \"path\": ", f);
	json_string(f, path);
	fprintf(f, ", \"frames\": %" PRIu64 ", \"bytes\": %" PRIu64, x->frames, x->bytes);
}

void xfer_json_end(FILE *f, const struct xfer *x)
{
	double s = xfer_seconds(x);

	fprintf(f, ", \"seconds\": %.3f, \"gb_per_s\": %.3f}\n", s,
		s > 0 ? (double)x->bytes / s / 1e9 : 0.0);
}

int xfer_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}
