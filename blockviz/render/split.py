"""A prompt split drawn (``blockviz.sim.explain``): one horizontal bar, a segment per category in
token order, its colour the category's (``theme.SPLIT_COLOUR``), each segment titled with its
count and sentence — the request panel's bar and the capacity page's bars per pool size. Pure
HTML; the segments carry ``data-cat`` (and, for a request's, ``data-start``/``data-end`` token
positions, ``data-split-block`` the blocks they concern, ``data-step`` the step that evicted
them) so the board lights those blocks when a segment is hovered."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from blockviz.i18n import t
from blockviz.render.theme import SPLIT_COLOUR, esc
from blockviz.sim.explain import KEYS
from blockviz.teach.explain import TOKEN_ORDER, segment_sentence


def _segment(cat: str, share: float, title: str, attrs: str = "") -> str:
    return (f'<span class="bv-split-seg" data-cat="{cat}"{attrs} title="{esc(title)}" '
            f'style="width:{100 * share:.3f}%;background:var(--bv-{SPLIT_COLOUR[cat]})"></span>')


def counts_bar_html(counts: Mapping[str, int], lang: str, total: int | None = None) -> str:
    """A bar of category counts (e.g. a pool size's split of a trace's tokens)."""
    total = total if total is not None else sum(counts.values())
    segs = "".join(_segment(cat, counts[cat] / total,
                            f"{t(f'xc_{cat}', lang)}: {counts[cat]:,} ({100 * counts[cat] / total:.1f}%)")
                   for cat in TOKEN_ORDER if counts.get(cat) and total)
    return f'<div class="bv-split" data-bv="split">{segs}</div>'


def _key(cat: str, words: str) -> str:
    return (f'<span class="bv-split-key" data-cat="{cat}"><i style="background:'
            f'var(--bv-{SPLIT_COLOUR[cat]})"></i>{esc(words)}</span>')


def legend_html(cats: Sequence[str], lang: str) -> str:
    return "".join(_key(c, t(f"xc_{c}", lang)) for c in cats)


def summary_html(split, lang: str) -> str:
    """A request's split in words under its bar, each count behind its colour (the bar's key):
    "4 hit · 4 last-token rule", a swatch before each."""
    counts = dict(zip(KEYS, split.counts, strict=True))
    return "".join(_key(cat, f"{counts[cat]} {t(f'xc_{cat}', lang)}") for cat in TOKEN_ORDER
                   if counts[cat])


def segments_bar_html(split, lang: str) -> str:
    """A request's split (``sim.explain.Split``) in token order: one segment per detail segment,
    titled with its own sentence, carrying its token range and, where it has them, the
    block ids it concerns (``data-split-block``) and the step that evicted it (``data-step``)."""
    n = max(1, split.num_tokens)
    out = []
    for start, end, cat, detail in split.segments:
        d = detail or {}
        blocks = d.get("block_ids") or ([d["block_id"]] if "block_id" in d else
                                        [d["cached_in_block"]] if "cached_in_block" in d else [])
        attrs = f' data-start="{start}" data-end="{end}"'
        if blocks:
            attrs += f' data-split-block="{" ".join(map(str, blocks))}"'
        if "evicted_at" in d:
            attrs += f' data-step="{d["evicted_at"]["event"]}"'
        title = f"{t(f'xc_{cat}', lang)} {start}–{end}: {segment_sentence((start, end, cat, detail), lang)}"
        out.append(_segment(cat, (end - start) / n, title, attrs))
    return f'<div class="bv-split" data-bv="split">{"".join(out)}</div>'
