"""What every page shares: the pages' URL paths, switching between pages, and the language
toggle in the sidebar (one widget key, so the choice follows the user from page to page)."""
from __future__ import annotations

import re

import streamlit as st

from ..i18n import LANG_NAMES, t
from ..i18n_errors import error_text
from . import state as S

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


def go_to_player() -> None:
    from .player import page
    st.switch_page(st.Page(page, url_path=PLAYER_PATH, default=True))


def go_to_author() -> None:
    from .author import page
    st.switch_page(st.Page(page, url_path=AUTHOR_PATH))


def _set_lang() -> None:
    v = st.session_state.get("w_lang")
    if v in S.LANGS:
        st.session_state[S.LANG] = v


def language_toggle(lang: str) -> None:
    """The 中文 / English switch (call inside ``with st.sidebar``)."""
    st.session_state["w_lang"] = lang
    st.segmented_control(t("language", lang), list(S.LANGS), key="w_lang", required=True,
                         format_func=lambda v: LANG_NAMES[v], on_change=_set_lang)


def session_lang(default: str = "en") -> str:
    lang = st.session_state.get(S.LANG)
    if lang not in S.LANGS:
        lang = st.session_state[S.LANG] = default
    return lang
