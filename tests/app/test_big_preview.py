"""Big pools in the app (issue 28): a 4,096-block scenario previews on the Author page and opens in
the player; payloads that do not fit the preview's budget are left out — at once when the store
and the weights are over it, or on a second run when the player's payload copies or the tiny
model's time pass it — and the page says so and why; a run that still cannot run whole says what
to change; "Open in the player" never opens another scenario than the editor's."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest

from blockviz.scenario import load_text
from blockviz.sim.budget import Budget, fixed_bytes
from blockviz.ui import data

from .conftest import ROOT, errors
from .test_author import BAD, SMALL, author, edit, error_box

BIG_POOL = (ROOT / "tests" / "render" / "scenarios" / "big-pool.yaml").read_text()   # model: null
# 513 MiB of KV store (512 blocks of 64 tokens, 4 layers x 8 heads x 64): over the preview's 512 MiB
HEAVY = """\
id: heavy
title: {en: "Heavy model", zh: "大模型"}
config:
  num_blocks: 512
  block_size: 64
  model: {num_layers: 4, num_kv_heads: 8, head_dim: 64}
steps:
  - arrive: {id: A, prompt: [{random: 130}]}
  - arrive: {id: B, prompt: [{same_as: A, first: 128}, {random: 3}]}
  - finish: A
"""
# the default tiny model: its store is small, its payload copies grow with every step
COPIES = """\
id: copies
title: {en: "Copies", zh: "副本"}
config: {num_blocks: 64, block_size: 4}
steps:
  - arrive: {id: A, prompt: [{random: 40}]}
  - arrive: {id: B, prompt: [{random: 40}]}
  - arrive: {id: C, prompt: [{random: 40}]}
  - decode: {steps: 3}
"""


def warn_boxes(p) -> str:
    return "\n".join(h for h in (e.proto.body for e in p.at.html) if 'class="bv bv-warnbox"' in h)


def test_a_4096_block_scenario_previews_and_opens_in_the_player(page):
    p = author(page)
    edit(p, BIG_POOL)
    assert not error_box(p) and not errors(p), (error_box(p), errors(p))
    assert "Valid: “A big pool”, 25 steps, 4095 blocks × 16 tokens." in p.html()
    board = p.board()
    assert board["num_blocks"] == 4096 and board["num_steps"] == 26 and board["dense"]
    run = p.state["bv_author_good"][1]
    assert run.last == 25 and run.timeline.error is None and run.payloads_off is None
    p.click("b_open_player")
    assert p.on_page("player") and p.state["bv_user_run"] is run
    assert p.board()["num_blocks"] == 4096 and p.header() == "step 25 of 25"


def test_a_model_too_big_for_the_preview_runs_without_payloads_and_says_so(page):
    p = author(page)
    edit(p, HEAVY)
    run = p.state["bv_author_good"][1]
    assert run.last == 3 and run.timeline.error is None          # every step ran ...
    assert not run.has_payload                                   # ... without payloads
    key, fields = run.payloads_off
    assert key == "preview_no_payloads_size" and fields["limit"] == "512.0 MiB"
    need = load_text(HEAVY, "heavy.yaml").scenario.config
    assert fields["need"] == f"{fixed_bytes(need) / 2**20:,.1f} MiB"
    box = warn_boxes(p)
    assert "This preview runs without KV payloads" in box and "512.0 MiB" in box
    assert "python -m blockviz play heavy.yaml" in box           # and how to see them
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert "这个预览不带 KV 数据运行" in warn_boxes(p)
    p.click("b_open_player")                                     # the player says it too
    assert p.on_page("player") and p.header() == "第 3 步 / 共 3 步"
    assert "这个预览不带 KV 数据" in p.html()                       # the sidebar's line
    p.open_details()
    assert any("这个预览不带 KV 数据运行" in i.value for i in p.at.info)


def test_payload_copies_over_the_budget_run_again_without_payloads():
    loaded = load_text(COPIES, "copies.yaml")
    fixed = fixed_bytes(loaded.scenario.config)
    whole = data.make_run("k", loaded, budget=Budget())
    assert whole.has_payload and whole.timeline.error is None
    run = data.preview_run("k", loaded, budget=Budget(tensor_bytes=fixed + (64 << 10)))
    key, fields = run.payloads_off
    assert key == "preview_no_payloads_bytes" and 1 <= fields["k"] <= 3
    assert run.timeline.error is None and run.last == whole.last  # the whole run, without payloads
    for i in range(run.last + 1):                                 # managed the same way
        a, b = run.timeline.step(i), whole.timeline.step(i)
        assert (a.free_queue, a.ref_cnt, list(a.requests)) == (b.free_queue, b.ref_cnt, list(b.requests))
    # with room for the copies it keeps its payloads
    assert data.preview_run("k", loaded, budget=Budget(tensor_bytes=fixed + (64 << 20))).has_payload


def test_payloads_that_take_too_long_run_again_without_them(monkeypatch):
    """The tiny model's forward passes are most of a big run's time: a run with payloads gets half
    the preview's time, and one that passes it runs again without them on the time left."""
    real, seen = data.make_run, []

    def make_run(key, loaded, **kw):
        seen.append((kw.get("payloads", True), kw["budget"].seconds))
        if kw.get("payloads", True):             # as if the forward passes took all its time
            kw["budget"] = replace(kw["budget"], seconds=0.0)
        return real(key, loaded, **kw)
    monkeypatch.setattr(data, "make_run", make_run)
    run = data.preview_run("k", load_text(COPIES, "copies.yaml"), budget=Budget(seconds=20.0))
    (on, first), (off, second) = seen
    assert on and first == pytest.approx(10.0, abs=0.5) and not off and 9.0 < second <= 20.0
    assert run.payloads_off == ("preview_no_payloads_time", {"k": 1, "limit": "0.0 MiB", "s": "10"})
    assert run.timeline.error is None and not run.has_payload


def test_a_run_that_still_stops_says_what_to_change(page):
    loaded = load_text(COPIES, "copies.yaml")
    run = data.preview_run("user:x:author:1", loaded, budget=replace(data.PREVIEW_BUDGET, tokens=100))
    assert run.exceeded == "tokens" and run.payloads_off is None    # payloads are not the reason
    from blockviz.ui import state
    (key, fields), = state.lighter_notice(run)
    assert key == "preview_lighter_tokens" and fields == {"n": "2,000,000"}
    notices = [k for k, _ in state.run_notices(run)]
    assert notices == ["cut_short", "preview_lighter_tokens", "cut_short_cli"]


def test_open_in_the_player_never_opens_an_earlier_text(page):
    p = author(page)
    edit(p, SMALL)
    assert not p.at.button(key="b_open_player").disabled
    edit(p, BAD)                                   # the preview still shows SMALL's run ...
    assert p.header() == "step 3 of 3"
    assert p.at.button(key="b_open_player").disabled              # ... which it will not open
    assert any("not of the text in the editor" in c.value for c in p.at.caption)
    from blockviz.ui import author as page_author  # (its callback opens only the editor's text)
    good = p.state["bv_author_good"]
    assert page_author._previewed({"bv_author_good": good, "bv_author_text": BAD}) is None
    assert page_author._previewed({"bv_author_good": good, "bv_author_text": SMALL}) is good
    edit(p, SMALL.replace("Tiny test", "Tiny again"))
    assert not p.at.button(key="b_open_player").disabled
    p.click("b_open_player")
    assert p.on_page("player") and "Tiny again" in p.html()
    assert re.search(r"step 3 of 3", p.header())
