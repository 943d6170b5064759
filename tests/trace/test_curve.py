"""The one-pass curve (blockviz.sim.curve) against the per-pool replay (blockviz.sim.capacity's
replay_sequence, the reference): equal at every pool size on hand-made traces that exercise each
case of the proof (rejections, duplicates, the num_tokens-1 cap, partial blocks, both free orders)
and on seeded random ones; at 50 sizes per free order on the public Mooncake trace; and the
command line's ``--curve``."""
from __future__ import annotations

import json
import random

import pytest
from trace_helpers import random_trace, shared_dir, write

from blockviz.scenario.trace import TraceRequest, read_trace
from blockviz.sim.capacity import ceiling, geometric_sizes, replay_sequence
from blockviz.sim.curve import curve_sequence, curve_sweep
from blockviz.sim.sweep import LocalExecutor, PoolTooLarge, sweep
from blockviz.teach.tracegen import TraceWorkload, generate_trace

ORDERS = ("split", "append")


def trace(*reqs: tuple[int, list[int]]) -> list[TraceRequest]:
    return [TraceRequest(i, n, 1, ids, i + 1) for i, (n, ids) in enumerate(reqs)]


def blocks(t: list[TraceRequest], bs: int) -> int:
    return sum(-(-r.input_length // bs) for r in t)


def assert_every_size(t: list[TraceRequest], bs: int, order: str, top: int | None = None) -> None:
    """The curve's point equals the replay's at every pool size from 1 to past the working set."""
    curve = curve_sequence(t, block_size=bs, free_order=order)
    for n in range(1, (top or blocks(t, bs)) + 2):
        assert curve.point(n) == replay_sequence(t, block_size=bs, pool_blocks=n, free_order=order), \
            (bs, order, n)


# A rejection breaks inclusion. A = 2 full blocks + a partial (B = 3), Y = 9 fresh full blocks +
# a partial (B = 10), then A again. Pools of 3..9 blocks reject Y, so A's blocks survive and
# A's repeat hits both; a pool of 10 admits Y, which evicts A: no hit. A larger pool hits less —
# no stack algorithm over all requests gives that.
REJECT = trace((1124, [1, 2, 3]), (9 * 512 + 100, list(range(10, 20))), (1124, [1, 2, 3]))

# A duplicate. R = 1024 tokens exactly (F = 2, hit limit L = 1): R's repeat hits only block 0,
# and vLLM caches a second block with block 1's hash while the first stays in the queue. The
# third request (1124 tokens, L = 2) touches the first-inserted copy; the other one takes a slot.
DUP = trace((1024, [1, 2]), (1024, [1, 2]), (1124, [1, 2, 5]))


def test_a_rejection_makes_a_larger_pool_hit_less_and_the_curve_follows():
    curve = curve_sequence(REJECT, block_size=512)
    assert curve.point(3)["hits"] == 1024 and curve.point(3)["rejected"] == 1
    assert curve.point(10)["hits"] == 0 and curve.point(10)["rejected"] == 0
    assert curve.point(12)["hits"] == 1024
    for order in ORDERS:
        assert_every_size(REJECT, 512, order)


def test_a_duplicate_takes_a_slot_until_it_is_evicted():
    for order in ORDERS:
        curve = curve_sequence(DUP, block_size=512, free_order=order)
        # pool 2: the repeat pops the old copy itself (1 eviction), the third request is rejected
        assert curve.point(2) == {"pool_blocks": 2, "queries": 2048, "hits": 512, "requests": 2,
                                  "rejected": 1, "evictions": 1}
        # pool 3: both copies fit; the third request hits 2 blocks and its partial block pushes
        # the copy it did not touch out (split: the queue keeps 2 hashed blocks; append: 3 items)
        assert curve.point(3) == {"pool_blocks": 3, "queries": 3172, "hits": 1536, "requests": 3,
                                  "rejected": 0, "evictions": 1}
        assert curve.point(4)["evictions"] == 0
        assert_every_size(DUP, 512, order)


@pytest.mark.parametrize("order", ORDERS)
def test_hand_made_traces_at_every_size(order):
    cases = [
        # tests/trace/test_capacity.py's traces: shared prefixes, the L cap, partial trace blocks
        (512, trace((1024, [1, 2]), (1536, [1, 2, 3]), (1024, [1, 2]), (600, [9, 10]), (512, [20]),
                    (1536, [1, 2, 3]))),
        (16, trace((40, [7]), (33, [7]), (32, [7]), (40, [8]))),
        (64, trace((600, [1, 2]), (600, [1, 3]), (577, [1, 2]))),
        # requests shorter than a block (no hashed block, one partial), and repeats of them
        (64, trace((10, [1]), (63, [1]), (64, [1]), (64, [1]), (65, [1]), (10, [2]))),
        # a duplicate touched again and again, then pushed out by fresh requests
        (128, trace((512, [4]), (512, [4]), (512, [4]), (600, [4, 5]), (300, [9]), (512, [4]),
                    (1024, [7, 8]), (512, [4]), (640, [4, 6]))),
        # big requests rejected at small pools between small ones sharing a prefix
        (256, trace((700, [1, 2]), (3000, [1, 3, 4, 5, 6, 7]), (700, [1, 2]), (260, [1]),
                    (2600, [8, 3, 4, 5, 6, 7]), (512, [1]), (700, [1, 2]), (3000, [1, 3, 4, 5, 6, 7]))),
        # the same hash id under different parents is a different block
        (32, trace((100, [5]), (100, [6]), (600, [6, 5]), (600, [5, 5]), (100, [5]), (600, [6, 5]))),
    ]
    for bs, t in cases:
        assert_every_size(t, bs, order)


def _random_trace(rng: random.Random, n: int, bs: int) -> list[TraceRequest]:
    return random_trace(rng, n, bs)


@pytest.mark.parametrize("seed", range(12))
def test_random_traces_at_every_size(seed):
    rng = random.Random(seed)
    bs = rng.choice([512, 256, 128, 64])
    t = _random_trace(rng, rng.randint(5, 20), bs)
    for order in ORDERS:
        assert_every_size(t, bs, order)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(12, 200))
def test_more_random_traces_at_every_size(seed):
    test_random_traces_at_every_size(seed)


def test_the_step_function_is_the_hits_at_every_size():
    rng = random.Random(5)
    t = _random_trace(rng, 30, 128)
    for order in ORDERS:
        curve = curve_sequence(t, block_size=128, free_order=order)
        steps = curve.steps()
        assert steps[0][0] == 1
        assert all(a[1] != b[1] and a[0] < b[0] for a, b in zip(steps, steps[1:]))   # changes only
        at = dict(steps)
        hits = None
        for n in range(1, curve.working_set + 2):
            hits = at.get(n, hits)
            assert hits == curve.point(n)["hits"], n
        assert steps[-1][0] <= curve.working_set
        assert curve.ceiling() == ceiling(t, block_size=128) == \
            {"queries": curve.point(curve.working_set)["queries"], "hits": steps[-1][1]}


def test_progress_counts_every_request():
    t = [TraceRequest(*x, i + 1) for i, x in enumerate(generate_trace(
        TraceWorkload(kind="multi_turn", requests=700, seed=3)))]
    seen: list[int] = []
    curve_sequence(t, block_size=64, progress=seen.append)
    assert sum(seen) == 700 and len(seen) == 3


def test_refused_settings():
    with pytest.raises(ValueError, match="does not divide"):
        curve_sequence(REJECT, block_size=48)
    with pytest.raises(ValueError, match="free_order"):
        curve_sequence(REJECT, block_size=512, free_order="lifo")
    with pytest.raises(ValueError, match="at least 1"):
        curve_sequence(REJECT, block_size=512).point(0)


def _synthetic():
    shared = shared_dir()
    path = shared / "data/mooncake-synthetic.jsonl" if shared else None
    if path is None or not path.is_file():
        pytest.skip("no shared/data/mooncake-synthetic.jsonl beside the checkout (set BLOCKVIZ_SHARED)")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("order", ORDERS)
def test_the_public_trace_at_50_sizes(order):
    t = read_trace(_synthetic())
    curve = curve_sequence(t, block_size=512, free_order=order)
    # sizes from one block to the working set, evenly on a log axis, and just below the largest
    # request (there the largest requests are rejected), 50 in all
    sizes = set(geometric_sizes(1, curve.working_set, 40))
    below = curve.largest
    while len(sizes) < 50:
        sizes.add(below)
        below -= 1
    sizes = sorted(sizes)
    assert sizes[0] == 1 and sizes[-1] == curve.working_set
    for n in sizes:
        assert curve.point(n) == replay_sequence(t, block_size=512, pool_blocks=n, free_order=order), n


@pytest.mark.slow
@pytest.mark.parametrize("order", ORDERS)
def test_the_public_trace_at_block_size_64(order):
    t = read_trace(_synthetic(), limit=300)
    curve = curve_sequence(t, block_size=64, free_order=order)
    for n in sorted(set(geometric_sizes(1, curve.working_set, 12)) | {curve.largest - 1, curve.largest}):
        assert curve.point(n) == replay_sequence(t, block_size=64, pool_blocks=n, free_order=order), n


# -- the command line -------------------------------------------------------------------------
REQS = [(1024, [1, 2]), (1536, [1, 2, 3]), (1024, [1, 2]), (600, [9, 10]), (512, [20]), (1536, [1, 2, 3])]


def test_curve_json_is_the_sweeps_report_plus_the_step_function(cli, tmp_path):
    small = write(tmp_path / "small.jsonl", REQS)
    out = cli("trace", "capacity", str(small), "--block-size", "256", "--pool-blocks", "3,5,8,30",
              "--free-order", "split,append", "--curve", "--json")
    assert out.returncode == 0, out.stderr
    docs = [json.loads(x) for x in out.stdout.splitlines()]
    want = sweep([str(small)], block_size=256, pool_blocks=[3, 5, 8, 30], free_orders=list(ORDERS),
                 executor=LocalExecutor(1)).reports
    assert [{k: v for k, v in d.items() if k != "curve"} for d in docs] == want
    for doc in docs:
        steps = doc["curve"]
        assert steps[0][0] == 1 and steps[-1][1] == doc["ceiling"]["hits"]
        for p in doc["points"]:
            assert max(h for n, h in steps if n <= p["pool_blocks"]) >= 0
            assert [h for n, h in steps if n <= p["pool_blocks"]][-1] == p["hits"]


def test_curve_sweep_is_the_sweep_with_a_curve(tmp_path):
    small = write(tmp_path / "small.jsonl", REQS)
    with pytest.raises(PoolTooLarge):      # as the sweep: the trace never fills 40 blocks of 256
        curve_sweep([str(small)], block_size=256, pool_blocks=[40])
    got = curve_sweep([str(small)], block_size=512, pool_blocks=[2, 4], free_orders=["append"]).reports
    want = sweep([str(small)], block_size=512, pool_blocks=[2, 4], free_orders=["append"],
                 executor=LocalExecutor(1)).reports
    assert [{k: v for k, v in r.items() if k != "curve"} for r in got] == want


@pytest.mark.parametrize("flag", ["--curve", "--optimal"])
@pytest.mark.parametrize("lang, words", [("en", "only sequence mode reads this option"),
                                         ("zh", "只有顺序模式读取这个选项")])
def test_curve_and_optimal_refuse_timed_mode(cli, tmp_path, flag, lang, words):
    small = write(tmp_path / "small.jsonl", REQS)
    out = cli("trace", "capacity", str(small), "--pool-blocks", "4", flag, "--mode", "timed",
              "--lang", lang)
    assert out.returncode == 2
    assert out.stdout == "" and len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith(f"blockviz trace capacity: {flag}: {words}")
    with pytest.raises(ValueError, match="sequence mode only"):
        curve_sweep([str(small)], block_size=512, pool_blocks=[4], mode="timed")


def test_curve_reports_a_bad_line_located(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}\n'
                   '{"timestamp": 1, "input_length": 0, "output_length": 1, "hash_ids": []}\n')
    out = cli("trace", "capacity", str(bad), "--pool-blocks", "4", "--curve")
    assert out.returncode == 2
    assert f"{bad}:2:" in out.stderr and "input_length" in out.stderr
