"""Load against a real server (``streamlit run app.py`` on this machine), driven at the websocket
level (bench/wsclient.py: what a tab sends and reads, no browser). These tests count, they do not
time: CI shares two cores with other work, so a wall-clock ratio would measure the machine (the
latency ratio under load is ``python -m bench load``, with its figures in bench/README.md).

* Sessions stepping through a lesson (self-check on: the board tells the server each step, one
  rerun a step) while more hostile previews than the server runs at once are pasted: every session
  sees exactly its own steps; never more preview workers than ``MAX_PREVIEWS`` at once (the
  others are told the server is busy); the previews that run are stopped by their budget at a
  located step; the server process's own CPU per step stays small (the previews cost it nothing:
  they run in worker processes).
* An 80,000-step scenario in a 2.6 KB share link, opened while another session steps: the link is
  decoded, parsed and run in a worker, so the server process's own CPU grows by under 0.2 s for
  it (what the other session's steps cost, counted alone first, is taken off).
"""
from __future__ import annotations

import json
import re
import threading
import time

import pytest

from bench.wsclient import Server, Session, cpu_seconds, workers
from blockviz.ui.worker import MAX_PREVIEWS

pytestmark = pytest.mark.slow

N_SESSIONS, CLICKS, PAUSE_S = 3, 8, 1.0

# No payloads, and about a minute of engine steps: the request outgrows the pool (step 7), is
# preempted, and from then on is looked up in vain every engine step (4,000 hit blocks each time).
# The preview's 20 s budget stops it inside a step, long before its memory would.
HOSTILE = ("id: hostile\ntitle: hostile\nconfig: {num_blocks: 4000, block_size: 16, model: null}\nsteps:\n"
           "  - arrive: {id: A, prompt: [{random: 12000}], max_tokens: 1000000}\n"
           + "  - decode: {steps: 10000}\n" * 12 + "  - finish: A\n")


def step_through(port: int, seen: list, until: threading.Event, counted: list) -> None:
    """A learner with self-check on: the board steps in the browser and, as a panel below follows
    it, tells the server each step (its ``pos`` state): one rerun a step."""
    s = Session(port)
    try:
        s.rerun()
        s.self_check()
        step = 0
        while len(seen) < CLICKS or not until.is_set():
            step = 0 if step == 8 else step + 1
            s.board_step(step)
            counted.append(1)
            m = re.search(r"Predict step (\d+)", s.html())
            got = int(m.group(1)) if m else ("end" if "nothing left to predict" in s.html() else None)
            seen.append((got, step + 1 if step < 8 else "end"))
            time.sleep(PAUSE_S)
    finally:
        s.close()


def hostile_preview(port: int, out: list) -> None:
    s = Session(port, timeout=120)
    try:
        s.rerun()
        s.goto("author")
        s.rerun([("json", "w_author_text", json.dumps({"edit": {"text": HOSTILE, "n": 1}}))])
        out.append(s.html())
    finally:
        s.close()


def _status(box: str) -> str:
    """The preview's status boxes in words (what an assertion should show, not the page's CSS)."""
    boxes = re.findall(r'<div class="bv bv-\w+box".{0,2000}?</div></div>', box, re.S)
    return " | ".join(re.sub(r"<[^>]+>", " ", b) for b in boxes)


