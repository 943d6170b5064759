"""vLLM's metrics per step (blockviz.sim.metrics; the JSON's vllm_metrics; blockviz metrics): what
vLLM's stat loggers hold, checked against vLLM's own code by tests/core/test_vllm_scheduler.py, and
here the rules a reader relies on: counters leave resumed re-lookups out and survive a reset, the
log line's window empties at a reset, a preemption counts when its request next emits output,
usage counts held blocks once, and the Prometheus text parses back to the JSON's numbers."""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from blockviz.render.prometheus import FAMILIES, log_line, prometheus_text
from blockviz.scenario import load, load_text
from blockviz.scenario.lessons import resolve
from blockviz.sim.contract import timeline_dict
from blockviz.sim.metrics import CachingWindow
from blockviz.sim.runner import run


def _doc(text: str) -> dict:
    loaded = load_text(text)
    engine, tl = run(loaded, payloads=False)
    assert tl.error is None
    return timeline_dict("m", engine, tl, frames=False)


def test_counters_leave_resumed_lookups_out_and_count_a_preemption_at_its_next_output():
    engine, tl = run(load(resolve("preempt-resume")), payloads=False)
    d = timeline_dict("p", engine, tl, frames=False)
    for s in d["steps"]:
        m, st = s["vllm_metrics"], s["stats"]
        assert (m["prefix_cache_queries_total"], m["prefix_cache_hits_total"]) == (
            st["queries"], st["hits"])          # never the preempted_* re-lookups
        # the JSON's own totals count both (docs/scenarios.md, "Two kinds of totals")
        assert (st["prefix_cache_queries"], st["prefix_cache_hits"]) == (
            st["queries"] + st["preempted_queries"], st["hits"] + st["preempted_hits"])
    last = d["steps"][-1]
    assert (last["stats"]["prefix_cache_queries"], last["stats"]["prefix_cache_hits"]) == (24, 12)
    assert (last["vllm_metrics"]["prefix_cache_queries_total"],
            last["vllm_metrics"]["prefix_cache_hits_total"]) == (13, 4)
    preempted_at = next(s["index"] for s in d["steps"] if s["stats"]["preemptions"])
    counted_at = next(s["index"] for s in d["steps"] if s["vllm_metrics"]["num_preemptions_total"])
    assert counted_at > preempted_at      # B's PREEMPTED event leaves with its next token


def test_a_reset_empties_the_log_window_but_not_the_counters():
    d = _doc("""id: m
title: {en: M}
config: {num_blocks: 8, block_size: 4, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9], max_tokens: 1}
  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9], max_tokens: 1}
  - reset_prefix_cache
  - arrive: {id: C, prompt: [21, 22, 23], max_tokens: 1, admit: false}
  - step
""")
    s = d["steps"]
    assert s[2]["vllm_metrics"]["logged_hit_rate"] == {"rate": 8 / 18, "requests": 2,
                                                      "queries": 18, "hits": 8}
    # the reset's flag travels with the next engine step's stats: the window restarts with C
    assert s[5]["vllm_metrics"]["logged_hit_rate"] == {"rate": 0.0, "requests": 1, "queries": 3,
                                                      "hits": 0}
    assert s[5]["vllm_metrics"]["prefix_cache_queries_total"] == 21      # counters go on


def test_the_window_keeps_about_the_last_thousand_requests_in_whole_steps():
    from types import SimpleNamespace as NS
    w = CachingWindow(max_recent_requests=3)
    for req, q, h in ((1, 10, 8), (2, 20, 0), (0, 0, 0), (1, 10, 10), (5, 50, 0)):
        w.observe(NS(reset=False, requests=req, queries=q, hits=h))
    assert (w.requests, w.queries, w.hits) == (5, 50, 0)    # a step of 5 is kept whole
    w.observe(NS(reset=True, requests=0, queries=0, hits=0))
    assert w.empty and w.hit_rate == 0.0


