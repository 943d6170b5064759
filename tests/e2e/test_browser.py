"""The player in a real browser: stepping with the Next button and with the keyboard, no error
element, and screenshots of both languages at laptop and projector sizes (presenter mode too)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

HEADER = '[data-bv="board"] .bv-stepno'
BOARD = '[data-bv="board"]'
READY = '[data-bv="board"][data-bv-ready="1"]'
NO_ERROR = '[data-testid="stException"]'
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
PANELS = ("blocks", "free-queue", "hash-table", "requests")


def open_page(browser, url: str, query: str, width: int = 1280, height: int = 800):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(f"{url}/?{query}")
    page.wait_for_selector(READY, timeout=90_000)      # Playwright's CSS pierces the shadow root
    page.wait_for_selector(IDLE, timeout=60_000)
    return page


def wait_header(page, text: str) -> None:
    """The board's step header reads ``text``."""
    expect(page.locator(HEADER)).to_have_text(text, timeout=30_000)


def queue_text(page) -> str:
    return " ".join(page.locator('[data-bv="free-queue"] .bv-qid').all_inner_texts())


def board_step(page) -> int:
    return int(page.locator(BOARD).get_attribute("data-bv-step"))


def act(page, what: str) -> None:
    page.locator(f'{BOARD} [data-act="{what}"]').click()


