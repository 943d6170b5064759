"""A hybrid model's KV-cache groups on the board, in Chromium at 1280×800 (issue 29): every step
of every hybrid lesson shows each request's table per group with its badge, the window's null
entries marked as the null block; hovering a group's entry lights that one card (the null entry:
the null block); a shot of every hybrid lesson in English and 中文."""
from __future__ import annotations

from pathlib import Path

import pytest

from .test_browser import BOARD, READY

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
HYBRID = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml")
                if "kv_cache_groups" in p.read_text(encoding="utf-8"))

# In the page: show each step (a click on its timeline mark) and read, per request, its group rows
# (group, badge words, entries) and how many of its entries are drawn as the null block.
READ = """(root) => {
  const out = {};
  for (const m of root.querySelectorAll('.bvb-mk')) {
    m.click();
    const k = m.dataset.step, reqs = {};
    for (const r of root.querySelectorAll('[data-bv="requests"] [data-request]')) {
      const rows = [...r.querySelectorAll('[data-bv-group-table]')].map((g) => [
        Number(g.getAttribute('data-bv-group-table')), g.querySelector('.bv-grp').textContent.trim(),
        [...g.querySelectorAll('[data-block]')].map((e) => Number(e.getAttribute('data-block')))]);
      const nulls = [...r.querySelectorAll('[data-block="0"]')].filter((e) =>
        e.matches('.bv-b-null') && getComputedStyle(e).backgroundImage.includes('gradient')).length;
      reqs[r.getAttribute('data-request')] = { rows, nulls };
    }
    out[k] = reqs;
  }
  return out;
}"""


def _entries(step) -> tuple[int, int]:
    """(null entries, all entries) of the step's group tables: the shot goes where they are most."""
    ids = [b for r in step.requests.values() if r.block_tables for t in r.block_tables.tables for b in t]
    return ids.count(0), len(ids)


def _names(groups, lang: str) -> list[str]:
    from blockviz.render.groups import group_name
    return [f"g{g} {group_name(s, lang)}" for g, s in enumerate(groups)]


@pytest.fixture(scope="module")
def lessons(tmp_path_factory):
    """Each hybrid lesson's offline page and timeline: {id: (path, timeline)}."""
    from blockviz.export import export_html
    from blockviz.scenario import load
    from blockviz.sim.runner import run
    where = tmp_path_factory.mktemp("hybrid")
    out = {}
    for sid in HYBRID:
        loaded = load(ROOT / "scenarios" / f"{sid}.yaml")
        _, tl = run(loaded, payloads=False)
        path = where / f"{sid}.html"
        path.write_text(export_html(tl, title=loaded.scenario.title.get("en"), lang="en",
                                    titles={lg: loaded.scenario.title.get(lg) for lg in ("en", "zh")},
                                    file=f"{sid}.yaml"), encoding="utf-8")
        out[sid] = (path, tl)
    return out


def _open(browser, path: Path, step: int = 0):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(path.as_uri() + f"#step={step}&still")
    page.wait_for_selector(READY, timeout=20_000)
    return page


def test_the_hybrid_lessons_exist():
    assert len(HYBRID) >= 7


@pytest.mark.parametrize("sid", HYBRID)
def test_every_step_draws_each_requests_table_per_group(browser, lessons, screenshots, sid):
    path, tl = lessons[sid]
    groups = tl.kv_cache_groups
    page = _open(browser, path)
    for lang in ("en", "zh"):
        got = page.locator(BOARD).evaluate(READ)
        assert len(got) == len(tl)
        for k in range(len(tl)):
            s = tl.step(k)
            for rid, r in s.requests.items():
                if rid not in got[str(k)]:
                    continue                          # (a long list is cut: not every row is drawn)
                drawn = got[str(k)][rid]
                bt = r.block_tables
                if bt is None or not any(bt.tables):
                    assert drawn["rows"] == [], (lang, k, rid)
                    continue
                assert [g for g, _, _ in drawn["rows"]] == list(range(len(groups))), (lang, k, rid)
                assert [w for _, w, _ in drawn["rows"]] == _names(groups, lang), (lang, k, rid)
                assert [ids for _, _, ids in drawn["rows"]] == [list(t) for t in bt.tables], (lang, k, rid)
                assert drawn["nulls"] == sum(b == 0 for t in bt.tables for b in t), (lang, k, rid)
        # shots for a person: the step where the groups differ most (the most null entries), and
        # the last step where a request still holds blocks
        best = max(range(len(tl)), key=lambda i: _entries(tl.step(i)))
        last = max(i for i in range(len(tl)) if _entries(tl.step(i))[1])
        for k in sorted({best, last}):
            page.locator(f'{BOARD} .bvb-mk[data-step="{k}"]').click()
            page.wait_for_timeout(300)
            page.screenshot(path=str(screenshots / f"groups-{sid}-step{k}-{lang}-1280x800.png"))
        page.locator(f'{BOARD} [data-act="lang"]').click()
    page.close()


