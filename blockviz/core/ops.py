"""Op records: what the pool, manager, scheduler, engine and connector did, one typed record per
kind of operation (in the spirit of vLLM's frozen KV-event records), defined here and only here.

Every record is an immutable ``NamedTuple`` with a class-level ``kind`` (its name in the JSON
contract's frames) and ``fn`` (the vLLM 0.33 function it happens in). Readers use field names and
dispatch on ``kind`` (or ``isinstance``); nothing outside this module reads a field by position
(``tests/meta/test_op_fields.py`` keeps it so).

Conventions: ``request_id`` names the request an op is about; ``block_ids`` (several blocks) or
``block_id`` (one) the blocks it concerns; hashes are the pool's keys (``BlockPool.key``: vLLM's
``BlockHash`` bytes, with the 4-byte group id appended when the pool serves several KV-cache
groups); ``group`` is the KV-cache group an op is about (hybrid models; 0 with one group).
Fields in ``OPTIONAL_FIELDS`` (the hybrid ones, the watermark's) are written to the JSON only when
they differ from their default, so a one-group run's frames are what they always were.

Besides its fields, each record declares the two things the timeline needs to remember and replay
it, so that adding a kind of op touches this file and nothing else of the recording:

* ``effect``: what the op does to the observable state (the pool's ref counts, free queue, hashes,
  hash table and block tokens; the requests' status, block tables and token counts), as the verb of
  that state it performs and the fields it passes, in order (``blockviz.sim.mirror`` implements
  the verbs). ``None``: it changes nothing observers see (a lookup's decision, a check, a copy).
* ``packed``: how a field packs into the timeline's int log (``blockviz.sim.oplog``) where its
  type does not say. By type: ``int`` one int, ``bool`` 0 or 1, ``tuple[int, ...]`` its length
  then its items, ``bytes`` an index into the log's hash list, and a ``request_id`` the request's
  identity. The derived forms store nothing but a length and read the value back from the
  request: ``Tokens``, ``Hashes``, ``ParentHash``; ``Choice`` packs one of a few strings. A record
  with a field no rule covers (a float, a free string), or whose derived field does not hold, is
  kept as it is.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from blockviz.core.hashing import split_block_key


class OpSink(Protocol):
    """Whoever watches the core. The pool, the manager, the scheduler and the connector hand each
    op record to their sink as it happens (``sink.on_op(op)``), the way vLLM's block pool reports
    to its ``metrics_collector``; a sink of None records nothing and costs nothing."""

    def on_op(self, op: Any) -> None: ...


class OpList(list):
    """The plain sink: the records, in order."""

    on_op = list.append


class Tokens(NamedTuple):
    """Packed form: the request's token ids from field ``start`` on (their count is packed). An
    effect receives them as three arguments: (token source, start, count)."""
    start: str


class Hashes(NamedTuple):
    """Packed form: the request's block hashes from field ``start`` on, one per item of field
    ``like``."""
    start: str
    like: str


class ParentHash(NamedTuple):
    """Packed form: the request's block hash just before field ``start`` (None at 0)."""
    start: str


class Choice(NamedTuple):
    """Packed form: one of ``values``."""
    values: tuple[str, ...]


# -- the block pool (vllm/v1/core/block_pool.py) --------------------------------------------------
class Popleft(NamedTuple):
    """``get_new_blocks`` took these blocks from the head of the free queue (ref_cnt = 1), for
    the table of KV-cache group ``group``."""
    block_ids: tuple[int, ...]
    group: int = 0
    kind = "popleft"
    fn = "BlockPool.get_new_blocks"
    effect = ("take", "block_ids", "group")


class Evict(NamedTuple):
    """A reused block's old hash left the hash table (lazy eviction); ``group``: the group it
    was cached under."""
    block_id: int
    block_hash: bytes
    group: int = 0
    kind = "evict"
    fn = "BlockPool._maybe_evict_cached_block"
    effect = ("evict", "block_id", "block_hash")


class Touch(NamedTuple):
    """A prefix-cache hit: ref_cnt + 1 on each block; the free ones left the queue."""
    block_ids: tuple[int, ...]
    removed_from_queue: tuple[int, ...]
    group: int = 0
    kind = "touch"
    fn = "BlockPool.touch"
    effect = ("touch", "block_ids", "removed_from_queue", "group")


class Cache(NamedTuple):
    """``cache_full_blocks`` gave these blocks the request's hashes, from block index
    ``first_block_index`` on (``parent_hash``: the hash before them, None at the start), in
    group ``group``'s table; with a mask (a sliding window's), only the blocks it kept: the full
    blocks it left uncached are ``masked``."""
    request_id: str
    block_ids: tuple[int, ...]
    hashes: tuple[bytes, ...]
    first_block_index: int
    parent_hash: bytes | None
    group: int = 0
    masked: tuple[int, ...] = ()
    kind = "cache"
    fn = "BlockPool.cache_full_blocks"
    effect = ("cache", "request_id", "block_ids", "hashes")
    packed = {"hashes": Hashes("first_block_index", like="block_ids"),
              "parent_hash": ParentHash("first_block_index")}


