/* SPDX-License-Identifier: MIT */
/*
 * ring.c -- requests from clients to the lease holder, and their answers.
 *
 * Each client slot owns MKV_RQ_DEPTH request entries in `super`.  A client
 * fills an entry, stores its sequence number last, rings the doorbell
 * (a futex on the shared mapping) and waits on its slot's completion
 * counter.  The holder collects every pending entry of every slot, commits
 * them in one registry txn, writes each answer with the sequence number it
 * answers, bumps the completion counters and wakes the clients.  In a
 * coherent pool both sides poll a while before they sleep (mkv_rq_spin()),
 * and each wakes the other only if it sleeps: holder threads count
 * themselves asleep on the doorbell in state->bell_sleepers, a client its
 * threads asleep on the counter in its slot's sleepers.  An answer
 * carries its sequence number, so a late answer from a holder that lost
 * the lease can never be taken for the answer to a newer request.  Across
 * hosts there are no shared futexes: waits are bounded and re-check.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* How long a waiting client sleeps before it looks at the lease again. */
#define WAIT_SLICE_NS (20 * 1000 * 1000ULL)

/*
 * Non-coherent pools: no futex wakes a process of another host, so a
 * waiter polls, from this slice doubling to the next while nothing comes.
 */
#define POLL_MIN_NS (20 * 1000ULL)
#define POLL_MAX_NS (1000 * 1000ULL)

/*
 * Coherent pools: how long a waiter polls before it sleeps on a futex.  An
 * awake holder answers in a few us; a futex wake-up alone costs tens of
 * us, on each side of a round trip.
 */
#define SPIN_NS (50 * 1000ULL)

/*
 * A look in a spin that comes this long after the one before means the
 * spinner lost its CPU meanwhile: more threads want to run than there are
 * cores, and spinning would keep the one it waits for off its core.
 */
#define SPIN_LATE_NS (10 * 1000ULL)

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#endif
}

/*
 * Whether a wait that started at start (CLOCK_MONOTONIC ns) and ends now
 * was short enough for a spin to have seen its end: the next wait like it
 * spins only then.  Where waits are long (a busy holder, more runnable
 * threads than cores) nobody spins, and a wait that ends in its spin
 * keeps the next one spinning.
 */
bool
mkv_rq_quick(uint64_t start)
{
	return mkv_clock_now() - start < SPIN_NS;
}

/*
 * If quick (mkv_rq_quick() of the last wait like this one), poll *word
 * until it is no longer val, at most until SPIN_NS from start and never
 * past end; whether it changed.  A spinner that finds it was descheduled
 * (SPIN_LATE_NS) stops and sleeps.  Non-coherent pools do not spin: their
 * waits poll with invalidations, slice by slice (mkv_rq_poll_next()).
 */
bool
mkv_rq_spin(const struct mkv_pool *p, const uint32_t *word, uint32_t val, uint64_t start,
		uint64_t end, bool quick)
{
	uint64_t now = mkv_clock_now(), last = now;

	if (p->noncoherent || !quick)
		return false;
	if (start + SPIN_NS < end)
		end = start + SPIN_NS;
	for (; now < end && now - last < SPIN_LATE_NS; last = now, now = mkv_clock_now()) {
		for (int i = 0; i < 64; i++) {
			if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != val)
				return true;
			cpu_relax();
		}
	}
	return false;
}

uint64_t
mkv_rq_poll_next(const struct mkv_pool *p, uint64_t slice)
{
	if (!p->noncoherent)
		return WAIT_SLICE_NS;
	if (slice < POLL_MIN_NS)
		return POLL_MIN_NS;
	return slice >= POLL_MAX_NS / 2 ? POLL_MAX_NS : 2 * slice;
}

