"""Every word blockviz shows, in English and 中文.

``t(key, lang, **fields)`` looks a label up; keys are language-neutral (widget keys and tests use
them, never the text). Narration of what the engine did lives in ``blockviz.narrate``.
"""
from __future__ import annotations

LANGS = ("en", "zh")
LANG_NAMES = {"en": "English", "zh": "中文"}

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
    "null_block": ("null", "空块"),
    "block": ("block", "块"),
    "ref": ("ref", "引用"),
    "head": ("head", "队首"),
    "tail": ("tail", "队尾"),
    "empty": ("(empty)", "（空）"),
    "none": ("(none)", "（无）"),
    "next_victim": ("next to be taken", "下一个被取走"),
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


def t(key: str, lang: str, **fields) -> str:
    en, zh = STRINGS[key]
    text = zh if lang == "zh" else en
    return text.format(**fields) if fields else text


def event_label(step, lang: str) -> str:
    """A short label for a step's event, e.g. "A arrives" / "A 到达"."""
    if step is None:
        return t("ev_start", lang)
    kind, args = step.kind, step.args
    if kind is None:
        return t("ev_note", lang)
    if kind == "arrive":
        return t("ev_arrive", lang, id=args.id)
    if kind == "decode":
        return t("ev_decode", lang, n=args.steps)
    if kind == "step":
        return t("ev_step", lang, n=args)
    if kind == "finish":
        return t("ev_finish" if len(args) == 1 else "ev_finish_many", lang, ids=", ".join(args))
    if kind == "preempt":
        return t("ev_preempt", lang, id=args)
    if kind in ("checkpoint", "rewind"):
        return t(f"ev_{kind}", lang, name=args)
    return t(f"ev_{kind}", lang)


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
    "preempted_times": ("preempted ×{n}", "被抢占 ×{n}"),
    "no_requests": ("No requests yet.", "还没有请求。"),
    "ext_lru": ("least recently used first (dropped first)", "最久未用的在前（最先被丢弃）"),
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
