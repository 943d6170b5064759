"""The capacity-planning page through AppTest: it opens in both languages; a small plan shows a
progress bar that completes and a chart with one trace per free order at the pool sizes the
workload calls for; the plan is kept per parameters (no second computation); invalid parameters
are refused with a message that says what is allowed; every kind of workload runs."""
from __future__ import annotations

import json

import pytest

from blockviz.teach.workload import KINDS, default_pool_sizes, generate
from blockviz.ui import capacity as C
from blockviz.ui import capacity_trace as CT
from blockviz.ui import state as session

from .conftest import errors

SMALL = {"w_cap_num_events": 60, "w_cap_num_sizes": 4}


def open_capacity(page, lang: str = "en"):
    p = page().goto("capacity")
    assert p.on_page("capacity")
    if lang != "en":
        p.at.segmented_control(key="w_lang").set_value(lang)
        p.run()
    return p


def fill(p, values: dict) -> None:
    for key, value in values.items():
        p.at.number_input(key=key).set_value(value)


def compute(p, values: dict = SMALL):
    fill(p, values)
    return settle(p.click("b_cap_compute"))


def hit_chart(p) -> dict:
    specs = [json.loads(s) for s in p.charts()]
    assert len(specs) == 2                                   # hit rate; evictions/preemptions
    return specs[0]


def progress(p) -> list[tuple[int, str]]:
    return [(e.proto.value, e.proto.text) for e in p.at.get("progress")]


@pytest.mark.parametrize("lang, title, compute_label, hint", [
    ("en", "How big must the KV-cache pool be?", "Compute", "Choose a workload and press Compute."),
    ("zh", "KV 缓存块池要多大？", "计算", "选择一个负载，然后点击“计算”。"),
])
def test_the_page_opens_in_both_languages(page, lang, title, compute_label, hint):
    p = open_capacity(page, lang)
    assert title in p.html()
    assert p.at.button(key="b_cap_compute").label == compute_label
    assert [i.value for i in p.at.info] == [hint]
    assert not p.charts() and not progress(p)
    kinds = p.at.segmented_control(key="w_cap_kind")
    assert kinds.value == "shared_prefix" and list(kinds.options) == [
        C.t(f"cap_kind_{k}", lang) for k in KINDS]
    assert p.at.number_input(key="w_cap_num_events").label == C.t("cap_events", lang)
    assert p.params == {}                                   # the player's link is not this page's


def test_a_small_plan_draws_both_orders_at_the_expected_sizes(page):
    p = compute(open_capacity(page))
    params = dict(C.DEFAULTS, num_events=60, num_sizes=4)
    sizes = default_pool_sizes(generate(C.workload(params)), 4)
    assert len(sizes) >= 2
    spec = hit_chart(p)
    assert [tr["name"] for tr in spec["data"]] == ["split (vLLM ≥ 0.24)", "append (vLLM ≤ 0.23)"]
    assert [tr["x"] for tr in spec["data"]] == [sizes, sizes]
    assert all(0 <= y <= 1 for tr in spec["data"] for y in tr["y"])
    assert spec["layout"]["xaxis"]["title"]["text"] == "pool size (blocks)"
    # the progress bar ran to the end and says what it did
    ((value, text),) = progress(p)
    assert value == 100 and text.startswith(f"Done: {2 * len(sizes)} runs of 60 events")
    assert not errors(p)
    assert "How to read it" in p.html()
    plan = p.state[session.CAP_RESULTS][C.params_key(params)]
    assert plan.sizes == tuple(sizes) and plan.runs == 2 * len(sizes)


