"""Property-based tests: thousands of random operation sequences through KVCacheManager + Scheduler.

A hypothesis state machine arrives requests with prompts that share prefixes (three prompt
families, random cuts, random tails; outputs from a 4-token vocabulary so outputs collide too),
admits them, decodes with preemption, finishes and preempts them, and resets the prefix cache —
in both free orders, with prefix caching on and off, on pools of 8..28 tokens (2..28 blocks of
1..4 tokens), so eviction, duplicates and preemption happen all the time.

After every operation ``check_invariants(pool, manager)`` must hold. On top, ``CheckedManager``
wraps the manager's three entry points and checks, on every call the scheduler makes, the
behaviour vllm-semantics.md states — each recomputed from the state before the call, not read
back from the code under test:
  * get_computed_blocks: hit <= num_tokens - 1, whole blocks, a prefix of the request's own hash
    chain, each hit the first block inserted under its hash, maximal (the next hash is not
    cached), and no state change;
  * allocate_slots: returns None exactly when (blocks needed + hit blocks sitting in the free
    queue) exceeds the free blocks, and then changes nothing; otherwise the new blocks are the
    head of the queue (after the hits left it), every hashed one among them is evicted with one
    BlockRemoved (in pop order), and every block full as of min(computed + new, num_tokens) is
    cached under the request's hash, announced by one BlockStored with the right parent;
  * free: the blocks reaching ref_cnt 0, in reversed-table order, go to the head (split: those
    without a hash, or all when caching is off) and the tail (the rest; all of them for append),
    and the rest of the queue is untouched.
And of the scheduler, per step: preemption victims are the last running requests, in order; a
step that preempted admits nothing; a preempted request restarts from 0 at the front of the
waiting queue; only running requests hold blocks, exactly cdiv(num_computed_tokens, block_size).
"""
from __future__ import annotations

import pytest
from core_helpers import event_int, free_ids, hash_map, snapshot
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from blockviz.core import (
    AllBlocksCleared,
    BlockHasher,
    BlockRemoved,
    BlockStored,
    KVCacheManager,
    Request,
    RequestStatus,
    Scheduler,
    check_invariants,
)
from blockviz.core.scheduler import SchedulerConfig

FAMILIES = [list(range(1, 17)), list(range(1, 9)) + list(range(40, 48)), list(range(60, 76))]


