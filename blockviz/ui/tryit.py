"""The player's learning tools: "try it yourself" (fork the scenario at the current step, add events
by form, each one run at once) and self-check (predict the next step, then be told what was right
and why). The rules live in ``blockviz.sim.fork`` and ``blockviz.teach.selfcheck``; this module only draws
widgets and keeps the session's fork in ``st.session_state``."""
from __future__ import annotations

from copy import copy
from dataclasses import dataclass
from functools import cached_property

import streamlit as st

from blockviz.i18n import event_label, t
from blockviz.i18n.errors import ErrorMessage
from blockviz.render.theme import esc, heading_html
from blockviz.scenario import ScenarioError, share
from blockviz.scenario.schema import Scenario
from blockviz.sim.fork import (
    arrive_event,
    decode_event,
    finish_event,
    fork_id,
    fork_steps,
    fork_text,
    next_request_id,
    preempt_event,
    random_part,
    reset_event,
    same_as_part,
    step_event,
    text_part,
    tokens_part,
)
from blockviz.teach import selfcheck
from blockviz.ui import board, data, worker
from blockviz.ui import state as session
from blockviz.ui.nav import AUTHOR_PATH, base_url, go_to, md_escape, md_fields

FORK_FILE = "fork.yaml"
EVENT_KINDS = ("arrive", "decode", "step", "finish", "preempt", "reset_prefix_cache")
PART_KINDS = ("tokens", "text", "same_as", "random")
# the events of requests picked in the form: (its widget, the message when none is, the event)
PICKED = {"finish": ("w_fk_fin", "no_live", finish_event),
          "preempt": ("w_fk_pre", "no_running", preempt_event)}


@dataclass(frozen=True)
class Fork:
    base: Scenario          # the scenario forked (its title and config)
    upto: int               # its steps 1..upto are kept
    steps: tuple            # as a file writes them: those steps (outputs pinned), then the added ones

    @cached_property
    def text(self) -> str:
        """The fork as a scenario file (written once per fork: the download button asks for it on
        every rerun)."""
        return fork_text(self.base, self.upto, list(self.steps))

    @property
    def extra(self) -> tuple:
        return self.steps[self.upto:]

    @property
    def file_name(self) -> str:
        return fork_id(self.base.id) + ".yaml"


def _run_fork(fork: Fork) -> tuple[data.PlayerRun, str | None]:
    """Load the fork's YAML (the same text a download gives) and run it, in a worker (the text holds
    what the session typed): its run and its link code (None: too long for a link); ScenarioError
    if it is not valid or an event is not allowed."""
    outcome = worker.user_outcome(st.session_state, "fork", worker.Source("text", FORK_FILE, fork.text),
                                  share=True)
    run = worker.run_of(outcome, FORK_FILE)
    if run.timeline.error is not None:
        raise run.timeline.error
    if run.stopped is not None:
        k, n = run.stopped
        lang = st.session_state.get(session.LANG, "en")
        raise ScenarioError(FORK_FILE, None, None, "", t("preview_capped", lang, k=k, n=n,
                                                         file=fork.file_name))
    return run, (outcome.share if isinstance(outcome.share, str) else None)


# -- callbacks -------------------------------------------------------------------------------
def start_fork(run: data.PlayerRun, step: int) -> None:
    fork = Fork(run.scenario, step, tuple(fork_steps(run.scenario, step, run.timeline)))
    if _apply(fork, msg=False):
        st.session_state[session.FK_PARTS], st.session_state[session.FK_HISTORY] = [], []


def _apply(fork: Fork, msg: bool = True) -> bool:
    """Run ``fork`` and show it (saying what was added, with ``msg``); False, saying why, when it
    is refused (the fork shown stays as it was)."""
    ss = st.session_state
    try:
        new, code = _run_fork(fork)
    except ScenarioError as e:
        ss[session.FK_MSG] = ("fork_refused", {"msg": ErrorMessage(e.message)}, True)
        return False
    ss[session.FK_MSG] = ("fork_added", {"n": len(fork.extra), "k": fork.upto}, False) if msg else None
    # the player shows the fork's run at its last step, and its URL carries the fork (``?s=``, as
    # a share link does) so that the address bar's link reopens it
    ss[session.FORK], ss[session.FORK_KEY] = fork, new.key
    session.use_user_run(ss, new, new.last)
    ss[session.SHARED] = (new.key, code) if code is not None else None
    return True


