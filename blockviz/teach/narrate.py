"""What the engine did, in words — generated from the op records, in English and 中文.

``describe_op`` says one op (the "step into" view); ``narrate_ops`` says a whole step, folding
runs of K/V writes into one sentence. The sentences are ``blockviz.i18n.narrate``'s templates; this
module chooses one per op and fills in its fields.
"""
from __future__ import annotations

from collections.abc import Sequence

from blockviz.i18n import STRINGS, id_list, t, tn
from blockviz.scenario.tokens import Vocabulary
from blockviz.teach.labels import HashLabels, token_text


def blocks_text(ids: Sequence[int], lang: str, key: str = "nr_blocks") -> str:
    return tn(key, len(ids), lang, ids=id_list(ids))


def describe_op(op, lang: str, labels: HashLabels, vocab: Vocabulary | None = None,
                block_size: int = 0) -> str:
    """One op in a sentence; with several KV-cache groups, an op about one group says which, by
    its type and size ("group 1, sliding window 8")."""
    text = _describe(op, lang, labels, vocab, block_size)
    g = getattr(op, "group", None)
    if g is not None and labels.hybrid and op.kind != "write":
        spec = labels.groups[g]
        text = t("nr_group_tag", lang, group=t(f"nr_group_{spec.type}", lang, g=g, n=spec.size)) + text
    return text


def _describe(op, lang: str, labels: HashLabels, vocab: Vocabulary | None, block_size: int) -> str:
    k = op.kind
    if k == "lookup" and labels.hybrid:
        rid, n, spb = op.request_id, op.num_hit_tokens, op.shared_prefix_boundary
        text = (t("nr_lookup_groups", lang, rid=rid, n=n, blocks=blocks_text(op.block_ids, lang)) if n
                else t("nr_lookup_groups_miss", lang, rid=rid))
        if spb > n:
            text += t("nr_lookup_short", lang, rid=rid, n=n, spb=spb)
        return text
    if k == "lookup":
        rid, hits = op.request_id, op.block_ids
        limit, n_hashes = op.hit_tokens_limit, op.num_block_hashes
        if not hits:
            text = t("nr_lookup_miss", lang, rid=rid)
        else:
            text = t("nr_lookup_hit", lang, rid=rid, k=len(hits), blocks=blocks_text(hits, lang),
                     n=len(hits) * block_size if block_size else "?")
        if block_size and len(hits) == limit // block_size and n_hashes > len(hits):
            text += t("nr_lookup_capped", lang, limit=limit)
        return text
    if k == "alloc_failed":
        text = t("nr_alloc_failed_admit" if op.full_sequence else "nr_alloc_failed", lang,
                 rid=op.request_id, need=op.blocks_needed, free=op.blocks_free)
        if op.watermark_blocks:
            text += t("nr_alloc_watermark", lang, w=op.watermark_blocks,
                      total=op.blocks_needed + op.watermark_blocks)
        return text
    if k == "touch":
        text = t("nr_touch", lang, blocks=blocks_text(op.block_ids, lang))
        removed = op.removed_from_queue
        if removed:
            text += tn("nr_touch_free", len(removed), lang, ids=id_list(removed))
        return text
    if k == "remove_skipped":
        if not op.block_ids:       # a hit's table padded with the null block
            n = len(op.block_indices)
            return tn("nr_skipped_hit", n, lang, rid=op.request_id, n=n)
        kind = "chunk" if labels.groups[op.group].type == "chunked_local_attention" else "window"
        return tn(f"nr_skipped_{kind}", len(op.block_ids), lang, rid=op.request_id,
                  blocks=blocks_text(op.block_ids, lang), slots=id_list(op.block_indices))
    if k == "cache":
        masked = getattr(op, "masked", ())
        if not op.block_ids:
            return tn("nr_cache_masked", len(masked), lang, blocks=blocks_text(masked, lang))
        text = tn("nr_cache", len(op.block_ids), lang, blocks=blocks_text(op.block_ids, lang),
                  hashes=", ".join(labels(h) for h in op.hashes))
        if masked:
            text += t("nr_cache_also_masked", lang, blocks=blocks_text(masked, lang))
        return text
    if k == "admit":
        ext = op.external_hit_tokens
        return t("nr_admit", lang, rid=op.request_id, local=op.local_hit_tokens,
                 external=t("nr_admit_external", lang, ext=ext) if ext else "", new=op.num_new_tokens)
    if k == "schedule":
        return t("nr_schedule_decode" if op.decode else "nr_schedule_chunk", lang, rid=op.request_id,
                 n=op.num_new_tokens)
    if k == "preempt":
        return t("nr_preempt_groups" if labels.hybrid else "nr_preempt", lang, rid=op.request_id)
    if k == "reset":
        return t("nr_reset" if op.ok else "nr_reset_refused", lang)
    if k == "write":
        toks = op.token_ids
        return t("nr_write", lang, rid=op.request_id, n=len(toks), words=token_text(toks, vocab, 6),
                 bid=op.block_id, offset=op.offset)
    if k == "sample":
        return t("nr_sample", lang, rid=op.request_id, token=token_text([op.token_id], vocab))
    if k == "finish":
        return t(f"nr_finish_{op.reason}", lang, rid=op.request_id)
    if k == "rewind":
        return t("nr_rewind", lang, name=op.checkpoint)
    if k == "restart":
        return t("nr_restart", lang, gen=op.generation, none_hash=op.none_hash.hex()[:12])
    if k == "verify":
        diff = op.max_abs_diff
        return t("nr_verify_same" if diff == 0 else "nr_verify_diff", lang, rid=op.request_id,
                 hit=op.hit_tokens, diff=f"{diff:.2e}", dev=op.device)
    # the rest (arrive, popleft, evict, free, free_head, free_tail, load, save, drop) say their
    # fields: ``nr_<kind>`` takes those it names of a request, its blocks, a block, a hash (a
    # kind with no sentence names itself)
    if f"nr_{k}" not in STRINGS:
        return k
    fields = {"rid": getattr(op, "request_id", None), "bid": getattr(op, "block_id", None)}
    if hasattr(op, "block_ids"):
        fields.update(blocks=blocks_text(op.block_ids, lang),
                      Blocks=blocks_text(op.block_ids, lang, "nr_Blocks"))
    if hasattr(op, "block_hash"):
        fields["label"] = labels(op.block_hash)
    return t(f"nr_{k}", lang, **fields)


