"""The engine: runs a scenario's events against the core block manager, the paged KV tensors and
the optional external tier, one event at a time (scenario-format.md, "Events").

Every event that schedules work is one or more vLLM engine steps: schedule (core.Scheduler) ->
execute (the tiny model writes K/V for every scheduled token into its slots) -> update (each
scheduled request gets its sampled token; ``max_tokens`` finishes it).

The engine is the only writer of engine state. Observers (timeline, renderers) read it through
:meth:`Engine.capture` or through the op records it appends to ``engine.ops``.
"""
from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
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
from blockviz.core.ops import Load, Restart, Rewind, Verify, Write
from blockviz.scenario.schema import ArriveSpec, Scenario, Step
from blockviz.scenario.tokens import RANDOM_TOKEN_RANGE, Vocabulary, resolve_prompt


class EngineError(Exception):
    """An event that the reached state does not allow (the run stops at this step)."""


@dataclass
class RequestInfo:
    """What the engine knows of a request beyond vLLM's Request: its script, the tokens it may
    sample, and its last hits."""
    scripted_output: list[int] | None
    candidates: tuple[int, ...]
    local_hit_blocks: int = 0
    external_hit_blocks: int = 0


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


@dataclass
class StepResult:
    ops: list = field(default_factory=list)
    kv_events: list[dict] = field(default_factory=list)
    reset_ok: bool | None = None
    # block id -> PayloadSummary of blocks whose K/V this step changed (all blocks after a
    # rewind or restart); empty without payloads or payload history
    payloads: dict = field(default_factory=dict)


