"""The timeline: an immutable snapshot after every event, op-level frames inside each event,
random access, and the diff between two snapshots.

Memory grows with what changed, not with steps x blocks: the timeline keeps a full *keyframe* of
the engine state now and then (at the start, after every rewind, and whenever the changes since the
last one add up to about a pool's worth) and, for every step, only the op records the engine
emitted plus the requests those ops touched. Any step is materialized by replaying the ops since
the nearest keyframe onto a small mirror of the pool (O(1) per op; the ops say what happened,
e.g. which blocks went to the head and which to the tail, so the mirror decides nothing).
A keyframe costs O(pool + requests) without any replay: ref counts, hashes and the free queue are
read from the engine; requests, the hash table and block tokens are kept up to date as steps are
recorded, and unchanged entries are shared with the previous keyframe.
"""
from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blockviz.sim.views import EngineStepView, RequestView, Stats

if TYPE_CHECKING:
    from blockviz.scenario.schema import Step, Text
    from blockviz.sim.engine import Engine, StepResult

# Events after which the engine state is not the previous state plus ops: keyframe them.
FULL_STATE_EVENTS = frozenset({"rewind", "restart"})
# Ops that name a request: the requests a step touched.
REQUEST_OPS = frozenset({"arrive", "admit", "schedule", "sample", "finish", "preempt", "lookup",
                         "cache", "write", "load", "alloc_failed", "save"})
# The only ops that change a block's tokens; full-state events aside.
TOKEN_OPS = frozenset({"write", "load"})


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
    # the event is a form vLLM's scheduler has no equivalent for (a teaching device)
    teaching_only: bool = False

    @property
    def num_gpu_blocks(self) -> int:
        return len(self.ref_cnt)

    @property
    def event(self) -> dict | None:
        return None if self.step is None else self.step.event_dict()

    start_note: Text | None = None

    @property
    def note(self) -> Text | None:
        return self.start_note if self.step is None else self.step.note

    @property
    def next_victim(self) -> int | None:
        """The block the next allocation takes: the head of the free queue."""
        return self.free_queue[0] if self.free_queue else None


# -- the pool mirror that ops replay onto ---------------------------------------------------
_MISSING = object()


class RequestsAt(Mapping):
    """The requests at a replayed step: its keyframe's table plus the views updated since, in
    the same order a dict updated step by step would have (the keyframe's, then new arrivals).
    Nothing is copied: with tens of thousands of requests, a copy per jump is what a garbage
    collection pass would then have to walk."""

    __slots__ = ("_base", "_new")

    def __init__(self, base: Mapping[str, RequestView], new: dict[str, RequestView]) -> None:
        self._base, self._new = base, new

    def __getitem__(self, rid: str) -> RequestView:
        v = self._new.get(rid, _MISSING)
        return self._base[rid] if v is _MISSING else v

    def __contains__(self, rid: object) -> bool:
        return rid in self._new or rid in self._base

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        base = self._base
        for rid in self._new:
            if rid not in base:
                yield rid

    def __len__(self) -> int:
        base = self._base
        return len(base) + sum(1 for rid in self._new if rid not in base)

    def __repr__(self) -> str:
        return f"RequestsAt({dict(self)!r})"


