"""The public contract of ``python -m blockviz json`` (scenario-format.md): every named field,
with its type, and the seed walkthrough's states as vLLM 0.33 runs them."""
from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class Block(_Open):
    id: StrictInt
    is_null: StrictBool
    ref_cnt: StrictInt
    hash: StrictStr | None
    token_ids: list[StrictInt]


class Req(_Open):
    status: Literal["waiting", "running", "preempted", "finished"]
    block_table: list[StrictInt]
    num_prompt_tokens: StrictInt
    num_tokens: StrictInt
    num_computed_tokens: StrictInt
    token_ids: list[StrictInt]


class Stored(_Open):
    type: Literal["BlockStored"]
    block_hashes: list[StrictInt]
    parent_block_hash: StrictInt | None
    token_ids: list[StrictInt]
    block_size: StrictInt
    lora_id: StrictInt | None
    medium: Literal["GPU"]
    lora_name: StrictStr | None
    extra_keys: list | None
    group_idx: StrictInt
    kv_cache_spec_kind: Literal["full_attention", "sliding_window", "chunked_local_attention"]
    kv_cache_spec_sliding_window: StrictInt | None
    locality: None
    ownership: None
    session_id: None
    lookahead_token_ids: None


class Removed(_Open):
    type: Literal["BlockRemoved"]
    block_hashes: list[StrictInt]
    medium: Literal["GPU"]
    group_idx: StrictInt
    locality: None
    ownership: None


class Cleared(_Open):
    type: Literal["AllBlocksCleared"]


class Stats(_Open):
    num_free_blocks: StrictInt
    usage: float
    prefix_cache_queries: StrictInt
    prefix_cache_hits: StrictInt
    external_queries: StrictInt
    external_hits: StrictInt


class Frame(_Open):
    op: StrictStr
    free_queue: list[StrictInt]


class Snapshot(_Open):
    index: StrictInt
    event: dict | None
    note: dict | None
    caption: dict | None
    blocks: list[Block]
    free_queue: list[StrictInt]
    hash_table: dict[str, list[StrictInt]]
    requests: dict[str, Req]
    waiting: list[StrictStr]
    running: list[StrictStr]
    kv_events: list[Stored | Removed | Cleared]
    stats: Stats
    frames: list[Frame]


class Document(_Open):
    scenario: StrictStr
    config: dict
    steps: list[Snapshot]


@pytest.fixture(scope="module")
def six(cli, root):
    p = cli("json", str(root / "scenarios" / "six-blocks.yaml"))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_six_blocks_document_matches_the_contract(six):
    doc = Document.model_validate(six)
    assert doc.scenario == "six-blocks"
    assert [s.index for s in doc.steps] == list(range(len(doc.steps)))
    assert six["steps"][0]["event"] is None
    for s in doc.steps:
        assert len(s.blocks) == six["config"]["num_gpu_blocks"] == 7
        assert s.blocks[0].is_null and s.blocks[0].ref_cnt == 0 and s.blocks[0].hash is None
        # hash_table is the inverse of the blocks' hashes, ids in insertion order
        by_hash: dict[str, list[int]] = {}
        for b in s.blocks:
            if b.hash is not None:
                by_hash.setdefault(b.hash, []).append(b.id)
        assert {h: sorted(ids) for h, ids in s.hash_table.items()} == by_hash
        if s.frames:
            assert s.frames[-1].free_queue == s.free_queue
        assert s.stats.num_free_blocks == len(s.free_queue)
        assert s.stats.usage == pytest.approx(1 - len(s.free_queue) / 6)


