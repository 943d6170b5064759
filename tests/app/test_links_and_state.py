"""Deep links open exactly where they say (bad values: a friendly warning and a sensible fallback,
never a traceback or a file read), the state rules behind the controls, and the
player on scenario files beyond the built-ins (a 4,096-block pool, hostile markup, an early stop)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from blockviz.scenario.lessons import lessons_dir
from blockviz.ui import state as S

from .conftest import ROOT, move


# -- deep links ------------------------------------------------------------------------------
def test_deep_link_opens_exactly_there(page):
    p = page({"scenario": "six-blocks", "step": "5", "lang": "zh"})
    assert not p.warnings()
    assert p.header() == "第 5 步 / 共 8 步" and p.state["bv_lang"] == "zh"
    assert p.queue() == "4 3 5 6 2 1"
    assert p.params == {"scenario": "six-blocks", "step": "5", "lang": "zh"}


def test_deep_link_into_an_op(page):
    p = page({"step": "1", "op": "3"})
    assert p.state["bv_frame"] == 2 and "op 3 of 9" in p.html()
    assert p.board()["goto"] == {"step": 1, "frame": 2, "seq": 1, "run": p.board()["goto"]["run"]}
    assert "frames" in p.board()


@pytest.mark.parametrize("params, warning, header, sid", [
    ({"scenario": "no-such-scenario"}, "no built-in scenario “no-such-scenario”", "step 0 of 8",
     "six-blocks"),
    ({"scenario": "../../etc/passwd"}, "no built-in scenario “../../etc/passwd”", "step 0 of 8",
     "six-blocks"),
    ({"scenario": "/etc/passwd"}, "no built-in scenario", "step 0 of 8", "six-blocks"),
    ({"scenario": "scenarios/six-blocks.yaml"}, "no built-in scenario", "step 0 of 8", "six-blocks"),
    ({"step": "999"}, "“999” is not a step of this scenario (0 to 8); showing step 8", "step 8 of 8",
     "six-blocks"),
    ({"step": "abc"}, "“abc” is not a step", "step 0 of 8", "six-blocks"),
    ({"step": "-1"}, "“-1” is not a step", "step 0 of 8", "six-blocks"),
    ({"step": "3.5"}, "“3.5” is not a step", "step 0 of 8", "six-blocks"),
    ({"lang": "fr"}, "Unknown language “fr”", "step 0 of 8", "six-blocks"),
    ({"step": "2", "op": "99"}, "“99” is not an operation of step 2", "step 2 of 8", "six-blocks"),
])
def test_bad_deep_links_warn_and_fall_back(page, params, warning, header, sid):
    p = page(params)                                   # Page asserts there is no exception
    assert not p.at.exception
    assert any(warning in w for w in p.warnings()), p.warnings()
    assert p.header() == header and p.state["bv_scenario"] == sid
    assert p.params["scenario"] == sid                 # the URL is corrected too


def test_scenario_names_never_reach_the_file_system(page, monkeypatch):
    """The id is looked up in the set the glob found: only files in scenarios/ are ever read."""
    import streamlit as st

    from blockviz.ui import data
    seen: list[Path] = []
    real = data.load

    def spy(path):
        seen.append(Path(path).resolve())
        return real(path)
    monkeypatch.setattr(data, "load", spy)
    st.cache_resource.clear()                  # make the app scan and run again, under the spy
    p = page({"scenario": "../../etc/passwd", "step": "1"})
    assert p.state["bv_scenario"] == "six-blocks"
    assert seen and all(path.parent == lessons_dir().resolve() for path in seen)
    notices: list = []
    assert S.choose_scenario("six-blocks/../../x", ["six-blocks"], notices) == "six-blocks"
    assert S.choose_scenario("six-blocks", ["six-blocks"], notices) == "six-blocks"
    assert len(notices) == 1


def test_the_url_names_the_scenario_and_the_board_owns_its_step(page):
    p = page()
    assert p.params == {"scenario": "six-blocks", "step": "0", "lang": "en"}
    assert p.board()["url"] is True              # the board writes ?step= as it moves (browser tests)
    p.click("b_next")
    assert p.params["step"] == "0"               # Python does not write it back a step behind
    p.at.selectbox(key="w_scenario").set_value("preempt-resume" if "preempt-resume" in
                                               p.at.selectbox(key="w_scenario").options
                                               else p.at.selectbox(key="w_scenario").options[0])
    p.run()
    assert p.params["scenario"] == p.state["bv_scenario"] and p.params["step"] == "0"


# -- state rules (the parts AppTest cannot fire, e.g. run_every) ----------------------------------
def ops_of(counts):
    return lambda i: counts[i]


def test_move_by_events_clamps_at_both_ends():
    n = ops_of([0, 3, 2])
    assert move(0, None, "prev", 2, n) == (0, None)
    assert move(0, None, "next", 2, n) == (1, None)
    assert move(2, None, "next", 2, n) == (2, None)
    assert move(1, None, "last", 2, n) == (2, None)
    assert move(2, None, "first", 2, n) == (0, None)


def test_move_by_ops_crosses_event_borders():
    n = ops_of([0, 3, 2])
    assert move(1, 0, "next", 2, n) == (1, 1)
    assert move(1, 2, "next", 2, n) == (2, 0)
    assert move(2, 0, "prev", 2, n) == (1, 2)
    assert move(1, 0, "prev", 2, n) == (0, 0)          # step 0 has no ops: frame 0 = the state
    assert move(2, 1, "next", 2, n) == (2, 1)          # the very end
    assert move(0, 0, "last", 2, n) == (2, 1)


def test_step_next_is_the_boards_next_key():
    """Self-check's "show step k" moves the cursor as the board's → does, by events or by ops."""
    n = ops_of([0, 3, 2])
    for cursor, frame in ((0, None), (2, None), (1, 0), (1, 2), (2, 1)):
        st = {S.CURSOR: cursor, S.FRAME: frame}
        S.step_next(st, 2, n)
        assert (st[S.CURSOR], st[S.FRAME]) == move(cursor, frame, "next", 2, n)


def test_speeds():
    assert S.SPEEDS[0] == 0.5 and S.SPEEDS[-1] == 4.0


def test_url_params_round_trip():
    st = {S.SCENARIO: "six-blocks", S.CURSOR: 4, S.FRAME: 1, S.LANG: "zh", S.PRESENTER: True}
    assert S.url_params(st) == {"scenario": "six-blocks", "step": "4", "lang": "zh", "op": "2",
                                "presenter": "1"}
    back: dict = {}
    S.init_from_link(back, S.url_params(st), ["six-blocks"], "en", lambda sid: 8, lambda sid, i: 5)
    assert (back[S.CURSOR], back[S.FRAME], back[S.LANG], back[S.PRESENTER]) == (4, 1, "zh", True)
    assert back[S.NOTICES] == []


# -- scenario files beyond the built-ins ---------------------------------------------------------
def test_a_long_dense_run_ships_the_window_centred_on_the_step(page, test_scenarios):
    """The board holds a window of steps; the one it is sent is centred on the step shown, so a
    key either way stays inside it (at the window's edge every key would wait for the server,
    and the board would refit each time)."""
    p = page({"scenario": "long-dense", "step": "60"})
    d = p.board()
    assert d["dense"] is True and d["num_steps"] == 121 and d["hi"] - d["lo"] + 1 == 40
    assert d["lo"] <= 60 - 15 and d["hi"] >= 60 + 15, (d["lo"], d["hi"])


def test_big_pool_draws_a_heatmap_and_steps_fast(page, test_scenarios):
    p = page({"scenario": "big-pool", "step": "22"})
    assert 'class="bv-card' not in p.html()
    d = p.board()
    assert d["dense"] is True and d["no_frames"] is True and d["steps"].keys() == {"en"}
    rec = d["cells"][22 - d["lo"]]
    assert len(rec["cells"]) == d["num_blocks"] and rec["cells"][0] == "n"   # one cell per block
    assert set(rec["cells"][1:]) <= set("fcuU")
    assert d["hi"] - d["lo"] + 1 <= 40                                     # a window of steps
    assert f"{d['num_blocks']:,} blocks" in d["legend"]["en"]
    assert "more" in p.html()                          # the long free queue is cut with a count
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        p.click("b_next")
        times.append(time.perf_counter() - t0)
    assert p.header() == "step 24 of 25"
    print(f"\nAppTest rerun of a 4,096-block step: {min(times) * 1000:.0f} ms (incl. AppTest overhead)")


def test_hostile_scenario_renders_as_text(page, test_scenarios):
    p = page({"scenario": "hostile", "step": "1"}).open_details()
    html = p.html()
    assert "<script" not in html.lower() and "&lt;script&gt;" in html
    assert "<b>R</b>" not in html and "&lt;b&gt;R&lt;/b&gt;" in html
    # no tensors in this scenario: the payload panel says so
    assert "runs without KV payloads" in p.text()
    # the timeline's event names (text in the browser, never markup) come from the scenario
    assert any("<i>cp</i>" in e for e in p.board()["events"]["en"])


def test_run_error_is_shown_at_the_last_step(page, test_scenarios):
    p = page({"scenario": "stops-early"})
    assert "The run stopped here" not in p.html()
    p.click("b_last")
    assert p.header() == "step 2 of 2"
    assert "The run stopped here" in p.html() and "only a running request can be preempted" in p.html()
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert "运行在此处停止" in p.html() and "只有运行中的请求才能被抢占" in p.html()
    assert "can be preempted" not in p.html()


def test_broken_and_custom_directories_do_not_leak_into_the_builtins(page, test_scenarios):
    p = page({"scenario": "six-blocks"})
    # six-blocks is not in the test directory: friendly fallback to that directory's first id
    assert any("no built-in scenario “six-blocks”" in w for w in p.warnings())
    assert p.state["bv_scenario"] in {"big-pool", "duplicate", "hostile", "stops-early"}


def test_values_from_the_url_are_inert_in_the_warning(page):
    p = page({"scenario": "[x](javascript:alert(1))"})
    raw = [w.value for w in p.at.warning]
    assert raw and "\\[x\\]\\(javascript\\:alert\\(1\\)\\)" in raw[0]


def test_a_builtin_file_that_does_not_load_is_named_in_either_language(page, monkeypatch, tmp_path):
    six = (ROOT / "scenarios" / "six-blocks.yaml").read_text()
    (tmp_path / "a-six.yaml").write_text(six)
    (tmp_path / "b-again.yaml").write_text(six)                              # the same id
    (tmp_path / "c-bad.yaml").write_text(six.replace("- finish: B", "- finish: Z", 1))
    monkeypatch.setenv("BLOCKVIZ_SCENARIOS", str(tmp_path))
    p = page({"scenario": "six-blocks"})
    warned = " ".join(p.warnings())
    assert "b-again.yaml could not be loaded: duplicate scenario id 'six-blocks'" in warned
    assert "c-bad.yaml could not be loaded" in warned and "is used before it arrives" in warned
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    warned = " ".join(p.warnings())
    assert "b-again.yaml 无法加载：场景 id 'six-blocks' 重复了" in warned
    assert "c-bad.yaml 无法加载" in warned and "请求 'Z' 在到达（arrive）之前就被使用了" in warned
    assert p.header() == "第 0 步 / 共 8 步"            # the good file still plays
