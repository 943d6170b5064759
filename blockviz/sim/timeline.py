"""The timeline: an immutable snapshot after every event, op-level frames inside each event,
random access, and the diff between two snapshots.

Memory grows with what changed, and compactly: for every step the timeline keeps its op records
packed into one integer array (sim.oplog), a packed version of each request the step touched, its
engine steps and stats in columns, and the KV events. A *keyframe* — a compact copy of the pool
state (sim.mirror) — is kept at the start, after every rewind or restart, and whenever the changes
since the last one add up to a few pools' worth. Any step is served by replaying the packed ops
since the nearest keyframe (or since a step served just before, when that is nearer) onto a mirror
of the pool; the ops say what happened, so the mirror decides nothing.

Requests are served lazily: each request identity keeps its own list of versions, and a step's
``requests`` mapping finds, for each request that had arrived by then, its latest version — no
request table is ever copied. The recording mirror is checked against the engine after every step
when ``check`` is on (the runner's ``check=True``, which every built-in lesson's test uses).
"""
from __future__ import annotations

import bisect
import dataclasses
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from blockviz.sim import oplog as L
from blockviz.sim.mirror import BlockTokens, Keyframe, Mirror
from blockviz.sim.views import EngineStepView, RequestView, ScheduledView, Stats

if TYPE_CHECKING:
    from blockviz.scenario.schema import Step, Text
    from blockviz.sim.engine import Engine, StepResult

# Events after which the engine state is not the previous state plus ops: keyframe them.
FULL_STATE_EVENTS = frozenset({"rewind", "restart"})
# Ops that name a request: the requests a step touched.
REQUEST_OPS = frozenset({"arrive", "admit", "schedule", "sample", "finish", "preempt", "lookup",
                         "cache", "write", "load", "alloc_failed", "save"})


@dataclass(frozen=True)
class Snapshot:
    index: int
    step: Step | None
    ref_cnt: tuple[int, ...]
    block_hash: tuple[bytes | None, ...]
    block_tokens: tuple[tuple[int, ...], ...]
    free_queue: tuple[int, ...]
    hash_table: tuple[tuple[bytes, tuple[int, ...]], ...]
    requests: Mapping[str, RequestView]
    waiting: tuple[str, ...]
    running: tuple[str, ...]
    kv_events: tuple[dict, ...]
    stats: Stats
    ops: tuple  # op records (blockviz.core.ops)
    reset_ok: bool | None = None
    none_hash: bytes = b""
    # the external tier, least recently used first: (hash, token ids)
    external: tuple[tuple[bytes, tuple[int, ...]], ...] | None = None
    # the vLLM engine steps the event ran (schedule -> execute -> update), in order
    engine_steps: tuple[EngineStepView, ...] = ()
    # with a connector: the tier's state and what it did in this event (sim.engine.TierView)
    tier: Any = None
    # the event is a form vLLM's scheduler has no equivalent for (a teaching device)
    teaching_only: bool = False
    start_note: Text | None = None
    # the mirror this snapshot was frozen from (a later step can be replayed from a copy of it)
    _mirror: Any = field(default=None, repr=False, compare=False)

    @property
    def num_gpu_blocks(self) -> int:
        return len(self.ref_cnt)

    @property
    def event(self) -> dict | None:
        return None if self.step is None else self.step.event_dict()

    @property
    def note(self) -> Text | None:
        return self.start_note if self.step is None else self.step.note

    @property
    def next_victim(self) -> int | None:
        """The block the next allocation takes: the head of the free queue."""
        return self.free_queue[0] if self.free_queue else None


# -- requests, by versions ---------------------------------------------------------------------
# A version of a request, packed: the fields that change, in this order.
_ROW = ("status", "num_tokens", "num_computed_tokens", "num_preemptions", "local_hit_blocks",
        "external_hit_blocks", "num_output_placeholders", "finish_reason", "blocks", "num_blocks")
_W = len(_ROW)


