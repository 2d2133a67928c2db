/* SPDX-License-Identifier: MIT */
/*
 * holder.c -- where a write goes, and the service thread that serves
 * writes while this handle holds the lease.
 *
 * A write is committed here when this handle holds the lease (taking it
 * first if nobody holds it), and forwarded through this handle's request
 * entries (ring.c) to the holder otherwise.  A holder that finds itself
 * fenced drops the lease and forwards like anyone.  A handle waiting for an
 * answer takes the lease over when its holder is gone, and its own service
 * thread then answers: the ring calls back here for that (mkv_holder_nudge(),
 * passed down to mkv_rq_init()), so that the ring itself is only transport.
 *
 * Taking the lease (lease.c) makes this handle the holder only once it has
 * rebuilt the page table from the registry (mkv_recover()).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/*
 * A new holder, inside its write window: until the registry readers of
 * other kernels are at its first snapshot (regsnap.c), the lease beating
 * meanwhile, for a client timeout and a lease period at most: time enough
 * to judge a dead reader dead and revoke its claim.
 */
static int
readers_wait(struct mkv_pool *p)
{
	uint64_t now = mkv_clock_now(), end = now + p->client_timeout_ns + p->lease_period_ns;
	uint64_t slice = 0;
	int rc;

	while ((rc = mkv_reg_readers_caught_up(p)) == -EAGAIN) {
		if ((now = mkv_clock_now()) >= end)
			return mkv_err(MKV_E_TIMEDOUT,
					"pool %s: a reader on another host is still at a snapshot older than this holder's first",
					p->path);
		if (now - p->h.last_renew_ns >= p->lease_period_ns / 4 && (rc = mkv_lease_beat(p)))
			return rc;
		slice = mkv_rq_poll_next(p, slice);
		mkv_clock_sleep(slice);
	}
	return rc;
}

/*
 * Take the lease if it may be taken, and become the holder: rebuild the
 * page table, then serve.  Called with h.lock held.  0 when this handle
 * holds the lease, -EAGAIN when somebody else holds it or is taking it.
 */
int
mkv_holder_take(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;
	bool had = h->holding;
	int rc = mkv_lease_try_acquire(p);

	if (rc || had)
		return rc;
	mkv_reg_readers_watch(p);
	if (!(rc = mkv_lease_writers_wait(p)) && !(rc = mkv_lease_write_begin(p))) {
		if (!(rc = readers_wait(p)))
			rc = mkv_recover(p);
		mkv_lease_write_end(p);
	}
	if (rc) {
		/* superseded, or an older holder is inside a write: someone may try again later */
		mkv_lease_drop(p);
		return rc == MKV_E_FENCED || rc == MKV_E_TIMEDOUT ? -EAGAIN : rc;
	}
	/*
	 * The service thread now sleeps on the doorbell and serves; its first
	 * reclamation pass comes a period from now (the rebuild in
	 * mkv_recover() already freed the pages nothing owns).
	 */
	h->last_reap_ns = mkv_clock_now();
	pthread_cond_signal(&h->wake);
	mkv_rq_ring(p);
	return 0;
}

/*
 * Called by the ring between slices of a wait for an answer: take the
 * lease over if its holder is gone (our own service thread then answers
 * our request), and ring the doorbell again.
 */
void
mkv_holder_nudge(struct mkv_pool *p)
{
	pthread_mutex_lock(&p->h.lock);
	if (!p->h.holding)
		mkv_holder_take(p);
	pthread_mutex_unlock(&p->h.lock);
	mkv_rq_ring(p);
}

/*
 * One round of the service thread: the client's heartbeat; while holding,
 * the lease's renewal, the reclamation pass once a period, and every
 * pending request committed and answered.  Returns how many requests it
 * served.  Called with h.lock held.
 */
static unsigned
service_round(struct mkv_pool *p, struct mkv_req *reqs)
{
	struct mkv_holder *h = &p->h;
	uint64_t now = mkv_clock_now();
	struct mkv_reclaim rep;
	unsigned n = 0;
	int rc;

	if (now - h->last_beat_ns >= p->client_timeout_ns / 4) {
		mkv_client_beat(p);
		h->last_beat_ns = now;
	}
	if (p->noncoherent && now - h->last_idle_ns >= p->lease_period_ns / 4) {
		mkv_reg_snap_idle(p);
		h->last_idle_ns = now;
	}
	if (h->holding && now - h->last_renew_ns >= p->lease_period_ns / 4 &&
	    mkv_lease_beat(p) != 0)
		mkv_lease_drop(p);
	if (!h->holding)
		return 0;
	if (mkv_lease_write_begin(p)) {
		mkv_lease_drop(p);
		return 0;
	}
	if (now - h->last_reap_ns >= p->lease_period_ns) {
		mkv_recover_reap(p, false, &rep);
		h->last_reap_ns = now;
	}
	rc = (n = mkv_rq_collect(p, reqs, MKV_MAX_BATCH, h->posted)) ? mkv_commit(p, reqs, n) : 0;
	/* MKV_E_TIMEDOUT: nothing applied; they stay pending until we can write */
	if (rc == MKV_E_FENCED)
		mkv_lease_drop(p);
	else if (n && rc != MKV_E_TIMEDOUT)
		mkv_rq_post(p, reqs, n);
	mkv_lease_write_end(p);
	return n;
}

