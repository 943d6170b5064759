"""The managers of one KV-cache group each — vllm/v1/core/single_type_kv_cache_manager.py
(vLLM 0.33), for the three attention kinds blockviz models: ``FullAttentionManager``,
``SlidingWindowManager``, ``ChunkedLocalAttentionManager``.

A manager keeps its group's block table per request (``req_to_blocks``) and how many of those
blocks are cached (``num_cached_block``); every manager draws on the one shared ``BlockPool``.
What differs between kinds (file:line of the 0.33.0 wheel, ``stm`` = this file):

  * which tokens a request no longer attends to (``get_num_skipped_tokens``: none for full
    attention; ``max(0, n - W + 1)`` for a sliding window, stm:1148-1183; ``floor(n / C) * C`` for
    chunked-local, stm:1381-1425) — ``remove_skipped_blocks`` turns those whole blocks into the
    null block, walking backward from the last one and stopping at the first null
    (stm:655-720), and frees them in one call, highest index first;
  * how a hit is found (``find_longest_cache_hit``: full attention left to right, stm:743-838; a
    sliding window right to left for ``cdiv(W - 1, bs)`` contiguous blocks, stm:969-1064;
    chunked-local nulls up to the chunk of the limit, then contiguous hits, stm:1282-1379);
  * which full blocks are cached (``reachable_block_mask``: all, but a sliding window's
    retention mask, stm:1066-1146).

Op records (blockviz.core.ops) name the group: ``RemoveSkipped`` when blocks leave the window, and
the pool's records (``Popleft``, ``Touch``, ``Free``, ``Cache``) with ``group``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from blockviz.core.block import KVCacheBlock
from blockviz.core.block_pool import BlockPool
from blockviz.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    SlidingWindowSpec,
    cdiv,
)
from blockviz.core.ops import RemoveSkipped

if TYPE_CHECKING:
    from blockviz.core.request import Request


def trim_null_head(blocks: list[KVCacheBlock]) -> list[KVCacheBlock]:
    """``blocks`` without its leading null blocks (vLLM's ``trim_null_head``)."""
    n = 0
    for b in blocks:
        if not b.is_null:
            break
        n += 1
    return blocks[n:] if n else blocks


class SingleTypeKVCacheManager:
    """stm:49-737: what every kind shares."""

    def __init__(self, kv_cache_spec: KVCacheSpec, block_pool: BlockPool, enable_caching: bool,
                 kv_cache_group_id: int,
                 max_admission_blocks_per_request: int | None = None) -> None:
        self.kv_cache_spec = kv_cache_spec
        self.block_size = kv_cache_spec.block_size
        self.block_pool = block_pool
        self.enable_caching = enable_caching
        self.kv_cache_group_id = kv_cache_group_id
        # the admission gate's per-request cap (sliding window, chunked-local; stm:214-227)
        self.max_admission_blocks_per_request = max_admission_blocks_per_request
        # equal block sizes in every group: hits land on block boundaries
        self.cache_hit_alignment_tokens = kv_cache_spec.block_size
        # request id -> its table (vLLM: a defaultdict; here an entry exists once it holds
        # blocks, or once a hit or an allocation made it)
        self.req_to_blocks: dict[str, list[KVCacheBlock]] = {}
        # request id -> how many blocks of its table are cached (running requests only)
        self.num_cached_block: dict[str, int] = {}
        self._null_block = block_pool.null_block

    # -- allocation -----------------------------------------------------------------------
    def get_num_blocks_to_allocate(self, request_id: str, num_tokens: int,
                                   new_computed_blocks: Sequence[KVCacheBlock],
                                   total_computed_tokens: int,
                                   apply_admission_cap: bool = False) -> int:
        """Free-queue blocks an allocation of ``num_tokens`` slots would take (stm:176-266):
        new blocks past the skipped ones and the hits, plus hits that sit in the free queue."""
        num_required_blocks = cdiv(num_tokens, self.block_size)
        if apply_admission_cap and self.max_admission_blocks_per_request is not None:
            num_required_blocks = min(num_required_blocks, self.max_admission_blocks_per_request)
        num_req_blocks = len(self.req_to_blocks.get(request_id, ()))
        if request_id in self.num_cached_block:
            # a running request gets no new hits: only growth
            return max(num_required_blocks - num_req_blocks, 0)
        num_skipped_blocks = self.get_num_skipped_tokens(total_computed_tokens) // self.block_size
        num_local_computed_blocks = len(new_computed_blocks) + num_req_blocks
        num_new_blocks = max(
            num_required_blocks - max(num_skipped_blocks, num_local_computed_blocks), 0)
        # hits inside the skipped range are never touched (they become nulls)
        skip = max(0, num_skipped_blocks - num_req_blocks)
        num_evictable = 0
        for b in new_computed_blocks[skip:] if skip else new_computed_blocks:
            if b.ref_cnt == 0 and not b.is_null:
                num_evictable += 1
        return num_new_blocks + num_evictable

    def add_local_computed_blocks(self, request_id: str,
                                  new_computed_blocks: Sequence[KVCacheBlock],
                                  num_local_computed_tokens: int,
                                  num_external_computed_tokens: int) -> None:
        """A new request's hits (stm:268-325): touch those inside the window, pad the skipped
        part of the table with null blocks, and count them all as cached."""
        req_blocks = self.req_to_blocks.setdefault(request_id, [])
        assert not req_blocks, "a request with blocks gets no new prefix hits"
        num_total = num_local_computed_tokens + num_external_computed_tokens
        num_skipped_blocks = self.get_num_skipped_tokens(num_total) // self.block_size
        if num_skipped_blocks > 0:
            new_computed_blocks = new_computed_blocks[num_skipped_blocks:]
        sink = self.block_pool.sink
        if sink is not None:
            # the new table starts with null blocks: the skipped part (stm:296-318) and the nulls
            # a local kind's hit list starts with
            nulls = num_skipped_blocks + len(new_computed_blocks) - len(
                trim_null_head(list(new_computed_blocks)))
            if nulls:
                sink.on_op(RemoveSkipped(request_id, (), tuple(range(nulls)),
                                         self.kv_cache_group_id))
        if self.enable_caching:
            self.block_pool.touch(new_computed_blocks, group=self.kv_cache_group_id)
        if num_skipped_blocks:
            req_blocks.extend([self._null_block] * num_skipped_blocks)
        req_blocks.extend(new_computed_blocks)
        self.num_cached_block[request_id] = len(req_blocks)

    def allocate_external_computed_blocks(self, request_id: str, num_local_computed_tokens: int,
                                          num_external_computed_tokens: int) -> None:
        """Fresh blocks for the tokens the external tier supplies (stm:327-368), after every
        group's hits were touched (so they cannot evict one another's hits)."""
        num_total = num_local_computed_tokens + num_external_computed_tokens
        num_skipped = self.get_num_skipped_tokens(num_total)
        if num_skipped > 0:
            num_external_computed_tokens = min(num_total - num_skipped,
                                               num_external_computed_tokens)
        if num_external_computed_tokens <= 0:
            return
        req_blocks = self.req_to_blocks.setdefault(request_id, [])
        n = max(0, cdiv(num_total, self.block_size) - len(req_blocks))
        req_blocks.extend(self.block_pool.get_new_blocks(n, group=self.kv_cache_group_id))

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[KVCacheBlock]:
        """Blocks for ``num_tokens`` slots, from the head of the free queue (stm:370-410)."""
        req_blocks = self.req_to_blocks.setdefault(request_id, [])
        num_new_blocks = cdiv(num_tokens, self.block_size) - len(req_blocks)
        if num_new_blocks <= 0:
            return []
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks, group=self.kv_cache_group_id)
        req_blocks.extend(new_blocks)
        return new_blocks

    # -- caching --------------------------------------------------------------------------
    def cache_blocks(self, request: Request, num_tokens: int,
                     retention_interval: int | None = 0,
                     replay_boundaries: Sequence[int] = ()) -> None:
        """Cache the blocks full as of ``num_tokens`` that the mask keeps (stm:477-542)."""
        rid = request.request_id
        num_cached_blocks = self.num_cached_block.get(rid, 0)
        num_hashed_tokens = len(request.block_hashes) * self.block_size
        num_full_blocks = min(num_tokens, num_hashed_tokens) // self.block_size
        if num_cached_blocks >= num_full_blocks:
            return
        block_mask = None
        if self.masks_blocks:
            boundaries = list(replay_boundaries)
            if request.shared_prefix_boundary:
                boundaries.append(request.shared_prefix_boundary)
            block_mask = self.reachable_block_mask(
                num_cached_blocks, num_full_blocks, self.cache_hit_alignment_tokens,
                self.kv_cache_spec, retention_interval, boundaries)
        self.block_pool.cache_full_blocks(request, self.req_to_blocks[rid], num_cached_blocks,
                                          num_full_blocks, self.block_size,
                                          self.kv_cache_group_id, block_mask)
        self.num_cached_block[rid] = num_full_blocks

    # a kind whose reachable_block_mask may keep fewer than every block
    masks_blocks = False

    @classmethod
    def reachable_block_mask(cls, start_block: int, end_block: int, alignment_tokens: int,
                             kv_cache_spec: KVCacheSpec, retention_interval: int | None,
                             reachable_boundaries: Sequence[int]) -> list[bool] | None:
        """Which of blocks ``start_block:end_block`` to cache; None: all (stm:545-569)."""
        return None

    # -- release --------------------------------------------------------------------------
    def pop_blocks_for_free(self, request_id: str) -> list[KVCacheBlock]:
        """The request's table without its leading nulls; its bookkeeping dropped
        (stm:571-589)."""
        req_blocks = self.req_to_blocks.pop(request_id, [])
        self.num_cached_block.pop(request_id, None)
        return trim_null_head(req_blocks)

    def free(self, request_id: str) -> None:
        """Free the table reversed: its tail blocks become the first to evict (stm:591-599)."""
        self.block_pool.free_blocks(reversed(self.pop_blocks_for_free(request_id)),
                                    group=self.kv_cache_group_id)

    def _remove_blocks_in_range(self, request_id: str, first_block: int, last_block: int) -> None:
        """Free blocks ``[first_block, last_block)`` backward, stopping at the first null, and
        put the null block in their slots (stm:655-680)."""
        blocks = self.req_to_blocks.get(request_id)
        if blocks is None or first_block >= last_block:
            return
        last_block = min(last_block, len(blocks))
        null = self._null_block
        freed: list[KVCacheBlock] = []
        indices: list[int] = []
        for i in range(last_block - 1, first_block - 1, -1):
            if blocks[i] is null:
                break
            freed.append(blocks[i])
            indices.append(i)
            blocks[i] = null
        if freed:
            sink = self.block_pool.sink
            if sink is not None:
                sink.on_op(RemoveSkipped(request_id, tuple(b.block_id for b in freed),
                                         tuple(indices), self.kv_cache_group_id))
            self.block_pool.free_blocks(freed, group=self.kv_cache_group_id)

    def remove_skipped_blocks(self, request_id: str, processed_computed_tokens: int) -> None:
        """Blocks wholly before the attention window of the next token become null
        (stm:682-720)."""
        num_skipped_tokens = self.get_num_skipped_tokens(processed_computed_tokens)
        if num_skipped_tokens <= 0:
            return
        blocks = self.req_to_blocks.get(request_id)
        if blocks is None:
            return
        num_skipped_blocks = min(num_skipped_tokens // self.block_size, len(blocks))
        self._remove_blocks_in_range(request_id, 0, num_skipped_blocks)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens the next token no longer attends to (stm:722-733): none by default."""
        return 0

    # -- hits -----------------------------------------------------------------------------
    @classmethod
    def find_longest_cache_hit(cls, block_hashes: Sequence[bytes], max_length: int,
                               kv_cache_group_ids: list[int], block_pool: BlockPool,
                               kv_cache_spec: KVCacheSpec, alignment_tokens: int
                               ) -> tuple[tuple[list[KVCacheBlock], ...], int]:
        """The longest hit of at most ``max_length`` tokens that every group of
        ``kv_cache_group_ids`` holds: one list per group (skipped blocks as nulls), and its
        length in tokens (stm:603-653)."""
        raise NotImplementedError


class FullAttentionManager(SingleTypeKVCacheManager):
    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool,
                               kv_cache_spec, alignment_tokens):
        """Left to right, to the first miss (stm:743-838; hashes chain, so every later block
        misses too)."""
        block_size = kv_cache_spec.block_size
        n = max_length // block_size
        if len(kv_cache_group_ids) == 1:
            get = block_pool.get_cached_block            # one key a block: its group's
            gid = kv_cache_group_ids[0]
            keys = block_hashes[:n]
            if block_pool.group_keys:
                keys = [block_pool.key(h, gid) for h in keys]
            hits: list[KVCacheBlock] = []
            for key in keys:
                block = get(key)
                if block is None:
                    break
                hits.append(block)
            computed: tuple[list[KVCacheBlock], ...] = (hits,)
        else:
            computed = tuple([] for _ in kv_cache_group_ids)
            for block_hash in block_hashes[:n]:
                cached = block_pool.get_cached_block(block_hash, kv_cache_group_ids)
                if not cached:
                    break
                for c, b in zip(computed, cached):
                    c.append(b)
        hit_length = len(computed[0]) * block_size
        hit_length -= hit_length % alignment_tokens
        num_blocks = cdiv(hit_length, block_size)
        for c in computed:
            del c[num_blocks:]
        return computed, hit_length


class SlidingWindowManager(SingleTypeKVCacheManager):
    masks_blocks = True

    def __init__(self, kv_cache_spec: SlidingWindowSpec, *args, **kwargs) -> None:
        super().__init__(kv_cache_spec, *args, **kwargs)
        self.sliding_window = kv_cache_spec.sliding_window

    @staticmethod
    def _contiguous_blocks_for_hit(window_size: int, block_size: int) -> int:
        """A hit needs the last ``W - 1`` tokens' blocks (stm:956-967)."""
        return cdiv(window_size - 1, block_size)

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool,
                               kv_cache_spec, alignment_tokens):
        """Right to left for ``need`` contiguous cached blocks: the rightmost such run ends the
        hit; with none, a run that starts at block 0, even a shorter one (stm:969-1064)."""
        block_size = kv_cache_spec.block_size
        need = cls._contiguous_blocks_for_hit(kv_cache_spec.sliding_window, block_size)
        max_num_blocks = max_length // block_size
        null = block_pool.null_block
        computed = tuple([null] * max_num_blocks for _ in kv_cache_group_ids)
        num_contiguous = 0
        match_found = False
        for i in range(max_num_blocks - 1, -1, -1):
            cached = block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids)
            if cached:
                if num_contiguous == 0 and block_size != alignment_tokens \
                        and ((i + 1) * block_size) % alignment_tokens != 0:
                    continue
                for c, b in zip(computed, cached):
                    c[i] = b
                num_contiguous += 1
                if num_contiguous >= need:
                    for c in computed:
                        del c[i + num_contiguous:]
                    match_found = True
                    break
            else:
                num_contiguous = 0
        if not match_found:
            for c in computed:
                del c[num_contiguous:]
            while (block_size != alignment_tokens
                   and len(computed[0]) * block_size % alignment_tokens != 0):
                for c in computed:
                    c.pop()
        return computed, len(computed[0]) * block_size

    @classmethod
    def reachable_block_mask(cls, start_block, end_block, alignment_tokens, kv_cache_spec,
                             retention_interval, reachable_boundaries):
        """Only the blocks a later hit can use (stm:1066-1146): under retention None, every
        block; under 0, the ``need`` blocks that end at each reachable boundary (the prompt's
        replay boundary, a shared-prefix boundary); under N > 0, also the last ``need`` blocks
        of every N-token segment."""
        block_size = kv_cache_spec.block_size
        if alignment_tokens % block_size != 0:
            return None
        need = cls._contiguous_blocks_for_hit(kv_cache_spec.sliding_window, block_size)
        mask = [False] * (end_block - start_block)
        segment_tokens = (alignment_tokens if retention_interval is None
                          else (None if retention_interval == 0 else retention_interval))
        if segment_tokens is not None:
            per_segment = segment_tokens // block_size
            if need >= per_segment:
                return None    # every block is reachable
            for i in range(start_block, end_block):
                if i % per_segment >= per_segment - need:
                    mask[i - start_block] = True
        if retention_interval is not None:
            for boundary_tokens in reachable_boundaries:
                end = boundary_tokens // alignment_tokens * alignment_tokens // block_size
                for j in range(max(start_block, end - need), min(end_block, end)):
                    mask[j - start_block] = True
        return mask

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens before the window of the next token (stm:1148-1183)."""
        return max(0, num_computed_tokens - self.sliding_window + 1)


class ChunkedLocalAttentionManager(SingleTypeKVCacheManager):
    def __init__(self, kv_cache_spec: ChunkedLocalAttentionSpec, *args, **kwargs) -> None:
        super().__init__(kv_cache_spec, *args, **kwargs)
        self.attention_chunk_size = kv_cache_spec.attention_chunk_size

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, kv_cache_group_ids, block_pool,
                               kv_cache_spec, alignment_tokens):
        """Nulls for the blocks before the chunk the limit falls in (they count as computed),
        then cached blocks contiguously from there (stm:1282-1379)."""
        block_size = kv_cache_spec.block_size
        chunk = kv_cache_spec.attention_chunk_size
        max_num_blocks = max_length // block_size
        local_start = max_length // chunk * chunk if max_length > 0 else 0
        local_start_block = local_start // block_size
        null = block_pool.null_block
        computed = tuple([null] * local_start_block for _ in kv_cache_group_ids)
        for i in range(local_start_block, max_num_blocks):
            cached = block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids)
            if not cached:
                break
            for c, b in zip(computed, cached):
                c.append(b)
        return computed, len(computed[0]) * block_size

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Tokens of the chunks before the next token's (stm:1381-1425)."""
        return num_computed_tokens // self.attention_chunk_size * self.attention_chunk_size


MANAGERS: dict[type, type[SingleTypeKVCacheManager]] = {
    FullAttentionSpec: FullAttentionManager,
    SlidingWindowSpec: SlidingWindowManager,
    ChunkedLocalAttentionSpec: ChunkedLocalAttentionManager,
}


def get_manager_for_kv_cache_spec(kv_cache_spec: KVCacheSpec, block_pool: BlockPool,
                                  enable_caching: bool, kv_cache_group_id: int,
                                  max_in_flight_tokens: int,
                                  max_model_len: int) -> SingleTypeKVCacheManager:
    """The manager of a spec, with the admission cap of the kinds that recycle blocks
    (stm:2608-2653)."""
    return MANAGERS[type(kv_cache_spec)](
        kv_cache_spec, block_pool, enable_caching, kv_cache_group_id,
        kv_cache_spec.max_admission_blocks_per_request(max_in_flight_tokens, max_model_len))
