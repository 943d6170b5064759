"""The op log, packed: a step's op records (blockviz.core.ops) as one array of ints.

A long timeline holds tens of op records per event; as Python objects they cost about a hundred
bytes each and give the garbage collector millions of objects to walk. The timeline keeps each
step's ops packed into one ``array('q')`` instead and decodes them on demand (``unpack``), or
replays them without decoding (``sim.mirror``).

Requests are referred to by their *identity*: an index into a :class:`Registry` of the request
views the engine captured (one identity per Request object — a rewind restores copies, which are
new identities). The registry keeps what derived fields need: a request's token list (a write's
token ids are a slice of it at ``position``) and its block-hash list (a cache op's hashes are a
slice of it). Every derivation is checked when packing; a record for which it does not hold, and
every kind without a codec, is kept as it is (code ``GENERIC``).

Layout per record, after its code:
  popleft / free / free_head / free_tail   n, block ids
  evict       block id, index of the hash in ``OpLog.hashes`` (as two 16-bit halves, so the
              index never widens the log)
  touch       n, block ids, m, blocks removed from the queue
  cache       identity, first block index, n, block ids (hashes: the request's, from there)
  reset       ok
  write       identity, block id, offset, position, n (tokens: the request's, from position)
  sample      identity, token id
  schedule    identity, n, decode
  admit       identity, local hit tokens, external hit tokens, new tokens
  arrive / preempt   identity
  lookup      identity, n, hit block ids, hit limit, number of block hashes
  finish      identity, reason (index into FINISH_REASONS)
  GENERIC     index into ``OpLog.records``
"""
from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence

from blockviz.core import ops as O
from blockviz.core.events import AllBlocksCleared, BlockRemoved, BlockStored
from blockviz.core.hashing import hash_to_event_int

GENERIC, POPLEFT, EVICT, TOUCH, CACHE, FREE, FREE_HEAD, FREE_TAIL, RESET = range(9)
WRITE, SAMPLE, SCHEDULE, ADMIT, ARRIVE, LOOKUP, FINISH, PREEMPT = range(9, 17)
CODE_OF_KIND = {"popleft": POPLEFT, "evict": EVICT, "touch": TOUCH, "cache": CACHE, "free": FREE,
                "free_head": FREE_HEAD, "free_tail": FREE_TAIL, "reset": RESET, "write": WRITE,
                "sample": SAMPLE, "schedule": SCHEDULE, "admit": ADMIT, "arrive": ARRIVE,
                "lookup": LOOKUP, "finish": FINISH, "preempt": PREEMPT}
FINISH_REASONS = ("abort", "length")
_LISTS = {POPLEFT: O.Popleft, FREE: O.Free, FREE_HEAD: O.FreeHead, FREE_TAIL: O.FreeTail}
_ONE_REQUEST = {ARRIVE: O.Arrive, PREEMPT: O.Preempt}


class Registry:
    """Request identities: the captured views, one per Request object (keyed by its token list,
    which the view shares with the engine and which only ever grows)."""

    def __init__(self) -> None:
        self.views: list = []                # the first view captured of each identity
        self._index: dict[int, int] = {}     # id(token list) -> identity

    def identity(self, view) -> int:
        key = id(view._tokens)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.views)
            self.views.append(view)
        return i

    def rid(self, i: int) -> str:
        return self.views[i].request_id

    def tokens(self, i: int) -> list[int]:
        return self.views[i]._tokens

    def hashes(self, i: int) -> list[bytes]:
        return self.views[i]._hashes


