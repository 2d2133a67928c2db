# SPDX-License-Identifier: MIT
"""Tests of the Python package marukv (run by t/python.sh under pytest).

Every test makes its own pool in a fresh directory on tmpfs (/dev/shm),
never the default pool; seeds are fixed.  numpy and torch tests skip
where those modules are missing (Debian: python3-numpy, python3-torch).
The remote tier's tests use ports of 127.0.0.1 where nothing listens or
nothing answers, and a real one-node Redis Cluster (skipped without
redis-server).
"""

import ctypes
import gc
import multiprocessing
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import pytest

import marukv

try:
    import numpy
except ImportError:
    numpy = None
try:
    import torch
except ImportError:
    torch = None

needs_numpy = pytest.mark.skipif(numpy is None, reason="numpy missing (Debian: python3-numpy)")
needs_torch = pytest.mark.skipif(torch is None, reason="torch missing (Debian: python3-torch)")

PAGE = 4096
# Processes of the multi-process tests are forked: each opens the pool
# itself, as it must (a handle does not cross fork()).
mp = multiprocessing.get_context("fork")


@pytest.fixture
def pooldir():
    d = tempfile.mkdtemp(prefix="marukv-py.", dir="/dev/shm")
    yield os.path.join(d, "pool")
    shutil.rmtree(d)
    remove_lock_dirs(d)


def remove_lock_dirs(d):
    """Remove this host's lock directories of the non-coherent pools made
    under d, as marukv(7) says removing a pool must."""
    for e in os.listdir("/dev/shm"):
        link = os.path.join("/dev/shm", e, "registry.mdb")
        if e.startswith("marukv-") and os.path.islink(link) and \
                os.readlink(link).startswith(d + "/"):
            shutil.rmtree(os.path.join("/dev/shm", e))


def open_pool(path, **kw):
    kw.setdefault("create", True)
    kw.setdefault("data_size", 16 << 20)
    kw.setdefault("page_size", PAGE)
    return marukv.Pool(path, **kw)


@pytest.fixture
def pool(pooldir):
    p = open_pool(pooldir)
    yield p
    p.close()


def pattern(seed, n):
    """n bytes that depend on seed, so a value shows whose it is."""
    return random.Random(seed).randbytes(n)


def my_client(p):
    return next(c for c in p.clients() if c["pid"] == os.getpid())


def data_ranges(path):
    """The address ranges where this process maps the pool's data arena."""
    want = os.path.realpath(os.path.join(path, "data"))
    ranges = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].strip() == want:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                ranges.append((lo, hi))
    assert ranges, "no mapping of %s" % want
    return ranges


def in_pool(path, addr, length):
    return any(lo <= addr and addr + length <= hi for lo, hi in data_ranges(path))


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# The calls


def test_module_basics():
    assert marukv.version().count(".") == 2
    assert marukv.KEY_MAX == 510
    assert marukv.strerror(marukv.E_NOTFOUND)
    assert marukv.Pool.__doc__ and marukv.Pool.get.__doc__ and marukv.__doc__


def test_put_get_any_buffer_key(pool):
    keys = [b"bytes", bytearray(b"bytearray"), memoryview(b"memoryview")]
    if numpy is not None:
        keys.append(numpy.frombuffer(b"numpy key", numpy.uint8))
    for i, k in enumerate(keys):
        pool.put(k, pattern(i, 100 + i))
    for i, k in enumerate(keys):
        with pool.get(bytes(k)) as v:
            assert len(v) == 100 + i
            assert bytes(v) == pattern(i, 100 + i)
        assert pool.exists(k)
    assert not pool.exists(b"absent")


def test_view_is_read_only(pool):
    pool.put(b"k", b"value")
    with pool.get(b"k") as v:
        m = memoryview(v)
        assert m.readonly
        with pytest.raises(TypeError):
            m[0] = 0
        m.release()


def test_put_twice_is_exists(pool):
    pool.put(b"k", b"one")
    with pytest.raises(marukv.Exists) as e:
        pool.put(b"k", b"two")
    assert e.value.code == marukv.E_EXISTS and e.value.message
    assert bytes(pool.get(b"k")) == b"one"


def test_get_missing_is_notfound_and_keyerror(pool):
    with pytest.raises(KeyError):
        pool.get(b"absent")
    with pytest.raises(marukv.NotFound) as e:
        pool.get(b"absent")
    assert isinstance(e.value, marukv.Error)
    assert e.value.code == marukv.E_NOTFOUND
    assert str(e.value) == e.value.message != ""


def test_alloc_publish(pool):
    buf = pool.alloc(3 * PAGE + 5)
    assert len(buf) == 3 * PAGE + 5 and not buf.consumed
    data = pattern(1, len(buf))
    memoryview(buf)[:] = data
    pool.publish(b"k", buf)
    assert buf.consumed
    with pytest.raises(ValueError):
        len(buf)
    with pool.get(b"k") as v:
        assert bytes(v) == data


def test_publish_existing_key_consumes_buffer(pool):
    pool.put(b"k", b"x")
    buf = pool.alloc(10)
    with pytest.raises(marukv.Exists):
        pool.publish(b"k", buf)
    assert buf.consumed


def test_abort_and_buffer_context(pool):
    buf = pool.alloc(PAGE)
    pool.abort(buf)
    assert buf.consumed
    with pytest.raises(ValueError):
        pool.abort(buf)
    with pytest.raises(ValueError):
        pool.publish(b"k", buf)
    with pool.alloc(PAGE) as buf:   # not published: aborted at the end
        memoryview(buf)[:4] = b"abcd"
    assert buf.consumed and not pool.exists(b"k")
    with pool.alloc(PAGE) as buf:
        pool.publish(b"k", buf)
    assert pool.exists(b"k")
    pool.alloc(PAGE)                # dropped unpublished: aborted
    gc.collect()
    assert pool.verify()["problems"] == 0


def test_chain_publish_prefix(pool):
    keys = [b"block%d" % i for i in range(8)]
    items = []
    for i, k in enumerate(keys[:4]):
        b = pool.alloc(PAGE)
        memoryview(b)[:] = pattern(i, PAGE)
        items.append((k, b))
    pool.publish_chain(None, items)
    assert all(b.consumed for _, b in items)
    b = pool.alloc(PAGE)
    memoryview(b)[:] = pattern(4, PAGE)
    pool.publish(keys[4], b, parent=keys[3])
    items = [(keys[5], pool.alloc(PAGE))]
    pool.publish_chain(keys[4], items)
    assert pool.prefix_len(keys) == 6
    assert pool.prefix_len([]) == 0
    assert pool.prefix_len([keys[7]] + keys) == 0
    views = pool.get_batch(keys, prefix=True)
    assert len(views) == 6
    for i, v in enumerate(views[:5]):
        assert bytes(v) == pattern(i, PAGE)
        v.release()
    views[5].release()
    views = pool.get_batch([keys[0], b"absent", keys[2]])
    assert views[1] is None and bytes(views[2]) == pattern(2, PAGE)
    for v in views:
        if v is not None:
            v.release()
    assert pool.get_batch([]) == []


