"""What the engine did, said for a hybrid model (several KV-cache groups): each op about one group
names it, a block leaving a window or a chunk is a sentence, a store the retention mask skipped says
why, a hit one group stops short says how far the other would reach; one hash cached in two groups
is one label (H3#0, H3#1), and its chain parent survives a masked store."""
from __future__ import annotations

import re

import pytest

from blockviz.scenario import load_text
from blockviz.sim.runner import run
from blockviz.teach.labels import HashLabels
from blockviz.teach.narrate import narrate_ops

CJK = re.compile(r"[\u4e00-\u9fff]")
HEAD = ("id: t\ntitle: t\nconfig:\n  num_blocks: {nb}\n  block_size: 4\n  model: null\n"
        "  kv_cache_groups: {groups}\n{extra}steps:\n")
SW = "[{type: full_attention}, {type: sliding_window, sliding_window: 8}]"
CHUNKED = "[{type: chunked_local_attention, attention_chunk_size: 8}, {type: full_attention}]"


def timeline(groups: str, steps: str, nb: int = 16, extra: str = ""):
    _, tl = run(load_text(HEAD.format(nb=nb, groups=groups, extra=extra) + steps, "t.yaml"),
                payloads=False)
    assert tl.error is None, tl.error
    return tl


def said(tl, i: int, lang: str = "en") -> list[str]:
    labels = HashLabels.for_timeline(tl)
    return narrate_ops(tl.step_ops(i), lang, labels, tl.vocab, tl.block_size)


CHUNKS = ("  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,"
          " 18, 19, 20], max_tokens: 2}\n" + "  - step: 1\n" * 5)
BUDGET = "  scheduler: {max_num_batched_tokens: 4, max_num_seqs: 4}\n"


@pytest.fixture(scope="module")
def window():
    """full attention + a window of 8, a 20-token prompt in 4-token chunks (vLLM-diff's h01)."""
    return timeline(SW, CHUNKS, extra=BUDGET)


def test_one_hash_in_two_groups_is_one_label_with_its_group(window):
    labels = HashLabels.for_timeline(window)
    s = window.step(4)
    names = [labels(h) for h, _ in s.hash_table]
    assert names == ["H1#0", "H2#0", "H3#0", "H3#1", "H4#0", "H4#1"]
    assert [labels.bare(h) for h, _ in s.hash_table] == ["H1", "H2", "H3", "H3", "H4", "H4"]
    # the window's first store was masked (its blocks 0-1 uncached), yet H3#1's parent is H2
    keyed = dict((labels(h), h) for h, _ in s.hash_table)
    assert labels(labels.parent.get(keyed["H3#1"])) == "H2"
    assert labels(labels.parent.get(keyed["H4#1"])) == "H3"
    assert labels.parent.get(keyed["H1#0"]) is None


def test_ops_name_their_group_and_the_window_frees_in_words(window):
    en, zh = said(window, 4), said(window, 4, "zh")
    assert en[0] == ("[group 1, sliding window 8] remove_skipped_blocks(A): block 2 left the "
                     "sliding window; the null block takes its slot (0) and the block is freed.")
    assert zh[0].startswith("［组 1，滑动窗口 8］remove_skipped_blocks(A)：块 2 滑出了窗口")
    assert "[group 0, full attention] get_new_blocks: takes block 2" in "\n".join(en)
    assert en[-1] == ("The forward pass writes the K/V of 4 tokens of A into every group's table: "
                      "group 0 → block 2, group 1 → block 7.")
    assert not any(line in ("remove_skipped", "cache") for line in en + zh)


def test_a_store_the_mask_skipped_says_so(window):
    en = said(window, 1)
    assert ("[group 1, sliding window 8] cache_full_blocks: block 2 is full but stays uncached: "
            "with retention 0 a sliding window keeps only blocks a later prompt can resume from."
            in en)
    assert any("block 2 已装满，但不登记".replace("block", "块") in x for x in said(window, 1, "zh"))
    # dense caching: the same store caches the block
    dense = timeline(SW, CHUNKS, extra=BUDGET + "  prefix_cache_retention_interval: null\n")
    assert not any("uncached" in x for x in said(dense, 1))
    assert any(x.startswith("[group 1, sliding window 8] cache_full_blocks: block 2 is full → "
                            "registered as H1#1") for x in said(dense, 1))


def test_a_hit_one_group_stops_short_says_how_far_the_other_reaches():
    steps = ("  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,"
             " 17, 18, 19, 20], max_tokens: 1}\n"
             "  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 31, 32, 33, 34],"
             " max_tokens: 1}\n"
             "  - arrive: {id: C, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 41, 42, 43, 44],"
             " max_tokens: 1}\n")
    tl = timeline(SW, steps, nb=40)
    b, c = said(tl, 2), said(tl, 3)
    assert ("get_computed_blocks(B): no hit that every group holds. One group alone would reach 12 "
            "tokens, but a hit must be in every group, so it stops at 0; 12 becomes B's "
            "shared_prefix_boundary.") in b
    assert any(x.startswith("get_computed_blocks(C): the hit every group holds is 12 tokens")
               for x in c)
    assert "[group 1, sliding window 8] C's table starts with the null block: the hit's first " \
           "block lies outside the window, so it is neither needed nor touched." in c
    assert any("单看某一组能命中 12 个 token" in x for x in said(tl, 2, "zh"))


def test_a_finished_chunk_is_freed_whole():
    tl = timeline(CHUNKED, CHUNKS, extra=BUDGET)
    en = said(tl, 3)
    assert en[0] == ("[group 0, chunked local 8] remove_skipped_blocks(A): blocks 3, 1 belong to a "
                     "finished chunk; the null block takes their slots (1, 0) and they are freed, "
                     "the highest slot first.")
    assert CJK.search(said(tl, 3, "zh")[0])


def test_preemption_says_the_groups_are_freed_in_order():
    steps = ("  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8], max_tokens: 7}\n"
             "  - arrive: {id: B, prompt: [1, 2, 3, 4, 21, 22, 23, 24, 25, 26, 27, 28]}\n"
             "  - step: 4\n")
    tl = timeline(SW, steps, nb=12)
    en = said(tl, 3)
    assert ("B is preempted: its tables are freed group by group (group 0 first, each reversed, "
            "leading null blocks skipped), num_computed_tokens = 0, and it goes to the front of the "
            "waiting queue.") in en
    # the preemption's two frees name their groups, group 0 first (leading null of B's window gone)
    failed = en.index(next(x for x in en if x.startswith("allocate_slots(A) returns None")))
    frees = [x for x in en[failed:] if "free_blocks" in x][:2]
    assert frees == ["[group 0, full attention] free_blocks (table reversed): blocks 11, 8, 7, 1 "
                     "ref_cnt − 1.",
                     "[group 1, sliding window 8] free_blocks (table reversed): blocks 12, 10, 9 "
                     "ref_cnt − 1."]
