"""vLLM 0.33's *real* ``Scheduler`` driven by a blockviz scenario's events, one snapshot per
event, beside blockviz's own run — the project's differential harness for what the shared
``run-sched`` tool has no form for (the priority policy, the admission watermark, prompt logprobs,
``reset_prefix_cache(reset_running_requests)``, ``abort``) and for what blockviz adds on top of
vLLM's state (the prompt split's hit, vLLM's metrics).

vLLM's files are loaded by ``bench.vllm_sched`` (its real scheduler stack, ``vllm.v1.engine`` and
``vllm.v1.metrics.stats`` included) from ``$BLOCKVIZ_VLLM_FULL_SRC``; without it the tests skip.
An event maps to vLLM's calls as an engine makes them:

  arrive                  Request(..., arrival_time = arrival index, priority, cache_salt) and
                          add_request; then one engine step unless ``admit: false``
  step N / admit / decode N engine steps: schedule(), a ModelRunnerOutput with the token blockviz
                          sampled at that position for each request whose prefill completes,
                          update_from_output() (only while has_requests(), as EngineCore.step)
  finish / abort          finish_requests(id, FINISHED_STOPPED / FINISHED_ABORTED)
  reset_prefix_cache      reset_prefix_cache(reset_running_requests, reset_connector)

``SamplingParams`` is a stand-in there, so its ``__post_init__`` rule is applied here:
``skip_reading_prefix_cache`` unset means ``prompt_logprobs is not None``
(sampling_params.py:625-632).
"""
from __future__ import annotations

import copy
import importlib
import itertools
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from bench import vllm_sched

SRC_ENV = vllm_sched.ENV_VAR     # BLOCKVIZ_VLLM_FULL_SRC


def loaded_or_skip():
    """The context manager of vLLM's modules, or a skip saying why they are not at hand."""
    if not (vllm_sched.source_dir() / "vllm/v1/core/sched/scheduler.py").is_file():
        pytest.skip(f"vLLM 0.33.0's full source not found (set {SRC_ENV} to a folder holding vllm/)")
    return vllm_sched.loaded()


class Capture:
    """The KV-event publisher: keeps what update_from_output publishes."""

    def __init__(self) -> None:
        self.events: list = []

    def publish(self, batch) -> None:
        self.events.extend(batch.events)

    def shutdown(self) -> None:
        pass


