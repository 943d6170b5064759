"""A mutable copy of the observable pool state, onto which the timeline replays op records.

Why a mirror: the timeline does not keep the pool after every step (a 16,384-block pool is ~100
KB a copy; 100,000 steps of it would not fit). It keeps a *keyframe* now and then (a compact copy
of this state) and the packed ops between keyframes; a step is served by copying the nearest
keyframe into a mirror and replaying the ops since (``sim.oplog``), O(1) per block per op. The
ops say what happened, so the mirror decides nothing: it implements the verbs that the op
records' ``effect`` declarations name (``take``, ``touch``, ``cache``, ``evict``, ``free``,
``to_head``, ``to_tail``, ``reset``, ``write``, ``load``) and nothing else. :class:`FrameState`
adds the request verbs, for the op frames of one event.

Block tokens are kept by provenance rather than as tuples: block b holds ``tsrc[b]``'s tokens
``tstart[b] .. tstart[b] + tlen[b]``, where a source ``s >= 0`` is request identity s's token list
(a request only ever writes the blocks it owns, at their positions) and ``s < 0`` is the tuple
``explicit[-1 - s]`` (loaded blocks, and whatever does not fit the rule). So a write is three
integer stores, and a keyframe three integer arrays.

The mirror the timeline records with appends new explicit tuples to the timeline's shared list
(keyframes refer to them); a mirror built to serve a step keeps its own in ``local`` (sources
from ``-LOCAL`` down), so serving steps never grows what the timeline holds.

    keyframe k ──copy──> Mirror ──replay the ops of steps k+1 .. i──> the pool after step i
"""
from __future__ import annotations

import dataclasses
from array import array
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter

from blockviz.core import ops as O
from blockviz.sim import oplog as L
from blockviz.sim.views import BlockTables, RequestView


@dataclass(frozen=True)
class Keyframe:
    """A mirror, compact: what a keyframe of the timeline stores. Integers as narrow as they fit
    (the queue's links in both directions, 2 bytes each below 32,767 blocks: together the size
    one 4-byte array took); block hashes are the table's, rebuilt by C-level maps on a jump."""
    ref: array
    tsrc: array
    tstart: array
    tlen: array
    nxt: array
    prv: array
    table: tuple


def _narrow(values) -> array:
    return L.grow(array("H"), values)


def _links(values) -> array:
    """Queue links (-1: not in the queue), 2 bytes each while they fit."""
    try:
        return array("h", values)
    except OverflowError:
        return array("i", values)


LOCAL = 1 << 30   # sources -LOCAL - k: the k-th tuple of a serving mirror's own list


