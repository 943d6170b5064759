"""The board in the app: one Streamlit components-v2 component (inline html/css/js, no iframe,
nothing fetched) that the player and the Author preview both mount.

The browser owns the current step: it steps, plays, follows the URL and tells Python where it is
(``pos``, debounced) so the panels below the board (self-check, fork, payload, metrics) follow.
Python moves the board only through ``goto`` (a step and a sequence number that changes only when
Python itself moves it), never by sending the step with the data, so a late rerun cannot pull the
board back. The run's panels go out once per window, as one cached JSON text (the board's
BoardData), beside what the page tells the board now (a BoardControl): two values, never one spliced
into the other.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, MutableMapping

import streamlit as st

from blockviz.i18n import LANGS, other_lang
from blockviz.render import board as rboard
from blockviz.ui.cache import memo
from blockviz.ui.data import PlayerRun

NAME = "blockviz_board"
PLAYER = "board"          # the player's board (its widget key)


@functools.cache
def component(name: str, css: Callable[[], str], js: str):
    """The components-v2 element ``name`` (inline html/css/js: no iframe, nothing fetched), with
    the stylesheet ``css()`` and the packaged script ``js``; registered once per server process."""
    return st.components.v2.component(name, html="", css=css(), js=rboard.asset(js), isolate_styles=True)


def _payload(run: PlayerRun, around: int, lang: str, frames: bool, presenter: bool, speed: float,
             url: bool) -> str:
    """The board's data (BoardData's JSON) for the window of steps around ``around``."""
    br = rboard.BoardRun(run.timeline, run.labels, run.kinds,
                         {lg: run.scenario.title.get(lg) for lg in LANGS}, run.free_order)
    lo, _ = rboard.window(br, around)
    langs = (lang,) if frames or rboard.is_dense(br) else (lang, other_lang(lang))
    return memo(run, "board", (lo, langs, frames, presenter, speed, url),   # (a dense run's JSON is big)
                lambda: rboard.board_data(br, langs=langs, start=lo, frames=frames, presenter=presenter,
                                          speed=speed, url=url).to_json(), keep=4)


def show(run: PlayerRun, state: MutableMapping, *, key: str, step: int, frame: int | None, lang: str,
         presenter: bool = False, speed: float = 1.0, url: bool = False, report: bool = True,
         answer: dict | None = None, fit: bool = True, on_pos: Callable[[], None] | None = None,
         on_want: Callable[[], None] | None = None):
    """Mount the board for ``run``. ``state[key + ":goto"]`` holds Python's last command; the
    window of steps shipped is the one around ``step`` (the browser's step, as it last told us).
    ``report``: the board tells Python each step it shows (a rerun per burst of keys); without
    it, stepping costs the server nothing. ``answer``: a self-check answer ({step, ids}) the board
    outlines when it shows that step. ``fit``: scale the board to fit the viewport (the player);
    without it, a fixed size that scrolls (a preview in a column)."""
    goto = state.get(key + ":goto")
    if goto is None or goto.get("run") != run.key:    # a new run opens where Python says
        move(state, key, step, frame, run.key)
        goto = state[key + ":goto"]
    # (the board's data names the language shown first: its langs start with ``lang``)
    data = {"board": _payload(run, step, lang, frame is not None, presenter, speed, url),
            "control": rboard.BoardControl(goto=goto, report=report, answer=answer,
                                           fit=fit).to_dict()}
    return component(NAME, rboard.board_css, "board.js")(
        key=key, data=data, default={"pos": None, "want": None}, on_pos_change=on_pos or (lambda: None),
        on_want_change=on_want or (lambda: None))


def move(state: MutableMapping, key: str, step: int, frame: int | None, run_key: str) -> None:
    """Python moves the board (a new scenario, the step list, a fork): a new goto command."""
    old = state.get(key + ":goto") or {"seq": 0}
    state[key + ":goto"] = {"step": int(step), "frame": frame, "seq": int(old["seq"]) + 1, "run": run_key}


def reported(state: MutableMapping, key: str, name: str):
    """The field ``name`` of what the component ``key`` last told Python (its state value), or
    None."""
    value = state.get(key)
    try:
        return value[name] if value is not None else None
    except (KeyError, TypeError):
        return getattr(value, name, None)


def position(state: MutableMapping, key: str) -> dict | None:
    """The board's last reported position ({step, frame, lang}) or None."""
    pos = reported(state, key, "pos")
    return pos if isinstance(pos, dict) else None
