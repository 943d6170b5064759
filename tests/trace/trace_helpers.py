"""Shared by the trace tests: writing small traces, and where the shared reference material is."""
from __future__ import annotations

import json
import os
from pathlib import Path

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


def shared_dir() -> Path | None:
    """The project's shared reference folder (``$BLOCKVIZ_SHARED``, else ``../shared`` from the
    checkout or from a worktree beside it), or None: CI's clean clone has none."""
    candidates = [os.environ.get("BLOCKVIZ_SHARED")] if os.environ.get("BLOCKVIZ_SHARED") else []
    candidates += [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
    for c in candidates:
        if c and (Path(c) / "tools" / "vllm-diff").is_dir():
            return Path(c)
    return None
