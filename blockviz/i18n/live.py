"""The words of live KV-event streams (blockviz.live, ``blockviz live | publish | events``, the
Live page): where a note is, what went wrong, what a subscriber cannot know, the page's labels."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    # where a note is about
    "live_where_line": ("line {n}", "第 {n} 行"),
    "live_where_message": ("message {n} ({src})", "消息 {n}（{src}）"),
    "live_where_rank": ("DP rank {n}", "DP rank {n}"),
    "live_where_seq": ("seq {n}", "seq {n}"),
    "live_where_event": ("event {n}", "事件 {n}"),
    # what went wrong (blockviz.live.stream / reducer / wire); every one is skipped, never fatal
    "live_note_frames": ("{detail}; message skipped", "{detail}；已跳过这条消息"),
    "live_note_seq_frame": ("{detail}; message skipped", "{detail}；已跳过这条消息"),
    "live_note_bad_msgpack": ("the payload is not msgpack ({detail}); batch skipped",
                              "负载不是 msgpack（{detail}）；已跳过这一批"),
    "live_note_batch_shape": ("not a KVEventBatch: {detail}; batch skipped",
                              "不是 KVEventBatch：{detail}；已跳过这一批"),
    "live_note_bad_seq": ("sequence number {seq} on the live stream (only a replay's end marker is "
                          "negative); message skipped",
                          "实时流上的序号为 {seq}（只有回放的结束标记是负数）；已跳过这条消息"),
    "live_note_unknown_type": ("unknown event type {detail}; event skipped",
                               "未知的事件类型 {detail}；已跳过这个事件"),
    "live_note_event_shape": ("an event that is neither a map nor an array ({detail}); skipped",
                              "事件既不是 map 也不是数组（{detail}）；已跳过"),
    "live_note_bad_event": ("cannot read the event ({detail}); skipped",
                            "无法读取这个事件（{detail}）；已跳过"),
    "live_note_signed_hashes": ("signed 64-bit hashes (an older vLLM): read as unsigned",
                                "有符号的 64 位哈希（较旧的 vLLM）：按无符号读取"),
    "live_note_tokens_range": (
        "{spec} group {group}: the store lists {hashes} hash(es) but its {tokens} token ids cover "
        "a different number of {block_size}-token blocks (a sliding-window group under retention 0 "
        "lists only the blocks it keeps): each hash's tokens and parent are unknown",
        "{spec} 组 {group}：这次存储列出 {hashes} 个哈希，但它的 {tokens} 个 token id 覆盖的 "
        "{block_size}-token 块数不同（保留间隔为 0 的滑动窗口组只列出它保留的块）：每个哈希的 "
        "token 和父块都未知"),
    "live_note_tokens_cut": ("blocks of {block_size} tokens: only the first {kept} tokens of each "
                             "hash are kept",
                             "每块 {block_size} 个 token：每个哈希只保留前 {kept} 个"),
    "live_note_hash_cap": ("{limit} hashes cached already: this store was not kept (memory bound)",
                           "已缓存 {limit} 个哈希：这次存储没有保留（内存上限）"),
    "live_note_restored_differently": ("hash {hash} stored again with another parent or other "
                                       "tokens", "哈希 {hash} 再次存储，但父块或 token 不同"),
    "live_note_removed_unknown": (
        "BlockRemoved of {hash} in {group}, which this subscriber never saw stored: it was cached "
        "before the subscriber joined, or in a batch it missed",
        "{group} 中 {hash} 的 BlockRemoved，但本订阅者从未见过它被存储：它在订阅者加入之前、"
        "或在错过的某一批中就已缓存"),
    "live_note_late_join": ("joined late: the first batch seen is seq {seen}, so seqs {first}..{last} "
                            "were missed; asked the replay socket for them",
                            "中途加入：看到的第一批是 seq {seen}，错过了 seq {first}..{last}；"
                            "已向回放 socket 请求"),
    "live_note_late_join_no_replay": ("joined late: the first batch seen is seq {seen}, so seqs "
                                      "{first}..{last} were missed (no replay socket)",
                                      "中途加入：看到的第一批是 seq {seen}，错过了 seq "
                                      "{first}..{last}（没有回放 socket）"),
    "live_note_gap": ("gap: seqs {first}..{last} did not arrive; asked the replay socket for them",
                      "缺口：seq {first}..{last} 没有到达；已向回放 socket 请求"),
    "live_note_gap_no_replay": ("gap: seqs {first}..{last} did not arrive (no replay socket)",
                                "缺口：seq {first}..{last} 没有到达（没有回放 socket）"),
    "live_note_lost": ("seqs {first}..{last} are lost: no replay returned them (its buffer keeps "
                       "only the last batches)",
                       "seq {first}..{last} 已丢失：回放没有返回它们（回放缓冲只保留最近的批）"),
    "live_note_restart": ("the live seq went back from {last}: a new publisher (the engine "
                          "restarted); the state starts over",
                          "实时 seq 从 {last} 回退：新的发布者（引擎重启了）；状态从头开始"),
    "live_note_bad_line": ("{detail}; line skipped", "{detail}；已跳过这一行"),
    "live_note_replay_timeout": ("the replay did not end within {seconds} s; what arrived is "
                                 "applied, the rest is lost",
                                 "回放在 {seconds} 秒内没有结束；已应用收到的部分，其余丢失"),
    "live_note_replay_overflow": ("the replay sent more than {limit} batches without ending; it "
                                  "was abandoned",
                                  "回放发送了超过 {limit} 批仍未结束；已放弃"),
    # what no subscriber can know (reducer.CANNOT_KNOW)
    "live_unknown_block_ids": ("block ids (no event carries one)", "块 id（没有事件携带它）"),
    "live_unknown_ref_counts": ("ref counts, and which requests share a block",
                                "引用计数，以及哪些请求共享一个块"),
    "live_unknown_hits": ("prefix-cache hits (they send nothing by default)",
                          "前缀缓存命中（默认不发送任何事件）"),
    "live_unknown_frees": ("free vs in use: finishing, aborting and preemption send nothing",
                           "空闲还是在用：完成、中止和抢占都不发送事件"),
    "live_unknown_free_queue": ("the free queue's order (it shows later, as the order of "
                                "BlockRemoved)",
                                "空闲队列的顺序（之后才以 BlockRemoved 的顺序显现）"),
    "live_unknown_unhashed": ("partial blocks and full blocks not yet cached",
                              "未满的块，以及还没缓存的满块"),
    "live_unknown_pool": ("the pool's size, free-block count and usage",
                          "块池的大小、空闲块数和使用率"),
    "live_unknown_before_join": ("what was cached before this subscriber joined (until it is "
                                 "removed)",
                                 "本订阅者加入之前已缓存的内容（直到它被移除）"),
    # blockviz events state / blockviz live: the state as text
    "live_group_header": ("{group}: {n} cached hash(es)", "{group}：缓存了 {n} 个哈希"),
    "live_cache_empty": ("(prefix cache empty)", "（前缀缓存为空）"),
    "live_cli_summary": ("{name}: {batches} batch(es) applied ({events} event(s), {messages} "
                         "message(s) read); {cached} hash(es) cached",
                         "{name}：应用了 {batches} 批（{events} 个事件，读了 {messages} 条消息）；"
                         "缓存了 {cached} 个哈希"),
    "live_cli_rank": ("data-parallel rank {rank}:", "数据并行 rank {rank}："),
    "live_cli_missing": ("missing seqs: {seqs}", "缺失的 seq：{seqs}"),
    "live_cli_none": ("none", "无"),
    "live_cli_restarts": ("publisher restarts seen: {n}", "看到的发布者重启：{n} 次"),
    "live_cli_notes": ("what went wrong ({n}):", "出过的问题（{n} 条）："),
    "live_cli_notes_more": ("... and {n} more (counted: {counts})", "……还有 {n} 条（计数：{counts}）"),
    "live_cli_cannot_know": ("what no subscriber can know (vLLM 0.33 sends nothing for it):",
                             "任何订阅者都无法知道的（vLLM 0.33 不为它们发送事件）："),
    "live_cli_no_file": ("{file}: cannot read the recording: {e}", "{file}：无法读取录制文件：{e}"),
    "live_cli_not_capture": ("{file}: not a recording (no {format} header and no message line)",
                             "{file}：不是录制文件（既没有 {format} 头，也没有消息行）"),
    # blockviz live
    "live_cli_socket": ("{endpoint}: cannot open the socket: {e}",
                        "{endpoint}：无法打开 socket：{e}"),
    "live_cli_record": ("{file}: cannot write the recording: {e}",
                        "{file}：无法写入录制文件：{e}"),
    "live_cli_listening": ("live: SUB {mode}s {endpoint} ({ranks} rank(s)), replay {replay}; "
                           "Ctrl+C stops",
                           "live：SUB {mode} {endpoint}（{ranks} 个 rank），回放 {replay}；"
                           "Ctrl+C 停止"),
    "live_cli_progress": ("live: {batches} batch(es), {events} event(s), {gaps} gap(s), {notes} "
                          "note(s); {cached} hash(es) cached",
                          "live：{batches} 批，{events} 个事件，{gaps} 个缺口，{notes} 条提示；"
                          "缓存了 {cached} 个哈希"),
    "live_cli_stopped_interrupted": ("live: stopped (interrupted)", "live：已停止（被中断）"),
    "live_cli_stopped_idle": ("live: stopped after {s} s without a message",
                              "live：{s} 秒没有消息，已停止"),
    "live_cli_stopped_max_batches": ("live: stopped after {n} batches", "live：{n} 批后停止"),
    # blockviz publish
    "publish_binds": ("binds", "绑定"),
    "publish_connects": ("connects to", "连接到"),
    "publish_sockets": ("publish: PUB {mode} {endpoint}; replay ROUTER {replay}; topic {topic!r}",
                        "publish：PUB {mode} {endpoint}；回放 ROUTER {replay}；topic {topic!r}"),
    "publish_all_interfaces": ("publish: WARNING: tcp://*:PORT binds on every interface; "
                               "tcp://[::ffff:127.0.0.1]:PORT binds on loopback only",
                               "publish：警告：tcp://*:PORT 在所有网络接口上绑定；"
                               "tcp://[::ffff:127.0.0.1]:PORT 只绑定回环地址"),
    "publish_step": ("publish: event {i}/{n} ({event}): {engines} engine step(s), {batches} "
                     "batch(es) sent{seqs}",
                     "publish：事件 {i}/{n}（{event}）：{engines} 个引擎步，发送 {batches} 批{seqs}"),
    "publish_teaching_only": ("publish: event {i} ({kind}) is a teaching-only form: vLLM's "
                              "scheduler never does this; its events are published anyway",
                              "publish：事件 {i}（{kind}）是仅用于教学的形式：vLLM 的调度器从不"
                              "这样做；它的事件照样发布"),
    "publish_rewind": ("publish: event {i} rewinds to {name}: a live engine cannot; the batches "
                       "sent since stay sent",
                       "publish：事件 {i} 回退到 {name}：真实引擎做不到；之后发出的批不会撤回"),
    "publish_restart": ("publish: event {i} restarts the engine: a new publisher, seqs from 0 "
                        "({n} queued event(s) never sent)",
                        "publish：事件 {i} 重启引擎：新的发布者，seq 从 0 开始（{n} 个排队的事件"
                        "不会发出）"),
    "publish_unsent": ("publish: {n} event(s) still queued ({types}): vLLM sends them only with "
                       "the next engine step's batch, and none followed",
                       "publish：仍有 {n} 个事件在排队（{types}）：vLLM 只会随下一个引擎步的批"
                       "发出它们，而之后没有引擎步"),
    "publish_done": ("publish: {n} batch(es) sent; answering replay requests for {s} s",
                     "publish：共发送 {n} 批；继续应答回放请求 {s} 秒"),
    # the Live page (blockviz.ui.live, blockviz.render.live)
    "page_live": ("Live", "实时"),
    "lv_title": ("Live: a running vLLM's prefix cache, from its KV events",
                 "实时：从 KV 事件看一个运行中的 vLLM 的前缀缓存"),
    "lv_intro": ("vLLM publishes every change to its prefix cache over ZeroMQ (--kv-events-config): "
                 "a block's hash stored, a hash removed, the cache cleared. This page subscribes to "
                 "an endpoint the server's operator allowed and draws what a subscriber can know: "
                 "the cached hashes as a forest of prefix chains.",
                 "vLLM 通过 ZeroMQ（--kv-events-config）发布前缀缓存的每一次变化：某个块的哈希被存储、"
                 "某个哈希被移除、整个缓存被清空。本页订阅服务器管理员允许的端点，画出订阅者能知道的"
                 "一切：把缓存的哈希画成一片前缀链森林。"),
    "lv_endpoint": ("Endpoint", "端点"),
    "lv_endpoint_help": ("Only the endpoints the server was started with (blockviz app --live "
                         "ENDPOINT ...; without any, tcp://127.0.0.1:5557).",
                         "只能选服务器启动时给定的端点（blockviz app --live ENDPOINT ...；"
                         "未给定时为 tcp://127.0.0.1:5557）。"),
    "lv_words": ("Token text from a lesson", "用课程的词显示 token"),
    "lv_words_help": ("A stream from `blockviz publish LESSON` uses that lesson's words; a real "
                      "model's token ids are shown as ids.",
                      "来自 `blockviz publish 课程` 的流使用该课程的词；真实模型的 token id 按 id 显示。"),
    "lv_words_none": ("(ids)", "（id）"),
    "lv_follow": ("Follow live", "实时跟随"),
    "lv_status_listen": ("{mode} {endpoint} since {since}; {age}",
                         "自 {since} 起 {mode} {endpoint}；{age}"),
    "lv_mode_bind": ("bound to", "绑定在"),
    "lv_mode_connect": ("connected to", "连接到"),
    "lv_status_error": ("Cannot open {endpoint}: {e}", "无法打开 {endpoint}：{e}"),
    "lv_status_paused": ("Paused: the picture no longer updates by itself; the subscriber keeps "
                         "receiving.", "已暂停：画面不再自动更新；订阅者仍在接收。"),
    "lv_no_message": ("no message yet", "还没有收到消息"),
    "lv_last_message": ("last message {s} s ago", "上一条消息在 {s} 秒前"),
    "lv_cached": ("cached now", "当前缓存"),
    "lv_stored": ("stored", "存储"),
    "lv_removed": ("removed", "移除"),
    "lv_cleared": ("cleared", "清空"),
    "lv_batches": ("batches", "批"),
    "lv_events_n": ("{n} events", "{n} 个事件"),
    "lv_per_s": ("{v}/s over 10 s", "近 10 秒 {v}/秒"),
    "lv_rates_axis": ("hashes per second, the last {s} s (top: {top})",
                      "每秒哈希数，最近 {s} 秒（最高 {top}）"),
    "lv_group": ("{group} ({kind}): {n} cached hash(es), {trees} tree(s)",
                 "{group}（{kind}）：缓存了 {n} 个哈希，{trees} 棵树"),
    "lv_rank": ("DP rank {rank}", "DP rank {rank}"),
    "lv_trees": ("{n} tree(s)", "{n} 棵树"),
    "lv_tenant_none": ("no LoRA, no cache_salt", "无 LoRA、无 cache_salt"),
    "lv_tenant_lora": ("LoRA {lora}", "LoRA {lora}"),
    "lv_tenant_salt": ("cache_salt {salt}", "cache_salt {salt}"),
    "lv_tenant_both": ("LoRA {lora}, cache_salt {salt}", "LoRA {lora}，cache_salt {salt}"),
    "lv_blocks": ("{n} blocks", "{n} 块"),
    "lv_copies": ("{n} in two blocks", "{n} 个存在两个块里"),
    "lv_parent_gone": ("parent not cached", "父块未缓存"),
    "lv_parent_unknown": ("place in the chain unknown", "在链中的位置未知"),
    "lv_node_title": ("{first} … {last}: stored at seq {seq}, {kind}, {bs}-token blocks",
                      "{first} … {last}：于 seq {seq} 存储，{kind}，每块 {bs} 个 token"),
    "lv_more_blocks": ("… {n} more blocks", "……还有 {n} 块"),
    "lv_more_hashes": ("… {n} more cached hashes not drawn", "……还有 {n} 个缓存的哈希未画出"),
    "lv_removed_recent": ("Removed lately (newest first):", "最近移除（最新的在前）："),
    "lv_empty": ("Nothing cached is known yet.", "还不知道任何缓存内容。"),
    "lv_warn_late": ("Joined late (seqs {seqs} missed): no snapshot exists, so what was cached "
                     "before joining is unknown until it is removed ({n} removal(s) of hashes never "
                     "seen so far).",
                     "中途加入（错过了 seq {seqs}）：不存在快照，所以加入之前缓存的内容在被移除之前都"
                     "是未知的（目前已有 {n} 次移除了从未见过的哈希）。"),
    "lv_warn_gaps": ("{n} gap(s) no replay filled: seqs {seqs}; what they stored or removed is "
                     "unknown.",
                     "{n} 个缺口没有被回放补上：seq {seqs}；其中存储或移除了什么是未知的。"),
    "lv_warn_restart": ("The publisher restarted {n} time(s) (its seq went back): the picture "
                        "started over.",
                        "发布者重启了 {n} 次（seq 回退）：画面已从头开始。"),
    "lv_gaps_filled": ("{n} gap(s) in the live stream, filled from the replay socket.",
                       "实时流中有 {n} 个缺口，已由回放 socket 补上。"),
    "lv_notes": ("What went wrong: {n} note(s)", "出过的问题：{n} 条"),
    "lv_cannot": ("What no subscriber can know", "任何订阅者都无法知道的"),
    # a recording on the board (blockviz.live.replay, blockviz.render.replay, the Live page)
    "rp_at_line": (", line {n}", "，第 {n} 行"),
    "rp_err_too_large": ("{mb} MB; a recording opened here may be at most {limit} MB (record a "
                         "shorter stretch: blockviz live --until-idle S, or --max-batches N)",
                         "{mb} MB；这里能打开的录制最多 {limit} MB（请录短一些：blockviz live "
                         "--until-idle S 或 --max-batches N）"),
    "rp_err_empty": ("the file is empty", "文件是空的"),
    "rp_err_not_recording": ("not a KV-event recording ({format}: a header line, then one JSON "
                             "line per message): {why}",
                             "不是 KV 事件录制（{format}：先是一行头部，然后每条消息一行 JSON）："
                             "{why_zh}"),
    "rp_why_json": ("it is not JSON", "它不是 JSON"),
    "rp_why_frames": ("it is JSON, but neither a header nor a message (no \"frames\" list)",
                      "它是 JSON，但既不是头部也不是消息（没有 \"frames\" 列表）"),
    "rp_err_no_batch_note": ("no batch of KV events could be read; the first problem: {note}",
                             "读不出任何一批 KV 事件；第一个问题：{note_zh}"),
    "rp_err_no_batch": ("no batch of KV events in it ({format})",
                        "其中没有任何一批 KV 事件（{format}）"),
    "lv_source": ("Source", "来源"),
    "lv_source_live": ("A running vLLM", "运行中的 vLLM"),
    "lv_source_recording": ("A recording", "一段录制"),
    "rp_upload": ("Open a recording (blockviz live --record FILE)",
                  "打开一段录制（blockviz live --record FILE）"),
    "rp_upload_help": ("A vllm-kv-events-capture/1 file: what `blockviz live --record` writes. It "
                       "plays on the board, one batch a step; nothing is kept on the server.",
                       "一个 vllm-kv-events-capture/1 文件：`blockviz live --record` 写的就是它。"
                       "它在看板上回放，每批一步；服务器上不保留任何东西。"),
    "rp_intro": ("A recording of vLLM's KV events, batch by batch: the cached hashes after each "
                 "batch as a forest of prefix chains, the batch's events beside it.",
                 "vLLM 的 KV 事件录制，逐批回放：每一批之后缓存的哈希画成前缀链森林，旁边是这一批的"
                 "事件。"),
    "rp_none_yet": ("Open a recording in the sidebar: a file `blockviz live ENDPOINT --record "
                    "FILE` wrote.",
                    "在侧边栏打开一段录制：`blockviz live ENDPOINT --record FILE` 写出的文件。"),
    "rp_server": ("Recordings on this server", "本服务器上的录制"),
    "rp_server_none": ("(none: upload one)", "（不用：上传一个）"),
    "rp_server_help": ("The files the server was started with (blockviz app --recording FILE); "
                       "an uploaded file is shown instead while there is one.",
                       "服务器启动时给定的文件（blockviz app --recording FILE）；上传了文件时显示"
                       "上传的文件。"),
    "rp_err_unreadable": ("cannot read it: {e}", "无法读取：{e}"),
    "rp_reading": ("Reading {name} …", "正在读取 {name} ……"),
    "rp_upload_limit": ("At most {mb} MB; the first {steps} batches play.",
                        "最多 {mb} MB；回放前 {steps} 批。"),
    "rp_opened": ("{name}: {n} batch(es) from {messages} message(s).",
                  "{name}：{messages} 条消息中的 {n} 批。"),
    "rp_unread": ("Only the first {n} play: {unread} more message(s) were not read.",
                  "只回放前 {n} 批：另有 {unread} 条消息没有读取。"),
    "rp_noted": ("{n} note(s): see each batch's notes (?).", "{n} 条说明：见每一批的说明（?）。"),
    "rp_export": ("Export HTML", "导出 HTML"),
    "rp_export_help": ("The board as one offline HTML file (both languages), as `blockviz export "
                       "FILE.jsonl` writes it.",
                       "把看板存为一个离线 HTML 文件（两种语言），与 `blockviz export FILE.jsonl` "
                       "写出的相同。"),
    "rp_title": ("{name}: vLLM's KV events, batch by batch", "{name}：vLLM 的 KV 事件，逐批回放"),
    "rp_forest": ("Cached hashes after this batch: the prefix forest",
                  "这一批之后缓存的哈希：前缀森林"),
    "rp_ops": ("This batch's events (vLLM's names)", "这一批的事件（vLLM 的名字）"),
    "rp_keys": ("← → batch · Home End first, last · hover a hash to find its events, an event to "
                "find its hashes · ? notes",
                "← → 上一批/下一批 · Home End 第一批/最后一批 · 指向一个哈希找到它的事件，指向一个"
                "事件找到它的哈希 · ? 说明"),
    "rp_why": ("notes", "说明"),
    "rp_why_title": ("This batch's notes, and what no subscriber can know (? or W)",
                     "这一批的说明，以及任何订阅者都无法知道的（? 或 W）"),
    "rp_root": ("(start of a sequence)", "（序列的开头）"),
    "rp_stored_tokens": ("{n} tokens, {bs} a block", "{n} 个 token，每块 {bs} 个"),
    "rp_cleared_eff": ("every GPU group's cached hashes forgotten (a CPU tier keeps its own)",
                       "所有 GPU 组缓存的哈希都被清空（CPU 层保留自己的）"),
    "rp_no_events": ("This batch had no events.", "这一批没有事件。"),
    "rp_hash_title": ("{hash}, stored at seq {seq}", "{hash}，于 seq {seq} 存储"),
    "rp_removed_here": ("Removed by this batch:", "这一批移除了："),
    "rp_empty": ("Nothing is cached after this batch.", "这一批之后没有任何缓存。"),
    "rp_more_rows": ("… only the first {rows} rows are drawn", "……只画出前 {rows} 行"),
    "rp_hidden": ("… {n} older cached hash(es) not drawn (the newest {drawn} are)",
                  "……还有 {n} 个更早缓存的哈希未画出（画出的是最新的 {drawn} 个）"),
    "rp_step": ("batch {k} of {n}", "第 {k} 批，共 {n} 批"),
    "rp_event_label": ("seq {seq}: {n} event(s)", "seq {seq}：{n} 个事件"),
    "rp_cap_cleared": ("AllBlocksCleared: the GPU prefix cache was reset",
                       "AllBlocksCleared：GPU 前缀缓存被重置"),
    "rp_cap_stored_one": ("1 hash stored", "存储了 1 个哈希"),
    "rp_cap_stored_many": ("{n} hashes stored", "存储了 {n} 个哈希"),
    "rp_cap_removed_one": ("1 hash removed (evicted: its block was reused)",
                           "移除了 1 个哈希（被淘汰：它的块被重新使用）"),
    "rp_cap_removed_many": ("{n} hashes removed (evicted: their blocks were reused)",
                            "移除了 {n} 个哈希（被淘汰：它们的块被重新使用）"),
    "rp_cap_copies_one": ("1 removal of one copy of a hash still cached in another block",
                          "1 次移除的只是一个哈希的一份拷贝，它仍缓存在另一个块里"),
    "rp_cap_copies_many": ("{n} removals of one copy of a hash still cached in another block",
                           "{n} 次移除的只是一个哈希的一份拷贝，它仍缓存在另一个块里"),
    "rp_cap_unknown_one": ("1 removal of a hash never seen stored (cached before the recording "
                           "began)", "1 次移除的哈希从未见过存储（录制开始前就已缓存）"),
    "rp_cap_unknown_many": ("{n} removals of hashes never seen stored (cached before the "
                            "recording began)", "{n} 次移除的哈希从未见过存储（录制开始前就已缓存）"),
    "rp_cap_restart": ("the publisher restarted (its seq went back to {seq}): the picture starts "
                       "over", "发布者重启了（seq 回到 {seq}）：画面从头开始"),
    "rp_cap_nothing": ("nothing changed in the cache", "缓存没有变化"),
    "rp_cap_cached_one": (" — 1 hash cached now.", "——现在缓存了 1 个哈希。"),
    "rp_cap_cached_many": (" — {n} hashes cached now.", "——现在缓存了 {n} 个哈希。"),
    "rp_start": ("Start", "开始"),
    "rp_start_where": ("before the first batch", "第一批之前"),
    "rp_cap_start": ("The subscriber has received nothing yet: nothing cached is known (vLLM sends "
                     "no snapshot). Step through the batches with →.",
                     "订阅者还什么都没收到：不知道任何缓存内容（vLLM 不发送快照）。按 → 逐批查看。"),
    "rp_start_label": ("start", "开始"),
    "rp_step_notes": ("What this batch raised:", "这一批引出的问题："),
    "rp_leg_new": ("stored by this batch", "这一批存储的"),
    "rp_leg_gone": ("removed by this batch", "这一批移除的"),
    "rp_leg_copies": ("cached in that many blocks", "缓存在这么多个块里"),
}
