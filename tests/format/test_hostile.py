"""Hostile input (issue 13): nothing a file says can crash, hang or exhaust the command line.

Every case runs the real CLI in a subprocess limited to 2 GiB of address space and 20 seconds; it
must be refused with exit status 2 and one located line ``FILE:LINE:COL: ...`` on stderr, never a
traceback or a signal (or, for a mutation that is still a valid scenario, run to the end). The
suite keeps one fixed example per family (fast); a property-based run (``slow``) mutates the
built-in lessons with all of them.
"""
from __future__ import annotations

import io
import json
import random
import re
import resource
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from blockviz.scenario import ScenarioError, load_text
from blockviz.scenario.schema import MAX_FILE_BYTES

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "scenarios").glob("*.yaml"))
ADDRESS_SPACE = 2 << 30
TIME_LIMIT_S = 20
H = "id: t\ntitle: t\nconfig: {num_blocks: 6, block_size: 4, model: null}\n"


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def cli(*args: str, timeout: float = TIME_LIMIT_S) -> subprocess.CompletedProcess:
    """``python -m blockviz ARGS`` within 2 GiB of address space and ``timeout`` seconds; stdout
    is thrown away (a `json` may be long), stderr kept."""
    return subprocess.run([sys.executable, "-m", "blockviz", *args], cwd=ROOT, timeout=timeout,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          preexec_fn=_limit, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                                                  "PYTHONPATH": str(ROOT)})


def assert_refused(p: subprocess.CompletedProcess, file: Path) -> str:
    """Exit 2, one line on stderr, located at a line and column of ``file``; the line back."""
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr[-2000:]
    assert re.match(rf"^{re.escape(str(file))}:\d+:\d+: ", lines[0]), lines[0]
    return lines[0]


# -- the families: each a file's bytes ----------------------------------------------------------
def deep_sequence() -> bytes:     # 60 KB; PyYAML's C composer used to recurse into a segfault
    return (H + "steps: " + "[" * 30_000 + "]" * 30_000 + "\n").encode()


def deep_mapping() -> bytes:
    return (H + "steps: " + "{a: " * 30_000 + "1" + "}" * 30_000 + "\n").encode()


CORE_TAGS = ["!!int abc", "!!int 0x", "!!float abc", "!!bool maybe", "!!str 1", "!!null x"]


def core_tag(value: str = "!!int abc") -> bytes:
    return (H + f"steps:\n  - step: {value}\n").encode()


def long_integer(digits: int = 5_000) -> bytes:   # over Python's int-to-str digit limit
    return (H + "steps:\n  - step: " + "9" * digits + "\n").encode()


def malformed_number(value: str = "0x_") -> bytes:   # YAML 1.1 resolves it as an int; int() fails
    return (H + f"steps:\n  - step: {value}\n").encode()


