"""Prefix hashing (vLLM 0.33: vllm/utils/hashing.py and the hashing half of
vllm/v1/core/kv_cache_utils.py), reproduced byte for byte.

    H_i = hash_fn((H_{i-1} if i > 0 else NONE_HASH, tuple(tokens of block i), extra_keys_i or None))

Where the vectors come from:
  * sha256 / sha256_cbor without a seed: the table in shared/design/vllm-semantics.md.
  * everything with a configured seed, and all xxhash / xxhash_cbor values: produced by running
    vLLM 0.33.0's own, unmodified hashing code (the PyPI wheel's vllm/utils/hashing.py and
    vllm/v1/core/kv_cache_utils.py, loaded without vLLM's heavy deps by the team's vllm-diff tool)
    in a separate process with PYTHONHASHSEED=42 — vLLM's "configured seed" — like this:
        fn = hashing.get_hash_fn_by_name(ALGO); kv_cache_utils.init_none_hash(fn)
        hasher = kv_cache_utils.get_request_block_hasher(4, fn)
        NONE_HASH.hex(); Request(prompt_token_ids=[1..8], block_hasher=hasher,
                                 [cache_salt="s1" | lora_request(lora_name="L", lora_path="/p")]
                                 ).block_hashes -> [h.hex() for h in ...]
    (without a seed, xxhash's NONE_HASH is random, so it has no fixed vector).
  * extra keys with multimodal items, and the BlockStored events of such a request: the same way,
    from vLLM's ``generate_block_hash_extra_keys`` and ``BlockPool.cache_full_blocks`` (no seed).
"""
from __future__ import annotations

import hashlib
import pickle
import random

import cbor2
import pytest
import xxhash
from core_helpers import DOC_H1_INT, DOC_H2_INT, event_int

from blockviz.core import (
    BlockHasher,
    BlockPool,
    LoRA,
    MMItem,
    Request,
    get_hash_fn_by_name,
    hash_to_event_int,
)
from blockviz.core.hashing import generate_block_hash_extra_keys

TOKENS = list(range(1, 9))

# (NONE_HASH, [H1, H2], [H1, H2] with cache_salt "s1", [H1, H2] with LoRA ("L", "/p")) prefixes.
DOC_VECTORS = {  # vllm-semantics.md, "Test vectors" (no seed set)
    "sha256": ("066b1e8987e0", ["52a7f141c609", "bee96bce54f5"],
               ["212c5a48b630", "45d34e640da9"], ["ddd23c175752", "54cf1fe74602"]),
    "sha256_cbor": ("9bd96a485ad8", ["58d0879dff38", "e1bc29393a2d"],
                    ["6b34eefae052", "e2a130918187"], ["e113db1a0640", "58c3e6002c03"]),
}
SEED_42_VECTORS = {  # vLLM 0.33.0's own code, PYTHONHASHSEED=42 (see the module docstring)
    "sha256": ("c0bc02c9fc92a494", ["8ad1c350703c26eb", "0bf6bc57a6647ffa"],
               ["3bbd4ed8aab9267c", "9edb3ac9a86a3435"], ["2e783ff870c5d176", "99b0eeccc93ac53c"]),
    "sha256_cbor": ("9fa6eb003f14425e", ["0a99040f25d8a5f2", "c415b4994e9ed1d9"],
                    ["9dc9fa57e94eede9", "8cdb7a3cf74aebae"], ["77386fa3880d820c", "ab28c4c18d886a35"]),
    "xxhash": ("b6cdd80ea04b31ad", ["a3022a626f660bf0", "26b6262475f43511"],
               ["c73bab674848d5de", "3503d405a268dd0a"], ["afd228b296e897d4", "6ad6bdd7b472344a"]),
    "xxhash_cbor": ("a9d2e63407fce1a2", ["10e307592838698e", "671b32307cc26869"],
                    ["a3dc82c198cb4f40", "10d09e4aea060ab5"], ["2b2d3f52b70fd2c3", "c4ba972b2ee2a744"]),
}
# ... and the event ints (low 64 bits) of the plain H1, H2 under PYTHONHASHSEED=42.
SEED_42_EVENT_INTS = {
    "sha256": [649359390096368487, 14757019014570657544],
    "sha256_cbor": [5988051177307384287, 11214766589215907092],
    "xxhash": [2767512630621280259, 4018757380743825132],
    "xxhash_cbor": [8335022083850143378, 14438435007848620520],
}


def chain(hasher, **kw):
    return Request("r", TOKENS, hasher=hasher, block_size=4, **kw).block_hashes


def assert_vectors(hasher, vectors):
    none, plain, salted, lora = vectors
    assert hasher.none_hash.hex().startswith(none)
    for got, want in [(chain(hasher), plain), (chain(hasher, cache_salt="s1"), salted),
                      (chain(hasher, lora=LoRA("L", "/p")), lora)]:
        assert len(got) == 2
        assert [h.hex()[:len(w)] for h, w in zip(got, want)] == want


