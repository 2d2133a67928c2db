/* SPDX-License-Identifier: MIT */
/*
 * hostemu.c -- an LD_PRELOAD interposer that makes processes of one machine
 * behave as hosts sharing a memory device without cache coherence
 * (multi-host CXL), for marukv's non-coherent mode (src/cachehooks.h) and
 * t/check_hostemu.c.
 *
 * Environment (read when the object is loaded; without HOSTEMU_HOST every
 * call passes straight through):
 *   HOSTEMU_DIR    the emulator's state: the stripes (line locks) every host
 *                  shares, and a directory per host
 *   HOSTEMU_HOST   this process's host; the processes of a host share its
 *                  cache, as the CPUs of one host do
 *   HOSTEMU_POOL   the pool directory: the regular files in it are the device
 *   HOSTEMU_NOISE  spontaneous write-backs and drops of lines, per
 *                  millisecond and process (default 0: none)
 *   HOSTEMU_SEED   their random numbers (mixed with the pid)
 *   HOSTEMU_LAG    microseconds each flush waits before it writes its lines
 *                  back (default 0): a store stays in its host's cache that
 *                  long, which widens the window in which another host may
 *                  load the line's old value from the device
 *   HOSTEMU_SKIP   a site whose calls do nothing, to show that a test notices
 *   HOSTEMU_SITES  a file to which each site seen is appended, one a line
 *                  (once per process; the reader removes duplicates)
 *   HOSTEMU_STOP   part of a site's name: the first call from a site whose
 *                  name holds it (a build elsewhere than the sources names
 *                  them "../src/get.c:20") stops the process (SIGSTOP) before
 *                  it does its work, even at the site HOSTEMU_SKIP names;
 *                  once continued, every line of its mappings is refreshed,
 *                  as if its host's caches had dropped all while it was
 *                  stopped (a reader paused at a chosen point)
 *                  HOSTEMU_STOP=A>B stops at the first call from a site
 *                  whose name holds B after the first call from one whose
 *                  name holds A (left out by HOSTEMU_SKIP or not): a stop
 *                  at a site called often, right after one called at a
 *                  chosen step; A#N counts from the Nth call of A instead
 *                  (a step that comes round again, as a heartbeat does)
 *                  HOSTEMU_STOP=B! (or A>B!) continues the process with its
 *                  host's caches as they were instead: a look made before
 *                  the stop is still cached after it, so that another host
 *                  may change the line meanwhile and a look left out at B
 *                  reads the old value (caches keep a line as long as they
 *                  like: a stale read across a pause is the hardware's too)
 *
 * Host H's cache of device file F is two files of F's length in
 * HOSTEMU_DIR/H: F.cache, what H's CPUs see, and F.clean, what H last
 * exchanged with the device; a word is dirty where they differ.  F is the
 * inode number, which a rename keeps (marukv renames super.new super).  A
 * mapping of F maps F.cache instead, cached whole from then on (a CPU may
 * load any mapped line speculatively, so nobody may count on a cold miss).
 * flush writes back each line of the range with a dirty word, all 8 words:
 * two hosts storing to different words of a line undo each other's stores,
 * as on hardware.  Unlike hardware, where any store dirties its whole line,
 * a store of the value the cache already holds leaves no dirty word here,
 * so nothing to write back: the library does not count on such a store
 * reaching the device (it looks at the line first, lease.c).  inval writes back the same way, then loads the device's
 * value into each clean word with a compare-and-swap, so that a store by
 * another thread of H meanwhile stays, dirty.  A line's write-back and
 * refresh hold its stripe, a spinlock in HOSTEMU_DIR/stripes chosen by
 * (file, line).  With HOSTEMU_NOISE a thread of each process writes back
 * or drops random lines of its mappings, as caches evict on their own.
 *
 * The kernel is coherent with the caches of its own host: pwrite(), write()
 * and writev() of a device file write the device and H's cache; pread() and
 * read() return what H's cache holds.  These are the calls LMDB and
 * libpmem2 import (nm -D: no pwritev, preadv or 64-bit names).
 * ftruncate() and fallocate() change the device; the cache follows when
 * the file is next mapped or written.
 *
 * Locks are per host: flock() and fcntl() record and OFD locks of a device
 * file or of the pool directory take the same lock of a twin,
 * HOSTEMU_DIR/H/locks/F (HOSTEMU_DIR/H/pooldir.lock), opened once per
 * descriptor and closed with it, so that open-file and fork semantics stay
 * the kernel's.  Each host has its own base for the lock directories of
 * non-coherent pools: MARUKV_LOCK_DIR is HOSTEMU_DIR/H, set when a process
 * joins its host, so LMDB's reader table and mutexes are per host as the
 * library makes them on real hosts, and the emulator leaves the files
 * there alone (they are no device's).  A reader takes the last commit from
 * its host's lock file, so it sees another host's commit only in an
 * environment opened after it (and an invalidation).  A coherent pool
 * keeps LMDB's lock file in the pool's directory, a device file like the
 * others, cached per host like them.  A futex wakes the processes of its
 * host only.
 * Pool files are known by what a descriptor refers to (fstat,
 * /proc/self/fd), not by the name they were opened with.
 *
 * Controls (dlsym(RTLD_DEFAULT, ...)): hostemu_written_back(),
 * hostemu_refreshed() and hostemu_spontaneous() count this process's lines
 * written back and refreshed, and its spontaneous events.
 * hostemu_become(host) moves a process of an emulated host to another
 * host's cache (HOSTEMU_DIR/host; HOSTEMU_HOST is set to it for what it
 * executes), so that a forked child can be a host of its own: it dies
 * unless the process has no pool file mapped and no descriptor of one or
 * of the pool directory open, as a process that came to the host with
 * nothing of the device in hand.
 *
 * Not emulated: mremap() of a pool mapping (LMDB and libpmem2 use none);
 * descriptors from HE_MAXFD on, more than HE_MAXFILES pool files; the last
 * line of a file whose length is no multiple of 64; that closing any
 * descriptor of a file drops the process's record locks (here: the twin of
 * that descriptor).  A store beyond the device's end stays in the cache
 * (the device would raise SIGBUS).  A process that dies in a write-back
 * leaves the line half written; its stripe is taken over.
 *
 * Not sanitized: a sanitizer's runtime must be the first library loaded.
 * A sanitized program runs under it with ASAN_OPTIONS=verify_asan_link_order=0.
 */
