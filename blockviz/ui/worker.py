"""Every scenario a session runs (its Author preview, its "try it yourself" fork) runs in a worker
process, never in the server's own: a fresh process forked from a warm fork server per run, one
torch thread, at a lower priority, its address space capped at the run's tensor budget plus a
margin. The run's budget (``sim.budget.PREVIEW_BUDGET``) stops it inside events with a located
message; should the process itself pass the budget's wall time (plus a grace) or its memory cap,
it is killed and the session is told which step it was in. At most ``MAX_PREVIEWS`` run at once
per server; a session that finds them all taken is told the server is busy.

The recorded run comes back pickled (the timeline's locks are made anew on the server's side).
"""
from __future__ import annotations

import io
import logging
import multiprocessing as mp
import os
import pickle
import threading
import time

from blockviz.scenario import ScenarioError
from blockviz.sim.budget import Budget, mib

MAX_PREVIEWS = max(1, int(os.environ.get("BLOCKVIZ_MAX_PREVIEWS", "2")))
BUSY_WAIT_S = 2.0        # how long a preview waits for a free worker before "busy"
GRACE_S = 5.0            # past the budget's wall time before the process is killed
MEMORY_MARGIN = 1 << 30  # address space beyond the tensor budget (Python objects, the timeline)

_slots = threading.BoundedSemaphore(MAX_PREVIEWS)
_ctx_lock = threading.Lock()
_ctx = None
log = logging.getLogger(__name__)

_LOCK, _RLOCK = type(threading.Lock()), type(threading.RLock())


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, _RLOCK):
            return threading.RLock, ()
        if isinstance(obj, _LOCK):
            return threading.Lock, ()
        if isinstance(obj, ScenarioError):   # a timeline's error: its own fields, not args
            return type(obj), (obj.file, obj.line, obj.col, obj.path, obj.message)
        return NotImplemented


def dumps(obj) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


class Busy(ScenarioError):
    """Every worker is taken."""


def busy_error(file: str) -> Busy:
    return Busy(file, None, None, "", f"the server is busy: {MAX_PREVIEWS} previews are running; "
                                      f"try again in a moment")


def _context():
    global _ctx
    with _ctx_lock:
        if _ctx is None:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["blockviz.ui.worker", "blockviz.ui.data", "torch",
                                        "blockviz.sim.runner", "blockviz.kv"])
            _ctx = ctx
        return _ctx


_warmed = threading.Event()


def warm() -> None:
    """Start the fork server (it imports torch and blockviz once) in the background, so that the
    first preview a session asks for does not wait for it. Once per server process."""
    if _warmed.is_set():
        return
    _warmed.set()

    def start() -> None:
        try:
            from multiprocessing import forkserver
            _context()
            forkserver.ensure_running()
        except Exception:   # a preview will start it, or fall back: never the page's problem
            log.exception("could not start the preview fork server")

    threading.Thread(target=start, name="blockviz-forkserver", daemon=True).start()


# -- the worker's side ---------------------------------------------------------------------------
def _limit_memory(budget: Budget, margin: int) -> None:
    import resource
    if budget.tensor_bytes is None:
        return
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    cap = vm + budget.tensor_bytes + margin
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _child(conn, key: str, text: str, file: str, budget: Budget, margin: int) -> None:
    try:
        try:
            os.nice(5)
        except OSError:
            pass
        import torch
        torch.set_num_threads(1)
        _limit_memory(budget, margin)
        from blockviz.scenario import load_text
        from blockviz.ui import data
        loaded = load_text(text, file)
        run = data.make_run(key, loaded, budget=budget,
                            on_step=lambda done: conn.send(("step", done)))
        conn.send(("done", dumps(run)))
    except ScenarioError as e:
        conn.send(("error", (e.file, e.line, e.col, e.path, e.message)))
    except MemoryError:
        conn.send(("memory", None))
    except RuntimeError as e:
        if "allocate" not in str(e):       # torch's allocator, at the process's memory cap
            raise
        conn.send(("memory", None))
    except Exception as e:  # a bug: the session gets a message, the log gets the traceback
        log.exception("preview worker failed")
        conn.send(("crash", type(e).__name__))
    finally:
        conn.close()


# -- the server's side ---------------------------------------------------------------------------
def _stopped_at(loaded, done: int, message: str) -> ScenarioError:
    steps = loaded.scenario.steps
    if done >= len(steps):
        return ScenarioError(loaded.file, None, None, "", message)
    step = steps[done]
    path = ("steps", done, step.kind) if step.kind else ("steps", done)
    return loaded.error(path, f"step {done + 1} ({step.kind}): {message}")


def run_in_worker(key: str, loaded, text: str, budget: Budget):
    """The PlayerRun of ``text`` (already loaded as ``loaded``, for locating messages), run in a
    worker process within ``budget``. Raises ScenarioError: the server is busy, the config is
    over the budget, or the process was stopped (located at the step it was in)."""
    if not _slots.acquire(timeout=BUSY_WAIT_S):
        raise busy_error(loaded.file)
    ctx = _context()
    proc = None
    recv, send = ctx.Pipe(duplex=False)
    try:
        proc = ctx.Process(target=_child, args=(send, key, text, loaded.file, budget, MEMORY_MARGIN),
                           daemon=True, name="blockviz-preview")
        proc.start()
        send.close()
        wall = kill_after(budget)
        deadline = None if wall is None else time.monotonic() + wall
        done = 0
        while True:
            wait = 1.0 if deadline is None else max(0.0, deadline - time.monotonic())
            if deadline is not None and wait <= 0:
                limit = budget.seconds if budget.seconds is not None else wall
                raise _stopped_at(loaded, done, f"the preview was stopped after {wall:g} s: the "
                                                f"run's time budget is {limit:g} s")
            if not recv.poll(min(wait, 1.0)):
                continue
            try:
                kind, value = recv.recv()
            except EOFError:           # the process died: its memory cap, or killed outside
                raise _stopped_at(loaded, done, memory_message(budget)) from None
            if kind == "step":
                done = value
            elif kind == "done":
                return pickle.loads(value)
            elif kind == "error":
                raise ScenarioError(*value)
            elif kind == "memory":
                raise _stopped_at(loaded, done, memory_message(budget))
            elif kind == "crash":
                raise _stopped_at(loaded, done, f"the preview failed with an internal error "
                                                f"({value}); the server is fine")
    finally:
        recv.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
        _slots.release()


def make_user_run(state, kind: str, loaded, text: str):
    """Run a session's scenario (``text``, loaded as ``loaded``) in a worker process within the
    preview budget (``ui.data.PREVIEW_BUDGET``). ScenarioError when the server is busy or the
    worker had to be stopped."""
    from blockviz.ui import data
    key = data.user_run_key(state, kind)
    try:
        return run_in_worker(key, loaded, text, data.PREVIEW_BUDGET)
    except OSError:     # no worker process could be started here: run it in this one, bounded
        log.exception("no preview worker; running in the server process")
        return data.make_run(key, loaded, budget=data.PREVIEW_BUDGET)


def kill_after(budget: Budget) -> float | None:
    """Seconds after which the server kills a worker: the budget's wall time plus a grace (the
    worker's own budget should have stopped it by then, with a more precise message)."""
    return None if budget.seconds is None else budget.seconds + GRACE_S


def memory_message(budget: Budget) -> str:
    limit = budget.tensor_bytes or 0
    return (f"the preview was stopped: it needed more memory than the run's budget of "
            f"{mib(limit)}")
