"""Error messages in 中文: every kind of malformed input the loader, the schema, the engine and the
scheduler refuse comes out in Chinese (no English sentence left), with its location unchanged;
English stays exactly as it was."""
from __future__ import annotations

import re

import pytest

from blockviz.i18n.errors import ErrorMessage, error_text, knows, localize_error
from blockviz.scenario import ScenarioError, load_bytes, load_text
from blockviz.sim.runner import run

H = "id: t\ntitle: {en: T}\n"
C = "config: {num_blocks: 6, block_size: 4, model: null}\n"
S = H + C + "steps:\n"
A = "  - arrive: {id: A, prompt: [1, 2, 3]}\n"


def cfg(extra: str) -> str:
    return H + "config: {num_blocks: 6, block_size: 4, model: null, " + extra + "}\nsteps: [admit]\n"


# Each text is refused when loaded or stops its run; every one must read in Chinese.
CASES = {
    # pydantic: the value has the wrong type, range or size
    "not an int": cfg("num_blocks: x").replace("num_blocks: 6, ", ""),
    "below min": cfg("num_blocks: 0").replace("num_blocks: 6, ", ""),
    "above max": cfg("block_size: 99999").replace("block_size: 4, ", ""),
    "fraction": cfg("num_blocks: 1.5").replace("num_blocks: 6, ", ""),
    "not a choice": cfg("free_order: bogus"),
    "not a bool": cfg("enable_caching: maybe"),
    "not a list": H + C + "steps: 5\n",
    "not a mapping": "id: t\ntitle: 3\n" + C + "steps: [admit]\n",
    "not a string": "id: [1]\ntitle: {en: T}\n" + C + "steps: [admit]\n",
    "too long": "id: " + "x" * 300 + "\ntitle: {en: T}\n" + C + "steps: [admit]\n",
    "too short": S + "  - arrive: {id: A, prompt: [{text: ''}]}\n",
    "unknown field": H + C + "bogus: 1\nsteps: [admit]\n",
    "missing field": "id: t\n" + C + "steps: [admit]\n",
    "no language": S + "  - note: {}\n",
    "KV store too big": H + "config: {num_blocks: 65536, block_size: 1024, model: {num_layers: 8, "
                        "num_kv_heads: 16, head_dim: 128}}\nsteps: [admit]\n",
    # events
    "unknown event": S + "  - fly: 1\n",
    "two events": S + "  - {finish: A, preempt: A}\n",
    "empty step": S + "  - {}\n",
    "a number as a step": S + "  - 5\n",
    "used before arrival": S + "  - finish: Z\n",
    "abort before arrival": S + "  - abort: Z\n",
    "abort bare": S + "  - abort\n",
    "reset_connector with a connector": H + "config: {num_blocks: 6, block_size: 4, model: null, "
                                        "connector: {num_blocks: 4}}\nsteps:\n"
                                        "  - reset_prefix_cache: {reset_connector: true}\n",
    "a forced reset while a load holds blocks": H + "config: {num_blocks: 6, block_size: 4, "
        "model: null, connector: {num_blocks: 8, load_delay: 3}}\nsteps:\n"
        "  - arrive: {id: A, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9], max_tokens: 1}\n"
        "  - step: 2\n  - arrive: {id: B, prompt: [{random: 20}], max_tokens: 1}\n"
        "  - step: 2\n  - arrive: {id: C, prompt: [1, 2, 3, 4, 5, 6, 7, 8, 10], max_tokens: 1}\n"
        "  - reset_prefix_cache: {reset_running_requests: true}\n",
    "watermark out of range": cfg("scheduler: {watermark: 1.5}"),
    "unknown policy": cfg("scheduler: {policy: lifo}"),
    "duplicate request": S + A + A,
    "admit false": S + "  - admit: false\n",
    "unknown checkpoint": S + "  - rewind: nowhere\n",
    "multimodal overlap": S + "  - arrive: {id: A, prompt: [1, 2, 3, 4], mm: [{id: x, offset: 0, "
                          "length: 2}, {id: y, offset: 1, length: 2}]}\n",
    # YAML
    "unclosed list": H + C + "steps: [1, 2\n",
    "tab": H + C + "steps:\n\t- admit\n",
    "colon in a value": H + C + "steps:\n  - note: a: b\n",
    "bad indent": H + C + "steps:\n  - admit\n - admit\n",
    "undefined alias": H + C + "steps: [*nothing]\n",
    "python tag": H + C + "steps: !!python/object/apply:os.system [ls]\n",
    "duplicate key": H + "id: u\n" + C + "steps: [admit]\n",
    "empty file": "",
    "a list, not a scenario": "- a\n",
    # hostile input (issue 13)
    "nested too deep": H + C + "steps: " + "[" * 100 + "]" * 100 + "\n",
    "alias expansion": H + C + "a: &a [" + "x" * 500_000 + "]\n" + "b: [" + "*a, " * 9 + "*a]\n",
    "core tag on a bad value": S + "  - step: !!int abc\n",
    "a number too long": S + "  - step: " + "9" * 5_000 + "\n",
    "a number YAML cannot convert": S + "  - step: 0x_\n",
    "control character": S + "  - note: a\x1b[31m\n",
    "bare finish": S + A + "  - finish\n",
    "bare arrive": S + "  - arrive\n",
    "bare rewind": S + "  - rewind:\n",
    "too many words": S + "  - arrive: {id: A, prompt: \"" + " ".join(f"w{i}" for i in range(65_000))
                      + "\"}\n",
    "same_as chain": S + "  - arrive: {id: A0, prompt: [1, 2], admit: false}\n" + "".join(
        f"  - arrive: {{id: A{i}, prompt: [{{same_as: A{i - 1}}}, {{same_as: A{i - 1}}}], "
        f"admit: false}}\n" for i in range(1, 25)),
    "pasted text too big": "# " + "x" * (1 << 20),
    "half a surrogate pair": S + "  - note: a\ud800\n",
    "duplicate anchor": H + C + "a: &x 1\nb: &x 2\nsteps: [admit]\n",
    # the run stops (engine, scheduler, prompt parts)
    "finished twice": S + A + "  - finish: A\n  - finish: A\n",
    "restart while live": S + A + "  - admit\n  - restart\n",
    "same_as too long": S + A + "  - arrive: {id: B, prompt: [{same_as: A, first: 9}]}\n",
    # config.scheduler: what vLLM's SchedulerConfig refuses, and what its input processor refuses
    "unchunked budget under max_model_len": cfg("scheduler: {enable_chunked_prefill: false, "
                                                "max_num_batched_tokens: 64, max_num_seqs: 4, "
                                                "max_model_len: 128}"),
    "budget under max_num_seqs": cfg("scheduler: {max_num_batched_tokens: 16}"),
    "threshold over max_model_len": cfg("scheduler: {long_prefill_token_threshold: 64, "
                                        "max_model_len: 32}"),
    "prompt fills max_model_len": H + "config: {num_blocks: 6, block_size: 4, model: null, "
                                  "scheduler: {max_model_len: 3}}\nsteps:\n" + A,
    # config.kv_cache_groups and prefix_cache_retention_interval: what vLLM refuses (hybrid)
    "no KV-cache group": cfg("kv_cache_groups: []"),
    "unknown group type": cfg("kv_cache_groups: [{type: mamba}]"),
    "sliding window below 1": cfg("kv_cache_groups: [{type: sliding_window, sliding_window: 0}]"),
    "a window without its size": cfg("kv_cache_groups: [{type: sliding_window}]"),
    "a group with another's field": cfg("kv_cache_groups: [{type: full_attention, "
                                        "attention_chunk_size: 4}]"),
    "retention not a multiple": cfg("kv_cache_groups: [{type: sliding_window, sliding_window: 8}], "
                                    "prefix_cache_retention_interval: 6"),
    "retention without a window": cfg("kv_cache_groups: [{type: full_attention}], "
                                      "prefix_cache_retention_interval: 8"),
    "retention without groups": cfg("prefix_cache_retention_interval: 4"),
    "negative retention": cfg("kv_cache_groups: [{type: sliding_window, sliding_window: 8}], "
                              "prefix_cache_retention_interval: -4"),
    "a layer per group": H + "config: {num_blocks: 6, block_size: 4, model: {num_layers: 3}, "
                         "kv_cache_groups: [{type: full_attention}]}\nsteps: [admit]\n",
    "connector with groups": cfg("connector: {num_blocks: 4}, "
                                 "kv_cache_groups: [{type: full_attention}]"),
}


