"""The built-in lessons say what the engine does: each test runs a lesson (invariants checked after
every op) and asserts the facts its narration teaches, step by step, so a note cannot drift from
the run it describes.

Step numbers below are the lesson's steps, 1-based, as ``python -m blockviz play`` shows them;
``tl.step(i)`` is the state after step i.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from blockviz.core.hashing import BlockHasher, hash_to_event_int
from blockviz.core.ops import op_to_dict
from blockviz.scenario import load
from blockviz.scenario.load import load_text
from blockviz.scenario.tokens import Vocabulary
from blockviz.sim.runner import run

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
LESSONS = ["six-blocks", "last-token-rule", "eviction-order", "preempt-resume", "tenants-and-lora",
           "free-order-split", "free-order-append", "hash-seed-random", "hash-seed-shared",
           "decode-fills-block", "external-tier", "chunked-prefill", "head-of-line", "async-lag",
           "seats-and-length", "async-load", "prompt-logprobs", "reset-running", "priority-victim",
           "watermark"]
# the hybrid-model lessons (several KV-cache groups): their facts are in test_hybrid_lessons.py
HYBRID = sorted(p.stem for p in SCENARIOS.glob("*.yaml")
                if load(p).scenario.config.kv_cache_groups is not None)


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


def variant(name: str, old: str, new: str):
    """The lesson's timeline with one line of its file changed (a note's "what if"), without
    payloads."""
    text = (SCENARIOS / f"{name}.yaml").read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    _, tl = run(load_text(text.replace(old, new), f"{name}.yaml"), payloads=False)
    assert tl.error is None, tl.error
    return tl


def tier_ops(name: str, i: int, kind: str) -> list[dict]:
    return [d for d in map(op_to_dict, unchecked(name).step(i).ops) if d["op"] == kind]


def snap(name: str, i: int):
    return lesson(name)[1].step(i)


def ops(name: str, i: int, kind: str | None = None) -> list[dict]:
    out = [op_to_dict(op) for op in snap(name, i).ops]
    return [o for o in out if kind is None or o["op"] == kind]


def kinds(name: str, i: int, *wanted: str) -> list[tuple[str, str | None]]:
    """(op, request) of the step's ops of the given kinds, in order."""
    return [(o["op"], o.get("request")) for o in ops(name, i) if o["op"] in wanted]


def table(name: str, i: int) -> dict[bytes, tuple[int, ...]]:
    return dict(snap(name, i).hash_table)


def req(name: str, i: int, rid: str):
    return snap(name, i).requests[rid]


def tokens(name: str, i: int, rid: str) -> tuple[int, int]:
    """(num_tokens, num_computed_tokens) of a request after step i."""
    r = req(name, i, rid)
    return r.num_tokens, r.num_computed_tokens


def scheduled(name: str, i: int, k: int = 0) -> list[tuple]:
    """Engine step k of lesson step i, as (request, tokens, kind, hit tokens, samples), in the
    order vLLM scheduled them; kind is decode, new, resumed or more (a running prefill)."""
    es = snap(name, i).engine_steps[k]
    return [(s.request_id, s.num_tokens,
             "decode" if s.decode else ("resumed" if s.resumed else "new") if s.admitted else "more",
             s.local_hit_tokens + s.external_hit_tokens, s.samples) for s in es.scheduled]


def note(name: str, i: int) -> str:
    step = lesson(name)[0].steps[i - 1]
    return f"{step.note.en}\n{step.note.zh}"


# -- every lesson ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", LESSONS + HYBRID)
def test_lesson_is_complete_and_runs(name):
    scenario, tl = lesson(name)
    assert scenario.id == name
    assert 5 <= len(scenario.steps) <= 14
    # a Gemma-like model's six groups need 19 blocks to admit a 16-token prompt
    assert 4 <= scenario.config.num_blocks <= (20 if name in HYBRID else 16)
    assert len(scenario.title.en) <= 40 and scenario.title.zh
    for text in (scenario.title, scenario.summary, scenario.start_note):
        assert text is not None and text.en and text.zh
    for i, step in enumerate(scenario.steps, 1):
        assert step.note is not None and step.note.en and step.note.zh, f"step {i} has no note"
    assert len(tl) == len(scenario.steps) + 1


def test_every_built_in_lesson_is_tested_here():
    assert sorted(LESSONS + HYBRID) == sorted(p.stem for p in SCENARIOS.glob("*.yaml"))


