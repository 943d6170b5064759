"""Op records as data: which vLLM function each op belongs to, and its JSON form.

The pool, manager, scheduler and engine append op tuples (see ``core/block_pool.py`` for the pool's
shapes); this module is the one place that knows their field layout.
"""
from __future__ import annotations

# op kind -> the vLLM 0.33 function it happens in
OP_FUNCTION = {
    "arrive": "Scheduler.add_request",
    "lookup": "KVCacheManager.get_computed_blocks",
    "alloc_failed": "KVCacheManager.allocate_slots",
    "touch": "BlockPool.touch",
    "popleft": "BlockPool.get_new_blocks",
    "evict": "BlockPool._maybe_evict_cached_block",
    "cache": "BlockPool.cache_full_blocks",
    "admit": "Scheduler.schedule",
    "schedule": "Scheduler.schedule",
    "preempt": "Scheduler._preempt_request",
    "free": "BlockPool.free_blocks",
    "free_head": "BlockPool.free_blocks",
    "free_tail": "BlockPool.free_blocks",
    "reset": "BlockPool.reset_prefix_cache",
    "write": "GPUModelRunner.execute_model",
    "load": "KVConnector.start_load_kv",
    "save": "KVConnector.request_finished",
    "sample": "Scheduler.update_from_output",
    "finish": "Scheduler.finish_requests",
    "rewind": "(blockviz) rewind",
    "restart": "(blockviz) a new engine process",
    "drop": "KVConnector (LRU drop)",
    "verify": "(blockviz) cache hit vs recomputation",
}

# ops that change the pool (the rest describe decisions)
POOL_OPS = frozenset({"popleft", "evict", "touch", "cache", "free", "free_head", "free_tail",
                      "reset"})


def op_request(op: tuple) -> str | None:
    return op[1] if op[0] in ("arrive", "lookup", "alloc_failed", "cache", "admit", "schedule",
                              "preempt", "write", "load", "save", "sample", "finish",
                              "verify") else None


def op_block_ids(op: tuple) -> list[int]:
    kind = op[0]
    if kind in ("popleft", "free", "free_head", "free_tail"):
        return list(op[1])
    if kind == "touch":
        return list(op[1])
    if kind == "evict":
        return [op[1]]
    if kind in ("cache", "lookup"):
        return list(op[2])
    if kind in ("write", "load", "save"):
        return [op[2]]
    return []


def op_to_dict(op: tuple) -> dict:
    """The op as JSON: ``op``, ``fn`` (the vLLM function), ``block_ids``, ``request`` and details."""
    kind = op[0]
    d: dict = {"op": kind, "fn": OP_FUNCTION.get(kind, kind), "block_ids": op_block_ids(op)}
    rid = op_request(op)
    if rid is not None:
        d["request"] = rid
    if kind == "evict":
        d["hash"] = op[2].hex()
    elif kind == "touch":
        d["removed_from_queue"] = list(op[2])
    elif kind == "cache":
        d["hashes"] = [h.hex() for h in op[3]]
        d["first_block_index"] = op[4]
        d["parent_hash"] = op[5].hex() if op[5] is not None else None
    elif kind == "lookup":
        d["hit_tokens_limit"] = op[3]
        d["num_block_hashes"] = op[4]
    elif kind == "alloc_failed":
        d["blocks_needed"], d["blocks_free"] = op[2], op[3]
    elif kind == "admit":
        d["local_hit_tokens"], d["external_hit_tokens"], d["num_new_tokens"] = op[2], op[3], op[4]
    elif kind == "schedule":
        d["num_new_tokens"] = op[2]
    elif kind == "reset":
        d["ok"] = op[1]
    elif kind == "write":
        d["offset"], d["token_ids"] = op[3], list(op[4])
    elif kind == "load":
        d["token_ids"] = list(op[3])
    elif kind == "save":
        d["hash"] = op[3].hex()
    elif kind == "sample":
        d["token_id"] = op[2]
    elif kind == "rewind":
        d["checkpoint"] = op[1]
    elif kind == "restart":
        d["generation"], d["none_hash"] = op[1], op[2].hex()
    elif kind == "drop":
        d["hash"] = op[1].hex()
    elif kind == "verify":
        d["hit_tokens"], d["new_tokens"], d["max_abs_diff"], d["device"] = op[2:6]
    return d
