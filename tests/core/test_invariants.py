"""check_invariants must fail loudly — an InvariantError naming the block and the broken rule —
for every kind of corruption it guards against, and pass on a healthy state.

The state every case starts from: A (10 tokens) holds [1, 2, 3] (1, 2 cached, 3 partial); Z (8
fresh tokens) held [4, 5] and finished, so the queue is 6 5 4 with 5 and 4 still cached.
"""
from __future__ import annotations

import re

import pytest
from core_helpers import doc_chain, free_ids

from blockviz.core import InvariantError, KVCacheManager, check_invariants


@pytest.fixture
def state(make_req):
    mgr = KVCacheManager(7, 4)
    for rid, tokens in (("A", range(1, 11)), ("Z", range(201, 209))):
        r = make_req(rid, tokens)
        hits, n, _ = mgr.get_computed_blocks(r)
        assert mgr.allocate_slots(r, r.num_tokens - n, n, hits) is not None
    mgr.free(make_req("Z", range(201, 209)))
    pool = mgr.block_pool
    assert free_ids(pool) == [6, 5, 4]
    check_invariants(pool, mgr)
    check_invariants(pool)
    return mgr, pool, pool.blocks, pool.free_block_queue


H1_HEX = doc_chain(list(range(1, 9)))[0].hex()[:12]


CORRUPTIONS = {
    "forward link broken": (
        lambda mgr, pool, b, q: setattr(b[5], "next_free_block", None),
        "free queue: broken forward link after block 5"),
    "backward link wrong": (
        lambda mgr, pool, b, q: setattr(b[5], "prev_free_block", b[4]),
        "free queue: block 5.prev_free_block is 4, expected 6"),
    "tail sentinel wrong": (
        lambda mgr, pool, b, q: setattr(q.fake_free_list_tail, "prev_free_block", b[5]),
        "free queue: tail sentinel's prev_free_block does not point at the last block"),
    "counter wrong": (
        lambda mgr, pool, b, q: setattr(q, "num_free_blocks", 4),
        "free queue: num_free_blocks=4 but 3 blocks linked"),
    "held block counted free": (
        lambda mgr, pool, b, q: setattr(b[5], "ref_cnt", 1),
        "free queue holds [4, 5, 6] but blocks with ref_cnt 0 are [4, 6] (missing [], extra [5])"),
    "held block queued": (
        lambda mgr, pool, b, q: q.append(b[3]),
        "free queue holds [3, 4, 5, 6] but blocks with ref_cnt 0 are [4, 5, 6] (missing [], extra [3])"),
    "free block not queued": (
        lambda mgr, pool, b, q: q.remove(b[5]),
        "free queue holds [4, 6] but blocks with ref_cnt 0 are [4, 5, 6] (missing [5], extra [])"),
    "negative ref_cnt": (
        lambda mgr, pool, b, q: setattr(b[3], "ref_cnt", -1),
        "block 3 has ref_cnt -1"),
    "links on an unqueued block": (
        lambda mgr, pool, b, q: setattr(b[3], "next_free_block", b[4]),
        "block 3 is not queued but has free-queue links"),
    "wrong ref_cnt of a held block": (
        lambda mgr, pool, b, q: setattr(b[1], "ref_cnt", 2),
        "block 1: ref_cnt=2 but 1 block tables hold it"),
    "table lost a block": (
        lambda mgr, pool, b, q: mgr.req_to_blocks["A"].pop(),
        "block 3: ref_cnt=1 but 0 block tables hold it"),
    "hashed block not in the map": (
        lambda mgr, pool, b, q: setattr(b[3], "block_hash", b"\x01" * 32),
        "block 3 has hash 010101010101 but is not in the map"),
    "map entry whose block has another hash": (
        lambda mgr, pool, b, q: setattr(b[1], "block_hash", b"\x02" * 32),
        f"map has block 1 under {H1_HEX} but the block's hash is 020202020202"),
    "map entry whose block lost its hash": (
        lambda mgr, pool, b, q: setattr(b[1], "block_hash", None),
        f"map has block 1 under {H1_HEX} but the block's hash is None"),
    "block in the map twice": (
        lambda mgr, pool, b, q: pool.cached_block_hash_to_block.insert(b"\x03" * 32, b[1]),
        "block 1 is in the map twice"),
    "null block queued": (
        lambda mgr, pool, b, q: q.append(pool.null_block),
        "null block is in the free queue"),
    "null block hashed": (
        lambda mgr, pool, b, q: setattr(pool.null_block, "block_hash", b"\x04" * 32),
        "null block has a hash"),
    "block 0 not the null block": (
        lambda mgr, pool, b, q: setattr(b[0], "is_null", False),
        "block 0 is not the null block"),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_each_corruption_raises_a_precise_invariant_error(state, name):
    mgr, pool, blocks, q = state
    corrupt, message = CORRUPTIONS[name]
    corrupt(mgr, pool, blocks, q)
    with pytest.raises(InvariantError, match=re.escape(message)):
        check_invariants(pool, mgr)


def test_invariant_error_is_an_assertion_error():
    """So a bare pytest run reports it as a failed assertion, not an error in the test."""
    assert issubclass(InvariantError, AssertionError)


def test_ref_counts_are_only_checked_against_tables_when_a_manager_is_given(state):
    mgr, pool, blocks, q = state
    blocks[1].ref_cnt = 2
    check_invariants(pool)                          # the pool alone cannot know the tables
    with pytest.raises(InvariantError):
        check_invariants(pool, mgr)
