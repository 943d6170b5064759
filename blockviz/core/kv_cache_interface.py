"""KV-cache specs — the part of vllm/v1/kv_cache_interface.py (vLLM 0.33) that decides how a
KV-cache group's blocks are managed: its attention kind, its block size and, for the local kinds,
the window or chunk that bounds what a token attends to.

A model has one KV-cache group per kind of attention layer (``KVCacheConfig.kv_cache_groups``):
every group draws on one shared block pool, each keeps its own block table per request. Group
``i`` of a scenario is vLLM's ``KVCacheGroupSpec([f"layer{i}"], spec)``; every spec has the
scenario's block size (vLLM then has scheduler block size = hash block size = block size).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KVCacheSpec:
    block_size: int
    # vLLM's KVCacheSpecKind value: what KV events publish as kv_cache_spec_kind
    kind: ClassVar[str] = "unknown"
    # the spec's field a scenario's KV-cache group gives, by the same name (None: none)
    group_field: ClassVar[str | None] = None

    def max_admission_blocks_per_request(self, max_in_flight_tokens: int,
                                         max_model_len: int) -> int | None:
        """The per-request cap of the admission gate (None: no cap)."""
        return None


@dataclass(frozen=True)
class FullAttentionSpec(KVCacheSpec):
    kind: ClassVar[str] = "full_attention"


@dataclass(frozen=True)
class SlidingWindowSpec(KVCacheSpec):
    """A token attends to the ``sliding_window - 1`` tokens before it and itself."""
    sliding_window: int = 1
    kind: ClassVar[str] = "sliding_window"
    group_field: ClassVar[str] = "sliding_window"

    def max_admission_blocks_per_request(self, max_in_flight_tokens: int,
                                         max_model_len: int) -> int:
        # kv_cache_interface.py:918-944: the last W - 1 computed tokens plus those in flight
        # (frees happen on the processed-token basis), +1 as the window may start mid-block
        num_tokens = min(self.sliding_window - 1 + max_in_flight_tokens, max_model_len)
        return cdiv(num_tokens, self.block_size) + 1


@dataclass(frozen=True)
class ChunkedLocalAttentionSpec(KVCacheSpec):
    """A token attends to the tokens of its own ``attention_chunk_size``-token chunk."""
    attention_chunk_size: int = 1
    kind: ClassVar[str] = "chunked_local_attention"
    group_field: ClassVar[str] = "attention_chunk_size"

    def max_admission_blocks_per_request(self, max_in_flight_tokens: int,
                                         max_model_len: int) -> int:
        # kv_cache_interface.py:864-881: one chunk plus the tokens in flight
        num_tokens = min(self.attention_chunk_size + max_in_flight_tokens, max_model_len)
        return cdiv(num_tokens, self.block_size)


def get_kv_cache_spec_sliding_window(spec: KVCacheSpec) -> int | None:
    """What KV events publish as ``kv_cache_spec_sliding_window``: W for a sliding window."""
    return spec.sliding_window if isinstance(spec, SlidingWindowSpec) else None


@dataclass(frozen=True)
class KVCacheConfig:
    """vLLM's ``KVCacheConfig``: the pool's size (null block included), one spec per group, and
    ``CacheConfig.prefix_cache_retention_interval`` (0: vLLM 0.33's default, sparse
    sliding-window caching; None: dense; N > 0: also the tail of every N-token segment)."""
    num_blocks: int
    kv_cache_groups: tuple[KVCacheSpec, ...]
    prefix_cache_retention_interval: int | None = 0


_SPECS = {s.kind: s for s in (FullAttentionSpec, SlidingWindowSpec, ChunkedLocalAttentionSpec)}


def specs_from_groups(block_size: int, groups: Sequence[object]) -> tuple[KVCacheSpec, ...]:
    """The specs of a scenario's ``kv_cache_groups`` items (objects with ``type``, a spec's
    ``kind``, and for the local kinds the spec's ``group_field``: ``sliding_window`` /
    ``attention_chunk_size``); a spec's other fields keep their defaults."""
    specs = []
    for g in groups:
        if g.type not in _SPECS:
            raise ValueError(f"unknown KV-cache group type {g.type!r}")
        cls = _SPECS[g.type]
        name = cls.group_field
        specs.append(cls(block_size, **({name: getattr(g, name)} if name else {})))
    return tuple(specs)
