# SPDX-License-Identifier: MIT
"""marukv.vllm.MarukvConnector driven as vLLM drives it (t/vllm_harness.py),
over real pools in /dev/shm, with engines in processes of their own."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch

import marukv
import vllm_harness as vh

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def pool():
    d = tempfile.mkdtemp(prefix="marukv-vllm.", dir="/dev/shm")
    path = os.path.join(d, "pool")
    marukv.Pool(path, create=True, data_size=32 << 20, page_size=4096).close()
    yield path
    shutil.rmtree(d)


PROMPT = [(i * 37 + 11) % 1000 for i in range(22)]


def check_loaded(engine, req):
    """Every layer of every loaded token holds what the model computes."""
    for pos in range(engine.loaded[req.request_id]):
        for layer in engine.caches:
            want, got = engine.expect(req, pos, layer)
            assert torch.equal(want, got), (req.request_id, pos, layer)


def load_here(pool, prompt):
    """Run prompt in a new engine of this process: how many tokens it
    loaded, after checking every byte of them and that no load failed."""
    e = vh.Engine(pool)
    r = vh.Request("b", list(prompt), max_tokens=1)
    e.add(r)
    e.step()
    check_loaded(e, r)
    assert not e.load_errors
    e.close()
    return e.loaded["b"]


def other_engine(pool, prompt, seed, dtype="float16", kv_first=False, tp=(0, 1)):
    """Run prompt in an engine of a process of its own, with PYTHONHASHSEED=seed:
    how many tokens it loaded, after checking every byte of them."""
    code = (
        "import sys, torch; sys.path.insert(0, %r)\n"
        "import vllm_harness as vh\n"
        "e = vh.Engine(%r, dtype=torch.%s, kv_first=%r, tp=%r)\n"
        "r = vh.Request('b', %r, max_tokens=1)\n"
        "e.add(r); e.step()\n"
        "for pos in range(e.loaded['b']):\n"
        "    for layer in e.caches:\n"
        "        want, got = e.expect(r, pos, layer)\n"
        "        assert torch.equal(want, got), (pos, layer)\n"
        "print(e.loaded['b'], sorted(e.load_errors))\n"
        "e.close()\n" % (HERE, pool, dtype, kv_first, tp, list(prompt)))
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    loaded, errors = r.stdout.split(" ", 1)
    assert errors.strip() == "[]"
    return int(loaded)


@pytest.mark.parametrize("dtype,kv_first", [("float16", False), ("bfloat16", False),
                                            ("float16", True)])
def test_a_second_engine_loads_what_the_first_saved(pool, dtype, kv_first):
    e = vh.Engine(pool, dtype=getattr(torch, dtype), kv_first=kv_first)
    e.run(vh.Request("a", PROMPT, max_tokens=4))
    e.close()
    # the same prompt and 3 more tokens, in another process with another hash
    # seed and the other cache layout: blocks 0-4 (tokens 0-19) are the first
    # engine's, block 5 held its outputs
    assert other_engine(pool, PROMPT + [1, 2, 3], seed=4242, dtype=dtype,
                        kv_first=not kv_first) == 20


def test_another_dtype_or_rank_never_hits(pool):
    e = vh.Engine(pool)
    e.run(vh.Request("a", PROMPT, max_tokens=2))
    e.close()
    for kw, want in (({}, 20), ({"dtype": torch.bfloat16}, 0), ({"tp": (0, 2)}, 0),
                     ({"tp": (1, 2)}, 0), ({"heads": 4}, 0), ({"block_size": 2}, 0),
                     ({"model": "m2"}, 0), ({"extra": {"namespace": "other"}}, 0)):
        f = vh.Engine(pool, **kw)
        r = vh.Request("b", PROMPT, max_tokens=1)
        got = f.scheduler.get_num_new_matched_tokens(r, 0)
        f.close()
        assert got == (want, False), kw


def test_never_the_partial_block_nor_the_last_token(pool):
    e = vh.Engine(pool)
    e.run(vh.Request("a", PROMPT[:8], max_tokens=6))
    for n, want in ((8, 4), (9, 8), (7, 4), (4, 0), (12, 8)):
        r = vh.Request("p%d" % n, PROMPT[:n] if n <= 8 else PROMPT[:8] + [999] * (n - 8),
                       max_tokens=1)
        ext, load_async = e.scheduler.get_num_new_matched_tokens(r, 0)
        assert (ext, load_async) == (want, False), n
    e.close()


def saved_prompt(pool):
    """An engine that has saved PROMPT's blocks 0-4, and a function that
    deletes block i's key from the pool."""
    e = vh.Engine(pool)
    e.run(vh.Request("a", PROMPT, max_tokens=1))
    prefix = e.worker._prefix(0)
    hashes = vh.marukv.vllm.chain(PROMPT, e.bs, vh.marukv.vllm._extra(vh.Request("x", [])))

    def drop(i):
        with marukv.Pool(pool) as p:
            p.delete(prefix + hashes[i])
    return e, drop


