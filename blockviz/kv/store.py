"""PagedKVStore — the KV payloads of every block of the pool, in real torch tensors.

Layout, per layer, as vLLM's FlashAttention backend lays out its cache:

    kv_caches[layer]: [2, num_blocks, block_size, num_kv_heads, head_dim]     (K = [0], V = [1])

preallocated once, on ``cuda`` or ``cpu``. A token at position ``pos`` of a request lives in
slot ``block_table[pos // block_size] * block_size + pos % block_size``; writes and reads go through
such slot mappings with one batched index op per layer and per K/V, never a Python loop per token.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch


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

    @property
    def bytes_per_block(self) -> int:
        return (self.num_layers * 2 * self.block_size * self.num_kv_heads * self.head_dim
                * self.kv_caches[0].element_size())

    def _flat(self, layer: int, kv: int) -> torch.Tensor:
        # cache[kv] is contiguous, so this is a view: writes land in the cache.
        return self.kv_caches[layer][kv].view(-1, self.num_kv_heads, self.head_dim)  # [N*bs, H, D]

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """k, v: [T, H, D] into ``slots`` ([T] long)."""
        self._flat(layer, 0).index_copy_(0, slots, k.to(self.dtype))
        self._flat(layer, 1).index_copy_(0, slots, v.to(self.dtype))

    def gather(self, layer: int, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V at ``slots``: two [T, H, D] tensors (copies)."""
        return (self._flat(layer, 0).index_select(0, slots),
                self._flat(layer, 1).index_select(0, slots))

    def read_blocks(self, block_ids: Sequence[int]) -> torch.Tensor:
        """A copy of whole blocks: [num_layers, 2, len(block_ids), block_size, H, D]."""
        idx = torch.as_tensor(list(block_ids), dtype=torch.long, device=self.device)
        return torch.stack([c.index_select(1, idx) for c in self.kv_caches])

    def write_blocks(self, block_ids: Sequence[int], data: torch.Tensor) -> None:
        """Inverse of :meth:`read_blocks` (``data`` may live on another device)."""
        idx = torch.as_tensor(list(block_ids), dtype=torch.long, device=self.device)
        data = data.to(self.device, self.dtype)
        for layer, c in enumerate(self.kv_caches):
            c.index_copy_(1, idx, data[layer])

    def zero_(self) -> None:
        for c in self.kv_caches:
            c.zero_()

    def fingerprint(self, block_id: int) -> str:
        """A short digest of everything the block holds (all layers, K and V)."""
        h = hashlib.blake2b(digest_size=4)
        for c in self.kv_caches:
            h.update(c[:, block_id].detach().to("cpu").contiguous().numpy().tobytes())
        return h.hexdigest()

    def block_array(self, block_id: int, layer: int = 0, kv: int = 0, head: int = 0):
        """[block_size, head_dim] numpy array of one head's K (kv=0) or V (kv=1), for drawing."""
        return self.kv_caches[layer][kv, block_id, :, head, :].detach().to(
            "cpu", torch.float32).numpy()
