"""One scale measurement in a fresh process (``python -m bench.scale_child JSON``), so that its
peak RSS is its own. Pinned to one CPU; prints one JSON line.

Measures: generating and validating the scenario, ``blockviz.sim.runner.run`` to the end with a full
timeline (wall and CPU time), peak RSS, and ``Timeline.step(i)`` at random steps never asked
for before (each jump from a cold start, apart from what the timeline keeps itself).
"""
from __future__ import annotations

import json
import os
import random
import resource
import sys
import time


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the
    parent across fork and exec, so a child's would start at the benchmark runner's size."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def measure(params: dict) -> dict:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from blockviz.scenario import Scenario
    from blockviz.scenario.load import check_references
    from blockviz.sim.runner import run
    from blockviz.teach import workload as W

    t = time.perf_counter()
    data = W.generate_dict(W.Workload(**params["workload"]))
    t_generate = time.perf_counter() - t
    t = time.perf_counter()
    scenario = Scenario.model_validate(data)
    # the 100,000-event case's prompts (multi-turn: each turn repeats the conversation so far)
    # total millions of tokens, past the limit a user's file has; a benchmark of scale, not input
    check_references(W.loaded(scenario), max_prompt_tokens=None)
    t_validate = time.perf_counter() - t
    # the generator's raw dict is not what a run keeps (the app holds the validated scenario
    # alone): let it go, so that the peak is the scenario's, the engine's and the timeline's
    num_events = len(data["steps"])
    del data
    rss_before = _rss_mb()
    payloads = params["workload"].get("model") is not None
    if payloads:
        import torch  # imported before the clock starts, as the app has it loaded
        torch.set_num_threads(1)
    wall, cpu = time.perf_counter(), time.process_time()
    engine, timeline = run(W.loaded(scenario), payloads=payloads)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak_after_run = _peak_rss_mb()
    if timeline.error is not None:
        raise SystemExit(f"the scenario stopped early: {timeline.error}")

    rng = random.Random(params.get("seed", 0))
    n = len(timeline)
    indices = rng.sample(range(1, n), min(params.get("jumps", 30), n - 1))
    jumps, jumps_cpu = [], []
    for i in indices:
        t, c = time.perf_counter(), time.process_time()
        timeline.step(i)
        jumps.append(time.perf_counter() - t)
        jumps_cpu.append(time.process_time() - c)
    stats = engine.manager.prefix_cache_stats
    return {
        "events": num_events, "steps_in_timeline": n,
        "generate_s": t_generate, "validate_s": t_validate,
        "run_wall_s": wall, "run_cpu_s": cpu,
        "rss_before_run_mb": rss_before, "peak_rss_mb": peak_after_run,
        "peak_rss_with_jumps_mb": _peak_rss_mb(),
        "jump_s": jumps, "jump_cpu_s": jumps_cpu, "keyframes": timeline.num_keyframes,
        "requests": len(engine.scheduler.requests),
        "prefix_cache_queries": stats.queries, "prefix_cache_hits": stats.hits,
        "evictions": engine.pool.num_evictions, "preemptions": engine.scheduler.num_preemptions,
        "payload_device": timeline.payload_device,
    }


def main(argv: list[str]) -> int:
    print(json.dumps(measure(json.loads(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
