"""Requests: running, waiting (preempted ones first in line), finished — each with its block table
(local hits green, external hits violet, newly allocated blue; blocks taken in this step outlined)
and its computed vs pending tokens."""
from __future__ import annotations

from collections.abc import Collection

from blockviz.core.request import vllm_status
from blockviz.i18n import t
from blockviz.render import groups as rgroups
from blockviz.render.blocks import legend_item
from blockviz.render.split import segments_bar_html, summary_html
from blockviz.render.theme import esc

MAX_TABLE_CELLS = 40
MAX_REQUESTS = 40


def _table(r, fresh: Collection[int], lang: str, max_cells: int = MAX_TABLE_CELLS,
           ids: tuple[int, ...] | None = None) -> str:
    """The block table's cells (``ids``: one group's table, where a hybrid model's null entries
    are block 0 drawn as the null block)."""
    ids = r.block_ids if ids is None else ids
    if not ids:
        return f'<span class="bv-muted">{esc(t("no_blocks", lang))}</span>'
    cells = []
    for j, b in enumerate(ids[:max_cells]):
        if b == 0:
            cells.append(f'<span class="bv-b bv-b-null" title="{esc(t("grp_null_entry", lang))}" '
                         f'data-block="0">0</span>')
            continue
        if j < r.local_hit_blocks:
            cls, why = "bv-b bv-local", t("local_hit", lang)
        elif j < r.local_hit_blocks + r.external_hit_blocks:
            cls, why = "bv-b bv-ext", t("external_hit", lang)
        else:
            cls, why = "bv-b", t("new_block", lang)
        if b in fresh:
            cls += " bv-changed"
        cells.append(f'<span class="{cls}" title="{esc(why)}" data-block="{b}">{b}</span>')
    if len(ids) > max_cells:
        more = t("more_items", lang, n=len(ids) - max_cells)
        cells.append(f'<span class="bv-more">… {esc(more)}</span>')
    return "".join(cells)


def _group_tables(r, fresh: Collection[int], lang: str, max_cells: int, groups) -> str:
    """A hybrid model's request: one row of block ids per KV-cache group, each led by its group's
    badge (a finished request holds none: one muted line)."""
    bt = r.block_tables
    if bt is None or not any(bt.tables):
        return f'<div class="bv-bt">{_table(r, fresh, lang, max_cells, ())}</div>'
    return "".join(f'<div class="bv-bt bv-gt" data-bv-group-table="{g}">'
                   f'{rgroups.badge_html(g, spec, lang, cls="bv-grp bv-grp-row")}'
                   f'{_table(r, fresh, lang, max_cells, bt.tables[g])}</div>'
                   for g, spec in enumerate(groups))


def _split_line(r, lang: str) -> str:
    """Why its lookup hit or missed (sim.explain): the latest split as a bar, hovering a segment
    lights the blocks it concerns, its title says the category's sentence (and the step an
    evicted block left), then the counts."""
    split = r.resumed_split or r.prompt_split
    if split is None:
        return ""
    key = "split_resumed_title" if split is r.resumed_split else "split_title"
    return (f'<div class="bv-small bv-split-line" data-bv="split-line">'
            f'{segments_bar_html(split, lang)}'
            f'{esc(t(key, lang))}: {summary_html(split, lang)}</div>')


def request_row(r, *, lang: str, fresh: Collection[int] = (), changed: bool = False,
                max_cells: int = MAX_TABLE_CELLS, groups=None) -> str:
    """A request's row; ``groups``: a hybrid model's KV-cache groups (a table row per group)."""
    n, done = r.num_tokens, r.num_computed_tokens
    pct = 100.0 * done / n if n else 0.0
    if r.status == "finished":  # nothing is pending for a request that is done
        tokens = t("finished_tokens", lang, n=n, p=r.num_prompt_tokens, o=n - r.num_prompt_tokens)
    else:
        tokens = t("computed_of", lang, c=done, n=n, p=n - done)
    hits = ((r.local_hit_blocks, "bv-local", "local_hit"), (r.external_hit_blocks, "bv-ext", "external_hit"))
    extra = [f'<span class="bv-b {cls}">{n}</span> {esc(t(key, lang))}' for n, cls, key in hits if n]
    if r.num_preemptions:
        extra.append(esc(t("preempted_times", lang, n=r.num_preemptions)))
    extra += [f"{name} {esc(v)}" for name, v in (("LoRA", r.lora), ("cache_salt", r.cache_salt)) if v]
    extras = f'<div class="bv-small">{" · ".join(extra)}</div>' if extra else ""
    extras += _split_line(r, lang)
    cls = "bv-req bv-req-changed" if changed else "bv-req"
    tables = (_group_tables(r, fresh, lang, max_cells, groups) if groups
              else f'<div class="bv-bt">{_table(r, fresh, lang, max_cells)}</div>')
    return (f'<div class="{cls}" data-request="{esc(r.request_id)}" '
            f'data-bv-request="{esc(r.request_id)}" '
            f'data-bv-status="{esc(vllm_status(r.status, r.finish_reason).lower())}">'
            f'<div><div class="bv-rid">{esc(r.request_id)}</div>'
            f'<span class="bv-st bv-st-{esc(r.status)}">{esc(t("status_" + r.status, lang))}</span></div>'
            f'<div>{tables}'
            f'<div class="bv-bar" title="{esc(tokens)}"><i style="width:{pct:.1f}%"></i></div>'
            f'<div class="bv-small">{esc(tokens)}</div>{extras}</div></div>')


def requests_html(snapshot, *, lang: str = "en", fresh: Collection[int] = (),
                  changed: Collection[str] = (), max_requests: int = MAX_REQUESTS,
                  max_cells: int = MAX_TABLE_CELLS, groups=None) -> str:
    """Every request's row and the legend; ``groups`` (two or more KV-cache groups): each request's
    table per group (the board's legend names the groups)."""
    every = snapshot.requests
    order = dict.fromkeys([*snapshot.running, *snapshot.waiting, *every])   # running, waiting, the rest
    reqs = [every[rid] for rid in order if rid in every]
    if not reqs:
        return f'<div class="bv bv-panel"><div class="bv-muted">{esc(t("no_requests", lang))}</div></div>'
    changed = frozenset(changed)
    rows = [request_row(r, lang=lang, fresh=fresh, changed=r.request_id in changed, max_cells=max_cells,
                        groups=groups)
            for r in reqs[:max_requests]]
    if len(reqs) > max_requests:
        rows.append(f'<div class="bv-more">… {esc(t("more_items", lang, n=len(reqs) - max_requests))}</div>')
    legend = "".join(legend_item(key, cls, lang) for key, cls in
                     (("local_hit", "bv-cached"), ("external_hit", "bv-ext"), ("new_block", "bv-new")))
    return f'<div class="bv bv-panel">{"".join(rows)}<div class="bv-legend">{legend}</div></div>'
