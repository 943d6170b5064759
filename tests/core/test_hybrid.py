"""Hybrid models — several KV-cache groups in one block pool — at pointer level, rule by rule, as
vLLM 0.33 runs them (shared/design/vllm-semantics.md, "Hybrid models"). File:line refer to the
0.33.0 wheel: ``stm`` = vllm/v1/core/single_type_kv_cache_manager.py, ``coord`` =
kv_cache_coordinator.py, ``kvm`` = kv_cache_manager.py, ``bp`` = block_pool.py,
``kvi`` = vllm/v1/kv_cache_interface.py.

Unless a test says otherwise: block size 4, group 0 full attention, group 1 a sliding window,
vLLM 0.33's default retention interval 0. A prefill is driven as the scheduler drives it:
``allocate_slots(req, n)`` then ``num_computed_tokens += n``.
"""
from __future__ import annotations

import pytest
from core_helpers import doc_chain, event_int, free_ids, ref_cnts, walk_free_queue

from blockviz.core import KVCacheManager, RequestStatus, Scheduler, check_invariants
from blockviz.core.kv_cache_interface import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    SlidingWindowSpec,
)
from blockviz.core.ops import OpList
from blockviz.core.scheduler import SchedulerConfig
from blockviz.core.single_type_kv_cache_manager import (
    ChunkedLocalAttentionManager,
    SlidingWindowManager,
)

BS = 4
FULL = FullAttentionSpec(BS)


def sw(w: int) -> SlidingWindowSpec:
    return SlidingWindowSpec(BS, sliding_window=w)


def manager(groups, num_blocks: int, retention: int | None = 0, **kw) -> KVCacheManager:
    return KVCacheManager(num_blocks + 1, BS, kv_cache_groups=groups,
                          prefix_cache_retention_interval=retention, sink=OpList(), **kw)


def chunk(mgr: KVCacheManager, req, n: int):
    new = mgr.allocate_slots(req, n)
    assert new is not None
    req.num_computed_tokens += n
    return new


def admit(mgr: KVCacheManager, req):
    """A waiting request's lookup and whole-prompt allocation (its shared-prefix boundary set as
    the scheduler sets it); returns (hit tokens, per-group hit ids)."""
    hits, n, req.shared_prefix_boundary = mgr.get_computed_blocks(req)
    assert mgr.allocate_slots(req, req.num_tokens - n, n, hits, full_sequence_must_fit=True)
    req.num_computed_tokens = req.num_tokens
    return n, [[b.block_id for b in g] for g in hits]


def kinds(ops, *names):
    return [(o.kind, o.block_ids, o.group) for o in ops if o.kind in names]


# -- 3. out-of-window blocks become the null block ---------------------------------------------

def test_blocks_leaving_the_window_become_null_highest_index_first_and_go_to_the_head(make_req):
    """SW(4): a token attends to itself and 3 before it, so after n tokens the first n - 3 are
    skipped (stm:1148-1183). allocate_slots frees them first (kvm:564-568), walking back from the
    last skipped block to the first null (stm:655-680): one free_blocks call, highest index first,
    each slot now the null block. Unhashed, they are prepended (bp:816-849) — and group 0's
    allocation in the same call takes them right back from the head (coord:315-348)."""
    mgr = manager([FULL, sw(4)], 12)
    pool, ops = mgr.block_pool, mgr.sink
    r = make_req("R", range(1, 25))                                   # 24 tokens, chunks of 8
    chunk(mgr, r, 8)
    assert mgr.get_block_ids("R") == ([1, 2], [3, 4])
    ops.clear()
    chunk(mgr, r, 8)                                                  # processed 8: skip 5 tokens
    assert mgr.get_block_ids("R") == ([1, 2, 3, 5], [0, 4, 6, 7])     # block 3 -> null, reused
    assert kinds(ops, "remove_skipped", "free", "free_head", "popleft")[:4] == [
        ("remove_skipped", (3,), 1), ("free", (3,), 1), ("free_head", (3,), 1),
        ("popleft", (3, 5), 0)]
    ops.clear()
    chunk(mgr, r, 8)                                                  # processed 16: skip 13
    rs = next(o for o in ops if o.kind == "remove_skipped")
    assert (rs.block_ids, rs.block_indices) == ((6, 4), (2, 1))       # back from 2, stops at 0
    assert kinds(ops, "free", "free_head", "popleft")[:3] == [
        ("free", (6, 4), 1), ("free_head", (6, 4), 1), ("popleft", (6, 4), 0)]
    assert mgr.get_block_ids("R") == ([1, 2, 3, 5, 6, 4], [0, 0, 0, 7, 8, 9])
    assert walk_free_queue(pool.free_block_queue) == [10, 11, 12]
    assert pool.null_block.ref_cnt == 0 and pool.null_block.block_hash is None
    check_invariants(pool, mgr)


