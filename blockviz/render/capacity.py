"""Capacity planning, drawn: the prefix-cache hit rate against capacity, one line per free order,
what it costs (evictions, preemptions; a timed trace's TTFT) and what the curves say — for the
points (``blockviz.sim.capacity.Point``) of a generated workload's plan or of a trace's sweep.
Pure: plotly figures and plain text, no Streamlit.

The pool sizes are geometric, so the x axes are logarithmic, with a tick at every size that was
run: pool blocks, or tokens (GiB under each tick given the KV bytes per token) for a trace. The
two orders keep one line style each in every chart: split (vLLM ≥ 0.24) solid, append (≤ 0.23)
dashed. A trace has a ceiling, an infinite pool's hit rate, and a knee per order; a workload's
plan reads its ceiling off its roomiest pool.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from blockviz.core import FREE_ORDERS
from blockviz.i18n import t
from blockviz.render.theme import BLUE, GREEN, GRID, INK, MUTED, ORANGE, PAPER, RED, VEIL, esc
from blockviz.sim.capacity import KNEE_FRACTION, Point, gib, knee_of

DASH = {"split": "solid", "append": "dash"}
SYMBOL = {"split": "circle", "append": "square"}
HIT_COLOUR = {"split": GREEN, "append": INK}
SAME = 1e-9          # two hit rates closer than this are equal (they are ratios of the same ints)


def by_order(points: Iterable[Point]) -> dict[str, list[Point]]:
    """The points of each free order, by pool size."""
    out: dict[str, list] = {o: [] for o in FREE_ORDERS}
    for p in points:
        out.setdefault(p.free_order, []).append(p)
    return {o: sorted(ps, key=lambda p: p.pool_blocks) for o, ps in out.items() if ps}


def sizes_of(points: Iterable[Point]) -> list[int]:
    return sorted({p.pool_blocks for p in points})


def _x_axis(points: Sequence[Point], lang: str, block_size: int | None = None,
            bytes_per_token: int | None = None) -> dict:
    """Pool blocks, or tokens (``block_size`` given) with GiB under each tick."""
    sizes = [s * (block_size or 1) for s in sizes_of(points)]
    labels = [f"{s:,}" for s in sizes]
    title = "cap_axis_pool"
    if block_size:
        title = "capt_axis_tokens"
        if bytes_per_token:
            title = "capt_axis_tokens_gib"
            labels = [f"{s:,}<br>{gib(s, bytes_per_token):,.3g} GiB" for s in sizes]
    return dict(title=t(title, lang), type="log", tickvals=sizes, ticktext=labels, showgrid=True,
                gridcolor=GRID)


def _hover(lang: str, tokens: bool) -> str:
    if tokens:
        return (f"%{{x:,}} {t('capt_tokens', lang)} · %{{customdata[0]:,}} "
                f"{t('cap_blocks', lang)}<br>{t('cap_hit_rate', lang)} %{{y:.1%}} · "
                f"{t('evictions', lang)} %{{customdata[1]:,}} · {t('trace_tbl_rejected', lang)} "
                f"%{{customdata[2]:,}}<extra>%{{fullData.name}}</extra>")
    return (f"%{{x:,}} {t('cap_blocks', lang)} · {t('cap_hit_rate', lang)} %{{y:.1%}}<br>"
            f"{t('evictions', lang)} %{{customdata[0]:,}} · {t('cap_preemptions', lang)} "
            f"%{{customdata[1]:,}}<extra>%{{fullData.name}}</extra>")


def hit_rate_figure(points: Sequence[Point], lang: str = "en", *, ceiling: float | None = None,
                    block_size: int | None = None, bytes_per_token: int | None = None) -> go.Figure:
    """Hit rate (0..1, shown in %) against capacity: one trace per free order; x in pool blocks,
    or in tokens when ``block_size`` is given. With a ``ceiling`` (an infinite pool's hit rate, a
    trace's) it is drawn as a dashed level, each order's knee (:func:`blockviz.sim.capacity.knee_of`)
    as a star and a dotted line at the first; without one, a dotted line marks the smallest pool
    from which on neither order evicts a cached block."""
    tokens = block_size is not None
    scale = block_size or 1          # x: pool blocks, or tokens
    groups = by_order(points)
    fig = go.Figure()
    for order, ps in groups.items():
        fig.add_trace(go.Scatter(
            x=[p.pool_blocks * scale for p in ps], y=[p.hit_rate for p in ps],
            customdata=[[p.pool_blocks, p.evictions, p.rejected] if tokens else [p.evictions, p.preemptions]
                        for p in ps],
            name=t(f"cap_order_{order}", lang), mode="lines+markers",
            line=dict(color=HIT_COLOUR.get(order, MUTED), width=3, dash=DASH.get(order, "dot")),
            marker=dict(symbol=SYMBOL.get(order, "diamond"), size=9), hovertemplate=_hover(lang, tokens)))
    held = _full_attention_held(groups, lang, scale)
    fig.add_traces(held)
    if ceiling is None:
        top = max((p.hit_rate for p in points), default=0.0) * 1.12
        r = reading(points)
        if r.no_evict is not None and len(sizes_of(points)) > 1:
            _v_mark(fig, r.no_evict * scale, MUTED, t("cap_no_evict_mark", lang), y=1, xanchor="right",
                    yanchor="top", align="right")
    else:
        top = max([ceiling] + [max(tr.y) for tr in held]) * 1.15
        knees = [(p.pool_blocks * scale, p.hit_rate) for p in reading(points, ceiling).knee.values()
                 if p is not None]
        for x, y in knees:
            fig.add_trace(go.Scatter(
                x=[x], y=[y], mode="markers", showlegend=False, hoverinfo="skip",
                marker=dict(symbol="star", size=18, color=ORANGE, line=dict(color=INK, width=1)),
                name=t("capt_knee", lang)))
        if knees:
            _v_mark(fig, knees[0][0], ORANGE, t("capt_knee_mark", lang, pct=f"{100 * KNEE_FRACTION:.0f}"),
                    y=0.02, xanchor="left", yanchor="bottom")
        fig.add_hline(y=ceiling, line=dict(color=MUTED, width=1.5, dash="dash"))
        fig.add_annotation(x=0, xref="paper", y=ceiling, yref="y", showarrow=False, xanchor="left",
                           yanchor="bottom", text=t("capt_ceiling_mark", lang, rate=pct(ceiling)),
                           font=dict(size=13, color=MUTED), bgcolor=VEIL)
    fig.update_layout(
        height=380 if ceiling is None else 420, margin=dict(l=10, r=10, t=10, b=10),
        hovermode="closest", legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=14)),
        xaxis=_x_axis(points, lang, block_size, bytes_per_token),
        yaxis=dict(title=t("cap_axis_hit", lang), tickformat=".0%", rangemode="tozero",
                   range=[0, min(1.0, max(0.05, top))], gridcolor=GRID),
        font=dict(size=14), paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


def _v_mark(fig: go.Figure, x: float, colour: str, text: str, **place) -> None:
    """A dotted line up the plot at ``x``, labelled ``text`` (``place``: where the label sits). On a
    log axis a shape takes the data value, an annotation its log10 (plotly.js)."""
    fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, yref="paper", xref="x",
                  line=dict(color=colour, width=1.5, dash="dot"))
    fig.add_annotation(x=math.log10(x), yref="paper", xref="x", text=text, showarrow=False,
                       font=dict(size=13, color=colour), bgcolor=VEIL, **place)


def limited(p: Point) -> int:
    """A hybrid model's point: prompt tokens full attention held past the hit (0 otherwise)."""
    return p.extra.get("limited_hits", 0)


def _full_attention_held(groups: dict[str, list[Point]], lang: str, scale: int) -> list:
    """A hybrid model's replay: per free order, the hit rate full attention alone held (the hits
    plus the tokens another group's missing blocks kept out of them), thin and dotted above the
    order's own line; none when nothing was limited. x: pool blocks times ``scale``."""
    out = []
    for order, ps in groups.items():
        if not any(limited(p) for p in ps):
            continue
        out.append(go.Scatter(
            x=[p.pool_blocks * scale for p in ps],
            y=[(p.hits + limited(p)) / p.queries if p.queries else 0.0 for p in ps],
            name=t("capt_full_held", lang, order=t(f"cap_order_{order}", lang)), mode="lines",
            line=dict(color=HIT_COLOUR.get(order, MUTED), width=1.5, dash="dot"), opacity=0.7,
            hovertemplate="%{y:.1%}<extra>%{fullData.name}</extra>"))
    return out


def limited_lines(points: Sequence[Point], lang: str, group: str) -> list[str]:
    """What the groups that keep less cost (a hybrid model's replay), at each order's largest
    pool; ``group``: their name in words. Empty when nothing was limited."""
    out = []
    for order, ps in by_order(points).items():
        p = ps[-1]
        if limited(p) and p.queries:
            out.append(t("capt_read_limited", lang, order=t(f"cap_order_{order}", lang), group=group,
                         share=pct(limited(p) / p.queries), limited=f"{limited(p):,}"))
    return out


def pressure_figure(points: Sequence[Point], lang: str = "en", height: int = 300) -> go.Figure:
    """Evictions (left) and preemptions (right) against pool size, one trace per free order in
    each: what the hit rate pays for."""
    groups = by_order(points)
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
        fig.update_xaxes(_x_axis(points, lang), row=1, col=col)
        # small counts: a tick per whole number (never 0.5); larger: plotly's round steps
        fig.update_yaxes(range=[0, max(1, top) * 1.08], tickformat="d", dtick=1 if top <= 5 else None,
                         gridcolor=GRID, row=1, col=col)
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10), hovermode="closest",
                      legend=dict(orientation="h", yanchor="bottom", y=-0.45, x=0),
                      font=dict(size=13), paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


