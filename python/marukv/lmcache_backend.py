# SPDX-License-Identifier: MIT
"""marukv.lmcache_backend: LMCache's memory, in a marukv pool.

MarukvBackend is an LMCache storage backend that is also LMCache's
allocator (an AllocatorBackendInterface): the memory objects LMCache
fills from the GPU are pool pages, and those it reads back into the GPU
are zero-copy views of published values.  A store copies once (GPU ->
pool), a retrieve once (pool -> GPU); nothing passes through a CPU buffer
of LMCache's or of marukv's.  It runs inside LMCache's engine, in vLLM's
process (LMCache's in-process mode); for LMCache's multi-process server,
use marukv.lmcache (the native plugin), which copies.

Written from LMCache's source (github.com/LMCache/LMCache), the newest
version of each file found: lmcache/v1/storage_backend/abstract_backend.py
(the interface), storage_manager.py at 000620e (_get_allocator_backend,
batched_put, batched_get, batched_contains, batched_unpin, the
asynchronous prefetch), storage_backend/__init__.py (storage_plugin_launcher:
the keyword arguments), maru_backend.py at 0557ad5 (Maru's own
backend), lmcache/v1/memory_management.py (TensorMemoryObj's lock and
counts) and lmcache/utils.py at 0353be8 (CacheEngineKey.to_string).

Configuration (LMCache's YAML or LMCACHE_* settings):

    chunk_size: 256
    local_cpu: false
    max_local_cpu_size: 0
    storage_plugins: ["MaruBackend"]
    extra_config:
      storage_plugin.MaruBackend.module_path: marukv.lmcache_backend
      storage_plugin.MaruBackend.class_name: MarukvBackend
      marukv.pool: /dev/shm/kvcache

and maru_path unset.  LMCache chooses its allocator backend by name
(StorageManager._get_allocator_backend): PDBackend, else MaruBackend when
no LocalCPUBackend exists, else LocalCPUBackend.  A plugin under any
other name is never the allocator, so this one must be registered under
the name "MaruBackend", with no local CPU backend (max_local_cpu_size: 0)
and no native Maru backend (maru_path unset) to take the name.  That is a
dependency on LMCache's selection by name, not an interface of LMCache's:
if LMCache changes it, the backend still works, with one more copy per
store.  The backend says so in LMCache's log (an error) when it sees it
is not the allocator: at start-up if a local CPU backend exists, if it is
registered under another name or if maru_path is set, and at its first
store if the objects it is given are not its own.

extra_config keys:
  marukv.pool        the pool's path (required)
  marukv.create      create the pool if it is not there (default false)
  marukv.data_size   its data arena when created, in bytes
  marukv.checksum    record each chunk's checksum (default true)
  marukv.put_threads threads that publish stores (default 2)
  marukv.cuda_register_piece
                     on a GPU, the size of each piece of the pool's data
                     arena registered with CUDA, a multiple of 4096
                     (default 1 GiB)

On a GPU (dst_device "cuda:N"), the backend registers its mapping of the
pool's data arena with CUDA (cudaHostRegister, in pieces), so LMCache's
copies between the GPU and its memory objects are DMA to and from pool
pages.  LMCache makes those copies itself, a chunk at a time; a chunk
that straddles two pieces is not split (at most one chunk per piece
boundary, a GiB apart by default).

Objects.  allocate() returns a TensorMemoryObj over the pages of a
marukv Buffer; batched_submit_put_task() takes a reference to each (LMCache
drops its own when the submit returns) and publishes the batch on a
thread of the backend's as a chain, each chunk the child of the one
before, so eviction takes a prompt's chunks tail first; a key published
already counts as stored.  The callback is called once per key stored.
get_blocking(), batched_get_blocking() and batched_get_non_blocking()
return a TensorMemoryObj over a View of the value, holding one reference
for the caller.  A failure of the pool's in a lookup, a retrieve or a
remove is logged and answered as a miss, which LMCache recomputes.  The tensors are made from the Buffer's or View's address
(Buffer.address, View.address), so they export nothing: publish() and
release() are never refused because LMCache still holds a tensor.  The
rule that keeps that safe is LMCache's own: nothing uses an object's
tensor once its reference and pin counts are 0.  Then LMCache calls the
allocator's free() (holding the object's lock), which ends the object:
it invalidates it, drops its tensor, then releases the View or aborts a
Buffer never published.  free() reads only what the lock allows (meta,
validity), is idempotent, and never waits for anything.

Pins.  contains(key, pin=True) and batched_contains(keys, pin=True) hold
the keys they find in the pool (Pool.hold(): eviction passes them over)
and count them in the backend's table (pins nest: a key pinned twice is
unpinned twice); unpin(key) undoes one.  A pin is never a held view: a
view holds back the reuse of pages for the whole pool, a hold nothing
but its own key.  A pin LMCache never releases expires after
config.pin_timeout_sec; closing the backend, or the process's end, drops
them all.

The scheduler process (metadata.role "scheduler") allocates nothing and
opens the pool read-only, when first asked.
"""

