"""The scheduler — vllm/v1/core/sched/scheduler.py (vLLM 0.33) on the paths a model without
speculative decoding, encoders, LoRA limits or pausing takes, under either of vLLM's scheduling
policies (``fcfs``, the default, and ``priority``).

One engine step is schedule -> execute -> update; this module does the first and the last, the
engine runs the model in between. :meth:`Scheduler.schedule` follows vLLM's order exactly:

  1. *Running requests first*, in ``running`` order, while the token budget
     (``max_num_batched_tokens``) lasts: each gets ``num_tokens - num_computed_tokens`` new tokens
     (a decode token, or its prefill's next chunk), capped by ``long_prefill_token_threshold``
     (only when more than one request is running or waiting), the remaining budget and
     ``max_model_len``; then ``allocate_slots``. When that returns None a victim is preempted
     and the allocation retried: under FCFS the *last* running request (if it is the request
     itself, scheduling of running requests stops); under PRIORITY the one with the largest
     ``(priority, arrival_time)`` — if it was already scheduled in this step it is un-scheduled
     (its tokens go back to the budget), and if it is the request itself the loop goes on to the
     next running request.
  2. *Then waiting requests*, only if nothing was preempted in this step, while budget remains
     and fewer than ``max_num_seqs`` run: the head's prefix-cache hit (only when it has computed
     nothing yet, and never for a request that skips reading the cache: ``prompt_logprobs``),
     then ``allocate_slots(..., full_sequence_must_fit=True)`` — the whole sequence must fit,
     not just its first chunk, plus the admission watermark's blocks while any request runs. The
     head is the queue's first request (FCFS) or its lowest ``(priority, arrival_time)``
     (PRIORITY). The first that does not fit stops admission
     (head-of-line blocking); with chunked prefill off, so does the first whose remaining
     prompt exceeds the budget. Stats are recorded at a successful admission.
  3. Every scheduled request's ``num_computed_tokens`` grows by its scheduled tokens *before*
     the forward pass (``_update_after_schedule``); blocks were cached inside ``allocate_slots``.

:meth:`Scheduler.update_from_output` appends each sampled token (a partial prefill chunk samples
none) and finishes a request at ``max_tokens`` or ``max_model_len`` (``FINISHED_LENGTH_CAPPED``).

``async_scheduling`` is vLLM's ``AsyncScheduler``: a scheduled decode counts an output
*placeholder* until its token is applied one step later, so step n+1 is scheduled before step n's
output is known.

:meth:`Scheduler.reset_prefix_cache` is vLLM's: with ``reset_running_requests`` it first
preempts every running request (the last first), so the reset cannot be refused.

Teaching-only forms (vLLM never does these; the engine marks them): ``schedule(only=...)``
schedules a chosen subset of the running requests and admits nothing; :meth:`preempt_request`
preempts a chosen running request.
"""
from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from blockviz.core.manager import KVCacheManager, PrefixCacheStats
from blockviz.core.ops import Admit, Arrive, Finish, Preempt, Sample, Schedule
from blockviz.core.request import FINISH_ABORT, FINISH_LENGTH, Request, RequestStatus

POLICIES = ("fcfs", "priority")
RESET_RUNNING_FAILED = (
    "Failed to reset KV cache even when all the running requests are preempted and moved to the "
    "waiting queue. This is likely due to the presence of running requests waiting for remote KV "
    "transfer, which is not supported yet.")   # vLLM's RuntimeError, word for word