static int
futex_wait(uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
	struct timespec ts = { (time_t)(timeout_ns / 1000000000ULL),
			(long)(timeout_ns % 1000000000ULL) };

	return (int)syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void
futex_wake(struct mkv_pool *p, uint32_t *addr)
{
	__atomic_add_fetch(&p->rq.wakes, 1, __ATOMIC_RELAXED);
	syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static struct mkv_rq *
entry(const struct mkv_pool *p, uint32_t slot, unsigned i)
{
	return &p->rqs[(size_t)slot * MKV_RQ_DEPTH + i];
}

/* Whether request seq in e is answered; its answer's line is fresh after a true. */
static bool
answered(const struct mkv_pool *p, const struct mkv_rq *e, uint32_t seq)
{
	return (uint32_t)(mkv_share_load(p, &e->done) >> 32) == seq;
}

/* A request's sequence number, as its client last stored it. */
static uint32_t
seq_load(const struct mkv_pool *p, const struct mkv_rq *e)
{
	return mkv_share_load(p, &e->seq);
}

/* idle: called between slices of a wait for an answer, by the thread that waits */
int
mkv_rq_init(struct mkv_pool *p, void (*idle)(struct mkv_pool *p))
{
	struct mkv_rqs *q = &p->rq;

	pthread_condattr_t attr;
	int rc;

	memset(q, 0, sizeof(*q));
	q->idle = idle;
	if (pthread_condattr_init(&attr))
		return mkv_err(MKV_E_NOMEM, "requests: condition");
	/* its waits end at deadlines of mkv_clock_now() */
	rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) ||
		pthread_mutex_init(&q->lock, NULL) || pthread_cond_init(&q->freed, &attr);
	pthread_condattr_destroy(&attr);
	if (rc)
		return mkv_err(MKV_E_NOMEM, "requests: mutex");
	return 0;
}

void
mkv_rq_fini(struct mkv_pool *p)
{
	free(p->rq.kept);
	pthread_cond_destroy(&p->rq.freed);
	pthread_mutex_destroy(&p->rq.lock);
}

/* After claiming a slot: go on from the sequence numbers its last owner used. */
static void
seq_resume(struct mkv_pool *p)
{
	for (unsigned i = 0; i < MKV_RQ_DEPTH; i++) {
		uint32_t s = seq_load(p, entry(p, p->slot, i));

		if (s > p->rq.seq)
			p->rq.seq = s;
	}
}

/*
 * Wait until request seq in entry idx is answered and copy the answer out;
 * false past the deadline (CLOCK_MONOTONIC ns).  Between slices the idle
 * function given to mkv_rq_init() runs (it takes a lost lease over: holder.c).
 * completed as our own cache holds it: a futex wakes only our host's waiters.
 */
static bool
await_answer(struct mkv_pool *p, unsigned idx, uint32_t seq, struct mkv_answer *a,
		uint64_t deadline)
{
	struct mkv_rq *e = entry(p, p->slot, idx);
	uint32_t *completed = &p->slots[p->slot].completed;
	uint64_t *sleepers = &p->slots[p->slot].sleepers;
	uint64_t slice = mkv_rq_poll_next(p, 0), waited = 0, start = mkv_clock_now();
	/* a hint, shared by the handle's threads */
	bool quick = __atomic_load_n(&p->rq.quick, __ATOMIC_RELAXED), waited_any = false;

	for (;;) {
		uint32_t c = __atomic_load_n(completed, __ATOMIC_SEQ_CST);

		if (answered(p, e, seq)) {
			/* an answer there at the first look tells nothing of a spin */
			if (waited_any)
				__atomic_store_n(&p->rq.quick, mkv_rq_quick(start), __ATOMIC_RELAXED);
			a->seq = seq;
			a->result = (int32_t)(uint32_t)__atomic_load_n(&e->done, __ATOMIC_ACQUIRE);
			a->ext.npages = e->npages;
			a->ext.page = e->page;
			a->out = __atomic_load_n(&e->out_page, __ATOMIC_ACQUIRE);
			if (e->op == MKV_RQ_GRANT && a->result == 0)
				a->ext = (struct mkv_extent){ a->out,
						__atomic_load_n(&e->out_npages, __ATOMIC_ACQUIRE) };
			return true;
		}
		if (mkv_clock_now() >= deadline)
			return false;
		waited_any = true;
		if (mkv_rq_spin(p, completed, c, start, deadline, quick))
			continue;
		if (p->noncoherent) {
			futex_wait(completed, c, slice);
		} else {
			/* counted before the counter's last look: see mkv_rq_post() */
			__atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(completed, __ATOMIC_SEQ_CST) == c)
				futex_wait(completed, c, slice);
			__atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
		}
		if (answered(p, e, seq))
			continue;
		/* the lease is looked at every WAIT_SLICE_NS, however the wait is sliced */
		waited += slice;
		slice = mkv_rq_poll_next(p, slice);
		if (waited < WAIT_SLICE_NS)
			continue;
		waited = 0;
		p->rq.idle(p);
	}
}

