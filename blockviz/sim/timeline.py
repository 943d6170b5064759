"""The timeline: a run, recorded as it happens, from which any step — or any op inside one — is
served as a :class:`~blockviz.sim.step.Step`, in any order.

Why it is built like this: a run of 100,000 events over 16,384 blocks must fit in a few hundred
MB, and a jump to any step must take milliseconds. So the timeline keeps what *changed*, compactly,
in columns of ints, and rebuilds a step on demand:

    step:    0      1     2     3  ...  k      k+1  ...  i
    ops:            ■■    ■■■   ■       ■■     ■■        ■■■     packed ints (sim.oplog)
    pool:    K0                         Kk                       keyframes (sim.mirror)
    serving step i: copy the nearest keyframe Kk (or a step served lately, if nearer), replay
    the ops of the steps after it up to i

A keyframe (a compact copy of the pool) is kept at the start, after every rewind or restart, and
whenever the ops since the last one add up to a few pools' worth. The ops say what happened, so
replaying decides nothing.

Requests are kept as versions: each request identity has its own array of rows (the record, then
the fields that change, as ints; its token and block lists are the engine's, shared), and a step's
``requests`` mapping finds, for each request that had arrived by then, its latest version, when
asked — no request table is ever copied. The engine steps, stats, queues and KV events of each
step are columns too. Inside an event, an op frame's pool is replayed op by op, and its requests
follow from the ops (``sim.mirror.FrameState``).

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
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from blockviz.core import ops
from blockviz.sim.metrics import VllmMetrics
from blockviz.sim.mirror import FrameState, Mirror
from blockviz.sim.oplog import CODEC, EventLog, IntColumn, OpLog, grow
from blockviz.sim.step import CHANGING, EngineStepView, RequestView, ScheduledView, Stats, Step

if TYPE_CHECKING:
    from blockviz.scenario.schema import Step as Event
    from blockviz.sim.engine import Engine, StepResult

# Events after which the engine state is not the previous state plus ops: keyframe them.
FULL_STATE_EVENTS = frozenset({"rewind", "restart"})
# Ops that name a request: the requests a step touched.
REQUEST_OPS = frozenset(r.kind for r in ops.RECORDS if "request_id" in r._fields)
_changing = attrgetter(*CHANGING)
# A version of a request: the record it is of (counted from the request's first, so that a
# request's rows stay 2 bytes an int however long the run), then CHANGING as ints (strings by their
# code in ``Timeline._words``), its block table (its index in ``Timeline._tables``, 0: none) and
# how many of the table's blocks it holds.
_W = len(CHANGING) + 3


class Columns:
    """Records of a flat dataclass of numbers, one array per field (ints as narrow as they fit)."""

    def __init__(self, cls: type) -> None:
        self.cls, self.n = cls, 0
        self.kinds = {f.name: f.type for f in fields(cls)}
        assert len(self.kinds) > 1, "attrgetter of one name returns the value, not a 1-tuple"
        self.values = attrgetter(*self.kinds)             # a record's, in field order
        self.cols = [array("d" if kind == "float" else "B") for kind in self.kinds.values()]

    def append(self, record) -> None:
        cols = self.cols
        for k, value in enumerate(self.values(record)):
            try:                      # one value: append is all or nothing
                cols[k].append(value)
            except OverflowError:     # past what the column's width holds: widen it once
                cols[k] = grow(cols[k], (value,))
        self.n += 1

    def __getitem__(self, i: int):
        return self.cls(**{name: bool(col[i]) if kind == "bool" else col[i]
                           for (name, kind), col in zip(self.kinds.items(), self.cols)})


@dataclass
class _Epoch:
    """The requests from a full-state step on, in arrival order (a rewind starts a new one)."""
    start: int
    order: list[int] = field(default_factory=list)               # identities
    arrivals: array = field(default_factory=lambda: array("i"))  # record index of each
    by_rid: dict[str, int] = field(default_factory=dict)         # request id -> position in order


class RequestsAt(Mapping):
    """The requests as they were after step ``index``, built from their versions on demand (a
    view is made when asked for and kept)."""

    def __init__(self, tl: Timeline, index: int) -> None:
        self.view, self.index = tl.request_view, index
        self.epoch = tl._epochs[bisect.bisect_right(tl._epochs, index, key=attrgetter("start")) - 1]
        self.count = bisect.bisect_right(self.epoch.arrivals, index)
        self.rid = tl.log.rid
        self.views: dict[str, RequestView] = {}

    def __getitem__(self, rid: str) -> RequestView:
        v = self.views.get(rid)
        if v is None:
            pos = self.epoch.by_rid.get(rid)
            if pos is None or pos >= self.count:
                raise KeyError(rid)
            v = self.views[rid] = self.view(self.epoch.order[pos], self.index)
        return v

    def __contains__(self, rid: object) -> bool:
        pos = self.epoch.by_rid.get(rid)  # type: ignore[arg-type]
        return pos is not None and pos < self.count

    def __iter__(self) -> Iterator[str]:
        return map(self.rid, self.epoch.order[:self.count])

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"RequestsAt({dict(self)!r})"


# -- engine steps, packed ----------------------------------------------------------------------
# An engine step: its head (bit 0: teaching only; bit 1: its samples are those of the scheduled
# requests that sample, in their order, so each is its token alone), then the scheduled requests.
# A scheduled request: its identity, then flags: these (bits 0..3), bit 4 when its hit tokens
# (local, external) follow (only an admission has any: a decode's two zeros are not kept), bit 5
# when it schedules one token (a decode: the count is not kept), else its tokens after the flags.
# A long run packs millions of decodes: two ints of each are left out.
_FLAGS = ("decode", "admitted", "resumed", "samples")
_HITS = 1 << len(_FLAGS)
_ONE = _HITS << 1
_IN_ORDER = 2


def _pack_engine_steps(steps: Sequence[EngineStepView], ident: Mapping[str, int]) -> list[int]:
    out = [len(steps)] if steps else []
    for es in steps:
        in_order = [s.request_id for s in es.scheduled if s.samples] == [r for r, _ in es.sampled]
        out += (int(es.teaching_only) | (_IN_ORDER if in_order else 0), len(es.scheduled))
        for s in es.scheduled:
            flags = s.decode | s.admitted << 1 | s.resumed << 2 | s.samples << 3
            if s.local_hit_tokens or s.external_hit_tokens:
                flags |= _HITS
            if s.num_tokens == 1:
                out += (ident[s.request_id], flags | _ONE)
            else:
                out += (ident[s.request_id], flags, s.num_tokens)
            if flags & _HITS:
                out += (s.local_hit_tokens, s.external_hit_tokens)
        for rids in (es.preempted, es.finished):
            out += (len(rids), *(ident[r] for r in rids))
        out.append(len(es.sampled))
        if in_order:
            out += (tok for _, tok in es.sampled)
        else:
            for r, tok in es.sampled:
                out += (ident[r], tok)
    return out


def _unpack_engine_steps(a, rid, budget: int) -> tuple[EngineStepView, ...]:
    it = iter(a)                         # (arguments are evaluated left to right: in packed order)
    out = []
    for _ in range(next(it, 0)):
        head = next(it)
        scheduled = []
        for _ in range(next(it)):
            r, bits = rid(next(it)), next(it)
            n = 1 if bits & _ONE else next(it)
            hits = (next(it), next(it)) if bits & _HITS else (0, 0)
            scheduled.append(ScheduledView(
                request_id=r, num_tokens=n, local_hit_tokens=hits[0], external_hit_tokens=hits[1],
                **{flag: bool(bits >> j & 1) for j, flag in enumerate(_FLAGS)}))
        preempted, finished = [tuple(rid(next(it)) for _ in range(next(it))) for _ in range(2)]
        if head & _IN_ORDER:
            sampling = [s.request_id for s in scheduled if s.samples]
            sampled = tuple((r, next(it)) for r in sampling[:next(it)])
        else:
            sampled = tuple((rid(next(it)), next(it)) for _ in range(next(it)))
        out.append(EngineStepView(scheduled=tuple(scheduled), preempted=preempted,
                                  finished=finished, sampled=sampled, token_budget=budget,
                                  teaching_only=bool(head & 1)))
    return tuple(out)


def _ops_cost(records: Sequence) -> int:
    """What replaying ``records`` costs: one per record and per item of each tuple field (a
    block, a token). Counted in C: every record of a run passes here."""
    return len(records) + sum(map(len, filter(tuple.__instancecheck__, chain.from_iterable(records))))


class Timeline:
    """Records an engine's run (``record``, once per event) and serves any point of it
    (``step``, ``frames``). ``keyframe_cost``: the ops' cost (one per record and per block or
    token it lists) after which a keyframe is taken (default: two pools' worth, at least 4,096),
    so keyframes stay a fraction of what the steps hold."""

    def __init__(self, engine: Engine, *, cache_size: int = 8, check: bool = False,
                 keyframe_cost: int | None = None) -> None:
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
        self.log = OpLog()
        self._events_log = EventLog(self.log, self.block_size)
        self._explicit: list[tuple] = [()]          # token source -1: the empty tuple
        # per record, in columns (flat arrays of ints, a run per record)
        self._steps: list = []
        self._ops = IntColumn()                      # packed op records (sim.oplog)
        self._num_ops = array("i")
        self._dirty = IntColumn()                    # identities each step touched
        self._events = IntColumn()                   # packed KV events (sim.oplog.EventLog)
        self._engine_steps = IntColumn()
        self._queue_at = array("i")                  # (waiting, running) as identities, stored
        self._queues = IntColumn()                   # only at the records where they change
        self._none_hash: list[bytes] = []
        self._external: list = []
        self._tier: list = []
        self._reset_ok: dict[int, bool] = {}
        self._teaching: set[int] = set()
        self._stats = Columns(Stats)
        self._metrics = Columns(VllmMetrics)         # vLLM's metrics, per record
        # requests: each identity's versions (rows of _W ints) from its first record on, the
        # words and block-table lists they name, and the epochs they arrived in
        self._versions: list[array] = []
        self._first = array("i")
        self._words: list[str | None] = [None]
        self._word: dict[str | None, int] = {None: 0}
        self._tables: list = []
        self._epochs: list[_Epoch] = []
        # the miss explainer's splits of each identity, kept when they change (rarely: at an
        # admission), in columns: the latest (the record it was set at, -1: none yet; the
        # prompt_split; the resumed_split), and the ones before it (record, prompt, resumed) of
        # the few identities whose splits changed again
        self._split_at = array("i")
        self._prompt_split: list = []
        self._resumed_split: list = []
        self._earlier_splits: dict[int, list[tuple]] = {}
        # keyframes
        self._keyframe_at: list[int] = []
        self._keyframes: list = []
        self._since_keyframe = 0
        self._keyframe_cost = (max(4096, 2 * self.num_gpu_blocks) if keyframe_cost is None
                               else keyframe_cost)
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
        return {k: v for k, v in self.__dict__.items() if k not in ("_cache", "_lock")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _cache=OrderedDict(), _lock=threading.RLock())

    # -- recording ------------------------------------------------------------------------
    def record(self, engine: Engine, step: Event | None, result: StepResult | None) -> None:
        """Record the engine's state after ``step`` (None: the start), and what it did."""
        records = tuple(result.ops) if result else ()
        engine_steps = tuple(result.engine_steps) if result else ()
        index = len(self._steps)
        full = step is None or step.kind in FULL_STATE_EVENTS
        touched = None if full else list(dict.fromkeys((
            *(op.request_id for op in records if op.kind in REQUEST_OPS),
            *(r for es in engine_steps for r in (*(s.request_id for s in es.scheduled),
                                                 *es.preempted, *es.finished,
                                                 *(r for r, _ in es.sampled))))))
        cap = engine.capture(touched, pool=full)               # None: every request
        ident = {rid: self.log.identity(v) for rid, v in cap.requests.items()}
        first_hash = len(self.log.hashes)
        packed = self.log.pack(records, ident)
        before = None if full or not self.check else (self._step(index - 1), cap.requests)

        # requests
        if full:
            self._epochs.append(_Epoch(index))
        epoch = self._epochs[-1]
        for rid, v in cap.requests.items():
            i = ident[rid]
            pos = epoch.by_rid.get(rid)
            if pos is None or epoch.order[pos] != i:
                epoch.by_rid[rid] = len(epoch.order)
                epoch.order.append(i)
                epoch.arrivals.append(index)
            self._add_version(i, index, v)
        self._dirty.append_run(list(ident.values()))

        # the pool
        if full:
            self._live = Mirror.from_state(self.log, self._explicit, cap)
        else:
            self._live.replay(packed)
        if self.check:
            self._check_live(engine)

        # the rest, in columns
        self._steps.append(step)
        self._ops.append_run(packed)
        self._num_ops.append(len(records))
        self._events.append_run(self._events_log.pack(result.events, records, ident, first_hash)
                                if result else ())
        self._engine_steps.append_run(_pack_engine_steps(engine_steps, ident))
        order, pos = epoch.order, epoch.by_rid
        queues = [len(cap.waiting), *(order[pos[r]] for r in (*cap.waiting, *cap.running))]
        if not self._queue_at or queues != list(self._queues.values(len(self._queue_at) - 1)):
            self._queue_at.append(index)
            self._queues.append_run(queues)
        last = self._none_hash[-1] if self._none_hash else None
        self._none_hash.append(last if last == cap.none_hash else cap.none_hash)
        self._external.append(cap.external)
        tier = cap.tier
        if tier is not None:
            last = self._tier[-1] if self._tier else None
            tier = dataclasses.replace(
                tier, contents=(last.contents if last is not None and last.contents == tier.contents
                                else tier.contents),      # an unchanged tier is kept once
                steps=tuple(result.tier_steps) if result is not None else ())
        self._tier.append(tier)
        if result is not None and result.reset_ok is not None:
            self._reset_ok[index] = result.reset_ok
        if result is not None and result.teaching_only:
            self._teaching.add(index)
        self._stats.append(cap.stats)
        self._metrics.append(cap.vllm_metrics)
        for b, summary in (result.payloads.items() if result is not None else ()):
            self._payloads.setdefault(b, []).append((index, summary))

        self._since_keyframe += _ops_cost(records) + len(ident)
        if full or self._since_keyframe > self._keyframe_cost:
            self._keyframe_at.append(index)
            self._keyframes.append(self._live.keyframe())
            self._since_keyframe = 0
        if before is not None:
            self._check_frames(index, *before)

    def _code(self, word: str | None) -> int:
        c = self._word.get(word)
        if c is None:
            c = self._word[word] = len(self._words)
            self._words.append(word)
        return c

    def _add_version(self, i: int, index: int, v: RequestView) -> None:
        if i == len(self._versions):
            self._versions.append(array("H"))
            self._first.append(index)
            self._split_at.append(-1)
            self._prompt_split.append(None)
            self._resumed_split.append(None)
        rows = self._versions[i]
        table = 0
        if v.table is not None:         # the engine's list: the same one as last time, or a new
            table = rows[-2] if rows else 0
            if not table or self._tables[table - 1] is not v.table:
                self._tables.append(v.table)
                table = len(self._tables)
        if v.prompt_split != self._prompt_split[i] or v.resumed_split != self._resumed_split[i]:
            if self._split_at[i] >= 0:
                self._earlier_splits.setdefault(i, []).append(
                    (self._split_at[i], self._prompt_split[i], self._resumed_split[i]))
            self._split_at[i] = index
            self._prompt_split[i], self._resumed_split[i] = v.prompt_split, v.resumed_split
        row = [index - self._first[i], *_changing(v), table, v.num_blocks]
        row[1], row[7] = self._code(row[1]), self._code(row[7])    # status, finish_reason
        self._versions[i] = grow(rows, row)

    def request_view(self, i: int, index: int) -> RequestView:
        """Request identity ``i`` as it was after step ``index``."""
        rows, at = self._versions[i], index - self._first[i]
        k = bisect.bisect_right(range(len(rows) // _W), at, key=lambda k: rows[k * _W]) - 1
        row = rows[k * _W + 1:(k + 1) * _W]
        values = dict(zip(CHANGING, row))
        values["status"], values["finish_reason"] = self._words[row[0]], self._words[row[6]]
        splits = [] if self._split_at[i] < 0 else [
            *self._earlier_splits.get(i, ()),
            (self._split_at[i], self._prompt_split[i], self._resumed_split[i])]
        j = bisect.bisect_right(splits, index, key=lambda e: e[0]) - 1
        prompt, resumed = splits[j][1:] if j >= 0 else (None, None)
        return dataclasses.replace(
            self.log.views[i], **values, table=self._tables[row[-2] - 1] if row[-2] else None,
            num_blocks=row[-1], prompt_split=prompt, resumed_split=resumed)

    def _check_live(self, engine: Engine) -> None:
        """The recording mirror against the engine (``check``): a replay that drifted from what
        the engine did would show a false state."""
        engine_pool = engine.capture((), pool=True)
        for name, got in self._live.pool().items():
            want = getattr(engine_pool, name)
            want = tuple(map(tuple, want)) if name == "block_tokens" else want
            assert got == want, f"mirror: {name} drifted"

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

    # -- access ---------------------------------------------------------------------------
    def step(self, index: int, frame: int | None = None) -> Step:
        """The state after event ``index``, or (``frame`` k) after its op k (clamped to the
        event's ops; an event without ops has one frame: the event itself)."""
        if not 0 <= index < len(self._steps):
            raise IndexError(f"step {index} is outside 0..{len(self._steps) - 1}")
        if frame is None:
            return self._step(index)
        frames = self.frames(index)
        if frames:
            return frames[max(0, min(frame, len(frames) - 1))]
        return dataclasses.replace(self._step(index), frame=0, before=partial(self._step, index))

    def _step(self, index: int) -> Step:
        with self._lock:  # built-in timelines (and this cache) are shared by every session
            s = self._cache.get(index)
            if s is None:
                s = self._cache[index] = self._serve(index, self._mirror_from(index))
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
            self._cache.move_to_end(index)
            return s

    def _mirror_from(self, index: int, cls: type[Mirror] = Mirror) -> Mirror:
        """The pool after step ``index``, as a ``cls`` (Mirror or FrameState): from the nearest
        keyframe, or from a step served lately if one lies between it and ``index``."""
        k = bisect.bisect_right(self._keyframe_at, index) - 1
        base = max((i for i in self._cache if self._keyframe_at[k] <= i <= index), default=None)
        if base is not None:
            m = self._cache[base].mirror.copy(cls)
        else:
            base, m = self._keyframe_at[k], cls(self.log, self._explicit, self._keyframes[k])
        CODEC.replayer(Mirror)(m, self._ops.data, self._ops.starts[base + 1],
                               self._ops.starts[index + 1])                  # the pool only
        return m

    def _queues_at(self, index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        q = self._queues.values(bisect.bisect_right(self._queue_at, index) - 1)
        rid = self.log.rid
        return tuple(map(rid, q[1:1 + q[0]])), tuple(map(rid, q[1 + q[0]:]))

    def _serve(self, index: int, m: Mirror) -> Step:
        waiting, running = self._queues_at(index)
        return Step(
            index=index, num_frames=self._num_ops[index], event=self._steps[index],
            start_note=self._start_note if index == 0 else None,
            start_caption=self._start_caption if index == 0 else None,
            **m.pool(frozen=True), requests=RequestsAt(self, index),
            waiting=waiting, running=running, ops=self.step_ops(index),
            kv_events=tuple(e if isinstance(e, dict) else e.to_dict()
                            for e in self._events_log.unpack(self._events.data,
                                                             *self._events.run(index))),
            engine_steps=_unpack_engine_steps(self._engine_steps.values(index), self.log.rid,
                                              self._budget), stats=self.step_stats(index),
            vllm_metrics=self.step_vllm_metrics(index),
            tier=self._tier[index], external=self._external[index],
            none_hash=self._none_hash[index], reset_ok=self._reset_ok.get(index),
            teaching_only=index in self._teaching,
            before=partial(self._step, index - 1) if index > 0 else None, mirror=m)

    def __getitem__(self, index: int) -> Step:
        return self.step(index)

    def payload(self, block_id: int, index: int):
        """The PayloadSummary of ``block_id``'s K/V as of step ``index`` (None if never written or
        no payload history was kept)."""
        history = self._payloads.get(block_id, ())
        k = bisect.bisect_right(history, index, key=lambda e: e[0]) - 1
        return history[k][1] if k >= 0 else None

    def step_of(self, index: int) -> Event | None:
        return self._steps[index]

    def step_ops(self, index: int, only: Collection[str] | None = None) -> tuple:
        """The op records of step ``index`` (decoded from the log; no materialization); with
        ``only``, those of these kinds (the others are not decoded: a step of 10,000 engine steps
        may hold 10,000 lookups of 4,000 blocks each)."""
        return self.log.unpack(self._ops.data, *self._ops.run(index), only)

    def step_num_ops(self, index: int) -> int:
        return self._num_ops[index]

    def step_requests(self, index: int) -> Mapping[str, RequestView]:
        """The requests step ``index`` touched, as they were after it (every request a step's
        ops name is among them; cheap: no materialization)."""
        return {self.log.rid(i): self.request_view(i, index) for i in self._dirty.values(index)}

    def step_stats(self, index: int) -> Stats:
        return self._stats[index]

    def step_vllm_metrics(self, index: int) -> VllmMetrics:
        return self._metrics[index]

    def frames(self, index: int) -> Frames:
        """The op frames inside event ``index``: a Step after each op. A lazy sequence: a frame
        is replayed when it is asked for, so an event of thousands of ops over a big pool costs
        only the frames looked at."""
        start, end = self._ops.run(index) if index > 0 else (0, 0)
        return Frames(self._step(index), list(CODEC.walk(self._ops.data, start, end, self.log)),
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
        return len(self._keyframe_at)


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
        k = k + len(self._records) if k < 0 else k
        if not 0 <= k < len(self._records):
            raise IndexError(f"frame {k} is outside 0..{len(self._records) - 1}")
        with self._lock:
            frame = self._recent.get(k)
            if frame is None:
                frame = self._recent[k] = self._build(k)
                if len(self._recent) > 8:
                    self._recent.popitem(last=False)
            return frame

    def _build(self, k: int) -> Step:
        if self._state is None or k < self._at:
            self._state, self._at = self._start(), -1
            self._state.ahead = [op for _, op in self._records]
        while self._at < k:
            self._at += 1
            pos, op = self._records[self._at]
            if op.effect == ("replace",):      # rewind/restart: the whole state is replaced
                self._state = self._start(after=True)
            else:
                self._state.at = self._at
                self._state.replay(self._packed, pos, limit=1)
        f, event = self._state, self._event
        return dataclasses.replace(
            event, frame=k, op=self._records[k][1], **f.pool(), requests=f.requests(),
            waiting=tuple(f.waiting), running=tuple(f.running),
            before=partial(self.__getitem__, k - 1) if k > 0 else event.before, mirror=None)


def _row(v: RequestView) -> tuple:
    """What an op frame's request view shows of a request (every group's table, several)."""
    return (v.block_ids, v.block_tables and v.block_tables.tables, *_changing(v))