# -- six-blocks --------------------------------------------------------------------------------
def test_six_blocks_decodes_a_while_b_is_admitted_and_ends_with_the_seed_queue():
    n = "six-blocks"
    assert req(n, 1, "A").block_ids == (1, 2, 3) and tokens(n, 1, "A") == (11, 10)
    s1 = snap(n, 1)
    assert s1.block_hash[1] and s1.block_hash[2] and s1.block_hash[3] is None
    assert s1.free_queue == (4, 5, 6)
    # B's arrival step: A decodes first, into slot 2 of its own block 3; only B takes a block
    assert scheduled(n, 2) == [("A", 1, "decode", 0, True), ("B", 2, "new", 8, True)]
    assert tokens(n, 2, "A") == (12, 11)
    a_write = [o for o in ops(n, 2, "write") if o["request"] == "A"]
    assert [(o["block_ids"], o["offset"]) for o in a_write] == [([3], 2)]
    assert [o["block_ids"] for o in ops(n, 2, "popleft")] == [[4]]
    assert kinds(n, 2, "schedule", "lookup")[:2] == [("schedule", "A"), ("lookup", "B")]
    assert req(n, 2, "B").block_ids == (1, 2, 4) and snap(n, 2).free_queue == (5, 6)
    assert snap(n, 2).ref_cnt[1:5] == (2, 2, 1, 1)
    assert snap(n, 2).block_hash[3] is None                  # 3 of 4 slots: still no hash
    assert snap(n, 3).free_queue == (3, 5, 6) and snap(n, 3).ref_cnt[1:3] == (1, 1)
    s4 = snap(n, 4)
    assert s4.free_queue == (4, 3, 5, 6, 2, 1)
    assert set(table(n, 4)) == {s1.block_hash[1], s1.block_hash[2]}
    (touch,) = ops(n, 6, "touch")
    assert touch["block_ids"] == [1, 2] and touch["removed_from_queue"] == [1, 2]
    assert req(n, 6, "C").block_ids == (1, 2, 4)
    assert snap(n, 7).free_queue == s4.free_queue
    assert [o["block_ids"] for o in ops(n, 8, "popleft")] == [[4, 3, 5, 6, 2, 1]]
    removed = [e for e in snap(n, 8).kv_events if e["type"] == "BlockRemoved"]
    assert len(removed) == 2 and s1.block_hash[1] not in table(n, 8)


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
    # C's step: B decodes first and its 9th token needs block 4; C = 9 tokens: limit 8 -> both
    # blocks, the lookup of H2 returning the first entry, block 2; C's own token in block 5
    assert scheduled(n, 5) == [("B", 1, "decode", 0, True), ("C", 1, "new", 8, True)]
    assert [(o["request"], o["block_ids"]) for o in ops(n, 5, "write")] == [("B", [4]), ("C", [5])]
    assert req(n, 5, "B").block_ids == (1, 3, 4)
    assert req(n, 5, "C").block_ids == (1, 2, 5)
    assert snap(n, 5).stats.prefix_cache_hits - snap(n, 3).stats.prefix_cache_hits == 8
    assert 2 not in snap(n, 5).free_queue
    # B frees [1, 3, 4] reversed: 4 (B's output, no hash) to the head, 3 (H2) to the tail
    assert snap(n, 6).free_queue == (4, 6, 3) and snap(n, 6).ref_cnt[1] == 1
    assert snap(n, 6).block_hash[4] is None
    # D takes 4, 6, 3 while C decodes into its own block 5; block 3's copy of H2 is evicted by
    # (hash, id); H2 -> block 2 remains
    assert scheduled(n, 7)[0] == ("C", 1, "decode", 0, True)
    assert [o["block_ids"] for o in ops(n, 7, "write") if o["request"] == "C"] == [[5]]
    assert [o["block_ids"] for o in ops(n, 7, "popleft")] == [[4, 6, 3]]
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
    # X (19 tokens): 6, 7, 8, then A's tail (3) before A's middle (2); its last block is partial
    assert req(n, 5, "X").num_prompt_tokens == 19
    assert [o["block_ids"] for o in ops(n, 5, "popleft")] == [[6, 7, 8, 3, 2]]
    assert [(o["block_ids"], o["hash"]) for o in ops(n, 5, "evict")] == [
        ([3], a3.hex()), ([2], a2.hex())]
    assert snap(n, 5).free_queue == (5, 4, 1) and snap(n, 5).block_hash[2] is None
    assert h1 in table(n, 5) and a2 not in table(n, 5) and a3 not in table(n, 5)
    # C's step: X decodes first; its 20th token fills block 2, cached at once, no new block
    assert scheduled(n, 6)[0] == ("X", 1, "decode", 0, True)
    assert kinds(n, 6, "cache", "lookup")[:2] == [("cache", "X"), ("lookup", "C")]
    assert snap(n, 6).block_hash[2] is not None and req(n, 6, "X").block_ids == (6, 7, 8, 3, 2)
    # C = A's prompt again: only block 1 hits; B's tail (5) then middle (4) are evicted for it
    (lookup,) = ops(n, 6, "lookup")
    assert lookup["block_ids"] == [1]
    assert snap(n, 6).stats.prefix_cache_hits - snap(n, 5).stats.prefix_cache_hits == 4
    assert [o["block_ids"] for o in ops(n, 6, "popleft")] == [[5, 4]]
    assert [(o["block_ids"], o["hash"]) for o in ops(n, 6, "evict")] == [
        ([5], b3.hex()), ([4], b2.hex())]
    assert req(n, 6, "C").block_ids == (1, 5, 4)
    assert snap(n, 6).block_hash[5] == a2 and snap(n, 6).block_hash[4] == a3
    assert snap(n, 6).block_hash[1] == h1            # the shared first block outlived the rest


