"""Load vLLM 0.33's own BlockPool from its source files, for side-by-side timing.

Only four real vLLM files are executed, unmodified: ``vllm/utils/hashing.py``,
``vllm/v1/core/kv_cache_utils.py``, ``vllm/distributed/kv_events.py`` and
``vllm/v1/core/block_pool.py`` (plus the tiny ``vllm/utils/math_utils.py``). Everything else they
import is a named stand-in below: classes used only in annotations or on code paths a plain
full-attention pool never takes, a stdlib logger, and ``vllm.envs`` as constants (a vLLM server
caches its environment the same way once it has started, ``envs.enable_envs_cache``).

The source is read from disk — ``$BLOCKVIZ_VLLM_SRC`` or ``~/.cache/vllm-diff/src/0.33.0`` (a
folder holding ``vllm/``, e.g. the ``.py`` files of ``pip download vllm==0.33.0 --no-deps``,
unzipped). Nothing is fetched. The real ``kv_events.py`` needs ``msgspec`` (and ``hashing.py``
needs ``cbor2``); without them :func:`load` raises :class:`VllmUnavailable` saying so.

The modules are registered under their real names only while they load, then removed from
``sys.modules``; the returned namespace keeps them alive.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import re
import sys
import types
from pathlib import Path

DEFAULT_SRC = "~/.cache/vllm-diff/src/0.33.0"
ENV_VAR = "BLOCKVIZ_VLLM_SRC"

# Real files, in load order (each imports only earlier ones and stand-ins).
REAL = ("vllm.utils.math_utils", "vllm.utils.hashing", "vllm.v1.core.kv_cache_utils",
        "vllm.distributed.kv_events", "vllm.v1.core.block_pool")
PACKAGES = ("vllm", "vllm.utils", "vllm.v1", "vllm.v1.core", "vllm.distributed", "vllm.config",
            "vllm.multimodal")


class VllmUnavailable(RuntimeError):
    """vLLM's block pool cannot be loaded here; the message says why and what to do."""


def source_dir() -> Path:
    return Path(os.environ.get(ENV_VAR) or DEFAULT_SRC).expanduser()


def _stand_in(name: str) -> type:
    return type(name, (), {"__doc__": "stand-in: unused by a full-attention BlockPool"})


def _unused(name: str):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"{name} is a stand-in in bench.vllm_shim")
    fn.__name__ = name
    return fn


def _logger(name: str) -> logging.Logger:
    log = logging.getLogger(f"bench.vllm.{name}")
    log.setLevel(logging.ERROR)  # e.g. "Failed to reset prefix cache" would flood the output
    return log


def _stand_ins() -> dict[str, dict[str, object]]:
    """Every non-real module the real files import, with exactly the names they take."""
    return {
        "vllm.envs": {"VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES": True},
        "vllm.config": {"VllmConfig": _stand_in("VllmConfig")},
        "vllm.config.kv_events": {"KVEventsConfig": _stand_in("KVEventsConfig")},
        "vllm.logger": {"init_logger": _logger},
        "vllm.multimodal.utils": {"get_mm_features_in_window":
                                  _unused("get_mm_features_in_window")},
        "vllm.v1.kv_cache_interface": {n: _stand_in(n) for n in (
            "KVCacheConfig", "KVCacheGroupSpec", "KVCacheSpec", "MambaSpec",
            "UniformTypeKVCacheSpecs")} | {"iter_layer_specs": _unused("iter_layer_specs")},
        "vllm.v1.kv_cache_spec_registry": {"KVCacheSpecRegistry": _stand_in("KVCacheSpecRegistry")},
        "vllm.v1.request": {"Request": _stand_in("Request")},
        "vllm.v1.utils": {"tensor_data": _unused("tensor_data")},
        "vllm.v1.core.kv_cache_metrics": {
            "KVCacheMetricsCollector": _stand_in("KVCacheMetricsCollector")},
        "vllm.utils.network_utils": {n: _unused(n) for n in (
            "get_ip", "get_tcp_uri", "is_valid_ipv6_address", "split_zmq_path")},
    }


def _zmq_stand_in() -> types.ModuleType:
    """kv_events.py imports zmq for its publishers (unused here) and names zmq.Socket in a
    signature."""
    zmq = types.ModuleType("zmq")
    zmq.Socket = _stand_in("Socket")
    zmq.Context = _stand_in("Context")
    return zmq


def load(src: str | os.PathLike | None = None) -> types.SimpleNamespace:
    """vLLM's real ``block_pool``, ``kv_cache_utils`` and ``kv_events`` modules, as a namespace."""
    root = Path(src).expanduser() if src is not None else source_dir()
    if not (root / "vllm" / "v1" / "core" / "block_pool.py").is_file():
        raise VllmUnavailable(f"no vllm/v1/core/block_pool.py under {root} (set {ENV_VAR} to a "
                              f"folder with vLLM 0.33.0's .py files)")
    for dep in ("msgspec", "cbor2"):
        if importlib.util.find_spec(dep) is None:
            raise VllmUnavailable(f"vLLM's kv_events.py/hashing.py need {dep!r}: "
                                  f"pip install {dep}")
    if any(k == "vllm" or k.startswith("vllm.") for k in sys.modules):
        raise VllmUnavailable("a vllm package is already imported in this process")

    added: list[str] = []

    def register(name: str, module: types.ModuleType) -> None:
        sys.modules[name] = module
        added.append(name)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)

    try:
        if importlib.util.find_spec("zmq") is None:
            register("zmq", _zmq_stand_in())
        for name in PACKAGES:
            pkg = types.ModuleType(name)
            pkg.__path__ = []  # a package, but nothing is ever found in it
            register(name, pkg)
        for name, attrs in _stand_ins().items():
            mod = types.ModuleType(name)
            mod.__dict__.update(attrs)
            register(name, mod)
        ns = types.SimpleNamespace(src=str(root))
        for name in REAL:
            path = root.joinpath(*name.split(".")).with_suffix(".py")
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            register(name, module)
            spec.loader.exec_module(module)
            setattr(ns, name.rsplit(".", 1)[1], module)
        ns.version = _version(root)
        return ns
    except VllmUnavailable:
        raise
    except Exception as e:  # a different vLLM release imports other names
        raise VllmUnavailable(f"could not load vLLM's block pool from {root}: "
                              f"{type(e).__name__}: {e}") from e
    finally:
        for name in added:
            sys.modules.pop(name, None)


def _version(root: Path) -> str:
    path = root / "vllm" / "_version.py"
    if path.is_file():
        found = re.search(r"""version\s*=\s*['"]([^'"]+)['"]""", path.read_text())
        if found:
            return found.group(1)
    return root.name
