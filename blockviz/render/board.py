"""The board's data: a run's steps, ready for the browser to draw — the same panels (``render.step``)
for the player, the Author preview and the offline HTML export. Pure: a timeline in, a
:class:`BoardData` out, serialised once (``to_json``). The browser side (``board.js``,
``board.css`` beside this file) lays the panels out on one screen, steps through them without
asking the server, animates the change and links the panels; the app tells a mounted board where to
go and how to behave with a :class:`BoardControl`, sent beside the data (never spliced into it).

Size: a lesson of up to ``CARD_LIMIT`` blocks ships every step in both languages (switching
language costs no rerun) with the op frames of "step into"; bigger runs ship a window of steps
around the cursor in one language, and draw their blocks as a dense strip (one cell per block)
instead of cards.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from importlib import resources

from blockviz.i18n import event_label, t
from blockviz.render import groups as rgroups
from blockviz.render import step as rstep
from blockviz.render.blocks import heatmap_legend_html, legend_html, next_marks
from blockviz.render.markers import KINDS
from blockviz.render.theme import BLOCK_KINDS, MARKER_COLOURS, block_kind, css_rules
from blockviz.sim.step import Step
from blockviz.teach.labels import HashLabels

CARD_LIMIT = 32            # blocks drawn as cards; more: the dense view
FULL_STEPS = 400           # a run this short ships every step; longer: a window
WINDOW = 120               # steps in a window (the browser asks for the next one at its edge)
DENSE_WINDOW = 40          # the same, for a dense run (each step carries a cell per block)
VERSION = 1

# kind of block -> one letter in the dense view's cell strings (the browser maps it to a colour)
KIND_CODES = {"null": "n", "free": "f", "free_cached": "c", "used": "u", "used_cached": "U"}
MARK_CODES = {k: k[0] if k != "external" else "x" for k in KINDS}   # a, h, x, e, f, p

UI_KEYS = ("nav_first", "nav_prev", "nav_play", "nav_pause", "nav_next", "nav_last", "step_into",
           "gpu_blocks", "free_queue", "free_queue_hint", "hash_table", "requests", "external_tier",
           "board_keys", "board_lang", "board_dense_note", "block", "board_no_frames", "board_loading",
           "board_ops", "board_ops_page", "board_ops_folded", "board_why", "board_why_title",
           "board_close")


@dataclass(frozen=True)
class BoardRun:
    """What the board needs of a run: its timeline, hash labels, per-step kinds, per-language titles."""
    timeline: object
    labels: HashLabels
    kinds: Sequence[frozenset[str]]
    titles: dict[str, str]           # lang -> title
    free_order: str = "split"


class MissingAsset(Exception):
    """A file the package ships is not where it should be: a broken install, not the user's input."""


def asset(name: str) -> str:
    """The board's browser code (``board.js``) or stylesheet (``board.css``), shipped in the package
    (MissingAsset, saying so, when the install lacks it)."""
    path = resources.files("blockviz.render").joinpath(name)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MissingAsset(f"blockviz is installed without its file {name} (looked for {path}): "
                           f"reinstall blockviz (pip install --force-reinstall blockviz)") from None


def board_css() -> str:
    """The panels' stylesheet (the theme's one table of colours) and the board's layout."""
    return css_rules() + "\n" + asset("board.css")


def is_dense(run: BoardRun) -> bool:
    return run.timeline.num_gpu_blocks > CARD_LIMIT


