"""``blockviz trace capacity | generate | check`` — capacity planning on request traces.

  blockviz trace capacity TRACE.jsonl --block-size 512 --pool-blocks 1000,10000 [--json]
  blockviz trace generate multi_turn --requests 5000 --seed 1 -o chat.jsonl
  blockviz trace check TRACE.jsonl

``capacity --json`` prints what ``shared/tools/vllm-diff/run-trace`` prints (vLLM's own manager,
same replay), less its timings: one JSON object per (trace, free order), one per line. Without
``--json``: a table per (trace, free order), capacities in blocks, tokens and (given a model or
``--kv-bytes-per-token``) GiB, and a progress bar on stderr. A bad trace line or option is one
located line on stderr, exit status 2.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import types

from blockviz.core import FREE_ORDERS
from blockviz.i18n import LANGS, t
from blockviz.i18n.errors import error_text
from blockviz.render.text import columns
from blockviz.scenario.trace import TRACE_BLOCK_TOKENS, TraceError, check_trace
from blockviz.sim.capacity import (
    KV_PRESETS,
    MODES,
    TIMED_DEFAULTS,
    gib,
    hit_rate,
    limiting_group,
    model_groups,
)
from blockviz.sim.curve import curve_sweep
from blockviz.sim.explain_trace import TRACE_KEYS, add_explain
from blockviz.sim.optimal import add_optimal
from blockviz.sim.sweep import EXECUTORS, ExecutorUnavailable, LocalExecutor, RayExecutor, sweep
from blockviz.teach.tracegen import TraceWorkload, write_generated
from blockviz.teach.workload import KINDS

EXIT_INPUT = 2
MAX_POOL_BLOCKS = 1 << 31


class _Refused(Exception):
    """An option's value is refused; the message names the option."""


def one_line_error(parser: argparse.ArgumentParser, message: str):
    """argparse's errors as one line: ``blockviz trace capacity: --pool-blocks: ...``, exit 2."""
    sys.exit(_fail(f"{parser.prog}: {' '.join(message.split())}"))


