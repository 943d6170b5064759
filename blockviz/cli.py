"""``blockviz`` (or ``python -m blockviz``) — app | validate | play | json | metrics | schema |
verify | export | trace | live | publish | events.

Wherever a scenario file is accepted, a built-in lesson's id works too (``blockviz json six-blocks``).
Every problem with a scenario is one located line on stderr and exit status 2; never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
import types
from itertools import accumulate

from blockviz import trace_cli
from blockviz.i18n import LANGS, t
from blockviz.i18n.errors import localize_error
from blockviz.live import cli as live_cli
from blockviz.render import theme
from blockviz.scenario import ScenarioError, json_schema, load
from blockviz.scenario.lessons import lesson_files, resolve

EXIT_SCENARIO = 2

# What `blockviz app` tells Streamlit (the one place: an installed copy has no .streamlit/ folder).
STREAMLIT_OPTIONS = {
    "server.headless": "true",
    "server.runOnSave": "false",
    "server.maxUploadSize": "200",      # MB: the capacity page's traces (its uploader says so)
    "browser.gatherUsageStats": "false",
    "client.toolbarMode": "minimal",
    "theme.base": "light",
    "theme.primaryColor": theme.BLUE,
    # Streamlit's default runs a full gc.collect(2) after every script run, over the whole server
    # (every session's runs): with self-check on that was ~85% of a step's rerun, ~170 of ~200 ms
    # CPU (py-spy). Python's own generational collector still runs.
    "runner.postScriptGC": "false",
    # a served player, not an editing loop: no per-session polling of the modules' files
    "server.fileWatcherType": "none",
}


def _refuse(message: str) -> int:
    """``message`` on stderr, and the exit status of a command refused (a located problem)."""
    print(message, file=sys.stderr)
    return EXIT_SCENARIO


def _load(path: str):
    return load(resolve(path))


def cmd_app(args) -> int:
    """Start the player: ``streamlit run`` on the app script inside the package. Options the user
    gives go after ours, so theirs win."""
    import os
    import subprocess
    from pathlib import Path

    from blockviz.live import endpoints, replay
    script = Path(__file__).resolve().parent / "ui" / "streamlit_app.py"
    cmd = [sys.executable, "-m", "streamlit", "run", str(script)]
    for key, value in STREAMLIT_OPTIONS.items():
        cmd += [f"--{key}", value]
    try:   # --live ENDPOINT..., --recording FILE...: the Live page's (blockviz.live), not streamlit's
        rest, files = replay.split_app_args(args.streamlit_args)
        args.streamlit_args, specs = endpoints.split_app_args(rest)
    except ValueError as e:
        return _refuse(f"blockviz app: {e}")
    if specs:      # for the server, which reads them from BLOCKVIZ_LIVE and BLOCKVIZ_RECORDINGS
        os.environ[endpoints.ENV] = json.dumps(specs)
    if files:
        os.environ[replay.ENV] = json.dumps(files)
    cmd += args.streamlit_args
    port = next((a.split("=", 1)[1] for a in args.streamlit_args if a.startswith("--server.port=")),
                None)
    if port is None and "--server.port" in args.streamlit_args:
        i = args.streamlit_args.index("--server.port")
        port = args.streamlit_args[i + 1] if i + 1 < len(args.streamlit_args) else None
    print(f"blockviz: the player will be at http://localhost:{port or 8501} (Ctrl+C stops it)",
          file=sys.stderr)
    if os.name == "posix":
        os.execv(sys.executable, cmd)      # Ctrl+C and signals go straight to Streamlit
    return subprocess.call(cmd)


def cmd_validate(args) -> int:
    loaded = _load(args.file)
    s = loaded.scenario
    if args.strict:
        for i, step in enumerate(s.steps):
            if step.teaching_only:
                raise loaded.error(loaded.step_path(i), (
                    f"step {i + 1} ({step.kind}) is a teaching-only form: vLLM's scheduler never "
                    f"does this (under its default FCFS policy it preempts the last running "
                    f"request when an allocation fails, and it schedules running requests first "
                    f"while the token budget lasts); use `step` events, or drop --strict"))
    print(f"{args.file}: ok — scenario {s.id!r}, {len(s.steps)} steps, "
          f"{s.config.num_blocks} blocks of {s.config.block_size} tokens")
    return 0


def _out_of_memory(loaded, k: int, message: str) -> ScenarioError:
    """A MemoryError as a located error: at step ``k`` (1-based; 0 is the start, before any
    event), as the runner names the step an engine error happened at."""
    if 1 <= k <= len(loaded.scenario.steps):
        return loaded.step_error(k - 1, message)
    return loaded.error(("config",), message)


# -- bounds and progress of a long run -----------------------------------------------------------
MAX_INDENT = 16
MAX_TIME_LIMIT_S = 7 * 24 * 3600.0
_time_limit = trace_cli.option(float, lambda v: 0 < v <= MAX_TIME_LIMIT_S,  # NaN and inf fail too
                               "opt_time_limit", hi=f"{MAX_TIME_LIMIT_S:,.0f}")


class _Ticker:
    """A line of progress on stderr: on a terminal one line redrawn in place (at most 4 times a
    second); elsewhere (``--progress`` into a log) a line a second; not ``shown``: never (it
    still keeps count, for the error of a run that runs out of memory)."""

    def __init__(self, lang: str, stream=None, shown: bool = True) -> None:
        import time
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.lang = lang
        self.every = (0.25 if self.tty else 1.0) if shown else float("inf")
        self.clock = time.monotonic
        self.start = self.last = self.clock()
        self.drawn = False

    def tick(self, line) -> None:
        """Draw ``line(now)`` when a line is due."""
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self._draw(line(now))

    def _draw(self, text: str) -> None:
        self.stream.write(("\r\x1b[K" + text) if self.tty else text + "\n")
        self.stream.flush()
        self.drawn = True


class RunProgress(_Ticker):
    """A long run's progress: events and engine steps done, the rate, and what is left (events,
    and the engine steps the file declares)."""

    def __init__(self, loaded, lang: str = "en", stream=None, shown: bool = True) -> None:
        super().__init__(lang, stream, shown)
        steps = loaded.scenario.steps
        self.kinds = [s.kind or "note" for s in steps]
        self.declared = [s.engine_steps for s in steps]
        # the declared engine steps of events i.. to the end (0 after the last)
        self.after = list(accumulate(reversed(self.declared), initial=0))[::-1]
        self.events = 0                            # events done
        self.engine_steps = 0
        self.at_event = 0                          # engine steps when the current event began

    def event(self, done: int, _total: int) -> None:
        self.events = done
        self.at_event = self.engine_steps
        self.tick(self.line)

    def watch(self, meter) -> None:
        self.engine_steps = meter.engine_steps
        self.tick(self.line)

    def line(self, now: float) -> str:
        n = len(self.kinds)
        k = min(self.events + 1, n)
        elapsed = max(now - self.start, 1e-9)
        rate = self.engine_steps / elapsed
        in_event = self.engine_steps - self.at_event
        left = self.after[self.events] - min(in_event, self.declared[self.events] if self.events < n else 0)
        eta = t("run_progress_eta", self.lang, s=f"{left / rate:,.0f}") if rate > 0 and left else ""
        return t("run_progress", self.lang, k=f"{k:,}", n=f"{n:,}", kind=self.kinds[k - 1] if n else "-",
                 steps=f"{self.engine_steps:,}", rate=f"{rate:,.0f}", events=f"{n - self.events:,}",
                 left=f"{max(left, 0):,}", eta=eta)

    def done(self) -> None:
        if not self.drawn:             # a quick run: nothing to add
            return
        s = f"{self.clock() - self.start:,.1f}"
        self._draw(t("run_progress_done", self.lang, n=f"{self.events:,}", steps=f"{self.engine_steps:,}",
                     s=s))
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _progress_wanted(args) -> bool:
    return bool(getattr(args, "progress", False)) or sys.stderr.isatty()


def _run(args, *, stop: bool = True):
    """(loaded, engine, timeline): ``args.file`` loaded and ``run`` to the end within the command
    line's budget (``--time-limit`` its wall time), with progress on stderr when wanted; running
    out of memory is a located error (the step that was running), not a traceback. ``stop``: a
    run that stopped early raises its error."""
    from dataclasses import replace

    from blockviz.sim.budget import RUN_BUDGET
    from blockviz.sim.runner import run
    loaded = _load(args.file)
    limit = getattr(args, "time_limit", None)       # --time-limit: the budget's wall time
    budget = RUN_BUDGET if limit is None else replace(RUN_BUDGET, seconds=limit)
    wanted = _progress_wanted(args)
    progress = RunProgress(loaded, getattr(args, "lang", "en"), shown=wanted)
    try:
        engine, timeline = run(loaded, payloads=not getattr(args, "no_payloads", False),
                               device=getattr(args, "device", None), progress=progress.event,
                               budget=budget, watch=progress.watch if wanted else None)
    except MemoryError:
        raise _out_of_memory(loaded, progress.events + 1, "ran out of memory") from None
    progress.done()
    if stop and timeline.error is not None:
        raise timeline.error
    return loaded, engine, timeline


def cmd_json(args) -> int:
    """The contract, written one step (and one frame) at a time as it is made: memory stays that
    of one step whatever their number, and the first bytes come out at once."""
    from blockviz.sim.contract import write_timeline
    loaded, engine, timeline = _run(args)
    writing = _JsonProgress(len(timeline), getattr(args, "lang", "en"), shown=_progress_wanted(args))
    try:
        write_timeline(sys.stdout.write, loaded.scenario.id, engine, timeline,
                       frames=not args.no_frames, indent=args.indent, on_step=writing)
    except MemoryError:
        raise _out_of_memory(loaded, writing.at, "ran out of memory while writing its JSON") from None
    sys.stdout.write("\n")
    return 0


class _JsonProgress(_Ticker):
    """The JSON's writing, like a run's progress: steps written, rate, time left."""

    def __init__(self, total: int, lang: str, stream=None, shown: bool = True) -> None:
        super().__init__(lang, stream, shown)
        self.total = total
        self.at = 0                                # steps written

    def __call__(self, k: int) -> None:
        self.at = k
        self.tick(lambda now: self.line(k, now))

    def line(self, k: int, now: float) -> str:
        rate = k / max(now - self.start, 1e-9)
        eta = t("run_progress_eta", self.lang, s=f"{(self.total - k) / rate:,.0f}") if rate > 0 else ""
        return t("json_progress", self.lang, k=f"{k:,}", n=f"{self.total:,}", rate=f"{rate:,.0f}",
                 eta=eta)


def cmd_schema(args) -> int:
    json.dump(json_schema(), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def cmd_play(args) -> int:
    from blockviz.render.text import render_step
    from blockviz.teach.labels import HashLabels
    loaded, engine, timeline = _run(args, stop=False)
    color = sys.stdout.isatty() if args.color is None else args.color
    labels = HashLabels.for_timeline(timeline)
    for i in range(len(timeline)):
        print(render_step(timeline, i, lang=args.lang, color=color, labels=labels))
    if timeline.error is not None:
        return _refuse(timeline.error.localized(args.lang))
    return 0


def cmd_metrics(args) -> int:
    """vLLM's metrics after each step (or step K), in the Prometheus text format."""
    from blockviz.i18n import event_label
    from blockviz.render.prometheus import log_line, prometheus_text
    loaded, engine, timeline = _run(args)
    steps = range(len(timeline)) if args.step is None else [args.step]
    if args.step is not None and not 0 <= args.step < len(timeline):
        return _refuse(f"{args.file}: there is no step {args.step} (0 to {len(timeline) - 1})")
    for i in steps:
        m = timeline.step_vllm_metrics(i)
        label = event_label(timeline.step_of(i), "en")
        sys.stdout.write(f"# blockviz: step {i} ({label}), engine step {m.engine_step}\n")
        sys.stdout.write(prometheus_text(m, args.model_name))
        sys.stdout.write(f"# log: {log_line(m)}\n")
    return 0


