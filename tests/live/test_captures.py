"""Every capture of vLLM 0.33.0's real publisher decodes, and the state after every batch is the
reference decoder's (its ``*.decoded.txt``): hashes in store order, copy counts, parents, tokens,
LoRA, extra keys."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from blockviz.live.capture import CaptureReader, CaptureWriter
from blockviz.live.reducer import short_hex
from blockviz.live.stream import Reduction
from blockviz.live.wire import decode_payload, encode_batch, parse_frames

HERE = Path(__file__).resolve().parent
CAPTURES = HERE / "captures"
DECODED = sorted(CAPTURES.glob("*.decoded.txt"))


def shared_captures() -> Path | None:
    for base in (HERE.parents[2] / "shared", HERE.parents[3] / "shared"):
        d = base / "data" / "vllm-kv-events"
        if d.is_dir():
            return d
    return None


BATCH = re.compile(r"^\[(sub|replay)\] seq (-?\d+) ")
ENTRY = re.compile(r"^\s+([0-9a-f]{16})( x(\d+))? <- (root|[0-9a-f]{16})( \(not cached\))?"
                   r"  tokens (\[[^\]]*\])( lora=(\S+))?( extra_keys=(.*))?$")
GROUP = re.compile(r"^\s+(\w+) group (\d+): \d+ cached hash\(es\)$")


def parse_decoded(path: Path) -> list[tuple[int, dict]]:
    """[(seq, {"GPU/0": [(hash16, count, parent16|None, tokens, lora, extra_keys)]})] per batch."""
    out, state, group, in_state = [], None, None, False
    for line in path.read_text().splitlines():
        m = BATCH.match(line)
        if m:
            state, in_state = {}, False
            out.append((int(m.group(2)), state))
            continue
        if line.strip() == "state after this batch:":
            in_state = True
            continue
        if not in_state or state is None:
            continue
        g = GROUP.match(line)
        if g:
            group = f"{g.group(1)}/{g.group(2)}"
            state[group] = []
            continue
        e = ENTRY.match(line)
        if e:
            state[group].append((e.group(1), int(e.group(3) or 1),
                                 None if e.group(4) == "root" else e.group(4),
                                 ast.literal_eval(e.group(6)), e.group(8),
                                 ast.literal_eval(e.group(10)) if e.group(10) else None))
    return out


def state_of(rs) -> dict:
    st = rs.state
    out = {}
    for (medium, gi), g in st.groups.items():
        if g:
            out[f"{medium}/{gi}"] = [
                (short_hex(h), e.count, None if e.parent is None else short_hex(e.parent),
                 list(e.tokens), e.lora_name, list(e.extra_keys) if e.extra_keys else None)
                for h, e in g.items()]
    return out


def reduce_per_batch(path: Path, src: str | None = None) -> tuple[Reduction, list]:
    reader = CaptureReader(path)
    messages = list(reader)
    header, bad = reader.header, reader.bad_lines
    assert header["format"] == "vllm-kv-events-capture/1" and not bad
    got = []
    red = Reduction(replay=bool(header.get("replay")))
    red.on_apply = lambda rs, info, delta: got.append((info.seq, state_of(rs)))
    for rec in messages:
        if src is None or rec.src == src:
            red.feed(rec)
    red.finish()
    return red, got


@pytest.mark.parametrize("decoded", DECODED, ids=[p.name for p in DECODED])
def test_every_capture_reproduces_the_reference_state_after_every_batch(decoded):
    name = decoded.name.removesuffix(".decoded.txt")
    src = "sub" if name.endswith(".live-only") else None
    capture = CAPTURES / (name.removesuffix(".live-only") + ".jsonl")
    want = parse_decoded(decoded)
    assert sum(len(entries) for _, st in want for entries in st.values()) > 0   # parsed
    red, got = reduce_per_batch(capture, src)
    assert [s for s, _ in got] == [s for s, _ in want]
    for (seq, g), (_, w) in zip(got, want):
        assert g == w, f"{name}: state after seq {seq}"
    assert red.skipped == 0


def test_the_copies_are_the_shared_captures():
    shared = shared_captures()
    if shared is None:
        pytest.skip("no shared reference folder (CI's clean clone)")
    names = sorted(p.name for p in shared.iterdir() if p.suffix in (".jsonl", ".txt"))
    assert names == sorted(p.name for p in CAPTURES.iterdir() if p.suffix in (".jsonl", ".txt"))
    for n in names:
        assert (shared / n).read_bytes() == (CAPTURES / n).read_bytes(), n


def test_every_payload_reencodes_to_vllms_bytes():
    n = 0
    for path in sorted(CAPTURES.glob("*.jsonl")):
        messages = list(CaptureReader(path))
        for rec in messages:
            m = parse_frames(rec.frames)
            if m.end:
                continue
            batch, problems = decode_payload(m.payload)
            assert not problems
            assert encode_batch(batch.events, batch.ts, batch.data_parallel_rank) == m.payload
            n += 1
    assert n == 56


def test_the_readme_message_in_hex():
    """pressure.jsonl's 3rd message, as shared/data/vllm-kv-events/README.md writes it out."""
    messages = list(CaptureReader(CAPTURES / "pressure.jsonl"))
    m = parse_frames(messages[2].frames)
    assert (m.topic, m.seq) == (b"", 2)
    batch, _ = decode_payload(m.payload)
    assert batch.ts == 1796284145.7477117 and batch.data_parallel_rank == 0
    (ev,) = batch.events
    assert type(ev).__name__ == "BlockRemoved" and ev.block_hashes == [0x973AA91ED5B18194]
    assert m.payload.hex().startswith("93cb41dac447bc6fda829184a474797065ac426c6f636b52656d6f766564")
    assert encode_batch(batch.events, batch.ts) == m.payload