/* Keep an answer for a later mkv_wait(); called with rq.lock held. */
static void
keep_answer(struct mkv_rqs *q, const struct mkv_answer *a)
{
	if (q->nkept == q->capkept) {
		unsigned cap = q->capkept ? q->capkept * 2 : 16;
		struct mkv_answer *v = realloc(q->kept, cap * sizeof(*v));

		if (!v)
			return;  /* mkv_wait() will report the ticket unknown */
		q->kept = v;
		q->capkept = cap;
	}
	q->kept[q->nkept++] = *a;
}

/*
 * An entry free on both sides: not ours in use, and not pending.  When
 * every entry is taken and some hold asynchronous publishes, wait for the
 * oldest of those and keep its answer, freeing its entry.  MKV_E_TIMEDOUT
 * if none is free by the deadline.
 */
static int
entry_get(struct mkv_pool *p, unsigned *idx, uint64_t deadline)
{
	struct mkv_rqs *q = &p->rq;
	struct mkv_answer a;
	struct timespec until = { (time_t)(deadline / 1000000000ULL),
			(long)(deadline % 1000000000ULL) };

	pthread_mutex_lock(&q->lock);
	if (q->seq == 0)
		seq_resume(p);
	for (;;) {
		unsigned oldest = MKV_RQ_DEPTH;

		for (unsigned i = 0; i < MKV_RQ_DEPTH; i++) {
			struct mkv_rq *e = entry(p, p->slot, i);
			uint32_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);  /* ours */

			if ((q->async & (1U << i)) &&
			    (oldest == MKV_RQ_DEPTH || (int32_t)(q->seqs[i] - q->seqs[oldest]) < 0))
				oldest = i;
			if ((q->busy & (1U << i)) || (s != 0 && !answered(p, e, s)))
				continue;
			q->busy |= 1U << i;
			*idx = i;
			pthread_mutex_unlock(&q->lock);
			return 0;
		}
		if (oldest == MKV_RQ_DEPTH) {
			/* All taken by this process's other threads: wait for one. */
			if (pthread_cond_timedwait(&q->freed, &q->lock, &until) == ETIMEDOUT)
				break;
			continue;
		}
		q->async &= ~(1U << oldest);
		pthread_mutex_unlock(&q->lock);
		if (!await_answer(p, oldest, q->seqs[oldest], &a, deadline)) {
			pthread_mutex_lock(&q->lock);
			q->async |= 1U << oldest;
			break;
		}
		pthread_mutex_lock(&q->lock);
		keep_answer(q, &a);
		q->busy &= ~(1U << oldest);
	}
	pthread_mutex_unlock(&q->lock);
	return mkv_err(MKV_E_TIMEDOUT, "pool %s: every request entry of this handle is waiting for the lease holder",
			p->path);
}

static void
entry_put(struct mkv_pool *p, unsigned idx)
{
	pthread_mutex_lock(&p->rq.lock);
	p->rq.busy &= ~(1U << idx);
	p->rq.async &= ~(1U << idx);
	pthread_cond_broadcast(&p->rq.freed);
	pthread_mutex_unlock(&p->rq.lock);
}

/*
 * The doorbell this handle rings and, as the holder, sleeps on: the
 * pool's; in a non-coherent pool its node's, since a futex wakes only the
 * processes of the waker's host, and a line must be written by one host
 * only.  The holder looks at the other nodes' between its sleeps
 * (mkv_rq_rung()).
 */
uint32_t *
mkv_rq_doorbell(const struct mkv_pool *p)
{
	if (p->noncoherent && p->node_idx != UINT32_MAX)
		return &p->nodes[p->node_idx].doorbell;
	return &p->state->doorbell;
}

/*
 * Ring the doorbell; unless always, the futex wake-up only if a holder
 * thread counts itself asleep on it (mkv_rq_bell_sleep()).  Both sides add
 * or store before they look at the other's word, all seq_cst: either the
 * sleeper's last look sees the new ring, or this look sees the sleeper.
 */
