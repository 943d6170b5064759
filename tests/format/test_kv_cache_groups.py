"""config.kv_cache_groups and config.prefix_cache_retention_interval (scenario-format.md, "Hybrid
models"): what vLLM 0.33 refuses is one located error before anything runs; a config without
groups prints exactly what it always did; with groups the contract gains its additions."""
from __future__ import annotations

import json

import pytest

from blockviz.scenario import ScenarioError, load_text
from blockviz.sim.contract import timeline_dict
from blockviz.sim.runner import run


def text(groups: str, retention: str = "0", extra: str = "") -> str:
    return ("id: t\ntitle: t\nconfig:\n  num_blocks: 8\n  block_size: 4\n  model: null\n"
            f"  kv_cache_groups: {groups}\n  prefix_cache_retention_interval: {retention}\n"
            f"{extra}steps: [admit]\n")


# name -> (groups, retention, line, what the column points at, path, message start)
BAD = {
    "empty list": ("[]", "0", 7, "[]", "config.kv_cache_groups", "List should have at least 1"),
    "unknown type": ("[{type: full_attention}, {type: mamba}]", "0", 7, "mamba",
                     "config.kv_cache_groups[1].type", "Input should be 'full_attention'"),
    "window below 1": ("[{type: sliding_window, sliding_window: 0}]", "0", 7, "0}",
                       "config.kv_cache_groups[0].sliding_window", "Input should be greater"),
    "chunk below 1": ("[{type: chunked_local_attention, attention_chunk_size: -2}]", "0", 7, "-2",
                      "config.kv_cache_groups[0].attention_chunk_size", "Input should be greater"),
    "window missing": ("[{type: full_attention}, {type: sliding_window}]", "0", 7,
                       "{type: sliding", "config.kv_cache_groups[1]",
                       "a sliding_window group needs `sliding_window:`"),
    "another type's field": ("[{type: full_attention, sliding_window: 8}]", "0", 7, "{type",
                             "config.kv_cache_groups[0]", "a full_attention group has no field"),
    "retention not a multiple": ("[{type: full_attention}, {type: sliding_window, "
                                 "sliding_window: 8}]", "6", 8, "6",
                                 "config.prefix_cache_retention_interval", "prefix_cache_retention"
                                 "_interval (6) must be a multiple of block_size (4)"),
    "retention without a window": ("[{type: full_attention}, {type: chunked_local_attention, "
                                   "attention_chunk_size: 8}]", "8", 8, "8",
                                   "config.prefix_cache_retention_interval",
                                   "prefix_cache_retention_interval (8) needs a sliding_window"),
    "negative retention": ("[{type: sliding_window, sliding_window: 8}]", "-4", 8, "-4",
                           "config.prefix_cache_retention_interval", "Input should be greater"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_what_vllm_refuses_is_one_located_error(name):
    groups, retention, line, at, path, message = BAD[name]
    source = text(groups, retention)
    col = source.splitlines()[line - 1].index(at) + 1
    with pytest.raises(ScenarioError) as e:
        load_text(source, "f.yaml")
    err = e.value
    assert (err.line, err.col, err.path) == (line, col, path), str(err)
    assert err.message.startswith(message), err.message
    assert str(err).startswith(f"f.yaml:{line}:{col}: {path}: ")


def test_the_cli_says_it_in_one_line_with_status_2(cli, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(text("[{type: sliding_window, sliding_window: 8}]", "6"))
    p = cli("json", str(f))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip() == (f"{f}:8:36: config.prefix_cache_retention_interval: "
                                "prefix_cache_retention_interval (6) must be a multiple of "
                                "block_size (4): vLLM rejects it")


def test_without_groups_only_0_and_null_are_valid_and_change_nothing():
    base = ("id: t\ntitle: t\nconfig: {num_blocks: 4, block_size: 2, model: null%s}\nsteps:\n"
            "  - arrive: {id: A, prompt: [1, 2, 3, 4, 5], max_tokens: 2}\n")
    docs = []
    for extra in ("", ", prefix_cache_retention_interval: 0",
                  ", prefix_cache_retention_interval: null", ", kv_cache_groups: null"):
        engine, timeline = run(load_text(base % extra))
        docs.append(json.dumps(timeline_dict("t", engine, timeline)))
    assert len(set(docs)) == 1
    doc = json.loads(docs[0])
    assert "kv_cache_groups" not in doc["config"] and "kv_cache" not in doc
    assert all("group" not in b for s in doc["steps"] for b in s["blocks"])
    assert all("block_tables" not in r for s in doc["steps"] for r in s["requests"].values())
    with pytest.raises(ScenarioError, match="needs a sliding_window KV-cache group"):
        load_text(base % ", prefix_cache_retention_interval: 2")


@pytest.mark.parametrize("retention", ["0", "null", "8"])
def test_valid_hybrid_configs_and_their_additions(retention):
    groups = "[{type: full_attention}, {type: sliding_window, sliding_window: 8}]"
    loaded = load_text(text(groups, retention).replace(
        "steps: [admit]\n", "steps:\n  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"))
    engine, timeline = run(loaded)
    doc = json.loads(json.dumps(timeline_dict("t", engine, timeline, frames=False)))
    cfg = doc["config"]
    assert cfg["kv_cache_groups"] == [{"type": "full_attention"},
                                      {"type": "sliding_window", "sliding_window": 8}]
    assert cfg["prefix_cache_retention_interval"] == json.loads(retention)
    assert doc["kv_cache"]["coordinator"] == "HybridKVCacheCoordinator"
    assert doc["kv_cache"]["managers"] == ["FullAttentionManager", "SlidingWindowManager"]
    a = doc["steps"][-1]["requests"]["A"]
    assert a["block_tables"][0] == a["block_table"] and len(a["block_tables"]) == 2
    assert {b["group"] for b in doc["steps"][-1]["blocks"] if b["hash"]} == {0, 1}
    assert all(k.endswith(("#0", "#1")) for k in doc["steps"][-1]["hash_table"])


def test_one_explicit_group_keeps_bare_keys_and_prints_the_additions():
    loaded = load_text(text("[{type: full_attention}]").replace(
        "steps: [admit]\n", "steps:\n  - arrive: {id: A, prompt: [1, 2, 3, 4, 5]}\n"))
    engine, timeline = run(loaded)
    doc = json.loads(json.dumps(timeline_dict("t", engine, timeline, frames=False)))
    last = doc["steps"][-1]
    assert doc["kv_cache"]["coordinator"] == "UnitaryKVCacheCoordinator"
    assert list(last["hash_table"]) == [b["hash"] for b in last["blocks"] if b["hash"]]
    assert last["requests"]["A"]["block_tables"] == [[1, 2]]
    assert [b["group"] for b in last["blocks"][1:3]] == [0, None]


def test_frames_write_bare_hashes_with_the_group_and_the_blocks_a_mask_left_uncached():
    """Op frames name a hash as blocks[].hash does (the bare BlockHash hex); the op's ``group``
    says whose key it was (absent: group 0). A sliding window's store under retention 0 lists
    the full blocks it did not cache (``masked``), so a reader sees what the empty BlockStored
    skipped. Without groups neither field appears."""
    groups = "[{type: full_attention}, {type: sliding_window, sliding_window: 8}]"
    steps = ("steps:\n  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],"
             " max_tokens: 1}\n  - arrive: {id: X, prompt: [21, 22, 23, 24, 25, 26, 27, 28, 29,"
             " 30, 31, 32], max_tokens: 1}\n")
    engine, timeline = run(load_text(text(groups).replace("steps: [admit]\n", steps)))
    doc = json.loads(json.dumps(timeline_dict("t", engine, timeline)))
    one = doc["steps"][1]
    caches = [f for f in one["frames"] if f["op"] == "cache"]
    blocks = {b["id"]: b for b in one["blocks"]}
    # A (13 tokens) gets tables [1, 2, 3, 4] and [5, 6, 7, 8]: full attention caches blocks 1-3;
    # the window (need 2 blocks, replay boundary 12) caches 6 and 7 and leaves 5 uncached
    (fa,), (sw,) = [[c for c in caches if c.get("group", 0) == g] for g in (0, 1)]
    assert "group" not in fa and sw["group"] == 1
    assert [len(h) for h in fa["hashes"] + sw["hashes"]] == [64] * 5
    assert fa["hashes"] == [blocks[b]["hash"] for b in fa["block_ids"]]
    assert sw["hashes"] == [blocks[b]["hash"] for b in sw["block_ids"]] == fa["hashes"][1:]
    assert sw["masked"] == [5] and "masked" not in fa and blocks[5]["hash"] is None
    assert sw["parent_hash"] is None
    # X evicts A's cached blocks: each eviction names the bare hash and the group it was under
    evicts = [f for f in doc["steps"][2]["frames"] if f["op"] == "evict"]
    assert evicts and all(len(f["hash"]) == 64 for f in evicts)
    assert {(f["hash"], f.get("group", 0)) for f in evicts} <= {
        (b["hash"], b["group"]) for b in one["blocks"] if b["hash"]}
    # one group: neither field
    engine, timeline = run(load_text(text("[{type: full_attention}]").replace("steps: [admit]\n",
                                                                             steps)))
    frames = [f for s in timeline_dict("t", engine, timeline)["steps"] for f in s["frames"]]
    assert not any("group" in f or "masked" in f for f in frames)