# -- preempt-resume ----------------------------------------------------------------------------
def test_preempt_resume_preempts_the_last_and_re_hits_its_prefix():
    n = "preempt-resume"
    assert req(n, 1, "A").block_ids == (1, 2) and tokens(n, 1, "A") == (8, 7)
    # B's step: A decodes its 8th token first, which fills block 2: cached before B's lookup
    assert scheduled(n, 2) == [("A", 1, "decode", 0, True), ("B", 2, "new", 4, True)]
    assert kinds(n, 2, "cache", "lookup") == [("cache", "A"), ("lookup", "B")]
    assert req(n, 2, "B").block_ids == (1, 3) and snap(n, 2).ref_cnt[1] == 2
    assert snap(n, 2).free_queue == (4, 5)
    # four engine steps of two decodes: A takes 4, B fills 3, B takes 5, A fills 4
    s3 = snap(n, 3)
    assert [len(es.scheduled) for es in s3.engine_steps] == [2, 2, 2, 2]
    assert [o["block_ids"] for o in ops(n, 3, "popleft")] == [[4], [5]]
    assert [(o["request"], o["block_ids"]) for o in ops(n, 3, "cache")] == [("B", [3]), ("A", [4])]
    assert s3.free_queue == () and not s3.engine_steps[-1].preempted
    assert req(n, 3, "A").block_ids == (1, 2, 4) and req(n, 3, "B").block_ids == (1, 3, 5)
    assert tokens(n, 3, "A") == (13, 12) and tokens(n, 3, "B") == (11, 10)
    # the step that preempts: A runs short, B (last running) is preempted, A retries, gets 5
    s = snap(n, 4)
    assert [o["request"] for o in ops(n, 4, "alloc_failed")] == ["A"]
    assert [o["request"] for o in ops(n, 4, "preempt")] == ["B"]
    assert not ops(n, 4, "admit") and not ops(n, 4, "lookup")    # a preempting step admits nobody
    assert s.engine_steps[0].preempted == ("B",)
    b = s.requests["B"]
    assert b.status == "preempted" and b.num_computed_tokens == 0 and b.block_ids == ()
    assert b.num_tokens == 11 and b.num_prompt_tokens == 6
    assert s.waiting == ("B",) and s.running == ("A",)
    assert s.requests["A"].block_ids == (1, 2, 4, 5)
    assert s.ref_cnt[1] == 1                                  # shared block survives, ref only drops
    h3 = s.block_hash[3]
    assert h3 is not None and s.free_queue == (3,) and table(n, 4)[h3] == (3,)
    frees = [o for o in ops(n, 4) if o["op"] in ("free_head", "free_tail")]
    assert [(o["op"], o["block_ids"]) for o in frees] == [("free_head", [5]), ("free_tail", [3])]
    assert s.stats.preemptions == 1
    assert snap(n, 5).free_queue == s.free_queue                # the narration-only step
    # next step: B's admission fails (whole sequence: needs 2 free blocks, 1 free); A finishes
    (fail,) = ops(n, 6, "alloc_failed")
    assert fail["request"] == "B" and fail["full_sequence"]
    assert (fail["blocks_needed"], fail["blocks_free"]) == (2, 1)
    a6 = req(n, 6, "A")
    assert a6.status == "finished" and a6.finish_reason == "length"
    assert a6.num_tokens - a6.num_prompt_tokens == 8 and req(n, 6, "B").status == "preempted"
    assert kinds(n, 6, "alloc_failed", "finish") == [("alloc_failed", "B"), ("finish", "A")]
    # then B resumes, re-hitting H1 and its own H3; recomputes 3 tokens into block 5
    s7 = snap(n, 7)
    assert s7.requests["B"].status == "running" and s7.requests["B"].block_ids == (1, 3, 5)
    assert scheduled(n, 7) == [("B", 3, "resumed", 8, True)]
    (admit,) = ops(n, 7, "admit")
    assert (admit["local_hit_tokens"], admit["num_new_tokens"]) == (8, 3)
    assert s7.block_hash[3] == h3
    # vLLM's PrefixCacheStats: the resumed lookup is counted apart, outside the hit rate
    st = s7.stats
    assert (st.requests, st.queries, st.hits) == (2, 13, 4)
    assert (st.preempted_requests, st.preempted_queries, st.preempted_hits) == (1, 11, 8)
    assert round(st.hit_rate * 100) == 31
    assert (st.prefix_cache_hits, st.prefix_cache_queries) == (12, 24)        # 50% together
    assert "4 / 13" in note(n, 7) and "12 / 24" in note(n, 7)


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
    assert req(n, 5, "E").block_ids == (8, 9, 12)
    assert s.ref_cnt[1] == s.ref_cnt[2] == s.ref_cnt[8] == s.ref_cnt[9] == 2
    # every arrival step decodes the running requests first, each into its own blocks
    for i, running in ((2, "A"), (3, "AB"), (4, "ABC"), (5, "ABCD")):
        assert [r for r, _, k, _, _ in scheduled(n, i) if k == "decode"] == list(running)
    assert [o["block_ids"] for o in ops(n, 2, "write")][0] == [3]
    # H5 is A's own third block, filled by its decode in D's step: chained to H2, no adapter
    a4 = req(n, 4, "A").token_ids
    h5 = snap(n, 4).block_hash[3]
    assert h5 == hasher.hash_block_tokens(acme[1], a4[8:12], None)
    assert kinds(n, 4, "cache")[0] == ("cache", "A")
    # E's block is 12: A's 13th token took block 11 first
    assert req(n, 5, "A").block_ids == (1, 2, 3, 11)
    assert [o["block_ids"] for o in ops(n, 5, "popleft")] == [[11], [12]]


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
    # B's step decodes A into its own block 2: 3 of 4 slots, no hash
    for n in (s, a):
        assert scheduled(n, 2)[0] == ("A", 1, "decode", 0, True)
        assert tokens(n, 2, "A") == (8, 7) and snap(n, 2).block_hash[2] is None
        assert snap(n, 2).free_queue == ()
    assert snap(s, 3).free_queue == snap(a, 3).free_queue == (2, 1)
    assert snap(s, 4).free_queue == (4, 2, 1, 3)
    assert snap(a, 4).free_queue == (2, 1, 4, 3)
    # C (7 tokens) takes two blocks from the head: nothing cached under split, H1 under append
    assert req(s, 5, "C").num_prompt_tokens == 7
    assert [o["block_ids"] for o in ops(s, 5, "popleft")] == [[4, 2]] and not ops(s, 5, "evict")
    assert [o["block_ids"] for o in ops(a, 5, "popleft")] == [[2, 1]]
    assert [(o["block_ids"], o["hash"]) for o in ops(a, 5, "evict")] == [([1], h1.hex())]
    # D's step: C's decode fills its own last block (cached, no new block), then D
    assert [o["block_ids"] for o in ops(s, 6, "cache") if o["request"] == "C"] == [[2]]
    assert [o["block_ids"] for o in ops(a, 6, "cache") if o["request"] == "C"] == [[1]]
    assert [o["block_ids"] for o in ops(s, 6, "popleft")] == [[3]]
    assert [o["block_ids"] for o in ops(a, 6, "popleft")] == [[4, 3]]
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
    # the store was issued when A's prompt was scheduled, and is still in flight at its finish
    assert len(tier_ops(n, 1, "save")) == 2 and snap(n, 2).tier.jobs_in_flight
    # the old process drains it before the restart: H1 and H2 stored (tail first in LRU order)
    assert [c[1] for c in snap(n, 3).tier.contents] == ["ready", "ready"]
    assert snap(n, 3).hash_table == () and [h for h, _ in snap(n, 3).external] == saved[::-1]
    s4 = snap(n, 4)
    assert s4.block_hash[1] not in saved and s4.stats.external_hits == 0
    assert not ops(n, 4, "load")
    (admit,) = ops(n, 4, "admit")
    assert (admit["local_hit_tokens"], admit["external_hit_tokens"]) == (0, 0)
    assert len(tier_ops(n, 4, "save")) == 2 and not tier_ops(n, 5, "save")
    tier = [h for h, _ in snap(n, 5).external]
    assert tier == saved[::-1] + [s4.block_hash[1], s4.block_hash[2]]  # the same K/V, twice
    toks = [t for _, t in snap(n, 5).external]
    assert toks[:2][::-1] == toks[2:]


def test_shared_seed_finds_the_external_tier_after_restart():
    n = "hash-seed-shared"
    assert {snap(n, i).none_hash.hex()[:12] for i in range(6)} == {"28974bb42b4a"}
    assert "28974bb42b4a" in lesson(n)[0].start_note.en and "28974bb42b4a" in note(n, 3)
    saved = [h for h, _ in snap(n, 2).external]
    assert snap(n, 3).hash_table == ()
    s4 = snap(n, 4)
    assert [s4.block_hash[1], s4.block_hash[2]] == saved
    assert (s4.stats.prefix_cache_hits, s4.stats.external_hits) == (0, 8)
    assert s4.stats.to_dict()["external_hits_by_source"] == {"host": 8}
    assert req(n, 4, "B").block_ids == (1, 2, 3) and req(n, 4, "B").status == "running"
    assert [o["block_ids"] for o in ops(n, 4, "load")] == [[1], [2]]
    (load_job,) = [j for st in s4.tier.steps for j in st.load_jobs]
    assert load_job.sync, "8 tokens fit the sync budget: loaded within the step"
    assert table(n, 4) == {saved[0]: (1,), saved[1]: (2,)}
    assert [o["hash"] for o in tier_ops(n, 1, "save")] == [h.hex() for h in saved]
    assert not tier_ops(n, 4, "save") and not tier_ops(n, 5, "save")
    assert sorted(h for h, _ in snap(n, 5).external) == sorted(saved)


