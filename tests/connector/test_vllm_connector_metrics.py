"""vLLM's external-tier metrics (the JSON's vllm_metrics; blockviz.sim.metrics) against what vLLM's
own stat loggers make of its real Scheduler + OffloadingConnector (conn_diff.py's oracle): after
every event, ``vllm:external_prefix_cache_queries``/``_hits``, ``vllm:prefix_cache_queries``/
``_hits`` and ``vllm:prompt_tokens_cached_by_source{source="host"}`` are the sums of the
per-step SchedulerStats vLLM's engine emitted (PrometheusStatLogger.record, loggers.py:1165-1190),
and the log line's external hit rate is its CachingMetrics over the connector's stats
(loggers.py:230-235; blockviz's window is vLLM's CachingMetrics: tests/core/test_vllm_scheduler.py).

Skips, saying why, where the oracle cannot be had (as test_vllm_connector_diff.py)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace as NS

import pytest
import yaml
from conn_diff import find_oracle, random_scenario, run_oracle, to_blockviz

from blockviz.scenario import load_text
from blockviz.sim.engine import Engine, EngineError
from blockviz.sim.metrics import CachingWindow

ORACLE = find_oracle()
needs_oracle = pytest.mark.skipif(isinstance(ORACLE, str), reason=str(ORACLE))
TOOL_SCENARIOS = (sorted((Path(ORACLE[2]) / "scenarios").glob("*.yaml"))
                  if not isinstance(ORACLE, str) else [])


def _ours(scen: dict) -> list:
    """blockviz's vllm_metrics after each event of ``scen``."""
    scenario = load_text(to_blockviz(scen)).scenario
    engine = Engine(scenario, record_ops=False, payloads=False)
    out = []
    for step in scenario.steps:
        try:
            engine.apply(step)
        except EngineError:
            if step.kind != "finish":      # vLLM ignores finishing a finished request
                raise
        out.append(engine.state.metrics.metrics())
    return out


def _check(scen: dict) -> int:
    """Compare after every event; returns the external hit tokens seen (so a case can insist)."""
    theirs = run_oracle(scen, ORACLE)["timeline"]
    ours = _ours(scen)
    assert len(theirs) == len(ours)
    total = dict.fromkeys(("queries", "hits", "ext_queries", "ext_hits", "host"), 0)
    window = CachingWindow()        # the connector's stats are never reset here (no reset_connector)
    for i, (t, m) in enumerate(zip(theirs, ours, strict=True), 1):
        for rec in t["engine_steps"]:
            g = rec.get("gpu_prefix_cache_stats")
            if g:
                total["queries"] += g["queries"]
                total["hits"] += g["hits"]
            c = rec.get("connector_prefix_cache_stats")
            if c:
                total["ext_queries"] += c["queries"]
                total["ext_hits"] += c["hits"]
                total["host"] += c["hits_by_source"].get("host", 0)
                window.observe(NS(reset=False, requests=c["requests"], queries=c["queries"],
                                  hits=c["hits"]))
        got = (m.prefix_cache_queries_total, m.prefix_cache_hits_total,
               m.external_prefix_cache_queries_total, m.external_prefix_cache_hits_total,
               m.prompt_tokens_cached_host_total)
        assert got == tuple(total.values()), (scen.get("id"), i, t["event"])
        assert (m.logged_external_requests, m.logged_external_queries,
                m.logged_external_hits) == (window.requests, window.queries, window.hits), (
            scen.get("id"), i)
    return total["ext_hits"]


@needs_oracle
def test_the_external_counters_and_window_are_vllm_s_on_an_async_load():
    scen = yaml.safe_load((Path(ORACLE[2]) / "scenarios" / "b-async-delay.yaml").read_text())
    assert _check(scen) > 0


@needs_oracle
@pytest.mark.slow
@pytest.mark.parametrize("path", TOOL_SCENARIOS, ids=lambda p: p.stem)
def test_the_tools_scenarios_count_as_vllm_s_loggers(path):
    _check(yaml.safe_load(path.read_text()))


