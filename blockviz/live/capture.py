"""Recordings of a KV-event stream: the framing ``vllm-kv-events-capture/1`` (JSON Lines).

Line 1 is a header ``{"header": {"format", "endpoint", "mode": "bind"|"connect", "topic",
"replay", "started"}}`` (``mode`` is the SUB socket's; ``started`` unix time). Every further line
is one received message, in arrival order: ``{"src": "sub"|"replay", "t": unix time, "frames":
[base64, ...]}``; a replay reply is written without the DEALER's empty delimiter frame, so it
has the same three frames as a live message. Keys may be added; readers ignore those they do
not know (``blockviz live`` adds ``dp_ranks`` to the header).

Reading never raises for a bad line: it is skipped and reported with its line number.
"""
from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

FORMAT = "vllm-kv-events-capture/1"
SOURCES = ("sub", "replay")
MAX_LINE_BYTES = 64 << 20      # a line longer than this is skipped, never read whole


@dataclass(frozen=True, slots=True)
class Received:
    """One received message: where it came from, when, its frames (bytes), and where it is (the
    message's number in arrival order, from 0; its line in a file)."""
    src: str
    t: float | None
    frames: list[bytes]
    index: int
    line: int | None = None


@dataclass(frozen=True, slots=True)
class BadLine:
    line: int
    why: str


class CaptureWriter:
    """Writes a recording, one flushed line per message (a crash loses at most a line)."""

    def __init__(self, path: str | Path, *, endpoint: str, mode: str, topic: str = "",
                 replay: str | None = None, **extra) -> None:
        self.path = Path(path)
        self._f: IO[str] = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        header = {"format": FORMAT, "endpoint": endpoint, "mode": mode, "topic": topic,
                  "replay": replay, "started": time.time(), **extra}
        self._f.write(json.dumps({"header": header}) + "\n")
        self._f.flush()

    def write(self, src: str, frames: list[bytes], t: float | None = None) -> None:
        line = {"src": src, "t": time.time() if t is None else t,
                "frames": [base64.b64encode(bytes(f)).decode("ascii") for f in frames]}
        self._f.write(json.dumps(line) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


NOT_JSON = object()   # what CaptureReader._json makes of a line that is not JSON


class CaptureReader:
    """Iterates a recording's messages; ``header`` is known after the first line has been read
    (it is read on construction), ``bad_lines`` collects what was skipped. ``path``: a file's
    path, or a binary file object (an upload held in memory)."""

    def __init__(self, path: str | Path | IO[bytes]) -> None:
        # a path is opened here and closed when iteration ends
        self._f = path if hasattr(path, "readline") else open(path, "rb")  # noqa: SIM115
        self.header: dict | None = None
        self.bad_lines: list[BadLine] = []
        self._lineno = 0
        self._first = self._next_line()
        if self._first is not None:
            obj = self._json(self._first)
            if obj is NOT_JSON:     # in bad_lines once, and not read again as a message
                self._first = None
            elif isinstance(obj, dict) and isinstance(obj.get("header"), dict):
                self.header = obj["header"]
                self._first = None

    def _next_line(self) -> bytes | None:
        while True:
            raw = self._f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return None
            self._lineno += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                self.bad_lines.append(BadLine(self._lineno, f"longer than {MAX_LINE_BYTES} bytes"))
                while raw and not raw.endswith(b"\n"):      # skip the rest of the line
                    raw = self._f.readline(MAX_LINE_BYTES)
                continue
            if raw.strip():
                return raw

    def _json(self, raw: bytes):
        """The line's JSON value, or ``NOT_JSON`` (said in ``bad_lines``); a ``null`` line is
        JSON, and is judged as a message like any other value."""
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as e:
            self.bad_lines.append(BadLine(self._lineno, f"not JSON: {str(e)[:80]}"))
            return NOT_JSON

    def __iter__(self) -> Iterator[Received]:
        index, raw = 0, self._first
        try:
            if raw is None:
                raw = self._next_line()
            while raw is not None:
                line = self._lineno
                rec = self._record(raw, line)
                if rec is not None:
                    yield Received(*rec, index, line)
                    index += 1
                raw = self._next_line()
        finally:
            self._f.close()

    def _record(self, raw: bytes, line: int):
        obj = self._json(raw)
        if obj is NOT_JSON:
            return None
        if not isinstance(obj, dict) or not isinstance(obj.get("frames"), list):
            self.bad_lines.append(BadLine(line, "not a message line (no \"frames\" list)"))
            return None
        src = obj.get("src", "sub")
        if src not in SOURCES:
            self.bad_lines.append(BadLine(line, f"unknown src {str(src)[:20]!r}"))
            return None
        t = obj.get("t")
        if isinstance(t, bool) or not isinstance(t, (int, float)):
            t = None
        try:
            frames = [base64.b64decode(f, validate=True) for f in obj["frames"]]
        except (binascii.Error, TypeError, ValueError):
            self.bad_lines.append(BadLine(line, "a frame is not base64"))
            return None
        return src, t, frames
