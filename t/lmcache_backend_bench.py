# SPDX-License-Identifier: MIT
"""Figures for marukv.lmcache_backend (a benchmark, not a test), from the top
of the build tree, after make:

    PYTHONPATH=<a staged marukv package> /usr/bin/python3 t/lmcache_backend_bench.py
        [--chunks N] [--rounds N]

(t/python.sh shows how the package is staged.)  For chunks of 256 KiB and
of 32 MiB (one 256-token chunk of Llama-3-8B in fp16), N of them (default
64) in a "GPU" tensor (a CPU tensor: nothing here has a GPU), each round
times, interleaved:

  plain     torch copying the N chunks into another tensor
  backend   LMCache's engine (t/lmcache_backend_harness.py) storing them
            through MarukvBackend, its allocator: one copy, into pool
            pages, timed until the store returns (LMCache's does once the
            puts are submitted) and until the puts are published too; and
            retrieving them into another "GPU" tensor: one copy, from
            zero-copy views.  The chunks' keys are made beforehand, as
            LMCache's token database makes them before it stores
  plugin    the path of marukv.lmcache.Connector (LMCache's server and
            its native plugin): a copy into LMCache's own memory, then the
            connector's copy into the pool; and back: the connector's copy
            out of the pool, then LMCache's copy into the "GPU" tensor

and prints medians, GB/s, the ratio to the plain copy, the bytes copied
per byte stored and per byte retrieved (by each path's construction: the
backend's own calls copy nothing; its store is LMCache's one copy into
the object, and with CPU tensors a retrieve's object is the pool's
bytes themselves), and the DRAM each path holds besides the pool.

Each size runs with the chunks' checksums recorded (the default of both
paths) and without (marukv.checksum: false, Pool(nochecksum=True)): on a
machine of two cores the publishes' hashing runs beside the store's copy.
"""

import argparse
import ctypes
import os
import select
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import lmcache_backend_harness as lh  # noqa: E402
import marukv  # noqa: E402
from marukv.lmcache import Connector  # noqa: E402
from marukv.lmcache_bench import timed  # noqa: E402

SHAPES = {"256 KiB": dict(layers=4, heads=8, head_size=8),
          "32 MiB": dict(layers=32, heads=8, head_size=128)}
CHUNK = 256
MADV_POPULATE_WRITE = 23     # Linux 5.14


def median(xs):
    return sorted(xs)[len(xs) // 2]


def bench(workdir, label, n, rounds, checksum):
    path = os.path.join(workdir, "pool")
    shape = SHAPES[label]
    size = 2 * shape["layers"] * CHUNK * shape["heads"] * shape["head_size"] * 2
    # a pool of a real size: a handle caches grants of 1/(4 x max_clients) of it
    marukv.Pool(path, create=True, data_size=max(3 * n * size + (64 << 20), 2 << 30)).close()
    e = lh.Engine(path, chunk_size=CHUNK, extra={"marukv.checksum": checksum}, **shape)
    tokens0 = list(range(n * CHUNK))
    gpu = torch.empty(e.metadata.get_shapes(n * CHUNK)[0], dtype=torch.float16)
    gpu.view(torch.int16).random_(-30000, 30000)
    plain = torch.empty_like(gpu)
    l1 = torch.empty(n * size, dtype=torch.uint8)           # LMCache's own memory
    l1_views = [memoryview((ctypes.c_ubyte * size).from_address(l1.data_ptr() + i * size))
                for i in range(n)]
    conn = Connector(path=path, workers=4, nochecksum=not checksum)
    # every page of the pool mapped once in both paths' handles, as a
    # running engine's or server's are
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for pool in (e.sm.backend()._open(), conn._pool):
        if libc.madvise(*pool.data_mapping(), MADV_POPULATE_WRITE):
            print("  (madvise: %s: first touches are timed too)" % os.strerror(ctypes.get_errno()))
    out = torch.empty_like(gpu)
    poller = select.poll()
    poller.register(conn.event_fd(), select.POLLIN)
    t = {k: [] for k in ("plain", "store", "store+publish", "retrieve", "plugin store",
                         "plugin retrieve")}
    try:
        for r in range(rounds + 1):
            tokens = [x + r * 1000003 for x in tokens0]
            s = time.perf_counter()
            for i in range(n):
                plain[:, :, i * CHUNK:(i + 1) * CHUNK].copy_(gpu[:, :, i * CHUNK:(i + 1) * CHUNK])
            t["plain"].append(time.perf_counter() - s)
            ekeys = e.keys(tokens)
            s = time.perf_counter()
            assert len(e.store(tokens, gpu, keys=ekeys, wait=False)) == n
            t["store"].append(time.perf_counter() - s)
            e.settle()
            t["store+publish"].append(time.perf_counter() - s)
            s = time.perf_counter()
            out, got = e.retrieve(tokens, gpu=out)
            t["retrieve"].append(time.perf_counter() - s)
            assert got == n * CHUNK
            if r == 0:
                assert torch.equal(out.view(torch.int16), gpu.view(torch.int16)), \
                    "the backend retrieved other bytes"
            keys = ["plug@00000000@0@%08x%04x" % (r, i) for i in range(n)]
            s = time.perf_counter()
            for i in range(n):          # LMCache: the GPU's chunk into its memory
                l1[i * size:(i + 1) * size].view(torch.float16).view(
                    gpu[:, :, :CHUNK].shape).copy_(gpu[:, :, i * CHUNK:(i + 1) * CHUNK])
            timed(conn, poller, "set", keys, l1_views)
            t["plugin store"].append(time.perf_counter() - s)
            s = time.perf_counter()
            timed(conn, poller, "get", keys, l1_views)
            for i in range(n):          # and back into the GPU
                plain[:, :, i * CHUNK:(i + 1) * CHUNK].copy_(
                    l1[i * size:(i + 1) * size].view(torch.float16).view(
                        gpu[:, :, :CHUNK].shape))
            t["plugin retrieve"].append(time.perf_counter() - s)
            timed(conn, poller, "delete", keys)
            for k in ekeys:
                e.sm.remove(k)
        for k in t:
            t[k] = median(t[k][1:])     # round 0 touches the pages first
        gb = n * size / 1e9
        print("%d chunks of %s, checksums %s, medians of %d rounds"
              % (n, label, "on" if checksum else "off", rounds))
        print("  %-16s %7.2f GB/s" % ("plain copy", gb / t["plain"]))
        for name, copies in (("store", "1"), ("store+publish", "1"),
                             ("retrieve", "1 (0 in the backend)"),
                             ("plugin store", "2"), ("plugin retrieve", "2")):
            print("  %-16s %7.2f GB/s   ratio %.2f   bytes copied per byte: %s"
                  % (name, gb / t[name], t["plain"] / t[name], copies))
        print("  DRAM held besides the pool: backend 0, plugin %d MiB (LMCache's memory for "
              "the batch)" % (n * size >> 20))
    finally:
        conn.close()
        e.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    for label in SHAPES:
        for checksum in (True, False):
            d = tempfile.mkdtemp(prefix="marukv-lmb-bench.", dir="/dev/shm")
            try:
                bench(d, label, a.chunks, a.rounds, checksum)
            finally:
                shutil.rmtree(d)


if __name__ == "__main__":
    main()
