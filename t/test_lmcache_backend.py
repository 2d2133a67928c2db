# SPDX-License-Identifier: MIT
"""marukv.lmcache_backend.MarukvBackend, driven as LMCache's engine drives
an allocator backend (t/lmcache_backend_harness.py, over the stand-in for
LMCache's names in t/lmcache_standin)."""

import faulthandler
import gc
import logging
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch

import lmcache_backend_harness as lh
import marukv

HERE = os.path.dirname(os.path.abspath(__file__))
# a free() that takes the object's lock again deadlocks, as in LMCache: the
# run then ends here with every thread's traceback instead of hanging
faulthandler.dump_traceback_later(120, exit=True)
TOKENS = [(i * 31 + 7) % 1000 for i in range(16 * 4 + 5)]     # 4 whole chunks of 16 and 5


@pytest.fixture
def pool():
    d = tempfile.mkdtemp(prefix="marukv-lmb.", dir="/dev/shm")
    path = os.path.join(d, "pool")
    marukv.Pool(path, create=True, data_size=32 << 20, page_size=4096).close()
    yield path
    shutil.rmtree(d)


def my_views(path):
    """The pins of the pool's clients: 0 when no view is held anywhere."""
    with marukv.Pool(path, readonly=True) as p:
        return sum(c["pin"] for c in p.clients() if c["alive"])


def test_store_then_retrieve_every_byte(pool):
    e = lh.Engine(pool)
    gpu = e.kv(TOKENS)
    stored = e.store(TOKENS, gpu)
    assert len(stored) == 5
    f = lh.Engine(pool)
    assert f.lookup(TOKENS, "r1") == 5
    out, got = f.retrieve(TOKENS, "r1")
    assert got == len(TOKENS)
    assert torch.equal(out, gpu)
    assert f.sm.backend().pinned() == {}
    assert not lh.DOUBLE_FREES
    e.close()
    f.close()
    assert my_views(pool) == 0


def test_a_store_of_what_is_stored_succeeds_and_calls_back_per_key(pool):
    e = lh.Engine(pool)
    e.store(TOKENS)
    keys, objs, called = e.keys(TOKENS), [], []
    gpu = e.kv(TOKENS)
    for i, key in enumerate(keys):
        n = min(16, len(TOKENS) - 16 * i)
        obj = e.sm.allocate(e.metadata.get_shapes(n), e.metadata.get_dtypes())
        obj.tensor.copy_(gpu[:, :, 16 * i:16 * i + n])
        objs.append(obj)
    fut = e.sm.backend().batched_submit_put_task(keys, objs, on_complete_callback=called.append)
    for obj in objs:
        obj.ref_count_down()
    assert fut[0].result(30) == 5
    assert called == keys
    with marukv.Pool(pool) as p:
        assert p.stat()["entries"] == 5
    e.close()
    assert not lh.DOUBLE_FREES


def test_memory_objects_are_pool_pages_and_no_buffer_is_made(pool):
    """Every object's tensor lies in the pool's mapping, and storing and
    retrieving allocate no tensor memory (torch's profiler counts it)."""
    from torch.profiler import ProfilerActivity, profile
    e = lh.Engine(pool, layers=4, heads=8, head_size=128)    # chunks of 64 KiB
    b = e.sm.backend()
    gpu = e.kv(TOKENS)
    ptrs, allocated = [], []
    real_allocate, real_get = b.allocate, b.batched_get_blocking

    def allocate(*a, **kw):
        obj = real_allocate(*a, **kw)
        ptrs.append((obj.data_ptr, obj.get_size()))
        return obj

    def get(keys):
        objs = real_get(keys)
        ptrs.extend((o.data_ptr, o.get_size()) for o in objs if o is not None)
        return objs
    b.allocate, b.batched_get_blocking = allocate, get
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        e.store(TOKENS, gpu)
        out, got = e.retrieve(TOKENS)
    # top-level ops only: an op's own allocations show in its children's too
    allocated = [(ev.name, ev.cpu_memory_usage) for ev in prof.events()
                 if ev.cpu_memory_usage > 0 and ev.cpu_parent is None]
    assert got == len(TOKENS) and torch.equal(out, gpu)
    addr, length = b._pool.data_mapping()
    assert len(ptrs) == 10
    for p, n in ptrs:
        assert addr <= p and p + n <= addr + length
    # the harness's own "GPU" output is the one tensor made
    assert [n for _, n in allocated] == [out.numel() * out.element_size()], allocated
    e.close()


