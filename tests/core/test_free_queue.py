"""FreeKVCacheBlockQueue at pointer level (vLLM 0.33, vllm/v1/core/kv_cache_utils.py).

An intrusive doubly linked list threaded through the blocks with two sentinels: the head is handed
out first, and the same order is the LRU eviction order of the prefix cache. Every check reads the
links in both directions and the sentinels (``walk_free_queue``), never just the list the queue
returns about itself. Removed blocks must have both links cleared, because "queued" is defined by
the links (the null block and every held block are unlinked).
"""
from __future__ import annotations

import pytest
from core_helpers import walk_free_queue

from blockviz.core import FreeKVCacheBlockQueue, KVCacheBlock


def make_queue(n: int = 6):
    blocks = [KVCacheBlock(i) for i in range(n)]
    return blocks, FreeKVCacheBlockQueue(blocks)


def unlinked(*blocks: KVCacheBlock) -> bool:
    return all(b.prev_free_block is None and b.next_free_block is None for b in blocks)


def test_built_in_the_given_order_with_sentinels():
    blocks, q = make_queue(4)
    assert walk_free_queue(q) == [0, 1, 2, 3]
    assert q.fake_free_list_head.next_free_block is blocks[0]
    assert blocks[0].prev_free_block is q.fake_free_list_head
    assert q.fake_free_list_tail.prev_free_block is blocks[3]
    assert blocks[3].next_free_block is q.fake_free_list_tail
    assert q.fake_free_list_head.block_id == q.fake_free_list_tail.block_id == -1


def test_empty_queue_links_the_sentinels_to_each_other():
    q = FreeKVCacheBlockQueue([])
    assert walk_free_queue(q) == []
    assert q.fake_free_list_head.next_free_block is q.fake_free_list_tail
    assert q.fake_free_list_tail.prev_free_block is q.fake_free_list_head


def test_popleft_hands_out_the_head_and_unlinks_it():
    blocks, q = make_queue(3)
    assert q.popleft() is blocks[0]
    assert unlinked(blocks[0])
    assert walk_free_queue(q) == [1, 2]
    assert q.fake_free_list_head.next_free_block is blocks[1]
    assert q.popleft() is blocks[1] and q.popleft() is blocks[2]
    assert walk_free_queue(q) == [] and unlinked(*blocks)


def test_popleft_on_empty_raises_and_keeps_the_sentinels():
    _, q = make_queue(1)
    q.popleft()
    with pytest.raises(ValueError):
        q.popleft()
    assert walk_free_queue(q) == []


@pytest.mark.parametrize("n", [0, 1, 2, 5, 6])
def test_popleft_n_takes_the_first_n_in_order(n):
    blocks, q = make_queue(6)
    popped = q.popleft_n(n)
    assert popped == blocks[:n]
    assert unlinked(*popped)
    assert walk_free_queue(q) == list(range(n, 6))


def test_popleft_n_more_than_queued_raises_and_changes_nothing():
    blocks, q = make_queue(3)
    with pytest.raises(ValueError):
        q.popleft_n(4)
    assert walk_free_queue(q) == [0, 1, 2]


@pytest.mark.parametrize("victim, rest", [(0, [1, 2, 3, 4]), (2, [0, 1, 3, 4]), (4, [0, 1, 2, 3])],
                         ids=["head", "middle", "tail"])
def test_remove_anywhere_in_o1(victim, rest):
    """remove() is what touch() uses for a prefix-cache hit on a free block: the block may sit
    anywhere in the queue; its neighbours are linked to each other and its own links cleared."""
    blocks, q = make_queue(5)
    q.remove(blocks[victim])
    assert unlinked(blocks[victim])
    assert walk_free_queue(q) == rest


def test_remove_the_only_block():
    blocks, q = make_queue(1)
    q.remove(blocks[0])
    assert walk_free_queue(q) == [] and unlinked(blocks[0])


def test_remove_of_an_unqueued_block_raises_and_changes_nothing():
    blocks, q = make_queue(3)
    q.remove(blocks[1])
    with pytest.raises(RuntimeError):
        q.remove(blocks[1])
    with pytest.raises(RuntimeError):
        q.remove(KVCacheBlock(9))
    assert walk_free_queue(q) == [0, 2]


def test_append_puts_one_block_at_the_tail():
    blocks, q = make_queue(4)
    b0 = q.popleft()
    q.append(b0)
    assert walk_free_queue(q) == [1, 2, 3, 0]
    assert q.fake_free_list_tail.prev_free_block is b0


def test_append_into_an_empty_queue():
    blocks, q = make_queue(2)
    q.popleft_n(2)
    q.append(blocks[1])
    assert walk_free_queue(q) == [1]


def test_append_n_keeps_the_order_last_becomes_tail():
    blocks, q = make_queue(6)
    taken = q.popleft_n(3)                      # queue 3 4 5
    q.append_n([taken[2], taken[0], taken[1]])
    assert walk_free_queue(q) == [3, 4, 5, 2, 0, 1]
    q.append_n([])
    assert walk_free_queue(q) == [3, 4, 5, 2, 0, 1]


def test_prepend_n_first_element_becomes_the_head():
    """free_blocks (vLLM >= 0.24) prepends the blocks without a hash in the order given — the
    request's table reversed — so the first of them is handed out next."""
    blocks, q = make_queue(6)
    taken = q.popleft_n(3)                      # queue 3 4 5
    q.prepend_n([taken[2], taken[0]])
    assert walk_free_queue(q) == [2, 0, 3, 4, 5]
    assert q.fake_free_list_head.next_free_block is taken[2]
    q.prepend_n([])
    assert walk_free_queue(q) == [2, 0, 3, 4, 5]


def test_prepend_n_and_append_n_into_an_empty_queue():
    blocks, q = make_queue(4)
    q.popleft_n(4)
    q.prepend_n([blocks[2], blocks[1]])
    assert walk_free_queue(q) == [2, 1]
    _, q2 = make_queue(0)
    q2.append_n(blocks[3:])
    assert walk_free_queue(q2) == [3]


def test_get_all_free_blocks_and_iteration_follow_the_links():
    blocks, q = make_queue(5)
    q.remove(blocks[1])
    q.prepend_n([blocks[1]])
    q.remove(blocks[3])
    q.append(blocks[3])
    assert [b.block_id for b in q.get_all_free_blocks()] == [1, 0, 2, 4, 3]
    assert [b.block_id for b in q] == [1, 0, 2, 4, 3]
    assert len(q) == q.num_free_blocks == 5


def test_a_long_mixed_sequence_keeps_every_link_consistent():
    """The operations interleaved the way the pool uses them, checked after every step against
    a plain Python list that models the queue."""
    blocks, q = make_queue(10)
    model = list(range(10))
    for step in range(60):
        kind = step % 5
        if kind == 0 and model:
            assert q.popleft().block_id == model.pop(0)
        elif kind == 1:
            n = min(2, len(model))
            assert [b.block_id for b in q.popleft_n(n)] == model[:n]
            del model[:n]
        elif kind == 2 and model:
            victim = model[len(model) // 2]
            q.remove(blocks[victim])
            model.remove(victim)
        elif kind == 3:
            out = [i for i in range(10) if i not in model][:2]
            q.prepend_n([blocks[i] for i in out])
            model[:0] = out
        else:
            out = [i for i in range(10) if i not in model][::-1][:3]
            q.append_n([blocks[i] for i in out])
            model.extend(out)
        assert walk_free_queue(q) == model
        assert unlinked(*(blocks[i] for i in range(10) if i not in model))
