/* SPDX-License-Identifier: MIT */
/*
 * persist.c -- mappings of pool files and their flush primitives, over
 * libpmem2.  On tmpfs or a page-cache file libpmem2 persists with msync;
 * on fsdax or devdax it uses the CPU's cacheline flushes.
 */
#include "config.h"

#include <string.h>

#include <libpmem2.h>

#include "internal.h"

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
