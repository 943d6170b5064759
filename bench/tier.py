"""Benchmark ``tier``: the external tier's store and load (blockviz.kv.offload.CPUKVPool) against a
plain tensor copy of the same bytes.

4,096 tokens (256 blocks of 16, scattered over a 16,384-block paged store) are stored into 256
chunks of a CPU pool (``store_blocks``) and loaded back into other scattered blocks
(``load_blocks``), every layer, K and V. The chunk ids are laid out three ways: ``fresh``, one run
(as a fresh tier hands them out); ``evicted``, the ids vLLM's CPU manager
(blockviz.sim.offload.manager.CPUOffloadingManager) hands out after requests of 8 to 128 blocks have
turned the tier over four times (the runs the evicted requests freed); and ``random``, uniformly
scattered ids, which the tier does not hand out for one request — the worst case, a gather and a
scatter, reported beside the budget, not in it. Each is timed next
to one plain ``copy_`` of exactly the same bytes, from the store's device to the pool's side (the
CPU; pinned memory on CUDA) for a store and back for a load, the samples of the two interleaved;
a ratio is the median of the paired ratios. The device is CUDA when there is one, else the CPU.
Budget (issue 16): at most 3x a plain copy, for the layouts the tier hands out.
"""
from __future__ import annotations

import itertools
import random

from .tensors import SHAPES, _clock, _paired

NAME = "tier"
BUDGET_RATIO = 3.0
NUM_BLOCKS, BLOCK_SIZE, NUM_TOKENS, NUM_CHUNKS = 16_384, 16, 4_096, 1_024
LAYOUTS = ("fresh", "evicted", "random")
IN_BUDGET = ("fresh", "evicted")


