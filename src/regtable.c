/* SPDX-License-Identifier: MIT */
/*
 * regtable.c -- the registry's tables and their formats: every key and
 * value the library stores in LMDB is made and read here.
 *   entries  user key -> struct mkv_entry (the main database; see layout.h)
 *   pages    first page (big-endian u64) -> user key
 *   freed    txn id (big-endian u64) -> struct mkv_extent[] released in it
 *   meta     name -> u64 (format, geometry, counters, the lease token)
 *   answers  request entry (big-endian u64: slot * MKV_RQ_DEPTH + index)
 *            -> struct mkv_answer_rec, the last request applied from it
 *   kids     key hash (u64) -> how many published entries name it as parent
 * Reads check that what LMDB hands back lies inside its map before they
 * read it (mkv_reg_val()); a write txn's own pages lie outside, and pass.
 * Lookups that find nothing return MKV_E_NOTFOUND, with a message only
 * where the caller reports it as such (mkv_reg_lookup()).
 */
#include "config.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static MDB_dbi
table_dbi(const struct mkv_pool *p, enum mkv_table t)
{
	return t == MKV_TABLE_ENTRIES ? p->reg->entries : t == MKV_TABLE_PAGES ? p->reg->pages :
		p->reg->freed;
}

/*
 * The value under key in a table, checked to lie inside LMDB's map: 0,
 * MKV_E_NOTFOUND without a message, or the error (table names the table
 * in it, rec the kind of record).
 */
static int
table_get(struct mkv_pool *p, struct mkv_txn *txn, MDB_dbi dbi, const void *key, size_t klen,
		MDB_val *d, const char *table, const char *rec)
{
	MDB_val k = { klen, (void *)key };
	int rc = mdb_get(reg_txn(txn), dbi, &k, d);

	if (rc == MDB_NOTFOUND)
		return MKV_E_NOTFOUND;
	if (rc)
		return mkv_reg_err(rc, table);
	return mkv_reg_val(p, reg_txn(txn), d, rec);
}

int
mkv_reg_meta_get(struct mkv_pool *p, struct mkv_txn *txn, const char *name, uint64_t *v)
{
	MDB_val d;
	int rc = table_get(p, txn, p->reg->meta, name, strlen(name), &d, "registry: meta",
			"a meta value");

	if (rc == MKV_E_NOTFOUND)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry meta lacks %s", p->path, name);
	if (rc)
		return rc;
	if (d.mv_size != sizeof(*v))
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry meta %s has %zu bytes",
				p->path, name, d.mv_size);
	memcpy(v, d.mv_data, sizeof(*v));
	return 0;
}

int
mkv_reg_meta_put(struct mkv_pool *p, struct mkv_txn *txn, const char *name, uint64_t v)
{
	MDB_val k = { strlen(name), (void *)name }, d = { sizeof(v), &v };
	int rc = mdb_put(reg_txn(txn), p->reg->meta, &k, &d, 0);

	return rc ? mkv_reg_err(rc, "registry: meta") : 0;
}

/*
 * The storage's own fence, first in every holder's write txn: refuse to
 * commit under a token (generation, holder) below the one stored in meta;
 * store ours when it is above.  MKV_E_FENCED: a newer holder committed.
 */
int
mkv_reg_fence(struct mkv_pool *p, struct mkv_txn *txn)
{
	uint64_t gen, holder, mine = p->h.generation, me = p->h.holder_id;
	int rc;

	if ((rc = mkv_reg_meta_get(p, txn, "generation", &gen)) ||
	    (rc = mkv_reg_meta_get(p, txn, "holder", &holder)))
		return rc;
	if (gen > mine || (gen == mine && holder > me))
		return mkv_err(MKV_E_FENCED, "pool %s: lease token %llu/%llx superseded by %llu/%llx",
				p->path, (unsigned long long)mine, (unsigned long long)me,
				(unsigned long long)gen, (unsigned long long)holder);
	if (gen == mine && holder == me)
		return 0;
	if ((rc = mkv_reg_meta_put(p, txn, "generation", mine)))
		return rc;
	return mkv_reg_meta_put(p, txn, "holder", me);
}

