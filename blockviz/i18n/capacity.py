"""The words of the capacity-planning page's workload tab (blockviz/ui/capacity.py,
blockviz/render/capacity.py) and of the workloads it generates; the trace tab's are in
``blockviz.i18n.trace``."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
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
                "hit rate is the ratio of vLLM's counters vllm:prefix_cache_hits / "
                "vllm:prefix_cache_queries over the whole replay (vLLM's log line shows the same ratio "
                "over its last 1,000 requests). A preempted request that comes back is looked up "
                "again, but vLLM records that re-lookup apart (preempted_queries / preempted_hits) "
                "and exports it nowhere.\n"
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
                "- 每个点是同一个负载在这么多块的块池里重放一次；命中率是 vLLM 计数器 "
                "vllm:prefix_cache_hits / vllm:prefix_cache_queries 在整次重放中的比值（vLLM 日志里的"
                "命中率是最近 1000 个请求的同一比值）。被抢占的请求回来时会重新查找一次，但 vLLM 把这次"
                "查找单独记下（preempted_queries / preempted_hits），不对外导出。\n"
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
    "cap_col_hits": ("hit / asked tokens", "命中 / 查询 token"),
    "cap_col_evictions": ("evictions", "淘汰"),
    "cap_col_preemptions": ("preemptions", "抢占"),
    "cap_col_error": ("stopped early", "提前停止"),

    # a generated workload's own words (blockviz.teach.workload)
    "wl_title": ("Generated workload: {kind} (seed {seed})", "生成的负载：{kind}（种子 {seed}）"),
    "wl_summary": ("{n} events on {blocks} blocks of {size} tokens, at most {live} requests live "
                   "at once.",
                   "{n} 个事件，{blocks} 个块、每块 {size} 个 token，同时最多 {live} 个请求在运行。"),
    "wl_kind_shared_prefix": ("shared prefix", "共享系统提示"),
    "wl_kind_multi_turn": ("multi turn", "多轮对话"),
    "wl_kind_few_shot": ("few shot", "少样本"),
    "wl_kind_random": ("random", "随机"),
}
