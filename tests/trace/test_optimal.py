"""Belady's MIN (blockviz.sim.optimal) against an exhaustive search over every choice of kept
blocks, at every pool size of small traces; its place between vLLM's LRU and the ceiling; and
``blockviz trace capacity --optimal``."""
from __future__ import annotations

import json
import random
from functools import cache
from itertools import combinations

import pytest
from trace_helpers import random_trace, write

from blockviz.scenario.trace import TraceRequest
from blockviz.sim.capacity import ceiling, replay_sequence
from blockviz.sim.curve import curve_sequence
from blockviz.sim.optimal import _paths, add_optimal, optimal_hits


def brute_force_hits(trace: list[TraceRequest], *, block_size: int, pool_blocks: int) -> int:
    """The most hit tokens over every choice of kept blocks (exhaustive; tiny traces only)."""
    reqs = [x for x in _paths(trace, block_size) if x[1] <= pool_blocks]

    @cache
    def best(s: int, held: frozenset) -> int:
        if s == len(reqs):
            return 0
        _, b, lim, keys = reqs[s]
        h = 0
        while h < lim and keys[h] in held:
            h += 1
        others = sorted(held - set(keys), key=repr)
        room = min(pool_blocks - b, len(others))
        top = 0
        for kept in combinations(others, room):   # keeping more never hurts: later steps can drop
            top = max(top, best(s + 1, frozenset(kept) | frozenset(keys)))
        return h + top

    return best(0, frozenset()) * block_size


def trace(*reqs: tuple[int, list[int]]) -> list[TraceRequest]:
    return [TraceRequest(i, n, 1, ids, i + 1) for i, (n, ids) in enumerate(reqs)]


def blocks(t, bs: int) -> int:
    return sum(-(-r.input_length // bs) for r in t)


def test_min_keeps_the_block_used_next_where_lru_keeps_the_newest():
    # Four requests of one full block and a partial one (B = 2, L = 1), pool of 3: while a
    # request runs, one other cached block can stay. A B C A: LRU keeps B's block through C and
    # A's repeat misses; MIN keeps A's (used next) and the repeat hits it.
    t = trace((600, [1, 9]), (600, [2, 9]), (600, [3, 9]), (600, [1, 9]))
    for order in ("split", "append"):
        assert replay_sequence(t, block_size=512, pool_blocks=3, free_order=order)["hits"] == 0
    assert optimal_hits(t, block_size=512, pool_blocks=[2, 3, 4]) == {2: 0, 3: 512, 4: 512}
    assert brute_force_hits(t, block_size=512, pool_blocks=3) == 512


def test_the_last_token_rule_and_rejections_hold_for_min_too():
    # 1024 tokens: L = 1, so a repeat hits one block at most, whatever the policy. A request of
    # 3 blocks is rejected at a pool of 2, as in vLLM (no policy can hold its blocks at once).
    t = trace((1024, [1, 2]), (1024, [1, 2]), (1100, [1, 2, 3]), (1100, [1, 2, 3]))
    assert optimal_hits(t, block_size=512, pool_blocks=[2, 3]) == {2: 512, 3: 512 + 1024 + 1024}
    assert brute_force_hits(t, block_size=512, pool_blocks=2) == 512


def _random_trace(rng: random.Random, n: int, bs: int) -> list[TraceRequest]:
    return random_trace(rng, n, bs, repeat=0.4, cut=0.4, fresh_cut=0.0, longest=(3,))


def _check_against_exhaustive(seed: int, longest: int) -> None:
    rng = random.Random(seed)
    bs = rng.choice([512, 256])
    t = _random_trace(rng, rng.randint(2, longest), bs)
    sizes = range(1, blocks(t, bs) + 2)
    best = optimal_hits(t, block_size=bs, pool_blocks=sizes)
    for n in sizes:
        assert best[n] == brute_force_hits(t, block_size=bs, pool_blocks=n), n


@pytest.mark.parametrize("seed", range(25))
def test_min_equals_an_exhaustive_search_at_every_size(seed):
    _check_against_exhaustive(seed, 6)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(25, 300))
def test_min_equals_an_exhaustive_search_on_more_traces(seed):
    _check_against_exhaustive(seed, 7)


@pytest.mark.parametrize("seed", range(6))
def test_between_lru_and_the_ceiling(seed):
    rng = random.Random(100 + seed)
    bs = rng.choice([512, 128, 64])
    t = _random_trace(rng, 60, bs)
    sizes = range(1, blocks(t, bs) + 2)
    best = optimal_hits(t, block_size=bs, pool_blocks=sizes)
    top = ceiling(t, block_size=bs)["hits"]
    lru = [curve_sequence(t, block_size=bs, free_order=o) for o in ("split", "append")]   # exact
    for n in sizes:
        assert max(c.point(n)["hits"] for c in lru) <= best[n] <= top, n
    assert best[blocks(t, bs) + 1] == top


def test_add_optimal_fills_every_point_of_every_order(tmp_path):
    t = _random_trace(random.Random(3), 40, 256)
    path = write(tmp_path / "t.jsonl", [(r.input_length, r.hash_ids) for r in t])
    reports = [{"requests": len(t), "free_order": o,
                "points": [{"pool_blocks": 6}, {"pool_blocks": 30}]} for o in ("split", "append")]
    seen = []
    add_optimal(reports, [str(path)], block_size=256,
                progress=lambda done, total: seen.append((done, total)))
    want = optimal_hits(t, block_size=256, pool_blocks=[6, 30])
    assert [[p["optimal_hits"] for p in r["points"]] for r in reports] == [[want[6], want[30]]] * 2
    assert seen[-1] == (80, 80)


REQS = [(1024, [1, 2]), (1536, [1, 2, 3]), (1024, [1, 2]), (600, [9, 10]), (512, [20]), (1536, [1, 2, 3])]


@pytest.mark.parametrize("curve", [[], ["--curve"]])
def test_optimal_on_the_command_line(cli, tmp_path, curve):
    small = write(tmp_path / "small.jsonl", REQS)
    out = cli("trace", "capacity", str(small), "--block-size", "256", "--pool-blocks", "3,8,30",
              "--free-order", "split,append", "--optimal", "--json", *curve)
    assert out.returncode == 0, out.stderr
    from blockviz.scenario.trace import read_trace
    want = optimal_hits(read_trace(small), block_size=256, pool_blocks=[3, 8, 30])
    for doc in map(json.loads, out.stdout.splitlines()):
        assert [p["optimal_hits"] for p in doc["points"]] == [want[3], want[8], want[30]]
        assert all(p["hits"] <= p["optimal_hits"] <= doc["ceiling"]["hits"] for p in doc["points"])
    at3 = optimal_hits(read_trace(small), block_size=512, pool_blocks=[3])[3]
    queries = replay_sequence(read_trace(small), block_size=512, pool_blocks=3)["queries"]
    for lang, word in (("en", "optimal"), ("zh", "最优策略")):
        out = cli("trace", "capacity", str(small), "--pool-blocks", "3,8", "--optimal", "--lang", lang)
        assert out.returncode == 0, out.stderr
        header, _, row = out.stdout.splitlines()[1:4]
        names = [x.strip() for x in header.split("  ") if x.strip()]
        assert dict(zip(names, row.split()))[word] == f"{at3 / queries:.1%}"
