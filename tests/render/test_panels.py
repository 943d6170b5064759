"""The player's panels, rendered from real snapshots of the six-block walkthrough (and a few small
scenario files): what a learner must be able to read off each panel at each step."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from blockviz.core.ops import FreeHead, FreeTail
from blockviz.render.blocks import blocks_html, legend_html
from blockviz.render.hash_table import hash_table_html
from blockviz.render.markers import step_kinds
from blockviz.render.narration import did_html, note_html, step_header_html
from blockviz.render.queue import queue_html
from blockviz.render.requests import requests_html
from blockviz.render.theme import css, esc
from blockviz.sim.step import Step
from blockviz.teach.labels import HashLabels


class Elements(HTMLParser):
    """Every start tag as (tag, {attr: value}), in document order."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.items: list[tuple[str, dict]] = []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.items.append((tag, dict(attrs)))

    def with_class(self, cls: str) -> list[dict]:
        return [a for _, a in self.items if cls in (a.get("class") or "").split()]


def classes_by_block(markup: str, cls: str) -> dict[int, set[str]]:
    return {int(a["data-block"]): set(a["class"].split())
            for a in Elements(markup).with_class(cls)}


def blocks_at(tl, labels, i):
    v = tl.step(i)
    return blocks_html(v, labels=labels, vocab=tl.vocab, block_size=tl.block_size,
                       changed=v.changes.blocks)


def queue_at(tl, labels, i, lang="en"):
    v = tl.step(i)
    return queue_html(v, labels=labels, lang=lang, to_head=v.changes.to_head,
                      to_tail=v.changes.to_tail)


# -- free queue ----------------------------------------------------------------------------
def test_queue_after_b_finishes_reads_4_3_5_6_2_1_head_to_tail(six, six_labels):
    html = queue_at(six, six_labels, 4)
    order = [int(a["data-block"]) for a in Elements(html).with_class("bv-q")]
    assert order == [4, 3, 5, 6, 2, 1]
    # head and tail words frame the list, head first
    assert html.index(">head<") < html.index('data-block="4"') < html.index('data-block="1"') \
        < html.index(">tail<")


def test_queue_marks_what_went_to_the_head_and_what_went_to_the_tail(six, six_labels):
    cells = classes_by_block(queue_at(six, six_labels, 4), "bv-q")
    assert "bv-to-head" in cells[4]
    assert {"bv-to-tail", "bv-cached"} <= cells[2] and {"bv-to-tail", "bv-cached"} <= cells[1]
    assert not ({"bv-to-head", "bv-to-tail"} & (cells[3] | cells[5] | cells[6]))
    assert "bv-victim" in cells[4] and "bv-victim" not in cells[3]


def test_queue_marks_nothing_in_a_step_that_frees_nothing(six, six_labels):
    # step 5 is a checkpoint: nothing moved, so nothing is marked
    cells = classes_by_block(queue_at(six, six_labels, 5), "bv-q")
    assert all(not ({"bv-to-head", "bv-to-tail"} & c) for c in cells.values())
    moved = Step(index=1, ops=(FreeHead((3,)), FreeTail((2, 1))), before=lambda: Step(index=0))
    assert (moved.changes.to_head, moved.changes.to_tail) == (frozenset({3}), frozenset({2, 1}))


def test_long_queue_is_cut_with_a_count(big):
    labels = HashLabels.for_timeline(big)
    s = big.step(0)
    html = queue_html(s, labels=labels, head_cells=10, tail_cells=5)
    order = [int(a["data-block"]) for a in Elements(html).with_class("bv-q")]
    assert order == list(range(1, 11)) + list(range(4091, 4096))
    assert "4,080 more" in html


def test_empty_queue_says_so(six, six_labels):
    s = six.step(8)        # D took every block
    assert s.free_queue == ()
    assert "(empty)" in queue_html(s, labels=six_labels)


