"""The capacity-planning page: pick a workload (kind and sizes), replay it at several pool sizes
with both free orders (:func:`blockviz.teach.workload.capacity_plan`, payloads off), and see the
prefix-cache hit rate against the pool size — one line per free order — with the evictions and
preemptions behind it and how to read the curves.

Bounded so a plan takes a few seconds (at most MAX_EVENTS events and MAX_SIZES pool sizes, short
prompts). State (this session only): the last parameters computed and a few plans, keyed by their
parameters (a plan is immutable data: the same parameters always give the same numbers).
"""
from __future__ import annotations

import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from blockviz.i18n import t
from blockviz.i18n.errors import localize_error
from blockviz.render import theme
from blockviz.render.capacity import (
    ORDERS,
    hit_rate_figure,
    latency_figure,
    pressure_figure,
    reading,
    reading_lines,
)
from blockviz.scenario import ScenarioError
from blockviz.scenario.trace import TraceError, iter_trace
from blockviz.sim.capacity import (
    KNEE_FRACTION,
    KV_PRESETS,
    TIMED_DEFAULTS,
    Point,
    geometric_sizes,
    hit_rate,
    points_of,
    timed_settings,
    trace_extent,
)
from blockviz.sim.sweep import LocalExecutor, sweep
from blockviz.teach.tracegen import (
    PLAYER_BLOCK_TOKENS,
    PLAYER_MAX_BLOCKS,
    PLAYER_MAX_WINDOW,
    PLAYER_SCALE,
    TraceWorkload,
    write_generated,
)
from blockviz.teach.workload import (
    KINDS,
    Workload,
    capacity_plan,
    default_pool_sizes,
    generate,
)
from blockviz.ui import state as S
from blockviz.ui import worker
from blockviz.ui.nav import (
    default_lang,
    go_to_player,
    language_toggle,
    md_escape,
    md_fields,
    session_lang,
)

MAX_EVENTS, MAX_SIZES = 500, 10
BLOCK_SIZES = (4, 8, 16, 32, 64)
# whole-number parameters: (lowest, highest) allowed; block_size is one of BLOCK_SIZES
LIMITS = {"num_events": (10, MAX_EVENTS), "prefix_blocks": (1, 16), "new_tokens": (1, 128),
          "num_prefixes": (1, 8), "max_live": (1, 16), "max_turns": (1, 8), "seed": (0, 2**31 - 1),
          "num_sizes": (2, MAX_SIZES)}
# the generator's own defaults, 300 events: a visible gap between the orders in half a second
DEFAULTS = {"kind": "shared_prefix", "num_events": 300, "block_size": 16, "prefix_blocks": 4,
            "new_tokens": 12, "num_prefixes": 2, "max_live": 4, "max_turns": 4, "seed": 0,
            "num_sizes": 8}
# parameter -> (i18n label key, i18n help key or None), in the order the form shows them
FIELDS = {"num_events": ("cap_events", "cap_events_help"),
          "prefix_blocks": ("cap_prefix_blocks", "cap_prefix_blocks_help"),
          "new_tokens": ("cap_new_tokens", "cap_new_tokens_help"),
          "num_prefixes": ("cap_num_prefixes", "cap_num_prefixes_help"),
          "max_live": ("cap_max_live", None),
          "max_turns": ("cap_max_turns", "cap_max_turns_help"),
          "seed": ("cap_seed", None),
          "num_sizes": ("cap_num_sizes", "cap_num_sizes_help")}

PARAMS = "bv_cap_params"      # the parameters of the plan shown (the last valid ones computed)
PLAN_JOB = "bv_cap_plan_job"  # worker.Job computing a plan
PLANNING = "bv_cap_planning"  # the parameters it computes
RESULTS = "bv_cap_results"    # {parameters key: Plan}, this session's last few
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
    for name, (lo, hi) in LIMITS.items():
        v = params.get(name)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            problems.append(("cap_bad_value", {"field": FIELDS[name][0], "value": v, "lo": lo, "hi": hi}))
    return problems


def workload(params: Mapping) -> Workload:
    return Workload(kind=params["kind"], block_size=params["block_size"],
                    num_events=params["num_events"], seed=params["seed"],
                    max_live=params["max_live"], prefix_blocks=params["prefix_blocks"],
                    new_tokens=params["new_tokens"], num_prefixes=params["num_prefixes"],
                    max_turns=params["max_turns"])