def schedule_line(es, lang: str) -> str:
    """One engine step in a line: "A: 1 decode token · B: 2 new (8 hit) · budget 11/8192",
    then who was preempted and who finished."""
    parts = []
    for s in es.scheduled:
        n, rid = s.num_tokens, s.request_id
        if s.decode:
            parts.append(tn("sl_decode", n, lang, rid=rid, n=n))
            continue
        hit = s.local_hit_tokens + s.external_hit_tokens
        what = ("sl_resumed" if s.resumed else "sl_new") if s.admitted else "sl_more"
        parts.append(t("sl_prefill", lang, rid=rid, n=n, what=t(what, lang),
                       chunk="" if s.samples else t("sl_chunk", lang))
                     + (t("sl_hit", lang, hit=hit) if hit else ""))
    if not parts:
        parts.append(t("sl_nothing", lang))
    parts.append(t("sl_budget", lang, used=es.num_scheduled_tokens, budget=es.token_budget))
    return " · ".join(parts) + "".join(t(f"sl_{key}", lang, ids=", ".join(ids)) for key, ids in
                                       (("preempted", es.preempted), ("finished", es.finished)) if ids)


def schedule_lines(engine_steps, lang: str) -> list[str]:
    """Each engine step of an event, numbered when there are several."""
    lines = [schedule_line(es, lang) for es in engine_steps]
    if len(lines) > 1:
        lines = [t("sl_step_k", lang, k=i + 1) + ln for i, ln in enumerate(lines)]
    return lines


def _silent(op) -> bool:
    """An op that did nothing worth a sentence (touching no blocks; a cache call that neither
    cached nor skipped a block), or a plain decode (the schedule line says it)."""
    return ((op.kind == "schedule" and op.decode)
            or (op.kind in ("touch", "popleft", "free") and not op.block_ids)
            or (op.kind == "cache" and not op.block_ids and not getattr(op, "masked", ())))


def _writes(ops: Sequence, lang: str, labels: HashLabels) -> str:
    """A run of one request's K/V writes in a sentence: its tokens and blocks, with several
    KV-cache groups per group (each group's layers write the same tokens)."""
    first = ops[0]
    if not labels.hybrid:
        return t("nr_writes", lang, rid=first.request_id, n=sum(len(o.token_ids) for o in ops),
                 ids=id_list([o.block_id for o in ops]))
    positions: set[int] = set()
    per_group: dict[int, list[int]] = {}
    for o in ops:
        positions.update(range(o.position, o.position + len(o.token_ids)))
        per_group.setdefault(o.group, []).append(o.block_id)
    where = ", ".join(t("nr_writes_where", lang, g=g, blocks=blocks_text(ids, lang))
                      for g, ids in sorted(per_group.items()))
    return tn("nr_writes_groups", len(positions), lang, rid=first.request_id, n=len(positions),
              where=where)


def narrate_ops(ops: Sequence, lang: str, labels: HashLabels,
                vocab: Vocabulary | None = None, block_size: int = 0,
                limit: int | None = None) -> list[str]:
    """One sentence per op, runs of writes by one request folded into one sentence. ``limit``:
    the sentences past the first ``limit`` are counted, not written (each an empty string)."""
    out: list[str] = []
    i = 0
    while i < len(ops):
        op = ops[i]
        said = limit is None or len(out) < limit
        if op.kind == "write":
            j = i
            while j < len(ops) and ops[j].kind == "write" and ops[j].request_id == op.request_id:
                j += 1
            if j - i > 1:
                out.append(_writes(ops[i:j], lang, labels) if said else "")
                i = j
                continue
        if not _silent(op):
            out.append(describe_op(op, lang, labels, vocab, block_size) if said else "")
        i += 1
    return out
