# SPDX-License-Identifier: MIT
"""Tests of marukv.lmcache (run by t/lmcache.sh under pytest).

The connector is driven as LMCache's NativeConnectorL2Adapter drives it,
by t/lmcache_harness.py; every test makes its own pool in a fresh
directory on tmpfs (/dev/shm) and bounds every wait.
"""

import importlib
import json
import multiprocessing
import os
import re
import select
import shutil
import signal
import sys
import tempfile
import time

import pytest

import marukv
from marukv.lmcache import Connector

from lmcache_harness import TIMEOUT, Arena, Driver, content, lmcache_key, pins_of, survivor, victim

mp = multiprocessing.get_context("fork")
OPTIONS = {"create": True, "data_size": 256 << 20, "page_size": 4096}


@pytest.fixture
def pooldir():
    d = tempfile.mkdtemp(prefix="marukv-lmcache.", dir="/dev/shm")
    yield os.path.join(d, "pool")
    shutil.rmtree(d)


@pytest.fixture
def drv(pooldir):
    d = Driver(Connector(path=pooldir, **OPTIONS))
    yield d
    d.close()
    assert not d.problems


def keys_of(n, model="m", rank=0):
    return [lmcache_key(model, rank, c) for c in range(n)]


def stored(drv, keys, size):
    """Store keys with their content; the arena that held it."""
    a = Arena(len(keys), size)
    for i, k in enumerate(keys):
        a.fill(i, content(k, size))
    ok, error, bools = drv.run("set", keys, a.chunks)
    assert ok and bools == [True] * len(keys), error
    return a


def eventfd_count(fd):
    """The eventfd's counter, read from /proc without resetting it."""
    with open("/proc/self/fdinfo/%d" % fd) as f:
        return int(re.search(r"eventfd-count:\s*([0-9a-f]+)", f.read()).group(1), 16)


# Loading, as LMCache's factory does


def config_from(path, start, end):
    with open(os.path.join(os.environ.get("MARUKV_TOP_SRCDIR", "."), path)) as f:
        return f.read().split(start, 1)[1].split(end, 1)[0]


def test_documented_config_loads_as_the_factory_loads_it(pooldir):
    """The --l2-adapter JSON of the README (the same in marukv-python(7)),
    taken as native_plugin_l2_adapter.py takes it: from_dict() checks,
    import_module(module_path), getattr(class_name), the class called with
    adapter_params as keywords, the required methods callable, and
    submit_batch_delete (without it the adapter's eviction deletes
    nothing)."""
    text = config_from("README", "```json\n", "```")
    man = config_from("man/marukv-python.7.in", ".SS LMCache\n", ".SH ").split(".EX\n", 1)[1]
    assert man.split(".EE\n", 1)[0].replace("\\-", "-") == text
    d = json.loads(text)
    assert d["type"] == "native_plugin"
    assert isinstance(d["module_path"], str) and isinstance(d["class_name"], str)
    params = dict(d.get("adapter_params", {}), path=pooldir, data_size=64 << 20)
    cls = getattr(importlib.import_module(d["module_path"]), d["class_name"])
    client = cls(**params)
    try:
        for name in ("event_fd", "submit_batch_get", "submit_batch_set", "submit_batch_exists",
                     "drain_completions", "close", "submit_batch_delete"):
            assert callable(getattr(client, name, None)), name
        assert isinstance(client.event_fd(), int) and client.event_fd() >= 0
    finally:
        client.close()


def test_construction_is_keywords_only(pooldir):
    with pytest.raises(TypeError):
        Connector(pooldir)
    with pytest.raises(TypeError):
        Connector(path=pooldir, create=True, no_such_option=1)
    for bad in (0, -1, True, "4"):
        with pytest.raises(ValueError):
            Connector(path=pooldir, create=True, workers=bad)
    with pytest.raises(marukv.NoPool):
        Connector(path=pooldir)
    c = Connector(path=pooldir, create=True, data_size=16 << 20, watermarks=[20, 40])
    c.close()
    with marukv.Pool(pooldir) as p:    # JSON's [low, high] list became the pair
        assert (p.stat()["low_watermark"], p.stat()["high_watermark"]) == (20, 40)


# Results, bytes and lists


