"""What a session types, pastes or uploads cannot take the server down: the Author preview runs in
a worker process within the preview budget (stopped inside the step that passes it, with the
step's line), a worker that has to be killed says at which step, a paste over 1 MiB says so, a
full server says it is busy, and a page that fails shows a message, never an exception box."""
from __future__ import annotations

import re
import threading

import pytest

from blockviz.scenario.schema import MAX_FILE_BYTES
from blockviz.sim.budget import Budget
from blockviz.ui import data, worker

from .test_author import SMALL, author, edit, error_box

HOSTILE = """\
id: hostile
title: hostile
config: {num_blocks: 900, block_size: 16}
steps:
  - arrive: {id: A, prompt: [1, 2, 3], max_tokens: 2}
  - arrive: {id: B, prompt: [{random: 12000}], max_tokens: 1}
  - finish: A
"""


def test_a_preview_over_the_budget_stops_at_the_step_s_line(page, monkeypatch):
    monkeypatch.setattr(data, "PREVIEW_BUDGET", Budget(tokens=5000, seconds=60))
    p = author(page)
    edit(p, HOSTILE)
    box = error_box(p)
    assert "Valid, but the run stops at step 2" in box and 'data-line="6"' in box
    assert "the run&#x27;s budget of 5,000 computed tokens is used up" in box
    assert p.header() == "step 1 of 1"                      # the step before it is previewed
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert "计算 token 预算（5,000 个）已经用完" in error_box(p)


def test_a_worker_past_its_time_is_killed_and_the_session_told_where(page, monkeypatch):
    """The budget's own clock is off here (seconds=None in the worker), so only the kill can
    stop it: the server side waits budget + grace, then kills the process."""
    p = author(page)
    edit(p, SMALL)
    monkeypatch.setattr(data, "PREVIEW_BUDGET", Budget(seconds=None))
    monkeypatch.setattr(worker, "kill_after", lambda budget: 1.0)
    edit(p, HOSTILE)
    box = error_box(p)
    assert "The preview did not run" in box
    assert "the preview was stopped after 1 s" in box and 'data-line="6"' in box  # inside B
    assert "The preview below still shows the last valid version." in box
    assert p.state["bv_author_good"][0] == SMALL            # the last good preview stays
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert "预览运行 1 秒后被终止" in error_box(p)


def test_a_paste_over_the_limit_says_so_and_keeps_the_text(page):
    p = author(page)
    edit(p, SMALL)
    big = SMALL + "#" * MAX_FILE_BYTES
    p.edit(big)
    errors = [e.value for e in p.at.error]
    assert any("The text was not taken" in e and f"{len(big.encode()):,} bytes" in e
               and "1,048,576" in e for e in errors), errors
    assert p.editor_text() == SMALL
    assert "Tiny test" in p.html()


def test_a_full_server_says_it_is_busy_and_the_preview_runs_once_a_worker_is_free(page, monkeypatch):
    slots = threading.BoundedSemaphore(1)
    monkeypatch.setattr(worker, "_slots", slots)
    monkeypatch.setattr(worker, "BUSY_WAIT_S", 0.1)
    p = author(page)
    slots.acquire()                                   # another session's preview is running
    try:
        edit(p, SMALL)
        box = error_box(p)
        assert "the server is busy: 2 previews are running" in box or "the server is busy" in box
        assert p.state["bv_author_good"][0] != SMALL
    finally:
        slots.release()
    p.click("b_preview_retry")
    assert not error_box(p) and p.state["bv_author_good"][0] == SMALL
    assert p.header() == "step 3 of 3"


def test_a_page_that_fails_shows_a_message_not_an_exception(page, monkeypatch):
    from blockviz.ui import author as A

    def broken(lang):
        raise ValueError("boom")

    monkeypatch.setattr(A, "_gallery", broken)
    p = author(page)                                   # Page.run asserts no exception box
    errors = [e.value for e in p.at.error]
    assert any("Something went wrong on this page (ValueError)" in e for e in errors), errors
    assert "boom" not in " ".join(errors)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_worker_messages_are_translated(lang):
    from blockviz.i18n.errors import knows
    for msg in (worker.busy_error("f").message, worker.memory_message(Budget(tensor_bytes=1 << 29)),
                "the preview was stopped after 25 s: the run's time budget is 20 s",
                "the preview failed with an internal error (KeyError); the server is fine"):
        assert knows(msg), msg


def test_a_worker_over_its_memory_cap_is_stopped_with_a_located_message(monkeypatch):
    """The worker's address space is capped at the tensor budget plus a margin; here the margin
    leaves no room for the KV store the budget itself allows, so the process runs out of memory
    (torch cannot allocate) — it is stopped, and the session told so, at the step it was in."""
    from blockviz.i18n.errors import knows
    from blockviz.scenario import ScenarioError
    budget = Budget(tensor_bytes=256 << 20, seconds=60)
    monkeypatch.setattr(worker, "MEMORY_MARGIN", -(256 << 20) + (8 << 20))
    text = HOSTILE.replace("num_blocks: 900", "num_blocks: 8000")
    with pytest.raises(ScenarioError) as e:
        worker.run_of(worker.run_source("user:test:1", worker.Source("text", "m.yaml", text), budget),
                      "m.yaml")
    # where the cap bites depends on what the process had mapped when it started: the store
    # (a located config error) or a later step (the step's line)
    where = (e.value.path, e.value.line)
    if where == ("config.model", 3):
        assert e.value.message == ("there is not enough memory here for the KV store and the "
                                   "model's weights")
    else:
        assert where in {("steps[0].arrive", 5), ("steps[1].arrive", 6)}, where
        assert re.fullmatch(r"step \d \(arrive\): the preview was stopped: it needed more memory "
                            r"than the run's budget of 256\.0 MiB", e.value.message)
    assert knows(e.value.message)
    # the server goes on: the next preview runs
    small = SMALL
    run = worker.run_of(worker.run_source("user:test:3", worker.Source("text", "s.yaml", small),
                                         Budget(seconds=60)), "s.yaml")
    assert run.last == 3 and run.timeline.error is None


def test_a_preview_stopped_at_its_memory_cap_says_so_not_that_it_did_not_run(page, monkeypatch):
    """A worker killed at its memory cap ran up to the step it was in: the box's title says the
    preview stopped at its memory cap (in both languages), not that it did not run."""
    from blockviz.scenario import ScenarioError
    p = author(page)
    edit(p, SMALL)
    message = "step 2 (arrive): " + worker.memory_message(data.PREVIEW_BUDGET)

    def capped(state, kind, source, *, share=False):
        raise ScenarioError(source.file, 6, 5, "steps[1].arrive", message)

    monkeypatch.setattr(worker, "user_outcome", capped)
    edit(p, HOSTILE)
    box = error_box(p)
    assert "The preview stopped at its memory cap" in box and "did not run" not in box
    assert "it needed more memory than the run&#x27;s budget" in box and 'data-line="6"' in box
    assert p.state["bv_author_good"][0] == SMALL            # the last good preview stays
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert "预览在内存上限处被终止" in error_box(p) and "预览没有运行" not in error_box(p)
