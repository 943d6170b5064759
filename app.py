"""blockviz — the Streamlit app: ``streamlit run app.py``. The pages live in blockviz/ui/; this file
only lists them (add a page to PAGES) and hands over to st.navigation."""
from __future__ import annotations

import streamlit as st

from blockviz.i18n import t
from blockviz.ui import author, capacity, player
from blockviz.ui import state as S
from blockviz.ui.nav import AUTHOR_PATH, CAPACITY_PATH, PLAYER_PATH

# A presenter link opens with the sidebar folded away (the teacher drives with the keyboard).
_presenter_link = S.presenter_flag(st.query_params.get("presenter"))
st.set_page_config(layout="wide", page_title="blockviz", page_icon="🧱",
                   initial_sidebar_state="collapsed" if _presenter_link else "auto")

# (page function, i18n key of its title, url path, default page?) — the one list of pages.
PAGES = [
    (player.page, "page_player", PLAYER_PATH, True),
    (author.page, "page_author", AUTHOR_PATH, False),
    (capacity.page, "page_capacity", CAPACITY_PATH, False),
]

lang = st.session_state.get(S.LANG, "en")
nav = st.navigation([st.Page(fn, title=t(key, lang), url_path=path, default=default)
                     for fn, key, path, default in PAGES])
nav.run()
