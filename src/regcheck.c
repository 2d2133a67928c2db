/* SPDX-License-Identifier: MIT */
/*
 * regcheck.c -- is registry.mdb a structurally sound LMDB file?
 *
 * LMDB trusts its file: a meta page's page size, a page number, a node's
 * offset, a key or data size or an overflow page count that is wrong makes
 * it read outside its map (SIGSEGV, or SIGBUS past the end of the file).
 * This module checks what LMDB would trust, reading the file with pread()
 * into buffers of its own (never through LMDB's map) and bounding every
 * offset and size before it uses it, so that the check itself cannot
 * crash.  A damaged file gives MKV_E_CORRUPT and a message that names the
 * page and what is wrong with it.
 *
 * mkv_regcheck_metas() runs before mdb_env_open().  LMDB reads meta page 0,
 * then meta page 1 at the page size meta page 0 gives, and keeps the one
 * with the larger txn id (page 0 on a tie); it maps the file with that
 * meta's page size and, on a first open, every txn reads the meta page
 * chosen by that txn id's parity.  So the chosen meta must carry a txn id
 * of its own parity, and the page size, map size, last page and the roots
 * and counts of the free-page and main databases it gives must fit the
 * file.  The older meta is left alone but for what LMDB reads of it: a
 * torn write may have left it half new, and LMDB never uses it.
 *
 * mkv_regcheck_walk() runs inside a read txn (whose snapshot's pages no
 * writer reuses while it lives), from the meta page that carries that
 * txn's id: it visits every page reachable from the snapshot -- the
 * free-page database, the main database and every named database (their
 * records are F_SUBDATA nodes of the main database), every overflow run --
 * and the page numbers of the free list, each page once.  The cost is one
 * pread per page in use, and a byte per page below the snapshot's next
 * page.
 *
 * The layout is LMDB 0.9's on a 64-bit host (MDB_DATA_VERSION 1), as
 * mdb.c documents it: a 16-byte page header (page number, pad, flags, lower
 * and upper bounds of the free space or an overflow page count), then
 * 16-bit node offsets; a node is data size or child page number (lo, hi,
 * and on 64-bit hosts the flags word as the top), flags, key size, key,
 * data.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry.h"

#if MDB_VERSION_MAJOR != 0 || MDB_VERSION_MINOR != 9
#error "regcheck.c knows the file format of LMDB 0.9"
#endif
static_assert(sizeof(size_t) == 8, "LMDB's page numbers and sizes are 64-bit here");

#define LMDB_MAGIC 0xBEEFC0DEU
#define LMDB_VERSION 1U
#define LMDB_MAX_PSIZE 0x8000U    /* LMDB caps the OS page size at this */
#define LMDB_MAX_KEY 511U         /* MDB_MAXKEYSIZE */
#define LMDB_MAX_DEPTH 32U        /* a cursor's page stack */
#define NUM_METAS 2U
#define NO_PAGE UINT64_MAX        /* P_INVALID: an empty database's root */

#define PAGE_HDR 16U
#define PG_PGNO 0U
#define PG_FLAGS 10U
#define PG_LOWER 12U
#define PG_UPPER 14U
#define PG_OVPAGES 12U
#define P_BRANCH 0x01U
#define P_LEAF 0x02U
#define P_OVERFLOW 0x04U
#define P_META 0x08U

#define NODE_HDR 8U
#define F_BIGDATA 0x01U
#define F_SUBDATA 0x02U

/* Database flags in a record (the rest of the free database's word holds
 * environment flags, which LMDB takes from the caller, not the file). */
#define DB_FLAGS 0x7eU            /* REVERSEKEY to REVERSEDUP */
#define DB_INTEGERKEY 0x08U

/* An MDB_db record, as a meta page and an F_SUBDATA node hold it. */
#define DB_REC 48U
struct db {
	uint32_t pad;             /* the free database's: the page size */
	uint16_t flags, depth;
	uint64_t branch, leaf, overflow, entries, root;
};

#define META_BYTES MKV_REG_META_BYTES
static_assert(META_BYTES == PAGE_HDR + 136U, "MDB_metabuf: the page header, then MDB_meta");
struct meta {
	uint64_t pgno;
	uint16_t pflags;
	uint32_t magic, version;
	uint64_t mapsize;
	struct db db[2];          /* FREE_DBI, MAIN_DBI */
	uint64_t last_pg, txnid;
	uint8_t raw[META_BYTES];
};

