"""vLLM's metrics, as vLLM 0.33 computes and exports them (v1/metrics/loggers.py, stats.py), fed
by blockviz's scheduler the way vLLM's engine feeds its stat loggers: one ``SchedulerStats`` per
``update_from_output`` (``VllmStatLogger.record``).

* The Prometheus families (``PrometheusStatLogger.record``): gauges ``vllm:num_requests_running``,
  ``vllm:num_requests_waiting`` (and by reason, capacity or deferred), ``vllm:kv_cache_usage_perc``
  (a fraction despite its name: blocks held by requests over every block but the null block) —
  each the value of the last engine step; counters ``vllm:prefix_cache_queries`` / ``_hits`` (the
  tokens of requests at their *first* admission: a resumed request's re-lookup is in neither),
  ``vllm:external_prefix_cache_queries`` / ``_hits`` (the connector's), ``vllm:num_preemptions``
  (a preemption counts when the preempted request next emits output, so later than it happens),
  ``vllm:prompt_tokens_cached_by_source`` for the device (the local hits) and the connector's
  tiers. Counters are cumulative: ``reset_prefix_cache`` does not touch them.
* The log line's hit rate (``LoggingStatLogger``'s ``CachingMetrics``): the hits over the queries of
  the most recent ~1,000 *requests*, kept in whole engine steps (a step's admissions enter
  together; a step with none is not kept), emptied by a reset; absent from the line while empty.
* Beside them, from the pool after the step, what usage does not say: the blocks requests hold,
  how full those blocks are with tokens, and the blocks that are free but still cached.

A new engine process (``restart``) starts every counter and window at zero; a checkpoint saves
them with the engine state.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

MAX_RECENT_REQUESTS = 1000      # vLLM's CachingMetrics default (stats.py:47)


@dataclass
class CachingWindow:
    """vLLM's ``CachingMetrics`` (stats.py:39-117): (requests, queries, hits) of recent updates, and
    its ``empty`` and ``hit_rate`` (tests/core/test_vllm_scheduler.py compares all five with vLLM's)."""
    max_recent_requests: int = MAX_RECENT_REQUESTS
    requests: int = 0
    queries: int = 0
    hits: int = 0
    queue: deque = field(default_factory=deque)

    def observe(self, stats) -> None:
        if stats.reset:
            self.requests = self.queries = self.hits = 0
            self.queue.clear()
        if stats.requests == 0:
            return
        self.queue.append((stats.requests, stats.queries, stats.hits))
        self.requests += stats.requests
        self.queries += stats.queries
        self.hits += stats.hits
        while len(self.queue) > 1 and self.requests > self.max_recent_requests:
            r, q, h = self.queue.popleft()
            self.requests -= r
            self.queries -= q
            self.hits -= h

    @property
    def empty(self) -> bool:
        return self.requests == 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0


@dataclass
class VllmMetrics:
    """vLLM's metrics after a step (see the module docstring); every field a number. (The stat
    logger keeps one up to date; a step's is a copy.)"""
    num_requests_running: int = 0
    num_requests_waiting_capacity: int = 0
    num_requests_waiting_deferred: int = 0
    kv_cache_usage_perc: float = 0.0
    prefix_cache_queries_total: int = 0
    prefix_cache_hits_total: int = 0
    external_prefix_cache_queries_total: int = 0
    external_prefix_cache_hits_total: int = 0
    num_preemptions_total: int = 0
    prompt_tokens_cached_host_total: int = 0      # by_source{source="host"}: the CPU tier's
    logged_requests: int = 0                      # the log line's window
    logged_queries: int = 0
    logged_hits: int = 0
    logged_external_requests: int = 0
    logged_external_queries: int = 0
    logged_external_hits: int = 0
    engine_step: int = 0                          # the last engine step recorded

    @property
    def num_requests_waiting(self) -> int:
        return self.num_requests_waiting_capacity + self.num_requests_waiting_deferred

    @property
    def logged_hit_rate(self) -> float | None:
        """The log line's ``Prefix cache hit rate`` (None: the line leaves it out)."""
        return self.logged_hits / self.logged_queries if self.logged_requests else None

    @property
    def logged_external_hit_rate(self) -> float | None:
        return (self.logged_external_hits / self.logged_external_queries
                if self.logged_external_requests else None)

    def to_dict(self, pool: PoolFigures) -> dict:
        """The JSON contract's ``vllm_metrics`` (``pool``: the step's pool, ``pool_figures``)."""
        return {
            "num_requests_running": self.num_requests_running,
            "num_requests_waiting": self.num_requests_waiting,
            "num_requests_waiting_by_reason": {
                "capacity": self.num_requests_waiting_capacity,
                "deferred": self.num_requests_waiting_deferred},
            "kv_cache_usage_perc": self.kv_cache_usage_perc,
            **{k: getattr(self, k) for k in (
                "prefix_cache_queries_total", "prefix_cache_hits_total",
                "external_prefix_cache_queries_total", "external_prefix_cache_hits_total",
                "num_preemptions_total")},
            "prompt_tokens_cached_by_source": {"device": self.prefix_cache_hits_total,
                                               "host": self.prompt_tokens_cached_host_total},
            "logged_hit_rate": {"rate": self.logged_hit_rate, "requests": self.logged_requests,
                                "queries": self.logged_queries, "hits": self.logged_hits},
            "logged_external_hit_rate": {
                "rate": self.logged_external_hit_rate,
                "requests": self.logged_external_requests,
                "queries": self.logged_external_queries, "hits": self.logged_external_hits},
            "used_blocks": pool.used_blocks, "cached_free_blocks": pool.cached_free_blocks,
            "token_occupancy": pool.token_occupancy, "engine_step": self.engine_step}


@dataclass(frozen=True)
class PoolFigures:
    """What the pool holds after a step, beside vLLM's usage: blocks requests hold (the null
    block aside; vLLM's usage is this over every other block), blocks free but still cached, and
    the share of every usable block's slots that hold a token of a held block."""
    used_blocks: int
    cached_free_blocks: int
    token_occupancy: float


def pool_figures(ref_cnt, block_hash, block_tokens, block_size: int) -> PoolFigures:
    usable = len(ref_cnt) - 1
    used = cached_free = tokens = 0
    for b in range(1, len(ref_cnt)):
        if ref_cnt[b] > 0:
            used += 1
            tokens += len(block_tokens[b])
        elif block_hash[b] is not None:
            cached_free += 1
    slots = usable * block_size
    return PoolFigures(used, cached_free, tokens / slots if slots else 0.0)


@dataclass
class VllmStatLogger:
    """vLLM's two stat loggers over blockviz's scheduler: fed one ``SchedulerStats`` per engine
    step (``record``); read with the pool after a step (``metrics``)."""
    now: VllmMetrics = field(default_factory=VllmMetrics)   # the gauges and counters so far
    window: CachingWindow = field(default_factory=CachingWindow)
    ext_window: CachingWindow = field(default_factory=CachingWindow)

    def record(self, stats, engine_step: int) -> None:
        """PrometheusStatLogger.record and LoggingStatLogger.record of one update's stats."""
        m, p, c = self.now, stats.prefix_cache_stats, stats.connector_prefix_cache_stats
        m.engine_step, m.num_requests_running = engine_step, stats.num_running_reqs
        m.num_requests_waiting_capacity = stats.num_waiting_reqs
        m.num_requests_waiting_deferred = stats.num_skipped_waiting_reqs
        m.kv_cache_usage_perc = stats.kv_cache_usage
        m.prefix_cache_queries_total += p.queries
        m.prefix_cache_hits_total += p.hits
        self.window.observe(p)
        if c is not None:
            m.external_prefix_cache_queries_total += c.queries
            m.external_prefix_cache_hits_total += c.hits
            m.prompt_tokens_cached_host_total += c.hits_by_source.get("host", 0)
            self.ext_window.observe(c)
        m.num_preemptions_total += stats.num_preempted_reqs

    def metrics(self) -> VllmMetrics:
        """The metrics now, with the log line's windows (the pool's figures are the step's:
        ``pool_figures``)."""
        w, x = self.window, self.ext_window
        return replace(self.now, logged_requests=w.requests, logged_queries=w.queries,
                       logged_hits=w.hits, logged_external_requests=x.requests,
                       logged_external_queries=x.queries, logged_external_hits=x.hits)
