"""TinyModel — a seeded toy transformer whose attention reads K/V through block tables.

Enough of a model to make the KV payloads real: token embedding + sinusoidal positions, then
``num_layers`` attention layers with a residual. Layer 0's K/V depend only on the token and its
position; from layer 1 on they depend on the whole prefix (the residual carries attention over
every earlier token), which is exactly why a block's hash chains in its parent's hash.

Math runs in float64 (``COMPUTE_DTYPE``) and K/V are stored in the cache dtype; both the cached
path and a from-scratch recomputation read K/V back from that dtype, so on the CPU a cache hit
reproduces recomputation bit for bit.
"""
from __future__ import annotations

import math

import torch

from blockviz.kv.store import PagedKVStore

COMPUTE_DTYPE = torch.float64
VOCAB_SIZE = 65_536


class TinyModel:
    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, seed: int,
                 device: torch.device) -> None:
        self.num_layers, self.num_heads, self.head_dim = num_layers, num_kv_heads, head_dim
        self.d_model = d = num_kv_heads * head_dim
        self.device = device
        g = torch.Generator().manual_seed(seed)

        def rand(*shape: int, scale: float) -> torch.Tensor:
            return (torch.randn(*shape, generator=g, dtype=torch.float32) * scale).to(
                device, COMPUTE_DTYPE)

        self.embedding = rand(VOCAB_SIZE, d, scale=1.0)                        # [V, d]
        self.layers = [tuple(rand(d, d, scale=1 / math.sqrt(d)) for _ in range(4))
                       for _ in range(num_layers)]                             # Wq, Wk, Wv, Wo
        self.unembed = rand(d, d, scale=1 / math.sqrt(d))                      # [d, d]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=COMPUTE_DTYPE) / max(d, 1)))
        self._inv_freq = inv.to(device)                                        # [ceil(d/2)]

    def positions(self, pos: torch.Tensor) -> torch.Tensor:
        """Sinusoidal position vectors: [T] -> [T, d]."""
        ang = pos.to(COMPUTE_DTYPE)[:, None] * self._inv_freq[None, :]
        enc = torch.stack([ang.sin(), ang.cos()], dim=-1).flatten(1)
        return enc[:, : self.d_model]

    def embed(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        return self.embedding[tokens] + self.positions(pos)                    # [T, d]

    def qkv(self, layer: int, x: torch.Tensor):
        wq, wk, wv, _ = self.layers[layer]
        T, H, D = x.shape[0], self.num_heads, self.head_dim
        return ((x @ wq).view(T, H, D), (x @ wk).view(T, H, D), (x @ wv).view(T, H, D))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               q_pos: torch.Tensor) -> torch.Tensor:
        """Causal attention of queries at ``q_pos`` over keys at positions 0..len(k)-1.
        q: [T, H, D], k, v: [S, H, D] -> [T, H*D]."""
        S = k.shape[0]
        scores = torch.einsum("thd,shd->hts", q, k.to(COMPUTE_DTYPE)) / math.sqrt(self.head_dim)
        future = torch.arange(S, device=q.device)[None, :] > q_pos[:, None]    # [T, S]
        scores = scores.masked_fill(future[None], float("-inf"))
        probs = scores.softmax(dim=-1)                                          # [H, T, S]
        out = torch.einsum("hts,shd->thd", probs, v.to(COMPUTE_DTYPE))
        return out.reshape(q.shape[0], -1)                                      # [T, H*D]

    def residual(self, layer: int, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        return x + attn @ self.layers[layer][3]

    def logits(self, h: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        # An untied output head: tied embeddings make a toy model echo its last token.
        return (h @ self.unembed) @ self.embedding[candidates].T                # [..., C]

    # -- the two paths that must agree ---------------------------------------------------
    def forward_paged(self, store: PagedKVStore, tokens: torch.Tensor, start: int,
                      block_table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Compute tokens at positions start.. (K/V of 0..start-1 are in the cache): write their
        K/V into their slots, attend through the block table. Returns (last hidden [d],
        last-layer attention output of the new tokens [T, H*D])."""
        T = tokens.shape[0]
        pos = torch.arange(start, start + T, device=self.device)
        x = self.embed(tokens, pos)
        attn = x
        for layer in range(self.num_layers):
            q, k, v = self.qkv(layer, x)
            store.write_range(layer, block_table, start, k, v)                   # paged write
            k_all, v_all = store.gather_prefix(layer, block_table, start + T)     # paged read
            attn = self.attend(q, k_all, v_all, pos)
            x = self.residual(layer, x, attn)
        return x[-1], attn

    def forward_dense(self, tokens: torch.Tensor, store_dtype: torch.dtype,
                      first_new: int) -> torch.Tensor:
        """From-scratch recomputation of the whole sequence (no cache): the last-layer attention
        output of positions first_new.. ([T_new, H*D]). K/V round-trip through the cache dtype
        exactly as a fresh prefill's writes and reads would."""
        N = tokens.shape[0]
        pos = torch.arange(N, device=self.device)
        x = self.embed(tokens, pos)
        attn = x
        for layer in range(self.num_layers):
            q, k, v = self.qkv(layer, x)
            k, v = k.to(store_dtype), v.to(store_dtype)
            attn = self.attend(q, k, v, pos)
            x = self.residual(layer, x, attn)
        return attn[first_new:]

