"""A mutable copy of the observable pool state, onto which the timeline replays op records.

Why a mirror: the timeline does not keep the pool after every step (a 16,384-block pool is ~100
KB a copy; 100,000 steps of it would not fit). It keeps a *keyframe* now and then (a compact copy
of this state) and the packed ops between keyframes; a step is served by copying the nearest
keyframe into a mirror and replaying the ops since (``sim.oplog``), O(1) per block per op. The
ops say what happened, so the mirror decides nothing: it implements the verbs that the op
records' ``effect`` declarations name (``take``, ``touch``, ``cache``, ``evict``, ``free``,
``to_head``, ``to_tail``, ``reset``, ``write``, ``load``) and nothing else. :class:`FrameState`
adds the request verbs, for the op frames of one event.

    keyframe k ──copy──> Mirror ──replay the ops of steps k+1 .. i──> the pool after step i

The free queue is kept as it was (``base``: the keyframe's, not copied) less the blocks that have
left it since (``gone``), after ``head`` (the blocks freed to the head since, last first) and
before ``tail`` (a dict of those freed to the tail since, in order): a jump builds no queue until
the step is read out (in C). Block tokens are kept by provenance rather than as
tuples: block b holds ``tsrc[b]``'s tokens ``tstart[b] .. tstart[b] + tlen[b]``, where a source
``s >= 0`` is request identity s's token list (a request only ever writes the blocks it owns, at
their positions) and ``s < 0`` an explicit tuple (loaded blocks, and whatever does not fit the
rule). So a write is three integer stores, and a keyframe a few integer arrays (the per-block ones
zlib-compressed: mostly runs of small values, a tenth of their size; a jump decompresses one
keyframe). The recording mirror keeps its explicit tuples in the timeline's list
(``explicit[-1 - s]``, which keyframes refer to); a mirror serving a step keeps new ones in its own
``local`` list (sources from ``-LOCAL`` down), so serving never grows what the timeline holds.
"""
from __future__ import annotations

import dataclasses
import zlib
from array import array
from collections import ChainMap, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import filterfalse
from operator import itemgetter

from blockviz.core.ops import op_request
from blockviz.sim.oplog import CODEC, OpLog, grow
from blockviz.sim.step import CHANGING, BlockTables, RequestView


def narrow(values, signed: bool = False) -> array:
    """Ints in an array as narrow as they fit (non-negative ones unless ``signed``)."""
    return grow(array("b" if signed else "B"), values)


def squeeze(values, signed: bool = False) -> tuple[str, bytes]:
    """Ints, narrowed and zlib-compressed: (typecode, bytes); ``unsqueeze`` reads them back."""
    a = narrow(values, signed)
    return a.typecode, zlib.compress(a, 1)


def unsqueeze(packed: tuple[str, bytes]) -> list[int]:
    return array(packed[0], zlib.decompress(packed[1])).tolist()


@dataclass(frozen=True)
class Keyframe:
    """A mirror, compact: what a keyframe of the timeline stores (block hashes are the table's).
    The per-block ints are squeezed (``squeeze``); the queue, a permutation, does not compress."""
    ref: tuple[str, bytes]
    tsrc: tuple[str, bytes]
    tstart: tuple[str, bytes]
    tlen: tuple[str, bytes]
    queue: array
    table: tuple
    shared: tuple = ()      # the table's entries of more than one block (rare: set in a loop)


LOCAL = 1 << 30   # sources -LOCAL - k: the k-th tuple of a serving mirror's own list


