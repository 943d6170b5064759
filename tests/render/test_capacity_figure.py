"""The capacity-planning figures and their reading, on hand-built points: one trace per free order
with the pool sizes as x and the hit rates as y, axis titles and legend in the chosen language, the
no-eviction mark where both orders stop evicting, and the numbers the page puts into words."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from blockviz.render import capacity as C
from blockviz.sim.capacity import Point

SIZES = [8, 16, 32, 64]
# pool size -> (split, append): (hit rate, evictions, preemptions). Split leads in tight pools;
# from 32 on both hit the same; from 64 on neither evicts.
DATA = {8: ((0.40, 90, 2), (0.35, 95, 2)), 16: ((0.70, 40, 0), (0.60, 55, 0)),
        32: ((0.80, 10, 0), (0.80, 20, 0)), 64: ((0.80, 0, 0), (0.80, 0, 0))}


def points(data=DATA) -> list[Point]:
    out = []
    for size, pair in data.items():
        for order, (rate, ev, pre) in zip(("split", "append"), pair):
            out.append(Point(size, order, queries=1000, hits=round(rate * 1000), evictions=ev,
                             preemptions=pre))
    return out


@pytest.mark.parametrize("lang, x_title, y_title, split_name", [
    ("en", "pool size (blocks)", "prefix-cache hit rate", "split (vLLM ≥ 0.24)"),
    ("zh", "块池大小（块）", "前缀缓存命中率", "split（vLLM ≥ 0.24）"),
])
def test_hit_rate_figure_has_one_line_per_order(lang, x_title, y_title, split_name):
    fig = C.hit_rate_figure(points(), lang)
    assert [tr.type for tr in fig.data] == ["scatter", "scatter"]
    split, append = fig.data
    assert split.name == split_name and append.name.startswith("append")
    for trace, k in ((split, 0), (append, 1)):
        assert list(trace.x) == SIZES
        assert list(trace.y) == [DATA[s][k][0] for s in SIZES]
        assert [list(c) for c in trace.customdata] == [[DATA[s][k][1], DATA[s][k][2]] for s in SIZES]
    assert split.line.dash == "solid" and append.line.dash == "dash"
    assert fig.layout.xaxis.title.text == x_title and fig.layout.yaxis.title.text == y_title
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == SIZES
    assert fig.layout.yaxis.tickformat == ".0%"
    # the no-eviction mark: a shape at the data value, its label at log10 (a log axis)
    (shape,) = fig.layout.shapes
    assert shape.x0 == shape.x1 == 64
    (note,) = fig.layout.annotations
    assert note.x == pytest.approx(math.log10(64))
    assert note.text == C.t("cap_no_evict_mark", lang)


def test_hit_rate_figure_round_trips_to_json_with_the_sizes():
    spec = C.hit_rate_figure(points(), "en").to_plotly_json()
    assert [list(tr["x"]) for tr in spec["data"]] == [SIZES, SIZES]


def test_no_mark_when_some_order_always_evicts():
    data = DATA | {64: ((0.80, 3, 0), (0.80, 5, 0))}
    fig = C.hit_rate_figure(points(data), "en")
    assert not fig.layout.shapes and not fig.layout.annotations


@pytest.mark.parametrize("lang, titles", [
    ("en", ("evictions (cached blocks reused)", "preemptions (pool too small)")),
    ("zh", ("淘汰（被复用的已缓存块）", "抢占（块池不够用）")),
])
def test_pressure_figure_shows_evictions_and_preemptions_per_order(lang, titles):
    fig = C.pressure_figure(points(), lang)
    assert len(fig.data) == 4
    evictions = [tr for tr in fig.data if tr.xaxis == "x"]
    preemptions = [tr for tr in fig.data if tr.xaxis == "x2"]
    assert [list(tr.y) for tr in evictions] == [[DATA[s][k][1] for s in SIZES] for k in (0, 1)]
    assert [list(tr.y) for tr in preemptions] == [[DATA[s][k][2] for s in SIZES] for k in (0, 1)]
    assert all(list(tr.x) == SIZES for tr in fig.data)
    assert tuple(a.text for a in fig.layout.annotations) == titles
    assert fig.layout.xaxis.title.text == fig.layout.xaxis2.title.text == C.t("cap_axis_pool", lang)
    assert [tr.showlegend for tr in fig.data] == [True, True, False, False]   # one legend entry each


def test_reading_finds_ceiling_meeting_point_and_gap():
    r = C.reading(points())
    assert r.ceiling == 0.80
    assert r.no_evict == 64 and r.meet == 32
    assert r.reach == {"split": 32, "append": 32}
    assert r.gap == (16, 0.70, 0.60)


def test_reading_takes_the_roomy_pool_as_ceiling_not_a_preempting_one():
    # a tight pool that preempts can score above the roomy one: its requests are looked up again
    data = DATA | {16: ((0.83, 40, 5), (0.60, 55, 5))}
    r = C.reading(points(data))
    assert r.ceiling == 0.80 and r.reach == {"split": 16, "append": 32}   # at least the ceiling


def test_reading_when_the_orders_never_differ():
    same = {s: (pair[0], pair[0]) for s, pair in DATA.items()}
    r = C.reading(points(same))
    assert r.gap is None and r.meet == 8
    assert C.reading_lines(r, "en")[1] == C.t("cap_read_no_gap", "en")


@pytest.mark.parametrize("lang, words", [
    ("en", ["80.0%", "from 32 blocks on", "at 16 blocks: 70.0% against 60.0% (10.0 points)",
            "From 32 blocks on, both orders hit the same", "From 64 blocks on, neither order evicts"]),
    ("zh", ["80.0%", "从 32 个块起达到", "在 16 个块时：70.0% 对 60.0%（高 10.0 个百分点）",
            "从 32 个块起，两种顺序的命中率相同", "从 64 个块起，两种顺序都不再淘汰"]),
])
def test_reading_lines_put_the_numbers_into_words(lang, words):
    text = " ".join(C.reading_lines(C.reading(points()), lang))
    for w in words:
        assert w in text


def test_the_figure_module_is_pure():
    code = ("import sys, blockviz.render.capacity; "
            "assert 'streamlit' not in sys.modules, 'render imports streamlit'")
    subprocess.run([sys.executable, "-c", code], check=True)
