"""Differential runner: blockviz's external tier against vLLM 0.33.0's real Scheduler with its real
scheduler-side OffloadingConnector and CPU offloading manager (shared/tools/vllm-diff/conn).

A scenario is written in the tool's format (``config: {block_size, num_blocks, cpu_chunks,
load_delay, store_delay, eviction_policy, sync_load_budget_tokens, max_num_batched_tokens,
max_num_seqs}``, steps ``arrive`` / ``step`` / ``run_until_idle`` / ``finish`` /
``reset_prefix_cache``), translated to a blockviz scenario (``connector: {num_blocks: cpu_chunks,
load_delay, store_delay, eviction_policy, sync_load_budget_tokens}``, explicit prompt tokens), and
run on both. Every engine step is then compared: the connector's lookups ``(tokens, load_async)``,
``update_state_after_alloc``, load and store jobs (keys, GPU blocks, CPU chunks), jobs flushed,
jobs the worker reports done, the tier's KV events (medium CPU), the requests in
WAITING_FOR_REMOTE_KVS and every request's status and computed tokens, the GPU's and the
connector's prefix-cache stats with hits by source, the tier's contents in eviction order (LRU;
T1/T2/B1/B2 for ARC) with the pinned chunks, and the GPU free queue and block tables.

The oracle runs in its own Python (``$SCHED_ORACLE_HOME`` or ``~/.cache/blockviz-sched-oracle``,
made by ``shared/tools/vllm-diff/sched/setup.sh``); :func:`find_oracle` says why when it cannot.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

from blockviz.scenario import load_text
from blockviz.sim.engine import Engine, EngineError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VLLM_STATUS = {"WAITING": "waiting", "WAITING_FOR_REMOTE_KVS": "waiting_for_remote_kvs",
               "RUNNING": "running", "PREEMPTED": "preempted"}
STAT_KEYS = ("requests", "queries", "hits", "preempted_requests", "preempted_queries",
             "preempted_hits")


# -- finding the oracle ---------------------------------------------------------------------------
def find_oracle() -> tuple[str, str, str] | str:
    """(oracle python, vLLM source root, conn tool dir), or why they cannot be had."""
    tool = Path(os.environ.get("BLOCKVIZ_VLLM_DIFF", ROOT.parent / "shared" / "tools" / "vllm-diff"))
    conn = tool / "conn" / "conn_oracle.py"
    if not conn.is_file():
        return f"no vLLM connector oracle at {conn} (set BLOCKVIZ_VLLM_DIFF)"
    home = Path(os.environ.get("SCHED_ORACLE_HOME") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "blockviz-sched-oracle")
    py = home / "venv" / "bin" / "python"
    src = Path(os.environ.get("VLLM_FULL_SRC") or home / "src" / "0.33.0")
    if not py.is_file():
        return (f"no oracle venv at {py}: run `bash {tool}/sched/setup.sh` (downloads vLLM "
                f"0.33.0's wheel from PyPI)")
    if not (src / "vllm" / "distributed" / "kv_transfer" / "kv_connector" / "v1" / "offloading"
            / "scheduler.py").is_file():
        return f"no vLLM 0.33.0 source with the OffloadingConnector under {src}"
    return str(py), str(src), str(conn.parent)


def run_oracle(scenario: dict, oracle: tuple[str, str, str]) -> dict:
    py, src, conn = oracle
    env = {**os.environ, "VLLM_FULL_SRC": src, "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1"}
    p = subprocess.run([py, str(HERE / "oracle_driver.py"), conn], input=json.dumps(scenario),
                       capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"the oracle failed on {scenario.get('id')}:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout)


# -- the scenario in both formats -----------------------------------------------------------------
def oracle_prompt(prompt, rid: str, seen: dict[str, list[int]]) -> list[int]:
    """The tokens conn_oracle.py makes of a prompt."""
    if isinstance(prompt, dict) and "random" in prompt:
        rng = random.Random(prompt.get("seed", rid))
        return [rng.randint(1000, 30000) for _ in range(prompt["random"])]
    if isinstance(prompt, dict) and "same_as" in prompt:
        return list(seen[prompt["same_as"]][:prompt["first"]]) + list(prompt.get("then", []))
    return list(prompt)


def to_blockviz(scen: dict) -> str:
    """The blockviz scenario (YAML text; JSON is YAML) of a scenario in the oracle's format."""
    c = scen.get("config") or {}
    conn = {"num_blocks": c.get("cpu_chunks", 4), "load_delay": c.get("load_delay", 1),
            "store_delay": c.get("store_delay", 0),
            "eviction_policy": c.get("eviction_policy", "lru"),
            "sync_load_budget_tokens": c.get("sync_load_budget_tokens", 0)}
    sched = {k: c[k] for k in ("max_num_batched_tokens", "max_num_seqs", "max_model_len",
                               "enable_chunked_prefill") if k in c}
    cfg = {"block_size": c.get("block_size", 4), "num_blocks": c.get("num_blocks", 6),
           "hash_algo": "sha256", "model": None, "connector": conn}
    if sched:
        cfg["scheduler"] = sched
    steps, seen = [], {}
    for ev in scen["steps"]:
        ev = {k: v for k, v in ev.items() if k != "note"}
        if "arrive" in ev:
            a = ev["arrive"]
            toks = oracle_prompt(a["prompt"], a["id"], seen)
            seen[a["id"]] = toks
            steps.append({"arrive": {"id": a["id"], "prompt": toks,
                                     "max_tokens": a.get("max_tokens", 1),
                                     "admit": a.get("admit", True)}})
        elif "step" in ev:
            steps.append({"step": ev["step"] or 1})
        elif "run_until_idle" in ev:
            steps.append({"step": ev["run_until_idle"] or 100})
        elif "finish" in ev:
            steps.append({"finish": ev["finish"]})
        elif "reset_prefix_cache" in ev:
            if (ev["reset_prefix_cache"] or {}).get("reset_connector"):
                raise ValueError("reset_connector is not modelled")
            steps.append({"reset_prefix_cache": True})
        else:
            raise ValueError(f"unknown event {ev}")
    return json.dumps({"id": scen.get("id", "conn"), "title": scen.get("id", "conn"),
                       "config": cfg, "steps": steps})


