/* SPDX-License-Identifier: MIT */
/*
 * check_hostemu.c -- t/hostemu.so, the emulator of hosts that share memory
 * without cache coherence, shown to do what t/hostemu.c claims: stores
 * travel between hosts only through a flush and an invalidation, whole
 * lines at a time; the processes of one host share its cache; the kernel's
 * reads and writes, locks and LMDB's lock file are the host's own; a
 * skipped site does nothing; spontaneous write-backs and drops happen only
 * when asked for; a forked child moves to another host's cache, and only
 * with nothing of the pool in hand; a process stopped at a site goes on
 * with its host's lines refreshed, or with '!' as they were.
 *
 * Each test makes a pool directory of plain files (super, data) and runs
 * emulated hosts: this program again (argv[1] == "--host") under
 * LD_PRELOAD, with HOSTEMU_HOST naming the host.  A host process maps super
 * and data and obeys one command a line on its stdin, answering "= value"
 * or "! what failed" on its stdout (tu_host_do()); the test itself reads the
 * device, the files, with pread().  The interposer is MKV_HOSTEMU or
 * t/.libs/hostemu.so (from the build tree's top, where make check runs).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cachehooks.h"
#include "testutil.h"

#define SUPER_SIZE 4096
#define DATA_SIZE 8192
#define SITE_SKIP "t:skipped"

/* ===================================================================== */
/* The host process                                                      */

/* The pool files a host process has mapped, by the name it used. */
struct hfile {
	char name[32];
	int fd;
	unsigned char *base;
	size_t size;
};

static struct hfile hfiles[8];
static const struct mkv_cache_hooks *hooks;
static int hdir = -1;  /* the pool directory */
static MDB_env *henv;

/* The file mapped as @p name; with @p add, a free entry for it if none. */
static struct hfile *
hfile(const char *name, int add)
{
	for (size_t i = 0; i < sizeof(hfiles) / sizeof(hfiles[0]); i++)
		if (strcmp(hfiles[i].name, name) == 0 || (add && hfiles[i].name[0] == '\0')) {
			snprintf(hfiles[i].name, sizeof(hfiles[i].name), "%s", name);
			return &hfiles[i];
		}
	return NULL;
}

/* Open and map the pool file @p f whole; 0 or -errno. */
static long long
hmap(struct hfile *f)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", getenv("HOSTEMU_POOL"), f->name);
	if ((f->fd = open(path, O_RDWR | O_CLOEXEC)) < 0 || fstat(f->fd, &st) < 0)
		return -errno;
	f->size = (size_t)st.st_size;
	f->base = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0);
	return f->base == MAP_FAILED ? -errno : 0;
}

/* A lock of @p kind on @p f, not waiting: 0 or the errno.  OFD and POSIX
 * locks take different bytes (they conflict with each other). */
static long long
hlock(int fd, const char *kind)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 1 };
	int rc;

	if (strcmp(kind, "flock") == 0) {
		rc = flock(fd, LOCK_EX | LOCK_NB);
	} else if (strcmp(kind, "ofd") == 0) {
		rc = fcntl(fd, F_OFD_SETLK, &fl);
	} else {
		fl.l_start = 1;
		rc = fcntl(fd, F_SETLK, &fl);
	}
	return rc < 0 ? errno : 0;
}

/* A child that closes every pool descriptor and ends: what it closes is its
 * own copy, so the locks of this process must stay.  Its exit status. */
static long long
hforkclose(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		for (size_t i = 0; i < sizeof(hfiles) / sizeof(hfiles[0]); i++)
			if (hfiles[i].name[0])
				close(hfiles[i].fd);
		close(hdir);
		_exit(0);
	}
	return pid < 0 || waitpid(pid, &st, 0) != pid ? -1 : st;
}

/*
 * A child that lets go of every pool file, but of its mappings if @p keep
 * is "map" and of its descriptors if it is "fd", moves to host @p host
 * (hostemu_become()), maps data and super again (in the other order, so
 * that each takes the other's place in the emulator's table of files) and
 * loads the word of super at @p off: that word's low byte, or minus the
 * signal that ended it (the emulator aborts a move with a pool file in
 * hand; it says why on stderr, which the child closes, so that the test's
 * stays clean).
 */
