"""The hybrid-model lessons (several KV-cache groups) say what the engine does: each test runs a
lesson with invariants checked and pins the facts its captions and notes teach to the state — which
block the null block replaced at which step and where it went, how long each hit is and why, which
group's copy was evicted. Step numbers are the lesson's, 1-based, as ``blockviz play`` shows them.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

from blockviz.core.hashing import split_block_key
from blockviz.core.ops import op_to_dict
from blockviz.scenario import load
from blockviz.scenario.load import load_text
from blockviz.sim.runner import run
from blockviz.teach.labels import HashLabels

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
HYBRID = ["sliding-window", "window-hit-sparse", "window-hit-dense", "gemma-five-to-one",
          "gpt-oss-window-first", "llama4-chunked-local", "hybrid-preempt"]


@cache
def lesson(name: str):
    """(scenario, timeline, hash labels) of a lesson, run once, invariants checked."""
    loaded = load(SCENARIOS / f"{name}.yaml")
    _, tl = run(loaded, check=True)
    assert tl.error is None, tl.error
    return loaded.scenario, tl, HashLabels.for_timeline(tl)


def snap(name: str, i: int):
    return lesson(name)[1].step(i)


def ops(name: str, i: int, *kinds: str) -> list[dict]:
    return [op_to_dict(o) for o in snap(name, i).ops if not kinds or o.kind in kinds]


def tables(name: str, i: int, rid: str) -> tuple[tuple[int, ...], ...]:
    return snap(name, i).requests[rid].block_tables.tables


def keys(name: str, i: int) -> list[str]:
    """The hash table's keys after step i, as labels (H3#1: hash H3 cached under group 1)."""
    labels = lesson(name)[2]
    return [labels(h) for h, _ in snap(name, i).hash_table]


def admitted(name: str, i: int) -> dict[str, int]:
    """Request -> hit tokens, for the requests step i admitted (or resumed)."""
    return {s.request_id: s.local_hit_tokens for es in snap(name, i).engine_steps
            for s in es.scheduled if s.admitted}


def lookups(name: str, i: int) -> list[tuple[str, int, int]]:
    """(request, reconciled hit, shared_prefix_boundary) of step i's lookups."""
    return [(o["request"], o.get("num_hit_tokens", 0), o.get("shared_prefix_boundary", 0))
            for o in ops(name, i, "lookup")]


def variant(name: str, old: str, new: str):
    text = (SCENARIOS / f"{name}.yaml").read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    _, tl = run(load_text(text.replace(old, new), f"{name}.yaml"), payloads=False)
    return tl


def test_every_hybrid_lesson_is_tested_here():
    assert sorted(HYBRID) == sorted(p.stem for p in SCENARIOS.glob("*.yaml")
                                    if load(p).scenario.config.kv_cache_groups is not None)


def test_every_hybrid_lesson_has_groups_and_runs_with_checks():
    for name in HYBRID:
        sc, tl, _ = lesson(name)
        assert sc.config.kv_cache_groups and len(sc.config.kv_cache_groups) >= 2, name
        for i in range(len(tl)):
            s = tl.step(i)
            # the null block: in tables, never queued, cached or counted
            assert 0 not in s.free_queue and s.ref_cnt[0] == 0 and s.block_hash[0] is None
            assert all(0 not in ids for _, ids in s.hash_table)


