"""The external tier's contracts (vLLM 0.33's OffloadingConnector, scheduler side), checked on
small runs without vLLM: each test names the rule it holds blockviz to."""
from __future__ import annotations

import json

import pytest

from blockviz.scenario import load_text
from blockviz.sim.contract import timeline_dict
from blockviz.sim.engine import Engine
from blockviz.sim.runner import run


def engine_of(connector: str, steps: str, **cfg) -> tuple[Engine, list]:
    extra = "".join(f", {k}: {v}" for k, v in cfg.items())
    text = (f"id: t\ntitle: t\nconfig: {{num_blocks: 6, block_size: 4, model: null, "
            f"connector: {connector}{extra}}}\nsteps:\n{steps}")
    scenario = load_text(text).scenario
    engine = Engine(scenario)
    return engine, [engine.apply(s) for s in scenario.steps]


A12 = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]"


def test_stores_are_issued_in_schedule_for_full_prompt_blocks_only():
    """Chunked prefill, 4 tokens a step: one store job per prompt block in the step its last
    token is scheduled; the partial prompt block and the decode blocks are never stored."""
    engine, results = engine_of(
        "{num_blocks: 16, store_delay: 1}",
        "  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], max_tokens: 8}\n"
        "  - step: 12\n", scheduler="{max_num_batched_tokens: 4, max_num_seqs: 4}")
    stores = [[len(j.keys) for j in s.store_jobs] for r in results for s in r.tier_steps]
    assert stores[:4] == [[1], [1], [], []]   # blocks 0, 1; the 10-token prompt's 3rd is partial
    assert sum(map(sum, stores)) == 2, "decode blocks are not offloaded"
    a = engine.scheduler.requests["A"]
    assert a.num_output_tokens == 8 and len(a.block_hashes) >= 4
    assert [h for h, *_ in engine.connector.contents()] == a.block_hashes[1::-1]  # tail first


def test_an_async_load_parks_the_request_with_blocks_allocated_not_cached():
    engine, results = engine_of(
        "{num_blocks: 16, load_delay: 2}",
        f"  - arrive: {{id: A, prompt: {A12}, max_tokens: 1}}\n"
        "  - step: 3\n"
        "  - reset_prefix_cache\n"
        f"  - arrive: {{id: A2, prompt: {A12}, max_tokens: 2}}\n"
        "  - step: 1\n  - step: 1\n")
    a2 = engine.scheduler.requests["A2"]
    admit = [op for op in results[3].ops if op.kind == "admit"][0]
    assert (admit.local_hit_tokens, admit.external_hit_tokens, admit.num_new_tokens) == (0, 12, 0)
    # the step it was admitted in and the next: parked, all 3 blocks held, none cached yet
    pool = engine.pool
    snap = [r.tier_steps for r in results[3:]]
    assert [j.sync for s in snap[0] for j in s.load_jobs] == [False]
    assert snap[1][0].completed_jobs == () and snap[2][0].finished_recving == ("A2",)
    # reported done in the second step after it; scheduled from the next step on
    assert a2.status.value == "waiting_for_remote_kvs" and a2.num_computed_tokens == 12
    assert all(pool.blocks[b.block_id].block_hash is None
               for b in engine.manager.req_to_blocks["A2"])
    assert engine.scheduler.connector_prefix_cache_stats.hits_by_source == {"host": 12}
    engine.apply(load_text("id: s\ntitle: s\nsteps: [{step: 1}]").scenario.steps[0])
    # the connector ignored the num_tokens - 1 cap; the scheduler clamps: 1 token recomputed
    assert a2.status.value == "running" and a2.num_computed_tokens == 12
    assert [b.block_hash for b in engine.manager.req_to_blocks["A2"]] == a2.block_hashes[:3]


