"""The built-in lessons say what the engine does: each test runs a lesson (invariants checked after
every op) and asserts the facts its narration teaches, step by step, so a note cannot drift from
the run it describes.

Step numbers below are the lesson's steps, 1-based, as ``python -m blockviz play`` shows them;
``tl.snapshot(i)`` is the state after step i.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from blockviz.core.hashing import BlockHasher, hash_to_event_int
from blockviz.core.ops import op_to_dict
from blockviz.scenario import load
from blockviz.sim.runner import run

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
LESSONS = ["last-token-rule", "eviction-order", "preempt-resume", "tenants-and-lora",
           "free-order-split", "free-order-append", "hash-seed-random", "hash-seed-shared",
           "decode-fills-block", "external-tier"]


@cache
def lesson(name: str):
    """(scenario, timeline) of a lesson, run once per test session with invariants checked."""
    loaded = load(SCENARIOS / f"{name}.yaml")
    _, tl = run(loaded, check=True)
    assert tl.error is None, tl.error
    return loaded.scenario, tl


@cache
def unchecked(name: str):
    """The same lesson run without invariant checks. With ``check=True`` the runner swaps the op
    list of the engine and pool but not the external tier's, so its save/drop ops go missing from
    that timeline; the tier's ops are read from this run instead."""
    _, tl = run(load(SCENARIOS / f"{name}.yaml"))
    assert tl.error is None, tl.error
    return tl


def tier_ops(name: str, i: int, kind: str) -> list[dict]:
    return [d for d in map(op_to_dict, unchecked(name).snapshot(i).ops) if d["op"] == kind]


def snap(name: str, i: int):
    return lesson(name)[1].snapshot(i)


def ops(name: str, i: int, kind: str | None = None) -> list[dict]:
    out = [op_to_dict(op) for op in snap(name, i).ops]
    return [o for o in out if kind is None or o["op"] == kind]


def table(name: str, i: int) -> dict[bytes, tuple[int, ...]]:
    return dict(snap(name, i).hash_table)


def req(name: str, i: int, rid: str):
    return snap(name, i).requests[rid]


def note(name: str, i: int) -> str:
    step = lesson(name)[0].steps[i - 1]
    return f"{step.note.en}\n{step.note.zh}"


# -- every lesson ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", LESSONS)
def test_lesson_is_complete_and_runs(name):
    scenario, tl = lesson(name)
    assert scenario.id == name
    assert 5 <= len(scenario.steps) <= 14
    assert 4 <= scenario.config.num_blocks <= 12
    assert len(scenario.title.en) <= 40 and scenario.title.zh
    for text in (scenario.title, scenario.summary, scenario.start_note):
        assert text is not None and text.en and text.zh
    for i, step in enumerate(scenario.steps, 1):
        assert step.note is not None and step.note.en and step.note.zh, f"step {i} has no note"
    assert len(tl) == len(scenario.steps) + 1


# -- last-token-rule ---------------------------------------------------------------------------
def test_last_token_rule_caps_the_hit_and_duplicates_h2():
    n = "last-token-rule"
    h1, h2 = snap(n, 1).block_hash[1], snap(n, 1).block_hash[2]
    assert h1 is not None and h2 is not None
    # B = exactly the 8 cached tokens: limit 7 -> only block 1 hits; tokens 5-8 go to block 3
    (lookup,) = ops(n, 3, "lookup")
    assert lookup["block_ids"] == [1] and lookup["hit_tokens_limit"] == 7
    assert req(n, 3, "B").block_ids == (1, 3)
    assert snap(n, 3).stats.prefix_cache_hits == 4
    # block 3 is cached as a second copy of H2, while block 2 (same K/V) idles in the free queue
    assert snap(n, 3).block_hash[3] == h2
    assert table(n, 3)[h2] == (2, 3)
    assert 2 in snap(n, 3).free_queue and snap(n, 3).ref_cnt[2] == 0
    assert snap(n, 4).hash_table == snap(n, 3).hash_table          # the narration-only step
    # C = 9 tokens: limit 8 -> both blocks; the lookup of H2 returns the first entry, block 2
    assert req(n, 5, "C").block_ids == (1, 2, 4)
    assert snap(n, 5).stats.prefix_cache_hits - snap(n, 3).stats.prefix_cache_hits == 8
    assert 2 not in snap(n, 5).free_queue
    # B frees [1, 3] reversed: block 3 (H2) to the tail, block 1 only drops to 1
    assert snap(n, 6).free_queue == (5, 6, 3) and snap(n, 6).ref_cnt[1] == 1
    # D takes 5, 6, 3: block 3's copy of H2 is evicted by (hash, id); H2 -> block 2 remains
    assert [o["block_ids"] for o in ops(n, 7, "popleft")] == [[5, 6, 3]]
    assert [o["block_ids"] for o in ops(n, 7, "evict")] == [[3]]
    assert table(n, 7)[h2] == (2,) and snap(n, 7).block_hash[2] == h2
    removed = [e for e in snap(n, 7).kv_events if e["type"] == "BlockRemoved"]
    assert [e["block_hashes"] for e in removed] == [[hash_to_event_int(h2)]]