@dataclass(frozen=True)
class SchedulerConfig:
    """vLLM 0.33's scheduler settings that blockviz models, with vLLM's names. vLLM's defaults of
    the budgets depend on the GPU and the entry point (engine/arg_utils.py: 8192 tokens and 256
    sequences for the LLM class below the H100 class; the OpenAI server on an H100 8192 and 1024);
    these are one such pair."""
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    enable_chunked_prefill: bool = True
    long_prefill_token_threshold: int = 0
    max_model_len: int = 1 << 20
    async_scheduling: bool = False
    policy: str = "fcfs"          # "fcfs" | "priority" (vLLM's --scheduling-policy)
    watermark: float = 0.0        # blocks kept free at admission: int(watermark * num_gpu_blocks)

    def problems(self) -> list[tuple[str, str]]:
        """(field, message) for each setting vLLM's ``SchedulerConfig.verify_max_model_len``
        rejects."""
        out = []
        if self.max_num_batched_tokens < self.max_model_len and not self.enable_chunked_prefill:
            out.append(("max_num_batched_tokens",
                        f"max_num_batched_tokens ({self.max_num_batched_tokens}) is smaller than "
                        f"max_model_len ({self.max_model_len}) with chunked prefill off: vLLM "
                        f"rejects this (raise the budget, lower max_model_len, or turn "
                        f"enable_chunked_prefill on)"))
        if self.max_num_batched_tokens < self.max_num_seqs:
            out.append(("max_num_seqs",
                        f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                        f"max_num_seqs ({self.max_num_seqs}): vLLM rejects this"))
        if self.long_prefill_token_threshold > self.max_model_len:
            out.append(("long_prefill_token_threshold",
                        f"long_prefill_token_threshold ({self.long_prefill_token_threshold}) "
                        f"cannot be greater than max_model_len ({self.max_model_len}): vLLM "
                        f"rejects this"))
        return out


class KVConnector(Protocol):
    """What the scheduler asks of a KV connector: vLLM 0.33's ``KVConnectorBase_V1`` scheduler
    side, with its names and contracts (blockviz.sim.offload implements it after vLLM's
    ``OffloadingConnector``)."""

    def on_new_request(self, request: Request) -> None: ...
    # (tokens past ``num_computed_tokens`` the connector can supply, or None: ask again in a
    # later step; and whether they load asynchronously, between steps)
    def get_num_new_matched_tokens(self, request: Request,
                                   num_computed_tokens: int) -> tuple[int | None, bool]: ...
    def update_state_after_alloc(self, request: Request, block_ids: list[int],
                                 num_external_tokens: int) -> None: ...
    def get_external_cache_hit_sources(self, request: Request,
                                       num_external_tokens: int) -> dict[str, int]: ...
    def build_connector_meta(self, out: SchedulerOutput) -> Any: ...
    # the worker's report: {"completed_jobs": [...], "finished_recving": [...]}
    def update_connector_output(self, output: dict) -> None: ...
    def request_finished(self, request: Request,
                         block_ids: list[int]) -> tuple[bool, dict | None]: ...
    def take_events(self) -> list: ...
    def has_pending_push_work(self) -> bool: ...


@dataclass
class ScheduledRequest:
    request: Request
    start: int                   # position of the first token computed this step
    num_new_tokens: int          # tokens whose K/V this step computes
    admitted: bool = False       # taken from the waiting queue in this step
    resumed: bool = False        # ... after a preemption
    local_hit_tokens: int = 0
    external_hit_tokens: int = 0
    hit_block_ids: tuple[int, ...] = ()
    external_block_ids: tuple[int, ...] = ()
    new_block_ids: tuple[int, ...] = ()   # blocks allocate_slots took for it in this step
    table_block_ids: tuple[int, ...] = ()  # an admission: its whole block table
    looked_up: bool = False      # an admission that looked up the caches (not one after a load)
    decode: bool = False         # a decode token (the request had finished its prefill before)
    samples: bool = False        # the step completes its prefill (or decodes): a token is sampled


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledRequest] = field(default_factory=list)  # running first, then admitted
    preempted: list[str] = field(default_factory=list)
    token_budget: int = 0        # max_num_batched_tokens of this step
    teaching_only: bool = False  # a schedule vLLM's scheduler would not make
    # requests finished since the previous schedule(), in the order they finished (vLLM:
    # SchedulerOutput.finished_req_ids, a set)
    finished_req_ids: tuple[str, ...] = ()
    # async KV loads admitted in this step: parked in WAITING_FOR_REMOTE_KVS, nothing scheduled
    loading: list[ScheduledRequest] = field(default_factory=list)
    kv_connector_metadata: Any = None   # the connector's plan of this step (loads, stores)
    kv_connector_output: Any = None     # the worker's report after the step (jobs done)

    @property
    def num_scheduled_tokens(self) -> dict[str, int]:
        return {s.request.request_id: s.num_new_tokens for s in self.scheduled}

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)


