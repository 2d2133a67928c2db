/* SPDX-License-Identifier: MIT */
/*
 * hash: how fast the two hashes marukv computes run, next to memcpy of
 * the same bytes, in one run.
 *
 *   memcpy  libc memcpy of the buffer into another of the same size;
 *   xxh3    XXH3-64 (libxxhash), the checksum of every published value;
 *   blake3  BLAKE3, 16 bytes (src/blake3.c, built into the bench), the
 *           checksum of an MRDN transfer frame (mkv_export, mkv_import).
 *
 * For each size, a run makes passes over a buffer of that size until
 * about PASS_BYTES went through each mode (at least MIN_PASSES), the
 * modes in turn within each pass; a mode's figure for a run is its bytes
 * over its time, in GB/s.  Buffers of a size that fits in the caches are
 * hashed from the caches, the large ones from memory, as values are.
 * Figures are medians over the runs; the ratios medians of each run's
 * ratios to memcpy.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "bench.h"
#include "options.h"
#include "../../src/blake3.h"

#define CMD "hash"
#define MAX_SIZES 16
#define PASS_BYTES (256ULL << 20)
#define MIN_PASSES 3U

enum mode { M_MEMCPY, M_XXH3, M_BLAKE3, M_COUNT };
static const char *const mode_name[M_COUNT] = { "memcpy", "xxh3", "blake3" };

struct hash_opts {
	uint64_t sizes[MAX_SIZES];
	size_t nsizes;
	uint64_t repeat, seed;
	int json;
};

struct row {
	uint64_t size;
	double gbps[M_COUNT];     /* medians over the runs */
	double ratio[M_COUNT];    /* median of each run's mode / memcpy */
};

static int hash_parse(int argc, char **argv, struct hash_opts *o)
{
	const struct opt opts[] = {
		{ "sizes", OPT_SIZE_LIST, o->sizes, .arg = "LIST", .lo = 1, .hi = 1ULL << 30,
			.max = MAX_SIZES, .count = &o->nsizes, .items = "sizes",
			.help = "comma-separated buffer sizes, k/m/g suffixes allowed\n"
				"(default 4k,256k,1m,32m)" },
		OPT_REPEAT(&o->repeat, "runs; medians are reported (default 5)"),
		OPT_SEED(&o->seed, "seed of the buffer's bytes (default 1)"),
		OPT_JSON(&o->json),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Throughput of XXH3-64 (values' checksums) and BLAKE3 (MRDN frames' checksums)\n"
		"against memcpy of the same bytes, in the same run.\n" };

	return opt_parse(&cmd, argc, argv);
}

/* One run of every mode over size bytes: GB/s of each into gbps. */
static void run_size(const uint8_t *src, uint8_t *dst, uint64_t size, double gbps[M_COUNT])
{
	uint64_t passes = PASS_BYTES / size, ns[M_COUNT] = { 0 };
	volatile uint64_t sink = 0;
	uint8_t out[16];

	if (passes < MIN_PASSES)
		passes = MIN_PASSES;
	for (uint64_t p = 0; p < passes; p++) {
		for (int m = 0; m < M_COUNT; m++) {
			uint64_t t0 = now_ns();

			switch (m) {
			case M_MEMCPY:
				memcpy(dst, src, size);
				sink += dst[size - 1];
				break;
			case M_XXH3:
				sink += XXH3_64bits(src, size);
				break;
			default:
				mkv_b3(src, size, out, sizeof(out));
				sink += out[0];
				break;
			}
			ns[m] += now_ns() - t0;
		}
	}
	for (int m = 0; m < M_COUNT; m++)
		gbps[m] = (double)(passes * size) / (double)(ns[m] ? ns[m] : 1);
}

static double median(double *v, size_t n)
{
	struct summary s;

	return summarize(v, n, &s) ? NAN : s.median;
}

