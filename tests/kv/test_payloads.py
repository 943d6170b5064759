"""Real KV payloads: slot mapping, writes, paged attention, cache hit = recomputation, eviction
overwrites, the external tier copies bytes faithfully, rewind restores tensors."""
from __future__ import annotations

import copy

import pytest
import torch

from blockviz.kv import KVRuntime, PagedKVStore, TinyModel, resolve_device, slot_mapping
from blockviz.kv.model import COMPUTE_DTYPE
from blockviz.scenario import load, load_text
from blockviz.scenario.schema import ModelConfig
from blockviz.sim.engine import Engine


def test_slot_mapping_follows_the_block_table():
    table = torch.tensor([5, 2, 9])
    pos = torch.arange(10)
    assert slot_mapping(table, pos, 4).tolist() == [20, 21, 22, 23, 8, 9, 10, 11, 36, 37]


def test_store_layout_and_write_gather_roundtrip():
    store = PagedKVStore(num_blocks=7, block_size=4, num_layers=2, num_kv_heads=2, head_dim=8)
    assert tuple(store.kv_caches[0].shape) == (2, 7, 4, 2, 8)  # [K/V, blocks, slots, heads, dim]
    k = torch.randn(3, 2, 8)
    v = torch.randn(3, 2, 8)
    slots = torch.tensor([9, 10, 27])  # block 2 slots 1, 2; block 6 slot 3
    store.write(1, slots, k, v)
    assert torch.equal(store.kv_caches[1][0, 2, 1], k[0])
    assert torch.equal(store.kv_caches[1][1, 6, 3], v[2])
    assert store.kv_caches[0].abs().sum() == 0  # other layer untouched
    k2, v2 = store.gather(1, slots)
    assert torch.equal(k2, k) and torch.equal(v2, v)
    assert store.bytes_per_block == 2 * 2 * 4 * 2 * 8 * 4


def test_whole_block_copies_roundtrip():
    store = PagedKVStore(5, 4, 2, 2, 8)
    for c in store.kv_caches:
        c.normal_()
    data = store.read_blocks([3, 1])
    assert tuple(data.shape) == (2, 2, 2, 4, 2, 8)
    other = PagedKVStore(5, 4, 2, 2, 8)
    other.write_blocks([4, 2], data)
    for a, b in zip(store.kv_caches, other.kv_caches):
        assert torch.equal(a[:, 3], b[:, 4]) and torch.equal(a[:, 1], b[:, 2])


def test_paged_attention_equals_dense_attention_with_a_scrambled_table():
    """Attention that reads K/V through a block table gives exactly what dense attention over the
    same tokens gives — whatever physical blocks the table points to."""
    model = TinyModel(2, 2, 8, seed=1, device=torch.device("cpu"))
    store = PagedKVStore(12, 4, 2, 2, 8)
    tokens = torch.randint(0, 1000, (14,))
    table = torch.tensor([7, 2, 11, 4])
    _, attn = model.forward_paged(store, tokens, 0, table)
    dense = model.forward_dense(tokens, store.dtype, 0)
    assert torch.equal(attn.to(torch.float32), dense.to(torch.float32))


def test_prefill_then_decode_writes_each_token_to_its_slot():
    model = TinyModel(1, 1, 4, seed=3, device=torch.device("cpu"))
    store = PagedKVStore(6, 4, 1, 1, 4)
    tokens = torch.tensor([11, 12, 13, 14, 15, 16])
    table = torch.tensor([3, 5])
    model.forward_paged(store, tokens[:5], 0, table)       # prefill 5 tokens
    model.forward_paged(store, tokens[5:], 5, table)       # decode token 6 at position 5
    x = model.embed(tokens, torch.arange(6))
    _, k, v = model.qkv(0, x)                               # layer 0 K/V: token + position only
    got_k = torch.cat([store.kv_caches[0][0, 3], store.kv_caches[0][0, 5, :2]])
    assert torch.equal(got_k, k.to(torch.float32))
    assert store.kv_caches[0][:, 5, 2:].abs().sum() == 0   # the slots after token 6 are untouched


def test_deeper_layers_depend_on_the_whole_prefix():
    """Same token at the same position, different earlier tokens: layer 0 K equal, layer 1 K not —
    why a block's hash must chain in its parent."""
    model = TinyModel(2, 2, 8, seed=0, device=torch.device("cpu"))
    a, b = torch.tensor([1, 2, 3, 4, 9]), torch.tensor([5, 6, 7, 8, 9])
    sa, sb = PagedKVStore(3, 8, 2, 2, 8), PagedKVStore(3, 8, 2, 2, 8)
    table = torch.tensor([1])
    model.forward_paged(sa, a, 0, table)
    model.forward_paged(sb, b, 0, table)
    assert torch.equal(sa.kv_caches[0][0, 1, 4], sb.kv_caches[0][0, 1, 4])
    assert not torch.equal(sa.kv_caches[1][0, 1, 4], sb.kv_caches[1][0, 1, 4])


