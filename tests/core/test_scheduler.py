"""vLLM 0.33's Scheduler, rule by rule, at pointer level (vllm-semantics.md, "KVCacheManager and
scheduler"). Block size 4 throughout; ``KVCacheManager(N + 1, 4)`` has N usable blocks (block 0
is the null block). Every expected value below is worked out by hand in the docstring or the
comment beside it.
"""
from __future__ import annotations

import pytest
from core_helpers import doc_chain, free_ids, hash_map, tables

from blockviz.core import KVCacheManager, RequestStatus, Scheduler, check_invariants
from blockviz.core.ops import AllocFailed, Lookup, OpList
from blockviz.core.scheduler import SchedulerConfig


def make_sched(num_blocks: int, **config) -> tuple[KVCacheManager, Scheduler]:
    # vLLM requires max_num_batched_tokens >= max_num_seqs: small budgets lower the seq cap too
    config.setdefault("max_num_seqs", min(256, config.get("max_num_batched_tokens", 8192)))
    cfg = SchedulerConfig(**config)
    assert not cfg.problems()
    mgr = KVCacheManager(num_blocks + 1, 4, sink=OpList(), max_model_len=cfg.max_model_len)
    return mgr, Scheduler(mgr, config=cfg)


def step(sched: Scheduler, token: int = 50):
    """One engine step: schedule, then every request whose prefill is complete samples ``token``."""
    out = sched.schedule()
    sched.update_from_output(out, {s.request.request_id: token for s in out.scheduled if s.samples})
    return out


def plan(out) -> list[tuple[str, int]]:
    return [(s.request.request_id, s.num_new_tokens) for s in out.scheduled]


def test_running_requests_are_served_before_admissions(make_req):
    """A (4 tokens) is admitted into block 1 and samples a token. When B (5 tokens) arrives, the
    step serves A first: its decode token needs a second block and takes block 2, the head; then
    B is admitted into 3 and 4. An admission-first pass would have given B [2, 3] and A [1, 4]."""
    mgr, sched = make_sched(6)
    a, b = make_req("A", [1, 2, 3, 4]), make_req("B", [11, 12, 13, 14, 15])
    sched.add_request(a)
    assert plan(step(sched)) == [("A", 4)]
    sched.add_request(b)
    out = step(sched)
    assert plan(out) == [("A", 1), ("B", 5)]
    assert [s.decode for s in out.scheduled] == [True, False]
    assert [s.admitted for s in out.scheduled] == [False, True]
    assert tables(mgr) == {"A": [1, 2], "B": [3, 4]}
    assert (a.num_tokens, a.num_computed_tokens) == (6, 5)
    assert (b.num_tokens, b.num_computed_tokens) == (6, 5)
    check_invariants(mgr.block_pool, mgr)


def test_chunked_prefill_caches_block_by_block_and_samples_only_at_the_end(make_req):
    """Budget 4, A has 10 tokens: chunks of 4, 4, 2. allocate_slots caches every block full as of
    the chunk's end at schedule time: after chunk 1 block 1 holds H1, after chunk 2 block 2 holds
    H2; the last chunk fills no block. Only the last chunk samples a token."""
    mgr, sched = make_sched(6, max_num_batched_tokens=4)
    a = make_req("A", list(range(1, 11)))
    h1, h2 = doc_chain(list(range(1, 11)))
    sched.add_request(a)
    out = step(sched)
    assert plan(out) == [("A", 4)] and not out.scheduled[0].samples
    assert tables(mgr) == {"A": [1]} and hash_map(mgr.block_pool) == [(h1, [1])]
    assert a.is_prefill_chunk and a.num_output_tokens == 0
    out = step(sched)
    assert plan(out) == [("A", 4)] and not out.scheduled[0].decode
    assert tables(mgr) == {"A": [1, 2]} and hash_map(mgr.block_pool) == [(h1, [1]), (h2, [2])]
    out = step(sched)
    assert plan(out) == [("A", 2)] and out.scheduled[0].samples
    assert tables(mgr) == {"A": [1, 2, 3]} and a.num_output_tokens == 1
    assert plan(step(sched)) == [("A", 1)] and step(sched).scheduled[0].decode


