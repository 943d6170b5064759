"""Export for slides: one step as a PNG (a plotly figure, written by kaleido), or the whole scenario
as ONE self-contained HTML file that steps through it offline (inline CSS and a few lines of JS, no
network, no server). Pure except ``write_png`` (which needs kaleido and a Chromium).

Everything a scenario file says reaches the HTML through the render functions, which escape it;
the few strings added here are escaped too, and the script holds no scenario data at all: every
step is pre-rendered into its own hidden <section>, and the script only shows one of them.
"""
from __future__ import annotations

from blockviz.i18n import event_label, t
from blockviz.i18n.errors import error_text
from blockviz.render import blocks as rblocks
from blockviz.render.hash_table import hash_table_html
from blockviz.render.narration import engine_did_html, note_html, step_header_html
from blockviz.render.queue import queue_html
from blockviz.render.requests import requests_html
from blockviz.render.slide import H, W, slide_figure
from blockviz.render.theme import css, esc
from blockviz.render.view import step_view
from blockviz.teach.labels import HashLabels

MAX_HTML_STEPS = 2_000     # one file holds every step rendered; past this, export fewer


class ExportError(Exception):
    """A one-line reason the export cannot be made (the CLI prints it, exit status 2)."""


def check_step(timeline, step: int, file: str) -> None:
    last = len(timeline) - 1
    if not 0 <= step <= last:
        raise ExportError(f"{file}: step {step} is out of range: this scenario has steps 0 to {last}")


# -- HTML -----------------------------------------------------------------------------------
EXPORT_CSS = """
<style>
body { margin: 0; font-family: "Source Sans Pro", "Noto Sans", "Noto Sans CJK SC", "Segoe UI",
       Helvetica, Arial, sans-serif; background: #fff; }
.bvx-bar { position: sticky; top: 0; z-index: 5; background: #fff; border-bottom: 1px solid #e3e6e8;
           display: flex; gap: .8em; align-items: center; padding: .55em 1.4em; flex-wrap: wrap; }
.bvx-bar button { font: inherit; font-size: 1.05em; padding: .3em 1em; border-radius: .4em;
                  border: 1px solid #c4c9cf; background: #f6f8fa; cursor: pointer; }
.bvx-bar button:disabled { opacity: .4; cursor: default; }
.bvx-pos { font-weight: 800; font-size: 1.15em; min-width: 8em; }
.bvx-keys { color: #57606a; font-size: .9em; }
.bvx-title { margin-left: auto; color: #57606a; }
main { padding: .8em 1.4em 2em 1.4em; max-width: 1500px; }
.bvx-row { display: grid; grid-template-columns: 3fr 2fr; gap: 1.2em; align-items: start; }
.bvx-two { display: grid; grid-template-columns: 1fr 1fr; gap: 1.2em; align-items: start; }
.bvx-foot { color: #8c959f; font-size: .8em; margin-top: 1.5em; }
.bvx-step > .bv > .bv-h { margin-top: .9em; }
.bvx-step .bvx-two .bv-h { margin-top: .9em; }
@media (max-width: 900px) { .bvx-row, .bvx-two { grid-template-columns: 1fr; } }
</style>
"""

SCRIPT = """
<script>
(function () {
  var steps = document.querySelectorAll("section.bvx-step");
  var pos = document.getElementById("bvx-pos");
  var prev = document.getElementById("bvx-prev"), next = document.getElementById("bvx-next");
  var cur = Number(document.body.dataset.start) || 0;
  function show(k) {
    k = Math.max(0, Math.min(steps.length - 1, k));
    for (var i = 0; i < steps.length; i++) { steps[i].hidden = (i !== k); }
    cur = k;
    pos.textContent = steps[k].dataset.label;
    prev.disabled = (k === 0);
    next.disabled = (k === steps.length - 1);
    if (history.replaceState) { history.replaceState(null, "", "#step=" + k); }
  }
  prev.addEventListener("click", function () { show(cur - 1); });
  next.addEventListener("click", function () { show(cur + 1); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowRight" || e.key === "PageDown") { show(cur + 1); e.preventDefault(); }
    else if (e.key === "ArrowLeft" || e.key === "PageUp") { show(cur - 1); e.preventDefault(); }
    else if (e.key === "Home") { show(0); e.preventDefault(); }
    else if (e.key === "End") { show(steps.length - 1); e.preventDefault(); }
  });
  function hashStep() {
    var m = /step=(\\d+)/.exec(location.hash);
    return m ? Number(m[1]) : null;
  }
  window.addEventListener("hashchange", function () {
    var k = hashStep();
    if (k !== null && k !== cur) { show(k); }
  });
  var first = hashStep();                 // a link to a step opens there
  show(first !== null ? first : cur);
})();
</script>
"""

# no network, ever: only inline styles and scripts, images as data: URLs
CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
       "font-src data:")


def _section(title: str, body: str, hint: str = "") -> str:
    small = f"<small>{esc(hint)}</small>" if hint else ""
    return f'<div class="bv"><div class="bv-h">{esc(title)}{small}</div></div>{body}'


