/* SPDX-License-Identifier: MIT */
/*
 * check_codes.c -- the "Errors:" lists of marukv.h, made to happen: every
 * code listed for the data calls (mkv_pool_open, mkv_alloc, mkv_publish,
 * mkv_put, mkv_del, mkv_get, mkv_exists, mkv_prefix_len), brought about as
 * a program would meet it -- a bad argument, a read-only handle, a full
 * arena or registry, a damaged registry, every reader slot taken, the
 * registry's writer lock held, a handle judged dead, malloc failing (the
 * program runs again under t/faultinject.so) -- and checked exactly, with
 * a message.
 *
 * Not here: mkv_pool_open's MKV_E_NOSPC (check_faults makes a pool larger
 * than its filesystem) and -EACCES (check_security, as another user), its
 * MKV_E_TIMEDOUT (the pool directory's lock held for a minute), and
 * MKV_E_IO and MKV_E_INTERNAL, failures inside LMDB or libpmem2 that no
 * test can cause honestly.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "testutil.h"
#include "layout.h"

#define PAGE TU_PAGE_SIZE
#define BIG (64 * PAGE)        /* more than a handle keeps granted: a new grant */
#define TIMEOUT_MS 300U         /* the client timeout of the pools here */

/* Every pool here: 4 MiB, a lease period of 200 ms; handles on node "a". */
static const struct tu_opts cd_opts = { .lease_ms = 200, .client_timeout_ms = TIMEOUT_MS,
		.node = "a" };

static const struct mkv_key cd_key = { "k", 1 };

/* Create the pool at @p path with one published key, "k", and close it. */
static void
cd_create(const char *path)
{
	struct mkv_pool *pool;

	TU_OK(tu_open(path, MKV_CREATE, &cd_opts, &pool));
	TU_OK(tu_put(pool, "k", 1, PAGE));
	mkv_pool_close(&pool);
}

/* The entry of @p key in the registry (the pool closed), changed by @p how. */
static void
cd_damage_entry(const char *key, int how)
{
	MDB_val k = { strlen(key), (void *)key }, d;
	struct mkv_entry e;
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;

	tu_registry_begin(tu_path, &env, &txn);
	dbi = tu_registry_table(txn, NULL);
	ck_assert_int_eq(mdb_get(txn, dbi, &k, &d), 0);
	ck_assert_uint_eq(d.mv_size, sizeof(e));
	memcpy(&e, d.mv_data, sizeof(e));
	/* how 0: an entry of version 99; else one 8 bytes short */
	e.version = 99;
	d = (MDB_val){ how ? sizeof(e) - 8 : sizeof(e), &e };
	ck_assert_int_eq(mdb_put(txn, dbi, &k, &d, 0), 0);
	tu_registry_end(env, txn);
}

/* Store @p v under meta @p name (the pool closed); UINT64_MAX: delete it. */
static void
cd_set_meta(const char *name, uint64_t v)
{
	MDB_val k = { strlen(name), (void *)name }, d = { sizeof(v), &v };
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;

	tu_registry_begin(tu_path, &env, &txn);
	dbi = tu_registry_table(txn, "meta");
	if (v == UINT64_MAX)
		ck_assert_int_eq(mdb_del(txn, dbi, &k, NULL), 0);
	else
		ck_assert_int_eq(mdb_put(txn, dbi, &k, &d, 0), 0);
	tu_registry_end(env, txn);
}

/* ---- arguments, keys, read-only handles ---- */