/* The entry of key, checked: MKV_E_NOTFOUND (without a message), _CORRUPT, _VERSION. */
int
mkv_reg_entry(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen,
		struct mkv_entry *e)
{
	MDB_val d;
	int rc = table_get(p, txn, p->reg->entries, key, klen, &d, "registry: lookup", "an entry");

	if (rc)
		return rc;
	if (d.mv_size != sizeof(*e))
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry entry of %zu bytes", p->path,
				d.mv_size);
	memcpy(e, d.mv_data, sizeof(*e));
	if (e->version != MKV_ENTRY_VERSION)
		return mkv_err(MKV_E_VERSION, "pool %s: registry entry version %u", p->path,
				e->version);
	if (e->npages == 0 || e->page >= p->nr_pages || e->npages > p->nr_pages - e->page ||
	    e->length > e->npages * p->page_size)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry entry points outside the arena",
				p->path);
	return 0;
}

/* The entry of key, checked: MKV_E_NOTFOUND ("no such key"), _CORRUPT, _VERSION. */
int
mkv_reg_lookup(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen,
		struct mkv_entry *e)
{
	int rc = mkv_reg_entry(p, txn, key, klen, e);

	return rc == MKV_E_NOTFOUND ? mkv_err(MKV_E_NOTFOUND, "no such key") : rc;
}

/* Whether key has an entry (its value unread): 0, or MKV_E_NOTFOUND without a message. */
int
mkv_reg_exists(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen)
{
	MDB_val k = { klen, (void *)key }, d;
	int rc = mdb_get(reg_txn(txn), p->reg->entries, &k, &d);

	if (rc == MDB_NOTFOUND)
		return MKV_E_NOTFOUND;
	return rc ? mkv_reg_err(rc, "registry: lookup") : 0;
}

/*
 * Register key at e->page: its pages record, then its entry.  1 if a value
 * is registered at that page already (nothing written); else 0, or the
 * error after which the txn must not commit (MKV_E_EXISTS: the key has an
 * entry).
 */
int
mkv_reg_insert(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen,
		const struct mkv_entry *e)
{
	uint64_t be = htobe64(e->page);
	MDB_val k = { klen, (void *)key }, d = { sizeof(*e), (void *)e };
	MDB_val pk = { sizeof(be), &be }, pd = k;
	int rc = mdb_put(reg_txn(txn), p->reg->pages, &pk, &pd, MDB_NOOVERWRITE);

	if (rc == MDB_KEYEXIST)
		return 1;
	if (rc || (rc = mdb_put(reg_txn(txn), p->reg->entries, &k, &d, MDB_NOOVERWRITE)))
		return mkv_reg_err(rc, "publish");
	return 0;
}

/* Unregister key, whose value starts at page: its entry and its pages record. */
int
mkv_reg_remove(struct mkv_pool *p, struct mkv_txn *txn, const void *key, size_t klen,
		uint64_t page)
{
	uint64_t be = htobe64(page);
	MDB_val k = { klen, (void *)key }, pk = { sizeof(be), &be };
	int rc;

	if ((rc = mdb_del(reg_txn(txn), p->reg->entries, &k, NULL)) ||
	    (rc = mdb_del(reg_txn(txn), p->reg->pages, &pk, NULL)))
		return mkv_reg_err(rc, "delete");
	return 0;
}

/*
 * The key of the value whose first page is page (the pages table), copied
 * out.  MKV_E_NOTFOUND, without a message, if no value starts there.
 */
int
mkv_reg_page_key(struct mkv_pool *p, struct mkv_txn *txn, uint64_t page,
		uint8_t key[MKV_KEY_MAX], size_t *klen)
{
	uint64_t be = htobe64(page);
	MDB_val k;
	int rc = table_get(p, txn, p->reg->pages, &be, sizeof(be), &k, "registry: pages",
			"a pages record");

	if (rc)
		return rc;
	if (k.mv_size == 0 || k.mv_size > MKV_KEY_MAX)
		return mkv_err(MKV_E_CORRUPT, "pool %s: the pages record of page %llu has %zu bytes",
				p->path, (unsigned long long)page, k.mv_size);
	memcpy(key, k.mv_data, k.mv_size);
	*klen = k.mv_size;
	return 0;
}