class _Mirror:
    """Mutable copy of the observable pool state; ops replay onto it in O(1) each."""

    def __init__(self, ref, hashes, tokens, queue, table, requests, waiting, running):
        n = len(ref)
        self.ref = list(ref)
        self.hash = list(hashes)
        self.tokens = list(tokens)
        self.head, self.tail = n, n + 1
        self.nxt = [-1] * (n + 2)
        self.prv = [-1] * (n + 2)
        prev = self.head
        for b in queue:
            self.nxt[prev] = b
            self.prv[b] = prev
            prev = b
        self.nxt[prev] = self.tail
        self.prv[self.tail] = prev
        self.table: dict[bytes, tuple[bytes, tuple[int, ...]]] = {p[0]: p for p in table}
        if isinstance(requests, RequestsAt):   # a replayed step: the same keyframe underneath
            self.requests_base, self.requests = requests._base, dict(requests._new)
        else:
            self.requests_base, self.requests = requests, {}
        self.waiting, self.running = waiting, running

    @classmethod
    def of(cls, s: Snapshot) -> _Mirror:
        return cls(s.ref_cnt, s.block_hash, s.block_tokens, s.free_queue, s.hash_table,
                   s.requests, s.waiting, s.running)

    def _unlink(self, b: int) -> None:
        p, n = self.prv[b], self.nxt[b]
        self.nxt[p], self.prv[n] = n, p
        self.prv[b] = self.nxt[b] = -1

    def _insert_after(self, after: int, ids) -> None:
        end = self.nxt[after]
        prev = after
        for b in ids:
            self.nxt[prev], self.prv[b] = b, prev
            prev = b
        self.nxt[prev], self.prv[end] = end, prev

    def queue(self) -> tuple[int, ...]:
        out = []
        b, nxt, tail = self.nxt[self.head], self.nxt, self.tail
        while b != tail:
            out.append(b)
            b = nxt[b]
        return tuple(out)

    def apply(self, op) -> None:
        kind = op.kind
        if kind == "popleft":
            for b in op.block_ids:
                self._unlink(b)
                self.ref[b] = 1
        elif kind == "evict":
            _table_evict(self.table, op.block_hash, op.block_id)
            self.hash[op.block_id] = None
        elif kind == "touch":
            for b in op.removed_from_queue:
                self._unlink(b)
            for b in op.block_ids:
                self.ref[b] += 1
        elif kind == "cache":
            for b, h in zip(op.block_ids, op.hashes):
                self.hash[b] = h
                _table_insert(self.table, h, b)
        elif kind == "free":
            for b in op.block_ids:
                self.ref[b] -= 1
        elif kind == "free_head":
            self._insert_after(self.head, op.block_ids)
        elif kind == "free_tail":
            self._insert_after(self.prv[self.tail], op.block_ids)
        elif kind == "reset":
            if op.ok:
                self.table.clear()
                self.hash = [None] * len(self.hash)
        elif kind == "write":
            b = op.block_id
            self.tokens[b] = self.tokens[b][:op.offset] + op.token_ids
        elif kind == "load":
            self.tokens[op.block_id] = op.token_ids

    def freeze(self, index: int, rec: _Record) -> Snapshot:
        return Snapshot(
            index=index, step=rec.step, ref_cnt=tuple(self.ref), block_hash=tuple(self.hash),
            block_tokens=tuple(self.tokens), free_queue=self.queue(),
            hash_table=tuple(self.table.values()),
            requests=RequestsAt(self.requests_base, self.requests), waiting=rec.waiting,
            running=rec.running,
            kv_events=rec.kv_events, stats=rec.stats, ops=rec.ops, reset_ok=rec.reset_ok,
            none_hash=rec.none_hash, external=rec.external, engine_steps=rec.engine_steps,
            teaching_only=rec.teaching_only)


# The hash table as ``hash -> (hash, block ids in insertion order)``: the pairs are the snapshot's
# hash_table entries, so snapshots share the ones that did not change. Same order rules as
# BlockHashToBlockMap: a new hash goes last; evicting a block pops its hash, which goes back last
# if other blocks still carry it.
def _table_insert(table: dict, h: bytes, b: int) -> None:
    pair = table.get(h)
    if pair is None:
        table[h] = (h, (b,))
    elif b not in pair[1]:
        table[h] = (h, pair[1] + (b,))


def _table_evict(table: dict, h: bytes, b: int) -> None:
    pair = table.get(h)
    if pair is not None and b in pair[1]:
        del table[h]
        rest = tuple(i for i in pair[1] if i != b)
        if rest:
            table[h] = (h, rest)


def _op_cost(op) -> int:
    return 1 + sum(len(x) for x in op if isinstance(x, tuple))