# -- one engine step, projected the same way on both sides ------------------------------------------
def _k8(label: str) -> str:
    return label.split(":", 1)[1][:8]


def _events(events: list[tuple[str, list[str]]]) -> list:
    """CPU events: a BlockRemoved keeps its order; a run of BlockStored (vLLM walks a set of keys
    to make them) is one sorted entry."""
    out: list = []
    for kind, keys in events:
        if kind == "BlockStored" and out and out[-1][0] == "BlockStored":
            out[-1] = ("BlockStored", sorted(out[-1][1] + keys))
        else:
            out.append((kind, sorted(keys) if kind == "BlockStored" else list(keys)))
    return out


def project_oracle(rec: dict, prev: dict) -> dict:
    t = rec["tier"]
    if "eviction_order(first_evicted_first)" in t:
        tier = {"evict_order": [_k8(k) for k in t["eviction_order(first_evicted_first)"]],
                "pinned": sorted((_k8(p["key"]), p["ref_cnt"]) for p in t["pinned_or_pending"])}
    else:
        tier = {n: [_k8(k) for k in t.get(n) or ()] for n in ("t1", "t2", "b1", "b2")}
        tier["target_t1_size"] = t.get("target_t1_size")
    gstats = rec.get("gpu_prefix_cache_stats") or dict.fromkeys(STAT_KEYS, 0)
    cstats = dict(rec.get("connector_prefix_cache_stats") or dict.fromkeys(STAT_KEYS, 0))
    cstats.setdefault("hits_by_source", {})
    return {
        "lookups": [(x["req"], x["local_hit_tokens(block_aligned)"], x["ext_tokens"],
                     x["load_async"]) for x in rec.get("lookups", ())],
        "after_alloc": [(x["req"], x["num_external_tokens"], x["gpu_blocks"])
                        for x in rec.get("update_state_after_alloc", ())],
        "load_jobs": [(j["job"], j["req"], j["sync"], [_k8(k) for k in j["keys"]],
                       j["cpu_chunks"], j["dst_gpu_blocks"]) for j in rec["load_jobs"]],
        "store_jobs": [(j["job"], j["req"], [_k8(k) for k in j["keys"]], j["src_gpu_blocks"],
                        j["cpu_chunks"]) for j in rec["store_jobs"]],
        "jobs_to_flush": sorted(rec["jobs_to_flush"]),
        "done": [(d["job"], d["kind"], d["finished_recving"]) for d in rec["worker_reports_done"]],
        "cpu_events": _events([(e["type"], [_k8(h) for h in e["hashes"]])
                               for e in rec["kv_events"] if e.get("medium") == "CPU"]),
        "waiting_for_remote_kvs": rec["waiting_for_remote_kvs"],
        "requests": {rid: _status(s) for rid, s in rec["requests"].items()},
        "gpu_stats": {k: gstats[k] for k in STAT_KEYS},
        "conn_stats": {**{k: cstats[k] for k in STAT_KEYS},
                       "hits_by_source": cstats["hits_by_source"]},
        "tier": tier,
        "gpu_free_queue": rec["gpu"]["free_queue"],
        "gpu_tables": {r: b for r, b in rec["gpu"]["tables"].items() if b},
    }


