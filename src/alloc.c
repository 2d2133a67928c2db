/* SPDX-License-Identifier: MIT */
/*
 * alloc.c -- allocation: mkv_alloc(), and a client's cache of the pages
 * the holder granted it, from which an allocation takes without asking
 * anyone; pages of a buffer not published go back into it
 * (mkv_alloc_keep(), from publish.c), or to the holder.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * A grant holds as many allocations as the one asking for it times mult:
 * GRANT_MULT_MIN at first, doubled each time the cache runs dry within
 * GRANT_QUICK_NS of the last grant, up to GRANT_MULT_MAX, and halved each
 * time it lasted longer than GRANT_SLOW_NS.  A client that allocates small
 * values fast asks the holder once per hundreds of them, not once per
 * four, and at most about 2 / GRANT_QUICK_NS times a second while under
 * the caps; one that allocates seldom holds few pages it does not use.
 */
#define GRANT_MULT_MIN 4U
#define GRANT_MULT_MAX 256U
#define GRANT_QUICK_NS (10 * 1000 * 1000ULL)
#define GRANT_SLOW_NS (100 * 1000 * 1000ULL)

int
mkv_grants_init(struct mkv_grants *g)
{
	g->ext = NULL;
	g->n = g->cap = 0;
	g->mult = GRANT_MULT_MIN;
	g->last_ns = 0;
	if (pthread_mutex_init(&g->lock, NULL))
		return mkv_err(MKV_E_NOMEM, "grants: mutex");
	return 0;
}

void
mkv_grants_fini(struct mkv_grants *g)
{
	free(g->ext);
	pthread_mutex_destroy(&g->lock);
}

/* Carve npages off the first cached extent that has them. */
bool
mkv_grants_take(struct mkv_pool *p, uint64_t npages, struct mkv_extent *out)
{
	struct mkv_grants *g = &p->grants;
	bool found = false;

	pthread_mutex_lock(&g->lock);
	for (unsigned i = 0; i < g->n; i++) {
		struct mkv_extent *e = &g->ext[i];

		if (e->npages < npages)
			continue;
		*out = (struct mkv_extent){ e->page, npages };
		e->page += npages;
		e->npages -= npages;
		if (e->npages == 0)
			*e = g->ext[--g->n];
		found = true;
		break;
	}
	pthread_mutex_unlock(&g->lock);
	return found;
}

uint64_t
mkv_grants_cached(struct mkv_pool *p)
{
	uint64_t n = 0;

	pthread_mutex_lock(&p->grants.lock);
	for (unsigned i = 0; i < p->grants.n; i++)
		n += p->grants.ext[i].npages;
	pthread_mutex_unlock(&p->grants.lock);
	return n;
}

/*
 * How many pages to ask for, the cache being short of npages: npages
 * times the multiplier, at most cap (at least npages).
 */
uint64_t
mkv_grants_size(struct mkv_pool *p, uint64_t npages, uint64_t cap)
{
	struct mkv_grants *g = &p->grants;
	uint64_t now = mkv_clock_now(), n;

	pthread_mutex_lock(&g->lock);
	if (g->last_ns && now - g->last_ns < GRANT_QUICK_NS && g->mult < GRANT_MULT_MAX)
		g->mult *= 2;
	else if (g->last_ns && now - g->last_ns > GRANT_SLOW_NS && g->mult > GRANT_MULT_MIN)
		g->mult /= 2;
	g->last_ns = now;
	n = npages <= cap / g->mult ? npages * g->mult : cap;
	pthread_mutex_unlock(&g->lock);
	return n > npages ? n : npages;
}

/* Any one cached extent, whole (to hand it back). */
bool
mkv_grants_take_any(struct mkv_pool *p, struct mkv_extent *out)
{
	struct mkv_grants *g = &p->grants;
	bool found;

	pthread_mutex_lock(&g->lock);
	found = g->n > 0;
	if (found)
		*out = g->ext[--g->n];
	pthread_mutex_unlock(&g->lock);
	return found;
}

