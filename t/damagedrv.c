/* SPDX-License-Identifier: MIT */
/*
 * damagedrv.c -- seeded damage trials, driven by t/damage.sh.
 *
 *   damagedrv --dir DIR [--stat PATH] [--gc PATH] [--files LIST]
 *             [--trials N] [--first I] [--seed S] [--timeout SECS]
 *             [--skip LIST] [--keep] [--verbose]
 *   damagedrv --dir DIR --replay FILE:TRIAL [--seed S]
 *
 * It builds one pristine pool in DIR/pristine: a few hundred keys, chains
 * published with mkv_publish_chain, every fifth plain key deleted and a
 * hundred or more evicted in one txn while another process holds a view (so
 * the quarantine table `freed` holds records, one of them on LMDB overflow
 * pages, and LMDB's free list is not empty).  Then, for each trial of each
 * file in LIST
 * (super, registry, data; default all three), it copies the pool, damages
 * that ONE file and runs, each in a process of its own with a hard
 * timeout:
 *  - marukv-stat --json and marukv-gc verify --deep on one copy;
 *  - on another, the library: mkv_pool_open read-only (then stat, clients,
 *    verify deep, gets, prefix_len, get_batch, close) and read-write (the
 *    first writer runs mkv_recover; then stat, clients, verify deep, gets,
 *    a put and a delete, reclaim, evict, close).
 * A trial fails if any of them dies of a signal (SIGSEGV, SIGBUS, SIGABRT
 * from a sanitizer or an assertion), outlives the timeout, or if the
 * library writes to standard error (a tool that cannot be run, or a child
 * that cannot set itself up, fails it too).  Return codes may be any error.
 *
 * The damage of trial I of a file comes from the seed S + I hashed with
 * the file's name: one of a single-byte flip, 2 to 64 bytes of garbage, a
 * field of 2, 4 or 8 bytes set to an extreme value, or a truncation.  In
 * registry.mdb most damage goes to the pages in use (below the last page
 * LMDB wrote, meta pages included) rather than the zero tail; in super it
 * goes to each table in turn: header, state and lease, node table, client
 * slots, request entries, page table, hints; in data to the pages values
 * use.
 *
 * --skip FILE:TRIAL,... leaves those trials out (known open crashes, named
 * one by one); --replay FILE:TRIAL damages a copy as that trial does and
 * runs the library's part in this process, for a debugger.
 *
 * Output: "ok"/"not ok" per failing trial (every trial with --verbose),
 * "# " lines per file with the counts of trials, crashes, hangs, noise on
 * standard error, and each return code seen; then "N passed, M failed".
 * Exit 0 all passed, 1 a trial failed, 99 setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"
#include "layout.h"

#define DD_DATA (8ULL << 20)
#define DD_REGISTRY (1ULL << 20)
#define DD_PAGE 4096U
#define DD_CLIENTS 8U
#define DD_PERIOD 100U            /* lease period, ms: a lost holder costs 30 of them */
#define DD_CLIENT_TIMEOUT 500U
#define DD_KEYS 400U              /* plain keys */
#define DD_EVICT_PAGES 240U       /* evicted in one txn: quarantine needs overflow pages */
#define DD_CHAINS 12U
#define DD_CHAIN_LEN 5U
#define DD_MAXLEN (2 * DD_PAGE - 64)

static const char *const file_names[] = { "super", "registry", "data" };
static const char *const file_paths[] = { "super", "registry.mdb", "data" };
#define NFILES 3

/* ---- the library's part of a trial, in a child ---- */

enum step {
	S_OPEN_RO, S_RO_STAT, S_RO_CLIENTS, S_RO_VERIFY, S_RO_GET, S_RO_PREFIX, S_RO_BATCH,
	S_RO_CLOSE,
	S_OPEN_RW, S_RW_STAT, S_RW_CLIENTS, S_RW_VERIFY, S_RW_GET, S_RW_PUT, S_RW_DEL,
	S_RW_RECLAIM, S_RW_EVICT, S_RW_CLOSE, NSTEPS
};
static const char *const step_names[] = {
	"open ro", "stat", "clients", "verify", "get", "prefix_len", "get_batch", "close",
	"open rw", "stat", "clients", "verify", "get", "put", "del", "reclaim", "evict", "close",
};

