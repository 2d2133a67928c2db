/* SPDX-License-Identifier: MIT */
/*
 * marukv-gc: check and clean up a marukv pool.
 *
 * A thin tool over the public API (marukv.h only), one command per pool-wide
 * call: reclaim (mkv_pool_reclaim), verify (mkv_pool_verify), evict
 * (mkv_pool_evict), watermarks (mkv_pool_set_watermarks).  --json always
 * prints one object per command with the same keys (documented in
 * marukv-gc(1)), raw integers.  Diagnostics and the progress line (a
 * terminal only) go to stderr; write errors on stdout are checked.  The
 * command line is parsed in gc-args.c.
 */
#include <marukv.h>

#include "gc-args.h"
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "marukv-gc"
enum { EXIT_OK = 0, EXIT_PROBLEMS = 1, EXIT_ERR = 2 };

/* ---- output --------------------------------------------------------------- */

/*
 * The figures of a command's result, in output order.  JSON keys are a
 * stable schema (marukv-gc(1)): add keys at the end, never rename one.
 */
struct field {
	const char *json;
	const char *label;
	uint64_t value;
};

/* One aligned "label: value" line of the human output. */
static void print_line(const char *label, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void print_line(const char *label, const char *fmt, ...)
{
	char buf[40];
	va_list ap;

	snprintf(buf, sizeof(buf), "%s:", label);
	printf("%-20s ", buf);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/*
 * Print the result: the common head (command, path, and dry_run or deep),
 * then the fields, then an optional trailing string (verify's first
 * problem).
 */
static void print_result(const struct gc_opts *o, const char *flag_json,
		const char *flag_label, int flag, const struct field *f, size_t n,
		const char *str_json, const char *str_label, const char *str)
{
	if (o->json) {
		fputs("{\n  \"command\": ", stdout);
		json_string(stdout, gc_cmd_name[o->cmd]);
		fputs(",\n  \"path\": ", stdout);
		json_string(stdout, o->name);
		if (flag_json)
			printf(",\n  \"%s\": %s", flag_json, flag ? "true" : "false");
		for (size_t i = 0; i < n; i++)
			printf(",\n  \"%s\": %" PRIu64, f[i].json, f[i].value);
		if (str_json) {
			printf(",\n  \"%s\": ", str_json);
			json_string(stdout, str);
		}
		fputs("\n}\n", stdout);
		return;
	}
	print_line("command", "%s", gc_cmd_name[o->cmd]);
	print_line("path", "%s", o->name);
	if (flag_label)
		print_line(flag_label, "%s", flag ? "yes" : "no");
	for (size_t i = 0; i < n; i++)
		print_line(f[i].label, "%" PRIu64, f[i].value);
	if (str_label)
		print_line(str_label, "%s", *str ? str : "-");
}

/* Flush stdout; EXIT_ERR, said on stderr, if anything written to it was lost. */
static int flush_stdout(void)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": error writing to standard output: %s\n",
			strerror(errno ? errno : EIO));
		return EXIT_ERR;
	}
	return EXIT_OK;
}

/* ---- progress ------------------------------------------------------------- */

struct progress {
	const char *what;
	int shown;           /* characters of the line on screen; 0 none */
	int last_pct;
};

/* The progress callback: one "\rverify: 42% (4200/10000)" line, rewritten. */
static void progress_cb(uint64_t done, uint64_t total, void *arg)
{
	struct progress *p = arg;
	int pct = total ? (int)(done >= total ? 100 : done * 100 / total) : 0;
	int len;

	if (pct == p->last_pct && p->shown)
		return;
	p->last_pct = pct;
	len = fprintf(stderr, "\r%s: %d%% (%" PRIu64 "/%" PRIu64 ")", p->what, pct,
			done, total);
	if (len > 0 && len - 1 < p->shown)
		fprintf(stderr, "%*s", p->shown - (len - 1), "");
	if (len > p->shown + 1)
		p->shown = len - 1;
	fflush(stderr);
}

/* Wipe the progress line, if any, so that what follows starts clean. */
static void progress_end(struct progress *p)
{
	if (p->shown) {
		fprintf(stderr, "\r%*s\r", p->shown, "");
		fflush(stderr);
		p->shown = 0;
	}
}

/* ---- commands ------------------------------------------------------------- */

/*
 * Report the failed call that returned rc, before any other mkv_* call:
 * "marukv-gc: POOL: reason" on stderr and, with --json, the error object
 * on stdout.  Returns EXIT_ERR.
 */
static int fail(const struct gc_opts *o, int rc)
{
	const char *msg = mkv_errormsg();
	const char *why = *msg ? msg : mkv_strerror(rc);

	fprintf(stderr, PROG ": %s: %s\n", o->name, why);
	if (o->json) {
		json_error(stdout, gc_cmd_name[o->cmd], o->name, mkv_strerror(rc), rc, why);
		flush_stdout();
	}
	return EXIT_ERR;
}

/* Each command in two halves: the call (may fail), then the output. */
union result {
	struct mkv_reclaim reclaim;
	struct mkv_verify verify;
	struct mkv_evict evict;
	struct mkv_stat stat;
};

