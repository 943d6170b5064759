"""Sequence-mode capacity replay on hand-made traces whose answers are worked out below, block by
block; the prefix keys against vLLM's hashes of the derived tokens; the fast path against the
manager fed real Requests hashing real tokens.

Notation: pool blocks are numbered 1..N (block 0 is vLLM's null block); the free queue is written
head first; A, B, ... are prefix hashes. Sequence mode per request: lookup (whole cached blocks
from the start, at most (n-1) // block_size of them), allocate_slots for the whole prompt (the
hits leave the free queue, new blocks come from its head, a reused block that still has a hash is
evicted), cache the full blocks, free the table reversed (split: unhashed blocks to the head,
hashed to the tail; append: all to the tail)."""
from __future__ import annotations

import random

import pytest

from blockviz.core import BlockHasher, Request
from blockviz.scenario.trace import TraceRequest, prompt_token_ids
from blockviz.sim.capacity import MODES, block_keys, ceiling, replay_sequence


def trace(*reqs: tuple[int, list[int]]) -> list[TraceRequest]:
    return [TraceRequest(i, n, 1, ids, i + 1) for i, (n, ids) in enumerate(reqs)]


def point(pool, q, h, requests, rejected, evictions) -> dict:
    return {"pool_blocks": pool, "queries": q, "hits": h, "requests": requests,
            "rejected": rejected, "evictions": evictions}


# Block size 512: one vLLM block per hash id.
#   r0 [1,2]   1024 tokens: keys A, B     r1 [1,2,3] 1536: A, B, C     r2 [1,2] 1024: A, B
#   r3 [9,10]   600 tokens: key D (its second block is partial)   r4 [20] 512: E   r5 = r1
T512 = trace((1024, [1, 2]), (1536, [1, 2, 3]), (1024, [1, 2]), (600, [9, 10]), (512, [20]),
             (1536, [1, 2, 3]))


def test_ceiling_by_hand():
    # Infinite pool: r0 none (seen A B); r1 hits A B (limit (1536-1)//512 = 2) = 1024; r2 only A:
    # its limit is (1024-1)//512 = 1, the last token must be computed = 512; r3 none; r4 limit
    # (512-1)//512 = 0; r5 A B again = 1024. Queries: every prompt token, 6232.
    assert ceiling(T512, block_size=512) == {"queries": 6232, "hits": 2560}


def test_split_pool_of_4_by_hand():
    # queue [1,2,3,4]
    # r0: new 1 2; cache 1=A 2=B; free 2,1 (hashed: tail)        -> queue [3,4,2,1]; q 1024 h 0
    # r1: hits 1 2 (touched out); new 3; cache 3=C; free 3,2,1   -> [4,3,2,1];  q 1536 h 1024
    # r2: hit 1 (limit 1); new 4, cached as B too (map B: 2, 4); free 4,1 -> [3,2,4,1]; h 512
    # r3: no hit; new 3 2: evicts C (3) and B's block 2 (B stays on 4): 2 evictions; cache 3=D;
    #     free 2 (unhashed: head), 3 (tail)                       -> [2,4,1,3];  q 600
    # r4: limit 0; new 2 (no hash: no eviction); cache 2=E; free -> [4,1,3,2];  q 512
    # r5: hits 1 (A) 4 (B), C gone; new 3: evicts D (3 evictions); cache 3=C -> h 1024
    got = replay_sequence(T512, block_size=512, pool_blocks=4, free_order="split")
    assert got == point(4, 6232, 1024 + 512 + 1024, 6, 0, 3)


def test_append_pool_of_4_by_hand():
    # The same as split up to r3, except r3's free appends both (2 unhashed, 3=D): [4,1,2,3].
    # r4: new 4, which still has B: evicted (3rd); cache 4=E; free   -> [1,2,3,4]
    # r5: hit 1 (A) only (B is gone) = 512; new 2 3: 3 has D: evicted (4th); cache 2=B 3=C
    got = replay_sequence(T512, block_size=512, pool_blocks=4, free_order="append")
    assert got == point(4, 6232, 1024 + 512 + 512, 6, 0, 4)


@pytest.mark.parametrize("order", ["split", "append"])
def test_a_request_larger_than_the_pool_is_rejected(order):
    # Pool of 2. r1 and r5 need 3 blocks: rejected (nothing changes, not counted in queries).
    # r0: new 1 2 (A B), free -> [2,1].  r2: hit 1 (A); new 2, which has B: evicted (1), cached
    # as B again; free -> [2,1].  r3: new 2 1, evicting B and A (2, 3); cache 2=D; 1 unhashed.
    # r4: new 1 (no hash in either order: no eviction).  r5: A is gone, needs 3 > 2: rejected.
    got = replay_sequence(T512, block_size=512, pool_blocks=2, free_order=order)
    assert got == point(2, 1024 + 1024 + 600 + 512, 512, 4, 2, 3)


# Block size 16, prompts shorter than a trace block: 40 tokens = 2 full blocks + 8 tokens.
#   r0 [7] 40: keys a0 a1     r1 [7] 33: a0 a1     r2 [7] 32: a0 a1     r3 [8] 40: b0 b1
T16 = trace((40, [7]), (33, [7]), (32, [7]), (40, [8]))