static int measure(const struct hash_opts *o, struct row *rows)
{
	uint64_t max = 0, seed = o->seed;
	double *runs = calloc(o->repeat * 2 * M_COUNT, sizeof(*runs));
	uint8_t *src, *dst;

	for (size_t i = 0; i < o->nsizes; i++)
		max = o->sizes[i] > max ? o->sizes[i] : max;
	src = malloc(max);
	dst = malloc(max);
	if (!runs || !src || !dst) {
		fprintf(stderr, PROG " " CMD ": out of memory for buffers of %" PRIu64 " bytes\n",
			max);
		free(runs);
		free(src);
		free(dst);
		return EXIT_ERR;
	}
	for (uint64_t i = 0; i + 8 <= max; i += 8)
		store64le(src + i, rng_next(&seed));
	memset(dst, 0, max);
	for (size_t i = 0; i < o->nsizes; i++) {
		double *g = runs, *r = runs + o->repeat * M_COUNT;

		rows[i].size = o->sizes[i];
		for (uint64_t k = 0; k < o->repeat; k++) {
			double v[M_COUNT];

			run_size(src, dst, o->sizes[i], v);
			for (int m = 0; m < M_COUNT; m++) {
				g[m * o->repeat + k] = v[m];
				r[m * o->repeat + k] = v[m] / v[M_MEMCPY];
			}
		}
		for (int m = 0; m < M_COUNT; m++) {
			rows[i].gbps[m] = median(g + m * o->repeat, o->repeat);
			rows[i].ratio[m] = median(r + m * o->repeat, o->repeat);
		}
	}
	free(runs);
	free(src);
	free(dst);
	return EXIT_OK;
}

static void print_text(const struct hash_opts *o, const struct row *rows)
{
	printf("%10s %10s %10s %10s %12s %13s\n", "size", "memcpy", "xxh3", "blake3",
		"xxh3/memcpy", "blake3/memcpy");
	for (size_t i = 0; i < o->nsizes; i++)
		printf("%10" PRIu64 " %10.2f %10.2f %10.2f %12.2f %13.2f\n", rows[i].size,
			rows[i].gbps[M_MEMCPY], rows[i].gbps[M_XXH3], rows[i].gbps[M_BLAKE3],
			rows[i].ratio[M_XXH3], rows[i].ratio[M_BLAKE3]);
	printf("GB/s, medians of %" PRIu64 " runs; ratios: medians of each run's ratio\n",
		o->repeat);
}

static void print_json(const struct hash_opts *o, const struct row *rows)
{
	printf("{\n  \"command\": \"" CMD "\",\n  \"repeat\": %" PRIu64 ",\n  \"rows\": [",
		o->repeat);
	for (size_t i = 0; i < o->nsizes; i++) {
		printf("%s\n    { \"size\": %" PRIu64, i ? "," : "", rows[i].size);
		for (int m = 0; m < M_COUNT; m++) {
			printf(", \"%s_gb_per_s\": ", mode_name[m]);
			json_number(stdout, rows[i].gbps[m], 3);
		}
		for (int m = M_XXH3; m < M_COUNT; m++) {
			printf(", \"ratio_%s_memcpy\": ", mode_name[m]);
			json_number(stdout, rows[i].ratio[m], 3);
		}
		fputs(" }", stdout);
	}
	fputs(o->nsizes ? "\n  ]\n}\n" : "]\n}\n", stdout);
}

int cmd_hash(int argc, char **argv)
{
	struct hash_opts o = {
		.sizes = { 4 << 10, 256 << 10, 1 << 20, 32 << 20 }, .nsizes = 4, .repeat = 5,
		.seed = 1,
	};
	struct row rows[MAX_SIZES];
	int rc = hash_parse(argc, argv, &o);

	if (rc)
		return rc < 0 ? EXIT_ERR : EXIT_OK;
	if ((rc = measure(&o, rows)))
		return rc;
	if (o.json)
		print_json(&o, rows);
	else
		print_text(&o, rows);
	return EXIT_OK;
}