# -- sliding-window ----------------------------------------------------------------------------
def test_sliding_window_hands_out_of_window_blocks_back_to_the_head_or_the_tail():
    n = "sliding-window"
    assert tables(n, 3, "A") == ((1, 3, 5), (2, 4, 6))
    # step 4: tokens 1-4 left the window: block 2 (slot 0) -> null, freed to the head, and full
    # attention's allocation takes it back at once
    (skip,) = ops(n, 4, "remove_skipped")
    assert (skip["block_ids"], skip["block_indices"], skip["group"]) == ([2], [0], 1)
    assert [(o["op"], o["block_ids"], o.get("group", 0)) for o in ops(n, 4, "free_head", "popleft")] \
        == [("free_head", [2], 1), ("popleft", [2], 0), ("popleft", [7], 1)]
    assert tables(n, 4, "A") == ((1, 3, 5, 2), (0, 4, 6, 7))
    # step 5: block 4 the same way; the prefill ends and A samples
    assert [o["block_ids"] for o in ops(n, 5, "remove_skipped")] == [[4]]
    assert tables(n, 5, "A") == ((1, 3, 5, 2, 4), (0, 0, 6, 7, 8))
    assert snap(n, 5).requests["A"].num_tokens == 21
    # step 6: block 6 carries H3#1, so it goes to the tail and stays cached
    assert [o["block_ids"] for o in ops(n, 6, "free_tail")] == [[6]]
    assert snap(n, 6).free_queue[-1] == 6 and "H3#1" in keys(n, 6)
    assert tables(n, 6, "A") == ((1, 3, 5, 2, 4, 9), (0, 0, 0, 7, 8, 10))
    # the window never holds more than 3 real blocks, full attention grows to 6
    for i in range(1, 8):
        fa, sw = tables(n, i, "A")
        assert sum(b != 0 for b in sw) <= 3 and len(fa) == len(sw)
    # retention 0: the window caches only slots 2 and 3 (blocks 6 and 7), the rest is masked
    masked = [b for i in range(1, 9) for o in ops(n, i, "cache") for b in o.get("masked", ())]
    assert masked == [2, 4, 8, 10]
    assert [k for k in keys(n, 8) if k.endswith("#1")] == ["H3#1", "H4#1"]
    # the finish: group 0 reversed, then the window's uncached 10 and 8 to the head
    assert snap(n, 8).free_queue == (10, 8, 11, 12, 6, 7, 9, 4, 2, 5, 3, 1)


# -- window-hit-sparse / window-hit-dense ------------------------------------------------------
def test_the_two_window_hit_lessons_differ_only_in_retention():
    sparse, dense = lesson("window-hit-sparse")[0], lesson("window-hit-dense")[0]
    assert [s.event_dict() for s in sparse.steps] == [s.event_dict() for s in dense.steps]
    a, b = sparse.config.model_dump(), dense.config.model_dump()
    assert (a.pop("prefix_cache_retention_interval"), b.pop("prefix_cache_retention_interval")) \
        == (0, None)
    assert a == b


def test_with_retention_0_the_hit_stops_short_of_what_full_attention_holds():
    s, d = "window-hit-sparse", "window-hit-dense"
    # A: full attention caches 4 blocks; the window 2 (sparse: its checkpoint ending at token 12)
    assert [k for k in keys(s, 1) if k.endswith("#1")] == ["H2#1", "H3#1"]
    assert [k for k in keys(d, 1) if k.endswith("#1")] == ["H1#1", "H2#1", "H3#1", "H4#1"]
    # A's decode block is cached by full attention, by the window only when dense
    assert "H5#0" in keys(s, 2) and "H5#1" not in keys(s, 2) and "H5#1" in keys(d, 2)
    # B, C, D: (hit, shared_prefix_boundary) per request
    assert [lookups(s, i)[0] for i in (3, 4, 5)] == [("B", 0, 8), ("C", 8, 0), ("D", 12, 20)]
    assert [lookups(d, i)[0] for i in (3, 4, 5)] == [("B", 8, 0), ("C", 8, 0), ("D", 20, 0)]
    assert [admitted(s, i) for i in (3, 4, 5)] == [{"B": 0}, {"C": 8}, {"D": 12}]
    # B's miss made its window cache the blocks ending at its junction (token 8): H1#1 appears
    assert "H1#1" not in keys(s, 2) and "H1#1" in keys(s, 3)
    # full attention held all of D's 20 tokens in both runs
    assert all(f"H{k}#0" in keys(s, 4) for k in range(1, 6))
    st_s, st_d = snap(s, 5).stats, snap(d, 5).stats
    assert (st_s.queries, st_s.hits, st_d.queries, st_d.hits) == (65, 20, 65, 36)
    # no eviction muddles the comparison: every difference is the retention's
    assert not any(ops(x, i, "evict") for x in (s, d) for i in range(1, 5))