def add_event(event) -> bool:
    """Append an event to the session's fork and run it; on refusal the fork stays as it was.
    Every output sampled so far is scripted first, so the steps already shown replay unchanged
    even when the new event brings new words (the model's choices)."""
    ss = st.session_state
    fork, run = ss.get(session.FORK), ss.get(session.USER_RUN)
    if fork is None or run is None:
        return False
    steps = fork_steps(run.scenario, len(fork.steps), run.timeline) + [event]
    if not _apply(Fork(fork.base, fork.upto, tuple(steps))):
        return False
    ss[session.FK_HISTORY] = list(ss.get(session.FK_HISTORY) or []) + [fork]
    return True


def _undo() -> None:
    ss = st.session_state
    history = list(ss.get(session.FK_HISTORY) or [])
    if history and _apply(history[-1], msg=False):
        ss[session.FK_HISTORY] = history[:-1]


def _back() -> None:
    ss = st.session_state
    ss[session.FORK] = None
    session.switch_scenario(ss, ss.get(session.SCENARIO) or session.DEFAULT_SCENARIO)


def _msg(key: str, fields: dict) -> None:
    st.session_state[session.FK_MSG] = (key, fields, True)


def _pending_part() -> dict:
    """The part the part inputs describe now; ValueError says what is wrong with it."""
    ss = st.session_state
    kind = ss.get("w_fk_pk", "tokens")
    if kind == "tokens":
        return tokens_part(ss.get("w_fk_ptok", ""))
    if kind == "text":
        return text_part(ss.get("w_fk_ptext", ""))
    if kind == "same_as":
        rid = ss.get("w_fk_psame")
        if not rid:
            raise ValueError(t("no_requests", ss[session.LANG]))
        return same_as_part(rid, int(ss.get("w_fk_pfirst") or 0))
    return random_part(int(ss.get("w_fk_prand") or 0))


def _add_part() -> None:
    ss = st.session_state
    try:
        part = _pending_part()
    except ValueError as e:
        _msg("part_bad", {"msg": e})
        return
    ss[session.FK_PARTS] = list(ss.get(session.FK_PARTS) or []) + [part]
    ss[session.FK_MSG] = None


def _clear_parts() -> None:
    st.session_state[session.FK_PARTS] = []


def _add_from_form() -> None:
    ss = st.session_state
    kind = ss.get("w_fk_kind", "arrive")
    if kind == "arrive":
        parts = ss.get(session.FK_PARTS) or []
        if not parts:                   # the part being typed, not added yet: take it as the prompt
            try:
                parts = [_pending_part()]
            except ValueError:
                _msg("prompt_empty", {})
                return
        rid = (ss.get("w_fk_id") or "").strip()
        event = arrive_event(rid, parts, max_tokens=int(ss.get("w_fk_max") or 0) or None,
                               cache_salt=(ss.get("w_fk_salt") or "").strip() or None,
                               lora=(ss.get("w_fk_lora") or "").strip() or None)
        if add_event(event):
            ss[session.FK_PARTS] = []
            ss["w_fk_id"] = ""
        return
    if kind == "decode":
        event = decode_event(int(ss.get("w_fk_dsteps") or 1), ss.get("w_fk_dreq") or None)
    elif kind == "step":
        event = step_event(int(ss.get("w_fk_steps") or 1))
    elif kind in PICKED:                # none picked: said so, nothing added
        key, none, make = PICKED[kind]
        if not ss.get(key):
            _msg(none, {})
            return
        event = make(ss[key])
    else:
        event = reset_event()
    add_event(event)


def _to_author() -> None:
    fork = st.session_state.get(session.FORK)
    if fork is not None:
        st.session_state[session.AUTHOR_HANDOFF] = fork.text


# -- the fork panel -------------------------------------------------------------------------
def _part_text(part: dict) -> str:
    if "tokens" in part:
        return "tokens [" + " ".join(map(str, part["tokens"])) + "]"
    if "text" in part:
        return f"text “{part['text']}”"
    if "same_as" in part:
        return f"same_as {part['same_as']}" + (f" (first {part['first']})" if part.get("first") else "")
    return f"random {part['random']}"


