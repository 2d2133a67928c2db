/* SPDX-License-Identifier: MIT */
/*
 * nodes.c -- the node table: this process's node, its entry found or
 * claimed (between hosts through a splitter), its beat, and the entries
 * of nodes left with no live client freed.  The lease's bakery runs over
 * the entries (lease.c).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/*
 * LOAD: a word another node may have written.  PEEK: one of our own node's
 * words, or one whose line was just invalidated.  A STORE is followed by
 * mkv_share_persist() of what it changed.
 */
#define LOAD(x) mkv_share_load(p, &(x))
#define PEEK(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)

/* This process's node: the name given, else $MARUKV_NODE, else the host name. */
int
mkv_node_name(struct mkv_pool *p, const char *name)
{
	char host[256] = "";
	int rc;

	if (!name || !*name)
		name = getenv("MARUKV_NODE");
	if (!name || !*name) {
		gethostname(host, sizeof(host) - 1);
		host[MKV_NODE_NAME_MAX] = '\0';
		name = host;
	}
	if ((rc = mkv_valid_node_name(name)))
		return rc;
	memcpy(p->node_name, name, strlen(name) + 1);
	p->node = mkv_hash_fnv1a(name, strlen(name)) | 1;
	p->node_idx = UINT32_MAX;
	return 0;
}

/*
 * Whether node entry i (of node id) is in use: named by the lease, or the
 * node of a client slot whose owner is not known dead.  In a coherent
 * pool a process claims its client slot before it looks for its node's
 * entry (both under the pool directory's lock), so a node with no such
 * slot has nobody to use its entry.  In a non-coherent pool the entry
 * comes first, and its range of slots (client.c) is what counts: the
 * holder, the only one to free entries there, revokes the dead claims of
 * the range on the way.
 */
static bool
node_in_use(struct mkv_pool *p, uint32_t i, uint64_t id)
{
	uint32_t lo, hi;

	if (LOAD(p->state->lease.holder_node) == i + 1)
		return true;
	if (p->noncoherent) {
		mkv_client_range(p, i, &lo, &hi);
		/* named: a test stops the holder here (t/check_leasesites.c) */
		for (uint32_t s = lo; s < hi; s++)
			if (!mkv_client_reap(p, s, mkv_share_load_at(p, &p->slots[s].owner,
					MKV_SITE_NAMED(node_in_use))))
				return true;
		return false;
	}
	for (uint32_t s = 0; s < p->sb->max_clients; s++) {
		uint64_t owner = LOAD(p->slots[s].owner);

		if (MKV_SLOT_PID(owner) && LOAD(p->slots[s].node) == id &&
		    !mkv_client_dead(p, s, owner))
			return true;
	}
	return false;
}

/*
 * In a non-coherent pool a process takes its node's entry before it claims
 * a slot of the entry's range, and the directory lock that serialises the
 * two with the holder's reclamation is its host's own: an entry that a
 * node of another host has just taken looks unused until its slot is
 * claimed.  So an entry is freed only once it looked unused, with the same
 * id and beat (which every attach moves: mkv_node_attach()), for the
 * client timeout (by our clock, over the holder's passes): longer than an
 * attach takes, unless the attaching process is paused that long, which is
 * the pause a client on another host may not suffer (see GUARANTEES in
 * marukv(7)).
 */
static bool
node_idle(struct mkv_pool *p, uint32_t i, uint64_t id)
{
	struct mkv_watch *w = &p->node_watch[i];
	uint64_t now = mkv_clock_now(), beat;

	if (!p->noncoherent)
		return true;
	/* named: a test stops the holder here (t/check_leasesites.c) */
	beat = mkv_share_load_at(p, &p->nodes[i].beat, MKV_SITE_NAMED(node_idle));
	if (w->owner != id || w->beat != beat || w->since == 0) {
		w->owner = id;
		w->beat = beat;
		w->since = now;
		return false;
	}
	return now - w->since >= p->client_timeout_ns;
}

/*
 * Free the entries of nodes none of whose clients is alive; returns how
 * many.  Called with the pool directory locked, which serialises it with
 * claims on this host.  (Between hosts, a node that attaches while another
 * host frees its entry loses it; nodes of other hosts are judged by their
 * clients' heartbeats, so that takes a client timeout of silence first.)
 * In a non-coherent pool only the lease holder frees entries, inside its
 * write window: one party at a time across hosts, and the one that also
 * revokes claims, so that a node whose processes were only paused finds
 * its claims revoked before its entry is anyone else's.
 */