# -- decode-fills-block ------------------------------------------------------------------------
def test_a_block_filled_by_decoding_is_cached_at_the_next_schedule():
    n = "decode-fills-block"
    loaded = load(SCENARIOS / f"{n}.yaml")
    a = req(n, 1, "A")
    assert a.block_ids == (1, 2) and (a.num_tokens, a.num_computed_tokens) == (7, 6)
    assert snap(n, 1).block_hash[2] is None
    # after one step: 8 tokens, the request already has H2, the pool does not
    assert scheduled(n, 2) == [("A", 1, "decode", 0, True)]
    engine, _ = run(loaded, upto=2)
    request = engine.scheduler.requests["A"]
    assert request.num_tokens == 8 and len(request.block_hashes) == 2
    h2 = request.block_hashes[1]
    assert snap(n, 2).block_hash[2] is None and h2 not in table(n, 2)
    assert not ops(n, 2, "popleft")
    assert [(o["block_ids"], o["offset"]) for o in ops(n, 2, "write")] == [([2], 2)]
    # the next step caches block 2 at schedule time, before the forward pass writes slot 3
    order = [(o["op"], o["block_ids"]) for o in ops(n, 3) if o["op"] in ("cache", "write")]
    assert order == [("cache", [2]), ("write", [2])]
    assert ops(n, 3, "write")[0]["offset"] == 3
    assert snap(n, 3).block_hash[2] == h2 and table(n, 3)[h2] == (2,)
    # B's step: A decodes "blue" first into block 3 from the head; B repeats A's 6 prompt tokens
    # and its first 2 outputs: both blocks hit, "again" goes to block 4
    a3 = req(n, 3, "A")
    b = req(n, 4, "B")
    assert b.token_ids[:8] == a3.token_ids[:8] and a3.num_prompt_tokens == 6
    assert scheduled(n, 4) == [("A", 1, "decode", 0, True), ("B", 1, "new", 8, True)]
    assert [o["block_ids"] for o in ops(n, 4, "popleft")] == [[3], [4]]
    assert kinds(n, 4, "popleft", "lookup")[:2] == [("popleft", None), ("lookup", "B")]
    assert req(n, 4, "A").block_ids == (1, 2, 3)
    assert b.block_ids == (1, 2, 4) and snap(n, 4).ref_cnt[2] == 2
    assert snap(n, 4).stats.prefix_cache_hits == 8
    # both decode; the shared full block is never written again
    assert scheduled(n, 5) == [("A", 1, "decode", 0, True), ("B", 1, "decode", 0, True)]
    assert [(o["request"], o["block_ids"]) for o in ops(n, 5, "write")] == [("A", [3]), ("B", [4])]
    assert all(o["block_ids"] != [2] for n_ in (4, 5) for o in ops(n, n_, "write"))


# -- external-tier -----------------------------------------------------------------------------
def test_external_tier_local_first_then_external():
    n = "external-tier"
    s1 = snap(n, 1)
    h1, h2, h3 = (s1.block_hash[i] for i in (1, 2, 3))
    assert (s1.stats.external_queries, s1.stats.external_hits) == (12, 0)
    # stores issued in A's own step (all three prompt blocks), still in flight; A freed at once
    assert [o["hash"] for o in tier_ops(n, 1, "save")] == [h.hex() for h in (h1, h2, h3)]
    assert [c[1] for c in s1.tier.contents] == ["storing"] * 3 and req(n, 1, "A").block_ids == ()
    # one step later the worker reports it: three BlockStored, medium CPU; LRU tail first
    assert [type(e.event).__name__ for st in snap(n, 2).tier.steps for e in st.events] == \
        ["BlockStored"] * 3
    assert [h for h, _ in snap(n, 2).external] == [h3, h2, h1]
    # X evicts A's tail blocks from the GPU, tails first; the full tier evicts A's tail, H3
    assert [o["block_ids"] for o in ops(n, 3, "evict")] == [[3], [2]]
    assert h1 in table(n, 3) and h2 not in table(n, 3) and h3 not in table(n, 3)
    assert len(tier_ops(n, 3, "save")) == 4
    assert [o["hash"] for o in tier_ops(n, 3, "drop")] == [h3.hex()]
    removed = [e for st in snap(n, 3).tier.steps for e in st.events]
    assert [(type(e.event).__name__, e.hashes) for e in removed] == [("BlockRemoved", (h3,))]
    tier4 = [h for h, _ in snap(n, 4).external]
    assert len(tier4) == 6 and tier4[:2] == [h2, h1] and h3 not in tier4
    # B: H1 from the GPU (4 tokens), H2 from the tier (4 of 9 asked), H3 recomputed
    s4, s5 = snap(n, 4), snap(n, 5)
    assert s5.stats.prefix_cache_hits - s4.stats.prefix_cache_hits == 4
    assert s5.stats.external_hits - s4.stats.external_hits == 4
    assert s5.stats.external_queries - s4.stats.external_queries == 9
    assert s5.stats.to_dict()["external_hits_by_source"] == {"host": 4}
    assert req(n, 5, "B").block_ids == (1, 2, 3, 6)
    assert [o["block_ids"] for o in ops(n, 5, "load")] == [[2]]
    (job,) = [j for st in s5.tier.steps for j in st.load_jobs]
    assert job.sync and job.keys == [h2]
    assert table(n, 5)[h2] == (2,) and table(n, 5)[h3] == (3,)
    loaded = [t for o in ops(n, 5, "load") for t in o["token_ids"]]
    assert loaded == list(req(n, 5, "B").token_ids[4:8])
    # B's new prompt block H3 is stored; the tier evicts H1 (H2 is pinned by its load)
    assert [o["hash"] for o in tier_ops(n, 5, "save")] == [h3.hex()]
    assert [o["hash"] for o in tier_ops(n, 5, "drop")] == [h1.hex()]
    # C: all three blocks hit locally; the tier supplies nothing, H1 is stored again
    s6, s7 = snap(n, 6), snap(n, 7)
    assert s7.stats.prefix_cache_hits - s6.stats.prefix_cache_hits == 12
    assert s7.stats.external_hits == s6.stats.external_hits
    assert s7.stats.external_queries - s6.stats.external_queries == 1
    assert [o["hash"] for o in tier_ops(n, 7, "save")] == [h1.hex()]
    assert all(c[1] == "ready" for c in snap(n, 8).tier.contents)


