"""Narration: the step's note (the scenario author's words) and what the engine did (generated
from the op records by ``blockviz.teach.narrate``), plus the run's error at the step where it stopped."""
from __future__ import annotations

from collections.abc import Sequence

from blockviz.i18n import t
from blockviz.render.theme import esc
from blockviz.teach.narrate import narrate_ops, schedule_lines


def step_header_html(index: int, last: int, event: str, lang: str, frame: tuple[int, int] | None = None,
                     title: str = "") -> str:
    """``step k of n · event`` (and ``op j of m`` while stepping into an event)."""
    op = ""
    if frame is not None:
        j, m = frame
        said = t("op_k_of_m", lang, k=j + 1, m=m) if m else t("no_ops_short", lang)
        op = f'<span class="bv-event bv-muted">{esc(said)}</span>'
    return (f'<div class="bv"><div class="bv-stepline"><span class="bv-stepno" data-step="{index}">'
            f'{esc(t("step_k_of_n", lang, k=index, n=last))}</span>'
            f'<span class="bv-event">{esc(event)}</span>{op}'
            f'<span class="bv-scn">{esc(title)}</span></div></div>')


MAX_SENTENCE = 320   # an op over a thousand blocks names them all; the page shows the start


def clip(text: str, limit: int = MAX_SENTENCE) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip(" ,、") + " …"


def first_sentence(text: str) -> str:
    """The first sentence of a longer text (a scenario with notes but no captions)."""
    for i, ch in enumerate(text):
        if ch in "。！？" or (ch in ".!?" and (i + 1 == len(text) or text[i + 1] == " ")):
            return text[:i + 1]
    return text


def _error_html(error: str | None, lang: str) -> str:
    """The run's error, at the last step of a run that stopped early."""
    return (f'<div class="bv-error" role="alert">{esc(t("error_stopped", lang, msg=error))}</div>'
            if error else "")


def caption_html(caption: str | None, lang: str, *, error: str | None = None,
                 teaching_only: bool = False) -> str:
    """The step's one sentence, shown large (the scenario's caption), then, at the last step of a
    run that stopped early, the error; the badge of a teaching-only event before it."""
    badge = (f'<span class="bv-teaching-tag" title="{esc(t("teaching_only_why", lang))}">'
             f'{esc(t("teaching_only", lang))}</span> ' if teaching_only else "")
    text = f'<span class="bv-cap-text">{esc(caption)}</span>' if caption else ""
    err = _error_html(error, lang)
    return f'<div class="bv bv-caption">{badge}{text}{err}</div>' if (badge or text or err) else ""


def note_html(note: str | None, lang: str, *, error: str | None = None) -> str:
    """The step's note (the author's words) and, at the last step of a run that stopped early,
    the error."""
    body = (f'<div class="bv-note">{esc(note)}</div>' if note else "") + _error_html(error, lang)
    return f'<div class="bv bv-panel">{body}</div>' if body else ""


def did_html(sentences: Sequence[str], lang: str, *, max_items: int | None = None) -> str:
    """What the engine did, one sentence per op (``blockviz.teach.narrate.narrate_ops``);
    ``max_items``: the first that many, then a line saying how many more (a big pool's step can
    run a hundred ops, of which a screen shows a few)."""
    if not sentences:
        return f'<div class="bv bv-panel"><div class="bv-muted">{esc(t("no_ops", lang))}</div></div>'
    head = f'<div class="bv-small">{esc(t("engine_did", lang))}</div>'
    more = len(sentences) - max_items if max_items is not None else 0
    shown = sentences[:max_items] if more > 0 else sentences
    items = "".join(f'<li title="{esc(s)}">{esc(clip(s))}</li>' if len(s) > MAX_SENTENCE
                    else f"<li>{esc(s)}</li>" for s in shown)
    if more > 0:
        items += f'<li class="bv-more">… {esc(t("more_items", lang, n=more))}</li>'
    return (f'<div class="bv bv-panel">{head}<div class="bv-did-wrap"><ul class="bv-did">{items}</ul>'
            f'</div></div>')


def schedule_html(lines: Sequence[str], lang: str, *, teaching_only: bool = False, more: int = 0) -> str:
    """The engine steps an event ran, a line each ("A: 1 decode token · B: 2 new (8 hit) ·
    budget 11/8192", who was preempted, who finished: ``blockviz.teach.narrate.schedule_lines``),
    and the badge of a teaching-only event (a form vLLM's scheduler has no equivalent for)."""
    badge = (f'<div class="bv-teaching" role="note"><b>{esc(t("teaching_only", lang))}</b> '
             f'<span>{esc(t("teaching_only_why", lang))}</span></div>' if teaching_only else "")
    if not lines and not badge:
        return ""
    rows = ""
    if lines:
        items = "".join(f"<li>{esc(clip(ln))}</li>" for ln in lines)
        if more > 0:
            items += f'<li class="bv-more">… {esc(t("more_items", lang, n=more))}</li>'
        rows = (f'<div class="bv-small">{esc(t("engine_steps", lang))}</div>'
                f'<ul class="bv-sched" data-bv="schedule">{items}</ul>')
    return f'<div class="bv bv-panel">{badge}{rows}</div>'


MAX_SCHEDULE_LINES = 200     # engine steps listed for one event, then how many more


def engine_did_html(snapshot, lang: str, labels, vocab, block_size: int,
                    max_items: int | None = None) -> str:
    """What the engine did in a step, in whole sentences: the schedule of its engine steps (with
    the teaching-only badge), then one sentence per op (``max_items``: the first that many, then
    how many more). The board keeps them behind "why?", beside the note."""
    steps = snapshot.engine_steps
    more = max(0, len(steps) - MAX_SCHEDULE_LINES)     # (a 10,000-step decode event: its first lines)
    return (schedule_html(schedule_lines(steps[:MAX_SCHEDULE_LINES] if more else steps, lang), lang,
                          teaching_only=snapshot.teaching_only, more=more)
            + did_html(narrate_ops(snapshot.ops, lang, labels, vocab, block_size, limit=max_items), lang,
                       max_items=max_items))

