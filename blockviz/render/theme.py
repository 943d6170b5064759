"""Colours with fixed meanings, the player's stylesheet, and small HTML helpers.

Every panel draws with the same few colours, so a colour means one thing everywhere:

  green   has a hash — a cache hit can find it (blocks, queue cells, hash table, hit blocks)
  grey    no hash
  dashed  free (ref_cnt 0, in the free queue); solid = held by a request
  dark    the null block (block 0), hatched
  amber   changed in this step (an outline, never a fill)
  red     the next block the pool hands out (the next eviction victim); evictions
  blue    newly allocated;  violet  from the external tier;  grey marks  freed

The palette below is the only place a colour is written.
"""
from __future__ import annotations

import html
from typing import NamedTuple

# The palette: every colour blockviz draws with, by what it means. Python reads the constants
# below (plotly figures, the CLI's Streamlit theme, the board's dense cells and marks); every
# stylesheet (the panels' below, board.css, the editor's, the Author page's) and board.js read the
# same values as CSS custom properties, ``var(--bv-<name>)``, which ``css_vars`` emits once per
# stylesheet. A colour is written here and nowhere else (tests/meta/test_palette.py).
PALETTE: dict[str, str] = {
    # ink and paper
    "ink": "#1f2328", "muted": "#57606a", "faint": "#8c959f", "paper": "#ffffff",
    "panel": "#f6f8fa",          # code, notes, buttons, gutters
    "rule": "#e3e6e8",           # table rules and light frames
    "border": "#d0d7de",         # controls' frames
    "grid": "#eaeef2",           # chart grid lines
    "track": "#eceff1",          # a bar's empty track; words on the null block
    "code-bg": "#eef1f4",        # inline code
    "shadow": "rgba(0,0,0,.15)", "veil": "rgba(255,255,255,0.85)",   # chart labels over lines
    # blocks: green = has a hash, grey = none, the null block dark
    "green": "#2e7d32", "green-bg": "#c8e6c9", "green-bg-free": "#eef7ee",
    "grey": "#616161", "grey-bg": "#dcdcdc", "grey-bg-free": "#fafafa", "grey-mid": "#9e9e9e",
    "null": "#37474f", "null-stripe": "#546e7a",
    "cell-free": "#f4f4f4", "cell-free-cached": "#a5d6a7",         # the dense view's small cells
    # marks
    "amber": "#f2a900", "amber-bg": "#fff8e1", "amber-pale": "#fffbea", "amber-hl": "#fff1b8",
    "amber-flash": "#ffe08a",
    "red": "#c62828", "red-bg": "#fdecea", "red-flash": "#f8c9c4",
    "blue": "#1565c0", "blue-bg": "#e3f2fd", "blue-pale": "#eef4ff", "blue-focus": "#7aa7e6",
    "blue-select": "#dbe8fb",
    "purple": "#7b1fa2", "purple-bg": "#f3e5f5",
    "orange": "#ef6c00", "orange-bg": "#fff4e5",
    "olive": "#8d6e00",                                          # a waiting request
    "yellow-bg": "#fff3cd", "brown": "#7a5a00",                  # a duplicate hash's badge
}
_P = PALETTE
INK, MUTED, FAINT, PAPER = _P["ink"], _P["muted"], _P["faint"], _P["paper"]
RULE, GRID, VEIL = _P["rule"], _P["grid"], _P["veil"]
GREEN, GREY, GREY_BG = _P["green"], _P["grey"], _P["grey-bg"]
AMBER, RED, BLUE, PURPLE, ORANGE = _P["amber"], _P["red"], _P["blue"], _P["purple"], _P["orange"]
# a prompt split's categories (sim.explain): what served a token, or why nothing did — the
# palette's names (CSS reads var(--bv-<name>))
SPLIT_COLOUR = {"hit": "green", "external_hit": "purple", "window": "amber", "evicted": "red",
                "different_key": "blue", "cold": "grey", "skipped": "brown", "last_token": "orange",
                "partial_block": "faint"}


