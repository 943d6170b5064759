"""``blockviz publish``: the batches vLLM's publisher sent for the same scenarios, byte for byte
(``ts`` aside), and end to end on 127.0.0.1 with ``blockviz live``: both socket directions, a
late join filled from replay, a gap filled from replay."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq

from blockviz.live.capture import CaptureReader
from blockviz.live.publish import Publisher, scenario_batches
from blockviz.live.stream import reduce_file
from blockviz.live.wire import decode_payload, encode_batch, parse_frames
from blockviz.scenario import load

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURES = HERE / "captures"
# the toolkit's scenarios (shared/tools/vllm-diff: sched/examples, events/scenarios), explicit
# tokens: their captures of vLLM's publisher stay true whatever the lessons become
TOOLKIT = ["pressure", "chunked", "reset-prefix-cache"]


def captured(name: str) -> list:
    msgs = list(CaptureReader(CAPTURES / f"{name}.jsonl"))
    return [parse_frames(m.frames) for m in msgs if m.src == "sub"]


@pytest.mark.parametrize("name", TOOLKIT)
def test_every_batch_is_vllms_bytes_but_ts(name):
    loaded = load(HERE / "scenarios" / f"{name}.yaml")
    notes = []
    got = [b for _, _, _, batches in scenario_batches(loaded, note=lambda k, f: notes.append(k))
           for b in batches if b]
    want = captured(name)
    assert len(got) == len(want) and [m.seq for m in want] == list(range(len(want)))
    for events, m in zip(got, want):
        ts = decode_payload(m.payload)[0].ts
        assert encode_batch(events, ts, 0) == m.payload
    assert notes == []


def test_one_batch_per_engine_step_and_a_reset_waits_for_the_next_one():
    loaded = load(HERE / "scenarios" / "reset-prefix-cache.yaml")
    per_event = [(step.kind, engines, [[type(e).__name__ for e in b] for b in batches])
                 for _, step, engines, batches in scenario_batches(loaded)]
    # the successful reset (event 4) sends nothing itself; X's step carries AllBlocksCleared alone
    assert per_event[3] == ("reset_prefix_cache", 0, [])
    assert per_event[4][2][0] == ["AllBlocksCleared"]
    # step: 2 is two engine steps: two batch slots (the second empty: nothing filled a block)
    kind, engines, batches = per_event[6]
    assert kind == "step" and engines == 2 and len(batches) == 2


def test_replay_buffer_and_end_marker_as_vllm(ports):
    ctx = zmq.Context()
    r = ports()
    pub = Publisher(f"tcp://[::ffff:127.0.0.1]:{ports()}", replay=f"tcp://127.0.0.1:{r}",
                    buffer_steps=3)
    d = ctx.socket(zmq.DEALER)
    try:
        for k in range(5):
            assert pub.publish([], ts=float(k)) == k
        d.connect(f"tcp://127.0.0.1:{r}")
        d.send_multipart([b"", (0).to_bytes(8, "big")])
        pub.serve(0.2)
        got = []
        while d.poll(200):
            got.append(d.recv_multipart())
        assert [int.from_bytes(f[2], "big", signed=True) for f in got] == [2, 3, 4, -1]
        assert got[-1] == [b"", b"", (-1).to_bytes(8, "big", signed=True), b""]
    finally:
        d.close(0)
        pub.close()
        ctx.term()


# -- end to end, two processes on loopback -----------------------------------------------------
def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "blockviz", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def listening(live: subprocess.Popen) -> subprocess.Popen:
    """Wait for the subscriber's first line (its sockets are open), so that a publisher started
    now loses nothing to the slow-joiner race but its own start delay."""
    line = live.stderr.readline()
    assert line.startswith("live: SUB"), line
    return live


def finish(p: subprocess.Popen, timeout: float = 90) -> tuple[str, str]:
    try:
        out, err = p.communicate(timeout=timeout)
    finally:
        p.kill()
    assert p.returncode == 0, err
    return out, err


def want_state(name: str) -> dict:
    red, _, _ = reduce_file(CAPTURES / f"{name}.jsonl")
    return red.report()["caches"]


SCEN = str(HERE / "scenarios" / "pressure.yaml")


def test_publish_binds_live_connects(ports):
    p = ports()
    live = listening(start("live", f"tcp://127.0.0.1:{p}", "--max-batches", "5",
                           "--until-idle", "60", "--json"))
    pub = start("publish", SCEN, "--no-payloads", "--endpoint", f"tcp://[::ffff:127.0.0.1]:{p}",
                "--start-delay-s", "1", "--hold-s", "0")
    out, err = finish(live)
    finish(pub)
    d = json.loads(out)
    assert d["caches"] == want_state("pressure") and d["batches"] == 5 and d["notes"] == []


def test_publish_connects_live_binds_with_a_topic(ports):
    p = ports()
    live = listening(start("live", f"tcp://127.0.0.1:{p}", "--bind", "--topic", "kv@engine0",
                           "--max-batches", "5", "--until-idle", "60", "--json"))
    pub = start("publish", SCEN, "--no-payloads", "--endpoint", f"tcp://127.0.0.1:{p}",
                "--topic", "kv@engine0", "--start-delay-s", "1", "--hold-s", "0")
    _, perr = finish(pub)
    out, _ = finish(live)
    assert "PUB connects to tcp://127.0.0.1:" in perr
    d = json.loads(out)
    assert d["caches"] == want_state("pressure") and d["batches"] == 5


def test_late_join_is_filled_from_replay(ports):
    p, r = ports(), ports()
    pub = start("publish", SCEN, "--no-payloads", "--endpoint", f"tcp://[::ffff:127.0.0.1]:{p}",
                "--replay", f"tcp://127.0.0.1:{r}", "--start-delay-s", "0",
                "--interval-ms", "250", "--hold-s", "20")
    # wait until the publisher has sent a few batches, then join
    seen = []
    t0 = time.monotonic()
    while not any("(seq 2" in ln or "seq 2)" in ln for ln in seen):
        seen.append(pub.stderr.readline())
        assert time.monotonic() - t0 < 90, seen
    live = start("live", f"tcp://127.0.0.1:{p}", "--replay", f"tcp://127.0.0.1:{r}",
                 "--max-batches", "5", "--until-idle", "60", "--json")
    out, _ = finish(live)
    pub.kill()
    pub.communicate()
    d = json.loads(out)
    assert d["caches"] == want_state("pressure") and d["missing_seqs"] == []
    assert d["batches"] == 5


class DroppingProxy:
    """Forwards a PUB's messages to subscribers, all but one seq (a gap on the live stream)."""

    def __init__(self, upstream: str, downstream: str, drop: int) -> None:
        self.ctx = zmq.Context()
        self.xsub = self.ctx.socket(zmq.XSUB)
        self.xsub.connect(upstream)
        self.xpub = self.ctx.socket(zmq.XPUB)
        self.xpub.bind(downstream)
        self.drop, self.dropped = drop, 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.xsub, zmq.POLLIN)
        poller.register(self.xpub, zmq.POLLIN)
        while not self._stop.is_set():
            for sock, _ in poller.poll(50):
                if sock is self.xpub:
                    self.xsub.send(self.xpub.recv())        # a subscription, upstream
                else:
                    frames = self.xsub.recv_multipart()
                    if int.from_bytes(frames[1], "big", signed=True) == self.drop:
                        self.dropped += 1
                        continue
                    self.xpub.send_multipart(frames)

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.xsub.close(0)
        self.xpub.close(0)
        self.ctx.term()


def test_a_gap_on_the_live_stream_is_filled_from_replay(ports):
    p, q, r = ports(), ports(), ports()
    proxy = DroppingProxy(f"tcp://127.0.0.1:{p}", f"tcp://127.0.0.1:{q}", drop=2)
    pub = None
    try:
        live = listening(start("live", f"tcp://127.0.0.1:{q}", "--replay", f"tcp://127.0.0.1:{r}",
                               "--max-batches", "5", "--until-idle", "60", "--json"))
        pub = start("publish", SCEN, "--no-payloads", "--no-payloads", "--endpoint", f"tcp://[::ffff:127.0.0.1]:{p}",
                    "--replay", f"tcp://127.0.0.1:{r}", "--start-delay-s", "1.5",
                    "--interval-ms", "100", "--hold-s", "15")
        out, err = finish(live)
    finally:
        if pub is not None:
            pub.kill()
            pub.communicate()
        proxy.close()
    d = json.loads(out)
    assert proxy.dropped == 1
    assert d["caches"] == want_state("pressure") and d["missing_seqs"] == []
    assert d["note_counts"] == {"gap": 1}, d["notes"]
    assert "seqs 2..2 did not arrive" in d["notes"][0]
