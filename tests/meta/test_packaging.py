"""The wheel is the product: built from a clean copy of the checkout and installed into a venv
outside it, the installed copy (not the checkout) runs the `blockviz` command, finds every built-in
lesson and every file it reads at run time, serves the player and the Author preview in Chromium,
exports HTML and PNG and replays a trace.

The venv is a fresh one whose own site-packages holds only blockviz (from the wheel); the
dependencies come from the suite's venv through a ``.pth`` file placed after it, so nothing is
downloaded and the checkout is on no path. Every command runs in a temporary folder.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["pyproject.toml", "README.md", "LICENSE", "requirements.txt", "blockviz", "scenarios"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built (no build isolation: the suite's venv has setuptools) from a copy of the
    files the build reads, so the build leaves nothing in the repository."""
    src = tmp_path_factory.mktemp("src")
    for name in SHIPPED:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(dist), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (whl,) = dist.glob("blockviz-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A venv outside the checkout with the wheel installed in it (its `blockviz` command too)."""
    home = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    py = home / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    deps = sysconfig.get_paths()["purelib"]          # the suite's venv: the dependencies
    (site / "zz-blockviz-test-deps.pth").write_text(f"import site; site.addsitedir({deps!r})\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                           "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return home


def env() -> dict:
    e = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "BLOCKVIZ_SCENARIOS", "VIRTUAL_ENV", "PYTHONHOME")}
    e["PATH"] = os.pathsep.join(p for p in e.get("PATH", "").split(os.pathsep)
                                if not p.startswith(str(ROOT)))
    return e


def blockviz(venv: Path, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "blockviz"), *args], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=timeout)


def python(venv: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=120)


