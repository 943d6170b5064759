"""Benchmark ``tensors``: the paged KV store against a plain contiguous copy of the same bytes.

A prefill of 4,096 tokens into a 16,384-block store through a block table of 256 scattered blocks,
as the model does it: ``PagedKVStore.write_range`` per layer (whole blocks at once, partial ones by
slot), and reading them back with ``PagedKVStore.gather_prefix`` per layer. Each is timed next to a
contiguous ``copy_`` (write) or ``clone`` (read: gather also returns new tensors) of exactly the same
bytes on the same device, the samples of the two interleaved; a ratio is the median of the
paired ratios. The per-slot path (``slot_mapping`` + ``write``/``gather``) is timed too, for
comparison.
The device is CUDA when there is one, else the CPU. Budget: paged within 3x of contiguous.
"""
from __future__ import annotations

import random
import time

from .timing import median

NAME = "tensors"
BUDGET_RATIO = 3.0
NUM_BLOCKS, BLOCK_SIZE, NUM_TOKENS = 16_384, 16, 4_096
# The app's default tiny model, and a wider one (fp16, 512 MB store).
SHAPES = {
    "tiny (2 layers, 2x8, fp32)": (2, 2, 8, "float32"),
    "wider (2 layers, 4x64, fp16)": (2, 4, 64, "float16"),
}


def _clock(device):
    import torch
    if device.type == "cuda":
        def now() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return now
    return time.perf_counter


def _calls_per_sample(fn, now, min_sample_s: float) -> int:
    fn()  # warm up (allocator, kernels)
    n = 1
    while True:
        start = now()
        for _ in range(n):
            fn()
        if now() - start >= min_sample_s or n >= 1 << 16:
            return n
        n *= 2


def _sample(fn, n: int, now) -> float:
    start = now()
    for _ in range(n):
        fn()
    return (now() - start) / n


def _paired(fa, fb, now, repeat: int, min_sample_s: float) -> tuple[float, float, float]:
    """Median seconds per call of ``fa`` and of ``fb``, and the median of their ratios, with the
    samples interleaved (a, b, a, b, ...) so that a slow spell of a shared machine hits both."""
    na, nb = (_calls_per_sample(f, now, min_sample_s) for f in (fa, fb))
    ta, tb, ratios = [], [], []
    for _ in range(repeat):
        a, b = _sample(fa, na, now), _sample(fb, nb, now)
        ta.append(a)
        tb.append(b)
        ratios.append(a / b)
    return median(ta), median(tb), median(ratios)