/* What the child reached, in shared memory: the parent reads it after. */
struct report {
	int reached;              /* steps begun */
	int codes[NSTEPS];
};

static size_t
plain_key(char *out, unsigned i)
{
	return (size_t)snprintf(out, 64, "key-%05u", i);
}

static size_t
chain_key(char *out, unsigned c, unsigned i)
{
	return (size_t)snprintf(out, 64, "chain-%02u-%u", c, i);
}

static size_t
value_len(unsigned i, size_t max)
{
	return 100 + (size_t)i * 977 % (max - 100);
}

/* Step @p s begins (so a crash or hang in it is blamed on it), then its code. */
#define STEP(r, s, call) ((r)->reached = (int)(s) + 1, (r)->codes[s] = (call))

/* Gets of every 11th key: missing, damaged or whole; views are released. */
static int
gets(struct mkv_pool *pool)
{
	struct mkv_view v;
	char key[64];
	int rc, first = 0;

	for (unsigned i = 1; i < DD_KEYS; i += 11) {
		rc = mkv_get(pool, key, plain_key(key, i), &v);
		if (rc == 0) {
			volatile uint8_t sum = 0;

			for (size_t j = 0; j < v.len; j += 512)
				sum ^= ((const uint8_t *)v.data)[j];
			(void)sum;
			rc = mkv_release(pool, &v);
		}
		if (rc && !first)
			first = rc;
	}
	return first;
}

static int
chain_reads(struct mkv_pool *pool, bool batch)
{
	char keys[DD_CHAIN_LEN][64];
	struct mkv_key k[DD_CHAIN_LEN];
	struct mkv_view views[DD_CHAIN_LEN];
	size_t n = 0;
	int rc;

	for (unsigned i = 0; i < DD_CHAIN_LEN; i++) {
		k[i].len = chain_key(keys[i], 3, i);
		k[i].data = keys[i];
	}
	if (!batch)
		return mkv_prefix_len(pool, k, DD_CHAIN_LEN, &n);
	rc = mkv_get_batch(pool, k, DD_CHAIN_LEN, 0, views, &n);
	if (rc)
		return rc;
	for (unsigned i = 0; i < DD_CHAIN_LEN; i++)
		if (views[i].data && (rc = mkv_release(pool, &views[i])))
			return rc;
	return 0;
}

static void
lib_part(const char *path, struct report *r)
{
	static uint8_t val[DD_MAXLEN];
	struct mkv_client clients[DD_CLIENTS];
	struct mkv_pool *pool;
	struct mkv_verify v;
	struct mkv_reclaim rec;
	struct mkv_evict ev;
	struct mkv_stat st;
	char key[64];
	size_t n;
	int rc;

	rc = STEP(r, S_OPEN_RO, mkv_pool_open(path, MKV_RDONLY | MKV_VERIFY, NULL, &pool));
	if (rc == 0) {
		STEP(r, S_RO_STAT, mkv_pool_stat(pool, &st));
		STEP(r, S_RO_CLIENTS, mkv_pool_clients(pool, clients, DD_CLIENTS, &n));
		STEP(r, S_RO_VERIFY, mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v));
		STEP(r, S_RO_GET, gets(pool));
		STEP(r, S_RO_PREFIX, chain_reads(pool, false));
		STEP(r, S_RO_BATCH, chain_reads(pool, true));
		STEP(r, S_RO_CLOSE, (mkv_pool_close(&pool), 0));
	}
	rc = STEP(r, S_OPEN_RW, mkv_pool_open(path, 0, NULL, &pool));
	if (rc)
		return;
	STEP(r, S_RW_STAT, mkv_pool_stat(pool, &st));
	STEP(r, S_RW_CLIENTS, mkv_pool_clients(pool, clients, DD_CLIENTS, &n));
	STEP(r, S_RW_VERIFY, mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v));
	STEP(r, S_RW_GET, gets(pool));
	tu_fill(val, sizeof(val), "new-key", 7);
	STEP(r, S_RW_PUT, mkv_put(pool, "new-key", 7, val, sizeof(val)));
	STEP(r, S_RW_DEL, mkv_del(pool, key, plain_key(key, 2)));
	STEP(r, S_RW_RECLAIM, mkv_pool_reclaim(pool, 0, &rec));
	STEP(r, S_RW_EVICT, mkv_pool_evict(pool, 40, 0, &ev));
	STEP(r, S_RW_CLOSE, (mkv_pool_close(&pool), 0));
}

