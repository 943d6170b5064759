"""What the engine did, in words — generated from the op records, in English and 中文.

``describe_op`` says one op (the "step into" view); ``narrate_ops`` says a whole step, folding
runs of K/V writes into one sentence.
"""
from __future__ import annotations

from collections.abc import Sequence

from blockviz.scenario.tokens import Vocabulary
from blockviz.teach.labels import HashLabels, token_text

MAX_IDS = 16  # a sentence names at most this many blocks


def _ids(ids: Sequence[int]) -> str:
    if len(ids) <= MAX_IDS:
        return ", ".join(str(i) for i in ids)
    shown = ", ".join(str(i) for i in ids[:MAX_IDS - 2])
    return f"{shown}, … {ids[-1]} ({len(ids)})"


def _blk(ids: Sequence[int]) -> str:
    return f"block {ids[0]}" if len(ids) == 1 else f"blocks {_ids(ids)}"


def _hs(hashes, labels: HashLabels) -> str:
    return ", ".join(labels(h) for h in hashes)


def describe_op(op, lang: str, labels: HashLabels, vocab: Vocabulary | None = None,
                block_size: int = 0) -> str:
    zh = lang == "zh"
    k = op.kind
    if k == "arrive":
        rid = op.request_id
        return f"请求 {rid} 到达，进入等待队列。" if zh else f"{rid} arrives and joins the waiting queue."
    if k == "lookup":
        rid, hits = op.request_id, op.block_ids
        limit, n_hashes = op.hit_tokens_limit, op.num_block_hashes
        capped = block_size and len(hits) == limit // block_size and n_hashes > len(hits)
        if not hits:
            base = (f"get_computed_blocks({rid})：前缀 hash 表里没有它的第一个块，没有命中。" if zh else
                    f"get_computed_blocks({rid}): its first block is not in the hash table — no hit.")
        else:
            n = len(hits) * block_size if block_size else "?"
            base = (f"get_computed_blocks({rid})：按 hash 链从头查找，命中 {len(hits)} 个块"
                    f"（块 {_ids(hits)}，共 {n} 个 token）。" if zh else
                    f"get_computed_blocks({rid}): walking its hash chain from the start, "
                    f"{len(hits)} block(s) hit ({_blk(hits)}, {n} tokens).")
        if capped:
            base += (f" 命中最多只能到 {limit} 个 token（num_tokens − 1）：最后一个 token 必须重新计算，"
                     f"才能得到它的 logits。" if zh else
                     f" The hit may cover at most {limit} tokens (num_tokens − 1): the last token "
                     f"must be computed to get its logits.")
        return base
    if k == "alloc_failed":
        rid, need, free = op.request_id, op.blocks_needed, op.blocks_free
        if op.full_sequence:
            return (f"allocate_slots({rid}) 返回 None：接纳时整个序列都必须放得下"
                    f"（full_sequence_must_fit），需要 {need} 个空闲块，只有 {free} 个。"
                    f"什么都没改变，它留在等待队列最前面。" if zh else
                    f"allocate_slots({rid}) returns None: at admission the whole sequence must fit "
                    f"(full_sequence_must_fit), which needs {need} free block(s), and {free} are "
                    f"free. Nothing changed; it stays first in line.")
        return (f"allocate_slots({rid}) 返回 None：需要 {need} 个空闲块，只有 {free} 个。"
                f"什么都没改变。" if zh else
                f"allocate_slots({rid}) returns None: it needs {need} free block(s) and "
                f"{free} are free. Nothing changed.")
    if k == "touch":
        ids, removed = op.block_ids, op.removed_from_queue
        s = (f"touch：块 {_ids(ids)} 的 ref_cnt 加 1（共享，不拷贝）。" if zh else
             f"touch: {_blk(ids)} ref_cnt + 1 (shared, not copied).")
        if removed:
            were = "was" if len(removed) == 1 else "were"
            s += (f"其中 {_ids(removed)} 原本空闲但仍带着 hash，现在从空闲队列里取出——"
                  f"这就是“空闲但仍可命中”。" if zh else
                  f" {_ids(removed)} {were} free but still cached, so "
                  f"{'it leaves' if len(removed) == 1 else 'they leave'} the free queue — "
                  f"a hit on free blocks.")
        return s
    if k == "popleft":
        return (f"get_new_blocks：从空闲队列队首取走块 {_ids(op.block_ids)}，ref_cnt 设为 1。" if zh else
                f"get_new_blocks: takes {_blk(op.block_ids)} from the head of the free queue "
                f"(ref_cnt = 1).")
    if k == "evict":
        bid, label = op.block_id, labels(op.block_hash)
        return (f"块 {bid} 还带着 {label}：现在（被重新分配时）才把它从 hash 表删掉——"
                f"惰性淘汰。" if zh else
                f"Block {bid} still carried {label}: it leaves the hash table only now, "
                f"as the block is reused — lazy eviction.")
    if k == "cache":
        ids, hashes = op.block_ids, op.hashes
        return (f"cache_full_blocks：块 {_ids(ids)} 已装满，登记为 {_hs(hashes, labels)}"
                f"（在调度时登记，早于前向计算）。" if zh else
                f"cache_full_blocks: {_blk(ids)} {'is' if len(ids) == 1 else 'are'} full → "
                f"registered as {_hs(hashes, labels)} (at schedule time, before the forward pass).")
    if k == "admit":
        rid, local, ext, new = op.request_id, op.local_hit_tokens, op.external_hit_tokens, op.num_new_tokens
        if zh:
            s = f"{rid} 被接纳运行：本地命中 {local} 个 token"
            s += f"，外部命中 {ext} 个" if ext else ""
            return s + f"，需要计算 {new} 个。"
        s = f"{rid} is admitted: {local} token(s) from the local prefix cache"
        s += f", {ext} from the external tier" if ext else ""
        return s + f", {new} to compute."
    if k == "schedule":
        rid, n = op.request_id, op.num_new_tokens
        if op.decode:
            return (f"{rid} 正在运行，先调度它：为下一个 token 分配槽位（解码）。" if zh else
                    f"{rid} is running, so it is scheduled first: a slot for its next token "
                    f"(a decode).")
        return (f"{rid} 正在运行，先调度它：prefill 的下一块，{n} 个 token（分块 prefill）。" if zh else
                f"{rid} is running, so it is scheduled first: the next chunk of its prefill, "
                f"{n} token(s) (chunked prefill).")
    if k == "preempt":
        return (f"抢占 {op.request_id}：释放它的块（倒序），num_computed_tokens 归零，放回等待队列最前面。"
                if zh else
                f"{op.request_id} is preempted: its blocks are freed (reversed), num_computed_tokens = 0, "
                f"and it goes to the front of the waiting queue.")
    if k == "free":
        return (f"free_blocks（块表倒序）：块 {_ids(op.block_ids)} 的 ref_cnt 各减 1。" if zh else
                f"free_blocks (table reversed): {_blk(op.block_ids)} ref_cnt − 1.")
    if k == "free_head":
        return (f"块 {_ids(op.block_ids)} 没有 hash，不可能被命中 → 放到队首，最先被复用。" if zh else
                f"{_blk(op.block_ids).capitalize()}: no hash, can never hit → to the head, reused first.")
    if k == "free_tail":
        return (f"块 {_ids(op.block_ids)} → 放到队尾，最后才被淘汰；带 hash 的块仍留在 hash 表里。" if zh else
                f"{_blk(op.block_ids).capitalize()}: → to the tail, evicted last; a block with a hash stays "
                f"in the hash table.")
    if k == "reset":
        if op.ok:
            return ("reset_prefix_cache：清空所有 hash，空闲队列顺序不变。" if zh else
                    "reset_prefix_cache: every hash is cleared; the free queue keeps its order.")
        return ("reset_prefix_cache 失败：还有请求持有块，什么都没改变。" if zh else
                "reset_prefix_cache refused: requests still hold blocks, nothing changed.")
    if k == "write":
        rid, bid, offset, toks = op.request_id, op.block_id, op.offset, op.token_ids
        return (f"前向计算把 {rid} 的 {len(toks)} 个 token（{token_text(toks, vocab, 6)}）的 K/V "
                f"写入块 {bid}（从第 {offset} 个槽位开始）。" if zh else
                f"The forward pass writes the K/V of {len(toks)} token(s) of {rid} "
                f"({token_text(toks, vocab, 6)}) into block {bid} from slot {offset}.")
    if k == "load":
        return (f"载入任务把 CPU 缓存层中 {op.request_id} 的 K/V 拷贝进新分配的块 {op.block_id}。" if zh else
                f"A load job copies {op.request_id}'s K/V from the CPU tier into the fresh block "
                f"{op.block_id}.")
    if k == "save":
        return (f"connector 发出存入任务：把 {op.request_id} 的块 {op.block_id}（{labels(op.block_hash)}）"
                f"拷贝到 CPU 缓存层（在之后的某一步完成）。" if zh else
                f"The connector issues a store of block {op.block_id} of {op.request_id} "
                f"({labels(op.block_hash)}) to the CPU tier (done in a later step).")
    if k == "drop":
        return (f"CPU 缓存层已满：按它的淘汰策略丢弃 {labels(op.block_hash)}（BlockRemoved，medium 为 CPU）。"
                if zh else
                f"The CPU tier is full: its eviction policy drops {labels(op.block_hash)} "
                f"(BlockRemoved, medium CPU).")
    if k == "sample":
        return (f"{op.request_id} 采样得到下一个 token：{token_text([op.token_id], vocab)}。" if zh else
                f"{op.request_id} samples its next token: {token_text([op.token_id], vocab)}.")
    if k == "finish":
        rid = op.request_id
        if op.reason == "length":
            return (f"{rid} 达到长度上限（max_tokens 或 max_model_len），结束"
                    f"（FINISHED_LENGTH_CAPPED），它的块随即释放。" if zh else
                    f"{rid} reaches its length limit (max_tokens or max_model_len) and finishes "
                    f"(FINISHED_LENGTH_CAPPED); its blocks are freed at once.")
        return (f"{rid} 被客户端中止，结束（FINISHED_ABORTED）。" if zh else
                f"{rid} is aborted by the client and finishes (FINISHED_ABORTED).")
    if k == "rewind":
        return (f"回到存档 “{op.checkpoint}”：整个引擎状态（包括张量）恢复原样。" if zh else
                f"Rewind to “{op.checkpoint}”: the whole engine state, tensors included, is restored.")
    if k == "restart":
        gen, none_hash = op.generation, op.none_hash.hex()[:12]
        return (f"新的引擎进程（第 {gen} 代）：GPU 缓存从空开始，NONE_HASH = {none_hash}…"
                if zh else
                f"A new engine process (generation {gen}): the GPU cache starts empty, "
                f"NONE_HASH = {none_hash}…")
    if k == "verify":
        rid, hit, diff, dev = op.request_id, op.hit_tokens, op.max_abs_diff, op.device
        same = "逐位相同" if diff == 0 else f"最大差 {diff:.2e}"
        return (f"验证：{rid} 复用 {hit} 个 token 的缓存算出的注意力输出，与从头重新计算的结果{same}"
                f"（{dev}）。" if zh else
                f"Check: {rid}'s attention output computed from {hit} cached tokens "
                f"{'equals' if diff == 0 else f'differs by at most {diff:.2e} from'} a from-scratch "
                f"recomputation{' bit for bit' if diff == 0 else ''} ({dev}).")
    return k


