"""The board fits one screen: for every built-in lesson, at 1280×800 and 1920×1080, in both
languages (switched on the board), normal and presenter mode, the four panels lie inside the
viewport at every step; and the key-to-paint time is measured in the page (the budget itself is
the bench's, ``python -m bench board``)."""
from __future__ import annotations

from pathlib import Path

import pytest

from .test_browser import BOARD, HEADER, IDLE, NO_ERROR, PANELS, READY

pytestmark = pytest.mark.browser

LESSONS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))
SIZES = ((1280, 800), (1920, 1080))


# In the page: show every step (a click on its timeline mark, as a user would), and list the panels
# that do not lie wholly inside the viewport at that step.
WALK = """(root, panels) => {
  const bad = [];
  const marks = root.querySelectorAll('.bvb-mk');
  const n = Number(marks.length);
  for (let k = 0; k < n; k++) {
    marks[k].click();
    if (root.getAttribute('data-bv-step') !== String(marks[k].dataset.step)) bad.push(`step ${k}: not shown`);
    for (const name of panels) {
      const r = root.querySelector(`[data-bv="${name}"]`).getBoundingClientRect();
      if (r.top < 0 || r.left < 0 || r.bottom > window.innerHeight + 0.5 || r.right > window.innerWidth + 0.5
          || r.height === 0) {
        bad.push(`step ${marks[k].dataset.step}: ${name} ${Math.round(r.top)}..${Math.round(r.bottom)}`);
      }
    }
  }
  return [n, bad];
}"""


@pytest.mark.parametrize("presenter", [False, True], ids=["normal", "presenter"])
@pytest.mark.parametrize("sid", LESSONS)
def test_every_panel_of_every_step_is_on_screen(browser, server, sid, presenter, screenshots):
    query = f"scenario={sid}&lang=en" + ("&presenter=1" if presenter else "")
    page = browser.new_page(viewport={"width": SIZES[0][0], "height": SIZES[0][1]})
    page.goto(f"{server}/?{query}")
    page.wait_for_selector(READY, timeout=90_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    board = page.locator(BOARD)
    n = int(page.locator(HEADER).inner_text().rsplit(" ", 1)[1]) + 1
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(400)                        # the board refits after a resize
        for lang in ("en", "zh"):
            shown, bad = board.evaluate(WALK, list(PANELS))
            assert shown == n
            assert not bad, f"{sid} {width}x{height} {lang}: {bad}"
            if sid == "six-blocks":
                mode = "presenter" if presenter else "normal"
                name = f"board-{sid}-last-{lang}-{width}x{height}-{mode}.png"
                page.wait_for_timeout(700)                # the last step's motion ends
                page.screenshot(path=str(screenshots / name))
            page.locator(f'{BOARD} [data-act="lang"]').click()
    assert page.locator(NO_ERROR).count() == 0
    page.close()


def test_key_to_paint_is_measured_in_the_page(browser, server):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{server}/?scenario=six-blocks&lang=en")
    page.wait_for_selector(READY, timeout=90_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    times = page.evaluate(KEY_TO_PAINT, 20)
    assert len(times) == 20 and all(t >= 0 for t in times)
    print(f"\nkey → painted step: median {sorted(times)[10]:.0f} ms, worst {max(times):.0f} ms")
    assert page.locator(BOARD).get_attribute("data-bv-step") in {"0", "1"}   # it went back and forth
    page.close()


# one → (or ←) per step, timed from the key event to the frame after it painted
KEY_TO_PAINT = """(n) => new Promise(done => {
  const out = [];
  let i = 0;
  function one() {
    const t0 = performance.now();
    document.dispatchEvent(new KeyboardEvent('keydown', {key: i % 2 ? 'ArrowLeft' : 'ArrowRight',
                                                         bubbles: true}));
    requestAnimationFrame(() => setTimeout(() => {
      out.push(performance.now() - t0);
      if (++i < n) setTimeout(one, 60); else done(out);
    }, 0));
  }
  one();
})"""
