"""A prompt split (``blockviz.sim.explain.Split``) in words: one sentence per category, filled from
its detail (``blockviz.i18n.explain``'s templates), in English and 中文. The terminal (``play``) and
the board's request panel say the same sentences."""
from __future__ import annotations

from blockviz.i18n import t
from blockviz.sim.explain import KEYS
from blockviz.teach.narrate import blocks_text

# the categories in the order a prompt's tokens meet them (a lookup walks from the start)
TOKEN_ORDER = ("hit", "external_hit", "window", "evicted", "different_key", "cold", "skipped",
               "last_token", "partial_block")


def split_sentences(split, lang: str) -> list[tuple[str, str]]:
    """(category, sentence) for each category of the split that holds tokens, in token order;
    evictions alike (same holder, same cause, same taker, same steps) make one sentence."""
    behind = [seg for seg in split.segments if seg[3] and "cached_in_block" in seg[3]]
    by: dict[str, list] = {}             # the other segments by category, in token order
    for seg in split.segments:
        if seg not in behind:
            by.setdefault(seg[2], []).append(seg)
    out: list[tuple[str, str]] = []
    for cat in TOKEN_ORDER:
        segs = by.get(cat, [])
        n = sum(b - a for a, b, _, _ in segs)
        if not segs:
            pass
        elif cat == "hit":
            ids = [i for *_, d in segs for i in (d or {}).get("block_ids", ())]
            out.append((cat, t("xs_hit", lang, n=n, blocks=blocks_text(ids, lang))))
        elif cat == "external_hit":
            out.append((cat, t("xs_external_hit", lang, n=n, medium=segs[0][3]["medium"])))
        elif cat == "partial_block" and n == 1:
            out.append((cat, t("xs_partial_block_one", lang)))
        elif cat in ("last_token", "partial_block"):
            out.append((cat, t(f"xs_{cat}", lang, n=n)))
        elif cat == "cold":
            groups: dict[tuple, int] = {}
            for a, b, _, d in segs:
                key = tuple((d or {}).get("pending_in", ()))
                groups[key] = groups.get(key, 0) + b - a
            for pending, k in groups.items():
                out.append((cat, t("xs_cold_pending", lang, n=k, ids=", ".join(pending))
                            if pending else t("xs_cold", lang, n=k)))
        elif cat == "evicted":
            groups2: dict[tuple, list] = {}
            for a, b, _, d in segs:
                key = (d["cached_by"], d["cached_at"]["event"], d["cause"], d["taken_by"],
                       d["evicted_at"]["event"])
                groups2.setdefault(key, []).append((a, b, d))
            for (req, s, cause, taker, at), items in groups2.items():
                k = sum(b - a for a, b, _ in items)
                ids = [d["block_id"] for _, _, d in items]
                out.append((cat, t(f"xs_evicted_{cause}", lang, n=k, req=req, s=s, t=at,
                                   taker=taker or "?", blocks=blocks_text(ids, lang, "nr_Blocks"))))
        elif cat == "different_key":
            d = next((d for *_, d in segs if d and "which" in d), {})
            which = t("x_and", lang).join(t(f"xw_{w}", lang) for w in d.get("which", ())) or "?"
            out.append((cat, t("xs_different_key", lang, n=n, req=d.get("other_request", "?"),
                               which=which)))
        elif cat == "window":
            groups3 = (segs[0][3] or {}).get("groups") or [{}]
            g = groups3[0]
            miss = (g.get("missing") or [{}])[0]
            out.append((cat, t("xs_window", lang, n=n, g=g.get("group", "?"),
                               b=miss.get("block_index", "?"),
                               why=t(f"xs_window_{miss.get('status', 'cold')}", lang))))
        elif cat == "skipped":
            out.append((cat, t(f"xs_skipped_{segs[0][3]['reason']}", lang, n=n)))
        cached = [seg for seg in behind if seg[2] == cat]
        if cached:
            ids = [d["cached_in_block"] for *_, d in cached]
            out.append((cat, t("xs_behind_miss", lang, n=sum(b - a for a, b, *_ in cached),
                               blocks=blocks_text(ids, lang))))
    return out


def split_summary(split, lang: str) -> str:
    """"4 hit · 4 last-token rule": the non-zero categories with their token counts."""
    counts = dict(zip(KEYS, split.counts, strict=True))
    return " · ".join(f"{counts[cat]} {t(f'xc_{cat}', lang)}" for cat in TOKEN_ORDER
                      if counts[cat])


def segment_sentence(segment, lang: str) -> str:
    """The sentence of one segment ``(start, end, category, detail)`` of a split alone."""
    from types import SimpleNamespace
    said = split_sentences(SimpleNamespace(segments=(segment,)), lang)
    return said[0][1] if said else ""
