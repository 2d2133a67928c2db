/* SPDX-License-Identifier: MIT */
/*
 * check_ring.c -- the request entries (ring.c) as transport, in one
 * process: what a client submits is what the holder collects, answers
 * reach the request they answer and no other, and a handle's entries run
 * out, time out and keep asynchronous answers as ring.c says.
 *
 * Nobody may drain the ring behind the test's back: a writer's handle
 * takes the lease at open and its service thread collects every pending
 * entry.  So the pool is created and closed again (its lease released),
 * and the test opens it read-only, twice: a read-only handle never takes
 * the lease (mkv_lease_try_acquire() refuses it, also from the ring's
 * idle callback while a wait lasts), so its service thread collects
 * nothing.  Its request entries are writable like any handle's: "a" and
 * "b" submit into their own slots, and the test collects and posts as
 * the holder would.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "testutil.h"
#include "unitutil.h"

#define PAGES 64U
/* A wait that is to time out: a few of the ring's 20 ms slices. */
#define SHORT_NS (60 * 1000000ULL)
/* A wait that is to succeed: far longer than the test needs. */
#define LONG_NS (10 * 1000000000ULL)
/* The slices of a client's wait for its answer (ring.c's WAIT_SLICE_NS). */
#define SLICE_NS (20 * 1000000ULL)

static struct mkv_pool *a, *b;

static void
ring_setup(void)
{
	struct mkv_pool *w;

	tu_setup();
	unit_holder_pool(PAGES, &w, NULL);
	mkv_pool_close(&w);
	ck_assert_int_eq(tu_pool_open(tu_dir, MKV_RDONLY, &a), 0);
	ck_assert_int_eq(tu_pool_open(tu_dir, MKV_RDONLY, &b), 0);
	ck_assert(!a->h.holding && !b->h.holding);
	ck_assert(mkv_lease_free(a));
	ck_assert_uint_ne(a->slot, b->slot);
	ck_assert_uint_eq(mkv_rq_pending(a), 0);
}

static void
ring_teardown(void)
{
	mkv_pool_close(&a);
	mkv_pool_close(&b);
	tu_teardown();
}

/* A publish request with every field set to something recognisable. */
static struct mkv_req
publish_req(const char *key, uint64_t page)
{
	return (struct mkv_req){
		.op = MKV_OP_PUBLISH,
		.key = key,
		.klen = strlen(key),
		.ext = { page, 3 },
		.length = 3 * TU_PAGE_SIZE - 17,
		.checksum = 0x0123456789abcdefULL ^ page,
		.parent = 0xfeedfacecafebeefULL,
	};
}

/* Collect everything pending; asserts there are exactly n requests. */
static void
collect(struct mkv_req *got, unsigned n)
{
	ck_assert_uint_eq(mkv_rq_collect(b, got, MKV_MAX_BATCH, NULL), n);
}

/* Submit r from handle p; asserts it is posted, and returns its seq. */
static uint32_t
submit(struct mkv_pool *p, const struct mkv_req *r, bool async, unsigned *idx)
{
	uint32_t seq = 0;

	ck_assert_int_eq(mkv_rq_submit(p, r, async, idx, &seq, LONG_NS), 0);
	ck_assert_uint_ne(seq, 0);
	return seq;
}

