"""What the capacity page draws from the one pass (blockviz.sim.curve.curve_report): the compact
curve (breakpoints) gives the replay's hits at every pool size from the largest request on; the
knee found on it is the knee of every size's replay; the table's points are the replay's and
MIN's; MIN is bounded (fewer sizes, or none, with the reason) and its progress counted."""
from __future__ import annotations

import random

import pytest
from trace_helpers import random_trace, write_trace

from blockviz.scenario.trace import TraceRequest
from blockviz.sim import curve as C
from blockviz.sim.capacity import KNEE_FRACTION, Point, ceiling, hit_rate, knee_of, replay_sequence
from blockviz.sim.curve import curve_report, curve_sequence, first_reaching, hit_blocks_at
from blockviz.sim.optimal import optimal_hits
from blockviz.teach.tracegen import TraceWorkload, generate_trace

ORDERS = ("split", "append")


def _trace(seed: int) -> tuple[list[TraceRequest], int]:
    rng = random.Random(seed)
    bs = rng.choice([512, 256, 128, 64])
    return random_trace(rng, rng.randint(8, 24), bs), bs


@pytest.mark.parametrize("seed", range(6))
def test_the_breakpoints_give_the_replays_hits_at_every_size(seed):
    t, bs = _trace(seed)
    for order in ORDERS:
        curve = curve_sequence(t, block_size=bs, free_order=order)
        lo = max(1, curve.largest)
        xs, vals, slopes = curve.breakpoints(lo)
        assert xs[0] == lo and xs == sorted(xs)
        for n in range(lo, curve.working_set + 3):
            replay = replay_sequence(t, block_size=bs, pool_blocks=n, free_order=order)
            assert hit_blocks_at(xs, vals, slopes, n) * bs == replay["hits"], (order, n)
        # from one block on too (sizes that reject requests: the breakpoints carry them)
        assert curve.breakpoints(1)[0][0] == 1
        assert [hit_blocks_at(*curve.breakpoints(1), n) for n in range(1, lo + 2)] == \
            [curve.hit_blocks(n) for n in range(1, lo + 2)]


def test_first_reaching_by_hand():
    # hits: 0 at 1..3; a ramp 2, 3, 4 at 4..6; a drop to 1 at 7 (a rejection); 5 from 8 on
    xs, vals, slopes = [1, 4, 7, 8], [0, 2, 1, 5], [0, 1, 0, 0]
    assert [hit_blocks_at(xs, vals, slopes, n) for n in range(1, 10)] == [0, 0, 0, 2, 3, 4, 1, 5, 5]
    assert first_reaching(xs, vals, slopes, 0) == 1
    assert first_reaching(xs, vals, slopes, 3) == 5          # inside the ramp
    assert first_reaching(xs, vals, slopes, 4) == 6
    assert first_reaching(xs, vals, slopes, 5) == 8
    assert first_reaching(xs, vals, slopes, 6) is None


@pytest.mark.parametrize("seed", range(6))
def test_the_knee_on_the_whole_curve_is_the_knee_of_every_sizes_replay(seed):
    t, bs = _trace(seed)
    ceil = ceiling(t, block_size=bs)
    target = C.knee_hit_blocks(ceil, bs, KNEE_FRACTION)
    for order in ORDERS:
        curve = curve_sequence(t, block_size=bs, free_order=order)
        lo = max(1, curve.largest)
        every = [Point.of(replay_sequence(t, block_size=bs, pool_blocks=n, free_order=order), order)
                 for n in range(lo, curve.working_set + 1)]
        want = knee_of(every, hit_rate(ceil))
        got = None if target is None else curve.first_reaching(target, lo)
        assert got == want, (order, got, want)


def _write(tmp_path, t: list[TraceRequest]) -> str:
    path = tmp_path / "t.jsonl"
    with open(path, "w") as f:
        write_trace(t, f)
    return str(path)


def test_the_report_is_the_replays_and_mins_at_its_sizes(tmp_path):
    t = [TraceRequest(*x, i + 1) for i, x in enumerate(generate_trace(
        TraceWorkload(kind="multi_turn", requests=120, seed=4)))]
    path = _write(tmp_path, t)
    seen = []
    r = curve_report(path, block_size=128, requests=len(t), sizes=5, progress=lambda **p: seen.append(p))
    curve = curve_sequence(t, block_size=128)
    assert (r["largest"], r["working_set"]) == (curve.largest, curve.working_set)
    assert r["queries"] == sum(x.input_length for x in t)
    knees = [rep["curve"]["knee"] for rep in r["reports"]]
    assert all(k is not None and k in r["sizes"] for k in knees)
    assert r["sizes"][0] == curve.largest and r["sizes"][-1] == curve.working_set
    best = optimal_hits(t, block_size=128, pool_blocks=r["sizes"])
    for rep, order in zip(r["reports"], ORDERS):
        assert rep["free_order"] == order and rep["ceiling"] == ceiling(t, block_size=128)
        for p in rep["points"]:
            n = p.pop("pool_blocks")
            assert p.pop("optimal_hits") == best[n]
            assert sum(p.pop("split").values()) == p["queries"]   # where its prompt tokens went
            assert {"pool_blocks": n, **p} == replay_sequence(t, block_size=128, pool_blocks=n,
                                                              free_order=order)
    assert r["optimal_skipped"] is None
    # progress: both passes, then MIN at every size, ending at the total
    assert seen[-1]["done"] == seen[-1]["total"] == len(t) * (2 + len(r["sizes"]))
    assert [p["phase"] for p in seen].index("optimal") > 0
    assert {p["size"] for p in seen if p["phase"] == "optimal"} == set(range(1, len(r["sizes"]) + 1))


def test_min_is_bounded(tmp_path, monkeypatch):
    t = [TraceRequest(*x, i + 1) for i, x in enumerate(generate_trace(
        TraceWorkload(kind="shared_prefix", requests=60, seed=1)))]
    path = _write(tmp_path, t)
    blocks = sum(x.input_length // 64 for x in t)
    # room for four MIN passes: fewer sizes (and the knees), every one with MIN
    monkeypatch.setattr(C, "OPTIMAL_WORK", 4 * blocks + 1)
    r = curve_report(path, block_size=64, requests=len(t), sizes=8)
    knees = {rep["curve"]["knee"] for rep in r["reports"]} - {None}
    assert r["optimal_skipped"] is None and len(r["sizes"]) <= 4
    assert all("optimal_hits" in p for p in r["reports"][0]["points"])
    # no room for two: no MIN, the sizes asked for, and why
    monkeypatch.setattr(C, "OPTIMAL_WORK", blocks)
    r = curve_report(path, block_size=64, requests=len(t), sizes=8)
    assert r["optimal_skipped"] == {"blocks": blocks, "most": blocks // 2}
    assert len(r["sizes"]) >= 8 and knees <= set(r["sizes"])
    assert not any("optimal_hits" in p for p in r["reports"][0]["points"])
    monkeypatch.setattr(C, "OPTIMAL_WORK", 10**12)
    monkeypatch.setattr(C, "OPTIMAL_MAX_BLOCKS", blocks - 1)
    assert curve_report(path, block_size=64, requests=len(t))["optimal_skipped"]["blocks"] == blocks
