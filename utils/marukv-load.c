/* SPDX-License-Identifier: MIT */
/*
 * marukv-load: import MRDN v1 frames from standard input into a pool.
 *
 * In the manner of mdb_load, over the public API only: read each frame's
 * header, then its body into memory (never more than the pool's data
 * arena: a longer frame is read past, not held), and give the frame to
 * mkv_import(), which checks it whole before it allocates; a value longer
 * than the arena, which no import could place, is passed over as well.  A key that is
 * there already is counted, not an error.  A frame refused for its
 * checksum or body is reported with its offset in the stream and stops
 * the load, or with --skip-corrupt is stepped over; a header that is not
 * MRDN v1 or a stream cut short always stops it, since the next frame
 * cannot be found.
 */
#include <marukv.h>

#include "args.h"
#include "json.h"
#include "xfer.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "marukv-load"
enum { EXIT_OK = 0, EXIT_SOME = 1, EXIT_ERR = 2 };

struct load_opts {
	int json, quiet, skip, create;
	uint64_t data_size;
	const char *arg;
};

struct counts {
	uint64_t imported, exists, corrupt, too_large, offset;
	int truncated, stopped;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [-s|--skip-corrupt] [-c|--create [--data-size BYTES]]\n"
		"       [-j|--json] [-q|--quiet] [-V|--version] [--help] [POOL]\n"
		"Import the MRDN v1 frames on standard input (from marukv-dump) into the marukv\n"
		"pool POOL (default: $MARUKV_POOL, else " MKV_DEFAULT_POOL "); keys there already\n"
		"are kept as they are.\n"
		"  -s, --skip-corrupt   step over a frame whose checksum or body is wrong\n"
		"                       instead of stopping there\n"
		"  -c, --create         create the pool if it does not exist\n"
		"      --data-size BYTES  its data arena; a suffix k, m, g or t allowed\n"
		"  -j, --json           a JSON summary on standard output at the end\n"
		"  -q, --quiet          no progress line on a terminal\n"
		"  -V, --version        print the version and exit\n"
		"      --help           print this help and exit\n");
}

static enum args_result parse_args(int argc, char **argv, struct load_opts *o)
{
	static const struct option longopts[] = {
		{ "skip-corrupt", no_argument,       NULL, 's' },
		{ "create",       no_argument,       NULL, 'c' },
		{ "data-size",    required_argument, NULL, 'D' },
		{ "json",         no_argument,       NULL, 'j' },
		{ "quiet",        no_argument,       NULL, 'q' },
		{ "version",      no_argument,       NULL, 'V' },
		{ "help",         no_argument,       NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "scjqV", longopts, NULL)) != -1) {
		switch (c) {
		case 's': o->skip = 1; break;
		case 'c': o->create = 1; break;
		case 'D':
			if (xfer_size(optarg, &o->data_size) || !o->data_size) {
				fprintf(stderr, PROG ": --data-size takes a byte count, not '%s'\n",
					optarg);
				return ARGS_USAGE;
			}
			break;
		case 'j': o->json = 1; break;
		case 'q': o->quiet = 1; break;
		case 'V': return ARGS_VERSION;
		case 'H': return ARGS_HELP;
		default:
			usage(stderr);
			return ARGS_USAGE;
		}
	}
	if (o->data_size && !o->create) {
		fprintf(stderr, PROG ": --data-size is for --create\n");
		return ARGS_USAGE;
	}
	return xfer_pool_arg(argc, argv, PROG, usage, &o->arg);
}

