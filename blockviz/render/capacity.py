"""Capacity planning, drawn: the prefix-cache hit rate against the pool size, one line per free
order, and the evictions and preemptions behind it — from the points of
:func:`blockviz.teach.workload.capacity_plan`. Pure: plotly figures and plain text, no Streamlit.

The pool sizes are geometric (:func:`blockviz.teach.workload.default_pool_sizes`), so the x axes are
logarithmic, with a tick at every size that was run. The two orders keep one line style each in
every chart: split (vLLM ≥ 0.24) solid, append (≤ 0.23) dashed.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from blockviz.i18n import t
from blockviz.render.theme import BLUE, GREEN, GRID, INK, MUTED, ORANGE, PAPER, RED, VEIL
from blockviz.sim.capacity import KNEE_FRACTION, hit_rate, knee

ORDERS = ("split", "append")
DASH = {"split": "solid", "append": "dash"}
SYMBOL = {"split": "circle", "append": "square"}
HIT_COLOUR = {"split": GREEN, "append": INK}
SAME = 1e-9          # two hit rates closer than this are equal (they are ratios of the same ints)


def by_order(points: Iterable) -> dict[str, list]:
    """The points of each free order (``blockviz.sim.capacity.Point``), by pool size."""
    out: dict[str, list] = {o: [] for o in ORDERS}
    for p in points:
        out.setdefault(p.free_order, []).append(p)
    return {o: sorted(ps, key=lambda p: p.pool_blocks) for o, ps in out.items() if ps}


def sizes_of(points: Iterable) -> list[int]:
    return sorted({p.pool_blocks for p in points})


def _x_axis(sizes: Sequence[int], lang: str) -> dict:
    return dict(title=t("cap_axis_pool", lang), type="log", tickvals=list(sizes),
                ticktext=[f"{s:,}" for s in sizes], showgrid=True, gridcolor=GRID)


def _hover(lang: str) -> str:
    return (f"%{{x:,}} {t('cap_blocks', lang)} · {t('cap_hit_rate', lang)} %{{y:.1%}}<br>"
            f"{t('evictions', lang)} %{{customdata[0]:,}} · {t('cap_preemptions', lang)} "
            f"%{{customdata[1]:,}}<extra>%{{fullData.name}}</extra>")


def hit_rate_figure(points: Sequence, lang: str = "en", height: int = 380) -> go.Figure:
    """Hit rate (0..1, shown in %) against pool size: one trace per free order. A dotted line
    marks the smallest pool from which on neither order evicts a cached block."""
    groups = by_order(points)
    sizes = sizes_of(points)
    fig = go.Figure()
    for order, ps in groups.items():
        fig.add_trace(go.Scatter(
            x=[p.pool_blocks for p in ps], y=[p.hit_rate for p in ps],
            customdata=[[p.evictions, p.preemptions] for p in ps], name=t(f"cap_order_{order}", lang),
            mode="lines+markers", line=dict(color=HIT_COLOUR.get(order, MUTED), width=3,
                                            dash=DASH.get(order, "dot")),
            marker=dict(symbol=SYMBOL.get(order, "diamond"), size=9), hovertemplate=_hover(lang)))
    top = max((p.hit_rate for p in points), default=0.0)
    r = reading(points)
    if r.no_evict is not None and len(sizes) > 1:
        # on a log axis a shape takes the data value, an annotation its log10 (plotly.js)
        fig.add_shape(type="line", x0=r.no_evict, x1=r.no_evict, y0=0, y1=1, yref="paper", xref="x",
                      line=dict(color=MUTED, width=1.5, dash="dot"))
        fig.add_annotation(x=math.log10(r.no_evict), y=1, yref="paper", xref="x",
                           text=t("cap_no_evict_mark", lang),
                           showarrow=False, xanchor="right", yanchor="top", align="right",
                           font=dict(size=13, color=MUTED), bgcolor=VEIL)
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=10, b=10), hovermode="closest",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=14)),
        xaxis=_x_axis(sizes, lang),
        yaxis=dict(title=t("cap_axis_hit", lang), tickformat=".0%", rangemode="tozero",
                   range=[0, min(1.0, max(0.05, top * 1.12))], gridcolor=GRID),
        font=dict(size=14), paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


def pressure_figure(points: Sequence, lang: str = "en", height: int = 300) -> go.Figure:
    """Evictions (left) and preemptions (right) against pool size, one trace per free order in
    each: what the hit rate pays for."""
    groups = by_order(points)
    sizes = sizes_of(points)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=(t("cap_evictions_title", lang), t("cap_preemptions_title", lang)))
    for col, (field, colour) in enumerate((("evictions", RED), ("preemptions", ORANGE)), 1):
        for order, ps in groups.items():
            fig.add_trace(go.Scatter(
                x=[p.pool_blocks for p in ps], y=[getattr(p, field) for p in ps],
                name=t(f"cap_order_{order}", lang), legendgroup=order, showlegend=col == 1,
                mode="lines+markers", line=dict(color=colour, width=2.5, dash=DASH.get(order, "dot")),
                marker=dict(symbol=SYMBOL.get(order, "diamond"), size=8),
                hovertemplate=f"%{{x:,}} {t('cap_blocks', lang)}: %{{y:,}}<extra>%{{fullData.name}}</extra>"),
                row=1, col=col)
        top = max((getattr(p, field) for p in points), default=0)
        fig.update_xaxes(_x_axis(sizes, lang), row=1, col=col)
        # small counts: a tick per whole number (never 0.5); larger: plotly's round steps
        fig.update_yaxes(range=[0, max(1, top) * 1.08], tickformat="d", dtick=1 if top <= 5 else None,
                         gridcolor=GRID, row=1, col=col)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10), hovermode="closest",
                      legend=dict(orientation="h", yanchor="bottom", y=-0.45, x=0),
                      font=dict(size=13), paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


# -- reading the curves ----------------------------------------------------------------------
@dataclass(frozen=True)
class Reading:
    """What the curves say, as numbers (see :func:`reading_lines`)."""
    smallest: int                   # the smallest pool run (the largest single request fits)
    ceiling: float                  # the hit rate with the largest pool (the least evicting)
    no_evict: int | None            # smallest pool from which on neither order evicts
    meet: int | None                # smallest pool from which on both orders hit the same
    reach: dict[str, int | None]    # per order: smallest pool from which on it hits the ceiling
    gap: tuple[int, float, float] | None   # (pool, split, append) where split leads most


def reading(points: Sequence) -> Reading:
    groups = by_order(points)
    sizes = sizes_of(points)
    # A smaller pool can score higher than this where it preempts: a preempted request is looked
    # up again and mostly hits its own blocks. The ceiling is what room to spare gives.
    ceiling = min((ps[-1].hit_rate for ps in groups.values()), default=0.0)
    rate = {o: {p.pool_blocks: p.hit_rate for p in ps} for o, ps in groups.items()}
    evict = {o: {p.pool_blocks: p.evictions for p in ps} for o, ps in groups.items()}
    both = [s for s in sizes if all(s in rate[o] for o in rate)]

    def from_on(ok) -> int | None:
        """The smallest size from which on ``ok(size)`` holds for every larger size too."""
        found = None
        for s in reversed(both):
            if not ok(s):
                break
            found = s
        return found

    no_evict = from_on(lambda s: all(evict[o][s] == 0 for o in evict))
    meet = (from_on(lambda s: abs(rate["split"][s] - rate["append"][s]) <= SAME)
            if {"split", "append"} <= set(rate) else None)
    reach = {}
    for o, r in rate.items():
        reach[o] = None
        for s in sorted(r, reverse=True):
            if r[s] < ceiling - SAME:
                break
            reach[o] = s
    gap = None
    if {"split", "append"} <= set(rate):
        s = max(both, key=lambda s: rate["split"][s] - rate["append"][s], default=None)
        if s is not None and rate["split"][s] - rate["append"][s] > SAME:
            gap = (s, rate["split"][s], rate["append"][s])
    return Reading(sizes[0] if sizes else 0, ceiling, no_evict, meet, reach, gap)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def reading_lines(r: Reading, lang: str = "en") -> list[str]:
    """This plan's numbers in words (plain text, one sentence each)."""
    out = [t("cap_read_ceiling", lang, rate=_pct(r.ceiling), split=_fmt(r.reach.get("split")),
             append=_fmt(r.reach.get("append")))]
    if r.gap is not None:
        size, split, append = r.gap
        out.append(t("cap_read_gap", lang, size=f"{size:,}", split=_pct(split), append=_pct(append),
                     points=f"{100 * (split - append):.1f}"))
    else:
        out.append(t("cap_read_no_gap", lang))
    if r.meet is not None:
        out.append(t("cap_read_meet", lang, size=f"{r.meet:,}"))
    if r.no_evict is not None:
        out.append(t("cap_read_no_evict", lang, size=f"{r.no_evict:,}"))
    return out