# -- GPU blocks ----------------------------------------------------------------------------
def test_changed_blocks_are_outlined_and_only_those(six, six_labels):
    cards = classes_by_block(blocks_at(six, six_labels, 4), "bv-card")
    assert {b for b, c in cards.items() if "bv-changed" in c} == {1, 2, 4}
    cards = classes_by_block(blocks_at(six, six_labels, 1), "bv-card")
    assert {b for b, c in cards.items() if "bv-changed" in c} == {1, 2, 3}


def test_card_colours_have_fixed_meanings(six, six_labels):
    cards = classes_by_block(blocks_at(six, six_labels, 4), "bv-card")
    assert "bv-null" in cards[0]
    assert {"bv-cached", "bv-free"} <= cards[1] and {"bv-cached", "bv-free"} <= cards[2]
    assert "bv-cached" not in cards[3] and "bv-free" in cards[3]
    assert "bv-victim" in cards[4] and sum("bv-victim" in c for c in cards.values()) == 1
    cards = classes_by_block(blocks_at(six, six_labels, 2), "bv-card")
    assert "bv-free" not in cards[1] and "bv-free" in cards[5]


def test_card_shows_id_ref_count_hash_label_and_tokens(six, six_labels):
    html = blocks_at(six, six_labels, 2)
    card1 = html[html.index('data-block="1"'):html.index('data-block="2"')]
    assert '<span class="bv-id" data-bv="block-id">1</span>' in card1
    assert '<span class="bv-refk">ref_cnt</span> <span class="bv-refn" data-bv="ref"><b>2</b></span>' in card1
    assert '<span class="bv-hash">H1</span>' in card1
    assert "1 2 3 4" in card1
    assert card1.count('class="bv-on"') == 4          # a full block: four filled slots
    card3 = html[html.index('data-block="3"'):html.index('data-block="4"')]
    # A's last two prompt tokens, and the token it decoded in the step that admitted B
    assert card3.count('class="bv-on"') == 3


def test_legend_names_every_colour_in_both_languages():
    en, zh = legend_html("en"), legend_html("zh")
    for word in ("cached", "not cached", "free", "null", "changed in this step", "next allocation takes it",
                 "next cached prefix to be evicted"):
        assert word in en
    assert "本步变化" in zh and "已登记 hash" in zh


# -- hash table ----------------------------------------------------------------------------
def test_hash_table_shows_the_chain_parent_to_child(six, six_labels):
    v = six.step(1)
    html = hash_table_html(v.hash_table, labels=six_labels, state=v, added=v.changes.hashes_added)
    rows = Elements(html).items
    hashes = [a["data-hash"] for tag, a in rows if tag == "tr" and "data-hash" in a]
    assert hashes == ["H1", "H2"]
    h2 = html[html.index('data-hash="H2"'):]
    assert "└─" in h2 and '<td class="bv-muted">H1</td>' in h2     # H2 hangs under H1
    assert html.count("bv-tag-new") == 2                           # both cached in this step


def test_hash_table_strikes_the_hashes_evicted_in_this_step(six, six_labels):
    v = six.step(8)
    html = hash_table_html(v.hash_table, labels=six_labels, state=v, added=v.changes.hashes_added,
                           removed=v.changes.hashes_removed)
    gone = [a["data-hash"] for a in Elements(html).with_class("bv-row-gone")]
    assert gone == ["H1", "H2"]
    assert len(v.hash_table) == 6
    rows = [a["data-hash"] for tag, a in Elements(html).items if tag == "tr" and "data-hash" in a]
    assert rows[:2] == gone and len(rows) == 8        # above the table's six: where the eye starts


def test_duplicates_are_visible(dup):
    labels = HashLabels.for_timeline(dup)
    v = dup.step(2)
    html = hash_table_html(v.hash_table, labels=labels, state=v)
    row = html[html.index('data-hash="H2"'):]
    row = row[:row.index("</tr>")]
    assert "duplicate ×2" in row
    assert row.count('class="bv-b bv-local"') == 2
    assert [ids for h, ids in v.hash_table if labels(h) == "H2"] == [(2, 4)]


