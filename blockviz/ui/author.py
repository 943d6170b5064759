"""The Author page: write a scenario in YAML with the format's reference at hand, see every change
checked at once (a located error beside the text, the bad line highlighted), and a valid scenario
run in a preview that opens in the player. Upload and download files; start from a built-in.

State (this session only): the editor's text, the last valid text and its run (kept while the
text is invalid), the result of checking the current text. Nothing here is shared between users.

The server process keeps the text within its size limit and nothing more: a worker process
(``ui.worker``) reads it, checks it, runs it, and finds its names and its link code, within the
preview budget — an upload's bytes too.
"""
from __future__ import annotations

import contextlib
import hashlib

import streamlit as st

from blockviz.i18n import t
from blockviz.i18n.errors import ErrorMessage
from blockviz.render import theme
from blockviz.render.authoring import AUTHOR_CSS, error_html, iframe, ok_html, reference_html, warn_html
from blockviz.scenario import ScenarioError, share
from blockviz.scenario.schema import MAX_FILE_BYTES
from blockviz.teach import authoring
from blockviz.ui import board, data, editor, worker
from blockviz.ui import state as session
from blockviz.ui.nav import (
    PLAYER_PATH,
    base_url,
    go_to,
    md_fields,
    page_top,
    session_lang,
)

FILE = "scenario.yaml"       # the name errors carry for the editor's text

ED = "w_author_text"         # the editor component's key
PREVIEW_BOARD = "author_board"   # the preview board's widget key


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _set_text(text: str, msg: tuple | None = None, undo: bool = True) -> None:
    ss = st.session_state
    if undo and ss.get(session.AUTHOR_TEXT) is not None and ss[session.AUTHOR_TEXT] != text:
        ss[session.AUTHOR_UNDO] = ss[session.AUTHOR_TEXT]
    ss[session.AUTHOR_TEXT] = text
    ss[session.AUTHOR_SEQ] = int(ss.get(session.AUTHOR_SEQ) or 0) + 1
    ss[session.AUTHOR_MSG] = msg


# -- callbacks -------------------------------------------------------------------------------
def _on_edit() -> None:
    """The author's edit in the editor (also run at the top of the page: AppTest sets the
    editor's state without its callback)."""
    ss = st.session_state
    text = editor.take_edit(ss, ED, session.AUTHOR_SEEN)
    if text is None:
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:    # a paste over the limit: said so, and the editor takes the text back
        msg = ("paste_too_big", {"size": f"{size:,}", "limit": f"{MAX_FILE_BYTES:,}"}, "error")
        _set_text(ss.get(session.AUTHOR_TEXT), msg, undo=False)
        return
    ss[session.AUTHOR_TEXT] = text


