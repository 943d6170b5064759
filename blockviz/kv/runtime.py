"""KVRuntime — the engine's "GPU worker": the paged store plus the tiny model.

``execute`` is the forward pass of one engine step: for every scheduled request it writes the K/V
of the scheduled tokens into their slots, attends through the request's block table and returns
the argmax next token. For an admission with a cache hit it also recomputes the whole sequence
from scratch and reports how far the two last-layer attention outputs differ (a ``Verify`` op record).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from blockviz.core.ops import Verify
from blockviz.kv.model import TinyModel, forward_bytes
from blockviz.kv.store import PagedKVStore, resolve_device

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True, eq=False)
class PayloadSummary:
    """What the UI shows of one block's K/V at one step: a digest of everything it holds and a
    float32 copy small enough to draw, [num_layers, 2 (K, V), block_size, num_kv_heads, head_dim]."""
    fingerprint: str
    data: object  # numpy.ndarray
    device: str
    dtype: str

    def __eq__(self, other) -> bool:
        return isinstance(other, PayloadSummary) and self.fingerprint == other.fingerprint


def tolerance(device: str) -> float:
    """CPU float32 with deterministic ops: bit for bit. Elsewhere: a stated tolerance."""
    return 0.0 if device == "cpu" else 1e-5


class KVRuntime:
    def __init__(self, num_gpu_blocks: int, block_size: int, *, num_layers: int = 2,
                 num_kv_heads: int = 2, head_dim: int = 8, dtype: str = "float32",
                 device: str = "auto", seed: int = 0, attention: tuple | None = None) -> None:
        self.device = resolve_device(device)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
        self.block_size = block_size
        self.store = PagedKVStore(num_gpu_blocks, block_size, num_layers, num_kv_heads,
                                  head_dim, DTYPES[dtype], self.device)
        self.model = TinyModel(num_layers, num_kv_heads, head_dim, seed, self.device, attention)
        # hybrid models: layer i reads KV-cache group i's tables; else every layer group 0's
        self.layer_groups = (tuple(range(num_layers)) if attention is not None
                             else (0,) * num_layers)
        self._candidates: dict[tuple[int, ...], torch.Tensor] = {}
        # The run's budget (sim.budget.Meter) or None: told of every forward pass before it runs
        # (``need``: its tensors, ``compute``: a hit check's recomputed tokens), ticked inside.
        self.guard = None

    def set_guard(self, guard) -> None:
        self.guard = guard
        self.model.tick = None if guard is None else guard.tick

    def _pass_bytes(self, num_new: int, num_keys: int, num_candidates: int = 0) -> int:
        m = self.model
        return forward_bytes(num_new, num_keys, m.num_heads, m.head_dim,
                             self.store.kv_caches[0].element_size(), num_candidates)

    @property
    def device_name(self) -> str:
        return self.device.type

    def __deepcopy__(self, memo: dict) -> KVRuntime:
        # A checkpoint copies the payloads; the weights never change and are shared.
        new = copy.copy(self)
        memo[id(self)] = new
        new.store = copy.deepcopy(self.store, memo)
        new.guard = None
        return new

    def _candidate_tensor(self, candidates: tuple[int, ...]) -> torch.Tensor:
        t = self._candidates.get(candidates)
        if t is None:
            t = self._candidates[candidates] = torch.as_tensor(candidates, dtype=torch.long,
                                                               device=self.device)
        return t

    def execute(self, scheduled, tables, candidates: dict[str, tuple[int, ...]],
                known_tokens: dict[str, list[int]]) -> tuple[dict[str, int], list[Verify]]:
        """One forward pass over every scheduled request (positions ``start .. start + n`` of
        ``known_tokens[request id]``): request id -> argmax token among its ``candidates`` for
        every request that samples, and a Verify record for every admission that reused cached K/V.
        ``tables``: per KV-cache group, request id -> block table."""
        out: dict[str, int] = {}
        checks: list[Verify] = []
        with torch.no_grad():
            for item in scheduled:
                rid = item.request.request_id
                end = item.start + item.num_new_tokens
                per_group = [torch.as_tensor([b.block_id for b in group[rid]],
                                             dtype=torch.long, device=self.device)
                             for group in tables]
                table = (per_group[0] if len(per_group) == 1
                         else [per_group[g] for g in self.layer_groups])
                if self.guard is not None:
                    cands = len(candidates[rid]) if item.samples else 0
                    self.guard.need(self._pass_bytes(item.num_new_tokens, end, cands),
                                    "this forward pass")
                tokens = torch.as_tensor(known_tokens[rid][:end], dtype=torch.long,
                                         device=self.device)
                hidden, attn = self.model.forward_paged(self.store, tokens[item.start:],
                                                        item.start, table)
                if item.samples:
                    cand = self._candidate_tensor(candidates[rid])
                    logits = self.model.logits(hidden, cand)
                    out[rid] = int(cand[int(logits.argmax())])
                # an admission that starts past token 0 reuses K/V: its prefix-cache hit, the
                # tier's (a load done before this step included), or both
                if item.admitted and item.start > 0:
                    checks.append(self._check(rid, tokens, item, attn))
        return out, checks

    def _check(self, rid: str, tokens: torch.Tensor, item, attn: torch.Tensor) -> Verify:
        if self.guard is not None:
            n = tokens.shape[0]
            self.guard.compute(n)
            self.guard.need(self._pass_bytes(n, n), "this forward pass")
        dense = self.model.forward_dense(tokens, self.store.dtype, item.start)
        # Compare as the cache dtype's float32 view of the results.
        diff = (attn.to(torch.float32) - dense.to(torch.float32)).abs().max().item()
        return Verify(rid, item.start, item.num_new_tokens, float(diff), self.device.type)

    def summary(self, block_id: int) -> PayloadSummary:
        data = torch.stack([c[:, block_id] for c in self.store.kv_caches])  # [L, 2, bs, H, D]
        return PayloadSummary(self.store.fingerprint(block_id),
                              data.detach().to("cpu", torch.float32).numpy(),
                              self.device.type, str(self.store.dtype).replace("torch.", ""))
