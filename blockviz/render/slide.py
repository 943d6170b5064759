"""One step as a 1920×1080 slide: a plotly figure drawn with shapes and annotations (GPU blocks,
free queue, hash table, requests, narration), legible from the back of a room. Pure: a timeline
in, a figure out; ``blockviz.render.export`` turns it into a PNG with kaleido.

Coordinates are pixels, y growing downwards (the y axis is reversed). Plotly annotations do not
wrap, so text is wrapped here by an estimate of its width (CJK characters count double).
Everything from a scenario is HTML-escaped: plotly reads annotation text as a little HTML.
"""
from __future__ import annotations

import html
import unicodedata
from collections.abc import Sequence

import plotly.graph_objects as go

from blockviz.i18n import event_label, t
from blockviz.i18n.errors import error_text
from blockviz.render.requests import ordered_requests
from blockviz.render.theme import (
    AMBER,
    BLOCK_KINDS,
    BLOCK_LEGEND,
    BLUE,
    GREEN,
    GREEN_BG,
    INK,
    MUTED,
    PURPLE,
    RED,
    block_kind,
)
from blockviz.render.view import step_view
from blockviz.teach.labels import HashLabels, token_text
from blockviz.teach.narrate import narrate_ops

W, H = 1920, 1080
PAD = 48
FONT = "Noto Sans CJK SC, Noto Sans, DejaVu Sans, Arial, sans-serif"
MAX_CARDS = 64            # more blocks: small cells without words
MAX_CELLS = 512           # more: the first ones, and a count
QUEUE_HEAD, QUEUE_TAIL = 22, 6


def _e(text: object) -> str:
    return html.escape(str(text), quote=False)


def char_width(c: str) -> float:
    """Width of a character in ems (an estimate good enough to wrap lines)."""
    if unicodedata.east_asian_width(c) in ("W", "F"):
        return 1.0
    if c == " ":
        return 0.28
    if c in "il.,:;'|!()[]":
        return 0.3
    if c.isupper() or c in "mwMW@%":
        return 0.7
    return 0.55


def text_width(text: str, size: float) -> float:
    return sum(char_width(c) for c in text) * size


_NO_LINE_START = frozenset("、，。；：！？）」』】…,.;:!?)")   # never the first character of a line


def wrap(text: str, width_px: float, size: float, max_lines: int | None = None) -> list[str]:
    """Lines of ``text`` no wider than ``width_px`` at font ``size``; breaks at spaces, or
    anywhere between CJK characters; the last line gets "…" when cut."""
    lines: list[str] = []
    line, w = "", 0.0
    tokens: list[str] = []
    word = ""
    for c in " ".join(text.split()):
        if c == " " or unicodedata.east_asian_width(c) in ("W", "F"):
            if word:
                tokens.append(word)
            tokens.append(c)
            word = ""
        else:
            word += c
    if word:
        tokens.append(word)
    for tok in tokens:
        tw = text_width(tok, size)
        if line and w + tw > width_px and tok != " " and tok not in _NO_LINE_START:
            lines.append(line.rstrip())
            line, w = "", 0.0
        if not line and tok == " ":
            continue
        while tw > width_px and not line:      # one word wider than the line: cut it
            n = max(1, int(len(tok) * width_px / tw))
            lines.append(tok[:n])
            tok = tok[n:]
            tw = text_width(tok, size)
        line += tok
        w += tw
    if line.strip():
        lines.append(line.rstrip())
    if max_lines is not None and len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][:max(1, len(lines[-1]) - 2)] + " …"
    return lines