enum { FREE_DB, MAIN_DB, NAMED_DB };
enum { UNSEEN, IN_TREE, ON_FREE_LIST };

struct walk {
	struct mkv_regcheck *c;
	uint64_t psize;
	uint64_t npages;          /* the snapshot's next page: every page is below */
	uint64_t txnid;
	uint8_t *seen;            /* per page below npages: UNSEEN, IN_TREE, ON_FREE_LIST */
	/* a page buffer per level of the walk: a named database's tree is
	 * walked from inside a leaf of the main database */
	uint8_t *bufs[2 * LMDB_MAX_DEPTH];
	unsigned nest;
};

/* A tree being walked, and what its pages add up to. */
struct tree {
	int kind;
	const char *name;
	unsigned depth;
	uint64_t branch, leaf, overflow, entries;
};

static uint16_t
get16(const uint8_t *b, size_t off)
{
	uint16_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static uint32_t
get32(const uint8_t *b, size_t off)
{
	uint32_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static uint64_t
get64(const uint8_t *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static void
db_parse(struct db *db, const uint8_t *b)
{
	db->pad = get32(b, 0);
	db->flags = get16(b, 4);
	db->depth = get16(b, 6);
	db->branch = get64(b, 8);
	db->leaf = get64(b, 16);
	db->overflow = get64(b, 24);
	db->entries = get64(b, 32);
	db->root = get64(b, 40);
}

/* The page size LMDB gives a new environment: the OS page size, capped. */
static uint64_t
lmdb_psize(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	if (ps <= 0)
		ps = 4096;
	return (uint64_t)ps > LMDB_MAX_PSIZE ? LMDB_MAX_PSIZE : (uint64_t)ps;
}

/* Exactly @p len bytes at @p off, or MKV_E_CORRUPT (the file ends) or -errno. */
static int
read_at(const struct mkv_regcheck *c, void *buf, size_t len, uint64_t off, const char *what,
		uint64_t pgno)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(c->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return mkv_err(-errno, "pool %s: cannot read registry.mdb: %m", c->pool);
		if (n == 0)
			return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb ends inside %s %llu",
					c->pool, what, (unsigned long long)pgno);
		done += (size_t)n;
	}
	return 0;
}

static int
meta_read(const struct mkv_regcheck *c, unsigned i, uint64_t psize, struct meta *m)
{
	const uint8_t *b = m->raw;
	int rc = read_at(c, m->raw, sizeof(m->raw), i * psize, "meta page", i);

	if (rc)
		return rc;
	m->pgno = get64(b, PG_PGNO);
	m->pflags = get16(b, PG_FLAGS);
	m->magic = get32(b, PAGE_HDR);
	m->version = get32(b, PAGE_HDR + 4);
	m->mapsize = get64(b, PAGE_HDR + 16);
	db_parse(&m->db[0], b + PAGE_HDR + 24);
	db_parse(&m->db[1], b + PAGE_HDR + 24 + DB_REC);
	m->last_pg = get64(b, PAGE_HDR + 120);
	m->txnid = get64(b, MKV_REG_META_TXNID);
	return 0;
}

/* What LMDB itself checks of both meta pages, and the page size it reads. */
static int
meta_sane(const struct mkv_regcheck *c, unsigned i, const struct meta *m)
{
	if (!(m->pflags & P_META))
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb: page %u is not a meta page",
				c->pool, i);
	if (m->magic != LMDB_MAGIC)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb: meta page %u has magic 0x%x",
				c->pool, i, m->magic);
	if (m->version != LMDB_VERSION)
		return mkv_err(MKV_E_CORRUPT,
				"pool %s: registry.mdb: meta page %u has format version %u", c->pool,
				i, m->version);
	return 0;
}