class VllmRun:
    """vLLM's Scheduler through a scenario's events; ``tokens[rid]`` is every token of each request
    as blockviz's run made it (prompt, then outputs), so that vLLM samples the same ones."""

    def __init__(self, v, scenario, tokens: dict[str, list[int]]) -> None:
        self.v = v
        cfg = scenario.config
        sc = cfg.scheduler
        self.bs = cfg.block_size
        self.max_model_len = sc.max_model_len
        config, kv_cache_config = vllm_sched.vllm_config(
            v, num_gpu_blocks=cfg.num_blocks + 1, block_size=cfg.block_size,
            max_num_batched_tokens=sc.max_num_batched_tokens, max_num_seqs=sc.max_num_seqs,
            max_model_len=sc.max_model_len, enable_chunked_prefill=sc.enable_chunked_prefill,
            long_prefill_token_threshold=sc.long_prefill_token_threshold)
        config.scheduler_config.policy = sc.policy
        config.scheduler_config.watermark = sc.watermark
        config.cache_config.enable_prefix_caching = cfg.enable_caching
        fn = v.hashing.get_hash_fn_by_name(cfg.hash_algo)
        saved = os.environ.pop("PYTHONHASHSEED", None)
        if cfg.hash_seed is not None:        # vLLM's rule reads PYTHONHASHSEED
            os.environ["PYTHONHASHSEED"] = cfg.hash_seed
        try:
            v.kv_cache_utils.init_none_hash(fn)
        finally:
            os.environ.pop("PYTHONHASHSEED", None)
            if saved is not None:
                os.environ["PYTHONHASHSEED"] = saved
        self.hasher = v.kv_cache_utils.get_request_block_hasher(cfg.block_size, fn)
        self.s = v.scheduler.Scheduler(
            vllm_config=config, kv_cache_config=kv_cache_config,
            structured_output_manager=vllm_sched.NoStructuredOutput(), block_size=cfg.block_size,
            hash_block_size=cfg.block_size, include_finished_set=False, log_stats=True)
        self.pub = self.s.kv_event_publisher = Capture()
        self.engine_mod = importlib.import_module("vllm.v1.engine")
        self.stats_mod = importlib.import_module("vllm.v1.metrics.stats")
        self.RS = v.request.RequestStatus
        self.tokens = tokens
        self.reqs: dict = {}          # every request, finished ones too (vLLM forgets those)
        # per engine step: (SchedulerStats, PREEMPTED events delivered, finished ids)
        self.steps: list = []
        # per successful lookup vLLM recorded: (event, request id, num_tokens, hits, preempted)
        self.recorded: list[tuple[int, str, int, int, bool]] = []
        self.event = 0
        self.checkpoints: dict = {}
        self.lora_ids: dict[str, int] = {}
        self._record_lookups()

    def _record_lookups(self) -> None:
        """Wrap the real KVCacheManager.record_prefix_cache_stats: vLLM's own hit, at its own
        admission (scheduler.py:1508-1512)."""
        mgr = self.s.kv_cache_manager
        record = type(mgr).record_prefix_cache_stats.__get__(mgr)

        def recording(request, num_hits):
            if mgr.prefix_cache_lookup_enabled(request):
                self.recorded.append((self.event, request.request_id, request.num_tokens,
                                      num_hits, request.num_preemptions > 0))
            return record(request, num_hits)
        mgr.record_prefix_cache_stats = recording

    # -- events -------------------------------------------------------------------------------
    def apply(self, step) -> None:
        self.event += 1
        kind, args = step.kind, step.args
        s = self.s
        if kind == "arrive":
            self._arrive(args)
            if args.admit:
                self.step()
        elif kind in ("admit", "step", "decode"):
            n = 1 if kind == "admit" else args if kind == "step" else args.steps
            for _ in range(n):
                self.step()
        elif kind in ("finish", "abort"):
            for rid in args:
                r = self.reqs[rid]
                stop = kind == "finish" and r.num_output_tokens > 0
                s.finish_requests(rid, self.RS.FINISHED_STOPPED if stop else self.RS.FINISHED_ABORTED)
        elif kind == "reset_prefix_cache":
            if args is True:
                s.reset_prefix_cache()
            else:
                s.reset_prefix_cache(reset_running_requests=args.reset_running_requests,
                                     reset_connector=args.reset_connector)
        elif kind == "checkpoint":
            self.checkpoints[args] = self._copy()
        elif kind == "rewind":
            self.s, self.reqs, steps = copy.deepcopy(self.checkpoints[args], self._memo())
            self.steps = list(steps)      # the abandoned branch's steps count no more
            self.pub = self.s.kv_event_publisher = Capture()
            self.s.kv_cache_manager.block_pool.take_events()   # a rewind emits no events
            self._record_lookups()
        elif kind is not None:
            raise NotImplementedError(f"the harness has no form for {kind!r}")

    def _memo(self) -> dict:
        return {id(m): m for m in (self.v, self.engine_mod, self.stats_mod)}

    def _copy(self):
        return copy.deepcopy((self.s, self.reqs, list(self.steps)), self._memo())

    def _arrive(self, spec) -> None:
        sp = vllm_sched.sampling_params(spec.max_tokens or self.max_model_len
                                        - len(self._prompt(spec.id)))
        sp.prompt_logprobs = spec.prompt_logprobs
        sp.skip_reading_prefix_cache = (spec.prompt_logprobs is not None
                                        if spec.skip_reading_prefix_cache is None
                                        else spec.skip_reading_prefix_cache)
        lora = None
        if spec.lora is not None:
            n = self.lora_ids.setdefault(spec.lora.name, len(self.lora_ids) + 1)
            lora = NS(lora_name=spec.lora.name, lora_path=spec.lora.path, lora_int_id=n,
                      adapter_id=n, name=spec.lora.name)
        r = self.v.request.Request(
            request_id=spec.id, prompt_token_ids=self._prompt(spec.id), sampling_params=sp,
            pooling_params=None, arrival_time=float(len(self.reqs) + 1),
            priority=spec.priority or 0,
            cache_salt=spec.cache_salt, lora_request=lora, block_hasher=self.hasher)
        self.reqs[spec.id] = r
        self.s.add_request(r)

    def _prompt(self, rid: str) -> list[int]:
        return self.tokens[rid][:self.num_prompt[rid]]

    def step(self) -> None:
        s = self.s
        if not s.has_requests():
            return
        out = s.schedule()
        ids = list(out.num_scheduled_tokens)
        sampled = [[] if s.requests[rid].is_prefill_chunk
                   else [self.tokens[rid][s.requests[rid].num_tokens]] for rid in ids]
        mro = self.v.outputs.ModelRunnerOutput(
            req_ids=ids, req_id_to_index={rid: i for i, rid in enumerate(ids)},
            sampled_token_ids=sampled)
        ecos = s.update_from_output(out, mro)
        preempted_events = 0
        stats = None
        for eco in ecos.values():
            if eco.scheduler_stats is not None:
                stats = eco.scheduler_stats
            for o in eco.outputs:
                preempted_events += sum(1 for e in (o.events or ())
                                        if e.type == self.engine_mod.EngineCoreEventType.PREEMPTED)
        self.steps.append(NS(stats=stats, preempted_events=preempted_events))

    # -- what blockviz's JSON shows ------------------------------------------------------------
    def snapshot(self) -> dict:
        s = self.s
        mgr = s.kv_cache_manager
        pool = mgr.block_pool
        kvu = self.v.kv_cache_utils
        table: dict[str, list[int]] = {}
        for key, found in pool.cached_block_hash_to_block._cache.items():
            ids = [found.block_id] if isinstance(found, kvu.KVCacheBlock) else list(found)
            table[bytes(kvu.get_block_hash(key)).hex()] = ids
        events = list(self.pub.events) + list(pool.take_events())
        self.pub.events = []
        reqs = {}
        for rid, r in self.reqs.items():
            live = rid in s.requests
            reqs[rid] = {"status": "finished" if r.is_finished() else
                         {"WAITING": "waiting", "RUNNING": "running",
                          "PREEMPTED": "preempted"}.get(r.status.name, r.status.name.lower()),
                         "block_table": list(mgr.get_block_ids(rid)[0]) if live else [],
                         "num_tokens": r.num_tokens, "num_computed_tokens": r.num_computed_tokens}
        free = pool.free_block_queue.get_all_free_blocks()
        return {"free_queue": [b.block_id for b in free],
                "hash_table": table, "hash_table_order": list(table),
                "waiting": [r.request_id for r in itertools.chain(s.kv_holding_waiting, s.waiting)],
                "running": [r.request_id for r in s.running], "requests": reqs,
                "kv_events": [event_view(e) for e in events],
                "vllm_metrics": {**self.metrics(), "used_blocks": pool.num_gpu_blocks - 1 - len(free),
                                 "cached_free_blocks": sum(b.block_hash is not None for b in free)}}

    def metrics(self) -> dict:
        """What vLLM's stat loggers hold after the engine steps so far: the Prometheus logger's
        gauges (the last SchedulerStats) and counters (summed, PREEMPTED events counted from the
        outputs, as IterationStats does), and the log line's window -- vLLM's own CachingMetrics,
        fed every step's stats (loggers.py:1138-1190, 230-235; stats.py:39-117)."""
        window = self.stats_mod.CachingMetrics()
        out = dict.fromkeys(("prefix_cache_queries_total", "prefix_cache_hits_total",
                             "num_preemptions_total"), 0)
        last = None
        for st in self.steps:
            if st.stats is None:
                continue
            last = st.stats
            p = last.prefix_cache_stats
            out["prefix_cache_queries_total"] += p.queries
            out["prefix_cache_hits_total"] += p.hits
            window.observe(p)
            out["num_preemptions_total"] += st.preempted_events
        out["num_requests_running"] = last.num_running_reqs if last else 0
        out["num_requests_waiting"] = (last.num_waiting_reqs + last.num_skipped_waiting_reqs
                                       if last else 0)
        out["num_requests_waiting_by_reason"] = {
            "capacity": last.num_waiting_reqs if last else 0,
            "deferred": last.num_skipped_waiting_reqs if last else 0}
        out["kv_cache_usage_perc"] = last.kv_cache_usage if last else 0.0
        out["logged_hit_rate"] = {
            "rate": None if window.empty else window.hit_rate,
            "requests": window.aggregated_requests, "queries": window.aggregated_query_total,
            "hits": window.aggregated_query_hit}
        return out