class Mirror:
    __slots__ = ("n", "ref", "hash", "tsrc", "tstart", "tlen", "nxt", "prv", "table", "reg",
                 "log", "explicit", "local")

    def __init__(self, reg: L.Registry, log: L.OpLog, explicit: list[tuple],
                 serving: bool = True) -> None:
        self.reg, self.log, self.explicit = reg, log, explicit
        self.local: list[tuple] | None = [] if serving else None
        self.n = 0

    # -- building -------------------------------------------------------------------------
    @classmethod
    def from_state(cls, reg, log, explicit, ref, hashes, tokens, queue, table) -> Mirror:
        """The recording mirror, from plain state (the engine's, at a full-state step): ``tokens``
        are tuples or lists, kept as explicit sources."""
        m = cls(reg, log, explicit, serving=False)
        n = m.n = len(ref)
        m.ref, m.hash = list(ref), list(hashes)
        m.tsrc, m.tstart, m.tlen = [-1] * n, [0] * n, [0] * n
        for b, toks in enumerate(tokens):
            if toks:
                m.tsrc[b], m.tlen[b] = m._explicit(tuple(toks)), len(toks)
        m._link(queue)
        m.table = {h: (h, tuple(ids)) for h, ids in table}
        return m

    @classmethod
    def from_keyframe(cls, reg, log, explicit, kf: Keyframe) -> Mirror:
        m = cls(reg, log, explicit)
        n = m.n = len(kf.ref)
        m.ref = kf.ref.tolist()
        m.tsrc, m.tstart, m.tlen = kf.tsrc.tolist(), kf.tstart.tolist(), kf.tlen.tolist()
        m.nxt, m.prv = kf.nxt.tolist(), kf.prv.tolist()
        m.hash = hash_ = [None] * n
        table = kf.table
        keys = list(map(itemgetter(0), table))
        idss = list(map(itemgetter(1), table))
        # one block a hash (nearly always): set them all in C; duplicates (rare) in a loop
        deque(map(hash_.__setitem__, map(itemgetter(0), idss), keys), maxlen=0)
        for i in [i for i, ln in enumerate(map(len, idss)) if ln > 1]:
            for b in idss[i]:
                hash_[b] = keys[i]
        m.table = dict(zip(keys, table))
        return m

    def keyframe(self) -> Keyframe:
        """The recording mirror, compact (its explicit tuples are the timeline's shared list)."""
        return Keyframe(ref=L.grow(array("B"), self.ref), tsrc=array("i", self.tsrc),
                        tstart=_narrow(self.tstart), tlen=_narrow(self.tlen),
                        nxt=_links(self.nxt), prv=_links(self.prv),
                        table=tuple(self.table.values()))

    def copy(self, cls: type[Mirror] | None = None) -> Mirror:
        """A serving copy, of class ``cls`` (default: this one's); its new explicit tuples, if
        any, stay its own."""
        m = (cls or type(self))(self.reg, self.log, self.explicit)
        if self.local:
            m.local = list(self.local)
        m.n = self.n
        m.ref, m.hash, m.tsrc, m.tstart, m.tlen = (list(self.ref), list(self.hash),
                                                   list(self.tsrc), list(self.tstart),
                                                   list(self.tlen))
        m.nxt, m.prv, m.table = list(self.nxt), list(self.prv), dict(self.table)
        return m

    def _link(self, queue) -> None:
        n = self.n
        self.nxt, self.prv = [-1] * (n + 2), [-1] * (n + 2)
        prev = n                                   # the head sentinel; n + 1 is the tail's
        for b in queue:
            self.nxt[prev], self.prv[b] = b, prev
            prev = b
        self.nxt[prev], self.prv[n + 1] = n + 1, prev

    def _explicit(self, toks: tuple) -> int:
        if self.local is not None:
            self.local.append(toks)
            return -LOCAL - len(self.local) + 1    # local[-LOCAL - s] is toks
        self.explicit.append(toks)
        return -len(self.explicit)                 # explicit[-1 - s] is toks

    def _source(self, s: int):
        if s >= 0:
            return self.reg.tokens(s)
        if s <= -LOCAL:
            return self.local[-LOCAL - s]
        return self.explicit[-1 - s]

    # -- reading --------------------------------------------------------------------------
    def tokens_of(self, b: int) -> tuple[int, ...]:
        k = self.tlen[b]
        if not k:
            return ()
        start = self.tstart[b]
        return tuple(self._source(self.tsrc[b])[start:start + k])

    def block_tokens(self, frozen: bool = False) -> BlockTokens:
        """Each block's tokens, read when asked for. ``frozen``: this mirror will never change
        again (a served snapshot's), so they read it directly instead of a copy."""
        return BlockTokens(self, share=frozen)

    def queue(self) -> tuple[int, ...]:
        out = []
        nxt, tail = self.nxt, self.n + 1
        b = nxt[self.n]
        while b != tail:
            out.append(b)
            b = nxt[b]
        return tuple(out)

    # -- the verbs (core.ops effects) ---------------------------------------------------------
    def take(self, ids, group: int = 0) -> None:
        for b in ids:
            self._unlink(b)
            self.ref[b] = 1

    def touch(self, ids, removed_from_queue, group: int = 0) -> None:
        for b in removed_from_queue:
            self._unlink(b)
        ref = self.ref
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
        table = self.table
        pair = table.get(h)
        if pair is not None and b in pair[1]:
            del table[h]
            rest = tuple(i for i in pair[1] if i != b)
            if rest:
                table[h] = (h, rest)
        self.hash[b] = None

    def free(self, ids, group: int = 0) -> None:
        ref = self.ref
        for b in ids:
            ref[b] -= 1

    def to_head(self, ids) -> None:
        self._insert_after(self.n, ids)

    def to_tail(self, ids) -> None:
        self._insert_after(self.prv[self.n + 1], ids)

    def reset(self, ok: bool) -> None:
        if ok:
            self.table.clear()
            self.hash = [None] * self.n

    def write(self, b: int, offset: int, src: int, start: int, k: int) -> None:
        """Slots offset.. of block b now hold ``k`` tokens of source ``src`` from ``start``."""
        if offset == 0 or (self.tsrc[b] == src and self.tstart[b] + offset == start
                           and self.tlen[b] >= offset):
            if offset == 0:
                self.tsrc[b], self.tstart[b] = src, start
            self.tlen[b] = offset + k
            return
        content = self.tokens_of(b)[:offset] + tuple(self._source(src)[start:start + k])
        self.tsrc[b], self.tstart[b], self.tlen[b] = self._explicit(content), 0, len(content)

    def load(self, b: int, token_ids) -> None:
        token_ids = tuple(token_ids)
        self.tsrc[b], self.tstart[b], self.tlen[b] = self._explicit(token_ids), 0, len(token_ids)

    def token_source(self, toks: tuple) -> int:
        return self._explicit(toks)

    # -- the queue's links --------------------------------------------------------------------
    def _unlink(self, b: int) -> None:
        nxt, prv = self.nxt, self.prv
        p, q = prv[b], nxt[b]
        nxt[p], prv[q] = q, p
        prv[b] = nxt[b] = -1

    def _insert_after(self, after: int, ids) -> None:
        nxt, prv = self.nxt, self.prv
        end = nxt[after]
        prev = after
        for b in ids:
            nxt[prev], prv[b] = b, prev
            prev = b
        nxt[prev], prv[end] = end, prev

    # -- applying -------------------------------------------------------------------------------
    def replay(self, a, p: int = 0, n: int | None = None, limit: int = -1) -> int:
        """Apply the packed records of ``a[p:n]`` (at most ``limit`` of them); the position after
        the last one applied."""
        return L.CODEC.replayer(type(self))(self, a, p, n, limit)

    def apply(self, op) -> None:
        """Apply one op record (a kind the log keeps as it is)."""
        L.apply(self, op)


