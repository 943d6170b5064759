"""The run's budget (blockviz.sim.budget): each dimension — computed tokens, engine steps, tensor
bytes, wall time — stops a run inside the event that passes it, with a located message naming
that step's line (in English and 中文); checkpoints share unchanged blocks and count what they
copy."""
from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import torch

from blockviz.i18n.errors import knows
from blockviz.kv import PagedKVStore
from blockviz.kv import model as M
from blockviz.scenario import ScenarioError, load_text
from blockviz.sim import budget as B
from blockviz.sim.budget import Budget
from blockviz.sim.runner import run

HEAD = """\
id: b
title: b
config: {num_blocks: 64, block_size: 4}
steps:
"""


def loaded(steps: str, head: str = HEAD):
    return load_text(head + steps, "b.yaml")


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def stopped(steps: str, budget: Budget, head: str = HEAD):
    engine, tl = run(loaded(steps, head), budget=budget)
    assert tl.error is not None, "the run should have been stopped"
    return engine, tl, tl.error


def test_within_the_budget_nothing_changes():
    steps = "  - arrive: {id: A, prompt: [{random: 30}], max_tokens: 3}\n  - decode: {steps: 2}\n"
    _, tl = run(loaded(steps), budget=Budget(tokens=1000, engine_steps=10, tensor_bytes=64 << 20,
                                             seconds=60))
    _, free = run(loaded(steps), budget=None)
    assert tl.error is None and len(tl) == len(free) == 3
    assert tl.step(2).requests["A"].token_ids == free.step(2).requests["A"].token_ids


def test_tokens_stop_the_step_that_passes_them_at_its_line():
    steps = ("  - arrive: {id: A, prompt: [{random: 20}], max_tokens: 1}\n"
             "  - arrive: {id: B, prompt: [{random: 20}], max_tokens: 1}\n")
    engine, tl, err = stopped(steps, Budget(tokens=30))
    text = HEAD + steps
    assert isinstance(err, ScenarioError)
    assert (err.file, err.line, err.path) == ("b.yaml", line_of(text, "id: B"), "steps[1].arrive")
    assert err.message == ("step 2 (arrive): the run's budget of 30 computed tokens is used up "
                           "(20 so far, this step asks for 20 more)")
    assert tl.error_step == 2 and len(tl) == 2            # step 1 was kept
    assert "计算 token 预算（30 个）已经用完" in err.localized("zh")
    assert knows(err.message)


def test_engine_steps_stop_a_long_decode_inside_the_event():
    steps = ("  - arrive: {id: A, prompt: [{random: 5}], max_tokens: 500}\n"
             "  - decode: {steps: 400}\n")
    engine, tl, err = stopped(steps, Budget(engine_steps=50))
    assert err.path == "steps[1].decode" and err.line == line_of(HEAD + steps, "decode")
    assert "the run's budget of 50 engine steps is used up" in err.message
    assert engine.meter.engine_steps == 51                # stopped between the decode's steps
    assert engine.scheduler.requests["A"].num_output_tokens < 60
    assert knows(err.message)


def test_bytes_the_store_and_weights_alone_pass_are_a_config_error():
    with pytest.raises(ScenarioError) as e:
        run(loaded("  - arrive: {id: A, prompt: [1, 2]}\n"), budget=Budget(tensor_bytes=1 << 20))
    assert e.value.path == "config.model" and e.value.line is not None
    assert "the model's weights and the KV store needs" in e.value.message
    assert "more than the run's budget of 1.0 MiB" in e.value.message
    assert knows(e.value.message)


def test_bytes_a_forward_pass_would_need_are_refused_before_it_runs(monkeypatch):
    allocated = []
    real = M.TinyModel.forward_paged
    monkeypatch.setattr(M.TinyModel, "forward_paged",
                        lambda self, *a: allocated.append(1) or real(self, *a))
    steps = ("  - arrive: {id: A, prompt: [{random: 8}], max_tokens: 1}\n"
             "  - arrive: {id: B, prompt: [{random: 3000}], max_tokens: 1}\n")
    head = HEAD.replace("num_blocks: 64", "num_blocks: 800")
    engine, tl, err = stopped(steps, Budget(tensor_bytes=engine_fixed(head) + (2 << 20)), head)
    assert err.path == "steps[1].arrive" and "this forward pass needs" in err.message
    assert len(allocated) == 1                              # A's pass ran, B's never started
    assert knows(err.message)


