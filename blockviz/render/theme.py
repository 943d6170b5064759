"""Colours with fixed meanings, the player's stylesheet, and small HTML helpers.

Every panel draws with the same few colours, so a colour means one thing everywhere:

  green   has a hash — a cache hit can find it (blocks, queue cells, hash table, hit blocks)
  grey    no hash
  dashed  free (ref_cnt 0, in the free queue); solid = held by a request
  dark    the null block (block 0), hatched
  amber   changed in this step (an outline, never a fill)
  red     the next block the pool hands out (the next eviction victim); evictions
  blue    newly allocated;  violet  from the external tier;  grey marks  freed
"""
from __future__ import annotations

import html
from string import Template

GREEN, GREEN_BG, GREEN_BG_FREE = "#2e7d32", "#c8e6c9", "#eef7ee"
GREY, GREY_BG, GREY_BG_FREE = "#616161", "#dcdcdc", "#fafafa"
NULL_BG = "#37474f"
AMBER = "#f2a900"
RED = "#c62828"
BLUE = "#1565c0"
PURPLE = "#7b1fa2"
INK = "#1f2328"
MUTED = "#57606a"

# The style table: the kinds of block, told apart the same way wherever a block is drawn (the
# player's cards, the slide, the heatmap), and the legend items that explain them.
#   kind -> (card CSS classes, fill, border, border dash, heatmap cell colour, heatmap i18n key)
# Heatmap cells are tiny, so their colours are stronger than the card fills.
BLOCK_KINDS: dict[str, tuple[tuple[str, ...], str, str, str, str, str]] = {
    "null": (("bv-null",), NULL_BG, NULL_BG, "solid", NULL_BG, "null_block"),
    "free": (("bv-free",), GREY_BG_FREE, GREY, "dash", "#f4f4f4", "cat_free"),
    "free_cached": (("bv-cached", "bv-free"), GREEN_BG_FREE, GREEN, "dash", "#a5d6a7",
                    "cat_free_cached"),
    "used": ((), GREY_BG, GREY, "solid", "#9e9e9e", "cat_used"),
    "used_cached": (("bv-cached",), GREEN_BG, GREEN, "solid", GREEN, "cat_used_cached"),
}


def block_kind(block_id: int, ref_cnt: int, block_hash) -> str:
    """Which kind of block this is (a key of BLOCK_KINDS): the null block, free or in use, with a
    hash (cached: can be hit) or without."""
    if block_id == 0:
        return "null"
    return ("free" if ref_cnt == 0 else "used") + ("_cached" if block_hash is not None else "")


# The legend of the block cards and the slide: (i18n key, card CSS class, fill, border, dash)
BLOCK_LEGEND = (
    ("cached", "bv-cached", GREEN_BG, GREEN, "solid"),
    ("uncached", "", GREY_BG, GREY, "solid"),
    ("legend_free", "bv-free", GREY_BG_FREE, GREY, "dash"),
    ("null_block_long", "bv-null", NULL_BG, NULL_BG, "solid"),
    ("changed", "bv-changed", "#ffffff", AMBER, "solid"),
    ("next_victim", "bv-victim", RED, RED, "solid"),
    ("next_evict", "bv-evict-next", "#ffffff", RED, "dash"),
)

# step-event markers (timeline strip, step list, metrics)
FREE_MARK = "#8c959f"
ORANGE = "#ef6c00"
MARKER_COLOURS = {"allocate": BLUE, "hit": GREEN, "external": PURPLE, "evict": RED, "free": FREE_MARK,
                  "preempt": ORANGE}


def esc(value: object) -> str:
    """HTML-escape anything that may have come from a scenario file (ids, notes, words)."""
    return html.escape(str(value), quote=True)


