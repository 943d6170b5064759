"""The Author page's panels as HTML: a located error with the lines around it (the bad line
highlighted, a caret under the column), and the format reference generated from the JSON Schema.
Pure; every piece of the user's text is escaped."""
from __future__ import annotations

from collections.abc import Sequence

from blockviz.i18n import t
from blockviz.i18n.errors import localize_error
from blockviz.render.theme import RULE, esc
from blockviz.teach.authoring import Section

# The Author page's rules; the page loads the theme's stylesheet first (its palette: var(--bv-*)).
AUTHOR_CSS = """
<style>
.bv-src { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .85em;
          background: var(--bv-panel); border-radius: .35em; padding: .35em 0; margin: .3em 0 0 0;
          overflow-x: auto; color: var(--bv-ink); }
.bv-src div { white-space: pre; padding: 0 .6em; min-height: 1.3em; }
.bv-src .bv-ln { display: inline-block; min-width: 3.2em; color: var(--bv-muted); user-select: none; }
.bv-src div.bv-bad { background: var(--bv-red-bg); box-shadow: inset .3em 0 0 var(--bv-red);
                     font-weight: 700; }
.bv-src div.bv-caret { color: var(--bv-red); font-weight: 800; min-height: 1em; line-height: 1; }
.bv-errbox { border-left: .3em solid var(--bv-red); background: var(--bv-paper); padding: .2em .7em .5em .7em;
             border-radius: .25em; }
.bv-errhead { font-weight: 800; color: var(--bv-red); font-size: 1.05em; }
.bv-errmsg { font-size: 1.05em; margin: .25em 0; }
.bv-errhint { margin: .2em 0 .35em 0; padding: .25em .5em; background: var(--bv-amber-bg);
              border-radius: .25em; font-size: .95em; }
.bv-errwhere { color: var(--bv-muted); font-size: .9em; }
.bv-errwhere code, .bv-docref code { background: var(--bv-code-bg); padding: 0 .3em; border-radius: .2em; }
.bv-okbox { border-left: .3em solid var(--bv-green); padding: .3em .7em; background: var(--bv-green-bg-free);
            border-radius: .25em; font-weight: 600; }
.bv-warnbox { border-left: .3em solid var(--bv-amber); padding: .3em .7em; background: var(--bv-amber-bg);
              border-radius: .25em; }
.bv-docref h4 { margin: .9em 0 .2em 0; font-size: 1em; }
.bv-docref h5 { margin: .7em 0 .1em 0; font-size: .95em; }
.bv-docref h5 code { font-size: 1.05em; }
.bv-docref table { border-collapse: collapse; width: 100%; font-size: .85em; margin: .2em 0; }
.bv-docref td, .bv-docref th { border-bottom: 1px solid var(--bv-rule); padding: .15em .4em; text-align: left;
                         vertical-align: top; }
.bv-docref th { color: var(--bv-muted); font-weight: 600; }
.bv-docref pre { background: var(--bv-panel); border-radius: .3em; padding: .3em .6em; font-size: .82em;
              margin: .2em 0 .4em 0; white-space: pre-wrap; }
.bv-docref .bv-required { color: var(--bv-red); font-weight: 700; }
.bv-docref p { margin: .1em 0; font-size: .9em; }
.bv-docref .bv-small { font-size: .92em; }

/* the editor: code, not prose */
.st-key-w_author_text textarea { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
    font-size: .86rem; line-height: 1.45; white-space: pre; overflow-wrap: normal; overflow-x: auto;
    tab-size: 2; }
.st-key-snippets button { min-height: 2rem; padding: .05rem .6rem; }
.st-key-snippets button p { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
    font-size: .85rem; }
</style>
"""


EXCERPT_WIDTH = 44     # characters of a line the excerpt box shows without scrolling