def test_the_token_budget_runs_out_mid_admission(make_req):
    """Budget 4: A decodes 1 token, B (10 waiting tokens) gets the 3 left as its first chunk, and
    C, behind B, gets nothing: the budget is spent."""
    mgr, sched = make_sched(8, max_num_batched_tokens=4)
    a = make_req("A", [1, 2, 3])
    sched.add_request(a)
    step(sched)                                       # A: 3 tokens, samples
    sched.add_request(make_req("B", list(range(11, 21))))
    sched.add_request(make_req("C", [31, 32]))
    out = step(sched)
    assert plan(out) == [("A", 1), ("B", 3)] and out.total_num_scheduled_tokens == 4
    assert [r.request_id for r in sched.waiting] == ["C"]
    assert plan(step(sched)) == [("A", 1), ("B", 3)]  # B's next chunk; C still waits


def test_the_whole_sequence_must_fit_at_admission(make_req):
    """Four usable blocks, budget 4. A has 17 tokens (5 blocks): its first chunk (1 block) would
    fit, but vLLM admits only what fits whole, so A is refused — and B (4 tokens) behind it waits
    too (head-of-line blocking)."""
    mgr, sched = make_sched(4, max_num_batched_tokens=4)
    sched.add_request(make_req("A", list(range(1, 18))))
    sched.add_request(make_req("B", [21, 22, 23, 24]))
    out = step(sched)
    assert out.scheduled == [] and [r.request_id for r in sched.waiting] == ["A", "B"]
    failed = [op for op in mgr.sink if isinstance(op, AllocFailed)]
    assert failed == [AllocFailed("A", 5, 4, full_sequence=True)]
    assert free_ids(mgr.block_pool) == [1, 2, 3, 4]
    # A was looked up, but vLLM records the stats only at a successful admission
    assert [op.request_id for op in mgr.sink if isinstance(op, Lookup)] == ["A"]
    s = mgr.prefix_cache_stats
    assert (s.requests, s.queries, s.preempted_requests, s.preempted_queries) == (0, 0, 0, 0)


def test_with_chunked_prefill_off_a_prompt_over_the_budget_left_stops_admission(make_req):
    """Chunked prefill off, budget = max_model_len = 16. A (12 tokens) is admitted, leaving 4; B
    (6 tokens) does not fit the 4 and, unchunked, stops admission, so C (2 tokens) waits behind
    it. With chunking on, B would have taken a 4-token chunk."""
    mgr, sched = make_sched(12, max_num_batched_tokens=16, max_model_len=16,
                            enable_chunked_prefill=False)
    for rid, toks in (("A", range(1, 13)), ("B", range(21, 27)), ("C", [31, 32])):
        sched.add_request(make_req(rid, list(toks)))
    assert plan(step(sched)) == [("A", 12)]
    assert [r.request_id for r in sched.waiting] == ["B", "C"]
    assert plan(step(sched)) == [("A", 1), ("B", 6), ("C", 2)]

    mgr, sched = make_sched(12, max_num_batched_tokens=16)
    for rid, toks in (("A", range(1, 13)), ("B", range(21, 27)), ("C", [31, 32])):
        sched.add_request(make_req(rid, list(toks)))
    assert plan(step(sched)) == [("A", 12), ("B", 4)]


def test_max_num_seqs_caps_the_running_set(make_req):
    """max_num_seqs 2: of A, B, C only A and B run; C is admitted once A finishes."""
    mgr, sched = make_sched(8, max_num_seqs=2)
    for rid, toks in (("A", [1, 2]), ("B", [3, 4]), ("C", [5, 6])):
        sched.add_request(make_req(rid, toks))
    assert plan(step(sched)) == [("A", 2), ("B", 2)]
    assert plan(step(sched)) == [("A", 1), ("B", 1)]
    sched.finish_request("A")
    assert plan(step(sched)) == [("B", 1), ("C", 2)]