def test_hold_keeps_keys_through_pressure(pooldir):
    """hold() keeps the keys it finds through ten pools' worth of
    publishes, holds nest, and unheld keys go with the next evictions."""
    def put(p, key, seed):
        b = p.alloc(PAGE)
        memoryview(b)[:] = pattern(seed, PAGE)
        p.publish(key, b)

    with open_pool(pooldir, data_size=64 * PAGE) as p:
        for i in range(3):
            put(p, b"held-%d" % i, i)
        keys = [b"held-0", b"held-1", b"held-2", b"absent", b"held-0"]
        assert p.hold(keys) == 3
        assert p.hold(keys[:1]) == 1
        assert p.hold([b"absent"]) == 0 and p.hold([]) == 0
        for i in range(640):
            put(p, b"fill-%d" % i, 100 + i)
        assert p.stat()["evictions"] > 500
        for i in range(3):
            with p.get(keys[i]) as v:
                assert bytes(v) == pattern(i, PAGE)
        p.unhold(keys[:3])
        for i in range(640, 800):
            put(p, b"fill-%d" % i, 100 + i)
        assert [p.exists(k) for k in keys[:3]] == [True, False, False]
        p.unhold(keys[:1])
        with pytest.raises(marukv.NotFound):
            p.unhold(keys[:1])
        with pytest.raises(TypeError):
            p.hold(b"held-0")
        with pytest.raises(TypeError):
            p.unhold([1])


def test_chain_shares_published_blocks(pool):
    pool.put(b"a", b"1")
    items = [(b"a", pool.alloc(PAGE)), (b"b", pool.alloc(PAGE))]
    pool.publish_chain(None, items)
    assert items[0][1].consumed and items[1][1].consumed
    assert bytes(pool.get(b"a")) == b"1"


def test_chain_rejects_bad_items(pool):
    b = pool.alloc(PAGE)
    with pytest.raises(TypeError):
        pool.publish_chain(None, [b"k"])
    with pytest.raises(TypeError):
        pool.publish_chain(None, [(b"k", b"not a buffer")])
    with pytest.raises(ValueError):     # the same buffer twice
        pool.publish_chain(None, [(b"k1", b), (b"k2", b)])
    assert not b.consumed               # given back after the refusal
    pool.publish_chain(None, [(b"k1", b)])
    assert pool.exists(b"k1")


def test_publish_async_links_a_chain_and_reports_each_result(pool):
    keys = [b"async%d" % i for i in range(40)]
    tickets, parent = [], None
    for i, k in enumerate(keys):
        b = pool.alloc(PAGE)
        memoryview(b)[:] = pattern(i, PAGE)
        tickets.append(pool.publish_async(k, b, parent=parent))
        assert b.consumed and not tickets[-1].done
        parent = k
    for t in tickets:
        assert pool.wait(t) is None and t.done
    assert pool.prefix_len(keys) == len(keys)
    assert bytes(pool.get(keys[7])) == pattern(7, PAGE)
    with pytest.raises(ValueError, match="waited for already"):
        pool.wait(tickets[0])
    t = pool.publish_async(keys[3], pool.alloc(PAGE))
    with pytest.raises(marukv.Exists):
        pool.wait(t)
    with pytest.raises(TypeError):
        pool.wait(b"not a ticket")
    # a bad parent or an exported buffer: refused, the buffer still the caller's
    b = pool.alloc(PAGE)
    with pytest.raises(marukv.InvalidArgument, match="parent"):
        pool.publish_async(b"x", b, parent=b"")
    m = memoryview(b)
    with pytest.raises(BufferError):
        pool.publish_async(b"x", b)
    m.release()
    assert not b.consumed
    # an unwaited ticket is waited for when it goes
    pool.publish_async(b"x", b)
    gc.collect()
    assert pool.exists(b"x")
    assert pool.verify(deep=True)["problems"] == 0


def test_ticket_of_another_or_a_closed_pool(pooldir):
    with open_pool(pooldir) as p1, marukv.Pool(pooldir) as p2:
        t = p1.publish_async(b"k", p1.alloc(PAGE))
        with pytest.raises(ValueError, match="another pool"):
            p2.wait(t)
        p1.wait(t)
        t = p1.publish_async(b"k2", p1.alloc(PAGE))
    assert t.done
    with pytest.raises(ValueError, match="closed"):
        p1.wait(t)
    with marukv.Pool(pooldir) as p:
        assert p.exists(b"k2")


def async_chain_writer(path, n):
    with marukv.Pool(path) as p:
        parent, tickets = None, []
        for i in range(n):
            b = p.alloc(PAGE)
            memoryview(b)[:] = pattern(i, PAGE)
            k = b"w%d" % i
            tickets.append(p.publish_async(k, b, parent=parent))
            parent = k
        for t in tickets:
            p.wait(t)


def test_publish_async_from_a_process_that_does_not_hold_the_lease(pool, pooldir):
    """More publishes in flight than a handle may have (32): the calls wait
    for the oldest, and every block arrives through the holder."""
    n = 100
    pr = mp.Process(target=async_chain_writer, args=(pooldir, n))
    pr.start()
    pr.join(60)
    assert pr.exitcode == 0
    keys = [b"w%d" % i for i in range(n)]
    assert pool.prefix_len(keys) == n
    assert pool.stat()["lease_holder_pid"] == os.getpid()
    for i in (0, 31, 32, 99):
        assert bytes(pool.get(keys[i])) == pattern(i, PAGE)


def test_data_mapping_holds_every_buffer_and_view(pooldir):
    import numpy
    with open_pool(pooldir) as p:
        addr, length = p.data_mapping()
        st = p.stat()
        assert length == st["pages_total"] * st["page_size"]
        b = p.alloc(3 * PAGE)
        a = numpy.frombuffer(b, numpy.uint8)
        assert addr <= a.ctypes.data and a.ctypes.data + len(b) <= addr + length
        a[:] = 7
        del a
        p.publish(b"k", b)
    with marukv.Pool(pooldir, readonly=True) as p:
        addr, length = p.data_mapping()
        with p.get(b"k") as v:
            a = numpy.frombuffer(v, numpy.uint8)
            assert addr <= a.ctypes.data and a.ctypes.data + len(v) <= addr + length
            assert a[-1] == 7
            del a
    with pytest.raises(ValueError, match="closed"):
        p.data_mapping()


RACING_CHAIN = r"""
import sys, threading
import marukv

pool = marukv.Pool(sys.argv[1], create=True, data_size=64 << 20, page_size=4096)
sys.setswitchinterval(1e-6)
items, stop = [], threading.Event()


def mutate():
    junk = [(b"junk", object())] * 64
    while not stop.is_set():
        del items[1:]
        items[:] = junk
        items.clear()


t = threading.Thread(target=mutate)
t.start()
published = 0
for r in range(300):
    mine = [(b"r%d-%d" % (r, i), pool.alloc(4096)) for i in range(48)]
    items[:] = mine
    try:
        pool.publish_chain(None, items)
        published += 1
    except (TypeError, ValueError):
        pass
    for k, b in mine:
        if not b.consumed:
            pool.abort(b)
        elif not pool.exists(k):
            sys.exit("%r consumed but not published" % k)
stop.set()
t.join()
pool.verify(deep=True)
print("published", published)
"""


def test_publish_chain_while_another_thread_changes_the_list(pooldir):
    """publish_chain() takes the items it needs before it lets go of the
    GIL: another thread emptying and refilling the caller's list meanwhile
    changes nothing of the call (before, the interpreter crashed: the call
    read the list again afterwards, past its end or into foreign
    objects)."""
    r = subprocess.run([sys.executable, "-c", RACING_CHAIN, pooldir],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr[-2000:])
    assert r.stdout.startswith("published ")


def test_delete(pool):
    pool.put(b"k", b"v")
    pool.delete(b"k")
    assert not pool.exists(b"k")
    with pytest.raises(marukv.NotFound):
        pool.delete(b"k")


