"""The worker side of vLLM 0.33's OffloadingConnector, after offloading/worker.py
(``OffloadingConnectorWorker``), simulated in time."""
from __future__ import annotations

from blockviz.sim.offload.common import ConnectorMeta


class OffloadingWorker:
    """The worker side, simulated in time: job completions are reported after the configured
    delays (as vLLM's OffloadingConnectorWorker reports them); with a KV runtime the K/V moves
    between the paged GPU store and a CPU tensor pool when a job is issued."""

    def __init__(self, num_chunks: int, load_delay: int, store_delay: int, kv=None) -> None:
        self.load_delay = load_delay
        self.store_delay = store_delay
        self.pool = None
        if kv is not None:
            from blockviz.kv.offload import CPUKVPool
            self.pool = CPUKVPool(num_chunks, kv.store)
        self.step = 0
        # (due step, job id, request id of an async load or None, kind)
        self.inflight: list[tuple[int, int, str | None, str]] = []

    def start_load_kv(self, meta: ConnectorMeta) -> None:
        """Before the forward pass: loads write their GPU blocks; stores of finished requests
        read theirs (a flushed job's blocks are about to be reused)."""
        if self.pool is None:
            return
        for job in meta.load_jobs.values():
            self.pool.load_blocks(job.cpu_chunk_ids, job.gpu_block_ids)

    def save_kv(self, meta: ConnectorMeta, before_forward: bool, finished) -> None:
        if self.pool is None:
            return
        for job in meta.store_jobs.values():
            if (job.req_id in finished) == before_forward:
                self.pool.store_blocks(job.gpu_block_ids, job.cpu_chunk_ids)

    def get_finished(self, meta: ConnectorMeta) -> dict:
        """This step's report (vLLM KVConnectorOutput): completed job ids and the requests whose
        async load is done."""
        self.step += 1
        n = self.step
        flush = meta.jobs_to_flush
        for jid, job in meta.load_jobs.items():
            due = n if job.sync else n + self.load_delay
            self.inflight.append((due, jid, None if job.sync else job.req_id, "load"))
        for jid in meta.store_jobs:
            due = n if jid in flush else n + 1 + self.store_delay
            self.inflight.append((due, jid, None, "store"))
        self.inflight = [(n if jid in flush else due, jid, rid, kind)
                         for due, jid, rid, kind in self.inflight]
        done = sorted((x for x in self.inflight if x[0] <= n), key=lambda x: x[1])
        self.inflight = [x for x in self.inflight if x[0] > n]
        return {"completed_jobs": [jid for _, jid, _, _ in done],
                "finished_recving": [rid for _, _, rid, _ in done if rid is not None]}