def event_view(e) -> tuple:
    kind = e["type"] if isinstance(e, dict) else type(e).__name__
    get = e.get if isinstance(e, dict) else (lambda k: getattr(e, k, None))
    if kind == "AllBlocksCleared":
        return (kind,)
    return (kind, tuple(get("block_hashes")))


def project_view(snap: dict) -> dict:
    """blockviz's JSON snapshot, as ``VllmRun.snapshot`` shows vLLM's."""
    return {"free_queue": snap["free_queue"], "hash_table": snap["hash_table"],
            "hash_table_order": list(snap["hash_table"]), "waiting": snap["waiting"],
            "running": snap["running"],
            "requests": {rid: {k: r[k] for k in ("status", "block_table", "num_tokens",
                                                  "num_computed_tokens")}
                         for rid, r in snap["requests"].items()},
            "kv_events": [event_view(e) for e in snap["kv_events"]],
            "vllm_metrics": {k: snap["vllm_metrics"][k] for k in METRIC_KEYS}}


METRIC_KEYS = ("prefix_cache_queries_total", "prefix_cache_hits_total", "num_preemptions_total",
               "num_requests_running", "num_requests_waiting", "num_requests_waiting_by_reason",
               "kv_cache_usage_perc", "logged_hit_rate", "used_blocks", "cached_free_blocks")


