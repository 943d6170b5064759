"""The built-in scenarios, parsed and run once per server process and shared by every session
(``st.cache_resource``: a Timeline is immutable after recording; the Engine is dropped).

Scenario ids come only from the built-in lessons' files (``scenario.lessons``) as found at
start-up: a URL names an id from that set or nothing; no path is ever built from user input.
(The directory itself is the operator's: ``BLOCKVIZ_SCENARIOS`` may point the server, or a test,
at another folder of scenario files.)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from blockviz.i18n.errors import ErrorMessage
from blockviz.render.markers import step_kinds
from blockviz.render.metrics import Series, metrics_series
from blockviz.scenario import ScenarioError, load
from blockviz.scenario.lessons import lessons_dir
from blockviz.scenario.schema import Scenario, Text
from blockviz.sim.budget import PREVIEW_BUDGET, RUN_BUDGET  # noqa: F401 - read as data.PREVIEW_BUDGET
from blockviz.sim.timeline import Timeline
from blockviz.teach.labels import HashLabels


def scenario_dir() -> str:
    return str(lessons_dir())


@dataclass(frozen=True)
class BuiltinIndex:
    paths: dict[str, Path]        # scenario id -> its file (ids in file-name order)
    titles: dict[str, Text]
    broken: tuple[tuple[str, Exception], ...]   # (file name, error) for files that do not load

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
    stopped: tuple[int, int] | None = None   # (steps run, steps in all) when a step limit ended it
    steps_in_all: int | None = None          # the scenario's steps, when ``scenario`` keeps only those run

    @property
    def total_steps(self) -> int:
        """The scenario's steps (a run cut short may keep only the ones it ran)."""
        return self.steps_in_all if self.steps_in_all is not None else len(self.scenario.steps)

    @property
    def shared(self) -> bool:
        """A built-in run, the same for every session (its panels may be cached process-wide);
        any other run belongs to one session and is kept in its st.session_state."""
        return self.key.startswith("builtin:")

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


def scan_builtins(directory: Path | None = None) -> BuiltinIndex:
    directory = lessons_dir() if directory is None else directory
    paths: dict[str, Path] = {}
    titles: dict[str, Text] = {}
    broken: list[tuple[str, str]] = []
    for p in sorted(directory.glob("*.yaml")):
        try:
            loaded = load(p)
        except ScenarioError as e:
            broken.append((p.name, e))
            continue
        sid = loaded.scenario.id
        if sid in paths:
            broken.append((p.name, ErrorMessage(f"duplicate scenario id {sid!r}")))
            continue
        paths[sid] = p
        titles[sid] = loaded.scenario.title
    return BuiltinIndex(paths, titles, tuple(broken))


@st.cache_resource(show_spinner=False, max_entries=8)
def _index(directory: str) -> BuiltinIndex:
    return scan_builtins(Path(directory))


def builtin_index() -> BuiltinIndex:
    return _index(scenario_dir())


def make_run(key: str, loaded, *, max_steps: int | None = None, budget=RUN_BUDGET,
             on_step=None) -> PlayerRun:
    """Run a loaded scenario to the end (or its first disallowed event, or the step that passes
    ``budget``: ``sim.budget``) and keep the timeline. With ``max_steps``, the run ends after that
    many steps (``stopped`` says where). ``on_step(k)`` is called after each step k."""
    from blockviz.kv import tolerance
    from blockviz.sim.runner import Stop, run
    stopped: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        if on_step is not None:
            on_step(done)
        if max_steps is not None and max_steps <= done < total:
            stopped.append((done, total))
            raise Stop
    engine, timeline = run(loaded, progress=progress, budget=budget)
    device = timeline.payload_device or "cpu"
    kinds = tuple(step_kinds(timeline.step_ops(i)) for i in range(len(timeline)))
    series = metrics_series([timeline.step_stats(i) for i in range(len(timeline))],
                            has_external=loaded.scenario.config.connector is not None)
    return PlayerRun(key, loaded.scenario, timeline, HashLabels.for_timeline(timeline), kinds, series,
                     tolerance(device), stopped[0] if stopped else None)


@st.cache_resource(show_spinner="Running the scenario…", max_entries=64)
def _run(directory: str, sid: str) -> PlayerRun:
    path = _index(directory).paths[sid]   # KeyError for anything not discovered: callers check
    return make_run(f"builtin:{directory}:{sid}", load(path))


def builtin_run(sid: str) -> PlayerRun:
    return _run(scenario_dir(), sid)


# -- the session's own runs (an authored scenario, a fork): kept in st.session_state only -----
# They run in a worker process (ui.worker) within PREVIEW_BUDGET (sim.budget), and keep at most
# PREVIEW_MAX_STEPS steps: what comes back to the server (pickled) stays a few MB, whatever the
# text asks for (an 80,000-step link is 2.6 KB).
PREVIEW_MAX_KV_BYTES = 256 << 20
PREVIEW_MAX_STEPS = 5_000


def preview_refusal(loaded) -> tuple[str, dict] | None:
    """(i18n key, fields) when a session's scenario is too big to run in the app."""
    size = loaded.scenario.config.kv_store_bytes
    if size > PREVIEW_MAX_KV_BYTES:
        return "preview_too_big", {"limit": PREVIEW_MAX_KV_BYTES >> 20, "size": size / 2**20}
    return None