@dataclass
class SchedulerStats:
    """vLLM's ``SchedulerStats`` of one ``update_from_output`` (sched:3259-3303), the fields its
    stat loggers read here, plus ``num_preempted_reqs``: the PREEMPTED events the requests' outputs
    of this update carried (vLLM counts them from the outputs, into IterationStats)."""
    num_running_reqs: int
    num_waiting_reqs: int               # waiting but not deferred
    num_skipped_waiting_reqs: int       # deferred: skipped by a scheduling pass and not yet run
    kv_cache_usage: float
    prefix_cache_stats: PrefixCacheStats
    connector_prefix_cache_stats: PrefixCacheStats | None
    num_preempted_reqs: int = 0


class SchedulerError(Exception):
    """An event that the current state does not allow."""


class Scheduler:
    def __init__(self, manager: KVCacheManager, connector: KVConnector | None = None,
                 config: SchedulerConfig | None = None) -> None:
        self.kv_cache_manager = manager
        self.connector = connector
        self.config = config = config or SchedulerConfig()
        if manager.max_model_len != config.max_model_len:
            raise ValueError("the manager and the scheduler disagree on max_model_len")
        if manager.watermark != config.watermark:
            raise ValueError("the manager and the scheduler disagree on the watermark")
        # vLLM's SchedulingPolicy: FCFS queues are deques; PRIORITY queues are heaps ordered by
        # Request.__lt__, here lists kept in that order (the same head, the same iteration)
        self.priority = config.policy == "priority"
        # Every request that ever arrived, finished ones included (vLLM forgets those; the
        # timeline shows them).
        self.requests: dict[str, Request] = {}
        self.waiting: list[Request] = []
        # vLLM's kv_holding_waiting: waiting requests that hold KV blocks (an async KV load in
        # flight or done); drained before ``waiting``.
        self.kv_holding_waiting: list[Request] = []
        self.running: list[Request] = []
        # finished since the last schedule(), in the order they finished (vLLM keeps a set)
        self.finished_req_ids: dict[str, None] = {}
        # async loads the worker reported done (their requests leave WAITING_FOR_REMOTE_KVS at
        # their next turn in schedule()); aborted ones whose load is still in flight
        self.finished_recving_kv_req_ids: set[str] = set()
        self._free_after_recv: set[str] = set()
        # requests still prefilling after this step (their remaining blocks are reserved
        # against an async load's admission), vLLM's _inflight_prefills
        self._inflight_prefills: dict[str, Request] = {}
        self.num_preemptions = 0
        # The connector's PrefixCacheStats (vLLM: connector_prefix_cache_stats), cumulative; and
        # vLLM's own, per interval (taken by make_stats)
        self.connector_prefix_cache_stats = PrefixCacheStats()
        self._connector_interval = PrefixCacheStats()
        # vLLM's deferred_waiting: waiting requests a scheduling pass skipped, until they run
        self.deferred_waiting: set[str] = set()
        # the SchedulerStats of the last update_from_output (vLLM hands them to its loggers)
        self.last_stats: SchedulerStats | None = None

    def _op(self, op) -> None:
        sink = self.kv_cache_manager.block_pool.sink
        if sink is not None:
            sink.on_op(op)

    # -- queries --------------------------------------------------------------------------
    def has_unfinished_requests(self) -> bool:
        return bool(self.running or self.waiting or self.kv_holding_waiting)

    def has_requests(self) -> bool:
        """vLLM's engine steps only while this holds (a step after an abort still runs, and so
        does one while the connector has transfers in flight)."""
        return (self.has_unfinished_requests() or bool(self.finished_req_ids)
                or (self.connector is not None and self.connector.has_pending_push_work()))

    @property
    def all_waiting(self) -> list[Request]:
        """Both waiting queues in the order schedule() visits them."""
        return self.kv_holding_waiting + self.waiting

    def max_tokens_of(self, request: Request) -> int:
        """vLLM's input processor sets an unset ``max_tokens`` to what the context has left."""
        if request.max_tokens is not None:
            return request.max_tokens
        return self.config.max_model_len - request.num_prompt_tokens

    # -- arrivals and departures ----------------------------------------------------------
    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise SchedulerError(f"request {request.request_id!r} already exists")
        if request.num_prompt_tokens >= self.config.max_model_len:
            raise SchedulerError(
                f"request {request.request_id!r}: its prompt ({request.num_prompt_tokens} "
                f"tokens) plus at least one output token is longer than max_model_len "
                f"({self.config.max_model_len}); vLLM rejects it")
        self.requests[request.request_id] = request
        self._add(self.waiting, request)
        if self.connector is not None:
            self.connector.on_new_request(request)
        self._op(Arrive(request.request_id))

    def finish_request(self, request_id: str, reason: str = FINISH_ABORT) -> None:
        """vLLM ``finish_requests(request_id, status)`` from outside the scheduler: the client's
        abort (``FINISH_ABORT``, FINISHED_ABORTED), or the request's stop (``FINISH_STOP``,
        FINISHED_STOPPED: a stop token or a stop string). The status is set, then the request
        freed, the same way for every reason."""
        request = self._get(request_id)
        if request.is_finished():
            raise SchedulerError(f"request {request_id!r} has already finished")
        delay_free = False
        if request.status is RequestStatus.RUNNING:
            self.running.remove(request)
        else:
            if request in self.kv_holding_waiting:
                self.kv_holding_waiting.remove(request)
            else:
                self.waiting.remove(request)
            self.deferred_waiting.discard(request_id)
            if request.status is RequestStatus.WAITING_FOR_REMOTE_KVS:
                # its load is still in flight: the blocks are freed when the worker reports it
                delay_free = request_id not in self.finished_recving_kv_req_ids
                self.finished_recving_kv_req_ids.discard(request_id)
        request.status = RequestStatus.FINISHED
        request.finish_reason = reason
        self._free_request(request, delay_free)
        self._op(Finish(request_id, reason))

    def _free_request(self, request: Request, delay_free: bool = False) -> None:
        """Tell the connector (vLLM 0.33's OffloadingConnector answers ``(False, None)``: free
        now), then free the request's table."""
        self.finished_req_ids[request.request_id] = None
        self._inflight_prefills.pop(request.request_id, None)
        if self.connector is not None:
            delay, _ = self.connector.request_finished(
                request, self.kv_cache_manager.get_block_ids(request.request_id)[0])
            delay_free = delay_free or delay
        if delay_free:
            self._free_after_recv.add(request.request_id)
        else:
            self.kv_cache_manager.free(request)

    def reset_prefix_cache(self, reset_running_requests: bool = False,
                           reset_connector: bool = False) -> bool:
        """vLLM ``Scheduler.reset_prefix_cache`` (sched:3184-3227). With
        ``reset_running_requests`` every running request is preempted first, the last first (so
        FCFS puts them back in their running order, ahead of the older waiting ones), its
        in-flight output dropped; then the pool's reset, which cannot fail unless a waiting
        request still holds blocks (an async load) — vLLM raises then, and so does this
        (SchedulerError with vLLM's message). ``reset_connector``: the connector's cache too
        (without a connector, a success that does nothing, as in vLLM)."""
        if reset_running_requests:
            while self.running:
                self._preempt(self.running.pop(), drop_stale_output=True)
        ok = self.kv_cache_manager.reset_prefix_cache()
        if reset_running_requests and not ok:
            raise SchedulerError(RESET_RUNNING_FAILED)
        if reset_connector and self.connector is not None:
            raise SchedulerError("reset_connector with a KV connector is not modelled")
        return ok

    def preempt_request(self, request_id: str) -> None:
        """Teaching-only: preempt a chosen running request (vLLM preempts only when an
        allocation fails — the last running request under FCFS, the lowest priority under
        PRIORITY — or every running request in ``reset_prefix_cache(reset_running_requests)``)."""
        request = self._get(request_id)
        if request.status is not RequestStatus.RUNNING:
            raise SchedulerError(f"only a running request can be preempted; "
                                 f"{request_id!r} is {request.status.value}")
        self.running.remove(request)
        self._preempt(request)

    # -- the queues (vLLM's RequestQueue) -------------------------------------------------
    def _add(self, queue: list[Request], request: Request) -> None:
        """``add_request``: FCFS at the back; PRIORITY in order."""
        if self.priority:
            bisect.insort(queue, request, key=Request.sort_key)
        else:
            queue.append(request)

    def _prepend(self, queue: list[Request], request: Request) -> None:
        """``prepend_request``: FCFS at the front; PRIORITY in order (a heap has no front)."""
        if self.priority:
            bisect.insort(queue, request, key=Request.sort_key)
        else:
            queue.insert(0, request)

    def _prepend_all(self, queue: list[Request], requests: Iterable[Request]) -> None:
        """``prepend_requests`` of the requests a pass skipped, in their order: FCFS ahead of
        the rest, order kept; PRIORITY each in order."""
        if self.priority:
            for r in requests:
                bisect.insort(queue, r, key=Request.sort_key)
        else:
            queue[0:0] = requests

    def _victim(self) -> Request:
        """The request to preempt when an allocation fails: FCFS the last running request;
        PRIORITY the largest ``(priority, arrival_time)``, the first of equals (sched:932-938)."""
        if self.priority:
            return max(self.running, key=lambda r: (r.priority, r.arrival_time))
        return self.running[-1]

    def _preempt(self, request: Request, drop_stale_output: bool = False) -> None:
        """vLLM ``_preempt_request`` (the caller took it out of ``running``)."""
        self.kv_cache_manager.free(request)
        self._inflight_prefills.pop(request.request_id, None)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        # Async: the in-flight output still arrives, but must not move the reset counters.
        request.drop_stale_output = drop_stale_output or (
            request.drop_stale_output and request.num_stale_output_tokens > 0)
        request.num_stale_output_tokens = request.num_in_flight_tokens
        request.num_output_placeholders = 0
        request.num_preemptions += 1
        request.num_pending_preempted += 1     # vLLM's PREEMPTED event, sent with its next output
        self.num_preemptions += 1
        self._prepend(self.waiting, request)
        self._op(Preempt(request.request_id))

    def _get(self, request_id: str) -> Request:
        try:
            return self.requests[request_id]
        except KeyError:
            raise SchedulerError(f"unknown request {request_id!r}") from None

    # -- one step -------------------------------------------------------------------------
    def schedule(self, only: Collection[str] | None = None) -> SchedulerOutput:
        """One vLLM ``schedule()``. ``only`` (teaching-only): schedule just these running
        requests, and admit nothing."""
        cfg = self.config
        out = SchedulerOutput(token_budget=cfg.max_num_batched_tokens,
                              teaching_only=only is not None)
        # The threshold exists so a long prefill cannot starve others: alone, it is off.
        threshold = (cfg.long_prefill_token_threshold
                     if len(self.running) + len(self.waiting) + len(self.kv_holding_waiting) > 1
                     else 0)
        budget = self._schedule_running(out, cfg.max_num_batched_tokens, threshold, only)
        if only is None and not out.preempted:
            self._schedule_waiting(out, budget, threshold)
        out.finished_req_ids = tuple(self.finished_req_ids)
        if self.connector is not None:
            # vLLM: inside schedule(), before _update_after_schedule — the store jobs of the
            # prompt blocks whose last token is scheduled now
            out.kv_connector_metadata = self.connector.build_connector_meta(out)
        self._update_after_schedule(out)
        self.finished_req_ids = {}
        return out

    def _schedule_running(self, out: SchedulerOutput, budget: int, threshold: int,
                          only: Collection[str] | None) -> int:
        mgr = self.kv_cache_manager
        max_model_len = self.config.max_model_len
        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            if only is not None and request.request_id not in only:
                i += 1
                continue
            ph = request.num_output_placeholders
            if ph > 0 and (request.num_computed_tokens + 2 - ph
                           >= request.num_prompt_tokens + self.max_tokens_of(request)):
                i += 1  # async: the step in flight already reaches max_tokens
                continue
            num_new = request.num_tokens + ph - request.num_computed_tokens
            if 0 < threshold < num_new:
                num_new = threshold
            num_new = min(num_new, budget, max_model_len - request.num_computed_tokens - 1)
            if num_new <= 0:
                i += 1
                continue
            while True:
                new_blocks = mgr.allocate_slots(request, num_new)
                if new_blocks is not None:
                    break
                victim = self._victim()
                if self.priority:
                    at = self.running.index(victim)
                    del self.running[at]
                    if at < i:
                        i -= 1
                    done = next((s for s in out.scheduled if s.request is victim), None)
                    if done is not None:   # scheduled earlier in this step: undo it
                        out.scheduled.remove(done)
                        budget += done.num_new_tokens
                else:
                    self.running.pop()
                self._preempt(victim)
                out.preempted.append(victim.request_id)
                if victim is request:
                    break
            if new_blocks is None:
                if self.priority and request.status is RequestStatus.PREEMPTED:
                    continue   # it was the lowest: the higher ones after it may still fit
                break
            decode = not request.is_prefill_chunk
            out.scheduled.append(ScheduledRequest(request, request.num_computed_tokens, num_new,
                                                  decode=decode,
                                                  new_block_ids=tuple(b.block_id
                                                                      for g in new_blocks
                                                                      for b in g)))
            self._op(Schedule(request.request_id, num_new, decode))
            budget -= num_new
            i += 1
        return budget

    def _schedule_waiting(self, out: SchedulerOutput, budget: int, threshold: int) -> None:
        mgr = self.kv_cache_manager
        cfg = self.config
        conn = self.connector
        skipped: list[Request] = []
        skipped_holding: list[Request] = []

        def skip(queue: list[Request]) -> None:
            r = queue.pop(0)
            self.deferred_waiting.add(r.request_id)
            (skipped_holding if self._holds_kv_blocks(r) else skipped).append(r)

        while budget > 0:
            queue = self.kv_holding_waiting or self.waiting
            if not queue or len(self.running) >= cfg.max_num_seqs:
                break
            request = queue[0]
            if request.status is RequestStatus.WAITING_FOR_REMOTE_KVS:
                if request.request_id not in self.finished_recving_kv_req_ids:
                    skip(queue)   # its load is still in flight
                    continue
                self._update_waiting_for_remote_kv(request)
                request.status = (RequestStatus.PREEMPTED if request.num_preemptions
                                  else RequestStatus.WAITING)
            if request.num_stale_output_tokens and not request.drop_stale_output:
                # Async: its preempted step's output is still in flight; resuming now could
                # resample a position that output later delivers.
                skip(queue)
                continue
            looked_up = request.num_computed_tokens == 0
            hits, num_local, num_external, load_async = mgr.empty_kv_cache_blocks, 0, 0, False
            conn_queries = 0
            if looked_up:
                hits, num_local, request.shared_prefix_boundary = mgr.get_computed_blocks(request)
                if conn is not None:
                    # the local hit is block-aligned already (hash block size = block size)
                    ext, load_async = conn.get_num_new_matched_tokens(request, num_local)
                    if request.skip_reading_prefix_cache:
                        ext, load_async = 0, False
                    if ext is None:
                        skip(queue)   # a chunk it needs is still being stored or loaded
                        continue
                    num_external = ext
                    conn_queries = request.num_tokens - num_local
                # vLLM's connector ignores the num_tokens - 1 cap: a full hit loads every block
                num_computed = num_local + num_external
            else:
                num_computed = request.num_computed_tokens
            if load_async:
                num_new = 0   # nothing is computed until the load is reported
            else:
                num_new = request.num_tokens - num_computed
                if 0 < threshold < num_new:
                    num_new = threshold
                if not cfg.enable_chunked_prefill and num_new > budget:
                    break
                num_new = min(num_new, budget)
            reserved = self._inflight_prefill_reserved_blocks() if load_async else 0
            new_blocks = mgr.allocate_slots(request, num_new, num_local, hits, num_external,
                                            delay_cache_blocks=load_async,
                                            full_sequence_must_fit=True,
                                            reserved_blocks=reserved,
                                            has_scheduled_reqs=bool(self.running))
            if new_blocks is None:
                break  # head-of-line blocking: it stays first in line
            rid = request.request_id
            preempted_before = request.num_preemptions > 0
            if conn is not None:
                conn.update_state_after_alloc(request, mgr.get_block_ids(rid)[0], num_external)
                if conn_queries:
                    sources = (conn.get_external_cache_hit_sources(request, num_external)
                               if num_external and not preempted_before else None)
                    for stats in (self.connector_prefix_cache_stats, self._connector_interval):
                        stats.record(conn_queries, num_external, preempted_before,
                                     hits_by_source=sources)
            if looked_up:
                mgr.record_prefix_cache_stats(request, num_local)
            table = mgr.req_to_blocks[rid]
            n_local_blocks = len(hits[0])
            n_ext_blocks = -(-num_computed // mgr.block_size) - n_local_blocks if num_external else 0
            item = ScheduledRequest(
                request, num_computed, num_new, admitted=True,
                resumed=request.status is RequestStatus.PREEMPTED,
                local_hit_tokens=num_local, external_hit_tokens=num_external,
                hit_block_ids=tuple(b.block_id for b in hits[0]),
                external_block_ids=tuple(b.block_id for b in
                                         table[n_local_blocks:n_local_blocks + n_ext_blocks]),
                new_block_ids=tuple(b.block_id for g in new_blocks for b in g),
                table_block_ids=tuple(b.block_id for b in table), looked_up=looked_up)
            self._op(Admit(rid, num_local, num_external, num_new))
            if load_async:
                # vLLM: allocated, not cached, parked until the worker reports the load
                request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                request.num_computed_tokens = num_computed
                self._inflight_prefills[rid] = request
                out.loading.append(item)
                skip(queue)
                continue
            queue.pop(0)
            self.deferred_waiting.discard(rid)
            self.running.append(request)
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_computed
            if num_computed + num_new < request.num_tokens:
                self._inflight_prefills[rid] = request
            out.scheduled.append(item)
            budget -= num_new
        self._prepend_all(self.kv_holding_waiting, skipped_holding)
        self._prepend_all(self.waiting, skipped)

    @staticmethod
    def _holds_kv_blocks(request: Request) -> bool:
        return (request.num_computed_tokens > 0
                or request.status is RequestStatus.WAITING_FOR_REMOTE_KVS)

    def _inflight_prefill_reserved_blocks(self) -> int:
        """Blocks the requests still prefilling need to hold their whole sequence (an async
        load is admitted only if it fits beside them)."""
        mgr = self.kv_cache_manager
        total = 0
        for r in self._inflight_prefills.values():
            full = min(r.num_tokens, self.config.max_model_len)
            held = len(mgr.req_to_blocks.get(r.request_id, ()))
            total += max(0, -(-full // mgr.block_size) - held)
        return total

    def _update_waiting_for_remote_kv(self, request: Request) -> None:
        """The load is done: cache the loaded blocks now; a whole-prompt hit recomputes its last
        token (vLLM clamps ``num_computed_tokens`` to ``num_tokens - 1`` here)."""
        if self.kv_cache_manager.enable_caching:
            self.kv_cache_manager.cache_blocks(request, request.num_computed_tokens)
        if request.num_computed_tokens == request.num_tokens:
            request.num_computed_tokens = request.num_tokens - 1
        self.finished_recving_kv_req_ids.discard(request.request_id)

    def _update_after_schedule(self, out: SchedulerOutput) -> None:
        for item in out.scheduled:
            request = item.request
            request.num_computed_tokens += item.num_new_tokens
            request.num_in_flight_tokens += item.num_new_tokens
            request.is_prefill_chunk = request.num_computed_tokens < (
                request.num_tokens + request.num_output_placeholders)
            item.samples = not request.is_prefill_chunk
            if item.samples:
                self._inflight_prefills.pop(request.request_id, None)
            if self.config.async_scheduling and item.samples:
                request.num_output_placeholders += 1

    def update_from_output(self, out: SchedulerOutput, sampled: dict[str, int],
                           kv_connector_output: dict | None = None) -> list[str]:
        """Apply each scheduled request's sampled token (``sampled`` holds one for every item
        that ``samples``); finish those at ``max_tokens`` or ``max_model_len``; then the KV
        transfers the worker reports done (``kv_connector_output``)."""
        mgr = self.kv_cache_manager
        finished: list[str] = []
        preempted_events = 0
        for item in out.scheduled:
            request = item.request
            request.num_in_flight_tokens -= item.num_new_tokens
            stale = request.num_stale_output_tokens > 0
            if stale:
                request.num_stale_output_tokens -= item.num_new_tokens
            if request.is_finished() or (stale and request.drop_stale_output):
                continue  # aborted while its step was in flight
            if not item.samples:
                continue  # a partial prefill chunk samples nothing
            status_before = request.status
            had_placeholders = request.num_output_placeholders > 0
            token = sampled[request.request_id]
            request.append_output_token_ids(token)
            self._op(Sample(request.request_id, token))
            # its output leaves with the PREEMPTED events it holds (vLLM: request.take_events())
            preempted_events += request.num_pending_preempted
            request.num_pending_preempted = 0
            stopped = (request.num_tokens >= self.config.max_model_len
                       or request.num_output_tokens >= self.max_tokens_of(request))
            if not stale and had_placeholders:
                request.num_output_placeholders -= 1
                if status_before is RequestStatus.RUNNING:
                    mgr.cache_blocks(request,
                                     request.num_computed_tokens - request.num_in_flight_tokens)
            if stopped:
                if status_before is RequestStatus.RUNNING:
                    self.running.remove(request)
                else:
                    self.waiting.remove(request)
                    self.deferred_waiting.discard(request.request_id)
                request.status = RequestStatus.FINISHED
                request.finish_reason = FINISH_LENGTH
                self._free_request(request)
                finished.append(request.request_id)
                self._op(Finish(request.request_id, FINISH_LENGTH))
        if kv_connector_output:
            self._update_from_kv_xfer_finished(kv_connector_output)
        self.last_stats = self.make_stats(preempted_events)
        return finished

    def make_stats(self, num_preempted_reqs: int = 0) -> SchedulerStats:
        """vLLM's ``make_stats`` at the end of ``update_from_output``: the queues, the usage now,
        and the interval's prefix-cache stats (taken: the next interval starts empty)."""
        connector = None
        if self.connector is not None:
            connector, self._connector_interval = self._connector_interval, PrefixCacheStats()
        deferred = len(self.deferred_waiting)
        return SchedulerStats(
            num_running_reqs=len(self.running),
            num_waiting_reqs=len(self.waiting) + len(self.kv_holding_waiting) - deferred,
            num_skipped_waiting_reqs=deferred, kv_cache_usage=self.kv_cache_manager.usage,
            prefix_cache_stats=self.kv_cache_manager.make_prefix_cache_stats(),
            connector_prefix_cache_stats=connector, num_preempted_reqs=num_preempted_reqs)

    def _update_from_kv_xfer_finished(self, output: dict) -> None:
        """vLLM ``_update_from_kv_xfer_finished``: the connector learns which jobs completed;
        a request whose async load is done is scheduled from the next step on."""
        if self.connector is not None:
            self.connector.update_connector_output(output)
        for rid in output.get("finished_recving", ()):
            request = self.requests[rid]
            if request.status is RequestStatus.WAITING_FOR_REMOTE_KVS:
                self.finished_recving_kv_req_ids.add(rid)
            elif rid in self._free_after_recv:
                self._free_after_recv.discard(rid)
                self.kv_cache_manager.free(request)
