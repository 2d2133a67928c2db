/* SPDX-License-Identifier: MIT */
/*
 * file.c -- the files in the pool's directory, by name: opened and created
 * there (openat() on the directory's descriptor) without following a
 * link, and refused when they are not regular files with one name.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* "read" or "read and write": the access open flags ask for. */
const char *
mkv_file_access_name(int flags)
{
	return (flags & O_ACCMODE) == O_RDONLY ? "read" : "read and write";
}

/*
 * Open the pool file `name` without following a link, and check that it is
 * a regular file with no other name: a link or a second name planted in
 * the pool would make us write to another file (MKV_E_PERM).  -ENOENT if
 * it is not there.  O_NONBLOCK keeps a FIFO planted there from hanging the
 * open; it changes nothing for a regular file.
 */
int
mkv_file_open(struct mkv_pool *p, const char *name, int flags, int *fd)
{
	struct stat st;

	*fd = openat(p->dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (*fd < 0) {
		if (errno == ENOENT)
			return mkv_err(-ENOENT, "pool %s: %s is missing", p->path, name);
		if (errno == ELOOP)
			return mkv_err(MKV_E_PERM, "pool %s: %s is a symbolic link: refusing to follow it",
					p->path, name);
		if (errno == EACCES)
			return mkv_err(-EACCES, "pool %s: %s: permission denied (%s access is needed; see SECURITY in marukv(7))",
					p->path, name, mkv_file_access_name(flags));
		return mkv_err(-errno, "pool %s: %s: %m", p->path, name);
	}
	if (fstat(*fd, &st) < 0)
		return mkv_err(-errno, "pool %s: %s: %m", p->path, name);
	if (!S_ISREG(st.st_mode))
		return mkv_err(MKV_E_PERM, "pool %s: %s is not a regular file", p->path, name);
	if (st.st_nlink != 1)
		return mkv_err(MKV_E_PERM, "pool %s: %s has %llu names (hard links): refusing it",
				p->path, name, (unsigned long long)st.st_nlink);
	return 0;
}

/*
 * Create the pool file `name`: never over anything already there (a file
 * or a link), with the pool's permissions whatever the umask, and given to
 * the pool's group if it has one.
 */
int
mkv_file_create(struct mkv_pool *p, const char *name, int *fd)
{
	return mkv_file_create_at(p, p->dirfd, name, name, fd);
}

/* mkv_file_create() in the directory `dirfd`, named `shown` in errors. */
int
mkv_file_create_at(struct mkv_pool *p, int dirfd, const char *name, const char *shown, int *fd)
{
	*fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (*fd < 0)
		return mkv_err(errno == EEXIST ? MKV_E_PERM : -errno, "pool %s: cannot create %s: %m",
				p->path, shown);
	if (p->create_gid != (gid_t)-1 && fchown(*fd, (uid_t)-1, p->create_gid) < 0)
		return mkv_err(errno == EPERM ? MKV_E_PERM : -errno,
				"pool %s: cannot give %s to group %u: %m", p->path, shown,
				(unsigned)p->create_gid);
	if (fchmod(*fd, p->create_gid != (gid_t)-1 ? 0660 : 0600) < 0)
		return mkv_err(-errno, "pool %s: cannot set the mode of %s: %m", p->path, shown);
	return 0;
}

/*
 * Check a pool file that another library opens by name (LMDB's): a
 * regular file with one name, and the access it will need.  The pool's
 * directory is writable by its owner alone (pool_dir_open()), so nobody
 * else can swap the file between this check and that open.
 */
int
mkv_file_check(struct mkv_pool *p, const char *name, int flags)
{
	return mkv_file_check_at(p, p->dirfd, name, name, flags);
}

/* mkv_file_check() in the directory `dirfd`, named `shown` in errors. */
int
mkv_file_check_at(struct mkv_pool *p, int dirfd, const char *name, const char *shown, int flags)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return mkv_err(-ENOENT, "pool %s: %s is missing", p->path, shown);
		return mkv_err(-errno, "pool %s: %s: %m", p->path, shown);
	}
	if (S_ISLNK(st.st_mode))
		return mkv_err(MKV_E_PERM, "pool %s: %s is a symbolic link: refusing to follow it",
				p->path, shown);
	if (!S_ISREG(st.st_mode))
		return mkv_err(MKV_E_PERM, "pool %s: %s is not a regular file", p->path, shown);
	if (st.st_nlink != 1)
		return mkv_err(MKV_E_PERM, "pool %s: %s has %llu names (hard links): refusing it",
				p->path, shown, (unsigned long long)st.st_nlink);
	if (faccessat(dirfd, name, (flags & O_ACCMODE) == O_RDONLY ? R_OK : R_OK | W_OK,
			AT_EACCESS) < 0)
		return mkv_err(-errno, "pool %s: %s: %m (%s access is needed; see SECURITY in marukv(7))",
				p->path, shown, mkv_file_access_name(flags));
	return 0;
}

/*
 * Open `data`: a regular file, checked like every pool file, or a
 * device-DAX node (a character device), which an administrator may also
 * place as a symbolic link to /dev/daxX.Y; a link to anything else is
 * refused.  -ENOENT if it is not there.
 */
int
mkv_file_open_data(struct mkv_pool *p, int flags)
{
	bool linked = false;
	struct stat st;

	p->data_fd = openat(p->dirfd, MKV_FILE_DATA, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (p->data_fd < 0 && errno == ELOOP) {
		linked = true;
		p->data_fd = openat(p->dirfd, MKV_FILE_DATA, flags | O_NONBLOCK | O_CLOEXEC);
	}
	if (p->data_fd < 0) {
		if (errno == ENOENT)
			return mkv_err(-ENOENT, "pool %s: data is missing", p->path);
		if (errno == EACCES)
			return mkv_err(-EACCES, "pool %s: data: permission denied (%s access is needed; see SECURITY in marukv(7))",
					p->path, mkv_file_access_name(flags));
		return mkv_err(-errno, "pool %s: data: %m", p->path);
	}
	if (fstat(p->data_fd, &st) < 0)
		return mkv_err(-errno, "pool %s: data: %m", p->path);
	if (S_ISCHR(st.st_mode))
		return 0;
	if (linked)
		return mkv_err(MKV_E_PERM,
				"pool %s: data is a symbolic link to something other than a device-DAX node",
				p->path);
	if (!S_ISREG(st.st_mode))
		return mkv_err(MKV_E_PERM, "pool %s: data is not a regular file", p->path);
	if (st.st_nlink != 1)
		return mkv_err(MKV_E_PERM, "pool %s: data has %llu names (hard links): refusing it",
				p->path, (unsigned long long)st.st_nlink);
	return 0;
}