/*
 * The holder's sleep on its doorbell, at most cap ns.  In a coherent pool
 * it may first poll the doorbell a while (mkv_rq_spin()): a client that
 * posts again right after its answer is served without two futex
 * wake-ups.  In a non-coherent pool it is cut into polling slices, between
 * which the other nodes' doorbells are looked at: no futex reaches across
 * hosts.
 */
static void
bell_wait(struct mkv_pool *p, uint32_t bell, uint64_t cap)
{
	uint64_t start = mkv_clock_now(), end = start + cap, slice = mkv_rq_poll_next(p, 0), now;

	p->h.quick = mkv_rq_spin(p, mkv_rq_doorbell(p), bell, start, end, p->h.quick);
	if (p->h.quick)
		return;
	while ((now = mkv_clock_now()) < end) {
		mkv_rq_bell_sleep(p, bell, slice < end - now ? slice : end - now);
		if (__atomic_load_n(mkv_rq_doorbell(p), __ATOMIC_ACQUIRE) != bell) {
			p->h.quick = mkv_rq_quick(start);
			return;
		}
		if (!p->noncoherent || mkv_rq_rung(p, p->h.bells))
			return;
		slice = mkv_rq_poll_next(p, slice);
	}
}

/*
 * How long the service thread may sleep: until the first of its duties
 * falls due, counted from when each was last done, not a fixed quarter
 * from now.  A holder woken by a write a moment before its renewal was
 * due, that then slept a whole quarter period, would renew only after
 * half the period and find itself fenced (mkv_lease_valid()).
 */
static uint64_t
service_due(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;
	uint64_t now = mkv_clock_now(), quarter = p->lease_period_ns / 4;
	uint64_t due = h->last_beat_ns + p->client_timeout_ns / 4;

	/* a non-coherent pool's idle registry reader lets go within a quarter period */
	if (p->noncoherent && h->last_idle_ns + quarter < due)
		due = h->last_idle_ns + quarter;
	if (h->holding && h->last_renew_ns + quarter < due)
		due = h->last_renew_ns + quarter;
	return due > now ? due - now : 0;
}

/*
 * Sleep until there is work or a duty falls due: on the doorbell while
 * holding, on the handle's own condition else.  Called with h.lock held;
 * bell is the doorbell as it was before the round.
 */
static void
service_sleep(struct mkv_pool *p, uint32_t bell)
{
	struct mkv_holder *h = &p->h;
	uint64_t wait = service_due(p);
	struct timespec ts;

	if (!wait)
		return;
	if (h->holding) {
		pthread_mutex_unlock(&h->lock);
		bell_wait(p, bell, wait);
		pthread_mutex_lock(&h->lock);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(wait / 1000000000ULL);
	ts.tv_nsec += (long)(wait % 1000000000ULL);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&h->wake, &h->lock, &ts);
}

/*
 * The service thread of a handle, from open to close: it advances the
 * client's heartbeat; while the handle holds the lease it also renews the
 * lease every quarter period, collects every pending request, commits them
 * together, posts the answers, and reclaims dead clients once a period.
 * It sleeps on the doorbell while holding, on a private condition else.
 */
static void *
service_main(void *arg)
{
	struct mkv_pool *p = arg;
	struct mkv_holder *h = &p->h;
	struct mkv_req *reqs;
	bool stop = false;

	/* memory only under the lock: see the fork handlers in pool.c */
	pthread_mutex_lock(&h->lock);
	h->thread_started = true;
	pthread_cond_broadcast(&h->wake);
	reqs = h->batch = calloc(MKV_MAX_BATCH, sizeof(*reqs));
	h->bells = calloc(p->sb->max_nodes, sizeof(*h->bells));
	h->posted = malloc(p->sb->max_clients * sizeof(*h->posted));
	if (h->posted)
		memset(h->posted, 0xff, p->sb->max_clients * sizeof(*h->posted));
	while (reqs && h->bells && h->posted && !stop) {
		uint32_t bell = __atomic_load_n(mkv_rq_doorbell(p), __ATOMIC_ACQUIRE);
		unsigned n;

		stop = h->stopping;
		n = service_round(p, reqs);
		if (n || stop)
			continue;
		service_sleep(p, bell);
	}
	free(reqs);
	free(h->bells);
	free(h->posted);
	h->batch = NULL;
	h->bells = NULL;
	h->posted = NULL;
	pthread_mutex_unlock(&h->lock);
	return NULL;
}

