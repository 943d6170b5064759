"""The Live page: a running vLLM's prefix cache, drawn from its KV events as they arrive.

Endpoints are the operator's: the page offers only those ``blockviz app --live ENDPOINT ...``
allowed (blockviz.live.endpoints; loopback by default), by their index, so nothing a browser
sends can make the server connect anywhere else. The subscriber is the server's: one background
thread per endpoint (blockviz.live.feed), shared by every session looking at it, stopped when
nobody has looked for a while. A session only reads it: once a second (a fragment), under the
feed's lock, the view is drawn (blockviz.render.live) and sent to a components-v2 element that
swaps it in, keeping open what the user opened.

A recording (``vllm-kv-events-capture/1``, what ``blockviz live --record`` writes) is opened by
upload and plays on the board (board.js, with the forest as its main panel: blockviz.render.replay)
— each batch a step. The upload is bounded (``MAX_UPLOAD_MB``; the reader reads no more, keeps at
most ``replay.MAX_STEPS`` steps and a bounded forest each), and a file that is not a recording is
refused with a located message; nothing is written to the server's disk.
"""
from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from blockviz.i18n import other_lang, t
from blockviz.live import endpoints
from blockviz.live import replay as lreplay
from blockviz.live.feed import LiveFeed
from blockviz.render import live as rlive
from blockviz.render import replay as rreplay
from blockviz.render import theme
from blockviz.render.board import BoardControl
from blockviz.scenario.lessons import lesson_files
from blockviz.ui import board
from blockviz.ui.board import component
from blockviz.ui.nav import page_top

NAME = "blockviz_live"
REPLAY_NAME = "blockviz_replay"
REFRESH_S = 1.0
W_ENDPOINT, W_WORDS, W_FOLLOW = "w_live_endpoint", "w_live_words", "w_live_follow"
W_SOURCE, W_UPLOAD, W_RP_WORDS = "w_live_source", "w_live_upload", "w_live_rp_words"
W_RP_SERVER = "w_live_rp_server"           # a recording the server was started with (its index)
REPLAY_KEY = "live_replay"                 # the board's widget key
# session state: the recording opened (its upload's id, the Recording or the error), the board's
# data and the export, made once per language and words
RP_FILE, RP_REC, RP_ERR, RP_MADE = "lv_rp_file", "lv_rp_rec", "lv_rp_err", "lv_rp_made"
RP_LO, RP_WANT = "lv_rp_lo", "lv_rp_want"     # the board's window: its first step; the last ask
BACK = 20                                  # a window starts this many steps before the one asked
MAX_UPLOAD_MB = lreplay.MAX_BYTES >> 20


@st.cache_resource(show_spinner=False, max_entries=lreplay.MAX_SERVER_FILES)
def _server_recording(path: str, mtime: float, size: int):
    """A recording the operator named (read once per version of the file, shared: read only)."""
    try:
        return lreplay.read_recording(path), None
    except lreplay.RecordingError as e:
        return None, e
    except OSError as e:
        return None, lreplay.RecordingError("unreadable", Path(path).name, e=e.strerror or str(e))


@st.cache_resource(show_spinner=False, max_entries=endpoints.MAX_SPECS)
def _feed(spec_text: str) -> LiveFeed:
    """The server's feed for an allowed endpoint (``spec_text`` comes from the allowed list)."""
    return LiveFeed(endpoints.parse_spec(spec_text))


@st.cache_resource(show_spinner=False, max_entries=32)
def _words(lesson: str) -> dict[int, str]:
    from blockviz.scenario import load
    from blockviz.scenario.tokens import Vocabulary
    path = lesson_files().get(lesson)
    if path is None:
        return {}
    return dict(Vocabulary.for_scenario(load(path).scenario).id_to_word)


def _status(feed: LiveFeed, lang: str) -> str:
    s = feed.spec
    if feed.error is not None:
        return t("lv_status_error", lang, endpoint=s.endpoint, e=feed.error)
    sess = feed.session
    age = None if sess is None or sess.index == 0 else sess.idle_for()
    since = time.strftime("%H:%M:%S", time.localtime(feed.started)) if feed.started else "-"
    return t("lv_status_listen", lang, mode=t("lv_mode_bind" if s.bind else "lv_mode_connect", lang),
             endpoint=s.text, since=since, age=rlive.age_text(age, lang))


