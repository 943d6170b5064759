"""The capacity-planning page in a real browser: compute a plan, both charts drawn with one line
per free order and axis titles in the page's language, no error element; screenshots of both
languages at 1280×800 (artifacts/screenshots/capacity-*.png): the top of the page, and the charts
with the explanation beside them. On the "Real traffic" tab: upload a malformed trace (its located
line shown in the page's language), then a good one, sweep it, read the knee, and open a window of
it in the player (artifacts/screenshots/capacity-trace-*.png)."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .test_authoring_browser import click_key
from .test_browser import IDLE, NO_ERROR

pytestmark = pytest.mark.browser

WORDS = {"en": ("Capacity planning", "pool size (blocks)", "prefix-cache hit rate", "How to read it"),
         "zh": ("容量规划", "块池大小（块）", "前缀缓存命中率", "怎么读这张图")}


def open_capacity(browser, url: str, lang: str):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{url}/capacity")
    page.wait_for_selector(".st-key-b_cap_compute button", timeout=90_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    if lang == "zh":
        page.locator('[data-testid="stSidebar"] button:has-text("中文")').click()
        page.get_by_text("KV 缓存块池要多大？").first.wait_for(timeout=30_000)
        page.wait_for_selector(IDLE, timeout=30_000)
    return page


ERROR_BOX = '[data-testid="stAlertContentError"]'
FORM_DEFAULTS = {"block_size": "16", "num_events": "300", "prefix_blocks": "4", "new_tokens": "12",
                 "num_prefixes": "2", "max_live": "4", "max_turns": "4", "seed": "0", "num_sizes": "8"}


def form_values(page) -> dict:
    """What the workload form's fields show (the block size's box is an input too)."""
    return {name: page.locator(f".st-key-w_cap_{name} input").input_value() for name in FORM_DEFAULTS}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compute_a_plan_and_read_the_chart(browser, server, screenshots, lang):
    title, x_title, y_title, how = WORDS[lang]
    page = open_capacity(browser, server, lang)
    # the form shows the generator's defaults, in either language (a switch soon after the page
    # opened once redrew it with 0 in every field and the first block size: the form refused it)
    assert form_values(page) == FORM_DEFAULTS
    page.locator(".st-key-w_cap_num_events input").fill("200")
    page.locator(".st-key-w_cap_num_events input").press("Tab")
    page.wait_for_timeout(300)                  # the value's own rerun starts ...
    page.wait_for_selector(IDLE, timeout=60_000)   # ... and ends before the click
    click_key(page, "b_cap_compute")
    # the charts, or the message that says why there are none
    page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot').length === 2 || "
                           f"document.querySelector('{ERROR_BOX}') !== null", timeout=90_000)
    assert page.locator(ERROR_BOX).all_inner_texts() == []
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    hit = page.locator(".js-plotly-plot").first
    assert hit.locator("g.scatterlayer g.trace").count() == 2       # one line per free order
    legend = " ".join(hit.locator("g.legend text").all_text_contents())
    assert "split" in legend and "append" in legend
    axes = " ".join(hit.locator("g.infolayer text").all_text_contents())
    assert x_title in axes and y_title in axes
    assert page.get_by_text(how).count() >= 1
    assert page.get_by_text(title).count() >= 1
    page.screenshot(path=str(screenshots / f"capacity-top-{lang}-1280x800.png"))
    page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
    page.mouse.move(640, 400)
    page.mouse.wheel(0, 250)
    page.wait_for_timeout(500)
    page.screenshot(path=str(screenshots / f"capacity-charts-{lang}-1280x800.png"))
    page.close()


# -- real traffic: an uploaded trace -------------------------------------------------------------
TRACE_WORDS = {"en": ("Real traffic: a trace", "400 requests", "the knee is at",
                      "KV-cache capacity (tokens, GiB)", "This trace cannot be used: bad.jsonl:2:"),
               "zh": ("真实流量：trace", "400 个请求", "拐点在", "KV 缓存容量（token，GiB）",
                      "这个 trace 无法使用：bad.jsonl:2:")}


def _upload(page, path) -> None:
    page.locator(".st-key-w_capt_upload input[type=file]").set_input_files(str(path))


def _curve_of(page, path, loaded: str):
    """Upload a trace, compute it in sequence mode (4 sizes for MIN): the curve element, drawn."""
    _upload(page, path)
    page.get_by_text(loaded).first.wait_for(timeout=60_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    page.locator(".st-key-w_capt_num_sizes input").fill("4")
    page.locator(".st-key-w_capt_num_sizes input").press("Tab")
    page.wait_for_timeout(300)
    page.wait_for_selector(IDLE, timeout=60_000)
    click_key(page, "b_capt_compute")
    chart = page.locator('[data-bv="curve"]')
    chart.locator("svg.bvc-plot path.bvc-knee").first.wait_for(timeout=180_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    return chart


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_uploaded_trace_is_swept_and_a_window_opens_in_the_player(browser, server, screenshots, lang,
                                                                      tmp_path):
    from blockviz.teach.tracegen import TraceWorkload, write_generated
    tab, loaded, knee_words, x_title, bad_words = TRACE_WORDS[lang]
    scaled = {"en": "Scaled down for the player", "zh": "为播放器按比例缩小"}[lang]
    good = tmp_path / "chat.jsonl"
    with open(good, "w", encoding="utf-8") as f:
        write_generated(TraceWorkload(kind="multi_turn", requests=400, seed=3), f)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
                   '{"timestamp": 1, "input_length": 700, "output_length": 1, "hash_ids": [1]}\n')
    page = open_capacity(browser, server, lang)
    page.get_by_role("tab", name=tab).click()
    page.wait_for_selector(".st-key-w_capt_upload input[type=file]", state="attached", timeout=30_000)
    # a malformed line: one located line in the page's language, no traceback
    _upload(page, bad)
    page.get_by_text(bad_words).first.wait_for(timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    assert page.get_by_text("hash_ids").count() >= 1
    # a good trace replaces it
    chart = _curve_of(page, good, loaded)
    assert page.locator(NO_ERROR).count() == 0
    assert chart.locator("path.bvc-line").count() == 3              # two orders, MIN
    assert x_title in " ".join(chart.locator("svg text").all_text_contents())
    assert page.get_by_text(knee_words).count() >= 1
    chart.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / f"capacity-trace-{lang}-1280x800.png"))
    # open a window of it in the player
    click_key(page, "b_capt_open_player")
    page.wait_for_selector(".bv-stepno", timeout=60_000)              # the player, on the window
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    assert "/capacity" not in page.url
    page.get_by_text(scaled).first.wait_for(timeout=30_000)           # its start note says the scale
    page.locator('[data-bv="board"] [data-act="next"]').click()      # the board steps it
    expect(page.locator('[data-bv="requests"]')).to_contain_text("L1")   # the window's first request
    page.close()


# -- the whole curve: drag the capacity marker ----------------------------------------------------
CURVE_WORDS = {"en": ("Real traffic: a trace", "400 requests", "knee:", "Best possible (Belady's MIN)",
                      "at {pool} blocks"),
               "zh": ("真实流量：trace", "400 个请求", "拐点：", "最好的可能（Belady 的 MIN）",
                      "块池 {pool} 块")}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_drag_the_capacity_marker_and_read_the_curve(browser, server, screenshots, lang, tmp_path):
    """The curve element in a real browser: a drag moves the marker and the readout shows, at
    once (before Python hears of it), the hits the one pass gives at that pool size; let go,
    Python takes the pool (the player box shows it) and the player opens there. Screenshots at
    1280x800 and 1920x1080 (artifacts/screenshots/capacity-curve-*.png)."""
    from blockviz.scenario.trace import read_trace
    from blockviz.sim.curve import curve_sequence
    from blockviz.teach.tracegen import TraceWorkload, write_generated
    tab, loaded, knee_words, best_words, player_words = CURVE_WORDS[lang]
    good = tmp_path / "chat.jsonl"
    with open(good, "w", encoding="utf-8") as f:
        write_generated(TraceWorkload(kind="multi_turn", requests=400, seed=3), f)
    reqs = read_trace(good)
    curves = {o: curve_sequence(reqs, block_size=16, free_order=o) for o in ("split", "append")}
    queries = sum(r.input_length for r in reqs)
    page = open_capacity(browser, server, lang)
    page.get_by_role("tab", name=tab).click()
    page.wait_for_selector(".st-key-w_capt_upload input[type=file]", state="attached", timeout=30_000)
    chart = _curve_of(page, good, loaded)
    assert page.locator(NO_ERROR).count() == 0
    assert chart.get_by_text(knee_words).count() >= 1 and chart.get_by_text(best_words).count() >= 1
    assert chart.locator("path.bvc-line").count() == 3       # split, append, MIN
    assert chart.locator("path.bvc-gap").count() == 1        # the policy gap between LRU and MIN
    plot = chart.locator("svg.bvc-plot")
    plot.scroll_into_view_if_needed()
    box = plot.bounding_box()

    def read() -> tuple[int, dict[str, int], dict[str, str]]:
        pool = int(chart.get_attribute("data-pool"))
        cards = chart.locator(".bvc-card[data-order]")
        hits = {c.get_attribute("data-order"): int(c.get_attribute("data-hits")) for c in cards.all()}
        shown = {c.get_attribute("data-order"): c.locator(".bvc-cv").inner_text() for c in cards.all()}
        return pool, hits, shown

    def check(pool: int, hits: dict, shown: dict) -> None:
        for o, c in curves.items():
            assert hits[o] == c.point(pool)["hits"], (o, pool)
            assert shown[o] == f"{100 * hits[o] / queries:.1f}%"

    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.25, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.55, y, steps=6)
    during = read()                                        # still pressed: Python has not heard
    check(*during)
    page.mouse.move(box["x"] + box["width"] * 0.7, y, steps=4)
    page.mouse.up()
    pool, hits, shown = read()
    assert pool != during[0]
    check(pool, hits, shown)
    # Python takes the pool once it is let go: the player box's input shows it
    page.wait_for_function(
        "p => document.querySelector('.st-key-w_capt_pool input').value.replace(/,/g, '') === p",
        arg=str(pool), timeout=30_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    assert int(chart.get_attribute("data-pool")) == pool   # the rerun did not pull it back
    for w, h in ((1280, 800), (1920, 1080)):
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(400)
        plot.scroll_into_view_if_needed()
        page.mouse.wheel(0, -120)
        page.wait_for_timeout(300)
        page.screenshot(path=str(screenshots / f"capacity-curve-{lang}-{w}x{h}.png"))
    page.set_viewport_size({"width": 1280, "height": 800})
    # the keys move it one block at a time, read at once as well
    plot.focus()
    page.keyboard.press("ArrowRight")
    after = read()
    assert after[0] == pool + 1
    check(*after)
    page.wait_for_function(
        "p => document.querySelector('.st-key-w_capt_pool input').value.replace(/,/g, '') === p",
        arg=str(pool + 1), timeout=30_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    click_key(page, "b_capt_open_player")
    page.wait_for_selector(".bv-stepno", timeout=60_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    assert page.get_by_text(player_words.format(pool=f"{pool + 1:,}")).count() >= 1
    page.close()


CHAT_WORDS = {"en": ("Real traffic: a trace", "{n} requests", "hit at this pool", "This conversation"),
              "zh": ("真实流量：trace", "{n} 个请求", "在这个块池下命中", "这段对话")}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_bailian_traces_conversation_turn_by_turn(browser, server, screenshots, lang, tmp_path):
    """A Qwen-Bailian trace uploaded: its curve, then its conversations replayed at the marker's
    pool size, one drawn turn by turn (artifacts/screenshots/capacity-chats-*.png)."""
    from ..app.test_capacity import bailian_chats
    tab, loaded, hit_words, words = CHAT_WORDS[lang]
    path = tmp_path / "qwen_demo_blksz_16.jsonl"
    loaded = loaded.format(n=f"{bailian_chats(path, chats=120, seed=5):,}")
    page = open_capacity(browser, server, lang)
    page.get_by_role("tab", name=tab).click()
    page.wait_for_selector(".st-key-w_capt_upload input[type=file]", state="attached", timeout=30_000)
    chart = _curve_of(page, path, loaded)
    pool = int(chart.get_attribute("data-pool"))
    click_key(page, "b_capt_chats")
    page.wait_for_selector(".st-key-capt_chat_chart .js-plotly-plot", timeout=120_000)
    page.wait_for_selector(IDLE, timeout=60_000)
    assert page.locator(NO_ERROR).count() == 0
    bars = page.locator(".st-key-capt_chat_chart .js-plotly-plot")
    assert bars.locator("g.barlayer g.trace").count() == 3            # hit, lost, new
    assert hit_words in " ".join(bars.locator("g.legend text").all_text_contents())
    assert page.get_by_text(words).count() >= 1
    assert page.get_by_text(f"{pool:,}").count() >= 1                 # the button said the pool
    for w, h in ((1280, 800), (1920, 1080)):
        page.set_viewport_size({"width": w, "height": h})
        page.wait_for_timeout(400)
        page.locator(".st-key-b_capt_chats").evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        page.screenshot(path=str(screenshots / f"capacity-chats-{lang}-{w}x{h}.png"))
    page.close()
