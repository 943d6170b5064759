"""vLLM's KV-event wire format, both ways (vllm/distributed/kv_events.py, vLLM 0.33).

A message is three ZeroMQ frames: the topic (UTF-8, empty by default), the sequence number
(8 bytes, big-endian; -1 with an empty topic and payload marks the end of a replay) and the
payload, a msgpack ``KVEventBatch``: an array ``[ts, events, data_parallel_rank]`` (the rank
left out when it is None) whose events are maps tagged ``"type"`` with the class name, fields
equal to their default (None) left out, fields without a default always written.

The structs below have vLLM's names, fields, order, tags and options, so that
``msgspec.msgpack.Encoder().encode(batch)`` writes the bytes vLLM's publisher writes. Decoding
tries them first (the fast path: one C call per payload). A payload they do not fit is read
again schema-less and taken apart event by event, which also reads the older shapes: events as
arrays ``[type, field, ...]`` (vLLM before the tagged maps), a batch of two ``[ts, events]``,
hashes as signed 64-bit ints. An event that cannot be read is skipped and reported; only a
payload that is not a batch at all is rejected whole.

Hashes are ``int`` (vLLM's default, ``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``: the last 8 bytes
of the digest, unsigned) or ``bytes`` (the whole digest, 32 bytes for sha256).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

MASK64 = (1 << 64) - 1
END_SEQ = -1
MAX_HASH_BYTES = 64      # a bytes hash longer than this is not a digest: the event is refused

# ExternalBlockHash (vllm/v1/core/kv_cache_utils.py): an unsigned 64-bit int or the digest
ExternalBlockHash = Annotated[int, msgspec.Meta(ge=0)] | Annotated[
    bytes, msgspec.Meta(max_length=MAX_HASH_BYTES)]


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """The events' base: tagged with the class name, written as a map."""


class BlockStored(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    parent_block_hash: ExternalBlockHash | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[ExternalBlockHash]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]
    data_parallel_rank: int | None = None


EVENT_TYPES: dict[str, type] = {c.__name__: c for c in (BlockStored, BlockRemoved,
                                                        AllBlocksCleared)}
Event = BlockStored | BlockRemoved | AllBlocksCleared

# Fields vLLM added to an event over time, without a default: an older stream has none
ADDED_LATER = {BlockStored: ("lora_id", "medium", "lora_name"), BlockRemoved: ("medium",)}

_DECODER = msgspec.msgpack.Decoder(KVEventBatch)
_ENCODER = msgspec.msgpack.Encoder()


class WireError(ValueError):
    """A payload or message that is not a batch at all (or, inside decoding, one event that cannot
    be read). ``kind`` names the problem (an i18n key's tail: ``bad_msgpack``, ``batch_shape``,
    ``frames``, ``seq_frame``; an event's: ``unknown_type``, ``event_shape``, ``bad_event``);
    ``detail`` says more."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind, self.detail = kind, detail


@dataclass(frozen=True, slots=True)
class EventProblem:
    """An event of a batch that was skipped (or read with a caveat): its index and why."""
    index: int
    kind: str          # unknown_type | event_shape | bad_event | signed_hashes
    detail: str = ""


# -- encoding ------------------------------------------------------------------------------------
def encode_batch(events: list, ts: float, data_parallel_rank: int | None = 0) -> bytes:
    """The payload vLLM's ZmqEventPublisher sends for these events (its thread encodes the batch
    with a plain ``msgspec.msgpack.Encoder``; ``publish`` has set the rank)."""
    return _ENCODER.encode(KVEventBatch(ts=ts, events=events,
                                        data_parallel_rank=data_parallel_rank))


def event_from_dict(d: dict) -> Event:
    """One of blockviz's KV events (the JSON contract's dict: every field of vLLM's struct, in its
    order) as the wire struct. Raises ValueError for a dict that is not one: the publish side is
    strict (a received event is read leniently, by ``_event``)."""
    kind = d.get("type")
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"not a KV event type: {kind!r}")
    try:
        return msgspec.convert(d, cls)
    except msgspec.ValidationError as e:
        raise ValueError(f"{kind}: {e}") from None


def seq_frame(seq: int) -> bytes:
    return seq.to_bytes(8, "big", signed=True)


def end_marker() -> list[bytes]:
    """The frames after the last replayed batch (vLLM sends an empty topic)."""
    return [b"", seq_frame(END_SEQ), b""]


# -- decoding ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Message:
    """A message's frames, taken apart: ``end`` is the end-of-replay marker."""
    topic: bytes
    seq: int
    payload: bytes

    @property
    def end(self) -> bool:
        return self.seq == END_SEQ and not self.payload


