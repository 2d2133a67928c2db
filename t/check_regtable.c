/* SPDX-License-Identifier: MIT */
/*
 * check_regtable.c -- the registry's tables (regtable.c) and transactions
 * (regtxn.c) through their private interface, in one process: entries and
 * the pages index, kids counts, quarantine records, answers, meta values,
 * the scans and counts; what an aborted txn leaves (nothing) and what a
 * read txn sees (the committed state of its start).  Damaged registry
 * files are check_regcheck's; here the only damage is a record no
 * function of the library writes, put in with LMDB itself while the pool
 * is closed, to see how the scans decode it.
 *
 * The test's handle holds the lease; its service thread writes the
 * registry only for requests in the ring, and there are none.
 */
#include <endian.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry.h"
#include "testutil.h"
#include "unitutil.h"

#define PAGES 64U

static struct mkv_pool *p;

static void
reg_setup(void)
{
	tu_setup();
	unit_holder_pool(PAGES, &p, NULL);
}

static void
reg_teardown(void)
{
	mkv_pool_close(&p);
	tu_teardown();
}

static struct mkv_txn *
wtxn(void)
{
	struct mkv_txn *t;

	ck_assert_int_eq(mkv_reg_wtxn(p, &t), 0);
	return t;
}

static void
commit(struct mkv_txn *t)
{
	ck_assert_int_eq(mkv_reg_wtxn_end(p, t, true), 0);
}

static struct mkv_txn *
rtxn(void)
{
	struct mkv_txn *t;

	ck_assert_int_eq(mkv_reg_rtxn(p, &t), 0);
	return t;
}

static struct mkv_entry
entry(uint64_t page, uint64_t npages, uint64_t length)
{
	return (struct mkv_entry){ .version = MKV_ENTRY_VERSION, .page = page, .npages = npages,
			.length = length, .checksum = 0xc0ffee ^ page, .txn = 7, .parent = 0 };
}

static void
insert(struct mkv_txn *t, const char *key, const struct mkv_entry *e)
{
	ck_assert_int_eq(mkv_reg_insert(p, t, key, strlen(key), e), 0);
}

static uint64_t
count(struct mkv_txn *t, enum mkv_table table)
{
	uint64_t n = UINT64_MAX;

	ck_assert_int_eq(mkv_reg_count(p, t, table, &n), 0);
	return n;
}

START_TEST(test_insert_lookup_remove)
{
	struct mkv_entry e = entry(3, 2, TU_PAGE_SIZE + 5), e2, got;
	struct mkv_txn *t = wtxn(), *r;
	uint8_t key[MKV_KEY_MAX];
	size_t klen = 0;

	ck_assert_uint_eq(count(t, MKV_TABLE_ENTRIES), 0);
	e.parent = 0x1234;
	insert(t, "k1", &e);
	/* the txn sees its own writes */
	ck_assert_int_eq(mkv_reg_lookup(p, t, "k1", 2, &got), 0);
	ck_assert_mem_eq(&got, &e, sizeof(e));
	ck_assert_int_eq(mkv_reg_exists(p, t, "k1", 2), 0);
	ck_assert_int_eq(mkv_reg_exists(p, t, "k2", 2), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_page_key(p, t, 3, key, &klen), 0);
	ck_assert_uint_eq(klen, 2);
	ck_assert_mem_eq(key, "k1", 2);
	ck_assert_int_eq(mkv_reg_page_key(p, t, 4, key, &klen), MKV_E_NOTFOUND);
	/* a value on a first page taken: refused, nothing written, the txn goes on */
	ck_assert_int_eq(mkv_reg_insert(p, t, "k9", 2, &e), 1);
	ck_assert_int_eq(mkv_reg_exists(p, t, "k9", 2), MKV_E_NOTFOUND);
	ck_assert_uint_eq(count(t, MKV_TABLE_ENTRIES), 1);
	ck_assert_uint_eq(count(t, MKV_TABLE_PAGES), 1);
	commit(t);
	/*
	 * Nor a key registered again (write-once): refused, though the pages
	 * record of the new page went in before the entry failed, and the
	 * caller aborts (commit.c fails the txn after an insert fails).
	 */
	t = wtxn();
	e2 = entry(6, 1, 1);
	mkv_err_clear();
	ck_assert_int_eq(mkv_reg_insert(p, t, "k1", 2, &e2), MKV_E_EXISTS);
	ck_assert_str_ne(mkv_errormsg(), "");
	ck_assert_int_eq(mkv_reg_wtxn_end(p, t, false), 0);

	r = rtxn();
	ck_assert_int_eq(mkv_reg_lookup(p, r, "k1", 2, &got), 0);
	ck_assert_int_eq(mkv_reg_exists(p, r, "k9", 2), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_page_key(p, r, 6, key, &klen), MKV_E_NOTFOUND);
	ck_assert_uint_eq(got.parent, 0x1234);
	ck_assert_uint_eq(got.length, TU_PAGE_SIZE + 5);
	mkv_reg_rtxn_done(p, r);

	t = wtxn();
	ck_assert_int_eq(mkv_reg_remove(p, t, "k1", 2, 3), 0);
	mkv_err_clear();
	ck_assert_int_eq(mkv_reg_lookup(p, t, "k1", 2, &got), MKV_E_NOTFOUND);
	ck_assert_str_eq(mkv_errormsg(), "no such key");
	ck_assert_int_eq(mkv_reg_exists(p, t, "k1", 2), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_page_key(p, t, 3, key, &klen), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_remove(p, t, "k1", 2, 3), MKV_E_NOTFOUND);
	ck_assert_uint_eq(count(t, MKV_TABLE_ENTRIES), 0);
	ck_assert_uint_eq(count(t, MKV_TABLE_PAGES), 0);
	commit(t);
}
END_TEST

