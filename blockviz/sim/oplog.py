"""The op log: every step's op records (blockviz.core.ops) packed into one array of ints.

Why packed: a long timeline holds tens of records per event; as Python objects they cost about a
hundred bytes each and give the garbage collector millions of objects to walk (a 100,000-event run
would not fit its memory budget). Packed, a record is a handful of ints in one flat array, and
serving a step replays them without making a record at all.

Nothing here is written per kind of op. Each record declares how its fields pack (``packed``, and
the field types) and what it does to the observable state (``effect``); :class:`Codec` turns those
declarations, once, into three plain Python functions: ``pack`` (a record to ints, or None to keep
it as it is), ``walk`` (ints back to records) and ``replayer(state class)`` (ints straight to calls
of the state's verbs). A record is its kind's code, then per field in declaration order::

    int, bool, Choice, request        one int (a request is its identity in the log)
    tuple[int, ...]                   its length, then its items
    bytes                             an index into ``OpLog.hashes``, as two 16-bit halves (so the
                                      index never widens the array)
    Tokens                            the count (the tokens are the request's, from ``start``)
    Hashes, ParentHash                nothing (the request's hashes, from ``start``)

A kind with fields that are nearly always their default (an int defaulting to 0, a tuple to ():
a KV-cache group, a mask) has a *short form* too, under a second code, that leaves them out; a
record packs in it when every one of them is its default.

Code 0 (``GENERIC``) is a record kept as it is: an index into ``OpLog.records``. Code ``REPEAT``
is a Lookup that is the very object of the step's Lookup before it (a waiting request refused every
engine step is looked up with the same result, and the engine records that one Lookup each time):
how far back that record starts. Only the immediately previous Lookup is compared: with two
requests refused in turn (A, B, A, B, ...) each Lookup is packed in full. It is decoded once a
step, and replayed as that record.

Requests are named by *identity*: one per request object the engine captured (a rewind restores
copies, which are new identities), keyed by its token list, which the view shares with the engine
and which only ever grows. Derived fields read that list and the request's block hashes; every
derivation is checked when packing.
"""
from __future__ import annotations

from array import array
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from blockviz.core import ops
from blockviz.core.events import AllBlocksCleared, BlockRemoved, BlockStored
from blockviz.core.hashing import hash_to_event_int

GENERIC = 0
REPEAT = 0xFFFF       # (record codes count up from 1)
# The generated loops test codes in this order: the common kinds first.
_HOT = ("write", "sample", "schedule", "popleft", "free", "free_head", "free_tail", "touch", "cache",
        "evict", "lookup", "admit", "finish", "arrive", "preempt")
_DERIVED = (ops.Tokens, ops.Hashes, ops.ParentHash)
_TYPES = {"int": "int", "bool": "bool", "tuple[int, ...]": "ids", "bytes": "hash"}


def _spec(record: type, name: str):
    """How field ``name`` of ``record`` packs: a core.ops form, a type tag, or None (it does not)."""
    form = getattr(record, "packed", {}).get(name)
    if form is not None:
        return form
    if name == "request_id":
        return "request"
    hint = record.__annotations__[name]
    return _TYPES.get(getattr(hint, "__forward_arg__", hint))   # NamedTuple keeps ForwardRefs


def _omittable(record: type, specs: list) -> dict[str, Any]:
    """The fields of ``record`` a short form leaves out: ints defaulting to 0 and id tuples
    defaulting to () (a group, a mask), except where a derived field starts (a write's position)."""
    starts = {getattr(s, a) for _, s in specs if isinstance(s, _DERIVED)
              for a in ("start", "like") if hasattr(s, a)}
    return {name: record._field_defaults[name] for name, s in specs
            if name in record._field_defaults and name not in starts
            and (s, record._field_defaults[name]) in (("int", 0), ("ids", ()))}