def test_a_window_free_of_a_cached_block_goes_to_the_tail_before_the_full_blocks(make_req):
    """Dense retention caches every SW block, so the one leaving the window keeps its hash and is
    appended: a running request's SW blocks reach the tail before its full-attention blocks."""
    mgr = manager([FULL, sw(4)], 12, retention=None)
    r = make_req("R", range(1, 17))
    chunk(mgr, r, 8)
    chunk(mgr, r, 4)                                                  # processed 8: skip 5
    assert mgr.get_block_ids("R") == ([1, 2, 5], [0, 4, 6])
    assert free_ids(mgr.block_pool)[-1] == 3 and mgr.block_pool.blocks[3].block_hash is not None


def test_chunked_local_attention_frees_whole_past_chunks(make_req):
    """Chunked-local (C=8) skips floor(n / C) * C tokens (stm:1381-1425): at 8 computed tokens
    the first chunk's two blocks go, backward."""
    mgr = manager([FULL, ChunkedLocalAttentionSpec(BS, attention_chunk_size=8)], 12)
    r = make_req("R", range(1, 17))
    chunk(mgr, r, 4)
    chunk(mgr, r, 4)
    mgr.sink.clear()
    chunk(mgr, r, 4)                                                  # processed 8: skip 8
    rs = next(o for o in mgr.sink if o.kind == "remove_skipped")
    assert (rs.block_ids, rs.block_indices, rs.group) == ((4, 2), (1, 0), 1)
    assert mgr.get_block_ids("R")[1][:2] == [0, 0]


# -- 4. free order on finish and preemption ------------------------------------------------------

def test_finish_frees_group_0_first_each_table_reversed(make_req):
    """vllm-semantics.md's worked example (examples/hybrid/03): A = tokens 1..12 in full + SW(8).
    Group 0's table reversed, hashed -> tail 3 2 1; then group 1's reversed: block 6 (masked
    under retention 0, unhashed) -> head, 5 4 (hashed) -> tail after group 0's (coord:404-412,
    stm:591-599)."""
    mgr = manager([FULL, sw(8)], 10)
    a = make_req("A", range(1, 13))
    admit(mgr, a)
    assert mgr.get_block_ids("A") == ([1, 2, 3], [4, 5, 6])
    assert free_ids(mgr.block_pool) == [7, 8, 9, 10]
    mgr.sink.clear()
    mgr.block_pool.take_events()
    mgr.free(a)
    assert kinds(mgr.sink, "free") == [("free", (3, 2, 1), 0), ("free", (6, 5, 4), 1)]
    assert walk_free_queue(mgr.block_pool.free_block_queue) == [6, 7, 8, 9, 10, 3, 2, 1, 5, 4]
    # X (16 new tokens) takes 4 + 4 from the head: group 0 first, evicting A's full blocks
    x = make_req("X", range(101, 117))
    admit(mgr, x)
    assert mgr.get_block_ids("X") == ([6, 7, 8, 9], [10, 3, 2, 1])
    assert [(e[0], e[1]) for e in _events(mgr)][:3] == [
        ("BlockRemoved", 0), ("BlockRemoved", 0), ("BlockRemoved", 0)]
    check_invariants(mgr.block_pool, mgr)


def _events(mgr):
    return [(type(e).__name__, e.group_idx) for e in mgr.block_pool.take_events()]


def test_preemption_frees_like_finish_and_drops_leading_nulls(make_req):
    """The victim is running[-1] (scheduler.py:1799-1843), freed group by group; its SW table's
    leading nulls are trimmed (trim_null_head, stm:571-589), so no null is passed to free."""
    mgr = manager([FULL, sw(4)], 12)
    sched = Scheduler(mgr, config=SchedulerConfig(max_num_batched_tokens=8, max_num_seqs=8))
    a, b = make_req("A", range(1, 13)), make_req("B", range(201, 213))
    for r in (a, b):
        sched.add_request(r)
    def step():
        out = sched.schedule()
        sched.update_from_output(out, {s.request.request_id: 7 for s in out.scheduled
                                       if s.samples})
        return {s.request.request_id: s.num_new_tokens for s in out.scheduled}
    assert step() == {"A": 8}
    assert step() == {"A": 4, "B": 4}
    assert mgr.get_block_ids("A")[1][0] == 0  # A's SW block 0 left the window
    mgr.sink.clear()
    sched.preempt_request("A")                # (teaching-only: the free is vLLM's)
    frees = kinds(mgr.sink, "free")
    assert [g for _, _, g in frees] == [0, 1]
    assert 0 not in frees[1][1] and frees[0][1] == (3, 2, 1)
    assert a.status is RequestStatus.PREEMPTED and mgr.get_block_ids("A") == ([], [])
    check_invariants(mgr.block_pool, mgr)