def test_set_exists_get_every_byte_and_list(drv):
    size = 256 << 10
    keys = keys_of(64)
    stored(drv, keys, size)
    probe = [lmcache_key("m", 0, "absent-%d" % i) for i in range(3)]
    ok, error, bools = drv.run("exists", probe[:1] + keys[:5] + probe[1:2] + keys[5:] + probe[2:])
    assert ok and error == ""
    assert bools == [False] + [True] * 5 + [False] + [True] * 59 + [False]
    out = Arena(64, size)
    ok, error, bools = drv.run("get", keys, out.chunks)
    assert ok and bools == [True] * 64
    for i, k in enumerate(keys):
        assert out.data(i) == content(k, size), k


def test_get_misses_leave_buffers_untouched(drv):
    keys = keys_of(3)
    stored(drv, keys, 8192)
    sizes = (8192, 8191, 8193, 8192)
    bufs = [Arena(1, s) for s in sizes]
    for b in bufs:
        b.fill(0, b"\x5a" * b.size)
    ok, error, bools = drv.run("get", [keys[0], keys[1], keys[2], "m@00000000@0@absent"],
                               [b.chunks[0] for b in bufs])
    assert ok and error == "" and bools == [True, False, False, False]
    assert bufs[0].data(0) == content(keys[0], 8192)
    for b in bufs[1:]:
        assert b.data(0) == b"\x5a" * b.size


def test_set_of_an_existing_key_succeeds_and_keeps_the_first(drv):
    keys = keys_of(4)
    stored(drv, keys[:2], 4096)
    a = Arena(4, 4096)
    for i in range(4):
        a.fill(i, b"\x01" * 4096)
    ok, error, bools = drv.run("set", keys, a.chunks)
    assert ok and bools == [True] * 4
    out = Arena(4, 4096)
    ok, error, bools = drv.run("get", keys, out.chunks)
    assert bools == [True] * 4
    assert [out.data(i) for i in range(4)] == [content(keys[0], 4096), content(keys[1], 4096),
                                               b"\x01" * 4096, b"\x01" * 4096]


def test_delete_reports_per_key(drv):
    keys = keys_of(4)
    stored(drv, keys[:2], 4096)
    ok, error, bools = drv.run("delete", [keys[0], keys[2], keys[1], keys[3]])
    assert ok and error == "" and bools == [True, False, True, False]
    ok, error, bools = drv.run("delete", keys[:2])
    assert ok and bools == [False, False]


def test_errors_fail_their_key_only(drv, pooldir):
    good = keys_of(3)
    long_key = "m@00000000@0@" + "f" * marukv.KEY_MAX
    a = Arena(4, 4096)
    for i, k in enumerate(good):
        a.fill(i, content(k, 4096))
    empty = Arena(1, 0).chunks[0]
    ok, error, bools = drv.run("set", [good[0], long_key, good[1], "m@0@0@empty", good[2]],
                               [a.chunks[0], a.chunks[3], a.chunks[1], empty, a.chunks[2]])
    assert not ok and bools == [True, False, True, False, True]
    assert "InvalidArgument" in error and "and 1 more" in error, error
    ok, error, bools = drv.run("get", [good[0], good[1]], [bytes(4096), "not a buffer"])
    assert not ok and bools == [False, False]
    assert "BufferError" in error and "and 1 more" in error, error
    ok, error, bools = drv.run("exists", good + [long_key])
    assert not ok and bools == [True, True, True, False] and "InvalidArgument" in error
    with marukv.Pool(pooldir) as p:
        assert p.verify()["problems"] == 0
        assert p.stat()["entries"] == 3


def test_read_only_pool_fails_sets(pooldir):
    Connector(path=pooldir, **OPTIONS).close()
    d = Driver(Connector(path=pooldir, readonly=True))
    try:
        a = Arena(1, 4096)
        ok, error, bools = d.run("set", keys_of(1), a.chunks)
        assert not ok and bools == [False] and "ReadOnly" in error
        ok, error, bools = d.run("exists", keys_of(1))
        assert ok and bools == [False]
    finally:
        d.close()
    assert not d.problems


def test_submit_checks_arguments_only(drv):
    with pytest.raises(TypeError):
        drv.client.submit_batch_exists([b"bytes key"])
    with pytest.raises(ValueError):
        drv.client.submit_batch_set(keys_of(2), Arena(1, 10).chunks)
    ok, error, bools = drv.run("exists", [])           # an empty batch completes at once
    assert ok and bools == []
    assert not drv.pending


# The contract's timing: submit, signal, drain


