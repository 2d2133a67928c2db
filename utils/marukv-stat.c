/* SPDX-License-Identifier: MIT */
/*
 * marukv-stat: print the figures of a marukv pool.
 *
 * A thin tool over the public API (marukv.h only): open the pool read-only,
 * take one mkv_pool_stat() snapshot and the list of its clients
 * (mkv_pool_clients()), print them.  --json always prints the
 * same object (stable snake_case keys, raw integers); human units only on
 * request (-h).  Diagnostics go to stderr; write errors on stdout are
 * checked.  The command line is parsed in stat-args.c.
 */
#include <marukv.h>

#include "json.h"
#include "stat-args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "marukv-stat"
enum { EXIT_OK = 0, EXIT_ERR = 2 };

/* "12.5 MiB" for a byte count, or the raw integer below 1 KiB. */
static const char *human_size(uint64_t v, char *buf, size_t len)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double d = (double)v;
	int i = -1;

	if (v < 1024) {
		snprintf(buf, len, "%" PRIu64 " B", v);
		return buf;
	}
	while (d >= 1024.0 && i < 5) {
		d /= 1024.0;
		i++;
	}
	snprintf(buf, len, "%.1f %s", d, unit[i]);
	return buf;
}

static void format_uuid(const uint8_t u[16], char out[37])
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[u[i] >> 4];
		out[o++] = hex[u[i] & 0xf];
	}
	out[o] = '\0';
}

/*
 * The keys of both outputs, in order.  JSON keys are a stable schema
 * (documented in marukv-stat(1)): add keys at the end, never rename one.
 */
enum kind { K_COUNT, K_BYTES, K_SIGNED, K_MODE };
struct field {
	const char *json;
	const char *label;
	enum kind kind;
	uint64_t value;
};

/* How a value is written: JSON, the default text, the text with -h. */
enum style { S_JSON, S_TEXT, S_HUMAN };

/*
 * A field's value as text: raw integers, human sizes only on request,
 * permission bits in octal outside JSON.
 */
static const char *field_text(const struct field *f, enum style s, char *buf, size_t len)
{
	if (f->kind == K_SIGNED)
		snprintf(buf, len, "%" PRId64, (int64_t)f->value);
	else if (s == S_HUMAN && f->kind == K_BYTES)
		human_size(f->value, buf, len);
	else if (s != S_JSON && f->kind == K_MODE)
		snprintf(buf, len, "%04" PRIo64, f->value);
	else
		snprintf(buf, len, "%" PRIu64, f->value);
	return buf;
}

/*
 * The clients of the pool into *out (malloc'd; the caller frees it) and
 * their number into *n.  Retries if clients came between the two calls.
 */
static int get_clients(struct mkv_pool *pool, uint32_t max_clients,
		struct mkv_client **out, size_t *n)
{
	size_t cap = max_clients ? max_clients : 1;

	*out = NULL;
	*n = 0;
	for (;;) {
		struct mkv_client *c = calloc(cap, sizeof(*c));
		size_t got = 0;
		int rc;

		if (!c)
			return MKV_E_NOMEM;
		rc = mkv_pool_clients(pool, c, cap, &got);
		if (rc < 0) {
			free(c);
			return rc;
		}
		if (got <= cap) {
			*out = c;
			*n = got;
			return 0;
		}
		free(c);
		cap = got;
	}
}

static void print_clients_human(const struct mkv_client *c, size_t n)
{
	printf("\n%5s %-16s %8s %5s %6s %6s %12s %13s %16s\n", "slot", "node", "pid",
		"alive", "rdonly", "holder", "pin", "pages granted", "heartbeat age ms");
	for (size_t i = 0; i < n; i++)
		printf("%5" PRIu32 " %-16s %8" PRIu32 " %5s %6s %6s %12" PRIu64 " %13" PRIu64
			" %16" PRId64 "\n", c[i].slot, *c[i].node ? c[i].node : "-", c[i].pid,
			c[i].alive ? "yes" : "no", c[i].rdonly ? "yes" : "no",
			c[i].holder ? "yes" : "no", c[i].pin, c[i].pages_granted,
			c[i].heartbeat_age_ms);
}

static void print_clients_json(const struct mkv_client *c, size_t n)
{
	fputs(",\n  \"client_list\": [", stdout);
	for (size_t i = 0; i < n; i++) {
		printf("%s\n    { \"slot\": %" PRIu32 ", \"node\": ", i ? "," : "", c[i].slot);
		json_string(stdout, c[i].node);
		printf(", \"pid\": %" PRIu32 ", \"alive\": %s, \"rdonly\": %s, \"holder\": %s"
			", \"pin\": %" PRIu64 ", \"pages_granted\": %" PRIu64
			", \"heartbeat_age_ms\": %" PRId64 " }", c[i].pid,
			c[i].alive ? "true" : "false", c[i].rdonly ? "true" : "false",
			c[i].holder ? "true" : "false", c[i].pin, c[i].pages_granted,
			c[i].heartbeat_age_ms);
	}
	fputs(n ? "\n  ]" : "]", stdout);
}

