"""Try it yourself and self-check in the player, through AppTest.

Fork at step K, add events by form (each one runs at once), download the fork: the file is a valid
scenario with the original config that replays to the state the app shows. Self-check grades
right and wrong predictions of the three kinds, and says why."""
from __future__ import annotations

import re

from blockviz.scenario import load, load_text
from blockviz.sim.runner import run

from .conftest import ROOT, errors, file_id, successes

SIX = ROOT / "scenarios" / "six-blocks.yaml"




def state_of(snapshot) -> tuple:
    """What must be equal for two runs to be in the same state."""
    reqs = {rid: (r.status, r.block_ids, r.token_ids, r.num_computed_tokens)
            for rid, r in snapshot.requests.items()}
    return (snapshot.free_queue, snapshot.ref_cnt, snapshot.block_hash, snapshot.block_tokens,
            snapshot.hash_table, reqs, snapshot.waiting, snapshot.running)


def add_part(p, kind: str, **values) -> None:
    p.at.selectbox(key="w_fk_pk").set_value(kind)
    p.run()
    for key, value in values.items():
        widget = p.at.selectbox(key=key) if key == "w_fk_psame" else (
            p.at.text_input(key=key) if key in ("w_fk_ptok", "w_fk_ptext") else p.at.number_input(key=key))
        widget.set_value(value)
    p.click("b_fk_part")


def test_fork_two_events_download_and_replay_to_the_same_state(page):
    p = page({"scenario": "six-blocks", "step": "4"})
    p.click("b_fork")
    assert p.header() == "step 4 of 4" and p.queue() == "4 3 5 6 2 1"
    assert p.state["bv_source"] == "user"
    assert p.at.text_input(key="w_fk_id").value == "C"          # the next free id
    # event 1: C arrives with A's first 8 tokens and 2 random ones
    add_part(p, "same_as", w_fk_psame="A", w_fk_pfirst=8)
    add_part(p, "random", w_fk_prand=2)
    assert p.state["bv_fk_parts"] == [{"same_as": "A", "first": 8}, {"random": 2}]
    p.click("b_fk_add")
    assert p.header() == "step 5 of 5"
    assert "get_computed_blocks(C): walking its hash chain from the start, 2 block(s) hit" in p.html()
    assert p.queue() == "3 5 6"                                  # 1, 2 hit; 4 taken from the head
    # event 2: finish C
    p.at.selectbox(key="w_fk_kind").set_value("finish")
    p.run()
    p.at.multiselect(key="w_fk_fin").set_value(["C"])
    p.click("b_fk_add")
    assert p.header() == "step 6 of 6" and p.queue() == "4 3 5 6 2 1"
    assert any("2 event(s) added after step 4." in s for s in successes(p))
    # the download is exactly the fork's text ...
    fork = p.state["bv_fork"]
    text = fork.text
    assert p.offered("b_fk_download") == file_id(text, "application/x-yaml", "six-blocks-fork.yaml")
    # ... a scenario in the documented format with the original config ...
    loaded = load_text(text, "six-blocks-fork.yaml")
    original = load(SIX).scenario
    app_run = p.state["bv_user_run"].timeline

    def app_tokens(rid):
        r = app_run.step(len(app_run) - 1).requests[rid]
        return r.token_ids[r.num_prompt_tokens:]
    assert loaded.scenario.config == original.config
    assert [s.kind for s in loaded.scenario.steps[:4]] == [s.kind for s in original.steps[:4]]
    assert [s.note for s in loaded.scenario.steps[:4]] == [s.note for s in original.steps[:4]]
    assert "output:" in text                                   # sampled tokens are pinned
    assert [s.event_dict() for s in loaded.scenario.steps[4:]] == [
        {"arrive": {"id": "C", "prompt": [{"same_as": "A", "first": 8}, {"random": 2}],
                    "output": list(app_tokens("C")), "admit": True}},
        {"finish": "C"}]
    # ... that replays to the state the app shows, step by step
    _, timeline = run(loaded)
    app = p.state["bv_user_run"].timeline
    assert len(timeline) == len(app) == 7
    for i in range(len(app)):
        assert state_of(timeline.step(i)) == state_of(app.step(i)), i
    # and the shared prefix is the original's state at step 4
    _, orig = run(load(SIX))
    assert state_of(timeline.step(4)) == state_of(orig.step(4))


