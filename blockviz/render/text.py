"""The terminal rendering of ``python -m blockviz play``: one readable block per step."""
from __future__ import annotations

import textwrap
import unicodedata
from collections.abc import Callable

from blockviz.i18n import event_label, t
from blockviz.i18n.errors import error_text, printable
from blockviz.sim.step import Step
from blockviz.sim.timeline import Timeline
from blockviz.teach.explain import split_sentences, split_summary
from blockviz.teach.labels import HashLabels, token_text
from blockviz.teach.narrate import narrate_ops, schedule_lines

_RESET, _BOLD, _DIM = "\x1b[0m", "\x1b[1m", "\x1b[2m"
_GREEN, _YELLOW, _GREY = "\x1b[32m", "\x1b[33m", "\x1b[90m"


def columns(text: str) -> int:
    """Terminal columns: a wide or full-width (CJK) character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _label(text: str, width: int = 18) -> str:
    return text + " " * max(1, width - columns(text))


def wrap(text: str, width: int = 100, indent: str = "") -> str:
    """Wrap by display width: words for Latin text, characters for CJK runs."""
    if all(columns(ch) == 1 for ch in text):
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent)
    lines, line, w = [], indent, columns(indent)
    for token in _tokens(text):
        tw = columns(token)
        if w + tw > width and line.strip():
            lines.append(line.rstrip())
            line, w = indent, columns(indent)
            token = token.lstrip()
            tw = columns(token)
        line += token
        w += tw
    lines.append(line.rstrip())
    return "\n".join(lines)


def _tokens(text: str):
    """Latin words (with their leading space) stay whole; each wide character is its own token."""
    word = ""
    for ch in text:
        if columns(ch) == 2:
            if word:
                yield word
                word = ""
            yield ch
        elif ch == " ":
            if word:
                yield word
            word = " "
        else:
            word += ch
    if word:
        yield word


def render_blocks(s: Step, labels: HashLabels, vocab, changed: frozenset[int],
                  style: Callable[..., str], lang: str) -> list[str]:
    cells = []
    for i in range(s.num_gpu_blocks):
        if i == 0:
            cells.append(style(f"[0 {t('null_block', lang)}]", _DIM))
            continue
        h = s.block_hash[i]
        body = f"{i} {t('ref', lang)}={s.ref_cnt[i]}"
        if h is not None:
            body += f" {labels(h)}"
        toks = s.block_tokens[i]
        if toks:
            body += f" ·{printable(token_text(toks, vocab, 8))}"  # words are the author's
        mark = "*" if i in changed else ""
        codes = (_GREEN,) if h is not None else (_GREY,)
        if i in changed:
            codes += (_BOLD, _YELLOW) if h is None else (_BOLD,)
        cells.append(style(f"[{body}]{mark}", *codes))
    lines, line = [], ""
    for c in cells:
        if line and len(line) + len(c) > 160:
            lines.append(line)
            line = ""
        line += (" " if line else "") + c
    lines.append(line)
    return lines


def render_step(timeline: Timeline, index: int, *, lang: str = "en", color: bool | None = False,
                labels: HashLabels | None = None) -> str:
    def style(text: str, *codes: str) -> str:
        return "".join(codes) + text + _RESET if color and codes else text

    labels = labels or HashLabels.for_timeline(timeline)
    vocab = timeline.vocab
    s = timeline.step(index)
    n = len(timeline) - 1
    # Everything the scenario's author wrote (notes, ids, checkpoint names, words) goes through
    # printable(): a note must not be able to drive the terminal it is shown on.
    head = f"── {t('step_k_of_n', lang, k=index, n=n)} · {printable(event_label(s.event, lang))} "
    out = [style(head + "─" * max(4, 78 - len(head)), _BOLD)]
    if s.teaching_only:
        out.append(style(f"[{t('teaching_only', lang)}] {t('teaching_only_why', lang)}", _YELLOW))
    if s.note is not None:
        out.append(wrap(printable(s.note.get(lang))))
    block_lines = render_blocks(s, labels, vocab, s.changes.blocks, style, lang)
    out.append(_label(t('gpu_blocks', lang)) + block_lines[0])
    out += [" " * 18 + bl for bl in block_lines[1:]]
    q = " → ".join(str(b) for b in s.free_queue)
    out.append(_label(t("free_queue", lang))
               + (f"{t('head', lang)} → {q} → {t('tail', lang)}" if q else t("empty", lang)))
    parts = []
    for h, ids in s.hash_table:
        parent = labels.parent.get(h)
        chain = f"{labels(h)}({labels(parent)})" if parent else labels(h)
        dup = f" [{t('duplicate', lang)}]" if len(ids) > 1 else ""
        parts.append(f"{chain} → {', '.join(map(str, ids))}{dup}")
    out.append(_label(t('hash_table', lang)) + (" · ".join(parts) or t('empty', lang)))
    reqs = " · ".join(f"{printable(rid)} {t('status_' + r.status, lang)} {list(r.block_ids)} "
                      f"({t('computed', lang)} {r.num_computed_tokens}/{r.num_tokens})"
                      for rid, r in s.requests.items())
    if reqs:
        out.append(_label(t('requests', lang)) + reqs)
    first = True
    for rid, r in s.requests.items():       # the lookups explained at this step
        for split, key in ((r.prompt_split, "xs_head"), (r.resumed_split, "xs_head_resumed")):
            if split is None or split.event != index:
                continue
            head = t(key, lang, rid=printable(rid), n=split.num_tokens,
                     summary=split_summary(split, lang))
            out.append((_label(t("why_missed", lang)) if first else " " * 18) + head)
            out += [wrap(sentence, indent=" " * 20).replace(" " * 20, " " * 18 + "• ", 1)
                    for _, sentence in split_sentences(split, lang)]
            first = False
    if s.external is not None:
        ext = " ".join(labels(h) for h, _ in s.external) or t("empty", lang)
        out.append(_label(t('external_tier', lang)) + ext)
    for i, line in enumerate(schedule_lines(s.engine_steps, lang)):
        out.append((_label(t('engine_steps', lang)) if i == 0 else " " * 18) + printable(line))
    lines = narrate_ops(s.ops, lang, labels, vocab, timeline.block_size)
    if lines:
        out.append(t("engine_did_head", lang))
        out += [wrap(printable(line), indent="    ").replace("    ", "  • ", 1) for line in lines]
    if timeline.error is not None and index == len(timeline) - 1:
        msg = printable(error_text(timeline.error, lang))
        out.append(style(t("error_stopped", lang, msg=msg), _BOLD, _YELLOW))
    return "\n".join(out) + "\n"
