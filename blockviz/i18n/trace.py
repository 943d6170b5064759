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
    "trace_err_ids_count": ("{got} hash ids, but input_length {n} needs {need} (one per 512 tokens, the "
                            "last block may be partial)",
                            "有 {got} 个 id，但 input_length {n} 需要 {need} 个（每 512 个 token 一个，"
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
    "trace_err_block_size": ("block size {value} does not divide the trace's 512-token blocks "
                             "(use 1, 2, 4, ..., 512)",
                             "块大小 {value} 不能整除 trace 的 512-token 块（请用 1、2、4、……、512）"),
    # options of `blockviz trace ...`
    "trace_opt_error": ("{opt}: {msg}", "{opt}：{msg}"),
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
    # the table of `blockviz trace capacity`
    "trace_tbl_title": ("{file}: {requests:,} requests, blocks of {bs} tokens, free order {order}",
                        "{file}：{requests:,} 个请求，每块 {bs} 个 token，释放顺序 {order}"),
    "trace_tbl_pool": ("pool (blocks)", "块池（块）"),
    "trace_tbl_tokens": ("tokens", "token 数"),
    "trace_tbl_gib": ("GiB", "GiB"),
    "trace_tbl_hit_rate": ("hit rate", "命中率"),
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
    "trace_tbl_progress": ("replaying", "回放中"),
    "trace_check_ok": ("{file}: ok — {requests:,} requests, {tokens:,} prompt tokens, {blocks:,} blocks "
                       "of 512 tokens",
                       "{file}：没有问题 —— {requests:,} 个请求，{tokens:,} 个提示词 token，{blocks:,} 个 "
                       "512-token 块"),
    "trace_generated": ("{file}: {requests:,} requests ({kind}, seed {seed})",
                        "{file}：{requests:,} 个请求（{kind}，种子 {seed}）"),
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
