/* SPDX-License-Identifier: MIT */
/*
 * check_pages.c -- the page table (pages.c) and a client's grant cache
 * (alloc.c), driven in one process through their private interfaces.
 *
 * The test's handle opens the pool first and so holds the lease; the
 * page table is the holder's to change, under h.lock (commit.c calls
 * pages.c with it held), so each test holds that lock while it changes
 * page states: the handle's service thread, whose reclamation pass would
 * free the grants a test sets up, waits meanwhile.
 */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "unitutil.h"

#define PAGES 64U

static struct mkv_pool *p;
static struct unit_words words;

static void
pages_setup(void)
{
	tu_setup();
	unit_holder_pool(PAGES, &p, &words);
	pthread_mutex_lock(&p->h.lock);
	ck_assert_uint_eq(p->h.free_pages, PAGES);
	ck_assert_uint_eq(p->h.quarantined_pages, 0);
}

static void
pages_teardown(void)
{
	pthread_mutex_unlock(&p->h.lock);
	mkv_pool_close(&p);
	tu_teardown();
}

static void
set_pages(uint64_t page, uint64_t n, uint64_t from, uint64_t to)
{
	ck_assert(mkv_pages_move_all(p, &(struct mkv_extent){ page, n }, from, to));
}

static void
assert_ext(const struct mkv_extent *e, uint64_t page, uint64_t npages)
{
	ck_assert_msg(e->page == page && e->npages == npages,
			"extent {%llu, %llu}, expected {%llu, %llu}", (unsigned long long)e->page,
			(unsigned long long)e->npages, (unsigned long long)page,
			(unsigned long long)npages);
}

START_TEST(test_grant_takes_runs_in_turn)
{
	struct mkv_extent e;

	ck_assert_uint_eq(p->state->rotor, 0);
	ck_assert_int_eq(mkv_pages_grant(p, 4, words.live, &e), 0);
	assert_ext(&e, 0, 4);
	ck_assert(mkv_pages_are(p, &e, words.live));
	ck_assert_uint_eq(mkv_pages_load(p, 4), MKV_PG_FREE);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 4);
	ck_assert_uint_eq(p->state->rotor, 4);
	ck_assert_int_eq(mkv_pages_grant(p, 3, words.live, &e), 0);
	assert_ext(&e, 4, 3);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 7);
	ck_assert_uint_eq(p->h.quarantined_pages, 0);
	ck_assert_uint_eq(p->state->rotor, 7);
}
END_TEST

START_TEST(test_grant_skips_pages_in_use_and_wraps)
{
	struct mkv_extent e;

	set_pages(2, 1, MKV_PG_FREE, words.used);
	p->state->rotor = 0;
	ck_assert_int_eq(mkv_pages_grant(p, 3, words.live, &e), 0);
	assert_ext(&e, 3, 3);
	/* from the rotor to the end is too short: on from the start */
	p->state->rotor = PAGES - 2;
	ck_assert_int_eq(mkv_pages_grant(p, 4, words.live, &e), 0);
	assert_ext(&e, 6, 4);
	ck_assert_uint_eq(p->state->rotor, 10);
	ck_assert_uint_eq(mkv_pages_load(p, PAGES - 1), MKV_PG_FREE);
	/* next fit: the free pages 0 and 1 wait for the rotor to come round */
	ck_assert_int_eq(mkv_pages_grant(p, 2, words.live, &e), 0);
	assert_ext(&e, 10, 2);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 1 - 3 - 4 - 2);
}
END_TEST

