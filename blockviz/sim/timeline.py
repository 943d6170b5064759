"""The timeline: a run, recorded as it happens, from which any step — or any op inside one — is
served as a :class:`~blockviz.sim.step.Step`, in any order.

Why it is built like this: a run of 100,000 events over 16,384 blocks must fit in a few hundred
MB, and a jump to any step must take milliseconds. So the timeline keeps what *changed*, compactly,
in columns of ints, and rebuilds a step on demand:

    step:    0      1     2     3  ...  k      k+1  ...  i
    ops:            ■■    ■■■   ■       ■■     ■■        ■■■     packed ints (sim.oplog)
    pool:    K0                         Kk                       keyframes (sim.mirror)
    serving step i: copy the nearest keyframe Kk, replay the ops of k+1 .. i onto it

A keyframe (a compact copy of the pool) is kept at the start, after every rewind or restart, and
whenever the ops since the last one add up to a few pools' worth. A step served just before, when
nearer than the keyframe, is replayed from instead. The ops say what happened, so replaying
decides nothing.

Requests are kept as versions: each request identity has its own list of rows (the fields that
change, as ints; the token and block lists are the engine's, shared), and a step's ``requests``
mapping finds, for each request that had arrived by then, its latest version, when asked — no
request table is ever copied. The engine steps, stats, queues and KV events of each step are
columns too. Inside an event, an op frame's pool is replayed op by op, and its requests follow
from the ops (``sim.mirror.FrameState``).

With ``check`` on (the runner's ``check=True``, which every built-in lesson's test uses), the
recording mirror is checked against the engine after every step, and so is following an event's
ops from the requests before it.

What reading does to the timeline: serving a step keeps it (and its mirror) in a small cache of
recent steps, and ``frames`` keeps a few recent frames; neither ever grows what the recording
holds.
"""
from __future__ import annotations

import bisect
import dataclasses
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from typing import TYPE_CHECKING, Any

from blockviz.core import ops as O
from blockviz.sim import oplog as L
from blockviz.sim.metrics import VllmMetrics
from blockviz.sim.mirror import FrameState, Keyframe, Mirror
from blockviz.sim.step import Step
from blockviz.sim.views import EngineStepView, RequestView, ScheduledView, Stats

if TYPE_CHECKING:
    from blockviz.scenario.schema import Step as Event
    from blockviz.sim.engine import Engine, StepResult

# Events after which the engine state is not the previous state plus ops: keyframe them.
FULL_STATE_EVENTS = frozenset({"rewind", "restart"})
# Ops that name a request: the requests a step touched.
REQUEST_OPS = frozenset(r.kind for r in O.RECORDS if "request_id" in r._fields)


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
            sched.append(ScheduledView(
                request_id=rid(i), num_tokens=k, decode=bool(bits & _DECODE),
                admitted=bool(bits & _ADMITTED), resumed=bool(bits & _RESUMED),
                local_hit_tokens=local, external_hit_tokens=ext, samples=bool(bits & _SAMPLES)))
            p += 5
        lists = []
        for _ in range(2):
            k = a[p]
            lists.append(tuple(rid(i) for i in a[p + 1:p + 1 + k]))
            p += 1 + k
        k = a[p]
        sampled = tuple((rid(a[p + 1 + 2 * j]), a[p + 2 + 2 * j]) for j in range(k))
        p += 1 + 2 * k
        out.append(EngineStepView(scheduled=tuple(sched), preempted=lists[0], finished=lists[1],
                                  sampled=sampled, token_budget=budget,
                                  teaching_only=bool(teaching)))
    return tuple(out)


_STATS = tuple(f.name for f in fields(Stats))
_METRICS = tuple(f.name for f in fields(VllmMetrics))


def _op_cost(op) -> int:
    return 1 + sum(len(x) for x in op if isinstance(x, tuple))