START_TEST(test_lookup_checks_the_entry)
{
	struct mkv_entry bad_version = entry(1, 1, 10), outside = entry(PAGES - 1, 2, 10);
	struct mkv_entry empty = entry(5, 0, 0), too_long = entry(6, 1, TU_PAGE_SIZE + 1), got;
	struct mkv_txn *t = wtxn();

	bad_version.version = MKV_ENTRY_VERSION + 1;
	insert(t, "version", &bad_version);
	insert(t, "outside", &outside);
	insert(t, "empty", &empty);
	insert(t, "too-long", &too_long);
	ck_assert_int_eq(mkv_reg_lookup(p, t, "version", 7, &got), MKV_E_VERSION);
	ck_assert_int_eq(mkv_reg_lookup(p, t, "outside", 7, &got), MKV_E_CORRUPT);
	ck_assert_int_eq(mkv_reg_lookup(p, t, "empty", 5, &got), MKV_E_CORRUPT);
	ck_assert_int_eq(mkv_reg_lookup(p, t, "too-long", 8, &got), MKV_E_CORRUPT);
	/* whether a key is there does not read its entry */
	ck_assert_int_eq(mkv_reg_exists(p, t, "outside", 7), 0);
	ck_assert_int_eq(mkv_reg_wtxn_end(p, t, false), 0);
}
END_TEST

