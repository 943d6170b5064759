"""The Live page through AppTest: it offers the operator's endpoints and nothing else (a link
cannot name another), in both languages; the subscriber it starts is the server's, shared."""
from __future__ import annotations

import json

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
