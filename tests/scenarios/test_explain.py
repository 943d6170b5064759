"""The miss explainer (blockviz.sim.explain): a hand-worked case per category (the spec's E1-E10,
each also run on vLLM's real Scheduler where the harness has a form for it:
tests/core/test_vllm_scheduler.py), and, for every built-in lesson, splits that sum to the tokens
looked up and hits that add up to the prefix-cache stats the lesson reports."""
from __future__ import annotations

import re

import pytest

from blockviz.scenario import load, load_text
from blockviz.scenario.lessons import lesson_files, resolve
from blockviz.sim.contract import timeline_dict
from blockviz.sim.explain import KEYS
from blockviz.sim.runner import run

T = list(range(1, 14))           # a prefix
F = list(range(50, 63))          # fresh tokens


def doc(config: str, steps: str) -> dict:
    loaded = load_text(f"id: e\ntitle: {{en: E}}\nconfig: {{model: null, {config}}}\nsteps:\n{steps}")
    engine, tl = run(loaded, payloads=False)
    assert tl.error is None, tl.error
    return timeline_dict("e", engine, tl, frames=False)


def split(d: dict, rid: str, which: str = "prompt_split") -> dict:
    """The non-zero counts of a request's split, after the last step."""
    s = d["steps"][-1]["requests"][rid][which]
    return {k: n for k, n in s.items() if n}


def detail(d: dict, rid: str, which: str = "prompt_split_detail") -> list[dict]:
    return d["steps"][-1]["requests"][rid][which]


def test_e1_the_last_full_block_is_recomputed():
    d = doc("num_blocks: 8, block_size: 4", f"""  - arrive: {{id: A, prompt: {T[:8]}, max_tokens: 1}}
  - arrive: {{id: B, prompt: {T[:8]}, max_tokens: 1}}
""")
    assert split(d, "A") == {"cold": 4, "last_token": 4}      # structural, even on a cold prompt
    assert split(d, "B") == {"hit": 4, "last_token": 4}       # block 1 is cached, past the limit


def test_e2_a_partial_block_is_never_cached():
    d = doc("num_blocks: 8, block_size: 4", f"""  - arrive: {{id: A, prompt: {T[:10]}, max_tokens: 1}}
  - arrive: {{id: B, prompt: {T[:10]}, max_tokens: 1}}
""")
    assert split(d, "A") == {"cold": 8, "partial_block": 2}
    assert split(d, "B") == {"hit": 8, "partial_block": 2}
    assert detail(d, "B")[0] == {"start": 0, "end": 8, "category": "hit", "block_ids": [1, 2]}


def test_e3_evicted_says_which_block_held_it_when_and_whose_allocation_took_it():
    d = doc("num_blocks: 4, block_size: 4", f"""  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}
  - arrive: {{id: X, prompt: {F[:13]}, max_tokens: 1}}
  - arrive: {{id: B, prompt: {T[:9]}, max_tokens: 1}}
""")
    assert split(d, "B") == {"evicted": 8, "partial_block": 1}
    segs = detail(d, "B")
    assert [(s["start"], s["end"], s["category"]) for s in segs] == [
        (0, 4, "evicted"), (4, 8, "evicted"), (8, 9, "partial_block")]
    for s, bid in zip(segs, (1, 2)):
        assert {k: s[k] for k in ("block_id", "cached_by", "cached_at", "evicted_at", "cause",
                                  "taken_by")} == {
            "block_id": bid, "cached_by": "A", "cached_at": {"event": 1, "engine_step": 1},
            "evicted_at": {"event": 2, "engine_step": 2}, "cause": "allocation", "taken_by": "X"}


def test_e4_hit_then_evicted_then_cold():
    d = doc("num_blocks: 4, block_size: 4", f"""  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}
  - arrive: {{id: X, prompt: {F[:9]}, max_tokens: 1}}
  - arrive: {{id: B, prompt: {T[:13]}, max_tokens: 1}}
""")
    assert split(d, "B") == {"hit": 4, "evicted": 4, "cold": 4, "partial_block": 1}
    ev = next(s for s in detail(d, "B") if s["category"] == "evicted")
    assert (ev["start"], ev["block_id"], ev["taken_by"]) == (4, 2, "X")


def test_e5_a_different_key_names_what_differs():
    d = doc("num_blocks: 16, block_size: 4", f"""  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}
  - arrive: {{id: S, prompt: {T[:9]}, max_tokens: 1, cache_salt: s1}}
  - arrive: {{id: L, prompt: {T[:9]}, max_tokens: 1, lora: L}}
""")
    assert split(d, "S") == {"different_key": 8, "partial_block": 1}
    assert split(d, "L") == {"different_key": 8, "partial_block": 1}
    s, l_ = detail(d, "S")[0], detail(d, "L")[0]
    assert (s["which"], s["other_request"], s["present"]) == (["cache_salt"], "A", True)
    # the fewest differences win: A (LoRA only) over the more recent S (salt and LoRA)
    assert (l_["which"], l_["other_request"]) == (["lora"], "A")


