# SPDX-License-Identifier: MIT
"""Throughput of the LMCache connector, next to a plain copy of the same bytes.

    python3 -m marukv.lmcache_bench [--chunks N] [--workers N] [--dir DIR]
                                    [--small-rounds N] [--large-rounds N]

Drives a marukv.lmcache.Connector as LMCache's native-plugin adapter does
(submit a batch, poll the eventfd, drain the completions) with batches of
N chunks (default 64) at 256 KiB and at 32 MiB (one 256-token chunk of
Llama-3-8B in fp16: 32 layers x 2 x 256 tokens x 8 heads x 128 x 2
bytes).  The buffers are ctypes-backed memoryviews, as LMCache's are.
Each round times a set of N fresh keys, an exists and a get of them (the
bytes are checked once), then deletes them untimed; it prints, per batch,
the median time from submit to completion (and the p99 from 100 rounds
up) and the GB/s of the median.  Two rounds before the timed ones touch
the pool's pages from the connector's process for the first time (a page
fault each, however warm the tmpfs pages are); their sets are the "cold
set" line, what a freshly started LMCache server pays on its first pass
over the pool.  In the same run, a plain copy of the
same N chunks from the source buffers to the destination buffers
(ctypes.memmove, one thread) gives the memory's speed on this machine:
ratio is the connector's GB/s over the copy's.

The pool and the buffers take about 3.5 times N x 32 MiB of memory
(7 GiB at N = 64): a pool of 1.5 times the batch, in a temporary directory
under DIR (default /dev/shm), removed at the end, and a source and a
destination arena.  Not a test: the figures depend on the machine and its
load.
"""

import argparse
import ctypes
import os
import random
import select
import shutil
import statistics
import sys
import tempfile
import time

import marukv
from marukv.bench import figures, warm
from marukv.lmcache import Connector

SIZES = ((256 << 10, "256 KiB"), (32 << 20, "32 MiB"))


class Arena:
    """n chunks of size bytes, as LMCache's buffers: ctypes memoryviews."""

    def __init__(self, n, size):
        self.mem = (ctypes.c_ubyte * (n * size))()
        base = ctypes.addressof(self.mem)
        kind = ctypes.c_ubyte * size
        self.addrs = [base + i * size for i in range(n)]
        self.chunks = [memoryview(kind.from_address(a)) for a in self.addrs]


def wait(conn, poller, fid):
    """Poll and drain until fid completes; its (ok, error, bools)."""
    while True:
        if not poller.poll(30000):
            raise TimeoutError("no completion of batch %d in 30 s" % fid)
        for f, ok, error, bools in conn.drain_completions():
            if f == fid:
                return ok, error, bools


def timed(conn, poller, op, *args):
    """(seconds from submit to completion, bools); raises if a key failed."""
    t = time.perf_counter()
    fid = getattr(conn, "submit_batch_" + op)(*args)
    ok, error, bools = wait(conn, poller, fid)
    dt = time.perf_counter() - t
    if not ok or not all(bools):
        raise RuntimeError("%s failed: %s" % (op, error or "a miss"))
    return dt


def bench_size(workdir, size, chunks, rounds, workers):
    path = os.path.join(workdir, "pool-%d" % size)
    data_size = chunks * size * 3 // 2 + (64 << 20)
    with marukv.Pool(path, create=True, data_size=data_size, watermarks=(0, 0)) as pool:
        warm(pool)
    src, dst = Arena(chunks, size), Arena(chunks, size)
    block = random.Random(size).randbytes(1 << 20)
    for i, c in enumerate(src.chunks):
        c.cast("B")[:] = (bytes([i]) + block * (size // len(block) + 1))[:size]
    times = {"set": [], "exists": [], "get": [], "copy": [], "cold set": []}
    conn = Connector(path=path, workers=workers)
    try:
        poller = select.poll()
        poller.register(conn.event_fd(), select.POLLIN)
        # Two rounds first, untimed but for their sets: the connector's
        # process touches the pool's pages for the first time, one page
        # fault each.
        for r in range(-2, rounds):
            keys = ["bench@00000000@0@%08x%04x" % (r + 2, i) for i in range(chunks)]
            dt = timed(conn, poller, "set", keys, src.chunks)
            times["set" if r >= 0 else "cold set"].append(dt)
            dt = timed(conn, poller, "exists", keys)
            if r >= 0:
                times["exists"].append(dt)
            dt = timed(conn, poller, "get", keys, dst.chunks)
            if r >= 0:
                times["get"].append(dt)
            if r == -2 and any(bytes(a) != bytes(b) for a, b in zip(src.chunks, dst.chunks)):
                raise RuntimeError("get returned other bytes than set stored")
            timed(conn, poller, "delete", keys)
            t = time.perf_counter()
            for s, d in zip(src.addrs, dst.addrs):
                ctypes.memmove(d, s, size)
            if r >= 0:
                times["copy"].append(time.perf_counter() - t)
    finally:
        conn.close()
        shutil.rmtree(path, ignore_errors=True)
    return times


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m marukv.lmcache_bench",
                                 description="Batched set, get and exists through "
                                 "marukv.lmcache.Connector, next to a plain copy.")
    ap.add_argument("--chunks", type=int, default=64, help="chunks a batch (default 64)")
    ap.add_argument("--workers", type=int, default=4,
                    help="the connector's worker threads (default 4)")
    ap.add_argument("--small-rounds", type=int, default=200,
                    help="rounds at 256 KiB (default 200)")
    ap.add_argument("--large-rounds", type=int, default=10,
                    help="rounds at 32 MiB (default 10)")
    ap.add_argument("--dir", default="/dev/shm", help="where the pools go (default /dev/shm)")
    a = ap.parse_args(argv)
    if a.chunks < 1 or a.workers < 1 or a.small_rounds < 1 or a.large_rounds < 1:
        ap.error("--chunks, --workers and the rounds must be at least 1")

    work = tempfile.mkdtemp(prefix="marukv-lmcache-bench.", dir=a.dir)
    try:
        results = [(label, size, bench_size(work, size, a.chunks, rounds, a.workers))
                   for (size, label), rounds in zip(SIZES, (a.small_rounds, a.large_rounds))]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("marukv %s, Python %s, %d chunks a batch, %d workers, %d CPUs"
          % (marukv.version(), sys.version.split()[0], a.chunks, a.workers, os.cpu_count()))
    print("per batch: median/p99 ms from submit to completion (p99 from 100 rounds up);")
    print("GB/s of the median; ratio: GB/s over a plain copy of the same chunks")
    print()
    print("%-8s %-8s %7s %19s %8s %7s" % ("chunk", "op", "rounds", "batch ms", "GB/s", "ratio"))
    for label, size, times in results:
        nbytes = a.chunks * size
        copy = nbytes / statistics.median(times["copy"]) / 1e9
        for op in ("set", "get", "exists", "copy", "cold set"):
            med, p99 = figures(list(times[op]))
            n = len(times[op])
            ms = "%.3f/%s" % (med * 1e3, "%.3f" % (p99 * 1e3) if n >= 100 else "-")
            if op == "exists":
                print("%-8s %-8s %7d %19s %8s %7s" % (label, op, n, ms, "-", "-"))
            else:
                gbs = nbytes / med / 1e9
                print("%-8s %-8s %7d %19s %8.2f %7.2f" % (label, op, n, ms, gbs, gbs / copy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
