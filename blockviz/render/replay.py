"""A recording on the board (pure: a :class:`blockviz.live.replay.Recording` in, a
:class:`blockviz.render.board.BoardData` out).

The board (board.js) steps through it exactly as through a lesson — the timeline, ← →, Home/End,
the ops panel, the language toggle, ``#step=`` in an exported file — and only the panels differ:

- the main panel is the prefix forest of the batch's rank after it (per ``(medium, group_idx)``,
  tenants apart, as the Live page draws it: :class:`blockviz.render.live.Forest`), every hash a
  chip (its first 8 hex digits; the whole hash in its title), the hashes this batch stored marked
  new, the ones it removed listed struck through;
- the ops panel lists the batch's events, one line each with vLLM's names (``BlockStored``
  parent → hashes, ``BlockRemoved`` hashes, ``AllBlocksCleared``);
- "why?" holds the notes this batch raised and what no subscriber can know.

A hash is linked by its group and hex (``data-block="GPU/0:1a1eb4e3edd9361a"``): hovering a chip in
the forest lights every event line that names it, hovering an event line lights its hashes in the
forest (the board's own linking). The panels the forest does not have (free queue, hash table,
requests, step into) are hidden by this module's stylesheet, which the player and the export add
after the board's.
"""
from __future__ import annotations

import time

from blockviz.i18n import t, tn
from blockviz.live.reducer import group_name, hash_label, short_hex
from blockviz.live.wire import AllBlocksCleared, BlockRemoved, BlockStored
from blockviz.render.board import UI_KEYS, VERSION, BoardData, Pool, board_css
from blockviz.render.live import Forest, cannot_know, tenant_label, token_text
from blockviz.render.pseudocode import ops_panel
from blockviz.render.theme import esc

# the timeline's marks of a batch, by the kinds of its events: (letter, event, palette name, i18n key)
MARKS = (("s", BlockStored, "green", "lv_stored"), ("r", BlockRemoved, "red", "lv_removed"),
         ("c", AllBlocksCleared, "blue", "lv_cleared"))
MAX_BOARD_CHARS = 12_000_000   # the board's strings, all languages: the steps past it are not shipped
CHIPS_PER_LINE = 24          # hashes named on one event line; more are counted
ROWS = 120                   # forest rows drawn per step; more are counted
TOKENS = 48                  # characters of a row's token text
# the board's words this player says otherwise
UI_OVERRIDES = {"gpu_blocks": "rp_forest", "board_ops": "rp_ops", "board_keys": "rp_keys",
                "board_why": "rp_why", "board_why_title": "rp_why_title"}


def hash_id(key: tuple, h) -> str:
    """A hash's link id: its group and its hex (one hash can be cached in two groups)."""
    return f"{group_name(key)}:{short_hex(h)}"


def _chip(key: tuple, h, cls: str = "bvr-h", title: str = "") -> str:
    s = short_hex(h)
    tip = f' title="{esc(title)}"' if title else f' title="{esc(s)}"'
    return f'<i class="{cls}" data-block="{esc(hash_id(key, h))}"{tip}>{esc(hash_label(h))}</i>'


# -- the ops panel: the batch's events -------------------------------------------------------------
def _chips(key: tuple, hashes, chip=None) -> str:
    """The first CHIPS_PER_LINE chips (``chip(h)``: one), then how many more."""
    out = " ".join((chip or (lambda h: _chip(key, h)))(h) for h in hashes[:CHIPS_PER_LINE])
    if len(hashes) > CHIPS_PER_LINE:
        out += f' <span class="bvr-more">+{len(hashes) - CHIPS_PER_LINE}</span>'
    return out


def event_line(ev, i: int, lang: str) -> str:
    """One event as an ops line: vLLM's name (its class's), then what it says (hashes linked)."""
    call, eff = esc(type(ev).__name__), ""     # (the decoder yields only the three below)
    if isinstance(ev, BlockStored):
        key = (ev.medium, ev.group_idx)
        parent = (_chip(key, ev.parent_block_hash) if ev.parent_block_hash is not None
                  else f'<span class="bvr-root">{esc(t("rp_root", lang))}</span>')
        lora = " · " + t("lv_tenant_lora", lang, lora=ev.lora_name) if ev.lora_name else ""
        eff = (f'<span class="bvr-grp">{esc(group_name(key))}</span> {parent} → '
               f'{_chips(key, ev.block_hashes)} <span class="bvr-small">'
               f'{esc(t("rp_stored_tokens", lang, n=len(ev.token_ids), bs=ev.block_size) + lora)}</span>')
    elif isinstance(ev, BlockRemoved):
        key = (ev.medium, ev.group_idx)
        eff = f'<span class="bvr-grp">{esc(group_name(key))}</span> {_chips(key, ev.block_hashes)}'
    elif isinstance(ev, AllBlocksCleared):
        eff = f'<span class="bvr-small">{esc(t("rp_cleared_eff", lang))}</span>'
    return (f'<li class="bv-opl bvr-{call}" data-bv="op" data-bv-index="{i}"><span class="bv-opn">'
            f'{i + 1}</span><code class="bv-call">{call}</code> <span class="bv-eff">{eff}</span></li>')