def compute(params: Mapping, progress: Callable[[int, int], None] | None = None) -> Plan:
    """The plan for valid parameters (see :func:`check`); ValueError if the workload is beyond the
    scenario format's limits. ``progress(done, total)`` as capacity_plan reports it."""
    start = time.perf_counter()
    scenario = generate(workload(params))
    sizes = default_pool_sizes(scenario, params["num_sizes"])
    points = capacity_plan(scenario, sizes, progress=progress)
    requests = sum(1 for s in scenario.steps if s.kind == "arrive")
    return Plan(params_key(params), tuple(sizes), tuple(points), len(scenario.steps), requests,
                time.perf_counter() - start)


# -- the page --------------------------------------------------------------------------------
def page() -> None:
    lang = session_lang(default_lang())
    if st.query_params:                 # the player's link does not describe this page
        st.query_params.clear()
    st.html(theme.css(False))
    with st.sidebar:
        language_toggle(lang)
    st.html(f'<div class="bv"><div class="bv-title">{theme.esc(t("cap_title", lang))}</div></div>')
    toy, real = st.tabs([t("capt_tab_toy", lang), t("capt_tab_trace", lang)])
    with toy:
        _toy_tab(lang)
    with real:
        _trace_tab(lang)


def _toy_tab(lang: str) -> None:
    ss = st.session_state
    st.html(f'<div class="bv"><div class="bv-small">{theme.esc(t("cap_intro", lang))}</div></div>')
    submitted = _form(lang)
    st.caption(t("cap_bounds", lang, events=MAX_EVENTS, sizes=MAX_SIZES))
    if submitted:
        _submit(lang)
    ended = _ended(PLAN_JOB)
    computed = _planned(ended, lang) if ended is not None else False
    _poll(PLAN_JOB, lang)
    _job_message(PLAN_JOB, lang)
    plan = ss.get(RESULTS, {}).get(params_key(ss[PARAMS])) if ss.get(PARAMS) else None
    if plan is None:
        st.info(t("cap_none_yet", lang))
    else:
        _show(plan, lang, computed)


def _form(lang: str) -> bool:
    """The parameters; True on the run after Compute was pressed."""
    ss = st.session_state
    start = ss.get(PARAMS) or DEFAULTS
    for name in ("kind", "block_size", *FIELDS):
        if f"w_cap_{name}" not in ss:       # first visit, or back from another page
            ss[f"w_cap_{name}"] = start[name]
    with st.form("cap_form", border=True):
        st.markdown(f"**{t('cap_workload', lang)}**")
        st.segmented_control(t("cap_kind", lang), KINDS, key="w_cap_kind", required=True,
                             format_func=lambda k: t(f"cap_kind_{k}", lang), help=t("cap_kind_help", lang))
        names = list(FIELDS)
        cols = st.columns(5)
        with cols[0]:
            st.selectbox(t("cap_block_size", lang), BLOCK_SIZES, key="w_cap_block_size")
        for i, name in enumerate(names):
            label, help_key = FIELDS[name]
            with cols[(i + 1) % 5]:
                # No min/max here: Streamlit would silently reset a value out of range; check()
                # refuses it with a message that says what is allowed.
                st.number_input(t(label, lang), step=1, key=f"w_cap_{name}",
                                help=t(help_key, lang, max=LIMITS[name][1]) if help_key else None)
        return st.form_submit_button(t("cap_compute", lang), key="b_cap_compute", type="primary",
                                     icon=":material/query_stats:")


def _read_params() -> dict:
    ss = st.session_state
    out = {name: ss.get(f"w_cap_{name}") for name in ("kind", "block_size", *FIELDS)}
    for name in LIMITS:                   # number_input gives ints for int bounds; be strict anyway
        v = out[name]
        if isinstance(v, float) and v.is_integer():
            out[name] = int(v)
    return out


def _submit(lang: str) -> None:
    """Check the form's parameters; show their plan if this session has it, else start computing
    it in a worker (the page shows its progress, then the plan)."""
    ss = st.session_state
    params = _read_params()
    problems = check(params)
    for key, fields in problems:
        if "field" in fields:
            fields = fields | {"field": t(fields["field"], lang)}
        st.error(t(key, lang, **md_fields(fields, lang)))
    if problems:
        return
    if params_key(params) in ss.setdefault(RESULTS, {}):
        ss[PARAMS] = params
    elif _start(PLAN_JOB, ComputePlan(params_key(params)), "plan", lang):
        ss[PLANNING] = params