def parse_frames(frames: list[bytes]) -> Message:
    """Three frames -> a Message; anything else raises WireError."""
    if len(frames) != 3:
        raise WireError("frames", f"{len(frames)} frame(s), expected 3 (topic, seq, payload)")
    topic, seq, payload = frames
    if len(seq) != 8:
        raise WireError("seq_frame", f"the sequence frame has {len(seq)} bytes, expected 8")
    return Message(bytes(topic), int.from_bytes(seq, "big", signed=True), bytes(payload))


def decode_payload(payload: bytes) -> tuple[KVEventBatch, list[EventProblem]]:
    """A payload -> (the batch, the events skipped or read with a caveat). vLLM 0.33's shape is
    read by msgspec in one call; anything else goes the slow, tolerant way."""
    try:
        return _DECODER.decode(payload), []
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    try:
        raw = msgspec.msgpack.decode(payload)
    except Exception as e:  # noqa: BLE001 - truncated, garbage, too deep: all the same to us
        raise WireError("bad_msgpack", str(e)[:200]) from None
    if not isinstance(raw, (list, tuple)) or len(raw) < 2:
        shape = f"an array of {len(raw)}" if isinstance(raw, (list, tuple)) else type(raw).__name__
        raise WireError("batch_shape", f"{shape}, expected [ts, events] or [ts, events, rank]")
    # (elements after the rank: a newer vLLM's fields; msgspec's own decoder ignores them too)
    ts, events = raw[0], raw[1]
    rank = raw[2] if len(raw) > 2 else None
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        raise WireError("batch_shape", f"ts is {type(ts).__name__}, expected a number")
    if not isinstance(events, (list, tuple)):
        raise WireError("batch_shape", f"events is {type(events).__name__}, expected an array")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
        raise WireError("batch_shape", f"data_parallel_rank is {type(rank).__name__}")
    out, problems = [], []
    for i, ev in enumerate(events):
        try:
            event, signed = _event(ev)
        except WireError as e:
            problems.append(EventProblem(i, e.kind, e.detail))
            continue
        if signed:
            problems.append(EventProblem(i, "signed_hashes"))
        out.append(event)
    return KVEventBatch(ts=float(ts), events=out, data_parallel_rank=rank), problems


def _event(ev: Any) -> tuple[Event, bool]:
    if isinstance(ev, dict):
        kind = ev.get("type")
    elif isinstance(ev, (list, tuple)) and ev:
        kind = ev[0]
    else:
        raise WireError("event_shape", type(ev).__name__)
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise WireError("unknown_type", repr(kind)[:60])
    if isinstance(ev, dict):
        fields = {k: v for k, v in ev.items() if k != "type"}
    else:
        # an older vLLM: array_like events, fields in order; fields it did not have yet are
        # left out (and take their defaults), fields of a newer one are ignored
        fields = dict(zip(cls.__struct_fields__, ev[1:]))
    for name in ADDED_LATER.get(cls, ()):
        fields.setdefault(name, None)
    signed = False
    hashes = fields.get("block_hashes")
    if isinstance(hashes, list) and any(isinstance(h, int) and h < 0 for h in hashes):
        fields["block_hashes"] = [h & MASK64 if isinstance(h, int) else h for h in hashes]
        signed = True
    parent = fields.get("parent_block_hash")
    if isinstance(parent, int) and not isinstance(parent, bool) and parent < 0:
        fields["parent_block_hash"] = parent & MASK64
        signed = True
    try:
        return msgspec.convert(fields, cls), signed
    except msgspec.ValidationError as e:
        raise WireError("bad_event", f"{kind}: {e}"[:200]) from None


def hash_hex(h: int | bytes | None) -> str | None:
    """A hash as the JSON writes it: a uint64 as 16 lower-case hex digits, bytes in full."""
    if h is None:
        return None
    if isinstance(h, int):
        return f"{h:016x}"
    return bytes(h).hex()
