"""Benchmark ``curve``: the whole sequence-mode curve in one pass against ONE replay at one pool size.

The trace is ``bench capacity``'s (:data:`bench.capacity.WORKLOAD`: 12,000 multi-turn requests,
~17,700 prompt tokens each), parsed once before anything is timed.

  * **block size 512**: :func:`blockviz.sim.curve.curve_sequence` (every pool size from one block
    to the working set, split order) and :func:`blockviz.sim.capacity.replay_sequence` at
    :data:`bench.capacity.POOL_512` blocks, taking turns within each repeat; medians compared. The
    curve's point at that size must equal the replay's. Budget: curve / replay at most 1.0.
  * **block size 16**, the same token capacity (32x the blocks): the same, ``repeat // 2`` runs
    (at least one; a replay takes half a minute). Budget: at most 2.0.
  * **memory**: the curve's peak traced allocation (``tracemalloc``, in a run of its own, untimed)
    for the first half of the trace and for all of it, at both block sizes. Budget: the whole
    trace takes at most 2.2x the half (linear in the trace: 2.0).
  * **duplicates** (no budget): the same trace with 5% of its requests sent again right away at a
    length that is a whole number of blocks (a retry), which makes vLLM cache a second copy of
    the last block. Reports what such traffic costs the one pass (module docstring of
    ``blockviz.sim.curve``): curve / replay at block size 512, once.
"""
from __future__ import annotations

import random
import tracemalloc
from dataclasses import asdict, replace

from blockviz.scenario.trace import TraceRequest
from blockviz.sim.capacity import replay_sequence
from blockviz.sim.curve import curve_sequence

from .capacity import POOL_512, QUICK_POOL_512, QUICK_REQUESTS, WORKLOAD, build_trace
from .timing import fmt_s, median, ratio, timed

NAME = "curve"
TARGET_512 = 1.0       # curve / one replay, block size 512
TARGET_16 = 2.0        # block size 16
TARGET_MEMORY = 2.2    # whole trace / half the trace, peak bytes
RETRY_FRACTION = 0.05


def side_by_side(trace, block_size: int, pool: int, runs: int) -> dict:
    """Curve and replay taking turns; both must give the same point at ``pool``."""
    box: dict = {}
    sides = [("curve", lambda: box.__setitem__("curve", curve_sequence(trace, block_size=block_size))),
             ("replay", lambda: box.__setitem__("replay", replay_sequence(trace, block_size=block_size,
                                                                          pool_blocks=pool)))]
    wall: dict[str, list[float]] = {"curve": [], "replay": []}
    cpu: dict[str, list[float]] = {"curve": [], "replay": []}
    for r in range(runs):
        for name, fn in sides[r % 2:] + sides[:r % 2]:
            w, c = timed(fn)
            wall[name].append(w)
            cpu[name].append(c)
    curve = box["curve"]
    if curve.point(pool) != box["replay"]:
        raise AssertionError(f"the curve differs from the replay at {pool}: {curve.point(pool)}, "
                             f"{box['replay']}")
    med = {k: median(v) for k, v in wall.items()}
    med_cpu = {k: median(v) for k, v in cpu.items()}
    return {"block_size": block_size, "pool_blocks": pool, "runs": runs, "median_s": med,
            "median_cpu_s": med_cpu, "runs_s": wall, "ratio": ratio(med["curve"], med["replay"]),
            "cpu_ratio": ratio(med_cpu["curve"], med_cpu["replay"]), "point": box["replay"],
            "working_set": curve.working_set, "largest": curve.largest,
            "change_points": len(curve.steps())}


def peak_bytes(trace, block_size: int) -> int:
    tracemalloc.start()
    try:
        curve_sequence(trace, block_size=block_size)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def with_retries(trace, block_size: int, fraction: float, seed: int = 1) -> list[TraceRequest]:
    """``trace`` with some requests sent again at once, cut to a whole number of blocks."""
    rng = random.Random(seed)
    out: list[TraceRequest] = []
    for r in trace:
        out.append(r)
        n = r.input_length - r.input_length % block_size
        if n >= block_size and rng.random() < fraction:
            out.append(r._replace(input_length=n, hash_ids=r.hash_ids[:-(-n // r.block_tokens)]))
    return out


def run(repeat: int, quick: bool, say) -> dict:
    w = replace(WORKLOAD, requests=QUICK_REQUESTS) if quick else WORKLOAD
    pool = QUICK_POOL_512 if quick else POOL_512
    trace = build_trace(w)
    say(f"  trace: {len(trace):,} requests; pool {pool:,} blocks of 512 ({pool * 32:,} of 16); "
        f"{repeat} repeats at 512")
    result: dict = {"workload": asdict(w), "requests": len(trace), "budgets": []}
    result["bs512"] = side_by_side(trace, 512, pool, repeat)
    say("  block size 16...")
    result["bs16"] = side_by_side(trace, 16, pool * 32, max(1, repeat // 2))
    for key, limit in (("bs512", TARGET_512), ("bs16", TARGET_16)):
        r = result[key]
        result["budgets"].append({"name": f"curve: the whole curve / one replay, block size "
                                          f"{r['block_size']}, {len(trace):,} requests",
                                  "limit": limit, "value": r["ratio"], "met": r["ratio"] <= limit,
                                  "unit": "x"})
    say("  memory...")
    half = trace[:len(trace) // 2]
    result["memory"] = {}
    for bs in (512, 16):
        a, b = peak_bytes(half, bs), peak_bytes(trace, bs)
        result["memory"][str(bs)] = {"half_bytes": a, "whole_bytes": b, "ratio": ratio(b, a)}
    worst = max(m["ratio"] for m in result["memory"].values())
    result["budgets"].append({"name": "curve: peak memory, whole trace / half of it", "limit": TARGET_MEMORY,
                              "value": worst, "met": worst <= TARGET_MEMORY, "unit": "x"})
    say("  duplicates...")
    dup = with_retries(trace, 512, RETRY_FRACTION)
    result["retries"] = side_by_side(dup, 512, pool, 1) | {"requests": len(dup),
                                                            "fraction": RETRY_FRACTION}
    return result


def render(result: dict) -> str:
    out = []
    for key in ("bs512", "bs16", "retries"):
        r = result[key]
        p = r["point"]
        label = (f"block size {r['block_size']}" if key != "retries" else
                 f"with {r['fraction']:.0%} retries ({r['requests']:,} requests), block size 512")
        out.append(f"  {label}: the whole curve (sizes 1..{r['working_set']:,}, "
                   f"{r['change_points']:,} changes) {fmt_s(r['median_s']['curve'])} against one replay "
                   f"at {r['pool_blocks']:,} blocks {fmt_s(r['median_s']['replay'])}: {r['ratio']:.2f}x "
                   f"(CPU {r['cpu_ratio']:.2f}x, median of {r['runs']}); hit rate there "
                   f"{p['hits'] / p['queries']:.1%}, equal")
    for bs, m in result["memory"].items():
        out.append(f"  memory, block size {bs}: peak {m['half_bytes'] / 2**20:.1f} MiB for half the "
                   f"trace, {m['whole_bytes'] / 2**20:.1f} MiB for all of it ({m['ratio']:.2f}x)")
    return "\n".join(out)
