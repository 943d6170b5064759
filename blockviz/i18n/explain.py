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
    "xc_evicted": ("evicted", "已淘汰"),
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
    "xs_window_evicted": ("evicted there", "在那里已淘汰"),
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
    # vLLM's metrics panel (render/metrics.py): the name, the value, what it means
    "vm_title": ("vLLM's metrics after this step", "这一步之后 vLLM 的指标"),
    "vm_col_name": ("metric", "指标"),
    "vm_col_value": ("value", "值"),
    "vm_col_means": ("what it counts", "它统计什么"),
    "vm_queries": ("prompt tokens looked up at their request's first admission (a resumed "
                   "request's re-lookup is not in it); cumulative", "请求第一次被接纳时查找的 prompt token 数"
                   "（被抢占后恢复的重新查找不算）；累计"),
    "vm_hits": ("of those, tokens found in the GPU prefix cache; cumulative",
                "其中在 GPU 前缀缓存里找到的 token 数；累计"),
    "vm_rate_total": ("hits / queries of the counters, since the engine started (what a Grafana "
                      "panel computes with rate() over a window of its own)",
                      "计数器的 hits / queries，自引擎启动以来（Grafana 面板用 rate() 按自己的时间窗算的"
                      "就是它）"),
    "vm_rate_logged": ("the log line's “Prefix cache hit rate”: the same ratio over the last "
                       "~1,000 requests, whole steps; a reset empties it",
                       "日志里的“Prefix cache hit rate”：最近约 1000 个请求（按整步计）的同一比值；重置会"
                       "清空它"),
    "vm_rate_logged_none": ("not printed: no request admitted since the start or the last reset",
                            "不打印：自启动或上次重置以来没有新请求被接纳"),
    "vm_ext": ("the same for the KV connector's tier", "KV connector 缓存层的同样计数"),
    "vm_preemptions": ("preemptions, each counted when the preempted request next emits output",
                       "抢占次数，每次在被抢占的请求下一次输出时才计入"),
    "vm_preempted": ("resumed requests' re-lookups (requests, tokens, hits): recorded by vLLM, "
                     "exported nowhere", "恢复请求的重新查找（请求数、token 数、命中数）：vLLM 记录了，"
                     "但不对外导出"),
    "vm_usage": ("blocks held by requests over every block but the null block — a fraction, "
                 "despite the name; sampled at the last engine step",
                 "被请求占用的块占除 null 块外所有块的比例——名字叫 perc，其实是小数；在上一个引擎步采样"),
    "vm_running": ("requests running / waiting (capacity + deferred)",
                   "运行中 / 等待中（容量 + 推迟）的请求数"),
    "vm_pool": ("blockviz, from the pool now: blocks held · free but still cached · share of the "
                "slots holding a held block's token", "blockviz 根据现在的块池：被占用的块 · 空闲但"
                "仍缓存的块 · 被占用块里存放 token 的槽位比例"),
    "vm_why": ("vLLM's usage counts the blocks requests hold ({u} of {g}; the null block is not "
               "counted). A block counts whole even if it holds one token, and a block shared by "
               "several requests counts once, so the tokens held fill {o}% of the slots. The {c} "
               "blocks that are free but still cached count as free: usage says nothing about how "
               "much reusable prefix the cache holds.",
               "vLLM 的使用率统计被请求占用的块（{g} 个中的 {u} 个，不算 null 块）。只存了一个 token 的"
               "块也按整块计，多个请求共享的块只计一次，所以被占用的 token 只占 {o}% 的槽位。仍被缓存"
               "的空闲块（{c} 个）算作空闲：使用率看不出缓存里有多少可复用的前缀。"),
    "vm_why_lag": (" The gauge still shows {v}: vLLM samples it only at an engine step, and this "
                   "step ran none since the blocks changed.",
                   "这个指标仍显示 {v}：vLLM 只在引擎步里采样，而块变化之后这一步还没有运行引擎步。"),
    "vm_why_window": (" The log line's rate ({w}) differs from the counters' ({r}): its window "
                      "restarted at a reset or holds only the last ~1,000 requests.",
                      "日志里的命中率（{w}）与计数器的（{r}）不同：它的窗口在重置时重新开始，或只保留最近约 "
                      "1000 个请求。"),
}