/*
 * How many published entries name the key of this hash as their parent
 * (the kids table; a damaged record counts 0).  MKV_E_NOTFOUND, without a
 * message, if none does.
 */
int
mkv_reg_kids(struct mkv_pool *p, struct mkv_txn *txn, uint64_t hash, uint64_t *n)
{
	MDB_val d;
	int rc = table_get(p, txn, p->reg->kids, &hash, sizeof(hash), &d, "registry: kids",
			"a kids record");

	*n = 0;
	if (rc)
		return rc;
	if (d.mv_size == sizeof(*n))
		memcpy(n, d.mv_data, sizeof(*n));
	return 0;
}

/*
 * Count one child more (delta 1) or less (-1) under a parent's key hash.
 * The count lives apart from the parent's entry, so it stays right while
 * the parent is evicted and published again.
 */
int
mkv_reg_kids_add(struct mkv_pool *p, struct mkv_txn *txn, uint64_t parent, int delta)
{
	MDB_val k = { sizeof(parent), &parent }, d;
	uint64_t n;
	int rc = mkv_reg_kids(p, txn, parent, &n);

	if (rc && rc != MKV_E_NOTFOUND)
		return rc;
	n = delta > 0 ? n + 1 : n ? n - 1 : 0;
	d = (MDB_val){ sizeof(n), &n };
	if (n)
		rc = mdb_put(reg_txn(txn), p->reg->kids, &k, &d, 0);
	else
		rc = mdb_del(reg_txn(txn), p->reg->kids, &k, NULL);
	return rc && rc != MDB_NOTFOUND ? mkv_reg_err(rc, "chain") : 0;
}

/* The quarantine record of this write txn: the n extents its deletes released. */
int
mkv_reg_freed_put(struct mkv_pool *p, struct mkv_txn *txn, const struct mkv_extent *x,
		size_t n)
{
	uint64_t id = htobe64(mkv_reg_txn_id(txn));
	MDB_val k = { sizeof(id), &id }, d;
	int rc;

	/* txn ids are never reused: a record under ours already is damage, replaced */
	if (mdb_get(reg_txn(txn), p->reg->freed, &k, &d) == 0)
		mkv_log(MKV_LOG_WARN, "pool %s: a damaged quarantine record replaced", p->path);
	d = (MDB_val){ n * sizeof(*x), (void *)x };
	rc = mdb_put(reg_txn(txn), p->reg->freed, &k, &d, 0);
	return rc ? mkv_reg_err(rc, "delete") : 0;
}

/* The txn id of the newest quarantine record (UINT64_MAX if its key is damaged). */
int
mkv_reg_freed_last(struct mkv_pool *p, struct mkv_txn *txn, uint64_t *id)
{
	MDB_cursor *c;
	MDB_val k, d;
	uint64_t be;
	int rc;

	if ((rc = mdb_cursor_open(reg_txn(txn), p->reg->freed, &c)))
		return mkv_reg_err(rc, "quarantine");
	rc = mdb_cursor_get(c, &k, &d, MDB_LAST);
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		return MKV_E_NOTFOUND;
	if (rc)
		return mkv_reg_err(rc, "quarantine");
	if (k.mv_size != sizeof(be)) {
		*id = UINT64_MAX;
		return 0;
	}
	memcpy(&be, k.mv_data, sizeof(be));
	*id = be64toh(be);
	return 0;
}

/* Each extent of one quarantine record to fn; *damaged if fn skipped one. */
static int
freed_each(const MDB_val *d, mkv_reg_extent_fn fn, void *arg, bool *damaged)
{
	const struct mkv_extent *x = d->mv_data;
	int rc;

	for (size_t i = 0; i < d->mv_size / sizeof(*x); i++) {
		struct mkv_extent e;

		memcpy(&e, &x[i], sizeof(e));
		if ((rc = fn(arg, &e)) < 0)
			return rc;
		*damaged |= rc > 0;
	}
	return 0;
}

