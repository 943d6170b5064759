"""The capacity-planning page through AppTest: it opens in both languages; a small plan shows a
progress bar that completes and a chart with one trace per free order at the pool sizes the
workload calls for; the plan is kept per parameters (no second computation); invalid parameters
are refused with a message that says what is allowed; every kind of workload runs."""
from __future__ import annotations

import json

import pytest

from blockviz.teach.workload import KINDS, default_pool_sizes, generate
from blockviz.ui import capacity as C

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
    return p.click("b_cap_compute")


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
    plan = p.state[C.RESULTS][C.params_key(params)]
    assert plan.sizes == tuple(sizes) and plan.runs == 2 * len(sizes)


def test_the_plan_is_kept_per_parameters(page):
    p = compute(open_capacity(page))
    first = p.state[C.RESULTS][C.params_key(p.state[C.PARAMS])]
    p.click("b_cap_compute")                                 # the same parameters again
    assert not progress(p)                                   # nothing computed
    assert p.state[C.RESULTS][C.params_key(p.state[C.PARAMS])] is first
    assert any("computed in" in c.value for c in p.at.caption)
    compute(p, {"w_cap_seed": 7})                            # other parameters: a new plan
    assert progress(p) and len(p.state[C.RESULTS]) == 2


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
    assert not p.state.get(C.RESULTS)


def test_a_refused_change_keeps_the_last_plan_on_show(page):
    p = compute(open_capacity(page))
    compute(p, {"w_cap_num_events": 0})
    assert errors(p) == ["Events: 0 is not allowed; use a whole number from 10 to 500."]
    assert hit_chart(p)["data"][0]["x"] == list(p.state[C.RESULTS][C.params_key(p.state[C.PARAMS])]
                                                .sizes)


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
    assert p.state[C.PARAMS]["kind"] == kind


def test_check_refuses_what_the_form_cannot_send():
    ok = dict(C.DEFAULTS)
    assert C.check(ok) == []
    assert C.check(ok | {"kind": "lifo"}) == [("cap_bad_kind", {"value": "lifo"})]
    ((key, fields),) = C.check(ok | {"block_size": 12})
    assert key == "cap_bad_value" and (fields["lo"], fields["hi"]) == (4, 64)
    assert C.check(ok | {"num_events": 10.5})[0][1]["field"] == "cap_events"
    assert C.check(ok | {"seed": True})                      # a bool is not a number here
