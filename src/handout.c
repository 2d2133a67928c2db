/* SPDX-License-Identifier: MIT */
/*
 * handout.c -- what a handle handed out: its live buffers and views.
 *
 * A struct mkv_buf or mkv_view is the caller's memory, so the library
 * cannot trust it: a copy of a buffer that was published, a view released
 * twice through a copy, or a length raised past the allocation would
 * otherwise publish pages another buffer owns, or unpin another view.  Each
 * buffer and view therefore names a record here by a token (index and
 * serial number), and every call checks the struct against its record.  A
 * record is live, busy (a publish is using it: a second call on the same
 * buffer, from another thread or a copy, is refused meanwhile) or free; a
 * freed record's serial number changes, so no old token matches it again.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { FREE, LIVE, BUSY };

int
mkv_handout_init(struct mkv_handout *h)
{
	memset(h, 0, sizeof(*h));
	h->free_head = UINT32_MAX;
	if (pthread_mutex_init(&h->lock, NULL))
		return mkv_err(MKV_E_NOMEM, "handout: mutex");
	return 0;
}

void
mkv_handout_fini(struct mkv_handout *h)
{
	free(h->v);
	pthread_mutex_destroy(&h->lock);
}

/* A new live record of (a, b); its token in *token. */
int
mkv_handout_add(struct mkv_handout *h, uint64_t a, uint64_t b, uint64_t *token)
{
	struct mkv_handout_rec *r;
	uint32_t i;

	pthread_mutex_lock(&h->lock);
	if (h->free_head == UINT32_MAX) {
		uint32_t cap = h->cap ? 2 * h->cap : 64;
		struct mkv_handout_rec *v;

		if (h->cap >= UINT32_MAX / 2 || !(v = realloc(h->v, cap * sizeof(*v)))) {
			pthread_mutex_unlock(&h->lock);
			return mkv_err(MKV_E_NOMEM, "out of memory for the handle's records");
		}
		for (uint32_t j = h->cap; j < cap; j++)
			v[j] = (struct mkv_handout_rec){ .next = j + 1 < cap ? j + 1 : UINT32_MAX };
		h->v = v;
		h->free_head = h->cap;
		h->cap = cap;
	}
	i = h->free_head;
	r = &h->v[i];
	h->free_head = r->next;
	r->state = LIVE;
	r->a = a;
	r->b = b;
	*token = ((uint64_t)r->serial << 32) | i;
	pthread_mutex_unlock(&h->lock);
	return 0;
}

static struct mkv_handout_rec *
find(struct mkv_handout *h, uint64_t token, unsigned state)
{
	uint32_t i = (uint32_t)token;

	if (i >= h->cap || h->v[i].state != state || h->v[i].serial != (uint32_t)(token >> 32))
		return NULL;
	return &h->v[i];
}

static void
release(struct mkv_handout *h, struct mkv_handout_rec *r)
{
	r->state = FREE;
	r->serial++;
	r->next = h->free_head;
	h->free_head = (uint32_t)(r - h->v);
}

/*
 * The live record of token: copied to *a, *b, and then freed (take) or
 * made busy (begin).  False if no live record has that token.
 */
bool
mkv_handout_take(struct mkv_handout *h, uint64_t token, uint64_t *a, uint64_t *b)
{
	struct mkv_handout_rec *r;

	pthread_mutex_lock(&h->lock);
	if ((r = find(h, token, LIVE))) {
		*a = r->a;
		*b = r->b;
		release(h, r);
	}
	pthread_mutex_unlock(&h->lock);
	return r != NULL;
}

bool
mkv_handout_begin(struct mkv_handout *h, uint64_t token, uint64_t *a, uint64_t *b)
{
	struct mkv_handout_rec *r;

	pthread_mutex_lock(&h->lock);
	if ((r = find(h, token, LIVE))) {
		*a = r->a;
		*b = r->b;
		r->state = BUSY;
	}
	pthread_mutex_unlock(&h->lock);
	return r != NULL;
}

/* End what mkv_handout_begin() began: the record is live again, or freed. */
void
mkv_handout_end(struct mkv_handout *h, uint64_t token, bool keep)
{
	struct mkv_handout_rec *r;

	pthread_mutex_lock(&h->lock);
	if ((r = find(h, token, BUSY))) {
		if (keep)
			r->state = LIVE;
		else
			release(h, r);
	}
	pthread_mutex_unlock(&h->lock);
}
