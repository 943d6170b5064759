"""Exports in a real Chromium: the HTML file opens OFFLINE (every request that is not the file
itself is aborted) and its Next button and arrow keys step it; the PNG is made by kaleido, decodes
as a 1920×1080 PNG, and is kept in artifacts/screenshots/ to be looked at."""
from __future__ import annotations

import struct

import pytest

from blockviz.render.export import export_html, slide, write_png
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
    pos = page.locator("#bvx-pos")
    visible_queue = "section.bvx-step:not([hidden]) .bv-queue"
    assert pos.inner_text() == "step 3 of 8"
    assert page.locator(visible_queue).get_attribute("data-queue") == "3 5 6"
    page.locator("#bvx-next").click()
    assert pos.inner_text() == "step 4 of 8"
    assert page.locator(visible_queue).get_attribute("data-queue") == "4 3 5 6 2 1"
    assert page.locator("section.bvx-step:not([hidden])").count() == 1
    page.keyboard.press("ArrowLeft")
    assert pos.inner_text() == "step 3 of 8"
    page.keyboard.press("End")
    assert pos.inner_text() == "step 8 of 8" and page.locator("#bvx-next").is_disabled()
    page.keyboard.press("Home")
    assert pos.inner_text() == "step 0 of 8" and page.locator("#bvx-prev").is_disabled()
    page.locator("#bvx-next").click()
    page.screenshot(path=str(screenshots / "export-html-six-blocks-step1-en.png"))
    assert not asked and not errors
    # a link to a step opens there (a new page, and the same page)
    page.goto(path.as_uri() + "#step=6")
    assert pos.inner_text() == "step 6 of 8"
    page.close()
    fresh = browser.new_page()
    fresh.route("**/*", only_the_file)
    fresh.goto(path.as_uri() + "#step=7")
    assert fresh.locator("#bvx-pos").inner_text() == "step 7 of 8"
    assert not asked
    fresh.close()


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
