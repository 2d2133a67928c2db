/* SPDX-License-Identifier: MIT */
/*
 * tu_pool.c -- temporary directories and the pools in them, the registry
 * written behind the library's back, the fixtures and the suites' runner.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "testutil.h"

#define TU_ROOT_ENV "MKV_TEST_TMPROOT"

char *tu_dir;
char *tu_path;

char *
tu_tmpdir_new(void)
{
	const char *root = getenv(TU_ROOT_ENV);
	char *path;

	if (root == NULL || root[0] == '\0')
		root = "/dev/shm";
	if (asprintf(&path, "%s/mkvt.XXXXXX", root) < 0)
		return NULL;
	if (mkdtemp(path) == NULL) {
		free(path);
		return NULL;
	}
	return path;
}

static int
rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb, (void)ftw;
	if (type == FTW_DP || type == FTW_D)
		return rmdir(path) < 0 ? -errno : 0;
	return unlink(path) < 0 ? -errno : 0;
}

int
tu_rmtree(const char *path)
{
	int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);

	if (rc < 0)
		return errno ? -errno : -EIO;
	return rc;
}

void
tu_tmpdir_free(char **dir)
{
	if (dir == NULL || *dir == NULL)
		return;
	(void)tu_rmtree(*dir);
	free(*dir);
	*dir = NULL;
}

char *
tu_path_in(const char *dir, const char *name)
{
	char *path;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	return path;
}

char *
tu_pool_path(const char *dir)
{
	return tu_path_in(dir, "pool");
}

/* The memory model of the pools the tests create: $TU_COHERENCE, "noncoherent" or not. */
enum mkv_coherence
tu_coherence(void)
{
	const char *c = getenv("TU_COHERENCE");

	return c && strcmp(c, "noncoherent") == 0 ? MKV_NONCOHERENT : MKV_COHERENT;
}

/*
 * The node table's size: as asked, else the library's default, but for a
 * non-coherent pool, which gives each node max_clients / max_nodes slots:
 * there two nodes, each with half of them, or one node with all of a
 * handful.
 */
static enum mkv_coherence
tu_opts_coherence(const struct tu_opts *o)
{
	return o->coherence ? o->coherence : tu_coherence();
}

static uint32_t
tu_max_nodes(const struct tu_opts *o, uint32_t max_clients)
{
	if (o->max_nodes)
		return o->max_nodes;
	if (tu_opts_coherence(o) != MKV_NONCOHERENT)
		return MKV_DEFAULT_MAX_NODES;
	return max_clients < 4 ? 1 : 2;
}

int
tu_open(const char *path, unsigned flags, const struct tu_opts *o, struct mkv_pool **pool)
{
	struct mkv_opts *opts = NULL;
	uint32_t max_clients;
	int rc;

	*pool = NULL;
	if (o == NULL)
		return mkv_pool_open(path, flags, NULL, pool);
	max_clients = o->max_clients ? o->max_clients : 16;
	if (o->host && setenv("MARUKV_BOOT_ID", o->host, 1) < 0)
		return -errno;
	if ((rc = mkv_opts_new(&opts)) < 0)
		return rc;
	if ((rc = mkv_opts_set_page_size(opts, o->page_size ? o->page_size : TU_PAGE_SIZE)) < 0 ||
	    (rc = mkv_opts_set_data_size(opts, o->data_size ? o->data_size : TU_DATA_SIZE)) < 0 ||
	    (rc = mkv_opts_set_max_clients(opts, max_clients)) < 0 ||
	    (rc = mkv_opts_set_watermarks(opts, 0, 0)) < 0 ||
	    (o->node && (rc = mkv_opts_set_node(opts, o->node)) < 0) ||
	    (o->lease_ms && (rc = mkv_opts_set_lease_period(opts, o->lease_ms)) < 0) ||
	    (o->client_timeout_ms &&
	     (rc = mkv_opts_set_client_timeout(opts, o->client_timeout_ms)) < 0) ||
	    (rc = mkv_opts_set_max_nodes(opts, tu_max_nodes(o, max_clients))) < 0 ||
	    (o->registry_size && (rc = mkv_opts_set_registry_size(opts, o->registry_size)) < 0) ||
	    (rc = mkv_opts_set_coherence(opts, tu_opts_coherence(o))) < 0) {
		mkv_opts_delete(&opts);
		return rc;
	}
	rc = mkv_pool_open(path, flags, opts, pool);
	mkv_opts_delete(&opts);
	return rc;
}

