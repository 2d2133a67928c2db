/* SPDX-License-Identifier: MIT */
/*
 * marukv-dump: write a pool's values to standard output as MRDN v1 frames.
 *
 * In the manner of mdb_dump, over the public API only: open the pool
 * read-only (checking each value against its checksum unless
 * --no-verify), walk its keys with mkv_key_next() (every key, those
 * given, or those with a prefix) and write each key's frame with
 * mkv_export_fd(), the value straight from the pool.  A key evicted or
 * deleted between the walk and its export is passed over and counted.
 * marukv-load(1) reads the stream back.
 */
#include <marukv.h>

#include "args.h"
#include "json.h"
#include "xfer.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "marukv-dump"
enum { EXIT_OK = 0, EXIT_SOME = 1, EXIT_ERR = 2 };

struct dump_opts {
	const char **keys;   /* -k, in order */
	size_t nkeys;
	const char *prefix;
	unsigned tier;
	int json, quiet, no_verify;
	const char *arg;     /* POOL as given, or NULL */
};

struct counts {
	uint64_t missing;    /* keys given that are not in the pool */
	uint64_t gone;       /* keys met in the walk, gone before their export */
	uint64_t corrupt;    /* values that fail their checksum */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [-k KEY]... [-p PREFIX] [-t TIER] [--no-verify] [-j|--json]\n"
		"       [-q|--quiet] [-V|--version] [--help] [POOL]\n"
		"Write the values of the marukv pool POOL (default: $MARUKV_POOL, else\n"
		MKV_DEFAULT_POOL ") to standard output as MRDN v1 frames, every key in byte\n"
		"order, or the keys given, or those that start with PREFIX.\n"
		"  -k, --key KEY        dump KEY (may be repeated); one missing is reported\n"
		"  -p, --prefix PREFIX  dump the keys that start with PREFIX\n"
		"  -t, --tier TIER      the tier label of the frames, 0 to 255 (default 0)\n"
		"      --no-verify      do not check values against their checksums\n"
		"  -j, --json           a JSON summary on standard error at the end\n"
		"  -q, --quiet          no progress line on a terminal\n"
		"  -V, --version        print the version and exit\n"
		"      --help           print this help and exit\n");
}

static enum args_result parse_args(int argc, char **argv, struct dump_opts *o)
{
	static const struct option longopts[] = {
		{ "key",       required_argument, NULL, 'k' },
		{ "prefix",    required_argument, NULL, 'p' },
		{ "tier",      required_argument, NULL, 't' },
		{ "no-verify", no_argument,       NULL, 'N' },
		{ "json",      no_argument,       NULL, 'j' },
		{ "quiet",     no_argument,       NULL, 'q' },
		{ "version",   no_argument,       NULL, 'V' },
		{ "help",      no_argument,       NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "k:p:t:jqV", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			if (!*optarg || strlen(optarg) > MKV_KEY_MAX) {
				fprintf(stderr, PROG ": a key is 1 to %d bytes\n", MKV_KEY_MAX);
				return ARGS_USAGE;
			}
			o->keys[o->nkeys++] = optarg;
			break;
		case 'p':
			if (!*optarg || strlen(optarg) > MKV_KEY_MAX) {
				fprintf(stderr, PROG ": a prefix is 1 to %d bytes\n", MKV_KEY_MAX);
				return ARGS_USAGE;
			}
			o->prefix = optarg;
			break;
		case 't':
			errno = 0;
			o->tier = (unsigned)strtoul(optarg, &end, 10);
			if (errno || !*optarg || *end || o->tier > 255 || *optarg == '-') {
				fprintf(stderr, PROG ": the tier is 0 to 255, not '%s'\n", optarg);
				return ARGS_USAGE;
			}
			break;
		case 'N': o->no_verify = 1; break;
		case 'j': o->json = 1; break;
		case 'q': o->quiet = 1; break;
		case 'V': return ARGS_VERSION;
		case 'H': return ARGS_HELP;
		default:
			usage(stderr);
			return ARGS_USAGE;
		}
	}
	if (o->nkeys && o->prefix) {
		fprintf(stderr, PROG ": give keys or a prefix, not both\n");
		return ARGS_USAGE;
	}
	return xfer_pool_arg(argc, argv, PROG, usage, &o->arg);
}

/*
 * Export one key: 0 written, 1 passed over (missing or gone, corrupt:
 * counted and said), EXIT_ERR a write error or a failure of the pool.
 */
