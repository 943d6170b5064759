"""Export for slides (blockviz.export, ``python -m blockviz export``): the HTML document holds
every step, escapes everything a scenario says and reaches for no network; the CLI fails with one
located line and exit 2."""
from __future__ import annotations

import json
import re

import pytest

from blockviz.export import MAX_HTML_STEPS, ExportError, export_html
from blockviz.scenario import load
from blockviz.sim.runner import run

HOSTILE = "tests/render/scenarios/hostile.yaml"


@pytest.fixture(scope="module")
def six(root):
    loaded = load(root / "scenarios" / "six-blocks.yaml")
    return loaded, run(loaded)[1]


def board_of(doc: str) -> dict:
    """The board's data and what the page tells it (its control), as one mapping."""
    m = re.search(r'<script type="application/json" id="bv-data">(.*?)</script>', doc, flags=re.S)
    assert m, "no board data in the document"
    sent = json.loads(m.group(1))
    return sent["board"] | sent["control"]


def step_text(d: dict, lang: str, k: int) -> str:
    return "\n".join(d["strings"][i] for i in d["steps"][lang][k - d["lo"]].values())


def test_the_html_is_the_board_with_every_step_and_opens_at_the_start_step(six):
    loaded, tl = six
    doc = export_html(tl, title="Six blocks, one prefix", lang="en", start=4, file="six-blocks.yaml")
    d = board_of(doc)
    assert (d["num_steps"], d["lo"], d["hi"]) == (9, 0, 8) and d["goto"]["step"] == 4
    assert d["url"] == "hash" and d["langs"] == ["en", "zh"] and d["lang"] == "en"
    queues = [re.search(r'data-queue="([^"]*)"', step_text(d, "en", k)).group(1) for k in range(9)]
    assert [k for k, q in enumerate(queues) if q == "4 3 5 6 2 1"] == [4, 5, 7]
    assert "step 4 of 8" in step_text(d, "en", 4) and "第 4 步 / 共 8 步" in step_text(d, "zh", 4)
    assert "B finishes; its table is freed in reverse" in step_text(d, "en", 4)        # the note
    assert "free_blocks (table reversed): blocks 4, 2, 1" in step_text(d, "en", 4)     # what it did
    assert "function board(component)" in doc and "ArrowRight" in doc                  # the board


def test_the_html_is_self_contained(six):
    _, tl = six
    doc = export_html(tl, lang="zh", file="six.yaml")
    assert doc.startswith("<!DOCTYPE html>") and '<html lang="zh-CN">' in doc
    assert "default-src 'none'" in doc                                 # CSP: no network at all
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', doc)
    assert "<link" not in doc and "@import" not in doc and "url(http" not in doc
    d = board_of(doc)
    assert d["lang"] == "zh" and "第 0 步 / 共 8 步" in step_text(d, "zh", 0)
    assert d["ui"]["zh"]["nav_prev"] == "上一步" and d["ui"]["zh"]["free_queue"] == "空闲队列"


def test_everything_from_the_file_is_escaped_in_the_html(root):
    loaded = load(root / HOSTILE)
    _, tl = run(loaded)
    doc = export_html(tl, title=loaded.scenario.title.get("en"), lang="en", file="<x>.yaml")
    # the data cannot close its script element, and every panel string is escaped HTML
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", doc, flags=re.S)
    assert len(scripts) == 3 and "alert" not in scripts[0] and "alert" not in scripts[2]
    d = board_of(doc)
    panels = "\n".join(d["strings"])
    assert "<script>alert" not in panels and "<img" not in panels and "<b>R</b>" not in panels
    assert "&lt;script&gt;alert(&#x27;title&#x27;)&lt;/script&gt; Hostile" in doc
    assert "&lt;b&gt;R&lt;/b&gt;" in panels and "&lt;x&gt;.yaml" in doc


def test_too_many_steps_or_a_step_out_of_range_is_an_export_error(six, monkeypatch):
    _, tl = six
    with pytest.raises(ExportError, match=r"^f.yaml: step 9 is out of range: this scenario has steps "
                                          r"0 to 8$"):
        export_html(tl, start=9, file="f.yaml")
    with pytest.raises(ExportError, match="out of range"):
        export_html(tl, start=-1, file="f.yaml")
    monkeypatch.setattr("blockviz.export.MAX_HTML_STEPS", 5)
    with pytest.raises(ExportError, match="too many for one HTML file"):
        export_html(tl, file="f.yaml")
    assert MAX_HTML_STEPS >= 1000


# -- the command line (in-process: ``main`` is what ``python -m blockviz`` runs) -------------
def export(capsys, *args: str) -> tuple[int, str, str]:
    from blockviz.cli import main
    rc = main(["export", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_export_html(capsys, monkeypatch, root, tmp_path):
    monkeypatch.chdir(root)
    out = tmp_path / "six.html"
    rc, stdout, stderr = export(capsys, "scenarios/six-blocks.yaml", "--step", "3", "--lang", "zh",
                                "-o", str(out))
    assert rc == 0, stderr
    assert stdout.strip() == str(out)
    doc = out.read_text(encoding="utf-8")
    d = board_of(doc)
    assert d["goto"]["step"] == 3 and "第 3 步 / 共 8 步" in step_text(d, "zh", 3)
    assert "six-blocks.yaml" in doc


@pytest.mark.parametrize("args, message", [
    (["tests/render/scenarios/nope.yaml"], r"^tests/render/scenarios/nope.yaml: cannot read the file"),
    (["scenarios/six-blocks.yaml", "--step", "9"],
     r"^scenarios/six-blocks.yaml: step 9 is out of range: this scenario has steps 0 to 8$"),
    (["scenarios/six-blocks.yaml", "--step", "-1", "--format", "png"], r"step -1 is out of range"),
    (["tests/render/scenarios/stops-early.yaml"], r"^tests/render/scenarios/stops-early.yaml:\d+:\d+: "),
])
def test_cli_export_errors_are_one_line_and_exit_2(capsys, monkeypatch, root, tmp_path, args, message):
    monkeypatch.chdir(root)
    rc, _, stderr = export(capsys, *args, "-o", str(tmp_path / "x.out"))
    assert rc == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and re.search(message, lines[0]), stderr
    assert not (tmp_path / "x.out").exists()


def test_cli_export_a_bad_file_is_located(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\ntitle: x\nsteps:\n  - finish: Z\n", encoding="utf-8")
    rc, _, stderr = export(capsys, str(bad), "--format", "png", "-o", str(tmp_path / "x.png"))
    assert rc == 2
    assert stderr.strip() == f"{bad}:4:13: steps[0].finish: request 'Z' is used before it arrives"


def test_cli_export_png_without_chromium_says_so(cli, tmp_path):
    """The board's PNG (headless Chromium), pointed at a browser that is not there: a clear
    message, exit 2, no traceback (a real process: what a user runs)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, BLOCKVIZ_CHROMIUM=str(tmp_path / "no-chromium"))
    r = subprocess.run([sys.executable, "-m", "blockviz", "export", "scenarios/six-blocks.yaml",
                        "--step", "1", "--format", "png", "-o", str(tmp_path / "x.png")],
                       capture_output=True, text=True, env=env, timeout=180,
                       cwd=os.path.dirname(os.path.dirname(__file__)))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "PNG export needs Chromium" in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "x.png").exists()
