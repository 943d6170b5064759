"""Every piece of work a session's input starts runs in a worker process, never in the server's own.
The server process checks a text's size and nothing more: a worker decodes it (a share link),
reads it (a paste, an upload), parses and validates it, and runs it.

Workers are forked from one fork server per server process (started once, in the background, by
:func:`warm`; it imports torch and blockviz once, so a fork is quick). Each runs at a lower
priority with one torch thread, its address space capped, and is killed should it outlive its
budget by a grace. Two kinds of work, each with its own cap per server:

* **previews** (at most ``MAX_PREVIEWS`` at once): a scenario a session writes, pastes, uploads,
  opens by link or forks, run within the preview budget (``sim.budget.PREVIEW_BUDGET``). The
  session's page waits for it (a spinner); a session that finds every slot taken is told the
  server is busy. A run stopped from outside says where it was: the line it had read to, or the
  step it was in (that step's line).
* **jobs** (at most ``MAX_JOBS`` at once): a capacity sweep, or reading a trace of up to 200 MB —
  minutes of work, so it runs in the background (:class:`Job`): the page polls its progress, and
  it stops on the page's Stop button, at its budget (``JOB_BUDGET``), or when its session ends.

A session's jobs and folders are *held* for it (:func:`hold`): one watchdog thread per server
releases them once the session's tab has been gone ``ENDED_AFTER_S`` seconds (its websocket
closed and not reconnected), on an idle server too — Streamlit itself drops a closed tab's state
only later, when another session comes. Without a Streamlit runtime (tests), a held thing goes
when the session's state drops it.

Results come back pickled (a timeline's locks are made anew on the server's side).
"""
from __future__ import annotations

import contextlib
import functools
import io
import itertools
import logging
import multiprocessing as mp
import os
import pickle
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from blockviz.core.block import KVCacheBlock
from blockviz.scenario import ScenarioError
from blockviz.sim.budget import Budget, mib
from blockviz.ui import state as session

MAX_PREVIEWS = max(1, int(os.environ.get("BLOCKVIZ_MAX_PREVIEWS", "2")))
MAX_JOBS = max(1, int(os.environ.get("BLOCKVIZ_MAX_SWEEPS", "2")))
BUSY_WAIT_S = 2.0        # how long a preview waits for a free worker before "busy"
# past the budget's wall time before the process is killed: the worker's own budget stops the
# engine at 20 s, then the run's timeline is built and pickled; on a busy machine (2 cores shared)
# that took over 5 s and a run its budget had stopped was killed as if it were stuck
GRACE_S = 15.0
MEMORY_MARGIN = 1 << 30  # address space beyond the tensor budget (Python objects, the timeline)
# a sweep or a trace's reading: ten minutes, and 2 GiB beyond what the worker starts with
JOB_BUDGET = Budget(seconds=600.0, tensor_bytes=2 << 30)
ENDED_AFTER_S = float(os.environ.get("BLOCKVIZ_SESSION_GONE_S", "15"))   # a tab gone this long: ended
WATCH_S = 2.0            # how often the watchdog looks
REPORT_S = 0.25          # a job reports its progress at most this often

_slots = threading.BoundedSemaphore(MAX_PREVIEWS)
_job_slots = threading.BoundedSemaphore(MAX_JOBS)
log = logging.getLogger(__name__)

# what the fork server imports once (every worker is forked from it with these loaded)
PRELOAD = ("blockviz.ui.worker", "blockviz.ui.streamlit_app", "torch", "blockviz.sim.runner", "blockviz.kv",
           "blockviz.sim.sweep")

_LOCK, _RLOCK = type(threading.Lock()), type(threading.RLock())


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, _RLOCK):
            return threading.RLock, ()
        if isinstance(obj, _LOCK):
            return threading.Lock, ()
        if isinstance(obj, ScenarioError):   # a timeline's error, a link's: its own fields, not args
            return _rebuild_error, (type(obj), dict(obj.__dict__))
        if isinstance(obj, KVCacheBlock):
            # A request's block table holds the engine's blocks, and a free block links its queue
            # neighbours: pickled as they are, a queue of thousands of blocks is a chain pickle
            # walks by recursion (RecursionError past ~1,000). The server reads a block's id, never
            # its links (the timeline replays the queue itself), so they stay behind.
            return _rebuild_block, (obj.block_id, obj.ref_cnt, obj.block_hash, obj.is_null)
        return NotImplemented


