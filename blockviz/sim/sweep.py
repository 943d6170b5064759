"""A capacity sweep: pool sizes × free orders × traces (or a generated workload's scenario), as
independent tasks on an executor.

:func:`plan` lists the tasks — per trace one ``ceiling`` task and one task per (free order, pool
size) — and :func:`sweep` runs them on an executor and assembles, per (trace, free order), the
report ``run-trace`` prints: ``{"requests", "block_size", "free_order", "ceiling": {"queries",
"hits"}, "points": [{"pool_blocks", "queries", "hits", "requests", "rejected", "evictions"}]}``.
Another mode's report adds ``"mode"`` and ``"options"`` (its settings, defaults filled in), and its
points add the mode's own fields (timed: :data:`blockviz.sim.capacity.TIMED_FIELDS`); the ceiling
is the same infinite pool in every mode.

Executors (:data:`EXECUTORS`) take a list of :class:`Task` and a progress callback (requests
replayed since the last call, over all tasks) and return the tasks' results in order:

  * ``local`` — worker processes on this machine (``workers``, default ``min(cpu_count, tasks)``;
    one worker runs in this process). Workers read the trace file themselves and report progress
    through a shared counter every few hundred requests.
  * ``ray`` — the same tasks as Ray tasks (``pip install 'blockviz[ray]'``), on the cluster at
    ``address`` or a local Ray started for the sweep. The trace's bytes go to Ray's object store
    once, so nodes need no shared disk; progress advances as tasks finish.

A task is pure (a trace and numbers in, a dict out), so any executor gives the same results.
"""
from __future__ import annotations

import importlib.util
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from blockviz.core import FREE_ORDERS
from blockviz.scenario.trace import check_block_size, check_trace, iter_trace
from blockviz.sim.capacity import (
    KV_PRESETS,
    MODES,
    OptionError,
    Progress,
    ceiling,
    model_groups,
    replay_scenario,
    running_total,
)


@dataclass(frozen=True)
class Task:
    """One replay: of a trace file at one pool size and free order (or its ceiling), or of a
    scenario (a generated workload: ``scenario`` set, ``trace`` empty)."""
    trace: str                       # the trace file's path
    block_size: int
    pool_blocks: int | None = None   # None: the ceiling (an infinite pool)
    free_order: str | None = None
    mode: str = "sequence"
    limit: int | None = None         # only the first ``limit`` requests
    options: tuple = ()              # the mode's own settings, as (name, value) pairs
    scenario: object = None          # a Scenario to replay instead of a trace
    model: str | None = None         # a hybrid preset (KV_PRESETS): the replay runs its KV-cache groups
    name: str | None = None          # what the trace is called, if not its path (an upload's name)

    @property
    def is_ceiling(self) -> bool:
        return self.pool_blocks is None


def run_task(task: Task, data: bytes | None = None, progress: Progress | None = None) -> dict:
    """Replay one task; ``data``: the trace's bytes, if not read from ``task.trace``."""
    if task.scenario is not None:
        return replay_scenario(task.scenario, pool_blocks=task.pool_blocks, free_order=task.free_order,
                               progress=progress)
    requests = iter_trace(task.trace if data is None else data, name=task.name or task.trace,
                          limit=task.limit)
    groups = model_groups(task.model)
    if task.is_ceiling:
        return ceiling(requests, block_size=task.block_size, progress=progress, kv_cache_groups=groups)
    return MODES[task.mode].run(requests, block_size=task.block_size, pool_blocks=task.pool_blocks,
                                free_order=task.free_order, progress=progress, **dict(task.options),
                                **({"kv_cache_groups": groups} if groups else {}))


