"""Qwen-Bailian traces (qwen_*_blksz_16.jsonl): read with their chats and 16-token hash blocks,
located errors, the block sizes a trace allows (and the refusal of a finer one, in both
languages), and the replays on them: the one-pass curve equal to the per-pool replay at every
size, the fast path equal to vLLM's hashes of the derived tokens."""
from __future__ import annotations

import json

import pytest

from blockviz.scenario import trace as T
from blockviz.sim.capacity import ceiling, replay_sequence
from blockviz.sim.curve import curve_sequence
from blockviz.sim.optimal import optimal_hits

S = [1, 2]                     # a 32-token system prompt, shared by every chat


def req(chat_id, parent, ts, n, ids, turn=1, kind="text", out=20) -> dict:
    return {"chat_id": chat_id, "parent_chat_id": parent, "timestamp": ts, "input_length": n,
            "output_length": out, "type": kind, "turn": turn, "hash_ids": ids}


# Two conversations over one system prompt; the second's first turn is sent twice (a retry, 64
# tokens: a whole number of 16-token blocks, so its last block is cached twice in vLLM).
LINES = [
    req(0, -1, 0.0, 69, S + [3, 4, 5]),                        # 4 full blocks + 5 tokens
    req(1, -1, 0.4, 64, S + [9, 10], kind="search"),
    req(2, -1, 0.9, 64, S + [9, 10], kind="search"),            # the retry
    req(3, 0, 2.5, 99, S + [3, 4, 6, 7, 8], turn=2),            # chat 0's turn 2: its prompt, more
    req(4, 2, 3.0, 120, S + [9, 10, 11, 12, 13, 14], turn=2),
    req(5, 3, 7.25, 150, S + [3, 4, 6, 7, 15, 16, 17, 18], turn=3),
    req(6, -1, 8.0, 40, [20, 21, 22], kind="image"),
    req(7, 4, 9.5, 160, S + [9, 10, 11, 12, 13, 14, 23, 24], turn=3),
]


def write_bailian(path, lines=LINES):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


@pytest.fixture
def qwen(tmp_path):
    return write_bailian(tmp_path / "qwen_test_blksz_16.jsonl")


def test_a_bailian_trace_reads_with_its_chats(qwen):
    reqs = T.read_trace(qwen)
    assert len(reqs) == 8 and {r.block_tokens for r in reqs} == {16}
    r = reqs[5]
    assert r.chat == T.Chat(chat_id=5, parent_chat_id=3, turn=3, type="text")
    assert r.timestamp == 7250.0 and r.input_length == 150 and r.hash_ids[:2] == S
    assert r.line == 6
    assert T.check_trace(qwen) == {"requests": 8, "prompt_tokens": 766,
                                   "trace_blocks": sum(len(x["hash_ids"]) for x in LINES),
                                   "block_tokens": 16, "block_sizes": [16, 32, 64, 128, 256, 512],
                                   "chats": True}


def test_the_files_name_gives_its_block(tmp_path):
    lines = [req(0, -1, 0, 64, [1, 2]), req(1, 0, 1, 64, [1, 2], turn=2)]   # two 32-token ids
    p = write_bailian(tmp_path / "qwen_x_blksz_32.jsonl", lines)
    assert [r.block_tokens for r in T.read_trace(p)] == [32, 32]
    assert T.allowed_block_sizes(32) == [32, 64, 128, 256, 512]
    plain = write_bailian(tmp_path / "chats.jsonl", LINES[:1])          # no blksz: the dataset's 16
    assert T.read_trace(plain)[0].block_tokens == 16
    assert T.allowed_block_sizes(512) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]


