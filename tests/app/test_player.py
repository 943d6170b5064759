"""The player page through AppTest: every built-in scenario opens, every control moves the cursor
as it should, step-into walks the op frames with the right pseudocode line, the language switch
changes the words, presenter mode keeps the essentials, and the URL follows the cursor."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

BUILTIN_IDS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("sid", BUILTIN_IDS)
def test_every_builtin_scenario_opens_and_reaches_its_last_step(page, sid):
    p = page({"scenario": sid})
    assert not p.warnings()
    assert p.state["bv_scenario"] == sid and p.header().startswith("step 0 of ")
    last = int(p.header().rsplit(" ", 1)[1])
    d = p.board()
    assert d["num_steps"] == last + 1 and (d["lo"], d["hi"]) == (0, last)     # a lesson ships every step
    assert set(d["steps"]) == {"en", "zh"}                             # both languages: no rerun
    p.click("b_last")
    assert p.header() == f"step {last} of {last}"


def test_opens_on_six_blocks_at_the_start(page):
    p = page()
    assert p.state["bv_scenario"] == "six-blocks"
    assert p.header() == "step 0 of 8"
    assert "Six blocks, one prefix" in p.html()
    assert p.queue() == "1 2 3 4 5 6"
    assert p.params == {"scenario": "six-blocks", "step": "0", "lang": "en"}
    d = p.board()
    assert d["goto"]["step"] == 0 and d["url"] is True and d["report"] is False


def test_next_prev_first_last(page):
    p = page()
    for _ in range(4):
        p.click("b_next")
    assert p.header() == "step 4 of 8" and p.queue() == "4 3 5 6 2 1"
    p.click("b_prev")
    assert p.header() == "step 3 of 8" and p.queue() == "3 5 6"
    p.click("b_last")
    assert p.header() == "step 8 of 8" and p.queue() == ""
    p.click("b_first")
    assert p.header() == "step 0 of 8"


def test_the_board_data_never_carries_the_browser_step(page):
    """Python moves the board only by a new goto: a rerun after the browser stepped sends the same
    data, so a late rerun cannot pull the board back (and the payload is not sent again)."""
    p = page()
    before = p.board()
    p.click("b_next").click("b_next")         # the browser stepped and said so
    after = p.board()
    assert after == before                     # same data, same goto: the board stays where it is
    assert after["goto"] == {"step": 0, "frame": None, "seq": 1, "run": after["goto"]["run"]}


def test_the_board_reports_its_step_only_while_a_panel_follows_it(page):
    p = page()
    assert p.board()["report"] is False                      # stepping costs the server nothing
    p.at.session_state["bv_open_x_metrics"] = True
    p.run()
    assert p.board()["report"] is True
    p.at.session_state["bv_open_x_metrics"] = False
    p.at.toggle(key="w_selfcheck").set_value(True)
    p.run()
    assert p.board()["report"] is True


def test_the_timeline_marks_every_step_with_its_kinds(page):
    d = page().board()
    assert len(d["marks"]) == 9
    assert d["marks"][1] == "a" and "h" in d["marks"][2] and "e" in d["marks"][8]
    assert d["events"]["en"][1] == "A arrives" and d["events"]["zh"][1]


def test_step_into_walks_the_frames_with_the_pseudocode_line(page):
    p = page({"step": "1"})
    assert "frames" not in p.board()                        # frames ship only on request
    p.step_into()
    assert "frames" in p.board() and p.board()["steps"].keys() == {"en"}
    assert p.state["bv_frame"] == 0 and "op 1 of 9" in p.html()
    assert "waiting.append(request)" in p.current_code_line()
    p.click("b_next").click("b_next")
    assert "op 3 of 9" in p.html()
    assert "free_block_queue.popleft_n(n)" in p.current_code_line()
    assert p.queue() == "4 5 6"                 # the state right after popleft
    assert "get_new_blocks" in p.html()
    p.click("b_next")
    assert "cached_block_hash_to_block.insert" in p.current_code_line()
    for _ in range(6):
        p.click("b_next")
    assert p.header() == "step 2 of 8" and "op 1 of" in p.html()
    p.click("b_prev")
    assert p.header() == "step 1 of 8" and "op 9 of 9" in p.html()
    p.step_into(False)
    assert p.state["bv_frame"] is None and "frames" not in p.board()


def test_step_into_the_free_of_b_shows_the_split_order_lines(page):
    p = page({"step": "4", "op": "2"})
    assert "free_block_queue.prepend_n(to_head)" in p.current_code_line()
    assert p.queue() == "4 3 5 6"
    p.click("b_next")
    assert "free_block_queue.append_n(to_tail)" in p.current_code_line()
    assert p.queue() == "4 3 5 6 2 1"


def test_speed_reaches_the_board(page):
    p = page()
    assert p.board()["speed"] == 1.0
    p.at.button_group(key="w_speed").set_value(4.0)
    p.run()
    assert p.state["bv_speed"] == 4.0 and p.board()["speed"] == 4.0


def test_language_switch_changes_the_visible_text(page):
    p = page({"step": "4"})
    ui = p.board()["ui"]
    assert (ui["en"]["gpu_blocks"], ui["en"]["free_queue"]) == ("GPU blocks", "Free queue")
    assert "What the engine did" in p.text() and p.board()["lang"] == "en"
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    text = p.text()
    assert p.header() == "第 4 步 / 共 8 步"
    assert p.board()["lang"] == "zh"            # the board shows its zh panels (it holds both)
    assert (ui["zh"]["gpu_blocks"], ui["zh"]["free_queue"], ui["zh"]["hash_table"]) == \
        ("GPU 块", "空闲队列", "前缀 hash 表")
    assert "What the engine did" not in text and "引擎做了什么" in text
    assert p.board()["ui"]["zh"]["nav_next"] == "下一步" and p.board()["lang"] == "zh"
    assert "B 结束，块表倒序释放" in text                  # the scenario's own zh note
    assert p.params["lang"] == "zh"
    assert p.queue() == "4 3 5 6 2 1"                     # same state, other words


def test_presenter_mode_keeps_only_the_essentials(page):
    p = page({"step": "2"})
    assert p.board()["presenter"] is False and p.at.toggle(key="w_selfcheck")
    p.at.toggle(key="w_presenter").set_value(True)
    p.run()
    html = p.html()
    assert p.board()["presenter"] is True                  # the board fits itself, larger
    assert 'data-request="A"' in html                      # every panel stays: the board fits them
    assert not p.at.toggle(key="w_selfcheck") if "w_selfcheck" in [t.key for t in p.at.toggle] else True
    p.open_details()
    assert not p.charts()                                  # no payload or metrics below it
    assert p.queue() == "5 6" and 'data-hash="H1"' in html and "bv-note" in html
    assert p.params.get("presenter") == "1"
    p.click("b_next")                                      # the controls still work
    assert p.header() == "step 3 of 8"


def test_payload_and_metrics_open_on_demand(page):
    p = page({"step": "1"})
    assert not p.charts() and "fingerprint" not in p.html()     # closed: no plotly at all
    p.open_details()
    assert len(p.charts()) == 2
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert len(p.charts()) == 2                                 # still open in the other language


def test_payload_panel_shows_the_tensor_or_says_there_is_none(page):
    p = page({"step": "1"}).open_details()
    p.at.number_input(key="w_pl_block").set_value(2)
    p.run()
    specs = [json.loads(s) for s in p.charts()]
    heat = [s for s in specs if s["data"] and s["data"][0].get("type") == "heatmap"]
    assert heat and len(heat[0]["data"][0]["z"]) == 4          # 4 slots
    assert "fingerprint" in p.html() and "device" in p.html()
    p.at.number_input(key="w_pl_block").set_value(6)
    p.run()
    assert "Block 6 holds no K/V at this step." in p.text()


def test_hit_check_is_shown_on_the_hit_step(page):
    p = page({"step": "2"}).open_details()
    assert "cache hit = recomputation" in p.html()


def test_metrics_chart_marks_the_current_step(page):
    p = page({"step": "3"}).open_details()
    specs = [json.loads(s) for s in p.charts()]
    metrics = [s for s in specs if s["layout"].get("shapes")]
    assert metrics and metrics[0]["layout"]["shapes"][0]["x0"] == 3


def test_sessions_do_not_share_a_cursor(page):
    a, b = page(), page()
    a.click("b_next").click("b_next")
    b.run()
    assert a.header() == "step 2 of 8" and b.header() == "step 0 of 8"
