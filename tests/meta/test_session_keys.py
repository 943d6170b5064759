"""One place for session keys: every "bv_*" key the app keeps in st.session_state is declared in
blockviz/ui/state.py (with what it holds), and the rest of the code names it from there."""
from __future__ import annotations

import re
from pathlib import Path

from blockviz.ui import state

ROOT = Path(__file__).resolve().parents[2]
KEY = re.compile(r"""["']bv_[a-z_]*["']""")


def test_every_session_key_is_declared_in_ui_state():
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
             for p in sorted((ROOT / "blockviz").rglob("*.py")) if p != ROOT / "blockviz/ui/state.py"
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if KEY.search(line)]
    assert not found, "session keys written outside ui/state.py:\n" + "\n".join(found)


def test_the_declared_keys_are_distinct():
    keys = [v for k, v in vars(state).items() if k.isupper() and isinstance(v, str) and v.startswith("bv_")]
    assert len(keys) > 40 and len(keys) == len(set(keys))
