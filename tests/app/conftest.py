"""AppTest helpers: open the app (optionally with a deep link), read what the page shows."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

ROOT = Path(__file__).resolve().parent.parent.parent
APP = str(ROOT / "app.py")
TEST_SCENARIOS = ROOT / "tests" / "render" / "scenarios"
BUILTIN_IDS = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
BOARD_KEYS = {"b_next": "next", "b_prev": "prev", "b_first": "first", "b_last": "last"}


def _once(pairs: list) -> dict:
    """A JSON object whose keys are each named once."""
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"keys named twice: {sorted({k for k in keys if keys.count(k) > 1})}"
    return dict(pairs)


class Page:
    """One browser session of the app, driven through AppTest."""

    def __init__(self, params: dict | None = None) -> None:
        self.at = AppTest.from_file(APP, default_timeout=90)
        for k, v in (params or {}).items():
            self.at.query_params[k] = v
        self.run()

    def run(self) -> Page:
        self.at.run()
        assert not self.at.exception, [e.value for e in self.at.exception]
        return self

    def goto(self, url_path: str) -> Page:
        """Open another page of the app, as its link in the sidebar would (pages are callables
        registered under a url path; AppTest.switch_page only knows page files)."""
        self.at._page_hash = calc_hash(url_path)
        try:
            return self.run()
        finally:
            self.at._page_hash = ""      # later runs stay where the last one finished

    def on_page(self, url_path: str) -> bool:
        return self.at._finished_page_script_hash == calc_hash(url_path)

    def offered(self, key: str) -> str:
        """The media file id of what a download button offers (AppTest keeps no bytes; the id
        is a hash of the data, its mime type and file name: compare with ``file_id``)."""
        return self.at.download_button(key=key).proto.url.rsplit("/", 1)[-1].split(".")[0]

    def click(self, key: str) -> Page:
        if key in BOARD_KEYS:          # the board's buttons live in the browser: do what it does
            return self.press(BOARD_KEYS[key])
        self.at.button(key=key).click()
        return self.run()

    def edit(self, text: str) -> Page:
        """Type ``text`` into the Author page's editor (as the editor sends an edit: its state
        value ``edit``; AppTest does not run the component's JavaScript)."""
        self._edits = getattr(self, "_edits", 0) + 1
        self.at.session_state["w_author_text"] = {"edit": {"text": text, "n": self._edits}}
        return self.run()

    def editor(self) -> dict:
        """What the page sends the editor component: text, seq, mark, words, labels."""
        (e,) = [e for e in self.at.get("bidi_component") if e.proto.id.endswith("-w_author_text")]
        return json.loads(e.proto.json)

    def editor_text(self) -> str:
        return self.editor()["text"]

    # the board (a components-v2 element: AppTest runs no JS, so these do what its script does)
    def board(self) -> dict | None:
        """The data the board was sent (None: no board on the page)."""
        found = [e for e in self.at.get("bidi_component")      # not the Author editor, nor
                 if not e.proto.id.endswith(("-w_author_text", "-capt_curve"))]   # the capacity curve
        if not found:
            return None
        sent = json.loads(found[0].proto.json)            # {board: its data's JSON text, control}
        board, control = json.loads(sent["board"], object_pairs_hook=_once), sent["control"]
        assert not board.keys() & control.keys(), "the control names a key of the data"
        return board | control

    def press(self, action: str) -> Page:
        """A key on the board (next / prev / first / last): the board moves in the browser and
        tells Python where it is (its ``pos`` state); the page then runs again."""
        d = self.board()
        assert d is not None, "no board on the page"
        ss = self.at.session_state
        frame = ss["bv_frame"] if "bv_frame" in ss else None

        def n_ops(i: int) -> int:
            frames = d.get("frames", {}).get(d["lang"])
            return len(frames[i - d["lo"]]) if frames and d["lo"] <= i <= d["hi"] else 0
        ss["bv_cursor"], ss["bv_frame"] = move(ss["bv_cursor"], frame, action, d["num_steps"] - 1, n_ops)
        return self.run()

    def step_into(self, on: bool = True) -> Page:
        """The board's "step into" button: frames on (op 0) or off."""
        self.at.session_state["bv_frame"] = 0 if on else None
        return self.run()

    def jump(self, step: int) -> Page:
        """A click on the board's timeline."""
        self.at.session_state["bv_cursor"] = step
        if ("bv_frame" in self.at.session_state and self.at.session_state["bv_frame"] is not None):
            self.at.session_state["bv_frame"] = 0
        return self.run()

    def board_html(self) -> str:
        """What the board draws at the step the session is on (its panels, from its data)."""
        d = self.board()
        if d is None:
            return ""
        ss = self.at.session_state
        k = ss["bv_cursor"] if "bv_cursor" in ss else 0
        if not self.on_player():             # the Author page's preview board
            k = ss["bv_author_step"] if "bv_author_step" in ss else 0
        frame = ss["bv_frame"] if "bv_frame" in ss else None
        lang = d["lang"] if d["lang"] in d["steps"] else d["langs"][0]
        if not d["lo"] <= k <= d["hi"]:
            return ""
        rec = d["steps"][lang][k - d["lo"]]
        keys = ["header", "caption", "why", "ops", "blocks", "queue", "table", "requests", "external"]
        parts = {x: rec[x] for x in keys if x in rec}
        frames = d.get("frames", {}).get(lang)
        if frame is not None and frames:
            fr = frames[k - d["lo"]]
            if fr:
                parts.update(fr[min(frame, len(fr) - 1)])
        return "\n".join(d["strings"][i] for i in parts.values())

    def on_player(self) -> bool:
        return not self.at._finished_page_script_hash or self.on_page("player")

    def open_details(self) -> Page:
        """Open the KV payload and metrics expanders (as a click on each would)."""
        self.at.session_state["bv_open_x_payload"] = True
        self.at.session_state["bv_open_x_metrics"] = True
        return self.run()

    # what the page shows
    def html(self) -> str:
        return "\n".join([e.proto.body for e in self.at.html] + [self.board_html()])

    def text(self) -> str:
        parts = [self.html()]
        parts += [e.value for e in self.at.markdown] + [e.value for e in self.at.caption]
        parts += [b.label for b in self.at.button] + [w.value for w in self.at.warning]
        parts += [e.value for e in self.at.info]
        return "\n".join(str(p) for p in parts)

    def header(self) -> str:
        m = re.search(r'class="bv-stepno" data-step="\d+">([^<]*)<', self.html())
        assert m, "no step header on the page"
        return m.group(1)

    def queue(self) -> str:
        m = re.search(r'data-queue="([^"]*)"', self.html())
        assert m, "no free queue on the page"
        return m.group(1)

    def current_code_line(self) -> str:
        m = re.search(r'<div class="bv-cur"[^>]*>([^<]*)</div>', self.html())
        return m.group(1) if m else ""

    @property
    def state(self):
        return self.at.session_state

    @property
    def params(self) -> dict:
        return {k: self.at.query_params[k] for k in self.at.query_params}

    def warnings(self) -> list[str]:
        """The warnings as read on the page (markdown escapes removed)."""
        return [w.value.replace("\\", "") for w in self.at.warning]

    def charts(self) -> list[str]:
        """The JSON specs of the plotly charts on the page."""
        return [e.proto.spec for e in self.at.get("plotly_chart")]


