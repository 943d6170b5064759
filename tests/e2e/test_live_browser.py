"""The Live page in a real browser against a publisher on loopback: blockviz's own publisher
(blockviz.live.publish, vLLM's wire format) sends the toolkit's pressure scenario one batch at a
time, and the page's forest grows and shrinks with it — cached count, rows, the removed list —
in both languages; screenshots at 1280×800 (artifacts/screenshots/live-*.png).

The server is its own (``blockviz app --live`` with this test's endpoints), not the suite's."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from blockviz.live.publish import Publisher, scenario_batches
from blockviz.scenario import load

from .conftest import _free_port, app_server

pytestmark = pytest.mark.browser

PRESSURE = Path(__file__).resolve().parents[1] / "live" / "scenarios" / "pressure.yaml"
CACHED_AFTER = [4, 5, 4, 5, 5]          # pressure's state after each of its 5 batches


@pytest.fixture(scope="module")
def live_setup():
    p, r = _free_port(), _free_port()
    pub = Publisher(f"tcp://[::ffff:127.0.0.1]:{p}", replay=f"tcp://127.0.0.1:{r}")
    try:
        with app_server("--live", f"tcp://127.0.0.1:{p}?replay=tcp://127.0.0.1:{r}",
                        log_name="e2e-live-server.log") as url:
            yield url, pub
    finally:
        pub.close()


def cached(page) -> int | None:
    loc = page.locator('[data-counter="cached"] .bvl-cv')
    if not loc.count():
        return None
    return int(loc.first.inner_text().replace(",", ""))


def wait_cached(page, pub: Publisher, want: int, timeout: float = 45) -> None:
    """Until the page shows ``want`` cached hashes (answering the feed's replay requests)."""
    t0 = time.monotonic()
    while cached(page) != want:
        assert time.monotonic() - t0 < timeout, f"the page shows {cached(page)}, not {want}"
        pub.serve(0.2)


def test_the_forest_grows_and_shrinks_as_events_arrive(browser, live_setup, screenshots):
    url, pub = live_setup
    batches = [b for _, _, _, bs in scenario_batches(load(PRESSURE), payloads=False) for b in bs if b]
    assert len(batches) == len(CACHED_AFTER)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{url}/live")
    page.wait_for_selector(".bvl-cards", timeout=90_000)
    wait_cached(page, pub, 0)
    seen = []
    for k, batch in enumerate(batches):
        pub.publish(batch)
        wait_cached(page, pub, CACHED_AFTER[k])
        rows = page.locator(".bvl-node").count()
        seen.append((cached(page), rows))
        if k == 2:
            # the shrink: C's block went to B; the removed list shows it, newest first
            gone = page.locator(".bvl-gone-new .bvl-hash").first.inner_text()
            assert gone == "973aa91ed5b18194"
            assert page.locator('.bvl-node[data-key="973aa91ed5b18194"]').count() == 0
            page.screenshot(path=str(screenshots / "live-shrink-en-1280x800.png"))
    assert [c for c, _ in seen] == CACHED_AFTER
    assert seen[1][1] >= 1 and all(r >= 1 for _, r in seen)
    # grew (4 -> 5), shrank (5 -> 4), grew again; the last batch's store is marked new
    assert page.locator(".bvl-node.bvl-new").count() >= 1
    assert page.get_by_text("GPU/0 (full_attention): 5 cached hash(es)").count() == 1
    page.screenshot(path=str(screenshots / "live-en-1280x800.png"))
    page.locator('[data-testid="stSidebar"] button:has-text("中文")').click()
    page.get_by_text("GPU/0（full_attention）：缓存了 5 个哈希").first.wait_for(timeout=30_000)
    assert page.get_by_text("当前缓存").count() >= 1
    page.screenshot(path=str(screenshots / "live-zh-1280x800.png"))
    page.close()
