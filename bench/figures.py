"""Benchmark ``figures``: what a rerun pays to draw a cached plotly figure, and whether the app's
``FrozenFigure`` (blockviz.ui.cache) still earns its place.

The metrics chart of a run (blockviz.render.metrics) of 120, 2,000 and 8,000 steps of the random
workload, drawn as ``st.plotly_chart`` draws it on every rerun (plotly's figure check, then its
JSON): a plain cached figure (plotly deep-copies it to a dict each time) against the same figure
frozen (its dict made once), the samples interleaved; a ratio is the median of the paired ratios.
Beside it, what the page's two stylesheets cost ``st.html`` to clean on a rerun. No budget: the
numbers decide what the app keeps.
"""
from __future__ import annotations

from .timing import fmt_s, median, ratio, table, timed

NAME = "figures"
STEPS = (120, 2_000, 8_000)
QUICK_STEPS = (120,)


def _chart(fig) -> str:
    """What ``st.plotly_chart`` does with a figure on every draw."""
    import plotly.io
    import plotly.tools
    return plotly.io.to_json(plotly.tools.return_figure_from_figure_or_data(fig, validate_figure=True),
                             validate=False)


def _case(events: int, repeat: int) -> dict:
    from blockviz.render.metrics import metrics_figure, metrics_series
    from blockviz.sim.runner import run
    from blockviz.teach import workload
    from blockviz.ui.cache import frozen

    scenario = workload.generate(kind="random", seed=1, num_events=events - 1, num_blocks=64)
    _, tl = run(workload.loaded(scenario), payloads=False)
    series = metrics_series([tl.step_stats(i) for i in range(len(tl))], has_external=False)
    plain = metrics_figure(series, len(tl) // 2, "en")
    frozen_fig = frozen(metrics_figure(series, len(tl) // 2, "en"))
    if _chart(plain) != _chart(frozen_fig):
        raise RuntimeError("a frozen figure draws other JSON than the plain one")
    samples: dict[str, list[float]] = {"plain": [], "frozen": []}
    ratios = []
    for _ in range(max(3, repeat)):
        a = timed(lambda: _chart(plain))[0]
        b = timed(lambda: _chart(frozen_fig))[0]
        samples["plain"].append(a)
        samples["frozen"].append(b)
        ratios.append(ratio(a, b))
    return {"steps": len(tl), "median_s": {k: median(v) for k, v in samples.items()},
            "plain_over_frozen": median(ratios)}


def run(repeat: int, quick: bool, say) -> dict:
    from streamlit.string_util import clean_text

    from blockviz.render import theme
    from blockviz.render.authoring import AUTHOR_CSS

    cases = []
    for steps in QUICK_STEPS if quick else STEPS:
        say(f"  the metrics chart of {steps:,} steps, plain and frozen in turn")
        cases.append(_case(steps, repeat))
    css = theme.css(False)
    clean = median([timed(lambda: (clean_text(css), clean_text(AUTHOR_CSS)))[0]
                    for _ in range(max(5, repeat))])
    return {"cases": cases, "stylesheets": {"chars": len(css) + len(AUTHOR_CSS), "clean_text_s": clean}}


def render(result: dict) -> str:
    rows = [[f"{c['steps']:,}", fmt_s(c["median_s"]["plain"]), fmt_s(c["median_s"]["frozen"]),
             f"{c['plain_over_frozen']:.1f}x"] for c in result["cases"]]
    out = table(["metrics chart, steps", "plain figure", "frozen figure", "plain / frozen"], rows)
    s = result["stylesheets"]
    return out + (f"\n  st.html cleaning the page's stylesheets ({s['chars']:,} characters) on a "
                  f"rerun: {fmt_s(s['clean_text_s'])}")
