"""The Author page through AppTest: a valid edit previews and opens in the player as the session's
own scenario; an invalid edit shows the located error beside the text and keeps the last good
preview; uploads are refused over the size limit, with a YAML tag, or not UTF-8; snippets and the
gallery fill the editor; the download offers exactly the editor's text; nothing leaks between
sessions; every label follows the language switch."""
from __future__ import annotations

import re

from blockviz.scenario.schema import MAX_FILE_BYTES
from blockviz.teach.authoring import STARTER

from .conftest import ROOT, errors, file_id, successes

SMALL = """\
id: tiny
title: {en: "Tiny test", zh: "小测试"}
config: {num_blocks: 3, block_size: 2, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3]}
  - arrive: {id: B, prompt: [{same_as: A, first: 2}, {tokens: [9]}]}
  - finish: A
"""

BAD = SMALL.replace("  - finish: A", "  - finish: Z")          # line 7: Z never arrived




def author(page, params=None):
    p = page(params)
    p.goto("author")
    assert p.on_page("author")
    return p


def edit(p, text: str):
    return p.edit(text)


def error_box(p) -> str:
    boxes = [h for h in (e.proto.body for e in p.at.html) if h.startswith('<div class="bv bv-errbox"')]
    return boxes[0] if boxes else ""


def test_opens_with_the_starter_valid_and_previewed(page):
    p = author(page)
    assert p.editor_text() == STARTER
    assert "Valid: “My scenario”, 4 steps" in p.html()
    assert p.header() == "step 4 of 4"           # the preview opens at the end
    assert not p.params                           # the player's link does not follow here


def test_a_valid_edit_previews_and_opens_in_the_player(page):
    p = author(page)
    edit(p, SMALL)
    assert "Valid: “Tiny test”, 3 steps, 3 blocks × 2 tokens." in p.html()
    assert p.header() == "step 3 of 3"
    assert p.state["bv_author_good"][0] == SMALL
    p.click("b_open_player")
    assert p.on_page("player")
    assert p.state["bv_source"] == "user"
    assert p.header() == "step 3 of 3" and "Tiny test" in p.html()   # where the preview was
    assert p.at.selectbox(key="w_scenario").value == "__user__"
    assert p.params["step"] == "3" and "s" in p.params   # its link: the scenario in the URL
    assert p.queue() == "2"                       # A freed block 2 (B still holds 1 and 3)
    p.click("b_first")
    assert p.header() == "step 0 of 3" and p.queue() == "1 2 3"
    # back to a built-in from the sidebar
    p.at.selectbox(key="w_scenario").set_value("six-blocks")
    p.run()
    assert p.header() == "step 0 of 8" and p.params["scenario"] == "six-blocks"


def test_an_invalid_edit_shows_the_located_error_and_keeps_the_last_good_preview(page):
    p = author(page)
    edit(p, SMALL)
    good_run = p.state["bv_author_good"][1]
    edit(p, BAD)
    box = error_box(p)
    assert "request &#x27;Z&#x27; is used before it arrives" in box
    assert "line 7, column 13" in box and "steps[2].finish" in box
    assert 'class="bv-bad" data-line="7"' in box           # the line is highlighted
    assert "- finish: Z" in box                              # ... and shown
    assert "The preview below still shows the last valid version." in box
    assert p.state["bv_author_good"][1] is good_run          # kept, not re-run
    assert p.header() == "step 3 of 3" and "Tiny test" in p.html()
    # a YAML syntax error is located too
    edit(p, SMALL.replace("config: {num_blocks: 3", "config: {num_blocks: [3"))
    assert "YAML syntax error" in error_box(p) and "line 3" in error_box(p)
    # fixing it previews again
    edit(p, SMALL.replace("Tiny test", "Tiny again"))
    assert not error_box(p) and "Tiny again" in p.html()


def test_an_event_the_state_does_not_allow_is_located_in_the_preview(page):
    p = author(page)
    edit(p, SMALL + "  - preempt: A\n")                        # A has finished
    box = error_box(p)
    assert "Valid, but the run stops at step 4" in box and 'data-line="8"' in box
    assert p.header() == "step 3 of 3"                         # the steps that ran are previewed


def test_uploads_over_the_limit_with_a_tag_or_not_utf8_are_refused(page):
    p = author(page)
    before = p.editor_text()
    up = p.at.file_uploader(key="w_upload")
    up.set_value(("big.yaml", b"# " + b"x" * MAX_FILE_BYTES, "application/x-yaml"))
    p.run()
    assert any("big.yaml was not opened" in e and "the limit is 1,048,576" in e
               for e in errors(p))
    assert p.editor_text() == before
    tagged = SMALL.replace("title: {", "evil: !!python/object/apply:os.system [\"echo hi\"]\ntitle: {")
    p.at.file_uploader(key="w_upload").set_value(("tag.yaml", tagged.encode(), "application/x-yaml"))
    p.run()
    assert any("tag.yaml was not opened" in e and "YAML tag" in e for e in errors(p))
    assert p.editor_text() == before
    p.at.file_uploader(key="w_upload").set_value(("latin.yaml", "id: é\n".encode("latin-1"),
                                                  "application/x-yaml"))
    p.run()
    assert any("not UTF-8" in e for e in errors(p))
    assert p.editor_text() == before


