# SPDX-License-Identifier: MIT
"""marukv.lmcache: a marukv pool as LMCache's L2 storage.

LMCache's multi-process server loads external storage through its
"native_plugin" L2 adapter (lmcache/v1/distributed/l2_adapters/
native_plugin_l2_adapter.py): it imports module_path, builds
class_name(**adapter_params) and wraps the object in a
NativeConnectorL2Adapter (native_connector_l2_adapter.py), which drives it
as it drives LMCache's own C++ connectors (csrc/storage_backends/
connector_interface.h).  Connector is such an object over a marukv.Pool:

    lmcache server --l1-size-gb 20 --l2-adapter '{"type": "native_plugin",
        "module_path": "marukv.lmcache", "class_name": "Connector",
        "adapter_params": {"path": "/dev/shm/kvcache", "create": true,
                           "data_size": 34359738368}}'

adapter_params are Connector's keyword arguments: path (the pool; None
means $MARUKV_POOL, else /dev/shm/marukv, as in C), workers (threads, 4 by
default) and any keyword of marukv.Pool (create, readonly, verify,
nochecksum, data_size, page_size, watermarks as a [low, high] list, ...).
Every LMCache server on the host (or on the CXL fabric) names the same
pool and sees what the others stored.

The calls, as the adapter makes them:

  event_fd()                       the eventfd that becomes readable when
                                   completions wait; -1 once closed
  submit_batch_set(keys, bufs)     \\
  submit_batch_get(keys, bufs)      > queue a batch, return its future id
  submit_batch_exists(keys)         > (an int from 1); never block, never
  submit_batch_delete(keys)        /  copy: the work runs on the workers
  drain_completions()              [(future_id, ok, error, [bool per key])]
  close()                          stop; idempotent

keys are LMCache's strings, bufs ctypes-backed memoryviews (format '<B')
over LMCache's L1 memory, one per key.

Keys.  The adapter names an object
model_name@kv_rank@object_group_id@chunk_hash[@cache_salt] (kv_rank as 8
hex digits, packing world size and worker rank; the group id and the
chunk hash in hex; the salt only when one is set: _object_key_to_string()
in the adapter).  The marukv key is that string's UTF-8 bytes, unchanged,
so marukv-stat and other pool users see LMCache's names; a key longer than
marukv.KEY_MAX (510) bytes fails, alone in its batch.

Chains.  LMCache's chunk hashes are chained over the prompt's prefix, but
the adapter hands over keys only: nothing in a key or a batch names the
chunk before it, and a batch need not start at a prompt's first chunk.
Every chunk is therefore published without a parent, a chain of one, and
marukv's own eviction takes the least recently read chunks one by one
rather than chains tail first.  LMCache does its own prefix bookkeeping
(it looks chunks up with submit_batch_exists and loads the leading ones),
and its L2 eviction, when the adapter's JSON has an "eviction" block,
deletes through submit_batch_delete.

What each call does, per key, and what the completion says:

  set     stores the buffer's bytes with Pool.put: one copy straight from
          the buffer into the pool, hashed as it is read (GIL released),
          then published.  A key that exists already is a success (marukv
          values are write-once, and identical keys hold identical chunks).
  get     copies the value straight from the pool into the buffer (one
          copy, GIL released) if the key exists and the value is exactly as
          long as the buffer; otherwise a miss (False), the buffer
          untouched.
  exists  True if the key is published.
  delete  True if this call deleted it, False if it was not there: of
          several processes deleting one key, exactly one sees True.

The bool list has one entry per key, in key order, for every operation.
ok is False when some key failed with an error, as opposed to a miss or a
key not found: for a set, every key not stored is an error.  error then
names the first failed key (in key order), its error and how many more
keys failed; it is "" when ok.  The
adapter takes a load's hits from the list whatever ok says, and counts a
store or a lookup as a whole only when ok.  Nothing is raised into the
adapter's completion thread: drain_completions() does not raise, and
every completion is a well-formed 4-tuple.

Order.  Operations on one key run in the order they were submitted, across
batches and within one (a get submitted after a set of the same key sees
the value); operations on different keys run in any order, several at
once, and batches complete in any order.

Completions.  A worker that finishes a batch's last key appends its
completion and then writes the eventfd, once per batch, both under the
connector's lock; drain_completions() reads the eventfd (resetting it)
and takes the queue under the same lock, so a completion is never taken
without its signal or the other way round, and a reader that polls the
eventfd and drains, as the adapter does, misses none.  A batch of no keys
completes at once, ok, with an empty list.

Buffers.  The connector keeps the caller's memoryviews until their batch
completes and touches them only until then; the caller must keep them
alive until it has drained the completion (LMCache does).  Submitting
checks only the argument types and counts (TypeError, ValueError): a
buffer that is not a suitable C-contiguous buffer fails its key.

Closing.  close() stops the workers, each after the key it is working on,
waits for them, drops queued work and undrained completions, closes the
eventfd and the pool; it does not wait for anyone to drain.  Closing again
does nothing.  Afterwards submit_* raise ValueError, drain_completions()
returns [] and event_fd() -1.  A Connector does not cross fork(): build
one in each process (LMCache's server builds its own).
"""