def test_a_sync_load_runs_in_its_own_step():
    engine, results = engine_of(
        "{num_blocks: 16, sync_load_budget_tokens: 64}",
        f"  - arrive: {{id: A, prompt: {A12}, max_tokens: 1}}\n"
        "  - step: 3\n  - reset_prefix_cache\n"
        "  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], "
        "max_tokens: 2}\n")
    b = engine.scheduler.requests["B"]
    step = results[-1].tier_steps[0]
    assert [j.sync for j in step.load_jobs] == [True] and step.finished_recving == ()
    assert step.completed_jobs == (step.load_jobs[0].job_id,)
    assert b.status.value == "running" and b.num_computed_tokens == 13


def test_a_whole_prompt_hit_cannot_load_synchronously():
    """vLLM keeps one token to compute in a sync load; a repeated prompt loads asynchronously."""
    engine, _ = engine_of(
        "{num_blocks: 16, sync_load_budget_tokens: 64}",
        f"  - arrive: {{id: A, prompt: {A12}, max_tokens: 1}}\n"
        "  - step: 3\n  - reset_prefix_cache\n"
        f"  - arrive: {{id: A2, prompt: {A12}, max_tokens: 2}}\n")
    assert engine.scheduler.requests["A2"].status.value == "waiting_for_remote_kvs"


def test_a_chunk_still_being_stored_makes_the_lookup_wait_uncounted():
    """get_num_new_matched_tokens answers None while a chunk it needs is being stored: the
    request is skipped, not counted, and admitted once the store completes."""
    engine, results = engine_of(
        "{num_blocks: 8, store_delay: 2}",
        f"  - arrive: {{id: A, prompt: {A12}, max_tokens: 1}}\n"
        "  - reset_prefix_cache\n"
        "  - arrive: {id: A2, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], "
        "max_tokens: 1}\n  - step: 10\n")
    after_arrive = results[2]
    assert [op.kind for op in after_arrive.ops].count("admit") == 0, "skipped while storing"
    admits = [op for op in results[3].ops if op.kind == "admit"]
    # admitted with the load (async: parked), then scheduled once the load is reported
    assert [(op.local_hit_tokens, op.external_hit_tokens) for op in admits] == [(0, 12), (0, 0)]
    s = engine.scheduler.connector_prefix_cache_stats
    assert (s.requests, s.queries, s.hits) == (2, 12 + 13, 12)


def test_lru_evicts_the_least_recent_request_tail_first_with_cpu_events():
    engine, results = engine_of(
        "{num_blocks: 4}",
        f"  - arrive: {{id: A, prompt: {A12}, max_tokens: 1}}\n  - step: 3\n"
        "  - arrive: {id: B, prompt: [21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32], "
        "max_tokens: 1}\n  - step: 3\n")
    a, b = (engine.scheduler.requests[r].block_hashes for r in "AB")
    events = [e for r in results for s in r.tier_steps for e in s.events]
    removed = [e for e in events if type(e.event).__name__ == "BlockRemoved"]
    assert [e.hashes for e in removed] == [(a[2], a[1])], "A's tail first, in one event"
    assert all(e.to_dict()["medium"] == "CPU" for e in events)
    stored = [e.hashes[0] for e in events if type(e.event).__name__ == "BlockStored"]
    assert sorted(stored) == sorted(a + b)
    # A's survivor ranks before B's chunks; within B, tail before head
    assert [h for h, *_ in engine.connector.contents()] == [a[0], b[2], b[1], b[0]]


def test_request_finished_frees_at_once_and_a_reused_block_flushes_its_store():
    engine, results = engine_of(
        "{num_blocks: 16, store_delay: 3}",
        "  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8], max_tokens: 1}\n"
        "  - arrive: {id: X, prompt: [{random: 23}], max_tokens: 1}\n")
    a_done = results[0].tier_steps[0]
    assert engine.manager.req_to_blocks.get("A") is None   # (False, None): freed at once
    x_step = results[1].tier_steps[0]
    store_a = a_done.store_jobs[0].job_id
    # X takes every block, A's included: A's store (3 steps from done) is flushed now
    assert store_a in x_step.jobs_to_flush and store_a in x_step.completed_jobs


