/* SPDX-License-Identifier: MIT */
/*
 * unitutil.c -- helpers of the unit suites (unitutil.h).
 */
#include <string.h>

#include "testutil.h"
#include "unitutil.h"

void
unit_holder_pool(uint64_t pages, struct mkv_pool **p, struct unit_words *w)
{
	ck_assert_int_eq(tu_pool_create(tu_dir, pages * TU_PAGE_SIZE, TU_PAGE_SIZE, TU_MAX_CLIENTS,
			p), 0);
	ck_assert((*p)->h.holding);
	ck_assert_uint_eq((*p)->nr_pages, pages);
	if (!w)
		return;
	w->live = mkv_pages_grant_word((*p)->slot, (*p)->incarnation);
	w->used = mkv_pages_held_word(MKV_PG_USED, (*p)->h.generation);
	w->quar = mkv_pages_held_word(MKV_PG_QUARANTINED, (*p)->h.generation);
}

struct mkv_entry
unit_lookup(struct mkv_pool *p, const char *key)
{
	struct mkv_entry e;
	struct mkv_txn *t;

	ck_assert_int_eq(mkv_reg_rtxn(p, &t), 0);
	ck_assert_int_eq(mkv_reg_lookup(p, t, key, strlen(key), &e), 0);
	mkv_reg_rtxn_done(p, t);
	return e;
}