/* What the pool's figures are printed from. */
struct report {
	const char *path;
	const char *uuid;
	const struct mkv_stat *st;
	const struct field *f;       /* the first figures, up to requests_pending */
	size_t n;
	const struct field *more;    /* dax_align and the figures added after it */
	size_t nmore;
	const struct mkv_client *clients;
	size_t nclients;
	const struct field *last;    /* the figures added after client_list */
	size_t nlast;
	const struct field *remote;  /* the remote tier's, after coherence and remote_servers */
	size_t nremote;
};

static void print_label(const char *label, const char *value)
{
	char buf[40];

	snprintf(buf, sizeof(buf), "%s:", label);
	printf("%-24s %s\n", buf, value);
}

static void print_human(const struct report *r, int human)
{
	const struct mkv_stat *st = r->st;
	enum style s = human ? S_HUMAN : S_TEXT;
	char buf[32];

	print_label("path", r->path);
	print_label("uuid", r->uuid);
	for (size_t i = 0; i < r->n; i++)
		print_label(r->f[i].label, field_text(&r->f[i], s, buf, sizeof(buf)));
	print_label("lease holder node", *st->lease_holder_node ? st->lease_holder_node : "-");
	print_label("backing", mkv_backing_name(st->backing));
	print_label("coherence", mkv_coherence_name(st->coherence));
	for (size_t i = 0; i < r->nmore; i++) {
		/* The device's name and alignment mean something for devdax only. */
		if (i == 0 && st->backing != MKV_BACKING_DEVDAX)
			continue;
		if (i == 0)
			print_label("dax device", st->dax_device);
		print_label(r->more[i].label, field_text(&r->more[i], s, buf, sizeof(buf)));
	}
	for (size_t i = 0; i < r->nlast; i++)
		print_label(r->last[i].label, field_text(&r->last[i], s, buf, sizeof(buf)));
	print_label("remote servers", *st->remote_servers ? st->remote_servers : "- (no tier)");
	for (size_t i = 0; i < r->nremote; i++)
		print_label(r->remote[i].label, field_text(&r->remote[i], s, buf, sizeof(buf)));
	print_clients_human(r->clients, r->nclients);
}