def test_the_plan_is_kept_per_parameters(page):
    p = compute(open_capacity(page))
    first = p.state[session.CAP_RESULTS][C.params_key(p.state[session.CAP_PARAMS])]
    settle(p.click("b_cap_compute"))                         # the same parameters again
    assert not progress(p)                                   # nothing computed
    assert p.state[session.CAP_RESULTS][C.params_key(p.state[session.CAP_PARAMS])] is first
    assert any("computed in" in c.value for c in p.at.caption)
    compute(p, {"w_cap_seed": 7})                            # other parameters: a new plan
    assert progress(p) and len(p.state[session.CAP_RESULTS]) == 2


def test_a_language_switch_redraws_without_recomputing(page):
    p = compute(open_capacity(page))
    p.at.segmented_control(key="w_lang").set_value("zh")
    p.run()
    assert not progress(p)
    spec = hit_chart(p)
    assert spec["layout"]["xaxis"]["title"]["text"] == "块池大小（块）"
    assert spec["layout"]["yaxis"]["title"]["text"] == "前缀缓存命中率"
    assert [tr["name"] for tr in spec["data"]] == ["split（vLLM ≥ 0.24）", "append（vLLM ≤ 0.23）"]
    assert "怎么读这张图" in p.html()
    assert p.at.number_input(key="w_cap_num_events").value == 60       # the form kept its values


@pytest.mark.parametrize("values, message", [
    ({"w_cap_num_events": 5000}, "Events: 5000 is not allowed; use a whole number from 10 to 500."),
    ({"w_cap_num_sizes": 1}, "Pool sizes to try: 1 is not allowed; use a whole number from 2 to 10."),
    ({"w_cap_seed": -1}, "Seed: -1 is not allowed; use a whole number from 0 to 2147483647."),
    ({"w_cap_new_tokens": 0}, "New tokens per request (mean): 0 is not allowed; use a whole "
                              "number from 1 to 128."),
])
def test_invalid_parameters_are_refused_with_a_message(page, values, message):
    p = compute(open_capacity(page), values)
    assert errors(p) == [message]
    assert not progress(p) and not p.charts()
    assert not p.state.get(session.CAP_RESULTS)


def test_a_refused_change_keeps_the_last_plan_on_show(page):
    p = compute(open_capacity(page))
    compute(p, {"w_cap_num_events": 0})
    assert errors(p) == ["Events: 0 is not allowed; use a whole number from 10 to 500."]
    shown = p.state[session.CAP_RESULTS][C.params_key(p.state[session.CAP_PARAMS])]
    assert hit_chart(p)["data"][0]["x"] == list(shown.sizes)


