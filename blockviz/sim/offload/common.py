"""What the scheduler side hands the worker, after vLLM's offloading/common.py: transfer jobs and
one step's metadata."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TransferJob:
    """One load or store job: vLLM ``TransferJob`` with its ``TransferJobStatus``."""
    job_id: int
    req_id: str
    is_store: bool
    keys: list[bytes]               # head to tail
    gpu_block_ids: list[int]        # store: source; load: destination
    cpu_chunk_ids: list[int]
    sync: bool = False
    fence_block_ids: list[int] = field(default_factory=list)   # deferred fence (stores)

    def to_dict(self) -> dict:
        return {"job": self.job_id, "kind": "store" if self.is_store else "load",
                "request": self.req_id, "sync": self.sync,
                "hashes": [k.hex() for k in self.keys], "gpu_blocks": list(self.gpu_block_ids),
                "cpu_chunks": list(self.cpu_chunk_ids)}


@dataclass
class ConnectorMeta:
    """vLLM ``OffloadingConnectorMetadata``: this step's jobs for the worker."""
    load_jobs: dict[int, TransferJob] = field(default_factory=dict)
    store_jobs: dict[int, TransferJob] = field(default_factory=dict)
    jobs_to_flush: set[int] = field(default_factory=set)
