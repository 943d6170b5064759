"""What the offloading tier's parts share, after vLLM's kv_offload/base.py: a request's context,
a lookup's result, and the manager's store/evict events."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class LookupResult(enum.Enum):
    MISS = 0
    HIT = 1
    HIT_PENDING = 2


@dataclass
class ReqContext:
    """vLLM ``ReqContext``: a request's offload-key positions and the per-request state the
    manager and the policy keep on it."""
    req_id: str
    positions: dict[bytes, int] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)


@dataclass
class OffloadingEvent:
    keys: list[bytes]
    removed: bool