def engine_fixed(head: str) -> int:
    from blockviz.sim.engine import Engine
    e = Engine(loaded("", head.replace("steps:", "steps: []")).scenario,
               meter=B.Meter(Budget(tensor_bytes=1 << 40)))
    return e.meter.fixed_bytes


def test_wall_time_stops_a_forward_pass_between_its_chunks(monkeypatch):
    """The clock jumps past the budget once B's prefill has begun: the run stops between chunks
    of its attention, inside the event, not after it."""
    late = {"now": False, "chunks": 0}
    monkeypatch.setattr(B, "now", lambda: 100.0 if late["now"] else 0.0)
    monkeypatch.setattr(M, "ATTN_CHUNK_ELEMENTS", 64)
    real = M.TinyModel.forward_paged

    def forward(self, store, tokens, start, table):
        late["now"] = late["now"] or tokens.shape[0] == 200
        return real(self, store, tokens, start, table)

    real_attend = M.TinyModel.attend

    def attend(self, *a):
        late["chunks"] += 1
        return real_attend(self, *a)

    monkeypatch.setattr(M.TinyModel, "forward_paged", forward)
    monkeypatch.setattr(M.TinyModel, "attend", attend)
    steps = ("  - arrive: {id: A, prompt: [1, 2, 3], max_tokens: 1}\n"
             "  - arrive: {id: B, prompt: [{random: 200}], max_tokens: 1}\n"
             "  - finish: B\n")
    engine, tl, err = stopped(steps, Budget(seconds=5))
    assert err.path == "steps[1].arrive" and tl.error_step == 2
    assert err.message == "step 2 (arrive): the run's time budget of 5 s ran out during this step"
    assert "时间预算（5 秒）在这一步中用完了" in err.localized("zh")
    assert engine.scheduler.requests["B"].num_output_tokens == 0     # inside its first pass
    assert late["chunks"] == 2 + 1                   # A's two layers, then B's first attention


# -- checkpoints -------------------------------------------------------------------------------
def test_checkpoints_share_unchanged_blocks():
    """12 checkpoints of a full store hold one copy of it plus the few blocks that changed in
    between (a whole copy each would be 12 stores)."""
    head = HEAD.replace("num_blocks: 64", "num_blocks: 40")
    steps = "  - arrive: {id: A, prompt: [{random: 150}], max_tokens: 100}\n"
    steps += "".join(f"  - checkpoint: c{i}\n  - decode: {{steps: 1}}\n" for i in range(12))
    engine, tl = run(loaded(steps, head))
    assert tl.error is None
    store = engine.kv.store
    whole = store.bytes_per_block * store.num_blocks
    assert store.held_bytes() < 2 * whole                # not 12 stores
    blocks_copied = store.held_bytes() // store.bytes_per_block
    assert blocks_copied <= 38 + 12                      # A's blocks once, then one a decode


def test_rewinds_restore_exactly_and_only_rewrite_changed_blocks():
    head = HEAD.replace("num_blocks: 64", "num_blocks: 12")
    steps = ("  - arrive: {id: A, prompt: [{random: 20}], max_tokens: 30}\n"
             "  - checkpoint: a\n"
             "  - decode: {steps: 6}\n"
             "  - checkpoint: b\n"
             "  - rewind: a\n"
             "  - rewind: b\n"
             "  - rewind: a\n")
    engine, tl = run(loaded(steps, head), budget=None)
    assert tl.error is None
    s = engine.kv.store
    zeros = PagedKVStore(1, s.block_size, s.num_layers, s.num_kv_heads, s.head_dim).fingerprint(0)
    fp = [[tl.payload(b, i).fingerprint if tl.payload(b, i) else zeros for b in range(13)]
          for i in range(len(tl))]
    assert fp[5] == fp[2] and fp[6] == fp[4] and fp[7] == fp[2] and fp[4] != fp[2]
    # each rewind rewrote only the blocks the decode had changed (not all 13)
    for i in (5, 6, 7):
        assert 0 < len(changed(tl, i)) < 6