def _view(spec_text: str, lang: str, lesson: str | None) -> None:
    feed = _feed(spec_text)
    feed.view()
    words = _words(lesson) if lesson else None
    with feed.lock:
        red = feed.reduction
        status = _status(feed, lang)
        if red is None:
            html = f'<div class="bvl"><div class="bvl-warn">{theme.esc(status)}</div></div>'
        else:
            html = rlive.live_html(red, lang=lang, status=status, words=words)
    component(NAME, rlive.live_css, "live.js")(key="live_view", data=html)


def page() -> None:
    server = lreplay.server_recordings()
    ss = st.session_state
    asked = st.query_params.get("recording")  # /live?recording=NAME: one the server was started with
    names = [p.name for p in server]
    # The source switch and the server's recordings box are created with the value they show as
    # their default, on every run (the URL's ask, else the session's value, else the start value),
    # not written into session state first: Streamlit sends a written value to the browser on that
    # run only, and a browser that drew the next run without having kept it (a language switch
    # within half a second of opening the page) showed the widget's own default instead.
    default = {W_SOURCE: ss.get(W_SOURCE, "recording" if server else "live"),
               W_RP_SERVER: ss.get(W_RP_SERVER, 0)}
    if asked in names:                                # the URL's ask wins over the session's
        for key, value in ((W_SOURCE, "recording"), (W_RP_SERVER, names.index(asked))):
            if ss.get(key, value) != value:
                # The widget is on the page with another value, and the browser holds it too: a
                # default would not move it, only a value written into session state is sent for
                # the browser to take (this run; the next ones carry it as the default). Streamlit
                # warns of a widget with a default and a written value: none on this run.
                ss[key], value = value, None
            default[key] = value
    lang = page_top()
    intro = t("lv_intro" if default[W_SOURCE] == "live" else "rp_intro", lang)   # (written: a recording)
    st.html(f'<div class="bv"><div class="bv-title">{theme.esc(t("lv_title", lang))}</div>'
            f'<div class="bv-small">{theme.esc(intro)}</div></div>')
    source = st.segmented_control(t("lv_source", lang), ("live", "recording"), key=W_SOURCE,
                                  default=default[W_SOURCE], required=True,
                                  format_func=lambda s: t(f"lv_source_{s}", lang),
                                  label_visibility="collapsed")
    if source == "recording":
        recording(lang, default[W_RP_SERVER])
        return
    specs = endpoints.allowed()
    cols = st.columns([3, 2, 1])
    with cols[0]:
        i = st.selectbox(t("lv_endpoint", lang), range(len(specs)), key=W_ENDPOINT,
                         format_func=lambda k: specs[k].text, help=t("lv_endpoint_help", lang))
    names = list(lesson_files())
    with cols[1]:
        lesson = st.selectbox(t("lv_words", lang), [None, *names], key=W_WORDS,
                              format_func=lambda v: t("lv_words_none", lang) if v is None else v,
                              help=t("lv_words_help", lang))
    with cols[2]:
        follow = st.toggle(t("lv_follow", lang), value=True, key=W_FOLLOW)
    spec = specs[i if isinstance(i, int) and 0 <= i < len(specs) else 0]
    if not follow:
        st.caption(t("lv_status_paused", lang))
    st.fragment(_view, run_every=REFRESH_S if follow else None)(spec.text, lang, lesson)


# -- a recording on the board ------------------------------------------------------------------------
def _opened(ident, rec=None, err: lreplay.RecordingError | None = None) -> None:
    """A recording opened (or none: ``ident`` None): the board starts again at step 0."""
    ss = st.session_state
    ss[RP_FILE], ss[RP_REC], ss[RP_ERR], ss[RP_MADE] = ident, rec, err, None
    ss[RP_LO], ss[RP_WANT] = 0, _asked()    # (an ask about the last file is not one)


def _asked():
    """The step the board last asked for (its ``want`` state), or None."""
    want = board.reported(st.session_state, REPLAY_KEY, "want")
    return want if isinstance(want, int) else None


def _window() -> tuple[int, int]:
    """The board's window: its first step and one it must reach — where it was, unless the board
    has asked for a step outside it (at its edge, or a click on the timeline): then from a little
    before that step, through it."""
    ss = st.session_state
    want = _asked()
    made = ss.get(RP_MADE)
    if (want is not None and want != ss.get(RP_WANT) and made is not None
            and not made[1].lo <= want <= made[1].hi):
        ss[RP_WANT], ss[RP_LO] = want, max(0, want - BACK)
    lo = ss.get(RP_LO, 0)
    asked = ss.get(RP_WANT)
    return lo, asked if isinstance(asked, int) and asked >= lo else lo


