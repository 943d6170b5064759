"""Work a session's input starts runs in a worker process, bounded, and says where it stopped:

* the server process parses none of it: with the parsers broken in the server process (they are
  whole in the workers), the Author preview, an upload and a share link still work;
* a preview stopped while its text was still being read says the line it reached, in both
  languages (never "step 1 (None)");
* a run keeps at most PREVIEW_MAX_STEPS steps (what the server unpickles stays small), and says so;
* a capacity sweep runs in a worker: its progress shows, Stop stops it (the process goes), its
  time budget stops it with a message saying where, and a full server tells it to wait.
"""
from __future__ import annotations

import re
import threading
import time

import pytest

from blockviz.sim.budget import Budget
from blockviz.ui import state as session
from blockviz.ui import worker

from .conftest import errors
from .test_author import SMALL, author, edit, error_box
from .test_capacity import open_capacity, settle

MARK = "# a session's own text"


def test_the_server_process_parses_no_user_text(page, monkeypatch):
    """Every parser a user's text could reach is broken in this (the server's) process; the
    workers, forked from the fork server, have them whole."""
    import importlib

    from blockviz.scenario import share
    from blockviz.teach import authoring as A
    from blockviz.ui import data
    data.builtin_run("six-blocks")               # built-in lessons are the operator's files
    L = importlib.import_module("blockviz.scenario.load")     # (the package exports a function `load`)
    parse = L.parse_yaml

    def guarded(text, file):
        assert MARK not in text, "the server process parsed a user's text"
        return parse(text, file)

    def never(*args, **kwargs):
        raise AssertionError("the server process decoded or read a user's text")
    monkeypatch.setattr(L, "parse_yaml", guarded)
    for module, name in ((share, "decode"), (A, "read_upload"), (A, "text_names")):
        monkeypatch.setattr(module, name, never)
    text = SMALL + MARK + "\n"
    p = author(page)
    edit(p, text)
    assert "Valid: “Tiny test”, 3 steps" in p.html() and p.state["bv_author_good"][0] == text
    assert not p.at.button(key="b_snip_finish").disabled       # the names came from the worker
    p.at.file_uploader(key="w_upload").set_value(("mine.yaml", text.replace("tiny", "mine").encode(),
                                                  "application/x-yaml"))
    p.run()
    assert "id: mine" in p.editor_text()
    assert isinstance(p.state[session.WATCHED], worker._Watched)    # its bytes go with the session
    code = p.state["bv_author_checked"][2].share
    linked = page({"s": code, "step": "2"})
    assert linked.state["bv_user_run"].scenario.id == "mine" and not errors(linked)


@pytest.mark.parametrize("kill", [0.3, 1.0])
def test_a_preview_stopped_before_it_ran_says_where_it_was(page, monkeypatch, kill):
    """Killed while its 1 MiB text was being read (the line it reached) or checked (every line
    read): said so, located, in both languages — not blamed on "step 1 (None)"."""
    monkeypatch.setattr(worker, "kill_after", lambda budget: kill)
    big = ("id: big\ntitle: big\nconfig: {num_blocks: 8, block_size: 4, model: null}\nsteps:\n"
           + "  - step: 1\n" * 85_000)
    p = author(page)
    edit(p, big)
    box = error_box(p)
    stop = f"the preview was stopped after {kill:g} s: the run&#x27;s time budget is 20 s"
    reading = re.search(r'data-line="(\d+)".*while reading line ([\d,]+) of the text: ' + stop, box)
    checking = f"while checking the scenario (all 85,005 lines read): {stop}" in box
    assert reading or checking, box[-2000:]
    if reading:
        assert reading.group(1) == reading.group(2).replace(",", "")
    assert "(None)" not in box and "step 1" not in box
    p.at.button_group(key="w_lang").set_value("zh")
    p.run()
    assert re.search(r"(读到文本第 [\d,]+ 行时|检查场景时（85,005 行已全部读完）)：预览运行 "
                     f"{kill:g} 秒后被终止", error_box(p))


