"""The engine: runs a scenario's events against the core block manager, the paged KV tensors and
the optional external tier, one event at a time (scenario-format.md, "Events").

Every event that schedules work is one or more vLLM engine steps: schedule (core.Scheduler) ->
execute (the tiny model writes K/V for every scheduled token into its slots) -> update (each
scheduled request gets its sampled token; ``max_tokens`` finishes it).

The engine is the only writer of engine state. Observers (timeline, renderers) read it through
:meth:`Engine.capture`, through the op records of each step (``StepResult.ops``), or as they
happen, through an op sink (:meth:`Engine.watch`).
"""
from __future__ import annotations

import copy
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from blockviz.core import (
    BlockHasher,
    KVCacheManager,
    LoRA,
    MMItem,
    Request,
    RequestStatus,
    Scheduler,
    SchedulerError,
    SchedulerOutput,
)
from blockviz.core.kv_cache_interface import FullAttentionSpec, specs_from_groups
from blockviz.core.ops import Load, OpList, OpSink, Restart, Rewind, Write
from blockviz.core.request import FINISH_ABORT, FINISH_STOP
from blockviz.core.scheduler import SchedulerConfig
from blockviz.scenario.schema import ArriveSpec, Scenario
from blockviz.scenario.schema import Step as Event
from blockviz.scenario.tokens import RANDOM_IDS, Vocabulary, resolve_prompt
from blockviz.sim.budget import Budget, Meter
from blockviz.sim.explain import Explainer
from blockviz.sim.metrics import VllmStatLogger
from blockviz.sim.step import BlockTables, EngineStepView, RequestView, ScheduledView, Stats, Step, TierView


class EngineError(Exception):
    """An event that the reached state does not allow (the run stops at this step)."""


@dataclass(slots=True)
class RequestInfo:
    """What the engine knows of a request beyond vLLM's Request: its script, the tokens it may
    sample, and its last hits. (Slotted: a run keeps one per request it ever saw.)"""
    scripted_output: list[int] | None
    candidates: tuple[int, ...]
    local_hit_blocks: int = 0
    external_hit_blocks: int = 0
    # Tokens the worker sampled whose output the scheduler has not applied yet (async
    # scheduling: one step's worth); the next forward pass already reads them.
    pending: list[int] = field(default_factory=list)


@dataclass
class EngineState:
    """Everything a checkpoint saves (and a rewind restores), tensors included."""
    manager: KVCacheManager
    scheduler: Scheduler
    hasher: BlockHasher
    block_tokens: list[list[int]]
    info: dict[str, RequestInfo]
    kv: Any = None
    connector: Any = None
    generation: int = 0
    # async scheduling: (scheduler output, sampled tokens) of steps executed but not yet
    # applied, newest first (vLLM's EngineCore batch queue, two deep)
    batch_queue: list = field(default_factory=list)
    # a checkpoint only: the KV payloads (kv.store.StoreSnapshot, copy-on-write; ``kv`` is then
    # the live runtime) and an estimate of the bytes the rest of the copy holds
    payload: Any = None
    state_bytes: int = 0
    # why each lookup missed (sim.explain), or None when the engine explains nothing
    explain: Explainer | None = None
    # vLLM's stat loggers over this engine process (sim.metrics)
    metrics: VllmStatLogger = field(default_factory=VllmStatLogger)


@dataclass
class StepResult:
    ops: list = field(default_factory=list)
    events: list = field(default_factory=list)   # KV cache events (core.events), in order
    reset_ok: bool | None = None
    # block id -> PayloadSummary of blocks whose K/V this step changed (all blocks after a
    # rewind or restart); empty without payloads
    payloads: dict = field(default_factory=dict)
    engine_steps: list[EngineStepView] = field(default_factory=list)
    teaching_only: bool = False
    # with a connector: per engine step, its jobs, the worker's report and the tier's KV events
    tier_steps: list = field(default_factory=list)
    # per update_from_output call, in order: how many of ``events`` had been raised by then. vLLM
    # takes the queued events there and publishes them as one batch (``blockviz publish``)
    update_marks: list[int] = field(default_factory=list)

    @property
    def kv_events(self) -> list[dict]:
        return [e if isinstance(e, dict) else e.to_dict() for e in self.events]


