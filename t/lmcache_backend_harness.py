# SPDX-License-Identifier: MIT
"""Drives marukv.lmcache_backend.MarukvBackend as LMCache's engine does,
for t/test_lmcache_backend.py.  LMCache is not in Debian: t/lmcache_standin
holds the names the backend imports, at LMCache's module paths, and this
file the parts of LMCache that call it, each following LMCache's source
(github.com/LMCache/LMCache; the versions are named in
marukv.lmcache_backend's help):

- StorageManager: the plugin's construction (storage_backend/__init__.py,
  storage_plugin_launcher: the module and class from extra_config, the
  keyword arguments, registration under the plugin's name), the local CPU
  backend's place before it when max_local_cpu_size > 0, the choice of
  the allocator by name (storage_manager.py _get_allocator_backend),
  allocate, batched_put (submit, then one ref_count_down per object),
  batched_get, batched_contains with pins, batched_unpin, remove, close;
- Engine: store (one allocate per chunk, the "GPU" copy into the object's
  tensor, batched_put) and retrieve (lookup with pin=True; batched_get,
  stopping at the first miss; the copy out; unpin if pinned and
  ref_count_down each object; lookup_unpin), as cache_engine.py does, and
  the asynchronous prefetch (storage_manager.py async_lookup_and_prefetch
  and prefetch_all_done_callback) on an event loop of its own thread.

The "GPU" is a CPU tensor here unless device="cuda" (t/gpu_check.py): the
copies in and out are torch copies between it and the memory objects'
tensors, as LMCache's GPU connector makes them.
"""

import asyncio
import importlib
import os
import sys
import threading
from collections import OrderedDict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lmcache_standin"))

from lmcache.utils import CacheEngineKey  # noqa: E402
from lmcache.v1.config import LMCacheEngineConfig  # noqa: E402
from lmcache.v1.memory_management import DOUBLE_FREES, MemoryFormat  # noqa: E402,F401
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402
from lmcache.v1.pin_monitor import PinMonitor  # noqa: E402
from lmcache.v1.storage_backend.abstract_backend import AllocatorBackendInterface  # noqa: E402


def configs(pool, name="MaruBackend", max_local_cpu_size=0, chunk_size=16, layers=2,
            heads=2, head_size=8, dtype=torch.float16, role="worker", worker=(0, 1),
            extra=None, **kw):
    """An LMCacheEngineConfig and LMCacheMetadata with the plugin configured."""
    ec = {"storage_plugin.%s.module_path" % name: "marukv.lmcache_backend",
          "storage_plugin.%s.class_name" % name: "MarukvBackend",
          "marukv.pool": pool}
    ec.update(extra or {})
    config = LMCacheEngineConfig(chunk_size=chunk_size, local_cpu=max_local_cpu_size > 0,
                                 max_local_cpu_size=max_local_cpu_size, extra_config=ec,
                                 storage_plugins=[name], **kw)
    metadata = LMCacheMetadata("model", worker[1], worker[0], dtype,
                               (layers, 2, chunk_size, heads, head_size), role=role,
                               chunk_size=chunk_size)
    return config, metadata


class LocalCPUBackend:
    """Only its place: LMCache builds it first when max_local_cpu_size > 0
    (storage_backend/__init__.py), and then prefers it as the allocator."""

    def close(self):
        pass


AllocatorBackendInterface.register(LocalCPUBackend)


