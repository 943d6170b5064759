"""A minimal Streamlit client over the server's websocket (what a browser tab sends and reads, no
browser): a session reruns the script with widget triggers and values and reads back the
elements; a real ``streamlit run app.py`` serves many such sessions at once. Used by the load
test (tests/app/test_load.py) and by ``bench board``'s simulated sessions."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.sync.client import connect

from blockviz.cli import STREAMLIT_OPTIONS

ROOT = Path(__file__).resolve().parents[1]


# -- what a process uses: counted, not timed (Linux /proc) ------------------------------------------
def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used itself (its threads, not its children)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime, stime


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(rest[1]) == pid and rest[0] != "Z":
            out.append(int(entry))
    return out


def workers(server_pid: int) -> list[int]:
    """The server's worker processes: forked by its fork server (a child of the server), so its
    grandchildren."""
    return [w for c in children(server_pid) for w in children(c)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``streamlit run app.py`` on a free port with the options ``blockviz app`` gives it; stopped
    on exit."""

    def __init__(self, env: dict | None = None, root: Path = ROOT) -> None:
        self.port = free_port()
        self.log = tempfile.TemporaryFile()      # not a pipe: a full pipe would stall the server
        self.env = {**os.environ, **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(root / "app.py"),
             *(a for k, v in STREAMLIT_OPTIONS.items() for a in (f"--{k}", v)),   # as `blockviz app`
             "--server.port", str(self.port), "--server.address", "127.0.0.1"],
            cwd=root, env=self.env, stdout=subprocess.DEVNULL, stderr=self.log)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_stcore/health", timeout=2):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    self.proc.wait()
                    self.log.seek(0)
                    text = self.log.read().decode(errors="replace")[-2000:]
                    self.log.close()
                    raise RuntimeError("the server did not start: " + text) from None
                time.sleep(0.3)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        """What the server has written to stderr so far."""
        fd = self.log.fileno()         # pread: the server shares the file's offset, leave it be
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Session:
    """One browser tab's worth of a session."""

    def __init__(self, port: int, timeout: float = 120) -> None:
        self.ws = connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"],
                          max_size=None, open_timeout=30)
        self.timeout = timeout
        self.pages: dict[str, str] = {}      # url path -> page script hash
        self.page_hash = ""
        self.elements: list = []             # the last run's elements
        self.cache: dict[str, ForwardMsg] = {}

    def close(self) -> None:
        self.ws.close()

    def rerun(self, widgets=(), query: str | None = None) -> float:
        """Rerun the script with ``widgets`` ((kind, key, value) to set: "trigger", "string") and
        the page's ``query`` string (a link's ``s=...&step=...``); returns the seconds from the
        request to the script's end."""
        msg = BackMsg()
        cs = msg.rerun_script
        cs.page_script_hash = self.page_hash
        if query is not None:
            cs.query_string = query
        for kind, key, value in widgets:
            w = cs.widget_states.widgets.add()
            w.id = self.widget_id(key)
            if kind == "trigger":
                w.trigger_value = True
            elif kind == "json":            # a components-v2 component's state
                w.json_value = value
            elif kind == "bool":            # a toggle or checkbox
                w.bool_value = bool(value)
            else:
                w.string_value = value
        start = time.perf_counter()
        self.ws.send(msg.SerializeToString())
        self.elements = []
        while True:
            fm = ForwardMsg()
            fm.ParseFromString(self.ws.recv(timeout=self.timeout))
            if fm.WhichOneof("type") == "ref_hash":
                fm = self.cache[fm.ref_hash]
            elif fm.hash:
                self.cache[fm.hash] = fm
            kind = fm.WhichOneof("type")
            if kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in fm.navigation.app_pages}
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                self.elements.append(fm.delta.new_element)
            elif kind == "script_finished":
                return time.perf_counter() - start

    def self_check(self, on: bool = True) -> float:
        """Switch the player's self-check panel (then the board reports every step)."""
        return self.rerun([("bool", "w_selfcheck", on)])

    def board_step(self, step: int, lang: str = "en") -> float:
        """What the board sends when a panel follows it and it moved to ``step``: its ``pos``
        state, one rerun."""
        pos = {"pos": {"step": step, "frame": None, "lang": lang}}
        return self.rerun([("json", "board", json.dumps(pos))])

    def goto(self, url_path: str) -> float:
        self.page_hash = self.pages[url_path]
        return self.rerun()

    def widget_id(self, key: str) -> str:
        for e in self.elements:
            w = getattr(e, e.WhichOneof("type"))
            if getattr(w, "id", "").endswith("-" + key):
                return w.id
        raise KeyError(key)

    def html(self) -> str:
        return "\n".join(e.html.body for e in self.elements if e.WhichOneof("type") == "html")

    def header(self) -> str:
        m = re.search(r'class="bv-stepno" data-step="\d+">([^<]*)<', self.html())
        return m.group(1) if m else ""

    def errors(self) -> list[str]:
        return [e.alert.body for e in self.elements if e.WhichOneof("type") == "alert"]
