"""The words of the first wave: panels, events, the player, self-check, the Author page, the
capacity page. A new area keeps its words in a module of its own beside this one (listed in
``blockviz.i18n.AREAS``), so that areas do not edit one another's dictionaries."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    # panels
    "app_title": ("blockviz — vLLM's KV-cache block manager, step by step",
                  "blockviz —— 一步步看懂 vLLM 的 KV 缓存块管理"),
    "gpu_blocks": ("GPU blocks", "GPU 块"),
    "free_queue": ("Free queue", "空闲队列"),
    "free_queue_hint": ("head = taken first · tail = evicted last",
                        "左端先被取走 · 右端最后被淘汰"),
    "hash_table": ("Prefix hash table", "前缀 hash 表"),
    "requests": ("Requests", "请求"),
    "block_table": ("block table", "块表"),
    "narration": ("What happens", "这一步发生了什么"),
    "engine_did": ("What the engine did", "引擎做了什么"),
    "payload": ("KV payload", "KV 数据"),
    "metrics": ("Metrics over the timeline", "指标随时间变化"),
    "pseudocode": ("Code it runs", "执行的代码"),
    "external_tier": ("External KV tier", "外部 KV 缓存层"),
    # words on cells and rows
    "null_block": ("null", "null 块"),
    "block": ("block", "块"),
    "ref": ("ref", "引用"),
    "head": ("head", "队首"),
    "tail": ("tail", "队尾"),
    "empty": ("(empty)", "（空）"),
    "none": ("(none)", "（无）"),
    "next_victim": ("next allocation takes it", "下一次分配取走它"),
    "cached": ("cached (has a hash)", "已登记 hash（可命中）"),
    "uncached": ("not cached", "未登记 hash"),
    "changed": ("changed in this step", "本步变化"),
    "to_head": ("→ head", "→ 队首"),
    "to_tail": ("→ tail", "→ 队尾"),
    "parent": ("parent", "父"),
    "duplicate": ("duplicate", "重复"),
    "local_hit": ("local hit", "本地命中"),
    "external_hit": ("external hit", "外部命中"),
    "new_block": ("new", "新分配"),
    "computed": ("computed", "已计算"),
    "pending": ("pending", "待计算"),
    "tokens": ("tokens", "个 token"),
    "status_waiting": ("waiting", "等待中"),
    "status_running": ("running", "运行中"),
    "status_preempted": ("preempted", "被抢占"),
    "status_finished": ("finished", "已结束"),
    "usage": ("usage", "占用率"),
    "hit_rate": ("local hit rate", "本地命中率"),
    "ext_hit_rate": ("external hit rate", "外部命中率"),
    "evictions": ("evictions", "淘汰次数"),
    "free_blocks": ("free blocks", "空闲块"),
    "step": ("step", "步骤"),
    "step_k_of_n": ("step {k} of {n}", "第 {k} 步 / 共 {n} 步"),
    "start": ("start", "初始状态"),
    "device": ("device", "设备"),
    "fingerprint": ("fingerprint", "指纹"),
    "hit_check_ok": ("cache hit = recomputation (max |Δ| = {d})",
                     "缓存命中 = 重新计算（最大 |Δ| = {d}）"),
    "hit_check_bad": ("MISMATCH: cache hit ≠ recomputation (max |Δ| = {d})",
                      "不一致：缓存命中 ≠ 重新计算（最大 |Δ| = {d}）"),
    "error_stopped": ("The run stopped here: {msg}", "运行在此处停止：{msg}"),
    # events (short, for step lists)
    "ev_start": ("start", "初始"),
    "ev_arrive": ("{id} arrives", "{id} 到达"),
    "ev_admit": ("admit", "接纳等待的请求"),
    "ev_decode": ("decode ×{n}", "解码 ×{n}"),
    "ev_step": ("engine step ×{n}", "引擎迭代 ×{n}"),
    "ev_finish": ("{ids} finishes", "{ids} 结束"),
    "ev_finish_many": ("{ids} finish", "{ids} 结束"),
    "ev_preempt": ("preempt {id}", "抢占 {id}"),
    "ev_reset_prefix_cache": ("reset prefix cache", "重置前缀缓存"),
    "ev_checkpoint": ("checkpoint “{name}”", "存档 “{name}”"),
    "ev_rewind": ("rewind to “{name}”", "回到存档 “{name}”"),
    "ev_restart": ("restart the engine", "重启引擎进程"),
    "ev_note": ("note", "说明"),
}


# -- the player (app.py, blockviz/ui, blockviz/render) ----------------------------------------
STRINGS.update({
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
    "steps_list": ("Steps", "步骤"),
    "free_order_split": ("free order: split (vLLM ≥ 0.24)", "释放顺序：split（vLLM ≥ 0.24）"),
    "free_order_append": ("free order: append (vLLM ≤ 0.23, classic)",
                          "释放顺序：append（vLLM ≤ 0.23，旧版）"),
    "config_line": ("{blocks} blocks × {size} tokens · {hash}",
                    "{blocks} 个块 × 每块 {size} 个 token · {hash}"),
    "no_payload_config": ("no KV payloads (model: null)", "无 KV 数据（model: null）"),
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
    "step_into_help": ("Walk the operations inside this event one by one, each with the line of code "
                       "it runs. ← → then move by operation.",
                       "逐个查看这一事件里的每个操作，以及它执行的那行代码。此时 ← → 按操作移动。"),
    "timeline": ("Timeline", "时间线"),
    "op_k_of_m": ("op {k} of {m}", "操作 {k} / {m}"),
    "no_ops_short": ("no operations", "没有操作"),
    "no_ops": ("Nothing changes in this step.", "这一步没有任何状态变化。"),
    "ops_in_step": ("The {n} operations of this event:", "这一事件的 {n} 个操作："),
    "frame_state_note": ("Panels show the state right after this operation (requests: as at the end "
                         "of the event).",
                         "各面板显示执行完这个操作后的状态（请求面板显示事件结束时的状态）。"),
    # panels and legends
    "next_victim_short": ("next", "下一个"),
    "next_evict": ("next cached prefix to be evicted", "下一个被驱逐的缓存前缀"),
    "next_evict_short": ("evicts next", "下个驱逐"),
    "held_by": ("held by {ids}", "被 {ids} 持有"),
    "legend_free": ("dashed = free (ref_cnt 0)", "虚线 = 空闲（ref_cnt 为 0）"),
    "null_block_long": ("null block (never used)", "null 块（从不使用）"),
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
    "board_keys": ("← → step · Space play · Home/End · hover a block to find it everywhere",
                   "← → 单步 · 空格 播放 · Home/End · 悬停某块，各面板同时标出"),
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
    "payload_block": ("block", "块"),
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
})


# -- self-check (blockviz.teach.selfcheck) ----------------------------------------------------------
STRINGS.update({
    "sc_nothing": ("(none)", "（无）"),
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
    "sc_victim_right": ("Right: block {b} is at the head of the free queue, so the next allocation "
                        "takes it first.",
                        "答对了：块 {b} 在空闲队列的队首，下一次分配最先取走它。"),
    "sc_victim_wrong": ("Not quite: block {b} is at the head of the free queue, so the next allocation "
                        "takes it first.",
                        "不对：块 {b} 在空闲队列的队首，下一次分配最先取走它。"),
    "sc_victim_empty_right": ("Right: the free queue is empty after this step, so the next allocation "
                              "finds no block (allocate_slots returns None).",
                              "答对了：这一步之后空闲队列是空的，"
                              "下一次分配拿不到块（allocate_slots 返回 None）。"),
    "sc_victim_empty_wrong": ("Not quite: the free queue is empty after this step, so the next "
                              "allocation finds no block (allocate_slots returns None).",
                              "不对：这一步之后空闲队列是空的，"
                              "下一次分配拿不到块（allocate_slots 返回 None）。"),
    "sc_evict_right": ("Right: block {b} is the first block from the head of the free queue that still "
                       "has a hash, so its prefix is the next to be evicted.",
                       "答对了：块 {b} 是从空闲队列队首数起第一个还带 hash 的块，它的前缀将最先被驱逐。"),
    "sc_evict_wrong": ("Not quite: block {b} is the first block from the head of the free queue that "
                       "still has a hash, so its prefix is the next to be evicted.",
                       "不对：块 {b} 是从空闲队列队首数起第一个还带 hash 的块，它的前缀将最先被驱逐。"),
    "sc_evict_empty_right": ("Right: no free block carries a hash after this step, so no cached prefix "
                             "can be evicted yet.",
                             "答对了：这一步之后没有空闲块带着 hash，暂时没有缓存前缀可被驱逐。"),
    "sc_evict_empty_wrong": ("Not quite: no free block carries a hash after this step, so no cached "
                             "prefix can be evicted yet.",
                             "不对：这一步之后没有空闲块带着 hash，暂时没有缓存前缀可被驱逐。"),
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
    "sc_no_ops": ("No operation of this step touches it.", "这一步没有相关的操作。"),
})


# -- the Author page (blockviz/ui/author.py) --------------------------------------------------
STRINGS.update({
    "page_author": ("Author", "编写场景"),
    "author_title": ("Write a scenario", "编写场景"),
    "author_intro": ("Edit the YAML on the left: the editor checks it as you type (the bad line is marked, "
                     "its message beside it; Ctrl+Space completes event and field names) and a valid "
                     "scenario runs in the preview on the right.",
                     "在左边编辑 YAML：边输入边检查（出错的行会被标出，错误信息就在旁边；"
                     "Ctrl+Space 补全事件名和字段名），合法的场景会在右边的预览里运行。"),
    "editor": ("Scenario (YAML)", "场景（YAML）"),
    "editor_help": ("The format: id, title, config, steps. Each step is one event; see the “Format "
                    "reference” tab. Scenarios are data: nothing in them is executed.",
                    "格式：id、title、config、steps。"
                    "每一步是一个事件，见“格式参考”标签页。场景只是数据，里面的内容不会被执行。"),
    "valid": ("Valid: “{title}”, {n} steps, {blocks} blocks × {size} tokens.",
              "合法：“{title}”，{n} 步，{blocks} 个块 × 每块 {size} 个 token。"),
    "invalid": ("Not valid yet", "还不合法"),
    "err_where": ("line {line}, column {col}", "第 {line} 行，第 {col} 列"),
    "err_nowhere": ("the whole file", "整个文件"),
    "err_path": ("field", "字段"),
    "err_kept": ("The preview below still shows the last valid version.",
                 "下面的预览仍是上一个合法的版本。"),
    "run_stops_at": ("Valid, but the run stops at step {k}", "格式合法，但运行在第 {k} 步停止"),
    "preview": ("Preview", "预览"),
    "preview_none": ("No valid version yet: the preview appears once the scenario is valid.",
                     "还没有合法的版本：场景合法后这里会出现预览。"),
    "preview_step": ("Preview step", "预览步骤"),
    "open_in_player": ("Open in the player", "在播放器中打开"),
    "open_in_player_help": ("Step through this scenario with every panel, step into events, self-check.",
                            "用完整的播放器逐步查看这个场景：所有面板、单步进入、自测。"),
    "preview_too_big": ("The preview runs scenarios whose KV tensors fit in {limit} MiB; this one asks "
                        "for {size:.0f} MiB. Set config.model: null (no payloads), or run it with the "
                        "command line: download it (“Download .yaml” saves {file}) and run "
                        "python -m blockviz play {file}",
                        "预览只运行 KV 张量不超过 {limit} MiB 的场景；这个场景需要 {size:.0f} MiB。"
                        "可以设置 config.model: null（不存 KV 数据），"
                        "或者用命令行运行：先下载（“下载 .yaml”保存为 {file}），"
                        "再运行 python -m blockviz play {file}"),
    "preview_slow": ("The preview stopped after {s} s at step {k} of {n}; run the whole scenario with the "
                     "command line: download it (“Download .yaml” saves {file}) and run "
                     "python -m blockviz play {file}",
                     "预览运行了 {s} 秒，停在第 {k} 步（共 {n} 步）；"
                     "完整运行请用命令行：先下载（“下载 .yaml”保存为 {file}），"
                     "再运行 python -m blockviz play {file}"),
    "preview_not_run": ("The preview did not run", "预览没有运行"),
    "preview_retry": ("Run the preview again", "重新运行预览"),
    "paste_too_big": ("The text was not taken: it is {size} bytes, and a scenario is at most {limit} "
                      "bytes. The editor keeps the text it had.",
                      "这段文字没有被接受：它有 {size} 字节，而场景最多 {limit} 字节。"
                      "编辑框保留原来的内容。"),
    "page_error": ("Something went wrong on this page ({kind}); the server and your session are fine. "
                   "Reload the page, or go back to the player.",
                   "这个页面出了问题（{kind}）；服务器和你的会话都没有受到影响。请刷新页面，或者回到播放器。"),
    "insert_event": ("Insert an example event (added as the last step)", "插入示例事件（加在最后一步之后）"),
    "upload": ("Open a scenario file", "打开场景文件"),
    "upload_help": ("A .yaml file of at most 1 MiB, UTF-8. It replaces the editor's text.",
                    "不超过 1 MiB 的 UTF-8 .yaml 文件，会替换编辑框里的内容。"),
    "upload_ok": ("Opened {name}.", "已打开 {name}。"),
    "upload_refused": ("{name} was not opened: {msg}", "{name} 没有打开：{msg}"),
    "download": ("Download .yaml", "下载 .yaml"),
    "gallery": ("Start from a built-in scenario", "从内置场景开始"),
    "gallery_copy": ("Copy into the editor", "复制到编辑框"),
    "gallery_help": ("Replaces the editor's text with the scenario's file; “Undo” brings your text back.",
                     "用这个场景的文件替换编辑框里的内容；“撤销”可以恢复你原来的内容。"),
    "new_starter": ("New from the starter", "用起始模板新建"),
    "undo_replace": ("Undo", "撤销"),
    "replaced": ("The editor now holds {what}.", "编辑框现在是 {what}。"),
    "reference": ("Every field of the format, generated from its JSON Schema.",
                  "格式里的每个字段，由 JSON Schema 生成。"),
    "reference_tab": ("Format reference", "格式参考"),
    "ref_field": ("field", "字段"),
    "ref_type": ("type", "类型"),
    "ref_default": ("default", "默认值"),
    "ref_required": ("required", "必填"),
    "ref_example": ("Example", "示例"),
    "ref_sec_scenario": ("The file", "文件"),
    "ref_sec_config": ("config", "config（配置）"),
    "ref_sec_model": ("config.model: the tiny model that writes real K/V",
                      "config.model：写入真实 K/V 的小模型"),
    "ref_sec_connector": ("config.connector: an external KV tier (vLLM's OffloadingConnector, CPU)",
                          "config.connector：外部 KV 缓存层（vLLM 的 OffloadingConnector，CPU）"),
    "ref_sec_scheduler": ("config.scheduler: vLLM's scheduler settings",
                          "config.scheduler：vLLM 调度器的设置"),
    "ref_sec_events": ("Events (one per step)", "事件（每步一个）"),
    "ref_sec_parts": ("Prompt parts", "prompt 的组成部分"),
    "ref_bare": ("Written as a bare word: no value.", "只写事件名，不带值。"),
    "ref_value": ("Value:", "值："),
    # what each event does (scenario-format.md)
    "evh_arrive": ("A new request: its full blocks are hashed, it joins the waiting queue, then one "
                   "engine step runs (unless admit: false) — which serves the running requests first.",
                   "新请求：对它的满块计算 hash，加入等待队列，然后运行一个引擎步（除非 admit: false）"
                   "——这一步会先服务运行中的请求。"),
    "evh_admit": ("One engine step (kept for older files; the same as step: 1).",
                  "一个引擎步（为旧文件保留；等同于 step: 1）。"),
    "evh_decode": ("N engine steps. Teaching-only with requests: [...]: only those running requests are "
                   "scheduled and nothing is admitted — vLLM never does that.",
                   "N 个引擎步。带 requests: [...] 时是教学演示：只调度列出的运行中请求、不接纳新请求——"
                   "vLLM 从不这样做。"),
    "evh_step": ("N vLLM engine steps: running requests first (a decode token or the next prefill "
                 "chunk) within the token budget, then waiting ones if nothing was preempted.",
                 "N 个 vLLM 引擎步：在 token 预算内先调度运行中的请求（一个解码 token 或 prefill 的"
                 "下一块），没有发生抢占时再接纳等待中的请求。"),
    "evh_finish": ("The request ends: its blocks are freed (table reversed). A waiting request is just "
                   "removed.",
                   "请求结束：释放它的块（块表倒序）。等待中的请求直接移除。"),
    "evh_preempt": ("Teaching-only (vLLM preempts only the last running request, when memory runs "
                    "out): free a running request's blocks, reset its progress, put it at the front "
                    "of the waiting queue.",
                    "教学演示（vLLM 只在显存不够时抢占最后一个运行中的请求）：释放一个运行中请求的块，"
                    "计算进度清零，放回等待队列最前面。"),
    "evh_reset_prefix_cache": ("BlockPool.reset_prefix_cache(): drop every hash (refused while requests "
                               "hold blocks).",
                               "BlockPool.reset_prefix_cache()：清掉所有 hash（有请求持有块时会失败）。"),
    "evh_checkpoint": ("Save the whole engine state under a name.", "用一个名字保存整个引擎状态。"),
    "evh_rewind": ("Restore a saved state (tensors included).", "恢复到某个存档（包括张量）。"),
    "evh_restart": ("A new engine process with the same config: empty GPU cache. Every request must "
                    "have finished.",
                    "用同样的配置启动新的引擎进程：GPU 缓存清空。所有请求必须已经结束。"),
    "evh_note": ("A narration step: no state change.", "只有说明的步骤：状态不变。"),
    "ph_tokens": ("Token ids (0–65535).", "token id（0–65535）。"),
    "ph_text": ("Words, one token each (the words are shown on the blocks).",
                "单词，每个词一个 token（块上会显示这些词）。"),
    "ph_same_as": ("The first N tokens of an earlier request (its prompt, then its output).",
                   "之前某个请求的前 N 个 token（先是 prompt，再是输出）。"),
    "ph_random": ("N seeded random tokens.", "N 个随机 token（由种子决定）。"),
})

# -- try it yourself: forking a scenario in the player ----------------------------------------
STRINGS.update({
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
    "cache_salt": ("cache_salt (optional)", "cache_salt（可选）"),
    "lora": ("LoRA name (optional)", "LoRA 名称（可选）"),
    "decode_steps": ("Iterations", "迭代次数"),
    "decode_requests": ("Requests (none selected = every running one)", "请求（不选 = 所有运行中的请求）"),
    "finish_ids": ("Requests to finish", "要结束的请求"),
    "preempt_id": ("Running request to preempt", "要抢占的运行中请求"),
    "no_running": ("No request is running.", "没有运行中的请求。"),
    "no_live": ("Every request has finished.", "所有请求都已结束。"),
    "step_n": ("Iterations", "迭代次数"),
})

# -- self-check in the player -----------------------------------------------------------------
STRINGS.update({
    "selfcheck": ("Self-check", "自测"),
    "selfcheck_help": ("Before each step is shown, predict what it will do; then check.",
                       "在每一步显示之前，先预测它会做什么，再核对。"),
    "sc_title": ("Predict step {k}: {event}", "预测第 {k} 步：{event}"),
    "sc_at_end": ("This is the last step: nothing left to predict.", "这是最后一步，没有可以预测的了。"),
    "sc_question": ("Question", "问题"),
    "sc_q_queue": ("the free queue after it", "之后的空闲队列"),
    "sc_q_hits": ("which blocks hit", "哪些块命中"),
    "sc_q_victim": ("which block the next allocation takes", "下一次分配取走哪个块"),
    "sc_q_evict": ("whose cached prefix is evicted next", "下一个被驱逐的缓存前缀在哪个块"),
    "sc_in_evict": ("After step {k}, the next cached prefix to be evicted is in block:",
                    "第 {k} 步之后，下一个被驱逐的缓存前缀在块："),
    "sc_answer_on_board": ("The answer is outlined on the board.", "答案已在看板上描出。"),
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
})

# -- export (blockviz/export.py, python -m blockviz export) -----------------------------------
STRINGS.update({
    "x_made": ("Made with blockviz from {file}", "由 blockviz 根据 {file} 生成"),
})

# -- the capacity-planning page (blockviz/ui/capacity.py, blockviz/render/capacity.py) -----------
STRINGS.update({
    "page_capacity": ("Capacity planning", "容量规划"),
    "cap_title": ("How big must the KV-cache pool be?", "KV 缓存块池要多大？"),
    "cap_intro": ("Generate a workload, replay it at several pool sizes with both free orders, and "
                  "see how much of the prompts the prefix cache saves at each size. Every run is the "
                  "real block manager, payloads off.",
                  "生成一个负载，用两种释放顺序在多个块池大小下重放，看每个大小下前缀缓存能省下多少"
                  "提示词计算。每次运行都是真实的块管理器（不含 KV 数据）。"),
    "cap_workload": ("Workload", "负载"),
    "cap_kind": ("Kind of workload", "负载类型"),
    "cap_kind_shared_prefix": ("Shared system prompt", "共享系统提示"),
    "cap_kind_multi_turn": ("Multi-turn chat", "多轮对话"),
    "cap_kind_few_shot": ("Few-shot", "少样本"),
    "cap_kind_random": ("Random", "随机"),
    "cap_kind_help": ("Shared system prompt: a few long system prompts, each request one of them + "
                      "its own question. Multi-turn chat: each turn repeats the whole previous turn "
                      "(prompt and reply) + a new message. Few-shot: a shared instruction, one of "
                      "several example sets, a short question. Random: random lengths, partly "
                      "sharing earlier prompts.",
                      "共享系统提示：少数几个长系统提示，每个请求 = 其中一个 + 自己的问题。"
                      "多轮对话：每一轮重复上一轮的全部内容（提示和回复）+ 一条新消息。"
                      "少样本：共同的指令 + 若干示例集之一 + 一个短问题。"
                      "随机：随机长度，部分共享之前的提示。"),
    "cap_events": ("Events", "事件数"),
    "cap_events_help": ("Arrivals, engine steps and finishes, in all (at most {max}).",
                        "到达、引擎迭代和结束事件的总数（最多 {max}）。"),
    "cap_block_size": ("Block size (tokens)", "块大小（token 数）"),
    "cap_prefix_blocks": ("Shared prefix (blocks)", "共享前缀（块数）"),
    "cap_prefix_blocks_help": ("A system prompt or an example set, in blocks (random: sets the "
                               "prompt lengths).",
                               "系统提示或示例集的长度，以块计（随机负载：决定提示长度）。"),
    "cap_new_tokens": ("New tokens per request (mean)", "每个请求的新 token（平均）"),
    "cap_new_tokens_help": ("The question, or the new message of a turn.", "问题，或一轮对话里的新消息。"),
    "cap_num_prefixes": ("Distinct prefixes", "不同前缀的个数"),
    "cap_num_prefixes_help": ("How many different system prompts / example sets.",
                              "有多少个不同的系统提示 / 示例集。"),
    "cap_max_live": ("Requests at once (max)", "同时存在的请求（最多）"),
    "cap_max_turns": ("Turns per conversation", "每段对话的轮数"),
    "cap_max_turns_help": ("Multi-turn chat only.", "只用于多轮对话。"),
    "cap_seed": ("Seed", "随机种子"),
    "cap_num_sizes": ("Pool sizes to try", "尝试的块池大小个数"),
    "cap_num_sizes_help": ("Geometric, from the largest single request to a pool that never evicts.",
                           "按几何级数取值：从最大的单个请求所需的块数，到永远不必淘汰的块池大小。"),
    "cap_compute": ("Compute", "计算"),
    "cap_bounds": ("Bounded so a plan takes a few seconds: at most {events} events and {sizes} pool "
                   "sizes (each size is replayed once per free order). For bigger studies call "
                   "blockviz.teach.workload.capacity_plan from Python.",
                   "为了几秒钟内算完，有上限：最多 {events} 个事件、{sizes} 个块池大小"
                   "（每个大小对每种释放顺序各重放一次）。更大的研究请在 Python 里调用 "
                   "blockviz.teach.workload.capacity_plan。"),
    "cap_bad_value": ("{field}: {value} is not allowed; use a whole number from {lo} to {hi}.",
                      "{field}：不允许 {value}；请用 {lo} 到 {hi} 之间的整数。"),
    "cap_bad_kind": ("Unknown workload kind “{value}”.", "未知的负载类型 “{value}”。"),
    "cap_too_big": ("This workload is beyond the scenario limits ({msg}). Use fewer events or shorter "
                    "prompts.",
                    "这个负载超出了场景的限制（{msg}）。请减少事件数或缩短提示。"),
    "cap_sizing": ("Finding the pool sizes…", "正在确定块池大小…"),
    "cap_running": ("Replaying {runs} runs of {events} events… {pct}%",
                    "正在重放 {runs} 次、每次 {events} 个事件… {pct}%"),
    "cap_done": ("Done: {runs} runs of {events} events in {s:.1f} s.",
                 "完成：{runs} 次运行，每次 {events} 个事件，用时 {s:.1f} 秒。"),
    "cap_cached": ("{runs} runs of {events} events ({requests} requests), computed in {s:.1f} s.",
                   "{runs} 次运行，每次 {events} 个事件（{requests} 个请求），计算用时 {s:.1f} 秒。"),
    "cap_none_yet": ("Choose a workload and press Compute.", "选择一个负载，然后点击“计算”。"),
    "cap_run_errors": ("Some runs stopped early: {msg}", "有些运行提前停止了：{msg}"),
    "cap_hit_title": ("Prefix-cache hit rate against pool size", "前缀缓存命中率与块池大小"),
    "cap_pressure_title": ("What it costs: evictions and preemptions", "代价：淘汰与抢占"),
    "cap_axis_pool": ("pool size (blocks)", "块池大小（块）"),
    "cap_axis_hit": ("prefix-cache hit rate", "前缀缓存命中率"),
    "cap_blocks": ("blocks", "块"),
    "cap_hit_rate": ("hit rate", "命中率"),
    "cap_preemptions": ("preemptions", "抢占次数"),
    "cap_evictions_title": ("evictions (cached blocks reused)", "淘汰（被复用的已缓存块）"),
    "cap_preemptions_title": ("preemptions (pool too small)", "抢占（块池不够用）"),
    "cap_order_split": ("split (vLLM ≥ 0.24)", "split（vLLM ≥ 0.24）"),
    "cap_order_append": ("append (vLLM ≤ 0.23)", "append（vLLM ≤ 0.23）"),
    "cap_no_evict_mark": ("no evictions from here →", "从这里起不再淘汰 →"),
    "cap_how_title": ("How to read it", "怎么读这张图"),
    "cap_how": ("- Each point is one replay of the same workload with a pool of that many blocks; the "
                "hit rate is vLLM's: of the tokens of every request at its first admission, the share "
                "the prefix cache supplied (PrefixCacheStats hits / queries). A preempted request "
                "that comes back is looked up again, but vLLM counts that re-lookup apart "
                "(preempted_queries / preempted_hits), not in the rate.\n"
                "- **Where the curves meet, the free order no longer matters.** At the right end "
                "nothing cached is ever evicted (the dotted line), so both orders keep every prefix and "
                "reach the workload's ceiling: about the share of its prompt tokens that repeat an earlier "
                "prompt. "
                "They can meet earlier too, where what gets evicted is never asked for again.\n"
                "- **Where split is above append, the pool is tight.** When a request ends, split "
                "(vLLM ≥ 0.24) puts its blocks without a hash — a partly filled last block can never be "
                "a hit — at the head of the free queue, to be reused first, and its cached blocks at "
                "the tail, to be evicted last. Append (≤ 0.23) puts them all at the tail, so a new "
                "request takes cached prefixes while useless blocks wait: more evictions, fewer hits.\n"
                "- The leftmost pool fits the largest single request; smaller pools cannot run it. "
                "Preemptions mean the running requests did not fit at once: each costs a recompute, "
                "and its re-lookup (which mostly hits the request's own blocks) is shown beside the "
                "rate, never inside it.",
                "- 每个点是同一个负载在这么多块的块池里重放一次；命中率按 vLLM 的算法：每个请求第一次被"
                "接纳时，它的 token 中由前缀缓存提供的比例（PrefixCacheStats 的 hits / queries）。"
                "被抢占的请求回来时会重新查找一次，但 vLLM 把这次查找单独记账"
                "（preempted_queries / preempted_hits），不算进命中率。\n"
                "- **两条曲线重合的地方，释放顺序不再重要。** 在最右端，已缓存的块从不被淘汰（虚线处），"
                "两种顺序都保住了所有前缀，达到这个负载的上限：大约是提示词 token 中重复之前提示的比例。"
                "曲线也可能更早重合：那时被淘汰的块，之后再也没有请求用到。\n"
                "- **split 高于 append 的地方，块池很紧张。** 请求结束时，split（vLLM ≥ 0.24）把没有 hash "
                "的块（没填满的最后一块永远不会被命中）放到空闲队列的队首，最先被复用；把已缓存的块"
                "放到队尾，最后被淘汰。append（≤ 0.23）把它们都放到队尾，于是新请求会先拿走已缓存的"
                "前缀，而没用的块还在排队：淘汰更多，命中更少。\n"
                "- 最左边的块池刚好放得下最大的单个请求，更小的块池跑不了它。"
                "抢占说明运行中的请求不能同时放下：每次抢占都要重算；它回来时的重新查找（大多命中"
                "自己的块）显示在命中率旁边，从不算在里面。"),
    "cap_read_title": ("This plan", "这次的结果"),
    "cap_read_ceiling": ("With room to spare this workload hits {rate}; split gets there from {split} "
                         "blocks on, append from {append}.",
                         "块池足够大时，这个负载的命中率是 {rate}；split 从 {split} 个块起达到，"
                         "append 从 {append} 个块起达到。"),
    "cap_read_gap": ("Split leads most at {size} blocks: {split} against {append} ({points} points).",
                     "split 领先最多是在 {size} 个块时：{split} 对 {append}（高 {points} 个百分点）。"),
    "cap_read_no_gap": ("Split never beats append here: the free order does not matter for this workload.",
                        "这里 split 从未超过 append：对这个负载来说释放顺序无关紧要。"),
    "cap_read_meet": ("From {size} blocks on, both orders hit the same.",
                      "从 {size} 个块起，两种顺序的命中率相同。"),
    "cap_read_no_evict": ("From {size} blocks on, neither order evicts a cached block.",
                          "从 {size} 个块起，两种顺序都不再淘汰已缓存的块。"),
    "cap_numbers": ("The numbers", "具体数字"),
    "cap_col_pool": ("pool (blocks)", "块池（块）"),
    "cap_col_order": ("free order", "释放顺序"),
    "cap_col_hit": ("hit rate", "命中率"),
    "cap_col_hits": ("hit / asked tokens", "命中 / 查询 token"),
    "cap_col_evictions": ("evictions", "淘汰"),
    "cap_col_preemptions": ("preemptions", "抢占"),
    "cap_col_error": ("stopped early", "提前停止"),
})
