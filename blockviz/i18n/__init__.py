"""Every word blockviz shows, in English and 中文.

``t(key, lang, **fields)`` looks a label up; keys are language-neutral (widget keys and tests use
them, never the text). ``tn`` picks a key's form for a count, ``id_list`` writes a list of ids.
"""
from __future__ import annotations

from blockviz.i18n import (
    author,
    bounds,
    capacity,
    explain,
    fields,
    live,
    narrate,
    panels,
    player,
    trace,
)

LANGS = ("en", "zh")                         # every language; English is the default
LANG_NAMES = {"en": "English", "zh": "中文"}
HTML_LANG = {"en": "en", "zh": "zh-CN"}      # a page's <html lang>

# Every area's words, one dictionary: key -> (English, 中文). A key may be defined only once.
AREAS = (panels, narrate, player, author, capacity, trace, fields, live, bounds, explain)
STRINGS: dict[str, tuple[str, str]] = {}
for _area in AREAS:
    _dup = STRINGS.keys() & _area.STRINGS.keys()
    if _dup:
        raise RuntimeError(f"i18n keys defined twice: {sorted(_dup)}")
    STRINGS.update(_area.STRINGS)


def t(key: str, lang: str, /, **fields) -> str:
    en, zh = STRINGS[key]
    text = zh if lang == "zh" else en
    return text.format(**fields) if fields else text


def texts(key: str, **fields) -> dict[str, str]:
    """``key`` in every language, as a scenario file's text ({en: ..., zh: ...}); a field given
    as a mapping is per language (``title={"en": ..., "zh": ...}``)."""
    return {lang: t(key, lang, **{k: v[lang] if isinstance(v, dict) else v for k, v in fields.items()})
            for lang in LANGS}


def other_lang(lang: str) -> str:
    """The language the board switches to from ``lang``."""
    return next(other for other in LANGS if other != lang)


def tn(key: str, count: int, lang: str, /, **fields) -> str:
    """``key``'s form for ``count`` things: ``key_one`` for one, ``key_many`` otherwise."""
    return t(f"{key}_one" if count == 1 else f"{key}_many", lang, **fields)


MAX_IDS = 16   # an id list names at most this many


def id_list(ids) -> str:
    """Ids as a sentence lists them: "1, 2, 3"; a long list its first ones, then "… last (count)"."""
    if len(ids) <= MAX_IDS:
        return ", ".join(str(i) for i in ids)
    shown = ", ".join(str(i) for i in ids[:MAX_IDS - 2])
    return f"{shown}, … {ids[-1]} ({len(ids)})"


def event_label(step, lang: str) -> str:
    """A short label for a step's event, e.g. "A arrives" / "A 到达"."""
    if step is None:
        return t("ev_start", lang)
    kind, args = step.kind, step.args
    if kind is None:
        return t("ev_note", lang)
    if kind == "arrive":
        return t("ev_arrive", lang, id=args.id)
    if kind == "decode":
        return t("ev_decode", lang, n=args.steps)
    if kind in ("finish", "abort"):
        key = "ev_finish_many" if kind == "finish" and len(args) != 1 else f"ev_{kind}"
        return t(key, lang, ids=", ".join(args))
    # the others name at most their one value: step's count, preempt's id, a checkpoint's name
    return t(f"ev_{kind}", lang, n=args, id=args, name=args)