def test_async_load_delays_the_first_token_sync_does_not():
    n = "async-load"
    s6 = snap(n, 6)
    jobs = [j for st in s6.tier.steps for j in st.load_jobs]
    assert [(j.req_id, j.sync, len(j.keys)) for j in jobs] == [("S", True, 2), ("L", False, 2)]
    # S ran in that step; L waits, holding 4 blocks of which the 2 loading are not cached
    assert scheduled(n, 6) == [("S", 1, "new", 8, True)]
    assert req(n, 6, "L").status == "waiting_for_remote_kvs"
    assert s6.tier.waiting_for_remote_kvs == ("L",) and "L" in s6.waiting
    l_blocks = req(n, 6, "L").block_ids
    assert len(l_blocks) == 4 and all(s6.block_hash[b] is None for b in l_blocks[2:])
    # local first: S cached H1, H2 in the same step, so L hit them locally
    (l_admit,) = [o for o in ops(n, 6, "admit") if o["request"] == "L"]
    assert (l_admit["local_hit_tokens"], l_admit["external_hit_tokens"]) == (8, 8)
    assert (s6.stats.hits, s6.stats.external_hits) == (8, 16)
    # the load is reported in the output of the second step after; L runs from the next one
    assert snap(n, 7).tier.steps[0].finished_recving == ()
    assert snap(n, 8).tier.steps[0].finished_recving == ("L",)
    assert req(n, 8, "L").status == "waiting_for_remote_kvs"
    first_token = {rid: next(i for i in range(6, 11) if len(req(n, i, rid).token_ids)
                             > req(n, i, rid).num_prompt_tokens) for rid in "SL"}
    assert first_token == {"S": 6, "L": 9}, "three steps later"
    assert req(n, 9, "L").num_computed_tokens == 17
    # the request keeps the hits it was admitted with (2 local, 2 from the tier) once it runs
    assert (req(n, 6, "L").local_hit_blocks, req(n, 6, "L").external_hit_blocks) == (2, 2)
    assert (req(n, 9, "L").local_hit_blocks, req(n, 9, "L").external_hit_blocks) == (2, 2)
    assert [snap(n, 9).block_hash[b] for b in l_blocks[2:]] == list(
        lesson(n)[1].step(1).block_hash[3:5])
    # S's decode filled block 7 (cached on the GPU) but only prompt blocks reach the tier
    assert len(snap(n, 9).tier.contents) == 4

# -- chunked-prefill ---------------------------------------------------------------------------
def test_chunked_prefill_caches_chunk_by_chunk_and_checks_the_whole_sequence():
    n = "chunked-prefill"
    cfg = lesson(n)[0].config.scheduler
    assert (cfg.max_num_batched_tokens, cfg.max_num_seqs, cfg.enable_chunked_prefill) == (6, 4, True)
    # step 1: a 6-token chunk of A's 14; only block 1 full and cached; nothing sampled
    assert scheduled(n, 1) == [("A", 6, "new", 0, False)]
    assert tokens(n, 1, "A") == (14, 6) and req(n, 1, "A").block_ids == (1, 2)
    assert [o["block_ids"] for o in ops(n, 1, "cache")] == [[1]] and not ops(n, 1, "sample")
    assert snap(n, 1).block_hash[2] is None
    # step 2: the next chunk completes blocks 2 and 3, both cached in this step
    assert scheduled(n, 2) == [("A", 6, "more", 0, False)]
    assert [o["block_ids"] for o in ops(n, 2, "cache")] == [[2, 3]] and not ops(n, 2, "sample")
    assert tokens(n, 2, "A") == (14, 12) and req(n, 2, "A").block_ids == (1, 2, 3)
    # step 3: running first (A's last 2, which sample), then B's 4-token chunk: 6 of 6
    assert scheduled(n, 3) == [("A", 2, "more", 0, True), ("B", 4, "new", 0, False)]
    assert snap(n, 3).engine_steps[0].num_scheduled_tokens == 6
    assert [o["request"] for o in ops(n, 3, "sample")] == ["A"]
    assert req(n, 3, "A").block_ids == (1, 2, 3, 4) and req(n, 3, "B").block_ids == (5,)
    assert [(o["request"], o["block_ids"]) for o in ops(n, 3, "cache")] == [("B", [5])]
    assert tokens(n, 3, "B") == (5, 4)
    # step 4: A's decode and B's last token: both sample; 2 of 6
    assert scheduled(n, 4) == [("A", 1, "decode", 0, True), ("B", 1, "more", 0, True)]
    assert snap(n, 4).engine_steps[0].num_scheduled_tokens == 2
    assert req(n, 4, "B").block_ids == (5, 6)
    # step 5: 4 tokens left, a 4-token chunk needs 1 block of the 4 free, but the whole sequence
    # (18 tokens) needs 5: refused; then A reaches max_tokens and frees its blocks
    assert scheduled(n, 5) == [("A", 1, "decode", 0, True), ("B", 1, "decode", 0, True)]
    assert [(o["request"], o["block_ids"]) for o in ops(n, 5, "cache")] == [("A", [4])]
    (fail,) = ops(n, 5, "alloc_failed")
    assert fail["request"] == "C" and fail["full_sequence"]
    assert (fail["blocks_needed"], fail["blocks_free"]) == (5, 4)
    assert snap(n, 5).waiting == ("C",) and not ops(n, 5, "admit")
    assert kinds(n, 5, "alloc_failed", "finish") == [("alloc_failed", "C"), ("finish", "A")]
    a5 = req(n, 5, "A")
    assert a5.status == "finished" and a5.finish_reason == "length"
    assert a5.num_tokens - a5.num_prompt_tokens == 3
    assert snap(n, 5).stats.num_free_blocks == 8
    # step 6: B decodes, C is admitted with the remaining 5 tokens
    assert scheduled(n, 6) == [("B", 1, "decode", 0, True), ("C", 5, "new", 0, False)]
    assert req(n, 6, "C").block_ids == (7, 8) and tokens(n, 6, "C") == (18, 5)
    assert snap(n, 6).block_hash[7] is not None and snap(n, 6).block_hash[8] is None
    # step 7: C's next chunk in the running pass after B's decode; B fills 6, C fills 8
    assert scheduled(n, 7) == [("B", 1, "decode", 0, True), ("C", 5, "more", 0, False)]
    assert [(o["request"], o["block_ids"]) for o in ops(n, 7, "cache")] == [("B", [6]), ("C", [8])]
    assert req(n, 7, "C").block_ids == (7, 8, 9) and tokens(n, 7, "C") == (18, 10)


