"""The external KV tier: vLLM 0.33's ``OffloadingConnector`` with its CPU tier, scheduler side,
after vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py
(``OffloadingConnectorScheduler``), vllm/v1/kv_offload/cpu/manager.py (``CPUOffloadingManager``)
and its cache policies (cpu/policies/lru.py, arc.py) — on the path one full-attention group with
``blocks_per_chunk`` 1 takes. Keys are vLLM block hashes (the OffloadingConnector's offload keys),
not LMCache's token-chunk hashes.

Scheduler side, with vLLM's names and contracts:
  * ``get_num_new_matched_tokens(request, num_computed_tokens)`` -> ``(tokens, load_async)``:
    whole chunks past the (block-aligned) local hit, walked until the first miss; ``None`` while
    a chunk it needs is still being stored or loaded (the scheduler asks again next step). The
    ``num_tokens - 1`` cap is not applied here: a repeated prompt loads all its blocks and the
    scheduler clamps ``num_computed_tokens`` once the load is reported.
  * ``update_state_after_alloc`` — issues the load job into the request's fresh GPU blocks.
  * ``build_connector_meta`` — inside ``schedule()``: store jobs for full *prompt* blocks whose
    last token is scheduled in this step (decode blocks never), skipping keys the tier has.
  * ``request_finished`` -> ``(False, None)`` (vLLM 0.33.0): blocks are freed at once; a block
    reused while its store is still in flight has that store flushed first.
  * ``update_connector_output`` — jobs the worker reports done: a store makes its chunks
    readable (``BlockStored`` medium CPU), a load unpins them and releases the request.
  * ``take_events`` — ``BlockStored`` / ``BlockRemoved`` with ``medium: "CPU"``.

The worker side (:class:`OffloadingWorker`) reports a load ``load_delay`` steps after it was
issued (0: within the step), a store ``1 + store_delay`` steps after (vLLM submits a store at the
start of the next step), a flushed job in the step it is flushed, a sync load within its step; with
a KV runtime it moves the real K/V between the paged GPU store and a CPU tensor pool
(blockviz.kv.offload).
"""
from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field
from typing import Any

from blockviz.core import Request
from blockviz.core.events import BlockRemoved, BlockStored
from blockviz.core.hashing import hash_to_event_int as hash_to_int
from blockviz.core.ops import Drop, Save
from blockviz.core.request import FINISH_ABORT

HIT_SOURCE = "host"   # vLLM CacheHitSource.HOST: the CPU tier's hits


class LookupResult(enum.Enum):
    MISS = 0
    HIT = 1
    HIT_PENDING = 2


@dataclass
class Chunk:
    """vLLM ``ChunkStatus``: ref_cnt -1 while its store is in flight, > 0 while loads read it."""
    chunk_id: int
    ref_cnt: int = -1

    @property
    def is_ready(self) -> bool:
        return self.ref_cnt >= 0


