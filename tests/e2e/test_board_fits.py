"""The board reads from the back of the room: every built-in lesson, every step, at 1280×800 and
1920×1080, normal and presenter mode, in English and 中文 — the sizes a class can read (computed
style), every op line of the step whole and inside the viewport (not cut by a panel that scrolls),
every ref count and hash name on one line, the free queue on one line, the block cards in balanced
rows (no card alone on a row), one scale for every step of a lesson, every panel on screen, and at
1920×1080 a board that reaches the bottom of the screen; at 390×844 (a phone) a caption of 16 px or
more. The matrix walks each lesson's offline page (the board with its data inlined: no server), one
page per lesson, size and mode, stepping in the page and checking each step in one evaluate (both
languages in that page, with the board's own toggle); the app itself is checked on six-blocks
(tests/e2e/test_browser.py and the presenter test below). The 27 lessons' matrix (1,624 step
views) takes 3.5–6.5 min on the 2-core CI machine, 5–18 s a lesson: marked slow."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from .test_browser import BOARD, HEADER, IDLE, NO_ERROR, READY

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
SIZES = ((1280, 800), (1920, 1080))
PHONE = (390, 844)
ROOM = 17          # lessons of up to 16 blocks (and the null block) get presenter mode's sizes
# the least sizes, px: (caption, block id, ref count, op line)
PRESENTER = (28, 40, 24, 18)
NORMAL = (20, 0, 0, 0)
FILL = 0.9         # at 1920×1080 the board reaches at least this far down the screen
PANELS = ("caption", "blocks", "free-queue", "ops", "hash-table", "requests")

# In the page: show every step (a click on its timeline mark, as a user would) and measure it. One
# evaluate per lesson, size, mode and language; the failures come back as lines.
WALK = """(root, [least, panels, fill]) => {
  const [minCap, minId, minRef, minOp] = least;
  const vw = window.innerWidth, vh = window.innerHeight;
  const out = { bad: [], least: [1e9, 1e9, 1e9, 1e9], steps: 0, ops: 0 };
  const px = (e) => parseFloat(getComputedStyle(e).fontSize);
  const within = (r, q) => r.top >= q.top - 0.5 && r.left >= q.left - 0.5 && r.bottom <= q.bottom + 0.5
    && r.right <= q.right + 0.5;
  const view = { top: 0, left: 0, bottom: vh, right: vw };
  const shown = (e) => e.getClientRects().length > 0;
  // the first ancestor that clips (any overflow but visible) and cuts the element, or null
  const cutBy = (e) => {
    const r = e.getBoundingClientRect();
    for (let a = e.parentElement; a; a = a.parentElement) {
      const cs = getComputedStyle(a);
      const clips = cs.overflowX !== 'visible' || cs.overflowY !== 'visible';
      if (clips && !within(r, a.getBoundingClientRect())) {
        return a.className || a.tagName;
      }
    }
    return null;
  };
  const marks = root.querySelectorAll('.bvb-mk');
  for (const m of marks) {
    m.click();
    const k = m.dataset.step;
    out.steps++;
    if (root.getAttribute('data-bv-step') !== k) { out.bad.push(`step ${k}: not shown`); continue; }
    const small = (what, e, least, i) => {
      const s = px(e);
      out.least[i] = Math.min(out.least[i], s);
      if (s < least) out.bad.push(`step ${k}: ${what} ${s.toFixed(1)} px < ${least}`);
    };
    small('caption', root.querySelector('[data-bv="caption"]'), minCap, 0);
    for (const e of root.querySelectorAll('[data-bv="block-id"]')) small(`id ${e.textContent}`, e, minId, 1);
    for (const e of root.querySelectorAll('[data-bv="ref"]')) {
      small('ref count', e, minRef, 2);
      if (e.getClientRects().length !== 1) out.bad.push(`step ${k}: ref count "${e.textContent}" wraps`);
    }
    for (const e of root.querySelectorAll('[data-bv="blocks"] .bv-hash, [data-bv="hash-table"] .bv-hl')) {
      if (e.getClientRects().length > 1 || (shown(e) && e.getBoundingClientRect().height > 2 * px(e) * 1.1)) {
        out.bad.push(`step ${k}: hash name "${e.textContent}" wraps`);
      }
    }
    const ops = [...root.querySelectorAll('[data-bv="ops"] [data-bv="op"]')].filter(shown);
    out.ops += ops.length;
    for (const e of ops) {
      small('op line', e, minOp, 3);
      const n = e.querySelector('.bv-opn');              // its number too ("8–13" for a folded run)
      const why = !within(e.getBoundingClientRect(), view) ? 'the viewport' : cutBy(e) || (n && cutBy(n));
      if (why) out.bad.push(`step ${k}: op "${e.textContent.slice(0, 40)}" cut by ${why}`);
    }
    const any = root.querySelector('[data-bv="ops"] [data-bv="op"]');
    if (!ops.length && any) out.bad.push(`step ${k}: no op shown`);
    // the scale is the lesson's, not the step's
    const scale = root.getAttribute('data-bv-scale');
    if (out.scale === undefined) out.scale = scale;
    else if (scale !== out.scale) out.bad.push(`step ${k}: scale ${scale} != ${out.scale}`);
    // the free queue on one line; the cards in balanced rows (no card alone on a row)
    const tops = (sel) => [...root.querySelectorAll(sel)].map((e) => Math.round(e.getBoundingClientRect().y));
    const cells = [...root.querySelectorAll('.bv-queue-line .bv-q')].map((e) => {
      const r = e.getBoundingClientRect();
      return r.y + r.height / 2;                    // (cells marked "→ tail" are taller)
    });
    const n = cells.length;
    if (n && Math.max(...cells) - Math.min(...cells) > 2) out.bad.push(`step ${k}: the queue wraps`);
    const rows = {};
    for (const y of tops('[data-bv="blocks"] .bv-card:not(.bv-null)')) rows[y] = (rows[y] || 0) + 1;
    const counts = Object.values(rows);
    if (counts.length > 1 && counts.includes(1)) out.bad.push(`step ${k}: a lone card (${counts})`);
    // the board uses the screen: its panels reach down to the bottom of a big one
    const used = root.getBoundingClientRect().bottom / vh;
    if (fill && used < fill) out.bad.push(`step ${k}: the board ends at ${(100 * used).toFixed(0)}% of it`);
    for (const name of panels) {
      const p = root.querySelector(`[data-bv="${name}"]`);
      const r = p.getBoundingClientRect();
      const where = `${Math.round(r.top)}..${Math.round(r.bottom)}`;
      if (!within(r, view) || r.height === 0) out.bad.push(`step ${k}: ${name} ${where}`);
      else if (cutBy(p)) out.bad.push(`step ${k}: ${name} cut by ${cutBy(p)}`);
    }
  }
  return out;
}"""


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Each lesson's offline page (blockviz export), written once: {id: (path, blocks, langs)}."""
    from blockviz.export import export_html
    from blockviz.scenario import load
    from blockviz.sim.runner import run
    out = {}
    where = tmp_path_factory.mktemp("lessons")
    for sid in LESSONS:
        loaded = load(ROOT / "scenarios" / f"{sid}.yaml")
        _, tl = run(loaded, payloads=False)          # (the board draws no tensor)
        path = where / f"{sid}.html"
        path.write_text(export_html(tl, title=loaded.scenario.title.get("en"), lang="en",
                                    titles={lg: loaded.scenario.title.get(lg) for lg in ("en", "zh")},
                                    file=f"{sid}.yaml"), encoding="utf-8")
        out[sid] = (path, tl.num_gpu_blocks)
    return out


