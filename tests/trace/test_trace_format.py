"""Reading Mooncake-format traces: the fields, the token ids derived from hash ids, and every kind
of bad line refused as one located line (``FILE:LINE:COL: field: message``), in both languages."""
from __future__ import annotations

import io
import json

import pytest
from trace_helpers import write, write_trace

from blockviz.scenario import trace as T


def line(**fields) -> str:
    base = {"timestamp": 5, "input_length": 600, "output_length": 3, "hash_ids": [4, 9]}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...})


def test_a_trace_reads_request_by_request(tmp_path):
    path = write(tmp_path / "t.jsonl", [(512, [0]), (1024, [0, 1]), (13, [7])])
    path.write_text(path.read_text() + "\n   \n")            # blank lines are skipped
    reqs = T.read_trace(path)
    assert [(r.input_length, r.hash_ids, r.line) for r in reqs] == [
        (512, [0], 1), (1024, [0, 1], 2), (13, [7], 3)]
    assert T.read_trace(path, limit=2)[-1].line == 2
    assert T.check_trace(path) == {"requests": 3, "prompt_tokens": 1549, "trace_blocks": 4,
                                   "block_tokens": 512,
                                   "block_sizes": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
                                   "chats": False}


def test_other_fields_are_ignored_and_floats_are_times():
    text = line(timestamp=1.5, extra="x") + "\n"
    (r,) = T.read_trace(text.encode())
    assert r.timestamp == 1.5 and r.input_length == 600
    (r,) = T.read_trace((line(timestamp=10**400) + "\n").encode())   # too big for a float: fine
    assert r.timestamp == 10**400


def test_token_ids_derive_from_hash_ids_as_the_reference_replay_does():
    # block j with hash id h holds h*512 .. h*512+511; the last block only its first n - 512*(k-1)
    toks = T.prompt_token_ids(600, [4, 9])
    assert len(toks) == 600
    assert toks[:3] == [2048, 2049, 2050] and toks[511] == 4 * 512 + 511
    assert toks[512:] == list(range(9 * 512, 9 * 512 + 88))


def test_writing_and_reading_round_trip():
    buf = io.StringIO()
    write_trace([(0, 600, 3, [4, 9]), (10, 1, 0, [2])], buf)
    assert buf.getvalue().splitlines()[0] == (
        '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [4, 9]}')
    assert [r[:4] for r in T.read_trace(buf.getvalue().encode())] == [(0, 600, 3, [4, 9]),
                                                                      (10, 1, 0, [2])]


@pytest.mark.parametrize("bs", [1, 16, 64, 512])
def test_block_sizes_dividing_512_are_accepted(bs):
    T.check_block_size(bs)


@pytest.mark.parametrize("bs", [0, 3, 48, 1024, True])
def test_other_block_sizes_are_refused(bs):
    with pytest.raises(ValueError, match="does not divide"):
        T.check_block_size(bs)