START_TEST(test_collect_sees_the_request_as_submitted)
{
	struct mkv_req r = publish_req("a-key", 17), got[MKV_MAX_BATCH];
	unsigned idx;
	uint32_t seq = submit(a, &r, false, &idx);

	ck_assert_uint_eq(mkv_rq_pending(a), 1);
	ck_assert_uint_eq(mkv_rq_pending_slot(a, a->slot), 1);
	ck_assert_uint_eq(mkv_rq_pending_slot(a, b->slot), 0);
	collect(got, 1);
	ck_assert_int_eq(got[0].op, MKV_OP_PUBLISH);
	ck_assert_uint_eq(got[0].slot, a->slot);
	ck_assert_uint_eq(got[0].inc, a->incarnation);
	ck_assert_uint_eq(got[0].rq, a->slot * MKV_RQ_DEPTH + idx);
	ck_assert_uint_eq(got[0].seq, seq);
	ck_assert_uint_eq(got[0].klen, 5);
	ck_assert_mem_eq(got[0].key, "a-key", 5);
	ck_assert_uint_eq(got[0].ext.page, 17);
	ck_assert_uint_eq(got[0].ext.npages, 3);
	ck_assert_uint_eq(got[0].length, 3 * TU_PAGE_SIZE - 17);
	ck_assert_uint_eq(got[0].checksum, 0x0123456789abcdefULL ^ 17);
	ck_assert_uint_eq(got[0].parent, 0xfeedfacecafebeefULL);
	ck_assert_uint_eq(got[0].free_pct, 0);
	ck_assert_uint_eq(got[0].wm_low, 0);
	ck_assert_uint_eq(got[0].wm_high, 0);
	ck_assert(!got[0].replayed && !got[0].pending);
	/* collecting does not answer: still pending, collected again */
	collect(got, 1);
	ck_assert_uint_eq(mkv_rq_pending(b), 1);
}
END_TEST

START_TEST(test_percent_fields_round_trip)
{
	struct mkv_req ev = { .op = MKV_OP_EVICT, .free_pct = 37 };
	struct mkv_req wm = { .op = MKV_OP_WATERMARKS, .wm_low = 20, .wm_high = 45 };
	struct mkv_req got[MKV_MAX_BATCH];
	unsigned i_ev, i_wm;

	/* fields the op does not carry do not travel */
	ev.ext = (struct mkv_extent){ 5, 6 };
	ev.wm_low = 1;
	wm.free_pct = 99;
	submit(a, &ev, false, &i_ev);
	submit(a, &wm, false, &i_wm);
	collect(got, 2);
	/* one slot's entries come in entry order */
	ck_assert_uint_lt(i_ev, i_wm);
	ck_assert_int_eq(got[0].op, MKV_OP_EVICT);
	ck_assert_uint_eq(got[0].free_pct, 37);
	ck_assert_uint_eq(got[0].ext.page, 0);
	ck_assert_uint_eq(got[0].ext.npages, 0);
	ck_assert_uint_eq(got[0].wm_low, 0);
	ck_assert_int_eq(got[1].op, MKV_OP_WATERMARKS);
	ck_assert_uint_eq(got[1].wm_low, 20);
	ck_assert_uint_eq(got[1].wm_high, 45);
	ck_assert_uint_eq(got[1].free_pct, 0);
	ck_assert_uint_eq(got[1].ext.npages, 0);
}
END_TEST

START_TEST(test_post_answers_the_waiter)
{
	struct mkv_req g = { .op = MKV_OP_GRANT, .ext = { 0, 8 }, .length = 2 };
	struct mkv_req e = { .op = MKV_OP_EVICT, .free_pct = 50 };
	struct mkv_req p = publish_req("dup", 3), got[MKV_MAX_BATCH];
	uint32_t completed = a->slots[a->slot].completed;
	unsigned ig, ie, ip;
	uint32_t sg = submit(a, &g, false, &ig), se = submit(a, &e, false, &ie),
			sp = submit(a, &p, false, &ip);

	collect(got, 3);
	got[0].result = 0;
	got[0].ext = (struct mkv_extent){ 40, 6 };  /* fewer than asked, at least length */
	got[1].result = 0;
	got[1].out = 11;                            /* keys evicted */
	got[2].result = MKV_E_EXISTS;
	mkv_rq_post(b, got, 3);
	ck_assert_uint_eq(mkv_rq_pending(a), 0);
	/* one wake-up for the slot, however many answers */
	ck_assert_uint_eq(a->slots[a->slot].completed, completed + 1);

	ck_assert_int_eq(mkv_rq_wait(a, ig, sg, &g, LONG_NS, false), 0);
	ck_assert_int_eq(g.result, 0);
	ck_assert_uint_eq(g.ext.page, 40);
	ck_assert_uint_eq(g.ext.npages, 6);
	ck_assert_int_eq(mkv_rq_wait(a, ie, se, &e, LONG_NS, false), 0);
	ck_assert_int_eq(e.result, 0);
	ck_assert_uint_eq(e.out, 11);
	/* a refusal is the request's result, the wait itself succeeded */
	mkv_err_clear();
	ck_assert_int_eq(mkv_rq_wait(a, ip, sp, &p, LONG_NS, false), 0);
	ck_assert_int_eq(p.result, MKV_E_EXISTS);
	ck_assert_str_ne(mkv_errormsg(), "");
	/* the entries are free again: a ticket is taken once */
	ck_assert_int_eq(a->rq.busy, 0);
	mkv_err_clear();
	ck_assert_int_eq(mkv_rq_wait(a, ig, sg, &g, LONG_NS, false), MKV_E_INVAL);
}
END_TEST

