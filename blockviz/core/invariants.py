"""check_invariants — the block manager's state is self-consistent, or a precise error says why.

  1. the queue holds exactly the non-null blocks with ref_cnt == 0, and its counter agrees;
  2. forward and backward links agree, blocks outside the queue have no links;
  3. each ref_cnt equals the number of live block tables holding the block (every group's);
  4. every hashed block is in the map under its hash, and the map holds nothing else;
  5. the null block is never queued, hashed or counted.
"""
from __future__ import annotations

from collections import Counter

from blockviz.core.block_pool import BlockPool
from blockviz.core.manager import KVCacheManager


class InvariantError(AssertionError):
    pass


def _fail(msg: str) -> None:
    raise InvariantError(msg)


def check_free_queue(pool: BlockPool) -> list[int]:
    q = pool.free_block_queue
    head, tail = q.fake_free_list_head, q.fake_free_list_tail
    forward: list[int] = []
    prev, block = head, head.next_free_block
    limit = pool.num_gpu_blocks + 1
    while block is not tail:
        if block is None:
            _fail(f"free queue: broken forward link after block {prev.block_id}")
        if block.prev_free_block is not prev:
            _fail(f"free queue: block {block.block_id}.prev_free_block is "
                  f"{getattr(block.prev_free_block, 'block_id', None)}, expected {prev.block_id}")
        forward.append(block.block_id)
        if len(forward) > limit:
            _fail("free queue: cycle in forward links")
        prev, block = block, block.next_free_block
    if tail.prev_free_block is not prev:
        _fail("free queue: tail sentinel's prev_free_block does not point at the last block")
    backward: list[int] = []
    block = tail.prev_free_block
    while block is not head:
        backward.append(block.block_id)
        if len(backward) > limit:
            _fail("free queue: cycle in backward links")
        block = block.prev_free_block
    if backward[::-1] != forward:
        _fail(f"free queue: forward {forward} and backward {backward[::-1]} walks differ")
    if q.num_free_blocks != len(forward):
        _fail(f"free queue: num_free_blocks={q.num_free_blocks} but {len(forward)} blocks linked")
    if len(set(forward)) != len(forward):
        _fail(f"free queue: a block appears twice: {forward}")
    return forward


def check_invariants(pool: BlockPool, manager: KVCacheManager | None = None) -> None:
    queued = set(check_free_queue(pool))
    null = pool.null_block
    if null.block_id in queued:
        _fail("null block is in the free queue")
    if null.block_hash is not None:
        _fail("null block has a hash")
    if not null.is_null or pool.blocks[0] is not null:
        _fail("block 0 is not the null block")
    expected_free = {b.block_id for b in pool.blocks if not b.is_null and b.ref_cnt == 0}
    if queued != expected_free:
        _fail(f"free queue holds {sorted(queued)} but blocks with ref_cnt 0 are "
              f"{sorted(expected_free)} (missing {sorted(expected_free - queued)}, "
              f"extra {sorted(queued - expected_free)})")
    for b in pool.blocks:
        if b.ref_cnt < 0:
            _fail(f"block {b.block_id} has ref_cnt {b.ref_cnt}")
        if b.block_id not in queued and (b.prev_free_block or b.next_free_block):
            _fail(f"block {b.block_id} is not queued but has free-queue links")
    if manager is not None:
        held = Counter(b.block_id for m in manager.single_type_managers   # every group's
                       for table in m.req_to_blocks.values() for b in table if not b.is_null)
        for b in pool.blocks:
            if not b.is_null and b.ref_cnt != held[b.block_id]:
                _fail(f"block {b.block_id}: ref_cnt={b.ref_cnt} but {held[b.block_id]} "
                      f"block tables hold it")
    mapped: dict[int, bytes] = {}
    for h, ids in pool.cached_block_hash_to_block.items():
        if not ids:
            _fail(f"hash {h.hex()[:12]} maps to no block")
        for i in ids:
            if i in mapped:
                _fail(f"block {i} is in the map twice")
            mapped[i] = h
            if pool.blocks[i].block_hash != h:
                _fail(f"map has block {i} under {h.hex()[:12]} but the block's hash is "
                      f"{pool.blocks[i].block_hash.hex()[:12] if pool.blocks[i].block_hash else None}")
    for b in pool.blocks:
        if b.block_hash is not None and b.block_id not in mapped:
            _fail(f"block {b.block_id} has hash {b.block_hash.hex()[:12]} but is not in the map")
