"""What the capacity page computes from a trace, apart from the page: pool sizes from the trace's
extent, the knee of a curve, the curve's figure and words, and a window of requests scaled down
into a scenario the player runs (hand-worked below, then against the replay it scales)."""
from __future__ import annotations

import random

import pytest

from blockviz.render.capacity import hit_rate_figure, latency_figure, reading, reading_lines
from blockviz.scenario import Scenario
from blockviz.scenario.trace import TraceRequest
from blockviz.sim.capacity import (
    KNEE_FRACTION,
    geometric_sizes,
    hit_rate,
    knee_of,
    points_of,
    replay_sequence,
    replay_timed,
    trace_extent,
)
from blockviz.sim.runner import run
from blockviz.teach.tracegen import (
    PLAYER_MAX_BLOCKS,
    TraceWorkload,
    generate_trace,
    window_scenario,
)
from blockviz.teach.workload import loaded


def pt(pool: int, hits: int, queries: int = 100) -> dict:
    return {"pool_blocks": pool, "queries": queries, "hits": hits, "requests": 1, "rejected": 0,
            "evictions": 0}


def knee(points: list[dict], ceil: dict, **kw) -> int | None:
    """knee_of a sweep report's point dicts and its ceiling's."""
    return knee_of(points_of([{"free_order": "split", "points": points}]), hit_rate(ceil), **kw)


def test_the_knee_is_the_smallest_size_reaching_90_percent_of_the_ceiling():
    assert KNEE_FRACTION == 0.9
    ceil = {"queries": 100, "hits": 80}                         # 80%: the knee needs 72%
    points = [pt(10, 10), pt(20, 50), pt(40, 72), pt(80, 79)]
    assert knee(points, ceil) == 40                             # 72% is exactly 90% of 80%
    assert knee([pt(10, 10), pt(40, 71)], ceil) is None         # no size run gets there
    assert knee(points[::-1], ceil) == 40                       # the order given does not matter
    assert knee(points, {"queries": 100, "hits": 0}) is None    # nothing repeats: no knee
    assert knee(points, ceil, fraction=0.5) == 20


def test_extent_and_sizes_by_hand():
    # Block size 16. r0: 40 tokens + 1 output = 40 slots = 3 blocks; full prompt blocks 2 (id 7).
    # r1: 33 + 10 outputs = 42 slots = 3 blocks; the same 2 full blocks. r2: id 8, 2 more.
    t = [TraceRequest(0, 40, 1, [7], 1), TraceRequest(0, 33, 10, [7], 2), TraceRequest(0, 40, 1, [8], 3)]
    assert trace_extent(t, block_size=16) == {"largest": 3, "working_set": 4 + 3}
    # 3 .. 7 in 3 steps of x(7/3)^(1/2) = 1.53: 3, 4.58 -> 5, 7
    assert geometric_sizes(3, 7, 3) == [3, 5, 7]
    # hi below 2 lo is raised to 2 lo: 10 .. 20 by 2^(1/3) = 1.26: 10, 12.6, 15.9, 20
    assert geometric_sizes(10, 10, 4) == [10, 13, 16, 20]
    assert geometric_sizes(1, 3, 8) == [1, 2, 3]                # whole and distinct
    # at the working set nothing of the prompts is evicted: the ceiling's hits
    assert replay_sequence(t, block_size=16, pool_blocks=7)["evictions"] == 0


def _report(order: str, points: list[dict], ceil: dict, bs: int = 16) -> dict:
    return {"requests": 4, "block_size": bs, "free_order": order, "ceiling": ceil, "points": points}


def _lines(reports: list[dict], lang: str, bytes_per_token: int | None = None) -> list[str]:
    r = reading(points_of(reports), hit_rate(reports[0]["ceiling"]))
    return reading_lines(r, lang, block_size=reports[0]["block_size"], bytes_per_token=bytes_per_token)


@pytest.mark.parametrize("lang, words", [("en", "the knee is at 40 blocks = 640 tokens (0.0781 GiB)"),
                                         ("zh", "拐点在 40 块 = 640 token (0.0781 GiB)")])
def test_the_figure_and_the_words(lang, words):
    ceil = {"queries": 100, "hits": 80}
    reports = [_report("split", [pt(10, 10), pt(40, 72), pt(80, 79)], ceil),
               _report("append", [pt(10, 5), pt(40, 60), pt(80, 75)], ceil)]
    fig = hit_rate_figure(points_of(reports), lang, ceiling=0.8, block_size=16, bytes_per_token=128 * 1024)
    lines = [tr for tr in fig.data if tr.mode == "lines+markers"]
    assert [list(tr.x) for tr in lines] == [[160, 640, 1280]] * 2        # tokens
    assert fig.layout.xaxis.type == "log"
    assert fig.layout.xaxis.ticktext[1] == "640<br>0.0781 GiB"            # 640 * 128 KiB
    stars = [tr for tr in fig.data if tr.marker.symbol == "star"]
    assert [(list(s.x), list(s.y)) for s in stars] == [([640], [0.72]), ([1280], [0.75])]
    text = " ".join(_lines(reports, lang, 128 * 1024))
    assert words in text
    assert ("80.0%" in text) and ("8.0%" in text)                       # ceiling; 80 - 72 points
    none = " ".join(_lines([_report("split", [pt(10, 10)], ceil)], lang))
    assert ("no capacity run reaches 90%" in none) or ("都没有达到上限的 90%" in none)


