"""``python -m bench [core] [scale] [tensors] [tier] [board] [capacity] [json_stream] [sched] [load]
[figures] [live] [curve] [replay] [--repeat N] [--quick] [--out FILE]``

Runs the chosen benchmarks (all by default), prints medians and the ratios measured side by side
in the same run, the budgets met or missed, and writes a JSON report (default
``bench/reports/latest.json``, which git ignores).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import (
    board,
    capacity,
    core_ops,
    curve,
    figures,
    json_stream,
    live,
    load,
    replay,
    scale,
    sched,
    tensors,
    tier,
)
from .timing import machine

# Each a module with NAME, run(repeat, quick, say) -> dict (with optional "budgets") and render(dict).
BENCHMARKS = {m.NAME: m for m in (core_ops, scale, tensors, tier, board, capacity, json_stream,
                                   sched, load, figures, live, curve, replay)}
LATER: dict[str, str] = {}      # names of benchmarks announced but not written yet -> why
DEFAULT_REPORT = Path(__file__).resolve().parent / "reports" / "latest.json"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[1])
    p.add_argument("benchmarks", nargs="*", metavar="NAME",
                   help=f"any of {', '.join(BENCHMARKS)} (default: all)")
    p.add_argument("--repeat", type=int, default=5, help="runs per measurement (default 5)")
    p.add_argument("--quick", action="store_true",
                   help="small sizes, a smoke test of the harness (numbers not meaningful)")
    p.add_argument("--out", type=Path, default=DEFAULT_REPORT, help="where the JSON report goes")
    args = p.parse_args(argv)
    for name in args.benchmarks:
        if name in LATER:
            p.error(f"{name}: {LATER[name]}")
        if name not in BENCHMARKS:
            p.error(f"unknown benchmark {name!r} (choose from {', '.join(BENCHMARKS)})")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    names = args.benchmarks or list(BENCHMARKS)
    report = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(),
              "repeat": args.repeat, "quick": args.quick, "benchmarks": {}}

    def say(msg: str) -> None:
        print(msg, flush=True)

    for name in names:
        module = BENCHMARKS[name]
        say(f"\n== {name} ==")
        start = time.perf_counter()
        result = module.run(args.repeat, args.quick, say)
        result["seconds"] = time.perf_counter() - start
        report["benchmarks"][name] = result
        say(module.render(result))
    budgets = [b for r in report["benchmarks"].values() for b in r.get("budgets", [])]
    report["budgets"] = budgets
    if budgets:
        say("\n== budgets ==")
        for b in budgets:
            value = f"{b['value']:.3f}" if b["unit"] == "s" else f"{b['value']:.2f}"
            say(f"  {'met   ' if b['met'] else 'MISSED'}  {b['name']}: {value} {b['unit']} "
                f"(limit {b['limit']})")
    if args.quick:
        say("\n(--quick: small sizes; the numbers are not the benchmark)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    say(f"\nreport written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
