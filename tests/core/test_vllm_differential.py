"""Differential test: blockviz's core against vLLM's *own* KVCacheManager, step by step.

vLLM 0.33.0's unmodified block-manager files (vllm/v1/core/block_pool.py, kv_cache_utils.py,
kv_cache_manager.py, kv_cache_coordinator.py, single_type_kv_cache_manager.py, ...; from the PyPI
wheel) are imported without vLLM's heavy dependencies by the small shim below: those files run as
they are, every other ``vllm.*`` module (and torch/zmq when not already imported) is an inert
stand-in. The same random call sequences — get_computed_blocks + allocate_slots for an admission,
allocate_slots(req, 1) for a decode, free for a finish or a preemption, reset_prefix_cache — run
on both managers (admissions sometimes with tokens from a KV connector, and BlockPool.evict_blocks
as a connector uses it), and after every call the free queue, every ref_cnt and block hash, the hash map
(ids per hash, in insertion order), the block tables and the KV events must be equal.

Free order ``split`` is compared with vLLM 0.33.0; ``append`` ("classic") with vLLM 0.23.0, whose
free_blocks appends every freed block (its hashing differs — random NONE_HASH, untagged extra
keys — so there its NONE_HASH is set to ours and requests carry no extra keys).

Where to find the sources: $BLOCKVIZ_VLLM_SRC (0.33.0) and $BLOCKVIZ_VLLM_SRC_CLASSIC (0.23.0),
each a directory holding ``vllm/``, else ~/.cache/vllm-diff/src/{0.33.0,0.23.0}. Needs the
wheel's runtime deps msgspec and cbor2. Anything missing -> the test skips; nothing is downloaded.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest
from core_helpers import free_ids, hash_map, tables
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from blockviz.core import BlockHasher, KVCacheManager, LoRA, Request

VERSIONS = {  # free order -> (vLLM version, env var naming its source)
    "split": ("0.33.0", "BLOCKVIZ_VLLM_SRC"),
    "append": ("0.23.0", "BLOCKVIZ_VLLM_SRC_CLASSIC"),
}
REAL_MODULES = [  # the vLLM files that run for real; the rest of vllm.* is stood in for
    "vllm.envs", "vllm.utils.hashing", "vllm.utils.math_utils", "vllm.distributed.kv_events",
    "vllm.v1.kv_cache_layout", "vllm.v1.kv_cache_spec_registry", "vllm.v1.kv_cache_interface",
    "vllm.v1.core.kv_cache_utils", "vllm.v1.core.block_pool",
    "vllm.v1.core.single_type_kv_cache_manager", "vllm.v1.core.kv_cache_coordinator",
    "vllm.v1.core.kv_cache_manager",
]


# -- the import shim ----------------------------------------------------------------------------

class _StandIn(type):
    """A stand-in class for a name vLLM imports but these code paths never really use: any
    attribute of it is another stand-in (enum members, nested names), calling it does nothing."""

    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _stand_in(f"{cls.__name__}.{attr}")


def _stand_in(name: str) -> type:
    return _StandIn(name, (), {"__init__": lambda self, *a, **k: None})


class _QuietLogger:
    def __getattr__(self, attr):
        return lambda *a, **k: None


class _VllmFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, root: Path, stubbed: set[str]) -> None:
        self.root, self.stubbed = root, stubbed

    def real_file(self, name: str) -> Path | None:
        path = self.root.joinpath(*name.split(".")).with_suffix(".py")
        return path if name in REAL_MODULES and path.is_file() else None

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in self.stubbed:
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
            module.init_logger = lambda _name: _QuietLogger()

        def __getattr__(attr):
            if attr.startswith("__"):
                raise AttributeError(attr)
            if finder.real_file(f"{name}.{attr}") is not None:
                return importlib.import_module(f"{name}.{attr}")
            setattr(module, attr, value := _stand_in(attr))
            return value

        module.__getattr__ = __getattr__


@contextlib.contextmanager
def vllm_modules(root: Path):
    """Import vLLM's real block-manager files from ``root/vllm``; undo every import on exit."""
    stubbed = {"vllm"} | {m for m in ("torch", "zmq") if m not in sys.modules}
    before = set(sys.modules)
    finder = _VllmFinder(root, stubbed)
    sys.meta_path.insert(0, finder)
    try:
        yield types.SimpleNamespace(**{
            name.rsplit(".", 1)[1]: importlib.import_module(name)
            for name in REAL_MODULES if finder.real_file(name) is not None})
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:
            if name.partition(".")[0] in stubbed:
                del sys.modules[name]