START_TEST(test_bad_arguments_are_inval)
{
	struct mkv_pool *pool, *other = NULL;
	struct mkv_buf b;
	struct mkv_view v;
	size_t hits;

	cd_create(tu_path);
	TU_OK(tu_open(tu_path, 0, &cd_opts, &pool));
	memset(&b, 0, sizeof(b));
	TU_ERR(mkv_alloc(pool, 0, &b), MKV_E_INVAL);
	TU_ERR(mkv_alloc(NULL, PAGE, &b), MKV_E_INVAL);
	TU_ERR(mkv_publish(pool, "p", 1, &b), MKV_E_INVAL);  /* not from mkv_alloc() */
	TU_ERR(mkv_put(pool, "p", 1, NULL, 1), MKV_E_INVAL);
	TU_ERR(mkv_put(pool, "", 0, "v", 1), MKV_E_INVAL);
	TU_ERR(mkv_del(pool, "k", MKV_KEY_MAX + 1), MKV_E_INVAL);
	TU_ERR(mkv_get(pool, "k", 1, NULL), MKV_E_INVAL);
	TU_ERR(mkv_get(pool, "k", 0, &v), MKV_E_INVAL);
	TU_ERR(mkv_exists(pool, NULL, 1), MKV_E_INVAL);
	TU_ERR(mkv_prefix_len(pool, &cd_key, 1, NULL), MKV_E_INVAL);
	TU_ERR(mkv_prefix_len(pool, NULL, 1, &hits), MKV_E_INVAL);
	mkv_pool_close(&pool);
	TU_ERR(mkv_pool_open(tu_path, MKV_CREATE | MKV_RDONLY, NULL, &other), MKV_E_INVAL);
	TU_ERR(mkv_pool_open("", 0, NULL, &other), MKV_E_INVAL);
	ck_assert_int_eq(setenv("MARUKV_NODE", "no node!", 1), 0);
	TU_ERR(mkv_pool_open(tu_path, 0, NULL, &other), MKV_E_INVAL);
	ck_assert_ptr_null(other);
}
END_TEST

START_TEST(test_missing_and_published_keys)
{
	struct mkv_pool *pool;
	struct mkv_view v;
	struct mkv_buf b;

	cd_create(tu_path);
	TU_OK(tu_open(tu_path, 0, &cd_opts, &pool));
	TU_ERR(mkv_get(pool, "none", 4, &v), MKV_E_NOTFOUND);
	TU_ERR(mkv_del(pool, "none", 4), MKV_E_NOTFOUND);
	TU_ERR(mkv_put(pool, "k", 1, "v", 1), MKV_E_EXISTS);
	TU_OK(mkv_alloc(pool, PAGE, &b));
	TU_ERR(mkv_publish(pool, "k", 1, &b), MKV_E_EXISTS);
	mkv_pool_close(&pool);
}
END_TEST

START_TEST(test_read_only_handle_writes_are_rdonly)
{
	struct mkv_pool *pool;
	struct mkv_buf b;

	cd_create(tu_path);
	TU_OK(tu_open(tu_path, MKV_RDONLY, &cd_opts, &pool));
	memset(&b, 0, sizeof(b));
	TU_ERR(mkv_alloc(pool, PAGE, &b), MKV_E_RDONLY);
	TU_ERR(mkv_publish(pool, "p", 1, &b), MKV_E_RDONLY);
	TU_ERR(mkv_put(pool, "p", 1, "v", 1), MKV_E_RDONLY);
	TU_ERR(mkv_del(pool, "k", 1), MKV_E_RDONLY);
	mkv_pool_close(&pool);
}
END_TEST

/* ---- a full pool ---- */

START_TEST(test_full_arena_is_nospc)
{
	struct mkv_pool *pool;
	struct mkv_buf b;
	unsigned next = 0;

	TU_OK(tu_open(tu_path, MKV_CREATE, &cd_opts, &pool));
	ck_assert_int_gt(tu_fill_until_full(pool, "fill", &next, PAGE), 0);
	TU_ERR(mkv_alloc(pool, PAGE, &b), MKV_E_NOSPC);
	TU_ERR(mkv_alloc(pool, TU_DATA_SIZE + 1, &b), MKV_E_NOSPC);
	TU_ERR(tu_put(pool, "one more", 8, PAGE), MKV_E_NOSPC);
	mkv_pool_close(&pool);
}
END_TEST

/*
 * A child holding LMDB read transactions on the registry itself, as a
 * reader stopped inside a lookup would: @p arg points to how many (0:
 * until every reader slot is taken); it says how many it holds with 'h',
 * and lets them go on 'x'.
 */
struct readers {
	int want;
	int held;
	char *file;  /* tu_registry_name() */
};