import collections
import os
import threading

import marukv

__all__ = ["Connector"]


class _Batch:
    """A submitted batch: its keys (bytes), the caller's buffers until it
    completes, and the per-key results."""

    __slots__ = ("fid", "op", "keys", "bufs", "results", "left", "failed", "error", "error_at")

    def __init__(self, fid, op, keys, bufs):
        self.fid = fid
        self.op = op
        self.keys = keys
        self.bufs = bufs
        self.results = [False] * len(keys)
        self.left = len(keys)
        self.failed = 0             # keys that failed with an error
        self.error = ""             # the error of the first of them, in key order
        self.error_at = len(keys)   # and its index

    def completion(self):
        error = self.error
        if self.failed > 1:
            error += " (and %d more keys failed)" % (self.failed - 1)
        return (self.fid, self.failed == 0, error, self.results)


def _nbytes(buf):
    with memoryview(buf) as m:
        return m.nbytes


class Connector:
    """A marukv pool as an LMCache native-plugin L2 connector (see the
    module's documentation, help(marukv.lmcache)).

    Connector(*, path=None, workers=4, **pool_options) opens the pool at
    path with marukv.Pool(path, **pool_options) (a watermarks list from
    JSON is taken as the (low, high) pair) and starts workers threads.
    Raises what marukv.Pool raises, ValueError for workers < 1, OSError if
    the eventfd cannot be made.
    """

    def __init__(self, *, path=None, workers=4, **pool_options):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError("workers must be an int of at least 1, not %r" % (workers,))
        if isinstance(pool_options.get("watermarks"), list):
            pool_options["watermarks"] = tuple(pool_options["watermarks"])
        self._pool = marukv.Pool(path, **pool_options)
        self._mu = threading.Condition(threading.Lock())
        self._ready = collections.deque()   # (batch, index) a worker may start
        self._queued = {}       # key -> deque of (batch, index) behind the ready or running one
        self._done = []         # completions not drained yet
        self._next_fid = 1
        self._closed = False
        self._threads = []
        try:
            self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except OSError:
            self._pool.close()
            raise
        try:
            for i in range(workers):
                t = threading.Thread(target=self._work, name="marukv-lmcache-%d" % i,
                                     daemon=True)
                t.start()
                self._threads.append(t)
        except RuntimeError:
            self.close()
            raise

    # The adapter's calls

    def event_fd(self):
        """The eventfd, readable while completions wait; -1 once closed."""
        return self._efd

    def submit_batch_set(self, keys, bufs):
        """Store bufs[i] (a C-contiguous buffer) under keys[i]; a future id."""
        return self._submit(self._set, keys, bufs)

    def submit_batch_get(self, keys, bufs):
        """Copy the value of keys[i] into bufs[i] (writable, exactly its
        size, else a miss); a future id."""
        return self._submit(self._get, keys, bufs)

    def submit_batch_exists(self, keys):
        """Look keys up; a future id."""
        return self._submit(self._exists, keys, None)

    def submit_batch_delete(self, keys):
        """Delete keys; a future id."""
        return self._submit(self._delete, keys, None)

    def drain_completions(self):
        """Reset the eventfd and return every completion not drained yet:
        (future_id, ok, error, [bool per key]) tuples.  [] once closed."""
        with self._mu:
            if self._closed:
                return []
            try:
                os.eventfd_read(self._efd)
            except BlockingIOError:         # no completion since the last drain
                pass
            done, self._done = self._done, []
        return done

    def close(self):
        """Stop the workers (each after its key in progress) and wait for
        them, drop queued work and undrained completions, close the eventfd
        and the pool.  Closing twice does nothing."""
        with self._mu:
            if self._closed:
                return
            self._closed = True
            self._mu.notify_all()
        for t in self._threads:
            t.join()
        with self._mu:
            self._ready.clear()
            self._queued.clear()
            self._done.clear()
        if self._efd >= 0:
            os.close(self._efd)
            self._efd = -1
        self._pool.close()

    # Submission and the workers

    def _submit(self, op, keys, bufs):
        names = []
        for k in keys:
            if not isinstance(k, str):
                raise TypeError("keys must be str, not %.100s" % type(k).__name__)
            names.append(k.encode("utf-8"))
        if bufs is not None:
            bufs = list(bufs)
            if len(bufs) != len(names):
                raise ValueError("%d keys but %d buffers" % (len(names), len(bufs)))
        with self._mu:
            if self._closed:
                raise ValueError("submit on a closed marukv.lmcache.Connector")
            fid = self._next_fid
            self._next_fid += 1
            batch = _Batch(fid, op, names, bufs)
            if not names:
                self._complete(batch)
            for i, key in enumerate(names):
                behind = self._queued.get(key)
                if behind is None:          # nothing on this key: ready now
                    self._queued[key] = collections.deque()
                    self._ready.append((batch, i))
                else:                       # after what is queued on it
                    behind.append((batch, i))
            self._mu.notify(len(names))
        return fid

    def _complete(self, batch):
        """Queue the batch's completion, then signal it.  Under self._mu."""
        batch.bufs = None                   # the caller's buffers are its own again
        self._done.append(batch.completion())
        os.eventfd_write(self._efd, 1)

    def _work(self):
        while True:
            with self._mu:
                while not self._ready and not self._closed:
                    self._mu.wait()
                if self._closed:
                    return
                batch, i = self._ready.popleft()
            key = batch.keys[i]
            try:
                hit, error = batch.op(key, batch.bufs[i] if batch.bufs else None), ""
            except Exception as e:          # reported in the completion, never raised
                hit, error = False, "%s %r: %s: %s" % (batch.op.__name__.lstrip("_"),
                                                        key.decode("utf-8", "replace"),
                                                        type(e).__name__, e)
            with self._mu:
                behind = self._queued[key]
                if behind:                  # the next operation on this key may start
                    self._ready.append(behind.popleft())
                    self._mu.notify()
                else:
                    del self._queued[key]
                batch.results[i] = hit
                if error:
                    batch.failed += 1
                    if i < batch.error_at:
                        batch.error, batch.error_at = error, i
                batch.left -= 1
                if batch.left == 0:
                    self._complete(batch)

    # One key each: True for a hit; a miss is False, an error raises.

    def _set(self, key, src):
        if self._pool.exists(key):          # write-once: stored already
            return True
        try:
            self._pool.put(key, src)
        except marukv.Exists:               # another process stored it meanwhile
            pass
        return True

    def _get(self, key, dst):
        try:
            view = self._pool.get(key)
        except marukv.NotFound:
            return False
        with view:
            if len(view) != _nbytes(dst):   # not the chunk the caller expects
                return False
            view.copy_into(dst)
        return True

    def _exists(self, key, _):
        return self._pool.exists(key)

    def _delete(self, key, _):
        try:
            self._pool.delete(key)
        except marukv.NotFound:
            return False
        return True
