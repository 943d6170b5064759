"""Sequence mode against vLLM's own KVCacheManager: ``shared/tools/vllm-diff/run-trace`` on the
public Mooncake-format trace ``shared/data/mooncake-synthetic.jsonl`` must print exactly what
``blockviz trace capacity --json`` prints (less its per-point timings).

Skips when the shared folder, the trace or the tool is absent (CI's clean clone), or when the
tool's cache (its venv and vLLM's files, built by its first run, which downloads) is not there:
nothing is fetched by the tests. The full check — five pool sizes from 10^3 to 10^5 blocks of 512,
both free orders, every request — is the README's command; this runs a prefix of the trace."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from trace_helpers import shared_dir

pytestmark = pytest.mark.slow


def _oracle() -> tuple[Path, Path]:
    shared = shared_dir()
    if shared is None:
        pytest.skip("no shared/ folder beside the checkout (set BLOCKVIZ_SHARED)")
    tool, data = shared / "tools/vllm-diff/run-trace", shared / "data/mooncake-synthetic.jsonl"
    if not tool.is_file() or not data.is_file():
        pytest.skip(f"{tool.name} or {data.name} is absent")
    cache = Path(os.environ.get("VLLM_DIFF_HOME") or
                 Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vllm-diff")
    if not all((cache / p).exists() for p in ("venv/bin/python", "src/0.33.0/vllm", "src/0.23.0/vllm")):
        pytest.skip(f"run-trace's cache {cache} is not built (run the tool once by hand)")
    return tool, data


@pytest.mark.parametrize("block_size, order, pools, limit", [
    (512, "split", "100,1000,10000", 600),
    (512, "append", "100,1000,10000", 600),
    (64, "split", "800,8000", 150),
])
def test_capacity_json_equals_run_trace(cli, block_size, order, pools, limit):
    tool, data = _oracle()
    ref = subprocess.run([str(tool), str(data), str(block_size), order, pools, str(limit)],
                         capture_output=True, text=True, timeout=900)
    assert ref.returncode == 0, ref.stderr[-2000:]
    want = json.loads(ref.stdout.splitlines()[-1])
    for p in want["points"]:
        p.pop("seconds")
    ours = cli("trace", "capacity", str(data), "--block-size", str(block_size), "--pool-blocks", pools,
               "--free-order", order, "--limit", str(limit), "--json")
    assert ours.returncode == 0, ours.stderr
    got = json.loads(ours.stdout)
    assert got == want
    assert any(p["evictions"] for p in got["points"])        # the pool turned over