def test_usage_counts_held_blocks_and_beside_it_the_cached_free_ones():
    d = _doc("""id: m
title: {en: M}
config: {num_blocks: 8, block_size: 4, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9], max_tokens: 4}
  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 10], max_tokens: 4}
  - finish: A
""")
    m = d["steps"][2]["vllm_metrics"]
    # A and B share blocks 1 and 2 (counted once) and hold one more each: 4 of 8
    assert m["used_blocks"] == 4 and m["kv_cache_usage_perc"] == 0.5
    assert 0 < m["token_occupancy"] < m["kv_cache_usage_perc"]   # the last blocks are part full
    last = d["steps"][3]
    assert last["vllm_metrics"]["used_blocks"] == 3 and last["vllm_metrics"]["cached_free_blocks"] == 0
    assert last["vllm_metrics"]["kv_cache_usage_perc"] == 0.5   # last sampled: no step since


def test_the_prometheus_text_reads_back_as_the_json(cli):
    p = cli("metrics", "preempt-resume", "--step", "7")
    assert p.returncode == 0, p.stderr
    engine, tl = run(load(resolve("preempt-resume")), payloads=False)
    m = timeline_dict("p", engine, tl, frames=False)["steps"][7]["vllm_metrics"]
    values = dict(re.findall(r"^(vllm:\w+)\{[^}]*\} (\S+)$", p.stdout, re.M))
    assert float(values["vllm:prefix_cache_queries_total"]) == m["prefix_cache_queries_total"]
    assert float(values["vllm:num_preemptions_total"]) == m["num_preemptions_total"]
    assert float(values["vllm:kv_cache_usage_perc"]) == m["kv_cache_usage_perc"]
    assert p.stdout.startswith("# blockviz: step 7 ")
    assert "# log: Engine 000: Running: 1 reqs" in p.stdout and "_created" not in p.stdout


def test_the_log_line_leaves_the_hit_rate_out_while_its_window_is_empty():
    engine, tl = run(load(resolve("six-blocks")), payloads=False)
    assert "Prefix cache hit rate" not in log_line(tl.step_vllm_metrics(0))
    assert "Prefix cache hit rate: 40.0%" in log_line(tl.step_vllm_metrics(2))   # 8 of 20
    text = prometheus_text(tl.step_vllm_metrics(2), "tiny")
    assert 'vllm:prefix_cache_hits_total{engine="0",model_name="tiny"} 8.0' in text


def test_names_and_help_texts_are_vllm_s_own():
    """Each family's name and HELP text are word for word in vLLM 0.33's loggers.py."""
    src = Path(os.environ.get("BLOCKVIZ_VLLM_FULL_SRC", "~/.cache/blockviz-sched-oracle/src/0.33.0")
               ).expanduser() / "vllm/v1/metrics/loggers.py"
    if not src.is_file():
        pytest.skip("vLLM 0.33.0's source not found (set BLOCKVIZ_VLLM_FULL_SRC)")
    strings = {n.value for n in ast.walk(ast.parse(src.read_text())) if isinstance(n, ast.Constant)
               and isinstance(n.value, str)}
    for name, _, help_text in FAMILIES:
        assert name.removesuffix("_total") in strings, name
        assert help_text in strings, name


def test_the_metrics_panel_names_vllm_s_metrics_and_says_why_they_disagree():
    from blockviz.render.metrics import vllm_metrics_html
    engine, tl = run(load(resolve("reset-running")), payloads=False)
    en = vllm_metrics_html(tl.step(5), tl.block_size, "en")     # right after the forced reset
    assert "vllm:kv_cache_usage_perc" in en and "vllm:prefix_cache_hits_total" in en
    assert "0 of 8" in en and "still shows 0.625" in en          # the gauge lags the pool
    six = vllm_metrics_html(tl.step(6), tl.block_size, "en")
    assert "not printed" in six and "still shows" not in six     # the window emptied
    seven = vllm_metrics_html(tl.step(7), tl.block_size, "en")
    assert "66.7%" in seven and "differs from the counters" in seven
    zh = vllm_metrics_html(tl.step(5), tl.block_size, "zh")
    assert "仍显示 0.625" in zh and "8 个中的 0 个" in zh