def fork_panel(run: data.PlayerRun, fork: Fork, lang: str) -> None:
    ss = st.session_state
    last = run.timeline.step(run.last)
    reqs = last.requests
    everyone = list(reqs)
    live = [rid for rid, r in reqs.items() if r.status != "finished"]
    running = list(last.running)
    with st.container(border=True, key="fork_panel"):
        st.html(heading_html(t("fork_title", lang, k=fork.upto), t("fork_appends", lang, n=run.last)))
        # (one line in a panel beside the board: the event's kind as a list, the intro as its help)
        kind = st.selectbox(t("fork_event", lang), EVENT_KINDS, key="w_fk_kind",
                            format_func=lambda k: t("ev_kind_" + k, lang), help=t("fork_intro", lang))
        if kind == "arrive":
            _arrive_form(lang, everyone, fork)
        elif kind == "decode":
            c1, c2 = st.columns([1, 3])
            c1.number_input(t("decode_steps", lang), 1, 100, 1, key="w_fk_dsteps")
            c2.multiselect(t("decode_requests", lang), running, key="w_fk_dreq",
                           placeholder=t("no_running", lang) if not running else "")
        elif kind == "step":
            st.number_input(t("decode_steps", lang), 1, 100, 1, key="w_fk_steps", width=200)
        elif kind == "finish":
            if ss.get("w_fk_fin") and not set(ss["w_fk_fin"]) <= set(live):
                ss["w_fk_fin"] = [r for r in ss["w_fk_fin"] if r in live]
            st.multiselect(t("finish_ids", lang), live, key="w_fk_fin",
                           placeholder=t("no_live", lang) if not live else "")
        elif kind == "preempt":
            if ss.get("w_fk_pre") not in running:
                ss["w_fk_pre"] = running[-1] if running else None
            st.selectbox(t("preempt_id", lang), running, key="w_fk_pre",
                         placeholder=t("no_running", lang))
        with st.container(horizontal=True, gap="small", key="fork_buttons"):
            st.button(t("fork_add", lang), key="b_fk_add", type="primary", icon=":material/add:",
                      on_click=_add_from_form)
            st.button(t("fork_undo", lang), key="b_fk_undo", icon=":material/undo:", on_click=_undo,
                      disabled=not ss.get(session.FK_HISTORY))
        msg = ss.get(session.FK_MSG)             # what the last event did: under its button
        if msg:
            key, fields, error = msg
            (st.error if error else st.success)(t(key, lang, **md_fields(fields, lang)))
        with st.container(horizontal=True, gap="small", key="fork_files"):
            st.download_button(t("fork_download", lang), fork.text, file_name=fork.file_name,
                               mime="application/x-yaml", key="b_fk_download",
                               icon=":material/download:", on_click="ignore")
            if st.button(t("fork_to_author", lang), key="b_fk_author", icon=":material/edit:",
                         on_click=_to_author):
                go_to(AUTHOR_PATH)
            st.button(t("fork_back", lang), key="b_fk_back", icon=":material/close:", on_click=_back)
        # the fork's link (as the Author page's share link: the whole text in ``?s=``, no step, so
        # it opens at step 0), or why it has none
        code = session.shared_code(ss)
        if code is None:
            st.caption(t("fork_no_link", lang))
        else:
            st.caption(t("fork_link", lang))
            st.code(share.link(base_url(), code, lang=lang), language=None)


