"""KVCacheBlock — mirrors ``KVCacheBlock`` in vllm/v1/core/kv_cache_utils.py (vLLM 0.33).

A block is the metadata of one physical KV-cache page: its id, how many live block tables hold it
(``ref_cnt``), the prefix hash it is registered under once it is full and cached (``block_hash``),
and the two intrusive links that only :class:`FreeKVCacheBlockQueue` touches.
"""
from __future__ import annotations


class KVCacheBlock:
    __slots__ = ("block_id", "ref_cnt", "block_hash", "prev_free_block", "next_free_block", "is_null")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        # Number of live block tables that hold this block; 0 means it sits in the free queue.
        self.ref_cnt = 0
        # The key the block is cached under (BlockPool.key: vLLM's BlockHash bytes, plus the
        # 4-byte group id when the pool serves several KV-cache groups); set once when the block
        # is full and cached, cleared when the block is evicted.
        self.block_hash: bytes | None = None
        # Links of the free queue; both None exactly when the block is not queued.
        self.prev_free_block: KVCacheBlock | None = None
        self.next_free_block: KVCacheBlock | None = None
        # Block 0 of the pool: a placeholder that is never queued, hashed or ref-counted.
        self.is_null = False

    def reset_hash(self) -> None:
        """Forget the block's hash (eviction, or a reset of the prefix cache)."""
        self.block_hash = None

    def __deepcopy__(self, memo: dict) -> KVCacheBlock:
        # Blocks are copied by their BlockPool (which relinks the queue); reaching one here means
        # something was deep-copied without its pool.
        raise TypeError("deep-copy the BlockPool before anything that holds its blocks")

    def __repr__(self) -> str:
        prev_id = self.prev_free_block.block_id if self.prev_free_block else None
        next_id = self.next_free_block.block_id if self.next_free_block else None
        h = self.block_hash.hex()[:12] if self.block_hash else None
        return (f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, block_hash={h}, "
                f"prev={prev_id}, next={next_id})")