/* ---- the pristine pool ---- */

#define PATH_LEN 4096
static void join(char out[PATH_LEN], const char *dir, const char *name);

static void
die(const char *what)
{
	fprintf(stderr, "damagedrv: %s: %s\n", what, mkv_errormsg()[0] ? mkv_errormsg() :
			strerror(errno));
	exit(99);
}

/* A reader that holds a view across the deletes, so quarantine stays. */
static void
pinning_reader(const char *path, int go, int pinned, int done)
{
	struct mkv_pool *pool;
	struct mkv_view v;
	char key[64], c;

	if (read(go, &c, 1) != 1 ||
	    mkv_pool_open(path, MKV_RDONLY, NULL, &pool) ||
	    mkv_get(pool, key, plain_key(key, 1), &v) ||
	    write(pinned, "p", 1) != 1 || read(done, &c, 1) != 1)
		_exit(1);
	mkv_release(pool, &v);
	mkv_pool_close(&pool);
	_exit(0);
}

/* Pages of registry.mdb that look like the first of an LMDB overflow run. */
static unsigned
overflow_runs(const char *pool)
{
	char path[PATH_LEN];
	struct { uint64_t pgno; uint16_t pad, flags; } hdr;
	unsigned n = 0;
	int fd;

	join(path, pool, "registry.mdb");
	if ((fd = open(path, O_RDONLY)) < 0)
		die(path);
	for (uint64_t pg = 2; pread(fd, &hdr, sizeof(hdr), (off_t)(pg * DD_PAGE)) ==
			sizeof(hdr); pg++)
		n += hdr.pgno == pg && hdr.flags == 0x04;
	close(fd);
	return n;
}

/* The pristine pool must be sound, with quarantine and LMDB's free list in use. */
static void
describe(const char *path)
{
	struct mkv_pool *pool;
	struct mkv_verify v;
	struct mkv_stat st;
	unsigned runs = overflow_runs(path);

	if (mkv_pool_open(path, MKV_RDONLY, NULL, &pool) || mkv_pool_stat(pool, &st) ||
	    mkv_pool_verify(pool, MKV_VERIFY_DEEP, &v))
		die("the pristine pool");
	mkv_pool_close(&pool);
	printf("# pristine pool: %llu keys, %llu pages used, %llu quarantined, %llu evicted; registry %llu of %llu bytes in use, %u overflow runs\n",
			(unsigned long long)st.entries, (unsigned long long)v.pages_used,
			(unsigned long long)v.pages_quarantined, (unsigned long long)st.evictions,
			(unsigned long long)st.registry_used, (unsigned long long)st.registry_size,
			runs);
	if (!v.pages_quarantined || !runs) {
		errno = EINVAL;
		die("the pristine pool has no quarantine or no overflow page");
	}
}

