"""The scenario format (shared/design/scenario-format.md) as pydantic models.

A scenario is data: configuration plus a list of steps, each one engine event with optional
narration. The same models give the JSON Schema (``python -m blockviz schema``).
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictInt,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from blockviz.core.scheduler import SchedulerConfig

# Limits (scenario-format.md): what a file may ask for, checked before anything runs.
MAX_NUM_BLOCKS = 65_536
MAX_BLOCK_SIZE = 1_024
MAX_PROMPT_TOKENS_TOTAL = 1_000_000
MAX_FILE_BYTES = 1 << 20
MAX_STEPS = 100_000
MAX_ITERATIONS_PER_EVENT = 10_000
MAX_ITERATIONS_TOTAL = 1_000_000
VOCAB_SIZE = 65_536           # token ids are 0 .. VOCAB_SIZE - 1 (the tiny model's vocabulary)
MAX_KV_STORE_BYTES = 2 << 30  # the paged KV tensors a scenario may ask for

MAX_MODEL_LEN = 1 << 24
TokenId = Annotated[StrictInt, Field(ge=0, lt=VOCAB_SIZE)]
Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[^\s]+$")]
EVENT_NAMES = ("arrive", "admit", "decode", "step", "finish", "abort", "preempt",
               "reset_prefix_cache", "checkpoint", "rewind", "restart")
# Events (and `note`) that need an argument: written bare (`- finish`), they are an error.
NEEDS_ARGUMENT = {"arrive": "arrive: {id: A, prompt: [1, 2, 3]}", "finish": "finish: A",
                  "abort": "abort: A",
                  "preempt": "preempt: A", "checkpoint": "checkpoint: NAME",
                  "rewind": "rewind: NAME", "note": "note: {en: ..., zh: ...}",
                  "caption": "caption: {en: ..., zh: ...}"}
BARE_EVENTS = ("admit", "reset_prefix_cache", "restart")   # may be written bare: `- admit`
# What a step may carry besides its event: narration, shown with the state after it.
NARRATION = ("note", "caption")
MAX_CAPTION_CHARS = 280     # a caption is one sentence (the built-in lessons keep English <= 25 words)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_CJK = r"\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
# A folded YAML line break becomes a space; in Chinese, a space after full-width punctuation or
# between two ideographs is never meant.
_ZH_SPACE = re.compile(rf"(?<=[{_CJK}])\s+(?=[{_CJK}])|(?<=[\u3000-\u303f\uff01-\uff1f])\s+")


class Text(_Model):
    """Narration in both languages; either may be missing (the other is shown)."""
    en: str | None = None
    zh: str | None = None

    @field_validator("zh")
    @classmethod
    def _tidy(cls, v: str | None) -> str | None:
        return None if v is None else _ZH_SPACE.sub("", v)

    @model_validator(mode="before")
    @classmethod
    def _from_str(cls, v: Any) -> Any:
        return {"en": v, "zh": v} if isinstance(v, str) else v

    @model_validator(mode="after")
    def _one_language(self) -> Text:
        if self.en is None and self.zh is None:
            raise ValueError("give the text in at least one language (en or zh)")
        return self

    def get(self, lang: str) -> str:
        return (self.zh if lang == "zh" else self.en) or self.en or self.zh or ""


CaptionLine = Annotated[str, Field(min_length=1, max_length=MAX_CAPTION_CHARS)]


class Caption(Text):
    """A step's caption: one sentence that says what changed and why (the longer story is the
    note), in both languages; either may be missing (the other is shown)."""
    en: CaptionLine | None = None
    zh: CaptionLine | None = None


DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}   # a KV cache element's size


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, itemsize: int) -> int:
    """What one token's KV cache costs: layers × KV heads × head dim × 2 (K and V) × element bytes.
    The one formula: the scenario's model, the engine's budget, the app's preview limit and the
    capacity page's model presets all size KV memory with it."""
    return layers * kv_heads * head_dim * 2 * itemsize


