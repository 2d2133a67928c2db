/* SPDX-License-Identifier: MIT */
/*
 * check_commit.c -- group commit (commit.c) driven directly by the lease
 * holder in one process: batches of requests applied in one registry txn,
 * each with its own result; deletes through quarantine; the replay of a
 * request the registry recorded as applied; eviction and watermarks by
 * their percents; bad requests refused without failing their batch-mates;
 * a superseded holder's batch not applied at all; a holder woken by a
 * write just before its renewal falls due still renews in time.
 *
 * The test's handle opens the pool first and so holds the lease; it calls
 * mkv_commit() with h.lock held, as the service thread and the write path
 * do, and reads the outcome through the public API, the page table and
 * the registry.  A request from the ring names its slot, incarnation,
 * entry (rq) and sequence number; the test makes such requests in its own
 * slot, without the ring.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "testutil.h"
#include "unitutil.h"

#define PAGES 64U

static struct mkv_pool *p;
static struct unit_words words;

static void
commit_setup(void)
{
	tu_setup();
	unit_holder_pool(PAGES, &p, &words);
}

static void
commit_teardown(void)
{
	mkv_pool_close(&p);
	tu_teardown();
}

/* mkv_commit() as the holder calls it: with h.lock held. */
static int
commit(struct mkv_req *reqs, unsigned n)
{
	int rc;

	pthread_mutex_lock(&p->h.lock);
	rc = mkv_commit(p, reqs, n);
	pthread_mutex_unlock(&p->h.lock);
	return rc;
}

static struct mkv_req
grant_req(uint64_t npages)
{
	return (struct mkv_req){ .op = MKV_OP_GRANT, .slot = p->slot, .inc = p->incarnation,
			.ext = { 0, npages }, .length = npages };
}

/* A publish of key on ext, its len bytes written first (the key's pattern). */
static struct mkv_req
publish_req(const char *key, struct mkv_extent ext, uint64_t len)
{
	void *at = mkv_pool_page_addr(p, ext.page);

	tu_fill(at, len, key, strlen(key));
	return (struct mkv_req){ .op = MKV_OP_PUBLISH, .slot = p->slot, .inc = p->incarnation,
			.key = key, .klen = strlen(key), .ext = ext, .length = len,
			.checksum = mkv_hash_checksum(at, len) };
}

static struct mkv_req
del_req(const char *key)
{
	return (struct mkv_req){ .op = MKV_OP_DEL, .slot = p->slot, .inc = p->incarnation,
			.key = key, .klen = strlen(key) };
}

/* Pages granted, in a commit of their own. */
static struct mkv_extent
granted(uint64_t npages)
{
	struct mkv_req g = grant_req(npages);

	ck_assert_int_eq(commit(&g, 1), 0);
	ck_assert_int_eq(g.result, 0);
	ck_assert_uint_eq(g.ext.npages, npages);
	return g.ext;
}

/* key published with len bytes on pages granted for it; its extent. */
static struct mkv_extent
published(const char *key, uint64_t len)
{
	struct mkv_extent e = granted(mkv_pool_pages_for(p, len));
	struct mkv_req r = publish_req(key, e, len);

	ck_assert_int_eq(commit(&r, 1), 0);
	ck_assert_int_eq(r.result, 0);
	return e;
}

static void
assert_visible(const char *key, uint64_t len)
{
	int rc = tu_check(p, key, strlen(key), len);

	ck_assert_msg(rc == 0, "key %s: tu_check = %d", key, rc);
}

static uint64_t
meta(const char *name)
{
	struct mkv_txn *t;
	uint64_t v;

	ck_assert_int_eq(mkv_reg_rtxn(p, &t), 0);
	ck_assert_int_eq(mkv_reg_meta_get(p, t, name, &v), 0);
	mkv_reg_rtxn_done(p, t);
	return v;
}

