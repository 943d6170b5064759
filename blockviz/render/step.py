"""One step's panels, built once for every view that shows a step: the board in the player, the
Author preview, the offline HTML export and the PNG. Pure: a Step in, escaped HTML out.

A step is the state after one event, or (stepping into an event) after one op inside it: then
every panel, the request panel included, shows the moment right after that op.
"""
from __future__ import annotations

from dataclasses import dataclass

from blockviz.i18n import event_label, t
from blockviz.i18n.errors import error_text
from blockviz.render import blocks as rblocks
from blockviz.render import groups as rgroups
from blockviz.render.external import external_html
from blockviz.render.hash_table import hash_table_html
from blockviz.render.narration import (
    caption_html,
    clip,
    engine_did_html,
    first_sentence,
    note_html,
    step_header_html,
)
from blockviz.render.pseudocode import ops_html, pseudocode_html
from blockviz.render.queue import queue_html
from blockviz.render.requests import requests_html
from blockviz.sim.step import Step
from blockviz.teach.labels import HashLabels
from blockviz.teach.narrate import describe_op


@dataclass(frozen=True, kw_only=True)
class Panels:
    """Every panel of one step, as escaped HTML (what render hands the board)."""
    header: str
    caption: str                  # the step's one sentence, shown large (a frame: its op's sentence)
    why: str                      # behind "why?": the author's note, the schedule, every op in words
    ops: str                      # the ops panel: each op one line, vLLM's call and its effect
    code: str                     # stepping into an event: the pseudocode of the op, its line lit
    blocks: str | None            # None: too many blocks for cards (the dense view draws them)
    queue: str
    table: str
    requests: str
    external: str


def holders(step: Step) -> dict[int, tuple[str, ...]]:
    """block id -> the requests whose block table holds it (finished ones hold nothing)."""
    out: dict[int, list[str]] = {}
    for rid, _, b in rgroups.held_blocks(step):      # (a hybrid model: every group's table)
        out.setdefault(b, []).append(rid)
    return {b: tuple(ids) for b, ids in out.items()}


# A big pool's panels on the board are shorter (they scroll inside one screen; a step paints fast)
COMPACT = {"rows": 24, "requests": 16, "cells": 16, "head": 24, "tail": 6, "did": 24, "ops": 40}


def build_panels(timeline, s: Step, lang: str, *, labels: HashLabels, title: str = "",
                 free_order: str = "split", compact: bool = False) -> Panels:
    """Every panel of step ``s`` (an event's, or an op frame's) of ``timeline``, in ``lang``, in a
    run called ``title`` that frees blocks in ``free_order``; ``compact``: the long panels cut
    shorter (``COMPACT``) and no cards, as the board draws a big pool."""
    last = len(timeline) - 1
    vocab, bs = timeline.vocab, timeline.block_size
    c = s.changes
    header = step_header_html(s.index, last, event_label(s.event, lang), lang,
                              None if s.frame is None else (s.frame, s.num_frames),
                              title=title)
    note = s.note.get(lang) if s.note is not None else None
    error = (error_text(timeline.error, lang) if timeline.error is not None and s.index == last
             else None)
    groups = labels.groups if labels.hybrid else None      # a hybrid model's KV-cache groups
    badges = None if compact or not groups else {
        b: rgroups.badge_html(g, groups[g], lang, short=True, cls="bv-grp bv-grp-card")
        for b, g in rgroups.block_groups(s).items()}
    blocks = None if compact else rblocks.blocks_html(
        s, labels=labels, vocab=vocab, block_size=bs, lang=lang, changed=c.blocks,
        prev_ref=c.prev_ref_cnt, held_by=holders(s), groups=badges)
    cut = ({"head_cells": COMPACT["head"], "tail_cells": COMPACT["tail"]} if compact else {})
    queue = queue_html(s, labels=labels, lang=lang, to_head=c.to_head, to_tail=c.to_tail, **cut)
    table = hash_table_html(s.hash_table, labels=labels, state=s, lang=lang,
                            added=c.hashes_added, removed=c.hashes_removed,
                            **({"max_rows": COMPACT["rows"]} if compact else {}))
    reqs = requests_html(s, lang=lang, fresh=c.fresh, changed=c.requests, groups=groups,
                         **({"max_requests": COMPACT["requests"], "max_cells": COMPACT["cells"]}
                            if compact else {}))
    code = ops = why = ""
    if s.frame is not None:                # an op frame: its op is the sentence; its code lit
        line = (clip(describe_op(s.op, lang, labels, vocab, bs)) if s.op is not None
                else t("no_ops", lang))
        caption = caption_html(line, lang)
        if s.op is not None:
            code = pseudocode_html(s.op, free_order=free_order, vllm_function=s.op.fn)
    else:
        said = s.caption.get(lang) if s.caption is not None else None
        if not said:                       # a scenario without captions: its note's first sentence
            said = first_sentence(note) if note else event_label(s.event, lang)
        caption = caption_html(said, lang, error=error, teaching_only=s.teaching_only)
        ops = ops_html(s.ops, lang, labels, vocab=vocab, block_size=bs, ref_before=c.prev_ref_cnt,
                       **({"max_lines": COMPACT["ops"]} if compact else {}))
        why = note_html(note, lang, error=error) + engine_did_html(
            s, lang, labels, vocab, bs, **({"max_items": COMPACT["did"]} if compact else {}))
    ext = external_html(s.external, labels=labels, vocab=vocab, lang=lang,
                        on_gpu={h for h, _ in s.hash_table}, tier=s.tier)
    return Panels(header=header, caption=caption, why=why, ops=ops, code=code, blocks=blocks,
                  queue=queue, table=table, requests=reqs, external=ext)
