"""`finish: ID` is a normal end (the request stops, as on a stop token: FINISHED_STOPPED, finish
reason "stop"); `abort: ID` is the client's abort (FINISHED_ABORTED, "abort"). vLLM frees both the
same way (finish_requests sets the status, then frees the table reversed), so only the reason and
the sentence differ: the pool, the queue and the events are identical."""
from __future__ import annotations

import pytest

from blockviz.scenario import ScenarioError, load_text
from blockviz.sim.runner import run
from blockviz.teach.narrate import describe_op

BASE = """id: t
title: {en: T}
config: {num_blocks: 8, block_size: 4, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9]}
  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 10], admit: false}
  - %s
  - step
"""


def _run(event: str):
    engine, tl = run(load_text(BASE % event))
    assert tl.error is None
    return engine, tl


def test_finish_stops_and_abort_aborts_with_the_same_frees():
    _, fin = _run("finish: A")
    _, ab = _run("abort: A")
    for tl, reason, status in ((fin, "stop", "FINISHED_STOPPED"), (ab, "abort", "FINISHED_ABORTED")):
        s = tl.step(3)
        assert s.requests["A"].status == "finished" and s.requests["A"].finish_reason == reason
        finish = [op for op in s.ops if op.kind == "finish"]
        assert [(op.request_id, op.reason) for op in finish] == [("A", reason)]
        assert status in describe_op(finish[0], "en", lambda h: "H")
    for i in range(len(fin)):
        a, b = fin.step(i), ab.step(i)
        assert (a.free_queue, a.ref_cnt, a.block_hash, a.hash_table) == (
            b.free_queue, b.ref_cnt, b.block_hash, b.hash_table)
        assert [op.kind for op in a.ops] == [op.kind for op in b.ops]
        assert a.kv_events == b.kv_events
    assert fin.step(3).event.event_dict() == {"finish": "A"}
    assert ab.step(3).event.event_dict() == {"abort": "A"}


def test_finishing_a_request_that_has_produced_nothing_is_an_abort():
    _, tl = _run("finish: B")       # B waits (admit: false): no output, no stop token to sample
    assert tl.step(3).requests["B"].finish_reason == "abort"


def test_abort_takes_a_list_and_is_checked_like_finish():
    _, tl = _run("abort: [A, B]")
    assert [r.finish_reason for r in tl.step(3).requests.values()] == ["abort", "abort"]
    with pytest.raises(ScenarioError, match="'Z' is used before it arrives"):
        load_text(BASE % "abort: Z")
    with pytest.raises(ScenarioError, match="`abort` needs an argument, e.g. `- abort: A`"):
        load_text(BASE % "abort")
