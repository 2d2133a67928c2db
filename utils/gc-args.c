/* SPDX-License-Identifier: MIT */
/*
 * gc-args.c -- marukv-gc's command line: options, the command, the pool.
 *
 * Apart from main so that a fuzz target (t/fuzz/gc_args.c) can run it
 * without a pool: it only reads argv and writes usage errors on stderr.
 */
#include "gc-args.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define PROG "marukv-gc"

const char *const gc_cmd_name[] = { "reclaim", "verify", "evict", "watermarks" };

void gc_usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--json] [--dry-run] [-q|--quiet] COMMAND [ARGS] [POOL]\n"
		"       " PROG " -V|--version | --help\n"
		"Check and clean up the marukv pool POOL (default: $MARUKV_POOL,\n"
		"else " MKV_DEFAULT_POOL ").\n"
		"commands:\n"
		"  reclaim            free what dead clients left (slots, pins, pages,\n"
		"                     requests) and clear stale registry readers\n"
		"  verify [--deep]    check the registry against the page table;\n"
		"                     --deep also checks every value's checksum\n"
		"  evict --to PCT     evict cold keys until PCT%% of the pages are free\n"
		"  watermarks --low PCT --high PCT\n"
		"                     set the eviction watermarks (low 0: no automatic\n"
		"                     eviction; their gap: the least one eviction frees)\n"
		"options:\n"
		"  -j, --json         one JSON object with stable keys and raw integers\n"
		"  -n, --dry-run      report what reclaim or evict would do; change nothing\n"
		"  -q, --quiet        no progress line on standard error\n"
		"  -V, --version      print the version and exit\n"
		"      --help         print this help and exit\n"
		"exit status: 0 done (verify: no problem), 1 verify found problems,\n"
		"2 usage error or a pool that could not be opened or processed\n");
}

/* A percent, 0 to 100, optionally followed by '%'; -1 if not one. */
static int parse_percent(const char *s)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s)
		return -1;
	if (*end == '%')
		end++;
	if (*end != '\0' || v < 0 || v > 100)
		return -1;
	return (int)v;
}

static enum args_result usage_error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static enum args_result usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" PROG " --help'.\n", stderr);
	return ARGS_USAGE;
}

enum args_result gc_parse_args(int argc, char **argv, struct gc_opts *o)
{
	enum { O_HELP = 256, O_DEEP, O_TO, O_LOW, O_HIGH };
	static const struct option longopts[] = {
		{ "json",    no_argument,       NULL, 'j' },
		{ "dry-run", no_argument,       NULL, 'n' },
		{ "quiet",   no_argument,       NULL, 'q' },
		{ "version", no_argument,       NULL, 'V' },
		{ "help",    no_argument,       NULL, O_HELP },
		{ "deep",    no_argument,       NULL, O_DEEP },
		{ "to",      required_argument, NULL, O_TO },
		{ "low",     required_argument, NULL, O_LOW },
		{ "high",    required_argument, NULL, O_HIGH },
		{ NULL, 0, NULL, 0 },
	};
	const char *to_arg = NULL, *low_arg = NULL, *high_arg = NULL;
	int c, npos;

	*o = (struct gc_opts){ .to = -1, .low = -1, .high = -1 };
	/* Options may come before or after the command (GNU permutation). */
	while ((c = getopt_long(argc, argv, "jnqV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': o->json = 1; break;
		case 'n': o->dry_run = 1; break;
		case 'q': o->quiet = 1; break;
		case O_DEEP: o->deep = 1; break;
		case O_TO: to_arg = optarg; break;
		case O_LOW: low_arg = optarg; break;
		case O_HIGH: high_arg = optarg; break;
		case 'V': return ARGS_VERSION;
		case O_HELP: return ARGS_HELP;
		default:
			fputs("Try '" PROG " --help'.\n", stderr);
			return ARGS_USAGE;
		}
	}
	npos = argc - optind;
	if (npos < 1)
		return usage_error("no command given");
	if (strcmp(argv[optind], "reclaim") == 0)
		o->cmd = CMD_RECLAIM;
	else if (strcmp(argv[optind], "verify") == 0)
		o->cmd = CMD_VERIFY;
	else if (strcmp(argv[optind], "evict") == 0)
		o->cmd = CMD_EVICT;
	else if (strcmp(argv[optind], "watermarks") == 0)
		o->cmd = CMD_WATERMARKS;
	else
		return usage_error("unknown command '%s'", argv[optind]);
	if (npos > 2)
		return usage_error("too many arguments after '%s'", argv[optind]);
	if (npos == 2)
		o->arg = argv[optind + 1];
	/* Not the default pool: a script's unset variable, most likely. */
	if (o->arg && !*o->arg)
		return usage_error("the pool argument is empty");
	if (o->deep && o->cmd != CMD_VERIFY)
		return usage_error("--deep is an option of verify, not %s", gc_cmd_name[o->cmd]);
	if (to_arg && o->cmd != CMD_EVICT)
		return usage_error("--to is an option of evict, not %s", gc_cmd_name[o->cmd]);
	if ((low_arg || high_arg) && o->cmd != CMD_WATERMARKS)
		return usage_error("--low and --high are options of watermarks, not %s",
				gc_cmd_name[o->cmd]);
	if (o->dry_run && (o->cmd == CMD_VERIFY || o->cmd == CMD_WATERMARKS))
		return usage_error("--dry-run is for reclaim and evict");
	if (o->cmd == CMD_WATERMARKS) {
		if (!low_arg || !high_arg)
			return usage_error("watermarks needs --low PERCENT and --high PERCENT");
		o->low = parse_percent(low_arg);
		o->high = parse_percent(high_arg);
		if (o->low < 0 || o->high < 0)
			return usage_error("--low and --high take percents from 0 to 100");
	}
	if (o->cmd == CMD_EVICT) {
		if (!to_arg)
			return usage_error("evict needs --to PERCENT");
		o->to = parse_percent(to_arg);
		if (o->to < 0)
			return usage_error("--to takes a percent from 0 to 100, not '%s'", to_arg);
	}
	return ARGS_RUN;
}
