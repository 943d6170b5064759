"""The whole hit-rate curve of a trace in one pass: sequence mode at every pool size, exactly.

:func:`curve_sequence` reads a trace once and returns a :class:`SequenceCurve`: for every pool
size ``N >= 1`` the point :func:`blockviz.sim.capacity.replay_sequence` gives at that size
(queries, hits, requests, rejected, evictions; either free order), and the step function of the
hits. The replay stays the reference: the tests compare the two at every pool size.

Why one pass can be exact
-------------------------
A request of ``n`` prompt tokens has ``F = n // bs`` full blocks, ``B = ceil(n / bs)`` blocks,
``p = B - F`` and hit limit ``L = (n - 1) // bs``. Its *path* is its full blocks' keys
``v_0 .. v_{F-1}``; a key fixes its parent, so the paths form a trie. In sequence mode every
block is free before each request.

1. **Rejection.** With every block free, ``allocate_slots`` needs ``B`` blocks (the new ones plus
   the hits, all in the free queue): a request is rejected exactly when ``B > N``, and then
   nothing changes.
2. **The free queue is an LRU stack.** Call *items* the blocks with a hash and, in the append
   order, also freed partial blocks. A request takes its hits out of the queue, pops ``B - h``
   blocks at the head, and frees its table reversed: ``[partial (append)], v_{F-1} .. v_0`` go
   to the tail (split sends the partial to the head). By induction over the requests a size
   admits, the queue at size ``N`` is, head first: the last request's partial if split (``q =
   p``; ``q = 0`` in append), then the top ``N - q`` items of the stack ``S_N`` built by moving
   each admitted request's items to the top in that order. The items below are the blocks popped
   (evicted if hashed); an item below depth ``N - q`` never comes back, since depths only grow
   until an item is moved. A key is cached iff one of its items is within depth ``N - q``.
3. **Prefix closure.** A parent is freed after its child and moves with it, so some item of every
   cached key's parent lies nearer the tail: cached keys are prefix-closed and ``hits = #{i < L:
   v_i cached}``. One cached key is not touched: ``v_{F-1}`` when ``n`` is a multiple of ``bs``
   (``L = F - 1``). vLLM then caches a second block with that hash; the old one stays where it was
   (a **duplicate**), lookups return the first inserted, so the next touch of the key moves the
   oldest copy in the queue and leaves the newest where it was. The old copy can be kept as an item
   at *every* size: where ``v_{F-1}`` was not cached, or the copy is pushed out at once, it sits
   below ``N - q``, where nothing is cached again (2), so it changes nothing there.
4. **Truncation.** By 2, sizes up to ``T`` whose stacks agree to depth ``T`` (and on ``q``) behave
   alike from then on.
5. **One pass.** The *canonical* stack is ``S_N`` with no request rejected and no duplicate; it is
   the same at every size, and a key's depth in it is its stack distance (kept per run of blocks
   one earlier request left, with a Fenwick tree over requests). The sizes are partitioned into
   intervals that share one state: ``C`` the canonical stack; ``D`` the canonical stack plus
   duplicates, each at a fixed place (above the remaining blocks of the request that held it) and
   from a *threshold* size on; ``E`` an explicit stack, cut at the interval's top size (4). A
   rejection splits an interval at ``B`` (below it, ``E`` keeps the stack before the request). A
   touch of a key with duplicates moves, at each size, the oldest copy in the queue there (a copy
   at depth ``d`` is in it at ``N >= d + q``, counting the duplicates above it that are there):
   the copy taken at the sizes from ``t`` on, the newest copy stays in its place at those sizes
   only, so it gets threshold ``t``, and a copy taken at some sizes keeps a threshold where an older
   one is taken instead. Those sizes are one range from a first size on unless two thresholds
   above a copy coincide; that is checked, and then the interval splits instead. A threshold a
   copy's depth has passed is dropped; ``E`` becomes ``C`` again once the distinct blocks
   accessed since its last rejected request fill it; equal neighbours merge. Within an interval,
   hits are ``#{i < L: depth(v_i) <= N - q}``: ramps in ``N`` (cut where a threshold above changes
   the depth), kept as slope changes, so the step function comes out whole.
6. **Evictions** by conservation: each block a request caches (``F - h``) is evicted later or is
   still cached at the end: ``evictions = sum(F - h) - (hashed blocks in the queue at the end)``.

Cost: per request, a walk over its trace blocks, a few Fenwick-tree steps per run of blocks (not
per block, so block size 16 costs about what 512 does), and a few steps per ``D``/``E`` interval
above its ``B``. Memory: the trace's distinct 512-token prefixes and a few numbers per request.
Duplicates cost more: every touch of a key with copies looks at its copies.
"""
from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable
from itertools import accumulate

from blockviz.scenario.trace import TraceRequest, check_block_size, check_trace, iter_trace
from blockviz.sim.capacity import (
    KNEE_FRACTION,
    OptionError,
    Progress,
    counted,
    geometric_sizes,
    hit_rate,
    running_total,
)
from blockviz.sim.explain_trace import add_explain
from blockviz.sim.optimal import add_optimal
from blockviz.sim.sweep import SweepResult, check_pools

_C, _D, _E = 0, 1, 2     # interval states: canonical, canonical + duplicates, explicit
_BOTTOM = ((-1, 0, 0, 0),)   # an empty last segment below every request: the duplicates left come above it