# -- eviction-order ----------------------------------------------------------------------------
def test_eviction_order_evicts_tails_first_and_keeps_the_shared_block():
    n = "eviction-order"
    s1 = snap(n, 1)
    h1, a2, a3 = s1.block_hash[1], s1.block_hash[2], s1.block_hash[3]
    assert req(n, 1, "A").block_ids == (1, 2, 3) and None not in (h1, a2, a3)
    assert snap(n, 2).free_queue == (4, 5, 6, 7, 8, 3, 2, 1)
    assert req(n, 3, "B").block_ids == (1, 4, 5)
    assert [o["block_ids"] for o in ops(n, 3, "lookup")] == [[1]]
    b2, b3 = snap(n, 3).block_hash[4], snap(n, 3).block_hash[5]
    assert snap(n, 4).free_queue == (6, 7, 8, 3, 2, 5, 4, 1)
    # X: 6, 7, 8, then A's tail (3) before A's middle (2)
    assert [o["block_ids"] for o in ops(n, 5, "popleft")] == [[6, 7, 8, 3, 2]]
    assert [(o["block_ids"], o["hash"]) for o in ops(n, 5, "evict")] == [
        ([3], a3.hex()), ([2], a2.hex())]
    assert snap(n, 5).free_queue == (5, 4, 1)
    assert h1 in table(n, 5) and a2 not in table(n, 5) and a3 not in table(n, 5)
    # C = A's prompt again: only block 1 hits; B's tail (5) then middle (4) are evicted for it
    (lookup,) = ops(n, 6, "lookup")
    assert lookup["block_ids"] == [1]
    assert snap(n, 6).stats.prefix_cache_hits - snap(n, 5).stats.prefix_cache_hits == 4
    assert [(o["block_ids"], o["hash"]) for o in ops(n, 6, "evict")] == [
        ([5], b3.hex()), ([4], b2.hex())]
    assert req(n, 6, "C").block_ids == (1, 5, 4)
    assert snap(n, 6).block_hash[5] == a2 and snap(n, 6).block_hash[4] == a3
    assert snap(n, 6).block_hash[1] == h1            # the shared first block outlived the rest


