/* SPDX-License-Identifier: MIT */
/*
 * flush: what flushing cache lines costs, on plain memory, in one run.
 *
 * On shared memory without cross-host cache coherence a reader must
 * invalidate the lines another host may have written before it loads them,
 * and a writer must write back what another host must see before its next
 * step.  This measures those instructions on one host's own memory:
 *
 *   clflush of each line, then mfence (the invalidate-before-load pattern);
 *   clflushopt of each line, then one sfence;
 *   clwb of each line, then one sfence (write-back without invalidation:
 *   for stores, not for invalidation);
 *
 * each on lines that are cached and dirty, cached and clean, and already
 * uncached, as a flush of each costs differently; and a reader's cycle
 * from cached clean lines: invalidate the range then read it (a summing
 * load of every word), against the same read without a flush and a
 * memcpy() of the range into a private buffer.
 *
 * The buffer is a MAP_SHARED mapping of a file in a scratch directory
 * under --dir (default /dev/shm), as a pool's memory is; the memcpy
 * destination is private memory.  Every page is touched before the clock
 * starts.  A run makes, for each size, a number of passes over the first
 * SIZE bytes (more for small sizes), each pass doing every mode in turn:
 * its setup untimed (dirty every line, or flush it, or flush and read it),
 * then the timed operation, less the cost of reading the clock.  A run's
 * figure of a mode is the median of its passes; figures are medians over
 * the runs, and the ratios medians of the per-run ratios.  An instruction
 * the CPU lacks (CPUID) is never executed and is reported as "-" (null).
 *
 * x86-64 only: elsewhere the command says it measures nothing and exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "bench.h"
#include "options.h"

#define CMD "flush"
#define MAX_SIZES 16
#define LINE 64U
#define PAGE_4K 4096U
#define PASS_BYTES (16ULL << 20)  /* a run's passes over a size cover about this */
#define MIN_PASSES 3U
#define MAX_PASSES 1024U

enum instr { I_CLFLUSH, I_CLFLUSHOPT, I_CLWB, I_COUNT };
/* The flushes timed: an instruction on each line, then a fence. */
enum fvar { F_CLFLUSH, F_OPT_SFENCE, F_OPT_MFENCE, F_CLWB, F_COUNT };
/* clflushopt against clflush: with the same fence, and with an sfence. */
enum oratio { OR_MFENCE, OR_SFENCE, OR_COUNT };
enum state { ST_DIRTY, ST_CLEAN, ST_UNCACHED, ST_COUNT };
/* A reader's cycle and its baselines, all from cached clean lines. */
enum rmode { RM_READ, RM_MEMCPY, RM_CLFLUSH_READ, RM_CLFLUSHOPT_READ, RM_COUNT };
enum rratio { RR_CLFLUSH, RR_CLFLUSHOPT, RR_COUNT };
/* The timed modes of a pass: each flush on lines in each state, then the reads. */
enum { M_FLUSH = 0, M_READ = F_COUNT * ST_COUNT, M_COUNT = M_READ + RM_COUNT };

static const char *const instr_name[I_COUNT] = { "clflush", "clflushopt", "clwb" };
static const char *const fvar_name[F_COUNT] = {
	"clflush_mfence", "clflushopt_sfence", "clflushopt_mfence", "clwb_sfence"
};
static const char *const state_name[ST_COUNT] = { "dirty", "clean", "uncached" };
static const char *const rmode_name[RM_COUNT] = {
	"read", "memcpy", "clflush_read", "clflushopt_read"
};

struct fl_opts {
	uint64_t sizes[MAX_SIZES];
	size_t nsizes;
	uint64_t repeat;
	const char *dir;
	int json;
};

/* What the CPU has; an instruction it lacks is not run. */
struct cpu {
	int has[I_COUNT];
};

/* One size's samples (a value per run) and their medians. */
struct row {
	uint64_t size, lines, passes;
	double *ns[M_COUNT];              /* ns per pass */
	double *opt_ratio[ST_COUNT][OR_COUNT];  /* clflushopt / clflush */
	double *read_ratio[RR_COUNT];     /* invalidate + read / read */
	double ns_med[M_COUNT];
	double opt_ratio_med[ST_COUNT][OR_COUNT];
	double read_ratio_med[RR_COUNT];
};

/* ---- options ---------------------------------------------------------------- */