class _Sinks:
    """Several op sinks as one: each op goes to each of them, in order."""

    __slots__ = ("calls",)

    def __init__(self, sinks: list[OpSink]) -> None:
        self.calls = [s.on_op for s in sinks]

    def on_op(self, op) -> None:
        for call in self.calls:
            call(op)


class Engine:
    def __init__(self, scenario: Scenario, *, record_ops: bool = True,
                 payloads: bool = True, device: str | None = None,
                 meter: Meter | None = None, explain: bool = True) -> None:
        self.scenario = scenario
        self.config = cfg = scenario.config
        self.num_gpu_blocks = cfg.num_blocks + 1
        self.block_size = cfg.block_size
        self.vocab = Vocabulary.for_scenario(scenario)
        # the records of the step running (its StepResult's ops), and whoever else watches them
        self.ops: OpList | None = OpList() if record_ops else None
        self.watchers: list[OpSink] = []
        self.sink: OpSink | None = None      # (_attach_sink)
        self.num_events = 0          # events applied (a rewind does not take them back)
        self.num_engine_steps = 0
        # LoRA name -> vLLM's lora_int_id (the adapter id KV events publish): 1, 2, ... in the
        # order the scenario first names each adapter, as vLLM's server numbers them on load
        self.lora_ids: dict[str, int] = {}
        for s in scenario.steps:
            if s.kind == "arrive" and s.args.lora is not None:
                self.lora_ids.setdefault(s.args.lora.name, len(self.lora_ids) + 1)
        self.checkpoints: dict[str, EngineState] = {}
        self._written: set[int] = set()  # blocks whose K/V the current step wrote
        self._tables_seen: dict[str, BlockTables] = {}   # hybrid: each request's last tables
        self._engine_steps: list[EngineStepView] = []
        self._update_marks: list[int] = []
        self.scheduler_config = SchedulerConfig(**cfg.scheduler.model_dump())
        self.meter = meter or Meter(Budget())   # what it raises from here on stops the run
        self.meter.before_tensors(cfg, payloads)
        manager = self._new_manager()
        kv = None
        if payloads and cfg.model is not None:
            from blockviz.kv.runtime import KVRuntime  # torch is imported only when payloads are on
            kv = KVRuntime(self.num_gpu_blocks, cfg.block_size, **cfg.model.model_dump(),
                           device=device or cfg.device, seed=cfg.seed,
                           attention=self._layer_attention())
        connector = None
        if cfg.connector is not None:
            from blockviz.sim.offload.scheduler import OffloadingConnector
            c = cfg.connector
            connector = OffloadingConnector(
                c.num_blocks, cfg.block_size, eviction_policy=c.eviction_policy,
                load_delay=c.load_delay, store_delay=c.store_delay,
                sync_load_budget_tokens=c.sync_load_budget_tokens,
                enable_caching=cfg.enable_caching, kv=kv)
        self.state = EngineState(
            manager=manager, scheduler=Scheduler(manager, connector, self.scheduler_config),
            hasher=self._new_hasher(0), block_tokens=[[] for _ in range(self.num_gpu_blocks)],
            info={}, kv=kv, connector=connector)
        if explain:
            self.state.explain = self._new_explainer()
        self._attach_sink()
        self.meter.attach(self)

    def _new_manager(self) -> KVCacheManager:
        cfg = self.config
        sc = self.scheduler_config
        return KVCacheManager(
            self.num_gpu_blocks, cfg.block_size, enable_caching=cfg.enable_caching,
            free_order=cfg.free_order, sink=self.sink, max_model_len=sc.max_model_len,
            kv_cache_groups=self.kv_cache_specs,
            prefix_cache_retention_interval=(cfg.prefix_cache_retention_interval
                                             if self.kv_cache_specs else 0),
            # vLLM's VllmConfig.max_in_flight_tokens: a batch per concurrent step
            max_in_flight_tokens=(2 if sc.async_scheduling else 1) * sc.max_num_batched_tokens,
            watermark=sc.watermark)

    def _new_explainer(self) -> Explainer:
        """The explainer for this config: which KV-cache groups are the first attention group
        (the one vLLM looks up first, full attention whenever there is one), and how many blocks
        each later group's run needs (a sliding window: cdiv(W - 1, block_size))."""
        coord = self.manager.coordinator
        groups = getattr(coord, "attention_groups", None)
        bs = self.block_size
        if not groups:
            first, others, full = (0,), (), True
        else:
            first = tuple(groups[0].group_ids)
            full = isinstance(groups[0].spec, FullAttentionSpec)
            others = tuple((tuple(g.group_ids), max(1, -(-(getattr(g.spec, "sliding_window", 0)
                                                             - 1) // bs)))
                           for g in groups[1:])
        return Explainer(self.scheduler, bs, first, others, index_tokens=full,
                         none_hash=self.state.hasher.none_hash)

    @property
    def kv_cache_specs(self):
        """The KV-cache groups' specs (hybrid models), or None: one full-attention group."""
        groups = self.config.kv_cache_groups
        return None if groups is None else specs_from_groups(self.block_size, groups)

    def _layer_attention(self) -> tuple | None:
        """Per layer of the tiny model, what it attends to: with kv_cache_groups layer i is
        group i's ((kind, W or C)); None: full attention in every layer."""
        specs = self.kv_cache_specs
        if specs is None:
            return None
        return tuple((s.kind, getattr(s, "sliding_window", None)
                      or getattr(s, "attention_chunk_size", None)) for s in specs)

    def _new_hasher(self, generation: int) -> BlockHasher:
        # The xxhash variants draw NONE_HASH's seed at random per process (vLLM: os.urandom);
        # here per engine generation, from the scenario seed, so a replay is identical.
        cfg = self.config
        return BlockHasher(cfg.hash_algo, cfg.hash_seed,
                           rng=random.Random(f"{cfg.seed}/none-hash/{generation}"))

    # -- accessors ------------------------------------------------------------------------
    @property
    def manager(self) -> KVCacheManager:
        return self.state.manager

    @property
    def pool(self):
        return self.state.manager.block_pool

    @property
    def scheduler(self) -> Scheduler:
        return self.state.scheduler

    @property
    def kv(self):
        return self.state.kv

    @property
    def connector(self):
        return self.state.connector

    def _op(self, op) -> None:
        if self.sink is not None:
            self.sink.on_op(op)

    def watch(self, sink: OpSink) -> None:
        """Report every op record to ``sink`` too, as it happens (after the step's own list)."""
        self.watchers.append(sink)
        self._attach_sink()

    def _attach_sink(self) -> None:
        """The engine's op sink: the step's records (``ops``, if it keeps them), the explainer of
        the state running (if it explains misses; a rewind brings back another), then each
        watcher (``watch``); one of them alone is the sink itself (every op of a run passes
        here). The current pool and connector report to it (a rewind or a restart replaces
        them)."""
        sinks = [s for s in (self.ops, self.state.explain) if s is not None] + self.watchers
        self.sink = _Sinks(sinks) if len(sinks) > 1 else sinks[0] if sinks else None
        self.pool.sink = self.sink
        if self.connector is not None:
            self.connector.sink = self.sink

    # -- events ---------------------------------------------------------------------------
    def apply(self, step: Event) -> StepResult:
        """Run one scenario step. Raises EngineError if the state does not allow it."""
        if self.ops is not None:
            self.ops.clear()   # the step's ops go to its result; the engine keeps none of them
        result = StepResult()
        kind, args = step.kind, step.args
        self._written.clear()
        self._engine_steps = []
        self._update_marks = []
        self.manager.prefix_cache_stats.reset = False
        self.meter.tick()
        self.num_events += 1
        if self.state.explain is not None:
            self.state.explain.event = self.num_events
        try:
            if kind == "arrive":
                self._arrive(args)
            elif kind == "admit":
                self.engine_step()
            elif kind == "decode":
                only = set(args.requests) if args.requests else None
                for _ in range(args.steps):
                    self.engine_step(only)
            elif kind == "step":
                for _ in range(args):
                    self.engine_step()
            elif kind == "finish":
                for rid in args:   # a stop; one that has produced nothing can only be aborted
                    req = self.scheduler.requests.get(rid)
                    self.scheduler.finish_request(
                        rid, FINISH_STOP if req is not None and req.num_output_tokens
                        else FINISH_ABORT)
            elif kind == "abort":
                for rid in args:
                    self.scheduler.finish_request(rid, FINISH_ABORT)
            elif kind == "preempt":
                self.scheduler.preempt_request(args)
            elif kind == "reset_prefix_cache":
                result.reset_ok = (self.scheduler.reset_prefix_cache() if args is True else
                                   self.scheduler.reset_prefix_cache(args.reset_running_requests,
                                                                     args.reset_connector))
            elif kind == "checkpoint":
                self._checkpoint(args)
            elif kind == "rewind":
                if args not in self.checkpoints:
                    raise EngineError(f"unknown checkpoint {args!r}")
                saved = self.checkpoints[args]
                self.state = self._copy_state(saved)
                if self.state.explain is not None:     # the clock goes on
                    self.state.explain.event = self.num_events
                    self.state.explain.engine_step = self.num_engine_steps
                if self.kv is not None:
                    self._written.update(self.kv.store.restore(saved.payload))
                self._attach_sink()
                self.pool.take_events()  # a rewind emits no KV events
                self._op(Rewind(args))
            elif kind == "restart":
                self._restart()
        except SchedulerError as e:
            raise EngineError(str(e)) from None
        if self.ops is not None:
            result.ops = list(self.ops)
        result.engine_steps = self._engine_steps
        result.update_marks = self._update_marks
        result.teaching_only = step.teaching_only
        result.events = list(self.pool.take_events())
        if self.connector is not None:
            result.tier_steps = self.connector.take_step_log()
        if self.kv is not None and self._written:
            # the blocks whose K/V this step changed (after a rewind or restart: those whose
            # payload differs from before it; every other block's last copy still holds)
            self.meter.payload_copies(len(self._written), self.kv.store)
            result.payloads = {b: self.kv.summary(b) for b in sorted(self._written)}
        return result

    def _checkpoint(self, name: str) -> None:
        """Save the state; the payloads copy-on-write (a block unchanged since an earlier
        checkpoint shares its copy). The meter is told of the new block copies and the rest of
        the state's copy; one it refuses leaves the checkpoints as they were."""
        state = self.state
        old = self.checkpoints.pop(name, None)   # replaced: the meter no longer counts it
        try:
            state_bytes, need = self.meter.checkpoint(state)
            payload = None if self.kv is None else self.kv.store.snapshot(need)
        except Exception:
            if old is not None:
                self.checkpoints[name] = old
            raise
        saved = self._copy_state(state)
        saved.payload, saved.state_bytes = payload, state_bytes
        self.checkpoints[name] = saved

    def _restart(self) -> None:
        """A new engine process with the same config: a fresh pool (the GPU cache starts empty)
        and NONE_HASH derived anew — the same for sha256 or a configured seed, a new random one
        for xxhash without a seed. The external tier is another process and keeps its blocks."""
        busy = [r.request_id for r in self.scheduler.requests.values()
                if r.status is not RequestStatus.FINISHED]
        if busy:
            raise EngineError(f"restart needs every request finished; still live: "
                              f"{', '.join(busy)}")
        if self.connector is not None:
            # vLLM's engine keeps stepping while the connector has transfers in flight
            # (has_pending_push_work): the old process drains them before it goes
            for _ in range(10_000):
                if not self.connector.has_pending_push_work():
                    break
                self.engine_step()
        old = self.manager
        state = self.state
        state.generation += 1
        manager = self._new_manager()
        manager.prefix_cache_stats = old.prefix_cache_stats
        manager.block_pool.num_evictions = old.block_pool.num_evictions
        state.manager = manager
        state.scheduler.kv_cache_manager = manager
        state.metrics = VllmStatLogger()      # a new process: every counter and window at zero
        state.hasher = self._new_hasher(state.generation)
        state.block_tokens = [[] for _ in range(self.num_gpu_blocks)]
        if state.kv is not None:
            self._written.update(state.kv.store.zero_())
        self._op(Restart(state.generation, state.hasher.none_hash))

    def _arrive(self, spec: ArriveSpec) -> None:
        sched = self.scheduler
        if spec.id in sched.requests:
            raise EngineError(f"request {spec.id!r} has already arrived")

        def tokens_of(rid: str) -> list[int]:
            if rid not in sched.requests:
                raise EngineError(f"same_as: request {rid!r} has not arrived")
            return sched.requests[rid].all_token_ids

        try:
            prompt = resolve_prompt(spec.prompt, request_id=spec.id, seed=self.config.seed,
                                    vocab=self.vocab, tokens_of=tokens_of)
        except ValueError as e:
            raise EngineError(str(e)) from None
        self.meter.tick()
        mm = [MMItem(m.id, m.offset, m.length) for m in spec.mm or ()]
        for m in mm:
            if m.offset + m.length > len(prompt):
                raise EngineError(f"multimodal item {m.identifier!r} ends at token "
                                  f"{m.offset + m.length}, past the prompt's {len(prompt)} tokens")
        hashing = self.config.enable_caching or self.connector is not None
        request = Request(spec.id, prompt, hasher=self.state.hasher if hashing else None,
                          block_size=self.block_size,
                          lora=LoRA(spec.lora.name, spec.lora.path,
                                    self.lora_ids[spec.lora.name]) if spec.lora else None,
                          cache_salt=spec.cache_salt, mm_items=mm, max_tokens=spec.max_tokens,
                          priority=spec.priority or 0,
                          arrival_time=float(len(sched.requests) + 1),
                          prompt_logprobs=spec.prompt_logprobs,
                          skip_reading_prefix_cache=spec.skip_reading_prefix_cache)
        # What the model may sample: a request with words samples among its own prompt's words
        # (their ids), so that what it generates never depends on the rest of the file; one
        # without, the id range random prompt parts draw from (one tuple, shared by every such
        # request: not 999 ints per request).
        words = sorted(self.vocab.id_to_word.keys() & set(prompt))
        self.state.info[spec.id] = RequestInfo(list(spec.output) if spec.output else None,
                                               tuple(words) if words else RANDOM_IDS)
        sched.add_request(request)
        if spec.admit:
            self.engine_step()

    # -- one engine step: schedule -> execute -> update -----------------------------------
    def engine_step(self, only: set[str] | None = None) -> None:
        """One vLLM engine step (``EngineCore.step``; with async scheduling,
        ``step_with_batch_queue``: step n+1 is scheduled before step n's output is applied).
        ``only`` (teaching-only): schedule just these running requests, admit nothing."""
        sched = self.scheduler
        queue = self.state.batch_queue      # (without async scheduling: empty between steps)
        if not sched.has_requests() and not queue:
            return
        if sched.has_requests():
            out = self._schedule(only)
            queue.insert(0, (out, self._execute(out)))
            if (self.scheduler_config.async_scheduling and len(queue) < 2
                    and (out.total_num_scheduled_tokens > 0 or sched.has_requests())):
                self._record_step(out, None)
                return
        else:
            out = None
        done, sampled = queue.pop()
        self._record_step(out, self._update(done, sampled))

    def _schedule(self, only: set[str] | None) -> SchedulerOutput:
        self.num_engine_steps += 1
        if self.state.explain is not None:
            self.state.explain.engine_step = self.num_engine_steps
        out = self.scheduler.schedule(only)
        self.meter.engine_step(out.total_num_scheduled_tokens)
        for item in (*out.scheduled, *out.loading):
            if item.admitted and item.looked_up:   # (not the schedule after an async load)
                info = self.state.info[item.request.request_id]
                info.local_hit_blocks = len(item.hit_block_ids)
                info.external_hit_blocks = len(item.external_block_ids)
        return out

    def _update(self, out: SchedulerOutput, sampled: dict[str, int]):
        """Apply a step's output; the worker's pending tokens are delivered (or dropped, for a
        request aborted meanwhile). Returns (finished, applied tokens)."""
        info = self.state.info
        before = {rid: self.scheduler.requests[rid].num_output_tokens for rid in sampled}
        finished = self.scheduler.update_from_output(out, sampled, out.kv_connector_output)
        self.state.metrics.record(self.scheduler.last_stats, self.num_engine_steps)
        self._update_marks.append(len(self.pool.kv_event_queue))
        if out.kv_connector_metadata is not None:
            # vLLM publishes the connector's events at the end of update_from_output
            self.connector.log_step(out.kv_connector_metadata, out.kv_connector_output)
        applied = []
        for rid, token in sampled.items():
            pending = info[rid].pending
            if pending:
                pending.pop(0)
            if self.scheduler.requests[rid].num_output_tokens > before[rid]:
                applied.append((rid, token))
        return finished, applied

    def _record_step(self, out: SchedulerOutput | None, update) -> None:
        finished, applied = update if update is not None else ((), ())
        scheduled = () if out is None else tuple(
            ScheduledView(request_id=s.request.request_id, num_tokens=s.num_new_tokens,
                          decode=s.decode, admitted=s.admitted, resumed=s.resumed,
                          local_hit_tokens=s.local_hit_tokens,
                          external_hit_tokens=s.external_hit_tokens, samples=s.samples)
            for s in out.scheduled)
        self._engine_steps.append(EngineStepView(
            scheduled=scheduled, preempted=tuple(out.preempted) if out else (),
            finished=tuple(finished), sampled=tuple(applied),
            token_budget=self.scheduler_config.max_num_batched_tokens,
            teaching_only=bool(out and out.teaching_only)))

    def known_tokens(self, req: Request) -> list[int]:
        """The tokens the worker knows: the request's, then those sampled but not yet applied."""
        pending = self.state.info[req.request_id].pending
        return req.all_token_ids + pending if pending else req.all_token_ids

    def _execute(self, out: SchedulerOutput) -> dict[str, int]:
        """The forward pass: load external hits, write K/V of every scheduled token into its slot
        (block_table[pos // block_size], pos % block_size), and sample one token for every
        request whose prefill is complete (a partial chunk samples none)."""
        groups = [m.req_to_blocks for m in self.manager.single_type_managers]
        bs = self.block_size
        tokens = {s.request.request_id: self.known_tokens(s.request) for s in out.scheduled}
        meta = out.kv_connector_metadata
        if meta is not None:
            # the worker's start_load_kv: loads land in their fresh GPU blocks before the pass;
            # stores of finished requests read theirs now (a flushed block is about to be reused)
            worker = self.connector.worker
            worker.start_load_kv(meta)
            for job in meta.load_jobs.values():
                for key, bid in zip(job.keys, job.gpu_block_ids, strict=True):
                    toks = self.connector.tokens.get(key, ())
                    self.state.block_tokens[bid][:] = list(toks)
                    self._written.add(bid)
                    self._op(Load(job.req_id, bid, tuple(toks)))
            worker.save_kv(meta, True, out.finished_req_ids)
        for item in out.scheduled:
            req = item.request
            known = tokens[req.request_id]
            for group, tables in enumerate(groups):   # every group's layers write their K/V
                table = tables[req.request_id]
                pos, end = item.start, item.start + item.num_new_tokens
                while pos < end:
                    block = table[pos // bs]
                    offset = pos % bs
                    upto = min(end, (pos // bs + 1) * bs)
                    toks = known[pos:upto]
                    held = self.state.block_tokens[block.block_id]
                    del held[offset:]
                    held.extend(toks)
                    self._written.add(block.block_id)
                    self._op(Write(req.request_id, block.block_id, offset, tuple(toks), pos,
                                   group))
                    pos = upto
        model_tokens: dict[str, int] = {}
        info = self.state.info
        if self.kv is not None and out.scheduled:
            model_tokens, checks = self.kv.execute(
                out.scheduled, groups,
                {s.request.request_id: info[s.request.request_id].candidates for s in out.scheduled},
                tokens)
            for verify in checks:
                self._op(verify)
        if meta is not None:
            # the worker's wait_for_save: this step's prompt blocks go to the CPU tier; then its
            # report of the jobs done
            worker.save_kv(meta, False, out.finished_req_ids)
            out.kv_connector_output = worker.get_finished(meta)
        sampled: dict[str, int] = {}
        for item in out.scheduled:
            if not item.samples:
                continue
            req = item.request
            rid = req.request_id
            script = info[rid].scripted_output
            k = len(tokens[rid]) - req.num_prompt_tokens   # the output position it samples
            if script is not None and k < len(script):
                sampled[rid] = script[k]
            elif rid in model_tokens:
                sampled[rid] = model_tokens[rid]
            else:           # without payloads (model: null): drawn from a seeded stream
                rng = random.Random(f"{self.config.seed}/sample/{rid}/{len(tokens[rid])}")
                sampled[rid] = rng.choice(info[rid].candidates)
            info[rid].pending.append(sampled[rid])
        return sampled

    # -- checkpoints ----------------------------------------------------------------------
    def _copy_state(self, state: EngineState) -> EngineState:
        """A copy of the state, less the payloads: there is one KV runtime (the live one; a
        checkpoint's payloads are its ``payload`` snapshot, which a copy does not take). The
        engine's sink stays out of it (the engine attaches its own to the state it runs), unless
        it is the state's explainer alone."""
        memo: dict = {} if self.sink is state.explain else {id(self.sink): None}
        if state.kv is not None:
            memo[id(state.kv)] = state.kv
        if state.payload is not None:
            memo[id(state.payload)] = None
        # The pool first, so that every block reference elsewhere maps to its copy.
        copy.deepcopy(state.manager.block_pool, memo)
        return copy.deepcopy(state, memo)

    # -- observation ----------------------------------------------------------------------
    def capture(self, rids: Iterable[str] | None = None, *, pool: bool = False) -> Step:
        """What observers show of the engine now, in one call: views of the requests ``rids``
        (None: every request, in arrival order), the queues, the stats, the tier, and with
        ``pool`` the pool (its block token lists are the engine's own: copy what you keep)."""
        sched = self.scheduler
        reqs = sched.requests
        tables = self.manager.req_to_blocks
        info = self.state.info
        hybrid = self.config.kv_cache_groups is not None
        explain = self.state.explain
        prompt_splits = explain.prompt_split if explain is not None else {}
        resumed_splits = explain.resumed_split if explain is not None else {}
        views = {}
        for rid in (reqs if rids is None else rids):
            r: Request = reqs[rid]
            blocks = tables.get(rid) if not hybrid else self._block_tables(r)
            i = info[rid]
            views[rid] = RequestView(
                request_id=rid, status=r.status.value, num_prompt_tokens=r.num_prompt_tokens,
                num_tokens=r.num_tokens, num_computed_tokens=r.num_computed_tokens,
                num_preemptions=r.num_preemptions, local_hit_blocks=i.local_hit_blocks,
                external_hit_blocks=i.external_hit_blocks, max_tokens=r.max_tokens,
                lora=r.lora.name if r.lora else None, cache_salt=r.cache_salt,
                finish_reason=r.finish_reason, num_output_placeholders=r.num_output_placeholders,
                priority=r.priority, skip_reading_prefix_cache=r.skip_reading_prefix_cache,
                prompt_split=prompt_splits.get(rid), resumed_split=resumed_splits.get(rid),
                all_token_ids=r.all_token_ids, table=blocks,
                num_blocks=((len(blocks) if not hybrid else len(blocks.tables[0]))
                            if blocks is not None else 0), block_hashes=r.block_hashes)
        c = self.connector
        external = tier = None
        if c is not None:
            contents = c.contents()
            external = tuple((h, c.tokens.get(h, ())) for h, *_ in contents)
            tier = TierView(
                contents=tuple(contents), capacity=c.capacity,
                jobs_in_flight=tuple((j.job_id, "store" if j.is_store else "load", j.req_id)
                                     for j in sorted(c.jobs.values(), key=lambda j: j.job_id)),
                waiting_for_remote_kvs=tuple(
                    r.request_id for r in sched.all_waiting
                    if r.status is RequestStatus.WAITING_FOR_REMOTE_KVS))
        p = self.pool
        return Step(
            index=-1, requests=views, waiting=tuple(r.request_id for r in sched.all_waiting),
            running=tuple(r.request_id for r in sched.running), stats=self._stats(),
            none_hash=self.state.hasher.none_hash, external=external, tier=tier,
            vllm_metrics=self.state.metrics.metrics(),
            **({} if not pool else dict(
                ref_cnt=tuple(map(attrgetter("ref_cnt"), p.blocks)),
                block_hash=tuple(map(attrgetter("block_hash"), p.blocks)),
                free_queue=tuple(b.block_id for b in p.free_block_queue),
                hash_table=tuple((h, tuple(ids))
                                 for h, ids in p.cached_block_hash_to_block.items()),
                block_tokens=self.state.block_tokens)))

    def _block_tables(self, r: Request) -> BlockTables:
        """A hybrid model's tables of ``r`` now (the last copy again when nothing changed)."""
        managers = self.manager.single_type_managers
        rid = r.request_id
        bt = BlockTables(
            tuple(tuple(b.block_id for b in m.req_to_blocks.get(rid) or ()) for m in managers),
            tuple(m.num_cached_block.get(rid, 0) for m in managers), r.shared_prefix_boundary)
        last = self._tables_seen.get(rid)
        if last == bt:
            return last
        self._tables_seen[rid] = bt
        return bt

    def _stats(self) -> Stats:
        pool = self.pool
        s = self.manager.prefix_cache_stats
        c = self.scheduler.connector_prefix_cache_stats
        return Stats(
            num_free_blocks=pool.get_num_free_blocks(), usage=round(pool.get_usage(), 6),
            prefix_cache_queries=s.total_queries, prefix_cache_hits=s.total_hits,
            external_queries=c.total_queries, external_hits=c.total_hits,
            preemptions=self.scheduler.num_preemptions, evictions=pool.num_evictions,
            num_cached_blocks=len(pool.cached_block_hash_to_block), requests=s.requests,
            queries=s.queries, hits=s.hits, preempted_requests=s.preempted_requests,
            preempted_queries=s.preempted_queries, preempted_hits=s.preempted_hits, reset=s.reset,
            external_requests=c.requests, external_preempted_requests=c.preempted_requests,
            external_preempted_queries=c.preempted_queries,
            external_preempted_hits=c.preempted_hits,
            external_hits_host=c.hits_by_source.get("host", 0))