class ModelConfig(_Model):
    """The tiny attention model that writes real K/V into the paged store."""
    num_layers: Annotated[StrictInt, Field(ge=1, le=8)] = 2
    num_kv_heads: Annotated[StrictInt, Field(ge=1, le=16)] = 2
    head_dim: Annotated[StrictInt, Field(ge=1, le=128)] = 8
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"

    def bytes_per_block(self, block_size: int) -> int:
        """One block's K and V over every layer, in the paged store."""
        return block_size * kv_bytes_per_token(self.num_layers, self.num_kv_heads, self.head_dim,
                                               DTYPE_BYTES[self.dtype])


class ConnectorConfig(_Model):
    """An external KV tier: vLLM 0.33's OffloadingConnector with a CPU tier (keyed by vLLM block
    hashes, one block per chunk), after its scheduler-side API."""
    kind: Literal["cpu"] = "cpu"
    num_blocks: Annotated[StrictInt, Field(
        ge=1, le=MAX_NUM_BLOCKS,
        description="the CPU tier's capacity in chunks of one block (vLLM: cpu_bytes_to_use / "
                    "the bytes of a chunk)")] = 16
    eviction_policy: Annotated[Literal["lru", "arc"], Field(
        description="the tier's cache policy (vLLM kv_connector_extra_config eviction_policy)")
    ] = "lru"
    load_delay: Annotated[StrictInt, Field(
        ge=0, le=64, description="engine steps until the worker reports a load done (0: within "
                                 "the step it was issued)")] = 1
    store_delay: Annotated[StrictInt, Field(
        ge=0, le=64, description="engine steps a store takes after it is submitted (vLLM submits "
                                 "a store at the start of the next step)")] = 0
    sync_load_budget_tokens: Annotated[StrictInt, Field(
        ge=0, le=MAX_MODEL_LEN,
        description="tokens per step that may load synchronously, within the step (vLLM "
                    "sync_load_budget_bytes / the KV bytes of a token); 0: every load is "
                    "asynchronous (vLLM's default)")] = 0


MAX_KV_CACHE_GROUPS = 8
# a KV-cache group's type -> the field that sizes its attention (None: full attention)
GROUP_SIZE_FIELD = {"full_attention": None, "sliding_window": "sliding_window",
                    "chunked_local_attention": "attention_chunk_size"}


class KVCacheGroup(_Model):
    """One KV-cache group of a hybrid model (vLLM's ``KVCacheGroupSpec``): its attention type and,
    for a local type, the tokens a token attends to."""
    type: Literal["full_attention", "sliding_window", "chunked_local_attention"]
    sliding_window: Annotated[StrictInt, Field(
        ge=1, le=MAX_MODEL_LEN, description="sliding_window only: W, a token attends to itself and "
                                            "the W - 1 tokens before it")] | None = None
    attention_chunk_size: Annotated[StrictInt, Field(
        ge=1, le=MAX_MODEL_LEN, description="chunked_local_attention only: C, a token attends to "
                                            "the tokens of its C-token chunk")] | None = None

    @property
    def size(self) -> int | None:
        """The tokens a token attends to: W or C (None: full attention)."""
        return self.sliding_window or self.attention_chunk_size

    @model_validator(mode="after")
    def _one_size(self) -> KVCacheGroup:
        need = GROUP_SIZE_FIELD[self.type]
        for name in ("sliding_window", "attention_chunk_size"):
            if name != need and getattr(self, name) is not None:
                raise ValueError(f"a {self.type} group has no field {name!r}")
        if need is not None and getattr(self, need) is None:
            raise ValueError(f"a {self.type} group needs `{need}:` (tokens, at least 1)")
        return self