def _made(rec, lang: str, lesson: str | None):
    """The board's data (a BoardData: a window of the recording's steps) as JSON, made once per
    window, language and words (the BoardData is kept: its window is where the board is)."""
    ss = st.session_state
    lo, through = _window()
    key = (ss.get(RP_FILE), lang, lesson, lo, through)
    made = ss.get(RP_MADE)
    if made is None or made[0] != key:
        words = _words(lesson) if lesson else None
        data = rreplay.recording_board(rec, langs=[lang, other_lang(lang)], lang=lang, words=words,
                                       start=lo, through=through)
        made = ss[RP_MADE] = (key, data, data.to_json())
    return made[2]


def recording(lang: str, server_default: int | None) -> None:
    """The recording's controls in the sidebar (the file, the words, the export), the board under
    the page's title: it gets the screen's height. ``server_default``: the server's recording the
    box is created with as its default (see page(); None: the box's first option, none)."""
    ss = st.session_state
    server = lreplay.server_recordings()
    with st.sidebar:
        chosen = None
        if server:
            options = [None, *range(len(server))]
            chosen = st.selectbox(t("rp_server", lang), options, key=W_RP_SERVER,
                                  index=options.index(server_default),
                                  format_func=lambda i: t("rp_server_none", lang) if i is None
                                  else server[i].name, help=t("rp_server_help", lang))
        f = st.file_uploader(t("rp_upload", lang), type=["jsonl", "json", "txt"], key=W_UPLOAD,
                             max_upload_size=MAX_UPLOAD_MB, help=t("rp_upload_help", lang))
        st.caption(t("rp_upload_limit", lang, mb=MAX_UPLOAD_MB, steps=f"{lreplay.MAX_STEPS:,}"))
        names = list(lesson_files())
        lesson = st.selectbox(t("lv_words", lang), ["", *names], key=W_RP_WORDS,
                              format_func=lambda v: v or t("lv_words_none", lang),
                              help=t("lv_words_help", lang)) or None
    if f is None and isinstance(chosen, int) and 0 <= chosen < len(server):
        path = server[chosen]            # (an upload, when there is one, is what the user wants)
        try:
            st_ = path.stat()
            ss[RP_REC], ss[RP_ERR] = _server_recording(str(path), st_.st_mtime, st_.st_size)
            ident = f"server:{path}:{st_.st_mtime}:{st_.st_size}"
        except OSError as e:
            ss[RP_REC], ident = None, f"server:{path}"
            ss[RP_ERR] = lreplay.RecordingError("unreadable", path.name, e=e.strerror or str(e))
        if ss.get(RP_FILE) != ident:
            _opened(ident, ss[RP_REC], ss[RP_ERR])
    elif f is None:
        _opened(None)
        st.info(t("rp_none_yet", lang))
        return
    elif ss.get(RP_FILE) != f.file_id:     # an upload, read once: the Recording, or why it cannot be played
        _opened(f.file_id)
        try:
            with st.spinner(t("rp_reading", lang, name=f.name)):
                ss[RP_REC] = lreplay.read_recording(f.getvalue(), name=f.name)
        except lreplay.RecordingError as e:
            ss[RP_ERR] = e
    err = ss.get(RP_ERR)
    if err is not None:
        st.error(err.localized(lang))
        return
    rec = ss.get(RP_REC)
    if rec is None:
        return
    board = _made(rec, lang, lesson)
    said = t("rp_opened", lang, name=rec.name, n=f"{rec.batches:,}", messages=f"{rec.messages:,}")
    if rec.unread:
        said += " " + t("rp_unread", lang, n=f"{len(rec.steps):,}", unread=f"{rec.unread:,}")
    if rec.notes.total:
        said += " " + t("rp_noted", lang, n=f"{rec.notes.total:,}")
    with st.sidebar:
        st.caption(said)
        from blockviz.export import export_recording_html
        words = _words(lesson) if lesson else None
        st.download_button(t("rp_export", lang),  # (made when clicked: every step from 0 that fits)
                           lambda: export_recording_html(rec, lang=lang, words=words).encode("utf-8"),
                           file_name=f"{rec.name.rsplit('.', 1)[0]}.html", mime="text/html",
                           key="w_live_export", help=t("rp_export_help", lang))
    control = BoardControl(goto={"step": 0, "frame": None, "seq": 1, "run": ss.get(RP_FILE)},
                           fit=True)
    component(REPLAY_NAME, rreplay.replay_css, "board.js")(
        key=REPLAY_KEY, data={"board": board, "control": control.to_dict()},
        default={"pos": None, "want": None}, on_pos_change=lambda: None, on_want_change=lambda: None)
