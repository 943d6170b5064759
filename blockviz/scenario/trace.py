"""Request traces in the Mooncake format (FAST'25): read them safely, one request at a time.

The format is JSON Lines, one request per line, in arrival order::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 2353]}

  * ``timestamp``      — arrival time in milliseconds (a number >= 0; sequence mode ignores it);
  * ``input_length``   — prompt tokens (a whole number, 1 .. ``MAX_INPUT_LENGTH``);
  * ``output_length``  — tokens the request generated (a whole number, 0 .. ``MAX_INPUT_LENGTH``);
  * ``hash_ids``       — one id per 512-token block of the prompt (``ceil(input_length / 512)`` of
    them, the last block possibly partial): the trace's remapped prefix hashes, so equal ids at
    equal positions after equal ids are a reusable prefix. Whole numbers, 0 .. ``MAX_HASH_ID``.

Other fields are ignored; blank lines are skipped. A line that breaks these rules is one located
line, ``FILE:LINE:COL: field: message`` (:class:`TraceError`), never a traceback.

Bounded like the scenario loader: the file is read as a stream, one line at a time (a line at most
``MAX_LINE_BYTES``, the file at most ``MAX_TRACE_BYTES``), so a 200 MB upload is never in memory
at once.

Token ids: the trace has none, so they are derived from the hash ids exactly as the reference
replay does (``shared/tools/vllm-diff/trace_oracle.py``): block ``j`` with hash id ``h`` holds
tokens ``h*512 .. h*512+511``, the last block only its first ``input_length - 512*(n-1)``
(:func:`prompt_token_ids`). Equal hash-id prefixes then give equal vLLM block hashes at any block
size that divides 512. These ids live in a token space of their own: they only feed prefix hashes,
are never decoded or embedded, and are not bounded by a scenario's ``VOCAB_SIZE``.
"""
from __future__ import annotations

import io
import json
import math
import os
import stat
from collections.abc import Iterable, Iterator
from typing import IO, NamedTuple

from blockviz.i18n import t
from blockviz.i18n.trace import trace_message

TRACE_BLOCK_TOKENS = 512            # the Mooncake format's block: what one hash id covers
MAX_TRACE_BYTES = 1 << 30           # 1 GiB; the capacity page's uploads (200 MB) are well inside
MAX_LINE_BYTES = 1 << 20            # a request of MAX_INPUT_LENGTH tokens needs ~2,048 ids: ~20 KB
# The core's KVCacheManager caps a request at its max_model_len (2^20 tokens): a longer prompt
# would not be replayed as vLLM replays it.
MAX_INPUT_LENGTH = 1 << 20
MAX_HASH_ID = (1 << 53) - 1         # JSON's exact integers; token ids stay below 2^62
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


class TraceRequest(NamedTuple):
    timestamp: float            # ms (an int when the file has one)
    input_length: int
    output_length: int
    hash_ids: list[int]
    line: int                   # 1-based line of the file it came from


class TraceError(ValueError):
    """A located, one-line problem with a trace: ``FILE:LINE:COL: field: message``.

    The message is kept as an i18n key and its fields, so it reads in either language."""

    def __init__(self, file: str, line: int | None, col: int | None, field: str, key: str,
                 **fields) -> None:
        self.file, self.line, self.col, self.field = file, line, col, field
        self.key, self.fields = key, fields
        super().__init__(str(self))

    def __reduce__(self):   # across processes (a sweep's workers), with its fields
        return (_trace_error, (self.file, self.line, self.col, self.field, self.key, self.fields))

    @property
    def message(self) -> str:
        return trace_message(self.key, "en", **self.fields)

    def __str__(self) -> str:
        return self.localized("en")

    def localized(self, lang: str) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}" + (f":{self.col}" if self.col is not None else "")
        message = " ".join(trace_message(self.key, lang, **self.fields).split())  # one line
        return f"{where}: {self.field}: {message}" if self.field else f"{where}: {message}"


def _trace_error(file, line, col, field, key, fields) -> TraceError:
    return TraceError(file, line, col, field, key, **fields)