def test_a_good_upload_fills_the_editor_and_previews(page):
    p = author(page)
    p.at.file_uploader(key="w_upload").set_value(("tiny.yaml", SMALL.encode(), "application/x-yaml"))
    p.run()
    assert any("Opened tiny.yaml" in s for s in successes(p))
    assert p.editor_text() == SMALL
    assert "Tiny test" in p.html() and p.header() == "step 3 of 3"


def test_snippets_add_valid_events_and_the_download_offers_the_text(page):
    p = author(page)
    edit(p, SMALL)
    assert not p.at.button(key="b_snip_finish").disabled          # B is still running
    assert p.at.button(key="b_snip_rewind").disabled               # no checkpoint yet
    p.click("b_snip_arrive")
    text = p.editor_text()
    assert text.endswith("  - arrive: {id: C, prompt: [{same_as: A, first: 4}, {random: 4}], "
                         "max_tokens: 8}\n")
    p.click("b_snip_checkpoint")
    p.click("b_snip_rewind")
    text = p.editor_text()
    assert "  - checkpoint: cp1\n  - rewind: cp1\n" in text
    assert not error_box(p) and "6 steps" in p.html()
    assert p.offered("b_download") == file_id(text, "application/x-yaml", "tiny.yaml")


def test_the_gallery_copies_a_builtin_and_undo_brings_the_text_back(page):
    p = author(page)
    edit(p, SMALL)
    p.at.selectbox(key="w_gallery").set_value("preempt-resume")
    p.click("b_gallery_copy")
    want = (ROOT / "scenarios" / "preempt-resume.yaml").read_text(encoding="utf-8")
    assert p.editor_text() == want
    assert not error_box(p)
    p.click("b_undo")
    assert p.editor_text() == SMALL


def test_a_session_s_scenario_is_not_seen_by_another_session(page):
    one = author(page)
    edit(one, SMALL)
    one.click("b_open_player")
    two = page()
    assert "__user__" not in two.at.selectbox(key="w_scenario").options
    assert two.state["bv_scenario"] == "six-blocks" and "Tiny test" not in two.html()
    # the session's board data is memoized in its own state, not in the process-wide cache
    assert any(k.startswith("user:") and "board" in kinds for k, kinds in one.state["bv_memo"].items())
    assert "bv_memo" not in two.state or not any(k.startswith("user:") for k in two.state["bv_memo"])


def test_every_label_follows_the_language_switch(page):
    p = author(page)
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    text = p.text()
    assert "编写场景" in text and "合法：“我的场景”，4 步" in text and "第 4 步 / 共 4 步" in text
    assert "场景（YAML）" in [c.value for c in p.at.caption]
    assert p.editor()["labels"]["ok"] == "没有错误"
    assert p.at.button(key="b_open_player").label == "在播放器中打开"
    assert p.at.file_uploader(key="w_upload").label == "打开场景文件"
    assert not re.search(r"\b(Valid|Preview|Download)\b", text)
    edit(p, BAD)
    assert "第 7 行，第 13 列" in error_box(p)
    assert "请求 &#x27;Z&#x27; 在到达（arrive）之前就被使用了" in error_box(p)
    assert "is used before" not in error_box(p)


def test_a_refusal_on_show_follows_the_language_switch(page):
    p = author(page)
    p.at.file_uploader(key="w_upload").set_value(("latin.yaml", "id: é\n".encode("latin-1"),
                                                  "application/x-yaml"))
    p.run()
    assert any("latin.yaml was not opened" in e and "not UTF-8 text" in e for e in errors(p))
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert any("latin.yaml 没有打开" in e and "文件不是 UTF-8 文本（第 4 字节处）" in e
               for e in errors(p)), errors(p)


def test_opening_the_author_page_first_then_the_player_keeps_the_preview_step(page):
    from streamlit.testing.v1 import AppTest
    from streamlit.util import calc_hash

    from .conftest import APP, Page
    at = AppTest.from_file(APP, default_timeout=90)
    at._page_hash = calc_hash("author")             # a fresh session that lands on /author
    at.run()
    at._page_hash = ""
    at.session_state["w_author_text"] = {"edit": {"text": SMALL, "n": 1}}
    at.run()
    at.button(key="b_open_player").click()
    at.run()
    assert not at.exception
    shown = Page.__new__(Page)          # read the page as the helper does, on this AppTest
    shown.at = at
    body = shown.html()
    assert 'data-step="3">step 3 of 3<' in body and "Tiny test" in body
