"""BlockHashToBlockMap and BlockPool — mirror vllm/v1/core/block_pool.py (vLLM 0.33).

The pool owns every block, the free queue (allocation order = LRU eviction order) and the prefix
hash map. Its contract, which the tests check at pointer level:

  * block 0 is the ``null_block``: taken out of the queue at start, never queued, hashed or counted;
  * ``get_new_blocks`` pops from the head and evicts *lazily*: a popped block that still carries a
    hash leaves the map only now, at reuse (one ``BlockRemoved`` each);
  * ``touch`` takes a free-but-cached block back out of the queue (a prefix-cache hit) and counts it;
  * ``free_blocks`` gets a table *reversed*; blocks whose count reaches 0 go back to the queue and
    keep their hash. Free order ``split`` (vLLM >= 0.24): unhashed blocks to the head, hashed blocks
    to the tail. ``append`` (vLLM <= 0.23, "classic"): all to the tail;
  * the map does not de-duplicate: two blocks may carry one hash; lookups return the first inserted;
  * with several KV-cache groups (hybrid models) one pool serves every group: a block is cached
    under vLLM's ``BlockHashWithGroupId``, its hash with the 4-byte big-endian group id appended
    (``key``); with one group the key is the bare hash (vLLM appends group 0, which changes
    nothing one can observe), so a one-group pool's keys are its request hashes.

Every mutation can be reported as an op record to ``sink`` (an ``OpSink``, or None to switch
recording off): the timeline replays them and the UI highlights them. The records (``Popleft``, ``Evict``,
``Touch``, ``Cache``, ``Free``, ``FreeHead``, ``FreeTail``, ``Reset``) are defined, with what each
field means, in ``blockviz.core.ops``.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from blockviz.core.block import KVCacheBlock
from blockviz.core.events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVCacheEvent,
    to_event_extra_keys,
)
from blockviz.core.free_queue import FreeKVCacheBlockQueue
from blockviz.core.hashing import generate_block_hash_extra_keys, hash_to_event_int
from blockviz.core.ops import (
    Cache,
    Evict,
    Free,
    FreeHead,
    FreeTail,
    OpSink,
    Popleft,
    Reset,
    Touch,
)

if TYPE_CHECKING:
    from blockviz.core.request import Request

FREE_ORDERS = ("split", "append")


class BlockHashToBlockMap:
    """Prefix hash -> cached block(s). Usually one block per hash, stored bare; a hash cached by a
    second block (no de-duplication, so that block tables stay append-only) turns the value into a
    dict ``{block_id: block}`` whose insertion order decides which block a lookup returns."""

    def __init__(self) -> None:
        self._cache: dict[bytes, KVCacheBlock | dict[int, KVCacheBlock]] = {}

    def get_one_block(self, block_hash: bytes) -> KVCacheBlock | None:
        found = self._cache.get(block_hash)
        if found is None or isinstance(found, KVCacheBlock):
            return found
        return next(iter(found.values()))

    def contain(self, block_hash: bytes, block_id: int) -> bool:
        found = self._cache.get(block_hash)
        if found is None:
            return False
        if isinstance(found, KVCacheBlock):
            return found.block_id == block_id
        return block_id in found

    def insert(self, block_hash: bytes, block: KVCacheBlock) -> None:
        found = self._cache.get(block_hash)
        if found is None:
            self._cache[block_hash] = block
        elif isinstance(found, KVCacheBlock):
            self._cache[block_hash] = {found.block_id: found, block.block_id: block}
        else:
            found[block.block_id] = block

    def pop(self, block_hash: bytes, block_id: int) -> KVCacheBlock | None:
        """Remove ``block_id`` from under ``block_hash``; other blocks with that hash stay, and
        (as in vLLM, which pops the entry and puts the rest back) their hash moves to the end of
        the map's order."""
        found = self._cache.pop(block_hash, None)
        if found is None:
            return None
        if isinstance(found, KVCacheBlock):
            if found.block_id != block_id:
                self._cache[block_hash] = found
                return None
            return found
        block = found.pop(block_id, None)
        if found:
            self._cache[block_hash] = found
        return block

    def items(self) -> Iterator[tuple[bytes, list[int]]]:
        """(hash, block ids in insertion order), in the map's own order."""
        for h, found in self._cache.items():
            yield h, [found.block_id] if isinstance(found, KVCacheBlock) else list(found)

    def __len__(self) -> int:
        return len(self._cache)


