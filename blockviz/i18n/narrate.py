"""The words of narration: what the engine did, one sentence per op record (``nr_<kind>``), and the
engine steps' schedule lines (``sl_*``) — the sentences ``blockviz.teach.narrate`` fills in.

Fields: ``rid`` a request id; ``ids`` a list of block ids (``id_list``); ``blocks`` / ``Blocks``
"block 3" or "blocks 1, 2" (``nr_blocks_*``, chosen by count); ``label`` / ``hashes`` hash labels.
A key ending in ``_one`` / ``_many`` has a form for one thing and one for more (``tn``)."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    # "block 3" / "blocks 1, 2": inside a sentence, and at its start
    "nr_blocks_one": ("block {ids}", "块 {ids}"),
    "nr_blocks_many": ("blocks {ids}", "块 {ids}"),
    "nr_Blocks_one": ("Block {ids}", "块 {ids}"),
    "nr_Blocks_many": ("Blocks {ids}", "块 {ids}"),
    # a hybrid model's KV-cache group, named before the sentence of an op about it
    "nr_group_tag": ("[{group}] ", "［{group}］"),
    "nr_group_full_attention": ("group {g}, full attention", "组 {g}，全注意力"),
    "nr_group_sliding_window": ("group {g}, sliding window {n}", "组 {g}，滑动窗口 {n}"),
    "nr_group_chunked_local_attention": ("group {g}, chunked local {n}", "组 {g}，分块局部注意力 {n}"),
    # one sentence per op record
    "nr_arrive": ("{rid} arrives and joins the waiting queue.", "请求 {rid} 到达，进入等待队列。"),
    "nr_lookup_miss": ("get_computed_blocks({rid}): its first block is not in the hash table — no hit.",
                       "get_computed_blocks({rid})：前缀 hash 表里没有它的第一个块，没有命中。"),
    "nr_lookup_hit": ("get_computed_blocks({rid}): walking its hash chain from the start, {k} block(s) "
                      "hit ({blocks}, {n} tokens).",
                      "get_computed_blocks({rid})：按 hash 链从头查找，命中 {k} 个块（{blocks}，共 {n} 个 "
                      "token）。"),
    "nr_lookup_capped": (" The hit may cover at most {limit} tokens (num_tokens − 1): the last token "
                         "must be computed to get its logits.",
                         " 命中最多只能到 {limit} 个 token（num_tokens − 1）：最后一个 token 必须重新计算，"
                         "才能得到它的 logits。"),
    "nr_lookup_groups": ("get_computed_blocks({rid}): the hit every group holds is {n} tokens "
                         "({blocks}).",
                         "get_computed_blocks({rid})：所有组都持有的命中是 {n} 个 token（{blocks}）。"),
    "nr_lookup_groups_miss": ("get_computed_blocks({rid}): no hit that every group holds.",
                              "get_computed_blocks({rid})：没有所有组都持有的命中。"),
    "nr_lookup_short": (" One group alone would reach {spb} tokens, but a hit must be in every group, "
                        "so it stops at {n}; {spb} becomes {rid}'s shared_prefix_boundary.",
                        " 单看某一组能命中 {spb} 个 token，可命中必须每个组都有，所以停在 {n}；{spb} 成为 "
                        "{rid} 的 shared_prefix_boundary。"),
    "nr_alloc_failed_admit": ("allocate_slots({rid}) returns None: at admission the whole sequence must "
                              "fit (full_sequence_must_fit), which needs {need} free block(s), and {free} "
                              "are free. Nothing changed; it stays first in line.",
                              "allocate_slots({rid}) 返回 None：接纳时整个序列都必须放得下"
                              "（full_sequence_must_fit），需要 {need} 个空闲块，只有 {free} 个。"
                              "什么都没改变，它留在等待队列最前面。"),
    "nr_alloc_watermark": (" The admission watermark keeps {w} more block(s) free while other "
                           "requests run, so it needs {total}.",
                           "有其他请求在运行时，接纳水位线还要留出 {w} 个空闲块，"
                           "所以它一共需要 {total} 个。"),
    "nr_alloc_failed": ("allocate_slots({rid}) returns None: it needs {need} free block(s) and {free} "
                        "are free. Nothing changed.",
                        "allocate_slots({rid}) 返回 None：需要 {need} 个空闲块，只有 {free} 个。"
                        "什么都没改变。"),
    "nr_touch": ("touch: {blocks} ref_cnt + 1 (shared, not copied).",
                 "touch：{blocks} 的 ref_cnt 加 1（共享，不拷贝）。"),
    "nr_touch_free_one": (" {ids} was free but still cached, so it leaves the free queue — a hit on "
                          "free blocks.",
                          "其中 {ids} 原本空闲但仍带着 hash，现在从空闲队列里取出——"
                          "这就是“空闲但仍可命中”。"),
    "nr_touch_free_many": (" {ids} were free but still cached, so they leave the free queue — a hit on "
                           "free blocks.",
                           "其中 {ids} 原本空闲但仍带着 hash，现在从空闲队列里取出——"
                           "这就是“空闲但仍可命中”。"),
    "nr_popleft": ("get_new_blocks: takes {blocks} from the head of the free queue (ref_cnt = 1).",
                   "get_new_blocks：从空闲队列队首取走{blocks}，ref_cnt 设为 1。"),
    "nr_evict": ("Block {bid} still carried {label}: it leaves the hash table only now, as the block is "
                 "reused — lazy eviction.",
                 "块 {bid} 还带着 {label}：现在（被重新分配时）才把它从 hash 表删掉——惰性淘汰。"),
    "nr_cache_masked_one": ("cache_full_blocks: {blocks} is full but stays uncached: with retention 0 "
                            "a sliding window keeps only blocks a later prompt can resume from.",
                            "cache_full_blocks：{blocks} 已装满，但不登记：retention 为 0 时，滑动窗口只保留"
                            "后来的 prompt 能接着用的块。"),
    "nr_cache_masked_many": ("cache_full_blocks: {blocks} are full but stay uncached: with retention 0 "
                             "a sliding window keeps only blocks a later prompt can resume from.",
                             "cache_full_blocks：{blocks} 已装满，但不登记：retention 为 0 时，滑动窗口只"
                             "保留后来的 prompt 能接着用的块。"),
    "nr_cache_also_masked": (" ({blocks} stays uncached: the retention mask.)",
                             "（{blocks} 不登记：retention 掩码。）"),
    "nr_skipped_window_one": ("remove_skipped_blocks({rid}): {blocks} left the sliding window; the null "
                              "block takes its slot ({slots}) and the block is freed.",
                              "remove_skipped_blocks({rid})：{blocks} 滑出了窗口；null block 占据它的位置"
                              "（第 {slots} 格），这个块随即释放。"),
    "nr_skipped_window_many": ("remove_skipped_blocks({rid}): {blocks} left the sliding window; the null "
                               "block takes their slots ({slots}) and they are freed, the highest slot "
                               "first.",
                               "remove_skipped_blocks({rid})：{blocks} 滑出了窗口；null block 占据它们的位置"
                               "（第 {slots} 格），它们随即释放，靠后的格先放。"),
    "nr_skipped_chunk_one": ("remove_skipped_blocks({rid}): {blocks} belongs to a finished chunk; the "
                             "null block takes its slot ({slots}) and the block is freed.",
                             "remove_skipped_blocks({rid})：{blocks} 属于已经结束的分块；null block 占据它的"
                             "位置（第 {slots} 格），这个块随即释放。"),
    "nr_skipped_chunk_many": ("remove_skipped_blocks({rid}): {blocks} belong to a finished chunk; the "
                              "null block takes their slots ({slots}) and they are freed, the highest "
                              "slot first.",
                              "remove_skipped_blocks({rid})：{blocks} 属于已经结束的分块；null block 占据它们"
                              "的位置（第 {slots} 格），它们随即释放，靠后的格先放。"),
    "nr_skipped_hit_one": ("{rid}'s table starts with the null block: the hit's first block lies outside "
                           "the window, so it is neither needed nor touched.",
                           "{rid} 的块表以 null block 开头：命中的第一个块在窗口之外，用不着，也不 touch。"),
    "nr_skipped_hit_many": ("{rid}'s table starts with {n} null blocks: the hit's first {n} blocks lie "
                            "outside the window, so they are neither needed nor touched.",
                            "{rid} 的块表以 {n} 个 null block 开头：命中的前 {n} 个块在窗口之外，用不着，"
                            "也不 touch。"),
    "nr_cache_one": ("cache_full_blocks: {blocks} is full → registered as {hashes} (at schedule time, "
                     "before the forward pass).",
                     "cache_full_blocks：{blocks} 已装满，登记为 {hashes}（在调度时登记，早于前向计算）。"),
    "nr_cache_many": ("cache_full_blocks: {blocks} are full → registered as {hashes} (at schedule time, "
                      "before the forward pass).",
                      "cache_full_blocks：{blocks} 已装满，登记为 {hashes}（在调度时登记，早于前向计算）。"),
    "nr_admit": ("{rid} is admitted: {local} token(s) from the local prefix cache{external}, {new} to "
                 "compute.",
                 "{rid} 被接纳运行：本地命中 {local} 个 token{external}，需要计算 {new} 个。"),
    "nr_admit_external": (", {ext} from the external tier", "，外部命中 {ext} 个"),
    "nr_schedule_decode": ("{rid} is running, so it is scheduled first: a slot for its next token "
                           "(a decode).",
                           "{rid} 正在运行，先调度它：为下一个 token 分配槽位（解码）。"),
    "nr_schedule_chunk": ("{rid} is running, so it is scheduled first: the next chunk of its prefill, "
                          "{n} token(s) (chunked prefill).",
                          "{rid} 正在运行，先调度它：prefill 的下一块，{n} 个 token（分块 prefill）。"),
    "nr_preempt": ("{rid} is preempted: its blocks are freed (reversed), num_computed_tokens = 0, and "
                   "it goes to the front of the waiting queue.",
                   "抢占 {rid}：释放它的块（倒序），num_computed_tokens 归零，放回等待队列最前面。"),
    "nr_preempt_groups": ("{rid} is preempted: its tables are freed group by group (group 0 first, each "
                          "reversed, leading null blocks skipped), num_computed_tokens = 0, and it goes to "
                          "the front of the waiting queue.",
                          "抢占 {rid}：按组释放它的块表（先组 0，每组倒序，跳过开头的 null block），"
                          "num_computed_tokens 归零，放回等待队列最前面。"),
    "nr_free": ("free_blocks (table reversed): {blocks} ref_cnt − 1.",
                "free_blocks（块表倒序）：{blocks} 的 ref_cnt 各减 1。"),
    "nr_free_head": ("{Blocks}: no hash, can never hit → to the head, reused first.",
                     "{Blocks} 没有 hash，不可能被命中 → 放到队首，最先被复用。"),
    "nr_free_tail": ("{Blocks}: → to the tail, evicted last; a block with a hash stays in the hash "
                     "table.",
                     "{Blocks} → 放到队尾，最后才被淘汰；带 hash 的块仍留在 hash 表里。"),
    "nr_reset": ("reset_prefix_cache: every hash is cleared; the free queue keeps its order.",
                 "reset_prefix_cache：清空所有 hash，空闲队列顺序不变。"),
    "nr_reset_refused": ("reset_prefix_cache refused: requests still hold blocks, nothing changed.",
                         "reset_prefix_cache 失败：还有请求持有块，什么都没改变。"),
    "nr_write": ("The forward pass writes the K/V of {n} token(s) of {rid} ({words}) into block {bid} "
                 "from slot {offset}.",
                 "前向计算把 {rid} 的 {n} 个 token（{words}）的 K/V 写入块 {bid}"
                 "（从第 {offset} 个槽位开始）。"),
    "nr_writes_groups_one": ("The forward pass writes the K/V of 1 token of {rid} into every group's "
                             "table: {where}.",
                             "前向计算把 {rid} 的 1 个 token 的 K/V 写入每个组的块表：{where}。"),
    "nr_writes_groups_many": ("The forward pass writes the K/V of {n} tokens of {rid} into every "
                              "group's table: {where}.",
                              "前向计算把 {rid} 的 {n} 个 token 的 K/V 写入每个组的块表：{where}。"),
    "nr_writes_where": ("group {g} → {blocks}", "组 {g} → {blocks}"),
    "nr_writes": ("The forward pass writes the K/V of {n} tokens of {rid} into blocks {ids}.",
                  "前向计算把 {rid} 的 {n} 个 token 的 K/V 写入块 {ids}。"),
    "nr_load": ("A load job copies {rid}'s K/V from the CPU tier into the fresh block {bid}.",
                "载入任务把 CPU 缓存层中 {rid} 的 K/V 拷贝进新分配的块 {bid}。"),
    "nr_save": ("The connector issues a store of block {bid} of {rid} ({label}) to the CPU tier (done in "
                "a later step).",
                "connector 发出存入任务：把 {rid} 的块 {bid}（{label}）拷贝到 CPU 缓存层"
                "（在之后的某一步完成）。"),
    "nr_drop": ("The CPU tier is full: its eviction policy drops {label} (BlockRemoved, medium CPU).",
                "CPU 缓存层已满：按它的淘汰策略丢弃 {label}（BlockRemoved，medium 为 CPU）。"),
    "nr_sample": ("{rid} samples its next token: {token}.", "{rid} 采样得到下一个 token：{token}。"),
    "nr_finish_length": ("{rid} reaches its length limit (max_tokens or max_model_len) and finishes "
                         "(FINISHED_LENGTH_CAPPED); its blocks are freed at once.",
                         "{rid} 达到长度上限（max_tokens 或 max_model_len），结束（FINISHED_LENGTH_CAPPED），"
                         "它的块随即释放。"),
    "nr_finish_stop": ("{rid} stops: it sampled a stop token (FINISHED_STOPPED); its blocks are freed "
                       "at once.",
                       "{rid} 结束：它采样到了停止 token（FINISHED_STOPPED），它的块随即释放。"),
    "nr_finish_abort": ("{rid} is aborted by the client (FINISHED_ABORTED); its blocks are freed at "
                        "once.",
                        "{rid} 被客户端中止（FINISHED_ABORTED），它的块随即释放。"),
    "nr_rewind": ("Rewind to “{name}”: the whole engine state, tensors included, is restored.",
                  "回到存档 “{name}”：整个引擎状态（包括张量）恢复原样。"),
    "nr_restart": ("A new engine process (generation {gen}): the GPU cache starts empty, "
                   "NONE_HASH = {none_hash}…",
                   "新的引擎进程（第 {gen} 代）：GPU 缓存从空开始，NONE_HASH = {none_hash}…"),
    "nr_verify_same": ("Check: {rid}'s attention output computed from {hit} cached tokens equals a "
                       "from-scratch recomputation bit for bit ({dev}), in this toy model.",
                       "验证：{rid} 复用 {hit} 个 token 的缓存算出的注意力输出，与从头重新计算的结果逐位相同"
                       "（{dev}，在这个玩具模型里）。"),
    "nr_verify_diff": ("Check: {rid}'s attention output computed from {hit} cached tokens differs by at "
                       "most {diff} from a from-scratch recomputation ({dev}).",
                       "验证：{rid} 复用 {hit} 个 token 的缓存算出的注意力输出，与从头重新计算的结果最大差 "
                       "{diff}（{dev}）。"),
    # the ops panel: one short line per op, after vLLM's call (``render.pseudocode.op_lines``);
    # {ids} is a list of block ids, {rid} a request, {a}/{b} ref counts before/after
    "ol_arrive": ("waits", "进入等待队列"),
    "ol_lookup_miss": ("no hit", "未命中"),
    "ol_lookup_hit": ("hit {ids} ({n} tokens)", "命中 {ids}（{n} 个 token）"),
    "ol_lookup_capped": (" · capped at {limit}", "，上限 {limit}"),
    "ol_lookup_groups": ("hit {n} tokens in every group", "每组都命中 {n} 个 token"),
    "ol_lookup_short": (" · one group alone: {spb}", "，单组可达 {spb}"),
    "ol_alloc_failed": ("→ None: needs {need}, {free} free", "→ None：需要 {need} 块，空闲 {free}"),
    "ol_ref": ("ref {a}→{b}", "ref {a}→{b}"),
    "ol_ref_up": ("ref +1 each", "ref 各加 1"),
    "ol_ref_down": ("ref −1 each", "ref 各减 1"),
    "ol_touch_free": (" · leave the queue", "，离开空闲队列"),
    "ol_popleft": ("{ids} from the head", "从队首取 {ids}"),
    "ol_evict": ("{label} leaves the hash table", "{label} 移出 hash 表"),
    "ol_cache_masked": ("{ids} stay uncached (mask)", "{ids} 不登记（掩码）"),
    "ol_admit": ("{local} hit + {new} new tokens", "命中 {local} + 计算 {new} 个 token"),
    "ol_admit_ext": ("{local} hit + {ext} external + {new} new", "命中 {local} + 外部 {ext} + 计算 {new}"),
    "ol_schedule_decode": ("{rid}: 1 decode token", "{rid}：解码 1 个 token"),
    "ol_schedule_chunk": ("{rid}: a chunk of {n} tokens", "{rid}：分块 {n} 个 token"),
    "ol_preempt": ("back to waiting, to recompute", "回到等待队列，重新计算"),
    "ol_free_head": ("no hash → head", "无 hash → 队首"),
    "ol_free_tail": ("→ tail", "→ 队尾"),
    "ol_reset_ok": ("→ True: every hash cleared", "→ True：清空所有 hash"),
    "ol_reset_no": ("→ False: blocks still held", "→ False：仍有块被持有"),
    "ol_write": ("{rid}: {n} tokens → {bid}", "{rid}：{n} 个 token → {bid}"),
    "ol_write_one": ("{rid}: 1 token → {bid}", "{rid}：1 个 token → {bid}"),
    "ol_load": ("{rid}: block {bid} ← CPU", "{rid}：块 {bid} ← CPU"),
    "ol_save": ("{label} (block {bid}) → CPU", "{label}（块 {bid}）→ CPU"),
    "ol_drop": ("the CPU tier drops {label}", "CPU 层丢弃 {label}"),
    "ol_sample": ("{rid} samples {token}", "{rid} 采样 {token}"),
    "ol_verify_same": ("{rid}: hit = recompute", "{rid}：命中 = 重算"),
    "ol_verify_diff": ("{rid}: max diff {diff}", "{rid}：最大差 {diff}"),
    "ol_skipped": ("slots {slots} → null", "第 {slots} 格 → null"),
    "ol_skipped_hit": ("{n} leading null slots (hit)", "开头 {n} 格 null（命中）"),
    "ol_rewind": ("state restored", "状态恢复"),
    "ol_restart": ("empty cache, new NONE_HASH", "缓存清空，新的 NONE_HASH"),
    "ol_group": ("{n} ×", "{n} ×"),
    "ol_more": ("{n} more ops", "还有 {n} 个操作"),
    # an engine step's schedule line: "A: 1 decode token · B: 2 new (8 hit) · budget 11/8192"
    "sl_decode_one": ("{rid}: {n} decode token", "{rid}：解码 {n} 个 token"),
    "sl_decode_many": ("{rid}: {n} decode tokens", "{rid}：解码 {n} 个 token"),
    "sl_prefill": ("{rid}: {n} {what}{chunk}", "{rid}：{what}{chunk} {n} 个 token"),
    "sl_new": ("new", "新"),
    "sl_resumed": ("resumed", "恢复"),
    "sl_more": ("more", "续"),
    "sl_chunk": (" (a chunk)", "（分块）"),
    "sl_hit": (" ({hit} hit)", "（命中 {hit}）"),
    "sl_nothing": ("nothing scheduled", "没有调度任何请求"),
    "sl_budget": ("budget {used}/{budget}", "预算 {used}/{budget}"),
    "sl_preempted": (" · preempted {ids}", " · 抢占 {ids}"),
    "sl_finished": (" · finished {ids}", " · 结束 {ids}"),
    "sl_step_k": ("step {k}: ", "第 {k} 步："),
}
