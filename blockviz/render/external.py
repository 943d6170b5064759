"""The external KV tier — vLLM 0.33's OffloadingConnector with its CPU offloading manager, keyed by
vLLM's block hashes (not LMCache's token hashes): the chunks it holds, the next to be evicted on
the left, and (from the timeline's TierView) the load and store jobs in flight and the requests
waiting in WAITING_FOR_REMOTE_KVS."""
from __future__ import annotations

from collections.abc import Collection

from blockviz.i18n import t
from blockviz.render.theme import esc
from blockviz.teach.labels import HashLabels, token_text


def external_html(external, *, labels: HashLabels, vocab=None, lang: str = "en",
                  on_gpu: Collection[bytes] = (), max_cells: int = 80, tier=None) -> str:
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
            f'<div class="bv-queue">{body}</div>{_in_flight(tier, lang)}</div>')


def _in_flight(tier, lang: str) -> str:
    """The jobs the tier has in flight and the requests waiting for their KV (nothing if none)."""
    if tier is None or not (tier.jobs_in_flight or tier.waiting_for_remote_kvs):
        return ""
    jobs = " · ".join(t("ext_job", lang, kind=t("ext_job_" + kind, lang), job=job, req=req or "—")
                      for job, kind, req in tier.jobs_in_flight)
    parts = []
    if jobs:
        parts.append(f'{esc(t("ext_jobs", lang))}: {esc(jobs)}')
    if tier.waiting_for_remote_kvs:
        parts.append(esc(t("ext_waiting", lang, ids=", ".join(tier.waiting_for_remote_kvs))))
    return f'<div class="bv-small" data-bv="tier-jobs">{"<br>".join(parts)}</div>'
