/* SPDX-License-Identifier: MIT */
/*
 * client.c -- client slots in `super` and the liveness of their owners.
 *
 * A slot is claimed by compare-and-swap of its owner word from free (pid 0)
 * to (incarnation + 1, pid).  Its owner then records its start time and
 * tags that record with the owner word it belongs to, so that a checker
 * never compares a new owner's pid with an old owner's start time.  A
 * client on this node is dead when its pid is gone or belongs to a process
 * with another start time.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
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
	if (__atomic_load_n(&s->node, __ATOMIC_SEQ_CST) != p->node)
		return false;
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
	return true;
}

int
mkv_client_attach(struct mkv_pool *p)
{
	uint32_t pid = (uint32_t)getpid(), n = p->sb->max_clients;
	uint64_t start = proc_starttime(pid), o;

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
