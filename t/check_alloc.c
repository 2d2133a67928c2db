/* SPDX-License-Identifier: MIT */
/*
 * check_alloc.c -- granted pages against the group commit: a client that
 * dies with a publish pending must not get its key registered on pages
 * the holder hands to another writer in the same batch.
 *
 * The scenario, as real processes: a holder H (it opened first, so it
 * holds the lease), a client A with a buffer granted to it and a client B
 * that filled the pool, so that the only pages left are A's grant.  H is
 * stopped; A submits a publish and is killed while it waits for the
 * answer; B asks for pages; H is continued and finds both requests in one
 * batch.  Whatever the holder decides, a value must live on pages the
 * page table holds for it: A's key on pages marked used (and B gets other
 * pages or MKV_E_NOSPC), or A's publish refused; B's publish never fails
 * with MKV_E_CORRUPT; a deep verify finds nothing; A's value, if
 * published, keeps its bytes after B wrote its own.
 *
 * And a grant's size: it grows while a writer's cache of grants runs dry
 * fast, so that a writer of small values seldom asks the holder.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "unitutil.h"

#define G_PAGE 4096U
#define G_PAGES 256U       /* grant cap: 256 / (4 * 8) = 8 pages a client */
#define G_CLIENTS 8U
#define G_LEASE_MS 10000U  /* longer than any stop here: nobody takes over */
#define G_NODE "a"

static const char key_a[] = "value-of-A";
static const char key_b[] = "value-of-B";

/* What B saw, and the failures of all rounds. */
struct gshared {
	int b_fill_rc;
	long b_filled;
	int b_alloc_rc;
	int b_pub_rc;
	char b_msg[256];
};

/* The pools here: G_PAGES pages, G_CLIENTS slots, lease G_LEASE_MS, every handle on G_NODE. */
static const struct tu_opts g_opts = { .data_size = (uint64_t)G_PAGES * G_PAGE, .page_size = G_PAGE,
		.max_clients = G_CLIENTS, .lease_ms = G_LEASE_MS, .node = G_NODE };

/* The pool of the current round. */
static char pool_path[512];

/* A: open; on 'a' allocate and fill its buffer; on 'p' publish it. */
static int
run_a(int cmd, int ev, void *arg)
{
	size_t len = *(const size_t *)arg;
	struct mkv_pool *pool;
	struct mkv_buf buf;

	if (tu_open(pool_path, 0, &g_opts, &pool) < 0)
		return 20;
	tu_write_byte(ev, 'o');
	if (tu_read_byte(cmd, 60) != 'a')
		return 21;
	if (mkv_alloc(pool, len, &buf) < 0)
		return 22;
	tu_fill(buf.data, len, key_a, sizeof(key_a) - 1);
	tu_write_byte(ev, 'a');
	if (tu_read_byte(cmd, 60) != 'p')
		return 23;
	(void)mkv_publish(pool, key_a, sizeof(key_a) - 1, &buf);
	/* killed before the answer comes */
	for (;;)
		pause();
}

struct b_arg {
	size_t len;
	struct gshared *sh;
};

/* B: open; on 'f' fill the pool with one-page values; on 'b' allocate, fill, publish. */
static int
run_b(int cmd, int ev, void *arg)
{
	struct b_arg *ba = arg;
	struct gshared *sh = ba->sh;
	struct mkv_pool *pool;
	struct mkv_buf buf;
	unsigned next = 0;

	if (tu_open(pool_path, 0, &g_opts, &pool) < 0)
		return 30;
	tu_write_byte(ev, 'o');
	if (tu_read_byte(cmd, 60) != 'f')
		return 31;
	sh->b_filled = tu_fill_until_full(pool, "fill", &next, G_PAGE);
	if (sh->b_filled < 0)
		return 32;
	tu_write_byte(ev, 'f');
	if (tu_read_byte(cmd, 60) != 'b')
		return 33;
	sh->b_alloc_rc = mkv_alloc(pool, ba->len, &buf);
	if (sh->b_alloc_rc == 0) {
		tu_fill(buf.data, ba->len, key_b, sizeof(key_b) - 1);
		sh->b_pub_rc = mkv_publish(pool, key_b, sizeof(key_b) - 1, &buf);
		if (sh->b_pub_rc != 0) {
			snprintf(sh->b_msg, sizeof(sh->b_msg), "%s", mkv_errormsg());
			(void)mkv_abort(pool, &buf);
		}
	} else {
		snprintf(sh->b_msg, sizeof(sh->b_msg), "%s", mkv_errormsg());
	}
	mkv_pool_close(&pool);
	return 0;
}

