/* SPDX-License-Identifier: MIT */
/*
 * unitutil.h -- helpers of the unit suites (t/check_ring, t/check_pages,
 * t/check_regtable, t/check_commit, t/check_alloc, t/check_persist,
 * t/check_hash), which link the library's objects and call its private
 * functions (src/internal.h); testutil.h's helpers use the public API
 * only.
 */
#ifndef MKV_UNITUTIL_H
#define MKV_UNITUTIL_H

#include <stdint.h>

#include "internal.h"

/* The page words of the lease holder's handle: its own grant, used, quarantined. */
struct unit_words {
	uint64_t live, used, quar;
};

/**
 * Create the pool <tu_dir>/pool with @p pages pages of TU_PAGE_SIZE
 * (tu_pool_create()): the handle, the first to open it, holds the lease
 * (asserted); *w, if not NULL, gets its page words.
 */
void unit_holder_pool(uint64_t pages, struct mkv_pool **p, struct unit_words *w);

/** The registry's entry of @p key in @p p (asserted to be there). */
struct mkv_entry unit_lookup(struct mkv_pool *p, const char *key);

#endif
