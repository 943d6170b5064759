"""Attention in chunks of queries: equal to the unchunked computation bit for bit, memory linear in
the sequence (the largest tensor any op makes, read from the shapes torch produces), and every
built-in lesson's cache hits still reproduce recomputation with tiny chunks."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from blockviz.kv import PagedKVStore, TinyModel
from blockviz.kv import model as M
from blockviz.kv.model import COMPUTE_DTYPE, attention_heads, forward_bytes

ROOT = Path(__file__).resolve().parents[2]


def unchunked(model: TinyModel, q, k, v, q_pos):
    """The attention as it was written before chunking: [H, T, S] scores at once."""
    S = k.shape[0]
    scores = torch.einsum("thd,shd->hts", q, k.to(COMPUTE_DTYPE)) / math.sqrt(model.head_dim)
    future = torch.arange(S)[None, :] > q_pos[:, None]
    probs = scores.masked_fill(future[None], float("-inf")).softmax(dim=-1)
    return torch.einsum("hts,shd->thd", probs, v.to(COMPUTE_DTYPE)).reshape(q.shape[0], -1)


class Largest(TorchDispatchMode):
    """The most elements of any tensor an op returns while active."""

    def __init__(self) -> None:
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.numel = max(self.numel, t.numel())
        return out


def qkv(n: int, start: int, heads: int = 2, dim: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n - start, heads, dim, generator=g, dtype=COMPUTE_DTYPE)
    k = torch.randn(n, heads, dim, generator=g).to(torch.float16)
    v = torch.randn(n, heads, dim, generator=g).to(torch.float16)
    return q, k, v, torch.arange(start, n)


@pytest.mark.parametrize("chunk_elements", [1, 50, 1000, 1 << 20])
@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 37, 130, 257, 1000])
def test_a_pass_from_any_position_equals_the_whole_sequence_bit_for_bit(monkeypatch, n,
                                                                         chunk_elements):
    """What a cache hit needs: the queries from position ``start`` on (the paged pass after a
    hit) get exactly the rows the whole sequence's pass (the dense recomputation) gets — for
    every start, heads split or not."""
    monkeypatch.setattr(M, "ATTN_CHUNK_ELEMENTS", chunk_elements)
    model = TinyModel(1, 2, 8, seed=0, device=torch.device("cpu"))
    q, k, v, pos = qkv(n, 0)
    dense = model.attend(q, k, v, pos)
    for start in sorted({0, 1, 3, n // 3, n // 2, n - 2, n - 1} & set(range(n))):
        assert torch.equal(model.attend(q[start:], k, v, pos[start:]), dense[start:]), start


@pytest.mark.parametrize("chunk_elements", [1, 50, 1 << 20])
@pytest.mark.parametrize("n, start", [(1, 0), (37, 0), (37, 36), (130, 17), (257, 100)])
def test_chunked_attention_equals_the_unchunked_result(monkeypatch, n, start, chunk_elements):
    """The same attention as [H, T, S] at once, to the last bits of float64 (a matrix product
    of another shape rounds differently)."""
    model = TinyModel(1, 2, 8, seed=0, device=torch.device("cpu"))
    q, k, v, pos = qkv(n, start)
    want = unchunked(model, q, k, v, pos)
    monkeypatch.setattr(M, "ATTN_CHUNK_ELEMENTS", chunk_elements)
    got = model.attend(q, k, v, pos)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert (got - want).abs().max().item() <= 1e-12


def test_attention_memory_is_linear_in_the_sequence(monkeypatch):
    """Unchunked, the scores are [H, n, n]; chunked, no op makes a tensor larger than a constant
    plus a multiple of n — doubling n at most doubles the largest tensor (which a quadratic
    [H, n, n] would quadruple)."""
    monkeypatch.setattr(M, "ATTN_CHUNK_ELEMENTS", 4096)
    model = TinyModel(1, 2, 8, seed=0, device=torch.device("cpu"))
    largest = {}
    for n in (512, 1024, 2048):
        q, k, v, pos = qkv(n, 0)
        with Largest() as seen:
            model.attend(q, k, v, pos)
        largest[n] = seen.numel
        assert seen.numel <= max(4096, M.ATTN_ROWS * n) + n * 16, (n, seen.numel)
    assert largest[2048] <= 2 * largest[1024] <= 4 * largest[512]
    with Largest() as seen:
        unchunked(model, *qkv(2048, 0))
    assert seen.numel == 2 * 2048 * 2048                 # what it was: quadratic


def test_a_whole_forward_pass_stays_within_its_estimate(monkeypatch):
    """The estimate the run's budget charges bounds what the pass really makes (the largest
    single tensor, read from the shapes), and is far below the [H, T, S] scores of old."""
    monkeypatch.setattr(M, "ATTN_CHUNK_ELEMENTS", 1 << 14)
    heads, dim = 2, 8
    model = TinyModel(2, heads, dim, seed=0, device=torch.device("cpu"))
    store = PagedKVStore(80, 16, 2, heads, dim)
    tokens = torch.randint(0, 1000, (1200,))
    table = torch.arange(1, 76)
    with Largest() as seen:
        model.forward_paged(store, tokens, 0, table)
    est = forward_bytes(1200, 1200, heads, dim, 4)
    assert seen.numel * 8 <= est
    assert est < heads * 1200 * 1200 * 8 // 4             # a quarter of the old scores alone


def test_heads_split_only_when_a_chunk_of_every_head_is_too_big():
    assert attention_heads(10, 2) == 2
    assert attention_heads(12_000, 2) == 2                              # 8 x 2 x 12,000 fits
    assert attention_heads(1_000_000, 16) == 1                         # [1, 8, S]: linear
    h = attention_heads(20_000, 16)
    assert h * M.ATTN_ROWS * 20_000 <= M.ATTN_CHUNK_ELEMENTS < (h + 1) * M.ATTN_ROWS * 20_000


def test_the_tick_is_called_between_chunks_and_may_stop_the_pass(monkeypatch):
    monkeypatch.setattr(M, "ATTN_CHUNK_ELEMENTS", 64)
    model = TinyModel(1, 2, 8, seed=0, device=torch.device("cpu"))
    calls = []

    class Enough(Exception):
        pass

    def tick():
        calls.append(1)
        if len(calls) == 3:
            raise Enough

    model.tick = tick
    with pytest.raises(Enough):
        model.attend(*qkv(64, 0))
    assert len(calls) == 3


SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_cache_hits_reproduce_recomputation_with_tiny_chunks(monkeypatch, path, run_file):
    """Chunk boundaries fall differently in the paged pass and the dense recomputation (one
    starts at the hit, the other at 0): hits must still equal recomputation bit for bit."""
    monkeypatch.setattr(M, "ATTN_CHUNK_ELEMENTS", 40)
    engine, tl = run_file(path)
    assert tl.error is None
    checks = [op for i in range(len(tl)) for op in tl.step_ops(i) if op.kind == "verify"]
    assert all(op.max_abs_diff == 0.0 for op in checks), path.stem
