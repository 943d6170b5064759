"""A recording on the board in a real browser (issue 30): the Live page opens a capture of vLLM
0.33.0's real publisher by upload and steps through it, a batch a step (the forest and the batch's
events at step k; ← → and the timeline); hovering a hash lights the events that name it, hovering
an event lights its hashes; a bad file is refused where it is bad, in both languages; the exported
page does the same offline. Screenshots at 1280×800 in both languages
(artifacts/screenshots/replay-*.png)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from blockviz.export import export_recording_html
from blockviz.live.replay import read_recording

pytestmark = pytest.mark.browser

CAPTURES = Path(__file__).resolve().parents[1] / "live" / "captures"
PRESSURE = CAPTURES / "pressure.jsonl"
GONE = "GPU/0:973aa91ed5b18194"          # the hash pressure's seq 2 removes (C's block, to B)
BOARD = '[data-bv="board"]'


def _open(page, url: str, path: Path, lang: str) -> None:
    page.goto(f"{url}/live")
    page.get_by_text(re.compile("A running vLLM|运行中的 vLLM")).first.wait_for(timeout=90_000)
    if lang == "zh":
        page.locator('[data-testid="stSidebar"] button:has-text("中文")').click()
    choice = page.get_by_text("一段录制" if lang == "zh" else "A recording", exact=True)
    choice.wait_for(timeout=90_000)
    choice.click()
    page.locator('input[type="file"]').set_input_files(str(path))


def _hover_links(page) -> None:
    """At step 3 (after seq 2): the removed hash's chip in the forest lights the BlockRemoved
    line; the BlockRemoved line lights the chip."""
    board = page.locator(BOARD)
    chip = board.locator(f'[data-bv="blocks"] [data-block="{GONE}"]').first
    line = board.locator('[data-bv="ops"] .bv-opl').first
    expect(line).not_to_have_class("bv-opl bvr-BlockRemoved bv-lit")
    chip.hover()
    expect(line).to_have_class("bv-opl bvr-BlockRemoved bv-lit")
    board.locator('[data-bv="header"]').hover()
    expect(line).not_to_have_class("bv-opl bvr-BlockRemoved bv-lit")
    line.locator(".bv-call").hover()
    expect(chip).to_have_class("bvr-h bvr-gone bv-lit")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_recording_opens_on_the_board_and_links_hashes_to_events(browser, server, screenshots,
                                                                   lang):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    _open(page, server, PRESSURE, lang)
    page.wait_for_selector(f'{BOARD}[data-bv-ready="1"]', timeout=90_000)
    board = page.locator(BOARD)
    head = board.locator(".bv-stepno")
    expect(head).to_have_text("开始" if lang == "zh" else "Start")
    board.locator('[data-bv="caption"]').click()     # (the focus leaves the file's input)
    page.keyboard.press("ArrowRight")
    expect(head).to_have_text("第 1 批，共 5 批" if lang == "zh" else "batch 1 of 5")
    assert board.locator('[data-bv="ops"] .bv-call').all_inner_texts() == ["BlockStored"] * 3
    assert board.locator('[data-bv="blocks"] .bvr-h.bvr-new').count() == 4
    board.locator('.bvb-mk[data-step="3"]').click()          # the timeline
    expect(head).to_have_text("第 3 批，共 5 批" if lang == "zh" else "batch 3 of 5")
    assert board.locator('[data-bv="ops"] .bv-call').all_inner_texts() == ["BlockRemoved"]
    assert board.locator('[data-bv="blocks"] .bvr-h:not(.bvr-gone)').count() == 4
    assert board.locator(f'[data-bv="blocks"] .bvr-gone[data-block="{GONE}"]').count() == 1
    page.screenshot(path=str(screenshots / f"replay-{lang}-1280x800.png"))
    _hover_links(page)
    page.keyboard.press("End")
    expect(head).to_have_text("第 5 批，共 5 批" if lang == "zh" else "batch 5 of 5")
    assert not errors


@pytest.mark.parametrize("lang, said", [("en", "notes.jsonl, line 1: not a KV-event recording"),
                                        ("zh", "notes.jsonl，第 1 行：不是 KV 事件录制")])
def test_a_bad_file_is_refused_where_it_is_bad(browser, server, tmp_path, lang, said):
    bad = tmp_path / "notes.jsonl"
    bad.write_text("id: six-blocks\nsteps: []\n")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    _open(page, server, bad, lang)
    expect(page.locator('[data-testid="stAlertContentError"]')).to_contain_text(said, timeout=60_000)
    assert page.locator(BOARD).count() == 0


def test_the_exported_recording_steps_offline_and_links(browser, tmp_path, screenshots):
    path = tmp_path / "pressure.html"
    path.write_text(export_recording_html(read_recording(PRESSURE), lang="en", start=3),
                    encoding="utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    asked: list[str] = []

    def only_the_file(route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            asked.append(route.request.url)
            route.abort()
    page.route("**/*", only_the_file)
    page.goto(path.as_uri())
    page.wait_for_selector(f'{BOARD}[data-bv-ready="1"]', timeout=10_000)
    head = page.locator(f"{BOARD} .bv-stepno")
    expect(head).to_have_text("batch 3 of 5")
    _hover_links(page)
    page.keyboard.press("ArrowRight")
    expect(head).to_have_text("batch 4 of 5")
    page.locator(f'{BOARD} [data-act="lang"]').click()
    expect(head).to_have_text("第 4 批，共 5 批")
    page.screenshot(path=str(screenshots / "replay-export-zh-1280x800.png"))
    assert asked == []


def test_blockviz_app_recording_opens_by_link(browser):
    """``blockviz app --recording FILE``: /live?recording=NAME opens it on the board."""
    from .conftest import app_server
    with app_server("--recording", str(PRESSURE), "--recording",
                    str(CAPTURES / "tenants-and-lora.jsonl"), log_name="e2e-replay-server.log") as url:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{url}/live?recording=tenants-and-lora.jsonl")
        page.wait_for_selector(f'{BOARD}[data-bv-ready="1"]', timeout=90_000)
        page.locator(f'{BOARD} [data-act="last"]').click()
        expect(page.locator(f"{BOARD} .bv-stepno")).to_have_text("batch 4 of 4")
        expect(page.locator(f'{BOARD} [data-bv="blocks"]')).to_contain_text("cache_salt globex")


def test_a_long_recording_is_stepped_in_windows(browser, server, tmp_path):
    """A recording whose steps do not fit one board's data: the board holds a window and asks the
    page for the next at its edge (End, then ← and a click far back on the timeline)."""
    from bench.replay import make_recording
    path = tmp_path / "long.jsonl"
    make_recording(str(path), 1 << 20)                   # ~2,000 batches: 1,000 kept, windows
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    _open(page, server, path, "en")
    page.wait_for_selector(f'{BOARD}[data-bv-ready="1"]', timeout=90_000)
    board = page.locator(BOARD)
    head = board.locator(".bv-stepno")
    board.locator('[data-bv="caption"]').click()
    page.keyboard.press("End")
    expect(head).to_have_text("batch 1000 of 1000", timeout=60_000)
    expect(board.locator('[data-bv="ops"] .bv-call').first).to_have_text("BlockRemoved")
    page.keyboard.press("ArrowLeft")
    expect(head).to_have_text("batch 999 of 1000")
    board.locator('.bvb-mk[data-step="0"]').click()
    expect(head).to_have_text("Start", timeout=60_000)
