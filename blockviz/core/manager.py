"""KVCacheManager — mirrors vllm/v1/core/kv_cache_manager.py (vLLM 0.33, ``kvm``) over its
coordinator (blockviz.core.kv_cache_coordinator): one shared block pool, one single-type manager
(block tables) per KV-cache group. Without ``kv_cache_groups``, one full-attention group.
Hash block size = block size in every group. The contract:

  * ``get_computed_blocks`` — the longest hit, capped at ``num_tokens - 1`` tokens (the last
    token's logits must be computed), one list of blocks per group, reconciled across groups;
    and the shared-prefix boundary (kvm:262-325). Nothing is touched yet.
  * ``allocate_slots`` (kvm:380-627) — with ``full_sequence_must_fit`` first the admission gate
    (the whole sequence, each group capped by its admission cap); then every group's
    out-of-window blocks become the null block; then a capacity check that counts the blocks
    still needed *plus the hit blocks that sit in the free queue* (touching them takes them out
    of it); if short, return None and change nothing more. Otherwise touch the hits, append
    them to the tables, take new blocks from the head of the free queue group by group, and
    cache every block that is full as of ``min(computed + new tokens, num_tokens)`` — at
    scheduling time, before the forward pass.
  * ``free`` — each group's table handed to ``BlockPool.free_blocks`` reversed (group 0 first),
    so tail blocks are evicted first.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from blockviz.core.block import KVCacheBlock
from blockviz.core.kv_cache_coordinator import get_kv_cache_coordinator
from blockviz.core.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheSpec, cdiv
from blockviz.core.ops import AllocFailed, Lookup, OpSink
from blockviz.core.request import Request, RequestStatus

__all__ = ["KVCacheBlocks", "KVCacheManager", "PrefixCacheStats", "cdiv"]

# vLLM's KVCacheBlocks.blocks: one list of blocks per KV-cache group
KVCacheBlocks = tuple


@dataclass
class PrefixCacheStats:
    """vLLM's ``PrefixCacheStats`` (vllm/v1/metrics/stats.py). vLLM's is per interval (each
    ``make_stats`` swaps in a new one): that is ``KVCacheManager.interval_prefix_cache_stats``
    here, taken by ``make_prefix_cache_stats``; blockviz's ``prefix_cache_stats`` is cumulative
    from the start.

    Recorded once per successful admission that looked the request up: a request never preempted
    adds to ``requests``/``queries``/``hits``; a resumed one only to the ``preempted_*`` fields.
    vLLM's counters ``vllm:prefix_cache_queries/hits`` add up ``queries``/``hits``: resumed
    re-lookups are not in them (nor in any exported metric).
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
                 sink: OpSink | None = None, max_model_len: int = 1 << 20,
                 kv_cache_groups: Sequence[KVCacheSpec] | None = None,
                 prefix_cache_retention_interval: int | None = 0,
                 max_in_flight_tokens: int | None = None, watermark: float = 0.0) -> None:
        self.block_size = block_size
        self.max_model_len = max_model_len
        self.enable_caching = enable_caching
        specs = tuple(kv_cache_groups) if kv_cache_groups else (FullAttentionSpec(block_size),)
        self.kv_cache_config = KVCacheConfig(num_gpu_blocks, specs, prefix_cache_retention_interval)
        # kvm:172-173: unset, the admission cap falls back to max_model_len (no cap)
        self.coordinator = get_kv_cache_coordinator(
            self.kv_cache_config, max_model_len,
            max_model_len if max_in_flight_tokens is None else max_in_flight_tokens,
            enable_caching, enable_kv_cache_events, free_order=free_order, sink=sink)
        self.block_pool = self.coordinator.block_pool
        self.num_kv_cache_groups = len(specs)
        managers = self.coordinator.single_type_managers
        # group 0's tables and cached counts (the one group's, without kv_cache_groups)
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = managers[0].req_to_blocks
        self.num_cached_block: dict[str, int] = managers[0].num_cached_block
        self.empty_kv_cache_blocks: KVCacheBlocks = tuple([] for _ in specs)
        # one full-attention group: nothing leaves a window, lookups are one list
        self._one_full_group = len(specs) == 1 and isinstance(specs[0], FullAttentionSpec)
        self.prefix_cache_stats = PrefixCacheStats()
        # vLLM's own prefix_cache_stats: this interval's, until make_prefix_cache_stats takes it
        self.interval_prefix_cache_stats = PrefixCacheStats()
        # the admission watermark: blocks kept free when a waiting or preempted request is
        # admitted while others run (kvm:207-210: of num_blocks, the null block included)
        self.watermark = watermark
        self.watermark_blocks = int(watermark * num_gpu_blocks)
        # the last Lookup recorded: a waiting request that cannot be admitted is looked up again
        # every engine step with the same result, and its records share one op (not one tuple
        # of hit blocks per step: 32 KB a step at 4,000 hit blocks)
        self._last_lookup: Lookup | None = None

    @property
    def sink(self) -> OpSink | None:
        return self.block_pool.sink

    @property
    def usage(self) -> float:
        return self.block_pool.get_usage()

    @property
    def single_type_managers(self):
        return self.coordinator.single_type_managers

    def prefix_cache_lookup_enabled(self, request: Request) -> bool:
        """Whether the local prefix cache is looked up for this request: caching on, and the
        request reads the cache (a request asking for prompt logprobs does not)."""
        return self.enable_caching and not request.skip_reading_prefix_cache

    def get_computed_blocks(self, request: Request) -> tuple[KVCacheBlocks, int, int]:
        """(hit blocks per group, hit tokens, shared-prefix boundary): the hit reconciled
        across the groups; the boundary (0: none) is where a group's longer hit ends when
        another group stopped it short (kvm:262-325)."""
        if not self.prefix_cache_lookup_enabled(request):
            return self.empty_kv_cache_blocks, 0, 0
        max_cache_hit_length = request.num_tokens - 1
        blocks, num_tokens, num_uncached = self.coordinator.find_longest_cache_hit(
            request.block_hashes, max_cache_hit_length)
        boundary = num_tokens + num_uncached if num_uncached else 0
        sink = self.block_pool.sink
        if sink is not None:
            if self._one_full_group:
                op = Lookup(request.request_id, tuple(b.block_id for b in blocks[0]),
                            max_cache_hit_length, len(request.block_hashes))
            else:
                op = Lookup(request.request_id,
                            tuple(b.block_id for g in blocks for b in g if not b.is_null),
                            max_cache_hit_length, len(request.block_hashes), num_tokens, boundary)
            if op == self._last_lookup:
                op = self._last_lookup
            self._last_lookup = op
            sink.on_op(op)
        if not any(blocks):
            blocks = self.empty_kv_cache_blocks
        return blocks, num_tokens, boundary

    def get_num_blocks_to_allocate(self, request: Request, num_tokens: int,
                                   new_computed_blocks: KVCacheBlocks,
                                   total_computed_tokens: int = 0,
                                   apply_admission_cap: bool = False) -> int:
        """Free-queue blocks the allocation would consume, over every group: new blocks + hits
        that are free now."""
        return self.coordinator.get_num_blocks_to_allocate(
            request.request_id, num_tokens, new_computed_blocks or self.empty_kv_cache_blocks,
            total_computed_tokens, apply_admission_cap)

    def allocate_slots(self, request: Request, num_new_tokens: int,
                       num_new_computed_tokens: int = 0,
                       new_computed_blocks: KVCacheBlocks | None = None,
                       num_external_computed_tokens: int = 0, *,
                       delay_cache_blocks: bool = False,
                       full_sequence_must_fit: bool = False,
                       reserved_blocks: int = 0,
                       has_scheduled_reqs: bool = False) -> KVCacheBlocks | None:
        """Give the request slots for ``num_new_tokens`` more tokens: the new blocks, one list
        per group; None (and no change but out-of-window frees) if short.

        ``full_sequence_must_fit`` (the scheduler's admission gate): first check that the *whole*
        sequence would fit, not only this chunk. ``delay_cache_blocks``: allocate but cache
        nothing (an asynchronous KV load fills the blocks later). ``reserved_blocks``: free
        blocks that must stay free (what in-flight prefills still need). ``has_scheduled_reqs``
        (some request runs): a waiting or preempted request must also leave the watermark's
        blocks free (kvm:518-525)."""
        if num_new_tokens == 0 and num_external_computed_tokens == 0 and num_new_computed_tokens == 0:
            raise ValueError("num_new_tokens must be greater than 0 when there are no "
                             "computed tokens to adopt")
        rid = request.request_id
        pool = self.block_pool
        coord = self.coordinator
        hits = new_computed_blocks if new_computed_blocks and any(new_computed_blocks) \
            else self.empty_kv_cache_blocks
        num_local_computed = request.num_computed_tokens + num_new_computed_tokens
        total_computed = min(num_local_computed + num_external_computed_tokens,
                             self.max_model_len)
        watermark = (self.watermark_blocks if has_scheduled_reqs and request.status in (
            RequestStatus.WAITING, RequestStatus.PREEMPTED) else 0)
        if full_sequence_must_fit:
            full = min(request.num_tokens, self.max_model_len)
            needed = coord.get_num_blocks_to_allocate(rid, full, hits, total_computed,
                                                      apply_admission_cap=True)
            if needed + watermark > pool.get_num_free_blocks():
                if pool.sink is not None:
                    pool.sink.on_op(AllocFailed(rid, needed, pool.get_num_free_blocks(),
                                                full_sequence=True, watermark_blocks=watermark))
                return None
        num_tokens_need_slot = min(total_computed + num_new_tokens, self.max_model_len)

        # kvm:564-568: free what left the window first, on the processed-token basis
        if not self._one_full_group:
            coord.remove_skipped_blocks(rid, max(0, total_computed - request.num_in_flight_tokens))

        needed = coord.get_num_blocks_to_allocate(
            rid, num_tokens_need_slot, hits, num_local_computed + num_external_computed_tokens)
        if needed + watermark > pool.get_num_free_blocks() - reserved_blocks:
            if pool.sink is not None:
                pool.sink.on_op(AllocFailed(rid, needed, pool.get_num_free_blocks(),
                                            watermark_blocks=watermark))
            return None

        if hits is not self.empty_kv_cache_blocks or num_external_computed_tokens > 0:
            coord.allocate_new_computed_blocks(rid, hits, num_local_computed,
                                               num_external_computed_tokens)
        new_blocks = coord.allocate_new_blocks(rid, num_tokens_need_slot)

        if self.enable_caching and not delay_cache_blocks:
            coord.cache_blocks(request, min(total_computed + num_new_tokens, request.num_tokens))
        return new_blocks

    def cache_blocks(self, request: Request, num_tokens: int) -> None:
        """Cache the request's blocks that are full as of ``num_tokens`` (and have hashes)."""
        if self.enable_caching:
            self.coordinator.cache_blocks(request, num_tokens)

    def free(self, request: Request) -> None:
        """Release the request's tables, group 0 first, each reversed: its tail blocks become
        the first to evict."""
        self.coordinator.free(request.request_id)

    def get_block_ids(self, request_id: str) -> tuple[list[int], ...]:
        """One list of block ids per group, the null block as 0 (kvm:736-738)."""
        return tuple([b.block_id for b in blocks]
                     for blocks in self.coordinator.get_blocks(request_id))

    def record_prefix_cache_stats(self, request: Request, num_hits: int) -> None:
        """At admission, for a request that looked the cache up (vLLM: not when the lookup was
        off — caching off, or a request that skips reading the cache)."""
        if self.prefix_cache_lookup_enabled(request):
            for stats in (self.prefix_cache_stats, self.interval_prefix_cache_stats):
                stats.record(request.num_tokens, num_hits, preempted=request.num_preemptions > 0)

    def make_prefix_cache_stats(self) -> PrefixCacheStats:
        """vLLM's ``make_prefix_cache_stats`` (kvm:238-249): this interval's stats, and a new
        interval begins."""
        stats, self.interval_prefix_cache_stats = self.interval_prefix_cache_stats, PrefixCacheStats()
        return stats

    def reset_prefix_cache(self) -> bool:
        if not self.coordinator.reset_prefix_cache():
            return False
        self.prefix_cache_stats.reset = self.interval_prefix_cache_stats.reset = True
        return True

    def take_events(self):
        return self.block_pool.take_events()
