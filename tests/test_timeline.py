"""The timeline serves every step exactly as the live engine was after it — whether the step is a
keyframe or replayed from the op log, in any access order — and frames walk an event op by op."""
from __future__ import annotations

import pickle
import random

import pytest

from blockviz.scenario import load_text
from blockviz.scenario.schema import Scenario
from blockviz.sim.engine import Engine, EngineError
from blockviz.sim.timeline import Timeline


def live_state(engine: Engine) -> dict:
    pool = engine.pool
    return {
        "ref": tuple(b.ref_cnt for b in pool.blocks),
        "hash": tuple(b.block_hash for b in pool.blocks),
        "tokens": tuple(tuple(t) for t in engine.state.block_tokens),
        "queue": tuple(b.block_id for b in pool.free_block_queue),
        "table": tuple((h, tuple(ids)) for h, ids in pool.cached_block_hash_to_block.items()),
        "requests": [(rid, r.status.value, tuple(engine.manager.get_block_ids(rid)[0]),
                      r.num_tokens, r.num_computed_tokens, tuple(r.all_token_ids))
                     for rid, r in engine.scheduler.requests.items()],       # in order
        "waiting": tuple(r.request_id for r in engine.scheduler.waiting),
        "running": tuple(r.request_id for r in engine.scheduler.running),
    }


def snap_state(s) -> dict:
    return {
        "ref": s.ref_cnt, "hash": s.block_hash, "tokens": s.block_tokens, "queue": s.free_queue,
        "table": s.hash_table,
        "requests": [(rid, v.status, v.block_ids, v.num_tokens, v.num_computed_tokens, v.token_ids)
                     for rid, v in s.requests.items()],
        "waiting": s.waiting, "running": s.running,
    }


def random_scenario(rng: random.Random, n_steps: int) -> dict:
    bs = rng.choice([1, 2, 4])
    steps, live, n, cps = [], [], 0, []
    prefixes = [[rng.randint(1, 30) for _ in range(rng.randint(1, 4) * bs)] for _ in range(3)]
    for _ in range(n_steps):
        kind = rng.choice(["arrive"] * 4 + ["decode"] * 3 + ["step", "finish", "finish", "preempt",
                                                             "reset", "cp", "rewind"])
        if kind == "arrive":
            rid = f"R{n}"
            n += 1
            prompt = rng.choice(prefixes)[: rng.randint(0, 16)] + [rng.randint(31, 60)
                                                                  for _ in range(rng.randint(1, 9))]
            steps.append({"arrive": {"id": rid, "prompt": prompt,
                                     "max_tokens": rng.choice([None, 2, 5]) or 10_000}})
            live.append(rid)
        elif kind == "decode":
            steps.append({"decode": {"steps": rng.randint(1, 3)}})
        elif kind == "step":
            steps.append({"step": rng.randint(1, 2)})
        elif kind == "finish" and live:
            steps.append({"finish": live.pop(rng.randrange(len(live)))})
        elif kind == "preempt" and live:
            steps.append({"preempt": rng.choice(live)})
        elif kind == "reset":
            steps.append("reset_prefix_cache")
        elif kind == "cp":
            cps.append(f"c{len(cps)}")
            steps.append({"checkpoint": cps[-1]})
        elif kind == "rewind" and cps:
            steps.append({"rewind": rng.choice(cps)})
    return {"id": "r", "title": "r",
            "config": {"num_blocks": rng.randint(3, 12), "block_size": bs, "model": None,
                       "free_order": rng.choice(["split", "append"])},
            "steps": steps}


def record_with_live(scenario: Scenario, threshold: int | None = None):
    engine = Engine(scenario, payloads=False)
    tl = Timeline(engine, keyframe_cost=threshold)
    states = [live_state(engine)]
    for step in scenario.steps:
        try:
            result = engine.apply(step)
        except EngineError:
            break  # e.g. preempting a request that is no longer running: stop like the runner
        tl.record(engine, step, result)
        states.append(live_state(engine))
    return tl, states


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("threshold", [0, 40, 10**9])
def test_every_step_materializes_to_the_live_state(seed, threshold):
    rng = random.Random(seed)
    scenario = Scenario.model_validate(random_scenario(rng, 40))
    tl, states = record_with_live(scenario, threshold)
    assert len(tl) == len(states)
    order = list(range(len(tl)))
    rng.shuffle(order)
    for i in order:
        assert snap_state(tl.step(i)) == states[i], f"step {i}"


def test_keyframes_are_sparse_but_exist():
    rng = random.Random(3)
    scenario = Scenario.model_validate(random_scenario(rng, 60))
    tl, _ = record_with_live(scenario)
    rewinds = sum(1 for s in scenario.steps if s.kind == "rewind")
    assert 1 <= tl.num_keyframes <= 1 + rewinds + len(tl) // 4