@dataclass(frozen=True)
class ComputePlan:
    """The plan of some parameters, in a worker (:func:`compute`)."""
    params: tuple

    def __call__(self, report) -> Plan:
        params = dict(self.params)

        def progress(done: int, total: int) -> None:
            report(done=done, total=total, runs=2 * params["num_sizes"], events=params["num_events"])
        return compute(params, progress)


def _planned(state, lang: str) -> bool:
    """Take a plan's job once it has ended; True when it made the plan (its bar says so)."""
    ss = st.session_state
    params = ss.pop(PLANNING, None)
    if params is None:
        return False
    if state.status == "done":
        plan: Plan = state.result
        results = ss.setdefault(RESULTS, {})
        while len(results) >= KEEP:
            del results[next(iter(results))]
        results[plan.params] = plan
        ss[PARAMS] = params
        st.progress(1.0, text=t("cap_done", lang, runs=plan.runs, events=plan.events, s=plan.seconds))
        return True
    if state.status == "failed" and isinstance(state.error, ValueError):
        ss[_msg(PLAN_JOB)] = ("cap_too_big", md_fields({"msg": state.error}, lang))
    else:
        ss[_msg(PLAN_JOB)] = _stopped_message(state, lang, {"what": t("cap_workload", lang), "cmd": "-"})
    return False


def _heading(text: str) -> None:
    st.html(f'<div class="bv"><div class="bv-h">{theme.esc(text)}</div></div>')


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
        _heading(t("cap_hit_title", lang))
        st.plotly_chart(hit_rate_figure(points, lang), key="cap_hit_chart",
                        config={"displayModeBar": False})
        _heading(t("cap_pressure_title", lang))
        st.plotly_chart(pressure_figure(points, lang), key="cap_pressure_chart",
                        config={"displayModeBar": False})
    with right:
        _heading(t("cap_read_title", lang))
        st.markdown("\n".join(f"- {line}" for line in reading_lines(reading(points), lang)))
        _heading(t("cap_how_title", lang))
        st.markdown(t("cap_how", lang))
    with st.expander(t("cap_numbers", lang)):
        st.dataframe([_row(p, lang) for p in points], hide_index=True)


def _row(p: Point, lang: str) -> dict:
    return {t("cap_col_pool", lang): p.pool_blocks, t("cap_col_order", lang): p.free_order,
            t("cap_col_hit", lang): f"{100 * p.hit_rate:.1f}%",
            t("cap_col_hits", lang): f"{p.hits:,} / {p.queries:,}",
            t("cap_col_evictions", lang): p.evictions, t("cap_col_preemptions", lang): p.preemptions,
            t("cap_col_error", lang): localize_error(p.error, lang) if p.error else ""}


# -- real traffic: a Mooncake-format trace -------------------------------------------------------
MAX_UPLOAD_MB = 200              # the uploader's limit (Streamlit's server.maxUploadSize is as large)
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB << 20
MAX_GEN_REQUESTS = 20_000
DEFAULT_REPLAY = 2_000           # requests replayed by default (the first N of a larger trace)
# The most requests one sweep on the page replays (in a worker process, one replay after another,
# within worker.JOB_BUDGET; the command line has no such bound): timed mode steps the scheduler.
MAX_REPLAY = {"sequence": 100_000, "timed": 2_000}   # capt_replay_help says these
TRACE_BLOCK_SIZES = (16, 32, 64, 128, 256, 512)
TRACE_MODES = ("sequence", "timed")
NO_MODEL = "-"
TRACE = "bv_capt_trace"          # the session's trace: TraceFile, or None
TRACE_ERROR = "bv_capt_error"    # a TraceError (or an i18n key) for the last upload / generation
SWEEP = "bv_capt_sweep"          # the last TraceSweep computed
UPLOADED = "bv_capt_uploaded"    # the file_id of the upload already taken
READ_JOB = "bv_capt_read_job"    # worker.Job reading (or generating) the session's trace
READING = "bv_capt_reading"      # the ReadTrace it runs
SWEEP_JOB = "bv_capt_sweep_job"  # worker.Job sweeping it
SWEEPING = "bv_capt_sweeping"    # (trace key, SweepTrace) it runs
JOB_DONE = "bv_capt_job_done"    # what the last sweep did, said above its chart
TIMED_FORM = {"max_num_batched_tokens": ("capt_budget", 1, 1 << 24, 1, None),
              "max_num_seqs": ("capt_max_seqs", 1, 1 << 16, 1, None),
              "step_base_s": ("capt_step_base", 0.0, 60.0, 0.001, "%.4f"),
              "step_prefill_token_s": ("capt_step_prefill", 0.0, 1.0, 0.00001, "%.6f"),
              "step_decode_seq_s": ("capt_step_decode", 0.0, 1.0, 0.0001, "%.5f")}


