"""Short, faithful pseudocode of the vLLM 0.33 functions the ops come from, and which line each op
executes (the "step into" view highlights it).

The pseudocode keeps vLLM's names (``free_block_queue.popleft_n``, ``cached_block_hash_to_block``)
so a learner can open vllm/v1/core/block_pool.py next to it. ``free_blocks`` has two variants: the
split order of vLLM >= 0.24 and the classic append-only order of vLLM <= 0.23.
"""
from __future__ import annotations

from itertools import groupby

from blockviz.core.request import vllm_status
from blockviz.i18n import t
from blockviz.render.groups import group_title
from blockviz.render.theme import esc
from blockviz.teach.labels import token_text

PSEUDOCODE: dict[str, tuple[str, ...]] = {
    "add_request": (
        "def add_request(request):                  # Scheduler",
        "    # request.block_hashes: computed in Request.__init__ (block hasher)",
        "    waiting.append(request)",
    ),
    "get_computed_blocks": (
        "def get_computed_blocks(request):          # KVCacheManager",
        "    max_hit = request.num_tokens - 1       # last token: compute",
        "    hits = []",
        "    for h in request.block_hashes[:max_hit // block_size]:",
        "        block = cached_block_hash_to_block.get(h)",
        "        if block is None: break            # first miss: stop",
        "        hits.append(block)",
        "    return hits, len(hits) * block_size",
    ),
    "allocate_slots": (
        "def allocate_slots(request, num_new_tokens, hits):  # KVCacheManager",
        "    need = num_new_blocks + hits_now_in_free_queue",
        "    if need > block_pool.get_num_free_blocks():",
        "        return None                        # nothing changes",
        "    block_pool.touch(hits)                 # share: ref_cnt += 1",
        "    new_blocks = block_pool.get_new_blocks(num_new_blocks)",
        "    req_blocks += hits + new_blocks",
        "    block_pool.cache_full_blocks(request, req_blocks, ...)",
        "    return new_blocks                      # before the forward pass",
    ),
    "get_new_blocks": (
        "def get_new_blocks(n):                     # BlockPool",
        "    blocks = free_block_queue.popleft_n(n) # from the head",
        "    for block in blocks:",
        "        if block.block_hash is not None:   # lazy eviction:",
        "            _maybe_evict_cached_block(block)   # hash leaves now",
        "        block.ref_cnt = 1",
        "    return blocks",
    ),
    "touch": (
        "def touch(blocks):                         # BlockPool: a hit",
        "    for block in blocks:",
        "        if block.is_null: continue",
        "        if block.ref_cnt == 0:",
        "            free_block_queue.remove(block) # free but cached: O(1)",
        "        block.ref_cnt += 1                 # shared, not copied",
    ),
    "cache_full_blocks": (
        "def cache_full_blocks(request, blocks, num_cached, num_full):",
        "    for i in range(num_cached, num_full):",
        "        block = blocks[i]",
        "        if block.is_null: continue",
        "        block.block_hash = request.block_hashes[i]",
        "        cached_block_hash_to_block.insert(block.block_hash, block)",
        "    kv_events.append(BlockStored(...))     # no de-duplication",
    ),
    "free_blocks_split": (
        "def free_blocks(ordered_blocks):           # vLLM >= 0.24",
        "    for block in ordered_blocks:           # a table, reversed",
        "        if block.is_null: continue",
        "        block.ref_cnt -= 1",
        "    freed = [b for b in ordered_blocks if b.ref_cnt == 0]",
        "    to_head = [b for b in freed if b.block_hash is None]",
        "    to_tail = [b for b in freed if b.block_hash is not None]",
        "    free_block_queue.prepend_n(to_head)    # no hash: reused first",
        "    free_block_queue.append_n(to_tail)     # cached: evicted last",
    ),
    "free_blocks_append": (
        "def free_blocks(ordered_blocks):           # vLLM <= 0.23",
        "    for block in ordered_blocks:           # a table, reversed",
        "        block.ref_cnt -= 1",
        "    freed = [b for b in ordered_blocks if b.ref_cnt == 0 and not b.is_null]",
        "    free_block_queue.append_n(freed)       # all to the tail",
    ),
    "reset_prefix_cache": (
        "def reset_prefix_cache():                  # BlockPool",
        "    if num_gpu_blocks - get_num_free_blocks() != 1:   # blocks held",
        "        return False                       # nothing changes",
        "    cached_block_hash_to_block = {}",
        "    for block in blocks: block.reset_hash()   # queue order kept",
        "    kv_events.append(AllBlocksCleared())",
        "    return True",
    ),
    "schedule": (
        "def schedule():                            # Scheduler: one step",
        "    for request in running:                # first, while the budget lasts",
        "        n = min(new_tokens(request), token_budget)   # a decode, or a chunk",
        "        while allocate_slots(request, n) is None:",
        "            victim = running[-1]           # FCFS; priority: the lowest",
        "            _preempt_request(victim)",
        "            if victim is request: break",
        "        token_budget -= n",
        "    if not preempted:",
        "        while waiting and token_budget > 0:   # in queue order",
        "            request = waiting[0]",
        "            hits, n = get_computed_blocks(request)",
        "            n_ext = connector.get_num_new_matched_tokens(request, n)",
        "            if allocate_slots(request, ...) is None: break",
        "            running.append(waiting.pop(0))",
    ),
    "_preempt_request": (
        "def _preempt_request(request):             # Scheduler",
        "    kv_cache_manager.free(request)         # free_blocks(reversed)",
        "    request.status = PREEMPTED",
        "    request.num_computed_tokens = 0        # recompute from scratch",
        "    waiting.prepend_request(request)       # FCFS: front of the line",
    ),
    "execute_model": (
        "def execute_model(scheduled):              # GPUModelRunner",
        "    for slot, token in zip(slot_mapping, tokens):",
        "        kv_cache[layer][:, slot] = k(token), v(token)",
        "    logits = attention(q, kv_cache[block_table])",
        "    return sample(logits)",
    ),
    "update_from_output": (
        "def update_from_output(output):            # Scheduler",
        "    for request, token in output:",
        "        request.append_output_token_ids(token)  # full block: hash",
        "        if request.is_finished():",
        "            finish_requests(request)",
    ),
    "finish_requests": (
        "def finish_requests(request, status):      # Scheduler",
        "    request.status = status                # FINISHED_STOPPED, _ABORTED...",
        "    connector.request_finished(request, block_ids)   # (False, None): free now",
        "    kv_cache_manager.free(request)         # free_blocks(reversed)",
    ),
    "connector": (
        "class OffloadingConnectorScheduler:        # vLLM 0.33, CPU tier",
        "    def get_num_new_matched_tokens(req, n): ...  # (tokens|None, load_async)",
        "    def update_state_after_alloc(req, blocks, n): ...  # load job",
        "    def build_connector_meta(output): ...  # store full prompt blocks",
        "class CPUOffloadingManager:                # kv_offload/cpu/manager.py",
        "    def prepare_store(keys): ...           # full: evict (BlockRemoved CPU)",
    ),
    "verify": (
        "def verify_hit(request, hit_tokens):       # blockviz's check",
        "    out_hit = attention(q, cached K/V + new K/V)",
        "    out_full = attention(q, K/V recomputed for every token)",
        "    assert max_abs(out_hit - out_full) <= tolerance(device)",
    ),
    "engine": (
        "# blockviz engine events",
        "rewind(name):  restore everything saved at checkpoint(name)",
        "restart():     a new process: empty GPU cache, new NONE_HASH",
    ),
}