def _evicted_chunk_ids(n: int, seed: int = 0) -> list[int]:
    """The chunk ids the tier's manager gives an n-block request once requests of 8 to 128 blocks
    have filled the tier and turned it over about four times (stored, completed, finished)."""
    from blockviz.sim.offload.base import ReqContext
    from blockviz.sim.offload.manager import CPUOffloadingManager

    mgr = CPUOffloadingManager(NUM_CHUNKS)
    rng = random.Random(seed)
    fresh_key = itertools.count()

    def store(req_id: str, num_blocks: int) -> list[int]:
        keys = [next(fresh_key).to_bytes(8, "little") for _ in range(num_blocks)]
        ctx = ReqContext(req_id, positions={k: i for i, k in enumerate(keys)})
        mgr.on_new_request(ctx)
        stored, ids, _ = mgr.prepare_store(keys, ctx)
        mgr.complete_store(stored, ctx)
        mgr.on_request_finished(ctx)
        return ids

    for i in range(4 * NUM_CHUNKS // 64):
        store(f"r{i}", rng.randint(8, 128))
    return store("measured", n)


def _runs(ids: list[int]) -> int:
    s = sorted(ids)
    return 1 + sum(b != a + 1 for a, b in zip(s, s[1:]))


def _measure(shape: tuple, chunk_layout: str, num_blocks: int, device, now, repeat: int,
             min_sample: float) -> dict:
    import torch

    from blockviz.kv.offload import CPUKVPool
    from blockviz.kv.runtime import DTYPES
    from blockviz.kv.store import PagedKVStore

    layers, heads, dim, dtype_name = shape
    dtype = DTYPES[dtype_name]
    store = PagedKVStore(num_blocks + 1, BLOCK_SIZE, layers, heads, dim, dtype, device)
    gen = torch.Generator().manual_seed(0)
    for c in store.kv_caches:
        c.copy_(torch.randn(c.shape, generator=gen).to(dtype))
    pool = CPUKVPool(NUM_CHUNKS, store)
    n = NUM_TOKENS // BLOCK_SIZE
    rng = random.Random(0)
    src_blocks = rng.sample(range(1, num_blocks + 1), n)
    dst_blocks = rng.sample([b for b in range(1, num_blocks + 1) if b not in set(src_blocks)], n)
    chunks = {"fresh": lambda: list(range(n)), "evicted": lambda: _evicted_chunk_ids(n),
              "random": lambda: rng.sample(range(NUM_CHUNKS), n)}[chunk_layout]()
    nbytes = n * store.bytes_per_block
    # the plain copy: the same bytes, one contiguous tensor on each side, both written before
    # they are timed (a never-written CPU buffer reads as the kernel's one shared zero page,
    # always in cache: a copy out of it ran twice as fast as out of real memory)
    on_device = torch.randn(nbytes // store.kv_caches[0].element_size(), generator=gen).to(
        device=device, dtype=dtype)
    on_host = torch.zeros_like(on_device, device="cpu")
    if device.type == "cuda":
        on_host = on_host.pin_memory()

    def store_job():
        pool.store_blocks(src_blocks, chunks)

    def load_job():
        pool.load_blocks(chunks, dst_blocks)

    def copy_out():
        on_host.copy_(on_device)

    def copy_in():
        on_device.copy_(on_host)

    store_job()
    load_job()
    assert torch.equal(store.read_blocks(dst_blocks), store.read_blocks(src_blocks)), \
        "a stored and loaded block is the original, bit for bit"
    times, ratios = {}, {}
    for name, fn, base, base_fn in (("store", store_job, "plain_copy_out", copy_out),
                                    ("load", load_job, "plain_copy_in", copy_in)):
        times[name], times[base], ratios[name] = _paired(fn, base_fn, now, repeat, min_sample)
    return {"layers": layers, "kv_heads": heads, "head_dim": dim, "dtype": dtype_name,
            "bytes_moved": nbytes, "chunk_runs": _runs(chunks), "median_s": times,
            "store_ratio": ratios["store"], "load_ratio": ratios["load"]}


def run(repeat: int, quick: bool, say) -> dict:
    import torch

    from blockviz.kv.store import resolve_device

    device = resolve_device("auto")
    if device.type == "cpu":
        torch.set_num_threads(1)   # as in `tensors`: both sides single-threaded
    now = _clock(device)
    num_blocks = 1_024 if quick else NUM_BLOCKS
    cases = []
    for label, shape in SHAPES.items():
        for layout in LAYOUTS:
            case = {"shape": label, "chunks": layout} | _measure(
                shape, layout, num_blocks, device, now, repeat, 0.005 if quick else 0.05)
            cases.append(case)
            say(f"  {label}, {layout} chunks: store {case['store_ratio']:.2f}x, "
                f"load {case['load_ratio']:.2f}x")
    def worst(layouts):
        return max(max(c["store_ratio"], c["load_ratio"]) for c in cases if c["chunks"] in layouts)
    in_budget, random_case = worst(IN_BUDGET), worst(("random",))
    return {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "num_blocks": num_blocks, "block_size": BLOCK_SIZE, "num_tokens": NUM_TOKENS,
            "cases": cases,
            "worst_random_ratio": random_case,
            "budgets": [{"name": "tier: store or load / plain copy, worst (fresh and evicted chunks)",
                         "value": in_budget, "limit": BUDGET_RATIO, "unit": "x",
                         "met": in_budget <= BUDGET_RATIO}]}


def render(result: dict) -> str:
    from .timing import fmt_s, table
    rows = []
    for c in result["cases"]:
        m = c["median_s"]
        gb = c["bytes_moved"] / 1e9
        rows.append([c["shape"], f"{c['chunks']} ({c['chunk_runs']} runs)",
                     f"{c['bytes_moved'] / 2**20:.1f} MB",
                     fmt_s(m["store"]), fmt_s(m["plain_copy_out"]), f"{c['store_ratio']:.2f}x",
                     fmt_s(m["load"]), fmt_s(m["plain_copy_in"]), f"{c['load_ratio']:.2f}x",
                     f"{gb / m['store']:.1f} / {gb / m['load']:.1f} GB/s"])
    return (f"  device {result['device']}, torch {result['torch']}, {result['threads']} threads, "
            f"{result['num_tokens']:,} tokens ({result['num_tokens'] // result['block_size']} "
            f"blocks of {result['block_size']}) to and from a CPU pool; random chunk ids (worst "
            f"case, outside the budget): {result['worst_random_ratio']:.2f}x at worst\n"
            + table(["shape", "CPU chunks", "K+V bytes", "store", "plain copy", "ratio", "load", "plain copy",
                     "ratio", "store/load"], rows))
