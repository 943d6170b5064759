"""The words of trace import and capacity replay (blockviz.scenario.trace, blockviz.sim.capacity,
``blockviz trace ...``): errors about a trace file or an option, and the command's table."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    # a trace file's problems (blockviz.scenario.trace.TraceError)
    "trace_err_missing": ("missing field '{name}' (a request needs timestamp, input_length, "
                          "output_length and hash_ids)",
                          "缺少字段 '{name}'（每个请求需要 timestamp、input_length、output_length 和 "
                          "hash_ids）"),
    "trace_err_timestamp": ("{value} is not a time: give milliseconds, a number >= 0",
                            "{value} 不是时间：请写毫秒数，一个 >= 0 的数"),
    "trace_err_length": ("{value} is not allowed: a whole number from {lo} to {hi}",
                         "{value} 不允许：应当是 {lo} 到 {hi} 之间的整数"),
    "trace_err_ids_list": ("{value} is not a list of hash ids", "{value} 不是 hash id 的列表"),
    "trace_err_ids_count": ("{got} hash ids, but input_length {n} needs {need} (one per {bt} tokens, the "
                            "last block may be partial)",
                            "有 {got} 个 id，但 input_length {n} 需要 {need} 个（每 {bt} 个 token 一个，"
                            "最后一块可以不满）"),
    "trace_err_id": ("{value} is not a hash id: a whole number >= 0",
                     "{value} 不是 hash id：应当是 >= 0 的整数"),
    "trace_err_utf8": ("the line is not UTF-8 text", "这一行不是 UTF-8 文本"),
    "trace_err_json": ("not a JSON object: {detail}", "不是 JSON 对象：{detail}"),
    "trace_err_nested": ("JSON nested too deeply", "JSON 嵌套太深"),
    "trace_err_number": ("a number with too many digits", "数字的位数太多"),
    "trace_err_object": ("a line must be one JSON object {{\"timestamp\": ..., \"input_length\": ..., "
                         "\"output_length\": ..., \"hash_ids\": [...]}}",
                         "每一行必须是一个 JSON 对象 {{\"timestamp\": ..., \"input_length\": ..., "
                         "\"output_length\": ..., \"hash_ids\": [...]}}"),
    "trace_err_line_size": ("the line is longer than {lim} bytes", "这一行超过了 {lim} 字节"),
    "trace_err_file_size": ("the trace is larger than {lim} bytes", "trace 文件超过了 {lim} 字节的上限"),
    "trace_err_not_file": ("not a regular file", "这不是一个普通文件"),
    "trace_err_read": ("cannot read the file: {e}", "无法读取文件：{e}"),
    "trace_err_empty": ("the trace has no requests (one JSON object per line)",
                        "trace 里没有任何请求（每行一个 JSON 对象）"),
    "trace_err_block_finer": ("block size {value} is finer than this trace's {bt}-token hash blocks: "
                              "where two prompts part inside a block cannot be told, so the hits would "
                              "be made up. Use one of {allowed}",
                              "块大小 {value} 比这个 trace 的 {bt}-token 哈希块更细：两个提示词在一个块"
                              "内部从哪里开始不同是无法知道的，命中数会是编造的。请用 {allowed} 之一"),
    "trace_err_missing_bailian": ("missing field '{name}' (a Qwen-Bailian request needs chat_id, "
                                  "parent_chat_id, timestamp, input_length, output_length, type, turn "
                                  "and hash_ids)",
                                  "缺少字段 '{name}'（Qwen-Bailian 的每个请求需要 chat_id、parent_chat_id、"
                                  "timestamp、input_length、output_length、type、turn 和 hash_ids）"),
    "trace_err_blksz": ("the file's name says blksz_{value}, but a Qwen-Bailian hash block must be a "
                        "size that divides 512 (16 in the published traces): rename the file",
                        "文件名写的是 blksz_{value}，但 Qwen-Bailian 的哈希块大小必须能整除 512"
                        "（公开的 trace 是 16）：请给文件改名"),
    "trace_err_mixed": ("a Qwen-Bailian field in a Mooncake trace (the first request has no chat_id): "
                        "one format per file",
                        "Mooncake trace 里出现了 Qwen-Bailian 的字段（第一个请求没有 chat_id）："
                        "一个文件只能用一种格式"),
    "trace_err_seconds": ("{value} is not a time: give seconds since the trace began, a number >= 0",
                          "{value} 不是时间：请写从 trace 开始算起的秒数，一个 >= 0 的数"),
    "trace_err_type": ("{value} is not a request type: a short text such as text, search, image or file",
                       "{value} 不是请求类型：应当是简短的文字，例如 text、search、image 或 file"),
    "trace_err_block_size": ("block size {value} does not divide the trace's 512-token blocks "
                             "(use 1, 2, 4, ..., 512)",
                             "块大小 {value} 不能整除 trace 的 512-token 块（请用 1、2、4、……、512）"),
    # options of `blockviz trace ...`
    "trace_opt_pools": ("give pool sizes in blocks, comma-separated whole numbers >= 1 (got '{value}')",
                        "请给出块池大小（块数），用逗号分隔的 >= 1 的整数（这里是 '{value}'）"),
    "trace_opt_int": ("'{value}' is not allowed: a whole number from {lo} to {hi}",
                      "'{value}' 不允许：应当是 {lo} 到 {hi} 之间的整数"),
    "trace_opt_number": ("'{value}' is not a positive number", "'{value}' 不是正数"),
    "trace_opt_choice": ("'{value}' is not one of {choices}", "'{value}' 不是 {choices} 之一"),
    "trace_opt_ray": ("Ray is not installed here: pip install 'blockviz[ray]' (or use --executor local)",
                      "这里没有安装 Ray：请 pip install 'blockviz[ray]'（或者用 --executor local）"),
    "trace_opt_seconds": ("'{value}' is not a number of seconds >= 0", "'{value}' 不是 >= 0 的秒数"),
    "trace_opt_timed_only": ("only timed mode reads this option (add --mode timed)",
                             "只有计时模式读取这个选项（请加上 --mode timed）"),
    "trace_opt_no_cost": ("a step must cost some time: give the base, a prefill token or a decoding "
                          "request a cost above 0",
                          "每一步必须花费一些时间：基础开销、每个 prefill token 或每个解码请求的开销"
                          "至少有一个要大于 0"),
    "trace_opt_cost_value": ("{name} must be a number of seconds >= 0, not {value}",
                             "{name} 必须是 >= 0 的秒数，而不是 {value}"),
    "trace_opt_write": ("cannot write the file: {e}", "无法写入文件：{e}"),
    "trace_opt_curve_mode": ("--curve replays sequence mode only (drop --mode timed and its options)",
                             "--curve 只回放顺序模式（请去掉 --mode timed 及其选项）"),
    "trace_opt_sequence_only": ("only sequence mode reads this option (drop --mode timed)",
                                "只有顺序模式读取这个选项（请去掉 --mode timed）"),
    # the table of `blockviz trace capacity`
    "trace_tbl_title": ("{file}: {requests:,} requests, blocks of {bs} tokens, free order {order}",
                        "{file}：{requests:,} 个请求，每块 {bs} 个 token，释放顺序 {order}"),
    "trace_tbl_tokens": ("tokens", "token 数"),
    "trace_tbl_gib": ("GiB", "GiB"),
    "capt_split_title": ("Where the prompt tokens went (split free order)",
                         "提示词 token 的去向（split 释放顺序）"),
    "capt_split_axis_rows": ("each bar: one pool size (tokens), its queried prompt tokens by what "
                             "served them", "每一条：一个块池大小（token 数），它的查询 token 按来源划分"),
    "capt_split_how": ("Hit: served by the cache. Evicted: cached earlier, reused since — the most a "
                       "bigger pool could add. Cold: no earlier request computed it. Last-token rule "
                       "and partial block: structural, no cache serves them.",
                       "命中：由缓存提供。已淘汰：之前缓存过、后来被复用——更大的块池最多只能多换回这部分。"
                       "从未算过：之前没有请求算过。末 token 规则和不满的块：结构性的，任何缓存都提供不了。"),
    "trace_tbl_split_title": ("Where the prompt tokens went (share of the queried tokens):",
                              "提示词 token 的去向（占查询 token 的比例）："),
    "trace_tbl_split_how": ("evicted: cached before, reused by an allocation since — what a bigger "
                            "pool could have kept; cold: no earlier request had computed it; "
                            "last-token and partial block: structural, no cache serves them.",
                            "已淘汰：之前缓存过，后来被分配新块时复用——更大的块池本可以留住；"
                            "从未算过：之前没有请求算过；末 token 规则和不满的块：结构性的，"
                            "任何缓存都提供不了。"),
    "trace_tbl_of_ceiling": ("of ceiling", "占上限"),
    "trace_tbl_requests": ("requests", "请求"),
    "trace_tbl_rejected": ("rejected", "被拒"),
    "trace_tbl_evictions": ("evictions", "淘汰"),
    "trace_tbl_ceiling": ("ceiling (an infinite pool): hit rate {rate}, {hits:,} of {queries:,} "
                          "prompt tokens",
                          "上限（无限大的块池）：命中率 {rate}，{queries:,} 个提示词 token 中命中 "
                          "{hits:,} 个"),
    "trace_tbl_preemptions": ("preempted", "抢占"),
    "trace_tbl_queue": ("queue p50/p90 (s)", "排队 p50/p90（秒）"),
    "trace_tbl_ttft": ("TTFT p50/p90 (s)", "首 token 时间 p50/p90（秒）"),
    "trace_tbl_timed": ("timed mode: budget {max_num_batched_tokens:,} tokens, at most {max_num_seqs:,} "
                        "running, max_model_len {max_model_len:,}; a step costs {step_base_s:g} s + "
                        "{step_prefill_token_s:g} s per prompt token computed + {step_decode_seq_s:g} s "
                        "per decoding request (simulated time)",
                        "计时模式：每步预算 {max_num_batched_tokens:,} 个 token，最多 {max_num_seqs:,} 个"
                        "请求同时运行，max_model_len {max_model_len:,}；每一步花费 {step_base_s:g} 秒 + "
                        "每个计算的提示词 token {step_prefill_token_s:g} 秒 + 每个解码请求 "
                        "{step_decode_seq_s:g} 秒（模拟时间）"),
    "trace_tbl_kv": ("KV cache: {bytes} per token ({source})", "KV 缓存：每个 token {bytes}（{source}）"),
    # a model preset's KV cache in words (sim.capacity.KVShape.describe)
    "kv_per_layer": ("{heads} KV heads × head dim {dim} × 2 (K, V) × {bytes} bytes",
                     "{heads} 个 KV 头 × 头维度 {dim} × 2（K、V）× {bytes} 字节"),
    "kv_dense": ("{layers} layers × {per}", "{layers} 层 × {per}"),
    "kv_hybrid": ("{layers} layers = {kinds}; vLLM's KV-cache groups of {size} layers: {groups}{pad}; a "
                  "pool slot = {size} layers × {per}",
                  "{layers} 层 = {kinds}；vLLM 的 KV 缓存组每组 {size} 层：{groups}{pad}；块池的一个槽位 = "
                  "{size} 层 × {per}"),
    "kv_kind_full_attention": ("{n} full attention", "{n} 层全注意力"),
    "kv_kind_sliding_window": ("{n} sliding window ({size})", "{n} 层滑动窗口（{size}）"),
    "kv_kind_chunked_local_attention": ("{n} chunked local ({size})", "{n} 层分块局部注意力（{size}）"),
    "kv_groups_full_attention": ("{n} × full attention", "{n} 个全注意力组"),
    "kv_groups_sliding_window": ("{n} × sliding window", "{n} 个滑动窗口组"),
    "kv_groups_chunked_local_attention": ("{n} × chunked local", "{n} 个分块局部注意力组"),
    "kv_padding": (", {n} padding layers", "，{n} 个填充层"),
    "trace_tbl_kv_groups": ("KV cache: {bytes} per token in each KV-cache group that keeps it ({source}); "
                            "the replay runs these groups",
                            "KV 缓存：保留这个 token 的每个 KV 缓存组里每个 token {bytes}（{source}）；"
                            "回放按这些组进行"),
    "trace_tbl_limited": ("limited by {group}", "受{group}所限"),
    "trace_tbl_ceiling_limited": ("; full attention held {limited:,} more prompt tokens that {group} did not "
                                  "(vLLM's shared_prefix_boundary − hit)",
                                  "；全注意力另外持有 {limited:,} 个提示词 token，{group}却没有"
                                  "（vLLM 的 shared_prefix_boundary − 命中）"),
    "trace_group_sliding_window": ("the sliding window", "滑动窗口组"),
    "trace_group_chunked_local_attention": ("the chunked-local groups", "分块局部注意力组"),
    "trace_opt_groups_curve": ("the one-pass curve and the optimal policy are exact for one full-attention "
                               "group; {model} has several (replay pool sizes instead: drop the option)",
                               "一遍曲线和最优策略只对单个全注意力组是精确的；{model} 有多个组"
                               "（请去掉这个选项，按各个块池大小回放）"),
    "trace_tbl_progress": ("replaying", "回放中"),
    "trace_tbl_progress_optimal": ("optimal policy", "最优策略"),
    "trace_tbl_optimal": ("optimal", "最优策略"),
    "trace_check_ok": ("{file}: ok — {requests:,} requests, {tokens:,} prompt tokens, {blocks:,} blocks "
                       "of {bt} tokens; block sizes it allows: {allowed}",
                       "{file}：没有问题 —— {requests:,} 个请求，{tokens:,} 个提示词 token，{blocks:,} 个 "
                       "{bt}-token 块；允许的块大小：{allowed}"),
    "trace_generated": ("{file}: {requests:,} requests ({kind}, seed {seed})",
                        "{file}：{requests:,} 个请求（{kind}，种子 {seed}）"),
    # the capacity page, real traffic (blockviz.ui.capacity, blockviz.render.capacity)
    "capt_tab_toy": ("Generated workload (toy scale)", "生成的负载（玩具规模）"),
    "capt_tab_trace": ("Real traffic: a trace", "真实流量：trace"),
    "capt_intro": ("Upload a request trace — Mooncake's format (JSON Lines: `timestamp` in ms, "
                   "`input_length`, `output_length`, `hash_ids` of 512-token blocks) or Qwen-Bailian's "
                   "(`qwen_*_blksz_16.jsonl`: 16-token blocks, chats and turns) — or generate one, "
                   "replay it under vLLM's rules with both free orders, and see where a bigger KV "
                   "cache stops paying and how far LRU is from the best any policy could do.",
                   "上传一个请求 trace——Mooncake 格式（JSON Lines：`timestamp` 毫秒、`input_length`、"
                   "`output_length`、以 512 个 token 为一块的 `hash_ids`）或 Qwen-Bailian 格式"
                   "（`qwen_*_blksz_16.jsonl`：16 个 token 一块，带对话和轮次）——或者生成一个；按 vLLM "
                   "的规则用两种释放顺序回放，看看 KV 缓存大到什么程度就不再划算，以及 LRU 离任何策略"
                   "能做到的最好结果有多远。"),
    "capt_source": ("Trace", "Trace 来源"),
    "capt_source_upload": ("Upload a file", "上传文件"),
    "capt_source_generate": ("Generate one", "生成一个"),
    "capt_upload": ("A Mooncake or Qwen-Bailian trace (.jsonl)",
                    "Mooncake 或 Qwen-Bailian 格式的 trace（.jsonl）"),
    "capt_upload_help": ("One JSON object per line; every line is checked, and a bad one is reported "
                         "with its line and column.",
                         "每行一个 JSON 对象；每一行都会检查，有问题的行会报告行号和列号。"),
    "capt_upload_limit": ("Up to {mb} MB. The file stays in this session only.",
                          "最大 {mb} MB。文件只保存在本次会话中。"),
    "capt_too_large": ("the file is larger than {mb} MB, the limit for an upload",
                       "文件超过了上传上限 {mb} MB"),
    "capt_bad_trace": ("This trace cannot be used: {msg}", "这个 trace 无法使用：{msg}"),
    "capt_none_yet": ("Upload a trace or generate one to begin.", "请先上传或生成一个 trace。"),
    "capt_loaded": ("**{name}**: {requests} requests, {tokens} prompt tokens.",
                    "**{name}**：{requests} 个请求，{tokens} 个提示词 token。"),
    "capt_gen_requests": ("Requests", "请求数"),
    "capt_gen_rate": ("Arrivals per second", "每秒到达"),
    "capt_gen_rate_help": ("The mean of a Poisson process: what timed mode's queueing sees.",
                           "泊松过程的均值：计时模式中的排队由它决定。"),
    "capt_generate": ("Generate", "生成"),
    "capt_block_size_help": ("Tokens per KV block (vLLM's default is 16); it must divide the trace's "
                             "512-token blocks.",
                             "每个 KV 块的 token 数（vLLM 默认 16）；必须能整除 trace 的 512-token 块。"),
    "capt_mode": ("Replay", "回放方式"),
    "capt_mode_sequence": ("sequence", "顺序"),
    "capt_mode_timed": ("timed", "计时"),
    "capt_mode_help": ("Sequence: requests in file order, each alone (the Mooncake paper's method). "
                       "Timed: arrivals at their timestamps through vLLM's scheduler, each decoding its "
                       "output; adds preemptions, queueing and time to first token.",
                       "顺序：按文件顺序，每个请求单独进行（Mooncake 论文的方法）。"
                       "计时：请求按时间戳到达，经过 "
                       "vLLM 的调度器，各自解码自己的输出；另外给出抢占、排队和首 token 时间。"),
    "capt_replay": ("Requests to replay", "回放的请求数"),
    "capt_replay_help": ("The first N requests of the trace: at most 100,000 in sequence mode, 2,000 "
                         "in timed mode (the replays run one after another on the server).",
                         "trace 的前 N 个请求：顺序模式最多 100,000 个，计时模式最多 2,000 个"
                         "（回放在服务器上一个接一个地运行）。"),
    "capt_replay_too_many": ("{n} requests is more than the page replays in {mode} mode (at most "
                             "{max}): replay fewer here, or the whole trace with `blockviz trace "
                             "capacity`.",
                             "{mode}模式下页面最多回放 {max} 个请求，{n} 个太多了：请在这里少回放一些，"
                             "或者用 `blockviz trace capacity` 回放整个 trace。"),
    "capt_model": ("Model (GiB; a hybrid model's groups)", "模型（换算 GiB；混合模型按其分组回放）"),
    "capt_model_none": ("none (tokens only)", "不换算（只显示 token）"),
    "capt_model_help": ("KV bytes per token = layers × KV heads × head dim × 2 (K and V) × 2 bytes. A "
                        "hybrid model (gpt-oss, gemma-3, llama-4-scout) is replayed with vLLM's KV-cache "
                        "groups for its layer mix: a token costs a group's layers in each group that "
                        "keeps it, and a window's group keeps only its last tokens.",
                        "每个 token 的 KV 字节数 = 层数 × KV 头数 × 头维度 × 2（K 和 V）× 2 字节。混合模型"
                        "（gpt-oss、gemma-3、llama-4-scout）按 vLLM 为其层组合建的 KV 缓存组回放：一个 token "
                        "在保留它的每个组里占一个组的层数，而窗口组只保留最后那些 token。"),
    "capt_model_groups": ("{model} is a hybrid model: this replay ran vLLM's {n} KV-cache groups of "
                          "{layers} layers ({groups}), one pool for all; a token costs {bytes} in each "
                          "group that keeps it, and capacity in tokens counts the pool's slots (blocks "
                          "× block size) the groups share. The one-pass curve is exact for one "
                          "full-attention group only, so pool sizes are replayed one by one.",
                          "{model} 是混合模型：这次回放用的是 vLLM 的 {n} 个 KV 缓存组，每组 {layers} 层"
                          "（{groups}），共用一个块池；一个 token 在保留它的每个组里占 {bytes}，以 token 计的"
                          "容量数的是各组共用的块池槽位（块数 × 块大小）。一遍曲线只对单个全注意力组精确，"
                          "所以逐个回放各个块池大小。"),
    "capt_group_count_full_attention": ("{n} full attention", "{n} 个全注意力组"),
    "capt_group_count_sliding_window": ("{n} sliding window of {size}", "{n} 个窗口 {size} 的滑动窗口组"),
    "capt_group_count_chunked_local_attention": ("{n} chunked local of {size}",
                                                 "{n} 个分块 {size} 的分块局部注意力组"),
    "capt_full_held": ("held by full attention · {order}", "全注意力所持有 · {order}"),
    "capt_read_limited": ("{order}: {group} limited the hits: at the largest pool full attention held "
                          "{share} more of the prompt tokens ({limited}), which no hit could use because "
                          "that group had not kept their blocks.",
                          "{order}：{group}限制了命中：在最大的块池上，全注意力另外持有 {share} 的提示词 "
                          "token（{limited} 个），因为那个组没有保留相应的块，命中用不上它们。"),
    "capt_timed_settings": ("Timed mode: scheduler and step cost", "计时模式：调度器与每步开销"),
    "capt_timed_help": ("A step lasts base + prefill token × the prompt tokens it computes (cache hits "
                        "are not computed) + decode × the requests it decodes, in simulated seconds; an "
                        "idle gap jumps to the next arrival. The defaults are a rough order of magnitude "
                        "for an 8B model on one current GPU: set your own from measurements.",
                        "每一步的模拟耗时 = 基础开销 + 每个 prefill "
                        "token 的开销 × 这一步计算的提示词 token 数"
                        "（缓存命中的不需计算）+ 每个解码请求的开销"
                        " × 这一步解码的请求数；空闲时直接跳到下一个"
                        "到达。默认值只是一块当今 GPU 上 8B 模型的大致量级：请用你自己测得的数值。"),
    "capt_budget": ("Token budget per step", "每步 token 预算"),
    "capt_max_seqs": ("Running at most", "最多同时运行"),
    "capt_step_base": ("Step base (s)", "每步基础开销（秒）"),
    "capt_step_prefill": ("Per prefill token (s)", "每个 prefill token（秒）"),
    "capt_step_decode": ("Per decoding request (s)", "每个解码请求（秒）"),
    "capt_sizing": ("Measuring the trace…", "正在测量 trace……"),
    "capt_done": ("Done: {runs} runs of {requests} requests in {s} s.",
                  "完成：{runs} 次回放，每次 {requests} 个请求，用时 {s} 秒。"),
    "capt_shown": ("The first {requests} requests of {name}, {mode} mode, blocks of {bs} tokens.",
                   "{name} 的前 {requests} 个请求，{mode}模式，每块 {bs} 个 token。"),
    "capt_hit_title": ("Hit rate against KV-cache capacity", "命中率与 KV 缓存容量"),
    "capt_ttft_title": ("Time to first token against capacity (simulated)", "首 token 时间与容量（模拟）"),
    "capt_knee_def": ("The knee: the smallest capacity run whose hit rate reaches {pct}% of the "
                      "ceiling's (an infinite pool under the same rules). Pool sizes run from the "
                      "largest request to the trace's whole working set, evenly on a log axis.",
                      "拐点：命中率达到上限（同样规则下无限大的块池）的 {pct}% 的最小容量（在试过的容量中）。"
                      "块池大小从最大的单个请求到整个 trace 的工作集，在对数轴上均匀分布。"),
    "capt_timed_model": ("Step cost: {step_base_s:g} s + {step_prefill_token_s:g} s per prompt token "
                         "computed + {step_decode_seq_s:g} s per decoding request; budget "
                         "{max_num_batched_tokens:,} tokens, at most {max_num_seqs:,} running.",
                         "每步开销：{step_base_s:g} 秒 + 每个计算的提示词 "
                         "token {step_prefill_token_s:g} 秒 + "
                         "每个解码请求 {step_decode_seq_s:g} 秒；预算 {max_num_batched_tokens:,} 个 token，"
                         "最多 {max_num_seqs:,} 个同时运行。"),
    "capt_player_title": ("Open a window of requests in the player", "在播放器中打开一段请求"),
    "capt_player_help": ("Pick a pool size (where the curve's marker is, or type one) and the requests to "
                         "watch. The player shows them "
                         "scaled down: each 512-token block of the trace is one block of {tokens} "
                         "tokens, outputs are 1/{scale} as long, the pool is this one in 512-token "
                         "blocks (at most {max_blocks}), and the cache starts empty.",
                         "选择一个块池大小（曲线上标记所在的位置，或直接输入）和要观察的请求。"
                         "播放器按比例缩小显示：trace 中每个 512-token 块是"
                         "一个 {tokens} 个 token 的块，输出长度为原来的 1/{scale}，块池是这个容量换算成 "
                         "512-token 块（最多 {max_blocks} 块），缓存从空开始。"),
    "capt_window_first": ("From request", "从第几个请求"),
    "capt_window_first_help": ("The window starts at this request (1 = the first of the file).",
                               "窗口从这个请求开始（1 = 文件中的第一个）。"),
    "capt_window_empty": ("Every request of this window is larger than the player's pool ({blocks} "
                          "blocks): pick a larger point or other requests.",
                          "这个窗口中的每个请求都比播放器的块池（{blocks}"
                          " 块）大：请选择更大的点或其他请求。"),
    "capt_axis_tokens": ("KV-cache capacity (tokens)", "KV 缓存容量（token）"),
    "capt_axis_tokens_gib": ("KV-cache capacity (tokens, GiB)", "KV 缓存容量（token，GiB）"),
    "capt_tokens": ("tokens", "token"),
    "capt_knee": ("knee", "拐点"),
    "capt_knee_mark": ("knee: {pct}% of the ceiling", "拐点：上限的 {pct}%"),
    "capt_ceiling_mark": ("ceiling (infinite pool): {rate}", "上限（无限大的块池）：{rate}"),
    "capt_ttft_p50_s": ("TTFT p50", "首 token 时间 p50"),
    "capt_ttft_p90_s": ("TTFT p90", "首 token 时间 p90"),
    "capt_axis_ttft": ("time to first token (simulated s)", "首 token 时间（模拟秒）"),
    "capt_read_ceiling": ("With an infinite pool, {rate} of the prompt tokens would be cache hits: "
                          "no pool does better.",
                          "块池无限大时，{rate} 的提示词 token 会命中缓存：任何块池都不会更好。"),
    "capt_read_no_reuse": ("This trace repeats no prefix: a bigger cache buys nothing here.",
                           "这个 trace 没有重复的前缀：更大的缓存在这里毫无用处。"),
    "capt_read_knee": ("{order}: the knee is at {blocks} blocks = {cap}: from there the hit "
                       "rate is {rate}, at least {pct}% of the ceiling's {ceiling}, which is only "
                       "{gain} higher.",
                       "{order}：拐点在 {blocks} 块 = {cap}：从这里开始命中率为 {rate}，"
                       "至少是上限 {ceiling} 的 {pct}%，上限只比它高 {gain}。"),
    "capt_read_no_knee": ("{order}: no capacity run reaches {pct}% of the ceiling; the largest, {cap}, "
                          "hits {rate} ({share} of the ceiling): try larger pools.",
                          "{order}：试过的容量都没有达到上限的 {pct}%；最大的 {cap} 命中 {rate}"
                          "（上限的 {share}）：请试更大的块池。"),
    "capt_read_ttft": ("There, TTFT p50 {p50} s, p90 {p90} s; queueing p90 {q90} s; {pre} "
                       "preemptions.",
                       "在这里，首 token 时间 p50 {p50} 秒，p90 {p90}"
                       " 秒；排队 p90 {q90} 秒；抢占 {pre} 次。"),
    # the whole curve (sequence mode): blockviz.render.curve and its browser code, curve.js
    "curve_at": ("Capacity", "容量"),
    "curve_blocks": ("{n} blocks of {bs} tokens", "{n} 个块，每块 {bs} 个 token"),
    "curve_hits_of": ("{hits} of {queries} prompt tokens hit", "{queries} 个提示词 token 中命中 {hits} 个"),
    "curve_best": ("Best possible (Belady's MIN)", "最好的可能（Belady 的 MIN）"),
    "curve_best_n": ("best possible (Belady's MIN), at {n} sizes", "最好的可能（Belady 的 MIN），{n} 个大小"),
    "curve_best_above": ("{pts} points above LRU", "比 LRU 高 {pts} 个百分点"),
    "curve_best_above_band": ("at least {pts} points above LRU (exact at the dots)",
                              "比 LRU 至少高 {pts} 个百分点（圆点处是精确值）"),
    "curve_ceiling": ("Ceiling (infinite cache)", "上限（无限大的缓存）"),
    "curve_ceiling_at": ("ceiling (infinite cache): {rate}", "上限（无限大的缓存）：{rate}"),
    "curve_ceiling_above_best": ("{pts} points above the best possible: only a larger cache buys them",
                                 "比最好的可能高 {pts} 个百分点：只有更大的缓存才能拿到"),
    "curve_ceiling_above_best_band": ("at least {pts} points above the best possible: only a larger cache "
                                      "buys them",
                                      "比最好的可能至少高 {pts} 个百分点：只有更大的缓存才能拿到"),
    "curve_ceiling_above_lru": ("{pts} points above LRU", "比 LRU 高 {pts} 个百分点"),
    "curve_policy_gap": ("LRU's gap to the best possible", "LRU 与最好的可能之间的差距"),
    "curve_knee_at": ("knee: {cap}", "拐点：{cap}"),
    "curve_drag": ("Drag across the chart, or click it and use ← → (Page Up / Down for bigger steps), "
                   "to read any capacity: every pool size is exact. Where you let go is the pool "
                   "used below.",
                   "在图上拖动，或点击图后用 ← →（Page Up / Down 步子更大）读出任意容量：每个块池大小"
                   "都是精确值。松开的位置就是下面使用的块池。"),
    "curve_best_skipped": ("not computed here: {blocks} blocks of this size in the trace, the page "
                           "computes MIN for at most {most}; `blockviz trace capacity --optimal` has "
                           "no such limit",
                           "这里没有计算：trace 里有 {blocks} 个这种大小的块，页面最多为 {most} 个块计算 "
                           "MIN；`blockviz trace capacity --optimal` 没有这个限制"),
    "curve_knee_def": ("The knee: the smallest capacity whose hit rate reaches {pct}% of the ceiling's "
                       "(an infinite cache under the same rules), found on the whole curve: one pass "
                       "over the trace per free order gives every pool size exactly, from the largest "
                       "request (below it some requests would not fit at all) to the trace's working set.",
                       "拐点：命中率达到上限（同样规则下无限大的缓存）的 {pct}% 的最小容量，在整条曲线上"
                       "求得：每种释放顺序对 trace 读一遍，就得到每个块池大小的精确结果，从最大的单个请求"
                       "（更小的块池根本放不下某些请求）到整个 trace 的工作集。"),
    "curve_read_double": ("{order}: twice the knee's capacity ({cap}) hits {rate}, only {gain} more.",
                          "{order}：拐点容量的两倍（{cap}）命中 {rate}，只多 {gain}。"),
    "curve_read_policy": ("At the knee the best any eviction policy could do is {best}: vLLM's LRU "
                          "({order}) is {policy} points below it, the ceiling {size} points above it.",
                          "在拐点处，任何淘汰策略最多能做到 {best}：vLLM 的 LRU（{order}）比它低 "
                          "{policy} 个百分点，上限比它高 {size} 个百分点。"),
    "curve_read_policy_more": ("There the eviction order costs more hits than the cache's size.",
                               "在这里，淘汰顺序损失的命中比缓存大小损失的更多。"),
    "curve_read_size_more": ("There the cache's size costs more hits than the eviction order.",
                             "在这里，缓存大小损失的命中比淘汰顺序损失的更多。"),
    "curve_read_no_best": ("The best possible (Belady's MIN) is {why}.",
                           "最好的可能（Belady 的 MIN）：{why}。"),
    "curve_col_best": ("best possible", "最好的可能"),
    "curve_phase_curve": ("One pass over the trace, free order {order},",
                          "对 trace 读一遍，释放顺序 {order}，"),
    "curve_phase_optimal": ("Belady's MIN at size {k} of {n}", "Belady 的 MIN（第 {k} / {n} 个大小），"),
    "curve_progress": ("{what} in a worker process: {pct}% · {done} of {total} request passes · "
                       "{rate} requests/s · {s}{left}",
                       "{what}在工作进程中：{pct}% · 已处理 {done} / {total} 请求次 · 每秒 {rate} 个 · "
                       "{s}{left}"),
    "curve_done": ("Done: the whole curve of {requests} requests for both free orders, and Belady's MIN "
                   "at {n} sizes, in {s} s.",
                   "完成：{requests} 个请求在两种释放顺序下的整条曲线，以及 {n} 个大小的 Belady MIN，"
                   "用时 {s} 秒。"),
    "curve_done_no_best": ("Done: the whole curve of {requests} requests for both free orders in {s} s.",
                           "完成：{requests} 个请求在两种释放顺序下的整条曲线，用时 {s} 秒。"),
    "capt_num_sizes": ("Sizes for MIN and the table", "计算 MIN 和列表的大小个数"),
    "capt_num_sizes_help": ("Sequence mode draws every pool size; Belady's MIN (about a pass over the "
                            "trace each) and the table of numbers take this many, plus the knees. "
                            "Timed mode replays this many.",
                            "顺序模式会画出每个块池大小；Belady 的 MIN（每个大约要读一遍 trace）和数字表只取"
                            "这么多个大小，外加拐点。计时模式回放这么多个大小。"),
    "capt_optimal": ("Best possible (MIN)", "最好的可能（MIN）"),
    "capt_optimal_help": ("Belady's MIN: the most hits any eviction policy could get at a size, knowing "
                          "the future. Sequence mode only.",
                          "Belady 的 MIN：在一个大小下，预先知道未来的任何淘汰策略最多能得到的命中。只用于"
                          "顺序模式。"),
    "capt_pool": ("Pool (blocks)", "块池（块）"),
    "capt_pool_help": ("The capacity marker's pool size: drag it on the chart or type it here.",
                       "容量标记所在的块池大小：在图上拖动，或在这里输入。"),
    "capt_order": ("Free order", "释放顺序"),
    # a Qwen-Bailian trace's conversations at one pool size (blockviz.render.chats, ui.capacity_chats)
    "chat_title": ("One conversation, turn by turn", "一段对话，逐轮来看"),
    "chat_intro": ("This trace links each turn to the one before it (`parent_chat_id`). Replay it at "
                   "the marker's pool size to see what each turn of a conversation found in the "
                   "cache, and what the pool's evictions cost it against an infinite cache.",
                   "这个 trace 把每一轮和它的上一轮连在一起（`parent_chat_id`）。在标记所在的块池大小下"
                   "回放，就能看到一段对话的每一轮在缓存里找到了什么，以及和无限大的缓存相比，块池的"
                   "淘汰让它损失了多少。"),
    "chat_run": ("Replay at {pool} blocks ({order})", "在 {pool} 块下回放（{order}）"),
    "chat_pick": ("Conversation", "对话"),
    "chat_option": ("chat {id}: {turns} turns, {tokens} prompt tokens, {lost} lost to eviction",
                    "对话 {id}：{turns} 轮，{tokens} 个提示词 token，因淘汰损失 {lost} 个"),
    "chat_pick_help": ("Those that lost the most prompt tokens to eviction at this pool size first, then "
                       "the longest.",
                       "在这个块池大小下因淘汰损失提示词 token 最多的排在前面，其次是最长的。"),
    "chat_hit": ("hit at this pool", "在这个块池下命中"),
    "chat_lost": ("lost to eviction (an infinite cache hits it)", "因淘汰而损失（无限大的缓存能命中）"),
    "chat_new": ("not in any cache yet", "任何缓存里都还没有"),
    "chat_turn": ("turn {turn} · {type} · +{at} s · L{line}", "第 {turn} 轮 · {type} · +{at} 秒 · L{line}"),
    "chat_axis": ("prompt tokens", "提示词 token"),
    "chat_read_all": ("At {pool} blocks ({order}), the trace's later turns hit {rate} of their prompt "
                      "tokens ({best} with an infinite cache); its first turns {rate1} ({best1}).",
                      "在 {pool} 块（{order}）下，trace 中后续各轮命中了提示词 token 的 {rate}（无限大的"
                      "缓存：{best}）；第一轮命中 {rate1}（{best1}）。"),
    "chat_read_one": ("This conversation: {hit} of {tokens} prompt tokens hit ({rate}); an infinite cache "
                      "would hit {best}.",
                      "这段对话：{tokens} 个提示词 token 中命中 {hit} 个（{rate}）；"
                      "无限大的缓存能命中 {best}。"),
    "chat_read_worst": ("Turn {turn} (L{line}) lost the most to eviction: {lost} tokens, {gap} s after the "
                        "turn before it.",
                        "第 {turn} 轮（L{line}）因淘汰损失最多：{lost} 个 token，距上一轮 {gap} 秒。"),
    "chat_read_no_loss": ("No turn of it lost a hit to eviction at this pool size.",
                          "在这个块池大小下，它没有哪一轮因淘汰而损失命中。"),
    "chat_none": ("No conversation of the requests replayed has two turns or more.",
                  "回放的请求里没有两轮或更多轮的对话。"),
    "chat_stale": ("Shown for {pool} blocks ({order}); the marker is at {now} blocks now: replay again to "
                   "follow it.",
                   "显示的是 {pool} 块（{order}）的结果；标记现在在 {now} 块：再回放一次即可跟上。"),
    "chat_done": ("Done: {requests} requests replayed at {pool} blocks and with an infinite cache, in {s} s.",
                  "完成：{requests} 个请求在 {pool} 块和无限大的缓存下回放，用时 {s} 秒。"),
    # a window of a trace, opened in the player (blockviz.teach.tracegen)
    "tw_title": ("Trace lines {first}–{last} at {pool} blocks ({mode} mode)",
                 "trace 第 {first}–{last} 行，块池 {pool} 块（{mode}模式）"),
    "tw_start_note": ("Scaled down for the player: each 512-token block of the trace is one block of "
                      "{bt} tokens, outputs are 1/{scale} as long; the pool of {pool} blocks of {bs} "
                      "tokens ({real} blocks of 512) is {player} blocks here. The cache starts empty.",
                      "为播放器按比例缩小：trace 中每个 512-token 块在这里是一个 {bt} 个 token 的块，"
                      "输出长度是原来的 1/{scale}；{pool} 块 × {bs} token 的块池（{real} 个 512-token 块）"
                      "在这里是 {player} 块。缓存从空开始。"),
    "tw_none_fit": ("Every request of this window is larger than the player's pool.",
                    "这个窗口里的每个请求都比播放器的块池大。"),
}

# The JSON decoder's own words (json.JSONDecodeError.msg) in Chinese; any other stays as it is.
JSON_PROBLEMS_ZH = {
    "Expecting value": "这里缺少一个值",
    "Expecting ',' delimiter": "缺少 ','",
    "Expecting ':' delimiter": "缺少 ':'",
    "Expecting property name enclosed in double quotes": "这里应当是用双引号括起来的字段名",
    "Unterminated string starting at": "字符串没有结束（缺少右引号）",
    "Invalid control character at": "字符串里有控制字符",
    "Extra data": "一个 JSON 对象之后还有多余的内容（每行只能有一个）",
    "Invalid \\escape": "无效的转义字符",
    "Invalid \\uXXXX escape": "无效的 \\uXXXX 转义",
}

OS_ERRORS_ZH = {"No such file or directory": "文件不存在", "Permission denied": "没有权限",
                "Is a directory": "这是一个目录", "No space left on device": "磁盘空间不足"}


def trace_message(key: str, lang: str, **fields) -> str:
    """A trace message in ``lang`` (the JSON decoder's problem translated where it is known)."""
    if lang == "zh" and key == "trace_err_json":
        fields = dict(fields, detail=JSON_PROBLEMS_ZH.get(fields["detail"], fields["detail"]))
    if lang == "zh" and key in ("trace_err_read", "trace_opt_write"):
        fields = dict(fields, e=OS_ERRORS_ZH.get(fields["e"], fields["e"]))
    en, zh = STRINGS[key]
    return (zh if lang == "zh" else en).format(**fields)
