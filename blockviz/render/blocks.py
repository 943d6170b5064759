"""The GPU blocks panel: one card per block (a big pool is drawn by the board's dense view).

``state`` is anything with ``ref_cnt``, ``block_hash``, ``block_tokens`` and ``free_queue``:
a Step (after one event, or after one op inside it: blockviz.sim.step).
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from blockviz.i18n import t
from blockviz.render.theme import BLOCK_KINDS, BLOCK_LEGEND, BLOCK_MARKS, GREY, block_kind, esc
from blockviz.teach.labels import HashLabels, token_text
from blockviz.teach.selfcheck import next_marks

TOKENS_ON_CARD = 8


def legend_item(key: str, cls: str, lang: str) -> str:
    """A legend's swatch and words; the null block's in two words, the whole explanation in its
    title (the board's legend is one line)."""
    if key == "null_block_long":
        return (f'<span title="{esc(t(key, lang))}"><i class="bv-sw {cls}"></i>'
                f'{esc(t("null_block", lang))}</span>')
    return f'<span><i class="bv-sw {cls}"></i>{esc(t(key, lang))}</span>'


def legend_html(lang: str) -> str:
    """The cards' colours and marks."""
    items = "".join(legend_item(key, cls, lang) for key, cls in BLOCK_LEGEND)
    return f'<div class="bv-legend">{items}</div>'


def _slots(n_tokens: int, block_size: int) -> str:
    if not 0 < block_size <= 32:
        return ""
    return ('<div class="bv-slots">' + '<i class="bv-on"></i>' * min(n_tokens, block_size)
            + "<i></i>" * max(0, block_size - n_tokens) + "</div>")


def card_html(i: int, state, *, labels: HashLabels, vocab, block_size: int, lang: str,
              changed: bool, victim: bool, evict_next: bool = False, prev_ref: int | None = None,
              held_by: tuple[str, ...] = (), group: str = "") -> str:
    """One block's card; ``group``: a hybrid model's badge of the KV-cache group it serves."""
    ref, h, toks = state.ref_cnt[i], state.block_hash[i], state.block_tokens[i]
    classes = ["bv-card", *BLOCK_KINDS[block_kind(i, ref, h)].classes]
    if i == 0:
        body = (f'<div class="bv-top"><span class="bv-id" data-bv="block-id">0</span></div>'
                f'<div class="bv-ref">{esc(t("null_block", lang))}</div>')
        return f'<div class="{" ".join(classes)}" data-block="0">{body}</div>'
    classes += [c for c, on in (("bv-changed", changed), ("bv-victim", victim), ("bv-evict-next", evict_next))
                if on]
    hash_label = f'<span class="bv-hash">{esc(labels(h))}</span>' if h is not None else ""
    tags = "".join(f'<span class="bv-{c}-tag">{esc(t(f"next_{c}_short", lang))}</span>'
                   for c, on in (("victim", victim), ("evict", evict_next)) if on)
    tag = f'<span class="bv-tags">{tags}</span>' if tags else ""
    words = esc(token_text(toks, vocab, TOKENS_ON_CARD)) if toks else "&nbsp;"
    # the count, and what it was before this step (``1→0``): one unit that never wraps
    if prev_ref is not None and prev_ref != ref:
        count = f'<span class="bv-was">{prev_ref}</span>→<b class="bv-now">{ref}</b>'
    else:
        count = f"<b>{ref}</b>"
    held = (f'<span class="bv-held" title="{esc(t("held_by", lang, ids=", ".join(held_by)))}">'
            f'{esc(" ".join(held_by))}</span>' if held_by else "")
    body = (f'{tag}{group}<div class="bv-top"><span class="bv-id" data-bv="block-id">{i}</span>{hash_label}'
            f'</div><div class="bv-ref"><span class="bv-refk">ref_cnt</span> '
            f'<span class="bv-refn" data-bv="ref">{count}</span>{held}</div>'
            f'<div class="bv-tok" title="{esc(token_text(toks, vocab))}">{words}</div>'
            f'{_slots(len(toks), block_size)}')
    return f'<div class="{" ".join(classes)}" data-block="{i}">{body}</div>'


def blocks_html(state, *, labels: HashLabels, vocab=None, block_size: int = 0, lang: str = "en",
                changed: Collection[int] = (), prev_ref: Sequence[int] | None = None,
                held_by: Mapping[int, tuple[str, ...]] | None = None,
                groups: Mapping[int, str] | None = None) -> str:
    """Cards for every block (small pools): id, ref_cnt (``1→2`` when ``prev_ref`` differs), the
    requests holding it, hash label, tokens, slot fill; the next allocation's block and the block
    whose cached prefix goes next are marked apart. ``groups``: block id -> the badge of the
    KV-cache group it serves (a hybrid model)."""
    victim, evict = next_marks(state)
    changed = frozenset(changed)
    held_by = held_by or {}
    groups = groups or {}
    cards = "".join(card_html(i, state, labels=labels, vocab=vocab, block_size=block_size, lang=lang,
                              changed=i in changed, victim=i == victim, evict_next=i == evict,
                              prev_ref=None if prev_ref is None else prev_ref[i],
                              held_by=held_by.get(i, ()), group=groups.get(i, ""))
                    for i in range(len(state.ref_cnt)))
    width = f"max-width:{len(state.ref_cnt) * 12}em"   # a few blocks: cards stay card-sized
    return f'<div class="bv bv-panel"><div class="bv-blocks" role="list" style="{width}">{cards}</div></div>'


def heatmap_legend_html(lang: str, n: int, extra: str = "") -> str:
    """The dense view's legend (``extra``: more of it, a hybrid model's groups)."""
    sw = "".join(f'<span><i class="bv-sw" style="background:{s.cell};border-color:{GREY}">'
                 f'</i>{esc(t(s.key, lang))}</span>' for s in BLOCK_KINDS.values())
    sw += "".join(legend_item(k, cls, lang) for k, cls in BLOCK_MARKS)
    return (f'<div class="bv"><div class="bv-small">{esc(t("heatmap_note", lang, n=f"{n:,}"))}</div>'
            f'<div class="bv-legend">{sw}</div>{extra}</div>')