uint32_t
mkv_nodes_reclaim(struct mkv_pool *p)
{
	uint32_t freed = 0;

	if (p->noncoherent && !p->h.holding)
		return 0;
	for (uint32_t i = 0; i < p->sb->max_nodes; i++) {
		struct mkv_node *n = &p->nodes[i];
		uint64_t id = LOAD(n->id);
		/*
		 * looked at under an id too: a free stores into the door's
		 * line, and a store of the value that a copy from before the
		 * door closed holds (open) would leave nothing to write back
		 */
		uint64_t door = LOAD(n->door);

		/* a free entry whose splitter's door closed on no winner */
		if (id == 0 && p->noncoherent)
			id = door;
		if (id == 0 || id == p->node || node_in_use(p, i, id)) {
			p->node_watch[i].since = 0;
			continue;
		}
		if (!node_idle(p, i, id))
			continue;
		/* id, name and the bakery's words share a line: one write-back */
		STORE(n->id, 0);
		STORE(n->number, 0);
		STORE(n->choosing, 0);
		memset(n->name, 0, sizeof(n->name));
		mkv_share_persist(p, n, MKV_CACHELINE);
		/*
		 * the door opens last: the entry is free by then (race stays:
		 * a node reads it only after storing its own id there);
		 * named: a test stops the holder right after it
		 * (t/check_leasesites.c)
		 */
		STORE(n->door, 0);
		mkv_share_persist_at(p, &n->door, sizeof(n->door), MKV_SITE_NAMED(node_free));
		freed++;
	}
	if (freed)
		mkv_log(MKV_LOG_INFO, "pool %s: freed %u node table entries of dead nodes", p->path,
				freed);
	return freed;
}

/*
 * In a non-coherent pool, an attach moves its node's beat: the holder then
 * does not free an idle entry that a process of the node is taking up
 * again (node_idle()).
 */
static int
node_touch(struct mkv_pool *p)
{
	if (p->noncoherent)
		mkv_node_beat(p);
	return 0;
}

/*
 * Between hosts, a free entry is taken through Moir and Anderson's
 * splitter on two lines of its own: of the nodes that go through it at
 * once, at most one comes out holding the entry, whatever the timing, with
 * no atomic operation: only loads after an invalidation and stores written
 * back before the next step (mkv_share_persist() waits for the write-back),
 * which is sequential consistency for these two words.  A node that stops
 * at neither test is alone since the door closed.  The others try the next
 * entry; an entry whose door closed with no node in it (every node that
 * entered lost, or the winner died before it wrote its id) the holder
 * frees after a client timeout like any unused one.
 */
static bool
node_split(struct mkv_pool *p, struct mkv_node *n)
{
	/* the steps a test stops a node at by name (t/check_hosts.c, t/check_leasesites.c) */
	mkv_share_inval_at(p, &n->door, sizeof(n->door), MKV_SITE_NAMED(node_split_enter));
	if (PEEK(n->door))
		return false;
	STORE(n->race, p->node);
	mkv_share_persist(p, &n->race, sizeof(n->race));
	if (LOAD(n->door))
		return false;
	STORE(n->door, p->node);
	mkv_share_persist_at(p, &n->door, sizeof(n->door), MKV_SITE_NAMED(node_split_close));
	return mkv_share_load_at(p, &n->race, MKV_SITE_NAMED(node_split_race)) == p->node;
}

static bool
node_claim(struct mkv_pool *p)
{
	for (uint32_t i = 0; i < p->sb->max_nodes; i++) {
		struct mkv_node *n = &p->nodes[i];

		if (LOAD(n->id) != 0 || (p->noncoherent && !node_split(p, n)))
			continue;
		memset(n->name, 0, sizeof(n->name));
		memcpy(n->name, p->node_name, strlen(p->node_name));
		STORE(n->id, p->node);
		mkv_share_persist(p, n, MKV_CACHELINE);
		p->node_idx = i;
		return true;
	}
	return false;
}

/*
 * Find this node's entry in the node table, or claim a free one, freeing
 * dead nodes' entries if none is free.  Called with the pool directory
 * locked, which serialises claims on one host, after the client slot is
 * claimed in a coherent pool, before it in a non-coherent one (whose slots
 * belong to node entries); between hosts claims go through each entry's
 * splitter (node_split()).  A read-only handle claims one only in a
 * non-coherent pool, for its slot.
 */
int
mkv_node_attach(struct mkv_pool *p)
{
	for (uint32_t i = 0; i < p->sb->max_nodes; i++) {
		struct mkv_node *n = &p->nodes[i];

		/* named: a test stops a node between this look and its beat (t/check_leasesites.c) */
		mkv_share_inval_at(p, n, MKV_CACHELINE, MKV_SITE_NAMED(node_attach));
		if (PEEK(n->id) == p->node && strncmp(n->name, p->node_name, sizeof(n->name)) == 0) {
			p->node_idx = i;
			return node_touch(p);
		}
	}
	if ((p->flags & MKV_RDONLY) && !p->noncoherent)
		return 0;
	if (node_claim(p) || (mkv_nodes_reclaim(p) && node_claim(p)))
		return node_touch(p);
	return mkv_err(MKV_E_USERS, "pool %s: the node table is full: its %u entries are all nodes with live clients",
			p->path, p->sb->max_nodes);
}

/* Move our node's beat: it is alive (the bakery skips a node whose beat stood still). */
void
mkv_node_beat(struct mkv_pool *p)
{
	struct mkv_node *me = &p->nodes[p->node_idx];

	STORE(me->beat, PEEK(me->beat) + 1);
	/* named: a test stops a node right after it (t/check_leasesites.c) */
	mkv_share_persist_at(p, &me->beat, sizeof(me->beat), MKV_SITE_NAMED(node_beat));
}
