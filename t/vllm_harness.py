# SPDX-License-Identifier: MIT
"""A small engine that drives marukv.vllm.MarukvConnector as vLLM does, for
t/test_vllm.py.  It follows vLLM at commit 22720624714d (2026-05-27):

- the configs the connector reads: KVTransferConfig and its
  get_from_extra_config (vllm/config/kv_transfer.py L26-122), the cache,
  parallel and model configs, and KVCacheConfig with one group of
  AttentionSpec (vllm/v1/kv_cache_interface.py L144-186, L838-);
- the scheduler's calls for a waiting request (vllm/v1/core/sched/
  scheduler.py L590-804): get_num_new_matched_tokens only while the
  request's num_computed_tokens is 0, with the local prefix cache's hit
  (none here), allocate_slots for every token, update_state_after_alloc
  with all of the request's blocks, then build_connector_meta once at the
  end of schedule() over a SchedulerOutput (vllm/v1/core/sched/output.py
  L31-44, L112-126, L181-241);
- preemption (scheduler.py L929-949): the blocks freed, num_computed_tokens
  0, the request resumed later with all its blocks new;
- the worker's order in a step (vllm/v1/worker/
  kv_connector_model_runner_mixin.py L85-119 and the attention hooks of
  kv_transfer_utils.py L15-61): bind_connector_metadata, start_load_kv,
  per layer wait_for_layer_load, the KV written, save_kv_layer, then
  wait_for_save, get_finished, get_block_ids_with_load_errors,
  clear_connector_metadata;
- FlashAttention's paged cache per layer, (num_blocks, 2, block_size,
  heads, head_size) (vllm/v1/attention/backends/flash_attn.py L140-149),
  or the older (2, num_blocks, ...) with kv_first.

The model is a function: the KV of a token in a layer depends only on the
token ids up to it and the layer, so two engines computing the same prefix
write the same bytes, and the harness knows what every loaded block must
hold.  The caches are CPU tensors unless device says otherwise
(t/gpu_check.py).  Not covered here: vLLM's own prefix cache, asynchronous loads,
several KV cache groups, speculative decoding, tensor parallelism across
processes of one engine.
"""

import hashlib
import os
import sys
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "vllm_standin"))

import torch  # noqa: E402

from vllm.distributed import parallel_state  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402

import marukv.vllm  # noqa: E402


class KVTransferConfig:
    """Follows vllm/config/kv_transfer.py: the fields the connector reads, and
    is_kv_producer / is_kv_consumer (L114-118)."""

    def __init__(self, extra, kv_role="kv_both"):
        self.kv_connector = "MarukvConnector"
        self.kv_connector_module_path = "marukv.vllm"
        self.kv_role = kv_role
        self.kv_connector_extra_config = dict(extra)

    @property
    def is_kv_producer(self):
        return self.kv_role in ("kv_producer", "kv_both")

    @property
    def is_kv_consumer(self):
        return self.kv_role in ("kv_consumer", "kv_both")

    def get_from_extra_config(self, key, default):
        return self.kv_connector_extra_config.get(key, default)


class Blocks:
    """Follows KVCacheBlocks.get_block_ids (kv_cache_manager.py L69-84), one group."""

    def __init__(self, ids):
        self.ids = list(ids)

    def get_block_ids(self, allow_none=False):
        return (list(self.ids),)


class Request:
    """Follows vllm/v1/request.py: the fields the connector reads."""

    def __init__(self, req_id, prompt, max_tokens=4, cache_salt=None):
        self.request_id = req_id
        self.prompt_token_ids = list(prompt)
        self._all = list(prompt)
        self.num_computed_tokens = 0
        self.max_tokens = max_tokens
        self.cache_salt = cache_salt
        self.lora_request = None
        self.mm_features = []
        self.block_ids = []

    @property
    def all_token_ids(self):
        return tuple(self._all)

    @property
    def num_tokens(self):
        return len(self._all)


