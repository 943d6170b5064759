"""The scheduler side of vLLM 0.33's OffloadingConnector, after offloading/scheduler.py
(``OffloadingConnectorScheduler``; its contracts are listed in ``blockviz.sim.offload``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from blockviz.core import Request
from blockviz.core.events import MEDIUM_CPU, BlockRemoved, BlockStored
from blockviz.core.hashing import hash_to_event_int as hash_to_int
from blockviz.core.kv_cache_interface import cdiv
from blockviz.core.ops import Drop, OpSink, Save
from blockviz.core.request import FINISH_ABORT
from blockviz.sim.offload.base import LookupResult, ReqContext
from blockviz.sim.offload.common import ConnectorMeta, TransferJob
from blockviz.sim.offload.manager import HIT_SOURCE, CPUOffloadingManager
from blockviz.sim.offload.worker import OffloadingWorker


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
        self.worker = OffloadingWorker(num_chunks, load_delay, store_delay, kv)
        self.sink: OpSink | None = None               # set by the engine
        self.step_log: list[TierStep] = []            # engine steps since take_step_log

    def _op(self, op) -> None:
        if self.sink is not None:
            self.sink.on_op(op)

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
        end = min(cdiv(max_hit, tpc), len(keys))
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
            if any(k in self._chunks_being_loaded for k in keys[start:cdiv(nct + num_hit, tpc)]):
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
        # a request that skips reading the prefix cache (prompt logprobs) is not looked up
        hit = 0 if request.skip_reading_prefix_cache else self._lookup(rs)
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
        first = cdiv(rs.num_locally_computed_tokens, bs)
        num_chunks = cdiv(num_cached, bs)
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
                continue
            keys = rs.offload_keys[start:storable]
            got = self.manager.prepare_store(keys, rs.ctx)
            if got is None:
                continue          # vLLM: "cannot store chunks" — tried again next time
            to_store, chunk_ids, evicted = got
            for key in evicted:
                self.tokens.pop(key, None)
                self._op(Drop(key))
            rs.next_stored_chunk_idx = storable
            if not to_store:
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
                self.manager.complete_store(job.keys, rs.ctx)
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
        if rs is not None:
            self._update_offload_keys(rs)
            for jid in rs.transfer_jobs:
                for bid in self.jobs[jid].fence_block_ids:
                    self._pending_by_block.setdefault(bid, set()).add(jid)
        return False, None

    def take_events(self) -> list:
        """The tier's KV events since the last call: one ``BlockRemoved`` per eviction, one
        ``BlockStored`` per stored chunk (vLLM 0.33's placeholder payload, its events not being
        self-describing: no tokens, block size 0, no spec kind, group 0), all with ``medium:
        "CPU"``."""
        out = []
        for ev in self.manager.take_events():
            if ev.removed:
                out.append(TierEvent(BlockRemoved(tuple(hash_to_int(k) for k in ev.keys),
                                                  medium=MEDIUM_CPU), tuple(ev.keys)))
            else:
                for key in ev.keys:
                    out.append(TierEvent(BlockStored((hash_to_int(key),), None, (), 0,
                                                     medium=MEDIUM_CPU, kv_cache_spec_kind=None),
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
        return self.event.to_dict()
