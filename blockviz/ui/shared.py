"""Opening a shared link (``?s=CODE``, ``blockviz.scenario.share``) in the player: the code is
decoded and loaded like a file, the scenario runs in a preview worker within the preview budget
(``ui.worker``), and the run becomes the session's own. Every refusal is a notice for the page
(in both languages), never a traceback; nothing is stored on the server."""
from __future__ import annotations

import streamlit as st

from blockviz.i18n import t
from blockviz.i18n.errors import localize_error
from blockviz.scenario import ScenarioError
from blockviz.scenario.share import load_link
from blockviz.teach.authoring import download_name
from blockviz.ui import data, worker


def _refused(notices: list, en: str, zh: str, default: str) -> None:
    notices.append(("link_refused", {"msg_en": en, "msg_zh": zh, "d": default}))


def _error(notices: list, e: ScenarioError, default: str) -> None:
    if e.line is None and not e.path:      # about the link itself: no file position to give
        _refused(notices, localize_error(e.message, "en"), localize_error(e.message, "zh"), default)
    else:
        _refused(notices, e.localized("en"), e.localized("zh"), default)


def open_link(state, code: str, notices: list, default: str):
    """The PlayerRun of a link's scenario, or None (with a notice saying why, and that
    ``default`` is shown instead)."""
    try:
        text, loaded = load_link(code)
    except ScenarioError as e:
        _error(notices, e, default)
        return None
    refusal = data.preview_refusal(loaded)
    if refusal is not None:
        key, fields = refusal
        fields = {**fields, "file": download_name(loaded.scenario.id)}
        _refused(notices, t(key, "en", **fields), t(key, "zh", **fields), default)
        return None
    try:
        with st.spinner("…"):
            return worker.make_user_run(state, "link", loaded, text)
    except ScenarioError as e:
        _error(notices, e, default)
        return None