CSS = """
.bv { color: $ink; font-size: calc(1rem * var(--bv-scale)); line-height: 1.35; }
.bv * { box-sizing: border-box; }
.bv-h { font-weight: 700; font-size: 1.05em; margin: 0 0 .35em 0; color: $ink;
        display: flex; gap: .6em; align-items: baseline; flex-wrap: wrap; }
.bv-h small { font-weight: 400; color: $muted; font-size: .8em; }
.bv-muted { color: $muted; }
.bv-panel { margin-bottom: .6em; }

/* GPU block cards */
.bv-blocks { display: grid; grid-template-columns: repeat(auto-fit, minmax(6.6em, 1fr));
             gap: .55em; }
.bv-card { position: relative; border: 2px solid $grey; border-radius: .45em;
           background: $grey_bg; padding: .3em .45em .4em .45em; min-height: 6.4em; }
.bv-card.bv-free { border-style: dashed; background: $grey_bg_free; }
.bv-card.bv-cached { border-color: $green; background: $green_bg; }
.bv-card.bv-cached.bv-free { background: $green_bg_free; }
.bv-card.bv-null { border-color: $null; color: #fff; border-style: solid;
    background: repeating-linear-gradient(135deg, $null 0 .5em, #546e7a .5em 1em); }
.bv-card.bv-changed { outline: .3em solid $amber; outline-offset: .08em; }
.bv-top { display: flex; justify-content: space-between; align-items: baseline; gap: .3em; }
.bv-id { font-size: 1.9em; font-weight: 800; line-height: 1; }
.bv-hash { font-weight: 800; color: $green; font-size: 1.15em; }
.bv-ref { font-size: .95em; margin-top: .15em; }
.bv-ref b { font-size: 1.15em; }
.bv-tok { font-size: .85em; color: $ink; margin-top: .2em; overflow: hidden;
          display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical;
          word-break: break-word; }
.bv-null .bv-tok, .bv-null .bv-ref { color: #eceff1; }
.bv-slots { display: flex; gap: 2px; margin-top: .3em; }
.bv-slots i { flex: 1; height: .42em; border-radius: 1px; background: #ffffff;
              border: 1px solid #9e9e9e; }
.bv-slots i.bv-on { background: $ink; border-color: $ink; }
.bv-tags { position: absolute; top: -.95em; right: .3em; display: flex; gap: .2em; }
.bv-victim-tag, .bv-evict-tag { font-size: .72em; font-weight: 700; padding: 0 .4em;
                 border-radius: .3em; white-space: nowrap; }
.bv-victim-tag { background: $red; color: #fff; border: 1px solid $red; }
.bv-evict-tag { background: #fff; color: $red; border: 1px dashed $red; }
.bv-card.bv-evict-next .bv-hash { text-decoration: underline dashed $red; text-underline-offset: .2em; }
.bv-was { color: $muted; font-weight: 400; }
.bv-now { color: $ink; }
.bv-held { font-size: .8em; font-weight: 700; color: $blue; word-break: break-all; }
.bv-card.bv-victim { box-shadow: inset 0 -.35em 0 $red; }

/* legend */
.bv-legend { display: flex; flex-wrap: wrap; gap: .35em 1.1em; font-size: .85em; color: $muted;
             margin: .45em 0 .2em 0; }
.bv-legend span { display: inline-flex; align-items: center; gap: .35em; }
.bv-sw { display: inline-block; width: 1.1em; height: .9em; border-radius: .2em;
         border: 2px solid $grey; background: $grey_bg; }
.bv-sw.bv-cached { border-color: $green; background: $green_bg; }
.bv-sw.bv-free { border-style: dashed; background: $grey_bg_free; }
.bv-sw.bv-null { border-color: $null;
    background: repeating-linear-gradient(135deg, $null 0 .2em, #546e7a .2em .4em); }
.bv-sw.bv-changed { background: #fff; border-color: $amber; border-width: 3px; }
.bv-sw.bv-victim { background: $red; border-color: $red; }
.bv-sw.bv-evict-next { background: #fff; border-color: $red; border-style: dashed; }

/* free queue */
.bv-queue { display: flex; flex-wrap: wrap; align-items: center; gap: .35em .2em; }
.bv-keep { display: inline-flex; align-items: center; gap: .2em; white-space: nowrap; }
.bv-end { font-weight: 700; color: $muted; font-size: .9em; padding: 0 .3em; }
.bv-arrow { color: $muted; font-size: 1.05em; padding: 0 .05em; }
.bv-q { position: relative; min-width: 2.2em; text-align: center; font-weight: 800; font-size: 1.45em;
        border: 2px dashed $grey; background: $grey_bg_free; border-radius: .3em;
        padding: .1em .35em; }
.bv-q.bv-cached { border-color: $green; background: $green_bg_free; }
.bv-q.bv-cached .bv-qh { color: $green; }
.bv-qh { display: block; font-size: .5em; font-weight: 700; line-height: 1; min-height: 1em; }
.bv-q.bv-victim { box-shadow: inset 0 -.22em 0 $red; padding-bottom: .3em; }
.bv-q.bv-evict-next .bv-qh { color: $red; text-decoration: underline dashed $red; }
.bv-q.bv-evict-next { border-color: $red; }
.bv-q.bv-to-head, .bv-q.bv-to-tail { outline: .2em solid $amber; outline-offset: .06em; }
.bv-qm { display: block; font-size: .5em; font-weight: 700; color: $ink; line-height: 1.15;
         white-space: nowrap; }
.bv-more { color: $muted; font-style: italic; padding: 0 .4em; }

/* hash table */
.bv-table { border-collapse: collapse; width: 100%; font-size: .95em; }
.bv-table td, .bv-table th { padding: .18em .5em; border-bottom: 1px solid #e3e6e8; text-align: left;
                             vertical-align: top; }
.bv-table th { font-weight: 600; color: $muted; font-size: .85em; }
.bv-hl { font-weight: 800; color: $green; }
.bv-tree { color: $muted; white-space: pre; font-family: ui-monospace, monospace; }
.bv-dup { background: #fff3cd; border-radius: .25em; padding: 0 .35em; font-weight: 700;
          color: #7a5a00; font-size: .85em; }
.bv-row-new td { background: #fff8e1; }
.bv-row-gone td { color: $red; text-decoration: line-through; }
.bv-tag { border-radius: .25em; padding: 0 .35em; font-size: .8em; font-weight: 700; color: #fff;
          white-space: nowrap; }
.bv-tag-new { background: $amber; color: $ink; }
.bv-tag-gone { background: $red; text-decoration: none; display: inline-block; }

/* requests */
.bv-req { display: grid; grid-template-columns: minmax(4.5em, auto) 1fr; gap: .1em .8em;
          padding: .3em 0; border-bottom: 1px solid #e3e6e8; align-items: center; }
.bv-req.bv-req-changed { background: #fffbea; }
.bv-rid { font-weight: 800; font-size: 1.15em; word-break: break-all; }
.bv-st { font-size: .75em; font-weight: 700; border-radius: .25em; padding: 0 .35em; color: #fff;
         background: $muted; display: inline-block; }
.bv-st-running { background: $blue; }
.bv-st-waiting { background: #8d6e00; }
.bv-st-preempted { background: #ef6c00; }
.bv-st-finished { background: #9e9e9e; }
.bv-bt { display: flex; flex-wrap: wrap; gap: .25em; align-items: center; }
.bv-b { min-width: 2em; text-align: center; font-weight: 800; border: 2px solid $blue;
        border-radius: .25em; padding: 0 .3em; background: #e3f2fd; }
.bv-b.bv-local { border-color: $green; background: $green_bg; }
.bv-b.bv-ext { border-color: $purple; background: #f3e5f5; }
.bv-b.bv-changed { outline: .18em solid $amber; }
.bv-bar { position: relative; height: .55em; background: #eceff1; border-radius: .3em;
          overflow: hidden; margin-top: .2em; max-width: 22em; }
.bv-bar i { position: absolute; left: 0; top: 0; bottom: 0; background: $blue; }
.bv-small { font-size: .8em; color: $muted; }

/* narration */
.bv-note { font-size: 1.12em; line-height: 1.5; background: #f6f8fa; border-left: .3em solid $blue;
           padding: .5em .8em; border-radius: .25em; }
.bv-did-wrap { max-height: 17em; overflow-y: auto; }
.bv-did { margin: .4em 0 0 0; padding-left: 1.2em; font-size: .92em; }
.bv-did li { margin: .12em 0; }
.bv-error { background: #fdecea; border-left: .3em solid $red; padding: .5em .8em; margin-top: .5em;
            border-radius: .25em; font-weight: 600; }
.bv-title { font-size: 1.35em; font-weight: 800; }
.bv-sched { margin: .2em 0 .1em 0; padding-left: 1.2em; font-size: .95em; font-weight: 600;
            font-variant-numeric: tabular-nums; }
.bv-sched li { margin: .1em 0; }
.bv-teaching { background: #fff4e5; border-left: .3em solid $orange; padding: .35em .7em;
               border-radius: .25em; margin-bottom: .35em; font-size: .92em; }

/* pseudocode */
.bv-code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .76em;
           background: #f6f8fa; border-radius: .35em; padding: .4em 0; margin: 0;
           white-space: pre; overflow-x: auto; }
.bv-code div { padding: 0 .7em; min-height: 1.3em; }
.bv-code div.bv-cur { background: #fff1b8; box-shadow: inset .3em 0 0 $amber; font-weight: 700; }
.bv-fn { font-size: .85em; color: $muted; margin-bottom: .2em; }
.bv-op { font-size: 1.12em; line-height: 1.5; background: #fffbea; border-left: .3em solid $amber;
         padding: .5em .8em; border-radius: .25em; margin: 0 0 .5em 0; }
.bv-ops { list-style: none; padding: 0; margin: .4em 0 0 0; font-size: .8em; color: $muted;
          display: flex; flex-wrap: wrap; gap: .25em; }
.bv-ops li { border: 1px solid #d0d7de; border-radius: .25em; padding: 0 .35em; }
.bv-ops li.bv-cur { border-color: $amber; background: #fff1b8; color: $ink; font-weight: 700; }

/* step markers' legend */
.bv-mk { display: inline-block; width: .75em; height: .75em; border-radius: .15em; }

/* step header */
.bv-stepline { display: flex; gap: .8em; align-items: baseline; flex-wrap: wrap; }
.bv-stepno { font-size: 1.35em; font-weight: 800; white-space: nowrap; }
.bv-event { font-size: 1.2em; font-weight: 600; }
.bv-scn { margin-left: auto; color: $muted; font-size: .95em; }

/* external tier */
.bv-ext-cell { border: 2px solid $purple; background: #f3e5f5; border-radius: .3em; padding: 0 .4em;
               font-weight: 800; }
"""


