/* SPDX-License-Identifier: MIT */
/*
 * lockdir.c -- where a non-coherent pool keeps LMDB's lock file: in a
 * directory of this host's, one per pool, never in the pool's directory.
 * LMDB's reader table and write mutex are process-shared pthread objects
 * in that file, which work between the processes of one host only; the
 * pool's directory lies on memory every host shares.
 *
 * The directory is $MARUKV_LOCK_DIR/marukv-UUID, /dev/shm by default
 * (tmpfs: every host's own), UUID the pool's as marukv-stat prints it.
 * LMDB opens its data file by name and its lock file by that name and
 * "-lock" (MDB_NOSUBDIR), so the directory holds a symbolic link
 * registry.mdb to the pool's registry.mdb and the lock file
 * registry.mdb-lock; LMDB is given the link's name through our descriptor
 * of the directory (/proc/self/fd/N/registry.mdb), so it opens the
 * directory checked here whatever happens to its path meanwhile.
 *
 * The base is ground others may prepare (/dev/shm is anyone's to write),
 * as the pool's own directory may be: the directory must be ours or the
 * pool's owner's, not wider than the pool's directory, the link must lead
 * to the pool's registry.mdb itself and the lock file must be a regular
 * file with one name; anything else is refused, never followed or fixed.
 * A directory nobody else can write cannot change after these checks but
 * by its owner, and the base's sticky bit keeps others from renaming it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define LOCKDIR_BASE "/dev/shm"

/* "BASE/marukv-UUID" in a malloc'd string, BASE from $MARUKV_LOCK_DIR. */
static int
lockdir_path(struct mkv_pool *p, const uint8_t uuid[16], char **path)
{
	const char *base = getenv("MARUKV_LOCK_DIR");
	const uint8_t *u = uuid;

	if (!base || !*base)
		base = LOCKDIR_BASE;
	if (*base != '/')
		return mkv_err(MKV_E_INVAL, "pool %s: MARUKV_LOCK_DIR (%s) is not an absolute path",
				p->path, base);
	if (asprintf(path,
			"%s/marukv-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			base, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
			u[11], u[12], u[13], u[14], u[15]) < 0) {
		*path = NULL;
		return mkv_err(MKV_E_NOMEM, "pool %s: out of memory", p->path);
	}
	return 0;
}

/*
 * The directory's owner, mode and group, against the pool's directory
 * (`pool`): owned by us, by the pool's owner, or (a pool with a group) by
 * whichever member of the pool's group opened the pool first on this host,
 * which only a member (or root) can give to that group; no permission the
 * pool's directory lacks (so writable by its owner alone), and a group's
 * access only for the pool's group (`group`, -1 if it has none).
 */
static int
lockdir_owner_check(struct mkv_pool *p, const char *path, const struct stat *st,
		const struct stat *pool, gid_t group)
{
	mode_t mode = st->st_mode & 07777, allowed = pool->st_mode & 0750;

	if (st->st_uid != geteuid() && st->st_uid != pool->st_uid &&
	    (group == (gid_t)-1 || st->st_gid != group))
		return mkv_err(MKV_E_PERM,
				"pool %s: lock directory %s belongs to uid %u, neither this user nor the pool's owner nor its group: refusing it",
				p->path, path, (unsigned)st->st_uid);
	if (mode & ~allowed)
		return mkv_err(MKV_E_PERM,
				"pool %s: lock directory %s has mode %04o, wider than the pool directory's %04o: refusing it",
				p->path, path, (unsigned)mode, (unsigned)allowed);
	if ((mode & 0070) && (group == (gid_t)-1 || st->st_gid != group))
		return mkv_err(MKV_E_PERM,
				"pool %s: lock directory %s is open to group %u, which is not the pool's: refusing it",
				p->path, path, (unsigned)st->st_gid);
	return 0;
}

/*
 * Make the directory, or open the one there: never through a link.  One
 * we make is 0700, or 0750 with the pool's group, as the pool's own.
 */
static int
lockdir_dir_open(struct mkv_pool *p, const char *path, const struct stat *pool, gid_t group,
		int *fd)
{
	bool made = mkdir(path, 0700) == 0;
	struct stat st;

	if (!made && errno != EEXIST)
		return mkv_err(-errno, "pool %s: cannot create lock directory %s: %m", p->path, path);
	*fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0) {
		if (errno == ELOOP || (errno == ENOTDIR && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)))
			return mkv_err(MKV_E_PERM,
					"pool %s: lock directory %s is a symbolic link: refusing to follow it",
					p->path, path);
		if (errno == ENOTDIR)
			return mkv_err(MKV_E_PERM, "pool %s: lock directory %s is not a directory",
					p->path, path);
		return mkv_err(-errno, "pool %s: lock directory %s: %m", p->path, path);
	}
	if (made && group != (gid_t)-1 && fchown(*fd, (uid_t)-1, group) < 0)
		return mkv_err(errno == EPERM ? MKV_E_PERM : -errno,
				"pool %s: cannot give lock directory %s to group %u: %m", p->path, path,
				(unsigned)group);
	if (made && fchmod(*fd, (group != (gid_t)-1 ? 0750 : 0700) & pool->st_mode) < 0)
		return mkv_err(-errno, "pool %s: cannot set the mode of lock directory %s: %m",
				p->path, path);
	if (fstat(*fd, &st) < 0)
		return mkv_err(-errno, "pool %s: lock directory %s: %m", p->path, path);
	return lockdir_owner_check(p, path, &st, pool, group);
}

