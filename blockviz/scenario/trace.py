"""Request traces: read them safely, one request at a time. Two formats, both JSON Lines, one
request per line, in arrival order; the format is told from the first request.

**Mooncake** (FAST'25)::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 2353]}

  * ``timestamp``      — arrival time in milliseconds (a number >= 0; sequence mode ignores it);
  * ``input_length``   — prompt tokens (a whole number, 1 .. ``MAX_INPUT_LENGTH``);
  * ``output_length``  — tokens the request generated (a whole number, 0 .. ``MAX_INPUT_LENGTH``);
  * ``hash_ids``       — one id per 512-token block of the prompt (``ceil(input_length / 512)`` of
    them, the last block possibly partial): the trace's remapped prefix hashes, so equal ids at
    equal positions after equal ids are a reusable prefix. Whole numbers, 0 .. ``MAX_HASH_ID``.

**Qwen-Bailian** (Alibaba's anonymized Bailian serving traces, ``qwen_*_blksz_16.jsonl``; format
from the dataset's README, github.com/alibaba-edu/qwen-bailian-usagetraces-anon, and the KVCache
characterization paper it accompanies, USENIX ATC'25 "KVCache Cache in the Wild")::

    {"chat_id": 159, "parent_chat_id": 55, "timestamp": 61.114, "input_length": 521,
     "output_length": 132, "type": "text", "turn": 2, "hash_ids": [1089, 1090, 1091, ...]}

  * ``chat_id`` — a randomized request id (a whole number >= 0); ``parent_chat_id`` — the chat's
    previous turn, -1 for a first turn; ``turn`` — the turn in its conversation (>= 1); ``type`` —
    text, search, image or file;
  * ``timestamp`` — seconds since the trace began (kept here in milliseconds, as Mooncake's);
  * ``hash_ids`` — one id per **16**-token block (the file name's ``blksz_N`` gives N; 16 when it
    says nothing): salted SipHash-2-4 of each block's tokens, remapped to sequential integers.
    The dataset's notes add that the last, partial block's id may already include the first output
    token (it replaced padding): only full blocks are ever cached, so replays never read it.

Which block sizes a trace allows: a vLLM block must be made of whole hash blocks or split them the
way the reference replay does. A Bailian trace allows multiples of its 16 tokens (two prompts that
part inside a 16-token block cannot be told apart any finer); a Mooncake trace allows the sizes
that divide 512, each 512-token block split into equal parts with derived tokens, as
``shared/tools/vllm-diff/trace_oracle.py`` does (which assumes the prompts that share a 512-token
id share all of it, and no more). :func:`allowed_block_sizes`; a replay asked for another size is
refused, located at the trace's first request (:func:`iter_trace`'s ``block_size``).

Other fields are ignored; blank lines are skipped. A line that breaks these rules is one located
line, ``FILE:LINE:COL: field: message`` (:class:`TraceError`), never a traceback.

Bounded like the scenario loader: the file is read as a stream, one line at a time (a line at most
``MAX_LINE_BYTES``, the file at most ``MAX_TRACE_BYTES``), so a 200 MB upload is never in memory
at once.

Token ids: the trace has none, so they are derived from the hash ids exactly as the reference
replay does (``shared/tools/vllm-diff/trace_oracle.py``): block ``j`` with hash id ``h`` holds
tokens ``h*b .. h*b+b-1`` (``b`` the trace's block tokens), the last block only its first
``input_length - b*(n-1)`` (:func:`prompt_token_ids`). Equal hash-id prefixes then give equal vLLM
block hashes at every allowed block size. These ids live in a token space of their own: they only
feed prefix hashes, are never decoded or embedded, and are not bounded by a scenario's
``VOCAB_SIZE``.
"""
from __future__ import annotations

import io
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import IO, NamedTuple

from blockviz.i18n import t
from blockviz.i18n.trace import trace_message

TRACE_BLOCK_TOKENS = 512            # the Mooncake format's block: what one hash id covers
BAILIAN_BLOCK_TOKENS = 16           # the Qwen-Bailian traces' (qwen_*_blksz_16.jsonl)
MAX_TRACE_BYTES = 1 << 30           # 1 GiB; the capacity page's uploads (200 MB) are well inside
MAX_LINE_BYTES = 1 << 20            # a request of MAX_INPUT_LENGTH tokens needs ~2,048 ids: ~20 KB
# The core's KVCacheManager caps a request at its max_model_len (2^20 tokens): a longer prompt
# would not be replayed as vLLM replays it.
MAX_INPUT_LENGTH = 1 << 20
MAX_HASH_ID = (1 << 53) - 1         # JSON's exact integers; token ids stay below 2^62
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
CHAT_FIELDS = ("chat_id", "parent_chat_id", "turn", "type")   # Qwen-Bailian's own
MAX_CHAT_ID = MAX_HASH_ID


class Chat(NamedTuple):
    """A Qwen-Bailian request's place in its conversation."""
    chat_id: int
    parent_chat_id: int         # -1: the first turn
    turn: int
    type: str