def cdiv(a, b):
    return -(-a // b)


class CheckedManager(KVCacheManager):
    """A KVCacheManager whose entry points check the documented contract on every call."""

    def get_computed_blocks(self, request):
        before = snapshot(self)
        blocks, n, boundary = super().get_computed_blocks(request)
        assert snapshot(self) == before, "get_computed_blocks changed state"
        assert len(blocks) == 1 and boundary == 0, "one group: one list, no shared boundary"
        hits = blocks[0]
        bs, pool = self.block_size, self.block_pool
        if not self.enable_caching:
            assert (hits, n) == ([], 0)
            return blocks, n, boundary
        assert n == len(hits) * bs and n <= request.num_tokens - 1
        mapped = dict(hash_map(pool))
        for blk, h in zip(hits, request.block_hashes):
            assert blk.block_hash == h and mapped[h][0] == blk.block_id
        limit_blocks = (request.num_tokens - 1) // bs
        if len(hits) < min(limit_blocks, len(request.block_hashes)):
            assert request.block_hashes[len(hits)] not in mapped, "hit is not maximal"
        return blocks, n, boundary

    def allocate_slots(self, request, num_new_tokens, num_new_computed_tokens=0,
                       new_computed_blocks=None, num_external_computed_tokens=0, *,
                       full_sequence_must_fit=False, delay_cache_blocks=False,
                       reserved_blocks=0, has_scheduled_reqs=False):
        # without a connector the scheduler never delays caching nor reserves blocks
        assert not delay_cache_blocks and reserved_blocks == 0
        blocks_in = new_computed_blocks
        new_computed_blocks = new_computed_blocks[0] if new_computed_blocks else []
        pool, bs, rid = self.block_pool, self.block_size, request.request_id
        before = snapshot(self, [request])
        queue = free_ids(pool)
        held = list(self.req_to_blocks.get(rid, ()))
        hashes_before = {b.block_id: b.block_hash for b in pool.blocks}
        n_cached_before = self.num_cached_block.get(rid, len(new_computed_blocks))
        n_events = len(pool.kv_event_queue)
        total = request.num_computed_tokens + num_new_computed_tokens + num_new_tokens
        free_hits = [b for b in new_computed_blocks if b.ref_cnt == 0]
        needed = max(cdiv(total, bs) - len(held) - len(new_computed_blocks), 0) + len(free_hits)
        if full_sequence_must_fit:  # the admission gate sizes the whole sequence
            needed_full = max(cdiv(request.num_tokens, bs) - len(held) - len(new_computed_blocks),
                              0) + len(free_hits)
            if needed <= len(queue) < needed_full:
                event("refused: the chunk fits, the whole sequence does not")
            needed = max(needed, needed_full)

        result = super().allocate_slots(request, num_new_tokens, num_new_computed_tokens,
                                        blocks_in, num_external_computed_tokens,
                                        full_sequence_must_fit=full_sequence_must_fit,
                                        has_scheduled_reqs=has_scheduled_reqs)
        if result is None:
            event("allocate_slots refused")
            assert needed > len(queue), "allocate_slots refused although the blocks fit"
            assert snapshot(self, [request]) == before, "a refused allocate_slots changed state"
            return result
        (new,) = result
        assert needed <= len(queue), "allocate_slots succeeded although short of blocks"
        hit_ids = {b.block_id for b in new_computed_blocks}
        new_ids = [b.block_id for b in new]
        assert new_ids == [i for i in queue if i not in hit_ids][:len(new)], "not taken from head"
        table = self.req_to_blocks[rid]
        assert table == held + list(new_computed_blocks) + new and len(table) == cdiv(total, bs)
        assert all(b.ref_cnt == 1 for b in new)

        evicted = [hashes_before[i] for i in new_ids if hashes_before[i] is not None]
        if evicted:
            event("evicted at reuse")
        if free_hits:
            event("hit on a free block")
        emitted = pool.kv_event_queue[n_events:]
        removed = [e for e in emitted if isinstance(e, BlockRemoved)]
        stored = [e for e in emitted if isinstance(e, BlockStored)]
        assert emitted[:len(removed)] == removed, "BlockRemoved must come before BlockStored"
        if self.enable_caching:
            assert [e.block_hashes for e in removed] == [(event_int(h),) for h in evicted]
            n_full = min(min(total, request.num_tokens) // bs, len(request.block_hashes))
            for i in range(n_full):
                assert table[i].block_hash == request.block_hashes[i], f"block {i} not cached"
            fresh = request.block_hashes[n_cached_before:n_full]
            if fresh:
                (ev,) = stored
                assert ev.block_hashes == tuple(event_int(h) for h in fresh)
                parent = request.block_hashes[n_cached_before - 1] if n_cached_before else None
                assert ev.parent_block_hash == (event_int(parent) if parent else None)
                assert ev.token_ids == tuple(request.all_token_ids[n_cached_before * bs:n_full * bs])
            else:
                assert stored == []
        else:
            assert emitted == [] and all(b.block_hash is None for b in table)
        return result

    def free(self, request):
        pool = self.block_pool
        queue = free_ids(pool)
        table = list(self.req_to_blocks.get(request.request_id, ()))
        super().free(request)
        reached = [b for b in reversed(table) if b.ref_cnt == 0]
        if pool.free_order == "split":
            head = [b.block_id for b in reached if b.block_hash is None or not self.enable_caching]
        else:
            head = []
        tail = [b.block_id for b in reached if b.block_id not in head]
        assert free_ids(pool) == head + queue + tail, "free put blocks in the wrong places"
        assert request.request_id not in self.req_to_blocks


class CoreMachine(RuleBasedStateMachine):
    @initialize(capacity=st.integers(8, 28), block_size=st.integers(1, 4),
                free_order=st.sampled_from(["split", "append"]), caching=st.booleans(),
                rng=st.randoms(use_true_random=False),
                budget=st.sampled_from([8192, 2, 3, 4, 8]), seqs=st.sampled_from([256, 1, 2, 3]),
                chunked=st.booleans(), threshold=st.sampled_from([0, 0, 1, 3]))
    def setup(self, capacity, block_size, free_order, caching, rng, budget, seqs, chunked,
              threshold):
        # `capacity` tokens of KV: small enough for constant pressure, big enough for a prompt.
        # vLLM's rules: with chunked prefill off the budget covers max_model_len; the budget
        # is at least max_num_seqs.
        max_model_len = 64 if not chunked else 1 << 20
        config = SchedulerConfig(max_num_batched_tokens=budget if chunked else 64,
                                 max_num_seqs=min(seqs, budget if chunked else 64),
                                 enable_chunked_prefill=chunked,
                                 long_prefill_token_threshold=threshold, max_model_len=max_model_len)
        assert not config.problems()
        self.mgr = CheckedManager(cdiv(capacity, block_size) + 1, block_size,
                                  enable_caching=caching, free_order=free_order,
                                  max_model_len=max_model_len)
        self.pool = self.mgr.block_pool
        self.sched = Scheduler(self.mgr, config=config)
        self.hasher = BlockHasher("sha256")
        self.rng = rng
        self.count = 0

    # -- helpers ----------------------------------------------------------------------------
    def requests(self, *statuses):
        return [r for r in self.sched.requests.values() if r.status in statuses]

    def run_step(self, only=None):
        running_before = [r.request_id for r in self.sched.running]
        out = self.sched.schedule(only)
        cfg = self.sched.config
        assert out.total_num_scheduled_tokens <= cfg.max_num_batched_tokens
        assert len(self.sched.running) <= cfg.max_num_seqs or only is not None
        if out.preempted:
            event("preempted under pressure")
            assert not any(s.admitted for s in out.scheduled), "admitted in a preempting step"
            # victims are always the last running request, one after the other
            assert out.preempted == running_before[::-1][:len(out.preempted)]
        if any(not s.samples for s in out.scheduled):
            event("a partial prefill chunk")
        for s in out.scheduled:
            assert s.request.status is RequestStatus.RUNNING
            assert s.local_hit_tokens <= s.request.num_tokens - 1
            assert s.request.num_computed_tokens == s.start + s.num_new_tokens
            assert s.samples == (s.request.num_computed_tokens == s.request.num_tokens)
            if only is not None:
                assert s.request.request_id in only and not s.admitted
        for rid in out.preempted:
            r = self.sched.requests[rid]
            assert r.status is RequestStatus.PREEMPTED and r.num_computed_tokens == 0
            assert r in self.sched.waiting
        self.sched.update_from_output(
            out, {s.request.request_id: self.rng.randrange(4) for s in out.scheduled if s.samples})

    # -- rules ------------------------------------------------------------------------------
    @rule(family=st.integers(0, 2), cut=st.sampled_from([0, 2, 4, 6, 8, 12]),
          tail=st.lists(st.integers(0, 5), max_size=4), admit=st.booleans(),
          max_tokens=st.none() | st.integers(1, 6))
    def arrive(self, family, cut, tail, admit, max_tokens):
        prompt = FAMILIES[family][:cut] + tail or [7]
        self.count += 1
        req = Request(f"r{self.count}", prompt, hasher=self.hasher, block_size=self.mgr.block_size,
                      max_tokens=max_tokens)
        self.sched.add_request(req)
        if admit:
            self.run_step()

    @rule(n=st.integers(1, 4))
    def step(self, n):
        for _ in range(n):
            self.run_step()

    @precondition(lambda self: self.sched.running)
    @rule(data=st.data())
    def decode(self, data):
        ids = [r.request_id for r in self.sched.running]
        chosen = data.draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
        self.run_step(only=set(chosen))        # teaching-only: a chosen subset, no admission

    @precondition(lambda self: self.sched.running or self.sched.waiting)
    @rule(data=st.data())
    def finish(self, data):
        live = self.requests(RequestStatus.RUNNING, RequestStatus.WAITING, RequestStatus.PREEMPTED)
        req = data.draw(st.sampled_from(live))
        self.sched.finish_request(req.request_id)
        assert req.status is RequestStatus.FINISHED and req.request_id not in self.mgr.req_to_blocks

    @precondition(lambda self: self.sched.running)
    @rule(data=st.data())
    def preempt(self, data):
        req = data.draw(st.sampled_from(self.sched.running))
        self.sched.preempt_request(req.request_id)
        assert self.sched.waiting[0] is req and req.num_computed_tokens == 0

    @rule(dice=st.integers(0, 3))
    def reset_prefix_cache(self, dice):
        if dice:  # mostly a no-op: a reset wipes the cache that the other rules exercise
            return
        holds = any(self.mgr.req_to_blocks.values())
        before = snapshot(self.mgr)
        queue = free_ids(self.pool)
        ok = self.mgr.reset_prefix_cache()
        assert ok is (not holds)
        event(f"reset_prefix_cache {ok}")
        if ok:
            assert free_ids(self.pool) == queue
            assert hash_map(self.pool) == [] and all(b.block_hash is None for b in self.pool.blocks)
            assert isinstance(self.pool.kv_event_queue[-1], AllBlocksCleared)
        else:
            assert snapshot(self.mgr) == before

    # -- after every rule -------------------------------------------------------------------
    @invariant()
    def consistent(self):
        if not hasattr(self, "mgr"):
            return
        check_invariants(self.pool, self.mgr)
        running = self.requests(RequestStatus.RUNNING)
        assert running == [r for r in self.sched.requests.values() if r in self.sched.running]
        assert {r.request_id for r in self.sched.waiting} == {
            r.request_id for r in self.requests(RequestStatus.WAITING, RequestStatus.PREEMPTED)}
        bs = self.mgr.block_size
        for r in self.sched.requests.values():
            table = self.mgr.req_to_blocks.get(r.request_id, [])
            if r.status is not RequestStatus.RUNNING:
                assert not table, f"{r.request_id} is {r.status.value} but holds {table}"
                continue
            assert len(table) == cdiv(r.num_computed_tokens, bs)
            assert len({b.block_id for b in table}) == len(table)
            for i in range(self.mgr.num_cached_block.get(r.request_id, 0)):
                assert table[i].block_hash == r.block_hashes[i]
        if any(len(ids) > 1 for _, ids in hash_map(self.pool)):
            event("duplicate hash")
        self.pool.take_events()                      # keep the event queue short


def run(max_examples, steps):
    run_state_machine_as_test(CoreMachine, settings=settings(
        max_examples=max_examples, stateful_step_count=steps, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))


def test_random_operation_sequences():
    run(max_examples=200, steps=40)


@pytest.mark.slow
def test_random_operation_sequences_long():
    run(max_examples=2000, steps=50)