START_TEST(test_grants_and_publishes_in_one_txn)
{
	struct mkv_req g[2] = { grant_req(2), grant_req(1) }, b[3];
	uint64_t len1 = 2 * TU_PAGE_SIZE - 100, len2 = 10, txn;
	struct mkv_stat st;

	ck_assert_int_eq(commit(g, 2), 0);
	ck_assert_int_eq(g[0].result, 0);
	ck_assert_int_eq(g[1].result, 0);
	ck_assert_uint_eq(g[0].ext.npages, 2);
	ck_assert_uint_eq(g[1].ext.npages, 1);
	ck_assert(mkv_pages_are(p, &g[0].ext, words.live));
	ck_assert(mkv_pages_are(p, &g[1].ext, words.live));
	ck_assert_uint_eq(p->h.free_pages, PAGES - 3);

	b[0] = publish_req("k1", g[0].ext, len1);
	b[1] = publish_req("k2", g[1].ext, len2);
	b[2] = grant_req(4);
	txn = mkv_reg_last_txn(p);
	ck_assert_int_eq(commit(b, 3), 0);
	ck_assert_uint_eq(mkv_reg_last_txn(p), txn + 1);
	ck_assert_int_eq(b[0].result, 0);
	ck_assert_int_eq(b[1].result, 0);
	ck_assert_int_eq(b[2].result, 0);
	ck_assert(mkv_pages_are(p, &g[0].ext, words.used));
	ck_assert(mkv_pages_are(p, &g[1].ext, words.used));
	ck_assert(mkv_pages_are(p, &b[2].ext, words.live));
	ck_assert_uint_eq(p->h.free_pages, PAGES - 7);
	ck_assert_uint_eq(unit_lookup(p, "k1").txn, txn + 1);
	ck_assert_uint_eq(unit_lookup(p, "k2").page, g[1].ext.page);
	ck_assert_uint_eq(meta("bytes"), len1 + len2);
	assert_visible("k1", len1);
	assert_visible("k2", len2);
	tu_stat(p, &st);
	ck_assert_uint_eq(st.entries, 2);
	ck_assert_uint_eq(st.pages_used, 3);
	ck_assert_uint_eq(st.pages_granted, 4);
}
END_TEST

START_TEST(test_del_quarantines_until_no_view_needs_the_pages)
{
	struct mkv_extent e = published("gone", 3 * TU_PAGE_SIZE);
	struct mkv_req d = del_req("gone"), again = del_req("gone");
	struct mkv_txn *t;
	struct mkv_view v;
	uint64_t last, txn;

	ck_assert_int_eq(mkv_get(p, "gone", 4, &v), 0);
	txn = mkv_reg_last_txn(p);
	ck_assert_int_eq(commit(&d, 1), 0);
	ck_assert_int_eq(d.result, 0);
	ck_assert(d.ext.page == e.page && d.ext.npages == 3);
	ck_assert(mkv_pages_are(p, &e, words.quar));
	ck_assert_uint_eq(p->h.quarantined_pages, 3);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 3);
	ck_assert_int_eq(mkv_exists(p, "gone", 4), 0);
	ck_assert_uint_eq(meta("bytes"), 0);
	ck_assert_int_eq(mkv_reg_rtxn(p, &t), 0);
	ck_assert_int_eq(mkv_reg_freed_last(p, t, &last), 0);
	mkv_reg_rtxn_done(p, t);
	ck_assert_uint_eq(last, txn + 1);
	ck_assert_int_eq(commit(&again, 1), 0);
	ck_assert_int_eq(again.result, MKV_E_NOTFOUND);

	/* the view pins the pages: later txns leave them quarantined */
	ck_assert_int_eq(commit(NULL, 0), 0);
	ck_assert(mkv_pages_are(p, &e, words.quar));
	ck_assert_int_eq(tu_verify(v.data, v.len, "gone", 4), -1);
	ck_assert_int_eq(mkv_release(p, &v), 0);
	ck_assert_int_eq(commit(NULL, 0), 0);
	ck_assert(mkv_pages_are(p, &e, MKV_PG_FREE));
	ck_assert_uint_eq(p->h.quarantined_pages, 0);
	ck_assert_uint_eq(p->h.free_pages, PAGES);
	ck_assert_int_eq(mkv_reg_rtxn(p, &t), 0);
	ck_assert_int_eq(mkv_reg_freed_last(p, t, &last), MKV_E_NOTFOUND);
	mkv_reg_rtxn_done(p, t);
}
END_TEST

