"""vLLM 0.33's real ``Scheduler``, loaded from its source files, for side-by-side timing.

The way ``shared/tools/vllm-diff``'s ``run-sched`` loads it (the reference the project's scheduler
is diffed against): the real, unmodified files of the scheduler stack run — ``Scheduler``, its
``KVCacheManager`` and ``BlockPool``, ``Request``, ``SchedulerOutput``, ``ModelRunnerOutput``,
``EngineCoreOutputs``, ``PrefixCacheStats``, the request queues and ``check_stop`` (:data:`REAL`).
Every other module they import (the rest of ``vllm``; ``torch``, ``zmq`` and
``prometheus_client`` always, ``transformers`` and ``uvloop`` when absent) is an inert stand-in
served by an import hook: a class that accepts any arguments, whose attributes are stand-ins too.
Those names are only used in annotations and on code paths a one-group full-attention model
without a connector, LoRA, speculative decoding or multimodal inputs never takes. A few stand-ins
carry the behaviour the real files call on those paths (:func:`_behaviour`): a logger, a null
profiler context, vLLM's own ``ConstantList`` (its class body taken from ``vllm/v1/utils.py``).

The source is read from disk — ``$BLOCKVIZ_VLLM_FULL_SRC`` or
``~/.cache/blockviz-sched-oracle/src/0.33.0`` (a folder holding all of ``vllm/``'s ``.py`` files,
e.g. the 0.33.0 wheel unzipped). Nothing is fetched. :func:`loaded` is a context manager: the
modules are importable while it is open (the scheduler imports some lazily) and are removed from
``sys.modules`` when it closes.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace as NS

from .vllm_manager import _Logger, forget_modules  # the same quiet vllm.logger stand-in
from .vllm_shim import VllmUnavailable, _version

DEFAULT_SRC = "~/.cache/blockviz-sched-oracle/src/0.33.0"
ENV_VAR = "BLOCKVIZ_VLLM_FULL_SRC"

REAL = frozenset({
    "vllm.envs", "vllm.utils.hashing", "vllm.utils.math_utils", "vllm.distributed.kv_events",
    "vllm.v1.core.kv_cache_utils", "vllm.v1.core.block_pool", "vllm.v1.kv_cache_interface",
    "vllm.v1.kv_cache_layout", "vllm.v1.kv_cache_spec_registry",
    "vllm.v1.core.kv_cache_coordinator", "vllm.v1.core.single_type_kv_cache_manager",
    "vllm.v1.core.kv_cache_manager", "vllm.v1.core.kv_cache_metrics",
    "vllm.v1.core.sched.scheduler", "vllm.v1.core.sched.async_scheduler",
    "vllm.v1.core.sched.interface", "vllm.v1.core.sched.output",
    "vllm.v1.core.sched.request_queue", "vllm.v1.core.sched.utils",
    "vllm.v1.core.encoder_cache_manager", "vllm.v1.request", "vllm.v1.metrics.stats",
    "vllm.v1.metrics.cache_hit_source", "vllm.v1.outputs", "vllm.v1.engine",
    "vllm.v1.structured_output.request",
})
ALWAYS_STANDIN = ("torch", "zmq", "prometheus_client")    # never the real one, even if installed
STANDIN_IF_ABSENT = ("transformers", "uvloop")


def source_dir() -> Path:
    return Path(os.environ.get(ENV_VAR) or DEFAULT_SRC).expanduser()


class _StandInType(type):
    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _stand_in(f"{cls.__name__}.{attr}", cls.__module__)


def _stand_in(name: str, module: str) -> type:
    return _StandInType(name, (), {"__module__": module, "__init__": lambda self, *a, **k: None})


def _behaviour() -> dict[str, dict[str, object]]:
    """Stand-in modules whose names the real files call on the paths taken here."""
    return {
        "vllm.logger": {"init_logger": _Logger},
        "vllm.v1.utils": {"record_function_or_nullcontext": lambda name: contextlib.nullcontext()},
        "vllm.utils": {"length_from_prompt_token_ids_or_embeds":
                       lambda ids, embeds: len(ids) if ids is not None else len(embeds)},
        "vllm.platforms": {"current_platform": NS(is_xpu=lambda: False,
                                                  register_custom_kv_cache_specs=lambda c: None)},
        "vllm.utils.torch_utils": {"get_dtype_size": lambda dtype: 2, "PIN_MEMORY": False},
        "vllm.utils.mem_constants": {"GiB_bytes": 1 << 30},
    }


def _take_from_source(module: types.ModuleType, path: Path, names: set[str], prelude: str) -> None:
    """Execute only the top-level definitions ``names`` of a real file (vLLM's own code) in
    ``module``: for a file whose other imports are out of reach here."""
    tree = ast.parse(path.read_text(), str(path))
    keep = [n for n in tree.body
            if (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names)
            or (isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in names for t in n.targets))]
    exec(prelude, module.__dict__)
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), module.__dict__)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root: Path, roots: set[str]) -> None:
        self.root, self.roots, self.extra = root, roots, _behaviour()

    def _path(self, name: str) -> Path:
        return self.root.joinpath(*name.split("."))

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in self.roots:
            return None
        file = self._path(name).with_suffix(".py")
        if name in REAL and file.is_file():
            return importlib.util.spec_from_file_location(name, file)
        package = self._path(name) / "__init__.py"
        if name in REAL and package.is_file():   # a real package (vllm.v1.engine): its
            # __init__ runs; its submodules are found here again, one by one
            return importlib.util.spec_from_file_location(name, package,
                                                          submodule_search_locations=[])
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name = module.__name__
        module.__path__ = []
        module.__dict__.update(self.extra.get(name, {}))
        folder = self._path(name) if name.startswith("vllm") else None

        def __getattr__(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            if folder is not None and ((folder / f"{attr}.py").is_file() or (folder / attr).is_dir()):
                return importlib.import_module(f"{name}.{attr}")
            setattr(module, attr, value := _stand_in(attr, name))
            return value

        module.__getattr__ = __getattr__


@contextlib.contextmanager
def loaded(src: str | Path | None = None):
    """vLLM's scheduler modules as a namespace (``scheduler``, ``request``, ``outputs``,
    ``kv_cache_interface``, ``kv_cache_utils``, ``hashing``, ...), while the block is open."""
    root = Path(src).expanduser() if src is not None else source_dir()
    if not (root / "vllm/v1/core/sched/scheduler.py").is_file():
        raise VllmUnavailable(f"no vllm/v1/core/sched/scheduler.py under {root} (set {ENV_VAR} to "
                              f"a folder with all of vLLM 0.33.0's .py files)")
    for dep in ("msgspec", "cbor2", "numpy"):
        if importlib.util.find_spec(dep) is None:
            raise VllmUnavailable(f"vLLM's scheduler files need {dep!r}: pip install {dep}")
    if any(k == "vllm" or k.startswith("vllm.") for k in sys.modules):
        raise VllmUnavailable("a vllm package is already imported in this process")
    roots = {"vllm", *ALWAYS_STANDIN} | {m for m in STANDIN_IF_ABSENT
                                          if importlib.util.find_spec(m) is None}
    saved = {m: sys.modules.pop(m) for m in list(sys.modules)
             if m.partition(".")[0] in roots - {"vllm"}}       # e.g. torch, from the engine
    finder = _Finder(root, roots)
    sys.meta_path.insert(0, finder)
    before = set(sys.modules)
    try:
        try:
            utils = importlib.import_module("vllm.v1.utils")
            _take_from_source(utils, root / "vllm/v1/utils.py", {"ConstantList", "T"},
                              "from typing import Generic, TypeVar, overload, Union\n"
                              "from collections.abc import Sequence\n")
            imp = importlib.import_module
            ns = NS(**{n.rsplit(".", 1)[1]: imp(n) for n in (
                "vllm.utils.hashing", "vllm.v1.core.kv_cache_utils", "vllm.v1.kv_cache_interface",
                "vllm.v1.request", "vllm.v1.outputs", "vllm.v1.core.sched.scheduler")})
        except Exception as e:    # a different vLLM release imports other names
            raise VllmUnavailable(f"could not load vLLM's Scheduler from {root}: "
                                  f"{type(e).__name__}: {e}") from e
        ns.src, ns.version = str(root), _version(root)
        yield ns
    finally:
        sys.meta_path.remove(finder)
        forget_modules(roots, before)
        for name in [m for m in sys.modules if m.partition(".")[0] in roots]:
            del sys.modules[name]
        sys.modules.update(saved)


def vllm_config(v, *, num_gpu_blocks: int, block_size: int, max_num_batched_tokens: int = 8192,
                max_num_seqs: int = 256, max_model_len: int = 1 << 20,
                enable_chunked_prefill: bool = True, long_prefill_token_threshold: int = 0,
                sliding_windows: tuple[int | None, ...] = (None,)):
    """A ``VllmConfig`` look-alike with the attributes ``Scheduler`` and ``KVCacheManager`` read,
    at vLLM 0.33's defaults (config/scheduler.py, cache.py, ...) for a model without LoRA,
    speculative decoding, connectors or multimodal inputs; and its ``KVCacheConfig`` (real
    classes): one KV-cache group per entry of ``sliding_windows`` (None: full attention, W: a
    sliding window of W tokens), as run-hybrid builds them (group i holds "layer{i}"; several
    groups: retention interval 0, vLLM 0.33's CacheConfig default, hash block size = block size)."""
    scheduler_config = NS(
        max_num_seqs=max_num_seqs, max_num_active_seqs=None,
        max_num_batched_tokens=max_num_batched_tokens, max_num_scheduled_tokens=None,
        long_prefill_token_threshold=long_prefill_token_threshold,
        long_prefill_token_threshold_adaptive=False, enable_chunked_prefill=enable_chunked_prefill,
        policy="fcfs", prefill_schedule_interval=1, scheduler_reserve_full_isl=True,
        watermark=0.0, async_scheduling=False, disable_chunked_mm_input=False,
        max_num_encoder_input_tokens=max_num_batched_tokens,
        encoder_cache_size=max_num_batched_tokens, scheduler_cls=None)
    config = NS(
        scheduler_config=scheduler_config,
        cache_config=NS(block_size=block_size, num_gpu_blocks=num_gpu_blocks,
                        enable_prefix_caching=True, prefix_caching_hash_algo="sha256",
                        enable_mamba_shared_prefix_checkpoint=False, mamba_cache_mode="none"),
        model_config=NS(max_model_len=max_model_len, uses_mrope=False, is_encoder_decoder=False,
                        runner_type="generate", is_diffusion=False,
                        supports_multimodal_inputs=False, return_sampling_mask=False,
                        multimodal_config=None),
        parallel_config=NS(data_parallel_index=0, data_parallel_size=1, pipeline_parallel_size=1,
                           decode_context_parallel_size=1, prefill_context_parallel_size=1),
        observability_config=NS(per_request_spec_decode_metrics="none", kv_cache_metrics=False,
                                kv_cache_metrics_sample=0.0, enable_mfu_metrics=False,
                                enable_logging_iteration_details=False),
        lora_config=None, speculative_config=None, kv_transfer_config=None,
        ec_transfer_config=None, kv_events_config=NS(enable_kv_cache_events=True, publisher="null"),
        ec_manager_config=NS(get_encoder_cache_manager_obj=lambda: None),
        aux_output_config=NS(enabled=False), is_mm_encoder_only=False,
        use_v2_model_runner=False, max_concurrent_batches=1,
        max_in_flight_tokens=max_num_batched_tokens, num_speculative_tokens=0,
        num_lookahead_tokens=0, num_prefill_lookahead_tokens=0, num_hash_lookahead_tokens=0,
        diffusion_config=None)
    kvi = v.kv_cache_interface
    common = dict(block_size=block_size, num_kv_heads=1, head_size=8, dtype="float16")
    specs = [kvi.FullAttentionSpec(**common) if w is None
             else kvi.SlidingWindowSpec(sliding_window=w, **common) for w in sliding_windows]
    groups = [kvi.KVCacheGroupSpec([f"layer{i}"], spec) for i, spec in enumerate(specs)]
    if len(groups) == 1:
        kv_cache_config = kvi.KVCacheConfig(num_blocks=num_gpu_blocks, kv_cache_tensors=[],
                                            kv_cache_groups=groups)
    else:
        config.cache_config.prefix_cache_retention_interval = 0
        kv_cache_config = kvi.KVCacheConfig(num_blocks=num_gpu_blocks, kv_cache_tensors=[],
                                            kv_cache_groups=groups,
                                            prefix_cache_retention_interval=0)
        kv_cache_config.hash_block_size = block_size
        kv_cache_config.cache_hit_alignment_tokens = block_size
    return config, kv_cache_config


class NoStructuredOutput:
    """The structured-output manager for requests without a grammar: it accepts every token."""

    def accept_tokens(self, request, tokens):
        return True

    def grammar_init(self, request):
        pass

    def should_advance(self, request):
        return False


def sampling_params(max_tokens: int) -> NS:
    """What the scheduler and ``Request`` read of ``SamplingParams`` for plain greedy text."""
    return NS(max_tokens=max_tokens, extra_args=None, skip_reading_prefix_cache=None,
              structured_outputs=None, eos_token_id=None, stop_token_ids=None, min_tokens=0,
              repetition_detection=None, num_logprobs=None, prompt_logprobs=None)