def _status(s: str) -> str:
    status, counts = s.split(" ")
    return f"{'finished' if status.startswith('FINISHED') else VLLM_STATUS[status]} {counts}"


class _Recorder:
    """Wraps a live engine's connector and records every engine step like the oracle does."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.steps: list[dict] = []
        self.calls: dict[str, list] = {"lookups": [], "after_alloc": []}
        self.prev = {"gpu": dict.fromkeys(STAT_KEYS, 0), "conn": dict.fromkeys(STAT_KEYS, 0),
                     "host": 0}
        c = engine.connector
        orig_lookup, orig_alloc, orig_log = (c.get_num_new_matched_tokens,
                                             c.update_state_after_alloc, c.log_step)

        def lookup(request, n):
            r = orig_lookup(request, n)
            self.calls["lookups"].append((request.request_id, n, r[0], r[1]))
            return r

        def alloc(request, block_ids, n):
            self.calls["after_alloc"].append((request.request_id, n, list(block_ids)))
            return orig_alloc(request, block_ids, n)

        def log(meta, output):
            orig_log(meta, output)
            self.steps.append(self._record(c.step_log[-1]))

        c.get_num_new_matched_tokens, c.update_state_after_alloc, c.log_step = lookup, alloc, log

    def _record(self, step) -> dict:
        e = self.engine
        c, sched = e.connector, e.scheduler
        jobs = c.all_jobs
        h8 = {}
        for rs in sched.requests.values():
            for h in rs.block_hashes:
                h8[h] = h.hex()[:8]
        pol = c.manager.policy
        if pol.name == "lru":
            tier = {"evict_order": [h8[k] for k in pol.eviction_order()],
                    "pinned": sorted((h8[k], ch.ref_cnt) for k, ch in pol.chunks.items()
                                     if k not in pol.evictable)}
        else:
            tier = {n: [h8[k] for k in getattr(pol, n)] for n in ("t1", "t2", "b1", "b2")}
            tier["target_t1_size"] = pol.target_t1_size
        g, cs = e.manager.prefix_cache_stats, sched.connector_prefix_cache_stats
        gnow = {k: getattr(g, k) for k in STAT_KEYS}
        cnow = {k: getattr(cs, k) for k in STAT_KEYS}
        host = cs.hits_by_source.get("host", 0)
        rec = {
            "lookups": self.calls["lookups"], "after_alloc": self.calls["after_alloc"],
            "load_jobs": [(j.job_id, j.req_id, j.sync, [h8[k] for k in j.keys],
                           list(j.cpu_chunk_ids), list(j.gpu_block_ids)) for j in step.load_jobs],
            "store_jobs": [(j.job_id, j.req_id, [h8[k] for k in j.keys], list(j.gpu_block_ids),
                            list(j.cpu_chunk_ids)) for j in step.store_jobs],
            "jobs_to_flush": sorted(step.jobs_to_flush),
            # a done load names its request when it was asynchronous (finished_recving)
            "done": [(jid, "store" if jobs[jid].is_store else "load",
                      None if jobs[jid].is_store or jobs[jid].sync else jobs[jid].req_id)
                     for jid in step.completed_jobs],
            "cpu_events": _events([(type(ev.event).__name__, [h8[h] for h in ev.hashes])
                                   for ev in step.events]),
            "waiting_for_remote_kvs": [r.request_id for r in sched.requests.values()
                                       if r.status.value == "waiting_for_remote_kvs"],
            "requests": {rid: f"{r.status.value} {r.num_computed_tokens}/{r.num_tokens}"
                         for rid, r in sched.requests.items()},
            "gpu_stats": {k: gnow[k] - self.prev["gpu"][k] for k in STAT_KEYS},
            "conn_stats": {**{k: cnow[k] - self.prev["conn"][k] for k in STAT_KEYS},
                           "hits_by_source": ({"host": host - self.prev["host"]}
                                              if host - self.prev["host"] else {})},
            "tier": tier,
            "gpu_free_queue": [b.block_id for b in e.pool.free_block_queue],
            "gpu_tables": {r: [b.block_id for b in bl]
                           for r, bl in e.manager.req_to_blocks.items() if bl},
        }
        self.prev = {"gpu": gnow, "conn": cnow, "host": host}
        self.calls = {"lookups": [], "after_alloc": []}
        return rec


def run_blockviz(scen: dict) -> list[list[dict]]:
    """Per scenario event, per engine step, the records of blockviz's run."""
    scenario = load_text(to_blockviz(scen)).scenario
    engine = Engine(scenario, record_ops=False, payloads=False)
    engine.connector.all_jobs = {}
    orig_build = engine.connector.build_connector_meta

    def build(out):
        meta = orig_build(out)
        for j in (*meta.load_jobs.values(), *meta.store_jobs.values()):
            engine.connector.all_jobs[j.job_id] = j
        return meta

    engine.connector.build_connector_meta = build
    rec = _Recorder(engine)
    events = []
    for step in scenario.steps:
        start = len(rec.steps)
        try:
            engine.apply(step)
        except EngineError:
            # vLLM's finish_requests ignores a request that has finished already; ours says so
            if step.kind != "finish":
                raise
        events.append(rec.steps[start:])
    return events


