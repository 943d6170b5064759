"""The wire format both ways: vLLM 0.33's shape, the older shapes, and what is not a batch."""
from __future__ import annotations

import msgspec
import pytest

from blockviz.live.wire import (
    MASK64,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    WireError,
    decode_payload,
    encode_batch,
    event_from_dict,
    hash_hex,
    parse_frames,
)

pack = msgspec.msgpack.encode


def stored(**kw):
    d = dict(block_hashes=[1, 2], parent_block_hash=None, token_ids=[1, 2, 3, 4], block_size=2,
             lora_id=None, medium="GPU", lora_name=None, extra_keys=[None, None], group_idx=0,
             kv_cache_spec_kind="full_attention")
    d.update(kw)
    return BlockStored(**d)


def test_vllm_033_shape_defaults_left_out_required_fields_written():
    payload = encode_batch([stored(), BlockRemoved([2**64 - 1], "GPU", 0), AllBlocksCleared()],
                           1.5, 0)
    raw = msgspec.msgpack.decode(payload)
    assert raw[0] == 1.5 and raw[2] == 0 and len(raw) == 3
    assert list(raw[1][0]) == ["type", "block_hashes", "parent_block_hash", "token_ids",
                               "block_size", "lora_id", "medium", "lora_name", "extra_keys",
                               "group_idx", "kv_cache_spec_kind"]
    assert raw[1][1] == {"type": "BlockRemoved", "block_hashes": [2**64 - 1], "medium": "GPU",
                         "group_idx": 0}
    assert raw[1][2] == {"type": "AllBlocksCleared"}
    assert b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff" in payload     # uint64
    # msgspec 0.23 writes an array-like struct's every field, defaults too: a None rank is nil
    # (the README's "2 elements" holds only for vLLMs whose batch had no rank field)
    assert msgspec.msgpack.decode(encode_batch([], 1.0, None)) == [1.0, [], None]
    batch, problems = decode_payload(payload)
    assert problems == [] and batch.events[1].block_hashes == [2**64 - 1]


def test_event_from_the_contracts_dict():
    d = {"type": "BlockStored", "block_hashes": [7], "parent_block_hash": 3, "token_ids": [1, 2],
         "block_size": 2, "lora_id": 1, "medium": "GPU", "lora_name": "sql",
         "extra_keys": [["sql"]], "group_idx": 0, "kv_cache_spec_kind": "full_attention",
         "kv_cache_spec_sliding_window": None, "locality": None, "ownership": None,
         "session_id": None, "lookahead_token_ids": None}
    ev = event_from_dict(d)
    assert ev.extra_keys == [("sql",)] and ev.lora_id == 1
    with pytest.raises(ValueError):
        event_from_dict({"type": "Nope"})
    with pytest.raises(ValueError):
        event_from_dict({"type": "BlockRemoved", "block_hashes": ["x"], "medium": "GPU"})


def test_older_shapes_events_as_arrays_and_a_batch_of_two():
    # vLLM before the tagged maps: array_like events [type, fields in order...], no rank
    payload = pack([12.5, [["BlockStored", [5, 6], None, [1, 2, 3, 4], 2, None],
                           ["BlockRemoved", [5]],
                           ["AllBlocksCleared"]]])
    batch, problems = decode_payload(payload)
    assert problems == [] and batch.data_parallel_rank is None and batch.ts == 12.5
    s, r, c = batch.events
    assert s.block_hashes == [5, 6] and s.block_size == 2 and s.medium is None
    assert r.block_hashes == [5] and r.medium is None and isinstance(c, AllBlocksCleared)
    # a later older one: with medium and lora_name; fields a newer vLLM adds are ignored
    payload = pack([1.0, [["BlockStored", [9], 8, [1], 1, 2, "GPU", "x", [None], 0, "f", None,
                           None, None, None, None, "from the future"]], 0])
    batch, problems = decode_payload(payload)
    assert problems == [] and batch.events[0].lora_name == "x" and batch.events[0].group_idx == 0
    # and a batch with a field after the rank (a newer vLLM), on both paths
    for events in ([], [["AllBlocksCleared"]]):
        batch, problems = decode_payload(pack([1.0, events, 3, "new"]))
        assert batch.data_parallel_rank == 3 and len(batch.events) == len(events)


def test_signed_hashes_are_read_as_unsigned_and_noted():
    payload = pack([1.0, [{"type": "BlockStored", "block_hashes": [-1, 3], "parent_block_hash": -2,
                           "token_ids": [1, 2], "block_size": 1, "lora_id": None, "medium": "GPU",
                           "lora_name": None}], 0])
    batch, problems = decode_payload(payload)
    ev = batch.events[0]
    assert ev.block_hashes == [MASK64, 3] and ev.parent_block_hash == MASK64 - 1
    assert [p.kind for p in problems] == ["signed_hashes"]


def test_bytes_hashes_and_their_hex():
    h = bytes(range(32))
    batch, _ = decode_payload(encode_batch([BlockRemoved([h], "GPU", 0)], 1.0))
    assert batch.events[0].block_hashes == [h]
    assert hash_hex(h) == h.hex() and hash_hex(0x1A) == "000000000000001a" and hash_hex(None) is None


def test_a_bad_event_is_skipped_the_rest_of_the_batch_kept():
    good = {"type": "BlockRemoved", "block_hashes": [1], "medium": "GPU"}
    payload = pack([1.0, [{"type": "BlockEvicted", "x": 1}, good, 42,
                          {"type": "BlockRemoved", "block_hashes": "nope", "medium": "GPU"},
                          {"type": "BlockRemoved", "block_hashes": [b"x" * 65], "medium": "GPU"},
                          ["Nope"], good], 0])
    batch, problems = decode_payload(payload)
    assert len(batch.events) == 2
    assert [(p.index, p.kind) for p in problems] == [
        (0, "unknown_type"), (2, "event_shape"), (3, "bad_event"), (4, "bad_event"),
        (5, "unknown_type")]
    assert "'BlockEvicted'" in problems[0].detail


@pytest.mark.parametrize("payload, kind", [
    (b"", "bad_msgpack"),
    (b"\xc1", "bad_msgpack"),                                   # never used
    (encode_batch([BlockRemoved([1], "GPU", 0)], 1.0)[:-3], "bad_msgpack"),   # truncated
    (pack({"ts": 1}), "batch_shape"),
    (pack([1.0]), "batch_shape"),
    (pack(["t", []]), "batch_shape"),
    (pack([1.0, {"a": 1}]), "batch_shape"),
    (pack([1.0, [], "rank"]), "batch_shape"),
    (b"\x91" * 100_000, "bad_msgpack"),                         # nested too deep
])
def test_what_is_not_a_batch_raises_a_wire_error(payload, kind):
    with pytest.raises(WireError) as e:
        decode_payload(payload)
    assert e.value.kind == kind


def test_frames():
    m = parse_frames([b"kv", (5).to_bytes(8, "big"), b"x"])
    assert (m.topic, m.seq, m.payload, m.end) == (b"kv", 5, b"x", False)
    assert parse_frames([b"", (-1).to_bytes(8, "big", signed=True), b""]).end
    with pytest.raises(WireError, match="2 frame"):
        parse_frames([b"", b""])
    with pytest.raises(WireError) as e:
        parse_frames([b"", b"\0\0", b""])
    assert e.value.kind == "seq_frame"
