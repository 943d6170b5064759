"""The board's data (blockviz.render.board) and the marks it draws: every step's panels from the one
step renderer, in a string pool; windows for long runs; the dense view's cells; frames on request;
the next allocation and the next cached prefix to be evicted told apart; who holds a block."""
from __future__ import annotations

import json
import re

import pytest

from blockviz.render import board as B
from blockviz.render.blocks import blocks_html, next_marks
from blockviz.render.step import build_panels, holders
from blockviz.scenario import load
from blockviz.scenario.load import load_text
from blockviz.sim.runner import run
from blockviz.teach.labels import HashLabels


@pytest.fixture(scope="module")
def six_run(root):
    loaded = load(root / "scenarios" / "six-blocks.yaml")
    _, tl = run(loaded)
    from blockviz.render.markers import step_kinds
    labels = HashLabels.for_timeline(tl)
    kinds = [step_kinds(tl.step_ops(i)) for i in range(len(tl))]
    return B.BoardRun(tl, labels, kinds, {lg: loaded.scenario.title.get(lg) for lg in ("en", "zh")})


def panel(d: B.BoardData, lang: str, k: int, key: str) -> str:
    return d.strings[d.steps[lang][k - d.lo][key]]


def test_every_step_in_both_languages_from_the_one_step_renderer(six_run):
    d = B.board_data(six_run, langs=["en", "zh"])
    assert (d.num_steps, d.lo, d.hi) == (9, 0, 8) and d.langs == ["en", "zh"]
    for k in range(9):
        p = build_panels(six_run.timeline, six_run.timeline.step(k), "zh", labels=six_run.labels,
                         title=six_run.titles["zh"])
        assert panel(d, "zh", k, "queue") == p.queue and panel(d, "zh", k, "blocks") == p.blocks
        assert panel(d, "zh", k, "table") == p.table and panel(d, "zh", k, "ops") == p.ops
        assert panel(d, "zh", k, "caption") == p.caption and panel(d, "zh", k, "why") == p.why
    assert 'data-queue="4 3 5 6 2 1"' in panel(d, "en", 4, "queue")
    assert len(d.strings) == len(set(d.strings))                  # each string once in the pool
    sent = json.loads(d.to_json())
    assert "frames" not in sent and "goto" not in sent             # no step in the data
    assert sent["steps"]["en"][4]["queue"] == d.steps["en"][4]["queue"]   # each field by name


def test_frames_ship_only_when_asked_and_walk_the_ops(six_run):
    d = B.board_data(six_run, langs=["en"], frames=True)
    frames = d.frames["en"]
    assert [len(f) for f in frames] == [six_run.timeline.step_num_ops(i) for i in range(9)]
    third = frames[1][2]
    assert "free_block_queue.popleft_n(n)" in d.strings[third["code"]]
    assert 'data-queue="4 5 6"' in d.strings[third["queue"]]
    assert "get_new_blocks: takes blocks 1, 2, 3" in d.strings[third["caption"]]   # its sentence
    assert "why" not in third and "ops" not in third               # the step's, not the op's
    assert "requests" in third                                     # the requests are the op's own


def test_timeline_marks_and_events(six_run):
    d = B.board_data(six_run, langs=["en"])
    assert d.marks[1] == "a" and "h" in d.marks[2] and "e" in d.marks[8]
    assert d.events["en"][4] == "B finishes"
    assert set(d.mark_colours) == set("ahxefp")