/*
 * The holder's collection with the counts it saw: a slot with nothing new
 * is passed over, a new request is seen by its slot's count, and a request
 * left unanswered (a commit that could not write) is collected again
 * although the count did not move.
 */
START_TEST(test_collect_passes_over_idle_slots_only)
{
	struct mkv_req r = publish_req("seen", 5), again = publish_req("seen-2", 9);
	struct mkv_req got[MKV_MAX_BATCH];
	uint64_t seen[TU_MAX_CLIENTS];
	unsigned idx, idx2;
	uint32_t seq;

	ck_assert_uint_le(a->sb->max_clients, TU_MAX_CLIENTS);
	memset(seen, 0xff, sizeof(seen));
	ck_assert_uint_eq(mkv_rq_collect(b, got, MKV_MAX_BATCH, seen), 0);
	/* nothing pending anywhere: every slot's count noted */
	ck_assert_uint_eq(seen[a->slot], a->slots[a->slot].posted);
	seq = submit(a, &r, false, &idx);
	ck_assert_uint_eq(seen[a->slot] + 1, a->slots[a->slot].posted);
	ck_assert_uint_eq(mkv_rq_collect(b, got, MKV_MAX_BATCH, seen), 1);
	ck_assert_uint_eq(got[0].seq, seq);
	/* not answered: still collected, the count unchanged */
	ck_assert_uint_eq(mkv_rq_collect(b, got, MKV_MAX_BATCH, seen), 1);
	got[0].result = 0;
	mkv_rq_post(b, got, 1);
	ck_assert_uint_eq(mkv_rq_collect(b, got, MKV_MAX_BATCH, seen), 0);
	ck_assert_uint_eq(seen[a->slot], a->slots[a->slot].posted);
	/* a slot passed over is looked at again once its count moves */
	submit(a, &again, false, &idx2);
	ck_assert_uint_eq(mkv_rq_collect(b, got, MKV_MAX_BATCH, seen), 1);
	ck_assert_str_eq(got[0].key, "seen-2");
	ck_assert_int_eq(mkv_rq_wait(a, idx, seq, &r, LONG_NS, false), 0);
}
END_TEST

START_TEST(test_an_answer_out_of_range_is_corrupt)
{
	struct mkv_req r = publish_req("odd", 1), got[MKV_MAX_BATCH];
	unsigned idx;
	uint32_t seq = submit(a, &r, false, &idx);

	collect(got, 1);
	got[0].result = 4242;  /* neither 0, -errno nor an MKV_E_* code */
	mkv_rq_post(b, got, 1);
	ck_assert_int_eq(mkv_rq_wait(a, idx, seq, &r, LONG_NS, false), 0);
	ck_assert_int_eq(r.result, MKV_E_CORRUPT);
}
END_TEST