class Codec:
    """pack / walk / replayers for ``records``, generated from their declarations (the
    ``_*_source`` methods give the generated code, to read)."""

    def __init__(self, records: Sequence[type] = ops.RECORDS) -> None:
        self.records = tuple(records)
        self.code = {r.kind: k + 1 for k, r in enumerate(self.records)}
        self.specs = {r.kind: [(f, _spec(r, f)) for f in r._fields] for r in self.records}
        packable = [r.kind for r in self.records if None not in dict(self.specs[r.kind]).values()]
        self.order = [k for k in _HOT if k in packable] + [k for k in packable if k not in _HOT]
        # A kind's short form: its fields that are nearly always their default (0 or (): a
        # group, a mask) left out, under a second code, when every one of them is
        self.omit = {r.kind: _omittable(r, self.specs[r.kind]) for r in self.records}
        self.short = {kind: len(self.records) + 1 + j
                      for j, kind in enumerate(k for k in self.order if self.omit[k])}
        # (kind, code, fields left out), in the order the loops test them: each kind's short
        # form where it has one, then the full forms of those (a hybrid model's groups)
        self.forms = [(k, self.short[k], self.omit[k]) if k in self.short else (k, self.code[k], {})
                      for k in self.order] + [(k, self.code[k], {}) for k in self.short]
        self.env: dict[str, Any] = {"GENERIC": GENERIC, "REPEAT": REPEAT, "apply": apply}
        for r in self.records:
            self.env[f"R_{r.kind}"] = r
            self.env.update({f"V_{r.kind}_{name}": s.values for name, s in self.specs[r.kind]
                             if isinstance(s, ops.Choice)})
        self.pack = self._compile("pack", self._pack_source())
        self.walk = self.env["walk"] = self._compile("walk", self._walk_source())
        self.walk_only = self._compile("walk_only", self._walk_source(only=True))
        self._replayers: dict[type, Any] = {}

    def _compile(self, name: str, source: str, state: type | None = None):
        env = dict(self.env, C=state)
        exec(compile(source, f"<blockviz.sim.oplog {name}>", "exec"), env)  # noqa: S102
        return env[name]

    # -- pack: a record -> ints, or None -----------------------------------------------------
    def _pack_source(self) -> str:
        out = ["def pack(op, ident, log):", "    kind = op.kind"]
        for n, kind in enumerate(self.order):
            out.append(f"    {'elif' if n else 'if'} kind == {kind!r}:")
            out += ["        " + line for line in self._pack_body(kind)]
        return "\n".join(out + ["    return None"]) + "\n"

    def _pack_body(self, kind: str) -> list[str]:
        out = self._pack_form(kind, self.code[kind], {})
        omit = self.omit[kind]
        if not omit:
            return out
        short = self._pack_form(kind, self.short[kind], omit)
        test = " and ".join(f"op.{name} == {value!r}" for name, value in omit.items())
        return out[:-1] + [f"if {test}:", "    " + short[-1], out[-1]]

    def _pack_form(self, kind: str, code: int, omit: Mapping[str, Any]) -> list[str]:
        check, pre, items = [], [], [str(code)]
        specs = [(name, s) for name, s in self.specs[kind] if name not in omit]
        if any(s == "request" or isinstance(s, _DERIVED) for _, s in specs):
            check += ["i = ident.get(op.request_id)", "if i is None:", "    return None"]
        if any(isinstance(s, _DERIVED) for _, s in specs):    # (bound only where needed)
            check.append("toks, hashes_of = log.tokens, log.hashes_of")
        for name, s in specs:
            v = f"op.{name}"
            if s == "request":
                items.append("i")
            elif s == "int":
                items.append(v)
            elif s == "bool":
                items.append(f"1 if {v} else 0")
            elif s == "ids":
                items += [f"len({v})", f"*{v}"]
            elif s == "hash":
                pre += [f"k_{name} = len(log.hashes)", f"log.hashes.append({v})"]
                items += [f"k_{name} >> 16", f"k_{name} & 0xFFFF"]
            elif isinstance(s, ops.Choice):
                check += [f"if {v} not in V_{kind}_{name}:", "    return None"]
                items.append(f"V_{kind}_{name}.index({v})")
            else:                                   # derived: it must hold, or keep the record
                if isinstance(s, ops.Tokens):
                    items.append(f"len({v})")
                derived = self._derive(s, f"len({v})", "tuple", "op.")
                check += [f"if {derived} != {v}:", "    return None"]
        return check + pre + [f"return [{', '.join(items)}]"]

    # -- reading a record back ------------------------------------------------------------------
    def _read(self, kind: str, want: set[str] | None, omit: Mapping[str, Any] = {}) -> list[str]:
        """Lines that read record ``kind`` at ``a[p]`` into locals named after its fields (those in
        ``want``, every one if None; ``i`` the request's identity, ``n_<field>`` a Tokens count,
        ``k<j>`` the j-th tuple's length) and leave ``p`` after it. Ids read as tuples only when
        ``want`` is None (the verbs take the array's slices)."""
        specs = self.specs[kind]
        if want is not None:                    # a derived field reads its start (and its like)
            for name, s in specs:
                if name in want and isinstance(s, _DERIVED):
                    want |= {s.start, getattr(s, "like", s.start)}
        need_i = any(isinstance(s, _DERIVED) and (want is None or name in want)
                     for name, s in specs)
        lines, off, ks = [], 1, []          # a field is at p + off + the lengths before it

        def at(d: int = 0) -> str:
            return " + ".join(["p", *ks, *([str(off + d)] if off + d else [])])

        for name, s in specs:
            keep = want is None or name in want
            if name in omit:                    # a short form: the default, not in the array
                if keep:
                    lines.append(f"{name} = {omit[name]!r}")
                continue
            if s == "ids":
                k = f"k{len(ks)}"
                items = f"a[{at(1)}:{at(1)} + {k}]"
                lines.append(f"{k} = a[{at()}]")
                if keep:
                    lines.append(f"{name} = {items if want is not None else f'tuple({items})'}")
                ks.append(k)
            elif isinstance(s, ops.Hashes | ops.ParentHash):
                continue
            else:
                value = f"a[{at()}]"
                if s == "request" and (keep or need_i):
                    lines.append(f"i = {value}")
                    value = "rid(i)"
                if keep:
                    if s == "hash":
                        value = f"H[a[{at()}] << 16 | a[{at(1)}]]"
                    elif s == "bool":
                        value = f"{value} == 1"
                    elif isinstance(s, ops.Choice):
                        value = f"V_{kind}_{name}[{value}]"
                    lines.append(f"{'n_' if isinstance(s, ops.Tokens) else ''}{name} = {value}")
            off += 2 if s == "hash" else 1
        return lines + [f"p = {at()}"]

    @staticmethod
    def _derive(s, count: str, how: str, field: str = "") -> str:
        """A derived field (form ``s``) of request ``i``, its fields read as ``field`` + name and
        a Tokens field's length as ``count``: a ``tuple``, or for an effect's arguments (``how``
        "span") the verbs' forms (Tokens as source, start, count)."""
        start = field + s.start
        if isinstance(s, ops.ParentHash):
            return f"(hashes_of(i)[{start} - 1] if {start} > 0 else None)"
        if isinstance(s, ops.Hashes):
            span = f"hashes_of(i)[{start}:{start} + len({field}{s.like})]"
        elif how == "span":
            return f"i, {start}, {count}"
        else:
            span = f"toks(i)[{start}:{start} + {count}]"
        return f"tuple({span})" if how == "tuple" else span

    _HEAD = ["    rid, toks, hashes_of, H = log.rid, log.tokens, log.hashes_of, log.hashes"]

    def _walk_source(self, only: bool = False) -> str:
        """``walk(a, p, n, log)``: (position, record) for each record of ``a[p:n]``; with ``only``,
        ``walk_only(a, p, n, log, only)``: for those whose kind is in ``only`` (the others are
        stepped over, nothing made of them)."""
        out = [f"def walk{'_only' if only else ''}(a, p, n, log{', only' if only else ''}):",
               *self._HEAD, "    last = None", "    while p < n:", "        code = a[p]",
               "        at = p"]
        for kind, code, omit in self.forms:
            args = [f"{name}={self._derive(s, 'n_' + name, 'tuple')}" if isinstance(s, _DERIVED)
                    else f"{name}={name}" for name, s in self.specs[kind]]
            out.append(f"        if code == {code}:")
            if only:
                out += [f"            if {kind!r} not in only:",
                        *("                " + line for line in self._read(kind, set(), omit)),
                        "                continue"]
            out += [*("            " + line for line in self._read(kind, None, omit)),
                    f"            yield at, R_{kind}({', '.join(args)})", "            continue"]
        # (after every kind's test: a repeat costs the common records nothing)
        out += ["        if code == REPEAT:            # the record it repeats, decoded once",
                "            q = p - a[p + 1]",
                "            if last is None or last[0] != q:",
                "                last = next(walk(a, q, q + 1, log))",
                "            p += 2",
                f"            {'if last[1].kind in only: ' if only else ''}yield at, last[1]",
                "            continue"]
        out += ["        op = log.records[a[p + 1]]   # GENERIC", "        p += 2"]
        out += ["        if op.kind in only:", "            yield at, op"] if only else \
            ["        yield at, op"]
        return "\n".join(out) + "\n"

    def replayer(self, state: type):
        """``replay(m, a, p=0, n=None, limit=-1)`` for an instance ``m`` of ``state`` (or of a
        subclass, which it treats as a ``state``): apply the records of ``a[p:n]`` (at most
        ``limit`` of them) through their effects, calling ``state``'s verbs; returns the position
        after the last one."""
        fn = self._replayers.get(state)
        if fn is None:
            fn = self._replayers[state] = self._compile(f"replay_{state.__name__}",
                                                        self._replay_source(state), state)
        return fn

    def _replay_source(self, state: type) -> str:
        verbs = {r.kind: r.effect for r in self.records
                 if r.effect is not None and callable(getattr(state, r.effect[0], None))}
        out = [f"def replay_{state.__name__}(m, a, p=0, n=None, limit=-1):",
               "    n = len(a) if n is None else n", "    log = m.log", *self._HEAD,
               *(f"    v_{v} = C.{v}" for v in sorted({e[0] for e in verbs.values()})),
               "    while p < n and limit != 0:", "        limit -= 1", "        code = a[p]"]
        for j, (kind, code, omit) in enumerate(self.forms):
            effect = verbs.get(kind, (None,))
            specs = dict(self.specs[kind])
            body = self._read(kind, set(effect[1:]), omit)
            if effect[0] is not None:
                args = [self._derive(specs[f], "n_" + f, "span") if isinstance(specs[f], _DERIVED)
                        else f for f in effect[1:]]
                body.append(f"v_{effect[0]}(m, {', '.join(args)})")
            out += [f"        {'elif' if j else 'if'} code == {code}:",
                    *("            " + line for line in body)]
        out += ["        elif code == GENERIC:", "            apply(m, log.records[a[p + 1]], C)",
                "            p += 2", "        elif code == REPEAT:",
                f"            replay_{state.__name__}(m, a, p - a[p + 1], p - a[p + 1] + 1)",
                "            p += 2", "        else:",
                "            raise ValueError(f'op code {code} at {p}')", "    return p"]
        return "\n".join(out) + "\n"