def latency_figure(points: Sequence[Point], lang: str = "en", *, block_size: int,
                   bytes_per_token: int | None = None, height: int = 320) -> go.Figure:
    """A timed trace's TTFT p50 / p90 (simulated seconds) against capacity, one line style per
    free order (solid split, dashed append); p90 drawn bolder."""
    fig = go.Figure()
    for order, ps in by_order(points).items():
        for name, width, colour in (("ttft_p50_s", 2, BLUE), ("ttft_p90_s", 3.5, RED)):
            fig.add_trace(go.Scatter(
                x=[p.pool_blocks * block_size for p in ps], y=[p.extra[name] for p in ps],
                name=f"{t('capt_' + name, lang)} · {t(f'cap_order_{order}', lang)}", mode="lines+markers",
                line=dict(color=colour, width=width, dash=DASH.get(order, "dot")),
                marker=dict(symbol=SYMBOL.get(order, "diamond"), size=8),
                hovertemplate=(f"%{{x:,}} {t('capt_tokens', lang)}: %{{y:.3g}} s"
                               f"<extra>%{{fullData.name}}</extra>")))
    fig.update_layout(
        height=height, margin=dict(l=10, r=10, t=10, b=10), hovermode="closest",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=13)),
        xaxis=_x_axis(points, lang, block_size, bytes_per_token),
        yaxis=dict(title=t("capt_axis_ttft", lang), rangemode="tozero", gridcolor=GRID),
        font=dict(size=14), paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


