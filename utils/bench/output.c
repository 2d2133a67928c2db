/* SPDX-License-Identifier: MIT */
/*
 * output.c -- what the subcommands' reports share (see bench.h).
 */
#include <marukv.h>

#include <math.h>

#include "bench.h"

void json_number(FILE *f, double v, int decimals)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.*f", decimals, v);
}

const char *mkv_why(int rc)
{
	const char *msg = mkv_errormsg();

	return *msg ? msg : mkv_strerror(rc);
}