static int
readers_hold(int cmd, int ev, void *arg)
{
	struct readers *r = arg;
	MDB_txn *txn[4096];
	MDB_env *env;
	int rc, n = 0;

	if (mdb_env_create(&env) || mdb_env_set_maxdbs(env, 8) ||
	    mdb_env_open(env, r->file, MDB_NOSUBDIR | MDB_RDONLY | MDB_NOTLS, 0600))
		return 10;
	while (n < (r->want ? r->want : 4096) &&
	       (rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn[n])) == 0)
		n++;
	if (!r->want && rc != MDB_READERS_FULL)
		return 11;
	r->held = n;
	tu_write_byte(ev, 'h');
	if (tu_read_byte(cmd, 60) != 'x')
		return 12;
	while (n)
		mdb_txn_abort(txn[--n]);
	mdb_env_close(env);
	return 0;
}

/*
 * A registry of 1 MiB, and a reader that keeps LMDB from reusing any page
 * freed from now on: publishes fill it (MKV_E_NOSPC once the reserve for
 * deletes is all that is left), deletes eat the reserve (MKV_E_NOSPC once
 * a commit found no page for a lease period).
 */
START_TEST(test_full_registry_is_nospc)
{
	struct tu_opts o = cd_opts;
	struct readers r = { .want = 1 };
	struct tu_child c = TU_CHILD_NONE;
	struct mkv_pool *pool;
	struct mkv_buf b;
	char key[64];
	size_t klen;
	unsigned i, n;
	int rc = 0;

	o.data_size = 64ULL << 20;
	o.registry_size = 1ULL << 20;
	/*
	 * A commit that finds no page retries for a lease period, renewing
	 * the lease as it goes.  With 200 ms, a sanitized build among
	 * parallel suites once lost the lease in those retries, and the
	 * publish, forwarded then, timed out instead of finding the registry
	 * full; a lease period of a second leaves room for such a machine.
	 */
	o.lease_ms = 1000;
	TU_OK(tu_open(tu_path, MKV_CREATE, &o, &pool));
	r.file = tu_registry_name(pool);
	tu_child_start(&c, readers_hold, &r);
	tu_child_expect(&c, "the reader", 'h', 20);
	for (n = 0; n < 16384; n++) {
		klen = tu_key(key, "reg", n);
		TU_OK(mkv_alloc(pool, PAGE, &b));
		if ((rc = mkv_publish(pool, key, klen, &b)) != 0)
			break;
	}
	ck_assert_msg(rc == MKV_E_NOSPC && mkv_errormsg()[0] != '\0',
			"publish %u into a registry held by a reader: %d (%s): %s", n, rc,
			mkv_strerror(rc), mkv_errormsg());
	TU_OK(mkv_abort(pool, &b));
	for (i = 0; i < n; i++) {
		klen = tu_key(key, "reg", i);
		if ((rc = mkv_del(pool, key, klen)) != 0)
			break;
	}
	ck_assert_msg(rc == MKV_E_NOSPC && mkv_errormsg()[0] != '\0',
			"delete %u of %u from a full registry held by a reader: %d (%s): %s", i, n,
			rc, mkv_strerror(rc), mkv_errormsg());
	tu_write_byte(c.cmd, 'x');
	ck_assert_int_eq(tu_reap(c.pid, 20), 0);
	c.pid = -1;
	tu_child_end(&c);
	mkv_pool_close(&pool);
	free(r.file);
}
END_TEST

/* ---- a damaged registry ---- */

