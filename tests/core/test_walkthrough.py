"""The seed's six-block walkthrough, row by row, at pointer level — as vLLM 0.33 runs it.

shared/design/vllm-semantics.md, "The seed's six-block walkthrough": block size 4, six usable
blocks (num_gpu_blocks = 7, block 0 is the null block). A = tokens 1..8 plus 2 more; B and C
share A's first 8 tokens. After every step we read the free queue link by link (head -> tail and
back, both sentinels), the ref_cnt of blocks 1..6, the hash map (which hash -> which block ids, in
insertion order), every request's block table and the KV events.

Each row is checked in both free orders:
  * ``split`` (vLLM >= 0.24, the default): ``free_blocks`` prepends blocks without a hash to the
    head and appends hashed ones to the tail — the table rows of the doc;
  * ``append`` ("classic", vLLM <= 0.23): every freed block goes to the tail — the doc gives its
    "B finished" row (5 6 3 4 2 1); the other classic rows follow by hand from vLLM 0.23's
    ``BlockPool.free_blocks`` (``append_n`` of all blocks reaching ref_cnt 0) and are written out
    below.

Two drivers produce the rows:
  * ``manager``: the calls vLLM's scheduler makes for a waiting request, by hand —
    ``get_computed_blocks(req)`` -> (hits per group, n, boundary);
    ``allocate_slots(req, num_tokens - n, n, hits)``;
    then ``num_computed_tokens = num_tokens`` (``_update_after_schedule``) and one sampled token
    appended (a prefill samples one token); "finished" is ``KVCacheManager.free(req)``.
  * ``scheduler``: the same through ``blockviz.core.Scheduler`` (``add_request``, one engine
    step = ``schedule()`` + ``update_from_output``, ``finish_request``). As in vLLM, the step that
    admits B serves the running A first: A decodes one token (12 tokens, 11 computed), which
    lands in A's third block and so changes no row.
"""
from __future__ import annotations

import pytest
from core_helpers import (
    DOC_H1_INT,
    DOC_H1_PREFIX,
    DOC_H2_INT,
    DOC_H2_PREFIX,
    doc_chain,
    event_int,
    events,
    free_ids,
    hash_map,
    ref_cnts,
    tables,
)

from blockviz.core import KVCacheManager, RequestStatus, Scheduler, check_invariants

A_TOKENS = list(range(1, 11))                       # 1..8 + 9, 10
B_TOKENS = list(range(1, 9)) + [11, 12]             # A's first 8 + 2 more
C_TOKENS = list(range(1, 9)) + [13, 14]
D_TOKENS = list(range(101, 125))                    # 24 fresh tokens
SAMPLED = 99                                        # the token each prefill samples
H1, H2 = doc_chain(A_TOKENS)                        # the doc's formula, computed with hashlib
D_HASHES = doc_chain(D_TOKENS)

# Expected rows: free queue head -> tail, ref_cnt of blocks 1..6, tables.
ROWS = {
    "split": {
        "start":      ([1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0], {}),
        "A admitted": ([4, 5, 6], [1, 1, 1, 0, 0, 0], {"A": [1, 2, 3]}),
        "B admitted": ([5, 6], [2, 2, 1, 1, 0, 0], {"A": [1, 2, 3], "B": [1, 2, 4]}),
        "A finished": ([3, 5, 6], [1, 1, 0, 1, 0, 0], {"B": [1, 2, 4]}),
        "B finished": ([4, 3, 5, 6, 2, 1], [0, 0, 0, 0, 0, 0], {}),
        "C touched":  [4, 3, 5, 6],
        "C admitted": ([3, 5, 6], [1, 1, 0, 1, 0, 0], {"C": [1, 2, 4]}),
        "D admitted": ([], [1, 1, 1, 1, 1, 1], {"D": [4, 3, 5, 6, 2, 1]}),
    },
    "append": {
        "start":      ([1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 0, 0], {}),
        "A admitted": ([4, 5, 6], [1, 1, 1, 0, 0, 0], {"A": [1, 2, 3]}),
        "B admitted": ([5, 6], [2, 2, 1, 1, 0, 0], {"A": [1, 2, 3], "B": [1, 2, 4]}),
        # A's table freed reversed (3, 2, 1): only 3 reaches 0 and is appended.
        "A finished": ([5, 6, 3], [1, 1, 0, 1, 0, 0], {"B": [1, 2, 4]}),
        # B's table freed reversed (4, 2, 1): all reach 0, all appended (the doc's classic row).
        "B finished": ([5, 6, 3, 4, 2, 1], [0, 0, 0, 0, 0, 0], {}),
        # C touches its hits 1 and 2 out of the queue, then takes the head, block 5.
        "C touched":  [5, 6, 3, 4],
        "C admitted": ([6, 3, 4], [1, 1, 0, 0, 1, 0], {"C": [1, 2, 5]}),
        "D admitted": ([], [1, 1, 1, 1, 1, 1], {"D": [5, 6, 3, 4, 2, 1]}),
    },
}


class ManagerDriver:
    """vLLM's scheduler calls, made by hand on a KVCacheManager."""

    def __init__(self, mgr: KVCacheManager) -> None:
        self.mgr = mgr

    def admit(self, req):
        hits, num_hit, _ = self.mgr.get_computed_blocks(req)
        new = self.mgr.allocate_slots(req, req.num_tokens - num_hit, num_hit, hits)
        assert new is not None
        req.num_computed_tokens = req.num_tokens   # the scheduler's _update_after_schedule
        req.status = RequestStatus.RUNNING
        req.append_output_token_ids(SAMPLED)       # the prefill samples one token
        return [b.block_id for b in hits[0]]

    def finish(self, req):
        self.mgr.free(req)
        req.status = RequestStatus.FINISHED


