/* SPDX-License-Identifier: MIT */
/*
 * pools.c -- the stores the subcommands measure: marukv pools made to a
 * spec, and the raw LMDB peer with the length of its entries (see
 * bench.h).
 */
#include <marukv.h>

#include <inttypes.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "bench.h"

int pool_make(const char *path, const struct pool_spec *spec, const char *cmd,
		struct mkv_pool **out)
{
	struct mkv_opts *opts = NULL;
	struct mkv_stat st;
	int rc = mkv_opts_new(&opts);

	*out = NULL;
	if (!rc)
		rc = mkv_opts_set_page_size(opts, BENCH_PAGE);
	if (!rc)
		rc = mkv_opts_set_data_size(opts, spec->pages * BENCH_PAGE);
	if (!rc && spec->max_clients)
		rc = mkv_opts_set_max_clients(opts, spec->max_clients);
	if (!rc && spec->registry_size)
		rc = mkv_opts_set_registry_size(opts, spec->registry_size);
	if (!rc)
		rc = mkv_opts_set_watermarks(opts, spec->wm_low, spec->wm_high);
	if (!rc && spec->coherence)
		rc = mkv_opts_set_coherence(opts, (enum mkv_coherence)spec->coherence);
	if (!rc)
		rc = mkv_pool_open(path, MKV_CREATE, opts, out);
	mkv_opts_delete(&opts);
	if (!rc)
		rc = mkv_pool_stat(*out, &st);
	if (rc) {
		fprintf(stderr, PROG " %s: %s: %s\n", cmd, path, mkv_why(rc));
		mkv_pool_close(out);
		return -1;
	}
	if (st.lease_holder_pid != (uint32_t)getpid()) {
		fprintf(stderr, PROG " %s: %s: the lease holder is pid %" PRIu32
				", not this process (%ld)\n", cmd, path, st.lease_holder_pid,
				(long)getpid());
		mkv_pool_close(out);
		return -1;
	}
	return 0;
}

int peer_fail(const char *cmd, const char *what, int rc)
{
	fprintf(stderr, PROG " %s: LMDB peer: %s: %s\n", cmd, what, mdb_strerror(rc));
	return -1;
}

bool peer_in_memory(int fd)
{
	struct statfs fs;

	return fstatfs(fd, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC ||
			fs.f_type == HUGETLBFS_MAGIC);
}

int peer_env(const char *file, uint64_t mapsize, unsigned flags, MDB_env **env)
{
	int rc = mdb_env_create(env);

	if (rc)
		return rc;
	if ((rc = mdb_env_set_maxdbs(*env, 2)) || (rc = mdb_env_set_mapsize(*env, mapsize)) ||
	    (rc = mdb_env_open(*env, file, MDB_NOSUBDIR | MDB_NOTLS | MDB_NORDAHEAD | flags,
			0666))) {
		mdb_env_close(*env);
		*env = NULL;
	}
	return rc;
}

int peer_dbis(MDB_env *env, unsigned flags, MDB_dbi *entries, MDB_dbi *pages)
{
	MDB_txn *txn;
	int rc = mdb_txn_begin(env, NULL, flags & MDB_CREATE ? 0 : MDB_RDONLY, &txn);

	if (rc)
		return rc;
	if ((rc = mdb_dbi_open(txn, NULL, 0, entries)) ||
	    (rc = mdb_dbi_open(txn, "pages", flags, pages))) {
		mdb_txn_abort(txn);
		return rc;
	}
	return mdb_txn_commit(txn);
}

/*
 * The bench does not copy the library's private entry layout: it asks the
 * pool.  A registry entry is the value of its key in the main database of
 * the pool's registry.mdb (the LMDB file marukv.h names), opened here as
 * peer_env() opens the peer's, so its length is that of the value LMDB
 * returns for the key.
 * A child reads it: LMDB must not have one environment open twice in a
 * process, and closing the second copy would drop the locks of the
 * caller's, which may hold the pool open.
 */
struct entry_answer {
	int rc;                   /* 0, or an LMDB code */
	size_t len;
};

int peer_entry_len(const char *path, const uint8_t key[BENCH_KEY_LEN], const char *cmd,
		size_t *len)
{
	struct entry_answer *a = shared_alloc(sizeof(*a));
	char *file = path_join(path, "registry.mdb");
	int status = -1;
	pid_t pid;

	if (!a || !file) {
		fprintf(stderr, PROG " %s: out of memory\n", cmd);
		goto out;
	}
	pid = child_fork(cmd);
	if (pid == 0) {
		MDB_val k = { BENCH_KEY_LEN, (void *)key }, d;
		MDB_env *env = NULL;
		MDB_txn *txn;
		MDB_dbi dbi;

		/* Map size 0: the one the file records. */
		a->rc = peer_env(file, 0, MDB_RDONLY, &env);
		if (!a->rc && !(a->rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))) {
			if (!(a->rc = mdb_dbi_open(txn, NULL, 0, &dbi)) &&
			    !(a->rc = mdb_get(txn, dbi, &k, &d)))
				a->len = d.mv_size;
			mdb_txn_abort(txn);
		}
		if (env)
			mdb_env_close(env);
		_exit(EXIT_OK);
	}
	if (pid < 0 || child_reap(pid, cmd, "registry reader", 0) != EXIT_OK)
		goto out;
	if (a->rc)
		fprintf(stderr, PROG " %s: %s: %s\n", cmd, file, mdb_strerror(a->rc));
	else if (a->len < sizeof(struct peer_rec) || a->len > PEER_ENTRY_MAX)
		fprintf(stderr, PROG " %s: %s: an entry of %zu bytes; the LMDB peer takes"
				" %zu to %d\n", cmd, file, a->len, sizeof(struct peer_rec),
				PEER_ENTRY_MAX);
	else {
		*len = a->len;
		status = 0;
	}
out:
	shared_free(a, sizeof(*a));
	free(file);
	return status;
}