static int fl_parse(int argc, char **argv, struct fl_opts *o)
{
	const struct opt opts[] = {
		{ "sizes", OPT_SIZE_LIST, o->sizes, .arg = "LIST", .lo = LINE, .hi = 1ULL << 30,
			.max = MAX_SIZES, .count = &o->nsizes, .items = "sizes",
			.help = "comma-separated buffer sizes, multiples of 64, k/m/g\n"
				"suffixes allowed (default 4k,64k,1m,32m)" },
		OPT_REPEAT(&o->repeat, "runs; medians are reported (default 5)"),
		OPT_DIR(&o->dir, "where the buffer's file goes: a MAP_SHARED file mapping,\n"
			"as a pool's memory is (default /dev/shm)"),
		OPT_JSON(&o->json),
		OPT_END,
	};
	const struct opt_cmd cmd = { CMD, .opts = opts, .about =
		"Cost of clflush, clflushopt and clwb per 64-byte line and per 4 KiB page on\n"
		"dirty, clean and uncached lines, and of a reader's invalidate-then-read\n"
		"against a plain read, on one host's plain memory.  x86-64 only.\n" };
	int rc = opt_parse(&cmd, argc, argv);

	if (rc)
		return rc;
	for (size_t i = 0; i < o->nsizes; i++)
		if (o->sizes[i] % LINE) {
			fprintf(stderr, PROG " " CMD ": --sizes: %" PRIu64
					" is not a multiple of %u\n", o->sizes[i], LINE);
			return -1;
		}
	return 0;
}

/* ---- per line, per page, per second ------------------------------------------ */

static double per_line(const struct row *r, double ns)
{
	return ns / (double)r->lines;
}

static double per_page(const struct row *r, double ns)
{
	return ns * PAGE_4K / (double)r->size;
}

static double bytes_per_s(const struct row *r, double ns)
{
	return ns > 0 ? (double)r->size * 1e9 / ns : NAN;
}

#if defined(__x86_64__)

/* ---- the instructions ------------------------------------------------------------ */

#define BARRIER() __asm__ __volatile__("" ::: "memory")

static volatile uint64_t sink;

static void cpu_detect(struct cpu *cpu)
{
	unsigned a, b, c, d;

	memset(cpu, 0, sizeof(*cpu));
	/* CLFLUSH: CPUID.1:EDX bit 19 (every x86-64 CPU has it, with SSE2). */
	if (__get_cpuid(1, &a, &b, &c, &d))
		cpu->has[I_CLFLUSH] = !!(d & (1U << 19));
	/* CLFLUSHOPT: CPUID.(7,0):EBX bit 23; CLWB: bit 24. */
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		cpu->has[I_CLFLUSHOPT] = !!(b & (1U << 23));
		cpu->has[I_CLWB] = !!(b & (1U << 24));
	}
}

/*
 * clflush is ordered with loads, stores and other clflushes, but a later
 * load may still be satisfied early (speculatively) from a line refetched
 * before the flush completes; the mfence makes every later load wait for
 * the flushes.  This is the reader's invalidate-before-load pattern.
 */
static void clflush_mfence(char *p, size_t lines)
{
	for (size_t i = 0; i < lines; i++)
		_mm_clflush(p + i * LINE);
	_mm_mfence();
	BARRIER();
}

/*
 * clflushopt is weakly ordered: only fences and locked instructions order
 * it.  The writer's pattern ends the flushes with one sfence, which orders
 * them before later stores (the next step another host may see) but not
 * before later loads, which may pass an sfence.  So the reader's cycle
 * with clflushopt ends them with an mfence (mfence nonzero) instead: after
 * an sfence a load of the range could still read a line's old copy; the
 * mfence orders the flushes before every later load, as after clflush.
 */
__attribute__((target("clflushopt")))
static void clflushopt_fence(char *p, size_t lines, int mfence)
{
	for (size_t i = 0; i < lines; i++)
		_mm_clflushopt(p + i * LINE);
	if (mfence)
		_mm_mfence();
	else
		_mm_sfence();
	BARRIER();
}

/* Write-back for stores another host must see; the line may stay cached. */
__attribute__((target("clwb")))
static void clwb_sfence(char *p, size_t lines)
{
	for (size_t i = 0; i < lines; i++)
		_mm_clwb(p + i * LINE);
	_mm_sfence();
	BARRIER();
}

/* A load of every 8-byte word of the range, as a reader of a value does. */
static uint64_t read_sum(const char *p, size_t len)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	uint64_t s = 0;

	BARRIER();
	for (size_t i = 0; i < len / sizeof(*w); i++)
		s += w[i];
	return s;
}

