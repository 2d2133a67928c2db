/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/pool_requests.c -- libFuzzer target: requests the lease holder
 * finds in the rings, from clients alive or dead, with any page states.
 *
 * Two clients are written into slots 1 and 2 of the small pool
 * (fuzz_pool.h) as a process of this kernel would be: alive if the
 * target holds their slots' locks (client.c), dead if not.  The input:
 *   [alive bits][incarnation of slot 1][of slot 2]
 *   FUZZ_PAGES page bytes: state (b & 3) of the page, granted to slot
 *     1 + (b >> 2 & 1), under its current claim or (b & 8) an older one
 *   then requests, each [op and slot][page][pages][length, 2 bytes]
 *     [parent][key length][key]: op = b & 15 (1 to 8 are requests, the
 *     rest are not), slot 1 + (b >> 4 & 1), the claim's incarnation or
 *     (b & 32) an older one; up to 8 per slot.
 * Then a handle opens the pool, takes the lease, rebuilds the page table
 * and serves the requests.  Every request must be answered, and after
 * them the registry and the page table must agree (mkv_pool_verify()):
 * whatever clients ask, alive or dead, in whatever order, no value lands
 * on pages the table does not hold for it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_pool.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_pool fp;
static struct mkv_super sb;

static void
put64(uint64_t off, uint64_t v)
{
	fuzz_pool_write(&fp, 0, off, &v, sizeof(v));
}

/*
 * Whether every request written is answered, waiting up to 10 s.  Every
 * second without the answers, a request of our own goes through the
 * write path as a waiting client's would: a holder slowed down past half
 * its lease period (sanitizers on a loaded machine) fences itself, and
 * only a waiting client takes the lease again.
 */
static int
answered(struct mkv_pool *pool, const uint32_t *seqs)
{
	const struct mkv_rq *rq = (const struct mkv_rq *)((const char *)pool->super.addr + sb.rq_off);
	struct timespec nap = { 0, 1000000 };

	for (int tries = 1; tries <= 10000; tries++) {
		int left = 0;

		for (unsigned i = 0; i < 3 * MKV_RQ_DEPTH; i++)
			left += seqs[i] && (uint32_t)(__atomic_load_n(&rq[i].done,
					__ATOMIC_ACQUIRE) >> 32) != seqs[i];
		if (!left)
			return 1;
		if (tries % 1000 == 0)
			mkv_pool_set_watermarks(pool, MKV_DEFAULT_LOW_WATERMARK,
					MKV_DEFAULT_HIGH_WATERMARK);
		nanosleep(&nap, NULL);
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t inc[3] = { 0 }, seqs[3 * MKV_RQ_DEPTH] = { 0 }, used[3] = { 0 };
	struct mkv_verify ver;
	struct mkv_pool *pool;
	struct mkv_opts *o;
	int lockfd, rc;

	if (!fp.img[0]) {
		fuzz_pool_init(&fp);
		memcpy(&sb, fp.img[0], sizeof(sb));
	}
	if (size < 3 + FUZZ_PAGES)
		return 0;
	fuzz_pool_restore(&fp);
	lockfd = open(fp.super, O_RDWR);
	FUZZ_CHECK(lockfd >= 0);
	for (uint32_t s = 1; s <= 2; s++) {
		uint64_t at = sb.slots_off + s * sizeof(struct mkv_slot);
		uint64_t owner = MKV_SLOT_OWNER(data[s] + 1, 7000 + s);
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = s, .l_len = 1 };

		inc[s] = data[s] + 1;
		put64(at + offsetof(struct mkv_slot, owner), owner);
		put64(at + offsetof(struct mkv_slot, boot), mkv_client_boot_id());
		put64(at + offsetof(struct mkv_slot, boot_tag), owner);
		if (data[0] & s)
			FUZZ_CHECK(fcntl(lockfd, F_OFD_SETLK, &fl) == 0);
	}
	for (uint32_t pg = 0; pg < FUZZ_PAGES; pg++) {
		uint8_t b = data[3 + pg];
		uint32_t s = 1 + (b >> 2 & 1);

		put64(sb.pt_off + pg * sizeof(uint64_t), MKV_PG_WORD(b & 3, s,
				(b & 8) ? inc[s] - 1 : inc[s]));
	}
	data += 3 + FUZZ_PAGES;
	size -= 3 + FUZZ_PAGES;
	while (size >= 7) {
		uint32_t s = 1 + (data[0] >> 4 & 1), i = used[s]++;
		struct mkv_rq e;

		if (i >= MKV_RQ_DEPTH)
			break;
		memset(&e, 0, sizeof(e));
		e.op = data[0] & 15;
		e.inc = (data[0] & 32) ? inc[s] - 1 : inc[s];
		e.page = data[1];
		e.npages = data[2];
		e.length = (uint64_t)data[3] | (uint64_t)data[4] << 8;
		e.parent = data[5];
		e.klen = data[6];
		data += 7;
		size -= 7;
		if (e.klen > size)
			e.klen = (uint32_t)size;
		if (e.klen > sizeof(e.key))
			e.klen = sizeof(e.key);
		memcpy(e.key, data, e.klen);
		data += e.klen;
		size -= e.klen;
		e.seq = seqs[s * MKV_RQ_DEPTH + i] = i + 1;
		fuzz_pool_write(&fp, 0, sb.rq_off + (s * MKV_RQ_DEPTH + i) * sizeof(e), &e, sizeof(e));
	}
	FUZZ_CHECK(mkv_opts_new(&o) == 0);
	FUZZ_CHECK(mkv_opts_set_node(o, "fuzz") == 0);
	rc = mkv_pool_open(fp.dir, 0, o, &pool);
	mkv_opts_delete(&o);
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(answered(pool, seqs));
	rc = mkv_pool_verify(pool, 0, &ver);
	if (rc)
		fprintf(stderr, "fuzz: verify: %s\n", ver.first_problem);
	FUZZ_CHECK(rc == 0);
	mkv_pool_close(&pool);
	close(lockfd);
	return 0;
}
