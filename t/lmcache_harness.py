# SPDX-License-Identifier: MIT
"""Drives a marukv.lmcache.Connector the way LMCache does (t/test_lmcache.py).

LMCache is not in Debian, so these tests cannot load it; instead Driver
repeats what LMCache's NativeConnectorL2Adapter
(lmcache/v1/distributed/l2_adapters/native_connector_l2_adapter.py) does
with a native connector, step by step, and records every departure from
what the adapter can digest as a problem rather than crashing on it as the
adapter would.  Buffers are made as LMCache's TensorMemoryObj.byte_array
makes them (lmcache/v1/memory_management.py): a ctypes array of c_ubyte
laid over an address of LMCache's L1 memory, wrapped in a memoryview, whose
format is '<B'.  Here the L1 memory is a ctypes array rather than a torch
tensor, which makes no difference to the memoryview and spares each
process a torch import.

Every wait has a timeout: a connector that loses a completion makes a test
fail with TimeoutError, never hang.
"""

import ctypes
import hashlib
import os
import select
import threading
import time
import traceback

import marukv
from marukv.lmcache import Connector

# The adapter's demux thread polls the connector's eventfd with this
# timeout (NativeConnectorL2Adapter._demux_loop: poller.poll(500)).
POLL_MS = 500
TIMEOUT = 30.0