class SchedulerDriver:
    """The same through blockviz.core.Scheduler: one engine step per arrival."""

    def __init__(self, mgr: KVCacheManager) -> None:
        self.sched = Scheduler(mgr)

    def admit(self, req):
        running = list(self.sched.running)
        self.sched.add_request(req)
        out = self.sched.schedule()
        # running first (one decode token each), then the admission
        assert [s.request for s in out.scheduled] == running + [req] and not out.preempted
        assert [s.num_new_tokens for s in out.scheduled[:-1]] == [1] * len(running)
        self.sched.update_from_output(out, {s.request.request_id: SAMPLED for s in out.scheduled})
        assert req.status is RequestStatus.RUNNING and req.num_computed_tokens == req.num_tokens - 1
        assert all(r.num_computed_tokens == r.num_tokens - 1 for r in running)
        return list(out.scheduled[-1].hit_block_ids)

    def finish(self, req):
        self.sched.finish_request(req.request_id)


DRIVERS = {"manager": ManagerDriver, "scheduler": SchedulerDriver}


def check_row(mgr, free_order, row, expected_map):
    queue, refs, tbls = ROWS[free_order][row]
    pool = mgr.block_pool
    assert free_ids(pool) == queue, row
    assert ref_cnts(pool) == refs, row
    assert hash_map(pool) == expected_map, row
    assert tables(mgr) == tbls, row
    assert pool.null_block.ref_cnt == 0 and pool.null_block.block_hash is None
    check_invariants(pool, mgr)


def run_until_b_finished(mgr, driver, make_req, free_order):
    """Rows start .. B finished. Returns the (still cached) map and the events seen."""
    prefix_map = [(H1, [1]), (H2, [2])]
    check_row(mgr, free_order, "start", [])

    a = make_req("A", A_TOKENS)
    assert a.block_hashes == [H1, H2]
    assert driver.admit(a) == []
    # Cached at schedule time: A's two full blocks are in the map right after allocate_slots.
    check_row(mgr, free_order, "A admitted", prefix_map)
    assert events(mgr.block_pool) == [
        ("BlockStored", (DOC_H1_INT, DOC_H2_INT), None, tuple(range(1, 9)), 4)]

    b = make_req("B", B_TOKENS)
    assert driver.admit(b) == [1, 2]           # hit limit 9 tokens -> both cached blocks
    check_row(mgr, free_order, "B admitted", prefix_map)
    assert events(mgr.block_pool) == []        # B caches nothing new: its 2 full blocks are hits

    driver.finish(a)
    check_row(mgr, free_order, "A finished", prefix_map)
    driver.finish(b)
    check_row(mgr, free_order, "B finished", prefix_map)
    assert events(mgr.block_pool) == []        # freeing never removes a hash
    return prefix_map


@pytest.mark.parametrize("driver_name", DRIVERS)
@pytest.mark.parametrize("free_order", ["split", "append"])
def test_walkthrough_then_c(free_order, driver_name, make_req, monkeypatch):
    mgr = KVCacheManager(7, 4, free_order=free_order)
    driver = DRIVERS[driver_name](mgr)
    prefix_map = run_until_b_finished(mgr, driver, make_req, free_order)
    assert hash_map(mgr.block_pool)[0][0].hex().startswith(DOC_H1_PREFIX)
    assert hash_map(mgr.block_pool)[1][0].hex().startswith(DOC_H2_PREFIX)

    # C: allocate_slots touches the hits (they leave the queue, keep their hashes), then takes its
    # one new block from the head. Observe the queue between the two steps.
    pool = mgr.block_pool
    seen = []
    real_get_new_blocks = pool.get_new_blocks

    def spy(n, **kw):
        seen.append((n, free_ids(pool), ref_cnts(pool)[:2]))
        return real_get_new_blocks(n, **kw)

    monkeypatch.setattr(pool, "get_new_blocks", spy)
    c = make_req("C", C_TOKENS)
    assert driver.admit(c) == [1, 2]
    assert seen == [(1, ROWS[free_order]["C touched"], [1, 1])]
    check_row(mgr, free_order, "C admitted", prefix_map)
    assert events(pool) == []


@pytest.mark.parametrize("driver_name", DRIVERS)
@pytest.mark.parametrize("free_order", ["split", "append"])
def test_walkthrough_then_d_evicts_the_prefix(free_order, driver_name, make_req):
    """Instead of C, D with 24 fresh tokens: it needs all six blocks, takes them head first, and
    each popped block that still carries a hash is evicted *now* (lazy eviction): block 2 (H2)
    comes off the queue before block 1 (H1) in both orders, so one BlockRemoved for H2, one for
    H1, then one BlockStored for D's six new blocks (parent None: D's chain starts at NONE_HASH)."""
    mgr = KVCacheManager(7, 4, free_order=free_order)
    driver = DRIVERS[driver_name](mgr)
    run_until_b_finished(mgr, driver, make_req, free_order)

    d = make_req("D", D_TOKENS)
    assert d.block_hashes == D_HASHES
    assert driver.admit(d) == []
    d_table = ROWS[free_order]["D admitted"][2]["D"]
    check_row(mgr, free_order, "D admitted", [(h, [i]) for h, i in zip(D_HASHES, d_table)])
    assert events(mgr.block_pool) == [
        ("BlockRemoved", (DOC_H2_INT,)),
        ("BlockRemoved", (DOC_H1_INT,)),
        ("BlockStored", tuple(event_int(h) for h in D_HASHES), None, tuple(D_TOKENS), 4),
    ]
    assert mgr.block_pool.get_cached_block(H1) is None
    assert mgr.block_pool.get_cached_block(H2) is None
