"""An external KV tier in the spirit of LMCache: a CPU store of whole blocks keyed by block hash,
with its own capacity and LRU order, consulted *after* the local prefix cache.

Scheduler side (vLLM's KVConnector scheduler API):
  * ``get_num_new_matched_tokens(request, num_computed_tokens)`` — how many more tokens, past the
    local hit, the tier holds: consecutive full blocks by hash, capped at ``num_tokens - 1``.
  * ``request_finished(request, block_ids)`` — save the request's computed, cached blocks.
Worker side: ``load`` copies the saved K/V into the fresh GPU blocks allocated for those tokens
(a real tensor copy), and saving copies GPU blocks to CPU tensors.

Local and external hits are counted apart (``PrefixCacheStats.external_*``) so that the external
tier is not credited with what the GPU prefix cache did.
"""
from __future__ import annotations

import copy
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from blockviz.core import Request
from blockviz.core.ops import Drop, Save


@dataclass(frozen=True)
class SavedBlock:
    """Never changed once saved: a checkpoint's copy of the tier shares it."""
    token_ids: tuple[int, ...]
    payload: Any  # [num_layers, 2, 1, block_size, H, D] CPU tensor, or None without payloads


class _Bytes:
    """Bytes of the saved payloads still alive (in the tier or in a checkpoint's copy of it)."""

    def __init__(self) -> None:
        self.n = 0

    def add(self, tensor) -> None:
        n = tensor.numel() * tensor.element_size()
        self.n += n
        weakref.finalize(tensor, self._sub, n)

    def _sub(self, n: int) -> None:
        self.n -= n


class ExternalKVTier:
    def __init__(self, num_blocks: int, block_size: int, kv=None) -> None:
        self.capacity = num_blocks
        self.block_size = block_size
        self.kv = kv                                  # the engine's KVRuntime (or None)
        self.store: OrderedDict[bytes, SavedBlock] = OrderedDict()  # LRU first
        self.ops: list | None = None                  # set by the engine
        self.num_saved = 0
        self.num_dropped = 0
        self.payload_bytes = _Bytes()                 # shared with every copy of this tier
        self.guard = None                             # the run's budget (sim.budget.Meter)

    def __deepcopy__(self, memo: dict) -> ExternalKVTier:
        # A copy (a checkpoint) shares the saved blocks: they never change once saved.
        new = copy.copy(self)
        memo[id(self)] = new
        new.kv = copy.deepcopy(self.kv, memo)
        new.store = OrderedDict(self.store)
        return new

    def _op(self, op) -> None:
        if self.ops is not None:
            self.ops.append(op)

    # -- scheduler side ---------------------------------------------------------------------
    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int) -> int:
        start = num_computed_tokens // self.block_size
        limit = (request.num_tokens - 1) // self.block_size
        n = 0
        for h in request.block_hashes[start:limit]:
            if h not in self.store:
                break
            n += 1
        return n * self.block_size

    def request_finished(self, request: Request, block_ids: list[int]) -> None:
        """Save every computed block of the request that has a hash (full blocks)."""
        n = min(len(request.block_hashes), request.num_computed_tokens // self.block_size,
                len(block_ids))
        new = [(i, block_ids[i]) for i in range(n) if request.block_hashes[i] not in self.store]
        for i in range(n):  # already saved: just fresher now
            h = request.block_hashes[i]
            if h in self.store:
                self.store.move_to_end(h)
        payloads = None
        if new and self.kv is not None:
            if self.guard is not None:
                self.guard.need(len(new) * self.kv.store.bytes_per_block, "the external tier")
            payloads = self.kv.read_blocks([b for _, b in new]).to("cpu")  # [L, 2, n, bs, H, D]
        for j, (i, bid) in enumerate(new):
            h = request.block_hashes[i]
            toks = tuple(request.all_token_ids[i * self.block_size:(i + 1) * self.block_size])
            data = None if payloads is None else payloads[:, :, j:j + 1].clone()
            if data is not None:
                self.payload_bytes.add(data)
            self.store[h] = SavedBlock(toks, data)
            self.num_saved += 1
            self._op(Save(request.request_id, bid, h))
        while len(self.store) > self.capacity:
            h, _ = self.store.popitem(last=False)
            self.num_dropped += 1
            self._op(Drop(h))

    # -- worker side ------------------------------------------------------------------------
    def load(self, request: Request, block_ids, num_local_tokens: int, block_tokens) -> None:
        """Copy the saved blocks for tokens num_local_tokens.. into ``block_ids`` (fresh GPU
        blocks) and note the tokens they now hold."""
        first = num_local_tokens // self.block_size
        saved = []
        for j, bid in enumerate(block_ids):
            h = request.block_hashes[first + j]
            block = self.store[h]
            self.store.move_to_end(h)
            saved.append(block)
            block_tokens[bid][:] = list(block.token_ids)
        if self.kv is not None and saved:
            import torch
            data = torch.cat([b.payload for b in saved], dim=2)   # [L, 2, n, bs, H, D]
            self.kv.write_blocks(list(block_ids), data)

    def hashes(self) -> list[bytes]:
        """Saved block hashes, least recently used first."""
        return list(self.store)