class _Req:
    """A request's state that ops change, followed op by op (see FrameState). With several
    KV-cache groups ``tables`` holds every group's table (``blocks`` is group 0's)."""
    __slots__ = ("base", "status", "num_tokens", "num_computed_tokens", "num_preemptions",
                 "local_hit_blocks", "external_hit_blocks", "finish_reason",
                 "num_output_placeholders", "tables", "looked_up")
    _CHANGING = __slots__[1:-2]

    def __init__(self, v: RequestView, groups: int = 1, **fresh) -> None:
        self.base = v
        for name in self._CHANGING:
            setattr(self, name, fresh.get(name, getattr(v, name)))
        bt = v.block_tables
        if "blocks" in fresh:
            self.tables = [list(fresh["blocks"]) for _ in range(groups)]
        elif bt is not None:
            self.tables = [list(t) for t in bt.tables]
        else:
            self.tables = [list(v.block_ids)] + [[] for _ in range(groups - 1)]
        self.looked_up = False

    @property
    def blocks(self) -> list[int]:
        return self.tables[0]

    @blocks.setter
    def blocks(self, value: list[int]) -> None:
        self.tables[0] = value

    def view(self) -> RequestView:
        if len(self.tables) > 1 or self.base.block_tables is not None:
            bt = self.base.block_tables
            table = BlockTables(tuple(tuple(t) for t in self.tables),
                                bt.num_cached if bt is not None else (),
                                bt.shared_prefix_boundary if bt is not None else 0)
        else:
            table = tuple(self.blocks)
        return dataclasses.replace(
            self.base, **{name: getattr(self, name) for name in self._CHANGING},
            table=table, num_blocks=len(self.blocks))


