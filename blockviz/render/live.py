"""The Live page's picture of a KV-event stream (pure: a reduction in, HTML out).

- the prefix forest of every ``(medium, group_idx)``: a tree of hash chains (a chain of blocks
  with one child each is one row, opened on demand), token text where known (the words of a lesson
  when one is chosen, else the ids), tenants apart (a LoRA adapter or a cache_salt gives other
  hashes for equal tokens: each tenant's trees under its own heading), the newest stores marked,
  the latest removals listed struck through;
- counters (cached now, stored, removed, cleared, batches, events) and the last minute's rates as
  bars per second;
- warnings: joined late (no snapshot exists: what was cached before is unknown until it is
  removed), gaps, restarts, and the latest notes.

Bounded: at most ``max_rows`` rows of forest are drawn (the rest is counted), and every text is
cut to a length; a forest of 10,000 hashes draws in a few milliseconds (bench/live.py).
"""
from __future__ import annotations

import math
import time
from collections.abc import Mapping

from blockviz.i18n import t
from blockviz.live.reducer import CANNOT_KNOW, group_name, hash_label, short_hex
from blockviz.render.board import asset
from blockviz.render.theme import css_vars, esc

MAX_ROWS = 250
NEW_S = 5.0                   # stores of the batches of the last seconds are marked new
NEW_BATCHES = 64              # (at most this many batches back)
REMOVED_SHOWN = 8
NOTES_SHOWN = 6
CHAIN_LISTED = 40             # blocks listed inside an opened chain
TOKEN_CHARS = 72
RATE_WINDOW_S = 60
RATE_AVG_S = 10