@dataclass
class ReqContext:
    """vLLM ``ReqContext``: a request's offload-key positions and the per-request state the
    manager and the policy keep on it."""
    req_id: str
    positions: dict[bytes, int] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Access:
    """vLLM ``_RequestCacheAccess``: the keys one request observed, head to tail."""
    generation: int
    keys: list[bytes] = field(default_factory=list)
    seen: set[bytes] = field(default_factory=set)
    inserted: set[bytes] = field(default_factory=set)
    reused: set[bytes] = field(default_factory=set)
    store_misses: set[bytes] = field(default_factory=set)
    finished: bool = False


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
        self.generation = 0

    def _request_rank(self, ctx: ReqContext) -> int:
        st = ctx.state.get("lru")
        if st is None or st[0] is not self or st[1] != self.generation:
            self.next_rank += 1
            st = ctx.state["lru"] = (self, self.generation, self.next_rank)
        return st[2]

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

    def remove(self, key: bytes) -> None:
        del self.chunks[key]
        self.ranks.pop(key, None)
        self.evictable.discard(key)

    def touch(self, keys, ctx: ReqContext) -> None:
        self._update_recency(reversed(list(keys)))

    on_store_miss = touch

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

    def clear(self) -> None:
        self.chunks.clear()
        self.ranks.clear()
        self.evictable.clear()
        self.next_rank = 0
        self.generation += 1

    def eviction_order(self) -> list[bytes]:
        """The evictable keys, first evicted first."""
        return sorted(self.evictable, key=self.ranks.__getitem__)

    def evict(self, n: int, protected: set[bytes]) -> list[tuple[bytes, Chunk]] | None:
        if n == 0:
            return []
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

    def remove(self, key: bytes) -> None:
        if self.t1.pop(key, None) is None:
            self.t2.pop(key, None)

    def _adapt_to_ghost_hit(self, key: bytes) -> bool:
        if key in self.b1:
            self.target_t1_size = min(self.target_t1_size + max(1, len(self.b2) / len(self.b1)),
                                      self.capacity)
            self.b1[key] = self.b1.pop(key)
            return True
        if key in self.b2:
            self.target_t1_size = max(self.target_t1_size - max(1, len(self.b1) / len(self.b2)),
                                      0)
            self.b2[key] = self.b2.pop(key)
            return True
        return False

    def on_store_miss(self, keys, ctx: ReqContext) -> None:
        for key in reversed(list(keys)):
            self._adapt_to_ghost_hit(key)

    def touch(self, keys, ctx: ReqContext) -> None:
        for key in reversed(list(keys)):
            if key in self.t1:
                chunk = self.t1.pop(key)
                if chunk.is_ready:
                    self.t2[key] = chunk
                else:
                    self.t1[key] = chunk
            elif key in self.t2:
                self.t2[key] = self.t2.pop(key)
            else:
                self._adapt_to_ghost_hit(key)

    def on_request_access(self, keys, ctx: ReqContext) -> None:
        return

    def on_request_finished(self, keys: list[bytes], inserted_only: set, reused: set,
                            ctx: ReqContext) -> None:
        for key in reversed(keys):
            if key in inserted_only:
                for d in (self.t1, self.t2):
                    if key in d:
                        d[key] = d.pop(key)
                        break
                continue
            if key in reused and key in self.t1:
                self.t2[key] = self.t1.pop(key)
            elif key in reused and key in self.t2:
                self.t2[key] = self.t2.pop(key)

    def clear(self) -> None:
        self.t1.clear()
        self.t2.clear()
        self.b1.clear()
        self.b2.clear()
        self.target_t1_size = 0.0

    def eviction_order(self) -> list[bytes]:
        """The evictable keys in the order evict() would take them one at a time now."""
        order, t1, t2 = [], [k for k, c in self.t1.items() if c.ref_cnt == 0], \
            [k for k, c in self.t2.items() if c.ref_cnt == 0]
        virtual_t1 = len(self.t1)
        while t1 or t2:
            if t1 and (virtual_t1 >= int(self.target_t1_size) or not t2):
                order.append(t1.pop(0))
                virtual_t1 -= 1
            else:
                order.append(t2.pop(0))
        return order

    @property
    def evictable(self) -> set[bytes]:
        return {k for k, c in self.chunks.items() if c.ref_cnt == 0}

    def evict(self, n: int, protected: set[bytes]) -> list[tuple[bytes, Chunk]] | None:
        if n == 0:
            return []
        t1 = iter(self.t1.items())
        t2 = iter(self.t2.items())
        virtual_t1 = len(self.t1)

        def next_candidate(entries):
            for key, chunk in entries:
                if chunk.ref_cnt == 0 and key not in protected:
                    return key, chunk
            return None

        candidates: list[tuple[bytes, Chunk, bool]] = []
        for _ in range(n):
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
                    return None
                cand = (*entry, True)
                virtual_t1 -= 1
            candidates.append(cand)
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


@dataclass
class OffloadingEvent:
    keys: list[bytes]
    removed: bool


