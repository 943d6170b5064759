"""Metrics over the timeline: pool usage, prefix-cache hit rates (local and external separately,
cumulative since the start) and evictions, with the current step marked.

The hit rate is the ratio of vLLM's counters ``vllm:prefix_cache_hits / vllm:prefix_cache_queries``
(requests at their first admission; vLLM's log line shows the same ratio over its last 1,000
requests only). The re-lookups of resumed (preempted) requests, which vLLM records apart
(``preempted_*``) and exports nowhere, are drawn beside it, as their own line, never inside it."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go

from blockviz.i18n import t
from blockviz.render.theme import BLUE, GREEN, INK, PAPER, PURPLE, RED, esc


@dataclass(frozen=True)
class Series:
    usage: tuple[float, ...]          # percent
    hit_rate: tuple[float | None, ...]
    ext_hit_rate: tuple[float | None, ...]
    evictions: tuple[int, ...]
    has_external: bool
    resumed_hit_rate: tuple[float | None, ...] = ()   # preempted_hits / preempted_queries

    def __len__(self) -> int:
        return len(self.usage)


def _rate(hits: int, queries: int) -> float | None:
    return 100.0 * hits / queries if queries else None


def metrics_series(stats: Sequence, has_external: bool = False) -> Series:
    """From ``timeline.step_stats(i)`` for every step (cheap: no snapshots)."""
    resumed = tuple(_rate(s.preempted_hits, s.preempted_queries) for s in stats)
    return Series(tuple(round(100.0 * s.usage, 2) for s in stats),
                  tuple(_rate(s.hits, s.queries) for s in stats),
                  tuple(_rate(s.external_hits, s.external_queries) for s in stats),
                  tuple(s.evictions for s in stats), has_external,
                  resumed if any(r is not None for r in resumed) else ())


def metrics_figure(series: Series, current: int, lang: str = "en", height: int = 260) -> go.Figure:
    x = list(range(len(series)))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=list(series.usage), name=t("usage", lang) + " %",
                             line=dict(color=BLUE, width=2.5), line_shape="hv"))
    fig.add_trace(go.Scatter(x=x, y=list(series.hit_rate), name=t("hit_rate_vllm", lang) + " %",
                             line=dict(color=GREEN, width=2.5), connectgaps=False))
    if series.resumed_hit_rate:
        fig.add_trace(go.Scatter(x=x, y=list(series.resumed_hit_rate),
                                 name=t("resumed_lookups", lang) + " %",
                                 line=dict(color=GREEN, width=1.5, dash="dot"), connectgaps=False))
    if series.has_external:
        fig.add_trace(go.Scatter(x=x, y=list(series.ext_hit_rate), name=t("ext_hit_rate", lang) + " %",
                                 line=dict(color=PURPLE, width=2.5, dash="dot")))
    fig.add_trace(go.Scatter(x=x, y=list(series.evictions), name=t("evictions", lang), yaxis="y2",
                             line=dict(color=RED, width=2), line_shape="hv"))
    fig.add_vline(x=current, line=dict(color=INK, width=2, dash="dash"))
    top = max(series.evictions, default=0)
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=10, b=10), hovermode="x unified",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        xaxis=dict(title=t("step", lang), range=[-0.3, max(1, len(x) - 1) + 0.3]),
        yaxis=dict(title="%", range=[0, 105]),
        yaxis2=dict(title=t("evictions", lang), overlaying="y", side="right",
                    range=[0, max(1, top) * 1.05], showgrid=False, tickformat="d",
                    dtick=max(1, -(-top // 4))),
        paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


# -- vLLM's metrics, as vLLM exports them (sim.metrics) ------------------------------------------
def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def vllm_metrics_html(step, block_size: int, lang: str = "en") -> str:
    """The step's ``vllm_metrics`` as a table — the Prometheus name, the value, what it counts —
    with the log line's windowed rate beside the counters' cumulative one, the usage gauge beside
    what the pool holds, and a sentence on why those disagree at this step. Pure HTML."""
    from blockviz.sim.metrics import pool_figures
    m = step.vllm_metrics
    if m is None:
        return ""
    pool = pool_figures(step.ref_cnt, step.block_hash, step.block_tokens, block_size)
    g = max(1, len(step.ref_cnt) - 1)
    cumulative = m.prefix_cache_hits_total / m.prefix_cache_queries_total \
        if m.prefix_cache_queries_total else None
    st = step.stats
    rows = [
        ("vllm:prefix_cache_queries_total", f"{m.prefix_cache_queries_total:,}", "vm_queries"),
        ("vllm:prefix_cache_hits_total", f"{m.prefix_cache_hits_total:,}", "vm_hits"),
        ("hits / queries", _pct(cumulative), "vm_rate_total"),
        ("Prefix cache hit rate (log)",
         _pct(m.logged_hit_rate) if m.logged_hit_rate is not None
         else t("vm_rate_logged_none", lang), "vm_rate_logged"),
    ]
    if m.external_prefix_cache_queries_total:
        rows.append(("vllm:external_prefix_cache_*",
                     f"{m.external_prefix_cache_hits_total:,} / {m.external_prefix_cache_queries_total:,}",
                     "vm_ext"))
    rows += [
        ("vllm:num_preemptions_total", f"{m.num_preemptions_total:,}", "vm_preemptions"),
        ("preempted_* (PrefixCacheStats)",
         f"{st.preempted_requests:,} · {st.preempted_queries:,} · {st.preempted_hits:,}",
         "vm_preempted"),
        ("vllm:kv_cache_usage_perc", f"{m.kv_cache_usage_perc:.3f}", "vm_usage"),
        ("vllm:num_requests_running / _waiting",
         f"{m.num_requests_running} / {m.num_requests_waiting}", "vm_running"),
        ("blockviz", f"{pool.used_blocks} · {pool.cached_free_blocks} · "
                     f"{100 * pool.token_occupancy:.1f}%", "vm_pool"),
    ]
    body = "".join(f'<tr><td><code>{esc(name)}</code></td><td class="bv-num">{esc(value)}</td>'
                   f'<td>{esc(t(key, lang))}</td></tr>' for name, value, key in rows)
    why = t("vm_why", lang, u=pool.used_blocks, g=g, o=f"{100 * pool.token_occupancy:.0f}",
            c=pool.cached_free_blocks)
    now = pool.used_blocks / g
    if abs(now - m.kv_cache_usage_perc) > 1e-9:
        why += t("vm_why_lag", lang, v=f"{m.kv_cache_usage_perc:.3f}")
    if m.logged_hit_rate is not None and cumulative is not None \
            and abs(m.logged_hit_rate - cumulative) > 1e-9:
        why += t("vm_why_window", lang, w=_pct(m.logged_hit_rate), r=_pct(cumulative))
    head = (f'<tr><th>{esc(t("vm_col_name", lang))}</th><th>{esc(t("vm_col_value", lang))}</th>'
            f'<th>{esc(t("vm_col_means", lang))}</th></tr>')
    return (f'<div class="bv bv-vllm-metrics" data-bv="vllm-metrics">'
            f'<div class="bv-small">{esc(t("vm_title", lang))}</div>'
            f'<table class="bv-table">{head}{body}</table><p>{esc(why)}</p></div>')
