"""Event markers: which kinds of thing a step did (allocate / hit / evict / free / ...), drawn as a
strip of small coloured bars under the timeline slider and as marks in the step list."""
from __future__ import annotations

from collections.abc import Sequence

from blockviz.i18n import t
from blockviz.render.theme import MARKER_COLOURS, esc

KINDS = ("allocate", "hit", "external", "evict", "free", "preempt")
MAX_COLUMNS = 240   # longer timelines: one strip column per range of steps


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


def kinds_markdown(kinds: frozenset[str]) -> str:
    """Coloured squares for a Streamlit label (markdown colour directives, no HTML)."""
    md_colour = {"allocate": "blue", "hit": "green", "external": "violet", "evict": "red",
                 "free": "gray", "preempt": "orange"}
    return "".join(f":{md_colour[k]}[■]" for k in KINDS if k in kinds)


def strip_html(kinds_per_step: Sequence[frozenset[str]], current: int, lang: str = "en",
               max_columns: int = MAX_COLUMNS) -> str:
    """Markers placed where the slider puts each step (step i at i / last of the width), so a
    marker sits under its slider position; long timelines are binned."""
    n = len(kinds_per_step)
    if n < 2:
        return ""
    last = n - 1
    per = max(1, -(-n // max_columns))
    width = 100.0 / max(1, -(-n // per))
    cols = []
    for start in range(0, n, per):
        stop = min(n, start + per)
        kinds = frozenset().union(*kinds_per_step[start:stop])
        cur = start <= current < stop
        if not kinds and not cur:
            continue
        centre = 100.0 * ((start + stop - 1) / 2) / last
        bars = "".join(f'<i style="background:{MARKER_COLOURS[k]}"></i>' for k in KINDS if k in kinds)
        title = f"{start}" if per == 1 else f"{start}–{stop - 1}"
        names = ", ".join(t("mk_" + k, lang) for k in KINDS if k in kinds)
        cls = ' class="bv-cur"' if cur else ""
        cols.append(f'<div{cls} style="left:{centre:.3f}%;width:min({width:.3f}%,2.4em)" '
                    f'data-step="{start}" title="{esc(title)}{": " + esc(names) if names else ""}">'
                    f'{bars}</div>')
    return f'<div class="bv"><div class="bv-strip" aria-hidden="true">{"".join(cols)}</div></div>'


def markers_legend_html(lang: str) -> str:
    spans = "".join(f'<span><i class="bv-mk" style="background:{MARKER_COLOURS[k]}"></i>'
                    f'{esc(t("mk_" + k, lang))}</span>' for k in KINDS)
    return f'<div class="bv"><div class="bv-legend">{spans}</div></div>'