# -- head-of-line ------------------------------------------------------------------------------
def test_with_chunking_off_the_first_too_long_prompt_blocks_everyone_behind_it():
    n = "head-of-line"
    cfg = lesson(n)[0].config.scheduler
    assert not cfg.enable_chunked_prefill
    assert cfg.max_num_batched_tokens == cfg.max_model_len == 16
    assert scheduled(n, 1) == [("A", 5, "new", 0, True)] and req(n, 1, "A").block_ids == (1, 2)
    # admit: false runs no engine step
    assert not snap(n, 2).engine_steps and not snap(n, 3).engine_steps
    assert snap(n, 3).waiting == ("B", "C")
    # D's step: A decodes, B (10) fits the 15 left and is admitted whole; C (7 > 5) is looked
    # up, then stops admission: D (2) waits behind it; 5 tokens unused
    assert scheduled(n, 4) == [("A", 1, "decode", 0, True), ("B", 10, "new", 0, True)]
    assert snap(n, 4).engine_steps[0].num_scheduled_tokens == 11
    assert req(n, 4, "B").block_ids == (3, 4, 5)
    assert [o["request"] for o in ops(n, 4, "lookup")] == ["B", "C"]
    assert [o["request"] for o in ops(n, 4, "admit")] == ["B"] and not ops(n, 4, "alloc_failed")
    assert snap(n, 4).waiting == ("C", "D")
    # next step: both admitted, in order, 11 of 16
    assert scheduled(n, 5) == [("A", 1, "decode", 0, True), ("B", 1, "decode", 0, True),
                               ("C", 7, "new", 0, True), ("D", 2, "new", 0, True)]
    assert snap(n, 5).engine_steps[0].num_scheduled_tokens == 11
    # B reaches max_model_len (16 tokens) in the 4th of 4 steps: FINISHED_LENGTH_CAPPED
    s6 = snap(n, 6)
    assert [es.finished for es in s6.engine_steps] == [(), (), (), ("B",)]
    b = s6.requests["B"]
    assert b.status == "finished" and b.finish_reason == "length" and b.num_tokens == 16
    assert lesson(n)[0].steps[1].arrive.max_tokens is None
    frees = [(o["op"], o["block_ids"]) for o in ops(n, 6) if o["op"] in ("free_head", "free_tail")]
    assert frees == [("free_head", [10]), ("free_tail", [5, 4, 3])]
    # the note's "with chunking on": C takes a 5-token chunk in D's step, D still waits
    on = variant(n, "enable_chunked_prefill: false", "enable_chunked_prefill: true")
    es = on.step(4).engine_steps[0]
    assert [(s.request_id, s.num_tokens) for s in es.scheduled] == [("A", 1), ("B", 10), ("C", 5)]
    assert on.step(4).waiting == ("D",)


# -- async-lag ---------------------------------------------------------------------------------
def test_async_scheduling_applies_outputs_and_caches_one_step_late():
    n = "async-lag"
    assert lesson(n)[0].config.scheduler.async_scheduling
    # step 1: A's prefill ran, its token is still in flight (a placeholder)
    assert scheduled(n, 1) == [("A", 7, "new", 0, True)]
    a1 = req(n, 1, "A")
    assert (a1.num_tokens, a1.num_computed_tokens, a1.num_output_placeholders) == (7, 7, 1)
    assert not snap(n, 1).engine_steps[0].sampled and not ops(n, 1, "sample")
    assert snap(n, 1).block_hash[1] is not None and snap(n, 1).block_hash[2] is None
    # step 2: A's placeholder decodes; block 2 cannot be cached yet (7 tokens known); B hits H1
    # only and caches its own copy of "four five six seven" (block 3) as H2; then step 1's
    # output ("seven") is applied
    assert scheduled(n, 2) == [("A", 1, "decode", 0, True), ("B", 5, "new", 4, True)]
    s2 = snap(n, 2)
    assert s2.block_hash[2] is None and req(n, 2, "B").block_ids == (1, 3, 4)
    h2 = s2.block_hash[3]
    assert h2 is not None and table(n, 2)[h2] == (3,)
    assert s2.engine_steps[0].sampled == (("A", 1404),)
    assert Vocabulary.for_scenario(lesson(n)[0]).word(1404) == "seven"
    assert tokens(n, 2, "A") == (8, 8) and req(n, 2, "A").token_ids[7] == req(n, 2, "B").token_ids[7]
    # step 3: now A's block 2 is cached, as a duplicate of H2; A's next token takes block 5
    assert snap(n, 3).block_hash[2] == h2 and table(n, 3)[h2] == (3, 2)
    assert req(n, 3, "A").block_ids == (1, 2, 5)
    # step 4: every running request is one output behind
    for rid in "AB":
        r = req(n, 4, rid)
        assert r.num_computed_tokens == r.num_tokens and r.num_output_placeholders == 1
    # the note's synchronous scheduler: block 2 cached in step 2, before B's lookup: 8 hit
    sync = variant(n, "scheduler: {async_scheduling: true}", "scheduler: {async_scheduling: false}")
    a = sync.step(1).requests["A"]
    assert (a.num_tokens, a.num_computed_tokens) == (8, 7)
    assert sync.step(2).requests["B"].block_ids == (1, 2, 3)
    assert sync.step(2).stats.hits == 8 and snap(n, 2).stats.hits == 4


# -- seats-and-length --------------------------------------------------------------------------
def test_max_num_seqs_keeps_c_out_and_both_length_limits_finish_as_capped():
    n = "seats-and-length"
    cfg = lesson(n)[0].config.scheduler
    assert (cfg.max_num_seqs, cfg.max_model_len, cfg.max_num_batched_tokens) == (2, 12, 8192)
    assert req(n, 1, "A").block_ids == (1, 2) and lesson(n)[0].steps[0].arrive.max_tokens is None
    assert scheduled(n, 2) == [("A", 1, "decode", 0, True), ("B", 3, "new", 0, True)]
    assert req(n, 2, "A").block_ids == (1, 2, 3) and req(n, 2, "B").block_ids == (4,)
    # C's step: both seats taken: admission does not start (no lookup), blocks and budget spare
    assert scheduled(n, 3) == [("A", 1, "decode", 0, True), ("B", 1, "decode", 0, True)]
    assert not ops(n, 3, "lookup") and snap(n, 3).waiting == ("C",)
    assert snap(n, 2).stats.num_free_blocks == 6
    assert snap(n, 3).engine_steps[0].num_scheduled_tokens == 2
    assert [(o["request"], o["block_ids"]) for o in ops(n, 3, "cache")] == [("B", [4])]
    b = req(n, 3, "B")
    assert b.status == "finished" and b.finish_reason == "length"
    assert b.num_tokens - b.num_prompt_tokens == 2
    # next step: C takes B's seat; A reaches max_model_len (12) and finishes the same way
    assert scheduled(n, 4) == [("A", 1, "decode", 0, True), ("C", 5, "new", 0, True)]
    assert req(n, 4, "C").block_ids == (5, 6)
    a = req(n, 4, "A")
    assert a.status == "finished" and a.finish_reason == "length"
    assert (a.num_tokens, a.num_computed_tokens) == (12, 11)
    # D arrives into a free seat and is admitted at once
    assert scheduled(n, 5) == [("C", 1, "decode", 0, True), ("D", 3, "new", 0, True)]
    assert snap(n, 5).running == ("C", "D")