@pytest.mark.parametrize("algo", DOC_VECTORS)
def test_doc_vectors_without_a_seed(algo):
    hasher = BlockHasher(algo)
    assert hasher.seed_rule == "default" and hasher.seed == "vllm-none-hash"
    assert_vectors(hasher, DOC_VECTORS[algo])


def test_doc_event_ints():
    h1, h2 = chain(BlockHasher("sha256"))
    assert hash_to_event_int(h1) == DOC_H1_INT == event_int(h1)
    assert hash_to_event_int(h2) == DOC_H2_INT == event_int(h2)


@pytest.mark.parametrize("algo", SEED_42_VECTORS)
@pytest.mark.parametrize("seed", ["42", 42])
def test_configured_seed_vectors_from_vllm(algo, seed):
    """A configured seed (vLLM's PYTHONHASHSEED) wins for every algorithm: NONE_HASH =
    hash_fn("42"); an rng passed for xxhash's random rule is then ignored."""
    hasher = BlockHasher(algo, seed=seed, rng=random.Random(1))
    assert hasher.seed_rule == "configured" and hasher.seed == "42"
    assert_vectors(hasher, SEED_42_VECTORS[algo])
    assert [hash_to_event_int(h) for h in chain(hasher)] == SEED_42_EVENT_INTS[algo]


@pytest.mark.parametrize("algo", ["xxhash", "xxhash_cbor"])
def test_xxhash_without_a_seed_is_random_per_engine(algo):
    """vLLM draws os.urandom(32).hex() for the non-cryptographic hashes when no seed is set, so
    NONE_HASH (and every hash) differs between processes; blockviz draws it from an rng so a
    scenario replays identically: same rng seed -> same NONE_HASH, different -> different."""
    a = BlockHasher(algo, rng=random.Random(1))
    b = BlockHasher(algo, rng=random.Random(2))
    a2 = BlockHasher(algo, rng=random.Random(1))
    assert a.seed_rule == "random"
    assert len(a.seed) == 64 and int(a.seed, 16) >= 0              # 32 random bytes, as hex
    assert a.none_hash != b.none_hash and chain(a) != chain(b)
    assert a.none_hash == a2.none_hash and chain(a) == chain(a2)
    assert a.none_hash == get_hash_fn_by_name(algo)(a.seed)
    assert BlockHasher(algo).none_hash != BlockHasher(algo).none_hash  # fresh entropy each time


@pytest.mark.parametrize("algo", ["sha256", "sha256_cbor"])
def test_sha256_without_a_seed_ignores_the_rng(algo):
    assert BlockHasher(algo, rng=random.Random(1)).none_hash == BlockHasher(algo).none_hash
    assert BlockHasher(algo).none_hash == get_hash_fn_by_name(algo)("vllm-none-hash")


def test_hash_functions_serialize_as_vllm_does():
    """sha256 / xxhash hash pickle (HIGHEST_PROTOCOL) bytes; the *_cbor ones canonical CBOR."""
    obj = (b"\x01" * 32, (1, 2, 3, 4), (("lora", "L", "/p"),))
    pk = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    cb = cbor2.dumps(obj, canonical=True)
    assert get_hash_fn_by_name("sha256")(obj) == hashlib.sha256(pk).digest()
    assert get_hash_fn_by_name("sha256_cbor")(obj) == hashlib.sha256(cb).digest()
    assert get_hash_fn_by_name("xxhash")(obj) == xxhash.xxh3_128_digest(pk)
    assert get_hash_fn_by_name("xxhash_cbor")(obj) == xxhash.xxh3_128_digest(cb)
    with pytest.raises(ValueError):
        get_hash_fn_by_name("md5")


def test_only_full_blocks_get_a_hash_and_appends_extend_the_chain(hasher):
    """A request hashes its full blocks at creation and whenever an appended token completes a
    block (vLLM's request_block_hasher); the chain is the same however the tokens arrived."""
    r = Request("r", list(range(1, 11)), hasher=hasher, block_size=4)
    assert len(r.block_hashes) == 2                           # 10 tokens: 2 full blocks
    r.append_output_token_ids(11)
    assert len(r.block_hashes) == 2
    r.append_output_token_ids([12, 13])
    assert len(r.block_hashes) == 3
    whole = Request("w", list(range(1, 14)), hasher=hasher, block_size=4)
    assert r.block_hashes == whole.block_hashes
    assert Request("n", [1, 2, 3], hasher=None, block_size=4).block_hashes == []


def test_cache_salt_is_on_block_0_only_but_isolates_the_whole_chain(hasher):
    salted = Request("s", TOKENS, hasher=hasher, block_size=4, cache_salt="s1")
    plain = Request("p", TOKENS, hasher=hasher, block_size=4)
    assert generate_block_hash_extra_keys(salted, 0, 4) == (("cache_salt", "s1"),)
    assert generate_block_hash_extra_keys(salted, 4, 8) is None
    assert salted.block_hashes[0] != plain.block_hashes[0]
    assert salted.block_hashes[1] != plain.block_hashes[1]     # via the parent hash


