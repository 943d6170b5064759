"""A link's language holds on every page it opens, not only on the player: the page's words and the
page titles in the sidebar agree."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from blockviz.i18n import t
from blockviz.ui import state as session

from .conftest import APP


@pytest.mark.parametrize("path", ["author", "capacity", "live"])
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_a_link_straight_to_a_page_opens_it_in_the_links_language(path, lang):
    at = AppTest.from_file(APP, default_timeout=90)
    at.query_params["lang"] = lang
    at._page_hash = calc_hash(path)          # the first run opens that page, as its link would
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[session.LANG] == lang
    switch = next(w for w in at.get("button_group") if w.key == "w_lang")   # 中文 / English
    assert switch.value == lang and switch.label == t("language", lang)
