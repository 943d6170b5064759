"""One translation table: every sentence blockviz shows in 中文 is a keyed template in
blockviz/i18n/, so no Chinese text is written in code anywhere else — except the starter scenario
(a file a user edits, both languages in it) and the self-check's parser of typed answers."""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from blockviz.i18n import LANGS, STRINGS, id_list, other_lang, texts, tn

ROOT = Path(__file__).resolve().parents[2]
CJK = re.compile(r"[\u4e00-\u9fff]")        # a Chinese word (punctuation alone is no sentence)
SKIP = ("blockviz/i18n/", "blockviz/teach/authoring.py", "blockviz/teach/selfcheck.py",
        "blockviz/live/")   # the starter file; typed answers; live keeps its own words for now


def _strings(path: Path):
    """(line, text) of every string literal in a Python file (comments and docstrings aside)."""
    toks = list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline))
    for i, tok in enumerate(toks):
        if tok.type != tokenize.STRING and getattr(tokenize, "FSTRING_MIDDLE", None) != tok.type:
            continue
        before = next((p for p in reversed(toks[:i]) if p.type not in (tokenize.NL, tokenize.NEWLINE,
                                                                       tokenize.INDENT, tokenize.DEDENT)),
                      None)
        if before is None or before.type == tokenize.OP and before.string == ":":   # a docstring
            continue
        yield tok.start[0], tok.string


def test_no_chinese_sentence_is_written_outside_i18n():
    found = [f"{rel}:{line}: {text[:60]}"
             for path in sorted((ROOT / "blockviz").rglob("*.py"))
             if not (rel := path.relative_to(ROOT).as_posix()).startswith(SKIP)
             for line, text in _strings(path) if CJK.search(text)]
    assert not found, "Chinese text outside blockviz/i18n (make it a keyed template):\n" + "\n".join(found)


def test_every_key_has_both_languages_and_the_same_fields():
    fields = re.compile(r"\{(\w+?)(?:_en|_zh)?[}:!]")    # msg_en / msg_zh: one field per language
    for key, (en, zh) in STRINGS.items():
        assert en and zh, key
        assert set(fields.findall(en)) == set(fields.findall(zh)), key


def test_the_helpers():
    assert LANGS == ("en", "zh") and other_lang("en") == "zh" and other_lang("zh") == "en"
    assert tn("nr_blocks", 1, "en", ids="3") == "block 3"
    assert tn("nr_blocks", 2, "en", ids="3, 4") == "blocks 3, 4"
    assert tn("nr_blocks", 2, "zh", ids="3, 4") == "块 3, 4"
    assert id_list([1, 2, 3]) == "1, 2, 3"
    assert id_list(list(range(1, 21))) == "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, … 20 (20)"
    assert texts("fork_scenario_title", title={"en": "Six", "zh": "六"}, k=3) == {
        "en": "Six — fork at step 3", "zh": "六 —— 从第 3 步分叉"}
