"""A recording, step by step: each batch the subscriber applied is one step (issue 30).

A recording (``vllm-kv-events-capture/1``) is reduced exactly as ``blockviz events state`` reduces
it (:func:`blockviz.live.stream.reduce_file`: messages in arrival order, replays merged by seq,
gaps, restarts), and after every applied batch its step is kept: the batch (rank, seq, receive
time, its events in order), what it changed (hashes stored, the last copy of hashes removed, a
clear), the notes it raised, and the rank's cache afterwards as a snapshot — what the board draws
as the prefix forest. No Streamlit and no HTML here (:mod:`blockviz.render.replay` draws it).

Bounded: the bytes read (``max_bytes``), the steps kept (``max_steps``: the first ones; the
messages after them are counted, not decoded) and the hashes a step's snapshot keeps
(``max_forest`` per rank, the newest stores; the rest is counted); ``bench replay`` times a
recording at the limit. A file that yields no batch at all is refused with a located reason
(:class:`RecordingError`, in English and 中文); one that yields some plays, its skipped lines
and messages listed as notes.
"""
from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from blockviz.i18n import t
from blockviz.live.capture import FORMAT, CaptureReader
from blockviz.live.reducer import Note, Notes, Where
from blockviz.live.stream import Reduction

MAX_BYTES = 8 << 20           # a recording read whole (the app's upload limit too)
MAX_STEPS = 1_000             # steps kept; a longer recording is counted past them
MAX_FOREST = 200              # hashes a step's snapshot keeps per rank (the newest stores)
MAX_STEP_NOTES = 12           # notes kept per step
ENV = "BLOCKVIZ_RECORDINGS"   # the recordings `blockviz app --recording FILE` offers (a JSON list)
MAX_SERVER_FILES = 16


# what capture.CaptureReader says of a bad first line -> its words (i18n)
WHY = (("not JSON", "rp_why_json"), ("not a message line", "rp_why_frames"))


class RecordingError(ValueError):
    """A file that is not a recording that can be played: ``key`` and ``fields`` say why (i18n
    ``rp_err_<key>``), ``file`` and ``line`` where."""

    def __init__(self, key: str, file: str, line: int | None = None, **fields) -> None:
        self.key, self.file, self.line, self.fields = key, file, line, fields
        super().__init__(self.localized("en"))

    def localized(self, lang: str) -> str:
        where = self.file + (t("rp_at_line", lang, n=self.line) if self.line is not None else "")
        return f"{where}{'：' if lang == 'zh' else ': '}{t('rp_err_' + self.key, lang, **self.fields)}"


@dataclass(frozen=True, slots=True)
class Cached:
    """One cached hash as a step saw it (the reducer's Entry, frozen: its copy count changes)."""
    parent: Any
    tokens: Any                 # array | tuple | None (unknown)
    count: int
    block_size: int
    lora_name: str | None
    extra_keys: Any
    kind: str | None
    seq: int | None
    chain_known: bool


@dataclass(frozen=True, slots=True)
class BatchStep:
    """One step: the batch applied, what it changed, and the rank's cache afterwards.
    ``groups``: ``(medium, group_idx)`` -> {hash: Cached} in store order, at most ``max_forest``
    hashes in all (the newest); ``hidden`` counts the older ones left out; ``cached`` is the
    rank's count of cached hashes."""
    index: int
    rank: int
    seq: int
    t: float | None
    events: tuple
    stored: tuple               # ((medium, group_idx), hash), a copy each
    removed: tuple              # ((medium, group_idx), hash, Cached): the last copy gone
    cleared: bool
    unknown: int                # removals of hashes never seen stored (cached before it began)
    groups: dict
    hidden: int
    cached: int
    notes: tuple[Note, ...]


@dataclass
class Recording:
    name: str
    header: dict | None
    steps: list[BatchStep]
    batches: int                # batches applied (``steps`` keeps the first max_steps)
    ranks: int
    notes: Notes                # every note of the part read (counted, capped)
    messages: int               # messages read
    skipped: int                # messages that could not be read at all
    unread: int = 0             # messages after the steps were full: not decoded


class _StepNotes(Notes):
    """Notes that also remember the ones added since the last step was taken."""

    def __init__(self) -> None:
        super().__init__()
        self.since: list[Note] = []

    def add(self, kind: str, where: Where, **fields) -> None:
        super().add(kind, where, **fields)
        if len(self.since) < MAX_STEP_NOTES:
            self.since.append(Note(kind, where, fields))

    def take(self) -> tuple[Note, ...]:
        out, self.since = tuple(self.since), []
        return out


def _frozen(e) -> Cached:
    return Cached(e.parent, e.tokens, e.count, e.block_size, e.lora_name, e.extra_keys, e.kind,
                  e.seq, e.chain_known)


def split_app_args(args: list[str]) -> tuple[list[str], list[str]]:
    """``blockviz app``'s arguments -> (the others, the --recording files as absolute paths).
    ValueError for a --recording without a file, or one that is not a readable file."""
    rest, files, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a == "--recording" or a.startswith("--recording="):
            if a == "--recording":
                if i + 1 >= len(args):
                    raise ValueError("--recording needs a file, e.g. --recording kv.jsonl "
                                     "(blockviz live ENDPOINT --record kv.jsonl writes one)")
                path, i = args[i + 1], i + 2
            else:
                path, i = a.split("=", 1)[1], i + 1
            p = Path(path).expanduser().resolve()
            if not p.is_file():
                raise ValueError(f"--recording {path}: no such file")
            files.append(str(p))
            continue
        rest.append(a)
        i += 1
    if len(files) > MAX_SERVER_FILES:
        raise ValueError(f"at most {MAX_SERVER_FILES} --recording files")
    return rest, files


