"""Benchmark ``sched``: one engine step of 256 requests, blockviz's Scheduler against vLLM 0.33's.

The workload (:func:`prompts`): 256 requests, block size 16, the default budget
(``max_num_batched_tokens`` 8192, ``max_num_seqs`` 256), a pool of 4,096 blocks. Request *i* has a
16-token system prompt shared by its group of 32 and 16 + (*i* mod 16) tokens of its own (32 to
47 tokens), so prompts end at every offset inside a block.

  * **admit 256**: all 256 wait; one step admits every one of them (the first of each group
    misses, the other 31 hit its system-prompt block, cached by that same step's allocation),
    6,160 tokens of the 8,192 budget, and samples a token for each.
  * **decode 256**: the 256 then run; 16 consecutive decode steps (one token each, so each
    request fills a block and takes a new one exactly once), reported per step.

Both cases run twice: on one full-attention group, and on a **1:1 hybrid model** (issue 29; two
KV-cache groups in one pool, gpt-oss's order: a sliding window of :data:`WINDOW` tokens, then full
attention; vLLM 0.33's retention interval 0) — vLLM's side through its real
``HybridKVCacheCoordinator``, its configs built as run-hybrid builds them. The window is short
enough that the decode steps free blocks out of it into the null block, so both sides do a
sliding window's work.

One engine step is ``schedule()`` then ``update_from_output()`` with one sampled token per request
(built beforehand), and for blockviz ``take_events()`` (vLLM's ``update_from_output`` takes and
publishes the KV events itself). blockviz runs with op recording off and on (the player's engine
records); vLLM's real ``Scheduler`` (:mod:`bench.vllm_sched`, as ``run-sched`` loads it) runs
with ``log_stats`` on (what blockviz computes: prefix-cache stats) and off. Every side is first
run once with every step checked against blockviz: the same tokens scheduled per request, the
same block tables, the same free-block count. They take turns within each repeat; medians are
compared. Budget: blockviz / vLLM at most 1.0, against the faster vLLM variant, for each case,
each model and each recording mode. Without vLLM's source the vLLM side is skipped with the reason.
"""
from __future__ import annotations

from blockviz.core import BlockHasher, KVCacheManager, Request, Scheduler
from blockviz.core.kv_cache_interface import FullAttentionSpec, SlidingWindowSpec
from blockviz.core.ops import OpList
from blockviz.core.scheduler import SchedulerConfig

from . import vllm_sched
from .timing import fmt_s, median, ratio, table, timed
from .vllm_shim import VllmUnavailable

NAME = "sched"
NUM_REQUESTS, BLOCK_SIZE, POOL_BLOCKS, GROUP = 256, 16, 4096, 32
DECODE_STEPS = 16
QUICK_REQUESTS = 32
TARGET_RATIO = 1.0
SAMPLED = 7            # the token every step samples
WINDOW = 32            # the hybrid model's sliding window, tokens
# model -> its KV-cache groups' sliding windows (None: full attention), in group order
MODELS = {"": (None,), "hybrid 1:1": (WINDOW, None)}


class Mismatch(AssertionError):
    """Two sides of the benchmark did not take the same step."""


def prompts(n: int) -> list[list[int]]:
    out = []
    for i in range(n):
        group = i // GROUP
        system = [1000 * (group + 1) + k for k in range(BLOCK_SIZE)]
        own = [100_000 + 100 * i + k for k in range(BLOCK_SIZE + i % BLOCK_SIZE)]
        out.append(system + own)
    return out


class Ours:
    def __init__(self, recording: bool, model: str = "") -> None:
        self.recording, self.model = recording, model
        self.name = f"blockviz (recording {'on' if recording else 'off'})"

    def setup(self, toks: list[list[int]]) -> None:
        windows = MODELS[self.model]
        groups = None if windows == (None,) else [
            FullAttentionSpec(BLOCK_SIZE) if w is None
            else SlidingWindowSpec(BLOCK_SIZE, sliding_window=w) for w in windows]
        self.mgr = KVCacheManager(POOL_BLOCKS + 1, BLOCK_SIZE,
                                  sink=OpList() if self.recording else None,
                                  kv_cache_groups=groups, max_in_flight_tokens=8192)
        self.sched = Scheduler(self.mgr, config=SchedulerConfig())
        hasher = BlockHasher("sha256")
        self.ids = [f"r{i}" for i in range(len(toks))]
        for rid, t in zip(self.ids, toks):
            self.sched.add_request(Request(rid, t, hasher=hasher, block_size=BLOCK_SIZE,
                                           max_tokens=1000))
        self.sampled = dict.fromkeys(self.ids, SAMPLED)

    def step(self) -> None:
        out = self.sched.schedule()
        self.sched.update_from_output(out, self.sampled)
        self.mgr.take_events()
        self.last = out

    def state(self) -> tuple:
        return (self.last.num_scheduled_tokens,
                {rid: self.mgr.get_block_ids(rid) for rid in self.ids},
                self.mgr.block_pool.get_num_free_blocks())


