"""Captions: one sentence per step, in both languages, for every built-in lesson (issue 28, "the
board teaches"), and the scenario format's `caption` / `start_caption` fields, whose mistakes the
loader reports at their line and column like any other field's."""
from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from blockviz.i18n.errors import knows
from blockviz.scenario import ScenarioError, load, load_text
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
    from blockviz.sim.fork import fork_steps, fork_text
    sc = load_text(H + "start_caption: {en: Empty., zh: 空的。}\nsteps:\n"
                   "  - arrive: {id: A, prompt: [1, 2, 3]}\n    caption: {en: A in., zh: A 进来。}\n"
                   "  - step: 1\n    caption: {en: A decodes.}\n  - finish: A\n", "f.yaml").scenario
    back = load_text(fork_text(sc, 2, fork_steps(sc, 2)), "fork.yaml").scenario
    assert back.start_caption == sc.start_caption and back.start_caption.zh == "空的。"
    assert [s.caption for s in back.steps] == [s.caption for s in sc.steps[:2]]
    assert back.steps[1].caption.zh is None


# -- every built-in lesson: one sentence a step, in both languages -------------------------
MAX_EN_WORDS = 25
MAX_ZH_UNITS = 50           # a CJK character, or a run of Latin letters/digits (an identifier), is one
WORDS = re.compile(r"[A-Za-z0-9_]+(?:[.'’/:–-][A-Za-z0-9_]+)*")


def zh_units(text: str) -> int:
    return len(CJK.findall(text)) + len(WORDS.findall(CJK.sub(" ", text)))


def captions(name: str) -> list[tuple[int, object, object]]:
    """(step, caption, note) of a lesson; step 0 is the start."""
    sc = load(SCENARIOS / f"{name}.yaml").scenario
    return [(0, sc.start_caption, sc.start_note)] + [
        (i, s.caption, s.note) for i, s in enumerate(sc.steps, 1)]


@pytest.mark.parametrize("name", LESSONS)
def test_every_step_of_every_lesson_has_one_short_sentence_in_both_languages(name):
    for i, cap, note in captions(name):
        assert cap is not None and cap.en and cap.zh, f"{name} step {i}: no caption"
        en, zh = cap.en, cap.zh
        assert len(en.split()) <= MAX_EN_WORDS, f"{name} step {i}: {len(en.split())} words"
        # one sentence: it ends once, with a full stop
        assert en.endswith(".") and not re.search(r"[.!?]\s", en), f"{name} step {i}: {en}"
        assert zh.endswith("。") and "。" not in zh[:-1] and "！" not in zh, f"{name} step {i}: {zh}"
        # the same content in 中文: present, Chinese, and of proportionate length
        assert CJK.search(zh), f"{name} step {i}"
        assert len(en.split()) * 0.8 <= zh_units(zh) <= MAX_ZH_UNITS, (name, i, zh_units(zh))
        # the same numbers, block ids and hash labels in both languages
        assert sorted(re.findall(r"\d+", en)) == sorted(re.findall(r"\d+", zh)), (name, i, en, zh)
        # the caption is not the note again, nor one of its sentences copied
        for lang in ("en", "zh"):
            c, n = cap.get(lang), note.get(lang)
            assert c not in n, f"{name} step {i} ({lang})"
            sentences = [s for s in re.split(r"(?<=[.;:。；：])\s*", n) if s]
            assert max(difflib.SequenceMatcher(None, c, s).ratio() for s in sentences) < 0.85, (
                f"{name} step {i} ({lang}) repeats a sentence of its note")


# Hash labels a caption may name though the step's state does not show them: the request has
# computed H2 (its hasher appended it) while the pool has not cached it yet.
KNOWN_TO_THE_REQUEST = {("decode-fills-block", 2): {"H2"}}


@pytest.mark.parametrize("name", LESSONS)
def test_a_caption_names_only_hashes_its_step_shows(name):
    """The labels H1, H2, ... a caption names are hashes the board shows at that step or the one
    before (pool, hash table, external tier, or the step's own ops): a caption written from the
    note alone, against a different run, would name another label."""
    from blockviz.core.ops import op_to_dict
    from blockviz.sim.runner import run
    from blockviz.teach.labels import HashLabels

    _, tl = run(load(SCENARIOS / f"{name}.yaml"), payloads=False)
    labels = HashLabels.for_timeline(tl)

    def shown(i: int) -> set[str]:
        s = tl.step(i)
        hashes = {h for h in s.block_hash if h is not None} | {h for h, _ in s.hash_table}
        hashes |= {h for h, _ in (s.external or ())}
        # a hybrid model's key is shown with its group (H3#1); the hash itself is H3
        return {labels(h) for h in hashes} | {labels.bare(h) for h in hashes}

    for i, cap, _ in captions(name):
        named = set(re.findall(r"\bH\d+(?:#\d+)?", cap.en)) | set(re.findall(r"\bH\d+(?:#\d+)?", cap.zh))
        seen = shown(i) | (shown(i - 1) if i else set()) | KNOWN_TO_THE_REQUEST.get((name, i), set())
        for op in (map(op_to_dict, tl.step_ops(i)) if i else ()):
            for key in ("hash", "hashes"):
                v = op.get(key)
                for h in ([v] if isinstance(v, str) else v or ()):
                    bare = labels.bare(bytes.fromhex(h))     # frames write the bare hash ...
                    seen |= {bare, f"{bare}#{op.get('group', 0)}"}   # ... and its group
        assert named <= seen, f"{name} step {i}: {sorted(named - seen)} not on the board"
