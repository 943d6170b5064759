"""The words of bounded work: a long command-line run's progress and time limit, and the app's
capacity sweeps in their worker processes (busy, stopped, over the budget)."""
from __future__ import annotations

STRINGS: dict[str, tuple[str, str]] = {
    # blockviz play | json | verify | export: progress on stderr (a terminal, or --progress)
    "run_progress": ("event {k} of {n} ({kind}) · {steps} engine steps · {rate} steps/s · left: "
                     "{events} events, at least {left} engine steps declared{eta}",
                     "第 {k} / {n} 个事件（{kind}）· 已跑 {steps} 个引擎步 · 每秒 {rate} 步 · 还剩："
                     "{events} 个事件，文件里写明的至少 {left} 个引擎步{eta}"),
    "run_progress_eta": (", about {s} s", "，约 {s} 秒"),
    "run_progress_done": ("ran {n} events, {steps} engine steps in {s} s",
                          "跑完 {n} 个事件、{steps} 个引擎步，用时 {s} 秒"),
    "json_progress": ("writing JSON: step {k} of {n} · {rate} steps/s{eta}",
                      "正在写 JSON：第 {k} / {n} 步 · 每秒 {rate} 步{eta}"),
    "opt_time_limit": ("'{value}' is not a time limit: give seconds, a number above 0 and at most {hi}",
                       "'{value}' 不是时间上限：请写秒数，大于 0、最多 {hi}"),
    # trace capacity: a pool the trace can never fill
    "pool_too_big": ("--pool-blocks {value}: the trace can never use more than {most} blocks of {bs} "
                     "tokens (its {requests} requests, every prompt and output held at once); a larger "
                     "pool replays exactly as {most} blocks do: give at most {most}",
                     "--pool-blocks {value}：这个 trace 最多只会用到 {most} 个 {bs} token 的块（它的 "
                     "{requests} 个请求，所有提示词和输出同时占着）；更大的池子重放结果与 {most} 个块"
                     "完全相同：请最多写 {most}"),
    # the capacity page's jobs (a trace's reading, a sweep) in their worker processes
    "job_busy": ("The server is already running {n} sweeps or trace readings, its limit: yours did not "
                 "start. Try again when one has finished.",
                 "服务器已经在运行 {n} 个扫描或 trace 读取，这是它的上限：你的没有开始。"
                 "请等其中一个结束后再试。"),
    "job_failed": ("The work could not start: {msg}", "无法开始：{msg}"),
    "job_stop": ("Stop", "停止"),
    "job_reading": ("Reading the trace in a worker process: {n} lines so far · {s}",
                    "正在工作进程中读取 trace：已读 {n} 行 · {s}"),
    "job_sweep_progress": ("Replaying {runs} runs in a worker process: {pct}% · {done} of {total} requests "
                           "· {rate} requests/s · {s}{left}",
                           "正在工作进程中回放 {runs} 轮：{pct}% · 第 {done} / {total} 个请求 · "
                           "每秒 {rate} 个 · {s}{left}"),
    "job_left": (" · about {s} left", " · 约剩 {s}"),
    "job_at_sweep": ("{done} of {total} requests replayed", "已回放 {done} / {total} 个请求"),
    "job_at_read": ("{done} lines read", "已读 {done} 行"),
    "job_at_measuring": ("while measuring the trace, before the replays", "在测量 trace 时，回放还没开始"),
    "job_stopped_stop": ("Stopped ({what}: {at}).", "已停止（{what}：{at}）。"),
    "job_stopped_time": ("Stopped after {s}, the page's limit for one job ({what}: {at}). The command "
                         "line has no such limit: `{cmd}`",
                         "运行 {s} 后被终止，这是页面上单个任务的上限（{what}：{at}）。命令行没有这个限制："
                         "`{cmd}`"),
    "job_stopped_memory": ("Stopped: it needed more memory than the page allows one job ({mb} MiB; "
                           "{what}: {at}). The command line has no such limit: `{cmd}`",
                           "被终止：它需要的内存超过了页面上单个任务的上限（{mb} MiB；{what}：{at}）。"
                           "命令行没有这个限制：`{cmd}`"),
    "job_stopped_ended": ("Stopped: this session was away too long.", "已停止：这个会话离开太久了。"),
    "job_crash": ("The work failed with an internal error ({kind}); the server is fine.",
                  "因内部错误（{kind}）失败；服务器本身没有受到影响。"),
    "job_lost": ("The server could not read from the worker process ({e}): the work was stopped. "
                 "Try again in a moment.",
                 "服务器无法读取工作进程的消息（{e}）：这项工作已停止。请稍后再试。"),
    "capt_trace_gone": ("This session's trace was removed while the session was away: open it again.",
                        "这个会话离开期间，它的 trace 已被删除：请重新打开。"),
    # a session's run kept to the app's step limit (ui.data.PREVIEW_MAX_STEPS)
    "preview_capped": ("The preview stopped at step {k} of {n}: the app runs at most {k} steps of a "
                       "scenario. Run it whole with the command line: download it (“Download .yaml” "
                       "saves {file}) and run python -m blockviz play {file}",
                       "预览停在第 {k} 步（共 {n} 步）：应用里一个场景最多运行 {k} 步。完整运行请用命令行："
                       "先下载（“下载 .yaml”保存为 {file}），再运行 python -m blockviz play {file}"),
    "preview_step_limit": ("the app runs at most {k} steps of a scenario", "应用里最多运行场景的 {k} 步"),
    # a session's preview run without its KV payloads (ui.data.preview_run)
    "preview_no_payloads_size": (
        "This preview runs without KV payloads: its KV store and the model's weights need {need}, and "
        "the app's preview holds at most {limit} of tensors.",
        "这个预览不带 KV 数据运行：它的 KV 存储和模型权重需要 {need}，"
        "而应用的预览最多只能占用 {limit} 的张量。"),
    "preview_no_payloads_bytes": (
        "This preview runs without KV payloads: with them it passed the app's {limit} of tensors at "
        "step {k} (the player keeps a copy of each step's written blocks).",
        "这个预览不带 KV 数据运行：带着 KV 数据时，它在第 {k} 步超出了应用预览的 {limit} 张量上限"
        "（播放器会为每一步写入的块保存一份副本）。"),
    "preview_no_payloads_time": (
        "This preview runs without KV payloads: computing them (the tiny model's forward passes) took "
        "longer than the {s} s the preview gives them, at step {k}.",
        "这个预览不带 KV 数据运行：计算 KV 数据（小模型的前向计算）超出了预览给它的 {s} 秒，停在第 {k} 步。"),
    "preview_no_payloads_same": (
        "The blocks are managed exactly as with payloads; only what a request generates comes from "
        "the seeded stream that model: null uses instead of the tiny model, so generated blocks may "
        "hash differently. To see the payloads, set a smaller model (or fewer blocks), or run it "
        "with the command line: python -m blockviz play {file}",
        "块的管理和带 KV 数据时完全一样；只是请求生成的 token 来自 model: null 时使用的带种子随机序列，"
        "而不是小模型，所以生成出来的块的哈希可能不同。要看 KV 数据，请换一个更小的模型（或减少块数），"
        "或者用命令行运行：python -m blockviz play {file}"),
    # what to change when even that cannot run whole in the app
    "preview_lighter_time": (
        "To preview it whole here, make it lighter: fewer steps, shorter prompts or fewer decode "
        "iterations (a preview runs at most {s} s).",
        "要在这里完整预览，请把它变轻一些：少一些步骤、短一些的提示词或少一些解码迭代"
        "（预览最多运行 {s} 秒）。"),
    "preview_lighter_tokens": (
        "To preview it whole here, compute fewer tokens: fewer or shorter prompts, fewer decode "
        "iterations (a preview computes at most {n} tokens).",
        "要在这里完整预览，请少计算一些 token：少一些或短一些的提示词、少一些解码迭代"
        "（预览最多计算 {n} 个 token）。"),
    "preview_lighter_engine_steps": (
        "To preview it whole here, run fewer engine steps: fewer decode or step iterations (a "
        "preview runs at most {n} engine steps).",
        "要在这里完整预览，请少运行一些引擎步：少一些 decode 或 step 迭代（预览最多运行 {n} 个引擎步）。"),
    "preview_lighter_bytes": (
        "To preview it whole here, hold fewer tensors: set model: null, a smaller model, fewer "
        "blocks or fewer checkpoints (a preview holds at most {limit}).",
        "要在这里完整预览，请少占用一些张量：设置 model: null、换更小的模型、减少块数或检查点"
        "（预览最多占用 {limit}）。"),
    "preview_lighter_steps": ("To preview it whole here, split it into scenarios of at most {k} steps.",
                              "要在这里完整预览，请把它拆成每个最多 {k} 步的场景。"),
}