class SchedulerSpec(_Model):
    """vLLM 0.33's scheduler settings (vLLM's names and defaults; vLLM's own checks apply)."""
    max_num_batched_tokens: Annotated[StrictInt, Field(
        ge=1, le=MAX_MODEL_LEN,
        description="the token budget of one engine step (default 8192; vLLM's own default "
                    "depends on the GPU and the entry point, e.g. 8192 for the OpenAI server on an "
                    "H100)")] = 8192
    max_num_seqs: Annotated[StrictInt, Field(
        ge=1, le=MAX_MODEL_LEN,
        description="at most this many requests run at once (default 256; vLLM's default is 1024 "
                    "on an H100-class GPU, 256 below it)")] = 256
    enable_chunked_prefill: Annotated[StrictBool, Field(
        description="false: a prompt is prefilled in one step, so the budget must cover "
                    "max_model_len")] = True
    long_prefill_token_threshold: Annotated[StrictInt, Field(
        ge=0, le=MAX_MODEL_LEN,
        description="cap a prefill chunk at this many tokens when others run or wait; 0: off")] = 0
    max_model_len: Annotated[StrictInt, Field(
        ge=2, le=MAX_MODEL_LEN,
        description="a request stops at this many tokens (FINISHED_LENGTH_CAPPED)")] = 1 << 20
    async_scheduling: Annotated[StrictBool, Field(
        description="vLLM's AsyncScheduler: step n+1 is scheduled before step n's output is "
                    "applied (outputs one step late)")] = False
    policy: Annotated[Literal["fcfs", "priority"], Field(
        description="vLLM's --scheduling-policy: fcfs (first come, first served; a failed "
                    "allocation preempts the last running request) or priority (waiting requests "
                    "in order of priority, then arrival; the victim is the lowest priority)")
    ] = "fcfs"
    watermark: Annotated[float, Field(
        ge=0.0, lt=1.0, allow_inf_nan=False, strict=False,
        description="vLLM's --watermark: while any request runs, a waiting or preempted request is "
                    "admitted only if int(watermark * (num_blocks + 1)) blocks stay free")] = 0.0

    @model_validator(mode="after")
    def _vllm_accepts(self) -> SchedulerSpec:
        problems = SchedulerConfig(**self.__dict__).problems()
        if problems:
            raise ValueError(problems[0][1])
        return self


class Config(_Model):
    num_blocks: Annotated[StrictInt, Field(ge=1, le=MAX_NUM_BLOCKS,
                                           description="usable blocks; the null block 0 is added")] = 6
    block_size: Annotated[StrictInt, Field(ge=1, le=MAX_BLOCK_SIZE)] = 4
    hash_algo: Literal["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"] = "sha256"
    hash_seed: Annotated[str | None, Field(
        max_length=256, description="vLLM's PYTHONHASHSEED; null = vLLM's default rule")] = None
    free_order: Literal["split", "append"] = "split"
    enable_caching: StrictBool = True
    seed: Annotated[StrictInt, Field(ge=0, lt=2**32)] = 0
    model: ModelConfig | None = ModelConfig()
    device: Literal["auto", "cpu", "cuda"] = "auto"
    connector: ConnectorConfig | None = None
    scheduler: SchedulerSpec = SchedulerSpec()
    kv_cache_groups: Annotated[list[KVCacheGroup], Field(
        min_length=1, max_length=MAX_KV_CACHE_GROUPS,
        description="hybrid models: one KV-cache group per attention type, sharing one block pool "
                    "(group ids 0, 1, ... in list order); absent: one full-attention group")
    ] | None = None
    prefix_cache_retention_interval: Annotated[StrictInt, Field(
        ge=0, le=MAX_MODEL_LEN,
        description="vLLM's CacheConfig.prefix_cache_retention_interval: 0 (default) caches only "
                    "the sliding-window blocks a later hit can use; N (a multiple of block_size) "
                    "also the tail of every N-token segment; null caches every full block")
    ] | None = 0

    @model_validator(mode="before")
    @classmethod
    def _one_layer_per_group(cls, data: Any) -> Any:
        """With kv_cache_groups the tiny model has one attention layer per group (layer i
        attends as group i does): its num_layers defaults to the number of groups."""
        if isinstance(data, dict) and isinstance(data.get("kv_cache_groups"), list) \
                and data["kv_cache_groups"]:
            model = data.get("model", {})
            if isinstance(model, dict) and "num_layers" not in model:
                data = {**data, "model": {**model, "num_layers": len(data["kv_cache_groups"])}}
        return data

    @field_validator("prefix_cache_retention_interval")
    @classmethod
    def _retention(cls, v: int | None, info: ValidationInfo) -> int | None:
        """What vLLM's coordinator refuses (kv_cache_coordinator.py:33-62)."""
        if v is None or "kv_cache_groups" not in info.data:
            return v
        groups = info.data["kv_cache_groups"] or ()
        if not any(g.type == "sliding_window" for g in groups):
            if v:
                raise ValueError(f"prefix_cache_retention_interval ({v}) needs a sliding_window "
                                 f"KV-cache group: vLLM rejects a positive interval without one "
                                 f"(set it to 0)")
            return v
        bs = info.data.get("block_size")
        if bs and v % bs:
            raise ValueError(f"prefix_cache_retention_interval ({v}) must be a multiple of "
                             f"block_size ({bs}): vLLM rejects it")
        return v

    @field_validator("hash_seed", mode="before")
    @classmethod
    def _seed_str(cls, v: Any) -> Any:
        # PYTHONHASHSEED is a string; YAML reads 42 as an int.
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @property
    def kv_store_bytes(self) -> int:
        """The paged KV tensors this config asks for: every block and the null block (0 without
        a model)."""
        return 0 if self.model is None else (self.num_blocks + 1) * self.model.bytes_per_block(
            self.block_size)

    @model_validator(mode="after")
    def _store_fits(self) -> Config:
        size = self.kv_store_bytes
        if size > MAX_KV_STORE_BYTES:
            raise ValueError(
                f"the KV store would need {size / 2**30:.1f} GiB (limit "
                f"{MAX_KV_STORE_BYTES / 2**30:.0f} GiB): use fewer blocks, a smaller "
                f"block_size or model, or set model: null to run without payloads")
        if self.connector is not None and self.scheduler.async_scheduling:
            raise ValueError("a connector with async_scheduling is not modelled: blockviz runs "
                             "vLLM's OffloadingConnector with the synchronous Scheduler only "
                             "(set async_scheduling: false, or drop the connector)")
        if self.kv_cache_groups is not None and self.model is not None \
                and self.model.num_layers != len(self.kv_cache_groups):
            raise ValueError(f"model.num_layers ({self.model.num_layers}) must equal the number "
                             f"of kv_cache_groups ({len(self.kv_cache_groups)}): the tiny model has "
                             f"one attention layer per group (leave num_layers out)")
        if self.connector is not None and self.kv_cache_groups is not None:
            raise ValueError("a connector with kv_cache_groups is not modelled: blockviz runs "
                             "vLLM's OffloadingConnector for one full-attention group only "
                             "(drop kv_cache_groups, or the connector)")
        return self


