"""Op records: what the pool, manager, scheduler, engine and connector did, one typed record per
kind of operation (in the spirit of vLLM's frozen KV-event records), defined here and only here.

Every record is an immutable ``NamedTuple`` with a class-level ``kind`` (its name in the JSON
contract's frames) and ``fn`` (the vLLM 0.33 function it happens in). Readers use field names and
dispatch on ``kind`` (or ``isinstance``); nothing outside this module reads a field by position
(``tests/meta/test_op_fields.py`` keeps it so).

Conventions: ``request_id`` names the request an op is about; ``block_ids`` (several blocks) or
``block_id`` (one) the blocks it concerns; hashes are vLLM's ``BlockHash`` bytes.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Protocol


class OpSink(Protocol):
    """Whoever watches the core. The pool, the manager, the scheduler and the connector hand each
    op record to their sink as it happens (``sink.on_op(op)``), the way vLLM's block pool reports
    to its ``metrics_collector``; a sink of None records nothing and costs nothing."""

    def on_op(self, op: Any) -> None: ...


class OpList(list):
    """The plain sink: the records, in order."""

    on_op = list.append


# -- the block pool (vllm/v1/core/block_pool.py) --------------------------------------------------
class Popleft(NamedTuple):
    """``get_new_blocks`` took these blocks from the head of the free queue (ref_cnt = 1)."""
    block_ids: tuple[int, ...]
    kind = "popleft"
    fn = "BlockPool.get_new_blocks"


class Evict(NamedTuple):
    """A reused block's old hash left the hash table (lazy eviction)."""
    block_id: int
    block_hash: bytes
    kind = "evict"
    fn = "BlockPool._maybe_evict_cached_block"


class Touch(NamedTuple):
    """A prefix-cache hit: ref_cnt + 1 on each block; the free ones left the queue."""
    block_ids: tuple[int, ...]
    removed_from_queue: tuple[int, ...]
    kind = "touch"
    fn = "BlockPool.touch"


class Cache(NamedTuple):
    """``cache_full_blocks`` gave these blocks the request's hashes, from block index
    ``first_block_index`` on (``parent_hash``: the hash before them, None at the start)."""
    request_id: str
    block_ids: tuple[int, ...]
    hashes: tuple[bytes, ...]
    first_block_index: int
    parent_hash: bytes | None
    kind = "cache"
    fn = "BlockPool.cache_full_blocks"


class Free(NamedTuple):
    """``free_blocks``: ref_cnt - 1 on each block, in this order."""
    block_ids: tuple[int, ...]
    kind = "free"
    fn = "BlockPool.free_blocks"


class FreeHead(NamedTuple):
    """Blocks that reached ref_cnt 0 with no hash went to the head (split order)."""
    block_ids: tuple[int, ...]
    kind = "free_head"
    fn = "BlockPool.free_blocks"


class FreeTail(NamedTuple):
    """Blocks that reached ref_cnt 0 went to the tail (with a hash; every one in append order)."""
    block_ids: tuple[int, ...]
    kind = "free_tail"
    fn = "BlockPool.free_blocks"


class Reset(NamedTuple):
    """``reset_prefix_cache``: ``ok`` False when a request still held a block (nothing changed)."""
    ok: bool
    kind = "reset"
    fn = "BlockPool.reset_prefix_cache"


# -- the KV cache manager (vllm/v1/core/kv_cache_manager.py) --------------------------------------
class Lookup(NamedTuple):
    """``get_computed_blocks``: the hit blocks, the hit limit in tokens, the hashes the request has."""
    request_id: str
    block_ids: tuple[int, ...]
    hit_tokens_limit: int
    num_block_hashes: int
    kind = "lookup"
    fn = "KVCacheManager.get_computed_blocks"


class AllocFailed(NamedTuple):
    """``allocate_slots`` returned None: it needed more free blocks than there were
    (``full_sequence``: the admission gate, sized for the whole sequence, not just this chunk)."""
    request_id: str
    blocks_needed: int
    blocks_free: int
    full_sequence: bool = False
    kind = "alloc_failed"
    fn = "KVCacheManager.allocate_slots"


# -- the scheduler (vllm/v1/core/sched/scheduler.py) ----------------------------------------------
class Arrive(NamedTuple):
    request_id: str
    kind = "arrive"
    fn = "Scheduler.add_request"


class Admit(NamedTuple):
    """A waiting request was scheduled: its hits and the tokens it computes now."""
    request_id: str
    local_hit_tokens: int
    external_hit_tokens: int
    num_new_tokens: int
    kind = "admit"
    fn = "Scheduler.schedule"


