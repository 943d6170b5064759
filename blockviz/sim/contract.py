"""The JSON contract of ``python -m blockviz json`` (scenario-format.md): other programs read it,
so every field named there is kept, exactly; other keys may be added."""
from __future__ import annotations

from blockviz.core.ops import op_to_dict
from blockviz.sim.timeline import Snapshot, Timeline


def config_dict(timeline_engine) -> dict:
    engine = timeline_engine
    cfg = engine.config.model_dump(mode="json")
    hasher = engine.state.hasher
    cfg.update(num_gpu_blocks=engine.num_gpu_blocks,
               none_hash=hasher.none_hash.hex(), none_hash_seed_rule=hasher.seed_rule,
               vllm_behaviour="0.33 (split free order)" if engine.config.free_order == "split"
               else "0.23 classic (append free order)",
               payload_device=engine.kv.device_name if engine.kv is not None else None)
    return cfg


def snapshot_dict(s: Snapshot, frames: list | None) -> dict:
    blocks = [{"id": i, "is_null": i == 0, "ref_cnt": s.ref_cnt[i],
               "hash": h.hex() if h is not None else None, "token_ids": list(s.block_tokens[i])}
              for i, h in enumerate(s.block_hash)]
    note = s.note
    event = s.event
    if s.teaching_only:
        event = {**event, "teaching_only": True}
    d = {
        "index": s.index,
        "event": event,
        "note": None if note is None else {"en": note.get("en"), "zh": note.get("zh")},
        "blocks": blocks,
        "free_queue": list(s.free_queue),
        "hash_table": {h.hex(): list(ids) for h, ids in s.hash_table},
        "requests": {rid: v.to_dict() for rid, v in s.requests.items()},
        "waiting": list(s.waiting),
        "running": list(s.running),
        "kv_events": [dict(e) for e in s.kv_events],
        "stats": s.stats.to_dict(),
        "engine_steps": [e.to_dict() for e in s.engine_steps],
    }
    d["none_hash"] = s.none_hash.hex()
    if s.reset_ok is not None:
        d["reset_ok"] = s.reset_ok
    if s.external is not None:
        d["external_tier"] = [{"hash": h.hex(), "token_ids": list(t)} for h, t in s.external]
    if frames is not None:
        d["frames"] = [{**op_to_dict(f.op), "free_queue": list(f.free_queue),
                        "ref_cnt": list(f.ref_cnt)} for f in frames]
    return d


def timeline_dict(scenario_id: str, engine, timeline: Timeline, *, frames: bool = True) -> dict:
    return {
        "scenario": scenario_id,
        "config": config_dict(engine),
        "steps": [snapshot_dict(timeline.snapshot(i), timeline.frames(i) if frames else None)
                  for i in range(len(timeline))],
    }