import asyncio
import ctypes
import functools
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch

import marukv
from marukv import _cuda
from lmcache.logging import init_logger
from lmcache.v1.memory_management import (MemoryAllocatorInterface, MemoryFormat,
                                          MemoryObjMetadata, TensorMemoryObj)
from lmcache.v1.storage_backend.abstract_backend import AllocatorBackendInterface

logger = init_logger(__name__)

#: The name LMCache must know the backend by to make it its allocator.
NAME = "MaruBackend"


def _tensor_at(address, n):
    """A uint8 tensor over n bytes at address that exports no Buffer or View."""
    return torch.frombuffer((ctypes.c_uint8 * n).from_address(address), dtype=torch.uint8)


def _as_lists(shapes, dtypes):
    shapes = [shapes] if isinstance(shapes, torch.Size) else list(shapes)
    dtypes = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes] * len(shapes)
    return [torch.Size(s) for s in shapes], dtypes


@functools.lru_cache(maxsize=None)
def _itemsize(dtype):
    """dtype.itemsize, which torch before 2.1 lacks."""
    return torch.empty((), dtype=dtype).element_size()


def _nbytes(shapes, dtypes):
    return sum(s.numel() * _itemsize(d) for s, d in zip(shapes, dtypes))


def _miss(what, error, value):
    """A failure of the pool's, logged, answered as LMCache takes a miss:
    it recomputes what it cannot find."""
    logger.warning("MarukvBackend: %s failed: %s", what, error)
    return value


class _Allocator(MemoryAllocatorInterface):
    """The parent_allocator of the backend's memory objects."""

    def __init__(self, backend):
        self._backend = backend

    def allocate(self, shapes, dtypes, fmt=MemoryFormat.UNDEFINED, allocator_type=None):
        return self._backend.allocate(shapes, dtypes, fmt)

    def batched_allocate(self, shapes, dtypes, batch_size, fmt=MemoryFormat.UNDEFINED,
                         allocator_type=None):
        return self._backend.batched_allocate(shapes, dtypes, batch_size, fmt)

    def free(self, memory_obj, allocator_type=None):
        self._backend._free(memory_obj)


