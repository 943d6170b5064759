"""Fixtures of the trace tests (trace import, capacity replay, sweeps, ``blockviz trace``)."""
from __future__ import annotations

import sys
from pathlib import Path

# --import-mode=importlib puts no test directory on sys.path; the trace tests share trace_helpers.py.
sys.path.insert(0, str(Path(__file__).resolve().parent))