def css_vars(selector: str = ":root, :host") -> str:
    """The palette as CSS custom properties (``--bv-green: #2e7d32``) on ``selector``: the
    document (``:root``) or a component's shadow root (``:host``)."""
    return selector + " { " + " ".join(f"--bv-{k}: {v};" for k, v in PALETTE.items()) + " }\n"


class BlockStyle(NamedTuple):
    classes: tuple[str, ...]     # the card's CSS classes (their colours: the stylesheet's rules)
    cell: str                    # the dense view's cell colour (stronger than a card's fill)
    key: str                     # the dense legend's i18n key


# The kinds of block, told apart the same way wherever a block is drawn (cards, queue cells, the
# dense view), and the legend items that explain them.
BLOCK_KINDS: dict[str, BlockStyle] = {
    "null": BlockStyle(("bv-null",), _P["null"], "null_block"),
    "free": BlockStyle(("bv-free",), _P["cell-free"], "cat_free"),
    "free_cached": BlockStyle(("bv-cached", "bv-free"), _P["cell-free-cached"], "cat_free_cached"),
    "used": BlockStyle((), _P["grey-mid"], "cat_used"),
    "used_cached": BlockStyle(("bv-cached",), GREEN, "cat_used_cached"),
}


def block_kind(block_id: int, ref_cnt: int, block_hash) -> str:
    """Which kind of block this is (a key of BLOCK_KINDS): the null block, free or in use, with a
    hash (cached: can be hit) or without."""
    if block_id == 0:
        return "null"
    return ("free" if ref_cnt == 0 else "used") + ("_cached" if block_hash is not None else "")


# The legend of the block cards: (i18n key, the swatch's CSS class); the marks end it (the dense
# view's legend shows only those)
BLOCK_MARKS = (
    ("changed", "bv-changed"),
    ("next_victim", "bv-victim"),
    ("next_evict", "bv-evict-next"),
)
BLOCK_LEGEND = (
    ("cached", "bv-cached"),
    ("uncached", ""),
    ("legend_free", "bv-free"),
    ("null_block_long", "bv-null"),
) + BLOCK_MARKS

# step-event markers (the board's timeline, the legend, metrics)
MARKER_COLOURS = {"allocate": BLUE, "hit": GREEN, "external": PURPLE, "evict": RED, "free": FAINT,
                  "preempt": ORANGE}


def esc(value: object) -> str:
    """HTML-escape anything that may have come from a scenario file (ids, notes, words)."""
    return html.escape(str(value), quote=True)


def heading_html(title: str, hint: str = "") -> str:
    """A section's heading (and a quieter hint beside it), as the app's pages draw one."""
    small = f"<small>{esc(hint)}</small>" if hint else ""
    return f'<div class="bv"><div class="bv-h">{esc(title)}{small}</div></div>'