# -- reading the curves ----------------------------------------------------------------------
@dataclass(frozen=True)
class Reading:
    """What the curves say, as numbers (see :func:`reading_lines`)."""
    ceiling: float                  # an infinite pool's hit rate, given; else the roomiest pool's
    infinite: bool                  # the ceiling is an infinite pool's (a trace's)
    no_evict: int | None            # smallest pool from which on neither order evicts
    meet: int | None                # smallest pool from which on both orders hit the same
    reach: dict[str, int | None]    # per order: smallest pool from which on it hits the ceiling
    gap: tuple[int, float, float] | None   # (pool, split, append) where split leads most
    knee: dict[str, Point | None]   # per order (an infinite ceiling): its knee's point
    largest: dict[str, Point]       # per order: its largest pool's point


def reading(points: Sequence[Point], ceiling: float | None = None) -> Reading:
    """The numbers of a plan's or a sweep's points; ``ceiling``: an infinite pool's hit rate."""
    groups = by_order(points)
    sizes = sizes_of(points)
    infinite = ceiling is not None
    if ceiling is None:
        # A smaller pool can score higher than this where it preempts: a preempted request is
        # looked up again and mostly hits its own blocks. The ceiling is what room to spare gives.
        ceiling = min((ps[-1].hit_rate for ps in groups.values()), default=0.0)
    rate = {o: {p.pool_blocks: p.hit_rate for p in ps} for o, ps in groups.items()}
    evict = {o: {p.pool_blocks: p.evictions for p in ps} for o, ps in groups.items()}
    both = [s for s in sizes if all(s in rate[o] for o in rate)]

    def from_on(ok, sizes=both) -> int | None:
        """The smallest of ``sizes`` from which on ``ok(size)`` holds for every larger one too."""
        found = None
        for s in reversed(sizes):
            if not ok(s):
                break
            found = s
        return found

    no_evict = from_on(lambda s: all(evict[o][s] == 0 for o in evict))
    meet = (from_on(lambda s: abs(rate["split"][s] - rate["append"][s]) <= SAME)
            if {"split", "append"} <= set(rate) else None)
    reach = {o: from_on(lambda s, r=r: r[s] >= ceiling - SAME, sorted(r)) for o, r in rate.items()}
    gap = None
    if {"split", "append"} <= set(rate):
        s = max(both, key=lambda s: rate["split"][s] - rate["append"][s], default=None)
        if s is not None and rate["split"][s] - rate["append"][s] > SAME:
            gap = (s, rate["split"][s], rate["append"][s])
    knee = {}
    if infinite:
        for o, ps in groups.items():
            k = knee_of(ps, ceiling)
            knee[o] = None if k is None else next(p for p in ps if p.pool_blocks == k)
    return Reading(ceiling, infinite, no_evict, meet, reach, gap, knee,
                   {o: ps[-1] for o, ps in groups.items()})


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _fmt(size: int | None) -> str:
    return "—" if size is None else f"{size:,}"


