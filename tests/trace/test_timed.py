"""Timed-mode capacity replay (arrivals at their timestamps through the scheduler, a step-cost
model for simulated time) on hand-made traces whose answers are worked out below, step by step;
the fast path against real Requests hashing real tokens; the mode in sweeps.

Every hand case uses block size 16 and the step cost ``1 s + 0.01 s per prompt token computed +
0.1 s per decoding request`` (round numbers to add by hand). A trace request ``(ms, n, out, ids)``
arrives at ``ms`` with ``n`` prompt tokens, decodes ``out`` tokens; its prompt tokens are
derived from ``ids`` (equal ids: equal tokens, so equal block hashes)."""
from __future__ import annotations

import random

import pytest
from trace_helpers import write

from blockviz.scenario.trace import TraceRequest
from blockviz.sim import sweep as S
from blockviz.sim.capacity import (
    MODES,
    POINT_FIELDS,
    TIMED_FIELDS,
    StepCost,
    ceiling,
    needed_blocks,
    percentile,
    replay_sequence,
    replay_timed,
)

COST = {"step_base_s": 1.0, "step_prefill_token_s": 0.01, "step_decode_seq_s": 0.1}


def trace(*reqs: tuple[float, int, int, list[int]]) -> list[TraceRequest]:
    return [TraceRequest(ms, n, out, ids, i + 1) for i, (ms, n, out, ids) in enumerate(reqs)]


def timed(t, pool=100, **kw) -> dict:
    return replay_timed(t, block_size=16, pool_blocks=pool, **(COST | kw))


def test_idle_gap_and_a_hit_by_hand():
    # r0 at 0 s: 32 tokens (2 full blocks a0 a1), 3 outputs.  r1 at 10 s: 40 tokens, same id:
    # its first 32 tokens are r0's, so a0 a1 hit (limit (40-1)//16 = 2 blocks).
    # step 1 @0.00: admit r0, prefill 32: 1 + 0.32 = 1.32 -> 1.32; first token: TTFT 1.32
    # step 2 @1.32: decode r0: 1.1 -> 2.42.  step 3 @2.42: decode -> 3.52, 3rd output: finished.
    # idle until 10 s.  step 4 @10: admit r1, hit 32, prefill 8: 1.08 -> 11.08; TTFT 1.08
    # step 5 @11.08: decode -> 12.18, 2nd output: finished.
    got = timed(trace((0, 32, 3, [1]), (10_000, 40, 2, [1])))
    assert {k: got[k] for k in POINT_FIELDS} == {"pool_blocks": 100, "queries": 72, "hits": 32,
                                                 "requests": 2, "rejected": 0, "evictions": 0}
    assert got["steps"] == 5 and got["preemptions"] == 0
    assert got["simulated_s"] == pytest.approx(12.18)
    assert got["queue_delay_mean_s"] == got["queue_delay_p90_s"] == 0
    assert got["ttft_mean_s"] == pytest.approx(1.2)
    assert got["ttft_p50_s"] == pytest.approx(1.08)       # nearest rank: 1st of 2
    assert got["ttft_p90_s"] == pytest.approx(1.32)       # 2nd of 2


def test_max_num_seqs_makes_a_request_wait_by_hand():
    # max_num_seqs 1; both arrive at 0 (different ids: no hits).
    # step 1 @0: admit r0 (r1 not: one seat), prefill 16: 1.16 -> 1.16; r0 TTFT 1.16
    # step 2 @1.16: decode r0 (seat still taken): 1.1 -> 2.26; r0's 2nd output: finished
    # step 3 @2.26: admit r1 (queue delay 2.26), prefill 16: 1.16 -> 3.42; TTFT 3.42, finished
    got = timed(trace((0, 16, 2, [1]), (0, 16, 1, [2])), max_num_seqs=1)
    assert got["steps"] == 3 and got["queries"] == 32 and got["hits"] == 0
    assert got["queue_delay_mean_s"] == pytest.approx(1.13)
    assert got["queue_delay_p50_s"] == 0 and got["queue_delay_p90_s"] == pytest.approx(2.26)
    assert got["ttft_mean_s"] == pytest.approx((1.16 + 3.42) / 2)
    assert got["ttft_p90_s"] == pytest.approx(3.42)
    assert got["simulated_s"] == pytest.approx(3.42)