def window(run: BoardRun, around: int, whole: bool = False, start: int | None = None) -> tuple[int, int]:
    """(lo, hi), inclusive: the steps shipped when the board shows step ``around``, centred on it
    (``whole``: every step, as an export needs; ``start``: the window that begins there, as an
    earlier call gave it)."""
    n = len(run.timeline)
    dense = is_dense(run)
    size = n if whole or (n <= FULL_STEPS and not dense) else (DENSE_WINDOW if dense else WINDOW)
    if size >= n:
        return 0, n - 1
    lo = max(0, min(around - size // 2 if start is None else start, n - size))
    return lo, lo + size - 1


class Pool:
    """Every distinct panel string once (a record names it by index): the blocks of a frame are
    often the blocks of the one before, and one function's pseudocode serves many ops."""

    def __init__(self) -> None:
        self.strings: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, s: str) -> int:
        i = self._index.get(s)
        if i is None:
            i = self._index[s] = len(self.strings)
            self.strings.append(s)
        return i


# the panels a step's record names: those an op frame changes, and those only a step has
FRAME_PANELS = ("header", "caption", "code", "queue", "table", "requests", "blocks")
STEP_PANELS = ("header", "caption", "why", "ops", "blocks", "queue", "table", "requests", "external")


def _record(p: rstep.Panels, pool: Pool, frame: bool = False) -> dict[str, int]:
    """A step's panels (a frame's: only those that change op by op), by Panels field name, as
    indices into the pool; empty panels are left out."""
    return {name: pool(value) for name in (FRAME_PANELS if frame else STEP_PANELS)
            if (value := getattr(p, name))}


@dataclass(frozen=True, kw_only=True)
class BoardData:
    """What board.js draws for a window of steps ``lo .. hi`` of a run: the one object that goes
    from Python to the browser, serialised once. The player, the Author preview and an exported
    page all send these same bytes.

    Panel HTML travels once, in ``strings``; a step names each of its panels by index::

        strings  ["<div class=…>", "<table …>", …]
        steps    {"en": [{"header": 0, "queue": 1, "table": 2, …}, …]}     step lo + j at [j]
        frames   {"en": [[{"header": 7, "op": 8, …}, …], …]}               its op frames, in order
        cells    [{"cells": "nfcuU…", "qcells": …, "victim": 4, …}, …]     the dense view's steps

    (a window of 400 steps of a lesson in two languages, with its frames, names a few thousand
    panels of which a few hundred are distinct)."""
    version: int
    num_steps: int                       # the run's, not the window's
    lo: int
    hi: int
    langs: list[str]                     # the languages shipped, ``lang`` first or among them
    lang: str                            # the one shown first
    steps: dict[str, list[dict[str, int]]]
    frames: dict[str, list[list[dict[str, int]]]] | None   # None: no step-into data shipped
    no_frames: bool                      # this board can never step into an event
    events: dict[str, list[str]]         # each step's event label
    marks: list[str]                     # the timeline's marks: kind letters per step, whole run
    mark_colours: dict[str, str]
    mark_names: dict[str, dict[str, str]]
    ui: dict[str, dict[str, str]]        # the board's own words, per language
    legend: dict[str, str]
    widest_label: str = ""               # the widest hash label of the run (cards are sized for it)
    dense: bool = False                  # blocks as a dense grid (``cells``), not cards
    num_blocks: int = 0
    cells: list[dict] | None = None
    kind_colours: dict[str, str]
    external: bool = False               # the run has an external tier (its panel is shown)
    group_names: dict[str, list[str]] | None = None   # a hybrid model's groups, "g1 sliding window 8"
    presenter: bool = False
    speed: float                         # play speed
    url: bool | str                      # write the step into the URL: True ?step=, "hash" #step=
    strings: list[str]

    def to_dict(self) -> dict:
        """The data as board.js reads it, each field under its own name (a field that is None is
        left out)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, kw_only=True)
class BoardControl:
    """What the page tells a mounted board besides its data, on every run of the page.
    ``goto``: Python moves the board ({step, frame, seq, run}; the board follows a new ``seq``
    only, so a late rerun never pulls it back); ``report``: the board tells Python each step it
    shows; ``answer``: a self-check answer ({step, ids}) it outlines at that step; ``fit``: scale
    to the viewport (else a fixed size that scrolls)."""
    goto: dict | None = None
    report: bool = False
    answer: dict | None = None
    fit: bool = True

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _dense(state: Step, hybrid: bool = False) -> dict:
    """A dense step: a letter per block (its kind), the free queue in order as letters, marks;
    ``hybrid``: the KV-cache group each block serves too (``groups``: a digit per block, "." for
    none — at most 8 groups, scenario.schema.MAX_KV_CACHE_GROUPS; see render.groups.block_groups)."""
    ref, hashes, changed = state.ref_cnt, state.block_hash, state.changes.blocks
    cells = "".join(KIND_CODES[block_kind(i, ref[i], hashes[i])] for i in range(len(ref)))
    queue = "".join(cells[b] for b in state.free_queue)
    head, evict = next_marks(state)
    out = {"cells": cells, "qcells": queue, "qids": [state.free_queue[0], state.free_queue[-1]]
           if state.free_queue else [], "changed": sorted(changed)[:2000], "victim": head,
           "evict": evict}
    if hybrid:
        served = rgroups.block_groups(state)
        out["groups"] = "".join(str(served[b]) if b in served else "." for b in range(len(ref)))
    return out



def widest_label(labels: HashLabels) -> str:
    """The longest hash label a run can show (``H12``; ``H12#4`` with several KV-cache groups)."""
    n = max(1, len(labels.label))
    return f"H{n}" + (f"#{len(labels.groups) - 1}" if labels.hybrid else "")


def _legend(run: BoardRun, lang: str, dense: bool) -> str:
    """The board's legend: the blocks' colours and marks, and a hybrid model's KV-cache groups."""
    groups = rgroups.legend_html(run.labels.groups, lang) if run.labels.hybrid else ""
    if dense:
        return heatmap_legend_html(lang, run.timeline.num_gpu_blocks, extra=groups)
    return f'<div class="bv">{legend_html(lang)}{groups}</div>'


def board_data(run: BoardRun, *, langs: Sequence[str], around: int = 0, frames: bool = False,
               presenter: bool = False, speed: float = 1.0, lang: str | None = None,
               url: bool | str = False, whole: bool = False, start: int | None = None) -> BoardData:
    """Everything the board draws, for the window of steps around ``around``, in ``langs`` (the
    first, or ``lang``, shown first). ``frames``: ship the op frames of "step into" too (for small
    runs only). ``url``: the board writes the step into the page's URL (True: ``?step=``, the
    player; "hash": ``#step=``, an exported file; False: a preview). ``whole``: every step.
    ``start``: the window's first step instead (see :func:`window`)."""
    tl = run.timeline
    shown = langs[0] if lang is None else lang
    lo, hi = window(run, around, whole, start)
    dense = is_dense(run)
    frames = frames and not dense
    pool = Pool()
    steps: dict[str, list] = {}
    op_frames: dict[str, list] = {}
    for lang in langs:
        info = {"labels": run.labels, "title": run.titles.get(lang, ""), "free_order": run.free_order}
        out, fr = [], []
        for i in range(lo, hi + 1):
            out.append(_record(rstep.build_panels(tl, tl.step(i), lang, **info, compact=dense), pool))
            if frames:
                fr.append([_record(rstep.build_panels(tl, f, lang, **info), pool, frame=True)
                           for f in tl.frames(i)])
        steps[lang], op_frames[lang] = out, fr
    return BoardData(
        version=VERSION, num_steps=len(tl), lo=lo, hi=hi, langs=list(langs), lang=shown,
        steps=steps, frames=op_frames if frames else None, no_frames=dense,
        events={lg: [event_label(tl.step_of(i), lg) for i in range(lo, hi + 1)] for lg in langs},
        marks=["".join(MARK_CODES[k] for k in KINDS if k in ks) for ks in run.kinds],
        mark_colours={MARK_CODES[k]: MARKER_COLOURS[k] for k in KINDS},
        mark_names={lg: {MARK_CODES[k]: t("mk_" + k, lg) for k in KINDS} for lg in langs},
        ui={lg: {k: t(k, lg) for k in UI_KEYS} for lg in langs},
        legend={lg: _legend(run, lg, dense) for lg in langs},
        widest_label=widest_label(run.labels), dense=dense, num_blocks=tl.num_gpu_blocks,
        cells=[_dense(tl.step(i), run.labels.hybrid) for i in range(lo, hi + 1)] if dense else None,
        kind_colours={c: BLOCK_KINDS[k].cell for k, c in KIND_CODES.items()},
        external=any("external" in r for r in steps[langs[0]]), presenter=presenter,
        speed=speed, url=url, strings=pool.strings,
        group_names={lg: [f'{t("grp_tag", lg, g=g)} {rgroups.group_name(spec, lg)}'   # as a badge reads
                          for g, spec in enumerate(run.labels.groups)] for lg in langs}
        if run.labels.hybrid else None)
