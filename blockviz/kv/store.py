"""PagedKVStore — the KV payloads of every block of the pool, in real torch tensors.

Layout, per layer, as vLLM's FlashAttention backend lays out its cache:

    kv_caches[layer]: [2, num_blocks, block_size, num_kv_heads, head_dim]     (K = [0], V = [1])

preallocated once, on ``cuda`` or ``cpu``. A token at position ``pos`` of a request lives in
slot ``block_table[pos // block_size] * block_size + pos % block_size``; writes and reads go through
such slot mappings with batched index ops per layer and per K/V, never a Python loop per token —
and a run of whole blocks moves as whole blocks (``write_range``, ``gather_prefix``), which is
what keeps a paged prefill close to the speed of a contiguous copy.
"""
from __future__ import annotations

import copy
import hashlib
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

_NP_DTYPES = {torch.float32: np.float32, torch.float16: np.float16, torch.float64: np.float64}


def resolve_device(device: str) -> torch.device:
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device: cuda was asked for, but no CUDA GPU is available here "
                               "(use device: auto or cpu)")
        return torch.device("cuda")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    raise ValueError(f"unknown device {device!r} (auto, cpu or cuda)")


# A block's version: the snapshot chunk whose copy equals it (ZERO: all zeros, DIRTY: changed
# since it was last copied).
ZERO, DIRTY = 0, -1


@dataclass(frozen=True, eq=False)
class StoreSnapshot:
    """The store's payloads at a checkpoint, copy-on-write: per block, the chunk (a tensor of
    whole blocks copied at some checkpoint) and the row in it that holds its K/V. A block that
    did not change since an earlier checkpoint shares that checkpoint's copy."""
    version: np.ndarray          # [num_blocks] chunk id (ZERO: zeros)
    row: np.ndarray              # [num_blocks] the block's row in its chunk
    chunks: dict                 # chunk id -> [num_layers, 2, n, block_size, H, D] tensor


