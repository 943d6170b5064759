"""KVCacheManager / BlockPool cases beyond the walkthrough table, each as vLLM 0.33 behaves
(shared/design/vllm-semantics.md, "BlockPool" and "KVCacheManager and scheduler").

Unless a test says otherwise it drives the manager the way vLLM's scheduler does for a waiting
request: ``get_computed_blocks(req)`` -> (hits per group, n, boundary), then
``allocate_slots(req, num_tokens - n, n, hits)``, then ``req.num_computed_tokens = num_tokens``
(the scheduler's _update_after_schedule); a decode is ``allocate_slots(req, 1)`` for the one
pending token; "finished" is ``free(req)``.
"""
from __future__ import annotations

import pytest
from core_helpers import (
    DOC_H1_INT,
    DOC_H2_INT,
    doc_chain,
    event_int,
    events,
    free_ids,
    hash_map,
    ref_cnts,
    snapshot,
    tables,
)

from blockviz.core import KVCacheManager, RequestStatus, Scheduler, check_invariants

H1, H2 = doc_chain(list(range(1, 9)))


def admit(mgr, req):
    """(hit block ids, new blocks) of the one group, or new None when it did not fit."""
    hits, num_hit, _ = mgr.get_computed_blocks(req)
    new = mgr.allocate_slots(req, req.num_tokens - num_hit, num_hit, hits)
    if new is not None:
        req.num_computed_tokens = req.num_tokens
    return [b.block_id for b in hits[0]], None if new is None else new[0]


def after_b_finished(make_req, free_order="split"):
    """The walkthrough's "B finished" state: queue 4 3 5 6 2 1 (split), H1 -> 1, H2 -> 2."""
    mgr = KVCacheManager(7, 4, free_order=free_order)
    a = make_req("A", list(range(1, 11)))
    b = make_req("B", list(range(1, 9)) + [11, 12])
    admit(mgr, a)
    admit(mgr, b)
    mgr.free(a)
    mgr.free(b)
    mgr.block_pool.take_events()
    assert hash_map(mgr.block_pool) == [(H1, [1]), (H2, [2])]
    return mgr


# -- get_computed_blocks ------------------------------------------------------------------------

@pytest.mark.parametrize("num_tokens, hit_blocks", [(4, []), (5, [1]), (8, [1]), (9, [1, 2]),
                                                    (10, [1, 2])])
def test_hit_limit_is_num_tokens_minus_one(make_req, num_tokens, hit_blocks):
    """The last token's logits must be computed, so at most num_tokens - 1 tokens can hit, in
    whole blocks: 8 cached tokens give a request of exactly those 8 tokens only block 1."""
    mgr = after_b_finished(make_req)
    prompt = (list(range(1, 9)) + [50, 51])[:num_tokens]
    hits, n, _ = mgr.get_computed_blocks(make_req("R", prompt))
    assert [b.block_id for b in hits[0]] == hit_blocks and n == 4 * len(hit_blocks)


def test_get_computed_blocks_touches_nothing(make_req):
    mgr = after_b_finished(make_req)
    before = snapshot(mgr)
    hits, n, _ = mgr.get_computed_blocks(make_req("R", list(range(1, 11))))
    assert n == 8 and [b.ref_cnt for b in hits[0]] == [0, 0]
    assert snapshot(mgr) == before


def test_lookup_stops_at_the_first_miss(make_req):
    """Hashes chain, so once block i misses no later block can be used: with H1 evicted, the
    still-cached H2 is not a hit."""
    mgr = after_b_finished(make_req)
    mgr.block_pool.evict_blocks([1])
    assert events(mgr.block_pool) == [("BlockRemoved", (DOC_H1_INT,))]
    assert mgr.block_pool.get_cached_block(H2) is mgr.block_pool.blocks[2]
    assert mgr.get_computed_blocks(make_req("R", list(range(1, 11)))) == (([],), 0, 0)