START_TEST(test_a_stale_answer_is_not_taken)
{
	struct mkv_req r1 = publish_req("first", 1), r2 = publish_req("second", 2);
	struct mkv_req old[MKV_MAX_BATCH], got[MKV_MAX_BATCH];
	unsigned i1, i2;
	uint32_t s1 = submit(a, &r1, false, &i1), s2;

	collect(old, 1);
	old[0].result = 0;
	mkv_rq_post(b, old, 1);
	ck_assert_int_eq(mkv_rq_wait(a, i1, s1, &r1, LONG_NS, false), 0);
	/* the entry is reused, and still holds the answer to s1 */
	s2 = submit(a, &r2, false, &i2);
	ck_assert_uint_eq(i2, i1);
	ck_assert_uint_ne(s2, s1);
	ck_assert_uint_eq(mkv_rq_pending(a), 1);
	/* a holder that lost the lease posts s1's answer again, late */
	old[0].result = MKV_E_EXISTS;
	mkv_rq_post(b, old, 1);
	ck_assert_uint_eq(mkv_rq_pending(a), 1);
	r2.pending = false;
	ck_assert_int_eq(mkv_rq_wait(a, i2, s2, &r2, SHORT_NS, true), MKV_E_TIMEDOUT);
	ck_assert(r2.pending);
	/* kept: it may be waited for again, and the real answer is taken */
	collect(got, 1);
	ck_assert_uint_eq(got[0].seq, s2);
	got[0].result = 0;
	mkv_rq_post(b, got, 1);
	ck_assert_int_eq(mkv_rq_wait(a, i2, s2, &r2, LONG_NS, false), 0);
	ck_assert_int_eq(r2.result, 0);
}
END_TEST

START_TEST(test_a_foreign_answer_is_not_taken)
{
	struct mkv_req ra = publish_req("of-a", 1), rb = publish_req("of-b", 2);
	struct mkv_req got[MKV_MAX_BATCH];
	unsigned ia, ib;
	uint32_t sa = submit(a, &ra, false, &ia), sb = submit(b, &rb, false, &ib);

	collect(got, 2);
	ck_assert_uint_eq(mkv_rq_pending_slot(a, a->slot), 1);
	ck_assert_uint_eq(mkv_rq_pending_slot(a, b->slot), 1);
	/* answer b's request only */
	for (unsigned i = 0; i < 2; i++)
		if (got[i].slot == b->slot) {
			got[i].result = 0;
			mkv_rq_post(b, &got[i], 1);
		}
	ck_assert_uint_eq(mkv_rq_pending_slot(a, a->slot), 1);
	ck_assert_uint_eq(mkv_rq_pending_slot(a, b->slot), 0);
	ck_assert_int_eq(mkv_rq_wait(a, ia, sa, &ra, SHORT_NS, true), MKV_E_TIMEDOUT);
	ck_assert_int_eq(mkv_rq_wait(b, ib, sb, &rb, LONG_NS, false), 0);
	ck_assert_int_eq(rb.result, 0);
	/* a's own ticket, not b's, names its request */
	mkv_err_clear();
	ck_assert_int_eq(mkv_rq_wait(a, ia, sa + 1, &ra, SHORT_NS, true), MKV_E_INVAL);
	ck_assert_int_eq(mkv_rq_wait(a, ia, sa, &ra, SHORT_NS, true), MKV_E_TIMEDOUT);
}
END_TEST

START_TEST(test_every_entry_busy_the_next_submit_times_out)
{
	struct mkv_req r = publish_req("busy", 1), got[MKV_MAX_BATCH];
	unsigned idx[MKV_RQ_DEPTH], extra;
	uint32_t seq[MKV_RQ_DEPTH], s;
	double t0, waited;

	for (unsigned i = 0; i < MKV_RQ_DEPTH; i++) {
		seq[i] = submit(a, &r, false, &idx[i]);
		ck_assert_uint_eq(idx[i], i);
		if (i)
			ck_assert_uint_eq(seq[i], seq[i - 1] + 1);
	}
	ck_assert_uint_eq(mkv_rq_pending_slot(a, a->slot), MKV_RQ_DEPTH);
	ck_assert_uint_eq(a->rq.busy, (uint32_t)(UINT32_MAX >> (32 - MKV_RQ_DEPTH)));
	t0 = tu_now();
	mkv_err_clear();
	ck_assert_int_eq(mkv_rq_submit(a, &r, false, &extra, &s, 200 * 1000000ULL),
			MKV_E_TIMEDOUT);
	waited = tu_now() - t0;
	ck_assert_msg(waited >= 0.19 && waited < 5, "submit gave up after %.3f s", waited);
	ck_assert_str_ne(mkv_errormsg(), "");
	ck_assert_uint_eq(mkv_rq_pending_slot(a, a->slot), MKV_RQ_DEPTH);

	/* entry 5 answered and waited for: the next submit takes it */
	collect(got, MKV_RQ_DEPTH);
	got[5].result = 0;
	mkv_rq_post(b, &got[5], 1);
	ck_assert_int_eq(mkv_rq_wait(a, idx[5], seq[5], &r, LONG_NS, false), 0);
	s = submit(a, &r, false, &extra);
	ck_assert_uint_eq(extra, 5);
	ck_assert_uint_eq(s, seq[MKV_RQ_DEPTH - 1] + 1);
}
END_TEST