def test_invalid_message_in_chinese(page):
    p = compute(open_capacity(page, "zh"), {"w_cap_max_live": 99})
    assert errors(p) == ["同时存在的请求（最多）：不允许 99；请用 1 到 16 之间的整数。"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_of_workload_runs(page, kind):
    p = open_capacity(page)
    p.at.segmented_control(key="w_cap_kind").set_value(kind)
    compute(p, {"w_cap_num_events": 40, "w_cap_num_sizes": 2})
    assert not errors(p)
    assert len(hit_chart(p)["data"]) == 2
    assert p.state[session.CAP_PARAMS]["kind"] == kind


def test_check_refuses_what_the_form_cannot_send():
    ok = dict(C.DEFAULTS)
    assert C.check(ok) == []
    assert C.check(ok | {"kind": "lifo"}) == [("cap_bad_kind", {"value": "lifo"})]
    ((key, fields),) = C.check(ok | {"block_size": 12})
    assert key == "cap_bad_value" and (fields["lo"], fields["hi"]) == (4, 64)
    assert C.check(ok | {"num_events": 10.5})[0][1]["field"] == "cap_events"
    assert C.check(ok | {"seed": True})                      # a bool is not a number here


# -- real traffic: a trace ----------------------------------------------------------------------
def settle(p, timeout: float = 120):
    """Rerun the page until the session's trace jobs (they run in worker processes) have ended
    and the page has taken what they made (the browser's fragment does this every 0.5 s)."""
    import time
    deadline = time.monotonic() + timeout
    jobs = (session.CAPT_READ_JOB, session.CAPT_SWEEP_JOB, session.CAP_PLAN_JOB, session.CAPT_CHAT_JOB)
    while any(p.state.get(k) is not None for k in jobs):
        assert time.monotonic() < deadline, "a job did not end"
        time.sleep(0.2)
        p.run()
    return p


def generated_trace(p, requests: int = 300, kind: str = "multi_turn"):
    p.at.segmented_control(key="w_capt_source").set_value("generate")
    p.run()
    p.at.selectbox(key="w_capt_gen_kind").set_value(kind)
    p.at.number_input(key="w_capt_gen_requests").set_value(requests)
    return settle(p.click("b_capt_generate"))


def trace_sweep(p, mode: str = "sequence", sizes: int = 4):
    p.at.segmented_control(key="w_capt_mode").set_value(mode)
    p.at.number_input(key="w_capt_num_sizes").set_value(sizes)
    p.at.selectbox(key="w_capt_block_size").set_value(64)
    return settle(p.click("b_capt_compute"))


def curve_element(p) -> dict | None:
    """The data the curve element was sent (None: none on the page)."""
    found = [e for e in p.at.get("bidi_component") if e.proto.id.endswith("-capt_curve")]
    if not found:
        return None
    raw = json.loads(found[0].proto.json)
    return json.loads(raw) if isinstance(raw, str) else raw


def breakpoints(order: dict) -> tuple[list[int], list[int], list[int]]:
    """An order's breakpoints from the element's deltas, as curve.js decodes them."""
    xs, vals, x, v = [], [], 0, 0
    for dx, dv in zip(order["dx"], order["dv"]):
        x, v = x + dx, v + dv
        xs.append(x)
        vals.append(v)
    return xs, vals, order["s"]


def test_the_trace_tab_draws_the_whole_curve_from_one_pass(page):
    from blockviz.scenario.trace import read_trace
    from blockviz.sim.capacity import ceiling, replay_sequence
    from blockviz.sim.curve import curve_sequence, hit_blocks_at, knee_hit_blocks
    from blockviz.sim.optimal import optimal_hits
    p = generated_trace(open_capacity(page))
    trace = p.state[session.CAPT_TRACE]
    assert trace.requests == 300 and not errors(p)
    assert any("300 requests" in m.value for m in p.at.success)
    p = trace_sweep(p)
    assert not errors(p)
    s = p.state[session.CAPT_SWEEP]
    assert s.curve is not None and not p.charts()          # drawn by the element, not plotly
    reqs = read_trace(trace.path)
    d = curve_element(p)
    curve = curve_sequence(reqs, block_size=64)
    assert (d["lo"], d["hi"], d["bs"]) == (curve.largest, curve.working_set, 64)
    assert d["queries"] == sum(r.input_length for r in reqs)
    assert [o["id"] for o in d["orders"]] == ["split", "append"]
    assert [o["name"] for o in d["orders"]] == ["split (vLLM ≥ 0.24)", "append (vLLM ≤ 0.23)"]
    # every pool size the element can read is the replay's (a sample of them here; the sim's
    # tests take every one)
    sizes = sorted({d["lo"], d["hi"], *range(d["lo"], d["hi"], 97), *s.curve["sizes"]})
    for o in d["orders"]:
        bp = breakpoints(o)
        for n in sizes:
            assert hit_blocks_at(*bp, n) * 64 == replay_sequence(
                reqs, block_size=64, pool_blocks=n, free_order=o["id"])["hits"], (o["id"], n)
    # the knee, on the whole curve; MIN at its sizes and at the knees
    split = d["orders"][0]
    target = knee_hit_blocks(ceiling(reqs, block_size=64), 64, 0.9)
    assert split["knee"] == curve.first_reaching(target, curve.largest)
    assert split["knee"] in s.curve["sizes"]
    best = optimal_hits(reqs, block_size=64, pool_blocks=s.curve["sizes"])
    assert d["optimal"] == [[n, best[n]] for n in s.curve["sizes"]]
    # the marker starts at the knee; the words say it; the bar said what it did
    assert (d["pool"], p.state["w_capt_pool"]) == (split["knee"], split["knee"])
    assert f"the knee is at {split['knee']:,} blocks" in p.text()
    assert "the best any eviction policy could do is" in p.text()
    ((value, text),) = [(v, tx) for v, tx in progress(p) if tx.startswith("Done")]
    assert value == 100 and text.startswith("Done: the whole curve of 300 requests for both free orders")
    # a pool typed into the player box moves the marker (a new seq), and opens there
    p.at.number_input(key="w_capt_pool").set_value(123)
    p.run()
    moved = curve_element(p)
    assert moved["pool"] == 123 and moved["seq"] == d["seq"] + 1
    p.at.selectbox(key="w_capt_order").set_value("append")
    p.at.number_input(key="w_capt_window_size").set_value(3)
    p.click("b_capt_open_player")
    assert p.on_page("player") and not errors(p)
    run = p.state["bv_user_run"]
    assert run.scenario.config.free_order == "append"
    assert run.scenario.config.num_blocks == 123 * 64 // 512


def test_the_curve_in_chinese_and_without_min(page):
    p = generated_trace(open_capacity(page, "zh"), 120)
    p.at.checkbox(key="w_capt_optimal").uncheck()
    p = trace_sweep(p)
    assert not errors(p)
    d = curve_element(p)
    assert d["lang"] == "zh" and d["optimal"] == []
    assert d["labels"]["y"] == "前缀缓存命中率" and d["orders"][0]["name"] == "split（vLLM ≥ 0.24）"
    assert "拐点在" in p.text()
    assert any(tx.startswith("完成：120 个请求在两种释放顺序下的整条曲线") for _, tx in progress(p))
    assert not any("optimal_hits" in pt for pt in p.state[session.CAPT_SWEEP].curve["reports"][0]["points"])


def bailian_chats(path, chats: int = 40, seed: int = 2) -> int:
    """A Qwen-Bailian trace of ``chats`` conversations over two system prompts, each turn its
    conversation so far (prompts and replies) plus a new message, turns interleaved in time;
    16-token hash ids. Its requests."""
    import random
    rng = random.Random(seed)
    systems = [list(range(1, 9)), list(range(9, 21))]
    fresh = iter(range(1000, 10**9))
    events = []
    for c in range(chats):
        ids = list(rng.choice(systems))
        t0 = rng.uniform(0, 600)
        for turn in range(1, rng.randint(1, 6) + 1):
            ids = ids + [next(fresh) for _ in range(rng.randint(2, 8))]
            events.append((t0, c, turn, list(ids)))
            ids = ids + [next(fresh) for _ in range(rng.randint(1, 4))]     # the reply
            t0 += rng.uniform(5, 120)
    events.sort()
    ids_of, lines = {}, []
    for k, (at, c, turn, ids) in enumerate(events):
        lines.append({"chat_id": k, "parent_chat_id": ids_of.get(c, -1), "timestamp": round(at, 3),
                      "input_length": 16 * len(ids) - rng.randint(0, 15), "output_length": 30,
                      "type": "text", "turn": turn, "hash_ids": ids})
        ids_of[c] = k
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return len(lines)


def test_a_bailian_traces_conversations_turn_by_turn(page, tmp_path):
    from blockviz.sim.chats import chat_report
    path = tmp_path / "qwen_chat_blksz_16.jsonl"
    n = bailian_chats(path)
    p = open_capacity(page)
    # (AppTest cannot upload: the trace the reader would take, as it takes it)
    size = CT.ReadTrace(str(path), path.name)(lambda **progress: None)
    assert size["chats"] is True and size["requests"] == n
    p.state[session.CAPT_TRACE] = CT.TraceFile(path.name, str(path), n, size["prompt_tokens"], "q#1", True)
    p.run()
    p = trace_sweep(p)
    assert not errors(p) and curve_element(p) is not None
    pool = 40
    p.at.number_input(key="w_capt_pool").set_value(pool)
    p.run()
    assert p.at.button(key="b_capt_chats").label == "Replay at 40 blocks (split (vLLM ≥ 0.24))"
    p = settle(p.click("b_capt_chats"))
    assert not errors(p)
    key, task, r = p.state[session.CAPT_CHATS]
    assert (task.pool_blocks, task.free_order) == (pool, "split")
    assert r == chat_report(str(path), block_size=64, pool_blocks=pool, limit=n)
    chat = r["chats"][0]                       # the one evictions cost most, shown first
    assert chat["lost"] == max(c["lost"] for c in r["chats"]) > 0 and len(chat["turns"]) >= 2
    assert p.at.selectbox(key="w_capt_chat").value == 0
    spec = json.loads(p.charts()[-1])
    assert [tr["name"] for tr in spec["data"]] == ["hit at this pool", "lost to eviction (an infinite cache "
                                                   "hits it)", "not in any cache yet"]
    assert spec["data"][0]["x"] == [x["hit"] for x in chat["turns"]]
    assert spec["data"][1]["x"] == [x["best"] - x["hit"] for x in chat["turns"]]
    assert spec["data"][0]["y"][0].startswith("turn 1 · text · +0.0 s · L")
    assert "This conversation:" in p.text().replace("\\", "") and any("Done:" in tx for _, tx in progress(p))
    # another conversation; the marker moved: the view says which pool it shows
    p.at.selectbox(key="w_capt_chat").set_value(1)
    p.at.number_input(key="w_capt_pool").set_value(pool + 5)
    p.run()
    spec = json.loads(p.charts()[-1])
    assert spec["data"][0]["x"] == [x["hit"] for x in r["chats"][1]["turns"]]
    assert any("the marker is at 45 blocks now" in c.value for c in p.at.caption)
    # in Chinese
    p.at.segmented_control(key="w_lang").set_value("zh")
    p.run()
    assert json.loads(p.charts()[-1])["data"][0]["name"] == "在这个块池下命中"
    assert "这段对话" in p.text()


def test_a_mooncake_trace_has_no_chat_view(page):
    p = trace_sweep(generated_trace(open_capacity(page), 60))
    assert curve_element(p) is not None
    assert not [b for b in p.at.button if b.key == "b_capt_chats"]


def test_a_timed_trace_sweep_and_a_window_in_the_player(page):
    p = trace_sweep(generated_trace(open_capacity(page), 120), "timed", 2)
    assert not errors(p)
    s = p.state[session.CAPT_SWEEP]
    assert s.task.mode == "timed" and "ttft_p90_s" in s.reports[0]["points"][0]
    assert len(p.charts()) == 2 and "TTFT p50" in p.text()
    pool = s.reports[0]["points"][1]["pool_blocks"]                   # the larger point
    p.at.number_input(key="w_capt_pool").set_value(pool)
    p.at.number_input(key="w_capt_window_first").set_value(3)
    p.at.number_input(key="w_capt_window_size").set_value(4)
    p.click("b_capt_open_player")
    assert p.on_page("player") and not errors(p)
    run = p.state["bv_user_run"]
    arrivals = [st.args.id for st in run.scenario.steps if st.kind == "arrive"]
    assert arrivals == ["L3", "L4", "L5", "L6"]                        # lines 3..6 of the file
    assert run.scenario.config.free_order == "split"


def test_the_tab_starts_on_upload_and_its_reader_locates_a_bad_line(page, tmp_path):
    # AppTest cannot upload; the page's reader is what the uploader calls (the browser test
    # uploads for real).
    from blockviz.scenario.trace import TraceError
    p = open_capacity(page)
    bad = b'{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n{"timestamp": 1}\n'
    with pytest.raises(TraceError) as e:
        CT.ReadTrace(_write(tmp_path, bad), "mine.jsonl")(lambda **progress: None)
    assert e.value.localized("en").startswith("mine.jsonl:2:1: missing field 'input_length'")
    assert "缺少字段" in e.value.localized("zh")
    assert p.at.segmented_control(key="w_capt_source").value == "upload"


def _write(tmp_path, data: bytes) -> str:
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    return str(path)


def test_a_timed_sweep_too_large_for_the_page_is_refused(page, monkeypatch):
    monkeypatch.setitem(CT.MAX_REPLAY, "timed", 50)
    p = generated_trace(open_capacity(page), 120)
    p.at.number_input(key="w_capt_replay").set_value(100)
    p = trace_sweep(p, "timed", 2)
    assert errors(p) == ["100 requests is more than the page replays in timed mode (at most 50): replay "
                         "fewer here, or the whole trace with `blockviz trace capacity`."]
    assert p.state[session.CAPT_SWEEP] is None


def test_a_sessions_trace_folder_goes_with_the_session(page):
    """A trace (up to 200 MB) is kept in a folder of its session: one folder however many traces
    it takes, there while the session lives, removed once the session's state is dropped, as
    Streamlit drops it when a tab closes (the folders used to pile up in /tmp while the server
    ran)."""
    import gc
    from pathlib import Path

    p = generated_trace(open_capacity(page), requests=50)
    held = p.at.session_state["bv_capt_dir"]
    folder = held.path
    assert (folder / "trace.jsonl").is_file() and Path(p.state[session.CAPT_TRACE].path).parent == folder
    p = generated_trace(p, requests=60)
    assert p.at.session_state["bv_capt_dir"] is held and [f.name for f in folder.iterdir()] == ["trace.jsonl"]
    assert p.state[session.CAPT_TRACE].requests == 60
    del held, p
    gc.collect()
    assert not folder.exists()


def test_a_hybrid_model_is_replayed_with_its_groups_and_the_page_says_what_limited_it(page):
    """gpt-oss-120b: sequence mode replays pool sizes one by one with its two KV-cache groups
    (the one-pass curve is one group's), the ceiling too; the chart adds what full attention held,
    the words say the sliding window limited the hits, GiB follow a pool slot of 18 layers."""
    from blockviz.scenario.trace import read_trace
    from blockviz.sim.capacity import KV_PRESETS, ceiling, model_groups, replay_sequence
    p = generated_trace(open_capacity(page), 120)
    p.at.selectbox(key="w_capt_model").set_value("gpt-oss-120b")
    p = trace_sweep(p, "sequence", 3)
    assert not errors(p)
    s = p.state[session.CAPT_SWEEP]
    assert s.curve is None and s.task.model == "gpt-oss-120b" and s.reports[0]["model"] == "gpt-oss-120b"
    reqs = read_trace(p.state[session.CAPT_TRACE].path)
    groups = model_groups("gpt-oss-120b")
    for point in s.reports[0]["points"]:
        want = replay_sequence(reqs, block_size=64, pool_blocks=point["pool_blocks"], kv_cache_groups=groups)
        assert point == want
    assert s.reports[0]["ceiling"] == ceiling(reqs, block_size=64, kv_cache_groups=groups)
    (chart,) = p.charts()
    names = [tr["name"] for tr in json.loads(chart)["data"] if "name" in tr]
    assert "held by full attention · split (vLLM ≥ 0.24)" in names
    text = p.text().replace("\\", "")                 # markdown's escapes
    assert "gpt-oss-120b is a hybrid model: this replay ran vLLM's 2 KV-cache groups of 18 layers" in text
    assert "the sliding window limited the hits" in text
    slot = KV_PRESETS["gpt-oss-120b"].bytes_per_token
    assert slot == 36 * 1024 and "36 KiB" in text
