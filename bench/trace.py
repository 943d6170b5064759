"""A BlockPool-level call trace, recorded from a real run and replayed on any pool.

:func:`record_trace` runs a scenario through blockviz's engine (KVCacheManager and scheduler on
top of our BlockPool) and logs every call the manager makes into the pool, with block ids instead
of block objects: ``get_new_blocks(n)``, ``touch``, ``cache_full_blocks``, ``free_blocks`` (in the
order given), ``get_cached_block(hash)``, ``reset_prefix_cache`` and the engine's per-step
``take_events``. Replaying it gives every pool implementation the same logical work, each through
its own API (:class:`OursPool`, :class:`VllmPool`). :func:`replay_checked` replays it once with every
result compared to the recorded one, so a timing is never of a replay that went another way.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from blockviz.core import BlockPool
from blockviz.core.ops import OpList
from blockviz.scenario import Scenario
from blockviz.sim.engine import Engine

GROUP_ID = 0  # the one full-attention KV cache group


@dataclass
class Trace:
    num_gpu_blocks: int
    block_size: int
    calls: list[tuple]
    requests: dict[str, Any]        # request id -> blockviz Request, final (tokens are append-only)
    final: dict                     # the pool's state at the end of the recorded run
    kv_events: Counter = field(default_factory=Counter)

    def counts(self) -> dict[str, int]:
        return dict(Counter(c[0] for c in self.calls))


def pool_state(free_ids, ref_cnts, table: dict[bytes, list[int]]) -> dict:
    return {"free_queue": list(free_ids), "ref_cnt": list(ref_cnts),
            "hash_table": {h.hex(): list(ids) for h, ids in table.items()}}


def record_trace(scenario: Scenario) -> Trace:
    """Run ``scenario`` (payloads and op recording off) and log the manager's calls into the pool."""
    engine = Engine(scenario, record_ops=False, payloads=False, explain=False)
    pool = engine.pool
    calls: list[tuple] = []
    events: Counter = Counter()
    log = calls.append
    get_new_blocks, touch, cache_full_blocks = (pool.get_new_blocks, pool.touch,
                                                pool.cache_full_blocks)
    free_blocks, get_cached_block = pool.free_blocks, pool.get_cached_block
    take_events, reset_prefix_cache = pool.take_events, pool.reset_prefix_cache

    # (keyword arguments: the op record's group, for a one-group scenario always 0)
    def t_get_new_blocks(n, **kw):
        blocks = get_new_blocks(n, **kw)
        log(("get_new_blocks", n, tuple(b.block_id for b in blocks)))
        return blocks

    def t_touch(blocks, **kw):
        log(("touch", tuple(b.block_id for b in blocks)))
        return touch(blocks, **kw)

    def t_cache_full_blocks(request, blocks, num_cached, num_full, block_size, *group_and_mask):
        # Both implementations read blocks[num_cached:num_full] only (one group: no mask).
        log(("cache_full_blocks", request.request_id, tuple(b.block_id for b in blocks[:num_full]),
             num_cached, num_full, block_size))
        return cache_full_blocks(request, blocks, num_cached, num_full, block_size,
                                 *group_and_mask)

    def t_free_blocks(ordered_blocks, **kw):
        ordered = list(ordered_blocks)
        log(("free_blocks", tuple(b.block_id for b in ordered)))
        return free_blocks(ordered, **kw)

    def t_get_cached_block(block_hash):
        block = get_cached_block(block_hash)
        log(("get_cached_block", block_hash, None if block is None else block.block_id))
        return block

    def t_take_events():
        log(("take_events",))
        taken = take_events()
        events.update(type(e).__name__ for e in taken)
        return taken

    def t_reset_prefix_cache():
        ok = reset_prefix_cache()
        log(("reset_prefix_cache", ok))
        return ok

    # Instance attributes shadow the methods: the manager and engine now call these.
    pool.get_new_blocks, pool.touch = t_get_new_blocks, t_touch
    pool.cache_full_blocks, pool.free_blocks = t_cache_full_blocks, t_free_blocks
    pool.get_cached_block, pool.take_events = t_get_cached_block, t_take_events
    pool.reset_prefix_cache = t_reset_prefix_cache
    for step in scenario.steps:
        engine.apply(step)
    final = pool_state((b.block_id for b in pool.free_block_queue.get_all_free_blocks()),
                       (b.ref_cnt for b in pool.blocks), dict(pool.cached_block_hash_to_block.items()))
    return Trace(engine.num_gpu_blocks, engine.block_size, calls, dict(engine.scheduler.requests),
                 final, events)


# -- the implementations --------------------------------------------------------------------
class OursPool:
    """blockviz.core.BlockPool, op recording off or on."""

    def __init__(self, recording: bool) -> None:
        self.recording = recording
        self.name = f"blockviz (recording {'on' if recording else 'off'})"

    def new(self, trace: Trace, events: bool) -> BlockPool:
        return BlockPool(trace.num_gpu_blocks, True, enable_kv_cache_events=events,
                         sink=OpList() if self.recording else None)

    def calls(self, trace: Trace, pool: BlockPool) -> list[tuple]:
        return resolve_calls(trace, pool, trace.requests)

    def lookup_result(self, block) -> int | None:
        return None if block is None else block.block_id

    def state(self, pool: BlockPool) -> dict:
        return pool_state((b.block_id for b in pool.free_block_queue.get_all_free_blocks()),
                          (b.ref_cnt for b in pool.blocks),
                          dict(pool.cached_block_hash_to_block.items()))


