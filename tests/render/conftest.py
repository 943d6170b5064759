"""Real timelines for the render tests: the built-in six-block walkthrough and the small scenario
files next to this one (a 4,096-block pool, a duplicate hash, hostile markup, an early stop)."""
from __future__ import annotations

from pathlib import Path

import pytest

from blockviz.scenario import load
from blockviz.sim.runner import run
from blockviz.teach.labels import HashLabels

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _timeline(path: Path):
    _, timeline = run(load(path))
    return timeline


@pytest.fixture(scope="session")
def six():
    return _timeline(ROOT / "scenarios" / "six-blocks.yaml")


@pytest.fixture(scope="session")
def six_labels(six):
    return HashLabels.for_timeline(six)


@pytest.fixture(scope="session")
def big():
    return _timeline(HERE / "scenarios" / "big-pool.yaml")


@pytest.fixture(scope="session")
def dup():
    return _timeline(HERE / "scenarios" / "duplicate.yaml")


@pytest.fixture(scope="session")
def hostile():
    return _timeline(HERE / "scenarios" / "hostile.yaml")