def find_source(free_order: str) -> Path:
    version, env = VERSIONS[free_order]
    root = Path(os.environ.get(env) or Path.home() / ".cache/vllm-diff/src" / version)
    if not (root / "vllm/v1/core/kv_cache_manager.py").is_file():
        pytest.skip(f"vLLM {version} source not found (set {env} to a directory holding vllm/)")
    for dep in ("msgspec", "cbor2"):
        if importlib.util.find_spec(dep) is None:
            pytest.skip(f"{dep} (a dependency of vLLM's kv_events / hashing) is not installed")
    return root


class VllmUnderTest(types.SimpleNamespace):
    def __init__(self, free_order, modules, hash_fn, root):
        super().__init__(free_order=free_order, m=modules, hash_fn=hash_fn, root=root)

    def __repr__(self):  # hypothesis prints the fixture with every failing example
        return f"<vLLM from {self.root}, free order {self.free_order}>"


@pytest.fixture(scope="module", params=["split", "append"])
def vllm(request):
    free_order = request.param
    root = find_source(free_order)
    with pytest.MonkeyPatch.context() as mp, vllm_modules(root) as v:
        mp.setenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES", "1")
        mp.delenv("PYTHONHASHSEED", raising=False)       # vLLM's "no seed configured" rule
        fn = v.hashing.get_hash_fn_by_name("sha256")
        v.kv_cache_utils.init_none_hash(fn)
        ours = BlockHasher("sha256")
        if free_order == "split":
            assert v.kv_cache_utils.NONE_HASH == ours.none_hash   # same default-seed rule
        else:
            v.kv_cache_utils.NONE_HASH = ours.none_hash           # 0.23 draws a random one
        yield VllmUnderTest(free_order, v, fn, root)


# -- vLLM's side of a request -------------------------------------------------------------------

class VllmRequest:
    """What vLLM's block manager reads of vllm.v1.request.Request."""

    def __init__(self, rid, tokens, block_hasher, cache_salt=None, lora=None):
        self.request_id = rid
        self.prompt_token_ids = list(tokens)
        self.all_token_ids = list(tokens)
        self.num_prompt_tokens = len(tokens)
        self.cache_salt = cache_salt
        self.lora_request = None if lora is None else types.SimpleNamespace(
            lora_name=lora.name, lora_path=lora.path, name=lora.name, adapter_id=1)
        self.mm_features, self.prompt_embeds, self.session_id = [], None, None
        self.num_computed_tokens = self.num_in_flight_tokens = self.num_preemptions = 0
        self.shared_prefix_boundary = 0
        self.skip_reading_prefix_cache = False
        self.kv_cache_report_mode = "incremental"
        self.status = None
        self.block_hasher = block_hasher
        self.block_hashes = []
        self.block_hashes.extend(block_hasher(self))

    @property
    def num_tokens(self):
        return len(self.all_token_ids)

    def append_output_token_ids(self, token):
        self.all_token_ids.append(token)
        self.block_hashes.extend(self.block_hasher(self))


