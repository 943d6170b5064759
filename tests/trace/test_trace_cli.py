"""``blockviz trace``: capacity's JSON is the sweep's reports, its table, option and trace errors
as one located line with exit status 2, generate and check."""
from __future__ import annotations

import json

import pytest
from trace_helpers import write

from blockviz.sim.capacity import KV_PRESETS, KVShape
from blockviz.sim.sweep import LocalExecutor, sweep

REQS = [(1024, [1, 2]), (1536, [1, 2, 3]), (1024, [1, 2]), (600, [9, 10]), (512, [20]), (1536, [1, 2, 3])]


@pytest.fixture
def small(tmp_path):
    return write(tmp_path / "small.jsonl", REQS)


def test_json_is_run_traces_shape_and_the_sweeps_numbers(cli, small):
    out = cli("trace", "capacity", str(small), "--block-size", "512", "--pool-blocks", "2,4",
              "--free-order", "append", "--json")
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""                    # no progress bar with --json
    doc = json.loads(out.stdout)
    # The hand-worked numbers of tests/trace/test_capacity.py (pool 4, append; pool 2).
    assert doc == {"requests": 6, "block_size": 512, "free_order": "append",
                   "ceiling": {"queries": 6232, "hits": 2560},
                   "points": [{"pool_blocks": 2, "queries": 3160, "hits": 512, "requests": 4,
                               "rejected": 2, "evictions": 3},
                              {"pool_blocks": 4, "queries": 6232, "hits": 2048, "requests": 6,
                               "rejected": 0, "evictions": 4}]}
    # json.dumps' own separators, as run-trace prints them
    assert out.stdout == json.dumps(doc) + "\n"


def test_several_traces_and_orders_one_line_each(cli, small, tmp_path):
    other = write(tmp_path / "other.jsonl", REQS[:3])
    out = cli("trace", "capacity", str(small), str(other), "--block-size", "64", "--pool-blocks", "40",
              "--free-order", "split,append", "--json", "--workers", "2")
    assert out.returncode == 0, out.stderr
    docs = [json.loads(x) for x in out.stdout.splitlines()]
    assert [(d["trace"], d["free_order"]) for d in docs] == [
        (str(small), "split"), (str(small), "append"), (str(other), "split"), (str(other), "append")]
    want = sweep([str(small), str(other)], block_size=64, pool_blocks=[40],
                 free_orders=["split", "append"], executor=LocalExecutor(1)).reports
    assert [{k: v for k, v in d.items() if k != "trace"} for d in docs] == want


def test_the_table_in_blocks_tokens_and_gib(cli, small):
    out = cli("trace", "capacity", str(small), "--pool-blocks", "2,4", "--model", "llama-3-70b")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "6 requests, blocks of 512 tokens, free order split" in lines[0]
    assert "320 KiB per token" in lines[1] and "80 layers × 8 KV heads" in lines[1]
    row4 = next(x.split() for x in lines if x.split()[:1] == ["4"])
    # 4 blocks = 2,048 tokens = 2048 * 320 KiB = 0.625 GiB; hits 2560/6232; ceiling 2560/6232
    assert row4 == ["4", "2,048", "0.62", "41.1%", "100.0%", "6", "0", "3"]
    assert any("ceiling (an infinite pool): hit rate 41.1%" in x for x in lines)
    assert "replaying [" in out.stderr and "100%" in out.stderr       # the progress bar
    zh = cli("trace", "capacity", str(small), "--pool-blocks", "4", "--lang", "zh",
             "--kv-bytes-per-token", "1024")
    assert zh.returncode == 0 and "命中率" in zh.stdout and "回放中" in zh.stderr


def test_the_presets_are_their_shapes():
    assert KV_PRESETS["llama-3-70b"].bytes_per_token == 320 * 1024
    assert KV_PRESETS["llama-3-8b"].bytes_per_token == 128 * 1024
    assert KVShape(28, 4, 128).bytes_per_token == 28 * 4 * 128 * 2 * 2