def test_stat_verify_reclaim_evict_clients(pool):
    for i in range(20):
        pool.put(b"k%d" % i, pattern(i, PAGE))
    st = pool.stat()
    assert st["entries"] == 20 and st["page_size"] == PAGE
    assert st["backing"] == "tmpfs" and len(st["uuid"]) == 36
    assert st["pages_total"] == (16 << 20) // PAGE
    r = pool.verify(deep=True)
    assert r["problems"] == 0 and r["checksums_checked"] == 20 and r["first_problem"] == ""
    assert pool.verify()["entries"] == 20
    assert set(pool.reclaim()) == {"clients", "readers", "pins", "pages", "requests", "nodes"}
    assert pool.reclaim(dry_run=True)["clients"] == 0
    assert pool.evict(100, dry_run=True)["keys"] == 20
    assert pool.stat()["entries"] == 20
    r = pool.evict(100)
    assert r["keys"] == 20 and pool.stat()["entries"] == 0
    me = my_client(pool)
    assert me["alive"] and me["holder"] and not me["rdonly"] and me["pin"] == 0
    pool.set_watermarks(20, 30)
    st = pool.stat()
    assert (st["low_watermark"], st["high_watermark"]) == (20, 30)
    with pytest.raises(marukv.InvalidArgument):
        pool.set_watermarks(50, 40)
    with pytest.raises(marukv.InvalidArgument):
        pool.evict(101)


def test_properties_and_repr(pool, pooldir):
    assert pool.path == pooldir and not pool.closed and not pool.readonly
    assert pooldir in repr(pool)
    pool.put(b"k", b"abc")
    v = pool.get(b"k")
    assert repr(v) == "<marukv.View of 3 bytes>" and not v.released
    v.release()
    assert v.released and "released" in repr(v)
    pool.close()
    assert pool.closed and "closed" in repr(pool)


def test_options_are_applied(pooldir):
    with marukv.Pool(pooldir, create=True, data_size=8 << 20, page_size=8192, max_clients=5,
                     registry_size=4 << 20, lease_period_ms=200, watermarks=(0, 0),
                     client_timeout_ms=500, node="node-a", max_nodes=3,
                     nochecksum=True) as p:
        st = p.stat()
        assert (st["page_size"], st["pages_total"], st["max_clients"]) == (8192, 1024, 5)
        assert (st["registry_size"], st["lease_period_ms"]) == (4 << 20, 200)
        assert (st["low_watermark"], st["client_timeout_ms"], st["max_nodes"]) == (0, 500, 3)
        assert my_client(p)["node"] == "node-a"
        p.put(b"k", b"v")
        assert p.verify(deep=True)["checksums_checked"] == 0   # nochecksum
    with marukv.Pool(pooldir, verify=True) as p:
        assert bytes(p.get(b"k")) == b"v"


def test_default_path_is_marukv_pool_env(pooldir, monkeypatch):
    monkeypatch.setenv("MARUKV_POOL", pooldir)
    with marukv.Pool(create=True, data_size=1 << 20, page_size=PAGE) as p:
        assert p.path == pooldir


# Every exception


def test_exception_classes():
    pairs = {
        "E_INVAL": marukv.InvalidArgument, "E_NOMEM": marukv.NoMemory,
        "E_NOSPC": marukv.NoSpace, "E_EXISTS": marukv.Exists, "E_NOENT": marukv.NoPool,
        "E_USERS": marukv.TooManyClients, "E_IO": marukv.IOFailure,
        "E_TIMEDOUT": marukv.TimedOut, "E_PERM": marukv.Permission,
        "E_NOTFOUND": marukv.NotFound, "E_RDONLY": marukv.ReadOnly,
        "E_NOTPOOL": marukv.NotPool, "E_CORRUPT": marukv.Corrupt,
        "E_VERSION": marukv.VersionMismatch, "E_INTERNAL": marukv.Internal,
        "E_EXPIRED": marukv.Expired, "E_REMOTE": marukv.RemoteFailed,
        "E_FRAME_MAGIC": marukv.FrameMagic, "E_FRAME_VERSION": marukv.FrameVersion,
        "E_FRAME_SHORT": marukv.FrameShort, "E_FRAME_CHECKSUM": marukv.FrameChecksum,
        "E_FRAME_BODY": marukv.FrameBody,
    }
    assert len({getattr(marukv, c) for c in pairs}) == len(pairs)
    for const, cls in pairs.items():
        assert issubclass(cls, marukv.Error) and cls.__module__ == "marukv"
        e = cls(getattr(marukv, const), "msg")
        assert e.code == getattr(marukv, const) and str(e) == "msg"
    assert issubclass(marukv.NotFound, KeyError)
    assert issubclass(marukv.InvalidArgument, ValueError)
    assert issubclass(marukv.NoMemory, MemoryError)
    frames = {c for c in pairs.values() if c.__name__.startswith("Frame")}
    assert len(frames) == 5 and all(issubclass(c, marukv.BadFrame) for c in frames)
    assert marukv.BadFrame.__module__ == "marukv"
    assert all(name in marukv.__doc__ and name in marukv.__all__
               for name in ["BadFrame"] + [c.__name__ for c in pairs.values()])
    assert all(const in marukv.__all__ for const in pairs)


def test_open_errors(pooldir):
    with pytest.raises(marukv.NoPool) as e:
        marukv.Pool(pooldir)
    assert e.value.code == marukv.E_NOENT and pooldir in e.value.message
    os.mkdir(pooldir, 0o700)
    with open(os.path.join(pooldir, "super"), "wb") as f:
        f.write(b"not a pool" * 100)
    with pytest.raises((marukv.NotPool, marukv.Corrupt)):
        marukv.Pool(pooldir)
    shutil.rmtree(pooldir)
    with pytest.raises(marukv.InvalidArgument):
        marukv.Pool(pooldir, create=True, readonly=True)
    with pytest.raises(marukv.InvalidArgument):
        marukv.Pool("")
    with pytest.raises(marukv.InvalidArgument):
        marukv.Pool(pooldir, create=True, page_size=3000)
    with pytest.raises(marukv.InvalidArgument):
        marukv.Pool(pooldir, create=True, data_size=1 << 50)
    with pytest.raises(marukv.InvalidArgument):
        marukv.Pool(pooldir, create=True, watermarks=(50, 10))
    with pytest.raises(marukv.InvalidArgument):
        marukv.Pool(pooldir, create=True, node="bad name!")


def test_corrupt_pool(pooldir):
    open_pool(pooldir).close()
    with open(os.path.join(pooldir, "super"), "r+b") as f:
        f.seek(64)
        f.write(b"\xff" * 256)
    with pytest.raises((marukv.Corrupt, marukv.NotPool)):
        marukv.Pool(pooldir)


def test_unsafe_directory_is_permission(pooldir):
    open_pool(pooldir).close()
    os.chmod(pooldir, 0o777)
    with pytest.raises(marukv.Permission) as e:
        marukv.Pool(pooldir)
    assert e.value.code == marukv.E_PERM


def test_too_many_clients(pooldir):
    with open_pool(pooldir, max_clients=1):
        with pytest.raises(marukv.TooManyClients):
            marukv.Pool(pooldir)


