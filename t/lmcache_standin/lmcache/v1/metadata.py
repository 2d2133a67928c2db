# SPDX-License-Identifier: MIT
"""Follows lmcache/v1/metadata.py (LMCache/LMCache 0ca52cb): LMCacheMetadata
without layer groups, and get_shapes/get_dtypes, the shapes of a chunk in
LMCache's KV_2LTD format: [2 (1 with MLA), layers, tokens, heads x size]."""

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class LMCacheMetadata:
    model_name: str
    world_size: int
    worker_id: int
    kv_dtype: torch.dtype
    kv_shape: tuple              # (layers, 2 or 1, chunk_size, heads, head_size)
    use_mla: bool = False
    role: Optional[str] = None   # "scheduler" or "worker"
    chunk_size: int = 256
    local_world_size: int = 1
    local_worker_id: int = 0

    def get_dtypes(self):
        return [self.kv_dtype]

    def get_shapes(self, num_tokens=None):
        tokens = self.kv_shape[2] if num_tokens is None else num_tokens
        return [torch.Size([self.kv_shape[1], self.kv_shape[0], tokens,
                            self.kv_shape[3] * self.kv_shape[4]])]
