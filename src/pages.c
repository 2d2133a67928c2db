/* SPDX-License-Identifier: MIT */
/*
 * pages.c -- the page table: which data pages are free, granted to a
 * client, used by a published value, or quarantined after a delete.
 *
 * Only the lease holder changes page states, inside its registry write
 * txn (commit.c), and it rebuilds the table from the registry when it
 * takes the lease.  Changes are compare-and-swap from the exact word
 * expected, and used/quarantined words carry the holder's generation, so
 * a holder that lost the lease while paused cannot undo what its
 * successor did.  The holder grants pages in batches; a client keeps them
 * in its grant cache (alloc.c).
 */
#include "config.h"

#include "internal.h"

/*
 * Drop our copy of the whole table: a new holder before it rebuilds it, any
 * other process before it reads it.  The holder is its only writer, so
 * while it holds it reads its own words without invalidating them.
 */
void
mkv_pages_fresh(const struct mkv_pool *p)
{
	mkv_share_inval(p, p->pt, p->nr_pages * sizeof(*p->pt));
}

uint64_t
mkv_pages_load(const struct mkv_pool *p, uint64_t page)
{
	return __atomic_load_n(&p->pt[page], __ATOMIC_ACQUIRE);
}

bool
mkv_pages_are(const struct mkv_pool *p, const struct mkv_extent *ext, uint64_t word)
{
	for (uint64_t i = 0; i < ext->npages; i++)
		if (mkv_pages_load(p, ext->page + i) != word)
			return false;
	return true;
}

/* The holder's counts of free and quarantined pages follow n pages moved. */
static void
pages_count(struct mkv_pool *p, uint64_t n, uint64_t from, uint64_t to)
{
	if (MKV_PG_STATE(from) == MKV_PG_FREE)
		p->h.free_pages -= n;
	if (MKV_PG_STATE(to) == MKV_PG_FREE)
		p->h.free_pages += n;
	if (MKV_PG_STATE(from) == MKV_PG_QUARANTINED)
		p->h.quarantined_pages -= n;
	if (MKV_PG_STATE(to) == MKV_PG_QUARANTINED)
		p->h.quarantined_pages += n;
}

static bool
page_cas(struct mkv_pool *p, uint64_t page, uint64_t from, uint64_t to)
{
	return __atomic_compare_exchange_n(&p->pt[page], &from, to, false, __ATOMIC_ACQ_REL,
			__ATOMIC_ACQUIRE);
}

/* Move the extent's pages that are `from` to `to`; returns how many moved. */
uint64_t
mkv_pages_move(struct mkv_pool *p, const struct mkv_extent *ext, uint64_t from, uint64_t to)
{
	uint64_t moved = 0;

	for (uint64_t i = 0; i < ext->npages; i++)
		moved += page_cas(p, ext->page + i, from, to);
	mkv_share_persist(p, &p->pt[ext->page], ext->npages * sizeof(uint64_t));
	pages_count(p, moved, from, to);
	return moved;
}

/*
 * Move every page of ext from `from` to `to`, or none: at the first page
 * that is not `from`, the pages moved so far go back.  True if all moved.
 */
bool
mkv_pages_move_all(struct mkv_pool *p, const struct mkv_extent *ext, uint64_t from, uint64_t to)
{
	uint64_t i = 0;

	while (i < ext->npages && page_cas(p, ext->page + i, from, to))
		i++;
	if (i < ext->npages) {
		while (i--)
			page_cas(p, ext->page + i, to, from);
		return false;
	}
	mkv_share_persist(p, &p->pt[ext->page], ext->npages * sizeof(uint64_t));
	pages_count(p, ext->npages, from, to);
	return true;
}

/* First run of npages free pages at or after start, below end. */
static bool
run_find(const struct mkv_pool *p, uint64_t start, uint64_t end, uint64_t npages,
		uint64_t *at)
{
	uint64_t run = 0;

	for (uint64_t i = start; i < end; i++) {
		if (mkv_pages_load(p, i) != MKV_PG_FREE) {
			run = 0;
			continue;
		}
		if (++run == npages) {
			*at = i + 1 - npages;
			return true;
		}
	}
	return false;
}

static bool
pages_find(struct mkv_pool *p, uint64_t npages, struct mkv_extent *out)
{
	uint64_t rotor = p->state->rotor, at;

	if (rotor >= p->nr_pages)
		rotor = 0;
	if (!run_find(p, rotor, p->nr_pages, npages, &at) &&
	    !run_find(p, 0, rotor + npages - 1 < p->nr_pages ? rotor + npages - 1 : p->nr_pages,
			npages, &at))
		return false;
	out->page = at;
	out->npages = npages;
	/* written back with the clock of ages, at the end of the commit */
	p->state->rotor = at + npages;
	return true;
}

/* Grant a run of npages, marked with the grant word; the holder calls this. */
int
mkv_pages_grant(struct mkv_pool *p, uint64_t npages, uint64_t word, struct mkv_extent *out)
{
	if (npages > p->nr_pages)
		return mkv_err(MKV_E_NOSPC, "pool %s: %llu pages asked, the pool has %llu",
				p->path, (unsigned long long)npages,
				(unsigned long long)p->nr_pages);
	if (!pages_find(p, npages, out)) {
		uint64_t n = mkv_pages_reclaim(p, 0);

		if (n)
			mkv_log(MKV_LOG_INFO, "pool %s: reclaimed %llu pages of dead clients",
					p->path, (unsigned long long)n);
		if (!n || !pages_find(p, npages, out))
			return mkv_err(MKV_E_NOSPC, "pool %s: no run of %llu free pages", p->path,
					(unsigned long long)npages);
	}
	mkv_pages_move(p, out, MKV_PG_FREE, word);
	return 0;
}

/*
 * Free granted pages whose grant is void: those granted with `word` (a
 * client leaving; 0 for none), and those of an older incarnation of their
 * slot or of a dead client (whose claim is revoked first).  Returns the
 * number of pages freed.
 */
uint64_t
mkv_pages_reclaim(struct mkv_pool *p, uint64_t word)
{
	enum { UNKNOWN, VALID, VOID } verdict[MKV_MAX_CLIENTS_LIMIT] = { UNKNOWN };
	uint64_t freed = 0;

	for (uint64_t i = 0; i < p->nr_pages; i++) {
		uint64_t w = mkv_pages_load(p, i), owner;
		uint32_t s;

		if (MKV_PG_STATE(w) != MKV_PG_GRANTED)
			continue;
		s = MKV_PG_SLOT(w);
		if (w != word && s < p->sb->max_clients) {
			/* named: a test stops the holder right before it (t/check_sites.c) */
			owner = mkv_share_load_at(p, &p->slots[s].owner,
					MKV_SITE_NAMED(granted_owner));
			if (MKV_SLOT_INC(owner) == MKV_PG_INC(w)) {
				if (verdict[s] == UNKNOWN)
					verdict[s] = !mkv_client_reap(p, s, owner) ? VALID : VOID;
				if (verdict[s] == VALID)
					continue;
			}
		}
		freed += mkv_pages_move(p, &(struct mkv_extent){ i, 1 }, w, MKV_PG_FREE);
	}
	return freed;
}