def _rebuild_block(block_id: int, ref_cnt: int, block_hash: bytes | None, is_null: bool) -> KVCacheBlock:
    """A block as a worker's run left it, less its free-queue links."""
    b = KVCacheBlock(block_id)
    b.ref_cnt, b.block_hash, b.is_null = ref_cnt, block_hash, is_null
    return b


def _rebuild_error(cls, fields: dict) -> ScenarioError:
    """A ScenarioError (of any subclass, whatever its constructor takes) with ``fields``."""
    e = cls.__new__(cls)
    e.__dict__.update(fields)
    Exception.__init__(e, str(e))
    return e


def dumps(obj) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


class Busy(ScenarioError):
    """Every worker is taken."""


def busy_error(file: str) -> Busy:
    return Busy(file, None, None, "", f"the server is busy: {MAX_PREVIEWS} previews are running; "
                                      f"try again in a moment")


# -- the fork server -----------------------------------------------------------------------------
@functools.cache
def _context():
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


@functools.cache
def warm() -> None:
    """Start the fork server (it imports torch and blockviz once) in the background, so that the
    first preview a session asks for does not wait for it; and the watchdog of ended sessions.
    Once per server process. (A worker imports the app's script as ``__mp_main__``: the script
    calls ``main()`` only as ``__main__``, so a worker never runs the app.)"""
    def start() -> None:
        try:
            from multiprocessing import forkserver
            _context()
            forkserver.ensure_running()
        except Exception:   # a preview will start it, or say it cannot: never the page's problem
            log.warning("could not start the preview fork server yet; the first preview will",
                        exc_info=True)

    threading.Thread(target=start, name="blockviz-forkserver", daemon=True).start()
    _watchdog.start()


# -- a worker process (the server's side) --------------------------------------------------------
class _Process:
    """One worker process and the read end of its pipe."""

    def __init__(self, target: Callable, args: tuple) -> None:
        ctx = _context()
        self.recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=target, args=(send, *args), daemon=True, name="blockviz-worker")
        try:
            self.proc.start()
        except OSError as e:             # (the server itself runs no user's text: no fallback)
            self.recv.close()
            raise ScenarioError("", None, None, "", f"the server could not start a worker process "
                                                    f"({e.strerror or e}); try again in a moment") from None
        finally:
            send.close()

    def message(self, timeout: float) -> tuple | None:
        """The next message (kind, value), None if none came within ``timeout``; a "done" or
        "error" value unpickled. A process that died without a word (its memory cap, or killed
        from outside) says ("memory", None); a pipe the server could not read (an I/O error on
        this side: the worker may be well) says ("lost", the error), never "memory"."""
        try:
            if not self.recv.poll(timeout):
                return None
            kind, value = self.recv.recv()
        except EOFError:
            return "memory", None
        except OSError as e:
            return "lost", e.strerror or str(e)
        return kind, (pickle.loads(value) if kind in ("done", "error") else value)

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(timeout=5)
        self.recv.close()


def _settle(budget: Budget, margin: int, niceness: int) -> None:
    """A worker's first lines: lower priority, one torch thread, its address space capped (what
    it has mapped now, plus the budget's tensor bytes and ``margin``)."""
    import resource

    import torch
    with contextlib.suppress(OSError):
        os.nice(niceness)
    torch.set_num_threads(1)
    if budget.tensor_bytes is not None:
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        cap = vm + budget.tensor_bytes + margin
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


