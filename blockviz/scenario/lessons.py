"""The built-in lessons: the scenario files that ship with blockviz.

In the repository they are the top-level ``scenarios/`` folder; an installed copy carries the same
files as the package data of ``blockviz.lessons`` (pyproject.toml maps the folder onto that
package), found through ``importlib.resources``. ``BLOCKVIZ_SCENARIOS`` points a server (or a test)
at another folder. A lesson's id is its file name without ``.yaml`` (and equals the ``id`` inside).
"""
from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

REPO_LESSONS = Path(__file__).resolve().parents[2] / "scenarios"


def lessons_dir() -> Path:
    override = os.environ.get("BLOCKVIZ_SCENARIOS")
    if override:
        return Path(override)
    installed = importlib.resources.files("blockviz") / "lessons"
    if installed.is_dir():            # wheels install as plain folders
        return Path(str(installed))
    return REPO_LESSONS               # a checkout: the repository's folder


def lesson_files() -> dict[str, Path]:
    """Lesson id -> its file, in file-name order."""
    return {p.stem: p for p in sorted(lessons_dir().glob("*.yaml"))}


def resolve(arg: str) -> str:
    """A scenario argument as a path: an existing file wins; else a built-in lesson's id names
    its file; else the argument unchanged (loading it then says the file does not exist)."""
    if os.path.exists(arg):
        return arg
    path = lesson_files().get(arg)
    return str(path) if path is not None else arg
