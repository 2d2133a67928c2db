/* SPDX-License-Identifier: MIT */
/*
 * dax.c -- what backs the data arena: a regular file (tmpfs, fsdax, page
 * cache) or a device-DAX character device, identified with libdaxctl.
 */
#include "config.h"

#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <daxctl/libdaxctl.h>

#include "internal.h"

static void
dax_quiet(struct daxctl_ctx *ctx, int prio, const char *file, int line,
		const char *fn, const char *fmt, va_list ap)
{
	(void)ctx, (void)prio, (void)file, (void)line, (void)fn, (void)fmt, (void)ap;
}

/* Size, name and alignment of the device-DAX node with this dev_t, from libdaxctl. */
static int
dax_devdax_size(dev_t rdev, const char *what, uint64_t *size, char *devname,
		size_t devname_len, uint64_t *align)
{
	struct daxctl_ctx *ctx;
	struct daxctl_region *region;
	struct daxctl_dev *dev;
	int rc;

	rc = daxctl_new(&ctx);
	if (rc < 0)
		return mkv_err(rc, "%s: libdaxctl: cannot start: %d", what, rc);
	daxctl_set_log_fn(ctx, dax_quiet);
	rc = mkv_err(MKV_E_NOTPOOL, "%s: character device %u:%u is not a device-DAX node",
			what, major(rdev), minor(rdev));
	daxctl_region_foreach(ctx, region) {
		daxctl_dev_foreach(region, dev) {
			if ((unsigned)daxctl_dev_get_major(dev) == major(rdev) &&
			    (unsigned)daxctl_dev_get_minor(dev) == minor(rdev)) {
				*size = daxctl_dev_get_size(dev);
				*align = daxctl_dev_get_align(dev);
				snprintf(devname, devname_len, "%s", daxctl_dev_get_devname(dev));
				rc = 0;
				goto out;
			}
		}
	}
out:
	daxctl_unref(ctx);
	return rc;
}

int
mkv_dax_probe(int fd, const char *what, enum mkv_backing *kind, uint64_t *size,
		char *devname, size_t devname_len, uint64_t *align)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return mkv_err(-errno, "%s: %m", what);
	if (S_ISREG(st.st_mode)) {
		*kind = MKV_BACKING_FILE;
		*size = (uint64_t)st.st_size;
		return 0;
	}
	if (S_ISCHR(st.st_mode)) {
		*kind = MKV_BACKING_DEVDAX;
		return dax_devdax_size(st.st_rdev, what, size, devname, devname_len, align);
	}
	return mkv_err(MKV_E_NOTPOOL, "%s: neither a regular file nor a device-DAX node", what);
}

MKV_EXPORT const char *
mkv_backing_name(uint32_t backing)
{
	switch (backing) {
	case MKV_BACKING_FILE:
		return "file";
	case MKV_BACKING_TMPFS:
		return "tmpfs";
	case MKV_BACKING_FSDAX:
		return "fsdax";
	case MKV_BACKING_DEVDAX:
		return "devdax";
	}
	return "unknown";
}
