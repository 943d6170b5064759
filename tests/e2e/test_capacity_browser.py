"""The capacity-planning page in a real browser: compute a plan, both charts drawn with one line
per free order and axis titles in the page's language, no error element; screenshots of both
languages at 1280×800 (artifacts/screenshots/capacity-*.png): the top of the page, and the charts
with the explanation beside them."""
from __future__ import annotations

import pytest

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
