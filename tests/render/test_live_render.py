"""The Live page's picture (blockviz.render.live): the forest, tenants apart, chains as rows,
highlights, warnings, bounds, escaping — from reductions of real captures and made-up streams."""
from __future__ import annotations

import re
from pathlib import Path

from blockviz.live.capture import Received
from blockviz.live.stream import Reduction, reduce_file
from blockviz.live.wire import BlockRemoved, BlockStored, encode_batch
from blockviz.render.live import MAX_ROWS, live_html, token_text

CAPTURES = Path(__file__).resolve().parents[1] / "live" / "captures"


def stored(hashes, parent=None, bs=2, lora=None, extra=None, tokens=None):
    tokens = list(range(1, len(hashes) * bs + 1)) if tokens is None else tokens
    return BlockStored(list(hashes), parent, tokens, bs, 1 if lora else None, "GPU", lora,
                       extra or [None] * len(hashes), 0, "full_attention")


def feed(red, seq, events, t=100.0):
    red.feed(Received("sub", t, [b"", seq.to_bytes(8, "big"), encode_batch(events, t, 0)], seq))


def rows(html):
    return re.findall(r'class="bvl-node[^"]*" data-key="([0-9a-f]+)"', html)


def test_tenants_apart_and_chains_as_one_row():
    red, _, _ = reduce_file(CAPTURES / "tenants-and-lora.jsonl")
    now = red.history[-1].t + 60
    html = live_html(red, lang="en", now=now)
    assert html.count('class="bvl-tenant"') == 3
    for label in ("cache_salt acme", "cache_salt globex", "LoRA sql-adapter"):
        assert label in html
    # three trees, each a chain of blocks with one child each: one row per tree
    assert len(rows(html)) == 3 and "3 blocks" in html and "2 blocks" in html
    assert "bvl-new" not in html                   # a minute later nothing is new
    zh = live_html(red, lang="zh", now=now)
    assert "缓存了 8 个哈希" in zh and "3 块" in zh


def test_a_branch_is_a_tree_and_the_newest_store_is_marked():
    red = Reduction(replay=False)
    feed(red, 0, [stored([1, 2, 3])], t=100.0)
    feed(red, 1, [stored([4, 5], parent=1)], t=110.0)
    html = live_html(red, lang="en", now=112.0)
    assert rows(html) == ["0000000000000001", "0000000000000002", "0000000000000004"]
    assert html.count('class="bvl-kids"') == 1
    assert re.search(r'bvl-node bvl-new" data-key="0000000000000004"', html)
    assert not re.search(r'bvl-new" data-key="0000000000000002"', html)


def test_removals_are_listed_and_the_late_join_warned():
    red = Reduction(replay=False)
    feed(red, 3, [stored([1, 2])])
    feed(red, 4, [BlockRemoved([2], "GPU", 0), BlockRemoved([99], "GPU", 0)])
    html = live_html(red, lang="en", now=101.0)
    assert "Removed lately" in html and 'class="bvl-gone bvl-gone-new"' in html
    assert "0000000000000002" in html.split("Removed lately")[1]
    assert "Joined late (seqs 0..2 missed)" in html and "(1 removal(s)" in html
    assert "What went wrong: 2 note(s)" in html


def test_orphans_and_unknown_positions_are_marked():
    red = Reduction(replay=False)
    feed(red, 0, [stored([7], parent=6)])                              # parent never seen
    feed(red, 1, [stored([8, 9], tokens=list(range(10)), bs=2)])       # tokens cover 5 blocks
    html = live_html(red, lang="en", now=101.0)
    assert "parent not cached" in html and "place in the chain unknown" in html


def test_the_drawing_is_bounded_and_counts_the_rest():
    red = Reduction(replay=False)
    # 10,000 cached hashes: 2,000 prompts of 5 blocks sharing a first block in 40 groups of 50
    seq = 0
    for k in range(2_000):
        root = 1_000_000 + k // 50
        events = [stored([root])] if k % 50 == 0 else []
        events.append(stored([k * 10 + j + 1 for j in range(4)], parent=root, bs=2))
        feed(red, seq, events)
        seq += 1
    assert red.cached() == 2_000 * 4 + 40
    html = live_html(red, lang="en", now=101.0)
    assert len(re.findall(r'class="bvl-node', html)) == MAX_ROWS
    drawn = int(re.search(r"… (\d+) more cached hashes not drawn", html).group(1))
    assert 0 < drawn < red.cached()
    assert len(html) < 400_000


def test_what_a_publisher_writes_is_escaped():
    red = Reduction(replay=False)
    evil = "<script>alert(1)</script>"
    feed(red, 0, [stored([1], lora=evil, extra=[[evil]])])
    html = live_html(red, lang="en", now=101.0, status=evil)
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_token_text_words_ids_and_cut():
    assert token_text([1, 2, 3], {1: "the", 3: "cat"}) == "the 2 cat"
    assert token_text(None, None) == "?"
    assert token_text(list(range(100)), None, limit=20).endswith("…")


def test_the_tree_that_changed_last_comes_first_and_a_circle_ends():
    red = Reduction(replay=False)
    feed(red, 0, [stored([1, 2])])
    feed(red, 1, [stored([5, 6])])
    feed(red, 2, [stored([3], parent=2)])            # the older tree grows
    html = live_html(red, lang="en", now=200.0)
    assert rows(html) == ["0000000000000001", "0000000000000005"]
    # parents in a circle (no real engine sends this): drawn once, never for ever
    red = Reduction(replay=False)
    feed(red, 0, [stored([8], parent=9), stored([9], parent=8)])
    html = live_html(red, lang="en", now=200.0)
    assert len(rows(html)) == 1 and "2 blocks" in html
