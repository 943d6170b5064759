"""vLLM 0.33's own KVCacheManager, loaded from its source files, for side-by-side timing.

The way ``shared/tools/vllm-diff`` loads it (its ``trace_oracle.py`` is the reference replay of
``blockviz trace capacity``): the real, unmodified block-manager files run — ``utils/hashing.py``,
``utils/math_utils.py``, ``distributed/kv_events.py``, ``v1/kv_cache_layout.py``,
``v1/kv_cache_spec_registry.py``, ``v1/kv_cache_interface.py``, ``v1/core/kv_cache_utils.py``,
``v1/core/block_pool.py``, ``v1/core/single_type_kv_cache_manager.py``,
``v1/core/kv_cache_coordinator.py``, ``v1/core/kv_cache_manager.py`` — and every other module they
import (the rest of ``vllm``; ``torch`` and ``zmq`` when absent) is an inert stand-in served by an
import hook: a class that accepts any arguments, whose attributes are stand-ins too. Those names
are only used in annotations, isinstance checks and code paths a one-group full-attention manager
never takes. ``vllm.envs`` is the stand-in's constants (as :mod:`bench.vllm_shim` does).

The source is read from disk, as :mod:`bench.vllm_shim` finds it (``$BLOCKVIZ_VLLM_SRC`` or
``~/.cache/vllm-diff/src/0.33.0``); nothing is fetched. :func:`loaded` is a context manager: the
modules are importable while it is open (some import lazily inside functions) and removed from
``sys.modules`` when it closes.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import types
from pathlib import Path

from .vllm_shim import ENV_VAR, VllmUnavailable, _version, source_dir

REAL = ("vllm.utils.math_utils", "vllm.utils.hashing", "vllm.distributed.kv_events",
        "vllm.v1.kv_cache_layout", "vllm.v1.kv_cache_spec_registry", "vllm.v1.kv_cache_interface",
        "vllm.v1.core.kv_cache_utils", "vllm.v1.core.block_pool",
        "vllm.v1.core.single_type_kv_cache_manager", "vllm.v1.core.kv_cache_coordinator",
        "vllm.v1.core.kv_cache_manager")
ENVS = {"VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES": True}


class _StandIn(type):
    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _stand_in(f"{cls.__name__}.{attr}")


def _stand_in(name: str) -> type:
    return _StandIn(name, (), {"__init__": lambda self, *a, **k: None})


class _Logger(logging.LoggerAdapter):
    def __init__(self, name: str) -> None:
        log = logging.getLogger(f"bench.vllm.{name}")
        log.setLevel(logging.ERROR)
        super().__init__(log, {})

    def warning_once(self, *a, **k):
        pass

    info_once = debug_once = warning_once


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root: Path, roots: set[str]) -> None:
        self.root, self.roots = root, roots

    def real_file(self, name: str) -> Path | None:
        path = self.root.joinpath(*name.split(".")).with_suffix(".py")
        return path if name in REAL and path.is_file() else None

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in self.roots:
            return None
        if (file := self.real_file(name)) is not None:
            return importlib.util.spec_from_file_location(name, file)
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        name, finder = module.__name__, self
        module.__path__ = []
        if name == "vllm.logger":
            module.init_logger = _Logger
        elif name == "vllm.envs":
            module.__dict__.update(ENVS)

        def __getattr__(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            if finder.real_file(f"{name}.{attr}") is not None:
                return importlib.import_module(f"{name}.{attr}")
            setattr(module, attr, value := _stand_in(attr))
            return value

        module.__getattr__ = __getattr__


@contextlib.contextmanager
def loaded(src: str | Path | None = None):
    """vLLM's manager modules as a namespace (``kv_cache_manager``, ``kv_cache_interface``,
    ``kv_cache_utils``, ``hashing``, ...), while the block is open."""
    root = Path(src).expanduser() if src is not None else source_dir()
    if not (root / "vllm/v1/core/kv_cache_manager.py").is_file():
        raise VllmUnavailable(f"no vllm/v1/core/kv_cache_manager.py under {root} (set {ENV_VAR} to a "
                              f"folder with vLLM 0.33.0's .py files)")
    for dep in ("msgspec", "cbor2"):
        if importlib.util.find_spec(dep) is None:
            raise VllmUnavailable(f"vLLM's kv_events.py/hashing.py need {dep!r}: pip install {dep}")
    if any(k == "vllm" or k.startswith("vllm.") for k in sys.modules):
        raise VllmUnavailable("a vllm package is already imported in this process")
    roots = {"vllm"} | {m for m in ("torch", "zmq") if importlib.util.find_spec(m) is None}
    finder = _Finder(root, roots)
    sys.meta_path.insert(0, finder)
    before = set(sys.modules)
    try:
        try:
            ns = types.SimpleNamespace(**{n.rsplit(".", 1)[1]: importlib.import_module(n) for n in REAL})
        except Exception as e:    # a different vLLM release imports other names
            raise VllmUnavailable(f"could not load vLLM's KVCacheManager from {root}: "
                                  f"{type(e).__name__}: {e}") from e
        ns.src, ns.version = str(root), _version(root)
        yield ns
    finally:
        sys.meta_path.remove(finder)
        forget_modules(roots, before)


def forget_modules(roots: set[str], before: set[str]) -> None:
    """Drop the modules under ``roots`` imported since ``before`` (vLLM's files and the stand-ins
    for what they import), so that a later load starts clean."""
    for name in set(sys.modules) - before:
        if name.partition(".")[0] in roots:
            del sys.modules[name]


class VllmTraceRequest:
    """What vLLM 0.33's KVCacheManager and block hasher read of ``vllm.v1.request.Request``, for
    a plain request (no LoRA, multimodal input, salt or prompt embeddings)."""

    def __init__(self, request_id: str, tokens: list[int], block_hasher) -> None:
        self.request_id = request_id
        self.prompt_token_ids = tokens
        self.all_token_ids = tokens
        self.num_prompt_tokens = len(tokens)
        self.lora_request = self.cache_salt = self.prompt_embeds = self.session_id = None
        self.mm_features: list = []
        self._prompt_embeds_per_block_hashes: dict = {}
        self.num_computed_tokens = self.num_in_flight_tokens = self.num_preemptions = 0
        self.shared_prefix_boundary = 0
        self.skip_reading_prefix_cache = False
        self.kv_cache_report_mode = "incremental"
        self.status = "waiting"
        self.block_hashes: list = []
        self.block_hashes.extend(block_hasher(self))

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)


def new_manager(v, pool_blocks: int, block_size: int, events: bool = True):
    """A one-group full-attention KVCacheManager of ``pool_blocks`` usable blocks, configured as
    run-trace configures it (KV events on: its evictions are the BlockRemoved events)."""
    kvi = v.kv_cache_interface
    spec = kvi.FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=8, dtype="float16")
    config = kvi.KVCacheConfig(num_blocks=pool_blocks + 1, kv_cache_tensors=[],
                               kv_cache_groups=[kvi.KVCacheGroupSpec(["layer0"], spec)])
    return v.kv_cache_manager.KVCacheManager(
        config, max_model_len=1 << 24, scheduler_block_size=block_size, hash_block_size=block_size,
        enable_caching=True, enable_kv_cache_events=events, log_stats=False)