class StorageManager:
    """The parts of lmcache/v1/storage_backend/storage_manager.py that call
    an allocator backend."""

    def __init__(self, config, metadata, dst_device="cpu"):
        self.config, self.metadata = config, metadata
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever,
                                       name="storage-manager-event-loop", daemon=True)
        self.thread.start()
        PinMonitor.GetOrCreate(config)
        self.storage_backends = OrderedDict()
        local_cpu = None
        if metadata.role != "scheduler" and config.max_local_cpu_size > 0:
            local_cpu = self.storage_backends["LocalCPUBackend"] = LocalCPUBackend()
        # storage_plugin_launcher: a set, then module_path/class_name per name
        for name in set(config.storage_plugins or []):
            module_path = config.extra_config.get("storage_plugin.%s.module_path" % name)
            class_name = config.extra_config.get("storage_plugin.%s.class_name" % name)
            cls = getattr(importlib.import_module(module_path), class_name)
            self.storage_backends[name] = cls(
                config=config, dst_device=dst_device, metadata=metadata,
                local_cpu_backend=local_cpu, loop=self.loop)
        self.allocator_backend = None
        if metadata.role != "scheduler":
            self.allocator_backend = self._get_allocator_backend()

    def _get_allocator_backend(self):
        if "MaruBackend" in self.storage_backends:
            if "LocalCPUBackend" in self.storage_backends:
                backend = self.storage_backends["LocalCPUBackend"]
            else:
                backend = self.storage_backends["MaruBackend"]
        else:
            backend = self.storage_backends["LocalCPUBackend"]
        assert isinstance(backend, AllocatorBackendInterface)
        return backend

    def backend(self):
        """The plugin (the one backend that stores anything here)."""
        return next(b for n, b in self.storage_backends.items() if n != "LocalCPUBackend")

    def allocate(self, shapes, dtypes, fmt=None, eviction=True, busy_loop=True):
        return self.allocator_backend.allocate(shapes, dtypes, fmt, eviction=eviction,
                                               busy_loop=busy_loop)

    def batched_put(self, keys, memory_objs, transfer_spec=None):
        futures = self.backend().batched_submit_put_task(keys, memory_objs,
                                                         transfer_spec=transfer_spec)
        for obj in memory_objs:         # L438-440: the manager's references go at once
            obj.ref_count_down()
        return futures

    def batched_get(self, keys):
        return self.backend().batched_get_blocking(keys)

    def batched_contains(self, keys, pin=False):
        return self.backend().batched_contains(keys, pin)

    def batched_unpin(self, keys):
        for key in keys:
            self.backend().unpin(key)

    def remove(self, key):
        return self.backend().remove(key)

    async def async_lookup_and_prefetch(self, lookup_id, keys, pin=True):
        backend = self.backend()
        hit = await backend.batched_async_contains(lookup_id, keys, pin)
        if hit == 0:
            return []
        objs = await backend.batched_get_non_blocking(lookup_id, keys[:hit])
        return list(zip(keys[:hit], objs))

    def close(self):
        for backend in self.storage_backends.values():
            if hasattr(backend, "close") and backend is not None:
                backend.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class Engine:
    """LMCacheEngine's store and retrieve (cache_engine.py) over a StorageManager,
    for one model whose chunks are chunk_size tokens."""

    def __init__(self, pool, device="cpu", **kw):
        self.config, self.metadata = configs(pool, **kw)
        self.device = device
        self.sm = StorageManager(self.config, self.metadata,
                                 "cuda:%d" % torch.cuda.current_device()
                                 if device == "cuda" else "cpu")
        self.lookup_pins = {}
        self.pending = []

    def keys(self, tokens):
        """CacheEngineKey of each chunk (whole or the last partial one)."""
        cs, keys, h = self.config.chunk_size, [], 0
        for start in range(0, len(tokens), cs):
            h = hash((h, tuple(tokens[start:start + cs]))) & ((1 << 63) - 1)
            keys.append(CacheEngineKey(self.metadata.model_name, self.metadata.world_size,
                                       self.metadata.worker_id, h, self.metadata.kv_dtype))
        return keys

    def kv(self, tokens):
        """The model: the KV of each token, in KV_2LTD [2, layers, tokens, hidden]."""
        shape = self.metadata.get_shapes(len(tokens))[0]
        g = torch.Generator().manual_seed(sum(tokens) * 1000003 + len(tokens))
        return torch.randn(shape, generator=g).to(self.metadata.kv_dtype).to(self.device)

    def store(self, tokens, gpu=None, keys=None, wait=True):
        """Allocate each chunk, copy the 'GPU' KV into it, batched_put; the
        keys stored (their objects already released by LMCache).  keys: the
        chunks' keys, made beforehand (as LMCache's token database does);
        without wait, the store returns once submitted, as LMCache's does,
        and settle() waits for the puts."""
        gpu = self.kv(tokens) if gpu is None else gpu
        cs, objs = self.config.chunk_size, []
        keys = self.keys(tokens) if keys is None else keys
        for i, key in enumerate(keys):
            n = min(cs, len(tokens) - i * cs)
            obj = self.sm.allocate(self.metadata.get_shapes(n), self.metadata.get_dtypes(),
                                   fmt=None, busy_loop=False)
            if obj is None:
                break           # "under pressure": only the chunks allocated are stored
            obj.tensor.copy_(gpu[:, :, i * cs:i * cs + n])
            objs.append(obj)
        self.pending += self.sm.batched_put(keys[:len(objs)], objs) or [] if objs else []
        if wait:
            self.settle()
        return keys[:len(objs)]

    def settle(self):
        """Wait for the puts of the stores made without wait."""
        pending, self.pending = self.pending, []
        for f in pending:
            f.result(30)

    def lookup(self, tokens, lookup_id):
        keys = self.keys(tokens)
        hit = self.sm.batched_contains(keys, pin=True)
        self.lookup_pins[lookup_id] = keys[:hit]
        return hit

    def retrieve(self, tokens, lookup_id=None, gpu=None):
        """The 'GPU' KV of the leading chunks found (zeros past them, or
        what gpu held there), and how many tokens; every object unpinned
        and its reference dropped."""
        keys = self.keys(tokens)
        objs = self.sm.batched_get(keys)
        if gpu is None:
            gpu = torch.zeros(self.metadata.get_shapes(len(tokens))[0],
                              dtype=self.metadata.kv_dtype, device=self.device)
        cs, got = self.config.chunk_size, 0
        for i, obj in enumerate(objs):
            if obj is None:
                for rest in objs[i:]:
                    if rest is not None:
                        rest.ref_count_down()
                break
            n = obj.tensor.shape[2]
            gpu[:, :, i * cs:i * cs + n].copy_(obj.tensor)
            got += n
            if obj.is_pinned:
                obj.unpin()
            obj.ref_count_down()
        if lookup_id is not None:
            self.sm.batched_unpin(self.lookup_pins.pop(lookup_id, []))
        return gpu, got

    def prefetch(self, tokens, lookup_id):
        """The asynchronous path: lookup with pins and prefetch on the
        manager's loop; the objects then go as retrieve's do."""
        fut = asyncio.run_coroutine_threadsafe(
            self.sm.async_lookup_and_prefetch(lookup_id, self.keys(tokens)), self.sm.loop)
        return fut.result(30)

    def close(self):
        self.sm.close()
