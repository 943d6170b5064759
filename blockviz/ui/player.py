"""The player page: step through a built-in scenario, event by event or op by op.

Layout: sidebar (scenario, language, speed, presenter mode, the marks' legend); main area: the
board (it steps and plays in the browser), then the learning tools (self-check, try it yourself,
export) and the KV payload, metrics and KV events, each opened on demand. What is drawn below the
board is built by the pure functions in ``blockviz.render`` and cached by ``blockviz.ui.cache``.

A shared link (``?s=CODE``, ``blockviz.scenario.share``) opens here: the server checks the code's
length and nothing more; a preview worker (``ui.worker``) decodes it, loads it like a file and
runs it within the preview budget, and the run becomes the session's own. Every refusal is a
notice for the page (in both languages), never a traceback; nothing is stored on the server.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import streamlit as st

from blockviz.i18n import LANGS, t
from blockviz.i18n.errors import localize_error
from blockviz.render import theme
from blockviz.render.authoring import AUTHOR_CSS
from blockviz.render.markers import markers_legend_html
from blockviz.render.metrics import metrics_figure, vllm_metrics_html
from blockviz.render.payload import payload_caption_html, payload_figure, verify_html, written_blocks
from blockviz.scenario import ScenarioError
from blockviz.scenario.share import LINK_FILE, MAX_CODE_CHARS, LinkTooLong
from blockviz.teach.authoring import download_name
from blockviz.ui import board, data, tryit, worker
from blockviz.ui import state as session
from blockviz.ui.cache import frozen, memo
from blockviz.ui.nav import default_lang, follow, language_toggle, md_fields

# -- callbacks (they only change session state) --------------------------------------------
BOARD = board.PLAYER


def _board_pos() -> None:
    """The board moved (in the browser): the panels below it follow."""
    ss = st.session_state
    pos = board.position(ss, BOARD)
    if pos is None:
        return
    run = _current_run()
    try:
        ss[session.CURSOR] = max(0, min(int(pos.get("step", 0)), run.last))
        frame = pos.get("frame")
        ss[session.FRAME] = None if frame is None else max(0, int(frame))
    except (TypeError, ValueError):
        return
    if pos.get("lang") in LANGS:
        ss[session.LANG] = pos["lang"]


def _board_want() -> None:
    """The board reached the edge of the steps it holds: ship the window around this step."""
    ss = st.session_state
    want = board.reported(ss, BOARD, "want")
    if isinstance(want, int):
        ss[session.CURSOR] = max(0, min(want, _current_run().last))


def _set_scenario() -> None:
    ss = st.session_state
    sid = ss.get("w_scenario")
    if sid == session.USER_OPTION and ss.get(session.USER_RUN) is not None:
        session.use_user_run(ss, ss[session.USER_RUN], 0)
    elif sid in data.builtin_index().paths:
        session.switch_scenario(ss, sid)


def _close_selfcheck() -> None:
    st.session_state[session.SELFCHECK] = False


def _fork_here() -> None:
    """Try it yourself, at the step the board shows: a click outside the board has it tell
    Python its step first (board.js), which this run may not have taken yet."""
    _board_pos()
    tryit.start_fork(_current_run(), st.session_state[session.CURSOR])


def _current_run() -> data.PlayerRun:
    """The session's own run when it shows one (an authored scenario, a fork), else a built-in."""
    ss = st.session_state
    if session.showing_user(ss):
        return ss[session.USER_RUN]
    return data.builtin_run(ss[session.SCENARIO])


# -- the page -------------------------------------------------------------------------------
def page() -> None:
    ss = st.session_state
    index = data.builtin_index()
    if not index.ids:
        st.error(t("no_scenarios", ss.get(session.LANG, "en")))
        return
    if not ss.get(session.INITIALIZED):
        # the first visit (maybe from the Author page, opening the session's own scenario there)
        own = (ss[session.CURSOR], ss.get(session.FRAME)) if session.showing_user(ss) else None
        session.init_from_link(ss, dict(st.query_params), index.ids, ss.get(session.LANG) or default_lang(),
                         lambda sid: data.builtin_run(sid).last,
                         lambda sid, i: data.builtin_run(sid).n_ops(i), open_link)
        if own is not None:
            ss[session.CURSOR], ss[session.FRAME] = own
    elif ss.get(session.SCENARIO) not in index.paths:
        session.switch_scenario(ss, index.ids[0])

    run = _current_run()
    ss[session.CURSOR] = max(0, min(int(ss.get(session.CURSOR, 0)), run.last))
    lang, presenter = ss[session.LANG], ss.get(session.PRESENTER, False)
    for css in _stylesheets(presenter):
        st.html(css)
    _sidebar(run, index, lang, presenter)
    for key, fields in ss.get(session.NOTICES, []) + session.run_notices(run):   # inert in markdown
        st.warning(t(key, lang, **md_fields(fields, lang)))
    for name, err in index.broken:
        st.warning(t("scenario_broken", lang, **md_fields({"f": name, "msg": err}, lang)))
    _body(run, lang, presenter)


