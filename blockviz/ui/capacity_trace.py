"""The capacity page's real-traffic tab: upload or generate a trace (Mooncake or Qwen-Bailian
format); in sequence mode, its whole hit-rate curve for both free orders from one pass each, with
Belady's MIN at a few sizes (``blockviz.sim.curve.curve_report``, in a worker), drawn and read in
the browser (``capacity_curve``); in timed mode, a replay at several pool sizes
(``blockviz.sim.sweep``, in a worker). Either way the infinite pool's ceiling and each order's
knee, and a window of the trace opened in the player at any pool size. State (this session only):
its trace (a copy in a folder removed with the session), the last sweep, the jobs reading and
sweeping it.
"""
from __future__ import annotations

import shutil
import tempfile
import weakref
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from blockviz.core import FREE_ORDERS
from blockviz.i18n import t
from blockviz.i18n.errors import error_text, localize_error
from blockviz.render.capacity import (
    hit_rate_figure,
    latency_figure,
    limited,
    limited_lines,
    reading,
    reading_lines,
    split_bars_html,
)
from blockviz.render.curve import curve_reading_lines, default_pool
from blockviz.render.theme import heading_html
from blockviz.scenario import ScenarioError
from blockviz.scenario.trace import TraceError, check_trace, iter_trace
from blockviz.sim.capacity import (
    KNEE_FRACTION,
    KV_PRESETS,
    TIMED_DEFAULTS,
    Point,
    geometric_sizes,
    gib,
    hit_rate,
    limiting_group,
    model_groups,
    points_of,
    timed_settings,
    trace_extent,
)
from blockviz.sim.curve import curve_report
from blockviz.sim.sweep import LocalExecutor, sweep
from blockviz.teach.tracegen import (
    PLAYER_BLOCK_TOKENS,
    PLAYER_MAX_BLOCKS,
    PLAYER_MAX_WINDOW,
    PLAYER_SCALE,
    TraceWorkload,
    write_generated,
)
from blockviz.teach.workload import KINDS
from blockviz.ui import capacity_chats, capacity_curve, jobs, worker
from blockviz.ui import state as session
from blockviz.ui.nav import PLAYER_PATH, go_to, md_escape, md_fields

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
    chats: bool = False          # a Qwen-Bailian trace: its requests name their conversations


class SessionDir:
    """A session's folder on the server for its trace (up to MAX_UPLOAD_MB), removed with the
    session: once its tab has been gone a little while (``worker.hold``'s watchdog, on an idle
    server too), when Streamlit drops the session's state, or when the server exits. Kept only in
    the session's state (the watchdog holds it weakly), so nothing else keeps it alive."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="blockviz-trace-"))
        # release(): remove it now (once; else when the SessionDir goes, or at exit)
        self.release = weakref.finalize(self, shutil.rmtree, str(self.path), ignore_errors=True)


def _session_dir() -> Path:
    ss = st.session_state
    d = ss.get(session.CAPT_DIR)
    if not isinstance(d, SessionDir) or not d.path.is_dir():
        d = ss[session.CAPT_DIR] = SessionDir()
        worker.hold(d)
    return d.path


# -- the work, in a worker process (worker.Job): picklable, no Streamlit ---------------------------
@dataclass(frozen=True)
class ReadTrace:
    """Read a trace through once, checking every line (a generated one is written first): its
    size (``check_trace``), or the first bad line's TraceError."""
    path: str
    name: str
    generate: TraceWorkload | None = None

    def __call__(self, report) -> dict:
        if self.generate is not None:
            with open(self.path, "w", encoding="utf-8") as f:
                write_generated(self.generate, f)
        return check_trace(self.path, name=self.name, progress=lambda line: report(lines=line))