class _Iv:
    """Pool sizes ``lo..hi`` (``hi`` None: no bound) that share one state (module docstring, 5)."""
    __slots__ = ("lo", "hi", "kind", "segs", "T", "plast", "dead", "live", "Z", "new")

    def __init__(self, lo, hi, kind, segs=(), T=0, plast=0, dead=(), live=None, Z=-1) -> None:
        self.lo, self.hi, self.kind = lo, hi, kind
        # E: the stack as segments (request, first block, end block, partial item), top first,
        # cut at T items; plast: the last admitted request's partial flag (split); Z: the last
        # request this interval rejected (its stack agrees with the canonical one to the depth of
        # the distinct blocks accessed since).
        self.segs, self.T, self.plast, self.Z = segs, T, plast, Z
        # D, E: duplicates (request y, block i, key, stamp, threshold) top first: a second block
        # of the key at block i of y's path, above y's remaining chunk, in the queue at the sizes
        # from the threshold on (0: every size; E's are 0); live: key -> stamp of the copy the
        # canonical stack holds (stamps order the copies as vLLM's map does: first inserted first)
        self.dead = dead
        self.live = live
        self.new = True


class _Fenwick:
    """Prefix sums over a growing array: the items each request's chunk still holds."""
    __slots__ = ("tree", "total")

    def __init__(self) -> None:
        self.tree = [0]
        self.total = 0

    def prefix(self, i: int) -> int:
        tree = self.tree
        s = 0
        while i:
            s += tree[i]
            i &= i - 1
        return s

    def add(self, i: int, delta: int) -> None:
        tree = self.tree
        n = len(tree)
        i += 1
        while i < n:
            tree[i] += delta
            i += i & -i
        self.total += delta

    def append(self, value: int) -> None:
        i = len(self.tree)
        self.tree.append(value + self.prefix(i - 1) - self.prefix(i - (i & -i)))
        self.total += value


_META: dict[int, tuple] = {}


def _meta(dead: tuple) -> tuple:
    """Per duplicates tuple, computed once: (keys for bisect: -request, top first; the thresholds
    above 0, sorted; key -> indices of its copies)."""
    got = _META.get(id(dead))
    if got is not None and got[0] is dead:
        return got[1]
    by_node: dict[int, list[int]] = {}
    for k, x in enumerate(dead):
        by_node.setdefault(x[2], []).append(k)
    meta = ([-x[0] for x in dead], sorted({x[4] for x in dead if x[4]}), by_node)
    if len(_META) > 4096:
        _META.clear()
    _META[id(dead)] = (dead, meta)
    return meta


def _sort_dead(dead) -> tuple:
    return tuple(sorted(dead, key=lambda x: (-x[0], x[1])))


def _keep_live(live, dead):
    if not dead:
        return None
    keys = {x[2] for x in dead}
    return {k: s for k, s in live.items() if k in keys}


def _cut(segs, dead, depth: int):
    """The top ``depth`` items of a stack (segments and duplicates interleaved by position)."""
    out_s, out_d = [], []
    got = di = 0
    nd = len(dead)
    for seg in (*segs, *_BOTTOM):
        y, c, e, pf = seg
        while di < nd and dead[di][0] >= y and got < depth:
            out_d.append(dead[di])
            got += 1
            di += 1
        if got >= depth:
            break
        room = depth - got
        k = e - c + pf
        if k <= room:
            if k:
                out_s.append(seg)
            got += k
        else:
            out_s.append((y, c, c + room, 0))
            got = depth
    return tuple(out_s), tuple(out_d)