def _fmt(size: int | None) -> str:
    return "—" if size is None else f"{size:,}"


# -- a trace's sweep (blockviz.sim.sweep reports, one per free order) ----------------------------
def gib(tokens: int, bytes_per_token: int | None) -> float | None:
    return None if not bytes_per_token else tokens * bytes_per_token / (1 << 30)


def _capacity_label(tokens: int, bytes_per_token: int | None) -> str:
    g = gib(tokens, bytes_per_token)
    return f"{tokens:,}" + ("" if g is None else f"<br>{g:,.3g} GiB")


def _capacity_words(tokens: int, bytes_per_token: int | None, lang: str) -> str:
    g = gib(tokens, bytes_per_token)
    return f"{tokens:,} {t('capt_tokens', lang)}" + ("" if g is None else f" ({g:,.3g} GiB)")


def _trace_x_axis(reports: Sequence[dict], lang: str, bytes_per_token: int | None) -> dict:
    bs = reports[0]["block_size"]
    sizes = sorted({p["pool_blocks"] * bs for r in reports for p in r["points"]})
    title = t("capt_axis_tokens_gib" if bytes_per_token else "capt_axis_tokens", lang)
    return dict(title=title, type="log", tickvals=sizes,
                ticktext=[_capacity_label(s, bytes_per_token) for s in sizes], showgrid=True,
                gridcolor=GRID)