@functools.cache
def _stylesheets(presenter: bool) -> tuple[str, ...]:
    """The page's stylesheets (built once; they are sent on every rerun)."""
    return theme.css(presenter), AUTHOR_CSS, theme.SIDE_PANEL_CSS


def _body(run: data.PlayerRun, lang: str, presenter: bool) -> None:
    ss = st.session_state
    cursor, frame = ss[session.CURSOR], ss.get(session.FRAME)
    side = session.side_open(ss)
    # The board tells Python its step only while a panel beside or below it follows the step.
    report = bool(side or any(ss.get(session.opened(k)) for k in ("x_payload", "x_metrics", "x_events")))
    # The board and the learning panel share one row, the board always first: opening the panel
    # narrows the board (it refits to its container's width) but never moves it in the page, so
    # the browser keeps it (a moved component is mounted afresh).
    cols = st.columns(SIDE_WEIGHTS if side else [1], gap="medium")
    with cols[0]:
        board.show(run, ss, key=BOARD, step=cursor, frame=frame, lang=lang, presenter=presenter,
                   speed=ss.get(session.SPEED, 1.0), url=session.linked(ss),
                   report=report or session.showing_user(ss),
                   answer=tryit.board_answer(run) if ss.get(session.SELFCHECK) else None,
                   on_pos=_board_pos, on_want=_board_want)
    if side:
        with cols[1], st.container(key="side_panel"):
            _learn_panels(run, cursor, frame, lang)
    if presenter:
        _sync_url()
        return
    with st.container(horizontal=True, vertical_alignment="center", gap="medium", key="learn"):
        _export_buttons(run, cursor, lang)
    # The tensors and the metrics open on demand: closed, they cost nothing (no plotly).
    pcol, mcol = st.columns(2, gap="medium")
    with pcol:
        box = _lazy_expander(t("payload", lang), "x_payload")
        with box:
            if box.open:
                _payload(run, cursor, lang)
    with mcol:
        box = _lazy_expander(t("metrics", lang), "x_metrics")
        with box:
            if box.open:
                st.plotly_chart(memo(run, "metrics", (cursor, lang),
                                     lambda: frozen(metrics_figure(run.series, cursor, lang))),
                                key="metrics_chart", config={"displayModeBar": False})
                # vLLM's metrics after this step (render/metrics.py's table and sentence)
                st.html(memo(run, "vllm_metrics", (cursor, lang), lambda: vllm_metrics_html(
                    run.timeline.step(cursor), run.timeline.block_size, lang)))
    box = _lazy_expander(t("kv_events", lang), "x_events")
    with box:
        if box.open:
            events = run.timeline.step(cursor).kv_events
            st.caption(t("kv_events_at", lang, k=cursor, n=len(events)))
            if events:
                st.json(list(events), expanded=True)
    _sync_url()


SIDE_WEIGHTS = [3, 1]        # the board, the learning panel beside it


def _learn_switches(lang: str) -> None:
    """The learning tools' switches, in the sidebar (on screen whatever the board's height):
    self-check on/off, try it yourself (fork at the board's step). Each opens its panel beside
    the board."""
    ss = st.session_state
    st.caption(t("learn", lang))
    ss["w_selfcheck"] = bool(ss.get(session.SELFCHECK))
    st.toggle(t("selfcheck", lang), key="w_selfcheck", on_change=follow,
              args=(session.SELFCHECK, "w_selfcheck"), help=t("selfcheck_help", lang))
    st.button(t("fork_here", lang), key="b_fork", icon=":material/call_split:", on_click=_fork_here,
              help=t("fork_help", lang), disabled=session.fork_shown(ss))
    msg = ss.get(session.FK_MSG)
    if not session.fork_shown(ss) and msg and msg[2]:   # a fork that could not start
        st.error(t(msg[0], lang, **md_fields(msg[1], lang)))
        ss[session.FK_MSG] = None