static long long
hbecome(const char *host, long long off, const char *keep)
{
	int map = strcmp(keep, "map") == 0, fd = strcmp(keep, "fd") == 0;
	void (*become)(const char *);
	struct hfile *f;
	int st;
	pid_t pid;

	*(void **)&become = dlsym(RTLD_DEFAULT, "hostemu_become");
	if (become == NULL)
		return -1000;
	pid = fork();
	if (pid == 0) {
		for (size_t i = 0; i < sizeof(hfiles) / sizeof(hfiles[0]); i++) {
			if (!hfiles[i].name[0])
				continue;
			if (!map)
				munmap(hfiles[i].base, hfiles[i].size);
			if (!fd)
				close(hfiles[i].fd);
		}
		if (!fd)
			close(hdir);
		close(2);
		become(host);
		f = hfile("super", 0);
		if (hmap(hfile("data", 0)) || hmap(f) || off < 0 || (size_t)off + 8 > f->size)
			_exit(255);
		_exit((int)(__atomic_load_n((uint64_t *)(void *)(f->base + off),
				__ATOMIC_SEQ_CST) & 0xff));
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1001;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

static long long
hcount(const char *what)
{
	char name[64];
	unsigned long (*fn)(void);

	snprintf(name, sizeof(name), "hostemu_%s", what);
	*(void **)&fn = dlsym(RTLD_DEFAULT, name);
	return fn ? (long long)fn() : -1;
}

/* Where LMDB mapped the file, found from a key it returns: me_mapaddr is
 * the address only with MDB_FIXEDMAP. */
static char *
hmdb_map(void)
{
	unsigned long lo = 0, hi = 0, p = 0;
	MDB_val k, v;
	MDB_cursor *c;
	MDB_txn *txn;
	MDB_dbi dbi;
	char line[512];
	FILE *f;

	if (mdb_txn_begin(henv, NULL, MDB_RDONLY, &txn))
		return NULL;
	if (mdb_dbi_open(txn, NULL, 0, &dbi) == 0 && mdb_cursor_open(txn, dbi, &c) == 0) {
		if (mdb_cursor_get(c, &k, &v, MDB_FIRST) == 0)
			p = (unsigned long)k.mv_data;
		mdb_cursor_close(c);
	}
	mdb_txn_abort(txn);
	if ((f = fopen("/proc/self/maps", "r")) == NULL)
		return NULL;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= p && p < hi)
			break;
	fclose(f);
	return lo <= p && p < hi ? (char *)lo : NULL;
}

/* LMDB on the pool's registry.mdb: open, close, put, get (-1: not found)
 * and the invalidation a reader on another host needs: the meta pages
 * first, then every page the fresh meta says is in use.  LMDB opens it
 * through a link in the host's own directory, beside which it keeps its
 * lock file, as the library does for a non-coherent pool (lockdir.c). */
static long long
hmdb(const char *cmd, long long k, long long v)
{
	char path[PATH_MAX], kb[32];
	MDB_val key = { 0, kb }, val = { sizeof(v), &v };
	MDB_envinfo info;
	MDB_stat st;
	MDB_txn *txn;
	MDB_dbi dbi;
	int rc;

	key.mv_size = (size_t)snprintf(kb, sizeof(kb), "k%lld", k);
	if (strcmp(cmd, "mdb-open") == 0) {
		char pool[PATH_MAX];

		snprintf(pool, sizeof(pool), "%s/registry.mdb", getenv("HOSTEMU_POOL"));
		snprintf(path, sizeof(path), "%s/registry.mdb", getenv("MARUKV_LOCK_DIR"));
		if (symlink(pool, path) < 0 && errno != EEXIST)
			return -errno;
		if ((rc = mdb_env_create(&henv)) || (rc = mdb_env_set_mapsize(henv, 1 << 20)))
			return rc;
		return mdb_env_open(henv, path, MDB_NOSUBDIR, 0600);
	}
	if (strcmp(cmd, "mdb-close") == 0) {
		mdb_env_close(henv);
		return 0;
	}
	if (strcmp(cmd, "mdb-inval") == 0) {
		char *map = hmdb_map();

		if (map == NULL)
			return -1;
		mdb_env_stat(henv, &st);
		hooks->inval(map, 2 * st.ms_psize, "t:meta");
		mdb_env_info(henv, &info);
		hooks->inval(map, (info.me_last_pgno + 1) * st.ms_psize, "t:pages");
		return (long long)info.me_last_pgno;
	}
	if (strcmp(cmd, "mdb-put") == 0) {
		if ((rc = mdb_txn_begin(henv, NULL, 0, &txn)))
			return rc;
		if ((rc = mdb_dbi_open(txn, NULL, 0, &dbi)) ||
		    (rc = mdb_put(txn, dbi, &key, &val, 0))) {
			mdb_txn_abort(txn);
			return rc;
		}
		return mdb_txn_commit(txn);
	}
	if ((rc = mdb_txn_begin(henv, NULL, MDB_RDONLY, &txn)))
		return rc;
	if ((rc = mdb_dbi_open(txn, NULL, 0, &dbi)) == 0)
		rc = mdb_get(txn, dbi, &key, &val);
	if (rc == 0)
		memcpy(&v, val.mv_data, sizeof(v));
	mdb_txn_abort(txn);
	return rc == MDB_NOTFOUND ? -1 : rc ? rc : v;
}

/*
 * One command line; its answer into @p out.  F names a pool file mapped
 * with "map F" (super and data are from the start), OFF is a byte offset,
 * V a word:
 *   map F                          open F and map it whole
 *   st F OFF V, ld F OFF           store, load
 *   fl F OFF LEN [SITE], in ...    the hooks' flush, inval
 *   pw F OFF V, pr F OFF           pwrite, pread
 *   poll F OFF V MS                load until V is there (1) or MS ms passed (0)
 *   lock F|dir ofd|posix|flock     lock, not waiting: 0 or the errno
 *   forkclose                      hforkclose()
 *   become H OFF [map|fd]          hbecome()
 *   count written_back|refreshed|spontaneous   the emulator's counters
 *   mdb-open, mdb-close, mdb-put K V, mdb-get K, mdb-inval   hmdb()
 */
static void
host_cmd(char *line, char *out, size_t size)
{
	char cmd[16] = "", name[64] = "", word[64] = "";
	long long a = 0, b = 0, c = 0;
	struct hfile *f;
	uint64_t *w;

	sscanf(line, "%15s %63s %lli %lli %lli", cmd, name, &a, &b, &c);
	sscanf(line, "%*s %*s %*s %*s %63s", word);
	if (strncmp(cmd, "mdb-", 4) == 0) {
		snprintf(out, size, "= %lld", hmdb(cmd, strtoll(name, NULL, 0), a));
		return;
	}
	if (strcmp(cmd, "count") == 0) {
		snprintf(out, size, "= %lld", hcount(name));
		return;
	}
	if (strcmp(cmd, "forkclose") == 0) {
		snprintf(out, size, "= %lld", hforkclose());
		return;
	}
	if (strcmp(cmd, "become") == 0) {
		sscanf(line, "%*s %*s %*s %63s", word);
		snprintf(out, size, "= %lld", hbecome(name, a, word));
		return;
	}
	if (strcmp(cmd, "lock") == 0) {
		sscanf(line, "%*s %*s %63s", word);
		f = hfile(name, 0);
		snprintf(out, size, "= %lld", hlock(f ? f->fd : hdir, word));
		return;
	}
	if ((f = hfile(name, strcmp(cmd, "map") == 0)) == NULL) {
		snprintf(out, size, "! %s: no such file", name);
		return;
	}
	if (strcmp(cmd, "map") == 0) {
		snprintf(out, size, "= %lld", hmap(f));
		return;
	}
	if (f->base == NULL || a < 0 || (size_t)a + sizeof(*w) > f->size) {
		snprintf(out, size, "! %s: offset %lld outside the mapping", name, a);
		return;
	}
	w = (uint64_t *)(void *)(f->base + a);
	if (strcmp(cmd, "st") == 0) {
		__atomic_store_n(w, (uint64_t)b, __ATOMIC_SEQ_CST);
	} else if (strcmp(cmd, "ld") == 0) {
		c = (long long)__atomic_load_n(w, __ATOMIC_SEQ_CST);
	} else if (strcmp(cmd, "fl") == 0 || strcmp(cmd, "in") == 0) {
		(cmd[0] == 'f' ? hooks->flush : hooks->inval)(w, (size_t)b,
				word[0] ? word : cmd[0] == 'f' ? "t:flush" : "t:inval");
	} else if (strcmp(cmd, "pw") == 0) {
		c = pwrite(f->fd, &b, sizeof(b), a);
	} else if (strcmp(cmd, "pr") == 0) {
		c = pread(f->fd, &b, sizeof(b), a) == sizeof(b) ? b : -1;
	} else if (strcmp(cmd, "poll") == 0) {
		/* no futex, no syscall: a load the cache answers */
		double end = tu_now() + (double)c / 1000;

		while (__atomic_load_n(w, __ATOMIC_SEQ_CST) != (uint64_t)b && tu_now() < end)
			;
		c = __atomic_load_n(w, __ATOMIC_SEQ_CST) == (uint64_t)b;
	} else {
		snprintf(out, size, "! %s: unknown command", cmd);
		return;
	}
	snprintf(out, size, "= %lld", c);
}

/* argv[1] == "--host": a host's process. */
static int
host_main(void)
{
	char *pool = getenv("HOSTEMU_POOL");

	*(const void **)&hooks = dlsym(RTLD_DEFAULT, "marukv_cache_hooks");
	if (hooks == NULL || hooks->version != MKV_CACHE_HOOKS_VERSION || pool == NULL ||
	    (hdir = open(pool, O_RDONLY | O_DIRECTORY)) < 0 || hmap(hfile("super", 1)) ||
	    hmap(hfile("data", 1))) {
		fprintf(stderr, "host %s: no hooks or no pool\n", getenv("HOSTEMU_HOST"));
		return 1;
	}
	return tu_host_serve(host_cmd);
}

/* ===================================================================== */
/* The test's side                                                       */

static char *pool;

static void
hx_setup(void)
{
	static const struct { const char *name; size_t size; } files[] = {
		{ "super", SUPER_SIZE }, { "data", DATA_SIZE },
	};
	char path[PATH_MAX];
	int fd;

	tu_hosts_setup();
	pool = tu_path;
	ck_assert_int_eq(mkdir(pool, 0700), 0);
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", pool, files[i].name);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(ftruncate(fd, (off_t)files[i].size), 0);
		close(fd);
	}
}

