"""One cache for what the app draws from a run: ``memo(run, what, args, build)``.

A built-in run is the same for every session, so what is drawn from it is built once per server
process (``st.cache_resource``): a class of thirty stepping through one lesson builds each step's
board once. A session's own run (an authored scenario, a fork) belongs to that session alone: what
is drawn from it lives in the session's state (``state.MEMO``), for its ``RUNS`` most recently drawn
runs, at most ``keep`` entries of each kind per run, least recently used out first (:func:`recent`,
which keeps the capacity page's plans too) — never in a process-wide cache.

What is cached is never changed after it is built (its readers only read it). A plotly figure is
cached as a :class:`FrozenFigure`.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

import plotly.graph_objects as go
import streamlit as st

from blockviz.ui import state as session

T = TypeVar("T")
RUNS = 3         # a session's runs remembered: the Author preview, the player's run, one just replaced
ENTRIES = 256    # entries of one kind per run


def memo(run, what: str, args: tuple[Hashable, ...], build: Callable[[], T], *, keep: int = ENTRIES) -> T:
    """``build()``, cached under (``run``, ``what``, ``args``): process-wide for a built-in run
    (``run.shared``), in the session's state otherwise."""
    if run.shared:
        return _shared(run.key, what, args, build)
    kinds = recent(st.session_state.setdefault(session.MEMO, {}), run.key, dict, RUNS)
    return recent(kinds.setdefault(what, {}), args, build, keep)


def recent(entries: dict, key: Hashable, build: Callable[[], T], bound: int) -> T:
    """``entries[key]``, built by ``build()`` when it is not there (the least recently used entry
    going first while ``bound`` are kept); now the most recently used (the last)."""
    if key in entries:
        entries[key] = value = entries.pop(key)
        return value
    while len(entries) >= bound:
        del entries[next(iter(entries))]
    entries[key] = value = build()
    return value


@st.cache_resource(show_spinner=False, max_entries=1024)
def _shared(key: str, what: str, args: tuple, _build: Callable[[], T]) -> T:
    return _build()


class FrozenFigure(go.Figure):
    """A figure that is cached and drawn on many reruns, never changed once built.
    ``st.plotly_chart`` reads a figure's ``to_dict()`` on every draw, which plotly deep-copies each
    time; this one makes the dict once and hands out that same dict (``python -m bench figures``:
    a metrics chart of 120 to 8,000 steps draws 1.9-2.6x faster frozen)."""

    _bv_dict: dict | None = None

    def to_dict(self) -> dict:
        if self._bv_dict is None:
            self._bv_dict = super().to_dict()
        return self._bv_dict


def frozen(fig: go.Figure) -> FrozenFigure:
    """``fig`` itself, now a FrozenFigure (no copy: the same object, its class changed); the
    caller hands it to the cache and changes it no more."""
    fig.__class__ = FrozenFigure
    return fig
