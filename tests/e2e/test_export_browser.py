"""Exports in a real Chromium: the HTML file opens OFFLINE (every request that is not the file
itself is aborted) and the board in it steps with its buttons, the arrow keys and Back; the PNG of
the board (headless Chromium) decodes as a 1920×1080 PNG and is kept in artifacts/screenshots/ to
be looked at."""
from __future__ import annotations

import re
import struct

import pytest
from playwright.sync_api import expect

from blockviz.export import board_png, export_html
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
    expect(page).to_have_url(re.compile(r"#step=1$"))  # (written once the step is painted)
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


# every panel the board fills from the string pool: (record field, the element it goes into)
PANELS = (("header", ".bvb-head"), ("caption", ".bvb-cap"), ("why", ".bvb-why .bvb-body"),
          ("blocks", ".bvb-blocks .bvb-body"),
          ("queue", ".bvb-queue .bvb-body"), ("table", ".bvb-table .bvb-body"),
          ("requests", ".bvb-reqs .bvb-body"), ("external", ".bvb-ext .bvb-body"))

SAME_AS_FRESH = """([panels, lang]) => {
  // each panel, as stepped to, against its HTML for this step parsed afresh (a step changes
  // only the nodes that differ, so a node left over from an earlier step would show here)
  const data = JSON.parse(document.getElementById('bv-data').textContent).board;
  const root = document.getElementById('bv-host').shadowRoot.querySelector('[data-bv=board]');
  const k = Number(root.getAttribute('data-bv-step'));
  const rec = data.steps[lang][k - data.lo];
  const bad = [];
  for (const [field, sel] of panels) {
    if (rec[field] === undefined) continue;
    const t = document.createElement('template');
    t.innerHTML = data.strings[rec[field]];
    const got = root.querySelector(sel), want = t.content;
    const same = got.childNodes.length === want.childNodes.length &&
      [...got.childNodes].every((c, i) => c.isEqualNode(want.childNodes[i]));
    if (!same) {
      bad.push(`step ${k} ${field}: ${got.innerHTML.slice(0, 300)}` +
               ` != ${data.strings[rec[field]].slice(0, 300)}`);
    }
  }
  return bad;
}"""


@pytest.mark.parametrize("scenario", ["six-blocks", "external-tier", "long-dense"])
def test_a_stepped_board_is_the_board_drawn_afresh(browser, root, tmp_path, scenario):
    """The board changes only what differs from the step before (rows keyed by request and hash
    move as a whole): walking every step forward, back, and by jumps, each panel is exactly the
    step's HTML drawn afresh — cards, the free queue, the hash table, the requests, the tier."""
    path = (root / "tests" / "render" / "scenarios" / f"{scenario}.yaml"
            if scenario == "long-dense" else root / "scenarios" / f"{scenario}.yaml")
    loaded = load(path)
    _, tl = run(loaded)
    out = tmp_path / f"{scenario}.html"
    out.write_text(export_html(tl, title=scenario, lang="en", file=path.name), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(out.as_uri())
    page.wait_for_selector('[data-bv="board"][data-bv-ready="1"]', timeout=10_000)
    n, board = len(tl), page.locator('[data-bv="board"]')
    keys = ["ArrowRight"] * (n - 1) + ["ArrowLeft"] * (n - 1) + ["End", "Home", "End"]
    keys += ["ArrowLeft", "ArrowLeft", "Home", "ArrowRight"]
    bad, seen = [], set()
    for key in [None, *keys]:
        if key:
            page.keyboard.press(key)
        step = int(board.get_attribute("data-bv-step"))
        seen.add(step)
        bad += page.evaluate(SAME_AS_FRESH, [PANELS, "en"])
    assert seen == set(range(n))
    assert not bad, "\n".join(bad[:5])
    page.close()
