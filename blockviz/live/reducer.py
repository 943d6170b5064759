"""What a subscriber can know from vLLM's KV events: the cached hashes, per ``(medium, group_idx)``.

For each cached hash, in store order: its parent (the ``parent_block_hash`` of a store's first
block, the block before it for the others; None at a sequence's start), its tokens (the store's
``token_ids``, ``block_size`` per block), block size, LoRA id and name, extra keys (the store's
``extra_keys[i]``: a cache_salt, LoRA name, multimodal identifiers), the group's kind, the seq of
the batch that stored it, and its **copy count**. vLLM can cache one hash in two blocks (a block
the ``num_tokens - 1`` rule makes a request recompute; two requests computing one prefix in one
step): each copy has its own BlockStored and, when its block is reused, its own BlockRemoved.
A hash stays cached while a copy does.

What it cannot know — vLLM 0.33 sends none of it by default: block ids, ref counts and which
requests share a block, hits, frees (a finished request's blocks look like blocks in use), the
free queue's order (it shows later, as the order of BlockRemoved), unhashed and partial blocks,
the pool's size and usage, and anything cached before the subscriber joined.

What it sees go wrong, as notes: a BlockRemoved of a hash it never saw stored (it joined late, or
missed a batch); a store whose ``token_ids`` cover a different number of blocks than it lists
hashes (a sliding-window group under retention 0 lists only the blocks it keeps while its tokens
and parent describe the whole range): each hash's tokens and parent are then unknown; one hash
stored again with another parent or other tokens. Memory is bounded: at most ``max_hashes``
cached hashes and ``max_tokens_per_hash`` tokens kept per hash; the notes are capped too.

``AllBlocksCleared`` carries no medium; in vLLM 0.33 only the GPU block pool's
``reset_prefix_cache`` sends it, so it empties the GPU groups (and those of a stream that names
no medium, as older vLLMs did) and leaves a CPU or storage tier as it was.
"""
from __future__ import annotations

from array import array
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from typing import Any

from blockviz.i18n import t
from blockviz.live.wire import AllBlocksCleared, BlockRemoved, BlockStored, hash_hex

MAX_HASHES = 500_000
MAX_TOKENS_PER_HASH = 1024
MAX_NOTES_KEPT = 200          # the first ones, and as many of the latest
CLEARED_MEDIA = ("GPU", None)

# What no subscriber can know from 0.33's events (i18n keys: live_unknown_<name>).
CANNOT_KNOW = ("block_ids", "ref_counts", "hits", "frees", "free_queue", "unhashed", "pool",
               "before_join")


# -- notes: counted, located, capped -----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Where:
    """Where a note is about: the message's number in arrival order (from 0) and its source, the
    batch's seq, the event's index in the batch, the data-parallel rank; a recording's line."""
    message: int | None = None
    src: str | None = None
    seq: int | None = None
    event: int | None = None
    rank: int | None = None
    line: int | None = None

    def text(self, lang: str) -> str:
        return ", ".join(t(f"live_where_{k}", lang, n=n, src=self.src or "sub") for k, n in (
            ("line", self.line), ("message", self.message), ("rank", self.rank or None),
            ("seq", self.seq), ("event", self.event)) if n is not None)


@dataclass(frozen=True, slots=True)
class Note:
    kind: str                       # i18n key: live_note_<kind>
    where: Where
    fields: dict = field(default_factory=dict)

    def text(self, lang: str = "en") -> str:
        body = t(f"live_note_{self.kind}", lang, **self.fields)
        loc = self.where.text(lang)
        return f"{loc}{'：' if lang == 'zh' else ': '}{body}" if loc else body


