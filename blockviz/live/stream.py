"""A stream of received messages -> batches in seq order -> the cache state, with every problem
noted where it happened.

vLLM's publisher numbers its batches 0, 1, 2, ... (per process: a restart starts again at 0, and
nothing else in the stream says so). PUB/SUB drops what a subscriber was not there for, so:

- a first live seq above 0 means the subscriber joined late: it asks the replay socket from 0
  (when there is one) and holds the live batches until the replay ends;
- a live seq that skips ahead is a gap: the same, from the first missing seq;
- replayed batches are merged by seq, each applied once; what the replay did not return (its
  buffer keeps the last ``buffer_steps`` batches, and a request from an evicted seq silently
  starts at the oldest kept one) is lost, and listed;
- a live seq that does not go up is a new publisher (an engine restart): the state starts over.

One :class:`Sequencer` per data-parallel rank (each rank is its own engine, with its own seqs).
A recording is reduced by feeding its messages in arrival order, exactly as they arrived live.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from blockviz.live.capture import CaptureReader, Received
from blockviz.live.reducer import (
    CANNOT_KNOW,
    MAX_HASHES,
    MAX_TOKENS_PER_HASH,
    CacheState,
    Delta,
    Notes,
    Where,
)
from blockviz.live.wire import WireError, decode_payload, parse_frames

MAX_PENDING = 10_000          # batches held while a replay is awaited (vLLM's buffer_steps default)
MAX_MISSING_RANGES = 1_000
HISTORY = 3_600               # per-batch counters kept for rates (an hour at one batch a second)
RECENT_REMOVED = 64


class Sequencer:
    """Orders one publisher's batches by seq. Each method returns actions, in order:
    ``("apply", seq, item)``, ``("gap", first, last)`` (missing now, a replay may fill it),
    ``("lost", first, last)`` (missing for good), ``("restart", last_seq, new_seq)``,
    ``("dup", seq)``. ``request`` is set to the seq a replay should be asked from; the caller
    takes it (and sets it back to None)."""

    def __init__(self, *, replay: bool, max_pending: int = MAX_PENDING) -> None:
        self.replay = replay
        self.max_pending = max_pending
        self.next: int | None = None
        self.last_live: int | None = None
        self.pending: dict[int, Any] = {}
        self.awaiting = False
        self.request: int | None = None
        self._replay_hi: int | None = None      # the highest seq the current replay returned
        self._asked_again = False

    def live(self, seq: int, item: Any) -> list[tuple]:
        out: list[tuple] = []
        if self.last_live is not None and seq <= self.last_live:
            out += self.flush()
            out.append(("restart", self.last_live, seq))
            self.next = self.last_live = None
            self.awaiting, self.request = False, None
        self.last_live = seq
        if self.next is None and not self.awaiting:
            if seq == 0:
                self.next = 0
            elif self.replay:
                self.pending[seq] = item
                self.awaiting, self.request = True, 0
                return out + [("gap", 0, seq - 1)]
            else:
                out += [("gap", 0, seq - 1), ("lost", 0, seq - 1)]
                self.next = seq
        if self.next is not None and seq < self.next:
            return out + [("dup", seq)]
        if not self.awaiting and seq == self.next:
            self.next += 1
            return out + [("apply", seq, item)]
        self.pending.setdefault(seq, item)
        if not self.awaiting:
            out.append(("gap", self.next, seq - 1))
            if self.replay:
                self.awaiting, self.request = True, self.next
            else:
                out += self.flush()
        elif len(self.pending) > self.max_pending:
            out += self.flush()
        return out

    def from_replay(self, seq: int, item: Any) -> list[tuple]:
        out = self.flush() if len(self.pending) >= self.max_pending else []
        if self._replay_hi is None or seq > self._replay_hi:
            self._replay_hi = seq
        if self.next is None and seq == 0:
            self.next = 0
        if (self.next is not None and seq < self.next) or seq in self.pending:
            out.append(("dup", seq))
        else:
            self.pending[seq] = item
        return out + (self._drain() if self.next is not None else [])

    def expect_replay(self) -> None:
        """A replay was asked for before any gap showed (at start): hold live batches until it
        ends, so that they apply after what it returns."""
        self.awaiting = True

    def replay_end(self) -> list[tuple]:
        """The end marker: what the replay did not return is lost, unless the hole opened after
        the replay was asked for (a live batch dropped while it ran): then it is asked once more."""
        hi, self._replay_hi = self._replay_hi, None
        out = self._drain() if self.next is not None else []
        nxt = 0 if self.next is None else self.next
        if (self.pending and min(self.pending) > nxt and (hi is None or nxt > hi)
                and not self._asked_again):
            self._asked_again, self.request = True, nxt
            return out + [("gap", nxt, min(self.pending) - 1)]
        return out + self.flush()

    def _drain(self) -> list[tuple]:
        out = []
        while self.next in self.pending:
            out.append(("apply", self.next, self.pending.pop(self.next)))
            self.next += 1
        return out

    def flush(self) -> list[tuple]:
        """Apply what is held, in seq order, what lies between lost: when no more replay is coming
        (it timed out, the recording ended) or holding must stop (a restart, too much held)."""
        out = []
        for seq in sorted(self.pending):
            nxt = 0 if self.next is None else self.next
            if seq > nxt:
                out.append(("lost", nxt, seq - 1))
            out.append(("apply", seq, self.pending.pop(seq)))
            self.next = seq + 1
        self.awaiting = self._asked_again = False
        self._replay_hi = None
        return out


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """One applied batch, for counters and rates: when it arrived (its ``ts`` when a recording
    has no receive time), its rank and seq, and what it did."""
    t: float
    rank: int
    seq: int
    stored: int
    removed: int
    cleared: bool


@dataclass
class RankState:
    seq: Sequencer
    state: CacheState
    batches: int = 0
    events: int = 0
    restarts: int = 0
    missing: deque = field(default_factory=lambda: deque(maxlen=MAX_MISSING_RANGES))
    missing_count: int = 0
    recent_removed: deque = field(default_factory=lambda: deque(maxlen=RECENT_REMOVED))


class Reduction:
    """Received messages in, the state of every rank out. ``feed`` returns the replays to ask
    for, as ``(rank, from_seq)``. ``on_apply(rank_state, batch_info, delta)`` is called after
    each batch."""

    def __init__(self, *, replay: bool, max_hashes: int = MAX_HASHES,
                 max_tokens_per_hash: int = MAX_TOKENS_PER_HASH, max_pending: int = MAX_PENDING,
                 history: int = HISTORY, notes: Notes | None = None,
                 on_apply: Callable[[RankState, BatchInfo, Delta], None] | None = None) -> None:
        self.replay = replay
        self.notes = Notes() if notes is None else notes
        self.ranks: dict[int, RankState] = {}
        self._limits = {"max_hashes": max_hashes, "max_tokens_per_hash": max_tokens_per_hash}
        self._max_pending = max_pending
        self.history: deque[BatchInfo] = deque(maxlen=history)
        self.on_apply = on_apply
        self.messages = 0
        self.skipped = 0          # messages that could not be read at all
        self.gaps = 0
        self.duplicates = 0
        self.unread = 0           # messages after the input was cut short: counted, not decoded

    def rank(self, r: int) -> RankState:
        rs = self.ranks.get(r)
        if rs is None:
            rs = self.ranks[r] = RankState(Sequencer(replay=self.replay,
                                                     max_pending=self._max_pending),
                                           CacheState(notes=self.notes, **self._limits))
        return rs

    # -- input -----------------------------------------------------------------------------------
    def feed(self, rec: Received, rank_hint: int | None = None) -> list[tuple[int, int]]:
        self.messages += 1
        where = Where(message=rec.index, src=rec.src, line=rec.line)
        try:
            m = parse_frames(rec.frames)
            if m.seq >= 0:
                where = replace(where, seq=m.seq)
                batch, problems = decode_payload(m.payload)
        except WireError as e:
            self.skipped += 1
            self.notes.add(e.kind, where, detail=e.detail)
            return []
        if m.seq < 0:
            if m.end and rec.src == "replay":
                for r, rs in self._replay_targets(rank_hint):
                    self._act(r, rs, rs.seq.replay_end())
                return self._requests()
            self.skipped += 1
            self.notes.add("bad_seq", where, seq=m.seq)
            return []
        rank = batch.data_parallel_rank or 0
        if rank:
            where = replace(where, rank=rank)
        for p in problems:
            self.notes.add(p.kind, replace(where, event=p.index), detail=p.detail)
        rs = self.rank(rank)
        item = (batch, where, rec.t)
        actions = (rs.seq.live(m.seq, item) if rec.src == "sub"
                   else rs.seq.from_replay(m.seq, item))
        self._act(rank, rs, actions)
        return self._requests()

    def _requests(self) -> list[tuple[int, int]]:
        out = []
        for r, rs in self.ranks.items():
            if rs.seq.request is not None:
                out.append((r, rs.seq.request))
                rs.seq.request = None
        return out

    def _replay_targets(self, rank_hint: int | None):
        if rank_hint is not None:
            return [(rank_hint, self.rank(rank_hint))]
        return [(r, rs) for r, rs in self.ranks.items() if rs.seq.awaiting or rs.seq.pending]

    def replay_failed(self, rank: int, why: str, **fields) -> None:
        """The replay of ``rank`` did not end (a timeout, too many replies): apply what is held."""
        rs = self.rank(rank)
        self.notes.add(why, Where(rank=rank or None), **fields)
        self._act(rank, rs, rs.seq.flush())

    def finish(self) -> None:
        """The input ended: apply whatever still waits for a replay."""
        for r, rs in self._replay_targets(None):
            self._act(r, rs, rs.seq.flush())

    # -- actions ---------------------------------------------------------------------------------
    def _act(self, rank: int, rs: RankState, actions: list[tuple]) -> None:
        for a in actions:
            kind = a[0]
            if kind == "apply":
                self._apply(rank, rs, a[1], a[2])
            elif kind == "gap":
                self.gaps += 1
                kind = "late_join" if a[1] == 0 and rs.batches == 0 else "gap"
                self.notes.add(kind if self.replay else f"{kind}_no_replay",
                               Where(seq=a[2] + 1, rank=rank or None), first=a[1], last=a[2],
                               seen=a[2] + 1)
            elif kind == "lost":
                rs.missing.append((a[1], a[2]))
                rs.missing_count += a[2] - a[1] + 1
                if self.replay:      # without a replay socket the gap's note says it all
                    self.notes.add("lost", Where(rank=rank or None), first=a[1], last=a[2])
            elif kind == "restart":
                rs.restarts += 1
                self.notes.add("restart", Where(seq=a[2], rank=rank or None), last=a[1])
                rs.state = CacheState(notes=self.notes, **self._limits)
                rs.recent_removed.clear()
            elif kind == "dup":
                self.duplicates += 1

    def _apply(self, rank: int, rs: RankState, seq: int, item) -> None:
        batch, where, t = item
        delta = rs.state.apply_batch(seq, batch.events, where)
        rs.batches += 1
        rs.events += len(batch.events)
        for key, h, e in delta.removed:
            rs.recent_removed.append((seq, key, h, e))
        info = BatchInfo(t if t is not None else batch.ts, rank, seq, len(delta.stored),
                         len(delta.removed), delta.cleared)
        self.history.append(info)
        if self.on_apply is not None:
            self.on_apply(rs, info, delta)

    # -- output ----------------------------------------------------------------------------------
    @property
    def batches(self) -> int:
        return sum(rs.batches for rs in self.ranks.values())

    @property
    def events(self) -> int:
        return sum(rs.events for rs in self.ranks.values())

    def cached(self) -> int:
        return sum(rs.state.size for rs in self.ranks.values())

    def report(self) -> dict:
        """The JSON of ``blockviz events state --json``: rank 0's (or the only rank's) state at
        the top; with several ranks, every rank's under ``ranks``."""
        ranks = sorted(self.ranks) or [0]
        top = self._rank_report(ranks[0])
        out = {**top, "messages": self.messages, "skipped_messages": self.skipped,
               "notes": [n.text("en") for n in self.notes.kept()],
               "note_counts": dict(self.notes.counts),
               "cannot_know": list(CANNOT_KNOW)}
        if self.notes.dropped:
            out["notes_dropped"] = self.notes.dropped
        if len(ranks) > 1:
            out["ranks"] = {str(r): self._rank_report(r) for r in ranks}
        return out

    def _rank_report(self, r: int) -> dict:
        rs = self.ranks.get(r) or self.rank(r)
        missing: list[int] = []
        for a, b in rs.missing:
            if len(missing) + (b - a + 1) > 10_000:
                break
            missing.extend(range(a, b + 1))
        st = rs.state
        return {"caches": st.caches(), "batches": rs.batches, "events": rs.events,
                "missing_seqs": missing, "missing_count": rs.missing_count,
                "restarts": rs.restarts, "cleared": st.cleared,
                "unknown_removals": st.unknown_removals,
                "counters": {"stored": st.stored, "removed": st.removed, "cleared": st.cleared},
                "data_parallel_rank": r}


def reduce_file(path, *, until: Callable[[], bool] | None = None,
                **kw) -> tuple[Reduction, dict | None, list]:
    """A recording (a path, or a binary file object) reduced: (the reduction, the header, the lines
    skipped). Replayed batches are awaited only when the recording's subscriber had a replay
    socket. ``until()``, asked after each message, cuts the reading short (the messages left are
    counted as ``unread``; what waits for a replay then waits on: its replay may be among them)."""
    reader = CaptureReader(path)
    header = reader.header or {}
    red = Reduction(replay=bool(header.get("replay")), **kw)
    messages = iter(reader)
    for rec in messages:
        red.feed(rec)
        if until is not None and until():
            red.unread = sum(1 for _ in messages)
            break
    else:
        red.finish()
    for bad in reader.bad_lines:
        red.notes.add("bad_line", Where(line=bad.line), detail=bad.why)
    return red, reader.header, reader.bad_lines

