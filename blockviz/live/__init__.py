"""Live: vLLM's KV-event stream, both ways.

vLLM 0.33 publishes its prefix cache's changes over ZeroMQ (``--kv-events-config``): a PUB socket
sends one ``KVEventBatch`` per engine step that had events, and a ROUTER replays the last batches
on request. This package speaks that wire format and reduces a stream to what a subscriber can
know. No Streamlit here; the Live page draws from :mod:`blockviz.render.live`.

- :mod:`~blockviz.live.wire` — the msgpack payloads (vLLM's struct names, fields and tags; the
  older shapes read too) and the three-frame messages;
- :mod:`~blockviz.live.capture` — the recording framing ``vllm-kv-events-capture/1``;
- :mod:`~blockviz.live.reducer` — the cached hashes per ``(medium, group_idx)`` from events;
- :mod:`~blockviz.live.stream` — sequence numbers: order, duplicates, gaps, replay, restarts;
- :mod:`~blockviz.live.subscribe` — the SUB and DEALER sockets (``blockviz live``);
- :mod:`~blockviz.live.publish` — blockviz's engine publishing a scenario as vLLM would;
- :mod:`~blockviz.live.cli` — ``blockviz live | publish | events``.
"""
