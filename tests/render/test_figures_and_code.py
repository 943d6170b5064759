"""Cards up to the card threshold, pseudocode lines per op, payload and metrics figures, escaping
of everything a scenario author wrote, and one step at 4,096 blocks bounded by the screen."""
from __future__ import annotations

import pytest

from blockviz.core.ops import (
    AllocFailed,
    Cache,
    Evict,
    Free,
    FreeHead,
    FreeTail,
    Lookup,
    Popleft,
    Preempt,
    Reset,
    Touch,
    Verify,
)
from blockviz.i18n import event_label
from blockviz.render import blocks as rblocks
from blockviz.render.external import external_html
from blockviz.render.hash_table import hash_table_html
from blockviz.render.metrics import metrics_figure, metrics_series
from blockviz.render.narration import did_html, note_html, step_header_html
from blockviz.render.payload import payload_figure, verify_html
from blockviz.render.pseudocode import PSEUDOCODE, op_line, pseudocode_html
from blockviz.render.queue import queue_html
from blockviz.render.requests import requests_html
from blockviz.teach.labels import HashLabels
from blockviz.teach.narrate import narrate_ops


# -- cards or the dense view -------------------------------------------------------------------
def test_one_step_at_4096_blocks_builds_panels_bounded_by_the_screen_not_the_pool(big):
    """The panels of one step of a 4,096-block pool are cut to what a screen shows: the free queue
    and the hash table hold thousands of entries, their HTML stays a few chips and rows long."""
    labels = HashLabels.for_timeline(big)
    for i in (0, len(big) - 3, len(big) - 2, len(big) - 1):
        v = big.step(i)
        c = v.changes
        queue = queue_html(v, labels=labels, to_head=c.to_head, to_tail=c.to_tail)
        table = hash_table_html(v.hash_table, labels=labels, state=v, added=c.hashes_added,
                                removed=c.hashes_removed)
        assert len(v.free_queue) > 800 and "more" in queue
        assert len(queue) < 16_000                       # every chip of 800+ blocks: > 40,000
        assert len(queue) < 20 * len(v.free_queue)
        if len(v.hash_table) > 1_000:
            assert len(table) < 20 * len(v.hash_table)   # one row a hash would be ~60 characters
        requests_html(v, fresh=c.fresh, changed=c.requests)
        did_html(narrate_ops(v.ops, "en", labels, big.vocab, big.block_size), "en")


# -- pseudocode --------------------------------------------------------------------------------
def test_every_op_of_the_walkthrough_maps_to_a_real_line(six):
    kinds = set()
    for i in range(len(six)):
        for op in six.step_ops(i):
            fn, line = op_line(op)
            assert 0 <= line < len(PSEUDOCODE[fn]), op
            kinds.add(op.kind)
    assert {"popleft", "evict", "touch", "cache", "free", "free_head", "free_tail"} <= kinds


@pytest.mark.parametrize("op, order, text", [
    (Popleft((1, 2)), "split", "free_block_queue.popleft_n(n)"),
    (Evict(2, b"h"), "split", "_maybe_evict_cached_block(block)"),
    (Touch((1, 2), (1,)), "split", "free_block_queue.remove(block)"),
    (Touch((1, 2), ()), "split", "block.ref_cnt += 1"),
    (Cache("A", (1,), (b"h",), 0, None), "split", "cached_block_hash_to_block.insert"),
    (Free((3, 2, 1)), "split", "block.ref_cnt -= 1"),
    (FreeHead((3,)), "split", "free_block_queue.prepend_n(to_head)"),
    (FreeTail((2, 1)), "split", "free_block_queue.append_n(to_tail)"),
    (FreeTail((3, 2, 1)), "append", "free_block_queue.append_n(freed)"),
    (Reset(True), "split", "cached_block_hash_to_block = {}"),
    (Reset(False), "split", "return False"),
    (Lookup("A", (), 9, 2), "split", "if block is None: break"),
    (Lookup("A", (1,), 9, 2), "split", "hits.append(block)"),
    (AllocFailed("A", 3, 1), "split", "return None"),
    (Preempt("A"), "split", "waiting.prepend_request(request)"),
])
def test_pseudocode_highlights_the_line_the_op_executes(op, order, text):
    html = pseudocode_html(op, free_order=order)
    assert html.count('class="bv-cur"') == 1
    cur = html[html.index('class="bv-cur"'):]
    cur = cur[:cur.index("</div>")]
    assert text in cur.replace("&gt;", ">").replace("&#x27;", "'")


def test_free_blocks_pseudocode_differs_by_vllm_version():
    split = pseudocode_html(Free((1,)), free_order="split")
    classic = pseudocode_html(Free((1,)), free_order="append")
    assert "prepend_n" in split and "vLLM &gt;= 0.24" in split
    assert "prepend_n" not in classic and "vLLM &lt;= 0.23" in classic


# -- payload, verify, metrics --------------------------------------------------------------------
def test_payload_heatmap_is_the_real_tensor_slice(six):
    summary = six.payload(1, 1)
    assert summary is not None
    fig = payload_figure(summary, layer=1, head=0, kv=1, tokens=six.step(1).block_tokens[1])
    z = fig.data[0].z
    want = summary.data[1, 1, :, 0, :]
    assert len(z) == want.shape[0] and len(z[0]) == want.shape[1]
    assert all(abs(z[r][c] - float(want[r, c])) < 1e-6 for r in range(len(z)) for c in range(len(z[0])))
    assert fig.data[0].y[0] == "0: 1"      # slot 0 holds token 1


