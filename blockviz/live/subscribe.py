"""The subscriber's sockets (``blockviz live``, the Live page): a SUB per data-parallel rank and,
when the publisher has one, a DEALER to its replay ROUTER.

vLLM's ``ZmqEventPublisher`` binds its PUB socket when the endpoint contains ``*`` or ``::`` or is
``ipc://``/``inproc://``, and connects it otherwise: so a subscriber connects to a binding
publisher (vLLM's default ``tcp://*:5557``) and binds where vLLM connects (``tcp://host:P``).
Rank r of a data-parallel deployment publishes on the endpoint's port + r, and its replay socket
on the replay port + r. A replay request is ``[b"", seq as 8 bytes big-endian]`` from a DEALER;
the replies are ``[b"", topic, seq, payload]`` and end with ``[b"", b"", -1, b""]`` (a REQ socket
would receive only the first).

Bounded: a frame over ``max_message_bytes`` is refused by libzmq (the peer is disconnected), a
replay that goes quiet for ``replay_timeout_s`` or sends more than ``max_replay`` batches is
abandoned (its DEALER closed, so late replies are dropped), and the receive queue holds at most
``rcvhwm`` messages.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import zmq

from blockviz.live.capture import CaptureWriter, Received
from blockviz.live.stream import MAX_PENDING, Reduction
from blockviz.live.wire import END_SEQ, seq_frame

MAX_MESSAGE_BYTES = 64 << 20
REPLAY_TIMEOUT_S = 5.0
RCVHWM = 100_000


def offset_endpoint_port(endpoint: str | None, rank: int) -> str | None:
    """Rank ``rank``'s endpoint, as vLLM derives it (ZmqEventPublisher.offset_endpoint_port):
    tcp port + rank (a port of 0 is left alone), ``inproc://x`` -> ``inproc://x_dpR``."""
    if not endpoint or rank == 0:
        return endpoint
    if "inproc" in endpoint:
        return f"{endpoint}_dp{rank}"
    if "tcp" in endpoint:
        base, _, port = endpoint.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"{endpoint}: no port to offset for DP rank {rank}")
        return endpoint if int(port) == 0 else f"{base}:{int(port) + rank}"
    raise ValueError(f"{endpoint}: DP ranks need a tcp:// or inproc:// endpoint")


def publisher_binds(endpoint: str) -> bool:
    """vLLM's rule (ZmqEventPublisher._is_bind_endpoint): does its PUB socket bind here?"""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


@dataclass
class _Replay:
    sock: zmq.Socket
    last: float                 # when it was asked for, or its last reply came
    replies: int = 0