class Schedule(NamedTuple):
    """A running request was scheduled for ``num_new_tokens`` tokens: a decode token, or (not
    ``decode``) the next chunk of its prefill."""
    request_id: str
    num_new_tokens: int
    decode: bool = True
    kind = "schedule"
    fn = "Scheduler.schedule"


class Preempt(NamedTuple):
    request_id: str
    kind = "preempt"
    fn = "Scheduler._preempt_request"


class Sample(NamedTuple):
    request_id: str
    token_id: int
    kind = "sample"
    fn = "Scheduler.update_from_output"


class Finish(NamedTuple):
    """The request finished: ``reason`` is vLLM's finish reason ("abort": the client's abort, a
    scenario's ``finish``; "length": max_tokens or max_model_len reached)."""
    request_id: str
    reason: str = "abort"
    kind = "finish"
    fn = "Scheduler.finish_requests"


# -- the worker and the engine ---------------------------------------------------------------------
class Write(NamedTuple):
    """The forward pass wrote K/V of ``token_ids`` into the block from slot ``offset`` on; the
    first of them is the request's token at ``position``."""
    request_id: str
    block_id: int
    offset: int
    token_ids: tuple[int, ...]
    position: int = 0
    kind = "write"
    fn = "GPUModelRunner.execute_model"


class Verify(NamedTuple):
    """(blockviz) a cache hit's attention output against recomputing the whole prompt."""
    request_id: str
    hit_tokens: int
    new_tokens: int
    max_abs_diff: float
    device: str
    kind = "verify"
    fn = "(blockviz) cache hit vs recomputation"


class Rewind(NamedTuple):
    checkpoint: str
    kind = "rewind"
    fn = "(blockviz) rewind"


class Restart(NamedTuple):
    generation: int
    none_hash: bytes
    kind = "restart"
    fn = "(blockviz) a new engine process"


# -- the external tier (KV connector) --------------------------------------------------------------
class Load(NamedTuple):
    """A load job copied the block's K/V (``token_ids``) from the CPU tier."""
    request_id: str
    block_id: int
    token_ids: tuple[int, ...]
    kind = "load"
    fn = "OffloadingConnectorScheduler.update_state_after_alloc"


class Save(NamedTuple):
    """The connector issued a store of the block (a full prompt block) to the CPU tier."""
    request_id: str
    block_id: int
    block_hash: bytes
    kind = "save"
    fn = "OffloadingConnectorScheduler.build_connector_meta"


class Drop(NamedTuple):
    """The CPU tier evicted the chunk to make room for a store."""
    block_hash: bytes
    kind = "drop"
    fn = "CPUOffloadingManager.prepare_store"


RECORDS: tuple[type, ...] = (
    Arrive, Lookup, AllocFailed, Touch, Popleft, Evict, Cache, Admit, Schedule, Preempt, Free,
    FreeHead, FreeTail, Reset, Write, Load, Save, Sample, Finish, Rewind, Restart, Drop, Verify)
BY_KIND: dict[str, type] = {r.kind: r for r in RECORDS}

# op kind -> the vLLM 0.33 function it happens in
OP_FUNCTION: dict[str, str] = {r.kind: r.fn for r in RECORDS}

# ops that change the pool (the rest describe decisions)
POOL_OPS = frozenset({"popleft", "evict", "touch", "cache", "free", "free_head", "free_tail",
                      "reset"})

# JSON names of fields whose record name differs (the JSON contract's names are fixed)
_JSON_NAME = {"block_hash": "hash"}
_COMMON = ("request_id", "block_ids", "block_id")


def op_request(op: Any) -> str | None:
    """The request an op is about, or None."""
    return getattr(op, "request_id", None)


def op_block_ids(op: Any) -> list[int]:
    """The blocks an op concerns (for a lookup: its hits; for a touch: every touched block)."""
    ids = getattr(op, "block_ids", None)
    if ids is not None:
        return list(ids)
    bid = getattr(op, "block_id", None)
    return [] if bid is None else [bid]


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return v


def op_to_dict(op: Any) -> dict:
    """The op as JSON: ``op``, ``fn`` (the vLLM function), ``block_ids``, ``request`` and the
    record's other fields (bytes as hex)."""
    d: dict = {"op": op.kind, "fn": op.fn, "block_ids": op_block_ids(op)}
    rid = op_request(op)
    if rid is not None:
        d["request"] = rid
    for name, value in zip(op._fields, op, strict=True):
        if name not in _COMMON:
            d[_JSON_NAME.get(name, name)] = _jsonable(value)
    return d