/* A process of host @p name of the pool, with @p env added (NULL-terminated). */
static void
host_start(struct tu_host *h, const char *name, const char *const *env)
{
	tu_host_start(h, "check_hostemu", name, tu_emu, pool, env);
}

/* The device's word at @p off of @p file. */
static uint64_t
dev_word(const char *file, off_t off)
{
	char path[PATH_MAX];
	uint64_t v = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pool, file);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &v, sizeof(v), off), sizeof(v));
	close(fd);
	return v;
}

/* The inode number of the pool's @p file: its name in the emulator's state. */
static ino_t
dev_ino(const char *file)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", pool, file);
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_ino;
}

static int
exists_in(const char *dir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* ===================================================================== */
/* 1. From host to host: a flush and an invalidation, both               */

START_TEST(test_store_is_seen_after_flush_and_inval_only)
{
	struct tu_host a, b;

	host_start(&a, "A", NULL);
	host_start(&b, "B", NULL);
	tu_host_do(&a, "st data 0 0x1111");
	ck_assert_int_eq(tu_host_do(&a, "ld data 0"), 0x1111);
	ck_assert_int_eq(tu_host_do(&b, "ld data 0"), 0);
	ck_assert_int_eq(dev_word("data", 0), 0);
	/* B's invalidation without A's flush: the device has nothing new */
	tu_host_do(&b, "in data 0 64");
	ck_assert_int_eq(tu_host_do(&b, "ld data 0"), 0);
	/* A's flush without B's invalidation: B keeps its stale line */
	tu_host_do(&a, "fl data 0 8");
	ck_assert_int_eq(dev_word("data", 0), 0x1111);
	ck_assert_int_eq(tu_host_do(&b, "ld data 0"), 0);
	/* both: B sees it */
	tu_host_do(&b, "in data 0 8");
	ck_assert_int_eq(tu_host_do(&b, "ld data 0"), 0x1111);
	ck_assert_int_ge(tu_host_do(&a, "count written_back"), 1);
	ck_assert_int_ge(tu_host_do(&b, "count refreshed"), 1);
	tu_host_end(&a);
	tu_host_end(&b);
}
END_TEST

/* ===================================================================== */
/* 2. The processes of one host share its cache                          */

START_TEST(test_processes_of_one_host_share_its_cache)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct tu_host a1, a2, b;

	host_start(&a1, "A", NULL);
	host_start(&a2, "A", NULL);
	host_start(&b, "B", NULL);
	tu_host_do(&a1, "st super 8 5");
	ck_assert_int_eq(tu_host_do(&a2, "ld super 8"), 5);
	ck_assert_int_eq(dev_word("super", 8), 0);
	/* a poll on a word, answered by another process of the host */
	tu_host_send(&a2, "poll super 128 7 5000");
	tu_host_send(&b, "poll super 128 7 200");
	tu_host_do(&a1, "st super 128 7");
	ck_assert_int_eq(tu_host_recv(&a2), 1);
	ck_assert_int_eq(tu_host_recv(&b), 0);
	/* the cache is the file's, under any name (marukv renames super.new super) */
	tu_host_do(&a1, "st data 64 3");
	snprintf(from, sizeof(from), "%s/data", pool);
	snprintf(to, sizeof(to), "%s/moved", pool);
	ck_assert_int_eq(rename(from, to), 0);
	ck_assert_int_eq(tu_host_do(&a2, "map moved"), 0);
	ck_assert_int_eq(tu_host_do(&a2, "ld moved 64"), 3);
	tu_host_end(&a1);
	tu_host_end(&a2);
	tu_host_end(&b);
}
END_TEST