def test_hovering_a_groups_entry_lights_that_card(browser, lessons):
    path, tl = lessons["sliding-window"]
    k = 4                                 # A holds a table in each group; the window's slot 0 is null
    a = tl.step(k).requests["A"].block_tables.tables
    assert a[1][0] == 0 and a[1][-1] not in a[0]
    page = _open(browser, path, k)
    req = page.locator(f'{BOARD} [data-bv="requests"] [data-request="A"]')
    lit = page.locator(f'{BOARD} [data-bv="blocks"] .bv-card.bv-lit')
    for g, table in enumerate(a):
        row = req.locator(f'[data-bv-group-table="{g}"]')
        assert row.locator(".bv-grp").count() == 1
        for b in {*table}:
            row.locator(f'[data-block="{b}"]').first.hover()
            assert lit.count() == 1, (g, b)                      # that card, and no other
            assert lit.get_attribute("data-block") == str(b)
            page.mouse.move(2, 2)
    # the group's badge lights every block of its row (the null block among them)
    req.locator('[data-bv-group-table="1"] .bv-grp').hover()
    ids = lit.evaluate_all("(es) => es.map((e) => e.dataset.block)")
    assert sorted(int(x) for x in ids) == sorted({*a[1]})
    # a card of group 1 lights its entry in group 1's row and none in group 0's
    page.mouse.move(2, 2)
    page.locator(f'{BOARD} [data-bv="blocks"] .bv-card[data-block="{a[1][-1]}"]').hover()
    assert req.locator(f'[data-bv-group-table="1"] .bv-lit[data-block="{a[1][-1]}"]').count() == 1
    assert req.locator('[data-bv-group-table="0"] .bv-lit').count() == 0
    card = page.locator(f'{BOARD} [data-bv="blocks"] .bv-card[data-block="{a[1][-1]}"] .bv-grp')
    assert card.text_content().strip() == "g1 window 8"
    page.close()


def test_a_dense_cell_says_its_group_on_hover(browser, tmp_path):
    from blockviz.export import export_html
    from blockviz.scenario.load import load_text
    from blockviz.sim.runner import run
    text = ("id: big\ntitle: {en: big, zh: big}\nconfig:\n  num_blocks: 64\n  block_size: 2\n"
            "  kv_cache_groups:\n    - {type: full_attention}\n"
            "    - {type: sliding_window, sliding_window: 2}\n"
            "steps:\n  - arrive: {id: A, prompt: [{tokens: [1, 2, 3, 4, 5, 6, 7]}], max_tokens: 3}\n"
            "  - step: 1\n")
    _, tl = run(load_text(text, "big.yaml"), payloads=False)
    from blockviz.render.groups import block_groups
    served = block_groups(tl.step(1))
    b1 = next(b for b, g in served.items() if g == 1)
    path = tmp_path / "big.html"
    path.write_text(export_html(tl, title="big", lang="en", titles={"en": "big", "zh": "big"},
                                file="big.yaml"), encoding="utf-8")
    page = _open(browser, path, 1)
    cv = page.locator(f'{BOARD} .bvb-cv')
    cols = int(cv.get_attribute("data-cols"))
    box = cv.bounding_box()
    cell = (box["width"] - 34) / cols
    page.mouse.move(box["x"] + 34 + (b1 % cols + 0.5) * cell, box["y"] + 14 + (b1 // cols + 0.5) * cell)
    assert page.locator(f'{BOARD} .bvb-tip').text_content() == f"block {b1} · g1 sliding window 2"
    page.close()