def test_another_process_reads_what_one_stored(pool):
    e = lh.Engine(pool)
    gpu = e.kv(TOKENS)
    e.store(TOKENS, gpu)
    code = ("import sys, torch; sys.path.insert(0, %r)\n"
            "import lmcache_backend_harness as lh\n"
            "e = lh.Engine(%r)\n"
            "out, got = e.retrieve(%r)\n"
            "assert torch.equal(out, e.kv(%r)), 'bytes differ'\n"
            "e.close()\n"
            "print(got)\n" % (HERE, pool, TOKENS, TOKENS))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == str(len(TOKENS))
    e.close()


def test_pins_nest_and_expire(pool):
    e = lh.Engine(pool, pin_timeout_sec=1)
    e.store(TOKENS)
    b = e.sm.backend()
    keys = e.keys(TOKENS)
    assert e.sm.batched_contains(keys, pin=True) == 5
    assert e.sm.batched_contains(keys[:2], pin=True) == 2
    names = [k.to_string().encode() for k in keys]
    assert b.pinned() == {n: (2 if i < 2 else 1) for i, n in enumerate(names)}
    e.sm.batched_unpin(keys)
    assert b.pinned() == {n: 1 for n in names[:2]}
    assert b.unpin(keys[4]) is False
    # a pin never released goes after the pin timeout
    b._swept = 0
    b._pins[names[0]][1] = 0
    assert b.pinned() == {names[1]: 1}
    e.close()


def test_remove_and_a_miss(pool):
    e = lh.Engine(pool)
    keys = e.store(TOKENS)
    b = e.sm.backend()
    assert b.remove(keys[2]) is True
    assert b.remove(keys[2]) is False
    assert e.lookup(TOKENS, "r") == 2
    out, got = e.retrieve(TOKENS, "r")
    assert got == 32
    assert b.pinned() == {}
    e.close()
    assert not lh.DOUBLE_FREES


def test_the_async_prefetch_path(pool):
    e = lh.Engine(pool)
    gpu = e.kv(TOKENS)
    e.store(TOKENS, gpu)
    pairs = e.prefetch(TOKENS, "p1")
    assert [k for k, _ in pairs] == e.keys(TOKENS)
    for i, (_, obj) in enumerate(pairs):
        assert torch.equal(obj.tensor, gpu[:, :, 16 * i:16 * i + obj.tensor.shape[2]])
        obj.ref_count_down()
    assert my_views(pool) == 0
    e.close()


def test_a_local_cpu_backend_or_another_name_is_said_loudly(pool, caplog):
    with caplog.at_level(logging.ERROR, logger="marukv.lmcache_backend"):
        e = lh.Engine(pool, max_local_cpu_size=5.0)
    assert isinstance(e.sm.allocator_backend, lh.LocalCPUBackend)
    assert "will not be LMCache's allocator" in caplog.text
    assert "LocalCPUBackend" in caplog.text
    e.close()
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="marukv.lmcache_backend"):
        with pytest.raises(KeyError):       # as LMCache's _get_allocator_backend
            lh.Engine(pool, name="Marukv")
    assert "not registered under the name MaruBackend" in caplog.text


def test_the_scheduler_allocates_nothing_and_reads_only(pool):
    e = lh.Engine(pool)
    e.store(TOKENS)
    s = lh.Engine(pool, role="scheduler")
    b = s.sm.backend()
    assert s.sm.allocator_backend is None
    assert b.allocate(s.metadata.get_shapes(), s.metadata.get_dtypes()) is None
    assert s.lookup(TOKENS, "x") == 5
    assert b._pool.readonly
    s.sm.batched_unpin(s.lookup_pins.pop("x"))
    s.close()
    e.close()


