"""The Author page's editor: line numbers, the error's line marked with its message beside it as
you type, completion of event and field names from the JSON Schema. A Streamlit components-v2
component with inline HTML/CSS/JS (``blockviz.ui.editor_assets``): no iframe, no build step, no
network, no dependency beyond Streamlit (see the README for why not a PyPI editor component).

The text's owner: Python keeps the text (``state.AUTHOR_TEXT``) and sends it with a ``seq`` that changes
only when Python itself replaces the text (a snippet, an upload, a built-in, undo, a refused
paste); the browser owns it while the author types and sends each edit, after a pause, as the
state value ``edit`` = ``{text, n}``. :func:`take_edit` applies an edit once (a new ``n`` or text).
"""
from __future__ import annotations

from collections.abc import Callable, MutableMapping

import streamlit as st

from blockviz.i18n import t
from blockviz.i18n.errors import localize_error
from blockviz.teach import authoring
from blockviz.ui.board import reported
from blockviz.ui.editor_assets import CSS, HTML, JS

_EDITOR = st.components.v2.component("blockviz_editor", html=HTML, css=CSS, js=JS, isolate_styles=True)

_LABELS = {"checking": "ed_checking", "ok": "ed_ok", "line": "ed_line", "hint": "ed_complete_hint",
           "browser": "ed_browser_note", "aria": "editor", "q_tab": "ed_q_tab", "q_field": "ed_q_field",
           "q_event": "ed_q_event", "q_close": "ed_q_close", "q_open": "ed_q_open",
           "q_quote": "ed_q_quote"}


@st.cache_resource(show_spinner=False)
def _words() -> dict:
    return authoring.completions()            # from the schema: the same for every user


@st.cache_resource(show_spinner=False)
def _labels(lang: str) -> dict:
    return {k: t(key, lang) for k, key in _LABELS.items()}


def editor(key: str, *, text: str, seq: int, err, lang: str, on_edit: Callable[[], None]) -> None:
    """Mount the editor (``err``: the loader's verdict on ``text``, a ScenarioError or None)."""
    # what the editor marks for a located error: its line, column and message in ``lang``
    mark = ({"line": int(err.line), "col": int(err.col or 0), "msg": localize_error(err.message, lang)}
            if err is not None and err.line else None)
    data = {"text": text, "seq": seq, "mark": mark, "lang": lang, "words": _words(),
            "labels": _labels(lang), "height": 470}     # (px)
    _EDITOR(key=key, data=data, default={"edit": None}, on_edit_change=on_edit)


def take_edit(state: MutableMapping, key: str, seen_key: str) -> str | None:
    """The text of the editor's newest edit, once (None when there is none not yet taken)."""
    edit = reported(state, key, "edit")
    if not isinstance(edit, dict) or not isinstance(edit.get("text"), str):
        return None
    marker = (edit.get("n"), edit["text"])
    if state.get(seen_key) == marker:
        return None
    state[seen_key] = marker
    return edit["text"]
