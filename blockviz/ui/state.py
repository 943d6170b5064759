"""The player's per-session state and the rules that move it — plain functions over a mapping
(``st.session_state`` in the app, a dict in tests), so the logic is testable without a browser.

The cursor (step, and op frame while stepping into an event) lives in keys that no widget owns;
widgets mirror it and change it only through callbacks (see ui.md).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping, MutableMapping, Sequence

from blockviz.i18n import LANGS, t

# -- every session-state key ("bv_*"; widget keys start with "w_" / "b_") ----------------------
# the player
SCENARIO = "bv_scenario"
CURSOR = "bv_cursor"
FRAME = "bv_frame"          # None: whole events; an int: op index inside the current event
LANG = "bv_lang"
PRESENTER = "bv_presenter"
SPEED = "bv_speed"          # the board's play speed (it plays in the browser)
NOTICES = "bv_notices"      # [(i18n key, fields)] from the deep link, shown once
INITIALIZED = "bv_init"
# the session's own scenario (never shared with other sessions)
SOURCE = "bv_source"        # "builtin" (SCENARIO) or "user" (USER_RUN)
USER_RUN = "bv_user_run"    # the PlayerRun the player shows for SOURCE == "user"
FORK = "bv_fork"            # the fork being tried (base scenario, step, added events), or None
USER_OPTION = "__user__"    # the scenario selector's entry for USER_RUN (not a valid scenario id)
PAGES = "bv_pages"          # url path -> st.Page: what st.navigation was given (see nav.go_to)
SELFCHECK = "bv_selfcheck"  # self-check mode: predict each step before it is shown
SHARED = "bv_shared"        # (run key, link code): the session's own run that a link reopens
SHARE_PARAM = "s"           # ?s=CODE: a scenario shared by link (blockviz.scenario.share)
PNG = "bv_png"              # ((run key, step, lang), PNG bytes): the board's picture, made on asking
PNG_ERROR = "bv_png_error"  # why the picture could not be made
# what is drawn from the session's own runs (ui.cache), and their keys (ui.data)
MEMO = "bv_memo"            # {run key: {kind: {args: value}}}, least recently drawn first
SESSION_ID = "bv_uid"       # this session's id, in its runs' keys
RUNS_MADE = "bv_runs"       # how many runs this session has made
WATCHED = "bv_watched"      # worker._Watched: the session's uploads are freed when it ends
# self-check and try it yourself (ui.tryit)
SC_RESULT = "bv_sc_result"     # {"at": (run key, step, kind), "answer": tuple}
SC_ANSWER = "bv_sc_answer"     # {"run", "step", "ids", "kind"}: the revealed answer, on the board
SC_SCORE = "bv_sc_score"       # {(run key, step, kind): right at the first try}
SC_AT = "bv_sc_at"             # (run key, step) the answer widgets belong to
# self-check's answer widgets, and their values before an answer (a picker, or the ids typed)
SC_WIDGETS = {"w_sc_queue": "", "w_sc_hits": [], "w_sc_victim": None, "w_sc_victim_t": "",
              "w_sc_hits_t": "", "w_sc_window": [], "w_sc_window_t": ""}
FK_PARTS = "bv_fk_parts"       # the prompt being built: [part dict]
FK_MSG = "bv_fk_msg"           # (i18n key, fields, is_error) after the last action
FK_HISTORY = "bv_fk_history"   # the forks before each added event (undo)
FORK_KEY = "bv_fork_key"       # the run key of the fork's run
AUTHOR_HANDOFF = "bv_author_handoff"   # text for the Author page's editor
# the Author page (ui.author)
AUTHOR_TEXT = "bv_author_text"      # the editor's text (the editor component w_author_text shows it)
AUTHOR_SEQ = "bv_author_seq"        # changes whenever Python replaces the text (the editor takes it)
AUTHOR_SEEN = "bv_author_seen"      # the editor's last edit taken (editor.take_edit)
AUTHOR_CHECKED = "bv_author_checked"  # (text digest, ScenarioError | None, worker.Outcome | None)
AUTHOR_GOOD = "bv_author_good"      # (text, PlayerRun, worker.Outcome) of the last valid text that ran
AUTHOR_UNDO = "bv_author_undo"      # the text a gallery/starter/upload replaced
AUTHOR_MSG = "bv_author_msg"        # (i18n key, fields, kind) after an upload or a replace
AUTHOR_STEP = "bv_author_step"      # the preview's step
AUTHOR_STOPPED = "bv_author_stopped"  # ScenarioError: the preview of the current text could not run
# the capacity page's workload tab (ui.capacity)
CAP_PARAMS = "bv_cap_params"        # the parameters of the plan shown (the last valid ones computed)
CAP_PLAN_JOB = "bv_cap_plan_job"    # worker.Job computing a plan
CAP_RESULTS = "bv_cap_results"      # {parameters key: Plan}, this session's last few
# its real-traffic tab (ui.capacity_trace)
CAPT_TRACE = "bv_capt_trace"        # the session's trace: TraceFile, or None
CAPT_ERROR = "bv_capt_error"        # a TraceError (or an i18n key) for the last upload / generation
CAPT_SWEEP = "bv_capt_sweep"        # the last TraceSweep computed
CAPT_UPLOADED = "bv_capt_uploaded"  # the file_id of the upload already taken
CAPT_READ_JOB = "bv_capt_read_job"  # worker.Job reading (or generating) the session's trace
CAPT_SWEEP_JOB = "bv_capt_sweep_job"  # worker.Job sweeping it
CAPT_DIR = "bv_capt_dir"            # the session's SessionDir (its trace's folder)
CAPT_N = "bv_capt_n"                # how many traces the session has taken
CAPT_MARK_SEQ = "bv_capt_mark_seq"  # Python's moves of the curve's capacity marker (a count)
CAPT_CURVE_JSON = "bv_capt_curve_json"  # (sweep, lang, bytes per token, the curve element's data)
CAPT_CHAT_JOB = "bv_capt_chat_job"  # worker.Job replaying a Bailian trace's conversations at one size
CAPT_CHATS = "bv_capt_chats"        # (trace key, ChatTrace, chat_report's result) last taken



def opened(key: str) -> str:
    """The key that says expander ``key`` is open (its content runs)."""
    return "bv_open_" + key


def message_key(key: str) -> str:
    """Where a page keeps why its worker job ``key`` did not start or finish (said once)."""
    return key + "_msg"


def sc_widget(kind: str, picker: bool) -> str:
    """The SC_WIDGETS key of self-check's answer to question ``kind``: blocks picked (``picker``),
    or ids typed; the free queue is always typed, victim and evict share one widget."""
    if kind == "queue":
        return "w_sc_queue"
    return "w_sc_" + (kind if kind in ("hits", "window") else "victim") + ("" if picker else "_t")


SPEEDS = (0.5, 1.0, 2.0, 4.0)
DEFAULT_SCENARIO = "six-blocks"

NOps = Callable[[int], int]  # step index -> number of ops (frames) in that step

_STEP_RE = re.compile(r"\d{1,9}")


def presenter_flag(value) -> bool:
    """``?presenter=`` as a link writes it."""
    return value in ("1", "true", "yes", "on")


# -- moving the cursor --------------------------------------------------------------------
def step_next(state: MutableMapping, last: int, n_ops: NOps) -> None:
    """One step on (the board itself steps in the browser; Python moves the cursor only for
    self-check's "show step k"). In step-into mode (a frame) one op on, crossing into the next
    event; never past the last."""
    cursor, frame = state.get(CURSOR, 0), state.get(FRAME)
    if frame is None:
        cursor = min(cursor + 1, last)
    elif frame + 1 < n_ops(cursor):
        frame += 1
    elif cursor < last:
        cursor, frame = cursor + 1, 0
    state[CURSOR], state[FRAME] = cursor, frame


def user_run_key(state: MutableMapping, kind: str) -> str:
    """A key no other session's run can have (what is drawn from it is cached under it)."""
    import uuid
    uid = state.get(SESSION_ID)
    if not uid:
        uid = state[SESSION_ID] = uuid.uuid4().hex[:12]
    n = int(state.get(RUNS_MADE, 0)) + 1
    state[RUNS_MADE] = n
    return f"user:{uid}:{kind}:{n}"


def switch_scenario(state: MutableMapping, sid: str) -> None:
    state[SCENARIO] = sid
    state[SOURCE] = "builtin"
    state[CURSOR] = 0
    state[FRAME] = None


def use_user_run(state: MutableMapping, run, cursor: int = 0) -> None:
    """Show the session's own run (an authored scenario or a fork) in the player."""
    state[USER_RUN] = run
    state[SOURCE] = "user"
    state[CURSOR] = max(0, min(cursor, run.last))
    state[FRAME] = None


def showing_user(state: Mapping) -> bool:
    return state.get(SOURCE) == "user" and state.get(USER_RUN) is not None


def fork_shown(state: Mapping) -> bool:
    """The player shows the session's fork (its "try it yourself" panel is open)."""
    return (state.get(FORK) is not None and showing_user(state)
            and state.get(FORK_KEY) == state[USER_RUN].key)


def side_open(state: Mapping) -> bool:
    """A learning panel (self-check, try it yourself) is open beside the board: never in presenter
    mode, which shows the board alone."""
    return not state.get(PRESENTER) and (bool(state.get(SELFCHECK)) or fork_shown(state))


# -- deep links ---------------------------------------------------------------------------
def _shown(value: str) -> str:
    """A query value as it may appear in a warning: short, no markdown code fences."""
    v = value.replace("`", "'").replace("\n", " ")
    return v if len(v) <= 48 else v[:45] + "…"


def _choose(value: str | None, allowed, default: str, notices: list, key: str, **fields) -> str:
    """``value`` if ``allowed`` holds it, else ``default`` (with the notice ``key`` for a value given)."""
    if value and value not in allowed:
        notices.append((key, {"v": _shown(value), **fields}))
    return value if value and value in allowed else default


def choose_scenario(value: str | None, ids: Sequence[str], notices: list) -> str:
    """``value`` if it names a built-in scenario; never a path: ids come from the glob only."""
    default = DEFAULT_SCENARIO if DEFAULT_SCENARIO in ids else (ids[0] if ids else DEFAULT_SCENARIO)
    return _choose(value, ids, default, notices, "warn_scenario", d=default)


def choose_step(value: str | None, last: int, notices: list) -> int:
    if value is None or value == "":
        return 0
    v = value.strip()
    if _STEP_RE.fullmatch(v) and int(v) <= last:
        return int(v)
    k = last if _STEP_RE.fullmatch(v) else 0
    notices.append(("warn_step", {"v": _shown(value), "n": last, "k": k}))
    return k


def choose_op(value: str | None, step: int, n_ops: int, notices: list) -> int | None:
    """``op`` is 1-based as shown on the page ("op 2 of 5"); the frame index is op - 1."""
    if value is None or value == "":
        return None
    v = value.strip()
    if _STEP_RE.fullmatch(v) and 1 <= int(v) <= max(1, n_ops):
        return int(v) - 1
    notices.append(("warn_op", {"v": _shown(value), "k": step, "m": n_ops}))
    return None


def init_from_link(state: MutableMapping, params: Mapping[str, str], ids: Sequence[str],
                   default_lang: str, last_of: Callable[[str], int],
                   n_ops_of: Callable[[str, int], int], open_link: Callable | None = None) -> None:
    """First run of a session: open exactly where ``?scenario=&step=&op=&lang=&presenter=`` says,
    with a notice (and a sensible fallback) for every value that does not make sense. ``?s=CODE``
    (a shared scenario) opens that scenario as the session's own run instead, through
    ``open_link(state, code, notices, fallback id)`` (the app passes ``blockviz.ui.player.open_link``;
    without it a code is not opened)."""
    notices: list = []
    lang = _choose(params.get("lang"), LANGS, default_lang, notices, "warn_lang")
    sid = choose_scenario(params.get("scenario"), ids, notices)
    code = params.get(SHARE_PARAM)
    run = None
    if code and open_link is not None:
        run = open_link(state, code, notices, sid)
    last, n_ops = (run.last, run.n_ops) if run is not None else (last_of(sid), lambda i: n_ops_of(sid, i))
    step = choose_step(params.get("step"), last, notices)
    frame = choose_op(params.get("op"), step, n_ops(step), notices)
    state[SCENARIO], state[LANG] = sid, lang
    if run is not None:
        use_user_run(state, run, step)
        state[SHARED] = (run.key, code)
    state[CURSOR], state[FRAME] = step, frame
    state[PRESENTER] = presenter_flag(params.get("presenter"))
    state.setdefault(SPEED, 1.0)
    state[NOTICES] = notices
    state[INITIALIZED] = True


def shared_code(state: Mapping) -> str | None:
    """The link code of the run the player shows, when a link describes it."""
    shared = state.get(SHARED)
    if not showing_user(state) or not shared or shared[0] != state[USER_RUN].key:
        return None
    return shared[1]


def linked(state: Mapping) -> bool:
    """Whether a link reopens what the player shows (a built-in, or a run with a link code)."""
    return not showing_user(state) or shared_code(state) is not None


def run_notices(run) -> list:
    """[(i18n key, fields)] for a run that stopped before its last event (a time or size limit of
    its budget, or an event the reached state does not allow): said on every step, not only at
    the last one, so that "step 1 of 4" is never read as the whole scenario."""
    from blockviz.teach.authoring import download_name
    n = run.total_steps
    err = run.timeline.error
    if run.stopped is not None:
        k = run.stopped[0]
        why = (t("preview_step_limit", "en", k=f"{k:,}"), t("preview_step_limit", "zh", k=f"{k:,}"))
    elif err is not None:
        k = run.timeline.error_step or run.last
        why = (err.localized("en"), err.localized("zh"))
    else:
        return []
    out = [("cut_short", {"k": k, "n": n, "last": run.last, "why_en": why[0], "why_zh": why[1]}),
           *lighter_notice(run)]
    if run.stopped is not None or "budget" in getattr(err, "message", ""):
        out.append(("cut_short_cli", {"file": download_name(run.scenario.id)}))
    return out


def lighter_notice(run) -> list:
    """[(i18n key, fields)], or none: what to change so that a run the app's preview cut short runs
    whole there — by the limit it met (its step count, or a dimension of the preview's budget)."""
    from blockviz.sim.budget import PREVIEW_BUDGET as B
    from blockviz.sim.budget import mib
    if run.stopped is not None:
        return [("preview_lighter_steps", {"k": f"{run.stopped[0]:,}"})]
    fields = {"time": {"s": f"{B.seconds:g}"}, "tokens": {"n": f"{B.tokens:,}"},
              "engine_steps": {"n": f"{B.engine_steps:,}"}, "bytes": {"limit": mib(B.tensor_bytes or 0)}}
    kind = getattr(run, "exceeded", None)
    return [(f"preview_lighter_{kind}", fields[kind])] if kind in fields and not run.shared else []


def payload_notices(run) -> list:
    """[(i18n key, fields)]: why a run has no KV payloads although its config has a model (a
    preview whose payloads did not fit the app), and what that changes."""
    from blockviz.teach.authoring import download_name
    off = getattr(run, "payloads_off", None)
    if off is None:
        return []
    return [off, ("preview_no_payloads_same", {"file": download_name(run.scenario.id)})]


def url_params(state: Mapping) -> dict[str, str]:
    """The query string that reopens exactly this view. The session's own scenario has a link when
    it fits in one (``?s=CODE``: a shared link, or one the Author page made); else it lives in
    this session only: just the language."""
    code = shared_code(state)
    if showing_user(state) and code is None:
        return {"lang": str(state[LANG])}
    where = {SHARE_PARAM: code} if code is not None else {"scenario": str(state[SCENARIO])}
    out = {**where, "step": str(state[CURSOR]), "lang": str(state[LANG])}
    if state.get(FRAME) is not None:
        out["op"] = str(state[FRAME] + 1)
    if state.get(PRESENTER):
        out["presenter"] = "1"
    return out
