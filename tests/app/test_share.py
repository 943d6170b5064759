"""Share by link through AppTest: the Author page shows a link (and an <iframe> snippet) for the
current valid text; a fresh session opened on that link shows the same scenario at step 0 (or
the step a link names) in the link's language, and its URL keeps reopening it; a hostile or
oversized link is refused with a notice and the default lesson opens; a run cut short says so on
every step."""
from __future__ import annotations

import random
import re
from urllib.parse import parse_qs, urlsplit

from blockviz.scenario.share import MAX_CODE_CHARS, share_code
from blockviz.teach.authoring import STARTER

from .test_author import SMALL, author, edit

STOPS = SMALL + "  - preempt: A\n  - finish: B\n"     # A has finished: the run stops at step 4


def codes(p) -> list[str]:
    return [c.value for c in p.at.code]


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def test_the_author_page_offers_a_link_and_an_embed_snippet_for_the_valid_text(page):
    p = author(page)
    edit(p, SMALL)
    assert p.state["bv_author_step"] == 3                 # the preview shows the last step ...
    link, embed = codes(p)[:2]
    q = query_of(link)
    assert "step" not in q and q["lang"] == "en" and "embed" not in q   # ... the link names none
    assert len(q["s"]) <= MAX_CODE_CHARS and re.fullmatch(r"[A-Za-z0-9_-]+", q["s"])
    assert embed.startswith("<iframe src=") and "&amp;embed=true" in embed and 'title="Tiny test"' in embed
    assert "step=" not in embed
    # a fresh session (another browser) opened on the link: the same scenario, at step 0
    other = page(q)
    assert other.header() == "step 0 of 3" and "Tiny test" in other.html()
    assert other.queue() == "1 2 3" and other.state["bv_source"] == "user"
    assert other.params["s"] == q["s"] and other.params.get("step", "0") == "0"
    assert not other.warnings()
    other.press("last")                    # the board moves (and writes step= in the browser)
    assert other.state["bv_cursor"] == 3 and other.params["s"] == q["s"]
    assert other.queue() == "2"
    # a link that names a step opens there
    assert page({**q, "step": "3"}).header() == "step 3 of 3"
    # in 中文, from the same link
    zh = page({**q, "lang": "zh", "step": "1"})
    assert zh.header() == "第 1 步 / 共 3 步" and "小测试" in zh.html()


def test_an_invalid_or_too_long_text_has_no_link_and_says_why(page):
    p = author(page)
    edit(p, SMALL.replace("finish: A", "finish: Z"))
    assert not codes(p) and "The link appears once the scenario is valid." in p.text()
    rng = random.Random(1)
    notes = "".join(f"  - note: {{en: \"{' '.join(str(rng.random()) for _ in range(8))}\"}}\n"
                    for _ in range(200))
    edit(p, SMALL + notes)
    html = p.html()
    assert not codes(p)
    assert "does not fit in a link" in html and f"at most {MAX_CODE_CHARS:,}" in html
    assert "Download the file" in html
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert "放不进链接" in p.html() and "请下载文件" in p.html()


def test_open_in_player_puts_the_link_in_the_url(page):
    p = author(page)
    edit(p, SMALL)
    p.click("b_open_player")
    assert p.on_page("player")
    assert p.params == {"s": share_code(SMALL), "step": "3", "lang": "en"}
    assert "the link in the address bar reopens this scenario" in p.text()


def test_hostile_links_get_a_message_and_the_default_lesson(page):
    for s, words in [("garbage$", "not URL-safe base64"), ("AAAA", "not compressed data"),
                     ("x" * (MAX_CODE_CHARS + 5), f"at most {MAX_CODE_CHARS:,}")]:
        p = page({"s": s, "step": "2"})
        (w,) = [w for w in p.warnings() if "shared link could not be opened" in w]
        assert words in w and "six-blocks" in w
        assert p.header() == "step 2 of 8" and p.params["scenario"] == "six-blocks"
    # a link whose scenario breaks the file rules is refused as the file would be
    tagged = STARTER.replace("title:", "evil: !!python/object/apply:os.system [\"echo hi\"]\ntitle:")
    p = page({"s": share_code(tagged), "lang": "zh"})
    (w,) = [w for w in p.warnings() if "无法打开这个分享链接" in w]
    assert "shared-link.yaml:4:7" in w and "不允许使用 YAML 标签" in w


def test_a_run_cut_short_says_so_on_every_step(page):
    p = page({"s": share_code(STOPS), "step": "1"})
    assert p.header() == "step 1 of 3"
    (w,) = [w for w in p.warnings() if "stopped early" in w]
    assert "at step 4 of the scenario's 5 steps" in w and "only a running request" in w
    assert "0 to 3" in w
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert any("提前停止" in w and "第 4 步" in w for w in p.warnings())


def test_a_preview_whose_payloads_do_not_fit_names_the_command_that_shows_them(page):
    big = STARTER.replace("  free_order: split", "  free_order: split\n  model: {num_layers: 4, "
                          "num_kv_heads: 8, head_dim: 64}").replace("num_blocks: 4 ", "num_blocks: 512")
    big = big.replace("block_size: 4", "block_size: 64")
    p = author(page)
    edit(p, big)
    html = p.html()
    assert "This preview runs without KV payloads" in html and p.header() == "step 4 of 4"
    assert "python -m blockviz play my-scenario.yaml" in html and "FILE" not in html
