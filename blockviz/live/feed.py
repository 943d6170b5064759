"""A subscriber that runs in a background thread, for the app: one per endpoint, shared by every
session that views it (the server owns it; a session only reads it).

The thread waits on the sockets without the lock and takes the lock to reduce what came, so a
reader (the Live page, drawing) sees a consistent state. It stops when nobody has looked for
``IDLE_STOP_S`` seconds (its state is dropped; the next view starts afresh, asking the replay
socket from seq 0 when there is one). Bounded like ``blockviz live``: hashes, tokens per hash,
notes and history are capped.
"""
from __future__ import annotations

import logging
import threading
import time

from blockviz.live.endpoints import EndpointSpec

IDLE_STOP_S = 600.0
LIMITS = {"max_hashes": 200_000, "max_tokens_per_hash": 256}


class LiveFeed:
    def __init__(self, spec: EndpointSpec) -> None:
        self.spec = spec
        self.lock = threading.RLock()
        self.session = None            # a LiveSession while running
        self.error: str | None = None  # why it could not start (the socket's error)
        self.started: float | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._last_view = time.monotonic()

    # -- life --------------------------------------------------------------------------------------
    def view(self) -> None:
        """A session looks: start the thread if it is not running (restart it if it stopped)."""
        with self.lock:
            self._last_view = time.monotonic()
            if self._thread is not None and self._thread.is_alive():
                return
            from blockviz.live.subscribe import LiveSession
            s = self.spec
            try:
                self.session = LiveSession(s.endpoint, bind=s.bind, topic=s.topic, replay=s.replay,
                                           dp_ranks=s.dp_ranks, **LIMITS)
            except Exception as e:  # noqa: BLE001 - a socket that will not open: shown, not raised
                self.session, self.error = None, str(e)
                return
            self.error = None
            self.started = time.time()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"blockviz-live {s.endpoint}",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        sess = self.session
        try:
            while not self._stop.is_set():
                msgs = sess.receive(0.2)
                with self.lock:
                    sess.handle(msgs)
                    if time.monotonic() - self._last_view > IDLE_STOP_S:
                        break
        except Exception as e:  # noqa: BLE001 - a bug must not pass unseen: the page shows it
            logging.getLogger(__name__).exception("live feed %s stopped", self.spec.text)
            self.error = f"{type(e).__name__}: {e}"
        finally:
            with self.lock:
                sess.close()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        t = self._thread
        if t is not None:
            t.join(timeout)

    @property
    def reduction(self):
        """The reduction being fed (read it under ``lock``), or None before the first start."""
        return None if self.session is None else self.session.red
