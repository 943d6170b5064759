"""Run by the vLLM oracle's own Python (not the project's): drives vLLM 0.33.0's real Scheduler
with its real OffloadingConnector through ``conn_oracle.py`` (shared/tools/vllm-diff/conn) and
prints its JSON. One addition to the tool: a scenario's ``sync_load_budget_tokens`` becomes
vLLM's ``sync_load_budget_bytes`` (tokens x the KV bytes of a token in the oracle's layout), so
that synchronous loads can be compared too; and the requests finished since the last step reach
the connector in the order they finished (see init_in_finish_order).

usage: PYTHONHASHSEED=0 oracle_driver.py CONN_DIR < scenario.json > result.json
(vLLM loads once per process: one scenario per run; the hash seed fixes only the order vLLM
walks a set of keys in)
"""
import json
import sys

conn_dir = sys.argv[1]
sys.path.insert(0, conn_dir)
import conn_oracle  # noqa: E402

_make = conn_oracle.make_conn_vllm_config


def make_with_sync_budget(c):
    vc = _make(c)
    # FullAttentionSpec(num_kv_heads=1, head_size=8, float16): K and V, 2 bytes each
    kv_bytes_per_token = 2 * 1 * 8 * 2
    vc.kv_transfer_config.kv_connector_extra_config["sync_load_budget_bytes"] = (
        int(c.get("sync_load_budget_tokens", 0)) * kv_bytes_per_token)
    return vc


conn_oracle.make_conn_vllm_config = make_with_sync_budget
_init = conn_oracle.ConnOracle.__init__


def init_in_finish_order(self, *args, **kwargs):
    """vLLM hands the connector the requests finished since the last step as a set, which it walks
    in an arbitrary order (it decides which of them the LRU ranks first). blockviz takes them in
    the order they finished; so that the two can be compared, the oracle is given that order too:
    the same set of requests, listed as the scheduler freed them."""
    _init(self, *args, **kwargs)
    freed = []
    free_request = self.sched._free_request
    build = self.conn.build_connector_meta

    def free_in_order(request, *a, **k):
        freed.append(request.request_id)
        return free_request(request, *a, **k)

    def build_in_order(scheduler_output):
        ids = scheduler_output.finished_req_ids
        if ids:
            ordered = [r for r in dict.fromkeys(freed) if r in ids]
            assert set(ordered) == set(ids), (ordered, ids)
            scheduler_output.finished_req_ids = ordered
        freed.clear()
        return build(scheduler_output)

    self.sched._free_request = free_in_order
    self.conn.build_connector_meta = build_in_order


conn_oracle.ConnOracle.__init__ = init_in_finish_order
json.dump(conn_oracle.run(json.load(sys.stdin)), sys.stdout, default=str)
