"""``blockviz app``: the streamlit command it runs. A served player keeps Streamlit from collecting
the whole server's garbage after every script run (that full collection was most of a step's
rerun with self-check on: bench board reports the reruns' cost) and from polling module files;
a user's own option still wins, being later on the command line."""
from __future__ import annotations

import os

from blockviz import cli


def _command(monkeypatch, *args: str) -> list[str]:
    got = {}

    def fake_execv(path, cmd):
        got["cmd"] = cmd
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", fake_execv)
    try:
        cli.main(["app", *args])
    except SystemExit:
        pass
    return got["cmd"]


def _options(cmd: list[str]) -> dict[str, str]:
    """The value each --option has in effect (the last one given)."""
    out = {}
    for i, a in enumerate(cmd):
        if a.startswith("--"):
            k, _, v = a[2:].partition("=")
            out[k] = v or cmd[i + 1]
    return out


def test_the_served_player_skips_the_per_run_full_gc_and_the_file_watcher(monkeypatch):
    cmd = _command(monkeypatch)
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4].endswith("streamlit_app.py")
    opts = _options(cmd)
    assert opts["runner.postScriptGC"] == "false"
    assert opts["server.fileWatcherType"] == "none"
    assert opts["server.headless"] == "true"


def test_a_users_own_option_wins(monkeypatch):
    opts = _options(_command(monkeypatch, "--runner.postScriptGC", "true", "--server.port=8600"))
    assert opts["runner.postScriptGC"] == "true" and opts["server.port"] == "8600"