def test_verify_check_of_a_hit_step(six):
    html = verify_html(six.step_ops(2), "en")
    assert "✓" in html and "cache hit = recomputation" in html and "8 cached + 2 new tokens" in html
    assert "No cache hit was checked" in verify_html(six.step_ops(1), "en")
    bad = verify_html((Verify("X", 8, 2, 0.5, "cuda"),), "zh", tolerance=1e-5)
    assert "✗" in bad and "不一致" in bad


def test_metrics_follow_the_timeline_and_mark_the_current_step(six):
    series = metrics_series([six.step_stats(i) for i in range(len(six))])
    assert len(series) == len(six)
    assert series.usage[0] == 0 and series.usage[2] == pytest.approx(100 * 4 / 6, abs=0.01)
    assert series.hit_rate[0] is None and series.hit_rate[2] == pytest.approx(100 * 8 / 20)
    assert series.evictions[-1] == 2
    fig = metrics_figure(series, 3, "en")
    assert [s.x0 for s in fig.layout.shapes] == [3]
    assert len(fig.data) == 3                                  # no external tier here
    ext = metrics_series([six.step_stats(i) for i in range(len(six))], has_external=True)
    assert len(metrics_figure(ext, 0, "zh").data) == 4


PRESSURE = """
id: pressure
title: {en: p, zh: p}
config: {num_blocks: 3, block_size: 4, model: null}
steps:
  - arrive: {id: A, prompt: [1, 2, 3, 4], admit: false}
  - arrive: {id: B, prompt: [11, 12, 13, 14]}
  - step
  - finish: A
  - step
"""


def test_metrics_keep_resumed_lookups_out_of_vllms_hit_rate():
    """Both decode into a second block: A takes the last free one, B (last) is preempted; after
    A finishes B comes back and hits its own first block (4 of 5 tokens). vLLM's rate stays at
    0 / 8; the resumed re-lookup, 4 / 5, is its own line."""
    from blockviz.scenario.load import load_text
    from blockviz.sim.runner import run
    _, tl = run(load_text(PRESSURE))
    series = metrics_series([tl.step_stats(i) for i in range(len(tl))])
    assert series.hit_rate[-1] == 0.0 and series.resumed_hit_rate[-1] == pytest.approx(80.0)
    assert series.resumed_hit_rate[:4] == (None,) * 4
    fig = metrics_figure(series, 5, "zh")
    assert [d.name for d in fig.data][1:3] == ["命中率（vLLM 计数器：hits / queries） %",
                                               "恢复时的重新查找 %"]


def test_external_tier_lists_hashes_least_recently_used_first(six_labels):
    h = next(iter(six_labels.label))
    html = external_html(((h, (1, 2, 3, 4)), (b"other", (5,))), labels=six_labels, on_gpu={h})
    assert html.index("H1") < html.index("6f7468")            # unknown hash: short hex
    assert "✓GPU" in html
    assert external_html(None, labels=six_labels) == ""


# -- escaping: scenario text is data, never markup -----------------------------------------------
def _every_panel(tl, lang):
    labels = HashLabels.for_timeline(tl)
    out = []
    for i in range(len(tl)):
        for frame in [None] + list(range(len(tl.step_ops(i)))):
            v = s = tl.step(i, frame)
            out.append(step_header_html(i, len(tl) - 1, event_label(s.event, lang), lang, title=tl_title))
            out.append(note_html(s.note.get(lang) if s.note else None, lang, error="<script>e</script>")
                       + did_html(narrate_ops(s.ops, lang, labels, tl.vocab, tl.block_size), lang))
            out.append(rblocks.blocks_html(v, labels=labels, vocab=tl.vocab, lang=lang,
                                           block_size=tl.block_size, changed=v.changes.blocks))
            out.append(queue_html(v, labels=labels, lang=lang))
            out.append(hash_table_html(v.hash_table, labels=labels, state=v, lang=lang))
            out.append(requests_html(s, lang=lang))
            if v.op is not None:
                out.append(pseudocode_html(v.op))
    return "\n".join(out)


tl_title = "<script>alert('title')</script>"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_hostile_scenario_text_is_escaped_everywhere(hostile, lang):
    html = _every_panel(hostile, lang)
    lowered = html.lower()
    assert "<script" not in lowered and "<img" not in lowered
    # the author's <b>/<i> survive only as text (our own markup uses <b> and <i> too)
    assert "<b>r</b>" not in lowered and "<i>cp</i>" not in lowered and "<b>bold" not in lowered
    assert "&lt;script&gt;" in html                 # shown as text, not dropped
    assert "&lt;b&gt;R&lt;/b&gt;" in html           # the request id
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html   # a word of the text prompt


def test_hostile_external_and_payload_captions_escape(hostile):
    labels = HashLabels.for_timeline(hostile)
    html = external_html(((b"x", (1,)),), labels=labels, lang="en")
    assert "<script" not in html
    assert hostile.payload(1, 1) is None            # model: null keeps no tensors