/* A database record: root, depth and counts within a file of @p npages pages. */
static int
db_check(const struct mkv_regcheck *c, const struct db *db, uint64_t npages, const char *name,
		uint16_t flags)
{
	const char *bad = NULL;

	if ((db->flags & DB_FLAGS) != flags)
		bad = "has flags it was not created with";
	else if (db->root == NO_PAGE && (db->depth || db->branch || db->leaf || db->overflow ||
			db->entries))
		bad = "is empty but has pages or entries";
	else if (db->root != NO_PAGE && (db->root < NUM_METAS || db->root >= npages))
		bad = "has its root outside the file";
	else if (db->root != NO_PAGE && (db->depth == 0 || db->depth > LMDB_MAX_DEPTH))
		bad = "has a depth out of range";
	else if (db->branch > npages || db->leaf > npages || db->overflow > npages ||
			db->branch + db->leaf + db->overflow > npages)
		bad = "counts more pages than the file has";
	if (!bad)
		return 0;
	return mkv_err(MKV_E_CORRUPT,
			"pool %s: registry.mdb: the %s database %s (root %llu, depth %u)", c->pool,
			name, bad, (unsigned long long)db->root, db->depth);
}

/* Everything LMDB trusts in the meta page it uses. */
static int
meta_check(const struct mkv_regcheck *c, unsigned i, const struct meta *m)
{
	uint64_t psize = lmdb_psize(), npages;
	int rc;

	if (m->pgno != i)
		return mkv_err(MKV_E_CORRUPT,
				"pool %s: registry.mdb: meta page %u is numbered %llu", c->pool, i,
				(unsigned long long)m->pgno);
	if (m->db[0].pad != psize)
		return mkv_err(MKV_E_CORRUPT,
				"pool %s: registry.mdb: meta page %u gives page size %u; LMDB uses %llu here",
				c->pool, i, m->db[0].pad, (unsigned long long)psize);
	if (m->mapsize != c->map_size)
		return mkv_err(MKV_E_CORRUPT,
				"pool %s: registry.mdb: meta page %u gives map size %llu; super records %llu",
				c->pool, i, (unsigned long long)m->mapsize,
				(unsigned long long)c->map_size);
	npages = c->map_size / psize;
	if (m->last_pg < NUM_METAS - 1 || m->last_pg >= npages)
		return mkv_err(MKV_E_CORRUPT,
				"pool %s: registry.mdb: meta page %u gives last page %llu of %llu",
				c->pool, i, (unsigned long long)m->last_pg, (unsigned long long)npages);
	if ((rc = db_check(c, &m->db[0], m->last_pg + 1, "free-page", DB_INTEGERKEY)) ||
	    (rc = db_check(c, &m->db[1], m->last_pg + 1, "main", 0)))
		return rc;
	return 0;
}

int
mkv_regcheck_metas(struct mkv_regcheck *c)
{
	uint64_t psize = lmdb_psize();
	struct meta m[NUM_METAS], again[NUM_METAS];
	unsigned pick, tries = 0;
	int rc;

	if (c->map_size < NUM_METAS * psize)
		return mkv_err(MKV_E_CORRUPT, "pool %s: registry size %llu is too small",
				c->pool, (unsigned long long)c->map_size);
	/* Two equal reads: a writer may be rewriting the older meta meanwhile. */
	do {
		if ((rc = meta_read(c, 0, psize, &m[0])) || (rc = meta_sane(c, 0, &m[0])))
			return rc;
		/* LMDB reads meta page 1 at the page size meta page 0 gives. */
		if (m[0].db[0].pad != psize)
			return mkv_err(MKV_E_CORRUPT,
					"pool %s: registry.mdb: meta page 0 gives page size %u; LMDB uses %llu here",
					c->pool, m[0].db[0].pad, (unsigned long long)psize);
		if ((rc = meta_read(c, 1, psize, &m[1])) || (rc = meta_sane(c, 1, &m[1])) ||
		    (rc = meta_read(c, 0, psize, &again[0])) ||
		    (rc = meta_read(c, 1, psize, &again[1])))
			return rc;
	} while ((memcmp(m[0].raw, again[0].raw, META_BYTES) ||
		  memcmp(m[1].raw, again[1].raw, META_BYTES)) && ++tries < 100);
	pick = m[0].txnid < m[1].txnid;
	c->last_pgno = m[0].last_pg > m[1].last_pg ? m[0].last_pg : m[1].last_pg;
	/* txns then read meta page (txn id & 1): it must be the one picked */
	if ((m[pick].txnid & 1) != pick)
		return mkv_err(MKV_E_CORRUPT,
				"pool %s: registry.mdb: meta page %u is the newer but carries txn %llu",
				c->pool, pick, (unsigned long long)m[pick].txnid);
	return meta_check(c, pick, &m[pick]);
}

/* ---- the walk ---- */

