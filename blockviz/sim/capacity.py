"""Capacity replay of a request trace: hit rate against pool size, under vLLM's rules.

**Sequence mode** (the Mooncake paper's method, "considering only the sequence of requests"):
requests in file order, each alone on the engine — ``get_computed_blocks``, ``allocate_slots``
for its whole prompt (which caches the prompt's full blocks), ``free``. Outputs are not cached
(the trace's hash ids cover the prompt only). This is blockviz's own :class:`KVCacheManager`
(``blockviz.core``), op recording and KV events off, on a pool of ``pool_blocks`` usable blocks
(plus vLLM's null block). A request whose allocation fails — in sequence mode exactly when it
needs more blocks than the pool has — is ``rejected`` and changes nothing. Per point:

  * ``queries`` / ``hits`` — prompt tokens of the admitted requests / of those, tokens found in
    the prefix cache (whole blocks, at most ``num_tokens - 1``: vLLM recomputes the last token);
  * ``requests`` / ``rejected`` — admitted / refused requests;
  * ``evictions`` — cached blocks whose hash left the prefix cache when the block was reused
    (vLLM's ``BlockRemoved`` events).

The **ceiling** is an infinite pool under the same rules: every request's full blocks stay
cached, hits are whole blocks up to ``num_tokens - 1``; queries count every request.

Prefix hashes: vLLM hashes each block's token ids, chained (``H_i = sha256((H_{i-1}, tokens_i))``).
A trace's tokens are derived from its hash ids (``blockviz.scenario.trace.prompt_token_ids``):
block ``i`` of a request (``block_size`` dividing 512) is sub-block ``k = i mod (512/block_size)``
of trace block ``j = i div (512/block_size)``, with tokens ``h_j*512 + k*block_size + 0..bs-1`` —
determined by ``(h_j, k)`` and determining it. So two requests' blocks ``i`` have equal chained
hashes exactly when their hash ids ``h_0..h_j`` are equal and ``k`` is too, and the replay keys a
block by ``K_j + k`` with ``K_j = blake2b-128(K_{j-1} + h_j)``: the same equalities as vLLM's
hashes of the derived tokens, without per-token work (the tests check it against the manager fed
real ``Request`` objects hashing those tokens with sha256: ``exact_tokens=True``).

Modes are registered in :data:`MODES`; a new one (a timed replay through the scheduler) is one
more :class:`Mode` whose ``run`` takes the same arguments and returns the same point fields.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from blockviz.core import BlockHasher, KVCacheManager, Request, RequestStatus
from blockviz.scenario.trace import (
    TRACE_BLOCK_TOKENS,
    TraceRequest,
    check_block_size,
    prompt_token_ids,
)

POINT_FIELDS = ("pool_blocks", "queries", "hits", "requests", "rejected", "evictions")
PROGRESS_EVERY = 256            # requests between progress reports
_ROOT = b"blockviz-trace-root"  # K_{-1}
_SUFFIX = [k.to_bytes(2, "little") for k in range(TRACE_BLOCK_TOKENS)]
Progress = Callable[[int], None]   # called with the number of requests done since the last call


def trace_block_keys(hash_ids: Iterable[int]) -> list[bytes]:
    """``K_j`` for each trace block: a 128-bit chain over the hash ids (prefix identity)."""
    keys: list[bytes] = []
    parent = _ROOT
    blake2b = hashlib.blake2b
    for h in hash_ids:
        parent = blake2b(parent + h.to_bytes(8, "little"), digest_size=16).digest()
        keys.append(parent)
    return keys


def block_keys(input_length: int, hash_ids: Iterable[int], block_size: int) -> list[bytes]:
    """The prefix keys of the request's full blocks of ``block_size`` tokens (see the module
    docstring: equal keys exactly where vLLM's hashes of the derived tokens are equal)."""
    per = TRACE_BLOCK_TOKENS // block_size
    keys = trace_block_keys(hash_ids)
    full = input_length // block_size
    if per == 1:
        return keys[:full]
    suffixes = _SUFFIX[:per]
    return [k + s for k in keys for s in suffixes][:full]


class SequenceRequest:
    """A trace request as KVCacheManager reads it in sequence mode: its id, its length and the
    keys of its full blocks. (The manager reads nothing else of a request on this path; the
    tests replay real ``blockviz.core.Request`` objects side by side and compare.)"""
    __slots__ = ("request_id", "num_tokens", "num_prompt_tokens", "block_hashes")
    num_computed_tokens = 0     # each request is admitted once, fresh
    num_preemptions = 0
    num_in_flight_tokens = 0
    status = RequestStatus.WAITING
    lora = None
    cache_salt = None
    mm_items = ()

    def __init__(self, request_id: str, num_tokens: int, block_hashes: list[bytes]) -> None:
        self.request_id = request_id
        self.num_tokens = self.num_prompt_tokens = num_tokens
        self.block_hashes = block_hashes


