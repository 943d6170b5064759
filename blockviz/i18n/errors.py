"""Error messages in 中文.

Loader, schema, engine and scheduler errors are raised with English messages: that is what the
command line prints (``FILE:LINE:COL: path: message``, for tools as much as for people), and what
the tests match. Where a person reads one in the Chinese UI, ``localize_error`` translates it, rule
by rule: each rule is a whole-message pattern, and a message inside a message (``step 3 (finish):
...``, the value pydantic complains about) is translated in turn. A message no rule knows stays in
English — ``tests/format/test_errors_zh.py`` runs every malformed input the suite has and fails
on any such message.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from blockviz.i18n import STRINGS

_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]
_RULES: list[_Rule] = []


def _rule(pattern: str, zh: str | Callable[[re.Match[str]], str], into: list[_Rule] = _RULES) -> None:
    fn = zh if callable(zh) else (lambda m, zh=zh: zh.format(**m.groupdict()))
    into.append((re.compile(pattern), fn))


def localize_error(message: str, lang: str) -> str:
    """``message`` for a reader of ``lang`` (only ``zh`` changes anything)."""
    message = " ".join(str(message).split())
    if lang != "zh":
        return message
    return _zh(message) or message


def error_text(err: object, lang: str) -> str:
    """What a person reads for ``err`` in ``lang``: a located ScenarioError keeps its
    ``FILE:LINE:COL: path:`` prefix; any other exception or text is one message."""
    localized = getattr(err, "localized", None)
    if callable(localized):
        return localized(lang)
    return localize_error(str(err), lang)


# Characters a terminal acts on rather than shows: C0 controls (but tab), DEL, C1 controls (CSI
# among them) and the bidirectional overrides. User text (a note, an id, a key) may hold any.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, keep: str = "") -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\u202e``),
    so printing it cannot move the cursor, change colours or retitle a terminal; the characters
    in ``keep`` (e.g. a line break) stay."""
    def esc(m: re.Match[str]) -> str:
        c = m.group()
        if c in keep:
            return c
        return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
    return _CONTROL.sub(esc, text)


class ErrorMessage(Exception):
    """An English message kept as it is (in session state, say) and translated when shown."""


def _zh(message: str, rules: list[_Rule] | None = None) -> str | None:
    for pattern, fn in _RULES if rules is None else rules:
        m = pattern.fullmatch(message)
        if m:
            return fn(m)
    return None


_ENGLISH = re.compile(r"[A-Za-z]+ [A-Za-z]+ [A-Za-z]+")
_QUOTED = re.compile(r"'[^']*'|`[^`]*`")


def knows(message: str) -> bool:
    """Whether ``message`` comes out in Chinese, with no English sentence left in it (words in
    quotes or backticks are names and values, and stay as they are)."""
    zh = _zh(" ".join(str(message).split()))
    return zh is not None and not _ENGLISH.search(_QUOTED.sub("", zh))


def _inner(text: str, rules: list[_Rule] | None = None) -> str:
    return _zh(text, rules) or text       # (a message no rule knows: as it is worded)


# -- nested: the step an engine error happened at --------------------------------------------
_rule(r"step (?P<k>\d+) \((?P<kind>\w+)\): (?P<rest>.+)",
      lambda m: f"第 {m['k']} 步（{m['kind']}）：{_inner(m['rest'])}")

# -- the file -------------------------------------------------------------------------------
_rule(r"the file is (?P<n>[\d,]+) bytes; the limit is (?P<lim>[\d,]+)",
      "文件有 {n} 字节，上限是 {lim} 字节")
_rule(r"the file is binary, not a YAML text file", "这是二进制文件，不是 YAML 文本文件")
_rule(r"the file is not UTF-8 text \(byte (?P<b>\d+)\)", "文件不是 UTF-8 文本（第 {b} 字节处）")
_rule(r"the file is empty: a scenario needs at least `id:`, `title:` and `steps:`",
      "文件是空的：一个场景至少需要 `id:`、`title:` 和 `steps:`")