# op kind -> (pseudocode function, 0-based line it executes); a callable picks by the op's fields.
# The free ops run in ``free_blocks_split`` or ``free_blocks_append`` (the run's free order).
OP_LINES = {
    "arrive": ("add_request", 2),
    "lookup": lambda op: ("get_computed_blocks", 6 if op.block_ids else 5),
    "alloc_failed": ("allocate_slots", 3),
    "touch": lambda op: ("touch", 4 if op.removed_from_queue else 5),
    "popleft": ("get_new_blocks", 1),
    "evict": ("get_new_blocks", 4),
    "cache": ("cache_full_blocks", 5),
    "reset": lambda op: ("reset_prefix_cache", 3 if op.ok else 2),
    "admit": ("schedule", 14),
    "schedule": ("schedule", 3),
    "preempt": ("_preempt_request", 4),
    "write": ("execute_model", 2),
    "sample": ("update_from_output", 2),
    "finish": ("finish_requests", 1),
    "load": ("connector", 2),
    "save": ("connector", 3),
    "drop": ("connector", 5),
    "verify": ("verify", 3),
    "rewind": ("engine", 1),
    "restart": ("engine", 2),
}
# the free ops' lines in each variant of free_blocks: (split, append)
FREE_LINES = {"free": (3, 2), "free_head": (7, 7), "free_tail": (8, 4)}


