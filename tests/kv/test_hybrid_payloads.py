"""Real KV payloads of hybrid models: the tiny model gets one layer per KV-cache group; a
sliding-window layer attends to its window, a chunked-local layer to its chunk, each through its
own group's block table; a cache hit still equals recomputation bit for bit (CPU)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from blockviz.kv import PagedKVStore, TinyModel
from blockviz.scenario import load_text
from blockviz.sim.runner import run

CPU = torch.device("cpu")
HYBRID = ((("full_attention", None), ("sliding_window", 3)),
          (("sliding_window", 5), ("full_attention", None)),
          (("full_attention", None), ("chunked_local_attention", 4)))


def test_a_local_layer_attends_only_to_its_window():
    """Same weights: a sliding-window or chunked-local layer changes what the model computes;
    and every token's output from such a layer depends only on the keys in its window."""
    tokens = torch.randint(0, 1000, (12,))
    full = TinyModel(2, 2, 8, seed=4, device=CPU)
    out_full = full.forward_dense(tokens, torch.float32, 0)
    for attention in HYBRID:
        local = TinyModel(2, 2, 8, seed=4, device=CPU, attention=attention)
        assert not torch.equal(local.forward_dense(tokens, torch.float32, 0), out_full)
    # one sliding-window layer of 3: position 9 sees positions 7, 8, 9 only
    model = TinyModel(1, 2, 8, seed=4, device=CPU, attention=(("sliding_window", 3),))
    changed = tokens.clone()
    changed[:7] = torch.randint(0, 1000, (7,))
    a = model.forward_dense(tokens, torch.float32, 0)[9]
    b = model.forward_dense(changed, torch.float32, 0)[9]
    assert torch.equal(a, b)
    chunked = TinyModel(1, 2, 8, seed=4, device=CPU, attention=(("chunked_local_attention", 4),))
    changed = tokens.clone()
    changed[:8] = torch.randint(0, 1000, (8,))                 # the chunks before position 8
    assert torch.equal(chunked.forward_dense(tokens, torch.float32, 0)[8:],
                       chunked.forward_dense(changed, torch.float32, 0)[8:])


@pytest.mark.parametrize("attention", HYBRID, ids=["full+sw", "sw+full", "full+chunked"])
def test_a_hit_through_null_blocks_equals_recomputation_bit_for_bit(attention):
    """Each layer reads its group's table. The local group's table has the null block where its
    window moved on, and the null block holds junk here: it weighs exactly 0, so the paged pass
    of the tokens after a hit equals the dense recomputation, bit for bit."""
    model = TinyModel(2, 2, 8, seed=7, device=CPU, attention=attention)
    store = PagedKVStore(16, 4, 2, 2, 8)
    tokens = torch.randint(0, 1000, (14,))
    tables = [torch.tensor([3, 5, 7, 9]), torch.tensor([2, 4, 6, 8])]
    model.forward_paged(store, tokens[:8], 0, tables)          # the "cached" prefix, 2 blocks
    for c in store.kv_caches:
        c[:, 0].normal_()                                      # junk in the null block
    local = 0 if attention[0][0] != "full_attention" else 1
    tables[local] = tables[local].clone()
    tables[local][0] = 0                                       # block 0 left the window
    _, attn = model.forward_paged(store, tokens[8:], 8, tables)
    dense = model.forward_dense(tokens, store.dtype, 8)
    assert torch.equal(attn.to(torch.float32), dense.to(torch.float32))


SCENARIO = """id: t
title: t
config:
  num_blocks: 64
  block_size: 4
  kv_cache_groups: {groups}
  prefix_cache_retention_interval: null
  scheduler: {{max_num_batched_tokens: 6, max_num_seqs: 4}}
steps:
  - arrive: {{id: A, prompt: [{{random: 21}}], max_tokens: 6}}
  - step: 14
  - arrive: {{id: B, prompt: [{{same_as: A, first: 18}}, {{random: 3}}], max_tokens: 3}}
  - step: 6
  - arrive: {{id: C, prompt: [{{same_as: A, first: 22}}], max_tokens: 2}}
  - step: 6
"""
GROUPS = {
    "full+sw": "[{type: full_attention}, {type: sliding_window, sliding_window: 6}]",
    "gpt-oss": "[{type: sliding_window, sliding_window: 4}, {type: full_attention}]",
    "gemma": "[" + "{type: sliding_window, sliding_window: 8}, " * 5 + "{type: full_attention}]",
    "llama4": "[{type: full_attention}, {type: chunked_local_attention, attention_chunk_size: 8}]",
}


@pytest.mark.parametrize("name", list(GROUPS))
def test_every_hit_of_a_hybrid_run_reproduces_recomputation(name):
    engine, tl = run(load_text(SCENARIO.format(groups=GROUPS[name])), check=True)
    assert tl.error is None
    assert engine.kv.model.num_layers == len(engine.config.kv_cache_groups)
    checks = [op for i in range(len(tl)) for op in tl.step_ops(i) if op.kind == "verify"]
    assert len(checks) == 2 and all(c.hit_tokens > 0 for c in checks)
    assert all(c.max_abs_diff == 0.0 for c in checks), checks


def test_the_shipped_hybrid_examples_verify():
    """The toolkit's hybrid examples, where present beside the checkout: every hit exact."""
    here = Path(__file__).resolve().parents[2]
    shared = [os.environ.get("BLOCKVIZ_SHARED"), here.parent / "shared", here.parent.parent / "shared"]
    files = [f for s in shared if s
             for f in sorted(Path(s, "tools/vllm-diff/sched/examples/hybrid").glob("*.yaml"))]
    if not files:
        pytest.skip("no toolkit beside the checkout")
    for f in files:
        _, tl = run(load_text(f.read_text()))
        checks = [op for i in range(len(tl)) for op in tl.step_ops(i) if op.kind == "verify"]
        assert all(c.max_abs_diff == 0.0 for c in checks), f.name
