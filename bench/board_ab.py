"""``python -m bench.board_ab FIRST SECOND [REPEAT]``: → to painted step at 4,096 blocks, two trees
side by side in one run, in the slot order given (page loads taking turns: FIRST, SECOND, FIRST ...).

Each tree is a checkout (``.`` for this one, or e.g. ``git worktree add --detach /tmp/old REV``),
served by this venv's Python. On a shared machine the slot order shows in the figures, so run it
both ways. Prints each tree's median and worst (``bench board``'s ``KEY_TO_PAINT``, 40 keys a page
load, REPEAT loads a tree, default 3) and the second tree's median over the first's.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from .board import BIG, _chromium, _scenario_dir, _server, _side_by_side


def main(argv: list[str]) -> int:
    first, second = (Path(a).resolve() for a in argv[:2])
    repeat = int(argv[2]) if len(argv) > 2 else 3
    from playwright.sync_api import sync_playwright
    with tempfile.TemporaryDirectory(prefix="bench-board-ab-") as d, sync_playwright() as p:
        _scenario_dir(Path(d), BIG)
        servers = {"old": _server(Path(d), first), "new": _server(Path(d), second)}
        try:
            browser = p.chromium.launch(executable_path=_chromium())
            out = _side_by_side(browser, servers, 40, repeat, False)
        finally:
            servers["new"].close()
    for slot, tree in (("old", first), ("new", second)):
        print(f"{tree}: median {out[slot]['median']:.1f} ms, worst {out[slot]['worst']:.1f} ms "
              f"({out[slot]['n']} keys)")
    print(f"second / first: {out['ratio_median']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
