"""Request — the part of vllm/v1/request.py that the block manager reads (vLLM 0.33).

A request owns its token ids (prompt, then outputs) and the hashes of its full blocks; the hashes
grow as appended tokens complete a block, exactly as vLLM's ``Request.append_output_token_ids``
calls its block hasher.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from blockviz.core.hashing import BlockHasher, LoRA, MMItem


class RequestStatus(enum.StrEnum):
    """vLLM's ``RequestStatus``, with its finished statuses folded into one (the JSON contract's
    ``finished``); ``Request.finish_reason`` keeps vLLM's reason (its ``FinishReason`` text):
    ``FINISH_LENGTH`` for ``FINISHED_LENGTH_CAPPED`` (max_tokens or max_model_len),
    ``FINISH_STOP`` for ``FINISHED_STOPPED`` (a stop token or stop string: a scenario's
    ``finish``), ``FINISH_ABORT`` for ``FINISHED_ABORTED`` (the client's abort: a scenario's
    ``abort``)."""
    WAITING = "waiting"
    WAITING_FOR_REMOTE_KVS = "waiting_for_remote_kvs"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"


FINISH_LENGTH = "length"
FINISH_STOP = "stop"
FINISH_ABORT = "abort"
# vLLM's finished status for each finish reason
FINISHED_STATUS = {FINISH_STOP: "FINISHED_STOPPED", FINISH_LENGTH: "FINISHED_LENGTH_CAPPED",
                   FINISH_ABORT: "FINISHED_ABORTED"}


def vllm_status(status: str, finish_reason: str | None) -> str:
    """vLLM's ``RequestStatus`` name of a request (``RUNNING``, ``FINISHED_STOPPED``)."""
    if status == RequestStatus.FINISHED:
        return FINISHED_STATUS.get(finish_reason or FINISH_ABORT, "FINISHED_ABORTED")
    return status.upper()


class Request:
    def __init__(self, request_id: str, prompt_token_ids: Sequence[int], *,
                 hasher: BlockHasher | None, block_size: int,
                 lora: LoRA | None = None, cache_salt: str | None = None,
                 mm_items: Iterable[MMItem] = (), max_tokens: int | None = None,
                 priority: int = 0, arrival_time: float = 0.0,
                 prompt_logprobs: int | None = None,
                 skip_reading_prefix_cache: bool | None = None) -> None:
        if not prompt_token_ids:
            raise ValueError(f"request {request_id!r} has an empty prompt")
        self.request_id = request_id
        # One list (vLLM keeps the prompt apart too; a long timeline holds every request).
        self.all_token_ids: list[int] = list(prompt_token_ids)
        self.num_prompt_tokens = len(self.all_token_ids)
        self.lora = lora
        self.cache_salt = cache_salt
        self.mm_items = sorted(mm_items, key=lambda m: m.offset)
        self.max_tokens = max_tokens
        # the priority policy's order: lower first, then earlier arrival (vLLM Request.__lt__)
        self.priority = priority
        self.arrival_time = arrival_time
        # vLLM's SamplingParams: asking for prompt logprobs (any value, 0 included) means the
        # request does not read the prefix cache, unless skip_reading_prefix_cache says otherwise
        # (sampling_params.py:625-632); it still writes to it
        self.prompt_logprobs = prompt_logprobs
        self.skip_reading_prefix_cache = (prompt_logprobs is not None
                                          if skip_reading_prefix_cache is None
                                          else skip_reading_prefix_cache)
        self.status = RequestStatus.WAITING
        self.finish_reason: str | None = None
        self.num_computed_tokens = 0
        self.num_preemptions = 0
        self.num_pending_preempted = 0   # PREEMPTED events not yet sent with an output
        # Async scheduling (vLLM's AsyncScheduler): tokens scheduled whose sampled output has not
        # been applied yet, tokens of steps not yet processed, and the in-flight share of a
        # preempted request whose output still arrives later.
        self.num_output_placeholders = 0
        self.num_in_flight_tokens = 0
        self.num_stale_output_tokens = 0
        self.drop_stale_output = False
        # True while the request is scheduled as a non-final prefill chunk (it samples nothing).
        self.is_prefill_chunk = False
        # Hybrid models: where a shared prefix ends that a sliding-window group has not cached
        # yet (0: none), set at each lookup; its blocks are cached even under sparse retention.
        self.shared_prefix_boundary = 0
        self._hasher = hasher
        self._block_size = block_size
        self.block_hashes: list[bytes] = []
        self._update_block_hashes()

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.all_token_ids[:self.num_prompt_tokens]

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.all_token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.all_token_ids[self.num_prompt_tokens:]

    def append_output_token_ids(self, token_ids: int | Iterable[int]) -> None:
        if isinstance(token_ids, int):
            self.all_token_ids.append(token_ids)
        else:
            self.all_token_ids.extend(token_ids)
        self._update_block_hashes()

    def _update_block_hashes(self) -> None:
        if self._hasher is not None:
            self.block_hashes.extend(self._hasher.new_block_hashes(self, self._block_size))

    def is_finished(self) -> bool:
        return self.status is RequestStatus.FINISHED

    def sort_key(self) -> tuple:
        """vLLM's ``Request.__lt__``: priority, then arrival time, then request id."""
        return (self.priority, self.arrival_time, self.request_id)

    def __repr__(self) -> str:
        return (f"Request({self.request_id!r}, status={self.status.value}, "
                f"tokens={self.num_tokens}, computed={self.num_computed_tokens})")