class TraceRequest(NamedTuple):
    timestamp: float            # ms (an int when the file has one)
    input_length: int
    output_length: int
    hash_ids: list[int]
    line: int                   # 1-based line of the file it came from
    block_tokens: int = TRACE_BLOCK_TOKENS   # the tokens one hash id covers
    chat: Chat | None = None    # Qwen-Bailian: the conversation


class TraceError(ValueError):
    """A located, one-line problem with a trace: ``FILE:LINE:COL: field: message``.

    The message is kept as an i18n key and its fields, so it reads in either language."""

    def __init__(self, file: str, line: int | None, col: int | None, field: str, key: str,
                 **fields) -> None:
        self.file, self.line, self.col, self.field = file, line, col, field
        self.key, self.fields = key, fields
        super().__init__(str(self))

    def __reduce__(self):   # across processes (a sweep's workers), with its fields
        return (partial(TraceError, self.file, self.line, self.col, self.field, self.key, **self.fields), ())

    def __str__(self) -> str:
        return self.localized("en")

    def localized(self, lang: str) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}" + (f":{self.col}" if self.col is not None else "")
        message = " ".join(trace_message(self.key, lang, **self.fields).split())  # one line
        return f"{where}: {self.field}: {message}" if self.field else f"{where}: {message}"


def allowed_block_sizes(block_tokens: int = TRACE_BLOCK_TOKENS) -> list[int]:
    """The block sizes (up to 512, as ``blockviz trace capacity`` takes them) a trace whose ids
    cover ``block_tokens`` tokens can be replayed at (module docstring)."""
    step = 1 if block_tokens == TRACE_BLOCK_TOKENS else block_tokens
    return [b for b in range(step, TRACE_BLOCK_TOKENS + 1, step) if TRACE_BLOCK_TOKENS % b == 0]


def block_size_problem(block_size: int, block_tokens: int = TRACE_BLOCK_TOKENS) -> tuple | None:
    """None if a trace of ``block_tokens``-token ids can be replayed at ``block_size``; else the
    i18n key and fields of the reason."""
    if block_tokens == TRACE_BLOCK_TOKENS:
        return None if TRACE_BLOCK_TOKENS % block_size == 0 else \
            ("trace_err_block_size", {"value": block_size})
    if block_size % block_tokens == 0:
        return None
    return ("trace_err_block_finer", {"value": block_size, "bt": block_tokens,
                                      "allowed": ", ".join(map(str, allowed_block_sizes(block_tokens)))})


def check_block_size(block_size: int, block_tokens: int = TRACE_BLOCK_TOKENS) -> None:
    """ValueError unless a trace of ``block_tokens``-token ids can be replayed at ``block_size``."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(t("trace_err_block_size", "en", value=block_size))
    problem = block_size_problem(block_size, block_tokens)
    if problem:
        raise ValueError(trace_message(problem[0], "en", **problem[1]))


def prompt_token_ids(input_length: int, hash_ids: Iterable[int],
                     block_tokens: int = TRACE_BLOCK_TOKENS) -> list[int]:
    """The prompt's token ids, derived from its hash ids exactly as the reference replay does."""
    tokens: list[int] = []
    for j, h in enumerate(hash_ids):
        k = min(block_tokens, input_length - j * block_tokens)
        base = h * block_tokens
        tokens.extend(range(base, base + k))
    return tokens


# -- reading ----------------------------------------------------------------------------------
def _column(text: str, field: str) -> int:
    i = text.find(f'"{field}"')
    return i + 1 if i >= 0 else 1


def _is_int(v) -> bool:
    return type(v) is int            # not bool, not float (1.0 is not a length)


