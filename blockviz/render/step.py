"""One step's panels, built once for every view that shows a step: the board in the player, the
Author preview, the offline HTML export and the PNG. Pure: a timeline in, escaped HTML out.

A step is the state after one event, or (stepping into an event) after one op inside it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from blockviz.i18n import event_label, t
from blockviz.i18n.errors import error_text
from blockviz.render import blocks as rblocks
from blockviz.render.external import external_html
from blockviz.render.hash_table import hash_table_html
from blockviz.render.narration import clip, engine_did_html, note_html, step_header_html
from blockviz.render.payload import verify_html
from blockviz.render.pseudocode import ops_list_html, pseudocode_html
from blockviz.render.queue import queue_html
from blockviz.render.requests import requests_html
from blockviz.render.theme import esc
from blockviz.render.view import step_view
from blockviz.teach.labels import HashLabels
from blockviz.teach.narrate import describe_op


@dataclass(frozen=True)
class Panels:
    header: str
    note: str                     # the author's note (and the run's error at the last step)
    did: str                      # what the engine did (its schedule, then one sentence per op)
    blocks: str | None            # None: too many blocks for cards (the dense view draws them)
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


@dataclass(frozen=True)
class RunInfo:
    """What a view needs to know about the run besides its timeline."""
    title: str = ""
    free_order: str = "split"
    tolerance: float = 0.0


def holders(snapshot, state=None) -> dict[int, tuple[str, ...]]:
    """block id -> the requests whose block table holds it (finished ones hold nothing)."""
    out: dict[int, list[str]] = {}
    for r in snapshot.requests.values():
        if r.status == "finished":
            continue
        for b in r.block_ids:
            if b and (state is None or state.ref_cnt[b] > 0):
                out.setdefault(b, []).append(r.request_id)
    return {b: tuple(ids) for b, ids in out.items()}


# A big pool's panels on the board are shorter (they scroll inside one screen; a step paints fast)
COMPACT = {"rows": 24, "requests": 16, "cells": 16, "head": 24, "tail": 6, "did": 24}


def build_panels(timeline, index: int, frame: int | None, lang: str, *, labels: HashLabels,
                 info: RunInfo = RunInfo(), frames: Sequence | None = None,
                 compact: bool = False) -> Panels:
    """Every panel of step ``index`` (or of op ``frame`` inside it), in ``lang``; ``compact``:
    the long panels cut shorter (``COMPACT``) and no cards, as the board draws a big pool."""
    last = len(timeline) - 1
    vocab, bs = timeline.vocab, timeline.block_size
    v = step_view(timeline, index, frame, frames)
    s = v.snapshot
    header = step_header_html(index, last, event_label(s.step, lang), lang,
                              None if frame is None else (v.frame or 0, v.num_frames),
                              title=info.title)
    note = s.note.get(lang) if s.note is not None else None
    error = error_text(timeline.error, lang) if timeline.error is not None and index == last else None
    big = compact or rblocks.use_heatmap(len(v.state.ref_cnt))   # compact: the board's dense view
    blocks = None if big else rblocks.blocks_html(
        v.state, labels=labels, vocab=vocab, block_size=bs, lang=lang, changed=v.changed,
        legend=False, prev_ref=v.prev_ref_cnt, held_by=holders(s, v.state))
    legend = (rblocks.heatmap_legend_html(lang, len(v.state.ref_cnt)) if big
              else f'<div class="bv">{rblocks.legend_html(lang)}</div>')
    cut = ({"head_cells": COMPACT["head"], "tail_cells": COMPACT["tail"]} if compact else {})
    queue = queue_html(v.state, labels=labels, lang=lang, to_head=v.to_head, to_tail=v.to_tail, **cut)
    table = hash_table_html(v.table, labels=labels, state=v.state, lang=lang, added=v.hashes_added,
                            removed=v.hashes_removed, **({"max_rows": COMPACT["rows"]} if compact else {}))
    reqs = requests_html(s, lang=lang, fresh=v.fresh, changed=v.changed_requests,
                         **({"max_requests": COMPACT["requests"], "max_cells": COMPACT["cells"]}
                            if compact else {}))
    code = ops = op = ""
    if frame is not None:
        if v.op is not None:
            op = (f'<div class="bv"><div class="bv-op">'
                  f'{esc(clip(describe_op(v.op, lang, labels, vocab, bs)))}</div></div>')
            code = pseudocode_html(v.op, lang=lang, free_order=info.free_order, vllm_function=v.op.fn)
            ops = ops_list_html(s.ops, v.frame or 0, lang)
        else:
            op = f'<div class="bv"><div class="bv-op">{esc(t("no_ops", lang))}</div></div>'
    on_gpu = {h for h, _ in v.table}
    ext = (external_html(s.external, labels=labels, vocab=vocab, lang=lang, on_gpu=on_gpu,
                         tier=getattr(s, "tier", None))
           if s.external is not None else "")
    written = tuple(sorted({o.block_id for o in s.ops if o.kind in ("write", "load")}))
    did = engine_did_html(s, lang, labels, vocab, bs, **({"max_items": COMPACT["did"]} if compact else {}))
    return Panels(header, note_html(note, lang, error=error), did,
                  blocks, legend, queue, table, reqs, op, code, ops, ext,
                  verify_html(s.ops, lang, info.tolerance), written)
