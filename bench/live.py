"""Benchmark ``live``: does the subscriber keep up with a busy vLLM, and does the Live page draw a
big prefix cache in time?

Subscriber (budget: 50,000 events a second, decode + reduce, one core). A synthetic stream shaped
like a busy engine's (block size 16): a pool of 10,000 cached blocks turning over, each batch 20
``BlockStored`` of 2 blocks (32 token ids) and 40 ``BlockRemoved`` of one hash (vLLM sends one per
evicted block), uint64 hashes, encoded with the same msgspec structs vLLM uses (byte-identical).
Measured side by side in one run, CPU seconds of this process (one thread):
- ``decode only``: msgspec's typed decode of every payload (the floor);
- ``decode + reduce``: what ``blockviz live`` does per message — the frames taken apart, the
  payload decoded, the seq ordered, the cache state updated (blockviz.live.stream.Reduction);
- ``older shape``: the same events as an older vLLM's arrays (the tolerant path);
- ``over ZeroMQ``: the same stream sent by a publisher process over loopback TCP and received by
  a LiveSession (sockets included); wall time until the last batch is applied.

Live page (budget: under 50 ms an update with 10,000 cached hashes). The view a session gets once
a second (blockviz.render.live.live_html, then the JSON the component is sent) for a reduction of
100, 10,000 and 100,000 cached hashes: prompts of 4 blocks sharing one of 50 system prompts, with a
minute of batch history and recent removals.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

from .timing import fmt_s, median, ratio, table, timed

NAME = "live"
POOL = 10_000
STORES, REMOVES = 20, 40            # events per batch
BLOCK = 16


def _stream(events: int, older: bool = False) -> list[list[bytes]]:
    """Messages (three frames each) of a busy engine's stream, about ``events`` events."""
    import msgspec

    from blockviz.live.wire import BlockRemoved, BlockStored, encode_batch
    per = STORES + REMOVES
    cached: list[int] = []
    nxt = 1 << 60
    msgs = []
    seq = 0
    while seq * per < events:
        evs = []
        for _ in range(STORES):
            hs = [nxt, nxt + 1]
            nxt += 2
            evs.append(BlockStored(hs, cached[-1] if cached else None,
                                   list(range(seq % 1000, seq % 1000 + 2 * BLOCK)), BLOCK, None, "GPU",
                                   None, [None, None], 0, "full_attention"))
            cached += hs
        drop = min(REMOVES, max(0, len(cached) - POOL))
        for h in cached[:drop]:
            evs.append(BlockRemoved([h], "GPU", 0))
        del cached[:drop]
        if older:   # vLLM before the tagged maps: [type, fields...] arrays, a batch of two
            raw = [1.0 + seq, [[type(e).__name__, *[getattr(e, f) for f in e.__struct_fields__]]
                               for e in evs]]
            payload = msgspec.msgpack.encode(raw)
        else:
            payload = encode_batch(evs, 1.0 + seq, 0)
        msgs.append([b"", seq.to_bytes(8, "big"), payload])
        seq += 1
    return msgs


def _count(msgs) -> int:
    from blockviz.live.wire import decode_payload
    return sum(len(decode_payload(m[2])[0].events) for m in msgs)


def _decode_only(msgs) -> None:
    from blockviz.live.wire import decode_payload
    for m in msgs:
        decode_payload(m[2])


def _reduce(msgs):
    from blockviz.live.capture import Received
    from blockviz.live.stream import Reduction
    red = Reduction(replay=False)
    for i, m in enumerate(msgs):
        red.feed(Received("sub", 0.0, m, i))
    red.finish()
    return red


def _over_zmq(msgs, events: int) -> dict:
    """A publisher process sends every message over loopback TCP (after the subscription has
    arrived); this process receives and reduces. -> wall seconds until the last batch applied,
    CPU seconds of this process meanwhile."""
    import socket

    from blockviz.live.subscribe import LiveSession
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    src = (
        "import sys, zmq, pickle\n"
        "msgs = pickle.load(sys.stdin.buffer)\n"
        "ctx = zmq.Context(); pub = ctx.socket(zmq.XPUB); pub.setsockopt(zmq.SNDHWM, 0)\n"
        f"pub.bind('tcp://127.0.0.1:{port}')\n"
        "pub.recv()\n"
        "for m in msgs: pub.send_multipart(m)\n"
        "pub.recv() if pub.poll(30000) else None\n")
    import pickle
    proc = subprocess.Popen([sys.executable, "-c", src], stdin=subprocess.PIPE)
    proc.stdin.write(pickle.dumps(msgs))
    proc.stdin.close()
    sess = LiveSession(f"tcp://127.0.0.1:{port}")
    try:
        t0 = None
        cpu0 = time.process_time()
        deadline = time.monotonic() + 300
        while sess.red.batches < len(msgs) and time.monotonic() < deadline:
            got = sess.receive(0.05)
            if got and t0 is None:            # from the first message in
                t0, cpu0 = time.perf_counter(), time.process_time()
            sess.handle(got)
        wall, cpu = time.perf_counter() - (t0 or time.perf_counter()), time.process_time() - cpu0
        got = sess.red.batches
    finally:
        sess.close()
        proc.kill()
        proc.wait()
    return {"wall_s": wall, "cpu_s": cpu, "batches": got, "batches_sent": len(msgs),
            "events_per_s_wall": events / wall if wall else float("nan")}