class _Names:
    """Small strings (statuses, finish reasons) as codes; -1 is None."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._code: dict[str, int] = {}

    def code(self, name: str | None) -> int:
        if name is None:
            return -1
        c = self._code.get(name)
        if c is None:
            c = self._code[name] = len(self.names)
            self.names.append(name)
        return c

    def name(self, c: int) -> str | None:
        return None if c < 0 else self.names[c]


@dataclass
class _Epoch:
    """The requests from a full-state step on, in arrival order (a rewind starts a new one)."""
    start: int
    order: list[int] = field(default_factory=list)          # identities
    arrivals: array = field(default_factory=lambda: array("i"))  # record index of each
    by_rid: dict[str, int] = field(default_factory=dict)     # request id -> position in order


class RequestsAt(Mapping):
    """The requests as they were after step ``index``, built from their versions on demand (a
    view is made when asked for and kept)."""

    __slots__ = ("_tl", "_index", "_epoch", "_count", "_views")

    def __init__(self, tl: Timeline, index: int) -> None:
        self._tl, self._index = tl, index
        e = tl._epoch_at(index)
        self._epoch, self._count = e, bisect.bisect_right(e.arrivals, index)
        self._views: dict[str, RequestView] = {}

    def __getitem__(self, rid: str) -> RequestView:
        v = self._views.get(rid)
        if v is not None:
            return v
        pos = self._epoch.by_rid.get(rid)
        if pos is None or pos >= self._count:
            raise KeyError(rid)
        v = self._views[rid] = self._tl._view(self._epoch.order[pos], self._index)
        return v

    def __contains__(self, rid: object) -> bool:
        pos = self._epoch.by_rid.get(rid)  # type: ignore[arg-type]
        return pos is not None and pos < self._count

    def __iter__(self) -> Iterator[str]:
        rid = self._tl._reg.rid
        for ident in self._epoch.order[:self._count]:
            yield rid(ident)

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"RequestsAt({dict(self)!r})"


# -- engine steps, packed ----------------------------------------------------------------------
_DECODE, _ADMITTED, _RESUMED, _SAMPLES = 1, 2, 4, 8


def _pack_engine_steps(steps: Sequence[EngineStepView], ident: Mapping[str, int]) -> list[int]:
    if not steps:
        return []
    out = [len(steps)]
    for es in steps:
        out += (int(es.teaching_only), len(es.scheduled))
        for s in es.scheduled:
            bits = (_DECODE * s.decode | _ADMITTED * s.admitted | _RESUMED * s.resumed
                    | _SAMPLES * s.samples)
            out += (ident[s.request_id], s.num_tokens, bits, s.local_hit_tokens,
                    s.external_hit_tokens)
        out.append(len(es.preempted))
        out += (ident[r] for r in es.preempted)
        out.append(len(es.finished))
        out += (ident[r] for r in es.finished)
        out.append(len(es.sampled))
        for r, tok in es.sampled:
            out += (ident[r], tok)
    return out


def _unpack_engine_steps(a, rid, budget: int) -> tuple[EngineStepView, ...]:
    if not a:
        return ()
    out, p = [], 1
    for _ in range(a[0]):
        teaching, n = a[p], a[p + 1]
        p += 2
        sched = []
        for _ in range(n):
            i, k, bits, local, ext = a[p:p + 5]
            sched.append(ScheduledView(rid(i), k, bool(bits & _DECODE), bool(bits & _ADMITTED),
                                       bool(bits & _RESUMED), local, ext, bool(bits & _SAMPLES)))
            p += 5
        lists = []
        for _ in range(2):
            k = a[p]
            lists.append(tuple(rid(i) for i in a[p + 1:p + 1 + k]))
            p += 1 + k
        k = a[p]
        sampled = tuple((rid(a[p + 1 + 2 * j]), a[p + 2 + 2 * j]) for j in range(k))
        p += 1 + 2 * k
        out.append(EngineStepView(tuple(sched), lists[0], lists[1], sampled, budget,
                                  bool(teaching)))
    return tuple(out)


_STATS = tuple(f.name for f in fields(Stats))


def _op_cost(op) -> int:
    return 1 + sum(len(x) for x in op if isinstance(x, tuple))


class Timeline:
    """Records an engine's run and serves any step's snapshot."""

    def __init__(self, engine: Engine, *, cache_size: int = 8, check: bool = False) -> None:
        self.num_gpu_blocks = engine.num_gpu_blocks
        self.block_size = engine.block_size
        self.vocab = engine.vocab
        self.check = check
        self.error: str | None = None
        self.error_step: int | None = None
        self.payload_device: str | None = engine.kv.device_name if engine.kv is not None else None
        self._budget = engine.scheduler_config.max_num_batched_tokens
        self._start_note = engine.scenario.start_note
        self._reg = L.Registry()
        self._log = L.OpLog(self._reg)
        self._evlog = L.EventLog(self._log, self.block_size)
        self._explicit: list[tuple] = [()]          # source -1: the empty tuple
        self._status, self._finish = _Names(), _Names()
        self._blists: list = []                      # the engine's block-table lists
        self._blist_index: dict[int, int] = {}
        # per record, in columns (flat arrays of ints, a run per record)
        self._steps: list = []
        self._ops = L.IntColumn()                    # packed op records (sim.oplog)
        self._num_ops = array("i")
        self._dirty = L.IntColumn()                  # identities each step touched
        self._events = L.IntColumn()                 # packed KV events (sim.oplog.EventLog)
        self._engine_steps = L.IntColumn()
        # (waiting, running) as identities, stored only at the records where they change
        self._queue_at = array("i")
        self._queues = L.IntColumn()
        self._none_hash: list[bytes] = []
        self._external: list = []
        self._tier: list = []
        self._reset_ok: dict[int, bool] = {}
        self._teaching: set[int] = set()
        self._stats = {name: array("d" if name == "usage" else "H") for name in _STATS}
        # requests: versions (a row of _W ints each, the record it is of), each identity's rows,
        # and the epochs they arrived in
        self._vdata = array("H")
        self._vrecord = array("H")
        self._vrows: list[array] = []
        self._epochs: list[_Epoch] = []
        self._epoch_starts: list[int] = []
        # keyframes
        self._keyframes: dict[int, Keyframe] = {}
        self._keyframe_ids: list[int] = []
        self._since_keyframe = 0
        # A keyframe costs about a pool: take one when the ops since the last add up to a few
        # pools' worth, so keyframes stay a fraction of what the steps hold.
        self._threshold = max(4096, 2 * self.num_gpu_blocks)
        self._live: Mirror | None = None
        # serving: recent snapshots, and the mirror of the last one served
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.RLock()
        # block id -> [(step, PayloadSummary)] in step order: the block's K/V from that step on
        self._payloads: dict[int, list[tuple[int, Any]]] = {}
        self.record(engine, None, None)

    def __len__(self) -> int:
        return len(self._steps)

    # -- recording ------------------------------------------------------------------------
    def record(self, engine: Engine, step: Step | None, result: StepResult | None) -> None:
        ops = tuple(result.ops) if result else ()
        index = len(self._steps)
        full = step is None or step.kind in FULL_STATE_EVENTS
        engine_steps = tuple(result.engine_steps) if result else ()
        dirty: list[str] | None = None                    # None: every request
        if not full:
            seen: dict[str, None] = {}
            for op in ops:
                if op.kind in REQUEST_OPS:
                    seen[op.request_id] = None
            for es in engine_steps:
                for s in es.scheduled:
                    seen.setdefault(s.request_id, None)
                for r in (*es.preempted, *es.finished, *(r for r, _ in es.sampled)):
                    seen.setdefault(r, None)
            dirty = list(seen)
        cap = engine.capture(dirty, pool=full)
        ident = {rid: self._reg.identity(v) for rid, v in cap.requests.items()}
        packed = self._log.pack(ops, ident)

        # requests
        if full:
            self._epochs.append(_Epoch(index))
            self._epoch_starts.append(index)
        epoch = self._epochs[-1]
        for rid, v in cap.requests.items():
            i = ident[rid]
            if rid not in epoch.by_rid or epoch.order[epoch.by_rid[rid]] != i:
                epoch.by_rid[rid] = len(epoch.order)
                epoch.order.append(i)
                epoch.arrivals.append(index)
            self._add_version(i, index, v)
        self._dirty.append_run(list(ident.values()))

        # the pool
        if full:
            pool = cap.pool
            self._live = Mirror.from_state(self._reg, self._log, self._explicit, pool.ref_cnt,
                                           pool.block_hash, pool.block_tokens, pool.free_queue,
                                           pool.hash_table)
        else:
            self._live.apply_packed(packed)
        if self.check:
            self._check_live(engine)

        # the rest, in columns
        self._steps.append(step)
        self._ops.append_run(packed)
        self._num_ops.append(len(ops))
        self._events.append_run(self._evlog.pack(result.events, ops, ident) if result else ())
        self._engine_steps.append_run(_pack_engine_steps(engine_steps, ident))
        order, pos = epoch.order, epoch.by_rid
        queues = [len(cap.waiting), *(order[pos[r]] for r in cap.waiting),
                  *(order[pos[r]] for r in cap.running)]
        if not self._queue_at or queues != list(self._queues.values(len(self._queue_at) - 1)):
            self._queue_at.append(index)
            self._queues.append_run(queues)
        last = self._none_hash[-1] if self._none_hash else None
        self._none_hash.append(last if last == cap.none_hash else cap.none_hash)
        self._external.append(cap.external)
        tier = cap.tier
        if tier is not None:
            last = self._tier[-1] if self._tier else None
            contents = (last.contents if last is not None and last.contents == tier.contents
                        else tier.contents)     # an unchanged tier is kept once
            tier = dataclasses.replace(tier, contents=contents, steps=tuple(
                result.tier_steps) if result is not None else ())
        self._tier.append(tier)
        if result is not None and result.reset_ok is not None:
            self._reset_ok[index] = result.reset_ok
        if result is not None and result.teaching_only:
            self._teaching.add(index)
        cols, stats = self._stats, cap.stats
        for name in _STATS:
            value = getattr(stats, name)
            try:                      # one value: append is all or nothing
                cols[name].append(value)
            except OverflowError:     # past what the column's width holds: widen it once
                cols[name] = L.grow(cols[name], (value,))
        if result is not None:
            for b, summary in result.payloads.items():
                self._payloads.setdefault(b, []).append((index, summary))

        self._since_keyframe += sum(_op_cost(op) for op in ops) + len(ident)
        if full or self._since_keyframe > self._threshold:
            self._keyframes[index] = self._live.keyframe()
            self._keyframe_ids.append(index)
            self._since_keyframe = 0

    def _add_version(self, i: int, index: int, v: RequestView) -> None:
        if i == len(self._vrows):
            self._vrows.append(array("H"))
        blocks = -1
        if v._blocks is not None:
            blocks = self._blist_index.get(id(v._blocks))
            if blocks is None:
                blocks = self._blist_index[id(v._blocks)] = len(self._blists)
                self._blists.append(v._blocks)
        try:
            self._vrows[i].append(len(self._vrecord))
        except OverflowError:
            self._vrows[i] = L.grow(self._vrows[i], (len(self._vrecord),))
        try:
            self._vrecord.append(index)
        except OverflowError:
            self._vrecord = L.grow(self._vrecord, (index,))
        # (codes and indices that may be -1 are kept one up, so every value is >= 0)
        self._vdata = L.grow(self._vdata, (
            self._status.code(v.status), v.num_tokens, v.num_computed_tokens, v.num_preemptions,
            v.local_hit_blocks, v.external_hit_blocks, v.num_output_placeholders,
            self._finish.code(v.finish_reason) + 1, blocks + 1, v._num_blocks))

    def _check_live(self, engine: Engine) -> None:
        """The recording mirror against the engine (``check``): a replay that drifted from what
        the engine did would show a false state."""
        pool = engine.capture((), pool=True).pool
        m = self._live
        assert tuple(m.ref) == pool.ref_cnt, "mirror: ref counts drifted"
        assert tuple(m.hash) == pool.block_hash, "mirror: hashes drifted"
        assert m.queue() == pool.free_queue, "mirror: free queue drifted"
        assert tuple(m.table.values()) == pool.hash_table, "mirror: hash table drifted"
        assert m.block_tokens() == tuple(map(tuple, pool.block_tokens)), "mirror: tokens drifted"

    # -- requests -------------------------------------------------------------------------
    def _epoch_at(self, index: int) -> _Epoch:
        return self._epochs[bisect.bisect_right(self._epoch_starts, index) - 1]

    def _view(self, i: int, index: int) -> RequestView:
        rows = self._vrows[i]
        k = rows[bisect.bisect_right(rows, index, key=self._vrecord.__getitem__) - 1]
        row = self._vdata[k * _W:(k + 1) * _W]
        base = self._reg.views[i]
        return RequestView(
            base.request_id, self._status.name(row[0]), base.num_prompt_tokens, row[1], row[2],
            row[3], row[4], row[5], base.max_tokens, base.lora, base.cache_salt,
            self._finish.name(row[7] - 1), row[6], base._tokens,
            None if row[8] == 0 else self._blists[row[8] - 1], row[9], base._hashes)

    # -- access ---------------------------------------------------------------------------
    def snapshot(self, index: int) -> Snapshot:
        if not 0 <= index < len(self._steps):
            raise IndexError(f"step {index} is outside 0..{len(self._steps) - 1}")
        with self._lock:  # built-in timelines (and this cache) are shared by every session
            hit = self._cache.get(index)
            if hit is not None:
                self._cache.move_to_end(index)
                return hit
            snap = self._freeze(index, self._mirror_at(index))
            self._cache[index] = snap
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return snap

    def _mirror_at(self, index: int) -> Mirror:
        """A fresh mirror of the pool after step ``index``: from the nearest keyframe, or from a
        snapshot served before if one lies between it and ``index``."""
        with self._lock:
            return self._mirror_from(index)

    def _mirror_from(self, index: int) -> Mirror:
        k = self._keyframe_ids[bisect.bisect_right(self._keyframe_ids, index) - 1]
        base = max((i for i in self._cache if k <= i <= index), default=k)
        if base > k or (base == k and k in self._cache):
            m = self._cache[base]._mirror.copy()
        else:
            m = Mirror.from_keyframe(self._reg, self._log, self._explicit, self._keyframes[k])
        data, starts = self._ops.data, self._ops.starts
        m.apply_packed(data, starts[base + 1], starts[index + 1])
        return m

    def _queues_at(self, index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        q = self._queues.values(bisect.bisect_right(self._queue_at, index) - 1)
        rid = self._reg.rid
        return tuple(map(rid, q[1:1 + q[0]])), tuple(map(rid, q[1 + q[0]:]))

    def _freeze(self, index: int, m: Mirror) -> Snapshot:
        waiting, running = self._queues_at(index)
        return Snapshot(
            index=index, step=self._steps[index], ref_cnt=tuple(m.ref), block_hash=tuple(m.hash),
            block_tokens=m.block_tokens(frozen=True), free_queue=m.queue(),
            hash_table=tuple(m.table.values()), requests=RequestsAt(self, index),
            waiting=waiting, running=running,
            kv_events=tuple(e if isinstance(e, dict) else e.to_dict()
                            for e in self._evlog.unpack(self._events.data,
                                                        *self._events.run(index))),
            stats=self.step_stats(index), ops=self.step_ops(index),
            reset_ok=self._reset_ok.get(index), none_hash=self._none_hash[index],
            external=self._external[index], engine_steps=self.step_engine_steps(index),
            tier=self._tier[index],
            teaching_only=index in self._teaching,
            start_note=self._start_note if index == 0 else None, _mirror=m)

    def __getitem__(self, index: int) -> Snapshot:
        return self.snapshot(index)

    def __iter__(self) -> Iterator[Snapshot]:
        for i in range(len(self)):
            yield self.snapshot(i)

    def payload(self, block_id: int, index: int):
        """The PayloadSummary of ``block_id``'s K/V as of step ``index`` (None if never written or
        no payload history was kept)."""
        history = self._payloads.get(block_id)
        if not history:
            return None
        k = bisect.bisect_right(history, index, key=lambda e: e[0]) - 1
        return history[k][1] if k >= 0 else None

    def step_of(self, index: int) -> Step | None:
        return self._steps[index]

    def step_ops(self, index: int) -> tuple:
        """The op records of step ``index`` (decoded from the log; no materialization)."""
        return self._log.unpack(self._ops.data, *self._ops.run(index))

    def step_num_ops(self, index: int) -> int:
        return self._num_ops[index]

    def step_requests(self, index: int) -> Mapping[str, RequestView]:
        """The requests step ``index`` touched, as they were after it (every request a step's
        ops name is among them; cheap: no materialization)."""
        rid = self._reg.rid
        return {rid(i): self._view(i, index) for i in self._dirty.values(index)}

    def step_stats(self, index: int) -> Stats:
        values = {name: col[index] for name, col in self._stats.items()}
        values["reset"] = bool(values["reset"])
        return Stats(**values)

    def step_engine_steps(self, index: int) -> tuple[EngineStepView, ...]:
        return _unpack_engine_steps(self._engine_steps.values(index), self._reg.rid, self._budget)

    def frames(self, index: int) -> Frames:
        """The op-level frames inside step ``index``: the state after each op. A lazy sequence:
        a frame is replayed when it is asked for, so a step of thousands of ops over a big pool
        costs only the frames actually looked at."""
        return Frames(self, index)

    @property
    def num_keyframes(self) -> int:
        return len(self._keyframe_ids)


class Frames(Sequence):
    """The frames of one step, replayed on demand from the previous step's state (forward from
    the last frame built; a few recent frames are kept). Thread-safe: built-in timelines are
    shared by every session of a server."""

    def __init__(self, timeline: Timeline, index: int) -> None:
        self._tl, self._index = timeline, index
        self._packed = timeline._ops.data
        start, end = timeline._ops.run(index) if index > 0 else (0, 0)
        self._records = list(timeline._log.walk(self._packed, start, end))  # [(position, record)]
        self._mirror: Mirror | None = None
        self._at = -1                      # the mirror is the state after op self._at
        self._recent: OrderedDict[int, Frame] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self._records)
        if not 0 <= k < len(self._records):
            raise IndexError(f"frame {k} is outside 0..{len(self._records) - 1}")
        with self._lock:
            frame = self._recent.get(k)
            if frame is None:
                frame = self._build(k)
                self._recent[k] = frame
                if len(self._recent) > 8:
                    self._recent.popitem(last=False)
            return frame

    def _build(self, k: int) -> Frame:
        tl = self._tl
        if self._mirror is None or k < self._at:
            self._mirror = tl._mirror_at(self._index - 1)
            self._at = -1
        while self._at < k:
            self._at += 1
            pos, op = self._records[self._at]
            if op.kind in FULL_STATE_EVENTS:   # rewind/restart: the whole state is replaced
                self._mirror = tl._mirror_at(self._index)
            else:
                self._mirror.apply_packed(self._packed, pos, limit=1)
        m = self._mirror
        return Frame(self._records[k][1], m.queue(), tuple(m.ref), tuple(m.hash), m.block_tokens())


@dataclass(frozen=True)
class Frame:
    op: Any  # an op record (blockviz.core.ops)
    free_queue: tuple[int, ...]
    ref_cnt: tuple[int, ...]
    block_hash: tuple[bytes | None, ...]
    block_tokens: tuple[tuple[int, ...], ...]

    @property
    def kind(self) -> str:
        return self.op.kind


@dataclass(frozen=True)
class Diff:
    changed_blocks: frozenset[int]
    queue_added: frozenset[int]
    queue_removed: frozenset[int]
    hashes_added: frozenset[bytes]
    hashes_removed: frozenset[bytes]
    changed_requests: frozenset[str]


def changed_blocks(a, b) -> frozenset[int]:
    """Blocks whose ref count, hash or tokens differ from ``a`` to ``b`` (snapshots or frames)."""
    ta, tb = a.block_tokens, b.block_tokens
    same = ta.same if isinstance(ta, BlockTokens) else (lambda i, other: ta[i] == other[i])
    return frozenset(i for i in range(len(b.ref_cnt))
                     if a.ref_cnt[i] != b.ref_cnt[i] or a.block_hash[i] != b.block_hash[i]
                     or not same(i, tb))


def diff(a: Snapshot, b: Snapshot) -> Diff:
    """What differs from ``a`` to ``b`` (any two snapshots of one timeline)."""
    changed = changed_blocks(a, b)
    qa, qb = set(a.free_queue), set(b.free_queue)
    ha, hb = {h for h, _ in a.hash_table}, {h for h, _ in b.hash_table}
    reqs = frozenset(rid for rid in set(a.requests) | set(b.requests)
                     if _req_key(a.requests.get(rid)) != _req_key(b.requests.get(rid)))
    return Diff(changed, frozenset(qb - qa), frozenset(qa - qb), frozenset(hb - ha),
                frozenset(ha - hb), reqs)


def _req_key(v: RequestView | None) -> Any:
    if v is None:
        return None
    return (v.status, v.block_ids, v.num_tokens, v.num_computed_tokens)