def refusal(text: str) -> ScenarioError:
    try:
        loaded = load_text(text, "f.yaml")
    except ScenarioError as e:
        return e
    _, timeline = run(loaded)
    assert timeline.error is not None, "this text should be refused or stop its run"
    return timeline.error


CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("name", list(CASES))
def test_every_refusal_reads_in_chinese(name):
    err = refusal(CASES[name])
    assert knows(err.message), f"no Chinese for: {err.message}"
    en, zh = err.localized("en"), err.localized("zh")
    assert en == str(err) and err.message in en          # English unchanged
    assert CJK.search(zh) and err.message not in zh
    prefix = en[:len(en) - len(" ".join(err.message.split()))]
    assert prefix.startswith("f.yaml") and zh.startswith(prefix)   # same file:line:col: path:


@pytest.mark.parametrize("raw", [b"id: \x00", b"id: \xff\xfe", b"#" * 1_048_577, b"id: \x07\n"])
def test_unreadable_files_read_in_chinese(raw):
    with pytest.raises(ScenarioError) as e:
        load_bytes(raw, "f.yaml")
    assert knows(e.value.message), e.value.message


def test_translations_keep_names_and_numbers():
    assert localize_error("request 'Z' is used before it arrives", "zh") == \
        "请求 'Z' 在到达（arrive）之前就被使用了"
    assert localize_error("step 3 (finish): request 'A' has already finished", "zh") == \
        "第 3 步（finish）：请求 'A' 已经结束了"
    assert localize_error("Input should be 'split' or 'append'", "zh") == \
        "这里应当是 'split' 或 'append' 之一"
    assert localize_error("the file is 1,048,577 bytes; the limit is 1,048,576", "zh") == \
        "文件有 1,048,577 字节，上限是 1,048,576 字节"