START_TEST(test_grant_refuses_when_no_run_is_free)
{
	struct mkv_extent e;

	mkv_err_clear();
	ck_assert_int_eq(mkv_pages_grant(p, PAGES + 1, words.live, &e), MKV_E_NOSPC);
	ck_assert_str_ne(mkv_errormsg(), "");
	ck_assert_uint_eq(p->h.free_pages, PAGES);
	for (uint64_t i = 1; i < PAGES; i += 2)
		set_pages(i, 1, MKV_PG_FREE, words.used);
	ck_assert_uint_eq(p->h.free_pages, PAGES / 2);
	/* half the pages free, no two together */
	mkv_err_clear();
	ck_assert_int_eq(mkv_pages_grant(p, 2, words.live, &e), MKV_E_NOSPC);
	ck_assert_str_ne(mkv_errormsg(), "");
	ck_assert_uint_eq(p->h.free_pages, PAGES / 2);
	for (uint64_t i = 0; i < PAGES; i += 2)
		ck_assert_uint_eq(mkv_pages_load(p, i), MKV_PG_FREE);
	ck_assert_int_eq(mkv_pages_grant(p, 1, words.live, &e), 0);
	ck_assert_uint_eq(e.page % 2, 0);
	ck_assert_uint_eq(e.npages, 1);
	ck_assert_uint_eq(mkv_pages_load(p, e.page), words.live);
	ck_assert_uint_eq(p->h.free_pages, PAGES / 2 - 1);
}
END_TEST

START_TEST(test_grant_reclaims_void_grants_when_short)
{
	uint64_t stale = mkv_pages_grant_word(p->slot, p->incarnation - 1);
	struct mkv_extent e;

	set_pages(0, PAGES, MKV_PG_FREE, stale);
	ck_assert_uint_eq(p->h.free_pages, 0);
	p->state->rotor = 0;
	ck_assert_int_eq(mkv_pages_grant(p, 4, words.live, &e), 0);
	assert_ext(&e, 0, 4);
	ck_assert(mkv_pages_are(p, &e, words.live));
	ck_assert(mkv_pages_are(p, &(struct mkv_extent){ 4, PAGES - 4 }, MKV_PG_FREE));
	ck_assert_uint_eq(p->h.free_pages, PAGES - 4);
}
END_TEST

START_TEST(test_move_takes_only_pages_in_the_from_state)
{
	struct mkv_extent x = { 8, 4 }, y = { 12, 4 };
	uint64_t stale = mkv_pages_grant_word(p->slot, p->incarnation + 1);

	set_pages(9, 1, MKV_PG_FREE, words.used);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 1);
	ck_assert_uint_eq(mkv_pages_move(p, &x, MKV_PG_FREE, words.quar), 3);
	ck_assert_uint_eq(mkv_pages_load(p, 8), words.quar);
	ck_assert_uint_eq(mkv_pages_load(p, 9), words.used);
	ck_assert_uint_eq(mkv_pages_load(p, 11), words.quar);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 4);
	ck_assert_uint_eq(p->h.quarantined_pages, 3);
	ck_assert_uint_eq(mkv_pages_move(p, &x, words.quar, MKV_PG_FREE), 3);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 1);
	ck_assert_uint_eq(p->h.quarantined_pages, 0);
	/* all or nothing: page 9 is not free, pages 8, 10 and 11 stay free */
	ck_assert(!mkv_pages_move_all(p, &x, MKV_PG_FREE, words.live));
	ck_assert_uint_eq(mkv_pages_load(p, 8), MKV_PG_FREE);
	ck_assert_uint_eq(mkv_pages_load(p, 9), words.used);
	ck_assert_uint_eq(mkv_pages_load(p, 10), MKV_PG_FREE);
	ck_assert_uint_eq(mkv_pages_load(p, 11), MKV_PG_FREE);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 1);
	ck_assert(mkv_pages_move_all(p, &y, MKV_PG_FREE, words.live));
	ck_assert(mkv_pages_are(p, &y, words.live));
	ck_assert_uint_eq(p->h.free_pages, PAGES - 5);
	/* the exact word: another incarnation's grant is not ours to move */
	ck_assert_uint_eq(mkv_pages_move(p, &y, stale, MKV_PG_FREE), 0);
	ck_assert(!mkv_pages_move_all(p, &y, stale, MKV_PG_FREE));
	ck_assert(mkv_pages_are(p, &y, words.live));
	ck_assert_uint_eq(p->h.free_pages, PAGES - 5);
	/* used -> quarantined counts quarantine only */
	ck_assert(mkv_pages_move_all(p, &(struct mkv_extent){ 9, 1 }, words.used, words.quar));
	ck_assert_uint_eq(p->h.free_pages, PAGES - 5);
	ck_assert_uint_eq(p->h.quarantined_pages, 1);
	ck_assert(!mkv_pages_are(p, &x, MKV_PG_FREE));
}
END_TEST

