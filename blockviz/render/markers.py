"""Event markers: which kinds of thing a step did (allocate / hit / evict / free / ...), drawn by the
board as marks on its timeline, and their legend."""
from __future__ import annotations

from collections.abc import Sequence

from blockviz.i18n import t
from blockviz.render.theme import MARKER_COLOURS, esc

KINDS = ("allocate", "hit", "external", "evict", "free", "preempt")


# op kind -> the mark it sets (a touch or a free that names no block sets none)
OP_KINDS = {"popleft": "allocate", "touch": "hit", "load": "external", "evict": "evict",
            "free": "free", "preempt": "preempt"}


def step_kinds(ops: Sequence) -> frozenset[str]:
    return frozenset(OP_KINDS[op.kind] for op in ops if op.kind in OP_KINDS
                     and (op.kind not in ("touch", "free") or op.block_ids))


def timeline_kinds(timeline) -> tuple[frozenset[str], ...]:
    """Every step's marker kinds (only the ops that make a marker are decoded)."""
    return tuple(step_kinds(timeline.step_ops(i, OP_KINDS)) for i in range(len(timeline)))


def markers_legend_html(lang: str) -> str:
    spans = "".join(f'<span><i class="bv-mk" style="background:{MARKER_COLOURS[k]}"></i>'
                    f'{esc(t("mk_" + k, lang))}</span>' for k in KINDS)
    return f'<div class="bv"><div class="bv-legend">{spans}</div></div>'