START_TEST(test_a_duplicate_key_fails_alone)
{
	struct mkv_extent first = published("dup", 100), e1 = granted(1), e2 = granted(1);
	struct mkv_req b[3];
	struct mkv_stat st;

	b[0] = publish_req("dup", e1, 200);
	b[1] = publish_req("fresh", e2, 300);
	/* the same publish again (a new holder re-draining it): done, not doubled */
	b[2] = publish_req("dup", first, 100);
	ck_assert_int_eq(commit(b, 3), 0);
	ck_assert_int_eq(b[0].result, MKV_E_EXISTS);
	ck_assert_int_eq(b[1].result, 0);
	ck_assert_int_eq(b[2].result, 0);
	/* the refused publish's pages stay granted to it, the key keeps its value */
	ck_assert(mkv_pages_are(p, &e1, words.live));
	ck_assert(mkv_pages_are(p, &e2, words.used));
	ck_assert_uint_eq(unit_lookup(p, "dup").page, first.page);
	ck_assert_uint_eq(unit_lookup(p, "dup").length, 100);
	assert_visible("dup", 100);
	assert_visible("fresh", 300);
	tu_stat(p, &st);
	ck_assert_uint_eq(st.entries, 2);
	ck_assert_uint_eq(st.bytes_stored, 400);
}
END_TEST

static struct mkv_answer_rec
answer(uint64_t rq)
{
	struct mkv_answer_rec a;
	struct mkv_txn *t;

	ck_assert_int_eq(mkv_reg_rtxn(p, &t), 0);
	ck_assert_int_eq(mkv_reg_answer_get(p, t, rq, &a), 0);
	mkv_reg_rtxn_done(p, t);
	return a;
}

/* A request as the ring delivers it: from entry rq, with sequence number seq. */
static struct mkv_req
from_ring(struct mkv_req r, unsigned rq, uint32_t seq)
{
	r.rq = rq;
	r.seq = seq;
	return r;
}

START_TEST(test_a_recorded_request_is_replayed_not_applied)
{
	unsigned rq = p->slot * MKV_RQ_DEPTH + 2;
	struct mkv_req g = from_ring(grant_req(2), rq, 7), r, d;
	struct mkv_answer_rec a;
	struct mkv_extent e;

	ck_assert_int_eq(commit(&g, 1), 0);
	ck_assert(g.result == 0 && !g.replayed);
	e = g.ext;
	a = answer(rq);
	ck_assert_uint_eq(a.inc, p->incarnation);
	ck_assert_uint_eq(a.seq, 7);
	ck_assert_int_eq(a.result, 0);
	ck_assert(a.page == e.page && a.npages == 2);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 2);
	/* the same request again (a holder died before answering): its answer, no new pages */
	r = from_ring(grant_req(2), rq, 7);
	ck_assert_int_eq(commit(&r, 1), 0);
	ck_assert(r.replayed);
	ck_assert_int_eq(r.result, 0);
	ck_assert(r.ext.page == e.page && r.ext.npages == 2);
	ck_assert_uint_eq(p->h.free_pages, PAGES - 2);

	r = from_ring(publish_req("once", e, 5000), rq, 8);
	ck_assert_int_eq(commit(&r, 1), 0);
	ck_assert(r.result == 0 && !r.replayed);
	d = from_ring(del_req("once"), rq, 9);
	ck_assert_int_eq(commit(&d, 1), 0);
	ck_assert(d.result == 0 && !d.replayed);
	ck_assert(mkv_pages_are(p, &e, words.quar));
	/* applied twice the delete would find no key */
	d = from_ring(del_req("once"), rq, 9);
	ck_assert_int_eq(commit(&d, 1), 0);
	ck_assert(d.replayed);
	ck_assert_int_eq(d.result, 0);
	ck_assert(d.ext.page == e.page && d.ext.npages == 2);
	/* a newer request from the entry is applied */
	d = from_ring(del_req("once"), rq, 10);
	ck_assert_int_eq(commit(&d, 1), 0);
	ck_assert(!d.replayed);
	ck_assert_int_eq(d.result, MKV_E_NOTFOUND);
	/* a failed request is not recorded: the entry's record is still seq 9's */
	ck_assert_uint_eq(answer(rq).seq, 9);
	/* the record of another incarnation of the slot is not this client's */
	d = from_ring(del_req("once"), rq, 9);
	d.inc = p->incarnation + 1;
	ck_assert_int_eq(commit(&d, 1), 0);
	ck_assert(!d.replayed);
	ck_assert_int_eq(d.result, MKV_E_EXPIRED);
}
END_TEST

