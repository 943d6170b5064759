"""Run a loaded scenario to the end (or to the first event the state does not allow)."""
from __future__ import annotations

from collections.abc import Callable

from blockviz.core import check_invariants
from blockviz.scenario.load import LoadedScenario, ScenarioError
from blockviz.sim.budget import RUN_BUDGET, Budget, BudgetExceeded, Meter
from blockviz.sim.engine import Engine, EngineError
from blockviz.sim.timeline import Timeline


class Stop(Exception):
    """Raised by a ``progress`` callback to end a run early, keeping the steps recorded so far
    (the app's preview stops a scenario that runs too long this way)."""


class InvariantCheck:
    """An op sink that checks the engine's pool invariants after every op."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def on_op(self, op) -> None:
        check_invariants(self.engine.pool)


def make_engine(loaded: LoadedScenario, *, payloads: bool = True, device: str | None = None,
                check: bool = False, budget: Budget | None = None) -> Engine:
    try:
        engine = Engine(loaded.scenario, payloads=payloads, device=device,
                        meter=Meter(budget or Budget()))
    except BudgetExceeded as e:   # the store and the weights alone are over the budget
        raise loaded.error(("config", "model"), str(e)) from None
    except RuntimeError as e:  # e.g. device: cuda without a GPU; or torch could not allocate
        if "allocate" in str(e):
            raise loaded.error(("config", "model"), "there is not enough memory here for the KV "
                                                    "store and the model's weights") from None
        raise loaded.error(("config", "device"), str(e)) from None
    if check:
        engine.watch(InvariantCheck(engine))
    return engine


def run(loaded: LoadedScenario, *, payloads: bool = True, device: str | None = None,
        check: bool = False, upto: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        budget: Budget | None = RUN_BUDGET,
        watch: Callable[[Meter], None] | None = None) -> tuple[Engine, Timeline]:
    """Run steps 1..``upto`` (default: all) within ``budget`` (``sim.budget``; None: none).
    With ``check``, invariants are checked after every op (pool level) and after every event
    (block tables too). A disallowed event, or a step that passes the budget, stops the run:
    ``timeline.error`` is then a located ScenarioError naming the step's line. A budget the
    config alone passes (the store and the model's weights) is a ScenarioError at once.
    ``watch(meter)`` is called after every engine step, e.g. to show progress."""
    engine = make_engine(loaded, payloads=payloads, device=device, check=check, budget=budget)
    engine.meter.watch = watch
    timeline = Timeline(engine, check=check)
    steps = loaded.scenario.steps if upto is None else loaded.scenario.steps[:upto]
    for i, step in enumerate(steps):
        try:
            result = engine.apply(step)
        except (EngineError, BudgetExceeded) as e:
            timeline.error = loaded.step_error(i, str(e))
            timeline.error_step = i + 1
            break
        if check:
            check_invariants(engine.pool, engine.manager)
        timeline.record(engine, step, result)
        if progress is not None:
            try:
                progress(i + 1, len(steps))
            except Stop:
                break
    return engine, timeline


__all__ = ["Budget", "BudgetExceeded", "ScenarioError", "Stop", "make_engine", "run"]
