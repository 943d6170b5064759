"""Benchmark ``app``: the server-side time of a player rerun against a bare Streamlit page with the
same widgets (bench/bare_page.py: same keys, callbacks and containers; no engine, no panels).

Both pages are driven through ``streamlit.testing.v1.AppTest`` side by side, click for click,
at 6 blocks (the built-in six-blocks) and at 4,096 blocks (a generated shared-prefix workload whose
pool fills with cached blocks and evicts). For each click two times are taken:

  * **server**: the script run itself (``ScriptRunner._run_script`` in the script thread: widget
    state, callbacks, the page, the messages queued) — what a Streamlit server spends per rerun;
  * **click→run**: ``at.button(...).click().run()`` as a whole, AppTest's harness included.

Kinds of rerun: **step** = Next to a step some session has drawn before (the class stepping through
together: the panels come from the process-wide cache); **first visit** = Next to a step no session
has drawn yet (the panels caches are cleared per repeat, and each repeat walks other steps);
**jump** = the timeline slider to a far step, first visit and revisit.

Budgets (issue 5): a step costs at most 1.5x a bare rerun (server time); at 4,096 blocks a step
stays under 300 ms. Each measurement runs in a fresh process (``python -m bench.app JSON``).
"""
from __future__ import annotations

import gc
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .timing import fmt_s, median, table

NAME = "app"
ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app.py"
BARE = Path(__file__).resolve().parent / "bare_page.py"
BUDGET_RATIO, BUDGET_BIG_STEP_S = 1.5, 0.300

# The 4,096-block scenario (config.num_blocks, as six-blocks has 6; the null block is one more): a
# shared-prefix workload that
# fills the pool with cached blocks by step ~150 and evicts from then on.
BIG = {"kind": "shared_prefix", "num_blocks": 4_096, "block_size": 16, "seed": 1, "num_events": 400,
       "max_live": 32, "prefix_blocks": 96, "new_tokens": 1_024, "num_prefixes": 8}
BIG_ID = "bench-4096"
# (scenario id, first step of the walks) — the big one is measured where its pool is full
CASES = [("six-blocks", 0), (BIG_ID, 200)]
KINDS = ("step", "step_first", "jump", "jump_first")
KIND_LABELS = {"step": "step (revisit)", "step_first": "step, first visit",
               "jump": "jump (revisit)", "jump_first": "jump, first visit"}