@dataclass(frozen=True)
class SweepTrace:
    """The page's sweep of a trace's first ``limit`` requests (at most all of them), both free
    orders. Sequence mode (one KV-cache group): the curve, one pass per free order giving every
    pool size, plus Belady's MIN at ``num_sizes`` sizes and the knees when ``optimal`` (bounded;
    ``curve_report``). Else: its extent, ``num_sizes`` pool sizes from the largest request to its
    working set (evenly on a log axis, never past what the trace can fill), one replay each."""
    path: str
    name: str
    block_size: int
    mode: str
    num_sizes: int
    limit: int
    options: tuple               # the mode's own settings, as (name, value) pairs (timed mode's)
    model: str | None = None     # a hybrid preset: the replay runs its groups (each holds a copy)
    optimal: bool = True

    @property
    def curve(self) -> bool:
        return self.mode == "sequence" and self.model is None   # the one-pass curve is one group's

    def __call__(self, report) -> dict:
        if self.curve:
            return curve_report(self.path, name=self.name, block_size=self.block_size, limit=self.limit,
                                requests=self.limit, free_orders=FREE_ORDERS, sizes=self.num_sizes,
                                optimal=self.optimal, progress=report)
        report(force=True, phase="measuring")
        requests = iter_trace(self.path, name=self.name, limit=self.limit)
        extent = trace_extent(requests, block_size=self.block_size)
        most = check_trace(self.path, name=self.name, block_size=self.block_size, limit=self.limit)
        groups = len(model_groups(self.model) or ()) or 1
        top = max(extent["largest"], min(extent["working_set"], most["most_blocks"])) * groups
        sizes = geometric_sizes(extent["largest"] * groups, top, self.num_sizes)

        def progress(done: int, total: int) -> None:
            report(done=done, total=total, runs=2 * len(sizes))
        result = sweep([self.path], block_size=self.block_size, pool_blocks=sizes, free_orders=FREE_ORDERS,
                       mode=self.mode, limit=self.limit, options=dict(self.options), name=self.name,
                       executor=LocalExecutor(workers=1), progress=progress, model=self.model)
        return {"reports": tuple(result.reports), "seconds": result.seconds, "runs": 2 * len(sizes)}


@dataclass(frozen=True)
class TraceSweep:
    """A sweep the page ran: its task and the task's result (``SweepTrace.__call__``'s)."""
    trace_key: str
    task: SweepTrace
    result: dict

    @property
    def reports(self) -> list[dict]:
        """Per free order, the sweep's report."""
        return self.result["reports"]

    @property
    def curve(self) -> dict | None:
        """Sequence mode, one KV-cache group: ``curve_report``'s result (its reports are the sweep's)."""
        return self.result if self.task.curve else None


def tab(lang: str) -> None:
    ss = st.session_state
    st.markdown(t("capt_intro", lang))
    # the value the session holds as the widget's default, on every run (see capacity._form)
    source = st.segmented_control(t("capt_source", lang), ("upload", "generate"), key="w_capt_source",
                                  default=ss.get("w_capt_source", "upload"), required=True,
                                  format_func=lambda s: t(f"capt_source_{s}", lang))
    if source == "upload":
        f = st.file_uploader(t("capt_upload", lang), type=["jsonl", "json", "txt"], key="w_capt_upload",
                             max_upload_size=MAX_UPLOAD_MB, help=t("capt_upload_help", lang))
        st.caption(t("capt_upload_limit", lang, mb=MAX_UPLOAD_MB))
        if f is not None and ss.get(session.CAPT_UPLOADED) != f.file_id:
            ss[session.CAPT_UPLOADED] = f.file_id
            if f.size > MAX_UPLOAD_BYTES:       # its size: all the server reads of it
                too_large = ("capt_too_large", {"mb": MAX_UPLOAD_MB})
                ss[session.CAPT_TRACE], ss[session.CAPT_ERROR], ss[session.CAPT_SWEEP] = None, too_large, None
            else:
                path = _session_dir() / "trace.jsonl"
                path.write_bytes(f.getvalue())
                _read(ReadTrace(str(path), f.name), lang)
    else:
        _generate_form(lang)
    jobs.follow(session.CAPT_READ_JOB, lang, _took)
    err = ss.get(session.CAPT_ERROR)
    if err is not None:
        text = err.localized(lang) if isinstance(err, TraceError) else t(err[0], lang, **err[1])
        st.error(t("capt_bad_trace", lang, msg=md_escape(text)))
    trace: TraceFile | None = ss.get(session.CAPT_TRACE)
    if trace is not None and not Path(trace.path).is_file():   # removed while the session was away
        ss[session.CAPT_TRACE], ss[session.CAPT_SWEEP], trace = None, None, None
        st.warning(t("capt_trace_gone", lang))
    if trace is None:
        if ss.get(session.CAPT_READ_JOB) is None:
            st.caption(t("capt_none_yet", lang))
        return
    st.success(t("capt_loaded", lang, name=md_escape(trace.name), requests=f"{trace.requests:,}",
                 tokens=f"{trace.prompt_tokens:,}"))
    if _sweep_form(trace, lang):
        _run_sweep(trace, lang)
    jobs.follow(session.CAPT_SWEEP_JOB, lang, lambda state, task, lang: _swept(state, task, trace, lang))
    sweep_ = ss.get(session.CAPT_SWEEP)
    if sweep_ is not None and sweep_.trace_key == trace.key:
        _show_sweep(trace, sweep_, lang)



