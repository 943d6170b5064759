"""A real Streamlit server and headless Chromium for the browser tests.

No chromium: the tests skip with the reason — unless BLOCKVIZ_REQUIRE_BROWSER=1 (CI), where a
missing browser is a failure."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SCREENSHOTS = ROOT / "artifacts" / "screenshots"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
