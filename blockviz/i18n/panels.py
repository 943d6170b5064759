"""The words of a step's panels, as every view shows them (the board, the terminal, the export):
panel titles and legends, the words on blocks, queue cells and request rows, events, the engine's
steps."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    # how a sentence joins its clauses and a list its items
    "sep_clauses": ("; ", "；"),
    "sep_items": (", ", "、"),
    # panels
    "gpu_blocks": ("GPU blocks", "GPU 块"),
    "free_queue": ("Free queue", "空闲队列"),
    "free_queue_hint": ("head = taken first · tail = evicted last",
                        "左端先被取走 · 右端最后被淘汰"),
    "hash_table": ("Prefix hash table", "前缀 hash 表"),
    "requests": ("Requests", "请求"),
    "block_table": ("block table", "块表"),
    "engine_did": ("What the engine did", "引擎做了什么"),
    "payload": ("KV payload", "KV 数据"),
    "metrics": ("Metrics over the timeline", "指标随时间变化"),
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
    # a hybrid model's KV-cache groups (config.kv_cache_groups), as the board draws them
    "grp_tag": ("g{g}", "g{g}"),
    "grp_full_attention": ("full", "全注意力"),
    "grp_sliding_window": ("sliding window {n}", "滑动窗口 {n}"),
    "grp_chunked_local_attention": ("chunked local {n}", "分块局部 {n}"),
    "grp_short_full_attention": ("full", "全注意力"),
    "grp_short_sliding_window": ("window {n}", "窗口 {n}"),
    "grp_short_chunked_local_attention": ("chunk {n}", "分块 {n}"),
    "grp_title": ("KV-cache group {g}: {name}", "KV 缓存组 {g}：{name}"),
    "grp_legend": ("KV-cache groups (one table each per request, one shared pool)",
                   "KV 缓存组（每个请求每组一张块表，共用一个块池）"),
    "grp_null_entry": ("null block: this group no longer needs the slot (its tokens are outside the "
                       "window or chunk), so vLLM's null_block (block 0) stands in",
                       "null 块：这个组不再需要这个位置（它的 token 已在窗口或分块之外），由 vLLM 的 "
                       "null_block（块 0）占位"),
    "grp_null_short": ("0 = slot no longer needed (null block)", "0 = 不再需要的位置（null 块）"),
    "grp_key": ("H3#1 = H3 cached for group 1", "H3#1 = 组 1 登记的 H3"),
    "grp_key_title": ("The prefix hash table is keyed by hash and group (vLLM's "
                      "BlockHashWithGroupId): one prompt's block hash is one key per group that "
                      "caches it.",
                      "前缀 hash 表的键是 hash 加组号（vLLM 的 BlockHashWithGroupId）：同一个块 hash "
                      "在每个登记它的组里各是一个键。"),
    "hash_group": ("hash#group", "hash#组"),
    "tokens": ("tokens", "个 token"),
    "status_waiting": ("waiting", "等待中"),
    "status_running": ("running", "运行中"),
    "status_preempted": ("preempted", "被抢占"),
    "status_finished": ("finished", "已结束"),
    "usage": ("usage", "占用率"),
    "ext_hit_rate": ("external hit rate", "外部命中率"),
    "evictions": ("evictions", "淘汰次数"),
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
    "ev_abort": ("abort {ids}", "中止 {ids}"),
    "ev_preempt": ("preempt {id}", "抢占 {id}"),
    "ev_reset_prefix_cache": ("reset prefix cache", "重置前缀缓存"),
    "ev_checkpoint": ("checkpoint “{name}”", "存档 “{name}”"),
    "ev_rewind": ("rewind to “{name}”", "回到存档 “{name}”"),
    "ev_restart": ("restart the engine", "重启引擎进程"),
    "ev_note": ("note", "说明"),

    # the engine's steps
    "engine_steps": ("Engine steps", "引擎步"),
    "teaching_only": ("vLLM's scheduler would not do this", "vLLM 的调度器不会这样做"),
    "teaching_only_why": (
        "A teaching device: vLLM's scheduler does not do this. It schedules running requests first "
        "while the token budget lasts, and under the default FCFS policy preempts the last running "
        "request when an allocation fails (the lowest priority under the priority policy).",
        "这是教学演示，vLLM 的调度器不会这样做：它在 token 预算用完之前先调度运行中的请求；在默认的 "
        "FCFS 策略下，分配失败时抢占最后一个运行中的请求（priority 策略下抢占优先级最低的请求）。"),
    "status_waiting_for_remote_kvs": ("waiting for remote KV", "等待远端 KV"),
    "hit_rate_vllm": ("hit rate (vLLM counters: hits / queries)", "命中率（vLLM 计数器：hits / queries）"),
    "resumed_lookups": ("resumed re-lookups", "恢复时的重新查找"),
    "engine_did_head": ("What the engine did:", "引擎做了什么："),
}