def test_a_full_pool_stores_what_fits_and_never_hands_out_wrong_memory():
    d = tempfile.mkdtemp(prefix="marukv-lmb.", dir="/dev/shm")
    try:
        path = os.path.join(d, "pool")
        marukv.Pool(path, create=True, data_size=1 << 20, page_size=4096).close()
        e = lh.Engine(path, layers=4, heads=8, head_size=128)   # 64 KiB chunks
        for r in range(40):
            tokens = [r * 1000 + t for t in range(16 * 4)]
            gpu = e.kv(tokens)
            e.store(tokens, gpu)
            out, got = e.retrieve(tokens)
            assert torch.equal(out[:, :, :got], gpu[:, :, :got])
        assert not lh.DOUBLE_FREES
        b = e.sm.backend()
        assert b.batched_allocate(e.metadata.get_shapes(), e.metadata.get_dtypes(), 64) is None
        e.close()
        with marukv.Pool(path) as p:
            assert p.verify(deep=True)["problems"] == 0
            assert p.stat()["evictions"] > 0
    finally:
        shutil.rmtree(d)


def test_no_leak_over_many_rounds(pool):
    e = lh.Engine(pool)
    for r in range(200):
        tokens = [r] + TOKENS
        e.store(tokens)
        e.lookup(tokens, "l")
        e.retrieve(tokens, "l")
        e.sm.remove(e.keys(tokens)[0])
    gc.collect()
    b = e.sm.backend()
    assert b.pinned() == {}
    st = b._pool.stat()
    assert my_views(pool) == 0
    e.close()
    with marukv.Pool(pool) as p:
        st = p.stat()
        v = p.verify(deep=True)
    assert v["problems"] == 0 and v["pages_leaked"] == 0, v
    assert st["pages_granted"] == 0, st
    assert not lh.DOUBLE_FREES


@pytest.mark.parametrize("where", ["publish", "wait"])
def test_a_process_killed_mid_put_leaves_no_chunk_half_stored(pool, where):
    """SIGKILL on the backend's put thread, at the second chunk's publish or
    after every publish was sent: another engine retrieves only whole
    chunks, each byte right, and the pool verifies clean once reclaimed."""
    code = (
        "import os, signal, sys, torch; sys.path.insert(0, %r)\n"
        "import lmcache_backend_harness as lh\n"
        "import marukv\n"
        "e = lh.Engine(%r)\n"
        "pool = e.sm.backend()._open()\n"
        "real = {'publish': pool.publish_async, 'wait': pool.wait}\n"
        "calls = []\n"
        "def killer(*a, **kw):\n"
        "    calls.append(1)\n"
        "    if %r == 'wait' or len(calls) == 2:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real[%r](*a, **kw)\n"
        "class P:\n"
        "    def __getattr__(self, n):\n"
        "        return killer if n == %r else getattr(pool, n)\n"
        "e.sm.backend()._pool = P()\n"
        "e.store(%r)\n" % (HERE, pool, where, where,
                           "publish_async" if where == "publish" else "wait", TOKENS))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == -9, (r.returncode, r.stderr[-3000:])
    with marukv.Pool(pool) as p:
        p.reclaim()
        v = p.verify(deep=True)
        assert v["problems"] == 0 and v["pages_leaked"] == 0, v
        assert p.stat()["pages_granted"] == 0
    e = lh.Engine(pool)
    out, got = e.retrieve(TOKENS)
    assert got in ((16,) if where == "publish" else (len(TOKENS),))
    assert torch.equal(out[:, :, :got], e.kv(TOKENS)[:, :, :got])
    e.close()


def test_keys_pinned_for_good_hold_back_no_store():
    """Pins LMCache never releases (an aborted request) hold their own keys
    in the pool through any pressure, and hold back nothing else: a pool a
    tenth the size of what is stored keeps storing.  After the pin timeout
    they go, and their keys with the next evictions."""
    d = tempfile.mkdtemp(prefix="marukv-lmb.", dir="/dev/shm")
    try:
        path = os.path.join(d, "pool")
        marukv.Pool(path, create=True, data_size=4 << 20, page_size=4096).close()
        e = lh.Engine(path, layers=4, heads=8, head_size=128, pin_timeout_sec=2)  # 256 KiB chunks
        b = e.sm.backend()
        stored, aborted = 0, []
        for r in range(40):
            tokens = [r * 1000 + t for t in range(16 * 4)]
            stored += len(e.store(tokens))
            if r % 8 == 0:              # a request that pins its first chunk and dies
                assert e.lookup(tokens[:16], "aborted-%d" % r) == 1
                aborted.append(e.keys(tokens[:16])[0])
        assert stored == 160            # 40 MiB through a 4 MiB pool
        assert my_views(path) == 0
        assert len(b.pinned()) == 5
        with marukv.Pool(path, readonly=True) as p:
            assert p.stat()["evictions"] >= 140
            assert all(p.exists(k.to_string().encode()) for k in aborted)
        b._swept = 0
        for name in b._pins:
            b._pins[name][1] = 0        # as if the pin timeout had passed
        assert b.pinned() == {}
        for r in range(40, 60):
            e.store([r * 1000 + t for t in range(16 * 4)])
        with marukv.Pool(path, readonly=True) as p:
            assert not any(p.exists(k.to_string().encode()) for k in aborted)
        e.close()
    finally:
        shutil.rmtree(d)


