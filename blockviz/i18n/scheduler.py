"""Words of the scheduler's engine steps: key -> (English, 中文)."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    "engine_steps": ("Engine steps", "引擎步"),
    "teaching_only": ("vLLM's scheduler would not do this", "vLLM 的调度器不会这样做"),
    "teaching_only_why": (
        "A teaching device: vLLM always schedules every running request and preempts only the "
        "last one, and only when memory runs out.",
        "这是教学演示：vLLM 每一步都会调度所有运行中的请求，只在显存不够时才抢占，而且只抢占最后一个。"),
    "status_waiting_for_remote_kvs": ("waiting for remote KV", "等待远端 KV"),
    "finish_reason_length": ("length cap", "长度上限"),
    "finish_reason_abort": ("aborted", "被中止"),
    "hit_rate_vllm": ("hit rate (vLLM)", "命中率（vLLM）"),
    "resumed_lookups": ("resumed re-lookups", "恢复时的重新查找"),
    "async_lag": ("outputs one step late (async scheduling)", "输出晚一步（异步调度）"),
}
