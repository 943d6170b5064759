"""The generated workload kinds of :mod:`blockviz.teach.workload`, written as Mooncake traces.

A scenario's workload lives at toy scale (tens of blocks, every token an id); a trace describes
real traffic (thousands of requests, thousands of tokens each) by 512-token blocks only. This
generator builds the same four shapes at that scale, directly as hash ids:

  * ``shared_prefix`` — one of ``num_prefixes`` system prompts (``prefix_tokens`` long) + a
    fresh question (``new_tokens`` on average);
  * ``multi_turn``    — conversations (at most ``max_live`` open at once): turn 0 = a system prompt
    + a user message; turn t = the whole previous turn (its prompt and its reply, the previous
    request's ``output_length`` tokens) + a new user message; at most ``max_turns`` turns;
  * ``few_shot``      — a shared instruction (``prefix_tokens / 4``), one of ``num_prefixes``
    example sets (``prefix_tokens``), a short question (a two-level prefix tree);
  * ``random``        — random lengths; 60% of requests start with a whole-block prefix of one of
    the last 1,000 requests.

Lengths are drawn uniformly from half to one and a half times their mean; ``output_length`` too.
Arrivals are a Poisson process of ``rate`` requests per second (``timestamp`` in ms).

Content and hash ids: a prompt is a list of *runs*, each a stretch of one token stream (a system
prompt, a user message, a reply: fresh random tokens). A 512-token block's content is the pieces
of runs it covers; its hash id is assigned, in order of first appearance from 0, to each distinct
(parent block's id, content) — what Mooncake's remapped prefix hashes are: equal ids at a position
mean an equal prefix. A partial last block gets the id of its partial content (as a hash of its
tokens would). Deterministic: one workload and seed, one trace.
"""
from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import IO

from blockviz.i18n import texts
from blockviz.scenario.trace import MAX_INPUT_LENGTH, TRACE_BLOCK_TOKENS, trace_line
from blockviz.sim.capacity import NO_LENGTH_CAP, TIMED_DEFAULTS, needed_blocks
from blockviz.teach.workload import KINDS

RANDOM_SOURCES = 1_000       # random: the earlier requests a prefix may come from
MAX_REQUESTS = 10_000_000

Run = tuple[int, int, int]   # (stream, start, length)


@dataclass(frozen=True)
class TraceWorkload:
    """What to generate. Sizes are in tokens."""
    kind: str = "multi_turn"
    requests: int = 1_000
    seed: int = 0
    prefix_tokens: int = 2_048     # a system prompt / an example set
    new_tokens: int = 512          # mean fresh tokens per request (a question, a user turn)
    output_tokens: int = 256       # mean output_length
    num_prefixes: int = 4          # distinct system prompts / example sets
    max_turns: int = 4             # multi_turn: turns per conversation
    max_live: int = 32             # multi_turn: conversations open at once
    rate: float = 1.0              # mean arrivals per second

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown workload kind {self.kind!r} (one of {', '.join(KINDS)})")
        if not 1 <= self.requests <= MAX_REQUESTS:
            raise ValueError(f"requests must be in 1..{MAX_REQUESTS:,}")
        for name in ("prefix_tokens", "new_tokens", "output_tokens", "num_prefixes", "max_turns",
                     "max_live"):
            if not 1 <= getattr(self, name) <= MAX_INPUT_LENGTH // 4:
                raise ValueError(f"{name} must be in 1..{MAX_INPUT_LENGTH // 4:,}")
        if not self.rate > 0:
            raise ValueError("rate must be a positive number")