def test_a_preemption_and_its_resume_by_hand():
    # Pool of 3 blocks. r0: 16 tokens, 5 outputs (at most 20 slots: 2 blocks); r1: 16 tokens, 10
    # outputs (25 slots: 2 blocks); both at 0, different ids.
    # step 1 @0: admit r0 (block 1), r1 (block 2); 1 free. prefill 32: 1.32 -> 1.32, both TTFT 1.32
    # step 2: r0 decodes slot 17: takes block 3. r1 needs a block, none free: the last running
    #   request is preempted -- r1 itself (preemptions 1); it frees block 2 (cached, its prompt
    #   block); nothing is admitted in a step that preempted. r0 alone: 1.1 -> 2.42
    # step 3: r0 decodes. r1 (17 tokens: its output is kept) looks up: its own prompt block hits
    #   (16 tokens) but the whole sequence needs 2 blocks (the free hit + 1 new) > 1 free: waits.
    #   -> 3.52.  step 4 -> 4.62.  step 5 -> 5.72: r0's 5th output, finished, blocks freed.
    # step 6 @5.72: r1 resumes: hit 16 (a resumed re-lookup: preempted_queries 17, hits 16, not
    #   in the hit rate), computes 1 token: 1.01 -> 6.73, samples its 2nd output.
    # steps 7..14: 8 more decodes, 1.1 each -> 6.73 + 8.8 = 15.53.
    got = timed(trace((0, 16, 5, [1]), (0, 16, 10, [2])), pool=3)
    assert got["preemptions"] == 1
    assert (got["queries"], got["hits"]) == (32, 0)
    assert (got["preempted_queries"], got["preempted_hits"]) == (17, 16)
    assert got["steps"] == 14 and got["evictions"] == 0
    assert got["simulated_s"] == pytest.approx(15.53)
    assert got["ttft_p50_s"] == got["ttft_p90_s"] == pytest.approx(1.32)   # TTFT: the first token


def test_chunked_prefill_by_hand():
    # A budget of 8 tokens (max_num_seqs 8 <= budget): 20 prompt tokens in chunks 8, 8, 4;
    # only the last samples. 1.08 + 1.08 + 1.04 = 3.2 = TTFT, 3 steps, 1 output.
    got = timed(trace((0, 20, 1, [1])), max_num_batched_tokens=8, max_num_seqs=8)
    assert got["steps"] == 3 and got["ttft_mean_s"] == pytest.approx(3.2)


def test_requests_larger_than_the_pool_or_max_model_len_are_rejected():
    # Pool of 2 blocks of 16. r0: 40 prompt tokens need 3 blocks: rejected. r1: 16 + 20 outputs
    # holds 35 slots at most = 3 blocks: rejected. r2: 16 + 17 = 32 slots = 2 blocks: admitted,
    # prefill then 16 decodes = 17 steps.
    got = timed(trace((0, 40, 1, [1]), (0, 16, 20, [2]), (0, 16, 17, [3])), pool=2)
    assert (got["requests"], got["rejected"], got["steps"], got["queries"]) == (1, 2, 17, 16)
    assert needed_blocks(16, 20, 16, 1 << 20) == 3 and needed_blocks(16, 17, 16, 1 << 20) == 2
    # max_model_len 32: a 32-token prompt is refused (vLLM: prompt + one output must fit); a
    # 20-token prompt asking 100 outputs stops at 32 tokens = 12 outputs (FINISHED_LENGTH_CAPPED):
    # 12 steps, 1.2 + 11 * 1.1 = 13.3 s. It holds 31 slots = 2 blocks: fits a pool of 2.
    got = timed(trace((0, 32, 1, [1]), (0, 20, 100, [2])), pool=2, max_model_len=32)
    assert (got["requests"], got["rejected"], got["steps"]) == (1, 1, 12)
    assert got["simulated_s"] == pytest.approx(13.3)


def test_out_of_order_timestamps_arrive_with_the_line_before():
    # r1's timestamp (1 s) is before r0's (5 s): the file is the arrival order, so it arrives at
    # 5 s with r0; both admitted at 5 s: queue delay 0, not -4.
    got = timed(trace((5_000, 16, 1, [1]), (1_000, 16, 1, [2])))
    assert got["queue_delay_mean_s"] == 0 and got["steps"] == 1
    assert got["simulated_s"] == pytest.approx(1.32)


