/* SPDX-License-Identifier: MIT */
/*
 * share.c -- loads and stores of pool memory that other processes, and on
 * CXL other hosts, read and write.
 *
 * A coherent pool (one host, or a window of CXL memory the hardware keeps
 * coherent) needs nothing beyond the atomics the callers use and the
 * persistence libpmem2 gives.  A non-coherent pool lives in memory that
 * several hosts cache without snooping each other: a host that stores a
 * word must write its line back before anyone may rely on it, and a host
 * that loads a word another host may have written must first drop its own
 * copy of the line.  Both are done with CLFLUSH (DC CIVAC on arm64),
 * followed by a full fence: unlike CLFLUSHOPT, CLFLUSH is ordered with the
 * stores before it and the fence waits for it, so the line has reached the
 * device before the next step (marukv(7), NON-COHERENT MEMORY).
 *
 * A host emulator (cachehooks.h) may stand in for the instructions.
 */
#include "config.h"

#include <string.h>

#include "cachehooks.h"
#include "internal.h"

static inline void
line_flush(const void *line)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_clflush(line);
#elif defined(__aarch64__)
	__asm__ volatile("dc civac, %0" : : "r"(line) : "memory");
#else
	(void)line;
#endif
}

static inline void
lines_done(void)
{
#if defined(__aarch64__)
	__asm__ volatile("dsb sy" : : : "memory");
#else
	mkv_full_fence();
#endif
}

bool
mkv_share_supported(void)
{
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
	return true;
#else
	return false;
#endif
}

/* The emulator's hooks, if one is loaded and speaks our version. */
static const struct mkv_cache_hooks *
hooks(void)
{
	const struct mkv_cache_hooks *h = &marukv_cache_hooks;

	return h && h->version == MKV_CACHE_HOOKS_VERSION ? h : NULL;
}

void
mkv_share_init(struct mkv_pool *p, uint32_t coherence)
{
	p->noncoherent = coherence == MKV_NONCOHERENT;
	p->cache_hooks = p->noncoherent ? hooks() : NULL;
}

static void
lines_flush(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(MKV_CACHELINE - 1);
	uintptr_t end = (uintptr_t)addr + len;

	for (; a < end; a += MKV_CACHELINE)
		line_flush((const void *)a);
}

static void
lines(const void *addr, size_t len)
{
	mkv_full_fence();
	lines_flush(addr, len);
	lines_done();
}

/*
 * CLFLUSH both writes a dirty line back and drops it: one instruction for
 * both directions; an emulator is told which one is meant.
 */
static void
maintain(const struct mkv_pool *p, const void *addr, size_t len, const char *site, bool inval)
{
	if (!p->noncoherent || len == 0)
		return;
	if (!p->cache_hooks)
		lines(addr, len);
	else if (inval)
		p->cache_hooks->inval(addr, len, site);
	else
		p->cache_hooks->flush(addr, len, site);
}

void
mkv_share_inval_at(const struct mkv_pool *p, const void *addr, size_t len, const char *site)
{
	maintain(p, addr, len, site, true);
}

/*
 * Several ranges at once, between one pair of fences, and the first line
 * of each fetched again at once: the loads after them wait for memory
 * together instead of one after another.
 */
void
mkv_share_inval_n_at(const struct mkv_pool *p, const void *const *addr, unsigned n, size_t len,
		const char *site)
{
	if (!p->noncoherent || len == 0)
		return;
	if (p->cache_hooks) {
		for (unsigned i = 0; i < n; i++)
			p->cache_hooks->inval(addr[i], len, site);
		return;
	}
	mkv_full_fence();
	for (unsigned i = 0; i < n; i++)
		lines_flush(addr[i], len);
	lines_done();
	/* the reads come from memory now: start them all */
	for (unsigned i = 0; i < n; i++)
		__builtin_prefetch(addr[i]);
}

void
mkv_share_wb_at(const struct mkv_pool *p, const void *addr, size_t len, const char *site)
{
	maintain(p, addr, len, site, false);
}

/* The mapping addr lies in: super's, or the data arena's. */
static const struct mkv_mapping *
mapping_of(const struct mkv_pool *p, const void *addr)
{
	const char *a = addr, *d = p->data.addr;

	return d && a >= d && a < d + p->data.size ? &p->data : &p->super;
}

void
mkv_share_persist_at(const struct mkv_pool *p, const void *addr, size_t len, const char *site)
{
	const struct mkv_mapping *m = mapping_of(p, addr);

	if (len == 0)
		return;
	mkv_share_wb_at(p, addr, len, site);
	/* written back to the device, which on DAX memory is persistence too */
	if (p->noncoherent && !m->page_granular)
		return;
	m->persist(addr, len);
}

MKV_EXPORT const char *
mkv_coherence_name(uint32_t coherence)
{
	switch (coherence) {
	case MKV_COHERENT:
		return "coherent";
	case MKV_NONCOHERENT:
		return "non-coherent";
	}
	return "unknown";
}