START_TEST(test_watermarks_by_percent)
{
	struct mkv_req w = { .op = MKV_OP_WATERMARKS, .slot = p->slot, .inc = p->incarnation,
			.wm_low = 20, .wm_high = 40 };
	struct mkv_req bad[3] = { w, w, w };
	struct mkv_stat st;

	ck_assert_int_eq(commit(&w, 1), 0);
	ck_assert_int_eq(w.result, 0);
	ck_assert_uint_eq(p->h.wm_low, 20);
	ck_assert_uint_eq(p->h.wm_high, 40);
	ck_assert_uint_eq(meta("wm_low"), 20);
	ck_assert_uint_eq(meta("wm_high"), 40);
	tu_stat(p, &st);
	ck_assert_uint_eq(st.low_watermark, 20);
	ck_assert_uint_eq(st.high_watermark, 40);
	bad[0].wm_low = 101;
	bad[1].wm_low = 50;  /* above the high mark */
	bad[2].wm_high = 95; /* above 90 */
	ck_assert_int_eq(commit(bad, 3), 0);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(bad[i].result, MKV_E_INVAL);
	ck_assert_uint_eq(p->h.wm_low, 20);
	ck_assert_uint_eq(meta("wm_high"), 40);
}
END_TEST

START_TEST(test_evict_by_percent)
{
	struct mkv_req e = { .op = MKV_OP_EVICT, .slot = p->slot, .inc = p->incarnation,
			.free_pct = 50 };
	struct mkv_req bad = e;
	unsigned next = 0;
	struct mkv_stat st;

	ck_assert_int_eq(tu_fill_until_full(p, "fill", &next, TU_PAGE_SIZE), PAGES);
	ck_assert_uint_eq(p->h.free_pages + p->h.quarantined_pages, 0);
	bad.free_pct = 101;
	ck_assert_int_eq(commit(&bad, 1), 0);
	ck_assert_int_eq(bad.result, MKV_E_INVAL);
	ck_assert_int_eq(commit(&e, 1), 0);
	ck_assert_int_eq(e.result, 0);
	ck_assert_uint_eq(e.out, PAGES / 2);
	ck_assert_uint_eq(p->h.free_pages + p->h.quarantined_pages, PAGES / 2);
	ck_assert_uint_eq(meta("evictions"), PAGES / 2);
	tu_stat(p, &st);
	ck_assert_uint_eq(st.entries, PAGES / 2);
	ck_assert_uint_eq(st.evictions, PAGES / 2);
	/* enough room already: nothing more */
	e = bad;
	e.free_pct = 40;
	ck_assert_int_eq(commit(&e, 1), 0);
	ck_assert_int_eq(e.result, 0);
	ck_assert_uint_eq(e.out, 0);
}
END_TEST

START_TEST(test_bad_requests_fail_alone)
{
	struct mkv_extent k = published("kept", 100), g = granted(1), h = granted(1);
	struct mkv_req b[8];
	struct mkv_stat st;

	b[0] = grant_req(1);
	b[0].op = (enum mkv_op)99;
	b[1] = publish_req("past-the-end", (struct mkv_extent){ PAGES - 1, 1 }, 10);
	b[1].ext = (struct mkv_extent){ PAGES, 1 };
	b[2] = publish_req("across-the-end", (struct mkv_extent){ PAGES - 1, 1 }, 10);
	b[2].ext = (struct mkv_extent){ PAGES - 1, 2 };
	b[2].length = TU_PAGE_SIZE + 10;
	b[3] = publish_req("good", g, 10);
	b[4] = (struct mkv_req){ .op = MKV_OP_UNGRANT, .slot = p->slot, .inc = p->incarnation,
			.ext = k };  /* used, not granted */
	b[5] = del_req("missing");
	b[6] = grant_req(0);
	/* from a slot nobody holds */
	b[7] = from_ring(publish_req("orphan", h, 10), (TU_MAX_CLIENTS - 1) * MKV_RQ_DEPTH, 3);
	b[7].slot = TU_MAX_CLIENTS - 1;
	ck_assert_int_eq(commit(b, 8), 0);
	ck_assert_int_eq(b[0].result, MKV_E_INVAL);
	ck_assert_int_eq(b[1].result, MKV_E_INVAL);
	ck_assert_int_eq(b[2].result, MKV_E_INVAL);
	ck_assert_int_eq(b[3].result, 0);
	ck_assert_int_eq(b[4].result, MKV_E_INVAL);
	ck_assert_int_eq(b[5].result, MKV_E_NOTFOUND);
	ck_assert_int_eq(b[6].result, MKV_E_INVAL);
	ck_assert_int_eq(b[7].result, MKV_E_EXPIRED);
	assert_visible("good", 10);
	ck_assert(mkv_pages_are(p, &k, words.used));
	ck_assert(mkv_pages_are(p, &h, words.live));
	tu_stat(p, &st);
	ck_assert_uint_eq(st.entries, 2);
}
END_TEST

