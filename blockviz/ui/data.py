"""The built-in scenarios, parsed and run once per server process and shared by every session
(``st.cache_resource``: a Timeline is immutable after recording; the Engine is dropped).

Scenario ids come only from ``scenarios/*.yaml`` as found at start-up: a URL names an id from that
set or nothing; no path is ever built from user input. (The directory itself is the operator's:
``BLOCKVIZ_SCENARIOS`` may point the server, or a test, at another folder of scenario files.)
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from ..labels import HashLabels
from ..render.markers import step_kinds
from ..render.metrics import Series, metrics_series
from ..scenario import ScenarioError, load
from ..scenario.schema import Scenario, Text
from ..timeline import Timeline

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"


def scenario_dir() -> str:
    return os.environ.get("BLOCKVIZ_SCENARIOS") or str(SCENARIO_DIR)


@dataclass(frozen=True)
class BuiltinIndex:
    paths: dict[str, Path]        # scenario id -> its file (ids in file-name order)
    titles: dict[str, Text]
    broken: tuple[tuple[str, str], ...]   # (file name, error) for files that do not load

    @property
    def ids(self) -> list[str]:
        return list(self.paths)


@dataclass(frozen=True)
class PlayerRun:
    """One recorded run, everything the player draws from. Immutable; shared across sessions."""
    key: str                      # cache key for rendered panels, e.g. "builtin:six-blocks"
    scenario: Scenario
    timeline: Timeline
    labels: HashLabels
    kinds: tuple[frozenset[str], ...]
    series: Series
    tolerance: float

    @property
    def last(self) -> int:
        return len(self.timeline) - 1

    def n_ops(self, index: int) -> int:
        return len(self.timeline.step_ops(index))

    @property
    def free_order(self) -> str:
        return self.scenario.config.free_order

    @property
    def has_payload(self) -> bool:
        return self.scenario.config.model is not None

    @property
    def has_external(self) -> bool:
        return self.scenario.config.connector is not None


def scan_builtins(directory: Path = SCENARIO_DIR) -> BuiltinIndex:
    paths: dict[str, Path] = {}
    titles: dict[str, Text] = {}
    broken: list[tuple[str, str]] = []
    for p in sorted(directory.glob("*.yaml")):
        try:
            loaded = load(p)
        except ScenarioError as e:
            broken.append((p.name, str(e)))
            continue
        sid = loaded.scenario.id
        if sid in paths:
            broken.append((p.name, f"duplicate scenario id {sid!r}"))
            continue
        paths[sid] = p
        titles[sid] = loaded.scenario.title
    return BuiltinIndex(paths, titles, tuple(broken))


@st.cache_resource(show_spinner=False, max_entries=8)
def _index(directory: str) -> BuiltinIndex:
    return scan_builtins(Path(directory))


def builtin_index() -> BuiltinIndex:
    return _index(scenario_dir())


def make_run(key: str, loaded) -> PlayerRun:
    """Run a loaded scenario to the end (or its first disallowed event) and keep the timeline."""
    from ..kv import tolerance
    from ..runner import run
    engine, timeline = run(loaded)
    device = timeline.payload_device or "cpu"
    kinds = tuple(step_kinds(timeline.step_ops(i)) for i in range(len(timeline)))
    series = metrics_series([timeline.step_stats(i) for i in range(len(timeline))],
                            has_external=loaded.scenario.config.connector is not None)
    return PlayerRun(key, loaded.scenario, timeline, HashLabels.for_timeline(timeline), kinds, series,
                     tolerance(device))


@st.cache_resource(show_spinner="Running the scenario…", max_entries=64)
def _run(directory: str, sid: str) -> PlayerRun:
    path = _index(directory).paths[sid]   # KeyError for anything not discovered: callers check
    return make_run(f"builtin:{directory}:{sid}", load(path))


def builtin_run(sid: str) -> PlayerRun:
    return _run(scenario_dir(), sid)


@st.cache_resource(show_spinner=False, max_entries=4)
def frames_of(key: str, index: int, _run: PlayerRun) -> tuple:
    """The op-level frames of one event (costly for big pools, so few are kept)."""
    return tuple(_run.timeline.frames(index))