/* The timed mode measures nothing on this CPU. */
static int mode_skipped(const struct cpu *cpu, int m)
{
	static const enum instr fvar_instr[F_COUNT] = {
		I_CLFLUSH, I_CLFLUSHOPT, I_CLFLUSHOPT, I_CLWB
	};

	if (m < M_READ)
		return !cpu->has[fvar_instr[(m - M_FLUSH) / ST_COUNT]];
	if (m == M_READ + RM_CLFLUSH_READ)
		return !cpu->has[I_CLFLUSH];
	if (m == M_READ + RM_CLFLUSHOPT_READ)
		return !cpu->has[I_CLFLUSHOPT];
	return 0;
}

/* ---- a pass ----------------------------------------------------------------------- */

/* Every line cached and dirty (as far as the caches hold them). */
static void make_dirty(char *p, size_t lines)
{
	for (size_t i = 0; i < lines; i++)
		((volatile uint64_t *)(void *)(p + i * LINE))[0] += 1;
	BARRIER();
}

/* Every line written back and out of the caches. */
static void make_uncached(char *p, size_t lines)
{
	clflush_mfence(p, lines);
}

/* Every line written back, then read: cached and clean. */
static void make_clean(char *p, size_t lines)
{
	clflush_mfence(p, lines);
	sink = read_sum(p, lines * LINE);
}

/* Set mode m up on p (untimed), then time it; ns less the clock's cost. */
static double time_mode(int m, char *p, char *copy, size_t lines, double clock_ns)
{
	size_t len = lines * LINE;
	uint64_t t0, t1, s = 0;
	double ns;

	if (m < M_READ) {
		switch ((enum state)((m - M_FLUSH) % ST_COUNT)) {
		case ST_DIRTY: make_dirty(p, lines); break;
		case ST_CLEAN: make_clean(p, lines); break;
		default: make_uncached(p, lines); break;
		}
	} else {
		make_clean(p, lines);
	}
	t0 = now_ns();
	if (m < M_READ) {
		switch ((enum fvar)((m - M_FLUSH) / ST_COUNT)) {
		case F_CLFLUSH: clflush_mfence(p, lines); break;
		case F_OPT_SFENCE: clflushopt_fence(p, lines, 0); break;
		case F_OPT_MFENCE: clflushopt_fence(p, lines, 1); break;
		default: clwb_sfence(p, lines); break;
		}
	} else {
		switch ((enum rmode)(m - M_READ)) {
		case RM_READ: s = read_sum(p, len); break;
		case RM_MEMCPY: memcpy(copy, p, len); BARRIER(); break;
		case RM_CLFLUSH_READ:
			clflush_mfence(p, lines);
			s = read_sum(p, len);
			break;
		default:
			clflushopt_fence(p, lines, 1);
			s = read_sum(p, len);
			break;
		}
	}
	t1 = now_ns();
	sink = s;
	ns = (double)(t1 - t0) - clock_ns;
	return ns > 0 ? ns : 0;
}

/* One run: every size's passes; each row's figures of run k. */
static int run_once(const struct fl_opts *o, const struct cpu *cpu, struct row *rows,
		char *buf, char *copy, double clock_ns, uint64_t k, double *pass)
{
	for (size_t i = 0; i < o->nsizes; i++) {
		struct row *r = &rows[i];

		/* The modes of a pass run in turn, so that drift hits them alike. */
		for (uint64_t j = 0; j < r->passes; j++)
			for (int m = 0; m < M_COUNT; m++)
				if (!mode_skipped(cpu, m))
					pass[(size_t)m * r->passes + j] =
						time_mode(m, buf, copy, r->lines, clock_ns);
		for (int m = 0; m < M_COUNT; m++) {
			struct summary s;

			if (mode_skipped(cpu, m)) {
				r->ns[m][k] = NAN;
				continue;
			}
			if (summarize(pass + (size_t)m * r->passes, r->passes, &s) < 0)
				return -1;
			r->ns[m][k] = s.median;
		}
		for (int st = 0; st < ST_COUNT; st++) {
			double base = r->ns[M_FLUSH + F_CLFLUSH * ST_COUNT + st][k];

			r->opt_ratio[st][OR_MFENCE][k] =
				r->ns[M_FLUSH + F_OPT_MFENCE * ST_COUNT + st][k] / base;
			r->opt_ratio[st][OR_SFENCE][k] =
				r->ns[M_FLUSH + F_OPT_SFENCE * ST_COUNT + st][k] / base;
		}
		r->read_ratio[RR_CLFLUSH][k] = r->ns[M_READ + RM_CLFLUSH_READ][k] /
			r->ns[M_READ + RM_READ][k];
		r->read_ratio[RR_CLFLUSHOPT][k] = r->ns[M_READ + RM_CLFLUSHOPT_READ][k] /
			r->ns[M_READ + RM_READ][k];
	}
	return 0;
}

