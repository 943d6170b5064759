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
# Attention goes in chunks of query rows that start at a position that is a multiple of
# ATTN_ROWS and span a multiple of ATTN_ROWS rows (a partial chunk is padded). A matrix product's
# rounding of a row depends on where the row falls among the small groups of rows the CPU's GEMM
# kernel computes together (and on other code for a remainder group); with every call aligned and
# whole, a position's arithmetic is the same in every pass that computes it — the paged pass of a
# cache hit and the dense recomputation included — whatever the pass's first position, length or
# chunk size. (Checked on this project's CPU, MKL with AVX2, whose groups are 4 rows: chunks of
# 8 to 512 rows give identical rows; tests/kv.)
ATTN_ROWS = 8
# A chunk's scores hold at most this many elements (8 MiB in float64), or ATTN_ROWS rows of one
# head when even that is more: the heads are then split into groups.
ATTN_CHUNK_ELEMENTS = 1 << 20


def attention_heads(num_keys: int, num_heads: int) -> int:
    """How many heads one chunk of attention takes (a function of the key count alone, so that
    every pass over the same keys splits alike)."""
    return max(1, min(num_heads, ATTN_CHUNK_ELEMENTS // (ATTN_ROWS * max(1, num_keys))))


def attention_rows(num_keys: int, heads: int) -> int:
    """Query rows per chunk: a multiple of ATTN_ROWS within ATTN_CHUNK_ELEMENTS, at least one."""
    fit = ATTN_CHUNK_ELEMENTS // (heads * max(1, num_keys))
    return max(ATTN_ROWS, fit // ATTN_ROWS * ATTN_ROWS)


def weight_bytes(num_layers: int, num_kv_heads: int, head_dim: int) -> int:
    """The tiny model's weights (float64): embedding, 4 matrices per layer, the output head."""
    d = num_kv_heads * head_dim
    return (VOCAB_SIZE * d + num_layers * 4 * d * d + d * d + d) * 8


def forward_bytes(num_new: int, num_keys: int, num_heads: int, head_dim: int,
                  cache_itemsize: int, num_candidates: int = 0) -> int:
    """An upper estimate of the tensors one forward pass holds at once: the new tokens'
    activations ([T, d] in float64: x, q, k, v, the attention output, the residual and its
    product, the position encoding), every key and value gathered from the cache and widened to
    float64, one chunk of scores (three [H, c, S] tensors and the mask), and the logits'
    candidate embeddings. Linear in ``num_new`` and ``num_keys``."""
    d = num_heads * head_dim
    heads = attention_heads(num_keys, num_heads)
    rows = min(attention_rows(num_keys, heads), -(-num_new // ATTN_ROWS) * ATTN_ROWS + ATTN_ROWS)
    chunk = rows * heads * num_keys
    return (8 * num_new * d * 8 + num_keys * d * 2 * (cache_itemsize + 8)
            + chunk * 3 * 8 + rows * num_keys + num_keys * 8 + num_candidates * d * 8)


def window_start(kind: str, size: int | None, pos: torch.Tensor) -> torch.Tensor | None:
    """The first key position each query position attends to, for a local attention kind (None:
    every earlier position): a sliding window of W tokens starts at ``p - W + 1``, a chunk of C
    tokens at ``floor(p / C) * C`` (vLLM's SlidingWindowSpec, ChunkedLocalAttentionSpec)."""
    if kind == "sliding_window":
        return pos - (size - 1)
    if kind == "chunked_local_attention":
        return torch.div(pos, size, rounding_mode="floor") * size
    return None


class TinyModel:
    def __init__(self, num_layers: int, num_kv_heads: int, head_dim: int, seed: int,
                 device: torch.device, attention: tuple | None = None) -> None:
        """``attention``: per layer, (kind, W or C) — hybrid models give layer i the attention
        of KV-cache group i; None: full attention in every layer."""
        self.num_layers, self.num_heads, self.head_dim = num_layers, num_kv_heads, head_dim
        self.attention = attention or (("full_attention", None),) * num_layers
        self.d_model = d = num_kv_heads * head_dim
        self.device = device
        self.tick = None     # called between chunks of work (the run's budget; may raise)
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

    def embed(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Token embeddings plus sinusoidal position vectors: [T] -> [T, d]."""
        ang = pos.to(COMPUTE_DTYPE)[:, None] * self._inv_freq[None, :]
        enc = torch.stack([ang.sin(), ang.cos()], dim=-1).flatten(1)
        return self.embedding[tokens] + enc[:, : self.d_model]                 # [T, d]

    def qkv(self, layer: int, x: torch.Tensor):
        wq, wk, wv, _ = self.layers[layer]
        T, H, D = x.shape[0], self.num_heads, self.head_dim
        return ((x @ wq).view(T, H, D), (x @ wk).view(T, H, D), (x @ wv).view(T, H, D))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               q_pos: torch.Tensor, layer: int = 0) -> torch.Tensor:
        """Causal attention of queries at ``q_pos`` over keys at positions 0..len(k)-1.
        q: [T, H, D], k, v: [S, H, D] -> [T, H*D].

        Queries go in chunks of rows (and, over many keys, heads in groups:
        :func:`attention_heads`), each chunk over every key, so the scores never hold more than
        ``ATTN_CHUNK_ELEMENTS`` (or [1, ATTN_ROWS, S]): memory is linear in the sequence, where
        [H, T, S] at once is quadratic (a 12,000-token prompt asked for gigabytes). Every chunk
        is aligned to ATTN_ROWS and whole, so a position's result does not depend on where the
        pass started: a cache hit reproduces recomputation bit for bit. A local layer (a sliding
        window, a chunk) masks the keys before its window too: what those slots hold (the null
        block, a reused block) weighs exactly 0.
        ``tick`` (the run's budget) is called between chunks."""
        T, H, D = q.shape
        S = k.shape[0]
        kd, vd = k.to(COMPUTE_DTYPE), v.to(COMPUTE_DTYPE)
        scale = math.sqrt(self.head_dim)
        out = torch.empty(T, H, D, dtype=COMPUTE_DTYPE, device=q.device)
        keys = torch.arange(S, device=q.device)
        A = ATTN_ROWS
        heads = attention_heads(S, H)
        R = attention_rows(S, heads)
        first = int(q_pos[0]) if T else 0          # q_pos is first, first + 1, ..., first + T - 1
        end = first + T
        for c0 in range(first - first % A, end, R):
            c1 = min(c0 + R, end + (-end) % A)      # whole groups of A rows: [c0, c1)
            lo, hi = max(c0, first), min(c1, end)   # the positions of q in it
            if (lo, hi) == (c0, c1):
                qc = q[lo - first:hi - first]
            else:                                   # a partial chunk: padded with zero rows
                qc = q.new_zeros(c1 - c0, H, D)
                qc[lo - c0:hi - c0] = q[lo - first:hi - first]
            rows = torch.arange(c0, c1, device=q.device)
            future = keys[None, :] > rows[:, None]                                   # [c, S]
            kind, size = self.attention[layer]
            first_key = window_start(kind, size, rows)
            if first_key is not None:
                future |= keys[None, :] < first_key[:, None]
            for h0 in range(0, H, heads):
                h1 = min(H, h0 + heads)
                if self.tick is not None:
                    self.tick()
                qh, kh, vh = ((qc, kd, vd) if heads == H else
                              (qc[:, h0:h1], kd[:, h0:h1], vd[:, h0:h1]))
                scores = torch.einsum("thd,shd->hts", qh, kh) / scale                # [h, c, S]
                probs = scores.masked_fill(future[None], float("-inf")).softmax(dim=-1)
                got = torch.einsum("hts,shd->thd", probs, vh)                         # [c, h, D]
                out[lo - first:hi - first, h0:h1] = got[lo - c0:hi - c0]
        return out.view(T, -1)                                                      # [T, H*D]

    def residual(self, layer: int, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        return x + attn @ self.layers[layer][3]

    def logits(self, h: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        # An untied output head: tied embeddings make a toy model echo its last token.
        return (h @ self.unembed) @ self.embedding[candidates].T                # [..., C]

    # -- the two paths that must agree ---------------------------------------------------
    def forward_paged(self, store: PagedKVStore, tokens: torch.Tensor, start: int,
                      block_table) -> tuple[torch.Tensor, torch.Tensor]:
        """Compute tokens at positions start.. (K/V of 0..start-1 are in the cache): write their
        K/V into their slots, attend through the block table (one tensor, or one per layer: a
        hybrid model's layer reads its group's table). Returns (last hidden [d], last-layer
        attention output of the new tokens [T, H*D])."""
        T = tokens.shape[0]
        pos = torch.arange(start, start + T, device=self.device)
        x = self.embed(tokens, pos)
        attn = x
        per_layer = isinstance(block_table, list | tuple)
        for layer in range(self.num_layers):
            table = block_table[layer] if per_layer else block_table
            q, k, v = self.qkv(layer, x)
            store.write_range(layer, table, start, k, v)                         # paged write
            k_all, v_all = store.gather_prefix(layer, table, start + T)           # paged read
            attn = self.attend(q, k_all, v_all, pos, layer)
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
            attn = self.attend(q, k, v, pos, layer)
            x = self.residual(layer, x, attn)
        return attn[first_new:]