/* An entry of an unknown version, and one of the wrong size, under the key asked for. */
START_TEST(test_damaged_entries_are_version_and_corrupt)
{
	static const char *const keys[] = { "version", "size" };
	static const int codes[] = { MKV_E_VERSION, MKV_E_CORRUPT };
	struct mkv_pool *pool;
	struct mkv_view v;
	struct mkv_buf b;

	TU_OK(tu_open(tu_path, MKV_CREATE, &cd_opts, &pool));
	for (int i = 0; i < 2; i++)
		TU_OK(tu_put(pool, keys[i], strlen(keys[i]), PAGE));
	mkv_pool_close(&pool);
	for (int i = 0; i < 2; i++)
		cd_damage_entry(keys[i], i);
	TU_OK(tu_open(tu_path, 0, &cd_opts, &pool));
	for (int i = 0; i < 2; i++) {
		size_t klen = strlen(keys[i]);

		TU_ERR(mkv_get(pool, keys[i], klen, &v), codes[i]);
		TU_ERR(mkv_put(pool, keys[i], klen, "v", 1), codes[i]);
		TU_OK(mkv_alloc(pool, PAGE, &b));
		TU_ERR(mkv_publish(pool, keys[i], klen, &b), codes[i]);
		TU_OK(mkv_abort(pool, &b));
		TU_ERR(mkv_del(pool, keys[i], klen), codes[i]);
	}
	mkv_pool_close(&pool);
}
END_TEST

/*
 * A registry page damaged under an open handle: every leaf page of the
 * file that holds the key gets flags that are neither leaf nor branch,
 * and LMDB finds the tree corrupted on the way to the key.
 */