# -- prompts ----------------------------------------------------------------------------
class TokensPart(_Model):
    tokens: Annotated[list[TokenId], Field(min_length=1, max_length=MAX_PROMPT_TOKENS_TOTAL)]


class TextPart(_Model):
    text: Annotated[str, Field(min_length=1, max_length=MAX_FILE_BYTES)]

    @field_validator("text")
    @classmethod
    def _has_words(cls, v: str) -> str:
        if not v.split():
            raise ValueError("text has no words")
        return v


class SameAsPart(_Model):
    same_as: Name
    first: Annotated[StrictInt, Field(ge=1, le=MAX_PROMPT_TOKENS_TOTAL)] | None = None


class RandomPart(_Model):
    random: Annotated[StrictInt, Field(ge=1, le=MAX_PROMPT_TOKENS_TOTAL)]


def _part_kind(v: Any) -> str | None:
    if isinstance(v, dict):
        return next((key for key in ("tokens", "text", "same_as", "random") if key in v), None)
    if isinstance(v, BaseModel):
        return {TokensPart: "tokens", TextPart: "text", SameAsPart: "same_as",
                RandomPart: "random"}.get(type(v))
    return None


PromptPart = Annotated[
    Annotated[TokensPart, Tag("tokens")] | Annotated[TextPart, Tag("text")]
    | Annotated[SameAsPart, Tag("same_as")] | Annotated[RandomPart, Tag("random")],
    Discriminator(_part_kind, custom_error_type="prompt_part",
                  custom_error_message="a prompt part is one of {tokens: [...]}, {text: ...}, "
                                       "{same_as: ID, first: N}, {random: N}"),
]


class LoRASpec(_Model):
    name: Name
    path: Annotated[str, Field(max_length=1024)] = ""