@pytest.mark.parametrize("bad, where, words", [
    ({"turn": None}, "2:1: missing field 'turn'", "Qwen-Bailian request needs chat_id"),
    ({"hash_ids": [1, 2]}, "2:", "2 hash ids, but input_length 64 needs 4 (one per 16 tokens"),
    ({"parent_chat_id": -2}, "2:", "parent_chat_id: -2 is not allowed"),
    ({"type": ""}, "2:", "type: \"\" is not a request type"),
    ({"timestamp": -1}, "2:", "give seconds since the trace began"),
])
def test_a_bad_bailian_line_is_located(tmp_path, bad, where, words):
    line = dict(LINES[1])
    for k, v in bad.items():
        if v is None:
            del line[k]
        else:
            line[k] = v
    p = write_bailian(tmp_path / "qwen_bad_blksz_16.jsonl", [LINES[0], line])
    with pytest.raises(T.TraceError) as e:
        T.read_trace(p)
    assert f"{p}:{where}" in str(e.value) and words in str(e.value)


def test_one_format_per_file(tmp_path):
    p = tmp_path / "mixed.jsonl"
    mooncake = {"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
    p.write_text(json.dumps(mooncake) + "\n" + json.dumps(LINES[0]) + "\n")
    with pytest.raises(T.TraceError, match=r"mixed.jsonl:2:\d+: chat_id: a Qwen-Bailian field in a Mooncake"):
        T.read_trace(p)


def test_a_finer_block_size_is_refused_located(qwen):
    with pytest.raises(T.TraceError) as e:
        list(T.iter_trace(qwen, block_size=8))
    assert e.value.line == 1 and e.value.field == "hash_ids"
    assert "block size 8 is finer than this trace's 16-token hash blocks" in str(e.value)
    assert e.value.localized("zh").endswith("请用 16, 32, 64, 128, 256, 512 之一")
    with pytest.raises(ValueError, match="finer"):
        replay_sequence(T.read_trace(qwen), block_size=4, pool_blocks=10)
    assert list(T.iter_trace(qwen, block_size=32))          # coarser: fine


@pytest.mark.parametrize("extra", [[], ["--curve"], ["--optimal"]])
@pytest.mark.parametrize("lang, words", [
    ("en", "block size 8 is finer than this trace's 16-token hash blocks"),
    ("zh", "块大小 8 比这个 trace 的 16-token 哈希块更细")])
def test_the_command_refuses_a_finer_block_size(cli, qwen, extra, lang, words):
    out = cli("trace", "capacity", str(qwen), "--block-size", "8", "--pool-blocks", "10", "--lang", lang,
              *extra)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith(f"{qwen}:1:") and words in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_check_says_which_block_sizes_a_trace_allows(cli, qwen):
    out = cli("trace", "check", str(qwen))
    assert out.returncode == 0, out.stderr
    assert "8 requests, 766 prompt tokens" in out.stdout
    assert "blocks of 16 tokens; block sizes it allows: 16, 32, 64, 128, 256, 512" in out.stdout
    zh = cli("trace", "check", str(qwen), "--lang", "zh")
    assert "16-token 块；允许的块大小：16, 32, 64, 128, 256, 512" in zh.stdout


@pytest.mark.parametrize("bs", [16, 32, 64])
@pytest.mark.parametrize("order", ["split", "append"])
def test_the_curve_equals_the_replay_at_every_size(qwen, bs, order):
    t = T.read_trace(qwen)
    curve = curve_sequence(t, block_size=bs, free_order=order)
    for n in range(1, sum(-(-r.input_length // bs) for r in t) + 2):
        assert curve.point(n) == replay_sequence(t, block_size=bs, pool_blocks=n, free_order=order), n
    assert curve.ceiling() == ceiling(t, block_size=bs)


def test_hits_by_hand_at_block_size_16(qwen):
    t = T.read_trace(qwen)
    # An infinite pool, blocks of 16, hit limit L = (n-1)//16: chat 1 hits the system prompt (2);
    # its retry 3 of its 4 blocks (64 tokens: L = 3); chat 0's turn 2 its turn 1's 4 full blocks;
    # chat 1's turn 2 the retry's 4; chat 0's turn 3 its turn 2's 6 full blocks; chat 1's turn 3
    # its turn 2's 7 (120 tokens: 7 full blocks); the image request nothing.
    hits = [0, 32, 48, 64, 64, 96, 0, 112]
    assert ceiling(t, block_size=16) == {"queries": 766, "hits": sum(hits)}
    assert optimal_hits(t, block_size=16, pool_blocks=[1000])[1000] == sum(hits)


@pytest.mark.parametrize("bs", [16, 32])
def test_the_fast_path_equals_vllms_hashes_of_the_derived_tokens(qwen, bs):
    t = T.read_trace(qwen)
    assert T.prompt_token_ids(t[0].input_length, t[0].hash_ids, 16)[:18] == \
        list(range(16, 32)) + [32, 33]
    for n in (3, 6, 9, 14):
        for order in ("split", "append"):
            assert replay_sequence(t, block_size=bs, pool_blocks=n, free_order=order) == \
                replay_sequence(t, block_size=bs, pool_blocks=n, free_order=order, exact_tokens=True)


def test_a_block_size_in_the_name_must_divide_512(tmp_path):
    p = write_bailian(tmp_path / "qwen_x_blksz_48.jsonl", LINES[:1])
    with pytest.raises(T.TraceError, match="blksz_48, but a Qwen-Bailian hash block must be a size that "
                                           "divides 512"):
        T.read_trace(p)


@pytest.mark.parametrize("pool", [3, 6, 12])
def test_a_player_window_of_a_bailian_trace_hits_what_the_replay_at_512_hits(qwen, tmp_path, pool):
    # The player scales 512-token blocks; a Bailian window's 16-token ids are taken 32 at a time.
    from blockviz.scenario import Scenario
    from blockviz.sim.runner import run
    from blockviz.teach.tracegen import window_scenario
    from blockviz.teach.workload import loaded
    long = [req(k, -1, k, 640, [100 + j for j in range(40)]) if k % 2 else
            req(k, -1, k, 1100, [200 + j for j in range(69)]) for k in range(6)]
    t = T.read_trace(write_bailian(tmp_path / "qwen_long_blksz_16.jsonl", long + LINES))
    w = window_scenario(t[:10], pool_blocks=pool, block_size=512)
    kept = [r for r in t[:10] if r.line in w.lines]
    engine, _ = run(loaded(Scenario.model_validate(w.scenario)))
    want = replay_sequence(kept, block_size=512, pool_blocks=pool)
    assert engine.manager.prefix_cache_stats.hits * 128 == want["hits"] and want["hits"] > 0


def test_an_upload_is_read_under_its_own_name_by_every_pass(tmp_path):
    """The capacity page keeps an upload as trace.jsonl and its name apart; the name tells a
    Bailian trace's hash block (blksz_32 here). Every pass reads it under that name: the curve, the
    MIN pass and the per-pool sweep (timed mode) give what the same file under its name gives."""
    from blockviz.sim.curve import curve_report
    from blockviz.sim.sweep import sweep
    lines = [req(k, -1, 0.5 * k, 64 + 32 * (k % 3), [1, 2] + list(range(10 * k, 10 * k + k % 3)))
             for k in range(6)]
    named = write_bailian(tmp_path / "qwen_x_blksz_32.jsonl", lines)
    kept = tmp_path / "trace.jsonl"
    kept.write_bytes(named.read_bytes())
    name = named.name
    want = curve_report(str(named), block_size=32, requests=6, optimal=True)
    got = curve_report(str(kept), name=name, block_size=32, requests=6, optimal=True)
    assert [r["points"] for r in got["reports"]] == [r["points"] for r in want["reports"]]
    assert all("optimal_hits" in p for r in got["reports"] for p in r["points"])
    for mode in ("sequence", "timed"):
        want = sweep([str(named)], block_size=32, pool_blocks=[3, 8], mode=mode).reports
        got = sweep([str(kept)], name=name, block_size=32, pool_blocks=[3, 8], mode=mode).reports
        assert [r["points"] for r in got] == [r["points"] for r in want]