def test_long_chains_do_not_indent_off_the_page(big):
    labels = HashLabels.for_timeline(big)
    v = big.step(1)                           # S: a chain of 128 hashes
    html = hash_table_html(v.hash_table, labels=labels, state=v)
    indents = [len(m) for m in re.findall(r'<span class="bv-tree">([^<]*)</span>', html)]
    assert max(indents) <= 3 * 6 + 4 and len(indents) == 60    # first 60 rows, then a count
    assert "68 more" in html


# -- requests --------------------------------------------------------------------------------
def test_request_block_table_marks_hits_new_blocks_and_pending_tokens(six):
    v = six.step(2)
    html = requests_html(v, fresh=v.changes.fresh, changed=v.changes.requests)
    b_row = html[html.index('data-request="B"'):]
    cells = [(a.get("class"), a.get("title")) for a in Elements(b_row).with_class("bv-b")][:3]
    assert cells[0] == ("bv-b bv-local", "local hit") and cells[1] == ("bv-b bv-local", "local hit")
    assert cells[2] == ("bv-b bv-changed", "new")                # block 4: new, taken this step
    assert "10 of 11 tokens computed · 1 pending" in b_row
    assert html.index('data-request="A"') < html.index('data-request="B"')   # running order


def test_finished_requests_have_no_blocks(six):
    html = requests_html(six.step(4))
    assert html.count("bv-st-finished") == 2 and html.count("no blocks") == 2


def test_no_requests_yet(six):
    assert "No requests yet." in requests_html(six.step(0))


# -- frames (step into) ----------------------------------------------------------------------
def test_frames_show_the_state_after_each_op(six):
    frames = six.frames(1)
    kinds = [f.op.kind for f in frames]
    j_pop, j_cache = kinds.index("popleft"), kinds.index("cache")
    v = frames[j_pop]
    assert v.op.kind == "popleft" and v.changes.blocks == {1, 2, 3}
    assert v.ref_cnt[1:4] == (1, 1, 1) and v.free_queue == (4, 5, 6)
    assert v.hash_table == () and v.changes.fresh == {1, 2, 3}
    v = frames[j_cache]
    assert len(v.hash_table) == 2 and len(v.changes.hashes_added) == 2
    assert v.changes.blocks == {1, 2}
    # before the forward pass: allocated and hashed, but no tokens written yet
    assert v.block_tokens[3] == ()


def test_frames_of_free_mark_head_and_tail_separately(six):
    frames = six.frames(4)
    kinds = [f.op.kind for f in frames]
    v = frames[kinds.index("free_head")]
    assert v.changes.to_head == {4} and not v.changes.to_tail and v.free_queue[0] == 4
    v = frames[kinds.index("free_tail")]
    assert v.changes.to_tail == {2, 1} and v.free_queue == (4, 3, 5, 6, 2, 1)


def test_step_without_ops_has_no_frames(six):
    v = six.step(0, 0)
    assert v.num_frames == 0 and v.op is None


# -- markers, header, narration ----------------------------------------------------------------
def test_step_kinds_for_the_walkthrough(six):
    kinds = [step_kinds(six.step_ops(i)) for i in range(len(six))]
    assert kinds[0] == frozenset()
    assert kinds[1] == {"allocate"}
    assert kinds[2] == {"hit", "allocate"}
    assert kinds[3] == {"free"} and kinds[4] == {"free"}
    assert kinds[8] == {"allocate", "evict"}


def test_header_and_narration_in_both_languages(six, six_labels):
    assert "step 4 of 8" in step_header_html(4, 8, "B finish", "en")
    assert "第 4 步 / 共 8 步" in step_header_html(4, 8, "B 结束", "zh")
    assert "op 3 of 9" in step_header_html(1, 8, "A arrives", "en", frame=(2, 9))
    html = note_html("B finishes.", "en") + did_html(["free_blocks …"], "en")
    assert "What the engine did" in html and "B finishes." in html
    err = note_html(None, "en", error="file:3:1: boom")
    assert 'role="alert"' in err and "The run stopped here: file:3:1: boom" in err


