"""A bounded load test against a real server (``streamlit run app.py`` on this machine), driven at
the websocket level (bench/wsclient.py: what a tab sends and reads, no browser): N sessions
step through a lesson (self-check on, so the board tells the server each step: one rerun a step),
a user's pause between steps (2 s), while another session previews a
hostile file (a 12,000-token prompt, then thousands of decode steps over it: far more than the
preview budget's 20 s). No stepping session is affected — each sees exactly its own steps — the hostile
one is stopped by the budget with a located message, and the server-side time of a step (from a
click's rerun request to the script's end) stays within 2x of a single user's, measured in the
same run: the preview runs in a worker process, not in the server's threads."""
from __future__ import annotations

import json
import re
import statistics
import threading
import time

import pytest

from bench.wsclient import Server, Session

pytestmark = pytest.mark.slow

N_SESSIONS, CLICKS, PAUSE_S = 3, 8, 2.0

HOSTILE = """\
id: hostile
title: hostile
config: {num_blocks: 1000, block_size: 16}
steps:
  - arrive: {id: A, prompt: [{random: 12000}], max_tokens: 20000}
  - decode: {steps: 9000}
  - finish: A
"""


def step_through(port: int, times: list, seen: list, until: threading.Event | None = None) -> None:
    """A learner with self-check on: the board steps in the browser and, as a panel below follows
    it, tells the server each step (its ``pos`` state): one rerun a step, timed here."""
    s = Session(port)
    try:
        s.rerun()
        s.self_check()
        step = 0
        while len(times) < CLICKS or (until is not None and not until.is_set()):
            step = 0 if step == 8 else step + 1
            times.append(s.board_step(step))
            m = re.search(r"Predict step (\d+)", s.html())
            got = int(m.group(1)) if m else ("end" if "nothing left to predict" in s.html() else None)
            seen.append((got, step + 1 if step < 8 else "end"))
            time.sleep(PAUSE_S)
    finally:
        s.close()


def test_sessions_stepping_are_not_slowed_by_a_hostile_preview():
    with Server() as srv:
        warm = Session(srv.port)
        warm.rerun()                                  # the lesson's run is cached from here on
        warm.close()

        alone: list = []
        seen_alone: list = []
        step_through(srv.port, alone, seen_alone)     # one user, alone
        together = [[] for _ in range(N_SESSIONS)]    # N users, no preview (for the record)
        crowd = [threading.Thread(target=step_through, args=(srv.port, together[i], []))
                 for i in range(N_SESSIONS)]
        for t in crowd:
            t.start()
        for t in crowd:
            t.join(timeout=120)

        hostile = Session(srv.port, timeout=120)
        hostile.rerun()
        hostile.goto("author")
        done = threading.Event()
        times = [[] for _ in range(N_SESSIONS)]
        seen = [[] for _ in range(N_SESSIONS)]
        threads = [threading.Thread(target=step_through, args=(srv.port, times[i], seen[i], done))
                   for i in range(N_SESSIONS)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        preview_s = hostile.rerun([("json", "w_author_text",
                                    json.dumps({"edit": {"text": HOSTILE, "n": 1}}))])
        done.set()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        box = hostile.html()
        hostile.close()

    # the prefill alone may take the 20 s on a busy machine: stopped in step 1 (line 5) or 2 (6)
    m = re.search(r"Valid, but the run stops at step (\d)", box)
    assert m and m.group(1) in "12" and f'data-line="{4 + int(m.group(1))}"' in box, box[-3000:]
    assert "the run&#x27;s time budget of 20 s ran out during this step" in box
    assert 19 < preview_s < 40                        # it ran for its budget, and no longer
    for s in seen + [seen_alone]:
        assert len(s) >= CLICKS and all(got == want for got, want in s)   # each its own steps
    single = statistics.median(alone)
    n_users = statistics.median([x for ts in together for x in ts])
    during = statistics.median([x for ts in times for x in ts])
    print(f"server-side step time (median): alone {single * 1000:.0f} ms; {N_SESSIONS} sessions "
          f"{n_users * 1000:.0f} ms; {N_SESSIONS} sessions during a hostile preview "
          f"{during * 1000:.0f} ms ({during / single:.2f}x alone); {sum(map(len, times))} steps; "
          f"preview stopped after {preview_s:.1f} s")
    assert during <= 2.0 * single
