"""The Streamlit app: the pages and the navigation between them. Streamlit runs a script file on
every rerun, which calls :func:`main`: this file is that script for ``blockviz app`` (an installed
copy has no app.py), and the repository's ``app.py`` is one line of it. (Streamlit runs the script
as ``__main__``; a worker process imports it as ``__mp_main__`` and must not start the app.)"""
from __future__ import annotations

import logging

import streamlit as st

from blockviz.i18n import LANGS, t
from blockviz.ui import author, capacity, live, player, worker
from blockviz.ui import state as session
from blockviz.ui.nav import AUTHOR_PATH, CAPACITY_PATH, LIVE_PATH, PLAYER_PATH, first_lang

# (page function, i18n key of its title, url path, default page?) — the one list of pages.
PAGES = [
    (player.page, "page_player", PLAYER_PATH, True),
    (author.page, "page_author", AUTHOR_PATH, False),
    (capacity.page, "page_capacity", CAPACITY_PATH, False),
    (live.page, "page_live", LIVE_PATH, False),
]


def main() -> None:
    ss = st.session_state
    lang = ss.get(session.LANG)
    if lang not in LANGS:            # a first visit: the page titles speak the page's language
        lang = first_lang()
    pages = {path: st.Page(fn, title=t(key, lang), url_path=path, default=default)
             for fn, key, path, default in PAGES}
    ss[session.PAGES] = pages        # for nav.go_to
    page = st.navigation(list(pages.values()))
    # Presenter mode (a link's, or turned on in the sidebar) folds the sidebar away: the board
    # gets the whole width, the teacher drives with the keyboard. So does the player while a
    # learning panel is open beside the board (it takes the sidebar's width, and the board keeps
    # its own). (A sidebar the user folded or opened by hand keeps the user's choice: Streamlit
    # remembers it.)
    presenter = (bool(ss.get(session.PRESENTER)) if ss.get(session.INITIALIZED)
                 else session.presenter_flag(st.query_params.get("presenter")))
    fold = presenter or (page is pages[PLAYER_PATH] and session.side_open(ss))
    st.set_page_config(layout="wide", page_title="blockviz", page_icon="🧱",
                       initial_sidebar_state="collapsed" if fold else "auto")
    worker.warm()
    try:
        page.run()
    except Exception as e:  # the page boundary: never an exception box (Streamlit's own
        # rerun/stop signals are BaseExceptions and pass); the log keeps the traceback
        logging.getLogger(__name__).exception("page failed")
        st.error(t("page_error", st.session_state.get(session.LANG, lang), kind=type(e).__name__))


if __name__ == "__main__":
    main()
