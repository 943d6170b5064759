"""A session's work ends with the session, on a real server and in a real browser: a trace is
uploaded, a sweep of it started; the tab closes; on an otherwise idle server the sweep's worker
process is gone and the uploaded trace deleted within 60 s (Streamlit itself would drop the
session's state only when another session came). Screenshots of the sweep's progress with its
Stop button, in both languages (artifacts/screenshots/capacity-sweep-progress-*.png)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.wsclient import Server, alive, workers

from .test_authoring_browser import click_key
from .test_browser import IDLE, NO_ERROR

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# sequence mode's sweep is the one-pass curve (sim/curve.py): its progress names the pass
WORDS = {"en": ("Real traffic: a trace", "20,000 requests", "One pass over the trace, free order"),
         "zh": ("真实流量：trace", "20,000 个请求", "对 trace 读一遍，释放顺序")}


def _traces(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("blockviz-trace-*/*"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_closed_tab_takes_its_sweep_and_its_upload_with_it(browser, screenshots, tmp_path, lang):
    from blockviz.teach.tracegen import TraceWorkload, write_generated
    tab, loaded, replaying = WORDS[lang]
    trace = tmp_path / "chat.jsonl"
    with open(trace, "w", encoding="utf-8") as f:
        write_generated(TraceWorkload(kind="multi_turn", requests=20_000, seed=1), f)
    tmp = tmp_path / "server-tmp"          # where the server keeps sessions' folders
    tmp.mkdir()
    with Server(env={"TMPDIR": str(tmp)}) as srv:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(f"{srv.url}/capacity")
        page.wait_for_selector(IDLE, timeout=90_000)
        if lang == "zh":
            page.locator('[data-testid="stSidebar"] button:has-text("中文")').click()
            page.get_by_text("KV 缓存块池要多大？").first.wait_for(timeout=30_000)
            page.wait_for_selector(IDLE, timeout=30_000)
        page.get_by_role("tab", name=tab).click()
        page.locator(".st-key-w_capt_upload input[type=file]").set_input_files(str(trace))
        page.get_by_text(loaded).first.wait_for(timeout=90_000)
        page.wait_for_selector(IDLE, timeout=60_000)
        (kept,) = _traces(tmp)
        assert kept.read_bytes() == trace.read_bytes()          # the session's copy of the upload
        for key, value in (("w_capt_num_sizes", "12"), ("w_capt_replay", "20000")):
            page.locator(f".st-key-{key} input").fill(value)
            page.locator(f".st-key-{key} input").press("Tab")
            page.wait_for_timeout(300)
            page.wait_for_selector(IDLE, timeout=60_000)
        click_key(page, "b_capt_compute")
        page.get_by_text(replaying).first.wait_for(timeout=60_000)
        page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stProgress] p')]"
                               ".some(p => /[1-9][0-9,]* (of|\\/) /.test(p.textContent))", timeout=90_000)
        assert page.locator(NO_ERROR).count() == 0
        assert page.locator(".st-key-b_stop_bv_capt_sweep_job button").count() == 1
        page.locator(".st-key-b_stop_bv_capt_sweep_job").scroll_into_view_if_needed()
        page.mouse.move(640, 400)
        page.mouse.wheel(0, 300)
        page.wait_for_timeout(600)
        page.screenshot(path=str(screenshots / f"capacity-sweep-progress-{lang}-1280x800.png"))
        (pid,) = workers(srv.pid)                               # the sweep's worker process
        context.close()                                         # the tab closes: its websocket goes
        closed = time.monotonic()
        while alive(pid) or _traces(tmp):
            assert time.monotonic() - closed < 60, (alive(pid), _traces(tmp))
            time.sleep(0.5)
        took = time.monotonic() - closed
        log = srv.log_text()
    print(f"worker gone and upload deleted {took:.1f} s after the tab closed")
    assert "Traceback" not in log, log[-3000:]