# -- 5. the hit, reconciled across groups --------------------------------------------------------

def test_the_sliding_window_limits_a_hit_and_marks_the_shared_prefix(make_req):
    """examples/hybrid/02: A (20 tokens) caches all 5 full-attention blocks but, under retention
    0, only SW blocks 2 and 3 (the need = cdiv(8 - 1, 4) = 2 blocks before its replay boundary
    16). B shares 12 tokens: full attention hits 12, the SW group needs blocks 1 and 2 and finds
    block 1 uncached -> SW hit 0 -> the reconciled hit is 0 (coord:806-941; full attention
    first, one pass). The longest single-group hit, 12, becomes B's shared_prefix_boundary
    (kvm:319-325), so B's SW group also caches the blocks ending at 12; C then hits 12."""
    mgr = manager([FULL, sw(8)], 40)
    a = make_req("A", range(1, 21))
    admit(mgr, a)
    mgr.free(a)
    b = make_req("B", [*range(1, 13), 31, 32, 33, 34])
    hits, n, boundary = mgr.get_computed_blocks(b)
    assert (n, boundary) == (0, 12) and hits == mgr.empty_kv_cache_blocks
    lookup = next(o for o in mgr.sink if o.kind == "lookup" and o.request_id == "B")
    assert (lookup.num_hit_tokens, lookup.shared_prefix_boundary) == (0, 12)
    b.shared_prefix_boundary = boundary
    assert mgr.allocate_slots(b, 16, full_sequence_must_fit=True)
    b.num_computed_tokens = 16
    sw_cached = [i for i, blk in enumerate(mgr.single_type_managers[1].req_to_blocks["B"])
                 if blk.block_hash is not None]
    assert sw_cached == [1, 2]                # ends at the shared prefix (and at 12 = floor(15/4)*4)
    mgr.free(b)
    c = make_req("C", [*range(1, 13), 41, 42, 43, 44])
    n, ids = admit(mgr, c)
    assert n == 12 and len(ids[0]) == 3 and ids[1][0] == 0 and 0 not in ids[1][1:]
    check_invariants(mgr.block_pool, mgr)


def test_dense_retention_does_not_limit_the_hit(make_req):
    """examples/hybrid/02b: with retention null every SW block is cached, so B hits 12 at once."""
    mgr = manager([FULL, sw(8)], 40, retention=None)
    admit(mgr, make_req("A", range(1, 21)))
    hits, n, boundary = mgr.get_computed_blocks(make_req("B", [*range(1, 13), 31, 32, 33, 34]))
    assert (n, boundary) == (12, 0)
    assert [b.block_id for b in hits[1]] == [0, 7, 8]   # padded: block 0 is out of the window


def test_full_attention_blocks_are_cut_to_the_reconciled_length(make_req):
    """Full attention finds 3 blocks, the sliding window only 2 (its block 2 is evicted): the
    full-attention list is cut to 8 tokens' blocks (coord:919-932), the uncached 4 tokens make
    the boundary 12."""
    mgr = manager([FULL, sw(8)], 40, retention=None)
    admit(mgr, make_req("A", range(1, 17)))
    sw_table = mgr.single_type_managers[1].req_to_blocks["A"]
    mgr.block_pool.evict_blocks([sw_table[2].block_id])
    hits, n, boundary = mgr.get_computed_blocks(make_req("B", [*range(1, 13), 60, 61, 62, 63]))
    assert (n, boundary) == (8, 12)
    assert [b.block_id for b in hits[0]] == [1, 2]
    assert [b.block_id for b in hits[1]] == [b.block_id for b in sw_table[:2]]