def test_the_latency_figure_has_p50_and_p90_per_order():
    t = [TraceRequest(i * 100, 600, 20, [1, 2 + i % 3], i + 1) for i in range(12)]
    reports = [_report(o, [replay_timed(t, block_size=64, pool_blocks=p, free_order=o) for p in (30, 300)],
                       {"queries": 1, "hits": 1}, 64) for o in ("split", "append")]
    fig = latency_figure(points_of(reports), "en", block_size=64)
    assert len(fig.data) == 4 and all(min(tr.y) > 0 for tr in fig.data)
    assert [tr.name for tr in fig.data][:2] == ["TTFT p50 · split (vLLM ≥ 0.24)",
                                                "TTFT p90 · split (vLLM ≥ 0.24)"]


# A window: L1 [5, 6] 1024 tokens (2 full trace blocks), 300 outputs; L2 [5, 9] 700 tokens
# (1 full + 188); L3 [5, 6, 7] 1536. Each trace block is one player block of 4 tokens: id 5 ->
# tokens 0-3, 6 -> 4-7, 9 -> 8-9 (188/128 rounded up = 2, a partial block stays partial), 7 -> 12-15.
WINDOW = [TraceRequest(0, 1024, 300, [5, 6], 1), TraceRequest(100, 700, 1, [5, 9], 2),
          TraceRequest(100, 1536, 1, [5, 6, 7], 3)]


def _prompts(w) -> list[list[int]]:
    return [s["arrive"]["prompt"][0]["tokens"] for s in w.scenario["steps"] if "arrive" in s]


def test_a_window_in_sequence_mode_by_hand():
    # 1000 blocks of 16 = 16,000 tokens = 31 blocks of 512: the player's pool.
    w = window_scenario(WINDOW, pool_blocks=1000, block_size=16, free_order="append")
    assert (w.player_blocks, w.real_trace_blocks) == (31, 31)          # not capped
    assert _prompts(w) == [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 8, 9],
                           [0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15]]
    assert [s["arrive"]["max_tokens"] for s in w.scenario["steps"]] == [1, 1, 1]
    assert w.scenario["config"]["free_order"] == "append" and w.lines == (1, 2, 3)
    engine, _ = run(loaded(Scenario.model_validate(w.scenario)))
    # L2 hits block 0 (limit (6-1)//4 = 1 block), L3 blocks 0 and 1: 12 player tokens = 3 trace
    # blocks = the replay at block size 512 on the same pool: 512 + 1024 tokens.
    stats = engine.manager.prefix_cache_stats
    assert (stats.hits, stats.queries) == (12, 26)
    assert replay_sequence(WINDOW, block_size=512, pool_blocks=31)["hits"] == 12 * 128


def test_a_window_in_timed_mode_by_hand():
    w = window_scenario(WINDOW, pool_blocks=1000, block_size=16, mode="timed")
    steps = w.scenario["steps"]
    # outputs / 128 rounded up: 3, 1, 1. L1 -> L2: 100 ms / (10 ms + 0.1 ms) = 9.9 one-request
    # decode steps, at most 8; L2 -> L3: none. Then run until done: 11 + 7 + 13 = 31 steps at most.
    assert [next(iter(s)) for s in steps] == ["arrive", "step", "arrive", "arrive", "step"]
    assert steps[1]["step"] == 8 and steps[-1]["step"] == 31
    assert [s["arrive"]["max_tokens"] for s in steps if "arrive" in s] == [3, 1, 1]
    assert w.scenario["config"]["scheduler"] == {"max_num_batched_tokens": 64, "max_num_seqs": 64,
                                                 "max_model_len": 8192}
    engine, _ = run(loaded(Scenario.model_validate(w.scenario)))
    assert all(r.is_finished() for r in engine.scheduler.requests.values())


def test_a_window_leaves_out_what_the_players_pool_cannot_hold():
    # 64 blocks of 16 = 1,024 tokens = 2 player blocks: L3 needs 3.
    w = window_scenario(WINDOW, pool_blocks=64, block_size=16)
    assert w.lines == (1, 2) and w.skipped == (3,)
    big = window_scenario(WINDOW, pool_blocks=100_000, block_size=512)
    assert big.real_trace_blocks > big.player_blocks == PLAYER_MAX_BLOCKS     # capped
    with pytest.raises(ValueError, match="1 to 12"):
        window_scenario(WINDOW * 5, pool_blocks=64, block_size=16)


@pytest.mark.parametrize("kind", ["multi_turn", "shared_prefix", "random"])
def test_a_sequence_window_hits_what_the_replay_at_512_hits(kind):
    reqs = [TraceRequest(*r, i + 1) for i, r in enumerate(generate_trace(
        TraceWorkload(kind=kind, requests=60, seed=5, prefix_tokens=1024, new_tokens=700)))]
    rng = random.Random(kind)
    for _ in range(3):
        first = rng.randrange(0, 50)
        window = reqs[first:first + 10]
        pool = rng.choice([8, 20, 60])
        w = window_scenario(window, pool_blocks=pool, block_size=512, free_order="split")
        kept = [r for r in window if r.line in w.lines]
        engine, _ = run(loaded(Scenario.model_validate(w.scenario)))
        want = replay_sequence(kept, block_size=512, pool_blocks=pool)
        assert engine.manager.prefix_cache_stats.hits * 128 == want["hits"]
        assert engine.manager.block_pool.num_evictions == want["evictions"]
