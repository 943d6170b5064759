"""The README stays true: its two commands exist and are what CI runs, its `play` sample is the
real output, and every file it (or a document it links) names can be opened in the repository."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]


def test_the_two_commands_are_there_and_ci_runs_the_test_one():
    text = README.read_text(encoding="utf-8")
    block = text[text.index("## Two commands"):]
    assert "bin/app " in block and "bin/test " in block
    for name in ("app", "test", "setup"):
        assert os.access(ROOT / "bin" / name, os.X_OK), name
    assert "exec bin/test" in (ROOT / ".ci" / "run").read_text()
    assert len(text.splitlines()) < 150                      # a newcomer reads it in two minutes


def test_the_play_sample_is_the_real_output():
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- play six-blocks step (\d+) -->\n```text\n(.*?)\n```", text, re.S)
    assert m, "the README's play sample has lost its marker"
    step = int(m.group(1))
    out = subprocess.run([sys.executable, "-m", "blockviz", "play", "six-blocks", "--no-color"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    parts = re.split(r"(?m)^(?=── step \d+ of \d+ )", out)
    (real,) = [p.rstrip("\n") for p in parts if p.startswith(f"── step {step} of ")]
    assert m.group(2) == real, f"the README's play sample is stale; the real output is:\n{real}"


def _links(path: Path) -> list[tuple[str, Path]]:
    text = path.read_text(encoding="utf-8")
    out = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target) or target.startswith("#"):
            continue
        out.append((target, (path.parent / target.split("#", 1)[0]).resolve()))
    return out


def test_every_linked_file_is_in_the_repository():
    for doc in DOCS:
        for target, where in _links(doc):
            assert where.exists() and where.is_relative_to(ROOT), f"{doc.name}: {target}"


def test_no_name_a_reader_cannot_open():
    """No machine paths, nothing from the team's shared workspace, no design notes outside the
    repository named as if a reader had them."""
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for bad in ("/work/", "shared/tools", "shared/design", "design/ui.md", "vllm-semantics.md",
                    "../shared", "~/.cache"):
            assert bad not in text, f"{doc.name} names {bad}"
        for code in re.findall(r"`((?:blockviz|tests|bench|scenarios|docs|bin)/[^`\s]*)`", text):
            path = code.split("::")[0].rstrip(".,;:")
            if "*" in path or "{" in path or path.startswith("bench/reports/"):   # a run's output
                continue
            assert (ROOT / path).exists(), f"{doc}: `{code}` is not in the repository"
