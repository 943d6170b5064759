"""Capacity planning with a model's layer mix (issue 29): presets carry vLLM's KV-cache groups, a
pool block's bytes follow the group size, and a trace's replay (sequence mode, the ceiling, timed
mode) runs the model's groups as vLLM 0.33's HybridKVCacheCoordinator does — checked against
blockviz's engine, whose hybrid runs are identical to vLLM's real Scheduler (run-hybrid)."""
from __future__ import annotations

import json
import random

import pytest

from blockviz.scenario import load_text
from blockviz.scenario.schema import KVCacheGroup
from blockviz.scenario.trace import TraceRequest, prompt_token_ids
from blockviz.sim.capacity import (
    KV_PRESETS,
    KVShape,
    LayerKind,
    ceiling,
    model_groups,
    replay_sequence,
    replay_timed,
)
from blockviz.sim.runner import run

SW = KVCacheGroup(type="sliding_window", sliding_window=40)
FA = KVCacheGroup(type="full_attention")
CHUNKED = KVCacheGroup(type="chunked_local_attention", attention_chunk_size=64)
LAYOUTS = {"full+window": (FA, SW), "window+full": (SW, FA), "2 windows+full": (SW, SW, FA),
           "chunked+full": (CHUNKED, FA)}
BS, CHUNK = 16, 64


# -- the presets -----------------------------------------------------------------------------------
def test_presets_carry_vllms_groups_and_a_pool_blocks_bytes():
    oss = KV_PRESETS["gpt-oss-120b"]
    assert [g.type for g in oss.kv_cache_groups] == ["sliding_window", "full_attention"]
    assert oss.kv_cache_groups[0].sliding_window == 128
    assert oss.group_size == 18 and oss.bytes_per_token == 18 * 8 * 64 * 2 * 2     # 36 KiB a slot
    g27 = KV_PRESETS["gemma-3-27b"]           # 52 window + 10 global layers: groups of 10
    assert [g.type for g in g27.kv_cache_groups] == ["sliding_window"] * 6 + ["full_attention"]
    assert (g27.group_size, g27.padding_layers, g27.bytes_per_token) == (10, 8, 10 * 16 * 128 * 4)
    g12 = KV_PRESETS["gemma-3-12b"]
    assert len(g12.kv_cache_groups) == 6 and g12.padding_layers == 0
    scout = KV_PRESETS["llama-4-scout"]
    assert [g.type for g in scout.kv_cache_groups] == ["chunked_local_attention"] * 3 + ["full_attention"]
    assert scout.kv_cache_groups[0].attention_chunk_size == 8192 and scout.group_size == 12
    # dense models are one group of every layer, as before
    assert KV_PRESETS["llama-3-70b"].bytes_per_token == 320 * 1024
    assert KV_PRESETS["qwen3-32b"].bytes_per_token == 256 * 1024
    assert model_groups("qwen3-32b") is None and model_groups(None) is None
    assert model_groups("gpt-oss-20b") == KV_PRESETS["gpt-oss-20b"].kv_cache_groups
    # vLLM's rule: when no type has 1.5 times another's layers, the group is the larger count
    near = KVShape(25, 8, 64, mix=(LayerKind("sliding_window", 12, 128), LayerKind("full_attention", 13)))
    assert near.group_size == 13 and near.padding_layers == 1
    with pytest.raises(ValueError):
        KVShape(30, 8, 64, mix=KV_PRESETS["gpt-oss-20b"].mix)


