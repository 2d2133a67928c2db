# SPDX-License-Identifier: MIT
"""Figures for marukv.vllm (a benchmark, not a test), from the top of the
build tree, after make:

    PYTHONPATH=<a staged marukv package> /usr/bin/python3 t/vllm_bench.py [--blocks N]
        [--no-checksum]

(t/python.sh shows how the package is staged.)  A Llama-3-8B-shaped cache
(32 layers, 8 KV heads, head size 128, fp16, block size 16: 2 MiB a
block), driven through t/vllm_harness.py's engine:

  save   wait_for_save of N new blocks: each gathered from every layer
         straight into pool pages, then published (--no-checksum: with
         the connector's checksum key false)
  load   start_load_kv of those N blocks from zero-copy views
  torch  the same per-layer copies between the cache and a plain CPU
         tensor, in the same run: the ratio is marukv's / torch's

and get_num_new_matched_tokens for prompts of 1k, 8k and 32k tokens, all
cached and none cached, the chain hashed from the tokens; and asked again
for a request still waiting, whose chain the connector keeps.  The four
transfers run interleaved, 7 rounds, and each figure is a median; the
machine's noise shows in the spread, so compare ratios, not absolute times.
"""

import argparse
import ctypes
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import marukv  # noqa: E402
import vllm_harness as vh  # noqa: E402


MADV_POPULATE_WRITE = 23     # Linux 5.14


def median(f, runs=5, sync=lambda: None):
    """f's median time over runs; sync() waits for what f queued (a GPU's)."""
    ts = []
    for _ in range(runs):
        sync()
        t = time.perf_counter()
        f()
        sync()
        ts.append(time.perf_counter() - t)
    return sorted(ts)[runs // 2]


def transfers(e, n, plain, sync=lambda: None, label=("", "")):
    """Time the save and the load of n blocks through engine e's worker
    against torch's per-layer copies between its cache and plain (a tensor
    of n blocks' bytes), and print GB/s and the ratios; label names the two
    directions of the torch copies."""
    w, block_bytes = e.worker, e.worker._block_bytes
    ids = list(range(1, n + 1))

    def save(run=[0]):
        run[0] += 1
        hashes = [b"%032x" % (run[0] * 100000 + i) for i in range(n)]
        w.bind_connector_metadata(vh.marukv.vllm.MarukvMetadata(
            saves=[vh.marukv.vllm._Save("r", None, hashes, ids)]))
        w.wait_for_save()
        w.clear_connector_metadata()
        save.last = hashes

    def load():
        w.bind_connector_metadata(vh.marukv.vllm.MarukvMetadata(
            loads=[vh.marukv.vllm._Load("r", save.last, ids)]))
        w.start_load_kv(None)
        w.clear_connector_metadata()
        assert not w.get_block_ids_with_load_errors()

    def torch_copy(load):
        for i, b in enumerate(ids):
            w._copy(plain[i * block_bytes:(i + 1) * block_bytes], b, load=load)

    # the four interleaved, run by run, so the machine's drift hits them alike
    runs = {"save": [], "tsave": [], "load": [], "tload": []}
    for _ in range(7):
        for name, f in (("tsave", lambda: torch_copy(False)), ("save", save),
                        ("tload", lambda: torch_copy(True)), ("load", load)):
            runs[name].append(median(f, runs=1, sync=sync))
    t_save, t_tsave, t_load, t_tload = (sorted(runs[k])[3] for k in
                                        ("save", "tsave", "load", "tload"))
    gb = n * block_bytes / 1e9
    print("%d blocks of %.1f MiB (32 layers, 8 heads, 128, fp16, block 16)"
          % (n, block_bytes / 2**20))
    print("  save   %6.2f GB/s   torch%s %6.2f GB/s   ratio %.2f"
          % (gb / t_save, label[0], gb / t_tsave, t_tsave / t_save))
    print("  load   %6.2f GB/s   torch%s %6.2f GB/s   ratio %.2f"
          % (gb / t_load, label[1], gb / t_tload, t_tload / t_load))
    assert w.save_errors == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=64)
    ap.add_argument("--no-checksum", action="store_true",
                    help="the connector's checksum key false: saves record no checksums")
    a = ap.parse_args()
    n, bs = a.blocks, 16
    d = tempfile.mkdtemp(prefix="marukv-vllm-bench.", dir="/dev/shm")
    try:
        path = os.path.join(d, "pool")
        # room for every run's blocks: no eviction inside the timings
        marukv.Pool(path, create=True, data_size=(20 * n + 64) << 20).close()
        e = vh.Engine(path, layers=32, heads=8, head_size=128, block_size=bs,
                      num_blocks=n + 1, extra={"checksum": not a.no_checksum})
        # each page of the arena mapped once first in the worker's own mapping,
        # as a running engine's are (and as cudaHostRegister() maps them on a GPU)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        if libc.madvise(*e.worker._pool.data_mapping(), MADV_POPULATE_WRITE):
            print("  (madvise: %s: the first touch of each page is timed too)"
                  % os.strerror(ctypes.get_errno()))
        for c in e.caches.values():
            c.normal_()
        w = e.worker
        transfers(e, n, torch.empty(n * w._block_bytes, dtype=torch.uint8))
        # lookups: a prompt cached whole, and one not cached at all
        s = e.scheduler
        with marukv.Pool(path) as p:
            for tokens in (1024, 8192, 32768):
                prompt = list(range(tokens))
                req = vh.Request("l%d" % tokens, prompt)
                hashes = vh.marukv.vllm.chain(prompt, bs, vh.marukv.vllm._extra(req))
                prefix = w._prefix(0)
                for h in hashes:
                    if not p.exists(prefix + h):
                        p.put(prefix + h, b"x")
                miss = vh.Request("m%d" % tokens, [t + 1 for t in prompt])

                def ask(r, cold=True):
                    if cold:
                        s._chains.pop(r.request_id, None)
                    return s.get_num_new_matched_tokens(r, 0)
                assert ask(req)[0] == (tokens - 1) // bs * bs
                print("  get_num_new_matched_tokens %5d tokens: all cached %.3f ms, "
                      "none %.3f ms; asked again (chain kept) %.3f ms"
                      % (tokens, median(lambda: ask(req)) * 1e3,
                         median(lambda: ask(miss)) * 1e3,
                         median(lambda: ask(req, cold=False)) * 1e3))
        e.close()
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