static int dump_key(struct mkv_pool *pool, struct xfer *x, const struct dump_opts *o,
		const void *key, size_t klen, int given, struct counts *n)
{
	char name[2 * MKV_KEY_MAX + 3];
	uint64_t wrote;
	int rc = mkv_export_fd(pool, key, klen, o->tier, STDOUT_FILENO, &wrote);

	if (rc == 0) {
		x->frames++;
		x->bytes += wrote;
		xfer_show(x, 0);
		return 0;
	}
	xfer_key(key, klen, name, sizeof(name));
	if (rc == MKV_E_NOTFOUND) {
		if (given)
			fprintf(stderr, PROG ": %s: no such key\n", name);
		given ? n->missing++ : n->gone++;
		return 1;
	}
	if (rc == MKV_E_CORRUPT && wrote == 0) {
		fprintf(stderr, PROG ": %s: %s; not dumped\n", name, mkv_errormsg());
		n->corrupt++;
		return 1;
	}
	fprintf(stderr, PROG ": %s: %s\n", name, *mkv_errormsg() ? mkv_errormsg() : mkv_strerror(rc));
	return EXIT_ERR;
}

/* Every key (with the prefix, if one is given), in byte order. */
static int walk(struct mkv_pool *pool, struct xfer *x, const struct dump_opts *o,
		struct counts *n)
{
	uint8_t key[MKV_KEY_MAX], last[MKV_KEY_MAX];
	size_t klen, llen = 0, plen = o->prefix ? strlen(o->prefix) : 0;
	int rc, have = 0;

	/* the prefix itself is the first key that may start with it */
	if (o->prefix && (rc = mkv_exists(pool, o->prefix, plen)) != 0) {
		if (rc < 0) {
			fprintf(stderr, PROG ": %s\n", mkv_errormsg());
			return EXIT_ERR;
		}
		if (dump_key(pool, x, o, o->prefix, plen, 0, n) == EXIT_ERR)
			return EXIT_ERR;
	}
	if (o->prefix) {
		memcpy(last, o->prefix, plen);
		llen = plen;
		have = 1;
	}
	while ((rc = mkv_key_next(pool, have ? last : NULL, llen, key, &klen)) == 0) {
		if (o->prefix && (klen < plen || memcmp(key, o->prefix, plen)))
			return 0;
		if (dump_key(pool, x, o, key, klen, 0, n) == EXIT_ERR)
			return EXIT_ERR;
		memcpy(last, key, klen);
		llen = klen;
		have = 1;
	}
	if (rc != MKV_E_NOTFOUND) {
		fprintf(stderr, PROG ": %s\n", mkv_errormsg());
		return EXIT_ERR;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct dump_opts o = { 0 };
	struct mkv_pool *pool = NULL;
	struct counts n = { 0 };
	struct xfer x;
	const char *name;
	int rc = 0;

	o.keys = calloc((size_t)argc, sizeof(*o.keys));
	if (!o.keys) {
		fprintf(stderr, PROG ": out of memory\n");
		return EXIT_ERR;
	}
	if ((rc = xfer_args(parse_args(argc, argv, &o), PROG, usage)) >= 0) {
		free(o.keys);
		return rc;
	}
	name = args_pool_name(o.arg);
	if (isatty(STDOUT_FILENO)) {
		fprintf(stderr, PROG ": standard output is a terminal: redirect it to a file or "
			"a pipe\n");
		free(o.keys);
		return EXIT_ERR;
	}
	rc = mkv_pool_open(o.arg, MKV_RDONLY | (o.no_verify ? 0 : MKV_VERIFY), NULL, &pool);
	if (rc) {
		fprintf(stderr, PROG ": %s: %s\n", name, *mkv_errormsg() ? mkv_errormsg() :
			mkv_strerror(rc));
		if (o.json)
			json_error(stderr, PROG, name, mkv_strerror(rc), rc, mkv_errormsg());
		free(o.keys);
		return EXIT_ERR;
	}
	/* a reader that went away is a write error, said and counted, not a signal */
	signal(SIGPIPE, SIG_IGN);
	xfer_start(&x, PROG, o.quiet);
	rc = 0;
	for (size_t i = 0; i < o.nkeys && rc != EXIT_ERR; i++)
		rc = dump_key(pool, &x, &o, o.keys[i], strlen(o.keys[i]), 1, &n);
	if (!o.nkeys)
		rc = walk(pool, &x, &o, &n);
	xfer_show(&x, 1);
	mkv_pool_close(&pool);
	if (rc != EXIT_ERR)
		rc = n.missing || n.corrupt ? EXIT_SOME : EXIT_OK;
	if (o.json) {
		xfer_json_start(stderr, &x, name);
		fprintf(stderr, ", \"missing\": %" PRIu64 ", \"gone\": %" PRIu64
			", \"corrupt\": %" PRIu64 ", \"complete\": %s", n.missing, n.gone, n.corrupt,
			rc == EXIT_ERR ? "false" : "true");
		xfer_json_end(stderr, &x);
	}
	free(o.keys);
	return rc;
}
