/* SPDX-License-Identifier: MIT */
/*
 * client.c -- client slots in `super` and the liveness of their owners.
 *
 * Every open handle owns a slot.  Its owner word packs the claim:
 * (incarnation << 32) | pid, pid 0 meaning free; every claim raises the
 * incarnation, so anything recorded under an older claim (grants,
 * requests) is recognisably orphaned.
 *
 * Liveness.  A pid means nothing outside its PID namespace, and containers
 * that share /dev/shm share a host name, so pids are not how clients are
 * judged.  On its own kernel (same boot id, in any namespace), a client is
 * alive exactly as long as it holds an open-file-description lock on one
 * byte of `super`, at the slot's index: the kernel drops it when the
 * process dies, not when it is stopped.  A claimant takes that lock before
 * it claims the slot, and a client frees its slot before it lets go, so an
 * owner whose byte nobody locks is dead.  The boot id recorded with the
 * claim is tagged with the owner word it belongs to, so that a judge never
 * takes a new owner for the old one.  A client on another kernel (another
 * host; another boot id) is dead when the beat its service thread
 * advances stood still for the pool's client timeout, by the judge's own
 * clock: a guess, which a client paused that long proves wrong.
 *
 * Acting on a death means revoking the claim first (mkv_client_reap()):
 * the lease holder, inside its write window, records the claim's
 * incarnation in the slot's `revoked` word, on the holder's line; a client
 * that was only paused finds on its next call that it lost its slot
 * (MKV_E_EXPIRED), and nothing it held is reclaimed while its claim still
 * stands.  Nobody but the owner and the slot's claimants ever writes the
 * owner word.
 *
 * No atomic read-modify-write between hosts.  In a non-coherent pool the
 * processes of node entry i claim only the slots of its range
 * (mkv_client_range()), so every claimant of a slot runs on one host,
 * whose compare-and-swap is exact, and whose lock of the slot's byte keeps
 * a slot from being claimed while its owner lives, revoked or not.  The
 * holder revokes with a plain store to a line only holders write, one
 * write window at a time; a revoked claim stays the owner's until it
 * closes or dies, when its host's next claimant takes the slot.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static uint64_t boot_id;
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;

static void
boot_read(void)
{
	char buf[64] = "";
	ssize_t n = -1;
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	/* 0: unknown, and every other client is judged by its heartbeat */
	boot_id = n > 0 ? mkv_hash_fnv1a(buf, (size_t)n) | 1 : 0;
}

/*
 * The kernel this process runs on: its boot id, hashed; 0 if it cannot be
 * read.  $MARUKV_BOOT_ID, when set, names another one instead: processes
 * that claim different kernels judge each other by heartbeat, as the
 * processes of different hosts must, which lets tests emulate several
 * hosts on one (marukv(7), ENVIRONMENT).
 */
uint64_t
mkv_client_boot_id(void)
{
	const char *claim = getenv("MARUKV_BOOT_ID");

	if (claim && *claim)
		return mkv_hash_fnv1a(claim, strlen(claim)) | 1;
	pthread_once(&boot_once, boot_read);
	return boot_id;
}

static bool
heartbeat_dead(const struct mkv_pool *p, uint32_t slot, uint64_t owner)
{
	const struct mkv_slot *s = &p->slots[slot];
	struct mkv_watch *w = &p->watch[slot];
	uint64_t beat = mkv_share_load(p, &s->beat), now = mkv_clock_now();

	if (__atomic_load_n(&w->owner, __ATOMIC_RELAXED) != owner ||
	    __atomic_load_n(&w->beat, __ATOMIC_RELAXED) != beat) {
		__atomic_store_n(&w->owner, owner, __ATOMIC_RELAXED);
		__atomic_store_n(&w->beat, beat, __ATOMIC_RELAXED);
		__atomic_store_n(&w->since, now, __ATOMIC_RELAXED);
		return false;
	}
	return now - __atomic_load_n(&w->since, __ATOMIC_RELAXED) >= p->client_timeout_ns;
}

/*
 * Whether the slot's owner runs on this kernel: exactly known, not guessed.
 * Like every judge of a claim here, it is given the owner word its caller
 * has just loaded with mkv_share_load(), which invalidated the slot's first
 * line: boot and boot_tag, on that line, are read as they are, from the
 * same look as the owner (another invalidation would only make them newer
 * than the owner they are judged with).
 */