class Mirror:
    __slots__ = ("n", "ref", "hash", "tsrc", "tstart", "tlen", "base", "gone", "tail", "head",
                 "table", "log",
                 "explicit", "local")

    def __init__(self, log: OpLog, explicit: list[tuple], kf: Keyframe | None = None,
                 serving: bool = True) -> None:
        self.log, self.explicit = log, explicit
        self.local: list[tuple] | None = [] if serving else None
        if kf is None:
            return
        self.ref, self.tsrc, self.tstart, self.tlen = map(unsqueeze, (kf.ref, kf.tsrc, kf.tstart,
                                                                      kf.tlen))
        n = self.n = len(self.ref)
        self.base, self.gone, self.tail, self.head = kf.queue, set(), {}, []
        self.hash = hash_ = [None] * n
        table, keys = kf.table, list(map(itemgetter(0), kf.table))
        # one block a hash (nearly always): set them all in C; the few shared hashes in a loop
        deque(map(hash_.__setitem__, map(itemgetter(0), map(itemgetter(1), table)), keys), maxlen=0)
        for h, ids in kf.shared:
            for b in ids:
                hash_[b] = h
        self.table = dict(zip(keys, table))

    @classmethod
    def from_state(cls, log: OpLog, explicit: list[tuple], s) -> Mirror:
        """The recording mirror, from plain state (the engine's capture ``s``, a Step): its block
        tokens are kept as explicit sources."""
        m = cls(log, explicit, serving=False)
        n = m.n = len(s.ref_cnt)
        m.ref, m.hash = list(s.ref_cnt), list(s.block_hash)
        m.tsrc, m.tstart, m.tlen = [-1] * n, [0] * n, [0] * n
        for b, toks in enumerate(s.block_tokens):
            if toks:
                m.tsrc[b], m.tlen[b] = m.token_source(tuple(toks)), len(toks)
        m.base, m.gone, m.tail, m.head = tuple(s.free_queue), set(), {}, []
        m.table = {h: (h, tuple(ids)) for h, ids in s.hash_table}
        return m

    def keyframe(self) -> Keyframe:
        """The recording mirror, compact (its explicit tuples are the timeline's shared list)."""
        return Keyframe(ref=squeeze(self.ref), tsrc=squeeze(self.tsrc, signed=True),
                        tstart=squeeze(self.tstart), tlen=squeeze(self.tlen),
                        queue=narrow(self.queue()), table=(table := tuple(self.table.values())),
                        shared=tuple(e for e in table if len(e[1]) > 1))

    def copy(self, cls: type[Mirror] | None = None) -> Mirror:
        """A serving copy, of class ``cls`` (default: this one's)."""
        m = (cls or type(self))(self.log, self.explicit)
        m.local = list(self.local or ())
        m.n, m.ref, m.hash, m.tsrc, m.tstart, m.tlen = (self.n, list(self.ref), list(self.hash),
                                                       list(self.tsrc), list(self.tstart),
                                                       list(self.tlen))
        m.base, m.gone, m.tail, m.head = self.queue(), set(), {}, []
        m.table = dict(self.table)
        return m

    def queue(self) -> tuple[int, ...]:
        """The free queue, head first."""
        base = filterfalse(self.gone.__contains__, self.base) if self.gone else self.base
        return (*reversed(self.head), *base, *self.tail)

    def token_source(self, toks: tuple) -> int:
        """A new explicit source holding ``toks``."""
        if self.local is not None:
            self.local.append(toks)
            return -LOCAL - len(self.local) + 1    # local[-LOCAL - s] is toks
        self.explicit.append(toks)
        return -len(self.explicit)                 # explicit[-1 - s] is toks

    def _source(self, s: int):
        if s >= 0:
            return self.log.tokens(s)
        return self.local[-LOCAL - s] if s <= -LOCAL else self.explicit[-1 - s]

    def tokens_of(self, b: int) -> tuple[int, ...]:
        start = self.tstart[b]
        return tuple(self._source(self.tsrc[b])[start:start + self.tlen[b]]) if self.tlen[b] else ()

    def pool(self, frozen: bool = False) -> dict:
        """The pool as a Step's fields. ``frozen``: this mirror will never change again (a served
        step's): its tokens are read from it directly and its free queue is kept as a tuple
        (lighter) from now on."""
        queue = self.queue()
        if frozen:
            self.base, self.gone, self.tail, self.head = queue, set(), {}, []
        return dict(ref_cnt=tuple(self.ref), block_hash=tuple(self.hash),
                    block_tokens=BlockTokens(self, share=frozen), free_queue=queue,
                    hash_table=tuple(self.table.values()))

    def replay(self, a, p: int = 0, n: int | None = None, limit: int = -1) -> int:
        """Apply the packed records of ``a[p:n]`` (at most ``limit`` of them); the position after
        the last one applied."""
        return CODEC.replayer(type(self))(self, a, p, n, limit)

    # -- the verbs (core.ops effects) ---------------------------------------------------------
    def take(self, ids, group: int = 0) -> None:
        ref = self.ref
        for b in ids:
            self._dequeue(b)
            ref[b] = 1

    def _dequeue(self, b: int) -> None:
        """Block b leaves the free queue, from wherever it is (see ``queue``)."""
        tail, head = self.tail, self.head
        if b in tail:
            del tail[b]
        elif head and head[-1] == b:
            head.pop()
        elif head and b in head:
            head.remove(b)
        else:
            self.gone.add(b)

    def touch(self, ids, removed_from_queue, group: int = 0) -> None:
        ref = self.ref
        for b in removed_from_queue:
            self._dequeue(b)
        for b in ids:
            ref[b] += 1

    def cache(self, request_id: str, ids, hashes) -> None:
        table, hash_ = self.table, self.hash
        for b, h in zip(ids, hashes):
            hash_[b] = h
            pair = table.get(h)
            if pair is None:
                table[h] = (h, (b,))
            elif b not in pair[1]:
                table[h] = (h, pair[1] + (b,))

    def evict(self, b: int, h: bytes) -> None:
        # BlockHashToBlockMap's order: evicting a block pops its hash, which goes back last if
        # other blocks still carry it.
        pair = self.table.get(h)
        if pair is not None and b in pair[1]:
            del self.table[h]
            rest = tuple(i for i in pair[1] if i != b)
            if rest:
                self.table[h] = (h, rest)
        self.hash[b] = None

    def free(self, ids, group: int = 0) -> None:
        ref = self.ref
        for b in ids:
            ref[b] -= 1

    def to_head(self, ids) -> None:
        self.head += reversed(ids)       # (freed blocks: none of them is queued)

    def to_tail(self, ids) -> None:
        self.tail.update(dict.fromkeys(ids))

    def reset(self, ok: bool) -> None:
        if ok:
            self.table.clear()
            self.hash = [None] * self.n

    def write(self, b: int, offset: int, src: int, start: int, k: int) -> None:
        """Slots offset.. of block b now hold ``k`` tokens of source ``src`` from ``start``."""
        if offset == 0:
            self.tsrc[b], self.tstart[b], self.tlen[b] = src, start, k
        elif self.tsrc[b] == src and self.tstart[b] + offset == start and self.tlen[b] >= offset:
            self.tlen[b] = offset + k
        else:
            self.load(b, self.tokens_of(b)[:offset] + tuple(self._source(src)[start:start + k]))

    def load(self, b: int, token_ids) -> None:
        token_ids = tuple(token_ids)
        self.tsrc[b], self.tstart[b], self.tlen[b] = self.token_source(token_ids), 0, len(token_ids)


