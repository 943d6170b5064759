"""The op log: every step's op records (blockviz.core.ops) packed into one array of ints.

Why packed: a long timeline holds tens of records per event; as Python objects they cost about a
hundred bytes each and give the garbage collector millions of objects to walk (a 100,000-event run
would not fit its memory budget). Packed, a record is a handful of ints in one flat array, and
serving a step replays them without making a record at all.

Nothing here is written per kind of op. Each record declares how its fields pack (``packed``, and
the field types) and what it does to the observable state (``effect``); :class:`Codec` turns those
declarations into three functions, generated once as plain Python so they run as fast as
hand-written loops: ``pack`` (a record to ints, or None to keep it as it is), ``walk`` (ints back to
records) and ``replayer(state class)`` (ints straight to calls of the state's verbs, skipping
the records whose effect the state does not have). Layout of a record: its kind's code, then per
field in declaration order::

    int, request identity, Choice     one int
    bool                              0 or 1
    tuple[int, ...]                   its length, then its items
    bytes                             an index into ``OpLog.hashes``, as two 16-bit halves (so the
                                      index never widens the array)
    Tokens                            the count (the tokens are the request's, from ``start``)
    Hashes, ParentHash                nothing (the request's hashes, from ``start``)

Code 0 (``GENERIC``) is a record kept as it is: an index into ``OpLog.records``.

Requests are named by *identity*: an index into a :class:`Registry` of the request views the
engine captured, one per request object (a rewind restores copies, which are new identities). The
registry holds what derived fields read: a request's token list and block-hash list (both the
engine's own, append-only). Every derivation is checked when packing.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from blockviz.core import ops as O
from blockviz.core.events import AllBlocksCleared, BlockRemoved, BlockStored
from blockviz.core.hashing import hash_to_event_int

GENERIC = 0
# The replay loop tests codes in this order: the common kinds first.
_HOT = ("write", "sample", "schedule", "popleft", "free", "free_head", "free_tail", "touch", "cache",
        "evict", "lookup", "admit", "finish", "arrive", "preempt")


class Registry:
    """Request identities: the captured views, one per request object (keyed by its token list,
    which the view shares with the engine and which only ever grows)."""

    def __init__(self) -> None:
        self.views: list = []                # the first view captured of each identity
        self._index: dict[int, int] = {}     # id(token list) -> identity

    def identity(self, view) -> int:
        key = id(view.all_token_ids)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.views)
            self.views.append(view)
        return i

    def rid(self, i: int) -> str:
        return self.views[i].request_id

    def tokens(self, i: int) -> list[int]:
        return self.views[i].all_token_ids

    def hashes(self, i: int) -> list[bytes]:
        return self.views[i].block_hashes or []


# -- the codec, generated from the records' declarations --------------------------------------
def _spec(record: type, name: str):
    """How field ``name`` of ``record`` packs: a core.ops form, a type tag, or None."""
    form = getattr(record, "packed", {}).get(name)
    if form is not None:
        return form
    if name == "request_id":
        return "request"
    hint = record.__annotations__[name]
    hint = getattr(hint, "__forward_arg__", hint)      # NamedTuple keeps them as ForwardRefs
    return {"int": "int", "bool": "bool", "tuple[int, ...]": "ids", "bytes": "hash"}.get(hint)


class Codec:
    """pack / walk / replayers for ``records``, generated from their declarations. ``source`` is
    the generated code (to read, or to debug)."""

    def __init__(self, records: Sequence[type] = O.RECORDS) -> None:
        self.records = tuple(records)
        self.code = {r.kind: k + 1 for k, r in enumerate(self.records)}
        self.specs = {r.kind: [(f, _spec(r, f)) for f in r._fields] for r in self.records}
        self.packable = {r.kind for r in self.records
                         if all(s is not None for _, s in self.specs[r.kind])}
        order = [k for k in _HOT if k in self.packable]
        self.order = order + [r.kind for r in self.records if r.kind in self.packable
                              and r.kind not in order]
        self.source: dict[str, str] = {}
        self.pack = self._compile("pack", self._pack_source())
        self.walk = self._compile("walk", self._walk_source())
        self._replayers: dict[type, Any] = {}

    def _env(self) -> dict:
        env: dict[str, Any] = {"GENERIC": GENERIC, "array": array, "apply": apply}
        for r in self.records:
            env[f"R_{r.kind}"] = r
            for name, spec in self.specs[r.kind]:
                if isinstance(spec, O.Choice):
                    env[f"V_{r.kind}_{name}"] = spec.values
        return env

    def _compile(self, name: str, source: str, state: type | None = None):
        self.source[name] = source
        env = self._env() | {"C": state}
        exec(compile(source, f"<blockviz.sim.oplog {name}>", "exec"), env)  # noqa: S102
        return env[name]

    # -- pack: a record -> ints, or None -----------------------------------------------------
    def _pack_source(self) -> str:
        out = ["def pack(op, ident, reg, log):",
               "    kind = op.kind"]
        for n, kind in enumerate(self.order):
            out.append(f"    {'if' if n == 0 else 'elif'} kind == {kind!r}:")
            out += ["        " + line for line in self._pack_body(kind)]
        out.append("    return None")
        return "\n".join(out) + "\n"

    def _pack_body(self, kind: str) -> list[str]:
        specs = self.specs[kind]
        check: list[str] = []
        pre: list[str] = []
        items = [str(self.code[kind])]
        if any(s == "request" or isinstance(s, O.Tokens | O.Hashes | O.ParentHash) for _, s in specs):
            check += ["i = ident.get(op.request_id)", "if i is None:", "    return None"]
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
            elif isinstance(s, O.Choice):
                check += [f"if {v} not in V_{kind}_{name}:", "    return None"]
                items.append(f"V_{kind}_{name}.index({v})")
            elif isinstance(s, O.Tokens):
                check += [f"if tuple(reg.tokens(i)[op.{s.start}:op.{s.start} + len({v})]) != {v}:",
                          "    return None"]
                items.append(f"len({v})")
            elif isinstance(s, O.Hashes):
                check += [f"if tuple(reg.hashes(i)[op.{s.start}:op.{s.start} + len(op.{s.like})])"
                          f" != {v}:", "    return None"]
            elif isinstance(s, O.ParentHash):
                check += [f"if (reg.hashes(i)[op.{s.start} - 1] if op.{s.start} > 0 else None)"
                          f" != {v}:", "    return None"]
        return check + pre + [f"return [{', '.join(items)}]"]

    # -- decoding: the stored values of one record ------------------------------------------
    def _decode(self, kind: str, needed: set[str] | None) -> tuple[list[str], str]:
        """Lines that read record ``kind`` at ``a[p]`` into locals named after its fields (only
        ``needed`` ones, all if None, and then lists of ints as tuples; ``n_<field>`` for a
        Tokens count, ``i`` for the request), and the expression of the position after it."""
        lines: list[str] = []
        base, off = "p", 1
        specs = self.specs[kind]
        derived = {s.start for _, s in specs if isinstance(s, O.Tokens | O.Hashes | O.ParentHash)}
        want = (None if needed is None else
                needed | (derived if needed & {n for n, s in specs if isinstance(
                    s, O.Tokens | O.Hashes | O.ParentHash)} else set()))

        def wanted(name: str) -> bool:
            return want is None or name in want

        def at(k: int = 0) -> str:
            return base if off + k == 0 else f"{base} + {off + k}"

        for name, s in specs:
            if s == "ids":
                lines.append(f"k_{name} = a[{at()}]")
                if wanted(name):
                    items = f"a[{at(1)}:{at(1)} + k_{name}]"
                    lines.append(f"{name} = {items if needed is not None else f'tuple({items})'}")
                lines.append(f"q_{name} = {at(1)} + k_{name}")
                base, off = f"q_{name}", 0
                continue
            if s == "hash":
                if wanted(name):
                    lines.append(f"{name} = H[a[{at()}] << 16 | a[{at(1)}]]")
                off += 2
                continue
            if isinstance(s, O.Hashes | O.ParentHash):
                continue
            if s == "request":
                if wanted(name) or any(isinstance(x, O.Tokens | O.Hashes | O.ParentHash)
                                       and wanted(f) for f, x in specs):
                    lines.append(f"i = a[{at()}]")
                    if wanted(name):
                        lines.append(f"{name} = rid(i)")
            elif isinstance(s, O.Tokens):
                if wanted(name):
                    lines.append(f"n_{name} = a[{at()}]")
            elif wanted(name):
                value = {"bool": f"a[{at()}] == 1"}.get(s, f"a[{at()}]")
                if isinstance(s, O.Choice):
                    value = f"V_{kind}_{name}[a[{at()}]]"
                lines.append(f"{name} = {value}")
            off += 1
        return lines, at()

    def _derive(self, kind: str, name: str, spec, as_span: bool) -> str:
        """The expression of derived field ``name`` (after ``_decode``)."""
        if isinstance(spec, O.Tokens):
            if as_span:
                return f"i, {spec.start}, n_{name}"
            return f"tuple(toks(i)[{spec.start}:{spec.start} + n_{name}])"
        if isinstance(spec, O.Hashes):
            return f"hashes_of(i)[{spec.start}:{spec.start} + len({spec.like})]"
        return f"(hashes_of(i)[{spec.start} - 1] if {spec.start} > 0 else None)"

    # -- walk: ints -> records ---------------------------------------------------------------
    def _walk_source(self) -> str:
        out = ["def walk(a, p, n, reg, log):",
               "    rid, toks, hashes_of, H = reg.rid, reg.tokens, reg.hashes, log.hashes",
               "    while p < n:",
               "        code = a[p]"]
        for kind in self.order:
            lines, after = self._decode(kind, None)
            args = []
            for name, s in self.specs[kind]:
                if isinstance(s, O.Tokens | O.Hashes | O.ParentHash):
                    value = self._derive(kind, name, s, False)
                    if isinstance(s, O.Hashes):
                        value = f"tuple({value})"
                    args.append(f"{name}={value}")
                else:
                    args.append(f"{name}={name}")
            out.append(f"        if code == {self.code[kind]}:")
            out += ["            " + line for line in lines]
            out.append(f"            yield p, R_{kind}({', '.join(args)})")
            out.append(f"            p = {after}")
            out.append("            continue")
        out += ["        yield p, log.records[a[p + 1]]   # GENERIC",
                "        p += 2"]
        return "\n".join(out) + "\n"

    # -- replay: ints -> the state's verbs ----------------------------------------------------
    def replayer(self, state: type):
        """``replay(m, a, p=0, n=None, limit=-1)`` for instances ``m`` of ``state`` (or of a
        subclass, which it treats as a ``state``): apply the records of ``a[p:n]`` (at most
        ``limit`` of them) through their effects, calling ``state``'s verbs on ``m``; returns the
        position after the last one."""
        fn = self._replayers.get(state)
        if fn is None:
            fn = self._replayers[state] = self._compile(f"replay_{state.__name__}",
                                                        self._replay_source(state), state)
        return fn

    def _replay_source(self, state: type) -> str:
        name = f"replay_{state.__name__}"
        verbs = {r.kind: r.effect for r in self.records
                 if r.effect is not None and callable(getattr(state, r.effect[0], None))}
        used = sorted({verbs[k][0] for k in verbs if k in self.packable})
        out = [f"def {name}(m, a, p=0, n=None, limit=-1):",
               "    n = len(a) if n is None else n",
               "    reg, log = m.reg, m.log",
               "    rid, toks, hashes_of, H = reg.rid, reg.tokens, reg.hashes, log.hashes",
               *(f"    v_{v} = C.{v}" for v in used),
               "    while p < n and limit != 0:",
               "        limit -= 1",
               "        code = a[p]"]
        for n_, kind in enumerate(self.order):
            effect = verbs.get(kind)
            args = () if effect is None else effect[1:]
            lines, after = self._decode(kind, set(args))
            out.append(f"        {'if' if n_ == 0 else 'elif'} code == {self.code[kind]}:")
            body = list(lines) if effect is not None else self._skip(kind)
            if effect is not None:
                specs = dict(self.specs[kind])
                call = [self._derive(kind, f, specs[f], True)
                        if isinstance(specs[f], O.Tokens | O.Hashes | O.ParentHash) else f
                        for f in args]
                body.append(f"v_{effect[0]}(m, {', '.join(call)})")
                body.append(f"p = {after}")
            out += ["            " + line for line in body]
        out += ["        elif code == GENERIC:",
                "            apply(m, log.records[a[p + 1]], C)",
                "            p += 2",
                "        else:",
                "            raise ValueError(f'op code {code} at {p}')",
                "    return p"]
        return "\n".join(out) + "\n"

    def _skip(self, kind: str) -> list[str]:
        """Lines that step over record ``kind`` without reading its values."""
        lines, after = self._decode(kind, set())
        return [line for line in lines if line.startswith(("k_", "q_"))] + [f"p = {after}"]


def apply(state, op, cls: type | None = None) -> None:
    """Apply one op record through its effect, with the verbs of ``cls`` (default: the state's
    class). Tokens fields reach the verb as (source, start, count): ``state.token_source`` gives
    an explicit token tuple a source."""
    effect = op.effect
    verb = None if effect is None else getattr(cls or type(state), effect[0], None)
    if verb is None:
        return
    forms = getattr(op, "packed", {})
    args: list = []
    for name in effect[1:]:
        value = getattr(op, name)
        if isinstance(forms.get(name), O.Tokens):
            args += (state.token_source(tuple(value)), 0, len(value))
        else:
            args.append(value)
    verb(state, *args)


CODEC = Codec()


class OpLog:
    """The records of a run, packed (see the module docstring)."""

    def __init__(self, registry: Registry) -> None:
        self.reg = registry
        self.records: list = []              # records kept as they are (GENERIC)
        self.hashes: list[bytes] = []        # the hashes records name, in order

    def pack(self, ops: Sequence, ident: Mapping[str, int]) -> list[int]:
        """``ops`` as ints; ``ident`` maps each request id they name to its identity."""
        out: list[int] = []
        pack, reg = CODEC.pack, self.reg
        for op in ops:
            ints = pack(op, ident, reg, self)
            if ints is None:
                out += (GENERIC, len(self.records))
                self.records.append(op)
            else:
                out += ints
        return out

    def walk(self, packed: Sequence[int], p: int = 0, n: int | None = None
             ) -> Iterator[tuple[int, Any]]:
        """(position of the record in ``packed``, the record) for each record of
        ``packed[p:n]``, in order."""
        return CODEC.walk(packed, p, len(packed) if n is None else n, self.reg, self)

    def unpack(self, packed: Sequence[int], p: int = 0, n: int | None = None) -> tuple:
        return tuple(op for _, op in self.walk(packed, p, n))


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

    def pack(self, events: Sequence, ops: Sequence, ident: Mapping[str, int],
             first_hash: int = 0) -> list[int]:
        """``ops``: the step's records, already packed; ``first_hash``: the first of the hashes
        packing them added to the log (a BlockRemoved names one of those)."""
        caches = [op for op in ops if op.kind == "cache"]
        removed: dict[int, int] | None = None
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
                if removed is None:
                    hashes = self.log.hashes
                    removed = {hash_to_event_int(hashes[j]): j
                               for j in range(first_hash, len(hashes))}
                j = removed.get(e.block_hashes[0])
                if j is not None and e == BlockRemoved(e.block_hashes):
                    out += (EV_REMOVED, j >> 16, j & 0xFFFF)
                    continue
            elif name == "AllBlocksCleared":
                out.append(EV_CLEARED)
                continue
            out += (EV_GENERIC, len(self.records))
            self.records.append(e)
        return out

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
