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
from blockviz.render.markers import timeline_kinds
from blockviz.render.metrics import Series, metrics_series
from blockviz.scenario import ScenarioError, load
from blockviz.scenario.lessons import lessons_dir
from blockviz.scenario.schema import Scenario, Text
from blockviz.sim.budget import PREVIEW_BUDGET, RUN_BUDGET  # noqa: F401 - read as data.PREVIEW_BUDGET
from blockviz.sim.timeline import Timeline
from blockviz.teach.labels import HashLabels


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
    # (i18n key, fields): why this run has no KV payloads although its config has a model (a
    # preview whose payloads did not fit its budget: ``preview_run``)
    payloads_off: tuple[str, dict] | None = None
    exceeded: str | None = None              # the dimension of its budget it stopped on (sim.budget)

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
        return self.timeline.step_num_ops(index)

    @property
    def free_order(self) -> str:
        return self.scenario.config.free_order

    @property
    def has_payload(self) -> bool:
        return self.scenario.config.model is not None and self.payloads_off is None


@st.cache_resource(show_spinner=False, max_entries=8)
def _index(directory: str) -> BuiltinIndex:
    paths: dict[str, Path] = {}
    titles: dict[str, Text] = {}
    broken: list[tuple[str, str]] = []
    for p in sorted(Path(directory).glob("*.yaml")):
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


def builtin_index() -> BuiltinIndex:
    return _index(str(lessons_dir()))


def make_run(key: str, loaded, *, max_steps: int | None = None, budget=RUN_BUDGET,
             on_step=None, payloads: bool = True) -> PlayerRun:
    """Run a loaded scenario to the end (or its first disallowed event, or the step that passes
    ``budget``: ``sim.budget``) and keep the timeline. With ``max_steps``, the run ends after that
    many steps (``stopped`` says where). ``on_step(k)`` is called after each step k. ``payloads``
    off: no KV tensors, even with a model."""
    from blockviz.kv import tolerance
    from blockviz.sim.runner import Stop, run
    stopped: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        if on_step is not None:
            on_step(done)
        if max_steps is not None and max_steps <= done < total:
            stopped.append((done, total))
            raise Stop
    engine, timeline = run(loaded, progress=progress, budget=budget, payloads=payloads)
    device = timeline.payload_device or "cpu"
    kinds = timeline_kinds(timeline)
    series = metrics_series([timeline.step_stats(i) for i in range(len(timeline))],
                            has_external=loaded.scenario.config.connector is not None)
    return PlayerRun(key, loaded.scenario, timeline, HashLabels.for_timeline(timeline), kinds, series,
                     tolerance(device), stopped[0] if stopped else None,
                     exceeded=engine.meter.exceeded)


@st.cache_resource(show_spinner="Running the scenario…", max_entries=64)
def _run(directory: str, sid: str) -> PlayerRun:
    path = _index(directory).paths[sid]   # KeyError for anything not discovered: callers check
    return make_run(f"builtin:{directory}:{sid}", load(path))


def builtin_run(sid: str) -> PlayerRun:
    return _run(str(lessons_dir()), sid)


# -- the session's own runs (an authored scenario, a fork): kept in st.session_state only -----
# They run in a worker process (ui.worker) within PREVIEW_BUDGET (sim.budget), and keep at most
# PREVIEW_MAX_STEPS steps: what comes back to the server (pickled) stays a few MB, whatever the
# text asks for (an 80,000-step link is 2.6 KB).
PREVIEW_MAX_STEPS = 5_000


def preview_run(key: str, loaded, *, budget=PREVIEW_BUDGET, max_steps: int | None = PREVIEW_MAX_STEPS,
                on_step=None) -> PlayerRun:
    """A session's scenario, run as the app's preview can afford (in a worker): with its KV
    payloads when they fit ``budget``, else without them, saying why (``payloads_off``).

    * Its store, weights and external tier (:func:`sim.budget.fixed_bytes`, known before it
      starts) over the budget's bytes: it runs without payloads at once.
    * Else it runs with them on half the time left; should it pass the budget's bytes (the
      player's payload copies, a checkpoint) or that time (the tiny model's forward passes are
      most of a big run's time), it runs again without payloads on the time that is left.
    A run without payloads manages its blocks the same way; what a request generates is drawn
    from the seeded stream that ``model: null`` uses instead of the tiny model."""
    from dataclasses import replace

    from blockviz.sim import budget as B
    cfg = loaded.scenario.config
    if cfg.model is None:
        return make_run(key, loaded, budget=budget, max_steps=max_steps, on_step=on_step)
    need, limit = B.fixed_bytes(cfg), budget.tensor_bytes
    if limit is not None and need > limit:
        run = make_run(key, loaded, budget=budget, max_steps=max_steps, on_step=on_step, payloads=False)
        return replace(run, payloads_off=("preview_no_payloads_size", {"need": B.mib(need),
                                                                       "limit": B.mib(limit)}))
    start = B.now()                 # (in a worker: its start, the reading of the text included)

    def left() -> float | None:
        return None if budget.seconds is None else max(0.0, budget.seconds - (B.now() - start))
    first = left()
    run = make_run(key, loaded, budget=replace(budget, seconds=None if first is None else first / 2),
                   max_steps=max_steps, on_step=on_step)
    why = run.exceeded
    if why not in ("bytes", "time"):
        return run
    k = run.timeline.error_step
    del run                          # its tensors go before the second run makes none
    again = make_run(key, loaded, budget=replace(budget, seconds=left()), max_steps=max_steps,
                     on_step=on_step, payloads=False)
    fields = {"k": k, "limit": B.mib(limit or 0), "s": f"{(first or 0) / 2:.0f}"}
    return replace(again, payloads_off=(f"preview_no_payloads_{why}", fields))