static int
corrupt_page(const struct walk *w, const struct tree *t, uint64_t pgno, const char *what)
{
	return mkv_err(MKV_E_CORRUPT, "pool %s: registry.mdb: page %llu of the %s database %s",
			w->c->pool, (unsigned long long)pgno, t->name, what);
}

/* Mark @p n pages from @p pgno as @p how; each page may be marked once. */
static int
mark(const struct walk *w, const struct tree *t, uint64_t pgno, uint64_t n, int how)
{
	if (pgno < NUM_METAS || pgno >= w->npages || n > w->npages - pgno)
		return mkv_err(MKV_E_CORRUPT,
				"pool %s: registry.mdb: the %s database refers to pages %llu to %llu, past the snapshot's %llu pages",
				w->c->pool, t->name, (unsigned long long)pgno,
				(unsigned long long)(pgno + n - 1), (unsigned long long)w->npages);
	for (uint64_t i = pgno; i < pgno + n; i++) {
		int was = w->seen[i];

		if (was != UNSEEN)
			return mkv_err(MKV_E_CORRUPT,
					"pool %s: registry.mdb: page %llu (%s database) is %s",
					w->c->pool, (unsigned long long)i, t->name,
					was == how ? (how == IN_TREE ? "reached twice" :
					"on the free list twice") : "both free and in use");
		w->seen[i] = (uint8_t)how;
	}
	return 0;
}

static int
read_page(const struct walk *w, uint64_t pgno, uint8_t *buf)
{
	return read_at(w->c, buf, w->psize, pgno * w->psize, "page", pgno);
}

/*
 * The overflow run at @p pgno holding @p dsize bytes: numbered, flagged
 * and long enough, within the snapshot.  With @p out, its bytes too.
 */