def _on_upload() -> None:
    ss = st.session_state
    f = ss.get("w_upload")
    if f is None:
        return
    worker.watch(ss)                     # its bytes (in Streamlit's memory) go with the session
    if f.size > MAX_FILE_BYTES:          # refused before a byte of it is read
        text, error = None, ErrorMessage(f"the file is {f.size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
    else:
        try:                             # read (decoded, checked) in a worker
            outcome = worker.user_outcome(ss, "upload", worker.Source("upload", f.name, f.getvalue()))
            text, error = outcome.text, outcome.error
        except ScenarioError as e:       # busy, or stopped
            text, error = None, e
    if text is None:
        ss[session.AUTHOR_MSG] = ("upload_refused", {"name": f.name, "msg": error}, "error")
    else:
        _set_text(text, ("upload_ok", {"name": f.name}, "success"))


def _snippet(kind: str) -> None:
    ids, cps, live = _names()
    text = st.session_state.get(session.AUTHOR_TEXT) or ""
    _set_text(authoring.insert_step(text, kind, ids, cps, live), undo=False)


def _names() -> tuple[list[str], list[str], list[str]]:
    """Request ids, checkpoints and not-yet-finished requests of the text being written: from
    its run when it is the previewed one (what max_tokens finished counts too), else as far as
    the text says (it may not be valid yet: the worker read them)."""
    ss = st.session_state
    good = _previewed(ss)
    if good is None:
        checked = ss.get(session.AUTHOR_CHECKED)
        if checked and checked[0] == _digest(ss.get(session.AUTHOR_TEXT) or "") and checked[2] is not None:
            return tuple(list(x) for x in checked[2].names)
        return [], [], []
    run = good[1]
    ids, cps = authoring.scenario_names(run.scenario)
    last = run.timeline.step(run.last)
    live = [rid for rid, r in last.requests.items() if r.status != "finished"]
    return ids, cps, live


def _copy_builtin() -> None:
    sid = st.session_state.get("w_gallery")
    path = data.builtin_index().paths.get(sid)
    if path is None:
        return
    _set_text(path.read_text(encoding="utf-8"), ("replaced", {"what": sid}, "info"))


def _undo() -> None:
    prev = st.session_state.pop(session.AUTHOR_UNDO, None)
    if prev is not None:
        _set_text(prev, None, undo=False)


def _previewed(ss) -> tuple | None:
    """(text, run, outcome) of the preview when it is the editor's text, else None: the preview
    may still show the last text that ran (while the text is invalid, or did not run)."""
    good = ss.get(session.AUTHOR_GOOD)
    return good if good is not None and good[0] == ss.get(session.AUTHOR_TEXT) else None


def _open_in_player() -> None:
    ss = st.session_state
    good = _previewed(ss)         # never the last text that ran instead of the one on screen
    if good is not None:
        ss[session.FORK] = None
        session.use_user_run(ss, good[1], int(ss.get(session.AUTHOR_STEP) or 0))
        code = good[2].share
        ss[session.SHARED] = (good[1].key, code) if isinstance(code, str) else None   # the URL follows


# -- checking and running ------------------------------------------------------------------
def check_text(text: str):
    """(error or None, worker.Outcome or None) for the editor's text, remembered per text: a
    worker reads it, checks it and runs it. None for both while the server is busy or when the
    worker had to be stopped (``session.AUTHOR_STOPPED`` says which, located)."""
    ss = st.session_state
    digest = _digest(text)
    cached = ss.get(session.AUTHOR_CHECKED)
    if cached and cached[0] == digest:
        return cached[1], cached[2]
    good = ss.get(session.AUTHOR_GOOD)
    ss[session.AUTHOR_STOPPED] = None
    if good is not None and good[0] == text:      # the previewed text: known, and it ran
        ss[session.AUTHOR_CHECKED] = (digest, None, good[2])
        return None, good[2]
    try:
        with st.spinner(t("preview", session_lang()) + "…"):
            outcome = worker.user_outcome(ss, "author", worker.Source("text", FILE, text), share=True)
    except ScenarioError as e:   # busy, or the worker was stopped: the last good preview stays
        ss[session.AUTHOR_STOPPED] = e
        # busy: try again at the next rerun
        ss[session.AUTHOR_CHECKED] = None if isinstance(e, worker.Busy) else (digest, None, None)
        return None, None
    ss[session.AUTHOR_CHECKED] = (digest, outcome.error, outcome)
    if outcome.run is not None:
        run = outcome.run
        at_end = good is None or int(ss.get(session.AUTHOR_STEP) or 0) >= good[1].last
        ss[session.AUTHOR_GOOD] = (text, run, outcome)
        # at the end before: show the new end (the event just added); else stay where the author looks
        ss[session.AUTHOR_STEP] = run.last if at_end else min(int(ss.get(session.AUTHOR_STEP) or 0), run.last)
    return outcome.error, outcome


# -- the page -------------------------------------------------------------------------------
def page() -> None:
    ss = st.session_state
    lang = page_top()
    handoff = ss.pop(session.AUTHOR_HANDOFF, None)
    if handoff is not None:
        _set_text(handoff, ("replaced", {"what": t("your_scenario", lang)}, "info"))
    if ss.get(session.AUTHOR_TEXT) is None:
        ss[session.AUTHOR_TEXT] = authoring.STARTER
    _on_edit()
    st.html(AUTHOR_CSS)
    st.html(f'<div class="bv"><div class="bv-title">{theme.esc(t("author_title", lang))}</div>'
            f'<div class="bv-small">{theme.esc(t("author_intro", lang))}</div></div>')
    err, outcome = check_text(ss[session.AUTHOR_TEXT])
    left, right = st.columns([1.2, 1], gap="medium")
    with left:
        _editor(err, lang)
    with right:
        _status(err, outcome, lang)
        preview, reference = st.tabs([t("preview", lang), t("reference_tab", lang)])
        with preview:
            _preview_panel(lang)
        with reference:               # the format's help, beside the text
            st.caption(t("reference", lang))
            st.html(_reference(lang))
    with left:
        _files(outcome, lang)
        _share(outcome, lang)
        _gallery(lang)


@st.cache_resource(show_spinner=False)
def _reference(lang: str) -> str:
    return reference_html(authoring.reference(), lang)     # from the schema: the same for every user


def _editor(err, lang: str) -> None:
    # No size cap in the browser: it would cut a longer paste silently; _on_edit refuses it, saying so.
    st.caption(t("editor", lang), help=t("editor_help", lang))
    ss = st.session_state
    editor.editor(ED, text=ss[session.AUTHOR_TEXT], seq=int(ss.get(session.AUTHOR_SEQ) or 0), err=err,
                  lang=lang, on_edit=_on_edit)
    st.caption(t("insert_event", lang))
    ids, cps, live = _names()
    row = st.container(horizontal=True, gap="small", key="snippets")
    with row:
        for kind in authoring.SNIPPETS:
            disabled = (kind == "rewind" and not cps) or (kind in ("finish", "preempt") and not live)
            st.button(kind, key=f"b_snip_{kind}", on_click=_snippet, args=(kind,), disabled=disabled)


def _status(err, outcome, lang: str) -> None:
    ss = st.session_state
    msg = ss.get(session.AUTHOR_MSG)
    if msg:
        key, fields, kind = msg
        getattr(st, kind)(t(key, lang, **md_fields(fields, lang)))
        if ss.get(session.AUTHOR_UNDO) is not None and key != "upload_refused":
            st.button(t("undo_replace", lang), key="b_undo", icon=":material/undo:", on_click=_undo)
    text = ss[session.AUTHOR_TEXT]
    if err is not None:
        st.html(error_html(err, text, lang, kept=ss.get(session.AUTHOR_GOOD) is not None,
                           hint=authoring.error_hint(err, lang)))
        return
    stopped = ss.get(session.AUTHOR_STOPPED)
    s = outcome.summary if outcome is not None else None
    if s is not None:
        st.html(ok_html(t("valid", lang, title=s.title.get(lang), n=s.steps, blocks=s.num_blocks,
                          size=s.block_size)))
    file = authoring.download_name(s.id if s is not None else None)
    if s is not None and outcome.refusal:          # too big for the app to run
        st.html(warn_html(t(outcome.refusal[0], lang, file=file, **outcome.refusal[1])))
        return
    if stopped is not None:            # it ran until its memory cap stopped it, or did not run
        capped = worker.memory_message(data.PREVIEW_BUDGET) in stopped.message
        title = t("preview_memory_cap" if capped else "preview_not_run", lang)
        st.html(error_html(stopped, text, lang, title=title,
                           kept=ss.get(session.AUTHOR_GOOD) is not None))
        if isinstance(stopped, worker.Busy):
            st.button(t("preview_retry", lang), key="b_preview_retry", icon=":material/refresh:")
        return
    good = ss.get(session.AUTHOR_GOOD)
    if good is None:
        return
    run = good[1]
    if run.timeline.error is not None:
        e = run.timeline.error
        st.html(error_html(e, text, lang, title=t("run_stops_at", lang, k=run.timeline.error_step)))
    if run.stopped is not None:
        k, n = run.stopped
        st.html(warn_html(t("preview_capped", lang, k=k, n=n, file=file)))
    notes = session.payload_notices(run) + session.lighter_notice(run)
    if notes:                 # without payloads, and why; what to change when it still stopped
        st.html(warn_html(" ".join(t(k, lang, **f) for k, f in notes)))


def _preview_panel(lang: str) -> None:
    ss = st.session_state
    good = ss.get(session.AUTHOR_GOOD)
    if good is None:
        st.info(t("preview_none", lang))
        return
    run = good[1]
    current = _previewed(ss) is not None
    if st.button(t("open_in_player", lang), key="b_open_player", type="primary",
                 icon=":material/play_arrow:", on_click=_open_in_player, disabled=not current,
                 help=t("open_in_player_help" if current else "open_in_player_stale", lang)) and current:
        go_to(PLAYER_PATH)
    if not current:               # the preview is of another text than the editor's
        st.caption(t("preview_stale", lang))
    step = int(ss.get(session.AUTHOR_STEP) or 0)   # (within the run: written with AUTHOR_GOOD, or clamped)
    # the player's board: the same panels, stepped in the browser; it tells us its step
    board.show(run, ss, key=PREVIEW_BOARD, step=step, frame=None, lang=lang, url=False, report=True,
               fit=False, on_pos=_preview_pos)


def _preview_pos() -> None:
    ss = st.session_state
    pos = board.position(ss, PREVIEW_BOARD)
    good = ss.get(session.AUTHOR_GOOD)
    if pos is not None and good is not None:
        with contextlib.suppress(TypeError, ValueError):      # (the browser's, whatever it sent)
            ss[session.AUTHOR_STEP] = max(0, min(int(pos.get("step", 0)), good[1].last))


def _files(outcome, lang: str) -> None:
    c1, c2 = st.columns([1.5, 1], vertical_alignment="bottom")
    with c1:
        st.file_uploader(t("upload", lang), type=["yaml", "yml"], key="w_upload", on_change=_on_upload,
                         max_upload_size=max(1, MAX_FILE_BYTES >> 20), help=t("upload_help", lang))
    with c2:
        summary = outcome.summary if outcome is not None else None
        name = authoring.download_name(summary.id if summary is not None else None)
        st.download_button(t("download", lang), st.session_state[session.AUTHOR_TEXT], file_name=name,
                           mime="application/x-yaml", key="b_download", icon=":material/download:",
                           on_click="ignore")


def _share(outcome, lang: str) -> None:
    """The link that opens the player on this scenario, and an <iframe> for a course page (both
    open at step 0: a link names a step only when its sender adds ``&step=K``)."""
    with st.container(key="share"):
        st.html(theme.heading_html(t("share_title", lang)))
        if outcome is None or outcome.summary is None:
            st.caption(t("share_invalid", lang))
            return
        code = outcome.share
        if isinstance(code, share.LinkTooLong):
            st.html(warn_html(t("share_too_long", lang, n=code.chars, limit=share.MAX_CODE_CHARS)))
            return
        base = base_url()
        url = share.link(base, code, lang=lang)     # no step: a link opens at the start (step 0)
        st.caption(t("share_link", lang), help=t("share_help", lang))
        st.code(url, language=None, wrap_lines=True)
        st.caption(t("share_size", lang, n=len(code), limit=share.MAX_CODE_CHARS))
        st.caption(t("share_embed", lang))
        title = outcome.summary.title.get(lang)
        st.code(iframe(share.link(base, code, lang=lang, embed=True), title),
                language="html", wrap_lines=True)


def _gallery(lang: str) -> None:
    index = data.builtin_index()
    with st.expander(t("gallery", lang)):
        c1, c2 = st.columns([2, 1], vertical_alignment="bottom")
        with c1:
            st.selectbox(t("scenario", lang), index.ids, key="w_gallery",
                         format_func=lambda sid: index.titles[sid].get(lang))
        with c2:
            st.button(t("gallery_copy", lang), key="b_gallery_copy", icon=":material/content_copy:",
                      on_click=_copy_builtin, help=t("gallery_help", lang))
        st.button(t("new_starter", lang), key="b_starter", icon=":material/note_add:", on_click=_set_text,
                  args=(authoring.STARTER, ("replaced", {"what": "my-scenario"}, "info")))