# -- previews: a session's scenario --------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """What a session hands a worker: ``kind`` "text" (a paste or the editor's text), "upload"
    (a file's bytes), "link" (a share link's code) or "window" (a window of a trace, built into a
    scenario there); ``file``: the name messages carry."""
    kind: str
    file: str
    payload: object


@dataclass(frozen=True)
class Summary:
    """What a page says about a scenario that loaded (its run may not have)."""
    id: str
    title: object           # a Text (both languages)
    steps: int
    num_blocks: int
    block_size: int


@dataclass
class Outcome:
    """What a worker made of a session's text: the text itself (decoded from a link or an
    upload), the error that stops it loading, or its summary and run (or why it was not run)."""
    text: str | None = None
    error: ScenarioError | None = None
    summary: Summary | None = None
    refusal: tuple | None = None       # (i18n key, fields): too big for the app to run
    run: object = None                 # the PlayerRun
    names: tuple = ((), (), ())        # request ids, checkpoints, live ids as the text says
    share: object = None               # its link code, or share.LinkTooLong (asked for: share=True)


# Where a preview is, written by its worker into memory it shares with the server (the server
# reads it only to say where a preview it had to stop was: no message per step, no CPU).
PHASE, LINE, DONE = 0, 1, 2               # the shared array's slots
READING, CHECKING, RUNNING = 0, 1, 2      # its phases


def _reading_events(events, at):
    """libyaml's event stream, writing the line reached (every 256 events) and, at its end, the
    lines read into ``at``."""
    def wrapped(text):
        line = 0
        for n, event in enumerate(events(text)):
            if not n & 255:
                at[LINE] = event.start_mark.line + 1
            yield event
            line = event.start_mark.line + 1
        at[LINE] = line
        at[PHASE] = CHECKING
    return wrapped


def _decode(source: Source) -> str:
    """The text of a source, in the worker; ScenarioError when it has none (a damaged link, an
    unreadable upload)."""
    if source.kind == "link":
        from blockviz.scenario import share
        return share.decode(source.payload)
    if source.kind == "upload":
        from blockviz.teach.authoring import read_upload
        return read_upload(source.payload, source.file)
    if source.kind == "window":
        return _window(**source.payload)
    return source.payload


def _window(path: str, name: str, first: int, size: int, **kw) -> str:
    """A window of a trace as a scenario's text (``teach.tracegen.window_scenario``); a
    refusal when no request of it fits the player."""
    from blockviz.scenario.trace import iter_trace
    from blockviz.sim.fork import to_yaml
    from blockviz.teach.tracegen import window_scenario
    window = list(iter_trace(path, name=name, limit=first + size - 1))[first - 1:]
    w = window_scenario(window, **kw)
    if not w.lines:
        raise _Refused(("capt_window_empty", {"blocks": w.player_blocks}))
    return to_yaml(w.scenario)


class _Refused(Exception):
    """A text the app does not run: its one argument is the refusal, (i18n key, fields)."""


def _serve(conn, what: str, errors: tuple, body: Callable[[], None]) -> None:
    """A worker's one piece of work, ``body()``, and how it ended, told to the server: an error of
    ``errors`` (the input's own: for the page) pickled, "memory" at its memory cap, "crash" for a
    bug (the log gets the traceback); nothing when the server is gone."""
    try:
        body()
    except errors as e:
        conn.send(("error", dumps(e)))
    except MemoryError:
        conn.send(("memory", None))
    except BrokenPipeError:                # the server is gone: nothing to tell
        pass
    except Exception as e:  # a bug: the session gets a message, the log gets the traceback
        log.exception("%s worker failed", what)
        conn.send(("crash", type(e).__name__))
    finally:
        conn.close()


def _preview_child(conn, at, key: str, source: Source, budget: Budget, margin: int, share: bool,
                   max_steps: int | None) -> None:
    """The worker's side of a preview: decode, load, summarize, run; ``at`` (shared with the
    server) says where it is — the line reached, then the step running — for a stop from outside
    to name, with the scenario's step lines sent once."""
    t0 = time.monotonic()

    def body() -> None:
        try:
            _settle(budget, margin, 5)
            out = _preview(conn, at, key, source, budget, share, max_steps, t0)
        except RuntimeError as e:
            if "allocate" not in str(e):   # a bug (a RecursionError too): said as one, not as memory
                raise
            raise MemoryError from e       # torch's allocator, at the process's memory cap
        conn.send(("done", dumps(out)))
    _serve(conn, "preview", (ScenarioError,), body)   # e.g. the config alone is over the budget