def step_html(timeline, index: int, lang: str, labels: HashLabels, title: str = "") -> str:
    """One step's panels, as the player draws them (header, narration, blocks, queue, hash table,
    requests)."""
    last = len(timeline) - 1
    v = step_view(timeline, index)
    s = v.snapshot
    vocab, bs = timeline.vocab, timeline.block_size
    header = step_header_html(index, last, event_label(s.step, lang), lang, title=title)
    note = s.note.get(lang) if s.note is not None else None
    error = error_text(timeline.error, lang) if timeline.error is not None and index == last else None
    did = engine_did_html(s, lang, labels, vocab, bs)
    n = len(v.state.ref_cnt)
    if rblocks.use_heatmap(n):
        blocks = f'<div class="bv bv-panel bv-muted">{esc(t("x_big_pool", lang, n=f"{n:,}"))}</div>'
    else:
        blocks = rblocks.blocks_html(v.state, labels=labels, vocab=vocab, block_size=bs, lang=lang,
                                     changed=v.changed)
    queue = queue_html(v.state, labels=labels, lang=lang, to_head=v.to_head, to_tail=v.to_tail)
    table = hash_table_html(v.table, labels=labels, state=v.state, lang=lang, added=v.hashes_added,
                            removed=v.hashes_removed)
    reqs = requests_html(s, lang=lang, fresh=v.fresh, changed=v.changed_requests)
    narration = note_html(note, lang, error=error)
    top = f'<div class="bvx-row"><div>{narration}</div><div>{did}</div></div>' if narration else did
    return (header + top + _section(t("gpu_blocks", lang), blocks)
            + _section(t("free_queue", lang), queue, t("free_queue_hint", lang))
            + f'<div class="bvx-two"><div>{_section(t("hash_table", lang), table)}</div>'
              f'<div>{_section(t("requests", lang), reqs)}</div></div>')


def export_html(timeline, *, title: str = "", lang: str = "en", start: int = 0,
                file: str = "", labels: HashLabels | None = None) -> str:
    """The whole run as one HTML document: every step pre-rendered, Prev/Next buttons, ←/→ keys,
    "step k of n"; it opens at ``start``."""
    n = len(timeline)
    if n > MAX_HTML_STEPS:
        raise ExportError(f"{file}: {n - 1} steps is too many for one HTML file (at most "
                          f"{MAX_HTML_STEPS - 1}); export a shorter scenario")
    check_step(timeline, start, file)
    labels = labels or HashLabels.for_timeline(timeline)
    sections = []
    for i in range(n):
        label = t("step_k_of_n", lang, k=i, n=n - 1)
        hidden = "" if i == start else " hidden"
        sections.append(f'<section class="bvx-step" data-step="{i}" data-label="{esc(label)}"{hidden}>'
                        f'{step_html(timeline, i, lang, labels, title)}</section>')
    page_lang = "zh-CN" if lang == "zh" else "en"
    made = t("x_made", lang, file=file) if file else "blockviz"
    return ("<!DOCTYPE html>\n"
            f'<html lang="{page_lang}"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title or 'blockviz')}</title>{css(False)}{EXPORT_CSS}</head>"
            f'<body data-start="{int(start)}"><div class="bvx-bar">'
            f'<button id="bvx-prev" type="button">◀ {esc(t("nav_prev", lang))}</button>'
            f'<span class="bvx-pos" id="bvx-pos">{esc(t("step_k_of_n", lang, k=start, n=n - 1))}</span>'
            f'<button id="bvx-next" type="button">{esc(t("nav_next", lang))} ▶</button>'
            f'<span class="bvx-keys">{esc(t("x_keys", lang))}</span></div>'
            f'<main>{"".join(sections)}<div class="bvx-foot">{esc(made)}</div></main>'
            f"{SCRIPT}</body></html>\n")


# -- PNG ------------------------------------------------------------------------------------
def slide(timeline, index: int, *, title: str = "", lang: str = "en", file: str = "",
          labels: HashLabels | None = None):
    """The plotly figure of one step, 1920×1080."""
    check_step(timeline, index, file)
    return slide_figure(timeline, index, lang=lang, title=title, labels=labels)


def write_png(fig, path: str) -> None:
    """Write the figure as a 1920×1080 PNG with kaleido; ExportError (not a traceback) when
    kaleido or a Chromium to drive is missing."""
    try:
        import kaleido  # noqa: F401 - plotly needs it for PNG
    except ImportError:
        raise ExportError("PNG export needs kaleido: pip install kaleido") from None
    try:
        fig.write_image(path, format="png", width=W, height=H, scale=1)
    except Exception as e:  # noqa: BLE001 - kaleido reports a missing browser in several ways
        text = " ".join(str(e).split())
        if any(w in text.lower() for w in ("chrome", "chromium", "browser")):
            raise ExportError("PNG export needs Chromium, which kaleido drives: install `chromium` "
                              "(e.g. apt-get install chromium) or run `plotly_get_chrome` "
                              f"(kaleido said: {_clip(text, 140)})") from None
        raise ExportError(f"PNG export failed: {_clip(text, 300)}") from None


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n].rsplit(" ", 1)[0] + " …"