def test_caching_disabled_never_hits_or_hashes(make_req):
    mgr = KVCacheManager(7, 4, enable_caching=False)
    a = make_req("A", list(range(1, 11)))
    admit(mgr, a)
    assert hash_map(mgr.block_pool) == [] and events(mgr.block_pool) == []
    assert all(b.block_hash is None for b in mgr.block_pool.blocks)
    assert mgr.get_computed_blocks(make_req("B", list(range(1, 11)))) == (([],), 0, 0)


@pytest.mark.parametrize("free_order, queue", [("split", [3, 2, 1, 4, 5, 6]),
                                               ("append", [4, 5, 6, 3, 2, 1])])
def test_caching_disabled_free_order(make_req, free_order, queue):
    """Without prefix caching no block can ever hit, so vLLM >= 0.24 reuses all freed blocks
    first (prepended, LIFO); classic appends them."""
    mgr = KVCacheManager(7, 4, enable_caching=False, free_order=free_order)
    a = make_req("A", list(range(1, 11)))
    admit(mgr, a)
    mgr.free(a)
    assert free_ids(mgr.block_pool) == queue


# -- duplicates ---------------------------------------------------------------------------------

def test_exact_cached_prompt_recomputes_its_last_block_as_a_duplicate(make_req):
    """A request of exactly the 8 cached tokens hits only block 1 (limit 7 tokens), recomputes
    tokens 5-8 into a new block and caches it under H2 *again*: vLLM does not de-duplicate, so the
    map holds H2 -> [2, new] in that order, and lookups keep returning block 2."""
    mgr = after_b_finished(make_req)
    pool = mgr.block_pool
    e = make_req("E", list(range(1, 9)))
    hits, new = admit(mgr, e)
    assert hits == [1] and [b.block_id for b in new] == [4]        # 4 was the head
    assert tables(mgr) == {"E": [1, 4]}
    assert free_ids(pool) == [3, 5, 6, 2]
    assert ref_cnts(pool) == [1, 0, 0, 1, 0, 0]
    assert hash_map(pool) == [(H1, [1]), (H2, [2, 4])]
    assert pool.get_cached_block(H2) is pool.blocks[2]
    assert events(pool) == [("BlockStored", (DOC_H2_INT,), DOC_H1_INT, (5, 6, 7, 8), 4)]
    check_invariants(pool, mgr)

    # A longer request now hits block 2 (first inserted), not the duplicate 4.
    assert [b.block_id for b in mgr.get_computed_blocks(make_req("F", list(range(1, 10))))[0][0]] \
        == [1, 2]

    # E finishes (table reversed: 4 then 1, both hashed -> tail). Fresh requests then take the head
    # 3 5 6 2: reusing block 2 evicts only (H2, block 2) — the duplicate 4 keeps H2 alive.
    mgr.free(e)
    assert free_ids(pool) == [3, 5, 6, 2, 4, 1]
    admit(mgr, make_req("G", list(range(300, 316))))
    assert events(pool)[0] == ("BlockRemoved", (DOC_H2_INT,))
    assert hash_map(pool)[:2] == [(H1, [1]), (H2, [4])]
    assert pool.get_cached_block(H2) is pool.blocks[4]
    check_invariants(pool, mgr)


# -- eviction -----------------------------------------------------------------------------------

def test_fresh_tokens_evict_from_the_head_one_event_per_block(make_req):
    """24 fresh tokens need all six blocks; they come off the head 4 3 5 6 2 1, and the hashed
    ones (2 then 1) are evicted lazily, at reuse: one BlockRemoved per block (H2 first), then
    one BlockStored for the six new blocks with parent None."""
    mgr = after_b_finished(make_req)
    d_tokens = list(range(101, 125))
    d = make_req("D", d_tokens)
    _, new = admit(mgr, d)
    assert [b.block_id for b in new] == [4, 3, 5, 6, 2, 1]
    assert events(mgr.block_pool) == [
        ("BlockRemoved", (DOC_H2_INT,)), ("BlockRemoved", (DOC_H1_INT,)),
        ("BlockStored", tuple(event_int(h) for h in doc_chain(d_tokens)), None, tuple(d_tokens), 4)]
    assert mgr.block_pool.num_evictions == 2


