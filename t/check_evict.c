/* SPDX-License-Identifier: MIT */
/*
 * check_evict.c -- automatic eviction: a pool kept full holds its pages in
 * values and evicts in batches, allocations evict when short of pages, views of evicted keys stay
 * intact, a writer keeping a small pool full never gets MKV_E_NOSPC
 * while views come and go, a pool whose every page is pinned (or granted)
 * gives MKV_E_NOSPC and recovers once the views are released; values whose
 * access hints were lost still go; chains lose their tails before
 * their heads, and mkv_publish_chain() links blocks from any client.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "layout.h"

#define PAGES (TU_DATA_SIZE / TU_PAGE_SIZE)
#define LOW 5U
#define HIGH 10U

/* A pool with automatic eviction on (tu_pool_create turns it off). */
static void
evict_pool(uint64_t data_size, struct mkv_pool **pool)
{
	struct mkv_opts *opts;
	char *path = tu_pool_path(tu_dir);

	TU_OK(mkv_opts_new(&opts));
	TU_OK(mkv_opts_set_page_size(opts, TU_PAGE_SIZE));
	TU_OK(mkv_opts_set_data_size(opts, data_size));
	TU_OK(mkv_opts_set_watermarks(opts, LOW, HIGH));
	TU_OK(mkv_pool_open(path, MKV_CREATE, opts, pool));
	mkv_opts_delete(&opts);
	free(path);
}

/*
 * A writer keeping the pool full, with the default watermarks: from the
 * first eviction on, at least 98 % of the pages hold values; only what is
 * in flight and one eviction's batch are kept free (a fixed 5-10 % free
 * held 90-95 %).
 */
START_TEST(test_full_pool_holds_its_pages_in_values)
{
	struct mkv_pool *pool;
	struct mkv_verify rep;
	struct mkv_stat st;
	char key[64];
	size_t klen;
	unsigned n = 4 * PAGES, present = 0, samples = 0;

	evict_pool(TU_DATA_SIZE, &pool);
	TU_OK(mkv_pool_set_watermarks(pool, MKV_DEFAULT_LOW_WATERMARK, MKV_DEFAULT_HIGH_WATERMARK));
	for (unsigned i = 0; i < n; i++) {
		klen = tu_key(key, "long-", i);
		TU_OK(tu_put(pool, key, klen, tu_vlen(key, klen, 1, 2 * TU_PAGE_SIZE)));
		tu_stat(pool, &st);
		if (!st.evictions)
			continue;
		samples++;
		ck_assert_msg(st.pages_used * 100 >= st.pages_total * 98,
				"after %u puts: %llu of %llu pages in values (free %llu, quarantined "
				"%llu, granted %llu)", i + 1, (unsigned long long)st.pages_used,
				(unsigned long long)st.pages_total, (unsigned long long)st.pages_free,
				(unsigned long long)st.pages_quarantined,
				(unsigned long long)st.pages_granted);
	}
	ck_assert_uint_gt(samples, n / 2);
	for (unsigned i = 0; i < n; i++) {
		klen = tu_key(key, "long-", i);
		if (mkv_exists(pool, key, klen) == 1) {
			ck_assert_int_eq(tu_check(pool, key, klen, tu_vlen(key, klen, 1,
					2 * TU_PAGE_SIZE)), 0);
			present++;
		}
	}
	ck_assert_uint_eq(present, st.entries);
	ck_assert_uint_eq(present + st.evictions, n);
	TU_OK(mkv_pool_verify(pool, MKV_VERIFY_DEEP, &rep));
	mkv_pool_close(&pool);
}
END_TEST

/*
 * With the watermarks equal, every eviction still frees a batch, 1/128 of
 * the pool, not the page or two the next allocation needs: each sweep
 * reads the ages of the whole pool.
 */
