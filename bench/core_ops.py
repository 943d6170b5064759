"""Benchmark ``core``: blockviz's BlockPool against vLLM 0.33's own, on the same call trace.

A generated multi-turn workload runs through blockviz's manager and scheduler; the pool-level calls
are recorded (bench.trace) on pools of 1,024 and 16,384 blocks, sized so that the pool turns over
a few times (evictions included). The same trace is replayed on blockviz's BlockPool with op
recording off and on, and on vLLM's BlockPool, with KV events off in all and then on in all.
Every implementation is first replayed once with every result checked against the recorded run.
Implementations take turns within each repeat; medians are compared.
"""
from __future__ import annotations

import time
from collections import defaultdict

from blockviz.teach.workload import Workload, generate

from . import trace as T
from .timing import fmt_s, median, ratio, table, timed
from .vllm_shim import VllmUnavailable, load

NAME = "core"
TARGETS = {"recording off": 1.0, "recording on": 1.3}   # ours / vLLM, at most
WORKLOAD = Workload(kind="multi_turn", block_size=16, max_live=32, prefix_blocks=4,
                    new_tokens=128, max_turns=6, num_prefixes=4, seed=0)
POOLS = {1024: 1000, 16384: 16000}          # usable blocks -> events (about 3+ turnovers)
QUICK_POOLS = {1024: 200, 16384: 300}


def _replay(calls: list[tuple]) -> None:
    for fn, args in calls:
        fn(*args)


def _breakdown(impl, trace: T.Trace, events: bool) -> dict[str, float]:
    """Mean seconds per call, by call kind (each call timed on its own: includes the timer)."""
    pool = impl.new(trace, events)
    total: dict[str, float] = defaultdict(float)
    clock = time.perf_counter
    for (fn, args), c in zip(impl.calls(trace, pool), trace.calls):
        t = clock()
        fn(*args)
        total[c[0]] += clock() - t
    counts = trace.counts()
    return {k: total[k] / counts[k] for k in counts}


def run(repeat: int, quick: bool, say) -> dict:
    try:
        vllm = load()
        vllm_info = {"version": vllm.version, "src": vllm.src}
    except VllmUnavailable as e:
        vllm, vllm_info = None, {"skipped": str(e)}
        say(f"  vLLM side skipped: {e}")
    impls = [T.OursPool(False), T.OursPool(True)] + ([T.VllmPool(vllm)] if vllm else [])
    cases, breakdowns = [], []
    for num_blocks, num_events in (QUICK_POOLS if quick else POOLS).items():
        t0 = time.perf_counter()
        trace = T.record_trace(generate(WORKLOAD, num_blocks=num_blocks, num_events=num_events))
        say(f"  pool {num_blocks:,}: {len(trace.calls):,} calls recorded from {num_events:,} "
            f"events in {time.perf_counter() - t0:.1f} s; replaying ({repeat} repeats)")
        for events in (False, True):
            for impl in impls:
                T.replay_checked(impl, trace, events)
            times: dict[str, list[float]] = {impl.name: [] for impl in impls}
            cpu: dict[str, list[float]] = {impl.name: [] for impl in impls}
            for r in range(repeat):
                for impl in impls[r % len(impls):] + impls[:r % len(impls)]:
                    pool = impl.new(trace, events)
                    calls = impl.calls(trace, pool)
                    wall, cpu_s = timed(lambda calls=calls: _replay(calls))
                    times[impl.name].append(wall)
                    cpu[impl.name].append(cpu_s)
            med = {name: median(ts) for name, ts in times.items()}
            med_cpu = {name: median(ts) for name, ts in cpu.items()}
            case = {"num_blocks": num_blocks, "kv_events": events, "calls": len(trace.calls),
                    "call_counts": trace.counts(), "kv_events_emitted": dict(trace.kv_events),
                    "median_s": med, "median_cpu_s": med_cpu, "runs_s": times, "runs_cpu_s": cpu}
            if vllm:
                v, v_cpu = med[T.VllmPool.name], med_cpu[T.VllmPool.name]
                case["ratio_recording_off"] = ratio(med[impls[0].name], v)
                case["ratio_recording_on"] = ratio(med[impls[1].name], v)
                case["cpu_ratio_recording_off"] = ratio(med_cpu[impls[0].name], v_cpu)
                case["cpu_ratio_recording_on"] = ratio(med_cpu[impls[1].name], v_cpu)
            cases.append(case)
        breakdowns.append({"num_blocks": num_blocks, "kv_events": True,
                           "per_call_s": {impl.name: _breakdown(impl, trace, True)
                                          for impl in impls}})
    result = {"workload": WORKLOAD.__dict__ | {"pools": QUICK_POOLS if quick else POOLS},
              "vllm": vllm_info, "cases": cases, "per_call": breakdowns}
    if vllm:
        result["budgets"] = [
            {"name": f"core: blockviz/vLLM, {label}", "limit": limit,
             "value": max(c[f"ratio_{label.replace(' ', '_')}"] for c in cases),
             "met": all(c[f"ratio_{label.replace(' ', '_')}"] <= limit for c in cases),
             "unit": "x (worst case)"}
            for label, limit in TARGETS.items()]
    return result


def render(result: dict) -> str:
    names = list(result["cases"][0]["median_s"]) if result["cases"] else []
    has_vllm = "ratio_recording_off" in (result["cases"][0] if result["cases"] else {})
    headers = ["pool", "KV events", "calls"] + [f"{n} (median)" for n in names]
    if has_vllm:
        headers += ["off/vLLM", "on/vLLM", "(CPU time: off, on)"]
    rows = []
    for c in result["cases"]:
        row = [f"{c['num_blocks']:,}", "on" if c["kv_events"] else "off", f"{c['calls']:,}"]
        row += [fmt_s(c["median_s"][n]) for n in names]
        if has_vllm:
            row += [f"{c['ratio_recording_off']:.2f}x", f"{c['ratio_recording_on']:.2f}x",
                    f"{c['cpu_ratio_recording_off']:.2f}x, {c['cpu_ratio_recording_on']:.2f}x"]
        rows.append(row)
    out = [table(headers, rows)]
    for b in result["per_call"]:
        kinds = sorted(next(iter(b["per_call_s"].values())))
        out.append(f"\n  per call, pool {b['num_blocks']:,}, KV events on (µs; each call timed "
                   f"alone, timer included):")
        out.append(table(["call"] + list(b["per_call_s"]),
                         [[k] + [f"{b['per_call_s'][n][k] * 1e6:.2f}" for n in b["per_call_s"]]
                          for k in kinds]))
    if not has_vllm:
        out.append(f"\n  vLLM: {result['vllm'].get('skipped')}")
    return "\n".join(out)