def test_no_space(pooldir):
    with open_pool(pooldir, data_size=64 * PAGE, watermarks=(0, 0)) as p:
        with pytest.raises(marukv.NoSpace):
            p.alloc(65 * PAGE)
        held = []
        for i in range(65):
            try:
                held.append(p.alloc(PAGE))
            except marukv.NoSpace:
                break
        else:
            pytest.fail("65 pages granted out of 64")
        with pytest.raises(marukv.NoSpace):
            p.put(b"k", b"v")
        for b in held:
            p.abort(b)
        p.put(b"k", b"v")


def test_readonly_pool_refuses_writes(pooldir):
    with open_pool(pooldir) as p:
        p.put(b"k", b"value")
    with marukv.Pool(pooldir, readonly=True) as ro:
        assert ro.readonly
        assert bytes(ro.get(b"k")) == b"value" and ro.prefix_len([b"k"]) == 1
        for call in (lambda: ro.put(b"k2", b"v"), lambda: ro.alloc(1),
                     lambda: ro.delete(b"k"), lambda: ro.evict(50), lambda: ro.reclaim(),
                     lambda: ro.set_watermarks(5, 10), lambda: ro.set_remote("h:1"),
                     lambda: ro.set_remote(""), lambda: ro.fetch(b"k"),
                     lambda: ro.fetch(b"absent")):
            with pytest.raises(marukv.ReadOnly) as e:
                call()
            assert e.value.code == marukv.E_RDONLY
        ro.evict(50, dry_run=True)
        ro.reclaim(dry_run=True)
        assert my_client(ro)["rdonly"]
        assert ro.exists(b"k")
        assert ro.remote()["servers"] == ""


# Hostile use


def test_bad_keys(pool):
    pool.put(b"x" * marukv.KEY_MAX, b"v")
    for key in (b"", b"x" * (marukv.KEY_MAX + 1)):
        for call in (lambda: pool.put(key, b"v"), lambda: pool.get(key),
                     lambda: pool.exists(key), lambda: pool.delete(key),
                     lambda: pool.prefix_len([key]), lambda: pool.get_batch([key])):
            with pytest.raises(marukv.InvalidArgument):
                call()
    b = pool.alloc(1)
    with pytest.raises(marukv.InvalidArgument):
        pool.publish(b"", b)
    assert not b.consumed
    with pytest.raises(marukv.InvalidArgument):
        pool.publish(b"k", b, parent=b"")
    pool.abort(b)


def test_wrong_types(pool, pooldir):
    for call in (lambda: pool.put("str key", b"v"), lambda: pool.put(b"k", "str value"),
                 lambda: pool.get(1), lambda: pool.exists(None), lambda: pool.delete(1.5),
                 lambda: pool.prefix_len(5), lambda: pool.prefix_len(["s"]),
                 lambda: pool.get_batch([b"k", 3]), lambda: pool.publish(b"k", b"buf"),
                 lambda: pool.abort(object()), lambda: pool.alloc("10"),
                 lambda: pool.alloc(1.0), lambda: pool.evict("50"),
                 lambda: pool.publish_chain(None, 5), lambda: pool.fetch("str key"),
                 lambda: pool.set_remote(5), lambda: pool.set_remote("h:1", prefix=5),
                 lambda: pool.set_remote("h:1", ttl_s="1"), lambda: pool.set_remote(),
                 lambda: pool.set_remote("h:1", "prefix"),
                 lambda: marukv.Pool(pooldir, create=True, data_size="big"),
                 lambda: marukv.Pool(pooldir, create=True, node=5),
                 lambda: marukv.Pool(pooldir, create=True, bogus=1),
                 lambda: marukv.Pool(pooldir, create=True, watermarks=5)):
        with pytest.raises(TypeError):
            call()
    assert not os.path.exists(pooldir + "x")


def test_huge_sizes(pool, pooldir):
    for n in (-1, 1 << 64):
        with pytest.raises(OverflowError):
            pool.alloc(n)
    with pytest.raises((marukv.NoSpace, marukv.InvalidArgument)):
        pool.alloc(1 << 62)
    with pytest.raises(marukv.InvalidArgument):
        pool.alloc(0)
    with pytest.raises(marukv.InvalidArgument):
        pool.put(b"k", b"")
    with pytest.raises(OverflowError):
        marukv.Pool(pooldir + "2", create=True, data_size=1 << 70)
    with pytest.raises(OverflowError):
        marukv.Pool(pooldir + "2", create=True, page_size=-4096)
    with pytest.raises(OverflowError):
        pool.evict(-1)
    with pytest.raises(OverflowError):
        pool.set_remote("h:1", timeout_ms=-1)
    with pytest.raises(OverflowError):
        pool.set_remote("h:1", ttl_s=1 << 32)


def test_released_view_raises(pool):
    pool.put(b"k", b"value")
    v = pool.get(b"k")
    v.release()
    v.release()                         # twice: nothing more to do
    for call in (lambda: len(v), lambda: bytes(v), lambda: memoryview(v),
                 lambda: v.__enter__()):
        with pytest.raises(ValueError):
            call()
    if numpy is not None:
        with pytest.raises(ValueError):
            numpy.frombuffer(v, numpy.uint8)
    with pool.get(b"k") as v2:
        pass
    with pytest.raises(ValueError):
        bytes(v2)


def test_release_while_exported_is_buffererror(pool):
    pool.put(b"k", b"value")
    v = pool.get(b"k")
    m = memoryview(v)
    with pytest.raises(BufferError):
        v.release()
    with pytest.raises(BufferError):
        pool.close()
    assert bytes(m) == b"value"         # still valid
    m.release()
    v.release()
    if numpy is not None:
        with pool.get(b"k") as v:
            a = numpy.frombuffer(v, numpy.uint8)
            with pytest.raises(BufferError):
                v.release()
            del a


def test_buffer_exported_then_publish_or_abort(pool):
    b = pool.alloc(PAGE)
    m = memoryview(b)
    m[:5] = b"hello"
    with pytest.raises(BufferError):
        pool.publish(b"k", b)
    with pytest.raises(BufferError):
        pool.abort(b)
    with pytest.raises(BufferError):
        pool.publish_chain(None, [(b"k", b)])
    with pytest.raises(BufferError):
        pool.close()
    m.release()
    pool.publish(b"k", b)
    assert bytes(pool.get(b"k"))[:5] == b"hello"


def test_buffer_of_another_pool(pool, pooldir):
    with open_pool(pooldir + "2") as other:
        b = other.alloc(PAGE)
        with pytest.raises(ValueError):
            pool.publish(b"k", b)
        with pytest.raises(ValueError):
            pool.abort(b)
        other.abort(b)
    shutil.rmtree(pooldir + "2")


def test_use_after_close(pool):
    pool.put(b"k", b"value")
    v = pool.get(b"k")
    b = pool.alloc(PAGE)
    pool.close()
    pool.close()                        # twice: nothing more to do
    for call in (lambda: pool.put(b"k2", b"v"), lambda: pool.get(b"k"),
                 lambda: pool.exists(b"k"), lambda: pool.delete(b"k"),
                 lambda: pool.alloc(1), lambda: pool.prefix_len([b"k"]),
                 lambda: pool.get_batch([b"k"]), lambda: pool.stat(), lambda: pool.verify(),
                 lambda: pool.reclaim(), lambda: pool.evict(10), lambda: pool.clients(),
                 lambda: pool.set_watermarks(5, 10), lambda: pool.path,
                 lambda: pool.set_remote(""), lambda: pool.remote(),
                 lambda: pool.fetch(b"k"),
                 lambda: pool.publish(b"k", b), lambda: pool.abort(b),
                 lambda: pool.__enter__(),
                 # views and buffers of a closed pool
                 lambda: bytes(v), lambda: len(v), lambda: memoryview(b), lambda: len(b)):
        with pytest.raises(ValueError):
            call()
    assert v.released and b.consumed
    v.release()                         # the close released it: nothing to do
    b.__exit__(None, None, None)
    del v, b
    gc.collect()