START_TEST(test_a_page_table_at_odds_with_the_registry_is_corrupt)
{
	struct mkv_extent k = published("kept", 100), d = published("del", 100), g = granted(1);
	struct mkv_req b[3];

	/* the page table shows kept's pages granted, del's free: damage */
	pthread_mutex_lock(&p->h.lock);
	ck_assert(mkv_pages_move_all(p, &k, words.used, words.live));
	ck_assert(mkv_pages_move_all(p, &d, words.used, MKV_PG_FREE));
	pthread_mutex_unlock(&p->h.lock);
	b[0] = publish_req("on-kept", k, 100);
	b[1] = del_req("del");
	b[2] = publish_req("good", g, 10);
	ck_assert_int_eq(commit(b, 3), 0);
	ck_assert_int_eq(b[0].result, MKV_E_CORRUPT);
	ck_assert_int_eq(b[1].result, MKV_E_CORRUPT);
	ck_assert_int_eq(b[2].result, 0);
	/* refused, changing nothing */
	ck_assert(mkv_pages_are(p, &k, words.live));
	ck_assert(mkv_pages_are(p, &d, MKV_PG_FREE));
	ck_assert_int_eq(mkv_exists(p, "on-kept", 7), 0);
	ck_assert_int_eq(mkv_exists(p, "del", 3), 1);
	assert_visible("good", 10);
	/* the damage mended, the publish and the delete go through */
	pthread_mutex_lock(&p->h.lock);
	ck_assert(mkv_pages_move_all(p, &k, words.live, words.used));
	ck_assert(mkv_pages_move_all(p, &d, MKV_PG_FREE, words.used));
	pthread_mutex_unlock(&p->h.lock);
	b[1] = del_req("del");
	ck_assert_int_eq(commit(&b[1], 1), 0);
	ck_assert_int_eq(b[1].result, 0);
	ck_assert(mkv_pages_are(p, &d, words.quar));
}
END_TEST

/* Set the generation stored in the registry's meta, behind the holder's back. */
static void
registry_generation(uint64_t gen)
{
	struct mkv_txn *t;

	ck_assert_int_eq(mkv_reg_wtxn(p, &t), 0);
	ck_assert_int_eq(mkv_reg_meta_put(p, t, "generation", gen), 0);
	ck_assert_int_eq(mkv_reg_wtxn_end(p, t, true), 0);
}

START_TEST(test_a_fenced_holder_applies_nothing)
{
	struct mkv_extent e = granted(1);
	struct mkv_req b[2] = { publish_req("late", e, 10), grant_req(2) };
	uint64_t txn = mkv_reg_last_txn(p), free_pages = p->h.free_pages;

	/* a newer holder's token in the registry: this holder is superseded */
	registry_generation(p->h.generation + 1);
	ck_assert_int_eq(commit(b, 2), MKV_E_FENCED);
	ck_assert_int_eq(b[0].result, MKV_E_FENCED);
	ck_assert_int_eq(b[1].result, MKV_E_FENCED);
	ck_assert_uint_eq(mkv_reg_last_txn(p), txn + 1);
	ck_assert(mkv_pages_are(p, &e, words.live));
	ck_assert_uint_eq(p->h.free_pages, free_pages);
	ck_assert_int_eq(mkv_exists(p, "late", 4), 0);
	/* the token restored, the same batch goes through */
	registry_generation(p->h.generation);
	b[0] = publish_req("late", e, 10);
	b[1] = grant_req(2);
	ck_assert_int_eq(commit(b, 2), 0);
	ck_assert_int_eq(b[0].result, 0);
	ck_assert_int_eq(b[1].result, 0);
	ck_assert(mkv_pages_are(p, &e, words.used));
}
END_TEST

