"""The Live page: a running vLLM's prefix cache, drawn from its KV events as they arrive.

Endpoints are the operator's: the page offers only those ``blockviz app --live ENDPOINT ...``
allowed (blockviz.live.endpoints; loopback by default), by their index, so nothing a browser
sends can make the server connect anywhere else. The subscriber is the server's: one background
thread per endpoint (blockviz.live.feed), shared by every session looking at it, stopped when
nobody has looked for a while. A session only reads it: once a second (a fragment), under the
feed's lock, the view is drawn (blockviz.render.live) and sent to a components-v2 element that
swaps it in, keeping open what the user opened.
"""
from __future__ import annotations

import functools
import time

import streamlit as st

from blockviz.i18n import t
from blockviz.live import endpoints
from blockviz.live.feed import LiveFeed
from blockviz.render import live as rlive
from blockviz.render import theme
from blockviz.render.board import asset
from blockviz.scenario.lessons import lesson_files
from blockviz.ui.nav import default_lang, language_toggle, session_lang

NAME = "blockviz_live"
REFRESH_S = 1.0
W_ENDPOINT, W_WORDS, W_FOLLOW = "w_live_endpoint", "w_live_words", "w_live_follow"


@functools.cache
def _renderer():
    return st.components.v2.component(NAME, html="", css=rlive.live_css(), js=asset("live.js"),
                                      isolate_styles=True)


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
    _renderer()(key="live_view", data=html)


def page() -> None:
    lang = session_lang(default_lang())
    if st.query_params:                 # the player's link does not describe this page
        st.query_params.clear()
    st.html(theme.css(False))
    with st.sidebar:
        language_toggle(lang)
    st.html(f'<div class="bv"><div class="bv-title">{theme.esc(t("lv_title", lang))}</div>'
            f'<div class="bv-small">{theme.esc(t("lv_intro", lang))}</div></div>')
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
