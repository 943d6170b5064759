"""A recording, step by step (blockviz.live.replay) and on the board (blockviz.render.replay): every
capture of vLLM 0.33.0's real publisher gives one step per batch whose forest is the reference
decoder's state after that batch; the step's ops are its events with vLLM's names, linked to the
forest by hash; the bounds hold; a file that is not a recording is refused with a located
message in both languages; the export steps offline."""
from __future__ import annotations

import base64
import json
import re

import pytest

from blockviz.cli import main
from blockviz.export import ExportError, export_recording_html
from blockviz.live.capture import FORMAT
from blockviz.live.reducer import short_hex
from blockviz.live.replay import RecordingError, is_recording, read_recording
from blockviz.render.replay import hash_id, recording_board

from .test_captures import CAPTURES, DECODED, parse_decoded

PRESSURE = CAPTURES / "pressure.jsonl"
CHIP = re.compile(r'data-block="([^"]+)"')


def snapshot(step) -> dict:
    """A step's forest as the reference decoder prints a state (test_captures.parse_decoded)."""
    return {f"{m}/{g}": [(short_hex(h), e.count, None if e.parent is None else short_hex(e.parent),
                          list(e.tokens), e.lora_name, list(e.extra_keys) if e.extra_keys else None)
                         for h, e in hashes.items()]
            for (m, g), hashes in step.groups.items() if hashes}


@pytest.mark.parametrize("decoded", [d for d in DECODED if ".live-only" not in d.name],
                         ids=lambda d: d.name)
def test_each_batch_is_a_step_whose_forest_is_the_reference_state(decoded):
    capture = CAPTURES / decoded.name.replace(".decoded.txt", ".jsonl")
    want = parse_decoded(decoded)
    rec = read_recording(capture, max_forest=10**6)
    assert [s.seq for s in rec.steps] == [seq for seq, _ in want]
    assert rec.batches == len(rec.steps) and rec.unread == 0
    for step, (seq, state) in zip(rec.steps, want):
        assert snapshot(step) == state, f"{capture.name}: after seq {seq}"
        assert step.hidden == 0 and step.cached == sum(len(v) for v in state.values())


def test_a_steps_delta_and_events():
    rec = read_recording(PRESSURE)
    kinds = [[type(e).__name__ for e in s.events] for s in rec.steps]
    assert kinds == [["BlockStored"] * 3, ["BlockStored"], ["BlockRemoved"],
                     ["BlockRemoved", "BlockStored"], ["BlockStored", "BlockRemoved"]]
    third = rec.steps[2]                   # README's message in hex: one BlockRemoved
    assert [short_hex(h) for _, h, _ in third.removed] == ["973aa91ed5b18194"]
    assert not third.stored and third.cached == 4 and third.seq == 2
    assert 0x973AA91ED5B18194 not in third.groups[("GPU", 0)]
    # the last-token rule: a hash stored twice, one copy removed, still cached
    rec = read_recording(CAPTURES / "last-token-rule.jsonl")
    counts = [max(e.count for g in s.groups.values() for e in g.values()) for s in rec.steps]
    assert counts[1] == 2
    board = recording_board(rec, langs=["en", "zh"])
    assert board.marks[3] == "sr"                    # a copy's BlockRemoved is a removal event
    cap = board.strings[board.steps["en"][3]["caption"]]
    assert "1 removal of one copy of a hash still cached in another block" in cap
    # a reset: AllBlocksCleared alone in its batch empties the forest
    rec = read_recording(CAPTURES / "reset-prefix-cache.jsonl")
    assert rec.steps[1].cleared and rec.steps[1].cached == 0 and not rec.steps[1].groups
    board = recording_board(rec, langs=["en"])
    cleared = _steps(board)[2]
    assert board.marks[2] == "c" and '<code class="bv-call">AllBlocksCleared</code>' in cleared["ops"]
    assert "AllBlocksCleared: the GPU prefix cache was reset" in cleared["caption"]
    assert "Nothing is cached after this batch." in cleared["blocks"]


def test_a_restart_starts_the_forest_over_and_says_so():
    rec = read_recording(CAPTURES / "restart.jsonl")
    assert [s.seq for s in rec.steps] == [0, 1, 2, 3, 4] * 2
    again = rec.steps[5]
    assert [n.kind for n in again.notes] == ["restart"] and again.cached == 4
    board = recording_board(rec, langs=["en"])
    assert "the publisher restarted" in board.strings[board.steps["en"][6]["caption"]]