def test_block_size_16_by_hand():
    # Ceiling: r0 none; r1 limit (33-1)//16 = 2: a0 a1 = 32; r2 limit 31//16 = 1: 16; r3 none.
    assert ceiling(T16, block_size=16) == {"queries": 145, "hits": 48}
    # Pool of 3, split.  r0: new 1 2 3; cache 1=a0 2=a1 (3 is partial); free 3 (head), 2 1
    #   -> [3,2,1].  r1: hits 1 2; new 3; nothing more to cache; free -> [3,2,1]; h 32.
    # r2: hit 1; new 3, cached as a1 too (a1: 2, 3); free 3 1 (both hashed: tail) -> [2,3,1].
    # r3: new 2 3 1: all three have a hash: 3 evictions (both copies of a1 count).
    for order in ("split", "append"):
        got = replay_sequence(T16, block_size=16, pool_blocks=3, free_order=order)
        assert got == point(3, 145, 48, 4, 0, 3), order
    # A pool with room: the ceiling's hits, nothing evicted.
    assert replay_sequence(T16, block_size=16, pool_blocks=12) == point(12, 145, 48, 4, 0, 0)


def test_block_size_64_a_partial_trace_block_still_shares_its_full_blocks():
    # r0 [1,2] 600 tokens: 9 full blocks of 64 (8 in trace block 1, one of the 88 tokens of
    # trace block 2). r1 [1,3] 600: shares the first 8 = 512 tokens. r2 [1,2] 577: 9 full blocks,
    # limit 576//64 = 9, all cached by r0 (its block 9 = tokens 2*512 .. 2*512+63, as r2's) = 576.
    t64 = trace((600, [1, 2]), (600, [1, 3]), (577, [1, 2]))
    assert ceiling(t64, block_size=64) == {"queries": 1777, "hits": 512 + 576}
    assert replay_sequence(t64, block_size=64, pool_blocks=30) == point(30, 1777, 1088, 3, 0, 0)
    # At 512 only whole trace blocks are full: r1 and r2 share trace block 1 (limit 1) = 512 each.
    assert ceiling(t64, block_size=512) == {"queries": 1777, "hits": 1024}


def _random_trace(rng: random.Random, n: int) -> list[TraceRequest]:
    """Requests drawn so that prefixes recur: a few roots, branching at random depths."""
    out = []
    for i in range(n):
        blocks = rng.randint(1, 6)
        ids = [rng.choice([0, 1]) if j == 0 else rng.choice([j, j + 1, 100 + i]) for j in range(blocks)]
        length = (blocks - 1) * 512 + rng.randint(1, 512)
        out.append(TraceRequest(i, length, 1, ids, i + 1))
    return out


@pytest.mark.parametrize("bs", [16, 64, 512])
def test_keys_are_equal_exactly_where_vllm_hashes_of_the_derived_tokens_are(bs):
    rng = random.Random(bs)
    hasher = BlockHasher("sha256")
    key_of_hash: dict[bytes, bytes] = {}
    hash_of_key: dict[bytes, bytes] = {}
    for r in _random_trace(rng, 60):
        real = Request("x", prompt_token_ids(r.input_length, r.hash_ids), hasher=hasher,
                       block_size=bs).block_hashes
        keys = block_keys(r.input_length, r.hash_ids, bs)
        assert len(keys) == len(real) == r.input_length // bs
        for k, h in zip(keys, real):
            assert key_of_hash.setdefault(h, k) == k
            assert hash_of_key.setdefault(k, h) == h
    assert len(key_of_hash) < 60 * 6 * 512 // bs      # prefixes did recur


@pytest.mark.parametrize("bs", [16, 64, 512])
@pytest.mark.parametrize("order", ["split", "append"])
def test_the_fast_path_equals_real_requests_hashing_real_tokens(bs, order):
    rng = random.Random(7 * bs + len(order))
    t = _random_trace(rng, 80)
    per = 512 // bs
    for pool in (3 * per, 8 * per, 40 * per):
        fast = replay_sequence(t, block_size=bs, pool_blocks=pool, free_order=order)
        exact = replay_sequence(t, block_size=bs, pool_blocks=pool, free_order=order, exact_tokens=True)
        assert fast == exact
    small = replay_sequence(t, block_size=bs, pool_blocks=3 * per, free_order=order)
    assert small["evictions"] > 0 and small["rejected"] > 0


def test_progress_counts_every_request():
    t = _random_trace(random.Random(1), 700)
    seen: list[int] = []
    replay_sequence(t, block_size=64, pool_blocks=100, progress=seen.append)
    assert sum(seen) == 700 and len(seen) == 3
    seen.clear()
    ceiling(t, block_size=64, progress=seen.append)
    assert sum(seen) == 700


def test_the_mode_registry():
    assert MODES["sequence"].run is replay_sequence
    with pytest.raises(ValueError, match="pool_blocks"):
        replay_sequence(T512, block_size=512, pool_blocks=0)
    with pytest.raises(ValueError, match="does not divide"):
        replay_sequence(T512, block_size=48, pool_blocks=4)
