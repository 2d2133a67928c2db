/* SPDX-License-Identifier: MIT */
/* t/fuzz/fuzz_argv.c -- a command line from a fuzzer's input (fuzz_argv.h). */
#include "fuzz_argv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_bytes(const void *p, size_t n)
{
	char *s = malloc(n + 1);

	if (!s)
		abort();
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

void fuzz_argv_new(struct fuzz_argv *a, const char *prog, const uint8_t *data, size_t size)
{
	size_t start = 0;

	a->argc = 0;
	a->argv[a->argc++] = dup_bytes(prog, strlen(prog));
	if (size > 0) {
		for (size_t i = 0; i <= size && a->argc <= FUZZ_MAX_ARGS; i++) {
			if (i < size && data[i] != '\0')
				continue;
			a->argv[a->argc++] = dup_bytes(data + start, i - start);
			start = i + 1;
		}
	}
	a->argv[a->argc] = NULL;
}

void fuzz_argv_free(struct fuzz_argv *a)
{
	/* getopt may have permuted them: free what the array holds now. */
	for (int i = 0; i < a->argc; i++)
		free(a->argv[i]);
	a->argc = 0;
}

int fuzz_argv_has(const struct fuzz_argv *a, const char *s)
{
	for (int i = 1; i < a->argc; i++)
		if (a->argv[i] == s)
			return 1;
	return 0;
}

static FILE *devnull, *saved_stderr;

void fuzz_stderr_mute(void)
{
	if (!devnull)
		devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
	saved_stderr = stderr;
	stderr = devnull;
}

void fuzz_stderr_restore(void)
{
	if (saved_stderr)
		stderr = saved_stderr;
	saved_stderr = NULL;
}