@dataclass(frozen=True)
class TraceFile:
    name: str                    # what the user called it (an upload's name, or the generator's)
    path: str                    # this session's copy on the server
    requests: int
    prompt_tokens: int
    key: str                     # a new key per file taken (a sweep names the file it ran on)


@dataclass(frozen=True)
class TraceSweep:
    trace_key: str
    reports: tuple               # sweep reports, one per free order
    mode: str
    block_size: int
    replayed: int
    options: tuple
    seconds: float


class SessionDir:
    """A session's folder on the server for its trace (up to MAX_UPLOAD_MB), removed with the
    session: once its tab has been gone a little while (``worker.hold``'s watchdog, on an idle
    server too), when Streamlit drops the session's state, or when the server exits. Kept only in
    the session's state (the watchdog holds it weakly), so nothing else keeps it alive."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="blockviz-trace-"))
        self._remove = weakref.finalize(self, shutil.rmtree, str(self.path), ignore_errors=True)

    def release(self) -> None:
        self._remove()


def _session_dir() -> Path:
    ss = st.session_state
    d = ss.get("bv_capt_dir")
    if not isinstance(d, SessionDir) or not d.path.is_dir():
        d = ss["bv_capt_dir"] = SessionDir()
        worker.hold(d)
    return d.path


# -- the work, in a worker process (worker.Job): picklable, no Streamlit ---------------------------
@dataclass(frozen=True)
class ReadTrace:
    """Read a trace through once, checking every line (a generated one is written first): its
    size, or the first bad line's TraceError."""
    path: str
    name: str
    generate: TraceWorkload | None = None

    def __call__(self, report) -> dict:
        if self.generate is not None:
            with open(self.path, "w", encoding="utf-8") as f:
                write_generated(self.generate, f)
        requests = tokens = 0
        for r in iter_trace(self.path, name=self.name):
            requests += 1
            tokens += r.input_length
            report(lines=r.line)
        return {"requests": requests, "prompt_tokens": tokens}


@dataclass(frozen=True)
class SweepTrace:
    """The page's sweep of a trace: its extent, pool sizes from the largest request to its
    working set (evenly on a log axis, never past what the trace can fill), both free orders."""
    path: str
    name: str
    block_size: int
    mode: str
    num_sizes: int
    limit: int
    options: tuple

    def __call__(self, report) -> dict:
        from blockviz.sim.sweep import trace_reach
        requests = iter_trace(self.path, name=self.name, limit=self.limit)
        extent = trace_extent(requests, block_size=self.block_size)
        most = trace_reach(self.path, name=self.name, block_size=self.block_size, limit=self.limit)
        top = max(extent["largest"], min(extent["working_set"], most["most_blocks"]))
        sizes = geometric_sizes(extent["largest"], top, self.num_sizes)

        def progress(done: int, total: int) -> None:
            report(done=done, total=total, runs=2 * len(sizes))
        result = sweep([self.path], block_size=self.block_size, pool_blocks=sizes, free_orders=ORDERS,
                       mode=self.mode, limit=self.limit, options=dict(self.options),
                       executor=LocalExecutor(workers=1), progress=progress)
        return {"reports": tuple(result.reports), "seconds": result.seconds, "runs": 2 * len(sizes)}


def _start(key: str, task, label: str, lang: str) -> bool:
    """Start ``task`` as this session's job ``key`` (a job it had there is stopped); False, with
    the session told, when the server's job slots are all taken."""
    ss = st.session_state
    old = ss.get(key)
    if isinstance(old, worker.Job):
        old.stop()
    try:
        job = worker.Job(task, label=label)
    except worker.JobsBusy:
        ss[key] = None
        ss[_msg(key)] = ("job_busy", {"n": worker.MAX_JOBS})
        return False
    except ScenarioError as e:        # no worker process could be started
        ss[key] = None
        ss[_msg(key)] = ("job_failed", {"msg": e.localized(lang)})
        return False
    worker.hold(job)
    ss[key] = job
    ss[_msg(key)] = None
    return True


def _poll(key: str, lang: str) -> None:
    """While the session's job ``key`` runs: its progress and a Stop button, redrawn twice a second
    (a fragment); the whole page reruns once it has ended."""
    job = st.session_state.get(key)
    if isinstance(job, worker.Job) and job.state.running:
        st.fragment(_job_panel, run_every=0.5)(key, lang)


