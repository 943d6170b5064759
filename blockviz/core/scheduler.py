"""The teaching scheduler — the block-manager side of vllm/v1/core/sched/scheduler.py (vLLM 0.33),
with no token budget, chunked prefill or speculative decoding: FCFS admission, one decode token per
running request, preemption of the last running request when memory runs out.

An engine step is schedule -> execute -> update. This module does the first and the last; the
engine runs the model in between:

  * :meth:`Scheduler.schedule` — decode first: for each running request (in running order) that the
    caller lists, ``allocate_slots(req, 1)``; on None preempt the *last* running request and retry
    (if the victim is the request itself, stop scheduling). Then, if nothing was preempted, admit
    waiting requests in order: local hit (``get_computed_blocks``), then external hit (connector),
    then ``allocate_slots`` for the rest; the first that does not fit stops admission.
  * :meth:`Scheduler.update_from_output` — each scheduled request gets its sampled token, in
    scheduling order; one that reached ``max_tokens`` finishes and frees its blocks.
"""
from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

from blockviz.core.manager import KVCacheManager
from blockviz.core.ops import Admit, Arrive, Finish, Preempt, Sample, Schedule
from blockviz.core.request import Request, RequestStatus


class ExternalTier(Protocol):
    """What the scheduler asks of a KV connector (vLLM's KVConnectorBase scheduler side)."""

    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> int: ...
    def request_finished(self, request: Request, block_ids: list[int]) -> None: ...


@dataclass
class ScheduledRequest:
    request: Request
    start: int                   # position of the first token computed this step
    num_new_tokens: int          # tokens whose K/V this step computes
    is_prefill: bool
    local_hit_tokens: int = 0
    external_hit_tokens: int = 0
    hit_block_ids: tuple[int, ...] = ()
    external_block_ids: tuple[int, ...] = ()


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledRequest] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)


class SchedulerError(Exception):
    """An event that the current state does not allow."""


class Scheduler:
    def __init__(self, manager: KVCacheManager, connector: ExternalTier | None = None) -> None:
        self.kv_cache_manager = manager
        self.connector = connector
        self.requests: dict[str, Request] = {}
        self.waiting: list[Request] = []
        self.running: list[Request] = []

    def _op(self, op) -> None:
        ops = self.kv_cache_manager.block_pool.ops
        if ops is not None:
            ops.append(op)

    # -- arrivals and departures ----------------------------------------------------------
    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise SchedulerError(f"request {request.request_id!r} already exists")
        self.requests[request.request_id] = request
        self.waiting.append(request)
        self._op(Arrive(request.request_id))

    def finish_request(self, request_id: str) -> None:
        request = self._get(request_id)
        if request.status is RequestStatus.FINISHED:
            raise SchedulerError(f"request {request_id!r} has already finished")
        if request.status is RequestStatus.RUNNING:
            self._release(request)
            self.running.remove(request)
        else:
            self.waiting.remove(request)
        request.status = RequestStatus.FINISHED
        self._op(Finish(request_id))

    def _release(self, request: Request) -> None:
        """Let the connector save the request's cached blocks, then free its table."""
        if self.connector is not None:
            self.connector.request_finished(request,
                                            self.kv_cache_manager.get_block_ids(request.request_id))
        self.kv_cache_manager.free(request)

    def preempt_request(self, request_id: str) -> None:
        request = self._get(request_id)
        if request.status is not RequestStatus.RUNNING:
            raise SchedulerError(f"only a running request can be preempted; "
                                 f"{request_id!r} is {request.status.value}")
        self._preempt(request)

    def _preempt(self, request: Request) -> None:
        self.kv_cache_manager.free(request)
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        request.status = RequestStatus.PREEMPTED
        self.running.remove(request)
        self.waiting.insert(0, request)
        self.kv_cache_manager.prefix_cache_stats.preemptions += 1
        self._op(Preempt(request.request_id))

    def _get(self, request_id: str) -> Request:
        try:
            return self.requests[request_id]
        except KeyError:
            raise SchedulerError(f"unknown request {request_id!r}") from None

    # -- one step -------------------------------------------------------------------------
    def schedule(self, decode: Collection[str] | None, admit: bool) -> SchedulerOutput:
        """Schedule one step: the decode of the running requests in ``decode`` (None: none), then,
        if ``admit`` and nothing was preempted, admission of waiting requests."""
        out = SchedulerOutput()
        if decode is not None:
            self._schedule_running(decode, out)
        if admit and not out.preempted:
            self._schedule_waiting(out)
        for item in out.scheduled:  # vLLM's _update_after_schedule
            item.request.num_computed_tokens = item.start + item.num_new_tokens
        return out

    def _schedule_running(self, decode: Collection[str], out: SchedulerOutput) -> None:
        mgr = self.kv_cache_manager
        for request in list(self.running):
            if request.request_id not in decode or request not in self.running:
                continue
            while True:
                if mgr.allocate_slots(request, 1) is not None:
                    out.scheduled.append(ScheduledRequest(
                        request, request.num_computed_tokens, 1, is_prefill=False))
                    self._op(Schedule(request.request_id, 1))
                    break
                victim = self.running[-1]
                self._preempt(victim)
                out.preempted.append(victim.request_id)
                out.scheduled = [s for s in out.scheduled if s.request is not victim]
                if victim is request:
                    break
            if request not in self.running:
                return

    def _schedule_waiting(self, out: SchedulerOutput) -> None:
        mgr = self.kv_cache_manager
        stats = mgr.prefix_cache_stats
        while self.waiting:
            request = self.waiting[0]
            hits, num_local = mgr.get_computed_blocks(request)
            num_external = 0
            if self.connector is not None:
                num_external = self.connector.get_num_new_matched_tokens(request, num_local)
            num_new = request.num_tokens - num_local - num_external
            if mgr.allocate_slots(request, num_new, num_local, hits, num_external) is None:
                return  # head-of-line blocking: it stays first in line
            stats.queries += request.num_tokens
            stats.hits += num_local
            if self.connector is not None:
                stats.external_queries += request.num_tokens - num_local
                stats.external_hits += num_external
            self.waiting.pop(0)
            self.running.append(request)
            request.status = RequestStatus.RUNNING
            table = mgr.req_to_blocks[request.request_id]
            n_local_blocks = len(hits)
            n_ext_blocks = (num_local + num_external) // mgr.block_size - n_local_blocks
            out.scheduled.append(ScheduledRequest(
                request, num_local + num_external, num_new, is_prefill=True,
                local_hit_tokens=num_local, external_hit_tokens=num_external,
                hit_block_ids=tuple(b.block_id for b in hits),
                external_block_ids=tuple(b.block_id for b in
                                         table[n_local_blocks:n_local_blocks + n_ext_blocks])))
            self._op(Admit(request.request_id, num_local, num_external, num_new))

    def update_from_output(self, out: SchedulerOutput, sampled: dict[str, int]) -> list[str]:
        """Append each scheduled request's sampled token; finish those at ``max_tokens``."""
        finished: list[str] = []
        for item in out.scheduled:
            request = item.request
            token = sampled[request.request_id]
            request.append_output_token_ids(token)
            self._op(Sample(request.request_id, token))
            if request.max_tokens is not None and request.num_output_tokens >= request.max_tokens:
                self._release(request)
                self.running.remove(request)
                request.status = RequestStatus.FINISHED
                finished.append(request.request_id)
                self._op(Finish(request.request_id))
        return finished
