"""The KV-cache coordinator — vllm/v1/core/kv_cache_coordinator.py (vLLM 0.33, ``coord``): one
block pool shared by one single-type manager per KV-cache group.

  * ``UnitaryKVCacheCoordinator`` — one group (coord:531-594);
  * ``HybridKVCacheCoordinator`` — several (coord:611-941): groups with equal specs are merged
    into one *attention group* looked up together (a block hits only if its hash is cached under
    every one of their group ids), full attention sorted first; the hit length is reconciled by
    a fixed-point search in which each attention group can only lower it;
  * ``KVCacheCoordinatorNoPrefixCache`` — prefix caching off (coord:475-528): no lookups.

Every coordinator allocates group by group in group order, and frees group 0 first, then 1, ...,
each group's table reversed (coord:404-412): one ``free_blocks`` call per group.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from blockviz.core.block import KVCacheBlock
from blockviz.core.block_pool import BlockPool
from blockviz.core.kv_cache_interface import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheSpec,
    SlidingWindowSpec,
    cdiv,
    get_kv_cache_spec_sliding_window,
)
from blockviz.core.request import Request
from blockviz.core.single_type_kv_cache_manager import (
    SingleTypeKVCacheManager,
    get_manager_for_kv_cache_spec,
)


def validate_prefix_cache_retention_interval(retention_interval: int | None,
                                             scheduler_block_size: int,
                                             specs: Sequence[KVCacheSpec]) -> str | None:
    """Why vLLM refuses this retention interval, or None (coord:33-62)."""
    if retention_interval is None:
        return None
    if not any(isinstance(s, SlidingWindowSpec) for s in specs):
        if retention_interval == 0:
            return None
        return ("prefix_cache_retention_interval is set but this model has no sliding-window "
                "KV-cache group, so retention has no effect; set it to 0")
    if retention_interval < 0 or retention_interval % scheduler_block_size != 0:
        return (f"prefix_cache_retention_interval ({retention_interval}) must be non-negative "
                f"and a multiple of the block size ({scheduler_block_size})")
    return None


def replay_boundaries(num_prompt_tokens: int) -> tuple[int, ...]:
    """Where a later request replaying the prompt can resume: ``num_prompt_tokens - 1`` (a
    resend's hit is capped there; coord:65-86, without EAGLE)."""
    return (num_prompt_tokens - 1,)


class KVCacheCoordinator:
    """coord:89-473: what every coordinator shares."""

    def __init__(self, kv_cache_config: KVCacheConfig, max_model_len: int,
                 max_in_flight_tokens: int, enable_caching: bool, enable_kv_cache_events: bool,
                 *, free_order: str = "split", sink=None) -> None:
        self.kv_cache_config = kv_cache_config
        specs = kv_cache_config.kv_cache_groups
        self.scheduler_block_size = specs[0].block_size   # equal block sizes in every group
        self.block_pool = BlockPool(
            kv_cache_config.num_blocks, enable_caching, free_order=free_order,
            enable_kv_cache_events=enable_kv_cache_events, sink=sink,
            num_kv_cache_groups=len(specs),
            kv_cache_event_metadata=tuple((s.kind, get_kv_cache_spec_sliding_window(s))
                                          for s in specs))
        self.single_type_managers: tuple[SingleTypeKVCacheManager, ...] = tuple(
            get_manager_for_kv_cache_spec(spec, self.block_pool, enable_caching, i,
                                          max_in_flight_tokens, max_model_len)
            for i, spec in enumerate(specs))
        self.retention_interval = kv_cache_config.prefix_cache_retention_interval
        problem = validate_prefix_cache_retention_interval(
            self.retention_interval, self.scheduler_block_size, specs)
        if problem:
            raise ValueError(problem)

    def get_num_blocks_to_allocate(self, request_id: str, num_tokens: int,
                                   new_computed_blocks: tuple[Sequence[KVCacheBlock], ...],
                                   total_computed_tokens: int,
                                   apply_admission_cap: bool = False) -> int:
        """The sum over groups (coord:193-261)."""
        return sum(m.get_num_blocks_to_allocate(request_id, num_tokens, new_computed_blocks[i],
                                                total_computed_tokens, apply_admission_cap)
                   for i, m in enumerate(self.single_type_managers))

    def allocate_new_computed_blocks(self, request_id: str,
                                     new_computed_blocks: tuple[Sequence[KVCacheBlock], ...],
                                     num_local_computed_tokens: int,
                                     num_external_computed_tokens: int) -> None:
        """Every group's hits first, then every group's external blocks (coord:263-313)."""
        managers = self.single_type_managers
        if any(request_id in m.num_cached_block for m in managers):
            return   # a running request gets no new hits
        for i, m in enumerate(managers):
            m.add_local_computed_blocks(request_id, new_computed_blocks[i],
                                        num_local_computed_tokens, num_external_computed_tokens)
        if num_external_computed_tokens > 0:
            for m in managers:
                m.allocate_external_computed_blocks(request_id, num_local_computed_tokens,
                                                    num_external_computed_tokens)

    def allocate_new_blocks(self, request_id: str,
                            num_tokens: int) -> tuple[list[KVCacheBlock], ...]:
        """Group by group, in group order, each from the head of the queue (coord:315-348)."""
        return tuple(m.allocate_new_blocks(request_id, num_tokens)
                     for m in self.single_type_managers)

    def get_num_cacheable_tokens(self, num_computed_tokens: int) -> int:
        return num_computed_tokens

    def cache_blocks(self, request: Request, num_computed_tokens: int) -> None:
        """Each group caches what its mask keeps (coord:358-381)."""
        boundaries = replay_boundaries(request.num_prompt_tokens)
        n = self.get_num_cacheable_tokens(num_computed_tokens)
        for m in self.single_type_managers:
            if m.enable_caching:
                m.cache_blocks(request, n, self.retention_interval, boundaries)

    def reset_prefix_cache(self) -> bool:
        return self.block_pool.reset_prefix_cache()

    def free(self, request_id: str) -> None:
        """Group 0 first, then 1, ...; each table reversed (coord:404-412)."""
        for m in self.single_type_managers:
            m.free(request_id)

    def remove_skipped_blocks(self, request_id: str, processed_computed_tokens: int) -> None:
        """Every group's out-of-window blocks become null (coord:433-454)."""
        for m in self.single_type_managers:
            m.remove_skipped_blocks(request_id, processed_computed_tokens)

    def get_blocks(self, request_id: str) -> tuple[list[KVCacheBlock], ...]:
        return tuple(m.req_to_blocks.get(request_id) or [] for m in self.single_type_managers)

    def find_longest_cache_hit(self, block_hashes: Sequence[bytes], max_cache_hit_length: int
                               ) -> tuple[tuple[list[KVCacheBlock], ...], int, int]:
        """(per-group hit blocks, the hit length, uncached shared-prefix tokens)."""
        raise NotImplementedError


class KVCacheCoordinatorNoPrefixCache(KVCacheCoordinator):
    """Prefix caching off: every lookup misses (coord:475-528)."""

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        return tuple([] for _ in self.single_type_managers), 0, 0


class UnitaryKVCacheCoordinator(KVCacheCoordinator):
    """One group (coord:531-594)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.kv_cache_spec = self.kv_cache_config.kv_cache_groups[0]
        self.block_size = self.kv_cache_spec.block_size

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        blocks, hit_length = type(self.single_type_managers[0]).find_longest_cache_hit(
            block_hashes, max_cache_hit_length, [0], self.block_pool, self.kv_cache_spec,
            self.block_size)
        return blocks, hit_length, 0


class SpecGroup(NamedTuple):
    """KV-cache groups with one spec, looked up together (coord:597-608)."""
    spec: KVCacheSpec
    group_ids: list[int]
    manager_cls: type[SingleTypeKVCacheManager]


class HybridKVCacheCoordinator(KVCacheCoordinator):
    """Several groups (coord:611-941)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.verify_and_split_kv_cache_groups()

    def verify_and_split_kv_cache_groups(self) -> None:
        """Equal specs merge into one attention group; full attention first (coord:718-769)."""
        self.attention_groups: list[SpecGroup] = []
        for i, spec in enumerate(self.kv_cache_config.kv_cache_groups):
            manager_cls = type(self.single_type_managers[i])
            for group in self.attention_groups:
                if group.spec == spec and group.manager_cls is manager_cls:
                    group.group_ids.append(i)
                    break
            else:
                self.attention_groups.append(SpecGroup(spec, [i], manager_cls))
        self.attention_groups.sort(key=lambda g: not isinstance(g.spec, FullAttentionSpec))

    def get_num_cacheable_tokens(self, num_computed_tokens: int) -> int:
        """Only what a hit could match: rounded down to the block size (coord:771-804)."""
        return num_computed_tokens // self.scheduler_block_size * self.scheduler_block_size

    def find_longest_cache_hit(self, block_hashes, max_cache_hit_length):
        """The fixed-point search (coord:806-941): each attention group accepts the candidate
        length or lowers it; any lowering restarts the pass, until none lowers it. With exactly
        two attention groups, full attention first, one pass is enough. Full attention's blocks
        are then cut to the final length; the longest single-group hit beyond it is an uncached
        shared prefix."""
        num_groups = len(self.single_type_managers)
        hit_length = max_cache_hit_length
        longest_hit_length = 0
        hit_blocks_by_group: list[list[KVCacheBlock] | None] = [None] * num_groups
        hit_length_by_group = [0] * num_groups
        simple = (len(self.attention_groups) == 2
                  and isinstance(self.attention_groups[0].spec, FullAttentionSpec))
        align = self.scheduler_block_size
        while True:
            curr_hit_length = hit_length
            for spec, group_ids, manager_cls in self.attention_groups:
                first = group_ids[0]
                if isinstance(spec, FullAttentionSpec) and hit_blocks_by_group[first] is not None:
                    # downward-closed: looked up once, then only cut
                    curr_hit_length = min(curr_hit_length, hit_length_by_group[first])
                    continue
                hit_blocks, new_hit_length = manager_cls.find_longest_cache_hit(
                    block_hashes, curr_hit_length, group_ids, self.block_pool, spec, align)
                curr_hit_length = new_hit_length
                for gid, blocks in zip(group_ids, hit_blocks):
                    hit_blocks_by_group[gid] = blocks
                    hit_length_by_group[gid] = new_hit_length
                longest_hit_length = max(longest_hit_length, curr_hit_length)
            if curr_hit_length >= hit_length:
                break
            hit_length = curr_hit_length
            if simple:
                break
        for spec, group_ids, _ in self.attention_groups:
            if not isinstance(spec, FullAttentionSpec):
                continue
            num_blocks = cdiv(hit_length, spec.block_size)
            for gid in group_ids:
                blocks = hit_blocks_by_group[gid]
                if blocks is not None:
                    del blocks[num_blocks:]
                    hit_length_by_group[gid] = hit_length
        cache_hit_blocks = tuple(b if b is not None else [] for b in hit_blocks_by_group)
        return cache_hit_blocks, hit_length, longest_hit_length - hit_length


def get_kv_cache_coordinator(kv_cache_config: KVCacheConfig, max_model_len: int,
                             max_in_flight_tokens: int, enable_caching: bool,
                             enable_kv_cache_events: bool, **kwargs) -> KVCacheCoordinator:
    """coord:944-1052."""
    if not enable_caching:
        cls: type[KVCacheCoordinator] = KVCacheCoordinatorNoPrefixCache
    elif len(kv_cache_config.kv_cache_groups) == 1:
        cls = UnitaryKVCacheCoordinator
    else:
        cls = HybridKVCacheCoordinator
    return cls(kv_cache_config, max_model_len, max_in_flight_tokens, enable_caching,
               enable_kv_cache_events, **kwargs)