def kv_of(tokens, layer, shape, dtype):
    """The model: the [2, heads, size] KV of the last of tokens in layer."""
    h = hashlib.blake2b(repr((layer, list(tokens))).encode(), digest_size=8).digest()
    g = torch.Generator().manual_seed(int.from_bytes(h, "little") & ((1 << 62) - 1))
    return torch.randn(shape, generator=g).to(dtype)


def configs(pool, dtype=torch.float16, layers=3, heads=2, head_size=8, block_size=4,
            num_blocks=64, model="m", tp=(0, 1), extra=None, kv_role="kv_both"):
    """An engine's VllmConfig and KVCacheConfig, as much of them as the connector reads."""
    cfg = {"pool": pool}
    cfg.update(extra or {})
    names = ["model.layers.%d.self_attn.attn" % i for i in range(layers)]
    spec = SimpleNamespace(block_size=block_size, num_kv_heads=heads, head_size=head_size,
                           dtype=dtype)
    kv_cache_config = SimpleNamespace(
        num_blocks=num_blocks,
        kv_cache_groups=[SimpleNamespace(layer_names=names, kv_cache_spec=spec)])
    vllm_config = SimpleNamespace(
        kv_transfer_config=KVTransferConfig(cfg, kv_role),
        cache_config=SimpleNamespace(block_size=block_size),
        parallel_config=SimpleNamespace(tensor_parallel_size=tp[1], pipeline_parallel_size=1),
        model_config=SimpleNamespace(model=model, revision=None))
    return vllm_config, kv_cache_config