_rule(r"not a regular file", "这不是一个普通文件")
_OS_ERRORS = {"No such file or directory": "文件不存在", "Permission denied": "没有读取权限",
              "Is a directory": "这是一个目录"}
_rule(r"cannot read the file: (?P<e>.+)",
      lambda m: f"无法读取文件：{_OS_ERRORS.get(m['e'], m['e'])}")

# -- YAML -----------------------------------------------------------------------------------
# PyYAML's problems, worded as its C parser (the loader uses it) and its Python one word them.
_YAML_RULES: list[_Rule] = []
for _pattern, _said in (
    (r"did not find expected ',' or '(?P<c>[\]}])'", "缺少 ',' 或 '{c}'（列表或映射没有正确闭合？）"),
    (r"did not find expected node content", "这里缺少一个值"),
    (r"did not find expected key", "这里应当是一个键（key: value）：缩进对齐了吗？"),
    (r"did not find expected '-' indicator", "这里应当是以 '-' 开头的列表项：缩进对齐了吗？"),
    (r"did not find expected <document start>", "这里应当是文档的开头"),
    (r"mapping values are not allowed (?:here|in this context)",
     "这里不能出现 'key: value'（值里有冒号就加引号；或者缩进不对？）"),
    (r"block sequence entries are not allowed (?:here|in this context)",
     "这里不能出现 '- ' 列表项：缩进对齐了吗？"),
    (r"could not find expected ':'", "缺少 ':'"),
    (r"found character (?:'(?P<c>.+)' )?that cannot start any token",
     "这里有一个不能作为开头的字符（比如制表符、@ 或 `）：YAML 只能用空格缩进，特殊字符要加引号"),
    (r"found a tab character (?:that violates indentation|where an indentation space is expected)",
     "这里用了制表符：YAML 只能用空格缩进"),
    (r"expected <block end>, but found '?(?P<t>[^']+)'?", "缩进不对：这里不应出现 {t}"),
    (r"found undefined alias(?: '(?P<a>.+)')?", "用到了没有定义的别名（*名字）"),
    (r"found unexpected end of stream", "文件在这里意外结束了（引号或括号没有闭合？）"),
    (r"found unexpected ':'", "这里不应出现 ':'"),
    (r"found unknown escape character(?: '(?P<c>.+)')?", "未知的转义字符"),
    (r"found duplicate anchor.*", "同一个锚点（&名字）定义了两次"),
    (r"found unexpected document indicator", "这里不应出现文档分隔符（--- 或 ...）"),
    (r"did not find expected whitespace or line break", "这里应当是空格或换行"),
    (r"expected a comment or a line break, but found '(?P<c>.+)'", "这里只能换行或写注释，却出现了 '{c}'"),
    (r"(?:did not find )?expected alphabetic or numeric character(?:, but found '(?P<c>.+)')?",
     "这里应当是字母或数字"),
):
    _rule(_pattern, _said, into=_YAML_RULES)

_rule(r"YAML syntax error: (?P<p>.+)", lambda m: f"YAML 语法错误：{_inner(m['p'], _YAML_RULES)}")
_rule(r"YAML error: (?P<p>.+)", lambda m: f"YAML 错误：{_inner(m['p'], _YAML_RULES)}")
_rule(r"nested more than (?P<n>\d+) levels deep", "嵌套超过了 {n} 层")
_rule(r"YAML tag (?P<tag>\S+) is not allowed: scenarios are plain data",
      "不允许使用 YAML 标签 {tag}：场景文件只能是普通数据")
_rule(r"mapping keys must be plain names", "映射的键只能是普通的名字")
_rule(r"duplicate key '(?P<k>.*)'", "键 '{k}' 重复了")

# -- the scenario's shape ---------------------------------------------------------------------
_rule(r"a scenario is a mapping with `id:`, `title:`, `config:` and `steps:`",
      "场景应当是一个映射，包含 `id:`、`title:`、`config:` 和 `steps:`")
