"""The wheel lists its packages by name (pyproject.toml): every package folder under blockviz/ is
on the list, so a new subpackage cannot be left out of what users install."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_is_in_the_wheel():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "blockviz").rglob("__init__.py")}
    assert found - listed == set(), "packages missing from pyproject.toml's [tool.setuptools] packages"