class Free(NamedTuple):
    """``free_blocks``: ref_cnt - 1 on each block, in this order (of group ``group``'s table)."""
    block_ids: tuple[int, ...]
    group: int = 0
    kind = "free"
    fn = "BlockPool.free_blocks"
    effect = ("free", "block_ids", "group")


class FreeHead(NamedTuple):
    """Blocks that reached ref_cnt 0 with no hash went to the head (split order)."""
    block_ids: tuple[int, ...]
    group: int = 0
    kind = "free_head"
    fn = "BlockPool.free_blocks"
    effect = ("to_head", "block_ids")


class FreeTail(NamedTuple):
    """Blocks that reached ref_cnt 0 went to the tail (with a hash; every one in append order)."""
    block_ids: tuple[int, ...]
    group: int = 0
    kind = "free_tail"
    fn = "BlockPool.free_blocks"
    effect = ("to_tail", "block_ids")


class Reset(NamedTuple):
    """``reset_prefix_cache``: ``ok`` False when a request still held a block (nothing changed)."""
    ok: bool
    kind = "reset"
    fn = "BlockPool.reset_prefix_cache"
    effect = ("reset", "ok")


# -- the KV cache manager (vllm/v1/core/kv_cache_manager.py) --------------------------------------
class Lookup(NamedTuple):
    """``get_computed_blocks``: the hit blocks, the hit limit in tokens, the hashes the request has.
    Hybrid models: ``block_ids`` are every group's hit blocks (null blocks left out),
    ``num_hit_tokens`` the hit reconciled across the groups, ``shared_prefix_boundary`` vLLM's
    (0: none)."""
    request_id: str
    block_ids: tuple[int, ...]
    hit_tokens_limit: int
    num_block_hashes: int
    num_hit_tokens: int = 0
    shared_prefix_boundary: int = 0
    kind = "lookup"
    fn = "KVCacheManager.get_computed_blocks"
    effect = ("lookup", "request_id")


class AllocFailed(NamedTuple):
    """``allocate_slots`` returned None: it needed more free blocks than there were
    (``full_sequence``: the admission gate, sized for the whole sequence, not just this chunk;
    ``watermark_blocks``: the admission watermark's blocks that had to stay free as well)."""
    request_id: str
    blocks_needed: int
    blocks_free: int
    full_sequence: bool = False
    watermark_blocks: int = 0
    kind = "alloc_failed"
    fn = "KVCacheManager.allocate_slots"
    effect = None


class RemoveSkipped(NamedTuple):
    """``remove_skipped_blocks``: these blocks of group ``group``'s table left the attention
    window (a sliding window, a past chunk): slots ``block_indices`` now hold the null block, and
    the blocks are freed next, highest index first. With no ``block_ids``: a hit's new table
    starts with these slots padded with the null block (its skipped part)."""
    request_id: str
    block_ids: tuple[int, ...]
    block_indices: tuple[int, ...]
    group: int = 0
    kind = "remove_skipped"
    fn = "SingleTypeKVCacheManager.remove_skipped_blocks"
    # (the pool's part is the free that follows; the request's, a slot of its table now null)
    effect = ("remove_skipped", "request_id", "block_indices", "group")


# -- the scheduler (vllm/v1/core/sched/scheduler.py) ----------------------------------------------
class Arrive(NamedTuple):
    request_id: str
    kind = "arrive"
    fn = "Scheduler.add_request"
    effect = ("arrive", "request_id")


class Admit(NamedTuple):
    """A waiting request was scheduled: its hits and the tokens it computes now."""
    request_id: str
    local_hit_tokens: int
    external_hit_tokens: int
    num_new_tokens: int
    kind = "admit"
    fn = "Scheduler.schedule"
    effect = ("admit", "request_id", "local_hit_tokens", "external_hit_tokens", "num_new_tokens")


class Schedule(NamedTuple):
    """A running request was scheduled for ``num_new_tokens`` tokens: a decode token, or (not
    ``decode``) the next chunk of its prefill."""
    request_id: str
    num_new_tokens: int
    decode: bool = True
    kind = "schedule"
    fn = "Scheduler.schedule"
    effect = ("schedule", "request_id", "num_new_tokens")


class Preempt(NamedTuple):
    request_id: str
    kind = "preempt"
    fn = "Scheduler._preempt_request"
    effect = ("preempt", "request_id")


class Sample(NamedTuple):
    request_id: str
    token_id: int
    kind = "sample"
    fn = "Scheduler.update_from_output"
    effect = ("sample", "request_id")