def _job_panel(key: str, lang: str) -> None:
    job = st.session_state.get(key)
    if not isinstance(job, worker.Job) or not job.state.running:
        st.rerun()                       # it has ended: the page shows what it made
    s = job.state
    p = s.progress
    if "events" in p:                    # a plan of the toy tab
        pct = 100 * p.get("done", 0) // max(1, p["total"])
        st.progress(pct / 100, text=t("cap_running", lang, runs=p["runs"], events=p["events"], pct=pct))
    elif "total" in p:
        done, total = p.get("done", 0), max(1, p["total"])
        rate = done / max(s.seconds, 1e-9)
        left = t("job_left", lang, s=_duration((total - done) / rate)) if rate > 0 and done else ""
        text = t("job_sweep_progress", lang, pct=100 * done // total, done=f"{done:,}", total=f"{total:,}",
                 runs=p.get("runs", 0), rate=f"{rate:,.0f}", s=_duration(s.seconds), left=left)
        st.progress(min(1.0, done / total), text=text)
    else:
        st.progress(0.0, text=t("job_reading", lang, n=f"{p.get('lines', 0):,}", s=_duration(s.seconds)))
    if st.button(t("job_stop", lang), key=f"b_stop_{key}", icon=":material/stop_circle:"):
        job.stop("stop")
        st.rerun()


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def _ended(key: str):
    """The session's job ``key`` once it has ended (taken off the session: its result goes where
    the page keeps it), else None."""
    ss = st.session_state
    job = ss.get(key)
    if not isinstance(job, worker.Job) or job.state.running:
        return None
    ss[key] = None
    return job.state


def _stopped_message(state, lang: str, what: dict) -> tuple[str, dict] | None:
    """(i18n key, fields) for a job that did not finish."""
    if state.status == "failed":
        e = state.error
        if isinstance(e, tuple):
            return e
        text = e.localized(lang) if hasattr(e, "localized") else localize_error(str(e), lang)
        return "capt_bad_trace", {"msg": md_escape(text)}
    if state.status == "stopped":
        p = state.progress
        at = (t("job_at_sweep", lang, done=f"{p.get('done', 0):,}", total=f"{p['total']:,}") if "total" in p
              else t("job_at_read", lang, done=f"{p.get('lines', 0):,}"))
        return f"job_stopped_{state.why}", {"s": _duration(state.seconds), "at": at,
                                            "mb": (worker.JOB_BUDGET.tensor_bytes or 0) >> 20, **what}
    return None


def _trace_tab(lang: str) -> None:
    ss = st.session_state
    st.markdown(t("capt_intro", lang))
    ss.setdefault("w_capt_source", "upload")
    source = st.segmented_control(t("capt_source", lang), ("upload", "generate"), key="w_capt_source",
                                  required=True, format_func=lambda s: t(f"capt_source_{s}", lang))
    if source == "upload":
        f = st.file_uploader(t("capt_upload", lang), type=["jsonl", "json", "txt"], key="w_capt_upload",
                             max_upload_size=MAX_UPLOAD_MB, help=t("capt_upload_help", lang))
        st.caption(t("capt_upload_limit", lang, mb=MAX_UPLOAD_MB))
        if f is not None and ss.get(UPLOADED) != f.file_id:
            ss[UPLOADED] = f.file_id
            if f.size > MAX_UPLOAD_BYTES:       # its size: all the server reads of it
                ss[TRACE], ss[TRACE_ERROR], ss[SWEEP] = None, ("capt_too_large", {"mb": MAX_UPLOAD_MB}), None
            else:
                path = _session_dir() / "trace.jsonl"
                path.write_bytes(f.getvalue())
                _read(ReadTrace(str(path), f.name), lang)
    else:
        _generate_form(lang)
    ended = _ended(READ_JOB)
    if ended is not None:
        _took(ended, lang)
    _poll(READ_JOB, lang)
    _job_message(READ_JOB, lang)
    err = ss.get(TRACE_ERROR)
    if err is not None:
        text = err.localized(lang) if isinstance(err, TraceError) else t(err[0], lang, **err[1])
        st.error(t("capt_bad_trace", lang, msg=md_escape(text)))
    trace: TraceFile | None = ss.get(TRACE)
    if trace is not None and not Path(trace.path).is_file():   # removed while the session was away
        ss[TRACE], ss[SWEEP], trace = None, None, None
        st.warning(t("capt_trace_gone", lang))
    if trace is None:
        if ss.get(READ_JOB) is None:
            st.caption(t("capt_none_yet", lang))
        return
    st.success(t("capt_loaded", lang, name=md_escape(trace.name), requests=f"{trace.requests:,}",
                 tokens=f"{trace.prompt_tokens:,}"))
    if _sweep_form(trace, lang):
        _run_sweep(trace, lang)
    ended = _ended(SWEEP_JOB)
    if ended is not None:
        _swept(ended, trace, lang)
    if ss.get(JOB_DONE):
        st.progress(1.0, text=ss.pop(JOB_DONE))
    _poll(SWEEP_JOB, lang)
    _job_message(SWEEP_JOB, lang)
    sweep_ = ss.get(SWEEP)
    if sweep_ is not None and sweep_.trace_key == trace.key:
        _show_sweep(trace, sweep_, lang)