def option(convert, ok, key: str, **fields):
    """An option's argparse type: ``convert(text)`` where ``ok`` allows it, else argparse's error
    (the i18n ``key`` with ``fields`` says what is allowed)."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(t(key, "en", value=text, **fields))
        return value
    return parse


def _whole(text: str) -> int:
    return int(text.replace("_", ""))


def int_in(lo: int, hi: int):
    return option(_whole, lambda v: lo <= v <= hi, "trace_opt_int", lo=f"{lo:,}", hi=f"{hi:,}")


_pools = option(lambda text: [_whole(x) for x in text.split(",")],
                lambda vs: all(1 <= v <= MAX_POOL_BLOCKS for v in vs), "trace_opt_pools")
_orders = option(lambda text: list(dict.fromkeys(x.strip() for x in text.split(","))),
                 lambda vs: all(v in FREE_ORDERS for v in vs), "trace_opt_choice",
                 choices=", ".join(FREE_ORDERS) + " (or both, comma-separated)")
_positive = option(float, lambda v: 0 < v < float("inf"), "trace_opt_number")
_seconds = option(float, lambda v: 0 <= v < float("inf"), "trace_opt_seconds")


# Timed mode's options: (option name, keyword of replay_timed, parse, help)
TIMED_OPTIONS = (
    ("--max-num-batched-tokens", "max_num_batched_tokens", int_in(1, 1 << 24),
     "the token budget of a step (vLLM's max_num_batched_tokens)"),
    ("--max-num-seqs", "max_num_seqs", int_in(1, 1 << 16), "requests running at once, at most"),
    ("--max-model-len", "max_model_len", int_in(2, 1 << 20),
     "a request's length cap: a prompt this long or longer is rejected, outputs stop there"),
    ("--step-base", "step_base_s", _seconds, "seconds every engine step costs"),
    ("--step-prefill-token", "step_prefill_token_s", _seconds,
     "seconds per prompt token a step computes (hits are not computed)"),
    ("--step-decode-seq", "step_decode_seq_s", _seconds, "seconds per request a step decodes"),
)


def _block_size(text: str) -> int:
    value = int_in(1, TRACE_BLOCK_TOKENS)(text)
    if TRACE_BLOCK_TOKENS % value:
        raise argparse.ArgumentTypeError(t("trace_err_block_size", "en", value=value))
    return value


def _show_default(value) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def add_parser(sub) -> None:
    """Register ``trace`` (and its commands) on the ``blockviz`` command's subparsers."""
    tp = sub.add_parser("trace", help="capacity planning on request traces (Mooncake JSONL)",
                        description="Replay request traces in the Mooncake format (JSON Lines: "
                                    "timestamp, input_length, output_length, hash_ids of 512-token "
                                    "blocks) through blockviz's vLLM block manager.")
    tsub = tp.add_subparsers(dest="trace_command", required=True,
                             metavar="{capacity,generate,check}")
    c = tsub.add_parser("capacity", help="hit rate against pool size, both free orders, the ceiling",
                        description="Sequence mode (the Mooncake paper's method): requests in file "
                                    "order, each alone: lookup, allocate its whole prompt (caching "
                                    "its full blocks), free. Outputs are not cached. Timed mode: "
                                    "arrivals at their timestamps through vLLM's scheduler, each "
                                    "decoding output_length tokens; a step costs --step-base + "
                                    "--step-prefill-token x prompt tokens computed + "
                                    "--step-decode-seq x decoding requests (simulated seconds).")
    c.add_argument("traces", nargs="+", metavar="TRACE", help="Mooncake-format JSONL file(s)")
    c.add_argument("--block-size", type=_block_size, default=512,
                   help="tokens per KV block, dividing 512 (default 512)")
    c.add_argument("--pool-blocks", type=_pools, required=True, metavar="N1,N2,...",
                   help="pool sizes to replay, in blocks")
    c.add_argument("--free-order", type=_orders, default=["split"], metavar="ORDER",
                   help="split (vLLM >= 0.24), append (<= 0.23) or split,append (default split)")
    c.add_argument("--mode", choices=list(MODES), default="sequence",
                   help="sequence (each request alone, file order; default) or timed (arrivals at "
                        "their timestamps through the scheduler; queueing and TTFT)")
    for opt, dest, parse, help_ in TIMED_OPTIONS:
        c.add_argument(opt, dest=dest, type=parse, default=None,
                       metavar="SECONDS" if parse is _seconds else "N",
                       help=f"timed mode: {help_} (default {_show_default(TIMED_DEFAULTS[dest])})")
    c.add_argument("--limit", type=int_in(1, 1 << 40), default=None, metavar="N",
                   help="only the first N requests of each trace")
    c.add_argument("--json", action="store_true",
                   help="print run-trace's JSON, one object per (trace, free order) per line")
    c.add_argument("--curve", action="store_true",
                   help="sequence mode in one pass, exact at every pool size: --pool-blocks picks the "
                        "rows, --json adds \"curve\": [[pool_blocks, hits], ...] wherever the hits change")
    c.add_argument("--explain", action="store_true",
                   help="sequence mode: split every admitted prompt token at each pool size into "
                        "hit / evicted (a bigger cache could have kept it) / cold / last-token / "
                        "partial block; --json adds \"split\" to each point")
    c.add_argument("--optimal", action="store_true",
                   help="sequence mode: add the hits of the best any eviction policy could do "
                        "(Belady's MIN, same blocks and rules) at each pool size")
    kv = c.add_mutually_exclusive_group()
    kv.add_argument("--model", choices=list(KV_PRESETS), default=None,
                    help="show capacities in GiB for this model's KV cache (16-bit); a hybrid model "
                         "(gpt-oss, gemma-3, llama-4-scout) is also replayed with its KV-cache groups")
    kv.add_argument("--kv-bytes-per-token", type=int_in(1, 1 << 30), default=None, metavar="BYTES",
                    help="show capacities in GiB at this many KV bytes per token")
    c.add_argument("--executor", choices=list(EXECUTORS), default="local",
                   help="local worker processes (default) or a Ray cluster (pip install 'blockviz[ray]')")
    c.add_argument("--workers", type=int_in(1, 1024), default=None,
                   help="local executor: worker processes (default: min(CPUs, tasks))")
    c.add_argument("--ray-address", default=None,
                   help="Ray executor: the cluster's address (default: start a local Ray)")
    c.add_argument("--lang", choices=LANGS, default="en")
    c.set_defaults(fn=cmd_capacity)

    g = tsub.add_parser("generate", help="write a generated workload as a Mooncake-format trace",
                        description="The workload kinds of the capacity page, at trace scale.")
    g.add_argument("kind", choices=list(KINDS))
    d = TraceWorkload()
    g.add_argument("--requests", type=int_in(1, 10_000_000), default=d.requests)
    g.add_argument("--seed", type=int_in(0, 1 << 62), default=d.seed)
    for name, help_ in (("prefix_tokens", "a system prompt / an example set, in tokens"),
                        ("new_tokens", "mean fresh tokens per request"),
                        ("output_tokens", "mean output_length"),
                        ("num_prefixes", "distinct system prompts / example sets"),
                        ("max_turns", "multi_turn: turns per conversation"),
                        ("max_live", "multi_turn: conversations open at once")):
        g.add_argument("--" + name.replace("_", "-"), type=int_in(1, 1 << 18),
                       default=getattr(d, name), help=f"{help_} (default {getattr(d, name)})")
    g.add_argument("--rate", type=_positive, default=d.rate, help="mean arrivals per second")
    g.add_argument("-o", "--output", default=None, help="the file to write (default: stdout)")
    g.add_argument("--lang", choices=LANGS, default="en")
    g.set_defaults(fn=cmd_generate)

    k = tsub.add_parser("check", help="read a trace, checking every line")
    k.add_argument("traces", nargs="+", metavar="TRACE")
    k.add_argument("--lang", choices=LANGS, default="en")
    k.set_defaults(fn=cmd_check)
    for p in (tp, c, g, k):
        p.error = types.MethodType(one_line_error, p)