SCENARIOS = sorted((__import__("pathlib").Path(__file__).resolve().parents[2] / "scenarios")
                   .glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_every_cache_hit_reproduces_recomputation(path, run_file):
    engine, tl = run_file(path)
    assert tl.error is None
    if engine.kv is None:
        pytest.skip("scenario runs without payloads")
    checks = [op for i in range(len(tl)) for op in tl.step_ops(i) if op.kind == "verify"]
    for op in checks:
        assert op.max_abs_diff == 0.0, f"{path.stem}: {op}"  # bit for bit on the CPU


def test_six_blocks_verifies_two_hits(cli, root):
    p = cli("verify", str(root / "scenarios" / "six-blocks.yaml"))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    device = resolve_device("auto").type   # six-blocks leaves device at auto: cuda where there is one
    assert lines[-1] == f"verified: 2/2 cache hits reproduce recomputation (device: {device})"
    assert lines[0].startswith("step 2: B: 8 hit tokens") and lines[1].startswith("step 6: C:")


def test_a_corrupted_cached_block_is_caught():
    """Negative control: if the reused K/V were wrong, the check would say so."""
    loaded = load(SCENARIOS[[p.stem for p in SCENARIOS].index("six-blocks")])
    engine = Engine(loaded.scenario)
    steps = loaded.scenario.steps
    for step in steps[:4]:
        engine.apply(step)
    engine.kv.store.kv_caches[1][0, 2, 1] += 1.0   # block 2 (H2), layer 1 K, one slot
    result = engine.apply(steps[5])                # C hits blocks 1 and 2
    verify = [op for op in result.ops if op.kind == "verify"]
    assert verify and verify[0].max_abs_diff > 0


def test_eviction_overwrites_the_payload(run_file, root):
    _, tl = run_file(root / "scenarios" / "six-blocks.yaml")
    before, after = tl.payload(1, 7), tl.payload(1, 8)     # rewound state, then D takes block 1
    assert before.fingerprint != after.fingerprint
    assert tl.payload(1, 4).fingerprint == before.fingerprint  # block 1 kept A's prefix until D
    assert tl.step(8).block_tokens[1] != tl.step(7).block_tokens[1]


def test_rewind_restores_payloads(run_file, root):
    engine, tl = run_file(root / "scenarios" / "six-blocks.yaml")
    assert tl.payload(4, 6) != tl.payload(4, 4)   # C wrote its own tokens into block 4
    assert tl.payload(4, 7) == tl.payload(4, 4)   # after the rewind, B's K/V are back


def test_checkpoint_copies_tensors_and_shares_weights():
    kv = KVRuntime(5, 4, **ModelConfig().model_dump(), device="cpu")
    kv.store.kv_caches[0].fill_(1.0)
    dup = copy.deepcopy(kv)
    kv.store.kv_caches[0].fill_(2.0)
    assert dup.store.kv_caches[0].max() == 1.0
    assert dup.model is kv.model


EXTERNAL = """\
id: ext
title: ext
config: {num_blocks: 6, block_size: 4, connector: {num_blocks: 8}}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], max_tokens: 1}
  - arrive: {id: X, prompt: [{random: 20}], max_tokens: 1}
  - arrive: {id: B, prompt: [{same_as: A, first: 12}, {tokens: [77, 78]}], max_tokens: 1}
"""


@pytest.mark.parametrize("sync", [False, True])
def test_external_hits_load_the_bytes_that_were_saved(sync):
    """A's prompt blocks are stored to the CPU tier when scheduled; X evicts two of them from the
    GPU; B hits the first locally and loads the other two back (asynchronously: parked one step;
    or within its step) — the loaded bytes are the stored ones, and B's forward pass over them
    matches recomputation exactly."""
    text = EXTERNAL if not sync else EXTERNAL.replace(
        "connector: {num_blocks: 8}", "connector: {num_blocks: 8, sync_load_budget_tokens: 64}")
    scenario = load_text(text).scenario
    engine = Engine(scenario)
    steps = scenario.steps
    engine.apply(steps[0])
    a_blocks = engine.manager.req_to_blocks.get("A")
    assert a_blocks is None  # finished
    engine.apply(steps[1])   # X evicts A's cached blocks from the GPU (but not from the tier)
    pool = engine.connector.worker.pool
    saved = {h: pool.data[:, :, cid].clone() for h, _, cid, _ in engine.connector.contents()}
    result = engine.apply(steps[2])
    loads = [op for op in result.ops if op.kind == "load"]
    admit = [op for op in result.ops if op.kind == "admit"][0]
    # H1 is still on the GPU (local first), H2 and H3 come from the tier
    assert (admit.local_hit_tokens, admit.external_hit_tokens, len(loads)) == (4, 8, 2)
    req = engine.scheduler.requests["B"]
    assert req.status.value == ("finished" if sync else "waiting_for_remote_kvs")  # max_tokens 1
    for j, op in enumerate(loads):
        got = engine.kv.store.read_blocks([op.block_id])           # [L, 2, 1, bs, H, D]
        want = saved[req.block_hashes[1 + j]].view(got.shape[0], 2, 1, *got.shape[3:])
        assert torch.equal(got, want.to(got.device, got.dtype)), "loaded bytes equal the saved bytes"
    stats = engine.manager.prefix_cache_stats
    ext = engine.scheduler.connector_prefix_cache_stats
    assert ext.hits == 8 and stats.hits == 4
    assert ext.hits_by_source == {"host": 8}
    # queries count each request's tokens at admission; the tier is asked for what was not local
    assert stats.queries == 13 + 20 + 14
    assert ext.queries == stats.queries - stats.hits
    verify = [op for op in result.ops if op.kind == "verify"]
    if not sync:
        assert not verify, "nothing runs while the load is in flight"
        verify = [op for op in engine.apply(load_text("id: s\ntitle: s\nsteps: [{step: 2}]")
                                            .scenario.steps[0]).ops if op.kind == "verify"]
    assert verify and verify[0].hit_tokens == 12 and verify[0].max_abs_diff == 0.0


def test_cuda_asked_for_without_a_gpu_is_a_clear_error(cli, tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        resolve_device("cuda")
    f = tmp_path / "cuda.yaml"
    f.write_text("id: c\ntitle: c\nconfig: {device: cuda}\nsteps:\n  - arrive: {id: A, prompt: [1]}\n")
    p = cli("json", str(f))
    assert p.returncode == 2 and "config.device" in p.stderr and "no CUDA GPU" in p.stderr
    assert "Traceback" not in p.stderr


def test_compute_dtype_is_float64():
    assert COMPUTE_DTYPE == torch.float64


@pytest.mark.parametrize("row_path", ["numpy", "torch"])
@pytest.mark.parametrize("contiguous", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("start, n", [(0, 16), (0, 13), (3, 1), (5, 14), (4, 8), (2, 2), (7, 9)])
def test_block_level_write_and_gather_equal_the_slot_path(start, n, dtype, contiguous, row_path):
    """write_range/gather_prefix move whole blocks at once (on the CPU through numpy row views;
    on a GPU through torch index ops, run here on the CPU); they must land exactly where the
    per-slot mapping says, partial first and last blocks, every cache dtype, inputs of another
    dtype and non-contiguous inputs included."""
    table = torch.tensor([6, 1, 4, 9, 2])
    a, b = PagedKVStore(10, 4, 1, 2, 3, dtype), PagedKVStore(10, 4, 1, 2, 3, dtype)
    if row_path == "torch":
        a.np_rows_of = None                                   # the path a CUDA store takes
    for st in (a, b):
        st.kv_caches[0].copy_(torch.randn(st.kv_caches[0].shape,
                                          generator=torch.Generator().manual_seed(1)))
    k = torch.randn(n, 2, 3, dtype=torch.float64)              # another dtype than the cache
    v = torch.randn(3, 2, n).to(dtype).permute(2, 1, 0)       # non-contiguous ...
    if contiguous:
        v = v.contiguous()                                     # ... or not
    a.write_range(0, table, start, k, v)
    b.write(0, slot_mapping(table, torch.arange(start, start + n), 4), k, v)
    assert torch.equal(a.kv_caches[0], b.kv_caches[0])
    assert torch.equal(a.kv_caches[0][0].view(-1, 2, 3)[slot_mapping(table, torch.arange(
        start, start + n), 4)], k.to(dtype))
    ka, va = a.gather_prefix(0, table, start + n)
    kb, vb = b.gather(0, slot_mapping(table, torch.arange(start + n), 4))
    assert ka.dtype == dtype and ka.shape == (start + n, 2, 3)
    assert torch.equal(ka, kb) and torch.equal(va, vb)
    ka.fill_(0)                                                # a gather returns a copy
    assert torch.equal(a.kv_caches[0], b.kv_caches[0])


def test_a_deep_copied_store_writes_its_own_tensors():
    table = torch.tensor([3, 1])
    a = PagedKVStore(5, 4, 2, 1, 4)
    b = copy.deepcopy(a)
    b.write_range(1, table, 0, torch.ones(8, 1, 4), torch.ones(8, 1, 4))
    assert not a.kv_caches[1].any()
    assert b.kv_caches[1][:, [3, 1]].eq(1).all() and b.kv_caches[1].sum() == 2 * 8 * 4
    got, _ = b.gather_prefix(1, table, 8)
    assert got.eq(1).all()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_config_sizes_the_store_it_asks_for(dtype):
    """The one KV-bytes formula (the validator's limit, the engine's budget, the app's preview
    limit) is what the paged tensors really take."""
    from blockviz.kv.runtime import DTYPES
    from blockviz.scenario.schema import Config
    config = Config(num_blocks=6, block_size=4,
                    model=ModelConfig(num_layers=3, num_kv_heads=2, head_dim=5, dtype=dtype))
    store = PagedKVStore(config.num_blocks + 1, 4, 3, 2, 5, DTYPES[dtype])
    assert config.kv_store_bytes == sum(t.numel() * t.element_size() for t in store.kv_caches)
    assert config.model.bytes_per_block(4) == store.bytes_per_block
    assert Config(model=None).kv_store_bytes == 0
