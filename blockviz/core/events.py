"""KV cache events — mirrors vllm/distributed/kv_events.py (vLLM 0.33).

Hashes are published as ints (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``, on by default): the digest
read big-endian, its low 64 bits. Extra keys are published untagged, as vLLM does.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class BlockStored:
    block_hashes: tuple[int, ...]
    parent_block_hash: int | None
    token_ids: tuple[int, ...]
    block_size: int
    lora_name: str | None = None
    extra_keys: tuple[Any, ...] | None = None

    def to_dict(self) -> dict:
        return {"type": "BlockStored", "block_hashes": list(self.block_hashes),
                "parent_block_hash": self.parent_block_hash, "token_ids": list(self.token_ids),
                "block_size": self.block_size, "lora_name": self.lora_name,
                "extra_keys": None if self.extra_keys is None else [
                    None if k is None else list(k) for k in self.extra_keys]}


@dataclass(frozen=True, slots=True)
class BlockRemoved:
    block_hashes: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"type": "BlockRemoved", "block_hashes": list(self.block_hashes)}


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