def _msg(key: str) -> str:
    """Where the page keeps why job ``key`` did not start or finish (said once)."""
    return key + "_msg"


def _job_message(key: str, lang: str) -> None:
    msg = st.session_state.pop(_msg(key), None)
    if msg:
        key, fields = msg
        (st.warning if key.startswith("job_stopped_stop") else st.error)(t(key, lang, **fields))


def _read(task: ReadTrace, lang: str) -> None:
    """Read (or generate) the session's trace in a worker; the page shows it once read."""
    ss = st.session_state
    ss[TRACE], ss[TRACE_ERROR], ss[SWEEP] = None, None, None
    stop = ss.get(SWEEP_JOB)
    if isinstance(stop, worker.Job):            # a sweep of the trace this one replaces
        stop.stop()
        ss[SWEEP_JOB] = None
    if _start(READ_JOB, task, task.name, lang):
        ss[READING] = task


def _took(state, lang: str) -> None:
    ss = st.session_state
    task: ReadTrace | None = ss.pop(READING, None)
    if task is None:
        return
    if state.status == "done":
        n = int(ss.get("bv_capt_n", 0)) + 1
        ss["bv_capt_n"] = n
        size = state.result
        ss[TRACE] = TraceFile(task.name, task.path, size["requests"], size["prompt_tokens"],
                              f"{task.name}#{n}")
        ss[TRACE_ERROR] = None
        return
    if state.status == "failed" and isinstance(state.error, TraceError):
        ss[TRACE_ERROR] = state.error
        return
    ss[_msg(READ_JOB)] = _stopped_message(state, lang, {"what": task.name,
                                                 "cmd": f"blockviz trace check {task.name}"})


def _generate_form(lang: str) -> None:
    with st.form("capt_gen_form", border=True):
        cols = st.columns(4)
        with cols[0]:
            kind = st.selectbox(t("cap_kind", lang), KINDS, key="w_capt_gen_kind",
                                format_func=lambda k: t(f"cap_kind_{k}", lang))
        with cols[1]:
            n = st.number_input(t("capt_gen_requests", lang), 1, MAX_GEN_REQUESTS, 1000, step=100,
                                key="w_capt_gen_requests")
        with cols[2]:
            seed = st.number_input(t("cap_seed", lang), 0, 2**31 - 1, 0, step=1, key="w_capt_gen_seed")
        with cols[3]:
            rate = st.number_input(t("capt_gen_rate", lang), 0.01, 10_000.0, 4.0, step=1.0,
                                   key="w_capt_gen_rate", help=t("capt_gen_rate_help", lang))
        if st.form_submit_button(t("capt_generate", lang), key="b_capt_generate",
                                 icon=":material/auto_awesome:"):
            w = TraceWorkload(kind=kind, requests=int(n), seed=int(seed), rate=float(rate))
            _read(ReadTrace(str(_session_dir() / "trace.jsonl"), f"{kind}-{int(seed)}.jsonl", w), lang)


