"""The trace tab's whole curve (sequence mode): one Streamlit components-v2 element (inline
html/css/js, no iframe, nothing fetched; ``render/curve.js``) that draws every pool size's hit rate
and reads it under a capacity marker in the browser, at once.

The marker's pool size is the page's ``W_POOL`` (the player box's number input shows it): the
element tells Python where it was let go (its ``pool`` state, on release or once keys pause), and
Python moves it only by a new ``seq`` (a typed pool, a new sweep), so a rerun never pulls it back.
"""
from __future__ import annotations

import streamlit as st

from blockviz.render import curve as rcurve
from blockviz.ui import state as session
from blockviz.ui.board import component, reported

NAME = "blockviz_curve"
KEY = "capt_curve"          # the element's widget key
W_POOL = "w_capt_pool"      # the marker's pool size (blocks), shared with the player box's input


def place(pool: int) -> None:
    """Python moves the marker (a new sweep, a typed pool size)."""
    st.session_state[W_POOL] = int(pool)
    typed()


def typed() -> None:
    """The pool size was typed into the player box: the marker follows."""
    ss = st.session_state
    ss[session.CAPT_MARK_SEQ] = int(ss.get(session.CAPT_MARK_SEQ, 0)) + 1


def _released() -> None:
    """The element's marker was let go: its pool size becomes the page's."""
    pool = reported(st.session_state, KEY, "pool")
    if isinstance(pool, int) and not isinstance(pool, bool) and pool >= 1:
        st.session_state[W_POOL] = pool


def show(sweep, lang: str, bytes_per_token: int | None) -> None:
    """Mount the curve of ``sweep`` (a TraceSweep with its ``curve`` result)."""
    ss = st.session_state
    cached = ss.get(session.CAPT_CURVE_JSON)
    if cached is None or cached[0] is not sweep or cached[1:3] != (lang, bytes_per_token):
        body = rcurve.curve_data(sweep.curve, lang, bytes_per_token=bytes_per_token)
        cached = ss[session.CAPT_CURVE_JSON] = (sweep, lang, bytes_per_token, body)
    if W_POOL not in ss:
        place(rcurve.default_pool(sweep.curve))
    data = rcurve.with_marker(cached[3], ss[W_POOL], ss.get(session.CAPT_MARK_SEQ, 0))
    component(NAME, rcurve.curve_css, "curve.js")(key=KEY, data=data, default={"pool": None},
                                                  on_pool_change=_released)
