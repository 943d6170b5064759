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
}
