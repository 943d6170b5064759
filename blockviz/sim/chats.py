"""A Qwen-Bailian trace's conversations, turn by turn, at one pool size: what each turn's prompt
found in the cache (sequence mode, :func:`blockviz.sim.capacity.replay_sequence` at that size),
what an infinite cache would have found (:func:`blockviz.sim.capacity.ceiling`), and so what the
pool's evictions cost it.

A conversation is a chain of requests linked by ``parent_chat_id`` (a turn names the ``chat_id``
of the turn before it; -1 starts one). A parent that is not among the requests read (past the
limit, or never in the trace) starts a conversation of its own; a parent read later than its child
too (the file is the arrival order). Two turns with one parent (a regenerated reply) are both in
the conversation, in file order.
"""
from __future__ import annotations

from collections.abc import Callable

from blockviz.scenario.trace import iter_trace
from blockviz.sim.capacity import ceiling, replay_sequence, running_total

MAX_CHATS = 200          # the conversations a report lists (the most turns first)


def chat_report(source, *, block_size: int, pool_blocks: int, free_order: str = "split",
                limit: int | None = None, name: str | None = None, requests: int = 0,
                progress: Callable[..., None] | None = None) -> dict:
    """The conversations of a Bailian trace at ``pool_blocks`` (``{"chats": [...]}``, those that
    lost the most prompt tokens to eviction first, then the longest; at most :data:`MAX_CHATS` of
    those with two turns or more), each with its ``"lost"`` tokens and a list of turns
    ``{"line", "turn", "type", "at_s", "tokens", "hit", "best"}`` (``hit``: the prompt tokens found
    at this pool size, 0 when the request was refused; ``best``: with an infinite cache), and the
    totals over first and later turns. ``progress(done=, total=)`` over the two passes
    (``requests``: how many the trace holds, up to ``limit``)."""
    chat_id, parent, turns = [], [], []
    for r in iter_trace(source, name=name, limit=limit, block_size=block_size):
        c = r.chat
        chat_id.append(None if c is None else c.chat_id)
        parent.append(-1 if c is None else c.parent_chat_id)
        turns.append({"line": r.line, "turn": 1 if c is None else c.turn, "type": "" if c is None else c.type,
                      "at_s": r.timestamp / 1000.0, "tokens": r.input_length, "hit": 0, "best": 0})
    n = len(turns)
    advance = running_total(progress and (lambda done, total: progress(done=done, total=total)),
                            2 * max(n, requests))

    def keep(field: str):
        def on_request(i: int, hits: int, admitted: bool) -> None:
            turns[i][field] = hits
        return on_request
    point = replay_sequence(iter_trace(source, name=name, limit=limit), block_size=block_size,
                            pool_blocks=pool_blocks, free_order=free_order, progress=advance,
                            on_request=keep("hit"))
    ceiling(iter_trace(source, name=name, limit=limit), block_size=block_size, progress=advance,
            on_request=keep("best"))
    index = {c: i for i, c in enumerate(chat_id) if c is not None}
    root = list(range(n))
    for i in range(n):
        j = index.get(parent[i], -1)
        if 0 <= j < i:
            root[i] = root[j]
    members: dict[int, list[int]] = {}
    for i in range(n):
        members.setdefault(root[i], []).append(i)
    def lost(m: list[int]) -> int:
        return sum(max(0, turns[i]["best"] - turns[i]["hit"]) for i in m)
    chains = sorted((m for m in members.values() if len(m) > 1), key=lambda m: (-lost(m), -len(m), m[0]))
    chats = [{"chat_id": chat_id[m[0]], "lost": lost(m), "turns": [turns[i] for i in m]}
             for m in chains[:MAX_CHATS]]
    later = [turns[i] for i in range(n) if root[i] != i]
    first = [turns[i] for i in range(n) if root[i] == i]
    return {"pool_blocks": pool_blocks, "free_order": free_order, "block_size": block_size,
            "requests": n, "conversations": len(chains), "point": point, "chats": chats,
            "first": _sums(first), "later": _sums(later)}


def _sums(turns: list[dict]) -> dict:
    return {"requests": len(turns), "tokens": sum(x["tokens"] for x in turns),
            "hit": sum(x["hit"] for x in turns), "best": sum(x["best"] for x in turns)}
