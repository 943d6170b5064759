"""The external KV tier: vLLM 0.33's ``OffloadingConnector`` with its CPU tier, scheduler side,
after vllm/distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py
(``OffloadingConnectorScheduler``), vllm/v1/kv_offload/cpu/manager.py (``CPUOffloadingManager``)
and its cache policies (cpu/policies/lru.py, arc.py) — on the path one full-attention group with
``blocks_per_chunk`` 1 takes. Keys are vLLM block hashes (the OffloadingConnector's offload keys),
not LMCache's token-chunk hashes.

Scheduler side, with vLLM's names and contracts:
  * ``get_num_new_matched_tokens(request, num_computed_tokens)`` -> ``(tokens, load_async)``:
    whole chunks past the (block-aligned) local hit, walked until the first miss; ``None`` while
    a chunk it needs is still being stored or loaded (the scheduler asks again next step). The
    ``num_tokens - 1`` cap is not applied here: a repeated prompt loads all its blocks and the
    scheduler clamps ``num_computed_tokens`` once the load is reported.
  * ``update_state_after_alloc`` — issues the load job into the request's fresh GPU blocks.
  * ``build_connector_meta`` — inside ``schedule()``: store jobs for full *prompt* blocks whose
    last token is scheduled in this step (decode blocks never), skipping keys the tier has.
  * ``request_finished`` -> ``(False, None)`` (vLLM 0.33.0): blocks are freed at once; a block
    reused while its store is still in flight has that store flushed first.
  * ``update_connector_output`` — jobs the worker reports done: a store makes its chunks
    readable (``BlockStored`` medium CPU), a load unpins them and releases the request.
  * ``take_events`` — ``BlockStored`` / ``BlockRemoved`` with ``medium: "CPU"``.

The worker side (:class:`OffloadingWorker`) reports a load ``load_delay`` steps after it was
issued (0: within the step), a store ``1 + store_delay`` steps after (vLLM submits a store at the
start of the next step), a flushed job in the step it is flushed, a sync load within its step; with
a KV runtime it moves the real K/V between the paged GPU store and a CPU tensor pool
(blockviz.kv.offload).

The modules follow vLLM's files: ``base`` (kv_offload/base.py: ``ReqContext``, ``LookupResult``,
``OffloadingEvent``), ``policies`` (kv_offload/cpu/policies: the chunk status, LRU and ARC),
``manager`` (kv_offload/cpu/manager.py: ``CPUOffloadingManager``), ``common``
(offloading/common.py: ``TransferJob`` and the step's metadata), ``scheduler``
(offloading/scheduler.py: the scheduler side, :class:`OffloadingConnector`) and ``worker``
(offloading/worker.py: :class:`OffloadingWorker`).
"""