def _preview(conn, at, key: str, source: Source, budget: Budget, share: bool, max_steps: int | None,
             t0: float) -> Outcome:
    out = Outcome()
    from blockviz.sim import budget as B
    # the one run of this process: its budget's clock reads ``t0`` first (the meter's start), so that
    # its 20 s count from the worker's start, reading the text included; then the time
    B.now = itertools.chain((t0,), iter(time.monotonic, None)).__next__
    import importlib

    from blockviz.teach.authoring import text_names
    from blockviz.ui import data
    L = importlib.import_module("blockviz.scenario.load")   # the module (the package exports a function)
    L.yaml_events = _reading_events(L.yaml_events, at)
    try:
        text = _decode(source)
    except _Refused as e:
        out.refusal = e.args[0]
        return out
    except ScenarioError as e:          # no text at all: a damaged link, an unreadable file
        out.error = e
        return out
    if source.kind in ("link", "upload"):
        out.text = text
    if source.kind == "upload":         # its text goes to the editor, which has it checked
        return out
    out.names = text_names(text)
    if share:
        from blockviz.scenario import share as S
        try:
            out.share = S.share_code(text)
        except S.LinkTooLong as e:
            out.share = e
    try:
        loaded = L.load_text(text, source.file)
    except ScenarioError as e:
        out.error = e
        return out
    s = loaded.scenario
    out.summary = Summary(s.id, s.title, len(s.steps), s.config.num_blocks, s.config.block_size)
    conn.send(("located", _step_lines(loaded)))
    at[PHASE] = RUNNING

    def where(done: int) -> None:          # the step now running, for a stop from outside
        at[DONE] = done
    out.run = _kept(data.preview_run(key, loaded, budget=budget, on_step=where, max_steps=max_steps))
    conn.send(("sending", None))        # the run is over: its pickling gets a grace of its own
    return out


def _kept(run):
    """A run cut short keeps only the steps it ran (and the next) of its scenario: the server
    unpickles what it shows, not a long text's every step."""
    steps = run.scenario.steps
    n = len(run.timeline) + 1
    if n >= len(steps):
        return run
    from dataclasses import replace
    return replace(run, scenario=run.scenario.model_copy(update={"steps": steps[:n]}),
                   steps_in_all=len(steps))


def _step_lines(loaded) -> tuple:
    """(lines, columns, kinds) of every step of a loaded scenario, compactly (what the server
    needs to name a step it had to stop: two arrays and a string, not the scenario)."""
    from array import array
    lines, cols, kinds = array("i"), array("i"), []
    for i, step in enumerate(loaded.scenario.steps):
        line, col = loaded.locate(loaded.step_path(i))
        lines.append(line or 0)
        cols.append(col or 0)
        kinds.append(step.kind or "note")
    return lines, cols, ",".join(kinds)


@dataclass
class _Where:
    """Where a preview is: the array its worker writes, and the step lines it sent."""
    file: str
    at: object                  # the shared array: PHASE, LINE, DONE
    steps: tuple | None = None  # (lines, columns, kinds) once loaded

    def stopped(self, message: str) -> ScenarioError:
        phase, line, done = self.at[PHASE], self.at[LINE], self.at[DONE]
        if phase == READING or (phase == RUNNING and self.steps is None):
            line = max(1, line)
            return ScenarioError(self.file, line, 1, "", f"while reading line {line:,} of the text: "
                                                         f"{message}")
        if phase == CHECKING:
            return ScenarioError(self.file, None, None, "", f"while checking the scenario (all "
                                                            f"{line:,} lines read): {message}")
        lines, cols, kinds = self.steps
        kinds = kinds.split(",")
        if done >= len(kinds):
            return ScenarioError(self.file, None, None, "", f"after its last step: {message}")
        kind = kinds[done]
        path = f"steps[{done}]" + ("" if kind == "note" else f".{kind}")
        return ScenarioError(self.file, lines[done] or None, cols[done] or None, path,
                             f"step {done + 1} ({kind}): {message}")


def run_source(key: str, source: Source, budget: Budget, *, share: bool = False) -> Outcome:
    """What a worker makes of ``source`` within ``budget``, keeping at most ``data.PREVIEW_MAX_STEPS``
    steps of its run (an :class:`Outcome`: a text that does not load is its ``error``). Raises
    ScenarioError when the server is busy, or the worker had to be stopped (located where it was:
    the line it had read to, or the step it was in)."""
    from blockviz.ui import data
    if not _slots.acquire(timeout=BUSY_WAIT_S):
        raise busy_error(source.file)
    proc = None
    try:
        at = _context().RawArray("q", 3)    # (in the try: a failure here gives the slot back too)
        where = _Where(source.file, at)
        proc = _Process(_preview_child, (at, key, source, budget, MEMORY_MARGIN, share,
                                         data.PREVIEW_MAX_STEPS))
        wall = kill_after(budget)
        deadline = None if wall is None else time.monotonic() + wall
        while True:
            wait = 1.0 if deadline is None else deadline - time.monotonic()
            if wait <= 0:
                limit = budget.seconds if budget.seconds is not None else wall
                raise where.stopped(f"the preview was stopped after {wall:g} s: the run's time "
                                    f"budget is {limit:g} s")
            kind, value = proc.message(min(wait, 1.0)) or (None, None)   # (None: nothing came yet)
            if kind == "located":
                where.steps = value
            elif kind == "sending":    # a run its budget stopped at 20 s, pickled on a busy machine,
                if deadline is not None:   # must not be killed as if it were still running
                    deadline = max(deadline, time.monotonic() + GRACE_S)
            elif kind == "done":
                return value
            elif kind == "error":
                raise ScenarioError(value.file, value.line, value.col, value.path, value.message)
            elif kind == "memory":
                raise where.stopped(memory_message(budget))
            elif kind == "lost":
                raise where.stopped(f"the server could not read from its worker process ({value}); try "
                                    f"again in a moment")
            elif kind == "crash":
                raise where.stopped(f"the preview failed with an internal error ({value}); the "
                                    f"server is fine")
    finally:
        if proc is not None:
            proc.kill()
        _slots.release()