def run_both(v, loaded, *, timeline_dict=None):
    """blockviz's run of ``loaded`` (its JSON, frames left out) and vLLM's, event by event:
    (project snapshots, vLLM snapshots, the VllmRun, the project's steps)."""
    from blockviz.sim.contract import timeline_dict as make
    from blockviz.sim.runner import run
    engine, tl = run(loaded, payloads=False)
    assert tl.error is None, tl.error
    doc = (timeline_dict or make)(loaded.scenario.id, engine, tl, frames=False)
    seen = {rid: r for s in doc["steps"] for rid, r in s["requests"].items()}  # rewinds undo some
    vr = VllmRun(v, loaded.scenario, {rid: r["token_ids"] for rid, r in seen.items()})
    vr.num_prompt = {rid: r["num_prompt_tokens"] for rid, r in seen.items()}
    theirs = [vr.snapshot()]
    for step in loaded.scenario.steps:
        vr.apply(step)
        theirs.append(vr.snapshot())
    ours = [project_view(s) for s in doc["steps"]]
    return ours, theirs, vr, doc


def project_lookups(doc: dict) -> list[tuple]:
    """The lookups blockviz's splits explain, as vLLM records them: (event, request id,
    num_tokens, hit, preempted) for each first admission (prompt_split) and each event's latest
    re-admission of a request (resumed_split); a request that skips reading the cache is not
    recorded by vLLM, nor here. Checks on the way that each split sums to the tokens looked up."""
    out = []
    before: dict = {}
    for e, s in enumerate(doc["steps"]):
        for rid, r in s["requests"].items():
            was = before.get(rid, {})
            p, lk = r["prompt_split"], r["resumed_lookup"]
            if p is not None and was.get("prompt_split") is None:
                assert sum(p.values()) == r["num_prompt_tokens"], (rid, p)
                if p["skipped"] != r["num_prompt_tokens"]:
                    out.append((e, rid, r["num_prompt_tokens"], p["hit"], False))
            if lk is not None and lk != was.get("resumed_lookup"):
                rs = r["resumed_split"]
                assert sum(rs.values()) == lk["num_tokens"], (rid, rs, lk)
                if rs["skipped"] != lk["num_tokens"]:
                    out.append((e, rid, lk["num_tokens"], rs["hit"], True))
        before = s["requests"]
    return sorted(out)