def ops_html(step, lang: str) -> str:
    events = () if step is None else step.events
    return ops_panel([event_line(ev, i, lang) for i, ev in enumerate(events)], len(events),
                     t("rp_no_events", lang))


# -- the main panel: the forest after the batch -------------------------------------------------
def _title(h, e, lang: str) -> str:
    """A forest chip's title: the whole hash and the seq that stored it (its row shows the
    tokens; a title each would triple a step's size)."""
    return t("rp_hash_title", lang, hash=short_hex(h), seq=e.seq if e.seq is not None else "?")


def _row(key: tuple, forest: Forest, chain: list, depth: int, new: set, words, lang: str) -> str:
    g = forest.g
    chips = []
    toks: list | None = []
    for h in chain:
        e = g[h]
        cls = "bvr-h bvr-new" if (key, h) in new else "bvr-h"
        chips.append(_chip(key, h, cls, _title(h, e, lang)) + (f'<sup class="bvr-x">×{e.count}</sup>'
                                                  if e.count > 1 else ""))
        if toks is not None and len(toks) < TOKENS:
            toks = None if e.tokens is None else toks + list(e.tokens)
    first = g[chain[0]]
    orphan = ""
    if depth == 0 and (not first.chain_known or first.parent is not None):
        why = "lv_parent_unknown" if not first.chain_known else "lv_parent_gone"
        orphan = f'<span class="bvr-orphan">{esc(t(why, lang))}</span>'
    return (f'<div class="bvr-row" style="--bvr-d:{min(depth, 12)}">{orphan}{"".join(chips)}'
            f'<span class="bvr-tok">{esc(token_text(toks, words, TOKENS))}</span></div>')


def _group(key: tuple, g: dict, new: set, removed: list, words, lang: str, rows: list,
           rank: int | None = None) -> str:
    forest = Forest(g)
    parts = [f'<section class="bvr-group"><div class="bvr-gh">{esc(forest.head(key, lang, rank))}</div>']
    tenants = forest.tenants()
    for tenant, roots in tenants.items():
        if len(tenants) > 1 or tenant != (None, None):
            parts.append(f'<div class="bvr-tenant">{esc(tenant_label(tenant, lang))}</div>')
        for r in roots:
            for chain, depth in forest.walk(r):
                if rows[0] <= 0:
                    break
                rows[0] -= 1
                parts.append(_row(key, forest, chain, depth, new, words, lang))
    if removed:
        items = _chips(key, removed, lambda he: _chip(key, he[0], "bvr-h bvr-gone", _title(*he, lang)))
        parts.append(f'<div class="bvr-removed"><span class="bvr-sub">{esc(t("rp_removed_here", lang))}'
                     f'</span> {items}</div>')
    parts.append("</section>")
    return "".join(parts)


def forest_html(step, lang: str, words=None, ranks: int = 1) -> str:
    new = set(step.stored)
    removed: dict = {}
    for key, h, e in step.removed:
        removed.setdefault(key, []).append((h, e))
    rows = [ROWS]
    parts = ['<div class="bvr-forest">']
    keys = list(step.groups) + [k for k in removed if k not in step.groups]
    for key in keys:
        parts.append(_group(key, step.groups.get(key, {}), new, removed.get(key, []), words, lang,
                            rows, step.rank if ranks > 1 else None))
    if not keys:
        parts.append(f'<div class="bvr-empty">{esc(t("rp_empty", lang))}</div>')
    drawn = sum(len(g) for g in step.groups.values())
    if rows[0] <= 0:
        parts.append(f'<div class="bvr-more">{esc(t("rp_more_rows", lang, rows=ROWS))}</div>')
    if step.hidden:
        parts.append(f'<div class="bvr-more">{esc(t("rp_hidden", lang, n=step.hidden, drawn=drawn))}'
                     f'</div>')
    parts.append("</div>")
    return "".join(parts)


# -- the step's words -------------------------------------------------------------------------------
def _header(stepno: str, where: str) -> str:
    return (f'<div class="bv bv-stepline"><span class="bv-stepno">{esc(stepno)}</span>'
            f'<span class="bv-event">{esc(where)}</span></div>')