def compare(scen: dict, oracle: tuple[str, str, str]) -> list[str]:
    """Differences between blockviz and vLLM on ``scen``, first ones first (empty: identical)."""
    theirs = run_oracle(scen, oracle)
    ours = run_blockviz(scen)
    diffs = []
    for i, (t, o) in enumerate(zip(theirs["timeline"], ours, strict=True), 1):
        ts = t["engine_steps"]
        if len(ts) != len(o):
            diffs.append(f"event {i} {t['event']}: {len(o)} engine steps, vLLM {len(ts)}")
            break
        prev: dict = {}
        for k, (a, b) in enumerate(zip(ts, o, strict=True), 1):
            pa = project_oracle(a, prev)
            for field in pa:
                if pa[field] != b[field]:
                    diffs.append(f"event {i} {t['event']}, engine step {k}: {field}: "
                                 f"blockviz {b[field]} != vLLM {pa[field]}")
            if diffs:
                return diffs
    return diffs


# -- random scenarios -----------------------------------------------------------------------------
def random_scenario(seed: int, *, sync: bool = False, policy: str = "lru") -> dict:
    """A scenario in the oracle's format: prompts drawn from a few shared prefixes (so that
    local and external hits happen), a small GPU pool and tier, random delays."""
    rng = random.Random(seed)
    bs = rng.choice((2, 4))
    cfg = {"block_size": bs, "num_blocks": rng.randint(4, 12), "cpu_chunks": rng.randint(2, 12),
           "load_delay": rng.randint(0, 3), "store_delay": rng.randint(0, 2),
           "eviction_policy": policy}
    if sync:
        cfg["sync_load_budget_tokens"] = rng.choice((bs, 2 * bs, 4 * bs, 64))
    if rng.random() < 0.4:
        cfg["max_num_batched_tokens"] = rng.choice((4, 6, 8, 16))
        cfg["max_num_seqs"] = rng.choice((2, 3, 4))
    prefixes = [[rng.randint(1, 500) for _ in range(rng.randint(bs, 5 * bs))] for _ in range(3)]
    steps: list[dict] = []
    live: list[str] = []
    budget = cfg["num_blocks"] * bs   # prompts that fit the pool (a full sequence must fit)
    for i in range(rng.randint(6, 14)):
        r = rng.random()
        if r < 0.55 or not live:
            rid = f"R{i}"
            p = list(rng.choice(prefixes))
            p = p[:rng.randint(1, len(p))] + [rng.randint(501, 999)
                                               for _ in range(rng.randint(0, 2 * bs))]
            p = p[:max(1, budget - 8)]
            steps.append({"arrive": {"id": rid, "prompt": p, "max_tokens": rng.randint(1, 5),
                                     "admit": rng.random() < 0.7}})
            live.append(rid)
        elif r < 0.8:
            steps.append({"step": rng.randint(1, 4)})
        elif r < 0.9:
            steps.append({"finish": live.pop(rng.randrange(len(live)))})
        else:
            steps.append({"reset_prefix_cache": {}})
    steps.append({"run_until_idle": 40})
    return {"id": f"random-{policy}{'-sync' if sync else ''}-{seed}", "config": cfg, "steps": steps}