# -- progress ---------------------------------------------------------------------------------
class ProgressBar:
    """A bar on stderr: redrawn in place on a terminal, a line per 10% elsewhere (a log)."""

    def __init__(self, label: str, unit: str = "requests", stream=None, width: int = 30) -> None:
        self.label, self.unit, self.stream, self.width = label, unit, stream or sys.stderr, width
        self.tty = self.stream.isatty()
        self.start = time.perf_counter()
        self.last_draw = 0.0
        self.last_tenth = -1

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        frac = done / total if total else 1.0
        if self.tty:
            if done < total and now - self.last_draw < 0.1:
                return
            self.last_draw = now
            end = "\n" if done >= total else ""
            self.stream.write("\r" + self._line(done, total, frac, now) + end)
        else:
            tenth = int(frac * 10)
            if tenth == self.last_tenth:
                return
            self.last_tenth = tenth
            self.stream.write(self._line(done, total, frac, now) + "\n")
        self.stream.flush()

    def _line(self, done: int, total: int, frac: float, now: float) -> str:
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = now - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        left = f", ~{(total - done) / rate:,.0f} s left" if rate > 0 and done < total else ""
        return (f"{self.label} [{bar}] {frac:4.0%} {done:,}/{total:,} {self.unit} "
                f"{elapsed:.1f} s ({rate:,.0f}/s{left})")


# -- commands ---------------------------------------------------------------------------------
def _fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:g} {unit}" if v == int(v) else f"{v:.2f} {unit}"
    return f"{n:g} bytes"


def _rate(hits: int, queries: int) -> str:
    return f"{hits / queries:.1%}" if queries else "-"