/* The buffer: a MAP_SHARED mapping of a file in dir, every page touched. */
static char *map_buffer(const char *dir, size_t len)
{
	char *path = path_join(dir, "buffer");
	void *p = MAP_FAILED;
	int fd = -1;

	if (!path) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return NULL;
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0 ||
			(p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
			MAP_FAILED)
		fprintf(stderr, PROG " " CMD ": cannot map %zu bytes of %s: %s\n", len, path,
				strerror(errno));
	else
		memset(p, 0x5a, len);
	if (fd >= 0)
		close(fd);
	free(path);
	return p == MAP_FAILED ? NULL : p;
}

static int measure(const struct fl_opts *o, const struct cpu *cpu, struct row *rows,
		const char *dir, double clock_ns)
{
	uint64_t max = 0, max_passes = 0;
	char *buf = NULL, *copy = NULL;
	double *pass = NULL;
	int status = EXIT_ERR;

	for (size_t i = 0; i < o->nsizes; i++) {
		if (rows[i].size > max)
			max = rows[i].size;
		if (rows[i].passes > max_passes)
			max_passes = rows[i].passes;
	}
	pass = calloc(M_COUNT * max_passes, sizeof(*pass));
	copy = malloc(max);
	if (!pass || !copy) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		goto out;
	}
	memset(copy, 0, max);
	if (!(buf = map_buffer(dir, max)))
		goto out;
	for (uint64_t k = 0; k < o->repeat; k++)
		if (run_once(o, cpu, rows, buf, copy, clock_ns, k, pass) < 0) {
			fprintf(stderr, PROG " " CMD ": out of memory\n");
			goto out;
		}
	status = EXIT_OK;
out:
	if (buf)
		munmap(buf, max);
	free(copy);
	free(pass);
	return status;
}

/* The medians of every row's samples; 0 or -1 (out of memory). */
static int summarize_rows(struct row *rows, size_t nrows, uint64_t repeat)
{
	for (size_t i = 0; i < nrows; i++) {
		struct row *r = &rows[i];
		struct summary s;

		for (int m = 0; m < M_COUNT; m++) {
			if (summarize(r->ns[m], repeat, &s) < 0)
				return -1;
			r->ns_med[m] = s.median;
		}
		for (int st = 0; st < ST_COUNT; st++)
			for (int k = 0; k < OR_COUNT; k++) {
				if (summarize(r->opt_ratio[st][k], repeat, &s) < 0)
					return -1;
				r->opt_ratio_med[st][k] = s.median;
			}
		for (int k = 0; k < RR_COUNT; k++) {
			if (summarize(r->read_ratio[k], repeat, &s) < 0)
				return -1;
			r->read_ratio_med[k] = s.median;
		}
	}
	return 0;
}

#endif /* __x86_64__ */

/* ---- results -------------------------------------------------------------------- */

/* "ns per line/ns per page" of a flush, or "-". */
static void flush_cell(char *c, size_t len, const struct row *r, double ns)
{
	if (isnan(ns))
		snprintf(c, len, "-");
	else
		snprintf(c, len, "%.2f/%.0f", per_line(r, ns), per_page(r, ns));
}

/* "GB/s/ns per page" of a read mode, or "-". */
static void read_cell(char *c, size_t len, const struct row *r, double ns)
{
	if (isnan(ns))
		snprintf(c, len, "-");
	else
		snprintf(c, len, "%.2f/%.0f", bytes_per_s(r, ns) / 1e9, per_page(r, ns));
}

static void ratio_cell(char *c, size_t len, double v)
{
	if (isnan(v) || isinf(v))
		snprintf(c, len, "-");
	else
		snprintf(c, len, "%.2f", v);
}