def file_id(data: str, mime: str, name: str) -> str:
    from streamlit.runtime.memory_media_file_storage import _calculate_file_id
    return _calculate_file_id(data.encode("utf-8"), mime, name)


@pytest.fixture
def page():
    return Page


@pytest.fixture
def test_scenarios(monkeypatch):
    """Point the app at tests/render/scenarios (a 4,096-block pool, hostile markup, ...)."""
    monkeypatch.setenv("BLOCKVIZ_SCENARIOS", str(TEST_SCENARIOS))
    return TEST_SCENARIOS


def errors(p) -> list[str]:
    """The page's error messages as read (markdown escapes removed)."""
    return [e.value.replace("\\", "") for e in p.at.error]


def successes(p) -> list[str]:
    return [e.value.replace("\\", "") for e in p.at.success]


def move(cursor: int, frame: int | None, action: str, last: int, n_ops) -> tuple[int, int | None]:
    """The new (step, frame) after first / prev / next / last, as the board's keys move it in the
    browser (board.js). In step-into mode (frame is not None) prev/next walk op by op and cross
    into the neighbouring events."""
    into = frame is not None
    if action == "first":
        return 0, (0 if into else None)
    if action == "last":
        return last, (max(0, n_ops(last) - 1) if into else None)
    if action == "next":
        if not into:
            return min(cursor + 1, last), None
        if frame + 1 < n_ops(cursor):
            return cursor, frame + 1
        return (cursor + 1, 0) if cursor < last else (cursor, frame)
    if action == "prev":
        if not into:
            return max(cursor - 1, 0), None
        if frame > 0:
            return cursor, frame - 1
        return (cursor - 1, max(0, n_ops(cursor - 1) - 1)) if cursor > 0 else (cursor, frame)
    raise ValueError(f"unknown move {action!r}")
