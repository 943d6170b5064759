"""Benchmark ``replay``: a recording at the upload limit opens on the board in bounded time.

A synthetic recording shaped like a busy engine's (block size 16): each batch one ``BlockStored``
of 4 blocks (64 token ids; half of them continue a cached chain), and once 2,000 hashes are
cached one ``BlockRemoved`` of 4 — as many batches as fit in the size (8 MB: the Live page's upload
limit, ~15,700 batches). Measured side by side in one run, wall seconds of this process:
- ``read``: blockviz.live.replay.read_recording (decode, reduce, a step per batch up to
  MAX_STEPS, a snapshot of up to MAX_FOREST hashes each; the rest counted, not decoded);
- ``board``: blockviz.render.replay.recording_board in both languages (the panels of the steps
  that fit in MAX_BOARD_CHARS);
- ``json``: the board's data as the JSON the page sends.
"""
from __future__ import annotations

import os
import random
import tempfile
import time

from .timing import fmt_s, median, table, timed

NAME = "replay"


def make_recording(path: str, size: int, seed: int = 1) -> int:
    """A synthetic recording of about ``size`` bytes at ``path``; its batch count."""
    from blockviz.live.capture import CaptureWriter
    from blockviz.live.wire import BlockRemoved, BlockStored, encode_batch, seq_frame
    rng = random.Random(seed)
    live: list[int] = []
    h = seq = 0
    with CaptureWriter(path, endpoint="tcp://127.0.0.1:5557", mode="bind") as w:
        while os.path.getsize(path) < size - 4096:      # (a line is ~500 bytes)
            parent = rng.choice(live) if live and rng.random() < 0.5 else None
            hashes = list(range(h + 1, h + 5))
            h += 4
            events = [BlockStored(block_hashes=hashes, parent_block_hash=parent,
                                  token_ids=list(range(64)), block_size=16, lora_id=None,
                                  medium="GPU", lora_name=None, extra_keys=[None] * 4, group_idx=0,
                                  kv_cache_spec_kind="full_attention")]
            live += hashes
            if len(live) > 2000:
                events.insert(0, BlockRemoved(block_hashes=live[:4], medium="GPU", group_idx=0))
                live = live[4:]
            w.write("sub", [b"", seq_frame(seq), encode_batch(events, 1.8e9 + seq)], t=1.8e9 + seq)
            seq += 1
    return seq


def run(repeat: int, quick: bool, say) -> dict:
    from blockviz.live import replay as lreplay
    from blockviz.render.replay import recording_board
    sizes = (1 << 18,) if quick else (1 << 20, lreplay.MAX_BYTES)
    out = []
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        for size in sizes:
            path = os.path.join(tmp, f"rec-{size}.jsonl")
            batches = make_recording(path, size)
            say(f"  a recording of {size / (1 << 20):.2f} MB: {batches:,} batches")
            times: dict[str, list[float]] = {"read": [], "board": [], "json": []}
            for _ in range(max(1, min(repeat, 3))):
                t0 = time.perf_counter()
                rec = lreplay.read_recording(path)
                t1 = time.perf_counter()
                data = recording_board(rec, langs=["en", "zh"])
                t2 = time.perf_counter()
                sent = timed(data.to_json)[0]
                times["read"].append(t1 - t0)
                times["board"].append(t2 - t1)
                times["json"].append(sent)
            text = data.to_json()
            out.append({"bytes": size, "batches": batches, "steps": len(rec.steps),
                        "shipped": data.num_steps - 1, "json_bytes": len(text.encode()),
                        **{k: median(v) for k, v in times.items()}})
    worst = out[-1]
    total = worst["read"] + worst["board"] + worst["json"]
    budgets = [{"name": f"replay: a {worst['bytes'] / (1 << 20):g} MB recording opens on the board",
                "value": total, "limit": "< 10", "met": total < 10, "unit": "s"}]
    return {"sizes": out, "budgets": budgets}


def render(result: dict) -> str:
    return table(["recording", "batches", "steps kept", "on the board", "read", "board", "json",
                  "sent"],
                 [[f"{r['bytes'] / (1 << 20):.2f} MB", f"{r['batches']:,}", f"{r['steps']:,}",
                   f"{r['shipped']:,}", fmt_s(r["read"]), fmt_s(r["board"]), fmt_s(r["json"]),
                   f"{r['json_bytes'] / (1 << 20):.1f} MiB"] for r in result["sizes"]])
