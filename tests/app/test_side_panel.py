"""Learning beside the board (issue 28): self-check and try it yourself open in a panel to the right
of the board, in the same row as the board (which stays where it is in the page, so the browser
keeps it: a moved component is mounted afresh); their switches live in the sidebar; presenter mode
shows the board alone; "try it yourself" forks at the step the board reports."""
from __future__ import annotations


def board_row(p):
    """(index in the page's main area, the row's columns) of the row that holds the board."""
    for i, node in enumerate(p.at.main.children.values()):
        cols = [c for c in getattr(node, "children", {}).values() if c.type == "column"]
        if cols and any(getattr(e, "key", None) == "board" for e in cols[0].children.values()):
            return i, cols
    raise AssertionError("no row holds the board")


def keys_in(node) -> set[str]:
    out = {getattr(node, "key", None)}
    for c in getattr(node, "children", {}).values():
        out |= keys_in(c)
    return out - {None}


def test_self_check_and_try_it_open_beside_the_board_which_stays_put(page):
    p = page({"scenario": "six-blocks", "step": "3"})
    where, cols = board_row(p)
    assert len(cols) == 1                                     # the board alone in its row
    assert p.at.sidebar.toggle(key="w_selfcheck") and p.at.sidebar.button(key="b_fork")
    p.at.toggle(key="w_selfcheck").set_value(True)
    p.run()
    at, cols = board_row(p)
    assert at == where and len(cols) == 2                     # the same row, a panel beside it
    assert cols[0].proto.weight > 2 * cols[1].proto.weight
    side = keys_in(cols[1])
    assert {"side_panel", "selfcheck", "w_sc_kind", "b_sc_check", "b_sc_close"} <= side
    assert "Predict step 4" in " ".join(h.proto.body for h in p.at.html)
    assert p.board()["report"] is True                        # the panel follows the board's step
    p.click("b_fork")                                         # both panels, one above the other
    at, cols = board_row(p)
    assert at == where and {"selfcheck", "fork_panel"} <= keys_in(cols[1])
    p.click("b_sc_close")
    at, cols = board_row(p)
    assert at == where and "fork_panel" in keys_in(cols[1]) and "selfcheck" not in keys_in(cols[1])
    assert not p.state["bv_selfcheck"]
    p.click("b_fk_back")                                      # the fork's own way out
    at, cols = board_row(p)
    assert at == where and len(cols) == 1


def test_presenter_mode_shows_the_board_alone(page):
    p = page({"scenario": "six-blocks", "step": "3"})
    p.at.toggle(key="w_selfcheck").set_value(True)
    p.run()
    p.at.toggle(key="w_presenter").set_value(True)
    p.run()
    _, cols = board_row(p)
    assert len(cols) == 1 and "w_selfcheck" not in keys_in(p.at.sidebar)


def test_try_it_forks_at_the_step_the_board_shows(page):
    """The board steps in the browser without telling Python (no panel follows it); a click on
    "try it yourself" makes it say where it is first (board.js), and the fork starts there."""
    p = page({"scenario": "six-blocks", "step": "1"})
    assert p.board()["report"] is False and p.state["bv_cursor"] == 1
    p.state["board"] = {"pos": {"step": 5, "frame": None, "lang": "en"}, "want": None}
    p.click("b_fork")
    assert p.state["bv_fork"].upto == 5 and p.header() == "step 5 of 5"


def test_the_switches_and_the_panel_speak_both_languages(page):
    p = page({"scenario": "six-blocks", "step": "3", "lang": "zh"})
    assert any("动手学" in c.value for c in p.at.sidebar.caption)
    p.at.toggle(key="w_selfcheck").set_value(True)
    p.run()
    assert p.at.button(key="b_sc_close").label == "关闭自测"
    p.step_into()
    assert any("单步进入" in c.value for c in p.at.caption)   # self-check waits, and says why
    assert "w_sc_kind" not in keys_in(board_row(p)[1][1])