def test_a_prefix_partly_evicted_is_found_up_to_the_gap(pool):
    e, drop = saved_prompt(pool)
    drop(2)
    r = vh.Request("b", PROMPT, max_tokens=1)
    assert e.scheduler.get_num_new_matched_tokens(r, 0) == (8, False)
    # vLLM's own prefix cache holding the first 8 tokens: nothing more to load
    assert e.scheduler.get_num_new_matched_tokens(r, 8) == (0, False)
    e.close()


def test_a_block_gone_before_its_load_is_reported_not_used(pool):
    e, drop = saved_prompt(pool)
    r = vh.Request("b", PROMPT, max_tokens=1)
    e.add(r)
    so = e._schedule()
    assert e.loaded["b"] == 20
    drop(3)
    before = {layer: [t.clone() for t in e._block(layer, r.block_ids[3])] for layer in e.caches}
    e.worker.bind_connector_metadata(so.kv_connector_metadata)
    e.worker.start_load_kv(None)
    errors = e.worker.get_block_ids_with_load_errors()
    e.worker.clear_connector_metadata()
    # block 3 and the one after it: vLLM recomputes them
    assert errors == set(r.block_ids[3:5])
    for pos in range(12):
        for layer in e.caches:
            want, got = e.expect(r, pos, layer)
            assert torch.equal(want, got)
    # the connector left the failed block as it was
    for layer in e.caches:
        k, v = e._block(layer, r.block_ids[3])
        assert torch.equal(k, before[layer][0]) and torch.equal(v, before[layer][1])
    e.close()


def test_a_preempted_request_loads_its_own_blocks_back(pool):
    e = vh.Engine(pool)
    r = vh.Request("a", PROMPT, max_tokens=8)
    e.add(r)
    e.step()
    e.step()
    e.preempt(r)
    e.step()
    # resumed: what it had saved comes back from the pool into its new blocks
    assert e.loaded["a"] == 20
    check_loaded(e, r)
    while r in e.running:
        e.step()
    e.close()


def test_copies_go_straight_between_the_cache_and_pool_pages(pool):
    """The save's destination and the load's source are the pool's mapping."""
    e = vh.Engine(pool)
    seen = []
    w = e.worker

    def ranges():
        want = os.path.realpath(os.path.join(pool, "data"))
        with open("/proc/self/maps") as f:
            return [tuple(int(x, 16) for x in line.split()[0].split("-"))
                    for line in f if line.split()[-1] == want]

    real_alloc, real_batch = w._pool.alloc, w._pool.get_batch

    class Spy:
        def __getattr__(self, name):
            return getattr(real, name)

        def alloc(self, n):
            b = real_alloc(n)
            t = torch.frombuffer(b, dtype=torch.uint8)
            seen.append(("save", t.data_ptr(), n))
            del t
            return b

        def get_batch(self, keys):
            views = real_batch(keys)
            for v in views:
                if v is not None:
                    t = torch.frombuffer(v, dtype=torch.uint8)
                    seen.append(("load", t.data_ptr(), len(v)))
                    del t
            return views

    real = w._pool
    w._pool = Spy()
    e.run(vh.Request("a", PROMPT, max_tokens=1))
    e.run(vh.Request("b", PROMPT, max_tokens=1))
    w._pool = real
    maps = ranges()
    kinds = {k for k, _, _ in seen}
    assert kinds == {"save", "load"}
    for kind, addr, n in seen:
        assert any(lo <= addr and addr + n <= hi for lo, hi in maps), (kind, hex(addr))
    e.close()