class MMSpec(_Model):
    id: Annotated[str, Field(min_length=1, max_length=256)]
    offset: Annotated[StrictInt, Field(ge=0, le=MAX_PROMPT_TOKENS_TOTAL)]
    length: Annotated[StrictInt, Field(ge=1, le=MAX_PROMPT_TOKENS_TOTAL)]


def request_id(n: int) -> str:
    """The id blockviz gives the ``n``-th request it names itself (1-based): the letters A to Z,
    then R27, R28, ... — as a lesson names its requests. Generated workloads, forks, the Author
    page's new arrivals and trace replays all name requests with it."""
    return chr(64 + n) if 1 <= n <= 26 else f"R{n}"


class ArriveSpec(_Model):
    id: Name
    prompt: Annotated[list[PromptPart], Field(min_length=1)]
    max_tokens: Annotated[StrictInt, Field(ge=1, le=MAX_PROMPT_TOKENS_TOTAL)] | None = None
    output: Annotated[list[TokenId], Field(max_length=MAX_PROMPT_TOKENS_TOTAL)] | None = None
    lora: LoRASpec | None = None
    cache_salt: Annotated[str, Field(min_length=1, max_length=256)] | None = None
    mm: list[MMSpec] | None = None
    admit: StrictBool = True
    priority: Annotated[StrictInt, Field(
        ge=-(2**63), lt=2**63,
        description="the priority policy's order: lower first (ignored under fcfs); default 0"
    )] | None = None
    prompt_logprobs: Annotated[StrictInt, Field(
        ge=-1, le=MAX_PROMPT_TOKENS_TOTAL,
        description="ask for prompt logprobs (-1: all, or how many per token; true = 1): vLLM "
                    "then skips reading the prefix cache for this request (it still writes it)")
    ] | None = None
    skip_reading_prefix_cache: Annotated[StrictBool | None, Field(
        description="vLLM's SamplingParams.skip_reading_prefix_cache: when unset, true exactly "
                    "when prompt_logprobs is given")] = None

    @field_validator("prompt", mode="before")
    @classmethod
    def _normalize_prompt(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [{"text": v}]
        if isinstance(v, list) and v and all(isinstance(t, int) and not isinstance(t, bool)
                                             for t in v):
            return [{"tokens": v}]
        return v

    @field_validator("prompt_logprobs", mode="before")
    @classmethod
    def _logprobs_true(cls, v: Any) -> Any:
        return 1 if v is True else v     # vLLM: prompt_logprobs=True means 1

    @field_validator("lora", mode="before")
    @classmethod
    def _lora_name(cls, v: Any) -> Any:
        return {"name": v} if isinstance(v, str) else v

    @field_validator("mm")
    @classmethod
    def _mm_disjoint(cls, v: list[MMSpec] | None) -> list[MMSpec] | None:
        if v:
            items = sorted(v, key=lambda m: m.offset)
            for a, b in zip(items, items[1:]):
                if b.offset < a.offset + a.length:
                    raise ValueError(f"multimodal items {a.id!r} and {b.id!r} overlap")
        return v


class ResetSpec(_Model):
    """``reset_prefix_cache`` as vLLM's ``LLM.reset_prefix_cache`` / ``POST /reset_prefix_cache``
    takes it."""
    reset_running_requests: Annotated[StrictBool, Field(
        description="preempt every running request first (the last first), so the reset cannot "
                    "be refused")] = False
    reset_connector: Annotated[StrictBool, Field(
        description="reset the KV connector's cache too (only without a connector here: a reset "
                    "that does nothing, as in vLLM)")] = False


class DecodeSpec(_Model):
    requests: list[Name] | None = None
    steps: Annotated[StrictInt, Field(ge=1, le=MAX_ITERATIONS_PER_EVENT)] = 1


# -- steps ------------------------------------------------------------------------------
class Step(_Model):
    """One event (or none: a narration-only step) with optional narration."""
    arrive: ArriveSpec | None = None
    admit: StrictBool | None = None
    decode: DecodeSpec | None = None
    step: Annotated[StrictInt, Field(ge=1, le=MAX_ITERATIONS_PER_EVENT)] | None = None
    finish: Annotated[list[Name], Field(
        min_length=1, description="the request (or a list of them) stops, as when it samples a stop "
                                  "token: FINISHED_STOPPED, finish reason \"stop\" (\"abort\" for one "
                                  "that has produced no output yet); its blocks are freed")] | None = None
    abort: Annotated[list[Name], Field(
        min_length=1, description="the client aborts the request (or a list of them): "
                                  "FINISHED_ABORTED, finish reason \"abort\"; freed as a finish is"
    )] | None = None
    preempt: Name | None = None
    reset_prefix_cache: StrictBool | ResetSpec | None = None
    checkpoint: Name | None = None
    rewind: Name | None = None
    restart: StrictBool | None = Field(
        None, description="blockviz extension: a new engine process with the same config (empty "
                          "GPU cache, NONE_HASH re-derived). The external tier is kept, standing "
                          "for a tier that outlives the engine (vLLM's file-system tier on a "
                          "shared root_dir); vLLM's own CPU tier would be empty. Every request "
                          "must have finished.")
    note: Text | None = None
    caption: Caption | None = Field(
        None, description="one sentence on what changed at this step and why, {en: ..., zh: ...}; "
                          "the note is the longer explanation")

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = {v: None}
        if not isinstance(v, dict):
            raise ValueError("a step is an event name (e.g. `- admit`) or a mapping "
                             "(e.g. `- finish: A`)")
        v = dict(v)
        events = [k for k in v if k not in NARRATION]
        unknown = [k for k in events if k not in EVENT_NAMES]
        if unknown:
            raise ValueError(f"unknown event {unknown[0]!r} (events: {', '.join(EVENT_NAMES)}, "
                             f"or a `note` alone)")
        if len(events) > 1:
            raise ValueError(f"one event per step, got {', '.join(events)}")
        if not events and not any(k in v for k in NARRATION):
            raise ValueError("an empty step: give an event or a note")
        for name, example in NEEDS_ARGUMENT.items():
            if name in v and v[name] is None:
                raise ValueError(f"`{name}` needs an argument, e.g. `- {example}`")
        for flag in BARE_EVENTS:
            if flag in v and (v[flag] is None or v[flag] == {}):
                v[flag] = True
        if "decode" in v and v["decode"] is None:
            v["decode"] = {}
        if "step" in v and v["step"] is None:
            v["step"] = 1
        for name in ("finish", "abort"):
            if isinstance(v.get(name), str):
                v[name] = [v[name]]
        return v

    @property
    def kind(self) -> str | None:
        for name in EVENT_NAMES:
            if getattr(self, name) is not None:
                return name
        return None

    @property
    def args(self) -> Any:
        kind = self.kind
        return None if kind is None else getattr(self, kind)

    @property
    def teaching_only(self) -> bool:
        """A form vLLM's scheduler has no equivalent for: ``preempt: ID`` (under its default FCFS
        policy vLLM preempts the last running request when an allocation fails) and
        ``decode: {requests: [...]}`` (vLLM schedules running requests first while the token
        budget lasts, and admits waiting ones in the same step)."""
        return self.preempt is not None or (self.decode is not None and bool(self.decode.requests))

    @property
    def engine_steps(self) -> int:
        """Engine steps the event says it runs (``decode: {steps: N}``, ``step: N``); others: 0."""
        return self.decode.steps if self.decode is not None else self.step or 0

    def event_dict(self) -> dict:
        """The event as the JSON contract shows it: ``{name: arguments}`` (``{"note": true}`` for
        a narration-only step)."""
        kind = self.kind
        if kind is None:
            return {"note": True}
        args = self.args
        if isinstance(args, BaseModel):
            return {kind: args.model_dump(mode="json", exclude_none=True)}
        if kind in BARE_EVENTS:
            return {kind: None}     # the bare form (an object is dumped above)
        if kind in ("finish", "abort") and len(args) == 1:
            return {kind: args[0]}
        return {kind: args}


class Scenario(_Model):
    id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
    title: Text
    summary: Text | None = None
    start_note: Text | None = Field(None, description="narration of step 0, the state before any event")
    start_caption: Caption | None = Field(
        None, description="the caption of step 0: one sentence on the state before any event")
    config: Config = Config()
    steps: Annotated[list[Step], Field(max_length=MAX_STEPS)] = []


def json_schema() -> dict:
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "blockviz scenario"
    return schema