def test_e6_prompt_logprobs_skip_the_cache():
    d = doc("num_blocks: 8, block_size: 4", f"""  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}
  - arrive: {{id: B, prompt: {T[:9]}, max_tokens: 1, prompt_logprobs: 0}}
""")
    assert split(d, "B") == {"skipped": 9}
    assert detail(d, "B") == [{"start": 0, "end": 9, "category": "skipped",
                               "reason": "prompt_logprobs"}]
    assert d["steps"][2]["stats"]["queries"] == 9                 # B is not counted
    assert [len(ids) for ids in d["steps"][2]["hash_table"].values()] == [2, 2]   # still cached


def test_e7_a_prefix_another_request_is_still_computing_is_cold_pending_in_it():
    d = doc("num_blocks: 16, block_size: 4, scheduler: {max_num_batched_tokens: 8, max_num_seqs: 4, "
            "long_prefill_token_threshold: 4}", f"""
  - arrive: {{id: A, prompt: {T[:12] + [99, 98, 97, 96]}, max_tokens: 1, admit: false}}
  - arrive: {{id: B, prompt: {T[:12] + [99, 98, 97, 96]}, max_tokens: 1, admit: false}}
  - step
""")
    assert split(d, "B") == {"hit": 4, "cold": 8, "last_token": 4}
    cold = [s for s in detail(d, "B") if s["category"] == "cold"]
    assert cold == [{"start": 4, "end": 12, "category": "cold", "pending_in": ["A"]}]


def test_e8_a_resumed_request_s_re_lookup_is_split_apart():
    d = doc("num_blocks: 4, block_size: 4", f"""  - arrive: {{id: A, prompt: {T[:5]}, max_tokens: 6}}
  - arrive: {{id: B, prompt: {F[:7]}, max_tokens: 6}}
  - step: 9
""")
    b = d["steps"][-1]["requests"]["B"]
    assert split(d, "B") == {"cold": 4, "partial_block": 3}
    assert split(d, "B", "resumed_split") == {"hit": 4, "evicted": 4, "partial_block": 1}
    assert b["resumed_lookup"] == {"event": 3, "engine_step": 7, "num_tokens": 9}
    ev = next(s for s in b["resumed_split_detail"] if s["category"] == "evicted")
    assert {k: ev[k] for k in ("block_id", "cached_by", "cached_at", "taken_by")} == {
        "block_id": 4, "cached_by": "B", "cached_at": {"event": 3, "engine_step": 3},
        "taken_by": "A"}
    st = d["steps"][-1]["stats"]
    assert (st["preempted_requests"], st["preempted_hits"]) == (1, 4)


HYBRID = """num_blocks: 40, block_size: 4, prefix_cache_retention_interval: {r},
  kv_cache_groups: [{{type: full_attention}}, {{type: sliding_window, sliding_window: 8}}]"""
E9 = """  - arrive: {id: A, prompt: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20], max_tokens: 1}
  - arrive: {id: B, prompt: [1,2,3,4,5,6,7,8,9,10,11,12,31,32,33,34], max_tokens: 1}
"""


def test_e9_the_sliding_window_group_could_not_supply_its_run():
    d = doc(HYBRID.format(r=0), E9)
    assert split(d, "B") == {"window": 12, "last_token": 4}
    w = next(s for s in detail(d, "B") if s["category"] == "window")
    assert w["groups"] == [{"group": 1, "missing": [{"block_index": 1, "status": "not_retained"}]}]
    dense = doc(HYBRID.format(r="null"), E9)
    assert split(dense, "B") == {"hit": 12, "last_token": 4}


def test_e10_the_external_tier_supplies_what_the_gpu_evicted():
    d = doc("num_blocks: 6, block_size: 4, connector: {num_blocks: 16}",
            f"""  - arrive: {{id: A, prompt: {T[:12]}, max_tokens: 1}}
  - step: 2
  - arrive: {{id: L, prompt: {F[:12] + list(range(70, 82))}, max_tokens: 1}}
  - step: 2
  - arrive: {{id: A2, prompt: {T[:12]}, max_tokens: 1}}
  - step: 3
""")
    assert split(d, "A2") == {"external_hit": 12}     # it ignores the cap: nothing else
    assert detail(d, "A2") == [{"start": 0, "end": 12, "category": "external_hit",
                                "medium": "CPU"}]