def schedule_line(es, lang: str) -> str:
    """One engine step in a line: "A: 1 decode token · B: 2 new (8 hit) · budget 11/8192",
    then who was preempted and who finished."""
    zh = lang == "zh"
    parts = []
    for s in es.scheduled:
        n, rid = s.num_tokens, s.request_id
        if s.decode:
            parts.append(f"{rid}：解码 {n} 个 token" if zh else
                         f"{rid}: {n} decode token{'s' if n != 1 else ''}")
            continue
        hit = s.local_hit_tokens + s.external_hit_tokens
        what = ("恢复" if s.resumed else "新") if s.admitted else "续"
        if not zh:
            what = ("resumed" if s.resumed else "new") if s.admitted else "more"
        chunk = not s.samples
        if zh:
            txt = f"{rid}：{what}{'（分块）' if chunk else ''} {n} 个 token"
            if hit:
                txt += f"（命中 {hit}）"
        else:
            txt = f"{rid}: {n} {what}{' (a chunk)' if chunk else ''}"
            if hit:
                txt += f" ({hit} hit)"
        parts.append(txt)
    if not parts:
        parts.append("没有调度任何请求" if zh else "nothing scheduled")
    parts.append(f"预算 {es.num_scheduled_tokens}/{es.token_budget}" if zh else
                 f"budget {es.num_scheduled_tokens}/{es.token_budget}")
    line = " · ".join(parts)
    if es.preempted:
        line += (f" · 抢占 {', '.join(es.preempted)}" if zh else
                 f" · preempted {', '.join(es.preempted)}")
    if es.finished:
        line += (f" · 结束 {', '.join(es.finished)}" if zh else
                 f" · finished {', '.join(es.finished)}")
    return line


