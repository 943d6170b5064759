"""Captions: one sentence per step, in both languages, for every built-in lesson (issue 28, "the
board teaches"), and the scenario format's `caption` / `start_caption` fields, whose mistakes the
loader reports at their line and column like any other field's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from blockviz.i18n.errors import knows
from blockviz.scenario import ScenarioError, load_text
from blockviz.scenario.schema import MAX_CAPTION_CHARS, json_schema

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
LESSONS = sorted(p.stem for p in SCENARIOS.glob("*.yaml"))

H = "id: t\ntitle: {en: T}\nconfig: {num_blocks: 6, block_size: 4, model: null}\n"
CJK = re.compile(r"[\u4e00-\u9fff]")


# -- the format ------------------------------------------------------------------------------
def test_caption_and_start_caption_load_beside_the_notes():
    text = H + ("start_caption: {en: Six free blocks., zh: 六个空闲块。}\n"
                "steps:\n"
                "  - arrive: {id: A, prompt: [1, 2, 3]}\n"
                "    note: {en: The long story., zh: 长的说明。}\n"
                "    caption: {en: A takes block 1., zh: A 拿走块 1。}\n"
                "  - caption: Only a caption.\n")
    sc = load_text(text, "f.yaml").scenario
    assert sc.start_caption.get("en") == "Six free blocks." and sc.start_caption.get("zh") == "六个空闲块。"
    a, narration = sc.steps
    assert a.kind == "arrive" and a.note.en == "The long story."
    assert a.caption.get("zh") == "A 拿走块 1。"
    assert narration.kind is None and narration.note is None
    assert narration.caption.get("en") == narration.caption.get("zh") == "Only a caption."
    assert narration.event_dict() == {"note": True}
    # a caption is narration, not an event: the JSON contract's `event` is unchanged
    assert a.event_dict() == {"arrive": {"id": "A", "prompt": [{"tokens": [1, 2, 3]}],
                                          "admit": True}}


def test_the_json_schema_describes_both_fields():
    schema = json_schema()
    assert "start_caption" in schema["properties"]
    assert "caption" in schema["$defs"]["Step"]["properties"]
    assert schema["$defs"]["Caption"]["properties"]["en"]["anyOf"][0]["maxLength"] == MAX_CAPTION_CHARS


BAD = {
    "unknown language": ("steps:\n  - step: 1\n    caption: {en: ok, fr: non}\n",
                         "f.yaml:6:23: steps[0].caption.fr: unknown field 'fr'"),
    "not text": ("start_caption: 5\nsteps: [admit]\n", "f.yaml:4:16: start_caption: "),
    "no language": ("steps:\n  - step: 1\n  - caption: {}\n",
                    "f.yaml:6:14: steps[1].caption: give the text in at least one language"),
    "bare": ("steps:\n  - caption:\n", "f.yaml:5:5: steps[0]: `caption` needs an argument"),
    "too long": ("steps:\n  - caption: {en: \"" + "x" * (MAX_CAPTION_CHARS + 1) + "\"}\n",
                 f"f.yaml:5:19: steps[0].caption.en: String should have at most {MAX_CAPTION_CHARS}"),
    "empty": ("steps:\n  - step: 1\n    caption: {zh: \"\"}\n",
              "f.yaml:6:19: steps[0].caption.zh: String should have at least 1 character"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_caption_is_reported_at_its_line_and_column_in_both_languages(name):
    body, where = BAD[name]
    with pytest.raises(ScenarioError) as e:
        load_text(H + body, "f.yaml")
    assert str(e.value).startswith(where), str(e.value)
    assert knows(e.value.message), f"no Chinese for: {e.value.message}"
    zh = e.value.localized("zh")
    assert CJK.search(zh) and zh.startswith(where.split(": ")[0])


def test_a_fork_keeps_the_captions():
    from blockviz.sim.fork import fork
    sc = load_text(H + "start_caption: {en: Empty., zh: 空的。}\nsteps:\n"
                   "  - arrive: {id: A, prompt: [1, 2, 3]}\n    caption: {en: A in., zh: A 进来。}\n"
                   "  - step: 1\n    caption: {en: A decodes.}\n  - finish: A\n", "f.yaml").scenario
    back = load_text(fork(sc, 2), "fork.yaml").scenario
    assert back.start_caption == sc.start_caption and back.start_caption.zh == "空的。"
    assert [s.caption for s in back.steps] == [s.caption for s in sc.steps[:2]]
    assert back.steps[1].caption.zh is None