# -- the fidelity audit's corrected claims (shared/design/fidelity-audit-2026-12.md, section 1) --
def texts(name: str) -> list[str]:
    """Every sentence a lesson shows: summary, start note and notes, both languages."""
    sc = lesson(name)[0]
    out = [t for x in (sc.summary, sc.start_note) if x is not None for t in (x.en, x.zh)]
    return out + [t for s in sc.steps if s.note is not None for t in (s.note.en, s.note.zh)]


@pytest.mark.parametrize("name", LESSONS)
def test_the_null_block_is_never_allocated_cached_or_freed(name):
    """1.3: block 0 is out of the free queue from the start, never in a request's table (one
    full-attention group), never hashed, never ref-counted, and no op of any step names it; the
    pool's usage leaves it out."""
    sc, tl = lesson(name)
    for i in range(len(tl)):
        s = snap(name, i)
        assert 0 not in s.free_queue and s.ref_cnt[0] == 0 and s.block_hash[0] is None
        assert all(0 not in r.block_ids for r in s.requests.values())
        assert all(0 not in o["block_ids"] for o in map(op_to_dict, s.ops)), f"step {i}"
        usable = sc.config.num_blocks
        assert s.stats.usage == pytest.approx(1 - len(s.free_queue) / usable, abs=1e-6)
    start = lesson("six-blocks")[0].start_note
    assert "never allocates, caches or frees" in start.en and "从不分配、登记或释放" in start.zh
    assert not any("null" in t and ("never used" in t or "从不使用" in t) for t in texts(name))


@pytest.mark.parametrize("name", LESSONS + HYBRID)
def test_kv_writes_only_append_each_slot_once(name):
    """1.4: what makes sharing safe is that a slot is written once, at its token's position: from
    the moment get_new_blocks hands a block out until it is handed out again, no write (or load)
    touches a slot twice, so a block whose slots are all computed is only ever read."""
    sc, tl = lesson(name)
    written: dict[int, set[int]] = {}
    saved: dict[str, dict[int, set[int]]] = {}
    for i in range(1, len(tl)):
        step = sc.steps[i - 1]
        if step.kind == "rewind":
            written = {b: set(v) for b, v in saved[step.args].items()}
            continue
        if step.kind == "restart":
            written = {}
        for op in snap(name, i).ops:
            if op.kind == "popleft":
                written.update((b, set()) for b in op.block_ids)
            elif op.kind in ("write", "load"):
                first = getattr(op, "offset", 0)
                slots = set(range(first, first + len(op.token_ids)))
                assert not slots & written[op.block_id], (i, op)
                written[op.block_id] |= slots
        if step.kind == "checkpoint":
            saved[step.args] = {b: set(v) for b, v in written.items()}
    assert not any("only a block with ref_cnt 1 and no hash is writable" in t for t in texts(name))


def test_decode_fills_block_shares_a_full_block_that_is_never_written_again():
    n = "decode-fills-block"
    # block 2 is cached at step 3 (before its last slot is written), then shared by B
    assert snap(n, 3).block_hash[2] is not None and snap(n, 5).ref_cnt[2] == 2
    assert not [o for i in (4, 5) for o in ops(n, i, "write") if o["block_ids"] == [2]]
    assert "Mamba" in note(n, 5) and "is_block_writable" in note(n, 5)


@pytest.mark.parametrize("name", ["hash-seed-random", "hash-seed-shared"])
def test_hash_seed_lessons_name_the_tier_vllm_really_keeps_across_a_restart(name):
    """1.1: vLLM's CPU tier dies with the engine; the lesson's point holds for the
    OffloadingConnector's file-system tier on a shared root_dir (medium STORAGE). blockviz plays
    it with its CPU-tier model, which `restart` keeps, and the engine's list says so."""
    sc, tl = lesson(name)
    assert sc.config.connector is not None and sc.steps[2].kind == "restart"
    assert "file-system tier" in sc.start_note.en and "文件系统层" in sc.start_note.zh
    assert '"CPU tier"' in sc.start_note.en and "“CPU 缓存层”" in sc.start_note.zh
    for t in texts(name):
        for wrong in ("LMCache", "outside the engine process", "separate process", "另一个进程",
                      "引擎进程之外", "(aborted)", "被中止"):
            assert wrong not in t, wrong
    # what the start note says the engine's list shows, it shows: stores to the "CPU tier"
    from blockviz.teach.labels import HashLabels
    from blockviz.teach.narrate import narrate_ops
    engine, _ = run(load(SCENARIOS / f"{name}.yaml"), payloads=False, upto=1)
    labels = HashLabels.for_timeline(tl)
    for lang, word in (("en", "to the CPU tier"), ("zh", "CPU 缓存层")):
        said = narrate_ops(tl.step_ops(1), lang, labels, engine.vocab, engine.block_size)
        assert sum(word in x for x in said) == 2, said
    # the tier's saved blocks survive the restart; the GPU's cache does not
    assert snap(name, 3).hash_table == () and len(snap(name, 3).external) == 2


def test_preempt_resume_victim_is_the_last_running_request_and_only_counters_exclude_it():
    """1.2 and 1.7: under FCFS the victim is running[-1], not the request that ran short; vLLM
    exports hits / queries of first admissions only (its Prometheus counters and the log line's
    1,000-request window); the resumed lookup is recorded in preempted_* and exported nowhere."""
    n = "preempt-resume"
    assert snap(n, 3).running == ("A", "B")
    assert [o["request"] for o in ops(n, 4, "alloc_failed")] == ["A"]
    assert [o["request"] for o in ops(n, 4, "preempt")] == [snap(n, 3).running[-1]]
    assert "FCFS" in note(n, 4) and "priority" in note(n, 4)
    st = snap(n, 7).stats
    assert (st.queries, st.hits, st.preempted_queries, st.preempted_hits) == (13, 4, 11, 8)
    for t in (note(n, 7), lesson(n)[0].summary.en):
        assert "vLLM's hit rate" not in t and "reported beside" not in t
    assert "vllm:prefix_cache_hits" in note(n, 7) and "1,000" in note(n, 7) and "1000" in note(n, 7)


def test_budget_and_seat_defaults_are_not_stated_as_one_number():
    """1.5: vLLM's defaults depend on the GPU and the entry point (engine/arg_utils.py)."""
    assert lesson("seats-and-length")[0].config.scheduler.max_num_batched_tokens == 8192
    for name in ("chunked-prefill", "seats-and-length"):
        start = lesson(name)[0].start_note
        assert "H100" in start.en and "A100" in start.en and "H100" in start.zh and "A100" in start.zh
    for name in LESSONS:
        for t in texts(name):
            assert "vLLM's default is 8192" not in t and "vLLM's default is 256" not in t
            assert "vLLM 默认是 8192" not in t and "vLLM 默认 256" not in t


