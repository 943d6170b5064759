"""Every sentence true: the claims the fidelity audit found false (its section 1), as corrected,
each pinned to the state it describes — a run shows what the sentence says."""
from __future__ import annotations

from blockviz.core import BlockHasher, Request
from blockviz.i18n import t
from blockviz.render.pseudocode import PSEUDOCODE
from blockviz.scenario import load, load_text
from blockviz.scenario.lessons import resolve
from blockviz.sim.runner import run

HYBRID = """id: h
title: {en: T}
config:
  num_blocks: 16
  block_size: 4
  model: null
  kv_cache_groups: [{type: full_attention}, {type: sliding_window, sliding_window: 4}]
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], max_tokens: 3}
  - arrive: {id: B, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 21, 22], max_tokens: 2}
  - step: 3
"""


def _texts(key: str) -> tuple[str, str]:
    return t(key, "en"), t(key, "zh")


def test_the_null_block_is_a_placeholder_in_tables_never_allocated_or_cached():
    en, zh = _texts("null_block_long")
    assert "placeholder in block tables" in en and "never allocated or cached" in en
    assert "占位符" in zh and "never used" not in en
    _, tl = run(load_text(HYBRID))
    assert tl.error is None
    in_a_table = False
    for i in range(len(tl)):
        s = tl.step(i)
        assert s.ref_cnt[0] == 0 and s.block_hash[0] is None and 0 not in s.free_queue
        assert all(0 not in ids for _, ids in s.hash_table)
        for r in s.requests.values():
            bt = r.block_tables
            in_a_table |= bt is not None and any(0 in table for table in bt.tables)
    assert in_a_table          # a sliding-window table holds the null block for blocks left behind
    # and the pseudocode says why its ref_cnt never moves: touch, cache and free skip it
    for fn in ("touch", "cache_full_blocks", "free_blocks_split"):
        assert any("if block.is_null: continue" in line for line in PSEUDOCODE[fn]), fn


def test_fcfs_preempts_the_last_running_request_when_an_allocation_fails():
    for key in ("teaching_only_why", "evh_preempt"):
        en, zh = _texts(key)
        assert "default FCFS policy" in en and "last running request" in en, key
        assert "FCFS" in zh and "最后一个运行中的请求" in zh, key
    _, tl = run(load(resolve("preempt-resume")))
    seen = 0
    for i in range(1, len(tl)):
        before = tl.step(i - 1).running
        for es in tl.step(i).engine_steps:
            for victim in es.preempted:
                # the victim was running[-1] when the step began, and not the request that ran
                # short (the first one: it is still scheduled in that step)
                assert victim == before[-1]
                assert any(s.request_id != victim for s in es.scheduled)
                seen += 1
            before = tuple(r for r in before if r not in es.preempted)
    assert seen >= 1


def test_running_requests_are_scheduled_first_while_the_budget_lasts():
    en, _ = _texts("teaching_only_why")
    assert "running requests first" in en and "while the token budget lasts" in en
    _, tl = run(load_text("""id: b
title: {en: T}
config: {num_blocks: 32, block_size: 4, model: null,
         scheduler: {max_num_batched_tokens: 8, max_num_seqs: 8}}
steps:
  - arrive: {id: A, prompt: [{random: 30}]}
  - arrive: {id: B, prompt: [1, 2, 3]}
  - step: 3
"""))
    # A's prefill chunks take the whole budget of every step: B waits until A's prompt is done
    for es in tl.step(2).engine_steps + tl.step(3).engine_steps[:1]:
        assert [(s.request_id, s.num_tokens) for s in es.scheduled] == [("A", 8)]
    last = tl.step(3).engine_steps[1]
    assert [(s.request_id, s.num_tokens) for s in last.scheduled] == [("A", 6), ("B", 2)]


def test_the_hit_rate_is_the_ratio_of_vllms_counters_without_resumed_lookups():
    en, zh = _texts("hit_rate_vllm")
    assert "hits / queries" in en and "计数器" in zh
    cap_en, cap_zh = _texts("cap_how")
    assert "vllm:prefix_cache_hits / vllm:prefix_cache_queries" in cap_en
    assert "last 1,000 requests" in cap_en and "exports it nowhere" in cap_en
    assert "最近 1000 个请求" in cap_zh and "不对外导出" in cap_zh
    _, tl = run(load(resolve("preempt-resume")))
    st = tl.step(len(tl) - 1).stats
    assert st.preempted_queries > 0                    # a resumed request was looked up again ...
    assert st.hit_rate == st.hits / st.queries         # ... and is not in the rate
    assert (st.prefix_cache_queries, st.prefix_cache_hits) == (
        st.queries + st.preempted_queries, st.hits + st.preempted_hits)


def test_restart_keeps_the_external_tier_and_empties_the_gpu_cache():
    en, zh = _texts("evh_restart")
    assert "file-system tier on a shared root_dir" in en and "CPU tier would be empty" in en
    assert "文件系统层" in zh
    _, tl = run(load(resolve("hash-seed-shared")))
    restart = next(i for i in range(len(tl)) if tl.step_of(i) is not None
                   and tl.step_of(i).kind == "restart")
    before, after = tl.step(restart - 1), tl.step(restart)
    assert before.external and set(after.external) == set(before.external)   # the tier survives
    assert not after.hash_table and all(h is None for h in after.block_hash)   # the GPU is empty


def test_hashes_are_computed_when_the_request_is_made():
    assert PSEUDOCODE["add_request"][1].strip().startswith("# request.block_hashes: computed in "
                                                           "Request.__init__")
    r = Request("A", list(range(1, 10)), hasher=BlockHasher("sha256"), block_size=4)
    assert len(r.block_hashes) == 2        # before any scheduler has seen it


def test_bit_for_bit_is_said_of_this_toy_model():
    en, zh = _texts("nr_verify_same")
    assert en.endswith("in this toy model.") and "玩具模型" in zh
    _, tl = run(load(resolve("six-blocks")), device="cpu")
    checks = [op for i in range(len(tl)) for op in tl.step_ops(i) if op.kind == "verify"]
    assert checks and all(op.max_abs_diff == 0 for op in checks)


def test_the_finish_pseudocode_sets_the_status_before_freeing():
    lines = [line.strip() for line in PSEUDOCODE["finish_requests"]]
    status = next(i for i, line in enumerate(lines) if line.startswith("request.status"))
    free = next(i for i, line in enumerate(lines) if line.startswith("kv_cache_manager.free"))
    assert status < free
    assert any("request_finished(request, block_ids)" in line for line in lines)