def capacity_words(tokens: int, bytes_per_token: int | None, lang: str) -> str:
    g = gib(tokens, bytes_per_token)
    return f"{tokens:,} {t('capt_tokens', lang)}" + ("" if g is None else f" ({g:,.3g} GiB)")


def ceiling_lines(ceiling: float, lang: str) -> list[str]:
    """A trace's reading opens with its ceiling (and, when it hits nothing, that no cache helps)."""
    return [t("capt_read_ceiling", lang, rate=pct(ceiling))] + (
        [t("capt_read_no_reuse", lang)] if ceiling <= 0 else [])


def knee_line(order: str, blocks: int, rate: float, ceiling: float, lang: str, *, block_size: int,
              bytes_per_token: int | None) -> str:
    """A free order's knee in words: where it is, what it hits and what the ceiling adds."""
    return t("capt_read_knee", lang, order=t(f"cap_order_{order}", lang), pct=f"{100 * KNEE_FRACTION:.0f}",
             blocks=f"{blocks:,}", cap=capacity_words(blocks * block_size, bytes_per_token, lang),
             rate=pct(rate), ceiling=pct(ceiling), gain=pct(max(0.0, ceiling - rate)))


def reading_lines(r: Reading, lang: str = "en", *, block_size: int | None = None,
                  bytes_per_token: int | None = None) -> list[str]:
    """The numbers in words (plain text, one sentence each). A plan: its ceiling and which
    pools reach it, where split leads append most, where the orders meet and where eviction
    stops. A trace (an infinite ceiling; ``block_size`` gives capacities in tokens): its ceiling,
    each order's knee (or that no size run reaches it), and (timed) the TTFT there."""
    if r.infinite:
        return _trace_lines(r, lang, block_size or 1, bytes_per_token)
    out = [t("cap_read_ceiling", lang, rate=pct(r.ceiling), split=_fmt(r.reach.get("split")),
             append=_fmt(r.reach.get("append")))]
    if r.gap is not None:
        size, split, append = r.gap
        out.append(t("cap_read_gap", lang, size=f"{size:,}", split=pct(split), append=pct(append),
                     points=f"{100 * (split - append):.1f}"))
    else:
        out.append(t("cap_read_no_gap", lang))
    if r.meet is not None:
        out.append(t("cap_read_meet", lang, size=f"{r.meet:,}"))
    if r.no_evict is not None:
        out.append(t("cap_read_no_evict", lang, size=f"{r.no_evict:,}"))
    return out