def test_submit_neither_copies_nor_touches_buffers(drv):
    """A released memoryview fails the moment anything reads it: submit
    returns a future id all the same, and the worker reports the error."""
    a = Arena(2, 4096)
    a.fill(0, content("x", 4096))
    dead = a.chunks[1]
    dead.release()
    ok, error, bools = drv.run("set", keys_of(2), [a.chunks[0], dead])
    assert not ok and bools == [True, False] and "released memoryview" in error


def test_submit_returns_while_the_workers_copy(drv):
    """Submitting a batch of 48 x 4 MiB takes a small part of the time the
    batch takes to complete, and a second submit made meanwhile too."""
    size = 4 << 20
    keys = keys_of(48)
    a = Arena(48, size)
    for i in range(48):
        a.fill(i, b"\x33" * size)
    t = time.perf_counter()
    fid = drv.submit("set", keys, a.chunks)
    fid2 = drv.submit("exists", keys)
    ok, _, _ = drv.wait(fid)
    elapsed = time.perf_counter() - t
    assert ok and drv.wait(fid2)[0]
    assert max(drv.submit_seconds) < elapsed / 4, (drv.submit_seconds, elapsed)


def test_eventfd_once_per_batch_and_reset_by_drain(pooldir):
    """Each finished batch adds one to the eventfd; drain_completions()
    resets it and returns exactly the finished batches."""
    c = Connector(path=pooldir, **OPTIONS)
    try:
        a = Arena(8, 4096)
        fids = [c.submit_batch_set(keys_of(8, rank=r), a.chunks) for r in range(5)]
        deadline = time.monotonic() + TIMEOUT
        while eventfd_count(c.event_fd()) < 5:
            assert time.monotonic() < deadline, "5 batches did not complete"
            time.sleep(0.005)
        assert eventfd_count(c.event_fd()) == 5
        done = c.drain_completions()
        assert sorted(f for f, _, _, _ in done) == fids
        assert eventfd_count(c.event_fd()) == 0
        assert select.select([c.event_fd()], [], [], 0)[0] == []
        assert c.drain_completions() == []
    finally:
        c.close()


def test_buffers_are_let_go_at_completion(drv):
    a = Arena(4, 4096)
    before = [sys.getrefcount(m) for m in a.chunks]
    drv.run("set", keys_of(4), a.chunks)
    drv.run("get", keys_of(4), a.chunks)
    assert [sys.getrefcount(m) for m in a.chunks] == before


def test_one_key_in_submission_order(drv):
    """set, get, delete, exists, set (other bytes), get of the same keys,
    submitted back to back without waiting, complete as if run one after
    the other; within one batch, a key twice is done twice in order."""
    size = 64 << 10
    keys = keys_of(32)
    first, second = Arena(32, size), Arena(32, size)
    for i, k in enumerate(keys):
        first.fill(i, content(k, size))
        second.fill(i, content(k + "#2", size))
    out1, out2 = Arena(32, size), Arena(32, size)
    fids = [drv.submit("set", keys, first.chunks), drv.submit("get", keys, out1.chunks),
            drv.submit("delete", keys), drv.submit("exists", keys),
            drv.submit("set", keys, second.chunks), drv.submit("get", keys, out2.chunks),
            drv.submit("delete", [keys[0], keys[0]]), drv.submit("exists", [keys[0], keys[1]])]
    got = [drv.wait(f) for f in fids]
    assert [r[2] for r in got] == [[True] * 32, [True] * 32, [True] * 32, [False] * 32,
                                   [True] * 32, [True] * 32, [True, False], [False, True]]
    for i, k in enumerate(keys):
        assert out1.data(i) == content(k, size) and out2.data(i) == content(k + "#2", size)


# Closing


def test_close_with_undrained_completions(pooldir):
    c = Connector(path=pooldir, **OPTIONS)
    a = Arena(16, 64 << 10)
    for r in range(4):
        c.submit_batch_set(keys_of(16, rank=r), a.chunks)
    assert select.select([c.event_fd()], [], [], TIMEOUT)[0]
    t = time.monotonic()
    c.close()                           # nobody drains: close does not wait for it
    assert time.monotonic() - t < 5
    c.close()
    assert c.event_fd() == -1 and c.drain_completions() == []
    for call in (lambda: c.submit_batch_exists(keys_of(1)),
                 lambda: c.submit_batch_set(keys_of(1), a.chunks[:1]),
                 lambda: c.submit_batch_get(keys_of(1), a.chunks[:1]),
                 lambda: c.submit_batch_delete(keys_of(1))):
        with pytest.raises(ValueError):
            call()