def test_six_blocks_walkthrough_rows(six):
    """vllm-semantics.md's table, as vLLM 0.33 runs the seed's walkthrough."""
    steps = six["steps"]
    ev = [s["event"] for s in steps]
    assert ev[1]["arrive"]["id"] == "A" and ev[2]["arrive"]["id"] == "B"
    assert ev[3] == {"finish": "A"} and ev[4] == {"finish": "B"}
    rows = {  # after: (free queue, ref_cnt of 1..6, tables)
        1: ([4, 5, 6], [1, 1, 1, 0, 0, 0], {"A": [1, 2, 3]}),
        2: ([5, 6], [2, 2, 1, 1, 0, 0], {"A": [1, 2, 3], "B": [1, 2, 4]}),
        3: ([3, 5, 6], [1, 1, 0, 1, 0, 0], {"A": [], "B": [1, 2, 4]}),
        4: ([4, 3, 5, 6, 2, 1], [0] * 6, {"A": [], "B": []}),
        6: ([3, 5, 6], [1, 1, 0, 1, 0, 0], {"A": [], "B": [], "C": [1, 2, 4]}),
        7: ([4, 3, 5, 6, 2, 1], [0] * 6, {"A": [], "B": []}),   # rewound: C never happened
        8: ([], [1] * 6, {"A": [], "B": [], "D": [4, 3, 5, 6, 2, 1]}),
    }
    for i, (queue, refs, tables) in rows.items():
        s = steps[i]
        assert s["free_queue"] == queue, i
        assert [b["ref_cnt"] for b in s["blocks"][1:]] == refs, i
        assert {r: v["block_table"] for r, v in s["requests"].items()} == tables, i
    h1 = "52a7f141c609"
    h2 = "bee96bce54f5"
    for i in (1, 2, 3, 4, 6, 7):
        table = steps[i]["hash_table"]
        assert sorted(table.values()) == [[1], [2]], i
        assert [h[:12] for h in table] == [h1, h2], i
    # C's hit took blocks 1 and 2 out of the queue before its new block: frames show 4 3 5 6
    touch = [f for f in steps[6]["frames"] if f["op"] == "touch"]
    assert touch and touch[0]["free_queue"] == [4, 3, 5, 6]
    # D evicts H2 then H1 (queue order), one BlockRemoved each, then one BlockStored of six
    events = steps[8]["kv_events"]
    assert [e["type"] for e in events] == ["BlockRemoved", "BlockRemoved", "BlockStored"]
    assert events[0]["block_hashes"] == [15284023028817948126]
    assert events[1]["block_hashes"] == [1882140585328457242]
    assert len(events[2]["block_hashes"]) == 6 and events[2]["parent_block_hash"] is None
    assert not any(h.startswith((h1, h2)) for h in steps[8]["hash_table"])
    stored = steps[1]["kv_events"]
    assert stored == [{**stored[0], "type": "BlockStored",
                       "block_hashes": [1882140585328457242, 15284023028817948126],
                       "parent_block_hash": None, "token_ids": [1, 2, 3, 4, 5, 6, 7, 8],
                       "block_size": 4}]


def test_requests_keep_every_arrival_and_count_tokens(six):
    s = six["steps"][4]
    a = s["requests"]["A"]
    assert a["status"] == "finished" and a["num_prompt_tokens"] == 10
    # A sampled a token at its prefill, and decoded it (sampling another) in the step that
    # admitted B: vLLM serves running requests first.
    assert a["num_tokens"] == 12 and a["num_computed_tokens"] == 11
    assert a["finish_reason"] == "stop"           # `finish` is a normal end (FINISHED_STOPPED)
    assert a["token_ids"][:8] == [1, 2, 3, 4, 5, 6, 7, 8] and len(a["token_ids"]) == 12
    assert s["stats"]["prefix_cache_queries"] == 20 and s["stats"]["prefix_cache_hits"] == 8
    st = s["stats"]
    assert (st["requests"], st["queries"], st["hits"]) == (2, 20, 8)
    assert (st["preempted_requests"], st["preempted_queries"], st["preempted_hits"]) == (0, 0, 0)


def test_each_snapshot_lists_the_engine_steps_it_ran(six):
    steps = six["steps"]
    assert steps[0]["engine_steps"] == [] and steps[3]["engine_steps"] == []   # start, a finish
    (one,) = steps[1]["engine_steps"]
    assert one["scheduled"] == {"A": 10} and one["admitted"]["A"]["local_hit_tokens"] == 0
    assert one["preempted"] == [] and one["finished"] == [] and one["token_budget"] == 8192
    (two,) = steps[2]["engine_steps"]
    assert list(two["scheduled"].items()) == [("A", 1), ("B", 2)]   # running first
    assert two["decode"] == ["A"] and two["admitted"] == {
        "B": {"local_hit_tokens": 8, "external_hit_tokens": 0, "resumed": False}}
    assert two["num_scheduled_tokens"] == 3 and set(two["sampled"]) == {"A", "B"}
    assert "teaching_only" not in steps[2]["event"]


def test_schema_command_describes_the_format(cli):
    p = cli("schema")
    assert p.returncode == 0
    schema = json.loads(p.stdout)
    assert schema["title"] == "blockviz scenario"
    assert {"id", "title", "config", "steps"} <= set(schema["properties"])
    step = schema["$defs"]["Step"]["properties"]
    for event in ("arrive", "admit", "decode", "step", "finish", "preempt",
                  "reset_prefix_cache", "checkpoint", "rewind", "note"):
        assert event in step


def test_every_step_carries_its_caption(six, root):
    """The step's one sentence beside its note: {en, zh} (either may be null), steps[0]'s from
    start_caption; a step without one says null."""
    from blockviz.scenario import load
    sc = load(root / "scenarios" / "six-blocks.yaml").scenario
    steps = six["steps"]
    assert steps[0]["caption"] == {"en": sc.start_caption.en, "zh": sc.start_caption.zh}
    for s, ev in zip(steps[1:], sc.steps):
        assert s["caption"] == {"en": ev.caption.en, "zh": ev.caption.zh}
    assert list(steps[1])[:4] == ["index", "event", "note", "caption"]
