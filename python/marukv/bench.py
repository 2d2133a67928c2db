# SPDX-License-Identifier: MIT
"""Latency of the Python binding, next to python3-lmdb and the C library.

    python3 -m marukv.bench [--keys N] [--ops N] [--dir DIR] [--c-bench PATH]

Times each call from Python (time.perf_counter_ns around it) on a fresh
pool of N keys with 1 KiB values, and prints the median and p99 in ns:
exists, get+release, prefix_len over a 64-key chain, put and alloc+publish
at 4 KiB and 1 MiB.  In the same run, python3-lmdb (Debian's py-lmdb, also
a C extension) does the same lookups on an LMDB environment holding the
same keys: a lookup begins a read-only transaction, gets and ends it, and
a prefix gets 64 keys in one transaction.  The ratio marukv/LMDB is the
binding's cost next to another binding's.

The C library's own figures come from `marukv-bench lookup` (see
marukv-bench(1)).  With --c-bench PATH this command runs that program on
the same number of keys and prints python/C for each lookup: the binding's
overhead per call.  Scratch files go to a temporary directory under DIR
(default /dev/shm) and are removed at the end.  Not a test: the figures
depend on the machine and its load.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import marukv

try:
    import lmdb
except ImportError:
    lmdb = None

VALUE = 1024
CHAIN = 64


def figures(samples):
    """(median, p99) of a list of ns."""
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, len(samples) * 99 // 100)]


def timed(fn, args_list):
    """ns of fn(*args) for each args of args_list."""
    clock = time.perf_counter_ns
    out = []
    for args in args_list:
        t = clock()
        fn(*args)
        out.append(clock() - t)
    return out


def make_keys(n, seed):
    rnd = random.Random(seed)
    return [rnd.randbytes(32) for _ in range(n)]


def bench_lookups(pool, env, keys, ops, prefix_ops, seed):
    rnd = random.Random(seed + 1)
    picks = [(rnd.choice(keys),) for _ in range(ops)]
    chains = [(keys[i:i + CHAIN],) for i in
              (rnd.randrange(len(keys) - CHAIN) for _ in range(prefix_ops))]
    for k in keys:
        pool.put(k, k * (VALUE // len(k)))

    def get_release(k):
        pool.get(k).release()

    rows = [
        ("exists", timed(pool.exists, picks)),
        ("get+release", timed(get_release, picks)),
        ("prefix_len %d" % CHAIN, timed(pool.prefix_len, chains)),
    ]
    if env is None:
        return [(name, m, None) for name, m in rows]
    with env.begin(write=True) as txn:
        for k in keys:
            txn.put(k, k[:8] * 7)       # 56 bytes, as marukv's registry entries

    def lmdb_exists(k):
        with env.begin() as txn:
            txn.get(k)

    def lmdb_get(k):
        with env.begin(buffers=True) as txn:
            txn.get(k)

    def lmdb_prefix(ks):
        with env.begin() as txn:
            for k in ks:
                if txn.get(k) is None:
                    break

    peers = [timed(lmdb_exists, picks), timed(lmdb_get, picks), timed(lmdb_prefix, chains)]
    return [(name, m, p) for (name, m), p in zip(rows, peers)]


def warm(pool):
    """Touch every free page once (as marukv-bench put does), so that the
    writes time marukv, not the kernel's first faults on tmpfs pages."""
    held = []
    try:
        while True:
            buf = pool.alloc(16 << 20)
            with memoryview(buf) as m:
                m[:] = bytes(len(m))
            held.append(buf)
    except marukv.NoSpace:
        pass
    for buf in held:
        pool.abort(buf)