class _Req:
    """A request's state that ops change, followed op by op (see FrameState): ``tables`` holds
    its table of each KV-cache group (the first is the one ``block_ids`` shows)."""
    __slots__ = ("base", *CHANGING, "tables", "looked_up")

    def __init__(self, v: RequestView, groups: int = 1, **fresh) -> None:
        self.base = v
        for name in CHANGING:
            setattr(self, name, fresh.get(name, getattr(v, name)))
        bt = v.block_tables
        if "blocks" in fresh:
            self.tables = [list(fresh["blocks"]) for _ in range(groups)]
        elif bt is not None:
            self.tables = [list(t) for t in bt.tables]
        else:
            self.tables = [list(v.block_ids)] + [[] for _ in range(groups - 1)]
        self.looked_up = False

    def view(self) -> RequestView:
        bt, table = self.base.block_tables, tuple(self.tables[0])
        if len(self.tables) > 1 or bt is not None:
            table = BlockTables(tuple(map(tuple, self.tables)), bt.num_cached if bt else (),
                                bt.shared_prefix_boundary if bt else 0)
        return dataclasses.replace(self.base, **{name: getattr(self, name) for name in CHANGING},
                                   table=table, num_blocks=len(self.tables[0]))


class FrameState(Mirror):
    """A mirror that follows the requests too: the state of an op frame, where the blocks and the
    request panel must show the same moment.

    The engine's requests are recorded once per event; inside one they follow from the ops, so
    the request verbs below are the requests' half of the ops' effects, and a frame's block
    tables always hold exactly the blocks its ref counts count. Blocks that ``get_new_blocks``
    hands out or ``touch`` takes go into the table of the request being allocated (the next op
    that names a request names it: ``allocate_slots`` extends its table right after); a
    ``free`` empties the table it is the reverse of, and a request being finished is finished
    from its free on (vLLM marks it before freeing; a preempted one after); ``admit`` and
    ``schedule`` count the scheduled tokens as computed (vLLM's ``_update_after_schedule``). A
    request is copied from the event's starting requests when an op first touches it. The
    timeline's ``check`` verifies, at every event, that following its ops from the requests
    before it ends where the engine did.

    ``ahead`` (the event's records) and ``at`` (the index of the record being applied) are set
    by whoever replays, for the verbs that look at what comes next."""

    __slots__ = ("before", "reqs", "views", "dirty", "arrivals", "pending", "block_size",
                 "async_scheduling", "waiting", "running", "ahead", "at", "groups")

    def follow(self, before: Mapping[str, RequestView], arrivals: Mapping[str, RequestView],
               waiting: Sequence[str], running: Sequence[str], block_size: int,
               async_scheduling: bool, groups: int = 1) -> FrameState:
        """Start following the requests from ``before`` the event (with its queues);
        ``arrivals``: the views of the requests the event touched (an arriving one's fixed fields
        come from there); ``groups``: the KV-cache groups (a request has a table in each).
        Returns this state."""
        self.before, self.arrivals, self.groups = before, arrivals, groups
        self.reqs, self.views, self.dirty = {}, {}, set()
        self.pending = [[] for _ in range(groups)]   # blocks taken for the next request, per group
        self.block_size, self.async_scheduling = block_size, async_scheduling
        self.waiting, self.running = list(waiting), list(running)
        self.ahead, self.at = (), -1
        return self

    def requests(self) -> Mapping[str, RequestView]:
        """The requests as they are now, in arrival order (later ops do not change it)."""
        for rid in self.dirty:
            self.views[rid] = self.reqs[rid].view()
        self.dirty.clear()
        return ChainMap(dict(self.views), self.before)

    def _get(self, rid: str) -> _Req | None:
        r = self.reqs.get(rid)
        if r is None and rid in self.before:
            r = self.reqs[rid] = _Req(self.before[rid], self.groups)
        if r is not None:
            self.dirty.add(rid)
        return r

    def _assign(self, rid: str) -> _Req | None:
        r = self._get(rid)
        for table, pending in zip(r.tables if r is not None else (), self.pending):
            table += pending
            pending.clear()
        return r

    def _next(self):
        """The next record (after the one being applied) that names a request, or None."""
        ahead = self.ahead
        return next((ahead[j] for j in range(self.at + 1, len(ahead))
                     if op_request(ahead[j]) is not None), None)

    # -- the pool's verbs that move blocks into and out of block tables (of the op's group) ----
    def take(self, ids, group: int = 0) -> None:
        super().take(ids)
        self._allocated(ids, group)

    def touch(self, ids, removed_from_queue, group: int = 0) -> None:
        super().touch(ids, removed_from_queue)
        self._allocated(ids, group)

    def _allocated(self, ids, group: int) -> None:
        self.pending[group] += ids
        op = self._next()
        if op is not None:
            self._assign(op.request_id)

    def remove_skipped(self, request_id: str, indices, group: int = 0) -> None:
        """Slots of a table that left the attention window hold the null block (0)."""
        r = self._get(request_id)
        table = r.tables[group] if r is not None else []
        for i in indices if r is not None else ():
            if i < len(table):
                table[i] = 0
            else:                       # a hit's padding: the table starts with nulls
                table.append(0)

    def cache(self, request_id: str, ids, hashes) -> None:
        super().cache(request_id, ids, hashes)
        r = self._assign(request_id)
        if r is not None and r.status == "waiting_for_remote_kvs":
            # its load is done: vLLM caches the loaded blocks now and puts it back in line
            # (_update_waiting_for_remote_kv; a whole-prompt hit recomputes its last token)
            r.status = "preempted" if r.num_preemptions else "waiting"
            r.num_computed_tokens = min(r.num_computed_tokens, r.num_tokens - 1)

    def free(self, ids, group: int = 0) -> None:
        super().free(ids)
        ids = list(ids)
        if not ids:
            return
        # the table freed is a live request's (queued, or touched in this event); a request
        # whose async load outlived its abort is freed later, when the load is done. (A
        # window's frees of blocks that left it are no table's reverse: remove_skipped has
        # already put the null block in their slots.)
        for rids in ((*self.running, *self.waiting, *self.reqs), self.before):
            for rid in rids:
                r = self.reqs.get(rid)
                if r is not None:
                    blocks = r.tables[group]
                else:
                    bt = self.before[rid].block_tables
                    blocks = bt.tables[group] if bt is not None else self.before[rid].block_ids
                if blocks and blocks[-1] == ids[0] and [b for b in reversed(blocks) if b] == ids:
                    self._get(rid).tables[group] = []
                    op = self._next()
                    if op is not None and op.kind == "finish" and op.request_id == rid:
                        self.finish(rid, op.reason)
                    return

    # -- the requests' verbs ------------------------------------------------------------------
    def arrive(self, request_id: str) -> None:
        view = self.arrivals[request_id]
        self.reqs[request_id] = _Req(view, self.groups, status="waiting",
                                     num_tokens=view.num_prompt_tokens,
                                     num_computed_tokens=0, num_preemptions=0, local_hit_blocks=0,
                                     external_hit_blocks=0, finish_reason=None,
                                     num_output_placeholders=0, blocks=())
        self.views[request_id] = view        # its place in arrival order (the view comes later)
        self.dirty.add(request_id)
        self.waiting.append(request_id)

    def lookup(self, request_id: str) -> None:
        r = self._get(request_id)
        if r is not None:
            r.looked_up = True

    def admit(self, request_id: str, local: int, external: int, num_new: int) -> None:
        r = self._assign(request_id)
        if r is None:
            return
        if r.looked_up:
            bs = self.block_size
            r.local_hit_blocks = local // bs
            r.external_hit_blocks = -(-(local + external) // bs) - local // bs if external else 0
            computed = local + external
        else:                           # its async load is done (see cache)
            computed = min(r.num_computed_tokens, r.num_tokens - 1)
        r.looked_up = False
        if num_new == 0 and external:   # an async load: parked until the worker reports it
            r.status, r.num_computed_tokens = "waiting_for_remote_kvs", computed
            return
        r.status = "running"
        self._scheduled(r, computed, num_new)
        if request_id in self.waiting:
            self.waiting.remove(request_id)
        self.running.append(request_id)

    def schedule(self, request_id: str, num_new: int) -> None:
        r = self._assign(request_id)
        if r is not None:
            self._scheduled(r, r.num_computed_tokens, num_new)

    def _scheduled(self, r: _Req, computed: int, num_new: int) -> None:
        # vLLM's _update_after_schedule: the scheduled tokens count as computed; with async
        # scheduling a step that samples leaves a placeholder for its output
        samples = computed + num_new >= r.num_tokens + r.num_output_placeholders
        r.num_computed_tokens = computed + num_new
        if samples and self.async_scheduling:
            r.num_output_placeholders += 1

    def sample(self, request_id: str) -> None:
        r = self._get(request_id)
        if r is not None:
            r.num_tokens += 1
            r.num_output_placeholders -= 1 if r.num_output_placeholders else 0

    def preempt(self, request_id: str) -> None:
        r = self._get(request_id)
        if r is not None:
            r.status, r.num_computed_tokens, r.num_output_placeholders = "preempted", 0, 0
            r.num_preemptions += 1
            if request_id in self.running:
                self.running.remove(request_id)
            self.waiting.insert(0, request_id)

    def finish(self, request_id: str, reason: str) -> None:
        r = self._get(request_id)
        if r is not None:
            r.status, r.finish_reason = "finished", reason
            for queue in (self.waiting, self.running):
                if request_id in queue:
                    queue.remove(request_id)


class BlockTokens(Sequence):
    """Each block's tokens as of one state, made when asked for (a step over a big pool is
    served without building thousands of tuples; most are never looked at). Equal to any
    sequence of the same token tuples. It reads a copy of the mirror's provenance (or, ``share``,
    the mirror itself, which must then never change again)."""

    __slots__ = ("_m", "_memo")

    def __init__(self, m: Mirror, share: bool = False) -> None:
        if not share:       # integer arrays, not lists: the garbage collector has nothing to walk
            frozen = Mirror(m.log, m.explicit)
            frozen.local, frozen.n = m.local and list(m.local), m.n
            frozen.tsrc, frozen.tstart, frozen.tlen = (array("i", m.tsrc), narrow(m.tstart),
                                                       narrow(m.tlen))
            m = frozen
        self._m, self._memo = m, {}

    def __len__(self) -> int:
        return self._m.n

    def __getitem__(self, b):
        if isinstance(b, slice):
            return tuple(self[i] for i in range(*b.indices(len(self))))
        b = b + self._m.n if b < 0 else b
        if not 0 <= b < self._m.n:
            raise IndexError(b)
        t = self._memo.get(b)
        if t is None:
            t = self._memo[b] = self._m.tokens_of(b)
        return t

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(other) == len(self) and all(
            x == y for x, y in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def same(self, b: int, other) -> bool:
        """Block b holds the same tokens here and in ``other`` (cheap when both came from one
        timeline and b's provenance did not change)."""
        if isinstance(other, BlockTokens):
            a, c = self._m, other._m
            if (a.tsrc[b] == c.tsrc[b] > -LOCAL and a.tstart[b] == c.tstart[b]
                    and a.tlen[b] == c.tlen[b] and a.log is c.log):
                return True
        return self[b] == other[b]

    def __repr__(self) -> str:
        return f"BlockTokens({tuple(self)!r})"