class _Pass:
    """One pass over a trace: the canonical stack, the trie of keys, the intervals."""

    def __init__(self, block_size: int, free_order: str) -> None:
        self.bs = block_size
        self.bt = None                # the tokens one hash id covers (the first request's)
        self.per = self.group = 1     # blocks per hash block / hash blocks per block
        self.append_order = free_order == "append"
        self.trie: dict[int, int] = {}   # (parent id << 53 | hash id) -> trie id
        self.last: list[int] = []     # block size 512: per trie node, the latest request with it
        self.stair: list = []         # smaller blocks: per trie node, [(request, full sub-blocks)]
        self.tids: list[list[int]] = []   # per request: trie ids of its trace blocks with a full block
        self.F: list[int] = []
        self.P: list[int] = []
        self.c: list[int] = []        # canonical: first block of the request's remaining chunk
        self.w: list[int] = []        # canonical: items that chunk holds
        self.fen = _Fenwick()
        self.down: list[int] = []     # skip pointers over requests whose chunk is empty
        self.p_prev = 0
        self.distinct = 0
        self.stamp = 0
        self.ivs = [_Iv(1, None, _C)]
        self.jumps: dict[int, int] = {}
        self.slopes: dict[int, int] = {}
        self.lengths: list[tuple[int, int, int]] = []
        self.memo: dict[int, int] = {}          # request -> items above its chunk (this step)
        self.memo_before: dict[int, int] = {}

    # -- keys -------------------------------------------------------------------------------
    def common(self, r: int, y: int) -> int:
        """Blocks the paths of requests r and y share."""
        a, b = self.tids[r], self.tids[y]
        hi = min(len(a), len(b))
        if not hi or a[0] != b[0]:
            return 0
        if a[hi - 1] == b[hi - 1]:
            lo = hi
        else:
            lo = 1
            hi -= 1
            while lo < hi:            # trie ids: equal at j means equal before j
                mid = (lo + hi) // 2
                if a[mid] == b[mid]:
                    lo = mid + 1
                else:
                    hi = mid
        return min(lo * self.per // self.group, self.F[r], self.F[y])

    def node(self, r: int, i: int) -> int:
        """Block i of request r's path, as a number (the same for every request through it)."""
        per, group = self.per, self.group
        if group > 1:
            return self.tids[r][(i + 1) * group - 1]
        return self.tids[r][i // per] * per + i % per

    def set_block_tokens(self, block_tokens: int) -> None:
        """The trace's hash block (from its first request): blocks per hash block or the reverse."""
        if self.bt is None:
            check_block_size(self.bs, block_tokens)
            self.bt = block_tokens
            if self.bs <= block_tokens:
                self.per = block_tokens // self.bs
            else:
                self.group = self.bs // block_tokens
        elif block_tokens != self.bt:
            raise ValueError(f"one trace mixes {self.bt}- and {block_tokens}-token hash blocks")

    # -- the canonical stack ----------------------------------------------------------------
    def w_after(self, y: int) -> int:
        """Items above request y's chunk: the distinct blocks (and, append, partials) since y."""
        return self.fen.total - self.fen.prefix(y + 1)

    def w_memo(self, y: int, memo: dict[int, int]) -> int:
        """:meth:`w_after`, kept in ``memo`` (one of this step's)."""
        wa = memo.get(y)
        if wa is None:
            wa = memo[y] = self.w_after(y)
        return wa

    def canon_top(self, depth: int, start: int) -> list[tuple]:
        """The canonical stack from request ``start`` down, as segments, ``depth`` items or more."""
        segs = []
        got = 0
        t = self._find(start)
        c, w, F, P, app = self.c, self.w, self.F, self.P, self.append_order
        while t >= 0 and got < depth:
            segs.append((t, c[t], F[t], P[t] if app else 0))
            got += w[t]
            t = self._find(t - 1)
        return segs

    def _find(self, t: int) -> int:
        down = self.down
        root = t
        while root >= 0 and down[root] != root:
            root = down[root]
        while t >= 0 and down[t] != t:
            down[t], t = root, down[t]
        return root

    def _walk(self, r: int, hash_ids, F: int):
        """The request's trie ids, and its path's canonical owners: runs [y, i_lo, i_hi] of
        blocks whose latest accessor is y (the top of y's chunk); marks r as their accessor."""
        per, group = self.per, self.group
        trie = self.trie
        tids = []
        runs: list[list[int]] = []
        parent = -1
        covered = 0
        if per == 1:                  # a block = `group` (>= 1) hash blocks: keyed by the last one's node
            last = self.last
            seen = True
            end = group - 1
            for j, h in enumerate(hash_ids[:F * group]):
                key = parent << 53 | h
                u = trie.get(key)
                if u is None:
                    u = trie[key] = len(last)
                    last.append(-1)
                tids.append(u)
                parent = u
                if j % group != end:
                    continue
                y = last[u]
                if y < 0:
                    seen = False
                elif seen:
                    if runs and runs[-1][0] == y:
                        runs[-1][2] += 1
                    else:
                        runs.append([y, covered, covered + 1])
                    covered += 1
                last[u] = r
            return tids, runs, covered
        stair = self.stair
        seen = True
        base = 0
        for h in hash_ids[:-(-F // per)]:
            key = parent << 53 | h
            u = trie.get(key)
            fj = F - base if F - base < per else per
            if u is None:
                u = trie[key] = len(stair)
                stair.append([(r, fj)])
                seen = False
            else:
                st = stair[u]
                if seen:
                    s = 0
                    for y, f in st:
                        if s >= fj:
                            break
                        top = f if f < fj else fj
                        if top > s:
                            if runs and runs[-1][0] == y and runs[-1][2] == base + s:
                                runs[-1][2] = base + top
                            else:
                                runs.append([y, base + s, base + top])
                            s = top
                    covered = base + s
                    seen = s == fj
                stair[u] = [(r, fj)] + [x for x in st if x[1] > fj]
            tids.append(u)
            parent = u
            base += per
        return tids, runs, covered

    # -- one request --------------------------------------------------------------------------
    def step(self, r: int, req: TraceRequest) -> None:
        bs = self.bs
        n = req.input_length
        F, B = n // bs, -(-n // bs)
        p = B - F
        self.lengths.append((B, n, F))
        if req.block_tokens != self.bt:
            self.set_block_tokens(req.block_tokens)
        tids, runs, covered = self._walk(r, req.hash_ids, F)
        self.tids.append(tids)
        self.F.append(F)
        self.P.append(p)
        fen = self.fen
        total = fen.total
        canon = [(y, i_lo, i_hi, total - fen.prefix(y + 1) + 1) for y, i_lo, i_hi in runs]

        self.memo_before = {}
        req_ = _Request(self, r, F, p, B, (n - 1) // bs, n % bs == 0 and covered == F and F > 0, canon)
        out: list[_Iv] = []
        for iv in self.ivs:
            lo, hi = iv.lo, iv.hi
            if lo < B:                                   # rejected at lo..min(hi, B - 1)
                top = hi if hi is not None and hi < B else B - 1
                if iv.kind == _E:
                    if top == hi:
                        iv.new = False
                        iv.Z = r
                        out.append(iv)
                    else:
                        out.append(_Iv(lo, top, _E, iv.segs, iv.T, iv.plast, iv.dead, iv.live, r))
                else:
                    top_segs = self.canon_top(top, r - 1)
                    for a, b, dead in _by_threshold(iv.dead, lo, top):
                        segs, dead = _cut(top_segs, dead, top)
                        out.append(_Iv(a, b, _E, segs, top, 0 if self.append_order else self.p_prev,
                                       dead, _keep_live(iv.live, dead), r))
                if top == hi:
                    continue
                lo = B
            req_.accept(iv, lo, hi, out)

        # the canonical update: the path's blocks move to r's chunk
        c, w, down = self.c, self.w, self.down
        for y, i_lo, i_hi in runs:
            k = i_hi - i_lo
            c[y] = i_hi
            w[y] -= k
            fen.add(y, -k)
            if not w[y]:
                down[y] = y - 1
        weight = F + p if self.append_order else F
        c.append(0)
        w.append(weight)
        fen.append(weight)
        down.append(r if weight else r - 1)
        self.distinct += F - covered
        self.p_prev = p
        self.memo = {}
        self.ivs = self._normalize(out)

    def _normalize(self, ivs: list[_Iv]) -> list[_Iv]:
        """Duplicates evicted at the smaller sizes of an interval split it; E goes back to C once
        its stack agrees with the canonical one to its top size; equal neighbours merge."""
        merged: list[_Iv] = []
        for iv in ivs:
            if iv.new and iv.dead:
                self._collect(iv)
            if iv.kind == _E and iv.new and not iv.dead and self.w_after(iv.Z) >= iv.hi:
                iv = _Iv(iv.lo, iv.hi, _C)
            if merged and (iv.new or merged[-1].new) and _same(merged[-1], iv):
                prev = merged[-1]
                prev.hi = iv.hi
                if prev.kind == _E:
                    prev.T = min(prev.T, iv.T)
                    prev.Z = max(prev.Z, iv.Z)
                prev.new = True
            else:
                merged.append(iv)
        for iv in merged:
            iv.new = False
        return merged

    def _collect(self, iv: _Iv) -> None:
        """Drop the duplicates that are out of the queue at every size of the interval (deeper
        than hi - q): they never come back. A threshold below which the copy would be out of the
        queue anyway is dropped (it becomes 0)."""
        q = 0 if self.append_order else (iv.plast if iv.kind == _E else self.p_prev)
        if iv.kind == _E:
            if iv.hi is None:
                return
            depth = _e_dead_depths(iv.segs, iv.dead)
            keep = tuple(x for x, d in zip(iv.dead, depth) if d + q <= iv.hi)
        else:
            keep = _graduate_and_drop(self, iv.dead, iv.hi, q)
            if keep is iv.dead:
                return
        if keep != iv.dead:
            iv.dead = keep
            iv.live = _keep_live(iv.live, keep)
            if iv.kind == _D and not keep:
                iv.kind = _C


def _graduate_and_drop(ps: _Pass, dead: tuple, hi: int | None, q: int) -> tuple:
    """``_collect`` on the canonical stack. A copy's depth + q is at least ``low`` = items above
    its request's chunk + 1 + the copies above it with threshold 0 + q, which grows with its place:
    so the copies deeper than hi - q at every size are a tail of the list (found from the end), and
    only the copies with a threshold need looking at for the rest."""
    memo = ps.memo
    taus = _meta(dead)[1]
    if not taus and hi is None:
        return dead
    above0 = []           # copies with threshold 0 above each one
    n0 = 0
    for x in dead:
        above0.append(n0)
        if not x[4]:
            n0 += 1
    end = len(dead)
    if hi is not None:
        while end and max(ps.w_memo(dead[end - 1][0], memo) + 1 + above0[end - 1] + q, dead[end - 1][4]) > hi:
            end -= 1
    out = list(dead[:end])
    changed = end < len(dead)
    if taus:
        for k, x in enumerate(out):
            if x[4] and ps.w_memo(x[0], memo) + 1 + above0[k] + q >= x[4]:
                out[k] = x[:4] + (0,)
                changed = True
    return tuple(out) if changed else dead


def _by_threshold(dead, lo: int, hi: int | None) -> list[tuple]:
    """Split sizes lo..hi where a duplicate's threshold falls: (a, b, the duplicates in the queue
    at every size of a..b, thresholds 0)."""
    taus = _meta(dead)[1] if dead else ()
    if not taus:
        return [(lo, hi, dead)]
    return [(a, b, tuple(x if not x[4] else x[:4] + (0,) for x in dead if x[4] <= a))
            for a, b in _ranges(lo, hi, taus)]


def _ranges(lo: int, hi: int | None, cuts) -> list[tuple[int, int | None]]:
    """Sizes lo..hi split where each of the sorted sizes ``cuts`` within it begins a part: (a, b)."""
    bounds = [lo] + [t for t in cuts if t > lo and (hi is None or t <= hi)]
    return [(a, bounds[j + 1] - 1 if j + 1 < len(bounds) else hi) for j, a in enumerate(bounds)]


def _first_size(base: int, above: list[int], start: int, hi: int | None):
    """The first size N >= start (up to hi) at which a copy is in the queue: N >= base + (copies
    above it with threshold <= N); None if none; False if the sizes where it is are not every size
    from there on (at a threshold shared by two copies above it, it may drop out again)."""
    n = start
    while True:
        need = base + bisect.bisect_right(above, n)
        if need <= n:
            break
        n = need
        if hi is not None and n > hi:
            return None
    for t in above:
        if t > n and (hi is None or t <= hi) and base + bisect.bisect_right(above, t) > t:
            return False
    return n


def _e_dead_depths(segs, dead) -> list[int]:
    out = []
    cum = di = 0
    for y, c, e, pf in (*segs, *_BOTTOM):
        while di < len(dead) and dead[di][0] >= y:
            cum += 1
            out.append(cum)
            di += 1
        cum += e - c + pf
    return out


def _same(a: _Iv, b: _Iv) -> bool:
    if a.kind != b.kind:
        return False
    if a.kind == _C:
        return True
    if a.dead != b.dead or a.live != b.live:
        return False
    if a.kind == _D:
        return True
    if a.plast != b.plast or a.T < b.hi:
        return False
    return _cut(a.segs, a.dead, b.hi) == _cut(b.segs, b.dead, b.hi)


class _Request:
    """One request's pass over the intervals that admit it."""
    __slots__ = ("ps", "r", "F", "p", "B", "L", "eligible", "canon", "cps", "path", "grown")

    def __init__(self, ps: _Pass, r, F, p, B, L, eligible, canon) -> None:
        self.ps, self.r, self.F, self.p, self.B, self.L = ps, r, F, p, B, L
        self.eligible = eligible      # n a multiple of bs, v_{F-1} seen: maybe a duplicate
        self.canon = canon
        self.cps: dict[int, int] = {}
        self.path: set[int] | None = None
        self.grown: dict = {}         # duplicates tuple -> it with this request's new copy

    def accept(self, iv: _Iv, lo: int, hi: int | None, out: list[_Iv]) -> None:
        ps = self.ps
        if iv.kind == _E:
            runs = self.e_runs(iv.segs, iv.dead)
            q = 0 if ps.append_order else iv.plast
            self.ramp(lo, hi, q, runs)
        else:
            q = 0 if ps.append_order else ps.p_prev
            runs = self.canon
            for a, b, dead in _by_threshold(iv.dead, lo, hi):
                if dead:          # the duplicates above y's chunk push its blocks down
                    keys = _meta(dead)[0]
                    self.ramp(a, b, q, [(y, i, j, d + bisect.bisect_right(keys, -y))
                                        for y, i, j, d in runs])
                else:
                    self.ramp(a, b, q, runs)
        if not iv.dead and not self.eligible:       # the common case: no duplicate involved
            if iv.kind == _E:
                segs = self.e_update(iv.segs, iv.T)
                nv = _Iv(lo, hi, _E, segs, iv.T, 0 if ps.append_order else self.p, (), None, iv.Z)
            elif iv.lo == lo:
                iv.new = True
                nv = iv
            else:
                nv = _Iv(lo, hi, _C)
            out.append(nv)
            return
        parts = None if iv.kind == _E else self.touch_by_threshold(iv, lo, hi, q)
        if parts is None:       # E, or copies whose sizes in the queue are no single range
            parts = []
            for a, b, dead in _by_threshold(iv.dead, lo, hi):
                parts += self.touch(iv.kind, iv.segs, dead, iv.live or {}, a, b, q)
        if self.eligible and runs and runs[-1][2] == self.F:
            # v_{F-1} cached: a second block gets its hash and the old copy stays where it was.
            # It is kept at every size of the interval: where v_{F-1} was not cached, or the copy
            # is pushed out at once, its place is below N - q and nothing there is ever cached.
            y = runs[-1][0]
            v = ps.node(self.r, self.F - 1)
            done = []
            for a, b, dd, lv in parts:
                old = lv.get(v)
                if old is None:
                    ps.stamp += 1
                    old = ps.stamp
                key = (id(dd), id(lv))        # parts that had one state share the new one
                grown = self.grown.get(key)
                if grown is None or grown[0] is not dd or grown[1] is not lv:
                    ps.stamp += 1
                    new_live = dict(lv)
                    new_live[v] = ps.stamp
                    grown = self.grown[key] = (dd, lv, _sort_dead(dd + ((y, self.F - 1, v, old, 0),)),
                                               new_live)
                done.append((a, b, grown[2], grown[3]))
            parts = done
        for a, b, dd, lv in parts:
            if iv.kind == _E:
                segs, dd = _cut(self.e_update(iv.segs, None), dd, iv.T)
                nv = _Iv(a, b, _E, segs, iv.T, 0 if ps.append_order else self.p, dd,
                         _keep_live(lv, dd), iv.Z)
            else:
                nv = _Iv(a, b, _D if dd else _C, (), 0, 0, dd, _keep_live(lv, dd))
            out.append(nv)

    def owner(self, i: int, runs) -> int:
        return next(y for y, a, b, _ in runs if a <= i < b)

    def touch_by_threshold(self, iv: _Iv, lo: int, hi: int | None, q: int) -> list[tuple] | None:
        """``touch`` for the canonical stack without splitting the interval: a copy in the queue at
        the sizes N >= t of the interval gets threshold t (see ``_Iv.dead``). None when some copy
        of a touched key is in the queue at sizes that are not one such range (two thresholds
        above it at one size): then the caller splits the interval."""
        dead, live = iv.dead, iv.live or {}
        mine = self.touched(dead, live)
        if not mine:
            return [(lo, hi, dead, live)]
        memo, ps = self.ps.memo_before, self.ps
        thresholds = {}
        for ks in mine.values():
            for k in ks:
                x = dead[k]
                t = _first_size(ps.w_memo(x[0], memo) + 1 + q, sorted(z[4] for z in dead[:k]),
                                max(lo, x[4]), hi)
                if t is False:
                    return None
                thresholds[k] = t
        dd, lv = list(dead), dict(live)
        for v, ks in mine.items():
            older = None          # from where an older copy is in the queue (at the end: the first taken)
            for k in ks:
                t = thresholds[k]
                x = dead[k]
                if t is not None:
                    # taken where it is the oldest copy in the queue: sizes t .. older - 1
                    dd.remove(x)
                    if older is not None:
                        dd.append(x[:4] + (max(x[4], older),))
                    older = t if older is None else min(older, t)
            if older is not None:
                i = dead[ks[0]][1]
                y = self.owner(i, self.canon)
                dd.append((y, i, v, lv[v], older if older > lo else 0))
                lv[v] = min(x[3] for x in dd if x[2] == v) - 1      # the live copy: the oldest
        return [(lo, hi, _sort_dead(dd), lv)]

    def touched(self, dead, live) -> dict[int, list[int]]:
        """Keys on the request's hit path that have copies older than the one the canonical stack
        moves: key -> indices of those copies, oldest first."""
        by_node = _meta(dead)[2]
        path = self.path_nodes()
        mine: dict[int, list[int]] = {}
        for v in (by_node if len(by_node) < len(path) else path):
            if v in path and v in by_node:
                older = sorted((k for k in by_node[v] if dead[k][3] < live[v]), key=lambda k: dead[k][3])
                if older:
                    mine[v] = older
        return mine

    def path_nodes(self) -> set[int]:
        """The keys of the request's hittable blocks (computed once)."""
        if self.path is None:
            node, r = self.ps.node, self.r
            self.path = {node(r, i) for i in range(min(self.L, self.F))}
        return self.path

    def touch(self, kind, segs, dead, live, lo: int, hi: int | None, q: int) -> list[tuple]:
        """Hits on keys with duplicates: the first-inserted copy in the queue is the one touched;
        if that is a duplicate, it moves with the request and the copy the canonical stack moves
        stays behind as the duplicate. Which copies are in the queue depends on the size (a copy
        at depth d is there at N >= d + q), so the interval splits at those sizes: (lo, hi, dead,
        live) per part. Every copy in ``dead`` is at every size of lo..hi (threshold 0)."""
        mine = self.touched(dead, live)
        if not mine:
            return [(lo, hi, dead, live)]
        runs = self.e_runs(segs, dead) if kind == _E else self.canon
        ps = self.ps               # each copy's depth, counting every copy above it
        depth = (_e_dead_depths(segs, dead) if kind == _E else
                 [ps.w_memo(x[0], ps.memo_before) + k + 1 for k, x in enumerate(dead)])
        # (key, [(threshold, index)] oldest first)
        events = [(v, [(depth[k] + q, k) for k in ks]) for v, ks in mine.items()]
        parts = []
        for a, b in _ranges(lo, hi, sorted({t for _, cs in events for t, _ in cs})):
            dd, lv = list(dead), dict(live)
            for v, cs in events:
                k = next((k for t, k in cs if t <= a), None)    # the oldest copy in the queue
                if k is None:
                    continue
                x = dead[k]
                dd.remove(x)
                dd.append((self.owner(x[1], runs), x[1], v, lv[v], 0))   # the copy left behind
                lv[v] = x[3]
            parts.append((a, b, _sort_dead(dd), lv))
        return parts

    def common(self, y: int) -> int:
        v = self.cps.get(y)
        if v is None:
            v = self.cps[y] = self.ps.common(self.r, y)
        return v

    def ramp(self, a: int, b: int | None, q: int, runs) -> None:
        """Hits for sizes a..b: a run's blocks i < L at depths d, d+1, ... are hits at N >= d + q."""
        L = self.L
        jumps, slopes = self.ps.jumps, self.ps.slopes
        at_a = at_b = 0
        for _, i_lo, i_hi, d in runs:
            k = (i_hi if i_hi < L else L) - i_lo
            if k <= 0:
                break
            s = d + q
            if a >= s:
                at_a += k if a - s + 1 >= k else a - s + 1
            first = s if s > a else a + 1
            end = s + k - 1
            if b is not None:
                if end > b:
                    end = b
                if b >= s:
                    at_b += k if b - s + 1 >= k else b - s + 1
            if first <= end:
                slopes[first] = slopes.get(first, 0) + 1
                slopes[end + 1] = slopes.get(end + 1, 0) - 1
        if at_a:
            jumps[a] = jumps.get(a, 0) + at_a
        if at_b:
            jumps[b + 1] = jumps.get(b + 1, 0) - at_b

    def e_runs(self, segs, dead):
        runs = []
        cum = nxt = di = 0
        nd = len(dead)
        for y, c, e, pf in segs:
            while di < nd and dead[di][0] >= y:
                cum += 1
                di += 1
            if c == nxt:
                cp = self.common(y)
                if cp > c:
                    top = cp if cp < e else e
                    runs.append((y, c, top, cum + 1))
                    nxt = top
            cum += e - c + pf
        return runs

    def e_update(self, segs, T):
        """The E stack after the request: its path on top, taken out of the segments below; cut
        at T items (None: not cut)."""
        pr = self.p if self.ps.append_order else 0
        got = self.F + pr
        out = [(self.r, 0, self.F, pr)] if got else []
        for y, c, e, pf in segs:
            if T is not None and got >= T:
                break
            cp = self.common(y)
            if cp > c:
                c = cp if cp < e else e
            k = e - c + pf
            if not k:
                continue
            if T is None or got + k <= T:
                out.append((y, c, e, pf))
                got += k
            else:
                out.append((y, c, c + T - got, 0))
                got = T
        return tuple(out)


class SequenceCurve:
    """Sequence mode at every pool size (module docstring): :meth:`point`, :meth:`steps`."""

    def __init__(self, ps: _Pass, free_order: str) -> None:
        self.block_size = ps.bs
        self.free_order = free_order
        self.requests = len(ps.lengths)
        blocks = sorted(ps.lengths)                  # (B, n, F) per request
        self._B = [b for b, _, _ in blocks]
        self._cum_n = [0, *accumulate(n for _, n, _ in blocks)]
        self._cum_F = [0, *accumulate(f for _, _, f in blocks)]
        # the hits in blocks: piecewise linear; at each breakpoint x, its value and slope
        jumps, slopes = ps.jumps, ps.slopes
        xs, vals, sl = [], [], []
        value = slope = 0
        prev = None
        for x in sorted(set(jumps) | set(slopes)):
            if prev is not None:
                value += slope * (x - prev)
            ds = slopes.get(x, 0)
            slope += ds
            value += jumps.get(x, 0) + ds
            xs.append(x)
            vals.append(value)
            sl.append(slope)
            prev = x
        self._xs, self._vals, self._sl = xs, vals, sl
        self._ps = ps
        self.largest = self._B[-1] if self._B else 0   # below it some request is rejected
        self.distinct_blocks = ps.distinct              # full blocks with distinct keys
        self.full_blocks = self._cum_F[-1]              # full blocks over every request
        self.working_set = self.distinct_blocks + self.largest

    def hit_blocks(self, pool_blocks: int) -> int:
        return hit_blocks_at(self._xs, self._vals, self._sl, pool_blocks)

    def breakpoints(self, lo: int = 1) -> tuple[list[int], list[int], list[int]]:
        """The hits in blocks at every pool size from ``lo`` on, compactly: ``(xs, vals,
        slopes)``, ``xs[0] == lo``, with ``hits(N) = vals[i] + slopes[i] * (N - xs[i])`` for the
        last ``xs[i] <= N`` (:func:`hit_blocks_at`) — exact at every whole N, a few numbers per
        change of slope where :meth:`steps` has one pair per size along a ramp."""
        xs, vals, sl = self._xs, self._vals, self._sl
        i = bisect.bisect_right(xs, lo) - 1
        return [lo] + xs[i + 1:], [self.hit_blocks(lo)] + vals[i + 1:], [sl[i] if i >= 0 else 0] + sl[i + 1:]

    def first_reaching(self, hit_blocks: int, lo: int = 1) -> int | None:
        """The smallest pool size from ``lo`` on whose hits are at least ``hit_blocks``; None if
        none is (:func:`first_reaching`)."""
        return first_reaching(*self.breakpoints(lo), hit_blocks)

    def point(self, pool_blocks: int) -> dict:
        """What ``replay_sequence`` gives at this pool size."""
        if pool_blocks < 1:
            raise ValueError(f"pool_blocks must be at least 1, not {pool_blocks}")
        k = bisect.bisect_right(self._B, pool_blocks)
        hits = self.hit_blocks(pool_blocks)
        return {"pool_blocks": pool_blocks, "queries": self._cum_n[k], "hits": hits * self.block_size,
                "requests": k, "rejected": self.requests - k,
                "evictions": self._cum_F[k] - hits - self._resident(pool_blocks)}

    def _resident(self, n: int) -> int:
        """Blocks with a hash in the queue at the end, at pool size n."""
        ps = self._ps
        iv = next(iv for iv in ps.ivs if iv.lo <= n and (iv.hi is None or n <= iv.hi))
        if iv.kind == _E:
            segs, q = iv.segs, iv.plast
        else:
            segs = ps.canon_top(n + 1, self.requests - 1) if self.requests else []
            q = ps.p_prev
        cap = n if ps.append_order else n - q
        s, d = _cut(segs, tuple(x for x in iv.dead if x[4] <= n), max(cap, 0))
        return sum(e - c for _, c, e, _ in s) + len(d)

    def ceiling(self) -> dict:
        """An infinite pool: every request admitted, nothing evicted (``capacity.ceiling``)."""
        hits = self._vals[-1] if self._vals else 0
        return {"queries": self._cum_n[-1], "hits": hits * self.block_size}

    def steps(self) -> list[list[int]]:
        """``[[pool_blocks, hits], ...]``: one block, then every size where the hits change."""
        bs = self.block_size
        out = [[1, self.hit_blocks(1) * bs]]
        last = out[0][1]
        xs, vals, sl = self._xs, self._vals, self._sl
        for j, x in enumerate(xs):
            start = max(x, 2)
            end = xs[j + 1] if j + 1 < len(xs) else start + 1
            if sl[j] == 0:
                end = min(end, start + 1)
            for pool in range(start, end):
                h = (vals[j] + sl[j] * (pool - x)) * bs
                if h != last:
                    out.append([pool, h])
                    last = h
        return out


def hit_blocks_at(xs, vals, slopes, pool_blocks: int) -> int:
    """The hits in blocks at ``pool_blocks`` of a curve given as :meth:`SequenceCurve.breakpoints`
    (0 before its first breakpoint). The capacity page's browser code evaluates the same form."""
    i = bisect.bisect_right(xs, pool_blocks) - 1
    if i < 0:
        return 0
    return vals[i] + slopes[i] * (pool_blocks - xs[i])


def first_reaching(xs, vals, slopes, hit_blocks: int) -> int | None:
    """The smallest whole pool size from ``xs[0]`` on at which the curve (as
    :meth:`SequenceCurve.breakpoints`) has at least ``hit_blocks`` hits; None if it never does.
    Each piece is linear, so its first such size is worked out, not searched."""
    for j, x in enumerate(xs):
        v, s = vals[j], slopes[j]
        if v >= hit_blocks:
            return x
        if s > 0:
            n = x + -(-(hit_blocks - v) // s)
            if j + 1 == len(xs) or n < xs[j + 1]:
                return n
    return None


def curve_sequence(trace: Iterable[TraceRequest], *, block_size: int, free_order: str = "split",
                   progress: Progress | None = None) -> SequenceCurve:
    """One pass over ``trace`` (see the module docstring); ``progress(n)`` every few hundred
    requests, with the number done since the last call."""
    check_block_size(block_size)
    if free_order not in ("split", "append"):
        raise ValueError(f"free_order must be split or append, not {free_order!r}")
    ps = _Pass(block_size, free_order)
    for r, req in enumerate(counted(trace, progress)):
        ps.step(r, req)
    return SequenceCurve(ps, free_order)


def curve_sweep(traces, *, block_size: int, pool_blocks, free_orders=("split",), mode: str = "sequence",
                limit: int | None = None, options: dict | None = None, executor=None,
                progress: Callable[[int, int], None] | None = None):
    """``blockviz trace capacity --curve``: :func:`blockviz.sim.sweep.sweep`'s result from one pass
    per (trace, free order), in this process; each report adds ``"curve"``
    (:meth:`SequenceCurve.steps`). Sequence mode only (``executor`` is not needed). Every trace is
    checked first; ``progress(done, total)`` counts requests over all passes."""
    if mode != "sequence" or options:
        raise OptionError("trace_opt_curve_mode")
    check_block_size(block_size)
    start = time.perf_counter()
    extents = [check_trace(t, block_size=block_size, limit=limit) for t in traces]
    check_pools(pool_blocks, extents, block_size)        # as the sweep refuses them
    total = sum(e["requests"] for e in extents) * len(free_orders)
    advance = running_total(progress, total)
    advance(0)
    reports = []
    for trace in map(str, traces):
        for order in free_orders:
            curve = curve_sequence(iter_trace(trace, limit=limit, block_size=block_size),
                                   block_size=block_size,
                                   free_order=order, progress=progress and advance)
            reports.append({"requests": curve.requests, "block_size": block_size, "free_order": order,
                            "ceiling": curve.ceiling(), "points": [curve.point(p) for p in pool_blocks],
                            "curve": curve.steps()})
    advance(total)
    return SweepResult(reports, time.perf_counter() - start)


# -- the capacity page's curves ---------------------------------------------------------------
OPTIMAL_MAX_BLOCKS = 4_000_000   # Belady's MIN holds every block key of the trace at once
OPTIMAL_WORK = 48_000_000        # its block visits over all its sizes (~2 us each on a laptop core)


def knee_hit_blocks(ceiling: dict, block_size: int, fraction: float) -> int | None:
    """The fewest hit blocks at which a pool that admits every request reaches ``fraction`` of
    the ceiling's hit rate, by :func:`blockviz.sim.capacity.knee_of`'s rule; None when the
    ceiling hits nothing."""
    rate, queries = hit_rate(ceiling), ceiling["queries"]
    if rate <= 0:
        return None
    need = fraction * rate - 1e-12
    h = max(0, int(need * queries / block_size))
    while h * block_size / queries < need:
        h += 1
    while h and (h - 1) * block_size / queries >= need:
        h -= 1
    return h


def curve_report(source, *, block_size: int, requests: int, free_orders=("split", "append"),
                 sizes: int = 8, optimal: bool = True, limit: int | None = None,
                 name: str | None = None, progress: Callable[..., None] | None = None) -> dict:
    """What the capacity page draws for a trace in sequence mode, in one call (a worker runs it).

    One pass per free order (:func:`curve_sequence`) gives the hits at every pool size from the
    largest request (below it some requests are refused, so a rate there is over fewer queries)
    to the working set: ``"curves"``, per order its :meth:`SequenceCurve.breakpoints` from there
    and its **knee** on that whole curve (the smallest pool size reaching
    ``capacity.KNEE_FRACTION`` of the ceiling's hit rate). ``"reports"``: per order the sweep's
    report at ``sizes`` pool sizes (geometric, plus the knees), each point with
    ``"optimal_hits"``, Belady's MIN there, when ``optimal`` and affordable: MIN costs a pass per
    size, so the sizes are fewer (at least two) when the trace's blocks times the sizes pass
    :data:`OPTIMAL_WORK`, and MIN is left out (``"optimal_skipped"`` says why) past
    :data:`OPTIMAL_MAX_BLOCKS` blocks or below two sizes. ``requests``: how many the trace holds
    (up to ``limit``), for ``progress(done=, total=, phase=, order=, size=, of=)``."""
    start = time.perf_counter()
    check_block_size(block_size)
    total = requests * (len(free_orders) + (sizes + len(free_orders) if optimal else 0))
    told = {"phase": "curve"}     # what a progress call tells besides the counts: the order in hand too
    advance = running_total(progress and (lambda done, n: progress(done=done, total=n, **told)), total)
    curves = {}
    for order in free_orders:
        told["order"] = order
        advance(0)
        curves[order] = curve_sequence(iter_trace(source, name=name, limit=limit, block_size=block_size),
                                       block_size=block_size, free_order=order, progress=advance)
    first = curves[free_orders[0]]
    lo, hi = max(1, first.largest), max(1, first.working_set)
    ceiling = first.ceiling()
    target = knee_hit_blocks(ceiling, block_size, KNEE_FRACTION)
    knees = {o: None if target is None else c.first_reaching(target, lo) for o, c in curves.items()}
    blocks = first.full_blocks
    afford = OPTIMAL_WORK // max(1, blocks) - len({k for k in knees.values() if k})
    skipped = None
    if optimal and (blocks > OPTIMAL_MAX_BLOCKS or afford < 2):
        skipped = {"blocks": blocks, "most": min(OPTIMAL_MAX_BLOCKS, OPTIMAL_WORK // 2)}
    count = min(sizes, afford) if optimal and skipped is None else sizes
    chosen = sorted(set(geometric_sizes(lo, hi, count)) | {k for k in knees.values() if k})
    reports = []
    for order, c in curves.items():
        xs, vals, slopes = c.breakpoints(lo)
        reports.append({"requests": c.requests, "block_size": block_size, "free_order": order,
                        "ceiling": c.ceiling(), "points": [c.point(n) for n in chosen],
                        "curve": {"xs": xs, "vals": vals, "slopes": slopes, "knee": knees[order]}})
    if optimal and skipped is None:     # Belady's MIN: a pass per size, the size counted from 1
        base, per = min(total, len(curves) * first.requests), max(1, first.requests)
        add_optimal(reports, [source], block_size=block_size, limit=limit, name=name,
                    progress=progress and (lambda d, t: progress(done=base + d, total=base + t,
                                                                 phase="optimal", size=-(-d // per),
                                                                 of=len(chosen))))
    add_explain(reports, [source], block_size=block_size, limit=limit, name=name)  # one more pass
    return {"reports": reports, "largest": lo, "working_set": hi, "queries": ceiling["queries"],
            "full_blocks": blocks, "sizes": chosen, "optimal_skipped": skipped,
            "seconds": time.perf_counter() - start}