def header_html(step, n: int, ranks: int, lang: str) -> str:
    where = [t("live_where_seq", lang, n=step.seq)]
    if ranks > 1:
        where.append(t("lv_rank", lang, rank=step.rank))
    if step.t is not None:
        where.append(time.strftime("%H:%M:%S", time.gmtime(step.t)) + f".{int(step.t * 1000) % 1000:03d} UTC")
    return _header(t("rp_step", lang, k=step.index + 1, n=n), " · ".join(where))


def caption_html(step, lang: str) -> str:
    stored = len(step.stored)
    removed = len(step.removed)
    parts = []
    if any(n.kind == "restart" for n in step.notes):
        parts.append(t("rp_cap_restart", lang, seq=step.seq))
    if step.cleared:
        parts.append(t("rp_cap_cleared", lang))
    copies = sum(1 for ev in step.events if isinstance(ev, BlockRemoved)
                 for _ in ev.block_hashes) - removed - step.unknown
    counts = (("rp_cap_stored", stored), ("rp_cap_removed", removed), ("rp_cap_unknown", step.unknown),
              ("rp_cap_copies", copies))
    parts += [tn(key, n, lang, n=n) for key, n in counts if n > 0]
    if not parts:
        parts.append(t("rp_cap_nothing", lang))
    text = t("sep_clauses", lang).join(parts) + tn("rp_cap_cached", step.cached, lang, n=step.cached)
    return f'<div class="bv bv-caption">{esc(text)}</div>'


def why_html(step, lang: str) -> str:
    parts = ['<div class="bv">']
    if step is not None and step.notes:
        items = "".join(f"<li>{esc(n.text(lang)[:300])}</li>" for n in step.notes)
        parts.append(f'<div class="bvr-sub">{esc(t("rp_step_notes", lang))}</div><ul>{items}</ul>')
    items = "".join(f"<li>{esc(text)}</li>" for text in cannot_know(lang))
    parts.append(f'<div class="bvr-sub">{esc(t("lv_cannot", lang))}</div><ul>{items}</ul></div>')
    return "".join(parts)


def legend_html(lang: str) -> str:
    return (f'<div class="bv bvr-legend"><span><i class="bvr-h bvr-new">1a1eb4e3</i> '
            f'{esc(t("rp_leg_new", lang))}</span><span><i class="bvr-h bvr-gone">973aa91e</i> '
            f'{esc(t("rp_leg_gone", lang))}</span><span><sup class="bvr-x">×2</sup> '
            f'{esc(t("rp_leg_copies", lang))}</span></div>')


def _marks(step) -> str:
    """The timeline's mark of a batch: the kinds of its events (stored, removed, cleared)."""
    kinds = {type(ev) for ev in step.events}
    return "".join(c for c, cls, _, _ in MARKS if cls in kinds)


def start_record(lang: str) -> dict[str, str]:
    """Step 0, before the first batch: nothing is known."""
    return {"header": _header(t("rp_start", lang), t("rp_start_where", lang)),
            "caption": f'<div class="bv bv-caption">{esc(t("rp_cap_start", lang))}</div>',
            "why": why_html(None, lang), "ops": ops_html(None, lang),
            "blocks": (f'<div class="bvr-forest"><div class="bvr-empty">{esc(t("lv_empty", lang))}'
                       f'</div></div>')}


def recording_board(rec, *, langs, lang: str | None = None, url: bool | str = False,
                    words=None, speed: float = 1.0, max_chars: int | None = None,
                    start: int | None = None, through: int = 0) -> BoardData:
    """The steps of ``rec`` as the board's data, in ``langs`` (the first, or ``lang``, shown
    first): step 0 before the first batch, step k after batch k (``rec.steps[k - 1]``), as many
    as fit in ``max_chars`` (default MAX_BOARD_CHARS). Without ``start`` the board is those steps
    from 0 (an export: ``num_steps - 1`` batches, and the caller says when that is fewer than the
    recording's); with it, a window of the whole recording from step ``start`` (the page: the
    board asks for the next window at its edge), reaching step ``through`` whatever its size."""
    max_chars = MAX_BOARD_CHARS if max_chars is None else max_chars
    total = len(rec.steps) + 1
    lo = 0 if start is None else max(0, min(int(start), total - 1))
    pool = Pool()
    steps: dict[str, list] = {lg: [] for lg in langs}
    size = 0
    hi = lo - 1
    while hi + 1 < total and (hi < max(lo, through) or size <= max_chars):
        hi += 1
        before = len(pool.strings)
        for lg in langs:
            if hi == 0:
                panels = start_record(lg)
            else:
                s = rec.steps[hi - 1]
                panels = {"header": header_html(s, total - 1, rec.ranks, lg),
                          "caption": caption_html(s, lg), "why": why_html(s, lg),
                          "ops": ops_html(s, lg), "blocks": forest_html(s, lg, words, rec.ranks)}
            steps[lg].append({k: pool(v) for k, v in panels.items()})
        size += sum(map(len, pool.strings[before:]))
    shown = rec.steps[max(0, lo - 1):hi]                 # the batches of steps lo..hi
    labels = {lg: ([t("rp_start_label", lg)] if lo == 0 else [])
              + [t("rp_event_label", lg, seq=s.seq, n=len(s.events)) for s in shown]
              for lg in langs}
    every = total if start is not None else hi + 1      # the steps the timeline shows
    return BoardData(
        version=VERSION, num_steps=every, lo=lo, hi=hi, langs=list(langs),
        lang=langs[0] if lang is None else lang, steps=steps, frames=None, no_frames=True,
        events=labels, marks=[""] + [_marks(s) for s in rec.steps[:every - 1]],
        mark_colours={c: f"var(--bv-{name})" for c, _, name, _ in MARKS},
        mark_names={lg: {c: t(k, lg) for c, _, _, k in MARKS} for lg in langs},
        ui={lg: {k: t(UI_OVERRIDES.get(k, k), lg) for k in UI_KEYS} for lg in langs},
        legend={lg: legend_html(lg) for lg in langs}, kind_colours={}, speed=speed, url=url,
        strings=pool.strings)