def num_trace_blocks(input_length: int) -> int:
    return -(-input_length // TRACE_BLOCK_TOKENS)


def check_block_size(block_size: int) -> None:
    """A replay's block size must divide the trace's 512-token blocks (so that trace blocks
    split into whole vLLM blocks and equal ids give equal hashes)."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1 \
            or TRACE_BLOCK_TOKENS % block_size:
        raise ValueError(t("trace_err_block_size", "en", value=block_size))


def prompt_token_ids(input_length: int, hash_ids: Iterable[int]) -> list[int]:
    """The prompt's token ids, derived from its hash ids exactly as the reference replay does."""
    tokens: list[int] = []
    for j, h in enumerate(hash_ids):
        k = min(TRACE_BLOCK_TOKENS, input_length - j * TRACE_BLOCK_TOKENS)
        base = h * TRACE_BLOCK_TOKENS
        tokens.extend(range(base, base + k))
    return tokens


# -- reading ----------------------------------------------------------------------------------
def _column(text: str, field: str) -> int:
    i = text.find(f'"{field}"')
    return i + 1 if i >= 0 else 1


def _is_int(v) -> bool:
    return type(v) is int            # not bool, not float (1.0 is not a length)


def _check(obj: dict, text: str, file: str, line: int) -> TraceRequest:
    def fail(field: str, key: str, **fields) -> TraceError:
        return TraceError(file, line, _column(text, field), field, key, **fields)

    for field in FIELDS:
        if field not in obj:
            raise TraceError(file, line, 1, "", "trace_err_missing", name=field)
    ts = obj["timestamp"]
    if type(ts) not in (int, float) or (type(ts) is float and not math.isfinite(ts)) or ts < 0:
        raise fail("timestamp", "trace_err_timestamp", value=_show(ts))
    n = obj["input_length"]
    if not _is_int(n) or not 1 <= n <= MAX_INPUT_LENGTH:
        raise fail("input_length", "trace_err_length", value=_show(n), lo=1, hi=f"{MAX_INPUT_LENGTH:,}")
    out = obj["output_length"]
    if not _is_int(out) or not 0 <= out <= MAX_INPUT_LENGTH:
        raise fail("output_length", "trace_err_length", value=_show(out), lo=0,
                   hi=f"{MAX_INPUT_LENGTH:,}")
    ids = obj["hash_ids"]
    if type(ids) is not list:
        raise fail("hash_ids", "trace_err_ids_list", value=_show(ids))
    need = num_trace_blocks(n)
    if len(ids) != need:
        raise fail("hash_ids", "trace_err_ids_count", got=len(ids), n=n, need=need)
    for i, h in enumerate(ids):
        if not _is_int(h) or not 0 <= h <= MAX_HASH_ID:
            raise TraceError(file, line, _column(text, "hash_ids"), f"hash_ids[{i}]",
                             "trace_err_id", value=_show(h))
    return TraceRequest(ts, n, out, ids, line)


def _show(value) -> str:
    s = json.dumps(value) if not isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return s if len(s) <= 40 else s[:37] + "..."


def _lines(f: IO[bytes], file: str) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) from a binary stream, each at most MAX_LINE_BYTES, the whole at
    most MAX_TRACE_BYTES."""
    total = 0
    line = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        line += 1
        total += len(raw)
        if total > MAX_TRACE_BYTES:
            raise TraceError(file, line, None, "", "trace_err_file_size", lim=f"{MAX_TRACE_BYTES:,}")
        if len(raw) > MAX_LINE_BYTES:
            raise TraceError(file, line, 1, "", "trace_err_line_size", lim=f"{MAX_LINE_BYTES:,}")
        yield line, raw


def _parse(raw: bytes, file: str, line: int) -> TraceRequest | None:
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as e:
        raise TraceError(file, line, e.start + 1, "", "trace_err_utf8") from None
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(file, line, e.colno, "", "trace_err_json",
                         detail=e.msg) from None
    except RecursionError:
        raise TraceError(file, line, 1, "", "trace_err_nested") from None
    except ValueError:           # e.g. an integer of more than 4,300 digits
        raise TraceError(file, line, 1, "", "trace_err_number") from None
    if not isinstance(obj, dict):
        raise TraceError(file, line, 1, "", "trace_err_object")
    return _check(obj, text, file, line)


def iter_trace(source: str | os.PathLike | IO[bytes] | bytes, *, name: str | None = None,
               limit: int | None = None) -> Iterator[TraceRequest]:
    """The trace's requests in file order, read as a stream. ``source``: a path, a binary file
    object, or the file's bytes; ``name`` is what errors call it (default: the path, or
    ``<trace>``); ``limit``: stop after that many requests."""
    if isinstance(source, bytes | bytearray | memoryview):
        f: IO[bytes] = io.BytesIO(bytes(source))
        file, close = name or "<trace>", True
    elif isinstance(source, str | os.PathLike):
        file = name or os.fspath(source)
        try:
            if not stat.S_ISREG(os.stat(source).st_mode):
                raise TraceError(file, None, None, "", "trace_err_not_file")
            f = open(source, "rb")       # closed below, when the generator ends
        except OSError as e:
            raise TraceError(file, None, None, "", "trace_err_read", e=e.strerror or str(e)) from None
        close = True
    else:
        f, file, close = source, name or getattr(source, "name", None) or "<trace>", False
    try:
        count = 0
        for line, raw in _lines(f, file):
            if limit is not None and count >= limit:
                return
            req = _parse(raw, file, line)
            if req is not None:
                count += 1
                yield req
        if count == 0:
            raise TraceError(file, None, None, "", "trace_err_empty")
    finally:
        if close:
            f.close()


def read_trace(source, *, name: str | None = None, limit: int | None = None) -> list[TraceRequest]:
    """The whole trace as a list (for small traces and tests; a replay streams)."""
    return list(iter_trace(source, name=name, limit=limit))


def check_trace(source, *, name: str | None = None, limit: int | None = None) -> dict:
    """Read the whole trace once, checking every line: its size (requests, prompt tokens, trace
    blocks). Raises the first :class:`TraceError`."""
    requests = tokens = blocks = 0
    for r in iter_trace(source, name=name, limit=limit):
        requests += 1
        tokens += r.input_length
        blocks += len(r.hash_ids)
    return {"requests": requests, "prompt_tokens": tokens, "trace_blocks": blocks}


# -- writing ----------------------------------------------------------------------------------
def trace_line(timestamp: float, input_length: int, output_length: int, hash_ids: Iterable[int]) -> str:
    """One request as a line of the format (fields in the format's order, no newline)."""
    return json.dumps({"timestamp": timestamp, "input_length": input_length,
                       "output_length": output_length, "hash_ids": list(hash_ids)})


def write_trace(requests: Iterable[TraceRequest | tuple], f: IO[str]) -> int:
    """Write (timestamp, input_length, output_length, hash_ids, ...) tuples as JSON Lines; the
    number of lines written."""
    n = 0
    for r in requests:
        f.write(trace_line(*r[:4]) + "\n")
        n += 1
    return n
