# SPDX-License-Identifier: MIT
"""Follows lmcache/v1/pin_monitor.py: the process's PinMonitor, made with
the engine's config (GetOrCreate(config)); on_pin/on_unpin record when an
object was last pinned; _check_timeouts() unpins, to 0, every object
pinned for longer than config.pin_timeout_sec (LMCache's thread calls it
every pin_check_interval_sec; tests call it themselves)."""

import threading
import time


class PinMonitor:
    _instance = None
    _lock = threading.Lock()

    def __init__(self, config):
        self.timeout = config.pin_timeout_sec
        self.pinned = {}
        self.mutex = threading.Lock()

    @classmethod
    def GetOrCreate(cls, config=None):
        with cls._lock:
            if cls._instance is None:
                assert config is not None, "PinMonitor needs the config the first time"
                cls._instance = cls(config)
            return cls._instance

    def on_pin(self, obj):
        with self.mutex:
            self.pinned[id(obj)] = (obj, time.time())

    def on_unpin(self, obj):
        with self.mutex:
            self.pinned.pop(id(obj), None)

    def _check_timeouts(self):
        now = time.time()
        with self.mutex:
            old = [o for o, t in self.pinned.values() if now - t > self.timeout]
        for obj in old:
            while obj.meta.pin_count > 0:
                obj.unpin()