# -- small pieces -------------------------------------------------------------------------------
def token_text(tokens, words: Mapping[int, str] | None, limit: int = TOKEN_CHARS) -> str:
    """A block's (or a chain's) tokens as text, cut at ``limit`` characters: words where the
    chosen lesson has them, else the ids. Not escaped."""
    if tokens is None:
        return "?"
    head = tokens[:limit // 2 + 1]            # every token takes two characters at least
    if words:
        get = words.get
        text = " ".join(w if (w := get(tok)) is not None else str(tok) for tok in head)
    else:
        text = " ".join(map(str, head))
    if len(text) > limit or len(head) < len(tokens):
        cut = text[:limit]
        return cut[:cut.rfind(" ")] + " …" if " " in cut else cut + "…"
    return text


def tenant_label(tenant: tuple, lang: str) -> str:
    lora, salt = tenant
    kind = "both" if lora and salt else "lora" if lora else "salt" if salt else "none"
    return t(f"lv_tenant_{kind}", lang, lora=lora, salt=salt)


# -- the forest ----------------------------------------------------------------------------------
class Forest:
    """Roots and children of one group's cached hashes (children in store order), and each root's
    newest store: the trees that changed last are drawn first (the drawing is capped)."""

    def __init__(self, g: dict) -> None:
        children: dict = {}
        up: dict = {}
        roots = []
        for h, e in g.items():
            p = e.parent
            if e.chain_known and p is not None and p in g and p != h:
                children.setdefault(p, []).append(h)
                up[h] = p
            else:
                roots.append(h)
        root_of: dict = {r: r for r in roots}
        latest: dict = {r: -1 for r in roots}
        for h, e in g.items():
            path = []
            x = h
            while x not in root_of and x in up and len(path) <= len(g):
                path.append(x)
                x = up[x]
            if x not in root_of:       # a cycle of parents (a lying stream): its own root
                roots.append(x)
                root_of[x] = x
                latest[x] = -1
            r = root_of[x]
            for y in path:
                root_of[y] = r
            if e.seq is not None and e.seq > latest[r]:
                latest[r] = e.seq
        # newest first (a restart's seqs start again: store order breaks the ties)
        order = {r: i for i, r in enumerate(roots)}
        roots.sort(key=lambda r: (-latest[r], -order[r]))
        self.g, self.children, self.roots = g, children, roots

    def tenants(self) -> dict:
        """The roots by tenant, (LoRA name, cache_salt), in drawing order: the salt is the root's
        string extra key that is not the LoRA name (vLLM puts a salt in a sequence's first block
        only)."""
        out: dict = {}
        for r in self.roots:
            e = self.g[r]
            salt = next((k for k in e.extra_keys or () if isinstance(k, str) and k != e.lora_name), None)
            out.setdefault((e.lora_name, salt), []).append(r)
        return out

    def head(self, key: tuple, lang: str, rank: int | None = None) -> str:
        """The group's heading: its name, kinds, hashes and trees (its rank, when there are
        several data-parallel ranks: each its own engine)."""
        kinds = {e.kind for e in self.g.values() if e.kind}
        head = t("lv_group", lang, group=group_name(key), kind=", ".join(sorted(kinds)) or "?",
                 n=len(self.g), trees=len(self.roots))
        return head if rank is None else t("lv_rank", lang, rank=rank) + " · " + head

    def chain(self, h) -> list:
        """``h`` and the blocks after it while each has exactly one child (one row)."""
        out = [h]
        kids = self.children.get(h)
        seen = {h}
        while kids is not None and len(kids) == 1 and kids[0] not in seen:
            h = kids[0]
            seen.add(h)
            out.append(h)
            kids = self.children.get(h)
        return out

    def walk(self, root):
        """``root``'s tree depth first, a chain a row: (chain, depth). Iterative (a deep tree cannot
        overflow); parents in a circle (a lying stream) are drawn once."""
        stack, drawn = [(root, 0)], set()
        while stack:
            h, depth = stack.pop()
            if h in drawn:
                continue
            chain = self.chain(h)
            drawn.update(chain)
            yield chain, depth
            stack.extend((k, depth + 1) for k in reversed(self.children.get(chain[-1], [])))


class _Rows:
    def __init__(self, max_rows: int) -> None:
        self.left = max_rows
        self.drawn = 0           # hashes drawn


class _Words:
    """The page's words in one language, looked up once per drawing (a row is drawn often)."""

    def __init__(self, lang: str) -> None:
        self.blocks, self.copies = t("lv_blocks", lang), t("lv_copies", lang)
        self.new = esc(t("sl_new", lang))
        self.gone, self.unknown = esc(t("lv_parent_gone", lang)), esc(t("lv_parent_unknown", lang))
        self.title = t("lv_node_title", lang)
        self.more = t("lv_more_blocks", lang)


def _row(forest: Forest, chain: list, recent: set, words, w: _Words, orphan: bool) -> str:
    g = forest.g
    blocks = [g[h] for h in chain]
    first, last = blocks[0], blocks[-1]
    new = copies = 0
    toks: list | None = []
    for e in blocks:
        if e.seq in recent:
            new = 1
        if e.count > 1:
            copies += 1
        if toks is not None and len(toks) < TOKEN_CHARS:
            toks = None if e.tokens is None else toks + list(e.tokens)
    cls = "bvl-node" + (" bvl-new" if new else "") + (" bvl-orphan" if orphan else "")
    h0 = short_hex(chain[0])
    head = (hash_label(chain[0]) if len(chain) == 1
            else f"{hash_label(chain[0])} → {hash_label(chain[-1])}")
    badges = "".join(f'<span class="{badge}">{said}</span>' for badge, said, on in (
        ("bvl-n", esc(w.blocks.format(n=len(chain))), len(chain) > 1),
        ("bvl-copies", esc(w.copies.format(n=copies)), copies),
        ("bvl-badge-new", w.new, new),
        ("bvl-orphan-b", w.unknown if not first.chain_known else w.gone, orphan)) if on)
    text = esc(token_text(toks, words))
    title = esc(w.title.format(first=h0, last=short_hex(chain[-1]),
                               seq=first.seq if first.seq is not None else "?",
                               kind=last.kind or "?", bs=last.block_size))
    line = f'<span class="bvl-hash">{head}</span>{badges}<span class="bvl-tok">{text}</span>'
    if len(chain) == 1:
        return f'<div class="{cls}" data-key="{h0}" title="{title}">{line}</div>'
    items = []
    for h, e in zip(chain[:CHAIN_LISTED], blocks):
        mark = " bvl-new" if e.seq in recent else ""
        dup = f' <span class="bvl-copies">×{e.count}</span>' if e.count > 1 else ""
        items.append(f'<li class="bvl-block{mark}"><span class="bvl-hash">{short_hex(h)}</span>'
                     f'{dup} <span class="bvl-tok">{esc(token_text(e.tokens, words))}</span></li>')
    if len(chain) > CHAIN_LISTED:
        items.append(f'<li class="bvl-more">{esc(w.more.format(n=len(chain) - CHAIN_LISTED))}</li>')
    return (f'<details class="{cls}" data-key="{h0}" title="{title}"><summary>{line}</summary>'
            f'<ol class="bvl-chain">{"".join(items)}</ol></details>')


def _tree(forest: Forest, root, recent: set, words, w: _Words, rows: _Rows, orphan: bool) -> str:
    """One tree (``Forest.walk``): a node's children in a ``bvl-kids`` box after its row."""
    out = []
    boxes = 0                              # open: one per level above the row
    for chain, depth in forest.walk(root):
        if rows.left <= 0:
            break
        out.append("</div>" * (boxes - depth))
        rows.left -= 1
        rows.drawn += len(chain)
        out.append(_row(forest, chain, recent, words, w, orphan and depth == 0))
        boxes = depth
        if forest.children.get(chain[-1]):
            out.append('<div class="bvl-kids">')
            boxes += 1
    out.append("</div>" * boxes)           # and what a cut left open
    return "".join(out)


def group_html(key: tuple, g: dict, *, rank: int, ranks: int, recent: set, removed: list,
               words, lang: str, rows: _Rows) -> str:
    forest = Forest(g)
    head = forest.head(key, lang, rank if ranks > 1 else None)
    tenants = forest.tenants()
    parts = [f'<section class="bvl-group" data-group="{esc(group_name(key))}">'
             f'<div class="bvl-gh">{esc(head)}</div>']
    drawn0 = rows.drawn
    w = _Words(lang)
    for tenant, roots in tenants.items():
        if len(tenants) > 1 or tenant != (None, None):
            parts.append(f'<div class="bvl-tenant">{esc(tenant_label(tenant, lang))}'
                         f' <small>{esc(t("lv_trees", lang, n=len(roots)))}</small></div>')
        parts.append('<div class="bvl-forest">')
        for r in roots:
            if rows.left <= 0:
                break
            e = g[r]
            orphan = not e.chain_known or e.parent is not None
            parts.append(_tree(forest, r, recent, words, w, rows, orphan))
        parts.append("</div>")
    hidden = len(g) - (rows.drawn - drawn0)
    if hidden > 0:
        parts.append(f'<div class="bvl-more">{esc(t("lv_more_hashes", lang, n=hidden))}</div>')
    if removed:
        items = "".join(
            f'<li class="{"bvl-gone bvl-gone-new" if i == 0 else "bvl-gone"}">'
            f'<span class="bvl-hash">{esc(short_hex(h))}</span> '
            f'<span class="bvl-tok">{esc(token_text(e.tokens, words))}</span> '
            f'<small>{esc(t("live_where_seq", lang, n=seq))}</small></li>'
            for i, (seq, h, e) in enumerate(removed))
        parts.append(f'<div class="bvl-removed"><div class="bvl-sub">'
                     f'{esc(t("lv_removed_recent", lang))}</div><ul>{items}</ul></div>')
    parts.append("</section>")
    return "".join(parts)


# -- counters and rates ------------------------------------------------------------------------------
def _rates(history, now: float) -> tuple[list, list, list]:
    """Per second of the last RATE_WINDOW_S: hashes stored, removed; seconds with a clear."""
    stored = [0] * RATE_WINDOW_S
    removed = [0] * RATE_WINDOW_S
    cleared = [False] * RATE_WINDOW_S
    for b in reversed(history):
        age = now - b.t
        if age >= RATE_WINDOW_S:
            break
        i = RATE_WINDOW_S - 1 - max(0, int(age))
        stored[i] += b.stored
        removed[i] += b.removed
        cleared[i] = cleared[i] or b.cleared
    return stored, removed, cleared


def rates_svg(history, now: float, lang: str) -> str:
    stored, removed, cleared = _rates(history, now)
    top = max(1, max(stored), max(removed))
    w, h, bw = 600, 90, 600 / RATE_WINDOW_S
    mid = h / 2
    bars = []
    for i in range(RATE_WINDOW_S):
        x = i * bw
        if cleared[i]:
            bars.append(f'<rect class="bvl-r-clear" x="{x:.1f}" y="0" width="{bw:.1f}" height="{h}"/>')
        for cls, n, up in (("bvl-r-st", stored[i], True), ("bvl-r-rm", removed[i], False)):
            if n:           # stored up from the middle line, removed down
                bh = (mid - 4) * n / top
                bars.append(f'<rect class="{cls}" x="{x + 1:.1f}" y="{mid - bh if up else mid:.1f}" '
                            f'width="{bw - 2:.1f}" height="{bh:.1f}"><title>{n}</title></rect>')
    label = esc(t("lv_rates_axis", lang, s=RATE_WINDOW_S, top=top))
    return (f'<svg class="bvl-rates" viewBox="0 0 {w} {h}" preserveAspectRatio="none" role="img" '
            f'aria-label="{label}"><line class="bvl-r-mid" x1="0" y1="{mid}" x2="{w}" y2="{mid}"/>'
            + "".join(bars) + "</svg>"
            + f'<div class="bvl-r-legend"><span class="bvl-k-st">■ {esc(t("lv_stored", lang))}</span>'
              f'<span class="bvl-k-rm">■ {esc(t("lv_removed", lang))}</span>'
              f'<span class="bvl-k-clear">■ {esc(t("lv_cleared", lang))}</span>'
              f'<span>{label}</span></div>')


def counters_html(red, now: float, lang: str) -> str:
    recent = [b for b in red.history if now - b.t < RATE_AVG_S]
    cards = [("lv_cached", f"{red.cached():,}", "")]
    for k in ("stored", "removed", "cleared"):     # every rank's count; the last seconds' rate
        rate = f"{sum(getattr(b, k) for b in recent) / RATE_AVG_S:.1f}"
        cards.append((f"lv_{k}", f"{sum(getattr(rs.state, k) for rs in red.ranks.values()):,}",
                      t("lv_per_s", lang, v=rate) if k != "cleared" else ""))
    cards.append(("lv_batches", f"{red.batches:,}", t("lv_events_n", lang, n=f"{red.events:,}")))
    return '<div class="bvl-cards">' + "".join(
        f'<div class="bvl-card" data-counter="{key[3:]}"><div class="bvl-cv">{esc(v)}</div>'
        f'<div class="bvl-cl">{esc(t(key, lang))}</div><div class="bvl-cs">{esc(sub)}</div></div>'
        for key, v, sub in cards) + "</div>"


def warnings_html(red, lang: str) -> str:
    out = []
    for _, rs in sorted(red.ranks.items()):
        late = [(a, b) for a, b in rs.missing if a == 0]
        if late or rs.state.unknown_removals:
            out.append(("bvl-warn", t("lv_warn_late", lang, n=rs.state.unknown_removals,
                                      seqs=f"0..{late[0][1]}" if late else "-")))
        gaps = [(a, b) for a, b in rs.missing if a != 0]
        if gaps:
            shown = ", ".join(f"{a}..{b}" if b > a else str(a) for a, b in gaps[-5:])
            out.append(("bvl-warn", t("lv_warn_gaps", lang, n=len(gaps), seqs=shown)))
        if rs.restarts:
            out.append(("bvl-info", t("lv_warn_restart", lang, n=rs.restarts)))
    if red.gaps and not any(cls == "bvl-warn" for cls, _ in out):
        out.append(("bvl-info", t("lv_gaps_filled", lang, n=red.gaps)))
    return "".join(f'<div class="{cls}">{esc(text)}</div>' for cls, text in out)


def _details(key: str, summary: str, items) -> str:
    """A list that opens (``bvl-<key>``; kept open across updates by its data-key)."""
    lis = "".join(f"<li>{esc(text)}</li>" for text in items)
    return (f'<details class="bvl-{key}" data-key="{key}"><summary>{esc(summary)}</summary>'
            f'<ul>{lis}</ul></details>')


def cannot_know(lang: str) -> list[str]:
    """What no subscriber can know (reducer.CANNOT_KNOW), in ``lang``."""
    return [t("live_unknown_" + k, lang) for k in CANNOT_KNOW]



# -- the whole ----------------------------------------------------------------------------------------
def live_html(red, *, lang: str, now: float | None = None, status: str = "",
              words: Mapping[int, str] | None = None) -> str:
    """The Live view of ``red`` (a blockviz.live.stream.Reduction; read it under its feed's
    lock). ``status``: the line about the connection, already in ``lang``."""
    now = time.time() if now is None else now
    parts = ['<div class="bvl">']
    if status:
        parts.append(f'<div class="bvl-status">{esc(status)}</div>')
    parts.append(warnings_html(red, lang))
    parts.append(counters_html(red, now, lang))
    parts.append(rates_svg(red.history, now, lang))
    rows = _Rows(MAX_ROWS)
    nranks = len(red.ranks)
    any_group = False
    for r, rs in sorted(red.ranks.items()):
        recent_seqs = set()
        for b in reversed(red.history):
            if now - b.t > NEW_S or len(recent_seqs) >= NEW_BATCHES:
                break
            if b.rank == r:
                recent_seqs.add(b.seq)
        removed_by: dict = {}
        for seq, key, h, e in reversed(rs.recent_removed):
            if h in rs.state.groups.get(key, ()):
                continue                   # stored again since: it is in the forest
            lst = removed_by.setdefault(key, [])
            if len(lst) < REMOVED_SHOWN:
                lst.append((seq, h, e))
        keys = list(rs.state.groups)
        keys += [k for k in removed_by if k not in rs.state.groups]
        for key in keys:
            g = rs.state.groups.get(key, {})
            if not g and key not in removed_by:
                continue
            any_group = True
            parts.append(group_html(key, g, rank=r, ranks=nranks, recent=recent_seqs,
                                    removed=removed_by.get(key, []), words=words, lang=lang,
                                    rows=rows))
    if not any_group:
        parts.append(f'<div class="bvl-empty">{esc(t("lv_empty", lang))}</div>')
    notes = red.notes
    if notes.total:
        parts.append(_details("notes", t("lv_notes", lang, n=notes.total),
                              (n.text(lang)[:300] for n in reversed(notes.kept()[-NOTES_SHOWN:]))))
    parts.append(_details("cannot", t("lv_cannot", lang), cannot_know(lang)))
    parts.append("</div>")
    return "".join(parts)


def age_text(seconds: float | None, lang: str) -> str:
    if seconds is None or math.isinf(seconds):
        return t("lv_no_message", lang)
    return t("lv_last_message", lang, s=f"{seconds:.0f}")


def live_css() -> str:
    """The component's stylesheet, live.css (its shadow root gets the palette on :host)."""
    return css_vars() + "\n" + asset("live.css")
