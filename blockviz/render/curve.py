"""The capacity page's whole curve (sequence mode): what the browser element ``curve.js`` draws
and reads, and what the curve says in words. Pure: JSON text, a stylesheet and sentences from a
:func:`blockviz.sim.curve.curve_report` result.

The element gets each free order's breakpoints (delta-coded: a few numbers per change of slope,
exact at every pool size), the knees, Belady's MIN at its sizes, the ceiling and the labels in
the page's language; it draws the step functions per pixel column (the least and most hits over
the sizes a column covers, so no step is lost at any zoom) and evaluates the marker's pool size
itself.
"""
from __future__ import annotations

import json

from blockviz.i18n import t
from blockviz.render.capacity import capacity_words, ceiling_lines, knee_line, pct
from blockviz.render.theme import css_vars
from blockviz.sim.capacity import KNEE_FRACTION, hit_rate
from blockviz.sim.curve import hit_blocks_at

HEIGHT = 430


def _deltas(values: list[int]) -> list[int]:
    return [v - prev for prev, v in zip([0, *values], values)]


def default_pool(result: dict) -> int:
    """Where the marker starts: the first order's knee, else the middle of the sizes."""
    knee = result["reports"][0]["curve"]["knee"]
    sizes = result["sizes"]
    return int(knee if knee is not None else sizes[len(sizes) // 2])


def skipped_words(result: dict, lang: str) -> str | None:
    s = result.get("optimal_skipped")
    if not s:
        return None
    return t("curve_best_skipped", lang, blocks=f"{s['blocks']:,}", most=f"{s['most']:,}")


def curve_data(result: dict, lang: str, *, bytes_per_token: int | None, height: int = HEIGHT) -> str:
    """The element's data, as one JSON text (the page caches it per result, language and model;
    :func:`with_marker` adds where the marker is)."""
    first = result["reports"][0]
    bs = first["block_size"]
    orders = []
    for rep in result["reports"]:
        c = rep["curve"]
        orders.append({"id": rep["free_order"], "name": t(f"cap_order_{rep['free_order']}", lang),
                       "dx": _deltas(c["xs"]), "dv": _deltas(c["vals"]), "s": c["slopes"],
                       "knee": c["knee"]})
    # [[pool_blocks, MIN's hit tokens], ...] (empty when MIN was not computed)
    best = [[p["pool_blocks"], p["optimal_hits"]] for p in first["points"] if "optimal_hits" in p]
    labels = {k: t(f"curve_{k}", lang) for k in (
        "at", "blocks", "hits_of", "best", "best_n", "best_above", "best_above_band", "ceiling",
        "ceiling_at", "ceiling_above_best", "ceiling_above_best_band", "ceiling_above_lru", "policy_gap",
        "knee_at", "drag")}
    labels |= {"tokens": t("capt_tokens", lang), "y": t("cap_axis_hit", lang),
               "x": t("capt_axis_tokens_gib" if bytes_per_token else "capt_axis_tokens", lang),
               "knee": t("capt_knee_mark", lang, pct=f"{100 * KNEE_FRACTION:.0f}")}
    data = {"lang": lang, "bs": bs, "bpt": bytes_per_token or None, "lo": result["largest"],
            "hi": max(result["working_set"], result["largest"] + 1), "queries": result["queries"],
            "ceiling": hit_rate(first["ceiling"]), "orders": orders, "optimal": best,
            "best_note": skipped_words(result, lang), "height": height, "labels": labels}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def with_marker(body: str, pool: int, seq: int) -> str:
    """:func:`curve_data`'s text with the marker's pool size and Python's move count (the element
    moves its marker only when ``seq`` changes: a rerun never pulls it back)."""
    return body[:-1] + f',"pool":{int(pool)},"seq":{int(seq)}}}'


def curve_reading_lines(result: dict, lang: str, *, bytes_per_token: int | None = None) -> list[str]:
    """What the whole curve says (plain text, a sentence or two each): the ceiling; per order its
    knee and what twice that capacity adds; at the first order's knee, the best any policy could
    do and which costs more there, the eviction order or the size."""
    reports = result["reports"]
    bs = reports[0]["block_size"]
    q = result["queries"]
    ceiling = hit_rate(reports[0]["ceiling"])
    out = ceiling_lines(ceiling, lang)
    if ceiling <= 0:
        return out
    for rep in reports:
        c = rep["curve"]
        k = c["knee"]
        if k is None:       # (the working set reaches the ceiling: only a trace without reuse)
            continue
        rate = hit_blocks_at(c["xs"], c["vals"], c["slopes"], k) * bs / q
        out.append(knee_line(rep["free_order"], k, rate, ceiling, lang, block_size=bs,
                             bytes_per_token=bytes_per_token))
        twice = min(2 * k, result["working_set"])
        if twice > k:
            r2 = hit_blocks_at(c["xs"], c["vals"], c["slopes"], twice) * bs / q
            out.append(t("curve_read_double", lang, order=t(f"cap_order_{rep['free_order']}", lang),
                         cap=capacity_words(twice * bs, bytes_per_token, lang),
                         rate=pct(r2), gain=pct(max(0.0, r2 - rate))))
    first = reports[0]
    k = first["curve"]["knee"]
    at_knee = next((p for p in first["points"] if p["pool_blocks"] == k), None)
    if at_knee is not None and "optimal_hits" in at_knee:
        lru, best = at_knee["hits"] / q, at_knee["optimal_hits"] / q
        policy, size = best - lru, ceiling - best
        out.append(t("curve_read_policy", lang, best=pct(best),
                     order=t(f"cap_order_{first['free_order']}", lang),
                     policy=f"{100 * policy:.1f}", size=f"{100 * size:.1f}") + " "
                   + t("curve_read_policy_more" if policy > size else "curve_read_size_more", lang))
    why = skipped_words(result, lang)
    if why:
        out.append(t("curve_read_no_best", lang, why=why))
    return out


CURVE_CSS = """
.bvc { color: var(--bv-ink); font: 15px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif;
       user-select: none; }
.bvc-read { display: flex; flex-wrap: wrap; gap: .5em; margin: 0 0 .45em 0; }
.bvc-card { border: 1px solid var(--bv-rule); border-left-width: 5px; border-radius: .4em;
            padding: .2em .6em .25em .55em; background: var(--bv-panel); min-width: 8em; flex: 1 1 8em; }
.bvc-cl { color: var(--bv-muted); font-size: .85em; line-height: 1.25; }
.bvc-unit { font-size: .6em; font-weight: 400; color: var(--bv-muted); }
.bvc-cv { font-size: 1.5em; font-weight: 700; font-variant-numeric: tabular-nums; line-height: 1.2;
          white-space: nowrap; }
.bvc-cs { color: var(--bv-muted); font-size: .8em; font-variant-numeric: tabular-nums; }
.bvc-card.bvc-cap { border-left-color: var(--bv-ink); }
.bvc-card.bvc-o-split { border-left-color: var(--bv-green); }
.bvc-card.bvc-o-split .bvc-cv { color: var(--bv-green); }
.bvc-card.bvc-o-append { border-left-color: var(--bv-muted); }
.bvc-card.bvc-o-best { border-left-color: var(--bv-blue); }
.bvc-card.bvc-o-best .bvc-cv { color: var(--bv-blue); }
.bvc-card.bvc-o-ceiling { border-left-color: var(--bv-faint); }
.bvc-legend { display: flex; flex-wrap: wrap; gap: .2em 1.2em; font-size: .9em; color: var(--bv-muted);
              margin: 0 0 .2em 0; }
.bvc-li { display: inline-flex; align-items: center; gap: .35em; white-space: nowrap; }
.bvc-plot { display: block; cursor: ew-resize; touch-action: none; outline: none; }
.bvc-plot:focus-visible { outline: 2px solid var(--bv-blue-focus); outline-offset: 2px; }
.bvc-grid line { stroke: var(--bv-grid); stroke-width: 1; }
.bvc-axis { stroke: var(--bv-border); stroke-width: 1; }
.bvc-tick { fill: var(--bv-muted); font-size: 14px; font-variant-numeric: tabular-nums; }
.bvc-gib { fill: var(--bv-faint); font-size: 13px; }
.bvc-title { fill: var(--bv-muted); font-size: 14px; }
.bvc-line { fill: none; stroke-width: 3; stroke-linejoin: round; }
.bvc-k { stroke-width: 3; }
.bvc-o-split .bvc-k, .bvc-line.bvc-o-split { stroke: var(--bv-green); }
.bvc-o-append .bvc-k, .bvc-line.bvc-o-append { stroke: var(--bv-ink); stroke-dasharray: 7 5;
                                               stroke-width: 2; }
.bvc-o-best .bvc-k, .bvc-line.bvc-o-best { stroke: var(--bv-blue); stroke-width: 2.5; }
.bvc-o-best .bvc-k-dot, .bvc-best-dot { fill: var(--bv-blue); stroke: var(--bv-paper); stroke-width: 1.5; }
.bvc-o-ceiling .bvc-k, .bvc-line.bvc-o-ceiling { stroke: var(--bv-muted); stroke-dasharray: 6 5;
                                                 stroke-width: 1.5; }
.bvc-gap { fill: var(--bv-blue-bg); stroke: none; opacity: .85; }
.bvc-knee { fill: var(--bv-orange); stroke: var(--bv-ink); stroke-width: 1; }
.bvc-knee-line { stroke: var(--bv-orange); stroke-width: 2; stroke-dasharray: 3 4; }
.bvc-label { font-size: 15px; paint-order: stroke; stroke: var(--bv-veil); stroke-width: 5px;
             stroke-linejoin: round; }
.bvc-knee-label { fill: var(--bv-orange); font-weight: 700; font-size: 16px; }
.bvc-ceiling-label { fill: var(--bv-muted); }
.bvc-gap-label { fill: var(--bv-blue); font-weight: 600; }
.bvc-mline { stroke: var(--bv-ink); stroke-width: 1.5; }
.bvc-mdot { stroke: var(--bv-paper); stroke-width: 2; }
.bvc-mdot.bvc-o-split { fill: var(--bv-green); }
.bvc-mdot.bvc-o-append { fill: var(--bv-ink); }
.bvc-grip { fill: var(--bv-ink); }
.bvc-hint { color: var(--bv-muted); font-size: .85em; margin-top: .25em; }
"""


def curve_css() -> str:
    """The element's stylesheet (its shadow root gets the palette on :host)."""
    return css_vars() + CURVE_CSS
