"""KV events carry every field of vLLM 0.33's msgspec structs (vllm/distributed/kv_events.py), in
the struct's order, for every config; checked against the golden captures of vLLM's own publisher
(shared/data/vllm-kv-events, made from these lessons) where the toolkit is beside the checkout."""
from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import msgspec
import pytest

from blockviz.scenario import load_text
from blockviz.sim.contract import timeline_dict
from blockviz.sim.runner import run

ROOT = Path(__file__).resolve().parent.parent
# $BLOCKVIZ_SHARED, else ../shared beside the checkout (or beside the worktrees' folder)
SHARED = next((p for p in (os.environ.get("BLOCKVIZ_SHARED"), ROOT.parent / "shared",
                           ROOT.parent.parent / "shared") if p and Path(p).is_dir()),
              ROOT.parent / "shared")
SHARED = Path(SHARED)
CAPTURES = SHARED / "data" / "vllm-kv-events"

STORED = ("block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium",
          "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind",
          "kv_cache_spec_sliding_window", "locality", "ownership", "session_id",
          "lookahead_token_ids")
REMOVED = ("block_hashes", "medium", "group_idx", "locality", "ownership")


def _doc(text: str) -> dict:
    engine, timeline = run(load_text(text), payloads=False)
    return json.loads(json.dumps(timeline_dict("t", engine, timeline, frames=False)))


def _events(doc: dict, key: str = "kv_events") -> list[dict]:
    return [e for s in doc["steps"] for e in s[key]]


def test_every_event_has_vllms_fields_in_vllms_order():
    doc = _doc("id: t\ntitle: t\nconfig: {num_blocks: 2, block_size: 2, model: null}\nsteps:\n"
               "  - arrive: {id: A, prompt: [1, 2, 3, 4], max_tokens: 1}\n"
               "  - arrive: {id: B, prompt: [5, 6, 7, 8], max_tokens: 1}\n"
               "  - reset_prefix_cache\n")
    events = _events(doc)
    assert [e["type"] for e in events] == ["BlockStored", "BlockRemoved", "BlockRemoved",
                                           "BlockStored", "AllBlocksCleared"]
    order = {"BlockStored": STORED, "BlockRemoved": REMOVED, "AllBlocksCleared": ()}
    for e in events:
        assert list(e) == ["type", *order[e["type"]]]
    a = events[0]
    assert a["medium"] == "GPU" and a["group_idx"] == 0
    assert a["kv_cache_spec_kind"] == "full_attention"
    assert a["extra_keys"] == [None, None] and a["lora_id"] is None
    assert all(a[k] is None for k in STORED[10:])
    assert all(e["medium"] == "GPU" and e["group_idx"] == 0 and e["locality"] is None
               for e in events[1:3])


def test_lora_id_is_the_adapters_number_in_order_of_first_appearance():
    """vLLM's server gives each adapter name the next lora_int_id (1, 2, ...) as it loads it;
    events publish it as lora_id beside lora_name."""
    doc = _doc("id: t\ntitle: t\nconfig: {num_blocks: 8, block_size: 2, model: null}\nsteps:\n"
               "  - arrive: {id: A, prompt: [1, 2], lora: sql, max_tokens: 1}\n"
               "  - arrive: {id: B, prompt: [1, 2], lora: {name: chat, path: /c}, max_tokens: 1}\n"
               "  - arrive: {id: C, prompt: [7, 8], lora: sql, max_tokens: 1}\n"
               "  - arrive: {id: D, prompt: [1, 2], max_tokens: 1}\n")
    stored = [e for e in _events(doc) if e["type"] == "BlockStored"]
    assert [(e["lora_id"], e["lora_name"], e["extra_keys"]) for e in stored] == [
        (1, "sql", [["sql"]]), (2, "chat", [["chat"]]), (1, "sql", [["sql"]]),
        (None, None, [None])]


def test_the_cpu_tiers_events_are_vllms_placeholders_with_medium_cpu():
    doc = _doc("id: t\ntitle: t\nconfig: {num_blocks: 6, block_size: 4, model: null, "
               "connector: {num_blocks: 16}}\nsteps:\n"
               "  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9], max_tokens: 1}\n"
               "  - step: 2\n")
    tier = _events(doc, "tier_events")
    assert tier and all(list(e) == ["type", *STORED] for e in tier)
    assert {(e["medium"], e["group_idx"], e["kv_cache_spec_kind"], e["block_size"],
             e["parent_block_hash"]) for e in tier} == {("CPU", 0, None, 0, None)}
    assert {e["medium"] for e in _events(doc)} == {"GPU"}


# capture -> the scenario vLLM's publisher ran
GOLDEN = {"six-blocks": "scenarios/six-blocks.yaml",
          "preempt-resume": "scenarios/preempt-resume.yaml",
          "chunked-prefill": "scenarios/chunked-prefill.yaml",
          "tenants-and-lora": "scenarios/tenants-and-lora.yaml",
          "last-token-rule": "scenarios/last-token-rule.yaml",
          "pressure": "tools/vllm-diff/sched/examples/pressure.yaml",
          "chunked": "tools/vllm-diff/sched/examples/chunked.yaml",
          "reset-prefix-cache": "tools/vllm-diff/events/scenarios/reset-prefix-cache.yaml"}


def _published(name: str) -> list[dict]:
    """Every event of the capture's live stream, decoded from msgpack (fields equal to vLLM's
    default were omitted on the wire)."""
    out = []
    lines = (CAPTURES / f"{name}.jsonl").read_text().splitlines()[1:]
    for line in lines:
        msg = json.loads(line)
        if msg["src"] != "sub":
            continue
        _ts, events, _rank = msgspec.msgpack.decode(base64.b64decode(msg["frames"][2]))
        out += events
    return out


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_events_equal_vllms_published_events(name):
    if not (CAPTURES / f"{name}.jsonl").is_file():
        pytest.skip(f"no golden capture at {CAPTURES} (the toolkit sits beside the checkout)")
    path = GOLDEN[name]
    path = ROOT / path if path.startswith("scenarios/") else SHARED / path
    text = path.read_text()
    if "\ntitle:" not in text:   # the toolkit's own scenario has none
        text = text.replace("\nconfig:", "\ntitle: t\nconfig:", 1)
    engine, timeline = run(load_text(text))   # (the tiny model samples what vLLM was fed)
    ours = [{k: v for k, v in e.items() if v is not None}
            for i in range(len(timeline)) for e in timeline.step(i).kv_events]
    theirs = [{k: v for k, v in e.items() if v is not None} for e in _published(name)]
    assert ours == theirs
