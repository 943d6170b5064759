"""Export: the whole scenario as ONE self-contained HTML file — the board, with its data inlined,
stepping offline (no network, no server) — and one step as a PNG: the board's page shot by headless
Chromium (``board_png``). The I/O beside the pure render layer: this module reads the environment
(``BLOCKVIZ_CHROMIUM``), writes temporary files and runs Chromium; the CLI and the app call it.

Everything a scenario file says reaches the HTML through the render functions, which escape it;
the data travels as JSON inside a script element that cannot be closed early (``_inline``).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import PurePath

from blockviz.i18n import HTML_LANG, other_lang, t
from blockviz.render.board import BoardControl, BoardRun, asset, board_css, board_data, is_dense
from blockviz.render.markers import timeline_kinds
from blockviz.render.theme import css_vars, esc
from blockviz.teach.labels import HashLabels

MAX_HTML_STEPS = 2_000     # one file holds every step rendered; past this, export fewer
W, H = 1920, 1080          # a step's PNG: a slide's size


class ExportError(Exception):
    """A one-line reason the export cannot be made (the CLI prints it, exit status 2)."""


# -- HTML -----------------------------------------------------------------------------------
# The board (board.js) in a page of its own: its data inlined as JSON, its stylesheet in its own
# shadow root, exactly as the app mounts it. Nothing is fetched: the CSP forbids it.
PAGE_CSS = css_vars(":root") + """
body { margin: 0; background: var(--bv-paper); }
#bv-host { padding: .6em 1.2em .4em 1.2em; max-width: 1900px; }
.bvx-foot { color: var(--bv-faint); font: .75em sans-serif; padding: 0 1.2em .6em 1.2em; }
"""

BOOT = """
const host = document.getElementById("bv-host");
const shadow = host.attachShadow({ mode: "open" });
const style = document.createElement("style");
style.textContent = document.getElementById("bv-css").textContent;
shadow.appendChild(style);
board({ data: JSON.parse(document.getElementById("bv-data").textContent), parentElement: shadow });
"""

# no network, ever: only inline styles and scripts, images as data: URLs
CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "font-src data:")


def _inline(text: str) -> str:
    """Text safe inside a <script> element (JSON or CSS never closes it early)."""
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def export_html(timeline, *, title: str = "", lang: str = "en", start: int = 0,
                file: str = "", labels: HashLabels | None = None, titles: dict | None = None) -> str:
    """The whole run as one HTML document that steps through it offline: the board, with every
    step inlined (both languages for a lesson-sized pool); ``#step=k`` opens step k. ``file``: the
    scenario's path as the user gave it (errors name it; the page's footer names its file)."""
    n = len(timeline)
    if not 0 <= start < n:
        raise ExportError(f"{file}: step {start} is out of range: this scenario has steps 0 to {n - 1}")
    if n > MAX_HTML_STEPS:
        raise ExportError(f"{file}: {n - 1} steps is too many for one HTML file (at most "
                          f"{MAX_HTML_STEPS - 1}); export a shorter scenario")
    labels = labels or HashLabels.for_timeline(timeline)
    kinds = list(timeline_kinds(timeline))
    run = BoardRun(timeline, labels, kinds, titles or {lang: title})
    langs = [lang] if is_dense(run) else [lang, other_lang(lang)]
    # op frames come from the server: a file has none
    data = dataclasses.replace(board_data(run, langs=langs, whole=True, url="hash", lang=lang),
                               no_frames=True)
    return _page(data, start, board_css(), title=title, lang=lang, file=PurePath(file).name)


def _page(data, start: int, css: str, *, title: str, lang: str, file: str) -> str:
    """The board's offline page: its data (a BoardData) opening at step ``start``, sent as the app
    sends it ({board, control}), and the component's stylesheet, inlined; board.js booted on them."""
    control = BoardControl(goto={"step": int(start), "frame": None, "seq": 0, "run": "export"})
    sent = json.dumps({"board": data.to_dict(), "control": control.to_dict()},   # as the app sends
                      ensure_ascii=False, separators=(",", ":"))
    made = t("x_made", lang, file=file) if file else "blockviz"
    return ("<!DOCTYPE html>\n"
            f'<html lang="{HTML_LANG.get(lang, "en")}"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title or 'blockviz')}</title><style>{PAGE_CSS}</style></head>"
            f'<body><div id="bv-host"></div><div class="bvx-foot">{esc(made)}</div>'
            f'<script type="text/css" id="bv-css">{_inline(css)}</script>'
            f'<script type="application/json" id="bv-data">'
            f"{_inline(sent)}</script>"
            f'<script type="module">{asset("board.js").replace("export default function", "function")}'
            f"{BOOT}</script></body></html>\n")


def export_recording_html(rec, *, lang: str = "en", start: int = 0, words=None) -> str:
    """A KV-event recording (blockviz.live.replay.Recording) as one offline HTML file: the board
    stepping through its batches, both languages; ``#step=k`` opens step k (0: before the first
    batch; k: after batch k)."""
    from blockviz.render.replay import recording_board, replay_css
    data = recording_board(rec, langs=[lang, other_lang(lang)], lang=lang, words=words, url="hash")
    last = data.num_steps - 1
    if not 0 <= start <= last:
        raise ExportError(f"{rec.name}: step {start} is out of range: this recording has steps 0 "
                          f"(before the first batch) to {last} (after its last batch)")
    return _page(data, start, replay_css(), title=t("rp_title", lang, name=rec.name), lang=lang,
                 file=rec.name)


# -- PNG from the board ----------------------------------------------------------------------
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def board_png(html: str, step: int, *, width: int = W, height: int = H, timeout_s: float = 90.0) -> bytes:
    """One step of an exported board (``export_html``) as a PNG, shot by headless Chromium at
    ``width``×``height``: $BLOCKVIZ_CHROMIUM when set (a path), else the first on PATH;
    ExportError when no Chromium is installed or it fails."""
    import os
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path
    browser = os.environ.get("BLOCKVIZ_CHROMIUM") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if browser is None or not (os.path.isfile(browser) and os.access(browser, os.X_OK)):
        raise ExportError("PNG export needs Chromium: install `chromium` (e.g. apt-get install chromium) "
                          "or set BLOCKVIZ_CHROMIUM to its path")
    with tempfile.TemporaryDirectory(prefix="blockviz-png-") as tmp:
        page, out = Path(tmp) / "board.html", Path(tmp) / "step.png"
        page.write_text(html, encoding="utf-8")
        cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
               "--no-first-run", "--disable-extensions", f"--user-data-dir={tmp}/profile",
               f"--window-size={int(width)},{int(height)}", "--virtual-time-budget=3000",
               f"--screenshot={out}", page.as_uri() + f"#step={int(step)}&still&present"]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ExportError(f"PNG export: Chromium took longer than {timeout_s:.0f} s") from None
        if not out.exists():
            text = " ".join(done.stderr.decode("utf-8", "replace").split())
            clipped = text if len(text) <= 300 else text[:300].rsplit(" ", 1)[0] + " …"
            raise ExportError(f"PNG export failed: {clipped}")
        return out.read_bytes()
