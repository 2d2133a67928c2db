/* SPDX-License-Identifier: MIT */
/*
 * lock.c -- the locks on the pool's files, none of which may hang a
 * caller when a stopped process holds them: flock() of a file (the pool's
 * directory, super) until a deadline, and the open-file-description locks
 * on single bytes of super (client slots, nodes: see layout.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>

#include "internal.h"

/*
 * flock(fd, how | LOCK_NB) until it succeeds or the deadline (a
 * mkv_clock_now() time) passes: 0, -ETIMEDOUT or another -errno.  A lock held
 * by a stopped process must not hang the caller.
 */
int
mkv_lock_until(int fd, int how, uint64_t deadline)
{
	struct timespec nap = { 0, 1000 * 1000 };

	while (flock(fd, how | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if (mkv_clock_now() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
	return 0;
}

/*
 * Lock (F_WRLCK) or unlock (F_UNLCK) byte off of super with an
 * open-file-description lock, without waiting: 0 or -errno (-EAGAIN: held
 * by another).  See layout.h for which bytes mean what.
 */
int
mkv_lock_super(const struct mkv_pool *p, uint64_t off, short type)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t)off, .l_len = 1 };

	return fcntl(p->super_fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

/* mkv_lock_super(F_WRLCK), retried until the deadline: 0, -ETIMEDOUT or -errno. */
int
mkv_lock_super_until(const struct mkv_pool *p, uint64_t off, uint64_t deadline)
{
	struct timespec nap = { 0, 1000 * 1000 };
	int rc;

	while ((rc = mkv_lock_super(p, off, F_WRLCK)) == -EAGAIN || rc == -EACCES || rc == -EINTR) {
		if (mkv_clock_now() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&nap, NULL);
	}
	return rc;
}

/* Whether another open file description holds byte off of super (true if unknown). */
bool
mkv_lock_super_held(const struct mkv_pool *p, uint64_t off)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)off, .l_len = 1 };

	if (fcntl(p->super_fd, F_OFD_GETLK, &fl) < 0)
		return true;
	return fl.l_type != F_UNLCK;
}