def resolve_calls(trace: Trace, pool, reqs, cache_extra: tuple = (),
                  lookup_extra: tuple = ()) -> list[tuple]:
    """The trace as (bound method, args) on ``pool``, block ids resolved to its blocks; vLLM's
    pool takes its KV cache group as ``cache_extra`` and ``lookup_extra``."""
    blocks = pool.blocks
    out = []
    for c in trace.calls:
        kind = c[0]
        if kind == "get_new_blocks":
            out.append((pool.get_new_blocks, (c[1],)))
        elif kind == "touch":
            out.append((pool.touch, ([blocks[i] for i in c[1]],)))
        elif kind == "cache_full_blocks":
            out.append((pool.cache_full_blocks, (reqs[c[1]], [blocks[i] for i in c[2]],
                                                 c[3], c[4], c[5], *cache_extra)))
        elif kind == "free_blocks":
            out.append((pool.free_blocks, ([blocks[i] for i in c[1]],)))
        elif kind == "get_cached_block":
            out.append((pool.get_cached_block, (c[1], *lookup_extra)))
        elif kind in ("take_events", "reset_prefix_cache"):
            out.append((getattr(pool, kind), ()))
        else:
            raise ValueError(f"unknown call in the trace: {kind!r}")
    return out


class VllmRequest:
    """What vLLM 0.33's BlockPool reads from a request (a plain request: no LoRA, multimodal
    input, salt or prompt embeddings)."""
    __slots__ = ("request_id", "block_hashes", "all_token_ids", "lora_request", "mm_features",
                 "cache_salt", "prompt_embeds", "session_id", "_prompt_embeds_per_block_hashes")

    def __init__(self, request) -> None:
        self.request_id = request.request_id
        self.block_hashes = request.block_hashes     # vLLM's BlockHash: the same bytes
        self.all_token_ids = request.all_token_ids
        self.lora_request = None
        self.mm_features: list = []
        self.cache_salt = None
        self.prompt_embeds = None
        self.session_id = None
        self._prompt_embeds_per_block_hashes: dict = {}


class VllmPool:
    """vLLM 0.33's BlockPool (bench.vllm_shim), one KV cache group."""
    name = "vLLM 0.33"

    def __init__(self, vllm) -> None:
        self.vllm = vllm
        self._group_ids = [GROUP_ID]

    def new(self, trace: Trace, events: bool):
        return self.vllm.block_pool.BlockPool(trace.num_gpu_blocks, True, trace.block_size,
                                              enable_kv_cache_events=events)

    def calls(self, trace: Trace, pool) -> list[tuple]:
        # (built before the clock starts, like the block lists)
        reqs = {rid: VllmRequest(r) for rid, r in trace.requests.items()}
        return resolve_calls(trace, pool, reqs, cache_extra=(GROUP_ID,),
                             lookup_extra=(self._group_ids,))

    def lookup_result(self, blocks) -> int | None:
        return None if blocks is None else blocks[0].block_id

    def state(self, pool) -> dict:
        kcu = self.vllm.kv_cache_utils
        table = {}
        for key, found in pool.cached_block_hash_to_block._cache.items():
            ids = [found.block_id] if isinstance(found, kcu.KVCacheBlock) else list(found)
            table[kcu.get_block_hash(key)] = ids
        return pool_state((b.block_id for b in pool.free_block_queue.get_all_free_blocks()),
                          (b.ref_cnt for b in pool.blocks), table)


class ReplayMismatch(AssertionError):
    pass


def replay_checked(impl, trace: Trace, events: bool) -> Counter:
    """Replay once, comparing every result and the final state with the recorded run; the KV
    events emitted, by type."""
    pool = impl.new(trace, events)
    emitted: Counter = Counter()
    for (fn, args), c in zip(impl.calls(trace, pool), trace.calls, strict=True):
        result = fn(*args)
        kind = c[0]
        if kind == "get_new_blocks":
            got = tuple(b.block_id for b in result)
        elif kind == "get_cached_block":
            got = impl.lookup_result(result)
        elif kind == "reset_prefix_cache":
            got = result
        else:
            if kind == "take_events":
                emitted.update(type(e).__name__ for e in result)
            continue
        want = c[2] if kind != "reset_prefix_cache" else c[1]
        if got != want:
            raise ReplayMismatch(f"{impl.name}: {kind}{c[1:2]} gave {got}, the recorded run {want}")
    if impl.state(pool) != trace.final:
        raise ReplayMismatch(f"{impl.name}: the final pool state differs from the recorded run")
    if events and emitted != trace.kv_events:
        raise ReplayMismatch(f"{impl.name}: KV events {dict(emitted)} != recorded "
                             f"{dict(trace.kv_events)}")
    return emitted