# -- preempt-resume ----------------------------------------------------------------------------
def test_preempt_resume_preempts_the_last_and_re_hits_its_prefix():
    n = "preempt-resume"
    assert req(n, 2, "B").block_ids == (1, 3) and snap(n, 2).ref_cnt[1] == 2
    # the decode: A runs short, B (last running) is preempted, A retries and gets block 5
    s = snap(n, 3)
    fails = ops(n, 3, "alloc_failed")
    assert [o["request"] for o in fails] == ["A"]
    assert [o["request"] for o in ops(n, 3, "preempt")] == ["B"]
    assert not ops(n, 3, "admit")                             # a decode never admits
    b = s.requests["B"]
    assert b.status == "preempted" and b.num_computed_tokens == 0 and b.block_ids == ()
    assert b.num_tokens == 12 and b.num_prompt_tokens == 6
    assert s.waiting == ("B",) and s.running == ("A",)
    assert s.requests["A"].block_ids == (1, 2, 4, 5)
    assert s.ref_cnt[1] == 1                                  # shared block survives, ref only drops
    h3 = s.block_hash[3]
    assert h3 is not None and s.free_queue == (3,) and table(n, 3)[h3] == (3,)
    assert s.block_hash[5] is None                            # B's partial block had no hash
    frees = [o for o in ops(n, 3) if o["op"] in ("free_head", "free_tail")]
    assert [(o["op"], o["block_ids"]) for o in frees] == [("free_head", [5]), ("free_tail", [3])]
    assert s.stats.preemptions == 1
    # first step: B's admission fails (needs 2, 1 free); A finishes at max_tokens
    (fail,) = ops(n, 5, "alloc_failed")
    assert fail["request"] == "B" and (fail["blocks_needed"], fail["blocks_free"]) == (2, 1)
    assert req(n, 5, "A").status == "finished" and req(n, 5, "B").status == "preempted"
    # second step: B resumes, re-hitting H1 and its own H3; recomputes 4 tokens into block 5
    s6, s5 = snap(n, 6), snap(n, 5)
    assert s6.requests["B"].status == "running" and s6.requests["B"].block_ids == (1, 3, 5)
    (admit,) = ops(n, 6, "admit")
    assert (admit["local_hit_tokens"], admit["num_new_tokens"]) == (8, 4)
    assert (s5.stats.prefix_cache_hits, s6.stats.prefix_cache_hits) == (4, 12)
    assert s6.stats.prefix_cache_queries - s5.stats.prefix_cache_queries == 12
    assert s6.block_hash[3] == h3 and s6.block_hash[5] is not None


# -- tenants-and-lora --------------------------------------------------------------------------
def test_salt_and_lora_separate_the_chains():
    n = "tenants-and-lora"
    toks = req(n, 1, "A").token_ids
    assert all(req(n, 5, r).token_ids[:8] == toks[:8] for r in "ABCDE")
    s = snap(n, 5)
    acme = (s.block_hash[1], s.block_hash[2])
    globex = (s.block_hash[4], s.block_hash[5])
    lora = (s.block_hash[8], s.block_hash[9])
    assert len(set(acme + globex + lora)) == 6
    # the salt enters the first block's extra keys only; LoRA enters every block's
    hasher = BlockHasher("sha256")
    assert acme[0] == hasher.hash_block_tokens(None, toks[:4], (("cache_salt", "acme"),))
    assert acme[1] == hasher.hash_block_tokens(acme[0], toks[4:8], None)
    assert globex[0] == hasher.hash_block_tokens(None, toks[:4], (("cache_salt", "globex"),))
    assert globex[1] == hasher.hash_block_tokens(globex[0], toks[4:8], None)
    key = (("lora", "sql-adapter", "/loras/sql"),)
    assert lora[0] == hasher.hash_block_tokens(None, toks[:4], key)
    assert lora[1] == hasher.hash_block_tokens(lora[0], toks[4:8], key)
    plain = hasher.hash_block_tokens(None, toks[:4], None)
    assert plain not in (acme[0], globex[0], lora[0])
    # hits: only the same salt / the same adapter
    hits = [snap(n, i).stats.prefix_cache_hits for i in range(6)]
    assert hits == [0, 0, 0, 8, 8, 16]
    assert req(n, 2, "B").block_ids == (4, 5, 6)
    assert req(n, 3, "C").block_ids == (1, 2, 7)
    assert req(n, 4, "D").block_ids == (8, 9, 10)
    assert req(n, 5, "E").block_ids == (8, 9, 11)
    assert s.ref_cnt[1] == s.ref_cnt[2] == s.ref_cnt[8] == s.ref_cnt[9] == 2


# -- free-order-split / free-order-append ------------------------------------------------------
def test_free_order_files_differ_only_in_free_order():
    split, append = lesson("free-order-split")[0], lesson("free-order-append")[0]
    assert [s.event_dict() for s in split.steps] == [s.event_dict() for s in append.steps]
    a = split.config.model_dump()
    b = append.config.model_dump()
    assert (a.pop("free_order"), b.pop("free_order")) == ("split", "append")
    assert a == b and a["hash_seed"] is not None