class _Canvas:
    """Shapes and annotations in pixel coordinates."""

    def __init__(self) -> None:
        self.shapes: list[dict] = []
        self.notes: list[dict] = []

    def rect(self, x0, y0, x1, y1, *, fill="rgba(0,0,0,0)", line=None, width=2, dash="solid",
             radius: bool = False) -> None:
        self.shapes.append(dict(type="rect", x0=x0, y0=y0, x1=x1, y1=y1, fillcolor=fill,
                                line=dict(color=line or "rgba(0,0,0,0)", width=width if line else 0,
                                          dash=dash), layer="below"))

    def line(self, x0, y0, x1, y1, colour, width=2) -> None:
        self.shapes.append(dict(type="line", x0=x0, y0=y0, x1=x1, y1=y1,
                                line=dict(color=colour, width=width)))

    def text(self, x, y, text: str, *, size=20, colour=INK, bold=False, anchor="left",
             valign="top", raw: bool = False) -> None:
        body = text if raw else _e(text)
        if bold:
            body = f"<b>{body}</b>"
        self.notes.append(dict(x=x, y=y, text=body, showarrow=False, xanchor=anchor, yanchor=valign,
                               align=anchor if anchor != "center" else "center",
                               font=dict(size=size, color=colour, family=FONT)))

    def figure(self) -> go.Figure:
        fig = go.Figure()
        fig.update_layout(width=W, height=H, margin=dict(l=0, r=0, t=0, b=0), paper_bgcolor="#ffffff",
                          plot_bgcolor="#ffffff", shapes=self.shapes, annotations=self.notes,
                          showlegend=False, font=dict(family=FONT, color=INK))
        fig.update_xaxes(range=[0, W], visible=False, fixedrange=True)
        fig.update_yaxes(range=[H, 0], visible=False, fixedrange=True)
        return fig


def _cell_style(i: int, ref: int, h) -> tuple[str, str, str]:
    """(fill, border, dash) of a block as the app draws it (the style table)."""
    _, fill, line, dash, _, _ = BLOCK_KINDS[block_kind(i, ref, h)]
    return fill, line, dash


def _section(c: _Canvas, x, y, title: str, hint: str = "") -> None:
    c.text(x, y, title, size=26, bold=True)
    if hint:
        c.text(x + text_width(title, 26) * 1.08 + 18, y + 6, hint, size=19, colour=MUTED)


