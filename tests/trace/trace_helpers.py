"""Shared by the trace tests: writing small traces, and where the shared reference material is."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO

from blockviz.scenario.trace import trace_line

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, requests: list[tuple[int, list[int]]] | list[dict]) -> Path:
    """A Mooncake-format file from (input_length, hash_ids) pairs (timestamps 0, 1, ...)."""
    lines = []
    for i, r in enumerate(requests):
        if isinstance(r, dict):
            lines.append(json.dumps(r))
        else:
            n, ids = r
            lines.append(json.dumps({"timestamp": i, "input_length": n, "output_length": 1,
                                     "hash_ids": ids}))
    path.write_text("\n".join(lines) + "\n")
    return path


def write_trace(requests, f: IO[str]) -> int:
    """Write (timestamp, input_length, output_length, hash_ids, ...) tuples as JSON Lines; the
    number of lines written."""
    n = 0
    for r in requests:
        f.write(trace_line(*r[:4]) + "\n")
        n += 1
    return n


def shared_dir() -> Path | None:
    """The project's shared reference folder (``$BLOCKVIZ_SHARED``, else ``../shared`` from the
    checkout or from a worktree beside it), or None: CI's clean clone has none."""
    candidates = [os.environ.get("BLOCKVIZ_SHARED")] if os.environ.get("BLOCKVIZ_SHARED") else []
    candidates += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
    for c in candidates:
        if c and (Path(c) / "tools" / "vllm-diff").is_dir():
            return Path(c)
    return None


def random_trace(rng, n: int, bs: int, *, repeat: float = 0.3, cut: float = 0.5, fresh_cut: float = 0.3,
                 longest: tuple[int, ...] = (2, 3, 6)) -> list:
    """Small seeded traces whose prefixes recur: a few roots branching at random depths, repeats of
    earlier requests (some cut to a whole number of blocks of ``bs``: cached last blocks, hence
    duplicates) and requests of very different sizes (hence rejections at small pools)."""
    from blockviz.scenario.trace import TraceRequest
    out, seen = [], []
    for i in range(n):
        if seen and rng.random() < repeat:
            ids, length = rng.choice(seen)
            if rng.random() < cut and length >= bs:
                length -= length % bs
        else:
            k = rng.randint(1, rng.choice(longest))
            ids = [rng.choice([0, 1]) if j == 0 else rng.choice([j, j + 1, 100 + i]) for j in range(k)]
            length = (k - 1) * 512 + rng.randint(1, 512)
            if rng.random() < fresh_cut:
                length = max(bs, length - length % bs)
            seen.append((ids, length))
        out.append(TraceRequest(i, length, 1, ids[:-(-length // 512)], i + 1))
    return out
