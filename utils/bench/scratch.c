/* SPDX-License-Identifier: MIT */
/*
 * scratch.c -- the scratch directories the subcommands work in (see
 * bench.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

char *path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);

	if (!p)
		return NULL;
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

/*
 * Unless the caller chose a base for the lock directories of non-coherent
 * pools (MARUKV_LOCK_DIR, marukv(7)), the newest scratch directory is the
 * base: they go when it is removed, instead of staying in /dev/shm.
 */
static void lock_dir_in(const char *scratch)
{
	static int chosen = -1;
	char *abs;

	if (chosen < 0)
		chosen = getenv("MARUKV_LOCK_DIR") != NULL;
	if (!chosen && (abs = realpath(scratch, NULL))) {
		setenv("MARUKV_LOCK_DIR", abs, 1);
		free(abs);
	}
}

char *scratch_dir(const char *dir, const char *cmd)
{
	char *t = path_join(dir, PROG ".XXXXXX");

	if (!t) {
		fprintf(stderr, PROG " %s: out of memory\n", cmd);
		return NULL;
	}
	if (!mkdtemp(t)) {
		fprintf(stderr, PROG " %s: cannot create a directory in %s: %s\n", cmd, dir,
				strerror(errno));
		free(t);
		return NULL;
	}
	lock_dir_in(t);
	return t;
}

/* Empty the directory dfd (closed here); 0 or -errno. */
static int remove_entries(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = -errno;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0 || (rc = remove_entries(sub)) < 0) {
				if (sub < 0)
					rc = -errno;
				break;
			}
			if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0) {
				rc = -errno;
				break;
			}
		} else if (unlinkat(dirfd(d), e->d_name, 0) < 0) {
			rc = -errno;
			break;
		}
	}
	closedir(d);
	return rc;
}

int scratch_remove(const char *path, const char *cmd)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = dfd < 0 ? -errno : remove_entries(dfd);

	if (rc == 0 && rmdir(path) < 0)
		rc = -errno;
	if (rc < 0) {
		fprintf(stderr, PROG " %s: cannot remove %s: %s\n", cmd, path, strerror(-rc));
		return -1;
	}
	return 0;
}
