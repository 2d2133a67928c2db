/* SPDX-License-Identifier: MIT */
/*
 * t/fuzz/pool_super.c -- libFuzzer target: a pool whose super is damaged.
 *
 * The input is a list of patches to the small pool's super (fuzz_pool.h),
 * each [what][offset, 2 bytes little-endian][length][bytes]:
 *   what & 7   0 the superblock header (its checksum is made right again,
 *              unless what & 8, so that the geometry checks behind it are
 *              reached), 1 the writer's state and lease record, 2 the node
 *              table, 3 the client slots, 4 the request entries, 5 the
 *              page table, 6 the access hints, 7 truncate super to
 *              offset * 64 bytes (no bytes follow)
 *   what & 16  use the pool read-only
 * The offset is taken modulo the region's size; the bytes stop at its end.
 * Then every public call runs on the pool (fuzz_pool_use()): each must
 * return a code it documents, and nothing may crash, hang or touch memory
 * outside what it owns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_pool.h"
#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fuzz_pool fp;
static struct mkv_super sb;

static void
region(unsigned which, uint64_t *off, uint64_t *len)
{
	const uint64_t start[] = { 0, sb.state_off, sb.nodes_off, sb.slots_off, sb.rq_off,
			sb.pt_off, sb.hint_off, sb.super_size };
	const uint64_t size[] = { sizeof(sb), sizeof(struct mkv_state),
			(uint64_t)sb.max_nodes * sizeof(struct mkv_node),
			(uint64_t)sb.max_clients * sizeof(struct mkv_slot),
			(uint64_t)sb.max_clients * sb.rq_depth * sizeof(struct mkv_rq),
			sb.nr_pages * sizeof(uint64_t), sb.nr_pages };

	*off = start[which];
	*len = size[which];
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mkv_super hdr;
	int rdonly = 0;

	if (!fp.img[0]) {
		fuzz_pool_init(&fp);
		memcpy(&sb, fp.img[0], sizeof(sb));
	}
	fuzz_pool_restore(&fp);
	hdr = sb;
	while (size >= 4) {
		unsigned what = data[0], len = data[3];
		uint64_t off = (uint64_t)data[1] | (uint64_t)data[2] << 8, start, rlen;

		data += 4;
		size -= 4;
		rdonly |= (what & 16) != 0;
		if ((what & 7) == 7) {
			FUZZ_CHECK(truncate(fp.super, (off_t)(off * 64 % sb.super_size)) == 0);
			continue;
		}
		region(what & 7, &start, &rlen);
		off %= rlen;
		if (len > size)
			len = (unsigned)size;
		if (len > rlen - off)
			len = (unsigned)(rlen - off);
		if ((what & 7) == 0) {
			memcpy((uint8_t *)&hdr + off, data, len);
			if (!(what & 8))
				hdr.csum = mkv_hash_fnv1a(&hdr, offsetof(struct mkv_super, csum));
			fuzz_pool_write(&fp, 0, 0, &hdr, sizeof(hdr));
		} else {
			fuzz_pool_write(&fp, 0, start + off, data, len);
		}
		data += len;
		size -= len;
	}
	fuzz_pool_use(&fp, rdonly);
	return 0;
}