bool
mkv_client_local(const struct mkv_pool *p, uint32_t slot, uint64_t owner)
{
	const struct mkv_slot *s = &p->slots[slot];
	uint64_t boot = __atomic_load_n(&s->boot, __ATOMIC_SEQ_CST);

	return boot != 0 && boot == p->boot &&
		__atomic_load_n(&s->boot_tag, __ATOMIC_SEQ_CST) == owner;
}

/*
 * The slots this process may claim: all of them in a coherent pool; in a
 * non-coherent one its node entry's range (max_clients / max_nodes slots
 * each), so that no two hosts ever compete for a slot.
 */
void
mkv_client_range(const struct mkv_pool *p, uint32_t node_idx, uint32_t *lo, uint32_t *hi)
{
	uint32_t k = p->sb->max_clients / p->sb->max_nodes;

	*lo = 0;
	*hi = p->sb->max_clients;
	if (!p->noncoherent)
		return;
	*lo = node_idx < p->sb->max_nodes ? node_idx * k : 0;
	*hi = node_idx < p->sb->max_nodes ? *lo + k : 0;
}

/* Whether claim `owner` of slot stands: made, not given up, not revoked. */
bool
mkv_client_claimed(const struct mkv_pool *p, uint32_t slot, uint64_t owner)
{
	return MKV_SLOT_PID(owner) != 0 &&
		mkv_share_load(p, &p->slots[slot].revoked) != MKV_SLOT_INC(owner);
}

/*
 * Whether the client holding claim `owner` on slot is dead (a judgement
 * only); `owner` just loaded, as for mkv_client_local().
 */
bool
mkv_client_dead(const struct mkv_pool *p, uint32_t slot, uint64_t owner)
{
	const struct mkv_slot *s = &p->slots[slot];

	if (!mkv_client_claimed(p, slot, owner) ||
	    (slot == p->slot && owner == mkv_client_owner(p)))
		return false;
	/* a claim still being recorded is judged on its next look */
	if (__atomic_load_n(&s->boot_tag, __ATOMIC_SEQ_CST) != owner)
		return false;
	/*
	 * A claimant locks the byte, then stores the owner word: read it
	 * again after the lock (its writers are of our host, whose caches
	 * are coherent: no invalidation needed)
	 */
	if (mkv_client_local(p, slot, owner))
		return !mkv_lock_super_held(p, slot) &&
			__atomic_load_n(&s->owner, __ATOMIC_SEQ_CST) == owner;
	return heartbeat_dead(p, slot, owner);
}

/*
 * If the client holding claim `owner` (just loaded, as for
 * mkv_client_local()) is dead, revoke the claim: its pin
 * and its grants count no more.  True if the claim no longer stands
 * (revoked now or before, or given up): what it held may be reclaimed.
 * The lease holder calls this, inside its write window: the holders of
 * different hosts write the holder's line of a slot one at a time.  A
 * plain store: if the slot was claimed anew meanwhile, the new claim has
 * another incarnation, which this does not revoke.
 */
bool
mkv_client_reap(struct mkv_pool *p, uint32_t slot, uint64_t owner)
{
	struct mkv_slot *s = &p->slots[slot];

	if (!mkv_client_claimed(p, slot, owner))
		return true;
	if (!mkv_client_dead(p, slot, owner))
		return false;
	/*
	 * The line is the holders', but the last one may have been on another
	 * host: mkv_client_claimed() has just invalidated it, and no other
	 * holder writes it while we are in our write window.
	 */
	__atomic_store_n(&s->revoked, MKV_SLOT_INC(owner), __ATOMIC_SEQ_CST);
	/* named: a test stops the holder right after it (t/check_leasesites.c) */
	mkv_share_persist_at(p, &s->revoked, sizeof(s->revoked), MKV_SITE_NAMED(revoke));
	mkv_log(MKV_LOG_INFO, "pool %s: reclaimed slot %u of dead client %u", p->path, slot,
			MKV_SLOT_PID(owner));
	return true;
}