static void
ring(struct mkv_pool *p, bool always)
{
	uint32_t *bell = mkv_rq_doorbell(p);

	__atomic_add_fetch(bell, 1, __ATOMIC_SEQ_CST);
	mkv_share_wb(p, bell, sizeof(*bell));
	if (always || p->noncoherent ||
	    __atomic_load_n(&p->state->bell_sleepers, __ATOMIC_SEQ_CST))
		futex_wake(p, bell);
}

/*
 * Ring with a wake-up whatever the count says: the holder's own calls,
 * rare, and a waiting client's every WAIT_SLICE_NS, which also wakes a
 * holder of an older version that sleeps without counting itself.
 */
void
mkv_rq_ring(struct mkv_pool *p)
{
	ring(p, true);
}

/*
 * Holder: sleep on the doorbell while it still reads bell, at most
 * timeout_ns, counted in the state's bell_sleepers meanwhile.  A count,
 * not a flag: a fenced holder waking while the new one sleeps cannot
 * uncount it, and one killed asleep leaves the count above the sleepers
 * there are, which costs wake-ups nobody waits for, never one missed.
 */
void
mkv_rq_bell_sleep(struct mkv_pool *p, uint32_t bell, uint64_t timeout_ns)
{
	uint32_t *db = mkv_rq_doorbell(p);

	if (p->noncoherent) {
		futex_wait(db, bell, timeout_ns);
		return;
	}
	__atomic_add_fetch(&p->state->bell_sleepers, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(db, __ATOMIC_SEQ_CST) == bell)
		futex_wait(db, bell, timeout_ns);
	__atomic_sub_fetch(&p->state->bell_sleepers, 1, __ATOMIC_SEQ_CST);
}

/*
 * Non-coherent pools: whether another node's doorbell rang since the last
 * look; seen holds the values last seen, one per node.
 */
bool
mkv_rq_rung(const struct mkv_pool *p, uint32_t *seen)
{
	bool rung = false;

	for (uint32_t j = 0; j < p->sb->max_nodes; j++) {
		uint32_t b;

		if (j == p->node_idx)
			continue;
		b = mkv_share_load(p, &p->nodes[j].doorbell);
		rung |= b != seen[j];
		seen[j] = b;
	}
	return rung;
}

/*
 * The entry's two words of arguments: the pages of a request, or the
 * percents of EVICT (npages) and WATERMARKS (page: low, npages: high).
 */
static void
rq_args_put(struct mkv_rq *e, const struct mkv_req *r)
{
	switch (r->op) {
	case MKV_OP_EVICT:
		e->page = 0;
		e->npages = r->free_pct;
		break;
	case MKV_OP_WATERMARKS:
		e->page = r->wm_low;
		e->npages = r->wm_high;
		break;
	default:
		e->page = r->ext.page;
		e->npages = r->ext.npages;
		break;
	}
}

static void
rq_args_get(struct mkv_req *r, const struct mkv_rq *e)
{
	switch (r->op) {
	case MKV_OP_EVICT:
		r->free_pct = e->npages;
		break;
	case MKV_OP_WATERMARKS:
		r->wm_low = e->page;
		r->wm_high = e->npages;
		break;
	default:
		r->ext = (struct mkv_extent){ e->page, e->npages };
		break;
	}
}

/* Post a request in one of our entries, waiting at most timeout_ns for a free one. */
int
mkv_rq_submit(struct mkv_pool *p, const struct mkv_req *r, bool async, unsigned *idx,
		uint32_t *seq, uint64_t timeout_ns)
{
	struct mkv_rq *e;
	int rc = entry_get(p, idx, mkv_clock_now() + timeout_ns);

	if (rc)
		return rc;
	e = entry(p, p->slot, *idx);
	pthread_mutex_lock(&p->rq.lock);
	if (++p->rq.seq == 0)
		p->rq.seq = 1;
	*seq = p->rq.seq;
	p->rq.seqs[*idx] = *seq;
	if (async)
		p->rq.async |= 1U << *idx;
	pthread_mutex_unlock(&p->rq.lock);
	e->op = r->op;
	e->inc = p->incarnation;
	e->klen = (uint32_t)r->klen;
	rq_args_put(e, r);
	e->length = r->length;
	e->checksum = r->checksum;
	e->parent = r->parent;
	if (r->klen) {
		memcpy(e->key, r->key, r->klen);
		/* before the line that holds seq: a line is written back whole */
		mkv_share_persist(p, e->key, r->klen);
	}
	__atomic_store_n(&e->seq, *seq, __ATOMIC_RELEASE);
	mkv_share_persist(p, e, offsetof(struct mkv_rq, key));
	/* then the count the holder looks at before it reads a slot's entries */
	__atomic_add_fetch(&p->slots[p->slot].posted, 1, __ATOMIC_SEQ_CST);
	/* named: a test stops a client right after it (t/check_leasesites.c) */
	mkv_share_wb_at(p, &p->slots[p->slot].posted, sizeof(uint64_t), MKV_SITE_NAMED(posted));
	ring(p, false);
	return 0;
}