# -- allocate_slots -----------------------------------------------------------------------------

def test_allocate_slots_returns_none_and_changes_nothing_when_short(make_req):
    mgr = after_b_finished(make_req)
    r = make_req("R", list(range(500, 528)))                          # 7 blocks > 6
    before = snapshot(mgr, [r])
    assert mgr.allocate_slots(r, 28) is None
    assert snapshot(mgr, [r]) == before                               # no eviction happened either
    assert "R" not in mgr.req_to_blocks


def test_capacity_check_counts_hits_that_sit_in_the_free_queue(make_req):
    """Touching a free hit takes it out of the queue, so the check needs new blocks + free hits.
    Here 4 blocks are free: G needs 3 new blocks (fits) + 2 free hits (does not) -> None, nothing
    changes; G2 needs 2 new + 2 free hits = 4 -> fits exactly."""
    mgr = after_b_finished(make_req)
    pool = mgr.block_pool
    admit(mgr, make_req("F", list(range(201, 209))))                  # takes 4, 3 (unhashed)
    events(pool)
    assert free_ids(pool) == [5, 6, 2, 1]

    g = make_req("G", list(range(1, 9)) + list(range(600, 612)))     # 20 tokens = 5 blocks
    hits, n, _ = mgr.get_computed_blocks(g)
    assert [b.block_id for b in hits[0]] == [1, 2] and n == 8
    before = snapshot(mgr, [g])
    assert mgr.allocate_slots(g, g.num_tokens - n, n, hits) is None
    assert snapshot(mgr, [g]) == before

    g2 = make_req("G2", list(range(1, 9)) + list(range(600, 608)))   # 16 tokens = 4 blocks
    hits, n, _ = mgr.get_computed_blocks(g2)
    new = mgr.allocate_slots(g2, g2.num_tokens - n, n, hits)
    assert [b.block_id for b in new[0]] == [5, 6]
    assert tables(mgr)["G2"] == [1, 2, 5, 6] and free_ids(pool) == []
    check_invariants(pool, mgr)


def test_hits_held_by_a_running_request_cost_no_free_block(make_req):
    """With A and B running (blocks 1 and 2 at ref_cnt 2, queue 5 6), C's hits 1 and 2 are not in
    the queue, so C needs only its 2 new blocks — and gets them."""
    mgr = KVCacheManager(7, 4)
    admit(mgr, make_req("A", list(range(1, 11))))
    admit(mgr, make_req("B", list(range(1, 9)) + [11, 12]))
    assert free_ids(mgr.block_pool) == [5, 6]
    c = make_req("C", list(range(1, 9)) + list(range(700, 708)))
    hits, new = admit(mgr, c)
    assert hits == [1, 2] and [b.block_id for b in new] == [5, 6]
    assert ref_cnts(mgr.block_pool)[:2] == [3, 3]
    check_invariants(mgr.block_pool, mgr)


def test_allocate_slots_rejects_zero_tokens(make_req):
    mgr = KVCacheManager(7, 4)
    with pytest.raises(ValueError):
        mgr.allocate_slots(make_req("R", [1, 2, 3]), 0)


# -- caching happens at schedule time -----------------------------------------------------------

