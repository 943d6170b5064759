"""Workload generator: realistic scenario shapes at any size, and capacity planning over them.

A workload is a recipe (:class:`Workload`) that :func:`generate_dict` turns into a plain scenario
dict (YAML-able, in the documented scenario format) and :func:`generate` into a validated
:class:`~blockviz.scenario.Scenario`. Kinds:

  * ``shared_prefix`` — a few long system prompts; each request = one of them + its own question;
  * ``multi_turn``    — conversations: turn 0 = a system prompt + user tokens; turn t = the whole
                        previous turn (``same_as``: prompt and reply) + new user tokens;
  * ``few_shot``      — a shared instruction, then one of several example sets, then a short question
                        (a two-level prefix tree);
  * ``random``        — random lengths, partial prefix sharing with earlier requests, decodes of
                        random subsets, the odd ``reset_prefix_cache``.

Always valid: no request has ``max_tokens``, so only the generator finishes requests, and it
finishes each live request at most once; ``same_as`` reads only tokens the source is known to
have (its prompt, or the whole of a finished turn); nothing else needs the state. The shared
parts are the *first* tokens of an anchor request (``{same_as: anchor, first: N}``), so the
anchors' random tokens are the shared prefixes. Deterministic: one seed, one scenario.

:func:`capacity_plan` reruns one workload at several pool sizes, for both free orders, with
payloads and op recording off (tasks of a capacity sweep), and reports prefix-cache hit rates as
``blockviz.sim.capacity.Point``. Pure: no torch, plotting or UI.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from blockviz.core import FREE_ORDERS
from blockviz.i18n import texts
from blockviz.scenario.load import LoadedScenario, ScenarioError, check_references
from blockviz.scenario.schema import MAX_NUM_BLOCKS, MAX_STEPS, Scenario, request_id
from blockviz.sim.capacity import Point, running_total, scenario_stats
from blockviz.sim.sweep import LocalExecutor, Task

KINDS = ("shared_prefix", "multi_turn", "few_shot", "random")


@dataclass(frozen=True)
class Workload:
    """What to generate. Sizes are in tokens unless named ``*_blocks``."""
    kind: str = "shared_prefix"
    num_blocks: int = 64
    block_size: int = 16
    num_events: int = 200
    seed: int = 0
    free_order: str = "split"
    model: dict | None = None     # the tiny model's config (payloads on); None = payloads off
    hash_algo: str = "sha256"
    max_live: int = 4             # requests arrived and not finished, at most
    prefix_blocks: int = 4        # a system prompt / an example set, in blocks
    new_tokens: int = 12          # mean fresh tokens per request (question, user turn)
    num_prefixes: int = 2         # distinct system prompts / example sets
    max_turns: int = 4            # multi_turn: turns per conversation

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown workload kind {self.kind!r} (one of {', '.join(KINDS)})")
        if self.free_order not in FREE_ORDERS:
            raise ValueError(f"free_order must be one of {FREE_ORDERS}, not {self.free_order!r}")
        if not 1 <= self.num_events <= MAX_STEPS:
            raise ValueError(f"num_events must be in 1..{MAX_STEPS:,}")
        for name in ("num_blocks", "block_size", "max_live", "prefix_blocks", "new_tokens",
                     "num_prefixes", "max_turns"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


class _Generator:
    """Emits steps event by event, tracking only what validity needs: which requests are live
    (arrived, not finished) and how many prompt tokens each has."""

    def __init__(self, w: Workload) -> None:
        self.w = w
        self.rng = random.Random(f"blockviz-workload/{w.kind}/{w.seed}")
        self.steps: list[Any] = []
        self.live: list[str] = []              # arrival order
        self.prompt_len: dict[str, int] = {}  # every request so far, in arrival order
        self.arrived: list[str] = []
        self.anchors: dict[str, str] = {}      # shared part name -> anchor request id
        self.count = 0
        # multi_turn: conversation id -> (last turn id, turns so far); idle = last turn finished
        self.talking: dict[int, tuple[str, int]] = {}
        self.conversation_of: dict[str, int] = {}  # live turn -> its conversation
        self.idle: list[int] = []
        self.num_conversations = 0

    # -- building blocks ------------------------------------------------------------------
    def fresh(self) -> int:
        """A fresh-token count around ``new_tokens`` (at least 1)."""
        n = self.w.new_tokens
        return max(1, self.rng.randint(n // 2, n + n // 2))

    def new_id(self) -> str:
        self.count += 1
        return request_id(self.count)

    def arrive(self, rid: str, prompt: list[dict]) -> str:
        self.steps.append({"arrive": {"id": rid, "prompt": prompt}})
        self.live.append(rid)
        self.arrived.append(rid)
        self.prompt_len[rid] = sum(_part_len(p, self.prompt_len) for p in prompt)
        return rid

    def shared(self, rid: str, name: str, tokens: int,
               parent: tuple[str, int] | None = None) -> list[dict]:
        """Prompt parts for request ``rid`` that start with the shared part ``name`` (``tokens``
        long, itself starting with the shared part ``parent`` if given). The first request to
        use a shared part is its anchor: that request's own random tokens become the part."""
        anchor = self.anchors.get(name)
        if anchor is not None:
            return [{"same_as": anchor, "first": tokens}]
        self.anchors[name] = rid
        head = self.shared(rid, *parent) if parent else []
        return head + [{"random": tokens - (parent[1] if parent else 0)}]

    # -- the event mix --------------------------------------------------------------------
    def run(self) -> list[Any]:
        w = self.w
        arrive = getattr(self, f"arrive_{w.kind}")
        while len(self.steps) < w.num_events:
            can_arrive = len(self.live) < w.max_live
            roll = self.rng.random()
            if self.live and (not can_arrive or roll < 0.3):
                self.finish_one()
            elif not self.live or roll < 0.65:
                arrive()
            else:
                self.advance()
        return self.steps

    def advance(self) -> None:
        if self.w.kind == "random" and self.live and self.rng.random() < 0.3:
            ids = self.rng.sample(self.live, self.rng.randint(1, len(self.live)))
            self.steps.append({"decode": {"requests": sorted(ids, key=self.live.index),
                                          "steps": self.rng.randint(1, 4)}})
        elif self.w.kind == "random" and self.rng.random() < 0.02:
            self.steps.append("reset_prefix_cache")
        else:
            self.steps.append({"step": self.rng.randint(1, 3)})

    def finish_one(self) -> None:
        if self.w.kind == "random":
            rid = self.rng.choice(self.live)
        else:
            rid = self.live[0]
        self.live.remove(rid)
        self.steps.append({"finish": rid})
        conv = self.conversation_of.pop(rid, None)
        if conv is not None and conv in self.talking:
            self.idle.append(conv)   # its user may come back with another turn

    def arrive_shared_prefix(self) -> str:
        w = self.w
        k = self.rng.randrange(w.num_prefixes)
        rid = self.new_id()
        return self.arrive(rid, self.shared(rid, f"sys{k}", w.prefix_blocks * w.block_size)
                           + [{"random": self.fresh()}])

    def arrive_few_shot(self) -> None:
        w = self.w
        instruction = max(1, w.block_size * max(1, w.prefix_blocks // 4))
        examples = instruction + w.prefix_blocks * w.block_size
        k = self.rng.randrange(w.num_prefixes)
        question = max(1, self.fresh() // 2)
        rid = self.new_id()
        self.arrive(rid, self.shared(rid, f"examples{k}", examples, ("instruction", instruction))
                    + [{"random": question}])

    def arrive_multi_turn(self) -> None:
        w = self.w
        if self.idle and (self.rng.random() < 0.7 or self.num_conversations >= 4 * w.max_live):
            conv = self.idle.pop(self.rng.randrange(len(self.idle)))
            last, turns = self.talking[conv]
            # The whole previous turn: its prompt and the reply it got before it finished.
            rid = self.arrive(self.new_id(), [{"same_as": last}, {"random": self.fresh()}])
            turns += 1
            if turns >= w.max_turns:
                del self.talking[conv]   # its last turn: it leaves when that one finishes
                return
        else:
            conv, turns = self.num_conversations, 1
            self.num_conversations += 1
            rid = self.arrive_shared_prefix()       # a new conversation's first turn
        self.talking[conv] = (rid, turns)
        self.conversation_of[rid] = conv

    def arrive_random(self) -> None:
        w = self.w
        parts: list[dict] = []
        if self.arrived and self.rng.random() < 0.6:
            source = self.rng.choice(self.arrived)
            blocks = self.prompt_len[source] // w.block_size
            if blocks:
                parts.append({"same_as": source,
                              "first": self.rng.randint(1, blocks) * w.block_size})
        size = self.rng.randint(1, max(1, (w.prefix_blocks * w.block_size) // 2 + w.new_tokens))
        self.arrive(self.new_id(), parts + [{"random": size}])


def _part_len(part: dict, prompt_len: dict[str, int]) -> int:
    """Tokens a part adds, as far as the generator knows: a whole ``same_as`` counts the source's
    prompt (it may have a reply too; nothing here depends on that)."""
    if "random" in part:
        return part["random"]
    if "first" in part:
        return part["first"]
    return prompt_len[part["same_as"]]


def generate_dict(workload: Workload | None = None, **fields: Any) -> dict:
    """The scenario as a plain dict (``yaml.safe_dump`` writes it as a scenario file)."""
    w = replace(workload, **fields) if workload is not None else Workload(**fields)
    steps = _Generator(w).run()
    return {
        "id": f"gen-{w.kind.replace('_', '-')}-{w.seed}",
        "title": texts("wl_title", kind=texts(f"wl_kind_{w.kind}"), seed=w.seed),
        "summary": texts("wl_summary", n=w.num_events, blocks=w.num_blocks, size=w.block_size,
                         live=w.max_live),
        "config": {"num_blocks": w.num_blocks, "block_size": w.block_size,
                   "hash_algo": w.hash_algo, "free_order": w.free_order, "seed": w.seed,
                   "model": None if w.model is None else dict(w.model)},
        "steps": steps,
    }


def generate(workload: Workload | None = None, **fields: Any) -> Scenario:
    """A validated Scenario; raises ValueError if it is beyond the format's limits."""
    scenario = Scenario.model_validate(generate_dict(workload, **fields))
    try:
        check_references(loaded(scenario))
    except ScenarioError as e:
        raise ValueError(f"the generated workload is beyond the scenario limits ({e.message}); "
                         f"use fewer events or shorter prompts") from None
    return scenario


def loaded(scenario: Scenario) -> LoadedScenario:
    """A generated scenario as the runner takes it (no file, so no line numbers)."""
    return LoadedScenario(scenario, "<generated>", {})


# -- capacity planning --------------------------------------------------------------------
def capacity_plan(scenario: Scenario, pool_sizes: Iterable[int],
                  free_orders: Sequence[str] = FREE_ORDERS, *,
                  progress: Callable[[int, int], None] | None = None, executor=None) -> list[Point]:
    """Hit rate against pool size, for each free order: one replay per (size, order), in that
    order, as tasks of a capacity sweep (``blockviz.sim.sweep``; ``executor``: this process by
    default). ``progress(done, total)`` counts scenario steps over all replays."""
    tasks = [Task("", scenario.config.block_size, size, order, scenario=scenario)
             for size in sorted(set(pool_sizes)) for order in free_orders]
    total = len(scenario.steps) * len(tasks)
    advance = running_total(progress, total)
    results = (executor or LocalExecutor(workers=1)).run(tasks, progress and advance)
    advance(total)
    return [Point.of(r, t.free_order) for t, r in zip(tasks, results)]


class _HighWater:
    """An op sink that keeps nothing but the highest block id ever handed out, and whether an
    allocation ever found the pool too small."""
    high = 0
    short = False

    def on_op(self, op) -> None:
        if op.kind == "popleft" and op.block_ids:
            self.high = max(self.high, max(op.block_ids))
        elif op.kind == "alloc_failed":
            self.short = True


def pool_demand(scenario: Scenario) -> tuple[int, int]:
    """(blocks the largest request needs, a pool size from which on nothing is ever evicted,
    whatever the free order).

    The second is measured once per free order on a pool with room to spare: the free queue
    starts in id order and blocks return only to its ends, so if the highest id ever handed out
    stays below the pool's size (and no allocation ever failed), a pool of exactly that many
    blocks takes the same blocks and so never reuses a cached one. (The append order needs more:
    it takes a fresh block while there is one.) The measuring pool doubles until there is room to
    spare, up to the format's limit."""
    largest, enough = 1, 1
    for order in FREE_ORDERS:
        size = max(1024, 2 * enough)
        while True:
            trial = scenario.model_copy(update={"config": scenario.config.model_copy(
                update={"num_blocks": size, "free_order": order, "model": None})})
            sink = _HighWater()
            stats, _ = scenario_stats(trial, sink=sink)
            if (sink.high < size and not sink.short) or size >= MAX_NUM_BLOCKS:
                break
            size = min(MAX_NUM_BLOCKS, 2 * size)
        largest = max(largest, stats["largest_request_blocks"])
        enough = max(enough, sink.high)
    return largest, enough


def default_pool_sizes(scenario: Scenario, count: int = 8) -> list[int]:
    """About ``count`` pool sizes, geometric, from the largest request's blocks to a pool that
    never evicts (see :func:`pool_demand`)."""
    smallest, enough = pool_demand(scenario)
    if enough <= smallest:
        return [enough]
    ratio = (enough / smallest) ** (1 / max(1, count - 1))
    return sorted({min(enough, int(round(smallest * ratio ** i))) for i in range(count)} | {enough})