def test_view_keeps_closed_pool_object_alive(pooldir):
    p = open_pool(pooldir)
    p.put(b"k", b"v")
    v = p.get(b"k")
    del p                               # the view holds the pool open
    gc.collect()
    assert bytes(v) == b"v"
    v.release()


# Threads and fork


def test_threads_share_a_pool(pool):
    errors = []

    def work(t):
        try:
            for i in range(200):
                key = b"t%d-%d" % (t, i)
                val = pattern(t * 1000 + i, 100 + i)
                if i % 2:
                    pool.put(key, val)
                else:
                    b = pool.alloc(len(val))
                    memoryview(b)[:] = val
                    pool.publish(key, b)
                with pool.get(key) as v:
                    assert bytes(v) == val
                assert pool.prefix_len([key]) == 1
        except Exception as e:          # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert pool.stat()["entries"] == 800 and my_client(pool)["pin"] == 0


def test_close_while_threads_call(pool):
    pool.put(b"k", b"v")
    stop = threading.Event()
    seen = []

    def work():
        while not stop.is_set():
            try:
                with pool.get(b"k") as v:
                    bytes(v)
            except ValueError:          # closed under us
                seen.append(1)
                return

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    pool.close()
    stop.set()
    for t in threads:
        t.join()
    assert pool.closed


def test_inherited_pool_in_forked_child(pool):
    pool.put(b"k", b"v")
    v = pool.get(b"k")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            try:
                pool.get(b"k")
            except marukv.InvalidArgument:
                code = 2
            try:
                pool.put(b"k2", b"v")
            except marukv.InvalidArgument:
                code += 1
            del v
            pool.close()
            code = 0 if code == 3 else code
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert bytes(v) == b"v"             # the parent's view and handle are intact
    v.release()
    pool.put(b"k2", b"v2")
    assert my_client(pool)["pin"] == 0


def writer(path, w, n):
    with marukv.Pool(path) as p:
        for i in range(n):
            val = pattern(w * 100000 + i, 1 + (i * 7919) % (3 * PAGE))
            if i % 2:
                p.put(b"w%d-%d" % (w, i), val)
            else:
                b = p.alloc(len(val))
                memoryview(b)[:] = val
                p.publish(b"w%d-%d" % (w, i), b)


def reader(path, writers, n, q):
    bad = 0
    with marukv.Pool(path, readonly=True) as p:
        for w in range(writers):
            for i in range(n):
                val = pattern(w * 100000 + i, 1 + (i * 7919) % (3 * PAGE))
                with p.get(b"w%d-%d" % (w, i)) as v:
                    bad += bytes(v) != val
    q.put(bad)


def test_processes_write_and_read_one_pool(pooldir):
    writers, readers, n = 4, 3, 60
    with open_pool(pooldir, data_size=64 << 20):
        procs = [mp.Process(target=writer, args=(pooldir, w, n)) for w in range(writers)]
        for pr in procs:
            pr.start()
        for pr in procs:
            pr.join()
            assert pr.exitcode == 0
        q = mp.Queue()
        procs = [mp.Process(target=reader, args=(pooldir, writers, n, q))
                 for _ in range(readers)]
        for pr in procs:
            pr.start()
        bad = [q.get(timeout=120) for _ in procs]
        for pr in procs:
            pr.join()
            assert pr.exitcode == 0
        assert bad == [0] * readers


def deleter(path, key, q):
    with marukv.Pool(path) as p:
        p.delete(key)
        # Churn: write and delete more than the pages left free, which
        # would reuse the deleted value's pages if they were free.
        for i in range(24):
            k = b"churn%d" % i
            p.put(k, b"\xee" * (2 * PAGE))
            p.delete(k)
        q.put(p.exists(key))


def test_view_outlives_delete_by_another_process(pooldir):
    data = pattern(42, 5 * PAGE)
    with open_pool(pooldir, data_size=64 * PAGE, watermarks=(0, 0)) as p:
        p.put(b"victim", data)
        with p.get(b"victim") as v:
            q = mp.Queue()
            pr = mp.Process(target=deleter, args=(pooldir, b"victim", q))
            pr.start()
            assert q.get(timeout=120) is False
            pr.join()
            assert pr.exitcode == 0
            assert bytes(v) == data
            assert not p.exists(b"victim")
            assert p.stat()["pages_quarantined"] >= 5
        assert p.verify()["problems"] == 0


# Zero copy


@needs_numpy
def test_numpy_reads_pool_memory(pool, pooldir):
    src = numpy.arange(PAGE, dtype=numpy.float32)
    pool.put(b"k", src)
    with pool.get(b"k") as v:
        a = numpy.frombuffer(v, numpy.float32)
        assert in_pool(pooldir, a.ctypes.data, a.nbytes)
        assert not a.flags.writeable
        assert numpy.array_equal(a, src)
        del a


@needs_numpy
def test_numpy_fills_alloc_buffer_in_place(pool, pooldir):
    src = numpy.random.default_rng(1).integers(0, 1 << 30, 2048, dtype=numpy.int64)
    b = pool.alloc(src.nbytes)
    dst = numpy.frombuffer(b, numpy.int64)
    assert in_pool(pooldir, dst.ctypes.data, dst.nbytes) and dst.flags.writeable
    numpy.copyto(dst, src)
    del dst
    pool.publish(b"k", b)
    with pool.get(b"k") as v:
        a = numpy.frombuffer(v, numpy.int64)
        assert numpy.array_equal(a, src)
        del a


@needs_torch
def test_torch_reads_and_fills_pool_memory(pool, pooldir):
    src = torch.arange(4096, dtype=torch.float16)
    b = pool.alloc(src.numel() * src.element_size())
    dst = torch.frombuffer(b, dtype=torch.float16)
    assert in_pool(pooldir, dst.data_ptr(), len(b))
    dst.copy_(src)
    del dst
    gc.collect()
    pool.publish(b"k", b)
    with pool.get(b"k") as v:
        with warnings.catch_warnings():     # torch warns that the buffer is read-only
            warnings.simplefilter("ignore", UserWarning)
            t = torch.frombuffer(v, dtype=torch.float16)
        assert in_pool(pooldir, t.data_ptr(), len(v))
        assert torch.equal(t, src)
        del t
        gc.collect()


def lmcache_style_buffer(n):
    """A writable memoryview of n bytes made as LMCache makes its buffers (a
    ctypes array over an address: format '<B', not 'B'), and the array
    that owns the memory."""
    arena = (ctypes.c_ubyte * n)()
    mv = memoryview((ctypes.c_ubyte * n).from_address(ctypes.addressof(arena)))
    assert mv.format == "<B"
    return mv, arena