# -- the replay follows the groups ------------------------------------------------------------------
def trace(rng: random.Random, n: int) -> list[TraceRequest]:
    """Short prompts (blocks of 512 tokens cut to a few hundred), recurring prefixes; hash ids
    small enough for the scenario's token ids."""
    out, seen = [], []
    for i in range(n):
        if seen and rng.random() < 0.45:
            ids, length = rng.choice(seen)
            length = max(1, length - rng.choice([0, 0, BS, 37]))
        else:
            k = rng.randint(1, 2)
            ids = [rng.randint(0, 3)] + [rng.randint(4, 120) for _ in range(k - 1)]
            length = (k - 1) * 512 + rng.randint(20, 300)
            seen.append((ids, length))
        out.append(TraceRequest(i, length, 0, ids[:-(-length // 512)], i + 1))
    return out


def engine_replay(requests: list[TraceRequest], groups, pool: int, order: str) -> dict:
    """The same requests through blockviz's engine, one at a time: each arrives and runs (its
    prefill in chunks of CHUNK tokens, one sampled token) until it finishes."""
    def group(g):
        return {k: v for k, v in g.model_dump().items() if v is not None}
    steps = []
    for i, r in enumerate(requests):
        toks = prompt_token_ids(r.input_length, r.hash_ids)
        steps.append({"arrive": {"id": f"r{i}", "prompt": [{"tokens": toks}], "max_tokens": 1}})
        more = -(-r.input_length // CHUNK) - 1
        if more:
            steps.append({"step": more})
    doc = {"id": "t", "title": "t",
           "config": {"num_blocks": pool, "block_size": BS, "free_order": order, "model": None,
                      "kv_cache_groups": [group(g) for g in groups],
                      "scheduler": {"max_num_batched_tokens": CHUNK, "max_num_seqs": 1}},
           "steps": steps}
    _, tl = run(load_text(json.dumps(doc), "t.yaml"), payloads=False)
    assert tl.error is None, tl.error
    last = tl.step(len(tl) - 1)
    assert all(r.status == "finished" for r in last.requests.values())
    return {"queries": last.stats.queries, "hits": last.stats.hits, "evictions": last.stats.evictions}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("order", ["split", "append"])
def test_sequence_mode_equals_the_engine_run_request_by_request(layout, order):
    groups = LAYOUTS[layout]
    rng = random.Random(f"{layout}-{order}")
    for _ in range(3):
        reqs = trace(rng, 14)
        need = max(len(groups) * -(-r.input_length // BS) for r in reqs)
        for pool in (need + 2, need + 12, 4 * need):
            got = replay_sequence(reqs, block_size=BS, pool_blocks=pool, free_order=order,
                                  kv_cache_groups=groups, chunk_tokens=CHUNK)
            want = engine_replay(reqs, groups, pool, order)
            assert got["rejected"] == 0 and got["requests"] == len(reqs)
            assert {k: got[k] for k in want} == want, (layout, order, pool)
            assert 0 <= got["limited_hits"]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_ceiling_is_a_pool_that_never_evicts(layout):
    groups = LAYOUTS[layout]
    rng = random.Random(layout)
    reqs = trace(rng, 40)
    big = replay_sequence(reqs, block_size=BS, pool_blocks=100_000, kv_cache_groups=groups,
                          chunk_tokens=CHUNK)
    assert big["evictions"] == 0
    seen = []
    ceil = ceiling(reqs, block_size=BS, kv_cache_groups=groups,
                   on_request=lambda i, hit, ok: seen.append((i, hit, ok)))
    assert ceil == {k: big[k] for k in ("queries", "hits", "limited_hits")}
    # told of every request, as the one-group ceiling and the replays are
    assert [i for i, _, _ in seen] == list(range(len(reqs))) and all(ok for _, _, ok in seen)
    assert sum(hit for _, hit, _ in seen) == ceil["hits"]
    # one full-attention group: the fast ceiling, unchanged (no limited_hits)
    assert set(ceiling(reqs, block_size=BS)) == {"queries", "hits"}


def test_a_window_limits_the_hit_and_the_point_says_by_how_much():
    """A cached 300-token prompt, then the same first 200 tokens: full attention holds 192 of
    them, but under retention 0 the window kept only blocks near the first prompt's end."""
    first = TraceRequest(0, 300, 0, [1], 1)
    half = TraceRequest(1, 200, 0, [1], 2)
    window = replay_sequence([first, half], block_size=BS, pool_blocks=200,
                             kv_cache_groups=(FA, SW), chunk_tokens=CHUNK)
    dense = replay_sequence([first, half], block_size=BS, pool_blocks=200)
    assert dense["hits"] == 192 and "limited_hits" not in dense
    assert window["hits"] == 0 and window["limited_hits"] == 192
    # chunked-local keeps every block: no limit
    chunked = replay_sequence([first, half], block_size=BS, pool_blocks=200,
                              kv_cache_groups=(FA, CHUNKED), chunk_tokens=CHUNK)
    assert chunked["hits"] == 192 and chunked["limited_hits"] == 0


def test_a_long_prompt_fits_where_a_dense_model_of_the_same_groups_would_not():
    """Admission counts a window's group at its cap, and the window frees its blocks chunk by
    chunk: a 4,000-token prompt (250 blocks a group) fits 300 blocks with a window, not with two
    full-attention groups."""
    long = [TraceRequest(0, 4000, 0, list(range(8)), 1)]
    windowed = replay_sequence(long, block_size=BS, pool_blocks=300, kv_cache_groups=(FA, SW),
                               chunk_tokens=CHUNK)
    dense = replay_sequence(long, block_size=BS, pool_blocks=300, kv_cache_groups=(FA, FA),
                            chunk_tokens=CHUNK)
    assert (windowed["requests"], windowed["rejected"]) == (1, 0)
    assert (dense["requests"], dense["rejected"]) == (0, 1)


def test_timed_mode_runs_the_groups_too():
    """Requests far apart and output_length 0 (one sampled token) run alone: timed mode then
    caches exactly what sequence mode does, with the same chunk size."""
    rng = random.Random(7)
    reqs = [r._replace(timestamp=10_000.0 * i) for i, r in enumerate(trace(rng, 20))]
    for groups in LAYOUTS.values():
        seq = replay_sequence(reqs, block_size=BS, pool_blocks=60, kv_cache_groups=groups,
                              chunk_tokens=CHUNK)
        timed = replay_timed(reqs, block_size=BS, pool_blocks=60, kv_cache_groups=groups,
                             max_num_batched_tokens=CHUNK, max_num_seqs=CHUNK)
        assert {k: timed[k] for k in ("queries", "hits", "evictions", "limited_hits")} == \
            {k: seq[k] for k in ("queries", "hits", "evictions", "limited_hits")}
