/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/fuzz_check.h -- the fuzz targets' check: a false condition
 * aborts, which libFuzzer reports as a crash with the input that caused
 * it.  FUZZ_CHECK_WHY adds a string that says more (the library's
 * message, for the pool targets).
 */
#ifndef MKV_FUZZ_CHECK_H
#define MKV_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK_WHY(cond, why) do { \
	if (!(cond)) { \
		fprintf(stderr, "fuzz: check failed: %s (%s:%d): %s\n", #cond, __FILE__, \
				__LINE__, (why)); \
		abort(); \
	} \
} while (0)

#define CHECK(cond) FUZZ_CHECK_WHY(cond, "")

#endif
