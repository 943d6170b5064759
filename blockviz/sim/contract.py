"""The JSON contract of ``python -m blockviz json`` (scenario-format.md): other programs read it,
so every field named there is kept, exactly; other keys may be added."""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator

from blockviz.core.hashing import split_block_key
from blockviz.core.ops import op_to_dict
from blockviz.sim.metrics import pool_figures
from blockviz.sim.step import Step
from blockviz.sim.timeline import Timeline


def config_dict(engine) -> dict:
    cfg = engine.config.model_dump(mode="json")
    if cfg["kv_cache_groups"] is None:   # one full-attention group: neither hybrid key
        del cfg["kv_cache_groups"], cfg["prefix_cache_retention_interval"]
    else:                                # each group with its own fields only
        cfg["kv_cache_groups"] = [{k: v for k, v in g.items() if v is not None}
                                  for g in cfg["kv_cache_groups"]]
    hasher = engine.state.hasher
    cfg.update(num_gpu_blocks=engine.num_gpu_blocks,
               none_hash=hasher.none_hash.hex(), none_hash_seed_rule=hasher.seed_rule,
               vllm_behaviour="0.33 (split free order)" if engine.config.free_order == "split"
               else "0.23 classic (append free order)",
               payload_device=engine.kv.device_name if engine.kv is not None else None)
    return cfg


def kv_cache_dict(engine) -> dict | None:
    """The top-level ``kv_cache`` object with kv_cache_groups (as the oracle prints it)."""
    if engine.config.kv_cache_groups is None:
        return None
    coord = engine.manager.coordinator
    return {"coordinator": type(coord).__name__,
            "managers": [type(m).__name__ for m in coord.single_type_managers],
            "scheduler_block_size": engine.block_size, "hash_block_size": engine.block_size,
            "cache_hit_alignment_tokens": engine.block_size,
            "prefix_cache_retention_interval": coord.retention_interval,
            "max_in_flight_tokens": (2 if engine.scheduler_config.async_scheduling else 1)
            * engine.scheduler_config.max_num_batched_tokens,
            "max_admission_blocks_per_request": [m.max_admission_blocks_per_request
                                                 for m in coord.single_type_managers],
            "attention_groups": [{"spec": type(g.spec).__name__, "group_ids": list(g.group_ids)}
                                 for g in getattr(coord, "attention_groups", ())],
            "use_eagle": False, "num_gpu_blocks": engine.num_gpu_blocks}


def _split(key: bytes | None) -> tuple[str | None, int | None]:
    """(hash hex, group id) of a pool key (``split_block_key``; a bare hash is group 0's)."""
    if key is None:
        return None, None
    h, group = split_block_key(key)
    return h.hex(), group or 0


def step_dict(s: Step, frames: Iterable | None, *, lazy: bool = False, groups: int = 0,
              block_size: int = 0) -> dict:
    """One step of the contract. ``frames`` (the step's op frames, or None to leave them out)
    come out as a list (``lazy``: a Lazy one). ``groups``: how many kv_cache_groups the config
    gives (0: none); ``block_size``: the config's (vLLM's metrics
    say how full the held blocks are)."""
    blocks = []
    for i, key in enumerate(s.block_hash):
        h, g = _split(key)
        block = {"id": i, "is_null": i == 0, "ref_cnt": s.ref_cnt[i], "hash": h,
                 "token_ids": list(s.block_tokens[i])}
        if groups:
            block["group"] = g
        blocks.append(block)
    hash_table = {}
    for key, ids in s.hash_table:
        h, g = _split(key)
        hash_table[f"{h}#{g}" if groups > 1 else h] = list(ids)
    note, caption = s.note, s.caption
    event = None if s.event is None else s.event.event_dict()
    if s.teaching_only:
        event = {**event, "teaching_only": True}
    d = {
        "index": s.index,
        "event": event,
        "note": None if note is None else {"en": note.get("en"), "zh": note.get("zh")},
        "caption": None if caption is None else {"en": caption.en, "zh": caption.zh},
        "blocks": blocks,
        "free_queue": list(s.free_queue),
        "hash_table": hash_table,
        "requests": {rid: v.to_dict() for rid, v in s.requests.items()},
        "waiting": list(s.waiting),
        "running": list(s.running),
        "kv_events": [dict(e) for e in s.kv_events],
        "stats": s.stats.to_dict(),
        "engine_steps": [e.to_dict() for e in s.engine_steps],
    }
    d["none_hash"] = s.none_hash.hex()
    if s.vllm_metrics is not None:    # vLLM's metrics (sim.metrics), and the pool beside them
        d["vllm_metrics"] = s.vllm_metrics.to_dict(
            pool_figures(s.ref_cnt, s.block_hash, s.block_tokens, block_size))
    if s.reset_ok is not None:
        d["reset_ok"] = s.reset_ok
    if s.external is not None:
        d["external_tier"] = [{"hash": h.hex(), "token_ids": list(t)} for h, t in s.external]
    if s.tier is not None:
        # the CPU tier (vLLM's OffloadingConnector): its state, jobs, and its KV events with
        # medium "CPU" (kv_events above are the GPU's)
        d["connector"] = s.tier.to_dict()
        d["tier_events"] = [e for step in d["connector"]["engine_steps"] for e in step["kv_events"]]
    if frames is not None:
        frame_dicts = ({**op_to_dict(f.op), "free_queue": list(f.free_queue),
                        "ref_cnt": list(f.ref_cnt)} for f in frames)
        d["frames"] = Lazy(frame_dicts) if lazy else list(frame_dicts)
    return d