def test_late_joiner_merges_live_and_replay_and_the_live_part_alone_misses_three():
    red, _ = reduce_per_batch(CAPTURES / "late-joiner.jsonl")
    assert red.batches == 6 and red.ranks[0].missing_count == 0 and red.duplicates == 1
    assert red.notes.counts["late_join"] == 1
    live, _ = reduce_per_batch(CAPTURES / "late-joiner.jsonl", src="sub")
    assert live.batches == 3 and list(live.ranks[0].missing) == [(0, 2)]
    assert live.report()["missing_seqs"] == [0, 1, 2]


def test_restart_starts_the_state_over():
    red, _ = reduce_per_batch(CAPTURES / "restart.jsonl")
    assert red.ranks[0].restarts == 1 and red.notes.counts["restart"] == 1
    assert red.batches == 10 and red.cached() == 5


def test_events_state_json(cli):
    p = cli("events", "state", str(CAPTURES / "last-token-rule.jsonl"), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["batches"] == 3 and d["missing_seqs"] == [] and d["notes"] == []
    gpu = d["caches"]["GPU/0"]
    assert [e["hash"] for e in gpu] == ["9cc707b60d8b0888", "6b8c2a1a691b198f", "c0198241f692e509",
                                        "c89529358d9decfd", "66aece76c44b04f4"]
    assert gpu[1] | {} == gpu[1] and gpu[1]["parent"] == "9cc707b60d8b0888"
    assert gpu[1]["token_ids"] == [60973, 32399, 20474, 28161] and gpu[1]["count"] == 1
    assert {"lora_name", "extra_keys", "count", "token_ids"} <= gpu[0].keys()
    assert "block_ids" in d["cannot_know"]


def test_events_state_bytes_hashes_in_full_hex(cli):
    p = cli("events", "state", str(CAPTURES / "six-blocks.hash-bytes.jsonl"), "--json")
    gpu = json.loads(p.stdout)["caches"]["GPU/0"]
    assert all(len(e["hash"]) == 64 for e in gpu)
    assert gpu[1]["parent"] == gpu[0]["hash"]


def test_events_state_text_and_a_missing_file(cli, tmp_path):
    p = cli("events", "state", str(CAPTURES / "tenants-and-lora.jsonl"), "--lang", "zh")
    assert p.returncode == 0 and "lora=sql-adapter" in p.stdout and "缓存了 8 个哈希" in p.stdout
    p = cli("events", "state", str(tmp_path / "nope.jsonl"))
    assert p.returncode == 2 and "nope.jsonl" in p.stderr and "Traceback" not in p.stderr
    (tmp_path / "x.jsonl").write_text("hello\n")
    p = cli("events", "state", str(tmp_path / "x.jsonl"))
    assert p.returncode == 2 and "not a recording" in p.stderr


def test_a_first_line_that_is_not_json_is_one_bad_line(tmp_path):
    """A recording that does not start with its header, and whose first line is not JSON either:
    that line is reported once, and the messages after it are read."""
    path = tmp_path / "rec.jsonl"
    path.write_text('{not json\n{"src": "sub", "t": 1, "frames": ["", "AAAAAAAAAAE=", ""]}\n')
    r = CaptureReader(path)
    msgs = list(r)
    assert r.header is None
    assert [(b.line, b.why.split(":")[0]) for b in r.bad_lines] == [(1, "not JSON")]
    assert [(m.src, m.t, m.index, m.line) for m in msgs] == [("sub", 1, 0, 2)]


def test_a_null_line_is_a_bad_line_not_a_silent_one(tmp_path):
    """``null`` is JSON but no message: first or later, it is reported where it is."""
    path = tmp_path / "rec.jsonl"
    path.write_text('null\n{"src": "sub", "t": 1, "frames": ["", "AAAAAAAAAAE=", ""]}\nnull\n')
    r = CaptureReader(path)
    msgs = list(r)
    assert [m.line for m in msgs] == [2]
    assert [(b.line, b.why) for b in r.bad_lines] == [(1, 'not a message line (no "frames" list)'),
                                                      (3, 'not a message line (no "frames" list)')]


def test_writer_and_reader_round_trip_and_bad_lines_are_located(tmp_path):
    path = tmp_path / "rec.jsonl"
    with CaptureWriter(path, endpoint="tcp://127.0.0.1:1", mode="bind", replay=None) as w:
        w.write("sub", [b"", (0).to_bytes(8, "big"), b"\x93"], t=1.5)
        w.write("replay", [b"t", (-1).to_bytes(8, "big", signed=True), b""], t=2.0)
    with open(path, "a") as f:
        f.write("{not json\n")
        f.write('{"src": "sub", "frames": ["***"]}\n')
        f.write('{"src": "elsewhere", "frames": []}\n')
        f.write('{"src": "sub", "t": 3, "frames": ["", "AAAAAAAAAAE=", ""]}\n')
    r = CaptureReader(path)
    msgs = list(r)
    assert r.header["format"] == "vllm-kv-events-capture/1" and r.header["mode"] == "bind"
    assert [(m.src, m.t, m.index, m.line) for m in msgs] == [
        ("sub", 1.5, 0, 2), ("replay", 2.0, 1, 3), ("sub", 3, 2, 7)]
    assert msgs[0].frames == [b"", b"\0" * 8, b"\x93"]
    assert [b.line for b in r.bad_lines] == [4, 5, 6]