class Pair:
    """The two managers, driven with the same calls, compared after each."""

    def __init__(self, vllm, num_blocks, block_size, caching):
        v = vllm.m
        self.v, self.bs, self.caching = v, block_size, caching
        spec = v.kv_cache_interface.FullAttentionSpec(
            block_size=block_size, num_kv_heads=1, head_size=8, dtype="float16")
        config = v.kv_cache_interface.KVCacheConfig(
            num_blocks=num_blocks, kv_cache_tensors=[],
            kv_cache_groups=[v.kv_cache_interface.KVCacheGroupSpec(["layer0"], spec)])
        self.theirs = v.kv_cache_manager.KVCacheManager(
            config, max_model_len=1 << 20, scheduler_block_size=block_size,
            hash_block_size=block_size, enable_caching=caching, enable_kv_cache_events=True,
            log_stats=False)
        self.ours = KVCacheManager(num_blocks, block_size, enable_caching=caching,
                                   free_order=vllm.free_order)
        self.block_hasher = v.kv_cache_utils.get_request_block_hasher(block_size, vllm.hash_fn)
        self.hasher = BlockHasher("sha256")
        self.reqs: dict[str, tuple[Request, VllmRequest]] = {}
        self.waiting: list[str] = []
        self.running: list[str] = []

    # -- calls ------------------------------------------------------------------------------
    def arrive(self, rid, tokens, salt, lora):
        ours = Request(rid, tokens, hasher=self.hasher, block_size=self.bs, cache_salt=salt,
                       lora=lora)
        theirs = VllmRequest(rid, tokens, self.block_hasher, salt, lora)
        assert ours.block_hashes == theirs.block_hashes
        self.reqs[rid] = (ours, theirs)
        self.waiting.append(rid)

    def admit_all(self, token, external):
        """An admission pass: admit waiting requests in order until one does not fit."""
        while self.waiting and self.admit(token, external):
            self.compare()

    def admit(self, token, external):
        """Admit the head of the waiting queue; ``external`` tokens after the local hit come
        from a KV connector (fresh blocks, cached like computed ones)."""
        ours, theirs = self.reqs[self.waiting[0]]
        hits, n, _ = self.ours.get_computed_blocks(ours)
        result = self.theirs.get_computed_blocks(theirs)
        their_hits, their_n = result[0], result[1]
        assert [b.block_id for b in hits[0]] == ids(their_hits) and n == their_n
        ext = max(0, min(external, ours.num_tokens - 1 - n))
        new = self.ours.allocate_slots(ours, ours.num_tokens - n - ext, n, hits, ext)
        their_new = self.theirs.allocate_slots(theirs, theirs.num_tokens - n - ext, n, their_hits,
                                               num_external_computed_tokens=ext)
        self.check_allocation(new, their_new)
        if new is None:
            return False
        for r in (ours, theirs):
            r.num_computed_tokens = r.num_tokens
            r.append_output_token_ids(token)
        self.running.append(self.waiting.pop(0))
        return True

    def decode(self, rid, token):
        """One decode token; when the pool is short, preempt the last running request (vLLM's
        scheduler) and retry, until the request itself is the victim."""
        ours, theirs = self.reqs[rid]
        while True:
            new = self.ours.allocate_slots(ours, 1)
            self.check_allocation(new, self.theirs.allocate_slots(theirs, 1))
            if new is not None:
                break
            victim = self.running[-1]
            self.preempt(len(self.running) - 1)
            self.compare()
            if victim == rid:
                return
        for r in (ours, theirs):
            r.num_computed_tokens += 1
            r.append_output_token_ids(token)

    def step(self, token):
        """Decode every running request once, then an admission pass."""
        for rid in list(self.running):
            if rid in self.running:
                self.decode(rid, token)
                self.compare()
        self.admit_all(token, 0)

    def finish(self, index):
        if self.running:
            rid = self.running.pop(index % len(self.running))
            self.ours.free(self.reqs[rid][0])
            self.theirs.free(self.reqs[rid][1])

    def preempt(self, index):
        if self.running:
            rid = self.running.pop(index % len(self.running))
            for r, mgr in zip(self.reqs[rid], (self.ours, self.theirs)):
                mgr.free(r)
                r.num_computed_tokens = 0
            self.waiting.insert(0, rid)

    def evict(self, block_ids):
        """BlockPool.evict_blocks (a KV connector's invalidation): hashes leave the map, held
        blocks stay held. vLLM iterates the set it is given; ours gets that same order."""
        block_ids = {i for i in block_ids if i < self.ours.block_pool.num_gpu_blocks}
        self.ours.block_pool.evict_blocks(list(block_ids))
        self.theirs.block_pool.evict_blocks(block_ids)

    def reset(self):
        assert self.ours.reset_prefix_cache() == self.theirs.reset_prefix_cache()

    # -- comparison -------------------------------------------------------------------------
    def check_allocation(self, new, their_new):
        assert (new is None) == (their_new is None)
        note("allocate_slots: None" if new is None else "allocate_slots: blocks")
        if new is not None:
            assert [b.block_id for b in new[0]] == ids(their_new)

    def compare(self):
        pool, tpool = self.ours.block_pool, self.theirs.block_pool
        assert free_ids(pool) == [b.block_id for b in tpool.free_block_queue.get_all_free_blocks()]
        assert [b.ref_cnt for b in pool.blocks[1:]] == [b.ref_cnt for b in tpool.blocks[1:]]
        assert [b.block_hash for b in pool.blocks] == [
            None if b.block_hash is None else bytes(b.block_hash)[:-4] for b in tpool.blocks]
        theirs_map = {}
        for key, found in tpool.cached_block_hash_to_block._cache.items():
            theirs_map[bytes(key)[:-4]] = ([found.block_id] if not isinstance(found, dict)
                                           else list(found))
        assert dict(hash_map(pool)) == theirs_map
        their_tables = self.theirs.coordinator.single_type_managers[0].req_to_blocks
        assert tables(self.ours) == {rid: [b.block_id for b in blocks]
                                     for rid, blocks in their_tables.items() if blocks}
        ours = [event_tuple(e) for e in pool.take_events()]
        assert ours == [event_tuple(e) for e in self.theirs.take_events()]
        for e in ours:
            note(f"KV event {e[0]}")
        if any(len(i) > 1 for i in theirs_map.values()):
            note("a hash with two blocks")


