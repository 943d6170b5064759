"""Malformed scenario files: every kind gets a one-line, located message (FILE:LINE:COL: path:
message), exit status 2 from the CLI, never a traceback — within seconds and bounded memory."""
from __future__ import annotations

import re
import tracemalloc

import pytest

from blockviz.scenario import ScenarioError, load, load_bytes, load_text
from blockviz.scenario.schema import MAX_FILE_BYTES

GOOD = """\
id: t
title: {en: T, zh: T}
config: {num_blocks: 6, block_size: 4, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4, 5], max_tokens: 1}
  - arrive: {id: B, prompt: [{same_as: A, first: 4}, {text: "hello world"}]}
  - finish: B
"""
LOCATED = re.compile(r"^f\.yaml:(\d+):(\d+): ")


def error_of(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as e:
        load_text(text, "f.yaml")
    msg = str(e.value)
    assert "\n" not in msg, "an error is one line"
    return e.value


def test_good_file_loads():
    s = load_text(GOOD, "f.yaml").scenario
    assert [st.kind for st in s.steps] == ["arrive", "arrive", "finish"]


@pytest.mark.parametrize("text, line, col, path, words", [
    ("id: t\ntitle: t\nsteps:\n  - arrive: {id: A, prompt: [1, x]}\n", 4, 33,
     "steps[0].arrive.prompt[0].tokens[1]", "valid integer"),
    ("id: t\ntitle: t\nsteps: [fly]\n", 3, 9, "steps[0]", "unknown event 'fly'"),
    ("id: t\ntitle: t\nsteps:\n  - finish: A\n", 4, 13, "steps[0].finish",
     "used before it arrives"),
    ("id: t\ntitle: t\nconfig: {num_blocks: 6, bogus: 1}\n", 3, 25, "config.bogus",
     "unknown field 'bogus'"),
    ("id: t\ntitle: t\nconfig: {num_blocks: -1}\n", 3, 22, "config.num_blocks", "greater than"),
    ("id: t\ntitle: t\nconfig: {num_blocks: 999999999}\n", 3, 22, "config.num_blocks",
     "less than"),
    ("id: t\ntitle: t\nconfig: {block_size: 5000}\n", 3, 22, "config.block_size", "less than"),
    ("id: t\ntitle: t\nsteps:\n  - arrive: {id: A, prompt: [{random: 100000000}]}\n", 4, 39,
     "steps[0].arrive.prompt[0].random", "less than"),
    ("id: t\ntitle: t\nsteps:\n  - arrive: {id: A, prompt: [1]}\n  - arrive: {id: A, prompt: [2]}\n",
     5, 18, "steps[1].arrive.id", "duplicate request id 'A'"),
    ("id: t\ntitle: t\nsteps:\n  - rewind: nowhere\n", 4, 13, "steps[0].rewind",
     "unknown checkpoint 'nowhere'"),
    ("id: t\ntitle: t\nsteps:\n  - {finish: A, preempt: A}\n", 4, 5, "steps[0]",
     "one event per step"),
    ("id: t\ntitle: t\nsteps:\n  - arrive: {id: A, prompt: [70000]}\n", 4, 30,
     "steps[0].arrive.prompt[0].tokens[0]", "less than 65536"),
    ("id: t\ntitle: t\nsteps:\n  - decode: {steps: 0}\n", 4, 21, "steps[0].decode.steps",
     "greater than"),
    ("id: t\ntitle: t\nsteps:\n  - arrive: {id: A, prompt: [1], mm: [{id: x, offset: 0, length: 3},"
     " {id: y, offset: 2, length: 2}]}\n", 4, 38, "steps[0].arrive.mm", "overlap"),
    ("id: t\nsteps: []\n", 1, 1, "title", "missing required field 'title'"),
    ("[1, 2\n", 2, 1, "", "YAML syntax error"),
    ("id: t\nid: u\ntitle: t\n", 2, 1, "id", "duplicate key 'id'"),
])
def test_located_errors(text, line, col, path, words):
    err = error_of(text)
    assert (err.line, err.col) == (line, col), str(err)
    assert err.path == path, str(err)
    assert words in err.message, str(err)
    assert LOCATED.match(str(err))


@pytest.mark.parametrize("text", [
    "a: !!python/object/apply:os.system ['echo pwned']\n",
    "a: !!python/object:collections.OrderedDict {}\n",
    "a: !!python/name:os.system\n",
    "id: t\ntitle: !custom x\n",
    "id: !!binary aGVsbG8=\ntitle: t\n",
])
def test_yaml_tags_are_refused(text):
    err = error_of(text)
    assert "YAML tag" in err.message and "not allowed" in err.message
    assert err.line is not None


def test_alias_bomb_is_refused_in_bounded_memory():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 12):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        bomb += f"{cur}: &{cur} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, " \
                f"*{prev}, *{prev}, *{prev}]\n"
    tracemalloc.start()
    err = error_of(bomb)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "expands to more than" in err.message
    assert peak < 400 * 2**20                 # 10**12 nodes expanded would not fit in any memory