def test_stylesheet_scales_up_in_presenter_mode():
    assert "--bv-scale: 1.0" in css(False) and "--bv-scale: 1.3" in css(True)
    assert css(False).startswith("<style>") and css(True).endswith("</style>")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_queue_words_follow_the_language(six, six_labels, lang):
    html = queue_at(six, six_labels, 4, lang)
    assert (">head<" in html) == (lang == "en") and (">队首<" in html) == (lang == "zh")


# -- the engine step's schedule and the teaching-only badge (the player and the export) ---------
def _sched_items(markup: str) -> list[str]:
    m = re.search(r'<ul class="bv-sched" data-bv="schedule">(.*?)</ul>', markup)
    return re.findall(r"<li>(.*?)</li>", m.group(1)) if m else []


def test_the_step_that_admits_b_also_decodes_a_and_says_so(six, six_labels):
    from blockviz.render.narration import engine_did_html
    # six-blocks step 2: vLLM serves the running A first (one decode token), then admits B with
    # its 8-token hit and 2 new tokens: 3 of the 8,192-token budget
    en = engine_did_html(six[2], "en", six_labels, six.vocab, six.block_size)
    assert _sched_items(en) == ["A: 1 decode token · B: 2 new (8 hit) · budget 3/8192"]
    zh = engine_did_html(six[2], "zh", six_labels, six.vocab, six.block_size)
    assert _sched_items(zh) == ["A：解码 1 个 token · B：新 2 个 token（命中 8） · 预算 3/8192"]
    # the schedule comes before the op sentences, and a finish runs no engine step
    assert en.index('data-bv="schedule"') < en.index('class="bv-did"')
    assert _sched_items(engine_did_html(six[3], "en", six_labels, six.vocab, six.block_size)) == []
    assert "bv-teaching" not in en


def test_a_teaching_only_step_is_badged_in_the_player_and_the_export():
    from blockviz.render.narration import engine_did_html
    from blockviz.render.step import build_panels
    from blockviz.scenario.load import load_text
    from blockviz.sim.runner import run
    text = ("id: t\ntitle: {en: t, zh: t}\nconfig: {num_blocks: 8, block_size: 4}\nsteps:\n"
            "  - arrive: {id: A, prompt: [{tokens: [1, 2, 3, 4, 5]}]}\n"
            "  - arrive: {id: B, prompt: [{tokens: [9, 8, 7]}]}\n"
            "  - decode: {requests: [A]}\n")
    _, tl = run(load_text(text, "t.yaml"))
    labels = HashLabels.for_timeline(tl)
    assert tl[3].teaching_only and not tl[2].teaching_only
    for lang, words in (("en", esc("vLLM's scheduler would not do this")),
                        ("zh", "vLLM 的调度器不会这样做")):
        badged = engine_did_html(tl[3], lang, labels, tl.vocab, tl.block_size)
        assert 'class="bv-teaching"' in badged and words in badged
        assert "bv-teaching" not in engine_did_html(tl[2], lang, labels, tl.vocab, tl.block_size)
        # only A was scheduled: B, running too, got nothing in that step
        assert _sched_items(badged)[0].startswith("A")
        assert "B" not in _sched_items(badged)[0]
        shown = build_panels(tl, tl.step(3), lang, labels=labels)
        assert words in shown.why and words in shown.caption     # on the board: beside the caption
        assert "bv-teaching-tag" in shown.caption
        assert "bv-teaching" not in build_panels(tl, tl.step(2), lang, labels=labels).caption


@pytest.mark.parametrize("lang, more", [("en", "… 76 more"), ("zh", "… 还有 76 个")])
def test_a_long_engine_list_is_cut_with_a_count(lang, more):
    """A big pool's step can run a hundred ops; the board's dense view shows the first 24
    sentences and how many more (the list was ~100 items, 10-15 KB of a step's HTML)."""
    from blockviz.render.narration import did_html
    sentences = [f"op {i}" for i in range(100)]
    html = did_html(sentences, lang, max_items=24)
    items = re.findall(r"<li[^>]*>([^<]*)</li>", html)
    assert items[:24] == sentences[:24] and items[24:] == [more]
    exactly = did_html(sentences[:24], lang, max_items=24)             # as many as shown: no line
    assert re.findall(r"<li[^>]*>([^<]*)</li>", exactly) == sentences[:24]
    assert len(re.findall(r"<li", did_html(sentences, lang))) == 100          # uncut by default


