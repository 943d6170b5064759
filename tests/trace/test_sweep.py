"""A sweep is independent tasks: the same results on one process, on worker processes, on Ray;
the reports have run-trace's shape; progress adds up; a bad trace stops the sweep before it runs."""
from __future__ import annotations

import importlib.util

import pytest
from trace_helpers import write

from blockviz.scenario.trace import TraceError, read_trace
from blockviz.sim import sweep as S
from blockviz.sim.capacity import ceiling, replay_sequence


@pytest.fixture
def traces(tmp_path):
    a = write(tmp_path / "a.jsonl", [(1024, [1, 2]), (1536, [1, 2, 3]), (1024, [1, 2]), (600, [9, 10]),
                                      (512, [20]), (1536, [1, 2, 3])])
    b = write(tmp_path / "b.jsonl", [((i % 5 + 1) * 300, list(range(-(-((i % 5 + 1) * 300) // 512))))
                                     for i in range(40)])
    return [str(a), str(b)]


def test_plan_lists_a_ceiling_and_one_task_per_order_and_pool(traces):
    tasks = S.plan(traces, block_size=64, pool_blocks=[8, 80], free_orders=["split", "append"])
    assert len(tasks) == 2 * (1 + 2 * 2)
    assert [t.is_ceiling for t in tasks[:5]] == [True, False, False, False, False]
    assert {(t.free_order, t.pool_blocks) for t in tasks[1:5]} == {("split", 8), ("split", 80),
                                                                  ("append", 8), ("append", 80)}
    for bad in ({"block_size": 48}, {"pool_blocks": [0]}, {"free_orders": ["lifo"]}, {"mode": "warp"},
                {"mode": "timed", "options": {"nope": 1}}, {"options": {"max_num_seqs": 1}}):
        with pytest.raises(ValueError):
            S.plan(traces, **({"block_size": 64, "pool_blocks": [8]} | bad))


def _expected(path, bs, pools, order):
    reqs = read_trace(path)
    return {"requests": len(reqs), "block_size": bs, "free_order": order,
            "ceiling": ceiling(reqs, block_size=bs),
            "points": [replay_sequence(reqs, block_size=bs, pool_blocks=p, free_order=order)
                       for p in pools]}


@pytest.mark.parametrize("workers", [1, 2])
def test_local_executor_gives_the_reports_of_the_replays(traces, workers):
    calls: list[tuple[int, int]] = []
    result = S.sweep(traces, block_size=64, pool_blocks=[8, 80], free_orders=["split", "append"],
                     executor=S.LocalExecutor(workers), progress=lambda d, t: calls.append((d, t)))
    want = [_expected(p, 64, [8, 80], o) for p in traces for o in ("split", "append")]
    assert result.reports == want
    total = 5 * (6 + 40)                       # each trace's requests, once per task
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))
    # A report's keys, in run-trace's order.
    assert list(result.reports[0]) == ["requests", "block_size", "free_order", "ceiling", "points"]
    assert list(result.reports[0]["points"][0]) == ["pool_blocks", "queries", "hits", "requests",
                                                    "rejected", "evictions"]


def test_a_bad_trace_stops_the_sweep_before_any_task(traces, tmp_path, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(open(traces[0]).read() + '{"timestamp": 0}\n')
    ran = []
    monkeypatch.setattr(S, "run_task", lambda *a, **k: ran.append(a))
    with pytest.raises(TraceError, match=r"bad\.jsonl:7:1: missing field"):
        S.sweep([traces[0], str(bad)], block_size=512, pool_blocks=[4], executor=S.LocalExecutor(1))
    assert ran == []


def test_a_worker_error_comes_back_as_itself(traces, tmp_path):
    """A trace that changes after the check: the worker's located error reaches the caller."""
    path = tmp_path / "c.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n{"x"\n')
    tasks = [S.Task(str(path), 512, 4, "split"), S.Task(str(path), 512, 8, "split")]
    with pytest.raises(TraceError, match=r"c\.jsonl:2:5: not a JSON object"):
        S.LocalExecutor(2).run(tasks)


def test_ray_without_ray_says_what_to_do():
    if importlib.util.find_spec("ray") is not None:
        pytest.skip("Ray is installed here")
    with pytest.raises(S.ExecutorUnavailable, match=r"pip install 'blockviz\[ray\]'"):
        S.RayExecutor()


@pytest.mark.slow
def test_ray_executor_on_a_local_ray_gives_the_same_reports(traces):
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (an optional extra: pip install '.[ray]'); the local "
                    "executor runs the same tasks")
    calls: list[tuple[int, int]] = []
    result = S.sweep(traces, block_size=64, pool_blocks=[8, 80], free_orders=["split", "append"],
                     executor=S.RayExecutor(num_cpus=2),
                     progress=lambda d, t: calls.append((d, t)))
    local = S.sweep(traces, block_size=64, pool_blocks=[8, 80], free_orders=["split", "append"],
                    executor=S.LocalExecutor(1))
    assert result.reports == local.reports
    assert calls[-1] == (5 * 46, 5 * 46)
