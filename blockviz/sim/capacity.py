"""Capacity replay of a request trace: hit rate against pool size, under vLLM's rules.

**Sequence mode** (the Mooncake paper's method, "considering only the sequence of requests"):
requests in file order, each alone on the engine — ``get_computed_blocks``, ``allocate_slots``
for its whole prompt (which caches the prompt's full blocks), ``free``. Outputs are not cached
(the trace's hash ids cover the prompt only). This is blockviz's own :class:`KVCacheManager`
(``blockviz.core``), op recording and KV events off, on a pool of ``pool_blocks`` usable blocks
(plus vLLM's null block). A request whose allocation fails — in sequence mode exactly when it
needs more blocks than the pool has — is ``rejected`` and changes nothing. Per point:

  * ``queries`` / ``hits`` — prompt tokens of the admitted requests / of those, tokens found in
    the prefix cache (whole blocks, at most ``num_tokens - 1``: vLLM recomputes the last token);
  * ``requests`` / ``rejected`` — admitted / refused requests;
  * ``evictions`` — cached blocks whose hash left the prefix cache when the block was reused
    (vLLM's ``BlockRemoved`` events).

The **ceiling** is an infinite pool under the same rules: every request's full blocks stay
cached, hits are whole blocks up to ``num_tokens - 1``; queries count every request.

Prefix hashes: vLLM hashes each block's token ids, chained (``H_i = sha256((H_{i-1}, tokens_i))``).
A trace's tokens are derived from its hash ids (``blockviz.scenario.trace.prompt_token_ids``):
block ``i`` of a request (``block_size`` dividing 512) is sub-block ``k = i mod (512/block_size)``
of trace block ``j = i div (512/block_size)``, with tokens ``h_j*512 + k*block_size + 0..bs-1`` —
determined by ``(h_j, k)`` and determining it. So two requests' blocks ``i`` have equal chained
hashes exactly when their hash ids ``h_0..h_j`` are equal and ``k`` is too, and the replay keys a
block by ``K_j + k`` with ``K_j = blake2b-128(K_{j-1} + h_j)``: the same equalities as vLLM's
hashes of the derived tokens, without per-token work (the tests check it against the manager fed
real ``Request`` objects hashing those tokens with sha256: ``exact_tokens=True``). A Qwen-Bailian
trace's ids cover 16 tokens (``TraceRequest.block_tokens``): a block of ``g`` of them is keyed by
the last one's ``K``, which fixes the ``g * i + g`` ids before it, as vLLM's chained hash does; a
size finer than the trace's own blocks is refused (``blockviz.scenario.trace``).

**Timed mode** (:func:`replay_timed`): requests arrive at their trace timestamps and go through
blockviz's :class:`~blockviz.core.Scheduler` (vLLM 0.33's: running requests first, the token
budget, ``max_num_seqs``, chunked prefill, full-sequence admission, preemption of the last running
request), each decoding ``output_length`` tokens (at least one: vLLM samples one at the end of the
prefill). Simulated time advances by a settable step cost (:class:`StepCost`), and jumps over idle
gaps to the next arrival. Decoded tokens are cached as vLLM caches them (a block filled by outputs
gets a hash), but they are fresh tokens of that request, so they never hit for another request.

Modes are registered in :data:`MODES`; each one's ``run`` takes the same arguments and returns
the :data:`POINT_FIELDS` (a mode may add fields of its own after them).

**Hybrid models** (a preset's layer mix, :class:`KVShape`): given ``kv_cache_groups``, both modes
and the ceiling run vLLM 0.33's KV-cache groups on one shared pool (one table per group, a
window's blocks freed as the prompt moves on, the hit reconciled across the groups, retention
0), and points add ``limited_hits``: the tokens full attention held past
the hit (:func:`replay_sequence`, :func:`ceiling_groups`). Without groups every number is the
one-group replay's, unchanged.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import partial

from blockviz.core import BlockHasher, KVCacheManager, Request, RequestStatus, Scheduler
from blockviz.core.block_pool import make_block_hash_with_group_id
from blockviz.core.kv_cache_coordinator import replay_boundaries
from blockviz.core.kv_cache_interface import specs_from_groups
from blockviz.core.scheduler import SchedulerConfig
from blockviz.i18n import t
from blockviz.scenario.schema import GROUP_SIZE_FIELD, KVCacheGroup, kv_bytes_per_token, request_id
from blockviz.scenario.trace import (
    MAX_INPUT_LENGTH,
    TRACE_BLOCK_TOKENS,
    TraceRequest,
    check_block_size,
    prompt_token_ids,
)

POINT_FIELDS = ("pool_blocks", "queries", "hits", "requests", "rejected", "evictions")
SEQUENCE_CHUNK_TOKENS = 8192       # vLLM's default max_num_batched_tokens: a lone prompt's chunk
PROGRESS_EVERY = 256            # requests between progress reports
_ROOT = b"blockviz-trace-root"  # K_{-1}
_SUFFIX = [k.to_bytes(2, "little") for k in range(TRACE_BLOCK_TOKENS)]
Progress = Callable[[int], None]   # called with the number of requests done since the last call
PerRequest = Callable[[int, int, bool], None]   # (request index, hit tokens, admitted) per request


def trace_block_keys(hash_ids: Iterable[int]) -> list[bytes]:
    """``K_j`` for each trace block: a 128-bit chain over the hash ids (prefix identity)."""
    keys: list[bytes] = []
    parent = _ROOT
    blake2b = hashlib.blake2b
    for h in hash_ids:
        parent = blake2b(parent + h.to_bytes(8, "little"), digest_size=16).digest()
        keys.append(parent)
    return keys


def block_keys(input_length: int, hash_ids: Iterable[int], block_size: int,
               block_tokens: int = TRACE_BLOCK_TOKENS) -> list[bytes]:
    """The prefix keys of the request's full blocks of ``block_size`` tokens (see the module
    docstring: equal keys exactly where vLLM's hashes of the derived tokens are equal).
    ``block_tokens``: the tokens one hash id covers; a block of several of them (a Qwen-Bailian
    trace's 16-token ids) is keyed by its last one's chain."""
    keys = trace_block_keys(hash_ids)
    full = input_length // block_size
    if block_size >= block_tokens:
        group = block_size // block_tokens
        return keys[group - 1::group][:full]
    suffixes = _SUFFIX[:block_tokens // block_size]
    return [k + s for k in keys for s in suffixes][:full]


def _units(r: TraceRequest, block_size: int) -> list[tuple[bytes, int]]:
    """[(unit key, the request's full blocks in it)]: the trace's own blocks when ``block_size``
    divides them, else the vLLM blocks themselves."""
    if block_size >= r.block_tokens:
        return [(k, 1) for k in block_keys(r.input_length, r.hash_ids, block_size, r.block_tokens)]
    per = r.block_tokens // block_size
    full_total = r.input_length // block_size
    return [(k, min(per, full_total - j * per)) for j, k in enumerate(trace_block_keys(r.hash_ids))]


def checked(trace: Iterable[TraceRequest], block_size: int) -> Iterator[TraceRequest]:
    """The requests, each checked against the block size its trace allows."""
    allowed = None
    for r in trace:
        if r.block_tokens != allowed:
            check_block_size(block_size, r.block_tokens)
            allowed = r.block_tokens
        yield r


class Tally:
    """The capacity code's one progress counter: ``add(n)`` counts work done, ``progress(since)``
    is told the count since the last report once it reaches ``every``, and :meth:`flush` tells the
    rest. Without ``progress`` it counts nothing."""
    __slots__ = ("progress", "every", "since")

    def __init__(self, progress: Progress | None, every: int = PROGRESS_EVERY) -> None:
        self.progress, self.every, self.since = progress, every, 0

    def add(self, n: int = 1) -> None:
        if self.progress is not None:
            self.since += n
            if self.since >= self.every:
                self.flush()

    def flush(self) -> None:
        if self.since:
            self.progress(self.since)
            self.since = 0


def running_total(progress: Callable[[int, int], None] | None, total: int) -> Progress:
    """A :data:`Progress` (n more done) that tells ``progress(done, total)`` the running total,
    never past ``total``: how a sweep's parts report as one piece of work."""
    done = 0

    def add(n: int) -> None:
        nonlocal done
        done = min(done + n, total)
        if progress is not None:
            progress(done, total)
    return add


def counted(items: Iterable, progress: Progress | None) -> Iterator:
    """The items, with ``progress(n)`` told every :data:`PROGRESS_EVERY` of them and at the end."""
    tally = Tally(progress)
    for item in items:
        yield item
        tally.add()
    tally.flush()


class SequenceRequest:
    """A trace request as KVCacheManager reads it in sequence mode: its id, its length and the
    keys of its full blocks. (The manager reads nothing else of a request on this path; the
    tests replay real ``blockviz.core.Request`` objects side by side and compare.) With several
    KV-cache groups it is prefilled chunk by chunk (its computed tokens move), and its lookup
    sets vLLM's ``shared_prefix_boundary``, which a sliding window's caching reads."""
    __slots__ = ("request_id", "num_tokens", "num_prompt_tokens", "block_hashes", "num_computed_tokens",
                 "shared_prefix_boundary")
    num_preemptions = 0
    num_in_flight_tokens = 0
    status = RequestStatus.WAITING
    lora = None
    cache_salt = None
    mm_items = ()
    skip_reading_prefix_cache = False   # a trace's requests ask for no prompt logprobs

    def __init__(self, request_id: str, num_tokens: int, block_hashes: list[bytes]) -> None:
        self.request_id = request_id
        self.num_tokens = self.num_prompt_tokens = num_tokens
        self.block_hashes = block_hashes
        self.num_computed_tokens = 0     # each request is admitted once, fresh
        self.shared_prefix_boundary = 0


def _request(i: int, r: TraceRequest, block_size: int, hasher: BlockHasher | None,
             max_tokens: int | None = None):
    """Request ``i`` of a trace as the manager reads it: its block keys (a :class:`SequenceRequest`,
    or given ``max_tokens`` a :class:`TimedRequest`); with a ``hasher`` (the reference path, slow)
    a real Request hashing the derived tokens."""
    if hasher is not None:
        return Request(request_id(i + 1), prompt_token_ids(r.input_length, r.hash_ids, r.block_tokens),
                       hasher=hasher, block_size=block_size, max_tokens=max_tokens)
    keys = block_keys(r.input_length, r.hash_ids, block_size, r.block_tokens)
    if max_tokens is None:
        return SequenceRequest(request_id(i + 1), r.input_length, keys)
    return TimedRequest(i, r.input_length, keys, max_tokens, block_size)


def _requests(trace: Iterable[TraceRequest], block_size: int, exact_tokens: bool):
    hasher = BlockHasher("sha256") if exact_tokens else None
    return (_request(i, r, block_size, hasher) for i, r in enumerate(checked(trace, block_size)))


def replay_sequence(trace: Iterable[TraceRequest], *, block_size: int, pool_blocks: int,
                    free_order: str = "split", progress: Progress | None = None,
                    exact_tokens: bool = False, on_request: PerRequest | None = None,
                    kv_cache_groups: Sequence | None = None,
                    chunk_tokens: int = SEQUENCE_CHUNK_TOKENS) -> dict:
    """One point of sequence mode (see the module docstring): a dict with :data:`POINT_FIELDS`.
    ``on_request(i, hit_tokens, admitted)`` after each request (a rejected one hit 0).

    With a hybrid model's ``kv_cache_groups`` (e.g. :func:`model_groups`): one shared pool, a
    table per KV-cache group, vLLM 0.33's ``HybridKVCacheCoordinator``. Each request, alone, is
    prefilled as vLLM's scheduler prefills a lone request with chunked prefill on: its lookup (the
    hit reconciled across the groups), admission if its whole sequence fits (a sliding-window or
    chunked group counted at most at its ``max_admission_blocks_per_request``), then chunks of
    ``chunk_tokens`` (the token budget), a window's blocks freed to the null block between chunks,
    so a long prompt holds only its window's blocks in those groups; then it is freed. Retention
    is vLLM 0.33's default (0). The point adds ``limited_hits``: the tokens one group held past the
    reconciled hit (vLLM's ``shared_prefix_boundary`` − hit) summed over the admitted requests:
    what the groups that keep less (a window, a chunk) cost the hit rate, for full attention held
    them. Without groups a request is allocated whole at once."""
    check_block_size(block_size)
    if pool_blocks < 1:
        raise ValueError(f"pool_blocks must be at least 1, not {pool_blocks}")
    hybrid = bool(kv_cache_groups)
    groups = {} if not hybrid else {"kv_cache_groups": specs_from_groups(block_size, kv_cache_groups),
                                    "max_in_flight_tokens": chunk_tokens}
    manager = KVCacheManager(pool_blocks + 1, block_size, free_order=free_order,
                             enable_kv_cache_events=False, **groups)
    get_computed_blocks, allocate_slots, free = (manager.get_computed_blocks,
                                                 manager.allocate_slots, manager.free)
    queries = hits = admitted = rejected = limited = 0
    for req in counted(_requests(trace, block_size, exact_tokens), progress):
        blocks, num_hit, boundary = get_computed_blocks(req)
        req.shared_prefix_boundary = boundary
        n = req.num_tokens
        chunk = min(chunk_tokens, n - num_hit) if hybrid else n - num_hit
        if allocate_slots(req, chunk, num_hit, blocks, full_sequence_must_fit=hybrid) is None:
            rejected += 1
            if on_request is not None:
                on_request(admitted + rejected - 1, 0, False)
            continue
        admitted += 1
        queries += n
        hits += num_hit
        if boundary > num_hit:
            limited += boundary - num_hit
        done = num_hit + chunk
        while done < n:
            req.num_computed_tokens = done
            chunk = min(chunk_tokens, n - done)
            if allocate_slots(req, chunk) is None:    # cannot happen: admission counted it
                raise RuntimeError(f"{req.request_id}: a chunk found no room after admission")
            done += chunk
        free(req)
        if on_request is not None:
            on_request(admitted + rejected - 1, num_hit, True)
    return {"pool_blocks": pool_blocks, "queries": queries, "hits": hits, "requests": admitted,
            "rejected": rejected, "evictions": manager.block_pool.num_evictions,
            **({"limited_hits": limited} if hybrid else {})}


class _EveryKeyCached:
    """The block pool as a lookup sees it when the pool is infinite: every key a group ever
    cached is still cached (nothing is evicted). It answers ``get_cached_block`` as the pool
    does, with a stand-in block."""
    group_keys = True
    key = staticmethod(make_block_hash_with_group_id)

    def __init__(self, null_block) -> None:
        self.null_block = null_block
        self.keys: set[bytes] = set()

    def get_cached_block(self, block_hash: bytes, kv_cache_group_ids=None):
        keys = self.keys
        if kv_cache_group_ids is None:
            return self.null_block if block_hash in keys else None
        for gid in kv_cache_group_ids:
            if make_block_hash_with_group_id(block_hash, gid) not in keys:
                return None
        return [self.null_block] * len(kv_cache_group_ids)


def ceiling_groups(trace: Iterable[TraceRequest], *, block_size: int, kv_cache_groups: Sequence,
                   progress: Progress | None = None, on_request: PerRequest | None = None) -> dict:
    """A hybrid model's ceiling: an infinite pool, the same groups and rules as
    :func:`replay_sequence`. Nothing is evicted, so the state is the set of keys each group has
    cached: per request, the lookup of vLLM's coordinator (its reconciliation over the
    groups, unchanged) against that set, then what each group caches of the blocks past the hit
    (full attention and chunked groups every full block, a sliding window what its retention
    mask keeps: the replay boundary and the shared-prefix boundary). Memory: one key per block a
    group cached. Adds ``limited_hits`` as the replay does."""
    specs = specs_from_groups(block_size, kv_cache_groups)
    manager = KVCacheManager(2, block_size, enable_kv_cache_events=False, kv_cache_groups=specs)
    coordinator = manager.coordinator
    cached = _EveryKeyCached(coordinator.block_pool.null_block)
    coordinator.block_pool = cached          # this throwaway coordinator's lookups read the set
    masks = [(gid, spec, m.masks_blocks, type(m)) for gid, (spec, m) in
             enumerate(zip(specs, coordinator.single_type_managers))]
    keys = cached.keys
    queries = hits = limited = 0
    for i, req in enumerate(counted(_requests(trace, block_size, False), progress)):
        n = req.num_tokens
        _, num_hit, uncached = coordinator.find_longest_cache_hit(req.block_hashes, n - 1)
        if on_request is not None:
            on_request(i, num_hit, True)
        boundary = num_hit + uncached if uncached else 0
        queries += n
        hits += num_hit
        limited += uncached
        first, full = num_hit // block_size, min(n, len(req.block_hashes) * block_size) // block_size
        bounds = replay_boundaries(n) + ((boundary,) if boundary else ())
        for gid, spec, masked, cls in masks:
            keep = (cls.reachable_block_mask(first, full, block_size, spec, 0, bounds)
                    if masked else None)
            for i in range(first, full):
                if keep is None or keep[i - first]:
                    keys.add(make_block_hash_with_group_id(req.block_hashes[i], gid))
    return {"queries": queries, "hits": hits, "limited_hits": limited}


def ceiling(trace: Iterable[TraceRequest], *, block_size: int,
            progress: Progress | None = None, on_request: PerRequest | None = None,
            kv_cache_groups: Sequence | None = None) -> dict:
    """An infinite pool under vLLM's rules: ``{"queries", "hits"}`` over every request.

    Kept per trace block, not per vLLM block: ``seen[K_j]`` is the most full sub-blocks any
    request had in trace block ``j`` (a request with sub-block ``k`` full has ``0..k-1`` full
    too), so memory is one entry per distinct 512-token prefix block whatever ``block_size``
    (per vLLM block when one holds several of the trace's blocks). ``on_request(i, hit_tokens,
    True)`` after each request, as :func:`replay_sequence`'s. With a hybrid model's
    ``kv_cache_groups``: :func:`ceiling_groups`."""
    check_block_size(block_size)
    if kv_cache_groups:
        return ceiling_groups(trace, block_size=block_size, kv_cache_groups=kv_cache_groups,
                              progress=progress, on_request=on_request)
    seen: dict[bytes, int] = {}
    queries = hits = 0
    for i, r in enumerate(counted(checked(trace, block_size), progress)):
        n = r.input_length
        limit = (n - 1) // block_size
        hit = 0
        counting = True
        for key, full in _units(r, block_size):   # full: this request's full blocks in it
            before = seen.get(key, 0)
            if counting:
                hit += min(before, full)
                counting = before >= full
            if full > before:
                seen[key] = full
        hit = min(hit, limit) * block_size
        queries += n
        hits += hit
        if on_request is not None:
            on_request(i, hit, True)
    return {"queries": queries, "hits": hits}


# -- timed mode -------------------------------------------------------------------------------
class OptionError(ValueError):
    """A refused option or setting, kept as an i18n key and its fields (it reads in either
    language)."""

    def __init__(self, key: str, **fields) -> None:
        self.key, self.fields = key, fields
        super().__init__(self.localized("en"))

    def __reduce__(self):   # across processes
        return (partial(OptionError, self.key, **self.fields), ())

    def localized(self, lang: str) -> str:
        return t(self.key, lang, **self.fields)


@dataclass(frozen=True)
class StepCost:
    """What one engine step costs in simulated seconds: ``base_s`` + ``prefill_token_s`` × the
    prompt tokens it computes (prefill chunks, and the recomputation of a resumed request; cache
    hits are not computed, so they cost nothing) + ``decode_seq_s`` × the requests it decodes one
    token for. The defaults are a rough order of magnitude for an 8B model on one current GPU
    (~20,000 prefill tokens a second, a 10 ms step with ~0.1 ms more per decoding sequence); set
    your own from measurements of your deployment."""
    base_s: float = 0.010
    prefill_token_s: float = 0.00005
    decode_seq_s: float = 0.0001

    def __post_init__(self) -> None:
        for name in ("base_s", "prefill_token_s", "decode_seq_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf"):
                raise OptionError("trace_opt_cost_value", name=name, value=repr(v))
        if self.base_s + self.prefill_token_s + self.decode_seq_s <= 0:
            raise OptionError("trace_opt_no_cost")

    def seconds(self, prefill_tokens: int, decode_seqs: int) -> float:
        return self.base_s + self.prefill_token_s * prefill_tokens + self.decode_seq_s * decode_seqs


TIMED_DEFAULTS = {"max_num_batched_tokens": 8192, "max_num_seqs": 256,
                  "max_model_len": MAX_INPUT_LENGTH, "step_base_s": StepCost.base_s,
                  "step_prefill_token_s": StepCost.prefill_token_s,
                  "step_decode_seq_s": StepCost.decode_seq_s}
TIMED_FIELDS = ("preemptions", "preempted_queries", "preempted_hits", "steps", "simulated_s",
                "queue_delay_mean_s", "queue_delay_p50_s", "queue_delay_p90_s",
                "ttft_mean_s", "ttft_p50_s", "ttft_p90_s")
_OUT_TAG = b"out"   # output-block keys: 15 bytes, never equal to a prompt key (16 or 18 bytes)


class TimedRequest(SequenceRequest):
    """A trace request as the scheduler and the manager read it in timed mode: what
    :class:`blockviz.core.Request` holds, with the prompt's block keys for hashes and no token
    list (an appended output only counts; a block it completes gets a key of this request
    alone: an output is fresh, sampled text). The tests run real Requests side by side."""
    __slots__ = ("max_tokens", "status", "finish_reason", "num_preemptions", "num_output_placeholders",
                 "num_in_flight_tokens", "num_stale_output_tokens", "drop_stale_output",
                 "is_prefill_chunk", "_block_size", "_tag", "num_pending_preempted")

    def __init__(self, index: int, num_tokens: int, block_hashes: list[bytes], max_tokens: int,
                 block_size: int) -> None:
        super().__init__(request_id(index + 1), num_tokens, block_hashes)
        self.max_tokens = max_tokens
        self.status = RequestStatus.WAITING
        self.finish_reason = None
        self.num_preemptions = self.num_pending_preempted = 0
        self.num_output_placeholders = self.num_in_flight_tokens = self.num_stale_output_tokens = 0
        self.drop_stale_output = self.is_prefill_chunk = False
        self._block_size = block_size
        self._tag = _OUT_TAG + index.to_bytes(8, "little")

    @property
    def num_output_tokens(self) -> int:
        return self.num_tokens - self.num_prompt_tokens

    def append_output_token_ids(self, token_ids) -> None:
        self.num_tokens += 1 if isinstance(token_ids, int) else len(token_ids)
        hashes, bs = self.block_hashes, self._block_size
        while len(hashes) < self.num_tokens // bs:
            hashes.append(self._tag + len(hashes).to_bytes(4, "little"))

    def is_finished(self) -> bool:
        return self.status is RequestStatus.FINISHED


def output_token(index: int, position: int) -> int:
    """The exact path's sampled token: outside the trace's token space (below 2^62), one per
    (request, output position), so an output block never equals another request's."""
    return (1 << 62) + (index << 21) + position


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest rank: the smallest value with at least ``p``% of the values at or below it
    (0.0 for no values)."""
    if not sorted_values:
        return 0.0
    rank = max(1, -(-p * len(sorted_values) // 100))
    return sorted_values[int(min(rank, len(sorted_values))) - 1]


NO_LENGTH_CAP = 1 << 62   # a max_model_len no request reaches


def needed_blocks(input_length: int, output_length: int, block_size: int, max_model_len: int) -> int:
    """Blocks a request holds at most, alone: slots for every token but the last sampled one
    (``max(1, output_length)`` outputs, the sequence capped at ``max_model_len``)."""
    tokens = min(input_length + max(1, output_length), max_model_len) - 1
    return -(-tokens // block_size)


def timed_settings(**options) -> tuple[SchedulerConfig, StepCost]:
    """Timed mode's options (:data:`TIMED_DEFAULTS` filled in) as the scheduler's settings and the
    step cost; ValueError for what vLLM refuses (the scheduler's own checks) or a cost below 0,
    TypeError for an option timed mode does not have."""
    unknown = sorted(set(options) - set(TIMED_DEFAULTS))
    if unknown:
        raise TypeError(f"timed mode has no option {unknown[0]!r}")
    o = TIMED_DEFAULTS | options
    for name in ("max_num_batched_tokens", "max_num_seqs", "max_model_len"):
        v = o[name]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a whole number >= 1, not {v!r}")
    config = SchedulerConfig(max_num_batched_tokens=o["max_num_batched_tokens"],
                             max_num_seqs=o["max_num_seqs"], max_model_len=o["max_model_len"])
    problems = config.problems()
    if problems:
        raise ValueError(problems[0][1])
    return config, StepCost(o["step_base_s"], o["step_prefill_token_s"], o["step_decode_seq_s"])


def replay_timed(trace: Iterable[TraceRequest], *, block_size: int, pool_blocks: int,
                 free_order: str = "split", progress: Progress | None = None,
                 exact_tokens: bool = False, kv_cache_groups: Sequence | None = None,
                 **options) -> dict:
    """One point of timed mode (see the module docstring): :data:`POINT_FIELDS`, then
    :data:`TIMED_FIELDS` (and, with a hybrid model's ``kv_cache_groups``, ``limited_hits``:
    the pool is shared by the groups as in :func:`replay_sequence`). ``options``: the scheduler's
    settings and the step cost, named and defaulted as in :data:`TIMED_DEFAULTS`
    (:func:`timed_settings`).

    Arrivals: a request arrives at its ``timestamp`` (ms; one earlier than the line before it is
    taken to arrive with that one: the file is in arrival order). Before each step every request
    that has arrived by then is added; with nothing to do, time jumps to the next arrival. A step
    is vLLM's ``schedule()`` then ``update_from_output`` (a sampled token per request that
    samples); it lasts :meth:`StepCost.seconds` of its prompt tokens computed and decoding
    requests. Rejected (counted, never added): a prompt of ``max_model_len`` tokens or more
    (vLLM refuses it) and a request that needs more blocks than the pool alone
    (:func:`needed_blocks` per group, a window's or chunk's group at most its admission cap;
    vLLM does not start with a ``max_model_len`` the KV cache cannot hold — and such a request
    would otherwise preempt itself forever).

    Per admitted request: *queue delay* = its first admission's step start − its arrival; *TTFT*
    = the end of the step that samples its first token − its arrival. Means and nearest-rank
    p50 / p90 over the admitted requests, in simulated seconds. ``queries`` / ``hits`` are vLLM's
    ``PrefixCacheStats`` (first admissions; a resumed request's re-lookup goes to
    ``preempted_queries`` / ``preempted_hits``); ``simulated_s`` runs from the first arrival to
    the end of the last step."""
    check_block_size(block_size)
    if pool_blocks < 1:
        raise ValueError(f"pool_blocks must be at least 1, not {pool_blocks}")
    config, cost = timed_settings(**options)
    max_model_len = config.max_model_len
    groups = {} if not kv_cache_groups else {
        "kv_cache_groups": specs_from_groups(block_size, kv_cache_groups),
        "max_in_flight_tokens": config.max_num_batched_tokens}
    manager = KVCacheManager(pool_blocks + 1, block_size, free_order=free_order,
                             enable_kv_cache_events=False, max_model_len=max_model_len, **groups)
    scheduler = Scheduler(manager, config=config)
    limited = 0
    # the most a request holds alone, per group: a window's or chunk's group no more than its cap
    caps = [m.max_admission_blocks_per_request for m in manager.coordinator.single_type_managers]

    def too_large(r: TraceRequest) -> bool:
        need = needed_blocks(r.input_length, r.output_length, block_size, max_model_len)
        return sum(need if cap is None else min(need, cap) for cap in caps) > pool_blocks

    hasher = BlockHasher("sha256") if exact_tokens else None

    arrival: dict[str, float] = {}     # the requests in the engine: arrival time
    index_of: dict[str, int] = {}
    queued: dict[str, float] = {}      # first admission - arrival
    first_token: set[str] = set()
    queue_delays: list[float] = []
    ttfts: list[float] = []
    rejected = steps = admitted = 0
    tally = Tally(progress)
    first_arrival = None
    now = 0.0
    last_arrival = 0.0
    incoming = enumerate(checked(trace, block_size))
    pending = next(incoming, None)
    while True:
        while pending is not None and max(pending[1].timestamp / 1000.0, last_arrival) <= now:
            i, r = pending
            last_arrival = at = max(r.timestamp / 1000.0, last_arrival)
            if first_arrival is None:
                first_arrival = at
            if r.input_length >= max_model_len or too_large(r):
                rejected += 1
                tally.add()
            else:
                req = _request(i, r, block_size, hasher, max(1, r.output_length))
                scheduler.add_request(req)
                arrival[req.request_id] = at
                index_of[req.request_id] = i
            pending = next(incoming, None)
        if not scheduler.has_unfinished_requests():
            if pending is None:
                break
            now = max(pending[1].timestamp / 1000.0, last_arrival)   # idle: jump to the next arrival
            continue
        out = scheduler.schedule()
        if not out.scheduled:    # cannot happen: every request fits the pool alone
            raise RuntimeError(f"the scheduler made no progress at {now:.6f} s")
        steps += 1
        prefill = decoding = 0
        for item in out.scheduled:
            if item.decode:
                decoding += 1
            else:
                prefill += item.num_new_tokens
        end = now + cost.seconds(prefill, decoding)
        sampled = {}
        for item in out.scheduled:
            rid = item.request.request_id
            if item.admitted and rid not in queued:
                queued[rid] = now - arrival[rid]
                queue_delays.append(queued[rid])
                admitted += 1
                boundary = item.request.shared_prefix_boundary
                if boundary > item.local_hit_tokens:      # one group held more (hybrid models)
                    limited += boundary - item.local_hit_tokens
            if item.samples:
                if rid not in first_token:
                    first_token.add(rid)
                    ttfts.append(end - arrival[rid])
                sampled[rid] = output_token(index_of[rid], item.request.num_output_tokens)
        for rid in scheduler.update_from_output(out, sampled):
            done = scheduler.requests.pop(rid)     # the scheduler keeps every request; a trace is long
            done.block_hashes = []
            del arrival[rid], index_of[rid], queued[rid]
            first_token.discard(rid)
            tally.add()
        now = end
    tally.flush()
    stats = manager.prefix_cache_stats
    queue_delays.sort()
    ttfts.sort()
    n = len(ttfts)
    return {"pool_blocks": pool_blocks, "queries": stats.queries, "hits": stats.hits,
            "requests": admitted, "rejected": rejected, "evictions": manager.block_pool.num_evictions,
            "preemptions": scheduler.num_preemptions, "preempted_queries": stats.preempted_queries,
            "preempted_hits": stats.preempted_hits, "steps": steps,
            "simulated_s": now - first_arrival if steps else 0.0,
            "queue_delay_mean_s": sum(queue_delays) / n if n else 0.0,
            "queue_delay_p50_s": percentile(queue_delays, 50),
            "queue_delay_p90_s": percentile(queue_delays, 90),
            "ttft_mean_s": sum(ttfts) / n if n else 0.0,
            "ttft_p50_s": percentile(ttfts, 50), "ttft_p90_s": percentile(ttfts, 90),
            **({"limited_hits": limited} if kv_cache_groups else {})}


@dataclass(frozen=True)
class Mode:
    """A way of replaying a trace at one pool size. ``run(trace, block_size=, pool_blocks=,
    free_order=, progress=, **options)`` returns a dict with :data:`POINT_FIELDS` (a mode may add
    fields of its own after them)."""
    run: Callable[..., dict]
    defaults: dict = field(default_factory=dict)   # the mode's own options and their defaults
    check: Callable[..., object] | None = None     # check(**options): ValueError if refused


MODES: dict[str, Mode] = {
    "sequence": Mode(replay_sequence),   # requests in file order, each alone (the module docstring)
    "timed": Mode(replay_timed, TIMED_DEFAULTS, timed_settings),   # arrivals through the scheduler
}


# -- a generated workload's replay (the capacity page's workload tab) -----------------------------
def scenario_stats(scenario, *, sink=None, progress: Callable[[int], None] | None = None
                   ) -> tuple[dict[str, int], str | None]:
    """Run a scenario with payloads and the timeline off; its prefix-cache counters (and the
    blocks its largest request needs), and the event that stopped it early, if any. ``sink``, if
    given, receives the op records (an ``OpSink``); ``progress(n)``: n more steps applied."""
    from blockviz.sim.engine import Engine, EngineError
    engine = Engine(scenario, record_ops=False, payloads=False, explain=False)
    if sink is not None:
        engine.watch(sink)
    error = None
    tally = Tally(progress, max(1, len(scenario.steps) // 50))
    for i, step in enumerate(scenario.steps, 1):
        try:
            engine.apply(step)
        except EngineError as e:
            error = f"step {i} ({step.kind}): {e}"
            tally.add(len(scenario.steps) - i + 1)    # the steps not run are done too
            break
        tally.add()
    tally.flush()
    s = engine.capture(()).stats
    largest = max((-(-r.num_tokens // engine.block_size)
                   for r in engine.scheduler.requests.values()), default=1)
    return ({"queries": s.queries, "hits": s.hits, "preempted_queries": s.preempted_queries,
             "preempted_hits": s.preempted_hits, "preemptions": s.preemptions,
             "evictions": s.evictions, "largest_request_blocks": largest}, error)


def replay_scenario(scenario, *, pool_blocks: int, free_order: str,
                    progress: Callable[[int], None] | None = None) -> dict:
    """A scenario (a generated workload) replayed on a pool of ``pool_blocks`` blocks freed in
    ``free_order``, payloads off: a point as a trace's (its error: the event that stopped it)."""
    config = scenario.config.model_copy(update={"num_blocks": pool_blocks, "free_order": free_order,
                                                "model": None})
    s, error = scenario_stats(scenario.model_copy(update={"config": config}), progress=progress)
    del s["largest_request_blocks"]
    return {"pool_blocks": pool_blocks, **s, "error": error}


@dataclass(frozen=True)
class Point:
    """One replay at one pool size and free order — of a trace (a sweep's point, whatever its
    mode) or of a generated workload: what every capacity figure, reading and table takes."""
    pool_blocks: int
    free_order: str
    queries: int
    hits: int
    evictions: int
    preemptions: int = 0
    preempted_queries: int = 0    # resumed requests' re-lookups, beside the rate (vLLM's split)
    preempted_hits: int = 0
    requests: int = 0             # a trace's requests admitted, and refused (larger than the pool)
    rejected: int = 0
    error: str | None = None      # a workload run that stopped early: the event that stopped it
    extra: Mapping = field(default_factory=dict)   # a mode's own fields (timed: TTFT, queueing)

    @property
    def hit_rate(self) -> float:
        """vLLM's: hits / queries (0 when nothing was asked)."""
        return self.hits / self.queries if self.queries else 0.0

    @classmethod
    def of(cls, point: Mapping, free_order: str) -> Point:
        """A replay's point (a dict, as a sweep's report holds it)."""
        names = {f.name for f in fields(cls)} - {"free_order", "extra"}
        return cls(free_order=free_order, **{k: v for k, v in point.items() if k in names},
                   extra={k: v for k, v in point.items() if k not in names})


def points_of(reports: Sequence[Mapping]) -> list[Point]:
    """Every point of a sweep's reports (one report per free order)."""
    return [Point.of(p, r["free_order"]) for r in reports for p in r["points"]]


# -- capacity in bytes, and a model's layer mix ----------------------------------------------------
@dataclass(frozen=True)
class LayerKind:
    """Some of a model's attention layers: their type (a KV-cache group type) and how many; for a
    local type its window (``sliding_window``: W tokens) or chunk (``chunked_local_attention``:
    C tokens)."""
    type: str
    layers: int
    size: int | None = None

    def group(self):
        """A KV-cache group of these layers (``config.kv_cache_groups``' item)."""
        field_name = GROUP_SIZE_FIELD[self.type]
        return KVCacheGroup(type=self.type, **({field_name: self.size} if field_name else {}))


@dataclass(frozen=True)
class KVShape:
    """A model's KV cache: ``layers`` attention layers of ``kv_heads`` × ``head_dim``, and their
    mix of attention types (``mix``, in the order vLLM meets them; empty: every layer full
    attention).

    vLLM 0.33 (``kv_cache_planning._get_kv_cache_groups_uniform_page_size``) puts a hybrid
    model's layers into KV-cache groups of one size: the fewest layers any type has (or the most,
    when no type has 1.5 times another's), each type split into as many groups as that takes (the
    last one padded). Every group's block then holds ``group_size`` layers' K and V for
    ``block_size`` tokens, so one block of the shared pool costs the same in every group, and a
    request holds a block per group for every block of tokens a group keeps (a window's group only
    the last ones). One full-attention group (a dense model) is the model's every layer."""
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2        # fp16 / bf16
    mix: tuple[LayerKind, ...] = ()

    def __post_init__(self) -> None:
        if self.mix and sum(k.layers for k in self.mix) != self.layers:
            raise ValueError(f"the layer mix covers {sum(k.layers for k in self.mix)} layers, "
                             f"not {self.layers}")

    @property
    def hybrid(self) -> bool:
        """More than one attention type: the replay follows vLLM's KV-cache groups."""
        return len(self.mix) > 1

    @property
    def group_size(self) -> int:
        """Layers per KV-cache group (vLLM's rule above; every layer when there is one type)."""
        counts = [k.layers for k in self.mix] or [self.layers]
        low, high = min(counts), max(counts)
        return high if high < low * 1.5 else low

    @property
    def kv_cache_groups(self) -> tuple:
        """vLLM's KV-cache groups of this model, in its order (``config.kv_cache_groups``); one
        full-attention group for a dense model."""
        kinds = self.mix or (LayerKind("full_attention", self.layers),)
        size = self.group_size
        return tuple(k.group() for k in kinds for _ in range(-(-k.layers // size)))

    @property
    def padding_layers(self) -> int:
        """Layers vLLM pads its groups with (memory a block holds for no layer)."""
        return len(self.kv_cache_groups) * self.group_size - self.layers

    @property
    def bytes_per_token(self) -> int:
        """What one token's slot of the pool costs: a group's layers × KV heads × head dim × 2
        (K and V) × dtype bytes. For a dense model that is the model's KV bytes per token; a
        hybrid model's request holds one such slot per group that keeps the token."""
        return kv_bytes_per_token(self.group_size, self.kv_heads, self.head_dim, self.dtype_bytes)

    def describe(self, lang: str = "en") -> str:
        """The shape in words: a dense model's product; a hybrid model's layer mix, vLLM's groups
        and what a pool slot holds."""
        per = t("kv_per_layer", lang, heads=self.kv_heads, dim=self.head_dim, bytes=self.dtype_bytes)
        if not self.hybrid:
            return t("kv_dense", lang, layers=self.layers, per=per)
        kinds = " + ".join(t(f"kv_kind_{k.type}", lang, n=k.layers, size=f"{k.size:,}" if k.size else "")
                           for k in self.mix)
        by_kind = Counter(g.type for g in self.kv_cache_groups)   # one entry a kind, whatever its windows
        groups = t("sep_items", lang).join(t(f"kv_groups_{kind}", lang, n=n) for kind, n in by_kind.items())
        pad = t("kv_padding", lang, n=self.padding_layers) if self.padding_layers else ""
        return t("kv_hybrid", lang, layers=self.layers, kinds=kinds, size=self.group_size,
                 groups=groups, pad=pad, per=per)

    def group_counts(self) -> list[tuple[str, int | None, int]]:
        """(group type, its window or chunk size, how many groups) in vLLM's order."""
        counts = Counter((g.type, g.size) for g in self.kv_cache_groups)
        return [(kind, size, n) for (kind, size), n in counts.items()]


def _mix(*kinds: tuple) -> tuple[LayerKind, ...]:
    return tuple(LayerKind(*k) for k in kinds)


# From each model's config.json on the Hugging Face Hub (num_hidden_layers, num_key_value_heads,
# head_dim, or hidden_size / num_attention_heads), a 16-bit KV cache. Dense models: full attention
# on every layer. Hybrid models, their layer mix in the order of their first layers:
#   gpt-oss-120b / -20b (openai/gpt-oss-*): 36 / 24 layers, layer_types alternating
#     "sliding_attention" (sliding_window 128) and "full_attention", sliding first; 8 KV heads,
#     head_dim 64;
#   gemma-3-27b / -12b (google/gemma-3-*-it, text_config): 62 / 48 layers, every 6th global
#     (sliding_window_pattern 6), the rest sliding_window 1024; 16 KV heads × 128 / 8 × 256;
#   llama-4-scout (meta-llama/Llama-4-Scout-17B-16E): 48 layers, every 4th a global NoPE layer
#     (no_rope_layers), the rest chunked local attention with attention_chunk_size 8192 (vLLM's
#     llama4.py: ChunkedLocalAttention where the layer uses RoPE); 8 KV heads, head_dim 128;
#   qwen3-8b / -32b (Qwen/Qwen3-*): dense, 36 / 64 layers, 8 KV heads, head_dim 128.
KV_PRESETS: dict[str, KVShape] = {
    "llama-3-8b": KVShape(32, 8, 128),        # 128 KiB per token
    "llama-3-70b": KVShape(80, 8, 128),       # 320 KiB
    "llama-3.1-405b": KVShape(126, 8, 128),   # 504 KiB
    "mistral-7b": KVShape(32, 8, 128),        # 128 KiB
    "qwen2.5-7b": KVShape(28, 4, 128),        # 56 KiB
    "qwen2.5-72b": KVShape(80, 8, 128),       # 320 KiB
    "qwen3-8b": KVShape(36, 8, 128),          # 144 KiB
    "qwen3-32b": KVShape(64, 8, 128),         # 256 KiB
    # 2 groups of 18 layers (window, full): 36 KiB a slot
    "gpt-oss-120b": KVShape(36, 8, 64, mix=_mix(("sliding_window", 18, 128), ("full_attention", 18))),
    "gpt-oss-20b": KVShape(24, 8, 64, mix=_mix(("sliding_window", 12, 128), ("full_attention", 12))),
    # 6 window groups of 10 (8 padding layers) + 1 full: 80 KiB a slot
    "gemma-3-27b": KVShape(62, 16, 128, mix=_mix(("sliding_window", 52, 1024), ("full_attention", 10))),
    # 5 window groups of 8 + 1 full: 64 KiB a slot
    "gemma-3-12b": KVShape(48, 8, 256, mix=_mix(("sliding_window", 40, 1024), ("full_attention", 8))),
    # 3 chunked groups of 12 + 1 full: 48 KiB a slot
    "llama-4-scout": KVShape(48, 8, 128, mix=_mix(("chunked_local_attention", 36, 8192),
                                                  ("full_attention", 12))),
}


def limiting_group(model: str) -> str:
    """The kind of KV-cache group that can stop a hybrid preset's hits short of full attention's:
    its one attention type besides full attention."""
    return next(k.type for k in KV_PRESETS[model].mix if k.type != "full_attention")


def model_groups(model: str | None) -> tuple | None:
    """A preset's KV-cache groups when it is hybrid (the replay follows them), else None."""
    shape = KV_PRESETS.get(model) if model else None
    return shape.kv_cache_groups if shape is not None and shape.hybrid else None


def gib(tokens: int, bytes_per_token: int | None) -> float | None:
    """The KV memory of ``tokens`` token slots (a pool's blocks × block size), in GiB; None
    without ``bytes_per_token``."""
    return None if not bytes_per_token else tokens * bytes_per_token / (1 << 30)


# -- choosing pool sizes, reading the curve ---------------------------------------------------
KNEE_FRACTION = 0.9   # the knee: the smallest capacity run reaching 90% of the ceiling's hit rate


def trace_extent(trace: Iterable[TraceRequest], *, block_size: int) -> dict:
    """What bounds a sweep's pool sizes, in blocks of ``block_size``: ``largest`` (the longest
    request alone, prompt and outputs: below it requests are rejected) and ``working_set`` (the
    distinct full prompt blocks of the whole trace, plus the largest request: a pool that big
    never evicts a prompt block in sequence mode)."""
    check_block_size(block_size)
    seen: dict[bytes, int] = {}
    largest = 0
    for r in checked(trace, block_size):
        largest = max(largest, needed_blocks(r.input_length, r.output_length, block_size, NO_LENGTH_CAP))
        for key, full in _units(r, block_size):
            if full > seen.get(key, 0):
                seen[key] = full
    return {"largest": largest, "working_set": sum(seen.values()) + largest}


def geometric_sizes(lo: int, hi: int, count: int) -> list[int]:
    """``count`` pool sizes from ``lo`` to ``hi`` (at least ``2 * lo``), evenly spaced on a log
    axis, whole and distinct."""
    lo = max(1, lo)
    hi = max(hi, 2 * lo)
    if count < 2:
        return [hi]
    ratio = (hi / lo) ** (1 / (count - 1))
    out: list[int] = []
    for i in range(count):
        s = round(lo * ratio ** i) if i < count - 1 else hi
        if not out or s > out[-1]:
            out.append(s)
    return out


def hit_rate(point: dict) -> float:
    """vLLM's hit rate of a point or a ceiling: hits / queries (0 when nothing was asked)."""
    return point["hits"] / point["queries"] if point["queries"] else 0.0


def knee_of(points: Iterable[Point], ceiling: float, fraction: float = KNEE_FRACTION) -> int | None:
    """The knee of a hit-rate curve: the smallest pool size run whose hit rate is at least
    ``fraction`` of the ceiling's (an infinite pool's); None when no size run reaches it or the
    ceiling hits nothing (there is no knee to find)."""
    if ceiling <= 0:
        return None
    reached = [p.pool_blocks for p in points if p.hit_rate >= fraction * ceiling - 1e-12]
    return min(reached) if reached else None