def test_the_dense_board_cuts_the_engine_list(big):
    from blockviz.render.step import COMPACT, build_panels
    labels = HashLabels.for_timeline(big)
    step = max(range(len(big)), key=lambda i: len(big.step_ops(i)))
    full = build_panels(big, big.step(step), "en", labels=labels)
    cut = build_panels(big, big.step(step), "en", labels=labels, compact=True)
    def sentences(html):                # the list of what the engine did (not the schedule)
        return html.split('class="bv-did"', 1)[1].count("<li")
    n = sentences(full.why)
    assert n > COMPACT["did"] + 1, n
    assert sentences(cut.why) == COMPACT["did"] + 1 and f"{n - COMPACT['did']} more" in cut.why
    # the ops panel too: its first lines, then how many more
    ops = len(big.step(step).ops)
    from blockviz.render.pseudocode import MAX_OP_LINES
    assert full.ops.count('data-bv="op"') >= min(ops, MAX_OP_LINES)
    assert ops <= MAX_OP_LINES or f"{ops - MAX_OP_LINES} more ops" in full.ops
    shown = cut.ops.count('data-bv-index=')
    assert shown <= COMPACT["ops"] + COMPACT["ops"] // 3 and f"{ops - COMPACT['ops']} more ops" in cut.ops


def test_a_step_of_tens_of_thousands_of_ops_writes_a_bounded_panel(monkeypatch):
    """A 200-byte text (one request, decode 10,000 steps on a pool it outgrows: preempted and
    recomputed) ran ~12,000 ops an event; its board wrote every op line, every sentence and a
    4,000-chip line per lookup: 20 CPU-seconds of the server's for one preview. Counted here: the
    op lines and sentences written are the panel's caps, a chip list stops at MAX_CHIPS."""
    from blockviz.render import pseudocode as P
    from blockviz.render.narration import MAX_SCHEDULE_LINES
    from blockviz.render.step import build_panels
    from blockviz.scenario.load import load_text
    from blockviz.sim.runner import run
    from blockviz.teach import narrate as N
    text = ("id: long\ntitle: long\nconfig: {num_blocks: 64, block_size: 4, model: null}\nsteps:\n"
            "  - arrive: {id: A, prompt: [{random: 200}], max_tokens: 100000}\n"
            "  - decode: {steps: 3000}\n")
    _, tl = run(load_text(text, "long.yaml"))
    s = tl.step(len(tl) - 1)
    assert len(s.ops) > 3 * P.MAX_OP_LINES and len(s.engine_steps) > MAX_SCHEDULE_LINES
    lines, said = [0], [0]
    op_line, describe = P._op_line, N.describe_op
    monkeypatch.setattr(P, "_op_line", lambda *a: (lines.__setitem__(0, lines[0] + 1), op_line(*a))[1])
    monkeypatch.setattr(N, "describe_op", lambda *a: (said.__setitem__(0, said[0] + 1), describe(*a))[1])
    p = build_panels(tl, s, "en", labels=HashLabels.for_timeline(tl), compact=True)
    assert lines[0] <= 40 and said[0] <= 24                     # COMPACT's ops and did
    lines[0] = 0
    p = build_panels(tl, s, "en", labels=HashLabels.for_timeline(tl))
    assert lines[0] == P.MAX_OP_LINES
    assert f"{len(s.ops) - P.MAX_OP_LINES} more ops" in p.ops
    assert p.why.count("<li") < MAX_SCHEDULE_LINES + len(s.ops)      # the schedule is cut too
    assert f"{len(s.engine_steps) - MAX_SCHEDULE_LINES} more" in p.why
    chips = P._ids(range(1, 101))
    assert chips.count("<i ") == P.MAX_CHIPS and chips.endswith(f"… +{100 - P.MAX_CHIPS}")
