"""Self-check grading (blockviz.teach.selfcheck): pure functions over a recorded timeline and an answer."""
from __future__ import annotations

import pytest

from blockviz.scenario import load, load_text
from blockviz.sim.runner import run
from blockviz.teach.labels import HashLabels
from blockviz.teach.selfcheck import (
    check,
    expected,
    grade_queue,
    grade_set,
    grade_victim,
    has_admission,
    hit_blocks,
    parse_ids,
)


@pytest.fixture(scope="module")
def six(root):
    _, timeline = run(load(root / "scenarios" / "six-blocks.yaml"))
    return timeline


@pytest.mark.parametrize("text, ids", [
    ("4 3 5 6 2 1", (4, 3, 5, 6, 2, 1)),
    ("4,3, 5;6", (4, 3, 5, 6)),
    ("[4, 3]", (4, 3)),
    ("head → 4 → 3 → tail", (4, 3)),
    ("4 -> 3 > 5", (4, 3, 5)),
    ("队首 4、3，5 队尾", (4, 3, 5)),
    ("blocks 1 and 2".replace(" and ", " "), (1, 2)),
    ("", ()), ("none", ()), ("  empty ", ()), ("无", ()),
])
def test_parse_ids_reads_what_learners_type(text, ids):
    assert parse_ids(text) == ids


@pytest.mark.parametrize("text", ["4 three", "1.5", "#", "4 x 5", "12345678"])
def test_parse_ids_names_what_is_not_an_id(text):
    with pytest.raises(ValueError):
        parse_ids(text)


def test_queue_grades_order_missing_extra_and_duplicates():
    want = (4, 3, 5, 6, 2, 1)
    assert grade_queue(want, want, "en")[0]
    ok, verdict, details = grade_queue((4, 3, 5, 6, 1, 2), want, "en")
    assert not ok and "reads 4 3 5 6 2 1 (head first); you said 4 3 5 6 1 2" in verdict
    assert details == ["The right blocks, in another order: position 5 from the head is block 2, not 1."]
    ok, _, details = grade_queue((4, 3, 5, 6, 2), want, "en")
    assert not ok and details == ["You left out block(s) 1: they are free after this step."]
    ok, _, details = grade_queue((4, 3, 5, 6, 2, 1, 7), want, "en")
    assert details == ["Block(s) 7 are not in the free queue after this step."]
    ok, _, details = grade_queue((4, 4, 3, 5, 6, 2, 1), want, "en")
    assert details == ["Block(s) 4 appear twice; a block is in the queue at most once."]
    assert grade_queue((), (), "en")[0]
    assert "（无）" in grade_queue((1,), (), "zh")[1]


def test_hits_are_a_set_and_none_is_an_answer():
    assert grade_set([2, 1], [1, 2], "en") == (True, "Right: block(s) 1 2 hit in the prefix cache.", [])
    assert grade_set([], [], "en")[1] == "Right: no block hits in this step."
    ok, verdict, details = grade_set([1, 3], [1, 2], "en")
    assert not ok and details == ["Block(s) 2 hit too.", "Block(s) 3 did not hit."]
    ok, verdict, _ = grade_set([5], [], "en")
    assert not ok and verdict == "Not quite: no block hits in this step; you said 5."


def test_victim_is_the_head_or_nothing():
    assert grade_victim(4, 4, "en")[0]
    ok, verdict, details = grade_victim(3, 4, "en")
    assert not ok and "block 4 is at the head" in verdict and details == ["You said block 3."]
    assert grade_victim(None, None, "en")[0]
    ok, _, details = grade_victim(2, None, "en")
    assert not ok and details == ["You said block 2."]
    assert grade_victim(None, 4, "zh")[2] == ["你的答案是“没有”。"]


def test_expected_answers_come_from_the_timeline(six):
    assert expected(six, 4, "queue") == (4, 3, 5, 6, 2, 1)
    assert expected(six, 4, "victim") == (4,)
    assert expected(six, 6, "hits") == (1, 2)                 # C hits A's prefix on free blocks
    assert expected(six, 2, "hits") == (1, 2)                 # B shares A's blocks
    assert expected(six, 1, "hits") == ()
    assert expected(six, 8, "victim") == ()                   # D took every block
    assert has_admission(six, 6) and not has_admission(six, 4)
    with pytest.raises(ValueError):
        expected(six, 1, "colour")


def test_a_lookup_whose_allocation_fails_hits_nothing():
    text = """
id: hol
title: t
config: {num_blocks: 3, block_size: 2, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5]}
  - finish: A
  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9]}
"""
    _, tl = run(load_text(text))
    ops = tl.step_ops(3)
    assert any(op.kind == "lookup" and op.block_ids for op in ops)  # it found A's blocks ...
    assert any(op.kind == "alloc_failed" for op in ops)             # ... but could not allocate
    assert hit_blocks(ops) == () and expected(tl, 3, "hits") == ()


