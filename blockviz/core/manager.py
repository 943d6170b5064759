"""KVCacheManager — mirrors vllm/v1/core/kv_cache_manager.py together with the single-group path
it takes through kv_cache_coordinator.py (``UnitaryKVCacheCoordinator``) and
single_type_kv_cache_manager.py (``FullAttentionManager``) in vLLM 0.33.

One full-attention KV cache group, hash block size = block size. The contract:

  * ``get_computed_blocks`` — the longest run of cached blocks from the start of the request, capped
    at ``num_tokens - 1`` tokens (the last token's logits must be computed). Nothing is touched yet.
  * ``allocate_slots`` — first a capacity check that counts the blocks still needed *plus the hit
    blocks that sit in the free queue* (touching them takes them out of it); if short, return None
    and change nothing. Otherwise touch the hits, append them to the table, take new blocks from the
    head of the free queue, and cache every block that is full as of
    ``min(computed + new tokens, num_tokens)`` — at scheduling time, before the forward pass.
  * ``free`` — hand the table to ``BlockPool.free_blocks`` reversed, so tail blocks are evicted first.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from blockviz.core.block import KVCacheBlock
from blockviz.core.block_pool import BlockPool
from blockviz.core.ops import AllocFailed, Lookup, OpSink
from blockviz.core.request import Request


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class PrefixCacheStats:
    """vLLM's ``PrefixCacheStats`` (vllm/v1/metrics/stats.py), cumulative from the start.

    Recorded once per successful admission that looked the request up: a request never preempted
    adds to ``requests``/``queries``/``hits``; a resumed one only to the ``preempted_*`` fields.
    vLLM's reported hit rate is ``hits / queries``: resumed re-lookups are not in it.
    """
    requests: int = 0
    queries: int = 0            # tokens of the requests looked up
    hits: int = 0               # of those, tokens found in the prefix cache
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    reset: bool = False         # reset_prefix_cache succeeded (vLLM: the hit-rate window restarts)
    # the connector's stats only: hit tokens by the tier they came from (vLLM CacheHitSource
    # values, e.g. "host" for the CPU tier), never for a resumed request
    hits_by_source: dict[str, int] = field(default_factory=dict)

    def record(self, num_tokens: int, num_hits: int, preempted: bool,
               hits_by_source: dict[str, int] | None = None) -> None:
        for source, n in (hits_by_source or {}).items():
            self.hits_by_source[source] = self.hits_by_source.get(source, 0) + n
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
            return
        self.requests += 1
        self.queries += num_tokens
        self.hits += num_hits

    @property
    def total_queries(self) -> int:
        return self.queries + self.preempted_queries

    @property
    def total_hits(self) -> int:
        return self.hits + self.preempted_hits


class KVCacheManager:
    def __init__(self, num_gpu_blocks: int, block_size: int, *, enable_caching: bool = True,
                 free_order: str = "split", enable_kv_cache_events: bool = True,
                 sink: OpSink | None = None, max_model_len: int = 1 << 20) -> None:
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        self.block_pool = BlockPool(num_gpu_blocks, enable_caching, free_order=free_order,
                                    enable_kv_cache_events=enable_kv_cache_events, sink=sink)
        # request id -> its block table (vLLM's req_to_blocks of the one group)
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        # request id -> how many of its blocks are cached; only for requests holding blocks
        self.num_cached_block: dict[str, int] = {}
        self.prefix_cache_stats = PrefixCacheStats()

    @property
    def sink(self) -> OpSink | None:
        return self.block_pool.sink

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """(hit blocks, hit tokens): walk the request's hashes left to right, stop at the first miss."""
        if not self.enable_caching:
            return [], 0
        max_cache_hit_length = request.num_tokens - 1
        get = self.block_pool.get_cached_block
        hits: list[KVCacheBlock] = []
        for block_hash in request.block_hashes[:max_cache_hit_length // self.block_size]:
            block = get(block_hash)
            if block is None:
                break
            hits.append(block)
        sink = self.block_pool.sink
        if sink is not None:
            sink.on_op(Lookup(request.request_id, tuple(b.block_id for b in hits),
                              max_cache_hit_length, len(request.block_hashes)))
        return hits, len(hits) * self.block_size

    def get_num_blocks_to_allocate(self, request: Request, num_tokens: int,
                                   new_computed_blocks: Sequence[KVCacheBlock]) -> int:
        """Free-queue blocks the allocation would consume: new blocks + hits that are free now."""
        num_required = cdiv(num_tokens, self.block_size)
        num_held = len(self.req_to_blocks.get(request.request_id, ()))
        if request.request_id in self.num_cached_block:
            # A running request: no new hits, only growth.
            return max(num_required - num_held, 0)
        num_new = max(num_required - (len(new_computed_blocks) + num_held), 0)
        num_evictable = sum(1 for b in new_computed_blocks if b.ref_cnt == 0 and not b.is_null)
        return num_new + num_evictable

    def allocate_slots(self, request: Request, num_new_tokens: int,
                       num_new_computed_tokens: int = 0,
                       new_computed_blocks: Sequence[KVCacheBlock] = (),
                       num_external_computed_tokens: int = 0, *,
                       delay_cache_blocks: bool = False,
                       full_sequence_must_fit: bool = False,
                       reserved_blocks: int = 0) -> list[KVCacheBlock] | None:
        """Give the request slots for ``num_new_tokens`` more tokens; None (and no change) if short.

        ``full_sequence_must_fit`` (the scheduler's admission gate): first check that the *whole*
        sequence would fit, not only this chunk. ``delay_cache_blocks``: allocate but cache
        nothing (an asynchronous KV load fills the blocks later). ``reserved_blocks``: free
        blocks that must stay free (what in-flight prefills still need)."""
        if num_new_tokens == 0 and num_external_computed_tokens == 0 and num_new_computed_tokens == 0:
            raise ValueError("num_new_tokens must be greater than 0 when there are no "
                             "computed tokens to adopt")
        rid = request.request_id
        pool = self.block_pool
        num_local_computed = request.num_computed_tokens + num_new_computed_tokens
        total_computed = min(num_local_computed + num_external_computed_tokens,
                             self.max_model_len)
        if full_sequence_must_fit:
            full = min(request.num_tokens, self.max_model_len)
            needed = self.get_num_blocks_to_allocate(request, full, new_computed_blocks)
            if needed > pool.get_num_free_blocks():
                if pool.sink is not None:
                    pool.sink.on_op(AllocFailed(rid, needed, pool.get_num_free_blocks(),
                                                full_sequence=True))
                return None
        num_tokens_need_slot = min(total_computed + num_new_tokens, self.max_model_len)

        needed = self.get_num_blocks_to_allocate(request, num_tokens_need_slot, new_computed_blocks)
        if needed > pool.get_num_free_blocks() - reserved_blocks:
            if pool.sink is not None:
                pool.sink.on_op(AllocFailed(rid, needed, pool.get_num_free_blocks()))
            return None

        if (new_computed_blocks or num_external_computed_tokens > 0) \
                and rid not in self.num_cached_block:
            self._add_computed_blocks(request, new_computed_blocks, total_computed,
                                      num_external_computed_tokens)

        req_blocks = self.req_to_blocks.setdefault(rid, [])
        num_new_blocks = cdiv(num_tokens_need_slot, self.block_size) - len(req_blocks)
        new_blocks = pool.get_new_blocks(num_new_blocks) if num_new_blocks > 0 else []
        req_blocks.extend(new_blocks)

        if self.enable_caching and not delay_cache_blocks:
            self.cache_blocks(request, min(total_computed + num_new_tokens, request.num_tokens))
        return new_blocks

    def _add_computed_blocks(self, request: Request, hits: Sequence[KVCacheBlock],
                             total_computed: int, num_external: int) -> None:
        """Touch the local hits and put them in the new table; then fresh blocks for the tokens
        the external tier supplies (touch first, so those allocations cannot evict the hits)."""
        req_blocks = self.req_to_blocks.setdefault(request.request_id, [])
        assert not req_blocks, "a request with blocks gets no new prefix hits"
        if self.enable_caching:
            self.block_pool.touch(hits)
        req_blocks.extend(hits)
        self.num_cached_block[request.request_id] = len(req_blocks)
        if num_external > 0:
            n = max(0, cdiv(total_computed, self.block_size) - len(req_blocks))
            req_blocks.extend(self.block_pool.get_new_blocks(n))

    def cache_blocks(self, request: Request, num_tokens: int) -> None:
        """Cache the request's blocks that are full as of ``num_tokens`` (and have hashes)."""
        rid = request.request_id
        num_cached = self.num_cached_block.get(rid, 0)
        num_hashed_tokens = len(request.block_hashes) * self.block_size
        num_full = min(num_tokens, num_hashed_tokens) // self.block_size
        if num_cached >= num_full:
            return
        self.block_pool.cache_full_blocks(request, self.req_to_blocks[rid], num_cached, num_full,
                                          self.block_size)
        self.num_cached_block[rid] = num_full

    def free(self, request: Request) -> None:
        """Release the request's table, reversed: its tail blocks become the first to evict."""
        blocks = self.req_to_blocks.pop(request.request_id, [])
        self.num_cached_block.pop(request.request_id, None)
        self.block_pool.free_blocks(reversed(blocks))

    def get_block_ids(self, request_id: str) -> list[int]:
        return [b.block_id for b in self.req_to_blocks.get(request_id, ())]

    def record_prefix_cache_stats(self, request: Request, num_hits: int) -> None:
        """At admission, for a request that looked the cache up (vLLM: only with caching on)."""
        if self.enable_caching:
            self.prefix_cache_stats.record(request.num_tokens, num_hits,
                                           preempted=request.num_preemptions > 0)

    def reset_prefix_cache(self) -> bool:
        if not self.block_pool.reset_prefix_cache():
            return False
        self.prefix_cache_stats.reset = True
        return True

    def take_events(self):
        return self.block_pool.take_events()