/* Claim slot i from owner word `expect`: its byte locked first, then the owner word. */
static bool
slot_claim(struct mkv_pool *p, uint32_t i, uint64_t expect)
{
	struct mkv_slot *s = &p->slots[i];
	uint32_t inc = MKV_SLOT_INC(expect) + 1;
	uint64_t owner = MKV_SLOT_OWNER(inc, p->pid), began = mkv_clock_now();

	if (mkv_lock_super(p, i, F_WRLCK))
		return false;
	if (!mkv_share_cas(p, &s->owner, expect, owner)) {
		mkv_lock_super(p, i, F_UNLCK);
		return false;
	}
	/*
	 * A new incarnation: no revocation judged before it can name it, so
	 * the claim counts as a beat that ends a chain (mkv_client_known()).
	 */
	p->beat_began_ns = began;
	p->beat_chain = 2;
	/* the counters carry on from the slot's last owner */
	mkv_share_inval(p, &s->beat, MKV_CACHELINE);
	__atomic_store_n(&s->pin, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->snap, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->node, p->node, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->flags, p->flags & MKV_RDONLY, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->boot, p->boot, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->boot_tag, owner, __ATOMIC_SEQ_CST);
	p->slot = i;
	p->incarnation = inc;
	mkv_client_beat(p);
	mkv_share_persist(p, s, offsetof(struct mkv_slot, completed));
	return true;
}

/*
 * Claim a slot of our range (mkv_client_range()): in a non-coherent pool
 * our node's entry is known first.
 */
int
mkv_client_attach(struct mkv_pool *p)
{
	uint32_t lo, hi;
	uint64_t o;

	p->pid = (uint32_t)getpid();
	p->boot = mkv_client_boot_id();
	mkv_client_range(p, p->node_idx, &lo, &hi);
	for (uint32_t i = lo; i < hi; i++) {
		o = mkv_share_load(p, &p->slots[i].owner);
		if (!mkv_client_claimed(p, i, o) && slot_claim(p, i, o))
			return 0;
	}
	/* None free: take over the slot of a client that died without closing. */
	for (uint32_t i = lo; i < hi; i++) {
		o = mkv_share_load(p, &p->slots[i].owner);
		if (mkv_client_dead(p, i, o) && slot_claim(p, i, o)) {
			mkv_log(MKV_LOG_INFO, "pool %s: took over slot %u of dead client %u",
					p->path, i, MKV_SLOT_PID(o));
			return 0;
		}
	}
	if (p->noncoherent)
		return mkv_err(MKV_E_USERS, "pool %s: all %u client slots of node %s are taken",
				p->path, hi - lo, p->node_name);
	return mkv_err(MKV_E_USERS, "pool %s: all %u client slots are taken", p->path, hi);
}

/* Whether our claim on our slot still stands. */
bool
mkv_client_alive(const struct mkv_pool *p)
{
	uint64_t owner = mkv_client_owner(p);

	return mkv_share_load(p, &p->slots[p->slot].owner) == owner &&
		mkv_client_claimed(p, p->slot, owner);
}

/*
 * The checks every call on a handle makes first: a handle, not one
 * inherited across fork(), whose client still holds its slot.
 */
/*
 * MKV_E_EXPIRED, saying how the claim was lost: `owner` and `revoked` are
 * the slot's words as the check found them.
 */
static int
expired(const struct mkv_pool *p, const char *fn, uint64_t owner, uint32_t revoked)
{
	char how[96];

	if (owner == mkv_client_owner(p) && revoked == p->incarnation)
		snprintf(how, sizeof(how), "the lease holder revoked its claim on slot %u", p->slot);
	else if (MKV_SLOT_PID(owner) == 0)
		snprintf(how, sizeof(how), "slot %u was given up", p->slot);
	else
		snprintf(how, sizeof(how), "slot %u is claimed by pid %u now", p->slot,
				MKV_SLOT_PID(owner));
	return mkv_err(MKV_E_EXPIRED,
			"%s: pool %s: this handle's client was judged dead and lost its slot (%s; paused longer than the client timeout?); its views may have changed: close the handle and open the pool again",
			fn, p->path, how);
}

int
mkv_client_check(const struct mkv_pool *p, const char *fn)
{
	int rc = mkv_client_usable(p, fn);

	if (!rc && !mkv_client_known(p) && !mkv_client_alive(p))
		rc = expired(p, fn, mkv_share_load(p, &p->slots[p->slot].owner),
				mkv_share_load(p, &p->slots[p->slot].revoked));
	return rc;
}

/* The first half of mkv_client_check(): a handle, not one inherited across fork(). */
int
mkv_client_usable(const struct mkv_pool *p, const char *fn)
{
	if (!p)
		return mkv_err(MKV_E_INVAL, "%s: pool is NULL", fn);
	if (p->forked)
		return mkv_err(MKV_E_INVAL,
				"%s: a pool handle inherited across fork(): open the pool in this process",
				fn);
	return 0;
}

/*
 * The second half, after mkv_reg_rtxn(): the claim, unless it is known
 * to stand (mkv_client_known()), read as mkv_client_alive() reads it, with
 * the lines of its two words invalidated together (one wait for memory
 * instead of two).
 */