def run_code(code, pool):
    """Run code in a process of its own (sys.path set for the harness); its output."""
    r = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r)\n" % HERE
                        + code], env=dict(os.environ, POOL=pool), capture_output=True,
                       text=True, timeout=120)
    return r


def test_the_scheduler_side_alone_in_another_process(pool):
    """vLLM's scheduler lives in a process with no KV cache: a scheduler-side
    connector there, its pool opened read-only, sees the worker's blocks."""
    e = vh.Engine(pool)
    e.run(vh.Request("a", PROMPT, max_tokens=1))
    r = run_code(
        "import os, vllm_harness as vh\n"
        "from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole\n"
        "vllm_config, kv_cache_config = vh.configs(os.environ['POOL'])\n"
        "s = vh.marukv.vllm.MarukvConnector(vllm_config, KVConnectorRole.SCHEDULER,\n"
        "                                   kv_cache_config)\n"
        "print(s.get_num_new_matched_tokens(vh.Request('b', %r), 0))\n"
        "s.shutdown()\n" % PROMPT, pool)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "(20, False)"
    e.close()


@pytest.mark.parametrize("kill_at", [1, 2])
def test_a_worker_killed_inside_a_save_leaves_nothing_half_visible(pool, kill_at):
    """SIGKILL after the copies into pool pages, at the save's first or
    second publish: only the blocks published before the kill are found
    (the worker holds the lease, so each committed at once), each loaded
    equal to what was saved; the pool verifies clean, and a reclaim gives
    the pages back."""
    r = run_code(
        "import os, signal, vllm_harness as vh\n"
        "e = vh.Engine(os.environ['POOL'])\n"
        "real = e.worker._pool\n"
        "class Killer:\n"
        "    calls = 0\n"
        "    def __getattr__(self, n):\n"
        "        return getattr(real, n)\n"
        "    def publish_async(self, key, buf, parent=None):\n"
        "        Killer.calls += 1\n"
        "        if Killer.calls == %d:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "        return real.publish_async(key, buf, parent=parent)\n"
        "e.worker._pool = Killer()\n"
        "e.run(vh.Request('a', %r, max_tokens=1))\n" % (kill_at, PROMPT), pool)
    assert r.returncode == -9, (r.returncode, r.stderr[-2000:])
    assert load_here(pool, PROMPT) == (kill_at - 1) * 4   # blocks of 4 tokens
    with marukv.Pool(pool) as p:
        p.reclaim()
        v = p.verify(deep=True)
        assert v["problems"] == 0 and v["pages_leaked"] == 0, v
        st = p.stat()
        assert st["pages_granted"] == 0 and (st["pages_used"] > 0) == (st["entries"] > 0), st


def test_blocks_only_vllm_had_are_saved_too(pool):
    """vLLM's own prefix cache gave it the first 8 tokens, which the pool does
    not hold: the connector loads nothing, and saves them with the rest."""
    e = vh.Engine(pool)
    s, r = e.scheduler, vh.Request("a", PROMPT)
    assert s.get_num_new_matched_tokens(r, 8) == (0, False)
    r.block_ids = list(range(1, 7))
    s.update_state_after_alloc(r, vh.Blocks(r.block_ids), 0)
    so = vh.SimpleNamespace(
        scheduled_new_reqs=[vh.SimpleNamespace(req_id="a", block_ids=(r.block_ids,),
                                               num_computed_tokens=8)],
        scheduled_cached_reqs=vh.SimpleNamespace(req_ids=[], resumed_req_ids=set(),
                                                 new_block_ids=[], num_computed_tokens=[]),
        num_scheduled_tokens={"a": len(PROMPT) - 8})
    meta = s.build_connector_meta(so)
    assert not meta.loads
    assert [(sv.parent, sv.block_ids) for sv in meta.saves] == [(None, [1, 2, 3, 4, 5])]
    e.close()


