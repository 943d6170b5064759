"""What every page shares: the pages' URL paths, switching between pages, and the language
toggle in the sidebar (one widget key, so the choice follows the user from page to page)."""
from __future__ import annotations

import re
from collections.abc import Collection

import streamlit as st

from blockviz.i18n import LANG_NAMES, LANGS, t
from blockviz.i18n.errors import error_text
from blockviz.render import theme
from blockviz.ui import state as session

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>:$])")


def md_escape(text: str) -> str:
    """Text from a scenario (or a user's input), made inert inside a Streamlit markdown label."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_fields(fields: dict, lang: str = "en") -> dict:
    """Fields for a markdown message; an exception among them is shown in ``lang``."""
    return {k: md_escape(error_text(v, lang) if isinstance(v, BaseException) else str(v))
            for k, v in fields.items()}


PLAYER_PATH = "player"
AUTHOR_PATH = "author"
CAPACITY_PATH = "capacity"
LIVE_PATH = "live"


def go_to(path: str) -> None:
    """Switch to the page at ``path`` (from ``state.PAGES``: a page need not import another)."""
    st.switch_page(st.session_state[session.PAGES][path])


def base_url() -> str:
    """The app's address as the browser sees it, without a page's path or a query (the player is
    its default page, so a link to ``BASE/?s=...`` opens the player)."""
    try:
        url = st.context.url or ""
    except Exception:  # noqa: BLE001 - no browser context (tests)
        url = ""
    base = url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    for path in (PLAYER_PATH, AUTHOR_PATH, CAPACITY_PATH, LIVE_PATH):
        base = base.removesuffix("/" + path)
    return base


def default_lang() -> str:
    """The browser's language when it is Chinese, else English (before the user chooses)."""
    try:
        locale = st.context.locale or ""
    except Exception:  # noqa: BLE001 - no browser context (tests)
        locale = ""
    return "zh" if locale.lower().startswith("zh") else "en"


def first_lang() -> str:
    """A session's language before the user chooses one: its link's ``lang``, else the
    browser's. (The page titles and every page's words read the same one.)"""
    link = st.query_params.get("lang")
    return link if link in LANGS else default_lang()


def follow(key: str, widget: str, allowed: Collection | None = None) -> None:
    """A widget's callback: the session's ``key`` follows the widget ``widget`` — its value, when
    ``allowed`` holds it (else ``key`` stays); without ``allowed``, as a flag (on or off)."""
    v = st.session_state.get(widget)
    if allowed is None:
        st.session_state[key] = bool(v)
    elif v in allowed:
        st.session_state[key] = v


def language_toggle(lang: str) -> None:
    """The 中文 / English switch (call inside ``with st.sidebar``)."""
    st.session_state["w_lang"] = lang
    # 中文 first on the switch
    st.segmented_control(t("language", lang), list(reversed(LANGS)), key="w_lang", required=True,
                         format_func=lambda v: LANG_NAMES[v], on_change=follow,
                         args=(session.LANG, "w_lang", LANGS))


def page_top() -> str:
    """The top of every page but the player: its language (a link's, else the browser's, until the
    user chooses), no query string (the player's link does not describe the page), the
    stylesheet, and the language switch in the sidebar."""
    lang = session_lang(first_lang())
    if st.query_params:
        st.query_params.clear()
    st.html(theme.css(False))
    with st.sidebar:
        language_toggle(lang)
    return lang


def session_lang(default: str = "en") -> str:
    lang = st.session_state.get(session.LANG)
    if lang not in LANGS:
        lang = st.session_state[session.LANG] = default
    return lang
