"""blockviz.core — a faithful, pure-Python re-implementation of vLLM 0.33's KV-cache block manager.

No torch, plotly or streamlit here: the core runs anywhere and is the single source of truth that
everything else (engine, timeline, renderers, app) observes.
"""
from .block import KVCacheBlock
from .block_pool import FREE_ORDERS, BlockHashToBlockMap, BlockPool
from .events import AllBlocksCleared, BlockRemoved, BlockStored
from .free_queue import FreeKVCacheBlockQueue
from .hashing import (
                      HASH_FUNCTIONS,
                      BlockHasher,
                      LoRA,
                      MMItem,
                      get_hash_fn_by_name,
                      hash_to_event_int,
)
from .invariants import InvariantError, check_invariants
from .manager import KVCacheManager, PrefixCacheStats
from .request import Request, RequestStatus
from .scheduler import ScheduledRequest, Scheduler, SchedulerError, SchedulerOutput

__all__ = [
    "AllBlocksCleared", "BlockHashToBlockMap", "BlockHasher", "BlockPool", "BlockRemoved",
    "BlockStored", "FREE_ORDERS", "FreeKVCacheBlockQueue", "HASH_FUNCTIONS", "InvariantError",
    "KVCacheBlock", "KVCacheManager", "LoRA", "MMItem", "PrefixCacheStats", "Request",
    "RequestStatus", "ScheduledRequest", "Scheduler", "SchedulerError", "SchedulerOutput",
    "check_invariants", "get_hash_fn_by_name", "hash_to_event_int",
]