def _measure(shape: tuple, num_blocks: int, device, now, repeat: int, min_sample: float) -> dict:
    import torch

    from blockviz.kv.runtime import DTYPES
    from blockviz.kv.store import PagedKVStore, slot_mapping

    layers, heads, dim, dtype_name = shape
    dtype = DTYPES[dtype_name]
    store = PagedKVStore(num_blocks + 1, BLOCK_SIZE, layers, heads, dim, dtype, device)
    gen = torch.Generator().manual_seed(0)
    k = torch.randn(layers, NUM_TOKENS, heads, dim, generator=gen).to(device, dtype)  # [L,T,H,D]
    v = torch.randn(layers, NUM_TOKENS, heads, dim, generator=gen).to(device, dtype)
    table_ids = random.Random(0).sample(range(1, num_blocks + 1), NUM_TOKENS // BLOCK_SIZE)
    block_table = torch.tensor(table_ids, dtype=torch.long, device=device)           # [B]
    positions = torch.arange(NUM_TOKENS, device=device)                              # [T]
    dst_k, dst_v = torch.empty_like(k), torch.empty_like(v)
    slots = slot_mapping(block_table, positions, BLOCK_SIZE)                         # [T]

    def paged_write():
        for layer in range(layers):
            store.write_range(layer, block_table, 0, k[layer], v[layer])

    def slot_write():
        s = slot_mapping(block_table, positions, BLOCK_SIZE)
        for layer in range(layers):
            store.write(layer, s, k[layer], v[layer])

    def slots_only():
        slot_mapping(block_table, positions, BLOCK_SIZE)

    def contiguous_write():
        for layer in range(layers):
            dst_k[layer].copy_(k[layer])
            dst_v[layer].copy_(v[layer])

    def paged_gather():
        for layer in range(layers):
            store.gather_prefix(layer, block_table, NUM_TOKENS)

    def slot_gather():
        for layer in range(layers):
            store.gather(layer, slots)

    def contiguous_read():
        for layer in range(layers):
            dst_k[layer].clone()
            dst_v[layer].clone()

    paged_write()
    # The store really holds what was written, where the slots say, and reads it back.
    got_k, got_v = store.gather(layers - 1, slots)
    assert torch.equal(got_k, k[-1]) and torch.equal(got_v, v[-1])
    got_k, got_v = store.gather_prefix(layers - 1, block_table, NUM_TOKENS)
    assert torch.equal(got_k, k[-1]) and torch.equal(got_v, v[-1])
    times, ratios = {}, {}
    for name, fn, base, base_fn in (
            ("paged_write", paged_write, "contiguous_write", contiguous_write),
            ("paged_gather", paged_gather, "contiguous_read", contiguous_read),
            ("slot_write", slot_write, "contiguous_write", contiguous_write),
            ("slot_gather", slot_gather, "contiguous_read", contiguous_read)):
        times[name], t_base, ratios[name] = _paired(fn, base_fn, now, repeat, min_sample)
        times.setdefault(base, t_base)
    times["slot_mapping"] = median([_sample(slots_only, 64, now) for _ in range(repeat)])
    return {"layers": layers, "kv_heads": heads, "head_dim": dim, "dtype": dtype_name,
            "bytes_moved": 2 * k.numel() * k.element_size(),
            "store_mb": store.bytes_per_block * (num_blocks + 1) / 2**20,
            "median_s": times,
            "write_ratio": ratios["paged_write"], "gather_ratio": ratios["paged_gather"],
            "slot_write_ratio": ratios["slot_write"], "slot_gather_ratio": ratios["slot_gather"]}


def run(repeat: int, quick: bool, say) -> dict:
    import torch

    from blockviz.kv.store import resolve_device

    device = resolve_device("auto")
    if device.type == "cpu":
        # Both sides single-threaded: on a small shared CPU, intra-op threads mostly add noise.
        torch.set_num_threads(1)
    now = _clock(device)
    num_blocks = 1_024 if quick else NUM_BLOCKS
    cases = []
    for label, shape in SHAPES.items():
        case = {"shape": label} | _measure(shape, num_blocks, device, now, repeat,
                                           0.005 if quick else 0.05)
        cases.append(case)
        say(f"  {label}: write {case['write_ratio']:.2f}x, gather {case['gather_ratio']:.2f}x")
    worst = max(max(c["write_ratio"], c["gather_ratio"]) for c in cases)
    return {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "num_blocks": num_blocks, "block_size": BLOCK_SIZE, "num_tokens": NUM_TOKENS,
            "cases": cases,
            "budgets": [{"name": "tensors: paged / contiguous, worst", "value": worst,
                         "limit": BUDGET_RATIO, "unit": "x", "met": worst <= BUDGET_RATIO}]}


def render(result: dict) -> str:
    from .timing import fmt_s, table
    rows = []
    for c in result["cases"]:
        m = c["median_s"]
        gbs = c["bytes_moved"] / 1e9
        rows.append([c["shape"], f"{c['bytes_moved'] / 2**20:.1f} MB",
                     fmt_s(m["paged_write"]), fmt_s(m["contiguous_write"]),
                     f"{c['write_ratio']:.2f}x",
                     fmt_s(m["paged_gather"]), fmt_s(m["contiguous_read"]),
                     f"{c['gather_ratio']:.2f}x",
                     f"{c['slot_write_ratio']:.1f}x / {c['slot_gather_ratio']:.1f}x",
                     f"{gbs / m['paged_write']:.1f} / {gbs / m['paged_gather']:.1f} GB/s"])
    return (f"  device {result['device']}, torch {result['torch']}, {result['threads']} threads, "
            f"{result['num_tokens']:,} tokens into {result['num_blocks']:,} blocks of "
            f"{result['block_size']}\n"
            + table(["shape", "K+V bytes", "paged write", "contiguous copy", "ratio",
                     "paged gather", "contiguous clone", "ratio", "per-slot path (w/g)",
                     "paged write/gather"], rows))