def test_frames_replay_an_event_op_by_op(run_file, root):
    _, tl = run_file(root / "scenarios" / "six-blocks.yaml", payloads=False)
    frames = tl.frames(4)  # B finishes: free_blocks([4, 2, 1])
    kinds = [f.op.kind for f in frames]
    assert kinds[:3] == ["free", "free_head", "free_tail"]
    assert frames[0].free_queue == (3, 5, 6)            # ref counts dropped, nothing queued yet
    assert frames[0].ref_cnt[1:] == (0, 0, 0, 0, 0, 0)
    assert frames[1].free_queue == (4, 3, 5, 6)         # unhashed 4 to the head
    assert frames[2].free_queue == (4, 3, 5, 6, 2, 1)   # hashed 2, 1 to the tail
    assert frames[-1].free_queue == tl.step(4).free_queue


def test_diff_names_what_changed(run_file, root):
    _, tl = run_file(root / "scenarios" / "six-blocks.yaml", payloads=False)
    d = tl.step(4).changes
    assert d.blocks == {1, 2, 4}
    assert d.to_head | d.to_tail == {1, 2, 4}
    assert d.requests == {"B"} and not d.hashes_added and not d.hashes_removed
    d8 = tl.step(8).changes
    assert d8.blocks == {1, 2, 3, 4, 5, 6}
    assert len(d8.hashes_removed) == 2 and len(d8.hashes_added) == 6


def test_snapshots_are_immutable(run_file, root):
    _, tl = run_file(root / "scenarios" / "six-blocks.yaml", payloads=False)
    s = tl.step(2)
    with pytest.raises(AttributeError):
        s.free_queue = ()
    assert isinstance(s.free_queue, tuple) and isinstance(s.ref_cnt, tuple)
    assert tl.step(2) is s or tl.step(2) == s


def test_out_of_range_step():
    tl, _ = record_with_live(load_text("id: t\ntitle: t\nconfig: {model: null}\n").scenario)
    with pytest.raises(IndexError):
        tl.step(1)


@pytest.mark.parametrize("seed", range(4))
def test_frames_are_the_same_in_any_access_order(seed):
    """Frames are replayed lazily; asking for them backwards or at random gives what a forward
    walk gives, and the last frame of every step is the step's own state."""
    rng = random.Random(seed)
    scenario = Scenario.model_validate(random_scenario(rng, 40))
    tl, _ = record_with_live(scenario)
    for i in range(1, len(tl)):
        forward = list(tl.frames(i))
        frames = tl.frames(i)
        order = list(range(len(frames)))
        rng.shuffle(order)
        for k in order:
            assert frames[k] == forward[k], (i, k)
        if forward:
            s = tl.step(i)
            assert forward[-1].free_queue == s.free_queue and forward[-1].ref_cnt == s.ref_cnt
            assert frames[-1] == forward[-1]


def test_requests_at_a_step_are_the_live_dict_in_arrival_order():
    """A step's requests are built from each request's versions on demand: the same keys, order
    and values as the engine's dict was then — also across a rewind, which undoes the requests
    that arrived after its checkpoint."""
    text = """id: t
title: t
config: {num_blocks: 6, block_size: 4, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5]}
  - checkpoint: c
  - arrive: {id: B, prompt: [1, 2, 3, 4, 9]}
  - finish: A
  - rewind: c
  - arrive: {id: C, prompt: [7, 8]}
"""
    tl, states = record_with_live(load_text(text).scenario)
    names = [list(tl.step(i).requests) for i in range(len(tl))]
    assert names == [[], ["A"], ["A"], ["A", "B"], ["A", "B"], ["A"], ["A", "C"]]
    m = tl.step(4).requests
    assert len(m) == 2 and "B" in m and "C" not in m and m.get("C") is None
    assert m["A"].status == "finished" and tl.step(5).requests["A"].status == "running"
    assert dict(m.items()) == {rid: m[rid] for rid in ("A", "B")}
    for i, live in enumerate(states):
        assert snap_state(tl.step(i))["requests"] == live["requests"]


def test_serving_steps_never_grows_the_timeline():
    """Jumps replay onto mirrors of their own: what the timeline holds after recording stays as
    it was, however often and in whatever order steps are served."""
    rng = random.Random(5)
    tl, live = record_with_live(Scenario.model_validate(random_scenario(rng, 60)), threshold=0)
    held = pickle.dumps(tl)                 # the recording, without the steps served lately
    for i in [rng.randrange(len(tl)) for _ in range(200)]:
        assert snap_state(tl.step(i)) == live[i]
        list(tl.frames(i))
    assert pickle.dumps(tl) == held


