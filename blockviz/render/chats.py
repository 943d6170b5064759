"""A Qwen-Bailian conversation, turn by turn, at one pool size (from
:func:`blockviz.sim.chats.chat_report`): each turn's prompt as a bar split into what it hit at this
pool size, what the pool's evictions lost it (an infinite cache would have hit it) and what no cache
held yet; and the same in words. Pure: a plotly figure and plain text."""
from __future__ import annotations

import plotly.graph_objects as go

from blockviz.i18n import t
from blockviz.render.capacity import pct
from blockviz.render.theme import GREEN, GREY_BG, GRID, INK, PAPER, RED

PARTS = (("hit", GREEN), ("lost", RED), ("new", GREY_BG))


def _rate(part: int, whole: int) -> str:
    return pct(part / whole if whole else 0.0)


def chat_option(chat: dict, lang: str) -> str:
    turns = chat["turns"]
    return t("chat_option", lang, id=chat["chat_id"], turns=len(turns),
             tokens=f"{sum(x['tokens'] for x in turns):,}", lost=f"{chat['lost']:,}")


def turn_figure(chat: dict, lang: str = "en") -> go.Figure:
    """One bar per turn (the first at the top): hit, lost to eviction, new, in prompt tokens."""
    turns = chat["turns"]
    start = turns[0]["at_s"]
    labels = [t("chat_turn", lang, turn=x["turn"], type=x["type"], at=f"{x['at_s'] - start:,.1f}",
                line=x["line"]) for x in turns]
    values = {"hit": [x["hit"] for x in turns],
              "lost": [max(0, x["best"] - x["hit"]) for x in turns],
              "new": [x["tokens"] - max(x["best"], x["hit"]) for x in turns]}
    fig = go.Figure()
    for part, colour in PARTS:
        fig.add_trace(go.Bar(
            y=labels, x=values[part], orientation="h", name=t(f"chat_{part}", lang),
            marker=dict(color=colour, line=dict(color=INK, width=0.5)),
            customdata=[[x["tokens"]] for x in turns],
            hovertemplate=f"%{{y}}<br>{t(f'chat_{part}', lang)}: %{{x:,}} / %{{customdata[0]:,}}"
                          "<extra></extra>"))
    fig.update_layout(
        barmode="stack", height=min(900, 110 + 34 * len(turns)), margin=dict(l=10, r=10, t=10, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, font=dict(size=14), traceorder="normal"),
        xaxis=dict(title=t("chat_axis", lang), gridcolor=GRID, tickformat=","),
        yaxis=dict(autorange="reversed", type="category"),
        font=dict(size=14), paper_bgcolor=PAPER, plot_bgcolor=PAPER, bargap=0.25)
    return fig


def chat_lines(report: dict, chat: dict | None, lang: str) -> list[str]:
    """The trace's turns in words (later against first ones), then the conversation's."""
    order = t(f"cap_order_{report['free_order']}", lang)
    a, b = report["later"], report["first"]
    out = [t("chat_read_all", lang, pool=f"{report['pool_blocks']:,}", order=order,
             rate=_rate(a["hit"], a["tokens"]), best=_rate(a["best"], a["tokens"]),
             rate1=_rate(b["hit"], b["tokens"]), best1=_rate(b["best"], b["tokens"]))]
    if chat is None:
        return out
    turns = chat["turns"]
    tokens = sum(x["tokens"] for x in turns)
    hit = sum(x["hit"] for x in turns)
    out.append(t("chat_read_one", lang, hit=f"{hit:,}", tokens=f"{tokens:,}", rate=_rate(hit, tokens),
                 best=_rate(sum(x["best"] for x in turns), tokens)))
    k = max(range(len(turns)), key=lambda i: turns[i]["best"] - turns[i]["hit"])
    lost = turns[k]["best"] - turns[k]["hit"]
    if lost <= 0:
        out.append(t("chat_read_no_loss", lang))
    else:
        gap = turns[k]["at_s"] - turns[k - 1]["at_s"] if k else 0.0
        out.append(t("chat_read_worst", lang, turn=turns[k]["turn"], line=turns[k]["line"], lost=f"{lost:,}",
                     gap=f"{gap:,.1f}"))
    return out