def test_check_grades_and_explains_with_the_engine_s_narration(six):
    labels = HashLabels.for_timeline(six)
    g = check(six, 4, "queue", (4, 3, 5, 6, 1, 2), "en", labels)
    assert not g.correct and g.expected == (4, 3, 5, 6, 2, 1) and g.answer == (4, 3, 5, 6, 1, 2)
    assert g.why[0].startswith("The rule: allocation takes blocks from the head")
    assert "Block 4: no hash, can never hit → to the head, reused first." in g.why
    g = check(six, 6, "hits", (2, 1, 2), "en", labels)
    assert g.correct and g.answer == (1, 2)
    assert any(w.startswith("get_computed_blocks(C)") for w in g.why)
    g = check(six, 8, "victim", (), "zh", labels)
    assert g.correct and g.verdict.startswith("答对了") and "惰性淘汰" in " ".join(g.why)
    g = check(six, 4, "queue", (4, 3, 5, 6, 2, 1), "en", labels, free_order="append")
    assert g.why[0].startswith("The rule (classic order")
    with pytest.raises(ValueError):
        check(six, 0, "queue", (), "en")
    with pytest.raises(ValueError):
        check(six, 9, "queue", (), "en")
    with pytest.raises(ValueError):
        check(six, 4, "victim", (1, 2), "en")


def test_the_next_prefix_to_be_evicted_is_the_first_cached_block_from_the_head(six):
    labels = HashLabels.for_timeline(six)
    # after B finishes (step 4) the queue is 4 3 5 6 2 1: 4, 3, 5, 6 have no hash, 2 holds H2
    assert expected(six, 4, "evict") == (2,) and expected(six, 4, "victim") == (4,)
    assert expected(six, 8, "evict") == ()                    # D took every block
    g = check(six, 4, "evict", (4,), "en", labels)
    assert not g.correct and "block 2 is the first block from the head" in g.verdict
    assert "You said block 4." in g.details
    assert g.why[0].startswith("The rule: allocation takes the free queue from the head")
    right = check(six, 4, "evict", (2,), "zh", labels)
    assert right.correct and "块 2 是从空闲队列队首数起第一个还带 hash 的块" in right.verdict
    assert check(six, 8, "evict", (), "en", labels).correct


# -- hybrid models: which blocks leave a window ------------------------------------------------
@pytest.fixture(scope="module")
def window(root):
    _, timeline = run(load(root / "scenarios" / "sliding-window.yaml"))
    return timeline


def test_the_window_question_is_asked_only_where_a_group_has_a_window(six, window, root):
    from blockviz.teach.selfcheck import QUESTIONS, questions
    assert questions(window) == QUESTIONS and "window" in QUESTIONS
    assert "window" not in questions(six)
    _, full = run(load_text("id: t\ntitle: t\nconfig: {num_blocks: 4, block_size: 2, model: null, "
                            "kv_cache_groups: [{type: full_attention}, {type: full_attention}]}\n"
                            "steps: [{arrive: {id: A, prompt: [1, 2, 3]}}]\n"), payloads=False)
    assert "window" not in questions(full)


def test_the_window_answer_is_the_blocks_the_null_block_replaced(window, root):
    from blockviz.teach.selfcheck import default_question, window_blocks
    assert [expected(window, i, "window") for i in range(1, 9)] == \
        [(), (), (), (2,), (4,), (6,), (), (7,)]
    assert [default_question(window, i) for i in (1, 2, 4, 6)] == ["hits", "queue", "window", "window"]
    _, gemma = run(load(root / "scenarios" / "gemma-five-to-one.yaml"), payloads=False)
    assert expected(gemma, 3, "window") == (1, 2, 3, 4, 5)
    # a hit's null padding hands nothing back
    assert window_blocks(gemma.step_ops(7)) == ()


def test_the_window_question_is_graded_and_explained(window):
    g = check(window, 4, "window", [2], "en")
    assert g.correct and g.verdict == "Right: the windows hand back block(s) 2."
    assert any("remove_skipped_blocks" in w for w in g.why[:1])           # the rule
    assert any(w.startswith("[group 1, sliding window 8] remove_skipped_blocks(A): block 2 left")
               for w in g.why)                                          # the engine's words
    g = check(window, 6, "window", [6, 2], "en")
    assert not g.correct and g.details == ("Block(s) 2 stay where they are.",)
    g = check(window, 3, "window", [], "zh")
    assert g.correct and g.verdict == "答对了：这一步没有块滑出窗口。"
    assert "不对" in check(window, 3, "window", [5], "zh").verdict
    # the hits question says the rule of several groups
    assert "every group" in check(window, 1, "hits", [], "en").why[0]