class Engine:
    def __init__(self, scenario: Scenario, *, record_ops: bool = True,
                 payloads: bool = True, device: str | None = None,
                 payload_history: bool = True) -> None:
        self.scenario = scenario
        self.config = cfg = scenario.config
        self.num_gpu_blocks = cfg.num_blocks + 1
        self.block_size = cfg.block_size
        self.vocab = Vocabulary.for_scenario(scenario)
        # What the model may sample when a request's prompt has no words: the id range random
        # prompt parts draw from. A request with words samples among its own prompt's words, so
        # that what it generates never depends on the rest of the file.
        # (one tuple, shared by every such request: not 999 ints per request)
        self.candidates = tuple(range(*RANDOM_TOKEN_RANGE))
        self.ops: list | None = [] if record_ops else None
        self.checkpoints: dict[str, EngineState] = {}
        self.payload_history = payload_history
        self._written: set[int] = set()  # blocks whose K/V the current step wrote
        manager = KVCacheManager(self.num_gpu_blocks, cfg.block_size,
                                 enable_caching=cfg.enable_caching, free_order=cfg.free_order,
                                 ops=self.ops)
        kv = None
        if payloads and cfg.model is not None:
            from blockviz.kv.runtime import KVRuntime  # torch is imported only when payloads are on
            kv = KVRuntime(self.num_gpu_blocks, cfg.block_size, **cfg.model.model_dump(),
                           device=device or cfg.device, seed=cfg.seed)
        connector = None
        if cfg.connector is not None:
            from blockviz.sim.connector import ExternalKVTier
            connector = ExternalKVTier(cfg.connector.num_blocks, cfg.block_size, kv)
            connector.ops = self.ops
        self.state = EngineState(
            manager=manager, scheduler=Scheduler(manager, connector),
            hasher=self._new_hasher(0), block_tokens=[[] for _ in range(self.num_gpu_blocks)],
            info={}, kv=kv, connector=connector)

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
        if self.ops is not None:
            self.ops.append(op)

    # -- events ---------------------------------------------------------------------------
    def apply(self, step: Step) -> StepResult:
        """Run one scenario step. Raises EngineError if the state does not allow it."""
        start = len(self.ops) if self.ops is not None else 0
        result = StepResult()
        kind, args = step.kind, step.args
        self._written.clear()
        try:
            if kind == "arrive":
                self._arrive(args)
            elif kind == "admit":
                self.engine_step(decode=None, admit=True)
            elif kind == "decode":
                for _ in range(args.steps):
                    ids = set(args.requests) if args.requests else self._running_ids()
                    self.engine_step(decode=ids, admit=False)
            elif kind == "step":
                for _ in range(args):
                    self.engine_step(decode=self._running_ids(), admit=True)
            elif kind == "finish":
                for rid in args:
                    self.scheduler.finish_request(rid)
            elif kind == "preempt":
                self.scheduler.preempt_request(args)
            elif kind == "reset_prefix_cache":
                result.reset_ok = self.manager.reset_prefix_cache()
            elif kind == "checkpoint":
                self.checkpoints[args] = self._copy_state(self.state)
            elif kind == "rewind":
                if args not in self.checkpoints:
                    raise EngineError(f"unknown checkpoint {args!r}")
                self.state = self._copy_state(self.checkpoints[args])
                self._attach_ops()
                self.pool.take_events()  # a rewind emits no KV events
                self._op(Rewind(args))
            elif kind == "restart":
                self._restart()
        except SchedulerError as e:
            raise EngineError(str(e)) from None
        if self.ops is not None:
            result.ops = self.ops[start:]
        result.kv_events = [e.to_dict() for e in self.pool.take_events()]
        if self.kv is not None and self.payload_history:
            changed = range(self.num_gpu_blocks) if kind in ("rewind", "restart") else self._written
            result.payloads = {b: self.kv.summary(b) for b in sorted(changed)}
        return result

    def _restart(self) -> None:
        """A new engine process with the same config: a fresh pool (the GPU cache starts empty)
        and NONE_HASH derived anew — the same for sha256 or a configured seed, a new random one
        for xxhash without a seed. The external tier is another process and keeps its blocks."""
        busy = [r.request_id for r in self.scheduler.requests.values()
                if r.status is not RequestStatus.FINISHED]
        if busy:
            raise EngineError(f"restart needs every request finished; still live: "
                              f"{', '.join(busy)}")
        old = self.manager
        st = self.state
        st.generation += 1
        cfg = self.config
        manager = KVCacheManager(self.num_gpu_blocks, cfg.block_size,
                                 enable_caching=cfg.enable_caching, free_order=cfg.free_order,
                                 ops=self.ops)
        manager.prefix_cache_stats = old.prefix_cache_stats
        manager.block_pool.num_evictions = old.block_pool.num_evictions
        st.manager = manager
        st.scheduler.kv_cache_manager = manager
        st.hasher = self._new_hasher(st.generation)
        st.block_tokens = [[] for _ in range(self.num_gpu_blocks)]
        if st.kv is not None:
            st.kv.store.zero_()
        self._op(Restart(st.generation, st.hasher.none_hash))

    def _attach_ops(self) -> None:
        self.pool.ops = self.ops
        if self.connector is not None:
            self.connector.ops = self.ops

    def _running_ids(self) -> set[str]:
        return {r.request_id for r in self.scheduler.running}

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
        mm = [MMItem(m.id, m.offset, m.length) for m in spec.mm or ()]
        for m in mm:
            if m.offset + m.length > len(prompt):
                raise EngineError(f"multimodal item {m.identifier!r} ends at token "
                                  f"{m.offset + m.length}, past the prompt's {len(prompt)} tokens")
        hashing = self.config.enable_caching or self.connector is not None
        request = Request(spec.id, prompt, hasher=self.state.hasher if hashing else None,
                          block_size=self.block_size,
                          lora=LoRA(spec.lora.name, spec.lora.path) if spec.lora else None,
                          cache_salt=spec.cache_salt, mm_items=mm, max_tokens=spec.max_tokens)
        words = sorted({t for t in prompt if self.vocab.word(t) is not None})
        self.state.info[spec.id] = RequestInfo(list(spec.output) if spec.output else None,
                                               tuple(words) if words else self.candidates)
        sched.add_request(request)
        if spec.admit:
            self.engine_step(decode=None, admit=True)

    # -- one engine step: schedule -> execute -> update -----------------------------------
    def engine_step(self, decode: set[str] | None, admit: bool) -> SchedulerOutput:
        out = self.scheduler.schedule(decode, admit)
        for item in out.scheduled:
            if item.is_prefill:
                info = self.state.info[item.request.request_id]
                info.local_hit_blocks = len(item.hit_block_ids)
                info.external_hit_blocks = len(item.external_block_ids)
        sampled = self._execute(out)
        self.scheduler.update_from_output(out, sampled)
        return out

    def _execute(self, out: SchedulerOutput) -> dict[str, int]:
        """The forward pass: load external hits, write K/V of every scheduled token into its slot
        (block_table[pos // block_size], pos % block_size), and sample one token per request."""
        tables = self.manager.req_to_blocks
        bs = self.block_size
        for item in out.scheduled:
            req = item.request
            table = tables[req.request_id]
            if item.external_block_ids:
                self.connector.load(req, item.external_block_ids, item.local_hit_tokens,
                                    self.state.block_tokens)
                for bid in item.external_block_ids:
                    self._written.add(bid)
                    self._op(Load(req.request_id, bid, tuple(self.state.block_tokens[bid])))
            pos, end = item.start, item.start + item.num_new_tokens
            while pos < end:
                block = table[pos // bs]
                offset = pos % bs
                upto = min(end, (pos // bs + 1) * bs)
                toks = req.all_token_ids[pos:upto]
                held = self.state.block_tokens[block.block_id]
                del held[offset:]
                held.extend(toks)
                self._written.add(block.block_id)
                self._op(Write(req.request_id, block.block_id, offset, tuple(toks)))
                pos = upto
        model_tokens: dict[str, int] = {}
        if self.kv is not None and out.scheduled:
            info = self.state.info
            model_tokens, checks = self.kv.execute(
                out.scheduled, tables,
                {s.request.request_id: info[s.request.request_id].candidates for s in out.scheduled})
            for c in checks:
                self._op(Verify(c.request_id, c.hit_tokens, c.new_tokens, c.max_abs_diff,
                                c.device))
        sampled: dict[str, int] = {}
        for item in out.scheduled:
            req = item.request
            script = self.state.info[req.request_id].scripted_output
            k = req.num_output_tokens
            if script is not None and k < len(script):
                sampled[req.request_id] = script[k]
            elif req.request_id in model_tokens:
                sampled[req.request_id] = model_tokens[req.request_id]
            else:
                sampled[req.request_id] = self._toy_sample(req)
        return sampled

    def _toy_sample(self, req: Request) -> int:
        """Without payloads (model: null) the next token is drawn from a seeded stream."""
        rng = random.Random(f"{self.config.seed}/sample/{req.request_id}/{req.num_tokens}")
        return rng.choice(self.state.info[req.request_id].candidates)

    # -- checkpoints ----------------------------------------------------------------------
    def _copy_state(self, state: EngineState) -> EngineState:
        pool = state.manager.block_pool
        ops, pool.ops = pool.ops, None
        if state.connector is not None:
            state.connector.ops = None
        try:
            # The pool first, so that every block reference elsewhere maps to its copy.
            memo: dict = {}
            copy.deepcopy(pool, memo)
            return copy.deepcopy(state, memo)
        finally:
            pool.ops = ops
            if state.connector is not None:
                state.connector.ops = ops

    # -- observation ----------------------------------------------------------------------
    def request_status(self, rid: str) -> RequestStatus:
        return self.scheduler.requests[rid].status