def _held(step) -> list[int]:
    """Per block, how many requests' block tables list it."""
    n = [0] * len(step.ref_cnt)
    for v in step.requests.values():
        for b in v.block_ids:
            n[b] += 1
    return n


def _check_frames_agree(tl) -> int:
    seen = 0
    for i in range(1, len(tl)):
        for f in tl.frames(i):
            held = _held(f)
            assert list(f.ref_cnt[1:]) == held[1:], (i, f.frame, f.op.kind, f.ref_cnt, held)
            seen += 1
    return seen


@pytest.mark.parametrize("name", ["six-blocks", "preempt-resume", "external-tier", "async-load",
                                  "async-lag", "chunked-prefill", "eviction-order"])
def test_every_op_frame_holds_exactly_the_blocks_its_ref_counts_count(name, run_file, root):
    """Stepping into an event, the request panel shows the same moment as the blocks: at every op
    frame each block's ref count is the number of block tables that list it (the requests
    follow from the ops, and the last frame is the engine's own state, ``check`` verifies)."""
    _, tl = run_file(root / "scenarios" / f"{name}.yaml", payloads=False)
    assert _check_frames_agree(tl) > 10


@pytest.mark.parametrize("seed", range(6))
def test_op_frames_of_random_runs_agree_with_their_ref_counts(seed):
    rng = random.Random(100 + seed)
    data = random_scenario(rng, 40)
    if seed % 2:
        data["config"]["scheduler"] = {"async_scheduling": True}
    engine = Engine(Scenario.model_validate(data), payloads=False)
    tl = Timeline(engine, check=True)      # check: each event's ops end where the engine did
    for step in engine.scenario.steps:
        try:
            result = engine.apply(step)
        except EngineError:
            break
        tl.record(engine, step, result)
    _check_frames_agree(tl)


def test_stepping_into_an_arrival_shows_the_request_waiting_until_it_is_admitted(run_file, root):
    _, tl = run_file(root / "scenarios" / "six-blocks.yaml", payloads=False)
    frames = tl.frames(1)
    kinds = [f.op.kind for f in frames]
    a = [frames[k].requests["A"] for k in range(len(frames))]
    assert (a[0].status, a[0].block_ids, a[0].num_computed_tokens) == ("waiting", (), 0)
    admit = kinds.index("admit")
    assert all(v.status == "waiting" for v in a[:admit]) and a[admit].status == "running"
    assert a[kinds.index("popleft")].block_ids == (1, 2, 3)
    assert (a[-1].num_tokens, a[-1].num_computed_tokens) == (11, 10)   # the sample: 10 of 11
    assert a[-1] == tl.step(1).requests["A"]


def test_decoding_only_some_kinds_gives_exactly_those_records_of_every_step(run_file, root):
    """``step_ops(i, only)`` steps over the other records without decoding them, and gives the
    same records, in order, as decoding the whole step and keeping those kinds (every lesson: its
    packed kinds and the records kept as they are)."""
    seen: set[str] = set()
    for path in sorted((root / "scenarios").glob("*.yaml")):
        _, tl = run_file(path, payloads=False)
        for i in range(len(tl)):
            ops = tl.step_ops(i)
            seen |= {op.kind for op in ops}
            for only in ({"cache"}, {"popleft", "touch", "free", "evict", "load", "preempt"},
                         {"lookup", "admit", "sample"}, set()):
                assert tl.step_ops(i, only) == tuple(op for op in ops if op.kind in only), (path, i)
    assert {"cache", "lookup", "touch", "evict", "preempt", "load"} <= seen


def stuck(retries: int) -> str:
    """A request that outgrows a 200-block pool at decode 41 and is then refused ``retries`` times."""
    return ("id: stuck\ntitle: stuck\nconfig: {num_blocks: 200, block_size: 4, model: null}\n"
            "steps:\n  - arrive: {id: A, prompt: [{random: 760}], max_tokens: 100000}\n"
            f"  - decode: {{steps: 60}}\n  - decode: {{steps: {retries}}}\n")


def _stuck_run(retries: int):
    return _recorded(stuck(retries))


def _recorded(text: str):
    """(engine, timeline, each step's result) of a scenario's text, recorded step by step."""
    engine = Engine(load_text(text, "t.yaml").scenario, payloads=False)
    tl = Timeline(engine)
    results = []
    for step in engine.scenario.steps:
        results.append(engine.apply(step))
        tl.record(engine, step, results[-1])
    return engine, tl, results