/*
 * A holder woken by a write just before its renewal falls due renews in
 * time.  Such a round does not renew, and a service thread that then
 * slept a whole quarter period renewed half a period after its last
 * renewal at the earliest, and fenced itself (mkv_lease_valid()).  Only a
 * non-coherent pool's holder sleeps that long: it polls its doorbell in
 * slices until its sleep ends, where a coherent one wakes at least every
 * 20 ms.  The timer slack of the holder's service thread, which it takes
 * from the thread that opened the pool (the test's own is set back to the
 * default after), makes each of its timed sleeps end up to RENEW_SLACK_NS
 * late: so the writes come from 1 ms to 9 ms before the renewal is due,
 * by the holder's own record, and after each one the holder must still
 * hold and renew.
 */
#define RENEW_SLACK_NS (50 * 1000000ULL)

static void
renewal_setup(void)
{
	struct tu_opts o = { .data_size = PAGES * TU_PAGE_SIZE, .page_size = TU_PAGE_SIZE,
			.max_clients = TU_MAX_CLIENTS, .coherence = MKV_NONCOHERENT };
	char *path;

	ck_assert_int_eq(prctl(PR_SET_TIMERSLACK, RENEW_SLACK_NS, 0, 0, 0), 0);
	tu_setup();
	ck_assert_ptr_nonnull(path = tu_pool_path(tu_dir));
	ck_assert_int_eq(tu_open(path, MKV_CREATE, &o, &p), 0);
	free(path);
	ck_assert(p->h.holding);
	ck_assert_int_eq(prctl(PR_SET_TIMERSLACK, 0, 0, 0, 0), 0);
}

/* The holder's last renewal, 0 once it no longer holds. */
static uint64_t
last_renewal(void)
{
	uint64_t at;

	pthread_mutex_lock(&p->h.lock);
	at = p->h.holding ? p->h.last_renew_ns : 0;
	pthread_mutex_unlock(&p->h.lock);
	return at;
}

START_TEST(test_a_write_just_before_the_renewal_does_not_fence_the_holder)
{
	uint64_t quarter = p->lease_period_ns / 4, renewed, due, now;
	struct mkv_pool *w = NULL;
	char key[16];

	ck_assert_int_eq(tu_pool_open(tu_dir, 0, &w), 0);
	for (unsigned ms = 1; ms < 10; ms++) {
		renewed = last_renewal();
		ck_assert_uint_ne(renewed, 0);
		due = renewed + quarter;
		now = mkv_clock_now();
		ck_assert_uint_lt(now + ms * 1000000ULL, due);
		mkv_clock_sleep(due - ms * 1000000ULL - now);
		snprintf(key, sizeof(key), "renew%u", ms);
		ck_assert_int_eq(tu_put(w, key, strlen(key), 4096), 0);
		while (last_renewal() == renewed && mkv_clock_now() < due + 2 * quarter)
			mkv_clock_sleep(100000);
		ck_assert_msg(last_renewal() > renewed,
				"the holder fenced itself after a write %u ms before its renewal", ms);
	}
	mkv_pool_close(&w);
}
END_TEST

static Suite *
commit_suite(void)
{
	Suite *s = suite_create("commit");
	TCase *tc = tcase_create("group_commit");

	tcase_add_checked_fixture(tc, commit_setup, commit_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_grants_and_publishes_in_one_txn);
	tcase_add_test(tc, test_del_quarantines_until_no_view_needs_the_pages);
	tcase_add_test(tc, test_a_duplicate_key_fails_alone);
	tcase_add_test(tc, test_a_recorded_request_is_replayed_not_applied);
	tcase_add_test(tc, test_watermarks_by_percent);
	tcase_add_test(tc, test_evict_by_percent);
	tcase_add_test(tc, test_bad_requests_fail_alone);
	tcase_add_test(tc, test_a_page_table_at_odds_with_the_registry_is_corrupt);
	tcase_add_test(tc, test_a_fenced_holder_applies_nothing);
	suite_add_tcase(s, tc);
	tc = tcase_create("renewal");
	tcase_add_checked_fixture(tc, renewal_setup, commit_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_a_write_just_before_the_renewal_does_not_fence_the_holder);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(commit_suite());
}
