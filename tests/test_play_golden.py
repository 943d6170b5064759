"""``python -m blockviz play`` for six-blocks, in both languages, against golden files.

Regenerate after an intended change with:  BLOCKVIZ_UPDATE_GOLDEN=1 bin/test tests/test_play_golden.py
and read the diff before committing it.
"""
from __future__ import annotations

import os

import pytest


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_play_six_blocks_golden(cli, root, lang):
    p = cli("play", str(root / "scenarios" / "six-blocks.yaml"), "--lang", lang, "--no-color")
    assert p.returncode == 0, p.stderr
    golden = root / "tests" / "golden" / f"six-blocks.play.{lang}.txt"
    if os.environ.get("BLOCKVIZ_UPDATE_GOLDEN"):
        golden.write_text(p.stdout, encoding="utf-8")
    assert p.stdout == golden.read_text(encoding="utf-8")


def test_play_languages_differ_and_say_the_key_facts(cli, root):
    en = cli("play", str(root / "scenarios" / "six-blocks.yaml"), "--lang", "en", "--no-color").stdout
    zh = cli("play", str(root / "scenarios" / "six-blocks.yaml"), "--lang", "zh", "--no-color").stdout
    assert "head → 4 → 3 → 5 → 6 → 2 → 1 → tail" in en
    assert "队首 → 4 → 3 → 5 → 6 → 2 → 1 → 队尾" in zh
    assert "lazy eviction" in en and "惰性淘汰" in zh
    # B's admission step decodes A first (vLLM serves running requests before waiting ones)
    assert "A: 1 decode token · B: 2 new (8 hit) · budget 3/8192" in en
    assert "A：解码 1 个 token · B：新 2 个 token（命中 8） · 预算 3/8192" in zh
    assert "A running [1, 2, 3] (computed 11/12)" in en
    assert "空闲队列" not in en and "Free queue" not in zh
