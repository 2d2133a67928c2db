/* SPDX-License-Identifier: MIT */
/*
 * admin.c -- the pool-wide calls: statistics, clients, progress,
 * reclamation, eviction on demand and the watermarks.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "internal.h"

/* Drop our copies of the lease record, the node table, the client slots, the page table. */
static void
tables_fresh(const struct mkv_pool *p)
{
	mkv_share_inval(p, p->state, sizeof(*p->state));
	mkv_share_inval(p, p->nodes, p->sb->max_nodes * sizeof(*p->nodes));
	mkv_share_inval(p, p->slots, p->sb->max_clients * sizeof(*p->slots));
	mkv_pages_fresh(p);
}

static void
lease_stat(const struct mkv_pool *p, struct mkv_stat *st)
{
	const struct mkv_lease *l = &p->state->lease;
	uint32_t node = __atomic_load_n(&l->holder_node, __ATOMIC_SEQ_CST);

	st->lease_generation = __atomic_load_n(&l->generation, __ATOMIC_SEQ_CST);
	st->lease_period_ms = p->sb->lease_period_ms;
	st->lease_heartbeat_age_ms = -1;
	st->requests_pending = mkv_rq_pending(p);
	st->client_timeout_ms = p->sb->client_timeout_ms;
	st->backing = p->backing;
	st->coherence = p->sb->coherence;
	memcpy(st->dax_device, p->dax_device, sizeof(st->dax_device));
	st->dax_align = p->dax_align;
	for (uint32_t i = 0; i < p->sb->max_clients; i++) {
		st->hits += __atomic_load_n(&p->slots[i].hits, __ATOMIC_RELAXED);
		st->misses += __atomic_load_n(&p->slots[i].misses, __ATOMIC_RELAXED);
	}
	if (node == 0 || node > p->sb->max_nodes)
		return;
	st->lease_holder_pid = __atomic_load_n(&l->holder_pid, __ATOMIC_SEQ_CST);
	st->lease_holder_slot = __atomic_load_n(&l->holder_slot, __ATOMIC_SEQ_CST);
	st->lease_holder_node_idx = node - 1;
	memcpy(st->lease_holder_node, p->nodes[node - 1].name, MKV_NODE_NAME_MAX);
	st->lease_heartbeat_age_ms =
		mkv_clock_age_ms(__atomic_load_n(&p->nodes[node - 1].lease_beat_wall_ns, __ATOMIC_SEQ_CST));
}

/* What the registry says: entries, bytes, evictions, watermarks, its use of its file. */
static int
registry_stat(struct mkv_pool *p, struct mkv_stat *st)
{
	uint64_t wm_low = 0, wm_high = 0, entries = 0;
	struct mkv_txn *txn;
	int rc;

	if ((rc = mkv_reg_rtxn(p, &txn)))
		return rc;
	if (!(rc = mkv_reg_count(p, txn, MKV_TABLE_ENTRIES, &entries)) &&
	    !(rc = mkv_reg_meta_get(p, txn, "bytes", &st->bytes_stored)) &&
	    !(rc = mkv_reg_meta_get(p, txn, "evictions", &st->evictions)) &&
	    !(rc = mkv_reg_meta_get(p, txn, "wm_low", &wm_low)))
		rc = mkv_reg_meta_get(p, txn, "wm_high", &wm_high);
	mkv_reg_rtxn_done(p, txn);
	if (rc)
		return rc;
	st->entries = entries;
	st->low_watermark = (uint32_t)wm_low;
	st->high_watermark = (uint32_t)wm_high;
	st->registry_size = p->sb->registry_size;
	st->registry_used = mkv_reg_used(p);
	mkv_reg_fresh_counts(p, &st->registry_fresh_logged, &st->registry_fresh_whole);
	return 0;
}

/* The page table's states, counted. */
static void
pages_stat(struct mkv_pool *p, struct mkv_stat *st)
{
	st->page_size = (uint32_t)p->page_size;
	st->pages_total = p->nr_pages;
	for (uint64_t i = 0; i < p->nr_pages; i++) {
		switch (MKV_PG_STATE(mkv_pages_load(p, i))) {
		case MKV_PG_FREE:
			st->pages_free++;
			break;
		case MKV_PG_GRANTED:
			st->pages_granted++;
			break;
		case MKV_PG_USED:
			st->pages_used++;
			break;
		default:
			st->pages_quarantined++;
			break;
		}
	}
}