def op_line(op, free_order: str = "split") -> tuple[str, int]:
    """(pseudocode function, 0-based line) that ``op`` executes."""
    if op.kind in FREE_LINES:
        append = free_order == "append"
        return ("free_blocks_append" if append else "free_blocks_split"), FREE_LINES[op.kind][append]
    where = OP_LINES.get(op.kind, ("engine", 0))
    return where(op) if callable(where) else where


def pseudocode_html(op, *, free_order: str = "split", vllm_function: str = "") -> str:
    fn, line = op_line(op, free_order)
    lines = PSEUDOCODE[fn]
    code = "".join(
        f'<div class="bv-cur" data-line="{j}" aria-current="true">{esc(text)}</div>' if j == line
        else f'<div data-line="{j}">{esc(text)}</div>' for j, text in enumerate(lines))
    caption = f'<div class="bv-fn">{esc(vllm_function)}</div>' if vllm_function else ""
    return (f'<div class="bv bv-panel" data-fn="{esc(fn)}" data-line="{line}">{caption}'
            f'<div class="bv-code">{code}</div></div>')


# -- the ops panel: each op of a step one short line, after vLLM's call ---------------------------
# Runs of at least this many ops of one call (not the pool's own: those are the lesson) fold into
# one line when the panel is short of room (board.js decides; the markup carries both).
GROUP_RUN = 3
# At most this many op lines a step, then how many more: a 10,000-step decode event runs tens of
# thousands of ops, and writing them all cost the server 20 CPU-seconds for one preview
MAX_OP_LINES = 400
# At most this many block chips on one op line (a hit on a 4,000-block prefix), then how many more
MAX_CHIPS = 32
FOLDABLE = frozenset({"arrive", "admit", "schedule", "write", "sample", "finish", "evict", "save",
                      "load", "drop", "verify", "lookup"})


def _ids(ids) -> str:
    """Block ids as chips the board links to the blocks (hover one, every panel lights it)."""
    ids = list(ids)
    chips = " ".join(f'<i data-block="{int(b)}">{int(b)}</i>' for b in ids[:MAX_CHIPS])
    return chips if len(ids) <= MAX_CHIPS else f"{chips} … +{len(ids) - MAX_CHIPS}"


def _chips_in(key: str, lang: str, field: str, ids, **fields) -> str:
    """``key``'s sentence, escaped, with the chips of ``ids`` as its field ``field``."""
    return esc(t(key, lang, **{field: "\0"}, **fields)).replace("\0", _ids(ids))


def _ref_text(ids, refs: list[int], delta: int, lang: str) -> str:
    """``ref 1→2`` when the blocks all had one count (``refs``: the counts before, updated here),
    else ``ref +1 each``."""
    before = {refs[b] for b in ids if 0 < b < len(refs)}
    for b in ids:
        if 0 < b < len(refs):
            refs[b] = max(0, refs[b] + delta)
    if len(before) == 1:
        a = before.pop()
        return t("ol_ref", lang, a=a, b=max(0, a + delta))
    return t("ol_ref_up" if delta > 0 else "ol_ref_down", lang)