def apply(state, op, cls: type | None = None) -> None:
    """Apply one op record through its effect, with the verbs of ``cls`` (default: the state's
    class). Tokens fields reach the verb as (source, start, count): ``state.token_source`` gives
    an explicit token tuple a source."""
    verb = None if op.effect is None else getattr(cls or type(state), op.effect[0], None)
    if verb is None:
        return
    args: list = []
    for name in op.effect[1:]:
        value = getattr(op, name)
        if isinstance(getattr(op, "packed", {}).get(name), ops.Tokens):
            args += (state.token_source(tuple(value)), 0, len(value))
        else:
            args.append(value)
    verb(state, *args)


CODEC = Codec()


class OpLog:
    """The records of a run, packed (see the module docstring), and the requests they name."""

    def __init__(self) -> None:
        self.views: list = []                # the first view captured of each identity
        self._identity: dict[int, int] = {}  # id(token list) -> identity
        self.records: list = []              # records kept as they are (GENERIC)
        self.hashes: list[bytes] = []        # the hashes records name, in order

    def identity(self, view) -> int:
        key = id(view.all_token_ids)
        i = self._identity.get(key)
        if i is None:
            i = self._identity[key] = len(self.views)
            self.views.append(view)
        return i

    def rid(self, i: int) -> str:
        return self.views[i].request_id

    def tokens(self, i: int) -> list[int]:
        return self.views[i].all_token_ids

    def hashes_of(self, i: int) -> list[bytes]:
        return self.views[i].block_hashes or []

    def pack(self, records: Sequence, ident: Mapping[str, int]) -> array:
        """``records`` as ints (an array as narrow as they allow: a step of 10,000 engine steps
        may pack tens of millions); ``ident`` maps each request id they name to its identity.
        A Lookup that is the same object as the step's previous Lookup (only that one) packs as
        a ``REPEAT`` of it."""
        out, batch, pack = array("H"), [], CODEC.pack
        lookup, lookup_at = None, 0          # the step's last Lookup, and where it starts
        for op in records:
            if op.kind == "lookup":
                at = len(out) + len(batch)
                if op is lookup:
                    batch += (REPEAT, at - lookup_at)
                    continue
                lookup, lookup_at = op, at
            ints = pack(op, ident, self)
            if ints is None:
                ints = (GENERIC, len(self.records))
                self.records.append(op)
            batch += ints
            if len(batch) > 65_536:          # a list item costs 8 bytes: move them on in batches
                out = grow(out, batch)
                batch = []
        return grow(out, batch)

    def unpack(self, packed: Sequence[int], p: int, n: int,
               only: Collection[str] | None = None) -> tuple:
        """The records of ``packed[p:n]`` (with ``only``: those of these kinds)."""
        walk = CODEC.walk(packed, p, n, self) if only is None else \
            CODEC.walk_only(packed, p, n, self, only)
        return tuple(op for _, op in walk)