def test_blocks_are_cached_inside_allocate_slots(make_req):
    """vLLM caches every block that is full as of min(computed + new tokens, num_tokens) inside
    allocate_slots — before the forward pass has written a single K/V. With a chunked prefill
    (5 tokens, then 5) the second block is cached by the second call."""
    mgr = KVCacheManager(7, 4)
    pool = mgr.block_pool
    a = make_req("A", list(range(1, 11)))
    assert [b.block_id for b in mgr.allocate_slots(a, 5)[0]] == [1, 2]
    assert a.num_computed_tokens == 0                                 # nothing computed yet
    assert hash_map(pool) == [(H1, [1])]
    assert events(pool) == [("BlockStored", (DOC_H1_INT,), None, (1, 2, 3, 4), 4)]
    a.num_computed_tokens = 5
    assert [b.block_id for b in mgr.allocate_slots(a, 5)[0]] == [3]
    assert hash_map(pool) == [(H1, [1]), (H2, [2])]
    assert events(pool) == [("BlockStored", (DOC_H2_INT,), DOC_H1_INT, (5, 6, 7, 8), 4)]
    check_invariants(pool, mgr)


def test_a_decode_that_fills_a_block_caches_it_on_the_next_allocate_slots(make_req):
    """R = tokens 1..7: block 2 is partial. The prefill samples token 8, completing block 2 — the
    request computes H2 at once, but the block is not cached yet: token 8's K/V is computed by
    the next step, whose allocate_slots(R, 1) caches it (one BlockStored, parent H1)."""
    mgr = KVCacheManager(7, 4)
    pool = mgr.block_pool
    r = make_req("R", list(range(1, 8)))
    admit(mgr, r)
    assert hash_map(pool) == [(H1, [1])]
    events(pool)
    r.append_output_token_ids(8)
    assert r.block_hashes == [H1, H2]
    assert pool.get_cached_block(H2) is None
    assert mgr.allocate_slots(r, 1) == ([],)                           # 8 slots fit in 2 blocks
    assert hash_map(pool) == [(H1, [1]), (H2, [2])]
    assert events(pool) == [("BlockStored", (DOC_H2_INT,), DOC_H1_INT, (5, 6, 7, 8), 4)]
    r.num_computed_tokens = 8
    r.append_output_token_ids(9)
    assert [b.block_id for b in mgr.allocate_slots(r, 1)[0]] == [3]      # slot 9 needs block 3
    assert events(pool) == []
    check_invariants(pool, mgr)


# -- free ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("free_order, queue", [("split", [3, 4, 5, 6, 2, 1]),
                                               ("append", [4, 5, 6, 3, 2, 1])])
def test_free_passes_the_table_reversed(make_req, monkeypatch, free_order, queue):
    """free() hands BlockPool.free_blocks the table reversed, so the tail of a request's chain is
    evicted first: A's table [1, 2, 3] arrives as 3, 2, 1 — hashed 2 and 1 land at the tail in
    that order (block 2 is evicted before block 1); unhashed 3 goes to the head (split) or the
    tail (append)."""
    mgr = KVCacheManager(7, 4, free_order=free_order)
    pool = mgr.block_pool
    a = make_req("A", list(range(1, 11)))
    admit(mgr, a)
    passed = []
    real_free_blocks = pool.free_blocks

    def spy(ordered_blocks, **kw):
        ordered_blocks = list(ordered_blocks)
        passed.append([b.block_id for b in ordered_blocks])
        real_free_blocks(ordered_blocks, **kw)

    monkeypatch.setattr(pool, "free_blocks", spy)
    mgr.free(a)
    assert passed == [[3, 2, 1]]
    assert free_ids(pool) == queue
    assert "A" not in mgr.req_to_blocks and "A" not in mgr.num_cached_block


def test_free_keeps_hashes_until_reuse(make_req):
    mgr = KVCacheManager(7, 4)
    a = make_req("A", list(range(1, 11)))
    admit(mgr, a)
    events(mgr.block_pool)
    mgr.free(a)
    assert hash_map(mgr.block_pool) == [(H1, [1]), (H2, [2])]
    assert events(mgr.block_pool) == []


# -- reset_prefix_cache -------------------------------------------------------------------------

def test_reset_prefix_cache_refuses_while_a_request_holds_blocks(make_req):
    mgr = KVCacheManager(7, 4)
    a = make_req("A", list(range(1, 11)))
    admit(mgr, a)
    before = snapshot(mgr, [a])                                       # includes pending events
    assert mgr.reset_prefix_cache() is False
    assert snapshot(mgr, [a]) == before