_rule(r"unknown field '(?P<f>.*)'", "未知字段 '{f}'（拼写对吗？格式参考里有全部字段）")
_rule(r"missing required field '(?P<f>.*)'", "缺少必填字段 '{f}'")
_rule(r"give the text in at least one language \(en or zh\)", "至少用一种语言（en 或 zh）写出文字")
_rule(r"text has no words", "text 里没有任何词")
_rule(r"too many distinct words", "不同的词太多了")
_rule(r"a step is an event name \(e\.g\. `- admit`\) or a mapping \(e\.g\. `- finish: A`\)",
      "每一步是一个事件名（如 `- admit`）或一个映射（如 `- finish: A`）")
_rule(r"unknown event '(?P<e>.*)' \(events: (?P<names>.+), or a `note` alone\)",
      lambda m: f"未知事件 '{m['e']}'（可用的事件：{m['names'].replace(', ', '、')}，"
                f"或者只写一条 `note`）")
_rule(r"one event per step, got (?P<ev>.+)",
      lambda m: f"每一步只能有一个事件，这里有 {m['ev'].replace(', ', '、')}")
_rule(r"an empty step: give an event or a note", "空的一步：请写一个事件或一条 note")
_rule(r"write `- admit` \(admit: false is not an event\)",
      "请写成 `- admit`（admit: false 不是一个事件）")
_rule(r"write `- (?P<k>\w+)`", "请写成 `- {k}`")
_rule(r"multimodal items '(?P<a>.*)' and '(?P<b>.*)' overlap", "多模态项 '{a}' 和 '{b}' 的位置重叠了")
_rule(r"a connector with async_scheduling is not modelled: blockviz runs vLLM's OffloadingConnector "
      r"with the synchronous Scheduler only \(set async_scheduling: false, or drop the connector\)",
      "connector 与 async_scheduling 不能同时使用：blockviz 只在同步 Scheduler 下运行 vLLM 的 "
      "OffloadingConnector（请把 async_scheduling 设为 false，或去掉 connector）")
_rule(r"a connector with kv_cache_groups is not modelled: blockviz runs vLLM's OffloadingConnector "
      r"for one full-attention group only \(drop kv_cache_groups, or the connector\)",
      "connector 与 kv_cache_groups 不能同时使用：blockviz 只为单个全注意力组运行 vLLM 的 "
      "OffloadingConnector（请去掉 kv_cache_groups，或去掉 connector）")
_rule(r"reset_connector with a KV connector is not modelled: blockviz runs vLLM's OffloadingConnector "
      r"without its reset_cache \(drop reset_connector, or the connector\)",
      "reset_connector 与 KV connector 不能同时使用：blockviz 运行的 vLLM OffloadingConnector 没有 "
      "reset_cache（请去掉 reset_connector，或去掉 connector）")
_rule(r"Failed to reset KV cache even when all the running requests are preempted and moved to the "
      r"waiting queue\. This is likely due to the presence of running requests waiting for remote KV "
      r"transfer, which is not supported yet\.",
      "即使抢占了所有运行中的请求并把它们移回等待队列，KV 缓存仍然无法重置（vLLM 的原话）。这多半是因为"
      "还有请求在等待远端 KV 传输，vLLM 目前还不支持这种情况。")
# -- config.kv_cache_groups and prefix_cache_retention_interval (hybrid models) -----------------
_rule(r"a (?P<t>\w+) group has no field '(?P<f>\w+)'", "{t} 类型的组没有字段 '{f}'")
_rule(r"a (?P<t>\w+) group needs `(?P<f>\w+):` \(tokens, at least 1\)",
      "{t} 类型的组必须写出 `{f}:`（token 数，至少为 1）")
_rule(r"prefix_cache_retention_interval \((?P<v>\d+)\) needs a sliding_window KV-cache group: vLLM "
      r"rejects a positive interval without one \(set it to 0\)",
      "prefix_cache_retention_interval（{v}）需要至少一个 sliding_window 类型的 KV 缓存组："
      "没有这样的组时 vLLM 会拒绝正数的间隔（请设为 0）")
