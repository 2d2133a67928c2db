/* SPDX-License-Identifier: MIT */
/*
 * persist.c -- mappings of pool files and their flush primitives, over
 * libpmem2.  On a page-cache file libpmem2 persists with msync; on fsdax
 * or devdax it uses the CPU's cacheline flushes.  On a file in memory
 * (tmpfs, ramfs, hugetlbfs) the page cache is the storage: there is
 * nothing below it to write back to, msync does no more than take a
 * system call (shmem's fsync is a no-op), and stores to a shared mapping
 * outlive the process that made them.  There a persist is only the
 * fence that orders the stores before it against the stores after it.
 */
#include "config.h"

#include <string.h>
#include <sys/vfs.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif
#include <linux/magic.h>

#include <libpmem2.h>

#include "internal.h"

/*
 * Copy n bytes into pool memory with stores that bypass the caches where
 * the processor has them (x86's non-temporal stores, SSE2): a value is
 * written once and read by others, and a store that goes through the
 * cache first reads the line it writes from memory.  Weakly ordered:
 * mkv_persist_copy_done() fences them.
 */
void
mkv_persist_copy(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
#if defined(__x86_64__)
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;

	if (n < 64 + head) {
		memcpy(d, s, n);
		return;
	}
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; n -= 64, d += 64, s += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));

		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
#endif
	memcpy(d, s, n);
}

void
mkv_persist_copy_done(void)
{
#if defined(__x86_64__)
	_mm_sfence();
#endif
}

static void
persist_in_memory(const void *addr, size_t len)
{
	(void)addr, (void)len;
	mkv_full_fence();
}

/* Whether fd's file lives in memory, with no storage under its page cache. */
bool
mkv_persist_in_memory(int fd)
{
	struct statfs fs;

	if (fstatfs(fd, &fs) < 0)
		return false;
	return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC ||
		fs.f_type == HUGETLBFS_MAGIC;
}

int
mkv_persist_map(int fd, size_t size, bool rdonly, struct mkv_mapping *m, const char *what)
{
	struct pmem2_config *cfg = NULL;
	struct pmem2_source *src = NULL;
	int rc;

	memset(m, 0, sizeof(*m));
	rc = pmem2_config_new(&cfg);
	if (rc) {
		rc = mkv_err_pmem2(rc, what);
		goto out;
	}
	if ((rc = pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE)) ||
	    (rc = pmem2_config_set_length(cfg, size)) ||
	    (rc = pmem2_config_set_sharing(cfg, PMEM2_SHARED)) ||
	    (rdonly && (rc = pmem2_config_set_protection(cfg, PMEM2_PROT_READ)))) {
		rc = mkv_err_pmem2(rc, what);
		goto out;
	}
	rc = pmem2_source_from_fd(&src, fd);
	if (rc) {
		rc = mkv_err_pmem2(rc, what);
		goto out;
	}
	rc = pmem2_map_new(&m->map, cfg, src);
	if (rc) {
		rc = mkv_err_pmem2(rc, what);
		goto out;
	}
	m->addr = pmem2_map_get_address(m->map);
	m->size = pmem2_map_get_size(m->map);
	m->persist = pmem2_get_persist_fn(m->map);
	m->page_granular = pmem2_map_get_store_granularity(m->map) == PMEM2_GRANULARITY_PAGE;
	if (m->page_granular && mkv_persist_in_memory(fd))
		m->persist = persist_in_memory;
out:
	pmem2_source_delete(&src);
	pmem2_config_delete(&cfg);
	return rc;
}

void
mkv_persist_unmap(struct mkv_mapping *m)
{
	if (m->map)
		pmem2_map_delete(&m->map);
	memset(m, 0, sizeof(*m));
}