static int
overflow(struct walk *w, struct tree *t, uint64_t pgno, uint64_t dsize, uint8_t **out)
{
	uint8_t hdr[PAGE_HDR];
	uint64_t n;
	int rc;

	if (pgno < NUM_METAS || pgno >= w->npages)
		return corrupt_page(w, t, pgno, "is an overflow page past the snapshot's end");
	if ((rc = read_at(w->c, hdr, sizeof(hdr), pgno * w->psize, "page", pgno)))
		return rc;
	n = get32(hdr, PG_OVPAGES);
	if (get64(hdr, PG_PGNO) != pgno || get16(hdr, PG_FLAGS) != P_OVERFLOW)
		return corrupt_page(w, t, pgno, "is not the overflow page its node names");
	if (n == 0 || n > w->npages - pgno)
		return corrupt_page(w, t, pgno, "starts an overflow run past the snapshot's end");
	if (dsize > n * w->psize - PAGE_HDR)
		return corrupt_page(w, t, pgno, "starts an overflow run shorter than its data");
	if ((rc = mark(w, t, pgno, n, IN_TREE)))
		return rc;
	t->overflow += n;
	if (!out)
		return 0;
	if (!(*out = malloc(dsize ? dsize : 1)))
		return mkv_err(MKV_E_NOMEM, "registry check: out of memory");
	rc = read_at(w->c, *out, dsize, pgno * w->psize + PAGE_HDR, "page", pgno);
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

/*
 * A free-list record: txn id -> page numbers (an MDB_IDL: the count, then
 * the pages in descending order), every page below the snapshot's end and
 * on no other list or tree.
 */
static int
free_list(struct walk *w, struct tree *t, uint64_t pgno, const uint8_t *key,
		const uint8_t *data, uint64_t dsize)
{
	uint64_t n, prev = UINT64_MAX;
	int rc;

	if (get64(key, 0) > w->txnid)
		return corrupt_page(w, t, pgno, "lists pages freed by a txn after the snapshot");
	if (dsize < 8 || dsize % 8 || (n = get64(data, 0)) != dsize / 8 - 1)
		return corrupt_page(w, t, pgno, "holds a free list whose count disagrees with its size");
	for (uint64_t i = 1; i <= n; i++) {
		uint64_t p = get64(data, i * 8);

		if (p >= prev)
			return corrupt_page(w, t, pgno, "holds a free list out of order");
		if ((rc = mark(w, t, p, 1, ON_FREE_LIST)))
			return rc;
		prev = p;
	}
	return 0;
}

static int walk_db(struct walk *w, const struct db *db, int kind, const char *name);

/* A named database: its record in the main database's leaf, then its tree. */
static int
named_db(struct walk *w, struct tree *t, uint64_t pgno, const uint8_t *key, unsigned ksize,
		const uint8_t *data, uint64_t dsize)
{
	char name[32];
	struct db db;
	size_t n = 0;

	if (dsize != DB_REC)
		return corrupt_page(w, t, pgno, "holds a database record of the wrong size");
	/* the name, as far as it is printable, for messages */
	while (n < ksize && n < sizeof(name) - 1 && key[n] >= 0x20 && key[n] < 0x7f) {
		name[n] = (char)key[n];
		n++;
	}
	name[n] = '\0';
	db_parse(&db, data);
	return walk_db(w, &db, NAMED_DB, name);
}

/* One node of a leaf page, inside the page already (checked by the caller). */
static int
leaf_node(struct walk *w, struct tree *t, uint64_t pgno, const uint8_t *pg, unsigned ptr)
{
	unsigned nflags = get16(pg, ptr + 4), ksize = get16(pg, ptr + 6);
	uint64_t dsize = get16(pg, ptr) | (uint64_t)get16(pg, ptr + 2) << 16;
	unsigned at = ptr + NODE_HDR + ksize;
	const uint8_t *key = pg + ptr + NODE_HDR;
	uint8_t *big = NULL;
	int rc;

	if (nflags & ~(F_BIGDATA | F_SUBDATA))
		return corrupt_page(w, t, pgno, "has a node with unknown flags");
	if (ksize == 0 || (t->kind == FREE_DB && ksize != 8))
		return corrupt_page(w, t, pgno, "has a key of the wrong size");
	if ((nflags & F_SUBDATA) && (t->kind != MAIN_DB || (nflags & F_BIGDATA)))
		return corrupt_page(w, t, pgno, "has a database record where none can be");
	t->entries++;
	if (nflags & F_BIGDATA) {
		if (at + 8 > w->psize)
			return corrupt_page(w, t, pgno, "has a node that runs past the page");
		rc = overflow(w, t, get64(pg, at), dsize, t->kind == FREE_DB ? &big : NULL);
		if (rc == 0 && t->kind == FREE_DB)
			rc = free_list(w, t, pgno, key, big, dsize);
		free(big);
		return rc;
	}
	if (dsize > w->psize - at)
		return corrupt_page(w, t, pgno, "has a node whose data runs past the page");
	if (nflags & F_SUBDATA)
		return named_db(w, t, pgno, key, ksize, pg + at, dsize);
	if (t->kind == FREE_DB)
		return free_list(w, t, pgno, key, pg + at, dsize);
	return 0;
}

/* A page's header: its number, its kind, its free space; *upper and *nkeys from it. */
static int
page_header(struct walk *w, const struct tree *t, uint64_t pgno, const uint8_t *pg, bool leaf,
		unsigned *upper, unsigned *nkeys)
{
	unsigned lower = get16(pg, PG_LOWER);

	*upper = get16(pg, PG_UPPER);
	if (get64(pg, PG_PGNO) != pgno)
		return corrupt_page(w, t, pgno, "carries another page's number");
	if (get16(pg, PG_FLAGS) != (leaf ? P_LEAF : P_BRANCH))
		return corrupt_page(w, t, pgno, leaf ? "should be a leaf page and is not" :
				"should be a branch page and is not");
	if (lower < PAGE_HDR || lower > *upper || *upper > w->psize || (lower - PAGE_HDR) % 2)
		return corrupt_page(w, t, pgno, "has its free space out of bounds");
	if ((*nkeys = (lower - PAGE_HDR) / 2) == 0)
		return corrupt_page(w, t, pgno, "has no nodes");
	return 0;
}

/* The page @p pgno at @p level (the root is 1) of tree @p t, and below it. */
static int
walk_page(struct walk *w, struct tree *t, uint64_t pgno, unsigned level)
{
	bool leaf = level == t->depth;
	unsigned upper, nkeys;
	uint8_t *pg;
	int rc;

	if ((rc = mark(w, t, pgno, 1, IN_TREE)))
		return rc;
	/* the main database's depth and a named one's, both checked already */
	if (!w->bufs[w->nest] && !(w->bufs[w->nest] = malloc(w->psize)))
		return mkv_err(MKV_E_NOMEM, "registry check: out of memory");
	pg = w->bufs[w->nest++];
	if ((rc = read_page(w, pgno, pg)) ||
	    (rc = page_header(w, t, pgno, pg, leaf, &upper, &nkeys)))
		goto out;
	if (leaf)
		t->leaf++;
	else
		t->branch++;
	for (unsigned i = 0; i < nkeys && rc == 0; i++) {
		unsigned ptr = get16(pg, PAGE_HDR + 2 * i), ksize;

		if (ptr < upper || ptr % 2 || ptr > w->psize - NODE_HDR) {
			rc = corrupt_page(w, t, pgno, "has a node offset outside its node area");
			break;
		}
		ksize = get16(pg, ptr + 6);
		if (ksize > LMDB_MAX_KEY || ksize > w->psize - NODE_HDR - ptr) {
			rc = corrupt_page(w, t, pgno, "has a key that runs past the page");
			break;
		}
		if (t->kind == MAIN_DB && leaf && !w->c->first_key_off)
			w->c->first_key_off = pgno * w->psize + ptr + NODE_HDR;
		if (leaf) {
			rc = leaf_node(w, t, pgno, pg, ptr);
		} else if (i > 0 && t->kind == FREE_DB && ksize != 8) {
			rc = corrupt_page(w, t, pgno, "has a key of the wrong size");
		} else {
			uint64_t child = get16(pg, ptr) | (uint64_t)get16(pg, ptr + 2) << 16 |
					(uint64_t)get16(pg, ptr + 4) << 32;

			rc = walk_page(w, t, child, level + 1);
		}
	}
out:
	w->nest--;
	return rc;
}

/* A database: its record checked, its tree walked, its counts compared. */
static int
walk_db(struct walk *w, const struct db *db, int kind, const char *name)
{
	struct tree t = { .kind = kind, .name = name, .depth = db->depth };
	int rc = db_check(w->c, db, w->npages, name, kind == FREE_DB ? DB_INTEGERKEY : 0);

	if (rc || db->root == NO_PAGE)
		return rc;
	if ((rc = walk_page(w, &t, db->root, 1)))
		return rc;
	if (t.branch != db->branch || t.leaf != db->leaf || t.overflow != db->overflow ||
	    t.entries != db->entries)
		return mkv_err(MKV_E_CORRUPT,
				"pool %s: registry.mdb: the %s database records %llu/%llu/%llu pages and %llu entries; its tree has %llu/%llu/%llu and %llu",
				w->c->pool, name, (unsigned long long)db->branch,
				(unsigned long long)db->leaf, (unsigned long long)db->overflow,
				(unsigned long long)db->entries, (unsigned long long)t.branch,
				(unsigned long long)t.leaf, (unsigned long long)t.overflow,
				(unsigned long long)t.entries);
	w->c->pages += t.branch + t.leaf + t.overflow;
	return 0;
}

int
mkv_regcheck_walk(struct mkv_regcheck *c, uint64_t txnid)
{
	struct walk w = { .c = c, .psize = lmdb_psize(), .txnid = txnid };
	unsigned i = (unsigned)(txnid & 1);
	struct meta m, again;
	int rc;

	c->first_key_off = c->pages = c->free_pages = 0;
	if ((rc = meta_read(c, i, w.psize, &m)) || (rc = meta_read(c, i, w.psize, &again)))
		return rc;
	/* overwritten (or being overwritten) by a writer since the txn began */
	if (m.txnid != txnid || memcmp(m.raw, again.raw, META_BYTES))
		return -EAGAIN;
	if ((rc = meta_sane(c, i, &m)) || (rc = meta_check(c, i, &m)))
		return rc;
	w.npages = m.last_pg + 1;
	if (!(w.seen = calloc(w.npages, 1)))
		return mkv_err(MKV_E_NOMEM, "registry check: out of memory");
	if ((rc = walk_db(&w, &m.db[0], FREE_DB, "free-page")) == 0)
		rc = walk_db(&w, &m.db[1], MAIN_DB, "main");
	for (uint64_t p = 0; rc == 0 && p < w.npages; p++)
		c->free_pages += w.seen[p] == ON_FREE_LIST;
	for (unsigned l = 0; l < 2 * LMDB_MAX_DEPTH; l++)
		free(w.bufs[l]);
	free(w.seen);
	return rc;
}