def test_a_long_run_ships_a_window_around_the_step():
    text = ("id: long\ntitle: {en: long, zh: long}\nconfig: {num_blocks: 8, block_size: 2}\nsteps:\n"
            + "".join(f"  - arrive: {{id: R{i}, prompt: [{{tokens: [{i}, {i + 1}, {i + 2}]}}]}}\n"
                      f"  - finish: R{i}\n" for i in range(260)))
    _, tl = run(load_text(text, "long.yaml"))
    br = B.BoardRun(tl, HashLabels.for_timeline(tl), [frozenset()] * len(tl), {"en": "long"})
    assert len(tl) == 521 > B.FULL_STEPS
    lo, hi = B.window(br, 300)
    assert hi - lo + 1 == B.WINDOW and lo <= 300 <= hi
    assert B.window(br, 0)[0] == 0 and B.window(br, 520)[1] == 520
    assert B.window(br, 300, whole=True) == (0, 520)
    d = B.board_data(br, langs=["en"], around=300)
    assert (d.lo, d.hi) == (lo, hi) and len(d.steps["en"]) == B.WINDOW
    assert len(d.marks) == 521                                     # the timeline is whole


def test_a_big_pool_is_dense_with_a_cell_per_block():
    text = ("id: big\ntitle: {en: big, zh: big}\nconfig: {num_blocks: 40, block_size: 2}\nsteps:\n"
            "  - arrive: {id: A, prompt: [{tokens: [1, 2, 3, 4, 5]}]}\n  - finish: A\n")
    _, tl = run(load_text(text, "big.yaml"))
    br = B.BoardRun(tl, HashLabels.for_timeline(tl), [frozenset()] * len(tl), {"en": "big"})
    d = B.board_data(br, langs=["en"], frames=True)
    assert d.dense and d.no_frames and d.frames is None
    after = d.cells[2]
    assert len(after["cells"]) == 41 and after["cells"][0] == "n"
    assert after["cells"][1:3] == "cc" and after["cells"][3] == "f"   # A's two full blocks stay cached
    assert after["victim"] == 3 and after["evict"] == 2               # free, no hash first; then H2's block
    assert "blocks" not in d.steps["en"][2]                            # no cards


def test_next_allocation_and_next_cached_prefix_are_told_apart(six_run):
    tl, labels = six_run.timeline, six_run.labels
    s4 = tl.step(4)
    assert next_marks(s4) == (4, 2)            # 4 is taken next; H2's block 2 is evicted first
    html = blocks_html(s4, labels=labels, lang="en")
    card2 = re.search(r'<div class="[^"]*" data-block="2">.*?</div></div>', html).group(0)
    assert "bv-evict-next" in card2 and "evicts next" in card2
    card4 = re.search(r'<div class="[^"]*" data-block="4">', html).group(0)
    assert "bv-victim" in card4 and "bv-evict-next" not in card4
    s8 = tl.step(8)
    assert next_marks(s8) == (None, None)      # an empty queue: nothing to take, nothing to evict


def test_cards_show_ref_count_changes_and_holders(six_run):
    tl, labels = six_run.timeline, six_run.labels
    v = tl.step(2)                             # B arrives and hits A's blocks 1 and 2
    assert holders(v)[1] == ("A", "B")
    html = build_panels(tl, v, "en", labels=labels).blocks
    card1 = re.search(r'data-block="1">(.*?)</div></div>', html, flags=re.S).group(1)
    assert '<span class="bv-was">1</span>→<b class="bv-now">2</b>' in card1 and "A B" in card1
    card5 = re.search(r'data-block="5">(.*?)</div></div>', html, flags=re.S).group(1)
    assert "bv-was" not in card5               # unchanged: the count alone


def test_a_caption_per_step_and_the_note_behind_why(six_run):
    """Each step's one sentence is the scenario's caption (step 0: start_caption); the note and the
    engine's sentences are behind "why?", not on the board."""
    tl, labels = six_run.timeline, six_run.labels
    for k in range(len(tl)):
        s = tl.step(k)
        p = build_panels(tl, s, "en", labels=labels)
        assert s.caption is not None and s.caption.get("en") in html_text(p.caption)
        assert s.note.get("en")[:40] in html_text(p.why) and s.note.get("en")[:40] not in p.caption
    zh = build_panels(tl, tl.step(4), "zh", labels=labels)
    assert tl.step(4).caption.get("zh") in html_text(zh.caption)