def test_a_fork_is_in_the_url_and_its_link_opens_it_at_step_0(page):
    from urllib.parse import parse_qs, urlsplit

    from blockviz.scenario.share import decode
    p = page({"scenario": "six-blocks", "step": "4"})
    p.click("b_fork")
    fork = p.state["bv_fork"]
    # the address bar carries the fork itself, as a share link does
    assert decode(p.params["s"]) == fork.text and p.params["step"] == "4"
    assert "scenario" not in p.params
    (link,) = [c.value for c in p.at.code if "?s=" in c.value]
    q = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    assert q == {"s": p.params["s"], "lang": "en"}          # the panel's link: no step
    p.at.text_input(key="w_fk_ptok").set_value("1 2 3 4 9")
    p.click("b_fk_add")
    assert p.header() == "step 5 of 5"
    assert decode(p.params["s"]) == p.state["bv_fork"].text != fork.text
    # another browser opens the fork's link: the fork, at step 0, then its added step
    other = page({"s": p.params["s"]})
    assert other.state["bv_source"] == "user" and not other.warnings()
    assert other.header() == "step 0 of 5" and other.queue() == "1 2 3 4 5 6"
    other.press("last")
    assert other.header() == "step 5 of 5" and other.queue() == p.queue()
    # back to the original: the URL names the lesson again
    p.click("b_fk_back")
    assert p.params["scenario"] == "six-blocks" and "s" not in p.params


def test_a_refused_event_keeps_the_fork_and_says_why(page):
    p = page({"scenario": "six-blocks", "step": "2"})
    p.click("b_fork")
    p.at.selectbox(key="w_fk_kind").set_value("preempt")
    p.run()
    assert p.at.selectbox(key="w_fk_pre").options == ["A", "B"]
    p.click("b_fk_add")                                         # preempt B (the last running)
    assert p.header() == "step 3 of 3" and "B is preempted" in p.html()
    p.at.selectbox(key="w_fk_kind").set_value("arrive")
    p.run()
    p.at.text_input(key="w_fk_id").set_value("A")               # a duplicate id
    add_part(p, "tokens", w_fk_ptok="1 2 3")
    p.click("b_fk_add")
    assert any("Not added" in e and "duplicate request id 'A'" in e for e in errors(p))
    assert p.header() == "step 3 of 3" and len(p.state["bv_fork"].extra) == 1
    add_part(p, "tokens", w_fk_ptok="1 2 x")                    # not a token id
    assert any("'x' is not a token id" in e for e in errors(p))
    p.click("b_fk_undo")
    assert p.header() == "step 2 of 2" and not p.state["bv_fork"].extra
    p.click("b_fk_back")
    assert p.state["bv_source"] == "builtin" and p.header() == "step 0 of 8"


def test_fork_edit_on_the_author_page(page):
    p = page({"scenario": "six-blocks", "step": "3"})
    p.click("b_fork")
    p.at.selectbox(key="w_fk_kind").set_value("reset_prefix_cache")
    p.run()
    p.click("b_fk_add")
    assert "reset_prefix_cache refused" in p.html()             # B still holds blocks
    text = p.state["bv_fork"].text
    p.click("b_fk_author")
    assert p.on_page("author")
    assert p.editor_text() == text
    assert "Valid: “Six blocks, one prefix — fork at step 3”, 4 steps" in p.html()


def _result(p) -> str:
    m = [h for h in (e.proto.body for e in p.at.html) if 'data-correct="' in h]
    return m[0] if m else ""


def test_self_check_grades_right_and_wrong_predictions(page):
    p = page({"scenario": "six-blocks", "step": "3"})
    p.at.toggle(key="w_selfcheck").set_value(True)
    p.run()
    assert "Predict step 4: B finishes" in p.html()
    assert p.at.button_group(key="w_sc_kind").value == "queue"
    # (a) the free queue after the step: wrong order, then right
    p.at.text_input(key="w_sc_queue").set_value("4 3 5 6 1 2")
    p.click("b_sc_check")
    res = _result(p)
    assert 'data-correct="false"' in res and "position 5 from the head is block 2, not 1" in res
    assert "Blocks 2, 1: → to the tail" in res                 # why: the engine's own narration
    p.at.text_input(key="w_sc_queue").set_value("head → 4 → 3 → 5 → 6 → 2 → 1 → tail")
    p.click("b_sc_check")
    assert 'data-correct="true"' in _result(p) and "Right: after this step the free queue reads" in _result(p)
    assert any("0 of 1 right so far" in c.value for c in p.at.caption)   # the first try counts
    p.at.text_input(key="w_sc_queue").set_value("4 three")
    p.click("b_sc_check")
    assert any("“three” is not a block id" in w for w in p.warnings())
    # reveal, then (b) which blocks hit: step 6 is C arriving with A's prefix
    p.click("b_sc_show")
    assert p.header() == "step 4 of 8" and p.board()["goto"]["step"] == 4   # Python moved the board
    assert p.board()["answer"] == {"step": 4, "ids": [4, 3, 5, 6, 2, 1]}    # outlined on the board
    p.jump(5)
    assert "Predict step 6: C arrives" in p.html()
    assert p.at.button_group(key="w_sc_kind").value == "hits"   # the question that suits the step
    p.at.multiselect(key="w_sc_hits").set_value([1])
    p.click("b_sc_check")
    assert 'data-correct="false"' in _result(p) and "Block(s) 2 hit too." in _result(p)
    p.at.multiselect(key="w_sc_hits").set_value([2, 1])
    p.click("b_sc_check")
    assert 'data-correct="true"' in _result(p)
    assert "get_computed_blocks(C)" in _result(p)
    # (c) which block the next allocation takes: after step 8 (D takes every block) none
    p.jump(7)
    p.at.button_group(key="w_sc_kind").set_value("victim")
    p.run()
    p.at.selectbox(key="w_sc_victim").set_value(4)
    p.click("b_sc_check")
    assert 'data-correct="false"' in _result(p) and "the free queue is empty" in _result(p)
    p.at.selectbox(key="w_sc_victim").set_value(None)
    p.click("b_sc_check")
    assert 'data-correct="true"' in _result(p)
    # at the last step there is nothing left to predict
    p.click("b_last")
    assert "nothing left to predict" in p.html()
    assert re.search(r"Lesson done: \d of 3 predictions right", " ".join(c.value for c in p.at.caption))


