# SPDX-License-Identifier: MIT
"""marukv.vllm: a vLLM KV connector that keeps KV blocks in a marukv pool.

vLLM loads it without being patched, through its KV connector API
(KVConnectorBase_V1), with

    vllm serve MODEL --kv-transfer-config '{"kv_connector": "MarukvConnector",
        "kv_connector_module_path": "marukv.vllm", "kv_role": "kv_both",
        "kv_connector_extra_config": {"pool": "/dev/shm/kvcache"}}'

Written from vLLM's own source at commit 22720624714d3299d2df87e0c2c67639
(vllm-project/vllm main, 2026-05-27):
vllm/distributed/kv_transfer/kv_connector/v1/base.py (the contract),
factory.py (the constructor: vllm_config, role, kv_cache_config),
v1/example_connector.py and offloading_connector.py (what the calls
carry), vllm/v1/core/sched/scheduler.py (the scheduler's calls) and
vllm/v1/worker/kv_connector_model_runner_mixin.py (the worker's).

vLLM builds the class twice: once in its scheduler, with no KV caches,
and once in each GPU worker.  The scheduler side answers "how many tokens
of this prompt are cached?" by Pool.prefix_len over the prompt's block
keys: a read of the pool's registry, no RPC.  It opens the pool read-only,
when first asked.  The worker side copies blocks between vLLM's paged KV
cache and pool pages, one copy each way.

extra_config keys (kv_connector_extra_config):
  pool        the pool's path (required)
  create      create the pool if it is not there (default False)
  data_size   its data arena when created, in bytes (default: the library's)
  namespace   a string of the operator's, part of every key (default "")
  cuda_register_piece
              on a GPU, the size of each piece of the pool's data arena
              registered with CUDA, a multiple of 4096 (default 1 GiB)
  checksum    record each saved block's checksum (default True); False
              spares the save a second pass over each block (about a
              tenth of its time on a CPU), and leaves those blocks
              unchecked by readers that verify and by marukv-gc verify
              --deep

kv_role.  "kv_both" saves and loads.  "kv_producer" saves and never loads
(the scheduler still looks a prompt up, only so as not to save again the
blocks the pool has).  "kv_consumer" loads and never saves; its worker
opens the pool read-only, so a consumer needs only read access to it.

On a GPU.  When vLLM's KV caches are CUDA tensors, register_kv_caches
registers the worker's mapping of the pool's data arena with CUDA
(cudaHostRegister through torch.cuda.cudart(), in pieces: drivers refuse
very large single registrations), so each copy between the GPU and the
pool is a DMA straight to or from pool pages, never staged through a
buffer; a copy that would cross from one piece into the next is split
there.  The copies are queued on the current stream; a load synchronizes
it before releasing its views, a save before publishing each block.
shutdown() unregisters the pieces.  t/gpu_check.py checks it on a GPU.

Keys.  A block's key is b"vllm1:" + N + b":" + C, 71 bytes, where N is 32
hex digits of BLAKE2b over the namespace text

    marukv-vllm/1;model=M;rev=R;dtype=D;bs=B;heads=H;head_size=S;
    layers=L;tp=r/w;pp=p/q;ns=NAMESPACE

(the model and its revision, the KV cache's dtype, the block size, the
KV heads of this rank and their size, the layers, tensor- and
pipeline-parallel rank and size, and the operator's namespace), and C is
32 hex digits of the block's chained hash: BLAKE2b-128 over the previous
block's hash (none for the first) and the block's token ids as 64-bit
little-endian integers, the first block's also over the LoRA adapter's
name and the cache salt.  The chain is computed here from the token ids,
not taken from vLLM's Request.block_hashes, which hash with a seed that
is random per process unless PYTHONHASHSEED is set: engines started with
different seeds still find each other's blocks.  Requests with
multimodal inputs or prompt embeddings are neither looked up nor saved
(their tokens do not say what their KV holds).

Value layout (version 1, the "1" of "vllm1").  A block's value holds,
for each layer in the order of its name, K then V, each [block_size,
heads, head_size] in the cache's dtype: the same bytes whatever the
attention backend's memory layout, which the copies convert.  A value of
another length is never used.

What runs when:
  get_num_new_matched_tokens   the longest prefix of whole blocks found
                               for every tensor-parallel rank, never the
                               prompt's last token; loads are synchronous
  update_state_after_alloc     records the blocks to load into
  build_connector_meta         the loads, and the blocks that became full
                               this step and are not saved yet
  start_load_kv                every load, all layers: a zero-copy view of
                               each block scattered into vLLM's blocks;
                               a block missing or of the wrong size is
                               reported in get_block_ids_with_load_errors
                               and is not used
  wait_for_layer_load          nothing (the loads are done by then)
  save_kv_layer                nothing: the saves run in wait_for_save,
                               when every layer of the step is written
  wait_for_save                each new full block gathered from every
                               layer straight into pool pages and
                               published without waiting (publish_async,
                               parent: the block before it), so the next
                               block fills while the lease holder
                               registers it; returns once every publish is
                               answered
  get_finished                 (None, None): nothing outlives its step
  request_finished             (False, None): the saves of a request end
                               with the step that computed its blocks
  requires_kv_delivery         False: a best-effort cache (vLLM's newer
                               base.py asks it)

So of vLLM's pipelining, neither the layer-by-layer hooks nor the
asynchronous loads are used: a load is done before the forward starts,
a save before the step ends.
"""