int
mkv_holder_start(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;

	if (pthread_create(&h->thread, NULL, service_main, p))
		return mkv_err(MKV_E_NOMEM, "pool %s: cannot start the service thread", p->path);
	h->thread_running = true;
	/* Past its start-up (which may allocate) before a fork can happen. */
	pthread_mutex_lock(&h->lock);
	while (!h->thread_started)
		pthread_cond_wait(&h->wake, &h->lock);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

/* Stop the service thread; if it holds the lease it drains what is pending first. */
void
mkv_holder_stop(struct mkv_pool *p)
{
	struct mkv_holder *h = &p->h;

	if (!h->thread_running)
		return;
	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	pthread_cond_signal(&h->wake);
	pthread_mutex_unlock(&h->lock);
	mkv_rq_ring(p);
	pthread_join(h->thread, NULL);
	h->thread_running = false;
}

/*
 * Requests from this handle, stamped with its slot, committed at once if
 * it holds the lease (taking it first if nobody else has it): true then,
 * each with its result.  False if they must go through the ring (a
 * holder that finds itself fenced drops the lease first).
 */
static bool
commit_here(struct mkv_pool *p, struct mkv_req *reqs, unsigned n)
{
	bool done = false;

	for (unsigned i = 0; i < n; i++) {
		reqs[i].slot = p->slot;
		reqs[i].inc = p->incarnation;
	}
	pthread_mutex_lock(&p->h.lock);
	/* A dead holder is replaced by whoever waits on it (mkv_holder_nudge()). */
	if (!p->h.holding && mkv_lease_free(p))
		mkv_holder_take(p);
	if (p->h.holding) {
		int rc = mkv_lease_write_begin(p);

		if (!rc) {
			rc = mkv_commit(p, reqs, n);
			mkv_lease_write_end(p);
		}
		done = rc != MKV_E_FENCED;
		if (!done)
			mkv_lease_drop(p);
	}
	pthread_mutex_unlock(&p->h.lock);
	return done;
}

/*
 * One request through the write path: committed here if this handle holds
 * the lease (taking it first if nobody else has it), else handed to the
 * holder through our request ring, waiting at most timeout_ns for the
 * answer.  Returns the request's result.
 */
int
mkv_holder_write(struct mkv_pool *p, struct mkv_req *r, uint64_t timeout_ns)
{
	unsigned idx;
	uint32_t seq;
	int rc;

	if (commit_here(p, r, 1))
		return r->result;
	if ((rc = mkv_rq_submit(p, r, false, &idx, &seq, timeout_ns)) ||
	    (rc = mkv_rq_wait(p, idx, seq, r, timeout_ns, false)))
		return rc;
	return r->result;
}

/*
 * Several requests through the write path, each with its own result: in
 * one txn when this handle holds the lease, else through our ring as
 * asynchronous entries, so that more requests than the ring has entries
 * still flow (the oldest answers are kept aside as the ring fills).  Each
 * wait is bounded by mkv_holder_timeout().  Returns 0, or the error that
 * kept requests from being sent.
 */
int
mkv_holder_write_many(struct mkv_pool *p, struct mkv_req *reqs, unsigned n)
{
	struct { unsigned idx; uint32_t seq; } *sent;
	uint64_t timeout = mkv_holder_timeout(p);
	unsigned i, nsent = 0;
	int rc = 0;

	if (commit_here(p, reqs, n))
		return 0;
	if (!(sent = malloc(n * sizeof(*sent))))
		return mkv_err(MKV_E_NOMEM, "write: out of memory");
	for (; nsent < n; nsent++)
		if ((rc = mkv_rq_submit(p, &reqs[nsent], true, &sent[nsent].idx, &sent[nsent].seq,
				timeout)))
			break;
	for (i = 0; i < nsent; i++) {
		int w = mkv_rq_wait(p, sent[i].idx, sent[i].seq, &reqs[i], timeout, false);

		if (w)
			reqs[i].result = w;
	}
	for (i = nsent; i < n; i++)
		reqs[i].result = rc;
	free(sent);
	return rc;
}

/*
 * One request, not waiting for its answer: committed here if this handle
 * holds the lease (as mkv_holder_write() would), else posted in our ring as an
 * asynchronous entry.  A commit here that could not take the registry's
 * write lock (MKV_E_TIMEDOUT: another writer kept it, nothing was written)
 * is posted too, and this handle's service thread applies it once it can
 * write: an asynchronous request is not lost to a busy lock.  *posted:
 * false when it was committed here (its result is r->result), true when
 * its answer is to be waited for with mkv_rq_wait(*idx, *seq).  Returns 0,
 * or the error that kept it from being posted.
 */
int
mkv_holder_write_async(struct mkv_pool *p, struct mkv_req *r, bool *posted, unsigned *idx,
		uint32_t *seq)
{
	*posted = false;
	if (commit_here(p, r, 1) && r->result != MKV_E_TIMEDOUT)
		return 0;
	*posted = true;
	r->result = 0;
	return mkv_rq_submit(p, r, true, idx, seq, mkv_holder_timeout(p));
}

/*
 * One request through mkv_holder_write(), waiting as long as a write call
 * waits; the thread's error is cleared on success.
 */
int
mkv_holder_call(struct mkv_pool *p, struct mkv_req *r)
{
	int rc = mkv_holder_write(p, r, mkv_holder_timeout(p));

	if (rc == 0)
		mkv_err_clear();
	return rc;
}
