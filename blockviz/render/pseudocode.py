"""Short, faithful pseudocode of the vLLM 0.33 functions the ops come from, and which line each op
executes (the "step into" view highlights it).

The pseudocode keeps vLLM's names (``free_block_queue.popleft_n``, ``cached_block_hash_to_block``)
so a learner can open vllm/v1/core/block_pool.py next to it. ``free_blocks`` has two variants: the
split order of vLLM >= 0.24 and the classic append-only order of vLLM <= 0.23.
"""
from __future__ import annotations

from blockviz.i18n import t
from blockviz.render.theme import esc

PSEUDOCODE: dict[str, tuple[str, ...]] = {
    "add_request": (
        "def add_request(request):                  # Scheduler",
        "    # request.block_hashes: computed in Request.__init__ (block hasher)",
        "    waiting.append(request)",
    ),
    "get_computed_blocks": (
        "def get_computed_blocks(request):          # KVCacheManager",
        "    max_hit = request.num_tokens - 1       # last token: compute",
        "    hits = []",
        "    for h in request.block_hashes[:max_hit // block_size]:",
        "        block = cached_block_hash_to_block.get(h)",
        "        if block is None: break            # first miss: stop",
        "        hits.append(block)",
        "    return hits, len(hits) * block_size",
    ),
    "allocate_slots": (
        "def allocate_slots(request, num_new_tokens, hits):  # KVCacheManager",
        "    need = num_new_blocks + hits_now_in_free_queue",
        "    if need > block_pool.get_num_free_blocks():",
        "        return None                        # nothing changes",
        "    block_pool.touch(hits)                 # share: ref_cnt += 1",
        "    new_blocks = block_pool.get_new_blocks(num_new_blocks)",
        "    req_blocks += hits + new_blocks",
        "    block_pool.cache_full_blocks(request, req_blocks, ...)",
        "    return new_blocks                      # before the forward pass",
    ),
    "get_new_blocks": (
        "def get_new_blocks(n):                     # BlockPool",
        "    blocks = free_block_queue.popleft_n(n) # from the head",
        "    for block in blocks:",
        "        if block.block_hash is not None:   # lazy eviction:",
        "            _maybe_evict_cached_block(block)   # hash leaves now",
        "        block.ref_cnt = 1",
        "    return blocks",
    ),
    "touch": (
        "def touch(blocks):                         # BlockPool: a hit",
        "    for block in blocks:",
        "        if block.is_null: continue",
        "        if block.ref_cnt == 0:",
        "            free_block_queue.remove(block) # free but cached: O(1)",
        "        block.ref_cnt += 1                 # shared, not copied",
    ),
    "cache_full_blocks": (
        "def cache_full_blocks(request, blocks, num_cached, num_full):",
        "    for i in range(num_cached, num_full):",
        "        block = blocks[i]",
        "        if block.is_null: continue",
        "        block.block_hash = request.block_hashes[i]",
        "        cached_block_hash_to_block.insert(block.block_hash, block)",
        "    kv_events.append(BlockStored(...))     # no de-duplication",
    ),
    "free_blocks_split": (
        "def free_blocks(ordered_blocks):           # vLLM >= 0.24",
        "    for block in ordered_blocks:           # a table, reversed",
        "        if block.is_null: continue",
        "        block.ref_cnt -= 1",
        "    freed = [b for b in ordered_blocks if b.ref_cnt == 0]",
        "    to_head = [b for b in freed if b.block_hash is None]",
        "    to_tail = [b for b in freed if b.block_hash is not None]",
        "    free_block_queue.prepend_n(to_head)    # no hash: reused first",
        "    free_block_queue.append_n(to_tail)     # cached: evicted last",
    ),
    "free_blocks_append": (
        "def free_blocks(ordered_blocks):           # vLLM <= 0.23",
        "    for block in ordered_blocks:           # a table, reversed",
        "        block.ref_cnt -= 1",
        "    freed = [b for b in ordered_blocks if b.ref_cnt == 0 and not b.is_null]",
        "    free_block_queue.append_n(freed)       # all to the tail",
    ),
    "reset_prefix_cache": (
        "def reset_prefix_cache():                  # BlockPool",
        "    if num_gpu_blocks - get_num_free_blocks() != 1:   # blocks held",
        "        return False                       # nothing changes",
        "    cached_block_hash_to_block = {}",
        "    for block in blocks: block.reset_hash()   # queue order kept",
        "    kv_events.append(AllBlocksCleared())",
        "    return True",
    ),
    "schedule": (
        "def schedule():                            # Scheduler: one step",
        "    for request in running:                # first, while the budget lasts",
        "        n = min(new_tokens(request), token_budget)   # a decode, or a chunk",
        "        while allocate_slots(request, n) is None:",
        "            victim = running[-1]           # FCFS; priority: the lowest",
        "            _preempt_request(victim)",
        "            if victim is request: break",
        "        token_budget -= n",
        "    if not preempted:",
        "        while waiting and token_budget > 0:   # in queue order",
        "            request = waiting[0]",
        "            hits, n = get_computed_blocks(request)",
        "            n_ext = connector.get_num_new_matched_tokens(request, n)",
        "            if allocate_slots(request, ...) is None: break",
        "            running.append(waiting.pop(0))",
    ),
    "_preempt_request": (
        "def _preempt_request(request):             # Scheduler",
        "    kv_cache_manager.free(request)         # free_blocks(reversed)",
        "    request.status = PREEMPTED",
        "    request.num_computed_tokens = 0        # recompute from scratch",
        "    waiting.prepend_request(request)       # FCFS: front of the line",
    ),
    "execute_model": (
        "def execute_model(scheduled):              # GPUModelRunner",
        "    for slot, token in zip(slot_mapping, tokens):",
        "        kv_cache[layer][:, slot] = k(token), v(token)",
        "    logits = attention(q, kv_cache[block_table])",
        "    return sample(logits)",
    ),
    "update_from_output": (
        "def update_from_output(output):            # Scheduler",
        "    for request, token in output:",
        "        request.append_output_token_ids(token)  # full block: hash",
        "        if request.is_finished():",
        "            finish_requests(request)",
    ),
    "finish_requests": (
        "def finish_requests(request, status):      # Scheduler",
        "    request.status = status                # FINISHED_STOPPED, _ABORTED...",
        "    connector.request_finished(request, block_ids)   # (False, None): free now",
        "    kv_cache_manager.free(request)         # free_blocks(reversed)",
    ),
    "connector": (
        "class OffloadingConnectorScheduler:        # vLLM 0.33, CPU tier",
        "    def get_num_new_matched_tokens(req, n): ...  # (tokens|None, load_async)",
        "    def update_state_after_alloc(req, blocks, n): ...  # load job",
        "    def build_connector_meta(output): ...  # store full prompt blocks",
        "class CPUOffloadingManager:                # kv_offload/cpu/manager.py",
        "    def prepare_store(keys): ...           # full: evict (BlockRemoved CPU)",
    ),
    "verify": (
        "def verify_hit(request, hit_tokens):       # blockviz's check",
        "    out_hit = attention(q, cached K/V + new K/V)",
        "    out_full = attention(q, K/V recomputed for every token)",
        "    assert max_abs(out_hit - out_full) <= tolerance(device)",
    ),
    "engine": (
        "# blockviz engine events",
        "rewind(name):  restore everything saved at checkpoint(name)",
        "restart():     a new process: empty GPU cache, new NONE_HASH",
    ),
}


