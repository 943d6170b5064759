"""The CPU tier's K/V (blockviz.kv.offload.CPUKVPool): whole blocks move between the paged store
and the pool bit for bit, on the CPU and (where there is one) on CUDA through pinned memory; and a
block loaded from the tier holds exactly the K/V that recomputing it writes."""
from __future__ import annotations

import pytest
import torch

from blockviz.kv import PagedKVStore, tolerance
from blockviz.kv.offload import CPUKVPool
from blockviz.scenario import load_text
from blockviz.sim.engine import Engine

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_store_then_load_moves_whole_blocks_bit_for_bit(device, dtype):
    store = PagedKVStore(9, 4, 2, 2, 8, dtype=dtype, device=device)
    g = torch.Generator().manual_seed(0)
    for c in store.kv_caches:
        c.copy_(torch.randn(c.shape, generator=g).to(dtype))
    pool = CPUKVPool(6, store)
    assert pool.data.device.type == "cpu" and pool.pinned == (device == "cuda")
    before = store.read_blocks([3, 7, 1]).clone()
    pool.store_blocks([3, 7, 1], [5, 0, 2])          # chunk ids in any order
    assert torch.equal(pool.data[:, :, 5].view_as(before[:, :, 0]).cpu(), before[:, :, 0].cpu())
    untouched = store.read_blocks([2, 4, 5]).clone()
    pool.load_blocks([5, 0, 2], [2, 4, 5])
    assert torch.equal(store.read_blocks([2, 4, 5]), before), "loaded = stored, bit for bit"
    assert not torch.equal(untouched, before)
    assert torch.equal(store.read_blocks([3, 7, 1]), before), "the source blocks are unchanged"



@pytest.mark.parametrize("layout", ["one run", "runs, any order", "scattered past MAX_RUNS"])
def test_every_chunk_layout_moves_each_block_to_its_own_chunk(layout):
    """A job's chunk ids as the tier hands them out: one fresh run, the runs an eviction freed
    (in any order, a run even backwards), or scattered over more runs than the one-pass path
    takes. Every block lands in its own chunk and comes back into its own block; nothing else
    in the pool or the store changes."""
    import random

    from blockviz.kv.offload import MAX_RUNS

    n = 3 * MAX_RUNS
    store = PagedKVStore(2 * n + 1, 2, 2, 1, 4, dtype=torch.float32)
    g = torch.Generator().manual_seed(1)
    for c in store.kv_caches:
        c.copy_(torch.randn(c.shape, generator=g))
    rng = random.Random(layout)
    pool = CPUKVPool(4 * n, store)
    pool.data.copy_(torch.randn(pool.data.shape, generator=g))
    blocks = rng.sample(range(1, n + 1), n)
    if layout == "one run":
        chunks = list(range(5, 5 + n))
    elif layout == "runs, any order":         # rising runs, the runs in any order, one backwards
        runs = [list(range(start, start + n // 4)) for start in (3 * n, n, 2 * n)]
        chunks = runs[0] + runs[1] + runs[2] + list(range(n // 4 - 1 + 7, 7 - 1, -1))
        assert len(chunks) == n
    else:
        chunks = rng.sample(range(0, 4 * n, 2), n)     # no two consecutive: n runs
    pool_before = pool.data.clone()
    want = store.read_blocks(blocks).clone()              # [L, 2, n, block_size, H, D]
    pool.store_blocks(blocks, chunks)
    for i, chunk in enumerate(chunks):
        assert torch.equal(pool.data[:, :, chunk], want[:, :, i].flatten(2)), (layout, i)
    others = [c for c in range(4 * n) if c not in set(chunks)]
    assert torch.equal(pool.data[:, :, others], pool_before[:, :, others])
    targets = list(range(n + 1, 2 * n + 1))
    rng.shuffle(targets)
    rest = store.read_blocks(blocks).clone()
    pool.load_blocks(chunks, targets)
    assert torch.equal(store.read_blocks(targets), want), layout
    assert torch.equal(store.read_blocks(blocks), rest), "the source blocks are unchanged"

TIER = """\
id: t
title: t
config: {num_blocks: 6, block_size: 4, connector: {num_blocks: 8, load_delay: 2}}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], max_tokens: 1}
  - arrive: {id: X, prompt: [{random: 20}], max_tokens: 1}
  - arrive: {id: B, prompt: [{same_as: A, first: 12}, {tokens: [77, 78]}], max_tokens: 3}
  - step: 8
"""

ALONE = """\
id: t
title: t
config: {num_blocks: 6, block_size: 4}
steps:
  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 77, 78], max_tokens: 3}
  - step: 4
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_block_loaded_from_the_tier_is_what_recomputation_writes(dtype, device):
    """B's blocks 2 and 3 (tokens 5-12) come from the tier, written there from A's forward pass;
    computing B alone writes the same bytes into its own blocks (on the CPU; on CUDA, where a
    kernel may round a batch of another size differently, within the device's tolerance) — and
    B samples the same tokens either way."""
    def run(text):
        scenario = load_text(text.replace("block_size: 4", f"block_size: 4, model: "
                                                           f"{{dtype: {dtype}}}")).scenario
        engine = Engine(scenario, device=device)
        loads = [op.block_id for step in scenario.steps for op in engine.apply(step).ops
                 if op.kind == "load"]
        return engine, loads

    (tiered, rows_t), (alone, _) = run(TIER), run(ALONE)
    b, b_alone = tiered.scheduler.requests["B"], alone.scheduler.requests["B"]
    assert tiered.scheduler.connector_prefix_cache_stats.hits == 8
    assert b.output_token_ids == b_alone.output_token_ids and len(b.output_token_ids) == 3
    # B has finished: its blocks are free but keep their K/V (nothing reused them)
    assert len(rows_t) == 2
    alone_table = [1, 2, 3, 4]   # B alone takes blocks from the head: 1, 2, 3, 4
    for j, bid in enumerate(rows_t):
        got = tiered.kv.store.read_blocks([bid])
        want = alone.kv.store.read_blocks([alone_table[1 + j]])
        if device == "cpu":
            assert torch.equal(got, want), f"block {bid} differs from recomputation"
        else:
            diff = (got.float() - want.float()).abs().max().item()
            assert diff <= tolerance(device), f"block {bid}: {diff} from recomputation"

