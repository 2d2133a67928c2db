/* SPDX-License-Identifier: MIT */
/*
 * faultinject.c -- an LD_PRELOAD interposer that makes one function fail,
 * for t/check_faults.c.
 *
 * Environment (read on the first call):
 *   FI_FUNC  the function: malloc, calloc, realloc, mmap, mdb_txn_begin,
 *            mdb_put, mdb_txn_commit, mdb_env_open
 *   FI_NTH   fail its k-th call (counted from fi_arm(); 0: only count)
 *   FI_MODE  once (default): only the k-th call fails; persistent: the k-th
 *            and every later call fail
 *   FI_SPARE "libpmem2": malloc, calloc and realloc called while a libpmem2
 *            call is running (pmem2_map_new, pmem2_source_from_fd...: wrapped
 *            here) are neither counted nor failed -- libpmem2 aborts or
 *            crashes when its own allocations (or libc's fts_open inside
 *            it) fail, which no caller can prevent
 *
 * Nothing is counted until the program calls fi_arm() (found with
 * dlsym(RTLD_DEFAULT, "fi_arm")), so the faults land in the library under
 * test, not in the dynamic loader or libc's start-up; fi_disarm() stops
 * counting and failing; fi_calls() and fi_failed() say how many calls
 * were counted and failed.
 *
 * A failing call returns what its documentation says: NULL with errno
 * ENOMEM (malloc, calloc, realloc: the old block is kept), MAP_FAILED with
 * ENOMEM (mmap), ENOMEM (mdb_txn_begin, mdb_put), EIO (mdb_txn_commit: the
 * transaction is aborted, as LMDB frees it on any commit failure;
 * mdb_env_open).
 *
 * dlsym() may itself call calloc() or malloc() before the real allocator
 * is known: those requests are served from a static buffer, and free()
 * and realloc() recognise its blocks.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

#define FI_EXPORT __attribute__((visibility("default")))

enum fi_func {
	FI_NONE = -1, FI_MALLOC, FI_CALLOC, FI_REALLOC, FI_MMAP, FI_TXN_BEGIN, FI_PUT,
	FI_TXN_COMMIT, FI_ENV_OPEN
};
/* The control functions (no header: found with dlsym) and the wrapped LMDB
 * calls, with opaque pointers (no lmdb.h needed). */
typedef struct fi_env fi_env;
typedef struct fi_txn fi_txn;
void fi_arm(void);
void fi_disarm(void);
unsigned long fi_calls(void);
unsigned long fi_failed(void);
unsigned long fi_spared_calls(void);
int mdb_txn_begin(fi_env *env, fi_txn *parent, unsigned flags, fi_txn **txn);
int mdb_put(fi_txn *txn, unsigned dbi, void *key, void *data, unsigned flags);
int mdb_txn_commit(fi_txn *txn);
int mdb_env_open(fi_env *env, const char *path, unsigned flags, unsigned mode);
int pmem2_config_new(void **cfg);
int pmem2_source_from_fd(void **src, int fd);
int pmem2_map_new(void **map, const void *cfg, const void *src);
int pmem2_map_delete(void **map);

static const char *const fi_names[] = {
	"malloc", "calloc", "realloc", "mmap", "mdb_txn_begin", "mdb_put", "mdb_txn_commit",
	"mdb_env_open",
};

static int fi_inited;            /* 0 no, 1 being read, 2 done */
static int fi_func = FI_NONE;
static unsigned long fi_nth;
static int fi_persistent;
static int fi_spare_pmem2;
static unsigned long fi_nspared;
static __thread int fi_in_pmem2;   /* depth of wrapped libpmem2 calls */
static int fi_armed;
static unsigned long fi_count;
static unsigned long fi_nfailed;

/* ---- configuration ---- */