static void
build_pristine(const char *path)
{
	int go[2], pinned[2], done[2];
	struct mkv_opts *opts;
	struct mkv_pool *pool;
	char key[64], ckeys[DD_CHAIN_LEN][64], c;
	struct mkv_key k[DD_CHAIN_LEN];
	struct mkv_buf b[DD_CHAIN_LEN];
	struct mkv_stat st;
	struct mkv_evict ev;
	pid_t pid;

	tu_rmtree(path);
	if (pipe(go) || pipe(pinned) || pipe(done))
		die("pipe");
	if ((pid = tu_fork()) < 0)
		die("fork");
	if (pid == 0)
		pinning_reader(path, go[0], pinned[1], done[0]);
	if (mkv_opts_new(&opts) || mkv_opts_set_data_size(opts, DD_DATA) ||
	    mkv_opts_set_page_size(opts, DD_PAGE) || mkv_opts_set_max_clients(opts, DD_CLIENTS) ||
	    mkv_opts_set_registry_size(opts, DD_REGISTRY) ||
	    mkv_opts_set_lease_period(opts, DD_PERIOD) ||
	    mkv_opts_set_client_timeout(opts, DD_CLIENT_TIMEOUT) ||
	    mkv_opts_set_watermarks(opts, 0, 0) ||
	    mkv_pool_open(path, MKV_CREATE, opts, &pool))
		die("create the pristine pool");
	mkv_opts_delete(&opts);
	for (unsigned i = 0; i < DD_KEYS; i++) {
		size_t klen = plain_key(key, i);

		if (tu_put(pool, key, klen, value_len(i, DD_PAGE)))
			die("put");
	}
	for (unsigned ch = 0; ch < DD_CHAINS; ch++) {
		for (unsigned i = 0; i < DD_CHAIN_LEN; i++) {
			k[i].len = chain_key(ckeys[i], ch, i);
			k[i].data = ckeys[i];
			if (mkv_alloc(pool, value_len(ch * 7 + i, DD_MAXLEN), &b[i]))
				die("alloc");
			tu_fill(b[i].data, b[i].len, ckeys[i], k[i].len);
		}
		if (mkv_publish_chain(pool, NULL, 0, k, b, DD_CHAIN_LEN))
			die("publish_chain");
	}
	if (write(go[1], "g", 1) != 1 || read(pinned[0], &c, 1) != 1)
		die("the pinning reader");
	for (unsigned i = 0; i < DD_KEYS; i += 5)
		if (mkv_del(pool, key, plain_key(key, i)))
			die("del");
	if (mkv_pool_stat(pool, &st) ||
	    mkv_pool_evict(pool, (unsigned)((st.pages_free + DD_EVICT_PAGES) * 100 / st.pages_total),
			0, &ev) || ev.keys == 0)
		die("evict");
	mkv_pool_close(&pool);
	if (write(done[1], "d", 1) != 1 || tu_wait_for(pid, 30) != 0)
		die("the pinning reader");
	describe(path);
	close(go[0]);
	close(go[1]);
	close(pinned[0]);
	close(pinned[1]);
	close(done[0]);
	close(done[1]);
}

/* ---- files ---- */

/* out = dir/name, or a setup error if it does not fit */
static void
join(char out[PATH_LEN], const char *dir, const char *name)
{
	int n = snprintf(out, PATH_LEN, "%s/%s", dir, name);

	if (n < 0 || n >= PATH_LEN) {
		errno = ENAMETOOLONG;
		die(dir);
	}
}

static void
copy_file(const char *from, const char *to)
{
	static char buf[1 << 16];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ssize_t n;

	if (in < 0 || out < 0)
		die(from);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			die(to);
	if (n < 0)
		die(from);
	close(in);
	close(out);
}

static void
copy_pool(const char *from, const char *to)
{
	char a[PATH_LEN], b[PATH_LEN];

	tu_rmtree(to);
	if (mkdir(to, 0700) < 0)
		die(to);
	for (int f = 0; f < NFILES; f++) {
		join(a, from, file_paths[f]);
		join(b, to, file_paths[f]);
		copy_file(a, b);
	}
}

static uint64_t
file_size(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		die(path);
	return (uint64_t)st.st_size;
}

/* The end of the last page with a byte that is not zero. */
static uint64_t
used_end(const char *path)
{
	static uint8_t page[DD_PAGE];
	int fd = open(path, O_RDONLY);
	uint64_t end = 0, off = 0;
	ssize_t n;

	if (fd < 0)
		die(path);
	while ((n = pread(fd, page, sizeof(page), (off_t)off)) > 0) {
		off += (uint64_t)n;
		if (!tu_is_zero(page, (size_t)n))
			end = off;
	}
	close(fd);
	return end;
}

/* ---- damage ---- */

struct region {
	const char *name;
	uint64_t off, len;
};

struct target {
	uint64_t size;            /* of the pristine file */
	uint64_t used;            /* end of its last page in use */
	struct region r[9];       /* super: its tables */
	unsigned nr;
};

struct damage {
	char what[160];
};

static uint64_t
pick(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return tu_rand_range(s, lo, hi);
}

/* An extreme value for a field: what a bad length or index looks like. */
static uint64_t
extreme(uint64_t *s, const struct target *t)
{
	switch (pick(s, 0, 7)) {
	case 0: return 0;
	case 1: return UINT64_MAX;
	case 2: return 1ULL << pick(s, 8, 63);
	case 3: return (1ULL << pick(s, 8, 63)) - 1;
	case 4: return t->size / DD_PAGE + pick(s, 0, 3);
	case 5: return pick(s, 1, 4096);
	case 6: return UINT64_MAX - pick(s, 0, 4096);
	default: return tu_rand(s);
	}
}

