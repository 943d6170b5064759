"""BlockHashToBlockMap (vLLM 0.33, vllm/v1/core/block_pool.py).

vLLM does not de-duplicate cached blocks: when a block becomes full and is cached, an identical
block may already be in the map, and both stay (block tables are append-only, so a block id must
never change under a running request). Hence: one hash may map to several blocks, a lookup
returns the first one inserted, and removal is by (hash, block id) so that evicting one copy
leaves the other.
"""
from __future__ import annotations

from blockviz.core import BlockHashToBlockMap, KVCacheBlock

HA, HB = b"\xaa" * 32, b"\xbb" * 32


def blocks(*ids):
    return [KVCacheBlock(i) for i in ids]


def test_empty_map():
    m = BlockHashToBlockMap()
    assert m.get_one_block(HA) is None
    assert not m.contain(HA, 1)
    assert m.pop(HA, 1) is None
    assert len(m) == 0 and list(m.items()) == []


def test_one_block_per_hash():
    b1, b2 = blocks(1, 2)
    m = BlockHashToBlockMap()
    m.insert(HA, b1)
    m.insert(HB, b2)
    assert m.get_one_block(HA) is b1 and m.get_one_block(HB) is b2
    assert m.contain(HA, 1) and not m.contain(HA, 2)
    assert list(m.items()) == [(HA, [1]), (HB, [2])]
    assert len(m) == 2


def test_duplicates_are_kept_and_the_first_inserted_wins():
    b2, b7, b4 = blocks(2, 7, 4)
    m = BlockHashToBlockMap()
    for b in (b2, b7, b4):
        m.insert(HA, b)
    assert list(m.items()) == [(HA, [2, 7, 4])]      # insertion order, not id order
    assert m.get_one_block(HA) is b2
    assert all(m.contain(HA, i) for i in (2, 7, 4))
    assert len(m) == 1                                # len counts hashes


def test_pop_by_hash_and_block_id_leaves_the_other_copies():
    b2, b7, b4 = blocks(2, 7, 4)
    m = BlockHashToBlockMap()
    for b in (b2, b7, b4):
        m.insert(HA, b)
    assert m.pop(HA, 2) is b2
    assert list(m.items()) == [(HA, [7, 4])]
    assert m.get_one_block(HA) is b7                  # the next-oldest copy answers now
    assert m.pop(HA, 4) is b4
    assert m.get_one_block(HA) is b7 and m.contain(HA, 7)
    assert m.pop(HA, 7) is b7
    assert m.get_one_block(HA) is None and len(m) == 0


def test_pop_of_a_non_matching_id_returns_none_and_changes_nothing():
    b1, b2, b3 = blocks(1, 2, 3)
    m = BlockHashToBlockMap()
    m.insert(HA, b1)                                  # single block under HA
    m.insert(HB, b2)
    m.insert(HB, b3)                                  # two blocks under HB
    before = list(m.items())
    assert m.pop(HA, 2) is None
    assert m.pop(HB, 1) is None
    assert m.pop(b"\xcc" * 32, 1) is None
    assert list(m.items()) == before
    assert m.get_one_block(HA) is b1 and m.get_one_block(HB) is b2


def test_reinserting_after_a_pop_goes_to_the_back():
    b1, b2 = blocks(1, 2)
    m = BlockHashToBlockMap()
    m.insert(HA, b1)
    m.insert(HA, b2)
    m.pop(HA, 1)
    m.insert(HA, b1)
    assert list(m.items()) == [(HA, [2, 1])]
    assert m.get_one_block(HA) is b2


def test_evicting_one_copy_of_a_duplicate_moves_its_hash_to_the_end_of_the_map():
    """vLLM's pop takes the whole entry out and puts the remaining blocks back, so the hash moves
    to the end of the map's order — visible in the JSON hash_table's key order."""
    from blockviz.core import BlockHashToBlockMap, KVCacheBlock

    m = BlockHashToBlockMap()
    b1, b2, b3 = KVCacheBlock(1), KVCacheBlock(2), KVCacheBlock(3)
    m.insert(b"h1", b1)
    m.insert(b"h1", b2)
    m.insert(b"h2", b3)
    assert [h for h, _ in m.items()] == [b"h1", b"h2"]
    assert m.pop(b"h1", 1) is b1
    assert list(m.items()) == [(b"h2", [3]), (b"h1", [2])]
    assert m.pop(b"h2", 99) is None                      # wrong id: nothing removed...
    assert list(m.items()) == [(b"h1", [2]), (b"h2", [3])]  # ...but re-inserted last, as in vLLM