/* The client entry of @p pid; asserts it has one. */
static struct mkv_client
client_of(struct mkv_pool *pool, pid_t pid)
{
	struct mkv_client cl[G_CLIENTS];
	size_t n = 0;

	TU_OK(mkv_pool_clients(pool, cl, G_CLIENTS, &n));
	for (size_t i = 0; i < n && i < G_CLIENTS; i++)
		if (cl[i].pid == (uint32_t)pid)
			return cl[i];
	ck_abort_msg("pid %d has no client slot", (int)pid);
	return cl[0];
}

/*
 * One round of the scenario on a fresh pool; appends what went wrong to
 * @p out (empty if nothing did).
 */
static void
race_round(unsigned round, unsigned a_pages, unsigned b_pages, int b_first, char *out,
		size_t outsz)
{
	size_t a_len = (size_t)a_pages * G_PAGE - 100, b_len = (size_t)b_pages * G_PAGE - 7;
	struct gshared *sh = tu_shared(sizeof(*sh));
	struct b_arg ba = { b_len, sh };
	struct tu_child h = TU_CHILD_NONE, a = TU_CHILD_NONE, b = TU_CHILD_NONE;
	struct mkv_pool *mon = NULL;
	struct mkv_verify vr;
	struct mkv_stat st;
	char what[640];
	size_t off = strlen(out);
	int rc, a_exists;

#define PROBLEM(...) do { \
	snprintf(what, sizeof(what), __VA_ARGS__); \
	off += (size_t)snprintf(out + off, off < outsz ? outsz - off : 0, \
			"\n  round %u (A %u pages, B %u pages%s): %s", round, a_pages, b_pages, \
			b_first ? ", B in the lower slot" : "", what); \
	if (off >= outsz) \
		off = outsz - 1; \
} while (0)

	snprintf(pool_path, sizeof(pool_path), "%s/pool%u", tu_dir, round);
	TU_OK(tu_open(pool_path, MKV_CREATE, &g_opts, &mon));
	mkv_pool_close(&mon);

	/* H opens first and takes the lease; A and B in the slot order wanted */
	tu_child_start(&h, tu_stay, &(struct tu_stay){ pool_path, &g_opts });
	tu_child_expect(&h, "H", 'o', 20);
	if (b_first) {
		tu_child_start(&b, run_b, &ba);
		tu_child_expect(&b, "B", 'o', 20);
	}
	tu_child_start(&a, run_a, &a_len);
	tu_child_expect(&a, "A", 'o', 20);
	if (!b_first) {
		tu_child_start(&b, run_b, &ba);
		tu_child_expect(&b, "B", 'o', 20);
	}
	/* A takes its grant, then B fills everything else */
	tu_write_byte(a.cmd, 'a');
	tu_child_expect(&a, "A", 'a', 20);
	tu_write_byte(b.cmd, 'f');
	tu_child_expect(&b, "B", 'f', 20);
	ck_assert_msg(sh->b_filled > 0, "B put nothing");

	TU_OK(tu_open(pool_path, MKV_RDONLY, &g_opts, &mon));
	ck_assert_msg((client_of(mon, a.pid).slot < client_of(mon, b.pid).slot) == !b_first,
			"setup: A's slot %u, B's slot %u", client_of(mon, a.pid).slot,
			client_of(mon, b.pid).slot);
	/* B's fill ended in MKV_E_NOSPC: it caches no grant, its next allocation asks H */
	ck_assert_msg(client_of(mon, b.pid).pages_granted == 0,
			"setup: B still holds %llu granted pages",
			(unsigned long long)client_of(mon, b.pid).pages_granted);
	tu_stat(mon, &st);
	ck_assert_uint_eq(st.pages_free, 0);
	ck_assert_uint_eq(st.lease_holder_pid, (uint32_t)h.pid);

	/* H stops; A's publish and B's grant wait for it, A dies meanwhile */
	ck_assert_int_eq(tu_stop(h.pid, 10), 0);
	tu_write_byte(a.cmd, 'p');
	ck_assert_msg(TU_UNTIL((tu_stat(mon, &st), st.requests_pending == 1), 10),
			"A's publish never reached the ring (%llu pending)",
			(unsigned long long)st.requests_pending);
	ck_assert_int_eq(kill(a.pid, SIGKILL), 0);
	ck_assert_int_eq(tu_wait(a.pid), 128 + SIGKILL);
	a.pid = -1;
	tu_write_byte(b.cmd, 'b');
	ck_assert_msg(TU_UNTIL((tu_stat(mon, &st), st.requests_pending == 2), 10),
			"B's grant never reached the ring (%llu pending)",
			(unsigned long long)st.requests_pending);
	ck_assert_int_eq(kill(h.pid, SIGCONT), 0);
	rc = tu_reap(b.pid, 30);
	ck_assert_msg(rc == 0, "B exited with %d", rc);
	b.pid = -1;

	/* what the holder made of it */
	if (sh->b_alloc_rc != 0 && sh->b_alloc_rc != MKV_E_NOSPC)
		PROBLEM("B's mkv_alloc = %d (%s): %s", sh->b_alloc_rc,
				mkv_strerror(sh->b_alloc_rc), sh->b_msg);
	if (sh->b_alloc_rc == 0 && sh->b_pub_rc != 0)
		PROBLEM("B's mkv_publish = %d (%s): %s", sh->b_pub_rc, mkv_strerror(sh->b_pub_rc),
				sh->b_msg);
	a_exists = mkv_exists(mon, key_a, sizeof(key_a) - 1);
	if (a_exists < 0)
		PROBLEM("mkv_exists(A) = %d", a_exists);
	if (a_exists == 1 && (rc = tu_check(mon, key_a, sizeof(key_a) - 1, a_len)) != 0)
		PROBLEM("A's published value does not read back (tu_check %d: %s): "
				"its pages were written by B", rc, rc == 2 ? "bytes differ" : "");
	if (sh->b_alloc_rc == 0 && sh->b_pub_rc == 0 &&
	    (rc = tu_check(mon, key_b, sizeof(key_b) - 1, b_len)) != 0)
		PROBLEM("B's published value does not read back (tu_check %d)", rc);
	rc = mkv_pool_verify(mon, MKV_VERIFY_DEEP, &vr);
	if (rc != 0)
		PROBLEM("mkv_pool_verify(DEEP) = %d: %llu problems, first: %s", rc,
				(unsigned long long)vr.problems, vr.first_problem);
	mkv_pool_close(&mon);
	tu_child_end(&h);
	tu_child_end(&a);
	tu_child_end(&b);
	tu_shared_free(sh, sizeof(*sh));