static void
damage(const char *path, int file, const struct target *t, uint64_t seed, struct damage *d)
{
	uint64_t s = seed, off, len, lo = 0, hi = t->used ? t->used : t->size;
	unsigned kind = (unsigned)pick(&s, 0, 99);
	const char *where = "";
	uint8_t buf[64];
	int fd = open(path, O_RDWR);

	if (fd < 0)
		die(path);
	if (file == 0) {
		const struct region *r = &t->r[pick(&s, 0, t->nr - 1)];

		where = r->name;
		lo = r->off;
		hi = r->off + r->len;
	} else if (file == 1 && pick(&s, 0, 6) == 0) {
		where = "meta";
		hi = 2 * DD_PAGE;
	} else if (file == 1 && pick(&s, 0, 9) == 0) {
		where = "anywhere";
		hi = t->size;
	}
	if (kind < 10) {
		/* truncation: page-aligned in the used part, or anywhere */
		off = pick(&s, 0, 1) ? pick(&s, 0, t->used / DD_PAGE) * DD_PAGE :
				pick(&s, 0, t->size - 1);
		if (ftruncate(fd, (off_t)off) < 0)
			die("truncate");
		snprintf(d->what, sizeof(d->what), "truncated to %llu bytes",
				(unsigned long long)off);
	} else if (kind < 55) {
		off = pick(&s, lo, hi - 1);
		if (pread(fd, buf, 1, (off_t)off) != 1)
			die("read");
		buf[1] = (uint8_t)pick(&s, 1, 255);
		buf[0] ^= buf[1];
		if (pwrite(fd, buf, 1, (off_t)off) != 1)
			die("write");
		snprintf(d->what, sizeof(d->what), "byte at %llu %s xor 0x%02x",
				(unsigned long long)off, where, buf[1]);
	} else if (kind < 75) {
		len = pick(&s, 2, 64);
		off = pick(&s, lo, hi > lo + len ? hi - len : lo);
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)tu_rand(&s);
		if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
			die("write");
		snprintf(d->what, sizeof(d->what), "%llu bytes of garbage at %llu %s",
				(unsigned long long)len, (unsigned long long)off, where);
	} else {
		uint64_t v = extreme(&s, t);

		len = 1U << pick(&s, 1, 3);
		off = pick(&s, lo, hi - len) & ~(len - 1);
		if (off < lo)
			off = lo;
		if (pwrite(fd, &v, len, (off_t)off) != (ssize_t)len)
			die("write");
		snprintf(d->what, sizeof(d->what), "%llu-byte field at %llu %s set to 0x%llx",
				(unsigned long long)len, (unsigned long long)off, where,
				(unsigned long long)(len == 8 ? v : v & ((1ULL << (8 * len)) - 1)));
	}
	close(fd);
}

static void
super_regions(const char *path, struct target *t)
{
	struct mkv_super sb;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || pread(fd, &sb, sizeof(sb), 0) != sizeof(sb))
		die(path);
	close(fd);
	t->r[0] = (struct region){ "(header)", 0, sizeof(sb) };
	t->r[1] = (struct region){ "(state, lease)", sb.state_off, sizeof(struct mkv_state) };
	t->r[2] = (struct region){ "(node table)", sb.nodes_off,
			(uint64_t)sb.max_nodes * sizeof(struct mkv_node) };
	t->r[3] = (struct region){ "(client slots)", sb.slots_off,
			(uint64_t)sb.max_clients * sizeof(struct mkv_slot) };
	t->r[4] = (struct region){ "(request entries)", sb.rq_off,
			(uint64_t)sb.max_clients * sb.rq_depth * sizeof(struct mkv_rq) };
	t->r[5] = (struct region){ "(page table)", sb.pt_off, sb.nr_pages * 8 };
	t->r[6] = (struct region){ "(hints)", sb.hint_off, sb.nr_pages };
	t->r[7] = (struct region){ "(registry page log)", sb.wlog_off,
			MKV_WLOG_RECS * sizeof(struct mkv_wlog) };
	t->r[8] = (struct region){ "(hold blocks)", sb.hold_off,
			(uint64_t)sb.max_clients * sizeof(struct mkv_hold_block) };
	t->nr = 9;
}

/* ---- running ---- */

struct tally {
	unsigned trials, passed, crashes, hangs, noisy, broken, skipped;
	/* return codes seen: by open (ro, rw), by the other calls, by each tool */
	struct { int code; unsigned n; } codes[4][64];
};
static const char *const tally_names[] = { "open ro", "open rw", "other calls", "tools" };