@pytest.mark.parametrize("free_order", ["split", "append"])
def test_reset_prefix_cache_clears_every_hash_and_keeps_the_queue(make_req, free_order):
    mgr = KVCacheManager(7, 4, free_order=free_order)
    pool = mgr.block_pool
    a = make_req("A", list(range(1, 11)))
    admit(mgr, a)
    mgr.free(a)
    events(pool)
    queue = free_ids(pool)
    assert mgr.reset_prefix_cache() is True
    assert free_ids(pool) == queue
    assert hash_map(pool) == [] and all(b.block_hash is None for b in pool.blocks)
    assert events(pool) == [("AllBlocksCleared",)]
    assert mgr.get_computed_blocks(make_req("B", list(range(1, 11)))) == (([],), 0, 0)
    check_invariants(pool, mgr)


# -- small pool API -----------------------------------------------------------------------------

def test_is_block_writable(make_req):
    """Only a block held by exactly one table and not shared through the cache may change."""
    mgr = KVCacheManager(7, 4)
    pool = mgr.block_pool
    a = make_req("A", list(range(1, 11)))
    admit(mgr, a)                                    # 1, 2 cached (hash), 3 partial
    assert not pool.is_block_writable(pool.null_block)
    assert not pool.is_block_writable(pool.blocks[1])   # ref 1 but hashed
    assert pool.is_block_writable(pool.blocks[3])       # ref 1, no hash
    assert not pool.is_block_writable(pool.blocks[4])   # free
    admit(mgr, make_req("B", list(range(1, 9)) + [11]))  # B shares 1, 2; gets 4
    assert pool.is_block_writable(pool.blocks[4])
    pool.touch([pool.blocks[4]])                         # a second holder
    assert not pool.is_block_writable(pool.blocks[4])


def test_get_usage_counts_cached_free_blocks_as_free(make_req):
    mgr = KVCacheManager(7, 4)
    pool = mgr.block_pool
    assert pool.get_usage() == 0.0 and mgr.usage == 0.0
    a = make_req("A", list(range(1, 11)))
    admit(mgr, a)
    assert pool.get_usage() == pytest.approx(1 - 3 / 6)
    admit(mgr, make_req("D", list(range(101, 113))))
    assert pool.get_usage() == 1.0
    mgr.free(a)
    assert pool.get_usage() == pytest.approx(0.5)        # hashed blocks are free (evictable)
    assert KVCacheManager(1, 4).usage == 0.0             # only the null block


# -- through the scheduler ----------------------------------------------------------------------

def step(sched, tokens: dict[str, int] | None = None, only=None):
    """One engine step: schedule, then each sampling request gets its token (default 50)."""
    out = sched.schedule(only)
    sched.update_from_output(out, {s.request.request_id: (tokens or {}).get(s.request.request_id, 50)
                                   for s in out.scheduled if s.samples})
    return out


