"""Authoring and try-it-yourself in a real browser: write a scenario in the editor, preview it, open
it in the player and step it; an invalid edit shows its located error; fork and self-check panels;
screenshots of each in both languages at 1280×800 (artifacts/screenshots/)."""
from __future__ import annotations

import re

import pytest

from .test_browser import BOARD, HEADER, IDLE, NO_ERROR, READY, act, open_page, queue_text, wait_header

pytestmark = pytest.mark.browser

SMALL = """id: tiny
title: {en: "Tiny test", zh: "小测试"}
config: {num_blocks: 3, block_size: 2, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3]}
    note: {en: "A takes two blocks.", zh: "A 占用两个块。"}
  - arrive: {id: B, prompt: [{same_as: A, first: 2}, {tokens: [9]}]}
  - finish: A
"""


def open_author(browser, url: str, lang: str = "en", width: int = 1280, height: int = 800):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(f"{url}/author")
    page.wait_for_selector(".st-key-w_author_text textarea", timeout=90_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    if lang == "zh":
        page.locator('[data-testid="stSidebar"] button:has-text("中文")').click()
        page.get_by_text("编写场景").first.wait_for(timeout=30_000)
        page.wait_for_selector(IDLE, timeout=30_000)
    return page


def click_key(page, key: str) -> None:
    """Click the button of widget ``key`` once the run that drew it has settled (while a run
    replaces an element, the old copy may still be in the page)."""
    page.wait_for_function(f"() => document.querySelectorAll('.st-key-{key}').length === 1",
                           timeout=30_000)
    page.locator(f".st-key-{key}").get_by_role("button").first.click()


def write(page, text: str) -> None:
    box = page.locator(".st-key-w_author_text textarea")
    box.fill(text)
    box.press("Control+Enter")                  # applies the edit (as a click outside would)
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=60_000)


