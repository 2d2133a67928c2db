/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/pool_registry.c -- libFuzzer target: a pool whose registry holds
 * values the library did not write.
 *
 * The input is a list of records, each [table][key length][value
 * length][key][value], written into the small pool's registry
 * (fuzz_pool.h) with LMDB itself, so that LMDB's own structure stays
 * sound and only the library's values are fuzzed:
 *   table % 6  0 the keys (their entries), 1 pages, 2 freed (quarantine),
 *              3 meta, 4 answers, 5 kids
 *   table & 8  delete the key instead of putting the value
 *   table & 16 use the pool read-only
 * Then every public call runs on the pool (fuzz_pool_use()): each must
 * return a code it documents, and nothing may crash, hang or touch memory
 * outside what it owns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lmdb.h>

#include "fuzz_pool.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_pool fp;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const tables[] = { NULL, "pages", "freed", "meta", "answers", "kids" };
	MDB_dbi dbi[6];
	MDB_env *env;
	MDB_txn *txn;
	char name[MKV_TABLE_NAME_LEN + 1];
	int rdonly = 0;

	if (!fp.img[0])
		fuzz_pool_init(&fp);
	fuzz_pool_restore(&fp);
	FUZZ_CHECK(mdb_env_create(&env) == 0);
	FUZZ_CHECK(mdb_env_set_maxdbs(env, 8) == 0);
	FUZZ_CHECK(mdb_env_set_mapsize(env, fp.len[1]) == 0);
	FUZZ_CHECK(mdb_env_open(env, fp.registry, MDB_NOSUBDIR, 0600) == 0);
	FUZZ_CHECK(mdb_txn_begin(env, NULL, 0, &txn) == 0);
	for (int i = 0; i < 6; i++) {
		if (tables[i])
			mkv_reg_table_name(name, tables[i]);
		FUZZ_CHECK(mdb_dbi_open(txn, tables[i] ? name : NULL, 0, &dbi[i]) == 0);
	}
	while (size >= 3) {
		unsigned what = data[0];
		size_t klen = data[1], vlen = data[2];
		MDB_val k, v;

		data += 3;
		size -= 3;
		if (klen > size)
			klen = size;
		if (vlen > size - klen)
			vlen = size - klen;
		k = (MDB_val){ klen, (void *)data };
		v = (MDB_val){ vlen, (void *)(data + klen) };
		rdonly |= (what & 16) != 0;
		/* LMDB refuses empty keys and table names as user keys: so be it */
		if (what & 8)
			mdb_del(txn, dbi[what % 6], &k, NULL);
		else if (klen)
			mdb_put(txn, dbi[what % 6], &k, &v, 0);
		data += klen + vlen;
		size -= klen + vlen;
	}
	mdb_txn_commit(txn);  /* a put LMDB refused (map full) leaves the template */
	mdb_env_close(env);
	fuzz_pool_use(&fp, rdonly);
	return 0;
}
