"""The words of the Author page: the page, its editor (blockviz/ui/editor.py, and the quick check
in the browser), the format reference, and the share box."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
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
    "open_in_player": ("Open in the player", "在播放器中打开"),
    "open_in_player_stale": ("The preview shows an earlier text: once the text in the editor runs, "
                             "it opens in the player.",
                             "预览显示的是之前的文本：编辑器里的文本运行成功后，才能在播放器中打开它。"),
    "preview_stale": ("This preview is of the last text that ran, not of the text in the editor: "
                      "“Open in the player” waits until that text runs.",
                      "这个预览来自上一次运行成功的文本，而不是编辑器里现在的文本：等现在的文本运行成功后，"
                      "才能“在播放器中打开”。"),
    "open_in_player_help": ("Step through this scenario with every panel, step into events, self-check.",
                            "用完整的播放器逐步查看这个场景：所有面板、单步进入、自测。"),
    "preview_not_run": ("The preview did not run", "预览没有运行"),
    "preview_memory_cap": ("The preview stopped at its memory cap", "预览在内存上限处被终止"),
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
    "snip_note": ("What to look at in this step.", "这一步要看什么。"),     # the note snippet's text
    "evh_admit": ("One engine step (the same as step: 1).", "一个引擎步（等同于 step: 1）。"),
    "evh_decode": ("N engine steps. Teaching-only with requests: [...]: only those running requests are "
                   "scheduled and nothing is admitted — vLLM never does that.",
                   "N 个引擎步。带 requests: [...] 时是教学演示：只调度列出的运行中请求、不接纳新请求——"
                   "vLLM 从不这样做。"),
    "evh_step": ("N vLLM engine steps: running requests first (a decode token or the next prefill "
                 "chunk) within the token budget, then waiting ones if nothing was preempted.",
                 "N 个 vLLM 引擎步：在 token 预算内先调度运行中的请求（一个解码 token 或 prefill 的"
                 "下一块），没有发生抢占时再接纳等待中的请求。"),
    "evh_abort": ("The client aborts the request (FINISHED_ABORTED): freed exactly as a finish is.",
                  "客户端中止请求（FINISHED_ABORTED）：释放方式与正常结束完全相同。"),
    "evh_finish": ("The request ends: its blocks are freed (table reversed). A waiting request is just "
                   "removed.",
                   "请求结束：释放它的块（块表倒序）。等待中的请求直接移除。"),
    "evh_preempt": ("Teaching-only (under its default FCFS policy vLLM preempts the last running "
                    "request when an allocation fails): free a running request's blocks, reset its "
                    "progress, put it at the front of the waiting queue.",
                    "教学演示（在默认的 FCFS 策略下，vLLM 在分配失败时抢占最后一个运行中的请求）：释放一个"
                    "运行中请求的块，计算进度清零，放回等待队列最前面。"),
    "evh_reset_prefix_cache": ("BlockPool.reset_prefix_cache(): drop every hash (refused while requests "
                               "hold blocks).",
                               "BlockPool.reset_prefix_cache()：清掉所有 hash（有请求持有块时会失败）。"),
    "evh_checkpoint": ("Save the whole engine state under a name.", "用一个名字保存整个引擎状态。"),
    "evh_rewind": ("Restore a saved state (tensors included).", "恢复到某个存档（包括张量）。"),
    "evh_restart": ("blockviz extension: a new engine process with the same config (empty GPU cache, "
                    "NONE_HASH re-derived). The external tier is kept, standing for a tier that "
                    "outlives the engine (vLLM's file-system tier on a shared root_dir); vLLM's own CPU "
                    "tier would be empty. Every request must have finished.",
                    "用同样的配置启动新的引擎进程：GPU 缓存清空，NONE_HASH 重新推导；外部缓存层保留，"
                    "代表一个比引擎活得久的缓存层（vLLM 在共享 root_dir 上的文件系统层），vLLM 自己的 "
                    "CPU 层会是空的。所有请求必须已经结束。"),
    "evh_note": ("A narration step: no state change.", "只有说明的步骤：状态不变。"),
    "ph_tokens": ("Token ids (0–65535).", "token id（0–65535）。"),
    "ph_text": ("Words, one token each (the words are shown on the blocks).",
                "单词，每个词一个 token（块上会显示这些词）。"),
    "ph_same_as": ("The first N tokens of an earlier request (its prompt, then its output).",
                   "之前某个请求的前 N 个 token（先是 prompt，再是输出）。"),
    "ph_random": ("N seeded random tokens.", "N 个随机 token（由种子决定）。"),

    # the Author page's share box
    "share_title": ("Share", "分享"),
    "share_link": ("Link to this scenario (opens the player on it; nothing is stored on the server)",
                   "这个场景的链接（在播放器中打开它；服务器上不保存任何东西）"),
    "share_help": ("The whole scenario is compressed into the link itself, so the link works as long "
                   "as the app does, on any server, after a restart too. It opens at step 0; add "
                   "&step=K to open it at step K (lang= chooses the language).",
                   "整个场景被压缩在链接本身里，所以只要有这个应用，链接在任何服务器上、重启之后都能打开。"
                   "它从第 0 步打开；在末尾加上 &step=K 就从第 K 步打开（lang= 决定语言）。"),
    "share_embed": ("Embed it in a course page (an <iframe>)", "嵌入课程网页（<iframe>）"),
    "share_size": ("{n:,} of {limit:,} characters.", "{n:,} / {limit:,} 个字符。"),
    "share_invalid": ("The link appears once the scenario is valid.", "场景合法后这里会出现链接。"),
    "share_too_long": ("This scenario does not fit in a link: the link would be {n:,} characters, and a "
                       "link holds at most {limit:,} (about 8 KB). Download the file (“Download .yaml”) "
                       "and send it instead, or make the scenario shorter (fewer steps or notes).",
                       "这个场景放不进链接：链接会有 {n:,} 个字符，而链接最多 {limit:,} 个字符（约 8 KB）。"
                       "请下载文件（“下载 .yaml”）发给别人，或者把场景写短一些（少一些步骤或说明）。"),

    # the editor (blockviz/ui/editor.py)
    "ed_checking": ("checking…", "检查中…"),
    "ed_ok": ("no errors", "没有错误"),
    "ed_line": ("line {line}", "第 {line} 行"),
    "ed_complete_hint": ("Ctrl+Space: complete an event or field name", "Ctrl+Space：补全事件名或字段名"),
    "ed_browser_note": ("quick check in the browser", "浏览器里的快速检查"),
    "num_blocks_hint": ("config.num_blocks is at most {limit:,} (the usable GPU blocks; block 0, the "
                        "null block, is added). Use a smaller number: a lesson needs a few blocks, a "
                        "capacity study a few thousand.",
                        "config.num_blocks 最大为 {limit:,}（可用的 GPU 块数；0 号 null 块会另外加上）。"
                        "请用小一些的数："
                        "一节课只需要几个块，容量研究也只需要几千个。"),
    "block_size_hint": ("config.block_size is at most {limit:,} tokens per block (vLLM's usual sizes are "
                        "16 or 32). Use a smaller block size.",
                        "config.block_size 每块最多 {limit:,} 个 token（vLLM 常用 16 或 32）。"
                        "请用小一些的块大小。"),

    # the editor's quick check in the browser (the loader's message replaces it a moment later)
    "ed_q_tab": ("a tab: YAML indents with spaces", "这里用了制表符：YAML 只能用空格缩进"),
    "ed_q_field": ("unknown field '{f}'", "未知字段 '{f}'"),
    "ed_q_event": ("unknown event '{e}'", "未知事件 '{e}'"),
    "ed_q_close": ("'{c}' closes nothing here", "这里的 '{c}' 没有对应的开括号"),
    "ed_q_open": ("not closed: a '{c}' is missing", "没有闭合：缺少 '{c}'"),
    "ed_q_quote": ("a quote is not closed", "引号没有闭合"),
}