def test_split_keeps_the_system_prompt_that_append_evicts():
    s, a = "free-order-split", "free-order-append"
    h1 = snap(s, 1).block_hash[1]
    assert snap(a, 1).block_hash[1] == h1                      # same seed -> same hashes
    assert snap(s, 3).free_queue == snap(a, 3).free_queue == (2, 1)
    assert snap(s, 4).free_queue == (4, 2, 1, 3)
    assert snap(a, 4).free_queue == (2, 1, 4, 3)
    # C takes two blocks from the head: nothing cached under split, H1 under append
    assert [o["block_ids"] for o in ops(s, 5, "popleft")] == [[4, 2]] and not ops(s, 5, "evict")
    assert [o["block_ids"] for o in ops(a, 5, "popleft")] == [[2, 1]]
    assert [(o["block_ids"], o["hash"]) for o in ops(a, 5, "evict")] == [([1], h1.hex())]
    # D: a hit under split, a miss under append
    assert req(s, 6, "D").block_ids == (1, 3) and snap(s, 6).stats.prefix_cache_hits == 4
    assert req(a, 6, "D").block_ids == (4, 3) and snap(a, 6).stats.prefix_cache_hits == 0
    assert snap(s, 6).stats.evictions == 1 and snap(a, 6).stats.evictions == 2
    assert snap(a, 6).block_hash[4] == h1                      # recomputed and cached again


# -- hash-seed-random / hash-seed-shared -------------------------------------------------------
def test_hash_seed_files_differ_only_in_the_seed():
    r, s = lesson("hash-seed-random")[0], lesson("hash-seed-shared")[0]
    assert [x.event_dict() for x in r.steps] == [x.event_dict() for x in s.steps]
    a, b = r.config.model_dump(), s.config.model_dump()
    assert (a.pop("hash_seed"), b.pop("hash_seed")) == (None, "1234")
    assert a == b and a["hash_algo"] == "xxhash" and a["connector"] is not None


def test_random_seed_loses_the_external_tier_after_restart():
    n = "hash-seed-random"
    before, after = snap(n, 0).none_hash.hex(), snap(n, 3).none_hash.hex()
    assert before.startswith("ab7628017559") and after.startswith("0f7e9e0f731b")
    assert "ab7628017559" in lesson(n)[0].start_note.en and after[:12] in note(n, 3)
    saved = [h for h, _ in snap(n, 2).external]
    assert saved == [snap(n, 1).block_hash[1], snap(n, 1).block_hash[2]]
    assert snap(n, 3).hash_table == () and [h for h, _ in snap(n, 3).external] == saved
    s4 = snap(n, 4)
    assert s4.block_hash[1] not in saved and s4.stats.external_hits == 0
    assert not ops(n, 4, "load")
    (admit,) = ops(n, 4, "admit")
    assert (admit["local_hit_tokens"], admit["external_hit_tokens"]) == (0, 0)
    assert len(tier_ops(n, 5, "save")) == 2
    tier = [h for h, _ in snap(n, 5).external]
    assert tier == saved + [s4.block_hash[1], s4.block_hash[2]]   # the same K/V, saved twice
    assert [t for _, t in snap(n, 5).external][:2] == [t for _, t in snap(n, 5).external][2:]


def test_shared_seed_finds_the_external_tier_after_restart():
    n = "hash-seed-shared"
    assert {snap(n, i).none_hash.hex()[:12] for i in range(6)} == {"28974bb42b4a"}
    assert "28974bb42b4a" in lesson(n)[0].start_note.en and "28974bb42b4a" in note(n, 3)
    saved = [h for h, _ in snap(n, 2).external]
    assert snap(n, 3).hash_table == ()
    s4 = snap(n, 4)
    assert [s4.block_hash[1], s4.block_hash[2]] == saved
    assert (s4.stats.prefix_cache_hits, s4.stats.external_hits) == (0, 8)
    assert req(n, 4, "B").block_ids == (1, 2, 3)
    assert [o["block_ids"] for o in ops(n, 4, "load")] == [[1], [2]]
    assert table(n, 4) == {saved[0]: (1,), saved[1]: (2,)}
    assert [o["hash"] for o in tier_ops(n, 2, "save")] == [h.hex() for h in saved]
    assert not tier_ops(n, 5, "save") and [h for h, _ in snap(n, 5).external] == saved


