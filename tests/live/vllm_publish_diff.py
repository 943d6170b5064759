#!/usr/bin/env python3
"""``blockviz publish`` against vLLM 0.33.0's own publisher, byte for byte (``ts`` aside).

Not a pytest test (it needs the shared toolkit's oracle venv, and takes minutes): run it from the
project's root after a change to the engine's events or to blockviz/live:

    eval "$(../shared/tools/vllm-diff/sched/setup.sh)" && export SCHED_PY VLLM_FULL_SRC
    .venv/bin/python tests/live/vllm_publish_diff.py [--only six-blocks,pressure] [--out DIR]

For every lesson (scenarios/*.yaml) and the toolkit's KV-event scenarios, two runs on 127.0.0.1,
each recorded by the toolkit's own recorder (events/capture.py, a plain pyzmq SUB, --bind):
  vLLM      events/publish.py SCEN --project JSON: vLLM's real Scheduler and real
            ZmqEventPublisher (JSON: `blockviz json SCEN`, the lesson's token ids);
  blockviz  python -m blockviz publish SCEN.
Then, message by message: the same count, topic, seq and payload bytes but the 8 bytes of the
float64 ``ts``; and the blockviz recording decoded by vLLM's own KVEventBatch (events/decode.py).
A lesson without a real equivalent in what publish.py runs is reported N/A with the reason
(what it differs in is shown too): an external tier (the oracle has no connector: its run is
GPU-only), a restart (a new engine process), vLLM 0.23's free order (publish.py is 0.33).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from blockviz.live.capture import CaptureReader  # noqa: E402
from blockviz.live.wire import parse_frames  # noqa: E402
from blockviz.scenario import load  # noqa: E402


def not_equivalent(path: Path) -> str | None:
    """Why vLLM's publish.py cannot run this scenario as blockviz does, or None."""
    s = load(path).scenario
    why = []
    if s.config.connector is not None:
        why.append("an external tier (publish.py's oracle has no connector: a GPU-only run)")
    if s.config.free_order != "split":
        why.append(f"free order {s.config.free_order} (vLLM <= 0.23; publish.py is 0.33)")
    if any(step.kind == "restart" for step in s.steps):
        why.append("a restart (a new engine process)")
    return "; ".join(why) or None