def _export_buttons(run: data.PlayerRun, cursor: int, lang: str) -> None:
    """The board as a file: the whole run as one offline HTML page (opens at this step), and
    this step as a PNG (the board shot by headless Chromium on the server)."""
    ss = st.session_state
    name = run.scenario.id or "scenario"
    st.download_button(t("export_html", lang), data=lambda: export_doc(run, cursor, lang),
                       file_name=f"{name}.html", mime="text/html", key="b_export_html",
                       icon=":material/download:", on_click="ignore", help=t("export_html_help", lang))
    png = ss.get(session.PNG)
    if png is not None and png[0] == (run.key, cursor, lang):
        st.download_button(t("export_png_ready", lang, k=cursor), data=png[1],
                           file_name=f"{name}-step{cursor}.png", mime="image/png", key="b_export_png_dl",
                           icon=":material/image:", on_click="ignore")
    else:
        st.button(t("export_png", lang), key="b_export_png", icon=":material/image:",
                  on_click=_make_png, args=(run, lang), help=t("export_png_help", lang))
    if ss.get(session.PNG_ERROR):
        st.error(ss.pop(session.PNG_ERROR))


def _make_png(run: data.PlayerRun, lang: str) -> None:
    from blockviz.export import ExportError, board_png
    ss = st.session_state
    _board_pos()                  # the step the board shows now (see _fork_here)
    cursor = ss[session.CURSOR]
    try:
        ss[session.PNG] = ((run.key, cursor, lang), board_png(export_doc(run, cursor, lang), cursor))
    except ExportError as e:
        ss[session.PNG_ERROR] = t("export_png_failed", lang, msg=str(e))


def _learn_panels(run: data.PlayerRun, cursor: int, frame: int | None, lang: str) -> None:
    """Self-check (predict the next step) and the fork's event form, beside the blocks and the
    free queue they are about."""
    if st.session_state.get(session.SELFCHECK):
        if frame is None:
            tryit.selfcheck_panel(run, cursor, lang)
        else:                     # stepping into an event: a prediction is of a whole step
            with st.container(border=True, key="selfcheck"):
                st.caption(t("sc_into", lang))
        st.button(t("sc_close", lang), key="b_sc_close", icon=":material/close:",
                  on_click=_close_selfcheck)
    if session.fork_shown(st.session_state):      # (then ``run`` is the fork's)
        tryit.fork_panel(run, st.session_state[session.FORK], lang)


def _lazy_expander(label: str, key: str):
    """An expander whose content runs only while it is open; it stays open across a language
    switch (its label, and so its identity, changes with the language)."""
    return st.expander(label, expanded=st.session_state.get(session.opened(key), False), key=key,
                       on_change=follow, args=(session.opened(key), key))


def _sidebar(run: data.PlayerRun, index: data.BuiltinIndex, lang: str, presenter: bool) -> None:
    ss = st.session_state
    with st.sidebar:
        language_toggle(lang)
        user = ss.get(session.USER_RUN)
        options = ([session.USER_OPTION] if user is not None else []) + index.ids
        ss["w_scenario"] = session.USER_OPTION if session.showing_user(ss) else ss[session.SCENARIO]

        def title(sid: str) -> str:
            if sid == session.USER_OPTION:
                return t("user_option", lang, title=user.scenario.title.get(lang))
            return index.titles[sid].get(lang)
        st.selectbox(t("scenario", lang), options, key="w_scenario", on_change=_set_scenario,
                     format_func=title)
        if session.showing_user(ss):
            # whether a link reopens the session's own scenario
            st.caption(t("link_opened_note" if session.shared_code(ss) else "user_not_linked", lang))
        cfg = run.scenario.config
        info = [t("config_line", lang, blocks=cfg.num_blocks, size=cfg.block_size, hash=cfg.hash_algo),
                t("free_order_" + cfg.free_order, lang)]
        if cfg.model is None:
            info.append(t("no_payload_config", lang))
        elif not run.has_payload:             # a preview whose payloads did not fit the app
            info.append(t("no_payload_preview", lang))
        summary = run.scenario.summary.get(lang) if run.scenario.summary else ""
        about = f'<div class="bv-small" style="margin-top:.4em">{theme.esc(summary)}</div>' if summary else ""
        st.html('<div class="bv"><div class="bv-small">' + "<br>".join(theme.esc(x) for x in info)
                + f"</div>{about}</div>")
        if not presenter:
            _learn_switches(lang)
        ss["w_speed"] = ss.get(session.SPEED, 1.0)
        st.segmented_control(t("speed", lang), session.SPEEDS, key="w_speed", required=True,
                             format_func=lambda v: f"{v:g}×", on_change=follow,
                             args=(session.SPEED, "w_speed", session.SPEEDS))
        ss["w_presenter"] = presenter
        st.toggle(t("presenter", lang), key="w_presenter", on_change=follow,
                  args=(session.PRESENTER, "w_presenter"), help=t("presenter_help", lang))
        st.caption(t("keys_hint", lang))
        st.html(markers_legend_html(lang))      # the colours of the board's timeline marks


