"""The step: one record for "a point in a run", the one thing renderers and the JSON contract read.

A :class:`Step` is the state after event ``index`` (``frame`` None), or after op ``frame`` inside
it (stepping into the event): the pool (ref counts, hashes, tokens, free queue, hash table), the
requests, and what the event did (its ops, KV events, engine steps, stats, the CPU tier). An op
frame is a Step too, with the pool and the requests as they were right after its op, so that every
panel of a frame shows one moment. What changed to get there (:class:`Changes`) is worked out
when first asked for, against the point before (the previous op's frame, or the previous event).

The engine's :meth:`~blockviz.sim.engine.Engine.capture` fills in the fields it was asked for; the
timeline serves whole steps (``Timeline.step``, ``Timeline.frames``). A step's parts are immutable
views built by name (the requests, stats, the engine steps an event ran, the CPU tier); nothing
here reaches into the engine.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from blockviz.scenario.schema import Step as Event
    from blockviz.scenario.schema import Text

_NOTHING = object()


def stored_directly(cls: type) -> type:
    """``cls`` (a frozen, keyword-only dataclass) with an ``__init__`` that stores its fields
    directly. The one ``dataclasses`` writes for a frozen class calls ``object.__setattr__`` once
    per field: about twice the cost of the rest, paid by every request view and step the engine
    captures (millions in a long run). Same signature, defaults and factories; frozen after."""
    fs = dataclasses.fields(cls)
    if (not cls.__dataclass_params__.frozen or hasattr(cls, "__post_init__")
            or not all(f.init and f.kw_only for f in fs)):
        raise TypeError(f"{cls.__name__}: stored_directly takes a frozen dataclass whose fields are "
                        f"all keyword-only and in __init__, with no __post_init__")
    env: dict[str, Any] = {"_NOTHING": _NOTHING}
    params, body = [], []
    for f in fs:
        if f.default is not dataclasses.MISSING:
            env[f"d_{f.name}"] = f.default
            params.append(f"{f.name}=d_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            env[f"f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_NOTHING")
            body.append(f"if {f.name} is _NOTHING: {f.name} = f_{f.name}()")
        else:
            params.append(f.name)
    if "__slots__" in cls.__dict__:       # each slot's own setter (what object.__setattr__ finds)
        env.update({f"s_{f.name}": cls.__dict__[f.name].__set__ for f in fs})
        body += [f"s_{f.name}(self, {f.name})" for f in fs]
    else:
        items = ", ".join(f"{f.name!r}: {f.name}" for f in fs)
        body.append(f"self.__dict__.update({{{items}}})")
    source = f"def __init__(self, *, {', '.join(params)}):\n" + "".join(f"    {line}\n"
                                                                        for line in body)
    exec(compile(source, f"<stored_directly {cls.__name__}>", "exec"), env)  # noqa: S102
    env["__init__"].__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = env["__init__"]
    return cls


# The fields of a request that its ops change (the rest are fixed when it arrives, or are the
# engine's own lists)
CHANGING = ("status", "num_tokens", "num_computed_tokens", "num_preemptions", "local_hit_blocks",
            "external_hit_blocks", "finish_reason", "num_output_placeholders")


@dataclass(frozen=True)
class BlockTables:
    """A hybrid model's request tables as of one step (config.kv_cache_groups): block ids per
    group (the null block as 0), how many blocks each group has cached, and vLLM's
    ``shared_prefix_boundary``. A copy, not the live lists: a sliding window puts the null block
    into a table in place."""
    tables: tuple[tuple[int, ...], ...]
    num_cached: tuple[int, ...]
    shared_prefix_boundary: int = 0


@stored_directly
@dataclass(frozen=True, kw_only=True, slots=True)
class RequestView:
    """A request as it was after a step (or an op inside one).

    The token list, the block table and the block hashes are the engine's own lists, shared, not
    copied: they only ever grow past what a view shows (a rewind gives the engine new lists), so
    this version's are their first ``num_tokens`` / ``num_blocks`` items and a timeline keeps
    thousands of versions at the cost of a few ints each. ``all_token_ids`` is also the request's
    identity for the timeline (one list per request object)."""
    request_id: str
    status: str
    num_prompt_tokens: int
    num_tokens: int
    num_computed_tokens: int
    num_preemptions: int = 0
    local_hit_blocks: int = 0
    external_hit_blocks: int = 0
    max_tokens: int | None = None
    lora: str | None = None
    cache_salt: str | None = None
    finish_reason: str | None = None
    num_output_placeholders: int = 0   # async scheduling: outputs scheduled, not yet applied
    priority: int = 0                  # the priority policy's order (lower first)
    skip_reading_prefix_cache: bool = False   # prompt logprobs: no lookup (it still caches)
    # why its lookups missed (sim.explain.Split): its first admission's, and (after a preemption)
    # its latest re-admission's
    prompt_split: Any = field(default=None, repr=False, compare=False)
    resumed_split: Any = field(default=None, repr=False, compare=False)
    all_token_ids: list = field(default_factory=list, repr=False, compare=False)
    # the block table: the engine's KVCacheBlock list (or, for a view an op frame derived, the
    # block ids); None once the request holds none. With kv_cache_groups: the step's BlockTables
    table: Sequence | None = field(default=None, repr=False, compare=False)
    num_blocks: int = 0
    block_hashes: list | None = field(default=None, repr=False, compare=False)

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(self.all_token_ids[:self.num_tokens])

    @property
    def block_ids(self) -> tuple[int, ...]:
        """The block table (group 0's, with kv_cache_groups)."""
        if self.table is None:
            return ()
        if isinstance(self.table, BlockTables):
            return self.table.tables[0]
        return tuple(b if type(b) is int else b.block_id for b in self.table[:self.num_blocks])

    @property
    def block_tables(self) -> BlockTables | None:
        """With kv_cache_groups: every group's table (None without)."""
        return self.table if isinstance(self.table, BlockTables) else None

    def to_dict(self) -> dict:
        return {"status": self.status, "block_table": list(self.block_ids),
                "num_prompt_tokens": self.num_prompt_tokens, "num_tokens": self.num_tokens,
                "num_computed_tokens": self.num_computed_tokens, "token_ids": list(self.token_ids),
                "num_preemptions": self.num_preemptions, "local_hit_blocks": self.local_hit_blocks,
                "external_hit_blocks": self.external_hit_blocks, "max_tokens": self.max_tokens,
                "lora": self.lora, "cache_salt": self.cache_salt,
                "finish_reason": self.finish_reason,
                "num_output_placeholders": self.num_output_placeholders,
                **self._hybrid_dict(), "priority": self.priority,
                "skip_reading_prefix_cache": self.skip_reading_prefix_cache,
                # the miss explainer's (sim.explain): the split of the first admission's lookup
                # (null until then) and, once preempted and resumed, of the latest re-lookup
                **{f"{name}_split{part}": None if sp is None else getattr(sp, fn)()
                   for name, sp in (("prompt", self.prompt_split), ("resumed", self.resumed_split))
                   for part, fn in (("", "to_dict"), ("_detail", "detail"))},
                "resumed_lookup": None if self.resumed_split is None else {
                    "event": self.resumed_split.event, "engine_step": self.resumed_split.engine_step,
                    "num_tokens": self.resumed_split.num_tokens}}

    def _hybrid_dict(self) -> dict:
        """The contract's additions with kv_cache_groups (scenario-format.md)."""
        bt = self.block_tables
        if bt is None:
            return {}
        return {"block_tables": [list(t) for t in bt.tables],
                "num_cached_blocks_per_group": list(bt.num_cached),
                "shared_prefix_boundary": bt.shared_prefix_boundary}


@stored_directly
@dataclass(frozen=True, kw_only=True)
class Stats:
    """Cumulative counters after a step. ``requests/queries/hits`` and ``preempted_*`` are vLLM's
    ``PrefixCacheStats`` split (vLLM's hit rate is ``hits / queries``); ``prefix_cache_*`` are the
    totals of both (the contract's first fields)."""
    num_free_blocks: int
    usage: float
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    external_queries: int = 0
    external_hits: int = 0
    preemptions: int = 0
    evictions: int = 0
    num_cached_blocks: int = 0
    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    reset: bool = False          # this step's reset_prefix_cache restarted vLLM's hit-rate window
    # the connector's PrefixCacheStats split (``external_queries/hits`` are its totals), and its
    # hits by source (vLLM CacheHitSource: "host" is the CPU tier)
    external_requests: int = 0
    external_preempted_requests: int = 0
    external_preempted_queries: int = 0
    external_preempted_hits: int = 0
    external_hits_host: int = 0

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        host = d.pop("external_hits_host")
        d["external_hits_by_source"] = {"host": host} if host else {}
        return d

    @property
    def hit_rate(self) -> float | None:
        """vLLM's prefix-cache hit rate: resumed re-lookups are not in it."""
        return self.hits / self.queries if self.queries else None


@dataclass(frozen=True, kw_only=True)
class ScheduledView:
    """One request in one engine step."""
    request_id: str
    num_tokens: int               # tokens scheduled (their K/V computed this step)
    decode: bool                  # a decode token (else a prefill chunk, or the whole prefill)
    admitted: bool = False        # taken from the waiting queue in this step
    resumed: bool = False         # ... after a preemption
    local_hit_tokens: int = 0
    external_hit_tokens: int = 0
    samples: bool = False         # the step samples a token for it (its prefill is complete)


@dataclass(frozen=True, kw_only=True)
class EngineStepView:
    """One vLLM engine step (schedule -> execute -> update) inside an event."""
    scheduled: tuple[ScheduledView, ...]
    preempted: tuple[str, ...]
    finished: tuple[str, ...]              # stopped at max_tokens / max_model_len by this update
    sampled: tuple[tuple[str, int], ...]   # tokens applied by this update (async: last step's)
    token_budget: int
    teaching_only: bool = False

    @property
    def num_scheduled_tokens(self) -> int:
        return sum(s.num_tokens for s in self.scheduled)

    def to_dict(self) -> dict:
        admitted = {s.request_id: {"local_hit_tokens": s.local_hit_tokens,
                                   "external_hit_tokens": s.external_hit_tokens,
                                   "resumed": s.resumed}
                    for s in self.scheduled if s.admitted}
        d = {"scheduled": {s.request_id: s.num_tokens for s in self.scheduled},
             "preempted": list(self.preempted), "finished": list(self.finished),
             "decode": [s.request_id for s in self.scheduled if s.decode],
             "admitted": admitted, "sampled": dict(self.sampled),
             "num_scheduled_tokens": self.num_scheduled_tokens,
             "token_budget": self.token_budget}
        if self.teaching_only:
            d["teaching_only"] = True
        return d


@dataclass(frozen=True, kw_only=True)
class TierView:
    """The connector's state after a step: every chunk the tier holds as (hash, state, chunk id,
    ref_cnt) — the evictable ones in eviction order (first evicted first), then those a load
    pins ("loading") or still being stored ("storing") —, its capacity, the jobs in flight
    (job id, "load"/"store", request) and the requests in WAITING_FOR_REMOTE_KVS."""
    contents: tuple[tuple[bytes, str, int, int], ...]
    capacity: int
    jobs_in_flight: tuple[tuple[int, str, str], ...]
    waiting_for_remote_kvs: tuple[str, ...]
    steps: tuple = ()   # set by the timeline: this event's engine steps (offload.TierStep)

    def to_dict(self) -> dict:
        return {"capacity": self.capacity,
                "contents": [{"hash": h.hex(), "state": state, "chunk": cid, "ref_cnt": ref}
                             for h, state, cid, ref in self.contents],
                "jobs_in_flight": [{"job": j, "kind": k, "request": r}
                                   for j, k, r in self.jobs_in_flight],
                "waiting_for_remote_kvs": list(self.waiting_for_remote_kvs),
                "engine_steps": [s.to_dict() for s in self.steps]}


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


@stored_directly
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
    hash_table: tuple[tuple[bytes, tuple[int, ...]], ...] = ()   # in BlockHashToBlockMap's order
    # the requests (in arrival order), and the scheduler's queues
    requests: Mapping[str, RequestView] = field(default_factory=dict)
    waiting: tuple[str, ...] = ()
    running: tuple[str, ...] = ()
    # what the event did (an op frame carries its event's)
    ops: tuple = ()                   # op records (blockviz.core.ops)
    op: Any = None                    # an op frame's op
    kv_events: tuple[dict, ...] = ()
    engine_steps: tuple[EngineStepView, ...] = ()   # schedule -> execute -> update, in order
    stats: Stats = Stats(num_free_blocks=0, usage=0.0)
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