@pytest.mark.parametrize("args, want", [
    (["--pool-blocks", "10,x"], "--pool-blocks: give pool sizes in blocks"),
    (["--pool-blocks", "0"], "--pool-blocks: give pool sizes in blocks"),
    (["--pool-blocks", "8", "--block-size", "48"], "--block-size: block size 48 does not divide"),
    (["--pool-blocks", "8", "--free-order", "lifo"], "--free-order: 'lifo' is not one of split, append"),
    (["--pool-blocks", "8", "--mode", "warp"], "--mode: invalid choice: 'warp'"),
    (["--pool-blocks", "8", "--step-base", "0.5"], "--step-base: only timed mode reads this option"),
    (["--pool-blocks", "8", "--mode", "timed", "--step-base", "-1"], "--step-base: '-1' is not a number"),
    (["--pool-blocks", "8", "--mode", "timed", "--max-num-batched-tokens", "8", "--max-num-seqs", "9"],
     "max_num_batched_tokens (8) must be >= max_num_seqs (9)"),
    (["--pool-blocks", "8", "--mode", "timed", "--step-base", "0", "--step-prefill-token", "0",
      "--step-decode-seq", "0"], "a step must cost some time"),
    (["--pool-blocks", "8", "--workers", "0"], "--workers: '0' is not allowed"),
    (["--pool-blocks", "8", "--model", "gpt-9"], "--model: invalid choice: 'gpt-9'"),
    (["--pool-blocks", "8", "--model", "llama-3-8b", "--kv-bytes-per-token", "9"], "not allowed with"),
    ([], "the following arguments are required: --pool-blocks"),
])
def test_an_option_error_is_one_line_exit_2(cli, small, args, want):
    out = cli("trace", "capacity", str(small), *args)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and want in out.stderr, out.stderr
    assert out.stderr.startswith("blockviz trace capacity: ") and out.stdout == ""


def test_a_malformed_trace_is_refused_with_its_line(cli, tmp_path):
    bad = write(tmp_path / "bad.jsonl", REQS[:2] + [{"timestamp": 0, "input_length": 700,
                                                     "output_length": 1, "hash_ids": [3]}])
    for args in (["capacity", str(bad), "--pool-blocks", "8"], ["check", str(bad)],
                 ["capacity", str(bad), "--pool-blocks", "8", "--json"]):
        out = cli("trace", *args)
        assert out.returncode == 2 and out.stdout == ""
        err = out.stderr.splitlines()[-1]
        assert err.startswith(f"{bad}:3:") and "hash_ids: 1 hash ids, but input_length 700 needs 2" in err
        assert "Traceback" not in out.stderr
    zh = cli("trace", "check", str(bad), "--lang", "zh")
    assert zh.returncode == 2 and "需要 2 个" in zh.stderr
    missing = cli("trace", "capacity", str(tmp_path / "none.jsonl"), "--pool-blocks", "8")
    assert missing.returncode == 2 and "cannot read the file" in missing.stderr


def test_generate_then_check_then_capacity(cli, tmp_path):
    out_file = tmp_path / "chat.jsonl"
    gen = cli("trace", "generate", "multi_turn", "--requests", "300", "--seed", "4", "-o", str(out_file))
    assert gen.returncode == 0, gen.stderr
    assert f"{out_file}: 300 requests (multi_turn, seed 4)" in gen.stderr
    again = cli("trace", "generate", "multi_turn", "--requests", "300", "--seed", "4")
    assert again.stdout == out_file.read_text()                  # stdout by default; seeded
    chk = cli("trace", "check", str(out_file))
    assert chk.returncode == 0 and "ok — 300 requests" in chk.stdout
    cap = cli("trace", "capacity", str(out_file), "--pool-blocks", "50,500", "--json")
    points = json.loads(cap.stdout)["points"]
    assert points[0]["hits"] < points[1]["hits"]                  # a bigger pool hits more
    bad = cli("trace", "generate", "chat")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--" not in bad.stdout
    unwritable = cli("trace", "generate", "random", "-o", str(tmp_path / "no" / "such" / "x.jsonl"))
    assert unwritable.returncode == 2 and "cannot write the file" in unwritable.stderr