class MarukvBackend(AllocatorBackendInterface):
    """LMCache's allocator and storage backend over a marukv pool (see the module's help)."""

    def __init__(self, config, metadata, loop=None, dst_device="cuda", local_cpu_backend=None):
        super().__init__(dst_device=dst_device)
        self.config, self.metadata, self.loop = config, metadata, loop
        self._path = config.get_extra_config_value("marukv.pool", None)
        if not self._path:
            raise ValueError("MarukvBackend: extra_config has no \"marukv.pool\"")
        self._create = bool(config.get_extra_config_value("marukv.create", False))
        self._data_size = config.get_extra_config_value("marukv.data_size", None)
        self._checksum = bool(config.get_extra_config_value("marukv.checksum", True))
        self._piece = _cuda.check_piece(
            config.get_extra_config_value("marukv.cuda_register_piece", _cuda.PIECE),
            "MarukvBackend")
        self._registration = None
        threads = int(config.get_extra_config_value("marukv.put_threads", 2))
        if threads < 1:
            raise ValueError("MarukvBackend: marukv.put_threads must be at least 1")
        self._scheduler = getattr(metadata, "role", None) == "scheduler"
        self._fmt = MemoryFormat.KV_MLA_FMT if getattr(metadata, "use_mla", False) \
            else MemoryFormat.KV_2LTD
        self._full = _nbytes(*_as_lists(metadata.get_shapes(), metadata.get_dtypes()))
        self._token_bytes = self._full // metadata.chunk_size
        self._lock = threading.Lock()
        self._pool = None
        self._puts = set()              # keys being stored
        self._pins = {}                 # key string -> [count, deadline]
        self._pin_timeout = float(getattr(config, "pin_timeout_sec", 300))
        self._swept = time.monotonic()
        self._closed = False
        self._foreign_seen = False
        self._allocator = self.initialize_allocator(config, metadata)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="marukv-put")
        self._check_selection(config, local_cpu_backend)

    def __str__(self):
        return self.__class__.__name__

    # ---- start-up ----

    def _check_selection(self, config, local_cpu_backend):
        """Say loudly why LMCache will not make this backend its allocator."""
        if self._scheduler:
            return
        why = []
        if local_cpu_backend is not None:
            why.append("a LocalCPUBackend exists (max_local_cpu_size > 0), and LMCache "
                       "prefers it")
        if NAME not in (config.storage_plugins or []):
            why.append("it is not registered under the name %s (storage_plugins: %r)"
                       % (NAME, config.storage_plugins))
        if getattr(config, "maru_path", None):
            why.append("maru_path is set, so LMCache's own MaruBackend takes the name")
        if why:
            logger.error("MarukvBackend will not be LMCache's allocator: %s.  Every store is "
                         "then copied once more into the pool, and zero-copy is lost; set "
                         "max_local_cpu_size: 0, storage_plugins: [\"%s\"] and no maru_path "
                         "(see help(marukv.lmcache_backend))", "; ".join(why), NAME)

    def initialize_allocator(self, config, metadata):
        return _Allocator(self)

    def get_memory_allocator(self):
        return self._allocator

    def get_allocator_backend(self):
        return self

    @property
    def has_external_pin_state(self):
        """True: the pins are the backend's (LMCache's newer cleanup asks)."""
        return True

    def _open(self):
        """The pool, opened when first needed: read-only in the scheduler."""
        with self._lock:
            if self._closed:
                raise ValueError("MarukvBackend is closed")
            if self._pool is None:
                opts = {}
                if self._create and not self._scheduler:
                    opts["create"] = True
                    if self._data_size:
                        opts["data_size"] = int(self._data_size)
                pool = marukv.Pool(self._path, readonly=self._scheduler,
                                   nochecksum=not self._checksum, **opts)
                if str(self.dst_device).startswith("cuda") and not self._scheduler:
                    try:
                        self._registration = _cuda.Registration(
                            *pool.data_mapping(), self._piece, False, "MarukvBackend")
                    except RuntimeError:
                        pool.close()
                        raise
                self._pool = pool
            return self._pool

    # ---- memory objects ----

    def _obj(self, held, size, shapes, dtypes, fmt):
        """A memory object over held's pages (a Buffer or a View), one reference."""
        meta = MemoryObjMetadata(shapes[0], dtypes[0], held.address, size, 1, 0, fmt,
                                 shapes=shapes, dtypes=dtypes)
        obj = TensorMemoryObj(_tensor_at(held.address, size), meta, self._allocator)
        obj.marukv_held = held
        return obj

    def _free(self, obj):
        """The allocator's free, with obj.lock held: end the object's use of the
        pool.  Reads only obj.meta and its validity; never waits."""
        if not obj.is_valid():
            return
        obj.invalidate()
        held = getattr(obj, "marukv_held", None)
        obj.marukv_held = None
        obj.raw_data = torch.empty(0, dtype=torch.uint8)
        if held is None:
            return
        pool = self._pool
        try:
            if isinstance(held, marukv.View):
                held.release()
            elif pool is not None and not held.consumed:
                pool.abort(held)
        except (marukv.Error, ValueError):
            pass            # the pool is closed: its views and buffers went with it

    def allocate(self, shapes, dtypes, fmt=None, eviction=True, busy_loop=True):
        """Pool pages for one chunk, or None when the pool has none to give
        (the pool evicts cold values itself before saying so)."""
        if self._scheduler:
            return None
        shapes, dtypes = _as_lists(shapes, dtypes)
        size = _nbytes(shapes, dtypes)
        try:
            buf = self._open().alloc(size)
        except (marukv.Error, ValueError) as e:
            if not isinstance(e, marukv.NoSpace):
                logger.warning("MarukvBackend: allocation of %d bytes failed: %s", size, e)
            return None
        return self._obj(buf, size, shapes, dtypes,
                         fmt if fmt not in (None, MemoryFormat.UNDEFINED) else self._fmt)

    def batched_allocate(self, shapes, dtypes, batch_size, fmt=None, eviction=True,
                         busy_loop=True):
        """batch_size chunks, all or none."""
        objs = []
        for _ in range(batch_size):
            obj = self.allocate(shapes, dtypes, fmt, eviction, busy_loop)
            if obj is None:
                for o in objs:
                    o.ref_count_down()
                return None
            objs.append(obj)
        return objs

    # ---- stores ----

    def exists_in_put_tasks(self, key):
        with self._lock:
            return key in self._puts

    def batched_submit_put_task(self, keys, objs, transfer_spec=None,
                                on_complete_callback=None):
        """Publish the chunks on a thread of the backend's; returns its Future."""
        keys, objs = list(keys), list(objs)
        if not keys:
            return None
        for obj in objs:
            obj.ref_count_up()          # LMCache drops its own when this returns
        with self._lock:
            self._puts.update(keys)
        try:
            return [self._executor.submit(self._put, keys, objs, on_complete_callback)]
        except RuntimeError:            # closed: nothing is stored, nothing kept
            with self._lock:
                self._puts.difference_update(keys)
            for obj in objs:
                obj.ref_count_down()
            return None

    def _put(self, keys, objs, callback):
        stored, parent = [], None
        try:
            pool = self._open()
            tickets = []
            for key, obj in zip(keys, objs):
                name = key.to_string().encode()
                held = getattr(obj, "marukv_held", None)
                if obj.parent_allocator is not self._allocator or held is None:
                    held = self._copy_in(pool, obj)
                try:
                    tickets.append((key, pool.publish_async(name, held, parent=parent)))
                except marukv.Error as e:
                    logger.warning("MarukvBackend: store of %s failed: %s", name, e)
                    break
                parent = name
            for key, ticket in tickets:
                try:
                    pool.wait(ticket)
                except marukv.Exists:
                    pass        # stored already: values are write-once, keys content hashes
                except marukv.Error as e:
                    logger.warning("MarukvBackend: store of %s failed: %s", key.to_string(), e)
                    continue
                stored.append(key)
        except Exception as e:  # a store that fails leaves the chunk uncached, nothing more
            logger.warning("MarukvBackend: store failed: %s", e)
        finally:
            with self._lock:
                self._puts.difference_update(keys)
            for obj in objs:
                obj.ref_count_down()
        for key in stored:
            if callback is not None:
                try:
                    callback(key)
                except Exception as e:
                    logger.warning("MarukvBackend: store callback failed: %s", e)
        return len(stored)

    def _copy_in(self, pool, obj):
        """A Buffer holding a foreign object's bytes: the copy zero-copy would spare."""
        if not self._foreign_seen:
            self._foreign_seen = True
            logger.error("MarukvBackend is not LMCache's allocator: it is given memory "
                         "objects of another allocator and copies each into the pool.  "
                         "See help(marukv.lmcache_backend) for the configuration.")
        src = obj.tensor.reshape(-1).view(torch.uint8)
        buf = pool.alloc(src.numel())
        _tensor_at(buf.address, src.numel()).copy_(src)
        return buf

    # ---- retrieves ----

    def _view_obj(self, view):
        """A memory object over a View of a stored chunk (None, the view
        released, if its length is no whole number of tokens)."""
        size = len(view)
        if size == 0 or size > self._full or size % self._token_bytes:
            view.release()
            return None
        shapes, dtypes = _as_lists(self.metadata.get_shapes(size // self._token_bytes),
                                   self.metadata.get_dtypes())
        return self._obj(view, size, shapes, dtypes, self._fmt)

    def get_blocking(self, key):
        try:
            view = self._open().get(key.to_string().encode())
        except marukv.NotFound:
            return None
        except marukv.Error as e:
            return _miss("get", e, None)
        return self._view_obj(view)

    def batched_get_blocking(self, keys):
        try:
            views = self._open().get_batch([k.to_string().encode() for k in keys])
        except marukv.Error as e:
            return _miss("get", e, [None] * len(keys))
        return [None if v is None else self._view_obj(v) for v in views]

    async def batched_get_non_blocking(self, lookup_id, keys, transfer_spec=None):
        """The leading chunks found, as LMCache's prefetch takes them."""
        objs = await asyncio.to_thread(self.batched_get_blocking, keys)
        out = []
        for obj in objs:
            if obj is None:
                break
            out.append(obj)
        for obj in objs[len(out):]:
            if obj is not None:
                obj.ref_count_down()
        return out

    # ---- lookups and pins ----

    def _expire(self, now):
        """Drop pins older than LMCache's pin timeout (at most once a second;
        self._lock held)."""
        if now - self._swept < 1.0:
            return
        self._swept = now
        for name in [n for n, (_, deadline) in self._pins.items() if deadline <= now]:
            count, _ = self._pins.pop(name)
            self._unhold([name] * count)

    def _unhold(self, names):
        try:
            if self._pool is not None:
                self._pool.unhold(names)
        except marukv.Error as e:
            _miss("unpin", e, None)

    def _lookup(self, names, pin):
        """How many leading names are stored; with pin, held in the pool and
        counted in the table."""
        try:
            pool = self._open()
            if not pin:
                return pool.prefix_len(names)
            hit = pool.hold(names)
        except marukv.Error as e:
            return _miss("lookup", e, 0)
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            if self._closed:
                return hit
            for name in names[:hit]:
                entry = self._pins.setdefault(name, [0, 0.0])
                entry[0] += 1
                entry[1] = now + self._pin_timeout
        return hit

    def contains(self, key, pin=False):
        return self._lookup([key.to_string().encode()], pin) == 1

    def batched_contains(self, keys, pin=False):
        """How many leading keys are stored; with pin, those are pinned."""
        return self._lookup([k.to_string().encode() for k in keys], pin)

    async def batched_async_contains(self, lookup_id, keys, pin=False):
        return await asyncio.to_thread(self.batched_contains, keys, pin)

    def pin(self, key):
        return self.contains(key, pin=True)

    def unpin(self, key):
        name = key.to_string().encode()
        with self._lock:
            self._expire(time.monotonic())
            entry = self._pins.get(name)
            if entry is None:
                return False
            entry[0] -= 1
            if entry[0] == 0:
                del self._pins[name]
            self._unhold([name])
        return True

    def pinned(self):
        """{key string: pin count} of the keys pinned now."""
        with self._lock:
            self._expire(time.monotonic())
            return {n: c for n, (c, _) in self._pins.items()}

    # ---- the rest ----

    def remove(self, key, force=True):
        try:
            self._open().delete(key.to_string().encode())
        except marukv.NotFound:
            return False
        except marukv.Error as e:
            return _miss("remove", e, False)
        return True

    def close(self):
        """Wait for the stores under way, then close the pool; idempotent.
        LMCache closes its backends once it holds no memory object of
        theirs; an object still held after close() must not be used."""
        self._executor.shutdown(wait=True)
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            self._pins.clear()
        if self._registration is not None:
            self._registration.close()
            self._registration = None
        if pool is not None:
            pool.close()