def test_long_prefill_threshold_applies_only_with_company(make_req):
    """Threshold 3: alone, A's 10 tokens go in one step (nobody to starve); with B waiting too,
    each prefill is cut to 3 tokens."""
    _, sched = make_sched(8, long_prefill_token_threshold=3)
    sched.add_request(make_req("A", list(range(1, 11))))
    assert plan(step(sched)) == [("A", 10)]
    _, sched = make_sched(8, long_prefill_token_threshold=3)
    sched.add_request(make_req("A", list(range(1, 11))))
    sched.add_request(make_req("B", list(range(21, 31))))
    assert plan(step(sched)) == [("A", 3), ("B", 3)]
    assert plan(step(sched)) == [("A", 3), ("B", 3)]


def test_max_tokens_and_max_model_len_cap_the_length(make_req):
    """max_tokens 2: the second sampled token finishes A (FINISHED_LENGTH_CAPPED) and its table is
    freed in that same update. max_model_len 8: B (6 tokens) stops when it reaches 8 tokens."""
    mgr, sched = make_sched(8)
    a = make_req("A", [1, 2, 3], max_tokens=2)
    sched.add_request(a)
    step(sched)
    assert a.status is RequestStatus.RUNNING and a.num_output_tokens == 1
    step(sched)
    assert a.status is RequestStatus.FINISHED and a.finish_reason == "length"
    assert sched.running == [] and tables(mgr) == {}
    assert not sched.schedule().scheduled

    mgr, sched = make_sched(8, max_model_len=8)
    b = make_req("B", list(range(1, 7)))
    sched.add_request(b)
    step(sched)
    assert b.num_tokens == 7 and b.status is RequestStatus.RUNNING
    step(sched)
    assert b.num_tokens == 8 and b.status is RequestStatus.FINISHED and b.finish_reason == "length"


def test_a_prompt_that_leaves_no_room_for_output_is_rejected(make_req):
    """vLLM's input processor: prompt length >= max_model_len leaves no room for a token."""
    from blockviz.core import SchedulerError
    _, sched = make_sched(8, max_model_len=8)
    with pytest.raises(SchedulerError, match="max_model_len"):
        sched.add_request(make_req("A", list(range(1, 9))))


def test_a_resumed_lookup_is_counted_apart(make_req):
    """Three usable blocks. A (4 tokens) and B (4 tokens) run in blocks 1 and 2. Both decode into a
    second block: A takes block 3; B then finds none, so B (last) is preempted, freeing its block 2
    (hashed, to the tail). B's return (5 tokens, 2 blocks) waits until A finishes; its lookup of
    its own first block is a hit of 4 tokens that vLLM files under preempted_*, not in its hit
    rate: requests 2, queries 8, hits 0; preempted 1, 5, 4."""
    mgr, sched = make_sched(3)
    a, b = make_req("A", [1, 2, 3, 4]), make_req("B", [11, 12, 13, 14])
    sched.add_request(a)
    sched.add_request(b)
    assert plan(step(sched)) == [("A", 4), ("B", 4)]
    out = step(sched)
    assert out.preempted == ["B"] and plan(out) == [("A", 1)]
    assert tables(mgr) == {"A": [1, 3]} and free_ids(mgr.block_pool) == [2]
    sched.finish_request("A")
    out = step(sched)
    (item,) = out.scheduled
    assert item.resumed and item.hit_block_ids == (2,) and item.local_hit_tokens == 4
    s = mgr.prefix_cache_stats
    assert (s.requests, s.queries, s.hits) == (2, 8, 0)
    assert (s.preempted_requests, s.preempted_queries, s.preempted_hits) == (1, 5, 4)