def test_timed_mode_json_and_table(cli, tmp_path):
    # The hand case of tests/trace/test_timed.py (a preemption and its resume), through the CLI.
    path = write(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 16, "output_length": 5, "hash_ids": [1]},
        {"timestamp": 0, "input_length": 16, "output_length": 10, "hash_ids": [2]}])
    cost = ["--step-base", "1", "--step-prefill-token", "0.01", "--step-decode-seq", "0.1"]
    out = cli("trace", "capacity", str(path), "--mode", "timed", "--block-size", "16", "--pool-blocks",
              "3,4", "--json", *cost)                 # 4: both requests' every block at once
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "timed" and doc["options"]["step_base_s"] == 1.0
    assert doc["options"]["max_num_seqs"] == 256                    # the default, filled in
    small, big = doc["points"]
    assert (small["preemptions"], small["preempted_hits"], small["steps"]) == (1, 16, 14)
    assert abs(small["simulated_s"] - 15.53) < 1e-9 and big["preemptions"] == 0
    table = cli("trace", "capacity", str(path), "--mode", "timed", "--block-size", "16",
                "--pool-blocks", "3", *cost, "--lang", "zh")
    assert table.returncode == 0, table.stderr
    assert "计时模式" in table.stdout and "首 token 时间 p50/p90（秒）" in table.stdout
    row = next(x.split() for x in table.stdout.splitlines() if x.split()[:1] == ["3"])
    assert row[-3:] == ["1", "0/0", "1.32/1.32"]                    # preempted, queue, TTFT


def test_a_hybrid_model_drives_the_replay_and_the_table_says_what_limited_it(cli, tmp_path):
    """--model gpt-oss-120b: the replay runs its two KV-cache groups (JSON: "model", and points'
    limited_hits), the table's KV line and "limited by" column say so; the one-pass curve and
    the optimal policy are one group's, so they are refused with such a model."""
    from blockviz.scenario.trace import read_trace
    from blockviz.sim.capacity import model_groups, replay_sequence
    # a 1,000-token prompt, then its first 700 tokens: full attention holds 688 of them (43 blocks)
    f = write(tmp_path / "t.jsonl", [(1000, [1, 2]), (700, [1, 2])])
    out = cli("trace", "capacity", str(f), "--block-size", "16", "--pool-blocks", "200",
              "--model", "gpt-oss-120b", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["model"] == "gpt-oss-120b"
    want = replay_sequence(read_trace(str(f)), block_size=16, pool_blocks=200,
                           kv_cache_groups=model_groups("gpt-oss-120b"))
    assert doc["points"] == [want]
    assert want["hits"] == 0 and want["limited_hits"] == 688       # the window kept no checkpoint there
    assert doc["ceiling"] == {"queries": 1700, "hits": 0, "limited_hits": 688}
    table = cli("trace", "capacity", str(f), "--block-size", "16", "--pool-blocks", "200",
                "--model", "gpt-oss-120b")
    lines = table.stdout.splitlines()
    assert "36 KiB per token in each KV-cache group that keeps it" in lines[1]
    assert "2 × " not in lines[1] and "1 × sliding window, 1 × full attention" in lines[1]
    assert "limited by the sliding window" in lines[2]
    row = next(x.split() for x in lines if x.split()[:1] == ["200"])
    assert row[:5] == ["200", "3,200", "0.11", "0.0%", "-"] and row[5] == "40.5%"
    assert "full attention held 688 more prompt tokens that the sliding window did not" in table.stdout
    for opt in ("--curve", "--optimal"):
        refused = cli("trace", "capacity", str(f), "--pool-blocks", "200", "--block-size", "16",
                      "--model", "gemma-3-27b", opt)
        assert refused.returncode == 2
        assert refused.stderr.strip() == (f"blockviz trace capacity: {opt}: the one-pass curve and the "
                                          "optimal policy are exact for one full-attention group; "
                                          "gemma-3-27b has several (replay pool sizes instead: drop "
                                          "the option)")
    # a dense preset changes nothing but the GiB: run-trace's JSON
    dense = json.loads(cli("trace", "capacity", str(f), "--block-size", "16", "--pool-blocks", "100",
                           "--model", "qwen3-8b", "--json").stdout)
    assert "model" not in dense and "limited_hits" not in dense["points"][0]
