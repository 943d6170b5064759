"""The CPU tier's cache policies, after vLLM's kv_offload/cpu/policies (base.py's ``ChunkStatus``,
lru.py, arc.py): which chunks the tier keeps, and which it evicts first. The manager
(``blockviz.sim.offload.manager``) picks one by name (``POLICIES``) and calls it."""
from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from itertools import islice

from blockviz.sim.offload.base import ReqContext


@dataclass
class Chunk:
    """vLLM ``ChunkStatus``: ref_cnt -1 while its store is in flight, > 0 while loads read it."""
    chunk_id: int
    ref_cnt: int = -1

    @property
    def is_ready(self) -> bool:
        return self.ref_cnt >= 0


class LRUCachePolicy:
    """vLLM's ``LRUCachePolicy``: a chunk's rank is its request's rank and its position in the
    request (tail before head); a finished request's keys get fresh ranks, tail first, so its
    head is the most recent. Evicts the lowest ranks among the evictable chunks."""
    name = "lru"

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.chunks: dict[bytes, Chunk] = {}
        self.ranks: dict[bytes, tuple[int, int]] = {}
        self.evictable: set[bytes] = set()
        self.next_rank = 0

    def _request_rank(self, ctx: ReqContext) -> int:
        rank = ctx.state.get("lru")
        if rank is None or rank[0] is not self:
            self.next_rank += 1
            rank = ctx.state["lru"] = (self, self.next_rank)
        return rank[1]

    def _update_recency(self, keys) -> None:
        for key in keys:
            if key in self.chunks:
                self.next_rank += 1
                self.ranks[key] = (self.next_rank, 0)

    def get(self, key: bytes) -> Chunk | None:
        return self.chunks.get(key)

    def insert(self, key: bytes, chunk: Chunk, ctx: ReqContext) -> None:
        self.chunks[key] = chunk
        pos = ctx.positions.get(key)
        if pos is None:
            self.next_rank += 1
            self.ranks[key] = (self.next_rank, 0)
        else:
            self.ranks[key] = (self._request_rank(ctx), -pos)
        if chunk.ref_cnt == 0:
            self.evictable.add(key)

    def on_store_miss(self, keys, ctx: ReqContext) -> None:
        """(vLLM's base policy: ``touch`` the keys.)"""
        self._update_recency(reversed(list(keys)))

    def on_request_access(self, keys, ctx: ReqContext) -> None:
        rank = self._request_rank(ctx)
        for key in keys:
            pos = ctx.positions.get(key)
            if pos is None or key not in self.chunks:
                continue
            if self.ranks[key] >= (rank, -pos):
                continue
            self.ranks[key] = (rank, -pos)

    def on_request_finished(self, keys: list[bytes], inserted_only: set, reused: set,
                            ctx: ReqContext) -> None:
        self._update_recency(reversed(keys))

    def eviction_order(self) -> list[bytes]:
        """The evictable keys, first evicted first."""
        return sorted(self.evictable, key=self.ranks.__getitem__)

    def evict(self, n: int, protected: set[bytes]) -> list[tuple[bytes, Chunk]] | None:
        chosen = [k for k in self.eviction_order() if k not in protected][:n]
        if len(chosen) < n:
            return None
        out = []
        for key in chosen:
            self.evictable.discard(key)
            out.append((key, self.chunks.pop(key)))
            del self.ranks[key]
        return out

    def mark_evictable(self, key: bytes) -> None:
        self.evictable.add(key)

    def mark_non_evictable(self, key: bytes) -> None:
        self.evictable.discard(key)


