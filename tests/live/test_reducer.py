"""The reducer (what a subscriber can know) and the sequencer (order, gaps, replay, restarts)."""
from __future__ import annotations

import msgspec

from blockviz.live.capture import Received
from blockviz.live.reducer import CacheState
from blockviz.live.stream import Reduction, Sequencer
from blockviz.live.wire import AllBlocksCleared, BlockRemoved, BlockStored, encode_batch


def stored(hashes, parent=None, tokens=None, bs=2, medium="GPU", group=0, kind="full_attention",
           lora=None, extra=None):
    tokens = list(range(1, len(hashes) * bs + 1)) if tokens is None else tokens
    return BlockStored(block_hashes=list(hashes), parent_block_hash=parent, token_ids=tokens,
                       block_size=bs, lora_id=None, medium=medium, lora_name=lora,
                       extra_keys=extra if extra is not None else [None] * len(hashes),
                       group_idx=group, kv_cache_spec_kind=kind)


def removed(hashes, medium="GPU", group=0):
    return BlockRemoved(list(hashes), medium, group)


def test_copies_are_counted_and_removed_one_by_one():
    st = CacheState()
    st.apply_batch(0, [stored([1, 2])])
    st.apply_batch(1, [stored([2], parent=1, tokens=[3, 4])])
    g = st.groups[("GPU", 0)]
    assert [(h, e.count, e.parent, list(e.tokens)) for h, e in g.items()] == [
        (1, 1, None, [1, 2]), (2, 2, 1, [3, 4])]
    d = st.apply_batch(2, [removed([2])])
    assert g[2].count == 1 and d.removed == []          # still cached in the other copy
    d = st.apply_batch(3, [removed([2])])
    assert 2 not in g and [(k, h) for k, h, _ in d.removed] == [(("GPU", 0), 2)]
    assert (st.stored, st.removed, st.size) == (3, 2, 1)
    assert not st.notes.total


def test_removal_of_a_hash_never_seen_is_the_late_join_note():
    st = CacheState()
    st.apply_batch(4, [removed([0xABC])])
    (n,) = st.notes.kept()
    assert n.kind == "removed_unknown" and st.unknown_removals == 1
    assert "0000000000000abc" in n.text() and "seq 4, event 0" in n.text()
    assert "之前" in n.text("zh")


def test_sliding_window_under_retention_0_tokens_and_parents_unknown():
    """examples/hybrid/02, request A: group 1 lists blocks 2 and 3 of a 20-token range with
    parent null (it keeps only the blocks the window needs)."""
    st = CacheState()
    st.apply_batch(0, [stored([10, 11, 12, 13, 14], tokens=list(range(1, 21)), bs=4),
                       stored([22, 23], tokens=list(range(1, 21)), bs=4, group=1,
                              kind="sliding_window")])
    full, sw = st.groups[("GPU", 0)], st.groups[("GPU", 1)]
    assert list(full[11].tokens) == [5, 6, 7, 8] and full[11].parent == 10 and full[11].chain_known
    assert [(e.tokens, e.parent, e.chain_known) for e in sw.values()] == [(None, None, False)] * 2
    (n,) = st.notes.kept()
    assert n.kind == "tokens_range" and "sliding_window" in n.text() and "20 token ids" in n.text()
    assert st.caches()["GPU/1"][0]["token_ids"] is None
    assert "? (unknown)" in "\n".join(st.render())


def test_all_blocks_cleared_empties_the_gpu_not_the_cpu_tier():
    st = CacheState()
    st.apply_batch(0, [stored([1]), stored([1], bs=0, tokens=[], medium="CPU")])
    assert st.groups[("CPU", 0)][1].tokens is None          # the tier's placeholder: no tokens
    st.apply_batch(1, [AllBlocksCleared()])
    assert ("GPU", 0) not in st.groups and 1 in st.groups[("CPU", 0)] and st.cleared == 1


def test_memory_bounds_hashes_and_tokens_per_hash():
    st = CacheState(max_hashes=3, max_tokens_per_hash=2)
    st.apply_batch(0, [stored([1, 2, 3, 4, 5], bs=4)])
    g = st.groups[("GPU", 0)]
    assert list(g) == [1, 2, 3] and st.size == 3
    assert list(g[2].tokens) == [5, 6] and g[2].tokens_cut == 2
    assert st.notes.counts == {"tokens_cut": 1, "hash_cap": 2}
    assert st.caches()["GPU/0"][0]["token_ids_cut"] == 2


def test_notes_are_capped_but_counted():
    st = CacheState()
    st.apply_batch(0, [removed(range(2000))])
    assert st.notes.total == 2000 and len(st.notes.kept()) == 400 and st.notes.dropped == 1600


def test_a_restore_with_another_parent_is_noted():
    st = CacheState()
    st.apply_batch(0, [stored([1, 2])])
    st.apply_batch(1, [stored([2], parent=9, tokens=[3, 4])])
    assert st.notes.counts == {"restored_differently": 1} and st.groups[("GPU", 0)][2].count == 2


# -- the sequencer ---------------------------------------------------------------------------
def applied(actions):
    return [a[1] for a in actions if a[0] == "apply"]


