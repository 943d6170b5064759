"""What observers see of the engine: immutable views that :meth:`Engine.capture` builds and the
timeline stores (requests, stats, the engine steps an event ran). Nothing here reaches into the
engine; the engine fills these in."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RequestView:
    request_id: str
    status: str
    num_prompt_tokens: int
    num_tokens: int
    num_computed_tokens: int
    num_preemptions: int
    local_hit_blocks: int
    external_hit_blocks: int
    max_tokens: int | None
    lora: str | None
    cache_salt: str | None
    finish_reason: str | None = None
    num_output_placeholders: int = 0   # async scheduling: outputs scheduled, not yet applied
    # append-only lists shared with the engine (never mutated past the recorded lengths)
    _tokens: list = field(default_factory=list, repr=False, compare=False)
    _blocks: list | None = field(default=None, repr=False, compare=False)
    _num_blocks: int = 0
    _hashes: list | None = field(default=None, repr=False, compare=False)  # block hashes, shared

    @property
    def token_ids(self) -> tuple[int, ...]:
        return tuple(self._tokens[:self.num_tokens])

    @property
    def block_ids(self) -> tuple[int, ...]:
        if self._blocks is None:
            return ()
        return tuple(b.block_id for b in self._blocks[:self._num_blocks])

    def to_dict(self) -> dict:
        return {"status": self.status, "block_table": list(self.block_ids),
                "num_prompt_tokens": self.num_prompt_tokens, "num_tokens": self.num_tokens,
                "num_computed_tokens": self.num_computed_tokens, "token_ids": list(self.token_ids),
                "num_preemptions": self.num_preemptions, "local_hit_blocks": self.local_hit_blocks,
                "external_hit_blocks": self.external_hit_blocks, "max_tokens": self.max_tokens,
                "lora": self.lora, "cache_salt": self.cache_salt,
                "finish_reason": self.finish_reason,
                "num_output_placeholders": self.num_output_placeholders}


@dataclass(frozen=True)
class Stats:
    """Cumulative counters after a step. ``requests/queries/hits`` and ``preempted_*`` are vLLM's
    ``PrefixCacheStats`` split (vLLM's hit rate is ``hits / queries``); ``prefix_cache_*`` are the
    totals of both (the contract's first fields)."""
    num_free_blocks: int
    usage: float
    prefix_cache_queries: int
    prefix_cache_hits: int
    external_queries: int
    external_hits: int
    preemptions: int
    evictions: int
    num_cached_blocks: int
    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0
    reset: bool = False          # this step's reset_prefix_cache restarted vLLM's hit-rate window
    # the connector's PrefixCacheStats split (``external_queries/hits`` are its totals), and its
    # hits by source (vLLM CacheHitSource: "host" is the CPU tier)
    external_requests: int = 0
    external_preempted_requests: int = 0
    external_preempted_queries: int = 0
    external_preempted_hits: int = 0
    external_hits_host: int = 0

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        host = d.pop("external_hits_host")
        d["external_hits_by_source"] = {"host": host} if host else {}
        return d

    @property
    def hit_rate(self) -> float | None:
        """vLLM's prefix-cache hit rate: resumed re-lookups are not in it."""
        return self.hits / self.queries if self.queries else None


@dataclass(frozen=True)
class ScheduledView:
    """One request in one engine step."""
    request_id: str
    num_tokens: int               # tokens scheduled (their K/V computed this step)
    decode: bool                  # a decode token (else a prefill chunk, or the whole prefill)
    admitted: bool = False        # taken from the waiting queue in this step
    resumed: bool = False         # ... after a preemption
    local_hit_tokens: int = 0
    external_hit_tokens: int = 0
    samples: bool = False         # the step samples a token for it (its prefill is complete)


@dataclass(frozen=True)
class EngineStepView:
    """One vLLM engine step (schedule -> execute -> update) inside an event."""
    scheduled: tuple[ScheduledView, ...]
    preempted: tuple[str, ...]
    finished: tuple[str, ...]              # stopped at max_tokens / max_model_len by this update
    sampled: tuple[tuple[str, int], ...]   # tokens applied by this update (async: last step's)
    token_budget: int
    teaching_only: bool = False

    @property
    def num_scheduled_tokens(self) -> int:
        return sum(s.num_tokens for s in self.scheduled)

    def to_dict(self) -> dict:
        admitted = {s.request_id: {"local_hit_tokens": s.local_hit_tokens,
                                   "external_hit_tokens": s.external_hit_tokens,
                                   "resumed": s.resumed}
                    for s in self.scheduled if s.admitted}
        d = {"scheduled": {s.request_id: s.num_tokens for s in self.scheduled},
             "preempted": list(self.preempted), "finished": list(self.finished),
             "decode": [s.request_id for s in self.scheduled if s.decode],
             "admitted": admitted, "sampled": dict(self.sampled),
             "num_scheduled_tokens": self.num_scheduled_tokens,
             "token_budget": self.token_budget}
        if self.teaching_only:
            d["teaching_only"] = True
        return d