/* ===================================================================== */
/* 3. A write-back is a whole line                                       */

START_TEST(test_flush_writes_back_whole_lines)
{
	struct tu_host a, b;

	host_start(&a, "A", NULL);
	host_start(&b, "B", NULL);
	/* words 0 and 1 of one line: the last line written back wins whole */
	tu_host_do(&a, "st data 0 1");
	tu_host_do(&b, "st data 8 2");
	tu_host_do(&a, "fl data 0 8");
	tu_host_do(&b, "fl data 8 8");
	ck_assert_int_eq(dev_word("data", 0), 0);
	ck_assert_int_eq(dev_word("data", 8), 2);
	/* words of two lines: both stay */
	tu_host_do(&a, "st data 128 3");
	tu_host_do(&b, "st data 192 4");
	tu_host_do(&a, "fl data 128 8");
	tu_host_do(&b, "fl data 192 8");
	ck_assert_int_eq(dev_word("data", 128), 3);
	ck_assert_int_eq(dev_word("data", 192), 4);
	tu_host_end(&a);
	tu_host_end(&b);
}
END_TEST

/* ===================================================================== */
/* 4. The kernel's reads and writes are coherent with one host's cache   */

START_TEST(test_pwrite_and_pread_go_through_the_host_cache)
{
	struct tu_host a, b;

	host_start(&a, "A", NULL);
	host_start(&b, "B", NULL);
	ck_assert_int_eq(tu_host_do(&a, "pw super 256 9"), 8);
	ck_assert_int_eq(dev_word("super", 256), 9);
	ck_assert_int_eq(tu_host_do(&a, "ld super 256"), 9);
	ck_assert_int_eq(tu_host_do(&b, "ld super 256"), 0);
	ck_assert_int_eq(tu_host_do(&b, "pr super 256"), 0);
	/* a store not yet written back is what the host's pread returns */
	tu_host_do(&a, "st super 320 6");
	ck_assert_int_eq(tu_host_do(&a, "pr super 320"), 6);
	tu_host_do(&b, "in super 256 8");
	ck_assert_int_eq(tu_host_do(&b, "ld super 256"), 9);
	ck_assert_int_eq(tu_host_do(&b, "pr super 256"), 9);
	tu_host_end(&a);
	tu_host_end(&b);
}
END_TEST

