/* SPDX-License-Identifier: MIT */
/*
 * marukv-bench: workloads against a marukv pool.
 *
 * A thin tool over the public API (marukv.h only; the peers the
 * subcommands compare marukv with use lmdb.h, libpmem2.h and hiredis).
 * This file holds the table of subcommands; each lives in utils/bench/
 * and takes its own options.
 */
#include <marukv.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "demo", cmd_demo, "prefill writer and decode readers sharing a pool" },
	{ "register", cmd_register, "registrations/s with W writers: marukv vs raw LMDB" },
	{ "takeover", cmd_takeover, "time to take the lease over after kill -9 of the holder" },
	{ "lookup", cmd_lookup, "lookup and zero-copy get latency: marukv vs raw LMDB and Redis" },
	{ "getsize", cmd_getsize, "zero-copy get latency as values grow, vs Redis GET" },
	{ "put", cmd_put, "write throughput, 4 KiB to 32 MiB: vs memcpy, pmem2 copy, Redis SET" },
	{ "hitrate", cmd_hitrate, "prefix hit rate of marukv's eviction vs an exact LRU" },
	{ "evict", cmd_evict, "keys evicted/s, and get latency with and without eviction" },
	{ "flush", cmd_flush, "cost of clflush, clflushopt and clwb, and of invalidate+read" },
	{ "coherence", cmd_coherence, "lookup, get and put latency: non-coherent vs coherent pool" },
	{ "hash", cmd_hash, "XXH3 and BLAKE3 (frames) throughput vs memcpy" },
	{ "remote", cmd_remote, "spill and fetch (remote tier) vs Redis SET and GET" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " COMMAND [OPTIONS]\n"
		"       " PROG " -V|--version\n"
		"       " PROG " --help\n"
		"commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "'" PROG " COMMAND --help' describes the options of a command.\n");
}

static int finish(int status)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, PROG ": error writing to standard output: %s\n",
				strerror(errno));
		return EXIT_ERR;
	}
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_ERR;
	}
	if (!strcmp(argv[1], "--help")) {
		usage(stdout);
		return finish(EXIT_OK);
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf(PROG " %s\n", mkv_version());
		return finish(EXIT_OK);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return finish(commands[i].run(argc - 1, argv + 1));
	fprintf(stderr, PROG ": unknown command: %s\n", argv[1]);
	usage(stderr);
	return EXIT_ERR;
}
