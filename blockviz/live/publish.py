"""``blockviz publish``: blockviz's engine publishes a scenario's KV events as vLLM 0.33's
``ZmqEventPublisher`` would (vllm/distributed/kv_events.py), so that any subscriber — an
llm-d- or Dynamo-style indexer, ``blockviz live`` — can be driven by a lesson.

What vLLM does, and so this does:
- one batch per engine step that has events: ``Scheduler.update_from_output`` takes every queued
  event (the KV-cache manager's, then the connector's) and publishes ``KVEventBatch(ts=time.time(),
  events)``; a step with none publishes nothing. A scenario event such as ``step: 3`` runs three
  engine steps, so it may send three batches. An event raised outside an engine step (a reset's
  ``AllBlocksCleared``) waits for the next step's batch, in front of its events; if no step
  follows, it is never sent;
- the payload is ``msgspec.msgpack.Encoder().encode(batch)`` with the rank set (0), the message
  ``[topic, seq (8 bytes, big-endian), payload]``, seqs 0, 1, 2, ...;
- the PUB socket binds when the endpoint has ``*`` or ``::`` or is ``ipc://``/``inproc://``, and
  connects otherwise; the replay ROUTER always binds, keeps the last ``buffer_steps`` batches and
  answers ``[b"", start seq]`` with every kept batch from there, then ``[b"", b"", -1, b""]``.

What has no real equivalent: a ``rewind`` (a live engine cannot take back what it published:
batches sent in the abandoned branch stay sent; events still queued go back to what they were at
the checkpoint), a ``restart`` (a new engine process: a new publisher, seqs from 0 again), and the
teaching-only forms. Each is reported on stderr.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

import zmq

from blockviz.live.subscribe import publisher_binds
from blockviz.live.wire import encode_batch, end_marker, event_from_dict, seq_frame

BUFFER_STEPS = 10_000
HWM = 100_000


class Publisher:
    """The sockets and the replay buffer (vLLM's ZmqEventPublisher, single-threaded: replay
    requests are answered whenever :meth:`serve` or :meth:`publish` runs)."""

    def __init__(self, endpoint: str, *, replay: str | None = None, topic: str = "",
                 buffer_steps: int = BUFFER_STEPS) -> None:
        self.endpoint, self.replay_endpoint = endpoint, replay
        self.topic = topic.encode("utf-8")
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self.seq = 0
        self.ctx = zmq.Context()
        self.pub = self.router = None
        try:
            self.pub = self.ctx.socket(zmq.PUB)
            self.pub.setsockopt(zmq.LINGER, 0)
            self.pub.set_hwm(HWM)
            self.binds = publisher_binds(self.endpoint)
            (self.pub.bind if self.binds else self.pub.connect)(self.endpoint)
            if self.replay_endpoint is not None:
                self.router = self.ctx.socket(zmq.ROUTER)
                self.router.setsockopt(zmq.LINGER, 0)
                # a whole replay and its end marker fit, as vLLM sizes it
                self.router.setsockopt(zmq.SNDHWM, 2 * (buffer_steps + 1))
                self.router.bind(self.replay_endpoint)
        except Exception:
            self.close()
            raise

    def publish(self, events: list, ts: float | None = None) -> int:
        self.serve(0)
        seq = self.seq
        payload = encode_batch(events, time.time() if ts is None else ts)
        self.pub.send_multipart([self.topic, seq_frame(seq), payload])
        self.buffer.append((seq, payload))
        self.seq += 1
        return seq

    def restart(self) -> None:
        """A new engine process: a new publisher, whose seqs start at 0 and whose buffer is
        empty (the sockets are kept: a subscriber sees exactly what a restart shows it)."""
        self.buffer.clear()
        self.seq = 0

    def serve(self, seconds: float) -> None:
        """Answer replay requests for ``seconds`` (0: those already waiting)."""
        if self.router is None:       # nothing to answer: only the wait
            time.sleep(max(0.0, seconds))
            return
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if self.router.poll(max(0, int(left * 1000))):
                self._answer()
            elif left <= 0:
                return

    def _answer(self) -> None:
        frames = self.router.recv_multipart()
        if len(frames) != 3:       # vLLM logs "Invalid replay request" and answers nothing
            return
        client, _, start = frames
        start_seq = int.from_bytes(start, "big")
        for seq, payload in list(self.buffer):
            if seq >= start_seq:
                self.router.send_multipart([client, b"", self.topic, seq_frame(seq), payload])
        self.router.send_multipart([client, b"", *end_marker()])

    def close(self) -> None:
        for s in (self.pub, self.router):
            if s is not None:
                s.close(0)
        self.ctx.term()


def scenario_batches(loaded, *, device: str | None = None, payloads: bool = True, note=None):
    """Run the scenario on blockviz's engine and yield, per scenario event, ``(index, step,
    engine_steps, batches)`` where ``batches`` lists the events vLLM would publish after each of
    its engine steps (empty lists included: the step published nothing) — or the string
    ``"restart"`` for a new engine process. Payloads on by default, as ``blockviz json`` runs:
    without them the tokens a scenario leaves to the model come from the seeded toy sampler.
    Events still queued at the end are reported through ``note("publish_unsent", ...)``. A step
    the state does not allow raises a located ScenarioError, as ``blockviz json`` does."""
    from blockviz.sim.engine import EngineError
    from blockviz.sim.runner import BudgetExceeded, make_engine
    engine = make_engine(loaded, device=device, payloads=payloads)
    note = note or (lambda key, fields: None)
    pending: list = []
    saved: dict[str, list] = {}
    steps = loaded.scenario.steps
    for i, step in enumerate(steps):
        try:
            result = engine.apply(step)
        except (EngineError, BudgetExceeded) as e:
            raise loaded.step_error(i, str(e)) from None
        if step.teaching_only:
            note("publish_teaching_only", {"i": i + 1, "kind": step.kind})
        if step.kind == "checkpoint":
            saved[step.args] = list(pending)
        elif step.kind == "rewind":
            note("publish_rewind", {"i": i + 1, "name": step.args})
            pending = list(saved.get(step.args, []))
        elif step.kind == "restart":
            note("publish_restart", {"i": i + 1, "n": len(pending)})
            pending = []
            yield i, step, len(result.engine_steps), "restart"
            continue
        events = [event_from_dict(d) for d in result.kv_events]
        marks = result.update_marks
        tier = [[event_from_dict(e.to_dict()) for e in ts.events] for ts in result.tier_steps]
        batches, prev = [], 0
        for k, m in enumerate(marks):
            batch = pending + events[prev:m]
            if len(tier) == len(marks):
                batch += tier[k]          # vLLM: the manager's events, then the connector's
            batches.append(batch)
            pending, prev = [], m
        pending += events[prev:]
        if len(tier) != len(marks):
            pending += [e for t in tier for e in t]
        yield i, step, len(result.engine_steps), batches
    if pending:
        note("publish_unsent", {"n": len(pending),
                                "types": ", ".join(type(e).__name__ for e in pending)})


def publish_scenario(loaded, pub: Publisher, *, interval_s: float = 0.0, device: str | None = None,
                     payloads: bool = True,
                     on_step: Callable[[int, int, object, int, list[int]], None] | None = None,
                     note: Callable[[str, dict], None] | None = None) -> int:
    """Publish the scenario's batches through ``pub``, pausing ``interval_s`` after every engine
    step (answering replay requests meanwhile). Returns the number of batches sent. Reported:
    ``on_step(i, n, step, engine_steps, seqs)`` per scenario event, ``note(i18n key, fields)``."""
    sent = 0
    n = len(loaded.scenario.steps)
    for i, step, engine_steps, batches in scenario_batches(loaded, device=device,
                                                           payloads=payloads, note=note):
        seqs: list[int] = []
        if batches == "restart":
            pub.restart()
        else:
            for batch in batches:
                if batch:
                    seqs.append(pub.publish(batch))
                    sent += 1
                pub.serve(interval_s)
        if on_step is not None:
            on_step(i + 1, n, step, engine_steps, seqs)
    return sent