/* ===================================================================== */
/* 5. Locks are per host                                                 */

START_TEST(test_locks_are_per_host)
{
	static const char *const locks[][2] = {
		{ "super", "ofd" }, { "super", "posix" }, { "super", "flock" }, { "dir", "flock" },
	};
	struct tu_host a1, a2, b;
	char twin[64];

	host_start(&a1, "A", NULL);
	host_start(&a2, "A", NULL);
	host_start(&b, "B", NULL);
	for (size_t i = 0; i < sizeof(locks) / sizeof(locks[0]); i++) {
		const char *f = locks[i][0], *kind = locks[i][1];

		ck_assert_int_eq(tu_host_do(&a1, "lock %s %s", f, kind), 0);
		ck_assert_msg(tu_host_do(&b, "lock %s %s", f, kind) == 0,
				"%s lock of %s: host B waits for host A", kind, f);
		ck_assert_msg(tu_host_do(&a2, "lock %s %s", f, kind) != 0,
				"%s lock of %s: two processes of host A both hold it", kind, f);
	}
	/* a child closing its copies of the descriptors lets go of nothing */
	ck_assert_int_eq(tu_host_do(&a1, "forkclose"), 0);
	for (size_t i = 0; i < sizeof(locks) / sizeof(locks[0]); i++)
		ck_assert_msg(tu_host_do(&a2, "lock %s %s", locks[i][0], locks[i][1]) != 0,
				"%s lock of %s: let go when a child closed its copy",
				locks[i][1], locks[i][0]);
	snprintf(twin, sizeof(twin), "A/locks/%llu", (unsigned long long)dev_ino("super"));
	ck_assert(exists_in(tu_emu, twin) && exists_in(tu_emu, "A/pooldir.lock"));
	tu_host_end(&a1);
	tu_host_end(&a2);
	tu_host_end(&b);
}
END_TEST