class Engine:
    """One engine: a scheduler-side and a worker-side connector and a paged cache."""

    def __init__(self, pool, dtype=torch.float16, layers=3, heads=2, head_size=8,
                 block_size=4, num_blocks=64, model="m", tp=(0, 1), kv_first=False,
                 extra=None, device="cpu", kv_role="kv_both"):
        self.bs, self.heads, self.size, self.dtype = block_size, heads, head_size, dtype
        self.device = device
        self.vllm_config, self.kv_cache_config = configs(pool, dtype, layers, heads, head_size,
                                                         block_size, num_blocks, model, tp, extra,
                                                         kv_role)
        names = self.kv_cache_config.kv_cache_groups[0].layer_names
        parallel_state.set_tensor_model_parallel_rank(tp[0])
        self.scheduler = marukv.vllm.MarukvConnector(self.vllm_config, KVConnectorRole.SCHEDULER,
                                                     self.kv_cache_config)
        self.worker = marukv.vllm.MarukvConnector(self.vllm_config, KVConnectorRole.WORKER,
                                                  self.kv_cache_config)
        shape = (2, num_blocks) if kv_first else (num_blocks, 2)
        self.caches = {n: torch.zeros(shape + (block_size, heads, head_size), dtype=dtype,
                                      device=device) for n in names}
        self.kv_first = kv_first
        self.worker.register_kv_caches(self.caches)
        self.free = list(range(num_blocks - 1, 0, -1))   # block 0 is vLLM's null block
        self.waiting, self.running, self.finished = [], [], set()
        self.new_since, self.preempted = set(), set()
        self.loaded = {}       # request id -> tokens the connector said it loads
        self.load_errors = set()

    # ---- the scheduler ----

    def add(self, request):
        self.waiting.append(request)

    def preempt(self, request):
        """scheduler.py L929-949: the blocks freed, num_computed_tokens 0."""
        self.running.remove(request)
        self.free.extend(reversed(request.block_ids))
        request.block_ids = []
        request.num_computed_tokens = 0
        self.preempted.add(request.request_id)
        self.waiting.insert(0, request)

    def _schedule(self):
        new, cached, scheduled = [], [], {}
        for req in list(self.waiting):
            ext, load_async = self.scheduler.get_num_new_matched_tokens(req, 0)
            assert not load_async and ext % self.bs == 0 and ext < req.num_tokens
            need = -(-req.num_tokens // self.bs)
            if need > len(self.free):
                break
            req.block_ids = [self.free.pop() for _ in range(need)]
            self.scheduler.update_state_after_alloc(req, Blocks(req.block_ids), ext)
            req.num_computed_tokens = ext
            self.loaded[req.request_id] = ext
            self.waiting.remove(req)
            self.running.append(req)
            scheduled[req.request_id] = req.num_tokens - ext
            if req.request_id in self.preempted:
                cached.append((req, (list(req.block_ids),), True))
            else:
                new.append(SimpleNamespace(req_id=req.request_id, block_ids=(list(req.block_ids),),
                                           num_computed_tokens=ext,
                                           prompt_token_ids=req.prompt_token_ids))
        for req in self.running:
            if req.request_id in scheduled:
                continue
            new_ids = []
            if req.num_tokens > len(req.block_ids) * self.bs:
                new_ids = [self.free.pop()]
                req.block_ids += new_ids
            cached.append((req, (new_ids,), False))
            scheduled[req.request_id] = req.num_tokens - req.num_computed_tokens
        so = SimpleNamespace(
            scheduled_new_reqs=new,
            scheduled_cached_reqs=SimpleNamespace(
                req_ids=[r.request_id for r, _, _ in cached],
                resumed_req_ids={r.request_id for r, _, resumed in cached if resumed},
                new_block_ids=[ids for _, ids, _ in cached],
                num_computed_tokens=[r.num_computed_tokens for r, _, _ in cached]),
            num_scheduled_tokens=scheduled,
            finished_req_ids=set(self.finished),
            preempted_req_ids=set(self.preempted))
        self.finished.clear()
        self.preempted -= set(scheduled)
        so.kv_connector_metadata = self.scheduler.build_connector_meta(so)
        return so

    # ---- the worker ----

    def _block(self, layer, block_id):
        c = self.caches[layer]
        return (c[0, block_id], c[1, block_id]) if self.kv_first else (c[block_id, 0], c[block_id, 1])

    def _write(self, layer, req, pos):
        k, v = self._block(layer, req.block_ids[pos // self.bs])
        kv = kv_of(req.all_token_ids[:pos + 1], layer, (2, self.heads, self.size),
                   self.dtype).to(self.device)
        k[pos % self.bs] = kv[0]
        v[pos % self.bs] = kv[1]

    def expect(self, req, pos, layer):
        """What the model puts at pos of req in layer, and what the cache holds there."""
        k, v = self._block(layer, req.block_ids[pos // self.bs])
        want = kv_of(req.all_token_ids[:pos + 1], layer, (2, self.heads, self.size),
                     self.dtype).to(self.device)
        return want, torch.stack((k[pos % self.bs], v[pos % self.bs]))

    def step(self):
        so = self._schedule()
        w = self.worker
        w.bind_connector_metadata(so.kv_connector_metadata)
        w.start_load_kv(SimpleNamespace(attn_metadata={}, no_compile_layers={}))
        for layer in self.caches:
            w.wait_for_layer_load(layer)
            for req in self.running:
                for pos in range(req.num_computed_tokens, req.num_tokens):
                    self._write(layer, req, pos)
            w.save_kv_layer(layer, self.caches[layer], {})
        w.wait_for_save()
        w.get_finished(so.finished_req_ids)
        self.load_errors |= w.get_block_ids_with_load_errors()
        w.clear_connector_metadata()
        # the outputs: one token each, a function of the tokens so far
        for req in list(self.running):
            req.num_computed_tokens = req.num_tokens
            if req.num_tokens - len(req.prompt_token_ids) >= req.max_tokens:
                self.running.remove(req)
                self.scheduler.request_finished(req, list(req.block_ids))
                self.free.extend(reversed(req.block_ids))
                self.finished.add(req.request_id)
                continue
            req._all.append(sum(req._all) % 1000 + 7)
        return so

    def run(self, request):
        self.add(request)
        while request in self.waiting or request in self.running:
            self.step()

    def close(self):
        self.worker.shutdown()
        self.scheduler.shutdown()