static void
count(struct tally *t, int which, int code)
{
	for (int i = 0; i < 64; i++) {
		if (t->codes[which][i].n == 0)
			t->codes[which][i].code = code;
		if (t->codes[which][i].code == code) {
			t->codes[which][i].n++;
			return;
		}
	}
}

static const char *
code_name(int which, int code)
{
	static char buf[64];

	if (which == 3) {
		snprintf(buf, sizeof(buf), "%s exit %d", code >> 8 ? "gc" : "stat", code & 0xff);
		return buf;
	}
	switch (code) {
	case 0: return "ok";
	case MKV_E_CORRUPT: return "CORRUPT";
	case MKV_E_NOTPOOL: return "NOTPOOL";
	case MKV_E_VERSION: return "VERSION";
	case MKV_E_NOTFOUND: return "NOTFOUND";
	case MKV_E_INTERNAL: return "INTERNAL";
	case MKV_E_TIMEDOUT: return "TIMEDOUT";
	case MKV_E_EXPIRED: return "EXPIRED";
	case MKV_E_USERS: return "USERS";
	case MKV_E_NOSPC: return "NOSPC";
	case MKV_E_INVAL: return "INVAL";
	case MKV_E_EXISTS: return "EXISTS";
	case MKV_E_NOMEM: return "NOMEM";
	case MKV_E_PERM: return "PERM";
	case MKV_E_IO: return "IO";
	default:
		snprintf(buf, sizeof(buf), "%d", code);
		return buf;
	}
}

/* Wait for @p pid at most @p secs; its status, or -1 if it had to be killed. */
static int
wait_or_kill(pid_t pid, double secs)
{
	double end = tu_now() + secs;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return 0;
		if (tu_now() > end)
			break;
		tu_sleep_ms(2);
	}
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

static void
child_setup(const char *errfile)
{
	struct rlimit no_core = { 0, 0 };
	int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600), null = open("/dev/null", O_WRONLY);

	setpgid(0, 0);
	if (!getenv("DAMAGE_CORE"))
		setrlimit(RLIMIT_CORE, &no_core);
	if (fd < 0 || null < 0 || dup2(fd, 2) < 0 || dup2(null, 1) < 0)
		_exit(98);
	close(fd);
	close(null);
}

static bool
file_has(const char *path, const char *needle)
{
	char buf[8192];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return needle ? strstr(buf, needle) != NULL : true;
}

static void
show(const char *path)
{
	char line[512];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && n++ < 40)
		printf("#     %s", line);
	fclose(f);
}

struct run {
	const char *dir, *stat, *gc;
	double timeout;
	bool verbose, keep;
};

/* One verdict for one process: "" if it passed, else why not. */
static const char *
verdict(int status, const char *errfile, bool library)
{
	static char buf[64];

	if (status == -1)
		return "hang";
	if (WIFSIGNALED(status)) {
		snprintf(buf, sizeof(buf), "signal %d (%s)", WTERMSIG(status),
				strsignal(WTERMSIG(status)));
		return buf;
	}
	if (file_has(errfile, "Sanitizer") || file_has(errfile, "runtime error"))
		return "sanitizer report";
	if (library && WEXITSTATUS(status) != 0)
		return "child failed";
	if (!library && WEXITSTATUS(status) == 127)
		return "could not run";
	if (library && file_has(errfile, NULL))
		return "library wrote to stderr";
	return "";
}

static int
tool(const struct run *run, const char *prog, char *const argv[], const char *errfile,
		int *status)
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		child_setup(errfile);
		execv(prog, argv);
		_exit(127);
	}
	*status = wait_or_kill(pid, run->timeout);
	return 0;
}

static uint64_t trial_seed(uint64_t base, int file, unsigned i);

static bool
trial(const struct run *run, int file, unsigned i, uint64_t base, const struct target *tg,
		struct tally *t, struct report *rep)
{
	uint64_t seed = trial_seed(base, file, i);
	char pristine[4096], a[4096], b[4096], victim[4096], err[4096], what[256];
	const char *why = "", *who = "";
	struct damage d;
	int st;
	pid_t pid;

