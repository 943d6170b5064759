"""A page's worker jobs (``worker.Job``), as the capacity page's two tabs run them: start one in the
session (stopping the one it replaces), show its progress with a Stop button while it runs, take it
once it has ended, and say why one did not start or finish (once)."""
from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from blockviz.i18n import t
from blockviz.i18n.errors import error_text
from blockviz.scenario import ScenarioError
from blockviz.ui import worker
from blockviz.ui.nav import md_escape
from blockviz.ui.state import message_key


def start(key: str, task, label: str, lang: str) -> None:
    """Start ``task`` as this session's job ``key`` (a job it had there is stopped); none, with
    the session told, when the server's job slots are all taken."""
    ss = st.session_state
    old = ss.get(key)
    if isinstance(old, worker.Job):
        old.stop()
    ss[key] = None
    try:
        job = worker.Job(task, label=label)
    except worker.JobsBusy:
        ss[message_key(key)] = ("job_busy", {"n": worker.MAX_JOBS})
        return
    except ScenarioError as e:        # no worker process could be started
        ss[message_key(key)] = ("job_failed", {"msg": e.localized(lang)})
        return
    worker.hold(job)
    ss[key] = job
    ss[message_key(key)] = None


def follow(key: str, lang: str, took: Callable):
    """The session's job ``key`` on the page: once it has ended, it is taken off the session and
    ``took(its state, its task, lang)`` puts what it made where the page keeps it (what ``took``
    returns, else None); while it runs, its progress and a Stop button, redrawn twice a second (a
    fragment; the whole page reruns once it has ended); then why it did not start or finish (once)."""
    ss = st.session_state
    job, out = ss.get(key), None
    if isinstance(job, worker.Job) and not job.state.running:
        ss[key] = None
        out = took(job.state, job.task, lang)
    elif isinstance(job, worker.Job) and job.state.running:
        st.fragment(_job_panel, run_every=0.5)(key, lang)
    msg = ss.pop(message_key(key), None)
    if msg:
        k, fields = msg
        (st.warning if k.startswith("job_stopped_stop") else st.error)(t(k, lang, **fields))
    return out


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
        left = t("job_left", lang, s=duration((total - done) / rate)) if rate > 0 and done else ""
        numbers = {"pct": 100 * done // total, "done": f"{done:,}", "total": f"{total:,}",
                   "rate": f"{rate:,.0f}", "s": duration(s.seconds), "left": left}
        if p.get("phase") in ("curve", "optimal"):      # a trace's curve (sequence mode)
            what = (t("curve_phase_curve", lang, order=t(f"cap_order_{p.get('order')}", lang))
                    if p["phase"] == "curve" else t("curve_phase_optimal", lang, k=p.get("size", 1),
                                                    n=p.get("of", 1)))
            text = t("curve_progress", lang, what=what, **numbers)
        else:
            text = t("job_sweep_progress", lang, runs=p.get("runs", 0), **numbers)
        st.progress(min(1.0, done / total), text=text)
    elif p.get("phase") == "measuring":  # a sweep, before its replays
        st.progress(0.0, text=f"{t('capt_sizing', lang)} {duration(s.seconds)}")
    else:
        st.progress(0.0, text=t("job_reading", lang, n=f"{p.get('lines', 0):,}", s=duration(s.seconds)))
    if st.button(t("job_stop", lang), key=f"b_stop_{key}", icon=":material/stop_circle:"):
        job.stop("stop")
        st.rerun()


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def stopped_message(state, lang: str, what: dict) -> tuple[str, dict]:
    """(i18n key, fields) for a job that did not finish: it failed, or it was stopped."""
    if state.status == "failed":
        e = state.error
        if isinstance(e, tuple):
            return e
        return "capt_bad_trace", {"msg": md_escape(error_text(e, lang))}
    p = state.progress
    if "total" in p:
        at = t("job_at_sweep", lang, done=f"{p.get('done', 0):,}", total=f"{p['total']:,}")
    elif p.get("phase") == "measuring":
        at = t("job_at_measuring", lang)
    else:
        at = t("job_at_read", lang, done=f"{p.get('lines', 0):,}")
    return f"job_stopped_{state.why}", {"s": duration(state.seconds), "at": at,
                                        "mb": (worker.JOB_BUDGET.tensor_bytes or 0) >> 20, **what}
