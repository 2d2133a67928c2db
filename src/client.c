/* SPDX-License-Identifier: MIT */
/*
 * client.c -- client slots in `super` and the liveness of their owners.
 *
 * A slot is claimed by compare-and-swap of its owner word from free (pid 0)
 * to (incarnation + 1, pid).  Its owner then records its start time and
 * tags that record with the owner word it belongs to, so that a checker
 * never compares a new owner's pid with an old owner's start time.  A
 * client on this node is dead when its pid is gone or belongs to a process
 * with another start time.  A client on another node is dead when the
 * beat its service thread advances stood still for the pool's client
 * timeout, by our own clock (no clock is shared between nodes).
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/*
 * Start time of a process, clock ticks since boot; 0 if it is gone or a
 * zombie (dead, not yet reaped by its parent).
 */
static uint64_t
proc_starttime(uint32_t pid)
{
	char path[64], buf[1024], *s, state;
	unsigned long long start = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	s = strrchr(buf, ')');
	/* after "pid (comm)": state is field 3, starttime field 22 */
	if (!s || sscanf(s + 2, "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			&state, &start) != 2 || state == 'Z' || state == 'X')
		return 0;
	return start;
}

bool
mkv_client_dead(const struct mkv_pool *p, uint32_t slot, uint64_t owner)
{
	const struct mkv_slot *s = &p->slots[slot];
	uint32_t pid = MKV_SLOT_PID(owner);
	uint64_t tag, start;

	if (pid == 0)
		return false;
	if (__atomic_load_n(&s->node, __ATOMIC_SEQ_CST) != p->node) {
		struct mkv_watch *w = &p->watch[slot];
		uint64_t beat = __atomic_load_n(&s->beat, __ATOMIC_SEQ_CST), now = mkv_now_ns();

		if (__atomic_load_n(&w->owner, __ATOMIC_RELAXED) != owner ||
		    __atomic_load_n(&w->beat, __ATOMIC_RELAXED) != beat) {
			__atomic_store_n(&w->owner, owner, __ATOMIC_RELAXED);
			__atomic_store_n(&w->beat, beat, __ATOMIC_RELAXED);
			__atomic_store_n(&w->since, now, __ATOMIC_RELAXED);
			return false;
		}
		return now - __atomic_load_n(&w->since, __ATOMIC_RELAXED) >= p->client_timeout_ns;
	}
	if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return true;
	tag = __atomic_load_n(&s->start_tag, __ATOMIC_SEQ_CST);
	start = __atomic_load_n(&s->starttime, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->owner, __ATOMIC_SEQ_CST) != owner || tag != owner)
		return false;
	return proc_starttime(pid) != start;
}

static bool
slot_claim(struct mkv_pool *p, uint32_t i, uint64_t expect, uint32_t pid, uint64_t start)
{
	struct mkv_slot *s = &p->slots[i];
	uint32_t inc = MKV_SLOT_INC(expect) + 1;
	uint64_t owner = MKV_SLOT_OWNER(inc, pid);

	if (!__atomic_compare_exchange_n(&s->owner, &expect, owner, false, __ATOMIC_SEQ_CST,
			__ATOMIC_SEQ_CST))
		return false;
	__atomic_store_n(&s->pin, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->node, p->node, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->flags, p->flags & MKV_RDONLY, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->starttime, start, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->start_tag, owner, __ATOMIC_SEQ_CST);
	p->super.persist(s, sizeof(*s));
	p->slot = i;
	p->incarnation = inc;
	mkv_client_beat(p);
	return true;
}

int
mkv_client_attach(struct mkv_pool *p)
{
	uint32_t pid = (uint32_t)getpid(), n = p->sb->max_clients;
	uint64_t start = proc_starttime(pid), o;

	p->pid = pid;
	for (uint32_t i = 0; i < n; i++) {
		o = __atomic_load_n(&p->slots[i].owner, __ATOMIC_SEQ_CST);
		if (MKV_SLOT_PID(o) == 0 && slot_claim(p, i, o, pid, start))
			return 0;
	}
	/* None free: take over the slot of a client that died without closing. */
	for (uint32_t i = 0; i < n; i++) {
		o = __atomic_load_n(&p->slots[i].owner, __ATOMIC_SEQ_CST);
		if (mkv_client_dead(p, i, o) && slot_claim(p, i, o, pid, start)) {
			mkv_log(MKV_LOG_INFO, "pool %s: took over slot %u of dead client %u",
					p->path, i, MKV_SLOT_PID(o));
			return 0;
		}
	}
	return mkv_err(MKV_E_USERS, "pool %s: all %u client slots are taken", p->path, n);
}

/* Advance our heartbeat, for the nodes that cannot see our process. */
void
mkv_client_beat(struct mkv_pool *p)
{
	struct mkv_slot *s = &p->slots[p->slot];
	struct timespec wall;

	clock_gettime(CLOCK_REALTIME, &wall);
	__atomic_store_n(&s->beat, __atomic_load_n(&s->beat, __ATOMIC_RELAXED) + 1,
			__ATOMIC_SEQ_CST);
	__atomic_store_n(&s->beat_wall_ns,
			(uint64_t)wall.tv_sec * 1000000000ULL + (uint64_t)wall.tv_nsec, __ATOMIC_RELAXED);
	p->super.persist(&s->beat, 2 * sizeof(uint64_t));
}

/* Count a lookup in our slot; the counters outlive the slot's owners. */
void
mkv_client_count(struct mkv_pool *p, uint64_t hits, uint64_t misses)
{
	struct mkv_slot *s = &p->slots[p->slot];

	if (hits)
		__atomic_add_fetch(&s->hits, hits, __ATOMIC_RELAXED);
	if (misses)
		__atomic_add_fetch(&s->misses, misses, __ATOMIC_RELAXED);
}

MKV_EXPORT int
mkv_pool_clients(struct mkv_pool *pool, struct mkv_client *out, size_t max, size_t *n)
{
	uint64_t *granted;
	struct timespec wall;
	size_t k = 0;

	mkv_err_clear();
	if (!pool || !n || (!out && max))
		return mkv_err(MKV_E_INVAL, "mkv_pool_clients: NULL argument");
	granted = calloc(pool->sb->max_clients, sizeof(*granted));
	if (!granted)
		return mkv_err(MKV_E_NOMEM, "mkv_pool_clients: out of memory");
	for (uint64_t i = 0; i < pool->nr_pages; i++) {
		uint64_t w = mkv_pt_load(pool, i);

		if (MKV_PG_STATE(w) == MKV_PG_GRANTED && MKV_PG_SLOT(w) < pool->sb->max_clients &&
		    MKV_PG_INC(w) == MKV_SLOT_INC(pool->slots[MKV_PG_SLOT(w)].owner))
			granted[MKV_PG_SLOT(w)]++;
	}
	clock_gettime(CLOCK_REALTIME, &wall);
	for (uint32_t i = 0; i < pool->sb->max_clients; i++) {
		const struct mkv_slot *s = &pool->slots[i];
		uint64_t owner = __atomic_load_n(&s->owner, __ATOMIC_SEQ_CST), node;
		struct mkv_client *c;

		if (MKV_SLOT_PID(owner) == 0)
			continue;
		if (k++ >= max)
			continue;
		c = &out[k - 1];
		memset(c, 0, sizeof(*c));
		c->slot = i;
		c->pid = MKV_SLOT_PID(owner);
		node = __atomic_load_n(&s->node, __ATOMIC_SEQ_CST);
		for (uint32_t j = 0; j < MKV_MAX_NODES; j++)
			if (__atomic_load_n(&pool->nodes[j].id, __ATOMIC_SEQ_CST) == node)
				memcpy(c->node, pool->nodes[j].name, MKV_NODE_NAME_MAX);
		c->alive = !mkv_client_dead(pool, i, owner);
		c->rdonly = (__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & MKV_RDONLY) != 0;
		c->holder = __atomic_load_n(&pool->state->lease.holder_node, __ATOMIC_SEQ_CST) != 0 &&
			__atomic_load_n(&pool->state->lease.holder_slot, __ATOMIC_SEQ_CST) == i &&
			__atomic_load_n(&pool->state->lease.holder_pid, __ATOMIC_SEQ_CST) == c->pid;
		c->pin = __atomic_load_n(&s->pin, __ATOMIC_SEQ_CST);
		c->pages_granted = granted[i];
		c->heartbeat_age_ms = ((int64_t)wall.tv_sec * 1000000000LL + wall.tv_nsec -
				(int64_t)__atomic_load_n(&s->beat_wall_ns, __ATOMIC_RELAXED)) / 1000000;
	}
	free(granted);
	*n = k;
	return 0;
}

void
mkv_client_detach(struct mkv_pool *p)
{
	struct mkv_slot *s = &p->slots[p->slot];

	__atomic_store_n(&s->pin, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->start_tag, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->owner, MKV_SLOT_OWNER(p->incarnation, 0), __ATOMIC_SEQ_CST);
	p->super.persist(s, sizeof(*s));
	p->slot = UINT32_MAX;
}