def changed(tl, index: int) -> list[int]:
    return [b for b, hist in tl._payloads.items() if any(i == index for i, _ in hist)]


def test_a_checkpoint_over_the_budget_is_refused_and_names_its_line():
    """The state's copy counts (here without payloads: the pool's 4,000 blocks, the tokens)."""
    head = HEAD.replace("num_blocks: 64, block_size: 4", "num_blocks: 4000, block_size: 4, model: null")
    steps = ("  - arrive: {id: A, prompt: [{random: 380}], max_tokens: 1}\n"
             "  - checkpoint: a\n"
             "  - checkpoint: a\n"                        # replaces a: nothing more held
             "  - checkpoint: b\n"
             "  - checkpoint: c\n")
    engine, tl, err = stopped(steps, Budget(tensor_bytes=2_500_000), head)
    assert err.path == "steps[4].checkpoint" and err.line == line_of(HEAD + steps, "checkpoint: c")
    assert "this checkpoint needs" in err.message and knows(err.message)
    assert sorted(engine.checkpoints) == ["a", "b"]


def test_a_snapshot_asks_for_the_bytes_it_copies_and_a_refusal_changes_nothing():
    store = PagedKVStore(6, 2, 1, 1, 2)
    store.write_blocks([1, 4], torch.ones(1, 2, 2, 2, 1, 2))
    asked = []
    store.snapshot(asked.append)
    assert asked == [2 * store.bytes_per_block] and store.held_bytes() == 0   # not kept
    snap = store.snapshot(asked.append)
    assert asked[-1] == 2 * store.bytes_per_block and store.held_bytes() == asked[-1]
    store.snapshot(asked.append)                                  # nothing changed: no copy
    assert len(asked) == 2
    store.write_blocks([4], torch.zeros(1, 2, 1, 2, 1, 2))

    def refuse(n):
        raise RuntimeError("over")

    with pytest.raises(RuntimeError):
        store.snapshot(refuse)
    assert store.held_bytes() == 2 * store.bytes_per_block and snap.chunks


def test_snapshots_and_restores_equal_full_copies_under_random_writes():
    """Copy-on-write against the obvious: a deep copy at every checkpoint."""
    rng = random.Random(3)
    store = PagedKVStore(9, 2, 2, 1, 3)
    snaps, full = [], []
    for _ in range(300):
        r = rng.random()
        if r < 0.5:
            ids = rng.sample(range(9), rng.randint(1, 3))
            store.write_blocks(ids, torch.randn(2, 2, len(ids), 2, 1, 3))
        elif r < 0.6:
            table = torch.tensor(rng.sample(range(9), 3))
            start = rng.randint(0, 5)
            store.write_range(rng.randint(0, 1), table, start, torch.randn(6 - start, 1, 3),
                              torch.randn(6 - start, 1, 3))
        elif r < 0.65:
            store.zero_()
        elif r < 0.8:
            snaps.append(store.snapshot())
            full.append([c.clone() for c in store.kv_caches])
        elif snaps:
            j = rng.randrange(len(snaps))
            before = [c.clone() for c in store.kv_caches]
            touched = store.restore(snaps[j])
            for c, want, old in zip(store.kv_caches, full[j], before):
                assert torch.equal(c, want)
                same = [b for b in range(9) if b not in touched]
                assert torch.equal(c[:, same], old[:, same])   # the rest was left alone
        if rng.random() < 0.05 and snaps:                      # drop one: its copies are freed
            k = rng.randrange(len(snaps))
            del snaps[k], full[k]
    kept = {cid for s in snaps for cid in s.chunks}
    assert store.held_bytes() == sum(store._kept()[c].numel() * 4 for c in kept)


def test_a_deep_copy_of_a_store_keeps_working_with_snapshots():
    store = PagedKVStore(4, 2, 1, 1, 2)
    store.write_blocks([1], torch.ones(1, 2, 1, 2, 1, 2))
    snap = store.snapshot()
    dup = copy.deepcopy(store)
    dup.write_blocks([1], torch.zeros(1, 2, 1, 2, 1, 2))
    dup.restore(snap)
    assert dup.kv_caches[0][:, 1].eq(1).all() and store.kv_caches[0][:, 1].eq(1).all()
    assert np.array_equal(dup._version, store._version)