def plan(traces: Sequence[str], *, block_size: int, pool_blocks: Sequence[int],
         free_orders: Sequence[str] = ("split",), mode: str = "sequence", limit: int | None = None,
         options: dict | None = None, model: str | None = None, name: str | None = None) -> list[Task]:
    """The tasks; ``model``: a preset whose layer mix the replay follows when it is hybrid (a
    dense model's replay is the one-group replay, whatever its name); ``name``: what a lone trace
    is called, if not its path (an upload's name tells a Bailian trace's hash block)."""
    check_block_size(block_size)
    if model is not None and model not in KV_PRESETS:
        raise ValueError(f"unknown model {model!r} (one of {', '.join(KV_PRESETS)})")
    model = model if model_groups(model) else None
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    for order in free_orders:
        if order not in FREE_ORDERS:
            raise ValueError(f"free order must be one of {FREE_ORDERS}, not {order!r}")
    for p in pool_blocks:
        if p < 1:
            raise ValueError(f"pool sizes must be at least 1 block, not {p}")
    unknown = sorted(set(options or {}) - set(MODES[mode].defaults))
    if unknown:
        raise ValueError(f"mode {mode!r} has no option {unknown[0]!r}"
                         + (f" (it has {', '.join(MODES[mode].defaults)})" if MODES[mode].defaults else ""))
    if MODES[mode].check is not None:
        MODES[mode].check(**(options or {}))
    opts = tuple(sorted((options or {}).items()))
    tasks = []
    for trace in traces:
        tasks.append(Task(str(trace), block_size, limit=limit, model=model, name=name))
        tasks += [Task(str(trace), block_size, p, order, mode, limit, opts, model=model, name=name)
                  for order in free_orders for p in pool_blocks]
    return tasks


# -- executors --------------------------------------------------------------------------------
class ExecutorUnavailable(RuntimeError):
    """The executor cannot run here (e.g. Ray is not installed); the message says what to do."""


@dataclass
class LocalExecutor:
    """Worker processes on this machine; ``workers=None``: ``min(cpu_count, tasks)``."""
    workers: int | None = None
    poll_s: float = 0.2

    def run(self, tasks: Sequence[Task], progress: Progress | None = None) -> list[dict]:
        workers = max(1, min(self.workers or os.cpu_count() or 1, len(tasks)))
        if workers == 1:
            return [run_task(t, progress=progress) for t in tasks]
        # forkserver (spawn elsewhere): never fork a process that may have threads (a server).
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        counter = ctx.Value("q", 0)
        reported = 0
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                 initargs=(counter,)) as pool:
            futures = [pool.submit(run_task, t, progress=_count) for t in tasks]
            pending = set(futures)
            try:
                while pending:
                    _, pending = wait(pending, timeout=self.poll_s, return_when=FIRST_COMPLETED)
                    if progress is not None:
                        done = counter.value
                        if done > reported:
                            progress(done - reported)
                            reported = done
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            return [f.result() for f in futures]


_COUNTER = None   # in a worker: the sweep's shared progress counter


def _init_worker(counter) -> None:
    global _COUNTER
    _COUNTER = counter


def _count(n: int) -> None:
    with _COUNTER.get_lock():
        _COUNTER.value += n


@dataclass
class RayExecutor:
    """Ray tasks: on the cluster at ``address`` (``"auto"``: the one this machine belongs to),
    or a local Ray started for the sweep (``address=None``) and stopped after it."""
    address: str | None = None
    num_cpus: int | None = None        # for a local Ray: how many CPUs it may use
    poll_s: float = 0.5

    def __post_init__(self) -> None:
        if importlib.util.find_spec("ray") is None:
            raise ExecutorUnavailable("Ray is not installed here: pip install 'blockviz[ray]' "
                                      "(or use the local executor)")

    def run(self, tasks: Sequence[Task], progress: Progress | None = None) -> list[dict]:
        import ray
        started = not ray.is_initialized()
        if started:
            # a local Ray for this sweep: no dashboard (num_cpus None: Ray's default, every CPU)
            local = {"include_dashboard": False, "num_cpus": self.num_cpus} if self.address is None else {}
            ray.init(address=self.address, logging_level=logging.WARNING, **local)
        try:
            remote = ray.remote(_ray_task)
            data = {path: ray.put(Path(path).read_bytes())
                    for path in {t.trace for t in tasks if t.scenario is None}}
            refs = [remote.remote(t, data.get(t.trace)) for t in tasks]
            index = {ref: i for i, ref in enumerate(refs)}
            results: list[dict | None] = [None] * len(refs)
            pending = list(refs)
            while pending:
                done, pending = ray.wait(pending, num_returns=1, timeout=self.poll_s)
                for ref in done:
                    result, replayed = ray.get(ref)
                    results[index[ref]] = result
                    if progress is not None:
                        progress(replayed)
            return results
        finally:
            if started:
                ray.shutdown()


