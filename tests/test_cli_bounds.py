"""Every knob of the command line is bounded: a hostile value is one located line on stderr and
exit status 2 (never a traceback, never gigabytes), and a long run shows its progress on stderr
(on a terminal, or with --progress) and stops at a located line with --time-limit."""
from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "blockviz", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def refused(out: subprocess.CompletedProcess, *words: str) -> None:
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    for w in words:
        assert w in lines[0], lines[0]


# A 2.9 KB file that asks for 1,000,000 decode steps (100 events of the most one event may run).
MILLION = ("id: million\ntitle: a million decode steps\n"
           "config: {num_blocks: 64, block_size: 16, model: null}\n"
           "steps:\n  - arrive: {id: A, prompt: [{random: 8}], max_tokens: 1000000}\n"
           + "  - decode: {steps: 10000}\n" * 100)


@pytest.fixture()
def million(tmp_path) -> Path:
    p = tmp_path / "million.yaml"
    p.write_text(MILLION)
    assert len(MILLION) < 3000
    return p


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("trace") / "t20.jsonl"
    out = cli("trace", "generate", "shared_prefix", "--requests", "20", "-o", str(p))
    assert out.returncode == 0, out.stderr
    return p


@pytest.mark.parametrize("args, words", [
    (["json", "six-blocks", "--indent", "100000000"], ["blockviz json: argument --indent", "0 to 16"]),
    (["json", "six-blocks", "--indent", "-1"], ["--indent", "0 to 16"]),
    (["json", "six-blocks", "--time-limit", "nan"], ["--time-limit", "'nan' is not a time limit"]),
    (["play", "six-blocks", "--time-limit", "0"], ["blockviz play: argument --time-limit"]),
    (["verify", "six-blocks", "--time-limit", "inf"], ["--time-limit"]),
    (["export", "six-blocks", "--time-limit", "-3"], ["--time-limit"]),
    (["trace", "generate", "random", "--requests", "1000000000000"], ["--requests", "10,000,000"]),
    (["trace", "generate", "random", "--prefix-tokens", "99999999"], ["--prefix-tokens"]),
    (["trace", "generate", "random", "--rate", "nan"], ["--rate"]),
])
def test_a_hostile_option_is_one_located_line_and_exit_2(args, words):
    refused(cli(*args), *words)


@pytest.mark.parametrize("args, option", [
    (["live", "tcp://127.0.0.1:1", "--dp-ranks", "100000"], "--dp-ranks"),
    (["live", "tcp://127.0.0.1:1", "--until-idle", "nan"], "--until-idle"),
    (["live", "tcp://127.0.0.1:1", "--replay-timeout", "inf"], "--replay-timeout"),
    (["live", "tcp://127.0.0.1:1", "--max-message-bytes", "99999999999999"], "--max-message-bytes"),
    (["live", "tcp://127.0.0.1:1", "--max-hashes", "1000000000000"], "--max-hashes"),
    (["publish", "six-blocks", "--hold-s", "1e300"], "--hold-s"),
])
def test_the_live_commands_bound_their_options(args, option):
    out = cli(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"argument {option}:" in out.stderr and "at most" in out.stderr, out.stderr


def test_dp_ranks_is_bounded_where_the_subscriber_bounds_it():
    """65 ranks was accepted by the argument and then refused by the subscriber, after sockets were
    opened: the argument check now refuses it, naming the subscriber's bound."""
    from blockviz.live.endpoints import MAX_DP_RANKS
    out = cli("live", "tcp://127.0.0.1:1", "--dp-ranks", str(MAX_DP_RANKS + 1))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"argument --dp-ranks: {MAX_DP_RANKS + 1} must be > 0 and at most {MAX_DP_RANKS}" in out.stderr


def test_trace_capacity_refuses_a_pool_the_trace_can_never_fill(small_trace):
    out = cli("trace", "capacity", str(small_trace), "--pool-blocks", "2147483648", timeout=60)
    refused(out, "--pool-blocks 2,147,483,648", "can never use more than", "20 requests")
    most = int(re.search(r"give at most ([\d,]+)", out.stderr).group(1).replace(",", ""))
    zh = cli("trace", "capacity", str(small_trace), "--pool-blocks", str(most + 1), "--lang", "zh")
    refused(zh, f"--pool-blocks {most + 1:,}", "最多只会用到")
    for workers in ("0", "100000"):
        refused(cli("trace", "capacity", str(small_trace), "--pool-blocks", "8", "--workers", workers),
                "--workers")
    # the reason given is true: the largest pool allowed replays exactly as any larger one would
    from blockviz.scenario.trace import iter_trace
    from blockviz.sim.capacity import MODES
    for mode in ("sequence", "timed"):
        at = [MODES[mode].run(iter_trace(str(small_trace)), block_size=512, pool_blocks=p,
                              free_order="split") for p in (most, most * 4)]
        assert {k: v for k, v in at[0].items() if k != "pool_blocks"} == \
               {k: v for k, v in at[1].items() if k != "pool_blocks"}
    ok = cli("trace", "capacity", str(small_trace), "--pool-blocks", f"8,{most}", "--json", "--workers", "1")
    assert ok.returncode == 0, ok.stderr
    assert [p["pool_blocks"] for p in json.loads(ok.stdout)["points"]] == [8, most]


@pytest.mark.parametrize("command", ["json", "play"])
def test_a_million_decode_steps_show_progress_and_stop_at_the_time_limit(million, command):
    out = cli(command, str(million), "--time-limit", "3", "--progress", timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    progress = [x for x in lines if x.startswith("event ")]
    assert progress, out.stderr
    m = re.fullmatch(r"event (\d+) of 101 \(decode\) · ([\d,]+) engine steps · ([\d,]+) steps/s · left: "
                     r"(\d+) events, at least ([\d,]+) engine steps declared, about ([\d,]+) s", progress[-1])
    assert m, progress[-1]
    done, left = int(m.group(2).replace(",", "")), int(m.group(5).replace(",", ""))
    assert done > 0 and 0 < left <= 1_000_000 - done + 10_000
    assert re.fullmatch(r"ran \d+ events, [\d,]+ engine steps in [\d.]+ s", lines[-2])
    located = re.fullmatch(rf"{re.escape(str(million))}:(\d+):13: steps\[(\d+)\]\.decode: step (\d+) "
                           r"\(decode\): the run's time budget of 3 s ran out during this step", lines[-1])
    assert located, lines[-1]
    line, index, step = map(int, located.groups())
    assert line == index + 5 and step == index + 1          # the decode event's own line
    if command == "json":
        assert out.stdout == ""                              # a run cut short writes no contract


def test_progress_is_shown_on_a_terminal_without_asking(million):
    """stderr a terminal: the progress line is redrawn in place (no --progress needed)."""
    main, sub = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "blockviz", "json", str(million), "--time-limit", "2",
                             "--no-frames"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=sub,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    os.close(sub)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=60) == 2
    os.close(main)
    text = b"".join(chunks).decode()
    assert "\r\x1b[Kevent " in text and "engine steps declared" in text
    assert "the run's time budget of 2 s ran out" in text


def test_a_quick_run_without_a_terminal_prints_no_progress():
    out = cli("json", "six-blocks", "--no-frames", "--indent", "2")
    assert out.returncode == 0 and out.stderr == ""
    assert json.loads(out.stdout)["steps"][0]["index"] == 0 and out.stdout.startswith("{\n  \"")