def sexagesimal(size: int = 900_000) -> bytes:  # base-60 int: quadratic to convert
    return (H + "steps:\n  - step: 1" + ":30" * (size // 3) + "\n").encode()


def distinct_words(n: int = 70_000) -> bytes:    # the toy tokenizer's vocabulary is 64,536 words
    words = " ".join(f"w{i}" for i in range(n))
    return (H + f"steps:\n  - arrive: {{id: A, prompt: \"{words}\"}}\n").encode()


def aliased_note(note_bytes: int = 300_000, uses: int = 2_000) -> bytes:
    steps = "".join("  - note: *n\n" for _ in range(uses))
    return (H + f"start_note: &n \"{'x ' * (note_bytes // 2)}\"\nsteps:\n{steps}").encode()


def alias_bomb() -> bytes:
    text = H + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 12):
        text += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n"
    return text.encode()


def same_as_doubling(times: int = 24) -> bytes:  # 25 lines standing for 3.4e10 tokens
    steps = "  - arrive: {id: A0, prompt: [1, 2, 3, 4], admit: false}\n"
    steps += "".join(f"  - arrive: {{id: A{i}, prompt: [{{same_as: A{i - 1}}}, "
                     f"{{same_as: A{i - 1}}}], admit: false}}\n" for i in range(1, times + 1))
    return (H + "steps:\n" + steps).encode()


BARE = ["finish", "arrive", "rewind", "preempt", "checkpoint", "note"]


def bare_event(name: str = "finish") -> bytes:
    return (H + f"steps:\n  - arrive: {{id: A, prompt: [1, 2, 3]}}\n  - {name}\n").encode()


def control_character(char: str = "\x1b") -> bytes:
    return (H + f"steps:\n  - note: a{char}[31m red\n").encode()


def not_utf8() -> bytes:
    return (H + "steps:\n  - note: caf").encode() + b"\xe9\n"


def nul_byte() -> bytes:
    return (H + "steps:\n  - note: a").encode() + b"\x00\n"


FAMILIES = {
    "deep sequence": deep_sequence, "deep mapping": deep_mapping, "core tag": core_tag,
    "long integer": long_integer, "malformed number": malformed_number,
    "sexagesimal": sexagesimal, "distinct words": distinct_words, "aliased note": aliased_note,
    "alias bomb": alias_bomb, "same_as doubling": same_as_doubling, "bare event": bare_event,
    "control character": control_character, "not UTF-8": not_utf8, "NUL byte": nul_byte,
}


# -- one fixed example per family ---------------------------------------------------------------
@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_is_refused_located(tmp_path, family):
    f = tmp_path / "hostile.yaml"
    f.write_bytes(FAMILIES[family]())
    assert len(f.read_bytes()) <= MAX_FILE_BYTES
    assert_refused(cli("validate", str(f)), f)


@pytest.mark.parametrize("value", CORE_TAGS)
def test_core_tags_are_refused_where_they_stand(value):
    with pytest.raises(ScenarioError) as e:
        load_text(core_tag(value).decode(), "f.yaml")
    assert (e.value.line, e.value.col) == (5, 11)
    assert e.value.message == f"YAML tag {value.split()[0]} is not allowed: scenarios are plain data"


@pytest.mark.parametrize("text, line, col, path, message", [
    (long_integer().decode(), 5, 11, "steps[0].step", "a number written with more than 64 characters"),
    (sexagesimal(3_000).decode(), 5, 11, "steps[0].step",
     "a number written with more than 64 characters"),
    (malformed_number("0x_").decode(), 5, 11, "steps[0].step", "cannot read '0x_' as an integer"),
    (malformed_number("0b_").decode(), 5, 11, "steps[0].step", "cannot read '0b_' as an integer"),
    (distinct_words().decode(), 5, 29, "steps[0].arrive.prompt[0].text",
     "more than 64,536 distinct words in the prompts (the toy tokenizer's vocabulary)"),
    (same_as_doubling().decode(), 22, 13, "steps[17].arrive",
     "prompts total more than 1,000,000 tokens"),
    (deep_sequence().decode(), 4, 71, "", "nested more than 64 levels deep"),
    (alias_bomb().decode(), 10, 10, "",
     "the document expands to more than 4,194,304 bytes (aliases repeated too often?)"),
    (control_character().decode(), 5, 12, "", "control character U+001B is not allowed in a scenario "
                                               "file"),
])
def test_what_each_refusal_says_and_where(text, line, col, path, message):
    with pytest.raises(ScenarioError) as e:
        load_text(text, "f.yaml")
    assert (e.value.line, e.value.col, e.value.path, e.value.message) == (line, col, path, message)


def test_aliased_note_is_refused_by_its_size_in_bytes_not_its_count_of_values():
    with pytest.raises(ScenarioError) as e:
        load_text(aliased_note().decode(), "f.yaml")
    assert "expands to more than 4,194,304 bytes" in e.value.message
    # the same note used a few times is fine: only what it stands for in all counts
    load_text(aliased_note(uses=3).decode(), "f.yaml")


def test_an_error_inside_an_aliased_value_is_located_at_the_alias():
    text = H + "steps:\n  - arrive: &a {id: A, prompt: [1, 2]}\n  - finish: A\n  - arrive: *a\n"
    with pytest.raises(ScenarioError) as e:
        load_text(text, "f.yaml")
    assert (e.value.line, e.value.col, e.value.path) == (7, 13, "steps[2].arrive.id")
    assert e.value.message == "duplicate request id 'A'"


def test_a_doubling_chain_within_the_limit_still_loads():
    load_text(same_as_doubling(times=10).decode(), "f.yaml")   # 4 * 2**10 tokens


def test_scripted_output_counts_through_same_as():
    out = ",".join(["1"] * 400_000)
    text = (H + f"steps:\n  - arrive: {{id: A, prompt: [1], output: [{out}], admit: false}}\n"
            + "".join(f"  - arrive: {{id: {c}, prompt: [{{same_as: A}}], admit: false}}\n"
                      for c in "BCD"))
    with pytest.raises(ScenarioError) as e:
        load_text(text, "f.yaml")
    assert e.value.path == "steps[3].arrive" and "1,000,000 tokens" in e.value.message
    load_text(text.replace("same_as: A}", "same_as: A, first: 1}"), "f.yaml")  # first: counted as 1


@pytest.mark.parametrize("name", BARE)
def test_bare_events_that_need_an_argument_are_errors(name):
    with pytest.raises(ScenarioError) as e:
        load_text(bare_event(name).decode(), "f.yaml")
    assert (e.value.line, e.value.path) == (6, "steps[1]")
    assert e.value.message.startswith(f"`{name}` needs an argument, e.g. `- {name}")
    with pytest.raises(ScenarioError):   # and with an empty value
        load_text(bare_event(name).decode().replace(f"- {name}\n", f"- {name}:\n"), "f.yaml")


@pytest.mark.parametrize("raw, line, col, words", [
    (not_utf8(), 5, 14, "not UTF-8"),
    (nul_byte(), 5, 12, "binary"),
    (b"\xef\xbb\xbfid: \xff\n", 1, 5, "not UTF-8"),   # a BOM is not a column
    (H.encode() + b"steps:\n  - note: \xe4\xb8\xad\x07\n", 5, 12, "U+0007"),
])
def test_encoding_and_control_character_errors_are_located(raw, line, col, words):
    from blockviz.scenario import load_bytes
    with pytest.raises(ScenarioError) as e:
        load_bytes(raw, "f.yaml")
    assert (e.value.line, e.value.col) == (line, col), str(e.value)
    assert words in e.value.message


@pytest.mark.parametrize("text, line, col, words", [
    (H + "steps:\n  - note: ab\ud83d\n", 5, 13, "U+D83D (half a surrogate pair)"),
    (H + "steps:\n  - note: a\x9b31m\n", 5, 12, "control character U+009B"),
    (H + "steps:\n  - note: a\ufffe\n", 5, 12, "control character U+FFFE"),
    (H + "a: &x 1\nb: &x 2\n", 5, 4, "found duplicate anchor 'x'"),
])
def test_odd_characters_in_a_text_are_located(text, line, col, words):
    with pytest.raises(ScenarioError) as e:
        load_text(text, "f.yaml")
    assert (e.value.line, e.value.col) == (line, col) and words in e.value.message, str(e.value)


def test_an_oversize_text_says_its_size_and_the_limit_in_both_languages():
    with pytest.raises(ScenarioError) as e:
        load_text("# " + "x" * MAX_FILE_BYTES, "<pasted>")
    assert e.value.message == "the text is 1,048,578 bytes; the limit is 1,048,576 (1 MiB)"
    assert e.value.localized("zh") == "<pasted>: 文本有 1,048,578 字节，上限是 1,048,576 字节（1 MiB）"


def test_keys_and_ids_cannot_break_the_error_line():
    with pytest.raises(ScenarioError) as e:
        load_text(H + '"a\\nb\\e[2J": 1\n', "f.yaml")
    line = str(e.value)
    assert "\n" not in line and "\x1b" not in line and "a\\x0ab\\x1b[2J" in line


def test_play_shows_control_characters_in_notes_and_ids_as_escapes(tmp_path):
    f = tmp_path / "esc.yaml"
    f.write_text(H + 'steps:\n  - note: "\\e]0;owned\\a\\e[31mred"\n'
                 '  - arrive: {id: "\\e[41mX", prompt: "w\\e[2J 2 3"}\n'
                 '  - finish: "\\e[41mX"\n')
    p = subprocess.run([sys.executable, "-m", "blockviz", "play", str(f), "--no-color"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", p.stdout)
    assert "\\x1b]0;owned\\x07\\x1b[31mred" in p.stdout and "\\x1b[41mX arrives" in p.stdout
    assert "w\\x1b[2J" in p.stdout


# -- blockviz json: streamed, byte for byte what it was ----------------------------------------
def _eager(path: Path, indent: int | None, frames: bool = True) -> str:
    """The contract as ``json`` wrote it before streaming: the whole document, then json.dump."""
    from blockviz.scenario import load
    from blockviz.sim.contract import timeline_dict
    from blockviz.sim.runner import run
    loaded = load(path)
    engine, timeline = run(loaded)
    out = io.StringIO()
    json.dump(timeline_dict(loaded.scenario.id, engine, timeline, frames=frames), out,
              ensure_ascii=False, indent=indent)
    return out.getvalue() + "\n"


def _streamed(*argv: str) -> tuple[int, str, str]:
    from blockviz.cli import main
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("lesson", ["six-blocks", "external-tier"])
@pytest.mark.parametrize("indent", [None, 2])
def test_json_streams_byte_for_byte_what_it_built_before(lesson, indent):
    path = ROOT / "scenarios" / f"{lesson}.yaml"
    argv = ["json", str(path)] + ([] if indent is None else ["--indent", str(indent)])
    rc, out, _ = _streamed(*argv)
    assert rc == 0 and out == _eager(path, indent)


@pytest.mark.slow
@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_json_streams_every_lesson_byte_for_byte(path):
    for indent, frames in ((None, True), (1, True), (None, False)):
        argv = ["json", str(path)] + ([] if indent is None else ["--indent", str(indent)])
        rc, out, _ = _streamed(*argv, *([] if frames else ["--no-frames"]))
        assert rc == 0 and out == _eager(path, indent, frames), (path.name, indent, frames)


def test_json_writes_the_first_step_before_making_the_next(monkeypatch):
    """One step at a time: the snapshot of step k+1 is asked for only after step k is written."""
    from blockviz.sim import contract
    from blockviz.sim.timeline import Timeline
    written: list[int] = []
    asked: list[tuple[int, int]] = []
    real = Timeline.step

    def step(self, i, frame=None):
        asked.append((i, len(written)))
        return real(self, i, frame)

    monkeypatch.setattr(Timeline, "step", step)
    original = contract.write_json

    def write_json(write, value, indent=None, on_item=None):
        def counting(s: str) -> None:
            written.append(len(s))
            write(s)
        return original(counting, value, indent, on_item)

    monkeypatch.setattr(contract, "write_json", write_json)
    rc, out, _ = _streamed("json", str(ROOT / "scenarios" / "six-blocks.yaml"), "--no-payloads")
    assert rc == 0
    pieces = [n for i, n in asked]
    assert pieces == sorted(pieces) and len(set(pieces)) == len(pieces)  # output between each


def test_running_out_of_memory_while_writing_json_is_a_located_error(monkeypatch):
    from blockviz.sim import contract
    real = contract.step_dict

    def failing(s, frames, **kw):
        if s.index == 3:
            raise MemoryError
        return real(s, frames, **kw)

    monkeypatch.setattr(contract, "step_dict", failing)
    path = ROOT / "scenarios" / "six-blocks.yaml"
    rc, _, err = _streamed("json", str(path), "--no-payloads")
    assert rc == 2 and "Traceback" not in err
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+:\d+: steps\[2\]\.\w+: step 3 \(\w+\): ran out "
                        rf"of memory while writing its JSON\n", err), err


def test_running_out_of_memory_during_the_run_is_a_located_error(monkeypatch):
    from blockviz.sim.engine import Engine
    real = Engine.apply
    calls = [0]

    def apply(self, step):
        calls[0] += 1
        if calls[0] == 4:
            raise MemoryError
        return real(self, step)

    monkeypatch.setattr(Engine, "apply", apply)
    path = ROOT / "scenarios" / "six-blocks.yaml"
    rc, _, err = _streamed("json", str(path), "--no-payloads")
    assert rc == 2 and re.match(rf"{re.escape(str(path))}:\d+:\d+: steps\[3\]\.\w+: step 4 \(\w+\): "
                                rf"ran out of memory\n", err), err


# -- the property-based run ---------------------------------------------------------------------
def _mutations(draw) -> tuple[str, bytes]:
    """A built-in lesson with one hostile change drawn from the families above, or line noise."""
    lesson = draw(st.sampled_from(LESSONS))
    lines = lesson.read_text(encoding="utf-8").splitlines(keepends=True)
    first_step = next(i for i, ln in enumerate(lines) if ln.startswith("steps:")) + 1
    kind = draw(st.sampled_from(["insert step"] * 3 + ["replace value"] * 2 + ["line noise", "bytes"]))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    if kind == "insert step":
        snippet = draw(st.sampled_from([
            "  - " + "[" * 20_000 + "]" * 20_000 + "\n",
            "  - " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n",
            *(f"  - step: {v}\n" for v in CORE_TAGS),
            "  - step: " + "9" * 5_000 + "\n",
            "  - step: 1" + ":30" * 250_000 + "\n",
            "  - step: 0x_\n",
            f"  - arrive: {{id: W, prompt: \"{' '.join(f'w{i}' for i in range(70_000))}\"}}\n",
            *(f"  - {name}\n" for name in BARE),
            "  - note: a\x1b[31m\n",
            "  - arrive: {id: Z0, prompt: [1, 2], admit: false}\n" + "".join(
                f"  - arrive: {{id: Z{i}, prompt: [{{same_as: Z{i - 1}}}, {{same_as: Z{i - 1}}}], "
                f"admit: false}}\n" for i in range(1, 25)),
            "  - note: &big \"" + "y " * 150_000 + "\"\n" + "  - note: *big\n" * 1_000,
        ]))
        at = rng.randrange(first_step, len(lines) + 1)
        # between two steps (a line that starts one), or at the end
        while at < len(lines) and not lines[at].startswith("  - "):
            at += 1
        text = "".join(lines[:at]) + snippet + "".join(lines[at:])
        return f"{lesson.stem}: insert at {at + 1}: {snippet[:40]!r}", text.encode()
    if kind == "replace value":
        i = rng.randrange(len(lines))
        value = draw(st.sampled_from(["!!int abc", "!!bool maybe", "9" * 5_000, "0b_", "*nowhere",
                                      "&a [*a]", "[" * 5_000, "\"\\e[2J\"", "", "~", "-1",
                                      "1" + ":00" * 1000, "{" * 100 + "}" * 100]))
        line = re.sub(r":( .*)?$", lambda m: ": " + value, lines[i].rstrip("\n"), count=1) + "\n"
        return f"{lesson.stem}: line {i + 1} := {value[:20]!r}", "".join(
            lines[:i] + [line] + lines[i + 1:]).encode()
    if kind == "line noise":
        out = list(lines)
        for _ in range(draw(st.integers(1, 4))):
            op, i = rng.choice(["drop", "dup", "swap", "indent"]), rng.randrange(len(out))
            if op == "drop" and len(out) > 1:
                del out[i]
            elif op == "dup":
                out.insert(i, out[i])
            elif op == "swap":
                j = rng.randrange(len(out))
                out[i], out[j] = out[j], out[i]
            else:
                out[i] = " " + out[i]
        return f"{lesson.stem}: line noise", "".join(out).encode()
    raw = bytearray("".join(lines).encode())
    for _ in range(draw(st.integers(1, 6))):
        raw[rng.randrange(len(raw))] = rng.choice([0, 7, 0x1B, 0x7F, 0x80, 0xC3, 0xFF, ord("["),
                                                   ord("{"), ord("&"), ord("*"), ord("!")])
    return f"{lesson.stem}: bytes", bytes(raw)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_lessons_are_refused_located_or_run_to_the_end(tmp_path, data):
    what, raw = _mutations(data.draw)
    f = tmp_path / "mutated.yaml"
    f.write_bytes(raw)
    assert len(raw) <= MAX_FILE_BYTES, what
    p = cli("json", str(f), "--no-payloads")
    event(what.split(": ", 1)[1][:24])   # --hypothesis-show-statistics: what was drawn
    if p.returncode != 0:
        refusal = assert_refused(p, f)
        event("refused: " + re.sub(r"^\S+:\d+:\d+: (\S+: )?", "", refusal)[:30])
    else:
        event("ran to the end")
        assert p.stderr == "", (what, p.stderr[-2000:])


def test_running_out_of_memory_anywhere_else_is_one_line_not_a_traceback(monkeypatch, tmp_path):
    from blockviz import cli as C
    f = tmp_path / "x.yaml"
    f.write_text(H)

    def out_of_memory(loaded):
        raise MemoryError

    monkeypatch.setattr(C, "_load", lambda path: out_of_memory(path))
    rc, _, err = _streamed("validate", str(f))
    assert rc == 2 and err == f"{f}: ran out of memory\n"
