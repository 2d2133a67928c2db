/* SPDX-License-Identifier: MIT */
/*
 * tu_lease.c -- the lease log: the library's messages in a file, and the
 * acquisitions read back from it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static int log_fd = -1;

static void
log_line(enum mkv_log_level level, const char *msg, void *arg)
{
	char line[640];
	int fd = (int)(intptr_t)arg, n;
	ssize_t w;

	(void)level;
	n = snprintf(line, sizeof(line), "%s\n", msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	w = write(fd, line, (size_t)n);
	(void)w;
}

char *
tu_log_path(const char *dir)
{
	return tu_path_in(dir, "lease.log");
}

int
tu_log_install(const char *path)
{
	if (log_fd >= 0)
		close(log_fd);
	log_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (log_fd < 0)
		return -errno;
	mkv_set_log(log_line, MKV_LOG_INFO, (void *)(intptr_t)log_fd);
	return 0;
}

void
tu_log_uninstall(void)
{
	mkv_set_log(NULL, MKV_LOG_ERR, NULL);
	if (log_fd >= 0)
		close(log_fd);
	log_fd = -1;
}

size_t
tu_log_taken(const char *path, struct tu_taken **out, size_t *bad)
{
	char line[1024];
	struct tu_taken t, *arr = NULL, *na;
	size_t n = 0, cap = 0;
	const char *p;
	FILE *f;

	*out = NULL;
	*bad = 0;
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		p = strstr(line, "lease taken: ");
		if (p == NULL)
			continue;
		memset(&t, 0, sizeof(t));
		if (sscanf(p, "lease taken: node %31s slot %u pid %ld generation %llu",
				t.node, &t.slot, &t.pid, &t.gen) != 4) {
			(*bad)++;
			continue;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			na = realloc(arr, cap * sizeof(*arr));
			ck_assert(na != NULL);
			arr = na;
		}
		arr[n++] = t;
	}
	fclose(f);
	*out = arr;
	return n;
}

const struct tu_taken *
tu_taken_by(const struct tu_taken *t, size_t n, long pid)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].pid == pid)
			return &t[i];
	return NULL;
}