def run_of(outcome: Outcome, file: str):
    """The outcome's run; its error, or its refusal as a ScenarioError."""
    if outcome.error is not None:
        raise outcome.error
    if outcome.refusal is not None:
        from blockviz.i18n import t
        k, fields = outcome.refusal
        raise ScenarioError(file, None, None, "", t(k, "en", file=file, **fields))
    return outcome.run


def user_outcome(state, kind: str, source: Source, *, share: bool = False) -> Outcome:
    """A session's own text (``source``), made into an Outcome by a worker within the preview
    budget (``ui.data.PREVIEW_BUDGET``); ScenarioError when the server is busy or the worker was
    stopped. With ``share``, the worker makes its link code too (``Outcome.share``)."""
    from blockviz.ui import data
    return run_source(session.user_run_key(state, kind), source, data.PREVIEW_BUDGET, share=share)


def kill_after(budget: Budget) -> float | None:
    """Seconds after which the server kills a worker: the budget's wall time plus a grace (the
    worker's own budget should have stopped it by then, with a more precise message)."""
    return None if budget.seconds is None else budget.seconds + GRACE_S


def memory_message(budget: Budget) -> str:
    limit = budget.tensor_bytes or 0
    return (f"the preview was stopped: it needed more memory than the run's budget of "
            f"{mib(limit)}")


# -- jobs: long work in the background -----------------------------------------------------------
class JobsBusy(Exception):
    """Every job slot of the server is taken."""


@dataclass
class JobState:
    """A job as its page reads it (updated by the job's reader thread)."""
    started: float = field(default_factory=time.monotonic)
    status: str = "running"      # running | done | failed | stopped
    progress: dict = field(default_factory=dict)   # the last report: done, total, and the task's own
    result: object = None
    error: object = None         # failed: the task's exception (TraceError, ValueError) or (key, fields)
    why: str = ""                # stopped: "stop" (the page's button), "time", "memory", "ended"
    finished: float | None = None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def seconds(self) -> float:
        return (self.finished or time.monotonic()) - self.started


def _job_child(conn, task, budget: Budget) -> None:
    """The worker's side of a job: ``task(report)`` with ``report(**progress)`` at most every
    REPORT_S; its result, or its exception (a task's own errors are for the page)."""
    last = [0.0]

    def report(force: bool = False, **progress) -> None:
        now = time.monotonic()
        if force or now - last[0] >= REPORT_S:
            last[0] = now
            conn.send(("progress", progress))

    def body() -> None:
        _settle(budget, 0, 10)
        conn.send(("done", dumps(task(report))))
    _serve(conn, "job", (ValueError, ScenarioError), body)   # ValueError: a trace's bad line


class _JobRun:
    """A job's process, watched by its own thread: progress in, deadline kept, slot given back
    (to the semaphore it was taken from)."""

    def __init__(self, task, state: JobState, budget: Budget, slots: threading.Semaphore) -> None:
        self.state = state
        self.budget = budget
        self.slots = slots
        self.lock = threading.Lock()
        self.proc = _Process(_job_child, (task, budget))
        threading.Thread(target=self._watch, name="blockviz-job", daemon=True).start()

    def _watch(self) -> None:
        s = self.state
        deadline = None if self.budget.seconds is None else s.started + self.budget.seconds
        try:
            while s.running:
                if deadline is not None and time.monotonic() > deadline:
                    self.stop("time")
                    break
                kind, value = self.proc.message(0.5) or (None, None)   # (None: nothing came yet)
                if kind == "progress":
                    s.progress = value
                elif kind == "done":
                    self._end("done", result=value)
                elif kind == "error":
                    self._end("failed", error=value)
                elif kind == "memory":
                    self._end("stopped", why="memory")
                elif kind == "lost":
                    self._end("failed", error=("job_lost", {"e": value}))
                elif kind == "crash":
                    self._end("failed", error=("job_crash", {"kind": value}))
        finally:
            self.proc.kill()
            self.slots.release()

    def _end(self, status: str, **fields) -> bool:
        with self.lock:
            if not self.state.running:
                return False
            for k, v in fields.items():
                setattr(self.state, k, v)
            self.state.finished = time.monotonic()
            self.state.status = status
            return True

    def stop(self, why: str = "stop") -> None:
        if self._end("stopped", why=why):   # the watching thread sees it die and cleans up
            with contextlib.suppress(OSError, ValueError):
                self.proc.proc.kill()


