"""The Live page through AppTest: it offers the operator's endpoints and nothing else (a link
cannot name another), in both languages; the subscriber it starts is the server's, shared."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from blockviz.live import endpoints
from blockviz.ui import live as L

ALLOWED = ["tcp://127.0.0.1:5", "tcp://127.0.0.1:6?replay=tcp://127.0.0.1:7&bind=1"]


def view(p) -> str:
    """What the page's live view was sent (its components-v2 element's data: the HTML)."""
    (e,) = [e for e in p.at.get("bidi_component") if e.proto.component_name == L.NAME]
    return json.loads(e.proto.json)


def html(p) -> str:
    return "\n".join(e.proto.body for e in p.at.html)


@pytest.fixture
def feeds(monkeypatch):
    """Every feed the page makes, by its spec; stopped afterwards."""
    made = []

    class Recording(L.LiveFeed):
        def __init__(self, spec, **kw):
            super().__init__(spec, **kw)
            made.append(self)

    monkeypatch.setattr(L, "LiveFeed", Recording)
    monkeypatch.setenv(endpoints.ENV, json.dumps(ALLOWED))
    L._feed.clear()
    yield made
    for f in made:
        f.stop()
    L._feed.clear()


@pytest.mark.parametrize("lang, title", [("en", "Live: a running vLLM&#x27;s prefix cache"),
                                         ("zh", "实时：从 KV 事件看一个运行中的 vLLM 的前缀缓存")])
def test_only_the_operators_endpoints(page, feeds, lang, title):
    p = page({"endpoint": "tcp://203.0.113.9:5557"}).goto("live")
    assert p.on_page("live")
    if lang != "en":
        p.at.segmented_control(key="w_lang").set_value(lang)
        p.run()
    assert title in html(p)
    box = p.at.selectbox(key=L.W_ENDPOINT)
    assert list(box.options) == ALLOWED          # (AppTest shows them formatted)
    assert [f.spec.text for f in feeds] == [ALLOWED[0]]
    box.set_value(1)
    p.run()
    assert [f.spec.text for f in feeds] == ALLOWED
    assert feeds[1].spec.bind and feeds[1].spec.replay == "tcp://127.0.0.1:7"
    assert all("203.0.113.9" not in f.spec.endpoint for f in feeds)
    shown = view(p)
    assert ('bound to' if lang == "en" else "绑定在") in shown and "tcp://127.0.0.1:6" in shown
    assert "cached now" in shown if lang == "en" else "当前缓存" in shown


# -- a recording on the board ----------------------------------------------------------------------
CAPTURES = Path(__file__).resolve().parent.parent / "live" / "captures"


def replay_board(p) -> dict | None:
    """The board the page mounted for a recording: its data (parsed) and its control."""
    found = [e for e in p.at.get("bidi_component") if e.proto.component_name == L.REPLAY_NAME]
    if not found:
        return None
    sent = json.loads(found[0].proto.json)
    return json.loads(sent["board"]) | {"control": sent["control"]}


def open_recording(p, name: str, content: bytes, lang: str = "en"):
    if lang != "en":
        p.at.segmented_control(key="w_lang").set_value(lang)
        p.run()
    p.at.segmented_control(key=L.W_SOURCE).set_value("recording")
    p.run()
    p.at.file_uploader(key=L.W_UPLOAD).set_value((name, content, "application/jsonl"))
    return p.run()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_recording_opens_on_the_board(page, feeds, lang):
    p = page().goto("live")
    subscribed = len(feeds)
    open_recording(p, "pressure.jsonl", (CAPTURES / "pressure.jsonl").read_bytes(), lang)
    assert not p.at.error
    d = replay_board(p)
    assert d is not None and d["num_steps"] == 6 and d["langs"] == [lang, "en" if lang == "zh" else "zh"]
    assert d["control"]["goto"]["step"] == 0
    assert len(feeds) == subscribed              # a recording subscribes to nothing
    k = {x: d["strings"][i] for x, i in d["steps"][lang][3].items()}   # after seq 2
    assert "BlockRemoved" in k["ops"] and 'data-block="GPU/0:973aa91ed5b18194"' in k["ops"]
    assert "bvr-gone" in k["blocks"] and 'data-block="GPU/0:1a1eb4e3edd9361a"' in k["blocks"]
    assert ("batch 3 of 5" if lang == "en" else "第 3 批，共 5 批") in k["header"]
    assert p.at.download_button(key="w_live_export") is not None


@pytest.mark.parametrize("lang, said", [
    ("en", "notes.jsonl, line 1: not a KV-event recording"),
    ("zh", "notes.jsonl，第 1 行：不是 KV 事件录制")])
def test_a_bad_recording_is_refused_where_it_is_bad(page, feeds, lang, said):
    p = page().goto("live")
    open_recording(p, "notes.jsonl", b"id: six-blocks\nsteps: []\n", lang)
    assert [said in e.value for e in p.at.error] == [True]
    assert replay_board(p) is None


def test_a_recording_past_the_bounds_says_what_plays(page, feeds, monkeypatch):
    from blockviz.live import replay as lreplay
    from blockviz.render import replay as rreplay
    monkeypatch.setattr(lreplay, "MAX_STEPS", 4)
    monkeypatch.setattr(rreplay, "MAX_BOARD_CHARS", 1)       # a window of one step
    p = page().goto("live")
    open_recording(p, "pressure.jsonl", (CAPTURES / "pressure.jsonl").read_bytes())
    d = replay_board(p)
    assert (d["num_steps"], d["lo"], d["hi"]) == (5, 0, 0) and len(d["marks"]) == 5
    said = " ".join(c.value for c in p.at.sidebar.caption)
    assert "Only the first 4 play: 1 more message(s) were not read." in said
    # the board reaches its window's edge and asks for step 3 (board.js: setStateValue("want"))
    p.at.session_state[L.REPLAY_KEY] = {"pos": None, "want": 3}
    p.run()
    d = replay_board(p)
    assert d["num_steps"] == 5 and d["lo"] == 0 and d["hi"] == 3       # from BACK before, through 3
    assert "batch 3 of 4" in d["strings"][d["steps"]["en"][3]["header"]]


@pytest.fixture
def served(monkeypatch):
    """The server started with two recordings (blockviz app --recording FILE --recording FILE)."""
    from blockviz.live import replay as lreplay
    files = [str(CAPTURES / "pressure.jsonl"), str(CAPTURES / "tenants-and-lora.jsonl")]
    monkeypatch.setenv(lreplay.ENV, json.dumps(files))
    return files


def test_a_recording_the_server_was_started_with_opens_at_once(page, feeds, served):
    p = page().goto("live")
    assert feeds == []                                   # recording mode: nothing subscribed
    d = replay_board(p)
    assert d is not None and d["num_steps"] == 6         # pressure.jsonl, the first
    p.at.query_params["recording"] = "tenants-and-lora.jsonl"     # /live?recording=NAME
    p.run()
    d = replay_board(p)
    assert d["num_steps"] == 5
    assert "cache_salt acme" in d["strings"][d["steps"]["en"][4]["blocks"]]


@pytest.mark.parametrize("asked", ["/etc/passwd", "../live/captures/six-blocks.jsonl", "2", ""])
def test_a_link_names_only_the_servers_recordings(page, feeds, served, asked):
    p = page().goto("live")
    p.at.query_params["recording"] = asked
    p.run()
    d = replay_board(p)
    assert d["num_steps"] == 6                           # the first of the server's, as without
    assert p.at.selectbox(key=L.W_RP_SERVER).value == 0
