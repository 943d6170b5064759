"""Every built-in scenario is a test: it validates, runs to the end with check_invariants() after
every op (pool level) and after every event (block tables too), in both languages' narration."""
from __future__ import annotations

from pathlib import Path

import pytest

from blockviz.teach.labels import HashLabels
from blockviz.teach.narrate import narrate_ops

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.yaml"))


def test_there_are_lessons():
    ids = {p.stem for p in SCENARIOS}
    assert "six-blocks" in ids and len(ids) >= 9


def test_the_docs_table_lists_every_lesson_with_its_point():
    import re

    readme = (Path(__file__).resolve().parents[1] / "docs" / "scenarios.md").read_text(encoding="utf-8")
    table = readme.split("Built-in lessons (`scenarios/`):", 1)[1].split("\n\n", 2)[1]
    listed = {}
    for row in table.splitlines()[2:]:
        ids, point = row.strip("|").split("|", 1)
        for rid in re.findall(r"`([^`]+)`", ids):
            listed[rid] = point.strip()
    assert set(listed) == {p.stem for p in SCENARIOS}
    assert all(listed.values())


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_runs_to_the_end_with_invariants_after_every_op(path, run_file):
    engine, tl = run_file(path, check=True)
    assert tl.error is None, str(tl.error)
    s = engine.scenario
    assert s.id == path.stem, "a scenario's id is its file name"
    assert len(tl) == len(s.steps) + 1
    for lang in ("en", "zh"):
        assert s.title.get(lang) and s.summary is not None and s.summary.get(lang)
    labels = HashLabels.for_timeline(tl)
    for i in range(1, len(tl)):
        step = tl.step_of(i)
        if step.note is not None:
            assert step.note.en and step.note.zh, f"step {i} is narrated in both languages"
        for lang in ("en", "zh"):
            for sentence in narrate_ops(tl.step_ops(i), lang, labels, engine.vocab,
                                        engine.block_size):
                assert sentence and "{" not in sentence


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_lessons_use_only_what_vllm_s_scheduler_does(path, run_file):
    """No teaching-only form (``decode: {requests}``, ``preempt``), and no ``decode`` at all:
    a lesson steps the engine with ``arrive``, ``admit`` or ``step``, every one a real vLLM
    engine step (vllm-diff's hand-written loop admits nothing in a ``decode``, unlike vLLM)."""
    engine, tl = run_file(path, payloads=False)
    for i, step in enumerate(engine.scenario.steps, 1):
        assert step.kind not in ("decode", "preempt") and not step.teaching_only, f"step {i}"
        snap = tl.step(i)
        assert not snap.teaching_only and not any(es.teaching_only for es in snap.engine_steps)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_is_deterministic(path, run_file):
    """Same file, same run: a lesson shows the same thing every time it is opened."""
    _, a = run_file(path)
    _, b = run_file(path)
    for i in range(len(a)):
        sa, sb = a.step(i), b.step(i)
        assert sa.free_queue == sb.free_queue and sa.block_hash == sb.block_hash
        assert {r: v.token_ids for r, v in sa.requests.items()} == \
               {r: v.token_ids for r, v in sb.requests.items()}


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_later_steps_never_change_earlier_ones(path):
    """A step's outcome depends only on the file up to it: cutting the file (or appending to it,
    as an author or a fork does) leaves every earlier step exactly as it was."""
    from blockviz.scenario import load
    from blockviz.scenario.load import LoadedScenario
    from blockviz.sim.runner import run

    full = load(path)
    engine, whole = run(full)
    cut = max(1, len(full.scenario.steps) // 2)
    short = full.scenario.model_copy(update={"steps": full.scenario.steps[:cut]})
    _, part = run(LoadedScenario(short, str(path), full.marks))
    for i in range(len(part)):
        a, b = whole.step(i), part.step(i)
        assert {r: v.token_ids for r, v in a.requests.items()} == \
               {r: v.token_ids for r, v in b.requests.items()}, f"step {i}"
        assert a.block_hash == b.block_hash and a.free_queue == b.free_queue