def _arrive_form(lang: str, everyone: list[str], fork: Fork) -> None:
    ss = st.session_state
    taken = set(everyone) | {e["arrive"]["id"] for e in fork.extra
                             if isinstance(e, dict) and "arrive" in e}
    taken |= {s.args.id for s in fork.base.steps[:fork.upto] if s.kind == "arrive"}
    # written on every run, not only when empty: a run that set it can be cut short by the next
    # (the board's own rerun as the panel opens) before the browser drew it, and only a run that
    # writes a widget's key sends its value
    ss["w_fk_id"] = ss.get("w_fk_id") or next_request_id(taken)
    parts = ss.get(session.FK_PARTS) or []
    # (a panel beside the board is narrow: two fields a row at most, the optional ones folded)
    c1, c2 = st.columns(2, vertical_alignment="bottom")     # (a label may wrap: boxes level)
    c1.text_input(t("req_id", lang), key="w_fk_id", max_chars=64)
    c2.number_input(t("max_tokens", lang), 0, 100_000, 0, key="w_fk_max")
    with st.expander(t("fork_more", lang), expanded=bool(ss.get("w_fk_salt") or ss.get("w_fk_lora"))):
        st.text_input(t("cache_salt", lang), key="w_fk_salt", max_chars=256)
        st.text_input(t("lora", lang), key="w_fk_lora", max_chars=64)
    shown = (f'<b data-prompt>{esc(" + ".join(_part_text(p) for p in parts))}</b>' if parts
             else f'<span class="bv-muted" data-prompt>{esc(t("prompt_none", lang))}</span>')
    st.html(f'<div class="bv"><span class="bv-small">{esc(t("prompt_parts", lang))}:</span> {shown}</div>')
    kind = st.selectbox(t("part_kind", lang), PART_KINDS, key="w_fk_pk",
                        format_func=lambda k: t("part_" + k, lang))
    if kind == "tokens":
        st.text_input(t("part_tokens_in", lang), key="w_fk_ptok", placeholder="1 2 3 4")
    elif kind == "text":
        st.text_input(t("part_text_in", lang), key="w_fk_ptext", placeholder="the cat sat")
    elif kind == "same_as":
        a, b = st.columns(2)
        a.selectbox(t("part_same_as_in", lang), everyone, key="w_fk_psame")
        b.number_input(t("part_first", lang), 0, 1_000_000, 0, key="w_fk_pfirst")
    else:
        st.number_input(t("part_random_in", lang), 1, 4096, 4, key="w_fk_prand")
    with st.container(horizontal=True, gap="small", key="fork_parts"):
        st.button(t("part_add", lang), key="b_fk_part", icon=":material/playlist_add:", on_click=_add_part)
        st.button(t("part_clear", lang), key="b_fk_clear", on_click=_clear_parts, disabled=not parts)


# -- self-check -----------------------------------------------------------------------------
def _sc_reset(run: data.PlayerRun, cursor: int) -> None:
    """New step: fresh answer widgets, and the question that suits the step to come."""
    ss = st.session_state
    at = (run.key, cursor)
    if ss.get(session.SC_AT) == at:
        return
    ss[session.SC_AT] = at
    for key, empty in session.SC_WIDGETS.items():
        ss[key] = copy(empty)
    if cursor < run.last:
        ss["w_sc_kind"] = selfcheck.default_question(run.timeline, cursor + 1)


def _sc_answer(run: data.PlayerRun, kind: str) -> tuple[int, ...]:
    few = _few_blocks(run)
    v = st.session_state.get(session.sc_widget(kind, few))
    if kind != "queue" and few:                # picked: a set of blocks, or one block or none
        return tuple(v or ()) if kind in ("hits", "window") else () if v is None else (int(v),)
    ids = selfcheck.parse_ids(v or "")
    return ids if kind in ("queue", "hits", "window") else ids[:1]


PICKER_LIMIT = 256   # self-check answers from a picker up to this many usable blocks; more: typed ids


def _few_blocks(run: data.PlayerRun) -> bool:
    return run.timeline.num_gpu_blocks <= PICKER_LIMIT + 1   # (+ the null block)


def _sc_check(run: data.PlayerRun, cursor: int) -> None:
    ss = st.session_state
    kind = ss.get("w_sc_kind") or "queue"
    try:
        answer = _sc_answer(run, kind)
    except ValueError as e:
        ss[session.SC_RESULT] = {"at": (run.key, cursor, kind), "bad": str(e)}
        return
    at = (run.key, cursor, kind)
    ss[session.SC_RESULT] = {"at": at, "answer": answer}
    score = ss.setdefault(session.SC_SCORE, {})
    if at not in score:
        grade = selfcheck.check(run.timeline, cursor + 1, kind, answer, "en", run.labels, run.free_order)
        score[at] = grade.correct