static int run(struct mkv_pool *pool, const struct gc_opts *o, union result *res)
{
	unsigned flags = o->dry_run ? MKV_DRY_RUN : 0;

	memset(res, 0, sizeof(*res));
	switch (o->cmd) {
	case CMD_RECLAIM:
		return mkv_pool_reclaim(pool, flags, &res->reclaim);
	case CMD_VERIFY:
		return mkv_pool_verify(pool, o->deep ? MKV_VERIFY_DEEP : 0, &res->verify);
	case CMD_EVICT:
		return mkv_pool_evict(pool, (unsigned)o->to, flags, &res->evict);
	case CMD_WATERMARKS: {
		int rc = mkv_pool_set_watermarks(pool, (unsigned)o->low, (unsigned)o->high);

		return rc ? rc : mkv_pool_stat(pool, &res->stat);
	}
	}
	return MKV_E_INVAL;
}

static void print(const struct gc_opts *o, const union result *res)
{
	switch (o->cmd) {
	case CMD_RECLAIM: {
		const struct mkv_reclaim *r = &res->reclaim;
		const struct field f[] = {
			{ "clients",  "clients",  r->clients },
			{ "readers",  "readers",  r->readers },
			{ "pins",     "pins",     r->pins },
			{ "pages",    "pages",    r->pages },
			{ "requests", "requests", r->requests },
		};

		print_result(o, "dry_run", "dry run", o->dry_run, f, sizeof(f) / sizeof(f[0]),
			NULL, NULL, NULL);
		break;
	}
	case CMD_VERIFY: {
		const struct mkv_verify *v = &res->verify;
		char first[sizeof(v->first_problem) + 1];
		const struct field f[] = {
			{ "entries",           "entries",           v->entries },
			{ "pages_used",        "pages used",        v->pages_used },
			{ "pages_quarantined", "pages quarantined", v->pages_quarantined },
			{ "pages_leaked",      "pages leaked",      v->pages_leaked },
			{ "checksums_checked", "checksums checked", v->checksums_checked },
			{ "checksums_bad",     "checksums bad",     v->checksums_bad },
			{ "problems",          "problems",          v->problems },
		};

		/* Terminated even if the library filled the whole array. */
		memcpy(first, v->first_problem, sizeof(v->first_problem));
		first[sizeof(v->first_problem)] = '\0';
		print_result(o, "deep", "deep", o->deep, f, sizeof(f) / sizeof(f[0]),
			"first_problem", "first problem", first);
		break;
	}
	case CMD_EVICT: {
		const struct mkv_evict *e = &res->evict;
		const struct field f[] = {
			{ "to_percent", "to percent", (uint64_t)o->to },
			{ "keys",       "keys",       e->keys },
			{ "pages",      "pages",      e->pages },
			{ "pages_free", "pages free", e->pages_free },
		};

		print_result(o, "dry_run", "dry run", o->dry_run, f, sizeof(f) / sizeof(f[0]),
			NULL, NULL, NULL);
		break;
	}
	case CMD_WATERMARKS: {
		const struct field f[] = {
			{ "low_watermark",  "low watermark",  res->stat.low_watermark },
			{ "high_watermark", "high watermark", res->stat.high_watermark },
		};

		print_result(o, NULL, NULL, 0, f, sizeof(f) / sizeof(f[0]), NULL, NULL, NULL);
		break;
	}
	}
}

/* ---- main ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct gc_opts o;
	struct progress prog = { .last_pct = -1 };
	struct mkv_pool *pool = NULL;
	union result res;
	unsigned oflags;
	int rc, status;

	switch (gc_parse_args(argc, argv, &o)) {
	case ARGS_RUN:
		break;
	case ARGS_HELP:
		gc_usage(stdout);
		return flush_stdout();
	case ARGS_VERSION:
		printf(PROG " %s\n", mkv_version());
		return flush_stdout();
	case ARGS_USAGE:
		return EXIT_ERR;
	}

	o.name = args_pool_name(o.arg);

	/* verify only reads; reclaim and evict write unless it is a dry run. */
	oflags = (o.cmd == CMD_VERIFY || o.dry_run) ? MKV_RDONLY : 0;
	rc = mkv_pool_open(o.arg, oflags, NULL, &pool);
	if (rc < 0)
		return fail(&o, rc);
	if (mkv_pool_path(pool))
		o.name = mkv_pool_path(pool);

	if (!o.quiet && isatty(STDERR_FILENO)) {
		prog.what = gc_cmd_name[o.cmd];
		mkv_pool_set_progress(pool, progress_cb, &prog);
	}
	rc = run(pool, &o, &res);
	progress_end(&prog);
	if (rc < 0 && !(o.cmd == CMD_VERIFY && rc == MKV_E_CORRUPT)) {
		status = fail(&o, rc);
		mkv_pool_close(&pool);
		return status;
	}
	status = EXIT_OK;
	if (o.cmd == CMD_VERIFY && (rc == MKV_E_CORRUPT || res.verify.problems > 0))
		status = EXIT_PROBLEMS;
	/* o.name may be the handle's path: print before closing. */
	print(&o, &res);
	mkv_pool_close(&pool);
	if (flush_stdout() != EXIT_OK)
		return EXIT_ERR;
	return status;
}