MKV_EXPORT int
mkv_pool_stat(struct mkv_pool *pool, struct mkv_stat *st)
{
	struct stat fst;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_pool_stat")))
		return rc;
	if (!st)
		return mkv_err(MKV_E_INVAL, "mkv_pool_stat: st is NULL");
	memset(st, 0, sizeof(*st));
	if ((rc = registry_stat(pool, st)))
		return rc;
	st->format_version = pool->sb->version;
	tables_fresh(pool);
	mkv_remote_stat(pool, st);
	pages_stat(pool, st);
	st->max_clients = pool->sb->max_clients;
	if (fstat(pool->super_fd, &fst) == 0) {
		st->mode = fst.st_mode & 07777;
		st->gid = (fst.st_mode & S_IRWXG) ? (uint32_t)fst.st_gid : 0;
	}
	st->max_nodes = pool->sb->max_nodes;
	for (uint32_t i = 0; i < st->max_nodes; i++)
		st->nodes += __atomic_load_n(&pool->nodes[i].id, __ATOMIC_RELAXED) != 0;
	for (uint32_t i = 0; i < st->max_clients; i++)
		st->clients += mkv_client_claimed(pool, i,
				__atomic_load_n(&pool->slots[i].owner, __ATOMIC_RELAXED));
	memcpy(st->uuid, pool->sb->uuid, sizeof(st->uuid));
	lease_stat(pool, st);
	return 0;
}

MKV_EXPORT void
mkv_pool_set_progress(struct mkv_pool *pool, mkv_progress_fn fn, void *arg)
{
	if (!pool)
		return;
	pool->progress = fn;
	pool->progress_arg = arg;
}

/* Report progress to the handle's callback, at most five times a second. */
void
mkv_admin_progress(struct mkv_pool *p, uint64_t done, uint64_t total, uint64_t *last_ns)
{
	uint64_t now;

	if (!p->progress)
		return;
	now = mkv_clock_now();
	if (done < total && now - *last_ns < 200000000ULL)
		return;
	*last_ns = now;
	p->progress(done, total, p->progress_arg);
}

/*
 * A client of another node is judged by watching its heartbeat for the
 * client timeout: wait until every such client has either beaten (alive)
 * or stood still that long (dead), so that one call can tell.
 */
static int
await_verdicts(struct mkv_pool *p)
{
	uint32_t n = p->sb->max_clients;
	uint64_t *beat0 = calloc(n, sizeof(*beat0)), start = mkv_clock_now();
	uint8_t *todo = calloc(n, 1);
	bool pending = true;
	struct timespec nap = { 0, 20 * 1000 * 1000 };

	if (!beat0 || !todo) {
		free(beat0);
		free(todo);
		return mkv_err(MKV_E_NOMEM, "mkv_pool_reclaim: out of memory");
	}
	for (uint32_t i = 0; i < n; i++) {
		uint64_t owner = mkv_share_load(p, &p->slots[i].owner);

		if (!MKV_SLOT_PID(owner) || mkv_share_load(p, &p->slots[i].node) == p->node)
			continue;
		beat0[i] = mkv_share_load(p, &p->slots[i].beat);
		todo[i] = !mkv_client_dead(p, i, owner);
	}
	while (pending && mkv_clock_now() - start < p->client_timeout_ns + 100000000ULL) {
		pending = false;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t owner = mkv_share_load(p, &p->slots[i].owner);

			if (!todo[i])
				continue;
			if (!MKV_SLOT_PID(owner) || mkv_client_dead(p, i, owner) ||
			    mkv_share_load(p, &p->slots[i].beat) != beat0[i])
				todo[i] = 0;
			else
				pending = true;
		}
		if (pending)
			nanosleep(&nap, NULL);
	}
	free(beat0);
	free(todo);
	return 0;
}

MKV_EXPORT int
mkv_pool_reclaim(struct mkv_pool *pool, unsigned flags, struct mkv_reclaim *report)
{
	struct mkv_req r = { .op = MKV_OP_RECLAIM };
	int rc, stale = 0;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_pool_reclaim")))
		return rc;
	if (!report || (flags & ~MKV_DRY_RUN))
		return mkv_err(MKV_E_INVAL, "mkv_pool_reclaim: NULL report or unknown flags");
	/* What is dead now: the report, whoever does the work. */
	if ((rc = await_verdicts(pool)))
		return rc;
	mkv_recover_reap(pool, true, report);
	if (flags & MKV_DRY_RUN)
		return 0;
	if ((rc = mkv_client_writable(pool, "mkv_pool_reclaim")) ||
	    (rc = mkv_holder_call(pool, &r)))
		return rc;
	if (r.out > report->pages)
		report->pages = r.out;
	/*
	 * The holder frees dead nodes' entries only when the directory lock is
	 * free: here it waits.  Not in a non-coherent pool, where only the
	 * holder inside its write window may (lease.c), as it just did.
	 */
	if (!pool->noncoherent &&
	    mkv_lock_until(pool->dirfd, LOCK_EX, mkv_clock_now() + pool->lease_period_ns) == 0) {
		report->nodes = mkv_nodes_reclaim(pool);
		flock(pool->dirfd, LOCK_UN);
	}
	if ((stale = mkv_reg_reader_check(pool)) > 0)
		report->readers += (uint32_t)stale;
	return 0;
}

