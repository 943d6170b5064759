"""A hybrid model's KV-cache groups on the board (issue 29): each request's table per group, null
entries drawn as the null block, a card names its group, the hash table keyed by group, the ops
tagged with their group, a legend; the dense view too. A one-group run draws none of it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from blockviz.core.hashing import split_block_key
from blockviz.render import board as B
from blockviz.render.groups import block_groups
from blockviz.render.markers import step_kinds
from blockviz.scenario import load
from blockviz.scenario.load import load_text
from blockviz.sim.runner import run
from blockviz.teach.labels import HashLabels

ROOT = Path(__file__).resolve().parents[2]
HYBRID = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml")
                if "kv_cache_groups" in p.read_text(encoding="utf-8"))
ONE_GROUP = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml") if p.stem not in HYBRID)
GROUP_MARKUP = ("bv-grp", "data-bv-group", "bv-b-null", "bv-hg", "hash#", "bv-gt")


def board_run(tl, titles=None) -> B.BoardRun:
    return B.BoardRun(tl, HashLabels.for_timeline(tl), [step_kinds(tl.step_ops(i)) for i in range(len(tl))],
                      titles or {"en": "", "zh": ""})


@pytest.fixture(scope="module")
def window():
    _, tl = run(load(ROOT / "scenarios" / "sliding-window.yaml"), payloads=False)
    return board_run(tl)


def strings(d: B.BoardData, rec: dict, key: str) -> str:
    return d.strings[rec[key]]


def group_rows(html: str, rid: str) -> dict[int, tuple[str, list[str]]]:
    """request ``rid``'s rows: group -> (its badge's words, the block ids in the row)."""
    row = html.split(f'data-request="{rid}"', 1)[1].split('data-request="', 1)[0]
    out = {}
    for m in re.finditer(r'data-bv-group-table="(\d+)">(.*?)</div>', row):
        g, body = int(m.group(1)), m.group(2)
        head = re.search(r'<span class="bv-grp bv-grp-row".*?</b>.*?</span></span>', body).group()
        badge = re.sub(r"<[^>]+>", "", head)
        out[g] = (badge.strip(), re.findall(r'data-block="(\d+)"', body))
    return out


def test_groups_in_the_lessons():
    assert len(HYBRID) >= 7 and "six-blocks" in ONE_GROUP


def test_each_request_has_a_row_per_group_with_its_blocks_and_null_entries(window):
    tl = window.timeline
    d = B.board_data(window, langs=["en", "zh"], frames=True)
    seen_null = 0
    for k in range(len(tl)):
        s = tl.step(k)
        html = strings(d, d.steps["en"][k], "requests")
        for rid, r in s.requests.items():
            bt = r.block_tables
            rows = group_rows(html, rid)
            if bt is None or not any(bt.tables):
                assert not rows
                continue
            assert sorted(rows) == [0, 1]
            assert rows[0][0] == "g0 full" and rows[1][0] == "g1 sliding window 8"
            for g in (0, 1):
                assert rows[g][1] == [str(b) for b in bt.tables[g]], (k, rid, g)
            # a null entry is block 0 drawn as the null block, with its meaning in its title
            nulls = re.findall(r'<span class="bv-b bv-b-null" title="([^"]*)" data-block="0">0</span>', html)
            assert len(nulls) == sum(b == 0 for t in bt.tables for b in t)
            seen_null += len(nulls)
            assert all("null_block" in n for n in nulls)
        zh = strings(d, d.steps["zh"][k], "requests")
        if "data-bv-group-table" in html:
            assert "滑动窗口 8" in zh and "全注意力" in zh
    assert seen_null >= 5           # the window put the null block into A's table, step after step


def test_op_frames_draw_every_groups_table_as_the_op_left_it(window):
    tl = window.timeline
    d = B.board_data(window, langs=["en"], frames=True)
    checked = 0
    for k in range(len(tl)):
        for j, f in enumerate(tl.frames(k)):
            html = strings(d, d.frames["en"][k][j], "requests")
            for rid, r in f.requests.items():
                if r.block_tables is None or not any(r.block_tables.tables):
                    continue
                rows = group_rows(html, rid)
                want = [[str(b) for b in t] for t in r.block_tables.tables]
                assert [rows[g][1] for g in sorted(rows)] == want
                checked += 1
            if f.op is not None and f.op.kind == "remove_skipped":
                assert 'class="bv-b bv-b-null"' in html        # the slot is the null block at once
    assert checked > 20


def test_a_card_names_the_group_it_serves(window):
    tl = window.timeline
    d = B.board_data(window, langs=["en"])
    for k in range(len(tl)):
        s = tl.step(k)
        html = strings(d, d.steps["en"][k], "blocks")
        want = block_groups(s)
        card = r'<div class="bv-card[^"]*" data-block="(\d+)">(.*?)(?=<div class="bv-card|$)'
        cards = dict(re.findall(card, html))
        for b in range(1, s.num_gpu_blocks):
            badge = re.search(r'class="bv-grp bv-grp-card" data-bv-group="(\d+)"', cards[str(b)])
            if b in want:
                assert badge and int(badge.group(1)) == want[b], (k, b)
                assert ("window 8" if want[b] == 1 else ">full<") in cards[str(b)]
            else:
                assert badge is None, (k, b)        # a free block with no hash serves no group
    # the groups: from the tables that hold a block, else from its hash's key
    s = tl.step(4)
    held = {b: g for r in s.requests.values() if r.block_tables
            for g, t in enumerate(r.block_tables.tables) for b in t if b}
    assert held and all(block_groups(s)[b] == g for b, g in held.items())
    for b, h in enumerate(s.block_hash):
        if b and h is not None:
            assert block_groups(s)[b] == split_block_key(h)[1]


def test_holders_count_every_groups_table(window):
    from blockviz.render.step import holders
    s = window.timeline.step(4)
    a = s.requests["A"]
    assert set(holders(s)) == {b for t in a.block_tables.tables for b in t if b}
    assert len(holders(s)) > len([b for b in a.block_ids if b])


def test_the_hash_table_is_keyed_by_group_and_the_ops_name_theirs(window):
    tl = window.timeline
    d = B.board_data(window, langs=["en", "zh"])
    k = next(i for i in range(len(tl)) if any(split_block_key(h)[1] == 1 for h, _ in tl.step(i).hash_table))
    table = strings(d, d.steps["en"][k], "table")
    assert "hash#group" in table and "BlockHashWithGroupId" in table
    for h, _ in tl.step(k).hash_table:
        g = split_block_key(h)[1]
        label = window.labels.bare(h)
        assert re.search(rf'{label}<span class="bv-hg" data-bv-group="{g}" title="KV-cache group {g}: '
                         rf'{"full" if g == 0 else "sliding window 8"}">#{g}</span>', table)
    assert "hash#组" in strings(d, d.steps["zh"][k], "table")
    ops = strings(d, d.steps["en"][4], "ops")
    tags = re.findall(r'<span class="bv-opg-tag" data-bv-group="(\d)" title="([^"]+)">g(\d)</span>', ops)
    assert tags and all(a == c for a, _, c in tags)
    assert {t for _, t, _ in tags} == {"KV-cache group 0: full", "KV-cache group 1: sliding window 8"}


def test_the_legend_names_each_group_once_runs_of_one_kind_together():
    _, tl = run(load(ROOT / "scenarios" / "gemma-five-to-one.yaml"), payloads=False)
    d = B.board_data(board_run(tl), langs=["en", "zh"])
    en = re.sub(r"<[^>]+>", "", d.legend["en"])
    assert "g0–4 sliding window 4" in en and "g5 full" in en and "null block" in en
    assert "H3#1 = H3 cached for group 1" in en
    assert "滑动窗口 4" in d.legend["zh"] and "null 块" in d.legend["zh"]


@pytest.mark.parametrize("sid", ONE_GROUP)
def test_a_one_group_lesson_draws_no_group(sid):
    _, tl = run(load(ROOT / "scenarios" / f"{sid}.yaml"), payloads=False)
    br = board_run(tl)
    assert not br.labels.hybrid
    d = B.board_data(br, langs=["en", "zh"], frames=not B.is_dense(br))
    text = d.to_json()
    for mark in GROUP_MARKUP:
        assert mark not in text, (sid, mark)


def test_the_dense_view_draws_the_groups_too():
    text = ("id: big\ntitle: {en: big, zh: big}\nconfig:\n  num_blocks: 48\n  block_size: 2\n"
            "  kv_cache_groups:\n    - {type: full_attention}\n"
            "    - {type: chunked_local_attention, attention_chunk_size: 4}\n"
            "steps:\n  - arrive: {id: A, prompt: [{tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}],"
            " max_tokens: 4}\n"
            "  - step: 2\n")
    _, tl = run(load_text(text, "big.yaml"), payloads=False)
    br = board_run(tl, {"en": "big"})
    d = B.board_data(br, langs=["en"])
    assert d.dense
    html = strings(d, d.steps["en"][2], "requests")
    rows = group_rows(html, "A")
    bt = tl.step(2).requests["A"].block_tables
    assert rows[1][0] == "g1 chunked local 4"
    assert [rows[g][1] for g in (0, 1)] == [[str(b) for b in t] for t in bt.tables]
    assert "0" in rows[1][1]                          # chunks behind the current one: the null block
    assert "chunked local 4" in d.legend["en"] and "bv-grp-legend" in d.legend["en"]


def test_a_dense_cell_knows_its_group_and_one_group_ships_none():
    text = ("id: big\ntitle: {en: big, zh: big}\nconfig:\n  num_blocks: 40\n  block_size: 2\n"
            "  kv_cache_groups:\n    - {type: full_attention}\n"
            "    - {type: sliding_window, sliding_window: 2}\n"
            "steps:\n  - arrive: {id: A, prompt: [{tokens: [1, 2, 3, 4, 5, 6, 7]}], max_tokens: 3}\n"
            "  - step: 1\n")
    _, tl = run(load_text(text, "big.yaml"), payloads=False)
    d = B.board_data(board_run(tl, {"en": "big", "zh": "big"}), langs=["en", "zh"])
    assert d.dense and d.group_names == {"en": ["g0 full", "g1 sliding window 2"],
                                         "zh": ["g0 全注意力", "g1 滑动窗口 2"]}
    for k in range(len(tl)):
        served = block_groups(tl.step(k))
        assert d.cells[k]["groups"] == "".join(str(served[b]) if b in served else "."
                                               for b in range(tl.num_gpu_blocks))
    assert "1" in d.cells[1]["groups"] and "0" in d.cells[1]["groups"]
    one = load_text(text.split("  kv_cache_groups")[0] + "\nsteps:" + text.split("steps:")[1], "one.yaml")
    _, tl1 = run(one, payloads=False)
    d1 = B.board_data(board_run(tl1, {"en": "big"}), langs=["en"])
    assert d1.dense and "groups" not in d1.cells[1] and "group_names" not in d1.to_dict()
