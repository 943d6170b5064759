"""The subscriber on 127.0.0.1: a capture of vLLM's publisher sent again by a scripted publisher,
both socket directions, a gap filled from replay, DP ranks, hostile input, replays that never
end. Nothing beyond loopback."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from blockviz.live.capture import CaptureReader
from blockviz.live.stream import reduce_file
from blockviz.live.subscribe import LiveSession, offset_endpoint_port, publisher_binds
from blockviz.live.wire import BlockStored, encode_batch, parse_frames, seq_frame

CAPTURES = Path(__file__).resolve().parent / "captures"
ROOT = Path(__file__).resolve().parents[2]


def payloads(name: str) -> list[tuple[int, bytes]]:
    msgs = list(CaptureReader(CAPTURES / name))
    out = []
    for rec in msgs:
        m = parse_frames(rec.frames)
        if rec.src == "sub":
            out.append((m.seq, m.payload))
    return out


def pump_until(sess: LiveSession, cond, timeout: float = 10.0) -> None:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            red = sess.red
            raise TimeoutError(f"the subscriber did not get there: {red.batches} batches, "
                               f"{red.messages} messages, notes {dict(red.notes.counts)}, "
                               f"pending {sorted(red.rank(0).seq.pending)}")
        sess.pump(0.05)


def state(red) -> dict:
    return red.report()["caches"]


def test_endpoint_rules_are_vllms():
    assert publisher_binds("tcp://*:5557") and publisher_binds("tcp://[::ffff:127.0.0.1]:5")
    assert publisher_binds("ipc:///tmp/x") and not publisher_binds("tcp://127.0.0.1:5557")
    assert offset_endpoint_port("tcp://127.0.0.1:5557", 2) == "tcp://127.0.0.1:5559"
    assert offset_endpoint_port("tcp://*:0", 3) == "tcp://*:0"
    assert offset_endpoint_port("inproc://kv", 1) == "inproc://kv_dp1"


def test_connect_to_a_binding_publisher_and_record(scripted, ports, tmp_path):
    port = ports()
    pub = scripted(f"tcp://127.0.0.1:{port}")
    rec = tmp_path / "rec.jsonl"
    sess = LiveSession(f"tcp://127.0.0.1:{port}", record=str(rec))
    try:
        pub.wait_subscribed()
        for seq, p in payloads("pressure.jsonl"):
            pub.publish(seq, p)
        pump_until(sess, lambda: sess.red.batches == 5)
    finally:
        sess.close()
    want, _, _ = reduce_file(CAPTURES / "pressure.jsonl")
    assert state(sess.red) == state(want) and not sess.red.notes.total
    again, header, bad = reduce_file(rec)
    assert header["mode"] == "connect" and not bad and state(again) == state(want)


def test_bind_where_the_publisher_connects_with_a_topic(scripted, ports):
    port = ports()
    sess = LiveSession(f"tcp://127.0.0.1:{port}", bind=True, topic="kv@engine0")
    pub = scripted(f"tcp://127.0.0.1:{port}", bind=False, topic=b"kv@engine0")
    try:
        pub.wait_subscribed(pump=sess.pump)
        pub.send([b"other", seq_frame(0), b"ignored"])     # another topic: filtered out
        for seq, p in payloads("pressure.with-topic.jsonl"):
            pub.publish(seq, p)
        pump_until(sess, lambda: sess.red.batches == 5)
    finally:
        sess.close()
    want, _, _ = reduce_file(CAPTURES / "pressure.with-topic.jsonl")
    assert state(sess.red) == state(want) and sess.red.messages == 5


def test_a_gap_is_filled_from_replay_and_a_late_join_asks_from_zero(scripted, ports):
    p, r = ports(), ports()
    pub = scripted(f"tcp://127.0.0.1:{p}", replay=f"tcp://127.0.0.1:{r}")
    batches = payloads("chunked-prefill.jsonl")
    for seq, payload in batches[:2]:
        pub.publish(seq, payload, live=False)               # sent before the subscriber came
    sess = LiveSession(f"tcp://127.0.0.1:{p}", replay=f"tcp://127.0.0.1:{r}")
    try:
        pub.wait_subscribed()
        pump_until(sess, lambda: sess.red.batches == 2)      # the replay from 0 at start
        pub.publish(*batches[2])
        pub.publish(*batches[3], live=False)                 # dropped on the live stream
        pub.publish(*batches[4])
        pub.publish(*batches[5])
        pump_until(sess, lambda: sess.red.batches == 6)
    finally:
        sess.close()
    assert pub.requests == [0, 3]
    want, _, _ = reduce_file(CAPTURES / "chunked-prefill.jsonl")
    assert state(sess.red) == state(want)
    assert sess.red.notes.counts == {"gap": 1} and sess.red.ranks[0].missing_count == 0


def test_dp_ranks_are_separate_streams(scripted, ports):
    p = ports()
    while True:                                  # two consecutive free ports
        try:
            a = scripted(f"tcp://127.0.0.1:{p}")
            b = scripted(f"tcp://127.0.0.1:{p + 1}")
            break
        except Exception:  # noqa: BLE001 - taken: try elsewhere
            p = ports()
    sess = LiveSession(f"tcp://127.0.0.1:{p}", dp_ranks=2)
    try:
        a.wait_subscribed()
        b.wait_subscribed()
        ev = BlockStored([7], None, [1, 2], 2, None, "GPU", None, [None], 0, "full_attention")
        a.publish(0, encode_batch([ev], 1.0, 0))
        b.publish(0, encode_batch([ev], 1.0, 1))
        pump_until(sess, lambda: sess.red.batches == 2)
    finally:
        sess.close()
    assert sorted(sess.red.ranks) == [0, 1] and not sess.red.notes.total


def test_hostile_input_is_skipped_counted_and_located(scripted, ports):
    port = ports()
    pub = scripted(f"tcp://127.0.0.1:{port}")
    sess = LiveSession(f"tcp://127.0.0.1:{port}", max_tokens_per_hash=64)
    good = payloads("six-blocks.jsonl")
    huge = BlockStored([99], None, list(range(2_000_000)), 2_000_000, None, "GPU", None, [None],
                       0, "full_attention")
    try:
        pub.wait_subscribed()
        pub.send([b"garbage"])                                             # 1 frame
        pub.send([b"", b"\x00\x01", b"x"])                                 # short seq frame
        pub.send([b"", seq_frame(-7), b"x"])                               # negative seq
        pub.send([b"", seq_frame(0), b"\xde\xad\xbe\xef"])                 # not msgpack
        pub.send([b"", seq_frame(0), good[0][1][:-5]])                     # truncated
        pub.send([b"", seq_frame(0), msgspec.msgpack.encode({"ts": 1})])   # wrong shape
        pub.send([b"", seq_frame(0), msgspec.msgpack.encode(
            [1.0, [{"type": "BlockPinned", "block_hashes": [1]}], 0])])   # unknown type
        pub.send([b"", seq_frame(1), encode_batch([huge], 1.0, 0)])        # 2M tokens
        pub.send([b"", seq_frame(2), good[0][1]])
        pub.send([b"", seq_frame(3), good[1][1]])
        pump_until(sess, lambda: sess.red.messages == 10)
    finally:
        sess.close()
    red = sess.red
    assert red.notes.counts == {"frames": 1, "seq_frame": 1, "bad_seq": 1, "bad_msgpack": 2,
                                "batch_shape": 1, "unknown_type": 1, "tokens_cut": 1}
    texts = [n.text() for n in red.notes.kept()]
    assert texts[0].startswith("message 0 (sub): 1 frame(s)")
    assert any(t.startswith("message 4 (sub), seq 0: the payload is not msgpack") for t in texts)
    assert any(t.startswith("message 6 (sub), seq 0, event 0: unknown event type 'BlockPinned'")
               for t in texts)
    # what could be read was: seq 0 (its one good event list was empty), 1, 2, 3
    assert red.batches == 4 and red.skipped == 6
    gpu = state(red)["GPU/0"]
    assert gpu[0]["hash"] == "0000000000000063" and len(gpu[0]["token_ids"]) == 64
    assert len(gpu) == 7


def test_a_replay_that_never_ends_and_one_that_never_answers(scripted, ports):
    six = payloads("six-blocks.jsonl")
    want, _, _ = reduce_file(CAPTURES / "six-blocks.jsonl")
    for mode, kind in (("endless", "replay_overflow"), ("silent", "replay_timeout")):
        p, r = ports(), ports()
        pub = scripted(f"tcp://127.0.0.1:{p}", replay=f"tcp://127.0.0.1:{r}", replay_mode=mode)
        pub.publish(0, six[0][1], live=False)
        if mode == "endless":           # replays 0 and 1, then seqs 1000, 1001, ... for ever
            pub.publish(1, six[1][1], live=False)
        sess = LiveSession(f"tcp://127.0.0.1:{p}", replay=f"tcp://127.0.0.1:{r}",
                           replay_timeout_s=0.5, max_pending=200)
        sess.max_replay = 200
        try:
            pub.wait_subscribed(pump=sess.pump)
            if mode == "silent":        # held while the replay is awaited, applied when it fails
                pub.publish(1, six[1][1])
            pump_until(sess, lambda s=sess, k=kind: s.red.notes.counts[k] == 1, timeout=15)
        finally:
            sess.close()
        assert not sess.replaying() and not sess.red.ranks[0].seq.pending
        if mode == "silent":
            # nothing came back: seq 0 is lost, seq 1 is applied (its removals never seen)
            assert sess.red.ranks[0].missing_count == 1 and sess.red.batches == 1
            assert sess.red.notes.counts["removed_unknown"] == 2
        else:
            assert state(sess.red) == state(want) and sess.red.batches >= 200


def test_the_command_prints_the_state_and_progress(scripted, ports, tmp_path):
    port = ports()
    pub = scripted(f"tcp://127.0.0.1:{port}")
    rec = tmp_path / "r.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "blockviz", "live", f"tcp://127.0.0.1:{port}",
                             "--until-idle", "1.5", "--json", "--record", str(rec)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pub.wait_subscribed(timeout=60)
        for seq, p in payloads("tenants-and-lora.jsonl"):
            pub.publish(seq, p)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    d = json.loads(out)
    want, _, _ = reduce_file(CAPTURES / "tenants-and-lora.jsonl")
    assert d["caches"] == state(want) and d["batches"] == 4
    assert "live: 4 batch(es), 5 event(s), 0 gap(s), 0 note(s); 8 hash(es) cached" in err
    assert "stopped after 1.5 s without a message" in err
    assert len(list(CaptureReader(rec))) == 4