def test_requests_without_max_tokens_run_to_max_model_len_and_the_lessons_say_when():
    """1.6: only when max_tokens is unset (an OpenAI request that omits it); an offline
    SamplingParams() stops at 16."""
    for name, rid, i in (("head-of-line", "B", 6), ("seats-and-length", "A", 4)):
        sc = lesson(name)[0]
        arrive = next(s.arrive for s in sc.steps if s.kind == "arrive" and s.arrive.id == rid)
        r = req(name, i, rid)
        assert arrive.max_tokens is None and r.finish_reason == "length"
        assert r.num_tokens == sc.config.scheduler.max_model_len
        said = " ".join(t for t in texts(name) if "max_tokens" in t)
        assert "OpenAI" in said and "generation config" in said
    assert "SamplingParams()" in note("seats-and-length", 1)


def test_a_listener_that_counts_stores_per_hash_knows_a_copy_of_h2_survives():
    """1.8: the BlockRemoved of step 7 names H2 only, but H2 was stored twice (steps 1 and 3)."""
    n = "last-token-rule"
    h2 = hash_to_event_int(snap(n, 1).block_hash[2])
    stored = [i for i in range(1, 8) for e in snap(n, i).kv_events
              if e["type"] == "BlockStored" and h2 in e["block_hashes"]]
    removed = [i for i in range(1, 8) for e in snap(n, i).kv_events
               if e["type"] == "BlockRemoved" and h2 in e["block_hashes"]]
    assert stored == [1, 3] and removed == [7]
    assert snap(n, 7).block_hash[2] == snap(n, 1).block_hash[2]
    assert "set of" in note(n, 7) and "steps 1 and 3" in note(n, 7)


def test_chunked_prefill_names_the_check_and_what_its_absence_costs():
    """1.9: without scheduler_reserve_full_isl vLLM preempts (thrashes), it does not run out of
    memory."""
    n = "chunked-prefill"
    (fail,) = ops(n, 5, "alloc_failed")
    assert fail["full_sequence"] and fail["request"] == "C"
    assert "scheduler_reserve_full_isl" in note(n, 5) and "preempt" in note(n, 5)
    assert "run out of memory" not in note(n, 5)


def test_external_tier_events_name_their_medium():
    """1.12: vLLM's GPU events say medium GPU, the tier's say CPU; the tier's events here do."""
    n = "external-tier"
    from blockviz.sim.contract import step_dict
    media = [e["medium"] for i in range(len(lesson(n)[1]))
             for e in step_dict(snap(n, i), None).get("tier_events", ())]
    assert len(media) == 12 and set(media) == {"CPU"}     # 9 stores, 3 drops
    assert "medium: GPU for the" in note(n, 8) or "GPU for the block pool" in note(n, 8)


# -- issue 31's lessons: prompt logprobs, a forced reset, the priority policy, the watermark ------
@cache
def _doc(name: str) -> dict:
    from blockviz.scenario.lessons import resolve
    from blockviz.sim.contract import timeline_dict
    engine, tl = run(load(resolve(name)))
    return timeline_dict(name, engine, tl, frames=False)


def test_prompt_logprobs_skip_the_lookup_still_cache_and_are_not_counted():
    s = _doc("prompt-logprobs")["steps"]
    assert [x["vllm_metrics"]["prefix_cache_queries_total"] for x in s] == [0, 9, 9, 18, 18, 27]
    assert [x["vllm_metrics"]["prefix_cache_hits_total"] for x in s] == [0, 0, 0, 8, 8, 16]
    for i, rid in ((2, "B"), (4, "D")):          # prompt_logprobs 1, then 0: both skip
        assert s[i]["requests"][rid]["prompt_split"]["skipped"] == 9
        assert not any(o.kind == "lookup" for o in snap("prompt-logprobs", i).ops)
    assert [len(ids) for ids in s[2]["hash_table"].values()] == [2, 2]   # B's copies
    assert [len(ids) for ids in s[4]["hash_table"].values()] == [3, 3]   # D's
    assert s[5]["requests"]["E"]["prompt_split"]["hit"] == 8             # the explicit override
    assert round(s[5]["vllm_metrics"]["logged_hit_rate"]["rate"], 3) == 0.593


def test_reset_running_preempts_last_first_and_the_window_restarts_empty():
    s = _doc("reset-running")["steps"]
    assert s[4]["reset_ok"] is False and s[4]["running"] == ["A", "B"]
    assert kinds("reset-running", 5, "preempt") == [("preempt", "B"), ("preempt", "A")]
    assert s[5]["reset_ok"] is True and s[5]["waiting"] == ["A", "B"] and s[5]["hash_table"] == {}
    assert s[5]["vllm_metrics"]["kv_cache_usage_perc"] == 0.625        # sampled at the next step
    a, b = s[6]["requests"]["A"], s[6]["requests"]["B"]
    assert a["resumed_split"]["evicted"] == 12 and b["resumed_split"]["hit"] == 8
    assert {d.get("cause") for d in a["resumed_split_detail"] if d["category"] == "evicted"} == {
        "reset_prefix_cache"}
    m6, m7 = s[6]["vllm_metrics"], s[7]["vllm_metrics"]
    assert m6["num_preemptions_total"] == 2 and m6["logged_hit_rate"]["rate"] is None
    assert (m7["logged_hit_rate"]["requests"], m7["logged_hit_rate"]["hits"]) == (1, 8)
    assert (m7["prefix_cache_queries_total"], m7["prefix_cache_hits_total"]) == (33, 16)


def test_priority_preempts_the_already_scheduled_batch_job_and_admits_d_before_c():
    s = _doc("priority-victim")["steps"]
    es = s[4]["engine_steps"][0]
    assert (es["scheduled"], es["preempted"]) == ({"B": 1}, ["A"])
    assert kinds("priority-victim", 4, "schedule", "preempt")[:3] == [
        ("schedule", "A"), ("preempt", "A"), ("schedule", "B")]      # A was scheduled, then undone
    assert s[7]["waiting"] == ["D", "C"]
    assert s[8]["requests"]["D"]["status"] == "finished" and s[8]["waiting"] == ["C"]
    assert s[9]["requests"]["C"]["status"] == "finished"


def test_the_watermark_holds_b_back_only_while_a_runs():
    s = _doc("watermark")["steps"]
    refused = [o for o in snap("watermark", 2).ops if o.kind == "alloc_failed"]
    assert refused and (refused[0].blocks_needed, refused[0].blocks_free,
                        refused[0].watermark_blocks) == (1, 2, 2)
    for i in (2, 3, 4):
        assert s[i]["requests"]["B"]["status"] == "waiting"
    assert 3 in [b for o in snap("watermark", 4).ops if o.kind == "popleft" for b in o.block_ids]
    assert s[5]["requests"]["B"]["status"] == "running" and s[5]["running"] == ["B"]
