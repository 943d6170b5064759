"""A Qwen-Bailian trace's conversations at one pool size (blockviz.sim.chats): the chains of
parent_chat_id, and each turn's hits equal to what the replay at that size (and the infinite
cache) gives that request — the replay's per-request hook, checked against replays of the trace's
prefixes."""
from __future__ import annotations

import json

from blockviz.scenario.trace import read_trace
from blockviz.sim.capacity import ceiling, replay_sequence
from blockviz.sim.chats import chat_report

S = [1, 2]


def req(chat_id, parent, ts, n, ids, turn=1, kind="text") -> dict:
    return {"chat_id": chat_id, "parent_chat_id": parent, "timestamp": ts, "input_length": n,
            "output_length": 20, "type": kind, "turn": turn, "hash_ids": ids}


LINES = [
    req(0, -1, 0.0, 69, S + [3, 4, 5]),
    req(1, -1, 0.4, 64, S + [9, 10], kind="search"),
    req(2, -1, 0.9, 64, S + [9, 10], kind="search"),            # a retry of chat 1: its own start
    req(3, 0, 2.5, 99, S + [3, 4, 6, 7, 8], turn=2),
    req(4, 2, 3.0, 120, S + [9, 10, 11, 12, 13, 14], turn=2),
    req(5, 3, 7.25, 150, S + [3, 4, 6, 7, 15, 16, 17, 18], turn=3),
    req(6, -1, 8.0, 40, [20, 21, 22], kind="image"),
    req(7, 4, 9.5, 160, S + [9, 10, 11, 12, 13, 14, 23, 24], turn=3),
    req(8, 99, 9.6, 50, S + [30, 31], turn=4),                # its parent is not in the file
    req(9, 3, 9.9, 99, S + [3, 4, 6, 7, 40], turn=3),           # chat 0's turn 2 answered again
]


def _file(tmp_path, lines=LINES):
    path = tmp_path / "qwen_chats_blksz_16.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _each(fn, reqs, **kw) -> list[int]:
    """Per request, the hits it adds to a run of the trace up to it (the reference)."""
    out, before = [], 0
    for i in range(len(reqs)):
        now = fn(reqs[:i + 1], **kw)["hits"]
        out.append(now - before)
        before = now
    return out


def test_conversations_follow_parent_chat_id(tmp_path):
    r = chat_report(_file(tmp_path), block_size=16, pool_blocks=40)     # nothing evicted
    chains = [[x["line"] for x in c["turns"]] for c in r["chats"]]
    assert chains == [[1, 4, 6, 10], [3, 5, 8]]          # the most turns first; a branch kept
    assert [(c["chat_id"], c["lost"]) for c in r["chats"]] == [(0, 0), (2, 0)]
    # a pool that evicts: the conversation that lost the most to eviction comes first
    small = chat_report(_file(tmp_path), block_size=16, pool_blocks=10)
    lost = [sum(x["best"] - x["hit"] for x in c["turns"]) for c in small["chats"]]
    assert [c["lost"] for c in small["chats"]] == lost and lost == sorted(lost, reverse=True) and lost[0] > 0
    assert r["conversations"] == 2 and r["requests"] == 10
    first = r["chats"][0]["turns"]
    assert [(x["turn"], x["type"], x["at_s"], x["tokens"]) for x in first] == [
        (1, "text", 0.0, 69), (2, "text", 2.5, 99), (3, "text", 7.25, 150), (3, "text", 9.9, 99)]
    # first turns: lines 1, 2, 3, 7 and 9 (its parent is missing); later turns: 4, 5, 6, 8, 10
    assert r["first"]["requests"] == 5 and r["later"]["requests"] == 5
    assert r["first"]["tokens"] + r["later"]["tokens"] == sum(x["input_length"] for x in LINES)


def test_each_turn_hits_what_the_replay_gives_it(tmp_path):
    path = _file(tmp_path)
    reqs = read_trace(path)
    for pool, order in ((6, "split"), (12, "append"), (40, "split")):
        r = chat_report(path, block_size=16, pool_blocks=pool, free_order=order)
        hits = _each(replay_sequence, reqs, block_size=16, pool_blocks=pool, free_order=order)
        best = _each(ceiling, reqs, block_size=16)
        for c in r["chats"]:
            for x in c["turns"]:
                assert (x["hit"], x["best"]) == (hits[x["line"] - 1], best[x["line"] - 1]), (pool, x)
        assert r["point"] == replay_sequence(reqs, block_size=16, pool_blocks=pool, free_order=order)
        assert r["first"]["hit"] + r["later"]["hit"] == r["point"]["hits"]
        assert r["first"]["best"] + r["later"]["best"] == ceiling(reqs, block_size=16)["hits"]
    # a small pool refuses the longest prompts (160 tokens = 10 blocks > 6): they hit nothing
    small = chat_report(path, block_size=16, pool_blocks=6)
    assert small["chats"][1]["turns"][2]["hit"] == 0 and small["point"]["rejected"] > 0


def test_the_hooks_see_every_request(tmp_path):
    reqs = read_trace(_file(tmp_path))
    seen = []
    point = replay_sequence(reqs, block_size=32, pool_blocks=5,
                            on_request=lambda i, h, ok: seen.append((i, h, ok)))
    assert [i for i, _, _ in seen] == list(range(len(reqs)))
    assert sum(h for _, h, _ in seen) == point["hits"]
    assert sum(not ok for _, _, ok in seen) == point["rejected"]
    assert all(h == 0 for _, h, ok in seen if not ok)
    got = []
    ceil = ceiling(reqs, block_size=32, on_request=lambda i, h, ok: got.append(h))
    assert len(got) == len(reqs) and sum(got) == ceil["hits"]


def test_progress_counts_both_passes(tmp_path):
    seen = []
    chat_report(_file(tmp_path), block_size=16, pool_blocks=12, requests=10,
                progress=lambda **p: seen.append(p))
    assert seen[-1] == {"done": 20, "total": 20}
