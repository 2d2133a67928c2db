# SPDX-License-Identifier: MIT
"""Follows CacheEngineKey of lmcache/utils.py (LMCache/LMCache 0353be8):
the fields, the tags taken from request_configs' "lmcache.tag." keys,
equality and hashing over the fields, and to_string()/from_string(), the
form a storage backend names a chunk by."""

from dataclasses import dataclass, field
from typing import Optional

import torch

TORCH_DTYPE_TO_STR_DTYPE = {
    torch.half: "half", torch.float16: "half", torch.bfloat16: "bfloat16",
    torch.float: "float", torch.float32: "float", torch.double: "double",
    torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
    torch.uint8: "uint8", torch.bool: "bool",
}
STR_DTYPE_TO_TORCH_DTYPE = {v: k for k, v in TORCH_DTYPE_TO_STR_DTYPE.items()}
STR_DTYPE_TO_TORCH_DTYPE["half"] = torch.half


@dataclass(slots=True)
class CacheEngineKey:
    model_name: str
    world_size: int
    worker_id: int
    chunk_hash: int
    dtype: torch.dtype
    request_configs: Optional[dict] = field(default_factory=dict)
    tags: Optional[tuple] = field(init=False)
    _dtype_str: str = field(init=False)

    def __post_init__(self):
        tags = []
        for k, v in (self.request_configs or {}).items():
            if k.startswith("lmcache.tag."):
                tags.append((k[len("lmcache.tag."):], v))
        self.tags = tuple(tags) if tags else None
        if self.dtype not in TORCH_DTYPE_TO_STR_DTYPE:
            raise ValueError("Unsupported dtype: %s" % self.dtype)
        self._dtype_str = TORCH_DTYPE_TO_STR_DTYPE[self.dtype]

    def __hash__(self):
        return hash((self.model_name, self.world_size, self.worker_id, self.chunk_hash,
                     self._dtype_str, self.tags))

    def __eq__(self, other):
        if type(self) is not type(other):
            return False
        return (self.model_name, self.world_size, self.worker_id, self.chunk_hash,
                self.dtype, self.tags) == (other.model_name, other.world_size,
                                           other.worker_id, other.chunk_hash, other.dtype,
                                           other.tags)

    def to_string(self):
        h = self.chunk_hash.hex() if isinstance(self.chunk_hash, bytes) else \
            "%x" % self.chunk_hash
        s = "%s@%d@%d@%s@%s" % (self.model_name, self.world_size, self.worker_id, h,
                                self._dtype_str)
        if self.tags:
            s += "@" + "@".join("%s%%%s" % (k, v) for k, v in self.tags)
        return s

    @staticmethod
    def from_string(s):
        parts = s.split("@")
        if len(parts) < 5:
            raise ValueError("Invalid key string: %s" % s)
        configs = {}
        for kv in parts[5:]:
            k, v = kv.split("%", 1)
            configs["lmcache.tag." + k] = v
        return CacheEngineKey(parts[0], int(parts[1]), int(parts[2]), int(parts[3], 16),
                              STR_DTYPE_TO_TORCH_DTYPE[parts[4]], configs)