def server_recordings(env: dict | None = None) -> list[Path]:
    """The recordings the operator started the app with (BLOCKVIZ_RECORDINGS); only those can be
    opened from the server's disk (a page names one by its index, never by a path)."""
    raw = (os.environ if env is None else env).get(ENV)
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    return [Path(v) for v in value[:MAX_SERVER_FILES] if isinstance(v, str)]


def is_recording(path: str | Path) -> bool:
    """Whether a file given to a command is meant as a recording: its name ends in ``.jsonl``, or
    its first line is a recording's header (read at most 64 KiB of it)."""
    p = Path(path)
    if p.suffix.lower() == ".jsonl":
        return True
    try:
        with open(p, "rb") as f:
            first = f.readline(1 << 16)
    except OSError:
        return False
    if not first.lstrip().startswith(b'{"header"'):
        return False
    try:
        head = json.loads(first).get("header")
    except (ValueError, AttributeError):
        return False
    return isinstance(head, dict) and head.get("format") == FORMAT


def read_recording(source: str | Path | bytes, *, name: str | None = None,
                   max_bytes: int | None = None, max_steps: int | None = None,
                   max_forest: int | None = None) -> Recording:
    """A recording's steps: ``source`` is a file's path or its bytes (an upload; ``name`` is
    what messages call it). RecordingError when it is too large or yields no batch. The limits
    default to the module's (MAX_BYTES, MAX_STEPS, MAX_FOREST)."""
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    max_steps = MAX_STEPS if max_steps is None else max_steps
    max_forest = MAX_FOREST if max_forest is None else max_forest
    if isinstance(source, (bytes, bytearray)):
        name = name or "recording"
        size = len(source)
        opened = io.BytesIO(source)
    else:
        path = Path(source)
        name = name or path.name
        size = path.stat().st_size
        opened = None
    if size > max_bytes:
        raise RecordingError("too_large", name, mb=f"{size / (1 << 20):.1f}",
                             limit=f"{max_bytes / (1 << 20):.0f}")
    if size == 0:
        raise RecordingError("empty", name)
    reader = CaptureReader(opened if opened is not None else path)
    header = reader.header
    notes = _StepNotes()
    red = Reduction(replay=bool((header or {}).get("replay")))
    red.notes = notes
    steps: list[BatchStep] = []
    # id(entry) -> (the entry, its snapshot): a snapshot is made again only when the entry's copy
    # count changed (holding the entry keeps its id from naming another)
    frozen: dict[int, tuple[Any, Cached]] = {}
    unknown_before: dict[int, tuple] = {}          # rank -> (its state, its unknown removals)

    def snap(e) -> Cached:
        got = frozen.get(id(e))
        if got is None or got[0] is not e or got[1].count != e.count:
            got = frozen[id(e)] = (e, _frozen(e))
        return got[1]

    def on_apply(rank: int, seq: int, delta) -> None:
        rs = red.ranks[rank]
        state = rs.state
        if len(steps) >= max_steps:
            notes.take()
            return
        was_state, was = unknown_before.get(rank, (None, 0))
        unknown = state.unknown_removals - (was if was_state is state else 0)
        unknown_before[rank] = (state, state.unknown_removals)
        keep = max_forest
        # the newest stores (a dict keeps store order): the last ``keep`` of all groups, taken
        # from the end (a step costs ``keep``, however many hashes are cached)
        total = sum(len(g) for g in state.groups.values())
        taken: list = []
        left = keep
        for key in reversed(list(state.groups)):
            if left <= 0:
                break
            g = state.groups[key]
            if g:
                newest = list(islice(reversed(g.items()), left))
                left -= len(newest)
                taken.append((key, {h: snap(e) for h, e in reversed(newest)}))
        groups = dict(reversed(taken))
        info = red.history[-1] if red.history else None
        steps.append(BatchStep(
            index=len(steps), rank=rank, seq=seq, t=info.t if info is not None else None,
            events=tuple(delta.events), stored=tuple(delta.stored),
            removed=tuple((key, h, _frozen(e)) for key, h, e in delta.removed),
            cleared=delta.cleared, unknown=unknown, groups=groups, hidden=max(0, total - keep),
            cached=state.size,
            notes=notes.take()))

    red.on_apply = on_apply
    messages = iter(reader)
    for rec in messages:
        red.feed(rec)
        if len(steps) >= max_steps:
            break
    unread = sum(1 for _ in messages)     # (counted, not decoded)
    red.finish()
    lines = [b.line for b in reader.bad_lines]
    for bad in reader.bad_lines:
        notes.add("bad_line", Where(line=bad.line), detail=bad.why)
    if not steps:
        if header is None and lines and lines[0] == 1:
            why = reader.bad_lines[0].why
            kind = next((k for prefix, k in WHY if why.startswith(prefix)), None)
            raise RecordingError("not_recording", name, line=1, format=FORMAT,
                                 why=why if kind is None else t(kind, "en"),
                                 why_zh=why if kind is None else t(kind, "zh"))
        first = notes.kept()[0] if notes.total else None
        if first is not None:
            raise RecordingError("no_batch_note", name, line=first.where.line,
                                 note=first.text("en"), note_zh=first.text("zh"))
        raise RecordingError("no_batch", name, format=FORMAT)
    return Recording(name=name, header=header, steps=steps, batches=red.batches,
                     ranks=len(red.ranks), notes=notes, messages=red.messages, skipped=red.skipped,
                     unread=unread)
