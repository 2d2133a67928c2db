# SPDX-License-Identifier: MIT
"""Follows lmcache/v1/storage_backend/abstract_backend.py (the version with
get_allocator_backend, batched_async_contains and StoragePluginInterface):
StorageBackendInterface and AllocatorBackendInterface, abstract where
LMCache's are, with its defaults for batched_contains,
batched_get_blocking and batched_remove."""

import abc

import torch


class StorageBackendInterface(metaclass=abc.ABCMeta):

    def __init__(self, dst_device="cuda"):
        try:
            torch.device(dst_device)
        except RuntimeError:
            raise
        self.dst_device = dst_device

    @abc.abstractmethod
    def contains(self, key, pin=False):
        raise NotImplementedError

    @abc.abstractmethod
    def exists_in_put_tasks(self, key):
        raise NotImplementedError

    @abc.abstractmethod
    def batched_submit_put_task(self, keys, objs, transfer_spec=None,
                                on_complete_callback=None):
        raise NotImplementedError

    @abc.abstractmethod
    def get_blocking(self, key):
        raise NotImplementedError

    async def batched_async_contains(self, lookup_id, keys, pin=False):
        raise NotImplementedError

    async def batched_get_non_blocking(self, lookup_id, keys, transfer_spec=None):
        raise NotImplementedError

    def batched_get_blocking(self, keys):
        return [self.get_blocking(k) for k in keys]

    @abc.abstractmethod
    def pin(self, key):
        raise NotImplementedError

    @abc.abstractmethod
    def unpin(self, key):
        raise NotImplementedError

    @abc.abstractmethod
    def remove(self, key, force=True):
        raise NotImplementedError

    def batched_remove(self, keys, force=True):
        return sum(bool(self.remove(k, force=force)) for k in keys)

    @abc.abstractmethod
    def get_allocator_backend(self):
        raise NotImplementedError

    @abc.abstractmethod
    def close(self):
        raise NotImplementedError

    def batched_contains(self, keys, pin=False):
        hit = 0
        for k in keys:
            if not self.contains(k, pin):
                break
            hit += 1
        return hit

    def cancel_request(self, req_id):
        pass


class AllocatorBackendInterface(StorageBackendInterface):

    @abc.abstractmethod
    def initialize_allocator(self, config, metadata):
        raise NotImplementedError

    @abc.abstractmethod
    def get_memory_allocator(self):
        raise NotImplementedError

    @abc.abstractmethod
    def allocate(self, shapes, dtypes, fmt=None, eviction=True, busy_loop=True):
        raise NotImplementedError

    @abc.abstractmethod
    def batched_allocate(self, shapes, dtypes, batch_size, fmt=None, eviction=True,
                         busy_loop=True):
        raise NotImplementedError
