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
from blockviz.sim.capacity import ceiling, replay_sequence

MAX_CHATS = 200          # the conversations a report lists (the most turns first)
Progress = Callable[..., None]


def chat_report(source, *, block_size: int, pool_blocks: int, free_order: str = "split",
                limit: int | None = None, name: str | None = None, requests: int = 0,
                progress: Progress | None = None) -> dict:
    """The conversations of a Bailian trace at ``pool_blocks`` (``{"chats": [...]}``, those that
    lost the most prompt tokens to eviction first, then the longest; at most :data:`MAX_CHATS` of
    those with two turns or more), each with its ``"lost"`` tokens and a list of turns
    ``{"line", "turn", "type", "at_s", "tokens", "hit", "best"}`` (``hit``: the prompt tokens found
    at this pool size, 0 when the request was refused; ``best``: with an infinite cache), and the
    totals over first and later turns. ``progress(done=, total=)`` over the two passes
    (``requests``: how many the trace holds, up to ``limit``)."""
    chat_id, parent, turn, kind, at, tokens, line = [], [], [], [], [], [], []
    for r in iter_trace(source, name=name, limit=limit, block_size=block_size):
        line.append(r.line)
        c = r.chat
        chat_id.append(None if c is None else c.chat_id)
        parent.append(-1 if c is None else c.parent_chat_id)
        turn.append(1 if c is None else c.turn)
        kind.append("" if c is None else c.type)
        at.append(r.timestamp / 1000.0)
        tokens.append(r.input_length)
    n = len(tokens)
    total = 2 * max(n, requests)
    done = [0]

    def advance(k: int) -> None:
        done[0] = min(total, done[0] + k)
        if progress is not None:
            progress(done=done[0], total=total)

    hit, best = [0] * n, [0] * n

    def keep(into: list[int]):
        def on_request(i: int, hits: int, admitted: bool) -> None:
            into[i] = hits
        return on_request
    point = replay_sequence(iter_trace(source, name=name, limit=limit), block_size=block_size,
                            pool_blocks=pool_blocks, free_order=free_order, progress=advance,
                            on_request=keep(hit))
    ceiling(iter_trace(source, name=name, limit=limit), block_size=block_size, progress=advance,
            on_request=keep(best))
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
        return sum(best[i] - hit[i] for i in m if best[i] > hit[i])
    chains = sorted((m for m in members.values() if len(m) > 1), key=lambda m: (-lost(m), -len(m), m[0]))
    chats = []
    for m in chains[:MAX_CHATS]:
        chats.append({"chat_id": chat_id[m[0]], "lost": lost(m), "turns": [
            {"line": line[i], "turn": turn[i], "type": kind[i], "at_s": at[i], "tokens": tokens[i],
             "hit": hit[i], "best": best[i]} for i in m]})
    later = [i for i in range(n) if root[i] != i]
    first = [i for i in range(n) if root[i] == i]
    return {"pool_blocks": pool_blocks, "free_order": free_order, "block_size": block_size,
            "requests": n, "conversations": len(chains), "point": point, "chats": chats,
            "first": _sums(first, tokens, hit, best), "later": _sums(later, tokens, hit, best)}


def _sums(ids: list[int], tokens, hit, best) -> dict:
    return {"requests": len(ids), "tokens": sum(tokens[i] for i in ids),
            "hit": sum(hit[i] for i in ids), "best": sum(best[i] for i in ids)}
