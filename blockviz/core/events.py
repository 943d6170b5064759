"""KV cache events — mirror vllm/distributed/kv_events.py (vLLM 0.33).

Every event carries every field of vLLM 0.33's msgspec struct, in the struct's order (the JSON
contract writes them in that order too, scenario-format.md). Hashes are published as ints
(``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``, on by default): the digest read big-endian, its low 64
bits. Extra keys are published untagged, as vLLM does.

The defaults are those of a one-group full-attention GPU pool; an external tier's events set
``medium`` "CPU" (vLLM's legacy placeholder payload: no spec kind).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MEDIUM_GPU = "GPU"
MEDIUM_CPU = "CPU"


@dataclass(frozen=True, slots=True)
class BlockStored:
    block_hashes: tuple[int, ...]
    parent_block_hash: int | None
    token_ids: tuple[int, ...]
    block_size: int
    lora_id: int | None = None          # the LoRA request's adapter id (vLLM: lora_int_id)
    medium: str | None = MEDIUM_GPU
    lora_name: str | None = None
    # one entry per listed block (None or its untagged extra keys); None when no block is listed
    extra_keys: tuple[Any, ...] | None = None
    group_idx: int | None = 0
    kv_cache_spec_kind: str | None = "full_attention"
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: tuple[tuple[int, ...], ...] | None = None

    def to_dict(self) -> dict:
        la, keys = self.lookahead_token_ids, self.extra_keys
        return {"type": "BlockStored", "block_hashes": list(self.block_hashes),
                "parent_block_hash": self.parent_block_hash, "token_ids": list(self.token_ids),
                "block_size": self.block_size, "lora_id": self.lora_id, "medium": self.medium,
                "lora_name": self.lora_name,
                "extra_keys": None if keys is None else [None if k is None else list(k) for k in keys],
                "group_idx": self.group_idx, "kv_cache_spec_kind": self.kv_cache_spec_kind,
                "kv_cache_spec_sliding_window": self.kv_cache_spec_sliding_window,
                "locality": self.locality, "ownership": self.ownership,
                "session_id": self.session_id,
                "lookahead_token_ids": None if la is None else [list(t) for t in la]}


@dataclass(frozen=True, slots=True)
class BlockRemoved:
    block_hashes: tuple[int, ...]
    medium: str | None = MEDIUM_GPU
    group_idx: int | None = 0
    locality: str | None = None
    ownership: str | None = None

    def to_dict(self) -> dict:
        return {"type": "BlockRemoved", "block_hashes": list(self.block_hashes),
                "medium": self.medium, "group_idx": self.group_idx, "locality": self.locality,
                "ownership": self.ownership}


@dataclass(frozen=True, slots=True)
class AllBlocksCleared:
    def to_dict(self) -> dict:
        return {"type": "AllBlocksCleared"}


KVCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared


def to_event_extra_keys(keys: tuple | None) -> tuple | None:
    """The untagged form events carry: a bare LoRA name / salt, ``(mm_id, offset)`` pairs."""
    if keys is None:
        return None
    return tuple(k[1:] if k[0] == "mm" else k[1] for k in keys)
