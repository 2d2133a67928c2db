/* SPDX-License-Identifier: MIT */
/*
 * timing.c -- the clock the subcommands time with, and the statistics of
 * the samples they take (see bench.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * The CPU time of this process, all its threads, in ns; with children, that
 * of its children reaped so far as well.
 */
double cpu_ns(bool children)
{
	struct rusage ru, kids = { 0 };

	getrusage(RUSAGE_SELF, &ru);
	if (children)
		getrusage(RUSAGE_CHILDREN, &kids);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + kids.ru_utime.tv_sec +
			kids.ru_stime.tv_sec) * 1e9 +
		(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec + kids.ru_utime.tv_usec +
			kids.ru_stime.tv_usec) * 1e3;
}

void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

double clock_cost_ns(void)
{
	enum { PAIRS = 1001 };
	double v[PAIRS];
	struct summary s;

	for (int i = 0; i < PAIRS; i++) {
		uint64_t t0 = now_ns();

		v[i] = (double)(now_ns() - t0);
	}
	return summarize(v, PAIRS, &s) < 0 ? 0 : s.median;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double percentile_sorted(const double *sorted, size_t n, unsigned p)
{
	size_t rank = (p * n + 99) / 100;

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return sorted[rank - 1];
}

int summarize(const double *v, size_t n, struct summary *s)
{
	double *w;

	if (n == 0) {
		s->median = s->min = s->max = s->p90 = s->p99 = NAN;
		return 0;
	}
	w = malloc(n * sizeof(*w));
	if (!w)
		return -1;
	memcpy(w, v, n * sizeof(*w));
	qsort(w, n, sizeof(*w), cmp_double);
	s->min = w[0];
	s->max = w[n - 1];
	s->median = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
	s->p90 = percentile_sorted(w, n, 90);
	s->p99 = percentile_sorted(w, n, 99);
	free(w);
	return 0;
}