#undef PROBLEM
}

START_TEST(test_dead_clients_publish_and_anothers_grant_in_one_batch)
{
	static const struct { unsigned a_pages, b_pages; int b_first; } rounds[] = {
		{ 1, 1, 0 },  /* A's grant: 4 pages; B asks 4 */
		{ 2, 2, 0 },  /* A's grant: 8 pages; B asks 8 */
		{ 2, 5, 0 },  /* B's run covers A's buffer and the rest of its grant */
		{ 1, 3, 0 },  /* B asks 8, then just 3 */
		{ 3, 1, 0 },
		{ 2, 2, 1 },  /* B's grant applied before A's publish */
	};
	char out[4096] = "";

	for (unsigned i = 0; i < sizeof(rounds) / sizeof(rounds[0]); i++)
		race_round(i, rounds[i].a_pages, rounds[i].b_pages, rounds[i].b_first, out,
				sizeof(out));
	ck_assert_msg(out[0] == '\0', "a value was registered on pages not held for it:%s", out);
}
END_TEST

/*
 * A grant's size (alloc.c): four allocations of the size asked for at
 * first; twice as many each time the cache runs dry soon after the last
 * grant, up to the cap; never fewer pages than asked, however small the
 * cap; half as many after a grant that lasted 100 ms.
 */
