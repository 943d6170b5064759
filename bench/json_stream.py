"""Benchmark ``json_stream``: ``blockviz json`` on 65,536 blocks, the JSON read as it comes.

The scenario: 100 events of the multi-turn workload (``blockviz.teach.workload``) on 65,536
blocks of 16 tokens, payloads off (``model: null``), frames on: about 1.5 GB of JSON, every frame
carrying the whole free queue and every ref count. Each measurement is a fresh process
(bench.json_stream_child), so its peak RSS is its own; the reader here times the first byte from
the moment the process is started (interpreter start and imports included) and counts the rest.

Budgets (issue 13): the first byte within 2 s, peak RSS under 500 MB — for any number of steps,
so the full 100 events are read to the end. Side by side, on the first 3 events (small enough
for the old way to fit): the way ``json`` was written before (the whole document built in memory,
then ``json.dump``) against the streaming writer, as ratios of first byte and peak RSS.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from blockviz.teach.workload import Workload, generate_dict

from .timing import fmt_s, median, ratio, table

NAME = "json_stream"
ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = Workload(kind="multi_turn", num_blocks=65_536, block_size=16, num_events=100, seed=1,
                    max_live=16)
SIDE_BY_SIDE_EVENTS = 3
BUDGET_FIRST_BYTE_S, BUDGET_RSS_MB = 2.0, 500.0
QUICK = {"num_blocks": 4_096, "num_events": 20}


def _scenario(directory: str, workload: Workload, events: int) -> str:
    data = generate_dict(Workload(**(workload.__dict__ | {"num_events": events})))
    path = os.path.join(directory, f"json-stream-{events}.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(data, f, allow_unicode=True, sort_keys=False)
    return path


def _measure(mode: str, file: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "bench.json_stream_child", mode, file], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first, size = None, 0
    while True:
        chunk = proc.stdout.read1(1 << 20)
        if not chunk:
            break
        if first is None:
            first = time.perf_counter() - start
        size += len(chunk)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode("utf-8", "replace")
    if proc.wait() != 0:
        raise RuntimeError(f"json_stream child ({mode}) failed:\n{err[-2000:]}")
    peak = json.loads(err.strip().splitlines()[-1])["peak_rss_mb"]
    return {"mode": mode, "first_byte_s": first, "wall_s": wall, "bytes": size,
            "mb_per_s": size / 2**20 / wall, "peak_rss_mb": peak}


def run(repeat: int, quick: bool, say) -> dict:
    workload = Workload(**(WORKLOAD.__dict__ | QUICK)) if quick else WORKLOAD
    result: dict = {"workload": workload.__dict__, "side_by_side_events": SIDE_BY_SIDE_EVENTS}
    with tempfile.TemporaryDirectory() as d:
        full = _scenario(d, workload, workload.num_events)
        small = _scenario(d, workload, SIDE_BY_SIDE_EVENTS)
        say(f"  {workload.num_events} events on {workload.num_blocks:,} blocks, streamed: 1 run")
        result["full"] = _measure("stream", full)
        side: dict[str, list[dict]] = {"eager": [], "stream": []}
        runs = max(1, repeat // 2)
        say(f"  first {SIDE_BY_SIDE_EVENTS} events, eager and streamed in turn: {runs} run(s) each")
        for _ in range(runs):
            for mode in ("eager", "stream"):
                side[mode].append(_measure(mode, small))
    sizes = {m: {s["bytes"] for s in runs_} for m, runs_ in side.items()}
    if sizes["eager"] != sizes["stream"]:
        raise RuntimeError(f"eager and streamed JSON differ in size: {sizes}")
    result["side_by_side"] = {
        m: {k: median([s[k] for s in runs_]) for k in ("first_byte_s", "wall_s", "mb_per_s")}
        | {"peak_rss_mb": max(s["peak_rss_mb"] for s in runs_), "bytes": runs_[0]["bytes"],
           "runs": len(runs_)}
        for m, runs_ in side.items()}
    e, s = result["side_by_side"]["eager"], result["side_by_side"]["stream"]
    result["ratios_eager_over_stream"] = {
        "first_byte": ratio(e["first_byte_s"], s["first_byte_s"]),
        "peak_rss": ratio(e["peak_rss_mb"], s["peak_rss_mb"]),
        "wall": ratio(e["wall_s"], s["wall_s"])}
    f = result["full"]
    name = f"json_stream: {workload.num_events} events on {workload.num_blocks:,} blocks"
    result["budgets"] = [
        {"name": f"{name}, first byte", "value": f["first_byte_s"], "limit": BUDGET_FIRST_BYTE_S,
         "unit": "s", "met": f["first_byte_s"] < BUDGET_FIRST_BYTE_S},
        {"name": f"{name}, peak RSS", "value": f["peak_rss_mb"], "limit": BUDGET_RSS_MB,
         "unit": "MB", "met": f["peak_rss_mb"] < BUDGET_RSS_MB},
    ]
    return result


def render(result: dict) -> str:
    f = result["full"]
    rows = [[f"all {result['workload']['num_events']} events", "stream", "1", fmt_s(f["first_byte_s"]),
             fmt_s(f["wall_s"]), f"{f['bytes'] / 2**20:,.0f} MiB", f"{f['mb_per_s']:.1f} MiB/s",
             f"{f['peak_rss_mb']:.0f} MB"]]
    for mode, s in result["side_by_side"].items():
        rows.append([f"first {result['side_by_side_events']} events", mode, str(s["runs"]),
                     fmt_s(s["first_byte_s"]), fmt_s(s["wall_s"]), f"{s['bytes'] / 2**20:,.0f} MiB",
                     f"{s['mb_per_s']:.1f} MiB/s", f"{s['peak_rss_mb']:.0f} MB"])
    out = table(["case", "writer", "runs", "first byte", "wall", "output", "rate", "peak RSS"], rows)
    r = result["ratios_eager_over_stream"]
    out += (f"\n  eager / streamed, side by side: first byte {r['first_byte']:.1f}x, "
            f"peak RSS {r['peak_rss']:.1f}x, wall {r['wall']:.2f}x")
    return out