/*
 * The answer to request seq (in entry idx), waiting for it if need be, at
 * most timeout_ns.  Past that MKV_E_TIMEDOUT, with r->pending set: the
 * request stays for whoever holds the lease next, and with keep it may be
 * waited for again.
 */
int
mkv_rq_wait(struct mkv_pool *p, unsigned idx, uint32_t seq, struct mkv_req *r,
		uint64_t timeout_ns, bool keep)
{
	struct mkv_rqs *q = &p->rq;
	struct mkv_answer a;
	bool kept = false;

	pthread_mutex_lock(&q->lock);
	for (unsigned i = 0; i < q->nkept; i++)
		if (q->kept[i].seq == seq) {
			a = q->kept[i];
			q->kept[i] = q->kept[--q->nkept];
			kept = true;
			break;
		}
	if (!kept && (!(q->busy & (1U << idx)) || q->seqs[idx] != seq)) {
		pthread_mutex_unlock(&q->lock);
		return mkv_err(MKV_E_INVAL, "not a pending request of this handle");
	}
	pthread_mutex_unlock(&q->lock);
	if (!kept) {
		bool done = await_answer(p, idx, seq, &a, mkv_clock_now() + timeout_ns);

		if (!done) {
			r->pending = true;
			/* given up, the entry stays pending in the ring until answered */
			if (!keep)
				entry_put(p, idx);
			return mkv_err(MKV_E_TIMEDOUT, "pool %s: no lease holder answered in %llu ms",
					p->path, (unsigned long long)(timeout_ns / 1000000));
		}
		entry_put(p, idx);
	}
	/* an answer in shared memory is checked like anything else read from the pool */
	if (a.result != 0 && !(a.result < 0 && a.result > -4096) &&
	    !(a.result <= MKV_E_NOTFOUND && a.result >= MKV_E_LAST))
		a.result = mkv_err(MKV_E_CORRUPT, "pool %s: the lease holder answered %d", p->path,
				a.result);
	r->result = a.result;
	r->ext = a.ext;
	r->out = a.out;
	if (r->result)
		mkv_err(r->result, "pool %s: %s (answered by the lease holder)", p->path,
				mkv_strerror(r->result));
	return 0;
}

/*
 * Holder: every pending request of every slot, up to max.  With seen (per
 * slot, the count of requests posted as of the last look that found none
 * pending; UINT64_MAX: never looked), a slot whose count has not moved
 * since is passed over: one line read for an idle slot instead of two for
 * each of its entries, which in a non-coherent pool are invalidations.
 */
unsigned
mkv_rq_collect(struct mkv_pool *p, struct mkv_req *reqs, unsigned max, uint64_t *seen)
{
	unsigned n = 0;

	for (uint32_t s = 0; s < p->sb->max_clients && n < max; s++) {
		uint64_t posted = seen ? mkv_share_load(p, &p->slots[s].posted) : 0;
		unsigned pending = 0;

		if (seen && posted == seen[s])
			continue;
		for (unsigned i = 0; i < MKV_RQ_DEPTH && n < max; i++) {
			struct mkv_rq *e = entry(p, s, i);
			uint32_t seq = seq_load(p, e);
			struct mkv_req *r = &reqs[n];

			if (seq == 0 || answered(p, e, seq))
				continue;
			pending++;
			if (e->klen <= MKV_KEY_MAX)
				mkv_share_inval(p, e->key, e->klen);
			*r = (struct mkv_req){
				.op = (enum mkv_op)e->op,
				.slot = s,
				.inc = e->inc,
				.key = e->key,
				.klen = e->klen,
				.length = e->length,
				.checksum = e->checksum,
				.parent = e->parent,
				.rq = s * MKV_RQ_DEPTH + i,
				.seq = seq,
			};
			rq_args_get(r, e);
			n++;
		}
		if (seen && !pending)
			seen[s] = posted;
	}
	return n;
}