START_TEST(test_reclaim_frees_void_grants_only)
{
	struct mkv_pool *o;
	uint64_t other, older = mkv_pages_grant_word(p->slot, p->incarnation - 1);
	/* a slot nobody claims: its pid is 0, whatever the incarnation */
	uint64_t unowned = mkv_pages_grant_word(TU_MAX_CLIENTS - 1,
			MKV_SLOT_INC(p->slots[TU_MAX_CLIENTS - 1].owner));
	uint64_t nowhere = mkv_pages_grant_word(TU_MAX_CLIENTS + 3, 1);

	/* a second live client in this process, in its own slot */
	ck_assert_int_eq(tu_pool_open(tu_dir, MKV_RDONLY, &o), 0);
	ck_assert_uint_ne(o->slot, p->slot);
	ck_assert_uint_ne(o->slot, TU_MAX_CLIENTS - 1);
	ck_assert_uint_eq(MKV_SLOT_PID(p->slots[TU_MAX_CLIENTS - 1].owner), 0);
	other = mkv_pages_grant_word(o->slot, o->incarnation);
	set_pages(0, 2, MKV_PG_FREE, words.live);
	set_pages(2, 2, MKV_PG_FREE, other);
	set_pages(4, 2, MKV_PG_FREE, older);
	set_pages(6, 2, MKV_PG_FREE, unowned);
	set_pages(8, 1, MKV_PG_FREE, nowhere);
	set_pages(9, 1, MKV_PG_FREE, words.used);
	set_pages(10, 1, MKV_PG_FREE, words.quar);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 11);

	ck_assert_uint_eq(mkv_pages_reclaim(p, 0), 5);
	ck_assert(mkv_pages_are(p, &(struct mkv_extent){ 0, 2 }, words.live));
	ck_assert(mkv_pages_are(p, &(struct mkv_extent){ 2, 2 }, other));
	ck_assert(mkv_pages_are(p, &(struct mkv_extent){ 4, 5 }, MKV_PG_FREE));
	ck_assert_uint_eq(mkv_pages_load(p, 9), words.used);
	ck_assert_uint_eq(mkv_pages_load(p, 10), words.quar);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 6);
	ck_assert_uint_eq(p->h.quarantined_pages, 1);
	/* a client leaving gives back its own, and only its own */
	ck_assert_uint_eq(mkv_pages_reclaim(p, words.live), 2);
	ck_assert(mkv_pages_are(p, &(struct mkv_extent){ 0, 2 }, MKV_PG_FREE));
	ck_assert(mkv_pages_are(p, &(struct mkv_extent){ 2, 2 }, other));
	ck_assert_uint_eq(mkv_pages_reclaim(p, 0), 0);
	/* once the other client has gone, its grant is void */
	mkv_pool_close(&o);
	ck_assert_uint_eq(mkv_pages_reclaim(p, 0), 2);
	ck_assert(mkv_pages_are(p, &(struct mkv_extent){ 0, 9 }, MKV_PG_FREE));
	ck_assert_uint_eq(p->h.free_pages, PAGES - 2);
}
END_TEST

