# SPDX-License-Identifier: MIT
"""Follows lmcache/v1/config.py: the fields of LMCacheEngineConfig an
allocator backend reads, with LMCache's defaults, and
get_extra_config_value."""

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class LMCacheEngineConfig:
    chunk_size: int = 256
    local_cpu: bool = True
    max_local_cpu_size: float = 5.0
    save_unfull_chunk: bool = False
    use_layerwise: bool = False
    enable_async_loading: bool = False
    extra_config: Optional[dict] = None
    storage_plugins: Optional[list] = None
    maru_path: Optional[str] = None
    pin_timeout_sec: int = 300
    pin_check_interval_sec: int = 30
    enable_pd: bool = False
    store_location: Optional[str] = None
    retrieve_locations: Optional[list] = field(default=None)

    def get_extra_config_value(self, key, default=None):
        if self.extra_config is None:
            return default
        return self.extra_config.get(key, default)