CSS = """
.bv { color: var(--bv-ink); font-size: calc(1rem * var(--bv-scale)); line-height: 1.35; }
.bv * { box-sizing: border-box; }
.bv-h { font-weight: 700; font-size: 1.05em; margin: 0 0 .35em 0; color: var(--bv-ink);
        display: flex; gap: .6em; align-items: baseline; flex-wrap: wrap; }
.bv-h small { font-weight: 400; color: var(--bv-muted); font-size: .8em; }
.bv-muted { color: var(--bv-muted); }
.bv-panel { margin-bottom: .6em; }

/* GPU block cards */
.bv-card { position: relative; border: 2px solid var(--bv-grey); border-radius: .45em;
           background: var(--bv-grey-bg); padding: .3em .45em .4em .45em; min-height: 6.4em; }
.bv-card.bv-free { border-style: dashed; background: var(--bv-grey-bg-free); }
.bv-card.bv-cached { border-color: var(--bv-green); background: var(--bv-green-bg); }
.bv-card.bv-cached.bv-free { background: var(--bv-green-bg-free); }
.bv-card.bv-null { border-color: var(--bv-null); color: var(--bv-paper); border-style: solid;
    background: repeating-linear-gradient(135deg, var(--bv-null) 0 .5em, var(--bv-null-stripe) .5em 1em);
    }
.bv-card.bv-changed { outline: .3em solid var(--bv-amber); outline-offset: .08em; }
.bv-top { display: flex; justify-content: space-between; align-items: baseline; gap: .3em; }
.bv-id { font-size: 1.9em; font-weight: 800; line-height: 1; }
.bv-hash { font-weight: 800; color: var(--bv-green); font-size: 1.15em; }
.bv-tok { font-size: .85em; color: var(--bv-ink); margin-top: .2em; overflow: hidden;
          display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical;
          word-break: break-word; }
.bv-null .bv-tok, .bv-null .bv-ref { color: var(--bv-track); }
.bv-slots { display: flex; gap: 2px; margin-top: .3em; }
.bv-slots i { flex: 1; height: .42em; border-radius: 1px; background: var(--bv-paper);
              border: 1px solid var(--bv-grey-mid); }
.bv-slots i.bv-on { background: var(--bv-ink); border-color: var(--bv-ink); }
.bv-tags { position: absolute; top: -.95em; right: .3em; display: flex; gap: .2em; }
.bv-victim-tag, .bv-evict-tag { font-size: .72em; font-weight: 700; padding: 0 .4em;
                 border-radius: .3em; white-space: nowrap; }
.bv-victim-tag { background: var(--bv-red); color: var(--bv-paper); border: 1px solid var(--bv-red); }
.bv-evict-tag { background: var(--bv-paper); color: var(--bv-red); border: 1px dashed var(--bv-red); }
.bv-card.bv-evict-next .bv-hash { text-decoration: underline dashed var(--bv-red);
                                  text-underline-offset: .2em; }
.bv-was { color: var(--bv-muted); font-weight: 400; }
.bv-now { color: var(--bv-ink); }
.bv-held { font-size: .8em; font-weight: 700; color: var(--bv-blue); word-break: break-all; }
.bv-card.bv-victim { box-shadow: inset 0 -.35em 0 var(--bv-red); }

/* legend */
.bv-legend { display: flex; flex-wrap: wrap; gap: .35em 1.1em; font-size: .85em; color: var(--bv-muted);
             margin: .45em 0 .2em 0; }
.bv-legend span { display: inline-flex; align-items: center; gap: .35em; }
.bv-sw { display: inline-block; width: 1.1em; height: .9em; border-radius: .2em;
         border: 2px solid var(--bv-grey); background: var(--bv-grey-bg); }
.bv-sw.bv-cached { border-color: var(--bv-green); background: var(--bv-green-bg); }
.bv-sw.bv-free { border-style: dashed; background: var(--bv-grey-bg-free); }
.bv-sw.bv-null { border-color: var(--bv-null);
    background: repeating-linear-gradient(135deg, var(--bv-null) 0 .2em, var(--bv-null-stripe) .2em .4em); }
.bv-sw.bv-changed { background: var(--bv-paper); border-color: var(--bv-amber); border-width: 3px; }
.bv-sw.bv-victim { background: var(--bv-red); border-color: var(--bv-red); }
.bv-sw.bv-ext { background: var(--bv-purple-bg); border-color: var(--bv-purple); }
.bv-sw.bv-new { background: var(--bv-blue-bg); border-color: var(--bv-blue); }
.bv-sw.bv-evict-next { background: var(--bv-paper); border-color: var(--bv-red); border-style: dashed; }

/* free queue */
.bv-queue { display: flex; flex-wrap: wrap; align-items: center; gap: .35em .2em; }
.bv-keep { display: inline-flex; align-items: center; gap: .2em; white-space: nowrap; }
.bv-end { font-weight: 700; color: var(--bv-muted); font-size: .9em; padding: 0 .3em; }
.bv-arrow { color: var(--bv-muted); font-size: 1.05em; padding: 0 .05em; }
.bv-q { position: relative; min-width: 2.2em; text-align: center; font-weight: 800; font-size: 1.45em;
        border: 2px dashed var(--bv-grey); background: var(--bv-grey-bg-free); border-radius: .3em;
        padding: .1em .35em; }
.bv-q.bv-cached { border-color: var(--bv-green); background: var(--bv-green-bg-free); }
.bv-q.bv-cached .bv-qh { color: var(--bv-green); }
.bv-qh { display: block; font-size: .5em; font-weight: 700; line-height: 1; min-height: 1em; }
.bv-q.bv-victim { box-shadow: inset 0 -.22em 0 var(--bv-red); padding-bottom: .3em; }
.bv-q.bv-evict-next .bv-qh { color: var(--bv-red); text-decoration: underline dashed var(--bv-red); }
.bv-q.bv-evict-next { border-color: var(--bv-red); }
.bv-q.bv-to-head, .bv-q.bv-to-tail { outline: .2em solid var(--bv-amber); outline-offset: .06em; }
.bv-qm { display: block; font-size: .5em; font-weight: 700; color: var(--bv-ink); line-height: 1.15;
         white-space: nowrap; }
.bv-more { color: var(--bv-muted); font-style: italic; padding: 0 .4em; }

/* a prompt split (render/split.py): one bar, a segment per category */
.bv-split { display: flex; height: .9em; border-radius: .2em; overflow: hidden; min-width: 6em;
            border: 1px solid var(--bv-rule); background: var(--bv-panel); }
.bv-split-seg { display: block; height: 100%; }
.bv-split-row { display: grid; grid-template-columns: 8.5em 1fr 13em; gap: .5em; align-items: center;
                margin: .15em 0; }
.bv-split-key { display: inline-flex; align-items: center; gap: .3em; margin-right: .8em;
                font-size: .85em; }
.bv-split-key i { display: inline-block; width: .8em; height: .8em; border-radius: .15em; }
/* a request's split: under its token bar, as wide (on its own line in a finished request's
   one-line row), the counts in the line's own size */
.bv-split-line { flex: 1 1 100%; }
.bv-split-line .bv-split { max-width: 22em; margin: .2em 0 .1em; }
.bv-split-line .bv-split-key { font-size: 1em; margin-right: .6em; }

/* hash table */
.bv-table { border-collapse: collapse; width: 100%; font-size: .95em; }
.bv-table td, .bv-table th { padding: .18em .5em; border-bottom: 1px solid var(--bv-rule);
                             text-align: left;
                             vertical-align: top; }
.bv-table th { font-weight: 600; color: var(--bv-muted); font-size: .85em; }
.bv-hl { font-weight: 800; color: var(--bv-green); }
.bv-tree { color: var(--bv-muted); white-space: pre; font-family: ui-monospace, monospace; }
.bv-dup { background: var(--bv-yellow-bg); border-radius: .25em; padding: 0 .35em; font-weight: 700;
          color: var(--bv-brown); font-size: .85em; }
.bv-row-new td { background: var(--bv-amber-bg); }
.bv-row-gone td { color: var(--bv-red); text-decoration: line-through; }
.bv-tag { border-radius: .25em; padding: 0 .35em; font-size: .8em; font-weight: 700;
          color: var(--bv-paper);
          white-space: nowrap; }
.bv-tag-new { background: var(--bv-amber); color: var(--bv-ink); }
.bv-tag-gone { background: var(--bv-red); text-decoration: none; display: inline-block; }

/* requests */
.bv-req { display: grid; grid-template-columns: minmax(4.5em, auto) 1fr; gap: .1em .8em;
          padding: .3em 0; border-bottom: 1px solid var(--bv-rule); align-items: center; }
.bv-req.bv-req-changed { background: var(--bv-amber-pale); }
.bv-rid { font-weight: 800; font-size: 1.15em; word-break: break-all; }
.bv-st { font-size: .75em; font-weight: 700; border-radius: .25em; padding: 0 .35em;
         color: var(--bv-paper);
         background: var(--bv-muted); display: inline-block; }
.bv-st-running { background: var(--bv-blue); }
.bv-st-waiting { background: var(--bv-olive); }
.bv-st-preempted { background: var(--bv-orange); }
.bv-st-finished { background: var(--bv-grey-mid); }
.bv-bt { display: flex; flex-wrap: wrap; gap: .25em; align-items: center; }
.bv-b { min-width: 2em; text-align: center; font-weight: 800; border: 2px solid var(--bv-blue);
        border-radius: .25em; padding: 0 .3em; background: var(--bv-blue-bg); }
.bv-b.bv-local { border-color: var(--bv-green); background: var(--bv-green-bg); }
.bv-b.bv-ext { border-color: var(--bv-purple); background: var(--bv-purple-bg); }
.bv-b.bv-changed { outline: .18em solid var(--bv-amber); }
.bv-bar { position: relative; height: .55em; background: var(--bv-track); border-radius: .3em;
          overflow: hidden; margin-top: .2em; max-width: 22em; }
.bv-bar i { position: absolute; left: 0; top: 0; bottom: 0; background: var(--bv-blue); }
.bv-small { font-size: .8em; color: var(--bv-muted); }

/* a hybrid model's KV-cache groups (render/groups.py): a badge names a group wherever it shows
   (a request's table row, a card, the hash key's #g, the legend); a null entry is the null block */
.bv-grp { display: inline-block; font-size: .72em; font-weight: 600; line-height: 1.3;
          border: 1px solid var(--bv-ink); border-radius: .3em; padding: 0 .35em;
          background: var(--bv-paper); color: var(--bv-ink); white-space: nowrap; }
.bv-grp b { font-weight: 800; }
.bv-gt { margin: .08em 0; }
.bv-gt .bv-b { line-height: 1.2; }
.bv-grp-row { min-width: 10.4em; margin-right: .2em; }
.bv-card .bv-grp-card { position: absolute; top: -.8em; left: .35em; font-size: .66em; z-index: 1; }
.bv-card.bv-victim .bv-grp-n, .bv-card.bv-evict-next .bv-grp-n { display: none; }   /* room: the tags */
.bv-b.bv-b-null { border-color: var(--bv-null); color: var(--bv-paper);
    background: repeating-linear-gradient(135deg, var(--bv-null) 0 .25em, var(--bv-null-stripe) .25em .5em); }
.bv-grp-legend { margin-top: .1em; }
.bv-grp-legend .bv-grp { font-size: 1em; }
.bv-legend .bv-b-null { min-width: 1.6em; }
.bv-hg { color: var(--bv-ink); font-size: .85em; }

/* narration */
.bv-note { font-size: 1.12em; line-height: 1.5; background: var(--bv-panel);
           border-left: .3em solid var(--bv-blue);
           padding: .5em .8em; border-radius: .25em; }
.bv-did-wrap { max-height: 17em; overflow-y: auto; }
.bv-did { margin: .4em 0 0 0; padding-left: 1.2em; font-size: .92em; }
.bv-did li { margin: .12em 0; }
.bv-error { background: var(--bv-red-bg); border-left: .3em solid var(--bv-red); padding: .5em .8em;
            margin-top: .5em;
            border-radius: .25em; font-weight: 600; }
.bv-title { font-size: 1.35em; font-weight: 800; }
.bv-sched { margin: .2em 0 .1em 0; padding-left: 1.2em; font-size: .95em; font-weight: 600;
            font-variant-numeric: tabular-nums; }
.bv-sched li { margin: .1em 0; }
.bv-teaching { background: var(--bv-orange-bg); border-left: .3em solid var(--bv-orange);
               padding: .35em .7em;
               border-radius: .25em; margin-bottom: .35em; font-size: .92em; }

/* pseudocode */
.bv-code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .76em;
           background: var(--bv-panel); border-radius: .35em; padding: .4em 0; margin: 0;
           white-space: pre; overflow-x: auto; }
.bv-code div { padding: 0 .7em; min-height: 1.3em; }
.bv-code div.bv-cur { background: var(--bv-amber-hl); box-shadow: inset .3em 0 0 var(--bv-amber);
                      font-weight: 700; }
.bv-fn { font-size: .85em; color: var(--bv-muted); margin-bottom: .2em; }

/* step markers' legend */
.bv-mk { display: inline-block; width: .75em; height: .75em; border-radius: .15em; }

/* step header */
.bv-stepline { display: flex; gap: .8em; align-items: baseline; flex-wrap: wrap; }
.bv-stepno { font-size: 1.35em; font-weight: 800; white-space: nowrap; }
.bv-event { font-size: 1.2em; font-weight: 600; }
.bv-scn { margin-left: auto; color: var(--bv-muted); font-size: .95em; }

/* external tier */
.bv-ext-cell { border: 2px solid var(--bv-purple); background: var(--bv-purple-bg); border-radius: .3em;
               padding: 0 .4em;
               font-weight: 800; }
"""