def test_equal_windows_are_looked_up_together(make_req):
    """Gemma-like: equal SW specs merge into one attention group (coord:718-769), full attention
    sorted first; a block hits only when its hash is cached under every one of their group ids
    (bp:202-228)."""
    mgr = manager([sw(8), sw(8), FULL], 40, retention=None)
    assert [g.group_ids for g in mgr.coordinator.attention_groups] == [[2], [0, 1]]
    a = make_req("A", range(1, 17))
    admit(mgr, a)
    key = mgr.block_pool.key
    h = a.block_hashes
    assert mgr.block_pool.get_cached_block(h[2], [0, 1]) is not None
    mgr.block_pool.evict_blocks([mgr.block_pool.get_cached_block(key(h[2], 1)).block_id])
    assert mgr.block_pool.get_cached_block(h[2], [0, 1]) is None
    _, n, _ = mgr.get_computed_blocks(make_req("B", range(1, 17)))
    assert n == 8                             # SW run of 2 ending at block 2 is gone: 0..1


def test_sliding_window_finds_the_rightmost_run_or_a_shorter_one_from_block_0(make_req):
    """stm:969-1064: right to left for need contiguous blocks; none -> a run from block 0, even
    short; a chunked-local hit pads the past chunks with nulls (stm:1282-1379)."""
    mgr = manager([sw(12)], 40, retention=None)      # need = cdiv(11, 4) = 3
    admit(mgr, make_req("A", range(1, 25)))
    pool = mgr.block_pool
    a = mgr.single_type_managers[0].req_to_blocks["A"]
    r = make_req("R", range(1, 25))
    pool.evict_blocks([a[4].block_id])
    blocks, n = SlidingWindowManager.find_longest_cache_hit(r.block_hashes, 23, [0], pool, sw(12), 4)
    assert n == 16 and [b.block_id for b in blocks[0]] == [0, a[1].block_id, a[2].block_id,
                                                           a[3].block_id]
    pool.evict_blocks([a[2].block_id])
    blocks, n = SlidingWindowManager.find_longest_cache_hit(r.block_hashes, 23, [0], pool, sw(12), 4)
    assert n == 8 and [b.block_id for b in blocks[0]] == [a[0].block_id, a[1].block_id]
    empty = KVCacheManager(9, BS).block_pool
    spec = ChunkedLocalAttentionSpec(BS, attention_chunk_size=8)
    blocks, n = ChunkedLocalAttentionManager.find_longest_cache_hit(
        r.block_hashes, 9, [0], empty, spec, 4)
    assert n == 8 and blocks == ([empty.null_block] * 2,)   # nothing cached, 8 tokens "hit"


# -- 6. what each group caches: the retention mask -----------------------------------------------

@pytest.mark.parametrize("retention, window, boundaries, mask", [
    (None, 8, [], None),                           # dense: need 2 >= 1 block a segment
    (None, 1, [], [False] * 6),                    # W = 1 needs no block: nothing reachable
    (0, 8, [19], [False, False, True, True, False, False]),       # the tail before 16
    (0, 8, [19, 12], [False, True, True, True, False, False]),    # + a shared prefix at 12
    (16, 8, [23], [False, False, True, True, True, False]),       # segments of 4 + the tail
    (16, 4, [], [False, False, False, True, False, False]),       # need 1: the last of each
])
def test_reachable_block_mask(retention, window, boundaries, mask):
    """stm:1066-1146, for blocks 0..5."""
    got = SlidingWindowManager.reachable_block_mask(0, 6, BS, sw(window), retention, boundaries)
    assert got == mask


def test_a_store_of_masked_blocks_only_is_an_event_with_no_hashes(make_req):
    """Under retention 0 the SW group's first chunk caches nothing, yet the call emits one
    BlockStored for the group: block_hashes [], extra_keys None, token_ids over the range
    (bp:307-356); kind and window from the group's spec (kvm:705-730)."""
    mgr = manager([FULL, sw(4)], 12)
    r = make_req("R", range(1, 25))
    chunk(mgr, r, 8)
    full, window = mgr.block_pool.take_events()
    assert (full.group_idx, full.kv_cache_spec_kind, len(full.block_hashes)) == (
        0, "full_attention", 2)
    assert window.group_idx == 1 and window.kv_cache_spec_kind == "sliding_window"
    assert window.kv_cache_spec_sliding_window == 4
    assert window.block_hashes == () and window.extra_keys is None
    assert window.token_ids == tuple(range(1, 9)) and window.parent_block_hash is None
    chunk(mgr, r, 8)
    _, window = mgr.block_pool.take_events()
    assert window.block_hashes == () and window.parent_block_hash == event_int(r.block_hashes[1])
    chunk(mgr, r, 8)                                   # the block before the replay boundary 20
    _, window = mgr.block_pool.take_events()
    assert window.block_hashes == (event_int(r.block_hashes[4]),)


