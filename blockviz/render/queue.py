"""The free queue as a linked list, head (taken first) on the left, tail (evicted last) on the right.

Cells share the block colours (green = still has a hash: a hit can take it back out). Blocks that
went to the head or the tail in this step (the step's ``free_head`` / ``free_tail`` ops) carry a
marker; the head cell, the next block to be handed out, is underlined red.
"""
from __future__ import annotations

from collections.abc import Collection, Sequence

from blockviz.i18n import t
from blockviz.render.blocks import next_marks
from blockviz.render.theme import esc
from blockviz.teach.labels import HashLabels

HEAD_CELLS = 48   # cells drawn from the head of a long queue ...
TAIL_CELLS = 12   # ... and from its tail, with a count of the rest between them
ONE_LINE = 32     # a queue of up to this many cells never wraps


def _cell(b: int, state, labels: HashLabels, to_head: Collection[int], to_tail: Collection[int],
          lang: str, victim: bool, evict: bool = False) -> str:
    h = state.block_hash[b]
    cls = ["bv-q"] + [c for c, on in (("bv-cached", h is not None), ("bv-victim", victim),
                                      ("bv-evict-next", evict)) if on]
    end = "head" if b in to_head else "tail" if b in to_tail else None    # where it went this step
    mark = ""
    if end:
        cls.append(f"bv-to-{end}")
        mark = f'<span class="bv-qm">{esc(t(f"to_{end}", lang))}</span>'
    label = esc(labels(h)) if h is not None else ""
    return (f'<span class="{" ".join(cls)}" data-block="{b}"><span class="bv-qh">{label}</span>'
            f'<span class="bv-qid">{b}</span>{mark}</span>')


def queue_html(state, *, labels: HashLabels, lang: str = "en", to_head: Collection[int] = (),
               to_tail: Collection[int] = (), head_cells: int = HEAD_CELLS,
               tail_cells: int = TAIL_CELLS) -> str:
    q = state.free_queue
    arrow = '<span class="bv-arrow">→</span>'
    head = f'<span class="bv-end">{esc(t("head", lang))}</span>'
    tail = f'<span class="bv-end">{esc(t("tail", lang))}</span>'

    _, evict = next_marks(state)

    def cells(ids, first_is_head: bool) -> list[str]:
        return [_cell(b, state, labels, to_head, to_tail, lang, first_is_head and j == 0, b == evict)
                for j, b in enumerate(ids)]
    if not q:
        shown: Sequence[int] = ()
        items = [f'<span class="bv-more">{esc(t("empty", lang))}</span>']
    elif len(q) <= head_cells + tail_cells:
        shown = q
        items = cells(q, True)
    else:
        first, last = q[:head_cells], q[-tail_cells:]
        shown = first + last
        more = f'<span class="bv-more">… {esc(t("more_items", lang, n=f"{len(q) - len(shown):,}"))} …</span>'
        items = cells(first, True) + [more] + cells(last, False)
    # the words head/tail never wrap away from the cells next to them
    if len(items) == 1:
        items = [f'<span class="bv-keep">{head}{arrow}{items[0]}{arrow}{tail}</span>']
    else:
        items[0] = f'<span class="bv-keep">{head}{arrow}{items[0]}</span>'
        items[-1] = f'<span class="bv-keep">{items[-1]}{arrow}{tail}</span>'
    order = " ".join(str(b) for b in shown)
    # a queue a lesson's pool can hold whole stays on one line, its cells sized for the longest
    # it can get (the pool's blocks), so they keep their size from step to step
    most = min(len(state.ref_cnt) - 1, head_cells + tail_cells + 2)   # (+2: "… n more …")
    line = (f' bv-queue-line" style="--bvq-n:{max(1, most)}' if most <= ONE_LINE else "")
    return (f'<div class="bv bv-panel"><div class="bv-queue{line}" data-queue="{order}" '
            f'aria-label="{esc(t("free_queue", lang))}: {order}">'
            + arrow.join(items) + '</div></div>')