class OpLog:
    def __init__(self, registry: Registry) -> None:
        self.reg = registry
        self.records: list = []              # records kept as they are (GENERIC)
        self.hashes: list[bytes] = []        # the hashes evict records name, in order

    # -- packing ----------------------------------------------------------------------------
    def pack(self, ops: Sequence, ident: Mapping[str, int]) -> list[int]:
        """``ops`` as ints; ``ident`` maps each request id they name to its identity."""
        out: list[int] = []
        for op in ops:
            if not self._pack(op, ident, out):
                out += (GENERIC, len(self.records))
                self.records.append(op)
        return out

    def _pack(self, op, ident: Mapping[str, int], out: list[int]) -> bool:
        code = CODE_OF_KIND.get(op.kind)
        if code is None:
            return False
        if code in _LISTS:
            out += (code, len(op.block_ids), *op.block_ids)
        elif code == WRITE:
            i = ident[op.request_id]
            toks, pos = op.token_ids, op.position
            if tuple(self.reg.tokens(i)[pos:pos + len(toks)]) != toks:
                return False          # e.g. an async token never delivered: keep the record
            out += (WRITE, i, op.block_id, op.offset, pos, len(toks))
        elif code == SAMPLE:
            out += (SAMPLE, ident[op.request_id], op.token_id)
        elif code == SCHEDULE:
            out += (SCHEDULE, ident[op.request_id], op.num_new_tokens, int(op.decode))
        elif code == TOUCH:
            out += (TOUCH, len(op.block_ids), *op.block_ids, len(op.removed_from_queue),
                    *op.removed_from_queue)
        elif code == CACHE:
            i = ident[op.request_id]
            hashes, first = self.reg.hashes(i), op.first_block_index
            parent = hashes[first - 1] if first > 0 else None
            if (tuple(hashes[first:first + len(op.block_ids)]) != op.hashes
                    or op.parent_hash != parent):
                return False
            out += (CACHE, i, first, len(op.block_ids), *op.block_ids)
        elif code == EVICT:
            k = len(self.hashes)
            self.hashes.append(op.block_hash)
            out += (EVICT, op.block_id, k >> 16, k & 0xFFFF)
        elif code == LOOKUP:
            out += (LOOKUP, ident[op.request_id], len(op.block_ids), *op.block_ids,
                    op.hit_tokens_limit, op.num_block_hashes)
        elif code == ADMIT:
            out += (ADMIT, ident[op.request_id], op.local_hit_tokens, op.external_hit_tokens,
                    op.num_new_tokens)
        elif code == FINISH:
            if op.reason not in FINISH_REASONS:
                return False
            out += (FINISH, ident[op.request_id], FINISH_REASONS.index(op.reason))
        elif code == RESET:
            out += (RESET, int(op.ok))
        else:                          # arrive, preempt
            out += (code, ident[op.request_id])
        return True

    # -- unpacking --------------------------------------------------------------------------
    def unpack(self, packed: Sequence[int], p: int = 0, n: int | None = None) -> tuple:
        return tuple(op for _, op in self.walk(packed, p, n))

    def walk(self, packed: Sequence[int], p: int = 0,
             n: int | None = None) -> Iterable[tuple[int, object]]:
        """(position of the record in ``packed``, the record) for each record of
        ``packed[p:n]``, in order."""
        reg = self.reg
        a = packed
        n = len(a) if n is None else n
        while p < n:
            code = a[p]
            at = p
            if code in _LISTS:
                k = a[p + 1]
                op = _LISTS[code](block_ids=tuple(a[p + 2:p + 2 + k]))
                p += 2 + k
            elif code == WRITE:
                i, b, off, pos, k = a[p + 1:p + 6]
                op = O.Write(request_id=reg.rid(i), block_id=b, offset=off,
                             token_ids=tuple(reg.tokens(i)[pos:pos + k]), position=pos)
                p += 6
            elif code == SAMPLE:
                op = O.Sample(request_id=reg.rid(a[p + 1]), token_id=a[p + 2])
                p += 3
            elif code == SCHEDULE:
                op = O.Schedule(request_id=reg.rid(a[p + 1]), num_new_tokens=a[p + 2],
                                decode=bool(a[p + 3]))
                p += 4
            elif code == TOUCH:
                k = a[p + 1]
                m = a[p + 2 + k]
                op = O.Touch(block_ids=tuple(a[p + 2:p + 2 + k]),
                             removed_from_queue=tuple(a[p + 3 + k:p + 3 + k + m]))
                p += 3 + k + m
            elif code == CACHE:
                i, first, k = a[p + 1:p + 4]
                hashes = reg.hashes(i)
                op = O.Cache(request_id=reg.rid(i), block_ids=tuple(a[p + 4:p + 4 + k]),
                             hashes=tuple(hashes[first:first + k]), first_block_index=first,
                             parent_hash=hashes[first - 1] if first > 0 else None)
                p += 4 + k
            elif code == EVICT:
                op = O.Evict(block_id=a[p + 1], block_hash=self.hashes[a[p + 2] << 16 | a[p + 3]])
                p += 4
            elif code == LOOKUP:
                k = a[p + 2]
                op = O.Lookup(request_id=reg.rid(a[p + 1]), block_ids=tuple(a[p + 3:p + 3 + k]),
                              hit_tokens_limit=a[p + 3 + k], num_block_hashes=a[p + 4 + k])
                p += 5 + k
            elif code == ADMIT:
                op = O.Admit(request_id=reg.rid(a[p + 1]), local_hit_tokens=a[p + 2],
                             external_hit_tokens=a[p + 3], num_new_tokens=a[p + 4])
                p += 5
            elif code == FINISH:
                op = O.Finish(request_id=reg.rid(a[p + 1]), reason=FINISH_REASONS[a[p + 2]])
                p += 3
            elif code == RESET:
                op = O.Reset(ok=bool(a[p + 1]))
                p += 2
            elif code in _ONE_REQUEST:
                op = _ONE_REQUEST[code](request_id=reg.rid(a[p + 1]))
                p += 2
            else:                                  # GENERIC
                op = self.records[a[p + 1]]
                p += 2
            yield at, op


