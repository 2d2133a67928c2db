# SPDX-License-Identifier: MIT
"""Follows lmcache/v1/memory_management.py (the newest version found, with
pin_count and PinMonitor.on_pin/on_unpin): MemoryFormat,
MemoryObjMetadata, TensorMemoryObj and MemoryAllocatorInterface.

What matters to an allocator backend is reproduced exactly:
- each TensorMemoryObj has its own lock, a non-reentrant threading.Lock;
- ref_count_up/down, pin/unpin, get_ref_count, get_memory_format,
  get_num_tokens and the metadata property take it (is_pinned goes through
  metadata); meta, tensor, is_valid and invalidate do not;
- ref_count_down frees (parent_allocator.free) when the reference count
  reaches 0 with no pin, and unpin when the pin count does with no
  reference, both while holding the lock: a free that takes the lock
  again deadlocks here as it would in LMCache;
- a count driven below 0 is warned about ("Double free") and reset, as in
  LMCache; this stand-in also counts those in DOUBLE_FREES, so a test can
  fail on one;
- __del__ frees a still-valid object whatever its counts."""

import enum
import functools
import logging
import threading
from dataclasses import dataclass
from typing import List, Optional

import torch

from lmcache.v1.pin_monitor import PinMonitor

logger = logging.getLogger(__name__)
DOUBLE_FREES = []


@functools.lru_cache(maxsize=None)
def _itemsize(dtype):
    """dtype.itemsize (LMCache's torch has it; Debian's 1.13 does not)."""
    return torch.empty((), dtype=dtype).element_size()


class MemoryFormat(enum.Enum):
    UNDEFINED = 0
    KV_2LTD = enum.auto()
    KV_T2D = enum.auto()
    KV_2TD = enum.auto()
    BINARY = enum.auto()
    BINARY_BUFFER = enum.auto()
    KV_MLA_FMT = enum.auto()
    EC_TD = enum.auto()
    HS_TD = enum.auto()

    def token_dim(self):
        return {MemoryFormat.KV_2LTD: 2, MemoryFormat.KV_T2D: 1,
                MemoryFormat.KV_MLA_FMT: 2}.get(self, 0)


@dataclass
class MemoryObjMetadata:
    shape: torch.Size
    dtype: Optional[torch.dtype]
    address: int
    phy_size: int
    ref_count: int
    pin_count: int = 0
    fmt: MemoryFormat = MemoryFormat.UNDEFINED
    cached_positions: Optional[torch.Tensor] = None
    shapes: Optional[List[torch.Size]] = None
    dtypes: Optional[List[torch.dtype]] = None

    def get_size(self):
        if self.shapes is not None and self.dtypes is not None:
            return sum(s.numel() * _itemsize(d) for s, d in zip(self.shapes, self.dtypes))
        return self.shape.numel() * _itemsize(self.dtype)


class MemoryObj:
    """The abstract memory object (only what TensorMemoryObj inherits)."""

    def __init__(self, metadata):
        self.meta = metadata

    def get_dtype(self):
        return None


class TensorMemoryObj(MemoryObj):

    def __init__(self, raw_data, metadata, parent_allocator):
        super().__init__(metadata)
        assert metadata.dtype is not None
        self.raw_data = raw_data
        self.valid = True
        self.lock = threading.Lock()
        self.parent_allocator = parent_allocator
        shapes = metadata.shapes or [metadata.shape]
        dtypes = metadata.dtypes or [metadata.dtype]
        sums, total = [0], 0
        for s, d in zip(shapes, dtypes):
            total += s.numel() * _itemsize(d)
            sums.append(total)
        self.group_prefix_sum = sums

    # -- under the lock --

    def ref_count_up(self):
        with self.lock:
            self.meta.ref_count += 1

    def ref_count_down(self):
        with self.lock:
            self.meta.ref_count -= 1
            if self.meta.ref_count < 0:
                logger.warning("Double free occurred somewhere")
                DOUBLE_FREES.append(self)
                self.meta.ref_count = 0
            if (self.meta.ref_count == 0 and self.parent_allocator is not None
                    and self.meta.pin_count == 0):
                self.parent_allocator.free(self)

    def get_ref_count(self):
        with self.lock:
            return self.meta.ref_count

    def pin(self):
        with self.lock:
            self.meta.pin_count += 1
            PinMonitor.GetOrCreate().on_pin(self)
        return True

    def unpin(self):
        with self.lock:
            self.meta.pin_count -= 1
            if self.meta.pin_count < 0:
                logger.warning("Double unpin occurred somewhere")
                DOUBLE_FREES.append(self)
                self.meta.pin_count = 0
            if self.meta.pin_count == 0:
                PinMonitor.GetOrCreate().on_unpin(self)
            if self.meta.pin_count <= 0 and self.meta.ref_count <= 0:
                if self.parent_allocator is not None:
                    self.parent_allocator.free(self)
                else:
                    logger.error("Parent allocator is None when trying to free MemoryObj. "
                                 "This could cause memory leak")
        return True

    def get_memory_format(self):
        with self.lock:
            return self.meta.fmt

    def get_num_tokens(self):
        with self.lock:
            return self.meta.shape[self.meta.fmt.token_dim()]

    @property
    def metadata(self):
        with self.lock:
            return self.meta

    @property
    def is_pinned(self):
        return self.metadata.pin_count > 0

    @property
    def can_evict(self):
        return not self.is_pinned and self.get_ref_count() == 1

    # -- without it --

    def invalidate(self):
        self.valid = False

    def is_valid(self):
        return self.valid

    def get_size(self):
        return self.group_prefix_sum[-1]

    def get_shape(self):
        return self.meta.shape

    def get_shapes(self):
        return self.meta.shapes or [self.meta.shape]

    def get_dtypes(self):
        return self.meta.dtypes or [self.meta.dtype]

    def get_physical_size(self):
        return self.meta.phy_size

    @property
    def tensor(self):
        if not self.valid:
            logger.warning("Trying to access an invalidated MemoryObj")
            return None
        return self.raw_data[:self.get_size()].view(self.meta.dtype).view(self.meta.shape)

    @property
    def data_ptr(self):
        return self.raw_data.data_ptr()

    def __del__(self):
        if self.parent_allocator is not None and self.is_valid():
            if self.meta.ref_count > 0 or self.meta.pin_count > 0:
                logger.warning("MemoryObj garbage collected with ref_count %d, pin_count %d",
                               self.meta.ref_count, self.meta.pin_count)
            self.parent_allocator.free(self)


class MemoryAllocatorInterface:
    """The allocator a TensorMemoryObj's parent_allocator names."""

    def allocate(self, shapes, dtypes, fmt=MemoryFormat.UNDEFINED, allocator_type=None):
        raise NotImplementedError

    def batched_allocate(self, shapes, dtypes, batch_size, fmt=MemoryFormat.UNDEFINED,
                         allocator_type=None):
        raise NotImplementedError

    def free(self, memory_obj, allocator_type=None):
        raise NotImplementedError

    def batched_free(self, memory_objs, allocator_type=None, update_stats=True):
        for m in memory_objs:
            self.free(m, allocator_type)

    def close(self):
        pass

    def memcheck(self):
        return True
