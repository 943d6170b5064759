"""Rendered panels, cached per (run, step, frame, language). A built-in run's panels are shared by
every session (``st.cache_resource``: the HTML strings and figures are immutable, so a class of
thirty stepping through the same scenario renders each step once). A session's own run (an
authored scenario, a fork) is drawn from a small memo in that session's ``st.session_state``,
never from a process-wide cache. Everything here is built by the pure functions in
``blockviz.render``."""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st
from streamlit.string_util import clean_text

from blockviz.i18n import LANGS
from blockviz.render.metrics import metrics_figure
from blockviz.render.payload import payload_caption_html, payload_figure
from blockviz.ui.data import PlayerRun


class FrozenFigure(go.Figure):
    """A cached figure: drawn on many reruns, by many sessions, and never changed once built.
    ``st.plotly_chart`` calls ``to_dict()`` on every draw, and plotly's deep-copies every array
    each time (for a 4,096-cell heatmap, most of a rerun); this one makes the dict once and hands
    out that same dict, which its readers (Streamlit, plotly.io.to_json) only read."""

    _bv_dict: dict | None = None

    def to_dict(self) -> dict:
        if self._bv_dict is None:
            self._bv_dict = super().to_dict()
        return self._bv_dict


def frozen(fig: go.Figure) -> go.Figure:
    """``fig``, now a FrozenFigure (the same object: no copy). Only for a figure that is cached
    and no longer changed."""
    fig.__class__ = FrozenFigure
    return fig


class PreparedHtml(str):
    """HTML as ``st.html`` sends it, prepared once when a cached panel is built: ``st.html`` takes
    an object with ``_repr_html_`` as it is, instead of dedenting and stripping the string again
    (``streamlit.string_util.clean_text``) on every rerun — a few ms for the big panels of a
    4,096-block pool. The text it sends is the same."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        return str.__str__(self)


def prepared(markup: str) -> str:
    """``markup`` as st.html would send it (dedented, stripped), ready to be cached; "" stays ""."""
    return PreparedHtml(clean_text(markup)) if markup else markup


MEMO = "bv_memo"     # session-state key: {run key: {(what, args): value}} for the session's runs
MEMO_RUNS = 3        # the author's preview, the player's run, one just replaced
MEMO_SIZE = 256      # entries per run


def _session_memo(run: PlayerRun, what: str, args: tuple, build):
    memo = st.session_state.setdefault(MEMO, {})
    if run.key not in memo:
        while len(memo) >= MEMO_RUNS:       # the run drawn least recently goes first
            del memo[next(iter(memo))]
        memo[run.key] = {}
    else:
        memo[run.key] = memo.pop(run.key)   # most recently drawn last
    entries = memo[run.key]
    key = (what, args)
    if key not in entries:
        if len(entries) >= MEMO_SIZE:
            del entries[next(iter(entries))]
        entries[key] = build()
    return entries[key]


def metrics_chart(key: str, index: int, lang: str, run: PlayerRun) -> go.Figure:
    if run.shared:
        return _shared_metrics(key, index, lang, run)
    return _session_memo(run, "metrics", (index, lang),
                         lambda: frozen(metrics_figure(run.series, index, lang)))


@st.cache_resource(show_spinner=False, max_entries=256)
def _shared_metrics(key: str, index: int, lang: str, _run: PlayerRun) -> go.Figure:
    return frozen(metrics_figure(_run.series, index, lang))


def payload_chart(key: str, block: int, index: int, layer: int, head: int, kv: int, lang: str,
                  run: PlayerRun):
    """(figure, caption HTML) of a block's K or V at a step; None when the block holds none."""
    if run.shared:
        return _shared_payload(key, block, index, layer, head, kv, lang, run)
    return _session_memo(run, "payload", (block, index, layer, head, kv, lang),
                         lambda: _payload(run, block, index, layer, head, kv, lang))


@st.cache_resource(show_spinner=False, max_entries=256)
def _shared_payload(key: str, block: int, index: int, layer: int, head: int, kv: int, lang: str,
                    _run: PlayerRun):
    return _payload(_run, block, index, layer, head, kv, lang)


def _payload(run: PlayerRun, block: int, index: int, layer: int, head: int, kv: int, lang: str):
    summary = run.timeline.payload(block, index)
    if summary is None:
        return None
    tokens = run.timeline.snapshot(index).block_tokens[block]
    fig = payload_figure(summary, layer=layer, head=head, kv=kv, tokens=tokens,
                         vocab=run.timeline.vocab, lang=lang)
    return frozen(fig), payload_caption_html(block, summary, layer=layer, head=head, kv=kv, lang=lang)


def export_doc(run: PlayerRun, index: int, lang: str) -> str:
    """The run as one offline HTML page (the board, its data inlined), opening at ``index``."""
    from blockviz.export import export_html
    titles = {lg: run.scenario.title.get(lg) for lg in LANGS}
    return export_html(run.timeline, title=titles[lang], lang=lang, start=index, labels=run.labels,
                       titles=titles, file=f"{run.scenario.id}.yaml" if run.scenario.id else "")