START_TEST(test_an_abandoned_request_keeps_its_entry)
{
	struct mkv_req r = publish_req("gone", 1), got[MKV_MAX_BATCH];
	unsigned i0, idx, extra;
	uint32_t s0 = submit(a, &r, false, &i0), s;

	/* given up without keep: the caller lets go, the ring does not */
	ck_assert_int_eq(mkv_rq_wait(a, i0, s0, &r, SHORT_NS, false), MKV_E_TIMEDOUT);
	ck_assert(r.pending);
	ck_assert_int_eq(a->rq.busy, 0);
	ck_assert_uint_eq(mkv_rq_pending_slot(a, a->slot), 1);
	mkv_err_clear();
	ck_assert_int_eq(mkv_rq_wait(a, i0, s0, &r, SHORT_NS, false), MKV_E_INVAL);
	for (unsigned i = 1; i < MKV_RQ_DEPTH; i++) {
		submit(a, &r, false, &idx);
		ck_assert_uint_ne(idx, i0);
	}
	ck_assert_int_eq(mkv_rq_submit(a, &r, false, &extra, &s, SHORT_NS), MKV_E_TIMEDOUT);
	/* once answered, its entry is free for the next request */
	collect(got, MKV_RQ_DEPTH);
	ck_assert_uint_eq(got[0].seq, s0);
	got[0].result = 0;
	mkv_rq_post(b, got, 1);
	submit(a, &r, false, &extra);
	ck_assert_uint_eq(extra, i0);
}
END_TEST

START_TEST(test_async_answers_are_kept)
{
	struct mkv_req r = publish_req("async", 1), got[MKV_MAX_BATCH];
	unsigned idx[MKV_RQ_DEPTH], extra;
	uint32_t seq[MKV_RQ_DEPTH], s;

	for (unsigned i = 0; i < MKV_RQ_DEPTH; i++)
		seq[i] = submit(a, &r, true, &idx[i]);
	ck_assert_uint_eq(a->rq.async, (uint32_t)(UINT32_MAX >> (32 - MKV_RQ_DEPTH)));
	/* nobody answers: the next submit waits for the oldest, and gives up */
	mkv_err_clear();
	ck_assert_int_eq(mkv_rq_submit(a, &r, true, &extra, &s, SHORT_NS), MKV_E_TIMEDOUT);
	ck_assert_uint_eq(a->rq.async, (uint32_t)(UINT32_MAX >> (32 - MKV_RQ_DEPTH)));
	ck_assert_uint_eq(a->rq.nkept, 0);

	collect(got, MKV_RQ_DEPTH);
	for (unsigned i = 0; i < MKV_RQ_DEPTH; i++) {
		got[i].result = 0;
		got[i].out = 100 + i;
	}
	got[3].result = MKV_E_EXISTS;
	mkv_rq_post(b, got, MKV_RQ_DEPTH);
	/* the oldest's answer is kept aside and its entry reused */
	s = submit(a, &r, true, &extra);
	ck_assert_uint_eq(extra, idx[0]);
	ck_assert_uint_eq(a->rq.nkept, 1);
	ck_assert_uint_eq(a->rq.kept[0].seq, seq[0]);
	ck_assert_uint_eq(mkv_rq_pending_slot(a, a->slot), 1);
	/* the kept answer, by its ticket, though its entry holds another request */
	ck_assert_int_eq(mkv_rq_wait(a, idx[0], seq[0], &r, SHORT_NS, false), 0);
	ck_assert_int_eq(r.result, 0);
	ck_assert_uint_eq(r.out, 100);
	ck_assert_uint_eq(a->rq.nkept, 0);
	for (unsigned i = 1; i < MKV_RQ_DEPTH; i++) {
		ck_assert_int_eq(mkv_rq_wait(a, idx[i], seq[i], &r, SHORT_NS, false), 0);
		ck_assert_int_eq(r.result, i == 3 ? MKV_E_EXISTS : 0);
		ck_assert_uint_eq(r.out, 100 + i);
	}
	/* the request in the reused entry is still its own */
	collect(got, 1);
	ck_assert_uint_eq(got[0].seq, s);
	ck_assert_uint_eq(got[0].rq, a->slot * MKV_RQ_DEPTH + idx[0]);
}
END_TEST

