"""Fixtures for the live tests: free loopback ports, and a scripted publisher (an XPUB that knows
when a subscriber has subscribed, so nothing is lost to the slow-joiner race, plus a ROUTER that
answers replay requests as vLLM's does — or misbehaves on purpose)."""
from __future__ import annotations

import socket
import threading
import time

import pytest
import zmq

from blockviz.live.wire import END_SEQ, encode_batch, seq_frame

EMPTY_BATCH = encode_batch([], 0.0)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ScriptedPublisher:
    """``send(frames)`` on an XPUB bound (or connected) at ``endpoint``; ``wait_subscribed()``;
    a ROUTER at ``replay`` serving ``buffer`` ((seq, payload) pairs) in vLLM's way, or with
    ``replay_mode`` "silent" (never answers) or "endless" (never sends the end marker)."""

    def __init__(self, endpoint: str, *, bind: bool = True, replay: str | None = None,
                 topic: bytes = b"", replay_mode: str = "vllm") -> None:
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        (self.pub.bind if bind else self.pub.connect)(endpoint)
        self.topic = topic
        self.buffer: list[tuple[int, bytes]] = []
        self.replay_mode = replay_mode
        self.requests: list[int] = []
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()
        if replay:
            self.router = self.ctx.socket(zmq.ROUTER)
            self.router.setsockopt(zmq.LINGER, 0)
            self.router.bind(replay)
            self._thread = threading.Thread(target=self._serve, daemon=True)
            self._thread.start()

    def wait_subscribed(self, timeout: float = 10.0, pump=None) -> None:
        """Until a subscription arrives. A bound SUB sends its subscription to a publisher that
        connects only when its own thread touches it: ``pump`` (a LiveSession's) meanwhile."""
        t0 = time.monotonic()
        while not self.pub.poll(50):
            if pump is not None:
                pump(0.01)
            if time.monotonic() - t0 > timeout:
                raise TimeoutError("no subscriber subscribed")
        self.pub.recv()

    def send(self, frames: list[bytes]) -> None:
        self.pub.send_multipart(frames)

    def publish(self, seq: int, payload: bytes, live: bool = True) -> None:
        with self._lock:
            self.buffer.append((seq, payload))
        if live:
            self.send([self.topic, seq_frame(seq), payload])

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self.router.poll(50):
                continue
            client, _, start = self.router.recv_multipart()
            start = int.from_bytes(start, "big")
            self.requests.append(start)
            if self.replay_mode == "silent":
                continue
            with self._lock:
                kept = [(s, p) for s, p in self.buffer if s >= start]
            for s, p in kept:
                self.router.send_multipart([client, b"", self.topic, seq_frame(s), p])
            if self.replay_mode == "endless":
                k = 1000        # far ahead: a stream that never ends, not one that lies
                while not self._stop.is_set():
                    try:
                        self.router.send_multipart([client, b"", self.topic, seq_frame(k),
                                                    EMPTY_BATCH], zmq.NOBLOCK)
                    except zmq.Again:
                        time.sleep(0.01)
                    k += 1
                return
            self.router.send_multipart([client, b"", b"", seq_frame(END_SEQ), b""])

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self.router.close(0)
        self.pub.close(0)
        self.ctx.term()


@pytest.fixture
def scripted():
    made: list[ScriptedPublisher] = []

    def make(*args, **kw) -> ScriptedPublisher:
        p = ScriptedPublisher(*args, **kw)
        made.append(p)
        return p
    yield make
    for p in made:
        p.close()


@pytest.fixture
def ports():
    return free_port
