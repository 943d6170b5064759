"""The generator writes the workload kinds as valid Mooncake traces whose hash ids mean what the
format says: equal id at a position = equal parent id and equal block content."""
from __future__ import annotations

import io

import pytest

from blockviz.scenario.trace import TRACE_BLOCK_TOKENS, read_trace
from blockviz.teach import tracegen as G
from blockviz.teach.workload import KINDS


def _tokens(runs) -> list[tuple[int, int]]:
    """A prompt's tokens, each as (stream, offset): distinct streams are distinct random text."""
    return [(stream, start + i) for stream, start, n in runs for i in range(n)]


def _requests(w: G.TraceWorkload):
    g = G._Generator(w)
    return [g.request() for _ in range(w.requests)]


@pytest.mark.parametrize("kind", KINDS)
def test_ids_are_remapped_prefix_hashes(kind):
    w = G.TraceWorkload(kind=kind, requests=300, seed=3, prefix_tokens=1000, new_tokens=300,
                        output_tokens=200, max_turns=5, max_live=6)
    content_of: dict[int, tuple] = {}
    for runs, ids, _ in _requests(w):
        toks = _tokens(runs)
        assert len(ids) == -(-len(toks) // TRACE_BLOCK_TOKENS)
        parent = -1
        for j, h in enumerate(ids):
            block = (parent, tuple(toks[j * TRACE_BLOCK_TOKENS:(j + 1) * TRACE_BLOCK_TOKENS]))
            assert content_of.setdefault(h, block) == block     # one id, one (parent, content)
            parent = h
    assert len(set(content_of.values())) == len(content_of)     # one (parent, content), one id
    assert sorted(content_of) == list(range(len(content_of)))    # ids from 0, first appearance


def test_the_shapes_of_the_kinds():
    # shared_prefix: every prompt starts with one of num_prefixes system prompts
    w = G.TraceWorkload(kind="shared_prefix", requests=200, prefix_tokens=2048, num_prefixes=3)
    assert len({tuple(ids[:4]) for _, ids, _ in _requests(w)}) == 3
    # few_shot: one shared instruction block, then one of the example sets
    w = G.TraceWorkload(kind="few_shot", requests=200, prefix_tokens=2048, num_prefixes=3)
    reqs = _requests(w)
    assert len({ids[0] for _, ids, _ in reqs}) == 1
    assert len({tuple(ids[:5]) for _, ids, _ in reqs}) == 3
    # multi_turn: a later turn is the previous turn (prompt + reply) plus a new message
    w = G.TraceWorkload(kind="multi_turn", requests=200, max_turns=4, max_live=4)
    reqs = _requests(w)
    extended = 0
    for i, (runs, _, _) in enumerate(reqs):
        earlier = [(r, out) for r, _, out in reqs[:i] if runs[:len(r)] == r and len(runs) == len(r) + 2]
        if earlier:
            prev, out = earlier[-1]
            assert runs[len(prev)][2] == out           # the reply has the previous output_length
            extended += 1
    assert extended > 100
    # random: many requests share a whole-block prefix with an earlier one
    w = G.TraceWorkload(kind="random", requests=300)
    firsts = [ids[0] for _, ids, _ in _requests(w)]
    assert len(set(firsts)) < len(firsts) * 0.7


def test_a_generated_trace_reads_back_and_is_deterministic():
    w = G.TraceWorkload(kind="multi_turn", requests=500, seed=9, rate=5)
    a, b = io.StringIO(), io.StringIO()
    assert G.write_generated(w, a) == 500
    G.write_generated(w, b)
    assert a.getvalue() == b.getvalue()
    reqs = read_trace(a.getvalue().encode())
    assert len(reqs) == 500
    times = [r.timestamp for r in reqs]
    assert times == sorted(times) and 50_000 < times[-1] < 150_000   # ~500 arrivals at 5 per s
    other = io.StringIO()
    G.write_generated(G.TraceWorkload(kind="multi_turn", requests=500, seed=10, rate=5), other)
    assert other.getvalue() != a.getvalue()


def test_bad_workloads_are_refused():
    for bad in ({"kind": "chat"}, {"requests": 0}, {"prefix_tokens": 0}, {"rate": 0}):
        with pytest.raises(ValueError):
            G.TraceWorkload(**bad)
    with pytest.raises(ValueError, match="grew past"):
        list(G.generate_trace(G.TraceWorkload(kind="multi_turn", requests=400, max_live=1,
                                              max_turns=1000, new_tokens=200_000)))