/* ===================================================================== */
/* 6. A skipped site does nothing; the sites are listed                  */

START_TEST(test_skipped_site_does_nothing_and_sites_are_listed)
{
	char sites[PATH_MAX + 32], skip[] = "HOSTEMU_SKIP=" SITE_SKIP, line[64];
	const char *env[] = { sites, skip, NULL };
	int seen = 0;
	struct tu_host a, b;
	FILE *f;

	snprintf(sites, sizeof(sites), "HOSTEMU_SITES=%s/sites", tu_dir);
	host_start(&a, "A", env);
	host_start(&b, "B", env);
	tu_host_do(&a, "st data 64 8");
	tu_host_do(&a, "fl data 64 8 " SITE_SKIP);
	ck_assert_int_eq(dev_word("data", 64), 0);
	tu_host_do(&a, "fl data 64 8 t:a");
	tu_host_do(&b, "in data 64 8 " SITE_SKIP);
	ck_assert_int_eq(tu_host_do(&b, "ld data 64"), 0);
	tu_host_do(&b, "in data 64 8 t:b");
	ck_assert_int_eq(tu_host_do(&b, "ld data 64"), 8);
	tu_host_end(&a);
	tu_host_end(&b);
	f = fopen(sites + strlen("HOSTEMU_SITES="), "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f) != NULL)
		seen |= (strcmp(line, SITE_SKIP "\n") == 0) | (strcmp(line, "t:a\n") == 0) << 1 |
				(strcmp(line, "t:b\n") == 0) << 2;
	fclose(f);
	ck_assert_int_eq(seen, 7);
}
END_TEST

/* ===================================================================== */
/* 7. Spontaneous write-backs and drops, and none without HOSTEMU_NOISE  */

START_TEST(test_noise_writes_back_and_drops_lines)
{
	const char *noisy[] = { "HOSTEMU_NOISE=20", "HOSTEMU_SEED=7", NULL };
	struct tu_host a, b, c;
	double end;

	host_start(&a, "A", noisy);
	host_start(&b, "B", noisy);
	host_start(&c, "C", NULL);
	/* A's store reaches the device without a flush */
	tu_host_do(&a, "st data 0 0x77");
	end = tu_now() + 10;
	while (dev_word("data", 0) != 0x77 && tu_now() < end)
		tu_sleep_ms(1);
	ck_assert_int_eq(dev_word("data", 0), 0x77);
	/* B's stale line is dropped without an invalidation */
	ck_assert_int_eq(tu_host_do(&b, "ld data 128"), 0);
	tu_host_do(&c, "st data 128 3");
	tu_host_do(&c, "fl data 128 8");
	ck_assert_int_eq(tu_host_do(&b, "poll data 128 3 10000"), 1);
	ck_assert_int_gt(tu_host_do(&a, "count spontaneous"), 0);
	/* C has no noise: its store stays in its cache */
	tu_host_do(&c, "st data 192 9");
	tu_sleep_ms(200);
	ck_assert_int_eq(dev_word("data", 192), 0);
	ck_assert_int_eq(tu_host_do(&c, "count spontaneous"), 0);
	tu_host_end(&a);
	tu_host_end(&b);
	tu_host_end(&c);
}
END_TEST

/* ===================================================================== */
/* 8. LMDB through the emulator                                          */

START_TEST(test_lmdb_reader_sees_a_commit_after_inval)
{
	struct tu_host a, b;

	host_start(&a, "A", NULL);
	host_start(&b, "B", NULL);
	ck_assert_int_eq(tu_host_do(&a, "mdb-open"), 0);
	ck_assert_int_eq(tu_host_do(&a, "mdb-put 1 11"), 0);
	/* B caches the file as it is after the first commit */
	ck_assert_int_eq(tu_host_do(&b, "map registry.mdb"), 0);
	tu_host_do(&b, "ld registry.mdb 0");
	ck_assert_int_eq(tu_host_do(&a, "mdb-put 2 22"), 0);
	ck_assert_int_eq(tu_host_do(&a, "mdb-get 2"), 22);
	ck_assert_int_eq(tu_host_do(&b, "mdb-open"), 0);
	ck_assert_int_eq(tu_host_do(&b, "mdb-get 1"), 11);
	ck_assert_int_eq(tu_host_do(&b, "mdb-get 2"), -1);
	/*
	 * A reader takes the last commit's number from its host's lock file,
	 * which A's commits do not reach: B must open the environment again to
	 * see one.  Without an invalidation that reads the stale cache again.
	 */
	tu_host_do(&b, "mdb-close");
	ck_assert_int_eq(tu_host_do(&b, "mdb-open"), 0);
	ck_assert_int_eq(tu_host_do(&b, "mdb-get 2"), -1);
	ck_assert_int_gt(tu_host_do(&b, "mdb-inval"), 0);
	tu_host_do(&b, "mdb-close");
	ck_assert_int_eq(tu_host_do(&b, "mdb-open"), 0);
	ck_assert_int_eq(tu_host_do(&b, "mdb-get 2"), 22);
	/* each host has its own reader table, none is in the pool */
	ck_assert(exists_in(tu_emu, "A/registry.mdb-lock") && exists_in(tu_emu, "B/registry.mdb-lock"));
	ck_assert(!exists_in(pool, "registry.mdb-lock"));
	tu_host_end(&a);
	tu_host_end(&b);
}
END_TEST

/* ===================================================================== */
/* 9. A forked child moves to another host's cache                       */

/*
 * A child of host B's process that moves to host A sees A's store that
 * was never written back; one of A's that moves to a new host C sees the
 * device.  A child that still has a pool file mapped or open may not move
 * at all.
 */
START_TEST(test_forked_child_becomes_another_host)
{
	struct tu_host a, b;

	host_start(&a, "A", NULL);
	host_start(&b, "B", NULL);
	tu_host_do(&a, "st super 64 0x21");
	ck_assert_int_eq(dev_word("super", 64), 0);
	ck_assert_int_eq(tu_host_do(&b, "ld super 64"), 0);
	ck_assert_int_eq(tu_host_do(&b, "become A 64"), 0x21);
	ck_assert_int_eq(tu_host_do(&a, "become C 64"), 0);
	ck_assert(exists_in(tu_emu, "C"));
	ck_assert_int_eq(tu_host_do(&b, "become A 64 map"), -SIGABRT);
	ck_assert_int_eq(tu_host_do(&b, "become A 64 fd"), -SIGABRT);
	tu_host_end(&a);
	tu_host_end(&b);
}
END_TEST

/* ===================================================================== */
/* 10. A stop at a site, continued with the caches refreshed or kept     */

/*
 * Host B, stopped at a site (HOSTEMU_STOP=@p stop) after it cached a line,
 * while host A writes the line back with a new value; continued, B loads
 * @p want from it.
 */
static void
stopped_while_another_host_writes(const char *stop, long long want)
{
	char var[64];
	const char *env[] = { var, NULL };
	struct tu_host a, b;
	int stopped;

	snprintf(var, sizeof(var), "HOSTEMU_STOP=%s", stop);
	host_start(&a, "A", NULL);
	host_start(&b, "B", env);
	ck_assert_int_eq(tu_host_do(&b, "ld data 128"), 0);
	tu_host_send(&b, "in data 0 8 t:stop");
	stopped = tu_wait_stopped(b.pid, 10);
	tu_host_do(&a, "st data 128 0x22");
	tu_host_do(&a, "fl data 128 8");
	ck_assert_int_eq(kill(b.pid, SIGCONT), 0);
	ck_assert_msg(stopped == 0, "host B did not stop at t:stop");
	tu_host_recv(&b);
	ck_assert_int_eq(tu_host_do(&b, "ld data 128"), want);
	tu_host_end(&a);
	tu_host_end(&b);
}

/* As if the host's caches had dropped every line while it was stopped. */
START_TEST(test_a_stopped_host_goes_on_with_its_lines_refreshed)
{
	stopped_while_another_host_writes("t:stop", 0x22);
}
END_TEST

/* With '!', as if they had kept every line: the stale one stays. */
START_TEST(test_a_stopped_host_keeps_its_lines_with_a_bang)
{
	stopped_while_another_host_writes("t:stop!", 0);
}
END_TEST

static Suite *
hostemu_suite(void)
{
	Suite *s = suite_create("hostemu");
	TCase *tc = tcase_create("hosts");

	tcase_add_checked_fixture(tc, hx_setup, tu_hosts_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_store_is_seen_after_flush_and_inval_only);
	tcase_add_test(tc, test_processes_of_one_host_share_its_cache);
	tcase_add_test(tc, test_flush_writes_back_whole_lines);
	tcase_add_test(tc, test_pwrite_and_pread_go_through_the_host_cache);
	tcase_add_test(tc, test_locks_are_per_host);
	tcase_add_test(tc, test_skipped_site_does_nothing_and_sites_are_listed);
	tcase_add_test(tc, test_noise_writes_back_and_drops_lines);
	tcase_add_test(tc, test_lmdb_reader_sees_a_commit_after_inval);
	tcase_add_test(tc, test_forked_child_becomes_another_host);
	tcase_add_test(tc, test_a_stopped_host_goes_on_with_its_lines_refreshed);
	tcase_add_test(tc, test_a_stopped_host_keeps_its_lines_with_a_bang);
	suite_add_tcase(s, tc);
	return s;
}

int
main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--host") == 0)
		return host_main();
	return tu_run_suite(hostemu_suite());
}