def trace_hit_figure(reports: Sequence[dict], lang: str = "en", bytes_per_token: int | None = None,
                     height: int = 420) -> go.Figure:
    """Hit rate against capacity (tokens, log axis; GiB under each tick given the KV bytes per
    token): one line per free order, the ceiling (an infinite pool) as a dashed level, each
    order's knee (:func:`blockviz.sim.capacity.knee`) a star, a dotted line at the first."""
    fig = go.Figure()
    bs = reports[0]["block_size"]
    ceiling = hit_rate(reports[0]["ceiling"])
    knees = []
    for r in reports:
        order = r["free_order"]
        pts = sorted(r["points"], key=lambda p: p["pool_blocks"])
        fig.add_trace(go.Scatter(
            x=[p["pool_blocks"] * bs for p in pts], y=[hit_rate(p) for p in pts],
            customdata=[[p["pool_blocks"], p["evictions"], p["rejected"]] for p in pts],
            name=t(f"cap_order_{order}", lang), mode="lines+markers",
            line=dict(color=HIT_COLOUR.get(order, MUTED), width=3, dash=DASH.get(order, "dot")),
            marker=dict(symbol=SYMBOL.get(order, "diamond"), size=9),
            hovertemplate=(f"%{{x:,}} {t('capt_tokens', lang)} · %{{customdata[0]:,}} "
                           f"{t('cap_blocks', lang)}<br>{t('cap_hit_rate', lang)} %{{y:.1%}} · "
                           f"{t('evictions', lang)} %{{customdata[1]:,}} · {t('trace_tbl_rejected', lang)} "
                           f"%{{customdata[2]:,}}<extra>%{{fullData.name}}</extra>")))
        k = knee(pts, r["ceiling"])
        if k is not None:
            rate = next(hit_rate(p) for p in pts if p["pool_blocks"] == k)
            knees.append((order, k * bs, rate))
    for _order, x, y in knees:
        fig.add_trace(go.Scatter(
            x=[x], y=[y], mode="markers", showlegend=False, hoverinfo="skip",
            marker=dict(symbol="star", size=18, color=ORANGE, line=dict(color=INK, width=1)),
            name=t("capt_knee", lang)))
    if knees:
        x = knees[0][1]
        fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, yref="paper", xref="x",
                      line=dict(color=ORANGE, width=1.5, dash="dot"))
        fig.add_annotation(x=math.log10(x), y=0.02, yref="paper", xref="x",
                           text=t("capt_knee_mark", lang, pct=f"{100 * KNEE_FRACTION:.0f}"),
                           showarrow=False, xanchor="left", yanchor="bottom",
                           font=dict(size=13, color=ORANGE), bgcolor=VEIL)
    fig.add_hline(y=ceiling, line=dict(color=MUTED, width=1.5, dash="dash"))
    fig.add_annotation(x=0, xref="paper", y=ceiling, yref="y", showarrow=False, xanchor="left",
                       yanchor="bottom", text=t("capt_ceiling_mark", lang, rate=_pct(ceiling)),
                       font=dict(size=13, color=MUTED), bgcolor=VEIL)
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=10, b=10), hovermode="closest",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=14)),
        xaxis=_trace_x_axis(reports, lang, bytes_per_token),
        yaxis=dict(title=t("cap_axis_hit", lang), tickformat=".0%", rangemode="tozero",
                   range=[0, min(1.0, max(0.05, ceiling * 1.15))], gridcolor=GRID),
        font=dict(size=14), paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


