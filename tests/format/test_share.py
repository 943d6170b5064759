"""Share by link (blockviz.scenario.share): a scenario's text round-trips through a URL-safe code
within the stated limit; a code that is too long, damaged, cut short, padded with junk, not UTF-8
or a zip bomb is refused with a message (in both languages), before anything is expanded beyond
the file limit; a decoded text meets the loader's limits exactly as a file would."""
from __future__ import annotations

import base64
import random
import re
import tracemalloc
import zlib

import pytest

from blockviz.i18n.errors import knows
from blockviz.render.authoring import iframe
from blockviz.scenario import ScenarioError, load_text
from blockviz.scenario.schema import MAX_FILE_BYTES
from blockviz.scenario.share import (
    LINK_FILE,
    MAX_CODE_CHARS,
    BadLink,
    LinkTooLong,
    decode,
    encode,
    link,
    share_code,
)
from blockviz.teach.authoring import STARTER

URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


def load_link(code: str):
    """(text, loaded scenario) of a link code, as the app loads one: decoded, then loaded exactly
    like a file (its size, YAML, schema and reference limits) under the name LINK_FILE."""
    text = decode(code)
    return text, load_text(text, LINK_FILE)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_a_scenario_round_trips_through_a_url_safe_code():
    text = STARTER.replace("My scenario", "Mon scénario · 我的场景")
    code = share_code(text)
    assert URL_SAFE.fullmatch(code) and "=" not in code
    assert decode(code) == text
    assert len(code) < len(text)                  # compressed
    got, loaded = load_link(code)
    assert got == text and loaded.scenario.id == "my-scenario" and loaded.file == LINK_FILE


def test_json_text_round_trips_too():
    text = '{"id": "j", "title": {"en": "J"}, "config": {"model": null}, "steps": ["admit"]}'
    assert load_link(share_code(text))[1].scenario.id == "j"


def test_a_text_too_big_for_a_link_is_refused_saying_the_limit():
    rng = random.Random(0)                        # random words do not compress away
    notes = "".join(f"  - note: {{en: \"{' '.join(str(rng.random()) for _ in range(8))}\"}}\n"
                    for _ in range(200))
    with pytest.raises(LinkTooLong) as e:
        share_code(STARTER + notes)
    assert e.value.chars > MAX_CODE_CHARS
    assert f"at most {MAX_CODE_CHARS:,}" in e.value.message and knows(e.value.message)
    assert len(encode(STARTER + notes)) == e.value.chars     # encode itself has no limit


@pytest.mark.parametrize("code, words", [
    ("", "empty"),
    ("abc$def", "not URL-safe base64"),
    ("a b c", "not URL-safe base64"),
    ("A", "not URL-safe base64"),                     # 1 mod 4: no byte can end there
    ("AAAA", "not compressed data"),
    (b64(b"id: plain text, not zlib"), "not compressed data"),
    (b64(zlib.compress(STARTER.encode())[:40]), "cut short"),
    (b64(zlib.compress(STARTER.encode()) + b"junk"), "extra data"),
    (b64(zlib.compress("é".encode("latin-1"))), "not UTF-8"),
    ("x" * (MAX_CODE_CHARS + 1), "at most 8,000"),
])
def test_hostile_codes_are_refused_with_a_message(code, words):
    with pytest.raises(ScenarioError) as e:
        decode(code)
    assert isinstance(e.value, BadLink | LinkTooLong)
    assert words in e.value.message
    assert knows(e.value.message), e.value.message       # and it reads in Chinese
    assert e.value.localized("zh") != e.value.localized("en")


def test_a_zip_bomb_stops_at_the_file_limit_without_expanding_in_full():
    # 25 MiB of comment compress to ~25 KB; a prefix that fits in a link stands for ~6 MB
    bomb = zlib.compress(b"#" * (25 * MAX_FILE_BYTES), 9)[: 5_900]
    code = b64(bomb)
    assert len(code) <= MAX_CODE_CHARS
    tracemalloc.start()
    try:
        with pytest.raises(BadLink) as e:
            decode(code)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MAX_FILE_BYTES          # expanded in full it would hold 25 MiB at once
    assert f"more than {MAX_FILE_BYTES:,} bytes" in e.value.message


def test_a_decoded_text_meets_the_loader_s_limits_like_a_file():
    tagged = STARTER.replace("title:", "evil: !!python/object/apply:os.system [\"echo hi\"]\ntitle:")
    with pytest.raises(ScenarioError) as e:
        load_link(share_code(tagged))
    assert "YAML tag" in e.value.message and e.value.file == LINK_FILE and e.value.line == 4
    big = STARTER.replace("num_blocks: 4 ", "num_blocks: 1000000 ")
    with pytest.raises(ScenarioError) as e:
        load_link(share_code(big))
    assert e.value.path == "config.num_blocks"
    with pytest.raises(ScenarioError) as e:                 # a control character, as in a file
        load_link(encode(STARTER + "  - note: {en: \"\x1b[31m\"}\n"))
    assert "control character" in e.value.message


def test_the_link_and_the_embed_snippet():
    code = share_code(STARTER)
    url = link("http://example.org/app/", code, step=2, lang="zh")
    assert url == f"http://example.org/app/?s={code}&step=2&lang=zh"
    embed = link("http://example.org/app", code, step=0, embed=True)
    assert embed.endswith("&step=0&embed=true")
    tag = iframe(embed, 'A "quoted" <title>')
    assert tag.startswith('<iframe src="http://example.org/app/?s=') and "&amp;embed=true" in tag
    assert 'title="A &quot;quoted&quot; &lt;title&gt;"' in tag and tag.endswith("</iframe>")