@needs_oracle
@pytest.mark.slow
def test_random_scenarios_count_as_vllm_s_loggers():
    hits = sum(_check(random_scenario(7000 + seed, sync=seed % 2 == 1, policy=policy))
               for seed in range(8) for policy in ("lru", "arc"))
    assert hits > 0


# -- the tier's lessons: each event's splits against the lookups vLLM counted -----------------------
def _lesson_as_oracle_scenario(lesson: str):
    """(the lesson's JSON, the lesson in the oracle's format, for each oracle event the lesson's
    event index): explicit prompt tokens from blockviz's run; narration-only events left out."""
    from blockviz.scenario import load
    from blockviz.scenario.lessons import resolve
    from blockviz.sim.contract import timeline_dict
    from blockviz.sim.runner import run
    loaded = load(resolve(lesson))
    engine, tl = run(loaded, payloads=False)
    assert tl.error is None
    doc = timeline_dict(lesson, engine, tl, frames=False)
    prompts = {rid: r["token_ids"][:r["num_prompt_tokens"]]
               for s in doc["steps"] for rid, r in s["requests"].items()}
    c = loaded.scenario.config
    cfg = {"block_size": c.block_size, "num_blocks": c.num_blocks,
           "cpu_chunks": c.connector.num_blocks, "load_delay": c.connector.load_delay,
           "store_delay": c.connector.store_delay, "eviction_policy": c.connector.eviction_policy,
           "sync_load_budget_tokens": c.connector.sync_load_budget_tokens}
    steps, index = [], []
    for i, st in enumerate(loaded.scenario.steps, 1):
        if st.kind == "arrive":
            a = st.args
            steps.append({"arrive": {"id": a.id, "prompt": prompts[a.id],
                                     "max_tokens": a.max_tokens, "admit": a.admit}})
        elif st.kind == "step":
            steps.append({"step": st.args})
        elif st.kind == "reset_prefix_cache":
            steps.append({"reset_prefix_cache": {}})
        elif st.kind is None:
            continue
        else:
            raise AssertionError(f"{lesson}: no oracle form for {st.kind}")
        index.append(i)
    return doc, {"id": lesson, "config": cfg, "steps": steps}, index


@needs_oracle
@pytest.mark.parametrize("lesson", ["external-tier", "async-load"])
def test_the_tier_lessons_hits_are_what_vllm_counts(lesson):
    """At each event, the GPU hits and the connector's external hits vLLM recorded (its
    SchedulerStats, per engine step) are the hit and external_hit of the splits blockviz made at
    that event's admissions, and the queries their prompts: every lookup explained, as vLLM
    counts it."""
    doc, scen, index = _lesson_as_oracle_scenario(lesson)
    theirs = run_oracle(scen, ORACLE)["timeline"]
    seen: set = set()
    external = 0
    for t, i in zip(theirs, index, strict=True):
        gpu = dict.fromkeys(("requests", "queries", "hits"), 0)
        ext = dict.fromkeys(("queries", "hits"), 0)
        for rec in t["engine_steps"]:
            for k in gpu:
                gpu[k] += (rec.get("gpu_prefix_cache_stats") or {}).get(k, 0)
            for k in ext:
                ext[k] += (rec.get("connector_prefix_cache_stats") or {}).get(k, 0)
        new = {rid: r for rid, r in doc["steps"][i]["requests"].items()
               if r["prompt_split"] is not None and rid not in seen}
        seen |= set(new)
        splits = [r["prompt_split"] for r in new.values()]
        assert all(sum(p.values()) == r["num_prompt_tokens"] for p, r in zip(
            splits, new.values(), strict=True))
        assert (gpu["requests"], gpu["queries"], gpu["hits"]) == (
            len(new), sum(r["num_prompt_tokens"] for r in new.values()),
            sum(p["hit"] for p in splits)), (lesson, i)
        assert ext["hits"] == sum(p["external_hit"] for p in splits), (lesson, i)
        external += ext["hits"]
    assert external > 0
