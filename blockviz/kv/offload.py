"""CPUKVPool — the external tier's K/V: a CPU tensor pool of ``num_chunks`` chunks (one GPU
block each), laid out like the paged store's rows (vLLM's CPU offloading keeps one such buffer
per KV cache tensor; on CUDA it is pinned, so copies to and from the GPU can run asynchronously).

    data: [num_layers, 2 (K, V), num_chunks, block_size * num_kv_heads * head_dim]

``store`` copies whole GPU blocks into chunks, ``load`` copies chunks into GPU blocks, bit for
bit. On the CPU both are numpy fancy-index copies of opaque per-block row items (one memcpy per
block, as the paged store moves blocks) — one pass when the chunks are one run (a fresh tier
allocates them so), else a gather and a scatter; on CUDA a gather on the GPU, then
one transfer per layer and K/V through pinned memory.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch

from blockviz.kv.store import PagedKVStore


def _run(ids: np.ndarray) -> tuple[int, int] | None:
    """(first, end) if ``ids`` are consecutive and increasing (one slice), else None."""
    n = ids.shape[0]
    if n == 0 or ids[-1] - ids[0] + 1 != n or (n > 1 and not (np.diff(ids) == 1).all()):
        return None
    return int(ids[0]), int(ids[0]) + n


class CPUKVPool:
    def __init__(self, num_chunks: int, store: PagedKVStore) -> None:
        self.store = store
        self.num_chunks = num_chunks
        row = store.block_size * store.num_kv_heads * store.head_dim
        self.pinned = store.device.type == "cuda"
        self.data = torch.zeros((store.num_layers, 2, num_chunks, row), dtype=store.dtype,
                                pin_memory=self.pinned)
        self._make_views()

    def _make_views(self) -> None:
        s = self.store
        self.row_bytes = self.data.shape[-1] * self.data.element_size()
        item = np.dtype((np.void, self.row_bytes))
        self._np = [[self.data[layer, kv].view(torch.uint8).numpy().view(item)
                     for kv in (0, 1)] for layer in range(s.num_layers)]   # [num_chunks, 1]
        self._store_np = None
        if s.device.type == "cpu":
            self._store_np = [[r.view(torch.uint8).numpy().view(item) for r in rows]
                              for rows in s._rows_of]

    def __deepcopy__(self, memo: dict) -> CPUKVPool:
        new = copy.copy(self)
        memo[id(self)] = new
        # the store is the live one (an engine copy maps its runtime to itself), unless the
        # store itself is being copied along
        new.store = memo.get(id(self.store), self.store)
        new.data = self.data.clone()
        if self.pinned:
            new.data = new.data.pin_memory()
        new._make_views()
        return new

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def store_blocks(self, block_ids: Sequence[int], chunk_ids: Sequence[int]) -> None:
        """GPU blocks -> CPU chunks (a store job)."""
        if not block_ids:
            return
        s = self.store
        if self._store_np is not None:
            b = np.asarray(block_ids, dtype=np.intp)
            c = np.asarray(chunk_ids, dtype=np.intp)
            run = _run(c)
            for layer in range(s.num_layers):
                for kv in (0, 1):
                    if run:   # fresh chunks are one run: gather straight into it, one pass
                        # (mode="clip": numpy's unbuffered take; the ids are valid)
                        np.take(self._store_np[layer][kv], b, axis=0, mode="clip",
                                out=self._np[layer][kv][run[0]:run[1]])
                    else:
                        self._np[layer][kv][c] = self._store_np[layer][kv][b]
            return
        bidx = torch.as_tensor(list(block_ids), dtype=torch.long, device=s.device)
        cidx = torch.as_tensor(list(chunk_ids), dtype=torch.long)
        for layer, rows in enumerate(s._rows_of):
            for kv in (0, 1):
                staged = torch.empty((len(block_ids), self.data.shape[-1]), dtype=self.data.dtype,
                                     pin_memory=True)
                staged.copy_(rows[kv].index_select(0, bidx), non_blocking=True)
                torch.cuda.current_stream(s.device).synchronize()
                self.data[layer, kv].index_copy_(0, cidx, staged)

    def load_blocks(self, chunk_ids: Sequence[int], block_ids: Sequence[int]) -> None:
        """CPU chunks -> GPU blocks (a load job)."""
        if not block_ids:
            return
        s = self.store
        if self._store_np is not None:
            b = np.asarray(block_ids, dtype=np.intp)
            c = np.asarray(chunk_ids, dtype=np.intp)
            run = _run(c)
            s._changed(b)
            for layer in range(s.num_layers):
                for kv in (0, 1):
                    src = (self._np[layer][kv][run[0]:run[1]] if run
                           else self._np[layer][kv][c])   # one run: a view, no copy
                    self._store_np[layer][kv][b] = src
            return
        s._changed(list(block_ids))
        bidx = torch.as_tensor(list(block_ids), dtype=torch.long, device=s.device)
        cidx = torch.as_tensor(list(chunk_ids), dtype=torch.long)
        for layer, rows in enumerate(s._rows_of):
            for kv in (0, 1):
                staged = self.data[layer, kv].index_select(0, cidx).pin_memory()
                rows[kv].index_copy_(0, bidx, staged.to(s.device, non_blocking=True))
        torch.cuda.current_stream(s.device).synchronize()
