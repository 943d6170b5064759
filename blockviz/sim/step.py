"""The step: one record for "a point in a run", the one thing renderers and the JSON contract read.

A :class:`Step` is the state after event ``index`` (``frame`` None), or after op ``frame`` inside
it (stepping into the event): the pool (ref counts, hashes, tokens, free queue, hash table), the
requests, and what the event did (its ops, KV events, engine steps, stats, the CPU tier). An op
frame is a Step too, with the pool and the requests as they were right after its op, so that every
panel of a frame shows one moment. What changed to get there (:class:`Changes`) is worked out
when first asked for, against the point before (the previous op's frame, or the previous event).

The engine's :meth:`~blockviz.sim.engine.Engine.capture` fills in the fields it was asked for; the
timeline serves whole steps (``Timeline.step``, ``Timeline.frames``).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from blockviz.sim.views import EngineStepView, RequestView, Stats, TierView

if TYPE_CHECKING:
    from blockviz.scenario.schema import Step as Event
    from blockviz.scenario.schema import Text

HashTable = tuple[tuple[bytes, tuple[int, ...]], ...]


@dataclass(frozen=True)
class Changes:
    """What differs from the point before."""
    blocks: frozenset[int]            # ref_cnt, hash or tokens changed
    to_head: frozenset[int]           # freed to the free queue's head
    to_tail: frozenset[int]           # ... and to its tail
    hashes_added: frozenset[bytes]
    hashes_removed: tuple[bytes, ...]  # in the order the hash table had them
    fresh: frozenset[int]             # handed out by get_new_blocks
    requests: frozenset[str]          # status, block table or token counts changed
    prev_ref_cnt: tuple[int, ...]     # ref counts before (a card shows ``1→2``)


NO_STATS = Stats(num_free_blocks=0, usage=0.0)


@dataclass(frozen=True, kw_only=True)
class Step:
    index: int
    frame: int | None = None          # None: after the whole event; k: after its op k
    num_frames: int = 0               # the event's ops
    event: Event | None = None        # the scenario's event (None: the start)
    start_note: Text | None = None    # the scenario's note before any event (step 0 only)
    start_caption: Text | None = None  # ... and its caption (step 0 only)
    # the pool
    ref_cnt: tuple[int, ...] = ()
    block_hash: tuple[bytes | None, ...] = ()
    block_tokens: Sequence[tuple[int, ...]] = ()
    free_queue: tuple[int, ...] = ()
    hash_table: HashTable = ()         # (hash, block ids) in BlockHashToBlockMap's order
    # the requests (in arrival order), and the scheduler's queues
    requests: Mapping[str, RequestView] = field(default_factory=dict)
    waiting: tuple[str, ...] = ()
    running: tuple[str, ...] = ()
    # what the event did (an op frame carries its event's)
    ops: tuple = ()                   # op records (blockviz.core.ops)
    op: Any = None                    # an op frame's op
    kv_events: tuple[dict, ...] = ()
    engine_steps: tuple[EngineStepView, ...] = ()   # schedule -> execute -> update, in order
    stats: Stats = NO_STATS
    tier: TierView | None = None      # with a connector: the tier and what it did
    external: tuple[tuple[bytes, tuple[int, ...]], ...] | None = None   # the tier, LRU first
    none_hash: bytes = b""
    vllm_metrics: Any = None          # vLLM's metrics after it (sim.metrics.VllmMetrics)
    reset_ok: bool | None = None
    teaching_only: bool = False       # the event is a form vLLM's scheduler has no equivalent for
    # the point before this one (for ``changes``), and the mirror this state was read from (a
    # later step is replayed from a copy of it)
    before: Callable[[], Step] | None = field(default=None, repr=False, compare=False)
    mirror: Any = field(default=None, repr=False, compare=False)

    @property
    def num_gpu_blocks(self) -> int:
        return len(self.ref_cnt)

    @property
    def note(self) -> Text | None:
        return self.start_note if self.event is None else self.event.note

    @property
    def caption(self) -> Text | None:
        """The step's one sentence (the scenario's ``caption``; ``start_caption`` at step 0)."""
        return self.start_caption if self.event is None else self.event.caption

    @cached_property
    def changes(self) -> Changes:
        before = self if self.before is None else self.before()
        ops = self.ops if self.frame is None else (self.op,) if self.op is not None else ()
        moved = {kind: frozenset(b for op in ops if op.kind == kind for b in op.block_ids)
                 for kind in ("free_head", "free_tail", "popleft")}
        now, old = {h for h, _ in self.hash_table}, [h for h, _ in before.hash_table]
        a, b = before, self
        same = getattr(a.block_tokens, "same", None) or (lambda i, other: a.block_tokens[i] == other[i])

        def shown(v: RequestView | None):
            return v and (v.status, v.block_ids, v.num_tokens, v.num_computed_tokens,
                          v.block_tables)          # (a hybrid model: every group's table)
        return Changes(
            blocks=frozenset(i for i in range(len(b.ref_cnt))
                             if a.ref_cnt[i] != b.ref_cnt[i] or a.block_hash[i] != b.block_hash[i]
                             or not same(i, b.block_tokens)),
            to_head=moved["free_head"], to_tail=moved["free_tail"], fresh=moved["popleft"],
            hashes_added=frozenset(now.difference(old)),
            hashes_removed=tuple(h for h in old if h not in now),
            requests=frozenset(rid for rid in {*a.requests, *b.requests}
                               if shown(a.requests.get(rid)) != shown(b.requests.get(rid))),
            prev_ref_cnt=before.ref_cnt)