def slot_mapping(block_ids: torch.Tensor, positions: torch.Tensor, block_size: int) -> torch.Tensor:
    """Slots of ``positions`` (a [T] long tensor) under a block table ``block_ids`` ([B] long)."""
    return block_ids[positions // block_size] * block_size + positions % block_size  # [T]


class PagedKVStore:
    def __init__(self, num_blocks: int, block_size: int, num_layers: int, num_kv_heads: int,
                 head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu") -> None:
        self.num_blocks, self.block_size = num_blocks, block_size
        self.num_layers, self.num_kv_heads, self.head_dim = num_layers, num_kv_heads, head_dim
        self.dtype = dtype
        self.device = torch.device(device)
        shape = (2, num_blocks, block_size, num_kv_heads, head_dim)
        self.kv_caches = [torch.zeros(shape, dtype=dtype, device=self.device)
                          for _ in range(num_layers)]
        self._make_row_views()
        # copy-on-write checkpoints (see snapshot): every block starts as zeros
        self._version = np.zeros(num_blocks, dtype=np.int64)
        self._row = np.zeros(num_blocks, dtype=np.int64)
        self._chunks: dict[int, weakref.ref] = {}     # chunk id -> the chunk, while one is kept
        self._next_chunk = 1

    def _make_row_views(self) -> None:
        """Per layer, K and V as [num_blocks, row] views (one row per block) — and on the CPU the
        same memory seen by numpy as one opaque ``row_bytes`` item per block. Moving a block is then
        a single memcpy inside numpy's fancy indexing, as fast as a contiguous copy, where torch's
        CPU index ops go element by element. Nothing is copied to make the views: values move bit
        for bit, and the payloads stay in the torch tensors.

        ``rows_of[layer]`` (K rows, V rows) and ``np_rows_of[layer]`` (None off the CPU) are the
        store's block rows for code that moves whole blocks in and out (the CPU tier,
        ``blockviz.kv.offload``). Reading them is free; whoever writes blocks through them calls
        :meth:`mark_changed` with those blocks first, or checkpoints miss the change."""
        self.rows_of = [tuple(c[kv].view(self.num_blocks, -1) for kv in (0, 1))
                        for c in self.kv_caches]
        self.row_bytes = self.rows_of[0][0].shape[1] * self.kv_caches[0].element_size()
        self.np_rows_of = None
        if self.device.type == "cpu":
            self._np_row = np.dtype((np.void, self.row_bytes))
            # numpy's own name for the cache dtype (none for bfloat16: that goes through bytes)
            self._np_dtype = _NP_DTYPES.get(self.dtype)
            self.np_rows_of = [tuple(r.view(torch.uint8).numpy().view(self._np_row) for r in rows)
                               for rows in self.rows_of]               # [N, 1] each

    def _np_items(self, t: torch.Tensor, nb: int):
        """``t`` (contiguous, cache dtype, nb whole blocks) as [nb, 1] numpy row items (a view)."""
        a = t.numpy() if self._np_dtype is not None else t.view(torch.uint8).numpy()
        return a.reshape(nb, -1).view(self._np_row)

    def __deepcopy__(self, memo: dict) -> PagedKVStore:
        new = copy.copy(self)
        memo[id(self)] = new
        new.kv_caches = [c.clone() for c in self.kv_caches]
        new._make_row_views()
        new._version, new._row, new._chunks = self._version.copy(), self._row.copy(), dict(self._chunks)
        return new

    # -- copy-on-write checkpoints ------------------------------------------------------------
    def mark_changed(self, blocks) -> None:
        """The blocks' K/V changed (the store's own writes call this; so does a writer through
        ``rows_of``): the next checkpoint copies them."""
        if isinstance(blocks, torch.Tensor):
            blocks = blocks.numpy() if blocks.device.type == "cpu" else blocks.tolist()
        self._version[blocks] = DIRTY

    def _kept(self) -> dict[int, torch.Tensor]:
        """The chunks some snapshot still holds (the others were freed with their snapshots)."""
        kept = {}
        for cid, ref in list(self._chunks.items()):
            t = ref()
            if t is None:
                del self._chunks[cid]
            else:
                kept[cid] = t
        return kept

    def held_bytes(self) -> int:
        """Bytes of the block copies that snapshots hold (each copy counted once)."""
        return sum(t.numel() * t.element_size() for t in self._kept().values())

    def snapshot(self, need: Callable[[int], None] | None = None) -> StoreSnapshot:
        """The payloads as they are now, copying only the blocks that changed since they were
        last copied (or whose copy was freed); every other block shares its copy. ``need(n)`` is
        told the bytes of the new copy before it is made (and may refuse by raising)."""
        kept = self._kept()
        stale = (self._version == DIRTY) | ((self._version != ZERO)
                                            & ~np.isin(self._version, list(kept)))
        ids = np.flatnonzero(stale)
        if len(ids):
            if need is not None:
                need(len(ids) * self.bytes_per_block)
            data = self.read_blocks(ids.tolist())                  # [L, 2, n, bs, H, D]
            cid = self._next_chunk
            self._next_chunk += 1
            self._chunks[cid] = weakref.ref(data)
            kept[cid] = data
            self._version[ids] = cid
            self._row[ids] = np.arange(len(ids))
        used = set(np.unique(self._version).tolist()) - {ZERO}
        return StoreSnapshot(self._version.copy(), self._row.copy(),
                             {cid: kept[cid] for cid in used})

    def restore(self, snap: StoreSnapshot) -> list[int]:
        """Put a snapshot's payloads back; returns the blocks whose K/V this changed (only those
        are written: a block that still shares the snapshot's copy is left alone)."""
        differ = np.flatnonzero((self._version != snap.version) | (self._row != snap.row))
        for cid in np.unique(snap.version[differ]).tolist():
            ids = differ[snap.version[differ] == cid]
            idx = torch.as_tensor(ids, dtype=torch.long, device=self.device)
            if cid == ZERO:
                for c in self.kv_caches:
                    c.index_fill_(1, idx, 0)
            else:
                rows = torch.as_tensor(snap.row[ids], dtype=torch.long)
                data = snap.chunks[cid].index_select(2, rows.to(snap.chunks[cid].device))
                self._write_blocks(idx, data)
                self._chunks.setdefault(cid, weakref.ref(snap.chunks[cid]))
        self._version[differ] = snap.version[differ]
        self._row[differ] = snap.row[differ]
        return differ.tolist()

    @property
    def bytes_per_block(self) -> int:
        """One block's K and V over every layer (``Config.model.bytes_per_block``, as allocated)."""
        return self.num_layers * 2 * self.row_bytes

    def _flat(self, layer: int, kv: int) -> torch.Tensor:
        # cache[kv] is contiguous, so this is a view: writes land in the cache.
        return self.kv_caches[layer][kv].view(-1, self.num_kv_heads, self.head_dim)  # [N*bs, H, D]

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: [T, H, D] into ``slots`` ([T] long)."""
        self.mark_changed(slots // self.block_size)
        self._flat(layer, 0).index_copy_(0, slots, k.to(self.dtype))
        self._flat(layer, 1).index_copy_(0, slots, v.to(self.dtype))

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V at ``slots``: two [T, H, D] tensors (copies)."""
        return (self._flat(layer, 0).index_select(0, slots),
                self._flat(layer, 1).index_select(0, slots))

    def write_range(self, layer: int, block_table: torch.Tensor, start: int, k: torch.Tensor,
                    v: torch.Tensor) -> None:
        """K/V ([T, H, D]) of the tokens at positions start..start+T-1 of a request whose block
        table is ``block_table`` ([B] long). Whole blocks go in with one block-level index op per
        K and V (a prefill is mostly whole blocks); a partial first or last block goes by slots."""
        bs = self.block_size
        T = k.shape[0]
        end = start + T
        if T:
            lo, hi = start // bs, (end - 1) // bs + 1
            if block_table.device.type == "cpu":      # a numpy view: no torch op per call
                self._version[block_table.numpy()[lo:hi]] = DIRTY
            else:
                self.mark_changed(block_table[lo:hi])
        first_full, last_full = -(-start // bs), end // bs        # whole blocks [first, last)
        a, b = first_full * bs - start, last_full * bs - start    # their rows in k, v
        if first_full < last_full:
            nb = last_full - first_full
            idx = block_table if nb == block_table.shape[0] else block_table[first_full:last_full]
            ks, vs = (src if src.dtype == self.dtype else src.to(self.dtype)
                      for src in ((k, v) if not a and b == T else (k[a:b], v[a:b])))
            if self.np_rows_of is not None and ks.is_contiguous() and vs.is_contiguous():
                np_k, np_v = self.np_rows_of[layer]
                ix = idx.numpy()
                np_k[ix] = self._np_items(ks, nb)
                np_v[ix] = self._np_items(vs, nb)
            else:
                cache_k, cache_v = self.rows_of[layer]
                cache_k.index_copy_(0, idx, ks.reshape(nb, -1))
                cache_v.index_copy_(0, idx, vs.reshape(nb, -1))
        else:
            a, b = T, T
        for lo, hi in ((0, a), (b, T)):                           # partial blocks, if any
            if lo < hi:
                pos = torch.arange(start + lo, start + hi, device=self.device)
                self.write(layer, slot_mapping(block_table, pos, bs), k[lo:hi], v[lo:hi])

    def gather_prefix(self, layer: int, block_table: torch.Tensor,
                      num_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of positions 0..num_tokens-1 through ``block_table``: one block-level
        index_select per K and V, viewed as [num_tokens, H, D] (copies of the cache)."""
        nb = -(-num_tokens // self.block_size)
        idx = block_table if block_table.shape[0] == nb else block_table[:nb]
        shape = (-1, self.num_kv_heads, self.head_dim)
        if self.np_rows_of is not None:
            ix, as_np = idx.numpy(), self._np_dtype or np.uint8
            got = [torch.from_numpy(rows[ix].view(as_np)).view(self.dtype).view(shape)
                   for rows in self.np_rows_of[layer]]                   # [nb*bs, H, D]
        else:
            got = [rows.index_select(0, idx).view(shape) for rows in self.rows_of[layer]]
        if nb * self.block_size != num_tokens:
            got = [t[:num_tokens] for t in got]
        return got[0], got[1]

    def read_blocks(self, block_ids: Sequence[int]) -> torch.Tensor:
        """A copy of whole blocks: [num_layers, 2, len(block_ids), block_size, H, D]."""
        idx = torch.as_tensor(list(block_ids), dtype=torch.long, device=self.device)
        return torch.stack([c.index_select(1, idx) for c in self.kv_caches])

    def write_blocks(self, block_ids: Sequence[int], data: torch.Tensor) -> None:
        """Inverse of :meth:`read_blocks` (``data`` may live on another device)."""
        idx = torch.as_tensor(list(block_ids), dtype=torch.long, device=self.device)
        self.mark_changed(list(block_ids))
        self._write_blocks(idx, data)

    def _write_blocks(self, idx: torch.Tensor, data: torch.Tensor) -> None:
        data = data.to(self.device, self.dtype)
        for layer, c in enumerate(self.kv_caches):
            c.index_copy_(1, idx, data[layer])

    def zero_(self) -> list[int]:
        """Zero every block; returns those that were not known to be zeros already."""
        changed = np.flatnonzero(self._version != ZERO).tolist()
        for c in self.kv_caches:
            c.zero_()
        self._version[:] = ZERO
        return changed

    def fingerprint(self, block_id: int) -> str:
        """A short digest of everything the block holds (all layers, K and V)."""
        h = hashlib.blake2b(digest_size=4)
        for c in self.kv_caches:
            # as bytes: numpy has no bfloat16 (the other dtypes give the bytes numpy would)
            h.update(c[:, block_id].detach().to("cpu").contiguous().view(torch.uint8)
                     .numpy().tobytes())
        return h.hexdigest()
