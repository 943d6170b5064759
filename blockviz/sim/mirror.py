"""A mutable copy of the observable pool state that op records replay onto, O(1) per block.

The timeline keeps one up to date as it records (its keyframes are compact copies of it) and
builds one from the nearest keyframe to serve a step. Ops are applied packed (``apply_packed``,
see sim.oplog) or as records (``apply_record``, for the kinds kept as they are); both go through
the same primitives below, so there is one definition of what each op does to the state.

Block tokens are kept by provenance rather than as tuples: block b holds ``tsrc[b]``'s tokens
``tstart[b] .. tstart[b] + tlen[b]``, where a source ``s >= 0`` is request identity s's token list
(a request only ever writes the blocks it owns, at their positions) and ``s < 0`` is the tuple
``explicit[-1 - s]`` (loaded blocks, and whatever does not fit the rule). So a write is three
integer stores, and a keyframe three integer arrays.

The mirror the timeline records with appends new explicit tuples to the timeline's shared list
(keyframes refer to them); a mirror built to serve a step keeps its own in ``local`` (sources
from ``-LOCAL`` down), so serving steps never grows what the timeline holds.
"""
from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter

from blockviz.sim import oplog as L


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
    table: tuple
    prv: array = field(default_factory=lambda: array("h"))
    # a serving mirror's own explicit token tuples (sources -LOCAL - k); () for the recording one
    local: tuple = ()


def _narrow(values) -> array:
    return L.grow(array("H"), values)


def _links(values) -> array:
    """Queue links (-1: not in the queue), 2 bytes each while they fit."""
    try:
        return array("h", values)
    except OverflowError:
        return array("i", values)