# -- decode-fills-block ------------------------------------------------------------------------
def test_a_block_filled_by_decoding_is_cached_at_the_next_schedule():
    n = "decode-fills-block"
    loaded = load(SCENARIOS / f"{n}.yaml")
    a = req(n, 1, "A")
    assert a.block_ids == (1, 2) and (a.num_tokens, a.num_computed_tokens) == (7, 6)
    assert snap(n, 1).block_hash[2] is None
    # after one decode: 8 tokens, the request already has H2, the pool does not
    engine, _ = run(loaded, upto=2)
    request = engine.scheduler.requests["A"]
    assert request.num_tokens == 8 and len(request.block_hashes) == 2
    h2 = request.block_hashes[1]
    assert snap(n, 2).block_hash[2] is None and h2 not in table(n, 2)
    assert not ops(n, 2, "popleft")
    # the next decode caches block 2 at schedule time, before the forward pass writes slot 4
    kinds = [(o["op"], o["block_ids"]) for o in ops(n, 3) if o["op"] in ("cache", "write")]
    assert kinds == [("cache", [2]), ("write", [2])]
    assert ops(n, 3, "write")[0]["offset"] == 3
    assert snap(n, 3).block_hash[2] == h2 and table(n, 3)[h2] == (2,)
    # B repeats A's 6 prompt tokens and its first 2 outputs: both blocks hit
    a3 = req(n, 3, "A")
    b = req(n, 4, "B")
    assert b.token_ids[:8] == a3.token_ids[:8] and a3.num_prompt_tokens == 6
    assert b.block_ids == (1, 2, 3) and snap(n, 4).ref_cnt[2] == 2
    assert snap(n, 4).stats.prefix_cache_hits == 8
    # A moves on to a fresh block; the shared full block is never written again
    assert req(n, 5, "A").block_ids == (1, 2, 4)
    assert all(o["block_ids"] != [2] for o in ops(n, 5, "write"))


# -- external-tier -----------------------------------------------------------------------------
def test_external_tier_local_first_then_external():
    n = "external-tier"
    s1 = snap(n, 1)
    h1, h2, h3 = (s1.block_hash[i] for i in (1, 2, 3))
    assert (s1.stats.external_queries, s1.stats.external_hits) == (12, 0)
    assert [h for h, _ in snap(n, 2).external] == [h1, h2, h3]
    # X evicts A's tail blocks from the GPU, tails first
    assert [o["block_ids"] for o in ops(n, 3, "evict")] == [[3], [2]]
    assert h1 in table(n, 3) and h2 not in table(n, 3) and h3 not in table(n, 3)
    # X's four full blocks are saved; the tier (6) drops its least recently used entry, H1
    assert len(tier_ops(n, 4, "save")) == 4
    assert [o["hash"] for o in tier_ops(n, 4, "drop")] == [h1.hex()]
    tier4 = [h for h, _ in snap(n, 4).external]
    assert len(tier4) == 6 and h1 not in tier4 and tier4[:2] == [h2, h3]
    # B: H1 from the GPU (4 tokens), H2 and H3 from the tier (8 of 9 asked)
    s3, s4, s5 = snap(n, 3), snap(n, 4), snap(n, 5)
    assert s5.stats.prefix_cache_hits - s4.stats.prefix_cache_hits == 4
    assert s5.stats.external_hits - s4.stats.external_hits == 8
    assert s5.stats.external_queries - s4.stats.external_queries == 9
    assert s4.stats.external_queries == s3.stats.external_queries
    assert req(n, 5, "B").block_ids == (1, 2, 3, 6)
    assert [o["block_ids"] for o in ops(n, 5, "load")] == [[2], [3]]
    assert [o["block_ids"] for o in ops(n, 5, "evict")] == [[3], [6]]
    assert table(n, 5)[h2] == (2,) and table(n, 5)[h3] == (3,)
    assert [h for h, _ in s5.external][-2:] == [h2, h3]       # now most recently used
    loaded = [t for o in ops(n, 5, "load") for t in o["token_ids"]]
    assert loaded == list(req(n, 5, "B").token_ids[4:12])
    # C: all three blocks hit locally; the tier supplies nothing
    s6 = snap(n, 6)
    assert s6.stats.prefix_cache_hits - s5.stats.prefix_cache_hits == 12
    assert s6.stats.external_hits == s5.stats.external_hits
    assert s6.stats.external_queries - s5.stats.external_queries == 1
    assert req(n, 6, "C").block_ids == (1, 2, 3, 5) and not ops(n, 6, "load")