def test_deep_nesting_is_refused():
    err = error_of("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested" in err.message or "deep" in err.message


@pytest.mark.parametrize("raw, words", [
    (b"", "empty"),
    (b"   \n\n# only a comment\n", "empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    (b"id: t\ntitle: \xff\xfe\n", "not UTF-8"),
    (b"x" * (MAX_FILE_BYTES + 1), "limit"),
])
def test_unreadable_files(raw, words):
    with pytest.raises(ScenarioError) as e:
        load_bytes(raw, "f.yaml")
    assert words in str(e.value)
    assert str(e.value).startswith("f.yaml")


def test_not_a_mapping():
    assert "mapping" in error_of("- 1\n- 2\n").message


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read"):
        load(tmp_path / "nope.yaml")
    with pytest.raises(ScenarioError, match="not a regular file"):
        load(tmp_path)


def test_limits_on_totals():
    steps = "".join(f"  - arrive: {{id: R{i}, prompt: [{{random: 900000}}]}}\n" for i in range(2))
    err = error_of("id: t\ntitle: t\nsteps:\n" + steps)
    assert "1,000,000 tokens" in err.message and err.path == "steps[1].arrive"


def test_kv_store_size_is_bounded():
    err = error_of("id: t\ntitle: t\nconfig: {num_blocks: 65536, block_size: 1024, "
                   "model: {num_layers: 8, num_kv_heads: 16, head_dim: 128}}\n")
    assert "GiB" in err.message and "model: null" in err.message


def test_bare_and_empty_event_forms_are_equivalent():
    a = load_text("id: t\ntitle: t\nsteps: [admit, {admit: }, {admit: {}}, reset_prefix_cache]\n")
    assert [s.kind for s in a.scenario.steps] == ["admit"] * 3 + ["reset_prefix_cache"]


def test_rewind_forgets_requests_that_arrived_after_the_checkpoint():
    text = ("id: t\ntitle: t\nsteps:\n  - checkpoint: c\n  - arrive: {id: A, prompt: [1]}\n"
            "  - rewind: c\n  - finish: A\n")
    err = error_of(text)
    assert err.path == "steps[3].finish" and err.line == 7
    # ...and an id undone by a rewind may arrive again
    load_text("id: t\ntitle: t\nsteps:\n  - checkpoint: c\n  - arrive: {id: A, prompt: [1]}\n"
              "  - rewind: c\n  - arrive: {id: A, prompt: [2]}\n")


# -- runtime errors: an event the reached state does not allow --------------------------------
def run_text(text):
    from blockviz.sim.runner import run
    return run(load_text(text, "f.yaml"), payloads=False)


def test_preempting_a_waiting_request_stops_the_run_at_that_step():
    text = ("id: t\ntitle: t\nconfig: {num_blocks: 2, model: null}\nsteps:\n"
            "  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}\n"
            "  - preempt: A\n  - finish: A\n")
    engine, tl = run_text(text)
    assert len(tl) == 2  # start + the arrival; the run stopped at step 2
    err = tl.error
    assert (err.line, err.col, err.path) == (6, 14, "steps[1].preempt")
    assert "step 2" in err.message and "waiting" in err.message


def test_finishing_a_request_max_tokens_already_finished():
    text = ("id: t\ntitle: t\nconfig: {model: null}\nsteps:\n"
            "  - arrive: {id: A, prompt: [1, 2, 3], max_tokens: 1}\n  - finish: A\n")
    _, tl = run_text(text)
    assert tl.error.path == "steps[1].finish" and "already finished" in tl.error.message


def test_same_as_beyond_the_source_tokens():
    text = ("id: t\ntitle: t\nconfig: {model: null}\nsteps:\n"
            "  - arrive: {id: A, prompt: [1, 2, 3], admit: false}\n"
            "  - arrive: {id: B, prompt: [{same_as: A, first: 9}]}\n")
    _, tl = run_text(text)
    assert tl.error.path == "steps[1].arrive" and "first 9 tokens" in tl.error.message


def test_restart_needs_every_request_finished():
    text = ("id: t\ntitle: t\nconfig: {model: null}\nsteps:\n"
            "  - arrive: {id: A, prompt: [1, 2, 3]}\n  - restart\n")
    _, tl = run_text(text)
    assert tl.error.path == "steps[1].restart" and "A" in tl.error.message


# -- the CLI: exit status 2, one line on stderr, never a traceback -----------------------------
@pytest.mark.parametrize("content, command", [
    ("id: t\ntitle: t\nsteps: [fly]\n", "validate"),
    ("a: !!python/object/apply:os.system ['true']\n", "json"),
    ("id: t\ntitle: t\nconfig: {model: null}\nsteps:\n  - arrive: {id: A, prompt: [1, 2, 3], "
     "max_tokens: 1}\n  - finish: A\n", "json"),
    ("id: t\ntitle: t\nconfig: {model: null}\nsteps:\n  - arrive: {id: A, prompt: [1, 2, 3], "
     "max_tokens: 1}\n  - finish: A\n", "play"),
    ("", "validate"),
])
def test_cli_exit_status_2_without_traceback(tmp_path, cli, content, command):
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    p = cli(command, str(f))
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(str(f))


def test_cli_binary_and_missing_files(tmp_path, cli):
    f = tmp_path / "bin.yaml"
    f.write_bytes(bytes(range(256)) * 4)
    for target in (f, tmp_path / "missing.yaml"):
        p = cli("validate", str(target))
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