def from_blockviz(text: str) -> dict:
    """A blockviz scenario with a connector (YAML text) in the oracle's format: prompts as the
    token ids blockviz resolved them to; ``step: N`` as N engine steps; the other events as
    they are. Events with no vLLM equivalent (restart, checkpoints, teaching-only forms) raise."""
    loaded = load_text(text)
    sc = loaded.scenario
    cfg, c = sc.config, sc.config.connector
    if c is None or cfg.hash_algo != "sha256" or cfg.hash_seed is not None:
        raise ValueError("the oracle runs a connector with sha256 and no seed")
    engine = Engine(sc, record_ops=False, payloads=False)
    out = {"block_size": cfg.block_size, "num_blocks": cfg.num_blocks,
           "cpu_chunks": c.num_blocks, "load_delay": c.load_delay, "store_delay": c.store_delay,
           "eviction_policy": c.eviction_policy,
           "sync_load_budget_tokens": c.sync_load_budget_tokens,
           "max_num_batched_tokens": cfg.scheduler.max_num_batched_tokens,
           "max_num_seqs": cfg.scheduler.max_num_seqs,
           "max_model_len": cfg.scheduler.max_model_len,
           "enable_chunked_prefill": cfg.scheduler.enable_chunked_prefill}
    steps = []
    for step in sc.steps:
        kind, args = step.kind, step.args
        if kind == "arrive":
            engine.apply(step)
            r = engine.scheduler.requests[args.id]
            if args.max_tokens is None:
                raise ValueError("give max_tokens (vLLM's default depends on max_model_len)")
            steps.append({"arrive": {"id": args.id, "prompt": list(r.prompt_token_ids),
                                     "max_tokens": args.max_tokens, "admit": args.admit}})
            continue
        if kind == "step":
            steps.append({"step": args})
        elif kind == "finish":
            steps.append({"finish": list(args)})
        elif kind == "reset_prefix_cache":
            steps.append({"reset_prefix_cache": {}})
        else:
            raise ValueError(f"{kind} has no equivalent in the oracle")
        engine.apply(step)
    return {"id": sc.id, "config": out, "steps": steps}