/* Keep granted pages for later allocations, merging with a neighbour. */
void
mkv_grants_put(struct mkv_pool *p, const struct mkv_extent *ext)
{
	struct mkv_grants *g = &p->grants;

	pthread_mutex_lock(&g->lock);
	for (unsigned i = 0; i < g->n; i++) {
		struct mkv_extent *e = &g->ext[i];

		if (e->page + e->npages == ext->page) {
			e->npages += ext->npages;
			goto out;
		}
		if (ext->page + ext->npages == e->page) {
			e->page = ext->page;
			e->npages += ext->npages;
			goto out;
		}
	}
	if (g->n == g->cap) {
		unsigned cap = g->cap ? g->cap * 2 : 16;
		struct mkv_extent *v = realloc(g->ext, cap * sizeof(*v));

		if (!v)  /* the pages stay granted to us; close returns them */
			goto out;
		g->ext = v;
		g->cap = cap;
	}
	g->ext[g->n++] = *ext;
out:
	pthread_mutex_unlock(&g->lock);
}

/*
 * How many pages a client keeps granted beyond its buffers: the clients
 * together cannot hoard more than a quarter of the pool.
 */
static uint64_t
grant_cap(const struct mkv_pool *p)
{
	return p->nr_pages / (4 * (uint64_t)p->sb->max_clients);
}

/* Pages of a buffer not published: keep them for the next one, or give them back. */
void
mkv_alloc_keep(struct mkv_pool *p, const struct mkv_extent *ext)
{
	struct mkv_req back = { .op = MKV_OP_UNGRANT, .ext = *ext };

	/* never cache pages the table no longer shows as ours */
	if (!mkv_pages_are(p, ext, mkv_pages_grant_word(p->slot, p->incarnation)))
		return;
	if (mkv_grants_cached(p) + ext->npages <= grant_cap(p))
		mkv_grants_put(p, ext);
	else
		mkv_holder_write(p, &back, mkv_holder_timeout(p));
}

/*
 * Pages for one allocation: from this handle's grants, else a new grant
 * from the holder, several allocations' worth at a time (above).
 */
static int
grant_take(struct mkv_pool *p, uint64_t npages, struct mkv_extent *out)
{
	struct mkv_req r = { .op = MKV_OP_GRANT };
	int rc;

	if (mkv_grants_take(p, npages, out))
		return 0;
	r.ext.npages = mkv_grants_size(p, npages, grant_cap(p));
	r.length = npages;
	rc = mkv_holder_call(p, &r);
	if (rc == MKV_E_NOSPC) {
		/* Short of pages: hand back what we cache, then ask for just these. */
		struct mkv_req back = { .op = MKV_OP_UNGRANT };

		while (mkv_grants_take_any(p, &back.ext))
			mkv_holder_call(p, &back);
		r = (struct mkv_req){ .op = MKV_OP_GRANT, .ext.npages = npages };
		rc = mkv_holder_call(p, &r);
	}
	if (rc)
		return rc;
	if (r.ext.npages < npages || r.ext.page >= p->nr_pages ||
	    r.ext.npages > p->nr_pages - r.ext.page)
		return mkv_err(MKV_E_CORRUPT, "pool %s: the lease holder granted pages %llu+%llu for %llu",
				p->path, (unsigned long long)r.ext.page,
				(unsigned long long)r.ext.npages, (unsigned long long)npages);
	/* Ours first: other threads of the handle take from the cache meanwhile. */
	*out = (struct mkv_extent){ r.ext.page, npages };
	if (r.ext.npages > npages)
		mkv_grants_put(p, &(struct mkv_extent){ r.ext.page + npages, r.ext.npages - npages });
	return 0;
}

MKV_EXPORT int
mkv_alloc(struct mkv_pool *pool, size_t len, struct mkv_buf *buf)
{
	struct mkv_extent ext;
	uint64_t token;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_writable(pool, "mkv_alloc")))
		return rc;
	if (!buf)
		return mkv_err(MKV_E_INVAL, "mkv_alloc: buf is NULL");
	memset(buf, 0, sizeof(*buf));
	if (len == 0)
		return mkv_err(MKV_E_INVAL, "mkv_alloc: length 0");
	if (len > pool->nr_pages * pool->page_size)
		return mkv_err(MKV_E_NOSPC, "mkv_alloc: %zu bytes is more than the pool holds", len);
	if ((rc = grant_take(pool, mkv_pool_pages_for(pool, len), &ext)))
		return rc;
	if ((rc = mkv_handout_add(&pool->bufs, ext.page, len, &token))) {
		mkv_alloc_keep(pool, &ext);
		return rc;
	}
	buf->data = mkv_pool_page_addr(pool, ext.page);
	buf->len = len;
	buf->priv_[0] = token;
	buf->priv_[1] = pool->cookie;
	mkv_err_clear();
	return 0;
}