static void print_json(const struct report *r)
{
	const struct mkv_stat *st = r->st;
	char buf[32];

	fputs("{\n  \"path\": ", stdout);
	json_string(stdout, r->path);
	printf(",\n  \"uuid\": \"%s\"", r->uuid);
	for (size_t i = 0; i < r->n; i++)
		printf(",\n  \"%s\": %s", r->f[i].json,
			field_text(&r->f[i], S_JSON, buf, sizeof(buf)));
	fputs(",\n  \"lease_holder_node\": ", stdout);
	json_string(stdout, st->lease_holder_node);
	fputs(",\n  \"backing\": ", stdout);
	json_string(stdout, mkv_backing_name(st->backing));
	fputs(",\n  \"dax_device\": ", stdout);
	json_string(stdout, st->dax_device);
	for (size_t i = 0; i < r->nmore; i++)
		printf(",\n  \"%s\": %s", r->more[i].json,
			field_text(&r->more[i], S_JSON, buf, sizeof(buf)));
	print_clients_json(r->clients, r->nclients);
	for (size_t i = 0; i < r->nlast; i++)
		printf(",\n  \"%s\": %s", r->last[i].json,
			field_text(&r->last[i], S_JSON, buf, sizeof(buf)));
	fputs(",\n  \"coherence\": ", stdout);
	json_string(stdout, mkv_coherence_name(st->coherence));
	fputs(",\n  \"remote_servers\": ", stdout);
	json_string(stdout, st->remote_servers);
	for (size_t i = 0; i < r->nremote; i++)
		printf(",\n  \"%s\": %s", r->remote[i].json,
			field_text(&r->remote[i], S_JSON, buf, sizeof(buf)));
	fputs("\n}\n", stdout);
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

/*
 * Report the failed call on the pool that returned rc, before any other
 * mkv_* call: "marukv-stat: POOL: reason" on stderr and, with --json, the
 * error object on stdout.  The reason is the library's message if
 * lib_msg and it left one, else the code's text.  Returns EXIT_ERR.
 */
static int fail(const struct stat_opts *o, const char *name, int rc, int lib_msg)
{
	const char *msg = lib_msg ? mkv_errormsg() : "";
	const char *why = *msg ? msg : mkv_strerror(rc);

	fprintf(stderr, PROG ": %s: %s\n", name, why);
	if (o->json) {
		json_error(stdout, NULL, name, mkv_strerror(rc), rc, why);
		flush_stdout();
	}
	return EXIT_ERR;
}

int main(int argc, char **argv)
{
	struct stat_opts o;
	struct mkv_pool *pool = NULL;
	struct mkv_stat st;
	struct mkv_client *clients = NULL;
	size_t nclients = 0;
	const char *name;
	char uuid[37];
	int rc;

	switch (stat_parse_args(argc, argv, &o)) {
	case ARGS_RUN:
		break;
	case ARGS_HELP:
		stat_usage(stdout);
		return flush_stdout();
	case ARGS_VERSION:
		printf(PROG " %s\n", mkv_version());
		return flush_stdout();
	case ARGS_USAGE:
		return EXIT_ERR;
	}

	name = args_pool_name(o.arg);

	rc = mkv_pool_open(o.arg, MKV_RDONLY, NULL, &pool);
	if (rc < 0)
		return fail(&o, name, rc, 1);
	rc = mkv_pool_stat(pool, &st);
	if (rc == 0)
		rc = get_clients(pool, st.max_clients, &clients, &nclients);
	if (rc < 0) {
		/* get_clients' own allocation leaves no library message. */
		rc = fail(&o, name, rc, rc != MKV_E_NOMEM);
		mkv_pool_close(&pool);
		return rc;
	}
	/* Terminated strings whatever the library left in the arrays. */
	st.lease_holder_node[sizeof(st.lease_holder_node) - 1] = '\0';
	st.dax_device[sizeof(st.dax_device) - 1] = '\0';
	st.remote_servers[sizeof(st.remote_servers) - 1] = '\0';
	if (mkv_pool_path(pool))
		name = mkv_pool_path(pool);
	format_uuid(st.uuid, uuid);

	{
		const struct field f[] = {
			{ "format_version",    "format version",    K_COUNT, st.format_version },
			{ "page_size",         "page size",         K_BYTES, st.page_size },
			{ "pages_total",       "pages total",       K_COUNT, st.pages_total },
			{ "pages_used",        "pages used",        K_COUNT, st.pages_used },
			{ "pages_free",        "pages free",        K_COUNT, st.pages_free },
			{ "pages_quarantined", "pages quarantined", K_COUNT, st.pages_quarantined },
			{ "pages_granted",     "pages granted",     K_COUNT, st.pages_granted },
			{ "entries",           "entries",           K_COUNT, st.entries },
			{ "bytes_stored",      "bytes stored",      K_BYTES, st.bytes_stored },
			{ "registry_size",     "registry size",     K_BYTES, st.registry_size },
			{ "registry_used",     "registry used",     K_BYTES, st.registry_used },
			{ "clients",           "clients",           K_COUNT, st.clients },
			{ "max_clients",       "max clients",       K_COUNT, st.max_clients },
			{ "lease_generation",  "lease generation",  K_COUNT, st.lease_generation },
			{ "lease_holder_pid",  "lease holder pid",  K_COUNT, st.lease_holder_pid },
			{ "lease_period_ms",   "lease period ms",   K_COUNT, st.lease_period_ms },
			{ "lease_heartbeat_age_ms", "lease heartbeat age ms", K_SIGNED,
				(uint64_t)st.lease_heartbeat_age_ms },
			{ "requests_pending",  "requests pending",  K_COUNT, st.requests_pending },
		};
		/* Added later: after lease_holder_node, backing and dax_device. */
		const struct field more[] = {
			{ "dax_align",         "dax align",         K_BYTES, st.dax_align },
			{ "hits",              "hits",              K_COUNT, st.hits },
			{ "misses",            "misses",            K_COUNT, st.misses },
			{ "evictions",         "evictions",         K_COUNT, st.evictions },
			{ "client_timeout_ms", "client timeout ms", K_COUNT, st.client_timeout_ms },
			{ "low_watermark",     "low watermark %",   K_COUNT, st.low_watermark },
			{ "high_watermark",    "high watermark %",  K_COUNT, st.high_watermark },
		};
		/* Added after client_list: at the end of the JSON object. */
		const struct field last[] = {
			{ "max_nodes",         "max nodes",         K_COUNT, st.max_nodes },
			{ "nodes",             "nodes",             K_COUNT, st.nodes },
			{ "mode",              "mode",              K_MODE,  st.mode },
			{ "gid",               "gid",               K_COUNT, st.gid },
		};
		/* The remote tier's, after coherence and remote_servers. */
		const struct field remote[] = {
			{ "remote_spills",       "remote spills",       K_COUNT, st.remote_spills },
			{ "remote_spill_bytes",  "remote spill bytes",  K_BYTES, st.remote_spill_bytes },
			{ "remote_drops",        "remote drops",        K_COUNT, st.remote_drops },
			{ "remote_spill_errors", "remote spill errors", K_COUNT, st.remote_spill_errors },
			{ "remote_fetches",      "remote fetches",      K_COUNT, st.remote_fetches },
			{ "remote_fetch_hits",   "remote fetch hits",   K_COUNT, st.remote_fetch_hits },
			{ "remote_fetch_misses", "remote fetch misses", K_COUNT, st.remote_fetch_misses },
			{ "remote_fetch_errors", "remote fetch errors", K_COUNT, st.remote_fetch_errors },
		};
		const struct report r = {
			name, uuid, &st, f, sizeof(f) / sizeof(f[0]),
			more, sizeof(more) / sizeof(more[0]), clients, nclients,
			last, sizeof(last) / sizeof(last[0]), remote, sizeof(remote) / sizeof(remote[0]),
		};

		if (o.json)
			print_json(&r);
		else
			print_human(&r, o.human);
	}
	free(clients);
	mkv_pool_close(&pool);
	return flush_stdout();
}