def free_blocks_fn(free_order: str) -> str:
    return "free_blocks_append" if free_order == "append" else "free_blocks_split"


def op_line(op, free_order: str = "split") -> tuple[str, int]:
    """(pseudocode function, 0-based line) that ``op`` executes."""
    k = op.kind
    free_fn = free_blocks_fn(free_order)
    if k == "arrive":
        return "add_request", 2
    if k == "lookup":
        return "get_computed_blocks", 6 if op.block_ids else 5
    if k == "alloc_failed":
        return "allocate_slots", 3
    if k == "touch":
        return "touch", 4 if op.removed_from_queue else 5
    if k == "popleft":
        return "get_new_blocks", 1
    if k == "evict":
        return "get_new_blocks", 4
    if k == "cache":
        return "cache_full_blocks", 5
    if k == "free":
        return free_fn, 3 if free_fn == "free_blocks_split" else 2
    if k == "free_head":
        return free_fn, 7
    if k == "free_tail":
        return free_fn, 8 if free_fn == "free_blocks_split" else 4
    if k == "reset":
        return "reset_prefix_cache", 3 if op.ok else 2
    if k == "admit":
        return "schedule", 14
    if k == "schedule":
        return "schedule", 3
    if k == "preempt":
        return "_preempt_request", 4
    if k == "write":
        return "execute_model", 2
    if k == "sample":
        return "update_from_output", 2
    if k == "finish":
        return "finish_requests", 1
    if k == "load":
        return "connector", 2
    if k == "save":
        return "connector", 3
    if k == "drop":
        return "connector", 5
    if k == "verify":
        return "verify", 3
    if k == "rewind":
        return "engine", 1
    if k == "restart":
        return "engine", 2
    return "engine", 0


def pseudocode_html(op, *, lang: str = "en", free_order: str = "split",
                    description: str = "", vllm_function: str = "") -> str:
    fn, line = op_line(op, free_order)
    lines = PSEUDOCODE[fn]
    code = "".join(
        f'<div class="bv-cur" data-line="{j}" aria-current="true">{esc(text)}</div>' if j == line
        else f'<div data-line="{j}">{esc(text)}</div>' for j, text in enumerate(lines))
    caption = f'<div class="bv-fn">{esc(vllm_function)}</div>' if vllm_function else ""
    desc = f'<div class="bv-op">{esc(description)}</div>' if description else ""
    return (f'<div class="bv bv-panel" data-fn="{esc(fn)}" data-line="{line}">{desc}{caption}'
            f'<div class="bv-code">{code}</div></div>')


def ops_list_html(ops, current: int, lang: str = "en") -> str:
    """The ops of one event as small chips, the current one highlighted."""
    items = "".join(f'<li class="bv-cur">{j + 1}. {esc(op.kind)}</li>' if j == current
                    else f'<li>{j + 1}. {esc(op.kind)}</li>' for j, op in enumerate(ops))
    return (f'<div class="bv"><div class="bv-small">{esc(t("ops_in_step", lang, n=len(ops)))}</div>'
            f'<ul class="bv-ops">{items}</ul></div>')