# -- gemma-five-to-one -------------------------------------------------------------------------
def test_gemma_like_model_takes_a_block_per_group_and_hits_only_with_all_five_copies():
    n = "gemma-five-to-one"
    sc, tl, _ = lesson(n)
    assert [g.type for g in sc.config.kv_cache_groups] == ["sliding_window"] * 5 + ["full_attention"]
    assert tables(n, 1, "A") == ((1,), (2,), (3,), (4,), (5,), (6,))
    assert sum(len(t) for t in tables(n, 2, "A")) == 12
    # step 3: each window frees slot 0 to the head (5 4 3 2 1 after all five); group g takes 5-g
    assert [o["block_ids"] for o in ops(n, 3, "remove_skipped")] == [[1], [2], [3], [4], [5]]
    assert tables(n, 3, "A") == ((0, 7, 5), (0, 8, 4), (0, 9, 3), (0, 10, 2), (0, 11, 1),
                                 (6, 12, 13))
    assert keys(n, 3)[-6:] == ["H3#0", "H3#1", "H3#2", "H3#3", "H3#4", "H3#5"]
    # step 4: A holds 14 blocks: 4 of full attention, 2 per window
    held = tables(n, 4, "A")
    assert [sum(b != 0 for b in t) for t in held] == [2, 2, 2, 2, 2, 4]
    # step 5: group 0's copy of H3 (block 5) is the first cached block from the head
    s5 = snap(n, 5)
    assert next(b for b in s5.free_queue if s5.block_hash[b] is not None) == 5
    # B (before the rewind): full attention 16, the windows 12 -> hit 12
    assert lookups(n, 7) == [("B", 12, 16)] and admitted(n, 7) == {"B": 12}
    # X's second chunk evicts block 5: H3 under group 0, and only it
    (ev,) = ops(n, 10, "evict")
    assert ev["block_ids"] == [5] and "group" not in ev
    assert {"H3#1", "H3#2", "H3#3", "H3#4", "H1#5", "H2#5", "H3#5", "H4#5"} <= set(keys(n, 10))
    assert "H3#0" not in keys(n, 10)
    # C asks what B asked and hits nothing
    assert lookups(n, 11) == [("C", 0, 16)] and admitted(n, 11) == {"C": 0}


def test_gemma_like_admission_caps_each_window_and_16_blocks_would_never_admit_a():
    n = "gemma-five-to-one"
    assert not ops(n, 1, "alloc_failed") and admitted(n, 1) == {"A": 0}
    small = variant(n, "num_blocks: 20", "num_blocks: 16")
    for i in range(1, 6):
        (f,) = [op_to_dict(o) for o in small.step(i).ops if o.kind == "alloc_failed"]
        assert (f["request"], f["blocks_needed"], f["blocks_free"], f["full_sequence"]) == \
            ("A", 19, 16, True)


# -- gpt-oss-window-first ------------------------------------------------------------------------
def test_window_first_means_the_windows_blocks_are_evicted_first():
    n = "gpt-oss-window-first"
    assert tables(n, 1, "A") == ((1, 2, 3), (4, 5, 6))        # the window allocates first
    assert [k for k in keys(n, 1)] == ["H1#0", "H2#0", "H1#1", "H2#1", "H3#1"]
    # after A's finish the window's cached blocks 1, 2 sit ahead of full attention's 6, 5, 4
    assert snap(n, 2).free_queue == (8, 7, 3, 9, 10, 11, 12, 1, 2, 6, 5, 4)
    assert admitted(n, 3) == {"B": 8}
    # X evicts the window's copy of the shared second block; full attention keeps both
    evicted = {(o["block_ids"][0], o.get("group", 0)) for o in ops(n, 4, "evict")}
    assert evicted == {(6, 1), (2, 0)}
    assert {"H1#1", "H2#1", "H1#0"} <= set(keys(n, 4)) and "H2#0" not in keys(n, 4)
    # C: full attention 8, the window only block 0 -> the shorter run from the start: 4
    assert lookups(n, 5) == [("C", 4, 8)] and admitted(n, 5) == {"C": 4}


# -- llama4-chunked-local --------------------------------------------------------------------------
def test_chunked_groups_drop_a_whole_chunk_and_hit_with_the_current_chunk_only():
    n = "llama4-chunked-local"
    sc = lesson(n)[0]
    assert [g.type for g in sc.config.kv_cache_groups] == ["chunked_local_attention"] * 3 + \
        ["full_attention"]
    # every full block is cached in every group (no retention mask for chunked-local)
    assert keys(n, 2) == [f"H{k}#{g}" for k in (1, 2) for g in range(4)]
    # step 3: token 9 starts chunk 2: each chunked group frees slots 1 and 0 at once, to the tail
    assert [(o["block_ids"], o["block_indices"]) for o in ops(n, 3, "remove_skipped")] == \
        [([5, 1], [1, 0]), ([6, 2], [1, 0]), ([7, 3], [1, 0])]
    assert snap(n, 3).free_queue == (13, 14, 15, 16, 5, 1, 6, 2, 7, 3)
    assert [sum(b != 0 for b in t) for t in tables(n, 4, "A")] == [2, 2, 2, 4]
    # step 5: chunk 3 begins, and the new blocks evict cached blocks of chunk 1
    assert [o["block_ids"][0] for o in ops(n, 5, "evict")] == [5, 1, 6, 2]
    # B hits all 20 tokens though chunk 1 and part of chunk 2 are gone from the chunked groups
    gone = {"H1#0", "H2#0", "H1#1", "H2#1", "H1#2", "H2#2", "H3#0", "H4#0"}
    assert not gone & set(keys(n, 6)) and {"H5#0", "H5#1", "H5#2"} <= set(keys(n, 6))
    assert lookups(n, 7) == [("B", 20, 0)] and admitted(n, 7) == {"B": 20}
    pads = [o for o in ops(n, 7, "remove_skipped")]
    assert [(o["block_ids"], o["block_indices"]) for o in pads] == [([], [0, 1, 2, 3])] * 3