START_TEST(test_damaged_registry_page_is_corrupt)
{
	static const char key[] = "needle-in-the-registry";
	const size_t psize = (size_t)sysconf(_SC_PAGESIZE);
	const struct mkv_key kv = { key, sizeof(key) - 1 };
	struct mkv_pool *pool;
	struct mkv_view v;
	unsigned char *page = malloc(psize);
	char file[PATH_MAX];
	size_t hits;
	off_t off;
	int fd, damaged = 0;

	TU_OK(tu_open(tu_path, MKV_CREATE, &cd_opts, &pool));
	TU_OK(tu_put(pool, key, sizeof(key) - 1, PAGE));
	mkv_pool_close(&pool);
	TU_OK(tu_open(tu_path, MKV_RDONLY, &cd_opts, &pool));
	ck_assert_int_eq(mkv_exists(pool, key, sizeof(key) - 1), 1);
	snprintf(file, sizeof(file), "%s/registry.mdb", tu_path);
	fd = open(file, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_ptr_nonnull(page);
	/* an LMDB page: pgno (8 bytes), pad (2), flags (2): 0x02 a leaf */
	for (off = 0; pread(fd, page, psize, off) == (ssize_t)psize; off += (off_t)psize) {
		if (!(page[10] & 0x02) || !memmem(page, psize, key, sizeof(key) - 1))
			continue;
		page[10] = page[11] = 0;
		ck_assert_int_eq(pwrite(fd, page + 10, 2, off + 10), 2);
		damaged++;
	}
	close(fd);
	free(page);
	ck_assert_int_gt(damaged, 0);
	TU_ERR(mkv_exists(pool, key, sizeof(key) - 1), MKV_E_CORRUPT);
	TU_ERR(mkv_prefix_len(pool, &kv, 1, &hits), MKV_E_CORRUPT);
	TU_ERR(mkv_get(pool, key, sizeof(key) - 1, &v), MKV_E_CORRUPT);
	mkv_pool_close(&pool);
}
END_TEST

/*
 * The registry loses the token of the lease holders (meta "generation"):
 * the holder's write transactions fail, and so do the writes it does for
 * others, whatever they are.
 */
START_TEST(test_registry_writes_on_damaged_meta_are_corrupt)
{
	struct tu_child h = TU_CHILD_NONE;
	struct mkv_pool *pool;
	struct mkv_buf b;

	cd_create(tu_path);
	tu_child_start(&h, tu_stay, &(struct tu_stay){ tu_path, &cd_opts });
	tu_child_expect(&h, "the holder", 'o', 20);
	cd_set_meta("generation", UINT64_MAX);
	TU_OK(tu_open(tu_path, 0, &cd_opts, &pool));
	TU_ERR(mkv_alloc(pool, BIG, &b), MKV_E_CORRUPT);
	TU_ERR(tu_put(pool, "p", 1, BIG), MKV_E_CORRUPT);
	TU_ERR(mkv_del(pool, "k", 1), MKV_E_CORRUPT);
	mkv_pool_close(&pool);
	tu_child_end(&h);
}
END_TEST

/* ---- every reader slot taken ---- */

START_TEST(test_reader_slots_taken_is_users)
{
	struct readers r = { .want = 0 };
	struct tu_child c = TU_CHILD_NONE;
	struct mkv_pool *pool, *other = NULL;
	struct mkv_view v;
	size_t hits;

	cd_create(tu_path);
	/* through a handle of its own: a handle keeps the reader slot of its reads */
	TU_OK(tu_open(tu_path, MKV_RDONLY, &cd_opts, &pool));
	r.file = tu_registry_name(pool);
	mkv_pool_close(&pool);
	TU_OK(tu_open(tu_path, MKV_RDONLY, &cd_opts, &pool));
	tu_child_start(&c, readers_hold, &r);
	tu_child_expect(&c, "the readers", 'h', 20);
	TU_ERR(mkv_get(pool, "k", 1, &v), MKV_E_USERS);
	TU_ERR(mkv_exists(pool, "k", 1), MKV_E_USERS);
	TU_ERR(mkv_prefix_len(pool, &cd_key, 1, &hits), MKV_E_USERS);
	TU_ERR(tu_open(tu_path, MKV_RDONLY, &cd_opts, &other), MKV_E_USERS);
	tu_write_byte(c.cmd, 'x');
	ck_assert_int_eq(tu_reap(c.pid, 20), 0);
	c.pid = -1;
	tu_child_end(&c);
	ck_assert_int_eq(mkv_exists(pool, "k", 1), 1);
	mkv_pool_close(&pool);
	free(r.file);
}
END_TEST

/* ---- the registry's writer lock held ---- */

/*
 * Another writer inside a registry write (it holds super's flock, which
 * every writer takes first): the holder's own writes give up after a
 * quarter lease period.  Nothing was written: a publish's buffer stays
 * the caller's.
 */
START_TEST(test_writer_lock_held_is_timedout)
{
	struct mkv_pool *pool;
	struct mkv_buf b, more;
	double t;
	int fd;

	cd_create(tu_path);
	TU_OK(tu_open(tu_path, 0, &cd_opts, &pool));
	TU_OK(mkv_alloc(pool, PAGE, &b));
	fd = tu_lock_writers(tu_path);
	t = tu_now();
	TU_ERR(mkv_alloc(pool, BIG, &more), MKV_E_TIMEDOUT);
	t = tu_now() - t;
	/* marukv(7) GUARANTEES: a quarter lease period for the registry's write lock */
	ck_assert_msg(t >= 0.9 * cd_opts.lease_ms / 4000 && t < 3.0 * cd_opts.lease_ms / 4000,
			"mkv_alloc gave up after %.3f s, lease period %u ms", t, cd_opts.lease_ms);
	TU_ERR(tu_put(pool, "p", 1, BIG), MKV_E_TIMEDOUT);
	TU_ERR(mkv_publish(pool, "q", 1, &b), MKV_E_TIMEDOUT);
	ck_assert_ptr_nonnull(b.data);
	TU_ERR(mkv_del(pool, "k", 1), MKV_E_TIMEDOUT);
	close(fd);
	TU_OK(mkv_publish(pool, "q", 1, &b));
	TU_OK(mkv_del(pool, "k", 1));
	mkv_pool_close(&pool);
}
END_TEST

/*
 * The same lock held while another process holds the lease: the holder
 * cannot commit, and a publish forwarded to it gets no answer within 30
 * lease periods.  It may still take effect later, and does once the lock
 * is free; its buffer is consumed.
 */
START_TEST(test_holder_that_cannot_write_is_timedout)
{
	struct tu_child h = TU_CHILD_NONE;
	struct mkv_pool *pool;
	struct mkv_buf b;
	double t;
	int fd;

	cd_create(tu_path);
	tu_child_start(&h, tu_stay, &(struct tu_stay){ tu_path, &cd_opts });
	tu_child_expect(&h, "the holder", 'o', 20);
	TU_OK(tu_open(tu_path, 0, &cd_opts, &pool));
	TU_OK(mkv_alloc(pool, PAGE, &b));
	fd = tu_lock_writers(tu_path);
	t = tu_now();
	TU_ERR(mkv_publish(pool, "late", 4, &b), MKV_E_TIMEDOUT);
	t = tu_now() - t;
	/* marukv(7) GUARANTEES: 30 lease periods for an answer of the holder */
	ck_assert_msg(t >= 0.95 * 30 * cd_opts.lease_ms / 1000 &&
			t < 1.2 * 30 * cd_opts.lease_ms / 1000,
			"mkv_publish gave up after %.3f s, lease period %u ms", t, cd_opts.lease_ms);
	ck_assert(tu_is_zero(&b, sizeof(b)));
	close(fd);
	ck_assert(TU_UNTIL(mkv_exists(pool, "late", 4) == 1, 10));
	mkv_pool_close(&pool);
	tu_child_end(&h);
}
END_TEST

/* ---- a handle judged dead ---- */

struct expired {
	int rc[7];
	int nomsg;
};

/*
 * X, on another host (emulated): hold a buffer, then, after 'c', make
 * every data call once; their codes in rc[].
 */
static int
expired_calls(int cmd, int ev, void *arg)
{
	struct expired *sh = arg;
	struct tu_opts o = cd_opts;
	struct mkv_pool *pool;
	struct mkv_view v;
	struct mkv_buf b;
	size_t hits;

	o.node = "x";
	o.host = "another-kernel";
	if (tu_open(tu_path, 0, &o, &pool) < 0 || mkv_alloc(pool, PAGE, &b) < 0)
		return 10;
	tu_write_byte(ev, 'o');
	if (tu_read_byte(cmd, 60) != 'c')
		return 11;
	sh->rc[0] = mkv_alloc(pool, PAGE, &(struct mkv_buf){ 0 });
	sh->nomsg += mkv_errormsg()[0] == '\0';
	sh->rc[1] = mkv_publish(pool, "x", 1, &b);
	sh->nomsg += mkv_errormsg()[0] == '\0';
	sh->rc[2] = mkv_put(pool, "x", 1, "v", 1);
	sh->nomsg += mkv_errormsg()[0] == '\0';
	sh->rc[3] = mkv_del(pool, "k", 1);
	sh->nomsg += mkv_errormsg()[0] == '\0';
	sh->rc[4] = mkv_get(pool, "k", 1, &v);
	sh->nomsg += mkv_errormsg()[0] == '\0';
	sh->rc[5] = mkv_exists(pool, "k", 1);
	sh->nomsg += mkv_errormsg()[0] == '\0';
	sh->rc[6] = mkv_prefix_len(pool, &cd_key, 1, &hits);
	sh->nomsg += mkv_errormsg()[0] == '\0';
	mkv_pool_close(&pool);
	return 0;
}

/*
 * X is stopped past the client timeout; a reclaim judges it dead by its
 * heartbeat and takes its slot, unless the holder's own reclamation pass,
 * once a lease period, did first: either way no client with X's pid is
 * left.  Continued, every call of X says so.
 */
START_TEST(test_handle_judged_dead_is_expired)
{
	static const char *const names[7] = { "mkv_alloc", "mkv_publish", "mkv_put", "mkv_del",
		"mkv_get", "mkv_exists", "mkv_prefix_len" };
	struct expired *sh = tu_shared(sizeof(*sh));
	struct tu_child x = TU_CHILD_NONE;
	struct mkv_client cl[16];
	struct mkv_reclaim rep;
	struct mkv_pool *pool;
	size_t n;

	cd_create(tu_path);
	TU_OK(tu_open(tu_path, 0, &cd_opts, &pool));
	tu_child_start(&x, expired_calls, sh);
	tu_child_expect(&x, "X", 'o', 20);
	ck_assert_int_eq(tu_stop(x.pid, 10), 0);
	tu_sleep_ms(2 * TIMEOUT_MS);
	TU_OK(mkv_pool_reclaim(pool, 0, &rep));
	ck_assert_uint_le(rep.clients, 1);
	TU_OK(mkv_pool_clients(pool, cl, 16, &n));
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_ne(cl[i].pid, (uint32_t)x.pid);
	ck_assert_int_eq(kill(x.pid, SIGCONT), 0);
	tu_write_byte(x.cmd, 'c');
	ck_assert_int_eq(tu_reap(x.pid, 20), 0);
	x.pid = -1;
	for (int i = 0; i < 7; i++)
		ck_assert_msg(sh->rc[i] == MKV_E_EXPIRED, "%s of a handle judged dead: %d (%s)",
				names[i], sh->rc[i], mkv_strerror(sh->rc[i]));
	ck_assert_int_eq(sh->nomsg, 0);
	tu_child_end(&x);
	mkv_pool_close(&pool);
	tu_shared_free(sh, sizeof(*sh));
}
END_TEST

/* ---- out of memory ---- */

/* The calls, as the child under the interposer makes them. */
enum nomem_call { N_OPEN, N_ALLOC, N_PUBLISH, N_PUT, N_DEL, N_GET, N_EXISTS, N_PREFIX, N_CALLS };

static const struct {
	const char *name;
	const char *func;  /* what fails: the call's first allocation */
	unsigned flags;    /* the handle's */
} nomem_calls[N_CALLS] = {
	[N_OPEN] = { "mkv_pool_open", "calloc", 0 },
	[N_ALLOC] = { "mkv_alloc", "malloc", 0 },
	[N_PUBLISH] = { "mkv_publish", "malloc", 0 },
	[N_PUT] = { "mkv_put", "malloc", 0 },
	[N_DEL] = { "mkv_del", "malloc", 0 },
	[N_GET] = { "mkv_get", "malloc", MKV_RDONLY },
	[N_EXISTS] = { "mkv_exists", "calloc", MKV_RDONLY },
	[N_PREFIX] = { "mkv_prefix_len", "calloc", MKV_RDONLY },
};

/*
 * The child under the interposer: open the pool at @p path (but for
 * N_OPEN), arm, make the call, disarm; "rc=<code> msg=<message>" on
 * stdout.  Exit status 0 when it got that far.
 */
static int
nomem_child(const char *path, const char *which)
{
	struct mkv_pool *pool = NULL;
	struct mkv_view v;
	struct mkv_buf b;
	struct tu_fi fi;
	size_t hits;
	int c, rc;

	for (c = 0; c < N_CALLS && strcmp(nomem_calls[c].name, which) != 0; c++)
		;
	if (c == N_CALLS || tu_fi_find(&fi) < 0)
		return 90;
	if (c != N_OPEN && tu_open(path, nomem_calls[c].flags, &cd_opts, &pool) < 0)
		return 91;
	if (c == N_PUBLISH && mkv_alloc(pool, PAGE, &b) < 0)
		return 92;
	fi.arm();
	switch (c) {
	case N_OPEN:
		rc = mkv_pool_open(path, 0, NULL, &pool);
		break;
	case N_ALLOC:
		rc = mkv_alloc(pool, PAGE, &b);
		break;
	case N_PUBLISH:
		rc = mkv_publish(pool, "p", 1, &b);
		break;
	case N_PUT:
		rc = mkv_put(pool, "p", 1, "v", 1);
		break;
	case N_DEL:
		rc = mkv_del(pool, "k", 1);
		break;
	case N_GET:
		rc = mkv_get(pool, "k", 1, &v);
		break;
	case N_EXISTS:
		rc = mkv_exists(pool, "k", 1);
		break;
	default:
		rc = mkv_prefix_len(pool, &cd_key, 1, &hits);
		break;
	}
	fi.disarm();
	printf("rc=%d msg=%s\n", rc, mkv_errormsg());
	fflush(stdout);
	return 0;
}

/* Each call's first allocation fails, and every one after (FI_MODE=persistent). */
START_TEST(test_out_of_memory_is_nomem)
{
	const char *so = tu_injector();
	char out[1024];
	int rc, code;

	if (TU_SANITIZED || so == NULL) {
		printf("out of memory: %s: skipped\n", TU_SANITIZED ?
				"a sanitizer interposes malloc" : "no t/.libs/faultinject.so");
		return;
	}
	for (int c = 0; c < N_CALLS; c++) {
		char path[PATH_MAX];
		char *const argv[] = { "check_codes", "--nomem-child", path,
			(char *)nomem_calls[c].name, NULL };

		/* a pool of its own for each call */
		snprintf(path, sizeof(path), "%s/%s", tu_dir, nomem_calls[c].name);
		cd_create(path);
		rc = tu_run_injected(so, nomem_calls[c].func, 1, "persistent", argv, out,
				sizeof(out));
		ck_assert_msg(rc == 0, "%s under failing %s: exit %d: %s", nomem_calls[c].name,
				nomem_calls[c].func, rc, out);
		ck_assert_msg(sscanf(out, "rc=%d", &code) == 1 && code == MKV_E_NOMEM &&
				strstr(out, "msg=\n") == NULL, "%s under failing %s: %s",
				nomem_calls[c].name, nomem_calls[c].func, out);
	}
}
END_TEST

/* ---- mkv_pool_open ---- */

START_TEST(test_open_codes)
{
	struct tu_opts one = cd_opts;
	struct mkv_pool *pool, *other = NULL;
	char file[PATH_MAX];
	struct stat st;

	TU_ERR(tu_open(tu_path, 0, &cd_opts, &other), MKV_E_NOENT);
	ck_assert_int_eq(close(open(tu_path, O_CREAT | O_WRONLY, 0600)), 0);
	TU_ERR(tu_open(tu_path, 0, &cd_opts, &other), MKV_E_NOTPOOL);
	ck_assert_int_eq(unlink(tu_path), 0);

	/* one client slot, taken */
	one.max_clients = 1;
	TU_OK(tu_open(tu_path, MKV_CREATE, &one, &pool));
	TU_ERR(tu_open(tu_path, MKV_RDONLY, &cd_opts, &other), MKV_E_USERS);
	mkv_pool_close(&pool);

	/* a directory others may write into */
	ck_assert_int_eq(chmod(tu_path, 0777), 0);
	TU_ERR(tu_open(tu_path, 0, &cd_opts, &other), MKV_E_PERM);
	ck_assert_int_eq(chmod(tu_path, 0700), 0);

	/* a registry of a later format */
	cd_set_meta("format", MKV_REGISTRY_FORMAT + 1);
	TU_ERR(tu_open(tu_path, 0, &cd_opts, &other), MKV_E_VERSION);
	cd_set_meta("format", MKV_REGISTRY_FORMAT);
	TU_OK(tu_open(tu_path, 0, &cd_opts, &pool));
	mkv_pool_close(&pool);

	/* a data file cut short */
	snprintf(file, sizeof(file), "%s/data", tu_path);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(truncate(file, st.st_size / 2), 0);
	TU_ERR(tu_open(tu_path, 0, &cd_opts, &other), MKV_E_CORRUPT);
	ck_assert_ptr_null(other);
}
END_TEST

static Suite *
codes_suite(void)
{
	Suite *s = suite_create("codes");
	TCase *tc;

	tc = tcase_create("codes");
	tcase_add_checked_fixture(tc, tu_setup, tu_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bad_arguments_are_inval);
	tcase_add_test(tc, test_missing_and_published_keys);
	tcase_add_test(tc, test_read_only_handle_writes_are_rdonly);
	tcase_add_test(tc, test_full_arena_is_nospc);
	tcase_add_test(tc, test_full_registry_is_nospc);
	tcase_add_test(tc, test_damaged_entries_are_version_and_corrupt);
	tcase_add_test(tc, test_damaged_registry_page_is_corrupt);
	tcase_add_test(tc, test_registry_writes_on_damaged_meta_are_corrupt);
	tcase_add_test(tc, test_reader_slots_taken_is_users);
	tcase_add_test(tc, test_writer_lock_held_is_timedout);
	tcase_add_test(tc, test_holder_that_cannot_write_is_timedout);
	tcase_add_test(tc, test_handle_judged_dead_is_expired);
	tcase_add_test(tc, test_out_of_memory_is_nomem);
	tcase_add_test(tc, test_open_codes);
	suite_add_tcase(s, tc);
	return s;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--nomem-child") == 0)
		return nomem_child(argv[2], argv[3]);
	return tu_run_suite(codes_suite());
}