def test_close_waits_for_the_stores_under_way(pool):
    """close() while stores are being published: they finish first, and
    what was stored is all there afterwards."""
    e = lh.Engine(pool)
    gpu = e.kv(TOKENS)
    keys, objs = e.keys(TOKENS), []
    for i in range(len(keys)):
        n = min(16, len(TOKENS) - 16 * i)
        obj = e.sm.allocate(e.metadata.get_shapes(n), e.metadata.get_dtypes())
        obj.tensor.copy_(gpu[:, :, 16 * i:16 * i + n])
        objs.append(obj)
    e.sm.batched_put(keys, objs)
    e.close()
    assert not lh.DOUBLE_FREES
    f = lh.Engine(pool)
    out, got = f.retrieve(TOKENS)
    assert got == len(TOKENS) and torch.equal(out, gpu)
    f.close()


def test_a_store_after_close_keeps_nothing(pool):
    """A submit after close() stores nothing and holds no reference: the
    objects go back when LMCache drops its own."""
    e = lh.Engine(pool)
    b = e.sm.backend()
    obj = b.allocate(e.metadata.get_shapes(), e.metadata.get_dtypes())
    b._executor.shutdown()
    assert b.batched_submit_put_task(e.keys(TOKENS)[:1], [obj]) is None
    obj.ref_count_down()
    assert not obj.is_valid() and obj.get_ref_count() == 0
    assert not b.exists_in_put_tasks(e.keys(TOKENS)[0])
    e.close()
    with marukv.Pool(pool) as p:
        assert p.stat()["entries"] == 0 and p.stat()["pages_granted"] == 0


def test_a_failing_pool_is_a_miss_never_an_exception(pool):
    """A pool that refuses (a handle inherited across fork(), which the
    library refuses with InvalidArgument in the child) answers lookups,
    retrieves and removes as misses, logged, never with an exception."""
    e = lh.Engine(pool)
    keys = e.store(TOKENS)
    b = e.sm.backend()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            answers = (b.contains(keys[0]), b.batched_contains(keys, pin=True),
                       b.get_blocking(keys[0]), b.batched_get_blocking(keys),
                       b.remove(keys[0]))
            os.write(w, repr(answers).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        answers = f.read()
    assert os.waitpid(pid, 0)[1] == 0
    assert answers == repr((False, 0, None, [None] * len(keys), False))
    assert b.batched_contains(keys) == len(keys)      # the parent's handle is fine
    e.close()


@pytest.mark.parametrize("extra,match", [
    ({"marukv.pool": ""}, "marukv.pool"),
    ({"marukv.put_threads": 0}, "put_threads"),
    ({"marukv.cuda_register_piece": 4097}, "cuda_register_piece"),
])
def test_bad_extra_config_is_refused_at_construction(pool, extra, match):
    config, metadata = lh.configs(pool, extra=extra)
    from marukv.lmcache_backend import MarukvBackend
    with pytest.raises(ValueError, match=match):
        MarukvBackend(config=config, metadata=metadata, loop=None, dst_device="cpu",
                      local_cpu_backend=None)


@pytest.mark.parametrize("checksum", [True, False])
def test_the_checksum_key_decides_what_a_deep_verify_checks(pool, checksum):
    e = lh.Engine(pool, extra={"marukv.checksum": checksum})
    gpu = e.kv(TOKENS)
    e.store(TOKENS, gpu)
    out, got = e.retrieve(TOKENS)
    assert got == len(TOKENS) and torch.equal(out, gpu)
    e.close()
    with marukv.Pool(pool) as p:
        v = p.verify(deep=True)
    assert v["problems"] == 0 and v["checksums_checked"] == (5 if checksum else 0), v
