"""The Author page's editor through AppTest (the component's JavaScript is tested in the browser,
tests/e2e/test_editor_browser.py): Python's verdict on the current text reaches the editor as a
mark (line, column, message in the page's language); the editor's text changes only with a new
seq when Python replaces it; completions come from the JSON Schema with meanings in both
languages; the excerpt keeps the caret in view; a limit says what to do; the insert buttons follow
the current text; the format reference reads in 中文."""
from __future__ import annotations

import re

from blockviz.scenario import json_schema
from blockviz.scenario.schema import EVENT_NAMES, MAX_NUM_BLOCKS
from blockviz.teach.authoring import STARTER

from .test_author import BAD, SMALL, author, edit, error_box


def test_the_editor_gets_python_s_mark_for_the_current_text(page):
    p = author(page)
    ed = p.editor()
    assert ed["text"] == STARTER and ed["mark"] is None
    seq = ed["seq"]
    edit(p, BAD)
    ed = p.editor()
    assert ed["text"] == BAD and ed["seq"] == seq          # the author's own edit: no new seq
    assert ed["mark"] == {"line": 7, "col": 13, "msg": "request 'Z' is used before it arrives"}
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert p.editor()["mark"]["msg"] == "请求 'Z' 在到达（arrive）之前就被使用了"
    edit(p, SMALL)
    assert p.editor()["mark"] is None


def test_python_replacing_the_text_bumps_the_seq(page):
    p = author(page)
    edit(p, SMALL)
    seq = p.editor()["seq"]
    p.click("b_snip_step")
    ed = p.editor()
    assert ed["seq"] == seq + 1 and ed["text"] == SMALL + "  - step: 1\n"
    # an edit the editor sent earlier is not taken again on a later run
    p.run()
    assert p.editor_text() == p.state["bv_author_text"]


def test_completions_come_from_the_schema_in_both_languages(page):
    p = author(page)
    words = p.editor()["words"]
    assert [e["label"] for e in words["events"]] == [*EVENT_NAMES, "note"]
    schema = json_schema()
    assert [e["label"] for e in words["config"]] == list(schema["$defs"]["Config"]["properties"])
    assert [e["label"] for e in words["arrive"]] == list(schema["$defs"]["ArriveSpec"]["properties"])
    assert {"tokens", "text", "same_as", "first", "random"} <= {e["label"] for e in words["part"]}
    nb = next(e for e in words["config"] if e["label"] == "num_blocks")
    assert nb["detail"] == f"integer 1–{MAX_NUM_BLOCKS}"
    assert "null block" in nb["en"] and "null 块" in nb["zh"]
    # every entry has a meaning in 中文 that is not the English one
    for table in words.values():
        for e in table:
            assert e["zh"] and e["zh"] != e["en"], e


def test_the_format_reference_reads_in_chinese(page):
    p = author(page)
    assert "usable GPU blocks" in p.html() and "config.scheduler" in p.html()
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    html = p.html()
    assert "可用的 GPU 块数" in html and "一次引擎迭代的 token 预算" in html
    assert "usable blocks; the null block" not in html and "the token budget of one" not in html


def test_the_excerpt_keeps_a_far_column_in_view(page):
    p = author(page)
    far = SMALL.replace("  - finish: A", "  - arrive: {id: C, prompt: [1, 2, 3], max_tokens: 2, lora: [x]}")
    edit(p, far)
    box = error_box(p)
    assert "line 7, column 61" in box
    bad = re.search(r'<div class="bv-bad" data-line="7"><span class="bv-ln">7</span>([^<]*)</div>', box)
    caret = re.search(r'<div class="bv-caret"><span class="bv-ln"></span>( *)\^</div>', box)
    assert bad and caret
    shown = bad.group(1).replace("&#x27;", "'")
    assert shown.startswith("…") and len(caret.group(1)) < 44       # within the visible width
    assert shown[len(caret.group(1)):].startswith("[x]")          # the caret under the bad value


def test_num_blocks_over_the_limit_says_the_limit_and_what_to_do(page):
    p = author(page)
    edit(p, SMALL.replace("num_blocks: 3", "num_blocks: 1000000"))
    box = error_box(p)
    assert f"at most {MAX_NUM_BLOCKS:,}" in box and "Use a smaller number" in box
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert "最大为 65,536" in error_box(p)


def test_insert_buttons_follow_the_current_text(page):
    p = author(page)
    edit(p, SMALL)
    # the current text adds C and a checkpoint but is not valid yet (a bad event at the end)
    edit(p, SMALL + "  - arrive: {id: C, prompt: [5]}\n  - checkpoint: here\n  - bogus: 1\n")
    assert not p.at.button(key="b_snip_rewind").disabled        # "here" is in the current text
    p.click("b_snip_finish")
    assert p.editor_text().endswith("  - finish: C\n")         # C: the current text's last live one
    p.click("b_snip_rewind")
    assert p.editor_text().endswith("  - rewind: here\n")