REPLAY_CSS = """
/* a recording on the board: the forest is the main panel; what a recording has no data for is hidden */
.bvb-queue, .bvb-table, .bvb-reqs, .bvb-ext, .bvb-into { display: none !important; }
.bvb-grid { grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); }
.bvb-fit .bvb-blocks { flex: 1 1 0; min-height: 0; display: flex; flex-direction: column; }
.bvb-fit .bvb-blocks .bvb-body { flex: 1 1 0; min-height: 0; overflow: auto; }
.bvb-fitting .bvb-blocks .bvb-body { height: 10em; overflow: hidden; }
.bvr-forest { font-size: 1em; }
.bvr-group { border: 1px solid var(--bv-rule); border-radius: .4em; padding: .3em .5em; margin: 0 0 .5em 0; }
.bvr-gh { font-weight: 700; margin-bottom: .2em; }
.bvr-tenant { font-weight: 600; color: var(--bv-purple); margin: .35em 0 .1em 0; }
.bvr-row { margin-left: calc(var(--bvr-d) * 1.2em); padding: .08em 0 .08em .4em; line-height: 1.6;
           border-left: 1px dashed var(--bv-border); }
.bvr-h { font-style: normal; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
         font-size: .92em; display: inline-block; border: 1px solid var(--bv-green);
         background: var(--bv-green-bg-free); border-radius: .25em; padding: 0 .25em;
         margin: 0 .15em .1em 0; line-height: 1.3; cursor: default; }
.bvr-h.bvr-new { background: var(--bv-green-bg); border-width: 2px; font-weight: 700; }
.bvr-h.bvr-gone { border-color: var(--bv-red); background: var(--bv-red-bg); color: var(--bv-red);
                  text-decoration: line-through; }
.bvr-x { color: var(--bv-brown); font-weight: 700; margin-right: .25em; }
.bvr-tok { color: var(--bv-muted); font-size: .8em; margin-left: .4em; }
.bvr-orphan { font-size: .72em; background: var(--bv-amber-pale); color: var(--bv-olive); border-radius: .8em;
              padding: 0 .5em; margin-right: .4em; }
.bvr-removed { margin-top: .3em; }
.bvr-sub { color: var(--bv-muted); font-size: .85em; font-weight: 600; }
.bvr-more, .bvr-empty { color: var(--bv-muted); font-style: italic; font-size: .85em; margin: .3em 0; }
.bvr-grp { color: var(--bv-muted); font-size: .8em; margin-right: .3em; }
.bvr-root { color: var(--bv-muted); font-style: italic; }
.bvr-small { color: var(--bv-muted); font-size: .8em; }
.bv-opl.bvr-BlockRemoved .bv-call { color: var(--bv-red); }
.bv-opl.bvr-BlockStored .bv-call { color: var(--bv-green); }
.bv-opl.bvr-AllBlocksCleared .bv-call { color: var(--bv-blue); }
.bv-opl .bvr-h { font-size: .85em; }
.bvb-linking .bvr-h.bv-lit { outline: .18em solid var(--bv-ink); outline-offset: .05em; opacity: 1; }
.bvb-why ul { margin: .2em 0 .5em 0; padding-left: 1.2em; font-size: .9em; }
.bvr-legend { display: flex; gap: 1.2em; flex-wrap: wrap; }
"""


def replay_css() -> str:
    """The board's stylesheet, then the recording's (the same component, other panels)."""
    return board_css() + "\n" + REPLAY_CSS
