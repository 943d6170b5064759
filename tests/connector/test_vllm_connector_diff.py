"""blockviz's external tier against vLLM 0.33.0's real Scheduler + OffloadingConnector + CPU
offloading manager (shared/tools/vllm-diff/conn), engine step by engine step: lookups, jobs,
flushes, completions, CPU events, requests waiting for remote KV, statuses, stats by source,
the tier's contents in eviction order, the GPU's free queue and tables (conn_diff.py says how).

Skips, saying why, where the oracle (its venv and vLLM 0.33.0's source, made by
``shared/tools/vllm-diff/sched/setup.sh``) cannot be had; nothing is downloaded here."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conn_diff import compare, find_oracle, random_scenario

ORACLE = find_oracle()
needs_oracle = pytest.mark.skipif(isinstance(ORACLE, str), reason=str(ORACLE))
TOOL_SCENARIOS = (sorted((Path(ORACLE[2]) / "scenarios").glob("*.yaml"))
                  if not isinstance(ORACLE, str) else [])


def _check(scen: dict) -> None:
    diffs = compare(scen, ORACLE)
    assert not diffs, f"{scen['id']} differs from vLLM:\n" + "\n".join(diffs[:3])


@needs_oracle
def test_async_delay_scenario_matches_vllm():
    """The quick one: an async load of 12 tokens taking 3 steps while another request runs."""
    _check(yaml.safe_load((Path(ORACLE[2]) / "scenarios" / "b-async-delay.yaml").read_text()))


@needs_oracle
@pytest.mark.slow
@pytest.mark.parametrize("path", TOOL_SCENARIOS, ids=lambda p: p.stem)
def test_the_tools_scenarios_match_vllm(path):
    _check(yaml.safe_load(path.read_text()))


@needs_oracle
@pytest.mark.slow
@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_random_scenarios_match_vllm(seed, sync, policy):
    _check(random_scenario(7000 + seed, sync=sync, policy=policy))