def test_copies_split_where_cuda_registrations_meet():
    """Registered in pieces, a copy never crosses from one piece into the
    next: each run lies in one piece, and the runs cover the range in order."""
    from marukv._cuda import split
    assert split(1000, 500, None) == [(0, 500)]
    base, size = 1 << 20, 4096
    for addr, n in ((base, 4096), (base + 100, 4096), (base + 4095, 1), (base + 4095, 2),
                    (base + 10, 3 * 4096 + 7)):
        runs = split(addr, n, (base, 1 << 30, size))
        at = 0
        for off, ln in runs:
            assert off == at and ln > 0
            assert (addr + off - base) // size == (addr + off + ln - 1 - base) // size
            at += ln
        assert at == n
    assert len(split(base + 4095, 2, (base, 1 << 30, size))) == 2


def test_the_connector_is_a_best_effort_cache(pool):
    """vLLM's newer base.py asks requires_kv_delivery: a cache says False."""
    e = vh.Engine(pool)
    assert e.scheduler.requires_kv_delivery is False
    assert e.worker.requires_kv_delivery is False
    e.close()


@pytest.mark.parametrize("piece", [0, -4096, 4097])
def test_a_bad_registration_piece_is_refused(pool, piece):
    vllm_config, kv_cache_config = vh.configs(pool, extra={"cuda_register_piece": piece})
    with pytest.raises(ValueError, match="cuda_register_piece"):
        vh.marukv.vllm.MarukvConnector(vllm_config, vh.KVConnectorRole.SCHEDULER,
                                       kv_cache_config)


def test_a_producer_only_saves_and_a_consumer_only_loads(pool):
    """kv_role: a kv_producer engine saves and never loads, even what the
    pool has; a kv_consumer loads, saves nothing, and opens the pool
    read-only."""
    p = vh.Engine(pool, kv_role="kv_producer")
    p.run(vh.Request("a", PROMPT, max_tokens=1))
    r = vh.Request("a2", PROMPT, max_tokens=1)
    assert p.scheduler.get_num_new_matched_tokens(r, 0) == (0, False)
    with marukv.Pool(pool) as h:
        saved = h.stat()["entries"]
    assert saved == 5
    p.run(r)                # the same prompt: nothing loaded, nothing saved again
    assert p.loaded["a2"] == 0 and p.worker.save_errors == 0
    p.close()
    c = vh.Engine(pool, kv_role="kv_consumer")
    assert c.worker._pool.readonly
    r = vh.Request("b", PROMPT + [5, 6, 7, 8, 9], max_tokens=6)
    c.run(r)
    assert c.loaded["b"] == 20
    check_loaded(c, r)
    assert c.worker.save_errors == 0
    c.close()
    with marukv.Pool(pool) as h:
        assert h.stat()["entries"] == saved


def test_a_prefix_evicted_by_the_pool_loads_what_is_left():
    """The pool evicts a chain's tail blocks first: another engine then
    finds the blocks left, whole, and loads every byte of them right."""
    d = tempfile.mkdtemp(prefix="marukv-vllm.", dir="/dev/shm")
    try:
        pool = os.path.join(d, "pool")
        # 64 pages: each block's page is more than 1 % of the pool
        marukv.Pool(pool, create=True, data_size=64 * 4096, page_size=4096).close()
        evict_the_tail(pool)
    finally:
        shutil.rmtree(d)


def evict_the_tail(pool):
    e = vh.Engine(pool)
    e.run(vh.Request("a", PROMPT, max_tokens=1))
    e.close()
    with marukv.Pool(pool) as h:
        pct = 100 - 100 * h.stat()["pages_used"] // h.stat()["pages_total"]
        while h.stat()["entries"] > 3:
            h.evict(pct)
            pct += 1
        left = h.stat()["entries"]
    assert 0 < left <= 3
    assert load_here(pool, PROMPT) == 4 * left