def _op_line(op, lang: str, labels, vocab, block_size: int, refs: list[int]) -> tuple[str, str]:
    """(call, effect) of one op: the call in vLLM's names (code), the effect as HTML."""
    k, rid = op.kind, esc(getattr(op, "request_id", ""))
    if k == "arrive":
        return f"add_request({rid})", esc(t("ol_arrive", lang, rid=rid))
    if k == "lookup":
        call = f"get_computed_blocks({rid})"
        if labels.hybrid:
            n, spb = op.num_hit_tokens, op.shared_prefix_boundary
            eff = t("ol_lookup_groups", lang, n=n) if n else t("ol_lookup_miss", lang)
            return call, esc(eff + (t("ol_lookup_short", lang, spb=spb) if spb > n else ""))
        if not op.block_ids:
            return call, esc(t("ol_lookup_miss", lang))
        n = len(op.block_ids) * block_size if block_size else "?"
        eff = _chips_in("ol_lookup_hit", lang, "ids", op.block_ids, n=n)
        if block_size and len(op.block_ids) == op.hit_tokens_limit // block_size \
                and op.num_block_hashes > len(op.block_ids):
            eff += esc(t("ol_lookup_capped", lang, limit=op.hit_tokens_limit))
        return call, eff
    if k == "alloc_failed":
        return f"allocate_slots({rid})", esc(t("ol_alloc_failed", lang, need=op.blocks_needed,
                                               free=op.blocks_free))
    if k == "touch":
        eff = esc(_ref_text(op.block_ids, refs, +1, lang))
        if op.removed_from_queue:
            eff += esc(t("ol_touch_free", lang))
        return f"touch({_ids(op.block_ids)})", eff
    if k == "popleft":
        for b in op.block_ids:
            if 0 < b < len(refs):
                refs[b] = 1
        return f"get_new_blocks({len(op.block_ids)})", _chips_in("ol_popleft", lang, "ids", op.block_ids)
    if k == "evict":
        return (f"_maybe_evict_cached_block({_ids([op.block_id])})",
                esc(t("ol_evict", lang, label=labels(op.block_hash))))
    if k == "cache":
        eff = ", ".join(f'{_ids([b])}→<b class="bv-hl">{esc(labels(h))}</b>'
                        for b, h in zip(op.block_ids, op.hashes))
        masked = getattr(op, "masked", ())
        if masked:
            eff += (" · " if eff else "") + _chips_in("ol_cache_masked", lang, "ids", masked)
        return f"cache_full_blocks({rid})", eff
    if k == "admit":
        ext = op.external_hit_tokens
        key = "ol_admit_ext" if ext else "ol_admit"
        return (f"running.append({rid})", esc(t(key, lang, rid=rid, local=op.local_hit_tokens,
                                                ext=ext, new=op.num_new_tokens)))
    if k == "schedule":
        return "schedule()", esc(t("ol_schedule_decode" if op.decode else "ol_schedule_chunk", lang,
                                   rid=rid, n=op.num_new_tokens))
    if k == "preempt":
        return f"_preempt_request({rid})", esc(t("ol_preempt", lang, rid=rid))
    if k == "free":
        return f"free_blocks({_ids(op.block_ids)})", esc(_ref_text(op.block_ids, refs, -1, lang))
    if k in ("free_head", "free_tail"):
        call = "prepend_n" if k == "free_head" else "append_n"
        return f"{call}({_ids(op.block_ids)})", esc(t(f"ol_{k}", lang))
    if k == "reset":
        return "reset_prefix_cache()", esc(t("ol_reset_ok" if op.ok else "ol_reset_no", lang))
    if k == "write":
        key = "ol_write_one" if len(op.token_ids) == 1 else "ol_write"      # ("1 token", not "1 tokens")
        return "execute_model", _chips_in(key, lang, "bid", [op.block_id], rid=rid, n=len(op.token_ids))
    if k == "load":
        return "update_state_after_alloc", _chips_in("ol_load", lang, "bid", [op.block_id], rid=rid)
    if k == "save":
        return "build_connector_meta", _chips_in("ol_save", lang, "bid", [op.block_id],
                                                 label=labels(op.block_hash))
    if k == "drop":
        return "prepare_store", esc(t("ol_drop", lang, label=labels(op.block_hash)))
    if k == "sample":
        return "update_from_output", esc(t("ol_sample", lang, rid=rid,
                                           token=token_text([op.token_id], vocab)))
    if k == "finish":
        return f"finish_requests({rid})", esc(vllm_status("finished", op.reason))
    if k == "verify":
        diff = op.max_abs_diff
        return "(blockviz) verify", esc(t("ol_verify_same", lang, rid=rid) if diff == 0
                                        else t("ol_verify_diff", lang, rid=rid, diff=f"{diff:.1e}"))
    if k == "remove_skipped":
        call = f"remove_skipped_blocks({rid})"
        if not op.block_ids:
            return call, esc(t("ol_skipped_hit", lang, n=len(op.block_indices)))
        return call, (_ids(op.block_ids) + " · "
                      + esc(t("ol_skipped", lang, slots=", ".join(map(str, op.block_indices)))))
    if k in ("rewind", "restart"):
        refs[:] = [0] * len(refs)           # (the next step's counts are the checkpoint's)
        call = f"rewind({esc(op.checkpoint)})" if k == "rewind" else "restart()"
        return call, esc(t(f"ol_{k}", lang))
    return esc(k), ""