def trace_latency_figure(reports: Sequence[dict], lang: str = "en", bytes_per_token: int | None = None,
                         height: int = 320) -> go.Figure:
    """Timed mode: TTFT p50 / p90 (simulated seconds) against capacity, one line style per free
    order (solid split, dashed append); p90 drawn bolder."""
    fig = go.Figure()
    bs = reports[0]["block_size"]
    for r in reports:
        order = r["free_order"]
        pts = sorted(r["points"], key=lambda p: p["pool_blocks"])
        for field, width, colour in (("ttft_p50_s", 2, BLUE), ("ttft_p90_s", 3.5, RED)):
            fig.add_trace(go.Scatter(
                x=[p["pool_blocks"] * bs for p in pts], y=[p[field] for p in pts],
                name=f"{t('capt_' + field, lang)} · {t(f'cap_order_{order}', lang)}", mode="lines+markers",
                line=dict(color=colour, width=width, dash=DASH.get(order, "dot")),
                marker=dict(symbol=SYMBOL.get(order, "diamond"), size=8),
                hovertemplate=(f"%{{x:,}} {t('capt_tokens', lang)}: %{{y:.3g}} s"
                               f"<extra>%{{fullData.name}}</extra>")))
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=10, b=10), hovermode="closest",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=13)),
        xaxis=_trace_x_axis(reports, lang, bytes_per_token),
        yaxis=dict(title=t("capt_axis_ttft", lang), rangemode="tozero", gridcolor=GRID),
        font=dict(size=14), paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


def trace_reading_lines(reports: Sequence[dict], lang: str = "en",
                        bytes_per_token: int | None = None) -> list[str]:
    """What a trace's curves say, one sentence each: the ceiling, each order's knee (or that no
    size run reaches it), the largest pool's share of the ceiling, and (timed) the TTFT there."""
    bs = reports[0]["block_size"]
    ceiling = hit_rate(reports[0]["ceiling"])
    pct = f"{100 * KNEE_FRACTION:.0f}"
    out = [t("capt_read_ceiling", lang, rate=_pct(ceiling))]
    if ceiling <= 0:
        out.append(t("capt_read_no_reuse", lang))
        return out
    for r in reports:
        order = t(f"cap_order_{r['free_order']}", lang)
        pts = sorted(r["points"], key=lambda p: p["pool_blocks"])
        k = knee(pts, r["ceiling"])
        if k is None:
            best = pts[-1]
            out.append(t("capt_read_no_knee", lang, order=order, pct=pct,
                         cap=_capacity_words(best["pool_blocks"] * bs, bytes_per_token, lang),
                         rate=_pct(hit_rate(best)), share=_pct(hit_rate(best) / ceiling)))
            continue
        p = next(p for p in pts if p["pool_blocks"] == k)
        line = t("capt_read_knee", lang, order=order, pct=pct, blocks=f"{k:,}",
                 cap=_capacity_words(k * bs, bytes_per_token, lang), rate=_pct(hit_rate(p)),
                 ceiling=_pct(ceiling), gain=_pct(max(0.0, ceiling - hit_rate(p))))
        if "ttft_p90_s" in p:
            line += " " + t("capt_read_ttft", lang, p50=f"{p['ttft_p50_s']:.3g}",
                            p90=f"{p['ttft_p90_s']:.3g}", q90=f"{p['queue_delay_p90_s']:.3g}",
                            pre=f"{p['preemptions']:,}")
        out.append(line)
    return out
