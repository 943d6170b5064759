"""Exports in a real Chromium: the HTML file opens OFFLINE (every request that is not the file
itself is aborted) and the board in it steps with its buttons, the arrow keys and Back; the PNG of
the board (headless Chromium) and the plotly slide (kaleido) decode as 1920×1080 PNGs and are kept in
artifacts/screenshots/ to be looked at."""
from __future__ import annotations

import struct

import pytest
from playwright.sync_api import expect

from blockviz.render.export import board_png, export_html, slide, write_png
from blockviz.scenario import load
from blockviz.sim.runner import run

pytestmark = pytest.mark.browser


def test_the_exported_html_steps_offline(browser, root, tmp_path, screenshots):
    loaded = load(root / "scenarios" / "six-blocks.yaml")
    _, tl = run(loaded)
    path = tmp_path / "six-blocks.html"
    path.write_text(export_html(tl, title=loaded.scenario.title.get("en"), lang="en", start=3,
                                file="six-blocks.yaml"), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    asked: list[str] = []

    def only_the_file(route):
        url = route.request.url
        if url.startswith("file:"):
            route.continue_()
        else:
            asked.append(url)
            route.abort()
    page.route("**/*", only_the_file)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    head = page.locator('[data-bv="board"] .bv-stepno')
    queue = page.locator('[data-bv="free-queue"] .bv-queue')
    page.wait_for_selector('[data-bv="board"][data-bv-ready="1"]', timeout=10_000)
    assert head.inner_text() == "step 3 of 8"
    assert queue.get_attribute("data-queue") == "3 5 6"
    page.locator('[data-bv="board"] [data-act="next"]').click()
    assert head.inner_text() == "step 4 of 8"
    assert queue.get_attribute("data-queue") == "4 3 5 6 2 1"
    page.keyboard.press("ArrowLeft")
    assert head.inner_text() == "step 3 of 8"
    page.keyboard.press("End")
    assert head.inner_text() == "step 8 of 8"
    assert page.locator('[data-bv="board"] [data-act="next"]').is_disabled()
    page.keyboard.press("Home")
    assert head.inner_text() == "step 0 of 8"
    page.keyboard.press("ArrowRight")
    page.go_back()                                   # Back steps back in a file too
    expect(head).to_have_text("step 0 of 8")
    page.keyboard.press("ArrowRight")
    page.locator('[data-bv="board"] [data-act="lang"]').click()        # both languages inside
    assert head.inner_text() == "第 1 步 / 共 8 步"
    page.screenshot(path=str(screenshots / "export-html-six-blocks-step1-zh.png"))
    page.locator('[data-bv="board"] [data-act="lang"]').click()        # and back
    assert head.inner_text() == "step 1 of 8"
    assert not asked and not errors
    # a link to a step opens there (a new page, and the same page)
    page.goto(path.as_uri() + "#step=6")
    expect(head).to_have_text("step 6 of 8")
    page.close()
    fresh = browser.new_page()
    fresh.route("**/*", only_the_file)
    fresh.goto(path.as_uri() + "#step=7")
    expect(fresh.locator('[data-bv="board"] .bv-stepno')).to_have_text("step 7 of 8")
    assert not asked
    fresh.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_png_is_the_board(chromium_path, root, screenshots, lang, monkeypatch):
    monkeypatch.setenv("BLOCKVIZ_CHROMIUM", chromium_path)
    loaded = load(root / "scenarios" / "six-blocks.yaml")
    _, tl = run(loaded)
    doc = export_html(tl, title=loaded.scenario.title.get(lang), lang=lang, start=4)
    data = board_png(doc, 4)
    out = screenshots / f"export-board-six-blocks-step4-{lang}.png"
    out.write_bytes(data)
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == (1920, 1080)
    assert len(data) > 50_000                                   # drawn, not blank


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_png_slide(chromium_path, root, screenshots, lang):
    loaded = load(root / "scenarios" / "six-blocks.yaml")
    _, tl = run(loaded)
    out = screenshots / f"export-six-blocks-step4-{lang}.png"
    write_png(slide(tl, 4, title=loaded.scenario.title.get(lang), lang=lang), str(out))
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == (1920, 1080)
    assert len(data) > 50_000                                   # drawn, not blank