_rule(r"prefix_cache_retention_interval \((?P<v>\d+)\) must be a multiple of block_size "
      r"\((?P<bs>\d+)\): vLLM rejects it",
      "prefix_cache_retention_interval（{v}）必须是 block_size（{bs}）的整数倍：否则 vLLM 会拒绝")
_rule(r"model\.num_layers \((?P<n>\d+)\) must equal the number of kv_cache_groups \((?P<g>\d+)\): "
      r"the tiny model has one attention layer per group \(leave num_layers out\)",
      "model.num_layers（{n}）必须等于 kv_cache_groups 的组数（{g}）：这个小模型每个组只有一层注意力"
      "（不写 num_layers 即可）")
_rule(r"the KV store would need (?P<g>[\d.]+) GiB \(limit (?P<lim>[\d.]+) GiB\): use fewer blocks, "
      r"a smaller block_size or model, or set model: null to run without payloads",
      "KV 存储需要 {g} GiB（上限 {lim} GiB）：请减少块数、减小 block_size 或模型，"
      "或者设 model: null，不带 KV 数据运行")
_rule(r"device: cuda was asked for, but no CUDA GPU is available here \(use device: auto or cpu\)",
      "要求使用 device: cuda，但这台机器上没有 CUDA GPU（请用 device: auto 或 cpu）")
_rule(r"unknown device '(?P<d>.*)' \(auto, cpu or cuda\)", "未知设备 '{d}'（可选 auto、cpu 或 cuda）")

# -- references between steps ---------------------------------------------------------------
_rule(r"request '(?P<id>.*)' is used before it arrives", "请求 '{id}' 在到达（arrive）之前就被使用了")
_rule(r"duplicate request id '(?P<id>.*)'", "请求 id '{id}' 重复了")
_rule(r"unknown checkpoint '(?P<c>.*)' \(saved so far: (?P<s>.*)\)",
      lambda m: f"未知的检查点 '{m['c']}'（目前保存过的："
                f"{'还没有' if m['s'] == 'none yet' else m['s'].replace(', ', '、')}）")
_rule(r"unknown checkpoint '(?P<c>.*)'", "未知的检查点 '{c}'")
_rule(r"prompts total more than (?P<n>[\d,]+) tokens", "所有提示词加起来超过 {n} 个 token")
_rule(r"more than (?P<n>[\d,]+) engine iterations in all", "引擎迭代总数超过 {n} 次")

_rule(r"the generated workload is beyond the scenario limits \((?P<m>.+)\); use fewer events or "
      r"shorter prompts",
      lambda m: f"生成的负载超出了场景的限制（{_inner(m['m'])}）；请减少事件数或缩短提示词")
_rule(r"duplicate scenario id '(?P<id>.*)'", "场景 id '{id}' 重复了（另一个文件已经用了它）")

# -- hostile input: what the loader and the command line refuse ----------------------------
_KINDS_ZH = {"an integer": "整数", "a number": "数字", "true or false": "true 或 false",
             "null": "null", "text": "文本"}
_rule(r"the document expands to more than (?P<n>[\d,]+) bytes \(aliases repeated too often\?\)",
      "文档展开别名后超过 {n} 字节（别名重复得太多？）")
_rule(r"a number written with more than (?P<n>\d+) characters", "数字写得太长了（超过 {n} 个字符）")
_rule(r"cannot read (?P<v>'.*'|\".*\") as (?P<k>an integer|a number|true or false|null|text)",
      lambda m: f"无法把 {m['v']} 读成{_KINDS_ZH[m['k']]}")
_rule(r"control character U\+(?P<c>[0-9A-F]{4,6}) is not allowed in a scenario file",
      "场景文件里不能有控制字符 U+{c}")
_rule(r"character U\+(?P<c>[0-9A-F]{4}) \(half a surrogate pair\) is not valid Unicode text",
      "字符 U+{c}（半个代理对）不是有效的 Unicode 文本")
