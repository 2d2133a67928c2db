/* SPDX-License-Identifier: MIT */
/*
 * log.c -- optional messages: to the program's callback, or to stderr only
 * when MARUKV_LOG asks for them.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static mkv_log_fn log_fn;
static void *log_arg;
static int log_max = -1;  /* -1: not yet read from MARUKV_LOG */

MKV_EXPORT void
mkv_set_log(mkv_log_fn fn, enum mkv_log_level max_level, void *arg)
{
	log_fn = fn;
	log_arg = arg;
	__atomic_store_n(&log_max, fn ? (int)max_level : -1, __ATOMIC_RELAXED);
}

static int
level_max(void)
{
	int max = __atomic_load_n(&log_max, __ATOMIC_RELAXED);
	const char *env;

	if (max < 0) {
		env = getenv("MARUKV_LOG");
		max = env ? atoi(env) : 0;
		__atomic_store_n(&log_max, max, __ATOMIC_RELAXED);
	}
	return max;
}

void
mkv_log(enum mkv_log_level level, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if ((int)level > level_max())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_fn)
		log_fn(level, msg, log_arg);
	else
		fprintf(stderr, "marukv: %s\n", msg);
}
