"""A hybrid model's KV-cache groups on the board (config.kv_cache_groups): their names, which group
a block serves at a step, a group's badge and the groups' legend. Pure. A run with one group
draws none of this (every function here is called only when ``labels.hybrid``)."""
from __future__ import annotations

from collections.abc import Sequence

from blockviz.core.hashing import split_block_key
from blockviz.i18n import t
from blockviz.render.theme import esc


def group_name(spec, lang: str, short: bool = False) -> str:
    """"sliding window 8" ("window 8" ``short``), "chunked local 8", "full": its attention type."""
    return t(("grp_short_" if short else "grp_") + spec.type, lang, n=spec.size)


def group_title(g: int, spec, lang: str) -> str:
    """"KV-cache group 1: sliding window 8"."""
    return t("grp_title", lang, g=g, name=group_name(spec, lang))


def badge_html(g: int, spec, lang: str, *, short: bool = False, cls: str = "bv-grp") -> str:
    """The group's badge (``g1 sliding window 8``), as every panel names a group."""
    return (f'<span class="{cls}" data-bv-group="{g}" title="{esc(group_title(g, spec, lang))}">'
            f'<b>{esc(t("grp_tag", lang, g=g))}</b> <span class="bv-grp-n">'
            f'{esc(group_name(spec, lang, short))}</span></span>')


def block_groups(step) -> dict[int, int]:
    """Block id -> the KV-cache group it serves at ``step``: the group of the table that holds it
    (requests not finished), else the group its cached hash is keyed by. A free block with no hash
    serves no group; the null block (0) serves every group and is left out."""
    out: dict[int, int] = {}
    for b, h in enumerate(step.block_hash):
        if b and h is not None:
            g = split_block_key(h)[1]
            if g is not None:
                out[b] = g
    for _, g, b in held_blocks(step):
        out[b] = g
    return out


def held_blocks(step):
    """(request id, group, block) for each block a request's table holds at ``step`` (finished
    requests hold none; one table, group 0, without kv_cache_groups)."""
    for r in step.requests.values():
        if r.status != "finished":
            bt = r.block_tables
            for g, table in enumerate((r.block_ids,) if bt is None else bt.tables):
                yield from ((r.request_id, g, b) for b in table if b and step.ref_cnt[b] > 0)


def legend_html(groups: Sequence, lang: str) -> str:
    """The groups' legend: each group's badge and name, the null entry, the hash key's group."""
    items = "".join(f"<span>{_run_badge(lo, hi, groups[lo], lang)}</span>" for lo, hi in _runs(groups))
    null = (f'<span title="{esc(t("grp_null_entry", lang))}"><span class="bv-b bv-b-null">0</span>'
            f'{esc(t("grp_null_short", lang))}</span>')
    key = f'<span title="{esc(t("grp_key_title", lang))}">{esc(t("grp_key", lang))}</span>'
    return (f'<div class="bv-legend bv-grp-legend" data-bv="groups-legend" '
            f'title="{esc(t("grp_legend", lang))}">{items}{null}{key}</div>')


def _runs(groups: Sequence) -> list[tuple[int, int]]:
    """(first, last) of each run of consecutive groups of one spec (Gemma's g0–g4, five windows)."""
    out: list[tuple[int, int]] = []
    for g, spec in enumerate(groups):
        if out and groups[out[-1][1]] == spec:
            out[-1] = (out[-1][0], g)
        else:
            out.append((g, g))
    return out


def _run_badge(lo: int, hi: int, spec, lang: str) -> str:
    if lo == hi:
        return badge_html(lo, spec, lang)
    tag = f'{t("grp_tag", lang, g=lo)}–{hi}'
    return (f'<span class="bv-grp" data-bv-group="{lo}-{hi}" title="{esc(group_title(lo, spec, lang))} …">'
            f'<b>{esc(tag)}</b> {esc(group_name(spec, lang))}</span>')