	join(pristine, run->dir, "pristine");
	join(a, run->dir, "tools");
	join(b, run->dir, "lib");
	join(err, run->dir, "stderr");
	copy_pool(pristine, a);
	join(victim, a, file_paths[file]);
	damage(victim, file, tg, seed, &d);
	copy_pool(a, b);
	t->trials++;

	/* the tools, on one copy */
	if (run->stat && !*why) {
		char *argv[] = { (char *)run->stat, "--json", a, NULL };

		tool(run, run->stat, argv, err, &st);
		if (*(why = verdict(st, err, false)))
			who = "marukv-stat --json";
		else
			count(t, 3, WEXITSTATUS(st));
	}
	if (run->gc && !*why) {
		char *argv[] = { (char *)run->gc, "-q", "verify", "--deep", a, NULL };

		tool(run, run->gc, argv, err, &st);
		if (*(why = verdict(st, err, false)))
			who = "marukv-gc verify --deep";
		else
			count(t, 3, 0x100 | WEXITSTATUS(st));
	}
	/* the library, on the other */
	if (!*why) {
		memset(rep, 0, sizeof(*rep));
		if ((pid = fork()) < 0)
			die("fork");
		if (pid == 0) {
			child_setup(err);
			lib_part(b, rep);
			_exit(0);
		}
		st = wait_or_kill(pid, run->timeout);
		if (*(why = verdict(st, err, true))) {
			who = rep->reached ? step_names[rep->reached - 1] : "library";
			snprintf(what, sizeof(what), "library, in %s%s", who,
					rep->reached > S_OPEN_RW ? " (read-write handle)" :
					rep->reached > S_OPEN_RO ? " (read-only handle)" : "");
			who = what;
		} else {
			for (int s = 0; s < rep->reached; s++)
				count(t, s == S_OPEN_RO ? 0 : s == S_OPEN_RW ? 1 : 2, rep->codes[s]);
		}
	}
	if (!*why) {
		t->passed++;
		if (run->verbose)
			printf("ok - %s trial %u: %s\n", file_names[file], i, d.what);
		return true;
	}
	if (strcmp(why, "hang") == 0)
		t->hangs++;
	else if (strcmp(why, "library wrote to stderr") == 0)
		t->noisy++;
	else if (strcmp(why, "could not run") == 0 || strcmp(why, "child failed") == 0)
		t->broken++;
	else
		t->crashes++;
	printf("not ok - %s trial %u: %s: %s in %s\n", file_names[file], i, d.what, why, who);
	printf("#   rerun: DAMAGE_FILES=%s DAMAGE_FIRST=%u DAMAGE_TRIALS=1 DAMAGE_SEED=%#llx t/damage.sh\n",
			file_names[file], i, (unsigned long long)base);
	printf("#   debug: t/damagedrv --dir DIR --replay %s:%u --seed %#llx\n", file_names[file],
			i, (unsigned long long)base);
	show(err);
	if (run->keep) {
		char kept[4096];

		char name[64];

		snprintf(name, sizeof(name), "kept-%s-%u", file_names[file], i);
		join(kept, run->dir, name);
		copy_pool(pristine, kept);
		join(victim, kept, file_paths[file]);
		damage(victim, file, tg, seed, &d);
		printf("#   kept: %s\n", kept);
	}
	return false;
}

/* Trial I of a file: seed S + I, mixed with the file so files differ. */
static uint64_t
trial_seed(uint64_t base, int file, unsigned i)
{
	uint64_t s = base + i + (uint64_t)file * 0x9e3779b97f4a7c15ULL;

	return tu_splitmix64(&s) + i;
}