def test_caching_off_skips_the_lookup_and_says_why():
    d = doc("num_blocks: 8, block_size: 4, enable_caching: false",
            f"""  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}
  - arrive: {{id: B, prompt: {T[:9]}, max_tokens: 1}}
""")
    assert split(d, "B") == {"skipped": 9}
    assert detail(d, "B")[0]["reason"] == "caching_disabled"
    assert d["steps"][-1]["stats"]["queries"] == 0             # vLLM records nothing


def test_a_new_process_s_random_seed_makes_every_key_different():
    d = doc("num_blocks: 8, block_size: 4, hash_algo: xxhash",
            f"""  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}
  - restart
  - arrive: {{id: B, prompt: {T[:9]}, max_tokens: 1}}
""")
    assert split(d, "B") == {"different_key": 8, "partial_block": 1}
    first = detail(d, "B")[0]
    assert (first["which"], first["other_request"], first["present"]) == (["hash_seed"], "A", False)


def test_evictions_by_a_reset_say_so():
    d = doc("num_blocks: 8, block_size: 4", f"""  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}
  - reset_prefix_cache
  - arrive: {{id: B, prompt: {T[:9]}, max_tokens: 1}}
""")
    assert split(d, "B") == {"evicted": 8, "partial_block": 1}
    assert {s.get("cause") for s in detail(d, "B") if s["category"] == "evicted"} == {
        "reset_prefix_cache"}


def test_a_rewind_takes_the_history_back():
    d = doc("num_blocks: 8, block_size: 4", f"""  - checkpoint: start
  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}
  - rewind: start
  - arrive: {{id: B, prompt: {T[:9]}, max_tokens: 1}}
""")
    assert split(d, "B") == {"cold": 8, "partial_block": 1}     # A never happened


# -- every lesson -------------------------------------------------------------------------------
@pytest.mark.parametrize("lesson", sorted(lesson_files()))
def test_every_lesson_s_splits_sum_and_their_hits_are_the_stats(lesson):
    loaded = load(resolve(lesson))
    engine, tl = run(loaded, payloads=False)
    d = timeline_dict(lesson, engine, tl, frames=False)
    before: dict = {}
    prev = d["steps"][0]["stats"]
    seen = 0
    for s in d["steps"][1:]:
        hits = resumed_hits = 0
        for rid, r in s["requests"].items():
            was = before.get(rid, {})
            p = r["prompt_split"]
            if p is not None:
                assert list(p) == list(KEYS) and sum(p.values()) == r["num_prompt_tokens"]
                if was.get("prompt_split") is None:
                    hits += p["hit"]
                    seen += 1
            lk = r["resumed_lookup"]
            if lk is not None:
                assert sum(r["resumed_split"].values()) == lk["num_tokens"]
                if lk != was.get("resumed_lookup"):
                    resumed_hits += r["resumed_split"]["hit"]
        st = s["stats"]
        if s["event"] and "rewind" not in s["event"] and "restart" not in s["event"]:
            assert st["hits"] - prev["hits"] == hits, (lesson, s["index"])
            if st["preempted_requests"] - prev["preempted_requests"] <= 1:
                assert st["preempted_hits"] - prev["preempted_hits"] == resumed_hits
        prev, before = st, s["requests"]
    assert seen


def test_the_request_panel_draws_the_split_as_a_bar_with_a_segment_per_part():
    from blockviz.render.requests import requests_html
    _, tl = run(load_text("id: e\ntitle: {en: E}\nconfig: {model: null, num_blocks: 4, "
                          f"block_size: 4}}\nsteps:\n  - arrive: {{id: A, prompt: {T[:9]}, max_tokens: 1}}\n"
                          f"  - arrive: {{id: X, prompt: {F[:9]}, max_tokens: 1}}\n"
                          f"  - arrive: {{id: B, prompt: {T[:13]}, max_tokens: 1}}\n"), payloads=False)
    html = requests_html(tl.step(3), lang="en")
    b = html[html.index('data-request="B"'):]
    cats = [c for c in ("hit", "evicted", "cold", "partial_block") if f'data-cat="{c}"' in b]
    assert cats == ["hit", "evicted", "cold", "partial_block"]
    assert 'data-split-block="2" data-step="2"' in b          # the block that held it, when it left
    assert "X&#x27;s allocation reused the block at step 2" in b
    # the counts under the bar, each behind its segment's colour (the bar's key)
    line = b[b.index("prompt split: "):b.index("</div>", b.index("prompt split: "))]
    keys = re.findall(r'data-cat="(\w+)"><i style="background:var\(--bv-(\w+)\)"></i>([^<]+)<', line)
    assert keys == [("hit", "green", "4 hit"), ("evicted", "red", "4 evicted"),
                    ("cold", "grey", "4 cold"), ("partial_block", "faint", "1 partial block")]