def make_block_hash_with_group_id(block_hash: bytes, group_id: int) -> bytes:
    """vLLM's ``make_block_hash_with_group_id`` (kv_cache_utils.py:60-69)."""
    return block_hash + group_id.to_bytes(4, "big", signed=False)


class BlockPool:
    def __init__(self, num_gpu_blocks: int, enable_caching: bool = True, *,
                 free_order: str = "split", enable_kv_cache_events: bool = True,
                 sink: OpSink | None = None, num_kv_cache_groups: int = 1,
                 kv_cache_event_metadata: tuple = (("full_attention", None),)) -> None:
        if num_gpu_blocks < 1:
            raise ValueError("num_gpu_blocks must be at least 1 (block 0 is the null block)")
        if free_order not in FREE_ORDERS:
            raise ValueError(f"free_order must be one of {FREE_ORDERS}, not {free_order!r}")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.free_order = free_order
        self.blocks = [KVCacheBlock(i) for i in range(num_gpu_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        self.enable_kv_cache_events = enable_kv_cache_events
        self.kv_event_queue: list[KVCacheEvent] = []
        self.sink = sink
        self.num_evictions = 0  # blocks whose hash left the map at reuse (a metric, not vLLM state)
        # keys carry the group id (several groups) or are the bare hash (one group)
        self.group_keys = num_kv_cache_groups > 1
        # per group: (kv_cache_spec_kind, kv_cache_spec_sliding_window) of its BlockStored events
        # (vLLM's KVCacheManager.kv_cache_event_metadata, kv_cache_manager.py:211-217)
        self.kv_cache_event_metadata = kv_cache_event_metadata

    # -- keys (vLLM's BlockHashWithGroupId) -----------------------------------------------
    def key(self, block_hash: bytes, group_id: int) -> bytes:
        """The map key of ``block_hash`` cached in group ``group_id``."""
        return make_block_hash_with_group_id(block_hash, group_id) if self.group_keys \
            else block_hash

    def __deepcopy__(self, memo: dict) -> BlockPool:
        """A copy with the same queue order and map order. Blocks are copied here, unlinked, and
        relinked through the new queue (a generic deep copy would recurse along the links).
        The copy reports no ops until its owner attaches a sink."""
        new = BlockPool.__new__(BlockPool)
        memo[id(self)] = new
        new.__dict__.update(self.__dict__)
        new.blocks = []
        for b in self.blocks:
            nb = KVCacheBlock(b.block_id)
            nb.ref_cnt, nb.block_hash, nb.is_null = b.ref_cnt, b.block_hash, b.is_null
            memo[id(b)] = nb
            new.blocks.append(nb)
        new.free_block_queue = FreeKVCacheBlockQueue([new.blocks[b.block_id]
                                                      for b in self.free_block_queue])
        new.cached_block_hash_to_block = BlockHashToBlockMap()
        for h, ids in self.cached_block_hash_to_block.items():
            for i in ids:
                new.cached_block_hash_to_block.insert(h, new.blocks[i])
        new.null_block = new.blocks[0]
        new.kv_event_queue = list(self.kv_event_queue)
        new.sink = None
        return new

    # -- lookups --------------------------------------------------------------------------
    def get_cached_block(self, block_hash: bytes,
                         kv_cache_group_ids: Sequence[int] | None = None):
        """The first block cached under ``block_hash``, free or not, or None. No side effect.
        With ``kv_cache_group_ids`` (vLLM's form, bp:202-228): the first block of each of those
        groups, or None if any group misses."""
        get = self.cached_block_hash_to_block.get_one_block
        if kv_cache_group_ids is None:
            return get(block_hash)
        if not self.group_keys:
            block = get(block_hash)
            return None if block is None else [block]
        out = []
        for gid in kv_cache_group_ids:
            block = get(make_block_hash_with_group_id(block_hash, gid))
            if block is None:
                return None
            out.append(block)
        return out

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        total = self.num_gpu_blocks - 1  # the null block is never usable
        return 1.0 - self.get_num_free_blocks() / total if total else 0.0

    def is_block_writable(self, block: KVCacheBlock) -> bool:
        """vLLM's check: a block held by one table and not (yet) shared through the cache. In 0.33
        only its Mamba code calls it; full attention shares blocks safely because a slot is
        written once, at its token's position, never again."""
        return not block.is_null and block.ref_cnt == 1 and block.block_hash is None

    # -- allocation -----------------------------------------------------------------------
    def get_new_blocks(self, num_blocks: int, *, group: int = 0) -> list[KVCacheBlock]:
        """Pop ``num_blocks`` from the head; evict any that still carry a hash; ref_cnt = 1.
        (``group``: the table they are for, named in the op record only.)"""
        if num_blocks > self.get_num_free_blocks():
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        blocks = self.free_block_queue.popleft_n(num_blocks)
        evict = False
        for block in blocks:
            assert block.ref_cnt == 0
            block.ref_cnt = 1
            evict = evict or block.block_hash is not None
        if self.sink is not None:
            self.sink.on_op(Popleft(tuple(b.block_id for b in blocks), group))
        if evict:  # lazy eviction: a reused block's old hash leaves the map only now
            for block in blocks:
                if block.block_hash is not None:
                    self._maybe_evict_cached_block(block)
        return blocks

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop ``block``'s hash from the map and the block (vLLM ``_maybe_evict_cached_block``)."""
        block_hash = block.block_hash
        if block_hash is None:
            return False
        popped = self.cached_block_hash_to_block.pop(block_hash, block.block_id)
        block.reset_hash()
        if popped is None:
            return False
        self.num_evictions += 1
        if self.sink is None and not self.enable_kv_cache_events:
            return True
        # (vLLM's get_block_hash, get_group_id): by the pool's own key form, not the key's length
        # (a capacity replay's sub-block keys are not 16 or 32 bytes)
        bare, group = ((block_hash[:-4], int.from_bytes(block_hash[-4:], "big")) if self.group_keys
                       else (block_hash, 0))
        if self.sink is not None:
            self.sink.on_op(Evict(block.block_id, block_hash, group))
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(BlockRemoved((hash_to_event_int(bare),), group_idx=group))
        return True

    def touch(self, blocks: Sequence[KVCacheBlock], *, group: int = 0) -> None:
        """A prefix-cache hit: a free block (ref_cnt 0) leaves the queue, keeping its hash."""
        removed: list[int] = []
        remove = self.free_block_queue.remove
        for block in blocks:
            if block.is_null:
                continue
            if block.ref_cnt == 0:
                remove(block)
                removed.append(block.block_id)
            block.ref_cnt += 1
        if self.sink is not None:
            self.sink.on_op(Touch(tuple(b.block_id for b in blocks if not b.is_null),
                                 tuple(removed), group))

    def cache_full_blocks(self, request: Request, blocks: Sequence[KVCacheBlock],
                          num_cached_blocks: int, num_full_blocks: int, block_size: int,
                          kv_cache_group_id: int = 0,
                          block_mask: Sequence[bool] | None = None) -> None:
        """Register ``blocks[num_cached_blocks:num_full_blocks]`` under the request's hashes, in
        group ``kv_cache_group_id``; null blocks, and blocks whose ``block_mask`` entry (aligned
        with that range) is False, are skipped (bp:230-356)."""
        if num_cached_blocks >= num_full_blocks:
            return
        block_hashes = request.block_hashes
        insert = self.cached_block_hash_to_block.insert
        key = self.key
        cached_ids: list[int] = []
        cached_hashes: list[bytes] = []   # the request's hashes of the blocks cached
        cached_keys: list[bytes] = []
        indices: list[int] = []
        masked: list[int] = []            # full blocks the mask left uncached
        for i in range(num_cached_blocks, num_full_blocks):
            block = blocks[i]
            if block.is_null:
                continue
            if block_mask is not None and not block_mask[i - num_cached_blocks]:
                masked.append(block.block_id)
                continue
            assert block.block_hash is None, f"block {block.block_id} is already cached"
            block_hash = block_hashes[i]
            k = key(block_hash, kv_cache_group_id)
            block.block_hash = k
            insert(k, block)
            cached_ids.append(block.block_id)
            cached_hashes.append(block_hash)
            cached_keys.append(k)
            indices.append(i)
        if self.sink is not None:
            parent = block_hashes[num_cached_blocks - 1] if num_cached_blocks > 0 else None
            self.sink.on_op(Cache(request.request_id, tuple(cached_ids), tuple(cached_keys),
                                 num_cached_blocks, parent, kv_cache_group_id, tuple(masked)))
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(self._block_stored_event(
                request, cached_hashes, indices, num_cached_blocks, num_full_blocks, block_size,
                kv_cache_group_id))

    def _block_stored_event(self, request: Request, hashes: list[bytes], indices: list[int],
                            num_cached_blocks: int, num_full_blocks: int, block_size: int,
                            group: int) -> BlockStored:
        """One BlockStored per call: the hashes of the blocks stored (none, when a mask kept
        none), the tokens of the whole range, the parent before the range (bp:307-356)."""
        parent = (hash_to_event_int(request.block_hashes[num_cached_blocks - 1])
                  if num_cached_blocks > 0 else None)
        start, end = num_cached_blocks * block_size, num_full_blocks * block_size
        extra = tuple(to_event_extra_keys(generate_block_hash_extra_keys(
            request, i * block_size, (i + 1) * block_size)) for i in indices)
        lora = request.lora
        kind, window = self.kv_cache_event_metadata[group]
        return BlockStored(
            block_hashes=tuple(hash_to_event_int(h) for h in hashes),
            parent_block_hash=parent,
            token_ids=tuple(request.all_token_ids[start:end]),
            block_size=block_size,
            lora_id=lora.lora_int_id if lora else None,
            lora_name=lora.name if lora else None,
            extra_keys=extra or None,
            group_idx=group, kv_cache_spec_kind=kind, kv_cache_spec_sliding_window=window)

    # -- release --------------------------------------------------------------------------
    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock], *, group: int = 0) -> None:
        """Drop one reference from each block, in the given order (first = evicted first)."""
        to_head: list[KVCacheBlock] = []
        to_tail: list[KVCacheBlock] = []
        split = self.free_order == "split"
        caching = self.enable_caching
        freed_ids: list[int] | None = [] if self.sink is not None else None
        for block in ordered_blocks:
            if block.is_null:
                continue
            if freed_ids is not None:
                freed_ids.append(block.block_id)
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                if split and (block.block_hash is None or not caching):
                    to_head.append(block)   # can never hit: reuse first (LIFO)
                else:
                    to_tail.append(block)   # may still hit: reuse last (LRU)
        self.free_block_queue.prepend_n(to_head)
        self.free_block_queue.append_n(to_tail)
        if self.sink is not None:
            self.sink.on_op(Free(tuple(freed_ids), group))
            if to_head:
                self.sink.on_op(FreeHead(tuple(b.block_id for b in to_head), group))
            if to_tail:
                self.sink.on_op(FreeTail(tuple(b.block_id for b in to_tail), group))

    def evict_blocks(self, block_ids: Iterable[int]) -> None:
        """Drop these blocks' hashes from the prefix cache; held blocks stay held."""
        for block_id in block_ids:
            if not 0 <= block_id < self.num_gpu_blocks:
                raise ValueError(f"invalid block id {block_id} (pool of {self.num_gpu_blocks})")
            self._maybe_evict_cached_block(self.blocks[block_id])

    def reset_prefix_cache(self) -> bool:
        """Forget every hash — only when no request holds a block; else change nothing."""
        if self.num_gpu_blocks - self.get_num_free_blocks() != 1:
            if self.sink is not None:
                self.sink.on_op(Reset(False))
            return False
        self.cached_block_hash_to_block = BlockHashToBlockMap()
        for block in self.blocks:
            block.reset_hash()
        if self.sink is not None:
            self.sink.on_op(Reset(True))
        if self.enable_kv_cache_events:
            self.kv_event_queue.append(AllBlocksCleared())
        return True

    def take_events(self) -> list[KVCacheEvent]:
        events, self.kv_event_queue = self.kv_event_queue, []
        return events