def test_preempt_and_resume_re_hits_its_own_prefix(make_req):
    """A preempted request frees its table (reversed), restarts from num_computed_tokens = 0 at
    the front of the waiting queue, keeps its output tokens, and on resumption finds its own full
    blocks still cached: hit limit num_tokens - 1 = 10 -> both blocks. vLLM counts the resumed
    lookup apart from the first one (PrefixCacheStats.preempted_*)."""
    mgr = KVCacheManager(7, 4)
    sched = Scheduler(mgr)
    x = make_req("X", list(range(1, 10)))
    sched.add_request(x)
    step(sched, {"X": 50})                  # admitted: 9 prompt tokens, samples 50
    step(sched, {"X": 51})                  # decodes 50, samples 51
    assert tables(mgr) == {"X": [1, 2, 3]} and x.num_computed_tokens == 10

    sched.preempt_request("X")              # teaching-only: vLLM preempts only under pressure
    assert x.status is RequestStatus.PREEMPTED and x.num_computed_tokens == 0
    assert sched.waiting == [x] and sched.running == [] and x.num_preemptions == 1
    assert free_ids(mgr.block_pool) == [3, 4, 5, 6, 2, 1]           # 3 unhashed -> head
    assert x.all_token_ids == list(range(1, 10)) + [50, 51]

    out = sched.schedule()
    (item,) = out.scheduled
    assert item.admitted and item.resumed and item.local_hit_tokens == 8
    assert item.hit_block_ids == (1, 2)
    assert item.start == 8 and item.num_new_tokens == 3                # recompute 9, 50, 51
    assert tables(mgr) == {"X": [1, 2, 3]} and x.status is RequestStatus.RUNNING
    assert x.num_computed_tokens == 11
    s = mgr.prefix_cache_stats
    assert (s.requests, s.queries, s.hits) == (1, 9, 0)
    assert (s.preempted_requests, s.preempted_queries, s.preempted_hits) == (1, 11, 8)
    check_invariants(mgr.block_pool, mgr)


def test_decode_pressure_preempts_the_last_running_request(make_req):
    """Four usable blocks; P has 7 prompt tokens, Q 8. Step 1 admits P ([1, 2]); step 2 decodes P
    first (its 8th token fills block 2, cached now) and then admits Q ([3, 4]). Step 3: P's next
    token needs a third block, none is free, so the *last* running request, Q, is preempted (its
    table freed reversed, hashed blocks to the tail) and P's retry takes the head — Q's last
    block, evicting HQ2. Nothing is admitted in a step that preempted. Q's return must fit whole
    (9 tokens: 3 blocks), so it waits until P finishes; then it re-hits its surviving HQ1."""
    mgr = KVCacheManager(5, 4)
    pool = mgr.block_pool
    sched = Scheduler(mgr)
    p = make_req("P", list(range(1, 8)))
    q = make_req("Q", list(range(21, 29)))
    hq1, hq2 = doc_chain(list(range(21, 29)))
    sched.add_request(p)
    step(sched, {"P": 90})
    sched.add_request(q)
    out = step(sched, {"P": 91, "Q": 92})
    assert [(s.request, s.num_new_tokens, s.admitted) for s in out.scheduled] == [
        (p, 1, False), (q, 8, True)]
    assert tables(mgr) == {"P": [1, 2], "Q": [3, 4]} and free_ids(pool) == []
    p_h1, p_h2 = doc_chain(list(range(1, 8)) + [90])
    assert hash_map(pool) == [(p_h1, [1]), (p_h2, [2]), (hq1, [3]), (hq2, [4])]
    events(pool)

    out = step(sched, {"P": 93})
    assert out.preempted == ["Q"] and [s.request for s in out.scheduled] == [p]
    assert q.status is RequestStatus.PREEMPTED and sched.waiting == [q]
    assert tables(mgr) == {"P": [1, 2, 4]} and free_ids(pool) == [3]
    assert events(pool) == [("BlockRemoved", (event_int(hq2),))]

    # Q (9 tokens now) cannot come back: 1 free hit + 2 new blocks > 1 free block; it stays first.
    out = step(sched, {"P": 94})
    assert [s.request for s in out.scheduled] == [p] and sched.waiting == [q]

    sched.finish_request("P")                       # [4, 2, 1]: 4 unhashed -> head
    assert free_ids(pool) == [4, 3, 2, 1]
    out = sched.schedule()
    (item,) = out.scheduled
    assert item.request is q and item.hit_block_ids == (3,) and item.local_hit_tokens == 4
    assert tables(mgr) == {"Q": [3, 4, 2]}
    assert events(pool) == [("BlockRemoved", (event_int(p_h2),)),
                            ("BlockStored", (event_int(hq2),), event_int(hq1), (25, 26, 27, 28), 4)]
    check_invariants(pool, mgr)