def _walk(page, least, fill: float = 0.0) -> dict:
    return page.locator(BOARD).evaluate(WALK, [list(least), list(PANELS), fill])


@pytest.mark.slow
@pytest.mark.parametrize("sid", LESSONS)
def test_every_step_reads_from_the_back_of_the_room(browser, pages, sid):
    path, blocks = pages[sid]
    t0 = time.monotonic()
    failures, seen = [], 0
    for width, height in SIZES:
        for presenter in (False, True):
            least = PRESENTER if presenter and blocks <= ROOM else NORMAL
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(path.as_uri() + ("#step=0&still&present" if presenter else "#step=0&still"))
            page.wait_for_selector(READY, timeout=20_000)
            for lang in ("en", "zh"):
                got = _walk(page, least, FILL if width >= 1920 else 0.0)
                seen += got["steps"]
                mode = "presenter" if presenter else "normal"
                failures += [f"{width}x{height} {mode} {lang} {b}" for b in got["bad"]]
                page.locator(f'{BOARD} [data-act="lang"]').click()
            page.close()
    page = browser.new_page(viewport={"width": PHONE[0], "height": PHONE[1]})
    page.goto(path.as_uri() + "#step=0&still")
    page.wait_for_selector(READY, timeout=20_000)
    for lang in ("en", "zh"):
        got = page.locator(BOARD).evaluate(WALK, [[16, 0, 0, 0], [], 0])
        failures += [f"phone {lang} {b}" for b in got["bad"] if "caption" in b or "not shown" in b]
        page.locator(f'{BOARD} [data-act="lang"]').click()
    page.close()
    print(f"\n{sid}: {seen} steps checked in {time.monotonic() - t0:.1f} s")
    assert not failures, f"{sid}: {len(failures)} failures\n" + "\n".join(failures[:20])


def test_presenter_mode_in_the_app_reads_from_the_back(browser, server, screenshots):
    """The app in presenter mode at 1280×800 and 1920×1080: the sidebar is closed, the board has
    the whole width and every step of six-blocks meets the room's sizes, in both languages (at
    1920×1080 the board reaches the screen's bottom); shots of steps 2, 6 and 8."""
    for width, height in SIZES:
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(f"{server}/?scenario=six-blocks&lang=en&presenter=1")
        page.wait_for_selector(READY, timeout=90_000)
        page.wait_for_selector(IDLE, timeout=60_000)
        assert page.locator('[data-testid="stSidebar"][aria-expanded="true"]').count() == 0
        board = page.locator(BOARD).evaluate("(b) => b.getBoundingClientRect().width")
        assert board > width * 0.9, (width, board)             # the board has the screen's width
        for lang in ("en", "zh"):
            got = _walk(page, PRESENTER, FILL if width >= 1920 else 0.0)
            assert got["steps"] == 9 and not got["bad"], got["bad"]
            for k in (2, 6, 8):
                page.locator(f'{BOARD} .bvb-mk[data-step="{k}"]').click()
                page.wait_for_timeout(700)                     # the step's motion ends
                if k == 6:          # the op the caption names is marked: the step's point
                    key = page.locator(f'{BOARD} [data-bv="op"].bv-key').all_text_contents()
                    assert [x.lstrip("0123456789")[:6] for x in key] == ["touch("], key
                shot = f"presenter-six-blocks-{k}-{lang}-{width}x{height}.png"
                page.screenshot(path=str(screenshots / shot))
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
    assert page.locator(HEADER).count() == 1
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