def test_a_scenario_without_captions_says_its_notes_first_sentence():
    text = ("id: plain\ntitle: {en: plain, zh: plain}\nconfig: {num_blocks: 4, block_size: 2}\nsteps:\n"
            "  - arrive: {id: A, prompt: [{tokens: [1, 2, 3]}]}\n"
            "    note: {en: 'A arrives first. Then a long story follows.', zh: '甲到了。后面很长。'}\n"
            "  - finish: A\n")
    _, tl = run(load_text(text, "plain.yaml"))
    labels = HashLabels.for_timeline(tl)
    assert html_text(build_panels(tl, tl.step(1), "en", labels=labels).caption) == "A arrives first."
    assert html_text(build_panels(tl, tl.step(1), "zh", labels=labels).caption) == "甲到了。"
    assert html_text(build_panels(tl, tl.step(2), "en", labels=labels).caption) == "A finishes"


def test_the_ops_panel_is_one_line_per_op_in_vllms_names(six_run):
    """Each op one line: vLLM's call and its effect, numbered as step-into walks them, linked to
    its blocks, the whole sentence in its title; ref counts as they went (1→2, 1→0)."""
    tl, labels = six_run.timeline, six_run.labels
    p = build_panels(tl, tl.step(2), "en", labels=labels)
    lines = re.findall(r'<li class="bv-opl[^"]*" data-bv="op" data-bv-index="(\d+)"[^>]*>(.*?)</li>', p.ops)
    assert [int(i) for i, _ in lines] == list(range(len(tl.step(2).ops)))
    text = [html_text(x) for _, x in lines]
    assert "touch(1 2) ref 1→2" in text[3]
    assert text[2].startswith("3get_computed_blocks(B) hit 1 2 (8 tokens)")
    assert 'data-block="1"' in lines[3][1]                          # hover-linked to block 1
    four = html_text(build_panels(tl, tl.step(4), "en", labels=labels).ops)
    assert "free_blocks(4 2 1) ref 1→0" in four and "prepend_n(4) no hash → head" in four
    assert "finish_requests(B) FINISHED_STOPPED" in four
    eight = html_text(build_panels(tl, tl.step(8), "en", labels=labels).ops)
    assert "_maybe_evict_cached_block(2) H2 leaves the hash table" in eight
    six = html_text(build_panels(tl, tl.step(6), "en", labels=labels).ops)
    assert "touch(1 2) ref 0→1 · leave the queue" in six
    # a run of six writes has a folded line too (hidden until the board needs it)
    d8 = build_panels(tl, tl.step(8), "en", labels=labels).ops
    folded = re.search(r'<li class="bv-opl bv-opg"[^>]*hidden>(.*?)</li>', d8).group(1)
    assert html_text(folded).startswith("8–136 × execute_model D")
    assert d8.count('data-bv-member="1"') == 6


def test_markup_for_tests(six_run):
    """Every block id and ref count, every request row with vLLM's status, lower case."""
    tl, labels = six_run.timeline, six_run.labels
    p = build_panels(tl, tl.step(4), "en", labels=labels)
    assert p.blocks.count('data-bv="block-id"') == 7 and p.blocks.count('data-bv="ref"') == 6
    assert re.search(r'data-bv="ref">\s*<span class="bv-was">1</span>→<b class="bv-now">0</b>', p.blocks)
    assert 'data-bv-request="A" data-bv-status="finished_stopped"' in p.requests
    assert 'data-bv-request="B" data-bv-status="finished_stopped"' in p.requests
    p2 = build_panels(tl, tl.step(2), "en", labels=labels)
    assert 'data-bv-request="B" data-bv-status="running"' in p2.requests


def html_text(h: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", h)).replace("&gt;", ">").replace(
        "&lt;", "<").replace("&amp;", "&").replace("&#x27;", "'").strip()