struct sleeper {
	struct mkv_pool *p;
	uint32_t bell;            /* the doorbell as the holder last saw it */
	unsigned idx;             /* or the request whose answer is awaited */
	uint32_t seq;
	pid_t tid;
	uint64_t t0;              /* CLOCK_MONOTONIC ns before the wait began */
	uint64_t slept_ns;
	int rc;
};

/* The scheduler's state of thread tid of this process: 'S' while it sleeps. */
static char
thread_state(pid_t tid)
{
	char path[64], buf[256], *st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	ck_assert_ptr_nonnull(f = fopen(path, "r"));
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_ptr_nonnull(st = strrchr(buf, ')'));
	return st[2];
}

/*
 * Until the sleeper's thread is counted asleep, on the doorbell (holder)
 * or on its slot's answers, and sleeps: once counted, the futex wait is
 * the only place where it may block.  A bounded wait.
 */
static void
await_asleep(struct sleeper *s, bool holder)
{
	double end = tu_now() + 10;

	for (;;) {
		pid_t tid = __atomic_load_n(&s->tid, __ATOMIC_SEQ_CST);
		uint64_t n = holder ?
				__atomic_load_n(&s->p->state->bell_sleepers, __ATOMIC_SEQ_CST) :
				__atomic_load_n(&s->p->slots[s->p->slot].sleepers, __ATOMIC_SEQ_CST);

		if (tid && n == 1 && thread_state(tid) == 'S')
			return;
		ck_assert_msg(tu_now() < end, "the thread never slept");
		mkv_clock_sleep(100 * 1000ULL);
	}
}