static void print_text(const struct fl_opts *o, const struct cpu *cpu,
		const struct row *rows, size_t nrows, double clock_ns)
{
	printf("flush: %" PRIu64 " run%s, a MAP_SHARED file mapping in %s; clflush %s,"
			" clflushopt %s, clwb %s\n", o->repeat, o->repeat == 1 ? "" : "s",
			o->dir, cpu->has[I_CLFLUSH] ? "yes" : "no",
			cpu->has[I_CLFLUSHOPT] ? "yes" : "no", cpu->has[I_CLWB] ? "yes" : "no");
	printf("a flush of every line then a fence (opt: clflushopt), ns per 64-byte"
			" line/per 4 KiB page,\nmedians over the runs (clock cost %.0f ns"
			" taken off each pass); clflushopt over clflush\n", clock_ns);
	printf("%10s %9s %15s %11s %11s %12s %11s %11s\n", "size", "state", "clflush+mfence",
			"opt+sfence", "opt+mfence", "clwb+sfence", "optm/flush", "opts/flush");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		for (int st = 0; st < ST_COUNT; st++) {
			char c[F_COUNT][32], ratio[OR_COUNT][32];

			for (int f = 0; f < F_COUNT; f++)
				flush_cell(c[f], sizeof(c[f]), r,
						r->ns_med[M_FLUSH + f * ST_COUNT + st]);
			for (int k = 0; k < OR_COUNT; k++)
				ratio_cell(ratio[k], sizeof(ratio[k]), r->opt_ratio_med[st][k]);
			printf("%10" PRIu64 " %9s %15s %11s %11s %12s %11s %11s\n", r->size,
					state_name[st], c[F_CLFLUSH], c[F_OPT_SFENCE],
					c[F_OPT_MFENCE], c[F_CLWB], ratio[OR_MFENCE],
					ratio[OR_SFENCE]);
		}
	}
	printf("\na reader's cycle from cached clean lines: invalidate (+mfence) then"
			" read every word;\nGB/s/ns per 4 KiB page, and the time of"
			" invalidate+read over read\n");
	printf("%10s %12s %12s %14s %16s %11s %10s\n", "size", "read", "memcpy",
			"clflush+read", "clflushopt+read", "flush/read", "opt/read");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		char c[RM_COUNT][32], ratio[RR_COUNT][32];

		for (int m = 0; m < RM_COUNT; m++)
			read_cell(c[m], sizeof(c[m]), r, r->ns_med[M_READ + m]);
		for (int k = 0; k < RR_COUNT; k++)
			ratio_cell(ratio[k], sizeof(ratio[k]), r->read_ratio_med[k]);
		printf("%10" PRIu64 " %12s %12s %14s %16s %11s %10s\n", r->size, c[RM_READ],
				c[RM_MEMCPY], c[RM_CLFLUSH_READ], c[RM_CLFLUSHOPT_READ],
				ratio[RR_CLFLUSH], ratio[RR_CLFLUSHOPT]);
	}
}

/* A mode's figures as a JSON object, or null. */
static void json_mode(const struct row *r, double ns, int rate)
{
	if (isnan(ns)) {
		printf("null");
		return;
	}
	printf("{ \"ns_per_line\": ");
	json_number(stdout, per_line(r, ns), 2);
	printf(", \"ns_per_page\": ");
	json_number(stdout, per_page(r, ns), 0);
	if (rate) {
		printf(", \"bytes_per_s\": ");
		json_number(stdout, bytes_per_s(r, ns), 0);
	}
	printf(" }");
}