@dataclass
class _Record:
    step: Step | None
    ops: tuple
    kv_events: tuple
    stats: Stats
    reset_ok: bool | None
    waiting: tuple[str, ...]
    running: tuple[str, ...]
    req_updates: dict[str, RequestView]
    none_hash: bytes
    external: tuple | None
    engine_steps: tuple[EngineStepView, ...] = ()
    teaching_only: bool = False


class Timeline:
    """Records an engine's run and serves any step's snapshot."""

    def __init__(self, engine: Engine, *, cache_size: int = 8) -> None:
        self.num_gpu_blocks = engine.num_gpu_blocks
        self.block_size = engine.block_size
        self.vocab = engine.vocab
        self._records: list[_Record] = []
        self._keyframes: dict[int, Snapshot] = {}
        self._keyframe_ids: list[int] = []
        self._since_keyframe = 0
        self._threshold = max(512, self.num_gpu_blocks // 2)
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        self._cache_size = cache_size
        self.error: str | None = None
        self.error_step: int | None = None
        # block id -> [(step, PayloadSummary)] in step order: the block's K/V from that step on
        self._payloads: dict[int, list[tuple[int, Any]]] = {}
        self.payload_device: str | None = engine.kv.device_name if engine.kv is not None else None
        # What keyframes are built from without replaying: every request's latest view, the
        # hash table kept up to date from the ops, and each block's tokens as of the last
        # keyframe plus the blocks written since.
        self._requests: dict[str, RequestView] = {}
        self._hash_table: dict[bytes, tuple[bytes, tuple[int, ...]]] = {}
        self._block_tokens: list[tuple[int, ...]] = []
        self._written: set[int] = set()
        self.record(engine, None, None)

    def __len__(self) -> int:
        return len(self._records)

    # -- recording ------------------------------------------------------------------------
    def record(self, engine: Engine, step: Step | None, result: StepResult | None) -> None:
        ops = tuple(result.ops) if result else ()
        index = len(self._records)
        full = step is None or step.kind in FULL_STATE_EVENTS
        dirty: list[str] | None = None   # None: every request
        if not full:
            seen: dict[str, None] = {}
            table = self._hash_table
            for op in ops:
                kind = op.kind
                if kind in REQUEST_OPS:
                    seen[op.request_id] = None
                    if kind in TOKEN_OPS:
                        self._written.add(op.block_id)
                    elif kind == "cache":
                        for b, h in zip(op.block_ids, op.hashes):
                            _table_insert(table, h, b)
                elif kind == "evict":
                    _table_evict(table, op.block_hash, op.block_id)
                elif kind == "reset" and op.ok:
                    table.clear()
            dirty = list(seen)
        cost = sum(_op_cost(op) for op in ops) + (len(dirty) if dirty is not None else 0)
        keyframe = full or self._since_keyframe + cost > self._threshold
        cap = engine.capture(dirty, pool=keyframe)
        rec = _Record(step, ops, tuple(result.kv_events) if result else (), cap.stats,
                      result.reset_ok if result else None, cap.waiting, cap.running,
                      cap.requests, cap.none_hash, cap.external,
                      tuple(result.engine_steps) if result else (),
                      result.teaching_only if result else False)
        self._records.append(rec)
        self._requests.update(rec.req_updates)
        if result is not None:
            for b, summary in result.payloads.items():
                self._payloads.setdefault(b, []).append((index, summary))
        self._since_keyframe += cost
        if keyframe:
            self._keyframes[index] = self._capture(cap, index, rec,
                                                   engine.scenario.start_note if index == 0 else None)
            self._keyframe_ids.append(index)
            self._since_keyframe = 0

    def _capture(self, cap, index: int, rec: _Record, start_note) -> Snapshot:
        pool = cap.pool
        tokens = pool.block_tokens
        if index > 0 and rec.step is not None and rec.step.kind not in FULL_STATE_EVENTS:
            # Between rewinds, requests are the previous state plus each step's updates, and
            # only written blocks have new tokens (unchanged ones share the previous tuples).
            requests = dict(self._requests)
            for b in self._written:
                self._block_tokens[b] = tuple(tokens[b])
        else:
            requests = rec.req_updates          # a full-state step captured every request
            self._requests = dict(requests)
            self._hash_table = {h: (h, ids) for h, ids in pool.hash_table}
            self._block_tokens = [tuple(t) for t in tokens]
        self._written.clear()
        return Snapshot(
            index=index, step=rec.step, ref_cnt=pool.ref_cnt, block_hash=pool.block_hash,
            block_tokens=tuple(self._block_tokens), free_queue=pool.free_queue,
            hash_table=tuple(self._hash_table.values()),
            requests=requests, waiting=rec.waiting, running=rec.running,
            kv_events=rec.kv_events, stats=rec.stats, ops=rec.ops, reset_ok=rec.reset_ok,
            none_hash=rec.none_hash, external=rec.external, start_note=start_note,
            engine_steps=rec.engine_steps, teaching_only=rec.teaching_only)

    # -- access ---------------------------------------------------------------------------
    def snapshot(self, index: int) -> Snapshot:
        if not 0 <= index < len(self._records):
            raise IndexError(f"step {index} is outside 0..{len(self._records) - 1}")
        if index in self._keyframes:
            return self._keyframes[index]
        with self._lock:  # built-in timelines (and this cache) are shared by every session
            return self._replayed(index)

    def _replayed(self, index: int) -> Snapshot:
        hit = self._cache.get(index)
        if hit is not None:
            self._cache.move_to_end(index)
            return hit
        k = self._keyframe_ids[bisect.bisect_right(self._keyframe_ids, index) - 1]
        # Start from the nearest materialized state at or after the keyframe.
        base = max((i for i in self._cache if k <= i < index), default=k)
        start = self._keyframes[k] if base == k else self._cache[base]
        mirror = _Mirror.of(start)
        for j in range(base + 1, index + 1):
            rec = self._records[j]
            for op in rec.ops:
                mirror.apply(op)
            mirror.requests.update(rec.req_updates)
        snap = mirror.freeze(index, self._records[index])
        self._cache[index] = snap
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return snap

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
        return self._records[index].step

    def step_ops(self, index: int) -> tuple:
        """The op records of step ``index`` (cheap: no materialization)."""
        return self._records[index].ops

    def step_requests(self, index: int) -> Mapping[str, RequestView]:
        """The requests step ``index`` touched, as they were after it (every request a step's
        ops name is among them; cheap: no materialization)."""
        return self._records[index].req_updates

    def step_stats(self, index: int) -> Stats:
        return self._records[index].stats

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
        self._ops = timeline.step_ops(index) if index > 0 else ()
        self._mirror: _Mirror | None = None
        self._at = -1                      # the mirror is the state after op self._at
        self._recent: OrderedDict[int, Frame] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ops)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self._ops)
        if not 0 <= k < len(self._ops):
            raise IndexError(f"frame {k} is outside 0..{len(self._ops) - 1}")
        with self._lock:
            frame = self._recent.get(k)
            if frame is None:
                frame = self._build(k)
                self._recent[k] = frame
                if len(self._recent) > 8:
                    self._recent.popitem(last=False)
            return frame

    def _build(self, k: int) -> Frame:
        if self._mirror is None or k < self._at:
            self._mirror, self._at = _Mirror.of(self._tl.snapshot(self._index - 1)), -1
        while self._at < k:
            self._at += 1
            op = self._ops[self._at]
            if op.kind in FULL_STATE_EVENTS:  # rewind/restart: the whole state is replaced
                self._mirror = _Mirror.of(self._tl.snapshot(self._index))
            self._mirror.apply(op)
        m = self._mirror
        return Frame(self._ops[k], m.queue(), tuple(m.ref), tuple(m.hash), tuple(m.tokens))


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
    return frozenset(i for i in range(len(b.ref_cnt))
                     if a.ref_cnt[i] != b.ref_cnt[i] or a.block_hash[i] != b.block_hash[i]
                     or a.block_tokens[i] != b.block_tokens[i])


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
