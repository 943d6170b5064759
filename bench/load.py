"""``bench load``: the server-side time of a step (from a rerun request to the script's end) for one
session alone, for N sessions, and for N sessions while hostile previews run (each a scenario far
over the preview budget, pasted on the Author page) — measured side by side in one run against a
real ``streamlit run app.py`` on this machine, through bench/wsclient.py (a tab's websocket traffic,
no browser). The previews run in worker processes, so the ratio "during / alone" says how much
they slow the sessions that step; the server process's own CPU per step is reported beside it.

This was a test (tests/app/test_load.py) until it failed on a busy CI machine: a wall-clock ratio
measures the machine as much as the code. The test now counts what can be counted; the ratio is
measured here. Budget: during / alone <= 2.0 (on a machine not otherwise busy)."""
from __future__ import annotations

import json
import statistics
import threading
import time

NAME = "load"
N_SESSIONS, PAUSE_S = 3, 2.0

HOSTILE = """\
id: hostile
title: hostile
config: {num_blocks: 1000, block_size: 16}
steps:
  - arrive: {id: A, prompt: [{random: 12000}], max_tokens: 20000}
  - decode: {steps: 9000}
  - finish: A
"""


def _step_through(port: int, clicks: int, times: list, until: threading.Event | None = None,
                  pause: float = PAUSE_S) -> None:
    from .wsclient import Session
    s = Session(port)
    try:
        s.rerun()
        s.self_check()
        step = 0
        while len(times) < clicks or (until is not None and not until.is_set()):
            step = 0 if step == 8 else step + 1
            times.append(s.board_step(step))
            time.sleep(pause)
    finally:
        s.close()


def run(repeat: int, quick: bool, say) -> dict:
    from .wsclient import Server, Session, cpu_seconds
    clicks = 4 if quick else 8 * max(1, repeat // 2)
    pause = 0.5 if quick else PAUSE_S
    with Server() as srv:
        warm = Session(srv.port)
        warm.rerun()
        warm.close()
        say(f"  one session alone, {clicks} steps...")
        alone: list = []
        cpu0 = cpu_seconds(srv.pid)
        _step_through(srv.port, clicks, alone, pause=pause)
        cpu_alone = (cpu_seconds(srv.pid) - cpu0) / len(alone)
        say(f"  {N_SESSIONS} sessions...")
        together = [[] for _ in range(N_SESSIONS)]
        crowd = [threading.Thread(target=_step_through, args=(srv.port, clicks, together[i], None, pause))
                 for i in range(N_SESSIONS)]
        for t in crowd:
            t.start()
        for t in crowd:
            t.join()
        say(f"  {N_SESSIONS} sessions while a hostile preview runs (its 20 s budget)...")
        hostile = Session(srv.port, timeout=120)
        hostile.rerun()
        hostile.goto("author")
        done = threading.Event()
        during = [[] for _ in range(N_SESSIONS)]
        threads = [threading.Thread(target=_step_through, args=(srv.port, clicks, during[i], done, pause))
                   for i in range(N_SESSIONS)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        cpu0 = cpu_seconds(srv.pid)
        edit = json.dumps({"edit": {"text": HOSTILE, "n": 1}})
        preview_s = hostile.rerun([("json", "w_author_text", edit)])
        done.set()
        for t in threads:
            t.join()
        hostile.close()
        cpu_during = (cpu_seconds(srv.pid) - cpu0) / max(1, sum(map(len, during)))
    single = statistics.median(alone)
    n_users = statistics.median([x for ts in together for x in ts])
    busy = statistics.median([x for ts in during for x in ts])
    ratio = busy / single
    return {"sessions": N_SESSIONS, "steps": sum(map(len, during)), "alone_s": single, "together_s": n_users,
            "during_s": busy, "ratio": ratio, "preview_s": preview_s, "cpu_per_step_alone_s": cpu_alone,
            "cpu_per_step_during_s": cpu_during,
            "budgets": [{"name": f"load: a step's server time with {N_SESSIONS} sessions during a hostile "
                                 f"preview / alone", "value": ratio, "unit": "x", "limit": 2.0,
                         "met": ratio <= 2.0}]}


def render(result: dict) -> str:
    from .timing import fmt_s
    return (f"  a step's server-side time (median): alone {fmt_s(result['alone_s'])}; "
            f"{result['sessions']} sessions {fmt_s(result['together_s'])}; {result['sessions']} sessions "
            f"during a hostile preview {fmt_s(result['during_s'])} = {result['ratio']:.2f}x alone "
            f"({result['steps']} steps; the preview stopped after {result['preview_s']:.1f} s)\n"
            f"  the server process's own CPU a step: alone {fmt_s(result['cpu_per_step_alone_s'])}, "
            f"during the preview {fmt_s(result['cpu_per_step_during_s'])}")