class Driver:
    """A connector driven as NativeConnectorL2Adapter drives its native client."""

    def __init__(self, connector):
        self.client = connector
        # __init__: self._client_fd = int(native_client.event_fd())
        self.fd = int(connector.event_fd())
        # __init__: one lock for all shared state; every submit_batch_* call
        # is made while holding it (submit_store_task and the others), and
        # the demux thread routes completions while holding it.
        self.lock = threading.Lock()
        self.done = threading.Condition(self.lock)
        self.pending = {}           # future id -> (op, number of keys), as _pending_ops
        self.results = {}           # future id -> (ok, error, bools)
        self.problems = []          # what would break or mislead the adapter
        self.submit_seconds = []    # time each submit call took, under the lock
        self.drains = 0
        self.empty_drains = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._demux, name="harness-demux")
        self.thread.start()

    def submit(self, op, keys, bufs=None):
        """submit_store_task / submit_load_task / submit_lookup_and_lock_task
        / delete(): call the client's submit under the lock and register the
        future id before the lock is let go, so the demux thread cannot see
        its completion first."""
        call = getattr(self.client, "submit_batch_" + op)
        with self.lock:
            t = time.perf_counter()
            fid = int(call(keys, bufs) if bufs is not None else call(keys))
            self.submit_seconds.append(time.perf_counter() - t)
            if fid in self.pending or fid in self.results:
                self.problems.append("future id %d given twice" % fid)
            self.pending[fid] = (op, len(keys))
        return fid

    def _demux(self):
        """_demux_loop: poll the eventfd, drain, route each completion."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while not self.stop.is_set():
            if not poller.poll(POLL_MS):
                continue
            try:
                completions = self.client.drain_completions()
            except Exception as e:      # the adapter logs it and polls again
                self.problems.append("drain_completions raised %r" % e)
                continue
            self.drains += 1
            if not completions:
                # The eventfd said readable but nothing came: harmless once,
                # a busy loop if drain does not reset the eventfd.
                self.empty_drains += 1
                continue
            with self.lock:
                for item in completions:
                    self._route(item)
                self.done.notify_all()

    def _route(self, item):
        """Under the lock.  The adapter unpacks each item into four names
        (a ValueError that ends its demux thread otherwise), looks the future
        id up in _pending_ops (a warning and a skip if unknown), and walks the
        bool list with enumerate(), indexing its own key list with each
        position (an IndexError, again fatal, if the list is too long; keys
        left out if too short)."""
        if not isinstance(item, tuple) or len(item) != 4:
            self.problems.append("malformed completion %r" % (item,))
            return
        fid, ok, error, bools = item
        entry = self.pending.pop(int(fid), None)
        if entry is None:
            self.problems.append("completion of unknown future id %r" % (fid,))
            return
        op, nkeys = entry
        if not isinstance(ok, bool) or not isinstance(error, str):
            self.problems.append("completion %r: ok must be a bool, error a str" % (item,))
        if bools is not None and (not isinstance(bools, list) or len(bools) != nkeys or
                                  not all(isinstance(b, bool) for b in bools)):
            self.problems.append("%s completion %r: not one bool per key (%d keys)"
                                 % (op, item, nkeys))
        if ok and error:
            self.problems.append("completion %r: ok with an error" % (item,))
        if not ok and not error:
            self.problems.append("completion %r: failed without an error" % (item,))
        self.results[int(fid)] = (ok, error, bools)

    def wait(self, fid, timeout=TIMEOUT):
        """The completion of fid, (ok, error, bools); TimeoutError if none
        comes (a lost completion)."""
        with self.done:
            if not self.done.wait_for(lambda: fid in self.results, timeout):
                raise TimeoutError("no completion of future %d in %.0f s" % (fid, timeout))
            return self.results.pop(fid)

    def run(self, op, keys, bufs=None, timeout=TIMEOUT):
        return self.wait(self.submit(op, keys, bufs), timeout)

    def close(self):
        """close(): stop the demux thread (join with a timeout), then close
        the client."""
        self.stop.set()
        self.thread.join(timeout=5)
        if self.thread.is_alive():
            self.problems.append("demux thread still running after 5 s")
        self.client.close()


class Arena:
    """LMCache's L1 memory, cut into chunks: chunk i is a memoryview made as
    TensorMemoryObj.byte_array makes one (format '<B')."""

    def __init__(self, nchunks, size):
        self.size = size
        self.mem = (ctypes.c_ubyte * (nchunks * size))()
        base = ctypes.addressof(self.mem)
        kind = ctypes.c_ubyte * size
        self.chunks = [memoryview(kind.from_address(base + i * size)) for i in range(nchunks)]

    def fill(self, i, data):
        self.chunks[i].cast("B")[:] = data      # '<B' refuses slice assignment: cast first

    def data(self, i):
        return bytes(self.chunks[i])


def lmcache_key(model, rank, chunk, group=0, salt=""):
    """A key as NativeConnectorL2Adapter._object_key_to_string writes one:
    model@kv_rank (8 hex digits)@object_group_id (hex)@chunk_hash (hex)
    [@cache_salt].  chunk is hashed into a 32-byte chunk hash."""
    h = hashlib.sha256(b"%d" % chunk if isinstance(chunk, int) else chunk.encode()).hexdigest()
    key = "%s@%08x@%x@%s" % (model, rank, group, h)
    return key + "@" + salt if salt else key


def content(key, size):
    """size bytes that only key gives: a 4 KiB block from the key's hash,
    repeated, so a chunk delivered under the wrong key, shifted or cut short
    shows."""
    seed = hashlib.sha512(key.encode()).digest()
    block = b"".join(hashlib.sha512(seed + bytes([i, j])).digest()
                     for i in range(8) for j in range(8))
    return (block * (size // len(block) + 1))[:size]


def pins_of(pool, pid):
    """The pins of every client slot process pid holds in pool."""
    return [c["pin"] for c in pool.clients() if c["pid"] == pid]


def survivor(pooldir, wid, rounds, size, contested, killed, barrier, conn, options):
    """One process of the multi-process test: rounds of set, exists, get
    (every byte checked) and delete on keys of its own and on keys shared
    with the others, half of them before the event killed is set and half
    after, then a delete of the contested keys at the same time as the
    others.  options are the Connector's.  Sends its report through
    conn; exits 0 if every check held."""
    report = {"wid": wid, "error": None, "checks": 0, "deleted": None, "pins": None,
              "problems": [], "empty_drains": 0, "drains": 0}
    drv = None
    try:
        drv = Driver(Connector(path=pooldir, **options))
        probe = marukv.Pool(pooldir)
        arena = Arena(32, size)
        out = Arena(33, size)
        shared = [lmcache_key("shared", 0, c) for c in range(8)]
        previous = []
        for r in range(rounds):
            if r == rounds // 2 and not killed.wait(TIMEOUT):
                raise TimeoutError("the victim was not killed")
            own = [lmcache_key("w%d" % wid, 0x01000000 | wid, r * 100 + c) for c in range(16)]
            keys = own + shared
            for i, k in enumerate(keys):
                arena.fill(i, content(k, size))
            ok, error, bools = drv.run("set", keys, arena.chunks[:len(keys)])
            assert ok and bools == [True] * len(keys), (error, bools)
            absent = [lmcache_key("absent", wid, r * 10 + c) for c in range(2)]
            ok, error, bools = drv.run("exists", absent[:1] + keys + absent[1:])
            assert ok and bools == [False] + [True] * len(keys) + [False], (error, bools)
            # A get into buffers of the stored size, plus one into a
            # buffer of another size: a miss that leaves it untouched.
            wrong = Arena(1, size // 2)
            wrong.fill(0, b"\xa5" * (size // 2))
            fid = drv.submit("get", keys + [own[0]], out.chunks[:len(keys)] + wrong.chunks)
            ok, error, bools = drv.wait(fid)
            assert ok and bools == [True] * len(keys) + [False], (error, bools)
            for i, k in enumerate(keys):
                assert out.data(i) == content(k, size), "round %d: bytes of %s" % (r, k)
                report["checks"] += 1
            assert wrong.data(0) == b"\xa5" * (size // 2)
            if previous:
                ok, error, bools = drv.run("delete", previous)
                assert ok and bools == [True] * len(previous), (error, bools)
                ok, error, bools = drv.run("exists", previous)
                assert ok and bools == [False] * len(previous), (error, bools)
            previous = own
        # Every survivor deletes the contested keys at once: exactly one
        # of them may see each key deleted (the parent counts).
        barrier.wait(TIMEOUT)
        ok, error, bools = drv.run("delete", contested)
        assert ok, error
        report["deleted"] = bools
        # No view is left pinned once every completion is in.
        report["pins"] = pins_of(probe, os.getpid())
        probe.close()
        report["problems"] = drv.problems
        report["empty_drains"], report["drains"] = drv.empty_drains, drv.drains
    except BaseException:
        report["error"] = traceback.format_exc()
    finally:
        if drv is not None:
            try:
                drv.close()
            except BaseException:
                report["error"] = (report["error"] or "") + traceback.format_exc()
            report["problems"] = drv.problems
    conn.send(report)
    conn.close()
    os._exit(0 if report["error"] is None and not report["problems"] else 1)


def victim(pooldir, size, conn, options):
    """The process killed mid-batch: stores batches of 8 fresh keys as fast
    as it can, deleting 6 of each once stored to stay within the pool, and
    says when its first batch is submitted.  The parent kills it with
    SIGKILL; it never exits on its own."""
    drv = Driver(Connector(path=pooldir, **options))
    arena = Arena(8, size)
    n = 0
    while True:
        keys = [lmcache_key("victim", 7, n * 8 + c) for c in range(8)]
        for i, k in enumerate(keys):
            arena.fill(i, content(k, size))
        fid = drv.submit("set", keys, arena.chunks)
        if n == 0:
            conn.send("submitted")
        drv.wait(fid)
        drv.wait(drv.submit("delete", keys[:6]))
        n += 1
