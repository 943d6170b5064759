"""The capacity-planning page in a real browser: compute a plan, both charts drawn with one line
per free order and axis titles in the page's language, no error element; screenshots of both
languages at 1280×800 (artifacts/screenshots/capacity-*.png): the top of the page, and the charts
with the explanation beside them. On the "Real traffic" tab: upload a malformed trace (its located
line shown in the page's language), then a good one, sweep it, read the knee, and open a window of
it in the player (artifacts/screenshots/capacity-trace-*.png)."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .test_authoring_browser import click_key
from .test_browser import IDLE, NO_ERROR

pytestmark = pytest.mark.browser

WORDS = {"en": ("Capacity planning", "pool size (blocks)", "prefix-cache hit rate", "How to read it"),
         "zh": ("容量规划", "块池大小（块）", "前缀缓存命中率", "怎么读这张图")}


def open_capacity(browser, url: str, lang: str):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{url}/capacity")
    page.wait_for_selector(".st-key-b_cap_compute button", timeout=90_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    if lang == "zh":
        page.locator('[data-testid="stSidebar"] button:has-text("中文")').click()
        page.get_by_text("KV 缓存块池要多大？").first.wait_for(timeout=30_000)
        page.wait_for_selector(IDLE, timeout=30_000)
    return page


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compute_a_plan_and_read_the_chart(browser, server, screenshots, lang):
    title, x_title, y_title, how = WORDS[lang]
    page = open_capacity(browser, server, lang)
    page.locator(".st-key-w_cap_num_events input").fill("200")
    page.locator(".st-key-w_cap_num_events input").press("Tab")
    page.wait_for_timeout(300)                  # the value's own rerun starts ...
    page.wait_for_selector(IDLE, timeout=60_000)   # ... and ends before the click
    click_key(page, "b_cap_compute")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length === 2",
                           timeout=90_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    hit = page.locator(".js-plotly-plot").first
    assert hit.locator("g.scatterlayer g.trace").count() == 2       # one line per free order
    legend = " ".join(hit.locator("g.legend text").all_text_contents())
    assert "split" in legend and "append" in legend
    axes = " ".join(hit.locator("g.infolayer text").all_text_contents())
    assert x_title in axes and y_title in axes
    assert page.get_by_text(how).count() >= 1
    assert page.get_by_text(title).count() >= 1
    page.screenshot(path=str(screenshots / f"capacity-top-{lang}-1280x800.png"))
    page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
    page.mouse.move(640, 400)
    page.mouse.wheel(0, 250)
    page.wait_for_timeout(500)
    page.screenshot(path=str(screenshots / f"capacity-charts-{lang}-1280x800.png"))
    page.close()


# -- real traffic: an uploaded trace -------------------------------------------------------------
TRACE_WORDS = {"en": ("Real traffic: a trace", "400 requests", "the knee is at",
                      "KV-cache capacity (tokens, GiB)", "This trace cannot be used: bad.jsonl:2:"),
               "zh": ("真实流量：trace", "400 个请求", "拐点在", "KV 缓存容量（token，GiB）",
                      "这个 trace 无法使用：bad.jsonl:2:")}


def _upload(page, path) -> None:
    page.locator(".st-key-w_capt_upload input[type=file]").set_input_files(str(path))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_uploaded_trace_is_swept_and_a_window_opens_in_the_player(browser, server, screenshots, lang,
                                                                      tmp_path):
    from blockviz.teach.tracegen import TraceWorkload, write_generated
    tab, loaded, knee_words, x_title, bad_words = TRACE_WORDS[lang]
    scaled = {"en": "Scaled down for the player", "zh": "为播放器按比例缩小"}[lang]
    good = tmp_path / "chat.jsonl"
    with open(good, "w", encoding="utf-8") as f:
        write_generated(TraceWorkload(kind="multi_turn", requests=400, seed=3), f)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
                   '{"timestamp": 1, "input_length": 700, "output_length": 1, "hash_ids": [1]}\n')
    page = open_capacity(browser, server, lang)
    page.get_by_role("tab", name=tab).click()
    page.wait_for_selector(".st-key-w_capt_upload input[type=file]", state="attached", timeout=30_000)
    # a malformed line: one located line in the page's language, no traceback
    _upload(page, bad)
    page.get_by_text(bad_words).first.wait_for(timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    assert page.get_by_text("hash_ids").count() >= 1
    # a good trace replaces it
    _upload(page, good)
    page.get_by_text(loaded).first.wait_for(timeout=60_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    page.locator(".st-key-w_capt_num_sizes input").fill("4")
    page.locator(".st-key-w_capt_num_sizes input").press("Tab")
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=60_000)
    click_key(page, "b_capt_compute")
    page.wait_for_selector(".st-key-capt_hit_chart .js-plotly-plot", timeout=120_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    chart = page.locator(".st-key-capt_hit_chart .js-plotly-plot")
    assert chart.locator("g.scatterlayer g.trace").count() >= 3     # two orders, the knee's star(s)
    axes = " ".join(chart.locator("g.infolayer text").all_text_contents())
    assert x_title in axes
    assert page.get_by_text(knee_words).count() >= 1
    chart.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / f"capacity-trace-{lang}-1280x800.png"))
    # open a window of it in the player
    click_key(page, "b_capt_open_player")
    page.wait_for_selector(".bv-stepno", timeout=60_000)              # the player, on the window
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    assert "/capacity" not in page.url
    page.get_by_text(scaled).first.wait_for(timeout=30_000)           # its start note says the scale
    page.locator('[data-bv="board"] [data-act="next"]').click()      # the board steps it
    expect(page.locator('[data-bv="requests"]')).to_contain_text("L1")   # the window's first request
    page.close()
