"""Prefix hashing — mirrors vllm/utils/hashing.py and the hashing half of
vllm/v1/core/kv_cache_utils.py (``init_none_hash``, ``hash_block_tokens``,
``generate_block_hash_extra_keys``, ``get_request_block_hasher``) in vLLM 0.33.

    H_i = hash_fn((H_{i-1} if i > 0 else NONE_HASH, tuple(tokens of block i), extra_keys_i or None))

One deliberate difference: vLLM keeps ``NONE_HASH`` in a module global set by ``init_none_hash``;
here it lives in a :class:`BlockHasher` per engine, because one server runs many engines with
different hash functions and seeds at once.
"""
from __future__ import annotations

import hashlib
import pickle
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import cbor2
import xxhash as _xxhash

HashFn = Callable[[Any], bytes]


def sha256(obj: Any) -> bytes:
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def sha256_cbor(obj: Any) -> bytes:
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def xxhash(obj: Any) -> bytes:
    return _xxhash.xxh3_128_digest(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def xxhash_cbor(obj: Any) -> bytes:
    return _xxhash.xxh3_128_digest(cbor2.dumps(obj, canonical=True))


HASH_FUNCTIONS: dict[str, HashFn] = {
    "sha256": sha256, "sha256_cbor": sha256_cbor, "xxhash": xxhash, "xxhash_cbor": xxhash_cbor,
}
# Not collision resistant: vLLM keeps their seed secret (random per process) unless one is set.
NON_CRYPTO_HASH_FUNCTIONS = frozenset({"xxhash", "xxhash_cbor"})
# The seed of the cryptographic hashes when none is configured: the same in every process.
DEFAULT_NONE_HASH_SEED = "vllm-none-hash"


def get_hash_fn_by_name(name: str) -> HashFn:
    try:
        return HASH_FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"Unsupported hash function: {name!r} "
                         f"(one of {', '.join(HASH_FUNCTIONS)})") from None


def split_block_key(key: bytes) -> tuple[bytes, int | None]:
    """(``BlockHash``, group id) of a block pool's key; the group is None for a bare hash (one
    KV-cache group). A ``BlockHash`` is a 16- or 32-byte digest (xxh3_128, SHA-256); a pool that
    serves several groups appends the group id as 4 big-endian bytes (vLLM's
    ``make_block_hash_with_group_id``), so the key's length tells which form it has."""
    if len(key) % 16 == 4:
        return key[:-4], int.from_bytes(key[-4:], "big", signed=False)
    return key, None


def hash_to_event_int(block_hash: bytes) -> int:
    """How KV events publish a hash: the digest read big-endian, its low 64 bits."""
    return int.from_bytes(block_hash, "big") & 0xFFFF_FFFF_FFFF_FFFF


@dataclass(frozen=True)
class LoRA:
    """vLLM's ``LoRARequest``: the name and path go into every block's hash; ``lora_int_id``
    (vLLM's ``adapter_id``, >= 1) is what KV events publish as ``lora_id`` (vLLM's server numbers
    adapters 1, 2, ... by name as they are loaded)."""
    name: str
    path: str = ""
    lora_int_id: int = field(default=1, compare=False)


@dataclass(frozen=True)
class MMItem:
    """A multimodal item: its content identifier and the prompt positions it occupies."""
    identifier: str
    offset: int
    length: int


class HashedRequest(Protocol):
    """What hashing reads of a request (core.request.Request provides it)."""
    lora: LoRA | None
    mm_items: Sequence[MMItem]
    cache_salt: str | None
    block_hashes: list[bytes]
    all_token_ids: Sequence[int]


def generate_block_hash_extra_keys(request: HashedRequest, start: int, end: int) -> tuple | None:
    """Extra keys of the block covering tokens [start, end): tagged tuples, in vLLM's order —
    LoRA on every block, each overlapping multimodal item with its offset relative to the block,
    and the cache salt on block 0 only (the chain carries it to every later block)."""
    keys: list[tuple] = []
    if request.lora is not None:
        keys.append(("lora", request.lora.name, request.lora.path))
    for item in request.mm_items:  # sorted by offset
        if item.offset >= end:
            break
        if item.offset + item.length > start:
            keys.append(("mm", item.identifier, item.offset - start))
    if start == 0 and request.cache_salt:
        keys.append(("cache_salt", request.cache_salt))
    return tuple(keys) if keys else None


class BlockHasher:
    """Per-engine hashing state: the hash function and the NONE_HASH it seeds every chain with.

    Seed rules (vLLM ``resolve_none_hash_seed``): a configured seed (vLLM's PYTHONHASHSEED) wins;
    otherwise the fixed ``"vllm-none-hash"`` for the sha256 variants, and a random 32-byte hex
    string for the xxhash variants. vLLM draws that from ``os.urandom``; we draw it from ``rng``
    so that a scenario replays identically, and a new engine "process" draws a new one.
    """

    def __init__(self, algo: str = "sha256", seed: str | int | None = None,
                 rng: random.Random | None = None) -> None:
        self.hash_fn = get_hash_fn_by_name(algo)
        if seed is not None:
            self.seed = str(seed)
            self.seed_rule = "configured"
        elif algo in NON_CRYPTO_HASH_FUNCTIONS:
            self.seed = (rng or random.Random()).randbytes(32).hex()
            self.seed_rule = "random"
        else:
            self.seed = DEFAULT_NONE_HASH_SEED
            self.seed_rule = "default"
        self.none_hash: bytes = self.hash_fn(self.seed)

    def hash_block_tokens(self, parent_block_hash: bytes | None, token_ids: Sequence[int],
                          extra_keys: tuple | None = None) -> bytes:
        return self.hash_fn((parent_block_hash or self.none_hash, tuple(token_ids), extra_keys))

    def new_block_hashes(self, request: HashedRequest, block_size: int) -> list[bytes]:
        """Hashes of the request's full blocks that it has no hash for yet (vLLM's
        ``request_block_hasher``): called at creation and after every appended token."""
        hashes = request.block_hashes
        start = len(hashes) * block_size
        tokens = request.all_token_ids
        parent = hashes[-1] if hashes else None
        new: list[bytes] = []
        plain = request.lora is None and not request.mm_items and not request.cache_salt
        while start + block_size <= len(tokens):
            end = start + block_size
            extra = None if plain else generate_block_hash_extra_keys(request, start, end)
            parent = self.hash_block_tokens(parent, tokens[start:end], extra)
            new.append(parent)
            start = end
        return new