_CODES = (L.WRITE, L.SAMPLE, L.SCHEDULE, L.POPLEFT, L.FREE, L.FREE_HEAD, L.FREE_TAIL, L.TOUCH, L.CACHE,
          L.EVICT, L.RESET, L.LOOKUP, L.ADMIT, L.FINISH, L.GENERIC)

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
        m.nxt = nxt = kf.nxt.tolist()
        if len(kf.prv) == n + 2:
            m.prv = kf.prv.tolist()
        else:                                       # an older keyframe: walk the queue
            m.prv = prv = [-1] * (n + 2)
            b, tail = n, n + 1
            while b != tail:
                prv[nxt[b]] = b
                b = nxt[b]
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
        if kf.local:
            m.local = list(kf.local)
        return m

    def keyframe(self) -> Keyframe:
        return Keyframe(L.grow(array("B"), self.ref), array("i", self.tsrc), _narrow(self.tstart),
                        _narrow(self.tlen), _links(self.nxt), tuple(self.table.values()),
                        tuple(self.local) if self.local else (), _links(self.prv))

    def copy(self) -> Mirror:
        """A serving copy (its new explicit tuples, if any, stay its own)."""
        m = Mirror(self.reg, self.log, self.explicit)
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

    # -- the primitives ---------------------------------------------------------------------
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

    def _cache(self, ids, hashes) -> None:
        table, hash_ = self.table, self.hash
        for b, h in zip(ids, hashes):
            hash_[b] = h
            pair = table.get(h)
            if pair is None:
                table[h] = (h, (b,))
            elif b not in pair[1]:
                table[h] = (h, pair[1] + (b,))

    def _evict(self, b: int, h: bytes) -> None:
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

    def _write(self, b: int, offset: int, src: int, start: int, k: int) -> None:
        """Slots offset.. of block b now hold ``k`` tokens of source ``src`` from ``start``."""
        if offset == 0 or (self.tsrc[b] == src and self.tstart[b] + offset == start
                           and self.tlen[b] >= offset):
            if offset == 0:
                self.tsrc[b], self.tstart[b] = src, start
            self.tlen[b] = offset + k
            return
        self._write_tokens(b, offset, tuple(self._source(src)[start:start + k]))

    def _write_tokens(self, b: int, offset: int, toks: tuple) -> None:
        content = self.tokens_of(b)[:offset] + tuple(toks)
        self.tsrc[b], self.tstart[b], self.tlen[b] = self._explicit(content), 0, len(content)

    def _reset(self) -> None:
        self.table.clear()
        self.hash = [None] * self.n

    # -- applying ---------------------------------------------------------------------------
    def apply_packed(self, a, p: int = 0, n: int | None = None, limit: int = -1) -> int:
        """Apply the packed records of ``a[p:n]`` (at most ``limit`` of them, if given); the
        position after the last one applied. One loop, kept flat: it is what serving a step
        spends its time in."""
        n = len(a) if n is None else n
        ref, reg, log = self.ref, self.reg, self.log
        unlink, insert_after = self._unlink, self._insert_after
        head, tail = self.n, self.n + 1
        write, cache, evict = self._write, self._cache, self._evict
        hashes_of, evicted = reg.hashes, log.hashes
        (WRITE, SAMPLE, SCHEDULE, POPLEFT, FREE, FREE_HEAD, FREE_TAIL, TOUCH, CACHE, EVICT, RESET,
         LOOKUP, ADMIT, FINISH, GENERIC) = _CODES
        while p < n and limit != 0:
            limit -= 1
            code = a[p]
            if code == WRITE:
                write(a[p + 2], a[p + 3], a[p + 1], a[p + 4], a[p + 5])
                p += 6
            elif code == SAMPLE:
                p += 3
            elif code == SCHEDULE:
                p += 4
            elif code == POPLEFT:
                k = a[p + 1]
                for b in a[p + 2:p + 2 + k]:
                    unlink(b)
                    ref[b] = 1
                p += 2 + k
            elif code == FREE:
                k = a[p + 1]
                for b in a[p + 2:p + 2 + k]:
                    ref[b] -= 1
                p += 2 + k
            elif code == FREE_HEAD:
                k = a[p + 1]
                insert_after(head, a[p + 2:p + 2 + k])
                p += 2 + k
            elif code == FREE_TAIL:
                k = a[p + 1]
                insert_after(self.prv[tail], a[p + 2:p + 2 + k])
                p += 2 + k
            elif code == TOUCH:
                k = a[p + 1]
                m = a[p + 2 + k]
                for b in a[p + 3 + k:p + 3 + k + m]:
                    unlink(b)
                for b in a[p + 2:p + 2 + k]:
                    ref[b] += 1
                p += 3 + k + m
            elif code == CACHE:
                i, first, k = a[p + 1], a[p + 2], a[p + 3]
                cache(a[p + 4:p + 4 + k], hashes_of(i)[first:first + k])
                p += 4 + k
            elif code == EVICT:
                evict(a[p + 1], evicted[a[p + 2] << 16 | a[p + 3]])
                p += 4
            elif code == RESET:
                if a[p + 1]:
                    self._reset()
                p += 2
            elif code == LOOKUP:
                p += 5 + a[p + 2]
            elif code == ADMIT:
                p += 5
            elif code == FINISH:
                p += 3
            elif code == GENERIC:
                self.apply_record(log.records[a[p + 1]])
                p += 2
            else:                                      # arrive, preempt
                p += 2
        return p

    def apply_record(self, op) -> None:
        """Apply one op record (the kinds the log keeps as they are, or any, for frames)."""
        kind = op.kind
        if kind == "popleft":
            for b in op.block_ids:
                self._unlink(b)
                self.ref[b] = 1
        elif kind == "evict":
            self._evict(op.block_id, op.block_hash)
        elif kind == "touch":
            for b in op.removed_from_queue:
                self._unlink(b)
            for b in op.block_ids:
                self.ref[b] += 1
        elif kind == "cache":
            self._cache(op.block_ids, op.hashes)
        elif kind == "free":
            for b in op.block_ids:
                self.ref[b] -= 1
        elif kind == "free_head":
            self._insert_after(self.n, op.block_ids)
        elif kind == "free_tail":
            self._insert_after(self.prv[self.n + 1], op.block_ids)
        elif kind == "reset":
            if op.ok:
                self._reset()
        elif kind == "write":
            self._write_tokens(op.block_id, op.offset, op.token_ids)
        elif kind == "load":
            b = op.block_id
            self.tsrc[b], self.tstart[b], self.tlen[b] = (self._explicit(tuple(op.token_ids)), 0,
                                                          len(op.token_ids))


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