def test_keys_carry_the_group_and_evictions_name_it(make_req):
    """A block is cached under BlockHash || group id (kv_cache_utils.py:60-79); an eviction's
    BlockRemoved names the group it was cached under (bp:651-664)."""
    mgr = manager([FULL, sw(8)], 6, retention=None)
    a = make_req("A", range(1, 9))
    admit(mgr, a)
    h = doc_chain(list(range(1, 9)))
    assert [k for k, _ in mgr.block_pool.cached_block_hash_to_block.items()] == [
        h[0] + b"\0\0\0\0", h[1] + b"\0\0\0\0", h[0] + b"\0\0\0\1", h[1] + b"\0\0\0\1"]
    mgr.free(a)
    mgr.block_pool.take_events()
    admit(mgr, make_req("X", range(101, 113)))            # takes every block: evicts all four
    removed = [(e.block_hashes, e.group_idx) for e in mgr.block_pool.take_events()
               if type(e).__name__ == "BlockRemoved"]
    assert sorted(removed) == sorted([((event_int(x),), g) for x in h for g in (0, 1)])


# -- 1/2. admission caps per group ---------------------------------------------------------------

def test_admission_caps_a_windowed_groups_need(make_req):
    """The admission gate caps a SW group's need at cdiv(min(W - 1 + in-flight, max_model_len),
    bs) + 1 (kvi:918-944, stm:214-227): 40 tokens need 10 + 10 blocks, capped 10 + 4."""
    def gate(free_blocks):
        mgr = manager([FULL, sw(4)], free_blocks, max_in_flight_tokens=8)
        assert [m.max_admission_blocks_per_request for m in mgr.single_type_managers] == [None, 4]
        return mgr, mgr.allocate_slots(make_req("R", range(1, 41)), 8, full_sequence_must_fit=True)
    mgr, refused = gate(13)
    assert refused is None
    fail = next(o for o in mgr.sink if o.kind == "alloc_failed")
    assert (fail.blocks_needed, fail.blocks_free, fail.full_sequence) == (14, 13, True)
    assert gate(14)[1] is not None
    cl = manager([FULL, ChunkedLocalAttentionSpec(BS, attention_chunk_size=8)], 20,
                 max_in_flight_tokens=8)
    assert cl.single_type_managers[1].max_admission_blocks_per_request == 4   # cdiv(8 + 8, 4)


def test_one_full_attention_group_is_the_unitary_coordinator_with_bare_keys(make_req):
    """Without kv_cache_groups: vLLM's UnitaryKVCacheCoordinator, one FullAttentionManager, keys
    that are the request's hashes (what every one-group output has always shown)."""
    mgr = KVCacheManager(7, BS)
    assert type(mgr.coordinator).__name__ == "UnitaryKVCacheCoordinator"
    a = make_req("A", range(1, 11))
    admit(mgr, a)
    assert [k for k, _ in mgr.block_pool.cached_block_hash_to_block.items()] == a.block_hashes
    assert ref_cnts(mgr.block_pool) == [1, 1, 1, 0, 0, 0]


def test_specs_from_groups_names_the_group_field(monkeypatch):
    """A scenario group gives a spec only the field it names (``group_field``): a spec field added
    later keeps its default, even where the group has an attribute of that name (``size``)."""
    from dataclasses import dataclass

    from blockviz.core import kv_cache_interface as kvi
    from blockviz.scenario.schema import KVCacheGroup

    @dataclass(frozen=True)
    class LaterSlidingWindowSpec(SlidingWindowSpec):
        size: int = 7

    groups = [KVCacheGroup(type="full_attention"),
              KVCacheGroup(type="sliding_window", sliding_window=8),
              KVCacheGroup(type="chunked_local_attention", attention_chunk_size=16)]
    assert kvi.specs_from_groups(BS, groups) == (
        FULL, sw(8), ChunkedLocalAttentionSpec(BS, attention_chunk_size=16))
    monkeypatch.setitem(kvi._SPECS, "sliding_window", LaterSlidingWindowSpec)
    assert kvi.specs_from_groups(BS, groups[1:2]) == (LaterSlidingWindowSpec(BS, sliding_window=8),)
