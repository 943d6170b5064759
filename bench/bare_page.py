"""The bare page of ``python -m bench app``: the player's widgets with the same keys, callbacks and
layout containers, and nothing else — no engine, no timeline, no panels, no figures. A rerun here
is what any Streamlit page with these controls costs; the player's rerun is compared with it.

``?last=N`` sets the number of steps (the slider's range, the step list), ``?scenario=`` the
selected scenario. Run it alone with ``streamlit run bench/bare_page.py``.
"""
from __future__ import annotations

import streamlit as st

SPEEDS = (0.5, 1.0, 2.0, 4.0)
LANGS = ("zh", "en")
WINDOW = 120                       # the player's step list shows at most this many steps

st.set_page_config(layout="wide", page_title="bare", initial_sidebar_state="auto")


def _go(action: str, last: int) -> None:
    ss = st.session_state
    c = ss.get("cursor", 0)
    ss["cursor"] = {"first": 0, "prev": max(0, c - 1), "next": min(last, c + 1), "last": last}[action]


def _jump(widget: str) -> None:
    st.session_state["cursor"] = int(st.session_state[widget])


def _copy(widget: str, key: str) -> None:
    st.session_state[key] = st.session_state.get(widget)


def _noop() -> None:
    pass


def page() -> None:
    ss = st.session_state
    params = dict(st.query_params)
    last = int(params.get("last", 8))
    scenario = params.get("scenario", "six-blocks")
    ss.setdefault("cursor", int(params.get("step", 0)))
    ss.setdefault("lang", "en")
    cursor = ss["cursor"] = max(0, min(int(ss["cursor"]), last))
    with st.sidebar:
        ss["w_lang"] = ss["lang"]
        st.segmented_control("Language", list(LANGS), key="w_lang", required=True,
                             on_change=_copy, args=("w_lang", "lang"))
        ss["w_scenario"] = scenario
        st.selectbox("Scenario", [scenario, "other"], key="w_scenario", on_change=_noop)
        ss["w_speed"] = ss.get("speed", 1.0)
        st.segmented_control("Speed", SPEEDS, key="w_speed", required=True,
                             format_func=lambda v: f"{v:g}×", on_change=_copy, args=("w_speed", "speed"))
        ss["w_presenter"] = bool(ss.get("presenter"))
        st.toggle("Presenter mode", key="w_presenter", on_change=_copy, args=("w_presenter", "presenter"))
        st.caption("Keys: ← → step · Space play/pause · Home / End")
        lo = max(0, min(cursor - WINDOW // 2, last + 1 - WINDOW))
        ss["w_steps"] = cursor
        st.radio("Steps", list(range(lo, min(last, lo + WINDOW - 1) + 1)), key="w_steps",
                 format_func=lambda i: f"{i} · step {i}", on_change=_jump, args=("w_steps",))
    row = st.container(horizontal=True, vertical_alignment="center", gap="small", key="controls")
    with row:
        for key, action, shortcut in (("b_first", "first", "Home"), ("b_prev", "prev", "Left")):
            st.button(action, key=key, shortcut=shortcut, on_click=_go, args=(action, last),
                      disabled=cursor == 0)
        st.button("Play", key="b_play", shortcut="Space", on_click=_noop)
        for key, action, shortcut in (("b_next", "next", "Right"), ("b_last", "last", "End")):
            st.button(action, key=key, shortcut=shortcut, on_click=_go, args=(action, last),
                      disabled=cursor == last)
        ss["w_into"] = False
        st.toggle("Step into", key="w_into", on_change=_noop)
    st.markdown(f"step {cursor} of {last}")
    ss["w_slider"] = cursor
    st.slider("Timeline", 0, last, key="w_slider", on_change=_jump, args=("w_slider",),
              label_visibility="collapsed")
    learn = st.container(horizontal=True, vertical_alignment="center", gap="medium", key="learn")
    with learn:
        ss["w_selfcheck"] = bool(ss.get("selfcheck"))
        st.toggle("Self-check", key="w_selfcheck", on_change=_copy, args=("w_selfcheck", "selfcheck"))
        st.button("Try it yourself", key="b_fork", on_click=_noop)
    left, right = st.columns(2)
    with left:
        st.expander("KV payload", key="x_payload", on_change=_noop)
    with right:
        st.expander("Metrics", key="x_metrics", on_change=_noop)
    want = {"scenario": scenario, "step": str(cursor), "lang": ss["lang"], "last": str(last)}
    if dict(st.query_params) != want:
        st.query_params.from_dict(want)


st.navigation([st.Page(page, title="Bare", url_path="bare", default=True)]).run()
