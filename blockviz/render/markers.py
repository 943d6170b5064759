"""Event markers: which kinds of thing a step did (allocate / hit / evict / free / ...), drawn by the
board as marks on its timeline, and their legend."""
from __future__ import annotations

from collections.abc import Sequence

from blockviz.i18n import t
from blockviz.render.theme import MARKER_COLOURS, esc

KINDS = ("allocate", "hit", "external", "evict", "free", "preempt")


def step_kinds(ops: Sequence) -> frozenset[str]:
    kinds = set()
    for op in ops:
        k = op.kind
        if k == "popleft":
            kinds.add("allocate")
        elif k == "touch" and op.block_ids:
            kinds.add("hit")
        elif k == "load":
            kinds.add("external")
        elif k == "evict":
            kinds.add("evict")
        elif k == "free" and op.block_ids:
            kinds.add("free")
        elif k == "preempt":
            kinds.add("preempt")
    return frozenset(kinds)


def markers_legend_html(lang: str) -> str:
    spans = "".join(f'<span><i class="bv-mk" style="background:{MARKER_COLOURS[k]}"></i>'
                    f'{esc(t("mk_" + k, lang))}</span>' for k in KINDS)
    return f'<div class="bv"><div class="bv-legend">{spans}</div></div>'