def test_self_check_speaks_chinese(page):
    p = page({"scenario": "six-blocks", "step": "3", "lang": "zh"})
    p.at.toggle(key="w_selfcheck").set_value(True)
    p.run()
    assert "预测第 4 步：B 结束" in p.html()
    p.at.text_input(key="w_sc_queue").set_value("4 3 5 6 2 1")
    p.click("b_sc_check")
    assert "答对了：这一步之后空闲队列是 4 3 5 6 2 1" in _result(p) and "规则" in _result(p)
    assert p.at.button(key="b_sc_check").label == "核对"
    assert p.at.button(key="b_fork").label == "自己动手试试"


def test_add_and_run_takes_the_part_being_typed_when_none_was_added(page):
    p = page({"scenario": "six-blocks", "step": "4"})
    p.click("b_fork")
    p.at.text_input(key="w_fk_ptok").set_value("1 2 3 4 5")
    p.click("b_fk_add")
    assert p.header() == "step 5 of 5"
    assert p.state["bv_fork"].extra[0]["arrive"]["prompt"] == [{"tokens": [1, 2, 3, 4, 5]}]
    p.click("b_fk_undo")
    assert p.header() == "step 4 of 4"
    p.click("b_fk_add")                                          # the input was kept: same again
    assert p.header() == "step 5 of 5"


def test_training_grades_a_whole_lesson(page):
    """Self-check as training: every step of six-blocks predicted in turn (the question that suits
    the step, answered from the timeline, one of them wrong on purpose), revealed, and the lesson
    scored at its end."""
    from blockviz.teach import selfcheck as SC
    from blockviz.ui import data
    p = page({"scenario": "six-blocks", "step": "0"})
    p.at.toggle(key="w_selfcheck").set_value(True)
    p.run()
    tl = data.builtin_run("six-blocks").timeline
    for k in range(1, 9):
        kind = p.at.button_group(key="w_sc_kind").value
        want = SC.expected(tl, k, kind)
        if k == 4:                                     # one wrong answer
            want = tuple(reversed(want)) if kind == "queue" else (6,)
        if kind == "queue":
            p.at.text_input(key="w_sc_queue").set_value(" ".join(map(str, want)))
        elif kind == "hits":
            p.at.multiselect(key="w_sc_hits").set_value(list(want))
        else:
            p.at.selectbox(key="w_sc_victim").set_value(want[0] if want else None)
        p.click("b_sc_check")
        assert ('data-correct="false"' if k == 4 else 'data-correct="true"') in _result(p), k
        p.click("b_sc_show")
        assert p.header() == f"step {k} of 8"
    assert any("Lesson done: 7 of 8 predictions right at the first try (8 steps)." in c.value
               for c in p.at.caption)


def test_self_check_asks_which_blocks_leave_a_window_on_a_hybrid_model(page):
    p = page({"scenario": "sliding-window", "step": "3"})
    p.at.toggle(key="w_selfcheck").set_value(True)
    p.run()
    kinds = p.at.button_group(key="w_sc_kind")
    assert "which blocks leave a window" in kinds.options and kinds.value == "window"   # suits step 4
    p.at.multiselect(key="w_sc_window").set_value([6])
    p.click("b_sc_check")
    res = _result(p)
    assert 'data-correct="false"' in res and "Block(s) 2 leave a window too." in res
    p.at.multiselect(key="w_sc_window").set_value([2])
    p.click("b_sc_check")
    res = _result(p)
    assert 'data-correct="true"' in res and "remove_skipped_blocks(A): block 2 left" in res
    # a one-group lesson does not offer it
    q = page({"scenario": "six-blocks", "step": "3"})
    q.at.toggle(key="w_selfcheck").set_value(True)
    q.run()
    assert "which blocks leave a window" not in q.at.button_group(key="w_sc_kind").options
