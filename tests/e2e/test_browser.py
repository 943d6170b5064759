"""The player in a real browser: stepping with the Next button and with the keyboard, no error
element, and screenshots of both languages at laptop and projector sizes (presenter mode too)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

HEADER = ".bv-stepno"
NO_ERROR = '[data-testid="stException"]'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def open_page(browser, url: str, query: str, width: int = 1280, height: int = 800):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(f"{url}/?{query}")
    page.wait_for_selector(HEADER, timeout=90_000)
    page.wait_for_selector(".st-key-b_next button", timeout=30_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    return page


def wait_header(page, text: str) -> None:
    """The step header reads ``text`` and the script run that drew it has finished (a key
    pressed mid-run may be dropped by the browser side)."""
    page.wait_for_function(
        "t => document.querySelector('.bv-stepno')?.textContent === t", arg=text, timeout=30_000)
    page.wait_for_selector(IDLE, timeout=30_000)


def queue_text(page) -> str:
    return " ".join(page.locator(".bv-queue .bv-qid").all_inner_texts())


def test_walk_six_blocks_with_the_next_button(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=en")
    wait_header(page, "step 0 of 8")
    assert queue_text(page) == "1 2 3 4 5 6"
    for k in range(1, 5):
        page.locator(".st-key-b_next button").click()
        wait_header(page, f"step {k} of 8")
    page.wait_for_function(
        "() => document.querySelector('.bv-queue')?.dataset.queue === '4 3 5 6 2 1'", timeout=30_000)
    assert queue_text(page) == "4 3 5 6 2 1"
    assert page.locator(NO_ERROR).count() == 0
    page.wait_for_function("() => location.search.includes('step=4')", timeout=10_000)
    page.close()


def test_walk_six_blocks_with_the_arrow_key(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=zh")
    wait_header(page, "第 0 步 / 共 8 步")
    page.locator(".bv-stepno").click()          # focus the page, not a widget
    for k in range(1, 5):
        page.keyboard.press("ArrowRight")
        wait_header(page, f"第 {k} 步 / 共 8 步")
    assert queue_text(page) == "4 3 5 6 2 1"
    page.keyboard.press("End")
    wait_header(page, "第 8 步 / 共 8 步")
    page.keyboard.press("Home")
    wait_header(page, "第 0 步 / 共 8 步")
    assert page.locator(NO_ERROR).count() == 0
    page.close()


def test_space_plays_and_pauses(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=en&step=6")
    wait_header(page, "step 6 of 8")
    page.locator(".bv-stepno").click()
    page.keyboard.press("Space")                # 1x = one step every 2 s
    wait_header(page, "step 7 of 8")
    page.keyboard.press("Space")
    page.wait_for_selector('.st-key-b_play button:has-text("Play")', timeout=30_000)
    assert page.locator(NO_ERROR).count() == 0
    page.close()


SHOTS = [
    (lang, w, h, mode)
    for lang in ("en", "zh")
    for (w, h) in ((1280, 800), (1920, 1080))
    for mode in ("player", "presenter")
]


@pytest.mark.parametrize("lang, width, height, mode", SHOTS,
                         ids=[f"{lang}-{w}x{h}-{mode}" for lang, w, h, mode in SHOTS])
def test_screenshots(browser, server, screenshots, lang, width, height, mode):
    query = f"scenario=six-blocks&step=4&lang={lang}" + ("&presenter=1" if mode == "presenter" else "")
    page = open_page(browser, server, query, width, height)
    page.wait_for_timeout(500)                  # fonts settle
    path = screenshots / f"six-blocks-step4-{lang}-{width}x{height}-{mode}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    assert page.locator(NO_ERROR).count() == 0
    assert queue_text(page) == "4 3 5 6 2 1"
    page.close()


def test_screenshot_step_into(browser, server, screenshots):
    page = open_page(browser, server, "scenario=six-blocks&step=4&op=3&lang=en", 1280, 800)
    page.wait_for_selector(".bv-code .bv-cur", timeout=30_000)
    assert "append_n(to_tail)" in page.locator(".bv-code .bv-cur").inner_text()
    page.wait_for_timeout(800)
    page.screenshot(path=str(screenshots / "six-blocks-step4-op3-en-1280x800-into.png"))
    assert page.locator(NO_ERROR).count() == 0
    page.close()


def test_payload_and_metrics_open_in_the_browser(browser, server, screenshots):
    page = open_page(browser, server, "scenario=six-blocks&step=2&lang=en", 1920, 1080)
    page.locator(".st-key-x_payload summary").click()
    page.wait_for_selector(IDLE, timeout=30_000)
    page.locator(".st-key-x_metrics summary").click()
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length >= 2",
                           timeout=60_000)
    assert "cache hit = recomputation" in page.locator(".st-key-x_payload").inner_text()
    page.locator(".st-key-x_metrics").scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    page.screenshot(path=str(screenshots / "six-blocks-step2-en-1920x1080-details.png"))
    assert page.locator(NO_ERROR).count() == 0
    page.close()