def schedule_lines(engine_steps, lang: str) -> list[str]:
    """Each engine step of an event, numbered when there are several."""
    lines = [schedule_line(es, lang) for es in engine_steps]
    if len(lines) > 1:
        word = "第 {} 步：" if lang == "zh" else "step {}: "
        lines = [word.format(i + 1) + ln for i, ln in enumerate(lines)]
    return lines


def _silent(op) -> bool:
    """An op that did nothing worth a sentence (touching no blocks), or a plain decode (the
    schedule line says it)."""
    return ((op.kind == "schedule" and op.decode)
            or (op.kind in ("touch", "popleft", "free") and not op.block_ids))


def narrate_ops(ops: Sequence, lang: str, labels: HashLabels,
                vocab: Vocabulary | None = None, block_size: int = 0) -> list[str]:
    """One sentence per op, runs of writes by one request folded into one sentence."""
    out: list[str] = []
    i = 0
    zh = lang == "zh"
    while i < len(ops):
        op = ops[i]
        if op.kind == "write":
            j = i
            while j < len(ops) and ops[j].kind == "write" and ops[j].request_id == op.request_id:
                j += 1
            if j - i > 1:
                blocks = [o.block_id for o in ops[i:j]]
                n = sum(len(o.token_ids) for o in ops[i:j])
                rid = op.request_id
                out.append(f"前向计算把 {rid} 的 {n} 个 token 的 K/V 写入块 {_ids(blocks)}。" if zh
                           else f"The forward pass writes the K/V of {n} tokens of {rid} into "
                                f"blocks {_ids(blocks)}.")
                i = j
                continue
        if not _silent(op):
            out.append(describe_op(op, lang, labels, vocab, block_size))
        i += 1
    return out