def test_lora_key_is_on_every_block(hasher):
    r = Request("l", TOKENS, hasher=hasher, block_size=4, lora=LoRA("L", "/p"))
    assert generate_block_hash_extra_keys(r, 0, 4) == (("lora", "L", "/p"),)
    assert generate_block_hash_extra_keys(r, 4, 8) == (("lora", "L", "/p"),)
    # the adapter path is part of the key: re-pointing a name at another adapter must not hit
    other = Request("m", TOKENS, hasher=hasher, block_size=4, lora=LoRA("L", "/q"))
    assert other.block_hashes[0] != r.block_hashes[0]


# Multimodal items A [1,3), B [3,6), C [6,7), D [9,14) over tokens 1..16, block size 4: B and D span
# block boundaries, so their offsets relative to a later block are negative. Expected values from
# vLLM 0.33.0's generate_block_hash_extra_keys / request_block_hasher (sha256, no seed).
MM = [MMItem("A", 1, 2), MMItem("B", 3, 3), MMItem("C", 6, 1), MMItem("D", 9, 5)]
MM_KEYS = [(("mm", "A", 1), ("mm", "B", 3)), (("mm", "B", -1), ("mm", "C", 2)),
           (("mm", "D", 1),), (("mm", "D", -3),)]
MM_HASHES = ["25fe8fc06fe7e44d", "71d3cc37adbe4f0a", "fd640f84f49edcb0", "ed3f725e003fbb8a"]
LORA_KEY, SALT_KEY = ("lora", "L", "/p"), ("cache_salt", "s1")
ALL_KEYS = [(LORA_KEY, *MM_KEYS[0], SALT_KEY), (LORA_KEY, *MM_KEYS[1]), (LORA_KEY, *MM_KEYS[2]),
            (LORA_KEY, *MM_KEYS[3])]
ALL_HASHES = ["758cf8c9f367806c", "845218c80927fad8", "f43f2252dcd5d663", "792a3945434ff51c"]


@pytest.mark.parametrize("with_lora_and_salt", [False, True])
def test_extra_keys_and_hashes_match_vllm(hasher, with_lora_and_salt):
    """Order inside a block: LoRA, then each overlapping mm item ("mm", id, offset - block_start),
    then the cache salt (block 0 only)."""
    kw = dict(lora=LoRA("L", "/p"), cache_salt="s1") if with_lora_and_salt else {}
    keys, hashes = (ALL_KEYS, ALL_HASHES) if with_lora_and_salt else (MM_KEYS, MM_HASHES)
    r = Request("r", list(range(1, 17)), hasher=hasher, block_size=4, mm_items=MM[::-1], **kw)
    assert [generate_block_hash_extra_keys(r, 4 * i, 4 * i + 4) for i in range(4)] == keys
    assert [h.hex()[:16] for h in r.block_hashes] == hashes
    # built incrementally (6 prompt tokens, then one token at a time): the same chain
    inc = Request("i", list(range(1, 7)), hasher=hasher, block_size=4, mm_items=MM, **kw)
    for t in range(7, 17):
        inc.append_output_token_ids(t)
    assert inc.block_hashes == r.block_hashes


def test_block_stored_events_carry_untagged_extra_keys_like_vllm(hasher):
    """KV events publish the extra keys untagged (bare LoRA name and salt, (mm_id, offset) pairs)
    and the LoRA name; a second cache call's event names the previous block's hash as parent.
    Expected values: vLLM 0.33.0's BlockPool.cache_full_blocks on the same request, caching
    blocks [0, 1) and then [1, 4)."""
    r = Request("r", list(range(1, 17)), hasher=hasher, block_size=4, mm_items=MM,
                lora=LoRA("L", "/p"), cache_salt="s1")
    pool = BlockPool(7)
    blocks = pool.get_new_blocks(4)
    pool.cache_full_blocks(r, blocks, 0, 1, 4)
    pool.cache_full_blocks(r, blocks, 1, 4, 4)
    e1, e2 = pool.take_events()
    assert (e1.block_hashes, e1.parent_block_hash, e1.token_ids, e1.block_size, e1.lora_name) == (
        (326257993096293644,), None, (1, 2, 3, 4), 4, "L")
    assert e1.extra_keys == (("L", ("A", 1), ("B", 3), "s1"),)
    assert (e2.block_hashes, e2.parent_block_hash, e2.token_ids, e2.lora_name) == (
        (16999195094577518125, 5983352662691145717, 5540908354336990810), 326257993096293644,
        tuple(range(5, 17)), "L")
    assert e2.extra_keys == (("L", ("B", -1), ("C", 2)), ("L", ("D", 1)), ("L", ("D", -3)))