START_TEST(test_equal_watermarks_evict_in_batches)
{
	struct mkv_pool *pool;
	struct mkv_stat st;
	char key[64];
	size_t klen;
	uint64_t before = 0;
	unsigned sweeps = 0;

	evict_pool(TU_DATA_SIZE, &pool);
	TU_OK(mkv_pool_set_watermarks(pool, 1, 1));
	for (unsigned i = 0; i < 3 * PAGES; i++) {
		klen = tu_key(key, "batch-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
		tu_stat(pool, &st);
		if (st.evictions == before)
			continue;
		/* values of one page: keys evicted are pages freed */
		ck_assert_msg(st.evictions - before >= PAGES / 128,
				"put %u evicted %llu values, less than a batch of %u", i + 1,
				(unsigned long long)(st.evictions - before), (unsigned)(PAGES / 128));
		before = st.evictions;
		sweeps++;
	}
	ck_assert_uint_gt(sweeps, 0);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_view_survives_eviction_of_its_key)
{
	struct mkv_pool *pool;
	struct mkv_view v;
	char key[64];
	size_t klen;

	evict_pool(TU_DATA_SIZE, &pool);
	TU_OK(tu_put(pool, "victim", 6, 3 * TU_PAGE_SIZE));
	for (unsigned i = 0; i < PAGES / 2; i++) {
		klen = tu_key(key, "fill-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	TU_OK(mkv_get(pool, "victim", 6, &v));
	/* the sweep gives the viewed value its second chance, then takes it */
	{
		struct mkv_evict ev;

		TU_OK(mkv_pool_evict(pool, 100, 0, &ev));
		ck_assert_uint_gt(ev.keys, 0);
	}
	ck_assert_int_eq(mkv_exists(pool, "victim", 6), 0);
	/*
	 * More writes: the view's pin holds back every page deleted after it
	 * (the epoch rule), so they may run out of room, but never touch the
	 * viewed bytes.
	 */
	for (unsigned i = 0; i < PAGES; i++) {
		int rc;

		klen = tu_key(key, "more-", i);
		rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
		ck_assert_msg(rc == 0 || rc == MKV_E_NOSPC, "put = %d", rc);
	}
	ck_assert_int_eq((int)tu_verify(v.data, v.len, "victim", 6), -1);
	TU_OK(mkv_release(pool, &v));
	/* released: writes go on */
	for (unsigned i = 0; i < PAGES; i++) {
		klen = tu_key(key, "later-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_all_pinned_is_nospc_then_recovers)
{
	enum { SMALL = 64 };
	struct mkv_view *views = calloc(4 * SMALL, sizeof(*views));
	struct mkv_pool *pool;
	char key[64];
	size_t klen;
	unsigned held = 0, i;
	int rc = 0;

	ck_assert_ptr_nonnull(views);
	evict_pool(SMALL * TU_PAGE_SIZE, &pool);
	/* every value stays viewed: eviction deletes keys, their pages stay */
	for (i = 0; i < 4 * SMALL; i++) {
		klen = tu_key(key, "pinned-", i);
		rc = tu_put(pool, key, klen, TU_PAGE_SIZE);
		if (rc)
			break;
		TU_OK(mkv_get(pool, key, klen, &views[held++]));
	}
	ck_assert_msg(rc == MKV_E_NOSPC, "put %u = %d (%s), expected MKV_E_NOSPC", i, rc,
			mkv_strerror(rc));
	ck_assert(mkv_errormsg()[0] != '\0');
	for (unsigned j = 0; j < held; j++) {
		klen = tu_key(key, "pinned-", j);
		ck_assert_int_eq((int)tu_verify(views[j].data, views[j].len, key, klen), -1);
		TU_OK(mkv_release(pool, &views[j]));
	}
	/* released: the pool takes writes again */
	for (i = 0; i < 2 * SMALL; i++) {
		klen = tu_key(key, "after-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	mkv_pool_close(&pool);
	free(views);
}
END_TEST

/* A thread reading the writer's newest value, each view kept a few ms. */
struct reading {
	struct mkv_pool *pool;
	unsigned newest;     /* the writer's newest key */
	unsigned views, failed;
	bool stop;
};

static void *
reader_main(void *arg)
{
	struct reading *r = arg;
	char key[64];

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		size_t klen = tu_key(key, "full-", __atomic_load_n(&r->newest, __ATOMIC_ACQUIRE));
		struct mkv_view v;
		int rc = mkv_get(r->pool, key, klen, &v);

		if (rc == MKV_E_NOTFOUND)
			continue;
		if (rc) {
			r->failed++;
			break;
		}
		/* a read that takes a while: its pin holds back every page deleted meanwhile */
		tu_sleep_ms(2);
		r->failed += mkv_release(r->pool, &v) != 0;
		r->views++;
	}
	return NULL;
}

/*
 * A writer keeping a small pool full, values of one to four pages, while
 * another thread keeps views of its newest value for a few ms each: no
 * allocation fails while unpinned values are there to evict.
 */
START_TEST(test_full_pool_never_nospc_while_evictable)
{
	enum { SMALL = 64, ROUNDS = 20 };
	struct reading r = { 0 };
	struct mkv_stat st;
	pthread_t reader;
	char key[64];
	size_t klen;
	unsigned i, pages = 0, nospc = 0;

	evict_pool(SMALL * TU_PAGE_SIZE, &r.pool);
	TU_OK(tu_put(r.pool, "full-0", 6, TU_PAGE_SIZE));
	ck_assert_int_eq(pthread_create(&reader, NULL, reader_main, &r), 0);
	for (i = 1; pages < ROUNDS * SMALL; i++) {
		size_t len;
		int rc;

		klen = tu_key(key, "full-", i);
		len = tu_vlen(key, klen, 1, 4 * TU_PAGE_SIZE);
		rc = tu_put(r.pool, key, klen, len);
		if (rc == MKV_E_NOSPC) {
			nospc++;
			continue;
		}
		TU_OK(rc);
		pages += (unsigned)((len + TU_PAGE_SIZE - 1) / TU_PAGE_SIZE);
		__atomic_store_n(&r.newest, i, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&r.stop, true, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(reader, NULL), 0);
	ck_assert_msg(nospc == 0, "%u of %u puts got MKV_E_NOSPC", nospc, i - 1);
	ck_assert_uint_eq(r.failed, 0);
	ck_assert_uint_gt(r.views, 0);
	tu_stat(r.pool, &st);
	ck_assert_uint_gt(st.evictions, 0);
	klen = tu_key(key, "full-", i - 1);
	ck_assert_int_eq(tu_check(r.pool, key, klen, tu_vlen(key, klen, 1, 4 * TU_PAGE_SIZE)), 0);
	mkv_pool_close(&r.pool);
}
END_TEST

/*
 * Access hints undone to 0 (another host's stale line written back over
 * them, marukv.7): a pool full of such values still makes room for a
 * value of half its size, and again, rather than failing with
 * MKV_E_NOSPC, although no value has a hint to order it by.
 */
START_TEST(test_values_whose_hints_were_lost_still_go)
{
	enum { SMALL = 64 };
	struct mkv_pool *pool;
	struct mkv_super sb;
	struct mkv_stat st;
	char key[64], super[4096], *path;
	size_t klen;
	unsigned i;
	int fd;

	evict_pool(SMALL * TU_PAGE_SIZE, &pool);
	for (i = 0; i < 2 * SMALL; i++) {
		klen = tu_key(key, "old-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	tu_stat(pool, &st);
	ck_assert_uint_gt(st.evictions, 0);
	path = tu_pool_path(tu_dir);
	ck_assert_int_lt(snprintf(super, sizeof(super), "%s/super", path), (int)sizeof(super));
	fd = open(super, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &sb, sizeof(sb), 0), sizeof(sb));
	{
		uint8_t zero[SMALL] = { 0 };

		ck_assert_uint_eq(sb.nr_pages, SMALL);
		ck_assert_int_eq(pwrite(fd, zero, sizeof(zero), (off_t)sb.hint_off), sizeof(zero));
	}
	close(fd);
	for (i = 0; i < 2; i++) {
		klen = tu_key(key, "half-", i);
		TU_OK(tu_put(pool, key, klen, SMALL / 2 * TU_PAGE_SIZE));
		ck_assert_int_eq(tu_check(pool, key, klen, SMALL / 2 * TU_PAGE_SIZE), 0);
	}
	free(path);
	mkv_pool_close(&pool);
}
END_TEST

/*
 * Every page pinned by a view or granted to a buffer not published: then
 * allocation fails, and works again once the views are released and the
 * buffers aborted.
 */
START_TEST(test_pinned_or_in_flight_is_nospc_then_clears)
{
	enum { SMALL = 64 };
	struct mkv_view views[SMALL];
	struct mkv_buf bufs[SMALL];
	struct mkv_pool *pool;
	char key[64];
	size_t klen;
	unsigned nviews = 0, nbufs = 0, i;
	int rc = 0;

	evict_pool(SMALL * TU_PAGE_SIZE, &pool);
	/* each turn a value kept viewed, then a buffer kept unpublished */
	for (i = 0; i < 2 * SMALL && !rc; i++) {
		if (i % 2 == 0) {
			klen = tu_key(key, "held-", i);
			if ((rc = tu_put(pool, key, klen, TU_PAGE_SIZE)) == 0)
				TU_OK(mkv_get(pool, key, klen, &views[nviews++]));
		} else if ((rc = mkv_alloc(pool, TU_PAGE_SIZE, &bufs[nbufs])) == 0) {
			nbufs++;
		}
	}
	ck_assert_msg(rc == MKV_E_NOSPC, "turn %u = %d (%s), expected MKV_E_NOSPC", i, rc,
			mkv_strerror(rc));
	ck_assert_uint_gt(nviews, 0);
	ck_assert_uint_gt(nbufs, 0);
	/* and again, both ways in */
	TU_ERR(mkv_alloc(pool, TU_PAGE_SIZE, &bufs[nbufs]), MKV_E_NOSPC);
	TU_ERR(tu_put(pool, "one-more", 8, TU_PAGE_SIZE), MKV_E_NOSPC);
	while (nviews)
		TU_OK(mkv_release(pool, &views[--nviews]));
	while (nbufs)
		TU_OK(mkv_abort(pool, &bufs[--nbufs]));
	for (i = 0; i < 2 * SMALL; i++) {
		klen = tu_key(key, "after-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	mkv_pool_close(&pool);
}
END_TEST

/* Publish keys[0..n-1] as a chain after parent (NULL: a head), one page each. */
static int
chain_publish(struct mkv_pool *pool, const uint8_t *parent, uint8_t (*keys)[32], size_t n)
{
	struct mkv_key k[64] = { { 0 } };
	struct mkv_buf b[64];
	int rc;

	ck_assert_uint_le(n, 64);
	for (size_t i = 0; i < n; i++) {
		if ((rc = mkv_alloc(pool, TU_PAGE_SIZE, &b[i])))
			return rc;
		tu_fill(b[i].data, TU_PAGE_SIZE, keys[i], 32);
		k[i] = (struct mkv_key){ keys[i], 32 };
	}
	if ((rc = mkv_publish_chain(pool, parent, parent ? 32 : 0, k, b, n)))
		return rc;
	for (size_t i = 0; i < n; i++)
		ck_assert_ptr_null(b[i].data);
	return 0;
}

/* How many blocks of the chain are present; fails if one follows a missing one. */
static size_t
chain_prefix(struct mkv_pool *pool, uint8_t (*keys)[32], size_t n)
{
	size_t present = 0;

	for (size_t i = 0; i < n; i++) {
		int rc = mkv_exists(pool, keys[i], 32);

		ck_assert_int_ge(rc, 0);
		if (rc == 0)
			continue;
		ck_assert_msg(present == i, "block %zu present after block %zu was evicted", i,
				present);
		ck_assert_int_eq(tu_check(pool, keys[i], 32, TU_PAGE_SIZE), 0);
		present++;
	}
	return present;
}

START_TEST(test_chains_lose_tails_before_heads)
{
	enum { CHAINS = 24, LEN = 32, PIECE = 4, HOT = 6 };
	static uint8_t keys[CHAINS][LEN][32];
	struct mkv_pool *pool;
	struct mkv_view views[LEN];
	struct mkv_key k[LEN];
	struct mkv_evict rep;
	struct mkv_stat st;
	size_t found, left = 0;

	evict_pool(TU_DATA_SIZE, &pool);
	for (unsigned c = 0; c < CHAINS; c++)
		tu_chain_keys(keys[c], LEN, c + 1);
	/* turn by turn, so the chains' pages interleave along the clock */
	for (unsigned at = 0; at < LEN; at += PIECE)
		for (unsigned c = 0; c < CHAINS; c++)
			TU_OK(chain_publish(pool, at ? keys[c][at - 1] : NULL, &keys[c][at], PIECE));
	for (unsigned c = 0; c < HOT; c++) {
		for (unsigned i = 0; i < LEN; i++)
			k[i] = (struct mkv_key){ keys[c][i], 32 };
		TU_OK(mkv_get_batch(pool, k, LEN, MKV_BATCH_PREFIX, views, &found));
		ck_assert_uint_eq(found, LEN);
		for (unsigned i = 0; i < LEN; i++)
			TU_OK(mkv_release(pool, &views[i]));
	}
	TU_OK(mkv_pool_evict(pool, 60, 0, &rep));
	ck_assert_uint_gt(rep.keys, 0);
	for (unsigned c = 0; c < CHAINS; c++) {
		size_t n = chain_prefix(pool, keys[c], LEN);

		if (c < HOT)
			ck_assert_msg(n == LEN, "hot chain %u kept %zu of %d blocks", c, n, LEN);
		left += n;
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, left);
	ck_assert_uint_eq(st.evictions, rep.keys);
	ck_assert_uint_eq(left + rep.keys, CHAINS * LEN);
	/* and to the last block: heads go once nothing follows them */
	TU_OK(mkv_pool_evict(pool, 100, 0, &rep));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 0);
	ck_assert_uint_eq(st.evictions, CHAINS * LEN);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_publish_chain_shares_and_checks)
{
	uint8_t keys[3][32], big[MKV_KEY_MAX + 1];
	struct mkv_key k[3] = { { keys[0], 32 }, { keys[1], 32 }, { keys[2], 32 } };
	struct mkv_buf b[3], foreign = { 0 };
	struct mkv_pool *pool;
	struct mkv_stat st;

	evict_pool(TU_DATA_SIZE, &pool);
	tu_chain_keys(keys, 3, 42);
	TU_OK(chain_publish(pool, NULL, keys, 2));
	/* a chain through published blocks: those count as done */
	TU_OK(chain_publish(pool, NULL, keys, 3));
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(tu_check(pool, keys[i], 32, TU_PAGE_SIZE), 0);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 3);
	TU_OK(mkv_publish_chain(pool, NULL, 0, k, b, 0));
	TU_ERR(mkv_publish_chain(NULL, NULL, 0, k, b, 1), MKV_E_INVAL);
	TU_ERR(mkv_publish_chain(pool, NULL, 0, NULL, b, 1), MKV_E_INVAL);
	TU_ERR(mkv_publish_chain(pool, NULL, 0, k, NULL, 1), MKV_E_INVAL);
	TU_ERR(mkv_publish_chain(pool, NULL, 32, k, b, 1), MKV_E_INVAL);
	memset(big, 'p', sizeof(big));
	TU_OK(mkv_alloc(pool, 100, &b[0]));
	TU_ERR(mkv_publish_chain(pool, big, sizeof(big), k, b, 1), MKV_E_INVAL);
	TU_ERR(mkv_publish_chain(pool, big, 0, k, b, 1), MKV_E_INVAL);
	ck_assert(strstr(mkv_errormsg(), "parent") != NULL);
	b[1] = foreign;
	TU_ERR(mkv_publish_chain(pool, NULL, 0, k, b, 2), MKV_E_INVAL);
	/* nothing was published, and the good buffer is still the caller's */
	ck_assert_ptr_nonnull(b[0].data);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, 3);
	TU_OK(mkv_abort(pool, &b[0]));
	mkv_pool_close(&pool);
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	TU_ERR(mkv_publish_chain(pool, NULL, 0, k, b, 1), MKV_E_RDONLY);
	mkv_pool_close(&pool);
}
END_TEST

/*
 * Children of a test that fork: not under TSan, which cannot follow a fork
 * after threads start (see TSAN_TESTS in Makefile.am).
 */
#ifndef __SANITIZE_THREAD__
typedef int (*chain_fn)(struct mkv_pool *, const uint8_t *, uint8_t (*)[32], size_t);

/* A child process that opens the pool and publishes with fn: its exit status. */
static int
child_publishes(chain_fn fn, const uint8_t *parent, uint8_t (*keys)[32], size_t n)
{
	pid_t pid = tu_fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct mkv_pool *c;

		if (tu_pool_open(tu_dir, 0, &c))
			_exit(2);
		if (fn(c, parent, keys, n))
			_exit(1);
		mkv_pool_close(&c);
		_exit(0);
	}
	return tu_wait(pid);
}

/* A chain longer than a client's request ring, from a client that does not hold the lease. */
START_TEST(test_chain_from_another_process)
{
	enum { LEN = 40 };
	static uint8_t keys[LEN][32];
	struct mkv_pool *pool;
	struct mkv_evict rep;
	size_t n;

	evict_pool(TU_DATA_SIZE, &pool);
	TU_OK(tu_put(pool, "holder", 6, 10));
	tu_chain_keys(keys, LEN, 7);
	ck_assert_int_eq(child_publishes(chain_publish, NULL, keys, 32), 0);
	ck_assert_int_eq(child_publishes(chain_publish, keys[31], &keys[32], 8), 0);
	ck_assert_uint_eq(chain_prefix(pool, keys, LEN), LEN);
	/* 41 pages used of 1024: evicting to 98 % free takes about half the chain */
	TU_OK(mkv_pool_evict(pool, 98, 0, &rep));
	n = chain_prefix(pool, keys, LEN);
	ck_assert_msg(n > 0 && n < LEN, "%zu blocks left", n);
	mkv_pool_close(&pool);
}
END_TEST
#endif

/*
 * Blocks of n keys published one at a time with mkv_publish_child_async(),
 * each the child of the one before it (keys[-1]'s: parent), then waited
 * for; 0, or the first failing call's code.
 */
static int
chain_publish_async(struct mkv_pool *pool, const uint8_t *parent, uint8_t (*keys)[32], size_t n)
{
	struct mkv_ticket t[64];
	struct mkv_buf b;
	int rc = 0, w;

	ck_assert_uint_le(n, 64);
	for (size_t i = 0; i < n; i++) {
		if ((rc = mkv_alloc(pool, TU_PAGE_SIZE, &b)))
			return rc;
		tu_fill(b.data, TU_PAGE_SIZE, keys[i], 32);
		if ((rc = mkv_publish_child_async(pool, i ? keys[i - 1] : parent,
				i || parent ? 32 : 0, keys[i], 32, &b, &t[i])))
			return rc;
		ck_assert_ptr_null(b.data);
	}
	for (size_t i = 0; i < n; i++)
		if ((w = mkv_wait(pool, &t[i])) && !rc)
			rc = w;
	return rc;
}

/*
 * A chain published block by block without waiting, by the holder and by
 * a client whose requests go through the ring, links as mkv_publish_chain()
 * links it: eviction takes its tails first.  A block published already is
 * MKV_E_EXISTS from mkv_wait(); bad parents are refused before anything is
 * sent, and the buffer stays the caller's.
 */
START_TEST(test_chain_published_block_by_block)
{
	enum { LEN = 40 };
	static uint8_t keys[LEN][32];
	uint8_t big[MKV_KEY_MAX + 1];
	struct mkv_pool *pool;
	struct mkv_ticket t;
	struct mkv_evict rep;
	struct mkv_buf b;
	size_t n;

	evict_pool(TU_DATA_SIZE, &pool);
	tu_chain_keys(keys, LEN, 9);
	TU_OK(chain_publish_async(pool, NULL, keys, 20));
#ifndef __SANITIZE_THREAD__
	ck_assert_int_eq(child_publishes(chain_publish_async, keys[19], &keys[20], 20), 0);
#else
	TU_OK(chain_publish_async(pool, keys[19], &keys[20], 20));
#endif
	ck_assert_uint_eq(chain_prefix(pool, keys, LEN), LEN);
	/* a block published already: the buffer is consumed, the wait says so */
	TU_ERR(chain_publish_async(pool, keys[4], &keys[5], 1), MKV_E_EXISTS);
	TU_OK(mkv_alloc(pool, 100, &b));
	TU_ERR(mkv_publish_child_async(pool, NULL, 32, keys[0], 32, &b, &t), MKV_E_INVAL);
	memset(big, 'p', sizeof(big));
	TU_ERR(mkv_publish_child_async(pool, big, sizeof(big), keys[0], 32, &b, &t),
			MKV_E_INVAL);
	ck_assert(strstr(mkv_errormsg(), "parent") != NULL);
	TU_ERR(mkv_publish_child_async(pool, big, 0, keys[0], 32, &b, &t), MKV_E_INVAL);
	TU_ERR(mkv_publish_child_async(pool, NULL, 0, keys[0], 32, &b, NULL), MKV_E_INVAL);
	ck_assert_ptr_nonnull(b.data);
	TU_OK(mkv_abort(pool, &b));
	/* 41 pages used of 1024: evicting to 98 % free takes about half the chain */
	TU_OK(mkv_pool_evict(pool, 98, 0, &rep));
	n = chain_prefix(pool, keys, LEN);
	ck_assert_msg(n > 0 && n < LEN, "%zu blocks left", n);
	mkv_pool_close(&pool);
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	TU_ERR(mkv_publish_child_async(pool, NULL, 0, keys[0], 32, &b, &t), MKV_E_RDONLY);
	mkv_pool_close(&pool);
}
END_TEST

/* Least recently read first; the dry run counts what the real one takes. */
START_TEST(test_evicts_least_recently_read_first)
{
	enum { N = 600, READ = 200 };
	struct mkv_pool *pool;
	struct mkv_evict dry, rep;
	struct mkv_view v;
	struct mkv_stat st;
	char key[64];
	size_t klen;

	evict_pool(TU_DATA_SIZE, &pool);
	for (unsigned i = 0; i < N; i++) {
		klen = tu_key(key, "lru-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	/* the oldest third, read again after everything was written: now the youngest */
	for (unsigned i = 0; i < READ; i++) {
		klen = tu_key(key, "lru-", i);
		TU_OK(mkv_get(pool, key, klen, &v));
		TU_OK(mkv_release(pool, &v));
	}
	TU_OK(mkv_pool_evict(pool, 60, MKV_DRY_RUN, &dry));
	TU_OK(mkv_pool_evict(pool, 60, 0, &rep));
	ck_assert_uint_gt(rep.keys, 0);
	ck_assert_uint_lt(rep.keys, N - READ);
	ck_assert_uint_eq(dry.keys, rep.keys);
	for (unsigned i = 0; i < READ; i++) {
		klen = tu_key(key, "lru-", i);
		ck_assert_msg(mkv_exists(pool, key, klen) == 1, "read key %u was evicted", i);
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.entries, N - rep.keys);
	mkv_pool_close(&pool);
}
END_TEST

/*
 * Free pages scattered one by one still serve one-page values: a grant
 * falls back from its batch to what the value needs instead of evicting.
 */
START_TEST(test_scattered_free_pages_need_no_eviction)
{
	enum { FILL = 960, MORE = 200 };
	struct mkv_pool *pool;
	struct mkv_stat st;
	char key[64];
	size_t klen;

	evict_pool(TU_DATA_SIZE, &pool);
	for (unsigned i = 0; i < FILL; i++) {
		klen = tu_key(key, "fill-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	for (unsigned i = 0; i < FILL; i += 2) {
		klen = tu_key(key, "fill-", i);
		TU_OK(mkv_del(pool, key, klen));
	}
	for (unsigned i = 0; i < MORE; i++) {
		klen = tu_key(key, "more-", i);
		TU_OK(tu_put(pool, key, klen, TU_PAGE_SIZE));
	}
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.evictions, 0);
	ck_assert_uint_eq(st.entries, FILL / 2 + MORE);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_watermarks_are_checked_and_changeable)
{
	struct mkv_opts *opts;
	struct mkv_pool *pool;
	struct mkv_stat st;

	TU_OK(mkv_opts_new(&opts));
	TU_ERR(mkv_opts_set_watermarks(opts, 20, 10), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_watermarks(opts, 5, 95), MKV_E_INVAL);
	TU_ERR(mkv_opts_set_watermarks(NULL, 5, 10), MKV_E_INVAL);
	TU_OK(mkv_opts_set_watermarks(opts, 0, 0));
	mkv_opts_delete(&opts);
	evict_pool(TU_DATA_SIZE, &pool);
	TU_OK(mkv_pool_set_watermarks(pool, 20, 30));
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.low_watermark, 20);
	ck_assert_uint_eq(st.high_watermark, 30);
	TU_ERR(mkv_pool_set_watermarks(pool, 40, 30), MKV_E_INVAL);
	TU_ERR(mkv_pool_set_watermarks(NULL, 1, 2), MKV_E_INVAL);
	mkv_pool_close(&pool);
	/* the new marks outlive the handle */
	TU_OK(tu_pool_open(tu_dir, MKV_RDONLY, &pool));
	TU_ERR(mkv_pool_set_watermarks(pool, 1, 2), MKV_E_RDONLY);
	tu_stat(pool, &st);
	ck_assert_uint_eq(st.low_watermark, 20);
	mkv_pool_close(&pool);
}
END_TEST

static Suite *
evict_suite(void)
{
	Suite *s = suite_create("evict");
	TCase *tc = tcase_create("watermarks");

	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_full_pool_holds_its_pages_in_values);
	tcase_add_test(tc, test_equal_watermarks_evict_in_batches);
	tcase_add_test(tc, test_view_survives_eviction_of_its_key);
	tcase_add_test(tc, test_all_pinned_is_nospc_then_recovers);
	tcase_add_test(tc, test_full_pool_never_nospc_while_evictable);
	tcase_add_test(tc, test_pinned_or_in_flight_is_nospc_then_clears);
	tcase_add_test(tc, test_values_whose_hints_were_lost_still_go);
	tcase_add_test(tc, test_watermarks_are_checked_and_changeable);
	tcase_add_test(tc, test_chains_lose_tails_before_heads);
	tcase_add_test(tc, test_publish_chain_shares_and_checks);
	tcase_add_test(tc, test_chain_published_block_by_block);
#ifndef __SANITIZE_THREAD__
	tcase_add_test(tc, test_chain_from_another_process);
#endif
	tcase_add_test(tc, test_evicts_least_recently_read_first);
	tcase_add_test(tc, test_scattered_free_pages_need_no_eviction);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return tu_run_suite(evict_suite());
}