static void
fi_init(void)
{
	const char *f, *n, *m;
	int expected = 0;
	size_t i;

	if (__atomic_load_n(&fi_inited, __ATOMIC_ACQUIRE) == 2)
		return;
	if (!__atomic_compare_exchange_n(&fi_inited, &expected, 1, 0, __ATOMIC_SEQ_CST,
			__ATOMIC_SEQ_CST))
		return;  /* another thread (or a recursive call) is reading it */
	/* getenv() does not allocate */
	f = getenv("FI_FUNC");
	n = getenv("FI_NTH");
	m = getenv("FI_MODE");
	if (f != NULL)
		for (i = 0; i < sizeof(fi_names) / sizeof(fi_names[0]); i++)
			if (strcmp(f, fi_names[i]) == 0)
				fi_func = (int)i;
	if (n != NULL) {
		unsigned long v = 0;

		for (; *n >= '0' && *n <= '9'; n++)
			v = v * 10 + (unsigned long)(*n - '0');
		fi_nth = v;
	}
	fi_persistent = m != NULL && strcmp(m, "persistent") == 0;
	f = getenv("FI_SPARE");
	fi_spare_pmem2 = f != NULL && strcmp(f, "libpmem2") == 0;
	__atomic_store_n(&fi_inited, 2, __ATOMIC_RELEASE);
}

/* Count a call of @p f; 1 if it is to fail. */
static int
fi_hit(int f)
{
	unsigned long k;

	fi_init();
	if (f != fi_func || !__atomic_load_n(&fi_armed, __ATOMIC_ACQUIRE))
		return 0;
	if (f <= FI_REALLOC && fi_spare_pmem2 && fi_in_pmem2) {
		__atomic_add_fetch(&fi_nspared, 1, __ATOMIC_SEQ_CST);
		return 0;
	}
	k = __atomic_add_fetch(&fi_count, 1, __ATOMIC_SEQ_CST);
	if (fi_nth == 0 || k < fi_nth || (k > fi_nth && !fi_persistent))
		return 0;
	__atomic_add_fetch(&fi_nfailed, 1, __ATOMIC_SEQ_CST);
	return 1;
}

FI_EXPORT void
fi_arm(void)
{
	fi_init();
	__atomic_store_n(&fi_armed, 1, __ATOMIC_SEQ_CST);
}

FI_EXPORT void
fi_disarm(void)
{
	__atomic_store_n(&fi_armed, 0, __ATOMIC_SEQ_CST);
}

FI_EXPORT unsigned long
fi_calls(void)
{
	return __atomic_load_n(&fi_count, __ATOMIC_SEQ_CST);
}

FI_EXPORT unsigned long
fi_failed(void)
{
	return __atomic_load_n(&fi_nfailed, __ATOMIC_SEQ_CST);
}

FI_EXPORT unsigned long
fi_spared_calls(void)
{
	return __atomic_load_n(&fi_nspared, __ATOMIC_SEQ_CST);
}

/* ---- the allocator ---- */

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int fi_resolving;

/* Blocks for dlsym's own allocations, before the real ones are known. */
static _Alignas(16) unsigned char boot_buf[16384];
static size_t boot_used;

static int
is_boot(const void *p)
{
	return (const unsigned char *)p >= boot_buf &&
		(const unsigned char *)p < boot_buf + sizeof(boot_buf);
}

static void *
boot_alloc(size_t n)
{
	size_t off = __atomic_fetch_add(&boot_used, (n + 31) & ~(size_t)15, __ATOMIC_SEQ_CST);
	size_t *hdr;

	if (off + ((n + 31) & ~(size_t)15) > sizeof(boot_buf))
		return NULL;
	hdr = (size_t *)(void *)(boot_buf + off);
	*hdr = n;                 /* the size, for realloc */
	return boot_buf + off + 16;  /* zeroed: the buffer is static */
}

static void
fi_resolve_alloc(void)
{
	if (real_malloc != NULL && real_calloc != NULL && real_realloc != NULL &&
	    real_free != NULL)
		return;
	fi_resolving = 1;
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	fi_resolving = 0;
}

