"""Benchmark ``scale``: generated scenarios of 10,000 and 100,000 events on 16,384 blocks, run to
the end with a full timeline, then random jumps. Each measurement is a fresh process pinned to one
CPU (bench.scale_child), so peak RSS is the measurement's own.

Budgets (issues 3 and 11), payloads off: the 10,000-event run under 10 s and 500 MB; a jump under
50 ms; the 100,000-event run under 500 MB peak with its worst jump under 50 ms (the garbage
collector on).
With ``BENCH_SCALE_AGAINST=DIR`` (a checkout of another commit), each payloads-off case also runs
in that tree, the two taking turns run by run, and the report sets them side by side (new / old).
Payloads on (the tiny model writing real K/V into a 16,384-block store) are reported separately,
on fewer events: they cost far more per event.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from blockviz.teach.workload import Workload

from .timing import fmt_s, median, table

NAME = "scale"
ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = Workload(kind="multi_turn", num_blocks=16_384, block_size=16, max_live=16, seed=1)
MODEL = {"num_layers": 2, "num_kv_heads": 2, "head_dim": 8, "dtype": "float32"}  # the default
BUDGET_EVENTS = 10_000
BUDGET_RUN_S, BUDGET_RSS_MB, BUDGET_JUMP_S = 10.0, 500.0, 0.050

# (events, payloads on, runs as a share of --repeat: the long ones run once)
CASES = [(10_000, False, 1.0), (100_000, False, 0.0), (1_000, False, 1.0), (1_000, True, 0.0)]
QUICK_CASES = [(200, False, 1.0), (50, True, 0.0)]


def _child(events: int, payloads: bool, root: Path = ROOT) -> dict:
    w = WORKLOAD.__dict__ | {"num_events": events, "model": MODEL if payloads else None}
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-m", "bench.scale_child", json.dumps({"workload": w})],
                          cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"scale child ({events} events, payloads {payloads}) failed:\n"
                           f"{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(repeat: int, quick: bool, say) -> dict:
    cases, against, side = [], os.environ.get("BENCH_SCALE_AGAINST"), []
    for events, payloads, share in (QUICK_CASES if quick else CASES):
        runs = max(1, round(repeat * share))
        say(f"  {events:,} events, payloads {'on' if payloads else 'off'}: {runs} run(s)"
            + (f", taking turns with {against}" if against and not payloads else ""))
        samples, old = [], []
        for _ in range(runs):
            if against and not payloads:
                old.append(_child(events, payloads, Path(against)))
            samples.append(_child(events, payloads))
        if old:
            side.append({"events": events, "old_tree": against, **{
                f"{name}_{what}": f([x[what] for x in group])
                for name, group in (("old", old), ("new", samples))
                for what, f in (("run_wall_s", median), ("run_cpu_s", median), ("peak_rss_mb", max))},
                "old_jump_median_s": median([j for x in old for j in x["jump_s"]]),
                "old_jump_max_s": max(j for x in old for j in x["jump_s"]),
                "new_jump_median_s": median([j for x in samples for j in x["jump_s"]]),
                "new_jump_max_s": max(j for x in samples for j in x["jump_s"])})
        jumps = [j for s in samples for j in s["jump_s"]]
        cases.append({
            "events": events, "payloads": payloads, "runs": runs,
            "run_wall_s": median([s["run_wall_s"] for s in samples]),
            "run_cpu_s": median([s["run_cpu_s"] for s in samples]),
            "peak_rss_mb": max(s["peak_rss_mb"] for s in samples),
            "rss_before_run_mb": median([s["rss_before_run_mb"] for s in samples]),
            "jump_median_s": median(jumps), "jump_max_s": max(jumps),
            "generate_s": median([s["generate_s"] for s in samples]),
            "validate_s": median([s["validate_s"] for s in samples]),
            "samples": samples,
        })
    result = {"workload": WORKLOAD.__dict__, "model_when_payloads_on": MODEL, "cases": cases,
              "side_by_side": side}
    off = {c["events"]: c for c in cases if not c["payloads"]}
    on = {c["events"]: c for c in cases if c["payloads"]}
    for n in sorted(set(off) & set(on)):
        result.setdefault("payload_cost", []).append(
            {"events": n, "run_wall_ratio_on_off": on[n]["run_wall_s"] / off[n]["run_wall_s"]})
    b = off.get(BUDGET_EVENTS)
    if b is not None:
        largest = off[max(off)]
        result["budgets"] = [
            {"name": "scale: 10,000 events, run (wall, one core)", "value": b["run_wall_s"],
             "limit": BUDGET_RUN_S, "unit": "s", "met": b["run_wall_s"] < BUDGET_RUN_S},
            {"name": "scale: 10,000 events, peak RSS", "value": b["peak_rss_mb"],
             "limit": BUDGET_RSS_MB, "unit": "MB", "met": b["peak_rss_mb"] < BUDGET_RSS_MB},
            {"name": "scale: jump, worst at 10,000 events", "value": b["jump_max_s"],
             "limit": BUDGET_JUMP_S, "unit": "s", "met": b["jump_max_s"] < BUDGET_JUMP_S},
        ]
        if largest is not b:
            # issue 11: the 100,000-event timeline under 500 MB peak, its worst jump under 50 ms
            # with the garbage collector on
            result["budgets"] += [
                {"name": f"scale: jump, worst at {largest['events']:,} events",
                 "value": largest["jump_max_s"], "limit": BUDGET_JUMP_S, "unit": "s",
                 "met": largest["jump_max_s"] < BUDGET_JUMP_S},
                {"name": f"scale: {largest['events']:,} events, peak RSS",
                 "value": largest["peak_rss_mb"], "limit": BUDGET_RSS_MB, "unit": "MB",
                 "met": largest["peak_rss_mb"] < BUDGET_RSS_MB}]
    return result


def render(result: dict) -> str:
    rows = [[f"{c['events']:,}", "on" if c["payloads"] else "off", str(c["runs"]),
             fmt_s(c["run_wall_s"]), fmt_s(c["run_cpu_s"]),
             f"{c['run_wall_s'] / c['events'] * 1e3:.2f} ms",
             f"{c['peak_rss_mb']:.0f} MB", f"{c['rss_before_run_mb']:.0f} MB",
             fmt_s(c["jump_median_s"]), fmt_s(c["jump_max_s"]),
             str(c["samples"][0]["keyframes"]), str(c["samples"][0]["evictions"])]
            for c in result["cases"]]
    out = table(["events", "payloads", "runs", "run (wall)", "run (CPU)", "per event",
                 "peak RSS", "RSS before run", "jump median", "jump max", "keyframes",
                 "evictions"], rows)
    for c in result.get("side_by_side", []):
        out += (f"\n  {c['events']:,} events, side by side with {c['old_tree']} (old -> new): run "
                f"{fmt_s(c['old_run_wall_s'])} -> {fmt_s(c['new_run_wall_s'])} (CPU "
                f"{fmt_s(c['old_run_cpu_s'])} -> {fmt_s(c['new_run_cpu_s'])}), peak RSS "
                f"{c['old_peak_rss_mb']:.0f} -> {c['new_peak_rss_mb']:.0f} MB, jump median "
                f"{fmt_s(c['old_jump_median_s'])} -> {fmt_s(c['new_jump_median_s'])}, worst "
                f"{fmt_s(c['old_jump_max_s'])} -> {fmt_s(c['new_jump_max_s'])}")
    for p in result.get("payload_cost", []):
        out += (f"\n  payloads on cost {p['run_wall_ratio_on_off']:.0f}x the run time of payloads "
                f"off at {p['events']:,} events")
    return out
