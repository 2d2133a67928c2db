/* SPDX-License-Identifier: MIT */
/*
 * alloc.c -- the page table: which data pages are free, granted to a
 * client, used by a published value, or quarantined after a delete.
 *
 * Only the writer changes page states (inside its registry write txn, see
 * commit.c), so a run found free stays free until it is marked.  The
 * table is derivable from the registry and the client slots; the order of
 * updates in commit.c guarantees that a page marked free is free, whatever
 * crashes in between, so a crash can leak pages but never hand one out
 * twice.
 */
#include "config.h"

#include "internal.h"

uint64_t
mkv_pt_load(const struct mkv_pool *p, uint64_t page)
{
	return __atomic_load_n(&p->pt[page], __ATOMIC_RELAXED);
}

bool
mkv_pages_are(const struct mkv_pool *p, const struct mkv_extent *ext, uint64_t word)
{
	for (uint64_t i = 0; i < ext->npages; i++)
		if (mkv_pt_load(p, ext->page + i) != word)
			return false;
	return true;
}

void
mkv_pages_set(struct mkv_pool *p, const struct mkv_extent *ext, uint64_t word)
{
	for (uint64_t i = 0; i < ext->npages; i++)
		__atomic_store_n(&p->pt[ext->page + i], word, __ATOMIC_RELEASE);
	p->super.persist(&p->pt[ext->page], ext->npages * sizeof(uint64_t));
}

/* First run of npages free pages at or after start, below end. */
static bool
run_find(const struct mkv_pool *p, uint64_t start, uint64_t end, uint64_t npages,
		uint64_t *at)
{
	uint64_t run = 0;

	for (uint64_t i = start; i < end; i++) {
		if (MKV_PG_STATE(mkv_pt_load(p, i)) != MKV_PG_FREE) {
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
	p->state->rotor = at + npages;
	p->super.persist(&p->state->rotor, sizeof(p->state->rotor));
	return true;
}

/* Grant a run of npages to the caller; the writer calls this. */
int
mkv_pages_grant(struct mkv_pool *p, uint64_t npages, struct mkv_extent *out)
{
	if (npages > p->nr_pages)
		return mkv_err(MKV_E_NOSPC, "pool %s: %llu pages asked, the pool has %llu",
				p->path, (unsigned long long)npages,
				(unsigned long long)p->nr_pages);
	if (!pages_find(p, npages, out)) {
		uint64_t n = mkv_pages_reclaim(p, UINT32_MAX);

		if (n)
			mkv_log(MKV_LOG_INFO, "pool %s: reclaimed %llu pages of dead clients",
					p->path, (unsigned long long)n);
		if (!n || !pages_find(p, npages, out))
			return mkv_err(MKV_E_NOSPC, "pool %s: no run of %llu free pages", p->path,
					(unsigned long long)npages);
	}
	mkv_pages_set(p, out, mkv_grant_word(p));
	return 0;
}

/*
 * Free granted pages whose grant is void: those of slot (when not
 * UINT32_MAX), and those of an older incarnation of their slot or of a
 * dead client.  Returns the number of pages freed.
 */
uint64_t
mkv_pages_reclaim(struct mkv_pool *p, uint32_t slot)
{
	enum { UNKNOWN, VALID, VOID } verdict[MKV_MAX_CLIENTS_LIMIT] = { UNKNOWN };
	uint64_t freed = 0;

	for (uint64_t i = 0; i < p->nr_pages; i++) {
		uint64_t w = mkv_pt_load(p, i), owner;
		uint32_t s;

		if (MKV_PG_STATE(w) != MKV_PG_GRANTED)
			continue;
		s = MKV_PG_SLOT(w);
		if (s != slot && s < p->sb->max_clients) {
			owner = __atomic_load_n(&p->slots[s].owner, __ATOMIC_SEQ_CST);
			if (MKV_SLOT_INC(owner) == MKV_PG_INC(w)) {
				if (verdict[s] == UNKNOWN)
					verdict[s] = MKV_SLOT_PID(owner) != 0 &&
						!mkv_client_dead(p, s, owner) ? VALID : VOID;
				if (verdict[s] == VALID)
					continue;
			}
		}
		mkv_pages_set(p, &(struct mkv_extent){ i, 1 }, MKV_PG_FREE);
		freed++;
	}
	return freed;
}