def test_write_a_scenario_preview_it_and_step_it_in_the_player(browser, server, screenshots):
    page = open_author(browser, server)
    write(page, SMALL)
    page.get_by_text("Valid: “Tiny test”, 3 steps").wait_for(timeout=30_000)
    wait_header(page, "step 3 of 3")                 # the preview is the board
    page.screenshot(path=str(screenshots / "author-valid-en-1280x800.png"))
    click_key(page, "b_open_player")
    page.wait_for_selector(".st-key-w_author_text", state="detached", timeout=30_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    wait_header(page, "step 3 of 3")
    act(page, "first")
    wait_header(page, "step 0 of 3")
    assert queue_text(page) == "1 2 3"
    act(page, "next")
    wait_header(page, "step 1 of 3")
    assert "A takes two blocks." in page.locator(f"{BOARD} .bv-note").inner_text()
    assert queue_text(page) == "3"
    assert page.locator(NO_ERROR).count() == 0
    page.screenshot(path=str(screenshots / "author-opened-in-player-en-1280x800.png"))
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_invalid_edit_shows_the_located_error(browser, server, screenshots, lang):
    page = open_author(browser, server, lang)
    write(page, SMALL)
    write(page, SMALL.replace("  - finish: A", "  - finish: Z"))
    page.wait_for_selector(".bv-errbox .bv-bad", timeout=30_000)
    assert page.locator(".bv-errbox .bv-bad").inner_text().strip().startswith("8")
    where = page.locator(".bv-errwhere").first.inner_text()
    assert ("line 8, column 13" if lang == "en" else "第 8 行，第 13 列") in where
    assert page.locator(HEADER).inner_text() in ("step 3 of 3", "第 3 步 / 共 3 步")   # kept
    assert page.locator(NO_ERROR).count() == 0
    page.screenshot(path=str(screenshots / f"author-error-{lang}-1280x800.png"))
    page.locator(".st-key-snippets").scroll_into_view_if_needed()
    page.mouse.move(640, 400)
    page.mouse.wheel(0, 300)
    page.wait_for_timeout(400)
    page.screenshot(path=str(screenshots / f"author-tools-{lang}-1280x800.png"))
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_fork_panel_screenshot(browser, server, screenshots, lang):
    page = open_page(browser, server, f"scenario=six-blocks&step=4&lang={lang}")
    click_key(page, "b_fork")
    page.wait_for_selector(".st-key-fork_panel", timeout=30_000)
    page.wait_for_selector(IDLE, timeout=30_000)
    page.locator(".st-key-w_fk_pk").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    page.screenshot(path=str(screenshots / f"fork-{lang}-1280x800.png"))
    assert page.locator(NO_ERROR).count() == 0
    page.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_self_check_screenshot(browser, server, screenshots, lang):
    page = open_page(browser, server, f"scenario=six-blocks&step=3&lang={lang}")
    page.locator(".st-key-w_selfcheck label").click()
    page.wait_for_selector(".st-key-w_sc_queue input", timeout=30_000)
    page.locator(".st-key-w_sc_queue input").fill("4 3 5 6 1 2")
    page.locator(".st-key-w_sc_queue input").press("Enter")
    page.wait_for_selector(IDLE, timeout=30_000)
    click_key(page, "b_sc_check")
    page.wait_for_selector('[data-correct="false"]', timeout=30_000)
    page.locator(".st-key-selfcheck").scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    page.screenshot(path=str(screenshots / f"selfcheck-{lang}-1280x800.png"))
    assert page.locator(NO_ERROR).count() == 0
    page.close()


def _code_text(page, container: str, index: int = 0) -> str:
    """The text of the ``index``-th st.code block inside ``.st-key-<container>``."""
    return page.locator(f'.st-key-{container} [data-testid="stCode"] code').nth(index).inner_text().strip()


def _fresh(browser, url: str, header: str) -> None:
    """Open ``url`` in a new browser context (no cookies, no session, no history) and wait for the
    board's header to read ``header``."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_selector(READY, timeout=90_000)
        wait_header(page, header)
        assert page.locator(NO_ERROR).count() == 0
    finally:
        ctx.close()


def test_a_fork_link_and_a_share_link_open_at_step_0_in_a_fresh_browser(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&step=4&lang=en")
    click_key(page, "b_fork")
    page.wait_for_selector(".st-key-fork_panel", timeout=30_000)
    page.wait_for_selector(IDLE, timeout=30_000)
    wait_header(page, "step 4 of 4")
    page.wait_for_url(re.compile(r"[?&]s=[A-Za-z0-9_-]+"), timeout=30_000)   # the fork is in the URL
    fork_link = _code_text(page, "fork_panel")
    assert "?s=" in fork_link and "step=" not in fork_link
    address = page.url                                   # the address bar names its step
    assert re.search(r"[?&]step=4(&|$)", address)
    page.close()
    _fresh(browser, fork_link, "step 0 of 4")
    _fresh(browser, address, "step 4 of 4")

    page = open_author(browser, server)
    write(page, SMALL)
    wait_header(page, "step 3 of 3")                     # the preview shows its last step ...
    share_link = _code_text(page, "share", 0)
    embed = _code_text(page, "share", 1)
    page.close()
    assert "step=" not in share_link and "step=" not in embed
    src = re.search(r'src="([^"]+)"', embed).group(1).replace("&amp;", "&")
    _fresh(browser, share_link, "step 0 of 3")          # ... the link and the embed open at 0
    _fresh(browser, src, "step 0 of 3")


def test_a_4096_block_scenario_previews_and_opens_in_the_player(browser, server):
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "render" / "scenarios" / "big-pool.yaml").read_text()
    page = open_author(browser, server)
    write(page, text)
    page.get_by_text("Valid: “A big pool”, 25 steps, 4095 blocks × 16 tokens.").wait_for(timeout=60_000)
    wait_header(page, "step 25 of 25")
    assert page.locator(f"{BOARD} canvas.bvb-cv").count() == 1          # the dense view
    assert page.locator(".bv-errbox").count() == 0 and page.locator(NO_ERROR).count() == 0
    click_key(page, "b_open_player")
    page.wait_for_selector(".st-key-w_author_text", state="detached", timeout=30_000)
    wait_header(page, "step 25 of 25")
    act(page, "first")
    wait_header(page, "step 0 of 25")
    page.close()
