"""The resource budget of one run: what a scenario may make the engine compute and hold.

The loader's limits (``scenario.schema``) bound what a file may *ask for*; the budget bounds what
running it *costs*, counted while it runs, inside events (between the engine steps of a
``decode: {steps: 5000}``, between chunks of one attention pass) and not only between them:

* ``tokens``        — tokens the model computes in all: every engine step's scheduled tokens
                      (prefill, decode, recomputation after preemption) and the tokens a cache-hit
                      check recomputes;
* ``engine_steps``  — vLLM engine steps (schedule → execute → update) in all;
* ``tensor_bytes``  — tensors held at once: the paged KV store, the model's weights, one forward
                      pass's activations (estimated before it runs), the blocks checkpoints keep
                      (shared with the live store until a block changes), the external tier's
                      blocks, and the per-step payload copies the player shows;
* ``seconds``       — wall time since the run started.

A run over its budget stops at the step it was in, with a located message naming that step's
line (``FILE:LINE:COL: steps[i].kind: step k (kind): ...``, exit status 2 on the command line).
``RUN_BUDGET`` is the command line's and the library's; ``PREVIEW_BUDGET`` is the app's, for
every scenario a session runs (its Author preview, its "try it yourself" fork).

The engine tells its one :class:`Meter` what it is about to do, at its moments (``tick`` at each
event and arrival, ``engine_step`` before each engine step, and the methods under "the engine's
moments"), which the meter may refuse by raising BudgetExceeded. An unbounded run's (the engine's
default) is of ``Budget()``: it counts (the progress ``watch`` reads it) and refuses nothing.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from blockviz.scenario.schema import Config


@dataclass(frozen=True)
class Budget:
    tokens: int | None = None
    engine_steps: int | None = None
    tensor_bytes: int | None = None
    seconds: float | None = None


RUN_BUDGET = Budget(tokens=50_000_000, engine_steps=2_000_000, tensor_bytes=8 << 30, seconds=None)
PREVIEW_BUDGET = Budget(tokens=2_000_000, engine_steps=200_000, tensor_bytes=512 << 20,
                        seconds=20.0)


class BudgetExceeded(Exception):
    """The run used up a dimension of its budget (the run stops at this step): the meter's
    ``exceeded`` names it ("time", "engine_steps", "tokens" or "bytes")."""


def mib(n: int | float) -> str:
    return f"{n / 2**20:,.1f} MiB"


# What a checkpoint's copy of the engine state costs beyond the payloads, per GPU block (a block
# object, its place in the free queue, the snapshot's version and row) and per token held in
# the block and request token lists (tracemalloc, 65,536 blocks: ~180 bytes a block kept, ~330
# at the copy's peak; 8 a token).
CHECKPOINT_BYTES_PER_BLOCK = 300
CHECKPOINT_BYTES_PER_TOKEN = 16


def now() -> float:
    """The clock a run's wall-time budget reads (a seam: the app's worker process sets it to count
    from its own start)."""
    return time.monotonic()


def store_bytes(config: Config) -> int:
    """The tensors a run with payloads holds from its start: the paged KV store and the tiny
    model's weights (0 without a model)."""
    m = config.model
    if m is None:
        return 0
    from blockviz.kv.model import weight_bytes
    return config.kv_store_bytes + weight_bytes(m.num_layers, m.num_kv_heads, m.head_dim)


def tier_bytes(config: Config) -> int:
    """The external tier's pool of a run with payloads (0 without a model or a connector)."""
    m, c = config.model, config.connector
    return 0 if m is None or c is None else c.num_blocks * m.bytes_per_block(config.block_size)


def fixed_bytes(config: Config) -> int:
    """Every tensor a run with payloads holds for its whole length, known before it starts (what
    :meth:`Meter.before_tensors` asks for): beyond it, a run holds only what its steps make
    (checkpoints, the player's payload copies)."""
    return store_bytes(config) + tier_bytes(config)


