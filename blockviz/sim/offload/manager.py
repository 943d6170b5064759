"""The CPU tier's chunks, after vLLM's kv_offload/cpu/manager.py (``CPUOffloadingManager``)."""
from __future__ import annotations

from dataclasses import dataclass, field

from blockviz.sim.offload.base import LookupResult, OffloadingEvent, ReqContext
from blockviz.sim.offload.policies import POLICIES, Chunk

HIT_SOURCE = "host"   # vLLM CacheHitSource.HOST: the CPU tier's hits


@dataclass
class _Access:
    """vLLM ``_RequestCacheAccess``: the keys one request observed, head to tail."""
    keys: list[bytes] = field(default_factory=list)
    seen: set[bytes] = field(default_factory=set)
    inserted: set[bytes] = field(default_factory=set)
    reused: set[bytes] = field(default_factory=set)
    store_misses: set[bytes] = field(default_factory=set)
    finished: bool = False


class CPUOffloadingManager:
    """vLLM's ``CPUOffloadingManager``: chunk pool (fresh ids first, then freed ones, last
    freed first), ref counts, events; eviction decided by the policy."""

    def __init__(self, num_chunks: int, policy: str = "lru") -> None:
        self.num_chunks = num_chunks
        self.num_allocated = 0
        self.free_list: list[int] = []
        self.policy = POLICIES[policy](num_chunks)
        self.num_evictable = 0
        self.events: list[OffloadingEvent] = []

    def _record_access(self, keys, ctx: ReqContext, reused=()) -> None:
        access = ctx.state["access"]
        new = []
        for key in keys:
            if key in access.seen:
                continue
            access.keys.append(key)
            access.seen.add(key)
            new.append(key)
        if new:
            self.policy.on_request_access(new, ctx)
        access.reused.update(k for k in reused if k not in access.inserted)

    def on_new_request(self, ctx: ReqContext) -> None:
        ctx.state["access"] = _Access()

    def lookup(self, key: bytes) -> LookupResult:
        chunk = self.policy.get(key)
        if chunk is None:
            return LookupResult.MISS
        return LookupResult.HIT if chunk.is_ready else LookupResult.HIT_PENDING

    def prepare_load(self, keys: list[bytes], ctx: ReqContext) -> list[int]:
        ids = []
        for key in keys:
            chunk = self.policy.get(key)
            assert chunk is not None and chunk.is_ready, key
            if chunk.ref_cnt == 0:
                self.policy.mark_non_evictable(key)
                self.num_evictable -= 1
            chunk.ref_cnt += 1
            ids.append(chunk.chunk_id)
        self._record_access(keys, ctx, reused=keys)
        return ids

    def complete_load(self, keys, ctx: ReqContext) -> None:
        for key in keys:
            chunk = self.policy.get(key)
            chunk.ref_cnt -= 1
            if chunk.ref_cnt == 0:
                self.num_evictable += 1
                self.policy.mark_evictable(key)

    def _free_chunks(self) -> int:
        return len(self.free_list) + self.num_chunks - self.num_allocated

    def prepare_store(self, keys: list[bytes],
                      ctx: ReqContext) -> tuple[list[bytes], list[int], list[bytes]] | None:
        """(keys to store, their chunk ids, evicted keys), or None: no room (nothing changed)."""
        to_store = [k for k in keys if self.policy.get(k) is None]
        ready = [k for k in keys if (c := self.policy.get(k)) is not None and c.is_ready]
        access = ctx.state["access"]
        misses = [k for k in to_store if k not in access.store_misses]
        if misses:
            self.policy.on_store_miss(misses, ctx)
            access.store_misses.update(misses)
        recorded = set(to_store) | set(ready)
        self._record_access([k for k in keys if k in recorded], ctx, reused=ready)
        if not to_store:
            return [], [], []
        n_evict = len(to_store) - self._free_chunks()
        evicted: list[bytes] = []
        if n_evict > 0:
            if n_evict > self.num_evictable:
                return None
            got = self.policy.evict(n_evict, set(keys))
            if got is None:
                return None
            self.num_evictable -= len(got)
            for key, chunk in got:
                self.free_list.append(chunk.chunk_id)
                evicted.append(key)
        if evicted:
            self.events.append(OffloadingEvent(evicted, removed=True))
        n_fresh = min(len(to_store), self.num_chunks - self.num_allocated)
        ids = list(range(self.num_allocated, self.num_allocated + n_fresh))
        self.num_allocated += n_fresh
        ids += [self.free_list.pop() for _ in range(len(to_store) - n_fresh)]
        for key, cid in zip(to_store, ids, strict=True):
            self.policy.insert(key, Chunk(cid), ctx)
        access.inserted.update(to_store)
        return to_store, ids, evicted

    def complete_store(self, keys, ctx: ReqContext) -> list[bytes]:
        stored = []
        for key in keys:
            chunk = self.policy.get(key)
            if chunk is not None and not chunk.is_ready:
                chunk.ref_cnt = 0
                self.num_evictable += 1
                self.policy.mark_evictable(key)
                stored.append(key)
        if stored:
            self.events.append(OffloadingEvent(stored, removed=False))
        return stored

    def on_request_finished(self, ctx: ReqContext) -> None:
        access = ctx.state["access"]
        if access.finished:
            return
        access.finished = True
        keys = list(access.keys)
        if all(k in ctx.positions for k in keys):
            keys.sort(key=ctx.positions.__getitem__)
        self.policy.on_request_finished(keys, access.inserted - access.reused, access.reused, ctx)

    def take_events(self) -> list[OffloadingEvent]:
        events, self.events = self.events, []
        return events