# -- the parent: one child per scenario ------------------------------------------------------
def _child(params: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "bench.app", json.dumps(params)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"app benchmark child ({params['scenario']}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(repeat: int, quick: bool, say) -> dict:
    big = BIG | ({"num_events": 40} if quick else {})
    walk, jumps = (2, 1) if quick else (4, 3)
    cases = []
    for sid, start in CASES:
        if quick and sid == BIG_ID:
            start = 20
        say(f"  {sid}: {repeat} repeat(s) of {walk} steps and {jumps} jumps, player and bare page "
            f"side by side")
        cases.append(_child({"scenario": sid, "start": start, "repeat": repeat, "walk": walk,
                             "jumps": jumps, "big": big}))
    result = {"big_workload": big, "cases": cases, "walk": walk, "jumps": jumps}
    result["budgets"] = _budgets(cases)
    return result


def _budgets(cases: list[dict]) -> list[dict]:
    out = []
    for c in cases:
        r = c["kinds"]["step"]["ratio_server"]
        out.append({"name": f"app: step / bare rerun, {c['blocks']:,} blocks (server)", "value": r,
                    "limit": BUDGET_RATIO, "unit": "x", "met": r <= BUDGET_RATIO})
    big = max(cases, key=lambda c: c["blocks"])
    for kind, label in (("step", "step"), ("step_first", "step, first visit (stricter reading)")):
        v = big["kinds"][kind]["player"]["server_s"]
        out.append({"name": f"app: {label} at {big['blocks']:,} blocks (server)", "value": v,
                    "limit": BUDGET_BIG_STEP_S, "unit": "s", "met": v < BUDGET_BIG_STEP_S})
    return out


def render(result: dict) -> str:
    rows = []
    for c in result["cases"]:
        for kind in KINDS:
            k = c["kinds"][kind]
            p, b = k["player"], k["bare"]
            rows.append([f"{c['scenario']} ({c['blocks']:,} blocks)", KIND_LABELS[kind], str(p["n"]),
                         fmt_s(p["server_s"]), fmt_s(b["server_s"]), f"{k['ratio_server']:.2f}x",
                         fmt_s(p["server_cpu_s"]), fmt_s(b["server_cpu_s"]),
                         fmt_s(p["click_s"]), fmt_s(b["click_s"]), f"{k['ratio_click']:.2f}x",
                         f"{p['kb']:.0f} / {b['kb']:.0f} kB"])
    out = table(["scenario", "rerun", "n", "player server", "bare server", "ratio",
                 "player CPU", "bare CPU", "player click→run", "bare click→run", "ratio",
                 "sent (player / bare)"], rows)
    return out + ("\n  medians; server = the script run (ScriptRunner._run_script, wall), CPU = the "
                  "script thread's CPU time; click→run = AppTest's click().run() as a whole")


# -- the child: one scenario, both pages ----------------------------------------------------
class _Probe:
    """Times each script run in its own thread, and keeps the messages it sent."""

    def __init__(self) -> None:
        from streamlit.runtime.scriptrunner import script_runner as sr
        from streamlit.testing.v1 import local_script_runner as lsr
        self.server_s = self.server_cpu_s = 0.0
        self.messages: list = []
        probe, run_script, parse = self, sr.ScriptRunner._run_script, lsr.parse_tree_from_messages

        def timed_run_script(runner, rerun_data):
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return run_script(runner, rerun_data)
            finally:
                probe.server_s += time.perf_counter() - wall
                probe.server_cpu_s += time.thread_time() - cpu

        def keep(messages):
            probe.messages = list(messages)
            return parse(messages)

        sr.ScriptRunner._run_script = timed_run_script
        lsr.parse_tree_from_messages = keep

    def measure(self, action) -> dict:
        """One rerun: ``action()`` is the click and the run."""
        self.server_s = self.server_cpu_s = 0.0
        gc.collect()
        gc.disable()
        try:
            wall = time.perf_counter()
            action()
            click = time.perf_counter() - wall
        finally:
            gc.enable()
        sent = sum(m.ByteSize() for m in self.messages)
        return {"server_s": self.server_s, "server_cpu_s": self.server_cpu_s, "click_s": click,
                "bytes": sent}


def _clear_step_caches() -> None:
    """Forget every rendered step (a step no session has drawn yet); the recorded run stays."""
    from blockviz.ui import data, panels
    for cached in (panels._shared_panels, panels._shared_heatmap, panels._shared_metrics,
                   panels._shared_payload, data.frames_of):
        cached.clear()


def _open(script: Path, params: dict):
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(script), default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = str(v)
    at.run()
    if at.exception:
        raise RuntimeError(f"{script.name}: {[e.value for e in at.exception]}")
    return at


def _scenario_dir(tmp: Path, big: dict) -> None:
    import yaml

    from blockviz.teach.workload import Workload, generate, generate_dict
    shutil.copy(ROOT / "scenarios" / "six-blocks.yaml", tmp)
    w = Workload(**big)
    generate(w)                                    # within the format's limits
    scenario = generate_dict(w) | {"id": BIG_ID}
    (tmp / f"{BIG_ID}.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))


def measure(params: dict) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-app-") as d:
        _scenario_dir(Path(d), params["big"])
        os.environ["BLOCKVIZ_SCENARIOS"] = d
        return _measure(params)


def _measure(params: dict) -> dict:
    probe = _Probe()
    sid, start, walk, jumps = params["scenario"], params["start"], params["walk"], params["jumps"]
    t0 = time.perf_counter()
    player = _open(APP, {"scenario": sid, "step": start})
    open_s = time.perf_counter() - t0
    last = int(player.slider(key="w_slider").max)
    bare = _open(BARE, {"scenario": sid, "step": start, "last": last})
    pages = {"player": player, "bare": bare}
    samples: dict[str, dict[str, list]] = {k: {"player": [], "bare": []} for k in KINDS}

    def both(kind: str, act) -> None:
        """The same action on both pages, one right after the other."""
        for name, at in pages.items():
            samples[kind][name].append(probe.measure(lambda at=at: act(at)))

    def next_(at):
        at.button(key="b_next").click().run()

    def slide(step: int):
        return lambda at: at.slider(key="w_slider").set_value(step).run()

    for at in pages.values():                      # warm up: imports, code paths
        next_(at)
        slide(start)(at)
    rng = random.Random(0)
    span = max(1, last - start - walk)
    for r in range(params["repeat"]):
        base = start + (r * (walk + 1)) % span if last - start > walk else start
        for at in pages.values():
            slide(base)(at)
        _clear_step_caches()                       # base itself is drawn again below, untimed
        for at in pages.values():
            slide(base)(at)
        for _ in range(walk):                      # steps no one has drawn yet
            both("step_first", next_)
        for at in pages.values():
            slide(base)(at)
        for _ in range(walk):                      # the same steps again: cached
            both("step", next_)
        walked = set(range(base, base + walk + 1))
        far = [i for i in range(start, last + 1) if i not in walked]   # where the pool is full
        targets = rng.sample(far, min(jumps, len(far)))
        for t in targets:
            both("jump_first", slide(t))
        for t in targets:
            both("jump", slide(t))
    assert player.session_state["bv_scenario"] == sid and not player.exception
    return {"scenario": sid, "blocks": _blocks(sid), "steps": last, "start": start,
            "open_player_s": open_s, "kinds": {k: _summary(v) for k, v in samples.items()}}


def _blocks(sid: str) -> int:
    from blockviz.ui import data
    return data.builtin_run(sid).scenario.config.num_blocks


def _summary(pair: dict[str, list]) -> dict:
    out = {}
    for name, xs in pair.items():
        out[name] = {"n": len(xs), "server_s": median([x["server_s"] for x in xs]),
                     "server_cpu_s": median([x["server_cpu_s"] for x in xs]),
                     "click_s": median([x["click_s"] for x in xs]),
                     "kb": median([x["bytes"] for x in xs]) / 1e3,
                     "server_samples_s": [x["server_s"] for x in xs]}
    p, b = out["player"], out["bare"]
    out["ratio_server"] = p["server_s"] / b["server_s"] if b["server_s"] else float("nan")
    out["ratio_click"] = p["click_s"] / b["click_s"] if b["click_s"] else float("nan")
    return out


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))))