_rule(r"the text is (?P<n>[\d,]+) bytes; the limit is (?P<lim>[\d,]+) \(1 MiB\)",
      "文本有 {n} 字节，上限是 {lim} 字节（1 MiB）")
_rule(r"`(?P<e>\w+)` needs an argument, e.g\. `(?P<ex>.+)`", "`{e}` 需要参数，例如 `{ex}`")
_rule(r"more than (?P<n>[\d,]+) distinct words in the prompts \(the toy tokenizer's vocabulary\)",
      "提示词里不同的词超过了 {n} 个（玩具分词器的词表大小）")
_rule(r"ran out of memory(?: (?P<w>while writing its JSON))?",
      lambda m: "写出它的 JSON 时内存不足" if m["w"] else "内存不足")
# -- end of the hostile-input block ------------------------------------------------------------

# -- a shared link (blockviz.scenario.share) ---------------------------------------------------
_LINK_DAMAGE = {"not text": "不是文本", "not URL-safe base64": "不是 URL 安全的 base64",
                "not compressed data": "不是压缩数据"}
_rule(r"the link would be (?P<n>[\d,]+) characters long; a link holds at most (?P<lim>[\d,]+)",
      "链接会有 {n} 个字符；一个链接最多 {lim} 个字符")
_rule(r"the link's scenario code is empty", "链接里的场景代码是空的")
_rule(r"the link's scenario code is damaged \((?P<why>[^)]+)\)(?P<again>; copy the whole link again)?",
      lambda m: f"链接里的场景代码损坏了（{_LINK_DAMAGE.get(m['why'], m['why'])}）"
                + ("；请重新复制完整的链接" if m["again"] else ""))
_rule(r"the link's scenario expands to more than (?P<n>[\d,]+) bytes, the limit for a scenario",
      "链接里的场景解压后超过 {n} 字节，超出了场景的大小上限")
_rule(r"the link's scenario code is cut short; copy the whole link again",
      "链接里的场景代码不完整（被截断了）；请重新复制完整的链接")
_rule(r"the link's scenario code has extra data after the scenario; copy the whole link again",
      "链接里的场景代码末尾有多余的数据；请重新复制完整的链接")
_rule(r"the link's scenario is not UTF-8 text \(byte (?P<b>\d+)\)",
      "链接里的场景不是 UTF-8 文本（第 {b} 字节处）")


# -- the engine and the scheduler -----------------------------------------------------------
_rule(r"request '(?P<id>.*)' already exists", "请求 '{id}' 已经存在")
_rule(r"request '(?P<id>.*)' has already arrived", "请求 '{id}' 已经到达过了")
_rule(r"request '(?P<id>.*)' has already finished", "请求 '{id}' 已经结束了")
_rule(r"request '(?P<id>.*)' has an empty prompt", "请求 '{id}' 的提示词是空的")
_rule(r"unknown request '(?P<id>.*)'", "未知的请求 '{id}'")
_rule(r"only a running request can be preempted; '(?P<id>.*)' is (?P<st>\w+)",
      lambda m: f"只有运行中的请求才能被抢占；'{m['id']}' 现在是"     # the status as the panels label it
                f"{STRINGS.get('status_' + m['st'], (m['st'],) * 2)[1]}")
_rule(r"restart needs every request finished; still live: (?P<ids>.+)",
      lambda m: f"restart 要求所有请求都已结束；还没结束的：{m['ids'].replace(', ', '、')}")
_rule(r"same_as: request '(?P<id>.*)' has not arrived", "same_as：请求 '{id}' 还没有到达")
_rule(r"same_as '(?P<id>.*)' asks for its first (?P<n>\d+) tokens but it has (?P<m>\d+)",
      "same_as '{id}' 要取它的前 {n} 个 token，但它只有 {m} 个")
_rule(r"multimodal item '(?P<id>.*)' ends at token (?P<end>\d+), past the prompt's (?P<n>\d+) tokens",
      "多模态项 '{id}' 结束于第 {end} 个 token，超出了提示词的 {n} 个 token")
