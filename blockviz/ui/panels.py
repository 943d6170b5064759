"""What the player draws below the board — the metrics chart, a block's K/V, the export page —
built by the pure functions in ``blockviz.render`` and cached by ``blockviz.ui.cache``."""
from __future__ import annotations

import plotly.graph_objects as go

from blockviz.i18n import LANGS
from blockviz.render.metrics import metrics_figure, vllm_metrics_html
from blockviz.render.payload import payload_caption_html, payload_figure
from blockviz.ui.cache import frozen, memo
from blockviz.ui.data import PlayerRun


def metrics_chart(index: int, lang: str, run: PlayerRun) -> go.Figure:
    return memo(run, "metrics", (index, lang), lambda: frozen(metrics_figure(run.series, index, lang)))


def vllm_metrics(index: int, lang: str, run: PlayerRun) -> str:
    """vLLM's metrics after step ``index`` (render/metrics.py's table and sentence)."""
    return memo(run, "vllm_metrics", (index, lang),
                lambda: vllm_metrics_html(run.timeline.step(index), run.timeline.block_size, lang))


def payload_chart(block: int, index: int, layer: int, head: int, kv: int, lang: str, run: PlayerRun):
    """(figure, caption HTML) of a block's K or V at a step; None when the block holds none."""
    return memo(run, "payload", (block, index, layer, head, kv, lang),
                lambda: _payload(run, block, index, layer, head, kv, lang))


def _payload(run: PlayerRun, block: int, index: int, layer: int, head: int, kv: int, lang: str):
    summary = run.timeline.payload(block, index)
    if summary is None:
        return None
    tokens = run.timeline.step(index).block_tokens[block]
    fig = payload_figure(summary, layer=layer, head=head, kv=kv, tokens=tokens,
                         vocab=run.timeline.vocab, lang=lang)
    return frozen(fig), payload_caption_html(block, summary, layer=layer, head=head, kv=kv, lang=lang)


def export_doc(run: PlayerRun, index: int, lang: str) -> str:
    """The run as one offline HTML page (the board, its data inlined), opening at ``index``."""
    from blockviz.export import export_html
    titles = {lg: run.scenario.title.get(lg) for lg in LANGS}
    return export_html(run.timeline, title=titles[lang], lang=lang, start=index, labels=run.labels,
                       titles=titles, file=f"{run.scenario.id}.yaml" if run.scenario.id else "")