def test_where_a_stopped_preview_was_is_read_from_what_its_worker_wrote():
    from array import array
    at = [worker.READING, 0, 0]
    where = worker._Where("s.yaml", at)
    assert where.stopped("x").localized("en") == "s.yaml:1:1: while reading line 1 of the text: x"
    at[:] = [worker.READING, 1234, 0]
    assert where.stopped("x").localized("en") == "s.yaml:1234:1: while reading line 1,234 of the text: x"
    at[:] = [worker.CHECKING, 5000, 0]
    assert (where.stopped("x").localized("en")
            == "s.yaml: while checking the scenario (all 5,000 lines read): x")
    where.steps = (array("i", [5, 6, 7]), array("i", [5, 5, 5]), "arrive,note,decode")
    at[:] = [worker.RUNNING, 0, 1]
    assert where.stopped("x").localized("en") == "s.yaml:6:5: steps[1]: step 2 (note): x"
    at[2] = 2
    assert where.stopped("x").localized("en") == "s.yaml:7:5: steps[2].decode: step 3 (decode): x"
    at[2] = 3
    assert where.stopped("x").localized("en") == "s.yaml: after its last step: x"


def test_a_long_link_keeps_the_apps_step_limit_and_says_so(page, monkeypatch):
    from blockviz.scenario.share import share_code
    from blockviz.ui import data
    monkeypatch.setattr(data, "PREVIEW_MAX_STEPS", 300)
    text = ("id: long\ntitle: long\nconfig: {num_blocks: 8, block_size: 4, model: null}\nsteps:\n"
            "  - arrive: {id: A, prompt: [1, 2, 3], max_tokens: 100000}\n" + "  - step: 1\n" * 2000)
    p = page({"s": share_code(text)})
    run = p.state["bv_user_run"]
    assert run.last == 300 and run.total_steps == 2001 and len(run.scenario.steps) == 302
    notices = [w.value for w in p.at.warning]
    assert any("stopped early, at step 300 of the scenario's 2001 steps: the app runs at most 300 steps"
               in n for n in notices), notices


# -- capacity sweeps ---------------------------------------------------------------------------
def _trace(p, requests: int):
    p.at.segmented_control(key="w_capt_source").set_value("generate")
    p.run()
    p.at.selectbox(key="w_capt_gen_kind").set_value("multi_turn")
    p.at.number_input(key="w_capt_gen_requests").set_value(requests)
    return settle(p.click("b_capt_generate"))


def _start_sweep(p, replay: int, sizes: int = 12, block_size: int = 16):
    p.at.number_input(key="w_capt_num_sizes").set_value(sizes)
    p.at.number_input(key="w_capt_replay").set_value(replay)
    p.at.selectbox(key="w_capt_block_size").set_value(block_size)
    return p.click("b_capt_compute")


def _gone(pid: int, within: float = 30.0) -> bool:
    from bench.wsclient import alive
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_sweep_runs_in_a_worker_shows_progress_and_stops_on_stop(page, lang):
    p = _start_sweep(_trace(open_capacity(page, lang), 20_000), 20_000)
    job = p.state[session.CAPT_SWEEP_JOB]
    assert isinstance(job, worker.Job) and job.state.running
    deadline = time.monotonic() + 60
    while not job.state.progress.get("done"):           # it reports as it replays
        assert time.monotonic() < deadline and job.state.running
        time.sleep(0.2)
    p.run()
    (value, text), = [(e.proto.value, e.proto.text) for e in p.at.get("progress")]
    # sequence mode: one pass per free order, then Belady's MIN size by size
    words = {"en": r"(One pass over the trace, free order (split|append) \(vLLM [≥≤] 0\.2[34]\),"
                   r"|Belady's MIN at size \d+ of \d+) in a worker process: \d+% · [\d,]+ of [\d,]+ "
                   r"request passes",
             "zh": r"(对 trace 读一遍，释放顺序 (split|append)（vLLM [≥≤] 0\.2[34]），"
                   r"|Belady 的 MIN（第 \d+ / \d+ 个大小），)在工作进程中："
                   r"\d+% · 已处理 [\d,]+ / [\d,]+ 请求次"}[lang]
    assert re.match(words, text), text
    pid = job.pid
    p.click("b_stop_bv_capt_sweep_job")
    assert job.state.status == "stopped" and job.state.why == "stop"
    assert _gone(pid)
    assert p.state[session.CAPT_SWEEP_JOB] is None and p.state[session.CAPT_SWEEP] is None
    said = {"en": "Stopped (multi_turn-0.jsonl: ", "zh": "已停止（multi_turn-0.jsonl："}[lang]
    assert any(said in w.value for w in p.at.warning), [w.value for w in p.at.warning]


