# SPDX-License-Identifier: MIT
"""marukv.vllm on a CUDA GPU: run by hand where there is one (not in make
check; nothing in the project's CI has a GPU).  With marukv pip-installed
into a venv whose torch has CUDA (README, "vLLM"), from the source tree:

    /path/to/venv/bin/python t/gpu_check.py [--blocks N]

Exit 77 (skip) where torch.cuda.is_available() is false, 0 when every
check passed, 1 otherwise.  It

- opens a pool on /dev/shm and an engine of t/vllm_harness.py whose paged
  KV cache is CUDA tensors; the worker registers the pool's data arena
  with CUDA (cudaHostRegister) in pieces of 64 MiB, so that some copies
  cross from one registration into the next and are split there;
- saves a prompt through the connector, loads it into a second engine on
  the same GPU, and compares every byte of every layer of every loaded
  token with what the model wrote;
- stores a prompt's chunks through marukv.lmcache_backend from CUDA
  tensors (t/lmcache_backend_harness.py's engine, the backend's arena
  registered with CUDA) and retrieves them into another engine's, every
  byte compared;
- times save and load of N blocks of a Llama-3-8B-shaped cache (32 layers,
  8 KV heads, head size 128, fp16, block size 16) against torch copying
  the same blocks between the same GPU tensors and pinned host memory
  (torch.empty(pin_memory=True)), in the same run: medians of 5, and the
  ratios.
"""

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

if not torch.cuda.is_available():
    print("skip - torch.cuda.is_available() is false")
    sys.exit(77)

import lmcache_backend_harness as lh  # noqa: E402
import marukv  # noqa: E402
import vllm_bench  # noqa: E402
import vllm_harness as vh  # noqa: E402

PIECE = 64 << 20
PROMPT = [(i * 37 + 11) % 1000 for i in range(70)]


def check_bytes(path):
    """Save through one engine, load through another: every byte equal."""
    extra = {"cuda_register_piece": PIECE}
    a = vh.Engine(path, layers=4, heads=4, head_size=64, block_size=16, extra=extra,
                  device="cuda")
    assert a.worker._registered, "the pool was not registered with CUDA"
    a.run(vh.Request("a", PROMPT, max_tokens=1))
    a.close()
    b = vh.Engine(path, layers=4, heads=4, head_size=64, block_size=16, extra=extra,
                  device="cuda")
    r = vh.Request("b", PROMPT, max_tokens=1)
    b.add(r)
    b.step()
    want = (len(PROMPT) - 1) // 16 * 16
    assert b.loaded["b"] == want, (b.loaded["b"], want)
    assert not b.load_errors, b.load_errors
    for pos in range(want):
        for layer in b.caches:
            expect, got = b.expect(r, pos, layer)
            assert torch.equal(expect, got), (pos, layer)
    b.close()
    print("bytes: %d tokens x %d layers loaded on the GPU equal to what was saved"
          % (want, len(b.caches)))


def check_lmcache(path):
    """Store through marukv.lmcache_backend from CUDA tensors, retrieve in
    another engine into CUDA tensors: every byte equal."""
    tokens = [(i * 31 + 7) % 1000 for i in range(16 * 4 + 5)]
    a = lh.Engine(path, device="cuda")
    gpu = a.kv(tokens)
    a.store(tokens, gpu)
    assert a.sm.backend()._registration is not None, "the pool was not registered with CUDA"
    b = lh.Engine(path, device="cuda")
    out, got = b.retrieve(tokens)
    assert got == len(tokens), got
    assert torch.equal(out, gpu)
    a.close()
    b.close()
    print("bytes: %d tokens stored and retrieved through the LMCache backend on the GPU, "
          "equal" % got)


def bench(path, n):
    e = vh.Engine(path, layers=32, heads=8, head_size=128, block_size=16, num_blocks=n + 1,
                  device="cuda")
    for c in e.caches.values():
        c.normal_()
    print("on %s:" % torch.cuda.get_device_name())
    pinned = torch.empty(n * e.worker._block_bytes, dtype=torch.uint8, pin_memory=True)
    vllm_bench.transfers(e, n, pinned, sync=torch.cuda.synchronize,
                         label=(" GPU -> pinned", " pinned -> GPU"))
    e.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=64)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="marukv-gpu.", dir="/dev/shm")
    try:
        path = os.path.join(d, "pool")
        marukv.Pool(path, create=True, data_size=(20 * a.blocks + 256) << 20).close()
        check_bytes(path)
        check_lmcache(path)
        bench(path, a.blocks)
    except AssertionError as e:
        print("FAIL: %r" % (e,))
        return 1
    finally:
        shutil.rmtree(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