def test_a_failed_allocation_preempts_the_last_running_request_and_retries(make_req):
    """Three usable blocks. A (4 tokens) takes block 1, B (8 tokens) blocks 2 and 3; both cache
    their full blocks at schedule time and sample a token. Next step A's decode token needs a
    second block and none is free: vLLM preempts the *last* running request, B, whose table goes
    back reversed (3, then 2, both hashed: to the tail), and retries A, which takes the head,
    block 3, evicting B's second hash. Nothing is admitted in a step that preempted. B's return
    (9 tokens = 3 blocks) finds only its first block still cached (2, free) and needs 3 blocks
    with 1 free: it waits."""
    mgr, sched = make_sched(3)
    a, b = make_req("A", [1, 2, 3, 4]), make_req("B", list(range(11, 19)))
    ha1, = doc_chain([1, 2, 3, 4])
    hb1, hb2 = doc_chain(list(range(11, 19)))
    sched.add_request(a)
    sched.add_request(b)
    assert plan(step(sched)) == [("A", 4), ("B", 8)]
    assert tables(mgr) == {"A": [1], "B": [2, 3]} and free_ids(mgr.block_pool) == []
    assert dict(hash_map(mgr.block_pool)) == {ha1: [1], hb1: [2], hb2: [3]}
    out = step(sched)
    assert out.preempted == ["B"] and plan(out) == [("A", 1)]
    assert tables(mgr) == {"A": [1, 3]} and free_ids(mgr.block_pool) == [2]
    assert dict(hash_map(mgr.block_pool)) == {ha1: [1], hb1: [2]}
    assert b.status is RequestStatus.PREEMPTED and b.num_computed_tokens == 0
    assert b.num_preemptions == 1 and sched.num_preemptions == 1
    assert [r.request_id for r in sched.waiting] == ["B"] and [r.request_id for r in sched.running] == ["A"]
    failed = [op for op in mgr.sink if isinstance(op, AllocFailed)]
    assert failed == [AllocFailed("A", 1, 0)]
    out = step(sched)
    assert plan(out) == [("A", 1)] and not out.preempted
    assert failed + [AllocFailed("B", 3, 1, full_sequence=True)] == [
        op for op in mgr.sink if isinstance(op, AllocFailed)]
    check_invariants(mgr.block_pool, mgr)


def test_reset_marks_the_stats(make_req):
    mgr, sched = make_sched(4)
    assert mgr.reset_prefix_cache() and mgr.prefix_cache_stats.reset


def test_async_scheduling_counts_a_placeholder_until_the_output_arrives(make_req):
    """AsyncScheduler: A (5 tokens) is scheduled, and before its sampled token is applied the next
    step already schedules its decode (num_tokens + placeholders - computed = 5 + 1 - 5 = 1).
    Applying step 1's output resolves one placeholder; A's second block (tokens 5..8) is not
    cached until a token that fills it is computed."""
    mgr, sched = make_sched(6, async_scheduling=True)
    a = make_req("A", [1, 2, 3, 4, 5])
    sched.add_request(a)
    out1 = sched.schedule()
    assert plan(out1) == [("A", 5)] and a.num_output_placeholders == 1
    out2 = sched.schedule()                              # step 2, before step 1's output
    assert plan(out2) == [("A", 1)] and a.num_output_placeholders == 2
    assert a.num_tokens == 5 and a.num_computed_tokens == 6
    sched.update_from_output(out1, {"A": 50})
    assert a.all_token_ids == [1, 2, 3, 4, 5, 50] and a.num_output_placeholders == 1
    sched.update_from_output(out2, {"A": 51})
    assert a.num_output_placeholders == 0 and a.num_tokens == 7
    assert len(hash_map(mgr.block_pool)) == 1          # block 2 (5, 50, 51, ...) not full yet


def test_async_scheduling_skips_a_step_that_max_tokens_makes_useless(make_req):
    """max_tokens 1, async: after step 1 the one output is in flight (placeholder); scheduling A
    again would only compute a token past max_tokens, so vLLM skips it."""
    _, sched = make_sched(6, async_scheduling=True)
    a = make_req("A", [1, 2, 3], max_tokens=1)
    sched.add_request(a)
    out1 = sched.schedule()
    assert sched.schedule().scheduled == []
    sched.update_from_output(out1, {"A": 50})
    assert a.status is RequestStatus.FINISHED


@pytest.mark.parametrize("config, field", [
    (dict(enable_chunked_prefill=False, max_num_batched_tokens=8, max_num_seqs=8,
          max_model_len=16), "max_num_batched_tokens"),
    (dict(max_num_batched_tokens=4, max_num_seqs=8), "max_num_seqs"),
    (dict(long_prefill_token_threshold=20, max_model_len=16), "long_prefill_token_threshold"),
])
def test_configs_vllm_rejects(config, field):
    problems = SchedulerConfig(**config).problems()
    assert [f for f, _ in problems] == [field]