def test_copy_into_and_fill_from(pool):
    data = pattern(3, 3 * PAGE + 1)
    dst, dst_arena = lmcache_style_buffer(len(data))
    src, src_arena = lmcache_style_buffer(len(data))
    src.cast("B")[:] = data
    with pytest.raises(NotImplementedError):    # '<B': slice assignment refuses
        dst[:] = data
    b = pool.alloc(len(data))
    assert b.fill_from(src) == len(data)
    assert b.fill_from(b"") == 0
    with pytest.raises(ValueError):
        b.fill_from(bytes(len(data) + 1))
    with pytest.raises(TypeError):
        b.fill_from("not a buffer")
    with memoryview(b) as m:
        assert bytes(m[:len(data)]) == data
    pool.publish(b"k", b)
    with pytest.raises(ValueError):     # consumed
        b.fill_from(b"x")
    with pool.get(b"k") as v:
        assert v.copy_into(dst) == len(data)
        assert bytes(dst) == data
        longer = bytearray(b"\xff" * (len(v) + 5))
        assert v.copy_into(longer) == len(v)
        assert longer == data + b"\xff" * 5    # the start only
        with pytest.raises(ValueError):
            v.copy_into(bytearray(len(v) - 1))
        with pytest.raises(BufferError):
            v.copy_into(bytes(len(v)))  # read-only
        with pytest.raises(TypeError):
            v.copy_into("not a buffer")
    with pytest.raises(ValueError):     # released
        v.copy_into(longer)
    del dst, src, dst_arena, src_arena


def test_copies_release_the_gil(pooldir):
    """copy_into() and fill_from() let other threads run during the copy;
    memoryview slice assignment, the control, does not.  With a long switch
    interval the ticker runs only while this thread has released the GIL."""
    n = 32 << 20
    pool = open_pool(pooldir, data_size=4 * n)
    pool.put(b"big", bytes(n))
    dst = bytearray(n)
    ticks = [0]
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0)               # gives the GIL back at once

    def others_ran(copy):
        """Whether the ticker ran during copy(), tried a few times (it may
        not get a CPU in time on a loaded machine)."""
        for _ in range(20):
            before = ticks[0]
            copy()
            if ticks[0] != before:
                return True
        return False

    old = sys.getswitchinterval()
    sys.setswitchinterval(30)
    t = threading.Thread(target=tick)
    t.start()
    try:
        with pool.get(b"big") as v:
            assert others_ran(lambda: v.copy_into(dst))
        b = pool.alloc(n)
        assert others_ran(lambda: b.fill_from(dst))
        pool.abort(b)
        src = bytes(n)
        assert not others_ran(lambda: memoryview(dst).__setitem__(slice(None), src))
    finally:
        sys.setswitchinterval(old)
        stop.set()
        t.join()
        pool.close()


def ticks_during(call, secs):
    """Run call() in a thread, the switch interval long, while this thread
    counts ticks (one a millisecond): they advance only while call() has
    released the GIL.  ([its seconds] if it returned within secs, else
    [], and the ticks.)"""
    result = []

    def timed():
        t = time.monotonic()
        call()
        result.append(time.monotonic() - t)

    old = sys.getswitchinterval()
    sys.setswitchinterval(30)
    t = threading.Thread(target=timed)
    ticks = 0
    try:
        t.start()
        deadline = time.monotonic() + secs
        while t.is_alive() and time.monotonic() < deadline:
            ticks += 1
            time.sleep(0.001)
    finally:
        sys.setswitchinterval(old)
    t.join(secs)
    return result, ticks


def holder(path, q):
    """Create the pool, so holding its lease, and wait to be stopped."""
    with open_pool(path, lease_period_ms=1000) as p:
        q.put(p.stat()["lease_holder_pid"])
        time.sleep(120)


def holds_flock(pid, path):
    """Whether pid holds a flock() of the file at path (/proc/locks)."""
    ino = os.stat(path).st_ino
    with open("/proc/locks") as f:
        for line in f:
            w = line.split()
            if "->" in w:
                continue
            if w[1] == "FLOCK" and w[4] == str(pid) and w[5].split(":")[-1] == str(ino):
                return True
    return False


def stop_outside_writes(pid, pooldir):
    """SIGSTOP pid where it holds no flock() of super, the registry writers'
    lock: a holder stopped inside a write keeps every successor out for as
    long as the stop lasts (marukv(7)), which is another test.  A stop that
    lands inside one is let go and tried again."""
    deadline = time.monotonic() + 30
    while True:
        os.kill(pid, signal.SIGSTOP)
        while not open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0] in "Tt":
            time.sleep(0.001)
        if not holds_flock(pid, os.path.join(pooldir, "super")):
            return
        assert time.monotonic() < deadline, "the holder was inside a write at every stop"
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)


def test_publish_waiting_for_a_stopped_holder_releases_the_gil(pooldir):
    """A put whose lease holder is stopped (SIGSTOP) waits for the lease to
    lapse and takes it over; meanwhile other threads run.  With a long
    switch interval, the main thread's ticks advance only while the putting
    thread has released the GIL."""
    q = mp.Queue()
    pr = mp.Process(target=holder, args=(pooldir, q))
    pr.start()
    try:
        assert q.get(timeout=60) == pr.pid
        p = marukv.Pool(pooldir)
        stop_outside_writes(pr.pid, pooldir)
        result, ticks = ticks_during(lambda: p.put(b"k", b"v" * 100), 60)
        assert result, "the put did not return within 60 s"
        assert result[0] >= 0.1, "the put took %.3f s, not waiting for the lease" % result[0]
        assert ticks >= 20, "%d ticks in the %.3f s the put took" % (ticks, result[0])
        assert p.stat()["lease_holder_pid"] == os.getpid()
        with p.get(b"k") as v:
            assert bytes(v) == b"v" * 100
        p.close()
    finally:
        pr.kill()
        pr.join()


def test_copy_in_progress_blocks_release_and_close(pooldir):
    """While another thread copies out of a view or into a buffer, release(),
    publish(), abort() and close() refuse with BufferError.  With a long
    switch interval the copying thread gives up the GIL only inside the
    copy, so every call below runs while a copy is under way."""
    n = 16 << 20
    pool = open_pool(pooldir, data_size=4 * n)
    pool.put(b"big", bytes(n))
    v = pool.get(b"big")
    b = pool.alloc(n)
    dst = bytearray(n)

    def refused_during(copy, calls):
        started, stop = threading.Event(), threading.Event()

        def loop():
            started.set()
            while not stop.is_set():
                copy()

        old = sys.getswitchinterval()
        sys.setswitchinterval(30)
        t = threading.Thread(target=loop)
        t.start()
        try:
            assert started.wait(10)
            for call in calls:
                with pytest.raises(BufferError):
                    call()
        finally:
            stop.set()
            t.join()
            sys.setswitchinterval(old)

    refused_during(lambda: v.copy_into(dst), (v.release, pool.close))
    refused_during(lambda: b.fill_from(dst),
                   (lambda: pool.publish(b"k", b), lambda: pool.abort(b), pool.close))
    assert not v.released and not b.consumed and not pool.closed
    v.release()
    pool.publish(b"k", b)
    pool.close()


# Leaks


def test_get_release_loop_does_not_leak(pool):
    pool.put(b"k", pattern(7, 1000))
    pool.put(b"k2", b"x")
    for _ in range(2000):               # warm up caches and allocators
        with pool.get(b"k") as v:
            pass
    gc.collect()
    rss, refs = rss_kib(), sys.getrefcount(pool)
    quarantined = pool.stat()["pages_quarantined"]
    for i in range(100000):
        v = pool.get(b"k")
        if i % 1000 == 0:
            assert my_client(pool)["pin"] != 0     # a view is held: pinned
        v.release()
    for _ in range(1000):
        for v in pool.get_batch([b"k", b"absent", b"k2"]):
            if v is not None:
                v.release()
        try:
            pool.get(b"absent")
        except marukv.NotFound:
            pass
    gc.collect()
    assert sys.getrefcount(pool) == refs
    assert my_client(pool)["pin"] == 0
    assert pool.stat()["pages_quarantined"] == quarantined
    assert rss_kib() - rss < 2048, "RSS grew by %d KiB" % (rss_kib() - rss)