def ops_html(ops, lang: str, labels, *, vocab=None, block_size: int = 0,
             ref_before: tuple[int, ...] = (), max_lines: int | None = None) -> str:
    """The ops panel of a step: each op one short line, ``call  effect`` (vLLM's function and what
    it did: ``touch(1, 2)  ref 1→2``), numbered as "step into" walks them, its blocks linked (the
    whole sentences are behind "why?"). A run of ``GROUP_RUN`` or more ops of one call that is not the pool's
    own (writes, samples, admissions) also has a folded line (``6 × execute_model``, hidden) that
    the board shows instead when the panel is short of room. ``max_lines``: at most that many
    lines, then how many more (a big pool's step can run hundreds)."""
    refs = list(ref_before)
    shown = min(len(ops), MAX_OP_LINES if max_lines is None else max_lines)
    lines = [_op_line(op, lang, labels, vocab, block_size, refs) for op in ops[:shown]]   # (in order:
    # the ref counts a line shows are those its earlier ops left; later ops change no shown line)
    items: list[str] = []
    run = 0
    for _, same in groupby(range(shown), lambda i: ops[i].kind):     # a run of one kind: one call
        j, *rest = same
        end = j + 1 + len(rest)
        name = lines[j][0].split("(", 1)[0]
        folded = end - j >= GROUP_RUN and ops[j].kind in FOLDABLE
        if folded:
            run += 1
            ids = [b for op in ops[j:end] for b in (getattr(op, "block_ids", None)
                                                       or ([op.block_id] if hasattr(op, "block_id")
                                                           else []))]
            rids = list(dict.fromkeys(getattr(op, "request_id", "") for op in ops[j:end]))
            who = esc(", ".join(r for r in rids if r))
            what = " · ".join(x for x in (who, _ids(ids)) if x)
            items.append(f'<li class="bv-opl bv-opg" data-bv="op" data-bv-run="{run}" '
                         f'data-bv-index="{j}" hidden><span class="bv-opn">{j + 1}–{end}</span>'
                         f'<code class="bv-call">{esc(t("ol_group", lang, n=end - j))} {esc(name)}'
                         f'</code> <span class="bv-eff">{what}</span></li>')
        for i in range(j, end):
            call, eff = lines[i]
            group = ""
            if labels.hybrid and getattr(ops[i], "group", None) is not None:
                g = ops[i].group         # the group it touched, named in full in its title
                group = (f'<span class="bv-opg-tag" data-bv-group="{g}" '
                         f'title="{esc(group_title(g, labels.groups[g], lang))}">g{g}</span>')
            member = f' data-bv-member="{run}"' if folded else ""
            items.append(f'<li class="bv-opl" data-bv="op" data-bv-index="{i}"{member}>'
                         f'<span class="bv-opn">{i + 1}</span>{group}<code class="bv-call">{call}</code>'
                         f' <span class="bv-eff">{eff}</span></li>')
    if shown < len(ops):
        items.append(f'<li class="bv-more">… {esc(t("ol_more", lang, n=len(ops) - shown))}</li>')
    return ops_panel(items, len(ops), t("no_ops", lang))


def ops_panel(items: list[str], n: int, empty: str) -> str:
    """The ops panel around its ``<li>`` lines (``n`` ops in all; none: the words ``empty``)."""
    body = (f'<ol class="bv-oplist">{"".join(items)}</ol>' if n
            else f'<div class="bv-muted">{esc(empty)}</div>')
    return f'<div class="bv bv-panel bv-opsp" data-bv="ops" data-n="{n}">{body}</div>'