def css_rules() -> str:
    """The palette's custom properties and the panels' rules (no <style> tag, no page rules): the
    player's stylesheet and the board's (inside its shadow root) both start from these."""
    return css_vars() + CSS


def css(presenter: bool = False) -> str:
    """The stylesheet; presenter mode scales every panel up (readable from the back row), and a
    projector (1920 wide and up) more still, and makes Streamlit's own widgets large."""
    scale, wide, widgets = (("1.3", "@media (min-width: 1700px) { :root { --bv-scale: 1.7; } }\n",
                             PRESENTER_CSS) if presenter else ("1.0", "", ""))
    return f"<style>\n:root {{ --bv-scale: {scale}; }}\n{wide}{css_rules()}{PAGE_CSS}{widgets}</style>"


# Streamlit's page: less empty space above the player.
PAGE_CSS = """
[data-testid="stMainBlockContainer"] { padding-top: 3.9rem; padding-bottom: 2rem; }
[data-testid="stSidebarUserContent"] { padding-top: .5rem; }
"""

# The player with a learning panel (self-check, try it yourself) beside the board: less page
# margin, so the board keeps its width; the panel scrolls inside the screen, never the page (a
# wheel at the panel's end does not scroll on into the page, which would lift the board away).
SIDE_PANEL_CSS = """<style>
[data-testid="stMainBlockContainer"]:has(.st-key-side_panel) { padding-left: 1.5rem; padding-right: 1.5rem; }
.st-key-side_panel { max-height: calc(100vh - 4.6rem); overflow-y: auto; overflow-x: hidden;
                  overscroll-behavior: contain; padding-right: .35rem; }
</style>"""

# Streamlit's own widgets, made large for a projector (presenter mode only).
PRESENTER_CSS = """
[data-testid="stMainBlockContainer"] { padding-left: .8rem; padding-right: .8rem; }
[data-testid="stMainBlockContainer"] [data-testid="stBaseButton-secondary"],
[data-testid="stMainBlockContainer"] [data-testid="stBaseButton-primary"] {
    font-size: 1.35rem; min-height: 3rem; padding: .2rem 1.1rem; }
[data-testid="stMainBlockContainer"] button p { font-size: 1.35rem; }
[data-testid="stMainBlockContainer"] [data-testid="stWidgetLabel"] p { font-size: 1.2rem; }
.bv-legend { font-size: .72em; margin: .2em 0 0 0; }
.bv-h { margin-bottom: .15em; }
"""
