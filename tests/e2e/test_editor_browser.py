"""The Author editor and share links in a real browser (issue 15): typing a mistake marks its line
within a second without leaving the editor; completion offers event names; a shared link opened
in a fresh browser context shows the same scenario at the same step; an oversized or hostile link
gets a message. Screenshots in artifacts/screenshots/."""
from __future__ import annotations

import time

import pytest

from blockviz.scenario.share import MAX_CODE_CHARS

from .test_authoring_browser import SMALL, open_author, write
from .test_browser import HEADER, IDLE, NO_ERROR, act, queue_text, wait_header

pytestmark = pytest.mark.browser

EDITOR = ".st-key-w_author_text textarea"
MARKED = ".st-key-w_author_text .bvx-nums .bvx-bad"


def status(page, text: str):
    return page.locator(".st-key-w_author_text .bvx-status", has_text=text)


def marked_line(page) -> str:
    return page.locator(MARKED).inner_text() if page.locator(MARKED).count() else ""


def test_typing_a_mistake_marks_its_line_and_keeps_the_focus(browser, server, screenshots):
    """The mark and the loader's message come while the learner types on (the time it took is
    printed, not asserted: CI shares two cores, and a wall-clock bound there measures the machine)."""
    page = open_author(browser, server)
    write(page, SMALL)
    page.get_by_text("Valid: “Tiny test”, 3 steps").wait_for(timeout=30_000)
    box = page.locator(EDITOR)
    assert page.locator(".st-key-w_author_text .bvx-nums div").count() == SMALL.count("\n") + 1
    box.click()
    box.press("Control+End")
    box.press_sequentially("  - finish: Z")                  # Z never arrived: line 9
    start = time.monotonic()                                 # from the last key
    # (locators pierce the component's shadow root; document.querySelector does not)
    page.locator(MARKED).wait_for(state="attached", timeout=30_000)
    status(page, "request 'Z' is used before it arrives").wait_for(timeout=30_000)
    elapsed = time.monotonic() - start
    assert marked_line(page) == "9"
    beside = page.locator(".st-key-w_author_text .bvx-beside")
    assert beside.is_visible() and "request 'Z' is used before it arrives" in beside.inner_text()
    # the focus never left the editor: typing goes on where it was
    assert page.evaluate("() => { let a = document.activeElement;"
                         " while (a && a.shadowRoot && a.shadowRoot.activeElement)"
                         " a = a.shadowRoot.activeElement; return a && a.tagName; }") == "TEXTAREA"
    page.screenshot(path=str(screenshots / "editor-error-en-1280x800.png"))
    print(f"\nmistake typed → line marked and the loader's message shown: {elapsed:.2f} s")
    # fixing it clears the mark
    box.press("Backspace")
    box.press_sequentially("B")
    page.locator(MARKED).wait_for(state="detached", timeout=10_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    page.close()


def test_a_mistake_the_browser_sees_is_marked_at_once(browser, server):
    page = open_author(browser, server)
    box = page.locator(EDITOR)
    box.click()
    box.press("Control+End")
    box.press_sequentially("  - fly: 1")                       # not an event: the quick check
    start = time.monotonic()
    status(page, "unknown event 'fly'").wait_for(timeout=1_000)
    print(f"\nunknown event typed → marked: {time.monotonic() - start:.2f} s")
    lines = page.locator(".st-key-w_author_text .bvx-nums div").count()
    assert marked_line(page) == str(lines)                       # the line being typed
    page.close()


def test_completion_offers_event_names(browser, server, screenshots):
    page = open_author(browser, server, "zh")
    box = page.locator(EDITOR)
    box.click()
    box.press("Control+End")
    box.press_sequentially("  - re")
    pop = page.locator(".st-key-w_author_text .bvx-pop")
    pop.wait_for(state="visible", timeout=5_000)
    labels = pop.locator("li b").all_inner_texts()
    assert labels == ["reset_prefix_cache", "rewind", "restart"]          # the schema's order
    assert "恢复到某个存档" in pop.inner_text()                    # the meaning, in 中文
    page.screenshot(path=str(screenshots / "editor-completion-zh-1280x800.png"))
    box.press("ArrowDown")
    box.press("Enter")                                           # rewind
    assert box.input_value().endswith("  - rewind: ")
    # Ctrl+Space on an empty item lists every event
    box.press("Enter")
    box.press_sequentially("  - ")
    box.press("Control+Space")
    pop.wait_for(state="visible", timeout=5_000)
    assert "arrive" in pop.locator("li b").all_inner_texts()
    box.press("Escape")
    assert pop.is_hidden()
    page.close()


def share_url(page) -> str:
    code = page.locator(".st-key-share [data-testid='stCode'] code").first
    code.wait_for(timeout=30_000)
    return code.inner_text().strip()


def test_a_shared_link_opens_the_same_scenario_at_the_step_its_sender_adds(browser, server, screenshots):
    page = open_author(browser, server)
    write(page, SMALL)
    page.get_by_text("Valid: “Tiny test”, 3 steps").wait_for(timeout=30_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    url = share_url(page)
    assert "?s=" in url and "step=" not in url and url.startswith(server)   # a link opens at step 0 ...
    page.close()
    url += "&step=1"                                                     # ... unless its sender adds a step
    fresh = browser.new_context(viewport={"width": 1280, "height": 800})   # no cookies, no session
    other = fresh.new_page()
    other.goto(url)
    other.wait_for_selector(HEADER, timeout=90_000)
    wait_header(other, "step 1 of 3")
    assert "Tiny test" in other.locator(".bv-scn").first.inner_text()
    assert "A takes two blocks." in other.locator(".bv-note").first.inner_text()
    assert queue_text(other) == "3"
    assert other.locator(NO_ERROR).count() == 0
    other.screenshot(path=str(screenshots / "shared-link-en-1280x800.png"))
    act(other, "next")
    wait_header(other, "step 2 of 3")
    other.wait_for_function("() => location.search.includes('step=2') && location.search.includes('s=')",
                            timeout=10_000)
    fresh.close()


@pytest.mark.parametrize("query, words", [
    ("s=not*base64&step=1", "not URL-safe base64"),
    ("s=eNrLSM3JyVcozy_KSQEAGgsEXQ&step=1", "a scenario is a mapping"),     # "hello world"
    (f"s={'A' * (MAX_CODE_CHARS + 8)}", f"at most {MAX_CODE_CHARS:,}"),
])
def test_an_oversized_or_hostile_link_gets_a_message(browser, server, query, words):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server}/?{query}")
    page.wait_for_selector(HEADER, timeout=90_000)
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="could not be opened")
    alert.wait_for(timeout=30_000)
    assert words in alert.inner_text()
    assert page.locator(NO_ERROR).count() == 0
    page.close()