def source_excerpt_html(text: str, line: int | None, col: int | None) -> str:
    """The two lines either side of ``line`` (1-based) and that line, numbered, it highlighted, a
    caret at ``col``. When the column lies past EXCERPT_WIDTH, every line is shown from the same
    later column (a "…" where its start was cut), so that the caret is in view."""
    if not line:
        return ""
    lines = text.splitlines() or [""]
    line = max(1, min(line, len(lines)))
    lo, hi = max(1, line - 2), min(len(lines), line + 2)
    cut = max(0, col - 1 - EXCERPT_WIDTH * 2 // 3) if col and col > EXCERPT_WIDTH - 4 else 0
    rows = []
    for n in range(lo, hi + 1):
        cls = ' class="bv-bad"' if n == line else ""
        shown = lines[n - 1] if not cut else "…" + lines[n - 1][cut:]
        rows.append(f'<div{cls} data-line="{n}"><span class="bv-ln">{n}</span>{esc(shown)}</div>')
        if n == line and col:
            rows.append(f'<div class="bv-caret"><span class="bv-ln"></span>'
                        f'{" " * (col - 1 - cut + (1 if cut else 0))}^</div>')
    return f'<div class="bv-src" role="region">{"".join(rows)}</div>'


def error_html(err, text: str, lang: str, *, kept: bool = False, title: str | None = None,
               hint: str | None = None) -> str:
    """A located ScenarioError: the message, what to do (``hint``), where (line, column, field)
    and the excerpt."""
    where = (t("err_where", lang, line=err.line, col=err.col) if err.line
             else t("err_nowhere", lang))
    path = f' · {esc(t("err_path", lang))} <code>{esc(err.path)}</code>' if err.path else ""
    keep = f'<div class="bv-errwhere">{esc(t("err_kept", lang))}</div>' if kept else ""
    head = esc(title if title is not None else t("invalid", lang))
    tip = f'<div class="bv-errhint">{esc(hint)}</div>' if hint else ""
    return (f'<div class="bv bv-errbox" role="alert" data-line="{err.line or ""}">'
            f'<div class="bv-errhead">{head}</div>'
            f'<div class="bv-errmsg">{esc(localize_error(err.message, lang))}</div>{tip}'
            f'<div class="bv-errwhere">{esc(where)}{path}</div>'
            f'{source_excerpt_html(text, err.line, err.col)}{keep}</div>')


def ok_html(message: str) -> str:
    return f'<div class="bv bv-okbox" role="status">✓ {esc(message)}</div>'


def warn_html(message: str) -> str:
    return f'<div class="bv bv-warnbox">{esc(message)}</div>'


def _fields_table(fields, lang: str) -> str:
    if not fields:
        return ""
    head = (f'<tr><th>{esc(t("err_path", lang))}</th><th>{esc(t("ref_type", lang))}</th>'
            f'<th>{esc(t("ref_default", lang))}</th></tr>')
    rows = []
    for f in fields:
        default = (f'<span class="bv-required">{esc(t("ref_required", lang))}</span>' if f.required
                   else f"<code>{esc(f.default)}</code>")
        doc = f.doc(lang)
        desc = f'<br><span class="bv-small">{esc(doc)}</span>' if doc else ""
        rows.append(f"<tr><td><code>{esc(f.name)}</code>{desc}</td><td>{esc(f.type)}</td>"
                    f"<td>{default}</td></tr>")
    return f'<table>{head}{"".join(rows)}</table>'


def _example(yaml_text: str, lang: str) -> str:
    if not yaml_text:
        return ""
    return f'<p class="bv-muted">{esc(t("ref_example", lang))}</p><pre>{esc(yaml_text.rstrip())}</pre>'


def reference_html(sections: Sequence[Section], lang: str) -> str:
    """The whole reference: the file, config, events (what each does, its fields, an example)
    and prompt parts."""
    out = []
    heading = None
    for s in sections:
        group, _, name = s.key.partition(":")
        if not name:          # the file, config, model, connector, scheduler: a section of its own
            out.append(f"<h4>{esc(t('ref_sec_' + group, lang))}</h4>")
            out.append(_fields_table(s.fields, lang) + _example(s.example, lang))
            continue
        if group != heading:  # the events, then the prompt parts: one heading each
            out.append(f"<h4>{esc(t(f'ref_sec_{group}s', lang))}</h4>")
            heading = group
        help_key = ("evh_" if group == "event" else "ph_") + name
        table = group == "part" or name in ("arrive", "decode")
        bare = ""
        if group == "event" and not s.fields:
            bare = f' {esc(t("ref_bare", lang))}'
        elif not table:
            bare = f' {esc(t("ref_value", lang))} <code>{esc(s.fields[0].type)}</code>'
            if s.fields[0].doc(lang):
                bare += f' <span class="bv-small">{esc(s.fields[0].doc(lang))}</span>'

        out.append(f'<h5 data-ref="{esc(s.key)}"><code>{esc(name)}</code></h5>'
                   f'<p>{esc(t(help_key, lang))}{bare}</p>'
                   f'{_fields_table(s.fields if table else (), lang)}'
                   f'{_example(s.example, lang)}')
    return f'<div class="bv bv-docref">{"".join(out)}</div>'


def iframe(url: str, title: str) -> str:
    """An ``<iframe>`` tag for a course page (``url`` should carry ``&embed=true``)."""
    return (f'<iframe src="{esc(url)}" title="{esc(title)}" width="100%" height="720" '
            f'style="border:1px solid {RULE};border-radius:6px" loading="lazy"></iframe>')
