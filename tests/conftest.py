"""Shared fixtures: the repo root, the built-in scenarios, and ways to run them."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _unavailable(reason: str):
    if os.environ.get("BLOCKVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests are required here (BLOCKVIZ_REQUIRE_BROWSER=1): {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not path:
        _unavailable("no chromium at /usr/bin/chromium (apt-get install chromium fonts-noto-cjk)")
    return path


@pytest.fixture(scope="session")
def browser(chromium_path):
    """One headless Chromium for the whole session. Playwright's sync API runs one instance per
    thread: a second ``sync_playwright()`` while this one lives fails ("Sync API inside the
    asyncio loop"), so every browser test, wherever it lives, takes this fixture."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:  # pragma: no cover - requirements-dev installs it
        _unavailable(f"playwright is not installed: {e}")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield b
        b.close()


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
