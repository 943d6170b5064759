"""A recording, step by step: each batch the subscriber applied is one step.

A recording (``vllm-kv-events-capture/1``) is reduced by what ``blockviz events state`` reduces
it with (:func:`blockviz.live.stream.reduce_file`: messages in arrival order, replays merged by
seq, gaps, restarts), and after every applied batch its step is kept: the batch (rank, seq,
receive time, its events in order), what it changed (hashes stored, the last copy of hashes
removed, a clear), the notes it raised, and the rank's cache afterwards as a snapshot (copies of
the reducer's entries) — what the board draws as the prefix forest. No Streamlit and no HTML
here (:mod:`blockviz.render.replay` draws it).

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
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

from blockviz.i18n import t
from blockviz.live.capture import FORMAT
from blockviz.live.endpoints import env_list, take_flag
from blockviz.live.reducer import Note, Notes, Where
from blockviz.live.stream import reduce_file

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
class BatchStep:
    """One step: the batch applied, what it changed, and the rank's cache afterwards.
    ``groups``: ``(medium, group_idx)`` -> {hash: Entry} in store order (copies, as the step saw
    them: a copy count changes), at most ``max_forest`` hashes in all (the newest); ``hidden``
    counts the older ones left out; ``cached`` is the rank's count of cached hashes."""
    index: int
    rank: int
    seq: int
    t: float | None
    events: tuple
    stored: tuple               # ((medium, group_idx), hash), a copy each
    removed: tuple              # ((medium, group_idx), hash, Entry): the last copy gone
    cleared: bool
    unknown: int                # removals of hashes never seen stored (cached before it began)
    groups: dict
    hidden: int
    cached: int
    notes: tuple[Note, ...]


@dataclass
class Recording:
    name: str
    steps: list[BatchStep]
    batches: int                # batches applied (``steps`` keeps the first max_steps)
    ranks: int
    notes: Notes                # every note of the part read (counted, capped)
    messages: int               # messages read
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


def split_app_args(args: list[str]) -> tuple[list[str], list[str]]:
    """``blockviz app``'s arguments -> (the others, the --recording files as absolute paths).
    ValueError for a --recording without a file, or one that is not a readable file."""
    rest, paths = take_flag(args, "--recording", "a file, e.g. --recording kv.jsonl (blockviz live "
                                                 "ENDPOINT --record kv.jsonl writes one)")
    files = []
    for path in paths:
        p = Path(path).expanduser().resolve()
        if not p.is_file():
            raise ValueError(f"--recording {path}: no such file")
        files.append(str(p))
    if len(files) > MAX_SERVER_FILES:
        raise ValueError(f"at most {MAX_SERVER_FILES} --recording files")
    return rest, files


def server_recordings(env: dict | None = None) -> list[Path]:
    """The recordings the operator started the app with (BLOCKVIZ_RECORDINGS); only those can be
    opened from the server's disk (a page names one by its index, never by a path)."""
    return [Path(v) for v in env_list(ENV, env)[:MAX_SERVER_FILES] if isinstance(v, str)]


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
        src = io.BytesIO(source)
    else:
        src = Path(source)
        name = name or src.name
        size = src.stat().st_size
    if size > max_bytes:
        raise RecordingError("too_large", name, mb=f"{size / (1 << 20):.1f}",
                             limit=f"{max_bytes / (1 << 20):.0f}")
    if size == 0:
        raise RecordingError("empty", name)
    notes = _StepNotes()
    steps: list[BatchStep] = []
    # id(entry) -> (the entry, its snapshot): a snapshot is made again only when the entry's copy
    # count changed (holding the entry keeps its id from naming another)
    frozen: dict[int, tuple[Any, Any]] = {}

    def snap(e):
        got = frozen.get(id(e))
        if got is None or got[0] is not e or got[1].count != e.count:
            got = frozen[id(e)] = (e, replace(e))
        return got[1]

    def on_apply(rs, info, delta) -> None:
        state = rs.state
        if len(steps) >= max_steps:
            notes.take()
            return
        # the newest stores (a dict keeps store order): the last ``max_forest`` of all groups,
        # taken from the end (a step costs ``max_forest``, however many hashes are cached)
        total = sum(len(g) for g in state.groups.values())
        taken: list = []
        left = max_forest
        for key in reversed(list(state.groups)):
            if left <= 0:
                break
            g = state.groups[key]
            if g:
                newest = list(islice(reversed(g.items()), left))
                left -= len(newest)
                taken.append((key, {h: snap(e) for h, e in reversed(newest)}))
        steps.append(BatchStep(
            index=len(steps), rank=info.rank, seq=info.seq, t=info.t, events=tuple(delta.events),
            stored=tuple(delta.stored),
            removed=tuple((key, h, replace(e)) for key, h, e in delta.removed),
            cleared=delta.cleared, unknown=delta.unknown, groups=dict(reversed(taken)),
            hidden=max(0, total - max_forest), cached=state.size, notes=notes.take()))

    red, header, bad_lines = reduce_file(src, notes=notes, on_apply=on_apply,
                                         until=lambda: len(steps) >= max_steps)
    if not steps:
        if header is None and bad_lines and bad_lines[0].line == 1:
            why = bad_lines[0].why
            kind = next((k for prefix, k in WHY if why.startswith(prefix)), None)
            raise RecordingError("not_recording", name, line=1, format=FORMAT,
                                 why=why if kind is None else t(kind, "en"),
                                 why_zh=why if kind is None else t(kind, "zh"))
        first = notes.kept()[0] if notes.total else None
        if first is not None:
            raise RecordingError("no_batch_note", name, line=first.where.line,
                                 note=first.text("en"), note_zh=first.text("zh"))
        raise RecordingError("no_batch", name, format=FORMAT)
    return Recording(name=name, steps=steps, batches=red.batches,
                     ranks=len(red.ranks), notes=notes, messages=red.messages,
                     unread=red.unread)
