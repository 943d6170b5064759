"""The request panel's prompt split in a real browser: a bar per request, a segment per part of
its lookup; hovering a segment lights the blocks it concerns on the board (issue 31)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

READY = '[data-bv="board"][data-bv-ready="1"]'


def test_hovering_a_split_segment_lights_its_blocks(browser, server, screenshots):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server}/?scenario=six-blocks&lang=en&step=2")
    page.wait_for_selector(READY, timeout=90_000)
    bar = page.locator('[data-bv="requests"] [data-request="B"] [data-bv="split"]')
    expect(bar).to_have_count(1)
    hit = bar.locator('.bv-split-seg[data-cat="hit"]')
    assert hit.get_attribute("data-split-block") == "1 2"
    hit.hover()
    lit = page.locator('[data-bv="blocks"] .bv-card.bv-lit')
    expect(lit).to_have_count(2)
    assert sorted(lit.evaluate_all("es => es.map(e => e.dataset.block)")) == ["1", "2"]
    assert "8 hit" in page.locator('[data-bv="requests"] [data-request="B"]').inner_text()
    page.screenshot(path=str(screenshots / "split-six-blocks-2-en.png"))
    page.close()


def test_an_evicted_segment_names_its_block_and_step_in_chinese(browser, server, screenshots):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server}/?scenario=reset-running&lang=zh&step=6")
    page.wait_for_selector(READY, timeout=90_000)
    seg = page.locator('[data-bv="requests"] [data-request="A"] .bv-split-seg[data-cat="evicted"]')
    expect(seg).to_have_count(3)
    first = seg.first
    assert first.get_attribute("data-step") == "5" and first.get_attribute("data-split-block") == "1"
    assert "第 5 步 reset_prefix_cache" in first.get_attribute("title")
    page.screenshot(path=str(screenshots / "split-reset-running-6-zh.png"))
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_capacity_page_stacks_each_pool_size_s_prompt_tokens(browser, server, screenshots, lang,
                                                                tmp_path):
    from blockviz.teach.tracegen import TraceWorkload, write_generated

    from .test_capacity_browser import TRACE_WORDS, _curve_of, open_capacity
    tab, loaded = TRACE_WORDS[lang][:2]
    good = tmp_path / "chat.jsonl"
    with open(good, "w", encoding="utf-8") as f:
        write_generated(TraceWorkload(kind="multi_turn", requests=400, seed=3), f)
    page = open_capacity(browser, server, lang)
    page.get_by_role("tab", name=tab).click()
    page.wait_for_selector(".st-key-w_capt_upload input[type=file]", state="attached", timeout=30_000)
    _curve_of(page, good, loaded)
    bars = page.locator('[data-bv="split-chart"] [data-bv="split"]')
    assert bars.count() >= 4                                    # one per chosen pool size
    assert bars.first.locator('.bv-split-seg[data-cat="hit"]').count() == 1
    # beside each bar its hit and evicted shares, in words (what a bigger pool could add)
    fig = page.locator('[data-bv="split-chart"] .bv-split-fig')
    assert fig.count() == bars.count()
    hit, evicted = {"en": ("hit", "evicted"), "zh": ("命中", "已淘汰")}[lang]
    assert re.fullmatch(rf"{hit} \d+\.\d% · {evicted} \d+\.\d%", fig.first.inner_text()), (
        fig.first.inner_text())
    words = {"en": "Where the prompt tokens went", "zh": "提示词 token 的去向"}[lang]
    page.get_by_text(words).first.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / f"capacity-split-{lang}.png"))
    page.close()