#define _GNU_SOURCE
/* fortified open() and friends are inline wrappers: these are the real ones */
#undef _FORTIFY_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "cachehooks.h"

#define HE_EXPORT __attribute__((visibility("default")))

#define HE_LINE 64
#define HE_WORDS (HE_LINE / 8)
#define HE_MAXFD 4096
#define HE_MAXFILES 16
#define HE_MAXMAPS 256
#define HE_STRIPE_BITS 12
#define HE_EXTLOCKS 64
/* Each file's views (device, cache, clean): address space only. */
#define HE_VIEW (1ULL << 36)

enum he_kind { HE_UNKNOWN, HE_OTHER, HE_DEVICE = 2, HE_POOLDIR = 4 };
enum he_op { HE_FLUSH, HE_INVAL };

/* What a descriptor refers to, checked against its fstat() on each use. */
struct he_fd {
	dev_t dev;
	ino_t ino;
	int kind;
	int file;  /* HE_DEVICE: index in he_files */
	int twin;  /* the lock twin, -1 until a lock call */
};

/* A device file, and this process's views of it and of the host's cache. */
struct he_file {
	dev_t dev_no;
	ino_t ino;
	char name[24];  /* the inode number: the name in HOSTEMU_DIR */
	uint64_t key;   /* its hash: where the file's lines' stripes are */
	int dev_fd, cache_fd, clean_fd;
	unsigned char *dev, *cache, *clean;
	uint64_t dev_size;    /* as last seen; device files do not shrink */
	uint64_t cache_size;  /* the host's cache covers at least this */
};

/* A shared mapping of a device file by the program. */
struct he_map {
	uintptr_t addr;
	size_t len;
	int file;
	uint64_t off;
};

