"""blockviz.kv — real KV payloads in torch tensors: the paged store, the tiny model, the check
that a cache hit reproduces recomputation."""
from .model import TinyModel
from .runtime import HitCheck, KVRuntime, PayloadSummary, tolerance
from .store import PagedKVStore, resolve_device, slot_mapping

__all__ = ["HitCheck", "KVRuntime", "PagedKVStore", "PayloadSummary", "TinyModel", "resolve_device",
           "slot_mapping", "tolerance"]