def test_walk_six_blocks_with_the_board_buttons(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=en")
    wait_header(page, "step 0 of 8")
    assert queue_text(page) == "1 2 3 4 5 6"
    for k in range(1, 5):
        act(page, "next")
        wait_header(page, f"step {k} of 8")
    assert queue_text(page) == "4 3 5 6 2 1"
    assert page.locator(NO_ERROR).count() == 0
    page.wait_for_function("() => location.search.includes('step=4')", timeout=10_000)
    page.close()


def test_walk_six_blocks_with_the_arrow_key_and_back(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=zh")
    wait_header(page, "第 0 步 / 共 8 步")
    for k in range(1, 5):
        page.keyboard.press("ArrowRight")
        wait_header(page, f"第 {k} 步 / 共 8 步")
    assert queue_text(page) == "4 3 5 6 2 1"
    expect(page).to_have_url(re.compile(r"step=4"))  # (written once the step is painted)
    page.go_back()                                   # a history entry per step
    wait_header(page, "第 3 步 / 共 8 步")
    assert "step=3" in page.url
    page.keyboard.press("End")
    wait_header(page, "第 8 步 / 共 8 步")
    page.keyboard.press("Home")
    wait_header(page, "第 0 步 / 共 8 步")
    page.locator(f'{BOARD} .bvb-mk[data-step="6"]').click()     # the timeline jumps
    wait_header(page, "第 6 步 / 共 8 步")
    assert page.locator(NO_ERROR).count() == 0
    page.close()


def test_stepping_costs_the_server_no_rerun(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=en")
    runs = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda f: runs.append(f)))
    page.reload()
    page.wait_for_selector(READY, timeout=90_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    page.wait_for_timeout(600)
    sent = len(runs)
    for _ in range(5):
        page.keyboard.press("ArrowRight")
    wait_header(page, "step 5 of 8")
    page.wait_for_timeout(800)                        # past the report debounce
    assert len(runs) == sent, "stepping sent the server a message"
    page.close()


def test_stepping_never_refits_the_board_but_a_narrower_window_does(browser, server):
    """The fit (it lays out every step to find the tallest) runs when the page opens and when
    the board's width or the window changes — never because a step's content is taller or
    shorter than the last one's, which would stall the next key."""
    page = open_page(browser, server, "scenario=six-blocks&lang=en")
    fits = lambda: int(page.locator(BOARD).get_attribute("data-bv-fits"))  # noqa: E731
    before = fits()
    for k in range(1, 9):
        page.keyboard.press("ArrowRight")
        wait_header(page, f"step {k} of 8")
        page.wait_for_timeout(250)                    # past the resize debounce (150 ms)
    for _ in range(8):
        page.keyboard.press("ArrowLeft")
    wait_header(page, "step 0 of 8")
    page.wait_for_timeout(400)
    assert fits() == before, "a step refitted the board"
    page.set_viewport_size({"width": 1100, "height": 800})
    expect(page.locator(BOARD)).not_to_have_attribute("data-bv-fits", str(before), timeout=10_000)
    page.close()


def test_a_dense_pool_paints_each_block_in_its_kind_colour(browser, server, screenshots):
    """The dense view (a pool over 32 blocks) draws a cell per block on a canvas, row by row
    under a block-id axis: at a step of a 40-block test pool (opened as a share link), a cell of
    every kind on the board shows that kind's colour, where Python's data for the step puts it."""
    from pathlib import Path

    from blockviz.render import board as RB
    from blockviz.scenario.load import load_text
    from blockviz.scenario.share import encode
    from blockviz.sim.runner import run
    from blockviz.teach.labels import HashLabels

    text = (Path(__file__).resolve().parents[1] / "render" / "scenarios" / "long-dense.yaml").read_text()
    _, tl = run(load_text(text, "long-dense.yaml"))
    br = RB.BoardRun(tl, HashLabels.for_timeline(tl), [frozenset()] * len(tl), {"en": "big"})
    data = RB.board_data(br, langs=["en"], around=61)
    cells = data.cells[61 - data.lo]["cells"]
    page = open_page(browser, server, f"s={encode(text)}&step=61&lang=en")
    expect(page.locator(BOARD)).to_have_attribute("data-bv-step", "61")
    page.wait_for_timeout(300)
    picks = {kind: cells.index(kind) for kind in sorted(set(cells))}
    assert len(picks) >= 3, picks                     # null, cached, free at least
    got = page.locator(f"{BOARD} canvas.bvb-cv").evaluate("""(cv, ids) => {
      const axis = 34, cols = Number(cv.dataset.cols), cell = (parseFloat(cv.style.width) - axis) / cols;
      const g = cv.getContext('2d'), s = cv.width / parseFloat(cv.style.width);
      return ids.map((i) => { const x = axis + (i % cols) * cell + cell / 3,
                                    y = 14 + Math.floor(i / cols) * cell + cell / 3;
        const p = g.getImageData(Math.floor(x * s), Math.floor(y * s), 1, 1).data;
        return '#' + [p[0], p[1], p[2]].map((v) => v.toString(16).padStart(2, '0')).join(''); });
    }""", list(picks.values()))
    want = [data.kind_colours[k].lower() for k in picks]
    assert got == want, dict(zip(picks, zip(got, want)))
    # the marks drawn on the canvas read the theme's palette from the board's stylesheet
    from blockviz.render.theme import AMBER, RED
    assert page.locator(f"{BOARD} canvas.bvb-cv").evaluate(
        "(cv) => ['amber', 'red'].map((n) => getComputedStyle(cv).getPropertyValue('--bv-' + n).trim())"
    ) == [AMBER, RED]
    # a pool this small gets cells big enough to see from the back of a room, not 64 specks a row
    cols, cell = page.locator(f"{BOARD} canvas.bvb-cv").evaluate(
        "(cv) => [Number(cv.dataset.cols), (parseFloat(cv.style.width) - 34) / Number(cv.dataset.cols)]")
    assert cols == 16 and cell >= 20, (cols, cell)
    page.screenshot(path=str(screenshots / "long-dense-step61-en-1280x800.png"))
    page.close()


def test_space_plays_and_pauses(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=en&step=6")
    wait_header(page, "step 6 of 8")
    page.keyboard.press("Space")                # 1x = one step every 2 s
    wait_header(page, "step 7 of 8")
    page.keyboard.press("Space")
    expect(page.locator(f'{BOARD} [data-act="play"]')).to_have_attribute("aria-label", "Play")
    assert page.locator(NO_ERROR).count() == 0
    page.close()


def test_hover_links_a_request_to_its_blocks_everywhere(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=en&step=2")
    page.locator('[data-bv="requests"] [data-request="A"]').hover()
    lit = page.locator('[data-bv="blocks"] .bv-card.bv-lit')
    expect(lit).to_have_count(3)
    assert sorted(lit.evaluate_all("es => es.map(e => e.dataset.block)")) == ["1", "2", "3"]
    # a block: the same block lights in the hash table and the request tables too
    page.locator('[data-bv="blocks"] .bv-card[data-block="1"]').hover()
    assert page.locator('[data-bv="hash-table"] .bv-lit[data-block="1"]').count() == 1
    assert page.locator('[data-bv="requests"] .bv-b.bv-lit[data-block="1"]').count() == 2  # A and B
    assert "A B" in page.locator('[data-bv="blocks"] .bv-card[data-block="1"] .bv-held').inner_text()
    page.close()


def test_the_language_switches_on_the_board_without_a_rerun(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=en&step=4")
    wait_header(page, "step 4 of 8")
    act(page, "lang")
    wait_header(page, "第 4 步 / 共 8 步")
    assert "空闲队列" in page.locator('[data-bv="free-queue"] .bvb-t').inner_text()
    page.wait_for_selector(IDLE, timeout=30_000)      # Python follows: the sidebar and page names
    expect(page.locator('[data-testid="stSidebarNav"]')).to_contain_text("播放器", timeout=30_000)
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
    page.wait_for_selector(f"{BOARD} .bv-code .bv-cur", timeout=30_000)
    assert "append_n(to_tail)" in page.locator(f"{BOARD} .bv-code .bv-cur").inner_text()
    page.keyboard.press("ArrowRight")                # op by op, in the browser
    expect(page.locator(BOARD)).to_have_attribute("data-bv-frame", "3")
    page.wait_for_timeout(800)
    page.screenshot(path=str(screenshots / "six-blocks-step4-op3-en-1280x800-into.png"))
    assert page.locator(NO_ERROR).count() == 0
    page.close()


FRAME_STATE = """(root) => {
  const cards = {}, reqs = [];
  for (const c of root.querySelectorAll('[data-bv="blocks"] .bv-card[data-block]')) {
    const id = Number(c.getAttribute('data-block'));
    if (!id) continue;                                      // the null block
    const counts = c.querySelectorAll('.bv-ref b');         // "1→2": the last is the count now
    const held = c.querySelector('.bv-held');
    cards[id] = {ref: Number(counts[counts.length - 1].textContent),
                 held: held ? held.textContent.split(' ').filter(Boolean).sort() : []};
  }
  for (const r of root.querySelectorAll('[data-bv="requests"] .bv-req[data-request]')) {
    const st = [...r.querySelector('.bv-st').classList].find((c) => c.startsWith('bv-st-'));
    const ids = [...r.querySelectorAll('.bv-bt [data-block]')].map((e) => e.getAttribute('data-block'));
    reqs.push({id: r.getAttribute('data-request'), status: st.slice(6), blocks: ids.map(Number)});
  }
  return {step: root.getAttribute('data-bv-step'), frame: root.getAttribute('data-bv-frame'), cards, reqs};
}"""


def test_every_op_frame_shows_requests_that_agree_with_the_blocks(browser, server):
    """Stepping into every event of six-blocks, op by op: at each frame the request panel's block
    tables hold exactly the blocks the cards count (a card's ref_cnt is the number of tables
    listing it, and the requests a card names are the unfinished ones listing it), a running
    request holds blocks and a finished one none. At op 1 of step 1, A has only arrived: waiting,
    no blocks, nothing computed, while every card shows ref_cnt 0."""
    page = open_page(browser, server, "scenario=six-blocks&step=1&op=1&lang=en")
    board = page.locator(BOARD)
    expect(board).to_have_attribute("data-bv-frame", "0")
    first = board.evaluate(FRAME_STATE)
    assert all(c["ref"] == 0 for c in first["cards"].values())
    assert [(r["id"], r["status"], r["blocks"]) for r in first["reqs"]] == [("A", "waiting", [])]
    assert "0 of 10 tokens computed" in page.locator(f'{BOARD} [data-request="A"]').inner_text()
    seen, at = [], None
    while True:
        state = board.evaluate(FRAME_STATE)
        where = (state["step"], state["frame"])
        if where == at:                                   # the last op of the last step
            break
        at = where
        seen.append(where)
        for b, card in state["cards"].items():
            tables = [r for r in state["reqs"] if int(b) in r["blocks"]]
            assert card["ref"] == len(tables), (where, b, card, state["reqs"])
            assert card["held"] == sorted(r["id"] for r in tables if r["status"] != "finished"), \
                (where, b, card)
        for r in state["reqs"]:
            assert r["status"] != "running" or r["blocks"], (where, r)
            assert r["status"] != "finished" or not r["blocks"], (where, r)
        page.keyboard.press("ArrowRight")
        page.wait_for_function("() => true")
        for _ in range(50):                                # the next frame, or the end
            if (board.get_attribute("data-bv-step"), board.get_attribute("data-bv-frame")) != at:
                break
            page.wait_for_timeout(40)
    assert seen[-1][0] == "8" and len(seen) >= 45          # every op of steps 1..8
    assert page.locator(NO_ERROR).count() == 0
    page.close()


OPS_STATE = """(root) => {
  const body = root.querySelector('.bvb-ops .bvb-body');
  const lines = [...body.querySelectorAll('[data-bv="op"]')];
  return {step: root.getAttribute('data-bv-step'), frame: root.getAttribute('data-bv-frame'),
          page: root.querySelector('.bvb-page').textContent,
          code: body.querySelectorAll('.bv-codeli').length,
          lines_with_code: lines.filter((e) => e.querySelector('.bv-code')).length,
          lines_without_call: lines.filter((e) => !e.querySelector('.bv-call, .bv-opn')).length};
}"""


def test_step_into_across_steps_keeps_every_op_line_a_line(browser, server):
    """Stepping into chunked-prefill op by op across its steps, at a size where the ops page: the
    step-into line's code box stays one box under its line, no op line holds code instead of its
    call, and the page text counts forward ('ops 6–2 of 10' was a line of the next step taken for
    the code box)."""
    page = open_page(browser, server, "scenario=chunked-prefill&step=2&op=1&lang=en", 1024, 640)
    board = page.locator(BOARD)
    expect(board).to_have_attribute("data-bv-frame", "0")
    seen, at = 0, None
    while True:
        state = board.evaluate(OPS_STATE)
        where = (state["step"], state["frame"])
        if where == at:
            break
        at, seen = where, seen + 1
        assert state["code"] <= 1 and state["lines_with_code"] == 0, (where, state)
        assert state["lines_without_call"] == 0, (where, state)
        m = re.search(r"(\d+)–(\d+) of (\d+)", state["page"])
        assert m is None or int(m[1]) <= int(m[2]) <= int(m[3]), (where, state["page"])
        page.keyboard.press("ArrowRight")
        for _ in range(50):
            if (board.get_attribute("data-bv-step"), board.get_attribute("data-bv-frame")) != at:
                break
            page.wait_for_timeout(40)
    assert int(at[0]) >= 4 and seen >= 10
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


def test_a_chinese_link_names_the_pages_in_chinese_at_once(browser, server):
    page = open_page(browser, server, "scenario=six-blocks&lang=zh")
    expect(page.locator('[data-testid="stSidebarNav"]')).to_contain_text("播放器", timeout=30_000)
    assert "Player" not in page.locator('[data-testid="stSidebarNav"]').inner_text()
    page.close()