/* Read up to n bytes (less only at the end of the input); the count, or -1 on error. */
static ssize_t read_full(void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(STDIN_FILENO, (char *)buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Read past n bytes of input (a frame too large to hold); the count read, or -1. */
static int64_t read_past(uint64_t n)
{
	static char sink[1 << 16];
	uint64_t got = 0;

	while (got < n) {
		ssize_t r = read_full(sink, n - got < sizeof(sink) ? (size_t)(n - got) : sizeof(sink));

		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (uint64_t)r;
	}
	return (int64_t)got;
}

/* A body that could not be read whole (got: what was, or -1): said; the load's status. */
static int cut_short(struct counts *n, int64_t got)
{
	fprintf(stderr, PROG ": offset %" PRIu64 ": %s\n", n->offset,
		got < 0 ? strerror(errno) : "the input ends inside a frame");
	n->truncated = got >= 0;
	return got < 0 ? EXIT_ERR : EXIT_SOME;
}

static int open_pool(const struct load_opts *o, struct mkv_pool **pool)
{
	struct mkv_opts *opts = NULL;
	int rc;

	if (o->create && o->data_size) {
		if ((rc = mkv_opts_new(&opts)))
			return rc;
		if ((rc = mkv_opts_set_data_size(opts, o->data_size))) {
			mkv_opts_delete(&opts);
			return rc;
		}
	}
	rc = mkv_pool_open(o->arg, o->create ? MKV_CREATE : 0, opts, pool);
	mkv_opts_delete(&opts);
	return rc;
}

/*
 * Import the frames on stdin: EXIT_OK, EXIT_SOME (a frame refused,
 * skipped or where it stopped: said with its offset), EXIT_ERR.
 */
static int load(struct mkv_pool *pool, const struct load_opts *o, uint64_t arena,
		struct xfer *x, struct counts *n)
{
	uint8_t *buf = malloc(MKV_FRAME_HEADER);
	size_t cap = MKV_FRAME_HEADER;
	int rc = EXIT_OK;

	if (!buf) {
		fprintf(stderr, PROG ": out of memory\n");
		return EXIT_ERR;
	}
	for (;;) {
		struct mkv_frame f;
		ssize_t got = read_full(buf, MKV_FRAME_HEADER);
		uint64_t body;
		int irc;

		if (got == 0)
			break;
		if (got < 0 || got < (ssize_t)MKV_FRAME_HEADER) {
			if (got < 0) {
				fprintf(stderr, PROG ": reading standard input: %s\n", strerror(errno));
				rc = EXIT_ERR;
			} else {
				fprintf(stderr, PROG ": offset %" PRIu64 ": the input ends inside a "
					"frame's header\n", n->offset);
				n->truncated = 1;
				rc = EXIT_SOME;
			}
			break;
		}
		irc = mkv_frame_parse(buf, MKV_FRAME_HEADER, &f);
		if (f.frame_len == 0) {
			/* no MRDN v1 header: where the next frame starts is lost */
			fprintf(stderr, PROG ": offset %" PRIu64 ": %s; stopped\n", n->offset,
				mkv_errormsg());
			n->stopped = 1;
			rc = EXIT_SOME;
			break;
		}
		body = f.frame_len - MKV_FRAME_HEADER;
		if (f.frame_len > arena + MKV_FRAME_HEADER + MKV_FRAME_BODY_HEADER + MKV_KEY_MAX) {
			int64_t past = read_past(body);

			if (past < 0 || (uint64_t)past < body) {
				rc = cut_short(n, past);
				break;
			}
			fprintf(stderr, PROG ": offset %" PRIu64 ": a frame of %" PRIu64 " bytes, "
				"larger than the pool's data arena; passed over\n", n->offset,
				f.frame_len);
			n->too_large++;
			n->offset += f.frame_len;
			rc = EXIT_SOME;
			continue;
		}
		if (f.frame_len > cap) {
			uint8_t *b = realloc(buf, (size_t)f.frame_len);

			if (!b) {
				fprintf(stderr, PROG ": out of memory for a frame of %" PRIu64 " bytes\n",
					f.frame_len);
				rc = EXIT_ERR;
				break;
			}
			buf = b;
			cap = (size_t)f.frame_len;
		}
		got = read_full(buf + MKV_FRAME_HEADER, (size_t)body);
		if (got < 0 || (uint64_t)got < body) {
			rc = cut_short(n, got);
			break;
		}
		/*
		 * a value no pool of this arena could hold, its key however
		 * short; parsed here (the checksum read once more) only when the
		 * frame is long enough for that
		 */
		if (body > MKV_FRAME_BODY_HEADER + 1 + arena &&
		    mkv_frame_parse(buf, (size_t)f.frame_len, &f) == 0 && f.vlen > arena) {
			fprintf(stderr, PROG ": offset %" PRIu64 ": a value of %zu bytes, larger "
				"than the pool's data arena; passed over\n", n->offset, f.vlen);
			n->too_large++;
			n->offset += f.frame_len;
			rc = EXIT_SOME;
			continue;
		}
		irc = mkv_import(pool, buf, (size_t)f.frame_len, NULL);
		if (irc == 0 || irc == MKV_E_EXISTS) {
			irc ? n->exists++ : n->imported++;
			x->frames++;
			x->bytes += f.frame_len;
			xfer_show(x, 0);
		} else if (irc == MKV_E_FRAME_CHECKSUM || irc == MKV_E_FRAME_BODY) {
			fprintf(stderr, PROG ": offset %" PRIu64 ": %s%s\n", n->offset, mkv_errormsg(),
				o->skip ? "; skipped" : "; stopped");
			n->corrupt++;
			rc = EXIT_SOME;
			if (!o->skip) {
				n->stopped = 1;
				break;
			}
		} else {
			fprintf(stderr, PROG ": offset %" PRIu64 ": %s\n", n->offset,
				*mkv_errormsg() ? mkv_errormsg() : mkv_strerror(irc));
			rc = EXIT_ERR;
			break;
		}
		n->offset += f.frame_len;
	}
	free(buf);
	return rc;
}

int main(int argc, char **argv)
{
	struct load_opts o = { 0 };
	struct mkv_pool *pool = NULL;
	struct counts n = { 0 };
	struct mkv_stat st;
	struct xfer x;
	const char *name;
	int rc;

	if ((rc = xfer_args(parse_args(argc, argv, &o), PROG, usage)) >= 0)
		return rc;
	name = args_pool_name(o.arg);
	if (isatty(STDIN_FILENO)) {
		fprintf(stderr, PROG ": standard input is a terminal: give frames from a file or "
			"a pipe\n");
		return EXIT_ERR;
	}
	if ((rc = open_pool(&o, &pool)) || (rc = mkv_pool_stat(pool, &st))) {
		fprintf(stderr, PROG ": %s: %s\n", name, *mkv_errormsg() ? mkv_errormsg() :
			mkv_strerror(rc));
		if (o.json)
			json_error(stdout, PROG, name, mkv_strerror(rc), rc, mkv_errormsg());
		mkv_pool_close(&pool);
		return EXIT_ERR;
	}
	xfer_start(&x, PROG, o.quiet);
	rc = load(pool, &o, st.pages_total * st.page_size, &x, &n);
	xfer_show(&x, 1);
	mkv_pool_close(&pool);
	if (o.json) {
		xfer_json_start(stdout, &x, name);
		printf(", \"imported\": %" PRIu64 ", \"exists\": %" PRIu64 ", \"corrupt\": %" PRIu64
			", \"too_large\": %" PRIu64 ", \"truncated\": %s, \"stopped\": %s"
			", \"offset\": %" PRIu64, n.imported, n.exists, n.corrupt, n.too_large,
			n.truncated ? "true" : "false", n.stopped ? "true" : "false", n.offset);
		xfer_json_end(stdout, &x);
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, PROG ": error writing to standard output\n");
		return EXIT_ERR;
	}
	return rc;
}