class Timeline:
    """Records an engine's run (``record``, once per event) and serves any point of it
    (``step``, ``frames``)."""

    def __init__(self, engine: Engine, *, cache_size: int = 8, check: bool = False) -> None:
        self.num_gpu_blocks = engine.num_gpu_blocks
        self.block_size = engine.block_size
        self.vocab = engine.vocab
        self.check = check
        self.error: str | None = None
        self.error_step: int | None = None
        self.payload_device: str | None = engine.kv.device_name if engine.kv is not None else None
        self._budget = engine.scheduler_config.max_num_batched_tokens
        self._async = engine.scheduler_config.async_scheduling
        self._start_note = engine.scenario.start_note
        self._start_caption = engine.scenario.start_caption
        # a hybrid model's KV-cache groups (config.kv_cache_groups), None for one full-attention
        # group: what the narration names an op's group by
        self.kv_cache_groups = engine.scenario.config.kv_cache_groups
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
        self._metrics = {name: array("d") for name in _METRICS}   # vLLM's metrics, per record
        # requests: versions (a row of _W ints each, the record it is of), each identity's rows,
        # and the epochs they arrived in
        self._vdata = array("H")
        self._vrecord = array("H")
        self._vrows: list[array] = []
        self._epochs: list[_Epoch] = []
        self._epoch_starts: list[int] = []
        # the miss explainer's splits of each identity, kept when they change (rarely: at an
        # admission): identity -> [(record, prompt_split, resumed_split)]
        self._splits: dict[int, list[tuple]] = {}
        # keyframes
        self._keyframes: dict[int, Keyframe] = {}
        self._keyframe_ids: list[int] = []
        self._since_keyframe = 0
        # A keyframe costs about a pool: take one when the ops since the last add up to a few
        # pools' worth, so keyframes stay a fraction of what the steps hold.
        self._threshold = max(4096, 2 * self.num_gpu_blocks)
        self._live: Mirror | None = None
        # serving: recent steps (each with the mirror it was read from)
        self._cache: OrderedDict[int, Step] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.RLock()
        # block id -> [(step, PayloadSummary)] in step order: the block's K/V from that step on
        self._payloads: dict[int, list[tuple[int, Any]]] = {}
        self.record(engine, None, None)

    def __len__(self) -> int:
        return len(self._steps)

    def __getstate__(self) -> dict:
        """A pickled timeline (an app worker's run) carries the recording, not the steps it
        served lately."""
        state = dict(self.__dict__)
        state["_cache"] = OrderedDict()
        return state

    # -- recording ------------------------------------------------------------------------
    def record(self, engine: Engine, step: Event | None, result: StepResult | None) -> None:
        """Record the engine's state after ``step`` (None: the start), and what it did."""
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
        first_hash = len(self._log.hashes)
        packed = self._log.pack(ops, ident)
        before = None if full or not self.check else (self._step(index - 1), cap.requests)

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
            self._live = Mirror.from_state(self._reg, self._log, self._explicit, cap.ref_cnt,
                                           cap.block_hash, cap.block_tokens, cap.free_queue,
                                           cap.hash_table)
        else:
            self._live.replay(packed)
        if self.check:
            self._check_live(engine)

        # the rest, in columns
        self._steps.append(step)
        self._ops.append_run(packed)
        self._num_ops.append(len(ops))
        self._events.append_run(self._evlog.pack(result.events, ops, ident, first_hash)
                                if result else ())
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
        if cap.vllm_metrics is not None:
            for name in _METRICS:
                self._metrics[name].append(getattr(cap.vllm_metrics, name))
        if result is not None:
            for b, summary in result.payloads.items():
                self._payloads.setdefault(b, []).append((index, summary))

        self._since_keyframe += sum(_op_cost(op) for op in ops) + len(ident)
        if full or self._since_keyframe > self._threshold:
            self._keyframes[index] = self._live.keyframe()
            self._keyframe_ids.append(index)
            self._since_keyframe = 0
        if before is not None:
            self._check_frames(index, *before)

    def _add_version(self, i: int, index: int, v: RequestView) -> None:
        if i == len(self._vrows):
            self._vrows.append(array("H"))
        blocks = -1
        if v.table is not None:
            blocks = self._blist_index.get(id(v.table))
            if blocks is None:
                blocks = self._blist_index[id(v.table)] = len(self._blists)
                self._blists.append(v.table)
        try:
            self._vrows[i].append(len(self._vrecord))
        except OverflowError:
            self._vrows[i] = L.grow(self._vrows[i], (len(self._vrecord),))
        try:
            self._vrecord.append(index)
        except OverflowError:
            self._vrecord = L.grow(self._vrecord, (index,))
        splits = self._splits.get(i)
        if (v.prompt_split, v.resumed_split) != ((None, None) if not splits else splits[-1][1:]):
            self._splits.setdefault(i, []).append((index, v.prompt_split, v.resumed_split))
        # (codes and indices that may be -1 are kept one up, so every value is >= 0)
        self._vdata = L.grow(self._vdata, (
            self._status.code(v.status), v.num_tokens, v.num_computed_tokens, v.num_preemptions,
            v.local_hit_blocks, v.external_hit_blocks, v.num_output_placeholders,
            self._finish.code(v.finish_reason) + 1, blocks + 1, v.num_blocks))

    def _check_live(self, engine: Engine) -> None:
        """The recording mirror against the engine (``check``): a replay that drifted from what
        the engine did would show a false state."""
        pool = engine.capture((), pool=True)
        m = self._live
        assert tuple(m.ref) == pool.ref_cnt, "mirror: ref counts drifted"
        assert tuple(m.hash) == pool.block_hash, "mirror: hashes drifted"
        assert m.queue() == pool.free_queue, "mirror: free queue drifted"
        assert tuple(m.table.values()) == pool.hash_table, "mirror: hash table drifted"
        assert m.block_tokens() == tuple(map(tuple, pool.block_tokens)), "mirror: tokens drifted"

    def _check_frames(self, index: int, before: Step, touched: Mapping[str, RequestView]) -> None:
        """Following event ``index``'s ops from the requests before it (what its op frames show)
        ends where the engine did (``check``)."""
        if not self.step_num_ops(index):
            return
        last = self.frames(index)[-1]
        for rid, v in touched.items():
            got = last.requests.get(rid)
            assert got is not None and _row(got) == _row(v), (
                f"step {index}: following the ops, {rid} ends as {got and _row(got)}, "
                f"not {_row(v)}")

    # -- requests -------------------------------------------------------------------------
    def _epoch_at(self, index: int) -> _Epoch:
        return self._epochs[bisect.bisect_right(self._epoch_starts, index) - 1]

    def _view(self, i: int, index: int) -> RequestView:
        rows = self._vrows[i]
        k = rows[bisect.bisect_right(rows, index, key=self._vrecord.__getitem__) - 1]
        row = self._vdata[k * _W:(k + 1) * _W]
        splits = self._splits.get(i)
        prompt = resumed = None
        if splits:
            j = bisect.bisect_right(splits, index, key=lambda e: e[0]) - 1
            if j >= 0:
                _, prompt, resumed = splits[j]
        return dataclasses.replace(
            self._reg.views[i], status=self._status.name(row[0]), num_tokens=row[1],
            num_computed_tokens=row[2], num_preemptions=row[3], local_hit_blocks=row[4],
            external_hit_blocks=row[5], num_output_placeholders=row[6],
            finish_reason=self._finish.name(row[7] - 1),
            table=None if row[8] == 0 else self._blists[row[8] - 1], num_blocks=row[9],
            prompt_split=prompt, resumed_split=resumed)

    # -- access ---------------------------------------------------------------------------
    def step(self, index: int, frame: int | None = None) -> Step:
        """The state after event ``index``, or (``frame`` k) after its op k (clamped to the
        event's ops; an event without ops has one frame: the event itself)."""
        if not 0 <= index < len(self._steps):
            raise IndexError(f"step {index} is outside 0..{len(self._steps) - 1}")
        if frame is not None:
            frames = self.frames(index)
            if frames:
                return frames[max(0, min(frame, len(frames) - 1))]
            s = self._step(index)
            return dataclasses.replace(s, frame=0, before=partial(self._step, index))
        return self._step(index)

    def _step(self, index: int) -> Step:
        with self._lock:  # built-in timelines (and this cache) are shared by every session
            hit = self._cache.get(index)
            if hit is not None:
                self._cache.move_to_end(index)
                return hit
            s = self._serve(index, self._mirror_from(index))
            self._cache[index] = s
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return s

    def _mirror_from(self, index: int, cls: type[Mirror] = Mirror) -> Mirror:
        """From the nearest keyframe, or from a step served before if one lies between it and
        ``index``; a ``cls`` (Mirror or FrameState)."""
        k = self._keyframe_ids[bisect.bisect_right(self._keyframe_ids, index) - 1]
        base = max((i for i in self._cache if k <= i <= index), default=k)
        if base > k or (base == k and k in self._cache):
            m = self._cache[base].mirror.copy(cls)
        else:
            m = cls.from_keyframe(self._reg, self._log, self._explicit, self._keyframes[k])
        data, starts = self._ops.data, self._ops.starts
        L.CODEC.replayer(Mirror)(m, data, starts[base + 1], starts[index + 1])   # the pool only
        return m

    def _queues_at(self, index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        q = self._queues.values(bisect.bisect_right(self._queue_at, index) - 1)
        rid = self._reg.rid
        return tuple(map(rid, q[1:1 + q[0]])), tuple(map(rid, q[1 + q[0]:]))

    def _serve(self, index: int, m: Mirror) -> Step:
        waiting, running = self._queues_at(index)
        return Step(
            index=index, num_frames=self._num_ops[index], event=self._steps[index],
            start_note=self._start_note if index == 0 else None,
            start_caption=self._start_caption if index == 0 else None,
            ref_cnt=tuple(m.ref), block_hash=tuple(m.hash),
            block_tokens=m.block_tokens(frozen=True), free_queue=m.queue(),
            hash_table=tuple(m.table.values()), requests=RequestsAt(self, index),
            waiting=waiting, running=running, ops=self.step_ops(index),
            kv_events=tuple(e if isinstance(e, dict) else e.to_dict()
                            for e in self._evlog.unpack(self._events.data,
                                                        *self._events.run(index))),
            engine_steps=self.step_engine_steps(index), stats=self.step_stats(index),
            vllm_metrics=self.step_vllm_metrics(index),
            tier=self._tier[index], external=self._external[index],
            none_hash=self._none_hash[index], reset_ok=self._reset_ok.get(index),
            teaching_only=index in self._teaching,
            before=partial(self._step, index - 1) if index > 0 else None, mirror=m)

    def __getitem__(self, index: int) -> Step:
        return self.step(index)

    def __iter__(self) -> Iterator[Step]:
        for i in range(len(self)):
            yield self.step(i)

    def payload(self, block_id: int, index: int):
        """The PayloadSummary of ``block_id``'s K/V as of step ``index`` (None if never written or
        no payload history was kept)."""
        history = self._payloads.get(block_id)
        if not history:
            return None
        k = bisect.bisect_right(history, index, key=lambda e: e[0]) - 1
        return history[k][1] if k >= 0 else None

    def step_of(self, index: int) -> Event | None:
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

    def step_vllm_metrics(self, index: int) -> VllmMetrics | None:
        cols = self._metrics
        if not cols[_METRICS[0]]:
            return None
        return VllmMetrics(**{name: (col[index] if isinstance(VllmMetrics.__dataclass_fields__[
            name].default, float) else int(col[index])) for name, col in cols.items()})

    def step_engine_steps(self, index: int) -> tuple[EngineStepView, ...]:
        return _unpack_engine_steps(self._engine_steps.values(index), self._reg.rid, self._budget)

    def frames(self, index: int) -> Frames:
        """The op frames inside event ``index``: a Step after each op. A lazy sequence: a frame
        is replayed when it is asked for, so an event of thousands of ops over a big pool costs
        only the frames looked at."""
        start, end = self._ops.run(index) if index > 0 else (0, 0)
        return Frames(self._step(index), list(self._log.walk(self._ops.data, start, end)),
                      self._ops.data, partial(self._frame_start, index))

    def _frame_start(self, index: int, after: bool = False) -> FrameState:
        """The state op frames of event ``index`` start from: after the event before it (or,
        ``after``, after this one: what a rewind or a restart leaves)."""
        at = index if after else index - 1
        waiting, running = self._queues_at(at)
        with self._lock:
            state = self._mirror_from(at, FrameState)
        return state.follow(RequestsAt(self, at), self.step_requests(index), waiting, running,
                            self.block_size, self._async, len(self.kv_cache_groups or ()) or 1)

    @property
    def num_keyframes(self) -> int:
        return len(self._keyframe_ids)


class Frames(Sequence):
    """The op frames of one event, replayed on demand from the state before it (forward from
    the last frame built; a few recent frames are kept). Thread-safe: built-in timelines are
    shared by every session of a server.

    ``records``: the event's (position in ``packed``, record); ``start(after=False)``: a fresh
    FrameState before the event (``after``: after it, what a rewind or a restart leaves)."""

    def __init__(self, event: Step, records: list, packed, start) -> None:
        self._event, self._records, self._packed, self._start = event, records, packed, start
        self._state: FrameState | None = None
        self._at = -1                      # the state is the one after op self._at
        self._recent: OrderedDict[int, Step] = OrderedDict()
        self._lock = threading.RLock()

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

    def _build(self, k: int) -> Step:
        if self._state is None or k < self._at:
            self._state = self._start()
            self._state.ahead = [op for _, op in self._records]
            self._at = -1
        while self._at < k:
            self._at += 1
            pos, op = self._records[self._at]
            if op.kind in FULL_STATE_EVENTS:   # rewind/restart: the whole state is replaced
                self._state = self._start(after=True)
            else:
                self._state.at = self._at
                self._state.replay(self._packed, pos, limit=1)
        f, event = self._state, self._event
        return dataclasses.replace(
            event, frame=k, op=self._records[k][1], ref_cnt=tuple(f.ref),
            block_hash=tuple(f.hash), block_tokens=f.block_tokens(), free_queue=f.queue(),
            hash_table=tuple(f.table.values()), requests=f.requests(),
            waiting=tuple(f.waiting), running=tuple(f.running),
            before=partial(self.__getitem__, k - 1) if k > 0 else event.before, mirror=None)


def _row(v: RequestView) -> tuple:
    """What an op frame's request view shows of a request (every group's table, several)."""
    tables = v.block_tables.tables if v.block_tables is not None else None
    return (v.status, v.block_ids, tables, v.num_tokens, v.num_computed_tokens, v.num_preemptions,
            v.local_hit_blocks, v.external_hit_blocks, v.finish_reason, v.num_output_placeholders)
