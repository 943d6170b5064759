"""CPUKVPool — the external tier's K/V: a CPU tensor pool of ``num_chunks`` chunks (one GPU
block each), laid out like the paged store's rows (vLLM's CPU offloading keeps one such buffer
per KV cache tensor; on CUDA it is pinned, so copies to and from the GPU can run asynchronously).

    data: [num_layers, 2 (K, V), num_chunks, block_size * num_kv_heads * head_dim]

``store`` copies whole GPU blocks into chunks, ``load`` copies chunks into GPU blocks, bit for
bit. On the CPU both are numpy copies of opaque per-block row items (one memcpy per block, as the
paged store moves blocks). A job's chunk ids come in a few runs of consecutive ids — a fresh tier
hands out one run, and the chunks an eviction frees are the evicted requests' runs — so each run is
one pass straight between the store and a slice of the pool; only a job scattered over more than
``MAX_RUNS`` runs takes a gather and a scatter. On CUDA: per layer, one gather (or scatter) on the
GPU, and one transfer per run and K/V straight to (or from) the pinned pool; a scattered job goes
through a pinned staging copy instead.
"""
from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch

from blockviz.kv.store import PagedKVStore

MAX_RUNS = 16   # past this many runs of chunk ids, one gather and one scatter beat a pass per run


def _plan(chunk_ids: Sequence[int], block_ids: Sequence[int]) -> tuple:
    """A job as ``(runs, chunks, blocks)``: ``runs`` lists its runs of rising consecutive chunk
    ids as ``(first chunk, end chunk, lo, hi, the GPU blocks of those chunks)`` (the run is
    ``blocks[lo:hi]`` of the job), or is None past
    ``MAX_RUNS`` runs; ``chunks`` and ``blocks`` are the ids as index arrays. (``fromiter`` and a
    subtraction rather than ``asarray`` and ``diff``: a 1 MB job's copies take ~100 µs, and
    those two cost ~15 µs of Python.)"""
    n = len(block_ids)
    b = np.fromiter(block_ids, dtype=np.intp, count=n)
    first = chunk_ids[0]
    if chunk_ids[-1] == first + n - 1 and list(chunk_ids) == list(range(first, first + n)):
        return [(first, first + n, 0, n, b)], None, b         # a fresh tier's one run
    c = np.fromiter(chunk_ids, dtype=np.intp, count=n)
    cuts = np.flatnonzero(c[1:] - c[:-1] != 1) + 1   # the manager hands each freed run out rising
    if len(cuts) >= MAX_RUNS:
        return None, c, b
    bounds = [0, *cuts.tolist(), n]
    starts = c[bounds[:-1]].tolist()
    return [(c0, c0 + hi - lo, lo, hi, b[lo:hi]) for c0, lo, hi in zip(starts, bounds, bounds[1:])], c, b


class CPUKVPool:
    def __init__(self, num_chunks: int, store: PagedKVStore) -> None:
        self.store = store
        self.num_chunks = num_chunks
        self.pinned = store.device.type == "cuda"
        self.data = torch.zeros((store.num_layers, 2, num_chunks, store.rows_of[0][0].shape[1]),
                                dtype=store.dtype, pin_memory=self.pinned)
        self._make_views()

    def _make_views(self) -> None:
        s = self.store
        self.row_bytes = self.data.shape[-1] * self.data.element_size()
        item = np.dtype((np.void, self.row_bytes))
        self._np = [[self.data[layer, kv].view(torch.uint8).numpy().view(item)
                     for kv in (0, 1)] for layer in range(s.num_layers)]   # [num_chunks, 1]
        self._store_np = s.np_rows_of       # the store's blocks as the same row items (CPU only)

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
        runs, c, b = _plan(chunk_ids, block_ids)
        if self._store_np is not None:
            for layer in range(s.num_layers):
                for kv in (0, 1):
                    src, dst = self._store_np[layer][kv], self._np[layer][kv]
                    if runs is None:
                        dst[c] = src[b]
                        continue
                    for first, end, _, _, blocks in runs:   # gather straight into the run: one pass
                        # (mode="clip": numpy's unbuffered take; the ids are valid)
                        src.take(blocks, axis=0, out=dst[first:end], mode="clip")
            return
        bidx = torch.from_numpy(b).to(s.device)
        for layer, cache in enumerate(s.kv_caches):
            got = cache.view(2, s.num_blocks, -1).index_select(1, bidx)   # [2, n, row] on the GPU
            if runs is None:
                staged = torch.empty(got.shape, dtype=got.dtype, pin_memory=True)
                staged.copy_(got, non_blocking=True)
                torch.cuda.current_stream(s.device).synchronize()
                self.data[layer].index_copy_(1, torch.from_numpy(c), staged)
                continue
            for first, end, lo, hi, _ in runs:
                for kv in (0, 1):
                    self.data[layer, kv, first:end].copy_(got[kv, lo:hi], non_blocking=True)
        torch.cuda.current_stream(s.device).synchronize()

    def load_blocks(self, chunk_ids: Sequence[int], block_ids: Sequence[int]) -> None:
        """CPU chunks -> GPU blocks (a load job)."""
        if not block_ids:
            return
        s = self.store
        runs, c, b = _plan(chunk_ids, block_ids)
        s.mark_changed(b)
        if self._store_np is not None:
            for layer in range(s.num_layers):
                for kv in (0, 1):
                    src, dst = self._np[layer][kv], self._store_np[layer][kv]
                    if runs is None:
                        dst[b] = src[c]
                        continue
                    for first, end, _, _, blocks in runs:   # the run is a view: one pass
                        dst[blocks] = src[first:end]
            return
        bidx = torch.from_numpy(b).to(s.device)
        for layer, cache in enumerate(s.kv_caches):
            rows = cache.view(2, s.num_blocks, -1)
            if runs is None:
                for kv in (0, 1):
                    staged = self.data[layer, kv].index_select(0, torch.from_numpy(c)).pin_memory()
                    rows[kv].index_copy_(0, bidx, staged.to(s.device, non_blocking=True))
                continue
            got = torch.empty((2, len(block_ids), rows.shape[-1]), dtype=rows.dtype, device=s.device)
            for first, end, lo, hi, _ in runs:
                for kv in (0, 1):
                    got[kv, lo:hi].copy_(self.data[layer, kv, first:end], non_blocking=True)
            rows.index_copy_(1, bidx, got)
        torch.cuda.current_stream(s.device).synchronize()