# Non-coherent pools


def create_noncoherent(path, data_size, lease_period_ms):
    """Create the pool at path non-coherent and close it."""
    try:
        marukv.Pool(path, create=True, coherence="non-coherent", data_size=data_size,
                    lease_period_ms=lease_period_ms).close()
    except marukv.InvalidArgument as e:
        pytest.skip("no non-coherent pools here: %s" % e)


def test_coherence_option_is_checked(pooldir):
    """coherence takes the stat dict's names, nothing else, and a pool
    created with it keeps it for every opener."""
    with pytest.raises(ValueError, match="coherence must be"):
        marukv.Pool(pooldir, create=True, coherence="noncoherent")
    with pytest.raises(TypeError):
        marukv.Pool(pooldir, create=True, coherence=2)
    assert not os.path.exists(pooldir)
    with marukv.Pool(pooldir, create=True, coherence="coherent", data_size=16 << 20) as p:
        assert p.stat()["coherence"] == "coherent"


def snapshot_moves(p):
    st = p.stat()
    return st["registry_fresh_logged"], st["registry_fresh_whole"]


def test_stat_counts_how_a_reader_made_each_snapshot_fresh(pooldir):
    """A reader in a non-coherent pool that reads after each commit of the
    holder (another handle) moves to each new snapshot through the holder's
    log of the pages the commit wrote: registry_fresh_logged counts one per
    commit.  Its first move, and one more than 32 commits behind, drop the
    whole registry: registry_fresh_whole.  A lease of a minute: the holder
    commits only when asked.  In a coherent pool both stay 0."""
    create_noncoherent(pooldir, 16 << 20, 60000)
    with marukv.Pool(pooldir) as w, marukv.Pool(pooldir, readonly=True) as r:
        assert r.stat()["coherence"] == "non-coherent"
        w.put(b"k0", pattern(0, 100))
        assert bytes(r.get(b"k0")) == pattern(0, 100)
        logged, whole = snapshot_moves(r)
        assert whole >= 1
        for i in range(1, 9):
            w.put(b"k%d" % i, pattern(i, 100))
            with r.get(b"k%d" % i) as v:
                assert bytes(v) == pattern(i, 100)
            assert snapshot_moves(r) == (logged + i, whole)
        logged += 8
        for i in range(9, 9 + 33):
            w.put(b"k%d" % i, pattern(i, 100))
        for i in range(9 + 33):
            with r.get(b"k%d" % i) as v:
                assert bytes(v) == pattern(i, 100)
        assert snapshot_moves(r) == (logged, whole + 1)
    with open_pool(pooldir + "c") as w, marukv.Pool(pooldir + "c", readonly=True) as r:
        assert r.stat()["coherence"] == "coherent"
        for i in range(4):
            w.put(b"k%d" % i, b"v")
            assert bytes(r.get(b"k%d" % i)) == b"v"
        assert snapshot_moves(r) == (0, 0)


# The remote tier


OFF = {"servers": "", "prefix": "", "ttl_s": 0, "queue_mib": 0, "timeout_ms": 0, "tier": 0}