/*
 * The link registry.mdb: made if missing, to the pool's registry.mdb by
 * the absolute name of the directory we opened; then it must lead to that
 * very file.  A link that leads elsewhere or nowhere (the pool moved, or
 * someone repointed it) is refused, not replaced.
 */
static int
lockdir_link(struct mkv_pool *p, const char *path, const struct stat *reg, int fd)
{
	char self[32], target[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstatat(fd, MKV_FILE_REGISTRY, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return mkv_err(-errno, "pool %s: %s/registry.mdb: %m", p->path, path);
		snprintf(self, sizeof(self), "/proc/self/fd/%d", p->dirfd);
		n = readlink(self, target, sizeof(target));
		if (n < 0 || (size_t)n + sizeof("/" MKV_FILE_REGISTRY) > sizeof(target))
			return mkv_err(n < 0 ? -errno : -ENAMETOOLONG,
					"pool %s: cannot name the pool's directory: %m", p->path);
		memcpy(target + n, "/" MKV_FILE_REGISTRY, sizeof("/" MKV_FILE_REGISTRY));
		if (symlinkat(target, fd, MKV_FILE_REGISTRY) < 0)
			return mkv_err(-errno, "pool %s: cannot create %s/registry.mdb: %m", p->path,
					path);
	} else if (!S_ISLNK(st.st_mode)) {
		return mkv_err(MKV_E_PERM,
				"pool %s: %s/registry.mdb is not a symbolic link to the pool's registry.mdb: refusing it",
				p->path, path);
	}
	if (fstatat(fd, MKV_FILE_REGISTRY, &st, 0) < 0 || st.st_dev != reg->st_dev ||
	    st.st_ino != reg->st_ino)
		return mkv_err(MKV_E_PERM,
				"pool %s: %s/registry.mdb does not lead to the pool's registry.mdb: refusing it (if the pool was moved, remove %s)",
				p->path, path, path);
	return 0;
}

/*
 * Open this host's lock directory of the pool with identity `uuid`, making
 * what is missing, and check it; *fd is its descriptor.  LMDB's lock file
 * is made here as the pool's files are, so that LMDB never makes it with
 * the umask's mode.  The pool has a group if registry.mdb is open to one.
 */
int
mkv_lockdir_open(struct mkv_pool *p, const uint8_t uuid[16], int *fd)
{
	char *path = NULL, *shown = NULL;
	struct stat pool, reg;
	gid_t group;
	int rc, lock;

	*fd = -1;
	if ((rc = lockdir_path(p, uuid, &path)))
		return rc;
	if (fstat(p->dirfd, &pool) < 0 ||
	    fstatat(p->dirfd, MKV_FILE_REGISTRY, &reg, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = mkv_err(-errno, "pool %s: %m", p->path);
		goto out;
	}
	group = (reg.st_mode & 0070) ? reg.st_gid : (gid_t)-1;
	if ((rc = lockdir_dir_open(p, path, &pool, group, fd)) ||
	    (rc = lockdir_link(p, path, &reg, *fd)))
		goto out;
	if (asprintf(&shown, "%s/%s", path, MKV_FILE_LOCK) < 0) {
		shown = NULL;
		rc = mkv_err(MKV_E_NOMEM, "pool %s: out of memory", p->path);
		goto out;
	}
	rc = mkv_file_check_at(p, *fd, MKV_FILE_LOCK, shown, O_RDWR);
	if (rc == -ENOENT) {
		p->create_gid = group;
		if (!(rc = mkv_file_create_at(p, *fd, MKV_FILE_LOCK, shown, &lock)))
			close(lock);
	}
out:
	if (rc && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	free(shown);
	free(path);
	return rc;
}

/*
 * Remove this host's lock directory of a pool whose creation failed: its
 * uuid will never name a pool.  Only what this library puts there goes,
 * by the descriptor of the directory opened without following a link;
 * anything else keeps the directory.
 */
void
mkv_lockdir_remove(struct mkv_pool *p, const uint8_t uuid[16])
{
	char *path;
	int fd;

	if (lockdir_path(p, uuid, &path))
		return;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		unlinkat(fd, MKV_FILE_LOCK, 0);
		unlinkat(fd, MKV_FILE_REGISTRY, 0);
		close(fd);
		rmdir(path);
	}
	free(path);
}