import hashlib
import struct
import warnings
from dataclasses import dataclass, field

import torch

import marukv
from marukv import _cuda
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole)

_KEY_TAG = b"vllm1:"


def namespace_text(model, revision, dtype, block_size, heads, head_size, layers,
                   tp=(0, 1), pp=(0, 1), namespace=""):
    """The text that names what makes two engines' blocks interchangeable."""
    return ("marukv-vllm/1;model=%s;rev=%s;dtype=%s;bs=%d;heads=%d;head_size=%d;"
            "layers=%d;tp=%d/%d;pp=%d/%d;ns=%s" % (
                model, revision or "", str(dtype).replace("torch.", ""), block_size,
                heads, head_size, layers, tp[0], tp[1], pp[0], pp[1], namespace))


def key_prefix(namespace):
    """What every key of a namespace starts with: b"vllm1:", 32 hex digits, b":"."""
    return _KEY_TAG + hashlib.blake2b(namespace.encode(), digest_size=16).hexdigest().encode() + b":"


def chain(tokens, block_size, extra=b"", stop=None, hashes=None):
    """The chained hashes (hex, bytes) of the first stop whole blocks of
    tokens; with hashes, those of the first blocks, extended in place."""
    nblocks = len(tokens) // block_size if stop is None else stop
    hashes = [] if hashes is None else hashes
    h = bytes.fromhex(hashes[-1].decode()) if hashes else \
        hashlib.blake2b(extra, digest_size=16).digest()
    for i in range(len(hashes), nblocks):
        block = tokens[i * block_size:(i + 1) * block_size]
        h = hashlib.blake2b(h + struct.pack("<%dq" % block_size, *block),
                            digest_size=16).digest()
        hashes.append(h.hex().encode())
    return hashes[:nblocks]


def _extra(request):
    """The first block's salt: the LoRA adapter and the cache salt."""
    lora = getattr(request, "lora_request", None)
    name = getattr(lora, "lora_name", "") if lora is not None else ""
    salt = getattr(request, "cache_salt", None) or ""
    return ("lora=%s;salt=%s" % (name, salt)).encode()


def _cacheable(request):
    """Whether a request's token ids say what its KV holds: not with
    multimodal inputs (mm_features; older vLLM named them mm_positions and
    mm_hashes) nor prompt embeddings."""
    return (getattr(request, "prompt_token_ids", None) is not None
            and getattr(request, "prompt_embeds", None) is None
            and not any(getattr(request, a, None)
                        for a in ("mm_features", "mm_positions", "mm_hashes")))


@dataclass
class _Load:
    req_id: str
    hashes: list       # chained hashes of the blocks to load
    block_ids: list    # vLLM's blocks they go into


@dataclass
class _Save:
    req_id: str
    parent: bytes      # chained hash of the block before the first, or None
    hashes: list
    block_ids: list    # vLLM's blocks they come from