def _trace_lines(r: Reading, lang: str, bs: int, bytes_per_token: int | None) -> list[str]:
    out = ceiling_lines(r.ceiling, lang)
    if r.ceiling <= 0:
        return out
    for o, best in r.largest.items():
        p = r.knee.get(o)
        if p is None:
            out.append(t("capt_read_no_knee", lang, order=t(f"cap_order_{o}", lang),
                         pct=f"{100 * KNEE_FRACTION:.0f}",
                         cap=capacity_words(best.pool_blocks * bs, bytes_per_token, lang),
                         rate=pct(best.hit_rate), share=pct(best.hit_rate / r.ceiling)))
            continue
        line = knee_line(o, p.pool_blocks, p.hit_rate, r.ceiling, lang, block_size=bs,
                         bytes_per_token=bytes_per_token)
        if "ttft_p90_s" in p.extra:
            line += " " + t("capt_read_ttft", lang, p50=f"{p.extra['ttft_p50_s']:.3g}",
                            p90=f"{p.extra['ttft_p90_s']:.3g}", q90=f"{p.extra['queue_delay_p90_s']:.3g}",
                            pre=f"{p.preemptions:,}")
        out.append(line)
    return out



# -- where the prompt tokens went (trace capacity --explain) -----------------------------------
def split_bars_html(points: Sequence[Point], lang: str = "en", *, block_size: int,
                    bytes_per_token: int | None = None, free_order: str = "split") -> str:
    """At each pool size, the admitted prompt tokens as one bar stacked by what served them or
    why nothing did (``point.extra["split"]``): hit, evicted (a bigger pool could have kept it),
    cold, and the structural last-token rule and partial block — so "a bigger cache would buy at
    most the red part" is read off the bars. Pure HTML, no plotly."""
    from blockviz.render.split import counts_bar_html, legend_html
    from blockviz.sim.explain_trace import TRACE_KEYS
    pts = [p for p in by_order(points).get(free_order, []) if "split" in p.extra]
    rows = []
    for p in pts:
        tokens = p.pool_blocks * block_size
        g = gib(tokens, bytes_per_token)
        label = f"{tokens:,}" + ("" if g is None else f" · {g:,.3g} GiB")
        split, q = p.extra["split"], max(1, p.queries)
        fig = " · ".join(f'{t(f"xc_{c}", lang)} {100 * split.get(c, 0) / q:.1f}%'
                         for c in ("hit", "evicted"))      # what the pool served, what more could
        rows.append(f'<div class="bv-split-row"><span class="bv-small">{esc(label)}</span>'
                    f'{counts_bar_html(split, lang, p.queries)}'
                    f'<span class="bv-small bv-split-fig">{esc(fig)}</span></div>')
    return (f'<div class="bv bv-split-chart" data-bv="split-chart">'
            f'<div class="bv-small">{esc(t("capt_split_axis_rows", lang))}</div>{"".join(rows)}'
            f'<div>{legend_html(TRACE_KEYS, lang)}</div></div>')