/* tu_open() of <dir>/pool. */
static int
open_in(const char *dir, unsigned flags, const struct tu_opts *o, struct mkv_pool **pool)
{
	char *path = tu_pool_path(dir);
	int rc;

	*pool = NULL;
	if (path == NULL)
		return -ENOMEM;
	rc = tu_open(path, flags, o, pool);
	free(path);
	return rc;
}

int
tu_pool_create(const char *dir, uint64_t data_size, uint32_t page_size,
		uint32_t max_clients, struct mkv_pool **pool)
{
	struct tu_opts o = { .data_size = data_size, .page_size = page_size,
			.max_clients = max_clients };

	return open_in(dir, MKV_CREATE, &o, pool);
}

int
tu_pool_open(const char *dir, unsigned flags, struct mkv_pool **pool)
{
	return open_in(dir, flags, NULL, pool);
}

char *
tu_lockdir(const char *base, struct mkv_pool *pool)
{
	struct mkv_stat st;
	const uint8_t *u = st.uuid;
	char *path;

	tu_stat(pool, &st);
	ck_assert_int_gt(asprintf(&path,
			"%s/marukv-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			base, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
			u[11], u[12], u[13], u[14], u[15]), 0);
	return path;
}

char *
tu_registry_name(struct mkv_pool *pool)
{
	struct mkv_stat st;
	char *dir, *name;

	tu_stat(pool, &st);
	dir = st.coherence == MKV_NONCOHERENT ? tu_lockdir(getenv("MARUKV_LOCK_DIR"), pool) :
			strdup(mkv_pool_path(pool));
	ck_assert_ptr_nonnull(dir);
	ck_assert_int_gt(asprintf(&name, "%s/registry.mdb", dir), 0);
	free(dir);
	return name;
}

void
tu_setup(void)
{
	tu_dir = tu_tmpdir_new();
	ck_assert_msg(tu_dir != NULL, "cannot make a temporary directory: %s",
			strerror(errno));
	tu_path = tu_pool_path(tu_dir);
	ck_assert_ptr_nonnull(tu_path);
}

void
tu_teardown(void)
{
	free(tu_path);
	tu_path = NULL;
	tu_tmpdir_free(&tu_dir);
}

int
tu_run_suite(Suite *s)
{
	const char *base = getenv("MKV_TEST_SHM");
	char root[PATH_MAX];
	SRunner *sr;
	int failed;

	/* a run killed midway (t/mutations.sh's timeouts) leaves its root: there, its caller's */
	snprintf(root, sizeof(root), "%s/mkvt.XXXXXX", base && *base ? base : "/dev/shm");
	if (mkdtemp(root) == NULL) {
		fprintf(stderr, "cannot create %s: %s\n", root, strerror(errno));
		return EXIT_FAILURE;
	}
	setenv(TU_ROOT_ENV, root, 1);
	/* non-coherent pools' lock directories (an emulated host has its own) */
	setenv("MARUKV_LOCK_DIR", root, 1);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	(void)tu_rmtree(root);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

void
tu_registry_begin(const char *pool, MDB_env **env, MDB_txn **txn)
{
	struct stat st;
	char *file;

	ck_assert_int_ge(asprintf(&file, "%s/registry.mdb", pool), 0);
	ck_assert_int_eq(stat(file, &st), 0);
	ck_assert_int_eq(mdb_env_create(env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(*env, 8), 0);
	ck_assert_int_eq(mdb_env_set_mapsize(*env, (size_t)st.st_size), 0);
	ck_assert_int_eq(mdb_env_open(*env, file, MDB_NOSUBDIR, 0600), 0);
	ck_assert_int_eq(mdb_txn_begin(*env, NULL, 0, txn), 0);
	free(file);
}

/* The tables are named "marukv.NAME", padded with '.' to 511 bytes (registry.c). */
MDB_dbi
tu_registry_table(MDB_txn *txn, const char *table)
{
	char name[512];
	MDB_dbi dbi;
	int n;

	if (table) {
		n = snprintf(name, sizeof(name), "marukv.%s", table);
		memset(name + n, '.', sizeof(name) - 1 - (size_t)n);
		name[sizeof(name) - 1] = '\0';
	}
	ck_assert_int_eq(mdb_dbi_open(txn, table ? name : NULL, 0, &dbi), 0);
	return dbi;
}

void
tu_registry_end(MDB_env *env, MDB_txn *txn)
{
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

unsigned
tu_env(const char *name, unsigned def)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned)strtoul(v, NULL, 0) : def;
}