def test_close_while_batches_run(pooldir):
    """close() mid-work stops the workers after their key in progress; the
    pool is sound and no pin or page is left behind."""
    size = 1 << 20
    c = Connector(path=pooldir, **OPTIONS)
    a = Arena(64, size)
    for i in range(64):
        a.fill(i, b"\x77" * size)
    for r in range(3):
        c.submit_batch_set(keys_of(64, rank=r), a.chunks)
        c.submit_batch_get(keys_of(64, rank=r), a.chunks)
    c.close()
    with marukv.Pool(pooldir) as p:
        v = p.verify(deep=True)
        assert v["problems"] == 0, v
        assert p.stat()["pages_granted"] == 0
        assert all(pin == 0 for pin in pins_of(p, os.getpid()))
        for r in range(3):
            for k in keys_of(64, rank=r):
                if p.exists(k.encode()):
                    with p.get(k.encode()) as view:
                        assert bytes(view) == b"\x77" * size


# Processes


def test_processes_share_a_pool_and_survive_a_kill(pooldir):
    """Three processes run rounds of batches on one pool (keys of their own
    and keys all share), every byte checked, while a fourth storing 1 MiB
    chunks as fast as it can is killed with SIGKILL mid-batch.  The three
    finish every round, then delete the same keys at once: each key is
    reported deleted by exactly one.  Afterwards the pool verifies, none of
    them left a pin, and every chunk the killed one published is whole."""
    size = 64 << 10
    options = {"lease_period_ms": 200, "client_timeout_ms": 1000}
    with marukv.Pool(pooldir, create=True, data_size=512 << 20, page_size=4096,
                     watermarks=(0, 0), **options) as p:
        contested = [lmcache_key("contested", 0, c) for c in range(32)]
        for k in contested:
            p.put(k.encode(), content(k, 4096))
    barrier, killed = mp.Barrier(3), mp.Event()
    procs, conns = [], []
    vconn, vchild = mp.Pipe()
    vp = mp.Process(target=victim, args=(pooldir, 1 << 20, vchild, {}))
    vp.start()
    for wid in range(3):
        mine, theirs = mp.Pipe()
        proc = mp.Process(target=survivor,
                          args=(pooldir, wid, 12, size, contested, killed, barrier, theirs, {}))
        proc.start()
        procs.append(proc)
        conns.append(mine)
    try:
        assert vconn.poll(TIMEOUT) and vconn.recv() == "submitted"
        time.sleep(0.3)                 # a few batches in: always inside one
        os.kill(vp.pid, signal.SIGKILL)
        vp.join(TIMEOUT)
        assert vp.exitcode == -signal.SIGKILL
        killed.set()                    # the survivors' second half runs after the kill
        reports = []
        for proc, conn in zip(procs, conns):
            assert conn.poll(2 * TIMEOUT), "a survivor sent no report"
            reports.append(conn.recv())
            proc.join(TIMEOUT)
    finally:
        for proc in procs + [vp]:
            if proc.is_alive():
                proc.kill()
                proc.join()
    for r in reports:
        assert r["error"] is None, r["error"]
        assert not r["problems"], r["problems"]
        assert r["checks"] == 12 * 24
        assert r["pins"] and all(pin == 0 for pin in r["pins"]), r["pins"]
        assert r["drains"] > 0 and r["empty_drains"] == 0, r
    assert [sum(col) for col in zip(*(r["deleted"] for r in reports))] == [1] * 32
    assert all(proc.exitcode == 0 for proc in procs)
    with marukv.Pool(pooldir) as p:
        p.reclaim()
        v = p.verify(deep=True)
        assert v["problems"] == 0, v
        assert not any(c["pid"] == vp.pid for c in p.clients())
        assert p.stat()["pages_granted"] == 0
        left = 0
        for n in range(100000):
            keys = [lmcache_key("victim", 7, n * 8 + c) for c in range(8)]
            found = [p.exists(k.encode()) for k in keys]
            if not any(found):
                break
            for k, f in zip(keys, found):
                if f:
                    with p.get(k.encode()) as view:
                        assert bytes(view) == content(k, 1 << 20), k
                    left += 1
        assert left > 0
        assert not any(p.exists(k.encode()) for k in contested)
