"""blockviz.core — a faithful, pure-Python re-implementation of vLLM 0.33's KV-cache block manager.

No torch, plotly or streamlit here: the core runs anywhere and is the single source of truth that
everything else (engine, timeline, renderers, app) observes.
"""
from blockviz.core.block import KVCacheBlock
from blockviz.core.block_pool import FREE_ORDERS, BlockHashToBlockMap, BlockPool
from blockviz.core.events import AllBlocksCleared, BlockRemoved, BlockStored
from blockviz.core.free_queue import FreeKVCacheBlockQueue
from blockviz.core.hashing import (
                      HASH_FUNCTIONS,
                      BlockHasher,
                      LoRA,
                      MMItem,
                      get_hash_fn_by_name,
                      hash_to_event_int,
)
from blockviz.core.invariants import InvariantError, check_invariants
from blockviz.core.manager import KVCacheManager, PrefixCacheStats
from blockviz.core.request import Request, RequestStatus
from blockviz.core.scheduler import ScheduledRequest, Scheduler, SchedulerError, SchedulerOutput

__all__ = [
    "AllBlocksCleared", "BlockHashToBlockMap", "BlockHasher", "BlockPool", "BlockRemoved",
    "BlockStored", "FREE_ORDERS", "FreeKVCacheBlockQueue", "HASH_FUNCTIONS", "InvariantError",
    "KVCacheBlock", "KVCacheManager", "LoRA", "MMItem", "PrefixCacheStats", "Request",
    "RequestStatus", "ScheduledRequest", "Scheduler", "SchedulerError", "SchedulerOutput",
    "check_invariants", "get_hash_fn_by_name", "hash_to_event_int",
]