def closed_port():
    """A port of 127.0.0.1 where nothing listens (one the kernel just gave
    out and took back)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A real Redis Cluster of one node (redis-server --cluster-enabled yes,
    every slot its own) on a free port of 127.0.0.1, in directory d, with
    a client of its own: get(key), set(key, value), keys()."""

    def __init__(self, d):
        deadline = time.monotonic() + 20
        while not self.start(d, deadline):
            assert time.monotonic() < deadline, "redis-server did not start"

    def start(self, d, deadline):
        """Start the node on a port whose bus port (+10000) is free too, both
        below the kernel's ephemeral ports; False if it exited (a port taken
        meanwhile)."""
        self.port = random.randrange(20000, 22700)
        for p in (self.port, self.port + 10000):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    return False
        self.servers = "127.0.0.1:%d" % self.port
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--cluster-enabled", "yes", "--cluster-config-file", "nodes-%d.conf" % self.port,
             "--dir", d, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                break
            except OSError:
                if self.proc.poll() is not None:
                    return False
                assert time.monotonic() < deadline, "redis-server did not answer"
                time.sleep(0.05)
        self.f = self.sock.makefile("rb")
        assert self.cmd(b"CLUSTER", b"ADDSLOTSRANGE", b"0", b"16383") == b"OK"
        while b"cluster_state:ok" not in self.cmd(b"CLUSTER", b"INFO"):
            assert time.monotonic() < deadline, "the cluster did not come up"
            time.sleep(0.05)
        return True

    def cmd(self, *args):
        self.sock.sendall(b"*%d\r\n" % len(args) +
                          b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return self.reply()

    def reply(self):
        line = self.f.readline()[:-2]
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"*":
            return [self.reply() for _ in range(int(rest))]
        assert kind != b"-", rest
        return int(rest) if kind == b":" else rest

    def get(self, key):
        return self.cmd(b"GET", key)

    def set(self, key, value):
        assert self.cmd(b"SET", key, value) == b"OK"

    def keys(self):
        return set(self.cmd(b"KEYS", b"*"))

    def close(self):
        self.sock.close()
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def cluster(tmp_path):
    if not shutil.which("redis-server"):
        pytest.skip("no redis-server (Debian: redis-server)")
    c = Cluster(str(tmp_path))
    yield c
    c.close()


def test_remote_setting_round_trip(pool, pooldir):
    """set_remote() keeps the setting in the pool, the defaults filled in,
    for every handle; "" and None turn it off."""
    assert pool.remote() == OFF and pool.stat()["remote_servers"] == ""
    servers = "127.0.0.1:7000,localhost:7001"
    pool.set_remote(servers, prefix="kv:", ttl_s=3600, tier=7)
    want = {"servers": servers, "prefix": "kv:", "ttl_s": 3600, "queue_mib": 64,
            "timeout_ms": 1000, "tier": 7}
    assert pool.remote() == want
    with marukv.Pool(pooldir) as other, marukv.Pool(pooldir, readonly=True) as ro:
        assert other.remote() == want and ro.remote() == want
        assert other.stat()["remote_servers"] == servers
        other.set_remote("h:1", queue_mib=8, timeout_ms=250)
    assert pool.remote() == {"servers": "h:1", "prefix": "", "ttl_s": 0, "queue_mib": 8,
                             "timeout_ms": 250, "tier": 0}
    pool.set_remote("")
    assert pool.remote() == OFF and pool.stat()["remote_servers"] == ""
    # The longest strings, counted in UTF-8 bytes.
    longest = "h" * (255 - len(":6379")) + ":6379"
    pool.set_remote(longest, prefix="\u00e9" * 31 + "p")
    assert pool.remote()["servers"] == longest and pool.remote()["prefix"] == "\u00e9" * 31 + "p"
    pool.set_remote(None)
    assert pool.remote() == OFF


def test_remote_bad_settings_are_invalid(pool):
    pool.set_remote("h:1", prefix="p:")
    bad = [dict(servers=s) for s in ("host", "host:0", "host:65536", "x" * 300, "a:1,",
                                     "a:1\0b:2", ",".join(["h:%d" % i for i in range(1, 18)]))]
    bad += [dict(servers="h:1", prefix="p" * 64), dict(servers="h:1", prefix="\u00e9" * 32),
            dict(servers="h:1", prefix="a\0b"), dict(servers="h:1", tier=256),
            dict(servers="h:1", timeout_ms=60001), dict(servers="h:1", queue_mib=65537)]
    for kw in bad:
        with pytest.raises(marukv.InvalidArgument) as e:
            pool.set_remote(kw.pop("servers"), **kw)
        assert isinstance(e.value, ValueError) and e.value.code == marukv.E_INVAL
        assert e.value.message
    assert pool.remote()["servers"] == "h:1" and pool.remote()["prefix"] == "p:"


def test_fetch_without_a_tier(pool):
    """Without a tier, fetch() is a lookup: None if the key is in the pool,
    NotFound if not; nothing asks a tier."""
    with pytest.raises(marukv.NotFound) as e:
        pool.fetch(b"absent")
    assert isinstance(e.value, KeyError) and e.value.code == marukv.E_NOTFOUND
    pool.put(b"k", b"v")
    assert pool.fetch(b"k") is None
    assert pool.fetch(bytearray(b"k")) is None
    with pytest.raises(marukv.InvalidArgument):
        pool.fetch(b"")
    assert pool.stat()["remote_fetches"] == 0


def test_fetch_from_an_unreachable_tier(pool):
    """A tier where nothing listens: fetch() of a key in the pool does not
    ask it; of a missing key raises RemoteFailed quickly, counted, and the
    pool goes on."""
    port = closed_port()
    pool.set_remote("127.0.0.1:%d" % port, timeout_ms=200)
    pool.put(b"here", b"v")
    assert pool.fetch(b"here") is None
    assert pool.stat()["remote_fetches"] == 0
    t = time.monotonic()
    with pytest.raises(marukv.RemoteFailed) as e:
        pool.fetch(b"absent")
    assert time.monotonic() - t < 2
    assert e.value.code == marukv.E_REMOTE and str(port) in e.value.message
    assert not pool.exists(b"absent")
    st = pool.stat()
    assert (st["remote_fetches"], st["remote_fetch_errors"]) == (1, 1)
    assert (st["remote_fetch_hits"], st["remote_fetch_misses"]) == (0, 0)
    pool.put(b"absent", b"w")
    assert bytes(pool.get(b"absent")) == b"w"
    assert pool.verify()["problems"] == 0


def test_fetch_releases_the_gil(pool):
    """A node that takes the connection (in its listen backlog) and never
    answers: fetch() waits out the tier's timeout with the GIL released.
    With a long switch interval, the main thread's ticks advance only while
    the fetching thread has released it."""
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        pool.set_remote("127.0.0.1:%d" % mute.getsockname()[1], timeout_ms=300)
        result, ticks = ticks_during(lambda: pytest.raises(marukv.RemoteFailed, pool.fetch, b"k"),
                                     10)
    assert result, "the fetch did not raise RemoteFailed within 10 s"
    assert 0.25 <= result[0] < 2, "the fetch took %.3f s" % result[0]
    assert ticks >= 20, "%d ticks in the %.3f s the fetch took" % (ticks, result[0])


def test_evicted_values_spill_and_fetch_back(pool, cluster):
    """Evicted values spill as frames to the tier (a real one-node cluster)
    and fetch() publishes them again; a frame damaged in Redis is refused
    with the BadFrame subclass of its fault, and nothing is published."""
    pool.set_remote(cluster.servers, prefix="t:", ttl_s=60, tier=7)
    values = {b"k%d" % i: pattern(i, 100 + 1000 * i) for i in range(5)}
    for k, v in values.items():
        pool.put(k, v)
    assert pool.evict(100)["keys"] == 5
    deadline = time.monotonic() + 30
    while pool.stat()["remote_spills"] < 5:
        assert time.monotonic() < deadline, pool.stat()
        time.sleep(0.01)
    st = pool.stat()
    assert st["remote_spill_bytes"] == sum(map(len, values.values()))
    assert (st["remote_drops"], st["remote_spill_errors"]) == (0, 0)
    # a Redis key is the prefix, a NUL, the key (marukv(7), REMOTE TIER)
    assert cluster.keys() == {b"t:\0" + k for k in values}
    frame = cluster.get(b"t:\0k1")
    assert frame[:4] == b"MRDN" and frame[12] == 7
    assert not pool.exists(b"k0")
    assert pool.fetch(b"k0") is None
    assert bytes(pool.get(b"k0")) == values[b"k0"]
    with pytest.raises(marukv.NotFound):
        pool.fetch(b"never")
    damaged = {
        marukv.FrameMagic: b"not a frame" * 4,
        marukv.FrameVersion: frame[:4] + b"\x02" + frame[5:],
        marukv.FrameShort: frame[:40],
        marukv.FrameChecksum: frame[:-1] + bytes([frame[-1] ^ 1]),
        marukv.FrameBody: cluster.get(b"t:\0k3"),      # the frame of another key
    }
    for cls, data in damaged.items():
        cluster.set(b"t:\0k1", data)
        with pytest.raises(cls) as e:
            pool.fetch(b"k1")
        assert isinstance(e.value, marukv.BadFrame) and e.value.code == getattr(
            marukv, "E_FRAME_" + cls.__name__[5:].upper())
        assert not pool.exists(b"k1")
    cluster.set(b"t:\0k1", frame)
    pool.fetch(b"k1")
    assert bytes(pool.get(b"k1")) == values[b"k1"]
    st = pool.stat()
    assert (st["remote_fetches"], st["remote_fetch_hits"]) == (8, 2)
    assert (st["remote_fetch_misses"], st["remote_fetch_errors"]) == (1, 5)
    assert pool.verify(deep=True)["problems"] == 0


# The documented example


def test_readme_example(pooldir, monkeypatch, capsys):
    """The README's Python example runs as printed, twice (write-once), and
    marukv-python(7) prints the same."""
    top = os.environ.get("MARUKV_TOP_SRCDIR", ".")
    with open(os.path.join(top, "README")) as f:
        code = f.read().split("```python\n", 1)[1].split("```", 1)[0]
    with open(os.path.join(top, "man", "marukv-python.7.in")) as f:
        man = f.read().split(".SH EXAMPLE\n.EX\n", 1)[1].split(".EE\n", 1)[0]
    assert man.replace("\\-", "-").replace("\\e", "\\") == code
    monkeypatch.setenv("MARUKV_POOL", pooldir)
    for _ in range(2):
        exec(compile(code, "README", "exec"), {})
        out = capsys.readouterr().out
        assert out.startswith("[1.5 1.5 1.5 1.5]") and out.rstrip().endswith(" 1"), out


def test_address_gives_an_array_that_exports_nothing(pool):
    """Buffer.address and View.address: an array made from the address does
    not keep the buffer or view exported, so publish() and release() go
    ahead (its user must stop using it first); consumed or released, the
    address is refused."""
    b = pool.alloc(2 * PAGE)
    a = (ctypes.c_char * len(b)).from_address(b.address)
    a[:5] = b"hello"
    pool.publish(b"addr", b)
    with pytest.raises(ValueError):
        b.address
    v = pool.get(b"addr")
    r = (ctypes.c_char * len(v)).from_address(v.address)
    assert r[:5] == b"hello" and bytes(v)[:5] == b"hello"
    del r
    v.release()
    with pytest.raises(ValueError):
        v.address