static void print_json(const struct fl_opts *o, const struct cpu *cpu,
		const struct row *rows, size_t nrows, double clock_ns)
{
	printf("{\n  \"command\": \"flush\",\n  \"dir\": ");
	json_string(stdout, o->dir);
	printf(",\n  \"repeat\": %" PRIu64 ",\n  \"line_size\": %u,\n  \"clock_ns\": ",
			o->repeat, LINE);
	json_number(stdout, clock_ns, 0);
	printf(",\n  \"cpu\": { ");
	for (int in = 0; in < I_COUNT; in++)
		printf("%s\"%s\": %s", in ? ", " : "", instr_name[in],
				cpu->has[in] ? "true" : "false");
	printf(" },\n  \"flush_rows\": [");
	for (size_t i = 0, n = 0; i < nrows; i++)
		for (int st = 0; st < ST_COUNT; st++, n++) {
			const struct row *r = &rows[i];

			printf("%s\n    { \"size\": %" PRIu64 ", \"passes\": %" PRIu64
					", \"state\": \"%s\"", n ? "," : "", r->size, r->passes,
					state_name[st]);
			for (int f = 0; f < F_COUNT; f++) {
				printf(", \"%s\": ", fvar_name[f]);
				json_mode(r, r->ns_med[M_FLUSH + f * ST_COUNT + st], 0);
			}
			printf(", \"ratio_clflushopt_clflush\": ");
			json_number(stdout, r->opt_ratio_med[st][OR_MFENCE], 4);
			printf(", \"ratio_clflushopt_sfence_clflush\": ");
			json_number(stdout, r->opt_ratio_med[st][OR_SFENCE], 4);
			printf(" }");
		}
	printf("\n  ],\n  \"read_rows\": [");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		printf("%s\n    { \"size\": %" PRIu64 ", \"passes\": %" PRIu64, i ? "," : "",
				r->size, r->passes);
		for (int m = 0; m < RM_COUNT; m++) {
			printf(", \"%s\": ", rmode_name[m]);
			json_mode(r, r->ns_med[M_READ + m], 1);
		}
		printf(", \"ratio_clflush_read\": ");
		json_number(stdout, r->read_ratio_med[RR_CLFLUSH], 4);
		printf(", \"ratio_clflushopt_read\": ");
		json_number(stdout, r->read_ratio_med[RR_CLFLUSHOPT], 4);
		printf(" }");
	}
	printf("\n  ]\n}\n");
}

/* ---- the command ---------------------------------------------------------------- */

int cmd_flush(int argc, char **argv)
{
	struct fl_opts o = {
		.sizes = { 4096, 65536, 1U << 20, 32U << 20 }, .nsizes = 4, .repeat = 5,
		.dir = "/dev/shm",
	};
	size_t per_row = M_COUNT + ST_COUNT * OR_COUNT + RR_COUNT, nrows = 0;
	struct cpu cpu = { { 0 } };
	struct row rows[MAX_SIZES];
	double *v = NULL, clock_ns = 0;
	int rc, status = EXIT_ERR;

	rc = fl_parse(argc, argv, &o);
	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERR;
#if defined(__x86_64__)
	char *dir = NULL;

	cpu_detect(&cpu);
	if (!cpu.has[I_CLFLUSH]) {
		/* Every setup flushes with it; SSE2, so x86-64, implies it. */
		fprintf(stderr, PROG " " CMD ": the CPU says it has no clflush:"
				" nothing measured\n");
		return EXIT_ERR;
	}
	v = calloc(o.nsizes * per_row * o.repeat, sizeof(*v));
	if (!v) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		return EXIT_ERR;
	}
	for (size_t i = 0; i < o.nsizes; i++) {
		struct row *r = &rows[i];
		double *p = v + i * per_row * o.repeat;
		uint64_t passes = PASS_BYTES / o.sizes[i];

		r->size = o.sizes[i];
		r->lines = o.sizes[i] / LINE;
		r->passes = passes < MIN_PASSES ? MIN_PASSES :
			passes > MAX_PASSES ? MAX_PASSES : passes;
		for (int m = 0; m < M_COUNT; m++, p += o.repeat)
			r->ns[m] = p;
		for (int st = 0; st < ST_COUNT; st++)
			for (int k = 0; k < OR_COUNT; k++, p += o.repeat)
				r->opt_ratio[st][k] = p;
		for (int k = 0; k < RR_COUNT; k++, p += o.repeat)
			r->read_ratio[k] = p;
	}
	nrows = o.nsizes;
	clock_ns = clock_cost_ns();
	if (!(dir = scratch_dir(o.dir, CMD)))
		goto out;
	status = measure(&o, &cpu, rows, dir, clock_ns);
	if (scratch_remove(dir, CMD) < 0 && status == EXIT_OK)
		status = EXIT_ERR;
	free(dir);
	if (status == EXIT_OK && summarize_rows(rows, nrows, o.repeat) < 0) {
		fprintf(stderr, PROG " " CMD ": out of memory\n");
		status = EXIT_ERR;
	}
	if (status != EXIT_OK)
		goto out;
#else
	(void)per_row;
	if (!o.json)
		printf("flush: x86-64 only: this architecture's cache flushes are not"
				" measured\n");
	status = EXIT_OK;
#endif
	if (o.json)
		print_json(&o, &cpu, rows, nrows, clock_ns);
	else if (nrows)
		print_text(&o, &cpu, rows, nrows, clock_ns);
#if defined(__x86_64__)
out:
#endif
	free(v);
	return status;
}
