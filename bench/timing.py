"""Small timing helpers shared by the benchmarks."""
from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable


def timed(fn: Callable[[], object], *, gc_off: bool = True) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one call of ``fn``. Like ``timeit``, the
    cyclic GC is off while it runs (after a collection), so a collection that earlier work made
    due does not land in it. On a shared machine CPU time leaves out the time another process
    had the core; both are reported."""
    gc.collect()
    enabled = gc.isenabled()
    if gc_off:
        gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - wall, time.process_time() - cpu
    finally:
        if enabled:
            gc.enable()


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def machine() -> dict:
    """What the numbers were measured on."""
    info = {"python": sys.version.split()[0], "platform": platform.platform(),
            "machine": platform.machine(), "cpus": os.cpu_count()}
    try:
        info["load_avg_1m"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    return info


def fmt_s(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} µs"


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain text table, columns padded to fit."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(r, widths)) for r in rows]
    return "\n".join(out)