def _check(obj: dict, text: str, file: str, line: int, block_tokens: int) -> TraceRequest:
    """One request; ``block_tokens``: 512 for a Mooncake trace, else a Qwen-Bailian one's."""
    def fail(field: str, key: str, **fields) -> TraceError:
        return TraceError(file, line, _column(text, field), field, key, **fields)

    bailian = block_tokens != TRACE_BLOCK_TOKENS
    for field in FIELDS + (CHAT_FIELDS if bailian else ()):
        if field not in obj:
            raise TraceError(file, line, 1, "", "trace_err_missing_bailian" if bailian else
                             "trace_err_missing", name=field)
    if not bailian and (mixed := next((f for f in CHAT_FIELDS if f in obj), None)):
        raise fail(mixed, "trace_err_mixed")
    ts = obj["timestamp"]
    if type(ts) not in (int, float) or (type(ts) is float and not math.isfinite(ts)) or ts < 0:
        raise fail("timestamp", "trace_err_seconds" if bailian else "trace_err_timestamp",
                   value=_show(ts))
    n, out = obj["input_length"], obj["output_length"]
    for field, v, lo in (("input_length", n, 1), ("output_length", out, 0)):
        if not _is_int(v) or not lo <= v <= MAX_INPUT_LENGTH:
            raise fail(field, "trace_err_length", value=_show(v), lo=lo, hi=f"{MAX_INPUT_LENGTH:,}")
    ids = obj["hash_ids"]
    if type(ids) is not list:
        raise fail("hash_ids", "trace_err_ids_list", value=_show(ids))
    need = -(-n // block_tokens)
    if len(ids) != need:
        raise fail("hash_ids", "trace_err_ids_count", got=len(ids), n=n, need=need, bt=block_tokens)
    for i, h in enumerate(ids):
        if not _is_int(h) or not 0 <= h <= MAX_HASH_ID:
            raise TraceError(file, line, _column(text, "hash_ids"), f"hash_ids[{i}]",
                             "trace_err_id", value=_show(h))
    if not bailian:
        return TraceRequest(ts, n, out, ids, line)
    chat = []
    for field, lo in (("chat_id", 0), ("parent_chat_id", -1), ("turn", 1)):
        v = obj[field]
        if not _is_int(v) or not lo <= v <= MAX_CHAT_ID:
            raise fail(field, "trace_err_length", value=_show(v), lo=lo, hi=f"{MAX_CHAT_ID:,}")
        chat.append(v)
    kind = obj["type"]
    if type(kind) is not str or not kind or len(kind) > 40:
        raise fail("type", "trace_err_type", value=_show(kind))
    return TraceRequest(ts * 1000, n, out, ids, line, block_tokens, Chat(*chat, kind))


_BLKSZ = re.compile(r"blksz_(\d{1,3})(?!\d)")


def trace_block_tokens(obj: dict, file: str) -> int:
    """The tokens one hash id covers, told from the first request (and the file's name)."""
    if not any(f in obj for f in CHAT_FIELDS):
        return TRACE_BLOCK_TOKENS
    m = _BLKSZ.search(os.path.basename(file))
    size = int(m.group(1)) if m else BAILIAN_BLOCK_TOKENS
    if not 1 <= size <= TRACE_BLOCK_TOKENS or TRACE_BLOCK_TOKENS % size:
        raise TraceError(file, None, None, "", "trace_err_blksz", value=size)
    return size


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


def _decode(raw: bytes, file: str, line: int) -> tuple[dict, str] | None:
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
    return obj, text


def iter_trace(source: str | os.PathLike | IO[bytes] | bytes, *, name: str | None = None,
               limit: int | None = None, block_size: int | None = None) -> Iterator[TraceRequest]:
    """The trace's requests in file order, read as a stream. ``source``: a path, a binary file
    object, or the file's bytes; ``name`` is what errors call it (default: the path, or
    ``<trace>``); ``limit``: stop after that many requests; ``block_size``: the replay's, refused
    (located at the first request) when the trace does not allow it."""
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
        block_tokens = None
        for line, raw in _lines(f, file):
            if limit is not None and count >= limit:
                return
            parsed = _decode(raw, file, line)
            if parsed is None:
                continue
            obj, text = parsed
            if block_tokens is None:
                block_tokens = trace_block_tokens(obj, file)
                problem = block_size and block_size_problem(block_size, block_tokens)
                if problem:
                    raise TraceError(file, line, _column(text, "hash_ids"), "hash_ids", problem[0],
                                     **problem[1])
            count += 1
            yield _check(obj, text, file, line, block_tokens)
        if count == 0:
            raise TraceError(file, None, None, "", "trace_err_empty")
    finally:
        if close:
            f.close()


def read_trace(source, *, name: str | None = None, limit: int | None = None) -> list[TraceRequest]:
    """The whole trace as a list (for small traces and tests; a replay streams)."""
    return list(iter_trace(source, name=name, limit=limit))


def check_trace(source, *, name: str | None = None, limit: int | None = None,
                block_size: int | None = None, progress: Callable[[int], None] | None = None) -> dict:
    """Read the whole trace once, checking every line: its size (requests, prompt tokens, hash
    blocks), the tokens one hash id covers, the block sizes it allows and whether its requests
    name their conversations (``chats``: a Qwen-Bailian trace). Raises the first
    :class:`TraceError`. With a ``block_size`` (refused as :func:`iter_trace` refuses it) also
    ``most_blocks``: the most blocks of that size the trace could ever hold — every request's
    prompt and output at once, in any mode. ``progress(line)`` after each request, given that
    request's line number (not a count since the last call, as ``sim``'s progress callbacks)."""
    requests = tokens = blocks = most = 0
    block_tokens = TRACE_BLOCK_TOKENS
    chats = False
    for r in iter_trace(source, name=name, limit=limit, block_size=block_size):
        requests += 1
        tokens += r.input_length
        blocks += len(r.hash_ids)
        block_tokens = r.block_tokens
        chats = chats or r.chat is not None
        if block_size:
            most += -(-(r.input_length + r.output_length) // block_size)
        if progress is not None:
            progress(r.line)
    return {"requests": requests, "prompt_tokens": tokens, "trace_blocks": blocks,
            "block_tokens": block_tokens, "block_sizes": allowed_block_sizes(block_tokens),
            "chats": chats, **({"most_blocks": most} if block_size else {})}


# -- writing ----------------------------------------------------------------------------------
def trace_line(timestamp: float, input_length: int, output_length: int, hash_ids: Iterable[int]) -> str:
    """One request as a line of the format (fields in the format's order, no newline)."""
    return json.dumps({"timestamp": timestamp, "input_length": input_length,
                       "output_length": output_length, "hash_ids": list(hash_ids)})