START_TEST(test_grant_grows_when_used_fast_and_shrinks_when_slow)
{
	struct mkv_pool *p;
	uint64_t n = 0;
	unsigned asks = 1;

	unit_holder_pool(256, &p, NULL);
	ck_assert_uint_eq(mkv_grants_size(p, 3, 200), 12);
	/* each ask right after the last: the size doubles to the cap */
	for (; asks < 1000 && n < 200; asks++)
		n = mkv_grants_size(p, 3, 200);
	ck_assert_msg(n == 200, "after %u quick asks a grant holds %llu pages", asks,
			(unsigned long long)n);
	ck_assert_uint_eq(mkv_grants_size(p, 300, 200), 300);
	ck_assert_uint_eq(mkv_grants_size(p, 5, 0), 5);
	/* past the doublings, 256 allocations; then halved by each slow grant */
	ck_assert_uint_eq(mkv_grants_size(p, 1, 1000), 256);
	tu_sleep_ms(110);
	ck_assert_uint_eq(mkv_grants_size(p, 1, 1000), 128);
	tu_sleep_ms(110);
	ck_assert_uint_eq(mkv_grants_size(p, 1, 1000), 64);
	mkv_pool_close(&p);
}
END_TEST

/*
 * A client putting one-page values asks the holder for pages far less often
 * than once per four of them: every registry txn of the run is one of its
 * publishes or one of its grants.
 */
START_TEST(test_writer_of_small_values_asks_for_few_grants)
{
	enum { PUTS = 512 };
	struct mkv_pool *h, *c;
	struct mkv_stat st;
	uint64_t before, grants;
	char key[64];

	unit_holder_pool(4096, &h, NULL);
	TU_OK(tu_pool_open(tu_dir, 0, &c));
	ck_assert(!c->h.holding);
	before = mkv_reg_last_txn(h);
	for (unsigned i = 0; i < PUTS; i++) {
		size_t klen = tu_key(key, "small-", i);

		TU_OK(tu_put(c, key, klen, 100));
	}
	grants = mkv_reg_last_txn(h) - before - PUTS;
	ck_assert_msg(grants <= PUTS / 16, "%llu grants for %u one-page values",
			(unsigned long long)grants, PUTS);
	/* within the cap: a quarter of the pool over the clients' slots */
	tu_stat(h, &st);
	ck_assert_uint_le(st.pages_granted, 4096 / (4 * TU_MAX_CLIENTS));
	mkv_pool_close(&c);
	mkv_pool_close(&h);
}
END_TEST

static Suite *
grants_suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *tc = tcase_create("group_commit");
	TCase *sz = tcase_create("size");

	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, test_dead_clients_publish_and_anothers_grant_in_one_batch);
	suite_add_tcase(s, tc);
	tcase_add_checked_fixture(sz, tu_setup, tu_teardown);
	tcase_set_timeout(sz, 60);
	tcase_add_test(sz, test_grant_grows_when_used_fast_and_shrinks_when_slow);
	tcase_add_test(sz, test_writer_of_small_values_asks_for_few_grants);
	suite_add_tcase(s, sz);
	return s;
}

int
main(void)
{
	return tu_run_suite(grants_suite());
}