def _cache(hashes: int):
    """A reduction with ``hashes`` cached: prompts of 4 blocks under 50 shared system prompts,
    fed as batches over the last minute, and some removals."""
    from blockviz.live.capture import Received
    from blockviz.live.stream import Reduction
    from blockviz.live.wire import BlockRemoved, BlockStored, encode_batch
    red = Reduction(replay=False)
    now = time.time()
    roots = [(1 << 62) + k for k in range(50)]
    first = [BlockStored([r], None, list(range(BLOCK)), BLOCK, None, "GPU", None, [None], 0,
                         "full_attention") for r in roots]
    left = hashes - len(roots) + 10        # (10 are removed at the end, below)
    batches, seq, h, k = [first], 0, 1, 0
    batch = []
    while left > 0:                      # prompts of 4 blocks (the last one what is left)
        n = min(4, left)
        hs = list(range(h, h + n))
        h, left = h + n, left - n
        batch.append(BlockStored(hs, roots[k % len(roots)], list(range(n * BLOCK)), BLOCK,
                                 None, "GPU", None, [None] * n, 0, "full_attention"))
        k += 1
        if len(batch) == 50:
            batches.append(batch)
            batch = []
    batches.append(batch + [BlockRemoved([h + 10_000 + i], "GPU", 0) for i in range(5)])
    for i, evs in enumerate(batches):
        t = now - 60 + 60 * i / len(batches)
        red.feed(Received("sub", t, [b"", seq.to_bytes(8, "big"), encode_batch(evs, t, 0)], i))
        seq += 1
    # removals of cached hashes, to fill "removed lately"
    evs = [BlockRemoved([x], "GPU", 0) for x in range(1, 40, 4)]
    red.feed(Received("sub", now, [b"", seq.to_bytes(8, "big"), encode_batch(evs, now, 0)], seq))
    return red


def _page_update(red, now: float) -> str:
    from blockviz.render.live import live_html
    html = live_html(red, lang="en", now=now, status="connected to tcp://127.0.0.1:5557")
    return json.dumps(html)          # what the components-v2 element is sent


def run(repeat: int, quick: bool, say) -> dict:
    events = 30_000 if quick else 300_000
    say(f"  a busy engine's stream: {events:,} events, {STORES} stores + {REMOVES} removals a batch")
    msgs = _stream(events)
    older = _stream(events, older=True)
    n = _count(msgs)
    red = _reduce(msgs)
    if red.notes.total or red.cached() != POOL:
        raise RuntimeError(f"the synthetic stream reduced wrongly: {red.cached()} cached, "
                           f"notes {dict(red.notes.counts)}")
    if _reduce(older).report()["caches"] != red.report()["caches"]:
        raise RuntimeError("the older shape reduced to another state")
    sub: dict[str, list[float]] = {"decode only": [], "decode + reduce": [], "older shape": []}
    for _ in range(max(3, repeat)):
        sub["decode only"].append(timed(lambda: _decode_only(msgs))[1])
        sub["decode + reduce"].append(timed(lambda: _reduce(msgs))[1])
        sub["older shape"].append(timed(lambda: _reduce(older))[1])
    cpu = {k: median(v) for k, v in sub.items()}
    rates = {k: n / v for k, v in cpu.items()}
    say("  the same stream over ZeroMQ (loopback TCP, a publisher process)")
    zmq_run = _over_zmq(msgs, n)
    sizes = (100, 2_000) if quick else (100, 10_000, 100_000)
    page = []
    for size in sizes:
        say(f"  the Live page's update with {size:,} cached hashes")
        r = _cache(size)
        now = time.time()
        html = _page_update(r, now)
        samples = [timed(lambda r=r, now=now: _page_update(r, now))[0] for _ in range(max(5, repeat))]
        page.append({"hashes": r.cached(), "median_s": median(samples), "worst_s": max(samples),
                     "bytes": len(html)})
    ten_k = next((c for c in page if c["hashes"] == 10_000), page[-1])
    small = page[0]
    budgets = [
        {"name": "live: decode + reduce, events a second on one core", "value": rates["decode + reduce"],
         "limit": ">= 50,000", "met": rates["decode + reduce"] >= 50_000, "unit": "events/s"},
        {"name": f"live page: one update with {ten_k['hashes']:,} cached hashes",
         "value": ten_k["median_s"], "limit": "< 0.050", "met": ten_k["median_s"] < 0.050, "unit": "s"},
    ]
    return {"events": n, "batches": len(msgs), "cpu_s": cpu, "events_per_s": rates,
            "reduce_over_decode": ratio(cpu["decode + reduce"], cpu["decode only"]),
            "older_over_current": ratio(cpu["older shape"], cpu["decode + reduce"]),
            "over_zmq": zmq_run, "page": page,
            "page_10k_over_100": ratio(ten_k["median_s"], small["median_s"]), "budgets": budgets}


def render(result: dict) -> str:
    rows = [[k, fmt_s(v), f"{result['events_per_s'][k]:,.0f}"] for k, v in result["cpu_s"].items()]
    out = table([f"{result['events']:,} events, {result['batches']:,} batches", "CPU", "events/s"],
                rows)
    z = result["over_zmq"]
    out += (f"\n  decode + reduce / decode only: {result['reduce_over_decode']:.2f}x; older shape / "
            f"current: {result['older_over_current']:.2f}x"
            f"\n  over ZeroMQ (loopback TCP): {z['batches']:,}/{z['batches_sent']:,} batches in "
            f"{fmt_s(z['wall_s'])} wall, {fmt_s(z['cpu_s'])} CPU here: "
            f"{z['events_per_s_wall']:,.0f} events/s\n")
    out += table(["Live page update, cached hashes", "median", "worst", "sent"],
                 [[f"{c['hashes']:,}", fmt_s(c["median_s"]), fmt_s(c["worst_s"]),
                   f"{c['bytes'] / 1024:,.0f} KiB"] for c in result["page"]])
    return out + f"\n  10,000 (or the largest) / 100 hashes: {result['page_10k_over_100']:.1f}x"