def cmd_verify(args) -> int:
    from blockviz.kv import tolerance
    loaded, engine, timeline = _run(args)
    if engine.kv is None:
        return _refuse(f"{args.file}: this scenario runs without KV payloads (config.model is null): "
                       f"there is nothing to verify")
    device = engine.kv.device_name
    tol = tolerance(device)
    found = [(i, op) for i in range(len(timeline)) for op in timeline.step_ops(i)
              if op.kind == "verify"]
    good = 0
    for i, op in found:
        ok = op.max_abs_diff <= tol
        good += ok
        print(f"step {i}: {op.request_id}: {op.hit_tokens} hit tokens, {op.new_tokens} computed, "
              f"max abs difference {op.max_abs_diff:.3g} {'ok' if ok else 'MISMATCH'}")
    print(f"verified: {good}/{len(found)} cache hits reproduce recomputation (device: {device})")
    return 0 if good == len(found) else 1


def cmd_export(args) -> int:
    from pathlib import Path

    from blockviz.export import ExportError, board_png, export_html, export_recording_html
    from blockviz.live.replay import RecordingError, is_recording, read_recording
    from blockviz.render.board import MissingAsset
    fmt = args.format or ("png" if args.output and args.output.lower().endswith(".png") else "html")
    out = args.output
    try:
        if is_recording(args.file):        # a KV-event recording: on the board, a batch a step
            out = args.output or f"{Path(args.file).stem}-step{args.step}.{fmt}"
            doc = export_recording_html(read_recording(args.file), lang=args.lang, start=args.step)
        else:
            loaded, engine, timeline = _run(args)
            out = args.output or f"{loaded.scenario.id}-step{args.step}.{fmt}"
            titles = {lang: loaded.scenario.title.get(lang) for lang in LANGS}
            doc = export_html(timeline, title=titles[args.lang], lang=args.lang, start=args.step,
                              file=args.file, titles=titles)
        made = doc.encode("utf-8") if fmt == "html" else board_png(doc, args.step)  # png: Chromium's
        try:                       # only the write blames the output path
            Path(out).write_bytes(made)
        except OSError as e:
            return _refuse(f"{out}: cannot write the file: {e.strerror}")
    except (ExportError, MissingAsset) as e:
        return _refuse(str(e))
    except RecordingError as e:
        return _refuse(e.localized(args.lang))
    except OSError as e:           # not the output (that is said above): name what failed
        return _refuse(f"{e.filename or args.file}: {e.strerror or e}")
    print(out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    lessons = ", ".join(lesson_files())
    p = argparse.ArgumentParser(
        prog="blockviz", description="Step through vLLM's KV-cache block manager.",
        epilog=f"FILE may also be a built-in lesson's id: {lessons}.")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("app", help="start the player in the browser (Streamlit)",
                       description="Start the player (the built-in six-block lesson) at "
                                   "http://localhost:8501. --live ENDPOINT (repeatable) lets the "
                                   "Live page subscribe there (default: tcp://127.0.0.1:5557 only); "
                                   "--recording FILE (repeatable) offers a KV-event recording on "
                                   "the Live page (opened at /live?recording=NAME); every other "
                                   "argument goes to `streamlit run`, e.g. "
                                   "--server.port 8600.")
    a.add_argument("streamlit_args", nargs=argparse.REMAINDER,
                   help="options for streamlit run (e.g. --server.port 8600)")
    a.set_defaults(fn=cmd_app)
    v = sub.add_parser("validate", help="check a scenario file without running it")
    v.add_argument("--strict", action="store_true",
                   help="also refuse the teaching-only forms (preempt: ID, decode: {requests})")
    v.set_defaults(fn=cmd_validate)
    j = sub.add_parser("json", help="run a scenario and print every step as JSON (the contract)")
    j.add_argument("--indent", type=trace_cli.int_in(0, MAX_INDENT), default=None, metavar="N",
                   help=f"indent the JSON by N spaces (0 to {MAX_INDENT}; default: one line per step)")
    j.add_argument("--no-frames", action="store_true", help="leave out the op-level frames")
    j.add_argument("--no-payloads", action="store_true",
                   help="skip the KV tensors (outputs then come from the seeded toy sampler)")
    j.set_defaults(fn=cmd_json)
    pl = sub.add_parser("play", help="run a scenario and show each step in the terminal")
    pl.add_argument("--lang", choices=LANGS, default="en")
    pl.add_argument("--color", action=argparse.BooleanOptionalAction, default=None,
                    help="ANSI colours (default: when stdout is a terminal)")
    pl.set_defaults(fn=cmd_play)
    me = sub.add_parser(
        "metrics", help="vLLM's metrics after each step, in the Prometheus text format",
        description="Run a scenario and print, after each step (event), vLLM 0.33's KV-cache and "
                    "prefix-cache metrics as its /metrics endpoint shows them (names, HELP texts, "
                    "labels; no _created samples: there is no clock), then its log line's "
                    "equivalent as a comment (the hit rate over its last 1,000 requests).")
    me.add_argument("--step", type=int, default=None, help="only this step (0: the start)")
    me.add_argument("--model-name", default="blockviz", help="the model_name label")
    me.set_defaults(fn=cmd_metrics, no_payloads=True)
    ve = sub.add_parser("verify", help="check that every cache hit reproduces recomputation")
    ve.set_defaults(fn=cmd_verify)
    x = sub.add_parser("export", help="a step as a PNG, or the whole run as one offline HTML file "
                                      "(a scenario, or a KV-event recording: a batch a step)")
    x.add_argument("file", help="a scenario, a lesson's id, or a recording of vLLM's KV events "
                                "(blockviz live --record: vllm-kv-events-capture/1)")
    x.add_argument("--step", type=int, default=0,
                   help="the step to draw (png) or to open at (html); default 0")
    x.add_argument("--format", choices=["png", "html"], default=None,
                   help="png: the board, shot by headless Chromium; default: from -o's extension, "
                        "else html")
    x.add_argument("--lang", choices=LANGS, default="en")
    x.add_argument("-o", "--output", default=None, help="default: ID-stepK.png|html here")
    x.set_defaults(fn=cmd_export)
    for cmd in (v, j, pl, me, ve):     # (export's FILE may also be a recording: its own help)
        cmd.add_argument("file")
    for cmd in (j, pl, ve, x, me):     # the commands that run a scenario
        cmd.add_argument("--device", choices=["auto", "cpu", "cuda"], default=None)
        cmd.add_argument("--time-limit", type=_time_limit, default=None, metavar="S",
                         help="stop the run after S seconds, at the step it is in (a located "
                              "message, exit status 2)")
        cmd.add_argument("--progress", action="store_true",
                         help="show the run's progress on stderr even when it is not a terminal")
    for cmd in (v, j, pl, ve, x, me):  # an option refused: one line naming it, exit status 2
        cmd.error = types.MethodType(trace_cli.one_line_error, cmd)
    s = sub.add_parser("schema", help="print the scenario format as JSON Schema")
    s.set_defaults(fn=cmd_schema)
    trace_cli.add_parser(sub)   # blockviz trace capacity | generate | check
    live_cli.add_parser(sub)    # blockviz live | publish | events state
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if argv[:1] == ["app"] and not {"-h", "--help"} & set(argv[1:]):
        # everything after `app` is streamlit's, options and values in their order
        args = argparse.Namespace(command="app", fn=cmd_app, streamlit_args=argv[1:])
    else:
        args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except ScenarioError as e:
        return _refuse(e.localized(getattr(args, "lang", "en")))  # play/export --lang zh
    except MemoryError:  # where no step can be named (the commands name it where they can)
        where = getattr(args, "file", None) or "blockviz"
        return _refuse(f"{where}: {localize_error('ran out of memory', getattr(args, 'lang', 'en'))}")
    except BrokenPipeError:  # `... | head`
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
