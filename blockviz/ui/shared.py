"""Opening a shared link (``?s=CODE``, ``blockviz.scenario.share``) in the player: the server
checks the code's length and nothing more; a preview worker (``ui.worker``) decodes it, loads it
like a file and runs it within the preview budget, and the run becomes the session's own. Every
refusal is a notice for the page (in both languages), never a traceback; nothing is stored on the
server."""
from __future__ import annotations

import streamlit as st

from blockviz.i18n import t
from blockviz.i18n.errors import localize_error
from blockviz.scenario import ScenarioError
from blockviz.scenario.share import LINK_FILE, MAX_CODE_CHARS, LinkTooLong
from blockviz.teach.authoring import download_name
from blockviz.ui import worker


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
    if not isinstance(code, str) or len(code) > MAX_CODE_CHARS + 64:   # its size: all the server reads
        _error(notices, LinkTooLong(len(code) if isinstance(code, str) else 0), default)
        return None
    try:
        with st.spinner("…"):
            outcome = worker.user_outcome(state, "link", worker.Source("link", LINK_FILE, code))
    except ScenarioError as e:          # busy, or stopped (where it was)
        _error(notices, e, default)
        return None
    if outcome.error is not None:
        _error(notices, outcome.error, default)
        return None
    if outcome.refusal is not None:
        key, fields = outcome.refusal
        fields = {**fields, "file": download_name(outcome.summary.id)}
        _refused(notices, t(key, "en", **fields), t(key, "zh", **fields), default)
        return None
    return outcome.run
