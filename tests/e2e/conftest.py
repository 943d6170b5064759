"""A real Streamlit server and headless Chromium for the browser tests.

No chromium: the tests skip with the reason — unless BLOCKVIZ_REQUIRE_BROWSER=1 (CI), where a
missing browser is a failure."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"


def _unavailable(reason: str):
    if os.environ.get("BLOCKVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests are required here (BLOCKVIZ_REQUIRE_BROWSER=1): {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if not path:
        _unavailable("no chromium at /usr/bin/chromium (apt-get install chromium fonts-noto-cjk)")
    return path


@contextlib.contextmanager
def app_server(*args: str, log_name: str = "e2e-server.log"):
    """``blockviz app ARGS`` on a free port; yields the base URL once it answers; terminated at
    the end."""
    port = _free_port()
    (ROOT / "artifacts").mkdir(exist_ok=True)
    log = open(ROOT / "artifacts" / log_name, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "blockviz", "app", *args,
         "--server.address", "127.0.0.1", "--server.port", str(port)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with status {proc.returncode}")
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("streamlit did not answer /_stcore/health within 60 s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def server():
    """``blockviz app`` on a free port; yields the base URL; terminated at the end."""
    with app_server() as url:
        yield url


@pytest.fixture(scope="session")
def browser(chromium_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:  # pragma: no cover - requirements-dev installs it
        _unavailable(f"playwright is not installed: {e}")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