def _sc_show(run: data.PlayerRun) -> None:
    ss = st.session_state
    kind = ss.get("w_sc_kind") or "queue"
    k = ss[session.CURSOR] + 1
    if k <= run.last:                         # the answer, outlined on the board at that step
        ss[session.SC_ANSWER] = {"run": run.key, "step": k,
                         "ids": list(selfcheck.expected(run.timeline, k, kind)), "kind": kind}
    session.step_next(ss, run.last, run.n_ops)
    board.move(ss, board.PLAYER, ss[session.CURSOR], ss.get(session.FRAME), run.key)  # Python moves it


def board_answer(run: data.PlayerRun) -> dict | None:
    """The answer the learner asked to see, for the board to outline (its step and block ids)."""
    a = st.session_state.get(session.SC_ANSWER)
    return {"step": a["step"], "ids": a["ids"]} if a and a["run"] == run.key else None


def selfcheck_panel(run: data.PlayerRun, cursor: int, lang: str) -> None:
    _sc_reset(run, cursor)
    with st.container(border=True, key="selfcheck"):
        if cursor >= run.last:
            st.html(f'<div class="bv bv-small">{esc(t("sc_at_end", lang))}</div>')
            _sc_score(run, lang, done=True)
            return
        k = cursor + 1
        event = event_label(run.timeline.step_of(k), lang)
        st.html(heading_html(t("sc_title", lang, k=k, event=event)))
        kind = st.segmented_control(t("sc_question", lang), selfcheck.questions(run.timeline),
                                    key="w_sc_kind", required=True,
                                    format_func=lambda q: t("sc_q_" + q, lang))
        n = run.timeline.num_gpu_blocks
        few = _few_blocks(run)
        label, widget = t("sc_in_" + kind, lang, k=k), session.sc_widget(kind, few)
        if kind == "queue":
            st.text_input(label, key=widget, placeholder=t("sc_in_queue_ph", lang))
        elif not few:                         # ids typed
            st.text_input(label, key=widget)
        elif kind in ("hits", "window"):        # a set of blocks
            st.multiselect(label, list(range(1, n)), key=widget, placeholder=t("none", lang))
        else:                                 # one block or none: victim, evict
            none = t("sc_none_option" if kind == "victim" else "sc_none_option_evict", lang)
            st.selectbox(label, [None] + list(range(1, n)), key=widget,
                         format_func=lambda b: none if b is None else str(b))
        row = st.container(horizontal=True, gap="small", key="sc_buttons")
        row.button(t("sc_check", lang), key="b_sc_check", type="primary", icon=":material/check:",
                   on_click=_sc_check, args=(run, cursor))
        row.button(t("sc_show", lang, k=k), key="b_sc_show", icon=":material/visibility:",
                   on_click=_sc_show, args=(run,))
        _sc_result(run, cursor, kind, lang)
        _sc_score(run, lang)


def _sc_score(run: data.PlayerRun, lang: str, done: bool = False) -> None:
    """The score over this lesson (first tries only); at its end, the lesson's result."""
    score = [ok for at, ok in (st.session_state.get(session.SC_SCORE) or {}).items() if at[0] == run.key]
    if score:
        key = "sc_lesson_done" if done else "sc_score"
        st.caption(t(key, lang, right=sum(score), total=len(score), steps=run.last))


def _sc_result(run: data.PlayerRun, cursor: int, kind: str, lang: str) -> None:
    res = st.session_state.get(session.SC_RESULT)
    if not res or res["at"] != (run.key, cursor, kind):
        return
    if "bad" in res:
        st.warning(t("sc_bad_input", lang, w=md_escape(res["bad"])))
        return
    g = selfcheck.check(run.timeline, cursor + 1, kind, res["answer"], lang, run.labels, run.free_order)
    details = "".join(f"<li>{esc(d)}</li>" for d in g.details)
    why = "".join(f"<li>{esc(w)}</li>" for w in g.why)
    cls = "bv-okbox" if g.correct else "bv-errbox"
    st.html(f'<div class="bv {cls}" data-correct="{str(g.correct).lower()}" role="status">'
            f'<div class="bv-sc-verdict">{"✓" if g.correct else "✗"} {esc(g.verdict)}</div>'
            + (f'<ul class="bv-did">{details}</ul>' if details else "")
            + f'<div class="bv-small" style="margin-top:.4em">{esc(t("sc_why", lang))}</div>'
              f'<ul class="bv-did">{why}</ul></div>')
