"""The best any eviction policy could do: Belady's MIN for a trace in sequence mode.

Same requests and rules as :func:`blockviz.sim.capacity.replay_sequence`: blocks of
``block_size`` tokens keyed by their prefix, a request of ``B`` blocks rejected when ``B > N``
(no policy can run it: all its blocks are held at once), hits = the longest cached prefix of its
full blocks, at most ``L = (n - 1) // bs`` of them (vLLM computes the last token). Only the choice
of which cached blocks to give up is free. The model, per admitted request ``s``:

  * hits: ``v_0 .. v_{h-1}`` cached, ``h <= L``;
  * while ``s`` runs it holds its ``B`` blocks (hits, new blocks, the partial one), so at most
    ``N - B`` other cached blocks can stay: the policy picks them;
  * afterwards its ``F`` full blocks are cached (a cached ``v_{F-1}`` that was not a hit is simply
    reused: a second copy, as vLLM keeps, never helps).

**MIN**: keep the ``N - B`` blocks whose next use comes soonest; a block's next use is the next
admitted request whose path has it — counted only if it is a hit position there (``i < L``); a
block whose next appearance is not a hit position is cached again by that request for nothing, so
keeping it until then gains nothing. Ties go to the shallower block.

Why MIN stays prefix-closed, and why that is enough: a parent appears wherever its child does, one
position earlier, so its next appearance is no later than the child's; if that appearance is a hit
position the parent ranks ahead of the child (ties: shallower first) and is kept whenever the child
is; if not, the parent is cached again by that request before the child is next used. So when a
kept block is next used, its whole prefix is cached and every kept block becomes a hit. The usual
exchange argument (swap a kept block with a later-used evicted one until the next use of the
earlier) then applies block by block, with a capacity that varies per request (``N - B``).
The tests compare it with an exhaustive search over every choice of kept blocks on small traces,
at every pool size.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence

from blockviz.scenario.trace import TraceRequest, check_block_size, iter_trace
from blockviz.sim.capacity import Tally, block_keys, checked, running_total

NEVER = 1 << 62


def _paths(trace: Iterable[TraceRequest], block_size: int) -> list[tuple[int, int, int, list]]:
    """(n, B, L, keys of the full blocks) per request."""
    out = []
    for r in checked(trace, block_size):
        n = r.input_length
        out.append((n, -(-n // block_size), (n - 1) // block_size,
                    block_keys(n, r.hash_ids, block_size, r.block_tokens)))
    return out


def optimal_hits(trace: Iterable[TraceRequest], *, block_size: int, pool_blocks: Sequence[int],
                 progress: Callable[[int], None] | None = None) -> dict[int, int]:
    """Belady's MIN at each pool size: ``{pool_blocks: hit tokens}``."""
    check_block_size(block_size)
    reqs = _paths(trace, block_size)
    out = {}
    for n_pool in pool_blocks:
        if n_pool < 1:
            raise ValueError(f"pool_blocks must be at least 1, not {n_pool}")
        out[n_pool] = _min(reqs, n_pool, progress) * block_size
    return out


def _min(reqs, pool: int, progress) -> int:
    # next appearance of each (request, block): its time if a hit position there, else NEVER
    admitted = [s for s, (_, b, _, _) in enumerate(reqs) if b <= pool]
    nxt: dict[int, list[int]] = {}
    seen: dict = {}
    for s in reversed(admitted):
        _, _, lim, keys = reqs[s]
        nxt[s] = [seen.get(k, NEVER) for k in keys]
        for i, k in enumerate(keys):
            seen[k] = s if i < lim else NEVER
    cache: dict = {}          # key -> (next use, depth) as last set
    heap: list = []           # (-next use, -depth, key): the first to give up on top
    hits = 0
    tally = Tally(progress)
    for s in admitted:
        _, b, lim, keys = reqs[s]
        h = 0
        while h < lim and keys[h] in cache:
            h += 1
        hits += h
        path = set(keys)
        others = len(cache) - sum(1 for k in keys if k in cache)
        room = pool - b
        while others > room:
            use, depth, k = heapq.heappop(heap)
            if k in path or cache.get(k) != (-use, -depth):
                continue                  # in use now, or a stale entry
            del cache[k]
            others -= 1
        for i, k in enumerate(keys):
            entry = (nxt[s][i], i)
            cache[k] = entry
            heapq.heappush(heap, (-entry[0], -i, k))
        if len(heap) > 4 * len(cache) + 64:       # drop stale entries now and then
            heap = [(-u, -d, k) for k, (u, d) in cache.items()]
            heapq.heapify(heap)
        tally.add()
    tally.add(len(reqs) - len(admitted))      # the rejected requests are done too
    tally.flush()
    return hits


def add_optimal(reports: list[dict], traces: Sequence[str], *, block_size: int,
                limit: int | None = None, name: str | None = None,
                progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """``--optimal``: each point of each report (one per trace and free order, in that order)
    gains ``"optimal_hits"``, Belady's MIN at its pool size (the same for both free orders).
    ``progress(done, total)`` counts requests over the passes (one per trace and pool size).
    ``name``: what a lone trace is called (an upload's name tells a Bailian trace's hash block)."""
    per_trace = len(reports) // max(1, len(traces))
    total = 0
    plans = []
    for k, trace in enumerate(traces):
        mine = reports[k * per_trace:(k + 1) * per_trace]
        pools = sorted({p["pool_blocks"] for rep in mine for p in rep["points"]})
        plans.append((trace, mine, pools))
        total += (mine[0]["requests"] if mine else 0) * len(pools)
    advance = running_total(progress, total)
    for trace, mine, pools in plans:
        best = optimal_hits(iter_trace(trace, name=name, limit=limit, block_size=block_size),
                            block_size=block_size, pool_blocks=pools,
                            progress=progress and advance)
        for rep in mine:
            for p in rep["points"]:
                p["optimal_hits"] = best[p["pool_blocks"]]
    return reports