# -- hybrid-preempt ------------------------------------------------------------------------------
def test_preemption_frees_the_victim_group_by_group_and_its_resume_stops_at_the_checkpoint():
    n = "hybrid-preempt"
    assert admitted(n, 2) == {"B": 4}
    assert snap(n, 2).ref_cnt[1] == snap(n, 2).ref_cnt[3] == 2
    assert tables(n, 3, "B")[1][0] == 0 and snap(n, 3).ref_cnt[3] == 1   # B let go of block 3
    assert snap(n, 4).free_queue == (3,)
    # step 5: A needs 2 blocks, 1 is free -> the last running request, B, is preempted
    (fail,) = ops(n, 5, "alloc_failed")
    assert (fail["request"], fail["blocks_needed"], fail["blocks_free"]) == ("A", 2, 1)
    assert [o["request"] for o in ops(n, 5, "preempt")] == ["B"]
    frees = [(o["block_ids"], o.get("group", 0)) for o in ops(n, 5, "free")]
    assert frees == [([11, 8, 7, 1], 0), ([12, 10, 9], 1)]
    assert tables(n, 5, "A") == ((1, 2, 5, 12), (0, 4, 6, 10))
    assert snap(n, 5).free_queue == (11, 3, 8, 7, 9)
    # step 6: B's return is tried before A finishes, and does not fit
    assert lookups(n, 6) == [("B", 8, 12)]
    (fail,) = ops(n, 6, "alloc_failed")
    assert (fail["blocks_needed"], fail["blocks_free"], fail["full_sequence"]) == (7, 5, True)
    assert snap(n, 6).requests["A"].finish_reason == "length"
    # step 7: B resumes with 8, full attention alone would give 12
    assert lookups(n, 7) == [("B", 8, 12)] and admitted(n, 7) == {"B": 8}
    st = snap(n, 7).stats
    assert (st.queries, st.hits, st.preempted_queries, st.preempted_hits) == (20, 4, 16, 8)


def test_hash_keys_name_the_hash_once_across_groups():
    """H3#0 and H3#1 are one BlockHash: their bare hashes are equal."""
    n = "sliding-window"
    table = dict((lesson(n)[2](h), h) for h, _ in snap(n, 4).hash_table)
    assert split_block_key(table["H3#0"])[0] == split_block_key(table["H3#1"])[0]
    assert split_block_key(table["H3#1"])[1] == 1


def test_step_into_shows_every_groups_table_at_each_op():
    """Op frames follow each group's table: in sliding-window's step 4 the window's slot 0 turns
    null at remove_skipped, full attention gets block 2 back at its get_new_blocks, the window
    block 7 at its own; at every frame the tables hold exactly the blocks the ref counts count
    (but between remove_skipped and the free that follows it: vLLM nulls the slot first)."""
    n = "sliding-window"
    tl = lesson(n)[1]
    seen = []
    for f in tl.frames(4):
        a = f.requests["A"].block_tables.tables
        seen.append((f.op.kind, getattr(f.op, "group", 0), a))
        held = [b for t in a for b in t if b]
        if f.op.kind != "remove_skipped":
            assert sorted(held) == [b for b in range(1, len(f.ref_cnt)) for _ in range(f.ref_cnt[b])]
    assert ("remove_skipped", 1, ((1, 3, 5), (0, 4, 6))) in seen
    assert ("popleft", 0, ((1, 3, 5, 2), (0, 4, 6))) in seen
    assert ("popleft", 1, ((1, 3, 5, 2), (0, 4, 6, 7))) in seen
    # a hit's padding: gemma's B (step 7) gets two null slots, then its touched block, per window
    f = [f for f in lesson("gemma-five-to-one")[1].frames(7) if f.op.kind == "touch"][-1]
    assert f.requests["B"].block_tables.tables == ((0, 0, 5), (0, 0, 4), (0, 0, 3), (0, 0, 2), (0, 0, 1),
                                                   (6, 12, 13))
