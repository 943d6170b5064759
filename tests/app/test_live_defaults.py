"""The Live page's source switch and the server's recordings box hold their values in the page
itself, not only in one run's message.

A browser draws a widget from what the run sends it: a value written into session state reaches
it once (on that run), otherwise the widget shows the browser's own copy, and without one its
default. A language switch soon after the page opened (before the browser kept the first run's
values) redrew them from their defaults: no source chosen, "no recording" in the box. So each
widget's default must be the value the session holds, on every run; a /live?recording=NAME link
chooses that recording, over the session's earlier choice too, and without Streamlit's warning of
a widget that has a default and a value written through the Session State API."""
from __future__ import annotations

import pytest
from streamlit.elements.lib import policies

from blockviz.ui import live as L

from .test_live_page import feeds, replay_board, served  # noqa: F401  (fixtures)

pytestmark = pytest.mark.usefixtures("feeds", "served")    # the server started with two recordings
SOURCES = ("live", "recording")


@pytest.fixture
def warned(monkeypatch):
    """The keys of widgets created with a default beside a value written this run (Streamlit logs
    its warning only with a server running; AppTest has none)."""
    seen = []
    check = policies.check_session_state_rules

    def recording_check(default_value, key, writes_allowed=True):
        if key is not None and default_value is not None and \
                policies.get_session_state().is_new_state_value(key):
            seen.append(key)
        return check(default_value, key, writes_allowed)
    monkeypatch.setattr(policies, "check_session_state_rules", recording_check)
    return seen


def shown_without_a_copy(p) -> tuple:
    """What a browser that kept no value of its own draws: each widget's default (the source;
    the box's option: None is its "no recording", else a server recording's index)."""
    sources = p.at.segmented_control(key=L.W_SOURCE).proto.default
    box = p.at.selectbox(key=L.W_RP_SERVER).proto.default
    return SOURCES[sources[0]] if sources else None, [None, 0, 1][box]


def held(p) -> tuple:
    return p.state[L.W_SOURCE], p.state[L.W_RP_SERVER]


def switch_language(p, lang: str) -> None:
    p.at.segmented_control(key="w_lang").set_value(lang)
    p.run()


def test_every_run_sends_the_values_the_session_holds(page, warned):
    p = page().goto("live")
    assert held(p) == shown_without_a_copy(p) == ("recording", 0)
    switch_language(p, "zh")
    assert held(p) == shown_without_a_copy(p) == ("recording", 0)
    p.at.selectbox(key=L.W_RP_SERVER).set_value(1)                 # the user's choice ...
    p.run()
    switch_language(p, "en")
    assert held(p) == shown_without_a_copy(p) == ("recording", 1)  # ... is what is sent after
    assert replay_board(p)["num_steps"] == 5
    assert warned == []


def test_a_link_to_a_recording_opens_it_and_sends_it_every_run(page, warned):
    p = page()
    p.at.query_params["recording"] = "tenants-and-lora.jsonl"     # /live?recording=NAME
    p.goto("live")
    assert held(p) == shown_without_a_copy(p) == ("recording", 1)
    assert replay_board(p)["num_steps"] == 5
    switch_language(p, "zh")
    assert held(p) == shown_without_a_copy(p) == ("recording", 1)
    assert replay_board(p)["num_steps"] == 5
    assert warned == []


def test_a_link_wins_over_the_sessions_choice(page, warned):
    p = page().goto("live")
    p.at.segmented_control(key=L.W_SOURCE).set_value("live")      # the user chose live
    p.run()
    assert p.state[L.W_SOURCE] == "live" and replay_board(p) is None
    p.at.query_params["recording"] = "tenants-and-lora.jsonl"
    p.run()
    assert held(p) == ("recording", 1) and replay_board(p)["num_steps"] == 5
    assert p.at.segmented_control(key=L.W_SOURCE).value == "recording"
    assert p.at.selectbox(key=L.W_RP_SERVER).value == 1
    switch_language(p, "zh")                                       # and it stays, sent every run
    assert held(p) == shown_without_a_copy(p) == ("recording", 1)
    # the same over a recording chosen in the box
    p.at.selectbox(key=L.W_RP_SERVER).set_value(0)
    p.run()
    p.at.query_params["recording"] = "tenants-and-lora.jsonl"
    p.run()
    assert held(p) == ("recording", 1) and replay_board(p)["num_steps"] == 5
    switch_language(p, "en")
    assert held(p) == shown_without_a_copy(p) == ("recording", 1)
    assert warned == []