# (line text, the location and message it must give: "COL: field: message fragment")
BAD = {
    "not JSON": ('{"timestamp": 0,', "17: not a JSON object: Expecting property name"),
    "a list": ("[1, 2]", "1: a line must be one JSON object"),
    "missing": ('{"timestamp": 0, "input_length": 5}', "1: missing field 'output_length'"),
    "bool length": (line(input_length=True), "input_length: true is not allowed"),
    "float length": (line(input_length=600.0), "input_length: 600.0 is not allowed"),
    "zero length": (line(input_length=0, hash_ids=[]), "input_length: 0 is not allowed"),
    "too long": (line(input_length=T.MAX_INPUT_LENGTH + 1, hash_ids=[1] * 2049),
                 "input_length: 1048577 is not allowed"),
    "negative output": (line(output_length=-1), "output_length: -1 is not allowed"),
    "string time": (line(timestamp="noon"), 'timestamp: "noon" is not a time'),
    "negative time": (line(timestamp=-3), "timestamp: -3 is not a time"),
    "NaN time": (line(timestamp=float("nan")), "timestamp: NaN is not a time"),
    "ids not a list": (line(hash_ids={"a": 1}), 'hash_ids: {"a": 1} is not a list of hash ids'),
    "too few ids": (line(hash_ids=[4]), "hash_ids: 1 hash ids, but input_length 600 needs 2"),
    "too many ids": (line(input_length=512, hash_ids=[4, 9]), "hash_ids: 2 hash ids, but input_length 512"),
    "negative id": (line(hash_ids=[4, -9]), "hash_ids[1]: -9 is not a hash id"),
    "float id": (line(hash_ids=[4.0, 9]), "hash_ids[0]: 4.0 is not a hash id"),
    "huge id": (line(hash_ids=[4, 2**60]), "hash_ids[1]: 1152921504606846976 is not a hash id"),
    "huge number": ('{"timestamp": ' + "9" * 5000 + "}", "1: a number with too many digits"),
    "deep nesting": ("[" * 100_000, "1: JSON nested too deeply"),
    "two objects": (line() + " {}", "not a JSON object: Extra data"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_line_is_one_located_line(tmp_path, case):
    text, want = BAD[case]
    path = tmp_path / "t.jsonl"
    path.write_text(line() + "\n\n" + text + "\n" + line() + "\n")
    with pytest.raises(T.TraceError) as e:
        T.read_trace(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:3:") and "\n" not in msg, msg
    assert want in msg, msg
    if want.split(":")[0].isdigit():    # a column given: it is the one reported
        assert msg.startswith(f"{path}:3:{want.split(':')[0]}:")
    zh = e.value.localized("zh")
    assert zh.startswith(f"{path}:3:") and "\n" not in zh
    assert zh != msg                     # translated (names and values stay as they are)


def test_a_field_error_points_at_its_field(tmp_path):
    text = line(output_length="x")
    with pytest.raises(T.TraceError) as e:
        T.read_trace((text + "\n").encode(), name="f.jsonl")
    col = text.index('"output_length"') + 1
    assert str(e.value).startswith(f"f.jsonl:1:{col}: output_length:")


def test_file_level_problems(tmp_path, monkeypatch):
    with pytest.raises(T.TraceError, match=r"^nope\.jsonl: cannot read the file: No such file"):
        T.read_trace(tmp_path / "nope.jsonl", name="nope.jsonl")
    with pytest.raises(T.TraceError, match="not a regular file"):
        T.read_trace(tmp_path)
    with pytest.raises(T.TraceError, match="the trace has no requests"):
        T.read_trace(b"\n \n")
    with pytest.raises(T.TraceError, match=r"^<trace>:2:2: the line is not UTF-8 text"):
        T.read_trace((line() + "\n{\xff}\n").encode("latin-1"))
    monkeypatch.setattr(T, "MAX_LINE_BYTES", 100)
    with pytest.raises(T.TraceError, match=r"^<trace>:2:1: the line is longer than 100 bytes"):
        T.read_trace((line() + "\n" + line(hash_ids=[1] * 40) + "\n").encode())
    monkeypatch.setattr(T, "MAX_TRACE_BYTES", 150)
    with pytest.raises(T.TraceError, match=r"^<trace>:2: the trace is larger than 150 bytes"):
        T.read_trace(("\n".join([line()] * 5) + "\n").encode())


def test_reading_streams(tmp_path):
    """A line past a bad one is never read: the requests before it come out first."""
    path = tmp_path / "t.jsonl"
    path.write_text(line() + "\n" + "{bad\n")
    it = T.iter_trace(path)
    assert next(it).line == 1
    with pytest.raises(T.TraceError, match=":2:"):
        next(it)


def test_an_error_crosses_processes_intact():
    import pickle
    try:
        T.read_trace(b'{"timestamp": 0}\n', name="x.jsonl")
    except T.TraceError as e:
        back = pickle.loads(pickle.dumps(e))
        assert str(back) == str(e) and back.localized("zh") == e.localized("zh")
