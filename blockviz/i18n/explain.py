"""The words of the miss explainer (``blockviz.teach.explain``): a name per category of a prompt
split (``xc_<category>``) and a sentence per category (``xs_<category>``), filled from the
split's detail; and the words of vLLM's metrics panel (``vm_*``)."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    "xs_head": ("{rid} looked up {n} tokens: {summary}",
                "{rid} 查找了 {n} 个 token：{summary}"),
    "xs_head_resumed": ("{rid}, resumed after a preemption, looked up {n} tokens again (vLLM counts "
                        "this apart, in preempted_*): {summary}",
                        "{rid} 被抢占后恢复，重新查找了 {n} 个 token（vLLM 把这次单独记在 preempted_* "
                        "里）：{summary}"),
    "why_missed": ("Hit or miss", "命中与否"),
    "split_title": ("prompt split", "提示词拆分"),
    "split_resumed_title": ("re-lookup after preemption", "抢占后的重新查找"),
    # the categories, short
    "xc_hit": ("hit", "命中"),
    "xc_external_hit": ("external", "外部命中"),
    "xc_last_token": ("last-token rule", "末 token 规则"),
    "xc_partial_block": ("partial block", "不满的块"),
    "xc_cold": ("cold", "从未算过"),
    "xc_evicted": ("evicted", "已被驱逐"),
    "xc_different_key": ("different key", "键不同"),
    "xc_window": ("window", "窗口"),
    "xc_skipped": ("skipped", "不读缓存"),
    # a sentence per category
    "xs_hit": ("{n} tokens were found in the GPU prefix cache ({blocks}).",
               "{n} 个 token 在 GPU 前缀缓存中命中（{blocks}）。"),
    "xs_external_hit": ("{n} tokens came from the external tier ({medium}).",
                        "{n} 个 token 从外部缓存层（{medium}）载入。"),
    "xs_last_token": ("{n} tokens, the last full block, are recomputed: vLLM stops the lookup at "
                      "num_tokens − 1 to compute the last token's logits.",
                      "{n} 个 token（最后一个满块）要重算：vLLM 的查找止于 num_tokens − 1，以便算出最后"
                      "一个 token 的 logits。"),
    "xs_partial_block": ("{n} tokens fill less than a block: a partial block is never cached.",
                         "{n} 个 token 不足一个块：不满的块从不缓存。"),
    "xs_partial_block_one": ("1 token fills less than a block: a partial block is never cached.",
                             "1 个 token 不足一个块：不满的块从不缓存。"),
    "xs_cold": ("{n} tokens: no request had computed this prefix before.",
                "{n} 个 token：之前没有请求算过这段前缀。"),
    "xs_cold_pending": ("{n} tokens: {ids} was still computing this prefix (not cached yet).",
                        "{n} 个 token：{ids} 还在计算这段前缀（尚未缓存）。"),
    "xs_evicted_allocation": ("{n} tokens: {blocks} held them (cached by {req} at step {s}); "
                              "{taker}'s allocation reused the block at step {t}.",
                              "{n} 个 token：{blocks} 曾保存它们（{req} 在第 {s} 步缓存）；第 {t} 步 "
                              "{taker} 分配新块时复用了它。"),
    "xs_evicted_reset_prefix_cache": ("{n} tokens: {blocks} held them (cached by {req} at step "
                                      "{s}); reset_prefix_cache cleared every hash at step {t}.",
                                      "{n} 个 token：{blocks} 曾保存它们（{req} 在第 {s} 步缓存）；"
                                      "第 {t} 步 reset_prefix_cache 清掉了所有 hash。"),
    "xs_evicted_restart": ("{n} tokens: {blocks} held them (cached by {req} at step {s}); the "
                           "engine restarted at step {t} with an empty GPU cache.",
                           "{n} 个 token：{blocks} 曾保存它们（{req} 在第 {s} 步缓存）；第 {t} 步"
                           "引擎重启，GPU 缓存清空。"),
    "xs_evicted_evict_blocks": ("{n} tokens: {blocks} held them (cached by {req} at step {s}); "
                                "the connector invalidated them at step {t}.",
                                "{n} 个 token：{blocks} 曾保存它们（{req} 在第 {s} 步缓存）；第 {t} 步 "
                                "connector 让它们失效。"),
    "xs_different_key": ("{n} tokens: the same tokens as {req}'s, but another {which}: a "
                         "different key.",
                         "{n} 个 token：与 {req} 的 token 相同，但 {which} 不同：键不同。"),
    "xs_window": ("{n} tokens: full attention had them, but KV-cache group {g} (a sliding "
                  "window) lacked block {b} of the run it needs ({why}).",
                  "{n} 个 token：全注意力组有它们，但 KV 缓存组 {g}（滑动窗口）缺少它需要的那一段里的"
                  "块 {b}（{why}）。"),
    "xs_window_not_retained": ("never kept there: the retention interval caches few such blocks",
                               "那里从未保留：保留间隔只缓存少数这样的块"),
    "xs_window_evicted": ("evicted there", "在那里已被驱逐"),
    "xs_window_cold": ("never computed", "从未算过"),
    "xs_skipped_prompt_logprobs": ("{n} tokens: the request asks for prompt logprobs, so vLLM does "
                                   "not read the prefix cache for it (it still writes it).",
                                   "{n} 个 token：这个请求要 prompt logprobs，vLLM 不为它读取前缀缓存"
                                   "（但仍会写入）。"),
    "xs_skipped_skip_reading_prefix_cache": ("{n} tokens: the request skips reading the prefix "
                                             "cache (skip_reading_prefix_cache).",
                                             "{n} 个 token：这个请求跳过读取前缀缓存"
                                             "（skip_reading_prefix_cache）。"),
    "xs_skipped_caching_disabled": ("{n} tokens: prefix caching is off.",
                                    "{n} 个 token：前缀缓存已关闭。"),
    "xs_behind_miss": ("{n} tokens are still cached ({blocks}), but the lookup stops at the first "
                       "miss before them.",
                       "{n} 个 token 仍在缓存中（{blocks}），但查找在它们之前的第一个未命中处就停止了。"),
    "xw_cache_salt": ("cache_salt", "cache_salt"),
    "xw_lora": ("LoRA adapter", "LoRA 适配器"),
    "xw_mm": ("multimodal item", "多模态项"),
    "xw_hash_seed": ("NONE_HASH (hash seed)", "NONE_HASH（hash 种子）"),
    "x_and": (" and ", "和"),
}
