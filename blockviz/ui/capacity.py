"""The capacity-planning page: pick a workload (kind and sizes), replay it at several pool sizes
with both free orders (:func:`blockviz.teach.workload.capacity_plan`, payloads off), and see the
prefix-cache hit rate against the pool size — one line per free order — with the evictions and
preemptions behind it and how to read the curves.

Bounded so a plan takes a few seconds (at most MAX_EVENTS events and MAX_SIZES pool sizes, short
prompts). State (this session only): the last parameters computed and a few plans, keyed by their
parameters (a plan is immutable data: the same parameters always give the same numbers).
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from blockviz.i18n import t
from blockviz.i18n.errors import localize_error
from blockviz.render import theme
from blockviz.render.capacity import hit_rate_figure, pressure_figure, reading, reading_lines
from blockviz.render.theme import heading_html
from blockviz.sim.capacity import Point
from blockviz.teach.workload import KINDS, Workload, capacity_plan, default_pool_sizes, generate
from blockviz.ui import capacity_trace, jobs
from blockviz.ui import state as session
from blockviz.ui.cache import recent
from blockviz.ui.nav import md_fields, page_top

MAX_EVENTS, MAX_SIZES = 500, 10
BLOCK_SIZES = (4, 8, 16, 32, 64)
# whole-number parameters, in the order the form shows them: (i18n label key, i18n help key or
# None, lowest, highest allowed, default); block_size is one of BLOCK_SIZES. The defaults are the
# generator's own, 300 events: a visible gap between the orders in half a second.
PARAMS = {"num_events": ("cap_events", "cap_events_help", 10, MAX_EVENTS, 300),
          "prefix_blocks": ("cap_prefix_blocks", "cap_prefix_blocks_help", 1, 16, 4),
          "new_tokens": ("cap_new_tokens", "cap_new_tokens_help", 1, 128, 12),
          "num_prefixes": ("cap_num_prefixes", "cap_num_prefixes_help", 1, 8, 2),
          "max_live": ("cap_max_live", None, 1, 16, 4),
          "max_turns": ("cap_max_turns", "cap_max_turns_help", 1, 8, 4),
          "seed": ("cap_seed", None, 0, 2**31 - 1, 0),
          "num_sizes": ("cap_num_sizes", "cap_num_sizes_help", 2, MAX_SIZES, 8)}
DEFAULTS = {"kind": "shared_prefix", "block_size": 16} | {k: v[4] for k, v in PARAMS.items()}

KEEP = 6


@dataclass(frozen=True)
class Plan:
    params: tuple                 # sorted (name, value) pairs: the cache key
    sizes: tuple[int, ...]
    points: tuple[Point, ...]
    events: int
    requests: int
    seconds: float

    @property
    def runs(self) -> int:
        return len(self.points)


def params_key(params: Mapping) -> tuple:
    return tuple(sorted(params.items()))


def check(params: Mapping) -> list[tuple[str, dict]]:
    """What is wrong with the parameters, as (i18n key, fields); empty when they may run."""
    problems: list[tuple[str, dict]] = []
    if params.get("kind") not in KINDS:
        problems.append(("cap_bad_kind", {"value": params.get("kind")}))
    if params.get("block_size") not in BLOCK_SIZES:
        problems.append(("cap_bad_value", {"field": "cap_block_size", "value": params.get("block_size"),
                                           "lo": BLOCK_SIZES[0], "hi": BLOCK_SIZES[-1]}))
    for name, (label, _, lo, hi, _) in PARAMS.items():
        v = params.get(name)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            problems.append(("cap_bad_value", {"field": label, "value": v, "lo": lo, "hi": hi}))
    return problems


def workload(params: Mapping) -> Workload:
    """The form's workload: every parameter but the number of pool sizes is Workload's own."""
    return Workload(**{k: params[k] for k in ("kind", "block_size", *PARAMS) if k != "num_sizes"})


# -- the page --------------------------------------------------------------------------------
def page() -> None:
    lang = page_top()
    st.html(f'<div class="bv"><div class="bv-title">{theme.esc(t("cap_title", lang))}</div></div>')
    toy, real = st.tabs([t("capt_tab_toy", lang), t("capt_tab_trace", lang)])
    with toy:
        _toy_tab(lang)
    with real:
        capacity_trace.tab(lang)


def _toy_tab(lang: str) -> None:
    ss = st.session_state
    st.html(f'<div class="bv"><div class="bv-small">{theme.esc(t("cap_intro", lang))}</div></div>')
    submitted = _form(lang)
    st.caption(t("cap_bounds", lang, events=MAX_EVENTS, sizes=MAX_SIZES))
    if submitted is not None:
        _submit(submitted, lang)
    computed = jobs.follow(session.CAP_PLAN_JOB, lang, _planned)
    shown = ss.get(session.CAP_PARAMS)
    plan = ss.get(session.CAP_RESULTS, {}).get(params_key(shown)) if shown else None
    if plan is None:
        st.info(t("cap_none_yet", lang))
    else:
        _show(plan, lang, computed)


def _form(lang: str) -> dict | None:
    """The parameters; on the run after Compute was pressed, the values submitted (each widget's)."""
    ss = st.session_state
    start = ss.get(session.CAP_PARAMS) or DEFAULTS
    # Each widget is created with the value it holds as its default (the session's, else the
    # plan shown or the generator's), never written into session state first: Streamlit sends a
    # value written that way to the browser once, on that run only, and a browser that drew the
    # next run without having kept it (the language switched within half a second of opening the
    # page) showed and submitted each widget's own default instead: zeros and the first block
    # size, a form the check refused.
    now = {name: _whole(ss.get(f"w_cap_{name}", start[name])) for name in ("kind", "block_size", *PARAMS)}
    with st.form("cap_form", border=True):
        st.markdown(f"**{t('cap_workload', lang)}**")
        st.segmented_control(t("cap_kind", lang), KINDS, key="w_cap_kind", required=True,
                             default=now["kind"] if now["kind"] in KINDS else KINDS[0],
                             format_func=lambda k: t(f"cap_kind_{k}", lang), help=t("cap_kind_help", lang))
        cols = st.columns(5)
        with cols[0]:
            size = now["block_size"]
            st.selectbox(t("cap_block_size", lang), BLOCK_SIZES, key="w_cap_block_size",
                         index=BLOCK_SIZES.index(size) if size in BLOCK_SIZES else 0)
        for i, (name, (label, help_key, _, hi, _)) in enumerate(PARAMS.items()):
            with cols[(i + 1) % 5]:
                # No min/max here: Streamlit would silently reset a value out of range; check()
                # refuses it with a message that says what is allowed.
                st.number_input(t(label, lang), value=now[name], step=1, key=f"w_cap_{name}",
                                help=t(help_key, lang, max=hi) if help_key else None)
        return now if st.form_submit_button(t("cap_compute", lang), key="b_cap_compute", type="primary",
                                            icon=":material/query_stats:") else None


def _whole(v):
    """A whole float as an int (number_input gives ints for int bounds; be strict anyway)."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _submit(params: dict, lang: str) -> None:
    """Check the form's parameters; show their plan if this session has it, else start computing
    it in a worker (the page shows its progress, then the plan)."""
    ss = st.session_state
    problems = check(params)
    for key, fields in problems:
        if "field" in fields:
            fields = fields | {"field": t(fields["field"], lang)}
        st.error(t(key, lang, **md_fields(fields, lang)))
    if problems:
        return
    if params_key(params) in ss.setdefault(session.CAP_RESULTS, {}):
        ss[session.CAP_PARAMS] = params
    else:
        jobs.start(session.CAP_PLAN_JOB, ComputePlan(params_key(params)), "plan", lang)


@dataclass(frozen=True)
class ComputePlan:
    """The plan of some valid parameters (see :func:`check`; ``params_key``'s pairs), in a worker;
    ValueError if the workload is beyond the scenario format's limits."""
    params: tuple

    def __call__(self, report) -> Plan:
        params = dict(self.params)

        def progress(done: int, total: int) -> None:     # (as capacity_plan reports it)
            report(done=done, total=total, runs=2 * params["num_sizes"], events=params["num_events"])
        start = time.perf_counter()
        scenario = generate(workload(params))
        sizes = default_pool_sizes(scenario, params["num_sizes"])
        points = capacity_plan(scenario, sizes, progress=progress)
        requests = sum(1 for s in scenario.steps if s.kind == "arrive")
        return Plan(self.params, tuple(sizes), tuple(points), len(scenario.steps), requests,
                    time.perf_counter() - start)


def _planned(state, task: ComputePlan, lang: str) -> bool:
    """Take a plan's job once it has ended; True when it made the plan (its bar says so)."""
    ss = st.session_state
    if state.status == "done":
        plan: Plan = state.result
        recent(ss.setdefault(session.CAP_RESULTS, {}), plan.params, lambda: plan, KEEP)
        ss[session.CAP_PARAMS] = dict(task.params)
        st.progress(1.0, text=t("cap_done", lang, runs=plan.runs, events=plan.events, s=plan.seconds))
        return True
    if state.status == "failed" and isinstance(state.error, ValueError):
        ss[jobs.message_key(session.CAP_PLAN_JOB)] = ("cap_too_big", md_fields({"msg": state.error}, lang))
    else:
        ss[jobs.message_key(session.CAP_PLAN_JOB)] = jobs.stopped_message(
            state, lang, {"what": t("cap_workload", lang), "cmd": "-"})
    return False


def _show(plan: Plan, lang: str, computed: bool) -> None:
    points = list(plan.points)
    if not computed:                  # (a plan computed on this run: its progress bar says this)
        st.caption(t("cap_cached", lang, runs=plan.runs, events=plan.events, requests=plan.requests,
                     s=plan.seconds))
    stopped = [f"{p.pool_blocks} / {p.free_order}: {localize_error(p.error, lang)}"
               for p in points if p.error]
    if stopped:
        st.warning(t("cap_run_errors", lang, **md_fields({"msg": "; ".join(stopped)})))
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.html(heading_html(t("cap_hit_title", lang)))
        st.plotly_chart(hit_rate_figure(points, lang), key="cap_hit_chart",
                        config={"displayModeBar": False})
        st.html(heading_html(t("cap_pressure_title", lang)))
        st.plotly_chart(pressure_figure(points, lang), key="cap_pressure_chart",
                        config={"displayModeBar": False})
    with right:
        st.html(heading_html(t("cap_read_title", lang)))
        st.markdown("\n".join(f"- {line}" for line in reading_lines(reading(points), lang)))
        st.html(heading_html(t("cap_how_title", lang)))
        st.markdown(t("cap_how", lang))
    with st.expander(t("cap_numbers", lang)):
        st.dataframe([capacity_trace.point_row(p, lang) for p in points], hide_index=True)


