"""Shared helpers of the core tests: pointer-level views of the block manager's state.

Nothing here re-implements the core. ``walk_free_queue`` reads the intrusive list link by link
(both directions, sentinels included) instead of trusting ``get_all_free_blocks()``; ``doc_chain``
computes prefix hashes straight from the formula in shared/design/vllm-semantics.md with hashlib and
pickle, independently of ``blockviz.core.hashing``.
"""
from __future__ import annotations

import hashlib
import pickle

from blockviz.core import BlockPool, FreeKVCacheBlockQueue, KVCacheManager

# vllm-semantics.md, "Test vectors" (tokens 1..8, block size 4, sha256, no seed set).
DOC_NONE_HASH_PREFIX = "066b1e8987e0"
DOC_H1_PREFIX = "52a7f141c609"
DOC_H2_PREFIX = "bee96bce54f5"
DOC_H1_INT = 1882140585328457242
DOC_H2_INT = 15284023028817948126


def _sha256_pickle(obj) -> bytes:
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def doc_chain(tokens, block_size: int = 4, seed: str = "vllm-none-hash") -> list[bytes]:
    """H_i = sha256(pickle((H_{i-1} or NONE_HASH, tuple(block tokens), None))), NONE_HASH =
    sha256(pickle(seed)) — the doc's formula for plain requests, full blocks only."""
    parent = _sha256_pickle(seed)
    out = []
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = _sha256_pickle((parent, tuple(tokens[start:start + block_size]), None))
        out.append(parent)
    return out


def event_int(h: bytes) -> int:
    """How vLLM's KV events publish a hash: big-endian digest, low 64 bits (written out here
    rather than calling the core's ``hash_to_event_int``)."""
    return int.from_bytes(h, "big") % (1 << 64)


def walk_free_queue(q: FreeKVCacheBlockQueue) -> list[int]:
    """The queue's block ids head -> tail, after checking every link in both directions, both
    sentinels and the counter. Fails with an AssertionError that says which link is wrong."""
    head, tail = q.fake_free_list_head, q.fake_free_list_tail
    assert head.prev_free_block is None, "head sentinel has a prev link"
    assert tail.next_free_block is None, "tail sentinel has a next link"
    forward, prev, block = [], head, head.next_free_block
    while block is not tail:
        assert block is not None, f"forward walk fell off the list after {prev.block_id}"
        assert block.prev_free_block is prev, (
            f"block {block.block_id}.prev is {getattr(block.prev_free_block, 'block_id', None)}, "
            f"expected {prev.block_id}")
        assert block is not head and len(forward) <= 1 << 16, "cycle in the free queue"
        forward.append(block.block_id)
        prev, block = block, block.next_free_block
    assert tail.prev_free_block is prev, "tail sentinel's prev is not the last block"
    backward, block = [], tail.prev_free_block
    while block is not head:
        backward.append(block.block_id)
        block = block.prev_free_block
    assert backward[::-1] == forward, f"forward {forward} != reversed backward {backward[::-1]}"
    assert q.num_free_blocks == len(forward), (
        f"num_free_blocks={q.num_free_blocks}, {len(forward)} linked")
    assert len(q) == len(forward)
    assert [b.block_id for b in q.get_all_free_blocks()] == forward
    return forward


def free_ids(pool: BlockPool) -> list[int]:
    ids = walk_free_queue(pool.free_block_queue)
    for b in pool.blocks:  # a block outside the queue has no links at all
        if b.block_id not in ids:
            assert b.prev_free_block is None and b.next_free_block is None, (
                f"block {b.block_id} is not queued but has links")
    return ids


def ref_cnts(pool: BlockPool) -> list[int]:
    """ref_cnt of the usable blocks 1..N-1."""
    return [b.ref_cnt for b in pool.blocks[1:]]


def hash_map(pool: BlockPool) -> list[tuple[bytes, list[int]]]:
    """(hash, block ids in insertion order), in map order; each listed block carries that hash."""
    items = list(pool.cached_block_hash_to_block.items())
    for h, ids in items:
        for i in ids:
            assert pool.blocks[i].block_hash == h, f"block {i} in the map under another hash"
    return items


def tables(mgr: KVCacheManager) -> dict[str, list[int]]:
    return {rid: [b.block_id for b in blocks] for rid, blocks in mgr.req_to_blocks.items()}


def events(pool: BlockPool) -> list[tuple]:
    """Take the pool's KV events as comparable tuples."""
    out = []
    for e in pool.take_events():
        d = e.to_dict()
        if d["type"] == "BlockStored":
            out.append(("BlockStored", tuple(d["block_hashes"]), d["parent_block_hash"],
                        tuple(d["token_ids"]), d["block_size"]))
        elif d["type"] == "BlockRemoved":
            out.append(("BlockRemoved", tuple(d["block_hashes"])))
        else:
            out.append((d["type"],))
    return out


def snapshot(mgr: KVCacheManager, requests=()) -> tuple:
    """Everything allocate_slots / reset_prefix_cache could change, for "nothing changed" checks."""
    pool = mgr.block_pool
    return (
        free_ids(pool),
        [(b.block_id, b.ref_cnt, b.block_hash, b.is_null) for b in pool.blocks],
        hash_map(pool),
        tables(mgr),
        dict(mgr.num_cached_block),
        list(pool.kv_event_queue),
        [(r.request_id, r.num_computed_tokens, r.num_tokens, list(r.block_hashes)) for r in requests],
    )