def _sweep_form(trace: TraceFile, lang: str) -> bool:
    with st.form("capt_form", border=True):
        cols = st.columns(5)
        with cols[0]:
            st.selectbox(t("cap_block_size", lang), TRACE_BLOCK_SIZES, index=0, key="w_capt_block_size",
                         help=t("capt_block_size_help", lang))
        with cols[1]:
            st.segmented_control(t("capt_mode", lang), TRACE_MODES, key="w_capt_mode", required=True,
                                 default="sequence", format_func=lambda m: t(f"capt_mode_{m}", lang),
                                 help=t("capt_mode_help", lang))
        with cols[2]:
            st.number_input(t("cap_num_sizes", lang), 2, 12, 8, step=1, key="w_capt_num_sizes")
        if st.session_state.get("w_capt_replay", 0) > trace.requests:   # another trace's value
            st.session_state["w_capt_replay"] = trace.requests
        with cols[3]:
            st.number_input(t("capt_replay", lang), 1, max(1, trace.requests),
                            min(trace.requests, DEFAULT_REPLAY), step=1000, key="w_capt_replay",
                            help=t("capt_replay_help", lang))
        with cols[4]:
            st.selectbox(t("capt_model", lang), (NO_MODEL, *KV_PRESETS), index=1, key="w_capt_model",
                         format_func=lambda m: t("capt_model_none", lang) if m == NO_MODEL else m,
                         help=t("capt_model_help", lang))
        with st.expander(t("capt_timed_settings", lang)):
            st.caption(t("capt_timed_help", lang))
            tcols = st.columns(len(TIMED_FORM))
            for col, (name, (label, lo, hi, step, fmt)) in zip(tcols, TIMED_FORM.items()):
                with col:
                    st.number_input(t(label, lang), lo, hi, TIMED_DEFAULTS[name], step=step, format=fmt,
                                    key=f"w_capt_{name}")
        return st.form_submit_button(t("cap_compute", lang), key="b_capt_compute", type="primary",
                                     icon=":material/query_stats:")


def _timed_options() -> dict:
    ss = st.session_state
    return {name: (int if isinstance(TIMED_DEFAULTS[name], int) else float)(ss[f"w_capt_{name}"])
            for name in TIMED_FORM}


def _run_sweep(trace: TraceFile, lang: str) -> None:
    """Start the sweep the form asks for, in a worker (the page shows its progress)."""
    ss = st.session_state
    mode = ss.get("w_capt_mode") or "sequence"
    bs = int(ss["w_capt_block_size"])
    limit = int(ss["w_capt_replay"])
    options = _timed_options() if mode == "timed" else {}
    if limit > MAX_REPLAY[mode]:
        st.error(t("capt_replay_too_many", lang, n=f"{limit:,}", mode=t(f"capt_mode_{mode}", lang),
                   max=f"{MAX_REPLAY[mode]:,}"))
        return
    try:
        timed_settings(**options)
    except ValueError as e:
        st.error(e.localized(lang) if hasattr(e, "localized") else localize_error(str(e), lang))
        return
    task = SweepTrace(trace.path, trace.name, bs, mode, int(ss["w_capt_num_sizes"]), limit,
                      tuple(options.items()))
    if _start(SWEEP_JOB, task, trace.name, lang):
        ss[SWEEPING] = (trace.key, task)


def _swept(state, trace: TraceFile, lang: str) -> None:
    ss = st.session_state
    key, task = ss.pop(SWEEPING, (None, None))
    if task is None or key != trace.key:
        return
    if state.status == "done":
        r = state.result
        ss[SWEEP] = TraceSweep(trace.key, r["reports"], task.mode, task.block_size, task.limit, task.options,
                               r["seconds"])
        ss[JOB_DONE] = t("capt_done", lang, runs=r["runs"], requests=f"{task.limit:,}",
                         s=f"{r['seconds']:.1f}")
        return
    cmd = (f"blockviz trace capacity {trace.name} --block-size {task.block_size} --mode {task.mode} "
           f"--limit {task.limit} --free-order split,append --pool-blocks N1,N2,...")
    ss[_msg(SWEEP_JOB)] = _stopped_message(state, lang, {"what": trace.name, "cmd": cmd})


def _bytes_per_token() -> int | None:
    m = st.session_state.get("w_capt_model")
    return KV_PRESETS[m].bytes_per_token if m in KV_PRESETS else None


def _show_sweep(trace: TraceFile, s: TraceSweep, lang: str) -> None:
    bpt = _bytes_per_token()
    points = points_of(s.reports)
    ceiling = hit_rate(s.reports[0]["ceiling"])
    st.caption(t("capt_shown", lang, requests=f"{s.replayed:,}", name=md_escape(trace.name),
                 mode=t(f"capt_mode_{s.mode}", lang), bs=s.block_size))
    left, right = st.columns([3, 2], gap="large")
    with left:
        _heading(t("capt_hit_title", lang))
        st.plotly_chart(hit_rate_figure(points, lang, ceiling=ceiling, block_size=s.block_size,
                                        bytes_per_token=bpt), key="capt_hit_chart",
                        config={"displayModeBar": False})
        if s.mode == "timed":
            _heading(t("capt_ttft_title", lang))
            st.plotly_chart(latency_figure(points, lang, block_size=s.block_size, bytes_per_token=bpt),
                            key="capt_ttft_chart", config={"displayModeBar": False})
    with right:
        _heading(t("cap_read_title", lang))
        lines = reading_lines(reading(points, ceiling), lang, block_size=s.block_size, bytes_per_token=bpt)
        st.markdown("\n".join(f"- {md_escape(line)}" for line in lines))
        st.caption(t("capt_knee_def", lang, pct=f"{100 * KNEE_FRACTION:.0f}"))
        if s.mode == "timed":
            st.caption(t("capt_timed_model", lang, **dict(s.options)))
    with st.expander(t("cap_numbers", lang)):
        st.dataframe([_trace_row(p, s.block_size, lang, bpt) for p in points], hide_index=True)
    _player_box(trace, s, lang)


