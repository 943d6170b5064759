"""The benchmark harness: traces replay exactly, the vLLM shim loads cleanly or says why not, and
``python -m bench --quick`` runs end to end. No timing is asserted anywhere."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import trace as T
from bench import vllm_shim
from blockviz.teach import workload as W

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small_trace() -> T.Trace:
    scenario = W.generate(kind="multi_turn", num_events=150, seed=2, num_blocks=16, block_size=4,
                          max_live=3, prefix_blocks=2, new_tokens=6)
    return T.record_trace(scenario)


def test_trace_has_every_kind_of_call(small_trace):
    counts = small_trace.counts()
    for kind in ("get_new_blocks", "touch", "cache_full_blocks", "free_blocks",
                 "get_cached_block", "take_events"):
        assert counts.get(kind, 0) > 0, kind
    assert small_trace.kv_events["BlockRemoved"] > 0  # the pool turned over


@pytest.mark.parametrize("recording", [False, True])
@pytest.mark.parametrize("events", [False, True])
def test_our_pool_replays_the_trace_exactly(small_trace, recording, events):
    T.replay_checked(T.OursPool(recording), small_trace, events)


def test_a_replay_that_goes_another_way_is_caught(small_trace):
    calls = list(small_trace.calls)
    i = next(i for i, c in enumerate(calls) if c[0] == "get_new_blocks")
    kind, n, ids = calls[i]
    calls[i] = (kind, n, tuple(reversed(ids)) if n > 1 else (ids[0] + 1,))
    tampered = T.Trace(small_trace.num_gpu_blocks, small_trace.block_size, calls,
                       small_trace.requests, small_trace.final, small_trace.kv_events)
    with pytest.raises(T.ReplayMismatch):
        T.replay_checked(T.OursPool(False), tampered, False)


def test_vllm_shim_explains_a_missing_source(tmp_path):
    with pytest.raises(vllm_shim.VllmUnavailable, match="block_pool.py"):
        vllm_shim.load(tmp_path)


def test_vllm_pool_replays_the_trace_exactly(small_trace):
    try:
        vllm = vllm_shim.load()
    except vllm_shim.VllmUnavailable as e:
        pytest.skip(str(e))
    assert not any(k == "vllm" or k.startswith("vllm.") for k in sys.modules)
    for events in (False, True):
        T.replay_checked(T.VllmPool(vllm), small_trace, events)


def _bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)


def test_unknown_and_later_benchmarks_are_named(monkeypatch, capsys):
    proc = _bench("nope")
    assert proc.returncode == 2 and "unknown benchmark" in proc.stderr
    from bench import __main__ as bench_main
    monkeypatch.setattr(bench_main, "LATER", {"gpu": "not written yet (issue 99)"})
    with pytest.raises(SystemExit) as e:
        bench_main.parse_args(["gpu"])
    assert e.value.code == 2 and "issue 99" in capsys.readouterr().err


@pytest.mark.slow
def test_quick_run_writes_a_report(tmp_path):
    out = tmp_path / "report.json"
    proc = _bench("--quick", "--repeat", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"report written to {out}" in proc.stdout
    report = json.loads(out.read_text())
    assert set(report["benchmarks"]) == {"core", "scale", "tensors", "tier", "board", "capacity",
                                         "json_stream", "sched", "load", "figures", "live", "curve",
                                         "replay"}
    core = report["benchmarks"]["core"]
    assert {c["num_blocks"] for c in core["cases"]} == {1024, 16384}
    scale = report["benchmarks"]["scale"]
    assert all(c["samples"][0]["steps_in_timeline"] == c["events"] + 1 for c in scale["cases"])
    stream = report["benchmarks"]["json_stream"]
    assert stream["side_by_side"]["eager"]["bytes"] == stream["side_by_side"]["stream"]["bytes"] > 0
    sched = report["benchmarks"]["sched"]
    assert [c["case"] for c in sched["cases"]] == ["admit 32", "decode 32", "admit 32 hybrid 1:1",
                                                   "decode 32 hybrid 1:1"]
    load = report["benchmarks"]["load"]
    assert load["steps"] >= load["sessions"] and load["ratio"] > 0 and load["cpu_per_step_during_s"] > 0
    replay = report["benchmarks"]["replay"]
    assert all(0 < r["shipped"] <= r["steps"] <= r["batches"] for r in replay["sizes"])
    for b in report["budgets"]:
        assert {"name", "value", "limit", "met", "unit"} <= set(b)


@pytest.mark.slow
@pytest.mark.browser
def test_quick_board_run_measures_the_board_in_a_browser(tmp_path):
    """``python -m bench board --quick``: first board (split at its data's arrival) and key → paint
    at 6 and 4,096 blocks, and the server's CPU while sessions step (no timing asserted: the
    budgets are the report's)."""
    out = tmp_path / "board.json"
    proc = _bench("board", "--quick", "--repeat", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    board = json.loads(out.read_text())["benchmarks"]["board"]
    if board.get("skipped"):
        pytest.skip(board["skipped"])
    assert [(c["scenario"], c["blocks"]) for c in board["cases"]] == [("six-blocks", 6),
                                                                      ("bench-4096", 4096)]
    for case in board["cases"]:
        assert case["key_ms"]["n"] == 10 and 0 < case["key_ms"]["median"] <= case["key_ms"]["worst"]
        assert case["first_paint_s"] > 0
        data_in, drawn = case["first_split_s"]        # the board's own marks: its data in, then drawn
        assert data_in > 0 and drawn > 0 and abs(data_in + drawn - case["first_paint_s"]) < 1e-6
        assert case["server_cpu_per_tab_s"] >= 0
    load = board["load"]
    assert load["sessions"] == 4 and load["browser_tabs"] + load["simulated"] == 4
    assert load["pages_stepping"] == load["browser_tabs"] == 3       # every real tab stepped
    assert load["browser_frames_while_stepping"] == 0                # and told the server nothing
    assert load["self_check"]["sessions"] == 1 and load["self_check"]["reruns_per_s"] > 0
    assert not load["self_check"]["failed"]
    assert board["load"]["server_cores"] >= 0
    six, big = board["cases"]
    assert six["lang_ms"]["n"] == 4 and 0 < six["lang_ms"]["median"]      # the board's 中文/English
    assert big["lang_ms"] is None                      # a big pool ships one language: no toggle
    names = [b["name"] for b in board["budgets"]]
    assert len(names) == 7 and any("4,096 blocks" in n for n in names)
    assert any("toggle" in n for n in names)


def test_sched_sides_take_the_same_steps():
    """``bench sched``: blockviz's Scheduler (recording off and on) and vLLM's real one, checked
    step by step on a small workload; a side that goes another way is caught."""
    from bench import sched as S
    from bench import vllm_sched
    toks = S.prompts(40)          # two groups, every prompt length 32..47
    impls = [S.Ours(False), S.Ours(True)]

    class Reversed(S.Ours):       # the same requests, arriving in the opposite order
        def setup(self, toks):
            super().setup(toks[::-1])
            self.ids = [f"r{i}" for i in range(len(toks))]

    with pytest.raises(S.Mismatch, match="step 1: .* differs from"):
        S.check_same([S.Ours(False), Reversed(False)], toks)
    hybrid = [S.Ours(False, "hybrid 1:1"), S.Ours(True, "hybrid 1:1")]
    try:
        with vllm_sched.loaded() as v:
            S.check_same(impls + [S.Vllm(v, True), S.Vllm(v, False)], toks)
            S.check_same(hybrid + [S.Vllm(v, True, "hybrid 1:1"), S.Vllm(v, False, "hybrid 1:1")],
                         toks)
    except vllm_sched.VllmUnavailable as e:
        S.check_same(impls, toks)
        S.check_same(hybrid, toks)
        pytest.skip(f"vLLM side: {e}")
    assert not any(k == "vllm" or k.startswith("vllm.") for k in sys.modules)


def test_vllm_sched_loader_explains_a_missing_source(tmp_path):
    from bench import vllm_sched
    with pytest.raises(vllm_sched.VllmUnavailable, match="scheduler.py"):
        with vllm_sched.loaded(tmp_path):
            pass


def test_tier_benchmark_moves_the_bytes_and_reports_three_chunk_layouts():
    """``bench tier --quick``: store and load checked bit for bit before timing (the run asserts
    it), both shapes, chunk ids fresh (one run), as the tier's manager hands them out after
    evictions (a few runs: the one-pass path) and random (past MAX_RUNS: the gather-and-scatter
    path); the budget reads the first two, the random case is reported beside it."""
    from bench import tier
    from blockviz.kv.offload import MAX_RUNS
    result = tier.run(1, True, lambda msg: None)
    assert [(c["shape"], c["chunks"]) for c in result["cases"]] == [
        (shape, layout) for shape in tier.SHAPES for layout in ("fresh", "evicted", "random")]
    runs = {c["chunks"]: c["chunk_runs"] for c in result["cases"]}
    assert runs["fresh"] == 1 and 1 < runs["evicted"] < MAX_RUNS < runs["random"]
    for c in result["cases"]:
        assert c["bytes_moved"] > 0 and c["store_ratio"] > 0 and c["load_ratio"] > 0
    (budget,) = result["budgets"]
    assert budget["value"] == max(max(c["store_ratio"], c["load_ratio"])
                                  for c in result["cases"] if c["chunks"] != "random")
    assert budget["limit"] == 3.0 and budget["met"] == (budget["value"] <= 3.0)
    assert result["worst_random_ratio"] == max(max(c["store_ratio"], c["load_ratio"])
                                               for c in result["cases"] if c["chunks"] == "random")
    assert "plain copy" in tier.render(result)


def test_live_benchmark_checks_its_stream_and_reports_both_budgets():
    """``bench live --quick``: the synthetic stream reduces to the pool it models on every path
    (the run raises otherwise), every batch arrives over ZeroMQ, and both budgets are reported."""
    from bench import live
    result = live.run(1, True, lambda msg: None)
    assert result["events"] > 0 and result["over_zmq"]["batches"] == result["batches"]
    assert set(result["cpu_s"]) == {"decode only", "decode + reduce", "older shape"}
    assert [c["hashes"] for c in result["page"]][0] < result["page"][-1]["hashes"]
    assert [b["unit"] for b in result["budgets"]] == ["events/s", "s"]
    assert "events/s" in live.render(result)


def test_curve_benchmark_checks_the_curve_against_the_replay_and_reports_its_budgets():
    """``bench curve --quick``: the one pass and one replay side by side at both block sizes (the run
    raises if the curve's point differs from the replay's), peak memory for half and all of the
    trace, a trace with retries; three budgets, no timing asserted."""
    from bench import curve
    result = curve.run(1, True, lambda msg: None)
    for key in ("bs512", "bs16", "retries"):
        r = result[key]
        assert r["point"]["requests"] > 0 and r["ratio"] > 0 and r["change_points"] > 1
    assert result["retries"]["requests"] > result["requests"]
    assert all(m["whole_bytes"] > m["half_bytes"] > 0 for m in result["memory"].values())
    assert [b["unit"] for b in result["budgets"]] == ["x", "x", "x"]
    assert [b["limit"] for b in result["budgets"]] == [1.0, 2.0, 2.2]
    assert "the whole curve" in curve.render(result)
