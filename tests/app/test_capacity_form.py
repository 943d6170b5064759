"""The workload form holds its values in the page itself, not only in one run's message.

A browser draws a widget from what the run sends it: a value written into session state before
the widget reaches the browser once (on that run), otherwise the widget shows the browser's own
copy, and without one its default. A language switch soon after the page opened (before the
browser kept the first run's values) redrew the form from the defaults: 0 in every number field
and the first block size, and Compute then sent those (CI: test_capacity_browser's [zh] case timed
out on "0 is not allowed" errors). So each widget's default must be the value the session holds,
on every run — the first, after a language switch, after a computed plan."""
from __future__ import annotations

from blockviz.ui import capacity as C

from .test_capacity import compute, open_capacity


def shown_without_a_copy(p) -> dict:
    """What a browser that kept no value of its own draws in each field: the widget's default."""
    out = {name: p.at.number_input(key=f"w_cap_{name}").proto.default for name in C.PARAMS}
    out["block_size"] = C.BLOCK_SIZES[p.at.selectbox(key="w_cap_block_size").proto.default]
    kinds = p.at.segmented_control(key="w_cap_kind").proto.default     # (none: nothing selected)
    out["kind"] = C.KINDS[kinds[0]] if kinds else None
    return out


def held(p) -> dict:
    return {name: p.state[f"w_cap_{name}"] for name in ("kind", "block_size", *C.PARAMS)}


def test_every_run_sends_the_values_the_session_holds(page):
    p = open_capacity(page)
    assert held(p) == C.DEFAULTS
    assert shown_without_a_copy(p) == C.DEFAULTS
    p.at.segmented_control(key="w_lang").set_value("zh")            # a language switch
    p.run()
    assert shown_without_a_copy(p) == held(p) == C.DEFAULTS
    compute(p, {"w_cap_num_events": 60, "w_cap_num_sizes": 4, "w_cap_seed": 3})
    p.at.segmented_control(key="w_lang").set_value("en")            # and back, after a plan
    p.run()
    expected = dict(C.DEFAULTS, num_events=60, num_sizes=4, seed=3)
    assert shown_without_a_copy(p) == held(p) == expected


def test_the_trace_tab_sends_its_source_on_every_run(page):
    """The real-traffic tab's source switch (upload or generate) had its value written into session
    state before the widget: sent once, on the first run; every later run sent no default (nothing
    selected) to a browser that kept no value of its own."""
    def sent(p):
        (i,) = p.at.segmented_control(key="w_capt_source").proto.default
        return ("upload", "generate")[i]

    p = open_capacity(page)
    assert sent(p) == p.state["w_capt_source"] == "upload"
    p.at.segmented_control(key="w_lang").set_value("zh")            # a language switch
    p.run()
    assert sent(p) == p.state["w_capt_source"] == "upload"
    p.at.segmented_control(key="w_capt_source").set_value("generate")
    p.run()
    p.at.segmented_control(key="w_lang").set_value("en")
    p.run()
    assert sent(p) == p.state["w_capt_source"] == "generate"