def test_sessions_see_their_own_steps_and_previews_stay_within_the_cap():
    with Server() as srv:
        warm = Session(srv.port)
        warm.rerun()                                  # the lesson's run is cached from here on
        warm.close()
        most = [0]
        sampling = threading.Event()

        def sample() -> None:                         # worker processes alive, ten times a second
            while not sampling.is_set():
                most[0] = max(most[0], len(workers(srv.pid)))
                time.sleep(0.1)
        sampler = threading.Thread(target=sample)
        sampler.start()
        cpu0 = cpu_seconds(srv.pid)
        done = threading.Event()
        seen = [[] for _ in range(N_SESSIONS)]
        steps: list = []
        steppers = [threading.Thread(target=step_through, args=(srv.port, seen[i], done, steps))
                    for i in range(N_SESSIONS)]
        for t in steppers:
            t.start()
        time.sleep(1.0)
        boxes: list = []
        hostile = [threading.Thread(target=hostile_preview, args=(srv.port, boxes))
                   for _ in range(MAX_PREVIEWS + 1)]
        for t in hostile:
            t.start()
        for t in hostile:
            t.join(timeout=180)
        done.set()
        for t in steppers:
            t.join(timeout=120)
        cpu = cpu_seconds(srv.pid) - cpu0
        sampling.set()
        sampler.join()
        log = srv.log_text()
    assert not any(t.is_alive() for t in steppers + hostile)
    for s in seen:                                     # each session saw exactly its own steps
        assert len(s) >= CLICKS and all(got == want for got, want in s), s
    assert 1 <= most[0] <= MAX_PREVIEWS, most[0]       # the cap held, and previews did run
    busy = [b for b in boxes if "the server is busy" in b]
    ran = [b for b in boxes if "the server is busy" not in b]
    assert len(boxes) == MAX_PREVIEWS + 1 and len(busy) >= 1 and ran
    for box in ran:             # stopped by the budget inside a located step (the prefill's or a decode's)
        m = re.search(r"Valid, but the run stops at step (\d+)", box)
        assert m and f'data-line="{4 + int(m.group(1))}"' in box, _status(box)
        assert "the run&#x27;s time budget of 20 s ran out during this step" in box
    per_step = cpu / len(steps)
    print(f"{len(steps)} steps, server CPU {cpu:.2f} s in all ({per_step * 1000:.0f} ms a step, "
          f"{len(ran)} hostile previews run and {len(busy)} told busy meanwhile); at most {most[0]} "
          f"worker processes at once")
    assert per_step < 0.1                              # counted: CPU seconds, not wall time
    assert "Traceback" not in log, log[-3000:]


def test_an_80000_step_link_costs_the_server_under_a_fifth_of_a_cpu_second():
    from blockviz.scenario import share
    text = ("id: big\ntitle: big\nconfig: {num_blocks: 64, block_size: 4, model: null}\nsteps:\n"
            "  - arrive: {id: A, prompt: [{random: 6}], max_tokens: 1000000}\n" + "  - step: 1\n" * 80_000)
    code = share.share_code(text)
    assert len(code) < 2_800 and len(text) > 900_000
    with Server() as srv:
        warm = Session(srv.port)
        warm.rerun()
        warm.close()
        a = Session(srv.port)
        a.rerun()
        a.self_check()
        cpu0 = cpu_seconds(srv.pid)
        for k in range(1, 9):                           # what one step of A costs the server, alone
            a.board_step(k)
        per_step = (cpu_seconds(srv.pid) - cpu0) / 8
        b = Session(srv.port, timeout=120)
        opened = threading.Event()

        def open_link() -> None:
            b.rerun(query=f"s={code}&lang=en")
            opened.set()
        cpu0 = cpu_seconds(srv.pid)
        t = threading.Thread(target=open_link)
        t.start()
        n, k = 0, 0
        while not opened.is_set():                      # A steps while the link opens
            k = k % 8 + 1
            a.board_step(k)
            n += 1
            time.sleep(0.5)
        t.join()
        grew = cpu_seconds(srv.pid) - cpu0
        notices = b.errors()
        a.close()
        b.close()
        log = srv.log_text()
    link = grew - n * per_step
    print(f"the link: server CPU grew {grew:.3f} s while A stepped {n} times ({per_step * 1000:.0f} ms "
          f"each alone): {link:.3f} s for the link")
    assert n >= 1 and link < 0.2
    assert any("stopped early, at step 5000 of the scenario's 80001 steps" in x
               and "at most 5,000 steps" in x for x in notices), notices
    assert "Traceback" not in log, log[-3000:]
