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
    "ev_finish": ("{ids} finish", "{ids} 结束"),
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
        return t("ev_finish", lang, ids=", ".join(args))
    if kind == "preempt":
        return t("ev_preempt", lang, id=args)
    if kind in ("checkpoint", "rewind"):
        return t(f"ev_{kind}", lang, name=args)
    return t(f"ev_{kind}", lang)