def render_table(report: dict, file: str, lang: str, bytes_per_token: int | None,
                 kv_source: str | None) -> str:
    bs = report["block_size"]
    lines = [t("trace_tbl_title", lang, file=file, requests=report["requests"], bs=bs,
               order=report["free_order"])]
    model = report.get("model")
    if bytes_per_token:
        lines.append(t("trace_tbl_kv_groups" if model else "trace_tbl_kv", lang,
                       bytes=_fmt_bytes(bytes_per_token), source=kv_source))
    group = t(f"trace_group_{limiting_group(model)}", lang) if model else None
    ceil = report["ceiling"]
    ceil_rate = hit_rate(ceil)
    timed = report.get("mode") == "timed"
    if timed:
        lines.append(t("trace_tbl_timed", lang, **report["options"]))
    points = report["points"]
    cols = []                # the table's columns, left to right: (header, a point's cell)

    def col(key: str, cell, **fields) -> None:
        cols.append((t(key, lang, **fields), cell))

    col("cap_col_pool", lambda p: f"{p['pool_blocks']:,}")
    col("trace_tbl_tokens", lambda p: f"{p['pool_blocks'] * bs:,}")
    if bytes_per_token:
        col("trace_tbl_gib", lambda p: f"{gib(p['pool_blocks'] * bs, bytes_per_token):,.2f}")
    col("cap_hit_rate", lambda p: _rate(p["hits"], p["queries"]))
    if points and "optimal_hits" in points[0]:
        col("trace_tbl_optimal", lambda p: _rate(p["optimal_hits"], p["queries"]))
    col("trace_tbl_of_ceiling", lambda p: f"{hit_rate(p) / ceil_rate:.1%}" if ceil_rate else "-")
    if model:
        col("trace_tbl_limited", lambda p: _rate(p["limited_hits"], p["queries"]), group=group)
    for name in ("requests", "rejected", "evictions"):
        col(f"trace_tbl_{name}", lambda p, name=name: f"{p[name]:,}")
    if timed:
        col("trace_tbl_preemptions", lambda p: f"{p['preemptions']:,}")
        col("trace_tbl_queue", lambda p: f"{p['queue_delay_p50_s']:.3g}/{p['queue_delay_p90_s']:.3g}")
        col("trace_tbl_ttft", lambda p: f"{p['ttft_p50_s']:.3g}/{p['ttft_p90_s']:.3g}")
    lines += table_lines([h for h, _ in cols], [[cell(p) for _, cell in cols] for p in points])
    lines.append(t("trace_tbl_ceiling", lang, rate=_rate(ceil["hits"], ceil["queries"]),
                   hits=ceil["hits"], queries=ceil["queries"])
                 + (t("trace_tbl_ceiling_limited", lang, limited=ceil["limited_hits"], group=group)
                    if model and ceil["limited_hits"] else ""))
    if points and "split" in points[0]:
        lines += ["", t("trace_tbl_split_title", lang)]
        heads = [t("cap_col_pool", lang)] + [t(f"xc_{k}", lang) for k in TRACE_KEYS]
        lines += table_lines(heads, [[f"{p['pool_blocks']:,}"] + [_rate(p["split"][k], p["queries"])
                                                                  for k in TRACE_KEYS]
                                     for p in points])
        lines.append(t("trace_tbl_split_how", lang))
    return "\n".join(lines)


