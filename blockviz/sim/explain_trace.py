"""Why trace requests missed, per pool size (``blockviz trace capacity --explain`` and the capacity
page): the prompt split of ``blockviz.sim.explain`` summed over a trace in sequence mode, where
only hit, evicted, cold and the structural last_token / partial_block occur."""
from __future__ import annotations

import bisect

from blockviz.scenario.trace import iter_trace
from blockviz.sim.capacity import block_keys

TRACE_KEYS = ("hit", "evicted", "cold", "last_token", "partial_block")


def split_of(parts: tuple[int, int, int, int], hits: int) -> dict[str, int]:
    """A pool size's split from its parts (ever-cached and walkable tokens, last-token and
    partial-block tokens) and the replay's hits at that size (any free order's)."""
    cached, walkable, last, partial = parts
    return {"hit": hits, "evicted": cached - hits, "cold": walkable - cached,
            "last_token": last, "partial_block": partial}


def trace_split_parts(trace, *, block_size: int, pools: list[int]) -> dict[int, tuple[int, int, int, int]]:
    """``trace capacity --explain``: at each pool size, the split of every admitted request's
    prompt tokens (sequence mode, ``blockviz.sim.capacity.replay_sequence``'s rules) — one pass.

    A request of ``need`` blocks is admitted at pool size ``P`` exactly when ``need <= P`` (each
    request runs alone, every block free). Its own tokens split as a lookup's do: ``last_token``
    and ``partial_block`` are structural; of the ``m = (n - 1) // bs`` blocks the lookup may walk,
    the first ``E`` were cached by some earlier request admitted at ``P`` (the ever-cached prefix:
    keys chain, so it is a prefix) and the rest are ``cold``; of those ``E``, the hits (the replay's,
    ``hits[P]``) are ``hit`` and the others ``evicted`` — what a bigger cache could have kept. A
    block counts as ever-cached at ``P`` when the smallest ``need`` of the requests that cached it
    is at most ``P``, so one pass serves every pool size."""
    bs = block_size
    pools = sorted(set(pools))
    first_need: dict[bytes, int] = {}      # key -> the smallest need of a request that cached it
    walked = {p: 0 for p in pools}         # ever-cached blocks walked, per pool size
    struct = {p: [0, 0, 0] for p in pools}  # (walkable blocks, last_token, partial_block)
    for r in trace:
        n = r.input_length
        need = -(-n // bs)
        k, m = n // bs, (n - 1) // bs
        keys = block_keys(n, r.hash_ids, bs, r.block_tokens)
        # the pool size from which each walked block counts as cached (non-decreasing)
        reach, worst = [], 0
        for key in keys[:m]:
            worst = max(worst, first_need.get(key, 1 << 62))
            reach.append(worst)
        for p in pools:
            if need > p:
                continue
            st = struct[p]
            st[0] += m
            st[1] += bs if n % bs == 0 else 0
            st[2] += n - k * bs
            walked[p] += bisect.bisect_right(reach, p)      # reach is non-decreasing
        for key in keys:
            if first_need.get(key, 1 << 62) > need:
                first_need[key] = need
    return {p: (walked[p] * bs, struct[p][0] * bs, struct[p][1], struct[p][2]) for p in pools}


def add_explain(reports: list[dict], traces, *, block_size: int, limit: int | None = None,
                name: str | None = None) -> list[dict]:
    """``--explain``: each point of each report (one per trace and free order, in that order)
    gains ``"split"``, its prompt tokens by category (``split_of``; one pass per trace: the parts
    do not depend on the free order). ``name``: what a lone trace's errors call it."""
    per_trace = len(reports) // max(1, len(traces))
    for k, trace in enumerate(traces):
        points = [p for rep in reports[k * per_trace:(k + 1) * per_trace] for p in rep["points"]]
        parts = trace_split_parts(iter_trace(trace, name=name, limit=limit, block_size=block_size),
                                  block_size=block_size, pools=[p["pool_blocks"] for p in points])
        for p in points:
            p["split"] = split_of(parts[p["pool_blocks"]], p["hits"])
    return reports
