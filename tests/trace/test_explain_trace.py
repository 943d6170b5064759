"""``trace capacity --explain``: the split of every admitted prompt token per pool size
(blockviz.sim.explain_trace.trace_split_parts), checked against the engine's own explainer run request by
request on the same tokens, and against the replay's hits; and the command's table and JSON."""
from __future__ import annotations

import json
import random

import pytest
from trace_helpers import random_trace, write

from blockviz.scenario import load_text
from blockviz.scenario.trace import prompt_token_ids
from blockviz.sim.capacity import replay_sequence
from blockviz.sim.explain_trace import TRACE_KEYS, split_of, trace_split_parts
from blockviz.sim.runner import run


def _scenario(trace, bs: int, pool: int) -> str:
    """The trace as a scenario: each request alone (its one output token ends it), as sequence
    mode runs it."""
    lines = [f"id: t\ntitle: {{en: T}}\nconfig: {{num_blocks: {pool}, block_size: {bs}, "
             f"model: null}}\nsteps:"]
    for i, r in enumerate(trace):
        toks = prompt_token_ids(r.input_length, r.hash_ids, r.block_tokens)
        lines.append(f"  - arrive: {{id: R{i}, prompt: {toks}, max_tokens: 1}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(6))
def test_the_trace_split_is_the_engine_s_split_summed(seed):
    rng = random.Random(seed)
    bs = rng.choice([64, 128, 256])
    trace = random_trace(rng, 14, bs)
    pool = max(-(-r.input_length // bs) for r in trace) + rng.randint(0, 12)
    replay = replay_sequence(trace, block_size=bs, pool_blocks=pool)
    split = split_of(trace_split_parts(trace, block_size=bs, pools=[pool])[pool], replay["hits"])
    engine, tl = run(load_text(_scenario(trace, bs, pool)), payloads=False)
    assert tl.error is None
    total = dict.fromkeys(TRACE_KEYS, 0)
    for r in tl.step(len(tl) - 1).requests.values():
        for key in TRACE_KEYS:
            total[key] += r.prompt_split[key]
    assert total == split
    assert sum(split.values()) == replay["queries"] and split["hit"] == replay["hits"]


def test_rejected_requests_cache_nothing_at_that_pool_size():
    # a 3-block request is rejected at 2 blocks: its prefix is never cached there, so the next
    # request that shares it is cold at 2 blocks, and a hit at 3
    from blockviz.scenario.trace import TraceRequest
    reqs = [TraceRequest(0, 1536, 1, [1, 2, 3], 1), TraceRequest(1, 600, 1, [1, 2], 2)]
    hits = {p: replay_sequence(reqs, block_size=512, pool_blocks=p)["hits"] for p in (2, 3)}
    parts = trace_split_parts(reqs, block_size=512, pools=[2, 3])
    s = {p: split_of(parts[p], hits[p]) for p in parts}
    assert s[2] == {"hit": 0, "evicted": 0, "cold": 512, "last_token": 0, "partial_block": 88}
    assert s[3] == {"hit": 512, "evicted": 0, "cold": 1024, "last_token": 512, "partial_block": 88}


def test_capacity_explain_prints_the_split_and_adds_it_to_the_json(cli, tmp_path):
    f = write(tmp_path / "t.jsonl", [(1030, [1, 2, 3]), (1030, [1, 2, 4]), (600, [7, 8]),
                                    (1030, [1, 2, 3])])
    p = cli("trace", "capacity", str(f), "--pool-blocks", "3,9", "--explain", "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    for point in report["points"]:
        assert sum(point["split"].values()) == point["queries"]
        assert point["split"]["hit"] == point["hits"]
    text = cli("trace", "capacity", str(f), "--pool-blocks", "3,9", "--explain")
    assert text.returncode == 0 and "evicted" in text.stdout and "cold" in text.stdout
    zh = cli("trace", "capacity", str(f), "--pool-blocks", "3,9", "--explain", "--lang", "zh")
    assert "已淘汰" in zh.stdout
    refused = cli("trace", "capacity", str(f), "--pool-blocks", "3", "--explain", "--mode", "timed")
    assert refused.returncode == 2 and "--explain" in refused.stderr


def test_each_pool_size_s_bar_says_its_hit_and_evicted_share():
    """The capacity page's bars (render.capacity.split_bars_html): beside each bar, its hit and
    evicted shares in words — "a bigger cache would buy at most the evicted part" read off."""
    from blockviz.render.capacity import split_bars_html
    from blockviz.sim.capacity import Point
    split = {"hit": 300, "evicted": 450, "cold": 200, "last_token": 40, "partial_block": 10}
    pts = [Point(pool_blocks=8, free_order="split", queries=1000, hits=300, evictions=5,
                 extra={"split": split})]
    en = split_bars_html(pts, "en", block_size=16)
    assert '<span class="bv-small bv-split-fig">hit 30.0% · evicted 45.0%</span>' in en
    assert en.index("128") < en.index('data-bv="split"') < en.index("hit 30.0%")
    zh = split_bars_html(pts, "zh", block_size=16)
    assert "命中 30.0% · 已淘汰 45.0%" in zh
