"""The external KV tier (an LMCache-like connector): the blocks it holds, keyed by hash, least
recently used first (the next one it drops is on the left)."""
from __future__ import annotations

from collections.abc import Collection

from blockviz.i18n import t
from blockviz.render.theme import esc
from blockviz.teach.labels import HashLabels, token_text


def external_html(external, *, labels: HashLabels, vocab=None, lang: str = "en",
                  on_gpu: Collection[bytes] = (), max_cells: int = 80) -> str:
    if external is None:
        return ""
    on_gpu = frozenset(on_gpu)
    if not external:
        body = f'<span class="bv-more">{esc(t("empty", lang))}</span>'
    else:
        cells = []
        for h, toks in external[:max_cells]:
            also = " ✓GPU" if h in on_gpu else ""
            cells.append(f'<span class="bv-ext-cell" title="{esc(token_text(toks, vocab, 16))}">'
                         f'{esc(labels(h))}<span class="bv-small">{also}</span></span>')
        if len(external) > max_cells:
            more = t("more_items", lang, n=len(external) - max_cells)
            cells.append(f'<span class="bv-more">… {esc(more)}</span>')
        body = '<span class="bv-arrow">·</span>'.join(cells)
    return (f'<div class="bv bv-panel"><div class="bv-small">{esc(t("ext_lru", lang))}</div>'
            f'<div class="bv-queue">{body}</div></div>')