def vllm_lookups(recorded: list[tuple]) -> list[tuple]:
    """vLLM's recorded lookups, each event's re-admissions of a request reduced to its last."""
    last: dict = {}
    for rec in recorded:
        last[(rec[0], rec[1], rec[4]) if rec[4] else rec] = rec
    return sorted(last.values())


def first_difference(ours: list[dict], theirs: list[dict]) -> str | None:
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        for key in a:
            if a[key] != b[key]:
                return f"step {i}: {key}: project {a[key]} != vLLM {b[key]}"
    return None


# -- the shared run-sched tool's oracle (its own Python and vLLM tree) ----------------------------
def sched_oracle_or_skip() -> tuple[str, str, Path]:
    """(the run-sched oracle's Python, vLLM 0.33.0's source root, the tool's ``sched/`` folder),
    made by ``shared/tools/vllm-diff/sched/setup.sh`` under ``$SCHED_ORACLE_HOME``; or a skip
    saying what is missing."""
    root = Path(__file__).resolve().parents[2]
    tool = Path(os.environ.get("BLOCKVIZ_VLLM_DIFF", root.parent / "shared" / "tools" / "vllm-diff"))
    sched = tool / "sched"
    if not (sched / "sched_oracle.py").is_file():
        pytest.skip(f"no run-sched oracle at {sched} (set BLOCKVIZ_VLLM_DIFF)")
    home = Path(os.environ.get("SCHED_ORACLE_HOME") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "blockviz-sched-oracle")
    py, src = home / "venv" / "bin" / "python", home / "src" / "0.33.0"
    if not py.is_file() or not (src / "vllm/v1/core/sched/scheduler.py").is_file():
        pytest.skip(f"no run-sched oracle under {home}: run `bash {sched}/setup.sh` "
                    "(set SCHED_ORACLE_HOME)")
    return str(py), str(src), sched


def _oracle_env(src: str) -> dict:
    return {**os.environ, "VLLM_FULL_SRC": src, "PYTHONDONTWRITEBYTECODE": "1"}


def run_sched_random(oracle, out: Path, count: int, seed: int) -> list[Path]:
    """The scenarios ``run-sched COUNT SEED`` diffs (its generator, the same files)."""
    py, src, sched = oracle
    p = subprocess.run([py, str(sched / "gen_real_scenarios.py"), str(out), str(count), str(seed)],
                       capture_output=True, text=True, env=_oracle_env(src), timeout=1800)
    assert p.returncode == 0, p.stderr[-2000:]
    return sorted(out.glob("*.yaml"), key=lambda f: int(f.stem.rsplit("-", 1)[-1]))


def run_sched_oracle(oracle, scenario: Path, doc: dict, tmp: Path) -> dict:
    """vLLM's real Scheduler on ``scenario`` as ``run-sched`` runs it (token ids read from
    blockviz's JSON ``doc``): one snapshot per event with vLLM's PrefixCacheStats, cumulated."""
    py, src, sched = oracle
    proj = tmp / "project.json"
    proj.write_text(json.dumps(doc))
    p = subprocess.run([py, str(sched / "sched_oracle.py"), str(scenario), "--project", str(proj)],
                       capture_output=True, text=True, env=_oracle_env(src), timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)
