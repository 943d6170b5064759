"""Shared fixtures: the repo root, the built-in scenarios, and ways to run them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def cli():
    """``cli(*args)`` runs ``python -m blockviz ARGS`` in a subprocess from the repo root."""
    def run_cli(*args: str, input: str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "blockviz", *args], cwd=ROOT, input=input,
                              capture_output=True, text=True, timeout=timeout)
    return run_cli


@pytest.fixture(scope="session")
def run_file():
    """``run_file(path, **kw)`` -> (engine, timeline) of a scenario file."""
    from blockviz.scenario import load
    from blockviz.sim.runner import run

    def _run(path, **kw):
        return run(load(path), **kw)
    return _run