class Notes:
    """Every note counted by kind; the first MAX_NOTES_KEPT and the latest MAX_NOTES_KEPT kept."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.first: list[Note] = []
        self.latest: deque[Note] = deque(maxlen=MAX_NOTES_KEPT)
        self.total = 0

    def add(self, kind: str, where: Where, **fields) -> None:
        note = Note(kind, where, fields)
        self.counts[kind] += 1
        self.total += 1
        if len(self.first) < MAX_NOTES_KEPT:
            self.first.append(note)
        else:
            self.latest.append(note)

    def kept(self) -> list[Note]:
        return self.first + list(self.latest)

    @property
    def dropped(self) -> int:
        return self.total - len(self.first) - len(self.latest)


# -- the cached set --------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class Entry:
    """One cached hash. Only ``count`` changes once it is stored (a step's snapshot is a copy)."""
    parent: Any
    tokens: Any                   # array('I') | tuple | None (unknown)
    block_size: int
    lora_id: int | None
    lora_name: str | None
    extra_keys: Any
    kind: str | None
    seq: int | None
    chain_known: bool
    tokens_cut: int = 0           # tokens not kept (over max_tokens_per_hash)
    count: int = 1

    def to_json(self, h) -> dict:
        return {"hash": hash_hex(h), "parent": hash_hex(self.parent), "count": self.count,
                "token_ids": None if self.tokens is None else list(self.tokens),
                "lora_name": self.lora_name,
                "extra_keys": jsonable(self.extra_keys), "lora_id": self.lora_id,
                "block_size": self.block_size, "kind": self.kind, "stored_seq": self.seq,
                "chain_known": self.chain_known,
                **({"token_ids_cut": self.tokens_cut} if self.tokens_cut else {})}


def jsonable(x: Any) -> Any:
    if isinstance(x, (bytes, bytearray)):
        return bytes(x).hex()
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    return x


def group_name(key: tuple) -> str:
    medium, group = key
    return f"{medium}/{group}"


@dataclass
class Delta:
    """What one batch changed: hashes stored (new or another copy), removed (the last copy gone,
    with what was known of it), removals of hashes never seen stored, whether it cleared the GPU
    cache; and the batch's events."""
    stored: list[tuple[tuple, Any]] = field(default_factory=list)
    removed: list[tuple[tuple, Any, Entry]] = field(default_factory=list)
    unknown: int = 0
    cleared: bool = False
    events: list = field(default_factory=list)     # the batch's events, as applied


class CacheState:
    def __init__(self, *, max_hashes: int = MAX_HASHES,
                 max_tokens_per_hash: int = MAX_TOKENS_PER_HASH, notes: Notes | None = None) -> None:
        self.groups: dict[tuple, dict] = {}
        self.notes = notes if notes is not None else Notes()
        self.max_hashes = max_hashes
        self.max_tokens = max_tokens_per_hash
        self.size = 0                 # cached hashes, all groups
        # counters, over the state's life: hashes stored / removed (each copy), clears
        self.stored = self.removed = self.cleared = 0
        self.unknown_removals = 0

    # -- applying events -------------------------------------------------------------------------
    def apply_batch(self, seq: int | None, events: list, where: Where | None = None) -> Delta:
        where = where or Where(seq=seq)
        delta = Delta(events=events)
        for i, ev in enumerate(events):
            cls = ev.__class__
            if cls is BlockStored:
                self._stored(ev, seq, where, i, delta)
            elif cls is BlockRemoved:
                self._removed(ev, where, i, delta)
            elif cls is AllBlocksCleared:
                self._clear()
                delta.cleared = True
        return delta

    def _stored(self, ev: BlockStored, seq, where: Where, i: int, delta: Delta) -> None:
        key = (ev.medium, ev.group_idx)
        g = self.groups.setdefault(key, {})
        hashes = ev.block_hashes
        n = len(hashes)
        if not n:
            return
        bs = ev.block_size
        toks = ev.token_ids
        chain = bs > 0 and len(toks) == n * bs
        if not chain and (bs > 0 or toks):   # (a CPU tier's placeholder store: size 0, no tokens)
            self.notes.add("tokens_range", replace(where, event=i), hashes=n, tokens=len(toks),
                           block_size=bs, group=group_name(key),
                           spec=ev.kv_cache_spec_kind or "?")
        xk = ev.extra_keys
        if xk is not None and len(xk) != n:
            xk = None
        parent = ev.parent_block_hash if chain else None
        keep = min(bs, self.max_tokens) if chain else 0
        cut = bs - keep if chain else 0
        if cut:
            self.notes.add("tokens_cut", replace(where, event=i), kept=keep, block_size=bs)
        lora_id, lora_name, kind = ev.lora_id, ev.lora_name, ev.kv_cache_spec_kind
        stored = delta.stored
        for j in range(n):
            h = hashes[j]
            tokens = None
            if chain:
                start = j * bs
                tokens = toks[start:start + keep]
                try:
                    tokens = array("I", tokens)
                except (OverflowError, TypeError):
                    tokens = tuple(tokens)
            e = g.get(h)
            if e is None:
                if self.size >= self.max_hashes:
                    self.notes.add("hash_cap", replace(where, event=i), limit=self.max_hashes)
                    parent = h if chain else None
                    continue
                g[h] = Entry(parent, tokens, bs, lora_id, lora_name,
                             None if xk is None else xk[j], kind, seq, chain, cut)
                self.size += 1
            else:
                e.count += 1
                if chain and e.chain_known and (e.parent != parent or (
                        e.tokens is not None and tokens is not None
                        and tuple(e.tokens) != tuple(tokens))):
                    self.notes.add("restored_differently", replace(where, event=i), hash=hash_hex(h))
            stored.append((key, h))
            self.stored += 1
            parent = h if chain else None

    def _removed(self, ev: BlockRemoved, where: Where, i: int, delta: Delta) -> None:
        key = (ev.medium, ev.group_idx)
        g = self.groups.setdefault(key, {})
        for h in ev.block_hashes:
            e = g.get(h)
            if e is None:
                self.unknown_removals += 1
                delta.unknown += 1
                self.notes.add("removed_unknown", replace(where, event=i), hash=hash_hex(h),
                               group=group_name(key))
                continue
            self.removed += 1
            e.count -= 1
            if e.count <= 0:
                del g[h]
                self.size -= 1
                delta.removed.append((key, h, e))

    def _clear(self) -> None:
        for key in [k for k in self.groups if k[0] in CLEARED_MEDIA]:
            self.size -= len(self.groups.pop(key))
        self.cleared += 1

    # -- reading ---------------------------------------------------------------------------------
    def caches(self) -> dict[str, list[dict]]:
        """``{"GPU/0": [entry, ...]}`` in store order (groups in the order first seen; empty ones
        left out)."""
        return {group_name(key): [e.to_json(h) for h, e in g.items()]
                for key, g in self.groups.items() if g}

    def render(self, indent: str = "", lang: str = "en") -> list[str]:
        """The state as text lines: per group, each hash ``<- parent`` with its tokens."""
        lines = []
        for key, g in self.groups.items():
            if not g:
                continue
            lines.append(indent + t("live_group_header", lang, group=group_name(key), n=len(g)))
            for h, e in g.items():
                if not e.chain_known:
                    par = "? (unknown)"
                elif e.parent is None:
                    par = "root"
                else:
                    par = short_hex(e.parent) + ("" if e.parent in g else " (not cached)")
                extra = f" lora={e.lora_name}" if e.lora_name else ""
                if e.extra_keys:
                    extra += f" extra_keys={jsonable(e.extra_keys)}"
                dup = f" x{e.count}" if e.count != 1 else ""
                toks = "?" if e.tokens is None else str(list(e.tokens))
                lines.append(f"{indent}  {short_hex(h)}{dup} <- {par}  tokens {toks}{extra}")
        if not lines:
            lines.append(indent + t("live_cache_empty", lang))
        return lines


def short_hex(h) -> str:
    """A uint64 hash in full (16 digits), a bytes hash's first 16 digits."""
    s = hash_hex(h)
    return s if s is None or isinstance(h, int) else s[:16]


def hash_label(h) -> str:
    """A hash in 8 hex digits, as the pages draw it: a digest's (or a uint64's) first 8; a uint64
    below 2**32 (a test's or a toy publisher's small numbers) its last 8, not ``00000000``."""
    s = short_hex(h)
    return s[-8:] if isinstance(h, int) and 0 <= h < 1 << 32 else s[:8]