def note(what: str) -> None:
    """A hypothesis statistics event (pytest --hypothesis-show-statistics), inside @given only."""
    if currently_in_test_context():
        event(what)


def ids(kv_cache_blocks) -> list[int]:
    return [b.block_id for b in kv_cache_blocks.blocks[0]]


def event_tuple(e) -> tuple:
    kind = type(e).__name__
    if kind == "BlockStored":
        extra = None if e.extra_keys is None else tuple(
            None if k is None else tuple(k) for k in e.extra_keys)
        return (kind, tuple(e.block_hashes), e.parent_block_hash, tuple(e.token_ids),
                e.block_size, e.lora_name, extra)
    if kind == "BlockRemoved":
        return (kind, tuple(e.block_hashes))
    return (kind,)


# -- the random sequences -----------------------------------------------------------------------

FAMILIES = [list(range(1, 17)), list(range(1, 9)) + list(range(40, 48)), list(range(60, 76))]
OPS = st.one_of(
    # arrive, then an admission pass; `external` tokens of each admission come from a connector
    st.tuples(st.just("arrive"), st.integers(0, 2), st.sampled_from([0, 2, 4, 6, 8, 12]),
              st.lists(st.integers(0, 3), max_size=4), st.integers(0, 5), st.integers(0, 3),
              st.sampled_from([0, 0, 0, 1, 4, 5, 8])),
    st.tuples(st.just("step"), st.integers(0, 3)),
    st.tuples(st.just("decode"), st.integers(0, 7), st.integers(0, 3)),
    st.tuples(st.just("finish"), st.integers(0, 7)),
    st.tuples(st.just("preempt"), st.integers(0, 7)),
    st.tuples(st.just("reset"), st.integers(0, 3)),
    st.tuples(st.just("evict"), st.sets(st.integers(1, 28), max_size=3)),
)


def run_sequence(vllm, capacity, block_size, caching, calls):
    pair = Pair(vllm, -(-capacity // block_size) + 1, block_size, caching)
    pair.compare()
    for n, call in enumerate(calls):
        kind = call[0]
        if kind == "arrive":
            _, family, cut, tail, extra, token, external = call
            salt = lora = None
            if vllm.free_order == "split":  # extra keys only where vLLM's hashing is 0.33's
                salt = "s1" if extra == 1 else None
                lora = LoRA("L", "/p") if extra == 2 else None
            pair.arrive(f"r{n}", FAMILIES[family][:cut] + tail or [7], salt, lora)
            pair.admit_all(token, external)
        elif kind == "step":
            pair.step(call[1])
        elif kind == "decode":
            if pair.running:
                pair.decode(pair.running[call[1] % len(pair.running)], call[2])
        elif kind == "finish":
            pair.finish(call[1])
        elif kind == "preempt":
            pair.preempt(call[1])
        elif kind == "evict":
            pair.evict(call[1])
        elif call[1] == 0:
            pair.reset()
        pair.compare()


CONFIG = dict(capacity=st.integers(8, 28), block_size=st.integers(1, 4),
              caching=st.sampled_from([True, True, True, False]),
              ops=st.lists(OPS, min_size=15, max_size=60))


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**CONFIG)
def test_same_states_and_events_as_vllm(vllm, capacity, block_size, caching, ops):
    run_sequence(vllm, capacity, block_size, caching, ops)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**CONFIG)
def test_same_states_and_events_as_vllm_long(vllm, capacity, block_size, caching, ops):
    run_sequence(vllm, capacity, block_size, caching, ops)


def test_the_walkthrough_against_vllm(vllm):
    """The six-block walkthrough (A, B, A finished, B finished, then C) on both managers."""
    pair = Pair(vllm, 7, 4, True)
    pair.arrive("A", list(range(1, 11)), None, None)
    pair.admit_all(99, 0)
    pair.arrive("B", list(range(1, 9)) + [11, 12], None, None)
    pair.admit_all(99, 0)
    pair.compare()
    pair.finish(0)
    pair.compare()
    pair.finish(0)
    pair.compare()
    expected = {"split": [4, 3, 5, 6, 2, 1], "append": [5, 6, 3, 4, 2, 1]}[vllm.free_order]
    assert free_ids(pair.ours.block_pool) == expected
    pair.arrive("C", list(range(1, 9)) + [13, 14], None, None)
    pair.admit_all(99, 0)
    pair.compare()