int
mkv_client_check_fresh(const struct mkv_pool *p, const char *fn)
{
	const struct mkv_slot *s = &p->slots[p->slot];
	const void *lines[2] = { &s->owner, &s->revoked };
	uint64_t owner = mkv_client_owner(p);

	if (mkv_client_known(p))
		return 0;
	mkv_share_inval_n(p, lines, 2, sizeof(uint64_t));
	if (__atomic_load_n(&s->owner, __ATOMIC_SEQ_CST) != owner ||
	    __atomic_load_n(&s->revoked, __ATOMIC_SEQ_CST) == MKV_SLOT_INC(owner))
		return expired(p, fn, __atomic_load_n(&s->owner, __ATOMIC_SEQ_CST),
				__atomic_load_n(&s->revoked, __ATOMIC_SEQ_CST));
	return 0;
}

/* mkv_client_check(), and the handle must be open for writing. */
int
mkv_client_writable(const struct mkv_pool *p, const char *fn)
{
	int rc = mkv_client_check(p, fn);

	if (!rc && (p->flags & MKV_RDONLY))
		return mkv_err(MKV_E_RDONLY, "%s: pool %s is open read-only", fn, p->path);
	return rc;
}

/*
 * Non-coherent pools: whether our claim is known to stand without a look
 * at it, which costs an invalidation of two lines.  A claim is revoked
 * only after the holder saw its beat stand still for the client timeout T
 * by its clock, and it takes a beat for standing still from no earlier
 * than the beat was stored.  So while each beat ends less than T after
 * the one before it began, no beat can be judged to have stood still
 * before the next one shows, and the newest one not before T after it
 * began.  mkv_client_beat() reads our claim first, and takes it as
 * standing until half of T after the beat began (the other half for the
 * rates of the hosts' clocks), once two gaps in a row were below half of
 * T.  Only a revocation judged before that chain began (we were stopped
 * for T) and landing more than a beat's period after its judgement (the
 * holder stopped between the two steps of one pass) escapes this; a look
 * at the claim before each call misses such a revocation as well, and
 * with less delay.  Our own clock runs on while we are stopped, so a stop
 * of half of T or more ends the knowing.
 */
bool
mkv_client_known(const struct mkv_pool *p)
{
	return p->noncoherent &&
		mkv_clock_now() < __atomic_load_n(&p->claim_until, __ATOMIC_ACQUIRE);
}

/* Advance our heartbeat, for the nodes that cannot see our process. */
void
mkv_client_beat(struct mkv_pool *p)
{
	struct mkv_slot *s = &p->slots[p->slot];
	uint64_t began = mkv_clock_now(), last = p->beat_began_ns;

	/* a slot taken away from us is somebody else's now */
	if (!mkv_client_alive(p)) {
		__atomic_store_n(&p->claim_until, 0, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&s->beat, __atomic_load_n(&s->beat, __ATOMIC_RELAXED) + 1,
			__ATOMIC_SEQ_CST);
	__atomic_store_n(&s->beat_wall_ns, mkv_clock_wall(), __ATOMIC_RELAXED);
	/*
	 * the whole line: the lookup counters beside the beat go out with it;
	 * named: a test stops a client right after a beat (t/check_leasesites.c)
	 */
	mkv_share_persist_at(p, &s->beat, MKV_CACHELINE, MKV_SITE_NAMED(client_beat));
	if (!p->noncoherent)
		return;
	p->beat_began_ns = began;
	p->beat_chain = last && mkv_clock_now() - last < p->client_timeout_ns / 2 ?
			p->beat_chain + 1 : 0;
	if (p->beat_chain >= 2)
		__atomic_store_n(&p->claim_until, began + p->client_timeout_ns / 2,
				__ATOMIC_RELEASE);
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

/*
 * Give the slot up (if it is still ours), then its lock.  The owner word
 * alone: the compare-and-swap writes its line back, and what the rest of
 * the slot holds (a pin, a snapshot bound) counts for nothing once no
 * claim stands (mkv_epoch_min(), mkv_pool_clients()) until the next
 * claimant clears it (slot_claim()).
 */
void
mkv_client_detach(struct mkv_pool *p)
{
	struct mkv_slot *s = &p->slots[p->slot];

	(void)mkv_share_cas(p, &s->owner, mkv_client_owner(p), MKV_SLOT_OWNER(p->incarnation, 0));
	mkv_lock_super(p, p->slot, F_UNLCK);
	p->slot = UINT32_MAX;
}