MKV_EXPORT int
mkv_pool_evict(struct mkv_pool *pool, unsigned free_pct, unsigned flags, struct mkv_evict *report)
{
	struct mkv_req r = { .op = MKV_OP_EVICT, .free_pct = free_pct };
	struct mkv_stat before, after;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_pool_evict")))
		return rc;
	if (!report || (flags & ~MKV_DRY_RUN) || free_pct > 100)
		return mkv_err(MKV_E_INVAL, "mkv_pool_evict: NULL report, unknown flags or percent over 100");
	memset(report, 0, sizeof(*report));
	if (flags & MKV_DRY_RUN) {
		if ((rc = mkv_evict_dry(pool, free_pct, report)))
			return rc;
		mkv_err_clear();
		return 0;
	}
	if ((rc = mkv_client_writable(pool, "mkv_pool_evict")) ||
	    (rc = mkv_pool_stat(pool, &before)) || (rc = mkv_holder_call(pool, &r)) ||
	    (rc = mkv_pool_stat(pool, &after)))
		return rc;
	report->keys = r.out;
	if (after.pages_free + after.pages_quarantined > before.pages_free + before.pages_quarantined)
		report->pages = after.pages_free + after.pages_quarantined -
			(before.pages_free + before.pages_quarantined);
	report->pages_free = after.pages_free;
	return 0;
}

MKV_EXPORT int
mkv_pool_set_watermarks(struct mkv_pool *pool, unsigned low_pct, unsigned high_pct)
{
	struct mkv_req r = { .op = MKV_OP_WATERMARKS, .wm_low = low_pct, .wm_high = high_pct };
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_writable(pool, "mkv_pool_set_watermarks")) ||
	    (rc = mkv_valid_watermarks(low_pct, high_pct)))
		return rc;
	return mkv_holder_call(pool, &r);
}

MKV_EXPORT int
mkv_pool_clients(struct mkv_pool *pool, struct mkv_client *out, size_t max, size_t *n)
{
	uint64_t *granted;
	size_t k = 0;
	int rc;

	mkv_err_clear();
	if ((rc = mkv_client_check(pool, "mkv_pool_clients")))
		return rc;
	if (!n || (!out && max))
		return mkv_err(MKV_E_INVAL, "mkv_pool_clients: NULL argument");
	granted = calloc(pool->sb->max_clients, sizeof(*granted));
	if (!granted)
		return mkv_err(MKV_E_NOMEM, "mkv_pool_clients: out of memory");
	tables_fresh(pool);
	for (uint64_t i = 0; i < pool->nr_pages; i++) {
		uint64_t w = mkv_pages_load(pool, i);

		if (MKV_PG_STATE(w) == MKV_PG_GRANTED && MKV_PG_SLOT(w) < pool->sb->max_clients &&
		    MKV_PG_INC(w) == MKV_SLOT_INC(pool->slots[MKV_PG_SLOT(w)].owner))
			granted[MKV_PG_SLOT(w)]++;
	}
	for (uint32_t i = 0; i < pool->sb->max_clients; i++) {
		const struct mkv_slot *s = &pool->slots[i];
		uint64_t owner = __atomic_load_n(&s->owner, __ATOMIC_SEQ_CST), node;
		struct mkv_client *c;

		if (!mkv_client_claimed(pool, i, owner))
			continue;
		if (k++ >= max)
			continue;
		c = &out[k - 1];
		memset(c, 0, sizeof(*c));
		c->slot = i;
		c->pid = MKV_SLOT_PID(owner);
		node = __atomic_load_n(&s->node, __ATOMIC_SEQ_CST);
		for (uint32_t j = 0; j < pool->sb->max_nodes; j++)
			if (__atomic_load_n(&pool->nodes[j].id, __ATOMIC_SEQ_CST) == node)
				memcpy(c->node, pool->nodes[j].name, MKV_NODE_NAME_MAX);
		c->alive = !mkv_client_dead(pool, i, owner);
		c->rdonly = (__atomic_load_n(&s->flags, __ATOMIC_RELAXED) & MKV_RDONLY) != 0;
		c->holder = __atomic_load_n(&pool->state->lease.holder_node, __ATOMIC_SEQ_CST) != 0 &&
			__atomic_load_n(&pool->state->lease.holder_slot, __ATOMIC_SEQ_CST) == i &&
			__atomic_load_n(&pool->state->lease.holder_pid, __ATOMIC_SEQ_CST) == c->pid;
		c->pin = __atomic_load_n(&s->pin, __ATOMIC_SEQ_CST);
		c->pages_granted = granted[i];
		c->heartbeat_age_ms = mkv_clock_age_ms(__atomic_load_n(&s->beat_wall_ns, __ATOMIC_RELAXED));
	}
	free(granted);
	*n = k;
	return 0;
}