def _payload(run: data.PlayerRun, cursor: int, lang: str) -> None:
    ss = st.session_state
    if not run.has_payload:
        notes = session.payload_notices(run)
        st.info(" ".join(t(k, lang, **md_fields(f, lang)) for k, f in notes) if notes
                else t("no_payload_model", lang))
        return
    ops = run.timeline.step_ops(cursor)
    written = written_blocks(ops)
    shape = run.scenario.config.model
    n_blocks = run.timeline.num_gpu_blocks
    if "w_pl_block" not in ss:
        ss["w_pl_block"] = written[0] if written else 1
    ss["w_pl_block"] = max(1, min(int(ss["w_pl_block"]), n_blocks - 1))
    c1, c2, c3, c4 = st.columns([1.3, 1, 1, 1.2])
    with c1:
        st.number_input(t("block", lang), min_value=1, max_value=max(1, n_blocks - 1), step=1,
                        key="w_pl_block")
    with c2:
        st.selectbox(t("layer", lang), list(range(shape.num_layers)), key="w_pl_layer")
    with c3:
        st.selectbox(t("kv_head", lang), list(range(shape.num_kv_heads)), key="w_pl_head")
    with c4:
        st.segmented_control(t("k_or_v", lang), [0, 1], format_func=lambda v: "K" if v == 0 else "V",
                             key="w_pl_kv", default=0, required=True)
    block = int(ss["w_pl_block"])
    layer, head, kv = (int(ss.get(k) or 0) for k in ("w_pl_layer", "w_pl_head", "w_pl_kv"))
    if written:
        st.caption(t("payload_written", lang, ids=", ".join(map(str, written))))

    def make():       # (figure, caption HTML) of the block's K or V at this step; None when it holds none
        summary = run.timeline.payload(block, cursor)
        if summary is None:
            return None
        fig = payload_figure(summary, layer=layer, head=head, kv=kv, vocab=run.timeline.vocab, lang=lang,
                             tokens=run.timeline.step(cursor).block_tokens[block])
        return frozen(fig), payload_caption_html(block, summary, layer=layer, head=head, kv=kv, lang=lang)
    chart = memo(run, "payload", (block, cursor, layer, head, kv, lang), make)
    if chart is None:
        st.info(t("no_payload_block", lang, b=block))
    else:
        fig, caption = chart
        st.html(caption)
        st.plotly_chart(fig, key="payload_chart", config={"displayModeBar": False})
    st.html(theme.heading_html(t("verify_title", lang)))
    st.html(verify_html(ops, lang, run.tolerance))


def _sync_url() -> None:
    """The URL names the scenario, language and mode; the board writes the step into it (one
    writer per field: a late rerun must not move the URL back a step)."""
    want = session.url_params(st.session_state)
    have = dict(st.query_params)
    moved = ("step", "op")
    if {k: v for k, v in have.items() if k not in moved} != {k: v for k, v in want.items() if k not in moved}:
        st.query_params.from_dict(want)


# -- the board as a file --------------------------------------------------------------------
def export_doc(run: data.PlayerRun, index: int, lang: str) -> str:
    """The run as one offline HTML page (the board, its data inlined), opening at ``index``."""
    from blockviz.export import export_html
    titles = {lg: run.scenario.title.get(lg) for lg in LANGS}
    return export_html(run.timeline, title=titles[lang], lang=lang, start=index, labels=run.labels,
                       titles=titles, file=f"{run.scenario.id}.yaml" if run.scenario.id else "")


# -- a shared link ---------------------------------------------------------------------------
def _refused(notices: list, default: str, said: Callable[[str], str]) -> None:
    """A notice that a link was refused, ``said(lang)`` in both languages, and ``default`` shown."""
    notices.append(("link_refused", {"msg_en": said("en"), "msg_zh": said("zh"), "d": default}))


def open_link(state, code: str, notices: list, default: str):
    """The PlayerRun of a link's scenario, or None (with a notice saying why, and that
    ``default`` is shown instead)."""
    try:
        if not isinstance(code, str) or len(code) > MAX_CODE_CHARS + 64:   # its size: all the server reads
            raise LinkTooLong(len(code) if isinstance(code, str) else 0)
        with st.spinner("…"):
            outcome = worker.user_outcome(state, "link", worker.Source("link", LINK_FILE, code))
        if outcome.error is not None:
            raise outcome.error
    except ScenarioError as e:          # too long, busy, stopped (where it was), or not a scenario
        # one about the link itself has no file position to give: its message alone
        said = e.localized if e.line is not None or e.path else functools.partial(localize_error, e.message)
        _refused(notices, default, said)
        return None
    if outcome.refusal is not None:
        key, fields = outcome.refusal
        fields = {**fields, "file": download_name(outcome.summary.id)}
        _refused(notices, default, lambda lang: t(key, lang, **fields))
        return None
    return outcome.run