def _trace_row(p: Point, block_size: int, lang: str, bpt: int | None) -> dict:
    tokens = p.pool_blocks * block_size
    row = {t("cap_col_pool", lang): p.pool_blocks, t("capt_tokens", lang): tokens}
    if bpt:
        row["GiB"] = round(tokens * bpt / (1 << 30), 3)
    row |= {t("cap_col_order", lang): p.free_order, t("cap_col_hit", lang): f"{100 * p.hit_rate:.1f}%",
            t("cap_col_hits", lang): f"{p.hits:,} / {p.queries:,}",
            t("cap_col_evictions", lang): p.evictions, t("trace_tbl_rejected", lang): p.rejected}
    if "ttft_p90_s" in p.extra:
        x = p.extra
        row |= {t("cap_col_preemptions", lang): p.preemptions,
                t("trace_tbl_queue", lang): f"{x['queue_delay_p50_s']:.3g} / {x['queue_delay_p90_s']:.3g}",
                t("trace_tbl_ttft", lang): f"{x['ttft_p50_s']:.3g} / {x['ttft_p90_s']:.3g}"}
    return row


def _player_box(trace: TraceFile, s: TraceSweep, lang: str) -> None:
    ss = st.session_state
    _heading(t("capt_player_title", lang))
    st.caption(t("capt_player_help", lang, tokens=PLAYER_BLOCK_TOKENS, scale=PLAYER_SCALE,
                 max_blocks=PLAYER_MAX_BLOCKS))
    points = [(r["free_order"], p["pool_blocks"]) for r in s.reports for p in r["points"]]
    cols = st.columns([3, 2, 2, 2])
    with cols[0]:
        choice = st.selectbox(t("capt_point", lang), range(len(points)), key="w_capt_point",
                              format_func=lambda i: t("capt_point_label", lang, blocks=f"{points[i][1]:,}",
                                                      tokens=f"{points[i][1] * s.block_size:,}",
                                                      order=points[i][0]))
    if ss.get("w_capt_window_first", 0) > s.replayed:
        ss["w_capt_window_first"] = s.replayed
    with cols[1]:
        first = st.number_input(t("capt_window_first", lang), 1, s.replayed, 1, step=1,
                                key="w_capt_window_first", help=t("capt_window_first_help", lang))
    with cols[2]:
        size = st.number_input(t("capt_window_size", lang), 1, PLAYER_MAX_WINDOW, 6, step=1,
                               key="w_capt_window_size")
    with cols[3]:
        clicked = st.button(t("open_in_player", lang), key="b_capt_open_player", type="primary",
                            icon=":material/play_arrow:")
    if not clicked or choice is None:
        return
    order, pool = points[int(choice)]
    window = {"path": trace.path, "name": trace.name, "first": int(first), "size": int(size),
              "pool_blocks": pool, "block_size": s.block_size, "free_order": order, "mode": s.mode,
              "options": dict(s.options)}
    try:       # read, built and run in a worker within the preview budget, as every session's own run
        with st.spinner(t("preview", lang) + "…"):
            outcome = worker.user_outcome(ss, "trace", worker.Source("window", "trace-window.yaml", window))
    except ScenarioError as e:       # the server is busy, or the run was stopped
        st.error(localize_error(e, lang))
        return
    if outcome.refusal is not None:
        st.error(t(outcome.refusal[0], lang, **{"file": "trace-window.yaml", **outcome.refusal[1]}))
        return
    if outcome.error is not None:    # beyond the scenario format's limits
        st.error(t("cap_too_big", lang, **md_fields({"msg": outcome.error}, lang)))
        return
    run = outcome.run
    ss[S.FORK] = None
    S.use_user_run(ss, run)
    go_to_player()
