"""One palette: a colour is written in render/theme.py and nowhere else. Stylesheets and board.js
read it as a CSS custom property (var(--bv-<name>)), Python as theme's constants; every custom
property they name is one the theme emits."""
from __future__ import annotations

import re
from pathlib import Path

from blockviz.render.theme import PALETTE, css_vars

ROOT = Path(__file__).resolve().parents[2]
THEME = ROOT / "blockviz" / "render" / "theme.py"
COLOUR = re.compile(r"#[0-9a-fA-F]{6}\b|#[0-9a-fA-F]{3}\b|\brgba?\(|\bhsla?\(")
SOURCES = [p for p in sorted((ROOT / "blockviz").rglob("*")) if p.suffix in (".py", ".js", ".css")]
NOT_COLOURS = {"scale"}   # custom properties that are not the palette's (--bv-scale: the board's size)


def test_no_colour_is_written_outside_the_theme():
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for p in SOURCES + [ROOT / "app.py"] if p != THEME
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if COLOUR.search(line)]
    assert not found, "colours outside render/theme.py (add them to its PALETTE):\n" + "\n".join(found)


def test_every_custom_property_read_is_in_the_palette():
    used = {m.group(1) for p in SOURCES for m in re.finditer(r"var\(--bv-([a-z0-9-]+)\)", p.read_text())}
    used |= {m.group(1) for m in re.finditer(r"colour\('([a-z0-9-]+)'\)",
                                             (ROOT / "blockviz/render/board.js").read_text())}
    assert used - set(PALETTE) - NOT_COLOURS == set()
    assert len(used & set(PALETTE)) > 30                 # the stylesheets do read it


def test_the_palette_is_emitted_once_per_root():
    text = css_vars()
    assert text.startswith(":root, :host {") and text.count("--bv-") == len(PALETTE)
    assert "--bv-green: #2e7d32;" in text