/* A holder's sleep on the doorbell, for far longer than the test lasts. */
static void *
holder_sleeps(void *arg)
{
	struct sleeper *s = arg;
	uint64_t t0 = mkv_clock_now();

	__atomic_store_n(&s->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	mkv_rq_bell_sleep(s->p, s->bell, LONG_NS);
	s->slept_ns = mkv_clock_now() - t0;
	return NULL;
}

/* A client's wait for its answer. */
static void *
client_sleeps(void *arg)
{
	struct sleeper *s = arg;
	struct mkv_req r;

	s->t0 = mkv_clock_now();
	__atomic_store_n(&s->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	s->rc = mkv_rq_wait(s->p, s->idx, s->seq, &r, LONG_NS, false);
	return NULL;
}

/*
 * A submit makes the futex call that wakes the holder only while a holder
 * sleeps on the doorbell (coherent pools; across hosts every submit makes
 * it, for the processes of its own host).  No holder asleep, no wake-up:
 * it finds the doorbell moved when it looks before it sleeps.  A holder
 * asleep is woken by the submit, not by its own timeout.
 */
START_TEST(test_a_submit_wakes_only_a_sleeping_holder)
{
	struct mkv_req r = publish_req("bell", 1), got[MKV_MAX_BATCH];
	uint64_t wakes = a->rq.wakes;
	struct sleeper s = { .p = b };
	pthread_t t;
	unsigned idx;

	ck_assert_uint_eq(a->state->bell_sleepers, 0);
	for (unsigned i = 0; i < MKV_RQ_DEPTH; i++)
		submit(a, &r, true, &idx);
	ck_assert_uint_eq(a->rq.wakes - wakes, a->noncoherent ? MKV_RQ_DEPTH : 0);
	collect(got, MKV_RQ_DEPTH);
	for (unsigned i = 0; i < MKV_RQ_DEPTH; i++)
		got[i].result = 0;
	mkv_rq_post(b, got, MKV_RQ_DEPTH);
	if (a->noncoherent)
		return;

	s.bell = __atomic_load_n(mkv_rq_doorbell(b), __ATOMIC_SEQ_CST);
	ck_assert_int_eq(pthread_create(&t, NULL, holder_sleeps, &s), 0);
	await_asleep(&s, true);
	wakes = a->rq.wakes;
	submit(a, &r, true, &idx);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(a->rq.wakes - wakes, 1);
	ck_assert_msg(s.slept_ns < LONG_NS, "the holder slept %.3f s", s.slept_ns / 1e9);
	ck_assert_uint_eq(a->state->bell_sleepers, 0);
}
END_TEST

/*
 * An answer makes the futex call that wakes its client only while one of
 * the client's threads sleeps on its slot's counter (coherent pools).  A
 * client asleep is sure to be in its first futex wait when the answer
 * comes only if it comes within the wait's first 20 ms slice: after that
 * it may be between slices, uncounted.  A round stalled that long (a
 * loaded machine) proves nothing, and is tried again.
 */
START_TEST(test_an_answer_wakes_only_a_sleeping_client)
{
	struct mkv_req r = publish_req("answer", 1), got[MKV_MAX_BATCH];
	struct sleeper s = { .p = a };
	uint64_t wakes, t1;
	unsigned idx;
	uint32_t seq = submit(a, &r, false, &idx);
	pthread_t t;

	collect(got, 1);
	got[0].result = 0;
	wakes = b->rq.wakes;
	mkv_rq_post(b, got, 1);
	ck_assert_uint_eq(b->rq.wakes - wakes, a->noncoherent ? 1 : 0);
	ck_assert_int_eq(mkv_rq_wait(a, idx, seq, &r, LONG_NS, false), 0);
	if (a->noncoherent)
		return;

	for (unsigned tries = 1;; tries++) {
		s.tid = 0;
		s.seq = submit(a, &r, false, &s.idx);
		ck_assert_int_eq(pthread_create(&t, NULL, client_sleeps, &s), 0);
		await_asleep(&s, false);
		collect(got, 1);
		got[0].result = 0;
		wakes = b->rq.wakes;
		mkv_rq_post(b, got, 1);
		t1 = mkv_clock_now();
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		ck_assert_int_eq(s.rc, 0);
		ck_assert_uint_eq(a->slots[a->slot].sleepers, 0);
		if (t1 - s.t0 < SLICE_NS) {
			ck_assert_uint_eq(b->rq.wakes - wakes, 1);
			break;
		}
		ck_assert_msg(tries < 20, "every round took longer than a slice");
	}
}
END_TEST

static Suite *
ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("transport");

	tcase_add_checked_fixture(tc, ring_setup, ring_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_collect_sees_the_request_as_submitted);
	tcase_add_test(tc, test_percent_fields_round_trip);
	tcase_add_test(tc, test_post_answers_the_waiter);
	tcase_add_test(tc, test_collect_passes_over_idle_slots_only);
	tcase_add_test(tc, test_an_answer_out_of_range_is_corrupt);
	tcase_add_test(tc, test_a_stale_answer_is_not_taken);
	tcase_add_test(tc, test_a_foreign_answer_is_not_taken);
	tcase_add_test(tc, test_every_entry_busy_the_next_submit_times_out);
	tcase_add_test(tc, test_an_abandoned_request_keeps_its_entry);
	tcase_add_test(tc, test_async_answers_are_kept);
	tcase_add_test(tc, test_a_submit_wakes_only_a_sleeping_holder);
	tcase_add_test(tc, test_an_answer_wakes_only_a_sleeping_client);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(ring_suite());
}