def _ray_task(task: Task, data: bytes) -> tuple[dict, int]:
    replayed: list[int] = []     # the counts progress was told
    return run_task(task, data, progress=replayed.append), sum(replayed)


EXECUTORS: dict[str, type] = {"local": LocalExecutor, "ray": RayExecutor}


# -- the sweep --------------------------------------------------------------------------------
class PoolTooLarge(OptionError):
    """A pool size past every block the trace could ever hold (it would replay exactly as that
    many, after allocating the rest for nothing)."""

    def __init__(self, value: int, most: int, block_size: int, requests: int) -> None:
        super().__init__("pool_too_big", value=f"{value:,}", most=f"{most:,}", bs=block_size,
                         requests=f"{requests:,}")


def check_pools(pool_blocks: Sequence[int], extents, block_size: int, groups: int = 1) -> None:
    """PoolTooLarge for a pool no trace could fill (each extent from :func:`check_trace` with the
    block size; a hybrid model's ``groups`` each hold a copy)."""
    widest = max(extents, key=lambda e: e["most_blocks"])
    for p in pool_blocks:
        if p > groups * widest["most_blocks"]:
            raise PoolTooLarge(p, groups * widest["most_blocks"], block_size, widest["requests"])


@dataclass
class SweepResult:
    reports: list[dict]          # per (trace, free order), in the order asked, run-trace's shape
    seconds: float


def sweep(traces: Sequence[str], *, block_size: int, pool_blocks: Sequence[int],
          free_orders: Sequence[str] = ("split",), mode: str = "sequence",
          limit: int | None = None, options: dict | None = None, executor=None,
          progress: Callable[[int, int], None] | None = None, model: str | None = None,
          name: str | None = None) -> SweepResult:
    """Check every trace (the first bad line raises its TraceError before anything runs), run
    the tasks, and assemble one report per (trace, free order). ``progress(done, total)`` counts
    requests replayed over all tasks. ``model``: a hybrid preset's groups drive the replay, and
    its reports add ``"model"`` (their points ``limited_hits``). ``name``: as :func:`plan`'s."""
    tasks = plan(traces, block_size=block_size, pool_blocks=pool_blocks, free_orders=free_orders,
                 mode=mode, limit=limit, options=options, model=model, name=name)
    hybrid = tasks[0].model if tasks else None
    extents = {str(t): check_trace(t, name=name, block_size=block_size, limit=limit) for t in traces}
    check_pools(pool_blocks, extents.values(), block_size, len(model_groups(hybrid) or ()) or 1)
    total = sum(extents[t.trace]["requests"] for t in tasks)
    start = time.perf_counter()
    advance = running_total(progress, total)
    advance(0)
    results = (executor or LocalExecutor()).run(tasks, advance)
    advance(total)
    reports = []
    for trace in map(str, traces):
        ceil = next(r for t, r in zip(tasks, results) if t.trace == trace and t.is_ceiling)
        for order in free_orders:
            points = [r for t, r in zip(tasks, results)
                      if t.trace == trace and t.free_order == order and not t.is_ceiling]
            report = {"requests": extents[trace]["requests"], "block_size": block_size, "free_order": order,
                      "ceiling": dict(ceil), "points": points}
            if mode != "sequence":   # sequence mode's report is run-trace's, exactly
                report |= {"mode": mode, "options": MODES[mode].defaults | dict(options or {})}
            if hybrid:               # ... a hybrid model's is not: it names the model
                report["model"] = hybrid
            reports.append(report)
    return SweepResult(reports, time.perf_counter() - start)