/* A client that polls or has not waited yet sees the count (await_answer()). */
static void
slot_wake(struct mkv_pool *p, uint32_t s)
{
	if (p->noncoherent || __atomic_load_n(&p->slots[s].sleepers, __ATOMIC_SEQ_CST))
		futex_wake(p, &p->slots[s].completed);
}

/*
 * Holder: write the answers (n >= 1), then count them and wake their clients.
 * Where persistence goes by pages (msync) the answers are persisted in one
 * call, and then the counts in one, not one call each.
 */
void
mkv_rq_post(struct mkv_pool *p, const struct mkv_req *reqs, unsigned n)
{
	bool paged = !p->noncoherent && p->super.page_granular;
	uint32_t last = UINT32_MAX, rq_lo = reqs[0].rq, rq_hi = rq_lo, s_lo = reqs[0].slot,
			s_hi = s_lo;

	for (unsigned i = 0; i < n; i++) {
		struct mkv_rq *e = &p->rqs[reqs[i].rq];

		__atomic_store_n(&e->out_page,
				reqs[i].op == MKV_OP_GRANT ? reqs[i].ext.page : reqs[i].out,
				__ATOMIC_RELAXED);
		__atomic_store_n(&e->out_npages, reqs[i].ext.npages, __ATOMIC_RELAXED);
		__atomic_store_n(&e->done, ((uint64_t)reqs[i].seq << 32) | (uint32_t)reqs[i].result,
				__ATOMIC_RELEASE);
		if (!paged)
			mkv_share_persist(p, &e->done, 3 * sizeof(uint64_t));
		rq_lo = reqs[i].rq < rq_lo ? reqs[i].rq : rq_lo;
		rq_hi = reqs[i].rq > rq_hi ? reqs[i].rq : rq_hi;
		s_lo = reqs[i].slot < s_lo ? reqs[i].slot : s_lo;
		s_hi = reqs[i].slot > s_hi ? reqs[i].slot : s_hi;
	}
	if (paged)
		mkv_share_persist(p, &p->rqs[rq_lo].done,
				(size_t)((const char *)&p->rqs[rq_hi].done -
				(const char *)&p->rqs[rq_lo].done) + 3 * sizeof(uint64_t));
	/* reqs come slot by slot, in order: wake each slot once */
	for (unsigned i = 0; i < n; i++) {
		uint32_t s = reqs[i].slot;

		if (s == last)
			continue;
		last = s;
		/*
		 * Only holders write this line, one write window at a time
		 * between hosts; the last one may have been on another host.
		 * Named: a test stops the holder here, its answers written.
		 */
		mkv_share_inval_at(p, &p->slots[s].completed, MKV_CACHELINE,
				MKV_SITE_NAMED(answers_counted));
		__atomic_add_fetch(&p->slots[s].completed, 1, __ATOMIC_SEQ_CST);
		if (paged)
			continue;
		mkv_share_persist(p, &p->slots[s].completed, sizeof(uint32_t));
		slot_wake(p, s);
	}
	if (!paged)
		return;
	mkv_share_persist(p, &p->slots[s_lo].completed,
			(size_t)((const char *)&p->slots[s_hi].completed -
			(const char *)&p->slots[s_lo].completed) + sizeof(uint32_t));
	last = UINT32_MAX;
	for (unsigned i = 0; i < n; i++)
		if (reqs[i].slot != last)
			slot_wake(p, last = reqs[i].slot);
}

/* Requests of a client slot not answered yet. */
unsigned
mkv_rq_pending_slot(const struct mkv_pool *p, uint32_t slot)
{
	unsigned n = 0;

	for (unsigned i = 0; i < MKV_RQ_DEPTH; i++) {
		const struct mkv_rq *e = entry(p, slot, i);
		uint32_t seq = seq_load(p, e);

		n += seq != 0 && !answered(p, e, seq);
	}
	return n;
}

uint64_t
mkv_rq_pending(const struct mkv_pool *p)
{
	uint64_t n = 0;

	for (uint32_t s = 0; s < p->sb->max_clients; s++)
		n += mkv_rq_pending_slot(p, s);
	return n;
}