class Vllm:
    def __init__(self, v, log_stats: bool, model: str = "") -> None:
        self.v, self.log_stats, self.model = v, log_stats, model
        self.name = f"vLLM (log_stats {'on' if log_stats else 'off'})"

    def setup(self, toks: list[list[int]]) -> None:
        v = self.v
        config, kv_cache_config = vllm_sched.vllm_config(v, num_gpu_blocks=POOL_BLOCKS + 1,
                                                         block_size=BLOCK_SIZE,
                                                         sliding_windows=MODELS[self.model])
        fn = v.hashing.get_hash_fn_by_name("sha256")
        v.kv_cache_utils.init_none_hash(fn)
        hasher = v.kv_cache_utils.get_request_block_hasher(BLOCK_SIZE, fn, 0)
        self.sched = v.scheduler.Scheduler(
            vllm_config=config, kv_cache_config=kv_cache_config,
            structured_output_manager=vllm_sched.NoStructuredOutput(), block_size=BLOCK_SIZE,
            hash_block_size=BLOCK_SIZE, include_finished_set=False, log_stats=self.log_stats)
        self.ids = [f"r{i}" for i in range(len(toks))]
        for i, (rid, t) in enumerate(zip(self.ids, toks)):
            self.sched.add_request(v.request.Request(
                request_id=rid, prompt_token_ids=t, sampling_params=vllm_sched.sampling_params(1000),
                pooling_params=None, arrival_time=float(i), lora_request=None, cache_salt=None,
                block_hasher=hasher))
        self.output = v.outputs.ModelRunnerOutput(
            req_ids=self.ids, req_id_to_index={rid: i for i, rid in enumerate(self.ids)},
            sampled_token_ids=[[SAMPLED] for _ in self.ids])

    def step(self) -> None:
        out = self.sched.schedule()
        self.sched.update_from_output(out, self.output)
        self.last = out

    def state(self) -> tuple:
        mgr = self.sched.kv_cache_manager
        return (dict(self.last.num_scheduled_tokens),
                {rid: tuple(map(list, mgr.get_block_ids(rid))) if rid in self.sched.requests
                 else ([],) * len(MODELS[self.model]) for rid in self.ids},
                mgr.block_pool.get_num_free_blocks())


def check_same(impls: list, toks: list[list[int]]) -> None:
    """Run every side once, step by step, and compare each step's result with blockviz's."""
    for impl in impls:
        impl.setup(toks)
    for k in range(1 + DECODE_STEPS):
        states = []
        for impl in impls:
            impl.step()
            states.append(impl.state())
        for impl, st in zip(impls[1:], states[1:]):
            if st != states[0]:
                what = ["scheduled tokens", "block tables", "free blocks"][
                    next(j for j in range(3) if st[j] != states[0][j])]
                raise Mismatch(f"step {k + 1}: {impl.name} differs from {impls[0].name} in {what}")
        if k == 0 and len(states[0][0]) != len(toks):
            raise Mismatch("the first step did not admit every request")
    first = states[0]
    if sum(first[0].values()) != len(toks):
        raise Mismatch("the last decode step did not schedule one token per request")


def run(repeat: int, quick: bool, say) -> dict:
    try:
        with vllm_sched.loaded() as v:
            vllm_info = {"version": v.version, "src": v.src}
            return _measure_models(lambda m: [Ours(False, m), Ours(True, m), Vllm(v, True, m),
                                              Vllm(v, False, m)], vllm_info, repeat, quick, say)
    except VllmUnavailable as e:
        say(f"  vLLM side skipped: {e}")
        return _measure_models(lambda m: [Ours(False, m), Ours(True, m)], {"skipped": str(e)},
                               repeat, quick, say)


