"""Rendered panels, cached per (run, step, frame, language). A built-in run's panels are shared by
every session (``st.cache_resource``: the HTML strings and figures are immutable, so a class of
thirty stepping through the same scenario renders each step once). A session's own run (an
authored scenario, a fork) is drawn from a small memo in that session's ``st.session_state``,
never from a process-wide cache. Everything here is built by the pure functions in
``blockviz.render``."""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
import streamlit as st
from streamlit.string_util import clean_text

from blockviz.i18n import event_label, t
from blockviz.i18n.errors import error_text
from blockviz.render import blocks as rblocks
from blockviz.render.external import external_html
from blockviz.render.hash_table import hash_table_html
from blockviz.render.markers import kinds_markdown, strip_html
from blockviz.render.metrics import metrics_figure
from blockviz.render.narration import clip, engine_did_html, note_html, step_header_html
from blockviz.render.payload import payload_caption_html, payload_figure, verify_html
from blockviz.render.pseudocode import ops_list_html, pseudocode_html
from blockviz.render.queue import queue_html
from blockviz.render.requests import requests_html
from blockviz.render.theme import esc
from blockviz.render.view import step_view
from blockviz.teach.narrate import describe_op
from blockviz.ui.data import PlayerRun, frames_of
from blockviz.ui.nav import md_escape


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


def _frames(run: PlayerRun, index: int) -> tuple:
    if run.shared:
        return frames_of(run.key, index, run)
    return _session_memo(run, "frames", (index,), lambda: run.timeline.frames(index))


@dataclass(frozen=True)
class Panels:
    header: str
    note: str                     # the author's note (and the run's error at the last step)
    did: str                      # what the engine did
    blocks: str | None            # None: too many blocks, draw the heatmap figure
    blocks_legend: str
    queue: str
    table: str
    requests: str
    op: str                       # the current op in words (stepping into an event)
    pseudocode: str               # "" unless stepping into an event
    ops_list: str
    external: str
    verify: str
    written: tuple[int, ...]      # blocks whose K/V this step wrote (the payload panel's hint)


def _view(run: PlayerRun, index: int, frame: int | None):
    frames = _frames(run, index) if frame is not None else None
    return step_view(run.timeline, index, frame, frames)


def step_panels(key: str, index: int, frame: int | None, lang: str, run: PlayerRun) -> Panels:
    if run.shared:
        return _shared_panels(key, index, frame, lang, run)
    return _session_memo(run, "panels", (index, frame, lang),
                         lambda: build_panels(run, index, frame, lang))


@st.cache_resource(show_spinner=False, max_entries=1024)
def _shared_panels(key: str, index: int, frame: int | None, lang: str, _run: PlayerRun) -> Panels:
    return build_panels(_run, index, frame, lang)


def build_panels(run: PlayerRun, index: int, frame: int | None, lang: str) -> Panels:
    tl, labels, vocab, bs = run.timeline, run.labels, run.timeline.vocab, run.timeline.block_size
    v = _view(run, index, frame)
    s = v.snapshot
    header = step_header_html(index, run.last, event_label(s.step, lang), lang,
                              None if frame is None else (v.frame or 0, v.num_frames),
                              title=run.scenario.title.get(lang))
    note = s.note.get(lang) if s.note is not None else None
    error = error_text(tl.error, lang) if tl.error is not None and index == run.last else None
    note_part = note_html(note, lang, error=error)
    did = engine_did_html(s, lang, labels, vocab, bs)
    big = rblocks.use_heatmap(len(v.state.ref_cnt))
    blocks = None if big else rblocks.blocks_html(v.state, labels=labels, vocab=vocab, block_size=bs,
                                                 lang=lang, changed=v.changed, legend=False)
    legend = (rblocks.heatmap_legend_html(lang, len(v.state.ref_cnt)) if big
              else f'<div class="bv">{rblocks.legend_html(lang)}</div>')
    queue = queue_html(v.state, labels=labels, lang=lang, to_head=v.to_head, to_tail=v.to_tail)
    table = hash_table_html(v.table, labels=labels, state=v.state, lang=lang, added=v.hashes_added,
                            removed=v.hashes_removed)
    reqs = requests_html(s, lang=lang, fresh=v.fresh, changed=v.changed_requests)
    code = ops = op = ""
    if frame is not None:
        if v.op is not None:
            op = (f'<div class="bv"><div class="bv-op">'
                  f'{esc(clip(describe_op(v.op, lang, labels, vocab, bs)))}</div></div>')
            code = pseudocode_html(v.op, lang=lang, free_order=run.free_order,
                                   vllm_function=v.op.fn)
            ops = ops_list_html(s.ops, v.frame or 0, lang)
        else:
            op = f'<div class="bv"><div class="bv-op">{esc(t("no_ops", lang))}</div></div>'
    on_gpu = {h for h, _ in v.table}
    ext = (external_html(s.external, labels=labels, vocab=vocab, lang=lang, on_gpu=on_gpu)
           if s.external is not None else "")
    written = tuple(sorted({op.block_id for op in s.ops if op.kind in ("write", "load")}))
    h = prepared
    return Panels(h(header), h(note_part), h(did), None if blocks is None else h(blocks), h(legend),
                  h(queue), h(table), h(reqs), h(op), h(code), h(ops), h(ext),
                  h(verify_html(s.ops, lang, run.tolerance)), written)


def blocks_heatmap(key: str, index: int, frame: int | None, lang: str, run: PlayerRun) -> go.Figure:
    if run.shared:
        return _shared_heatmap(key, index, frame, lang, run)
    return _session_memo(run, "heatmap", (index, frame, lang), lambda: _heatmap(run, index, frame, lang))


@st.cache_resource(show_spinner=False, max_entries=64)
def _shared_heatmap(key: str, index: int, frame: int | None, lang: str, _run: PlayerRun) -> go.Figure:
    return _heatmap(_run, index, frame, lang)


def _heatmap(run: PlayerRun, index: int, frame: int | None, lang: str) -> go.Figure:
    v = _view(run, index, frame)
    return frozen(rblocks.blocks_figure(v.state, labels=run.labels, lang=lang, changed=v.changed))


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


def markers_strip(index: int, lang: str, run: PlayerRun) -> str:
    """The event markers under the timeline slider, the current step's column marked."""
    if run.shared:
        return _shared_strip(run.key, index, lang, run)
    return _session_memo(run, "strip", (index, lang),
                         lambda: prepared(strip_html(run.kinds, index, lang)))


@st.cache_resource(show_spinner=False, max_entries=1024)
def _shared_strip(key: str, index: int, lang: str, _run: PlayerRun) -> str:
    return prepared(strip_html(_run.kinds, index, lang))


def step_labels(lo: int, hi: int, lang: str, run: PlayerRun) -> tuple[str, ...]:
    """The step list's labels for steps lo..hi (markdown: the event, inert, and its markers)."""
    if run.shared:
        return _shared_step_labels(run.key, lo, hi, lang, run)
    return _session_memo(run, "labels", (lo, hi, lang), lambda: _step_labels(run, lo, hi, lang))


@st.cache_resource(show_spinner=False, max_entries=1024)
def _shared_step_labels(key: str, lo: int, hi: int, lang: str, _run: PlayerRun) -> tuple[str, ...]:
    return _step_labels(_run, lo, hi, lang)


def _step_labels(run: PlayerRun, lo: int, hi: int, lang: str) -> tuple[str, ...]:
    tl = run.timeline
    return tuple(f"{i} · {md_escape(event_label(tl.step_of(i), lang))} {kinds_markdown(run.kinds[i])}"
                 for i in range(lo, hi + 1))