class Job:
    """Long work of one session in a worker process: ``task(report)`` (picklable; it calls
    ``report(done=, total=, ...)``; kept as ``task``), its progress and then its result, failure
    or why it was stopped (``state``). At most MAX_JOBS run per server (JobsBusy beyond). The
    session's state holds the Job; once nothing does (its state dropped), or the session ends
    (:func:`hold`), or the page's Stop button calls :meth:`stop`, the process is killed."""

    def __init__(self, task, *, label: str) -> None:
        slots = _job_slots
        if not slots.acquire(blocking=False):
            raise JobsBusy(label)
        self.task = task
        try:
            self.state = JobState()
            self._run = _JobRun(task, self.state, JOB_BUDGET, slots)
        except BaseException:
            slots.release()
            raise
        # release(): the session ended (once; else when nothing holds the Job any more)
        self.release = weakref.finalize(self, self._run.stop, "ended")
        self.stop = self._run.stop      # stop(why="stop"): the page's Stop button, or a job replaced
        self.pid = self._run.proc.proc.pid


# -- what a session holds, released when it ends -------------------------------------------------
class _Watchdog:
    """One thread per server: a session whose tab has been gone ENDED_AFTER_S (not an active
    session of the runtime: its websocket closed and not reconnected) has its held things
    released — jobs stopped, folders removed — and Streamlit's copy of its uploaded files freed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: dict[str, weakref.WeakSet] = {}
        self.gone_since: dict[str, float] = {}
        self.thread: threading.Thread | None = None

    def hold(self, sid: str, thing) -> None:
        with self.lock:
            self.held.setdefault(sid, weakref.WeakSet()).add(thing)
        self.start()

    def start(self) -> None:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name="blockviz-sessions", daemon=True)
                self.thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(WATCH_S)
            try:
                self.check()
            except Exception:  # noqa: BLE001 - never let the watchdog die
                log.warning("the session watchdog could not check", exc_info=True)

    def check(self, now: float | None = None) -> list[str]:
        """Release the sessions gone long enough; their ids."""
        from streamlit.runtime import Runtime
        if not Runtime.exists():
            return []
        runtime = Runtime.instance()
        now = time.monotonic() if now is None else now
        ended = []
        with self.lock:
            for sid in list(self.held):
                if runtime.is_active_session(sid):
                    self.gone_since.pop(sid, None)
                elif now - self.gone_since.setdefault(sid, now) >= ENDED_AFTER_S:
                    del self.gone_since[sid]
                    ended.append(sid)
            things = {sid: list(self.held.pop(sid)) for sid in ended}
        for sid in ended:
            for thing in things[sid]:
                try:
                    thing.release()
                except Exception:  # noqa: BLE001
                    log.warning("could not release what an ended session held", exc_info=True)
            with contextlib.suppress(Exception):
                runtime.uploaded_file_mgr.remove_session_files(sid)
        return ended


_watchdog = _Watchdog()


def hold(thing) -> None:
    """Release ``thing`` (it has ``release()``) when the session running this script ends (nothing
    outside a script run)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is not None:
        _watchdog.hold(ctx.session_id, thing)


class _Watched:
    """Nothing to release but the session's uploads (the watchdog frees Streamlit's copy)."""

    def release(self) -> None:
        pass


def watch(state) -> None:
    """Have the session running this script watched, so that its uploads (Streamlit keeps their
    bytes in memory) are freed once it ends, even when it holds nothing else."""
    if not isinstance(state.get(session.WATCHED), _Watched):
        state[session.WATCHED] = _Watched()
        hold(state[session.WATCHED])