# -- KV events, packed the same way ---------------------------------------------------------
EV_GENERIC, EV_STORED, EV_REMOVED, EV_CLEARED = range(4)


class EventLog:
    """A step's KV cache events (core.events) as ints. A BlockStored is the one the step's k-th
    cache op emitted (its hashes, parent and tokens are the request's, from that block on); a
    BlockRemoved names a hash the step's records added to the op log. Each is checked by
    rebuilding it when packing; what does not rebuild exactly (extra keys, a connector's events)
    is kept as it is."""

    def __init__(self, log: OpLog, block_size: int) -> None:
        self.log, self.block_size = log, block_size
        self.records: list = []

    def pack(self, events: Sequence, records: Sequence, ident: Mapping[str, int],
             first_hash: int = 0) -> list[int]:
        """``records``: the step's op records, already packed; ``first_hash``: the first of the
        hashes packing them added to the log (a BlockRemoved names one of those)."""
        caches = iter([op for op in records if op.kind == "cache"])
        hashes, removed = self.log.hashes, None
        out: list[int] = []
        for e in events:
            if isinstance(e, BlockStored) and (op := next(caches, None)) is not None:
                i = ident[op.request_id]
                if self._stored(i, op.first_block_index, len(op.block_ids)) == e:
                    out += (EV_STORED, i, op.first_block_index, len(op.block_ids))
                    continue
            elif isinstance(e, BlockRemoved) and len(e.block_hashes) == 1:
                removed = removed or {hash_to_event_int(hashes[j]): j
                                      for j in range(first_hash, len(hashes))}
                j = removed.get(e.block_hashes[0])
                if j is not None and e == BlockRemoved(e.block_hashes):
                    out += (EV_REMOVED, j >> 16, j & 0xFFFF)
                    continue
            elif isinstance(e, AllBlocksCleared):
                out.append(EV_CLEARED)
                continue
            out += (EV_GENERIC, len(self.records))
            self.records.append(e)
        return out

    def _stored(self, i: int, first: int, n: int) -> BlockStored:
        log, bs = self.log, self.block_size
        hashes = log.hashes_of(i)
        return BlockStored(
            block_hashes=tuple(hash_to_event_int(h) for h in hashes[first:first + n]),
            parent_block_hash=hash_to_event_int(hashes[first - 1]) if first > 0 else None,
            token_ids=tuple(log.tokens(i)[first * bs:(first + n) * bs]), block_size=bs,
            lora_name=log.views[i].lora, extra_keys=(None,) * n or None)   # (a LoRA's: kept whole)

    def unpack(self, a: Sequence[int], p: int, n: int) -> tuple:
        out = []
        while p < n:
            code = a[p]
            if code == EV_STORED:
                out.append(self._stored(a[p + 1], a[p + 2], a[p + 3]))
                p += 4
            elif code == EV_REMOVED:
                out.append(BlockRemoved((hash_to_event_int(self.log.hashes[a[p + 1] << 16
                                                                          | a[p + 2]]),)))
                p += 3
            elif code == EV_CLEARED:
                out.append(AllBlocksCleared())
                p += 1
            else:
                out.append(self.records[a[p + 1]])
                p += 2
        return tuple(out)


_WIDER = {"B": "H", "H": "i", "b": "h", "h": "i", "i": "q"}


def grow(a: array, values) -> array:
    """``a`` extended by ``values``: 1 or 2 bytes an int while every value fits, then 4, then 8 (the
    array is widened, once, when a value first needs it). ``values`` may be an array of another
    width (a step packed on its own). Returns the array to keep."""
    if isinstance(values, array) and values.typecode != a.typecode:
        if values.itemsize > a.itemsize:
            a = array(values.typecode, a)
        else:                          # narrower: its values fit, one by one
            values = iter(values)
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