class CPUOffloadingManager:
    """vLLM's ``CPUOffloadingManager``: chunk pool (fresh ids first, then freed ones, last
    freed first), ref counts, events; eviction decided by the policy."""

    def __init__(self, num_chunks: int, policy: str = "lru") -> None:
        self.num_chunks = num_chunks
        self.num_allocated = 0
        self.free_list: list[int] = []
        self.policy = POLICIES[policy](num_chunks)
        self.num_evictable = 0
        self.generation = 0
        self.events: list[OffloadingEvent] = []

    def _access(self, ctx: ReqContext) -> _Access:
        st = ctx.state.get("access")
        if st is None or st.generation != self.generation:
            st = ctx.state["access"] = _Access(self.generation)
        return st

    def _record_access(self, keys, ctx: ReqContext, reused=()) -> None:
        st = self._access(ctx)
        new = []
        for key in keys:
            if key in st.seen:
                continue
            st.keys.append(key)
            st.seen.add(key)
            new.append(key)
        if new:
            self.policy.on_request_access(new, ctx)
        st.reused.update(k for k in reused if k not in st.inserted)

    def on_new_request(self, ctx: ReqContext) -> None:
        self._access(ctx)

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
        st = self._access(ctx)
        misses = [k for k in to_store if k not in st.store_misses]
        if misses:
            self.policy.on_store_miss(misses, ctx)
            st.store_misses.update(misses)
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
        st.inserted.update(to_store)
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
        st = ctx.state.get("access")
        if st is None or st.generation != self.generation or st.finished:
            return
        st.finished = True
        keys = list(st.keys)
        if all(k in ctx.positions for k in keys):
            keys.sort(key=ctx.positions.__getitem__)
        self.policy.on_request_finished(keys, st.inserted - st.reused, st.reused, ctx)

    def reset_cache(self) -> None:
        self.policy.clear()
        self.generation += 1
        self.num_evictable = 0
        self.free_list.clear()
        self.num_allocated = 0

    def take_events(self) -> list[OffloadingEvent]:
        events, self.events = self.events, []
        return events


@dataclass
class ReqState:
    """vLLM ``RequestOffloadState`` (one group)."""
    req: Request
    ctx: ReqContext
    offload_keys: list[bytes] = field(default_factory=list)
    block_ids: list[int] = field(default_factory=list)
    next_stored_chunk_idx: int = 0
    num_locally_computed_tokens: int = 0
    transfer_jobs: set[int] = field(default_factory=set)
    finished_signaled: bool = False


@dataclass
class TransferJob:
    """One load or store job: vLLM ``TransferJob`` with its ``TransferJobStatus``."""
    job_id: int
    req_id: str
    is_store: bool
    keys: list[bytes]               # head to tail
    gpu_block_ids: list[int]        # store: source; load: destination
    cpu_chunk_ids: list[int]
    sync: bool = False
    fence_block_ids: list[int] = field(default_factory=list)   # deferred fence (stores)

    def to_dict(self) -> dict:
        return {"job": self.job_id, "kind": "store" if self.is_store else "load",
                "request": self.req_id, "sync": self.sync,
                "hashes": [k.hex() for k in self.keys], "gpu_blocks": list(self.gpu_block_ids),
                "cpu_chunks": list(self.cpu_chunk_ids)}