START_TEST(test_grant_cache_merges_neighbours)
{
	ck_assert_uint_eq(mkv_grants_cached(p), 0);
	mkv_grants_put(p, &(struct mkv_extent){ 10, 4 });
	mkv_grants_put(p, &(struct mkv_extent){ 14, 2 });  /* after it */
	ck_assert_uint_eq(p->grants.n, 1);
	assert_ext(&p->grants.ext[0], 10, 6);
	mkv_grants_put(p, &(struct mkv_extent){ 8, 2 });   /* before it */
	ck_assert_uint_eq(p->grants.n, 1);
	assert_ext(&p->grants.ext[0], 8, 8);
	mkv_grants_put(p, &(struct mkv_extent){ 30, 3 });  /* apart */
	ck_assert_uint_eq(p->grants.n, 2);
	ck_assert_uint_eq(mkv_grants_cached(p), 11);
	/* many apart: the cache grows */
	for (uint64_t i = 0; i < 40; i++)
		mkv_grants_put(p, &(struct mkv_extent){ 100 + 2 * i, 1 });
	ck_assert_uint_eq(p->grants.n, 42);
	ck_assert_uint_eq(mkv_grants_cached(p), 51);
}
END_TEST

START_TEST(test_grant_cache_carves_and_hands_back)
{
	struct mkv_extent e;

	mkv_grants_put(p, &(struct mkv_extent){ 8, 8 });
	mkv_grants_put(p, &(struct mkv_extent){ 30, 3 });
	ck_assert(mkv_grants_take(p, 3, &e));
	assert_ext(&e, 8, 3);
	assert_ext(&p->grants.ext[0], 11, 5);
	ck_assert_uint_eq(mkv_grants_cached(p), 8);
	/* the first extent long enough, taken whole, leaves the cache */
	ck_assert(mkv_grants_take(p, 5, &e));
	assert_ext(&e, 11, 5);
	ck_assert_uint_eq(p->grants.n, 1);
	/* too long for any: nothing taken */
	ck_assert(!mkv_grants_take(p, 4, &e));
	ck_assert_uint_eq(mkv_grants_cached(p), 3);
	mkv_grants_put(p, &(struct mkv_extent){ 40, 2 });
	mkv_grants_put(p, &(struct mkv_extent){ 50, 5 });
	ck_assert(mkv_grants_take(p, 4, &e));
	assert_ext(&e, 50, 4);
	ck_assert_uint_eq(mkv_grants_cached(p), 6);
	/* handed back whole, one at a time, until none is left */
	ck_assert(mkv_grants_take_any(p, &e));
	ck_assert_uint_eq(p->grants.n, 2);
	ck_assert_uint_eq(mkv_grants_cached(p), 6 - e.npages);
	ck_assert(mkv_grants_take_any(p, &e));
	ck_assert(mkv_grants_take_any(p, &e));
	ck_assert(!mkv_grants_take_any(p, &e));
	ck_assert(!mkv_grants_take(p, 1, &e));
	ck_assert_uint_eq(mkv_grants_cached(p), 0);
}
END_TEST

static Suite *
pages_suite(void)
{
	Suite *s = suite_create("pages");
	TCase *tc = tcase_create("table");
	TCase *tg = tcase_create("grant_cache");

	tcase_add_checked_fixture(tc, pages_setup, pages_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_grant_takes_runs_in_turn);
	tcase_add_test(tc, test_grant_skips_pages_in_use_and_wraps);
	tcase_add_test(tc, test_grant_refuses_when_no_run_is_free);
	tcase_add_test(tc, test_grant_reclaims_void_grants_when_short);
	tcase_add_test(tc, test_move_takes_only_pages_in_the_from_state);
	tcase_add_test(tc, test_reclaim_frees_void_grants_only);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(tg, pages_setup, pages_teardown);
	tcase_set_timeout(tg, 60);
	tcase_add_test(tg, test_grant_cache_merges_neighbours);
	tcase_add_test(tg, test_grant_cache_carves_and_hands_back);
	suite_add_tcase(s, tg);
	return s;
}

int
main(void)
{
	return tu_run_suite(pages_suite());
}
