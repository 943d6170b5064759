"""Authoring and try-it-yourself in a real browser: write a scenario in the editor, preview it, open
it in the player and step it; an invalid edit shows its located error; fork and self-check panels;
screenshots of each in both languages at 1280×800 (artifacts/screenshots/)."""
from __future__ import annotations

import re

import pytest

from .test_board_fits import NORMAL, WALK
from .test_board_fits import PANELS as FITS_PANELS
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


SIDE = ".st-key-side_panel"
SIZES = [(1280, 800), (1920, 1080)]


def _rects(page) -> dict:
    """The board's and the side panel's boxes, the sidebar's width, the viewport."""
    board = page.locator(BOARD).evaluate("e => { const r = e.getBoundingClientRect(); "
                                         "return [r.left, r.top, r.right, r.bottom]; }")
    side = page.locator(SIDE).evaluate("e => { const r = e.getBoundingClientRect(); "
                                       "return [r.left, r.top, r.right, r.bottom]; }") \
        if page.locator(SIDE).count() else None
    # the page's scrollers (the side panel's ancestors) that are not at their top
    scrolled = page.locator(SIDE).evaluate(
        "e => { const out = []; for (let a = e.parentElement; a; a = a.parentElement) "
        "if (a.scrollTop > 0) out.push([a.dataset.testid || a.tagName, a.scrollTop]); "
        "return out.concat(scrollY ? [['window', scrollY]] : []); }") if page.locator(SIDE).count() else None
    sidebar = page.evaluate("() => { const s = document.querySelector('[data-testid=stSidebar]'); "
                            "return s ? s.getBoundingClientRect().width : 0; }")
    return {"board": board, "side": side, "sidebar": sidebar, "scrolled": scrolled,
            "view": page.evaluate("() => [innerWidth, innerHeight]")}


def _beside(page, field: str) -> dict:
    """The board and the panel side by side, both on screen, the board whole (it fits), and the
    panel's input ``field`` (a CSS selector) on screen too: predict with the board in view, no
    scrolling of the page or of the panel."""
    r = _rects(page)
    (bl, bt, br, bb), (sl, st_, sr, sb), (w, h) = r["board"], r["side"], r["view"]
    assert 0 <= bl and br <= sl and sr <= w, r                 # board | panel, inside the width
    assert 0 <= bt and bb <= h + 1 and sb <= h + 1 and abs(bt - st_) < 4, r   # both inside the height
    assert br - bl >= 0.6 * w, r                               # the board keeps most of the width
    assert r["scrolled"] == [], r                              # the page is not scrolled
    box = page.locator(f"{SIDE} {field}").bounding_box()
    fl, ft, fr, fb = box["x"], box["y"], box["x"] + box["width"], box["y"] + box["height"]
    assert box["height"] > 10 and sl <= fl and fr <= sr and st_ <= ft and fb <= min(sb, h), (box, r)
    return r


@pytest.mark.parametrize("width,height", SIZES)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_self_check_and_try_it_open_beside_the_board(browser, server, screenshots, lang, width, height):
    page = open_page(browser, server, f"scenario=six-blocks&lang={lang}", width, height)
    for _ in range(3):                                   # the board steps in the browser alone
        page.keyboard.press("ArrowRight")
    wait_header(page, "step 3 of 8" if lang == "en" else "第 3 步 / 共 8 步")
    page.locator(BOARD).evaluate("e => { e.__kept = true; }")
    page.locator(".st-key-w_selfcheck label").click()    # the switch, in the sidebar
    page.wait_for_selector(f"{SIDE} .st-key-w_sc_queue input", timeout=30_000)
    page.wait_for_selector(IDLE, timeout=30_000)
    expect = "Predict step 4" if lang == "en" else "预测第 4 步"
    page.locator(SIDE).get_by_text(expect).wait_for(timeout=30_000)   # the board's step, + 1
    page.wait_for_function("() => { const s = document.querySelector('[data-testid=stSidebar]'); "
                           "return !s || s.getBoundingClientRect().width < 50; }", timeout=30_000)
    page.wait_for_timeout(600)                           # the board refits to its narrower box
    _beside(page, ".st-key-w_sc_queue input")            # the prediction's box
    assert page.locator(BOARD).evaluate("e => e.__kept === true")     # not mounted afresh
    box = page.locator(f"{SIDE} .st-key-w_sc_queue input")
    box.fill("4 3 5 6 1 2")
    box.press("Enter")
    page.wait_for_timeout(300)                           # the run that Enter starts, then idle
    page.wait_for_selector(IDLE, timeout=30_000)
    click_key(page, "b_sc_check")
    verdict = page.locator(f'{SIDE} [data-correct="false"]')
    verdict.wait_for(timeout=30_000)
    assert verdict.bounding_box()["y"] < height                # the verdict is on screen too
    page.mouse.move(width - 2, height - 2)               # no hover-link in the shot
    page.screenshot(path=str(screenshots / f"selfcheck-{lang}-{width}x{height}.png"))
    assert page.locator(NO_ERROR).count() == 0
    got = page.locator(BOARD).evaluate(WALK, [list(NORMAL), list(FITS_PANELS)])   # the narrower board
    assert got["steps"] == 9 and not got["bad"], got["bad"]            # still fits, every step
    # The walk ends at the last step, which the board tells Python (debounced): wait for the panel
    # to follow it before going back, else "Predict step 4" below is still the panel from before
    # the walk, and the runs for step 8 (a short panel: the wheel then lands on the page below
    # it and scrolls the page) and step 3 come in while the wheel is turning.
    at_end = "nothing left to predict" if lang == "en" else "没有可以预测的了"
    page.locator(SIDE).get_by_text(at_end).wait_for(timeout=30_000)
    page.wait_for_selector(IDLE, timeout=30_000)
    page.locator(f'{BOARD} .bvb-mk[data-step="3"]').click()            # back to step 3
    page.locator(SIDE).get_by_text(expect).wait_for(timeout=30_000)
    page.wait_for_selector(IDLE, timeout=30_000)
    page.mouse.move(width - 40, height // 2)             # scroll the panel to its end, as a
    for _ in range(12):                                  # learner would, with the wheel: the
        page.mouse.wheel(0, 400)                         # page does not scroll on after it
    page.wait_for_timeout(300)
    assert _rects(page)["scrolled"] == []
    click_key(page, "b_sc_close")
    page.wait_for_selector(SIDE, state="detached", timeout=30_000)
    page.wait_for_function("() => document.querySelector('[data-testid=stSidebar]')"
                           ".getBoundingClientRect().width > 150", timeout=30_000)    # back
    click_key(page, "b_fork")                            # forks at the board's step
    page.wait_for_selector(f"{SIDE} .st-key-fork_panel", timeout=30_000)
    page.wait_for_selector(IDLE, timeout=30_000)
    title = "Try it yourself — forked at step 3" if lang == "en" else "自己动手试试 —— 从第 3 步分叉"
    page.locator(SIDE).get_by_text(title).wait_for(timeout=30_000)
    assert page.locator(f"{SIDE} .st-key-w_fk_id input").input_value() == "C"
    page.wait_for_timeout(600)
    _beside(page, ".st-key-w_fk_id input")               # the new request's first field
    _beside(page, ".st-key-b_fk_add button")             # and its button
    assert page.locator(BOARD).evaluate("e => e.__kept === true")
    page.mouse.move(width - 2, height - 2)               # no hover-link in the shot
    page.screenshot(path=str(screenshots / f"fork-{lang}-{width}x{height}.png"))
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