_WIDER = {"B": "H", "H": "i", "i": "q"}


def grow(a: array, values) -> array:
    """``a`` extended by ``values``: 1 or 2 bytes an int while every value fits, then 4, then 8 (the
    array is widened, once, when a value first needs it). Returns the array to keep."""
    values = values if isinstance(values, list | tuple | array) else list(values)
    n = len(a)
    while True:
        try:
            a.extend(values)
            return a
        except OverflowError:    # extend stops at the value that does not fit: undo, widen
            del a[n:]
            a = array(_WIDER[a.typecode], a)


class IntColumn:
    """Ints appended to one flat array (as narrow as the values allow, see ``grow``), with the
    start of each record's run: one object for the garbage collector however long the
    timeline."""

    __slots__ = ("data", "starts")

    def __init__(self) -> None:
        self.data = array("H")
        self.starts = array("q", [0])

    def append_run(self, values: Sequence[int]) -> None:
        self.data = grow(self.data, values)
        self.starts.append(len(self.data))

    def run(self, i: int) -> tuple[int, int]:
        """(start, end) of record ``i``'s run in ``data``."""
        return self.starts[i], self.starts[i + 1]

    def values(self, i: int) -> array:
        return self.data[self.starts[i]:self.starts[i + 1]]


# -- KV events, packed the same way ---------------------------------------------------------
EV_GENERIC, EV_STORED, EV_REMOVED, EV_CLEARED = range(4)


class EventLog:
    """A step's KV cache events (core.events) as ints. A BlockStored is the one the step's k-th
    cache op emitted (its hashes, parent and tokens are the request's, from that block on); a
    BlockRemoved names an evicted hash of the op log. Each is checked by rebuilding it when
    packing; what does not rebuild exactly (extra keys, a connector's events) is kept as it is."""

    def __init__(self, log: OpLog, block_size: int) -> None:
        self.log, self.block_size = log, block_size
        self.records: list = []

    def pack(self, events: Sequence, ops: Sequence, ident: Mapping[str, int]) -> list[int]:
        caches = [op for op in ops if op.kind == "cache"]
        out: list[int] = []
        k = 0
        for e in events:
            name = type(e).__name__
            if name == "BlockStored" and k < len(caches):
                op = caches[k]
                k += 1
                i = ident[op.request_id]
                if self._stored(i, op.first_block_index, len(op.block_ids)) == e:
                    out += (EV_STORED, i, op.first_block_index, len(op.block_ids))
                    continue
            elif name == "BlockRemoved" and len(e.block_hashes) == 1:
                j = self._removed_index(e.block_hashes[0])
                if j is not None and e == BlockRemoved(e.block_hashes):
                    out += (EV_REMOVED, j >> 16, j & 0xFFFF)
                    continue
            elif name == "AllBlocksCleared":
                out.append(EV_CLEARED)
                continue
            out += (EV_GENERIC, len(self.records))
            self.records.append(e)
        return out

    def _removed_index(self, value: int) -> int | None:
        hashes = self.log.hashes
        for j in range(len(hashes) - 1, max(-1, len(hashes) - 64), -1):  # the latest evictions
            if hash_to_event_int(hashes[j]) == value:
                return j
        return None

    def _stored(self, i: int, first: int, n: int):
        reg, bs = self.log.reg, self.block_size
        hashes, view = reg.hashes(i), reg.views[i]
        return BlockStored(
            block_hashes=tuple(hash_to_event_int(h) for h in hashes[first:first + n]),
            parent_block_hash=hash_to_event_int(hashes[first - 1]) if first > 0 else None,
            token_ids=tuple(reg.tokens(i)[first * bs:(first + n) * bs]), block_size=bs,
            lora_name=view.lora, extra_keys=(None,) * n or None)   # (a LoRA's: kept whole)

    def unpack(self, packed: Sequence[int], p: int, n: int) -> tuple:
        out = []
        while p < n:
            code = packed[p]
            if code == EV_STORED:
                out.append(self._stored(packed[p + 1], packed[p + 2], packed[p + 3]))
                p += 4
            elif code == EV_REMOVED:
                j = packed[p + 1] << 16 | packed[p + 2]
                out.append(BlockRemoved((hash_to_event_int(self.log.hashes[j]),)))
                p += 3
            elif code == EV_CLEARED:
                out.append(AllBlocksCleared())
                p += 1
            else:
                out.append(self.records[packed[p + 1]])
                p += 2
        return tuple(out)
