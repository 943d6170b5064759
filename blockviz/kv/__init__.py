"""blockviz.kv — real KV payloads in torch tensors: the paged store, the tiny model, the check
that a cache hit reproduces recomputation."""
from blockviz.kv.model import TinyModel
from blockviz.kv.runtime import KVRuntime, PayloadSummary, tolerance
from blockviz.kv.store import PagedKVStore, resolve_device, slot_mapping

__all__ = ["KVRuntime", "PagedKVStore", "PayloadSummary", "TinyModel", "resolve_device",
           "slot_mapping", "tolerance"]