FI_EXPORT void *
malloc(size_t n)
{
	if (real_malloc == NULL) {
		if (fi_resolving)
			return boot_alloc(n);
		fi_resolve_alloc();
		if (real_malloc == NULL)
			return boot_alloc(n);
	}
	if (fi_hit(FI_MALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return real_malloc(n);
}

FI_EXPORT void *
calloc(size_t n, size_t size)
{
	if (real_calloc == NULL) {
		if (size && n > SIZE_MAX / size)
			return NULL;
		if (fi_resolving)
			return boot_alloc(n * size);
		fi_resolve_alloc();
		if (real_calloc == NULL)
			return boot_alloc(n * size);
	}
	if (fi_hit(FI_CALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return real_calloc(n, size);
}

FI_EXPORT void *
realloc(void *p, size_t n)
{
	void *q;

	if (p != NULL && is_boot(p)) {
		size_t old = *(size_t *)(void *)((unsigned char *)p - 16);

		q = malloc(n);
		if (q != NULL)
			memcpy(q, p, old < n ? old : n);
		return q;
	}
	if (real_realloc == NULL) {
		if (fi_resolving)
			return p == NULL ? boot_alloc(n) : NULL;
		fi_resolve_alloc();
		if (real_realloc == NULL)
			return NULL;
	}
	if (fi_hit(FI_REALLOC)) {
		errno = ENOMEM;
		return NULL;
	}
	return real_realloc(p, n);
}

FI_EXPORT void
free(void *p)
{
	if (p == NULL || is_boot(p))
		return;
	if (real_free == NULL)
		fi_resolve_alloc();
	if (real_free != NULL)
		real_free(p);
}

/* ---- mmap ---- */

FI_EXPORT void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	static void *(*real)(void *, size_t, int, int, int, off_t);

	if (real == NULL)
		real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
	if (fi_hit(FI_MMAP)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	return real(addr, len, prot, flags, fd, off);
}

#if defined(__LP64__) || defined(_LP64)
/* On LP64 glibc, mmap64 is another name of mmap: give it the same wrapper.
 * (Elsewhere it would need one of its own; it is then left alone.) */
FI_EXPORT void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}
#endif

/* ---- LMDB ---- */

FI_EXPORT int
mdb_txn_begin(fi_env *env, fi_txn *parent, unsigned flags, fi_txn **txn)
{
	static int (*real)(fi_env *, fi_txn *, unsigned, fi_txn **);

	if (real == NULL)
		real = (int (*)(fi_env *, fi_txn *, unsigned, fi_txn **))dlsym(RTLD_NEXT,
				"mdb_txn_begin");
	if (fi_hit(FI_TXN_BEGIN))
		return ENOMEM;
	return real(env, parent, flags, txn);
}

FI_EXPORT int
mdb_put(fi_txn *txn, unsigned dbi, void *key, void *data, unsigned flags)
{
	static int (*real)(fi_txn *, unsigned, void *, void *, unsigned);

	if (real == NULL)
		real = (int (*)(fi_txn *, unsigned, void *, void *, unsigned))dlsym(RTLD_NEXT,
				"mdb_put");
	if (fi_hit(FI_PUT))
		return ENOMEM;
	return real(txn, dbi, key, data, flags);
}

FI_EXPORT int
mdb_txn_commit(fi_txn *txn)
{
	static int (*real)(fi_txn *);
	static void (*abort_txn)(fi_txn *);

	if (real == NULL) {
		real = (int (*)(fi_txn *))dlsym(RTLD_NEXT, "mdb_txn_commit");
		abort_txn = (void (*)(fi_txn *))dlsym(RTLD_NEXT, "mdb_txn_abort");
	}
	if (fi_hit(FI_TXN_COMMIT)) {
		/* LMDB frees the transaction whether the commit worked or not */
		abort_txn(txn);
		return EIO;
	}
	return real(txn);
}

FI_EXPORT int
mdb_env_open(fi_env *env, const char *path, unsigned flags, unsigned mode)
{
	static int (*real)(fi_env *, const char *, unsigned, unsigned);

	if (real == NULL)
		real = (int (*)(fi_env *, const char *, unsigned, unsigned))dlsym(RTLD_NEXT,
				"mdb_env_open");
	if (fi_hit(FI_ENV_OPEN))
		return EIO;
	return real(env, path, flags, mode);
}

/* ---- libpmem2: only marked, for FI_SPARE ---- */

#define FI_PMEM2_WRAP(name, params, args) \
FI_EXPORT int \
name params \
{ \
	static int (*real) params; \
	int rc; \
\
	if (real == NULL) \
		*(void **)&real = dlsym(RTLD_NEXT, #name); \
	fi_in_pmem2++; \
	rc = real args; \
	fi_in_pmem2--; \
	return rc; \
}

FI_PMEM2_WRAP(pmem2_config_new, (void **cfg), (cfg))
FI_PMEM2_WRAP(pmem2_source_from_fd, (void **src, int fd), (src, fd))
FI_PMEM2_WRAP(pmem2_map_new, (void **map, const void *cfg, const void *src), (map, cfg, src))
FI_PMEM2_WRAP(pmem2_map_delete, (void **map), (map))