class ARCCachePolicy:
    """vLLM's ``ARCCachePolicy`` (cpu/policies/arc.py): T1 (chunks used once) and T2 (reused),
    ghost lists B1/B2 of their evicted keys steering ``target_t1_size``; ordered dicts, least
    recent first. A ready chunk a request reused moves to T2 when the request finishes."""
    name = "arc"

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.target_t1_size = 0.0
        self.t1: dict[bytes, Chunk] = {}
        self.t2: dict[bytes, Chunk] = {}
        self.b1: dict[bytes, None] = {}
        self.b2: dict[bytes, None] = {}

    @property
    def chunks(self) -> dict[bytes, Chunk]:
        return {**self.t1, **self.t2}

    def get(self, key: bytes) -> Chunk | None:
        return self.t1.get(key) or self.t2.get(key)

    def insert(self, key: bytes, chunk: Chunk, ctx: ReqContext) -> None:
        self.t1[key] = chunk
        self.b1.pop(key, None)
        self.b2.pop(key, None)

    def _adapt_to_ghost_hit(self, key: bytes) -> None:
        if key in self.b1:
            self.target_t1_size = min(self.target_t1_size + max(1, len(self.b2) / len(self.b1)),
                                      self.capacity)
            self.b1[key] = self.b1.pop(key)
        elif key in self.b2:
            self.target_t1_size = max(self.target_t1_size - max(1, len(self.b1) / len(self.b2)),
                                      0)
            self.b2[key] = self.b2.pop(key)

    def on_store_miss(self, keys, ctx: ReqContext) -> None:
        for key in reversed(list(keys)):
            self._adapt_to_ghost_hit(key)

    def on_request_access(self, keys, ctx: ReqContext) -> None:
        return

    def on_request_finished(self, keys: list[bytes], inserted_only: set, reused: set,
                            ctx: ReqContext) -> None:
        for key in reversed(keys):
            d = self.t1 if key in self.t1 else self.t2 if key in self.t2 else None
            if d is None:
                continue
            if key in inserted_only:        # most recent in its own list
                d[key] = d.pop(key)
            elif key in reused:             # most recent in T2
                self.t2[key] = d.pop(key)

    def eviction_order(self) -> list[bytes]:
        """The evictable keys in the order evict() would take them one at a time now."""
        return [key for key, _, _ in self._victims(frozenset())]

    @property
    def evictable(self) -> set[bytes]:
        return {k for k, c in self.chunks.items() if c.ref_cnt == 0}

    def _victims(self, protected: Collection[bytes]) -> Iterator[tuple[bytes, Chunk, bool]]:
        """The evictable chunks not ``protected``, in the order evict() takes them: (key,
        chunk, whether from T1)."""
        t1 = iter(self.t1.items())
        t2 = iter(self.t2.items())
        virtual_t1 = len(self.t1)

        def next_candidate(entries):
            for key, chunk in entries:
                if chunk.ref_cnt == 0 and key not in protected:
                    return key, chunk
            return None

        while True:
            cand = None
            if virtual_t1 >= int(self.target_t1_size):
                entry = next_candidate(t1)
                if entry is not None:
                    cand = (*entry, True)
                    virtual_t1 -= 1
            if cand is None:
                entry = next_candidate(t2)
                if entry is not None:
                    cand = (*entry, False)
            if cand is None:
                entry = next_candidate(t1)
                if entry is None:
                    return
                cand = (*entry, True)
                virtual_t1 -= 1
            yield cand

    def evict(self, n: int, protected: set[bytes]) -> list[tuple[bytes, Chunk]] | None:
        candidates = list(islice(self._victims(protected), n))
        if len(candidates) < n:
            return None
        out = []
        for key, chunk, from_t1 in candidates:
            if from_t1:
                del self.t1[key]
                self.b1[key] = None
            else:
                del self.t2[key]
                self.b2[key] = None
            out.append((key, chunk))
        for ghost in (self.b1, self.b2):
            for _ in range(len(ghost) - self.capacity):
                del ghost[next(iter(ghost))]
        return out

    def mark_evictable(self, key: bytes) -> None:
        return

    def mark_non_evictable(self, key: bytes) -> None:
        return


POLICIES = {"lru": LRUCachePolicy, "arc": ARCCachePolicy}
