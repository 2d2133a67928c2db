/* SPDX-License-Identifier: MIT */
/*
 * cachehooks.h -- what a host emulator provides in place of the CPU's cache
 * maintenance, for pools in non-coherent mode (share.c).
 *
 * The library refers to marukv_cache_hooks weakly: in a normal process
 * nothing defines it and share.c uses the CPU's own instructions.  A test
 * that emulates several hosts on one machine preloads an object that
 * defines it (t/hostemu.c); from then on every invalidation and every flush
 * of pool memory goes through these two functions instead.
 *
 * site names the call site ("lease.c:212"), so an emulator can leave one
 * site out on purpose and show that a test notices.
 */
#ifndef MKV_CACHEHOOKS_H
#define MKV_CACHEHOOKS_H

#include <stddef.h>
#include <stdint.h>

#define MKV_CACHE_HOOKS_VERSION 1U

struct mkv_cache_hooks {
	uint32_t version;      /* MKV_CACHE_HOOKS_VERSION */
	uint32_t reserved;
	/*
	 * Write back the dirty lines of [addr, addr + len) and drop them from
	 * the cache, so the next load reads the device.  Returns once done.
	 */
	void (*inval)(const void *addr, size_t len, const char *site);
	/* Write back the dirty lines of the range; returns once they landed. */
	void (*flush)(const void *addr, size_t len, const char *site);
};

/* default visibility: the library is built with hidden, and the definition
 * it must find is in another object */
extern const struct mkv_cache_hooks marukv_cache_hooks
	__attribute__((weak, visibility("default")));

#endif
