"""vLLM's metrics of a step in the Prometheus text format (0.0.4), as vLLM 0.33's
``PrometheusStatLogger`` registers them (v1/metrics/loggers.py: names, HELP texts, labels
``engine`` and ``model_name``, counters with ``_total``) and ``prometheus_client`` prints them
(values as Python floats, labels sorted). No ``_created`` samples: a single-process server prints
one after each counter with its creation time; there is no clock here. Then the log line's
equivalent (``LoggingStatLogger.log``, without the throughputs) as a comment."""
from __future__ import annotations

from blockviz.sim.metrics import VllmMetrics

# (name, type, HELP) in vLLM's order; HELP texts verbatim (loggers.py:473-1336)
FAMILIES = (
    ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches."),
    ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."),
    ("vllm:num_requests_waiting_by_reason", "gauge",
     "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
     "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked "
     "status). Sum of all reasons equals vllm:num_requests_waiting."),
    ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage."),
    ("vllm:prefix_cache_queries_total", "counter",
     "Prefix cache queries, in terms of number of queried tokens."),
    ("vllm:prefix_cache_hits_total", "counter",
     "Prefix cache hits, in terms of number of cached tokens."),
    ("vllm:external_prefix_cache_queries_total", "counter",
     "External prefix cache queries from KV connector cross-instance cache sharing, in terms of "
     "number of queried tokens."),
    ("vllm:external_prefix_cache_hits_total", "counter",
     "External prefix cache hits from KV connector cross-instance cache sharing, in terms of "
     "number of cached tokens."),
    ("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine."),
    ("vllm:prompt_tokens_cached_by_source_total", "counter",
     "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host "
     "(offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
     "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
     "vllm:external_prefix_cache_hits."),
)
SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")


def _samples(m: VllmMetrics, name: str) -> list[tuple[dict, float]]:
    """A family's samples: (its labels, its value); a family of one sample is the field of
    VllmMetrics of its name."""
    if name == "vllm:num_requests_waiting_by_reason":
        return [({"reason": "capacity"}, m.num_requests_waiting_capacity),
                ({"reason": "deferred"}, m.num_requests_waiting_deferred)]
    if name == "vllm:prompt_tokens_cached_by_source_total":
        by = {"device": m.prefix_cache_hits_total, "host": m.prompt_tokens_cached_host_total}
        return [({"source": s}, by.get(s, 0)) for s in SOURCES]
    return [({}, getattr(m, name.removeprefix("vllm:")))]


def prometheus_text(m: VllmMetrics, model_name: str = "blockviz", engine: int = 0) -> str:
    """The families as a /metrics scrape shows them."""
    base = {"engine": str(engine), "model_name": model_name}
    out = []
    for name, kind, help_text in FAMILIES:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in _samples(m, name):
            text = ",".join(f'{k}="{v}"' for k, v in sorted({**base, **labels}.items()))
            out.append(f"{name}{{{text}}} {float(value)!r}")
    return "\n".join(out) + "\n"


def log_line(m: VllmMetrics, engine: int = 0) -> str:
    """vLLM's periodic log line (loggers.py:276-338) without its two throughputs."""
    parts = [f"Running: {m.num_requests_running} reqs",
             f"Waiting: {m.num_requests_waiting} reqs"]
    if m.num_requests_waiting_deferred:
        parts.append(f"Deferred: {m.num_requests_waiting_deferred} reqs")
    parts.append(f"GPU KV cache usage: {m.kv_cache_usage_perc * 100:.1f}%")
    if m.logged_hit_rate is not None:
        parts.append(f"Prefix cache hit rate: {m.logged_hit_rate * 100:.1f}%")
    if m.logged_external_hit_rate is not None:
        parts.append(f"External prefix cache hit rate: {m.logged_external_hit_rate * 100:.1f}%")
    return f"Engine {engine:03d}: " + ", ".join(parts)