class Finish(NamedTuple):
    """The request finished: ``reason`` is vLLM's finish reason ("stop": a stop token or stop
    string, a scenario's ``finish``; "abort": the client's abort, a scenario's ``abort``;
    "length": max_tokens or max_model_len reached)."""
    request_id: str
    reason: str = "abort"
    kind = "finish"
    fn = "Scheduler.finish_requests"
    effect = ("finish", "request_id", "reason")
    packed = {"reason": Choice(("abort", "length", "stop"))}


# -- the worker and the engine ---------------------------------------------------------------------
class Write(NamedTuple):
    """The forward pass wrote K/V of ``token_ids`` into the block from slot ``offset`` on; the
    first of them is the request's token at ``position``."""
    request_id: str
    block_id: int
    offset: int
    token_ids: tuple[int, ...]
    position: int = 0
    group: int = 0
    kind = "write"
    fn = "GPUModelRunner.execute_model"
    effect = ("write", "block_id", "offset", "token_ids")
    packed = {"token_ids": Tokens("position")}


class Verify(NamedTuple):
    """(blockviz) a cache hit's attention output against recomputing the whole prompt."""
    request_id: str
    hit_tokens: int
    new_tokens: int
    max_abs_diff: float
    device: str
    kind = "verify"
    fn = "(blockviz) cache hit vs recomputation"
    effect = None


class Rewind(NamedTuple):
    checkpoint: str
    kind = "rewind"
    fn = "(blockviz) rewind"
    effect = ("replace",)        # the whole state is the checkpoint's


class Restart(NamedTuple):
    generation: int
    none_hash: bytes
    kind = "restart"
    fn = "(blockviz) a new engine process"
    effect = ("replace",)        # a fresh pool, every request gone


# -- the external tier (KV connector) --------------------------------------------------------------
class Load(NamedTuple):
    """A load job copied the block's K/V (``token_ids``) from the CPU tier."""
    request_id: str
    block_id: int
    token_ids: tuple[int, ...]
    kind = "load"
    fn = "OffloadingConnectorScheduler.update_state_after_alloc"
    effect = ("load", "block_id", "token_ids")


class Save(NamedTuple):
    """The connector issued a store of the block (a full prompt block) to the CPU tier."""
    request_id: str
    block_id: int
    block_hash: bytes
    kind = "save"
    fn = "OffloadingConnectorScheduler.build_connector_meta"
    effect = None


class Drop(NamedTuple):
    """The CPU tier evicted the chunk to make room for a store."""
    block_hash: bytes
    kind = "drop"
    fn = "CPUOffloadingManager.prepare_store"
    effect = None


RECORDS: tuple[type, ...] = (
    Arrive, Lookup, AllocFailed, Touch, Popleft, Evict, Cache, Admit, Schedule, Preempt, Free,
    FreeHead, FreeTail, Reset, Write, Load, Save, Sample, Finish, Rewind, Restart, Drop, Verify,
    RemoveSkipped)

# JSON names of fields whose record name differs (the JSON contract's names are fixed)
_JSON_NAME = {"block_hash": "hash"}
# fields of hybrid models (several KV-cache groups): written only when not their default
HYBRID_FIELDS = frozenset({"group", "num_hit_tokens", "shared_prefix_boundary", "masked"})
# fields holding the pool's keys: the JSON writes the bare hash (its group is the op's ``group``)
_HASH_FIELDS = frozenset({"block_hash", "hashes", "parent_hash"})
# fields written only when not their default: the hybrid ones, and the admission watermark's
OPTIONAL_FIELDS = HYBRID_FIELDS | {"watermark_blocks"}


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


def _jsonable(v: Any, bare: bool = False) -> Any:
    """A field's value as JSON (bytes as hex); ``bare``: a hash field's, with the pool keys'
    group ids dropped (``split_block_key``)."""
    if isinstance(v, bytes):
        return (split_block_key(v)[0] if bare else v).hex()
    if isinstance(v, tuple):
        return [_jsonable(x, bare) for x in v]
    return v


def op_to_dict(op: Any) -> dict:
    """The op as JSON: ``op``, ``fn`` (the vLLM function), ``block_ids``, ``request`` and the
    record's other fields (bytes as hex). A hash is written as the bare ``BlockHash`` hex, as in
    the snapshot's ``blocks[].hash``; with several KV-cache groups the op's ``group`` says which
    group's key it was (absent: group 0)."""
    d: dict = {"op": op.kind, "fn": op.fn, "block_ids": op_block_ids(op)}
    rid = op_request(op)
    if rid is not None:
        d["request"] = rid
    defaults = op._field_defaults
    for name, value in zip(op._fields, op, strict=True):
        if name not in _COMMON and (name not in OPTIONAL_FIELDS or value != defaults[name]):
            d[_JSON_NAME.get(name, name)] = _jsonable(value, name in _HASH_FIELDS)
    return d
