"""The KV payload of one block: the real K or V tensor slice (one layer, one KV head) as a heatmap,
the device it lives on, its fingerprint, and this step's check that a cache hit gives the same
attention output as recomputing from scratch (the ``verify`` ops)."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from blockviz.i18n import t
from blockviz.render.theme import GREEN, PAPER, RED, esc
from blockviz.teach.labels import token_text


def payload_figure(summary, *, layer: int, head: int, kv: int, tokens: Sequence[int] = (),
                   vocab=None, lang: str = "en", height: int = 260) -> go.Figure:
    """``summary.data``: [layers, 2 (K, V), block_size, heads, head_dim] float32."""
    data = summary.data[layer, kv, :, head, :]          # [block_size, head_dim]
    block_size, head_dim = data.shape
    rows = [f"{s}: {token_text([tokens[s]], vocab)}" if s < len(tokens) else f"{s}: —"
            for s in range(block_size)]
    fig = go.Figure(go.Heatmap(
        z=data.tolist(), x=list(range(head_dim)), y=rows, colorscale="RdBu", zmid=0,
        colorbar=dict(thickness=10, len=0.9),
        hovertemplate=f"{t('slot', lang)} %{{y}}<br>dim %{{x}}<br>%{{z:.4f}}<extra></extra>"))
    fig.update_yaxes(autorange="reversed", title=t("slot", lang), type="category")
    fig.update_xaxes(title="head_dim", dtick=max(1, head_dim // 8))
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=10, b=10),
                      paper_bgcolor=PAPER, plot_bgcolor=PAPER)
    return fig


def payload_caption_html(block: int, summary, *, layer: int, head: int, kv: int, lang: str) -> str:
    which = "K" if kv == 0 else "V"
    return (f'<div class="bv"><div class="bv-small">'
            f'{esc(t("payload_of", lang, b=block, l=layer, h=head, kv=which))} · '
            f'{esc(t("device", lang))} <b>{esc(summary.device)}</b> · {esc(summary.dtype)} · '
            f'{esc(t("fingerprint", lang))} <code>{esc(summary.fingerprint[:16])}</code></div></div>')


def written_blocks(ops: Sequence) -> tuple[int, ...]:
    """The blocks whose K/V these ops wrote (computed, or loaded from the external tier)."""
    return tuple(sorted({op.block_id for op in ops if op.kind in ("write", "load")}))


def verify_html(ops: Sequence, lang: str, tolerance: float = 0.0) -> str:
    """This step's hit = recompute checks (``Verify`` records)."""
    checks = [op for op in ops if op.kind == "verify"]
    if not checks:
        return f'<div class="bv"><div class="bv-small">{esc(t("verify_none", lang))}</div></div>'
    rows = []
    for op in checks:
        rid, hit, new, d, dev = op.request_id, op.hit_tokens, op.new_tokens, op.max_abs_diff, op.device
        ok = d <= tolerance
        key = "hit_check_ok" if ok else "hit_check_bad"
        colour = GREEN if ok else RED
        rows.append(f'<div style="color:{colour};font-weight:700">{"✓" if ok else "✗"} '
                    f'{esc(rid)}: {esc(t(key, lang, d=f"{d:.2e}" if d else "0"))} '
                    f'<span class="bv-small">({esc(t("verify_detail", lang, hit=hit, new=new))}, '
                    f'{esc(dev)})</span></div>')
    return f'<div class="bv bv-panel">{"".join(rows)}</div>'
