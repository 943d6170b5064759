"""`blockviz validate --strict` refuses the teaching-only forms vLLM's scheduler has no equivalent
for; without --strict they are accepted (and marked in the snapshot)."""
from __future__ import annotations

import json

TEXT = """id: t
title: {en: T}
config: {num_blocks: 6, block_size: 4, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3]}
  - arrive: {id: B, prompt: [4, 5, 6]}
  - decode: {requests: [A]}
  - preempt: B
"""


def test_strict_refuses_a_teaching_only_step_with_its_line(tmp_path, cli):
    f = tmp_path / "t.yaml"
    f.write_text(TEXT)
    assert cli("validate", str(f)).returncode == 0
    p = cli("validate", "--strict", str(f))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith(f"{f}:7:")
    assert "steps[2].decode: step 3 (decode) is a teaching-only" in p.stderr


def test_teaching_only_steps_are_marked_in_the_json(tmp_path, cli):
    f = tmp_path / "t.yaml"
    f.write_text(TEXT)
    steps = json.loads(cli("json", str(f)).stdout)["steps"]
    marked = [s["index"] for s in steps if s["event"] and s["event"].get("teaching_only")]
    assert marked == [3, 4]
    (only_a,) = steps[3]["engine_steps"]
    assert only_a["scheduled"] == {"A": 1} and only_a["teaching_only"] is True


def test_every_builtin_lesson_passes_strict(cli, root):
    for f in sorted((root / "scenarios").glob("*.yaml")):
        p = cli("validate", "--strict", str(f))
        assert p.returncode == 0, p.stderr