def test_a_request_that_cannot_be_readmitted_records_one_lookup_for_all_its_retries():
    """A request that outgrew the pool is preempted, then looked up every engine step with the same
    hit (all 200 blocks) and refused: the step's records share one Lookup, and the timeline keeps
    it once (a retry costs a few ints, not a copy of the hit); read back, the records, op frames,
    markers and hash labels are the ones the engine made."""
    from blockviz.render.markers import step_kinds, timeline_kinds
    from blockviz.teach.labels import HashLabels
    engine, tl, results = _stuck_run(50)
    assert engine.scheduler.waiting and not engine.scheduler.running   # preempted, never readmitted
    lookups = [op for op in results[-1].ops if op.kind == "lookup"]
    refused = [op for op in results[-1].ops if op.kind == "alloc_failed"]
    assert len(lookups) == len(refused) == 50 and len(lookups[0].block_ids) == 200
    assert len({id(op) for op in lookups}) == 1
    assert tl.step_ops(len(tl) - 1) == tuple(results[-1].ops)
    assert _check_frames_agree(tl) > 100                       # op frames replay the repeats
    assert timeline_kinds(tl) == tuple(step_kinds(tl.step_ops(i)) for i in range(len(tl)))
    assert "preempt" in timeline_kinds(tl)[2] and not timeline_kinds(tl)[3]
    assert len(HashLabels.for_timeline(tl).label) == 200
    more = len(pickle.dumps(tl)) - len(pickle.dumps(_stuck_run(2)[1]))
    assert more < 48 * 200                                       # 48 retries, under 200 bytes each


def test_a_step_packed_narrower_than_the_log_before_it_is_kept_exactly():
    """A 70,000-token prompt's lookup (its hit limit is 69,999) widens the op log past two bytes an
    int; the steps after it pack narrower on their own, and are read back as the engine made them."""
    text = ("id: w\ntitle: w\nconfig: {num_blocks: 5000, block_size: 16, model: null}\nsteps:\n"
            "  - arrive: {id: A, prompt: [{random: 70000}], max_tokens: 4}\n  - decode: {steps: 3}\n"
            "  - arrive: {id: B, prompt: [1, 2, 3], max_tokens: 2}\n  - decode: {steps: 2}\n")
    _, tl, results = _recorded(text)
    assert max(op.hit_tokens_limit for op in results[0].ops if op.kind == "lookup") > 65_535
    for i, result in enumerate(results, 1):
        assert tl.step_ops(i) == tuple(result.ops), i


def test_step_records_built_directly_keep_their_dataclass_contract():
    """Step, Stats and RequestView store their fields directly (sim.step.stored_directly), and
    are still frozen, with their defaults and a fresh default per instance."""
    import dataclasses

    from blockviz.sim.step import RequestView, Stats, Step
    a, b = Step(index=1), Step(index=1)
    assert a == b and a.requests == {} and a.requests is not b.requests and a.frame is None
    v = RequestView(request_id="r", status="waiting", num_prompt_tokens=3, num_tokens=3,
                    num_computed_tokens=0, table=[7])
    assert (v.num_preemptions, v.all_token_ids, v.table) == (0, [], [7])
    assert v.all_token_ids is not RequestView(request_id="s", status="waiting", num_prompt_tokens=1,
                                              num_tokens=1, num_computed_tokens=0).all_token_ids
    assert dataclasses.replace(v, status="running").status == "running"
    assert pickle.loads(pickle.dumps(v)) == v
    for record, name in ((a, "index"), (v, "status"), (Stats(num_free_blocks=1, usage=0.5), "usage")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, name, 0)
    with pytest.raises(TypeError):
        Stats(num_free_blocks=1)            # usage has no default


def test_records_at_their_defaults_pack_short_and_the_others_whole():
    """A kind's short form leaves out its fields that are their default (a group, a mask); a
    record whose group or mask is not packs whole. Both read back, walked and replayed, as made."""
    from array import array

    from blockviz.core import ops
    from blockviz.sim.mirror import Mirror
    from blockviz.sim.oplog import CODEC, OpLog

    records = [ops.Popleft((3, 4)), ops.Popleft((5,), group=1), ops.FreeTail((3,)),
               ops.FreeTail((5,), group=2), ops.Free((4,), group=1), ops.Free((3,))]
    log = OpLog()
    sizes = [len(log.pack([r], {})) for r in records]
    assert sizes == [4, 4, 3, 4, 4, 3]          # the short forms: one int less (the group)
    packed = log.pack(records, {})
    assert [op for _, op in CODEC.walk(packed, 0, len(packed), log)] == records
    kf = Mirror.from_state(log, [()], _pool(6)).keyframe()
    m = Mirror(log, [()], kf)
    Mirror.replay(m, array(packed.typecode, packed))
    assert m.queue() == (0, 1, 2, 3, 5)


def _pool(n: int):
    from blockviz.sim.step import Step
    return Step(index=0, ref_cnt=(0,) * n, block_hash=(None,) * n, block_tokens=[[]] * n,
                free_queue=tuple(range(n)), hash_table=())