def _hash_ids(table: dict[tuple, int], runs: list[Run], total: int, reuse: list[int] = ()) -> list[int]:
    """The hash ids of a prompt of ``total`` tokens made of ``runs``, from ``table`` (block contents
    -> id, in order of first appearance); the ids in ``reuse`` are known to be its first blocks (an
    earlier prompt it starts with)."""
    ids = list(reuse)
    starts = list(accumulate((length for _, _, length in runs), initial=0))[:-1]   # where each run starts
    parent = ids[-1] if ids else -1
    for j in range(len(ids), -(-total // TRACE_BLOCK_TOKENS)):
        lo, hi = j * TRACE_BLOCK_TOKENS, min(total, (j + 1) * TRACE_BLOCK_TOKENS)
        i = bisect.bisect_right(starts, lo) - 1
        pieces: list[tuple[int, int, int]] = []
        while i < len(runs) and starts[i] < hi:
            stream, start, length = runs[i]
            a, b = max(lo, starts[i]), min(hi, starts[i] + length)
            p = (stream, start + a - starts[i], start + b - starts[i])
            if pieces and pieces[-1][0] == stream and pieces[-1][2] == p[1]:
                p = (stream, pieces.pop()[1], p[2])   # one stretch of one stream
            pieces.append(p)
            i += 1
        key = (parent, tuple(pieces))
        parent = table.setdefault(key, len(table))
        ids.append(parent)
    return ids


def _prefix(runs: list[Run], length: int) -> list[Run]:
    out, pos = [], 0
    for stream, start, n in runs:
        if pos >= length:
            break
        take = min(n, length - pos)
        out.append((stream, start, take))
        pos += take
    return out


class _Generator:
    def __init__(self, w: TraceWorkload) -> None:
        self.w = w
        self.rng = random.Random(f"blockviz-trace/{w.kind}/{w.seed}")
        self.ids: dict[tuple, int] = {}   # block contents -> hash id
        self.streams = 0
        self.shared: dict[str, Run] = {}
        # multi_turn: open conversations -> (runs, total, ids, last output_length, turns so far)
        self.open: list[list] = []
        self.recent: deque = deque(maxlen=RANDOM_SOURCES)   # random: (runs, total, ids)

    def around(self, mean: int) -> int:
        return max(1, self.rng.randint(mean // 2, mean + mean // 2))

    def fresh(self, n: int) -> Run:
        self.streams += 1
        return (self.streams, 0, n)

    def part(self, name: str, n: int) -> Run:
        """A shared stretch of tokens (a system prompt, an example set): the same every time."""
        if name not in self.shared:
            self.shared[name] = self.fresh(n)
        return self.shared[name]

    def request(self) -> tuple[list[Run], list[int], int]:
        return getattr(self, f"req_{self.w.kind}")()

    def finish(self, runs: list[Run], reuse: list[int] = ()) -> tuple[list[Run], list[int], int]:
        total = sum(r[2] for r in runs)
        if total > MAX_INPUT_LENGTH:
            raise ValueError(f"a prompt grew past {MAX_INPUT_LENGTH:,} tokens: use fewer turns or "
                             f"shorter messages")
        return runs, _hash_ids(self.ids, runs, total, reuse), self.around(self.w.output_tokens)

    def req_shared_prefix(self):
        w = self.w
        k = self.rng.randrange(w.num_prefixes)
        return self.finish([self.part(f"sys{k}", w.prefix_tokens), self.fresh(self.around(w.new_tokens))])

    def req_few_shot(self):
        w = self.w
        k = self.rng.randrange(w.num_prefixes)
        instruction = self.part("instruction", max(1, w.prefix_tokens // 4))
        return self.finish([instruction, self.part(f"examples{k}", w.prefix_tokens),
                            self.fresh(max(1, self.around(w.new_tokens) // 2))])

    def req_multi_turn(self):
        w = self.w
        if self.open and (self.rng.random() < 0.7 or len(self.open) >= w.max_live):
            i = self.rng.randrange(len(self.open))
            runs, total, ids, out_len, turns = self.open.pop(i)
            # The whole previous turn: its prompt, then its reply; then the new message.
            new = runs + [self.fresh(out_len), self.fresh(self.around(w.new_tokens))]
            runs, ids, out = self.finish(new, ids[:total // TRACE_BLOCK_TOKENS])
        else:
            i, turns = len(self.open), 0
            runs, ids, out = self.req_shared_prefix()      # a new conversation's first turn
        if turns + 1 < w.max_turns:                        # open still, in its place
            self.open.insert(i, [runs, sum(r[2] for r in runs), ids, out, turns + 1])
        return runs, ids, out

    def req_random(self):
        w = self.w
        runs: list[Run] = []
        reuse: list[int] = []
        if self.recent and self.rng.random() < 0.6:
            src_runs, src_total, src_ids = self.rng.choice(self.recent)
            blocks = src_total // TRACE_BLOCK_TOKENS
            if blocks:
                take = self.rng.randint(1, blocks)
                runs = _prefix(src_runs, take * TRACE_BLOCK_TOKENS)
                reuse = src_ids[:take]
        size = self.rng.randint(1, max(1, w.prefix_tokens // 2 + w.new_tokens))
        runs, ids, out = self.finish(runs + [self.fresh(size)], reuse)
        self.recent.append((runs, sum(r[2] for r in runs), ids))
        return runs, ids, out


def generate_trace(w: TraceWorkload) -> Iterator[tuple[int, int, int, list[int]]]:
    """(timestamp ms, input_length, output_length, hash_ids) per request, in arrival order."""
    g = _Generator(w)
    clock = random.Random(f"blockviz-trace-arrivals/{w.seed}")
    t = 0.0
    for _ in range(w.requests):
        runs, ids, out = g.request()
        yield round(t * 1000), sum(r[2] for r in runs), out, ids
        t += clock.expovariate(w.rate)


def write_generated(w: TraceWorkload, f: IO[str]) -> int:
    """Write the trace as JSON Lines; the number of requests written."""
    for r in generate_trace(w):
        f.write(trace_line(*r) + "\n")
    return w.requests


# -- a window of a trace, in the player -----------------------------------------------------------
PLAYER_SCALE = 128             # a trace block of 512 tokens becomes one player block of 4 tokens
PLAYER_BLOCK_TOKENS = TRACE_BLOCK_TOKENS // PLAYER_SCALE
PLAYER_MAX_BLOCKS = 256        # the player's pool at most (its block grid stays legible)
PLAYER_MAX_WINDOW = 12         # requests in a window at most
MAX_GAP_STEPS = 8              # timed: engine steps between two arrivals at most


@dataclass(frozen=True)
class TraceWindow:
    """A scenario (a plain dict, the scenario format) replaying a window of a trace at one pool
    size, scaled down to what the player shows, and what the scaling did."""
    scenario: dict
    lines: tuple[int, ...]         # the trace lines it replays
    skipped: tuple[int, ...]       # lines of requests too large for the player's pool
    player_blocks: int             # the player's pool: one block per 512 tokens of the real one
    real_trace_blocks: int         # the real pool in 512-token blocks (before the cap)


def _scaled(tokens: int) -> int:
    return max(1, -(-tokens // PLAYER_SCALE))


def _in_trace_blocks(r, units: dict):
    """A request whose ids cover fewer than 512 tokens (a Qwen-Bailian trace's 16) as one of
    512-token blocks: each run of 512/b ids is one block whose id stands for that run (the same runs
    in the same order are the same prefix, as vLLM's chained hash sees it at block size 512)."""
    if r.block_tokens == TRACE_BLOCK_TOKENS:
        return r
    g = TRACE_BLOCK_TOKENS // r.block_tokens
    ids = [units.setdefault(tuple(r.hash_ids[k:k + g]), len(units)) for k in range(0, len(r.hash_ids), g)]
    return r._replace(hash_ids=ids, block_tokens=TRACE_BLOCK_TOKENS)


def window_scenario(window: list, *, pool_blocks: int, block_size: int, free_order: str = "split",
                    mode: str = "sequence", options: dict | None = None) -> TraceWindow:
    """The requests of ``window`` (TraceRequests, in file order) as a scenario for the player.

    Scale: every 512-token trace block is one player block of ``PLAYER_BLOCK_TOKENS`` tokens
    (hash id *h* gives the same tokens wherever it appears, so equal id prefixes still share
    blocks), a partial last block keeps its share (rounded up, but partial: 1 to 3 tokens),
    outputs are divided by ``PLAYER_SCALE`` (rounded up); the pool is the real one in 512-token
    blocks, at most ``PLAYER_MAX_BLOCKS``. The cache starts empty (the replay's cache at that
    point held earlier requests' blocks). A request that does not fit the player's pool alone is left out.

    ``sequence``: each request arrives with one output token, so it is admitted, prefilled and
    finished in its own step (sequence mode: lookup, allocate, cache, free). ``timed``: each
    arrives with its scaled outputs; between two arrivals the engine runs as many steps as fit
    the gap at the cost of a one-request decode step (at most ``MAX_GAP_STEPS``); then it runs
    until every request has finished. The scheduler's budget, max_num_seqs and max_model_len are
    scaled like the tokens."""
    if not 1 <= len(window) <= PLAYER_MAX_WINDOW:
        raise ValueError(f"a window holds 1 to {PLAYER_MAX_WINDOW} requests, not {len(window)}")
    units: dict[tuple, int] = {}
    window = [_in_trace_blocks(r, units) for r in window]
    real = pool_blocks * block_size // TRACE_BLOCK_TOKENS
    player_blocks = max(1, min(real, PLAYER_MAX_BLOCKS))
    opts = TIMED_DEFAULTS | dict(options or {})
    timed = mode == "timed"
    token_of: dict[int, int] = {}
    steps: list[dict] = []
    lines, skipped = [], []
    work = 0
    prev_ms = None
    step_s = opts["step_base_s"] + opts["step_decode_seq_s"]
    for r in window:
        rem = r.input_length - TRACE_BLOCK_TOKENS * (len(r.hash_ids) - 1)
        # a partial trace block stays partial (never full, so never cached: as at block size 512)
        last = (PLAYER_BLOCK_TOKENS if rem == TRACE_BLOCK_TOKENS
                else min(PLAYER_BLOCK_TOKENS - 1, _scaled(rem)))
        prompt_len = PLAYER_BLOCK_TOKENS * (len(r.hash_ids) - 1) + last
        outputs = _scaled(max(1, r.output_length)) if timed else 1
        if needed_blocks(prompt_len, outputs, PLAYER_BLOCK_TOKENS, NO_LENGTH_CAP) > player_blocks:
            skipped.append(r.line)
            continue
        tokens: list[int] = []
        for j, h in enumerate(r.hash_ids):
            base = PLAYER_BLOCK_TOKENS * token_of.setdefault(h, len(token_of))
            tokens += range(base, base + min(PLAYER_BLOCK_TOKENS, prompt_len - j * PLAYER_BLOCK_TOKENS))
        if timed and prev_ms is not None and step_s > 0:
            gap = min(MAX_GAP_STEPS, int((r.timestamp - prev_ms) / 1000 / step_s))
            if gap > 0:
                steps.append({"step": gap})
        prev_ms = r.timestamp
        steps.append({"arrive": {"id": f"L{r.line}", "prompt": [{"tokens": tokens}],
                                 "max_tokens": outputs}})
        lines.append(r.line)
        work += outputs + prompt_len
    config: dict = {"num_blocks": player_blocks, "block_size": PLAYER_BLOCK_TOKENS,
                    "free_order": free_order, "model": None}
    if timed:
        budget = max(PLAYER_BLOCK_TOKENS, opts["max_num_batched_tokens"] // PLAYER_SCALE)
        config["scheduler"] = {
            "max_num_batched_tokens": budget,
            "max_num_seqs": min(opts["max_num_seqs"], budget),
            "max_model_len": max(2, opts["max_model_len"] // PLAYER_SCALE)}
        if lines:
            steps.append({"step": min(10_000, work)})
    if not steps:
        steps.append({"note": texts("tw_none_fit")})
    first, last = window[0].line, window[-1].line
    return TraceWindow(
        {"id": f"trace-window-{first}-{last}",
         "title": texts("tw_title", first=first, last=last, pool=f"{pool_blocks:,}",
                        mode=texts("capt_mode_timed" if timed else "capt_mode_sequence")),
         "start_note": texts("tw_start_note", bt=PLAYER_BLOCK_TOKENS, scale=PLAYER_SCALE,
                             pool=f"{pool_blocks:,}", bs=block_size, real=f"{real:,}",
                             player=player_blocks),
         "config": config, "steps": steps},
        tuple(lines), tuple(skipped), player_blocks, real)
