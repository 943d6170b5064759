"""Forks as scenario files (blockviz.sim.fork) and the Author page's pure parts (blockviz.teach.authoring):
a fork keeps the original config and first K steps and replays to the same state; the event
builders write the documented format; snippets land at the end of the step list; uploads are
refused before parsing when too big, binary, not UTF-8 or tagged."""
from __future__ import annotations

import pytest
import yaml

from blockviz.scenario import ScenarioError, load, load_text
from blockviz.scenario.schema import MAX_FILE_BYTES
from blockviz.sim import fork as F
from blockviz.sim.runner import run
from blockviz.teach import authoring as A

from .conftest import SCENARIOS


def state(snapshot) -> tuple:
    return (snapshot.free_queue, snapshot.ref_cnt, snapshot.block_hash, snapshot.block_tokens,
            snapshot.hash_table, {r: (v.status, v.block_ids, v.token_ids) for r, v in
                                  snapshot.requests.items()})


def without_outputs(steps) -> list:
    return [s.model_copy(update={"arrive": s.arrive.model_copy(update={"output": None})})
            if s.kind == "arrive" else s for s in steps]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_a_fork_of_every_builtin_replays_to_the_same_states(path):
    loaded = load(path)
    n = len(loaded.scenario.steps)
    _, full = run(loaded)
    for k in sorted({1, n // 2, n}):
        forked = load_text(F.fork_text(loaded.scenario, k, F.fork_steps(loaded.scenario, k, full)),
                           "fork.yaml")
        assert forked.scenario.config == loaded.scenario.config       # every field, nulls included
        assert without_outputs(forked.scenario.steps) == without_outputs(loaded.scenario.steps[:k])
        assert forked.scenario.id == f"{loaded.scenario.id}-fork"
        _, b = run(forked)
        assert len(b) == k + 1
        for i in range(k + 1):
            assert state(full.step(i)) == state(b.step(i)), (k, i)


def test_a_fork_replays_with_or_without_pinned_outputs(root):
    """A request samples among its own prompt's words, so cutting free-order-split's later
    arrivals changes nothing before the cut; the fork still pins each arrival's outputs, which
    keeps it faithful even after an author edits prompts in it."""
    loaded = load(root / "scenarios" / "free-order-split.yaml")
    _, full = run(loaded)
    bare = load_text(F.fork_text(loaded.scenario, 2, F.fork_steps(loaded.scenario, 2)))
    _, b = run(bare)
    assert state(b.step(2)) == state(full.step(2))
    outputs = F.observed_outputs(loaded.scenario, full, 2)
    assert outputs and all(outputs.values())
    pinned = F.fork_steps(loaded.scenario, 2, full)
    assert [d["arrive"]["output"] for d in pinned] == [list(v) for _, v in sorted(outputs.items())]
    _, c = run(load_text(F.fork_text(loaded.scenario, 2, pinned)))
    assert state(c.step(2)) == state(full.step(2))


def test_outputs_after_a_rewind_belong_to_the_request_s_new_life(root):
    loaded = load(root / "scenarios" / "six-blocks.yaml")         # C arrives, rewind, D arrives
    _, full = run(loaded)
    outputs = F.observed_outputs(loaded.scenario, full, 8)
    assert set(outputs) == {0, 1, 5, 7}                            # A, B, C (undone later), D
    # A sampled at its prefill and again when the step admitting B decoded it; the others once
    assert {k: len(v) for k, v in outputs.items()} == {0: 2, 1: 1, 5: 1, 7: 1}


def test_model_null_and_defaults_survive_the_round_trip():
    text = """
id: nomodel
title: {en: E, zh: 中}
config: {num_blocks: 3, block_size: 2, model: null, free_order: append, hash_seed: 7}
steps:
  - arrive: {id: A, prompt: "the cat sat", lora: l1, cache_salt: s}
  - decode: {steps: 2}
  - step
  - admit
  - reset_prefix_cache
  - finish: A
"""
    loaded = load_text(text)
    doc = yaml.safe_load(F.fork_text(loaded.scenario, 6, F.fork_steps(loaded.scenario, 6)))
    assert doc["config"]["model"] is None and doc["config"]["hash_seed"] == "7"
    assert doc["steps"][0] == {"arrive": {"id": "A", "prompt": [{"text": "the cat sat"}],
                                          "lora": {"name": "l1"}, "cache_salt": "s"}}
    assert doc["steps"][1:] == [{"decode": {"steps": 2}}, {"step": 1}, "admit", "reset_prefix_cache",
                                {"finish": "A"}]
    again = load_text(F.fork_text(loaded.scenario, 6, F.fork_steps(loaded.scenario, 6)))
    assert again.scenario.steps == loaded.scenario.steps


def test_fork_doc_adds_events_and_names_the_fork():
    loaded = load(SCENARIOS[0].parent / "six-blocks.yaml")
    extra = [F.arrive_event("C", [F.same_as_part("A", 8), F.random_part(2)], max_tokens=3,
                            cache_salt="t", lora="x"),
             F.decode_event(2, ["C"]), F.step_event(1), F.step_event(3), F.finish_event(["C"]),
             F.preempt_event("C"), F.reset_event(), F.finish_event(["A", "B"])]
    doc = F.fork_doc(loaded.scenario, 4, F.fork_steps(loaded.scenario, 4) + extra)
    assert doc["title"] == {"en": "Six blocks, one prefix — fork at step 4",
                            "zh": "六个块，一个前缀 —— 从第 4 步分叉"}
    assert doc["steps"][4:] == [
        {"arrive": {"id": "C", "prompt": [{"same_as": "A", "first": 8}, {"random": 2}],
                    "max_tokens": 3, "cache_salt": "t", "lora": "x"}},
        {"decode": {"requests": ["C"], "steps": 2}}, "step", {"step": 3}, {"finish": "C"},
        {"preempt": "C"}, "reset_prefix_cache", {"finish": ["A", "B"]}]
    text = F.fork_text(loaded.scenario, 4, F.fork_steps(loaded.scenario, 4) + extra[:3])
    assert text.startswith("# Forked from scenario 'six-blocks' at step 4")
    assert len(load_text(text).scenario.steps) == 7
    with pytest.raises(ValueError):
        F.fork_steps(loaded.scenario, 99)
    assert F.fork_id("x" * 64) == "x" * 59 + "-fork" and F.fork_id("a-fork") == "a-fork"


def test_event_builders_check_what_they_can():
    assert F.tokens_part("1 2, 3") == {"tokens": [1, 2, 3]} == F.tokens_part("[1, 2, 3]")
    for bad in ("", "1 x", "70000", "-1"):
        with pytest.raises(ValueError):
            F.tokens_part(bad)
    with pytest.raises(ValueError):
        F.text_part("   ")
    with pytest.raises(ValueError):
        F.random_part(0)
    assert F.same_as_part("A") == {"same_as": "A"}
    assert F.next_request_id(["A", "B"]) == "C"
    assert F.next_request_id([chr(65 + i) for i in range(26)] + ["R27"]) == "R28"
    assert F.next_request_id(["A", "C"]) == "B"


def test_one_request_id_scheme():
    from blockviz.scenario.schema import request_id
    assert [request_id(n) for n in (1, 2, 26, 27, 100)] == ["A", "B", "Z", "R27", "R100"]
    ids = [request_id(n) for n in range(1, 500)]
    assert len(set(ids)) == len(ids)


# -- authoring ------------------------------------------------------------------------------
def test_every_snippet_keeps_the_starter_valid():
    ids, cps = A.scenario_names(load_text(A.STARTER).scenario)
    assert ids == ["A", "B"] and cps == []
    text = A.STARTER
    for kind in A.SNIPPETS:
        text = A.insert_step(text, kind, ids, ["cp1"] if kind == "rewind" else cps, live=["B"])
        if kind == "checkpoint":
            cps = ["cp1"]
    steps = load_text(text).scenario.steps
    assert [s.kind for s in steps[4:]] == ["arrive", "decode", "step", "finish", "preempt", "admit",
                                           "reset_prefix_cache", "checkpoint", "rewind", None]
    assert steps[7].args == ["B"]                                  # finish names a live request


def test_insert_step_follows_the_file_s_indentation_and_layout():
    flat = "id: x\ntitle: x\nsteps:\n- arrive: {id: A, prompt: [1, 2]}\nconfig:\n  num_blocks: 3\n"
    out = A.insert_step(flat, "finish", ["A"], [])
    assert out == ("id: x\ntitle: x\nsteps:\n- arrive: {id: A, prompt: [1, 2]}\n- finish: A\n"
                   "config:\n  num_blocks: 3\n")
    assert load_text(out).scenario.steps[-1].kind == "finish"
    none = A.insert_step("id: x\ntitle: x\n", "arrive", [], [])
    assert none.endswith("steps:\n  - arrive: {id: A, prompt: [{tokens: [1, 2, 3, 4, 5, 6, 7, 8]}, "
                         "{random: 2}], max_tokens: 8}\n")
    load_text(none)
    empty = A.insert_step("id: x\ntitle: x\nsteps: []\n", "admit", [], [])
    assert empty == "id: x\ntitle: x\nsteps:\n  - admit\n"


def test_the_reference_comes_from_the_schema():
    sections = {s.key: s for s in A.reference()}
    assert [f.name for f in sections["config"].fields][:3] == ["num_blocks", "block_size", "hash_algo"]
    num_blocks = sections["config"].fields[0]
    assert num_blocks.type == "integer 1–65536" and num_blocks.default == "6"
    assert "null block" in num_blocks.description
    arrive = {f.name: f for f in sections["event:arrive"].fields}
    assert arrive["id"].required and arrive["max_tokens"].default == "null"
    assert arrive["admit"].type == "true | false" and arrive["admit"].default == "true"
    assert sections["event:admit"].fields == ()                    # a bare word
    assert sections["event:finish"].fields[0].type.startswith("text | list of text")
    assert sections["part:random"].fields[0].type == "integer 1–1000000"
    for key, s in sections.items():
        if s.example and key.startswith("event:"):
            assert s.example.lstrip().startswith("- "), key


def test_uploads_are_refused_before_parsing_when_not_plain_data():
    ok = A.STARTER.encode()
    assert A.read_upload(ok, "a.yaml") == A.STARTER
    assert A.read_upload(b"\xef\xbb\xbf" + ok, "a.yaml") == A.STARTER      # a BOM is fine
    broken = A.read_upload(b"id: [\n", "b.yaml")                          # readable: kept
    assert broken == "id: [\n"
    for raw, words in [(b"x" * (MAX_FILE_BYTES + 1), "the limit is 1,048,576"),
                       (b"id: a\x00", "binary"), (b"id: a\x07\n", "control character"),
                       ("id: é".encode("latin-1"), "not UTF-8"),
                       (b"id: !!python/object/apply:os.system [ls]\n", "YAML tag")]:
        with pytest.raises(ScenarioError) as e:
            A.read_upload(raw, "u.yaml")
        assert words in str(e.value) and str(e.value).startswith("u.yaml")
    assert A.download_name("six-blocks") == "six-blocks.yaml"
    assert A.download_name("../../etc") == "etc.yaml" and A.download_name(None) == "scenario.yaml"


def test_new_words_in_added_events_leave_the_forked_steps_as_they_were(root):
    loaded = load(root / "scenarios" / "tenants-and-lora.yaml")
    _, full = run(loaded)
    extra = [F.arrive_event("Z", [F.text_part("zebra quokka narwhal")]), F.decode_event(2)]
    forked = load_text(F.fork_text(loaded.scenario, 3, F.fork_steps(loaded.scenario, 3, full) + extra))
    _, b = run(forked)
    for i in range(4):
        assert state(b.step(i)) == state(full.step(i)), i
    assert b.vocab.word(b.step(4).requests["Z"].token_ids[0]) == "zebra"