/*
 * Drop the quarantine records of txns before below, each extent of them
 * given to fn first (fn: 0 taken, 1 skipped as damaged, < 0 an error that
 * stops).  A record damaged beyond use (a key that is no txn id, a value
 * that is no array of extents) is left where it is: its pages, if any,
 * stay quarantined until a new holder rebuilds the table, and verify
 * reports it.
 */
int
mkv_reg_freed_pop(struct mkv_pool *p, struct mkv_txn *txn, uint64_t below,
		mkv_reg_extent_fn fn, void *arg)
{
	MDB_cursor *c;
	MDB_val k, d;
	uint64_t first;
	bool damaged = false;
	int rc;

	if ((rc = mdb_cursor_open(reg_txn(txn), p->reg->freed, &c)))
		return mkv_reg_err(rc, "quarantine");
	for (rc = mdb_cursor_get(c, &k, &d, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) {
		if (k.mv_size != sizeof(first) || d.mv_size % sizeof(struct mkv_extent) ||
		    d.mv_size == 0) {
			damaged = true;
			continue;
		}
		memcpy(&first, k.mv_data, sizeof(first));
		if (be64toh(first) >= below)
			break;
		if ((rc = freed_each(&d, fn, arg, &damaged)))
			goto out;
		if ((rc = mdb_cursor_del(c, 0))) {
			rc = mkv_reg_err(rc, "quarantine");
			goto out;
		}
	}
	rc = rc == 0 || rc == MDB_NOTFOUND ? 0 : mkv_reg_err(rc, "quarantine");
	if (damaged)
		mkv_log(MKV_LOG_WARN, "pool %s: damaged quarantine records skipped", p->path);
out:
	mdb_cursor_close(c);
	return rc;
}

/* The answer recorded under request entry rq: 0, MKV_E_NOTFOUND (no message), or an error. */
int
mkv_reg_answer_get(struct mkv_pool *p, struct mkv_txn *txn, uint64_t rq,
		struct mkv_answer_rec *a)
{
	uint64_t id = htobe64(rq);
	MDB_val d;
	int rc = table_get(p, txn, p->reg->answers, &id, sizeof(id), &d, "answers",
			"an answer record");

	if (rc)
		return rc;
	if (d.mv_size != sizeof(*a))
		return mkv_err(MKV_E_CORRUPT, "pool %s: answer record of %zu bytes", p->path,
				d.mv_size);
	memcpy(a, d.mv_data, sizeof(*a));
	return 0;
}

int
mkv_reg_answer_put(struct mkv_pool *p, struct mkv_txn *txn, uint64_t rq,
		const struct mkv_answer_rec *a)
{
	uint64_t id = htobe64(rq);
	MDB_val k = { sizeof(id), &id }, d = { sizeof(*a), (void *)a };
	int rc = mdb_put(reg_txn(txn), p->reg->answers, &k, &d, 0);

	return rc ? mkv_reg_err(rc, "answers") : 0;
}

/* Whether a key of the main database names a table (a key is at most MKV_KEY_MAX bytes). */
static bool
is_table(const MDB_val *key)
{
	return key->mv_size > MKV_KEY_MAX;
}

/*
 * The first key of an entry after `after` in LMDB's order (memcmp, then
 * the shorter first), or the first key if after is NULL, copied out.
 * MKV_E_NOTFOUND, without a message, if there is none.
 */
int
mkv_reg_key_after(struct mkv_pool *p, struct mkv_txn *txn, const void *after, size_t alen,
		uint8_t key[MKV_KEY_MAX], size_t *klen)
{
	MDB_val k = { alen, (void *)after }, d;
	MDB_cursor *c;
	int rc;

	if ((rc = mdb_cursor_open(reg_txn(txn), p->reg->entries, &c)))
		return mkv_reg_err(rc, "registry: next key");
	rc = mdb_cursor_get(c, &k, &d, after ? MDB_SET_RANGE : MDB_FIRST);
	while (rc == 0 && (is_table(&k) || (after && k.mv_size == alen &&
			memcmp(k.mv_data, after, alen) == 0)))
		rc = mdb_cursor_get(c, &k, &d, MDB_NEXT);
	if (rc == MDB_NOTFOUND) {
		rc = MKV_E_NOTFOUND;
	} else if (rc) {
		rc = mkv_reg_err(rc, "registry: next key");
	} else if (!(rc = mkv_reg_val(p, reg_txn(txn), &k, "a key"))) {
		memcpy(key, k.mv_data, k.mv_size);
		*klen = k.mv_size;
	}
	mdb_cursor_close(c);
	return rc;
}

/* A raw record of a table, to a scan's decoder. */
typedef int (*record_fn)(void *arg, const MDB_val *k, const MDB_val *d);

/*
 * Every record of a table, in key order, to fn (the entries without the
 * main database's table names); fn returns non-zero to stop, and that is
 * returned.  A key or value outside LMDB's map: MKV_E_CORRUPT.
 */
static int
scan(struct mkv_pool *p, struct mkv_txn *txn, enum mkv_table t, record_fn fn, void *arg)
{
	MDB_cursor *c;
	MDB_val k, d;
	int rc, stop = 0;

	if ((rc = mdb_cursor_open(reg_txn(txn), table_dbi(p, t), &c)))
		return mkv_reg_err(rc, "registry: scan");
	while ((rc = mdb_cursor_get(c, &k, &d, MDB_NEXT)) == 0) {
		if ((stop = mkv_reg_val(p, reg_txn(txn), &k, "a key")) ||
		    (stop = mkv_reg_val(p, reg_txn(txn), &d, "a value")))
			break;
		if (t == MKV_TABLE_ENTRIES && is_table(&k))
			continue;
		if ((stop = fn(arg, &k, &d)))
			break;
	}
	mdb_cursor_close(c);
	if (stop)
		return stop;
	return rc == MDB_NOTFOUND ? 0 : mkv_reg_err(rc, "registry: scan");
}

struct entry_scan {
	mkv_reg_entry_fn fn;
	void *arg;
};

static int
entry_record(void *arg, const MDB_val *k, const MDB_val *d)
{
	struct entry_scan *s = arg;
	struct mkv_entry e;

	if (d->mv_size != sizeof(e))
		return s->fn(s->arg, k->mv_data, k->mv_size, NULL, d->mv_size);
	memcpy(&e, d->mv_data, sizeof(e));
	return s->fn(s->arg, k->mv_data, k->mv_size, &e, d->mv_size);
}

/* Every key and its entry, decoded (unchecked: the caller judges it), in key order. */
int
mkv_reg_entries_scan(struct mkv_pool *p, struct mkv_txn *txn, mkv_reg_entry_fn fn, void *arg)
{
	struct entry_scan s = { fn, arg };

	return scan(p, txn, MKV_TABLE_ENTRIES, entry_record, &s);
}

struct freed_scan {
	mkv_reg_freed_fn fn;
	void *arg;
};

static int
freed_record(void *arg, const MDB_val *k, const MDB_val *d)
{
	struct freed_scan *s = arg;
	size_t n = d->mv_size / sizeof(struct mkv_extent);
	int rc;

	(void)k;
	for (size_t i = 0; i < n; i++) {
		struct mkv_extent e;

		memcpy(&e, (const char *)d->mv_data + i * sizeof(e), sizeof(e));
		if ((rc = s->fn(s->arg, &e, d->mv_size)))
			return rc;
	}
	if (d->mv_size % sizeof(struct mkv_extent))
		return s->fn(s->arg, NULL, d->mv_size);
	return 0;
}

/* Every extent of every quarantine record, decoded (unchecked), oldest record first. */
int
mkv_reg_freed_scan(struct mkv_pool *p, struct mkv_txn *txn, mkv_reg_freed_fn fn, void *arg)
{
	struct freed_scan s = { fn, arg };

	return scan(p, txn, MKV_TABLE_FREED, freed_record, &s);
}

/* How many records a table holds (the entries without the table names). */
int
mkv_reg_count(struct mkv_pool *p, struct mkv_txn *txn, enum mkv_table t, uint64_t *n)
{
	MDB_stat st;
	int rc = mdb_stat(reg_txn(txn), table_dbi(p, t), &st);

	if (rc)
		return mkv_reg_err(rc, "registry: stat");
	*n = st.ms_entries - (t == MKV_TABLE_ENTRIES ? MKV_TABLES : 0);
	return 0;
}