/* The real functions. */
static struct {
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	int (*openat)(int, const char *, int, ...);
	int (*close)(int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	int (*flock)(int, int);
	int (*fcntl)(int, int, ...);
} next;

static struct {
	int active;
	char root[PATH_MAX / 4];  /* HOSTEMU_DIR */
	char dir[PATH_MAX / 2];   /* HOSTEMU_DIR/HOSTEMU_HOST */
	char pool_env[PATH_MAX];  /* HOSTEMU_POOL */
	int pool_known;           /* once it exists: */
	char pool[PATH_MAX];      /* its realpath */
	size_t pool_len;
	dev_t pool_dev;
	ino_t pool_ino;
	uint64_t page;
	const char *skip;
	const char *stop;
	char stop_after[128];  /* A of HOSTEMU_STOP=A>B, "" without one */
	char stop_at[128];     /* B */
	int keep;              /* B!: no refresh once continued */
	unsigned long after_nth;  /* N of A#N, else 1 */
	unsigned long after_seen; /* calls of A so far */
	int armed;
	int stopped;
	int sites_fd;
	double noise;
	uint64_t seed;
	long lag_us;
	int noise_running;
	uint32_t *locks;  /* the stripes, then HE_EXTLOCKS growth locks */
} he = { .sites_fd = -1 };

/* Guards the tables below and the line work of this process. */
static pthread_mutex_t he_mu = PTHREAD_MUTEX_INITIALIZER;
static struct he_fd he_fds[HE_MAXFD];
static struct he_file he_files[HE_MAXFILES];
static int he_nfiles;
static struct he_map he_maps[HE_MAXMAPS];
static int he_nmaps;
static unsigned long he_nwritten, he_nrefreshed, he_nnoise;
static __thread uint32_t he_tid;
static __thread int he_errno;

unsigned long hostemu_written_back(void);
unsigned long hostemu_refreshed(void);
unsigned long hostemu_spontaneous(void);
void hostemu_become(const char *host);

/* A test set up wrongly must not pass as a coherent run. */
static void __attribute__((noreturn, format(printf, 1, 2)))
he_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("hostemu: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

static uint64_t
he_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* ---- stripes: spinlocks shared by every process of every host ---- */

static void
he_lock(uint32_t *l)
{
	unsigned spins = 0;
	uint32_t cur;

	if (he_tid == 0)
		he_tid = (uint32_t)syscall(SYS_gettid);
	for (;;) {
		cur = 0;
		if (__atomic_compare_exchange_n(l, &cur, he_tid, 0, __ATOMIC_ACQUIRE,
				__ATOMIC_RELAXED))
			return;
		if (++spins % 1024)
			continue;
		/* its holder died (tests kill processes): take it over */
		if (kill((pid_t)cur, 0) < 0 && errno == ESRCH)
			__atomic_compare_exchange_n(l, &cur, 0, 0, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED);
		sched_yield();
	}
}

static void
he_unlock(uint32_t *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static uint32_t *
he_stripe(const struct he_file *f, uint64_t off)
{
	return &he.locks[((f->key ^ off / HE_LINE) * 0x9e3779b97f4a7c15ULL) >>
			(64 - HE_STRIPE_BITS)];
}

/* ---- lines ---- */

static int
he_dev_has(struct he_file *f, uint64_t end)
{
	struct stat st;

	if (end > f->dev_size && fstat(f->dev_fd, &st) == 0)
		f->dev_size = (uint64_t)st.st_size;
	return end <= f->dev_size;
}

/* Write the line at @p off back if a word of it is dirty: all of its words. */
static void
he_writeback(struct he_file *f, uint64_t off)
{
	uint64_t *c = (uint64_t *)(void *)(f->cache + off);
	uint64_t *k = (uint64_t *)(void *)(f->clean + off);
	uint64_t *d = (uint64_t *)(void *)(f->dev + off);
	uint64_t v[HE_WORDS];
	int i, dirty = 0;

	for (i = 0; i < HE_WORDS; i++) {
		v[i] = __atomic_load_n(&c[i], __ATOMIC_RELAXED);
		dirty |= v[i] != k[i];
	}
	if (!dirty)
		return;
	for (i = 0; i < HE_WORDS; i++) {
		__atomic_store_n(&d[i], v[i], __ATOMIC_RELAXED);
		k[i] = v[i];
	}
	__atomic_add_fetch(&he_nwritten, 1, __ATOMIC_RELAXED);
}

/* Write the line back, then load the device's words in place of the clean
 * ones; a word another thread of the host stores meanwhile stays. */
static void
he_refresh(struct he_file *f, uint64_t off)
{
	uint64_t *c = (uint64_t *)(void *)(f->cache + off);
	uint64_t *k = (uint64_t *)(void *)(f->clean + off);
	uint64_t *d = (uint64_t *)(void *)(f->dev + off);
	int i, n = 0;

	he_writeback(f, off);
	for (i = 0; i < HE_WORDS; i++) {
		uint64_t dv = __atomic_load_n(&d[i], __ATOMIC_RELAXED), kv = k[i];

		if (dv != kv && __atomic_compare_exchange_n(&c[i], &kv, dv, 0, __ATOMIC_SEQ_CST,
				__ATOMIC_RELAXED)) {
			k[i] = dv;
			n++;
		}
	}
	if (n)
		__atomic_add_fetch(&he_nrefreshed, 1, __ATOMIC_RELAXED);
}

/* @p op on the lines of [off, off + len) of @p f on the device; he_mu held. */
static void
he_lines(struct he_file *f, uint64_t off, uint64_t len, enum he_op op)
{
	uint64_t line, end = off + len;

	for (line = off & ~(uint64_t)(HE_LINE - 1); line < end; line += HE_LINE) {
		uint32_t *s = he_stripe(f, line);

		if (!he_dev_has(f, line + HE_LINE))
			break;
		he_lock(s);
		if (op == HE_FLUSH)
			he_writeback(f, line);
		else
			he_refresh(f, line);
		he_unlock(s);
	}
}

/*
 * Make the host's cache of @p f cover [0, @p need) (rounded to pages): the
 * new part is filled from the device, so cache and clean agree there.
 * he_mu held; the host's other processes wait on the file's growth lock.
 */
static void
he_grow(struct he_file *f, uint64_t need)
{
	uint32_t *g = &he.locks[(1U << HE_STRIPE_BITS) + f->key % HE_EXTLOCKS];
	struct stat st;
	uint64_t o, n;

	need = (need + he.page - 1) & ~(he.page - 1);
	if (need <= f->cache_size)
		return;
	if (need > HE_VIEW)
		he_die("%s: %llu bytes are more than the emulator maps", f->name,
				(unsigned long long)need);
	he_lock(g);
	if (fstat(f->cache_fd, &st) < 0)
		he_die("%s.cache: %s", f->name, strerror(errno));
	o = (uint64_t)st.st_size;
	if (o < need) {
		if (ftruncate(f->clean_fd, (off_t)need) < 0 ||
		    ftruncate(f->cache_fd, (off_t)need) < 0)
			he_die("%s.cache: %s", f->name, strerror(errno));
		he_dev_has(f, need);
		for (; o < need && o < f->dev_size; o += HE_LINE) {
			uint32_t *s = he_stripe(f, o);

			n = f->dev_size - o < HE_LINE ? f->dev_size - o : HE_LINE;
			he_lock(s);
			memcpy(f->clean + o, f->dev + o, n);
			memcpy(f->cache + o, f->dev + o, n);
			he_unlock(s);
		}
		o = need;
	}
	f->cache_size = o;
	he_unlock(g);
}

/* The @p n bytes of @p iov just written to the device at @p off go to the
 * host's cache too, as clean.  he_mu held. */
static void
he_written(struct he_file *f, const struct iovec *iov, size_t n, uint64_t off)
{
	const unsigned char *p = iov->iov_base;
	size_t left = iov->iov_len;

	he_grow(f, off + n);
	while (n) {
		uint64_t room = HE_LINE - off % HE_LINE;
		size_t k = n < room ? n : room;
		uint32_t *s = he_stripe(f, off);

		while (left == 0) {
			iov++;
			p = iov->iov_base;
			left = iov->iov_len;
		}
		k = k < left ? k : left;
		he_lock(s);
		memcpy(f->cache + off, p, k);
		memcpy(f->clean + off, p, k);
		he_unlock(s);
		p += k, left -= k, off += k, n -= k;
	}
}

/* ---- device files and their caches ---- */

static void *
he_view(int fd, const char *what)
{
	void *p = next.mmap(NULL, HE_VIEW, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
			fd, 0);

	if (p == MAP_FAILED)
		he_die("map %s: %s", what, strerror(errno));
	return p;
}

static int
he_open_in(const char *dir, const char *name, const char *suffix)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s%s", dir, name, suffix);
	fd = next.openat(AT_FDCWD, path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		he_die("%s: %s", path, strerror(errno));
	return fd;
}

/*
 * The device file @p fd refers to (@p st), known from now on: by its inode,
 * which a rename keeps (marukv writes super.new and renames it super).
 * he_mu held.
 */
static int
he_file_get(int fd, const struct stat *st)
{
	struct he_file *f;
	char num[16];
	int i;

	for (i = 0; i < he_nfiles; i++)
		if (he_files[i].ino == st->st_ino && he_files[i].dev_no == st->st_dev)
			return i;
	if (he_nfiles == HE_MAXFILES)
		he_die("more than %d pool files", HE_MAXFILES);
	f = &he_files[he_nfiles];
	f->dev_no = st->st_dev;
	f->ino = st->st_ino;
	snprintf(f->name, sizeof(f->name), "%llu", (unsigned long long)st->st_ino);
	f->key = he_hash(f->name);
	snprintf(num, sizeof(num), "%d", fd);
	f->dev_fd = he_open_in("/proc/self/fd", num, "");
	f->cache_fd = he_open_in(he.dir, f->name, ".cache");
	f->clean_fd = he_open_in(he.dir, f->name, ".clean");
	f->dev = he_view(f->dev_fd, f->name);
	f->cache = he_view(f->cache_fd, "cache");
	f->clean = he_view(f->clean_fd, "clean");
	return he_nfiles++;
}

/* ---- mappings ---- */

static void
he_remember(uintptr_t addr, size_t len, int file, uint64_t off)
{
	if (he_nmaps == HE_MAXMAPS)
		he_die("more than %d mappings of pool files", HE_MAXMAPS);
	he_maps[he_nmaps++] = (struct he_map){ addr, len, file, off };
}

/* [a, a + len) is no longer mapped: trim, split or drop what covered it. */
static void
he_forget(uintptr_t a, size_t len)
{
	uintptr_t b = a + ((len + he.page - 1) & ~(he.page - 1));
	int i = 0;

	while (i < he_nmaps) {
		struct he_map *m = &he_maps[i];
		uintptr_t ma = m->addr, mb = m->addr + m->len;

		if (mb <= a || ma >= b) {
			i++;
			continue;
		}
		if (ma < a && mb > b)  /* a hole: the tail is a mapping of its own */
			he_remember(b, mb - b, m->file, m->off + (b - ma));
		if (ma < a) {
			m->len = a - ma;
			i++;
		} else if (mb > b) {
			m->off += b - ma;
			m->addr = b;
			m->len = mb - b;
			i++;
		} else {
			*m = he_maps[--he_nmaps];
		}
	}
}

/* ---- spontaneous write-backs and drops ---- */

static uint64_t
he_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void *
he_noise_main(void *arg)
{
	uint64_t rnd = he.seed ^ ((uint64_t)getpid() << 32);
	struct timespec tick = { 0, 1000000 };

	(void)arg;
	for (;;) {
		double frac = he.noise - (double)(uint64_t)he.noise;
		uint64_t k = (uint64_t)he.noise + ((double)(he_rand(&rnd) >> 11) * 0x1p-53 < frac);

		nanosleep(&tick, NULL);
		pthread_mutex_lock(&he_mu);
		for (; k && he_nmaps; k--) {
			const struct he_map *m = &he_maps[he_rand(&rnd) % (uint64_t)he_nmaps];
			uint64_t r = he_rand(&rnd), line = (r >> 1) % (m->len / HE_LINE);

			he_lines(&he_files[m->file], m->off + line * HE_LINE, HE_LINE,
					r & 1 ? HE_INVAL : HE_FLUSH);
			__atomic_add_fetch(&he_nnoise, 1, __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&he_mu);
	}
	return NULL;
}

/* Start the noise thread, signals blocked (they are the program's).  he_mu held. */
static void
he_noise_start(void)
{
	sigset_t all, old;
	pthread_t t;

	if (he.noise <= 0 || he.noise_running)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, he_noise_main, NULL) != 0)
		he_die("noise thread: cannot start");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_detach(t);
	he.noise_running = 1;
}

static void
he_atfork_prepare(void)
{
	pthread_mutex_lock(&he_mu);
}

static void
he_atfork_parent(void)
{
	pthread_mutex_unlock(&he_mu);
}

/* The child has the mappings but no threads: the noise goes on in it too. */
static void
he_atfork_child(void)
{
	he_tid = 0;
	if (he.noise_running) {
		he.noise_running = 0;
		he_noise_start();
	}
	pthread_mutex_unlock(&he_mu);
}

/* ---- set-up ---- */

/* The real functions, found at the first call: a sanitizer's start-up calls
 * some before any constructor has run. */
static void
he_resolve(void)
{
	if (__atomic_load_n(&next.fcntl, __ATOMIC_ACQUIRE) != NULL)
		return;
	*(void **)&next.mmap = dlsym(RTLD_NEXT, "mmap");
	*(void **)&next.munmap = dlsym(RTLD_NEXT, "munmap");
	*(void **)&next.openat = dlsym(RTLD_NEXT, "openat");
	*(void **)&next.close = dlsym(RTLD_NEXT, "close");
	*(void **)&next.read = dlsym(RTLD_NEXT, "read");
	*(void **)&next.pread = dlsym(RTLD_NEXT, "pread");
	*(void **)&next.write = dlsym(RTLD_NEXT, "write");
	*(void **)&next.writev = dlsym(RTLD_NEXT, "writev");
	*(void **)&next.pwrite = dlsym(RTLD_NEXT, "pwrite");
	*(void **)&next.flock = dlsym(RTLD_NEXT, "flock");
	__atomic_store_n((void **)&next.fcntl, dlsym(RTLD_NEXT, "fcntl"), __ATOMIC_RELEASE);
}

/* This process's host is @p host from now on: its directory, made if new,
 * and the base of its lock directories (lockdir.c). */
static void
he_host_dir(const char *host)
{
	char path[PATH_MAX];

	if (*host == '\0' || strchr(host, '/') != NULL)
		he_die("host \"%s\" is no name", host);
	snprintf(he.dir, sizeof(he.dir), "%s/%s", he.root, host);
	snprintf(path, sizeof(path), "%s/locks", he.dir);
	if ((mkdir(he.dir, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(path, 0700) < 0 && errno != EEXIST))
		he_die("%s: %s", path, strerror(errno));
	if (he.dir[0] != '/' || setenv("MARUKV_LOCK_DIR", he.dir, 1) < 0)
		he_die("MARUKV_LOCK_DIR %s: an absolute HOSTEMU_DIR is needed", he.dir);
}

/* The environment, read when this object is loaded: the C library's own
 * start-up has made it readable then, and no pool file is open yet. */
static void __attribute__((constructor))
he_setup(void)
{
	const char *dir = getenv("HOSTEMU_DIR"), *host = getenv("HOSTEMU_HOST");
	const char *pool = getenv("HOSTEMU_POOL"), *v;
	char *nth;
	size_t size = ((1U << HE_STRIPE_BITS) + HE_EXTLOCKS) * sizeof(uint32_t), n;
	int fd;

	he_resolve();
	if (host == NULL || *host == '\0')
		return;
	if (dir == NULL || pool == NULL)
		he_die("HOSTEMU_HOST without HOSTEMU_DIR and HOSTEMU_POOL");
	snprintf(he.pool_env, sizeof(he.pool_env), "%s", pool);
	he.page = (uint64_t)sysconf(_SC_PAGESIZE);
	snprintf(he.root, sizeof(he.root), "%s", dir);
	he_host_dir(host);
	fd = he_open_in(dir, "stripes", "");
	if (ftruncate(fd, (off_t)size) < 0 ||
	    (he.locks = next.mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
			MAP_FAILED)
		he_die("%s/stripes: %s", dir, strerror(errno));
	next.close(fd);
	he.skip = getenv("HOSTEMU_SKIP");
	if ((he.stop = getenv("HOSTEMU_STOP")) != NULL && (v = strchr(he.stop, '>')) != NULL) {
		if ((size_t)(v - he.stop) >= sizeof(he.stop_after))
			he_die("HOSTEMU_STOP %s: too long", he.stop);
		memcpy(he.stop_after, he.stop, (size_t)(v - he.stop));
		he.stop = v + 1;
	}
	if (he.stop != NULL) {
		if (snprintf(he.stop_at, sizeof(he.stop_at), "%s", he.stop) >=
				(int)sizeof(he.stop_at))
			he_die("HOSTEMU_STOP %s: too long", he.stop);
		n = strlen(he.stop_at);
		if (n > 0 && he.stop_at[n - 1] == '!') {
			he.stop_at[n - 1] = '\0';
			he.keep = 1;
		}
		he.stop = he.stop_at;
	}
	he.after_nth = 1;
	if ((nth = strchr(he.stop_after, '#')) != NULL) {
		*nth = '\0';
		if ((he.after_nth = strtoul(nth + 1, NULL, 10)) == 0)
			he_die("HOSTEMU_STOP: A#N counts from N = 1");
	}
	if ((v = getenv("HOSTEMU_SITES")) != NULL &&
	    (he.sites_fd = next.openat(AT_FDCWD, v, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
			0600)) < 0)
		he_die("HOSTEMU_SITES %s: %s", v, strerror(errno));
	if ((v = getenv("HOSTEMU_NOISE")) != NULL)
		he.noise = strtod(v, NULL);
	if ((v = getenv("HOSTEMU_SEED")) != NULL)
		he.seed = strtoull(v, NULL, 0);
	if ((v = getenv("HOSTEMU_LAG")) != NULL)
		he.lag_us = strtol(v, NULL, 0);
	pthread_atfork(he_atfork_prepare, he_atfork_parent, he_atfork_child);
	__atomic_store_n(&he.active, 1, __ATOMIC_RELEASE);
}

/* 1 if this process is on an emulated host; the real functions are known. */
static int
he_on(void)
{
	he_resolve();
	return __atomic_load_n(&he.active, __ATOMIC_ACQUIRE);
}

/* 1 once the pool directory exists (the library may create it), and what
 * it is known. */
static int
he_pool(void)
{
	char real[PATH_MAX];
	struct stat st;

	if (__atomic_load_n(&he.pool_known, __ATOMIC_ACQUIRE))
		return 1;
	if (realpath(he.pool_env, real) == NULL || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	pthread_mutex_lock(&he_mu);
	if (!he.pool_known) {
		memcpy(he.pool, real, sizeof(real));
		he.pool_len = strlen(real);
		he.pool_dev = st.st_dev;
		he.pool_ino = st.st_ino;
		__atomic_store_n(&he.pool_known, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&he_mu);
	return 1;
}

/* ---- descriptors ---- */

/* Forget what @p e was; its twin is closed.  he_mu held. */
static void
he_fd_reset(struct he_fd *e)
{
	if (e->kind != HE_UNKNOWN && e->twin >= 0)
		next.close(e->twin);
	e->kind = HE_UNKNOWN;
}

/*
 * The entry of @p fd, with he_mu held, if it is one of @p kinds; else NULL,
 * he_mu not held.  errno is kept for he_fd_unlock() to restore.
 */
static struct he_fd *
he_fd_lock(int fd, int kinds)
{
	char link[32], path[PATH_MAX];
	struct stat st;
	struct he_fd *e;
	ssize_t n;

	he_errno = errno;
	if (!he_on() || fd < 0 || fd >= HE_MAXFD || !he_pool() || fstat(fd, &st) < 0 ||
	    st.st_dev != he.pool_dev) {
		errno = he_errno;
		return NULL;
	}
	pthread_mutex_lock(&he_mu);
	e = &he_fds[fd];
	if (e->kind == HE_UNKNOWN || e->dev != st.st_dev || e->ino != st.st_ino) {
		/* new, or closed and reused behind our back */
		he_fd_reset(e);
		*e = (struct he_fd){ .dev = st.st_dev, .ino = st.st_ino, .kind = HE_OTHER,
				.twin = -1 };
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		if (S_ISDIR(st.st_mode) && st.st_ino == he.pool_ino) {
			e->kind = HE_POOLDIR;
		} else if (S_ISREG(st.st_mode) &&
			   (n = readlink(link, path, sizeof(path) - 1)) > 0) {
			path[n] = '\0';
			if (strncmp(path, he.pool, he.pool_len) == 0 && path[he.pool_len] == '/' &&
			    strchr(path + he.pool_len + 1, '/') == NULL) {
				e->file = he_file_get(fd, &st);
				e->kind = HE_DEVICE;
			}
		}
	}
	if (e->kind & kinds)
		return e;
	pthread_mutex_unlock(&he_mu);
	errno = he_errno;
	return NULL;
}

static void
he_fd_unlock(void)
{
	pthread_mutex_unlock(&he_mu);
	errno = he_errno;
}

/* The twin of @p e for lock calls, opened on first use. */
static int
he_twin(struct he_fd *e)
{
	if (e->twin < 0)
		e->twin = e->kind == HE_POOLDIR ? he_open_in(he.dir, "pooldir.lock", "") :
				he_open_in(he.dir, "locks/", he_files[e->file].name);
	return e->twin;
}

/* ---- the hooks ---- */

/* Append @p site to HOSTEMU_SITES the first time this process sees it. */
static void
he_site(const char *site)
{
	static uint64_t seen[512];
	uint64_t h = he_hash(site) | 1, cur;
	char buf[256];
	unsigned i;
	int n;

	if (he.sites_fd < 0)
		return;
	for (i = 0; i < 512; i++) {
		uint64_t *s = &seen[(h + i) % 512];

		cur = 0;
		if (__atomic_compare_exchange_n(s, &cur, h, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
		if (cur == h)
			return;
	}
	n = snprintf(buf, sizeof(buf), "%s\n", site);
	if (n > 0 && (size_t)n < sizeof(buf))
		(void)!next.write(he.sites_fd, buf, (size_t)n);
}

/* HOSTEMU_STOP: stopped, then continued with every mapped line refreshed (but with B!). */
static void
he_stop(void)
{
	raise(SIGSTOP);
	if (he.keep)
		return;
	pthread_mutex_lock(&he_mu);
	for (int i = 0; i < he_nmaps; i++)
		he_lines(&he_files[he_maps[i].file], he_maps[i].off, he_maps[i].len, HE_INVAL);
	pthread_mutex_unlock(&he_mu);
}

/* @p op on the lines of [addr, addr + len) that map device files; the rest
 * of memory is the host's own, coherent. */
static void
he_range(const void *addr, size_t len, const char *site, enum he_op op)
{
	uintptr_t a = (uintptr_t)addr, b = a + len;
	int i, arming, err = errno;

	if (!he_on())
		return;
	site = site ? site : "";
	he_site(site);
	arming = *he.stop_after && strstr(site, he.stop_after) != NULL &&
		__atomic_add_fetch(&he.after_seen, 1, __ATOMIC_SEQ_CST) == he.after_nth;
	if (arming)
		__atomic_store_n(&he.armed, 1, __ATOMIC_SEQ_CST);
	/* a site left out is still reached: a test that stops there must stop */
	if (!arming && he.stop != NULL && strstr(site, he.stop) != NULL &&
	    (!*he.stop_after || __atomic_load_n(&he.armed, __ATOMIC_SEQ_CST)) &&
	    !__atomic_exchange_n(&he.stopped, 1, __ATOMIC_SEQ_CST))
		he_stop();
	if (he.skip != NULL && strcmp(site, he.skip) == 0)
		return;
	pthread_mutex_lock(&he_mu);
	for (i = 0; i < he_nmaps; i++) {
		const struct he_map *m = &he_maps[i];
		uintptr_t lo = a > m->addr ? a : m->addr;
		uintptr_t hi = b < m->addr + m->len ? b : m->addr + m->len;

		if (lo < hi)
			he_lines(&he_files[m->file], m->off + (lo - m->addr), hi - lo, op);
	}
	pthread_mutex_unlock(&he_mu);
	errno = err;
}

static void
he_inval(const void *addr, size_t len, const char *site)
{
	he_range(addr, len, site, HE_INVAL);
}

static void
he_flush(const void *addr, size_t len, const char *site)
{
	struct timespec lag = { he.lag_us / 1000000, he.lag_us % 1000000 * 1000 };

	if (he.lag_us > 0 && he_on())
		nanosleep(&lag, NULL);
	he_range(addr, len, site, HE_FLUSH);
}

HE_EXPORT const struct mkv_cache_hooks marukv_cache_hooks = {
	.version = MKV_CACHE_HOOKS_VERSION,
	.inval = he_inval,
	.flush = he_flush,
};

HE_EXPORT unsigned long
hostemu_written_back(void)
{
	return __atomic_load_n(&he_nwritten, __ATOMIC_RELAXED);
}

HE_EXPORT unsigned long
hostemu_refreshed(void)
{
	return __atomic_load_n(&he_nrefreshed, __ATOMIC_RELAXED);
}

HE_EXPORT unsigned long
hostemu_spontaneous(void)
{
	return __atomic_load_n(&he_nnoise, __ATOMIC_RELAXED);
}

/*
 * The host's cache this process sees is @p host's from now on.  The views
 * of the old host's cache files go (they are no mapping of the program's),
 * which is sound only if the program holds nothing of the device: a
 * mapping would keep the old host's lines, a descriptor its locks.
 */
HE_EXPORT void
hostemu_become(const char *host)
{
	struct stat st;
	int fd, i;

	if (!he_on())
		he_die("hostemu_become(%s) in a process of no host (HOSTEMU_HOST unset)", host);
	pthread_mutex_lock(&he_mu);
	if (he_nmaps != 0)
		he_die("hostemu_become(%s) with %d mappings of pool files", host, he_nmaps);
	for (fd = 0; fd < HE_MAXFD; fd++) {
		struct he_fd *e = &he_fds[fd];

		if (e->kind != HE_DEVICE && e->kind != HE_POOLDIR)
			continue;
		if (fstat(fd, &st) == 0 && st.st_dev == e->dev && st.st_ino == e->ino)
			he_die("hostemu_become(%s) with descriptor %d of the pool open", host, fd);
		he_fd_reset(e);
	}
	for (i = 0; i < he_nfiles; i++) {
		struct he_file *f = &he_files[i];

		next.munmap(f->dev, HE_VIEW);
		next.munmap(f->cache, HE_VIEW);
		next.munmap(f->clean, HE_VIEW);
		next.close(f->dev_fd);
		next.close(f->cache_fd);
		next.close(f->clean_fd);
	}
	/* what was known of the old host's cache, its size too */
	memset(he_files, 0, sizeof(he_files));
	he_nfiles = 0;
	he_host_dir(host);
	if (setenv("HOSTEMU_HOST", host, 1) < 0)
		he_die("HOSTEMU_HOST: %s", strerror(errno));
	pthread_mutex_unlock(&he_mu);
}

/* ---- mmap, munmap ---- */

HE_EXPORT void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	int on = he_on(), shared = (flags & MAP_TYPE) != MAP_PRIVATE, acc;
	struct he_fd *e = (flags & MAP_ANONYMOUS) ? NULL : he_fd_lock(fd, HE_DEVICE);
	struct he_file *f;
	void *p;

	if (e == NULL) {
		p = next.mmap(addr, len, prot, flags, fd, off);
		if (p != MAP_FAILED && (flags & MAP_FIXED) && on) {
			pthread_mutex_lock(&he_mu);
			he_forget((uintptr_t)p, len);
			pthread_mutex_unlock(&he_mu);
		}
		return p;
	}
	/* what the kernel checks against the descriptor we do not pass it */
	acc = next.fcntl(fd, F_GETFL) & O_ACCMODE;
	if (acc == O_WRONLY || (shared && (prot & PROT_WRITE) && acc != O_RDWR)) {
		he_fd_unlock();
		errno = EACCES;
		return MAP_FAILED;
	}
	f = &he_files[e->file];
	he_grow(f, (uint64_t)off + len);
	p = next.mmap(addr, len, prot, flags, f->cache_fd, off);
	he_errno = errno;
	if (p != MAP_FAILED) {
		he_forget((uintptr_t)p, len);
		if (shared) {
			he_remember((uintptr_t)p, (len + he.page - 1) & ~(he.page - 1), e->file,
					(uint64_t)off);
			he_noise_start();
		}
	}
	he_fd_unlock();
	return p;
}

HE_EXPORT int
munmap(void *addr, size_t len)
{
	int rc = (he_on(), next.munmap(addr, len));

	if (rc == 0 && he.active) {
		pthread_mutex_lock(&he_mu);
		he_forget((uintptr_t)addr, len);
		pthread_mutex_unlock(&he_mu);
	}
	return rc;
}

/* ---- close ---- */

HE_EXPORT int
close(int fd)
{
	if (he_on() && fd >= 0 && fd < HE_MAXFD) {
		pthread_mutex_lock(&he_mu);
		he_fd_reset(&he_fds[fd]);
		pthread_mutex_unlock(&he_mu);
	}
	return next.close(fd);
}

/* ---- the kernel's reads and writes: coherent with this host's cache ---- */

/* @p r bytes were just read into @p buf at @p off (-1: before the file
 * offset): the host's cache has them where it covers them. */
static void
he_read_done(int fd, void *buf, ssize_t r, off_t off)
{
	struct he_fd *e = r > 0 ? he_fd_lock(fd, HE_DEVICE) : NULL;
	struct he_file *f;
	struct stat st;
	uint64_t o, n = (uint64_t)r;

	if (e == NULL)
		return;
	f = &he_files[e->file];
	o = off < 0 ? (uint64_t)lseek(fd, 0, SEEK_CUR) - n : (uint64_t)off;
	if (fstat(f->cache_fd, &st) == 0 && o < (uint64_t)st.st_size)
		memcpy(buf, f->cache + o, n < (uint64_t)st.st_size - o ? n :
				(uint64_t)st.st_size - o);
	he_fd_unlock();
}

static void
he_write_done(int fd, const struct iovec *iov, ssize_t r, off_t off)
{
	struct he_fd *e = r > 0 ? he_fd_lock(fd, HE_DEVICE) : NULL;

	if (e == NULL)
		return;
	if (off < 0)
		off = lseek(fd, 0, SEEK_CUR) - r;
	he_written(&he_files[e->file], iov, (size_t)r, (uint64_t)off);
	he_fd_unlock();
}

HE_EXPORT ssize_t
read(int fd, void *buf, size_t n)
{
	ssize_t r = (he_on(), next.read(fd, buf, n));

	he_read_done(fd, buf, r, -1);
	return r;
}

HE_EXPORT ssize_t
pread(int fd, void *buf, size_t n, off_t off)
{
	ssize_t r = (he_on(), next.pread(fd, buf, n, off));

	he_read_done(fd, buf, r, off);
	return r;
}

HE_EXPORT ssize_t
write(int fd, const void *buf, size_t n)
{
	struct iovec iov = { (void *)buf, n };
	ssize_t r = (he_on(), next.write(fd, buf, n));

	he_write_done(fd, &iov, r, -1);
	return r;
}

HE_EXPORT ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
	ssize_t r = (he_on(), next.writev(fd, iov, cnt));

	he_write_done(fd, iov, r, -1);
	return r;
}

HE_EXPORT ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
	struct iovec iov = { (void *)buf, n };
	ssize_t r = (he_on(), next.pwrite(fd, buf, n, off));

	he_write_done(fd, &iov, r, off);
	return r;
}

/* ---- locks: on the host's twin ---- */

HE_EXPORT int
flock(int fd, int op)
{
	struct he_fd *e = he_fd_lock(fd, HE_DEVICE | HE_POOLDIR);
	int t;

	if (e == NULL)
		return next.flock(fd, op);
	t = he_twin(e);
	he_fd_unlock();
	return next.flock(t, op);
}

/* Every command's argument, int or pointer, travels as a pointer-sized word. */
HE_EXPORT int
fcntl(int fd, int cmd, ...)
{
	struct he_fd *e = NULL;
	va_list ap;
	void *arg;
	int t;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	switch (cmd) {
	case F_GETLK: case F_SETLK: case F_SETLKW:
	case F_OFD_GETLK: case F_OFD_SETLK: case F_OFD_SETLKW:
		e = he_fd_lock(fd, HE_DEVICE | HE_POOLDIR);
		break;
	}
	if (e == NULL)
		return (he_on(), next.fcntl(fd, cmd, arg));
	t = he_twin(e);
	he_fd_unlock();
	return next.fcntl(t, cmd, arg);
}
