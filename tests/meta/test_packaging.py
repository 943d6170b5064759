"""`pip install .` gives a working `blockviz` command whose installed copy finds every built-in
lesson, from any folder (nothing read from the checkout)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["pyproject.toml", "README.md", "requirements.txt", "blockviz", "scenarios"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package installed (no dependencies: the suite's venv has them) from a copy of the
    checkout, so the build leaves nothing in the repository."""
    src = tmp_path_factory.mktemp("src")
    for name in SHIPPED:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(
            ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                        if (ROOT / name).is_dir() else {}))
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--no-build-isolation", "--target", str(target), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return target


def blockviz(installed: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    env.pop("BLOCKVIZ_SCENARIOS", None)
    return subprocess.run([sys.executable, str(installed / "bin" / "blockviz"), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_command_and_its_help(installed, tmp_path):
    top = blockviz(installed, "--help", cwd=tmp_path)
    assert top.returncode == 0 and "six-blocks" in top.stdout
    for word in ("app", "play", "json", "validate", "verify", "export", "schema"):
        assert word in top.stdout
    app = blockviz(installed, "app", "--help", cwd=tmp_path)
    assert app.returncode == 0 and "streamlit" in app.stdout


def test_a_lesson_by_id_from_another_folder(installed, tmp_path):
    out = blockviz(installed, "json", "six-blocks", "--no-frames", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    steps = json.loads(out.stdout)["steps"]
    after_b = next(s for s in steps if s["event"] == {"finish": "B"})
    assert after_b["free_queue"] == [4, 3, 5, 6, 2, 1]


def test_validate_locates_an_error(installed, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\ntitle: {en: x, zh: x}\nconfig: {num_blocks: 0}\nsteps: []\n")
    out = blockviz(installed, "validate", str(bad), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith(f"{bad}:3:22: config.num_blocks") and "Traceback" not in out.stderr


def test_the_installed_copy_finds_every_lesson(installed, tmp_path):
    code = ("import json; from blockviz.scenario.lessons import lesson_files, lessons_dir; "
            "print(json.dumps([str(lessons_dir()), sorted(lesson_files())]))")
    env = {**os.environ, "PYTHONPATH": str(installed)}
    env.pop("BLOCKVIZ_SCENARIOS", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    where, ids = json.loads(out.stdout)
    assert Path(where).is_relative_to(installed)
    assert ids == sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))


def test_every_module_is_installed_and_nothing_else(installed):
    def modules(base: Path) -> set[str]:
        return {str(p.relative_to(base)) for p in base.rglob("*.py") if "__pycache__" not in p.parts}
    assert modules(installed / "blockviz") == modules(ROOT / "blockviz")
    assert not (installed / "bench").exists() and not (installed / "tests").exists()