START_TEST(test_aborted_txn_leaves_nothing)
{
	struct mkv_entry e1 = entry(1, 1, 1), e2 = entry(2, 1, 1), got;
	struct mkv_extent x = { 2, 1 };
	struct mkv_answer_rec a = { 1, 2, 0, 0, 3, 4 };
	struct mkv_txn *t = wtxn(), *r;
	uint64_t last = mkv_reg_last_txn(p), v, n;
	uint8_t key[MKV_KEY_MAX];
	size_t klen;

	ck_assert_uint_eq(mkv_reg_txn_id(t), last + 1);
	insert(t, "kept", &e1);
	commit(t);
	ck_assert_uint_eq(mkv_reg_last_txn(p), last + 1);

	t = wtxn();
	insert(t, "dropped", &e2);
	ck_assert_int_eq(mkv_reg_kids_add(p, t, 99, 1), 0);
	ck_assert_int_eq(mkv_reg_freed_put(p, t, &x, 1), 0);
	ck_assert_int_eq(mkv_reg_answer_put(p, t, 5, &a), 0);
	ck_assert_int_eq(mkv_reg_meta_put(p, t, "bytes", 12345), 0);
	ck_assert_int_eq(mkv_reg_wtxn_end(p, t, false), 0);
	ck_assert_uint_eq(mkv_reg_last_txn(p), last + 1);

	r = rtxn();
	ck_assert_int_eq(mkv_reg_lookup(p, r, "kept", 4, &got), 0);
	ck_assert_int_eq(mkv_reg_exists(p, r, "dropped", 7), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_page_key(p, r, 2, key, &klen), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_kids(p, r, 99, &n), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_freed_last(p, r, &v), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_answer_get(p, r, 5, &a), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_meta_get(p, r, "bytes", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_uint_eq(count(r, MKV_TABLE_ENTRIES), 1);
	mkv_reg_rtxn_done(p, r);
}
END_TEST

START_TEST(test_read_txn_sees_its_snapshot)
{
	struct mkv_entry e = entry(4, 1, 1);
	struct mkv_txn *before = rtxn(), *t = wtxn(), *after;

	insert(t, "new", &e);
	/* neither a write in progress ... */
	ck_assert_int_eq(mkv_reg_exists(p, before, "new", 3), MKV_E_NOTFOUND);
	commit(t);
	/* ... nor one committed after the read txn began */
	ck_assert_int_eq(mkv_reg_exists(p, before, "new", 3), MKV_E_NOTFOUND);
	ck_assert_uint_eq(count(before, MKV_TABLE_ENTRIES), 0);
	ck_assert_uint_eq(mkv_reg_txn_id(before), mkv_reg_last_txn(p) - 1);
	mkv_reg_rtxn_done(p, before);
	after = rtxn();
	ck_assert_int_eq(mkv_reg_exists(p, after, "new", 3), 0);
	ck_assert_uint_eq(mkv_reg_txn_id(after), mkv_reg_last_txn(p));
	mkv_reg_rtxn_done(p, after);
}
END_TEST

START_TEST(test_kids_count_up_and_down)
{
	struct mkv_txn *t = wtxn(), *r;
	uint64_t n = 42;

	ck_assert_int_eq(mkv_reg_kids(p, t, 0xabc, &n), MKV_E_NOTFOUND);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(mkv_reg_kids_add(p, t, 0xabc, 1), 0);
	ck_assert_int_eq(mkv_reg_kids_add(p, t, 0xabc, 1), 0);
	ck_assert_int_eq(mkv_reg_kids_add(p, t, 0xdef, 1), 0);
	ck_assert_int_eq(mkv_reg_kids(p, t, 0xabc, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(mkv_reg_kids_add(p, t, 0xabc, -1), 0);
	commit(t);
	r = rtxn();
	ck_assert_int_eq(mkv_reg_kids(p, r, 0xabc, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(mkv_reg_kids(p, r, 0xdef, &n), 0);
	ck_assert_uint_eq(n, 1);
	mkv_reg_rtxn_done(p, r);
	/* at zero the record goes, and a count never goes below zero */
	t = wtxn();
	ck_assert_int_eq(mkv_reg_kids_add(p, t, 0xabc, -1), 0);
	ck_assert_int_eq(mkv_reg_kids(p, t, 0xabc, &n), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_kids_add(p, t, 0xabc, -1), 0);
	ck_assert_int_eq(mkv_reg_kids(p, t, 0xabc, &n), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_kids_add(p, t, 0xabc, 1), 0);
	ck_assert_int_eq(mkv_reg_kids(p, t, 0xabc, &n), 0);
	ck_assert_uint_eq(n, 1);
	commit(t);
}
END_TEST

/* What mkv_reg_freed_pop() hands out, and what it answers. */
struct popped {
	struct mkv_extent x[8];
	unsigned n;
	int answer;
};

static int
pop_one(void *arg, const struct mkv_extent *e)
{
	struct popped *c = arg;

	ck_assert_uint_lt(c->n, 8);
	c->x[c->n++] = *e;
	return c->answer;
}

static uint64_t
freed_put_committed(const struct mkv_extent *x, size_t n)
{
	struct mkv_txn *t = wtxn();
	uint64_t id = mkv_reg_txn_id(t);

	ck_assert_int_eq(mkv_reg_freed_put(p, t, x, n), 0);
	commit(t);
	return id;
}

START_TEST(test_freed_records_pop_below_a_bound)
{
	static const struct mkv_extent xa[] = { { 1, 2 }, { 5, 1 } }, xb[] = { { 9, 3 } };
	uint64_t a = freed_put_committed(xa, 2), b = freed_put_committed(xb, 1), last;
	struct popped got = { .answer = 0 };
	struct mkv_txn *t = wtxn();

	ck_assert_uint_eq(b, a + 1);
	ck_assert_int_eq(mkv_reg_freed_last(p, t, &last), 0);
	ck_assert_uint_eq(last, b);
	ck_assert_uint_eq(count(t, MKV_TABLE_FREED), 2);
	/* below b: a's record only, its extents in order */
	ck_assert_int_eq(mkv_reg_freed_pop(p, t, b, pop_one, &got), 0);
	ck_assert_uint_eq(got.n, 2);
	ck_assert(got.x[0].page == 1 && got.x[0].npages == 2);
	ck_assert(got.x[1].page == 5 && got.x[1].npages == 1);
	ck_assert_uint_eq(count(t, MKV_TABLE_FREED), 1);
	ck_assert_int_eq(mkv_reg_freed_last(p, t, &last), 0);
	ck_assert_uint_eq(last, b);
	got.n = 0;
	ck_assert_int_eq(mkv_reg_freed_pop(p, t, b, pop_one, &got), 0);
	ck_assert_uint_eq(got.n, 0);
	/* an error from fn stops the pop, and the record stays */
	got.answer = MKV_E_NOMEM;
	ck_assert_int_eq(mkv_reg_freed_pop(p, t, b + 1, pop_one, &got), MKV_E_NOMEM);
	ck_assert_uint_eq(got.n, 1);
	ck_assert_uint_eq(count(t, MKV_TABLE_FREED), 1);
	/* an extent skipped as damaged: the record goes all the same */
	got = (struct popped){ .answer = 1 };
	ck_assert_int_eq(mkv_reg_freed_pop(p, t, b + 1, pop_one, &got), 0);
	ck_assert_uint_eq(got.n, 1);
	ck_assert(got.x[0].page == 9 && got.x[0].npages == 3);
	ck_assert_int_eq(mkv_reg_freed_last(p, t, &last), MKV_E_NOTFOUND);
	ck_assert_uint_eq(count(t, MKV_TABLE_FREED), 0);
	commit(t);
}
END_TEST

START_TEST(test_freed_put_twice_in_a_txn_keeps_the_last)
{
	static const struct mkv_extent x1[] = { { 1, 1 } }, x2[] = { { 7, 2 }, { 20, 4 } };
	struct popped got = { .answer = 0 };
	struct mkv_txn *t = wtxn();
	uint64_t id = mkv_reg_txn_id(t);

	ck_assert_int_eq(mkv_reg_freed_put(p, t, x1, 1), 0);
	ck_assert_int_eq(mkv_reg_freed_put(p, t, x2, 2), 0);
	ck_assert_uint_eq(count(t, MKV_TABLE_FREED), 1);
	commit(t);
	t = wtxn();
	ck_assert_int_eq(mkv_reg_freed_pop(p, t, id + 1, pop_one, &got), 0);
	ck_assert_uint_eq(got.n, 2);
	ck_assert(got.x[0].page == 7 && got.x[1].page == 20 && got.x[1].npages == 4);
	commit(t);
}
END_TEST

START_TEST(test_answers_by_request_entry)
{
	struct mkv_answer_rec a = { 3, 17, MKV_E_EXISTS, 0, 40, 6 }, b = { 4, 1, 0, 0, 8, 2 }, got;
	struct mkv_txn *t = wtxn(), *r;

	ck_assert_int_eq(mkv_reg_answer_get(p, t, 11, &got), MKV_E_NOTFOUND);
	ck_assert_int_eq(mkv_reg_answer_put(p, t, 11, &a), 0);
	ck_assert_int_eq(mkv_reg_answer_put(p, t, 12, &b), 0);
	commit(t);
	r = rtxn();
	ck_assert_int_eq(mkv_reg_answer_get(p, r, 11, &got), 0);
	ck_assert_mem_eq(&got, &a, sizeof(a));
	ck_assert_int_eq(mkv_reg_answer_get(p, r, 12, &got), 0);
	ck_assert_mem_eq(&got, &b, sizeof(b));
	ck_assert_int_eq(mkv_reg_answer_get(p, r, 13, &got), MKV_E_NOTFOUND);
	mkv_reg_rtxn_done(p, r);
	/* the last request of an entry replaces the one before */
	t = wtxn();
	b.seq = 2;
	ck_assert_int_eq(mkv_reg_answer_put(p, t, 11, &b), 0);
	ck_assert_int_eq(mkv_reg_answer_get(p, t, 11, &got), 0);
	ck_assert_mem_eq(&got, &b, sizeof(b));
	commit(t);
}
END_TEST

START_TEST(test_meta_values)
{
	struct mkv_txn *t = wtxn(), *r;
	uint64_t v;

	ck_assert_int_eq(mkv_reg_meta_get(p, t, "format", &v), 0);
	ck_assert_uint_eq(v, MKV_REGISTRY_FORMAT);
	ck_assert_int_eq(mkv_reg_meta_get(p, t, "page_size", &v), 0);
	ck_assert_uint_eq(v, TU_PAGE_SIZE);
	ck_assert_int_eq(mkv_reg_meta_get(p, t, "nr_pages", &v), 0);
	ck_assert_uint_eq(v, PAGES);
	ck_assert_int_eq(mkv_reg_meta_get(p, t, "generation", &v), 0);
	ck_assert_uint_eq(v, p->h.generation);
	/* a value the library needs and does not find is damage */
	mkv_err_clear();
	ck_assert_int_eq(mkv_reg_meta_get(p, t, "no-such-value", &v), MKV_E_CORRUPT);
	ck_assert_str_ne(mkv_errormsg(), "");
	ck_assert_int_eq(mkv_reg_meta_put(p, t, "evictions", 77), 0);
	ck_assert_int_eq(mkv_reg_meta_put(p, t, "evictions", 78), 0);
	commit(t);
	r = rtxn();
	ck_assert_int_eq(mkv_reg_meta_get(p, r, "evictions", &v), 0);
	ck_assert_uint_eq(v, 78);
	mkv_reg_rtxn_done(p, r);
}
END_TEST

START_TEST(test_fence_refuses_an_older_token)
{
	struct mkv_txn *t = wtxn();

	ck_assert_int_eq(mkv_reg_fence(p, t), 0);
	ck_assert_int_eq(mkv_reg_meta_put(p, t, "generation", p->h.generation + 1), 0);
	mkv_err_clear();
	ck_assert_int_eq(mkv_reg_fence(p, t), MKV_E_FENCED);
	ck_assert_str_ne(mkv_errormsg(), "");
	ck_assert_int_eq(mkv_reg_wtxn_end(p, t, false), 0);
	/* the newer token was never committed */
	t = wtxn();
	ck_assert_int_eq(mkv_reg_fence(p, t), 0);
	ck_assert_int_eq(mkv_reg_wtxn_end(p, t, false), 0);
}
END_TEST

/* What a scan saw: keys (entries) or extents (freed), and record sizes. */
struct seen {
	char keys[8][16];
	struct mkv_extent x[8];
	size_t size[8];
	bool decoded[8];
	unsigned n, stop_at;
};

static int
see_entry(void *arg, const void *key, size_t klen, const struct mkv_entry *e, size_t size)
{
	struct seen *s = arg;

	ck_assert_uint_lt(s->n, 8);
	ck_assert_uint_lt(klen, 16);
	memcpy(s->keys[s->n], key, klen);
	s->keys[s->n][klen] = '\0';
	s->decoded[s->n] = e != NULL;
	if (e)
		s->x[s->n] = (struct mkv_extent){ e->page, e->npages };
	s->size[s->n] = size;
	return ++s->n == s->stop_at ? 99 : 0;
}

static int
see_freed(void *arg, const struct mkv_extent *e, size_t size)
{
	struct seen *s = arg;

	ck_assert_uint_lt(s->n, 8);
	s->decoded[s->n] = e != NULL;
	if (e)
		s->x[s->n] = *e;
	s->size[s->n] = size;
	return ++s->n == s->stop_at ? 99 : 0;
}

START_TEST(test_scans_in_key_order)
{
	static const struct mkv_extent x1[] = { { 30, 1 }, { 31, 2 } }, x2[] = { { 40, 4 } };
	struct mkv_entry eb = entry(2, 1, 1), ea = entry(1, 1, 1), ec = entry(3, 2, 5);
	struct seen s = { .stop_at = 0 };
	struct mkv_txn *t = wtxn(), *r;

	insert(t, "b", &eb);
	insert(t, "a", &ea);
	insert(t, "c", &ec);
	commit(t);
	freed_put_committed(x1, 2);
	freed_put_committed(x2, 1);
	r = rtxn();
	ck_assert_uint_eq(count(r, MKV_TABLE_ENTRIES), 3);
	ck_assert_uint_eq(count(r, MKV_TABLE_PAGES), 3);
	ck_assert_uint_eq(count(r, MKV_TABLE_FREED), 2);
	ck_assert_int_eq(mkv_reg_entries_scan(p, r, see_entry, &s), 0);
	ck_assert_uint_eq(s.n, 3);
	ck_assert_str_eq(s.keys[0], "a");
	ck_assert_str_eq(s.keys[1], "b");
	ck_assert_str_eq(s.keys[2], "c");
	ck_assert(s.decoded[2] && s.x[2].page == 3 && s.x[2].npages == 2);
	ck_assert_uint_eq(s.size[0], sizeof(struct mkv_entry));
	/* fn's non-zero answer stops the scan and is returned */
	s = (struct seen){ .stop_at = 2 };
	ck_assert_int_eq(mkv_reg_entries_scan(p, r, see_entry, &s), 99);
	ck_assert_uint_eq(s.n, 2);
	/* the oldest record first, each extent with its record's size */
	s = (struct seen){ .stop_at = 0 };
	ck_assert_int_eq(mkv_reg_freed_scan(p, r, see_freed, &s), 0);
	ck_assert_uint_eq(s.n, 3);
	ck_assert(s.x[0].page == 30 && s.x[1].page == 31 && s.x[1].npages == 2);
	ck_assert(s.x[2].page == 40 && s.x[2].npages == 4);
	ck_assert_uint_eq(s.size[0], 2 * sizeof(struct mkv_extent));
	ck_assert_uint_eq(s.size[2], sizeof(struct mkv_extent));
	mkv_reg_rtxn_done(p, r);
}
END_TEST

/*
 * Records the library never writes (an entry of 10 bytes, a quarantine
 * record of an extent and a half), put in with LMDB while the pool is
 * closed: the scans hand them on undecoded, the pop leaves the record.
 */
START_TEST(test_scans_hand_on_records_they_cannot_decode)
{
	static const char half[] = "0123456789";
	struct mkv_extent rec[2] = { { 12, 3 }, { 0, 0 } };
	uint64_t id = htobe64(1000000);
	MDB_val kf = { sizeof(id), &id }, df = { sizeof(rec[0]) + 4, rec };
	MDB_val ke = { 5, (void *)"short" }, de = { sizeof(half) - 1, (void *)half };
	struct seen s = { .stop_at = 0 };
	struct popped got = { .answer = 0 };
	char *path = tu_pool_path(tu_dir);
	struct mkv_txn *t;
	MDB_env *env;
	MDB_txn *txn;

	mkv_pool_close(&p);
	tu_registry_begin(path, &env, &txn);
	ck_assert_int_eq(mdb_put(txn, tu_registry_table(txn, "freed"), &kf, &df, 0), 0);
	ck_assert_int_eq(mdb_put(txn, tu_registry_table(txn, NULL), &ke, &de, 0), 0);
	tu_registry_end(env, txn);
	free(path);
	ck_assert_int_eq(tu_pool_open(tu_dir, 0, &p), 0);

	t = wtxn();
	ck_assert_int_eq(mkv_reg_entries_scan(p, t, see_entry, &s), 0);
	ck_assert_uint_eq(s.n, 1);
	ck_assert_str_eq(s.keys[0], "short");
	ck_assert(!s.decoded[0]);
	ck_assert_uint_eq(s.size[0], 10);
	s = (struct seen){ .stop_at = 0 };
	ck_assert_int_eq(mkv_reg_freed_scan(p, t, see_freed, &s), 0);
	ck_assert_uint_eq(s.n, 2);
	ck_assert(s.decoded[0] && s.x[0].page == 12 && s.x[0].npages == 3);
	ck_assert(!s.decoded[1]);
	ck_assert_uint_eq(s.size[0], sizeof(struct mkv_extent) + 4);
	ck_assert_uint_eq(s.size[1], sizeof(struct mkv_extent) + 4);
	/* damaged beyond use: skipped, and left where it is */
	ck_assert_int_eq(mkv_reg_freed_pop(p, t, UINT64_MAX, pop_one, &got), 0);
	ck_assert_uint_eq(got.n, 0);
	ck_assert_uint_eq(count(t, MKV_TABLE_FREED), 1);
	ck_assert_uint_eq(count(t, MKV_TABLE_ENTRIES), 1);
	ck_assert_int_eq(mkv_reg_wtxn_end(p, t, false), 0);
}
END_TEST

/*
 * What a non-coherent pool reads of LMDB's formats, checked against the
 * LMDB this is built with: the txn id of a meta page, and the magic,
 * format and last txn id of the lock file, after commits, where the
 * registry module looks for them.  A new LMDB that moves one fails here.
 */
START_TEST(test_lmdb_format_offsets_are_this_lmdbs)
{
	size_t psize = (size_t)sysconf(_SC_PAGESIZE);
	MDB_envinfo info;
	uint64_t meta[2], id;
	uint32_t head[2];
	char key[32];
	int fd;

	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(tu_put(p, key, tu_key(key, "fmt", i), 100), 0);
	mdb_env_info(p->reg->env, &info);
	fd = openat(p->dirfd, MKV_FILE_REGISTRY, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &meta[0], 8, MKV_REG_META_TXNID), 8);
	ck_assert_int_eq(pread(fd, &meta[1], 8, (off_t)(psize + MKV_REG_META_TXNID)), 8);
	close(fd);
	ck_assert_uint_eq(meta[0] > meta[1] ? meta[0] : meta[1], info.me_last_txnid);
	ck_assert_uint_eq(meta[0] > meta[1] ? meta[1] : meta[0], info.me_last_txnid - 1);
	/* the lock file (a non-coherent pool's: in the lock directory) */
	fd = openat(p->reg->lockdir_fd >= 0 ? p->reg->lockdir_fd : p->dirfd, MKV_FILE_LOCK,
			O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, head, sizeof(head), 0), (ssize_t)sizeof(head));
	ck_assert_int_eq(pread(fd, &id, 8, MKV_REG_LOCK_TXNID), 8);
	ck_assert_uint_eq(head[0], MKV_REG_LOCK_MAGIC);
	ck_assert_uint_eq(head[1], MKV_REG_LOCK_FORMAT);
	ck_assert_uint_eq(id, info.me_last_txnid);
	/* closing a descriptor of the lock file drops LMDB's locks: keep it to the end */
	mkv_pool_close(&p);
	close(fd);
}
END_TEST

static Suite *
regtable_suite(void)
{
	Suite *s = suite_create("regtable");
	TCase *tc = tcase_create("tables");

	tcase_add_checked_fixture(tc, reg_setup, reg_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_insert_lookup_remove);
	tcase_add_test(tc, test_lookup_checks_the_entry);
	tcase_add_test(tc, test_aborted_txn_leaves_nothing);
	tcase_add_test(tc, test_read_txn_sees_its_snapshot);
	tcase_add_test(tc, test_kids_count_up_and_down);
	tcase_add_test(tc, test_freed_records_pop_below_a_bound);
	tcase_add_test(tc, test_freed_put_twice_in_a_txn_keeps_the_last);
	tcase_add_test(tc, test_answers_by_request_entry);
	tcase_add_test(tc, test_meta_values);
	tcase_add_test(tc, test_fence_refuses_an_older_token);
	tcase_add_test(tc, test_scans_in_key_order);
	tcase_add_test(tc, test_scans_hand_on_records_they_cannot_decode);
	tcase_add_test(tc, test_lmdb_format_offsets_are_this_lmdbs);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(regtable_suite());
}
