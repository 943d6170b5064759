"""Every word blockviz shows, in English and 中文.

``t(key, lang, **fields)`` looks a label up; keys are language-neutral (widget keys and tests use
them, never the text). Narration of what the engine did lives in ``blockviz.teach.narrate``.
"""
from __future__ import annotations

from blockviz.i18n import bounds, fields, live, scheduler, share, strings, trace

LANGS = ("en", "zh")
LANG_NAMES = {"en": "English", "zh": "中文"}

# Every area's words, one dictionary: key -> (English, 中文). A key may be defined only once.
AREAS = (strings, scheduler, trace, share, fields, live, bounds)
STRINGS: dict[str, tuple[str, str]] = {}
for _area in AREAS:
    _dup = STRINGS.keys() & _area.STRINGS.keys()
    if _dup:
        raise RuntimeError(f"i18n keys defined twice: {sorted(_dup)}")
    STRINGS.update(_area.STRINGS)


def t(key: str, lang: str, **fields) -> str:
    en, zh = STRINGS[key]
    text = zh if lang == "zh" else en
    return text.format(**fields) if fields else text


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
    if kind == "step":
        return t("ev_step", lang, n=args)
    if kind == "finish":
        return t("ev_finish" if len(args) == 1 else "ev_finish_many", lang, ids=", ".join(args))
    if kind == "preempt":
        return t("ev_preempt", lang, id=args)
    if kind in ("checkpoint", "rewind"):
        return t(f"ev_{kind}", lang, name=args)
    return t(f"ev_{kind}", lang)
