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
    p.click("b_last")
    assert p.header() == f"step {last} of {last}"
    assert p.params["step"] == str(last)


def test_opens_on_six_blocks_at_the_start(page):
    p = page()
    assert p.state["bv_scenario"] == "six-blocks"
    assert p.header() == "step 0 of 8"
    assert "Six blocks, one prefix" in p.html()
    assert p.queue() == "1 2 3 4 5 6"
    assert p.params == {"scenario": "six-blocks", "step": "0", "lang": "en"}
    assert p.at.button(key="b_first").disabled and p.at.button(key="b_prev").disabled


def test_next_prev_first_last(page):
    p = page()
    for _ in range(4):
        p.click("b_next")
    assert p.header() == "step 4 of 8" and p.queue() == "4 3 5 6 2 1"
    assert p.params["step"] == "4"
    p.click("b_prev")
    assert p.header() == "step 3 of 8" and p.queue() == "3 5 6"
    p.click("b_last")
    assert p.header() == "step 8 of 8" and p.queue() == ""
    assert p.at.button(key="b_next").disabled and p.at.button(key="b_last").disabled
    p.click("b_first")
    assert p.header() == "step 0 of 8" and p.params["step"] == "0"


def test_buttons_carry_the_keyboard_shortcuts(page):
    p = page()
    shortcuts = {key: p.at.button(key=key).proto.shortcut
                 for key in ("b_first", "b_prev", "b_play", "b_next", "b_last")}
    assert shortcuts == {"b_first": "home", "b_prev": "left", "b_play": "space",
                         "b_next": "right", "b_last": "end"}


def test_slider_and_step_list_jump_anywhere(page):
    p = page()
    p.at.slider(key="w_slider").set_value(6)
    p.run()
    assert p.header() == "step 6 of 8" and p.queue() == "3 5 6"
    assert p.at.radio(key="w_steps").value == 6          # the list follows the cursor
    p.at.radio(key="w_steps").set_value(2)
    p.run()
    assert p.header() == "step 2 of 8" and p.at.slider(key="w_slider").value == 2
    assert p.params["step"] == "2"


def test_step_list_labels_events_with_markers(page):
    p = page()
    radio = p.at.radio(key="w_steps")
    labels = radio.proto.options
    assert len(labels) == 9
    assert labels[1].startswith("1 · A arrives") and ":blue[■]" in labels[1]
    assert ":green[■]" in labels[2] and ":red[■]" in labels[8]


def test_step_into_walks_the_frames_with_the_pseudocode_line(page):
    p = page({"step": "1"})
    p.at.toggle(key="w_into").set_value(True)
    p.run()
    assert p.state["bv_frame"] == 0 and "op 1 of 9" in p.html()
    assert "waiting.append(request)" in p.current_code_line()
    assert p.params["op"] == "1"
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
    p.at.toggle(key="w_into").set_value(False)
    p.run()
    assert p.state["bv_frame"] is None and "op" not in p.params


def test_step_into_the_free_of_b_shows_the_split_order_lines(page):
    p = page({"step": "4", "op": "2"})
    assert "free_block_queue.prepend_n(to_head)" in p.current_code_line()
    assert p.queue() == "4 3 5 6"
    p.click("b_next")
    assert "free_block_queue.append_n(to_tail)" in p.current_code_line()
    assert p.queue() == "4 3 5 6 2 1"


def test_autoplay_toggle_and_speed(page):
    p = page()
    assert p.at.button(key="b_play").label == "Play"
    p.click("b_play")
    assert p.state["bv_playing"] is True
    assert p.at.button(key="b_play").label == "Pause"
    p.at.button_group(key="w_speed").set_value(4.0)
    p.run()
    assert p.state["bv_speed"] == 4.0 and p.state["bv_playing"] is True
    p.click("b_play")
    assert p.state["bv_playing"] is False and p.at.button(key="b_play").label == "Play"


def test_play_at_the_end_starts_over(page):
    p = page({"step": "8"})
    p.click("b_play")
    assert p.state["bv_playing"] is True and p.header() == "step 0 of 8"


def test_language_switch_changes_the_visible_text(page):
    p = page({"step": "4"})
    assert "GPU blocks" in p.text() and "Free queue" in p.text()
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    text = p.text()
    assert p.header() == "第 4 步 / 共 8 步"
    assert "GPU 块" in text and "空闲队列" in text and "前缀 hash 表" in text
    assert "GPU blocks" not in text and "Free queue" not in text and "What the engine did" not in text
    assert p.at.button(key="b_next").label == "下一步"
    assert "B 结束，块表倒序释放" in text                  # the scenario's own zh note
    assert p.params["lang"] == "zh"
    assert p.queue() == "4 3 5 6 2 1"                     # same state, other words


def test_presenter_mode_keeps_only_the_essentials(page):
    p = page({"step": "2"})
    assert 'data-request="A"' in p.html() and p.at.slider and p.at.radio
    p.at.toggle(key="w_presenter").set_value(True)
    p.run()
    html = p.html()
    assert "--bv-scale: 1.3" in html
    assert 'data-request="A"' not in html                  # no requests panel
    assert not p.at.slider and not p.at.radio              # keyboard, not the slider / step list
    p.open_details()
    assert not p.charts()                                  # no payload or metrics
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
