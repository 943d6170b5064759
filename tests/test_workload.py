"""The workload generator: valid scenarios of every kind that run to the end with every invariant
checked, one scenario per seed, and capacity planning whose numbers mean what they say."""
from __future__ import annotations

import pytest
import yaml

from blockviz.scenario import load_text
from blockviz.sim.capacity import Point, scenario_stats
from blockviz.sim.runner import run
from blockviz.teach import workload as W

SMALL = {"num_blocks": 12, "block_size": 4, "max_live": 3, "prefix_blocks": 2, "new_tokens": 6}


def _run_checked(data: dict):
    """Through a YAML file, as a user would save it, then run with every invariant checked."""
    loaded = load_text(yaml.safe_dump(data, allow_unicode=True), "<generated>")
    engine, timeline = run(loaded, check=True)
    assert timeline.error is None, timeline.error
    return engine, timeline


@pytest.mark.parametrize("kind", W.KINDS)
@pytest.mark.parametrize("free_order", ["split", "append"])
def test_each_kind_runs_to_the_end_with_invariants_checked(kind, free_order):
    data = W.generate_dict(kind=kind, num_events=120, seed=7, free_order=free_order, **SMALL)
    assert len(data["steps"]) == 120
    assert data["config"]["model"] is None and data["config"]["free_order"] == free_order
    engine, timeline = _run_checked(data)
    assert len(timeline) == 121
    stats = engine.manager.prefix_cache_stats
    assert stats.queries > 0
    # 12 blocks under this load: the pool really turns over, so eviction paths were exercised.
    assert engine.pool.num_evictions > 0


@pytest.mark.parametrize("kind", ["shared_prefix", "multi_turn", "few_shot"])
def test_shared_prefixes_hit(kind):
    engine, _ = _run_checked(W.generate_dict(kind=kind, num_events=80, seed=1, num_blocks=64,
                                             block_size=4, max_live=3))
    assert engine.manager.prefix_cache_stats.hits > 0


def test_multi_turn_turns_extend_the_previous_conversation():
    data = W.generate_dict(kind="multi_turn", num_events=200, seed=3, **SMALL)
    engine, _ = _run_checked(data)
    reqs = engine.scheduler.requests
    follow_ups = [s["arrive"] for s in data["steps"]
                  if "arrive" in s and "first" not in s["arrive"]["prompt"][0]
                  and "same_as" in s["arrive"]["prompt"][0]]
    assert follow_ups, "no conversation got a second turn"
    for spec in follow_ups:
        previous = reqs[spec["prompt"][0]["same_as"]]
        this = reqs[spec["id"]]
        # the whole previous turn, its reply included, then the new user tokens
        assert this.prompt_token_ids[:previous.num_tokens] == previous.all_token_ids
        assert this.num_prompt_tokens > previous.num_tokens


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("kind", W.KINDS)
def test_many_seeds_are_valid_under_pressure(kind, seed):
    """Tight pools (preemption, head-of-line blocking) never make a generated event invalid."""
    scenario = W.generate(kind=kind, num_events=150, seed=seed, num_blocks=8 + seed % 5,
                          block_size=2 + seed % 3, max_live=2 + seed % 4, prefix_blocks=2,
                          new_tokens=4)
    stats, error = scenario_stats(scenario)
    assert error is None
    assert stats["queries"] > 0


def test_deterministic_for_a_seed():
    a = W.generate_dict(kind="random", num_events=150, seed=5, **SMALL)
    b = W.generate_dict(kind="random", num_events=150, seed=5, **SMALL)
    c = W.generate_dict(kind="random", num_events=150, seed=6, **SMALL)
    assert a == b
    assert a["steps"] != c["steps"]
    assert W.generate(kind="random", num_events=150, seed=5, **SMALL) == W.generate(
        kind="random", num_events=150, seed=5, **SMALL)