def shared() -> Path:
    for c in (os.environ.get("BLOCKVIZ_SHARED"), ROOT.parent / "shared", ROOT.parent.parent / "shared"):
        if c and (Path(c) / "tools" / "vllm-diff" / "events").is_dir():
            return Path(c)
    raise SystemExit("no shared toolkit (../shared/tools/vllm-diff): set BLOCKVIZ_SHARED")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def record(sched_py: str, ev: Path, out: Path, publisher: list[str], env=None) -> tuple[int, str]:
    """Start the recorder (bound), then the publisher connecting to it; -> (publisher rc, log)."""
    port = free_port()
    ep = f"tcp://127.0.0.1:{port}"
    cap = subprocess.Popen([sched_py, str(ev / "capture.py"), "--bind", "--endpoint", ep,
                            "--out", str(out), "--idle-s", "2", "--max-s", "300"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    pub = subprocess.run(publisher + ["--endpoint", ep], capture_output=True, text=True,
                         timeout=600, cwd=ROOT, env=env)
    cap.wait(timeout=300)
    return pub.returncode, pub.stderr


def compare(a: Path, b: Path) -> list[str]:
    ma = list(CaptureReader(a))
    mb = list(CaptureReader(b))
    fa = [parse_frames(m.frames) for m in ma if m.src == "sub"]
    fb = [parse_frames(m.frames) for m in mb if m.src == "sub"]
    out = []
    if len(fa) != len(fb):
        out.append(f"{len(fa)} batches from vLLM, {len(fb)} from blockviz")
    for x, y in zip(fa, fb):
        if (x.topic, x.seq) != (y.topic, y.seq):
            out.append(f"seq {x.seq}: topic/seq {(x.topic, x.seq)} != {(y.topic, y.seq)}")
        elif x.payload[:2] != b"\x93\xcb" or y.payload[:2] != b"\x93\xcb":
            out.append(f"seq {x.seq}: a payload does not start [ts: float64, ...]")
        elif x.payload[:2] + x.payload[10:] != y.payload[:2] + y.payload[10:]:
            out.append(f"seq {x.seq}: payloads differ beyond ts")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only")
    ap.add_argument("--out", default="/tmp/blockviz-publish-diff")
    a = ap.parse_args()
    sched_py, src = os.environ.get("SCHED_PY"), os.environ.get("VLLM_FULL_SRC")
    if not sched_py or not src:
        raise SystemExit("SCHED_PY / VLLM_FULL_SRC unset: eval \"$(../shared/tools/vllm-diff/sched/"
                         "setup.sh)\" && export SCHED_PY VLLM_FULL_SRC")
    sh = shared()
    ev = sh / "tools" / "vllm-diff" / "events"
    cases = [(p.stem, p, True) for p in sorted((ROOT / "scenarios").glob("*.yaml"))]
    cases += [("pressure", sh / "tools/vllm-diff/sched/examples/pressure.yaml", False),
              ("chunked", sh / "tools/vllm-diff/sched/examples/chunked.yaml", False),
              ("reset-prefix-cache", ROOT / "tests/live/scenarios/reset-prefix-cache.yaml", False)]
    only = set(a.only.split(",")) if a.only else None
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    summary = []
    for name, scen, lesson in cases:
        if only and name not in only:
            continue
        vllm_cmd = [sched_py, str(ev / "publish.py"), str(scen), "--hold-s", "0.5",
                    "--start-delay-s", "1", "--quiet"]
        if lesson:
            proj = out / f"{name}.json"
            p = subprocess.run([py, "-m", "blockviz", "json", str(scen), "--no-frames"],
                               capture_output=True, text=True, cwd=ROOT, timeout=600)
            if p.returncode:
                summary.append((name, "ERROR", f"blockviz json: {p.stderr.strip()[-200:]}"))
                continue
            proj.write_text(p.stdout)
            vllm_cmd += ["--project", str(proj)]
        rc, log = record(sched_py, ev, out / f"{name}.vllm.jsonl", vllm_cmd)
        if rc:
            last = [ln for ln in log.strip().splitlines() if ln.strip()][-1:] or ["?"]
            summary.append((name, "N/A", f"vLLM's publish.py cannot run it: {last[0][:160]}"))
            continue
        ours = out / f"{name}.blockviz.jsonl"
        rc, log = record(sched_py, ev, ours, [py, "-m", "blockviz", "publish", str(scen),
                                              "--start-delay-s", "1", "--hold-s", "0.5"])
        if rc:
            summary.append((name, "FAIL", f"blockviz publish rc {rc}: {log.strip()[-200:]}"))
            continue
        diffs = compare(out / f"{name}.vllm.jsonl", ours)
        why = not_equivalent(scen)
        if why:
            summary.append((name, "N/A", f"{why}; differs: {'; '.join(diffs) or 'nothing'}"))
            print(f"{name}: N/A {summary[-1][2]}", flush=True)
            continue
        dec = subprocess.run([sched_py, str(ev / "decode.py"), str(ours), "--json"],
                             capture_output=True, text=True, timeout=300)
        if dec.returncode:
            diffs.append(f"vLLM's decoder failed on blockviz's recording: {dec.stderr[-200:]}")
        n = len([m for m in CaptureReader(ours) if m.src == "sub"])
        notes = [ln.split("publish: ", 1)[1] for ln in log.splitlines()
                 if "teaching-only" in ln or "rewinds" in ln or "still queued" in ln]
        summary.append((name, "FAIL" if diffs else "PASS",
                        "; ".join(diffs) if diffs else f"{n} batches identical but ts; decoded by "
                        f"vLLM's KVEventBatch" + (f" (notes: {' | '.join(notes)})" if notes else "")))
        print(f"{name}: {summary[-1][1]} {summary[-1][2]}", flush=True)
    print()
    for name, verdict, why in summary:
        print(f"{verdict:5} {name}: {why}")
    json.dump(summary, open(out / "summary.json", "w"), indent=1)
    return 1 if any(v in ("FAIL", "ERROR") for _, v, _ in summary) else 0


if __name__ == "__main__":
    sys.exit(main())