def test_percentile_is_nearest_rank():
    xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    assert (percentile(xs, 50), percentile(xs, 90), percentile(xs, 91)) == (5.0, 9.0, 10.0)
    assert percentile([], 50) == 0.0 and percentile([3.0], 90) == 3.0


def _random_trace(rng: random.Random, n: int) -> list[TraceRequest]:
    out, ms = [], 0.0
    for i in range(n):
        blocks = rng.randint(1, 3)
        ids = [rng.choice([0, 1]) if j == 0 else rng.choice([j, j + 1, 100 + i]) for j in range(blocks)]
        length = (blocks - 1) * 512 + rng.randint(1, 512)
        ms += rng.expovariate(1 / 40)
        out.append(TraceRequest(round(ms), length, rng.randint(0, 40), ids, i + 1))
    return out


@pytest.mark.parametrize("order", ["split", "append"])
def test_the_fast_path_equals_real_requests_hashing_real_tokens(order):
    rng = random.Random(11 + len(order))
    t = _random_trace(rng, 60)
    kw = {"max_num_batched_tokens": 256, "max_num_seqs": 8}
    saw_preemption = False
    for pool in (100, 160, 600):
        fast = replay_timed(t, block_size=16, pool_blocks=pool, free_order=order, **kw)
        exact = replay_timed(t, block_size=16, pool_blocks=pool, free_order=order, exact_tokens=True, **kw)
        assert fast == exact
        saw_preemption |= fast["preemptions"] > 0
    assert saw_preemption and fast["hits"] > 0


def test_far_apart_arrivals_with_room_give_sequence_modes_hits():
    # Each request finishes before the next arrives and nothing is evicted: the same lookups as
    # sequence mode (outputs are cached too, but they are fresh and never hit).
    t = [r._replace(timestamp=i * 1_000_000) for i, r in enumerate(_random_trace(random.Random(3), 40))]
    got = replay_timed(t, block_size=16, pool_blocks=5000)
    seq = replay_sequence(t, block_size=16, pool_blocks=5000)
    assert {k: got[k] for k in POINT_FIELDS} == seq
    assert (got["hits"], got["queries"]) == tuple(ceiling(t, block_size=16)[k] for k in ("hits", "queries"))
    assert got["queue_delay_p90_s"] == 0 and got["preemptions"] == 0


def test_registry_options_and_progress():
    assert MODES["timed"].run is replay_timed
    t = _random_trace(random.Random(5), 300)
    seen: list[int] = []
    got = replay_timed(t, block_size=64, pool_blocks=400, progress=seen.append)
    assert sum(seen) == 300 and list(got)[:len(POINT_FIELDS)] == list(POINT_FIELDS)
    assert list(got)[len(POINT_FIELDS):] == list(TIMED_FIELDS)
    with pytest.raises(ValueError, match="max_num_seqs"):
        replay_timed(t, block_size=64, pool_blocks=40, max_num_batched_tokens=8, max_num_seqs=16)
    with pytest.raises(ValueError, match="seconds"):
        StepCost(base_s=-1)
    with pytest.raises(ValueError, match="some time"):
        StepCost(0, 0, 0)


def test_a_timed_sweep_passes_its_options(tmp_path):
    path = write(tmp_path / "t.jsonl", [{"timestamp": r.timestamp, "input_length": r.input_length,
                                         "output_length": r.output_length, "hash_ids": r.hash_ids}
                                        for r in _random_trace(random.Random(9), 30)])
    result = S.sweep([str(path)], block_size=16, pool_blocks=[60, 600], free_orders=["split", "append"],
                     mode="timed", options={"max_num_seqs": 4, "step_base_s": 0.5},
                     executor=S.LocalExecutor(1))
    t = _random_trace(random.Random(9), 30)
    for report, order in zip(result.reports, ("split", "append")):
        assert report["mode"] == "timed" and report["options"]["max_num_seqs"] == 4
        assert report["points"] == [replay_timed(t, block_size=16, pool_blocks=p, free_order=order,
                                                 max_num_seqs=4, step_base_s=0.5) for p in (60, 600)]
