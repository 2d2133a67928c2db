/* SPDX-License-Identifier: MIT */
/*
 * stat-args.c -- marukv-stat's command line: options and the pool.
 *
 * Apart from main so that a fuzz target (t/fuzz/stat_args.c) can run it
 * without a pool: it only reads argv and writes usage errors on stderr.
 */
#include "stat-args.h"

#include <getopt.h>

#define PROG "marukv-stat"

void stat_usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [-j|--json] [-h|--human] [-V|--version] [--help] [POOL]\n"
		"Print the figures of the marukv pool POOL (default: $MARUKV_POOL,\n"
		"else " MKV_DEFAULT_POOL ").\n"
		"  -j, --json     one JSON object with stable keys and raw integers\n"
		"  -h, --human    sizes in KiB/MiB/GiB (ignored with --json)\n"
		"  -V, --version  print the version and exit\n"
		"      --help     print this help and exit\n");
}

enum args_result stat_parse_args(int argc, char **argv, struct stat_opts *o)
{
	static const struct option longopts[] = {
		{ "json",    no_argument, NULL, 'j' },
		{ "human",   no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "help",    no_argument, NULL, 'H' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct stat_opts){ 0 };
	while ((c = getopt_long(argc, argv, "jhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': o->json = 1; break;
		case 'h': o->human = 1; break;
		case 'V': return ARGS_VERSION;
		case 'H': return ARGS_HELP;
		default:
			stat_usage(stderr);
			return ARGS_USAGE;
		}
	}
	if (argc - optind > 1) {
		fprintf(stderr, PROG ": too many arguments\n");
		stat_usage(stderr);
		return ARGS_USAGE;
	}
	if (optind < argc)
		o->arg = argv[optind];
	/* Not the default pool: a script's unset variable, most likely. */
	if (o->arg && !*o->arg) {
		fprintf(stderr, PROG ": the pool argument is empty\n");
		stat_usage(stderr);
		return ARGS_USAGE;
	}
	return ARGS_RUN;
}
