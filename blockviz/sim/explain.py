"""Why did it miss? Every prompt token of a request's lookup accounted for, by the rule that
decided it.

vLLM looks a request up each time it tries to admit it, and records the lookup of the admission
that succeeds (scheduler.py:1508-1512). The *split* explains that lookup: each of its tokens is in
exactly one category, and the categories sum to the tokens looked up.

  hit            found in the GPU prefix cache: vLLM's own hit count (what it records)
  external_hit   supplied by the KV connector (it ignores the num_tokens - 1 cap)
  window         hybrid models: the first attention group had it, a later group (a sliding
                 window) could not supply its run — vLLM's num_uncached_common_prefix_tokens
  last_token     the last full block when the prompt ends on a block boundary: the lookup stops
                 at num_tokens - 1 so that the last token's logits are computed — structural, no
                 cache could have served it
  partial_block  a tail shorter than a block: only full blocks are ever cached
  evicted        it was cached, and the block that held it was reused (by another request's
                 allocation, a reset, a restart): what a bigger cache might have served
  different_key  the same tokens were cached under another key (cache_salt, LoRA, a multimodal
                 item, another NONE_HASH)
  cold           no request had computed this prefix (or one is computing it: ``pending_in``)
  skipped        the request does not read the cache (prompt logprobs), or caching is off

Precedence: skipped > hit > external_hit > window > structural (partial_block, last_token) >
each walked block's own status at lookup time (evicted > different_key > cold); a block still
cached behind a miss cannot be reached and takes the category of the miss before it.

A resumed request's re-lookup (after a preemption; vLLM counts it apart, in ``preempted_*``)
is explained the same way over its ``num_tokens`` then: ``resumed_split``.

The explainer is blockviz's own bookkeeping, not vLLM state: it watches the engine's op records
(``on_op``) — a block's hash is opened by ``cache`` and closed by ``evict`` (with the request whose
allocation took the block), ``reset`` or ``restart`` — and keeps, per key, the blocks that held
it; and, per token prefix (tokens only, no key), who cached it under which key. It lives in the
engine state, so a checkpoint saves it and a rewind restores it.
"""
from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from blockviz.sim.oplog import grow

KEYS = ("hit", "external_hit", "last_token", "partial_block", "cold", "evicted", "different_key",
        "window", "skipped")
EXTERNAL_MEDIUM = "CPU"                          # blockviz's tier (vLLM's OffloadingConnector)


_CAUSES = ("allocation", "evict_blocks", "reset_prefix_cache", "restart")


class History:
    """What a lookup needs of each key's past, for every key ever cached: how many of its
    residencies (a block holding the key, from its ``cache`` to its eviction) have ended, and the
    one a lookup names — the latest to end, the first to start among those that ended together.

    A run keeps it for good, so it is kept in columns: a key's number (``index``, from its first
    residency on) indexes int arrays of the count and the named residency's block, start order
    (``seq``), times (``event << 32 | engine step``, ordered as the pairs are) and cause, and two
    lists of the requests that cached it and whose allocation took its block (None otherwise).
    The number also names the key's owner of its token prefix (``Explainer.owners``): the key
    (``keys``), the latest request that cached it in the first attention group (``owner_rid``)
    and that request's extras (``owner_extras``; None while there is no owner).

    Contract: a key determines its token prefix (key => digest). A key is a chain hash over the
    prefix's blocks of tokens (and extras), so two prefixes share a key only by a hash collision,
    which vLLM's prefix cache assumes away too. The owner columns are therefore per key, not per
    (digest, key): the number ``k`` stands in one digest's owner list only, and updating
    ``owner_rid[k]`` cannot change what another digest's list says."""

    __slots__ = ("index", "closed", "block", "seq", "cached_at", "removed_at", "cause",
                 "cached_by", "taken_by", "keys", "owner_rid", "owner_extras")

    def __init__(self) -> None:
        self.index: dict[bytes, int] = {}
        self.closed, self.block, self.cause = array("i"), array("i"), array("b")
        self.seq, self.cached_at, self.removed_at = array("q"), array("q"), array("q")
        self.cached_by: list[str | None] = []
        self.taken_by: list[str | None] = []
        self.keys: list[bytes] = []
        self.owner_rid: list[str | None] = []
        self.owner_extras: list[tuple | None] = []

    def add(self, key: bytes) -> None:
        if key not in self.index:
            self.index[key] = len(self.closed)
            for col in (self.closed, self.block, self.cause, self.seq, self.cached_at,
                        self.removed_at):
                col.append(0)
            for col in (self.cached_by, self.taken_by, self.owner_rid, self.owner_extras):
                col.append(None)
            self.keys.append(key)

    def owner(self, entry: int | Owner) -> Owner:
        """An owner entry as an ``Owner``: a key's number, or (its extras not those the key's
        number keeps) the ``Owner`` itself."""
        if type(entry) is int:
            return Owner(self.keys[entry], self.owner_rid[entry], self.owner_extras[entry])
        return entry

    def close(self, block: int, res: tuple, removed_at: int, cause: int) -> int | None:
        """Ends ``block``'s open residency ``res`` (key, seq, cached_by, cached_at); the key's
        number when it is the one a lookup names now, else None."""
        key, seq, cached_by, cached_at = res
        k = self.index[key]
        n = self.closed[k]
        self.closed[k] = n + 1
        last = self.removed_at[k]
        if n and (removed_at < last or (removed_at == last and seq >= self.seq[k])):
            return None
        self.block[k], self.seq[k], self.cause[k] = block, seq, cause
        self.cached_at[k], self.removed_at[k] = cached_at, removed_at
        self.cached_by[k], self.taken_by[k] = cached_by, None
        return k