@dataclass
class ConnectorMeta:
    """vLLM ``OffloadingConnectorMetadata``: this step's jobs for the worker."""
    load_jobs: dict[int, TransferJob] = field(default_factory=dict)
    store_jobs: dict[int, TransferJob] = field(default_factory=dict)
    jobs_to_flush: set[int] = field(default_factory=set)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class OffloadingConnector:
    """The scheduler side of vLLM 0.33's OffloadingConnector with a CPU tier of ``num_chunks``
    chunks (one GPU block each)."""

    def __init__(self, num_chunks: int, block_size: int, *, eviction_policy: str = "lru",
                 load_delay: int = 1, store_delay: int = 0, sync_load_budget_tokens: int = 0,
                 enable_caching: bool = True, kv=None) -> None:
        self.block_size = block_size
        self.capacity = num_chunks
        self.manager = CPUOffloadingManager(num_chunks, eviction_policy)
        self.sync_load_budget_tokens = sync_load_budget_tokens
        self.reqs: dict[str, ReqState] = {}
        self.jobs: dict[int, TransferJob] = {}
        self._job_counter = 0
        self._batch_load_jobs: dict[int, TransferJob] = {}
        self._batch_sync_loads: set[str] = set()
        self._batch_sync_tokens = 0
        self._batch_flush: set[int] = set()
        self._batch_allocated: set[int] = set()
        self._pending_by_block: dict[int, set[int]] = {}
        self._chunks_being_loaded: set[bytes] | None = set() if enable_caching else None
        # what the tier holds, for observers: key -> token ids (kept while the key is resident)
        self.tokens: dict[bytes, tuple[int, ...]] = {}
        self.worker = OffloadingWorker(self, load_delay, store_delay, kv)
        self.ops: list | None = None                  # set by the engine
        self.num_stored = 0
        self.num_evicted = 0
        self.step_log: list[TierStep] = []            # engine steps since take_step_log

    def __deepcopy__(self, memo: dict) -> OffloadingConnector:
        new = copy.copy(self)
        memo[id(self)] = new
        for name, value in self.__dict__.items():
            if name not in ("ops",):
                setattr(new, name, copy.deepcopy(value, memo))
        return new

    def _op(self, op) -> None:
        if self.ops is not None:
            self.ops.append(op)

    def _new_job_id(self) -> int:
        self._job_counter += 1
        return self._job_counter - 1

    # -- per request ------------------------------------------------------------------------
    def _update_offload_keys(self, rs: ReqState) -> None:
        hashes = rs.req.block_hashes
        for i in range(len(rs.offload_keys), len(hashes)):
            key = hashes[i]
            rs.offload_keys.append(key)
            rs.ctx.positions[key] = (i + 1) * self.block_size

    def on_new_request(self, request: Request) -> None:
        ctx = ReqContext(request.request_id)
        self.manager.on_new_request(ctx)
        self.reqs[request.request_id] = ReqState(request, ctx)

    # -- lookup -----------------------------------------------------------------------------
    def _lookup(self, rs: ReqState) -> int | None:
        tpc = self.block_size
        nct = rs.num_locally_computed_tokens
        keys = rs.offload_keys
        max_hit = min(rs.req.num_tokens, len(keys) * tpc)
        if max_hit - nct < tpc:
            return 0
        start = nct // tpc
        end = min(_cdiv(max_hit, tpc), len(keys))
        hits, pending = 0, False
        for key in keys[start:end]:
            r = self.manager.lookup(key)
            if r is LookupResult.MISS:
                break
            hits += 1
            pending |= r is LookupResult.HIT_PENDING
        if not pending:
            if hits == 0:
                return 0
            max_hit = min(max_hit, tpc * (start + hits))
        num_hit = max_hit - nct
        if num_hit < tpc:
            return 0
        if pending:
            return None
        if self._chunks_being_loaded:
            if any(k in self._chunks_being_loaded for k in keys[start:_cdiv(nct + num_hit, tpc)]):
                return None
        return num_hit

    def get_num_new_matched_tokens(self, request: Request,
                                   num_computed_tokens: int) -> tuple[int | None, bool]:
        rs = self.reqs[request.request_id]
        rs.block_ids.clear()
        rs.next_stored_chunk_idx = 0
        if rs.transfer_jobs:
            return None, False
        self._update_offload_keys(rs)
        rs.num_locally_computed_tokens = num_computed_tokens
        hit = self._lookup(rs)
        sync = self._reserve_sync_load(rs, num_computed_tokens, hit)
        return hit, bool(hit) and not sync

    def _reserve_sync_load(self, rs: ReqState, num_computed: int, hit: int | None) -> bool:
        rid = rs.req.request_id
        self._batch_sync_loads.discard(rid)
        if (not self.sync_load_budget_tokens or not hit
                or num_computed + hit >= rs.req.num_tokens):
            return False
        if self._batch_sync_tokens + hit > self.sync_load_budget_tokens:
            return False
        self._batch_sync_tokens += hit
        self._batch_sync_loads.add(rid)
        return True

    def get_external_cache_hit_sources(self, request: Request,
                                       num_external_tokens: int) -> dict[str, int]:
        return {HIT_SOURCE: num_external_tokens} if num_external_tokens else {}

    def update_state_after_alloc(self, request: Request, block_ids: list[int],
                                 num_external_tokens: int) -> None:
        self._batch_allocated.update(b for b in block_ids if b != 0)
        if num_external_tokens == 0:
            return
        rs = self.reqs[request.request_id]
        sync = request.request_id in self._batch_sync_loads
        bs = self.block_size
        num_cached = rs.num_locally_computed_tokens + num_external_tokens
        first = _cdiv(rs.num_locally_computed_tokens, bs)
        num_chunks = _cdiv(num_cached, bs)
        keys = rs.offload_keys[first:num_chunks]
        dst = block_ids[first:num_chunks]
        rs.next_stored_chunk_idx = num_chunks   # OffloadPolicy.CHUNK_LEVEL: hits are not re-stored
        src = self.manager.prepare_load(keys, rs.ctx)
        jid = self._new_job_id()
        job = TransferJob(jid, request.request_id, False, list(keys), list(dst), src, sync=sync)
        self._batch_load_jobs[jid] = job
        rs.transfer_jobs.add(jid)
        self.jobs[jid] = job
        if self._chunks_being_loaded is not None and not sync:
            self._chunks_being_loaded.update(keys)

    # -- one step's plan ----------------------------------------------------------------------
    def build_connector_meta(self, out) -> ConnectorMeta:
        for item in out.scheduled:
            rs = self.reqs.get(item.request.request_id)
            if rs is None:
                continue
            self._update_offload_keys(rs)
            if item.admitted:
                rs.block_ids = list(item.table_block_ids)
            else:
                rs.block_ids.extend(item.new_block_ids)
            self._batch_allocated.update(item.new_block_ids)
        for rid in out.preempted:
            rs = self.reqs.get(rid)
            if rs is not None:
                self._batch_flush.update(rs.transfer_jobs - self._batch_load_jobs.keys())
        if self._pending_by_block:
            for bid in self._batch_allocated:
                self._batch_flush.update(self._pending_by_block.get(bid, ()))
        store_jobs = self._build_store_jobs(out)
        meta = ConnectorMeta(self._batch_load_jobs, store_jobs, self._batch_flush)
        for rid in out.finished_req_ids:
            rs = self.reqs.get(rid)
            if rs is None:
                continue
            rs.finished_signaled = True
            self.manager.on_request_finished(rs.ctx)
            if not rs.transfer_jobs:
                del self.reqs[rid]
        self._batch_load_jobs = {}
        self._batch_sync_loads = set()
        self._batch_sync_tokens = 0
        self._batch_flush = set()
        self._batch_allocated = set()
        return meta

    def _build_store_jobs(self, out) -> dict[int, TransferJob]:
        bs = self.block_size
        jobs: dict[int, TransferJob] = {}
        order = [s.request.request_id for s in out.scheduled]
        scheduled = {s.request.request_id: s.num_new_tokens for s in out.scheduled}
        for rid in order + list(out.finished_req_ids):
            rs = self.reqs.get(rid)
            if rs is None:
                continue
            req = rs.req
            if req.is_finished():
                after = (req.num_computed_tokens if req.finish_reason == FINISH_ABORT
                         else max(req.num_prompt_tokens, req.num_tokens - 1))
            else:
                after = req.num_computed_tokens + scheduled[rid]
            offloadable = min(after, req.num_tokens, req.num_prompt_tokens)  # offload_prompt_only
            storable = min(offloadable // bs, len(rs.block_ids), len(rs.offload_keys))
            start = rs.next_stored_chunk_idx
            if storable <= start:
                rs.next_stored_chunk_idx = max(start, storable)
                continue
            keys = rs.offload_keys[start:storable]
            got = self.manager.prepare_store(keys, rs.ctx)
            if got is None:
                continue          # vLLM: "cannot store chunks" — tried again next time
            to_store, chunk_ids, evicted = got
            for key in evicted:
                self.tokens.pop(key, None)
                self.num_evicted += 1
                self._op(Drop(key))
            if not to_store:
                rs.next_stored_chunk_idx = max(start, storable)
                continue
            wanted = set(to_store)
            src, ordered, cids = [], [], dict(zip(to_store, chunk_ids, strict=True))
            for i in range(start, storable):
                key = rs.offload_keys[i]
                if key in wanted:
                    ordered.append(key)
                    src.append(rs.block_ids[i])
                    self.tokens[key] = tuple(req.all_token_ids[i * bs:(i + 1) * bs])
                    self._op(Save(rid, rs.block_ids[i], key))
            rs.next_stored_chunk_idx = max(start, storable)
            jid = self._new_job_id()
            job = TransferJob(jid, rid, True, ordered, src, [cids[k] for k in ordered],
                              fence_block_ids=list(src))
            rs.transfer_jobs.add(jid)
            self.jobs[jid] = job
            jobs[jid] = job
            if req.is_finished():
                for bid in src:
                    self._pending_by_block.setdefault(bid, set()).add(jid)
                    if bid in self._batch_allocated:
                        self._batch_flush.add(jid)
        return jobs

    # -- the worker's report --------------------------------------------------------------------
    def has_pending_push_work(self) -> bool:
        return bool(self.jobs)

    def update_connector_output(self, output: dict) -> None:
        for jid in output.get("completed_jobs", ()):
            job = self.jobs.pop(jid, None)
            if job is None:
                continue
            rs = self.reqs[job.req_id]
            if job.is_store:
                stored = self.manager.complete_store(job.keys, rs.ctx)
                self.num_stored += len(stored)
            else:
                self.manager.complete_load(job.keys, rs.ctx)
                if self._chunks_being_loaded:
                    self._chunks_being_loaded.difference_update(job.keys)
            if self._pending_by_block and rs.req.is_finished():
                for bid in job.fence_block_ids:
                    pending = self._pending_by_block.get(bid)
                    if pending is not None:
                        pending.discard(jid)
                        if not pending:
                            del self._pending_by_block[bid]
            rs.transfer_jobs.discard(jid)
            if rs.finished_signaled and not rs.transfer_jobs:
                del self.reqs[job.req_id]

    def request_finished(self, request: Request, block_ids: list[int]) -> tuple[bool, None]:
        rs = self.reqs.get(request.request_id)
        if rs is None:
            return False, None
        self._update_offload_keys(rs)
        for jid in rs.transfer_jobs:
            for bid in self.jobs[jid].fence_block_ids:
                self._pending_by_block.setdefault(bid, set()).add(jid)
        return False, None

    def take_events(self) -> list:
        """The tier's KV events since the last call: one ``BlockRemoved`` per eviction, one
        ``BlockStored`` per stored chunk (vLLM's placeholder payload: no tokens, block size 0),
        all with ``medium: "CPU"``."""
        out = []
        for ev in self.manager.take_events():
            if ev.removed:
                out.append(TierEvent(BlockRemoved(tuple(hash_to_int(k) for k in ev.keys)),
                                     tuple(ev.keys)))
            else:
                for key in ev.keys:
                    out.append(TierEvent(BlockStored((hash_to_int(key),), None, (), 0),
                                         (key,)))
        return out

    # -- what observers see -----------------------------------------------------------------------
    def log_step(self, meta: ConnectorMeta, output: dict) -> None:
        """Note one engine step: the jobs issued, those flushed, the worker's report and the
        tier's KV events (taken now, as vLLM takes them at the end of update_from_output)."""
        self.step_log.append(TierStep(
            tuple(meta.load_jobs.values()), tuple(meta.store_jobs.values()),
            tuple(sorted(meta.jobs_to_flush)), tuple(output.get("completed_jobs", ())),
            tuple(output.get("finished_recving", ())), tuple(self.take_events())))

    def take_step_log(self) -> list[TierStep]:
        log, self.step_log = self.step_log, []
        return log

    def contents(self) -> list[tuple[bytes, str, int, int]]:
        """Every chunk the tier holds: (hash, state, chunk id, ref_cnt); the evictable ones
        first, in eviction order (first evicted first), then those pinned by a load or still
        being stored."""
        pol = self.manager.policy
        chunks = pol.chunks
        order = pol.eviction_order()
        seen = set(order)
        rest = [k for k in chunks if k not in seen]
        out = []
        for k in order + rest:
            c = chunks[k]
            state = "ready" if c.ref_cnt == 0 else ("storing" if c.ref_cnt < 0 else "loading")
            out.append((k, state, c.chunk_id, c.ref_cnt))
        return out


@dataclass(frozen=True)
class TierStep:
    """What the connector did in one engine step."""
    load_jobs: tuple[TransferJob, ...]
    store_jobs: tuple[TransferJob, ...]
    jobs_to_flush: tuple[int, ...]
    completed_jobs: tuple[int, ...]
    finished_recving: tuple[str, ...]
    events: tuple[TierEvent, ...]

    def to_dict(self) -> dict:
        return {"load_jobs": [j.to_dict() for j in self.load_jobs],
                "store_jobs": [j.to_dict() for j in self.store_jobs],
                "jobs_to_flush": list(self.jobs_to_flush),
                "completed_jobs": list(self.completed_jobs),
                "finished_recving": list(self.finished_recving),
                "kv_events": [e.to_dict() for e in self.events]}


@dataclass(frozen=True)
class TierEvent:
    """A KV event of the CPU tier, and the hashes (bytes) it is about."""
    event: Any
    hashes: tuple[bytes, ...]

    def to_dict(self) -> dict:
        return {**self.event.to_dict(), "medium": "CPU"}


class OffloadingWorker:
    """The worker side, simulated in time: job completions are reported after the configured
    delays (as vLLM's OffloadingConnectorWorker reports them); with a KV runtime the K/V moves
    between the paged GPU store and a CPU tensor pool when a job is issued."""

    def __init__(self, connector: OffloadingConnector, load_delay: int, store_delay: int,
                 kv=None) -> None:
        self.load_delay = load_delay
        self.store_delay = store_delay
        self.kv = kv
        self.pool = None
        if kv is not None:
            from blockviz.kv.offload import CPUKVPool
            self.pool = CPUKVPool(connector.capacity, kv.store)
        self.step = 0
        # (due step, job id, request id of an async load or None, kind)
        self.inflight: list[tuple[int, int, str | None, str]] = []

    def __deepcopy__(self, memo: dict) -> OffloadingWorker:
        new = copy.copy(self)
        memo[id(self)] = new
        new.kv = copy.deepcopy(self.kv, memo)
        new.pool = copy.deepcopy(self.pool, memo)
        new.inflight = list(self.inflight)
        return new

    def start_load_kv(self, meta: ConnectorMeta) -> None:
        """Before the forward pass: loads write their GPU blocks; stores of finished requests
        read theirs (a flushed job's blocks are about to be reused)."""
        if self.pool is None:
            return
        for job in meta.load_jobs.values():
            self.pool.load_blocks(job.cpu_chunk_ids, job.gpu_block_ids)

    def save_kv(self, meta: ConnectorMeta, before_forward: bool, finished) -> None:
        if self.pool is None:
            return
        for job in meta.store_jobs.values():
            if (job.req_id in finished) == before_forward:
                self.pool.store_blocks(job.gpu_block_ids, job.cpu_chunk_ids)

    def get_finished(self, meta: ConnectorMeta) -> dict:
        """This step's report (vLLM KVConnectorOutput): completed job ids and the requests whose
        async load is done."""
        self.step += 1
        n = self.step
        flush = meta.jobs_to_flush
        for jid, job in meta.load_jobs.items():
            due = n if job.sync else n + self.load_delay
            self.inflight.append((due, jid, None if job.sync else job.req_id, "load"))
        for jid in meta.store_jobs:
            due = n if jid in flush else n + 1 + self.store_delay
            self.inflight.append((due, jid, None, "store"))
        self.inflight = [(n if jid in flush else due, jid, rid, kind)
                         for due, jid, rid, kind in self.inflight]
        done = sorted((x for x in self.inflight if x[0] <= n), key=lambda x: x[1])
        self.inflight = [x for x in self.inflight if x[0] > n]
        return {"completed_jobs": [jid for _, jid, _, _ in done],
                "finished_recving": [rid for _, _, rid, _ in done if rid is not None]}