def test_same_workload_object_and_fields_agree():
    w = W.Workload(kind="few_shot", num_events=40, seed=2, **SMALL)
    assert W.generate_dict(w) == W.generate_dict(**w.__dict__)
    assert W.generate_dict(w, seed=3) == W.generate_dict(**(w.__dict__ | {"seed": 3}))


def test_payloads_on_with_a_model():
    model = {"num_layers": 1, "num_kv_heads": 1, "head_dim": 4}
    data = W.generate_dict(kind="shared_prefix", num_events=25, seed=0, model=model, **SMALL)
    assert data["config"]["model"] == model
    engine, _ = _run_checked(data)
    assert engine.kv is not None


def test_bad_workloads_are_refused():
    with pytest.raises(ValueError, match="kind"):
        W.Workload(kind="chatty")
    with pytest.raises(ValueError, match="free_order"):
        W.Workload(free_order="lifo")
    with pytest.raises(ValueError, match="num_events"):
        W.Workload(num_events=0)
    with pytest.raises(ValueError, match="limits"):  # more prompt tokens than a scenario may have
        W.generate(kind="shared_prefix", num_events=2_000, block_size=64, prefix_blocks=64)


# -- capacity planning ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plan():
    scenario = W.generate(kind="shared_prefix", num_events=150, seed=4, num_blocks=16,
                          block_size=4, max_live=3, prefix_blocks=3, new_tokens=8,
                          num_prefixes=3)
    smallest, enough = W.pool_demand(scenario)
    sizes = sorted({smallest, (smallest + enough) // 2, enough, enough + 10})
    calls: list[tuple[int, int]] = []
    points = W.capacity_plan(scenario, sizes, progress=lambda d, t: calls.append((d, t)))
    return scenario, sizes, enough, points, calls


def test_capacity_plan_covers_every_size_and_order(plan):
    _, sizes, _, points, _ = plan
    assert [(p.pool_blocks, p.free_order) for p in points] == [
        (s, o) for s in sizes for o in ("split", "append")]
    for p in points:
        assert p.error is None
        assert 0.0 <= p.hit_rate <= 1.0
        assert p.hit_rate == (p.hits / p.queries if p.queries else 0.0)


def test_a_pool_that_never_evicts_gets_the_best_hit_rate(plan):
    _, _, enough, points, _ = plan
    best = max(p.hit_rate for p in points)
    roomy = [p for p in points if p.pool_blocks >= enough]
    assert roomy and all(p.evictions == 0 for p in roomy)
    assert all(p.hit_rate == best for p in roomy)
    # the smallest pool is under pressure: it evicts and hits less
    smallest = min(points, key=lambda p: p.pool_blocks)
    assert smallest.evictions > 0 and smallest.hit_rate < best


def test_free_orders_agree_when_nothing_is_evicted(plan):
    _, _, enough, points, _ = plan
    by_size: dict[int, dict[str, Point]] = {}
    for p in points:
        by_size.setdefault(p.pool_blocks, {})[p.free_order] = p
    for size, pair in by_size.items():
        if size >= enough:
            split, append = pair["split"], pair["append"]
            assert (split.hits, split.queries, split.preemptions) == (
                append.hits, append.queries, append.preemptions)


def test_capacity_plan_reports_progress(plan):
    scenario, sizes, _, _, calls = plan
    total = len(scenario.steps) * len(sizes) * 2
    assert calls[-1] == (total, total)
    assert all(t == total for _, t in calls)
    done = [d for d, _ in calls]
    assert done == sorted(done) and len(calls) > len(sizes) * 2


def test_default_pool_sizes_span_pressure_to_no_eviction():
    scenario = W.generate(kind="multi_turn", num_events=100, seed=2, **SMALL)
    smallest, enough = W.pool_demand(scenario)
    sizes = W.default_pool_sizes(scenario, count=6)
    assert sizes == sorted(set(sizes)) and sizes[0] == smallest and sizes[-1] == enough
    assert 2 <= len(sizes) <= 6