@pytest.mark.parametrize("sync", [False, True])
def test_contract_gains_tier_state_events_and_stats_by_source(sync, tmp_path):
    extra = ", sync_load_budget_tokens: 64" if sync else ""
    text = ("id: t\ntitle: t\nconfig: {num_blocks: 6, block_size: 4, model: null, connector: "
            f"{{num_blocks: 16{extra}}}}}\nsteps:\n"
            f"  - arrive: {{id: A, prompt: {A12}, max_tokens: 1}}\n  - step: 2\n"
            "  - reset_prefix_cache\n"
            "  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}\n"
            "  - step: 3\n")
    engine, timeline = run(load_text(text))
    doc = json.loads(json.dumps(timeline_dict("t", engine, timeline, frames=False)))
    last = doc["steps"][-1]
    assert last["stats"]["external_hits"] == 12
    assert last["stats"]["external_hits_by_source"] == {"host": 12}
    assert last["stats"]["external_requests"] == 2
    arrive_b = doc["steps"][4]
    conn = arrive_b["connector"]
    assert conn["capacity"] == 16 and len(conn["contents"]) == 3
    assert conn["waiting_for_remote_kvs"] == ([] if sync else ["B"])
    assert [j["kind"] for j in conn["jobs_in_flight"]] == ([] if sync else ["load"])
    assert {e["medium"] for s in doc["steps"] for e in s["tier_events"]} == {"CPU"}
    assert {e.get("medium") for s in doc["steps"] for e in s["kv_events"]
            if e["type"] != "AllBlocksCleared"} == {"GPU"}
    loads = [j for s in conn["engine_steps"] for j in s["load_jobs"]]
    assert [(j["sync"], len(j["gpu_blocks"])) for j in loads] == [(sync, 3)]


def test_a_rewind_restores_the_tier_with_its_payloads():
    text = ("id: t\ntitle: t\nconfig: {num_blocks: 6, block_size: 4, connector: {num_blocks: 4}}\n"
            "steps:\n"
            f"  - arrive: {{id: A, prompt: {A12}, max_tokens: 1}}\n  - step: 2\n"
            "  - checkpoint: before\n"
            "  - arrive: {id: X, prompt: [{random: 16}], max_tokens: 1}\n  - step: 2\n"
            "  - rewind: before\n  - reset_prefix_cache\n"
            "  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], "
            "max_tokens: 1}\n  - step: 3\n")
    scenario = load_text(text).scenario
    engine = Engine(scenario)
    results = [engine.apply(s) for s in scenario.steps]
    saved_before = [h for h, *_ in engine.checkpoints["before"].connector.contents()]
    assert len(saved_before) == 3
    # X's stores evicted A's chunks; the rewind brought them back, bytes included
    assert [o.kind for o in results[3].ops].count("drop") == 3
    assert engine.checkpoints["before"].connector.worker.pool.store is engine.kv.store
    loads = [op for op in results[-2].ops if op.kind == "load"]
    assert len(loads) == 3 and saved_before == engine.scheduler.requests["B"].block_hashes[2::-1]
    verify = [op for r in results[-2:] for op in r.ops if op.kind == "verify"]
    assert verify and verify[0].hit_tokens == 12 and verify[0].max_abs_diff == 0.0


def test_a_connector_with_async_scheduling_is_refused_in_both_languages():
    from blockviz.i18n.errors import localize_error
    from blockviz.scenario.load import ScenarioError
    text = ("id: t\ntitle: t\nconfig: {connector: {num_blocks: 4}, "
            "scheduler: {async_scheduling: true}}\nsteps:\n  - step: 1\n")
    with pytest.raises(ScenarioError) as e:
        load_text(text)
    msg = str(e.value)
    assert "async_scheduling is not modelled" in msg
    zh = e.value.localized("zh") if hasattr(e.value, "localized") else localize_error(msg, "zh")
    assert "不能同时使用" in zh and "not modelled" not in zh