_rule(r"request '(?P<id>.*)': its prompt \((?P<n>\d+) tokens\) plus at least one output token is "
      r"longer than max_model_len \((?P<m>\d+)\); vLLM rejects it",
      "请求 '{id}'：它的提示词（{n} 个 token）再加至少一个输出 token 就超过了 max_model_len（{m}）；"
      "vLLM 会拒绝它")

# -- the run's budget (blockviz.sim.budget) and the app's preview worker ---------------------
_BUDGET_WHAT = {"the model's weights and the KV store": "模型权重和 KV 存储",
                "this forward pass": "这次前向计算", "this checkpoint": "这个检查点",
                "the external tier": "外部缓存层",
                "the payload copies for the player": "给播放器保存的 KV 数据副本"}
_rule(r"the run's time budget of (?P<s>[\d.]+) s ran out during this step",
      "本次运行的时间预算（{s} 秒）在这一步中用完了")
_rule(r"the run's budget of (?P<n>[\d,]+) engine steps is used up",
      "本次运行的引擎步数预算（{n} 步）已经用完")
_rule(r"the run's budget of (?P<n>[\d,]+) computed tokens is used up \((?P<a>[\d,]+) so far, this "
      r"step asks for (?P<b>[\d,]+) more\)",
      "本次运行的计算 token 预算（{n} 个）已经用完（已经计算了 {a} 个，这一步还要 {b} 个）")
_rule(r"(?P<what>.+) needs (?P<x>[\d,.]+) MiB of tensors; with (?P<y>[\d,.]+) MiB already held that "
      r"is more than the run's budget of (?P<z>[\d,.]+) MiB",
      lambda m: f"{_BUDGET_WHAT.get(m['what'], m['what'])}需要 {m['x']} MiB 的张量；已经占用 "
                f"{m['y']} MiB，超出了本次运行 {m['z']} MiB 的预算")
_rule(r"the preview was stopped after (?P<s>[\d.]+) s: the run's time budget is (?P<b>[\d.]+) s",
      "预览运行 {s} 秒后被终止：本次运行的时间预算是 {b} 秒")
_rule(r"the preview was stopped: it needed more memory than the run's budget of (?P<z>[\d,.]+) MiB",
      "预览被终止：它需要的内存超出了本次运行 {z} MiB 的预算")
_rule(r"the preview failed with an internal error \((?P<e>\w+)\); the server is fine",
      "预览因内部错误（{e}）失败；服务器本身没有受到影响")
_rule(r"there is not enough memory here for the KV store and the model's weights",
      "这里的内存不够放下 KV 存储和模型权重")
_rule(r"while reading line (?P<n>[\d,]+) of the text: (?P<rest>.+)",
      lambda m: f"读到文本第 {m['n']} 行时：{_inner(m['rest'])}")
_rule(r"while checking the scenario \(all (?P<n>[\d,]+) lines read\): (?P<rest>.+)",
      lambda m: f"检查场景时（{m['n']} 行已全部读完）：{_inner(m['rest'])}")
_rule(r"after its last step: (?P<rest>.+)", lambda m: f"最后一步之后：{_inner(m['rest'])}")
_rule(r"the server could not start a worker process \((?P<e>.+)\); try again in a moment",
      "服务器无法启动工作进程（{e}）；请稍后再试")
_rule(r"the server could not read from its worker process \((?P<e>.+)\); try again in a moment",
      "服务器无法读取工作进程的消息（{e}）；请稍后再试")
_rule(r"the server is busy: (?P<n>\d+) previews are running; try again in a moment",
      "服务器正忙：已经有 {n} 个预览在运行，请稍后再试")

# -- config.scheduler: what vLLM's SchedulerConfig refuses -------------------------------------
_rule(r"max_num_batched_tokens \((?P<b>\d+)\) is smaller than max_model_len \((?P<m>\d+)\) with "
      r"chunked prefill off: vLLM rejects this \(raise the budget, lower max_model_len, or turn "
      r"enable_chunked_prefill on\)",
      "关闭分块 prefill 时，max_num_batched_tokens（{b}）小于 max_model_len（{m}）：vLLM 会拒绝这样的"
      "配置（请提高预算、降低 max_model_len，或打开 enable_chunked_prefill）")