def test_bounds_cut_steps_forest_and_board_and_say_so():
    rec = read_recording(PRESSURE, max_steps=2, max_forest=3)
    assert len(rec.steps) == 2 and rec.batches == 2 and rec.unread == 3   # (not decoded)
    first = rec.steps[0]
    assert first.cached == 4 and first.hidden == 1
    assert sum(len(g) for g in first.groups.values()) == 3
    board = recording_board(rec, langs=["en", "zh"])
    assert "1 older cached hash(es) not drawn" in board.strings[board.steps["en"][1]["blocks"]]
    whole = recording_board(read_recording(PRESSURE), langs=["en", "zh"])
    size = sum(map(len, whole.strings))
    cut = recording_board(read_recording(PRESSURE), langs=["en", "zh"], max_chars=size // 2)
    assert 1 < cut.num_steps < whole.num_steps == 6
    assert sum(map(len, cut.strings)) < size
    assert len(cut.marks) == len(cut.events["zh"]) == len(cut.steps["zh"]) == cut.num_steps
    assert cut.hi == cut.num_steps - 1
    win = recording_board(read_recording(PRESSURE), langs=["en"], max_chars=1, start=3)
    assert (win.num_steps, win.lo, win.hi) == (6, 3, 3) and len(win.marks) == 6
    assert win.events["en"] == ["seq 2: 1 event(s)"] and len(win.steps["en"]) == 1
    assert "batch 3 of 5" in win.strings[win.steps["en"][0]["header"]]
    reach = recording_board(read_recording(PRESSURE), langs=["en"], max_chars=1, start=1, through=4)
    assert (reach.lo, reach.hi) == (1, 4) and len(reach.events["en"]) == 4
    with pytest.raises(RecordingError) as e:
        read_recording(PRESSURE, max_bytes=100)
    assert e.value.key == "too_large" and "MB" in e.value.localized("zh")


def _steps(board, lang="en"):
    return [{k: board.strings[i] for k, i in rec.items()} for rec in board.steps[lang]]


def test_the_board_shows_step_ks_forest_and_ops_linked_by_hash():
    rec = read_recording(PRESSURE)
    board = recording_board(rec, langs=["en", "zh"])
    assert board.num_steps == 6 and board.no_frames and board.langs == ["en", "zh"]
    assert board.marks == ["", "s", "s", "r", "sr", "sr"]
    steps = _steps(board)
    assert "Start" in steps[0]["header"] and "BlockStored" not in steps[0].get("ops", "")
    k = steps[4]                                     # after seq 3: BlockRemoved, BlockStored
    assert "batch 4 of 5" in k["header"] and "seq 3" in k["header"]
    lines = re.findall(r'<li class="bv-opl[^"]*"[^>]*>(.*?)</li>', k["ops"])
    assert [re.search(r'<code class="bv-call">(\w+)</code>', x).group(1) for x in lines] == [
        "BlockRemoved", "BlockStored"]
    step = rec.steps[3]
    removed = {hash_id(key, h) for key, h, _ in step.removed}
    stored = {hash_id(key, h) for key, h in step.stored}
    assert set(CHIP.findall(lines[0])) == removed
    assert stored <= set(CHIP.findall(lines[1]))
    forest = set(CHIP.findall(k["blocks"]))
    cached = {hash_id(key, h) for key, g in step.groups.items() for h in g}
    assert forest == cached | removed                # the removed ones listed struck through
    assert stored <= cached
    for h in stored:                                 # a stored hash is marked new in the forest
        assert re.search(rf'class="bvr-h bvr-new" data-block="{re.escape(h)}"', k["blocks"])
    for h in removed:
        assert re.search(rf'class="bvr-h bvr-gone" data-block="{re.escape(h)}"', k["blocks"])
    zh = _steps(board, "zh")[4]
    assert "第 4 批，共 5 批" in zh["header"] and "这一批移除了" in zh["blocks"]


def test_tenants_and_words():
    rec = read_recording(CAPTURES / "tenants-and-lora.jsonl")
    board = recording_board(rec, langs=["en"], words={49126: "The"})
    last = _steps(board)[-1]["blocks"]
    assert "LoRA sql-adapter" in last and "cache_salt acme" in last and "cache_salt globex" in last
    assert "The 4614" in last


def _lines(*objs) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


@pytest.mark.parametrize("content, key, line", [
    (b"", "empty", None),
    (b"id: six\nsteps: []\n", "not_recording", 1),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not_recording", 1),
    (_lines({"a": 1}, {"b": 2}), "not_recording", 1),
    (_lines({"header": {"format": FORMAT}}, {"src": "sub", "frames": ["!!"]}), "no_batch_note", 2),
    (_lines({"header": {"format": FORMAT}},
            {"src": "sub", "frames": [base64.b64encode(x).decode() for x in
                                      (b"", (0).to_bytes(8, "big"), b"\xc1garbage")]}),
     "no_batch_note", 2),
    (_lines({"header": {"format": FORMAT}}), "no_batch", None),
])
def test_a_bad_file_is_refused_with_a_located_message(content, key, line):
    with pytest.raises(RecordingError) as e:
        read_recording(content, name="mine.jsonl")
    err = e.value
    assert (err.key, err.line) == (key, line)
    en, zh = err.localized("en"), err.localized("zh")
    assert en.startswith("mine.jsonl") and zh.startswith("mine.jsonl") and en != zh
    if line is not None:
        assert f"line {line}" in en and f"第 {line} 行" in zh
    assert not re.search(r"[\u4e00-\u9fff]", en)


def test_a_recording_with_some_bad_lines_still_plays_and_notes_them():
    good = PRESSURE.read_bytes().splitlines(keepends=True)
    bad = b"".join(good[:3]) + b"not json\n" + b"".join(good[3:])
    rec = read_recording(bad, name="x.jsonl")
    assert len(rec.steps) == 5 and rec.notes.counts["bad_line"] == 1


def test_export_of_a_recording(tmp_path):
    rec = read_recording(PRESSURE)
    page = export_recording_html(rec, lang="zh", start=3)
    data = json.loads(re.search(r'<script type="application/json" id="bv-data">(.*?)</script>',
                                page, re.S).group(1))
    assert data["control"]["goto"]["step"] == 3 and data["board"]["url"] == "hash"
    assert data["board"]["langs"] == ["zh", "en"] and data["board"]["num_steps"] == 6
    assert ".bvr-forest" in page and "connect-src" not in page and "http://" not in page.split("<body>")[1]
    with pytest.raises(ExportError):
        export_recording_html(rec, start=6)
    out = tmp_path / "p.html"
    assert main(["export", str(PRESSURE), "-o", str(out), "--step", "2"]) == 0
    assert "bvr-forest" in out.read_text(encoding="utf-8")
    assert is_recording(PRESSURE) and not is_recording(CAPTURES / "README.md")


def test_export_of_a_bad_recording_says_where(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("id: x\n")
    assert main(["export", str(bad), "--lang", "zh"]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl，第 1 行" in err and "不是 KV 事件录制" in err


def test_app_recording_args(tmp_path):
    from blockviz.live import replay as R
    rest, files = R.split_app_args(["--server.port", "1", "--recording", str(PRESSURE),
                                    f"--recording={PRESSURE}"])
    assert rest == ["--server.port", "1"] and files == [str(PRESSURE.resolve())] * 2
    with pytest.raises(ValueError, match="no such file"):
        R.split_app_args(["--recording", str(tmp_path / "nope.jsonl")])
    with pytest.raises(ValueError, match="needs a file"):
        R.split_app_args(["--recording"])
    env = {R.ENV: json.dumps(files)}
    assert R.server_recordings(env) == [PRESSURE.resolve()] * 2
    assert R.server_recordings({R.ENV: "not json"}) == [] == R.server_recordings({})


def test_data_parallel_ranks_are_steps_of_their_own_engine(tmp_path):
    from blockviz.live.capture import CaptureWriter
    from blockviz.live.wire import BlockRemoved, BlockStored, encode_batch, seq_frame

    def stored(hashes):
        return BlockStored(block_hashes=hashes, parent_block_hash=None,
                           token_ids=list(range(4 * len(hashes))), block_size=4, lora_id=None,
                           medium="GPU", lora_name=None, group_idx=0)
    path = tmp_path / "dp.jsonl"
    a1, a2, b1 = 0xAAAA00000001, 0xAAAA00000002, 0xBBBB00000001
    with CaptureWriter(path, endpoint="tcp://127.0.0.1:1", mode="bind", dp_ranks=2) as w:
        w.write("sub", [b"", seq_frame(0), encode_batch([stored([a1, a2])], 1.0, 0)])
        w.write("sub", [b"", seq_frame(0), encode_batch([stored([b1])], 1.0, 1)])
        w.write("sub", [b"", seq_frame(1), encode_batch(
            [BlockRemoved(block_hashes=[a2], medium="GPU", group_idx=0)], 2.0, 0)])
    rec = read_recording(path)
    assert [(s.rank, s.seq, s.cached) for s in rec.steps] == [(0, 0, 2), (1, 0, 1), (0, 1, 1)]
    steps = _steps(recording_board(rec, langs=["en"]))
    assert "DP rank 1" in steps[2]["header"] and "DP rank 1 · GPU/0" in steps[2]["blocks"]
    assert set(CHIP.findall(steps[2]["blocks"])) == {hash_id(("GPU", 0), b1)}   # its own cache
    assert set(CHIP.findall(steps[3]["blocks"])) == {hash_id(("GPU", 0), h) for h in (a1, a2)}


def test_a_read_cut_short_does_not_call_batches_lost_whose_replay_it_did_not_read():
    """A late joiner's missed batches come back in a replay further on in the file: a read that
    stops after one step has not reached it, so it may not note them as lost."""
    path = CAPTURES / "late-joiner.jsonl"
    whole, cut = read_recording(path), read_recording(path, max_steps=1)
    assert cut.unread > 0 and len(cut.steps) == 1
    assert set(cut.notes.counts) <= set(whole.notes.counts), (cut.notes.counts, whole.notes.counts)
    assert cut.notes.total <= whole.notes.total