def test_in_order_and_a_gap_filled_from_replay():
    s = Sequencer(replay=True)
    assert applied(s.live(0, "a") + s.live(1, "b")) == [0, 1]
    acts = s.live(4, "e")
    assert ("gap", 2, 3) in acts and s.request == 2 and applied(acts) == []
    assert applied(s.live(5, "f")) == []                    # held until the replay ends
    assert applied(s.from_replay(2, "c")) == [2]
    assert applied(s.from_replay(3, "d")) == [3, 4, 5]
    acts = s.from_replay(4, "e") + s.from_replay(5, "f") + s.replay_end()
    assert applied(acts) == [] and [a[0] for a in acts] == ["dup", "dup"]


def test_late_join_replay_from_an_evicted_seq_loses_the_start():
    s = Sequencer(replay=True)
    acts = s.live(7, "h")
    assert acts == [("gap", 0, 6)] and s.request == 0
    # the buffer kept 5 and 6 only: a request from 0 silently starts there
    assert applied(s.from_replay(5, "f") + s.from_replay(6, "g")) == []
    acts = s.from_replay(7, "h") + s.replay_end()
    assert ("lost", 0, 4) in acts and applied(acts) == [5, 6, 7]


def test_without_replay_a_gap_is_lost_at_once_and_a_restart_starts_over():
    s = Sequencer(replay=False)
    acts = s.live(3, "d")
    assert acts == [("gap", 0, 2), ("lost", 0, 2), ("apply", 3, "d")]
    acts = s.live(6, "g")
    assert acts == [("gap", 4, 5), ("lost", 4, 5), ("apply", 6, "g")]
    acts = s.live(0, "A")
    assert acts == [("restart", 6, 0), ("apply", 0, "A")]


def test_a_replay_that_never_ends_is_bounded():
    s = Sequencer(replay=True, max_pending=5)
    s.live(0, 0)
    s.live(3, 3)                                             # gap 1..2, awaiting a replay
    for k in range(4, 20):
        s.live(k, k)
    assert len(s.pending) <= 5 and not s.awaiting            # gave up and applied what it had


def message(seq, events, src="sub", index=0, rank=0, topic=b""):
    return Received(src, 1.0, [topic, seq.to_bytes(8, "big", signed=True),
                               encode_batch(events, 1.0, rank)], index)


def test_reduction_per_rank_and_located_notes():
    red = Reduction(replay=False)
    red.feed(message(0, [stored([1])], index=0))
    red.feed(message(0, [stored([9])], index=1, rank=1))
    red.feed(Received("sub", 1.0, [b"", b"\0" * 8], 2))
    red.feed(Received("sub", 1.0, [b"", (1).to_bytes(8, "big"), b"\x91\x01"], 3))
    red.feed(message(2, [removed([1]), removed([77])], index=4))
    assert sorted(red.ranks) == [0, 1] and red.ranks[1].state.size == 1
    assert red.ranks[0].state.size == 0 and list(red.ranks[0].missing) == [(1, 1)]
    texts = [n.text() for n in red.notes.kept()]
    assert any(t.startswith("message 2 (sub): 2 frame(s)") for t in texts)
    assert any(t.startswith("message 3 (sub), seq 1: not a KVEventBatch") for t in texts)
    assert any(t.startswith("message 4 (sub), seq 2, event 1: BlockRemoved of 000000000000004d")
               for t in texts)
    rep = red.report()
    assert rep["missing_seqs"] == [1] and set(rep["ranks"]) == {"0", "1"}
    assert rep["ranks"]["1"]["caches"]["GPU/0"][0]["hash"] == "0000000000000009"
    assert rep["skipped_messages"] == 2


def test_a_huge_token_list_is_bounded_by_the_cap():
    red = Reduction(replay=False, max_tokens_per_hash=16)
    red.feed(message(0, [stored([1], tokens=list(range(1_000_000)), bs=1_000_000)]))
    e = red.ranks[0].state.groups[("GPU", 0)][1]
    assert len(e.tokens) == 16 and e.tokens_cut == 1_000_000 - 16


def test_unknown_type_inside_a_valid_batch_keeps_the_rest():
    payload = msgspec.msgpack.encode([1.0, [{"type": "Mystery"}, {
        "type": "BlockRemoved", "block_hashes": [5], "medium": "GPU", "group_idx": 0}], 0])
    red = Reduction(replay=False)
    red.feed(message(0, [stored([5])]))
    red.feed(Received("sub", 2.0, [b"", (1).to_bytes(8, "big"), payload], 1))
    assert red.cached() == 0 and red.notes.counts["unknown_type"] == 1
    assert "seq 1, event 0: unknown event type 'Mystery'" in red.notes.kept()[0].text()


def test_a_hole_that_opens_while_a_replay_runs_is_asked_for_again():
    s = Sequencer(replay=True)
    s.expect_replay()                       # asked from 0 at start
    assert applied(s.from_replay(0, "a") + s.from_replay(1, "b")) == [0, 1]
    assert applied(s.live(2, "c") + s.live(4, "e")) == []      # 3 dropped while it runs
    acts = s.replay_end()
    assert acts == [("apply", 2, "c"), ("gap", 3, 3)] and s.request == 3 and s.awaiting
    s.request = None
    assert applied(s.from_replay(3, "d") + s.from_replay(4, "e")) == [3, 4]
    assert s.replay_end() == [] and not s.awaiting
    # a replay that returned nothing for a hole it should have had: lost, not asked again
    s.live(7, "h")
    s.request = None
    acts = s.from_replay(7, "h") + s.replay_end()
    assert ("lost", 5, 6) in acts and applied(acts) == [7]