class Owner(NamedTuple):
    """Who cached a token prefix, under which key, with which extra keys (``extras``: the
    request's (cache_salt, lora, mm, none_hash), one tuple shared by every owner with the same)."""
    key: bytes
    request_id: str
    extras: tuple


_CATEGORY = {c: i for i, c in enumerate(KEYS)}
_DIGEST_MASK = (1 << 60) - 1
_HIT_IDS = -1         # a segment's detail is {"block_ids": [...]}, its ids at the array's end
_NO_DETAIL = -2


class Split:
    """A lookup explained: token counts per category (``KEYS`` order), the segments
    ``[(start, end, category, detail)]`` in token order, and when and over how many tokens.

    A run keeps one per request for good (the timeline serves it at every later step), so it
    is kept packed: the numbers in one int array — the counts, the event, the engine step and
    the tokens looked up, then each segment's start, end, category and detail (an index into
    ``_details``, or ``_HIT_IDS``: the hit's block ids, which end the array) — and the other
    details apart. ``counts`` and ``segments`` are built when read."""

    __slots__ = ("_ints", "_details")

    def __init__(self, counts: Sequence[int], segments: Sequence[tuple[int, int, str, Any]],
                 event: int, engine_step: int, num_tokens: int) -> None:
        ints = [*counts, event, engine_step, num_tokens, len(segments)]
        details, ids = [], ()
        for start, end, cat, d in segments:
            if not ids and d is not None and d.keys() == {"block_ids"} \
                    and type(d["block_ids"]) is list:
                ref, ids = _HIT_IDS, d["block_ids"]
            elif d is None:
                ref = _NO_DETAIL
            else:
                ref = len(details)
                details.append(d)
            ints += (start, end, _CATEGORY[cat], ref)
        ints += ids
        self._ints = grow(array("b"), ints)     # as narrow as its values fit
        self._details = tuple(details) if details else ()

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(self._ints[:len(KEYS)])

    @property
    def event(self) -> int:
        return self._ints[len(KEYS)]

    @property
    def engine_step(self) -> int:
        return self._ints[len(KEYS) + 1]

    @property
    def num_tokens(self) -> int:
        return self._ints[len(KEYS) + 2]

    @property
    def segments(self) -> tuple[tuple[int, int, str, Any], ...]:
        a = self._ints
        p = len(KEYS) + 4
        end = p + 4 * a[p - 1]
        out = []
        for start, stop, cat, ref in zip(*[iter(a[p:end])] * 4):
            d = (None if ref == _NO_DETAIL else {"block_ids": a[end:].tolist()} if ref == _HIT_IDS
                 else self._details[ref])
            out.append((start, stop, KEYS[cat], d))
        return tuple(out)

    def __getitem__(self, key: str) -> int:
        return self._ints[_CATEGORY[key]]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Split):
            return NotImplemented
        return self._ints == other._ints and self._details == other._details

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"Split(counts={self.counts!r}, segments={self.segments!r}, event={self.event}, "
                f"engine_step={self.engine_step}, num_tokens={self.num_tokens})")

    def to_dict(self) -> dict[str, int]:
        return dict(zip(KEYS, self.counts, strict=True))

    def detail(self) -> list[dict]:
        return [{"start": a, "end": b, "category": c, **(d or {})} for a, b, c, d in self.segments]


@dataclass
class _Pending:
    """A lookup's snapshot, kept until the admission it belongs to (or the next attempt)."""
    num_tokens: int
    longest: int                  # the first attention group's stand-alone hit (S)
    first: int                    # block index of statuses[0]
    statuses: list[tuple[str, Any]]
    window: Any = None


