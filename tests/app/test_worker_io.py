"""A worker's pipe the server cannot read is an I/O failure, said as one — never "it needed more
memory": the preview's wait and a job's watcher read every message through _Process.message,
which said ("memory", None) for an OSError as well as for a process that died without a word."""
from __future__ import annotations

import threading
import time

import pytest

from blockviz.i18n import t
from blockviz.i18n.errors import localize_error
from blockviz.scenario import ScenarioError
from blockviz.sim.budget import Budget
from blockviz.ui import capacity as C
from blockviz.ui import jobs, worker

# a plan that takes a second or so: still running when its pipe is closed under it
SLOW = C.ComputePlan(C.params_key(dict(C.DEFAULTS, num_events=C.MAX_EVENTS, num_sizes=C.MAX_SIZES)))


def test_a_pipe_that_cannot_be_read_is_lost_not_memory():
    proc = worker._Process(worker._job_child, (SLOW, worker.JOB_BUDGET))
    try:
        proc.recv.close()                      # the server's end fails (OSError: handle is closed)
        kind, error = proc.message(0.1)
        assert kind == "lost" and error
    finally:
        proc.kill()


def test_a_process_that_died_without_a_word_is_still_its_memory_cap():
    proc = worker._Process(worker._job_child, (SLOW, worker.JOB_BUDGET))
    try:
        proc.proc.kill()                       # (its memory cap's SIGKILL, or killed from outside)
        deadline = time.monotonic() + 30
        while (msg := proc.message(0.5)) is None or msg[0] == "progress":
            assert time.monotonic() < deadline
        assert msg == ("memory", None)
    finally:
        proc.kill()


@pytest.mark.parametrize("lang, said", [
    ("en", "The server could not read from the worker process (handle is closed): the work was stopped."),
    ("zh", "服务器无法读取工作进程的消息（handle is closed）：这项工作已停止。"),
])
def test_a_job_whose_pipe_fails_says_so(lang, said):
    job = worker.Job(SLOW, label="plan")
    try:
        job._run.proc.recv.close()
        deadline = time.monotonic() + 30
        while job.state.running:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert job.state.status == "failed" and job.state.why == ""
        key, fields = jobs.stopped_message(job.state, lang, {"what": "-", "cmd": "-"})
        assert key == "job_lost"
        text = t(key, lang, **fields)
        assert text.startswith(said) and "memory" not in text and "内存" not in text
    finally:
        job.stop()


@pytest.mark.parametrize("lang, said", [
    ("en", "the server could not read from its worker process (Input/output error); try again in a moment"),
    ("zh", "服务器无法读取工作进程的消息（Input/output error）；请稍后再试"),
])
def test_a_preview_whose_pipe_fails_says_so(monkeypatch, lang, said):
    monkeypatch.setattr(worker._Process, "message", lambda self, timeout: ("lost", "Input/output error"))
    source = worker.Source("text", "mine.yaml", "id: x\n")
    with pytest.raises(ScenarioError) as e:
        worker.run_source("k", source, Budget(seconds=20.0, tensor_bytes=64 << 20))
    assert said in localize_error(e.value.message, lang)
    assert "memory" not in e.value.message


def test_a_preview_that_fails_before_its_worker_starts_gives_its_slot_back(monkeypatch):
    """Shared memory that cannot be made (a full /dev/shm, say) fails the preview, and the server's
    preview slot is free again for the next one."""
    slots = threading.BoundedSemaphore(1)
    monkeypatch.setattr(worker, "_slots", slots)

    class NoSharedMemory:
        def RawArray(self, *args):
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(worker, "_context", NoSharedMemory)
    source = worker.Source("text", "mine.yaml", "id: x\n")
    with pytest.raises(OSError):
        worker.run_source("k", source, Budget(seconds=20.0, tensor_bytes=64 << 20))
    assert slots.acquire(blocking=False), "the slot was given back"