def _read(task: ReadTrace, lang: str) -> None:
    """Read (or generate) the session's trace in a worker; the page shows it once read."""
    ss = st.session_state
    ss[session.CAPT_TRACE], ss[session.CAPT_ERROR], ss[session.CAPT_SWEEP] = None, None, None
    for key in (session.CAPT_SWEEP_JOB, session.CAPT_CHAT_JOB):
        stop = ss.get(key)
        if isinstance(stop, worker.Job):        # a sweep (or chats) of the trace this one replaces
            stop.stop()
            ss[key] = None
    jobs.start(session.CAPT_READ_JOB, task, task.name, lang)


def _took(state, task: ReadTrace, lang: str) -> None:
    ss = st.session_state
    if state.status == "done":
        n = int(ss.get(session.CAPT_N, 0)) + 1
        ss[session.CAPT_N] = n
        size = state.result
        ss[session.CAPT_TRACE] = TraceFile(task.name, task.path, size["requests"], size["prompt_tokens"],
                                           f"{task.name}#{n}", size["chats"])
        ss[session.CAPT_ERROR] = None
        return
    if state.status == "failed" and isinstance(state.error, TraceError):
        ss[session.CAPT_ERROR] = state.error
        return
    ss[jobs.message_key(session.CAPT_READ_JOB)] = jobs.stopped_message(state, lang, {"what": task.name,
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
        top = st.columns([2, 3, 3])          # two rows: at 1280 px five columns cut the labels
        with top[0]:
            st.selectbox(t("cap_block_size", lang), TRACE_BLOCK_SIZES, index=0, key="w_capt_block_size",
                         help=t("capt_block_size_help", lang))
        with top[1]:
            st.segmented_control(t("capt_mode", lang), TRACE_MODES, key="w_capt_mode", required=True,
                                 default="sequence", format_func=lambda m: t(f"capt_mode_{m}", lang),
                                 help=t("capt_mode_help", lang))
        with top[2]:
            st.selectbox(t("capt_model", lang), (NO_MODEL, *KV_PRESETS), index=1, key="w_capt_model",
                         format_func=lambda m: t("capt_model_none", lang) if m == NO_MODEL else m,
                         help=t("capt_model_help", lang))
        if st.session_state.get("w_capt_replay", 0) > trace.requests:   # another trace's value
            st.session_state["w_capt_replay"] = trace.requests
        low = st.columns([2, 3, 3], vertical_alignment="bottom")
        with low[0]:
            st.number_input(t("capt_num_sizes", lang), 2, 16, 8, step=1, key="w_capt_num_sizes",
                            help=t("capt_num_sizes_help", lang))
        with low[1]:
            st.number_input(t("capt_replay", lang), 1, max(1, trace.requests),
                            min(trace.requests, DEFAULT_REPLAY), step=1000, key="w_capt_replay",
                            help=t("capt_replay_help", lang))
        with low[2]:
            st.checkbox(t("capt_optimal", lang), True, key="w_capt_optimal",
                        help=t("capt_optimal_help", lang))
        with st.expander(t("capt_timed_settings", lang)):
            st.caption(t("capt_timed_help", lang))
            tcols = st.columns(len(TIMED_FORM))
            for col, (name, (label, lo, hi, step, fmt)) in zip(tcols, TIMED_FORM.items()):
                with col:
                    st.number_input(t(label, lang), lo, hi, TIMED_DEFAULTS[name], step=step, format=fmt,
                                    key=f"w_capt_{name}")
        return st.form_submit_button(t("cap_compute", lang), key="b_capt_compute", type="primary",
                                     icon=":material/query_stats:")


def _run_sweep(trace: TraceFile, lang: str) -> None:
    """Start the sweep the form asks for, in a worker (the page shows its progress)."""
    ss = st.session_state
    mode = ss.get("w_capt_mode") or "sequence"
    bs = int(ss["w_capt_block_size"])
    limit = min(int(ss["w_capt_replay"]), trace.requests)
    options = {name: (int if isinstance(TIMED_DEFAULTS[name], int) else float)(ss[f"w_capt_{name}"])
               for name in TIMED_FORM} if mode == "timed" else {}
    if limit > MAX_REPLAY[mode]:
        st.error(t("capt_replay_too_many", lang, n=f"{limit:,}", mode=t(f"capt_mode_{mode}", lang),
                   max=f"{MAX_REPLAY[mode]:,}"))
        return
    try:
        timed_settings(**options)
    except ValueError as e:
        st.error(error_text(e, lang))
        return
    model = ss.get("w_capt_model")
    task = SweepTrace(trace.path, trace.name, bs, mode, int(ss["w_capt_num_sizes"]), limit,
                      tuple(options.items()), model if model_groups(model) else None,
                      bool(ss.get("w_capt_optimal", True)))
    jobs.start(session.CAPT_SWEEP_JOB, task, trace.name, lang)


def _swept(state, task: SweepTrace, trace: TraceFile, lang: str) -> None:
    ss = st.session_state
    if state.status == "done":
        r = state.result
        ss[session.CAPT_SWEEP] = TraceSweep(trace.key, task, r)
        points = r["reports"][0]["points"]
        best = sum("optimal_hits" in p for p in points)
        words = {"requests": f"{task.limit:,}", "s": f"{r['seconds']:.1f}"}
        if not task.curve:
            capacity_curve.place(points[len(points) // 2]["pool_blocks"])
            st.progress(1.0, text=t("capt_done", lang, runs=r["runs"], **words))
        else:
            capacity_curve.place(default_pool(r))
            st.progress(1.0, text=t("curve_done", lang, n=best, **words) if best else
                        t("curve_done_no_best", lang, **words))
        return
    cmd = (f"blockviz trace capacity {trace.name} --block-size {task.block_size} --mode {task.mode} "
           f"--limit {task.limit} --free-order split,append "
           f"{'--curve --optimal ' if task.mode == 'sequence' else ''}--pool-blocks N1,N2,...")
    ss[jobs.message_key(session.CAPT_SWEEP_JOB)] = jobs.stopped_message(state, lang,
                                                                      {"what": trace.name, "cmd": cmd})


def _show_sweep(trace: TraceFile, s: TraceSweep, lang: str) -> None:
    """Sequence mode: the whole curve, read in the browser, with the words beside it; timed mode (or
    a hybrid model's groups): the sizes replayed, drawn and read here."""
    model = s.task.model or st.session_state.get("w_capt_model")   # the sweep's, else the one chosen now
    bpt = KV_PRESETS[model].bytes_per_token if model in KV_PRESETS else None     # a pool slot's bytes
    task = s.task
    points = points_of(s.reports)
    st.caption(t("capt_shown", lang, requests=f"{task.limit:,}", name=md_escape(trace.name),
                 mode=t(f"capt_mode_{task.mode}", lang), bs=task.block_size))
    if s.curve is not None:
        st.html(heading_html(t("capt_hit_title", lang)))
        capacity_curve.show(s, lang, bpt)
        left, right = st.columns([3, 2], gap="large")
        with left:
            st.html(heading_html(t("cap_read_title", lang)))
            lines = curve_reading_lines(s.curve, lang, bytes_per_token=bpt)
            st.markdown("\n".join(f"- {md_escape(line)}" for line in lines))
        with right:
            st.caption(t("curve_knee_def", lang, pct=f"{100 * KNEE_FRACTION:.0f}"))
        if any("split" in p.extra for p in points):
            st.html(heading_html(t("capt_split_title", lang)))
            st.html(split_bars_html(points, lang, block_size=task.block_size, bytes_per_token=bpt))
            st.caption(t("capt_split_how", lang))
    else:
        _show_replays(s, lang, bpt, points)
    with st.expander(t("cap_numbers", lang)):
        st.dataframe([point_row(p, lang, task.block_size, bpt, task.model) for p in points], hide_index=True)
    if task.model:      # the player's window replays one full-attention group, scaled down
        return
    _player_box(trace, s, lang)
    if s.curve is not None and trace.chats:
        capacity_chats.box(trace, s, lang)


def _show_replays(s: TraceSweep, lang: str, bpt: int | None, points: list[Point]) -> None:
    task = s.task
    ceiling = hit_rate(s.reports[0]["ceiling"])
    if task.model:      # what a hybrid model's replay ran: its groups, their layers, a slot's bytes
        shape = KV_PRESETS[task.model]
        groups = ", ".join(t(f"capt_group_count_{kind}", lang, n=n, size=f"{size:,}" if size else "")
                           for kind, size, n in shape.group_counts())
        st.caption(md_escape(t("capt_model_groups", lang, model=task.model, n=len(shape.kv_cache_groups),
                               layers=shape.group_size, groups=groups,
                               bytes=f"{shape.bytes_per_token // 1024:,} KiB")))
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.html(heading_html(t("capt_hit_title", lang)))
        st.plotly_chart(hit_rate_figure(points, lang, ceiling=ceiling, block_size=task.block_size,
                                        bytes_per_token=bpt), key="capt_hit_chart",
                        config={"displayModeBar": False})
        if task.mode == "timed":
            st.html(heading_html(t("capt_ttft_title", lang)))
            st.plotly_chart(latency_figure(points, lang, block_size=task.block_size, bytes_per_token=bpt),
                            key="capt_ttft_chart", config={"displayModeBar": False})
    with right:
        st.html(heading_html(t("cap_read_title", lang)))
        lines = reading_lines(reading(points, ceiling), lang, block_size=task.block_size, bytes_per_token=bpt)
        if task.model:
            lines += limited_lines(points, lang, t(f"trace_group_{limiting_group(task.model)}", lang))
        st.markdown("\n".join(f"- {md_escape(line)}" for line in lines))
        st.caption(t("capt_knee_def", lang, pct=f"{100 * KNEE_FRACTION:.0f}"))
        if task.mode == "timed":
            st.caption(t("capt_timed_model", lang, **dict(task.options)))


def point_row(p: Point, lang: str, block_size: int | None = None, bpt: int | None = None,
              model: str | None = None) -> dict:
    """A point as a row of the numbers' table: a generated workload's plan's (no ``block_size``),
    or a trace's (capacities in tokens, and GiB given a slot's ``bpt``)."""
    row = {t("cap_col_pool", lang): p.pool_blocks}
    if block_size:
        row[t("capt_tokens", lang)] = p.pool_blocks * block_size
        if bpt:
            row["GiB"] = round(gib(p.pool_blocks * block_size, bpt), 3)
    row |= {t("cap_col_order", lang): p.free_order, t("cap_hit_rate", lang): f"{100 * p.hit_rate:.1f}%",
            t("cap_col_hits", lang): f"{p.hits:,} / {p.queries:,}", t("cap_col_evictions", lang): p.evictions}
    if not block_size:
        return row | {t("cap_col_preemptions", lang): p.preemptions,
                      t("cap_col_error", lang): localize_error(p.error, lang) if p.error else ""}
    row[t("trace_tbl_rejected", lang)] = p.rejected
    if "optimal_hits" in p.extra:
        row[t("curve_col_best", lang)] = f"{100 * p.extra['optimal_hits'] / max(1, p.queries):.1f}%"
    if model:
        group = t(f"trace_group_{limiting_group(model)}", lang)
        row[t("trace_tbl_limited", lang, group=group)] = f"{100 * limited(p) / max(1, p.queries):.1f}%"
    if "ttft_p90_s" in p.extra:
        x = p.extra
        row |= {t("cap_col_preemptions", lang): p.preemptions,
                t("trace_tbl_queue", lang): f"{x['queue_delay_p50_s']:.3g} / {x['queue_delay_p90_s']:.3g}",
                t("trace_tbl_ttft", lang): f"{x['ttft_p50_s']:.3g} / {x['ttft_p90_s']:.3g}"}
    return row


def _player_box(trace: TraceFile, s: TraceSweep, lang: str) -> None:
    ss = st.session_state
    task = s.task
    st.html(heading_html(t("capt_player_title", lang)))
    st.caption(t("capt_player_help", lang, tokens=PLAYER_BLOCK_TOKENS, scale=PLAYER_SCALE,
                 max_blocks=PLAYER_MAX_BLOCKS))
    top = s.curve["working_set"] if s.curve else max(p["pool_blocks"] for r in s.reports for p in r["points"])
    low = min(top, s.curve["largest"]) if s.curve else 1     # the curve's sizes: all requests fit
    if not low <= ss.get(capacity_curve.W_POOL, 0) <= top:
        ss[capacity_curve.W_POOL] = max(low, min(top, ss.get(capacity_curve.W_POOL, 0)))
    cols = st.columns([3, 2, 2, 2, 3], vertical_alignment="bottom")
    with cols[0]:
        order = st.selectbox(t("capt_order", lang), FREE_ORDERS, key="w_capt_order",
                             format_func=lambda o: t(f"cap_order_{o}", lang))
    with cols[1]:
        pool = st.number_input(t("capt_pool", lang), low, max(1, top), step=1, key=capacity_curve.W_POOL,
                               on_change=capacity_curve.typed, help=t("capt_pool_help", lang))
    if ss.get("w_capt_window_first", 0) > task.limit:
        ss["w_capt_window_first"] = task.limit
    with cols[2]:
        first = st.number_input(t("capt_window_first", lang), 1, task.limit, 1, step=1,
                                key="w_capt_window_first", help=t("capt_window_first_help", lang))
    with cols[3]:
        size = st.number_input(t("capt_gen_requests", lang), 1, PLAYER_MAX_WINDOW, 6, step=1,
                               key="w_capt_window_size")
    with cols[4]:
        clicked = st.button(t("open_in_player", lang), key="b_capt_open_player", type="primary",
                            icon=":material/play_arrow:")
    if not clicked:
        return
    pool = int(pool)
    window = {"path": trace.path, "name": trace.name, "first": int(first), "size": int(size),
              "pool_blocks": pool, "block_size": task.block_size, "free_order": order, "mode": task.mode,
              "options": dict(task.options)}
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
    ss[session.FORK] = None
    session.use_user_run(ss, outcome.run)
    go_to(PLAYER_PATH)