def _grid(n: int, avail_w: float, avail_h: float, gap: float, ratio: float) -> tuple[int, float, float]:
    """(columns, cell width, cell height) that make ``n`` cells as large as the area allows
    (cells at most 210 px wide, height ≤ ``ratio`` × width)."""
    best = (1, 0.0, 0.0)
    for cols in range(1, n + 1):
        rows = -(-n // cols)
        cw = min(210.0, (avail_w - gap * (cols - 1)) / cols)
        ch = min(cw * ratio, (avail_h - gap * (rows - 1)) / rows)
        cw = min(cw, ch / ratio * 1.25)          # not much wider than tall
        if ch > 0 and cw * ch > best[1] * best[2]:
            best = (cols, cw, ch)
    return best


def _blocks(c: _Canvas, v, labels: HashLabels, vocab, lang: str, top: float, bottom: float) -> float:
    """The block cards between ``top`` and at most ``bottom``; returns where they end."""
    s = v.state
    n = len(s.ref_cnt)
    victim = s.free_queue[0] if s.free_queue else None
    _section(c, PAD, top, t("gpu_blocks", lang))
    y0, avail_w, avail_h = top + 46, W - 2 * PAD, bottom - top - 46
    shown = min(n, MAX_CELLS)
    cards = shown <= MAX_CARDS
    gap = 28 if cards else 4
    cols, cw, ch = _grid(shown, avail_w, avail_h, gap, 0.95 if cards else 1.0)
    for i in range(shown):
        r, col = divmod(i, cols)
        x, y = PAD + col * (cw + gap), y0 + r * (ch + gap)
        ref, h = s.ref_cnt[i], s.block_hash[i]
        fill, border, dash = _cell_style(i, ref, h)
        if i in v.changed and cards:
            c.rect(x - 6, y - 6, x + cw + 6, y + ch + 6, line=AMBER, width=6)
        elif i in v.changed:                 # tiny cells: an outline of their own, not a frame
            border, dash = AMBER, "solid"
        c.rect(x, y, x + cw, y + ch, fill=fill, line=border, width=3 if cards else 1.5, dash=dash)
        if i == victim:
            c.rect(x, y + ch - max(4, ch * 0.07), x + cw, y + ch, fill=RED)
        if not cards:
            continue
        big = max(14, min(44, ch * 0.3))
        ink = "#ffffff" if i == 0 else INK
        c.text(x + 10, y + 6, str(i), size=big, bold=True, colour=ink)
        if i == 0:
            c.text(x + 10, y + 14 + big, t("null_block", lang), size=big * 0.5, colour="#eceff1")
            continue
        if h is not None:
            c.text(x + cw - 10, y + 8, labels(h), size=big * 0.62, bold=True, colour=GREEN, anchor="right")
        small = max(13, big * 0.55)
        c.text(x + 10, y + 12 + big, f"ref_cnt <b>{ref}</b>", size=small, raw=True)
        toks = s.block_tokens[i]
        if toks and ch > 3.2 * big:
            words = wrap(token_text(toks, vocab, 8), cw - 20, small * 0.9, 2)
            c.text(x + 10, y + 18 + big + small * 1.3, "<br>".join(_e(w) for w in words),
                   size=small * 0.9, raw=True, colour=MUTED)
        if i == victim:
            c.text(x + cw - 8, y - 4, t("next_victim_short", lang), size=small * 0.85, bold=True,
                   colour=RED, anchor="right", valign="bottom")
    end = y0 + (-(-shown // cols)) * (ch + gap) - gap
    if n > shown:
        c.text(W - PAD, end + 4, t("x_more_blocks", lang, n=f"{n - shown:,}"), size=18,
               colour=MUTED, anchor="right")
        end += 26
    return end


def _queue(c: _Canvas, v, labels: HashLabels, lang: str, top: float) -> float:
    """The free queue from ``top``; returns where it ends (its markers included)."""
    s = v.state
    q = list(s.free_queue)
    _section(c, PAD, top, t("free_queue", lang), t("free_queue_hint", lang))
    y = top + 56
    size = 78
    items: list[int | str] = q
    if len(q) > QUEUE_HEAD + QUEUE_TAIL:
        items = q[:QUEUE_HEAD] + [t("more_items", lang, n=len(q) - QUEUE_HEAD - QUEUE_TAIL)] + q[-QUEUE_TAIL:]
    x = PAD
    c.text(x, y + size / 2, t("head", lang), size=22, bold=True, colour=MUTED, valign="middle")
    x += text_width(t("head", lang), 22) + 34
    step = min(size + 48.0, (W - PAD - x - 140) / max(1, len(items)))
    box = min(size, step - 22)
    right = x
    if not q:
        c.text(x, y + size / 2, t("empty", lang), size=22, colour=MUTED, valign="middle")
        right = x + text_width(t("empty", lang), 22) + 10
    for j, b in enumerate(items):
        if isinstance(b, str):
            c.text(x + step / 2, y + size / 2, "…", size=26, colour=MUTED, anchor="center", valign="middle")
            c.text(x + step / 2, y + size + 6, b, size=14, colour=MUTED, anchor="center")
            right = x + step
            x += step
            continue
        h = s.block_hash[b]
        fill, border, dash = _cell_style(b, s.ref_cnt[b], h)
        if b in v.to_head or b in v.to_tail:
            c.rect(x - 5, y - 5, x + box + 5, y + size + 5, line=AMBER, width=5)
        c.rect(x, y, x + box, y + size, fill=fill, line=border, width=3, dash=dash)
        if j == 0:
            c.rect(x, y + size - 6, x + box, y + size, fill=RED)
        if h is not None:
            c.text(x + box / 2, y + 3, labels(h), size=max(11, box * 0.24), bold=True, colour=GREEN,
                   anchor="center")
        c.text(x + box / 2, y + size * 0.58, str(b), size=max(14, box * 0.42), bold=True, anchor="center",
               valign="middle")
        mark = t("to_head", lang) if b in v.to_head else t("to_tail", lang) if b in v.to_tail else ""
        if mark:
            c.text(x + box / 2, y + size + 8, mark, size=15, bold=True, anchor="center")
        if j < len(items) - 1 and step - box >= 24:     # a crowded queue goes without arrows
            c.text(x + box + (step - box) / 2, y + size / 2, "→", size=20, colour=MUTED, anchor="center",
                   valign="middle")
        right = x + box
        x += step
    c.text(right + 14, y + size / 2, "→  " + t("tail", lang), size=22, bold=True, colour=MUTED,
           valign="middle")
    return y + size + 30


def _hash_table(c: _Canvas, v, labels: HashLabels, lang: str, x0: float, top: float, bottom: float) -> None:
    _section(c, x0, top, t("hash_table", lang))
    y = top + 44
    rows = list(v.table)
    row_h = 31
    fits = max(1, int((bottom - y) // row_h) - 1)
    c.text(x0, y, "hash", size=16, colour=MUTED)
    c.text(x0 + 150, y, t("parent", lang), size=16, colour=MUTED)
    c.text(x0 + 300, y, t("block_ids", lang), size=16, colour=MUTED)
    y += 26
    if not rows:
        c.text(x0, y, t("empty", lang), size=20, colour=MUTED)
    for h, ids in rows[:fits]:
        new = h in v.hashes_added
        if new:
            c.rect(x0 - 6, y - 3, x0 + 620, y + row_h - 5, fill="#fff8e1")
        c.text(x0, y, labels(h), size=22, bold=True, colour=GREEN)
        parent = labels.parent.get(h)
        c.text(x0 + 150, y, labels(parent) if parent else "—", size=20, colour=MUTED)
        dup = f"   ({t('duplicate', lang)} ×{len(ids)})" if len(ids) > 1 else ""
        tag = f"   {t('tag_new_hash', lang)}" if new else ""
        c.text(x0 + 300, y, " ".join(map(str, ids)) + dup + tag, size=21, bold=True)
        y += row_h
    if len(rows) > fits:
        c.text(x0, y, "… " + t("more_items", lang, n=len(rows) - fits), size=18, colour=MUTED)
    if v.hashes_removed:
        gone = ", ".join(labels(h) for h in v.hashes_removed[:6])
        more = " …" if len(v.hashes_removed) > 6 else ""
        c.text(x0 + text_width(t("hash_table", lang), 26) + 30, top + 6,
               f"{t('tag_evicted', lang)}: {gone}{more}", size=19, bold=True, colour=RED)


def _requests(c: _Canvas, snapshot, lang: str, x0: float, top: float, bottom: float) -> None:
    _section(c, x0, top, t("requests", lang))
    y = top + 46
    reqs = ordered_requests(snapshot)
    row_h = 54
    fits = max(1, int((bottom - y) // row_h))
    if not reqs:
        c.text(x0, y, t("no_requests", lang), size=20, colour=MUTED)
    colours = {"running": BLUE, "waiting": "#8d6e00", "preempted": "#ef6c00", "finished": "#9e9e9e"}
    for r in reqs[:fits]:
        c.text(x0, y, r.request_id[:12], size=24, bold=True)
        status = t("status_" + r.status, lang)
        sw = text_width(status, 15) * 1.12 + 16
        c.rect(x0 + 120, y + 2, x0 + 120 + sw, y + 26, fill=colours.get(r.status, MUTED))
        c.text(x0 + 120 + sw / 2, y + 4, status, size=15, bold=True, colour="#ffffff", anchor="center")
        x = x0 + 140 + sw
        ids = r.block_ids
        for j, b in enumerate(ids[:14]):
            if j < r.local_hit_blocks:
                fill, line = GREEN_BG, GREEN
            elif j < r.local_hit_blocks + r.external_hit_blocks:
                fill, line = "#f3e5f5", PURPLE
            else:
                fill, line = "#e3f2fd", BLUE
            c.rect(x, y, x + 40, y + 28, fill=fill, line=line, width=2)
            c.text(x + 20, y + 3, str(b), size=17, bold=True, anchor="center")
            x += 46
        if len(ids) > 14:
            c.text(x, y + 3, f"… +{len(ids) - 14}", size=16, colour=MUTED)
        if not ids:
            c.text(x, y + 3, t("no_blocks", lang), size=17, colour=MUTED)
        done = t("computed_of", lang, c=r.num_computed_tokens, n=r.num_tokens,
                 p=r.num_tokens - r.num_computed_tokens)
        c.text(x0 + 140 + sw, y + 31, done, size=15, colour=MUTED)
        y += row_h
    if len(reqs) > fits:
        c.text(x0, y - 6, "… " + t("more_items", lang, n=len(reqs) - fits), size=16, colour=MUTED)


def _narration(c: _Canvas, snapshot, sentences: Sequence[str], lang: str, error: str | None,
               top: float, max_bottom: float) -> float:
    """The author's note (left, boxed) and what the engine did (right); returns the bottom."""
    note = snapshot.note.get(lang) if snapshot.note is not None else ""
    left_w = 1000
    body, note_h = "", 0.0
    if note or error:
        lines = wrap(note, left_w - 40, 24, 6) if note else []
        body = "<br>".join(_e(x) for x in lines)
        n = len(lines)
        if error:
            err = wrap(t("error_stopped", lang, msg=error), left_w - 40, 20, 3)
            body += ("<br>" if body else "") + f'<span style="color:{RED}">' + "<br>".join(
                _e(x) for x in err) + "</span>"
            n += len(err)
        note_h = 32 + n * 33
        x_did, did_w = PAD + left_w + 40, W - 2 * PAD - left_w - 40
    else:
        x_did, did_w = PAD, W - 2 * PAD
    max_lines = int((max_bottom - top - 30) // 25)
    out: list[str] = []
    for sentence in sentences or [t("no_ops", lang)]:
        lines = wrap(sentence, did_w - 30, 18)
        if len(out) + len(lines) > max_lines:
            if out:
                out[-1] += " …"
            break
        out += ["• " + _e(lines[0])] + ["  " + _e(x) for x in lines[1:]]
    bottom = min(max_bottom, top + max(120.0, note_h, 34 + 25 * len(out)))
    if body:
        c.rect(PAD, top, PAD + left_w, bottom, fill="#f6f8fa")
        c.rect(PAD, top, PAD + 8, bottom, fill=BLUE)
        c.text(PAD + 26, top + 14, body, size=24, raw=True)
    c.text(x_did, top, t("engine_did", lang), size=18, colour=MUTED)
    c.text(x_did, top + 28, "<br>".join(out), size=18, raw=True)
    return bottom


def _legend(c: _Canvas, lang: str, y: float) -> None:
    x = PAD
    for key, _, fill, line, dash in BLOCK_LEGEND:
        label = t(key, lang)
        c.rect(x, y, x + 28, y + 22, fill=fill, line=line, width=3, dash=dash)
        c.text(x + 36, y + 1, label, size=17, colour=MUTED)
        x += 36 + text_width(label, 17) + 40


def slide_figure(timeline, index: int, *, lang: str = "en", title: str = "",
                 labels: HashLabels | None = None) -> go.Figure:
    """Step ``index`` of ``timeline`` as a 1920×1080 figure (all panels, no interaction)."""
    labels = labels or HashLabels.for_timeline(timeline)
    last = len(timeline) - 1
    v = step_view(timeline, index)
    s = v.snapshot
    c = _Canvas()
    head = t("step_k_of_n", lang, k=index, n=last)
    c.text(PAD, 26, head, size=38, bold=True)
    c.text(PAD + text_width(head, 38) + 30, 32, event_label(s.step, lang), size=32)
    if title:
        c.text(W - PAD, 34, title, size=22, colour=MUTED, anchor="right")
    sentences = narrate_ops(s.ops, lang, labels, timeline.vocab, timeline.block_size)
    error = error_text(timeline.error, lang) if timeline.error is not None and index == last else None
    y = _narration(c, s, sentences, lang, error, 96, 336)
    y = _blocks(c, v, labels, timeline.vocab, lang, y + 22, 612)
    y = _queue(c, v, labels, lang, y + 26)
    _hash_table(c, v, labels, lang, PAD, y + 16, 1028)
    _requests(c, s, lang, 760, y + 16, 1028)
    _legend(c, lang, 1040)
    return c.figure()