def test_unknown_messages_stay_as_they_are_and_english_is_untouched():
    assert localize_error("something new happened", "zh") == "something new happened"
    assert not knows("something new happened")
    assert not knows("YAML syntax error: a problem PyYAML words in a new way")  # half-translated
    msg = "request 'Z' is used before it arrives"
    assert localize_error(msg, "en") == msg
    assert error_text(ErrorMessage(msg), "zh") == localize_error(msg, "zh")
    assert error_text(ValueError(msg), "en") == msg


def test_cli_play_in_chinese_says_the_error_in_chinese(tmp_path, cli):
    f = tmp_path / "bad.yaml"
    f.write_text(S + A + "  - finish: A\n  - finish: A\n")
    zh = cli("play", str(f), "--lang", "zh")
    en = cli("play", str(f))
    assert zh.returncode == en.returncode == 2
    assert zh.stderr.strip() == f"{f}:7:13: steps[2].finish: 第 3 步（finish）：请求 'A' 已经结束了"
    assert en.stderr.strip() == f"{f}:7:13: steps[2].finish: step 3 (finish): request 'A' has " \
                                "already finished"
    assert "运行在此处停止" in zh.stdout


@pytest.mark.parametrize("message", [
    "step 3 (arrive): ran out of memory", "step 3 (arrive): ran out of memory while writing its JSON",
    "ran out of memory while writing its JSON", "cannot read '0b_' as an integer",
    "cannot read 'x' as true or false", "`note` needs an argument, e.g. `- note: {en: ..., zh: ...}`",
])
def test_messages_only_a_failing_machine_or_a_rare_value_gives_read_in_chinese(message):
    assert knows(message), localize_error(message, "zh")
