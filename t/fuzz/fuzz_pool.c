/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/fuzz_pool.c -- the small real pool the pool_* fuzz targets feed
 * (see fuzz_pool.h).
 */
#define _GNU_SOURCE
#include "fuzz_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];
static volatile uint8_t sink;  /* where the bytes of views are read to */

static void
cleanup(void)
{
	char cmd[128];

	if (!tmpdir[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz: could not remove %s\n", tmpdir);
}

static uint8_t *
slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	FUZZ_CHECK(fd >= 0 && fstat(fd, &st) == 0);
	buf = malloc((size_t)st.st_size);
	FUZZ_CHECK(buf != NULL);
	FUZZ_CHECK(pread(fd, buf, (size_t)st.st_size, 0) == st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static int
open_opts(const struct fuzz_pool *fp, unsigned flags, struct mkv_pool **pool)
{
	struct mkv_opts *o;
	int rc;

	FUZZ_CHECK(mkv_opts_new(&o) == 0);
	FUZZ_CHECK(mkv_opts_set_page_size(o, FUZZ_PAGE) == 0);
	FUZZ_CHECK(mkv_opts_set_data_size(o, (uint64_t)FUZZ_PAGE * FUZZ_PAGES) == 0);
	FUZZ_CHECK(mkv_opts_set_max_clients(o, FUZZ_CLIENTS) == 0);
	FUZZ_CHECK(mkv_opts_set_max_nodes(o, FUZZ_NODES) == 0);
	FUZZ_CHECK(mkv_opts_set_registry_size(o, 1U << 20) == 0);
	FUZZ_CHECK(mkv_opts_set_lease_period(o, 50) == 0);
	FUZZ_CHECK(mkv_opts_set_client_timeout(o, 100) == 0);
	FUZZ_CHECK(mkv_opts_set_node(o, "fuzz") == 0);
	rc = mkv_pool_open(fp->dir, flags, o, pool);
	mkv_opts_delete(&o);
	return rc;
}

void
fuzz_pool_init(struct fuzz_pool *fp)
{
	static const char *const chain[] = { "c0", "c1", "c2" };
	struct mkv_key keys[3];
	struct mkv_buf bufs[3];
	static char value[1 + (FUZZ_KEYS - 1) * 1000];
	struct mkv_pool *pool;
	char key[8];

	memset(fp, 0, sizeof(*fp));
	snprintf(tmpdir, sizeof(tmpdir), "/dev/shm/mkvfuzz.XXXXXX");
	FUZZ_CHECK(mkdtemp(tmpdir) != NULL);
	atexit(cleanup);
	snprintf(fp->dir, sizeof(fp->dir), "%s/pool", tmpdir);
	snprintf(fp->super, sizeof(fp->super), "%s/super", fp->dir);
	snprintf(fp->registry, sizeof(fp->registry), "%s/registry.mdb", fp->dir);
	snprintf(fp->lock, sizeof(fp->lock), "%s/registry.mdb-lock", fp->dir);
	snprintf(fp->data, sizeof(fp->data), "%s/data", fp->dir);
	FUZZ_CHECK(open_opts(fp, MKV_CREATE, &pool) == 0);
	for (unsigned i = 0; i < FUZZ_KEYS; i++) {
		snprintf(key, sizeof(key), "k%u", i);
		memset(value, 'a' + (int)i, sizeof(value));
		FUZZ_CHECK(mkv_put(pool, key, strlen(key), value, 1 + i * 1000) == 0);
	}
	for (unsigned i = 0; i < 3; i++) {
		keys[i] = (struct mkv_key){ chain[i], 2 };
		FUZZ_CHECK(mkv_alloc(pool, 100, &bufs[i]) == 0);
		memset(bufs[i].data, 'c', 100);
	}
	FUZZ_CHECK(mkv_publish_chain(pool, NULL, 0, keys, bufs, 3) == 0);
	/* a deleted value, whose pages a held view keeps in quarantine */
	{
		struct mkv_view v;

		FUZZ_CHECK(mkv_get(pool, "k1", 2, &v) == 0);
		FUZZ_CHECK(mkv_del(pool, "k1", 2) == 0);
		FUZZ_CHECK(mkv_put(pool, "k6", 2, "x", 1) == 0);
		FUZZ_CHECK(mkv_release(pool, &v) == 0);
	}
	mkv_pool_close(&pool);
	fp->img[0] = slurp(fp->super, &fp->len[0]);
	fp->img[1] = slurp(fp->registry, &fp->len[1]);
	fp->img[2] = slurp(fp->data, &fp->len[2]);
}

void
fuzz_pool_write(const struct fuzz_pool *fp, int i, uint64_t off, const void *buf, size_t n)
{
	const char *path = i == 0 ? fp->super : i == 1 ? fp->registry : fp->data;
	int fd = open(path, O_WRONLY);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(pwrite(fd, buf, n, (off_t)off) == (ssize_t)n);
	close(fd);
}

void
fuzz_pool_restore(const struct fuzz_pool *fp)
{
	for (int i = 0; i < 3; i++) {
		/* a truncation (pool_super does them) is undone too */
		FUZZ_CHECK(truncate(i == 0 ? fp->super : i == 1 ? fp->registry : fp->data,
				(off_t)fp->len[i]) == 0);
		fuzz_pool_write(fp, i, 0, fp->img[i], fp->len[i]);
	}
}

/* Whether rc is 0 or one of the codes in the list ending with 0. */
static int
one_of(int rc, ...)
{
	va_list ap;
	int code, found = rc == 0;

	va_start(ap, rc);
	while (!found && (code = va_arg(ap, int)) != 0)
		found = rc == code;
	va_end(ap);
	return found;
}

/*
 * The codes any call may return on a pool that is damaged or being
 * changed under it, beyond its own: the pool is damaged, its client was
 * judged dead, the holder did not answer, memory ran out.
 */
#define ANY MKV_E_CORRUPT, MKV_E_VERSION, MKV_E_EXPIRED, MKV_E_TIMEDOUT, MKV_E_NOMEM

int
fuzz_pool_use(const struct fuzz_pool *fp, int rdonly)
{
	static const char *const names[] = { "k0", "k1", "k2", "k3", "k4", "k5", "c0", "c1",
			"c2", "zz" };
	struct mkv_key keys[10];
	struct mkv_view views[10], v;
	struct mkv_client cl[FUZZ_CLIENTS];
	struct mkv_verify ver;
	struct mkv_reclaim rec;
	struct mkv_evict ev;
	struct mkv_stat st;
	struct mkv_pool *pool;
	size_t n, found;
	int rc, vrc;

	rc = open_opts(fp, rdonly ? MKV_RDONLY : 0, &pool);
	FUZZ_CHECK(one_of(rc, ANY, MKV_E_NOTPOOL, MKV_E_PERM, MKV_E_USERS, MKV_E_NOSPC,
			MKV_E_INVAL, -EACCES, 0));
	if (rc)
		return rc;
	FUZZ_CHECK(one_of(mkv_pool_stat(pool, &st), ANY, 0));
	FUZZ_CHECK(one_of(mkv_pool_clients(pool, cl, FUZZ_CLIENTS, &n), ANY, 0));
	vrc = mkv_pool_verify(pool, MKV_VERIFY_DEEP, &ver);
	FUZZ_CHECK(one_of(vrc, ANY, 0));
	for (unsigned i = 0; i < 10; i++) {
		keys[i] = (struct mkv_key){ names[i], 2 };
		rc = mkv_get(pool, names[i], 2, &v);
		FUZZ_CHECK(one_of(rc, ANY, MKV_E_NOTFOUND, 0));
		if (rc == 0) {
			/* every byte of a view is in the arena: ASan would see the rest */
			for (size_t j = 0; j < v.len; j++)
				sink += ((const uint8_t *)v.data)[j];
			FUZZ_CHECK(one_of(mkv_release(pool, &v), MKV_E_EXPIRED, 0));
		}
		FUZZ_CHECK(one_of(mkv_exists(pool, names[i], 2), ANY, 1, 0));
	}
	FUZZ_CHECK(one_of(mkv_prefix_len(pool, keys, 10, &n), ANY, 0));
	rc = mkv_get_batch(pool, keys, 10, 0, views, &found);
	FUZZ_CHECK(one_of(rc, ANY, 0));
	for (unsigned i = 0; rc == 0 && i < 10; i++)
		if (views[i].data)
			FUZZ_CHECK(one_of(mkv_release(pool, &views[i]), MKV_E_EXPIRED, 0));
	if (!rdonly) {
		FUZZ_CHECK(one_of(mkv_put(pool, "new", 3, "value", 5), ANY, MKV_E_EXISTS,
				MKV_E_NOSPC, 0));
		FUZZ_CHECK(one_of(mkv_del(pool, "k0", 2), ANY, MKV_E_NOTFOUND, MKV_E_NOSPC, 0));
		FUZZ_CHECK(one_of(mkv_pool_evict(pool, 50, 0, &ev), ANY, MKV_E_NOSPC, 0));
		FUZZ_CHECK(one_of(mkv_pool_reclaim(pool, 0, &rec), ANY, MKV_E_NOSPC, 0));
		FUZZ_CHECK(one_of(mkv_put(pool, "big", 3, fp->img[2], 5 * FUZZ_PAGE), ANY,
				MKV_E_EXISTS, MKV_E_NOSPC, 0));
	}
	FUZZ_CHECK(one_of(mkv_pool_evict(pool, 50, MKV_DRY_RUN, &ev), ANY, 0));
	FUZZ_CHECK(one_of(mkv_pool_reclaim(pool, MKV_DRY_RUN, &rec), ANY, 0));
	mkv_pool_close(&pool);
	return vrc;
}