class LiveSession:
    """The sockets feeding a reduction (and a recording). ``pump`` does one round of receiving;
    the CLI and the app's background thread call it in a loop."""

    def __init__(self, endpoint: str, *, bind: bool = False, topic: str = "",
                 replay: str | None = None, dp_ranks: int = 1, record: str | None = None,
                 replay_timeout_s: float = REPLAY_TIMEOUT_S,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, **limits) -> None:
        self.replay, self.replay_timeout_s = replay, replay_timeout_s
        self.max_message_bytes, self.max_replay = max_message_bytes, MAX_PENDING + 1
        self.red = Reduction(replay=bool(replay), **limits)
        self.ctx = zmq.Context()
        self.poller = zmq.Poller()
        self._socket_rank: dict = {}
        self._replays: dict[int, _Replay] = {}
        self._open: set = set()          # every socket not closed yet (term waits for them)
        self.writer = None
        try:
            for r in range(dp_ranks):
                s = self._socket(zmq.SUB)
                s.setsockopt(zmq.SUBSCRIBE, topic.encode("utf-8"))
                ep = offset_endpoint_port(endpoint, r)
                if bind:
                    s.bind(ep)
                else:
                    s.connect(ep)
                self._socket_rank[s] = ("sub", r)
                self.poller.register(s, zmq.POLLIN)
            if record:
                self.writer = CaptureWriter(record, endpoint=endpoint,
                                            mode="bind" if bind else "connect", topic=topic,
                                            replay=replay, dp_ranks=dp_ranks)
        except Exception:
            self._close_sockets()
            raise
        self.index = 0
        self.last_message = time.monotonic()
        if replay:
            # vLLM's advice: ask from 0 at start (PUB drops what is sent before a subscription
            # arrives; the replay buffer has it). Each rank's first live batch then finds it done.
            for r in range(dp_ranks):
                self._request(r, 0)

    def _socket(self, kind: int) -> zmq.Socket:
        s = self.ctx.socket(kind)
        self._open.add(s)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        s.setsockopt(zmq.RCVHWM, RCVHWM)
        return s

    # -- replay -------------------------------------------------------------------------------------
    def _request(self, rank: int, from_seq: int) -> None:
        """Ask rank ``rank``'s replay socket for every buffered batch from ``from_seq`` on (a fresh
        DEALER: replies to an abandoned request cannot mix in), the rank's live batches held until
        it ends. Nothing without a replay socket."""
        if not self.replay:
            return
        self._drop_replay(rank)
        s = self._socket(zmq.DEALER)
        s.connect(offset_endpoint_port(self.replay, rank))
        s.send_multipart([b"", seq_frame(max(0, from_seq))])
        self._replays[rank] = _Replay(s, time.monotonic())
        self._socket_rank[s] = ("replay", rank)
        self.poller.register(s, zmq.POLLIN)
        self.red.rank(rank).seq.expect_replay()

    def _drop_replay(self, rank: int) -> None:
        old = self._replays.pop(rank, None)
        if old is not None:
            self.poller.unregister(old.sock)
            self._socket_rank.pop(old.sock, None)
            self._close(old.sock)

    def _close(self, s: zmq.Socket) -> None:
        self._open.discard(s)
        s.close(0)

    def replaying(self) -> bool:
        return bool(self._replays)

    def _close_sockets(self) -> None:
        for rank in list(self._replays):
            self._drop_replay(rank)
        for s in list(self._open):
            self._close(s)
        self.ctx.term()

    # -- receiving ----------------------------------------------------------------------------------
    def pump(self, timeout_s: float = 0.1) -> int:
        """Receive for up to ``timeout_s`` and handle what came."""
        return self.handle(self.receive(timeout_s))

    def receive(self, timeout_s: float, max_messages: int = 10_000) -> list[tuple]:
        """Wait up to ``timeout_s`` for messages (the app's thread does this without its lock):
        ``(src, rank, frames, t)`` each, replay replies without the DEALER's delimiter frame."""
        out: list = []
        for sock, _ in self.poller.poll(int(timeout_s * 1000)):
            src, rank = self._socket_rank[sock]     # every polled socket is registered there
            while len(out) < max_messages:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                if src == "replay" and frames and frames[0] == b"":
                    frames = frames[1:]   # the DEALER's empty delimiter
                out.append((src, rank, frames, time.time()))
                if src != "replay":
                    continue
                rp = self._replays.get(rank)
                if rp is not None:
                    rp.replies += 1
                    rp.last = time.monotonic()
                if (len(frames) == 3 and len(frames[1]) == 8
                        and int.from_bytes(frames[1], "big", signed=True) == END_SEQ):
                    self._drop_replay(rank)     # done: the marker ends it
                    break
        return out

    def handle(self, msgs: list) -> int:
        """Record, reduce and answer what ``receive`` returned; abandon replays that expired (quiet
        for too long, or too many replies)."""
        for src, rank, frames, t in msgs:
            rec = Received(src, t, frames, self.index)
            self.index += 1
            if self.writer is not None:
                self.writer.write(src, frames, t)
            for r, seq in self.red.feed(rec, rank_hint=rank if src == "replay" else None):
                self._request(r, seq)
        if msgs:
            self.last_message = time.monotonic()
        now = time.monotonic()
        for rank, rp in list(self._replays.items()):
            if now - rp.last > self.replay_timeout_s:
                kind, fields = "replay_timeout", {"seconds": self.replay_timeout_s}
            elif rp.replies > self.max_replay:
                kind, fields = "replay_overflow", {"limit": self.max_replay}
            else:
                continue
            self._drop_replay(rank)
            self.red.replay_failed(rank, kind, **fields)
        return len(msgs)

    def idle_for(self) -> float:
        return time.monotonic() - self.last_message

    def close(self) -> None:
        self.red.finish()
        if self.writer is not None:
            self.writer.close()
        self._close_sockets()