def test_a_sweep_past_its_time_budget_is_stopped_and_says_where(page, monkeypatch):
    p = _trace(open_capacity(page), 20_000)
    monkeypatch.setattr(worker, "JOB_BUDGET", Budget(seconds=2.0, tensor_bytes=2 << 30))   # the sweep's
    p = _start_sweep(p, 20_000)
    pid = p.state[session.CAPT_SWEEP_JOB].pid
    settle(p)
    assert _gone(pid)
    (msg,) = errors(p)
    assert re.match(r"Stopped after \d+ s, the page's limit for one job \(multi_turn-0\.jsonl: ([\d,]+ of "
                    r"[\d,]+ requests replayed|while measuring the trace, before the replays)\)\. The "
                    r"command line has no such limit: `blockviz trace capacity multi_turn-0\.jsonl "
                    r"--block-size 16 --mode sequence --limit 20000", msg), msg


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_full_server_tells_a_sweep_it_cannot_start_yet(page, monkeypatch, lang):
    slots = threading.BoundedSemaphore(1)
    monkeypatch.setattr(worker, "_job_slots", slots)
    monkeypatch.setattr(worker, "MAX_JOBS", 1)
    p = _trace(open_capacity(page, lang), 200)
    slots.acquire()                                   # another session's sweep is running
    try:
        p = _start_sweep(p, 200, sizes=2)
        said = {"en": "The server is already running 1 sweeps or trace readings, its limit: yours did "
                      "not start.",
                "zh": "服务器已经在运行 1 个扫描或 trace 读取，这是它的上限：你的没有开始。"}[lang]
        assert any(said in e for e in errors(p)), errors(p)
        assert p.state[session.CAPT_SWEEP_JOB] is None
    finally:
        slots.release()
    settle(_start_sweep(p, 200, sizes=2))              # a slot is free: it runs
    assert p.state[session.CAPT_SWEEP] is not None and not errors(p)


def test_the_watchdog_releases_what_a_session_held_once_its_tab_has_been_gone_a_while(monkeypatch):
    """Gone: not an active session of the runtime (its websocket closed). A reconnect in time
    keeps everything; past ENDED_AFTER_S its things are released and its uploads freed."""
    import streamlit.runtime
    released, freed = [], []

    class Thing:
        def release(self):
            released.append(self)

    class Uploads:
        def remove_session_files(self, sid):
            freed.append(sid)

    class Runtime:
        active = {"a", "b"}
        uploaded_file_mgr = Uploads()

        @classmethod
        def exists(cls):
            return True

        @classmethod
        def instance(cls):
            return cls

        @classmethod
        def is_active_session(cls, sid):
            return sid in cls.active
    monkeypatch.setattr(streamlit.runtime, "Runtime", Runtime)
    w = worker._Watchdog()
    monkeypatch.setattr(w, "start", lambda: None)
    a1, a2, b = Thing(), Thing(), Thing()
    for sid, thing in (("a", a1), ("a", a2), ("b", b)):
        w.hold(sid, thing)
    assert w.check(now=0) == []
    Runtime.active = {"b"}                                  # a's tab closed
    assert w.check(now=100) == [] and w.check(now=100 + worker.ENDED_AFTER_S - 1) == []
    Runtime.active = {"a", "b"}                             # ... and came back in time
    assert w.check(now=200) == []
    Runtime.active = {"b"}
    assert w.check(now=300) == []
    assert w.check(now=300 + worker.ENDED_AFTER_S) == ["a"]
    assert set(map(id, released)) == {id(a1), id(a2)} and freed == ["a"]
    assert w.check(now=1000) == [] and "a" not in w.held and "b" in w.held