def test_no_buffer_of_its_own_between_the_cache_and_the_pool(pool):
    """torch's profiler counts every CPU allocation of an op: a save and a
    load of blocks of 256 KiB allocate no tensor memory at all (every tensor
    they make is a view of the cache or of pool pages)."""
    from torch.profiler import ProfilerActivity, profile
    e = vh.Engine(pool, layers=4, heads=8, head_size=128, block_size=16, num_blocks=8)
    w, allocated = e.worker, []
    assert w._block_bytes == 256 << 10

    def watched(f):
        def run(*args, **kwargs):
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                f(*args, **kwargs)
            allocated.extend((ev.name, ev.cpu_memory_usage) for ev in prof.events()
                             if ev.cpu_memory_usage > 0)
        return run
    w.wait_for_save, w.start_load_kv = watched(w.wait_for_save), watched(w.start_load_kv)
    prompt = list(range(16 * 3 + 1))
    e.run(vh.Request("a", prompt, max_tokens=1))
    r = vh.Request("b", prompt, max_tokens=1)
    e.run(r)
    assert e.loaded["b"] == 48
    check_loaded(e, r)
    assert allocated == [], allocated
    e.close()


def test_requests_whose_tokens_do_not_name_their_kv_are_left_alone(pool):
    """Multimodal inputs (under either of vLLM's names) or prompt embeddings:
    such a prompt is never looked up nor saved."""
    e = vh.Engine(pool)
    e.run(vh.Request("a", PROMPT, max_tokens=1))
    for attr, value in (("mm_features", [object()]), ("mm_positions", [object()]),
                        ("mm_hashes", ["h"]), ("prompt_embeds", torch.zeros(1))):
        r = vh.Request("x", PROMPT, max_tokens=1)
        setattr(r, attr, value)
        assert e.scheduler.get_num_new_matched_tokens(r, 0) == (0, False), attr
    e.close()


def test_an_older_scheduler_output_marks_resumed_requests_by_flags(pool):
    """vLLM before resumed_req_ids said which cached requests resumed from
    preemption with a list of flags, resumed_from_preemption: a preempted
    request resumes in the blocks it is given anew, and loads its own
    blocks back into them."""
    e = vh.Engine(pool)
    real = e.scheduler.build_connector_meta

    def older(so):
        cached = so.scheduled_cached_reqs
        fields = dict(vars(cached))
        resumed = fields.pop("resumed_req_ids")
        fields["resumed_from_preemption"] = [rid in resumed for rid in cached.req_ids]
        so.scheduled_cached_reqs = vh.SimpleNamespace(**fields)
        return real(so)
    e.scheduler.build_connector_meta = older
    r = vh.Request("a", PROMPT, max_tokens=3)
    e.add(r)
    e.step()
    e.preempt(r)
    taken = [e.free.pop() for _ in range(3)]     # its blocks go to others
    for c in e.caches.values():
        c.zero_()
    e.step()
    assert e.loaded["a"] == 20
    assert e.scheduler._blocks["a"] == r.block_ids and not set(taken) & set(r.block_ids)
    check_loaded(e, r)
    e.close()


@pytest.mark.parametrize("checksum", [True, False])
def test_the_checksum_key_decides_what_a_deep_verify_checks(pool, checksum):
    """checksum false saves blocks with no checksum: they load alike, and a
    deep verify has nothing of theirs to check."""
    e = vh.Engine(pool, extra={"checksum": checksum})
    e.run(vh.Request("a", PROMPT, max_tokens=1))
    e.close()
    assert load_here(pool, PROMPT) == 20
    with marukv.Pool(pool) as p:
        v = p.verify(deep=True)
    assert v["problems"] == 0 and v["entries"] == 5
    assert v["checksums_checked"] == (5 if checksum else 0), v