def css_rules() -> str:
    """The panels' rules with the colours filled in (no <style> tag, no page rules): the player's
    stylesheet and the board's (inside its shadow root) both start from these."""
    return Template(CSS).substitute(
        ink=INK, muted=MUTED, grey=GREY, grey_bg=GREY_BG, grey_bg_free=GREY_BG_FREE,
        green=GREEN, green_bg=GREEN_BG, green_bg_free=GREEN_BG_FREE, null=NULL_BG,
        amber=AMBER, red=RED, blue=BLUE, purple=PURPLE, orange=ORANGE)


def css(presenter: bool = False) -> str:
    """The stylesheet; presenter mode scales every panel up (readable from the back row)."""
    scale = 1.3 if presenter else 1.0
    # a projector (1920 wide and up) gets larger type still: read from the back row
    wide = "@media (min-width: 1700px) { :root { --bv-scale: 1.7; } }\n" if presenter else ""
    root = f":root {{ --bv-scale: {scale}; }}\n" + wide
    return ("<style>\n" + root + css_rules() + PAGE_CSS + (PRESENTER_CSS if presenter else "")
            + "</style>")


# Streamlit's page: less empty space above the player.
PAGE_CSS = """
[data-testid="stMainBlockContainer"] { padding-top: 3.9rem; padding-bottom: 2rem; }
[data-testid="stSidebarUserContent"] { padding-top: .5rem; }
"""

# Streamlit's own widgets, made large for a projector (presenter mode only).
PRESENTER_CSS = """
[data-testid="stMainBlockContainer"] [data-testid="stBaseButton-secondary"],
[data-testid="stMainBlockContainer"] [data-testid="stBaseButton-primary"] {
    font-size: 1.35rem; min-height: 3rem; padding: .2rem 1.1rem; }
[data-testid="stMainBlockContainer"] button p { font-size: 1.35rem; }
[data-testid="stMainBlockContainer"] [data-testid="stWidgetLabel"] p { font-size: 1.2rem; }
.bv-legend { font-size: .72em; margin: .2em 0 0 0; }
.bv-card { min-height: 5.6em; }
.bv-h { margin-bottom: .15em; }
"""