def timeline_dict(scenario_id: str, engine, timeline: Timeline, *, frames: bool = True,
                  lazy: bool = False) -> dict:
    """The contract document (``lazy``: its steps, and their frames, as Lazy arrays)."""
    groups = len(engine.config.kv_cache_groups or ())
    steps = (step_dict(timeline.step(i), timeline.frames(i) if frames else None, lazy=lazy,
                        groups=groups, block_size=engine.block_size) for i in range(len(timeline)))
    doc = {"scenario": scenario_id, "config": config_dict(engine),
           "steps": Lazy(steps) if lazy else list(steps)}
    kv_cache = kv_cache_dict(engine)
    if kv_cache is not None:
        doc["kv_cache"] = kv_cache
    return doc


# -- writing it, one step at a time -------------------------------------------------------------
class Lazy:
    """A JSON array whose items are made only as they are written (``write_json``)."""

    def __init__(self, items: Iterable) -> None:
        self.items = items


def write_json(write: Callable[[str], object], value, indent: int | None = None,
               on_item: Callable[[int], None] | None = None) -> None:
    """Write ``value`` as ``json.dump(value, fp, ensure_ascii=False, indent=indent)`` would,
    byte for byte, but holding only one item of each Lazy array at a time: a Lazy, and a dict
    with a Lazy among its values, are written piece by piece; anything else is encoded whole.
    ``on_item(k)`` is called before the k-th item of the outermost Lazy array is made (to name
    it in an error)."""
    enc = json.JSONEncoder(ensure_ascii=False, indent=indent)
    if indent is None:
        step, item_sep = "", ", "
    else:
        step, item_sep = indent if isinstance(indent, str) else " " * indent, ","

    def nl(level: int) -> str:
        return "" if indent is None else "\n" + step * level

    def has_lazy(v) -> bool:  # a Lazy sits directly in a dict or in a Lazy (looked no deeper)
        return isinstance(v, Lazy) or (isinstance(v, dict)
                                       and any(isinstance(x, Lazy) for x in v.values()))

    def emit(v, level: int, outer: bool) -> None:
        if not has_lazy(v):
            text = enc.encode(v)
            write(text if indent is None or level == 0 else text.replace("\n", nl(level)))
            return
        if isinstance(v, dict):
            pairs: Iterator = iter(v.items())
            opening, closing = "{", "}"
        else:
            pairs = enumerate(v.items if isinstance(v, Lazy) else v)
            opening, closing = "[", "]"
        k = 0                                   # the items written
        while True:
            if outer and isinstance(v, Lazy) and on_item is not None:
                on_item(k)
            try:
                key, item = next(pairs)
            except StopIteration:
                break
            write((item_sep if k else opening) + nl(level + 1))
            if isinstance(v, dict):
                write(enc.encode(key) + ": ")
            emit(item, level + 1, outer and not isinstance(v, Lazy))
            k += 1
        write(nl(level) + closing if k else opening + closing)

    emit(value, 0, True)


def write_timeline(write: Callable[[str], object], scenario_id: str, engine, timeline: Timeline,
                   *, frames: bool = True, indent: int | None = None,
                   on_step: Callable[[int], None] | None = None) -> None:
    """The contract document, as ``json.dump(timeline_dict(...))`` writes it, byte for byte, but
    one step (and one frame) at a time: memory stays that of one step, whatever their number."""
    write_json(write, timeline_dict(scenario_id, engine, timeline, frames=frames, lazy=True),
               indent, on_item=on_step)
