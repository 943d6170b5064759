"""Benchmark ``board``: the player's board in a real browser (Debian chromium, Playwright), against a
real server (``blockviz app``), at 6 blocks (six-blocks) and at 4,096 blocks (a generated
shared-prefix workload whose pool is full and evicting at the step measured).

  * **first board**: from the page's load event (Streamlit's page and scripts loaded) to the
    board's first painted step, in a fresh browser context on a warm server — split in two at the
    moment the board's data reaches the board (the script run, Streamlit's component code and the
    data's transfer; then the board's draw and its fit to the screen); and the server's CPU for
    that tab's script run, which shows the lesson's board data is built once per server, not per
    session (a built-in run's board JSON is in ``st.cache_resource``: blockviz/ui/cache.py);
  * **key → paint**: an arrow key dispatched in the page to the frame after the new step painted,
    runs of five → then five ←, a short pause between keys (a rerun, had there been one, would land
    in it); median and worst;
  * **server, N sessions stepping**: N sessions of the player on six-blocks step at once for a
    few seconds; the server process's CPU time over that wall time, in cores. Three are real
    Chromium tabs, each pressing → or ← every 100 ms, whose websocket frames are counted; the
    others are simulated tabs (bench/wsclient.py: a tab's own websocket traffic, no browser — 60
    Chromium tabs do not open on two cores): each opened the page (one script run, as a tab
    does) and then sends what a stepping tab sends, which is nothing — the real tabs' frame count
    in the same run checks that, and the budget counts as missed if a step reached the server;
  * **the same sessions with self-check on** (reported, no budget): a panel below follows the
    step, so each step is one rerun; every simulated session steps once every 2 s (a learner
    reading the question), and the server's cores and the reruns per second are reported.

With ``BENCH_BOARD_AGAINST=DIR`` (a checkout of another commit, e.g. ``git archive REV | tar -x -C
DIR``), the 4,096-block → paint is also measured side by side against that tree's server in the same
run, page loads taking turns (old, new, old, new ...), and the ratio new / old reported.

Budgets (issues 14 and 28): → to painted step under 50 ms median and 150 ms worst at 6 and 4,096
blocks; a lesson's first board within 1.0 s of the load event; the 中文/English toggle to the painted
board under 100 ms; 60 sessions stepping at once keep the server under one core.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from .timing import median, table

NAME = "board"
ROOT = Path(__file__).resolve().parent.parent
BIG = {"kind": "shared_prefix", "num_blocks": 4_096, "block_size": 16, "seed": 1, "num_events": 400,
       "max_live": 32, "prefix_blocks": 96, "new_tokens": 1_024, "num_prefixes": 8}
BIG_ID = "bench-4096"
CASES = [("six-blocks", 0), (BIG_ID, 200)]
BUDGET_MEDIAN_MS, BUDGET_WORST_MS, BUDGET_FIRST_S, BUDGET_CORES = 50.0, 150.0, 1.0, 1.0
BUDGET_LANG_MS = 100.0         # the language toggle redraws the board (issue 28)
SESSIONS, BROWSER_TABS, SELF_CHECK_PAUSE_S = 60, 3, 2.0
READY = '[data-bv="board"][data-bv-ready="1"]'
# ms from the load event to now, to the board's data arriving and to its first step painted (the
# frame after it was drawn: board.js marks both)
SINCE_LOAD = """() => { const L = performance.getEntriesByType('navigation')[0].loadEventEnd;
  const at = (k) => { const e = performance.getEntriesByName(k);
                      return e.length ? e[0].startTime - L : null; };
  return [performance.now() - L, at('bv-data'), at('bv-painted')]; }"""

KEY_TO_PAINT = """(n) => new Promise(done => {
  const out = [];
  let i = 0;
  function one() {
    const t0 = performance.now();
    const key = Math.floor(i / 5) % 2 ? 'ArrowLeft' : 'ArrowRight';
    document.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true}));
    requestAnimationFrame(() => setTimeout(() => {
      out.push(performance.now() - t0);
      if (++i < n) setTimeout(one, 300); else done(out);
    }, 0));
  }
  one();
})"""

# the board's 中文/English button, clicked n times: from the click to the frame after it painted
LANG_TOGGLE = """(n) => new Promise(done => {
  const host = [...document.querySelectorAll('*')].find(e => e.shadowRoot &&
    e.shadowRoot.querySelector('[data-bv=board]'));
  const btn = host && host.shadowRoot.querySelector('[data-bv=board] [data-act="lang"]');
  if (!btn || btn.hidden) { done([]); return; }
  const out = [];
  let i = 0;
  function one() {
    const t0 = performance.now();
    btn.click();
    requestAnimationFrame(() => setTimeout(() => {
      out.push(performance.now() - t0);
      if (++i < n) setTimeout(one, 600); else done(out);
    }, 0));
  }
  one();
})"""

MOVED = """() => { const h = [...document.querySelectorAll('*')].find(e => e.shadowRoot &&
  e.shadowRoot.querySelector('[data-bv=board]'));
  return !!h && history.length > 5; }"""        # a history entry per step: it has stepped

STEPPER = """(ms) => { let i = 0; window.__bvStepper = setInterval(() => {
  const key = Math.floor(i++ / 5) % 2 ? 'ArrowLeft' : 'ArrowRight';
  document.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true})); }, ms); }"""


class Unavailable(RuntimeError):
    pass


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise Unavailable("the board benchmark needs Debian's chromium (apt-get install chromium)")


def _scenario_dir(tmp: Path, big: dict) -> None:
    import yaml

    from blockviz.teach.workload import Workload, generate, generate_dict
    shutil.copy(ROOT / "scenarios" / "six-blocks.yaml", tmp)
    w = Workload(**big)
    generate(w)                                    # within the format's limits
    (tmp / f"{BIG_ID}.yaml").write_text(yaml.safe_dump(generate_dict(w) | {"id": BIG_ID}, sort_keys=False))


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return sum(int(x) for x in fields[11:15]) / tick


def _server(scenarios: Path, root: Path = ROOT):
    from .wsclient import Server
    return Server(env={"BLOCKVIZ_SCENARIOS": str(scenarios), "PYTHONPATH": str(root)}, root=root)


def _open(browser, url: str, width: int = 1280, height: int = 800):
    """A fresh browser context's page on ``url``, once its board is up; and the seconds from the
    page's load event (its HTML and scripts in) to the board's first painted step, to the board's
    data arriving, and from then to that step."""
    page = browser.new_page(viewport={"width": width, "height": height})   # (a context of its own)
    page.goto(url)
    page.wait_for_selector(READY, timeout=180_000)
    page.wait_for_function("() => performance.getEntriesByName('bv-painted').length > 0", timeout=60_000)
    now, data, painted = page.evaluate(SINCE_LOAD)
    first = painted if painted is not None else now
    split = (data / 1000.0, (painted - data) / 1000.0) if data is not None and painted is not None else None
    return page, first / 1000.0, split


def run(repeat: int, quick: bool, say) -> dict:
    try:
        from playwright.sync_api import sync_playwright
        chromium = _chromium()
    except (ImportError, Unavailable) as e:
        say(f"  skipped: {e}")
        return {"skipped": str(e), "cases": [], "budgets": []}
    big = BIG | ({"num_events": 40} if quick else {})
    keys = 10 if quick else 40
    sessions = 4 if quick else SESSIONS
    cases, load, ab = [], {}, None
    against = os.environ.get("BENCH_BOARD_AGAINST")
    with tempfile.TemporaryDirectory(prefix="bench-board-") as d, sync_playwright() as p:
        _scenario_dir(Path(d), big)
        server = _server(Path(d))
        try:
            browser = p.chromium.launch(executable_path=chromium)
            for sid, start in CASES:
                if quick and sid == BIG_ID:
                    start = 20
                say(f"  {sid}: first paint and {keys} keys, {repeat} page load(s) after a warm-up load")
                page, _, _ = _open(browser, f"{server.url}/?scenario={sid}&step={start}&lang=en")
                page.close()                       # the server's first run of it: not the page's cost
                firsts, splits, cpus, times, toggles = [], [], [], [], []
                for _ in range(repeat):
                    cpu0 = _cpu_s(server.proc.pid)
                    page, first, split = _open(browser, f"{server.url}/?scenario={sid}&step={start}&lang=en")
                    cpus.append(_cpu_s(server.proc.pid) - cpu0)
                    firsts.append(first)
                    if split:
                        splits.append(split)
                    page.wait_for_timeout(800)
                    times += page.evaluate(KEY_TO_PAINT, keys)
                    toggles += page.evaluate(LANG_TOGGLE, 4 if quick else 8)
                    page.close()
                blocks = int(big["num_blocks"]) if sid == BIG_ID else 6
                cases.append({"scenario": sid, "blocks": blocks, "first_paint_s": median(firsts),
                              "first_all_s": firsts,
                              "first_split_s": ([median([a for a, _ in splits]),
                                                 median([b for _, b in splits])] if splits else None),
                              "server_cpu_per_tab_s": median(cpus),
                              "key_ms": {"median": median(times), "worst": max(times), "n": len(times)},
                              "lang_ms": ({"median": median(toggles), "worst": max(toggles),
                                           "n": len(toggles)} if toggles else None)})
            if against:
                say(f"  4,096 blocks side by side with {against}, page loads taking turns")
                ab = _side_by_side(browser, {"old": _server(Path(d), Path(against)), "new": server},
                                   keys, repeat, quick) | {"old_tree": against}
            say(f"  {sessions} sessions stepping at once on six-blocks ({BROWSER_TABS} browser tabs, "
                f"the rest simulated), then with self-check on")
            load = _sessions(browser, server, sessions, 4.0 if quick else 10.0)
            browser.close()
        finally:
            server.close()
    result = {"cases": cases, "load": load, "big_workload": big,
              "side_by_side": ab}
    result["budgets"] = _budgets(cases, load)
    return result


def _side_by_side(browser, servers: dict, keys: int, repeat: int, quick: bool) -> dict:
    """→ to painted step at 4,096 blocks on each server, their page loads taking turns."""
    start = 20 if quick else dict(CASES)[BIG_ID]
    times: dict[str, list[float]] = {name: [] for name in servers}

    def board(server):        # (an older board marks no 'bv-painted': wait for the board only)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{server.url}/?scenario={BIG_ID}&step={start}&lang=en")
        page.wait_for_selector(READY, timeout=180_000)
        return page
    try:
        for server in servers.values():               # warm-up: each server's first run of it
            board(server).close()
        for _ in range(repeat):
            for name, server in servers.items():
                page = board(server)
                page.wait_for_timeout(800)
                times[name] += page.evaluate(KEY_TO_PAINT, keys)
                page.close()
    finally:
        servers["old"].close()
    out = {name: {"median": median(t), "worst": max(t), "n": len(t)} for name, t in times.items()}
    out["ratio_median"] = out["new"]["median"] / out["old"]["median"]
    return out


def _sessions(browser, server, n: int, seconds: float) -> dict:
    from .wsclient import Session

    sent = [0]

    def count(ws) -> None:
        ws.on("framesent", lambda _payload: sent.__setitem__(0, sent[0] + 1))

    tabs = []
    for _ in range(min(n, BROWSER_TABS)):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("websocket", count)
        page.goto(f"{server.url}/?scenario=six-blocks&lang=en")
        page.wait_for_selector(READY, timeout=180_000)
        tabs.append(page)
    sims = []
    for _ in range(n - len(tabs)):           # a tab opening the player: one script run each
        s = Session(server.port)
        s.rerun()
        sims.append(s)
    time.sleep(2.0)                                         # the last runs settle
    frames0, cpu0, wall0 = sent[0], _cpu_s(server.proc.pid), time.perf_counter()
    for page in tabs:
        page.evaluate(STEPPER, 100)
    time.sleep(seconds)          # the simulated tabs step too: a step sends the server nothing
    cpu1, wall1 = _cpu_s(server.proc.pid), time.perf_counter()
    frames = sent[0] - frames0
    moved = 0
    for page in tabs:                  # a tab counts if its board is there and has moved
        try:
            page.evaluate("() => clearInterval(window.__bvStepper)")
            moved += page.evaluate(MOVED) is True
        except Exception:              # noqa: BLE001 - a page the browser dropped counts as not
            pass
    result = {"sessions": n, "browser_tabs": len(tabs), "simulated": len(sims),
              "seconds": wall1 - wall0, "server_cores": (cpu1 - cpu0) / (wall1 - wall0),
              "pages_stepping": moved, "browser_frames_while_stepping": frames}
    result["self_check"] = _self_check(server, sims, seconds)
    for page in tabs:
        page.close()
    for s in sims:
        s.close()
    return result


def _self_check(server, sims: list, seconds: float) -> dict:
    """Every simulated session with self-check on, stepping once every SELF_CHECK_PAUSE_S (their
    starts spread over one pause): the board tells the server each step, one rerun each."""
    for s in sims:
        s.self_check()
    time.sleep(1.0)
    stop, reruns, failed = threading.Event(), [0], []

    def learner(s, offset: float) -> None:
        step = 0
        stop.wait(offset)
        while not stop.is_set():
            step = (step + 1) % 9
            try:
                s.board_step(step)
            except Exception as e:     # noqa: BLE001 - a dropped session is reported, not hidden
                failed.append(repr(e))
                return
            reruns[0] += 1
            stop.wait(SELF_CHECK_PAUSE_S)

    threads = [threading.Thread(target=learner, args=(s, SELF_CHECK_PAUSE_S * i / max(1, len(sims))),
                                daemon=True) for i, s in enumerate(sims)]
    cpu0, wall0, r0 = _cpu_s(server.proc.pid), time.perf_counter(), 0
    for t in threads:
        t.start()
    time.sleep(seconds)
    cpu1, wall1, r1 = _cpu_s(server.proc.pid), time.perf_counter(), reruns[0]
    stop.set()
    for t in threads:
        t.join(timeout=60)
    wall = wall1 - wall0
    return {"sessions": len(sims), "pause_s": SELF_CHECK_PAUSE_S, "seconds": wall,
            "server_cores": (cpu1 - cpu0) / wall, "reruns_per_s": (r1 - r0) / wall,
            "failed": failed[:3]}


def _budgets(cases: list[dict], load: dict) -> list[dict]:
    out = []
    for c in cases:
        where = f"{c['blocks']:,} blocks"
        out.append({"name": f"→ to painted step, median ({where})", "value": c["key_ms"]["median"],
                    "limit": BUDGET_MEDIAN_MS, "met": c["key_ms"]["median"] < BUDGET_MEDIAN_MS, "unit": "ms"})
        out.append({"name": f"→ to painted step, worst ({where})", "value": c["key_ms"]["worst"],
                    "limit": BUDGET_WORST_MS, "met": c["key_ms"]["worst"] < BUDGET_WORST_MS, "unit": "ms"})
        if c.get("lang_ms"):        # (a big pool ships one language: no toggle on the board)
            out.append({"name": f"中文/English toggle to painted board, median ({where})",
                        "value": c["lang_ms"]["median"], "limit": BUDGET_LANG_MS,
                        "met": c["lang_ms"]["median"] < BUDGET_LANG_MS, "unit": "ms"})
        if c["blocks"] <= 32:
            out.append({"name": "first board after the page's load event (a lesson, warm server)",
                        "value": c["first_paint_s"], "limit": BUDGET_FIRST_S,
                        "met": c["first_paint_s"] < BUDGET_FIRST_S, "unit": "s"})
    if load:     # simulated tabs send nothing: only true if the real tabs sent nothing either
        out.append({"name": f"server CPU, {load['sessions']} sessions stepping at once "
                            f"({load['browser_tabs']} browser tabs, {load['simulated']} simulated)",
                    "value": load["server_cores"], "limit": BUDGET_CORES, "unit": "cores",
                    "met": load["server_cores"] < BUDGET_CORES
                    and load["browser_frames_while_stepping"] == 0})
    return out


def render(result: dict) -> str:
    if result.get("skipped"):
        return f"board: skipped ({result['skipped']})"
    def toggle(c: dict) -> str:
        lm = c.get("lang_ms")
        return f"{lm['median']:.1f} / {lm['worst']:.1f} ms" if lm else "—"
    def first(c: dict) -> str:
        split = c.get("first_split_s")
        cpu = c.get("server_cpu_per_tab_s")
        return (f"{c['first_paint_s']:.2f} s" + (f" ({split[0]:.2f} + {split[1]:.2f})" if split else "")
                + (f", server {1000 * cpu:.0f} ms CPU" if cpu is not None else ""))
    rows = [[c["scenario"], f"{c['blocks']:,}", first(c),
             f"{c['key_ms']['median']:.1f} ms", f"{c['key_ms']['worst']:.1f} ms", str(c["key_ms"]["n"]),
             toggle(c)]
            for c in result["cases"]]
    text = table(["scenario", "blocks", "first board (to data + board's fit), median",
                  "→ paint median", "→ paint worst", "keys", "中文/EN median / worst"], rows)
    ab = result.get("side_by_side")
    if ab:
        text += (f"\n4,096 blocks, → paint side by side in this run: {ab['old_tree']} (old) "
                 f"{ab['old']['median']:.1f} ms median / {ab['old']['worst']:.1f} worst, this tree "
                 f"{ab['new']['median']:.1f} / {ab['new']['worst']:.1f} ms ({ab['new']['n']} keys "
                 f"each): new / old {ab['ratio_median']:.2f}x")
    load = result.get("load")
    if load:
        text += (f"\n{load['sessions']} sessions stepping for {load['seconds']:.1f} s "
                 f"({load['browser_tabs']} browser tabs, {load['pages_stepping']} of them seen stepping, "
                 f"{load['browser_frames_while_stepping']} websocket frames sent by them; "
                 f"{load['simulated']} simulated): server {load['server_cores']:.3f} cores")
        sc = load.get("self_check")
        if sc:
            text += (f"\nwith self-check on, {sc['sessions']} simulated sessions each stepping every "
                     f"{sc['pause_s']:g} s: {sc['reruns_per_s']:.1f} reruns/s, server "
                     f"{sc['server_cores']:.2f} cores"
                     + (f" ({len(sc['failed'])} sessions dropped)" if sc["failed"] else ""))
    return text