@dataclass
class MarukvMetadata(KVConnectorMetadata):
    """What the scheduler side tells the workers for one step."""
    loads: list = field(default_factory=list)
    saves: list = field(default_factory=list)


class MarukvConnector(KVConnectorBase_V1):
    """vLLM's KV connector over a marukv pool (see the module's help)."""

    def __init__(self, vllm_config, role, kv_cache_config=None):
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        kvt = vllm_config.kv_transfer_config
        self._path = kvt.get_from_extra_config("pool", None)
        if not self._path:
            raise ValueError("MarukvConnector: kv_connector_extra_config has no \"pool\"")
        self._create = bool(kvt.get_from_extra_config("create", False))
        self._data_size = kvt.get_from_extra_config("data_size", None)
        self._namespace = str(kvt.get_from_extra_config("namespace", ""))
        self._checksum = bool(kvt.get_from_extra_config("checksum", True))
        # kv_role: a producer saves, a consumer loads, kv_both does both
        self._saves, self._loads_on = kvt.is_kv_producer, kvt.is_kv_consumer
        par = vllm_config.parallel_config
        if par.pipeline_parallel_size != 1:
            raise ValueError("MarukvConnector: pipeline parallelism is not supported yet")
        self._tp_size = par.tensor_parallel_size
        self._bs = vllm_config.cache_config.block_size
        spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
        self._heads, self._head_size, self._dtype = spec.num_kv_heads, spec.head_size, spec.dtype
        self._nlayers = sum(len(g.layer_names) for g in kv_cache_config.kv_cache_groups)
        self._num_blocks = kv_cache_config.num_blocks
        model = vllm_config.model_config
        self._model, self._revision = model.model, getattr(model, "revision", None)
        self._pool = None
        # the scheduler side's requests: the request, vLLM's local hit and the pool's
        # (blocks) as last asked, blocks saved, block ids, the chain's hashes so far (a
        # request's tokens only grow)
        self._reqs, self._local, self._hit, self._saved = {}, {}, {}, {}
        self._blocks, self._chains = {}, {}
        self._loads = []
        # the worker side's caches (layer name -> tensor, by name) and failed loads
        self._layers, self._errors, self.save_errors = [], set(), 0
        self._registered, self._cuda = None, False
        self._piece = _cuda.check_piece(
            kvt.get_from_extra_config("cuda_register_piece", _cuda.PIECE), "MarukvConnector")
        self._tp_rank = 0
        if role == KVConnectorRole.WORKER:
            from vllm.distributed.parallel_state import get_tensor_model_parallel_rank
            self._tp_rank = get_tensor_model_parallel_rank()
        # every rank's key prefix, hashed once: the scheduler asks for all of them each step
        self._prefixes = [key_prefix(namespace_text(
            self._model, self._revision, self._dtype, self._bs, self._heads, self._head_size,
            self._nlayers, (rank, self._tp_size), (0, 1), self._namespace))
            for rank in range(self._tp_size)]

    # ---- both sides ----

    def _prefix(self, tp_rank):
        return self._prefixes[tp_rank]

    def _open(self, readonly):
        if self._pool is None:
            opts = {}
            if self._create and not readonly:
                opts["create"] = True
                if self._data_size:
                    opts["data_size"] = int(self._data_size)
            self._pool = marukv.Pool(self._path, readonly=readonly,
                                     nochecksum=not self._checksum, **opts)
        return self._pool

    def shutdown(self):
        if self._registered is not None:
            self._registered.close()
            self._registered = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    @property
    def requires_kv_delivery(self):
        """False: a cache, best effort; vLLM recomputes what it cannot load
        (vLLM's newer base.py asks this of every connector)."""
        return False

    # ---- scheduler side ----

    def _chain(self, request, stop):
        """The request's chain to block stop, extending what was computed before."""
        hashes = self._chains.setdefault(request.request_id, [])
        return chain(request.all_token_ids, self._bs, _extra(request), stop, hashes)

    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        """The pool's blocks past vLLM's own hit; the pool's hit is kept, so
        that the blocks only vLLM had are saved too (update_state_after_alloc)."""
        if not _cacheable(request):
            return 0, False
        hit = (request.num_tokens - 1) // self._bs
        if hit > 0:
            pool = self._open(readonly=True)
            hashes = self._chain(request, hit)
            for rank in range(self._tp_size):
                if hit == 0:
                    break
                prefix = self._prefix(rank)
                hit = min(hit, pool.prefix_len([prefix + h for h in hashes[:hit]]))
        self._local[request.request_id] = num_computed_tokens
        self._hit[request.request_id] = hit
        if not self._loads_on:
            return 0, False     # a producer: the hit only spares saving those blocks again
        return max(0, hit * self._bs - num_computed_tokens), False

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        rid = request.request_id
        self._reqs[rid] = request
        local = self._local.pop(rid, 0)
        # the pool has the first hit blocks: the rest are saved once computed,
        # those vLLM's own prefix cache gave it included
        self._saved[rid] = self._hit.pop(rid, 0)
        if num_external_tokens > 0:
            first, end = local // self._bs, (local + num_external_tokens) // self._bs
            hashes = self._chain(request, end)
            ids = list(blocks.get_block_ids()[0])
            self._loads.append(_Load(rid, hashes[first:], ids[first:end]))

    def build_connector_meta(self, scheduler_output):
        meta = MarukvMetadata(loads=self._loads)
        self._loads = []
        steps = [(r.req_id, r.block_ids[0], r.num_computed_tokens, True)
                 for r in scheduler_output.scheduled_new_reqs]
        cached = scheduler_output.scheduled_cached_reqs
        # a set of ids; older vLLM had a list of flags, resumed_from_preemption
        resumed = getattr(cached, "resumed_req_ids", None)
        if resumed is None:
            resumed = {rid for rid, r in zip(cached.req_ids, cached.resumed_from_preemption)
                       if r}
        for i, rid in enumerate(cached.req_ids):
            new = cached.new_block_ids[i]
            steps.append((rid, new[0] if new else [], cached.num_computed_tokens[i],
                          rid in resumed))
        for rid, new_ids, computed, replace in steps:
            request = self._reqs.get(rid)
            if request is None or not _cacheable(request) or not self._saves:
                continue
            ids = list(new_ids) if replace else self._blocks.get(rid, []) + list(new_ids)
            self._blocks[rid] = ids
            done = computed + scheduler_output.num_scheduled_tokens.get(rid, 0)
            full = min(done, request.num_tokens, len(ids) * self._bs) // self._bs
            first = self._saved.get(rid, 0)
            if full <= first:
                continue
            hashes = self._chain(request, full)
            meta.saves.append(_Save(rid, hashes[first - 1] if first else None,
                                    hashes[first:], ids[first:full]))
            self._saved[rid] = full
        return meta

    def request_finished(self, request, block_ids):
        rid = request.request_id
        for d in (self._reqs, self._local, self._hit, self._saved, self._blocks, self._chains):
            d.pop(rid, None)
        return False, None

    # ---- worker side ----

    def register_kv_caches(self, kv_caches):
        """Each layer's paged cache, blocks first (num_blocks, 2, ...) or K/V
        first (2, num_blocks, ...), as vLLM's attention backends make them."""
        layers = []
        for name in sorted(kv_caches):
            t = kv_caches[name]
            if t.dim() == 5 and t.shape[0] == self._num_blocks and t.shape[1] == 2:
                layers.append((name, t, True))
            elif t.dim() == 5 and t.shape[0] == 2 and t.shape[1] == self._num_blocks:
                layers.append((name, t, False))
            else:
                raise ValueError("MarukvConnector: layer %s's KV cache has shape %s, neither "
                                 "(num_blocks, 2, block, heads, size) nor (2, num_blocks, ...)"
                                 % (name, tuple(t.shape)))
        for name, t, _ in layers:
            if not t[0, 0].is_contiguous():
                raise ValueError("MarukvConnector: layer %s's KV cache is not contiguous "
                                 "per block (strides %s)" % (name, t.stride()))
        self._layers = layers
        one = layers[0][1]
        self._block_bytes = len(layers) * 2 * self._bs * self._heads * self._head_size * \
            one.element_size()
        pool = self._open(readonly=not self._saves)
        self._cuda = one.is_cuda
        if self._cuda:
            self._registered = _cuda.Registration(*pool.data_mapping(), self._piece,
                                                  not self._saves, "MarukvConnector")

    def _block_parts(self, block_id):
        """(K, V) of a block in each layer: tensors of [block, heads, size]."""
        for _, t, blocks_first in self._layers:
            yield (t[block_id, 0], t[block_id, 1]) if blocks_first else \
                (t[0, block_id], t[1, block_id])

    def _copy(self, raw, block_id, load):
        """Between a pool block's bytes (a uint8 tensor) and vLLM's block.
        On CUDA the copies are queued on the current stream: the caller
        synchronizes before the pool's bytes are published or released."""
        part = self._bs * self._heads * self._head_size * self._layers[0][1].element_size()
        pieces = self._registered.pieces if self._registered is not None else None
        off = 0
        for k, v in self._block_parts(block_id):
            for t in (k, v):
                flat = t.view(torch.uint8).view(-1)
                for at, n in _cuda.split(raw.data_ptr() + off, part, pieces):
                    pooled, dev = raw[off + at:off + at + n], flat[at:at + n]
                    if load:
                        dev.copy_(pooled, non_blocking=self._cuda)
                    else:
                        pooled.copy_(dev, non_blocking=self._cuda)
                off += part

    def start_load_kv(self, forward_context, **kwargs):
        meta = self._get_connector_metadata()
        prefix = self._prefix(self._tp_rank)
        for load in meta.loads:
            try:
                views = self._pool.get_batch([prefix + h for h in load.hashes])
            except marukv.Error:
                self._errors.update(load.block_ids)
                continue
            try:
                for i, view in enumerate(views):
                    if view is None or len(view) != self._block_bytes:
                        # this block and every one after it: vLLM recomputes them
                        self._errors.update(load.block_ids[i:])
                        break
                    with warnings.catch_warnings():
                        # a view is read-only, and only read here
                        warnings.filterwarnings("ignore", "The given buffer is not writable")
                        raw = torch.frombuffer(view, dtype=torch.uint8)
                    self._copy(raw, load.block_ids[i], load=True)
                    del raw
            finally:
                # the copies done before the pool's pages may be reused
                if self._cuda:
                    torch.cuda.current_stream().synchronize()
                for view in views:
                    if view is not None:
                        view.release()

    def wait_for_layer_load(self, layer_name):
        pass

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        pass

    def wait_for_save(self):
        """Every new full block: allocated, filled from every layer, then
        published without waiting (its parent the block before it), so the
        next block fills while the lease holder registers this one; on
        CUDA all blocks' copies are queued first, and each block published
        once its own are done.  Returns when every publish has an answer."""
        meta = self._get_connector_metadata()
        prefix = self._prefix(self._tp_rank)
        tickets = []
        for save in meta.saves:
            parent = prefix + save.parent if save.parent else None
            blocks, events = [], []
            try:
                for h, block_id in zip(save.hashes, save.block_ids):
                    buf = self._pool.alloc(self._block_bytes)
                    blocks.append((prefix + h, buf))
                    raw = torch.frombuffer(buf, dtype=torch.uint8)
                    self._copy(raw, block_id, load=False)
                    del raw
                    if self._cuda:
                        events.append(torch.cuda.Event())
                        events[-1].record()
                    else:
                        tickets.append(self._pool.publish_async(prefix + h, buf, parent=parent))
                        parent = prefix + h
                for (key, buf), done in zip(blocks, events):
                    done.synchronize()
                    tickets.append(self._pool.publish_async(key, buf, parent=parent))
                    parent = key
            except marukv.Error:
                # the rest of the chain is not cached, and nothing is half-visible:
                # a later request recomputes it
                self.save_errors += 1
            finally:
                if events:
                    torch.cuda.current_stream().synchronize()
                for _, buf in blocks:
                    if not buf.consumed:
                        self._pool.abort(buf)
        for t in tickets:
            try:
                self._pool.wait(t)
            except marukv.Exists:
                pass            # another engine saved it first: the chain is shared
            except marukv.Error:
                self.save_errors += 1

    def get_block_ids_with_load_errors(self):
        errors, self._errors = self._errors, set()
        return errors