_rule(r"max_num_batched_tokens \((?P<b>\d+)\) must be >= max_num_seqs \((?P<s>\d+)\): vLLM rejects "
      r"this",
      "max_num_batched_tokens（{b}）必须 ≥ max_num_seqs（{s}）：vLLM 会拒绝这样的配置"
      "（预算小时，把 max_num_seqs 也调小）")
_rule(r"long_prefill_token_threshold \((?P<t>\d+)\) cannot be greater than max_model_len "
      r"\((?P<m>\d+)\): vLLM rejects this",
      "long_prefill_token_threshold（{t}）不能大于 max_model_len（{m}）：vLLM 会拒绝这样的配置")
_rule(r"step (?P<k>\d+) \((?P<kind>\w+)\) is a teaching-only form: vLLM's scheduler never does this "
      r"\(under its default FCFS policy it preempts the last running request when an allocation "
      r"fails, and it schedules running requests first while the token budget lasts\); use `step` "
      r"events, or drop --strict",
      "第 {k} 步（{kind}）是教学演示用的写法：vLLM 的调度器从不这样做（在默认的 FCFS 策略下，它在分配"
      "失败时抢占最后一个运行中的请求，并在 token 预算用完之前先调度运行中的请求）；请改用 `step` "
      "事件，或者去掉 --strict")

# -- pydantic's own messages (the value has the wrong type or size) -----------------------------
_TYPES = {"integer": "整数", "string": "字符串", "boolean": "布尔值（true 或 false）",
          "number": "数字", "list": "列表", "dictionary": "映射（key: value）",
          "tuple": "列表", "set": "列表"}
_rule(r"Input should be a valid integer, unable to parse string as an integer",
      "这里应当是整数（这个字符串不是整数）")
_rule(r"Input should be a valid integer, got a number with a fractional part",
      "这里应当是整数（不能有小数部分）")
_rule(r"Input should be a valid number, unable to parse string as a number",
      "这里应当是数字（这个字符串不是数字）")
_rule(r"Input should be a valid boolean, unable to interpret input", "这里应当是 true 或 false")
_rule(r"Input should be a valid (?P<t>\w+)(?:, got .+)?",
      lambda m: f"这里应当是{_TYPES.get(m['t'], m['t'])}")
_rule(r"Input should be a valid dictionary or instance of \w+", "这里应当是一个映射（key: value）")
_rule(r"Input should be a finite number", "这里应当是一个有限的数")
_rule(r"Input should be an? (?P<t>\w+)", lambda m: f"这里应当是{_TYPES.get(m['t'], m['t'])}")
_OPS = {"greater than or equal to": "≥", "greater than": ">", "less than or equal to": "≤",
        "less than": "<"}
_rule(r"Input should be (?P<op>greater than or equal to|greater than|less than or equal to|less than) "
      r"(?P<n>\S+)", lambda m: f"这里的值应当 {_OPS[m['op']]} {m['n']}")
_rule(r"Input should be (?P<opts>'.*')",        # 'a', 'b' or 'c' → 'a'、'b' 或 'c'
      lambda m: "这里应当是 " + m["opts"].replace("', '", "'、'").replace("' or '", "' 或 '") + " 之一")
_rule(r"String should have at least (?P<n>\d+) characters?", "字符串至少要有 {n} 个字符")
_rule(r"String should have at most (?P<n>\d+) characters?", "字符串最多只能有 {n} 个字符")
_rule(r"String should match pattern '(?P<p>.*)'", "字符串应当符合模式 '{p}'")
_rule(r"List should have at least (?P<n>\d+) items? after validation, not (?P<g>\d+)",
      "列表至少要有 {n} 项，这里只有 {g} 项")
_rule(r"List should have at most (?P<n>\d+) items? after validation, not (?P<g>\d+)",
      "列表最多只能有 {n} 项，这里有 {g} 项")