static bool
skipped(const char *list, int file, unsigned i)
{
	char item[64];
	size_t n;

	if (!list)
		return false;
	n = (size_t)snprintf(item, sizeof(item), "%s:%u", file_names[file], i);
	for (const char *p = list; (p = strstr(p, item)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

static void
print_tally(int file, const struct tally *t)
{
	printf("# %s: %u trials, %u passed, %u crashes, %u hangs, %u noisy, %u not run, %u skipped\n",
			file_names[file], t->trials, t->passed, t->crashes, t->hangs, t->noisy,
			t->broken, t->skipped);
	for (int w = 0; w < 4; w++) {
		printf("#   %s:", tally_names[w]);
		for (int i = 0; i < 64 && t->codes[w][i].n; i++)
			printf(" %s=%u", code_name(w, t->codes[w][i].code), t->codes[w][i].n);
		printf("\n");
	}
}

static void
targets(const char *pristine, struct target *tg)
{
	char path[4096];

	for (int f = 0; f < NFILES; f++) {
		join(path, pristine, file_paths[f]);
		memset(&tg[f], 0, sizeof(tg[f]));
		tg[f].size = file_size(path);
		tg[f].used = used_end(path);
		if (tg[f].used < 2 * DD_PAGE)
			tg[f].used = 2 * DD_PAGE;
		if (f == 0)
			super_regions(path, &tg[f]);
	}
}

int
main(int argc, char **argv)
{
	struct run run = { .timeout = 30 };
	const char *files = "super,registry,data", *skip = NULL, *replay = NULL;
	unsigned trials = 100, first = 0, failed = 0, passed = 0;
	uint64_t seed = 0xda3a6e00;
	struct target tg[NFILES];
	struct report *rep;
	char pristine[4096];

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--verbose")) {
			run.verbose = true;
			continue;
		}
		if (!strcmp(o, "--keep")) {
			run.keep = true;
			continue;
		}
		if (!v) {
			fprintf(stderr, "damagedrv: %s needs a value (see the top of t/damagedrv.c)\n", o);
			return 99;
		}
		i++;
		if (!strcmp(o, "--dir")) run.dir = v;
		else if (!strcmp(o, "--stat")) run.stat = *v ? v : NULL;
		else if (!strcmp(o, "--gc")) run.gc = *v ? v : NULL;
		else if (!strcmp(o, "--files")) files = v;
		else if (!strcmp(o, "--trials")) trials = (unsigned)strtoul(v, NULL, 0);
		else if (!strcmp(o, "--first")) first = (unsigned)strtoul(v, NULL, 0);
		else if (!strcmp(o, "--seed")) seed = strtoull(v, NULL, 0);
		else if (!strcmp(o, "--timeout")) run.timeout = strtod(v, NULL);
		else if (!strcmp(o, "--skip")) skip = v;
		else if (!strcmp(o, "--replay")) replay = v;
		else {
			fprintf(stderr, "damagedrv: unknown option %s\n", o);
			return 99;
		}
	}
	if (!run.dir) {
		fprintf(stderr, "damagedrv: --dir is required\n");
		return 99;
	}
	unsetenv("MARUKV_POOL");
	unsetenv("MARUKV_NODE");
	join(pristine, run.dir, "pristine");
	build_pristine(pristine);
	targets(pristine, tg);
	rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rep == MAP_FAILED)
		die("mmap");
	if (replay) {
		char path[4096], victim[4096];
		unsigned i = 0;
		int f = 0;
		struct damage d;

		while (f < NFILES && strncmp(replay, file_names[f], strlen(file_names[f])))
			f++;
		if (f == NFILES || sscanf(replay + strlen(file_names[f]), ":%u", &i) != 1) {
			fprintf(stderr, "damagedrv: --replay FILE:TRIAL\n");
			return 99;
		}
		join(path, run.dir, "replay");
		copy_pool(pristine, path);
		join(victim, path, file_paths[f]);
		damage(victim, f, &tg[f], trial_seed(seed, f, i), &d);
		printf("# replay %s trial %u: %s (pool %s)\n", file_names[f], i, d.what, path);
		fflush(stdout);
		lib_part(path, rep);
		printf("# replay reached %s\n", rep->reached ? step_names[rep->reached - 1] : "-");
		return 0;
	}
	for (int f = 0; f < NFILES; f++) {
		struct tally *t;

		if (!strstr(files, file_names[f]))
			continue;
		if (!(t = calloc(1, sizeof(*t))))
			die("calloc");
		printf("# %s: %llu bytes, damage mostly below %llu\n", file_names[f],
				(unsigned long long)tg[f].size, (unsigned long long)tg[f].used);
		fflush(stdout);
		for (unsigned i = first; i < first + trials; i++) {
			if (skipped(skip, f, i)) {
				t->skipped++;
				printf("skip - %s trial %u (DAMAGE_SKIP)\n", file_names[f], i);
				continue;
			}
			if (trial(&run, f, i, seed, &tg[f], t, rep))
				passed++;
			else
				failed++;
			fflush(stdout);
		}
		print_tally(f, t);
		free(t);
	}
	printf("%u passed, %u failed\n", passed, failed);
	return failed ? 1 : 0;
}
