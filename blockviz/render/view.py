"""What to draw at one point of a timeline: a step (after its event) or a frame (after one op
inside it) — the pool state, and what changed to get there. Pure: a timeline in, data out."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from blockviz.render.hash_table import table_from_state
from blockviz.render.queue import moved_to_ends
from blockviz.render.requests import popped_blocks
from blockviz.sim.timeline import Timeline, changed_blocks, diff


@dataclass(frozen=True)
class StepView:
    index: int
    frame: int | None            # None: the whole event; else the op index inside it
    num_frames: int
    state: Any                   # Snapshot or Frame: ref_cnt, block_hash, block_tokens, free_queue
    snapshot: Any                # the Snapshot after the event (requests, stats, note, ...)
    changed: frozenset[int]      # blocks whose ref_cnt, hash or tokens changed
    to_head: frozenset[int]
    to_tail: frozenset[int]
    table: tuple                 # ((hash, block ids), ...)
    hashes_added: frozenset[bytes]
    hashes_removed: tuple[bytes, ...]
    fresh: frozenset[int]        # blocks get_new_blocks handed out
    changed_requests: frozenset[str]
    op: tuple | None             # the op of this frame
    prev_ref_cnt: Any = None     # ref counts before it (a card shows ``1→2``)

    @property
    def ops(self) -> tuple:
        return self.snapshot.ops


def step_view(timeline: Timeline, index: int, frame: int | None = None,
              frames: Sequence | None = None) -> StepView:
    """``frames``: ``timeline.frames(index)`` if the caller has it cached."""
    s = timeline.snapshot(index)
    prev = timeline.snapshot(index - 1) if index > 0 else s
    if frame is None:
        d = diff(prev, s)
        head, tail = moved_to_ends(s.ops)
        removed = tuple(h for h, _ in prev.hash_table if h in d.hashes_removed)
        return StepView(index, None, len(s.ops), s, s, d.changed_blocks, head, tail, s.hash_table,
                        d.hashes_added, removed, popped_blocks(s.ops), d.changed_requests, None,
                        prev.ref_cnt)
    frames = timeline.frames(index) if frames is None else frames
    if not frames:
        return StepView(index, 0, 0, s, s, frozenset(), frozenset(), frozenset(), s.hash_table,
                        frozenset(), (), frozenset(), frozenset(), None, s.ref_cnt)
    frame = max(0, min(frame, len(frames) - 1))
    f = frames[frame]
    before = frames[frame - 1] if frame > 0 else prev
    table = table_from_state(f.block_hash, prev.hash_table + s.hash_table)
    old = table_from_state(before.block_hash, prev.hash_table + s.hash_table)
    now_h = {h for h, _ in table}
    old_h = [h for h, _ in old]
    head, tail = moved_to_ends([f.op])
    return StepView(index, frame, len(frames), f, s, changed_blocks(before, f), head, tail, table,
                    frozenset(now_h - set(old_h)), tuple(h for h in old_h if h not in now_h),
                    popped_blocks([f.op]), frozenset(), f.op, before.ref_cnt)
