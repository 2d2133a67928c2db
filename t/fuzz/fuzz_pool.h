/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/fuzz_pool.h -- a small real pool for the fuzz targets that feed
 * the library what it reads from a pool (pool_super.c, pool_registry.c,
 * pool_requests.c).
 *
 * fuzz_pool_init() creates the pool once, on tmpfs, with a few values,
 * chains, deletes and a quarantine record in it, closes it and keeps its
 * three files as images.  Before each input a target restores the images
 * (fuzz_pool_restore()), damages or feeds what it fuzzes, and runs
 * fuzz_pool_use(): every public call a user or the tools would make on
 * the pool, each of whose results must be a code that call documents.  A
 * result that is not aborts, as a crash would: libFuzzer reports both with
 * the input.  The library is compiled into the target, so its checks of
 * what it reads are what is fuzzed, with ASan and UBSan watching.
 */
#ifndef MKV_FUZZ_POOL_H
#define MKV_FUZZ_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "fuzz_check.h"
#include "marukv.h"

#define FUZZ_PAGE 4096U
#define FUZZ_PAGES 16U
#define FUZZ_CLIENTS 4U
#define FUZZ_NODES 2U
#define FUZZ_KEYS 6U      /* keys "k0".."k5" published; "k1" deleted */

#define FUZZ_CHECK(cond) FUZZ_CHECK_WHY(cond, mkv_errormsg())

struct fuzz_pool {
	char dir[64];             /* the pool directory */
	char super[96], registry[96], lock[96], data[96];
	uint8_t *img[3];          /* images of super, registry.mdb, data */
	size_t len[3];
	uint64_t registry_size;
};

/* Make the pool and its images (aborts on failure); remove it at exit. */
void fuzz_pool_init(struct fuzz_pool *fp);
/* Write the images back over the pool's files. */
void fuzz_pool_restore(const struct fuzz_pool *fp);
/* Overwrite n bytes of file i (0 super, 1 registry.mdb, 2 data) at off. */
void fuzz_pool_write(const struct fuzz_pool *fp, int i, uint64_t off, const void *buf, size_t n);
/*
 * Use the pool as every caller would: open it (read-only or not), stat,
 * list the clients, verify deeply, read, write, delete, reclaim, evict,
 * close.  Returns mkv_pool_verify()'s result on the open handle (0 clean,
 * MKV_E_CORRUPT problems), or the open's error.
 */
int fuzz_pool_use(const struct fuzz_pool *fp, int rdonly);

#endif