class Meter:
    """One run's use of its budget, at the engine's moments (one method each). ``held``
    callables report bytes held now beyond the fixed part (checkpointed blocks, the external
    tier); ``history`` counts the payload copies kept."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.start = now()
        self.tokens = 0
        self.engine_steps = 0
        self.fixed_bytes = 0
        self.history_bytes = 0
        self.held: list[Callable[[], int]] = []
        self.watch: Callable[[Meter], None] | None = None   # after each engine step (progress)
        self.exceeded: str | None = None     # the kind of the BudgetExceeded raised, if one was

    def _refuse(self, kind: str, message: str) -> BudgetExceeded:
        self.exceeded = kind
        return BudgetExceeded(message)

    # -- time -----------------------------------------------------------------------------
    def tick(self) -> None:
        s = self.budget.seconds
        if s is not None and now() - self.start > s:
            raise self._refuse("time", f"the run's time budget of {s:g} s ran out during this step")

    # -- work -----------------------------------------------------------------------------
    def engine_step(self, num_tokens: int) -> None:
        """Before an engine step that schedules ``num_tokens`` tokens."""
        self.tick()
        b = self.budget
        self.engine_steps += 1
        if b.engine_steps is not None and self.engine_steps > b.engine_steps:
            raise self._refuse("engine_steps", f"the run's budget of {b.engine_steps:,} engine steps is "
                                               f"used up")
        self.compute(num_tokens)
        if self.watch is not None:
            self.watch(self)

    def compute(self, num_tokens: int) -> None:
        """Before the model computes ``num_tokens`` more tokens."""
        b = self.budget
        if b.tokens is not None and self.tokens + num_tokens > b.tokens:
            raise self._refuse("tokens", f"the run's budget of {b.tokens:,} computed tokens is used up "
                                         f"({self.tokens:,} so far, this step asks for {num_tokens:,} "
                                         f"more)")
        self.tokens += num_tokens

    # -- bytes ----------------------------------------------------------------------------
    def need(self, nbytes: int, what: str) -> None:
        """Before ``what`` allocates ``nbytes`` more: refuse if the total would pass the budget."""
        limit = self.budget.tensor_bytes
        if limit is None:
            return
        used = self.fixed_bytes + self.history_bytes + sum(f() for f in self.held)
        if used + nbytes > limit:
            raise self._refuse("bytes", f"{what} needs {mib(nbytes)} of tensors; with {mib(used)} "
                                        f"already held that is more than the run's budget of "
                                        f"{mib(limit)}")

    def fix(self, nbytes: int, what: str) -> None:
        """Tensors held for the whole run (the store, the weights)."""
        self.need(nbytes, what)
        self.fixed_bytes += nbytes

    # -- the engine's moments ---------------------------------------------------------------
    def before_tensors(self, config: Config, payloads: bool) -> None:
        """Before the engine allocates its tensors, held for the whole run: the paged store and
        the model's weights, then the CPU tier's pool (all only with payloads)."""
        if not payloads or config.model is None:
            return
        self.fix(store_bytes(config), "the model's weights and the KV store")
        if config.connector is not None:
            self.fix(tier_bytes(config), "the external tier")

    def attach(self, engine) -> None:
        """The engine's state exists: every forward pass is metered (when the budget bounds
        anything), and what its checkpoints and the store's checkpointed copies hold counts as
        held."""
        if self.budget == Budget():    # unbounded: nothing is ever weighed against it
            return
        if engine.kv is not None:
            engine.kv.set_guard(self)
            self.held.append(engine.kv.store.held_bytes)
        self.held.append(lambda: sum(c.state_bytes for c in engine.checkpoints.values()))

    def checkpoint(self, state) -> tuple[int, Callable[[int], None]]:
        """Before a checkpoint copies the engine's ``state`` (sim.engine.EngineState): the bytes
        the copy holds beyond the payloads (its blocks, the tokens of its block and request token
        lists, the CPU tier's pool), and the guard its payload snapshot calls with the bytes of
        the block copies it is about to make."""
        tokens = (sum(map(len, state.block_tokens))
                  + sum(len(r.all_token_ids) for r in state.scheduler.requests.values()))
        state_bytes = (len(state.block_tokens) * CHECKPOINT_BYTES_PER_BLOCK
                       + tokens * CHECKPOINT_BYTES_PER_TOKEN)
        if state.connector is not None and state.connector.worker.pool is not None:
            state_bytes += state.connector.worker.pool.nbytes
        self.need(state_bytes, "this checkpoint")
        return state_bytes, lambda n: self.need(n + state_bytes, "this checkpoint")

    def payload_copies(self, num_blocks: int, store) -> None:
        """The player keeps a float32 copy of ``num_blocks`` blocks' K/V until the run ends."""
        nbytes = num_blocks * (store.bytes_per_block // store.kv_caches[0].element_size() * 4)
        self.need(nbytes, "the payload copies for the player")
        self.history_bytes += nbytes