def _measure_models(impls_of, vllm_info: dict, repeat: int, quick: bool, say) -> dict:
    """Every model's cases, one report: the one-group model's first."""
    result = None
    for model in MODELS:
        if model:
            say(f"  {model}: a sliding window of {WINDOW} tokens, then full attention")
        r = _measure(impls_of(model), vllm_info, repeat, quick, say, model)
        if result is None:
            result = r
        else:
            result["cases"] += r["cases"]
            result.setdefault("budgets", []).extend(r.get("budgets", []))
    result["workload"]["models"] = {m or "full attention": list(w) for m, w in MODELS.items()}
    return result


def _measure(impls: list, vllm_info: dict, repeat: int, quick: bool, say,
             model: str = "") -> dict:
    n = QUICK_REQUESTS if quick else NUM_REQUESTS
    toks = prompts(n)
    check_same(impls, toks)
    say(f"  {n} requests, {sum(map(len, toks)):,} prompt tokens: every side took the same "
        f"{1 + DECODE_STEPS} steps; timing ({repeat} repeats)")
    names = [i.name for i in impls]
    times = {case: {nm: [] for nm in names} for case in ("admit", "decode")}
    cpu = {case: {nm: [] for nm in names} for case in ("admit", "decode")}
    for r in range(repeat):
        for impl in impls[r % len(impls):] + impls[:r % len(impls)]:
            impl.setup(toks)
            wall, c = timed(impl.step)
            times["admit"][impl.name].append(wall)
            cpu["admit"][impl.name].append(c)

            def decode(impl=impl):
                for _ in range(DECODE_STEPS):
                    impl.step()
            wall, c = timed(decode)
            times["decode"][impl.name].append(wall / DECODE_STEPS)
            cpu["decode"][impl.name].append(c / DECODE_STEPS)
    cases = []
    for case in ("admit", "decode"):
        med = {nm: median(ts) for nm, ts in times[case].items()}
        med_cpu = {nm: median(ts) for nm, ts in cpu[case].items()}
        c = {"case": f"{case} {n}" + (f" {model}" if model else ""), "median_s": med,
             "median_cpu_s": med_cpu, "runs_s": times[case]}
        vllm_names = [nm for nm in names if nm.startswith("vLLM")]
        if vllm_names:
            fastest = min(vllm_names, key=med.get)
            c["vllm_reference"] = fastest
            for impl in impls[:2]:
                key = "recording_on" if impl.recording else "recording_off"
                c[f"ratio_{key}"] = ratio(med[impl.name], med[fastest])
                c[f"cpu_ratio_{key}"] = ratio(med_cpu[impl.name], med_cpu[fastest])
        cases.append(c)
    result = {"workload": {"requests": n, "block_size": BLOCK_SIZE, "pool_blocks": POOL_BLOCKS,
                           "max_num_batched_tokens": 8192, "max_num_seqs": 256,
                           "decode_steps": DECODE_STEPS,
                           "prompt_tokens": sum(map(len, toks))},
              "vllm": vllm_info, "cases": cases}
    if "skipped" not in vllm_info:
        result["budgets"] = [
            {"name": f"sched: blockviz/vLLM, one engine step, {c['case']}, recording {mode}",
             "limit": TARGET_RATIO, "value": c[f"ratio_recording_{mode}"],
             "met": c[f"ratio_recording_{mode}"] <= TARGET_RATIO, "unit": "x"}
            for c in cases for mode in ("off", "on")]
    return result


def render(result: dict) -> str:
    cases = result["cases"]
    names = list(cases[0]["median_s"])
    has_vllm = "ratio_recording_off" in cases[0]
    headers = ["one engine step"] + [f"{nm} (median)" for nm in names]
    if has_vllm:
        headers += ["off/vLLM", "on/vLLM", "(CPU time: off, on)"]
    rows = []
    for c in cases:
        row = [c["case"]] + [fmt_s(c["median_s"][nm]) for nm in names]
        if has_vllm:
            row += [f"{c['ratio_recording_off']:.2f}x", f"{c['ratio_recording_on']:.2f}x",
                    f"{c['cpu_ratio_recording_off']:.2f}x, {c['cpu_ratio_recording_on']:.2f}x"]
        rows.append(row)
    out = [table(headers, rows)]
    if has_vllm:
        out.append(f"  (ratios against the faster vLLM variant: "
                   f"{', '.join(sorted({c['vllm_reference'] for c in cases}))})")
    else:
        out.append(f"\n  vLLM: {result['vllm'].get('skipped')}")
    return "\n".join(out)