def runtime_files(base: Path) -> set[str]:
    """Every file of the package (its modules and what they read at run time), relative."""
    return {str(p.relative_to(base)) for p in base.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


# -- what the wheel holds ----------------------------------------------------------------------
def test_the_wheel_holds_every_file_the_package_has_and_nothing_else(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    package = {n.removeprefix("blockviz/") for n in names
               if n.startswith("blockviz/") and not n.startswith("blockviz/lessons/")}
    assert package == runtime_files(ROOT / "blockviz")          # board.js, board.css included
    lessons = {n.removeprefix("blockviz/lessons/") for n in names if n.startswith("blockviz/lessons/")}
    assert lessons == {p.name for p in (ROOT / "scenarios").glob("*.yaml")}
    assert not any(n.startswith(("bench/", "tests/")) for n in names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "License-Expression: Apache-2.0" in text and "Requires-Dist: torch==2.13.0" in text


def test_the_installed_copy_is_the_one_that_runs(venv, tmp_path):
    out = python(venv, "import blockviz, json; print(json.dumps(blockviz.__file__))", tmp_path)
    assert out.returncode == 0, out.stderr
    where = Path(json.loads(out.stdout))
    assert where.is_relative_to(venv) and not where.is_relative_to(ROOT)


# -- the command ---------------------------------------------------------------------------------
def test_the_command_and_its_help(venv, tmp_path):
    top = blockviz(venv, "--help", cwd=tmp_path)
    assert top.returncode == 0 and "six-blocks" in top.stdout
    for word in ("app", "play", "json", "validate", "verify", "export", "schema", "trace"):
        assert word in top.stdout
    app = blockviz(venv, "app", "--help", cwd=tmp_path)
    assert app.returncode == 0 and "streamlit" in app.stdout


def test_a_lesson_by_id_from_another_folder(venv, tmp_path):
    out = blockviz(venv, "json", "six-blocks", "--no-frames", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    steps = json.loads(out.stdout)["steps"]
    after_b = next(s for s in steps if s["event"] == {"finish": "B"})
    assert after_b["free_queue"] == [4, 3, 5, 6, 2, 1]


def test_validate_locates_an_error(venv, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\ntitle: {en: x, zh: x}\nconfig: {num_blocks: 0}\nsteps: []\n")
    out = blockviz(venv, "validate", str(bad), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith(f"{bad}:3:22: config.num_blocks") and "Traceback" not in out.stderr


def test_the_installed_copy_finds_every_lesson(venv, tmp_path):
    code = ("import json; from blockviz.scenario.lessons import lesson_files, lessons_dir; "
            "print(json.dumps([str(lessons_dir()), sorted(lesson_files())]))")
    out = python(venv, code, tmp_path)
    where, ids = json.loads(out.stdout)
    assert Path(where).is_relative_to(venv)
    assert ids == sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))


def test_export_html_from_the_installed_copy(venv, tmp_path):
    out = blockviz(venv, "export", "six-blocks", "--step", "4", "-o", "six.html", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "six.html").read_text(encoding="utf-8")
    assert "function board(component)" in page and "container-type: inline-size" in page   # js, css


def test_trace_capacity_from_the_installed_copy(venv, tmp_path):
    gen = blockviz(venv, "trace", "generate", "shared_prefix", "--requests", "40", "-o", "t.jsonl",
                   cwd=tmp_path)
    assert gen.returncode == 0, gen.stderr
    out = blockviz(venv, "trace", "capacity", "t.jsonl", "--pool-blocks", "16,64", "--json",
                   "--workers", "1", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (report,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert report["requests"] == 40 and [p["pool_blocks"] for p in report["points"]] == [16, 64]
    assert report["points"][1]["hits"] >= report["points"][0]["hits"] > 0


def test_a_missing_asset_is_reported_as_one(venv, tmp_path):
    """An install that lost board.js says so (and how to mend it), instead of blaming the output."""
    broken = tmp_path / "broken"
    shutil.copytree(Path(python(venv, "import blockviz; print(blockviz.__file__)", tmp_path)
                         .stdout.strip()).parent, broken / "blockviz")
    (broken / "blockviz" / "render" / "board.js").unlink()
    e = env() | {"PYTHONPATH": str(broken)}
    out = subprocess.run([str(venv / "bin" / "python"), "-m", "blockviz", "export", "six-blocks",
                          "-o", str(tmp_path / "x.html")], cwd=tmp_path, env=e,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert "installed without its file board.js" in out.stderr and "reinstall" in out.stderr
    assert "cannot write" not in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "x.html").exists()
    unwritable = blockviz(venv, "export", "six-blocks", "-o", str(tmp_path / "no" / "x.html"), cwd=tmp_path)
    assert unwritable.returncode == 2
    assert unwritable.stderr.startswith(f"{tmp_path / 'no' / 'x.html'}: cannot write the file")


# -- the installed copy in a browser ----------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def installed_server(venv, tmp_path_factory):
    """`blockviz app` of the installed copy, started in a folder of its own; yields (url, log)."""
    here = tmp_path_factory.mktemp("serve")
    port = _free_port()
    log = here / "server.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([str(venv / "bin" / "blockviz"), "app", "--server.address", "127.0.0.1",
                                 "--server.port", str(port)], cwd=here, env=env(), stdout=f,
                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the installed app did not answer in 90 s"
                time.sleep(0.3)
        yield url, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _no_error_box(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0
    alerts = " ".join(page.locator('[data-testid="stAlert"]').all_inner_texts())
    assert "went wrong" not in alerts and "出错" not in alerts, alerts


@pytest.mark.slow
@pytest.mark.browser
def test_the_installed_app_serves_the_player_and_the_author_preview(installed_server, browser):
    url, log = installed_server
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        page.goto(f"{url}/?scenario=six-blocks&lang=en&step=4")
        page.wait_for_selector('[data-bv="board"][data-bv-ready="1"]', timeout=120_000)
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]',
                               timeout=60_000)
        assert page.locator('[data-bv="board"] .bv-stepno').inner_text() == "step 4 of 8"
        _no_error_box(page)
        page.goto(f"{url}/author")                      # the starter scenario runs in a worker
        page.get_by_text("Valid: ").first.wait_for(timeout=120_000)
        page.wait_for_selector('[data-bv="board"][data-bv-ready="1"]', timeout=120_000)   # the preview
        _no_error_box(page)
    finally:
        page.close()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


@pytest.mark.slow
@pytest.mark.browser
def test_export_png_from_the_installed_copy(venv, tmp_path, browser):
    out = blockviz(venv, "export", "six-blocks", "--step", "4", "--format", "png", "-o", "six.png",
                   cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    png = (tmp_path / "six.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1920, 1080)
    assert len(png) > 50_000            # a drawn board, not a blank page
