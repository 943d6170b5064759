"""The words of the player page: its sidebar and controls, deep links, self-check, try it yourself
(forking a scenario), the export buttons, and what it says about a shared link or a run cut
short."""
from __future__ import annotations

# self-check's verdicts on one block (the next victim, the next evicted prefix): "Right: " or "Not
# quite: " and the same sentence
_AFTER = {
    "victim": ("block {b} is at the head of the free queue, so the next allocation takes it first.",
               "块 {b} 在空闲队列的队首，下一次分配最先取走它。"),
    "victim_empty": ("the free queue is empty after this step, so the next allocation finds no block "
                     "(allocate_slots returns None).",
                     "这一步之后空闲队列是空的，下一次分配拿不到块（allocate_slots 返回 None）。"),
    "evict": ("block {b} is the first block from the head of the free queue that still has a hash, "
              "so its prefix is the next to be evicted.",
              "块 {b} 是从空闲队列队首数起第一个还带 hash 的块，它的前缀将最先被淘汰。"),
    "evict_empty": ("no free block carries a hash after this step, so no cached prefix can be "
                    "evicted yet.",
                    "这一步之后没有空闲块带着 hash，暂时没有缓存前缀可被淘汰。"),
}

STRINGS: dict[str, tuple[str, str]] = {
    # pages
    "page_player": ("Player", "播放器"),
    # sidebar
    "scenario": ("Scenario", "场景"),
    "language": ("Language", "语言"),
    "presenter": ("Presenter mode", "演示模式"),
    "presenter_help": ("Large type and only the essentials, for a projector. Keys: ← → step, Space "
                       "play/pause, Home/End first/last.",
                       "大字号、只留要点，适合投影。按键：← → 上一步/下一步，"
                       "空格 播放/暂停，Home/End 第一步/最后一步。"),
    "free_order_split": ("free order: split (vLLM ≥ 0.24)", "释放顺序：split（vLLM ≥ 0.24）"),
    "free_order_append": ("free order: append (vLLM ≤ 0.23, classic)",
                          "释放顺序：append（vLLM ≤ 0.23，旧版）"),
    "config_line": ("{blocks} blocks × {size} tokens · {hash}",
                    "{blocks} 个块 × 每块 {size} 个 token · {hash}"),
    "no_payload_config": ("no KV payloads (model: null)", "无 KV 数据（model: null）"),
    "no_payload_preview": ("no KV payloads in this preview (too big for the app: see “KV payload”)",
                           "这个预览不带 KV 数据（对应用来说太大：见“KV 数据”）"),
    "keys_hint": ("Keys: ← → step · Space play/pause · Home / End",
                  "按键：← → 单步 · 空格 播放/暂停 · Home / End"),
    # controls
    "nav_first": ("First", "第一步"),
    "nav_prev": ("Previous", "上一步"),
    "nav_next": ("Next", "下一步"),
    "nav_last": ("Last", "最后一步"),
    "nav_play": ("Play", "播放"),
    "nav_pause": ("Pause", "暂停"),
    "speed": ("Speed", "速度"),
    "step_into": ("Step into", "单步进入"),
    "op_k_of_m": ("op {k} of {m}", "操作 {k} / {m}"),
    "no_ops_short": ("no operations", "没有操作"),
    "no_ops": ("Nothing changes in this step.", "这一步没有任何状态变化。"),
    # panels and legends
    "next_victim_short": ("next", "下一个"),
    "next_evict": ("next cached prefix to be evicted", "下一个被淘汰的缓存前缀"),
    "next_evict_short": ("evicts next", "下个淘汰"),
    "held_by": ("held by {ids}", "被 {ids} 持有"),
    "legend_free": ("dashed = free (ref_cnt 0)", "虚线 = 空闲（ref_cnt 为 0）"),
    "null_block_long": ("null block: a placeholder in block tables (e.g. for tokens outside a "
                        "sliding window), never allocated or cached",
                        "null 块：块表里的占位符（例如滑动窗口之外的 token），从不分配、也不缓存"),
    "cat_free": ("free, no hash", "空闲、无 hash"),
    "cat_free_cached": ("free, cached", "空闲、有 hash"),
    "cat_used": ("in use, no hash", "使用中、无 hash"),
    "cat_used_cached": ("in use, cached", "使用中、有 hash"),
    "heatmap_note": ("{n} blocks: one cell per block, row by row from block 0 (hover for details).",
                     "{n} 个块：每格一个块，从块 0 开始逐行排列（悬停查看详情）。"),
    "more_items": ("{n} more", "还有 {n} 个"),
    "tag_new_hash": ("new", "新登记"),
    "tag_evicted": ("evicted", "已淘汰"),
    "block_ids": ("block(s)", "块"),
    "no_blocks": ("no blocks", "没有块"),
    "computed_of": ("{c} of {n} tokens computed · {p} pending", "已计算 {c} / {n} 个 token · 待计算 {p} 个"),
    "finished_tokens": ("{n} tokens: {p} prompt + {o} output",
                        "共 {n} 个 token：prompt {p} 个 + 输出 {o} 个"),
    "preempted_times": ("preempted ×{n}", "被抢占 ×{n}"),
    "no_requests": ("No requests yet.", "还没有请求。"),
    "ext_lru": ("CPU tier (vLLM OffloadingConnector): next to be evicted first; chunks being "
                "stored or loaded last",
                "CPU 缓存层（vLLM OffloadingConnector）：最先被淘汰的在前；正在存入或载入的在最后"),
    "ext_jobs": ("in flight", "进行中的任务"),
    "ext_job": ("{kind} #{job} ({req})", "{kind} #{job}（{req}）"),
    "ext_job_load": ("load", "载入"),
    "ext_job_store": ("store", "存入"),
    "ext_waiting": ("waiting for their KV (WAITING_FOR_REMOTE_KVS): {ids}",
                    "等待 KV 载入（WAITING_FOR_REMOTE_KVS）：{ids}"),
    "board_keys": ("← → step · Space play · ? why · ↓ ↑ more ops · hover a block to find it everywhere",
                   "← → 单步 · 空格 播放 · ? 为什么 · ↓ ↑ 更多操作 · 悬停某块，各面板同时标出"),
    "board_ops": ("What vLLM ran", "vLLM 执行了什么"),
    "board_ops_page": ("ops {a}–{b} of {n} · ↓ ↑", "操作 {a}–{b} / {n} · ↓ ↑"),
    "board_ops_folded": ("runs folded: click one to open it", "重复的操作已折叠：点击展开"),
    "board_why": ("why?", "为什么？"),
    "board_why_title": ("Why: the whole story of this step (? or W)", "为什么：这一步的完整说明（? 或 W）"),
    "board_close": ("Close", "关闭"),
    "board_lang": ("中文", "English"),
    "board_dense_note": ("{n} blocks: one cell per block (block id on the axis); hover for its id",
                         "{n} 个块：每块一格（坐标轴为块编号）；悬停查看编号"),
    "board_no_frames": ("a pool this big cannot be stepped into here",
                        "块池这么大，这里不能单步进入"),
    "board_loading": ("loading steps…", "正在载入步骤…"),
    "export_html": ("HTML", "HTML"),
    "export_html_help": ("The whole run as one HTML file that steps offline (opens at this step)",
                         "整个运行导出为一个可离线单步的 HTML 文件（从当前步打开）"),
    "export_png": ("PNG", "PNG"),
    "export_png_help": ("This step as a 1920×1080 picture of the board, for slides",
                        "把当前步的看板导出为 1920×1080 图片，用于幻灯片"),
    "export_png_ready": ("Download step {k} PNG", "下载第 {k} 步 PNG"),
    "export_png_failed": ("The PNG could not be made: {msg}", "无法生成 PNG：{msg}"),
    "kv_events_at": ("step {k}: {n} KV cache events", "第 {k} 步：{n} 个 KV 缓存事件"),
    "mk_allocate": ("allocate", "分配"),
    "mk_hit": ("hit", "命中"),
    "mk_external": ("external hit", "外部命中"),
    "mk_evict": ("evict", "淘汰"),
    "mk_free": ("free", "释放"),
    "mk_preempt": ("preempt", "抢占"),
    # payload
    "slot": ("slot", "槽位"),
    "layer": ("layer", "层"),
    "kv_head": ("KV head", "KV 头"),
    "k_or_v": ("K or V", "K 还是 V"),
    "payload_of": ("block {b} · layer {l} · head {h} · {kv}", "块 {b} · 第 {l} 层 · 头 {h} · {kv}"),
    "payload_written": ("K/V written in this step: block(s) {ids}", "本步写入 K/V 的块：{ids}"),
    "no_payload_model": ("This scenario runs without KV payloads (config.model is null): there are no "
                         "tensors to show.",
                         "这个场景没有 KV 数据（config.model 为 null）：没有张量可以显示。"),
    "no_payload_block": ("Block {b} holds no K/V at this step.", "在这一步，块 {b} 里还没有 K/V 数据。"),
    "verify_none": ("No cache hit was checked in this step.", "这一步没有需要验证的缓存命中。"),
    "verify_detail": ("{hit} cached + {new} new tokens", "{hit} 个缓存 token + {new} 个新 token"),
    "verify_title": ("Cache hit = recomputation?", "缓存命中 = 重新计算？"),
    "kv_events": ("KV cache events", "KV 缓存事件"),
    # deep links
    "warn_scenario": ("There is no built-in scenario “{v}”; showing “{d}” instead.",
                      "没有名为 “{v}” 的内置场景；改为显示 “{d}”。"),
    "warn_step": ("“{v}” is not a step of this scenario (0 to {n}); showing step {k}.",
                  "“{v}” 不是这个场景的步骤（0 到 {n}）；改为显示第 {k} 步。"),
    "warn_op": ("“{v}” is not an operation of step {k} (1 to {m}); showing the whole step.",
                "“{v}” 不是第 {k} 步里的操作（1 到 {m}）；改为显示整步。"),
    "warn_lang": ("Unknown language “{v}”; use zh or en.", "未知语言 “{v}”；请用 zh 或 en。"),
    "scenario_broken": ("Built-in scenario file {f} could not be loaded: {msg}",
                        "内置场景文件 {f} 无法加载：{msg}"),
    "no_scenarios": ("No built-in scenarios were found in scenarios/.", "scenarios/ 里没有找到内置场景。"),

    # self-check (blockviz.teach.selfcheck)
    "sc_queue_right": ("Right: after this step the free queue reads {q} (head first).",
                       "答对了：这一步之后空闲队列是 {q}（从队首起）。"),
    "sc_queue_wrong": ("Not quite: after this step the free queue reads {q} (head first); you said {a}.",
                       "不完全对：这一步之后空闲队列是 {q}（从队首起）；你的答案是 {a}。"),
    "sc_missing": ("You left out block(s) {ids}: they are free after this step.",
                   "你漏掉了块 {ids}：这一步之后它们是空闲的。"),
    "sc_not_free": ("Block(s) {ids} are not in the free queue after this step.",
                    "块 {ids} 在这一步之后不在空闲队列里。"),
    "sc_dupes": ("Block(s) {ids} appear twice; a block is in the queue at most once.",
                 "块 {ids} 出现了两次；一个块在队列里最多出现一次。"),
    "sc_order": ("The right blocks, in another order: position {p} from the head is block {e}, "
                 "not {a}.",
                 "块都对，顺序不对：从队首数第 {p} 个是块 {e}，不是 {a}。"),
    "sc_hits_right": ("Right: block(s) {ids} hit in the prefix cache.", "答对了：命中的块是 {ids}。"),
    "sc_hits_right_none": ("Right: no block hits in this step.", "答对了：这一步没有块命中。"),
    "sc_hits_wrong_all": ("Not quite: block(s) {ids} hit; you said {a}.",
                          "不完全对：命中的块是 {ids}；你的答案是 {a}。"),
    "sc_hits_none": ("Not quite: no block hits in this step; you said {a}.",
                     "不对：这一步没有块命中；你的答案是 {a}。"),
    "sc_hits_missed": ("Block(s) {ids} hit too.", "块 {ids} 也命中了。"),
    "sc_hits_wrong": ("Block(s) {ids} did not hit.", "块 {ids} 没有命中。"),
    **{f"sc_{kind}_{verdict}": (en + said[0], zh + said[1])
       for verdict, en, zh in (("right", "Right: ", "答对了："), ("wrong", "Not quite: ", "不对："))
       for kind, said in _AFTER.items()},
    "sc_rule_evict": ("The rule: allocation takes the free queue from the head; blocks without a hash "
                      "ahead of the first cached block are used up first, and only taking that block "
                      "evicts its hash — lazily, when the block is reused.",
                      "规则：分配从空闲队列队首取块；排在第一个带 hash 的块之前的无 hash 块先被用掉，"
                      "只有取走那个块时才会淘汰它的 hash——惰性地，在块被重用时。"),
    "sc_victim_said": ("You said block {a}.", "你的答案是块 {a}。"),
    "sc_victim_said_none": ("You said none.", "你的答案是“没有”。"),
    "sc_rule_queue_split": ("The rule: allocation takes blocks from the head; a hit takes a free cached "
                            "block out of the queue wherever it is; freeing walks the block table in "
                            "reverse, and a block whose ref_cnt reaches 0 goes to the head if it has no "
                            "hash, to the tail if it has one.",
                            "规则：分配从队首取块；命中会把空闲但带 hash 的块从队列中任意位置取出；"
                            "释放时按块表倒序，引用计数归零的块若没有 hash 放到队首，有 hash 放到队尾。"),
    "sc_rule_queue_append": ("The rule (classic order, vLLM ≤ 0.23): allocation takes blocks from the "
                             "head; a hit takes a free cached block out of the queue wherever it is; "
                             "freeing walks the block table in reverse and appends every block whose "
                             "ref_cnt reaches 0 to the tail.",
                             "规则（旧版顺序，vLLM ≤ 0.23）："
                             "分配从队首取块；命中会把空闲但带 hash 的块从队列中"
                             "任意位置取出；释放时按块表倒序，引用计数归零的块一律追加到队尾。"),
    "sc_rule_victim": ("The rule: get_new_blocks always takes the head of the free queue; if that block "
                       "still carries a hash, taking it evicts that hash (lazy eviction).",
                       "规则：get_new_blocks 总是取空闲队列的队首；"
                       "如果那个块还带着 hash，取走它就会把这个 hash "
                       "淘汰（惰性淘汰）。"),
    "sc_rule_hits": ("The rule: get_computed_blocks walks the request's block hashes from the first and "
                     "stops at the first miss; it never covers the last token (at most num_tokens − 1), "
                     "and a request whose allocation fails reuses nothing yet.",
                     "规则：get_computed_blocks 从第一个块的 hash 开始依次查找，遇到第一个未命中就停；"
                     "命中永远不包括最后一个 token（最多 num_tokens − 1 个）"
                     "；分配失败的请求暂时什么也不复用。"),
    "sc_rule_hits_groups": ("The rule (several KV-cache groups): the hit must be held by every group. "
                            "Full attention walks the block hashes from the first to the first miss; a "
                            "sliding window needs the blocks just before the hit point, a chunked "
                            "group the blocks of the chunk it ends in; the hit is the shortest of them, "
                            "at most num_tokens − 1.",
                            "规则（多个 KV 缓存组）：命中必须每个组都持有。全注意力从第一个块的 hash "
                            "查到第一个未命中；滑动窗口需要命中点之前紧挨着的那几个块，分块局部组需要"
                            "命中点所在分块里的块；命中取其中最短的，最多 num_tokens − 1 个。"),
    "sc_window_right": ("Right: the windows hand back block(s) {ids}.",
                        "答对了：窗口还回来的块是 {ids}。"),
    "sc_window_right_none": ("Right: no block leaves a window in this step.",
                             "答对了：这一步没有块滑出窗口。"),
    "sc_window_wrong_all": ("Not quite: the windows hand back block(s) {ids}; you said {a}.",
                            "不完全对：窗口还回来的块是 {ids}；你的答案是 {a}。"),
    "sc_window_none": ("Not quite: no block leaves a window in this step; you said {a}.",
                       "不对：这一步没有块滑出窗口；你的答案是 {a}。"),
    "sc_window_missed": ("Block(s) {ids} leave a window too.", "块 {ids} 也滑出了窗口。"),
    "sc_window_wrong": ("Block(s) {ids} stay where they are.", "块 {ids} 还留在原处。"),
    "sc_rule_window": ("The rule: before a request's next tokens are allocated, remove_skipped_blocks "
                       "drops every whole block no future token can attend to (a sliding window keeps "
                       "the last W − 1 tokens, a chunked group the current chunk): the null block takes "
                       "its slot and the block is freed, to the head without a hash, to the tail with "
                       "one.",
                       "规则：为请求分配接下来的 token 之前，remove_skipped_blocks 丢掉今后任何 token 都"
                       "不会再看的整块（滑动窗口保留最后 W − 1 个 token，分块局部组保留当前分块）：null "
                       "block 占据它的位置，块随即释放，没有 hash 的放到队首，有 hash 的放到队尾。"),
    "sc_no_ops": ("No operation of this step touches it.", "这一步没有相关的操作。"),

    # self-check in the player
    "learn": ("Learn by doing (opens beside the board)", "动手学（在棋盘旁边打开）"),
    "sc_into": ("Stepping into an event: a prediction is about a whole step, so self-check waits "
                "until you step out.",
                "正在单步进入一个事件：预测针对的是完整的一步，所以自测会等你退出单步后再继续。"),
    "sc_close": ("Close self-check", "关闭自测"),
    "selfcheck": ("Self-check", "自测"),
    "selfcheck_help": ("Before each step is shown, predict what it will do; then check.",
                       "在每一步显示之前，先预测它会做什么，再核对。"),
    "sc_title": ("Predict step {k}: {event}", "预测第 {k} 步：{event}"),
    "sc_at_end": ("This is the last step: nothing left to predict.", "这是最后一步，没有可以预测的了。"),
    "sc_question": ("Question", "问题"),
    "sc_q_queue": ("the free queue after it", "之后的空闲队列"),
    "sc_q_hits": ("which blocks hit", "哪些块命中"),
    "sc_q_victim": ("which block the next allocation takes", "下一次分配取走哪个块"),
    "sc_q_evict": ("whose cached prefix is evicted next", "下一个被淘汰的缓存前缀在哪个块"),
    "sc_q_window": ("which blocks leave a window", "哪些块滑出窗口"),
    "sc_in_window": ("The blocks step {k}'s windows hand back to the pool (none selected = none):",
                     "第 {k} 步里窗口还给块池的块（不选 = 没有）："),
    "sc_in_evict": ("After step {k}, the next cached prefix to be evicted is in block:",
                    "第 {k} 步之后，下一个被淘汰的缓存前缀在块："),
    "sc_in_queue": ("The free queue after step {k}, head (taken first) to tail:",
                    "第 {k} 步之后的空闲队列，从队首（最先取走）到队尾："),
    "sc_in_queue_ph": ("e.g. 4 3 5 6 2 1 (empty = the queue is empty)",
                       "例如 4 3 5 6 2 1（留空 = 队列为空）"),
    "sc_in_hits": ("The blocks step {k} hits in the prefix cache (none selected = no hit):",
                   "第 {k} 步在前缀缓存里命中的块（不选 = 没有命中）："),
    "sc_in_victim": ("After step {k}, the next allocation takes block:",
                     "第 {k} 步之后，下一次分配取走的块："),
    "sc_none_option": ("none (the queue is empty)", "没有（队列为空）"),
    "sc_none_option_evict": ("none (no free block has a hash)", "没有（没有空闲块带 hash）"),
    "sc_check": ("Check", "核对"),
    "sc_show": ("Show step {k}", "显示第 {k} 步"),
    "sc_bad_input": ("“{w}” is not a block id: type block ids separated by spaces.",
                     "“{w}” 不是块编号：请输入用空格分隔的块编号。"),
    "sc_why": ("Why", "原因"),
    "sc_score": ("{right} of {total} right so far", "目前答对 {right} / {total}"),
    "sc_lesson_done": ("Lesson done: {right} of {total} predictions right at the first try "
                       "({steps} steps).",
                       "本课完成：{total} 次预测中首次答对 {right} 次（共 {steps} 步）。"),

    # try it yourself: forking a scenario in the player
    "your_scenario": ("Your scenario", "你的场景"),
    "user_option": ("Yours: {title}", "你的：{title}"),
    "user_not_linked": ("Your own scenario lives in this browser tab only: a link cannot reopen it "
                        "(download it to keep it).",
                        "你自己的场景只存在于这个浏览器标签页里，链接无法重新打开它（请下载保存）。"),
    "fork_here": ("Try it yourself", "自己动手试试"),
    "fork_help": ("Fork the scenario here: keep its steps up to this one, then add your own events.",
                  "从这一步分叉：保留到这一步为止的步骤，然后添加你自己的事件。"),
    "fork_title": ("Try it yourself — forked at step {k}", "自己动手试试 —— 从第 {k} 步分叉"),
    "fork_intro": ("Add an event: it runs at once and the player shows the result as the last step. "
                   "Your fork is a scenario file; download it to replay it anywhere.",
                   "添加一个事件：它会立即运行，播放器把结果显示为最后一步。"
                   "你的分叉就是一个场景文件，可以下载后在任何地方重放。"),
    "fork_event": ("Event", "事件"),
    "fork_add": ("Add and run", "添加并运行"),
    "fork_undo": ("Remove the last added event", "删除最后添加的事件"),
    "fork_download": ("Download the fork (.yaml)", "下载分叉（.yaml）"),
    "fork_to_author": ("Edit on the Author page", "在编写页面编辑"),
    "fork_back": ("Back to the original", "回到原场景"),
    "fork_link": ("Link to this fork: send it, and it opens at step 0 (the whole fork is in the "
                  "link; nothing is stored on the server).",
                  "这个分叉的链接：发给别人，它从第 0 步打开"
                  "（整个分叉都在链接里，服务器上不保存任何东西）。"),
    "fork_no_link": ("This fork is too long for a link: download it to send it.",
                     "这个分叉太长，放不进链接：请下载后再发送。"),
    "fork_added": ("{n} event(s) added after step {k}.", "在第 {k} 步之后添加了 {n} 个事件。"),
    "fork_refused": ("Not added: {msg}", "没有添加：{msg}"),
    "fork_appends": ("Events are added after the last step (step {n}).",
                     "事件总是加在最后一步（第 {n} 步）之后。"),
    "ev_kind_arrive": ("arrive (a new request)", "arrive（新请求）"),
    "ev_kind_decode": ("decode", "decode（解码）"),
    "ev_kind_step": ("step (scheduler iterations)", "step（调度迭代）"),
    "ev_kind_finish": ("finish", "finish（结束）"),
    "ev_kind_preempt": ("preempt", "preempt（抢占）"),
    "ev_kind_reset_prefix_cache": ("reset_prefix_cache", "reset_prefix_cache（重置前缀缓存）"),
    "req_id": ("Request id", "请求 id"),
    "prompt_parts": ("Prompt", "提示词"),
    "prompt_empty": ("Add at least one part to the prompt.", "请至少给 prompt 添加一个部分。"),
    "prompt_none": ("(empty: build it from parts below)", "（空：用下面的部分拼出来）"),
    "part_kind": ("Part", "部分"),
    "part_tokens": ("tokens", "tokens（token id）"),
    "part_text": ("text", "text（单词）"),
    "part_same_as": ("same_as (copy a request)", "same_as（复制某个请求）"),
    "part_random": ("random", "random（随机）"),
    "part_tokens_in": ("Token ids, e.g. 1 2 3 4", "token id，例如 1 2 3 4"),
    "part_text_in": ("Words, e.g. the cat sat", "单词，例如 the cat sat"),
    "part_same_as_in": ("Request", "请求"),
    "part_first": ("First N tokens (0 = all)", "前 N 个 token（0 = 全部）"),
    "part_random_in": ("Number of random tokens", "随机 token 的个数"),
    "part_add": ("Add part", "添加这一部分"),
    "part_clear": ("Clear", "清空"),
    "part_bad": ("This part is not valid: {msg}", "这一部分不合法：{msg}"),
    "max_tokens": ("max_tokens (0 = no limit)", "max_tokens（0 = 不限）"),
    "fork_more": ("cache_salt, LoRA (optional)", "cache_salt、LoRA（可选）"),
    "cache_salt": ("cache_salt (optional)", "cache_salt（可选）"),
    "lora": ("LoRA name (optional)", "LoRA 名称（可选）"),
    "decode_steps": ("Iterations", "迭代次数"),
    "decode_requests": ("Requests (none selected = every running one)", "请求（不选 = 所有运行中的请求）"),
    "finish_ids": ("Requests to finish", "要结束的请求"),
    "preempt_id": ("Running request to preempt", "要抢占的运行中请求"),
    "no_running": ("No request is running.", "没有运行中的请求。"),
    "no_live": ("Every request has finished.", "所有请求都已结束。"),
    "fork_scenario_title": ("{title} — fork at step {k}", "{title} —— 从第 {k} 步分叉"),
    "fork_summary": ("Forked from “{title}” ({id}) at step {k}; the steps after it were added by "
                     "hand.",
                     "从“{title}”（{id}）的第 {k} 步分叉而来；之后的步骤是手动添加的。"),

    # export (blockviz/export.py, python -m blockviz export)
    "x_made": ("Made with blockviz from {file}", "由 blockviz 根据 {file} 生成"),

    # the player, opening a link
    "link_refused": ("The shared link could not be opened: {msg_en}. Showing “{d}” instead.",
                     "无法打开这个分享链接：{msg_zh}。改为显示 “{d}”。"),
    "link_opened_note": ("Opened from a shared link: the link in the address bar reopens this scenario "
                         "at this step.",
                         "这是从分享链接打开的：地址栏里的链接可以在这一步重新打开这个场景。"),
    # a run cut short (a time or size limit, or an event the state does not allow)
    "cut_short": ("This run stopped early, at step {k} of the scenario's {n} steps: {why_en}. The player "
                  "shows only the steps that ran (0 to {last}).",
                  "这次运行提前停止了，停在第 {k} 步（场景共 {n} 步）：{why_zh}。播放器只显示运行过的步骤"
                  "（0 到 {last}）。"),
    "cut_short_cli": ("To run it whole, download it (the Author page saves it as {file}) and run: "
                      "python -m blockviz play {file}",
                      "完整运行：先下载它（编写页面保存为 {file}），再运行：python -m blockviz play {file}"),
}
