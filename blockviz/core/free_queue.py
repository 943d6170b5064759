"""FreeKVCacheBlockQueue — mirrors ``FreeKVCacheBlockQueue`` in vllm/v1/core/kv_cache_utils.py.

The free queue is an intrusive doubly linked list threaded through the blocks themselves, with two
sentinel blocks so that no operation has to special-case an empty list or an end of the list. The
head is handed out first: the queue is at the same time the allocation order and the LRU eviction
order of the prefix cache. Every operation but the O(n) walk of ``get_all_free_blocks`` is O(1) per
block and allocates no Python objects besides the lists it returns.

Invariants (checked by ``blockviz.core.invariants``):
  * a block is queued iff both its links are set; the sentinels are never handed out;
  * ``num_free_blocks`` equals the number of blocks between the sentinels;
  * walking ``next_free_block`` from the head and ``prev_free_block`` from the tail give the same
    blocks in opposite orders.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

from blockviz.core.block import KVCacheBlock


class FreeKVCacheBlockQueue:
    def __init__(self, blocks: Sequence[KVCacheBlock]) -> None:
        self.fake_free_list_head = KVCacheBlock(-1)
        self.fake_free_list_tail = KVCacheBlock(-1)
        self.fake_free_list_head.next_free_block = self.fake_free_list_tail
        self.fake_free_list_tail.prev_free_block = self.fake_free_list_head
        self.num_free_blocks = 0
        # Built in the order given (block id order for a new pool).
        self.append_n(list(blocks))

    def popleft(self) -> KVCacheBlock:
        """Remove and return the head block."""
        block = self.fake_free_list_head.next_free_block
        if block is self.fake_free_list_tail:
            raise ValueError("No free blocks available")
        self.remove(block)
        return block

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Remove and return the first ``n`` blocks, head first."""
        if n > self.num_free_blocks:
            raise ValueError(f"Cannot pop {n} blocks from a queue of {self.num_free_blocks}")
        popped: list[KVCacheBlock] = []
        head = self.fake_free_list_head
        block = head.next_free_block
        for _ in range(n):
            popped.append(block)
            nxt = block.next_free_block
            block.prev_free_block = block.next_free_block = None
            block = nxt
        head.next_free_block = block
        block.prev_free_block = head
        self.num_free_blocks -= n
        return popped

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block`` from wherever it sits in the queue."""
        prev_block, next_block = block.prev_free_block, block.next_free_block
        if prev_block is None or next_block is None:
            raise RuntimeError(f"remove() called on a block that is not queued: {block}")
        prev_block.next_free_block = next_block
        next_block.prev_free_block = prev_block
        block.prev_free_block = block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        """Put ``block`` at the tail (taken last)."""
        self.append_n((block,))

    def append_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put ``blocks`` at the tail, keeping their order (the last one becomes the tail)."""
        tail = self.fake_free_list_tail
        self._link_between(blocks, tail.prev_free_block, tail)

    def prepend_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put ``blocks`` at the head, keeping their order (the first one becomes the head)."""
        head = self.fake_free_list_head
        self._link_between(blocks, head, head.next_free_block)

    def _link_between(self, blocks: Sequence[KVCacheBlock], prev: KVCacheBlock,
                      nxt: KVCacheBlock) -> None:
        """Link ``blocks``, in order, between the adjacent queued blocks ``prev`` and ``nxt``."""
        if not blocks:
            return
        for block in blocks:
            block.prev_free_block = prev
            prev.next_free_block = block
            prev = block
        prev.next_free_block = nxt
        nxt.prev_free_block = prev
        self.num_free_blocks += len(blocks)

    def __iter__(self) -> Iterator[KVCacheBlock]:
        block = self.fake_free_list_head.next_free_block
        tail = self.fake_free_list_tail
        while block is not tail:
            yield block
            block = block.next_free_block

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """All queued blocks, head (taken first) to tail. O(n): for rendering and tests."""
        return list(self)

    def __len__(self) -> int:
        return self.num_free_blocks