def bench_writes(pool, ops, seed):
    warm(pool)
    rows = []
    for size, n in ((4096, ops), (1 << 20, max(ops // 20, 20))):
        data = random.Random(seed).randbytes(size)
        label = "4 KiB" if size == 4096 else "1 MiB"
        for how in ("put", "alloc+publish"):
            samples = []
            for i in range(n):
                key = b"w-%s-%d" % (how.encode(), i)
                t = time.perf_counter_ns()
                if how == "put":
                    pool.put(key, data)
                else:
                    buf = pool.alloc(size)
                    memoryview(buf)[:] = data
                    pool.publish(key, buf)
                samples.append(time.perf_counter_ns() - t)
                pool.delete(key)        # not timed: keeps the pool from filling
            rows.append(("%s %s" % (how, label), samples, size))
    return rows


def c_figures(path, nkeys, ops, workdir):
    """marukv-bench lookup's medians (exists, get, prefix) in ns, or None."""
    cmd = [path, "lookup", "--keys", str(nkeys), "--readers", "1", "--no-redis",
           "--repeat", "1", "--ops", str(ops), "--dir", workdir, "--json"]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print("marukv-bench lookup failed: %s" % e, file=sys.stderr)
        return None
    row = json.loads(out)["rows"][0]
    return {"exists": row["marukv_exists"]["median_ns"],
            "get+release": row["marukv_get"]["median_ns"],
            "prefix_len %d" % CHAIN: row["marukv_prefix"]["median_ns"]}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m marukv.bench",
                                 description="Latency of the marukv Python binding per call, "
                                 "next to python3-lmdb and the C library.")
    ap.add_argument("--keys", type=int, default=10000, help="keys in the pool (default 10000)")
    ap.add_argument("--ops", type=int, default=20000,
                    help="timed lookups per call (default 20000; prefix and writes fewer)")
    ap.add_argument("--dir", default="/dev/shm", help="where scratch files go (default /dev/shm)")
    ap.add_argument("--c-bench", metavar="PATH",
                    help="marukv-bench to run for the C figures (default: print how)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the keys (default 1)")
    a = ap.parse_args(argv)
    if a.keys <= CHAIN or a.ops < 100:
        ap.error("--keys must be over %d and --ops at least 100" % CHAIN)

    work = tempfile.mkdtemp(prefix="marukv-bench.", dir=a.dir)
    try:
        keys = make_keys(a.keys, a.seed)
        data_size = max(256 << 20, 2 * a.keys * 4096)
        with marukv.Pool(os.path.join(work, "pool"), create=True, data_size=data_size,
                         page_size=4096, watermarks=(0, 0)) as pool:
            env = None
            if lmdb is not None:
                env = lmdb.open(os.path.join(work, "lmdb"), map_size=1 << 30,
                                metasync=False, sync=False)
            lookups = bench_lookups(pool, env, keys, a.ops, max(a.ops // 20, 100), a.seed)
            writes = bench_writes(pool, max(a.ops // 10, 100), a.seed)
            if env is not None:
                env.close()
        cfig = c_figures(a.c_bench, a.keys, a.ops, work) if a.c_bench else None
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("marukv %s, Python %s, %d keys of %d bytes, ns per call (median/p99)"
          % (marukv.version(), sys.version.split()[0], a.keys, VALUE))
    print()
    head = "%-16s %14s %14s %7s" % ("lookup", "marukv", "python3-lmdb", "ratio")
    print(head + (" %8s %8s" % ("C", "py/C") if cfig else ""))
    for name, m, p in lookups:
        mm, m99 = figures(m)
        line = "%-16s %14s" % (name, "%d/%d" % (mm, m99))
        if p is not None:
            pm, p99 = figures(p)
            line += " %14s %7.2f" % ("%d/%d" % (pm, p99), mm / pm)
        else:
            line += " %14s %7s" % ("-", "-")
        if cfig:
            line += " %8d %8.2f" % (cfig[name], mm / max(cfig[name], 1))
        print(line)
    if lmdb is None:
        print("(python3-lmdb not found: no LMDB peer; Debian: python3-lmdb)")
    print()
    print("%-24s %14s %8s" % ("write", "marukv", "GB/s"))
    for name, s, size in writes:
        mm, m99 = figures(s)
        print("%-24s %14s %8.2f" % (name, "%d/%d" % (mm, m99), size / mm))
    print()
    if cfig is None:
        print("C figures of the same lookups: marukv-bench lookup --keys %d --readers 1 "
              "--no-redis\n(or run this with --c-bench PATH-TO-marukv-bench); python/C is the "
              "binding's overhead per call." % a.keys)
    else:
        print("C: marukv-bench lookup --keys %d --readers 1 --no-redis --repeat 1 (medians); "
              "py/C is the binding's overhead per call." % a.keys)
    return 0


if __name__ == "__main__":
    sys.exit(main())