class _Overlay(Mapping):
    """The requests before an event, with those its ops changed so far over them."""

    def __init__(self, before: Mapping[str, RequestView], over: dict[str, RequestView],
                 arrived: list[str]) -> None:
        self._before, self._over, self._arrived = before, over, arrived

    def __getitem__(self, rid: str) -> RequestView:
        v = self._over.get(rid)
        return self._before[rid] if v is None else v

    def __iter__(self):
        yield from self._before
        yield from self._arrived

    def __len__(self) -> int:
        return len(self._before) + len(self._arrived)

    def __contains__(self, rid: object) -> bool:
        return rid in self._over or rid in self._before


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
    by whoever replays, for the two verbs that look at what comes next."""

    __slots__ = ("before", "reqs", "views", "dirty", "arrived", "arrivals", "pending",
                 "block_size", "async_scheduling", "waiting", "running", "ahead", "at", "groups")

    def follow(self, before: Mapping[str, RequestView], arrivals: Mapping[str, RequestView],
               waiting: Sequence[str], running: Sequence[str], block_size: int,
               async_scheduling: bool, groups: int = 1) -> FrameState:
        """Start following the requests from ``before`` the event (with its queues);
        ``arrivals``: the views of the requests the event touched (an arriving one's fixed fields
        come from there); ``groups``: the KV-cache groups (each request has a table per group).
        Returns this state."""
        self.before, self.arrivals, self.groups = before, arrivals, groups
        self.reqs, self.views, self.dirty, self.arrived = {}, {}, set(), []
        self.pending = [[] for _ in range(groups)]     # blocks taken for the next request, per group
        self.block_size, self.async_scheduling = block_size, async_scheduling
        self.waiting, self.running = list(waiting), list(running)
        self.ahead, self.at = (), -1
        return self

    def requests(self) -> Mapping[str, RequestView]:
        """The requests as they are now (a mapping of its own: later ops do not change it)."""
        for rid in self.dirty:
            self.views[rid] = self.reqs[rid].view()
        self.dirty.clear()
        return _Overlay(self.before, dict(self.views), list(self.arrived))

    def _get(self, rid: str) -> _Req | None:
        r = self.reqs.get(rid)
        if r is None and rid in self.before:
            r = self.reqs[rid] = _Req(self.before[rid], self.groups)
        if r is not None:
            self.dirty.add(rid)
        return r

    def _assign(self, rid: str) -> _Req | None:
        r = self._get(rid)
        if r is not None:
            for table, pending in zip(r.tables, self.pending):
                if pending:
                    table += pending
                    pending.clear()
        return r

    def _next(self):
        """The next record (after the one being applied) that names a request, or None."""
        ahead = self.ahead
        for j in range(self.at + 1, len(ahead)):
            if O.op_request(ahead[j]) is not None:
                return ahead[j]
        return None

    # -- the pool's verbs that move blocks into and out of block tables ----------------------
    # (a hybrid model's: into and out of the table of the group the op names)
    def take(self, ids, group: int = 0) -> None:
        super().take(ids)
        self._allocated(ids, group)

    def touch(self, ids, removed_from_queue, group: int = 0) -> None:
        super().touch(ids, removed_from_queue)
        self._allocated(ids, group)

    def remove_skipped(self, request_id: str, indices, group: int = 0) -> None:
        """Slots of a table that left the attention window hold the null block (0)."""
        r = self._get(request_id)
        if r is not None:
            table = r.tables[group]
            for i in indices:
                if i < len(table):
                    table[i] = 0
                else:                       # a hit's padding: the table starts with nulls
                    table.append(0)

    def _allocated(self, ids, group: int = 0) -> None:
        self.pending[group] += ids
        op = self._next()
        if op is not None:
            self._assign(op.request_id)

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
        self.reqs[request_id] = _Req(view, self.groups, status="waiting", num_tokens=view.num_prompt_tokens,
                                     num_computed_tokens=0, num_preemptions=0, local_hit_blocks=0,
                                     external_hit_blocks=0, finish_reason=None,
                                     num_output_placeholders=0, blocks=())
        self.dirty.add(request_id)
        self.arrived.append(request_id)
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
            if r.num_output_placeholders:
                r.num_output_placeholders -= 1

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
    sequence of the same token tuples; its provenance is its own copy (unless the mirror is
    shared because it never changes again), so the mirror it came from may go on changing."""

    __slots__ = ("_mirror", "_memo")

    def __init__(self, m: Mirror, share: bool = False) -> None:
        if share:
            self._mirror, self._memo = m, {}
            return
        # integer arrays, not lists: the garbage collector has nothing to walk in them
        frozen = Mirror(m.reg, m.log, m.explicit)
        frozen.local, frozen.n = m.local and list(m.local), m.n
        frozen.tsrc, frozen.tstart, frozen.tlen = (array("i", m.tsrc), _narrow(m.tstart),
                                                   _narrow(m.tlen))
        self._mirror, self._memo = frozen, {}

    def __len__(self) -> int:
        return self._mirror.n

    def __getitem__(self, b):
        if isinstance(b, slice):
            return tuple(self[i] for i in range(*b.indices(len(self))))
        if b < 0:
            b += self._mirror.n
        if not 0 <= b < self._mirror.n:
            raise IndexError(b)
        t = self._memo.get(b)
        if t is None:
            t = self._memo[b] = self._mirror.tokens_of(b)
        return t

    def __iter__(self):
        return map(self.__getitem__, range(self._mirror.n))

    def __eq__(self, other) -> bool:
        if isinstance(other, BlockTokens):
            a, c = self._mirror, other._mirror
            if a.tsrc == c.tsrc and a.tstart == c.tstart and a.tlen == c.tlen and (
                    a.reg is c.reg and a.local == c.local):
                return True
        return isinstance(other, Sequence) and len(other) == len(self) and all(
            x == y for x, y in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def same(self, b: int, other) -> bool:
        """Block b holds the same tokens here and in ``other`` (cheap when both came from one
        timeline and b's provenance did not change)."""
        if isinstance(other, BlockTokens):
            a, c = self._mirror, other._mirror
            if (a.tsrc[b] == c.tsrc[b] and a.tstart[b] == c.tstart[b] and a.tlen[b] == c.tlen[b]
                    and a.reg is c.reg and (a.tsrc[b] > -LOCAL)):
                return True
        return self[b] == other[b]

    def __repr__(self) -> str:
        return f"BlockTokens({tuple(self)!r})"