def table_lines(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to fit; numbers (every column but none here) right-aligned."""
    widths = [max(columns(x) for x in col) for col in zip(headers, *rows)]
    out = ["  ".join(_pad(h, w) for h, w in zip(headers, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(_pad(x, w) for x, w in zip(r, widths)) for r in rows]
    return out


def _pad(text: str, width: int) -> str:
    return " " * (width - columns(text)) + text


def _fail(text: str) -> int:
    print(text, file=sys.stderr)
    return EXIT_INPUT


def _mode_options(args) -> dict:
    """The timed options given; one only timed mode reads is refused in another mode."""
    given = {dest: getattr(args, dest) for _, dest, _, _ in TIMED_OPTIONS
             if getattr(args, dest) is not None}
    if given and args.mode != "timed":
        opt = next(o for o, dest, _, _ in TIMED_OPTIONS if dest in given)
        raise _Refused(f"{opt}: {t('trace_opt_timed_only', args.lang)}")
    opt = "--curve" if args.curve else "--optimal" if args.optimal else "--explain" if args.explain else None
    if opt and args.mode != "sequence":
        raise _Refused(f"{opt}: {t('trace_opt_sequence_only', args.lang)}")
    if opt and model_groups(args.model):
        raise _Refused(f"{opt}: {t('trace_opt_groups_curve', args.lang, model=args.model)}")
    return given


def cmd_capacity(args) -> int:
    bar = None if args.json else ProgressBar(t("trace_tbl_progress", args.lang),
                                              t("trace_tbl_requests", args.lang))
    try:
        options = _mode_options(args)
        if args.executor == "ray":
            executor = RayExecutor(address=args.ray_address)
        else:
            executor = LocalExecutor(workers=args.workers)
        run = curve_sweep if args.curve else sweep     # --curve: one pass per (trace, free order)
        hybrid = {"model": args.model} if model_groups(args.model) else {}
        result = run(args.traces, block_size=args.block_size, pool_blocks=args.pool_blocks,
                     free_orders=args.free_order, mode=args.mode, limit=args.limit,
                     options=options, executor=executor, progress=bar, **hybrid)
        if args.optimal:
            add_optimal(result.reports, args.traces, block_size=args.block_size, limit=args.limit,
                        progress=None if args.json else ProgressBar(t("trace_tbl_progress_optimal",
                                                                       args.lang)))
        if args.explain:
            add_explain(result.reports, args.traces, block_size=args.block_size, limit=args.limit)
    except _Refused as e:
        return _fail(f"blockviz trace capacity: {e}")
    except TraceError as e:
        return _fail(e.localized(args.lang))
    except ValueError as e:      # settings vLLM refuses (e.g. max_num_seqs > the token budget)
        return _fail(f"blockviz trace capacity: {error_text(e, args.lang)}")
    except ExecutorUnavailable:
        return _fail(f"blockviz trace capacity: --executor: {t('trace_opt_ray', args.lang)}")
    bpt, source = None, None
    if args.model:
        shape = KV_PRESETS[args.model]
        bpt, source = shape.bytes_per_token, f"{args.model}: {shape.describe(args.lang)}"
    elif args.kv_bytes_per_token:
        bpt, source = args.kv_bytes_per_token, "--kv-bytes-per-token"
    files = [tr for tr in args.traces for _ in args.free_order]
    for file, report in zip(files, result.reports):
        if args.json:
            doc = ({"trace": file} | report) if len(args.traces) > 1 else report
            print(json.dumps(doc))
        else:
            print(render_table(report, file, args.lang, bpt, source) + "\n")
    return 0


def cmd_generate(args) -> int:
    try:
        w = TraceWorkload(kind=args.kind, requests=args.requests, seed=args.seed,
                          prefix_tokens=args.prefix_tokens, new_tokens=args.new_tokens,
                          output_tokens=args.output_tokens, num_prefixes=args.num_prefixes,
                          max_turns=args.max_turns, max_live=args.max_live, rate=args.rate)
        if args.output is None:
            write_generated(w, sys.stdout)
            return 0
        with open(args.output, "w", encoding="utf-8") as f:
            n = write_generated(w, f)
    except ValueError as e:
        return _fail(f"blockviz trace generate: {e}")
    except OSError as e:
        return _fail(f"{args.output}: {t('trace_opt_write', args.lang, e=e.strerror or str(e))}")
    print(t("trace_generated", args.lang, file=args.output, requests=n, kind=args.kind, seed=args.seed),
          file=sys.stderr)
    return 0


def cmd_check(args) -> int:
    for trace in args.traces:
        try:
            size = check_trace(trace)
        except TraceError as e:
            return _fail(e.localized(args.lang))
        print(t("trace_check_ok", args.lang, file=trace, requests=size["requests"],
                tokens=size["prompt_tokens"], blocks=size["trace_blocks"], bt=size["block_tokens"],
                allowed=", ".join(map(str, size["block_sizes"]))))
    return 0