@dataclass
class Explainer:
    """Keeps the history the splits need and makes them (``prompt_split``, ``resumed_split``)."""
    scheduler: Any
    block_size: int
    first_group_ids: tuple[int, ...] = (0,)
    other_groups: tuple[tuple[tuple[int, ...], int], ...] = ()   # (group ids, blocks a run needs)
    index_tokens: bool = True        # the first attention group caches every full block
    none_hash: bytes = b""           # the engine process's NONE_HASH (a restart may change it)
    event: int = 0
    engine_step: int = 0
    # Kept for the whole run, so kept small: per key ever cached, its History columns (not every
    # residency); per token prefix, its owners (one per key and extras, the latest: the only one
    # a lookup can name; a list only when there are several); the open residencies by block
    history: History = field(default_factory=History)
    open: dict[int, tuple] = field(default_factory=dict)    # block: (key, seq, cached_by, at)
    owners: dict[int, int | Owner | list[int | Owner]] = field(default_factory=dict)
    prompt_split: dict[str, Split] = field(default_factory=dict)
    resumed_split: dict[str, Split] = field(default_factory=dict)
    _digests: dict[str, list[int]] = field(default_factory=dict)
    _pending: dict[str, _Pending] = field(default_factory=dict)
    _taking: list[tuple[int, int]] = field(default_factory=list)  # (key number, seq) closed
                                                 # by the allocation running, as named now
    _popping: bool = False
    _seq: int = 0
    _tick: int = 0                               # the last _now (one int shared while it holds)
    _extras: dict[tuple, tuple] = field(default_factory=dict)  # one copy of each extras tuple

    # -- watching ------------------------------------------------------------------------------
    def on_op(self, op) -> None:
        kind = op.kind
        if kind == "evict":
            self._evicted(op.block_id, op.block_hash)
            return
        if kind == "popleft":
            self._popping = True
            return
        self._popping = False
        if self._taking:
            rid = getattr(op, "request_id", None)
            if rid is not None:
                history = self.history    # the next request named is the one that allocated
                for k, seq in self._taking:
                    if history.seq[k] == seq:
                        history.taken_by[k] = rid
                self._taking = []
        handle = _HANDLE.get(kind)          # (most ops, writes and samples, have none)
        if handle is not None:
            handle(self, op)

    def _reset(self, op) -> None:
        if op.ok:
            self._close_all("reset_prefix_cache")

    def _restart(self, op) -> None:
        self._close_all("restart")
        self.none_hash = op.none_hash

    def _finished(self, op) -> None:
        """A finished request looks nothing up and caches nothing more."""
        self._digests.pop(op.request_id, None)

    @property
    def _now(self) -> int:
        """(event, engine step), packed as ``History`` keeps it."""
        tick = self.event << 32 | self.engine_step
        if tick != self._tick:
            self._tick = tick
        return self._tick

    def _evicted(self, block_id: int, key: bytes) -> None:
        res = self.open.pop(block_id, None)
        if res is None:
            return
        k = self.history.close(block_id, res, self._now, 0 if self._popping else 1)
        if self._popping and k is not None:
            self._taking.append((k, res[1]))

    def _close_all(self, cause: str) -> None:
        now, c = self._now, _CAUSES.index(cause)
        history = self.history
        for bid, res in self.open.items():
            history.close(bid, res, now, c)
        self.open.clear()

    def _cached(self, op) -> None:
        now = self._now
        rid = op.request_id
        history = self.history
        for bid, key in zip(op.block_ids, op.hashes):
            self.open[bid] = (key, self._seq, rid, now)
            self._seq += 1
            history.add(key)
        if not self.index_tokens or op.group != self.first_group_ids[0] or op.masked:
            return
        req = self.scheduler.requests.get(rid)
        if req is None:
            return
        owners = self.owners
        for j, key in enumerate(op.hashes):
            i = op.first_block_index + j
            extras = self._extras_of(req, i)
            extras = self._extras.setdefault(extras, extras)
            k = history.index[key]          # one int object per key, shared with the index
            kept = history.owner_extras[k]
            if kept is None or kept is extras:
                history.owner_rid[k], history.owner_extras[k] = rid, extras
                owner = k
            else:                            # the key cached with other extras: kept whole
                owner = Owner(key, rid, extras)
            digest = self._digest(req, i)
            had = owners.get(digest)
            if had is None:
                owners[digest] = owner
            elif isinstance(had, list):
                # an owner of the same key and extras is one no lookup can name any more: a
                # lookup names the latest owner of those it differs least from
                had[:] = [e for e in had if not _same_owner(e, owner)]
                had.append(owner)
            elif _same_owner(had, owner):
                owners[digest] = owner
            else:
                owners[digest] = [had, owner]

    def _extras_of(self, req, i: int) -> tuple:
        """The extra keys of the request's first ``i + 1`` blocks: (cache_salt, lora, the
        multimodal items that reach into them, the NONE_HASH)."""
        end = (i + 1) * self.block_size
        return (req.cache_salt, req.lora.name if req.lora else None,
                tuple(m.identifier for m in req.mm_items if m.offset < end), self.none_hash)

    def _digest(self, req, i: int) -> int:
        """The digest of the request's first ``i + 1`` blocks of tokens, tokens only: 60 bits
        of a chain hash, as an int (the owner map holds one per prefix ever cached: an int of 60
        bits is 32 bytes, 16 bytes of digest 56)."""
        ds = self._digests.setdefault(req.request_id, [])
        bs = self.block_size
        toks = req.all_token_ids
        while len(ds) <= i:
            j = len(ds)
            prev = ds[-1].to_bytes(8, "little") if ds else b""
            d = hashlib.blake2b(prev + array("I", toks[j * bs:(j + 1) * bs]).tobytes(),
                                digest_size=8).digest()
            ds.append(int.from_bytes(d, "little") & _DIGEST_MASK)
        return ds[i]

    # -- the lookup ----------------------------------------------------------------------------
    def _lookup(self, op) -> None:
        req = self.scheduler.requests.get(op.request_id)
        if req is None:
            return
        bs = self.block_size
        n = req.num_tokens
        if len(self.first_group_ids) == 1 and not self.other_groups:
            hit = len(op.block_ids) * bs
            longest = hit
        else:
            hit = op.num_hit_tokens
            longest = op.shared_prefix_boundary or hit
        m = (n - 1) // bs
        first = hit // bs
        pool = self.scheduler.kv_cache_manager.block_pool
        statuses = []
        pending_for = None
        for i in range(first, m):
            s = self._status(req, i, pool)
            if s[0] == "cold":
                if pending_for is None:   # live requests that have the hash, not cached yet
                    sched = self.scheduler
                    pending_for = [r for r in (*sched.running, *sched.kv_holding_waiting,
                                               *sched.waiting) if r is not req]
                pending_for = [r for r in pending_for if _has(r, i, req.block_hashes[i])]
                if pending_for:
                    s = ("cold", {"pending_in": [r.request_id for r in pending_for]})
            statuses.append(s)
        window = self._window(req, longest, pool) if longest > hit else None
        self._pending[req.request_id] = _Pending(n, longest, first, statuses, window)

    def _status(self, req, i: int, pool) -> tuple[str, Any]:
        h = req.block_hashes[i]
        found = (pool.get_cached_block(h, list(self.first_group_ids)) if self.other_groups
                 else pool.get_cached_block(h))
        if found is not None:
            block = found[0] if isinstance(found, list) else found
            return ("present", {"cached_in_block": block.block_id})
        key = pool.key(h, self.first_group_ids[0])
        past = self.history
        k = past.index.get(key)
        if k is not None and past.closed[k]:
            d = {"block_id": past.block[k], "cached_by": past.cached_by[k],
                 "cached_at": _at(past.cached_at[k]), "evicted_at": _at(past.removed_at[k]),
                 "cause": _CAUSES[past.cause[k]], "taken_by": past.taken_by[k]}
            if past.closed[k] > 1:
                d["copies"] = past.closed[k]
            return ("evicted", d)
        if self.index_tokens:
            had = self.owners.get(self._digest(req, i))
            owners = [o for o in map(self.history.owner, had if isinstance(had, list)
                                     else () if had is None else (had,))
                      if o.key != key]
            if owners:
                mine = self._extras_of(req, i)
                names = ("cache_salt", "lora", "mm", "hash_seed")

                def which(o: Owner) -> list[str]:
                    return [nm for nm, a, b in zip(names, mine, o.extras) if a != b]
                best = min(reversed(owners), key=lambda o: len(which(o)))
                present = pool.cached_block_hash_to_block.get_one_block(best.key) is not None
                return ("different_key", {"which": which(best), "other_request": best.request_id,
                                          "present": present})
        return ("cold", None)

    def _window(self, req, longest: int, pool) -> dict:
        """The later attention groups that lacked a block of the run the hit needed there."""
        bs = self.block_size
        end = longest // bs
        first_key = self.first_group_ids[0]
        groups = []
        for ids, need in self.other_groups:
            missing = []
            for i in range(max(0, end - need), end):
                h = req.block_hashes[i]
                if pool.get_cached_block(h, list(ids)) is not None:
                    continue
                key = pool.key(h, ids[0])
                if key in self.history.index:
                    status = "evicted"
                elif pool.key(h, first_key) in self.history.index:
                    status = "not_retained"
                else:
                    status = "cold"
                missing.append({"block_index": i, "status": status})
            if missing:
                groups.append({"group": ids[0], "missing": missing})
        return {"groups": groups}

    # -- the admission -------------------------------------------------------------------------
    def _admitted(self, op) -> None:
        rid = op.request_id
        req = self.scheduler.requests.get(rid)
        if req is None:
            return
        pending = self._pending.pop(rid, None)
        if pending is None and req.num_computed_tokens > 0:
            return            # an async load done: the lookup was explained at its admission
        split = self._split(req, op, pending)
        (self.resumed_split if req.num_preemptions > 0 else self.prompt_split)[rid] = split

    def _split(self, req, op, p: _Pending | None) -> Split:
        n = req.num_tokens if p is None else p.num_tokens
        ext = op.external_hit_tokens
        now = (self.event, self.engine_step)
        counts = dict.fromkeys(KEYS, 0)
        if req.skip_reading_prefix_cache or p is None:
            reason = ("prompt_logprobs" if req.prompt_logprobs is not None
                      else "skip_reading_prefix_cache" if req.skip_reading_prefix_cache
                      else "caching_disabled")
            skipped = n if req.skip_reading_prefix_cache else n - ext
            counts["skipped"], counts["external_hit"] = skipped, n - skipped
            segs = []
            if n - skipped:
                segs.append((0, n - skipped, "external_hit", {"medium": EXTERNAL_MEDIUM}))
            segs.append((n - skipped, n, "skipped", {"reason": reason}))
            return Split(tuple(counts.values()), tuple(segs), *now, n)
        bs = self.block_size
        hit = op.local_hit_tokens
        k, m = n // bs, (n - 1) // bs
        covered = max(hit + ext, p.longest)
        counts["hit"], counts["external_hit"] = hit, ext
        counts["window"] = max(0, p.longest - hit - ext)
        counts["partial_block"] = n - k * bs
        last = bs if (n % bs == 0 and n >= bs and covered <= m * bs) else 0
        counts["last_token"] = last
        segs: list[tuple[int, int, str, Any]] = []
        if hit:
            table = self.scheduler.kv_cache_manager.req_to_blocks.get(req.request_id, ())
            segs.append((0, hit, "hit", {"block_ids": [b.block_id for b in table[:hit // bs]]}))
        if ext:
            segs.append((hit, hit + ext, "external_hit", {"medium": EXTERNAL_MEDIUM}))
        if counts["window"]:
            segs.append((hit + ext, p.longest, "window", p.window))
        cat = None                # a block still cached takes the category before it
        for i in range(covered // bs, m):
            own, detail = p.statuses[i - p.first]
            if own != "present":
                cat = own
            elif cat is None:
                cat = "cold"
            counts[cat] += bs
            if segs and segs[-1][1:] == (i * bs, cat, detail):   # the segment before goes on
                segs[-1] = (segs[-1][0], (i + 1) * bs, *segs[-1][2:])
            else:
                segs.append((i * bs, (i + 1) * bs, cat, detail))
        if last:
            segs.append((m * bs, k * bs, "last_token", None))
        if counts["partial_block"]:
            segs.append((k * bs, n, "partial_block", None))
        assert sum(counts.values()) == n, (counts, n)
        return Split(tuple(counts.values()), tuple(segs), *now, n)


# What the explainer does with an op of each kind (``on_op``; eviction and popleft apart)
_HANDLE = {"cache": Explainer._cached, "reset": Explainer._reset, "restart": Explainer._restart,
           "lookup": Explainer._lookup, "admit": Explainer._admitted,
           "finish": Explainer._finished}


def _same_owner(e: int | Owner, owner: int | Owner) -> bool:
    """Whether owner entry ``e`` is of the same key and extras as ``owner`` (a key's number
    stands for the key with the extras its number keeps)."""
    if type(owner) is int:
        return e == owner
    return type(e) is Owner and e.key == owner.key and e.extras is owner.extras


def _has(r, i: int, h: bytes) -> bool:
    return len(r.block_hashes) > i and r.block_hashes[i] == h


def _at(t: int) -> dict[str, int]:
    return {"event": t >> 32, "engine_step": t & 0xFFFF_FFFF}