def _requests(trace: Iterable[TraceRequest], block_size: int, exact_tokens: bool):
    if exact_tokens:   # the reference path: real Requests hashing the derived tokens (slow)
        hasher = BlockHasher("sha256")
        for i, r in enumerate(trace):
            yield Request(f"r{i}", prompt_token_ids(r.input_length, r.hash_ids), hasher=hasher,
                          block_size=block_size)
        return
    for i, r in enumerate(trace):
        yield SequenceRequest(f"r{i}", r.input_length,
                              block_keys(r.input_length, r.hash_ids, block_size))


def replay_sequence(trace: Iterable[TraceRequest], *, block_size: int, pool_blocks: int,
                    free_order: str = "split", progress: Progress | None = None,
                    exact_tokens: bool = False) -> dict:
    """One point of sequence mode (see the module docstring): a dict with :data:`POINT_FIELDS`."""
    check_block_size(block_size)
    if pool_blocks < 1:
        raise ValueError(f"pool_blocks must be at least 1, not {pool_blocks}")
    manager = KVCacheManager(pool_blocks + 1, block_size, free_order=free_order,
                             enable_kv_cache_events=False, ops=None)
    get_computed_blocks, allocate_slots, free = (manager.get_computed_blocks,
                                                 manager.allocate_slots, manager.free)
    queries = hits = admitted = rejected = 0
    since = 0
    for req in _requests(trace, block_size, exact_tokens):
        blocks, num_hit = get_computed_blocks(req)
        n = req.num_tokens
        if allocate_slots(req, n - num_hit, num_hit, blocks) is None:
            rejected += 1
        else:
            admitted += 1
            queries += n
            hits += num_hit
            free(req)
        since += 1
        if progress is not None and since == PROGRESS_EVERY:
            progress(since)
            since = 0
    if progress is not None and since:
        progress(since)
    return {"pool_blocks": pool_blocks, "queries": queries, "hits": hits, "requests": admitted,
            "rejected": rejected, "evictions": manager.block_pool.num_evictions}


def ceiling(trace: Iterable[TraceRequest], *, block_size: int,
            progress: Progress | None = None) -> dict:
    """An infinite pool under vLLM's rules: ``{"queries", "hits"}`` over every request.

    Kept per trace block, not per vLLM block: ``seen[K_j]`` is the most full sub-blocks any
    request had in trace block ``j`` (a request with sub-block ``k`` full has ``0..k-1`` full
    too), so memory is one entry per distinct 512-token prefix block whatever ``block_size``."""
    check_block_size(block_size)
    per = TRACE_BLOCK_TOKENS // block_size
    seen: dict[bytes, int] = {}
    queries = hits = since = 0
    for r in trace:
        n = r.input_length
        limit = (n - 1) // block_size
        full_total = n // block_size
        hit = 0
        counting = True
        for j, key in enumerate(trace_block_keys(r.hash_ids)):
            full = min(per, full_total - j * per)   # this request's full sub-blocks in block j
            before = seen.get(key, 0)
            if counting:
                hit += min(before, full)
                counting = before >= full
            if full > before:
                seen[key] = full
        queries += n
        hits += min(hit, limit) * block_size
        since += 1
        if progress is not None and since == PROGRESS_EVERY:
            progress(since)
            since = 0
    if progress is not None and since:
        progress(since)
    return {"queries": queries, "hits": hits}


@dataclass(frozen=True)
class Mode:
    """A way of replaying a trace at one pool size. ``run(trace, block_size=, pool_blocks=,
    free_order=, progress=, **options)`` returns a dict with :data:`POINT_FIELDS` (a mode may add
    fields of its own after them)."""
    name: str
    run: Callable[..., dict]
    summary: str


MODES: dict[str, Mode] = {
    "sequence": Mode("sequence", replay_sequence,
                     "requests in file order, each alone: lookup, allocate the whole prompt, free"),
}


# -- capacity in bytes ------------------------------------------------------------------------
@dataclass(frozen=True)
class KVShape:
    """What one token's KV cache costs: layers × KV heads × head dim × 2 (K and V) × dtype bytes."""
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2        # fp16 / bf16

    @property
    def bytes_per_token(self) -> int:
        return self.layers * self.kv_heads * self.head_dim * 2 * self.dtype_bytes

    def describe(self) -> str:
        return (f"{self.layers} layers × {self.kv_heads} KV heads × head dim {self.head_dim} × 2 (K, V) "
                f"× {self.dtype_bytes} bytes")


# From each model's config.json (num_hidden_layers, num_key_value_heads, head_dim = hidden_size /
# num_attention_heads), full attention on every layer, a 16-bit KV cache.
KV_PRESETS: dict[str, KVShape] = {
    "llama-3-8b": KVShape(32, 8, 128),        # 128 KiB per token
    "llama-3-70b": KVShape(80, 8, 128),       # 320 KiB
    "llama-3.1-405b": KVShape(126, 8, 128),   # 504 KiB
    "mistral-7b": KVShape(32, 8, 128),        # 128 KiB
    "qwen2.5-7b": KVShape(28, 4, 128),        # 56 KiB
    "qwen2.5-72b": KVShape(80, 8, 128),       # 320 KiB
}


def pool_bytes(pool_blocks: int, block_size: int, bytes_per_token: int) -> int:
    """The KV memory a pool of ``pool_blocks`` blocks holds (vLLM allocates whole blocks)."""
    return pool_blocks * block_size * bytes_per_token
